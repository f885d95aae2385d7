"""Baselines of the benchmark harness: an MLP, GIN, GINE, GPS, a graph transformer, CWN and SCCNN.

Every baseline maps a (batched) :class:`~topomodelx_attention.data.ComplexData` to one prediction
per complex, ``(num_complexes, out_channels)``, or one per vertex with ``outputs="node"``
(node-level tasks: the readout MLP on every vertex, no pooling), and registers itself in
:data:`~topomodelx_attention.harness.registry.MODELS` under its config name (``mlp``, ``gin``,
``gine``, ``gps``, ``graph_transformer``, ``cwn``, ``sccnn``). The MLP reads the vertex
features only (no edge): the reference every graph model must beat.

The graph baselines with edge features (``gine``, ``gps``, ``graph_transformer``) read the
rank-0/1 part of a lifted complex: ``x_0`` (nodes), ``x_1`` (edges, as edge features) and the
graph given by ``incidence_1`` (:func:`edge_graph`); their positional encoding is ``pe_0``,
written by the ``model.pe`` transform of their YAML. They are one class,
:class:`EdgeGraphBaseline`, whose ``conv`` names the block.

Every baseline is a :class:`Baseline`: it builds its encoders and its stack of conv blocks and
gives its final cell states; the shared frame checks the inputs and reads them out (pooling per
complex or one row per vertex, dropout, :class:`~topomodelx_attention.nn.common.ReadoutMLP`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

import torch
from torch import Tensor, nn

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.harness.config import allow_harness_classes
from topomodelx_attention.harness.prepare import DatasetInfo
from topomodelx_attention.harness.registry import (
    check_outputs,
    rank_encoders,
    rank_keys,
    register_model,
    task_outputs,
)
from topomodelx_attention.nn.attention import KERNELS, DenseKernel, LinearKernel
from topomodelx_attention.nn.cell.cellular_transformer import READOUT_INITS, SMALL_READOUT_GAIN
from topomodelx_attention.nn.common import (
    POOLINGS,
    FeatureEncoder,
    ReadoutMLP,
    check_inputs,
    check_rows,
    segment_pool,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "EDGE_GRAPH_CONVS",
    "Baseline",
    "BaselineOptions",
    "CWNBaseline",
    "EdgeGraphBaseline",
    "GINBaseline",
    "MLPBaseline",
    "PooledBaselineOptions",
    "RankBaselineOptions",
    "SCCNNBaseline",
    "edge_graph",
    "init_last_layer",
]


class BaselineOptions(TypedDict, total=False):
    """The keyword options every baseline takes: :class:`Baseline`'s (and its defaults)."""

    n_layers: int | None
    dropout: float
    readout_layers: int
    check_inputs: bool
    outputs: str
    readout_init: str


class PooledBaselineOptions(BaselineOptions, total=False):
    """:class:`BaselineOptions` and ``pooling``: the options of the baselines that choose their pooling."""

    pooling: str


class RankBaselineOptions(BaselineOptions, total=False):
    """:class:`BaselineOptions` and the per-rank LayerNorms of CWN and SCCNN (which always sum)."""

    embedding_norm: bool
    final_norm: bool


