r"""Top-K simplicial selection routers (§2.3).

§2.3 keeps, for every query ``i``, the top-``K`` keys of a light score so that N-simplicial
attention visits ``K^N`` tuples per query, ``O(n · K^N · d)`` instead of ``O(n^{N+1} · d)``. Two
scorers are available (:class:`SimplicialRouter`, ``scorer``):

``"paper"`` (default) — the score of §2.3, computed from the **previous layer's** queries and keys
(one score per key axis ``m``, summed over the ``H`` heads as in the lightning indexer the
paper cites, DeepSeek-V3.2):

.. math::

    s^{(m)}_{ij} = \sum_{h=1}^{H} w^{(m)}_{ih}\,
        \mathrm{ReLU}\big(\langle Q^{(t-1)}_{ih}, K^{(m),(t-1)}_{jh}\rangle / \sqrt{d_h}\big),
    \qquad w^{(m)}_{ih} = (X^{(t)}_i W_w)_{mh},

restricted to the allowed pairs (``j <= i`` when causal). ``Q^{(t-1)}, K^{(t-1)}`` are reused
(detached) from the previous layer (:class:`RouterContext`); a first layer uses its own. Ties
(the ReLU maps every negative product to 0) are broken by the pre-ReLU score, then by index, so the
selection is the paper's top-K whenever it is unique, and equivariant otherwise.

``"bilinear"`` — a low-rank bilinear form of the current layer input (compared with
``"paper"`` by ``benchmarks/n_simplicial.py --router``):
``s^{(m)}_{ij} = <x_i A_m, x_j B_m> / sqrt(r)`` with ``A_m, B_m ∈ R^{C × r}``, no ReLU.

Both select hard top-K keys per query and axis, identically at training and inference. The
paper does not say how the scorer is trained; here the selected keys carry a **straight-through
gate** on the logits, ``g = σ(s) − stopgrad(σ(s))``: zero in value (the forward pass is exactly
the hard top-K attention, so ``K = n`` equals full attention), while its gradient is that of an
additive gate ``σ(s)``, which trains the scorer. Keys that were not kept get no gradient.

Token-level gating (the first equation of §2.3, ``X_i + s_i f(X_i)`` for the top-K tokens) is a
layer option: :class:`~.NSimplicialTransformerLayer` with ``gating="token"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.simplicial.masks import KeySelection

__all__ = ["ROUTERS", "RouterContext", "SimplicialRouter", "topk_selection"]

#: Scorers of :class:`SimplicialRouter`.
ROUTERS = ("paper", "bilinear")


class RouterContext(NamedTuple):
    """Queries and keys of a layer, handed to the next layer's ``"paper"`` router (§2.3).

    Attributes
    ----------
    query : torch.Tensor, shape = (batch, heads, n, head_dim)
        ``Q^{(t-1)}`` (after RoPE when it is used).
    keys : tuple of N torch.Tensor, each shape = (batch, heads, n, head_dim)
        ``K^{(m),(t-1)}``.
    """

    query: Tensor
    keys: tuple[Tensor, ...]


def _check_k(k: int | Sequence[int], order: int) -> tuple[int, ...]:
    ks = (int(k),) * order if isinstance(k, int) else tuple(int(x) for x in k)
    if len(ks) != order or any(x < 1 for x in ks):
        raise ValueError(f"k must be a positive int or one per key axis, got {k!r}")
    return ks


def topk_selection(
    scores: Sequence[Tensor],
    k: int | Sequence[int],
    straight_through: bool = True,
    tie_break: Sequence[Tensor] | None = None,
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
    tie_break : sequence of N torch.Tensor, optional
        Secondary scores (same shapes) ordering keys whose scores are equal.

    Returns
    -------
    KeySelection
        ``indices[m]`` of shape ``(..., n, min(k_m, n_m))``; ``valid`` is ``False`` where fewer
        than ``k_m`` keys were allowed.
    """
    ks = _check_k(k, len(scores))
    indices, valid, gates = [], [], []
    for m, (s, km) in enumerate(zip(scores, ks)):
        width = min(km, s.shape[-1])
        if tie_break is None:
            idx = torch.topk(s.detach(), width, dim=-1).indices
        else:  # lexicographic (score, tie_break): two stable sorts
            first = torch.argsort(tie_break[m].detach(), dim=-1, descending=True, stable=True)
            second = torch.argsort(
                s.detach().gather(-1, first), dim=-1, descending=True, stable=True
            )
            idx = first.gather(-1, second[..., :width])
        top = s.gather(-1, idx)
        indices.append(idx)
        valid.append(torch.isfinite(top.detach()))
        if straight_through:
            soft = torch.sigmoid(top)
            gates.append(soft - soft.detach())
    return KeySelection(tuple(indices), tuple(valid), tuple(gates) if straight_through else None)


