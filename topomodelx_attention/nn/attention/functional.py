r"""Functional multi-head attention kernels shared by every model family.

All functions work on **already projected, head-split** tensors: queries of shape
``(n_target, heads, d)``, keys ``(n_source, heads, d)``, values ``(n_source, heads, d_v)``.
They return ``(n_target, heads, d_v)``. Use :func:`split_heads` / :func:`merge_heads` to go
from / to ``(n, heads * d)`` feature matrices; use
:class:`~topomodelx_attention.nn.attention.MultiHeadAttention` for the projected module.

Three kinds implement the cellular attention of Eq. (2) (§4.2.1) and Eq. (3) (§4.2.2) of the
Cellular Transformer paper,
:math:`\mathrm{softmax}(Q K^\top \star \phi(N)) V`:

``sparse`` (:func:`sparse_attention`)
    :math:`\star` = Hadamard, :math:`\phi(N) = N` used as a **mask**: scores only on the stored
    entries of the neighbourhood ``N`` (shape ``(n_target, n_source)``), softmax over the
    sources of every target. :math:`O(\mathrm{nnz} \cdot d)` time and memory.
``dense`` (:func:`dense_attention`)
    :math:`\star` = sum, :math:`\phi(N) = \theta N` an additive bias: all pairs inside each
    complex, computed block by block by padding and
    :func:`torch.nn.functional.scaled_dot_product_attention`.
``linear`` (:func:`linear_attention`)
    Performer / FAVOR+ positive orthogonal random features approximating the softmax kernel of
    the dense kind (without bias), per complex, linear in the number of tokens.

Block structure: ``batch_target`` / ``batch_source`` give the complex of every token (sorted,
as produced by PyG concatenation); tokens of different complexes never attend to each other.
A target without any source gets zeros (never NaN) in every kind.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from topomodelx_attention.nn.attention.scatter import scatter_max, scatter_sum, segment_softmax

__all__ = [
    "PaddedLayout",
    "default_num_random_features",
    "dense_attention",
    "dense_attention_weights",
    "favor_features",
    "linear_attention",
    "merge_heads",
    "neighborhood_index",
    "orthogonal_random_matrix",
    "padded_layout",
    "sparse_attention",
    "split_heads",
]

Neighborhood = Tensor | Sequence[Tensor]

#: Upper bound on the number of elements of one (tokens, heads, features, d_v + 1) chunk
#: materialised by :func:`linear_attention` (64 MiB in float32).
LINEAR_CHUNK_ELEMENTS: int = 1 << 24
#: Upper bound on the number of elements of one (edges, heads, d) gathered chunk of the sparse
#: kernels (4 MiB in float32; chunks of a few MiB are reused by the allocator and measured
#: faster than one big transient on CPU); larger neighbourhoods are processed in chunks.
SPARSE_CHUNK_ELEMENTS: int = 1 << 20


# ----------------------------------------------------------------------------------------------
# head helpers
# ----------------------------------------------------------------------------------------------
def split_heads(x: Tensor, heads: int) -> Tensor:
    """Split the channels of a feature matrix into heads.

    Parameters
    ----------
    x : torch.Tensor, shape = (n, heads * d)
        Projected features.
    heads : int
        Number of heads; must divide ``x.shape[-1]``.

    Returns
    -------
    torch.Tensor, shape = (n, heads, d)
        A view of ``x``.
    """
    if x.dim() != 2:
        raise ValueError(
            f"split_heads expects a 2-D (n, heads * d) tensor, got shape {tuple(x.shape)}"
        )
    if heads < 1 or x.shape[1] % heads != 0:
        raise ValueError(f"heads={heads} must be positive and divide the {x.shape[1]} channels")
    return x.view(x.shape[0], heads, x.shape[1] // heads)


def merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads of a head-split tensor (inverse of :func:`split_heads`).

    Parameters
    ----------
    x : torch.Tensor, shape = (n, heads, d)
        Head-split features.

    Returns
    -------
    torch.Tensor, shape = (n, heads * d)
        Heads concatenated along the channels.
    """
    if x.dim() != 3:
        raise ValueError(
            f"merge_heads expects a 3-D (n, heads, d) tensor, got shape {tuple(x.shape)}"
        )
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2])


# ----------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------
def _check_qkv(query: Tensor, key: Tensor, value: Tensor) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise ValueError(
                f"{name} must have shape (n, heads, d) (use split_heads), got {tuple(t.shape)}"
            )
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating point tensor, got {t.dtype}")
    if key.shape[0] != value.shape[0]:
        raise ValueError(
            f"key and value must have the same number of source tokens, got {key.shape[0]} "
            f"and {value.shape[0]}"
        )
    if not (query.shape[1] == key.shape[1] == value.shape[1]):
        raise ValueError(
            f"query, key and value must have the same number of heads, got {query.shape[1]}, "
            f"{key.shape[1]} and {value.shape[1]}"
        )
    if query.shape[2] != key.shape[2]:
        raise ValueError(
            f"query and key must have the same head dimension, got {query.shape[2]} and "
            f"{key.shape[2]}"
        )
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, "
            f"{value.dtype}"
        )


def _check_batch(batch: Tensor | None, n: int, name: str) -> Tensor | None:
    if batch is None:
        return None
    if not isinstance(batch, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(batch).__name__}")
    if batch.dim() != 1 or batch.shape[0] != n:
        raise ValueError(
            f"{name} must have shape ({n},) (one complex index per token), got {tuple(batch.shape)}"
        )
    if batch.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an integer (long) tensor, got {batch.dtype}")
    return batch.long()


def _resolve_batches(
    batch_target: Tensor | None,
    batch_source: Tensor | None,
    n_target: int,
    n_source: int,
    num_graphs: int | None,
    device: torch.device,
    *,
    require_sorted: bool,
) -> tuple[Tensor, Tensor, int]:
    """Validate the batch vectors; return long batch vectors and the number of complexes."""
    batch_target = _check_batch(batch_target, n_target, "batch_target")
    batch_source = _check_batch(batch_source, n_source, "batch_source")
    if (batch_target is None) != (batch_source is None):
        raise ValueError("give both batch_target and batch_source, or neither (one complex)")
    if num_graphs is not None and (not isinstance(num_graphs, int) or num_graphs < 0):
        raise ValueError(f"num_graphs must be a non-negative int or None, got {num_graphs!r}")
    if batch_target is None:
        b = 1 if num_graphs is None else num_graphs
        if b != 1 and (n_target > 0 or n_source > 0):
            raise ValueError("num_graphs must be 1 when batch vectors are None (one complex)")
        zeros_t = torch.zeros(n_target, dtype=torch.long, device=device)
        zeros_s = torch.zeros(n_source, dtype=torch.long, device=device)
        return zeros_t, zeros_s, max(b, 1)
    for name, batch in (("batch_target", batch_target), ("batch_source", batch_source)):
        if batch.numel() == 0:
            continue
        if int(batch.min()) < 0:
            raise ValueError(f"{name} has negative complex indices")
        if require_sorted and bool((batch[1:] < batch[:-1]).any()):
            raise ValueError(
                f"{name} must be sorted (tokens of complex 0 first, as PyG batching produces)"
            )
    top = 0
    if batch_target.numel() > 0:
        top = max(top, int(batch_target.max()) + 1)
    if batch_source.numel() > 0:
        top = max(top, int(batch_source.max()) + 1)
    if num_graphs is None:
        num_graphs = max(top, 1)
    elif top > num_graphs:
        raise ValueError(f"batch vectors index complex {top - 1} but num_graphs={num_graphs}")
    return batch_target, batch_source, max(num_graphs, 1)