@fill_doc
class Baseline(nn.Module):
    """Shared frame of the baselines: options, input checks and the readout of their cell states.

    A baseline builds its encoders and its stack of conv blocks and gives :meth:`cell_states`
    (the final states of every rank it updates, rank 0 first); this class reads them out:
    ``outputs="complex"`` pools every rank per complex (``segment_pool``) and sums the ranks,
    ``outputs="node"`` takes the vertex states (:meth:`node_states`), both then through dropout
    and the :class:`ReadoutMLP`.

    Parameters
    ----------
    hidden_channels : int
        Width of the cell states.
    %(baseline_options)s

    Raises
    ------
    ValueError
        For an unknown ``pooling``, ``outputs`` or ``readout_init``.
    """

    #: ``n_layers`` of the baseline when given ``None`` (``None``: the baseline decides, e.g. by its ``conv``).
    depth: ClassVar[int | None] = None

    def __init__(
        self,
        hidden_channels: int,
        *,
        n_layers: int | None = None,
        dropout: float = 0.0,
        readout_layers: int = 1,
        pooling: str = "sum",
        check_inputs: bool = True,
        outputs: str = "complex",
        readout_init: str = "small",
    ) -> None:
        super().__init__()
        self.outputs = check_outputs(outputs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be 'sum' or 'mean', got {pooling!r}")
        if readout_init not in READOUT_INITS:
            raise ValueError(f"readout_init must be one of {READOUT_INITS}, got {readout_init!r}")
        self.readout_init = readout_init
        self.readout_layers = readout_layers
        self.n_layers = self.depth if n_layers is None else n_layers
        self.dropout_rate = dropout
        self.pooling = pooling
        self.check_inputs = bool(check_inputs)
        self.hidden_channels = int(hidden_channels)

    def add_readout(self, info: DatasetInfo, dropout_before: bool = True) -> None:
        """Build the readout: dropout (with ``dropout_before``) and the :class:`ReadoutMLP`.

        Each baseline calls it where its original construction order puts it (the parameters
        draw from the random generator in that order).

        Parameters
        ----------
        info : DatasetInfo
            Data set shapes (output width).
        dropout_before : bool, default=True
            Dropout on the pooled (or vertex) states before the readout MLP.
        """
        self.dropout = nn.Dropout(self.dropout_rate) if dropout_before else nn.Identity()
        self.readout = ReadoutMLP(self.hidden_channels, info.out_channels, self.readout_layers, self.dropout_rate)
        init_last_layer(self.readout, self.readout_init)

    def check(self, rows: Mapping[str, tuple[Tensor | None, int]]) -> None:
        """Check that every input has one row per cell and, with ``check_inputs``, finite values.

        Parameters
        ----------
        rows : Mapping[str, tuple[torch.Tensor or None, int]]
            Input by key, with the number of rows it must have (``None``: no such input).
        """
        check_rows(rows)
        if self.check_inputs:
            check_inputs({name: x for name, (x, _) in rows.items()})

    def cell_states(self, batch: Any) -> list[Tensor]:
        """Return the final states of every rank the baseline updates (each baseline gives them).

        Parameters
        ----------
        batch : ComplexData
            The (batched) complexes.

        Returns
        -------
        list of torch.Tensor, shape = (n_r, hidden_channels)
            States of rank ``r = 0, 1, ...``.
        """
        raise NotImplementedError

    def node_states(self, batch: Any, states: list[Tensor]) -> Tensor:
        """Return the vertex states read out by ``outputs="node"``: the rank-0 states.

        Parameters
        ----------
        batch : ComplexData
            The (batched) complexes.
        states : list of torch.Tensor
            :meth:`cell_states` of ``batch``.

        Returns
        -------
        torch.Tensor, shape = (n_0, hidden_channels)
        """
        return states[0]

    def forward(self, batch: Any) -> Tensor:
        """Predict.

        Parameters
        ----------
        batch : ComplexData
            Needs the keys of the baseline's registry entry (``MODELS[name].keys``).

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            Predictions (zeros-pooled rows for complexes without cells); ``outputs="node"``:
            ``(n_0, out_channels)``.
        """
        states = self.cell_states(batch)
        if self.outputs == "node":
            return self.readout(self.dropout(self.node_states(batch, states)))
        size = batch.num_complexes
        pooled = sum(segment_pool(h, batch[f"batch_{r}"], size, self.pooling) for r, h in enumerate(states))
        return self.readout(self.dropout(pooled))


def _baseline(
    name: str, domain: str, keys: Callable[[nn.Module, DatasetInfo], set[str]], **fixed: Any
) -> Callable[[type[Baseline]], type[Baseline]]:
    """Register a baseline class as harness model ``name`` (decorator).

    Its builder passes ``model.params`` (and ``fixed``) as keyword arguments, with ``outputs``
    from the data set's task level (:func:`~topomodelx_attention.harness.models.task_outputs`).
    """

    def decorator(cls: type[Baseline]) -> type[Baseline]:
        def build(params: Mapping[str, Any], info: DatasetInfo) -> nn.Module:
            params = dict(params)
            outputs = task_outputs(params, info)
            return cls(info, **fixed, **params, outputs=outputs)

        build.__doc__ = f"Harness model {name!r}: :class:`{cls.__name__}` (``params``: its keyword arguments)."
        register_model(name, domain, keys)(build)
        return cls

    return decorator


def init_last_layer(readout: nn.Module, init: str) -> None:
    """Initialise the last linear map of a readout as ``readout_init`` says (in place).

    ``"default"``: PyTorch's initialisation, unchanged. ``"small"``: its weights times
    :data:`~topomodelx_attention.nn.cell.cellular_transformer.SMALL_READOUT_GAIN` (0.01) and a
    zero bias. ``"zero"``: zero weights and bias.

    Parameters
    ----------
    readout : torch.nn.Linear or torch.nn.Sequential
        The readout: a linear map, or a sequence whose last module is one.
    init : {"default", "small", "zero"}
        The initialisation.

    Raises
    ------
    ValueError
        For another ``init`` (the message names ``readout_init``).
    """
    if init not in READOUT_INITS:
        raise ValueError(f"readout_init must be one of {READOUT_INITS}, got {init!r}")
    last = readout if isinstance(readout, nn.Linear) else readout[-1]
    if init == "default":
        return
    gain = SMALL_READOUT_GAIN if init == "small" else 0.0
    with torch.no_grad():
        last.weight.mul_(gain)
        if last.bias is not None:
            last.bias.zero_()


# ----------------------------------------------------------------------------------------------
# MLP (vertex features only)
# ----------------------------------------------------------------------------------------------
@_baseline("mlp", "graph", lambda model, info: {"x_0", "batch_0"})
@fill_doc
class MLPBaseline(Baseline):
    """MLP on the vertex features alone (``x_0``): encoder, ``n_layers`` of Linear–ReLU–dropout, readout.

    No edge, no neighbour: on node tasks it measures what the features say by themselves (the
    heterophilous benchmark's MLP row); on graph tasks it pools the vertex states per complex.
    ``n_layers`` (default 2) hidden layers follow the encoder; ``dropout`` acts after every
    hidden layer and inside the readout.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (``x_0`` width and categories, output width).
    hidden_channels : int, default=32
        Width.
    %(baseline_options)s
    """

    depth = 2

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        **options: Unpack[PooledBaselineOptions],
    ) -> None:
        super().__init__(hidden_channels, **options)
        n_layers = self.n_layers
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 0:
            raise ValueError(f"n_layers must be an integer >= 0, got {n_layers!r}")
        self.encoder = FeatureEncoder(info.in_channels[0], hidden_channels, info.categorical[0])
        self.layers = nn.Sequential(*(
            nn.Sequential(nn.Linear(hidden_channels, hidden_channels), nn.ReLU(), nn.Dropout(self.dropout_rate))
            for _ in range(n_layers)
        ))
        self.add_readout(info, dropout_before=False)

    def cell_states(self, batch: Any) -> list[Tensor]:  # noqa: D102
        self.check({"x_0": (batch.x_0, batch.batch_0.numel())})
        return [self.layers(torch.relu(self.encoder(batch.x_0)))]


