"""N-simplicial transformer: embedding, stacked layers, readout; sequences or complexes."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention.scatter import scatter_max, scatter_sum
from topomodelx_attention.nn.simplicial.functional import MaskLike
from topomodelx_attention.nn.simplicial.masks import TupleMask, complex_data_to_tuples
from topomodelx_attention.nn.simplicial.n_simplicial_attention import resolve_tuples
from topomodelx_attention.nn.simplicial.n_simplicial_transformer_layer import (
    NSimplicialTransformerLayer,
)

__all__ = ["NSimplicialTransformer"]

_READOUTS = ("mean", "sum", "max", None)


def _get(data: Any, key: str) -> Any:
    if isinstance(data, dict):
        return data.get(key)
    try:
        return data[key]
    except (KeyError, TypeError, AttributeError, IndexError):
        return getattr(data, key, None)


class NSimplicialTransformer(nn.Module):
    """Stack of :class:`~.NSimplicialTransformerLayer` with an input embedding and a readout.

    Two input modes:

    * sequences: ``x`` of shape ``(batch, n, in_channels)`` (dense, causal, windowed or routed
      attention as configured); the readout pools over the ``n`` tokens of each sequence.
    * complexes: ``x`` of shape ``(n_cells, in_channels)`` with ``tuples`` (the allowed
      ``(N+1)``-tuples, e.g. :func:`~.masks.simplices_to_tuples`, or a
      ``toponetx.SimplicialComplex``) and ``batch``; or a (batched) ``ComplexData`` as ``x``:
      the tokens are its rank-``rank`` cells (``x_{rank}``, ``batch_{rank}``) and the tuples come
      from its incidences (:func:`~.masks.complex_data_to_tuples`). The readout pools per complex.

    Parameters
    ----------
    in_channels : int
        Input feature size (or number of categories per column when ``num_categories`` is set).
    hidden_channels : int
        Token width inside the stack.
    out_channels : int
        Output size of the head.
    num_layers : int, default=2
        Number of layers.
    heads : int, default=1
        Attention heads.
    order : int, default=2
        ``N``.
    readout : {"mean", "sum", "max", None}, default="mean"
        Pooling to one vector per sequence/complex; ``None`` returns per-token outputs.
    num_categories : int, optional
        If set, inputs are long category codes with a trailing column axis — cells ``(n,)`` or
        ``(n, k)``, sequences ``(batch, n, k)`` — embedded by a shared
        ``nn.Embedding(num_categories, hidden_channels)`` and summed over the ``k`` columns.
    rank : int, default=0
        Token rank when ``x`` is a ``ComplexData``.
    include_lower : bool, optional
        Lower-order tuples of a complex (through the key/value bias); default ``kv_bias``.
    self_loops : bool, default=False
        Add ``(i, ..., i)`` tuples on complexes.
    **layer_kwargs
        Forwarded to every :class:`~.NSimplicialTransformerLayer` (``mlp_ratio``, ``dropout``,
        ``kv_bias``, ``causal``, ``window``, ``router_k``, ``rope``, ``chunk_size``, ...).
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        heads: int = 1,
        order: int = 2,
        *,
        readout: str | None = "mean",
        num_categories: int | None = None,
        rank: int = 0,
        include_lower: bool | None = None,
        self_loops: bool = False,
        **layer_kwargs: Any,
    ) -> None:
        super().__init__()
        if readout not in _READOUTS:
            raise ValueError(f"readout must be one of {_READOUTS}, got {readout!r}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.order, self.readout, self.rank = order, readout, rank
        self.include_lower = (
            bool(layer_kwargs.get("kv_bias", False)) if include_lower is None else include_lower
        )
        self.self_loops = self_loops
        self.causal = bool(layer_kwargs.get("causal", False))
        if num_categories is not None:
            self.embedding: nn.Module = nn.Embedding(num_categories, hidden_channels)
        else:
            self.embedding = nn.Linear(in_channels, hidden_channels)
        self.layers = nn.ModuleList(
            NSimplicialTransformerLayer(
                hidden_channels,
                heads,
                order,
                include_lower=self.include_lower,
                self_loops=self_loops,
                **layer_kwargs,
            )
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(hidden_channels)
        self.head = nn.Linear(hidden_channels, out_channels)

    def _embed(self, x: Tensor) -> Tensor:
        if isinstance(self.embedding, nn.Embedding):
            if x.dtype != torch.long:
                raise TypeError("num_categories is set: x must hold long category codes")
            h = self.embedding(x)
            return h.sum(-2) if x.dim() >= 2 else h
        if not torch.is_floating_point(x):
            raise TypeError(
                f"x has dtype {x.dtype}; pass float features or set num_categories for codes"
            )
        return self.embedding(x)

    def _pool(self, h: Tensor, batch: Tensor | None) -> Tensor:
        if h.dim() == 3:  # sequences
            if self.readout == "mean":
                return h.mean(1)
            if self.readout == "sum":
                return h.sum(1)
            return h.amax(1)
        if batch is None:
            batch = torch.zeros(h.shape[0], dtype=torch.long, device=h.device)
        size = int(batch.max()) + 1 if batch.numel() else 0
        if self.readout == "max":
            out = scatter_max(h, batch, size)
            return torch.where(torch.isfinite(out), out, torch.zeros_like(out))
        total = scatter_sum(h, batch, size)
        if self.readout == "sum":
            return total
        count = scatter_sum(torch.ones_like(batch, dtype=h.dtype), batch, size).clamp_min(1)
        return total / count[:, None]

    def forward(
        self,
        x: Tensor | Any,
        tuples: Tensor | TupleMask | Any | None = None,
        batch: Tensor | None = None,
        *,
        mask: MaskLike = None,
        positions: Tensor | None = None,
        num_graphs: int | None = None,
    ) -> Tensor:
        """Run the transformer.

        Parameters
        ----------
        x : torch.Tensor or ComplexData
            ``(batch, n, in_channels)`` sequences, ``(n_cells, in_channels)`` cells (with
            ``tuples``), or a (batched) ``ComplexData``.
        tuples : torch.Tensor, TupleMask or toponetx.SimplicialComplex, optional
            Allowed tuples for 2-D ``x`` (shape ``(n_tuples, N + 1)``); computed from the
            incidences when ``x`` is a ``ComplexData``.
        batch : torch.Tensor, shape = (n_cells,), optional
            Complex index of every cell (2-D ``x``); read from ``batch_{rank}`` for a
            ``ComplexData``; default one complex.
        mask : optional
            Explicit mask for the sequence mode (see :class:`~.NSimplicialAttention`).
        positions : torch.Tensor, optional
            Token positions for RoPE.
        num_graphs : int, optional
            Number of complexes (default ``batch.max() + 1``); keeps trailing empty complexes.

        Returns
        -------
        torch.Tensor
            ``(num_sequences_or_complexes, out_channels)`` with a readout, else per-token
            ``(..., n, out_channels)``.
        """
        if not isinstance(x, Tensor):
            data = x
            x = _get(data, f"x_{self.rank}")
            if not isinstance(x, Tensor):
                raise TypeError(
                    f"x must be a tensor or a ComplexData with key x_{self.rank}, got "
                    f"{type(data).__name__}"
                )
            if tuples is None:
                tuples = complex_data_to_tuples(
                    data, self.order, self.rank, self.include_lower, self.self_loops
                )
            if batch is None:
                batch = _get(data, f"batch_{self.rank}")
        categorical = isinstance(self.embedding, nn.Embedding)
        cells = x.dim() <= 2 if categorical else x.dim() == 2
        if cells and tuples is None:
            raise ValueError(
                "x of shape (n_cells, channels) is a set of cells: pass tuples (or a "
                "ComplexData); give sequences as (batch, n, channels)"
            )
        if not cells and tuples is not None:
            raise ValueError("tuples are for cells given as (n_cells, channels), not sequences")
        if x.dim() not in ((1, 2, 3) if categorical else (2, 3)):
            raise ValueError(f"x has an unsupported shape {tuple(x.shape)}")
        h = self._embed(x)
        tuple_mask = None
        if tuples is not None:
            tuple_mask = resolve_tuples(
                tuples, self.order, self.include_lower, self.self_loops, self.causal
            )
        for layer in self.layers:
            h = layer(h, tuples=tuple_mask, mask=mask, positions=positions)
        h = self.norm(h)
        if self.readout is None:
            return self.head(h)
        pooled = self._pool(h, batch)
        if num_graphs is not None and h.dim() == 2 and pooled.shape[0] < num_graphs:
            pad = pooled.new_zeros(num_graphs - pooled.shape[0], pooled.shape[1])
            pooled = torch.cat([pooled, pad], 0)
        return self.head(pooled)