def neighborhood_index(
    neighborhood: Neighborhood, n_target: int, n_source: int, *, name: str = "neighborhood"
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Return the (target, source) index pair and the values of a neighbourhood.

    Parameters
    ----------
    neighborhood : torch.Tensor or tuple of torch.Tensor
        Either a sparse COO (or CSR) tensor of shape ``(n_target, n_source)`` (coalesced by
        convention; coalesced here otherwise), a ``(2, nnz)`` integer tensor
        ``[index_target; index_source]``, or a pair ``(index_target, index_source)`` of
        ``(nnz,)`` integer tensors. Every stored entry counts as a neighbour, whatever its
        value (the package convention is that neighbourhoods have no explicit zeros).
    n_target, n_source : int
        Expected shape.
    name : str
        Name used in error messages.

    Returns
    -------
    index_target : torch.Tensor, shape = (nnz,)
        Row (target) of every entry, long.
    index_source : torch.Tensor, shape = (nnz,)
        Column (source) of every entry, long.
    values : torch.Tensor or None, shape = (nnz, ...)
        The stored values of a sparse tensor, ``None`` for index pairs.
    """
    if isinstance(neighborhood, Tensor):
        if neighborhood.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr):
            neighborhood = neighborhood.to_sparse_coo()
        if neighborhood.layout == torch.sparse_coo:
            if neighborhood.sparse_dim() != 2:
                raise ValueError(
                    f"{name} must be a 2-D sparse (n_target, n_source) matrix, got sparse_dim="
                    f"{neighborhood.sparse_dim()}"
                )
            shape = tuple(neighborhood.shape[:2])
            if shape != (n_target, n_source):
                raise ValueError(
                    f"{name} has shape {shape} but must be (n_target, n_source) = "
                    f"({n_target}, {n_source}); neighbourhoods are oriented (target, source)"
                )
            if not neighborhood.is_coalesced():
                neighborhood = neighborhood.coalesce()
            index = neighborhood.indices()
            return index[0], index[1], neighborhood.values()
        if neighborhood.layout != torch.strided:
            raise TypeError(f"{name}: unsupported tensor layout {neighborhood.layout}")
        if neighborhood.is_floating_point() or neighborhood.dtype == torch.bool:
            raise TypeError(
                f"{name} is a dense {tuple(neighborhood.shape)} {neighborhood.dtype} tensor; pass "
                "a sparse COO matrix (e.g. dense.to_sparse()) or an integer (2, nnz) edge index"
            )
        if neighborhood.dim() != 2 or neighborhood.shape[0] != 2:
            raise ValueError(
                f"{name} as an edge index must have shape (2, nnz), got {tuple(neighborhood.shape)}"
            )
        index_target, index_source = neighborhood[0], neighborhood[1]
    elif isinstance(neighborhood, (tuple, list)) and len(neighborhood) == 2:
        index_target, index_source = neighborhood
    else:
        raise TypeError(
            f"{name} must be a sparse (n_target, n_source) tensor, a (2, nnz) edge index or a pair "
            f"(index_target, index_source), got {type(neighborhood).__name__}"
        )
    for part, idx, bound in (
        ("target", index_target, n_target),
        ("source", index_source, n_source),
    ):
        if not isinstance(idx, Tensor) or idx.dim() != 1:
            raise TypeError(f"{name}: index_{part} must be a 1-D integer tensor")
        if idx.is_floating_point() or idx.dtype == torch.bool:
            raise TypeError(f"{name}: index_{part} must be an integer tensor, got {idx.dtype}")
        if idx.numel() > 0 and (int(idx.min()) < 0 or int(idx.max()) >= bound):
            raise ValueError(f"{name}: index_{part} out of range [0, {bound})")
    if index_target.shape[0] != index_source.shape[0]:
        raise ValueError(
            f"{name}: index_target and index_source must have the same length, got "
            f"{index_target.shape[0]} and {index_source.shape[0]}"
        )
    return index_target.long(), index_source.long(), None


def _scale(scale: float | None, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0
    return float(scale)


def _check_dropout(dropout_p: float) -> None:
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")


# ----------------------------------------------------------------------------------------------
# sparse kernels (SDDMM / SpMM on an edge list) with memory-light autograd
# ----------------------------------------------------------------------------------------------
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
    neighborhood : torch.Tensor or tuple of torch.Tensor
        Sparse ``(n_target, n_source)`` matrix, ``(2, nnz)`` edge index or pair
        ``(index_target, index_source)``; see :func:`neighborhood_index`.
    scale : float, optional
        Logit scale; ``1 / sqrt(d)`` by default.
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
    _check_qkv(query, key, value)
    _check_dropout(dropout_p)
    n_t, heads = query.shape[0], query.shape[1]
    index_t, index_s, _ = neighborhood_index(neighborhood, n_t, key.shape[0])
    index_t = index_t.to(query.device)
    index_s = index_s.to(query.device)
    index_t, index_s = index_t.contiguous(), index_s.contiguous()
    # SDDMM and SpMM keep only (nnz, heads) tensors for backward; the (nnz, heads, d) gathers are
    # transient and chunked (SPARSE_CHUNK_ELEMENTS).
    scores = _GatherDot.apply(query, key, index_t, index_s) * _scale(scale, query.shape[2])
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
    return _WeightedScatter.apply(alpha, value, index_s, index_t, n_t)


# ----------------------------------------------------------------------------------------------
# dense attention
# ----------------------------------------------------------------------------------------------
def _padding(batch: Tensor, num_graphs: int) -> tuple[Tensor, Tensor, int]:
    """Return counts per complex, flat padded index ``b * L + position`` per token, and ``L``."""
    counts = torch.bincount(batch, minlength=num_graphs)
    length = int(counts.max()) if counts.numel() > 0 else 0
    ptr = torch.cumsum(counts, 0) - counts  # exclusive cumsum: first token of every complex
    position = torch.arange(batch.shape[0], device=batch.device) - ptr.index_select(0, batch)
    return counts, batch * length + position, length


def _to_padded(x: Tensor, flat: Tensor, num_graphs: int, length: int) -> Tensor:
    """(n, heads, d) → (B, heads, L, d), zeros at padded positions."""
    out = x.new_zeros((num_graphs * length, x.shape[1], x.shape[2]))
    out = out.index_copy(0, flat, x)
    return out.view(num_graphs, length, x.shape[1], x.shape[2]).transpose(1, 2)


@dataclass(frozen=True)
class PaddedLayout:
    r"""Precomputed padding of a batch of token sets into a ``(num_graphs, length)`` grid.

    Build it once per forward with :func:`padded_layout` and pass it to every self-attention
    call (:func:`dense_attention`, :func:`linear_attention`, :func:`dense_attention_weights`,
    :class:`~topomodelx_attention.nn.attention.MultiHeadAttention`): the index arithmetic
    (counts, positions, key-padding mask) is then done once instead of once per layer, and the
    tokens need not be sorted by graph. Two forms:

    * **packed** (``index`` given): ``n`` tokens in any order; token ``t`` sits in slot
      ``index[t] = b * length + position``; attention pads / unpads with one
      ``index_copy`` / ``index_select`` per tensor.
    * **padded** (``index is None``, from :meth:`padded`): the rows *are* the
      ``num_graphs * length`` slots, row-major; attention only reshapes (no copy). Padding
      rows carry arbitrary finite values and are masked as keys.

    Attributes
    ----------
    index : torch.Tensor or None, shape = (n,)
        Flat slot of every token (long), or ``None`` for the padded form.
    batch : torch.Tensor, shape = (n,)
        Graph of every row (long); ``slot // length`` in the padded form.
    counts : torch.Tensor, shape = (num_graphs,)
        Number of real tokens of every graph.
    num_graphs : int
        Number of graphs ``B``.
    length : int
        Slots per graph ``L = max(counts)`` (at least 1).
    key_mask : torch.Tensor or None, shape = (num_graphs, 1, 1, length)
        Boolean mask for :func:`~torch.nn.functional.scaled_dot_product_attention` (``True`` =
        attend); ``None`` when no slot is padding. Graphs without tokens attend to all their
        (zero or masked) slots, which gives finite outputs instead of NaN.
    key_valid : torch.Tensor, shape = (num_graphs, length)
        ``True`` on the slots holding a real token.
    """

    index: Tensor | None
    batch: Tensor
    counts: Tensor
    num_graphs: int
    length: int
    key_mask: Tensor | None
    key_valid: Tensor

    @property
    def num_tokens(self) -> int:
        """Number of rows ``n`` the layout describes (``B * L`` in the padded form)."""
        return int(self.batch.shape[0])

    @property
    def fill(self) -> float:
        """Fraction of the ``B * L`` slots holding a real token."""
        return float(self.counts.sum()) / max(1, self.num_graphs * self.length)

    def pad(self, x: Tensor, value: float = 0.0) -> Tensor:
        """Scatter token rows into the grid.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, ...)
            One row per token of the packed form (or per slot of the padded form).
        value : float, default = 0.0
            Fill value of the padding slots (packed form only).

        Returns
        -------
        torch.Tensor, shape = (num_graphs, length, ...)
            Padded tensor (a view in the padded form).
        """
        if x.shape[0] != self.num_tokens:
            raise ValueError(f"x has {x.shape[0]} rows but the layout has {self.num_tokens}")
        rest = tuple(x.shape[1:])
        if self.index is None:
            return x.reshape(self.num_graphs, self.length, *rest)
        out = x.new_full((self.num_graphs * self.length, *rest), value)
        return out.index_copy(0, self.index, x).view(self.num_graphs, self.length, *rest)

    def unpad(self, x: Tensor) -> Tensor:
        """Gather the token rows back from the grid (inverse of :meth:`pad`).

        Parameters
        ----------
        x : torch.Tensor, shape = (num_graphs, length, ...)
            Padded tensor.

        Returns
        -------
        torch.Tensor, shape = (n, ...)
            One row per token (per slot in the padded form).
        """
        if tuple(x.shape[:2]) != (self.num_graphs, self.length):
            raise ValueError(
                f"x must have shape ({self.num_graphs}, {self.length}, ...), got {tuple(x.shape)}"
            )
        flat = x.reshape(self.num_graphs * self.length, *x.shape[2:])
        return flat if self.index is None else flat.index_select(0, self.index)

    def padded(self) -> PaddedLayout:
        """Return the layout of the padded rows themselves (``index=None``: ``pad`` reshapes)."""
        if self.index is None:
            return self
        device = self.counts.device
        batch = torch.arange(self.num_graphs, device=device).repeat_interleave(self.length)
        return PaddedLayout(
            None, batch, self.counts, self.num_graphs, self.length, self.key_mask, self.key_valid
        )

    def _heads(self, x: Tensor) -> Tensor:
        """(n, heads, d) → (B, heads, L, d) (zeros at padded slots in the packed form)."""
        if self.index is None:
            return x.view(self.num_graphs, self.length, x.shape[1], x.shape[2]).transpose(1, 2)
        return _to_padded(x, self.index, self.num_graphs, self.length)

    def _unheads(self, x: Tensor) -> Tensor:
        """(B, heads, L, d) → (n, heads, d)."""
        flat = x.transpose(1, 2).reshape(self.num_graphs * self.length, x.shape[1], x.shape[3])
        return flat if self.index is None else flat.index_select(0, self.index)

    def _flat(self) -> Tensor:
        """Slot of every row, materialised also in the padded form."""
        if self.index is not None:
            return self.index
        return torch.arange(self.num_tokens, device=self.batch.device)


def padded_layout(batch: Tensor, num_graphs: int | None = None) -> PaddedLayout:
    """Compute the :class:`PaddedLayout` of tokens with graph indices ``batch``.

    Tokens keep their relative order inside each graph (a stable sort), so ``batch`` need not
    be sorted: e.g. ``torch.cat([special_tokens_batch, node_batch, edge_batch])`` puts every
    graph's special token first in its slots.

    Parameters
    ----------
    batch : torch.Tensor, shape = (n,)
        Graph index of every token (long, non-negative).
    num_graphs : int, optional
        Number of graphs (``batch.max() + 1`` by default; graphs beyond it are empty).

    Returns
    -------
    PaddedLayout
        The packed layout (``index`` given), or the padded form (``index=None``) when the
        tokens are sorted by graph and all graphs have the same size (no copy is needed).
    """
    if not isinstance(batch, Tensor):
        raise TypeError(f"batch must be a (n,) long tensor, got {type(batch).__name__}")
    batch = _check_batch(batch, batch.shape[0], "batch")
    n = batch.shape[0]
    top = int(batch.max()) + 1 if n > 0 else 0
    if n > 0 and int(batch.min()) < 0:
        raise ValueError("batch has negative graph indices")
    if num_graphs is None:
        num_graphs = max(top, 1)
    elif not isinstance(num_graphs, int) or isinstance(num_graphs, bool) or num_graphs < top:
        raise ValueError(f"num_graphs={num_graphs!r} must be an int >= batch.max() + 1 = {top}")
    num_graphs = max(num_graphs, 1)
    counts = torch.bincount(batch, minlength=num_graphs)
    length = max(int(counts.max()), 1)
    ptr = torch.cumsum(counts, 0) - counts
    key_valid = torch.arange(length, device=batch.device).unsqueeze(0) < counts.unsqueeze(1)
    attend = key_valid | (counts == 0).unsqueeze(1)
    key_mask = None if bool(attend.all()) else attend.view(num_graphs, 1, 1, length)
    unsorted = n > 1 and bool((batch[1:] < batch[:-1]).any())
    if not unsorted and n == num_graphs * length:
        # sorted tokens filling the grid: the slots are the rows (padded form, no copies)
        return PaddedLayout(None, batch, counts, num_graphs, length, key_mask, key_valid)
    if unsorted:
        order = torch.argsort(batch, stable=True)
        position = torch.empty_like(batch)
        position[order] = torch.arange(n, device=batch.device) - ptr.index_select(
            0, batch.index_select(0, order)
        )
    else:
        position = torch.arange(n, device=batch.device) - ptr.index_select(0, batch)
    return PaddedLayout(
        batch * length + position, batch, counts, num_graphs, length, key_mask, key_valid
    )


def _check_layout(layout: PaddedLayout, n_target: int, n_source: int) -> None:
    if not isinstance(layout, PaddedLayout):
        raise TypeError(f"layout must be a PaddedLayout (padded_layout(...)), got {type(layout)!r}")
    if not n_target == n_source == layout.num_tokens:
        raise ValueError(
            "a layout describes self-attention: queries and keys must both have "
            f"layout.num_tokens={layout.num_tokens} rows, got {n_target} and {n_source}"
        )


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
    num_graphs: int | None = None,
    layout: PaddedLayout | None = None,
) -> Tensor:
    r"""All-pairs multi-head attention in every complex, with an optional θ·N bias (Eq. 2, dense).

    For every complex ``b``, head ``h``, target ``t`` and source ``s`` of ``b``:
    :math:`e_{ts} = \mathrm{scale}\,\langle q_t, k_s\rangle + \theta_h N_{ts}`
    (:math:`\star` = sum, :math:`\phi(N) = \theta N`), softmax over the sources of ``b``.
    Computed per complex block: tokens are padded to ``(B, heads, L_max, d)`` with index
    arithmetic and fed to :func:`torch.nn.functional.scaled_dot_product_attention` with a
    key-padding mask; the bias is scattered into a ``(B, 1 or heads, Lt_max, Ls_max)`` float
    mask. No ``n_target × n_source`` matrix is ever built.

    Parameters
    ----------
    query : torch.Tensor, shape = (n_target, heads, d)
        Projected queries.
    key : torch.Tensor, shape = (n_source, heads, d)
        Projected keys.
    value : torch.Tensor, shape = (n_source, heads, d_v)
        Projected values.
    batch_target : torch.Tensor, shape = (n_target,), optional
        Sorted complex index of every target token; ``None`` means one complex.
    batch_source : torch.Tensor, shape = (n_source,), optional
        Sorted complex index of every source token; ``None`` means one complex.
    bias : torch.Tensor or tuple of torch.Tensor, optional
        Neighbourhood ``N`` of shape ``(n_target, n_source)`` (sparse tensor whose values,
        shape ``(nnz,)`` or hybrid ``(nnz, heads)``, are used, or an index pair meaning
        values 1). Must be block-diagonal w.r.t. the batch vectors; entries linking two
        different complexes are ignored. Pairs not stored in ``N`` get bias 0.
    bias_scale : torch.Tensor or float, shape = () or (1,) or (heads,), optional
        The learnable :math:`\theta` multiplying ``N`` (one per head or shared). ``None``
        means 1 (values of ``bias`` already pre-multiplied).
    scale : float, optional
        Logit scale; ``1 / sqrt(d)`` by default.
    dropout_p : float, default = 0.0
        Dropout probability on the attention weights (only when ``training``).
    training : bool, default = False
        Whether dropout is active.
    num_graphs : int, optional
        Number of complexes ``B`` (inferred from the batch vectors otherwise; complexes beyond
        the last index are empty).
    layout : PaddedLayout, optional
        Precomputed padding (:func:`padded_layout`) of a **self-attention** token set
        (``n_target = n_source = layout.num_tokens``); replaces the batch vectors and
        ``num_graphs`` (which must then be ``None``), and the tokens need not be sorted. Use it
        to pay the index arithmetic once for a stack of layers.

    Returns
    -------
    torch.Tensor, shape = (n_target, heads, d_v)
        Attention output; zeros for targets whose complex has no source token.
    """
    _check_qkv(query, key, value)
    _check_dropout(dropout_p)
    n_t, heads = query.shape[0], query.shape[1]
    out_shape = (n_t, heads, value.shape[2])
    if layout is not None:
        _check_layout_call(layout, n_t, key.shape[0], batch_target, batch_source, num_graphs)
        if n_t == 0:
            return query.new_zeros(out_shape) + 0.0 * (query.sum() + key.sum() + value.sum())
        q, k, v = layout._heads(query), layout._heads(key), layout._heads(value)
        attn_mask = _attention_mask(query, key, None, bias, bias_scale, heads, layout=layout)
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=attn_mask,
            dropout_p=dropout_p if training else 0.0,
            scale=_scale(scale, query.shape[2]),
        )
        return layout._unheads(out)
    grid = _grid(query, key, batch_target, batch_source, num_graphs)
    if grid is None:
        # No target, or no source anywhere: the output is zero. Keep the graph connected.
        return query.new_zeros(out_shape) + 0.0 * (query.sum() + key.sum() + value.sum())
    q, k, v = grid.heads_t(query), grid.heads_s(key), grid.heads_s(value)
    attn_mask = _attention_mask(query, key, grid, bias, bias_scale, heads)
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout_p if training else 0.0,
        scale=_scale(scale, query.shape[2]),
    )  # (B, heads, Lt, d_v)
    return grid.unheads_t(out)


def dense_attention_weights(
    query: Tensor,
    key: Tensor,
    batch_target: Tensor | None = None,
    batch_source: Tensor | None = None,
    *,
    bias: Neighborhood | None = None,
    bias_scale: Tensor | float | None = None,
    scale: float | None = None,
    num_graphs: int | None = None,
    layout: PaddedLayout | None = None,
) -> Tensor:
    r"""Return the attention probabilities of :func:`dense_attention`, per complex, padded.

    :math:`\alpha^h_{ts} = \mathrm{softmax}_s(\mathrm{scale}\,\langle q_t, k_s\rangle +
    \theta_h N_{ts})` inside every complex, materialised as a ``(B, heads, Lt, Ls)`` tensor
    (memory quadratic in the largest complex: meant for inspection, visualisation and for
    supervising attention maps, e.g. the equivariant-basis experiment of TokenGT §5.1; use
    :func:`dense_attention` to attend). Differentiable.

    Parameters
    ----------
    query : torch.Tensor, shape = (n_target, heads, d)
        Projected queries.
    key : torch.Tensor, shape = (n_source, heads, d)
        Projected keys.
    batch_target, batch_source : torch.Tensor, shape = (n_target,) / (n_source,), optional
        Sorted complex index of every token; ``None`` means one complex.
    bias : torch.Tensor or tuple of torch.Tensor, optional
        Neighbourhood bias ``N`` as in :func:`dense_attention`.
    bias_scale : torch.Tensor or float, optional
        :math:`\theta` as in :func:`dense_attention`.
    scale : float, optional
        Logit scale; ``1 / sqrt(d)`` by default.
    num_graphs : int, optional
        Number of complexes.
    layout : PaddedLayout, optional
        Precomputed self-attention layout (then slot ``p`` of graph ``b`` is the token ``t``
        with ``layout.index[t] = b * L + p``).

    Returns
    -------
    torch.Tensor, shape = (B, heads, Lt, Ls)
        ``out[b, h, i, j]``: weight of the ``j``-th source of complex ``b`` for its ``i``-th
        target (positions in the order of the tokens inside the complex, or the layout's
        slots). Rows sum to one over the real sources; padded source columns, padded target
        rows and rows of complexes without sources are zero.
    """
    if not isinstance(query, Tensor) or not isinstance(key, Tensor):
        raise TypeError("query and key must be tensors")
    _check_qkv(query, key, key)
    n_t, heads = query.shape[0], query.shape[1]
    if layout is not None:
        _check_layout_call(layout, n_t, key.shape[0], batch_target, batch_source, num_graphs)
        q, k = layout._heads(query), layout._heads(key)
        valid_t = valid_s = layout.key_valid
        attn_mask = _attention_mask(query, key, None, bias, bias_scale, heads, layout=layout)
    else:
        grid = _grid(query, key, batch_target, batch_source, num_graphs)
        if grid is None:
            b = _resolve_batches(
                batch_target,
                batch_source,
                n_t,
                key.shape[0],
                num_graphs,
                query.device,
                require_sorted=True,
            )[2]
            return query.new_zeros((b, heads, 0 if n_t == 0 else 1, 0)) + 0.0 * (
                query.sum() + key.sum()
            )
        q, k = grid.heads_t(query), grid.heads_s(key)
        valid_t, valid_s = grid.valid_t, grid.valid_s
        attn_mask = _attention_mask(query, key, grid, bias, bias_scale, heads)
    scores = torch.matmul(q * _scale(scale, query.shape[2]), k.transpose(-2, -1))
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask  # θ·N bias (its -inf entries repeat the key mask below)
    num_b = valid_s.shape[0]
    has_source = valid_s.any(-1)  # (B,)
    if not bool(valid_s.all()):
        scores = scores.masked_fill(~valid_s.view(num_b, 1, 1, -1), float("-inf"))
        if not bool(has_source.all()):  # no source at all: finite rows, zeroed below
            scores = scores.masked_fill(~has_source.view(num_b, 1, 1, 1), 0.0)
    weights = torch.softmax(scores, dim=-1)
    rows = valid_t & has_source.unsqueeze(1)  # (B, Lt)
    if not bool(rows.all()):
        weights = weights * rows.view(num_b, 1, -1, 1).to(weights.dtype)
    return weights


def _check_layout_call(
    layout: PaddedLayout,
    n_target: int,
    n_source: int,
    batch_target: Tensor | None,
    batch_source: Tensor | None,
    num_graphs: int | None,
) -> None:
    _check_layout(layout, n_target, n_source)
    if batch_target is not None or batch_source is not None:
        raise ValueError("give either a layout or batch vectors, not both")
    if num_graphs is not None and num_graphs != layout.num_graphs:
        raise ValueError(f"num_graphs={num_graphs} but layout.num_graphs={layout.num_graphs}")


@dataclass(frozen=True)
class _Grid:
    """Padding of a (possibly cross-) attention call built from sorted batch vectors."""

    single: bool
    num_b: int
    batch_t: Tensor
    batch_s: Tensor
    flat_t: Tensor | None
    flat_s: Tensor | None
    length_t: int
    length_s: int
    valid_t: Tensor  # (B, Lt)
    valid_s: Tensor  # (B, Ls)
    key_mask: Tensor | None  # (B, 1, 1, Ls) bool

    def heads_t(self, x: Tensor) -> Tensor:
        if self.single:
            return x.transpose(0, 1).unsqueeze(0)
        return _to_padded(x, self.flat_t, self.num_b, self.length_t)

    def heads_s(self, x: Tensor) -> Tensor:
        if self.single:
            return x.transpose(0, 1).unsqueeze(0)
        return _to_padded(x, self.flat_s, self.num_b, self.length_s)

    def unheads_t(self, out: Tensor) -> Tensor:
        if self.single:
            return out.squeeze(0).transpose(0, 1)
        heads, d_v = out.shape[1], out.shape[3]
        out = out.transpose(1, 2).reshape(self.num_b * self.length_t, heads, d_v)
        return out.index_select(0, self.flat_t)


def _grid(
    query: Tensor,
    key: Tensor,
    batch_target: Tensor | None,
    batch_source: Tensor | None,
    num_graphs: int | None,
) -> _Grid | None:
    """Pad the targets and sources (``None`` when there is nothing to attend)."""
    n_t, n_s = query.shape[0], key.shape[0]
    device = query.device
    single = batch_target is None and batch_source is None and num_graphs in (None, 1)
    batch_t, batch_s, num_b = _resolve_batches(
        batch_target, batch_source, n_t, n_s, num_graphs, device, require_sorted=True
    )
    if n_t == 0 or n_s == 0:
        return None
    if single:
        length_t, length_s = n_t, n_s
        counts_t = torch.full((1,), n_t, dtype=torch.long, device=device)
        counts_s = torch.full((1,), n_s, dtype=torch.long, device=device)
        flat_t = flat_s = None
    else:
        counts_t, flat_t, length_t = _padding(batch_t, num_b)
        if batch_source is batch_target and n_s == n_t:
            counts_s, flat_s, length_s = counts_t, flat_t, length_t
        else:
            counts_s, flat_s, length_s = _padding(batch_s, num_b)
    valid_t = torch.arange(length_t, device=device).unsqueeze(0) < counts_t.unsqueeze(1)
    valid_s = torch.arange(length_s, device=device).unsqueeze(0) < counts_s.unsqueeze(1)
    # A complex without sources would give a fully masked row (NaN in SDPA): let it attend to its
    # all-zero padded keys/values instead, which yields exactly zero output and finite gradients.
    attend = valid_s | (counts_s == 0).unsqueeze(1)
    key_mask = None if bool(attend.all()) else attend.view(num_b, 1, 1, length_s)
    return _Grid(
        single,
        num_b,
        batch_t,
        batch_s,
        flat_t,
        flat_s,
        length_t,
        length_s,
        valid_t,
        valid_s,
        key_mask,
    )


def _attention_mask(
    query: Tensor,
    key: Tensor,
    grid: _Grid | None,
    bias: Neighborhood | None,
    bias_scale: Tensor | float | None,
    heads: int,
    *,
    layout: PaddedLayout | None = None,
) -> Tensor | None:
    """SDPA mask: the key-padding mask, plus the θ·N bias scattered into (B, 1|H, Lt, Ls)."""
    key_mask = layout.key_mask if layout is not None else grid.key_mask
    if bias is None:
        return key_mask
    n_t, n_s = query.shape[0], key.shape[0]
    device = query.device
    index_t, index_s, values = neighborhood_index(bias, n_t, n_s, name="bias")
    index_t = index_t.to(device)
    index_s = index_s.to(device)
    nnz = index_t.shape[0]
    if values is None:
        values = query.new_ones((nnz, 1))
    else:
        values = values.to(query.dtype)
        values = values.unsqueeze(1) if values.dim() == 1 else values.flatten(1)
    theta = None
    if bias_scale is not None:
        theta = torch.as_tensor(bias_scale, dtype=query.dtype, device=device).reshape(-1)
    widths = {values.shape[1], 1 if theta is None else theta.shape[0]}
    if not widths <= {1, heads}:
        raise ValueError(
            f"bias values and bias_scale must give 1 or heads={heads} logits per entry, got "
            f"{values.shape[1]} and {None if theta is None else theta.shape[0]}; bias_scale "
            "must have shape (), (1,) or (heads,)"
        )
    if layout is not None:
        num_b, length_t, length_s = layout.num_graphs, layout.length, layout.length
        flat = layout._flat()
        b = layout.batch.index_select(0, index_t)
        same = b == layout.batch.index_select(0, index_s)
        values = values * same.unsqueeze(1).to(values.dtype)
        pos_t = flat.index_select(0, index_t) - b * length_t
        pos_s = flat.index_select(0, index_s) - layout.batch.index_select(0, index_s) * length_s
        row = (b * length_t + pos_t) * length_s + pos_s
    elif grid.single:
        num_b, length_t, length_s = 1, grid.length_t, grid.length_s
        row = index_t * length_s + index_s
    else:
        num_b, length_t, length_s = grid.num_b, grid.length_t, grid.length_s
        b = grid.batch_t.index_select(0, index_t)
        same = b == grid.batch_s.index_select(0, index_s)  # entries across complexes are dropped
        values = values * same.unsqueeze(1).to(values.dtype)
        pos_t = grid.flat_t.index_select(0, index_t) - b * length_t
        pos_s = (
            grid.flat_s.index_select(0, index_s) - grid.batch_s.index_select(0, index_s) * length_s
        )
        row = (b * length_t + pos_t) * length_s + pos_s
    hv = values.shape[1]
    dense_n = values.new_zeros((num_b * length_t * length_s, hv)).index_add(0, row, values)
    attn_mask = dense_n.view(num_b, length_t, length_s, hv).permute(0, 3, 1, 2)
    if theta is not None:  # θ·N, broadcast over the heads: (B, 1 or heads, Lt, Ls)
        attn_mask = attn_mask * theta.view(1, -1, 1, 1)
    if key_mask is not None:
        attn_mask = attn_mask.masked_fill(~key_mask, float("-inf"))
    return attn_mask


# ----------------------------------------------------------------------------------------------
# linear (FAVOR+) attention
# ----------------------------------------------------------------------------------------------
def default_num_random_features(head_dim: int) -> int:
    r"""Default number of random features for FAVOR+: :math:`\max(\lceil d \ln d \rceil, 32)`.

    ``d ln d`` is the Performer's recommendation (Choromanski et al. 2021, Thm. 4); the floor
    of 32 keeps the variance acceptable for the small heads (d = 8..16) used by the models.

    Parameters
    ----------
    head_dim : int
        Query/key dimension per head.

    Returns
    -------
    int
        Number of random features.
    """
    if head_dim < 1:
        raise ValueError(f"head_dim must be positive, got {head_dim}")
    return max(math.ceil(head_dim * math.log(head_dim)) if head_dim > 1 else 1, 32)


def orthogonal_random_matrix(
    num_features: int,
    dim: int,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""Random projection of FAVOR+ with orthogonal rows (Choromanski et al. 2021, §2.4).

    Rows come in blocks of ``dim`` exactly orthogonal directions (QR of a Gaussian matrix,
    signs fixed so the directions are Haar distributed); every row is rescaled by the norm
    of an independent ``N(0, I_dim)`` vector so that marginally each row is ``N(0, I_dim)``
    (the estimator stays unbiased) while the blocks have lower variance than i.i.d. rows.

    Parameters
    ----------
    num_features : int
        Number of random features ``m`` (rows).
    dim : int
        Dimension of the queries/keys ``d`` (columns).
    generator : torch.Generator, optional
        CPU generator for reproducibility.
    dtype : torch.dtype, optional
        Output dtype (default: the default float dtype).
    device : torch.device or str, optional
        Output device.

    Returns
    -------
    torch.Tensor, shape = (num_features, dim)
        The projection :math:`\omega`.
    """
    if num_features < 1 or dim < 1:
        raise ValueError(f"num_features and dim must be positive, got {num_features} and {dim}")
    blocks = math.ceil(num_features / dim)
    gaussian = torch.randn(blocks, dim, dim, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    rows = q.transpose(-2, -1).reshape(blocks * dim, dim)[:num_features]
    norms = torch.randn(num_features, dim, generator=generator, dtype=torch.float64).norm(dim=1)
    out = rows * norms.unsqueeze(1)
    return out.to(dtype=dtype or torch.get_default_dtype(), device=device)


def favor_features(
    x: Tensor,
    projection: Tensor,
    is_query: bool,
    *,
    batch: Tensor | None = None,
    num_graphs: int | None = None,
    stabilize: bool = True,
) -> Tensor:
    r"""Positive random features of FAVOR+ for the softmax kernel :math:`\exp(q^\top k)`.

    :math:`\varphi(x) = m^{-1/2} \exp(\omega x - \lVert x\rVert^2 / 2 - c)`, with
    :math:`\mathbb{E}[\varphi(q)^\top \varphi(k)] = \exp(q^\top k - c_q - c_k)`.
    The stabiliser ``c`` cancels in the attention normalisation:

    * queries (``is_query=True``): ``c`` is the maximum over the features of the row, so the
      largest feature of every query is :math:`m^{-1/2}`;
    * keys: ``c`` is the maximum over the features **and over all keys of the same complex**
      (per head), given by ``batch``; without ``batch`` it is the maximum over all keys (per
      head). Being constant inside each complex, it cancels in every query's ratio.

    Inputs are not rescaled: for the attention kernel :math:`\exp(s\, q^\top k)` pass
    :math:`\sqrt{s}\,q` and :math:`\sqrt{s}\,k`. The stabilisers are detached (they cancel).

    Parameters
    ----------
    x : torch.Tensor, shape = (n, heads, d) or (n, d)
        Queries or keys.
    projection : torch.Tensor, shape = (m, d)
        Random projection :math:`\omega` (see :func:`orthogonal_random_matrix`).
    is_query : bool
        Query (per-row stabiliser) or key (per-complex stabiliser).
    batch : torch.Tensor, shape = (n,), optional
        Complex of every key; ignored for queries.
    num_graphs : int, optional
        Number of complexes (``batch.max() + 1`` by default).
    stabilize : bool, default = True
        Subtract the stabiliser ``c``; ``False`` gives the plain unbiased estimator (overflows
        easily, for tests).

    Returns
    -------
    torch.Tensor, shape = (n, heads, m) or (n, m)
        Non-negative features.
    """
    if projection.dim() != 2 or projection.shape[1] != x.shape[-1]:
        raise ValueError(
            f"projection must have shape (num_features, {x.shape[-1]}), got "
            f"{tuple(projection.shape)}"
        )
    projection = projection.to(dtype=x.dtype, device=x.device)
    logits = torch.matmul(x, projection.t()) - 0.5 * (x * x).sum(-1, keepdim=True)
    if stabilize and logits.numel() > 0:
        row_max = logits.detach().amax(-1, keepdim=True)  # (n, [heads,] 1)
        if is_query:
            logits = logits - row_max
        elif batch is None:
            logits = logits - row_max.amax(0, keepdim=True)
        else:
            num_b = num_graphs if num_graphs is not None else int(batch.max()) + 1
            block_max = scatter_max(row_max, batch, num_b)
            block_max = torch.where(
                torch.isfinite(block_max), block_max, torch.zeros_like(block_max)
            )
            logits = logits - block_max.index_select(0, batch)
    return torch.exp(logits) * (projection.shape[0] ** -0.5)


def linear_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    batch_target: Tensor | None = None,
    batch_source: Tensor | None = None,
    *,
    projection: Tensor,
    scale: float | None = None,
    num_graphs: int | None = None,
    strategy: str = "auto",
    layout: PaddedLayout | None = None,
) -> Tensor:
    r"""Kernelised (Performer / FAVOR+) multi-head attention inside every complex.

    Approximates the dense kind without bias,
    :math:`o_t = \sum_s \exp(\mathrm{scale}\,q_t^\top k_s) v_s / \sum_s \exp(\cdot)`, with
    positive random features :math:`\varphi` (:func:`favor_features`):
    :math:`o_t = \varphi(q_t)^\top S_b / \varphi(q_t)^\top z_b`, where per complex ``b`` and
    head, :math:`S_b = \sum_{s \in b} \varphi(k_s) v_s^\top` and
    :math:`z_b = \sum_{s \in b} \varphi(k_s)`. The θ·N neighbourhood bias and attention
    dropout are not available (there is no attention matrix). Each complex is exact in
    isolation: tokens of other complexes never contribute, and the key stabiliser is per
    complex.

    Two equivalent evaluation strategies (same values up to rounding):

    ``"scatter"``
        :math:`S_b, z_b` are scatter sums over ``batch_source`` of the per-token outer
        products :math:`\varphi(k_s) [v_s, 1]^\top`; queries gather :math:`S_{b_t}`.
        :math:`O(n \cdot \mathrm{heads} \cdot m \cdot (d_v + 1))` time and memory, processed
        in chunks of at most ``LINEAR_CHUNK_ELEMENTS`` elements; no padding.
    ``"padded"``
        features are padded per complex to ``(B, heads, L_max, m)`` and contracted with batched
        matrix products: :math:`O(B \cdot L_{max} \cdot \mathrm{heads} \cdot (m + d_v))`
        memory, several times faster when complexes have similar sizes.
    ``"auto"`` (default)
        ``"padded"`` when its memory estimate is at most that of ``"scatter"``, otherwise
        ``"scatter"``; hence memory and time stay linear in the number of tokens whatever the
        size distribution (one huge complex among many tiny ones takes the scatter path).

    Parameters
    ----------
    query : torch.Tensor, shape = (n_target, heads, d)
        Projected queries.
    key : torch.Tensor, shape = (n_source, heads, d)
        Projected keys.
    value : torch.Tensor, shape = (n_source, heads, d_v)
        Projected values.
    batch_target : torch.Tensor, shape = (n_target,), optional
        Sorted complex index of every target token; ``None`` means one complex.
    batch_source : torch.Tensor, shape = (n_source,), optional
        Sorted complex index of every source token; ``None`` means one complex.
    projection : torch.Tensor, shape = (m, d)
        Random projection shared by the heads (:func:`orthogonal_random_matrix`).
    scale : float, optional
        Logit scale of the approximated softmax; ``1 / sqrt(d)`` by default.
    num_graphs : int, optional
        Number of complexes.
    strategy : {"auto", "scatter", "padded"}, default = "auto"
        Evaluation strategy (see above); one complex always uses two plain matrix products.
    layout : PaddedLayout, optional
        Precomputed padding (:func:`padded_layout`) of a **self-attention** token set; replaces
        the batch vectors and ``num_graphs`` (which must be ``None``) and forces the
        ``"padded"`` strategy on the layout's grid (memory ``O(B · L · heads · m)``, linear in
        the tokens when the graphs have similar sizes). Keys in padding slots are masked.

    Returns
    -------
    torch.Tensor, shape = (n_target, heads, d_v)
        Attention output; zeros for targets whose complex has no source token.
    """
    _check_qkv(query, key, value)
    if not isinstance(projection, Tensor) or projection.dim() != 2:
        raise TypeError("projection must be a (num_features, d) tensor")
    if projection.shape[1] != query.shape[2]:
        raise ValueError(
            f"projection must have {query.shape[2]} columns (the head dimension), got "
            f"{projection.shape[1]}"
        )
    if strategy not in ("auto", "scatter", "padded"):
        raise ValueError(f"strategy must be 'auto', 'scatter' or 'padded', got {strategy!r}")
    n_t, heads, _ = query.shape
    n_s, d_v = key.shape[0], value.shape[2]
    if layout is not None:
        _check_layout_call(layout, n_t, n_s, batch_target, batch_source, num_graphs)
        return _linear_layout(query, key, value, projection, _scale(scale, query.shape[2]), layout)
    single = batch_target is None and batch_source is None and num_graphs in (None, 1)
    batch_t, batch_s, num_b = _resolve_batches(
        batch_target, batch_source, n_t, n_s, num_graphs, query.device, require_sorted=True
    )
    root = math.sqrt(_scale(scale, query.shape[2]))
    phi_q = favor_features(query * root, projection, True)  # (n_t, heads, m)
    phi_k = favor_features(
        key * root, projection, False, batch=None if single else batch_s, num_graphs=num_b
    )
    m = phi_q.shape[-1]
    value_one = torch.cat([value, value.new_ones((n_s, heads, 1))], dim=-1)  # (n_s, heads, d_v+1)

    if single:
        kv = torch.einsum("shm,she->hme", phi_k, value_one)  # (heads, m, d_v+1)
        out = torch.einsum("thm,hme->the", phi_q, kv)
    else:
        if strategy != "scatter" and n_t > 0 and n_s > 0:
            _, flat_t, length_t = _padding(batch_t, num_b)
            _, flat_s, length_s = _padding(batch_s, num_b)
            padded_cost = num_b * (length_t + length_s) * (m + d_v + 1)
            scatter_cost = (n_t + n_s) * m * (d_v + 1)
            use_padded = strategy == "padded" or padded_cost <= scatter_cost
        else:
            use_padded = False
        if use_padded:
            pk = _to_padded(phi_k, flat_s, num_b, length_s)  # (B, heads, Ls, m), zero padded
            pv = _to_padded(value_one, flat_s, num_b, length_s)  # (B, heads, Ls, d_v+1)
            pq = _to_padded(phi_q, flat_t, num_b, length_t)  # (B, heads, Lt, m)
            kv = torch.matmul(pk.transpose(-2, -1), pv)  # (B, heads, m, d_v+1)
            out = torch.matmul(pq, kv).transpose(1, 2).reshape(num_b * length_t, heads, d_v + 1)
            out = out.index_select(0, flat_t)
        else:
            out = _linear_scatter(phi_q, phi_k, value_one, batch_t, batch_s, num_b)
    numerator, denominator = out[..., :d_v], out[..., d_v:]
    positive = denominator > 0
    safe = torch.where(positive, denominator, torch.ones_like(denominator))
    return torch.where(positive, numerator / safe, torch.zeros_like(numerator))