class SimplicialRouter(nn.Module):
    """Trainable top-K key selection for N-simplicial attention (§2.3).

    Parameters
    ----------
    channels : int
        Input channels ``C``.
    order : int
        ``N``, number of key axes (one score each).
    k : int or sequence of int
        Keys kept per query and key axis.
    heads : int, default=1
        Heads of the attention whose queries/keys the ``"paper"`` scorer reuses.
    scorer : {"paper", "bilinear"}, default="paper"
        Scorer (see the module docstring).
    router_dim : int, default=16
        Rank ``r`` of the ``"bilinear"`` scorer.
    """

    def __init__(
        self,
        channels: int,
        order: int,
        k: int | Sequence[int],
        *,
        heads: int = 1,
        scorer: str = "paper",
        router_dim: int = 16,
    ) -> None:
        super().__init__()
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        if scorer not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, got {scorer!r}")
        if router_dim < 1:
            raise ValueError(f"router_dim must be >= 1, got {router_dim}")
        self.channels, self.order, self.k, self.scorer = channels, order, _check_k(k, order), scorer
        self.heads, self.router_dim = heads, router_dim
        if scorer == "paper":
            self.weight_proj = nn.Linear(channels, order * heads, bias=False)  # w_ih^(m)
        else:
            self.query_proj = nn.Linear(channels, order * router_dim, bias=False)
            self.key_proj = nn.Linear(channels, order * router_dim, bias=False)

    def _pairs(self, x: Tensor, context: RouterContext | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Per-axis (query side, key side, head weights): (..., N, [H,] n, r)."""
        if self.scorer == "bilinear":
            a = self.query_proj(x).unflatten(-1, (self.order, self.router_dim)).movedim(-2, -3)
            b = self.key_proj(x).unflatten(-1, (self.order, self.router_dim)).movedim(-2, -3)
            return a / math.sqrt(self.router_dim), b, None
        if context is None:
            raise ValueError("the 'paper' router needs the queries and keys of a layer (context)")
        q, keys = context.query.detach(), torch.stack([k.detach() for k in context.keys], -4)
        if q.dim() != 4 or keys.shape[-4] != self.order or q.shape[-3] != self.heads:
            raise ValueError(
                f"router context must hold (batch, {self.heads}, n, head_dim) queries and "
                f"{self.order} key tensors, got {tuple(q.shape)} and {tuple(keys.shape)}"
            )
        w = self.weight_proj(x).unflatten(-1, (self.order, self.heads))  # (..., n, N, H)
        return q.unsqueeze(-4) / math.sqrt(q.shape[-1]), keys, w.permute(0, 2, 3, 1)

    def forward(
        self,
        x: Tensor,
        *,
        context: RouterContext | None = None,
        causal: bool = False,
        chunk_size: int | None = None,
    ) -> KeySelection:
        """Select keys for every query.

        Parameters
        ----------
        x : torch.Tensor, shape = (batch, n, channels)
            Layer input (``"paper"``: gives the head weights ``w_ih``; ``"bilinear"``: the scores).
        context : RouterContext, optional
            Queries and keys of the previous layer (required by ``"paper"``).
        causal : bool, default=False
            Only keys ``j <= i`` may be selected.
        chunk_size : int, optional
            Queries scored at a time (default: ``2^22 / (N · H · n · batch)``).

        Returns
        -------
        KeySelection
            Indices of shape ``(batch, n, min(k_m, n))`` per axis, with validity and
            straight-through gates.
        """
        if x.dim() != 3 or x.shape[-1] != self.channels:
            raise ValueError(
                f"router expects x of shape (batch, n, {self.channels}), got {tuple(x.shape)}"
            )
        batch, n = x.shape[0], x.shape[1]
        a, b, w = self._pairs(x, context)
        cq = chunk_size or max(1, (1 << 22) // max(batch * self.order * self.heads * n, 1))
        parts = []
        for qs in range(0, n, cq):
            qe = min(qs + cq, n)
            raw = torch.matmul(a[..., qs:qe, :], b.transpose(-1, -2))  # (B, N, [H,] c, n)
            if w is None:
                score, tie = raw, None
            else:
                weights = w[..., qs:qe].unsqueeze(-1)  # (B, N, H, c, 1)
                score, tie = (weights * raw.relu()).sum(-3), (weights * raw).sum(-3)
            if causal:
                future = torch.ones(qe - qs, n, dtype=torch.bool, device=x.device).triu(qs + 1)
                score = score.masked_fill(future, float("-inf"))
                tie = tie.masked_fill(future, float("-inf")) if tie is not None else None
            parts.append(
                topk_selection(
                    list(score.unbind(1)), self.k, tie_break=None if tie is None else list(tie.unbind(1))
                )
            )
        return KeySelection(
            tuple(torch.cat([p.indices[m] for p in parts], -2) for m in range(self.order)),
            tuple(torch.cat([p.valid[m] for p in parts], -2) for m in range(self.order)),
            tuple(torch.cat([p.gate[m] for p in parts], -2) for m in range(self.order)),
        )

    def extra_repr(self) -> str:
        """Summarise the configuration for ``repr``."""
        extra = f", dim={self.router_dim}" if self.scorer == "bilinear" else f", heads={self.heads}"
        return f"scorer={self.scorer!r}, channels={self.channels}, order={self.order}, k={self.k}{extra}"
