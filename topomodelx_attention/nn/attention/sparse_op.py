r"""The fused CPU sparse attention kernel as a ``torch.library`` custom op (for ``torch.compile``).

Eager CPU calls of :func:`~.sparse.sparse_attention` run the fused node-major CSR kernel
(:class:`~.sparse.SparsePlan`). While ``torch.compile`` traces, the same kernel is called
through two custom ops, ``topomodelx_attention::sparse_attention_csr`` (forward: output and
attention weights) and ``topomodelx_attention::sparse_attention_csr_backward`` (gradients of
queries, keys and values), with registered fake implementations (output shapes from the
inputs' symbolic sizes) and an autograd formula. The compiler therefore sees one opaque op per
attention call instead of tracing its gathers, segment softmax and scatters, forward and
backward: fewer kernels to generate and compile (compile time), the MKL CSR products at run
time, and results identical to eager.

Only the plan's index tensors, the head-split inputs and an optional dropout factor cross the
op boundary: the logit scale is applied to the queries outside it (autograd differentiates the
product), so the op has no float argument (under ``dynamic=True`` the module's floats are
symbolic). No edge bias (the sparse kernel of the models passes none; a call with one takes the
composable path). Double backward through the op is not supported (the eager kernel's
``create_graph`` path is).
"""

from __future__ import annotations

import torch
from torch import Tensor

from topomodelx_attention.nn.attention.scatter import segment_softmax_sorted

__all__ = ["sparse_attention_csr"]

_NAMESPACE = "topomodelx_attention"


