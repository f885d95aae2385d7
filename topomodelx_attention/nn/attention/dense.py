r"""Dense attention: all pairs inside every complex, optional θ·N bias (Eq. 2/3, dense kind).

:math:`\mathrm{softmax}(\mathrm{scale}\; Q K^\top + \theta N) V` per complex, with
:math:`\star` = sum and :math:`\phi(N) = \theta N`. Targets and sources are padded per complex
(:class:`~topomodelx_attention.nn.attention.layout.PaddedLayout`) and fed to one
:func:`torch.nn.functional.scaled_dot_product_attention` call with a key-padding mask; the bias
is scattered into a ``(B, 1 or heads, Lt, Ls)`` float mask. No ``n_target × n_source`` matrix
is ever built. In training with attention dropout, the scores, softmax and dropout factors are
materialised per size group (:func:`~topomodelx_attention.nn.attention.layout.size_groups`):
complexes of similar size padded to their own largest one, not to the batch's; under
``torch.compile`` the grouped kernel runs eagerly inside one custom op (the groups are
data-dependent), with the same factors as eager for the same generator state.

**Size check.** Memory is quadratic in the largest complex of a batch (every complex is padded
to it): one ``(B, heads, Lt, Ls)`` tensor of scores or bias takes
``B × heads × Lt × Ls × bytes`` (:func:`dense_attention_bytes`; a forward with a bias and its
backward hold a few). Both functions check that size against a budget **before** allocating
(``memory_budget``, default :data:`DENSE_MEMORY_BUDGET`, read at call time) and raise a
``ValueError`` that names the sizes and the alternatives (``kind="sparse"``, masked by a
neighbourhood, memory linear in its nonzeros; ``kind="linear"``, Performer, linear in the
tokens) instead of torch's allocation error: general cellular attention on 6·10⁴ cells asked
for 14 GB.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.nn.attention.dropout import dropout_factors, softmax_dropout
from topomodelx_attention.nn.attention.heads import check_dropout, resolve_scale
from topomodelx_attention.nn.attention.layout import (
    SIZE_GROUP_OVERHEAD,
    LayoutArg,
    PaddedLayout,
    SizeGroup,
    _size_groups,
    qkv_layouts,
    size_groups,
)
from topomodelx_attention.nn.attention.neighborhood import (
    Neighborhood,
    PaddedBias,
    neighborhood_index,
)

__all__ = [
    "DENSE_MEMORY_BUDGET",
    "check_dense_size",
    "dense_attention",
    "dense_attention_bytes",
    "dense_attention_weights",
]

DENSE_MEMORY_BUDGET: int = 4 * 2**30
"""Default budget (bytes, 4 GiB) of one ``(B, heads, Lt, Ls)`` tensor of dense attention.

