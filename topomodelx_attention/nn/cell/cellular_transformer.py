"""Cellular Transformer model: embeddings + PEs (Eq. 4), stacked layers, readout (Appendix A)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from topomodelx_attention.data import ComplexData
from topomodelx_attention.nn.cell.cellular_transformer_layer import (
    Arrow,
    CellularTransformerLayer,
    parse_tensor_diagram,
)
from topomodelx_attention.nn.common import POOLINGS, FeatureEncoder, ReadoutMLP, segment_pool

__all__ = ["CellEncoder", "CellularTransformer"]

PE_COMBINATIONS = ("concat", "sum")


class CellEncoder(nn.Module):
    """Embed the features of one rank and combine them with its positional encoding (Eq. 4).

    Features go through a :class:`~topomodelx_attention.nn.common.FeatureEncoder` (linear map,
    or summed embeddings of categorical codes). With a positional
    encoding ``E``: ``ConcatPE = Concat(X, E) θ + b`` or ``SumPE = X θ_x + b_x + E θ_pe + b_pe``.

    Parameters
    ----------
    in_channels : int
        Feature columns of the rank.
    out_channels : int
        Hidden width.
    cardinalities : sequence of int, optional
        Categories per column for categorical features (then the input must be ``long``).
    pe_channels : int, optional
        Width of ``pe_r`` (``None``: no positional encoding).
    pe_combination : {"concat", "sum"}, default="concat"
        ConcatPE (the paper's choice) or SumPE.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        cardinalities: Sequence[int] | None = None,
        pe_channels: int | None = None,
        pe_combination: str = "concat",
    ) -> None:
        super().__init__()
        if pe_combination not in PE_COMBINATIONS:
            raise ValueError(f"pe_combination must be one of {PE_COMBINATIONS}, got {pe_combination!r}")
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        self.pe_channels = None if pe_channels is None else int(pe_channels)
        self.pe_combination = pe_combination
        self.features = FeatureEncoder(in_channels, out_channels, cardinalities, "cell features")
        self.pe_linear = None
        if self.pe_channels is not None:
            width = out_channels + self.pe_channels if pe_combination == "concat" else self.pe_channels
            self.pe_linear = nn.Linear(width, out_channels)

    def forward(self, x: Tensor, pe: Tensor | None = None) -> Tensor:
        """Embed features and combine the positional encoding.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, in_channels)
            Features.
        pe : torch.Tensor, shape = (n, pe_channels), optional
            Positional encoding (required iff ``pe_channels`` was given).

        Returns
        -------
        torch.Tensor, shape = (n, out_channels)
            ``X^1`` of the first layer.
        """
        h = self.features(x)
        if self.pe_linear is None:
            if pe is not None:
                raise ValueError("the data carries a positional encoding but the model has pe_channels=None")
            return h
        if pe is None:
            raise ValueError("the model expects positional encodings pe_r; apply a PE transform to the data")
        if pe.shape != (x.shape[0], self.pe_channels):
            raise ValueError(f"pe must have shape ({x.shape[0]}, {self.pe_channels}), got {tuple(pe.shape)}")
        pe = pe.to(h.dtype)
        if self.pe_combination == "concat":
            return self.pe_linear(torch.cat([h, pe], dim=-1))
        return h + self.pe_linear(pe)


