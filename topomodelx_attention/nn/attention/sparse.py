r"""Sparse attention: softmax restricted to the entries of a neighbourhood (Eq. 2, sparse kind).

For every head and stored entry ``(t, s)`` of the neighbourhood ``N`` (a mask:
:math:`\phi(N) = N`, :math:`\star` = Hadamard), scores :math:`\mathrm{scale}\,\langle q_t,
k_s\rangle`, softmax over the sources of every target, :math:`O(\mathrm{nnz} \cdot d)` time
and memory. Three executions of the same equations:

* eager, CPU, float32 / float64: one fused autograd function (:class:`_FusedSparseAttention`)
  that treats all heads as one CSR matrix on node-major rows (row ``t·H + h``: the contiguous
  ``(n, heads, d)`` tensors are its dense operands without a copy; SDDMM = ``sampled_addmm``,
  SpMM = CSR × dense), softmax and its gradient by segment reductions over the CSR rows, and
  keeps only ``nnz·heads``-sized tensors for backward. Its index plan
  (:class:`~.plan.SparsePlan`) can be built once per batch with :func:`~.plan.sparse_plan` and shared by every call on the same
  neighbourhood (the Cellular Transformer's layers do; its speed against the composable path:
  ``benchmarks/attention_core.py --sparse-backward``, numbers in ``benchmarks/README.md``);
* eager elsewhere (CUDA, other dtypes), and the fused kernel's double backward: the SDDMM /
  SpMM as chunked custom autograd functions that keep only ``(nnz, heads)`` tensors;
* while ``torch.compile`` traces: plain differentiable gathers and scatters (the compiler
  fuses them).
"""

from __future__ import annotations

import torch
from torch import Tensor

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.nn.attention.dropout import dropout_factors
from topomodelx_attention.nn.attention.heads import check_dropout, check_qkv, resolve_scale
from topomodelx_attention.nn.attention.neighborhood import (
    Neighborhood,
    neighborhood_index,
)
from topomodelx_attention.nn.attention.plan import (
    SparsePlan,
    build_plan,
    flat_positions,
    with_transpose,
)
from topomodelx_attention.nn.attention.scatter import (
    scatter_sum,
    segment_softmax,
)
from topomodelx_attention.nn.attention.sparse_op import (
    _csr,
    _rows,
    _spmm,
    csr_attention,
    csr_attention_backward,
    sparse_attention_csr,
)

__all__ = [
    "SPARSE_CHUNK_ELEMENTS",
    "neighborhood_sum",
    "sparse_attention",
]

#: Upper bound on the number of elements of one (edges, heads, d) gathered chunk of the
#: composable sparse kernels (the fused CPU kernel builds no such chunk): 4 MiB in float32, a
#: size the allocator reuses; larger neighbourhoods are processed in chunks.
SPARSE_CHUNK_ELEMENTS: int = 1 << 20


def _edge_chunk(row_elements: int) -> int:
    return max(1, SPARSE_CHUNK_ELEMENTS // max(1, row_elements))


def _gather_dot_impl(a: Tensor, b: Tensor, index_a: Tensor, index_b: Tensor) -> Tensor:
    """``(a[index_a] * b[index_b]).sum(-1)``: (n_a, H, d), (n_b, H, d) → (nnz, H), chunked."""
    nnz = index_a.shape[0]
    out = a.new_empty((nnz, a.shape[1]))
    chunk = _edge_chunk(a.shape[1] * a.shape[2])
    for start in range(0, nnz, chunk):
        stop = min(start + chunk, nnz)
        prod = a.index_select(0, index_a[start:stop]) * b.index_select(0, index_b[start:stop])
        torch.sum(prod, dim=-1, out=out[start:stop])
    return out


def _weighted_scatter_impl(
    weight: Tensor, src: Tensor, index_src: Tensor, index_dst: Tensor, dim_size: int
) -> Tensor:
    """``out[i] = Σ_{e: index_dst[e] = i} weight[e, :, None] * src[index_src[e]]``, chunked.

    ``weight`` (nnz, H), ``src`` (n_src, H, d) → (dim_size, H, d).
    """
    nnz = index_src.shape[0]
    chunk = _edge_chunk(src.shape[1] * src.shape[2])
    out = src.new_zeros((dim_size, src.shape[1], src.shape[2]))
    for start in range(0, nnz, chunk):
        stop = min(start + chunk, nnz)
        msg = weight[start:stop].unsqueeze(-1) * src.index_select(0, index_src[start:stop])
        out = scatter_sum(msg, index_dst[start:stop], dim_size, out=out)
    return out


class _GatherDot(torch.autograd.Function):
    """SDDMM ``scores[e] = <a[index_a[e]], b[index_b[e]]>`` per head; saves only a, b, indices."""

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor, index_a: Tensor, index_b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b, index_a, index_b)
        return _gather_dot_impl(a, b, index_a, index_b)

    @staticmethod
    def backward(ctx, grad: Tensor):
        a, b, index_a, index_b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = _WeightedScatter.apply(grad, b, index_b, index_a, a.shape[0])
        if ctx.needs_input_grad[1]:
            grad_b = _WeightedScatter.apply(grad, a, index_a, index_b, b.shape[0])
        return grad_a, grad_b, None, None


