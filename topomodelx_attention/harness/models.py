"""The package's models in the harness's model registry (:mod:`~.registry`), and the baselines.

Every registered model maps a (batched) :class:`~topomodelx_attention.data.ComplexData` to one
prediction per complex, ``(num_complexes, out_channels)``. A :class:`ModelSpec` also says which
keys of the data the model reads, so that the harness can drop the others before batching.

===========================  ===========  ======================================================
name                         domain       model
===========================  ===========  ======================================================
``cellular_transformer``     cell         :class:`~topomodelx_attention.nn.cell.CellularTransformer`
``tokengt``                  graph        :class:`~topomodelx_attention.nn.graph.OrderKTokenGT` (1-skeleton)
``tokengt_cell``             cell         :class:`~topomodelx_attention.nn.graph.OrderKTokenGT` (all cells)
``n_simplicial``             simplicial   :class:`~topomodelx_attention.nn.simplicial.NSimplicialTransformer`
``mlp``                      graph        :class:`~.baselines.MLPBaseline` (vertex features only)
``gin``                      graph        :class:`~.baselines.GINBaseline` (``torch_geometric.nn.GIN``)
``gine``                     graph        :class:`~.baselines.EdgeGraphBaseline` (``torch_geometric.nn.GINEConv``)
``gps``                      graph        :class:`~.baselines.EdgeGraphBaseline` (``torch_geometric.nn.GPSConv``, RWSE)
``graph_transformer``        graph        :class:`~.baselines.EdgeGraphBaseline` (``TransformerConv``)
``cwn``                      cell         :class:`~.baselines.CWNBaseline` (TopoModelX ``CWN``)
``sccnn``                    simplicial   :class:`~.baselines.SCCNNBaseline` (TopoModelX ``SCCNN``)
===========================  ===========  ======================================================

Node-level tasks (``DatasetInfo.task_level`` ``"node"``, e.g. GraphUniverse community
detection, or ``"transductive"``, e.g. the heterophilous benchmark's one large graph) get node-level outputs of every model, ``(n_0, out_channels)``: option
``outputs="node"`` (``model.params.outputs``; its default follows the data set's task level).
The baselines skip the pooling and apply the readout MLP to every vertex (CWN first sums the
final states of the edges and 2-cells into their vertices: TopoModelX's CWN updates only the
edges); the family models return their rank-0 outputs (cell-level outputs are named by their
ranks): the Cellular Transformer its rank-0 readout (``CellularTransformer(outputs=(0,))``),
TokenGT its vertex tokens (``OrderKTokenGT(outputs=(0,))``), the N-simplicial transformer its
vertex tokens (``outputs="tokens"``).

The registry and the pieces every builder shares are in :mod:`~.registry` (re-exported here);
the baselines live in :mod:`~topomodelx_attention.harness.baselines` (imported here, so that
the registry always holds them). New models register a builder with :func:`register_model` and ship a
``configs/model/<domain>/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

# the baselines register themselves on import: importing this module fills the whole registry
from topomodelx_attention.harness import baselines as _baselines
from topomodelx_attention.harness import registry
from topomodelx_attention.harness.config import CONFIG_DIR, allow_harness_classes
from topomodelx_attention.harness.prepare import DatasetInfo
from topomodelx_attention.harness.registry import *  # noqa: F403  (the registry's names, re-exported)
from topomodelx_attention.harness.registry import (
    NodeOutputs,
    rank_keys,
    register_model,
    task_outputs,
)

__all__ = list(registry.__all__)


# ----------------------------------------------------------------------------------------------
# Cellular Transformer
# ----------------------------------------------------------------------------------------------
def _ct_keys(model: nn.Module, info: DatasetInfo) -> set[str]:
    keys = rank_keys(info.max_rank, "x", "batch")
    if info.pe_channels is not None:
        keys |= rank_keys(info.max_rank, "pe")
    return keys | set(NodeOutputs.unwrap(model).neighborhood_keys)


def _packaged_ct_readout() -> dict[str, Any]:
    """``readout_options`` ranks / before_pooling of the packaged CT config (graph-level readout)."""
    from omegaconf import OmegaConf

    params = OmegaConf.load(CONFIG_DIR / "model" / "cell" / "cellular_transformer.yaml").get("params") or {}
    readout = params.get("readout_options") or {}
    out: dict[str, Any] = {}
    if readout.get("ranks") is not None and tuple(readout["ranks"]) != (0,):
        out["ranks"] = tuple(readout["ranks"])
    if readout.get("before_pooling", True) is not True:
        out["before_pooling"] = readout["before_pooling"]
    return out


@register_model("cellular_transformer", "cell", _ct_keys)
def build_cellular_transformer(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """Cellular Transformer sized for the data set (``params``: its keyword arguments).

    Node-level tasks: the per-vertex readout (``outputs=(0,)``). The packaged config's
    graph-level readout (``readout_options`` ranks and before_pooling: its values in
    ``configs/model/cell/cellular_transformer.yaml``) then gives way to it; any other value of
    those options raises.
    """
    from topomodelx_attention.nn.cell import CellularTransformer

    params = dict(params)
    outputs = task_outputs(params, info)
    readout = params.get("readout_options")
    if isinstance(readout, Mapping):  # hydra lists → tuples; anything else: CT's own error
        readout = dict(readout)
        if readout.get("ranks") is not None and not isinstance(readout["ranks"], str):
            readout["ranks"] = tuple(readout["ranks"])
        params["readout_options"] = readout
    if outputs == "node":
        given = readout if isinstance(readout, Mapping) else {}
        for key, value in _packaged_ct_readout().items():
            if key in given and given[key] == value:
                given.pop(key)  # the packaged graph-level readout: the vertex readout replaces it
        if given.get("ranks") not in (None, (0,)):
            raise ValueError(
                "node-level outputs read the vertices: model.params.readout_options.ranks must be "
                f"[0], got {given['ranks']!r}"
            )
        if given.get("before_pooling", True) is not True:
            raise ValueError(
                "node-level outputs apply the readout MLP to every vertex: "
                "model.params.readout_options.before_pooling must be true"
            )
        given.pop("ranks", None)  # outputs=(0,) names the readout rank
        params.update(outputs=(0,))
    pe = params.get("pe_options")
    if isinstance(pe, Mapping) or pe is None:  # anything else: CT's own error
        if pe is not None and "channels" in pe:
            raise ValueError(
                "model.params.pe_options.channels comes from the data set's positional encoding "
                "(dataset pe.dim): leave it out of the model config"
            )
        params["pe_options"] = {**(pe or {}), "channels": info.pe_channels}
    model = CellularTransformer(
        in_channels=info.in_channels,
        out_channels=info.out_channels,
        categorical=info.categorical,
        **params,
    )
    return NodeOutputs(model) if outputs == "node" else model


# ----------------------------------------------------------------------------------------------
# TokenGT (order-k tokens: nodes + edges on the 1-skeleton, every cell on a cell complex)
# ----------------------------------------------------------------------------------------------
def _tokengt_keys(model: nn.Module, info: DatasetInfo) -> set[str]:
    return rank_keys(info.max_rank, "x", "batch", "incidence") | {"node_id"}


def build_tokengt(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """Order-k TokenGT; its node identifiers come from ``model.pe`` (``LaplacianNodeId``/``OrthogonalRandomNodeId``).

    On the 1-skeleton (``tokengt``) this is TokenGT with one token per node and per undirected
    edge (paper A.5); on a cell complex (``tokengt_cell``) every cell is a token. Node-level
    tasks: the readout of the vertex tokens (``outputs=(0,)``, :meth:`~.OrderKTokenGT.cell_outputs`).
    """
    from topomodelx_attention.nn.graph import OrderKTokenGT

    if info.node_id_channels is None:
        raise ValueError(
            "TokenGT needs node identifiers: set model.pe to LaplacianNodeId or OrthogonalRandomNodeId"
        )
    params = dict(params)
    outputs = task_outputs(params, info)
    model = OrderKTokenGT(
        in_channels=info.in_channels,
        out_channels=info.out_channels,
        categorical=info.categorical,
        node_id_dim=info.node_id_channels,
        outputs=(0,) if outputs == "node" else ("complex",),
        **params,
    )
    return NodeOutputs(model, "cell_outputs") if outputs == "node" else model


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
    """2-simplicial transformer on the vertices; triangles (and edges, via the key/value bias) as tuples.

    Node-level tasks: the readout of every vertex token (``outputs="tokens"``). The harness
    option ``readout_init`` (default ``"small"``, as the baselines':
    :func:`~.baselines.init_last_layer`) initialises the readout, so that the sum pooling of
    the vertex tokens starts near chance (``ln C``) whatever the size of the complexes.
    """
    from topomodelx_attention.nn.simplicial import NSimplicialTransformer

    params = dict(params)
    outputs = task_outputs(params, info)
    readout_init = params.pop("readout_init", "small")
    model = NSimplicialTransformer(
        in_channels=info.in_channels[0],
        out_channels=info.out_channels,
        categorical=info.categorical[0],
        outputs="tokens" if outputs == "node" else "complex",
        **params,
    )
    _baselines.init_last_layer(model.readout, readout_init)
    return model


# the allow-list of configuration _target_s holds this module's model classes
allow_harness_classes(__name__)