def _linear_layout(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    projection: Tensor,
    scale: float,
    layout: PaddedLayout,
) -> Tensor:
    """FAVOR+ on a precomputed layout: padded batched products, padding keys masked."""
    n, heads, d_v = query.shape[0], query.shape[1], value.shape[2]
    if n == 0:
        return value.new_zeros((0, heads, d_v)) + 0.0 * (query.sum() + key.sum() + value.sum())
    root = math.sqrt(scale)
    num_b, length = layout.num_graphs, layout.length
    phi_q = favor_features(layout._heads(query) * root, projection, True)  # (B, heads, L, m)
    k = layout._heads(key) * root
    projection = projection.to(dtype=k.dtype, device=k.device)
    logits = torch.matmul(k, projection.t()) - 0.5 * (k * k).sum(-1, keepdim=True)
    # Padding slots are masked (zero features) unless no graph has any: the slots of a graph
    # without tokens only meet that graph's (discarded) padding queries.
    valid = None if layout.key_mask is None else layout.key_mask.view(num_b, 1, length, 1)
    # per-graph key stabiliser over the real keys only (it cancels in every query's ratio)
    row_max = logits.detach().amax(-1, keepdim=True)
    if valid is not None:
        row_max = row_max.masked_fill(~valid, float("-inf"))
    block_max = row_max.amax(2, keepdim=True)
    block_max = torch.where(torch.isfinite(block_max), block_max, torch.zeros_like(block_max))
    logits = logits - block_max
    if valid is not None:
        logits = logits.masked_fill(~valid, float("-inf"))
    phi_k = torch.exp(logits) * (projection.shape[0] ** -0.5)  # zero on padding slots
    value_one = torch.cat([value, value.new_ones((n, heads, 1))], dim=-1)
    kv = torch.matmul(phi_k.transpose(-2, -1), layout._heads(value_one))  # (B, heads, m, d_v+1)
    out = layout._unheads(torch.matmul(phi_q, kv))  # (n, heads, d_v+1)
    numerator, denominator = out[..., :d_v], out[..., d_v:]
    positive = denominator > 0
    safe = torch.where(positive, denominator, torch.ones_like(denominator))
    return torch.where(positive, numerator / safe, torch.zeros_like(numerator))