class _WeightedScatter(torch.autograd.Function):
    """SpMM ``out[i] = Σ_{e → i} weight[e] src[index_src[e]]`` per head; saves weight, src."""

    @staticmethod
    def forward(
        ctx, weight: Tensor, src: Tensor, index_src: Tensor, index_dst: Tensor, dim_size: int
    ) -> Tensor:
        ctx.save_for_backward(weight, src, index_src, index_dst)
        return _weighted_scatter_impl(weight, src, index_src, index_dst, dim_size)

    @staticmethod
    def backward(ctx, grad: Tensor):
        weight, src, index_src, index_dst = ctx.saved_tensors
        grad_weight = grad_src = None
        if ctx.needs_input_grad[0]:
            grad_weight = _GatherDot.apply(grad, src, index_dst, index_src)
        if ctx.needs_input_grad[1]:
            grad_src = _WeightedScatter.apply(weight, grad, index_dst, index_src, src.shape[0])
        return grad_weight, grad_src, None, None, None


# ----------------------------------------------------------------------------------------------
# fused CPU kernel: all heads as one node-major block CSR matrix (plan: nn/attention/plan.py)
# ----------------------------------------------------------------------------------------------
class _FusedSparseAttention(torch.autograd.Function):
    r"""Eq. 2 (sparse kind) as node-major block CSR products (see :class:`~.plan.SparsePlan`).

    The autograd Function of the eager CPU path around the kernel's math,
    :func:`~.sparse_op.csr_attention` and :func:`~.sparse_op.csr_attention_backward` (which
    the custom op of ``torch.compile`` runs too); it adds the edge bias and its gradient.

    All heads form one ``(n_t·H, n_s·H)`` CSR matrix whose row ``t·H + h`` holds head ``h`` of
    target ``t``: the SDDMM is one ``torch.sparse.sampled_addmm`` and every SpMM one CSR ×
    dense product (MKL on CPU) on the contiguous ``(n, H, d)`` tensors viewed as ``(n·H, d)``,
    with no ``(nnz, heads, d)`` intermediate and no layout copy. The softmax and its gradient
    run on the ``(nnz·H,)`` stored values with segment reductions over the CSR rows. Saved for
    backward: the inputs, the attention weights, the dropout scaling if any, and the plan
    (index tensors of ``nnz·heads`` entries; shared by every call when it was given). Under
    ``create_graph`` the backward differentiates :func:`_sparse_attention_composable`
    instead, so higher derivatives exist.
    """

    @staticmethod
    def forward(
        ctx,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        edge_bias: Tensor | None,
        plan: SparsePlan,
        scale: float,
        dropout_scale: Tensor | None,
    ) -> Tensor:
        heads = query.shape[1]
        bias = None if edge_bias is None else _to_storage(edge_bias.expand(-1, heads), plan)
        out, alpha = csr_attention(query, key, value, plan, scale, bias, dropout_scale)
        ctx.save_for_backward(query, key, value, edge_bias, alpha, dropout_scale)
        # index tensors only (nnz·heads each); shared by every call on the batch when the
        # plan was given, else built by this call and reused by its backward
        ctx.plan = plan
        ctx.scale = scale
        ctx.bias_heads = None if edge_bias is None else edge_bias.shape[1]
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        saved = ctx.saved_tensors
        query, key, value, _, alpha, dropout_scale = saved
        plan = ctx.plan
        if torch.is_grad_enabled():  # create_graph: differentiate the composable formulation
            return _FusedSparseAttention.backward_composable(ctx, grad, saved, plan)
        needs = tuple(ctx.needs_input_grad[:4])
        if needs[1] or needs[2]:
            plan = with_transpose(plan)
        grad_q, grad_k, grad_v, grad_scores = csr_attention_backward(
            grad, query, key, value, alpha, plan, ctx.scale, dropout_scale, needs
        )
        grad_bias = None
        if grad_scores is not None:
            grad_bias = _from_storage(grad_scores, plan)
            if ctx.bias_heads == 1:
                grad_bias = grad_bias.sum(1, keepdim=True)
        return grad_q, grad_k, grad_v, grad_bias, None, None, None

    @staticmethod
    def backward_composable(ctx, grad: Tensor, saved: tuple, plan: SparsePlan):
        """Backward through :func:`_sparse_attention_composable` (differentiable again)."""
        query, key, value, edge_bias, _, dropout_scale = saved
        inputs = (query, key, value, edge_bias)
        wanted = [x for x, need in zip(inputs, ctx.needs_input_grad[:4]) if need]
        weight_scale = None if dropout_scale is None else _from_storage(dropout_scale, plan)
        out = _sparse_attention_composable(
            query,
            key,
            value,
            plan.index_target,
            plan.index_source,
            ctx.scale,
            edge_bias,
            0.0,
            weight_scale,
        )
        grads = iter(torch.autograd.grad(out, wanted, grad, create_graph=True, allow_unused=True))
        result = [next(grads) if need else None for need in ctx.needs_input_grad[:4]]
        return (*result, None, None, None)


