r"""The fused CPU sparse attention kernel: its math on a node-major CSR pattern, and its custom op.

:func:`csr_attention` and :func:`csr_attention_backward` are Eq. 2 (sparse kind) and its
gradient on the node-major block CSR pattern of a neighbourhood (all heads as one
``(n_t·H, n_s·H)`` matrix, see :class:`~.plan.SparsePlan`): SDDMM = ``sampled_addmm``, SpMM =
CSR × dense (MKL on CPU), softmax and its gradient by segment reductions over the CSR rows. They
are the one implementation of that kernel; two callers run it:

* eager CPU calls of :func:`~.sparse.sparse_attention`, through the autograd Function
  ``_FusedSparseAttention`` of :mod:`.sparse`;
* ``torch.compile`` traces, through two custom ops, ``topomodelx_attention::sparse_attention_csr``
  (forward: output and attention weights) and
  ``topomodelx_attention::sparse_attention_csr_backward`` (gradients of queries, keys and values),
  with registered fake implementations (output shapes from the inputs' symbolic sizes) and an
  autograd formula. The compiler therefore sees one opaque op per attention call instead of
  tracing its gathers, segment softmax and scatters, forward and backward: fewer kernels to
  generate and compile (compile time), the MKL CSR products at run time, and results identical
  to eager.

Only the plan's index tensors (one ``Tensor[]`` argument, the fields of :class:`CsrPattern` in
order), the head-split inputs and an optional dropout factor cross the op boundary: the logit scale is applied to the queries outside it (autograd differentiates the
product), so the op has no float argument (under ``dynamic=True`` the module's floats are
symbolic). No edge bias (the sparse kernel of the models passes none; a call with one takes the
composable path). Double backward through the op is not supported (the eager kernel's
``create_graph`` path is).
"""

from __future__ import annotations

import functools
import warnings
from typing import NamedTuple

import torch
from torch import Tensor

from topomodelx_attention.nn.attention.scatter import (
    expand_segments,
    segment_softmax_sorted,
    segment_sum_sorted,
)

__all__ = ["CsrPattern", "csr_attention", "csr_attention_backward", "sparse_attention_csr"]

_NAMESPACE = "topomodelx_attention"


class CsrPattern(NamedTuple):
    """The index tensors of a node-major CSR pattern (the fields of :class:`~.plan.SparsePlan`).

    ``crow``, ``col`` (int32), ``row`` (segment of every stored value) and ``lengths``
    (``(1, n_t·H)`` row lengths) of the pattern; ``crow_t``, ``col_t`` and ``to_transposed``
    of its transpose (rows = sources), ``None`` when no key / value gradient is wanted. A
    :class:`~.plan.SparsePlan` has the same attributes and stands in for it.
    """

    crow: Tensor
    col: Tensor
    row: Tensor
    lengths: Tensor
    crow_t: Tensor | None
    col_t: Tensor | None
    to_transposed: Tensor | None