A batch of 256 ZINC molecules (≤ 38 atoms) with 8 heads needs 6 MiB per rank; the GCB
complexes (≤ 1,142 ordered TokenGT tokens) 0.3 GiB in batches of 16 with 4 heads. Change it
per call (``memory_budget=``), per kernel (``DenseKernel(memory_budget=...)``) or for the
process (``topomodelx_attention.nn.attention.dense.DENSE_MEMORY_BUDGET = ...``, read at call
time, so that it applies to every model)."""


@fill_doc
def dense_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    batch_target: Tensor | None = None,
    batch_source: Tensor | None = None,
    *,
    bias: Neighborhood | None = None,
    bias_scale: Tensor | float | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
    num_complexes: int | None = None,
    layout: LayoutArg | None = None,
    memory_budget: int | None = None,
) -> Tensor:
    r"""All-pairs multi-head attention in every complex, with an optional θ·N bias (Eq. 2, dense).

    For every complex ``b``, head ``h``, target ``t`` and source ``s`` of ``b``:
    :math:`e_{ts} = \mathrm{scale}\,\langle q_t, k_s\rangle + \theta_h N_{ts}`
    (:math:`\star` = sum, :math:`\phi(N) = \theta N`), softmax over the sources of ``b``.
    Computed per complex block: tokens are padded to ``(B, heads, L_max, d)`` and fed to
    :func:`torch.nn.functional.scaled_dot_product_attention` with a key-padding mask; the bias
    is scattered into a ``(B, 1 or heads, Lt_max, Ls_max)`` float mask.

    Parameters
    ----------
    %(qkv)s
    %(batches)s
    bias : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
        Neighbourhood ``N`` of shape ``(n_target, n_source)`` (sparse tensor whose values,
        shape ``(nnz,)`` or hybrid ``(nnz, heads)``, are used, an index pair meaning values 1,
        or a prepared ``NeighborhoodIndex``). Must be block-diagonal w.r.t. the batch vectors;
        entries linking two different complexes are ignored. Pairs not stored in ``N`` get
        bias 0. Or a :class:`~topomodelx_attention.nn.attention.neighborhood.PaddedBias`: the bias
        of every pair already on the padded grid, ``(B, 1 or heads, Lt, Ls)``.
    bias_scale : torch.Tensor or float, shape = () or (1,) or (heads,), optional
        The learnable :math:`\theta` multiplying ``N`` (one per head or shared). ``None``
        means 1 (values of ``bias`` already pre-multiplied).
    %(scale)s
    %(dropout)s
    %(num_complexes)s
    layout : PaddedLayout or tuple of PaddedLayout, optional
        Precomputed padding (:func:`~topomodelx_attention.nn.attention.padded_layout`): one
        layout for self-attention (``n_target = n_source = layout.num_tokens``) or the pair
        ``(target_layout, source_layout)`` for cross-attention. Replaces the batch vectors
        (``num_complexes`` must then be ``None`` or equal), tokens need not be sorted, and the
        call has no data-dependent size (``torch.compile`` without graph breaks). Use it to
        pay the index arithmetic once for a stack of layers.
    memory_budget : int, optional
        Largest ``(B, heads, Lt, Ls)`` tensor allowed, in bytes (default
        :data:`DENSE_MEMORY_BUDGET`); checked before anything quadratic is allocated.

    Returns
    -------
    %(attention_output)s

    Raises
    ------
    ValueError
        When ``B × heads × Lt × Ls × bytes`` exceeds ``memory_budget``
        (:func:`check_dense_size`).
    """
    check_dropout(dropout_p)
    target, source, attn_mask = _prepare(
        query, key, value, batch_target, batch_source,
        bias, bias_scale, num_complexes, layout, memory_budget,
    )
    q, k, v = target._heads(query), source._heads(key), source._heads(value)
    scale = resolve_scale(scale, query.shape[2])
    if training and dropout_p > 0.0 and torch.compiler.is_compiling():
        # the size groups are data-dependent: the whole grouped kernel is one opaque op
        out = _GROUPED_DROPOUT_ATTENTION(
            q, k, v, attn_mask, target.counts, source.counts, scale, dropout_p
        )[0]
    elif training and dropout_p > 0.0:
        groups = None
        grid = target.num_complexes * target.length * source.length
        # a grid larger than one group's overhead (else one group is the optimum): _groups
        if grid > SIZE_GROUP_OVERHEAD:
            groups = size_groups(target, source)  # cached on the layout for self-attention
        out = _dropout_attention(q, k, v, attn_mask, scale, dropout_p, groups)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)
    return target._unheads(out)  # from (B, heads, Lt, d_v)


def _groups(
    target_counts: Tensor, source_counts: Tensor, length: int, source_length: int
) -> tuple[SizeGroup, ...] | None:
    """Return the size groups of a dropout call, or ``None`` for one padded block (eager).

    One block when the grid is no larger than one group's overhead (one group is then the
    optimum), else the partition of :func:`~.layout.size_groups`.
    """
    if target_counts.shape[0] * length * source_length <= SIZE_GROUP_OVERHEAD:
        return None
    key = (tuple(target_counts.tolist()), tuple(source_counts.tolist()), target_counts.device)
    groups = _RECENT_GROUPS.pop(key, None)
    if groups is None:
        groups = _size_groups(target_counts, source_counts)
    _RECENT_GROUPS[key] = groups  # the most recent last
    while len(_RECENT_GROUPS) > 8:
        del _RECENT_GROUPS[next(iter(_RECENT_GROUPS))]
    return groups


_RECENT_GROUPS: dict[tuple, tuple[SizeGroup, ...]] = {}
"""The groups of the last few count vectors :func:`_groups` saw: the custom ops run once per
layer and again in the backward on the same batch, where eager reads them cached on the layout."""


def _blocks(
    q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, groups: tuple[SizeGroup, ...] | None
) -> list[tuple[Tensor | None, Tensor, Tensor, Tensor, Tensor | None]]:
    """Return the blocks a dropout call attends: ``(complexes, q, k, v, mask)`` per block.

    One block ``(None, q, k, v, attn_mask)`` without groups (or when a single group is the
    whole grid); else one per group, its complexes selected and cut to the group's lengths
    (none when no complex has both targets and sources).
    """
    num, length = q.shape[0], q.shape[2]
    if groups is None or (
        len(groups) == 1
        and groups[0].complexes.shape[0] == num
        and (groups[0].length, groups[0].source_length) == (length, k.shape[2])
    ):
        return [(None, q, k, v, attn_mask)]
    grid_masks = None
    if attn_mask is not None and attn_mask.shape[-2] > 1:
        # a bias on the whole (B, ·, Lt, Ls) grid: one selection for all groups, split by group
        # (a selection per group would allocate and fill a full-grid gradient per group)
        grid_masks = attn_mask.index_select(0, torch.cat([g.complexes for g in groups])).split(
            [g.complexes.shape[0] for g in groups]
        )
    blocks = []
    for number, group in enumerate(groups):
        index, size_t, size_s = group.complexes, group.length, group.source_length
        qg = _take(q, index, size_t)
        kg, vg = (_take(t, index, size_s) for t in (k, v))
        mask = None
        if grid_masks is not None:
            mask = grid_masks[number][..., :size_t, :size_s]
        elif attn_mask is not None and not (group.full and attn_mask.dtype == torch.bool):
            mask = attn_mask.index_select(0, index)[..., :size_s]
        blocks.append((index, qg, kg, vg, mask))
    return blocks


def _dropout_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None,
    scale: float,
    dropout_p: float,
    groups: tuple[SizeGroup, ...] | None = None,
) -> Tensor:
    """``softmax(scale q kᵀ + mask)`` with attention dropout, times ``v`` (training, eager).

    What the math path of ``scaled_dot_product_attention`` computes when it drops weights (its
    flash path takes no dropout on CPU), through :func:`.dropout.softmax_dropout`: factors from
    ``torch.rand`` instead of ``bernoulli_`` (tokengt training step 25.7 → 22.6 ms eager).
    ``attn_mask`` never masks a whole row (complexes without sources attend to their zero
    slots).

    With ``groups`` (:func:`~.layout.size_groups` of the call's layouts), the scores, their
    softmax and the dropout factors are built group by group, each group padded to its own
    largest complex instead of the batch's: the same attention (the padded entries get zero
    weight either way), with one factor draw per group, in group order, of shape
    ``(g, heads, Lt_g, Ls_g)``. GraphUniverse batches (50–300 nodes) then hold 0.5× the score
    entries; forward + backward 0.39× the time (``benchmarks/attention_core.py --groups``).
    Under ``torch.compile`` the same blocks run inside one custom op
    (``topomodelx_attention::grouped_dropout_attention``, :func:`_define_grouped_ops`).
    """
    blocks = _blocks(q, k, v, attn_mask, groups)
    if blocks and blocks[0][0] is None:
        return _dropped_block(q, k, v, attn_mask, scale, dropout_p)
    length = q.shape[2]
    parts = [
        F.pad(_dropped_block(qg, kg, vg, mask, scale, dropout_p), (0, 0, 0, length - qg.shape[2]))
        for _, qg, kg, vg, mask in blocks
    ]
    # complexes in no group (without targets or sources) keep zero output
    out = v.new_zeros((q.shape[0], q.shape[1], length, v.shape[3]))
    if not parts:
        return out
    return out.index_copy(0, torch.cat([b[0] for b in blocks]), torch.cat(parts))


def _scores(q: Tensor, k: Tensor, attn_mask: Tensor | None, scale: float) -> Tensor:
    """``scale q kᵀ`` with the mask applied (``-inf`` where a bool mask is False)."""
    scores = torch.matmul(q * scale, k.transpose(-2, -1))  # (B, heads, Lt, Ls)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return scores


def _dropped_block(
    q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, scale: float, dropout_p: float
) -> Tensor:
    """One padded block of :func:`_dropout_attention`: ``(B, heads, Lt, d)`` → ``(B, heads, Lt, d_v)``."""
    return torch.matmul(softmax_dropout(_scores(q, k, attn_mask, scale), dropout_p), v)


def _scores_dtype(q: Tensor, mask: Tensor | None) -> torch.dtype:
    """Return the dtype of ``scale q kᵀ + mask``: that of the queries, promoted by a float mask."""
    if mask is None or mask.dtype == torch.bool:
        return q.dtype
    return torch.promote_types(q.dtype, mask.dtype)


def _take(t: Tensor, index: Tensor | None, size_t: int) -> Tensor:
    """Select the rows ``index`` (``None``: all) of a ``(B, heads, Lt, d)`` tensor, cut to ``size_t``."""
    return t if index is None else t.index_select(0, index)[:, :, :size_t]


def _put(grid: Tensor | None, index: Tensor | None, block: Tensor) -> Tensor:
    """Write a block into the rows ``index`` of a zero grid (``None``: the block is the grid)."""
    if index is None:
        return block
    grid[(index, slice(None), *(slice(0, n) for n in block.shape[2:]))] = block
    return grid


def _saved_blocks(
    saved: Tensor, blocks: list, heads: int
) -> list[tuple[Tensor, Tensor]]:
    """Return the ``(probabilities, factors)`` views of every block in the op's saved buffer."""
    views, offset = [], 0
    for _, qg, kg, _, _ in blocks:
        shape = (qg.shape[0], heads, qg.shape[2], kg.shape[2])
        size = math.prod(shape)
        probs = saved[offset : offset + size].view(shape)
        factors = saved[offset + size : offset + 2 * size].view(shape)
        views.append((probs, factors))
        offset += 2 * size
    return views


