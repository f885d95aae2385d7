"""Model registry of the benchmark harness: the Cellular Transformer and the baselines.

Every registered model maps a (batched) :class:`~topomodelx_attention.data.ComplexData` to one
prediction per complex, ``(num_complexes, out_channels)``. A :class:`ModelSpec` also says which
keys of the data the model reads, so that the harness can drop the others before batching.

===========================  ===========  ======================================================
name                         domain       model
===========================  ===========  ======================================================
``cellular_transformer``     cell         :class:`~topomodelx_attention.nn.cell.CellularTransformer`
``gin``                      graph        :class:`GINBaseline` (``torch_geometric.nn.GIN``)
``cwn``                      cell         :class:`CWNBaseline` (TopoModelX ``CWN``)
``sccnn``                    simplicial   :class:`SCCNNBaseline` (TopoModelX ``SCCNN``)
===========================  ===========  ======================================================

New models register a builder with :func:`register_model` and ship a
``configs/model/<domain>/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from topomodelx_attention.harness.datasets import DatasetInfo
from topomodelx_attention.nn.common import POOLINGS, FeatureEncoder, ReadoutMLP, segment_pool

__all__ = [
    "MODELS",
    "CWNBaseline",
    "GINBaseline",
    "ModelSpec",
    "SCCNNBaseline",
    "build_model",
    "get_spec",
    "register_model",
]


# ----------------------------------------------------------------------------------------------
# registry
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes
    ----------
    name : str
        Registry name (``model.name`` in the config).
    domain : {"graph", "cell", "simplicial"}
        Domain of its input.
    build : callable
        ``build(params, info) -> nn.Module`` with ``params`` the config's ``model.params``.
    keys : callable
        ``keys(model, info) -> set of str``: data keys the built model reads.
    """

    name: str
    domain: str
    build: Callable[[Mapping[str, Any], DatasetInfo], nn.Module]
    keys: Callable[[nn.Module, DatasetInfo], set[str]]


MODELS: dict[str, ModelSpec] = {}
"""Registered models, by name."""

_PLANNED: dict[str, str] = {}


def register_model(
    name: str, domain: str, keys: Callable[[nn.Module, DatasetInfo], set[str]]
) -> Callable[[Callable[[Mapping[str, Any], DatasetInfo], nn.Module]], Callable]:
    """Register a model builder (decorator).

    Parameters
    ----------
    name : str
        Registry name, as in ``model.name`` of its YAML.
    domain : {"graph", "cell", "simplicial"}
        Input domain.
    keys : callable
        ``keys(model, info)``: the data keys the model reads.

    Returns
    -------
    callable
        The decorator, returning the builder unchanged.

    Examples
    --------
    >>> @register_model("my_model", "graph", lambda model, info: {"x_0", "edge_index", "batch_0"})
    ... def build_my_model(params, info):
    ...     ...
    """
    if domain not in ("graph", "cell", "simplicial"):
        raise ValueError(f"domain must be 'graph', 'cell' or 'simplicial', got {domain!r}")

    def decorator(build):
        MODELS[name] = ModelSpec(name, domain, build, keys)
        return build

    return decorator


def get_spec(name: str) -> ModelSpec:
    """Return the registered :class:`ModelSpec` of ``name`` (clear error for unknown names)."""
    if name not in MODELS:
        hint = f" ({_PLANNED[name]})" if name in _PLANNED else ""
        raise ValueError(f"unknown model {name!r}{hint}; registered models: {sorted(MODELS)}")
    return MODELS[name]


def build_model(name: str, params: Mapping[str, Any] | None, info: DatasetInfo) -> nn.Module:
    """Build a registered model for a data set.

    Parameters
    ----------
    name : str
        Registry name.
    params : mapping, optional
        ``model.params`` of the config.
    info : DatasetInfo
        Feature widths, categories, PE width, output width of the data set.

    Returns
    -------
    torch.nn.Module
        ``forward(batch) -> (num_complexes, info.out_channels)``.
    """
    spec = get_spec(name)
    params = dict(params or {})
    try:
        return spec.build(params, info)
    except TypeError as error:
        raise TypeError(f"model {name!r}: invalid model.params {sorted(params)}: {error}") from error


