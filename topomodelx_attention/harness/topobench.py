"""TopoBench-ready exports: a backbone and a backbone wrapper following TopoBench's conventions.

TopoBench (``topobench.model.TBModel``) runs ``feature_encoder → backbone_wrapper(backbone) →
readout``: the feature encoder projects every ``x_r`` to a common width, the wrapper calls the
backbone on the batch and returns a ``model_out`` dictionary
``{"labels": batch.y, "batch_0": batch.batch_0, "x_0": ..., "x_1": ..., "x_2": ...}``, to which
``AbstractWrapper.__call__`` adds a residual connection and a LayerNorm per rank; the readout
pools the cells. The YAML ``configs/topobench/model/cell/tma_cellular_transformer.yaml`` points
its ``_target_`` entries here, so a TopoBench checkout with this package installed runs the
Cellular Transformer (``benchmarks/README.md`` lists the steps).

When TopoBench is importable the wrapper subclasses its ``AbstractWrapper``; otherwise a
stand-in with the same interface is used (so this module never requires TopoBench).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.data import ComplexData

__all__ = [
    "CellularTransformerBackbone",
    "CellularTransformerWrapper",
    "pad_empty_ranks",
    "to_complex_data",
]


def _pattern(matrix: Tensor) -> Tensor:
    """0/1 coalesced copy of a sparse matrix (TopoBench incidences may carry signs)."""
    matrix = matrix.coalesce()
    indices = matrix.indices()
    keep = matrix.values() != 0
    return torch.sparse_coo_tensor(
        indices[:, keep], torch.ones(int(keep.sum()), dtype=torch.float32, device=indices.device),
        matrix.shape,
    ).coalesce()


_RANK_NEIGHBORHOODS = (
    "adjacency", "coadjacency", "down_laplacian", "up_laplacian", "hodge_laplacian",
)


def pad_empty_ranks(batch: Any, max_rank: int) -> None:
    """Add empty ranks ``r <= max_rank`` that a TopoBench batch lacks, in place.

    TopoBench sizes a model by ``dataset.parameters.max_dim_if_lifted`` (3 for its graph data
    sets) while a cycle lifting stops at rank 2, so the batch has no ``x_3``/``incidence_3`` and
    the readout (``PropagateSignalDown``) fails with ``KeyError: 'x_3'`` — for TopoBench's own
    cell models too. Following this package's convention (an empty rank is a tensor with 0 rows,
    never a missing key), the missing ranks are added with 0 cells: ``x_r`` ``(0, d_{r-1})``,
    ``batch_r`` ``(0,)``, ``incidence_r`` ``(n_{r-1}, 0)`` and ``(0, 0)`` neighbourhoods, so the
    default ``max_dim_if_lifted`` works unchanged.

    Parameters
    ----------
    batch : torch_geometric.data.Data
        TopoBench batch; modified in place.
    max_rank : int
        Highest rank the model and the readout use.
    """
    for rank in range(1, max_rank + 1):
        if f"x_{rank}" in batch:
            continue
        below = batch[f"x_{rank - 1}"]
        empty = {"dtype": below.dtype, "device": below.device}
        batch[f"x_{rank}"] = below.new_zeros((0, below.shape[1]))
        batch[f"batch_{rank}"] = torch.zeros(0, dtype=torch.long, device=below.device)
        indices = torch.zeros((2, 0), dtype=torch.long, device=below.device)
        if f"incidence_{rank}" not in batch:
            batch[f"incidence_{rank}"] = torch.sparse_coo_tensor(
                indices, torch.zeros(0, **empty), (below.shape[0], 0)
            ).coalesce()
        for name in _RANK_NEIGHBORHOODS:
            if f"{name}_{rank}" not in batch:
                batch[f"{name}_{rank}"] = torch.sparse_coo_tensor(
                    indices, torch.zeros(0, **empty), (0, 0)
                ).coalesce()


def to_complex_data(batch: Any, max_rank: int, neighborhoods: Sequence[str], pe_key: str = "pe") -> ComplexData:
    """View a TopoBench batch (a PyG ``Data``/``Batch``) as a batched :class:`ComplexData`.

    Parameters
    ----------
    batch : torch_geometric.data.Data
        TopoBench batch with ``x_r``, ``batch_r`` (or only ``batch_0``), sparse neighbourhoods.
    max_rank : int
        Highest rank used.
    neighborhoods : sequence of str
        Neighbourhood keys to copy (``"adjacency_0"``, ``"incidence_1"``, ...), as 0/1 patterns.
    pe_key : str, default="pe"
        Prefix of positional encodings to copy (``pe_r``) when the batch has them.

    Returns
    -------
    ComplexData
        With ``x_r``, ``batch_r``, the neighbourhoods, ``pe_r`` and ``shape`` ``(B, R + 1)``.
    """
    data = ComplexData()
    if "batch_0" in batch and batch["batch_0"].numel():
        num = int(batch["batch_0"].max()) + 1
    else:
        num = int(getattr(batch, "num_graphs", 1) or 1)
    counts = []
    for rank in range(max_rank + 1):
        x = batch[f"x_{rank}"]
        data[f"x_{rank}"] = x
        key = f"batch_{rank}"
        if key in batch:
            index = batch[key]
        elif rank == 0 and "batch" in batch:
            index = batch["batch"]
        elif num == 1:
            index = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        else:
            raise ValueError(f"the batch has no {key}: cannot tell which complex each {rank}-cell belongs to")
        data[key] = index
        counts.append(torch.bincount(index, minlength=num))
        pe = f"{pe_key}_{rank}"
        if pe in batch:
            data[pe] = batch[pe]
    for key in neighborhoods:
        data[key] = _pattern(batch[key])
    data.shape = torch.stack(counts, dim=1)
    return data


class CellularTransformerBackbone(nn.Module):
    """Cellular Transformer layers as a TopoBench backbone (features already encoded).

    Parameters
    ----------
    in_channels : int
        Width of every ``x_r`` after TopoBench's feature encoder.
    hidden_channels : int
        Transformer width.
    n_layers : int, default=2
        Layers.
    heads : int, default=4
        Attention heads.
    max_rank : int, optional
        Highest rank. Default: ``num_cell_dimensions - 1`` when given (TopoBench's
        ``${infer_num_cell_dimensions:...}``, which follows ``dataset.parameters.max_dim_if_lifted``),
        else 2. Ranks without cells (e.g. rank 3 of a cycle-lifted graph) are legal.
    num_cell_dimensions : int, optional
        TopoBench's count of cell dimensions (ranks ``0..num_cell_dimensions - 1``).
    pe_channels : int, optional
        Width of ``pe_r`` when the batch carries our positional encodings.
    **kwargs
        Other :class:`~topomodelx_attention.nn.cell.CellularTransformer` arguments
        (``attention``, ``kind``, ``dropout``, ``attention_dropout``, ...). The transformer is
        built without readout (``out_channels=None``): every parameter is used by ``forward``.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        n_layers: int = 2,
        heads: int = 4,
        max_rank: int | None = None,
        num_cell_dimensions: int | None = None,
        pe_channels: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        from topomodelx_attention.nn.cell import CellularTransformer

        if max_rank is None:
            max_rank = 2 if num_cell_dimensions is None else int(num_cell_dimensions) - 1
        elif num_cell_dimensions is not None and int(max_rank) != int(num_cell_dimensions) - 1:
            raise ValueError(
                f"max_rank={max_rank} disagrees with num_cell_dimensions={num_cell_dimensions}; "
                "give one of them"
            )
        if int(max_rank) < 0:
            raise ValueError(f"max_rank must be at least 0, got {max_rank}")
        self.max_rank = int(max_rank)
        self.out_channels = int(hidden_channels)
        # out_channels=None: no readout, whose parameters would never get a gradient (DDP's
        # "unused parameters" error); the backbone only calls encode()
        self.transformer = CellularTransformer(
            [int(in_channels)] * (self.max_rank + 1), hidden_channels, None,
            n_layers=n_layers, heads=heads, pe_channels=pe_channels, **kwargs,
        )
        self.neighborhoods = sorted({arrow.neighborhood for arrow in self.transformer.arrows})

    def forward(self, batch: Any) -> list[Tensor]:
        """Cell embeddings of every rank.

        Parameters
        ----------
        batch : torch_geometric.data.Data
            TopoBench batch (see :func:`to_complex_data`).

        Returns
        -------
        list of torch.Tensor
            ``h_r`` of shape ``(n_r, hidden_channels)``, ``r = 0..max_rank``.
        """
        pad_empty_ranks(batch, self.max_rank)
        data = to_complex_data(batch, self.max_rank, self.neighborhoods)
        return self.transformer.encode(data)


