r"""Linear attention: Performer / FAVOR+ positive random features (linear kind).

Approximates the dense kind without bias, :math:`\mathrm{softmax}(\mathrm{scale}\;QK^\top)V`
per complex, in time and memory linear in the number of tokens (Choromanski et al. 2021).
The random-feature logits :math:`\ell(x) = \omega x - \lVert x\rVert^2/2` are exponentiated
with **per-feature** stabilisers, so that extreme logits in float32 never underflow a whole row
to zero.

Stabilisation (exact: every constant cancels in the ratio of :func:`linear_attention`). With
log-features :math:`\ell_{sj}` of the keys and :math:`\ell_{tj}` of the queries, per complex,
head and feature :math:`j` the key stabiliser is :math:`c_j = \max_{s \in b} \ell_{sj}`, so the
key features :math:`e^{\ell_{sj} - c_j} \le 1` and :math:`z_{bj} \ge 1`; the query weights are
:math:`e^{\ell_{tj} + c_j - \max_{j'}(\ell_{tj'} + c_{j'})} \le 1`, one of them 1. Hence the
denominator is at least 1 for every target of a complex with sources: extreme logits (e.g.
float32 with :math:`|q^\top k|` in the hundreds) give finite, non-zero softmax-approximating
rows instead of silent all-zero rows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.nn.attention.heads import resolve_scale, safe_divide
from topomodelx_attention.nn.attention.layout import LayoutArg, PaddedLayout, qkv_layouts
from topomodelx_attention.nn.attention.scatter import scatter_max, scatter_sum

__all__ = [
    "LINEAR_CHUNK_ELEMENTS",
    "default_num_random_features",
    "favor_features",
    "linear_attention",
    "orthogonal_random_matrix",
]

#: Upper bound on the number of elements of one (tokens, heads, features, d_v + 1) chunk
#: materialised by the scatter strategy of :func:`linear_attention` (64 MiB in float32).
LINEAR_CHUNK_ELEMENTS: int = 1 << 24


def _favor_logits(x: Tensor, projection: Tensor) -> Tensor:
    r"""Log-features :math:`\omega x - \lVert x\rVert^2 / 2`: (..., d) → (..., m)."""
    projection = projection.to(dtype=x.dtype, device=x.device)
    return torch.matmul(x, projection.t()) - 0.5 * (x * x).sum(-1, keepdim=True)


def _finite_or_zero(x: Tensor) -> Tensor:
    """Replace the ``-inf`` maxima of empty groups by 0 (their features are zero anyway)."""
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


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
    num_complexes: int | None = None,
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
    num_complexes : int, optional
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
    logits = _favor_logits(x, projection)
    if stabilize and logits.numel() > 0:
        row_max = logits.detach().amax(-1, keepdim=True)  # (n, [heads,] 1)
        if is_query:
            logits = logits - row_max
        elif batch is None:
            logits = logits - row_max.amax(0, keepdim=True)
        else:
            num_b = num_complexes if num_complexes is not None else int(batch.max()) + 1
            block_max = _finite_or_zero(scatter_max(row_max, batch, num_b))
            logits = logits - block_max.index_select(0, batch)
    return torch.exp(logits) * (projection.shape[0] ** -0.5)


def _check_projection(projection: object, head_channels: int, strategy: str) -> None:
    """Raise unless ``projection`` is an ``(m, head_channels)`` tensor and ``strategy`` known."""
    if not isinstance(projection, Tensor) or projection.dim() != 2:
        raise TypeError("projection must be a (num_features, d) tensor")
    if projection.shape[1] != head_channels:
        raise ValueError(
            f"projection must have {head_channels} columns (the head dimension), got "
            f"{projection.shape[1]}"
        )
    if strategy not in ("auto", "scatter", "padded"):
        raise ValueError(f"strategy must be 'auto', 'scatter' or 'padded', got {strategy!r}")


@fill_doc
def linear_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    batch_target: Tensor | None = None,
    batch_source: Tensor | None = None,
    *,
    projection: Tensor,
    scale: float | None = None,
    num_complexes: int | None = None,
    strategy: str = "auto",
    layout: LayoutArg | None = None,
) -> Tensor:
    r"""Kernelised (Performer / FAVOR+) multi-head attention inside every complex.

    Approximates the dense kind without bias,
    :math:`o_t = \sum_s \exp(\mathrm{scale}\,q_t^\top k_s) v_s / \sum_s \exp(\cdot)`, with
    positive random features: :math:`o_t = \varphi(q_t)^\top S_b / \varphi(q_t)^\top z_b`,
    where per complex ``b`` and head, :math:`S_b = \sum_{s \in b} \varphi(k_s) v_s^\top` and
    :math:`z_b = \sum_{s \in b} \varphi(k_s)`. The θ·N neighbourhood bias and attention
    dropout are not available (there is no attention matrix). Each complex is exact in
    isolation: tokens of other complexes never contribute.

    Stabilised per feature (see the module notes): every target of a complex with sources
    gets a finite, non-zero row, whatever the logits.

    Two equivalent evaluation strategies (same values up to rounding):

    ``"scatter"``
        :math:`S_b, z_b` are scatter sums over the complexes of the per-token outer products
        :math:`\varphi(k_s) [v_s, 1]^\top`; queries gather :math:`S_{b_t}`.
        :math:`O(n \cdot \mathrm{heads} \cdot m \cdot (d_v + 1))` time and memory, processed
        in chunks of at most ``LINEAR_CHUNK_ELEMENTS`` elements; no padding.
    ``"padded"``
        features are padded per complex to ``(B, heads, L_max, m)`` and contracted with batched
        matrix products: :math:`O(B \cdot L_{max} \cdot \mathrm{heads} \cdot (m + d_v))`
        memory; fewer, larger products when complexes have similar sizes.
    ``"auto"`` (default)
        ``"padded"`` when its memory estimate is at most that of ``"scatter"``, otherwise
        ``"scatter"``; hence memory and time stay linear in the number of tokens whatever the
        size distribution (one huge complex among many tiny ones takes the scatter path).

    Parameters
    ----------
    %(qkv)s
    %(batches)s
    projection : torch.Tensor, shape = (m, d)
        Random projection shared by the heads (:func:`orthogonal_random_matrix`).
    scale : float, optional
        Logit scale of the approximated softmax; ``1 / sqrt(d)`` by default.
    %(num_complexes)s
    strategy : {"auto", "scatter", "padded"}, default = "auto"
        Evaluation strategy (see above); one complex always uses the padded products.
    layout : PaddedLayout or tuple of PaddedLayout, optional
        Precomputed padding (:func:`~topomodelx_attention.nn.attention.padded_layout`) of a
        self-attention token set, or the pair ``(target_layout, source_layout)``; replaces the
        batch vectors and forces the ``"padded"`` strategy on the layouts' grid (no
        data-dependent size: ``torch.compile`` without graph breaks). Keys in padding slots
        are masked.

    Returns
    -------
    %(attention_output)s
    """
    target, source = qkv_layouts(
        query, key, value, batch_target, batch_source, num_complexes, layout
    )
    _check_projection(projection, query.shape[2], strategy)
    n_t, heads, d = query.shape
    n_s, d_v = key.shape[0], value.shape[2]
    root = math.sqrt(resolve_scale(scale, d))
    m = projection.shape[0]
    value_one = torch.cat([value, value.new_ones((n_s, heads, 1))], dim=-1)  # (n_s, H, d_v+1)
    use_padded = layout is not None or target.num_complexes == 1 or strategy == "padded"
    if not use_padded and strategy == "auto":
        num_b = target.num_complexes
        padded_cost = num_b * (target.length + source.length) * (m + d_v + 1)
        use_padded = padded_cost <= (n_t + n_s) * m * (d_v + 1)
    if use_padded:
        out = _linear_padded(query * root, key * root, value_one, projection, target, source)
    else:
        out = _linear_scatter(query * root, key * root, value_one, projection, target, source)
    return safe_divide(out[..., :d_v], out[..., d_v:])


def _linear_padded(
    query: Tensor,
    key: Tensor,
    value_one: Tensor,
    projection: Tensor,
    target: PaddedLayout,
    source: PaddedLayout,
) -> Tensor:
    """Run the padded strategy: batched products on the grids, padding keys masked → (n_t, H, d_v+1)."""
    num_b, length_s = source.num_complexes, source.length
    valid = source.key_valid.view(num_b, 1, length_s, 1)
    key_logits = _favor_logits(source._heads(key), projection).masked_fill(~valid, float("-inf"))
    c = _finite_or_zero(key_logits.detach().amax(2, keepdim=True))  # (B, H, 1, m)
    phi_k = torch.exp(key_logits - c)  # in [0, 1], zero on padding slots
    kv = torch.matmul(phi_k.transpose(-2, -1), source._heads(value_one))  # (B, H, m, d_v+1)
    query_logits = _favor_logits(target._heads(query), projection) + c  # (B, H, Lt, m)
    phi_q = torch.exp(query_logits - query_logits.detach().amax(-1, keepdim=True))
    return target._unheads(torch.matmul(phi_q, kv))


def _linear_scatter(
    query: Tensor,
    key: Tensor,
    value_one: Tensor,
    projection: Tensor,
    target: PaddedLayout,
    source: PaddedLayout,
) -> Tensor:
    """Scatter strategy: chunked outer products summed per complex, no padding."""
    n_t, heads = query.shape[0], query.shape[1]
    n_s, e = value_one.shape[0], value_one.shape[2]
    m, num_b = projection.shape[0], target.num_complexes
    batch_t, batch_s = target.batch, source.batch
    key_logits = _favor_logits(key, projection)  # (n_s, H, m)
    c = _finite_or_zero(scatter_max(key_logits.detach(), batch_s, num_b))  # (B, H, m)
    phi_k = torch.exp(key_logits - c.index_select(0, batch_s))
    chunk = max(1, LINEAR_CHUNK_ELEMENTS // (heads * m * e))
    kv = query.new_zeros((num_b, heads, m, e))
    for start in range(0, n_s, chunk):
        stop = min(start + chunk, n_s)
        outer = phi_k[start:stop].unsqueeze(-1) * value_one[start:stop].unsqueeze(-2)
        kv = kv + scatter_sum(outer, batch_s[start:stop], num_b)  # (B, H, m, e)
    query_logits = _favor_logits(query, projection) + c.index_select(0, batch_t)
    phi_q = torch.exp(query_logits - query_logits.detach().amax(-1, keepdim=True))
    pieces = [query.new_zeros((0, heads, e))]
    for start in range(0, n_t, chunk):
        stop = min(start + chunk, n_t)
        kv_t = kv.index_select(0, batch_t[start:stop])  # (c, H, m, e)
        pieces.append((phi_q[start:stop].unsqueeze(-1) * kv_t).sum(-2))
    return torch.cat(pieces, 0)
