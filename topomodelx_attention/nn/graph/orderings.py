r"""Vertex orderings of the cells of a complex: the ordered identifier slots of order-k TokenGT (§3).

In the order-k TokenGT of §3 the entry :math:`\mathbf i = (i_1, \dots, i_k)` of an order-k
tensor becomes the token :math:`[X_{\mathbf i}, P_{i_1}, \dots, P_{i_k}, E^{\gamma(\mathbf i)}]`
(ordered identifier slots), and a symmetric relation is stored at *every* ordering of its
vertices: TokenGT turns an undirected edge :math:`\{u, v\}` into the two tokens
:math:`[P_u, P_v]` and :math:`[P_v, P_u]`, and A.5 says an undirected order-k hyperedge is
"parsed to all possible orderings of node identifiers". The orderings a cell needs are the
vertex sequences that describe *the same* cell, i.e. the orbit of one sequence under the
cell's symmetry group:

* a cell determined by its vertex set (an edge, a simplex, a hyperedge): every permutation,
  :math:`s!` orderings for :math:`s` vertices (edge 2, triangle 6, tetrahedron 24);
* a 2-cell of a cell complex (a ring): its vertex set does **not** determine it (K4 carries
  the two different 4-rings 0-1-2-3 and 0-2-1-3 on the same four vertices), its boundary
  cycle does. The sequences describing the ring are the cyclic boundary orders — the
  :math:`L` rotations and :math:`2` reflections of the walk around its boundary (the
  dihedral group), :math:`2L` orderings for a ring of length :math:`L` (a triangle: 6, the
  same tokens as the set rule).

The boundary order of a 2-cell is recovered by walking its boundary edges (the unsigned
``incidence_2`` gives the edges of every 2-cell, ``incidence_1`` their end vertices; the
orientation signs are not needed since every rotation and reflection is used). A 2-cell is
treated as a ring when all its boundary cells are 2-vertex edges that form one simple cycle;
otherwise (e.g. a rank-2 cell of a combinatorial complex, whose rank-1 cells may be
hyperedges) its vertex set defines it and the set rule applies.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from topomodelx_attention.data import ComplexData

__all__ = ["CellOrderings", "boundary_cycles", "cell_orderings", "ordering_counts"]


class CellOrderings:
    """The ordered-slot tokens of the cells of one rank.

    Attributes
    ----------
    slots : torch.Tensor, shape = (n_tokens, max_slots)
        Vertex of every slot (``-1``: empty slot, zero identifier), one row per
        (cell, ordering).
    owner : torch.Tensor, shape = (n_tokens,)
        Cell of every token, sorted (the tokens of cell 0 first).
    size : torch.Tensor, shape = (n_tokens,)
        Number of distinct vertices of the token's cell.
    """

    def __init__(self, slots: Tensor, owner: Tensor, size: Tensor) -> None:
        self.slots = slots
        self.owner = owner
        self.size = size


def _edge_ends(data: ComplexData, device: torch.device) -> tuple[Tensor, Tensor]:
    """End vertices ``(n_1, 2)`` of every rank-1 cell and whether it has exactly two."""
    n1 = data.num_cells(1)
    index = data.neighborhood("incidence", 1).coalesce().indices().to(device)
    counts = torch.bincount(index[1], minlength=n1)
    ends = torch.full((n1, 2), -1, dtype=torch.long, device=device)
    is_edge = counts == 2
    order = torch.argsort(index[1] * (data.num_cells(0) + 1) + index[0])
    vertex, cell = index[0][order], index[1][order]
    first = torch.cumsum(counts, 0) - counts  # position of every cell's first vertex
    keep = is_edge.index_select(0, cell)
    slot = torch.arange(cell.numel(), device=device) - first.index_select(0, cell)
    ends[cell[keep], slot[keep]] = vertex[keep]
    return ends, is_edge


def boundary_cycles(data: ComplexData) -> tuple[Tensor, Tensor]:
    r"""Cyclic vertex order of the boundary of every 2-cell (a walk around its boundary edges).

    Vectorised over the cells: every vertex of a ring boundary has exactly two boundary
    neighbours; the walk starts at the ring's smallest vertex, steps to one neighbour and
    then always to the neighbour it did not come from, and must return to the start after
    exactly :math:`L` steps (:math:`L` = number of boundary edges).

    Parameters
    ----------
    data : ComplexData
        A complex or a batch with ``incidence_1`` and ``incidence_2``.

    Returns
    -------
    cycles : torch.Tensor, shape = (n_2, L_max)
        Vertices of every ring in boundary order, ``-1``-padded (undefined rows where
        ``length`` is 0).
    length : torch.Tensor, shape = (n_2,)
        Ring length :math:`L`, or 0 where the boundary is not one simple cycle of 2-vertex
        edges (then the cell's vertex set is used instead, see the module notes).
    """
    device = data["batch_0"].device
    n0, n2 = data.num_cells(0), data.num_cells(2)
    if n2 == 0:
        return torch.zeros((0, 0), dtype=torch.long, device=device), torch.zeros(
            0, dtype=torch.long, device=device
        )
    ends, is_edge = _edge_ends(data, device)
    edge, cell = data.neighborhood("incidence", 2).coalesce().indices().to(device)
    length = torch.bincount(cell, minlength=n2)
    ok = torch.ones(n2, dtype=torch.bool, device=device)
    ok[cell[~is_edge.index_select(0, edge)]] = False  # a boundary cell that is not an edge
    a, b = ends.index_select(0, edge).unbind(1)
    # half-edges (cell, vertex) -> neighbour; a ring vertex has exactly two
    key = torch.cat([cell * n0 + a, cell * n0 + b])
    neighbour = torch.cat([b, a])
    valid = torch.cat([a >= 0, a >= 0])
    key, neighbour = key[valid], neighbour[valid]
    order = torch.argsort(key, stable=True)
    key, neighbour = key[order], neighbour[order]
    unique, counts = torch.unique_consecutive(key, return_counts=True)
    bad_vertex = counts != 2
    if bool(bad_vertex.any()):
        ok[torch.div(unique[bad_vertex], n0, rounding_mode="floor")] = False
    vertices_per_cell = torch.bincount(torch.div(unique, n0, rounding_mode="floor"), minlength=n2)
    ok &= vertices_per_cell == length
    ok &= length >= 3
    start_pos = torch.cumsum(counts, 0) - counts
    # the two neighbours of every (cell, vertex) (garbage where bad_vertex; such cells are not ok)
    nb0 = neighbour[start_pos]
    nb1 = neighbour[(start_pos + 1).clamp_max(max(neighbour.numel() - 1, 0))]
    return _walk_rings(unique, nb0, nb1, length, ok, n0)


def _walk_rings(
    unique: Tensor, nb0: Tensor, nb1: Tensor, length: Tensor, ok: Tensor, n0: int
) -> tuple[Tensor, Tensor]:
    """Walk every ring from its smallest vertex (:func:`boundary_cycles`' second half).

    ``unique``: the sorted half-edge keys ``cell·n0 + vertex``; ``nb0`` / ``nb1``: the two
    boundary neighbours of each; ``length``: boundary edges per cell; ``ok``: the cells whose
    boundary may still be one simple cycle (updated in place by the walk's checks).
    """
    n2, device = length.shape[0], length.device

    def lookup(c: Tensor, v: Tensor) -> Tensor:
        pos = torch.searchsorted(unique, c * n0 + v).clamp_max(unique.numel() - 1)
        return pos

    cells = torch.arange(n2, device=device)
    # start: the smallest vertex of each cell (first key of the cell in sorted order)
    unique_cell = torch.div(unique, n0, rounding_mode="floor")
    first_key = torch.full((n2,), unique.numel(), dtype=torch.long, device=device)
    first_key.scatter_reduce_(
        0, unique_cell, torch.arange(unique.numel(), device=device), reduce="amin"
    )
    has_key = first_key < unique.numel()
    ok &= has_key
    first_key = first_key.clamp_max(max(unique.numel() - 1, 0))
    l_max = int(length.max()) if n2 else 0
    cycles = torch.full((n2, l_max), -1, dtype=torch.long, device=device)
    if unique.numel() == 0 or l_max == 0:
        return cycles, torch.zeros(n2, dtype=torch.long, device=device)
    start = unique[first_key] - cells * n0
    prev, cur = start, nb0[first_key]
    cycles[:, 0] = start
    if l_max > 1:
        cycles[:, 1] = cur
    for t in range(2, l_max + 1):
        pos = lookup(cells, cur)
        nxt = torch.where(nb0[pos] != prev, nb0[pos], nb1[pos])
        active = t < length
        closes = t == length
        # the walk must not come back to the start early, and must close at step L
        ok &= ~(active & (nxt == start))
        ok &= ~(closes & (nxt != start))
        if t < l_max:
            cycles[:, t] = torch.where(active, nxt, torch.full_like(nxt, -1))
        prev, cur = cur, nxt
    length = torch.where(ok, length, torch.zeros_like(length))
    return cycles, length


def _check_set_sizes(size: Tensor, slots: int, rank: int) -> None:
    """Refuse a cell with more vertices than identifier slots (set rule)."""
    if size.numel() and int(size.max()) > slots:
        worst = int(torch.argmax(size))
        raise ValueError(
            f"rank-{rank} cell {worst} has {int(size[worst])} vertices but the model has "
            f"max_cell_size={slots} identifier slots; build it with a larger max_cell_size "
            "(cost: s! tokens for a cell of s vertices), lift with smaller cells, or use "
            'identifiers="sum"'
        )


def _check_ring_lengths(length: Tensor, slots: int) -> None:
    """Refuse a ring longer than the identifier slots."""
    if length.numel() and int(length.max()) > slots:
        worst = int(torch.argmax(length))
        raise ValueError(
            f"2-cell {worst} is a ring of length {int(length[worst])} but the model has "
            f"max_cell_size={slots} identifier slots; build it with "
            f"max_cell_size >= {int(length.max())} (cost: 2L tokens per ring of length "
            "L), lift with CellCycleLifting(max_cell_length=...), or use "
            'identifiers="sum"'
        )


def ordering_counts(
    data: ComplexData,
    rank: int,
    slots: int,
    cycles: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    r"""Count the ordered-slot tokens of every cell of ``rank``, without building them.

    1 for a vertex, :math:`2L` for a ring of length :math:`L`, :math:`s!` for any other cell
    of :math:`s` vertices (the rules of :func:`cell_orderings`). Cheap: one pass over the
    incidences (and :func:`boundary_cycles` for rank 2), so a model can refuse a batch before
    it creates, e.g., the :math:`8! = 40{,}320` tokens of one 8-vertex simplex.

    Parameters
    ----------
    data : ComplexData
        A complex or a batch.
    rank : int
        Cell rank.
    slots : int
        Identifier slots :math:`K`.
    cycles : tuple of torch.Tensor, optional
        ``boundary_cycles(data)`` when already computed (rank 2 only).

    Returns
    -------
    torch.Tensor, shape = (n_r,)
        Tokens per cell, float64 on the CPU (exact up to :math:`2^{53}`; ``inf`` beyond
        ``170!``).

    Raises
    ------
    ValueError
        When a cell has more than ``slots`` vertices (as :func:`cell_orderings`).
    """
    device = torch.device("cpu")  # float64 counts (not on every accelerator); cheap
    n_r = data.num_cells(rank)
    if rank == 0 or n_r == 0:
        return torch.ones(n_r, dtype=torch.float64, device=device)
    cell = data.vertex_cells(rank).coalesce().indices()[1].to(device)
    size = torch.bincount(cell, minlength=n_r)
    ring = torch.zeros(n_r, dtype=torch.bool, device=device)
    length = torch.zeros(n_r, dtype=torch.long, device=device)
    if rank == 2:
        _, length = boundary_cycles(data) if cycles is None else cycles
        length = length.to(device)
        ring = length > 0
        _check_ring_lengths(length, slots)
    _check_set_sizes(torch.where(ring, torch.zeros_like(size), size), slots, rank)
    largest = min(int(size.max()), 171)
    table = torch.tensor(
        [float(math.factorial(s)) if s <= 170 else math.inf for s in range(largest + 1)],
        dtype=torch.float64,
        device=device,
    )
    counts = table[size.clamp_max(largest)]
    return torch.where(ring, 2.0 * length.to(torch.float64), counts)


def _set_orderings(vertex: Tensor, cell: Tensor, num_cells: int, slots: int, rank: int):
    """Every permutation of the vertex set of every cell (the set rule)."""
    device = vertex.device
    size = torch.bincount(cell, minlength=num_cells)
    _check_set_sizes(size, slots, rank)
    span = int(vertex.max()) + 1 if vertex.numel() else 1
    order = torch.argsort(cell * span + vertex)
    vertex, cell = vertex[order], cell[order]
    first = torch.cumsum(size, 0) - size
    out_slots, out_owner, out_size = [], [], []
    for s in torch.unique(size).tolist():
        if s == 0:
            continue
        members = (size == s).nonzero().squeeze(1)  # (n_s,)
        base = first.index_select(0, members)
        table = base.unsqueeze(1) + torch.arange(s, device=device)  # (n_s, s)
        verts = vertex[table]
        perms = torch.tensor(list(itertools.permutations(range(s))), device=device)  # (s!, s)
        tuples = verts[:, perms]  # (n_s, s!, s)
        tuples = tuples.reshape(-1, s)
        padded = torch.full((tuples.shape[0], slots), -1, dtype=torch.long, device=device)
        padded[:, :s] = tuples
        out_slots.append(padded)
        out_owner.append(members.repeat_interleave(math.factorial(s)))
        out_size.append(torch.full((tuples.shape[0],), s, dtype=torch.long, device=device))
    return out_slots, out_owner, out_size


def _ring_orderings(
    cycles: Tensor, length: Tensor, ring: Tensor, slots: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Return the :math:`2L` cyclic boundary orders (rotations × reflections) of every ring.

    Returns the slots ``(tokens, slots)`` (``-1`` beyond the ring's length), the ring of every
    token and its length.
    """
    device = cycles.device
    rings = ring.nonzero().squeeze(1)
    lengths = length[rings]
    tokens_per_ring = 2 * lengths
    owner = rings.repeat_interleave(tokens_per_ring)
    ring_of_token = torch.arange(rings.numel(), device=device).repeat_interleave(tokens_per_ring)
    first = torch.cumsum(tokens_per_ring, 0) - tokens_per_ring
    j = torch.arange(owner.numel(), device=device) - first[ring_of_token]
    shift, direction = torch.div(j, 2, rounding_mode="floor"), 1 - 2 * (j % 2)
    t = torch.arange(slots, device=device)
    tok_len = lengths[ring_of_token].unsqueeze(1)
    pos = torch.remainder(shift.unsqueeze(1) + direction.unsqueeze(1) * t, tok_len)
    verts = cycles[rings][ring_of_token].gather(1, pos.clamp_max(cycles.shape[1] - 1))
    verts = torch.where(t < tok_len, verts, torch.full_like(verts, -1))
    return verts, owner, lengths[ring_of_token]

def cell_orderings(
    data: ComplexData,
    rank: int,
    slots: int,
    cycles: tuple[Tensor, Tensor] | None = None,
) -> CellOrderings:
    r"""Ordered-slot tokens of every cell of ``rank`` (one token per ordering, module notes).

    * rank 0: one token :math:`[P_v, \dots, P_v]` per vertex (the diagonal entry
      :math:`(v, \dots, v)` of the order-k tensor, §3; TokenGT's :math:`[P_v, P_v]`);
    * a ring (2-cell whose boundary is one simple cycle of edges): its :math:`2L` cyclic
      boundary orders (rotations × reflections) in the first :math:`L` slots;
    * any other cell of :math:`s` vertices: its :math:`s!` vertex permutations.

    Empty slots (``s < slots``) hold ``-1`` (a zero identifier); the number of vertices is
    returned so that the model can add a size identifier.

    Parameters
    ----------
    data : ComplexData
        A complex or a batch (``incidence_r`` for ``r <= rank``).
    rank : int
        Cell rank.
    slots : int
        Number of identifier slots :math:`K` (the largest cell size allowed).
    cycles : tuple of torch.Tensor, optional
        ``boundary_cycles(data)`` when already computed (rank 2 only).

    Returns
    -------
    CellOrderings
        Tokens sorted by cell (as many as :func:`ordering_counts` gives).

    Raises
    ------
    ValueError
        When a cell has more than ``slots`` vertices.
    """
    device = data["batch_0"].device
    n_r = data.num_cells(rank)
    if rank == 0:
        vertices = torch.arange(n_r, device=device)
        return CellOrderings(
            vertices.unsqueeze(1).expand(n_r, slots).clone(),
            vertices,
            torch.ones(n_r, dtype=torch.long, device=device),
        )
    index = data.vertex_cells(rank).coalesce().indices().to(device)
    vertex, cell = index[0], index[1]
    slot_list, owner_list, size_list = [], [], []
    set_cells = torch.ones(n_r, dtype=torch.bool, device=device)
    if rank == 2 and n_r:
        cycles, length = boundary_cycles(data) if cycles is None else cycles
        ring = length > 0
        if bool(ring.any()):
            _check_ring_lengths(length, slots)
            set_cells = ~ring
            verts, owner, size = _ring_orderings(cycles, length, ring, slots)
            slot_list.append(verts)
            owner_list.append(owner)
            size_list.append(size)
    keep = set_cells.index_select(0, cell)
    s, o, z = _set_orderings(vertex[keep], cell[keep], n_r, slots, rank)
    slot_list += s
    owner_list += o
    size_list += z
    if not slot_list:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return CellOrderings(empty.view(0, slots), empty, empty)
    slots_t, owner_t, size_t = torch.cat(slot_list), torch.cat(owner_list), torch.cat(size_list)
    order = torch.argsort(owner_t, stable=True)
    return CellOrderings(slots_t[order], owner_t[order], size_t[order])
