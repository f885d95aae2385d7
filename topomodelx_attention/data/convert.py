"""Conversion between TopoNetX complexes (or networkx graphs) and :class:`ComplexData`.

Cell order
----------
The order of the cells of each rank is the order of TopoNetX's matrices (``index=True``):

* vertices sorted by label (labels must be mutually comparable);
* edges as sorted vertex pairs ``(u, v)``, ``u < v``, in lexicographic order, oriented
  ``u → v`` (``B_1`` has ``-1`` at ``u`` and ``+1`` at ``v``);
* 2-cells of a cell complex in insertion order, oriented by their vertex sequence;
* simplices of a simplicial complex as sorted vertex tuples, lexicographically, with the
  standard alternating-sign boundary;
* cells of a combinatorial complex in TopoNetX's order (unoriented); vertices in TopoNetX's
  order too. ``B_r`` is the subset relation between consecutive ranks and the vertex sets of
  the cells are stored as ``vertex_incidence_r``, so :func:`to_toponetx` rebuilds every cell.

An empty complex (no vertex) becomes a complex with 0-row tensors and ``shape`` of zeros.

Features travel with their cells: ``x_r[i]`` belongs to the ``i``-th cell of that order.
:func:`to_toponetx` relabels vertices ``0..n_0 - 1`` in this order.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
import toponetx as tnx
import torch

from topomodelx_attention.data.complex_data import ComplexData
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.data.scipy_sparse import torch_to_scipy

__all__ = ["from_toponetx", "to_toponetx"]

ComplexLike = nx.Graph | tnx.CellComplex | tnx.SimplicialComplex | tnx.CombinatorialComplex


def _sorted_nodes(nodes: Iterable[Hashable]) -> list[Hashable]:
    nodes = list(nodes)
    try:
        return sorted(nodes)
    except TypeError as error:
        raise TypeError(
            "vertex labels must be mutually comparable (TopoNetX orders vertices by sorting); "
            "relabel them, e.g. with networkx.convert_node_labels_to_integers"
        ) from error


def _graph_structure(graph: nx.Graph) -> tuple[list[list[Hashable]], list[sp.csr_matrix]]:
    if graph.is_directed():
        raise TypeError("from_toponetx expects an undirected graph; use graph.to_undirected()")
    if graph.is_multigraph():
        raise TypeError("multigraphs are not supported; collapse parallel edges first")
    nodes = _sorted_nodes(graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    pairs = []
    for u, v in graph.edges:
        if u == v:
            raise ValueError(f"self-loop at vertex {u!r}: a cell complex has no loops")
        a, b = sorted((position[u], position[v]))
        pairs.append((a, b))
    pairs.sort()
    edges = [[nodes[a], nodes[b]] for a, b in pairs]
    n_edges = len(pairs)
    rows = np.array([p for pair in pairs for p in pair], dtype=np.int64)
    cols = np.repeat(np.arange(n_edges), 2)
    vals = np.tile([-1.0, 1.0], n_edges)
    b1 = sp.csr_matrix((vals, (rows, cols)), shape=(len(nodes), n_edges))
    return [[[n] for n in nodes], edges], [b1]


def _is_empty(complex_: tnx.CellComplex | tnx.SimplicialComplex | tnx.CombinatorialComplex) -> bool:
    """Whether a TopoNetX complex has no vertex (TopoNetX fails on several queries then)."""
    shape = tuple(complex_.shape)
    return int(complex_.dim) < 0 or len(shape) == 0 or int(shape[0]) == 0


def _toponetx_structure(
    complex_: tnx.CellComplex | tnx.SimplicialComplex | tnx.CombinatorialComplex,
) -> tuple[list[list[Hashable]], list[sp.spmatrix | Coo], bool, list[Coo] | None]:
    """Cells per rank (vertex lists), boundaries and (combinatorial) vertex incidences."""
    if isinstance(complex_, tnx.CombinatorialComplex):
        return _combinatorial_structure(complex_)
    if _is_empty(complex_):
        return [[]], [], True, None
    dim = int(complex_.dim)
    if dim == 0:
        nodes = _sorted_nodes(_node_labels(complex_))
        return [[[n] for n in nodes]], [], True, None
    boundaries: list[sp.spmatrix | Coo] = []
    cells: list[list[list[Hashable]]] = []
    for rank in range(1, dim + 1):
        rows, cols, matrix = complex_.incidence_matrix(rank, signed=True, index=True)
        if rank == 1:
            cells.append([_vertices(key) for key in rows])
        cells.append([_vertices(key) for key in cols])
        boundaries.append(sp.csr_matrix(matrix, dtype=np.float64))
    return cells, boundaries, True, None


def _combinatorial_structure(
    complex_: tnx.CombinatorialComplex,
) -> tuple[list[list[Hashable]], list[Coo], bool, list[Coo]]:
    """Cells, unsigned boundaries and vertex incidences of a combinatorial complex.

    Cells of each rank are in TopoNetX's order (``skeleton(rank)``, the order of its
    ``incidence_matrix(rank - 1, rank, index=True)``). ``B_r[a, b] = 1`` when the (r-1)-cell
    ``a`` is a subset of the r-cell ``b`` (TopoNetX's incidence); it is computed here, also when
    rank ``r - 1`` has no cells (TopoNetX returns a placeholder then). The vertex sets of the
    cells are kept as ``vertex_incidence`` (``(n_0, n_r)``): a cell of a combinatorial complex
    need not be the union of its faces one rank below.
    """
    if _is_empty(complex_):
        return [[]], [], False, [Coo.build([], [], [], (0, 0))]
    dim = int(complex_.dim)
    cells = [[_vertices(cell) for cell in complex_.skeleton(rank)] for rank in range(dim + 1)]
    position = {vertices[0]: i for i, vertices in enumerate(cells[0])}
    n0 = len(cells[0])
    vertex_incidence = []
    for rank_cells in cells:
        lengths = np.fromiter((len(c) for c in rank_cells), dtype=np.int64, count=len(rank_cells))
        rows = np.fromiter((position[v] for c in rank_cells for v in c), dtype=np.int64, count=int(lengths.sum()))
        cols = np.repeat(np.arange(len(rank_cells)), lengths)
        vertex_incidence.append(Coo.build(rows, cols, np.ones(rows.size), (n0, len(rank_cells))))
    boundaries = []
    for rank in range(1, dim + 1):
        # shared vertices of (r-1)-cell a and r-cell b; a ⊂ b when they share all of a's
        shared = vertex_incidence[rank - 1].T.matmul(vertex_incidence[rank])
        sizes = np.fromiter((len(c) for c in cells[rank - 1]), dtype=np.int64, count=len(cells[rank - 1]))
        keep = shared.vals == sizes[shared.rows]
        boundaries.append(
            Coo(shared.rows[keep], shared.cols[keep], np.ones(int(keep.sum())), shared.shape)
        )
    return cells, boundaries, False, vertex_incidence


def _node_labels(complex_: Any) -> list[Hashable]:
    labels = []
    for node in complex_.nodes:
        labels.append(_vertices(node)[0] if isinstance(node, tuple | frozenset) else node)
    return labels


def _vertices(key: Hashable) -> list[Hashable]:
    """Vertex list of a TopoNetX index key (node, tuple or frozenset)."""
    if isinstance(key, frozenset):
        return _sorted_nodes(key)
    if isinstance(key, tuple):
        return list(key)
    if hasattr(key, "elements"):
        return list(key.elements)
    return [key]


def _attribute_lookup(
    complex_: ComplexLike, name: str, rank: int
) -> dict[frozenset | tuple | Hashable, Any]:
    """Read attribute ``name`` of the cells of ``rank`` keyed by a canonical cell key."""
    if isinstance(complex_, nx.Graph):
        if rank == 0:
            raw = nx.get_node_attributes(complex_, name)
            return {frozenset([k]): v for k, v in raw.items()}
        raw = nx.get_edge_attributes(complex_, name)
        return {frozenset(k): v for k, v in raw.items()}
    if isinstance(complex_, tnx.SimplicialComplex):
        raw = complex_.get_simplex_attributes(name, rank)
    elif isinstance(complex_, tnx.CellComplex) and rank == 0:
        raw = complex_.get_node_attributes(name)
    elif isinstance(complex_, tnx.CellComplex):
        raw = complex_.get_cell_attributes(name, rank)
    else:
        # CombinatorialComplex.get_cell_attributes fails in TopoNetX 0.2; read the cells' dicts.
        raw = {cell: complex_[cell][name] for cell in complex_.skeleton(rank) if name in complex_[cell]}
    out = {}
    for key, value in raw.items():
        vertices = _vertices(key) if not isinstance(key, list) else key
        out[_canonical(vertices, rank, complex_)] = value
    return out


def _canonical(vertices: list[Hashable], rank: int, complex_: ComplexLike) -> Hashable:
    """Key identifying a cell: its vertex set, or its cyclic vertex sequence for 2-cells."""
    if isinstance(complex_, tnx.CellComplex) and rank == 2:
        # A 2-cell of a cell complex is a cycle: equal up to rotation and reflection.
        seq = list(vertices)
        start = seq.index(min(seq, key=_sort_key))
        forward = seq[start:] + seq[:start]
        backward = [forward[0], *forward[1:][::-1]]
        return tuple(min(forward, backward, key=lambda s: [_sort_key(v) for v in s]))
    return frozenset(vertices)


def _sort_key(value: Hashable) -> Any:
    return (type(value).__name__, value)


def from_toponetx(
    complex_: ComplexLike,
    features: Mapping[int, Any] | None = None,
    *,
    feature_name: str | None = None,
    neighborhoods: Iterable[str] | None = None,
    max_rank: int | None = None,
    dtype: torch.dtype = torch.float32,
    **attributes: Any,
) -> ComplexData:
    """Convert a TopoNetX complex or a networkx graph into a :class:`ComplexData`.

    Parameters
    ----------
    complex_ : networkx.Graph or toponetx.CellComplex or toponetx.SimplicialComplex or toponetx.CombinatorialComplex
        The complex. A graph is a 1-dimensional complex (vertices and edges).
    features : mapping of int to array-like or str, optional
        Per-rank features ``{rank: (n_rank, d) array}`` in the cell order described in the
        module docstring, or ``{rank: "attribute name"}`` to read a cell attribute.
    feature_name : str, optional
        Read this cell attribute on every rank where at least one cell has it (every cell of
        that rank must then have it). Ranks without it get no ``x_r``.
    neighborhoods : iterable of str, optional
        Neighbourhoods to build. Default: all but ``vertex_incidence`` for oriented complexes
        (graphs, cell and simplicial complexes); the unoriented ones and ``vertex_incidence``
        (the vertex sets of the cells, which :func:`to_toponetx` needs) for combinatorial ones.
    max_rank : int, optional
        Pad the complex with empty ranks up to ``max_rank`` so that complexes of different
        dimensions batch together (must be at least the complex's dimension).
    dtype : torch.dtype, default=torch.float32
        Dtype of neighbourhoods and floating-point features.
    **attributes
        Extra attributes such as ``y``.

    Returns
    -------
    ComplexData
        The complex; see :mod:`topomodelx_attention.data.complex_data` for its keys.
    """
    vertex_incidence: list[Coo] | None = None
    if isinstance(complex_, nx.Graph):
        cells, boundaries = _graph_structure(complex_)
        oriented = True
    elif isinstance(complex_, tnx.CellComplex | tnx.SimplicialComplex | tnx.CombinatorialComplex):
        cells, boundaries, oriented, vertex_incidence = _toponetx_structure(complex_)
    else:
        raise TypeError(
            "from_toponetx expects a networkx.Graph, toponetx.CellComplex, "
            f"toponetx.SimplicialComplex or toponetx.CombinatorialComplex, got {type(complex_)!r}"
        )
    dim = len(cells) - 1
    if max_rank is not None:
        if max_rank < dim:
            raise ValueError(f"max_rank={max_rank} is below the complex's dimension {dim}")
        for rank in range(dim + 1, max_rank + 1):
            cells.append([])
            boundaries.append(sp.csr_matrix((len(cells[rank - 1]), 0)))
            if vertex_incidence is not None:
                vertex_incidence.append(Coo.build([], [], [], (len(cells[0]), 0)))
    shape = [len(c) for c in cells]

    rank_features: dict[int, Any] = {}
    for rank, value in (features or {}).items():
        if rank >= len(shape):
            raise ValueError(f"features given for rank {rank}, but the complex has ranks 0..{dim}")
        rank_features[rank] = _read_attribute(complex_, cells, value, rank) if isinstance(value, str) else value
    if feature_name is not None:
        for rank in range(min(dim, 2 if isinstance(complex_, tnx.CellComplex) else dim) + 1):
            if rank in rank_features:
                continue
            if _attribute_lookup(complex_, feature_name, rank):
                rank_features[rank] = _read_attribute(complex_, cells, feature_name, rank)
    return ComplexData.from_boundaries(
        boundaries,
        shape,
        rank_features,
        neighborhoods,
        oriented,
        dtype,
        vertex_incidence=vertex_incidence,
        **attributes,
    )


def _read_attribute(
    complex_: ComplexLike, cells: list[list[list[Hashable]]], name: str, rank: int
) -> np.ndarray:
    lookup = _attribute_lookup(complex_, name, rank)
    rows = []
    for vertices in cells[rank]:
        key = _canonical(vertices, rank, complex_)
        if key not in lookup:
            raise ValueError(
                f"cell {vertices} of rank {rank} has no attribute {name!r}; every cell of a rank "
                "with features needs one"
            )
        rows.append(np.atleast_1d(np.asarray(lookup[key])))
    if not rows:
        return np.zeros((0, 1))
    return np.stack(rows)


def _cycle_from_boundary(edges: list[tuple[int, int]], signs: list[float]) -> list[int]:
    """Vertex cycle of a 2-cell from its oriented boundary edges ``(u, v)``, ``u < v``."""
    successor: dict[int, int] = {}
    for (u, v), sign in zip(edges, signs):
        tail, head = (u, v) if sign > 0 else (v, u)
        if tail in successor:
            raise ValueError("a 2-cell's boundary is not a simple cycle; cannot rebuild the cell")
        successor[tail] = head
    start = min(successor)
    cycle = [start]
    while (nxt := successor[cycle[-1]]) != start:
        cycle.append(nxt)
        if len(cycle) > len(edges):
            raise ValueError("a 2-cell's boundary is not a single cycle; cannot rebuild the cell")
    if len(cycle) != len(edges):
        raise ValueError("a 2-cell's boundary is not a single cycle; cannot rebuild the cell")
    return cycle


def to_toponetx(
    data: ComplexData, complex_type: str = "cell", feature_name: str = "x"
) -> tnx.CellComplex | tnx.SimplicialComplex | tnx.CombinatorialComplex:
    """Convert a (single) :class:`ComplexData` back into a TopoNetX complex.

    Vertices are labelled ``0..n_0 - 1`` in the data's vertex order; features ``x_r`` are set as
    the cell attribute ``feature_name``: a number for one feature per cell, else the cell's
    row (a 1-D array, also of length 0 for zero-width features ``(n_r, 0)``), so that
    ``from_toponetx(..., feature_name=feature_name)`` reads back ``x_r`` with its width. A
    rank without cells has nothing to carry its (0-row) ``x_r``.

    Parameters
    ----------
    data : ComplexData
        One complex (not a batch of several).
    complex_type : {"cell", "simplicial", "combinatorial"}, default="cell"
        Which TopoNetX class to build. ``"cell"`` needs ``max_rank <= 2`` and
        ``signed_incidence_2`` (2-cells are rebuilt as oriented cycles).
    feature_name : str, default="x"
        Attribute name for the features.

    Returns
    -------
    toponetx.CellComplex or toponetx.SimplicialComplex or toponetx.CombinatorialComplex
        The complex.
    """
    if not isinstance(data, ComplexData):
        raise TypeError(f"to_toponetx expects a ComplexData, got {type(data)!r}")
    if "batch_0" in data and data.batch_0.numel() and int(data.batch_0.max()) > 0:
        raise ValueError("to_toponetx converts one complex; split the batch with to_data_list()")
    if complex_type not in ("cell", "simplicial", "combinatorial"):
        raise ValueError(
            f"complex_type must be 'cell', 'simplicial' or 'combinatorial', got {complex_type!r}"
        )
    max_rank = data.max_rank
    n0 = data.num_cells(0)
    unsigned = data.boundary_matrices(signed=False)
    vertex_sets: list[list[list[int]]] = [[[v] for v in range(n0)]]
    for rank in range(1, max_rank + 1):
        vc = torch_to_scipy(data.vertex_cells(rank)).tocsc()
        vertex_sets.append(
            [sorted(vc.indices[vc.indptr[c] : vc.indptr[c + 1]].tolist()) for c in range(vc.shape[1])]
        )

    def features(rank: int) -> dict[int, Any]:
        key = f"x_{rank}"
        if key not in data:
            return {}
        rows = data[key].detach().cpu().numpy()
        if rows.ndim == 1:
            rows = rows[:, None]
        # one feature: a scalar; several or none (width 0): the row array, which
        # from_toponetx(..., feature_name=...) reads back with its width
        return {i: (row.item() if row.size == 1 else row) for i, row in enumerate(rows)}

    if complex_type == "cell":
        simplicial = _is_simplicial(vertex_sets)
        holders = "'simplicial' or 'combinatorial'" if simplicial else "'combinatorial'"
        if max_rank > 2:
            raise ValueError(
                f"to_toponetx(complex_type='cell'): this complex has cells of rank {max_rank}, "
                f"but toponetx.CellComplex holds ranks up to 2; use complex_type={holders}"
            )
        for c, cell in enumerate(vertex_sets[1] if max_rank >= 1 else []):
            if len(cell) != 2:
                raise ValueError(
                    f"to_toponetx(complex_type='cell'): rank-1 cell {c} has {len(cell)} "
                    f"vertices {cell}, but an edge of a toponetx.CellComplex joins exactly 2 "
                    f"(a hypergraph-shaped complex); use complex_type={holders}"
                )
        complex_ = tnx.CellComplex()
        for v in range(n0):
            complex_.add_node(v)
        if max_rank >= 1:
            for u, v in vertex_sets[1]:
                complex_.add_edge(u, v)
        if max_rank == 2 and data.num_cells(2):
            if "signed_incidence_2" not in data:
                raise ValueError(
                    "to_toponetx(complex_type='cell'): the 2-cells of a toponetx.CellComplex are "
                    "oriented cycles, rebuilt from 'signed_incidence_2', which this complex lacks "
                    f"(rank-2 cell 0 has vertices {vertex_sets[2][0]}; a combinatorial complex "
                    "carries no orientation, and a cell or simplicial complex converted with "
                    "neighborhoods= needs 'signed_incidence' among them); use "
                    f"complex_type={holders}"
                )
            b2 = torch_to_scipy(data.neighborhood("signed_incidence", 2)).tocsc()
            b1 = unsigned[0].tocsc()
            for c in range(b2.shape[1]):
                lo, hi = b2.indptr[c], b2.indptr[c + 1]
                edge_ids, signs = b2.indices[lo:hi], b2.data[lo:hi]
                edges = [tuple(sorted(b1.indices[b1.indptr[e] : b1.indptr[e + 1]].tolist())) for e in edge_ids]
                try:
                    cycle = _cycle_from_boundary(edges, list(signs))
                except ValueError as error:
                    raise ValueError(
                        f"to_toponetx(complex_type='cell'): rank-2 cell {c} (vertices "
                        f"{vertex_sets[2][c]}, boundary edges {edges}): {error}; use "
                        f"complex_type={holders}"
                    ) from error
                complex_.add_cell(cycle, rank=2)
        for rank in range(max_rank + 1):
            values = features(rank)
            if not values:
                continue
            if rank == 0:
                complex_.set_node_attributes({v: val for v, val in values.items()}, name=feature_name)
            else:
                keys = _cell_keys(complex_, rank)
                complex_.set_cell_attributes({keys[i]: val for i, val in values.items()}, rank=rank, name=feature_name)
        return complex_

    if complex_type == "simplicial":
        complex_ = tnx.SimplicialComplex()
        for v in range(n0):
            complex_.add_simplex([v])
        for rank in range(1, max_rank + 1):
            for simplex in vertex_sets[rank]:
                if len(simplex) != rank + 1:
                    raise ValueError(
                        f"to_toponetx(complex_type='simplicial'): rank-{rank} cell "
                        f"{vertex_sets[rank].index(simplex)} has {len(simplex)} vertices "
                        f"{simplex}, but a {rank}-simplex has {rank + 1}: not a simplicial "
                        "complex; use complex_type='combinatorial'"
                    )
                complex_.add_simplex(simplex)
        for rank in range(max_rank + 1):
            values = features(rank)
            if values:
                complex_.set_simplex_attributes(
                    {tuple(vertex_sets[rank][i]): val for i, val in values.items()}, name=feature_name
                )
        return complex_

    complex_ = tnx.CombinatorialComplex()
    for rank in range(max_rank + 1):
        for cell in vertex_sets[rank]:
            complex_.add_cell(cell, rank=rank)
    for rank in range(max_rank + 1):
        values = features(rank)
        if values:
            complex_.set_cell_attributes(
                {frozenset(vertex_sets[rank][i]): {feature_name: val} for i, val in values.items()}
            )
    return complex_


def _is_simplicial(vertex_sets: list[list[list[int]]]) -> bool:
    """Whether every rank-r cell has r + 1 vertices and all its faces are cells one rank below."""
    below = {frozenset(cell) for cell in vertex_sets[0]}
    for rank in range(1, len(vertex_sets)):
        cells = [frozenset(cell) for cell in vertex_sets[rank]]
        for cell in cells:
            if len(cell) != rank + 1 or any(cell - {v} not in below for v in cell):
                return False
        below = set(cells)
    return True


def _cell_keys(complex_: tnx.CellComplex, rank: int) -> list[Hashable]:
    """Cell keys of ``rank`` in TopoNetX's matrix order."""
    _, cols, _ = complex_.incidence_matrix(rank, index=True)
    return list(cols)
