r"""Many sparse attention blocks between token groups in one fused sparse call.

A layer with several :class:`~.multihead.MultiHeadAttention` blocks of the sparse kind, block
``i`` attending from group ``source_i`` to group ``target_i`` (the ranks of a complex, pairs
``(source, target)``; several blocks may join the same groups), computes

.. math::
    \mathrm{out}_g = \sum_{i:\ \mathrm{target}_i = g} \mathrm{MHA}_i(X_g, X_{\mathrm{source}_i}, N_i)

(e.g. the pairwise cellular attention of Eq. 2, one block per arrow of a tensor diagram). The
blocks keep their own parameters and softmax, but run together (:func:`fused_sparse_attention`):
one query GEMM and one key/value GEMM per group with the weights of the blocks that read the
group stacked, one sparse attention of the blocks' shared :class:`~.kernels.SparseKernel`
configuration on the joined edge lists (:func:`prepare_fused`, built once per batch), and one
output GEMM per target group (``Σ_i O_i W_{O,i} = [O_1 | O_2 | …] [W_{O,1}; W_{O,2}; …]``).
Same result as one call per block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from topomodelx_attention.nn.attention.kernels import SparseKernel
from topomodelx_attention.nn.attention.multihead import MultiHeadAttention
from topomodelx_attention.nn.attention.neighborhood import NeighborhoodIndex, prepare_neighborhood
from topomodelx_attention.nn.attention.plan import (
    SparsePlan,
    plan_rows,
    sparse_plan,
    stable_argsort,
)
from topomodelx_attention.nn.attention.sparse import neighborhood_sum

__all__ = [
    "FusedNeighborhood",
    "FusedSlots",
    "fusable",
    "fused_slots",
    "fused_sparse_attention",
    "fused_sparse_attention_weights",
    "fused_subset",
    "prepare_fused",
    "prepare_fused_edges",
    "prepare_fused_index",
]


def fusable(block: MultiHeadAttention) -> bool:
    """Whether a block can join a fused call: sparse kernel, plain Q/K/V/O linear maps.

    Parameters
    ----------
    block : MultiHeadAttention
        An attention block.

    Returns
    -------
    bool
        ``True`` for a sparse-kernel block with ``nn.Linear`` query, key, value and output
        projections that all have a bias or all have none.
    """
    lins = (block.lin_query, block.lin_key, block.lin_value, block.lin_out)
    return (
        isinstance(block.kernel, SparseKernel)
        and all(isinstance(lin, nn.Linear) for lin in lins)
        and len({lin.bias is None for lin in lins}) == 1
    )


@dataclass(frozen=True)
class FusedSlots:
    """Row layout of several blocks joined into one attention problem.

    The queries of every block form one table: group ``g`` holds ``n_g × len(targets[g])``
    rows, row ``q_offsets[g] + t · len(targets[g]) + i`` being the query of token ``t`` for the
    ``i``-th block with target ``g`` (the row-major layout of ``X_g [Q_1 | Q_2 | …]``). Keys and
    values form a second table laid out in the same way by source group. An entry ``(t, s)`` of
    the neighbourhood of block ``i`` becomes one edge between its query row and its key row;
    the segment softmax over query rows is then the softmax of each block separately (Eq. 2).

    Attributes
    ----------
    targets, sources : tuple of tuple of int
        Per group: the blocks (indices into the pairs) whose target (source) it is, in slot
        order.
    q_offsets, kv_offsets : tuple of int
        First query (key) row of every group, and the total number of rows last (symbolic
        sizes under ``torch.compile``).
    """

    targets: tuple[tuple[int, ...], ...]
    sources: tuple[tuple[int, ...], ...]
    q_offsets: tuple[int, ...]
    kv_offsets: tuple[int, ...]


def fused_slots(pairs: Sequence[tuple[int, int]], sizes: Sequence[int]) -> FusedSlots:
    """Row layout (:class:`FusedSlots`) of blocks ``pairs[i] = (source, target)``.

    Parameters
    ----------
    pairs : sequence of (int, int)
        ``(source group, target group)`` of every block.
    sizes : sequence of int
        Tokens of every group.

    Returns
    -------
    FusedSlots
        The slots of every block in the query and key/value tables.
    """
    groups = range(len(sizes))
    targets = tuple(tuple(i for i, (_, t) in enumerate(pairs) if t == g) for g in groups)
    sources = tuple(tuple(i for i, (s, _) in enumerate(pairs) if s == g) for g in groups)
    q_offsets, kv_offsets = [0], [0]
    for g in groups:
        q_offsets.append(q_offsets[-1] + sizes[g] * len(targets[g]))
        kv_offsets.append(kv_offsets[-1] + sizes[g] * len(sources[g]))
    return FusedSlots(targets, sources, tuple(q_offsets), tuple(kv_offsets))


@dataclass(frozen=True)
class FusedNeighborhood:
    """The joined edge lists of fused blocks, built once per batch by :func:`prepare_fused`.

    Attributes
    ----------
    index : NeighborhoodIndex
        ``(query row, key row)`` of every entry of every block (rows of :class:`FusedSlots`),
        sorted by query row.
    plan : SparsePlan or None
        CSR plan of ``index`` for the fused CPU kernel (built on CPU only; shared by every
        layer of a stack, forward and backward).
    """

    index: NeighborhoodIndex
    plan: SparsePlan | None = None


def _check_blocks(blocks: Sequence[MultiHeadAttention]) -> MultiHeadAttention:
    """Raise unless the blocks can run as one call; return the first (their shared shape)."""
    if not blocks:
        raise ValueError("fused sparse attention needs at least one block")
    first = blocks[0]
    for i, block in enumerate(blocks):
        if not fusable(block):
            raise ValueError(
                f"block {i} cannot join a fused call: it needs the sparse kernel and nn.Linear "
                "Q/K/V/O projections (output_projection=True), all with or all without bias"
            )
        shape = (block.heads, block.head_channels, block.value_channels)
        options = (block.kernel.scale, block.kernel.attention_dropout, block.kernel.cardinality)
        if shape != (first.heads, first.head_channels, first.value_channels) or options != (
            first.kernel.scale,
            first.kernel.attention_dropout,
            first.kernel.cardinality,
        ):
            raise ValueError(
                f"block {i} differs from block 0 in heads / head widths / kernel options "
                f"(scale, attention_dropout, cardinality): fused blocks share one sparse "
                "attention call"
            )
    return first


def prepare_fused(
    blocks: Sequence[MultiHeadAttention],
    pairs: Sequence[tuple[int, int]],
    neighborhoods: Sequence[Tensor],
    sizes: Sequence[int],
    *,
    device: torch.device | str | None = None,
    names: Sequence[str] | None = None,
    transposed: bool | None = None,
) -> FusedNeighborhood:
    """Join the neighbourhoods of the blocks into one edge list (and its CPU plan).

    Checks that the blocks can share one sparse attention call, then runs
    :func:`prepare_fused_index` with their head count.

    Parameters
    ----------
    blocks : sequence of MultiHeadAttention
        The fused blocks (:func:`fusable`; same heads and kernel options).
    pairs, neighborhoods, sizes, device, names, transposed
        As in :func:`prepare_fused_index`.

    Returns
    -------
    FusedNeighborhood
        The joined index and, on CPU, its plan.
    """
    first = _check_blocks(blocks)
    if len(blocks) != len(pairs):
        raise ValueError("give one (source, target) pair and one neighbourhood per block")
    return prepare_fused_index(
        pairs, neighborhoods, sizes, first.heads, device=device, names=names, transposed=transposed
    )


def prepare_fused_index(
    pairs: Sequence[tuple[int, int]],
    neighborhoods: Sequence[Tensor],
    sizes: Sequence[int],
    heads: int,
    *,
    device: torch.device | str | None = None,
    names: Sequence[str] | None = None,
    transposed: bool | None = None,
    transposes: Sequence[bool] | None = None,
) -> FusedNeighborhood:
    """Join the neighbourhoods of blocks given by their pairs and head count into one edge list.

    Parameters
    ----------
    pairs : sequence of (int, int)
        ``(source group, target group)`` of every block.
    neighborhoods : sequence of torch.Tensor
        Coalesced sparse COO ``(n_target, n_source)`` neighbourhood of every block (a mask);
        for a block with ``transposes[i]``, its transpose ``(n_source, n_target)``.
    sizes : sequence of int
        Tokens of every group.
    heads : int
        Heads of the blocks (the CPU plan is built for them).
    device : torch.device or str, optional
        Device of the index (default: that of the neighbourhoods).
    names : sequence of str, optional
        Name of every block in error messages.
    transposed : bool, optional
        Whether the CPU plan holds the transposed pattern (read by backward only); default
        ``torch.is_grad_enabled()``.
    transposes : sequence of bool, optional
        Per block: ``neighborhoods[i]`` is the transpose of the block's neighbourhood (e.g. the
        incidence ``B`` of an arrow attending along ``Bᵀ``); its edges are read with the two
        index rows swapped, no transpose is built. Default: none.

    Returns
    -------
    FusedNeighborhood
        The joined index and, on CPU, its plan.
    """
    if len(pairs) != len(neighborhoods):
        raise ValueError("give one (source, target) pair and one neighbourhood per block")
    names = [f"block {i}" for i in range(len(pairs))] if names is None else list(names)
    transposes = [False] * len(pairs) if transposes is None else [bool(t) for t in transposes]
    edges = []
    for i, ((source, target), matrix) in enumerate(zip(pairs, neighborhoods)):
        expected = (sizes[target], sizes[source])
        shape = tuple(matrix.shape)[::-1] if transposes[i] else tuple(matrix.shape)
        if shape != expected:
            raise ValueError(
                f"neighbourhood of {names[i]} has shape {shape} but must be "
                f"(n_target, n_source) = {expected}; neighbourhoods are oriented (target, source)"
                + (" (it is given transposed)" if transposes[i] else "")
            )
        index = matrix.indices()
        edges.append((index[1], index[0]) if transposes[i] else (index[0], index[1]))
    slots = fused_slots(pairs, sizes)
    index = prepare_neighborhood(
        prepare_fused_edges(pairs, edges, sizes),
        slots.q_offsets[-1],
        slots.kv_offsets[-1],
        device=device,
        name="joined sparse blocks",
    )
    plan = None
    if index.index_target.device.type == "cpu":
        if transposed is None:
            transposed = torch.is_grad_enabled()
        plan = sparse_plan(index, heads, transposed=transposed)
    return FusedNeighborhood(index, plan)


def fused_subset(
    neighborhood: FusedNeighborhood,
    pairs: Sequence[tuple[int, int]],
    subset: Sequence[int],
    sizes: Sequence[int],
) -> FusedNeighborhood:
    """Slice the joined edge lists of some of the blocks out of those of all of them.

    For a subset of blocks that keeps *every* block into each of its target groups (e.g. the
    blocks into the readout ranks, :meth:`~.stacked.StackedBlocks.active` with ``targets``),
    the query rows of those groups are the same rows, shifted, as in the joined problem of all
    blocks, and its edges are the edges of those rows with the key rows renumbered to the
    subset's :class:`FusedSlots`. This builds that index (and its CPU plan,
    :func:`~.plan.plan_rows`) from ``neighborhood`` without joining, sorting or laying out
    the edges again; the result equals :func:`prepare_fused_index` of the subset's
    neighbourhoods.

    Parameters
    ----------
    neighborhood : FusedNeighborhood
        :func:`prepare_fused_index` of the blocks ``pairs``.
    pairs : sequence of (int, int)
        ``(source group, target group)`` of every block of ``neighborhood``.
    subset : sequence of int
        Increasing indices into ``pairs`` of the blocks kept.
    sizes : sequence of int
        Tokens of every group.

    Returns
    -------
    FusedNeighborhood
        The joined index of the blocks ``subset`` (in that order) and, when ``neighborhood``
        has one, its plan (with the transposed pattern when that one has it).
    """
    subset = [int(i) for i in subset]
    if not subset or subset != sorted(set(subset)) or not 0 <= subset[0] <= subset[-1] < len(pairs):
        raise ValueError(f"subset must be increasing, distinct block indices, got {subset}")
    full, sub = fused_slots(pairs, sizes), fused_slots([pairs[i] for i in subset], sizes)
    rows, offsets = [], []
    for g, targets in enumerate(sub.targets):
        if targets and [subset[i] for i in targets] != list(full.targets[g]):
            raise ValueError(
                f"the subset keeps only some of the blocks into group {g}: a sliced joined index "
                "needs every block into each of its target groups (build it with "
                "prepare_fused_index instead)"
            )
        if targets:
            rows.append((full.q_offsets[g], full.q_offsets[g + 1]))
            offsets.append(full.q_offsets[g] - sub.q_offsets[g])
    # key row of the full problem → key row of the subset (-1: a block not kept)
    source_map = np.full(full.kv_offsets[-1], -1, dtype=np.int64)
    for g, sources in enumerate(sub.sources):
        width, n = len(full.sources[g]), sizes[g]
        for slot, i in enumerate(sources):
            start = full.kv_offsets[g] + full.sources[g].index(subset[i])
            source_map[start : start + n * width : width] = (
                sub.kv_offsets[g] + slot + len(sources) * np.arange(n)
            )
    index = neighborhood.index
    device = index.index_target.device
    source_map = torch.from_numpy(source_map).to(device)
    shape = (sub.q_offsets[-1], sub.kv_offsets[-1])
    if neighborhood.plan is not None:
        plan = plan_rows(neighborhood.plan, rows, source_map, shape[1])
        return FusedNeighborhood(
            NeighborhoodIndex(plan.index_target, plan.index_source, None, shape), plan
        )
    starts = torch.tensor([r for pair in rows for r in pair], device=device)
    bounds = torch.searchsorted(index.index_target, starts).tolist()  # edges are query-sorted
    targets, sources = [], []
    for k, offset in enumerate(offsets):
        e0, e1 = bounds[2 * k], bounds[2 * k + 1]
        targets.append(index.index_target[e0:e1] - offset)
        sources.append(source_map.index_select(0, index.index_source[e0:e1]))
    return FusedNeighborhood(
        NeighborhoodIndex(torch.cat(targets), torch.cat(sources), None, shape), None
    )


def prepare_fused_edges(
    pairs: Sequence[tuple[int, int]],
    edges: Sequence[tuple[Tensor, Tensor]],
    sizes: Sequence[int],
) -> tuple[Tensor, Tensor]:
    """Join the edges of the blocks into one edge list on the rows of :class:`FusedSlots`.

    Entry ``(t, s)`` of block ``i`` becomes the edge from query row
    ``q_offsets[target_i] + t · len(targets[target_i]) + slot`` to key row
    ``kv_offsets[source_i] + s · len(sources[source_i]) + slot``. The edges are sorted by
    query row, stably (the entries of one query row, all of one block, keep their order: a
    block given as the swapped index rows of a coalesced matrix gets the coalesced order of
    its transpose); the scatters of the attention kernels then write in order. On CPU the
    arithmetic runs in NumPy (a few small arrays: torch's per-operation cost dominated) and
    the sort is a linear-time radix sort (a comparison sort dominated the plan at 10⁶ cells).

    Parameters
    ----------
    pairs : sequence of (int, int)
        ``(source group, target group)`` of every block.
    edges : sequence of (torch.Tensor, torch.Tensor)
        Per block: ``(index_target, index_source)``, int64 tensors of shape ``(nnz_i,)``
        (entries in range; not checked here).
    sizes : sequence of int
        Tokens of every group.

    Returns
    -------
    index_query, index_key : torch.Tensor
        Query row and key row of every edge, shape ``(Σ nnz_i,)``, sorted by query row.
    """
    slots = fused_slots(pairs, sizes)
    cpu = all(t.device.type == "cpu" and s.device.type == "cpu" for t, s in edges)
    queries, keys = [], []
    for i, ((source, target), (t, s)) in enumerate(zip(pairs, edges)):
        if cpu:
            t, s = t.numpy(), s.numpy()
        targets, sources = slots.targets[target], slots.sources[source]
        queries.append(t * len(targets) + (slots.q_offsets[target] + targets.index(i)))
        keys.append(s * len(sources) + (slots.kv_offsets[source] + sources.index(i)))
    if not cpu:
        query, key = torch.cat(queries), torch.cat(keys)
        order = torch.argsort(query, stable=True)
        return query[order], key[order]
    query, key = np.concatenate(queries), np.concatenate(keys)
    order = stable_argsort(torch.from_numpy(query), slots.q_offsets[-1]).numpy()
    return torch.from_numpy(query[order]), torch.from_numpy(key[order])


def fused_sparse_attention(
    x: Sequence[Tensor],
    blocks: Sequence[MultiHeadAttention],
    pairs: Sequence[tuple[int, int]],
    neighborhood: FusedNeighborhood,
    *,
    output_dropout: nn.Module | None = None,
) -> list[Tensor | None]:
    """Sum of the sparse blocks' outputs per target group, in one attention call.

    Parameters
    ----------
    x : sequence of torch.Tensor
        ``x[g]`` of shape ``(n_g, channels)``: the (normalised) tokens of every group.
    blocks : sequence of MultiHeadAttention
        The fused blocks, as given to :func:`prepare_fused`.
    pairs : sequence of (int, int)
        ``(source group, target group)`` of every block.
    neighborhood : FusedNeighborhood
        :func:`prepare_fused` of the blocks' neighbourhoods on groups of these sizes.
    output_dropout : torch.nn.Module, optional
        Dropout applied to every block's output before the sum (the sublayer-output dropout of
        a transformer layer); with a positive rate in training each block's output is projected
        separately.

    Returns
    -------
    list of (torch.Tensor or None)
        Per group: ``Σ_{i: target_i = g} MHA_i(x_g, x_{source_i})``, ``(n_g, out_channels)``;
        ``None`` for a group that no block targets.
    """
    first = _check_blocks(blocks)
    sizes = tuple(xg.shape[0] for xg in x)
    slots = fused_slots(pairs, sizes)
    projections: list[tuple[Tensor, Tensor | None] | None] = []
    outputs: list[tuple[Tensor, Tensor | None] | None] = []
    cardinality: list[Tensor | None] | None = [] if first.kernel.cardinality else None
    for g in range(len(x)):
        lins = [blocks[i].lin_query for i in slots.targets[g]]
        lins += [blocks[i].lin_key for i in slots.sources[g]]
        lins += [blocks[i].lin_value for i in slots.sources[g]]
        projections.append(_stacked_weights(lins, dim=0) if lins else None)
        outs = [blocks[i].lin_out for i in slots.targets[g]]
        outputs.append(_stacked_weights(outs, dim=1) if outs else None)
        if cardinality is not None:
            weights = [blocks[i].cardinality_weight for i in slots.targets[g]]
            cardinality.append(torch.stack(weights) if weights else None)
    return fused_sparse_attention_weights(
        x,
        first.kernel,
        pairs,
        neighborhood,
        projections,
        outputs,
        head_channels=first.head_channels,
        value_channels=first.value_channels,
        output_dropout=output_dropout,
        cardinality=cardinality,
    )


def fused_sparse_attention_weights(
    x: Sequence[Tensor],
    kernel: SparseKernel,
    pairs: Sequence[tuple[int, int]],
    neighborhood: FusedNeighborhood,
    projections: Sequence[tuple[Tensor, Tensor | None] | None],
    outputs: Sequence[tuple[Tensor, Tensor | None] | None],
    *,
    head_channels: int,
    value_channels: int,
    output_dropout: nn.Module | None = None,
    cardinality: Sequence[Tensor | None] | None = None,
) -> list[Tensor | None]:
    r""":func:`fused_sparse_attention` on weights already stacked per group.

    The blocks of :func:`fused_sparse_attention` are given by their stacked projection
    matrices: a layer that stores them stacked (one parameter per group,
    :class:`~topomodelx_attention.nn.cell.CellularTransformerLayer`) runs its GEMMs on its
    parameters as they are.

    Parameters
    ----------
    x : sequence of torch.Tensor
        ``x[g]`` of shape ``(n_g, channels)``: the (normalised) tokens of every group.
    kernel : SparseKernel
        The sparse kernel of every block (scale, attention dropout).
    pairs : sequence of (int, int)
        ``(source group, target group)`` of every block.
    neighborhood : FusedNeighborhood
        :func:`prepare_fused` (or :func:`prepare_fused_index`) of the blocks' neighbourhoods.
    projections : sequence of ((torch.Tensor, torch.Tensor or None) or None)
        Per group ``g``: ``(W, b)`` of ``nn.Linear`` convention, ``W`` of shape
        ``(n_q·H·d_head + n_kv·H·d_head + n_kv·H·d_value, channels)``: the query maps of the
        blocks whose target is ``g``, then the key maps and the value maps of the blocks whose
        source is ``g`` (blocks in the order of :class:`FusedSlots`); ``None`` for a group
        no block reads.
    outputs : sequence of ((torch.Tensor, torch.Tensor or None) or None)
        Per target group: ``(W_O, b_O)`` with ``W_O = [W_{O,1} | W_{O,2} | …]`` of shape
        ``(out_channels, n_t·H·d_value)`` (column blocks in slot order) and ``b_O`` of shape
        ``(n_t, out_channels)`` (one bias per block) or ``None``.
    head_channels, value_channels : int
        Width of a head's queries / keys and of its values.
    output_dropout : torch.nn.Module, optional
        As in :func:`fused_sparse_attention`.
    cardinality : sequence of (torch.Tensor or None), optional
        The kernel's ``cardinality`` term: per target group, the weights ``w`` of its blocks
        stacked, shape ``(n_t, heads, value_channels)`` (slot order); each block's attention
        output gains ``w ⊙ Σ_{s∈N(t)} v_s`` before the output projection. ``None``: no term.

    Returns
    -------
    list of (torch.Tensor or None)
        As :func:`fused_sparse_attention`.
    """
    heads = kernel.heads
    sizes = tuple(xg.shape[0] for xg in x)
    slots = fused_slots(pairs, sizes)
    q_width, v_width = heads * head_channels, heads * value_channels
    # one GEMM per group: X_g [W_Q of its target blocks | W_K, W_V of its source blocks]
    projected, widths = [], []
    for g, xg in enumerate(x):
        n_q, n_kv = len(slots.targets[g]), len(slots.sources[g])
        widths.append((n_q * q_width, n_kv * q_width, n_kv * v_width))
        projected.append(None if projections[g] is None else F.linear(xg, *projections[g]))
    query, key, value = _split_projections(projected, widths)
    out = kernel(
        query.view(-1, heads, head_channels),
        key.view(-1, heads, head_channels),
        value.view(-1, heads, value_channels),
        neighborhood.index,
        plan=neighborhood.plan,
    )
    totals = None
    if cardinality is not None:  # Σ_{s∈N(t)} v_s of every query row (every block's own)
        totals = neighborhood_sum(
            value.view(-1, heads, value_channels),
            neighborhood.index,
            out.shape[0],
            plan=neighborhood.plan,
        )
    return _block_outputs(
        out, totals, slots, outputs, cardinality, sizes, heads, value_channels, output_dropout
    )


def _block_outputs(
    out: Tensor,
    totals: Tensor | None,
    slots: FusedSlots,
    outputs: Sequence[tuple[Tensor, Tensor | None] | None],
    cardinality: Sequence[Tensor | None] | None,
    sizes: Sequence[int],
    heads: int,
    value_channels: int,
    output_dropout: nn.Module | None,
) -> list[Tensor | None]:
    """Project the fused call's rows of every block by its output map, summed per target group.

    ``out`` (and ``totals``, the cardinality term's neighbourhood sums): the kernel's rows of
    every block, in slot order; the rest as :func:`fused_sparse_attention_weights` takes it.
    """
    v_width = heads * value_channels
    per_block_dropout = (
        output_dropout is not None
        and output_dropout.training
        and getattr(output_dropout, "p", 1.0) > 0.0
    )
    # one split per table: its backward concatenates the groups' gradients, where a slice per
    # group would fill a zero tensor of the whole table for each and add them up
    q_rows = [stop - start for start, stop in zip(slots.q_offsets[:-1], slots.q_offsets[1:])]
    out_groups = out.split(q_rows)
    total_groups = None if totals is None else totals.split(q_rows)
    update: list[Tensor | None] = [None] * len(sizes)
    for g, targets in enumerate(slots.targets):
        if not targets:
            continue
        rows = out_groups[g]
        if total_groups is not None:
            total = total_groups[g]
            rows = rows + (
                total.view(sizes[g], len(targets), heads, value_channels) * cardinality[g]
            ).view_as(rows)
        rows = rows.reshape(sizes[g], len(targets) * v_width)
        weight, bias = outputs[g]
        if per_block_dropout:  # dropout on each block's output, as the per-block sum
            pieces = rows.split(v_width, dim=1)
            weights = weight.split(v_width, dim=1)
            biases = [None] * len(targets) if bias is None else bias.unbind(0)
            update[g] = sum(
                output_dropout(F.linear(piece, w, b))
                for piece, w, b in zip(pieces, weights, biases)
            )
        else:
            # output dropout is the identity here (eval or p = 0)
            update[g] = F.linear(rows, weight, None if bias is None else bias.sum(0))
    return update


class _SplitProjections(torch.autograd.Function):
    """Gather the query, key and value columns of every group's projection into three tables.

    ``projected[g]`` is ``X_g [W_Q… | W_K… | W_V…]`` of shape ``(n_g, q_g + k_g + v_g)``;
    the outputs are the row-wise concatenations over the groups of its three column blocks,
    each written once. Backward assembles the gradient of every ``projected[g]`` with one
    concatenation (autograd's slicing would build a zero-filled full-size gradient per block
    and add them up).
    """

    @staticmethod
    def forward(ctx, widths, *projected):
        ctx.widths, ctx.rows = widths, [None if p is None else p.shape[0] for p in projected]
        reference = next(p for p in projected if p is not None)
        tables = []
        for part in range(3):
            pieces = _column_blocks(projected, widths, part)
            table = reference.new_empty(sum(piece.numel() for piece in pieces))
            start = 0
            for piece in pieces:  # one copy per block, straight into the table
                table[start : start + piece.numel()].view_as(piece).copy_(piece)
                start += piece.numel()
            tables.append(table)
        return tuple(tables)

    @staticmethod
    def backward(ctx, *grads):
        out, starts = [], [0, 0, 0]
        for rows, w in zip(ctx.rows, ctx.widths):
            if rows is None:
                out.append(None)
                continue
            pieces = []
            for part in range(3):
                size = rows * w[part]
                pieces.append(grads[part][starts[part] : starts[part] + size].view(rows, w[part]))
                starts[part] += size
            out.append(torch.cat(pieces, dim=1))
        return (None, *out)


def _split_projections(
    projected: Sequence[Tensor | None], widths: Sequence[tuple[int, int, int]]
) -> tuple[Tensor, Tensor, Tensor]:
    """Query, key and value tables (flat) from the per-group stacked projections.

    :class:`_SplitProjections` in eager mode; plain slicing and concatenation while
    ``torch.compile`` traces.
    """
    if torch.compiler.is_compiling():
        return tuple(
            torch.cat([piece.reshape(-1) for piece in _column_blocks(projected, widths, part)])
            for part in range(3)
        )
    return _SplitProjections.apply(tuple(widths), *projected)


def _column_blocks(
    projected: Sequence[Tensor | None], widths: Sequence[tuple[int, int, int]], part: int
) -> list[Tensor]:
    """Column block ``part`` (0: queries, 1: keys, 2: values) of every group that has one."""
    return [
        p[:, sum(w[:part]) : sum(w[: part + 1])]
        for p, w in zip(projected, widths)
        if p is not None and w[part]
    ]


def _stacked_weights(lins: Sequence[nn.Linear], dim: int) -> tuple[Tensor, Tensor | None]:
    """Weights of several linear maps stacked (``dim=0``: outputs, ``dim=1``: inputs), biases.

    ``dim=0``: ``[W_1; W_2; …]`` and ``[b_1 | b_2 | …]`` (one GEMM gives every map's output);
    ``dim=1``: ``[W_1 | W_2 | …]`` and the biases as rows ``(n, out)`` (one GEMM gives the sum
    of the maps of concatenated inputs).
    """
    if len(lins) == 1 and dim == 0:
        return lins[0].weight, lins[0].bias
    weight = torch.cat([lin.weight for lin in lins], dim=dim)
    if lins[0].bias is None:
        return weight, None
    biases = [lin.bias for lin in lins]
    return weight, torch.cat(biases) if dim == 0 else torch.stack(biases)