@functools.cache
def _silence_csr_beta_warning() -> None:
    """Build one CSR tensor with PyTorch's once-per-process "beta" warning filtered out."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        torch.sparse_csr_tensor(
            torch.zeros(2, dtype=torch.long),
            torch.zeros(0, dtype=torch.long),
            torch.zeros(0),
            (1, 1),
            check_invariants=False,
        )


def _csr(crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    _silence_csr_beta_warning()
    return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


def _spmm(matrix: Tensor, dense: Tensor) -> Tensor:
    """``matrix @ dense`` (CSR × dense) into a fresh tensor.

    ``addmm`` with ``beta = 0`` ignores its uninitialised input (documented), which spares
    ``@`` its zero fill and copy.
    """
    out = dense.new_empty((matrix.shape[0], dense.shape[1]))
    return torch.addmm(out, matrix, dense, beta=0.0, out=out)


def _sddmm(pattern: CsrPattern, left: Tensor, right: Tensor, shape: tuple[int, int], scale: float) -> Tensor:
    """``scale · ⟨left_i, right_j⟩`` on the stored entries ``(i, j)`` of the pattern (an SDDMM).

    ``sampled_addmm`` writes into its own input (``out=``): with another output it first
    copies the input's values and column indices (about half of its time at 10⁶ entries).
    ``beta = 0`` still multiplies the input's values, so they are zeros, not uninitialised.
    The pattern's index tensors are only read.

    Parameters
    ----------
    pattern : CsrPattern or SparsePlan
        The node-major CSR pattern (``crow``, ``col``).
    left, right : torch.Tensor, shape = (n_rows, d) and (n_cols, d)
        The row and column operands.
    shape : tuple of int
        ``(n_rows, n_cols)``.
    scale : float
        Factor of the products.

    Returns
    -------
    torch.Tensor, shape = (nnz,)
        The products in CSR storage order.
    """
    zeros = _csr(pattern.crow, pattern.col, left.new_zeros(pattern.col.shape[0]), shape)
    torch.sparse.sampled_addmm(zeros, left, right.t(), beta=0.0, alpha=scale, out=zeros)
    return zeros.values()


def _rows(x: Tensor) -> Tensor:
    """``(n, heads, d)`` → contiguous ``(n·heads, d)`` (the node-major dense operand)."""
    return x.contiguous().view(x.shape[0] * x.shape[1], x.shape[2])


def csr_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    pattern: CsrPattern,
    scale: float = 1.0,
    bias: Tensor | None = None,
    dropout_scale: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Eq. 2 (sparse kind) on a node-major CSR pattern: output and attention weights.

    :math:`e = \mathrm{scale}\,\langle q_t, k_s\rangle + b_{ts}` on the stored entries (one
    ``sampled_addmm``), :math:`\alpha` = softmax over the sources of every target row,
    :math:`o_t = \sum_s \alpha_{ts} d_{ts} v_s` (one CSR × dense product; ``d``: the dropout
    factors).

    Parameters
    ----------
    query, key, value : torch.Tensor
        Head-split queries ``(n_target, heads, d)``, keys ``(n_source, heads, d)`` and values
        ``(n_source, heads, d_v)``.
    pattern : CsrPattern or SparsePlan
        The node-major pattern of the neighbourhood for ``heads`` heads.
    scale : float, default = 1.0
        Logit scale.
    bias : torch.Tensor, shape = (nnz·heads,), optional
        Additive logits in CSR storage order.
    dropout_scale : torch.Tensor, shape = (nnz·heads,), optional
        Dropout factors of the attention weights in CSR storage order.

    Returns
    -------
    tuple of torch.Tensor
        The output ``(n_target, heads, d_v)`` and the attention weights ``(nnz·heads,)`` in
        CSR storage order (without dropout).
    """
    (n_t, heads, _), n_s = query.shape, key.shape[0]
    shape = (n_t * heads, n_s * heads)
    scores = _sddmm(pattern, _rows(query), _rows(key), shape, scale)
    if bias is not None:
        scores = scores + bias
    alpha = segment_softmax_sorted(scores.unsqueeze(0), pattern.row, pattern.lengths).squeeze(0)
    weight = alpha if dropout_scale is None else alpha * dropout_scale
    out = _spmm(_csr(pattern.crow, pattern.col, weight, shape), _rows(value))
    return out.view(n_t, heads, value.shape[2]), alpha