# ----------------------------------------------------------------------------------------------
# GIN
# ----------------------------------------------------------------------------------------------
@_baseline("gin", "graph", lambda model, info: {"x_0", "batch_0", "edge_index"})
@fill_doc
class GINBaseline(Baseline):
    """GIN on the graph (``edge_index``, ``x_0``): encoder, ``torch_geometric.nn.GIN``, pool, MLP.

    Needs ``x_0``, ``edge_index``, ``batch_0``. ``n_layers`` (default 3): GIN layers. ``dropout``
    acts inside GIN and the readout; PyG's GIN ends without dropout, and so does this baseline
    before its readout.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (``x_0`` width and categories, output width).
    hidden_channels : int, default=32
        Width.
    %(baseline_options)s
    """

    depth = 3

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        **options: Unpack[PooledBaselineOptions],
    ) -> None:
        super().__init__(hidden_channels, **options)
        from torch_geometric.nn import GIN

        self.encoder = FeatureEncoder(info.in_channels[0], hidden_channels, info.categorical[0])
        self.gin = GIN(hidden_channels, hidden_channels, int(self.n_layers), dropout=self.dropout_rate)
        self.add_readout(info, dropout_before=False)

    def cell_states(self, batch: Any) -> list[Tensor]:  # noqa: D102
        self.check({"x_0": (batch.x_0, batch.batch_0.numel())})
        return [self.gin(self.encoder(batch.x_0), batch.edge_index)]


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


