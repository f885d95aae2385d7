r"""Sparse attention: softmax restricted to the entries of a neighbourhood (Eq. 2, sparse kind).

For every head and stored entry ``(t, s)`` of the neighbourhood ``N`` (a mask:
:math:`\phi(N) = N`, :math:`\star` = Hadamard), scores :math:`\mathrm{scale}\,\langle q_t,
k_s\rangle`, softmax over the sources of every target, :math:`O(\mathrm{nnz} \cdot d)` time
and memory. Three executions of the same equations:

* eager, CPU, float32 / float64: one fused autograd function (:class:`_FusedSparseAttention`)
  that treats all heads as one block-diagonal CSR matrix (SDDMM = ``sampled_addmm``, SpMM = CSR
  × dense), softmax and its gradient by segment reductions over the target-sorted edges, and
  keeps only ``(nnz, heads)`` tensors for backward; measured ~1.4× faster forward + backward
  than the composable path on a Cellular Transformer call (``benchmarks/attention_core.py
  --sparse-backward``);
* eager elsewhere (CUDA, other dtypes), and the fused kernel's double backward: the SDDMM /
  SpMM as chunked custom autograd functions that keep only ``(nnz, heads)`` tensors;
* while ``torch.compile`` traces: plain differentiable gathers and scatters (the compiler
  fuses them).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from topomodelx_attention.nn.attention.heads import check_dropout, check_qkv, resolve_scale
from topomodelx_attention.nn.attention.layout import Neighborhood, neighborhood_index
from topomodelx_attention.nn.attention.scatter import (
    scatter_sum,
    segment_softmax,
    segment_softmax_sorted,
)

__all__ = ["SPARSE_CHUNK_ELEMENTS", "sparse_attention"]

#: Upper bound on the number of elements of one (edges, heads, d) gathered chunk of the
#: composable sparse kernels (the fused CPU kernel builds no such chunk) (4 MiB in float32; chunks of a few MiB are reused by the allocator and measured
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
# fused CPU kernel: all heads as one block-diagonal CSR matrix
# ----------------------------------------------------------------------------------------------
def _head_major(x: Tensor) -> Tensor:
    """(n, H, d) → (H·n, d): row ``h·n + i`` holds ``x[i, h]`` (one copy of a node-sized tensor)."""
    return x.transpose(0, 1).reshape(x.shape[0] * x.shape[1], x.shape[2])


def _from_head_major(x: Tensor, heads: int) -> Tensor:
    """(H·n, d) → (n, H, d), the inverse of :func:`_head_major` (a view)."""
    return x.view(heads, -1, x.shape[1]).transpose(0, 1)


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


def _block_csr(crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    _silence_csr_beta_warning()
    return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


def _block_plan(index: Tensor, other: Tensor, n_rows: int, n_cols: int, heads: int):
    """Block-diagonal CSR pattern of all heads for edges sorted by ``index`` (the rows).

    Head ``h`` owns rows ``h·n_rows + index`` and columns ``h·n_cols + other``; its entries are
    stored after those of head ``h - 1``, so a ``(heads, nnz)`` tensor is the value array as is.
    Returns ``crow (heads·n_rows + 1,)``, ``col (heads·nnz,)`` and ``lengths (heads, n_rows)``.
    """
    nnz = index.shape[0]
    crow1 = torch._convert_indices_from_coo_to_csr(index, n_rows)
    head = torch.arange(heads, device=index.device).unsqueeze(1)
    crow = torch.cat([(crow1[:-1] + head * nnz).reshape(-1), crow1[-1:] + (heads - 1) * nnz])
    col = (other + head * n_cols).reshape(-1)
    lengths = crow1.diff().expand(heads, n_rows).contiguous()
    return crow, col, lengths


class _FusedSparseAttention(torch.autograd.Function):
    r"""Eq. 2 (sparse kind) for edges sorted by target, as block-diagonal CSR products.

    All heads form one ``(H·n_t, H·n_s)`` CSR matrix (head ``h`` is the diagonal block ``h``),
    so the SDDMM is one ``torch.sparse.sampled_addmm`` and every SpMM one CSR × dense product
    (MKL on CPU), with no ``(nnz, heads, d)`` intermediate at all. The softmax and its gradient
    run on ``(heads, nnz)`` tensors with segment reductions over the sorted targets. Saved for
    backward: the inputs, the edge indices, the attention weights ``(heads, nnz)`` and the
    dropout scaling if any (the CSR pattern is rebuilt, a few cheap index operations). Under
    ``create_graph`` the backward differentiates :func:`_sparse_attention_composable` instead,
    so higher derivatives exist.
    """

    @staticmethod
    def forward(
        ctx,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        edge_bias: Tensor | None,
        index_t: Tensor,
        index_s: Tensor,
        scale: float,
        dropout_scale: Tensor | None,
    ) -> Tensor:
        (n_t, heads, _), n_s = query.shape, key.shape[0]
        nnz = index_t.shape[0]
        crow, col, lengths = _block_plan(index_t, index_s, n_t, n_s, heads)
        shape = (heads * n_t, heads * n_s)
        rows_q, rows_k, rows_v = _head_major(query), _head_major(key), _head_major(value)
        # beta = 0 still multiplies the pattern's values: they must be finite (zeros)
        pattern = _block_csr(crow, col, query.new_zeros(heads * nnz), shape)
        scores = torch.sparse.sampled_addmm(pattern, rows_q, rows_k.t(), beta=0.0, alpha=scale)
        scores = scores.values().view(heads, nnz)
        if edge_bias is not None:
            scores = scores + edge_bias.t()
        alpha = segment_softmax_sorted(scores, index_t, lengths)
        weight = alpha if dropout_scale is None else alpha * dropout_scale
        out = _block_csr(crow, col, weight.view(-1), shape) @ rows_v
        # (nnz, heads)-sized tensors only: the CSR pattern is rebuilt in backward
        ctx.save_for_backward(query, key, value, edge_bias, index_t, index_s, alpha, dropout_scale)
        ctx.scale = scale
        ctx.sizes = (n_t, n_s, heads)
        ctx.bias_heads = None if edge_bias is None else edge_bias.shape[1]
        return _from_head_major(out, heads)

    @staticmethod
    def backward(ctx, grad: Tensor):
        saved = ctx.saved_tensors
        query, key, value, _, index_t, index_s, alpha, dropout_scale = saved
        if torch.is_grad_enabled():  # create_graph: differentiate the composable formulation
            return _FusedSparseAttention.backward_composable(ctx, grad, saved)
        n_t, n_s, heads = ctx.sizes
        crow, col, lengths = _block_plan(index_t, index_s, n_t, n_s, heads)
        nnz = index_t.shape[0]
        shape = (heads * n_t, heads * n_s)
        grad_rows = _head_major(grad)
        rows_q, rows_k, rows_v = _head_major(query), _head_major(key), _head_major(value)
        weight = alpha if dropout_scale is None else alpha * dropout_scale
        need_q, need_k, need_v, need_bias = ctx.needs_input_grad[:4]
        if need_k or need_v:  # the pattern transposed: edges sorted by source
            order = _stable_argsort(index_s, n_s)
            crow_s, col_s, _ = _block_plan(index_s[order], index_t[order], n_s, n_t, heads)
        grad_q = grad_k = grad_v = grad_bias = None
        if need_v:
            matrix_t = _block_csr(
                crow_s, col_s, weight.index_select(1, order).view(-1), shape[::-1]
            )
            grad_v = _from_head_major(matrix_t @ grad_rows, heads)
        if need_q or need_k or need_bias:
            pattern = _block_csr(crow, col, alpha.view(-1), shape)  # values finite, beta = 0
            grad_weight = torch.sparse.sampled_addmm(pattern, grad_rows, rows_v.t(), beta=0.0)
            grad_weight = grad_weight.values().view(heads, nnz)
            if dropout_scale is not None:
                grad_weight = grad_weight * dropout_scale
            # softmax backward: α ⊙ (g − Σ_{s ∈ N(t)} α g)
            weighted = alpha * grad_weight
            total = torch.segment_reduce(weighted, "sum", lengths=lengths, axis=1, unsafe=True)
            grad_scores = weighted.sub_(alpha * total.index_select(1, index_t))
            if need_bias:
                grad_bias = grad_scores.t()
                if ctx.bias_heads == 1:
                    grad_bias = grad_bias.sum(1, keepdim=True)
            grad_scaled = grad_scores * ctx.scale
            if need_q:
                matrix = _block_csr(crow, col, grad_scaled.view(-1), shape)
                grad_q = _from_head_major(matrix @ rows_k, heads)
            if need_k:
                values_t = grad_scaled.index_select(1, order).view(-1)
                matrix_t = _block_csr(crow_s, col_s, values_t, shape[::-1])
                grad_k = _from_head_major(matrix_t @ rows_q, heads)
        return grad_q, grad_k, grad_v, grad_bias, None, None, None, None

    @staticmethod
    def backward_composable(ctx, grad: Tensor, saved: tuple):
        """Backward through :func:`_sparse_attention_composable` (differentiable again)."""
        query, key, value, edge_bias, index_t, index_s, _, dropout_scale = saved
        inputs = (query, key, value, edge_bias)
        wanted = [x for x, need in zip(inputs, ctx.needs_input_grad[:4]) if need]
        weight_scale = None if dropout_scale is None else dropout_scale.t()
        out = _sparse_attention_composable(
            query, key, value, index_t, index_s, ctx.scale, edge_bias, 0.0, weight_scale
        )
        grads = iter(torch.autograd.grad(out, wanted, grad, create_graph=True, allow_unused=True))
        result = [next(grads) if need else None for need in ctx.needs_input_grad[:4]]
        return (*result, None, None, None, None)


def _stable_argsort(index: Tensor, size: int) -> Tensor:
    """Stable argsort of a CPU index with values in ``[0, size)``.

    NumPy's radix sort for 16-bit keys when ``size`` fits (measured ~10× faster than
    ``torch.argsort`` for a few thousand edges), ``torch.argsort(stable=True)`` otherwise.
    """
    if size <= np.iinfo(np.int16).max:
        keys = index.numpy().astype(np.int16)
        return torch.from_numpy(np.argsort(keys, kind="stable")).to(index.device)
    return torch.argsort(index, stable=True)


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
    nnz = index_t.shape[0]
    if edge_bias is not None:
        if edge_bias.dim() == 1:
            edge_bias = edge_bias.unsqueeze(-1)
        if (
            edge_bias.dim() != 2
            or edge_bias.shape[0] != nnz
            or edge_bias.shape[1] not in (1, heads)
        ):
            raise ValueError(
                f"edge_bias must have shape (nnz,), (nnz, 1) or (nnz, heads) = "
                f"({nnz}, {heads}), got {tuple(edge_bias.shape)}"
            )
        edge_bias = edge_bias.to(query.dtype)
    scale = resolve_scale(scale, query.shape[2])
    # the fused CPU kernel and the composable pieces take the same arguments
    attend = _fused_sparse_attention if _use_fused(query, value, nnz) else _sparse_attention_composable
    return attend(
        query, key, value, index_t, index_s, scale, edge_bias, dropout_p if training else 0.0
    )


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
        alpha = F.dropout(alpha, p=dropout_p, training=True)
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


def _fused_sparse_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    index_t: Tensor,
    index_s: Tensor,
    scale: float,
    edge_bias: Tensor | None,
    dropout_p: float,
) -> Tensor:
    """Sort the edges by target if needed, draw the dropout mask, run the fused kernel."""
    dropout_scale = None
    if dropout_p > 0.0:
        # the mask F.dropout(alpha) would draw (same shape, same generator calls), as a factor
        ones = query.new_ones((index_t.shape[0], query.shape[1]))
        dropout_scale = F.dropout(ones, p=dropout_p, training=True)
    if index_t.shape[0] > 1 and not bool((index_t[1:] >= index_t[:-1]).all()):
        order = torch.argsort(index_t, stable=True)
        index_t, index_s = index_t[order], index_s[order]
        edge_bias = None if edge_bias is None else edge_bias[order]
        dropout_scale = None if dropout_scale is None else dropout_scale[order]
    if dropout_scale is not None:
        dropout_scale = dropout_scale.t().contiguous()
    return _FusedSparseAttention.apply(
        query, key, value, edge_bias, index_t, index_s, scale, dropout_scale
    )
