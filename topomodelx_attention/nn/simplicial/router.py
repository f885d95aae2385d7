"""Top-K simplicial token selection router (§2.3).

§2.3 scores the pair (query ``i``, key ``j``) with a light bilinear form of the previous-layer
queries and keys, ``s_ij = w_i ReLU(<Q_i, K_j>)`` restricted to the allowed pairs (e.g. causal),
and keeps the top-K keys per query, so N-simplicial attention only visits ``K^N`` tuples per
query: ``O(n · K^N · d)`` instead of ``O(n^{N+1} · d)``.

This implementation
-------------------
* One low-rank scorer per key axis ``m``: ``s^{(m)}_{ij} = <x_i A_m, x_j B_m> / sqrt(r)`` with
  ``A_m, B_m ∈ R^{C × r}`` (``r = router_dim``, default 16) computed from the layer input, shared by
  all heads. Scoring is ``O(n^2 · r)`` per axis, chunked over queries (memory ``O(c · n)``), cheap
  next to the ``K^N``-tuple attention. The ReLU of §2.3 is dropped: it is monotone, so it would
  only create ties among negative scores (which would make the selection depend on token order).
* Hard top-K per query and key axis, the same at training and inference.
* Training signal: **straight-through gate**. Each kept key contributes the logit term
  ``g = σ(s) − stopgrad(σ(s))``: zero in value (the forward pass is exactly the hard top-K
  attention, hence ``K = n`` equals full attention), while its gradient is the gradient of an
  additive gate ``σ(s)`` on the logits, so the router learns to raise the scores of useful kept
  keys and to lower the others. Keys that were not kept get no gradient (as in top-k
  mixture-of-experts routing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.simplicial.masks import KeySelection

__all__ = ["SimplicialRouter", "topk_selection"]


def topk_selection(
    scores: Sequence[Tensor], k: int | Sequence[int], straight_through: bool = True
) -> KeySelection:
    """Keep the top-``k`` keys per query on each axis.

    Parameters
    ----------
    scores : sequence of N torch.Tensor, each shape = (..., n, n_m)
        Router scores; ``-inf`` marks a forbidden key (e.g. causal).
    k : int or sequence of int
        Keys kept per query and axis (clipped to ``n_m``).
    straight_through : bool, default=True
        Attach the straight-through gate ``σ(s) − stopgrad(σ(s))`` (zero in value).

    Returns
    -------
    KeySelection
        ``indices[m]`` of shape ``(..., n, min(k_m, n_m))``; ``valid`` is ``False`` where fewer
        than ``k_m`` keys were allowed.
    """
    order = len(scores)
    ks = [int(k)] * order if isinstance(k, int) else [int(x) for x in k]
    if len(ks) != order or any(x < 1 for x in ks):
        raise ValueError(f"k must be a positive int or one per key axis, got {k!r}")
    indices, valid, gates = [], [], []
    for s, km in zip(scores, ks):
        top = torch.topk(s, min(km, s.shape[-1]), dim=-1)
        indices.append(top.indices)
        valid.append(torch.isfinite(top.values))
        if straight_through:
            soft = torch.sigmoid(top.values)
            gates.append(soft - soft.detach())
        else:
            gates.append(None)
    return KeySelection(tuple(indices), tuple(valid), tuple(gates) if straight_through else None)


class SimplicialRouter(nn.Module):
    """Trainable top-K key selection for N-simplicial attention (§2.3).

    Parameters
    ----------
    channels : int
        Input channels ``C``.
    order : int
        ``N``, number of key axes (one scorer each).
    k : int or sequence of int
        Keys kept per query and key axis.
    router_dim : int, default=16
        Rank ``r`` of the bilinear scorers.
    """

    def __init__(
        self, channels: int, order: int, k: int | Sequence[int], router_dim: int = 16
    ) -> None:
        super().__init__()
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        if router_dim < 1:
            raise ValueError(f"router_dim must be >= 1, got {router_dim}")
        ks = [int(k)] * order if isinstance(k, int) else [int(x) for x in k]
        if len(ks) != order or any(x < 1 for x in ks):
            raise ValueError(f"k must be a positive int or one per key axis, got {k!r}")
        self.channels, self.order, self.k, self.router_dim = channels, order, tuple(ks), router_dim
        self.query_proj = nn.Linear(channels, order * router_dim, bias=False)
        self.key_proj = nn.Linear(channels, order * router_dim, bias=False)

    def forward(
        self, x: Tensor, causal: bool = False, chunk_size: int | None = None
    ) -> KeySelection:
        """Select keys for every query.

        Parameters
        ----------
        x : torch.Tensor, shape = (..., n, channels)
            Layer input.
        causal : bool, default=False
            Only keys ``j <= i`` may be selected.
        chunk_size : int, optional
            Queries scored at a time (default: ``2^22 / (N · n · batch)``).

        Returns
        -------
        KeySelection
            Indices of shape ``(..., n, min(k_m, n))`` per axis, with validity and
            straight-through gates.
        """
        if x.shape[-1] != self.channels:
            raise ValueError(f"router expects {self.channels} channels, got {x.shape[-1]}")
        n = x.shape[-2]
        lead = x.shape[:-2]
        a = self.query_proj(x).unflatten(-1, (self.order, self.router_dim)).movedim(-2, -3)
        b = self.key_proj(x).unflatten(-1, (self.order, self.router_dim)).movedim(-2, -3)
        # a, b: (..., N, n, r)
        scale = 1.0 / math.sqrt(self.router_dim)
        cq = chunk_size or max(1, (1 << 22) // max(math.prod(lead) * self.order * n, 1))
        per_chunk = []
        for qs in range(0, n, cq):
            qe = min(qs + cq, n)
            s = torch.matmul(a[..., qs:qe, :], b.transpose(-1, -2)) * scale  # (..., N, c, n)
            if causal:
                rows = torch.arange(qs, qe, device=x.device)[:, None]
                cols = torch.arange(n, device=x.device)[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            per_chunk.append(topk_selection(list(s.unbind(-3)), self.k))
        indices = tuple(torch.cat([c.indices[m] for c in per_chunk], -2) for m in range(self.order))
        valid = tuple(torch.cat([c.valid[m] for c in per_chunk], -2) for m in range(self.order))
        gate = tuple(torch.cat([c.gate[m] for c in per_chunk], -2) for m in range(self.order))
        return KeySelection(indices, valid, gate)

    def extra_repr(self) -> str:
        """Summarise the configuration for ``repr``."""
        return f"channels={self.channels}, order={self.order}, k={self.k}, dim={self.router_dim}"