# ----------------------------------------------------------------------------------------------
# shared pieces
# ----------------------------------------------------------------------------------------------
def _encoders(info: DatasetInfo, hidden: int, ranks: Sequence[int]) -> nn.ModuleList:
    return nn.ModuleList(FeatureEncoder(info.in_channels[r], hidden, info.categorical[r]) for r in ranks)


def _rank_keys(max_rank: int, *names: str) -> set[str]:
    return {f"{name}_{r}" for name in names for r in range(max_rank + 1)}


# ----------------------------------------------------------------------------------------------
# Cellular Transformer
# ----------------------------------------------------------------------------------------------
def _ct_keys(model: nn.Module, info: DatasetInfo) -> set[str]:
    keys = _rank_keys(info.max_rank, "x", "batch")
    if info.pe_channels is not None:
        keys |= _rank_keys(info.max_rank, "pe")
    return keys | {arrow.neighborhood for arrow in model.arrows}


@register_model("cellular_transformer", "cell", _ct_keys)
def build_cellular_transformer(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """Cellular Transformer sized for the data set (``params``: its keyword arguments)."""
    from topomodelx_attention.nn.cell import CellularTransformer

    params = dict(params)
    if "readout_ranks" in params and not isinstance(params["readout_ranks"], str):
        params["readout_ranks"] = tuple(params["readout_ranks"])
    return CellularTransformer(
        in_channels=info.in_channels,
        out_channels=info.out_channels,
        categorical=info.categorical,
        pe_channels=info.pe_channels,
        **params,
    )


# ----------------------------------------------------------------------------------------------
# GIN
# ----------------------------------------------------------------------------------------------
class GINBaseline(nn.Module):
    """GIN on the graph (``edge_index``, ``x_0``): encoder, ``torch_geometric.nn.GIN``, pool, MLP.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (``x_0`` width and categories, output width).
    hidden_channels : int, default=32
        Width.
    n_layers : int, default=3
        GIN layers.
    dropout : float, default=0.0
        Dropout inside GIN and the readout.
    readout_layers : int, default=1
        Hidden layers of the readout MLP.
    pooling : {"sum", "mean"}, default="sum"
        Global pooling.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        n_layers: int = 3,
        dropout: float = 0.0,
        readout_layers: int = 1,
        pooling: str = "sum",
    ) -> None:
        super().__init__()
        from torch_geometric.nn import GIN

        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be 'sum' or 'mean', got {pooling!r}")
        self.pooling = pooling
        self.encoder = FeatureEncoder(info.in_channels[0], hidden_channels, info.categorical[0])
        self.gin = GIN(hidden_channels, hidden_channels, int(n_layers), dropout=dropout)
        self.readout = ReadoutMLP(hidden_channels, info.out_channels, readout_layers, dropout)

    def forward(self, batch: Any) -> Tensor:
        """Predict.

        Parameters
        ----------
        batch : ComplexData
            Needs ``x_0``, ``edge_index``, ``batch_0``.

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            Predictions.
        """
        h = self.gin(self.encoder(batch.x_0), batch.edge_index)
        return self.readout(segment_pool(h, batch.batch_0, batch.num_complexes, self.pooling))


@register_model("gin", "graph", lambda model, info: {"x_0", "batch_0", "edge_index"})
def build_gin(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """GIN baseline (``params``: :class:`GINBaseline` arguments)."""
    return GINBaseline(info, **params)


# ----------------------------------------------------------------------------------------------
# CWN (TopoModelX)
# ----------------------------------------------------------------------------------------------
class CWNBaseline(nn.Module):
    """TopoModelX's CW Network on cell complexes: encoders, ``CWN``, sum pool of all ranks, MLP.

    ``CWN.forward(x_0, x_1, x_2, adjacency_0, incidence_2, incidence_1_t)`` updates the edges
    from their upper-adjacent edges (``adjacency_0`` = our edge upper adjacency
    ``adjacency_1``) and 2-cells (``incidence_2``) and from their vertices
    (``incidence_1_t`` = ``incidence_1ᵀ``), as TopoBench's CWN wrapper calls it.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (ranks 0..2).
    hidden_channels : int, default=32
        Width.
    n_layers : int, default=2
        CWN layers.
    dropout : float, default=0.0
        Dropout before the readout.
    readout_layers : int, default=1
        Hidden layers of the readout MLP.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        n_layers: int = 2,
        dropout: float = 0.0,
        readout_layers: int = 1,
    ) -> None:
        super().__init__()
        from topomodelx.nn.cell.cwn import CWN

        if info.max_rank != 2:
            raise ValueError(f"CWN needs 2-dimensional complexes, got max_rank={info.max_rank}")
        h = int(hidden_channels)
        self.encoders = _encoders(info, h, range(3))
        self.cwn = CWN(h, h, h, h, int(n_layers))
        self.dropout = nn.Dropout(dropout)
        self.readout = ReadoutMLP(h, info.out_channels, readout_layers, dropout)

    def forward(self, batch: Any) -> Tensor:
        """Predict.

        Parameters
        ----------
        batch : ComplexData
            Needs ``x_r``, ``batch_r`` (r = 0..2), ``adjacency_1``, ``incidence_1``, ``incidence_2``.

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            Predictions.
        """
        x = [enc(batch[f"x_{r}"]) for r, enc in enumerate(self.encoders)]
        out = self.cwn(
            x[0], x[1], x[2],
            adjacency_0=batch.adjacency_1,
            incidence_2=batch.incidence_2,
            incidence_1_t=batch.incidence_1.t().coalesce(),
        )
        size = batch.num_complexes
        pooled = sum(segment_pool(h, batch[f"batch_{r}"], size) for r, h in enumerate(out))
        return self.readout(self.dropout(pooled))


