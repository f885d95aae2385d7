r"""Sparse attention: softmax restricted to the entries of a neighbourhood (Eq. 2, sparse kind).

For every head and stored entry ``(t, s)`` of the neighbourhood ``N`` (a mask:
:math:`\phi(N) = N`, :math:`\star` = Hadamard), scores :math:`\mathrm{scale}\,\langle q_t,
k_s\rangle`, softmax over the sources of every target, :math:`O(\mathrm{nnz} \cdot d)` time
and memory. In eager mode the SDDMM / SpMM run as chunked custom autograd functions that keep
only ``(nnz, heads)`` tensors for backward; while ``torch.compile`` traces, the same products
are written with plain differentiable gathers and scatters (the compiler fuses them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from topomodelx_attention.nn.attention.heads import check_dropout, check_qkv, resolve_scale
from topomodelx_attention.nn.attention.layout import Neighborhood, neighborhood_index
from topomodelx_attention.nn.attention.scatter import scatter_sum, segment_softmax

__all__ = ["SPARSE_CHUNK_ELEMENTS", "sparse_attention"]

#: Upper bound on the number of elements of one (edges, heads, d) gathered chunk of the sparse
#: kernels (4 MiB in float32; chunks of a few MiB are reused by the allocator and measured
#: faster than one big transient on CPU); larger neighbourhoods are processed in chunks.
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
# sparse attention
# ----------------------------------------------------------------------------------------------
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
    query : torch.Tensor, shape = (n_target, heads, d)
        Projected queries.
    key : torch.Tensor, shape = (n_source, heads, d)
        Projected keys.
    value : torch.Tensor, shape = (n_source, heads, d_v)
        Projected values.
    neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex
        Sparse ``(n_target, n_source)`` matrix, ``(2, nnz)`` edge index, pair
        ``(index_target, index_source)`` or a prepared
        :class:`~topomodelx_attention.nn.attention.layout.NeighborhoodIndex` (the form to use
        under ``torch.compile``); see
        :func:`~topomodelx_attention.nn.attention.layout.neighborhood_index`.
    scale : float, optional
        Logit scale; ``1 / sqrt(d)`` by default (``1.0``: the paper's Eq. 2 without scaling).
    dropout_p : float, default = 0.0
        Dropout probability on the attention weights (only when ``training``).
    training : bool, default = False
        Whether dropout is active.
    edge_bias : torch.Tensor, shape = (nnz,) or (nnz, heads) or (nnz, 1), optional
        Additive logits, in the order of the (coalesced) entries of ``neighborhood``.

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
    scores = _gather_dot(query, key, index_t, index_s) * resolve_scale(scale, query.shape[2])
    if edge_bias is not None:
        if edge_bias.dim() == 1:
            edge_bias = edge_bias.unsqueeze(-1)
        if (
            edge_bias.dim() != 2
            or edge_bias.shape[0] != scores.shape[0]
            or edge_bias.shape[1] not in (1, heads)
        ):
            raise ValueError(
                f"edge_bias must have shape (nnz,), (nnz, 1) or (nnz, heads) = "
                f"({scores.shape[0]}, {heads}), got {tuple(edge_bias.shape)}"
            )
        scores = scores + edge_bias.to(scores.dtype)
    alpha = segment_softmax(scores, index_t, n_t)
    if training and dropout_p > 0.0:
        alpha = F.dropout(alpha, p=dropout_p, training=True)
    return _weighted_scatter(alpha, value, index_s, index_t, n_t)


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
