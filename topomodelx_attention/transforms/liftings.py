"""Graph → complex liftings as PyG transforms (``transform(data) -> ComplexData``).

Both liftings build the boundary matrices directly with NumPy index arithmetic and the
neighbourhoods with sparse algebra (:func:`~topomodelx_attention.data.build_neighborhoods`);
TopoNetX is not involved, which makes lifting a data set fast. The cell order is the one of
:mod:`topomodelx_attention.data.convert`: vertices as in the graph, edges ``(u, v)``, ``u < v``,
lexicographically, higher cells sorted by (size, vertex tuple).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from topomodelx_attention.data import ComplexData
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.transforms.feature_lifting import FeatureLifting
from topomodelx_attention.transforms.graph_checks import (
    UndirectedGraph,
    graph_num_nodes,
    undirected_graph,
)

__all__ = [
    "MAX_CYCLES",
    "CellCycleLifting",
    "CycleLimitError",
    "SimplicialCliqueLifting",
    "edge_boundary",
    "lift_graph",
]

MAX_CYCLES: int = 10_000
"""Default ``max_cycles`` of :class:`CellCycleLifting`: most chordless cycles of one graph.

Molecules have a handful; the 25-vertex, 110-edge graph of ``benchmarks/positional_encodings.py``
has 1,339 up to length 6. Their number grows exponentially with the density: ``G(40, 0.5)``
has 22,521 (6 GB, 50 s to lift) and ``G(60, 0.5)`` millions up to length 6."""


class CycleLimitError(ValueError):
    """A graph has more chordless cycles than ``max_cycles`` (:class:`CellCycleLifting`).

    Attributes
    ----------
    graph : int or None
        Index of the graph inside the disjoint union being lifted (``None``: a single graph).
    """

    def __init__(self, template: str, graph: int | None, where: str | None = None) -> None:
        self.template = template
        self.graph = graph
        where = where or ("this graph" if graph is None else f"graph {graph} of the union")
        super().__init__(template.format(where=where))

    def naming(self, where: str) -> CycleLimitError:
        """Return the same error with the graph named ``where`` (its index in ``lift_many``)."""
        return CycleLimitError(self.template, self.graph, where)

_GRAPH_KEYS = ("x", "edge_index", "edge_attr", "num_nodes", "batch", "ptr")


def edge_boundary(num_nodes: int, edges: np.ndarray) -> Coo:
    """Signed ``B_1`` of shape ``(n_0, n_1)``: ``-1`` at ``u`` and ``+1`` at ``v`` for edge ``u → v``.

    Parameters
    ----------
    num_nodes : int
        Number of vertices.
    edges : numpy.ndarray, shape = (n_edges, 2)
        Oriented edges.

    Returns
    -------
    Coo, shape = (num_nodes, n_edges)
        The boundary matrix.
    """
    n_edges = edges.shape[0]
    rows = edges.reshape(-1)
    cols = np.repeat(np.arange(n_edges), 2)
    vals = np.tile(np.array([-1.0, 1.0]), n_edges)
    return Coo.build(rows, cols, vals, (num_nodes, n_edges))


def _canonical_cycle(cycle: Sequence[int]) -> tuple[int, ...]:
    """Rotate a vertex cycle to start at its smallest vertex, towards the smaller neighbour."""
    seq = list(cycle)
    start = seq.index(min(seq))
    seq = seq[start:] + seq[:start]
    if len(seq) > 2 and seq[-1] < seq[1]:
        seq = [seq[0], *seq[1:][::-1]]
    return tuple(seq)


def _cycle_boundary(num_nodes: int, edges: np.ndarray, cycles: list[tuple[int, ...]]) -> Coo:
    """Signed ``B_2`` of the 2-cells bounded by ``cycles`` (each oriented by its vertex order)."""
    n_edges = edges.shape[0]
    if not cycles:
        return Coo.build([], [], [], (n_edges, 0))
    lengths = np.fromiter((len(c) for c in cycles), dtype=np.int64, count=len(cycles))
    tails = np.fromiter((v for c in cycles for v in c), dtype=np.int64, count=int(lengths.sum()))
    heads = np.fromiter(
        (v for c in cycles for v in (*c[1:], c[0])), dtype=np.int64, count=int(lengths.sum())
    )
    edge_keys = edges[:, 0] * num_nodes + edges[:, 1]  # sorted, as edges are
    low, high = np.minimum(tails, heads), np.maximum(tails, heads)
    edge_ids = np.searchsorted(edge_keys, low * num_nodes + high)
    signs = np.where(tails < heads, 1.0, -1.0)
    cols = np.repeat(np.arange(len(cycles)), lengths)
    return Coo.build(edge_ids, cols, signs, (n_edges, len(cycles)))


def _simplex_boundary(faces: np.ndarray, simplices: np.ndarray, num_nodes: int) -> Coo:
    """Signed boundary of sorted ``simplices`` (k+1 vertices) onto sorted ``faces`` (k vertices)."""
    n_faces, n_simplices = faces.shape[0], simplices.shape[0]
    if n_simplices == 0:
        return Coo.build([], [], [], (n_faces, 0))
    k1 = simplices.shape[1]
    weights = num_nodes ** np.arange(k1 - 2, -1, -1, dtype=np.int64)
    face_keys = faces @ weights
    rows, vals = [], []
    for i in range(k1):
        sub = np.delete(simplices, i, axis=1)
        rows.append(np.searchsorted(face_keys, sub @ weights))
        vals.append(np.full(n_simplices, (-1.0) ** i))
    cols = np.tile(np.arange(n_simplices), k1)
    return Coo.build(np.concatenate(rows), cols, np.concatenate(vals), (n_faces, n_simplices))


def lift_graph(
    graph: UndirectedGraph,
    boundaries: list[Coo],
    source: Data,
    neighborhoods: Iterable[str] | None,
    feature_lifting: FeatureLifting,
    keep_edge_index: bool,
    node_batch: np.ndarray | None = None,
    num_graphs: int | None = None,
) -> ComplexData:
    """Assemble a :class:`ComplexData` from a validated graph and its higher boundaries.

    Parameters
    ----------
    graph : UndirectedGraph
        The canonical graph (vertices, edges, features).
    boundaries : list of Coo
        ``[B_1, B_2, ...]``, signed.
    source : torch_geometric.data.Data
        The input graph; its graph-level attributes (``y``, ...) are copied.
    neighborhoods : iterable of str or None
        Neighbourhoods to build.
    feature_lifting : FeatureLifting
        How to fill features of cells without them.
    keep_edge_index : bool
        Also store the input ``edge_index`` (for graph baselines on the same data).
    node_batch : numpy.ndarray, optional
        Graph index of every vertex when ``graph`` is a disjoint union of several graphs
        (then the result is their batch, and ``source`` attributes are not copied).
    num_graphs : int, optional
        Number of graphs of the union (with ``node_batch``): graphs without any vertex still
        give one (empty) complex each.

    Returns
    -------
    ComplexData
        The lifted complex (or batch of complexes).
    """
    shape = [graph.num_nodes] + [b.shape[1] for b in boundaries]
    batch = None
    if node_batch is not None:
        batch = [node_batch]
        for b in boundaries:  # a cell belongs to the graph of any of its faces
            cell_batch = np.zeros(b.shape[1], dtype=np.int64)
            cell_batch[b.cols] = batch[-1][b.rows]
            batch.append(cell_batch)
        batch = [torch.from_numpy(v) for v in batch]
    features = {}
    if graph.x is not None:
        features[0] = graph.x
    if graph.edge_attr is not None:
        features[1] = graph.edge_attr
    extra = {}
    if node_batch is None:
        extra = {key: source[key] for key in source.keys() if key not in _GRAPH_KEYS}
        if keep_edge_index:
            extra["edge_index"] = graph.edge_index
    data = ComplexData.from_boundaries(
        boundaries,
        shape,
        features,
        neighborhoods,
        batch=batch,
        num_complexes=num_graphs if node_batch is not None else None,
        **extra,
    )
    if "x_0" in data:
        data = feature_lifting.lift(data, boundaries)
    return data


def _feature_signature(graph: Data) -> tuple:
    """Return what must agree for graphs to be lifted as one union.

    That is the shape of a row of ``x`` and of ``edge_attr`` and whether they are floating
    point (integer codes stay integer). Floating dtypes may differ: every float feature is cast to the complex's dtype anyway.
    """
    signature = []
    for name in ("x", "edge_attr"):
        value = graph.get(name, None)
        if isinstance(value, torch.Tensor):
            signature.append((tuple(value.shape[1:]), value.is_floating_point()))
        else:
            signature.append(type(value).__name__)
    return tuple(signature)


class _GraphLifting(BaseTransform):
    """Shared arguments of the graph liftings."""

    shown: ClassVar[tuple[str, ...]] = ()
    """The lifting's own options :func:`repr` shows before ``feature_lifting``,
    ``neighborhoods`` and ``self_loops`` (the harness hashes the repr into its cache keys: an
    option that changes the lifted complex belongs here)."""

    def __init__(
        self,
        feature_lifting: str | FeatureLifting = "sum",
        edge_feature_lifting: str | None = None,
        categorical_cardinalities: Sequence[int] | None = None,
        neighborhoods: Iterable[str] | None = None,
        self_loops: str = "raise",
        keep_edge_index: bool = True,
    ) -> None:
        if isinstance(feature_lifting, FeatureLifting):
            given = [
                name
                for name, value in (
                    ("edge_feature_lifting", edge_feature_lifting),
                    ("categorical_cardinalities", categorical_cardinalities),
                )
                if value is not None
            ]
            if given:
                raise ValueError(
                    f"feature_lifting is a FeatureLifting, so {' and '.join(given)} must be left "
                    "out: give them to the FeatureLifting itself (FeatureLifting(method, "
                    "edge_method, categorical_cardinalities, x2_from=...))"
                )
            self.feature_lifting = feature_lifting
        elif isinstance(feature_lifting, str):
            self.feature_lifting = FeatureLifting(
                feature_lifting, edge_feature_lifting, categorical_cardinalities
            )
        else:
            raise TypeError(
                "feature_lifting must be 'sum', 'mean' or a FeatureLifting (e.g. "
                f"FeatureLifting(x2_from='edges')), got {type(feature_lifting).__name__}"
            )
        self.neighborhoods = None if neighborhoods is None else tuple(neighborhoods)
        if self_loops not in ("raise", "drop"):
            raise ValueError(f"self_loops must be 'raise' or 'drop', got {self_loops!r}")
        self.self_loops = self_loops
        self.keep_edge_index = keep_edge_index

    def __repr__(self) -> str:
        names = (*self.shown, "feature_lifting", "neighborhoods", "self_loops")
        params = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__name__}({params})"

    def boundaries(self, graph: UndirectedGraph, node_batch: np.ndarray | None) -> list[Coo]:
        """Signed boundary matrices ``[B_1, B_2, ...]`` of the lifted complex.

        Parameters
        ----------
        graph : UndirectedGraph
            Canonical graph (possibly a disjoint union of graphs).
        node_batch : numpy.ndarray or None
            Graph index per vertex for a union (cells must stay grouped by graph).

        Returns
        -------
        list of Coo
            Boundary matrices.
        """
        raise NotImplementedError

    def forward(self, data: Data) -> ComplexData:
        """Lift one graph.

        Parameters
        ----------
        data : torch_geometric.data.Data
            Graph with ``edge_index`` and ``x`` (or ``num_nodes``), optional ``edge_attr``.

        Returns
        -------
        ComplexData
            The lifted complex; graph-level attributes (``y``, ...) are kept.
        """
        graph = undirected_graph(data, self.self_loops)
        return lift_graph(
            graph,
            self.boundaries(graph, None),
            data,
            self.neighborhoods,
            self.feature_lifting,
            self.keep_edge_index,
        )

    def lift_many(self, graphs: Sequence[Data], chunk_size: int = 1024) -> list[ComplexData]:
        """Lift many graphs at once; equal to ``[self(g) for g in graphs]``, several times faster.

        Graphs are processed in chunks as one disjoint union (one NumPy pass for the
        neighbourhoods of the whole chunk), then split into one :class:`ComplexData` each.

        Parameters
        ----------
        graphs : sequence of torch_geometric.data.Data
            Graphs, all with the same feature keys (``x`` and ``edge_attr`` on all or on
            none). Their feature widths may differ: graphs whose ``x`` / ``edge_attr`` cannot be
            concatenated are lifted in separate unions, in order.
        chunk_size : int, default=1024
            Graphs per union.

        Returns
        -------
        list of ComplexData
            One complex per graph, in order.
        """
        if int(chunk_size) < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
        graphs = list(graphs)
        for i, graph in enumerate(graphs):
            if not isinstance(graph, Data):
                raise TypeError(f"graph {i} of the list is a {type(graph).__name__}, not a torch_geometric Data")
        for name in ("x", "edge_attr"):
            present = [graph.get(name, None) is not None for graph in graphs]
            if any(present) and not all(present):
                raise ValueError(
                    f"some graphs have {name} and others not (graph {present.index(True)} has it, "
                    f"graph {present.index(False)} has not): they cannot be lifted together; give "
                    f"every graph {name} or none"
                )
        out: list[ComplexData] = []
        for start in range(0, len(graphs), int(chunk_size)):
            chunk = graphs[start : start + int(chunk_size)]
            # graphs whose features cannot be concatenated (different widths or dtypes) are
            # lifted in separate unions: each is valid alone, and ``lift`` accepts each
            run_start = 0
            signatures = [_feature_signature(graph) for graph in chunk]
            for i in range(1, len(chunk) + 1):
                if i == len(chunk) or signatures[i] != signatures[run_start]:
                    out.extend(self._lift_chunk(chunk[run_start:i], start + run_start))
                    run_start = i
        return out

    def _lift_chunk(self, graphs: list[Data], first_index: int = 0) -> list[ComplexData]:
        union, node_batch = self._validated_union(graphs, first_index)
        try:
            boundaries = self.boundaries(union, node_batch)
        except CycleLimitError as error:  # name the graph by its position in the list
            where = f"graph {first_index + (error.graph or 0)} of the list"
            raise error.naming(where) from None
        batch = lift_graph(
            union,
            boundaries,
            graphs[0],
            self.neighborhoods,
            self.feature_lifting,
            keep_edge_index=False,
            node_batch=node_batch,
            num_graphs=len(graphs),
        )
        complexes = batch.to_complex_list()
        if len(complexes) != len(graphs):  # one complex per graph, empty ones included
            raise RuntimeError(f"lift_many: {len(complexes)} complexes for {len(graphs)} graphs")
        if self.keep_edge_index:
            sizes = np.bincount(node_batch, minlength=len(graphs))
            offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(sizes)[:-1]]))
            edge_graph = torch.from_numpy(node_batch)[union.edge_index[0]]
            counts = torch.bincount(edge_graph, minlength=len(graphs)).tolist()
            local = union.edge_index - offsets[edge_graph]
            for complex_, edge_index in zip(complexes, torch.split(local, counts, dim=1)):
                complex_.edge_index = edge_index
        for complex_, source in zip(complexes, graphs):
            for key in source.keys():
                if key not in _GRAPH_KEYS:
                    complex_[key] = source[key]
        return complexes

    def _validated_union(
        self, graphs: list[Data], first_index: int = 0
    ) -> tuple[UndirectedGraph, np.ndarray]:
        """Validate the disjoint union of ``graphs`` in one vectorised pass.

        When the union is invalid, the graphs are validated one by one so that the error
        names the offending graph (its position ``first_index + i`` in the list given to
        :meth:`lift_many`) and its own vertex ids.
        """

        def first_error(error: Exception) -> Exception:
            for i, graph in enumerate(graphs):
                try:
                    undirected_graph(graph, self.self_loops)
                except (ValueError, TypeError) as own:
                    return type(own)(f"graph {first_index + i} of the list: {own}")
            return error

        try:
            sizes, edge_index, features = [], [], {"x": [], "edge_attr": []}
            for graph in graphs:
                sizes.append(graph_num_nodes(graph))  # the rule of undirected_graph
                edge_index.append(graph.get("edge_index", torch.zeros((2, 0), dtype=torch.long)))
                for name, values in features.items():
                    values.append(graph.get(name, None))
            counts = torch.tensor([e.size(1) if e.dim() == 2 else 0 for e in edge_index])
            offsets = torch.cumsum(torch.tensor([0, *sizes[:-1]]), 0)
            edge_graph = torch.repeat_interleave(torch.arange(len(graphs)), counts)
            merged = torch.cat(edge_index, dim=1)
            if merged.is_floating_point() or merged.dtype == torch.bool:
                raise TypeError("edge_index must hold integers")
            local_max = torch.tensor(sizes)[edge_graph]
            if bool(((merged < 0) | (merged >= local_max)).any()):
                raise ValueError("an edge refers to a vertex outside its graph")
            union = Data(edge_index=merged + offsets[edge_graph], num_nodes=int(sum(sizes)))
            for name, values in features.items():
                present = [v is not None for v in values]
                if any(present) and not all(present):
                    raise ValueError(f"some graphs have {name} and others not: they cannot be lifted together")
                if all(present) and values:
                    union[name] = torch.cat(values)
            validated = undirected_graph(union, self.self_loops)
        except (ValueError, TypeError, RuntimeError) as error:
            raise first_error(error) from error
        return validated, np.repeat(np.arange(len(graphs)), sizes)


class CellCycleLifting(_GraphLifting):
    """Lift a graph to a 2-dimensional cell complex whose 2-cells are cycles.

    Parameters
    ----------
    max_cell_length : int, optional
        Keep only cycles with at most this many vertices (default: all).
    cycles : {"basis", "chordless"}, default="basis"
        ``"basis"``: a cycle basis (``networkx.cycle_basis``), as TopoBench and TopoX do
        (at most ``m - n + 1`` cycles per connected graph).
        ``"chordless"``: every chordless cycle up to ``max_cell_length`` — every ring of a
        molecule, also fused ones (a basis may miss one of three rings sharing edges).
    max_cycles : int or None, default=MAX_CYCLES (10,000)
        With ``cycles="chordless"``: most cycles of one graph. They are counted while
        enumerated and the enumeration stops at the first one beyond the limit (their
        number grows exponentially with the density), raising :class:`CycleLimitError` (a
        ``ValueError``) that names the graph and the options to change. ``None``: no limit.
    feature_lifting : {"sum", "mean"} or FeatureLifting, default="sum"
        Features of cells without any (see :class:`FeatureLifting`). A
        :class:`FeatureLifting` instance is used as given, e.g.
        ``FeatureLifting(x2_from="edges")`` for TopoBench's ``x_2 = |B_2|ᵀ x_1``; then
        ``edge_feature_lifting`` and ``categorical_cardinalities`` belong to it and must be
        left out here.
    edge_feature_lifting : {"sum", "mean", "concat"}, optional
        Edge features when the graph has no ``edge_attr`` (default: ``feature_lifting``).
    categorical_cardinalities : sequence of int, optional
        Categories per column of integer ``x`` (see :class:`FeatureLifting`).
    neighborhoods : iterable of str, optional
        Neighbourhoods to build (default: all).
    self_loops : {"raise", "drop"}, default="raise"
        Self-loops raise a ``ValueError`` or are dropped with a warning.
    keep_edge_index : bool, default=True
        Keep the input ``edge_index`` on the complex (graph baselines can use it).

    Notes
    -----
    ``edge_attr`` becomes ``x_1`` (both directions must agree); integer features stay integer.
    2-cells are oriented from their smallest vertex towards its smaller cycle neighbour and
    sorted by (length, vertex sequence), so the output does not depend on the traversal order
    of networkx.
    """

    shown = ("max_cell_length", "cycles")  # not max_cycles: it never changes a lifted complex

    def __init__(
        self,
        max_cell_length: int | None = None,
        cycles: str = "basis",
        *,
        max_cycles: int | None = MAX_CYCLES,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if max_cell_length is not None and int(max_cell_length) < 3:
            raise ValueError(f"max_cell_length must be at least 3, got {max_cell_length}")
        if cycles not in ("basis", "chordless"):
            raise ValueError(f"cycles must be 'basis' or 'chordless', got {cycles!r}")
        if max_cycles is not None and (
            isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1
        ):
            raise ValueError(f"max_cycles must be a positive int or None, got {max_cycles!r}")
        self.max_cell_length = None if max_cell_length is None else int(max_cell_length)
        self.cycles = cycles
        self.max_cycles = max_cycles

    def find_cycles(
        self, graph: UndirectedGraph, node_batch: np.ndarray | None = None
    ) -> list[tuple[int, ...]]:
        """Return the canonical, sorted vertex cycles that become 2-cells.

        Parameters
        ----------
        graph : UndirectedGraph
            Canonical graph.
        node_batch : numpy.ndarray, optional
            Graph index per vertex of a union: cycles are grouped by graph first.

        Returns
        -------
        list of tuple of int
            Cycles (at least 3 vertices each).

        Raises
        ------
        CycleLimitError
            When a graph has more than ``max_cycles`` chordless cycles (checked while they are
            enumerated).
        """
        nx_graph = nx.Graph()
        nx_graph.add_nodes_from(range(graph.num_nodes))
        nx_graph.add_edges_from(graph.edges.tolist())
        bound = self.max_cell_length
        if self.cycles == "basis":
            found = nx.cycle_basis(nx_graph)
        else:
            found = self._bounded_chordless(nx_graph, graph, node_batch)
        cycles = {
            _canonical_cycle(c) for c in found if len(c) >= 3 and (bound is None or len(c) <= bound)
        }
        if node_batch is None:
            return sorted(cycles, key=lambda c: (len(c), c))
        return sorted(cycles, key=lambda c: (int(node_batch[c[0]]), len(c), c))

    def _bounded_chordless(
        self, nx_graph: nx.Graph, graph: UndirectedGraph, node_batch: np.ndarray | None
    ) -> list[list[int]]:
        """Chordless cycles up to ``max_cell_length``, stopping past ``max_cycles`` per graph."""
        bound, limit = self.max_cell_length, self.max_cycles
        found: list[list[int]] = []
        per_graph: dict[int, int] = {}
        for cycle in nx.chordless_cycles(nx_graph, length_bound=bound):
            if len(cycle) < 3:
                continue
            index = 0 if node_batch is None else int(node_batch[cycle[0]])
            per_graph[index] = count = per_graph.get(index, 0) + 1
            if limit is not None and count > limit:
                raise self._limit_error(graph, node_batch, index)
            found.append(cycle)
        return found

    def _limit_error(
        self, graph: UndirectedGraph, node_batch: np.ndarray | None, index: int
    ) -> CycleLimitError:
        if node_batch is None:
            vertices, edges = graph.num_nodes, len(graph.edges)
        else:
            mine = node_batch == index
            vertices = int(mine.sum())
            edges = int(mine[graph.edges[:, 0]].sum()) if len(graph.edges) else 0
        length = "no length cap" if self.max_cell_length is None else (
            f"length <= {self.max_cell_length}"
        )
        template = (
            f"CellCycleLifting(cycles='chordless'): {{where}} ({vertices} vertices, {edges} "
            f"edges) has more than max_cycles={self.max_cycles:,} chordless cycles with "
            f"{length}; the enumeration stopped there (their number grows exponentially with "
            "the density, and so do the 2-cells and their neighbourhoods). Lower "
            "max_cell_length, use cycles='basis' (at most edges - vertices + 1 cycles per "
            "connected graph), or raise max_cycles (None: no limit)"
        )
        return CycleLimitError(template, None if node_batch is None else index)

    def boundaries(self, graph: UndirectedGraph, node_batch: np.ndarray | None) -> list[Coo]:
        """``[B_1, B_2]``: edges, and cycles as 2-cells (see :meth:`find_cycles`).

        Parameters
        ----------
        graph : UndirectedGraph
            Canonical graph (possibly a disjoint union).
        node_batch : numpy.ndarray or None
            Graph index per vertex for a union.

        Returns
        -------
        list of Coo
            ``[B_1, B_2]``; ``B_2`` has 0 columns for a forest.
        """
        cycles = self.find_cycles(graph, node_batch)
        return [
            edge_boundary(graph.num_nodes, graph.edges),
            _cycle_boundary(graph.num_nodes, graph.edges, cycles),
        ]


class SimplicialCliqueLifting(_GraphLifting):
    """Lift a graph to its clique complex, truncated at ``complex_dim``.

    Every ``(k+1)``-clique becomes a ``k``-simplex for ``k <= complex_dim``. Simplices are
    sorted vertex tuples in lexicographic order (TopoNetX's order) with the alternating-sign
    boundary.

    Parameters
    ----------
    complex_dim : int, default=2
        Highest simplex dimension (ranks ``0..complex_dim`` are always present, possibly empty).
    **kwargs
        ``feature_lifting``, ``edge_feature_lifting``, ``categorical_cardinalities``,
        ``neighborhoods``, ``self_loops``, ``keep_edge_index`` as for :class:`CellCycleLifting`.
    """

    shown = ("complex_dim",)

    def __init__(self, complex_dim: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        if int(complex_dim) < 1:
            raise ValueError(f"complex_dim must be at least 1, got {complex_dim}")
        self.complex_dim = int(complex_dim)

    def boundaries(self, graph: UndirectedGraph, node_batch: np.ndarray | None) -> list[Coo]:
        """``[B_1, ..., B_complex_dim]`` of the clique complex.

        Parameters
        ----------
        graph : UndirectedGraph
            Canonical graph (possibly a disjoint union; sorted simplices stay grouped by graph
            because each graph's vertices are contiguous).
        node_batch : numpy.ndarray or None
            Unused (the lexicographic order already groups simplices by graph).

        Returns
        -------
        list of Coo
            Boundary matrices.
        """
        n = graph.num_nodes
        if self.complex_dim >= 2 and n > 0 and float(n) ** (self.complex_dim + 1) > 2**62:
            raise ValueError(f"graph too large for clique keys at complex_dim={self.complex_dim}")
        by_size: dict[int, list[list[int]]] = {k: [] for k in range(3, self.complex_dim + 2)}
        if self.complex_dim >= 2 and graph.edges.shape[0]:
            nx_graph = nx.Graph()
            nx_graph.add_nodes_from(range(n))
            nx_graph.add_edges_from(graph.edges.tolist())
            for clique in nx.enumerate_all_cliques(nx_graph):
                if len(clique) > self.complex_dim + 1:
                    break
                if len(clique) >= 3:
                    by_size[len(clique)].append(sorted(clique))
        boundaries = [edge_boundary(n, graph.edges)]
        faces = graph.edges
        for size in range(3, self.complex_dim + 2):
            simplices = np.array(sorted(by_size[size]), dtype=np.int64).reshape(-1, size)
            boundaries.append(_simplex_boundary(faces, simplices, n))
            faces = simplices
        return boundaries