class _WrapperBase(nn.Module):
    """Stand-in for ``topobench.nn.wrappers.base.AbstractWrapper`` (same interface)."""

    def __init__(self, backbone: nn.Module, **kwargs: Any) -> None:
        super().__init__()
        self.backbone = backbone
        out_channels = int(kwargs["out_channels"])
        self.dimensions = range(int(kwargs["num_cell_dimensions"]))
        self.residual_connections = bool(kwargs.get("residual_connections", True))
        for i in self.dimensions:
            setattr(self, f"ln_{i}", nn.LayerNorm(out_channels))

    def __call__(self, batch: Any) -> dict[str, Tensor]:
        model_out = self.forward(batch)
        if self.residual_connections:
            for i in self.dimensions:
                key = f"x_{i}"
                if key in batch and key in model_out and hasattr(self, f"ln_{i}"):
                    model_out[key] = getattr(self, f"ln_{i}")(model_out[key] + batch[key])
        return model_out


try:  # inside a TopoBench checkout, be a real TopoBench wrapper
    from topobench.nn.wrappers.base import AbstractWrapper as _Base
except ImportError:  # pragma: no cover - depends on the environment
    _Base = _WrapperBase


class CellularTransformerWrapper(_Base):
    """TopoBench backbone wrapper of :class:`CellularTransformerBackbone`.

    Parameters
    ----------
    backbone : CellularTransformerBackbone
        The backbone (TopoBench passes it; the YAML sets ``_partial_: true``).
    **kwargs
        ``out_channels`` and ``num_cell_dimensions`` (required, as for every TopoBench
        wrapper), ``residual_connections`` (default ``True``).
    """

    def forward(self, batch: Any) -> dict[str, Tensor]:
        """Run the backbone and return TopoBench's ``model_out`` dictionary.

        Parameters
        ----------
        batch : torch_geometric.data.Data
            Encoded TopoBench batch.

        Returns
        -------
        dict of str to torch.Tensor
            ``labels``, ``batch_0`` and ``x_r`` for every rank of the backbone.
        """
        h = self.backbone(batch)
        model_out = {"labels": batch.y, "batch_0": batch.batch_0}
        for rank, value in enumerate(h):
            model_out[f"x_{rank}"] = value
        return model_out
