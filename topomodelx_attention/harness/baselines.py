"""Baselines of the benchmark harness: GIN, GINE, GPS, a graph transformer, CWN and SCCNN.

Every baseline maps a (batched) :class:`~topomodelx_attention.data.ComplexData` to one prediction
per complex, ``(num_complexes, out_channels)``, or one per vertex with ``outputs="node"``
(node-level tasks: the readout MLP on every vertex, no pooling), and registers itself in
:data:`~topomodelx_attention.harness.models.MODELS` under its config name (``gin``, ``gine``,
``gps``, ``graph_transformer``, ``cwn``, ``sccnn``).

The graph baselines with edge features (``gine``, ``gps``, ``graph_transformer``) read the
rank-0/1 part of a lifted complex: ``x_0`` (nodes), ``x_1`` (edges, as edge features) and the
graph given by ``incidence_1`` (:func:`edge_graph`); their positional encoding is ``pe_0``,
written by the ``model.pe`` transform of their YAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.harness.datasets import DatasetInfo
from topomodelx_attention.harness.models import (
    check_outputs,
    rank_encoders,
    rank_keys,
    register_model,
    task_outputs,
)
from topomodelx_attention.nn.common import (
    POOLINGS,
    FeatureEncoder,
    ReadoutMLP,
    check_inputs,
    check_rows,
    segment_pool,
)

__all__ = [
    "CWNBaseline",
    "EdgeGraphBaseline",
    "GINBaseline",
    "GINEBaseline",
    "GPSBaseline",
    "GraphTransformerBaseline",
    "SCCNNBaseline",
    "edge_graph",
]


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
    check_inputs : bool, default=True
        Reject NaN/Inf/huge float inputs once per forward.
    outputs : {"complex", "node"}, default="complex"
        One prediction per complex, or per vertex (the readout MLP on every vertex, no pooling).
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        n_layers: int = 3,
        dropout: float = 0.0,
        readout_layers: int = 1,
        pooling: str = "sum",
        check_inputs: bool = True,
        outputs: str = "complex",
    ) -> None:
        super().__init__()
        from torch_geometric.nn import GIN

        self.check_inputs = bool(check_inputs)
        self.outputs = check_outputs(outputs)

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
            Predictions (``outputs="node"``: ``(n_0, out_channels)``).
        """
        check_rows({"x_0": (batch.x_0, batch.batch_0.numel())})
        if self.check_inputs:
            check_inputs({"x_0": batch.x_0})
        h = self.gin(self.encoder(batch.x_0), batch.edge_index)
        if self.outputs == "node":
            return self.readout(h)
        return self.readout(segment_pool(h, batch.batch_0, batch.num_complexes, self.pooling))