def _to_storage(per_edge: Tensor, plan: SparsePlan) -> Tensor:
    """``(nnz, heads)`` in the plan's edge order → ``(nnz·heads,)`` in CSR storage order."""
    per_edge = per_edge.t().reshape(-1)  # head-major, as the positions
    return torch.empty_like(per_edge).scatter_(0, flat_positions(plan.position), per_edge)


def _from_storage(stored: Tensor, plan: SparsePlan) -> Tensor:
    """``(nnz·heads,)`` in CSR storage order → ``(nnz, heads)`` in the plan's edge order."""
    heads_first = stored.index_select(0, flat_positions(plan.position))
    return heads_first.view(plan.heads, -1).t().contiguous()


# ----------------------------------------------------------------------------------------------
# sparse attention
# ----------------------------------------------------------------------------------------------
@fill_doc
def sparse_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    neighborhood: Neighborhood,
    *,
    scale: float | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
    edge_bias: Tensor | None = None,
    plan: SparsePlan | None = None,
) -> Tensor:
    r"""Multi-head attention restricted to the entries of a sparse neighbourhood (Eq. 2, sparse).

    For every head ``h`` and stored entry ``(t, s)`` of ``N``:
    :math:`e_{ts} = \mathrm{scale} \cdot \langle q_t, k_s \rangle + b_{ts}`,
    :math:`\alpha_{ts} = \mathrm{softmax}_{s \in N(t)}(e_{ts})`,
    :math:`o_t = \sum_{s \in N(t)} \alpha_{ts} v_s`. The values of ``N`` are ignored: ``N`` is a
    mask (:math:`\phi(N) = N`, :math:`\star` = Hadamard). Time and memory are
    :math:`O(\mathrm{nnz} \cdot \mathrm{heads} \cdot d)`; nothing of size
    ``n_target × n_source`` is built. Block structure (batching) is carried by ``N`` itself,
    which is block-diagonal after PyG batching.

    Parameters
    ----------
    %(qkv)s
    neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex
        Sparse ``(n_target, n_source)`` matrix, ``(2, nnz)`` edge index, pair
        ``(index_target, index_source)`` or a prepared
        :class:`~topomodelx_attention.nn.attention.neighborhood.NeighborhoodIndex` (the form to use
        under ``torch.compile``); see
        :func:`~topomodelx_attention.nn.attention.neighborhood.neighborhood_index`.
    %(scale)s
    %(dropout)s
    edge_bias : torch.Tensor, shape = (nnz,) or (nnz, heads) or (nnz, 1), optional
        Additive logits, in the order of the (coalesced) entries of ``neighborhood``.
    plan : SparsePlan, optional
        The CSR plan of ``neighborhood`` for ``heads`` heads (:func:`~.plan.sparse_plan`), built once
        and shared by every call on the same neighbourhood; used by the fused CPU kernel,
        ignored by the other executions. Without it the fused kernel builds its own per call.

    Returns
    -------
    torch.Tensor, shape = (n_target, heads, d_v)
        Attention output; zeros for targets without any source.
    """
    check_qkv(query, key, value)
    check_dropout(dropout_p)
    n_t, heads = query.shape[0], query.shape[1]
    index_t, index_s, _ = neighborhood_index(neighborhood, n_t, key.shape[0])
    index_t = index_t.to(query.device)
    index_s = index_s.to(query.device)
    index_t, index_s = index_t.contiguous(), index_s.contiguous()
    nnz = index_t.shape[0]
    if edge_bias is not None:
        edge_bias = _checked_edge_bias(edge_bias, nnz, heads).to(query.dtype)
    scale = resolve_scale(scale, query.shape[2])
    dropout_p = dropout_p if training else 0.0
    if plan is not None and not torch.compiler.is_compiling():
        _check_plan(plan, (n_t, key.shape[0]), nnz, heads)
    if _use_compiled_op(query, value, edge_bias, plan):
        return _fused_sparse_attention(query, key, value, plan, scale, edge_bias, dropout_p)
    if _use_fused(query, value, nnz):
        if plan is None:
            plan = build_plan(index_t, index_s, n_t, key.shape[0], heads, transposed=False)
        return _fused_sparse_attention(query, key, value, plan, scale, edge_bias, dropout_p)
    return _sparse_attention_composable(
        query, key, value, index_t, index_s, scale, edge_bias, dropout_p
    )



