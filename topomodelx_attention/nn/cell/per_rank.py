"""Per-rank modules of a Cellular Transformer layer, stacked over the ranks (Appendix A).

A layer has one pre-norm LayerNorm before attention, one before the FFN and one FFN per rank.
They are stored as a few stacked parameters (``(ranks, C)`` LayerNorm weights, ``(ranks,
hidden, C)`` FFN weights) rather than one module per rank: the same computation, with far fewer
tensors for an optimiser to loop over (plain ``torch.optim.AdamW`` on CPU steps one tensor at a
time). ``norms[r]`` / ``ffns[r]`` give rank ``r``'s parameters as views.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import ClassVar

import torch
from torch import Tensor, nn
from torch.nn import functional as F

__all__ = ["RankFeedForwards", "RankLayerNorms"]


class _RankView:
    """One rank of a stacked per-rank module: its parameters as views, callable on ``(n_r, C)``.

    Not a module (nothing registered): ``layer.norm_ffn[r]`` / ``layer.ffn[r]`` give the
    LayerNorm / FFN of rank ``r`` with ``weight``, ``bias`` (``lin1``, ``lin2``) attributes.
    """

    def __init__(self, owner: nn.Module, rank: int, **attributes: object) -> None:
        self._owner, self._rank = owner, rank
        self.__dict__.update(attributes)

    def __call__(self, x: Tensor) -> Tensor:
        return self._owner.rank_forward(x, self._rank)


class RankLayerNorms(nn.Module):
    """The per-rank LayerNorms of a layer as one ``(ranks, C)`` weight and bias (2 tensors).

    Same computation as one :class:`torch.nn.LayerNorm` per rank (``F.layer_norm`` with rank
    ``r``'s row); ``norms[r]`` is rank ``r``'s norm (views), iteration goes over the ranks.
    """

    def __init__(self, ranks: int, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ranks, channels))
        self.bias = nn.Parameter(torch.zeros(ranks, channels))
        self.eps = eps

    def forward(self, x: Sequence[Tensor]) -> list[Tensor]:
        """Normalise ``x[r]`` with rank ``r``'s LayerNorm, for every rank."""
        shape = (self.weight.shape[1],)
        return [
            F.layer_norm(xr, shape, w, b, self.eps)
            for xr, w, b in zip(x, self.weight.unbind(0), self.bias.unbind(0))
        ]

    def rank_forward(self, x: Tensor, rank: int) -> Tensor:
        """LayerNorm of one rank."""
        return F.layer_norm(
            x, (self.weight.shape[1],), self.weight[rank], self.bias[rank], self.eps
        )

    def __getitem__(self, rank: int) -> _RankView:
        return _RankView(self, rank, weight=self.weight[rank], bias=self.bias[rank], eps=self.eps)

    def __len__(self) -> int:
        return self.weight.shape[0]

    def __iter__(self):
        return (self[r] for r in range(len(self)))


class RankFeedForwards(nn.Module):
    """The per-rank FFNs of a layer (Appendix A, steps 5–6 without the norm), stacked.

    ``Dropout(FFN_2(Dropout(ReLU(FFN_1(x)))))`` per rank, held as four parameters: ``weight_1
    (ranks, hidden, C)``, ``bias_1 (ranks, hidden)``, ``weight_2 (ranks, C, hidden)``, ``bias_2
    (ranks, C)``, initialised as two :class:`torch.nn.Linear` per rank (``FFN_1`` then ``FFN_2``,
    rank by rank: the random stream of one module per rank). ``ffns[r]`` is rank ``r``'s FFN
    (``lin1`` / ``lin2`` with ``weight`` / ``bias`` views).
    """

    _KEYS: ClassVar[dict[str, str]] = {
        "lin1.weight": "weight_1",
        "lin1.bias": "bias_1",
        "lin2.weight": "weight_2",
        "lin2.bias": "bias_2",
    }

    def __init__(self, ranks: int, channels: int, hidden: int, dropout: float) -> None:
        super().__init__()
        ffns = [{"lin1": nn.Linear(channels, hidden), "lin2": nn.Linear(hidden, channels)} for _ in range(ranks)]
        for old, new in self._KEYS.items():
            lin, attribute = old.split(".")
            stacked = torch.stack([getattr(f[lin], attribute).detach() for f in ffns])
            setattr(self, new, nn.Parameter(stacked))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
        """``Dropout(FFN_2(Dropout(ReLU(FFN_1(x)))))`` with one rank's weights."""
        return self.dropout(F.linear(self.dropout(torch.relu(F.linear(x, w1, b1))), w2, b2))

    def per_rank(self) -> list[tuple[Tensor, Tensor, Tensor, Tensor]]:
        """``(w1, b1, w2, b2)`` of every rank (views; one ``unbind`` per parameter)."""
        return list(zip(*(getattr(self, k).unbind(0) for k in self._KEYS.values())))

    def rank_forward(self, x: Tensor, rank: int) -> Tensor:
        """FFN of one rank."""
        return self(x, *(getattr(self, k)[rank] for k in self._KEYS.values()))

    def __getitem__(self, rank: int) -> _RankView:
        # lin1 / lin2: their weights only (calling rank r's view runs its whole FFN)
        lin1 = SimpleNamespace(weight=self.weight_1[rank], bias=self.bias_1[rank])
        lin2 = SimpleNamespace(weight=self.weight_2[rank], bias=self.bias_2[rank])
        return _RankView(self, rank, lin1=lin1, lin2=lin2)

    def __len__(self) -> int:
        return self.weight_1.shape[0]