@register_model("gin", "graph", lambda model, info: {"x_0", "batch_0", "edge_index"})
def build_gin(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """GIN baseline (``params``: :class:`GINBaseline` arguments)."""
    params = dict(params)
    outputs = task_outputs(params, info)
    return GINBaseline(info, **params, outputs=outputs)


# ----------------------------------------------------------------------------------------------
# graph baselines with edge features: GINE, GPS, graph transformer
# ----------------------------------------------------------------------------------------------
def edge_graph(incidence_1: Tensor) -> tuple[Tensor, Tensor]:
    """Directed graph of the 1-skeleton: both orientations of every edge (1-cell).

    Parameters
    ----------
    incidence_1 : torch.Tensor, shape = (n_0, n_1)
        Unsigned vertex–edge incidence (sparse COO; block-diagonal for a batch): exactly two
        vertices per edge.

    Returns
    -------
    edge_index : torch.Tensor, shape = (2, 2 * n_1)
        ``[u_e, v_e]`` for every edge ``e``, then ``[v_e, u_e]`` (source row 0, target row 1).
    edge_id : torch.Tensor, shape = (2 * n_1,)
        Edge (column of ``incidence_1``) of every directed edge, to gather ``x_1``.

    Raises
    ------
    ValueError
        If an edge does not have exactly two vertices (self-loops, hyperedges).
    """
    incidence = incidence_1 if incidence_1.is_coalesced() else incidence_1.coalesce()
    n_edges = incidence.shape[1]
    vertices, edges = incidence.indices()
    if vertices.numel() != 2 * n_edges or bool((torch.bincount(edges, minlength=n_edges) != 2).any()):
        raise ValueError(
            "incidence_1 must have exactly two vertices per edge (a graph without self-loops); "
            "lift with self_loops='drop'"
        )
    ends = vertices[torch.argsort(edges, stable=True)].view(n_edges, 2)
    source, target = ends[:, 0], ends[:, 1]
    edge_index = torch.stack([torch.cat([source, target]), torch.cat([target, source])])
    edge_id = torch.arange(n_edges, device=incidence.device).repeat(2)
    return edge_index, edge_id


def _edge_graph_keys(model: nn.Module, info: DatasetInfo) -> set[str]:
    keys = {"x_0", "x_1", "batch_0", "incidence_1"}
    return keys | ({"pe_0"} if info.pe_channels is not None else set())


class EdgeGraphBaseline(nn.Module):
    """Shared frame of the graph baselines with edge features (GINE, GPS, graph transformer).

    ``h_0 = [enc_0(x_0) ‖ Linear(BatchNorm(pe_0))]`` (the PE branch only when the data set has
    ``pe_0``, as GraphGPS's RWSE/LapPE node encoders), ``e = enc_1(x_1)`` copied to both
    orientations of every edge, the subclass's layers ``h = layers(h_0, edge_index, e,
    batch_0)``, then ``segment_pool`` per complex and the :class:`ReadoutMLP`.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (``x_0``/``x_1`` widths and categories, ``pe_channels``, output width).
    hidden_channels : int
        Width.
    pe_hidden_channels : int
        Columns of ``h_0`` given to the encoded PE (ignored without ``pe_0``).
    dropout : float
        Dropout before the readout and inside the readout MLP.
    readout_layers : int
        Hidden layers of the readout MLP.
    pooling : {"sum", "mean"}
        Global pooling.
    check_inputs : bool
        Reject NaN/Inf/huge float inputs once per forward (:func:`~topomodelx_attention.nn.common.check_inputs`).
    outputs : {"complex", "node"}, default="complex"
        One prediction per complex, or per vertex (the readout MLP on every vertex, no pooling).
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int,
        *,
        pe_hidden_channels: int,
        dropout: float,
        readout_layers: int,
        pooling: str,
        check_inputs: bool,
        outputs: str = "complex",
    ) -> None:
        super().__init__()
        self.outputs = check_outputs(outputs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be 'sum' or 'mean', got {pooling!r}")
        h = int(hidden_channels)
        pe = info.pe_channels
        pe_width = int(pe_hidden_channels) if pe is not None else 0
        if pe is not None and not 0 < pe_width < h:
            raise ValueError(f"pe_hidden_channels must be in 1..{h - 1} (hidden_channels={h}), got {pe_hidden_channels}")
        self.hidden_channels = h
        self.pooling = pooling
        self.check_inputs = bool(check_inputs)
        self.node_encoder = FeatureEncoder(info.in_channels[0], h - pe_width, info.categorical[0], name="x_0")
        self.edge_encoder = FeatureEncoder(info.in_channels[1], h, info.categorical[1], name="x_1")
        self.pe_encoder = (
            nn.Sequential(nn.BatchNorm1d(pe), nn.Linear(pe, pe_width)) if pe is not None else None
        )
        self.dropout = nn.Dropout(dropout)
        self.readout = ReadoutMLP(h, info.out_channels, readout_layers, dropout)

    def layers(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:
        """Node states after the message-passing / attention layers (implemented by subclasses).

        Parameters
        ----------
        x : torch.Tensor, shape = (n_0, hidden_channels)
            Encoded nodes.
        edge_index : torch.Tensor, shape = (2, 2 * n_1)
            Both orientations of every edge.
        edge_attr : torch.Tensor, shape = (2 * n_1, hidden_channels)
            Encoded edge features.
        batch : torch.Tensor, shape = (n_0,)
            Complex of every node.

        Returns
        -------
        torch.Tensor, shape = (n_0, hidden_channels)
        """
        raise NotImplementedError

    def forward(self, batch: Any) -> Tensor:
        """Predict.

        Parameters
        ----------
        batch : ComplexData
            Needs ``x_0``, ``x_1``, ``batch_0``, ``incidence_1`` (and ``pe_0`` with a PE).

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            Predictions (zeros-pooled rows for complexes without nodes); ``outputs="node"``:
            ``(n_0, out_channels)``.
        """
        pe = batch.pe_0 if self.pe_encoder is not None else None
        n_0, n_1 = batch.incidence_1.shape
        check_rows({"x_0": (batch.x_0, n_0), "batch_0": (batch.batch_0, n_0), "x_1": (batch.x_1, n_1), "pe_0": (pe, n_0)})
        if self.check_inputs:
            check_inputs({"x_0": batch.x_0, "x_1": batch.x_1, "pe_0": pe})
        x = self.node_encoder(batch.x_0)
        if pe is not None:
            if not pe.is_floating_point():
                raise TypeError(f"pe_0 must be a float positional encoding, got dtype {pe.dtype}")
            x = torch.cat([x, self.pe_encoder(pe.to(x.dtype))], dim=-1)
        edge_index, edge_id = edge_graph(batch.incidence_1)
        edge_attr = self.edge_encoder(batch.x_1)[edge_id]
        # a batch of complexes without vertices: nothing to update (GPSConv cannot take 0 rows)
        h = self.layers(x, edge_index, edge_attr, batch.batch_0) if n_0 else x
        if self.outputs == "node":
            return self.readout(self.dropout(h))
        pooled = segment_pool(h, batch.batch_0, batch.num_complexes, self.pooling)
        return self.readout(self.dropout(pooled))


def _check_depth(n_layers: int, width: int, heads: int | None = None) -> tuple[int, int | None]:
    """Return ``(n_layers, heads)`` as ints; raise unless ``n_layers >= 1`` and ``heads`` divides ``width``."""
    if int(n_layers) < 1:
        raise ValueError(f"n_layers must be at least 1, got {n_layers}")
    if heads is not None and (int(heads) < 1 or width % int(heads)):
        raise ValueError(f"heads must divide hidden_channels={width}, got {heads}")
    return int(n_layers), None if heads is None else int(heads)


def _gin_mlp(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Linear(width, width))


class GINEBaseline(EdgeGraphBaseline):
    """GIN with edge features (Hu et al., 2020; ``torch_geometric.nn.GINEConv``), ZINC's standard MPNN.

    ``h ← MLP((1 + ε) h_v + Σ_u ReLU(h_u + e_uv))`` per layer, then BatchNorm, ReLU and dropout
    between layers (as ``torch_geometric.nn.GIN``).

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes.
    hidden_channels : int, default=32
        Width.
    n_layers : int, default=3
        GINE layers.
    dropout : float, default=0.0
        Dropout between layers and in the readout.
    readout_layers : int, default=1
        Hidden layers of the readout MLP.
    pooling : {"sum", "mean"}, default="sum"
        Global pooling.
    pe_hidden_channels : int, default=8
        Width of the encoded PE (only with ``pe_0``).
    check_inputs : bool, default=True
        Validate float inputs once per forward.
    outputs : {"complex", "node"}, default="complex"
        One prediction per complex, or per vertex.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        *,
        n_layers: int = 3,
        dropout: float = 0.0,
        readout_layers: int = 1,
        pooling: str = "sum",
        pe_hidden_channels: int = 8,
        check_inputs: bool = True,
        outputs: str = "complex",
    ) -> None:
        super().__init__(
            info, hidden_channels, pe_hidden_channels=pe_hidden_channels, dropout=dropout,
            readout_layers=readout_layers, pooling=pooling, check_inputs=check_inputs,
            outputs=outputs,
        )
        from torch_geometric.nn import GINEConv

        h = self.hidden_channels
        n_layers, _ = _check_depth(n_layers, h)
        self.convs = nn.ModuleList(GINEConv(_gin_mlp(h), train_eps=True) for _ in range(n_layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(h) for _ in range(n_layers - 1))
        self.layer_dropout = nn.Dropout(dropout)

    def layers(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:  # noqa: D102
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index, edge_attr)
            if i < len(self.norms):
                x = self.layer_dropout(torch.relu(self.norms[i](x)))
        return x


class GPSBaseline(EdgeGraphBaseline):
    """GraphGPS (Rampášek et al., 2022; ``torch_geometric.nn.GPSConv``) with RWSE.

    Each layer adds a local GINE message-passing update and a global multi-head attention
    update over all nodes of the complex (``attn_type="multihead"``, dense per graph), each with
    residual and BatchNorm, then an FFN (PyG's ``GPSConv``). The positional encoding is the
    data set's ``pe_0``: RWSE (return probabilities of the random walk, ``gps.yaml``) or LapPE.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes.
    hidden_channels : int, default=32
        Width.
    n_layers : int, default=2
        GPS layers.
    heads : int, default=4
        Attention heads (must divide ``hidden_channels``).
    dropout : float, default=0.0
        Dropout on the outputs of the local, global and FFN blocks (and the readout).
    attention_dropout : float, default=0.1
        Dropout on the attention weights.
    kind : {"dense", "linear"}, default="dense"
        Global attention of ``GPSConv``: ``"dense"`` softmax multi-head attention
        (``attn_type="multihead"``) or ``"linear"`` Performer (``attn_type="performer"``), the
        package's attention-kind names.
    readout_layers : int, default=1
        Hidden layers of the readout MLP.
    pooling : {"sum", "mean"}, default="sum"
        Global pooling.
    pe_hidden_channels : int, default=8
        Width of the encoded PE (only with ``pe_0``).
    check_inputs : bool, default=True
        Validate float inputs once per forward.
    outputs : {"complex", "node"}, default="complex"
        One prediction per complex, or per vertex.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        *,
        n_layers: int = 2,
        heads: int = 4,
        dropout: float = 0.0,
        attention_dropout: float = 0.1,
        kind: str = "dense",
        readout_layers: int = 1,
        pooling: str = "sum",
        pe_hidden_channels: int = 8,
        check_inputs: bool = True,
        outputs: str = "complex",
    ) -> None:
        super().__init__(
            info, hidden_channels, pe_hidden_channels=pe_hidden_channels, dropout=dropout,
            readout_layers=readout_layers, pooling=pooling, check_inputs=check_inputs,
            outputs=outputs,
        )
        from torch_geometric.nn import GINEConv, GPSConv

        h = self.hidden_channels
        n_layers, heads = _check_depth(n_layers, h, heads)
        attn_types = {"dense": "multihead", "linear": "performer"}
        if kind not in attn_types:
            raise ValueError(f"kind must be 'dense' or 'linear', got {kind!r}")
        kwargs = {"dropout": float(attention_dropout)} if kind == "dense" else {}
        self.convs = nn.ModuleList(
            GPSConv(h, GINEConv(_gin_mlp(h)), heads=heads, dropout=float(dropout),
                    attn_type=attn_types[kind], attn_kwargs=kwargs)
            for _ in range(n_layers)
        )

    def layers(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:  # noqa: D102
        for conv in self.convs:
            x = conv(x, edge_index, batch, edge_attr=edge_attr)
        return x


class _TransformerConvBlock(nn.Module):
    """``h ← LN(h + Drop(TransformerConv(h, e)))``, ``h ← LN(h + Drop(FFN(h)))`` (post-norm)."""

    def __init__(self, width: int, heads: int, dropout: float, attention_dropout: float) -> None:
        super().__init__()
        from torch_geometric.nn import TransformerConv

        self.conv = TransformerConv(width, width // heads, heads=heads, dropout=attention_dropout, edge_dim=width)
        self.norm_attention = nn.LayerNorm(width)
        self.ffn = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Dropout(dropout), nn.Linear(2 * width, width))
        self.norm_ffn = nn.LayerNorm(width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        x = self.norm_attention(x + self.dropout(self.conv(x, edge_index, edge_attr)))
        return self.norm_ffn(x + self.dropout(self.ffn(x)))


class GraphTransformerBaseline(EdgeGraphBaseline):
    """Sparse graph transformer: a stack of ``torch_geometric.nn.TransformerConv`` blocks.

    Every node attends to its graph neighbours (keys and values get the encoded edge features,
    Shi et al., 2021), as the graph transformer of Dwivedi & Bresson (2021) on the 1-skeleton:
    attention, residual, LayerNorm, FFN (width ``2 × hidden``), residual, LayerNorm. Its usual
    positional encoding is LapPE (``graph_transformer.yaml``: ``HodgeLaplacianPE`` on the
    1-skeleton, whose ``pe_0`` are Laplacian eigenvectors, with random sign flips in training).

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes.
    hidden_channels : int, default=32
        Width.
    n_layers : int, default=2
        Transformer blocks.
    heads : int, default=4
        Attention heads (must divide ``hidden_channels``).
    dropout : float, default=0.0
        Dropout on the attention and FFN block outputs (and the readout).
    attention_dropout : float, default=0.1
        Dropout on the attention weights.
    readout_layers : int, default=1
        Hidden layers of the readout MLP.
    pooling : {"sum", "mean"}, default="sum"
        Global pooling.
    pe_hidden_channels : int, default=8
        Width of the encoded PE (only with ``pe_0``).
    check_inputs : bool, default=True
        Validate float inputs once per forward.
    outputs : {"complex", "node"}, default="complex"
        One prediction per complex, or per vertex.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        *,
        n_layers: int = 2,
        heads: int = 4,
        dropout: float = 0.0,
        attention_dropout: float = 0.1,
        readout_layers: int = 1,
        pooling: str = "sum",
        pe_hidden_channels: int = 8,
        check_inputs: bool = True,
        outputs: str = "complex",
    ) -> None:
        super().__init__(
            info, hidden_channels, pe_hidden_channels=pe_hidden_channels, dropout=dropout,
            readout_layers=readout_layers, pooling=pooling, check_inputs=check_inputs,
            outputs=outputs,
        )
        h = self.hidden_channels
        n_layers, heads = _check_depth(n_layers, h, heads)
        self.blocks = nn.ModuleList(
            _TransformerConvBlock(h, heads, float(dropout), float(attention_dropout))
            for _ in range(n_layers)
        )

    def layers(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:  # noqa: D102
        for block in self.blocks:
            x = block(x, edge_index, edge_attr)
        return x


@register_model("gine", "graph", _edge_graph_keys)
def build_gine(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """GINE baseline (``params``: :class:`GINEBaseline` keyword arguments)."""
    params = dict(params)
    outputs = task_outputs(params, info)
    return GINEBaseline(info, **params, outputs=outputs)


@register_model("gps", "graph", _edge_graph_keys)
def build_gps(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """GPS baseline (``params``: :class:`GPSBaseline` keyword arguments)."""
    params = dict(params)
    outputs = task_outputs(params, info)
    return GPSBaseline(info, **params, outputs=outputs)


@register_model("graph_transformer", "graph", _edge_graph_keys)
def build_graph_transformer(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """Sparse graph transformer baseline (``params``: :class:`GraphTransformerBaseline` keyword arguments)."""
    params = dict(params)
    outputs = task_outputs(params, info)
    return GraphTransformerBaseline(info, **params, outputs=outputs)


def _check_ranks(batch: Any, finite: bool) -> None:
    """Rows of ``x_r`` match ``batch_r`` (r = 0..2) and, with ``finite``, values are finite."""
    check_rows({f"x_{r}": (batch[f"x_{r}"], batch[f"batch_{r}"].numel()) for r in range(3)})
    if finite:
        check_inputs({f"x_{r}": batch[f"x_{r}"] for r in range(3)})


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
    check_inputs : bool, default=True
        Reject NaN/Inf/huge float inputs and feature rows that do not match the cells, once
        per forward.
    outputs : {"complex", "node"}, default="complex"
        One prediction per complex, or per vertex. TopoModelX's CWN updates only the edges
        (its vertex states are the projected inputs), so a vertex reads the final states
        propagated down the incidences: ``h_0 + B_1 (h_1 + B_2 h_2)`` with the unsigned
        ``B_1 = incidence_1``, ``B_2 = incidence_2`` (as TopoBench's signal-down readout,
        summed), then the readout MLP.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        n_layers: int = 2,
        dropout: float = 0.0,
        readout_layers: int = 1,
        check_inputs: bool = True,
        outputs: str = "complex",
    ) -> None:
        super().__init__()
        from topomodelx.nn.cell.cwn import CWN

        self.check_inputs = bool(check_inputs)
        self.outputs = check_outputs(outputs)

        if info.max_rank != 2:
            raise ValueError(f"CWN needs 2-dimensional complexes, got max_rank={info.max_rank}")
        h = int(hidden_channels)
        self.encoders = rank_encoders(info, h, range(3))
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
            Predictions (``outputs="node"``: ``(n_0, out_channels)``).
        """
        _check_ranks(batch, self.check_inputs)
        x = [enc(batch[f"x_{r}"]) for r, enc in enumerate(self.encoders)]
        out = self.cwn(
            x[0], x[1], x[2],
            adjacency_0=batch.adjacency_1,
            incidence_2=batch.incidence_2,
            incidence_1_t=batch.incidence_1.t().coalesce(),
        )
        if self.outputs == "node":  # the edge (and 2-cell) states down to their vertices
            edges = out[1] + torch.sparse.mm(batch.incidence_2, out[2])
            return self.readout(self.dropout(out[0] + torch.sparse.mm(batch.incidence_1, edges)))
        size = batch.num_complexes
        pooled = sum(segment_pool(h, batch[f"batch_{r}"], size) for r, h in enumerate(out))
        return self.readout(self.dropout(pooled))


@register_model(
    "cwn",
    "cell",
    lambda model, info: rank_keys(2, "x", "batch") | {"adjacency_1", "incidence_1", "incidence_2"},
)
def build_cwn(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """CWN baseline (``params``: :class:`CWNBaseline` arguments)."""
    params = dict(params)
    outputs = task_outputs(params, info)
    return CWNBaseline(info, **params, outputs=outputs)


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
    check_inputs : bool, default=True
        Reject NaN/Inf/huge float inputs and feature rows that do not match the cells, once
        per forward.
    outputs : {"complex", "node"}, default="complex"
        One prediction per complex, or per vertex (the readout MLP on the final vertex states,
        which SCCNN updates from the edges and triangles).
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
        check_inputs: bool = True,
        outputs: str = "complex",
    ) -> None:
        super().__init__()
        from topomodelx.nn.simplicial.sccnn import SCCNN

        self.check_inputs = bool(check_inputs)
        self.outputs = check_outputs(outputs)

        if info.max_rank != 2:
            raise ValueError(f"SCCNN needs 2-dimensional complexes, got max_rank={info.max_rank}")
        if int(conv_order) < 1:
            raise ValueError(f"conv_order must be at least 1, got {conv_order}")
        h = int(hidden_channels)
        self.encoders = rank_encoders(info, h, range(3))
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
            Predictions (``outputs="node"``: ``(n_0, out_channels)``).
        """
        _check_ranks(batch, self.check_inputs)
        x = tuple(enc(batch[f"x_{r}"]) for r, enc in enumerate(self.encoders))
        laplacians = (
            batch.hodge_laplacian_0, batch.down_laplacian_1, batch.up_laplacian_1, batch.hodge_laplacian_2,
        )
        incidences = (batch.signed_incidence_1, batch.signed_incidence_2)
        out = self.sccnn(x, laplacians, incidences)
        if self.outputs == "node":
            return self.readout(self.dropout(out[0]))
        size = batch.num_complexes
        pooled = sum(segment_pool(h, batch[f"batch_{r}"], size) for r, h in enumerate(out))
        return self.readout(self.dropout(pooled))


@register_model(
    "sccnn",
    "simplicial",
    lambda model, info: rank_keys(2, "x", "batch")
    | {"hodge_laplacian_0", "down_laplacian_1", "up_laplacian_1", "hodge_laplacian_2"}
    | {"signed_incidence_1", "signed_incidence_2"},
)
def build_sccnn(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
    """SCCNN baseline (``params``: :class:`SCCNNBaseline` arguments)."""
    params = dict(params)
    outputs = task_outputs(params, info)
    return SCCNNBaseline(info, **params, outputs=outputs)
