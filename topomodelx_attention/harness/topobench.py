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

from topomodelx_attention.data import ComplexData, sparsity_pattern

__all__ = [
    "TOPOBENCH_TRANSFORMS",
    "CellularTransformerBackbone",
    "NSimplicialBackbone",
    "OrderKTokenGTBackbone",
    "TopoBenchWrapper",
    "pad_empty_ranks",
    "register_topobench_transforms",
    "to_complex_data",
]


_RANK_NEIGHBORHOODS = (
    "adjacency", "coadjacency", "down_laplacian", "up_laplacian", "hodge_laplacian",
)


#: Positional encodings :func:`register_topobench_transforms` adds to TopoBench's registry
#: (pre-transforms: deterministic, so TopoBench may cache them; ``RandomSignFlip`` and resampled
#: ORFs are training-time transforms and are not offered).
TOPOBENCH_TRANSFORMS = (
    "BarycentricSubdivisionPE",
    "BarycentricRandomWalkPE",
    "CellularRandomWalkPE",
    "HodgeLaplacianPE",
    "TopologicalSlepiansPE",
    "ZeroPE",
)


class _TopoBenchTransform:
    """Build one of our transforms from TopoBench's ``DataTransform`` keyword arguments."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, **kwargs: Any) -> Any:
        kwargs.pop("transform_name", None)
        kwargs.pop("transform_type", None)
        return self.cls(**kwargs)


def register_topobench_transforms(registry: dict[str, Any] | None = None) -> list[str]:
    """Add this package's positional encodings to TopoBench's transform registry.

    TopoBench builds every transform by name (``transform_name``) from the dictionary
    ``topobench.transforms.TRANSFORMS``, so a transform config cannot name an arbitrary
    ``_target_``. After this call a TopoBench ``transforms`` config can append, after the lifting::

        pe: {transform_type: data manipulation, transform_name: CellularRandomWalkPE, dim: 8}

    (``model.backbone.pe_channels=8``). Call it once in the process that runs TopoBench, before
    the data are prepared (``benchmarks/topobench_check.py`` does it in its launcher).

    Parameters
    ----------
    registry : dict, optional
        The registry to extend (default: TopoBench's ``TRANSFORMS``; TopoBench must be
        importable then).

    Returns
    -------
    list of str
        The names added (:data:`TOPOBENCH_TRANSFORMS`).
    """
    if registry is None:
        from topobench.transforms import TRANSFORMS as registry
    from topomodelx_attention import transforms

    for name in TOPOBENCH_TRANSFORMS:
        registry[name] = _TopoBenchTransform(getattr(transforms, name))
    return list(TOPOBENCH_TRANSFORMS)


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


def _max_rank(max_rank: int | None, num_cell_dimensions: int | None) -> int:
    """Highest rank of a backbone from ``max_rank`` or TopoBench's ``num_cell_dimensions``."""
    if max_rank is None:
        max_rank = 2 if num_cell_dimensions is None else int(num_cell_dimensions) - 1
    elif num_cell_dimensions is not None and int(max_rank) != int(num_cell_dimensions) - 1:
        raise ValueError(
            f"max_rank={max_rank} disagrees with num_cell_dimensions={num_cell_dimensions}; "
            "give one of them"
        )
    if int(max_rank) < 0:
        raise ValueError(f"max_rank must be at least 0, got {max_rank}")
    return int(max_rank)


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
    num = getattr(batch, "num_graphs", None)  # a PyG Batch counts complexes without vertices too
    if num is None:
        index = batch.get("batch_0", None)
        num = int(index.max()) + 1 if index is not None and index.numel() else 1
    num = int(num)
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
        # 0/1 pattern: TopoBench incidences may carry signs
        data[key] = sparsity_pattern(batch[key], key, torch.float32)
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

        self.max_rank = _max_rank(max_rank, num_cell_dimensions)
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
        return self.transformer.encode(_complex_view(batch, self.max_rank, self.neighborhoods))


def _complex_view(batch: Any, max_rank: int, neighborhoods: Sequence[str] | None = None) -> ComplexData:
    """Pad the TopoBench batch's missing ranks and view it as a ``ComplexData``.

    ``neighborhoods`` default to the incidences ``incidence_1..incidence_{max_rank}``.
    """
    pad_empty_ranks(batch, max_rank)
    if neighborhoods is None:
        neighborhoods = [f"incidence_{r}" for r in range(1, max_rank + 1)]
    return to_complex_data(batch, max_rank, neighborhoods)