def _checked_edge_bias(edge_bias: Tensor, nnz: int, heads: int) -> Tensor:
    """``edge_bias`` as ``(nnz, 1 or heads)`` (a clear error for another shape)."""
    if edge_bias.dim() == 1:
        edge_bias = edge_bias.unsqueeze(-1)
    if edge_bias.dim() != 2 or edge_bias.shape[0] != nnz or edge_bias.shape[1] not in (1, heads):
        raise ValueError(
            f"edge_bias must have shape (nnz,), (nnz, 1) or (nnz, heads) = "
            f"({nnz}, {heads}), got {tuple(edge_bias.shape)}"
        )
    return edge_bias


def _check_plan(plan: SparsePlan, shape: tuple[int, int], nnz: int, heads: int) -> None:
    """Raise unless ``plan`` is the plan of a neighbourhood of this shape, size and heads."""
    if plan.shape != shape or plan.heads != heads or plan.nnz != nnz:
        raise ValueError(
            f"plan is for a {plan.shape} neighbourhood with {plan.nnz} entries and {plan.heads} "
            f"heads, but this call has {shape}, {nnz} entries and {heads} heads; "
            "build it with sparse_plan(neighborhood, heads) of the same neighbourhood"
        )

def neighborhood_sum(
    value: Tensor, neighborhood: Neighborhood, n_target: int, *, plan: SparsePlan | None = None
) -> Tensor:
    r"""Sum of the values of every target's neighbours, per head (the cardinality term).

    :math:`\sum_{s \in N(t)} v_s` for every target ``t`` and head: the unnormalised aggregation
    that a softmax, a weighted *mean*, cannot give (it does not see how many neighbours there
    are). The sparse kernel's ``cardinality`` option adds it, weighted, to the attention
    output (additive cardinality-preserving attention, Zhang & Xie 2020: the term of the
    N-simplicial transformer's ``cardinality``, here on a neighbourhood mask). The values of
    ``N`` are ignored, as in :func:`sparse_attention`.

    Parameters
    ----------
    value : torch.Tensor, shape = (n_source, heads, d_v)
        Head-split values.
    neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex
        The ``(n_target, n_source)`` mask, in any form :func:`sparse_attention` takes.
    n_target : int
        Number of targets.
    plan : SparsePlan, optional
        :func:`~.plan.sparse_plan` of the neighbourhood for ``heads`` heads: in eager CPU calls the
        sum is then one CSR × dense product on its pattern with unit values (its transposed
        pattern for the gradient, which it must hold when one is wanted), instead of a gather
        and a scatter of ``(nnz, heads, d_v)`` rows.

    Returns
    -------
    torch.Tensor, shape = (n_target, heads, d_v)
        The sums; zeros for a target without neighbours.
    """
    if (
        plan is not None
        and _use_fused(value, value, plan.nnz)
        and plan.shape == (n_target, value.shape[0])
        and plan.heads == value.shape[1]
        and (plan.crow_t is not None or not (torch.is_grad_enabled() and value.requires_grad))
    ):
        return _CsrSum.apply(value, plan)
    index_t, index_s, _ = neighborhood_index(neighborhood, n_target, value.shape[0])
    index_t = index_t.to(value.device).contiguous()
    index_s = index_s.to(value.device).contiguous()
    ones = value.new_ones((index_t.shape[0], value.shape[1]))
    return _weighted_scatter(ones, value, index_s, index_t, n_target)