def _block_backward(
    grad: Tensor, q: Tensor, k: Tensor, v: Tensor, probs: Tensor, factors: Tensor, scale: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Gradients of ``(softmax(scale q kᵀ + mask) ⊙ factors) v`` for q, k, v and the scores."""
    grad_v = torch.matmul((probs * factors).transpose(-2, -1), grad)
    grad_weights = torch.matmul(grad, v.transpose(-2, -1)) * factors
    grad_scores = torch._softmax_backward_data(grad_weights, probs, -1, probs.dtype)
    grad_q = torch.matmul(grad_scores, k) * scale
    grad_k = torch.matmul(grad_scores.transpose(-2, -1), q) * scale
    return grad_q, grad_k, grad_v, grad_scores


def _define_grouped_ops() -> object:
    """Define the grouped dropout attention op once per process (a reloaded module finds it).

    ``topomodelx_attention::grouped_dropout_attention(q, k, v, mask, target_counts,
    source_counts, scale, p)`` attends the blocks of :func:`_dropout_attention` eagerly: the
    size groups of the counts (:func:`_groups`), per block the scores, ATen's softmax and one
    draw of :func:`~.dropout.dropout_factors` (the factors eager mode draws for the same
    generator state). It returns the output and one flat buffer holding the softmax
    probabilities and the factors of every block, one after the other, which the backward op
    reads as views: its length is that of two padded grids (a size the graph knows), of which
    the blocks fill a prefix (never written elsewhere, never zeroed). A traced graph cannot group
    (the groups are data-dependent): without the op the compiled kernel attended the whole
    padded grid, slower than eager on batches of complexes of unequal sizes. Tagged
    ``nondeterministic_seeded``: the partitioner saves its outputs instead of recomputing it.
    """
    namespace = torch.ops.topomodelx_attention
    if hasattr(namespace, "grouped_dropout_attention"):
        return namespace.grouped_dropout_attention

    @torch.library.custom_op(
        "topomodelx_attention::grouped_dropout_attention",
        mutates_args=(),
        tags=(torch.Tag.nondeterministic_seeded,),
    )
    def forward_op(
        q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, target_counts: Tensor,
        source_counts: Tensor, scale: float, p: float,
    ) -> tuple[Tensor, Tensor]:
        groups = _groups(target_counts, source_counts, q.shape[2], k.shape[2])
        blocks = _blocks(q, k, v, mask, groups)
        dtype = _scores_dtype(q, mask)
        saved = q.new_empty((2 * q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2],), dtype=dtype)
        single = bool(blocks) and blocks[0][0] is None
        out = None if single else v.new_zeros((*q.shape[:3], v.shape[3]))
        for (index, qg, kg, vg, mask_g), (probs, factors) in zip(blocks, _saved_blocks(saved, blocks, q.shape[1])):
            torch._softmax(_scores(qg, kg, mask_g, scale).to(dtype), -1, False, out=probs)
            dropout_factors(probs.shape, p, dtype=dtype, device=probs.device, out=factors)
            out = _put(out, index, torch.matmul(probs * factors, vg.to(dtype)).to(v.dtype))
        return out, saved

    @forward_op.register_fake
    def _(q, k, v, mask, target_counts, source_counts, scale, p):
        size = 2 * q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]
        return q.new_empty((*q.shape[:3], v.shape[3]), dtype=v.dtype), q.new_empty((size,), dtype=_scores_dtype(q, mask))

    @torch.library.custom_op("topomodelx_attention::grouped_dropout_attention_backward", mutates_args=())
    def backward_op(
        grad: Tensor, q: Tensor, k: Tensor, v: Tensor, saved: Tensor, target_counts: Tensor,
        source_counts: Tensor, scale: float, scores_grad: bool,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        groups = _groups(target_counts, source_counts, q.shape[2], k.shape[2])
        blocks = _blocks(q, k, v, None, groups)
        grid = (*q.shape[:3], k.shape[2])
        inputs = (q, k, v, saved) if scores_grad else (q, k, v)  # the dtype of every gradient
        if bool(blocks) and blocks[0][0] is None:
            grads: list[Tensor | None] = [None] * len(inputs)
        else:
            grads = [t.new_zeros(t.shape) for t in (q, k, v)] + [saved.new_zeros(grid)] * scores_grad
        dtype = saved.dtype  # the blocks' arithmetic, as in the forward
        for (index, qg, kg, vg, _), (probs, factors) in zip(blocks, _saved_blocks(saved, blocks, q.shape[1])):
            block_grad = _take(grad, index, qg.shape[2]).to(dtype)
            block_grads = _block_backward(block_grad, qg.to(dtype), kg.to(dtype), vg.to(dtype), probs, factors, scale)
            for number, (block, like) in enumerate(zip(block_grads, inputs)):
                grads[number] = _put(grads[number], index, block.to(like.dtype))
        if not scores_grad:
            grads.append(saved.new_empty((0,)))
        return tuple(g.contiguous() for g in grads)

    @backward_op.register_fake
    def _(grad, q, k, v, saved, target_counts, source_counts, scale, scores_grad):
        grid = (*q.shape[:3], k.shape[2])
        return (*(t.new_empty(t.shape) for t in (q, k, v)), saved.new_empty(grid if scores_grad else (0,)))

    def setup_context(ctx, inputs, output) -> None:
        q, k, v, mask, target_counts, source_counts, scale, _ = inputs
        ctx.save_for_backward(q, k, v, output[1], target_counts, source_counts)
        ctx.scale = scale
        ctx.mask_shape = None if mask is None or mask.dtype == torch.bool else mask.shape

    def backward(ctx, grad: Tensor, grad_saved: Tensor | None):
        q, k, v, saved, target_counts, source_counts = ctx.saved_tensors
        scores_grad = ctx.mask_shape is not None and ctx.needs_input_grad[3]
        grad_q, grad_k, grad_v, grad_scores = backward_op(
            grad.contiguous(), q, k, v, saved, target_counts, source_counts, ctx.scale, scores_grad
        )
        grad_mask = grad_scores.sum_to_size(ctx.mask_shape) if scores_grad else None
        return grad_q, grad_k, grad_v, grad_mask, None, None, None, None

    forward_op.register_autograd(backward, setup_context=setup_context)
    return forward_op


_GROUPED_DROPOUT_ATTENTION = _define_grouped_ops()


@fill_doc
def dense_attention_weights(
    query: Tensor,
    key: Tensor,
    batch_target: Tensor | None = None,
    batch_source: Tensor | None = None,
    *,
    bias: Neighborhood | None = None,
    bias_scale: Tensor | float | None = None,
    scale: float | None = None,
    num_complexes: int | None = None,
    layout: LayoutArg | None = None,
    memory_budget: int | None = None,
) -> Tensor:
    r"""Return the attention probabilities of :func:`dense_attention`, per complex, padded.

    :math:`\alpha^h_{ts} = \mathrm{softmax}_s(\mathrm{scale}\,\langle q_t, k_s\rangle +
    \theta_h N_{ts})` inside every complex, materialised as a ``(B, heads, Lt, Ls)`` tensor
    (memory quadratic in the largest complex: meant for inspection, visualisation and for
    supervising attention maps, e.g. the equivariant-basis experiment of TokenGT §5.1; use
    :func:`dense_attention` to attend). Differentiable.

    Parameters
    ----------
    %(query)s
    %(key)s
    %(batch_pair)s
    bias : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
        Neighbourhood bias ``N`` as in :func:`dense_attention`.
    bias_scale : torch.Tensor or float, optional
        :math:`\theta` as in :func:`dense_attention`.
    %(scale)s
    %(num_complexes)s
    layout : PaddedLayout or tuple of PaddedLayout, optional
        Precomputed layout(s) as in :func:`dense_attention` (then slot ``p`` of graph ``b`` is
        the token ``t`` with ``layout.index[t] = b * L + p``).

    Returns
    -------
    torch.Tensor, shape = (B, heads, Lt, Ls)
        ``out[b, h, i, j]``: weight of the ``j``-th source of complex ``b`` for its ``i``-th
        target (positions in the order of the tokens inside the complex, or the layout's
        slots). Rows sum to one over the real sources; padded source columns, padded target
        rows and rows of complexes without sources are zero.

    Other Parameters
    ----------------
    memory_budget : int, optional
        As in :func:`dense_attention` (the returned tensor itself has this size).
    """
    if not isinstance(query, Tensor) or not isinstance(key, Tensor):
        raise TypeError("query and key must be tensors")
    target, source, attn_mask = _prepare(
        query, key, key, batch_target, batch_source,
        bias, bias_scale, num_complexes, layout, memory_budget,
    )
    q, k = target._heads(query), source._heads(key)
    scores = torch.matmul(q * resolve_scale(scale, query.shape[2]), k.transpose(-2, -1))
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask  # θ·N bias (its -inf entries repeat the key mask below)
    num_b = source.num_complexes
    valid_s = source.key_valid
    has_source = valid_s.any(-1)  # (B,)
    scores = scores.masked_fill(~valid_s.view(num_b, 1, 1, -1), float("-inf"))
    # complexes without any source: finite rows, zeroed below
    scores = scores.masked_fill(~has_source.view(num_b, 1, 1, 1), 0.0)
    weights = torch.softmax(scores, dim=-1)
    rows = target.key_valid & has_source.unsqueeze(1)  # (B, Lt)
    return weights * rows.view(num_b, 1, -1, 1).to(weights.dtype)


def _prepare(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    batch_target: Tensor | None,
    batch_source: Tensor | None,
    bias: Neighborhood | None,
    bias_scale: Tensor | float | None,
    num_complexes: int | None,
    layout: LayoutArg | None,
    memory_budget: int | None = None,
) -> tuple[PaddedLayout, PaddedLayout, Tensor | None]:
    """Check the inputs of both dense functions; return the ``(target, source)`` layouts and SDPA mask."""
    target, source = qkv_layouts(query, key, value, batch_target, batch_source, num_complexes, layout)
    check_dense_size(
        target.num_complexes,
        query.shape[1],
        target.length,
        source.length,
        query.dtype,
        memory_budget,
    )
    return target, source, _attention_mask(query, key, target, source, bias, bias_scale)


def dense_attention_bytes(
    num_complexes: int, heads: int, length_target: int, length_source: int, dtype: torch.dtype
) -> int:
    """Bytes of one ``(B, heads, Lt, Ls)`` tensor of ``dtype``: the unit of dense attention's memory.

    Parameters
    ----------
    num_complexes : int
        ``B``, complexes in the batch.
    heads : int
        Attention heads.
    length_target, length_source : int
        ``Lt`` / ``Ls``: target / source tokens of the largest complex (the padded length).
    dtype : torch.dtype
        Dtype of the queries.

    Returns
    -------
    int
        ``B × heads × Lt × Ls × dtype.itemsize``.
    """
    itemsize = torch.empty((), dtype=dtype).element_size()
    return int(num_complexes) * int(heads) * int(length_target) * int(length_source) * itemsize


def check_dense_size(
    num_complexes: int,
    heads: int,
    length_target: int,
    length_source: int,
    dtype: torch.dtype,
    memory_budget: int | None = None,
) -> None:
    """Refuse a dense attention whose ``(B, heads, Lt, Ls)`` tensor exceeds ``memory_budget``.

    Skipped inside ``torch.compile`` (the eager call that precedes it has checked the sizes; a
    size comparison there would add a guard).

    Parameters
    ----------
    num_complexes, heads, length_target, length_source : int
        ``B``, heads, ``Lt``, ``Ls`` (see :func:`dense_attention_bytes`).
    dtype : torch.dtype
        Dtype of the scores.
    memory_budget : int, optional
        Bytes allowed (default :data:`DENSE_MEMORY_BUDGET`, read at call time).

    Raises
    ------
    ValueError
        When the tensor would exceed the budget: the message gives its shape and size, and
        what to use instead (``kind="sparse"`` / ``kind="linear"``, a smaller batch, a larger
        ``memory_budget``).
    TypeError
        When ``memory_budget`` is not an integer.
    """
    if torch.compiler.is_compiling():
        return
    budget = _check_budget(memory_budget)
    need = dense_attention_bytes(num_complexes, heads, length_target, length_source, dtype)
    if need <= budget:
        return
    batch_hint = (
        f", a smaller batch (every complex is padded to the largest; {num_complexes} here)"
        if num_complexes > 1
        else ""
    )
    raise ValueError(
        f"dense attention would build a ({num_complexes}, {heads}, {length_target}, "
        f"{length_source}) tensor of {str(dtype).replace('torch.', '')} (complexes, heads, target "
        f"tokens, source tokens of the largest complex): {_gib(need)} > memory_budget "
        f'{_gib(budget)}. Use kind="sparse" (attention restricted to a neighbourhood, memory '
        'linear in its nonzeros) or kind="linear" (Performer, linear in the tokens)'
        f"{batch_hint}, or raise the budget: memory_budget= of dense_attention / DenseKernel, "
        "or topomodelx_attention.nn.attention.dense.DENSE_MEMORY_BUDGET for every model"
    )


def _check_budget(memory_budget: int | None) -> int:
    budget = DENSE_MEMORY_BUDGET if memory_budget is None else memory_budget
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(f"memory_budget must be an int (bytes), got {type(budget).__name__}")
    if budget < 1:
        raise ValueError(f"memory_budget must be a positive number of bytes, got {budget}")
    return budget


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**27 else f"{nbytes / 2**20:.1f} MiB"


def _attention_mask(
    query: Tensor,
    key: Tensor,
    target: PaddedLayout,
    source: PaddedLayout,
    bias: Neighborhood | None,
    bias_scale: Tensor | float | None,
) -> Tensor | None:
    """SDPA mask: the key-padding mask, plus the θ·N bias scattered into (B, 1|H, Lt, Ls)."""
    key_mask = source.key_mask
    if bias is None:
        return key_mask
    heads = query.shape[1]
    device = query.device
    theta = None
    if bias_scale is not None:
        theta = torch.as_tensor(bias_scale, dtype=query.dtype, device=device).reshape(-1)
    if isinstance(bias, PaddedBias):
        return _scaled_and_masked(_padded_grid(bias, query, target, source, theta), theta, key_mask)
    index_t, index_s, values = neighborhood_index(bias, query.shape[0], key.shape[0], name="bias")
    index_t = index_t.to(device)
    index_s = index_s.to(device)
    if values is None:
        values = query.new_ones((index_t.shape[0], 1))
    else:
        values = values.to(device=device, dtype=query.dtype)
        values = values.unsqueeze(1) if values.dim() == 1 else values.flatten(1)
    _check_widths(values.shape[1], theta, heads)
    num_b, length_t, length_s = target.num_complexes, target.length, source.length
    b = target.batch.index_select(0, index_t)
    same = b == source.batch.index_select(0, index_s)  # entries across complexes are dropped
    values = values * same.unsqueeze(1).to(values.dtype)
    pos_t = target.positions().index_select(0, index_t)
    pos_s = source.positions().index_select(0, index_s)
    row = (b * length_t + pos_t) * length_s + pos_s
    hv = values.shape[1]
    dense_n = values.new_zeros((num_b * length_t * length_s, hv)).index_add(0, row, values)
    attn_mask = dense_n.view(num_b, length_t, length_s, hv).permute(0, 3, 1, 2)
    return _scaled_and_masked(attn_mask, theta, key_mask)


def _check_widths(width: int, theta: Tensor | None, heads: int) -> None:
    """Raise unless the bias values and θ each give 1 or ``heads`` logits per pair."""
    widths = {width, 1 if theta is None else theta.shape[0]}
    if not widths <= {1, heads}:
        raise ValueError(
            f"bias values and bias_scale must give 1 or heads={heads} logits per entry, got "
            f"{width} and {None if theta is None else theta.shape[0]}; bias_scale "
            "must have shape (), (1,) or (heads,)"
        )


def _scaled_and_masked(attn_mask: Tensor, theta: Tensor | None, key_mask: Tensor | None) -> Tensor:
    """θ · bias, broadcast over the heads ``(B, 1 or heads, Lt, Ls)``; padding keys at -inf."""
    if theta is not None:
        attn_mask = attn_mask * theta.view(1, -1, 1, 1)
    if key_mask is not None:
        attn_mask = attn_mask.masked_fill(~key_mask, float("-inf"))
    return attn_mask


def _padded_grid(
    bias: PaddedBias,
    query: Tensor,
    target: PaddedLayout,
    source: PaddedLayout,
    theta: Tensor | None,
) -> Tensor:
    """Return the values of a bias given on the padded grid, checked against the layouts and θ."""
    values = bias.values
    heads = query.shape[1]
    grid = (target.num_complexes, target.length, source.length)
    if (
        values.dim() != 4
        or values.shape[1] not in (1, heads)
        or (values.shape[0], values.shape[2], values.shape[3]) != grid
    ):
        raise ValueError(
            f"a PaddedBias must have shape (B, 1 or heads, Lt, Ls) = ({grid[0]}, 1 or {heads}, "
            f"{grid[1]}, {grid[2]}) for these layouts, got {tuple(values.shape)}"
        )
    _check_widths(values.shape[1], theta, heads)
    return values.to(device=query.device, dtype=query.dtype)