@register_model(
    "cwn",
    "cell",
    lambda model, info: _rank_keys(2, "x", "batch") | {"adjacency_1", "incidence_1", "incidence_2"},
)
def build_cwn(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """CWN baseline (``params``: :class:`CWNBaseline` arguments)."""
    return CWNBaseline(info, **params)


# ----------------------------------------------------------------------------------------------
# SCCNN (TopoModelX)
# ----------------------------------------------------------------------------------------------
class SCCNNBaseline(nn.Module):
    """TopoModelX's SCCNN on simplicial (clique) complexes: encoders, ``SCCNN``, pool, MLP.

    ``SCCNN.forward(x_all, laplacian_all, incidence_all)`` with ``laplacian_all = (L_0,
    L_1^down, L_1^up, L_2)`` (our ``hodge_laplacian_0``, ``down_laplacian_1``,
    ``up_laplacian_1``, ``hodge_laplacian_2``) and ``incidence_all = (B_1, B_2)`` (signed).
    TopoModelX's layer builds dense identity matrices and CPU buffers: a CPU baseline.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (ranks 0..2).
    hidden_channels : int, default=32
        Width (all ranks).
    n_layers : int, default=2
        SCCNN layers.
    conv_order : int, default=1
        Order of the simplicial filters.
    update_func : {"relu", "sigmoid"} or None, default="relu"
        Activation of the layers.
    aggr_norm : bool, default=False
        Normalise aggregations by the neighbourhood size.
    dropout : float, default=0.0
        Dropout before the readout.
    readout_layers : int, default=1
        Hidden layers of the readout MLP.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        n_layers: int = 2,
        conv_order: int = 1,
        update_func: str | None = "relu",
        aggr_norm: bool = False,
        dropout: float = 0.0,
        readout_layers: int = 1,
    ) -> None:
        super().__init__()
        from topomodelx.nn.simplicial.sccnn import SCCNN

        if info.max_rank != 2:
            raise ValueError(f"SCCNN needs 2-dimensional complexes, got max_rank={info.max_rank}")
        if int(conv_order) < 1:
            raise ValueError(f"conv_order must be at least 1, got {conv_order}")
        h = int(hidden_channels)
        self.encoders = _encoders(info, h, range(3))
        self.sccnn = SCCNN((h, h, h), (h, h, h), int(conv_order), 2, aggr_norm, update_func, int(n_layers))
        self.dropout = nn.Dropout(dropout)
        self.readout = ReadoutMLP(h, info.out_channels, readout_layers, dropout)

    def forward(self, batch: Any) -> Tensor:
        """Predict.

        Parameters
        ----------
        batch : ComplexData
            Needs ``x_r``, ``batch_r``, the Laplacians and signed incidences listed above.

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            Predictions.
        """
        x = tuple(enc(batch[f"x_{r}"]) for r, enc in enumerate(self.encoders))
        laplacians = (
            batch.hodge_laplacian_0, batch.down_laplacian_1, batch.up_laplacian_1, batch.hodge_laplacian_2,
        )
        incidences = (batch.signed_incidence_1, batch.signed_incidence_2)
        out = self.sccnn(x, laplacians, incidences)
        size = batch.num_complexes
        pooled = sum(segment_pool(h, batch[f"batch_{r}"], size) for r, h in enumerate(out))
        return self.readout(self.dropout(pooled))


@register_model(
    "sccnn",
    "simplicial",
    lambda model, info: _rank_keys(2, "x", "batch")
    | {"hodge_laplacian_0", "down_laplacian_1", "up_laplacian_1", "hodge_laplacian_2"}
    | {"signed_incidence_1", "signed_incidence_2"},
)
def build_sccnn(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """SCCNN baseline (``params``: :class:`SCCNNBaseline` arguments)."""
    return SCCNNBaseline(info, **params)


# ----------------------------------------------------------------------------------------------
# TokenGT (order-k tokens: nodes + edges on the 1-skeleton, every cell on a cell complex)
# ----------------------------------------------------------------------------------------------
def _tokengt_keys(model: nn.Module, info: DatasetInfo) -> set[str]:
    return _rank_keys(info.max_rank, "x", "batch", "incidence") | {"node_id"}


def build_tokengt(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """Order-k TokenGT; its node identifiers come from ``model.pe`` (``LaplacianNodeId``/``OrthogonalRandomNodeId``).

    On the 1-skeleton (``tokengt``) this is TokenGT with one token per node and per undirected
    edge (paper A.5); on a cell complex (``tokengt_cell``) every cell is a token.
    """
    from topomodelx_attention.nn.graph import OrderKTokenGT

    if info.pe_channels is None:
        raise ValueError(
            "TokenGT needs node identifiers: set model.pe to LaplacianNodeId or OrthogonalRandomNodeId"
        )
    return OrderKTokenGT(
        in_channels=info.in_channels,
        out_channels=info.out_channels,
        categorical=info.categorical,
        node_id_dim=info.pe_channels,
        **params,
    )


register_model("tokengt", "graph", _tokengt_keys)(build_tokengt)
register_model("tokengt_cell", "cell", _tokengt_keys)(build_tokengt)


# ----------------------------------------------------------------------------------------------
# N-simplicial transformer (vertex tokens attending to the simplices of the clique complex)
# ----------------------------------------------------------------------------------------------
@register_model(
    "n_simplicial",
    "simplicial",
    lambda model, info: {"x_0", "batch_0"} | {f"incidence_{r}" for r in range(1, info.max_rank + 1)},
)
def build_n_simplicial(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """2-simplicial transformer on the vertices; triangles (and edges, via the key/value bias) as tuples."""
    from topomodelx_attention.nn.simplicial import NSimplicialTransformer

    params = dict(params)
    categories = info.categorical[0]
    return NSimplicialTransformer(
        in_channels=info.in_channels[0],
        out_channels=info.out_channels,
        num_categories=None if categories is None else max(categories),
        **params,
    )