class _CsrSum(torch.autograd.Function):
    """``Σ_{s∈N(t)} v_s`` per head as one CSR × dense product on a plan's pattern (unit values).

    Backward is the product with the transposed pattern; under ``create_graph`` it takes the
    differentiable gather / scatter path instead.
    """

    @staticmethod
    def forward(ctx, value: Tensor, plan: SparsePlan) -> Tensor:
        ctx.plan = plan
        n_t, heads = plan.shape[0], plan.heads
        shape = (n_t * heads, value.shape[0] * heads)
        ones = _csr(plan.crow, plan.col, value.new_ones(plan.col.shape[0]), shape)
        return _spmm(ones, _rows(value)).view(n_t, heads, value.shape[2])

    @staticmethod
    def backward(ctx, grad: Tensor):
        plan = ctx.plan
        n_s, heads = plan.shape[1], plan.heads
        if torch.is_grad_enabled():  # double backward: differentiable scatter
            ones = grad.new_ones((plan.nnz, heads))
            index_t, index_s = plan.index_target, plan.index_source
            return _WeightedScatter.apply(ones, grad, index_t, index_s, n_s), None
        values = grad.new_ones(plan.col_t.shape[0])
        ones_t = _csr(plan.crow_t, plan.col_t, values, (n_s * heads, grad.shape[0] * heads))
        return _spmm(ones_t, _rows(grad)).view(n_s, heads, grad.shape[2]), None


def _sparse_attention_composable(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    index_t: Tensor,
    index_s: Tensor,
    scale: float,
    edge_bias: Tensor | None,
    dropout_p: float,
    weight_scale: Tensor | None = None,
) -> Tensor:
    """Eq. 2 (sparse kind) from composable pieces: SDDMM, segment softmax, SpMM.

    Any device, any edge order, differentiable any number of times; ``torch.compile`` traces it.
    ``weight_scale`` (nnz, heads), if given, multiplies the attention weights instead of a
    fresh dropout mask (the fused kernel's mask, for its double backward).
    """
    scores = _gather_dot(query, key, index_t, index_s) * scale
    if edge_bias is not None:
        scores = scores + edge_bias
    alpha = segment_softmax(scores, index_t, query.shape[0])
    if weight_scale is not None:
        alpha = alpha * weight_scale
    elif dropout_p > 0.0:
        alpha = alpha * dropout_factors(alpha.shape, dropout_p, dtype=alpha.dtype, device=alpha.device)
    return _weighted_scatter(alpha, value, index_s, index_t, query.shape[0])