class NSimplicialBackbone(nn.Module):
    """N-simplicial transformer layers as a TopoBench backbone (features already encoded).

    The tokens are the rank-``rank`` cells of the TopoBench batch; the allowed ``(N+1)``-tuples
    come from its incidences (:func:`~topomodelx_attention.nn.simplicial.masks.complex_data_to_tuples`:
    the vertices of every ``N``-simplex for ``rank=0``). Cells of the other ranks pass through
    unchanged (TopoBench's wrapper adds its residual + LayerNorm, its readout propagates down).

    Parameters
    ----------
    in_channels : int
        Width of every ``x_r`` after TopoBench's feature encoder.
    hidden_channels : int
        Token width (the transformer's embedding maps ``in_channels`` to it; outputs are
        projected back when they differ, so every rank keeps ``in_channels`` columns for the
        readout).
    n_layers : int, default=2
        Layers.
    heads : int, default=1
        Attention heads.
    order : int, default=2
        ``N`` (2: attention over triangles of tokens).
    rank : int, default=0
        Rank of the token cells.
    max_rank : int, optional
        Highest rank of the batch (default ``num_cell_dimensions - 1``, else 2); missing ranks
        are padded as empty (:func:`pad_empty_ranks`).
    num_cell_dimensions : int, optional
        TopoBench's count of cell dimensions.
    **layer_kwargs
        Other :class:`~topomodelx_attention.nn.simplicial.NSimplicialTransformer` options
        (``dropout``, ``attention_dropout``, ``kv_bias``, ``router_k``, ...): TopoBench's
        backbone config passes them by name.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        *,
        n_layers: int = 2,
        heads: int = 1,
        order: int = 2,
        rank: int = 0,
        max_rank: int | None = None,
        num_cell_dimensions: int | None = None,
        include_lower: bool | None = None,
        self_loops: bool = False,
        **layer_kwargs: Any,
    ) -> None:
        super().__init__()
        from topomodelx_attention.nn.simplicial import NSimplicialTransformer

        self.max_rank = _max_rank(max_rank, num_cell_dimensions)
        if not 0 <= int(rank) <= self.max_rank:
            raise ValueError(f"rank must be in 0..{self.max_rank}, got {rank}")
        self.rank = int(rank)
        self.out_channels = int(in_channels)
        # out_channels=None: an encoder without readout (every parameter gets a gradient); its
        # encode() embeds the cells, runs the layers (router context included) and the LayerNorm
        self.transformer = NSimplicialTransformer(
            int(in_channels), hidden_channels, None, n_layers=n_layers, heads=heads,
            order=order, rank=self.rank, include_lower=include_lower, self_loops=self_loops,
            **layer_kwargs,
        )
        same = int(in_channels) == int(hidden_channels)
        self.project = nn.Identity() if same else nn.Linear(hidden_channels, in_channels)

    def forward(self, batch: Any) -> list[Tensor]:
        """Cell embeddings of every rank (rank ``rank`` transformed, the others unchanged).

        Parameters
        ----------
        batch : torch_geometric.data.Data
            Encoded TopoBench batch (``x_r``, ``incidence_r``, ``batch_r``).

        Returns
        -------
        list of torch.Tensor
            ``h_r`` of shape ``(n_r, in_channels)``, ``r = 0..max_rank``.
        """
        data = _complex_view(batch, self.max_rank)
        out = [data[f"x_{r}"] for r in range(self.max_rank + 1)]
        out[self.rank] = self.project(self.transformer.encode(data))
        return out


class OrderKTokenGTBackbone(nn.Module):
    """Order-k TokenGT as a TopoBench backbone: every cell of the batch is a token.

    TopoBench batches carry no node identifiers, so fresh orthonormal random identifiers
    (ORFs, TokenGT Appendix A.3.1) are drawn per complex at every training step
    (:func:`~topomodelx_attention.transforms.node_ids.batched_orthogonal_random_ids`); in eval
    mode they are drawn from a fixed seed, so evaluation is deterministic.

    Parameters
    ----------
    in_channels : int
        Width of every ``x_r`` after TopoBench's feature encoder.
    hidden_channels : int
        Token width; outputs are projected back to ``in_channels`` per rank.
    n_layers : int, default=2
        Layers.
    heads : int, default=4
        Attention heads.
    node_id_dim : int, default=16
        Identifier width.
    max_rank : int, optional
        Highest rank (default ``num_cell_dimensions - 1``, else 2).
    num_cell_dimensions : int, optional
        TopoBench's count of cell dimensions.
    eval_seed : int, default=0
        Seed of the evaluation identifiers.
    **kwargs
        Other :class:`~topomodelx_attention.nn.graph.OrderKTokenGT` options (``kind``,
        ``identifiers``, ``max_cell_size``, ``dropout``, ...).
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        *,
        n_layers: int = 2,
        heads: int = 4,
        node_id_dim: int = 16,
        max_rank: int | None = None,
        num_cell_dimensions: int | None = None,
        eval_seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        from topomodelx_attention.nn.graph import OrderKTokenGT

        self.max_rank = _max_rank(max_rank, num_cell_dimensions)
        self.node_id_dim = int(node_id_dim)
        self.eval_seed = int(eval_seed)
        self.out_channels = int(in_channels)
        self.model = OrderKTokenGT(
            [int(in_channels)] * (self.max_rank + 1), hidden_channels, in_channels,
            n_layers=n_layers, heads=heads, node_id_dim=node_id_dim,
            outputs=tuple(range(self.max_rank + 1)), **kwargs,
        )

    def forward(self, batch: Any) -> list[Tensor]:
        """Cell embeddings of every rank.

        Parameters
        ----------
        batch : torch_geometric.data.Data
            Encoded TopoBench batch (``x_r``, ``incidence_r``, ``batch_r``).

        Returns
        -------
        list of torch.Tensor
            ``h_r`` of shape ``(n_r, in_channels)``, ``r = 0..max_rank``.
        """
        from topomodelx_attention.transforms.node_ids import batched_orthogonal_random_ids

        data = _complex_view(batch, self.max_rank)
        generator = None
        if not self.training:
            generator = torch.Generator(device=data.x_0.device).manual_seed(self.eval_seed)
        if self.node_id_dim:
            data.node_id = batched_orthogonal_random_ids(
                data.batch_0, data.num_complexes, self.node_id_dim, generator
            ).to(data.x_0.dtype)
        out = self.model.cell_outputs(data)
        return [out[r] for r in range(self.max_rank + 1)]


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
    """TopoBench backbone wrapper of every backbone of this module (CT, N-simplicial, TokenGT).

    Parameters
    ----------
    backbone : torch.nn.Module
        A backbone of this module returning ``[h_0, ..., h_R]`` (TopoBench passes it; the YAML
        sets ``_partial_: true``).
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