class CellularTransformer(nn.Module):
    """Cellular Transformer ``R ∘ CT_L ∘ … ∘ CT_1 ∘ P`` (§4.1) for complexes of any dimension.

    Parameters
    ----------
    in_channels : sequence of int
        Feature columns ``[d_0, ..., d_R]`` of each rank (sets ``max_rank = len - 1``).
    hidden_channels : int
        Transformer width ``d^h``.
    out_channels : int
        Output width (classes or regression targets).
    n_layers : int, default=2
        Number of Cellular Transformer layers.
    heads : int, default=4
        Attention heads.
    attention : {"pairwise", "general"}, default="pairwise"
        Cellular attention mechanism (§4.2).
    kind : {"sparse", "dense", "mixed", "linear"}, default="sparse"
        Attention kind (see :class:`CellularTransformerLayer`).
    tensor_diagram : sequence, optional
        Arrows of the tensor diagram (default: the paper's, Figure 2).
    categorical : sequence of (sequence of int or None), optional
        Per rank: category counts of its categorical columns, or ``None`` for continuous
        features (e.g. ZINC: ``[[28], [4], None]``).
    pe_channels : int, optional
        Width of the positional encodings ``pe_r`` the data carries (``None``: no PE).
    pe_combination : {"concat", "sum"}, default="concat"
        ConcatPE (paper) or SumPE (Eq. 4).
    ffn_channels : int, optional
        FFN width (default ``hidden_channels``).
    dropout : float, default=0.0
        Dropout in the layers.
    attention_dropout : float, default=0.1
        Attention dropout (Table 3).
    embedding_dropout : float, default=0.0
        Dropout on the embedded inputs (Table 3).
    readout_layers : int, default=1
        Hidden layers of the readout MLP.
    readout_dropout : float, default=0.0
        Dropout in the readout MLP.
    readout_ranks : sequence of int or "all", default=(0,)
        Ranks pooled by the readout (the paper pools the vertices).
    pooling : {"sum", "mean"}, default="sum"
        Global pooling (the paper: add pool).
    bias : bool, default=False
        Bias in the attention projections.
    num_random_features : int, optional
        Random features of the ``linear`` kind.
    """

    def __init__(
        self,
        in_channels: Sequence[int],
        hidden_channels: int,
        out_channels: int,
        n_layers: int = 2,
        heads: int = 4,
        attention: str = "pairwise",
        kind: str = "sparse",
        tensor_diagram: Sequence[Arrow | tuple | str] | None = None,
        categorical: Sequence[Sequence[int] | None] | None = None,
        pe_channels: int | None = None,
        pe_combination: str = "concat",
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.1,
        embedding_dropout: float = 0.0,
        readout_layers: int = 1,
        readout_dropout: float = 0.0,
        readout_ranks: Sequence[int] | str = (0,),
        pooling: str = "sum",
        bias: bool = False,
        num_random_features: int | None = None,
    ) -> None:
        super().__init__()
        in_channels = [int(c) for c in in_channels]
        if not in_channels:
            raise ValueError("in_channels must list the feature width of every rank")
        self.max_rank = len(in_channels) - 1
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if categorical is None:
            categorical = [None] * len(in_channels)
        if len(categorical) != len(in_channels):
            raise ValueError("categorical needs one entry (None or cardinalities) per rank")
        if readout_ranks == "all":
            readout_ranks = tuple(range(self.max_rank + 1))
        self.readout_ranks = tuple(int(r) for r in readout_ranks)
        if not self.readout_ranks or any(not 0 <= r <= self.max_rank for r in self.readout_ranks):
            raise ValueError(f"readout_ranks must be ranks in 0..{self.max_rank}, got {readout_ranks}")
        if int(n_layers) < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.pooling = pooling
        self.pe_channels = pe_channels
        self.arrows = parse_tensor_diagram(tensor_diagram, self.max_rank)
        self.encoders = nn.ModuleList(
            CellEncoder(d, hidden_channels, cards, pe_channels, pe_combination)
            for d, cards in zip(in_channels, categorical)
        )
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.layers = nn.ModuleList(
            CellularTransformerLayer(
                hidden_channels,
                heads,
                self.max_rank,
                attention,
                kind,
                self.arrows,
                ffn_channels,
                dropout,
                attention_dropout,
                bias,
                num_random_features,
            )
            for _ in range(int(n_layers))
        )
        self.final_norms = nn.ModuleList(nn.LayerNorm(hidden_channels) for _ in range(self.max_rank + 1))
        self.readouts = nn.ModuleDict(
            {
                str(r): ReadoutMLP(hidden_channels, out_channels, readout_layers, readout_dropout)
                for r in self.readout_ranks
            }
        )

    # ------------------------------------------------------------------ helpers
    def _check_data(self, data: ComplexData) -> None:
        if not isinstance(data, ComplexData):
            raise TypeError(f"CellularTransformer expects a (batched) ComplexData, got {type(data)!r}")
        if data.max_rank < self.max_rank:
            raise ValueError(
                f"the model handles ranks 0..{self.max_rank} but the data stops at rank "
                f"{data.max_rank}; build complexes with max_rank={self.max_rank}"
            )

    def encode(self, data: ComplexData) -> list[Tensor]:
        """Hidden features of every cell after the last layer (and a final LayerNorm).

        Parameters
        ----------
        data : ComplexData
            A complex or a batch of complexes.

        Returns
        -------
        list of torch.Tensor
            ``h[r]`` of shape ``(n_r, hidden_channels)`` for ``r = 0..max_rank``.
        """
        self._check_data(data)
        ranks = range(self.max_rank + 1)
        for r in ranks:
            if f"x_{r}" not in data:
                raise ValueError(f"the data has no features x_{r}; lift features first (FeatureLifting)")
        h = [
            self.embedding_dropout(enc(data[f"x_{r}"], data.get(f"pe_{r}", None)))
            for r, enc in zip(ranks, self.encoders)
        ]
        neighborhoods = {}
        for arrow in self.arrows:
            name, rank = arrow.neighborhood.rsplit("_", 1)
            neighborhoods[arrow.neighborhood] = data.neighborhood(name, int(rank))
        batch = [data[f"batch_{r}"] for r in ranks]
        num = data.num_complexes
        for layer in self.layers:
            h = layer(h, neighborhoods, batch, num)
        return [norm(hr) for norm, hr in zip(self.final_norms, h)]

    def cell_outputs(self, data: ComplexData) -> dict[int, Tensor]:
        """Per-cell predictions of the readout ranks (node- or cell-level tasks).

        Parameters
        ----------
        data : ComplexData
            A complex or a batch.

        Returns
        -------
        dict of int to torch.Tensor
            ``{rank: (n_rank, out_channels)}`` for every readout rank.
        """
        h = self.encode(data)
        return {r: self.readouts[str(r)](h[r]) for r in self.readout_ranks}

    def forward(self, data: ComplexData) -> Tensor:
        """Predict one output per complex.

        The readout MLP runs on every cell of the readout ranks, then a global add (or mean)
        pool over the cells of each complex; several readout ranks are summed (Appendix A).

        Parameters
        ----------
        data : ComplexData
            A complex or a batch of complexes.

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            Predictions.
        """
        outputs = self.cell_outputs(data)
        num = data.num_complexes
        pooled = 0
        for rank, out in outputs.items():
            pooled = pooled + segment_pool(out, data[f"batch_{rank}"], num, self.pooling)
        return pooled