def _linear_scatter(
    phi_q: Tensor, phi_k: Tensor, value_one: Tensor, batch_t: Tensor, batch_s: Tensor, num_b: int
) -> Tensor:
    """Scatter strategy of :func:`linear_attention`: chunked outer products, no padding."""
    n_t, heads, m = phi_q.shape
    n_s, e = value_one.shape[0], value_one.shape[2]
    chunk = max(1, LINEAR_CHUNK_ELEMENTS // (heads * m * e))
    kv = None
    for start in range(0, n_s, chunk):
        stop = min(start + chunk, n_s)
        outer = phi_k[start:stop].unsqueeze(-1) * value_one[start:stop].unsqueeze(-2)
        part = scatter_sum(outer, batch_s[start:stop], num_b)  # (B, heads, m, e)
        kv = part if kv is None else kv + part
    if kv is None:
        kv = phi_q.new_zeros((num_b, heads, m, e))
    pieces = []
    for start in range(0, n_t, chunk):
        stop = min(start + chunk, n_t)
        kv_t = kv.index_select(0, batch_t[start:stop])  # (c, heads, m, e)
        pieces.append((phi_q[start:stop].unsqueeze(-1) * kv_t).sum(-2))
    return torch.cat(pieces, 0) if pieces else phi_q.new_zeros((0, heads, e))