def _gather_dot(a: Tensor, b: Tensor, index_a: Tensor, index_b: Tensor) -> Tensor:
    """SDDMM ``(a[index_a] * b[index_b]).sum(-1)``: memory-light autograd in eager mode."""
    if torch.compiler.is_compiling():
        return (a.index_select(0, index_a) * b.index_select(0, index_b)).sum(-1)
    # keeps only (nnz, heads) tensors for backward; the (nnz, heads, d) gathers are transient
    # and chunked (SPARSE_CHUNK_ELEMENTS)
    return _GatherDot.apply(a, b, index_a, index_b)


def _weighted_scatter(
    weight: Tensor, src: Tensor, index_src: Tensor, index_dst: Tensor, dim_size: int
) -> Tensor:
    """SpMM ``out[i] = Σ_{e → i} weight[e] src[index_src[e]]``: memory-light in eager mode."""
    if torch.compiler.is_compiling():
        msg = weight.unsqueeze(-1) * src.index_select(0, index_src)
        return scatter_sum(msg, index_dst, dim_size)
    return _WeightedScatter.apply(weight, src, index_src, index_dst, dim_size)


def _use_fused(query: Tensor, value: Tensor, nnz: int) -> bool:
    """Whether :class:`_FusedSparseAttention` runs: eager mode, CPU, float32 / float64."""
    return (
        nnz > 0
        and query.shape[2] > 0
        and value.shape[2] > 0
        and query.device.type == "cpu"
        and query.dtype in (torch.float32, torch.float64)
        and not torch.compiler.is_compiling()
    )


def _use_compiled_op(
    query: Tensor, value: Tensor, edge_bias: Tensor | None, plan: SparsePlan | None
) -> bool:
    """Whether ``torch.compile`` traces the fused kernel as one custom op (:mod:`.sparse_op`).

    While compiling, on CPU float32 / float64, with a plan that has its transposed pattern
    (``prepare`` builds it when gradients are enabled; not needed without them) and no edge
    bias.
    """
    return (
        plan is not None
        and torch.compiler.is_compiling()
        and edge_bias is None
        and (plan.crow_t is not None or not torch.is_grad_enabled())
        and query.device.type == "cpu"
        and query.dtype in (torch.float32, torch.float64)
        and query.shape[2] > 0
        and value.shape[2] > 0
    )


def _fused_sparse_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    plan: SparsePlan,
    scale: float,
    edge_bias: Tensor | None,
    dropout_p: float,
) -> Tensor:
    """Draw the dropout mask, run the fused kernel: eager, or through its custom op when compiling.

    The mask is the one the composable path draws for ``alpha`` (:func:`.dropout.dropout_factors`,
    same shape, same generator calls), as
    factors in the plan's CSR storage order. While ``torch.compile`` traces (no edge bias
    there, :func:`_use_compiled_op`) the kernel is the custom op of :mod:`.sparse_op`, else
    the autograd Function :class:`_FusedSparseAttention`.
    """
    dropout_scale = None
    if dropout_p > 0.0:
        dropout_scale = dropout_factors(
            (plan.nnz, query.shape[1]), dropout_p, dtype=query.dtype, device=query.device
        )
    if plan.order is not None:
        edge_bias = None if edge_bias is None else edge_bias[plan.order]
        dropout_scale = None if dropout_scale is None else dropout_scale[plan.order]
    if dropout_scale is not None:
        dropout_scale = _to_storage(dropout_scale, plan)
    if torch.compiler.is_compiling():
        return sparse_attention_csr(query, key, value, plan, scale, dropout_scale)
    query, key, value = query.contiguous(), key.contiguous(), value.contiguous()
    return _FusedSparseAttention.apply(query, key, value, edge_bias, plan, scale, dropout_scale)