def _csr(crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    from topomodelx_attention.nn.attention.sparse import _csr as build

    return build(crow, col, values, shape)


def _spmm(matrix: Tensor, dense: Tensor) -> Tensor:
    from topomodelx_attention.nn.attention.sparse import _spmm as product

    return product(matrix, dense)


def _rows(x: Tensor) -> Tensor:
    """``(n, heads, d)`` → contiguous ``(n·heads, d)`` (the node-major dense operand)."""
    return x.contiguous().view(x.shape[0] * x.shape[1], x.shape[2])


def _forward_impl(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    crow: Tensor,
    col: Tensor,
    row: Tensor,
    lengths: Tensor,
    dropout_scale: Tensor | None,
) -> tuple[Tensor, Tensor]:
    (n_t, heads, _), n_s = query.shape, key.shape[0]
    shape = (n_t * heads, n_s * heads)
    pattern = _csr(crow, col, query.new_zeros(col.shape[0]), shape)  # finite values, beta = 0
    scores = torch.sparse.sampled_addmm(pattern, _rows(query), _rows(key).t(), beta=0.0).values()
    alpha = segment_softmax_sorted(scores.unsqueeze(0), row, lengths).squeeze(0)
    weight = alpha if dropout_scale is None else alpha * dropout_scale
    out = _spmm(_csr(crow, col, weight, shape), _rows(value))
    return out.view(n_t, heads, value.shape[2]), alpha


def _backward_impl(
    grad: Tensor,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    alpha: Tensor,
    dropout_scale: Tensor | None,
    crow: Tensor,
    col: Tensor,
    row: Tensor,
    lengths: Tensor,
    crow_t: Tensor,
    col_t: Tensor,
    to_transposed: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    (n_t, heads, _), n_s = query.shape, key.shape[0]
    shape = (n_t * heads, n_s * heads)
    grad_rows = _rows(grad)
    weight = alpha if dropout_scale is None else alpha * dropout_scale
    matrix_t = _csr(crow_t, col_t, weight.index_select(0, to_transposed), shape[::-1])
    grad_v = _spmm(matrix_t, grad_rows).view(n_s, heads, value.shape[2])
    pattern = _csr(crow, col, alpha, shape)  # values finite, beta = 0
    grad_weight = torch.sparse.sampled_addmm(pattern, grad_rows, _rows(value).t(), beta=0.0).values()
    if dropout_scale is not None:
        grad_weight = grad_weight * dropout_scale
    # softmax backward: α ⊙ (g − Σ_{s ∈ N(t)} α g)
    weighted = (alpha * grad_weight).unsqueeze(0)
    total = torch.segment_reduce(weighted, "sum", lengths=lengths, axis=1, unsafe=True)
    grad_scores = weighted.sub_(alpha * total.index_select(1, row)).squeeze(0)
    grad_q = _spmm(_csr(crow, col, grad_scores, shape), _rows(key)).view(query.shape)
    values_t = grad_scores.index_select(0, to_transposed)
    grad_k = _spmm(_csr(crow_t, col_t, values_t, shape[::-1]), _rows(query)).view(key.shape)
    return grad_q, grad_k, grad_v


def _define_ops() -> tuple[object, object]:
    """Define the two ops once per process (a reloaded module finds them defined)."""
    namespace = getattr(torch.ops, _NAMESPACE)
    if hasattr(namespace, "sparse_attention_csr"):
        return namespace.sparse_attention_csr, namespace.sparse_attention_csr_backward

    @torch.library.custom_op(f"{_NAMESPACE}::sparse_attention_csr", mutates_args=())
    def forward_op(
        query: Tensor,
        key: Tensor,
        value: Tensor,
        crow: Tensor,
        col: Tensor,
        row: Tensor,
        lengths: Tensor,
        crow_t: Tensor,
        col_t: Tensor,
        to_transposed: Tensor,
        dropout_scale: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        return _forward_impl(query, key, value, crow, col, row, lengths, dropout_scale)

    @forward_op.register_fake
    def _(query, key, value, crow, col, row, lengths, crow_t, col_t, to_transposed, dropout_scale):
        out = query.new_empty((query.shape[0], query.shape[1], value.shape[2]))
        return out, query.new_empty((col.shape[0],))

    @torch.library.custom_op(f"{_NAMESPACE}::sparse_attention_csr_backward", mutates_args=())
    def backward_op(
        grad: Tensor,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        alpha: Tensor,
        dropout_scale: Tensor | None,
        crow: Tensor,
        col: Tensor,
        row: Tensor,
        lengths: Tensor,
        crow_t: Tensor,
        col_t: Tensor,
        to_transposed: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        return _backward_impl(
            grad, query, key, value, alpha, dropout_scale,
            crow, col, row, lengths, crow_t, col_t, to_transposed,
        )  # fmt: skip

    @backward_op.register_fake
    def _(grad, query, key, value, *rest):
        return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)

    def setup_context(ctx, inputs, output) -> None:
        query, key, value, crow, col, row, lengths, crow_t, col_t, to_transposed, scale = inputs
        ctx.save_for_backward(
            query, key, value, output[1], scale, crow, col, row, lengths, crow_t, col_t, to_transposed
        )
        ctx.has_dropout = scale is not None

    def backward(ctx, grad: Tensor, grad_alpha: Tensor | None):
        query, key, value, alpha, scale, *plan = ctx.saved_tensors
        grads = backward_op(
            grad.contiguous(), query, key, value, alpha, scale if ctx.has_dropout else None, *plan
        )
        return (*grads, None, None, None, None, None, None, None, None)

    forward_op.register_autograd(backward, setup_context=setup_context)
    return forward_op, backward_op


_FORWARD, _BACKWARD = _define_ops()


def sparse_attention_csr(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    plan: object,
    scale: float,
    dropout_scale: Tensor | None = None,
) -> Tensor:
    """Eq. 2 (sparse kind) through the custom op on a :class:`~.sparse.SparsePlan` with transpose.

    Parameters
    ----------
    query : torch.Tensor, shape = (n_target, heads, d)
        Projected queries (CPU, float32 / float64).
    key : torch.Tensor, shape = (n_source, heads, d)
        Projected keys.
    value : torch.Tensor, shape = (n_source, heads, d_v)
        Projected values.
    plan : SparsePlan
        The plan of the neighbourhood; with its transposed pattern (``crow_t``) when a
        gradient is to flow.
    scale : float
        Logit scale (applied to the queries before the op).
    dropout_scale : torch.Tensor, shape = (nnz·heads,), optional
        Dropout factors of the attention weights in CSR storage order.

    Returns
    -------
    torch.Tensor, shape = (n_target, heads, d_v)
        Attention output.
    """
    out, _ = _FORWARD(
        (query * scale).contiguous(),
        key.contiguous(),
        value.contiguous(),
        plan.crow,
        plan.col,
        plan.row,
        plan.lengths,
        # without gradients (no transposed pattern) the forward pattern stands in, unread
        plan.crow if plan.crow_t is None else plan.crow_t,
        plan.col if plan.col_t is None else plan.col_t,
        plan.row if plan.to_transposed is None else plan.to_transposed,
        dropout_scale,
    )
    return out
