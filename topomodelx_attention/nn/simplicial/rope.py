r"""Determinant logits and simplicial rotary position embeddings (§2.4).

For ``N >= 2`` the product logit ``Σ_a q_a k1_a ⋯ kN_a`` is not invariant under a rotation
applied to the query and every key, so rotary embeddings (RoPE) do not give relative positions.
§2.4 replaces it by a determinant form: the channels are split into ``⌊d / (N+1)⌋`` chunks of
``N + 1`` and

.. math::

    L_{i k_1 \dots k_N} = \sum_{c} \det\big[q_i^{(c)}, k^{(1)(c)}_{k_1}, \dots,
    k^{(N)(c)}_{k_N}\big],

which is invariant under any ``R ∈ SO(N+1)`` applied chunk-wise to all ``N + 1`` vectors
(``det(R M) = det M``). Rotating each token by a position-dependent element of a one-parameter
(hence commutative) subgroup of ``SO(N+1)`` then makes the logits depend on relative positions
``k_m - i`` only: :func:`simplicial_rope`.

The determinant is a signed sum over the ``(N+1)!`` permutations, each a product logit on
permuted channels, so :func:`determinant_expand` turns the determinant form into the product form
on ``N! · d`` expanded channels; every attention path (dense, windowed, routed, tuples) then
computes determinant logits without special code. Channels left over by ``d mod (N+1)`` are
ignored (the floor in §2.4).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["determinant_expand", "determinant_logits", "rope_frequencies", "simplicial_rope"]


def _permutations(size: int, device: torch.device) -> tuple[Tensor, Tensor]:
    perms = list(itertools.permutations(range(size)))
    signs = []
    for perm in perms:
        inversions = sum(1 for a in range(size) for b in range(a + 1, size) if perm[a] > perm[b])
        signs.append(-1.0 if inversions % 2 else 1.0)
    return (
        torch.tensor(perms, dtype=torch.long, device=device),
        torch.tensor(signs, device=device),
    )


def _chunks(x: Tensor, size: int) -> Tensor:
    n_chunks = x.shape[-1] // size
    if n_chunks == 0:
        raise ValueError(
            f"determinant logits need at least N + 1 = {size} channels per head, got {x.shape[-1]}"
        )
    return x[..., : n_chunks * size].unflatten(-1, (n_chunks, size))


def determinant_expand(query: Tensor, keys: Sequence[Tensor]) -> tuple[Tensor, list[Tensor]]:
    """Expand query and keys so that the product logit equals the determinant logit (§2.4).

    With ``P`` the permutations of ``{0, ..., N}`` and ``C = ⌊d / (N+1)⌋`` chunks,
    ``q̃ = [sgn(σ) q^{(c)}_{σ(0)}]_{c, σ}`` and ``k̃_m = [k_m^{(c)}_{σ(m)}]_{c, σ}``, so
    ``Σ q̃ k̃_1 ⋯ k̃_N = Σ_c det[q^{(c)}, k_1^{(c)}, ..., k_N^{(c)}]``. Row-wise, so it also applies
    to bias key rows.

    Parameters
    ----------
    query : torch.Tensor, shape = (..., n, d)
        Queries.
    keys : sequence of N torch.Tensor, each shape = (..., n_m, d)
        Keys of each axis.

    Returns
    -------
    query : torch.Tensor, shape = (..., n, C · (N+1)!)
        Expanded (signed) queries.
    keys : list of torch.Tensor, each shape = (..., n_m, C · (N+1)!)
        Expanded keys.
    """
    order = len(keys)
    size = order + 1
    perms, signs = _permutations(size, query.device)
    q = _chunks(query, size)[..., perms[:, 0]] * signs.to(query.dtype)
    out_keys = [_chunks(k, size)[..., perms[:, m + 1]].flatten(-2) for m, k in enumerate(keys)]
    return q.flatten(-2), out_keys


def determinant_logits(query: Tensor, keys: Sequence[Tensor]) -> Tensor:
    """Naive determinant logits ``Σ_c det[q_i, k_{1,k_1}, ..., k_{N,k_N}]`` (§2.4), unscaled.

    Materialises ``n · n_1 ⋯ n_N`` matrices of size ``(N+1) × (N+1)``: for tests and small inputs.

    Parameters
    ----------
    query : torch.Tensor, shape = (..., n, d)
        Queries.
    keys : sequence of N torch.Tensor, each shape = (..., n_m, d)
        Keys.

    Returns
    -------
    torch.Tensor, shape = (..., n, n_1, ..., n_N)
        Logits.
    """
    order = len(keys)
    size = order + 1
    vectors = [_chunks(query, size)] + [_chunks(k, size) for k in keys]
    lead = vectors[0].shape[:-3]
    expanded = []
    for pos, v in enumerate(vectors):
        view = list(v.shape[:-3]) + [1] * size + list(v.shape[-2:])
        view[len(lead) + pos] = v.shape[-3]
        expanded.append(v.reshape(view))
    full_shape = torch.broadcast_shapes(*[e.shape for e in expanded])
    stacked = torch.stack([e.expand(full_shape) for e in expanded], dim=-1)  # (..., C, N+1, N+1)
    return torch.linalg.det(stacked).sum(-1)


def rope_frequencies(
    channels: int, order: int, base: float = 10000.0, device: torch.device | None = None
) -> Tensor:
    """Angular frequency of each rotated plane of :func:`simplicial_rope`.

    Each chunk of ``N + 1`` channels holds ``⌊(N+1)/2⌋`` planes ``(2p, 2p+1)``; plane ``j`` (over
    all chunks) turns at ``base^{-j / n_planes}`` radians per position, as in RoPE.

    Parameters
    ----------
    channels : int
        Head dimension ``d``.
    order : int
        ``N``.
    base : float, default=10000.0
        RoPE base.
    device : torch.device, optional
        Device of the result.

    Returns
    -------
    torch.Tensor, shape = (⌊d/(N+1)⌋, ⌊(N+1)/2⌋)
        Frequencies (float64).
    """
    size = order + 1
    n_chunks, n_planes = channels // size, size // 2
    total = max(n_chunks * n_planes, 1)
    j = torch.arange(n_chunks * n_planes, dtype=torch.float64, device=device)
    return (base ** (-j / total)).view(n_chunks, n_planes)


def simplicial_rope(x: Tensor, positions: Tensor, order: int, base: float = 10000.0) -> Tensor:
    """Rotate each chunk of ``N + 1`` channels by a position-dependent rotation (§2.4).

    Within a chunk, the planes ``(0, 1), (2, 3), ...`` are turned by ``position · θ``; these
    rotations form a commutative one-parameter subgroup of ``SO(N+1)``, so for the determinant
    logits ``det[R_i q, R_{k_1} k_1, ..., R_{k_N} k_N] = det[q, R_{k_1 - i} k_1, ...]`` depends on
    relative positions only. Leftover channels (``d mod (N+1)``) are returned unchanged.

    Parameters
    ----------
    x : torch.Tensor, shape = (..., n, d)
        Queries or keys.
    positions : torch.Tensor, shape = (n,) or (..., n)
        Position of every token (integer or real).
    order : int
        ``N``.
    base : float, default=10000.0
        RoPE base.

    Returns
    -------
    torch.Tensor, shape = (..., n, d)
        Rotated features.
    """
    size = order + 1
    d = x.shape[-1]
    n_chunks = d // size
    if n_chunks == 0 or size < 2:
        return x
    freqs = rope_frequencies(d, order, base, x.device)  # (C, P)
    angles = positions.to(torch.float64)[..., None, None] * freqs  # (..., n, C, P)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    chunks = x[..., : n_chunks * size].unflatten(-1, (n_chunks, size))
    n_planes = size // 2
    planes = chunks[..., : 2 * n_planes].unflatten(-1, (n_planes, 2))
    a, b = planes[..., 0], planes[..., 1]
    rotated = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    chunks = torch.cat([rotated, chunks[..., 2 * n_planes :]], dim=-1)
    return torch.cat([chunks.flatten(-2), x[..., n_chunks * size :]], dim=-1)