def _gin_mlp(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Linear(width, width))


class _GINEBlock(nn.Module):
    """``h ← GINEConv(h, e)``, then (but after the last layer) BatchNorm, ReLU and dropout, as PyG's ``GIN``."""

    def __init__(self, width: int, last: bool, dropout: float) -> None:
        super().__init__()
        from torch_geometric.nn import GINEConv

        self.conv = GINEConv(_gin_mlp(width), train_eps=True)
        self.norm = None if last else nn.BatchNorm1d(width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:
        x = self.conv(x, edge_index, edge_attr)
        return x if self.norm is None else self.dropout(torch.relu(self.norm(x)))


#: GPS's global attention: the package's kernel kinds → PyG's ``GPSConv`` ``attn_type``.
_GPS_ATTENTION: dict[str, str] = {DenseKernel.kind: "multihead", LinearKernel.kind: "performer"}


class _GPSBlock(nn.Module):
    """One ``torch_geometric.nn.GPSConv``: local GINE update + global attention, then an FFN."""

    def __init__(self, width: int, heads: int, dropout: float, attention_dropout: float, kind: str) -> None:
        super().__init__()
        from torch_geometric.nn import GINEConv, GPSConv

        if kind not in _GPS_ATTENTION:
            raise ValueError(f"kind must be one of {tuple(_GPS_ATTENTION)}, got {kind!r}")
        # a kernel without weights (linear): no attention dropout (0, checked)
        kwargs = {"dropout": attention_dropout} if KERNELS[kind].has_weights else {}
        self.conv = GPSConv(
            width, GINEConv(_gin_mlp(width)), heads=heads, dropout=dropout, attn_type=_GPS_ATTENTION[kind], attn_kwargs=kwargs
        )

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:
        return self.conv(x, edge_index, batch, edge_attr=edge_attr)


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

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, batch: Tensor) -> Tensor:
        x = self.norm_attention(x + self.dropout(self.conv(x, edge_index, edge_attr)))
        return self.norm_ffn(x + self.dropout(self.ffn(x)))


# conv -> (default n_layers, defaults of its attention options)
EDGE_GRAPH_CONVS: dict[str, tuple[int, dict[str, Any]]] = {
    "gine": (3, {}),
    "gps": (2, {"heads": 4, "attention_dropout": 0.1, "kind": "dense"}),
    "graph_transformer": (2, {"heads": 4, "attention_dropout": 0.1}),
}


