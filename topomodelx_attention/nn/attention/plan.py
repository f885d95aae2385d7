r"""The fused CPU sparse kernel's index plan of a neighbourhood, built once per batch.

The fused CPU kernel of :func:`~.sparse.sparse_attention` treats all heads as one node-major
block CSR matrix (row ``t·H + h``): :class:`SparsePlan` holds that pattern (and its transpose,
which the key / value gradients read) for one neighbourhood and a number of heads.
:func:`sparse_plan` builds it once per batch, to be shared by every call on the same
neighbourhood (the Cellular Transformer's layers do); :func:`plan_rows` slices the plan of a
joined neighbourhood to some of its target rows without laying it out again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from topomodelx_attention.nn.attention.neighborhood import (
    Neighborhood,
    NeighborhoodIndex,
    neighborhood_index,
)

__all__ = [
    "SparsePlan",
    "build_plan",
    "flat_positions",
    "plan_rows",
    "sparse_plan",
    "stable_argsort",
    "with_transpose",
]


def _node_major(rows: Tensor, cols: Tensor, rank: Tensor, n_rows: int, heads: int):
    """Node-major CSR pattern of all heads for the CPU edges ``(rows[e], cols[e])``.

    Row ``i·H + h`` is head ``h`` of node ``i`` (the row-major layout of an ``(n, H, d)``
    tensor, so a contiguous head-split tensor is the dense operand as is); column ``j·H + h``
    likewise. ``rank[e]`` is the place of edge ``e`` in the row-sorted (stable) edge order.
    Node ``i`` owns the stored values ``[start_i·H, (start_i + degree_i)·H)``, head ``h`` the
    ``degree_i`` of them after ``start_i·H + h·degree_i``.

    Returns ``crow (n_rows·H + 1,)`` and ``col (nnz·H,)`` (int32, for MKL), the row lengths
    ``(n_rows·H,)`` and the storage position ``(nnz, H)`` (int64: a ``scatter_`` index) of
    every (edge, head). The position is a transposed view of a contiguous ``(H, nnz)`` tensor:
    every per-head quantity is computed head by head on contiguous memory (writing the
    ``(nnz, H)`` layout by broadcasting took about twice as long at 1.5·10⁶ entries);
    :func:`flat_positions` reads it back head-major without a copy. The ``nnz·H``-sized
    temporaries are int32 where an index allows it (half the memory traffic of int64 on large
    neighbourhoods).
    """
    nnz = rows.shape[0]
    if nnz * heads >= torch.iinfo(torch.int32).max or n_rows * heads >= torch.iinfo(
        torch.int32
    ).max:
        raise ValueError(
            f"{nnz} neighbourhood entries × {heads} heads exceed the fused kernel's int32 indices"
        )
    degree = torch.bincount(rows, minlength=n_rows)
    lengths = degree.repeat_interleave(heads)
    crow = torch.empty(n_rows * heads + 1, dtype=torch.int32)
    crow[0] = 0
    torch.cumsum(lengths, 0, dtype=torch.int32, out=crow[1:])
    start = degree.cumsum(0).sub_(degree)
    # storage position of (edge e, head h): start·(H - 1) + rank + h·degree of e's row
    position = torch.empty(heads, nnz, dtype=torch.int64)
    torch.add(start.index_select(0, rows).mul_(heads - 1), rank, out=position[0])
    step = degree.index_select(0, rows)
    for h in range(1, heads):
        torch.add(position[h - 1], step, out=position[h])
    base = cols.to(torch.int32).mul_(heads)
    column = torch.empty(heads, nnz, dtype=torch.int32)  # column j·H + h of (edge, head)
    for h in range(heads):
        torch.add(base, h, out=column[h])
    # scatter_, not index assignment: several times faster for a permutation on CPU
    col = torch.empty(nnz * heads, dtype=torch.int32).scatter_(0, position.view(-1), column.view(-1))
    return crow, col, lengths, position.t()


def flat_positions(position: Tensor) -> Tensor:
    """Flatten a plan's ``(nnz, H)`` storage positions head-major, into ``(H·nnz,)``.

    No copy for a plan built by :func:`_node_major` (its positions are a transposed view of a
    contiguous ``(H, nnz)`` tensor); a sliced plan's (:func:`plan_rows`) are copied.
    """
    return position.t().reshape(-1)


@dataclass(frozen=True)
class SparsePlan:
    r"""The CSR plan of one sorted neighbourhood for the fused CPU kernel, built once, reused.

    The fused kernel of :func:`sparse_attention` treats all heads as one sparse matrix on
    node-major rows (row ``t·H + h`` = head ``h`` of target ``t``), so the contiguous
    ``(n, heads, d)`` queries, keys, values and gradients are its dense operands without any
    copy. This object holds that pattern and its transpose (for the key / value gradients).
    Build it once per batch with :func:`sparse_plan` and pass it to every call on the same
    neighbourhood (e.g. every layer of a stack); without it each call builds its own.

    Attributes
    ----------
    heads : int
        Heads the plan is for.
    shape : tuple of int
        ``(n_target, n_source)``.
    index_target, index_source : torch.Tensor, shape = (nnz,)
        The edges, sorted by target (stable): the order of ``edge_bias`` rows is this order.
    order : torch.Tensor or None, shape = (nnz,)
        Permutation that sorted the given edges (``None``: they were sorted).
    crow, col, row, lengths, position : torch.Tensor
        Node-major CSR pattern (see :func:`_node_major`) and the storage position
        ``(nnz, heads)`` of every (edge, head).
    crow_t, col_t, to_transposed : torch.Tensor
        The transposed pattern (rows = sources) and the gather that reorders stored values
        into it.
    """

    heads: int
    shape: tuple[int, int]
    index_target: Tensor
    index_source: Tensor
    order: Tensor | None
    crow: Tensor
    col: Tensor
    row: Tensor
    lengths: Tensor
    position: Tensor
    crow_t: Tensor | None = None
    col_t: Tensor | None = None
    to_transposed: Tensor | None = None

    @property
    def nnz(self) -> int:
        """Stored entries of the neighbourhood."""
        return self.index_target.shape[0]


def build_plan(
    index_t: Tensor, index_s: Tensor, n_t: int, n_s: int, heads: int, transposed: bool
) -> SparsePlan:
    """:class:`SparsePlan` of CPU edges (sorted by target here when they are not)."""
    order = None
    if index_t.shape[0] > 1 and not bool((index_t[1:] >= index_t[:-1]).all()):
        order = stable_argsort(index_t, n_t)
        index_t, index_s = index_t[order], index_s[order]
    nnz = index_t.shape[0]
    crow, col, lengths, position = _node_major(index_t, index_s, torch.arange(nnz), n_t, heads)
    # int32 segment index (read by index_select only)
    row = torch.repeat_interleave(
        torch.arange(lengths.shape[0], dtype=torch.int32), lengths, output_size=nnz * heads
    )
    plan = SparsePlan(
        heads, (n_t, n_s), index_t, index_s, order, crow, col, row, lengths.unsqueeze(0), position
    )
    return with_transpose(plan) if transposed else plan


def with_transpose(plan: SparsePlan) -> SparsePlan:
    """``plan`` with its transposed pattern (rows = sources), added if missing."""
    if plan.crow_t is not None:
        return plan
    n_s, heads, nnz = plan.shape[1], plan.heads, plan.nnz
    by_source = stable_argsort(plan.index_source, n_s)
    rank = torch.empty_like(by_source).scatter_(0, by_source, torch.arange(nnz))
    crow_t, col_t, _, position_t = _node_major(
        plan.index_source, plan.index_target, rank, n_s, heads
    )
    # int32 gather index (read by index_select only)
    to_transposed = torch.empty(nnz * heads, dtype=torch.int32)
    to_transposed.scatter_(
        0, flat_positions(position_t), flat_positions(plan.position).to(torch.int32)
    )
    return replace(plan, crow_t=crow_t, col_t=col_t, to_transposed=to_transposed)


def plan_rows(
    plan: SparsePlan,
    rows: Sequence[tuple[int, int]],
    source_map: Tensor,
    n_source: int,
) -> SparsePlan:
    """Slice the plan of some target rows out of ``plan``, their sources renumbered.

    The sub-neighbourhood keeps the entries of the target rows ``[start, stop)`` of every
    range in ``rows``, in that order (its target ``i`` is the ``i``-th kept row), with source
    ``s`` renamed ``source_map[s]``. Its pattern is a slice of ``plan``'s (a node's stored
    values are contiguous and nodes are stored in order), so no edge list is joined, sorted or
    laid out again: the result equals :func:`sparse_plan` of the sub-neighbourhood, field by
    field, when the renaming keeps the order of the sources of each kept row (e.g. the key rows
    of a subset of fused blocks). The transposed pattern is built when ``plan`` has one.

    Parameters
    ----------
    plan : SparsePlan
        A plan of target-sorted edges (``plan.order is None``).
    rows : sequence of (int, int)
        Increasing, disjoint ranges of target rows of ``plan``.
    source_map : torch.Tensor, shape = (n_source_of_plan,)
        New index of every source of ``plan`` (read for the kept entries only).
    n_source : int
        Sources of the sub-neighbourhood.

    Returns
    -------
    SparsePlan
        The plan of the sub-neighbourhood.
    """
    if plan.order is not None:
        raise ValueError("plan_rows slices a plan of target-sorted edges (plan.order is None)")
    heads, crow = plan.heads, plan.crow
    stored = [(int(crow[a * heads]), int(crow[b * heads])) for a, b in rows]
    kept_rows = kept_values = 0
    crows, cols, segments, lengths, positions, targets, sources = ([] for _ in range(7))
    for (a, b), (s0, s1) in zip(rows, stored):
        e0, e1 = s0 // heads, s1 // heads  # a node stores degree · heads values
        shift = s0 - kept_values
        crows.append(crow[a * heads : b * heads] - shift)
        cols.append(plan.col[s0:s1])
        segments.append(plan.row[s0:s1] - (a - kept_rows) * heads)
        lengths.append(plan.lengths[:, a * heads : b * heads])
        positions.append(plan.position[e0:e1] - shift)
        targets.append(plan.index_target[e0:e1] - (a - kept_rows))
        sources.append(plan.index_source[e0:e1])
        kept_rows, kept_values = kept_rows + b - a, kept_values + s1 - s0
    crows.append(crow.new_full((1,), kept_values))
    col = torch.cat(cols)
    node = torch.div(col, heads, rounding_mode="floor")
    col = source_map.to(col.dtype).index_select(0, node).mul_(heads).add_(col - node * heads)
    sliced = SparsePlan(
        heads,
        (kept_rows, int(n_source)),
        torch.cat(targets),
        source_map.index_select(0, torch.cat(sources)),
        None,
        torch.cat(crows),
        col,
        torch.cat(segments),
        torch.cat(lengths, dim=1),
        torch.cat(positions),
    )
    return with_transpose(sliced) if plan.crow_t is not None else sliced


def stable_argsort(index: Tensor, size: int) -> Tensor:
    """Stable argsort of a CPU index with values in ``[0, size)``, in linear time.

    NumPy's radix sort (``kind="stable"`` on 16-bit keys): one pass when ``size`` fits 16
    bits, else a least-significant-digit radix sort on two 16-bit digits (stable, so the result
    is the stable argsort); ``torch.argsort(stable=True)`` beyond 32 bits. On 10⁶–10⁷ entries
    the two radix passes are several times faster than a comparison sort, and they keep the
    plan's cost per entry flat as neighbourhoods grow.
    """
    if size <= np.iinfo(np.int16).max:
        return torch.from_numpy(np.argsort(index.numpy().astype(np.int16), kind="stable"))
    if size <= np.iinfo(np.uint32).max:
        keys = index.numpy()
        order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        high = (keys[order] >> 16).astype(np.uint16)
        return torch.from_numpy(order[np.argsort(high, kind="stable")])
    return torch.argsort(index, stable=True)


def sparse_plan(
    neighborhood: Neighborhood,
    heads: int,
    *,
    n_target: int | None = None,
    n_source: int | None = None,
    transposed: bool = True,
) -> SparsePlan:
    """Build the :class:`SparsePlan` of a neighbourhood once, for every call that attends on it.

    Parameters
    ----------
    neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex
        Any format accepted by :func:`sparse_attention` (a
        :class:`~topomodelx_attention.nn.attention.neighborhood.NeighborhoodIndex` carries its shape).
    heads : int
        Number of heads of the attention calls.
    n_target, n_source : int, optional
        Shape of the neighbourhood (needed for index pairs; read from sparse tensors and
        ``NeighborhoodIndex``).
    transposed : bool, default=True
        Also build the transposed pattern, which only the key / value gradients read
        (``False`` for inference: a backward then builds it per call).

    Returns
    -------
    SparsePlan
        Pass it as ``plan=`` to :func:`sparse_attention` with the same neighbourhood.
    """
    if n_target is None or n_source is None:
        if isinstance(neighborhood, NeighborhoodIndex):
            n_target, n_source = neighborhood.shape
        elif isinstance(neighborhood, Tensor) and neighborhood.layout != torch.strided:
            n_target, n_source = int(neighborhood.shape[0]), int(neighborhood.shape[1])
        else:
            raise ValueError("sparse_plan of an index pair needs n_target and n_source")
    if int(heads) < 1:
        raise ValueError(f"heads must be positive, got {heads}")
    index_t, index_s, _ = neighborhood_index(neighborhood, n_target, n_source)
    # the plan serves the fused CPU kernel only: it is built and kept on the CPU
    index_t, index_s = index_t.cpu().contiguous(), index_s.cpu().contiguous()
    return build_plan(index_t, index_s, n_target, n_source, int(heads), bool(transposed))
