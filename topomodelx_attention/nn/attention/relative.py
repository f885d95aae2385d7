r"""Relative random-walk pair features: a learned attention bias for global (dense) attention.

GRIT (Ma et al., 2023) biases global attention with *relative random-walk probabilities*
(RRWP): for the random walk :math:`P = D^{-1} A` of a graph and the pair ``(i, j)`` of tokens,
the vector :math:`(I_{ij}, P_{ij}, P^2_{ij}, \dots, P^{K-1}_{ij})`. A layer maps it to one logit
per head (a learned ``K → heads`` map) and adds it to the dense attention logits, so that global
attention knows how far apart (in walk probability) two cells are: a multi-hop,
community-aware version of the θ·N bias of the Cellular Transformer (Eq. 2, dense kind).

:func:`random_walk_pair_features` computes the features of a whole batch once per forward
(eager, in a layer's ``prepare``), per complex, on its padded ``(B, L, L)`` walk powers (each
step a sparse product with the walk: edges × L operations). The
features are :math:`\log(1 + n_b P^k_{ij})`, with ``n_b`` the cells of the complex: a uniform
walk gives 1 whatever the size of the complex, and the log keeps the return probability of
short walks (``n_b`` on the diagonal for ``k = 0``) in range. Pairs whose ``K`` walk
probabilities are all zero (further apart than ``K - 1`` steps), and the padding slots, have
zero features: a bias of 0. The features stay on the padded grid of the dense kernel: a layer
maps them to its heads with one small product and hands the result to the kernel as a
:class:`~topomodelx_attention.nn.attention.neighborhood.PaddedBias` (no scatter of pairs per layer).
"""

from __future__ import annotations

import torch
from torch import Tensor

from topomodelx_attention.nn.attention.layout import PaddedLayout

__all__ = ["random_walk_pair_features"]


@torch.no_grad()
def random_walk_pair_features(
    adjacency: Tensor,
    layout: PaddedLayout,
    steps: int,
    *,
    dtype: torch.dtype = torch.float32,
    name: str = "adjacency",
) -> Tensor:
    r"""Relative random-walk features of every pair of tokens of the same complex (RRWP).

    For complex ``b`` with ``n_b`` tokens, walk :math:`P = D^{-1} A` (row-stochastic; a
    token without neighbours has a zero row) and ``k = 0 .. steps - 1``, the feature
    :math:`f^k_{ij} = \log(1 + n_b (P^k)_{ij})` of every pair ``(i, j)`` of its tokens
    (:math:`P^0 = I`), on the padded grid of ``layout``.

    Parameters
    ----------
    adjacency : torch.Tensor, shape = (n, n)
        Sparse COO adjacency of the batch (block diagonal by complex); its pattern is the
        graph, its values are not read (a stored entry is an edge).
    layout : PaddedLayout
        Padding of the ``n`` tokens per complex
        (:func:`~topomodelx_attention.nn.attention.padded_layout` of their batch vector).
    steps : int
        ``K``: walk lengths ``0 .. K - 1`` (``K >= 1``).
    dtype : torch.dtype, default=torch.float32
        Floating dtype of the walk and the features (that of the parameters reading them).
    name : str, default="adjacency"
        Name of the matrix in error messages.

    Returns
    -------
    torch.Tensor, shape = (num_complexes, steps, length, length)
        ``[b, k, p, q]``: the feature ``k`` of the tokens at positions ``p`` (row) and ``q``
        of complex ``b``; zero on padding slots. Walk length first, so that a ``steps → heads``
        map is one batched product whose output is already the ``(B, heads, L, L)`` grid of the
        dense kernel (no transposed copy forward or backward).

    Raises
    ------
    ValueError
        When ``steps < 1``, the matrix is not ``(n, n)`` sparse COO, or an entry joins two
        different complexes.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int (walk lengths 0..steps-1), got {steps!r}")
    n = layout.num_tokens
    _check_square(adjacency, n, name)
    device = layout.batch.device
    num_b, length = layout.num_complexes, layout.length
    index = adjacency.coalesce().indices().to(device)
    row, col = index[0], index[1]
    if bool((layout.batch[row] != layout.batch[col]).any()):
        raise ValueError(
            f"{name} joins tokens of two different complexes: a batch's adjacency must be block "
            "diagonal (collate the complexes, do not connect them)"
        )
    slots = layout.index if layout.index is not None else torch.arange(n, device=device)
    degree = torch.bincount(row, minlength=n).to(dtype)
    # the walk between slots (block diagonal, one L x L block per complex), sparse: one step
    # costs (edges x L), not the (B x L^3) of a dense batched product
    size = num_b * length
    walk = torch.sparse_coo_tensor(  # slots of checked entries: valid by construction
        torch.stack([slots[row], slots[col]]),
        1.0 / degree[row],
        (size, size),
        dtype=dtype,
        check_invariants=False,
    ).coalesce()
    valid = torch.zeros(size, dtype=dtype, device=device)
    valid[slots] = 1.0
    features = torch.empty(num_b, steps, length, length, dtype=dtype, device=device)
    power = torch.diag_embed(valid.view(num_b, length))  # P^0 = I on the real tokens
    features[:, 0] = power
    for k in range(1, steps):  # P^(k+1) = P · P^k, block by block
        power = torch.sparse.mm(walk, power.view(size, length)).view(num_b, length, length)
        features[:, k] = power
    counts = layout.counts.to(device=device, dtype=dtype).view(num_b, 1, 1, 1)
    return features.mul_(counts).log1p_()


def _check_square(adjacency: object, n: int, name: str) -> None:
    """Raise unless ``adjacency`` is an ``(n, n)`` sparse COO tensor."""
    if not isinstance(adjacency, Tensor) or adjacency.layout != torch.sparse_coo:
        raise ValueError(f"{name} must be a sparse COO tensor, got {type(adjacency).__name__}")
    if tuple(adjacency.shape) != (n, n):
        raise ValueError(
            f"{name} has shape {tuple(adjacency.shape)}, expected ({n}, {n}) for the {n} tokens "
            "of the layout"
        )
