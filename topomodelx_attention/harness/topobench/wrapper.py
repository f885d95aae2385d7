"""From a TopoBench batch to the tensors of the backbones, and back to TopoBench's ``model_out``.

TopoBench (``topobench.model.TBModel``) runs ``feature_encoder → backbone_wrapper(backbone) →
readout``: the feature encoder projects every ``x_r`` to a common width, the wrapper calls the
backbone on the batch's tensors and returns a ``model_out`` dictionary
``{"labels": batch.y, "batch_0": batch.batch_0, "x_0": ..., "x_1": ..., ...}``, to which
``AbstractWrapper.__call__`` adds a residual connection and a LayerNorm per rank; the readout
(``PropagateSignalDown`` / ``NoReadOut``, graph- or node-level) pools the cells.
:func:`backbone_inputs` is the one mapping batch → backbone arguments: the wrappers a TopoBench
contribution adds (``topomodelx-attention topobench contribute``) call it, and so does
:class:`TopoBenchWrapper`, this package's own wrapper of every backbone (a subclass of TopoBench's
``AbstractWrapper`` when TopoBench is importable, else of a stand-in with the same interface, so
this module never requires TopoBench).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.harness.topobench.backbones import RANK_NEIGHBORHOODS

__all__ = ["TopoBenchWrapper", "backbone_inputs", "pad_empty_ranks"]


def pad_empty_ranks(batch: Any, max_rank: int) -> None:
    """Add empty ranks ``r <= max_rank`` that a TopoBench batch lacks, in place.

    TopoBench sizes a model by ``dataset.parameters.max_dim_if_lifted`` (3 for its graph data
    sets) while a cycle lifting stops at rank 2, so the batch has no ``x_3`` and the readout
    (``PropagateSignalDown``) fails with ``KeyError: 'x_3'`` — for TopoBench's own cell models
    too. Following this package's convention (an empty rank is a tensor with 0 rows, never a
    missing key), the missing ranks are added with 0 cells: ``x_r`` ``(0, d_{r-1})``,
    ``batch_r`` ``(0,)``, ``incidence_r`` ``(n_{r-1}, 0)`` and ``(0, 0)`` neighbourhoods (in the
    batch itself, so the readout finds them too).

    Parameters
    ----------
    batch : torch_geometric.data.Data
        TopoBench batch; modified in place.
    max_rank : int
        Highest rank the model and the readout use.

    Raises
    ------
    ValueError
        When the batch has no ``x_0``.
    """
    if "x_0" not in batch:
        raise ValueError("the TopoBench batch has no x_0: a backbone needs the features of the vertices")
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
        for name in RANK_NEIGHBORHOODS:
            if f"{name}_{rank}" not in batch:
                batch[f"{name}_{rank}"] = torch.sparse_coo_tensor(
                    indices, torch.zeros(0, **empty), (0, 0)
                ).coalesce()


def _num_complexes(batch: Any, max_rank: int) -> int:
    """Complexes of a batch: ``num_graphs`` of a PyG ``Batch``, else from its batch vectors."""
    num = getattr(batch, "num_graphs", None)
    if isinstance(num, int):
        return num
    sizes = [
        int(batch[key].max()) + 1
        for key in ["batch", *(f"batch_{r}" for r in range(max_rank + 1))]
        if key in batch and isinstance(batch[key], Tensor) and batch[key].numel()
    ]
    return max(sizes, default=1)


def _batch_vector(batch: Any, rank: int, rows: int, num: int, device: torch.device) -> Tensor:
    key = f"batch_{rank}"
    if key in batch and isinstance(batch[key], Tensor):
        return batch[key]
    if rank == 0 and "batch" in batch and isinstance(batch["batch"], Tensor):
        return batch["batch"]
    if num == 1:  # a single complex (e.g. a lifted Data outside a DataLoader)
        return torch.zeros(rows, dtype=torch.long, device=device)
    raise ValueError(
        f"the TopoBench batch holds {num} complexes but has no {key}: cannot tell which complex "
        f"each {rank}-cell belongs to (TopoBench's collate_fn writes batch_r for every x_r)"
    )


def backbone_inputs(batch: Any, backbone: nn.Module) -> dict[str, Any]:
    """Keyword arguments of ``backbone(...)`` taken from a TopoBench batch.

    Pads the ranks the lifting did not produce (:func:`pad_empty_ranks`, in the batch), then
    collects ``x = (x_0, ..., x_R)``, ``neighborhoods = {key: batch[key]}`` for the backbone's
    ``neighborhood_keys`` and ``batch = (batch_0, ..., batch_R)``; ``pe = (pe_0, ..., pe_R)``
    too when the backbone was built with ``pe_channels``.

    Parameters
    ----------
    batch : torch_geometric.data.Data
        Encoded TopoBench batch (``x_r``, ``batch_r``, sparse neighbourhoods).
    backbone : torch.nn.Module
        A backbone of :mod:`~topomodelx_attention.harness.topobench.backbones` (it has
        ``max_rank`` and ``neighborhood_keys``).

    Returns
    -------
    dict
        ``{"x": ..., "neighborhoods": ..., "batch": ...}`` (and ``"pe"``).

    Raises
    ------
    ValueError
        When the batch lacks a neighbourhood, a batch vector or a positional encoding the
        backbone needs (the message names the key).
    """
    max_rank = int(backbone.max_rank)
    pad_empty_ranks(batch, max_rank)
    ranks = range(max_rank + 1)
    x = tuple(batch[f"x_{r}"] for r in ranks)
    num = _num_complexes(batch, max_rank)
    index = tuple(_batch_vector(batch, r, x[r].shape[0], num, x[0].device) for r in ranks)
    missing = [key for key in backbone.neighborhood_keys if key not in batch]
    if missing:
        raise ValueError(
            f"the TopoBench batch has no {missing}: {type(backbone).__name__} reads "
            f"{backbone.neighborhood_keys}; use a lifting that computes them (TopoBench's "
            "liftings compute every neighbourhood unless model.backbone.neighborhoods restricts them)"
        )
    inputs: dict[str, Any] = {
        "x": x,
        "neighborhoods": {key: batch[key] for key in backbone.neighborhood_keys},
        "batch": index,
    }
    if getattr(backbone, "pe_channels", None) is not None:
        absent = [f"pe_{r}" for r in ranks if f"pe_{r}" not in batch]
        if absent:
            raise ValueError(
                f"the backbone has pe_channels={backbone.pe_channels} but the batch has no {absent}: "
                "append a positional encoding transform (register_topobench_transforms) or set "
                "model.backbone.pe_channels=null"
            )
        inputs["pe"] = tuple(batch[f"pe_{r}"] for r in ranks)
    return inputs


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


class TopoBenchWrapper(_Base):
    """TopoBench backbone wrapper of every backbone of this package (CT, N-simplicial, TokenGT).

    The same mapping as the wrappers a TopoBench contribution adds (:func:`backbone_inputs`).

    Parameters
    ----------
    backbone : torch.nn.Module
        A backbone of :mod:`~topomodelx_attention.harness.topobench.backbones` (TopoBench
        passes it; the YAML sets ``_partial_: true``).
    **kwargs
        ``out_channels`` and ``num_cell_dimensions`` (required, as for every TopoBench
        wrapper), ``residual_connections`` (default ``True``).
    """

    def forward(self, batch: Any) -> dict[str, Tensor]:
        """Run the backbone on the batch's tensors and return TopoBench's ``model_out``.

        Parameters
        ----------
        batch : torch_geometric.data.Data
            Encoded TopoBench batch.

        Returns
        -------
        dict of str to torch.Tensor
            ``labels``, ``batch_0`` and ``x_r`` for every rank of the backbone.
        """
        h = self.backbone(**backbone_inputs(batch, self.backbone))
        model_out = {"labels": batch.y, "batch_0": batch.batch_0}
        for rank, value in enumerate(h):
            model_out[f"x_{rank}"] = value
        return model_out