def csr_attention_backward(
    grad: Tensor,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    alpha: Tensor,
    pattern: CsrPattern,
    scale: float = 1.0,
    dropout_scale: Tensor | None = None,
    needs: tuple[bool, bool, bool, bool] = (True, True, True, False),
) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    r"""Gradients of :func:`csr_attention` (softmax backward by segment sums over the CSR rows).

    Parameters
    ----------
    grad : torch.Tensor, shape = (n_target, heads, d_v)
        Gradient of the output.
    query, key, value : torch.Tensor
        The inputs of :func:`csr_attention`.
    alpha : torch.Tensor, shape = (nnz·heads,)
        The attention weights it returned.
    pattern : CsrPattern or SparsePlan
        Its pattern; with the transposed pattern when a key or value gradient is wanted.
    scale : float, default = 1.0
        Its logit scale.
    dropout_scale : torch.Tensor, shape = (nnz·heads,), optional
        Its dropout factors.
    needs : tuple of bool, default = (True, True, True, False)
        Which gradients to compute: queries, keys, values, logits (the gradient of the
        additive ``bias``, in CSR storage order).

    Returns
    -------
    tuple of torch.Tensor or None
        Gradients of the queries, keys, values and logits (``None`` where not wanted).
    """
    need_q, need_k, need_v, need_scores = needs
    (n_t, heads, _), n_s = query.shape, key.shape[0]
    shape = (n_t * heads, n_s * heads)
    grad_rows = _rows(grad)
    grad_q = grad_k = grad_v = grad_scores = None
    if need_v:
        weight = alpha if dropout_scale is None else alpha * dropout_scale
        values_t = weight.index_select(0, pattern.to_transposed)
        matrix_t = _csr(pattern.crow_t, pattern.col_t, values_t, shape[::-1])
        grad_v = _spmm(matrix_t, grad_rows).view(n_s, heads, value.shape[2])
    if not (need_q or need_k or need_scores):
        return grad_q, grad_k, grad_v, grad_scores
    grad_weight = _sddmm(pattern, grad_rows, _rows(value), shape, 1.0)
    if dropout_scale is not None:
        grad_weight = grad_weight * dropout_scale
    # softmax backward: α ⊙ (g − Σ_{s ∈ N(t)} α g)
    weighted = (alpha * grad_weight).unsqueeze(0)
    total = segment_sum_sorted(weighted, pattern.row, pattern.lengths)
    grad_scores = weighted.sub_(alpha * expand_segments(total, pattern.row)).squeeze(0)
    grad_scaled = grad_scores if scale == 1.0 else grad_scores * scale
    if need_q:
        matrix = _csr(pattern.crow, pattern.col, grad_scaled, shape)
        grad_q = _spmm(matrix, _rows(key)).view(n_t, heads, query.shape[2])
    if need_k:
        values_t = grad_scaled.index_select(0, pattern.to_transposed)
        matrix_t = _csr(pattern.crow_t, pattern.col_t, values_t, shape[::-1])
        grad_k = _spmm(matrix_t, _rows(query)).view(n_s, heads, key.shape[2])
    return grad_q, grad_k, grad_v, grad_scores if need_scores else None


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
        pattern: list[Tensor],
        dropout_scale: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        return csr_attention(query, key, value, CsrPattern(*pattern), dropout_scale=dropout_scale)

    @forward_op.register_fake
    def _(query, key, value, pattern, dropout_scale):
        out = query.new_empty((query.shape[0], query.shape[1], value.shape[2]))
        return out, query.new_empty((pattern[1].shape[0],))  # one weight per stored col

    @torch.library.custom_op(f"{_NAMESPACE}::sparse_attention_csr_backward", mutates_args=())
    def backward_op(
        grad: Tensor,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        alpha: Tensor,
        dropout_scale: Tensor | None,
        pattern: list[Tensor],
    ) -> tuple[Tensor, Tensor, Tensor]:
        grads = csr_attention_backward(
            grad, query, key, value, alpha, CsrPattern(*pattern), dropout_scale=dropout_scale
        )
        return grads[:3]

    @backward_op.register_fake
    def _(grad, query, key, value, alpha, dropout_scale, pattern):
        return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)

    def setup_context(ctx, inputs, output) -> None:
        query, key, value, pattern, scale = inputs
        ctx.save_for_backward(query, key, value, output[1], scale, *pattern)
        ctx.has_dropout = scale is not None

    def backward(ctx, grad: Tensor, grad_alpha: Tensor | None):
        query, key, value, alpha, scale, *pattern = ctx.saved_tensors
        scale = scale if ctx.has_dropout else None
        grads = backward_op(grad.contiguous(), query, key, value, alpha, scale, pattern)
        return (*grads, [None] * len(pattern), None)  # no gradient for the index tensors

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
    """Eq. 2 (sparse kind) through the custom op on a :class:`~.plan.SparsePlan` with transpose.

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
    pattern = [
        plan.crow,
        plan.col,
        plan.row,
        plan.lengths,
        # without gradients (no transposed pattern) the forward pattern stands in, unread
        plan.crow if plan.crow_t is None else plan.crow_t,
        plan.col if plan.col_t is None else plan.col_t,
        plan.row if plan.to_transposed is None else plan.to_transposed,
    ]
    out, _ = _FORWARD(
        (query * scale).contiguous(), key.contiguous(), value.contiguous(), pattern, dropout_scale
    )
    return out