@_baseline("gine", "graph", _edge_graph_keys, conv="gine")
@_baseline("gps", "graph", _edge_graph_keys, conv="gps")
@_baseline("graph_transformer", "graph", _edge_graph_keys, conv="graph_transformer")
@fill_doc
class EdgeGraphBaseline(Baseline):
    """Graph baselines with edge features: GINE, GPS or a sparse graph transformer (``conv``).

    ``h_0 = [enc_0(x_0) ‖ Linear(BatchNorm(pe_0))]`` (the PE branch only when the data set has
    ``pe_0``, as GraphGPS's RWSE/LapPE node encoders), ``e = enc_1(x_1)`` copied to both
    orientations of every edge (:func:`edge_graph`), ``n_layers`` blocks of ``conv``, then
    ``segment_pool`` per complex, dropout and the :class:`ReadoutMLP` (``dropout`` acts on the block
    outputs, before the readout and inside the readout MLP; ``n_layers``, the number of blocks, is
    3 for ``"gine"`` and 2 for the others by default). The blocks:

    - ``"gine"``: GIN with edge features (Hu et al., 2020; ``torch_geometric.nn.GINEConv``),
      ZINC's standard MPNN: ``h ← MLP((1 + ε) h_v + Σ_u ReLU(h_u + e_uv))``, then BatchNorm,
      ReLU and dropout between layers (as ``torch_geometric.nn.GIN``).
    - ``"gps"``: GraphGPS (Rampášek et al., 2022; ``torch_geometric.nn.GPSConv``): a local GINE
      update and a global multi-head attention update over all nodes of the complex, each with
      residual and BatchNorm, then an FFN. Its positional encoding is RWSE (``gps.yaml``) or LapPE.
    - ``"graph_transformer"``: every node attends to its graph neighbours
      (``torch_geometric.nn.TransformerConv``, edge features in keys and values, Shi et al.,
      2021), as the graph transformer of Dwivedi & Bresson (2021) on the 1-skeleton: attention,
      residual, LayerNorm, FFN (width ``2 × hidden``), residual, LayerNorm. Its usual positional
      encoding is LapPE (``graph_transformer.yaml``, with random sign flips in training).

    Registered as the harness models ``gine``, ``gps`` and ``graph_transformer`` (their
    ``conv``). Needs ``x_0``, ``x_1``, ``batch_0``, ``incidence_1`` (and ``pe_0`` with a PE).

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (``x_0``/``x_1`` widths and categories, ``pe_channels``, output width).
    hidden_channels : int, default=32
        Width.
    conv : {"gine", "gps", "graph_transformer"}, default="gine"
        The block (:data:`EDGE_GRAPH_CONVS`: default depth and attention options of each).
    heads : int or None, default=None
        Attention heads of ``"gps"`` / ``"graph_transformer"`` (``None``: 4; must divide
        ``hidden_channels``); ``"gine"`` takes none.
    attention_dropout : float or None, default=None
        Dropout on the attention weights of ``"gps"`` (``kind="dense"``) /
        ``"graph_transformer"`` (``None``: 0.1).
    kind : {"dense", "linear"} or None, default=None
        Global attention of ``"gps"`` only (``None``: ``"dense"``): softmax multi-head attention
        (``attn_type="multihead"``) or the Performer (``attn_type="performer"``), the package's
        attention-kind names.
    pe_hidden_channels : int, default=8
        Columns of ``h_0`` given to the encoded PE (only with ``pe_0``).
    %(baseline_options)s

    Raises
    ------
    ValueError
        For an unknown ``conv``, an attention option ``conv`` does not take, ``n_layers < 1``,
        ``heads`` not dividing the width or ``pe_hidden_channels`` outside ``1..hidden - 1``.
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        *,
        conv: str = "gine",
        heads: int | None = None,
        attention_dropout: float | None = None,
        kind: str | None = None,
        pe_hidden_channels: int = 8,
        **options: Unpack[PooledBaselineOptions],
    ) -> None:
        super().__init__(hidden_channels, **options)
        if conv not in EDGE_GRAPH_CONVS:
            raise ValueError(f"conv must be one of {sorted(EDGE_GRAPH_CONVS)}, got {conv!r}")
        depth, defaults = EDGE_GRAPH_CONVS[conv]
        given = {"heads": heads, "attention_dropout": attention_dropout, "kind": kind}
        for key, value in given.items():
            if value is not None and key not in defaults:
                raise ValueError(f"{key} is not an option of the {conv!r} baseline (it takes {sorted(defaults)})")
        conv_options = {key: default if given[key] is None else given[key] for key, default in defaults.items()}
        h = self.hidden_channels
        n_layers = depth if self.n_layers is None else int(self.n_layers)
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        if "heads" in conv_options:
            conv_options["heads"] = int(conv_options["heads"])
            if conv_options["heads"] < 1 or h % conv_options["heads"]:
                raise ValueError(f"heads must divide hidden_channels={h}, got {conv_options['heads']}")
            conv_options["attention_dropout"] = float(conv_options["attention_dropout"])
        if conv_options.get("kind") in KERNELS and not KERNELS[conv_options["kind"]].has_weights:
            # PyG's Performer attention has no dropout on attention weights: refuse a rate that
            # would be ignored; the dense default rate does not apply to it
            if given["attention_dropout"] not in (None, 0.0):
                raise ValueError(
                    f"attention_dropout={given['attention_dropout']} has no effect with kind={conv_options['kind']!r} "
                    "(Performer attention has no attention weights to drop): set it to 0"
                )
            conv_options["attention_dropout"] = 0.0
        pe = info.pe_channels
        pe_width = int(pe_hidden_channels) if pe is not None else 0
        if pe is not None and not 0 < pe_width < h:
            raise ValueError(f"pe_hidden_channels must be in 1..{h - 1} (hidden_channels={h}), got {pe_hidden_channels}")
        self.node_encoder = FeatureEncoder(info.in_channels[0], h - pe_width, info.categorical[0], name="x_0")
        self.edge_encoder = FeatureEncoder(info.in_channels[1], h, info.categorical[1], name="x_1")
        self.pe_encoder = (
            nn.Sequential(nn.BatchNorm1d(pe), nn.Linear(pe, pe_width)) if pe is not None else None
        )
        self.add_readout(info)
        dropout = self.dropout_rate
        if conv == "gine":
            blocks = (_GINEBlock(h, i == n_layers - 1, dropout) for i in range(n_layers))
        elif conv == "gps":
            blocks = (_GPSBlock(h, dropout=float(dropout), **conv_options) for _ in range(n_layers))
        else:
            blocks = (_TransformerConvBlock(h, dropout=float(dropout), **conv_options) for _ in range(n_layers))
        self.blocks = nn.ModuleList(blocks)

    def cell_states(self, batch: Any) -> list[Tensor]:  # noqa: D102
        pe = batch.pe_0 if self.pe_encoder is not None else None
        n_0, n_1 = batch.incidence_1.shape
        self.check({"x_0": (batch.x_0, n_0), "batch_0": (batch.batch_0, n_0), "x_1": (batch.x_1, n_1), "pe_0": (pe, n_0)})
        x = self.node_encoder(batch.x_0)
        if pe is not None:
            if not pe.is_floating_point():
                raise TypeError(f"pe_0 must be a float positional encoding, got dtype {pe.dtype}")
            x = torch.cat([x, self.pe_encoder(pe.to(x.dtype))], dim=-1)
        edge_index, edge_id = edge_graph(batch.incidence_1)
        edge_attr = self.edge_encoder(batch.x_1)[edge_id]
        # a batch of complexes without vertices: nothing to update (GPSConv cannot take 0 rows)
        for block in self.blocks if n_0 else ():
            x = block(x, edge_index, edge_attr, batch.batch_0)
        return [x]


@fill_doc
class _RankBaseline(Baseline):
    """Baseline on 2-dimensional complexes: one encoder per rank 0..2 (TopoModelX's CWN, SCCNN).

    TopoModelX's CWN and SCCNN sum their messages without normalisation and have no norm
    layer, so the scale of their states follows the scale of the inputs times the neighbourhood
    sizes, layer after layer: the ``embedding_norm`` and ``final_norm`` LayerNorms (per rank)
    keep the encoded inputs and the final states at unit scale (as the Cellular Transformer's
    options of the same names; TopoBench's wrappers apply a LayerNorm per rank to the backbone's
    output too).

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (ranks 0..2).
    hidden_channels : int
        Width (all ranks).
    model : str
        The TopoModelX model's name, for the error message.
    %(rank_baseline_options)s
    """

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int,
        model: str,
        *,
        embedding_norm: bool = True,
        final_norm: bool = True,
        **options: Unpack[BaselineOptions],
    ) -> None:
        if "pooling" in options:  # the ranks are summed per complex
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument 'pooling' ({model} sums)")
        super().__init__(hidden_channels, **options)
        if info.max_rank != 2:
            raise ValueError(f"{model} needs 2-dimensional complexes, got max_rank={info.max_rank}")
        self.encoders = rank_encoders(info, self.hidden_channels, range(3))
        def norms(on: bool) -> nn.ModuleList | None:
            return nn.ModuleList(nn.LayerNorm(self.hidden_channels) for _ in range(3)) if on else None

        self.embedding_norms, self.final_norms = norms(bool(embedding_norm)), norms(bool(final_norm))

    def encode(self, batch: Any) -> list[Tensor]:
        """Check ``x_r`` against ``batch_r`` and encode it, r = 0..2 (``(n_r, hidden_channels)`` each)."""
        self.check({f"x_{r}": (batch[f"x_{r}"], batch[f"batch_{r}"].numel()) for r in range(3)})
        encoded = [enc(batch[f"x_{r}"]) for r, enc in enumerate(self.encoders)]
        return encoded if self.embedding_norms is None else [n(x) for n, x in zip(self.embedding_norms, encoded)]

    def finish(self, states: Sequence[Tensor]) -> list[Tensor]:
        """Return the final states of ranks 0..2, through the ``final_norm`` LayerNorms when set."""
        return list(states) if self.final_norms is None else [n(x) for n, x in zip(self.final_norms, states)]


# ----------------------------------------------------------------------------------------------
# CWN (TopoModelX)
# ----------------------------------------------------------------------------------------------
@_baseline(
    "cwn",
    "cell",
    lambda model, info: rank_keys(2, "x", "batch") | {"adjacency_1", "incidence_1", "incidence_2"},
)
@fill_doc
class CWNBaseline(_RankBaseline):
    """TopoModelX's CW Network on cell complexes: encoders, ``CWN``, sum pool of all ranks, MLP.

    ``CWN.forward(x_0, x_1, x_2, adjacency_0, incidence_2, incidence_1_t)`` updates the edges
    from their upper-adjacent edges (``adjacency_0`` = our edge upper adjacency
    ``adjacency_1``) and 2-cells (``incidence_2``) and from their vertices
    (``incidence_1_t`` = ``incidence_1ᵀ``), as TopoBench's CWN wrapper calls it.

    CWN sums the messages of all upper-adjacent edges, 2-cells and vertices without
    normalisation, so its edge states grow with the neighbourhood sizes and the inputs' scale
    (e.g. TU node attributes in the tens) at every layer: hence ``embedding_norm`` and
    ``final_norm`` (``False`` for both: TopoModelX's CWN on the encoded inputs). ``dropout`` acts
    before the readout and inside it; ``n_layers`` (default 2): CWN layers.

    With ``outputs="node"``: TopoModelX's CWN updates only the edges (its vertex states are the
    projected inputs), so a vertex reads the final states propagated down the incidences:
    ``h_0 + B_1 (h_1 + B_2 h_2)`` with the unsigned ``B_1 = incidence_1``, ``B_2 = incidence_2``
    (as TopoBench's signal-down readout, summed), then the readout MLP.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (ranks 0..2).
    hidden_channels : int, default=32
        Width.
    %(rank_baseline_options)s
    """

    depth = 2

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        **options: Unpack[RankBaselineOptions],
    ) -> None:
        super().__init__(info, hidden_channels, "CWN", **options)
        from topomodelx.nn.cell.cwn import CWN

        h = self.hidden_channels
        self.cwn = CWN(h, h, h, h, int(self.n_layers))
        self.add_readout(info)

    def cell_states(self, batch: Any) -> list[Tensor]:  # noqa: D102
        x = self.encode(batch)
        return self.finish(self.cwn(
            x[0], x[1], x[2],
            adjacency_0=batch.adjacency_1,
            incidence_2=batch.incidence_2,
            incidence_1_t=batch.incidence_1.t().coalesce(),
        ))

    def node_states(self, batch: Any, states: list[Tensor]) -> Tensor:
        """Return the edge (and 2-cell) states summed down into their vertices, ``h_0 + B_1 (h_1 + B_2 h_2)``."""
        edges = states[1] + torch.sparse.mm(batch.incidence_2, states[2])
        return states[0] + torch.sparse.mm(batch.incidence_1, edges)


# ----------------------------------------------------------------------------------------------
# SCCNN (TopoModelX)
# ----------------------------------------------------------------------------------------------
@_baseline(
    "sccnn",
    "simplicial",
    lambda model, info: rank_keys(2, "x", "batch")
    | {"hodge_laplacian_0", "down_laplacian_1", "up_laplacian_1", "hodge_laplacian_2"}
    | {"signed_incidence_1", "signed_incidence_2"},
)
@fill_doc
class SCCNNBaseline(_RankBaseline):
    """TopoModelX's SCCNN on simplicial (clique) complexes: encoders, ``SCCNN``, pool, MLP.

    ``SCCNN.forward(x_all, laplacian_all, incidence_all)`` with ``laplacian_all = (L_0,
    L_1^down, L_1^up, L_2)`` (our ``hodge_laplacian_0``, ``down_laplacian_1``,
    ``up_laplacian_1``, ``hodge_laplacian_2``) and ``incidence_all = (B_1, B_2)`` (signed).
    TopoModelX's layer builds dense identity matrices and CPU buffers: a CPU baseline.

    SCCNN multiplies the states by the (unnormalised) Laplacians and incidences at every layer,
    so their scale grows with the cell degrees: hence ``embedding_norm`` and ``final_norm``.
    ``dropout`` acts before the readout and inside it; ``n_layers`` (default 2): SCCNN layers.
    With ``outputs="node"``, the readout MLP reads the final vertex states, which SCCNN updates
    from the edges and triangles.

    Parameters
    ----------
    info : DatasetInfo
        Data set shapes (ranks 0..2).
    hidden_channels : int, default=32
        Width (all ranks).
    conv_order : int, default=1
        Order of the simplicial filters.
    update_func : {"relu", "sigmoid"} or None, default="relu"
        Activation of the layers.
    aggr_norm : bool, default=False
        Normalise aggregations by the neighbourhood size.
    %(rank_baseline_options)s
    """

    depth = 2

    def __init__(
        self,
        info: DatasetInfo,
        hidden_channels: int = 32,
        *,
        conv_order: int = 1,
        update_func: str | None = "relu",
        aggr_norm: bool = False,
        **options: Unpack[RankBaselineOptions],
    ) -> None:
        if int(conv_order) < 1:
            raise ValueError(f"conv_order must be at least 1, got {conv_order}")
        super().__init__(info, hidden_channels, "SCCNN", **options)
        from topomodelx.nn.simplicial.sccnn import SCCNN

        h = self.hidden_channels
        self.sccnn = SCCNN((h, h, h), (h, h, h), int(conv_order), 2, aggr_norm, update_func, int(self.n_layers))
        self.add_readout(info)

    def cell_states(self, batch: Any) -> list[Tensor]:  # noqa: D102
        x = tuple(self.encode(batch))
        laplacians = (
            batch.hodge_laplacian_0, batch.down_laplacian_1, batch.up_laplacian_1, batch.hodge_laplacian_2,
        )
        incidences = (batch.signed_incidence_1, batch.signed_incidence_2)
        return self.finish(self.sccnn(x, laplacians, incidences))


# the allow-list of configuration _target_s holds this module's model classes
allow_harness_classes(__name__)
