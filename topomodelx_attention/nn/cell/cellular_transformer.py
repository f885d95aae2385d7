"""Cellular Transformer model: embeddings + PEs (Eq. 4), stacked layers, readout (Appendix A)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.data import ComplexData
from topomodelx_attention.nn._export import prepared_inputs
from topomodelx_attention.nn.attention import scatter_sum
from topomodelx_attention.nn.cell.cell_encoder import (
    CELL_EMBEDDINGS,
    PE_COMBINATIONS,
    PE_NORMS,
    PE_PROJECTIONS,
    CellEncoder,
    pe_projection_layer,
    vertex_membership,
)
from topomodelx_attention.nn.cell.cellular_transformer_layer import (
    CellularTransformerLayer,
    valid_ranks,
)
from topomodelx_attention.nn.cell.structure import CellStructure
from topomodelx_attention.nn.cell.structure_transform import PrepareStructure, stored_structure
from topomodelx_attention.nn.cell.tensor_diagram import Arrow, parse_tensor_diagram
from topomodelx_attention.nn.common import (
    POOLINGS,
    ReadoutMLP,
    check_options,
    segment_pool,
)
from topomodelx_attention.nn.common import check_inputs as check_finite_inputs

__all__ = [
    "CELL_EMBEDDINGS",
    "PE_COMBINATIONS",
    "PE_OPTIONS",
    "PE_PROJECTIONS",
    "READOUT_INITS",
    "READOUT_OPTIONS",
    "SMALL_READOUT_GAIN",
    "CellEncoder",
    "CellularInputs",
    "CellularTransformer",
]

READOUT_INITS = ("default", "small", "zero")
#: Factor on PyTorch's initial weights of the last readout layer for ``readout_options["init"]="small"``.
SMALL_READOUT_GAIN = 0.01

#: Keys of ``pe_options`` and their defaults (the width of ``pe_r``, ``None``: no PE, and how
#: it enters the embedding, Eq. 4).
PE_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {"channels": None, "combination": "concat", "projection": "per_rank", "norm": None}
)

#: Keys of ``readout_options`` and their defaults (the readout MLP, Appendix A).
READOUT_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {"layers": 1, "dropout": 0.0, "ranks": None, "before_pooling": True, "init": "default"}
)


@dataclass(frozen=True)
class CellularInputs:
    """A batch of complexes prepared for :class:`CellularTransformer` (:meth:`~CellularTransformer.prepare`).

    Only tensors and precomputed structures: the model's computation on it has no
    data-dependent size or branch (``torch.compile`` traces it without graph breaks).

    Attributes
    ----------
    x : tuple of (torch.Tensor or None)
        ``x_r`` of shape ``(n_r, d_r)`` per rank (``None`` for ranks embedded as vertex sums).
    pe : tuple of (torch.Tensor or None)
        ``pe_r`` of shape ``(n_r, pe_options["channels"])`` per rank, ``None`` without PE.
    batch : tuple of torch.Tensor
        ``batch_r`` of shape ``(n_r,)``: complex of every r-cell.
    membership : tuple of (tuple of torch.Tensor or None)
        For ``cell_embedding="vertex_sum"`` ranks: ``(vertex, cell)`` index pairs of the 0/1
        vertex-cell matrix (:func:`vertex_membership`); ``None`` for other ranks.
    structure : CellStructure
        Neighbourhood indices and layouts of the layers.
    counts : torch.Tensor, shape = (num_complexes, max_rank + 1)
        Cells of every rank per complex (its rows give ``num_complexes``, a size that stays
        symbolic under ``torch.compile``).
    """

    x: tuple[Tensor | None, ...]
    pe: tuple[Tensor | None, ...]
    batch: tuple[Tensor, ...]
    membership: tuple[tuple[Tensor, Tensor] | None, ...]
    structure: CellStructure
    counts: Tensor

    @property
    def num_complexes(self) -> int:
        """Number of complexes (a symbolic size under ``torch.compile``)."""
        return self.counts.shape[0]


def _check_outputs(outputs: object, max_rank: int) -> str | tuple[int, ...]:
    """``"complex"``, or the cell-level output ranks as a tuple (clear errors otherwise)."""
    if isinstance(outputs, str):
        if outputs != "complex":
            raise ValueError(
                f"outputs must be 'complex' or a sequence of ranks in 0..{max_rank} (cell-level "
                f"outputs, e.g. (0,) for the vertices), got {outputs!r}"
            )
        return outputs
    ranks = tuple(outputs) if isinstance(outputs, Sequence) else (outputs,)
    if not valid_ranks(ranks, max_rank) or len(set(ranks)) != len(ranks):
        raise ValueError(
            f"outputs must be 'complex' or distinct ranks in 0..{max_rank}, got {outputs!r}"
        )
    return ranks


@dataclass(frozen=True)
class _ModelOptions:
    """The model-level options of :class:`CellularTransformer`, checked together once."""

    readout: dict[str, Any]
    readout_ranks: tuple[int, ...]
    pe: dict[str, Any]
    outputs: str | tuple[int, ...]
    categorical: list[Sequence[int] | None]

    @classmethod
    def checked(
        cls,
        max_rank: int,
        *,
        n_layers: int,
        pooling: str,
        readout_options: Mapping[str, Any] | None,
        pe_options: Mapping[str, Any] | None,
        outputs: object,
        cell_embedding: str,
        embedding_norm: bool,
        categorical: Sequence[Sequence[int] | None] | None,
    ) -> _ModelOptions:
        """Check the options (clear errors) and resolve the readout ranks and the PE options."""
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if int(n_layers) < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        if cell_embedding not in CELL_EMBEDDINGS:
            raise ValueError(
                f"cell_embedding must be one of {CELL_EMBEDDINGS}, got {cell_embedding!r}"
            )
        if not isinstance(embedding_norm, bool):
            raise TypeError(f"embedding_norm must be a bool, got {embedding_norm!r}")
        if categorical is None:
            categorical = [None] * (max_rank + 1)
        if len(categorical) != max_rank + 1:
            raise ValueError("categorical needs one entry (None or cardinalities) per rank")
        readout = check_options("readout_options", readout_options, READOUT_OPTIONS)
        outputs = _check_outputs(outputs, max_rank)
        ranks = _readout_ranks(readout, outputs, max_rank)
        return cls(readout, ranks, _check_pe(pe_options), outputs, list(categorical))


def _readout_ranks(
    readout: Mapping[str, Any], outputs: str | tuple[int, ...], max_rank: int
) -> tuple[int, ...]:
    """Return the ranks read out (``readout_options["ranks"]``, or the cell-level ``outputs``)."""
    ranks, before_pooling = readout["ranks"], readout["before_pooling"]
    if not isinstance(before_pooling, bool):
        raise TypeError(f"readout_options['before_pooling'] must be a bool, got {before_pooling!r}")
    if readout["init"] not in READOUT_INITS:
        raise ValueError(
            f"readout_options['init'] must be one of {READOUT_INITS}, got {readout['init']!r}"
        )
    if outputs != "complex":  # cell-level outputs: their ranks are the readout ranks
        if not before_pooling:
            raise ValueError(
                f"outputs={outputs} returns the readout of every cell: it needs "
                "readout_options['before_pooling']=True (there is no pooling to read after)"
            )
        if ranks is not None and tuple(ranks) != outputs:
            raise ValueError(
                f"outputs={outputs} names the ranks of the cell-level outputs; "
                f"readout_options['ranks']={ranks} contradicts it: give the ranks once"
            )
        ranks = outputs
    if ranks is None:
        return (0,)
    resolved = tuple(range(max_rank + 1)) if ranks == "all" else tuple(int(r) for r in ranks)
    if not valid_ranks(resolved, max_rank):
        raise ValueError(
            f"readout_options['ranks'] must be ranks in 0..{max_rank} (or 'all'), got {ranks}"
        )
    return resolved


def _check_pe(pe_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``pe_options`` with its defaults, checked (:data:`PE_OPTIONS`)."""
    pe = check_options("pe_options", pe_options, PE_OPTIONS)
    if pe["projection"] not in PE_PROJECTIONS:
        raise ValueError(
            f"pe_options['projection'] must be one of {PE_PROJECTIONS}, got {pe['projection']!r}"
        )
    if pe["combination"] not in PE_COMBINATIONS:
        raise ValueError(
            f"pe_options['combination'] must be one of {PE_COMBINATIONS}, "
            f"got {pe['combination']!r}"
        )
    if pe["norm"] not in PE_NORMS:
        raise ValueError(f"pe_options['norm'] must be one of {PE_NORMS}, got {pe['norm']!r}")
    return pe


def _cell_encoders(
    widths: Sequence[int | None], channels: int, options: _ModelOptions
) -> tuple[nn.Module | None, nn.ModuleList]:
    """Build the PE projection shared by the ranks (``None`` unless shared) and every encoder.

    ``widths``: the feature width of every rank, ``None`` for a rank embedded as the sum of its
    vertices (Eq. 4 and Appendix A, "Signals on cells").
    """
    pe = options.pe
    shared = None
    if pe["channels"] is not None and pe["projection"] == "shared":
        shared = pe_projection_layer(int(channels), int(pe["channels"]), pe["combination"])
    encoders = nn.ModuleList(
        CellEncoder(
            d, channels, cards, pe["channels"], pe["combination"], pe_linear=shared, pe_norm=pe["norm"]
        )
        for d, cards in zip(widths, options.categorical)
    )
    return shared, encoders


def _rank_norms(channels: int, max_rank: int) -> nn.ModuleList:
    """One LayerNorm per rank ``0..max_rank``."""
    return nn.ModuleList(nn.LayerNorm(channels) for _ in range(max_rank + 1))


def _readouts(
    channels: int, out_channels: int, ranks: Sequence[int], readout: Mapping[str, Any]
) -> nn.ModuleDict:
    """Build the readout MLP of every rank, its last layer initialised as ``readout["init"]``."""
    readouts = nn.ModuleDict(
        {
            str(r): ReadoutMLP(channels, out_channels, readout["layers"], readout["dropout"])
            for r in ranks
        }
    )
    if readout["init"] != "default":
        gain = SMALL_READOUT_GAIN if readout["init"] == "small" else 0.0
        with torch.no_grad():
            for mlp in readouts.values():
                mlp[-1].weight.mul_(gain)
                mlp[-1].bias.zero_()
    return readouts


class CellularTransformer(nn.Module):
    """Cellular Transformer ``R ∘ CT_L ∘ … ∘ CT_1 ∘ P`` (§4.1) for complexes of any dimension.

    Every option after the three widths is keyword-only. Defaults are this package's choices;
    the paper-exact form of each is given (Table 3 settings: the packaged configs
    ``model=cell/cellular_transformer_paper_{gcb,zinc,molhiv}``).

    Parameters
    ----------
    in_channels : sequence of int
        Feature columns ``[d_0, ..., d_R]`` of each rank (sets ``max_rank = len - 1``).
    hidden_channels : int
        Transformer width ``d^h``.
    out_channels : int or None
        Output width (classes or regression targets). ``None``: an encoder only, without
        readout modules (no parameter that never gets a gradient, e.g. a backbone under DDP);
        use :meth:`encode`, :meth:`forward` and :meth:`cell_outputs` then raise ``ValueError``
        and ``readout_options`` is unused.
    n_layers : int, default=2
        Number of Cellular Transformer layers (the paper: 12).
    heads : int, default=4
        Attention heads.
    attention : {"pairwise", "general"}, default="pairwise"
        Cellular attention mechanism (§4.2).
    kind : str, default="sparse"
        Attention kernel by name: ``"sparse"``, ``"dense"``, ``"linear"`` (or any registered
        kernel, :data:`~topomodelx_attention.nn.attention.KERNELS`), or a composite kind such
        as ``"mixed"`` (:data:`~topomodelx_attention.nn.attention.COMPOSITE_KINDS`; see
        :class:`CellularTransformerLayer`).
    kernel_options : mapping, optional
        Options of the attention kernel(s), passed down to every layer (see
        :class:`CellularTransformerLayer`): e.g. ``{"scale": 1.0}`` (the paper's unscaled Eq. 2
        logits; default ``1/sqrt(d_head)``), ``{"bias_scale": "shared"}`` (the paper's single θ
        of the dense bias θ·N; default one per head), ``{"num_random_features": 64}`` (linear).
        ``{"rrwp_steps": 8}``: the global arrows add a learned bias of the relative random-walk
        probabilities of walks of length ``0..7`` on ``adjacency_r`` (GRIT's RRWP; not in the
        paper); the model then also reads ``adjacency_r``.
    tensor_diagram : sequence, optional
        Arrows of the tensor diagram (default: the paper's, Figure 2). A global arrow
        ``"r->r:all_r"`` adds unmasked attention among the rank-``r`` cells of each complex
        beside the local arrows (GPS-style; pairwise attention; not in the paper).
    categorical : sequence of (sequence of int or None), optional
        Per rank: category counts of its categorical columns, or ``None`` for continuous
        features (e.g. ZINC: ``[[28], [4], None]``).
    pe_options : mapping, optional
        The positional encodings ``pe_r`` the data carries and how they enter (Eq. 4;
        :data:`PE_OPTIONS` are the defaults): ``"channels"`` their width (``None``, the
        default: no PE, the other keys are then unused); ``"combination"`` ``"concat"`` (ConcatPE, the paper) or ``"sum"`` (SumPE);
        ``"projection"`` ``"per_rank"`` (one PE projection ``θ_pe, b_pe`` per rank) or
        ``"shared"`` (one for every rank, as Eq. 4 writes ``θ_in,pe`` without a rank index);
        ``"norm"`` ``None`` (the paper) or ``"batch"`` (each rank's PE columns batch-normalised
        before the projection, :class:`~.cell_encoder.CellEncoder`). Another key raises
        ``ValueError``.
    cell_embedding : {"own", "vertex_sum"}, default="own"
        Signals of the cells of rank >= 2. ``"own"``: their own features ``x_r`` embedded.
        ``"vertex_sum"``: the sum of the *embedded* signals of their vertices (Appendix A,
        "Signals on cells"): ``X_r = M_rᵀ · Embed_0(x_0)`` with ``M_r`` the 0/1 vertex-cell
        membership (pattern of ``incidence_1 ⋯ incidence_r``); ``x_r`` is then not read, the PE
        of the rank is still combined (Eq. 4). Ranks 0 and 1 always embed their own features.
    ffn_channels : int, optional
        FFN width (default ``hidden_channels``).
    dropout : float, default=0.0
        Dropout on the output of every sublayer (attention, FFN) and inside the FFN.
    attention_dropout : float, default=0.0
        Dropout on the attention weights (Table 3: 0.1, as the packaged configs).
    embedding_dropout : float, default=0.0
        Dropout on the embedded inputs (Table 3).
    readout_options : mapping, optional
        The readout MLP (Appendix A; :data:`READOUT_OPTIONS` are the defaults): ``"layers"``
        (default 1) hidden layers; ``"dropout"`` (0.0) inside it; ``"ranks"`` (``None``:
        ``(0,)``, the paper pools the vertices; a sequence of ranks, or ``"all"``) the ranks
        read out for the complex-level output, summed; ``"before_pooling"`` (``True``, the
        paper): the MLP runs on every cell and the cell outputs are pooled, ``Σ_c MLP(h_c)``;
        ``False``: the cells are pooled first and the MLP reads the pooled vector,
        ``MLP(Σ_c h_c)`` (the usual GNN readout, as GIN or GPS; nonlinear in the pooled
        counts); ``"init"`` (``"default"``, ``"small"`` or ``"zero"``): the initialisation of
        the last linear map of every readout MLP. ``"default"``: PyTorch's (the paper's).
        ``"small"``: PyTorch's weights times ``SMALL_READOUT_GAIN`` (0.01) and a zero bias, so
        that every complex starts near the same output (a loss near ``ln C``) however many
        cells the pooling sums, while gradients still reach every parameter from the first
        step; with sum pooling over per-cell outputs the default initialisation starts at
        logits that grow with the number of cells (a first-epoch loss several times ln C on
        30-vertex graphs). ``"zero"``: zero weights and bias (exactly ``ln C`` at the start,
        but no gradient reaches the layers below on the first step). Another key raises
        ``ValueError``.
    pooling : {"sum", "mean"}, default="sum"
        Global pooling (the paper: add pool).
    outputs : "complex" or sequence of int, default="complex"
        What :meth:`forward` returns: one row per complex, or, given as the ranks (e.g.
        ``(0,)`` for node-level tasks), the per-cell predictions ``{rank: (n_rank,
        out_channels)}`` of those ranks (:meth:`cell_outputs`; they are then the readout
        ranks, ``readout_options["ranks"]`` need not repeat them).
    final_norm : bool, default=True
        A per-rank LayerNorm after the last layer, before the readout (usual in pre-norm
        transformers; not in the paper's Appendix A: ``False``).
    bias : bool, default=False
        Bias in the attention projections.
    output_projection : bool, default=True
        Output projection ``W_O`` after the heads (``False``: the paper's split-input heads,
        concatenated; see :class:`CellularTransformerLayer`).
    check_inputs : bool, default=True
        Reject NaN/Inf/huge float inputs (``x_r``, ``pe_r``) once per forward
        (:func:`topomodelx_attention.nn.common.check_inputs`).
    embedding_norm : bool, default=False
        A per-rank LayerNorm on the embedded inputs ``X_k^1`` (after Eq. 4, before the first
        layer; not in the paper): the stack then sees inputs of unit scale whatever the scale
        of ``x_r`` (e.g. features x1000), instead of a residual stream dominated by them.
    """

    def __init__(
        self,
        in_channels: Sequence[int],
        hidden_channels: int,
        out_channels: int | None,
        *,
        n_layers: int = 2,
        heads: int = 4,
        attention: str = "pairwise",
        kind: str = "sparse",
        kernel_options: Mapping[str, Any] | None = None,
        tensor_diagram: Sequence[Arrow | tuple | str] | None = None,
        categorical: Sequence[Sequence[int] | None] | None = None,
        pe_options: Mapping[str, Any] | None = None,
        cell_embedding: str = "own",
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        embedding_dropout: float = 0.0,
        readout_options: Mapping[str, Any] | None = None,
        pooling: str = "sum",
        outputs: str | Sequence[int] = "complex",
        final_norm: bool = True,
        bias: bool = False,
        output_projection: bool = True,
        check_inputs: bool = True,
        embedding_norm: bool = False,
    ) -> None:
        super().__init__()
        in_channels = [int(c) for c in in_channels]
        if not in_channels:
            raise ValueError("in_channels must list the feature width of every rank")
        self.max_rank = len(in_channels) - 1
        options = _ModelOptions.checked(
            self.max_rank, n_layers=n_layers, pooling=pooling, readout_options=readout_options,
            pe_options=pe_options, outputs=outputs, cell_embedding=cell_embedding,
            embedding_norm=embedding_norm, categorical=categorical,
        )
        self.pooling, self.outputs = pooling, options.outputs
        self.readout_ranks = options.readout_ranks
        self.readout_before_pooling = options.readout["before_pooling"]
        pe = options.pe
        self.pe_channels, self.pe_projection = pe["channels"], pe["projection"]
        self.cell_embedding = cell_embedding
        self.check_inputs = bool(check_inputs)
        self.arrows = parse_tensor_diagram(tensor_diagram, self.max_rank)
        # ranks whose signals are the sum of their embedded vertices (Appendix A)
        self.vertex_sum_ranks = (
            tuple(range(2, self.max_rank + 1)) if cell_embedding == "vertex_sum" else ()
        )
        widths = [None if r in self.vertex_sum_ranks else d for r, d in enumerate(in_channels)]
        self.shared_pe, self.encoders = _cell_encoders(widths, hidden_channels, options)
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.embedding_norms = _rank_norms(hidden_channels, self.max_rank) if embedding_norm else None
        self.layers = nn.ModuleList(
            CellularTransformerLayer(
                hidden_channels,
                heads=heads,
                max_rank=self.max_rank,
                attention=attention,
                kind=kind,
                kernel_options=kernel_options,
                tensor_diagram=self.arrows,
                ffn_channels=ffn_channels,
                dropout=dropout,
                attention_dropout=attention_dropout,
                bias=bias,
                output_projection=output_projection,
            )
            for _ in range(int(n_layers))
        )
        self.final_norms = _rank_norms(hidden_channels, self.max_rank) if final_norm else None
        self.out_channels = None if out_channels is None else int(out_channels)
        self.readouts = None
        if self.out_channels is not None:
            self.readouts = _readouts(
                hidden_channels, self.out_channels, self.readout_ranks, options.readout
            )

    @property
    def neighborhood_keys(self) -> list[str]:
        """``ComplexData`` neighbourhood keys the model reads (tensor diagram + vertex sums)."""
        keys = {arrow.neighborhood for arrow in self.arrows if not arrow.is_global}
        if self.layers[0].rrwp_steps:  # the relative random walks of the global arrows
            keys |= {f"adjacency_{arrow.source}" for arrow in self.arrows if arrow.is_global}
        if self.vertex_sum_ranks:
            keys |= {f"incidence_{r}" for r in range(1, max(self.vertex_sum_ranks) + 1)}
        return sorted(keys)

    # ------------------------------------------------------------------ helpers
    def _check_data(self, data: ComplexData) -> None:
        if not isinstance(data, ComplexData):
            raise TypeError(
                f"CellularTransformer expects a (batched) ComplexData, got {type(data)!r}"
            )
        if data.max_rank < self.max_rank:
            raise ValueError(
                f"the model handles ranks 0..{self.max_rank} but the data stops at rank "
                f"{data.max_rank}; build complexes with max_rank={self.max_rank}"
            )

    def _embed(self, data: ComplexData | CellularInputs) -> list[Tensor]:
        """``X_k^1 = P_k(X_k, E_k)`` of every rank (Eq. 4), before the embedding dropout."""
        inputs = self._prepared(data)  # the compiled model's one graph break
        ranks = range(self.max_rank + 1)
        signals = {
            r: self.encoders[r].features(xr) for r, xr in enumerate(inputs.x) if xr is not None
        }
        for r in self.vertex_sum_ranks:
            # X_r = M_rᵀ X_0: sum of the embedded signals of the vertices of every r-cell
            vertex, cell = inputs.membership[r]
            signals[r] = scatter_sum(
                signals[0].index_select(0, vertex), cell, inputs.batch[r].shape[0]
            )
        return [self.encoders[r].combine(signals[r], inputs.pe[r]) for r in ranks]

    def _prepared(self, data: object) -> CellularInputs:
        """Return ``data`` when prepared, else :meth:`prepare` it (``nn._export.prepared_inputs``)."""
        return prepared_inputs(self, data, CellularInputs)

    @torch.compiler.disable
    def prepare(self, data: ComplexData) -> CellularInputs:
        """Everything :meth:`forward` derives from the structure of ``data`` (eager, once per batch).

        Checks the data (ranks, features, finite inputs when ``check_inputs``), converts the
        neighbourhoods into index tensors and layouts (:meth:`CellularTransformerLayer.prepare`)
        and the vertex-cell memberships of ``cell_embedding="vertex_sum"`` into index pairs.
        The result holds only tensors and precomputed structures: ``model(model.prepare(data))``
        equals ``model(data)``, and a ``torch.compile``-d model called on it traces without any
        graph break and without recompiling when the batch size changes. ``torch.compile`` never
        traces this method (``torch.compiler.disable``): a compiled model called on a
        ``ComplexData`` runs it eagerly, with one graph break at the call.

        Parameters
        ----------
        data : ComplexData
            A complex or a batch of complexes.

        Returns
        -------
        CellularInputs
            Features, positional encodings, batch vectors and structure of the batch.
        """
        self._check_data(data)
        ranks = range(self.max_rank + 1)
        own = [r for r in ranks if r not in self.vertex_sum_ranks]
        for r in own:
            if f"x_{r}" not in data:
                raise ValueError(
                    f"the data has no features x_{r}; lift features first (FeatureLifting)"
                )
        pe = tuple(data.get(f"pe_{r}", None) for r in ranks)
        x = tuple(data[f"x_{r}"] if r in own else None for r in ranks)
        if self.check_inputs:
            inputs = {f"x_{r}": x[r] for r in own}
            inputs.update({f"pe_{r}": pe[r] for r in ranks})
            check_finite_inputs(inputs)
        for r in own:
            if x[r].shape[0] != data.num_cells(r):  # the compiled kernels do not check sizes
                raise ValueError(
                    f"x_{r} has {x[r].shape[0]} rows but the data has {data.num_cells(r)} "
                    f"rank-{r} cells: give one feature row per cell"
                )
        for r in own:  # categorical codes in range (eager: forward skips it while compiling)
            if self.encoders[r].features is not None:
                self.encoders[r].features.check_codes(x[r])
        membership: list[tuple[Tensor, Tensor] | None] = [None] * (self.max_rank + 1)
        for r in self.vertex_sum_ranks:
            matrix = vertex_membership(data, r)
            if matrix.shape != (data.num_cells(0), data.num_cells(r)):
                raise ValueError(
                    f"incidence chain gives a {tuple(matrix.shape)} vertex-cell matrix for rank {r}, "
                    f"expected ({data.num_cells(0)}, {data.num_cells(r)})"
                )
            index = matrix.indices()
            membership[r] = (index[0].clone(), index[1].clone())
        batch = tuple(data[f"batch_{r}"] for r in ranks)
        num = data.num_complexes
        neighborhoods = {}
        for key in self.neighborhood_keys:
            name, rank = key.rsplit("_", 1)
            neighborhoods[key] = data.neighborhood(name, int(rank))
        structure = stored_structure(self, data)  # PrepareStructure's, built once
        if structure is None:
            # convert (any sparse layout → index tensors, layouts) and check once for the whole stack
            structure = self.layers[0].prepare(
                neighborhoods, batch, num, output_ranks=self._last_layer_ranks
            )
        counts = torch.stack([torch.bincount(b, minlength=num) for b in batch], dim=1)
        return CellularInputs(x, pe, batch, tuple(membership), structure, counts)

    def structure_transform(self) -> PrepareStructure:
        """Return a transform that prepares a complex's structure once for this model.

        ``prepared = model.structure_transform()(complex_)`` stores with the complex what
        :meth:`prepare` derives from its structure (:class:`PrepareStructure`); ``model(prepared)``
        then reuses it at every call. For a complex trained or evaluated alone (a transductive
        task's graph, full batch); a model of another configuration refuses it.

        Returns
        -------
        PrepareStructure
            The transform.
        """
        return PrepareStructure(self)

    @fill_doc
    def encode(self, data: ComplexData | CellularInputs) -> list[Tensor]:
        """Hidden features of every cell after the last layer (and the final LayerNorm).

        %(complex_data_parameters)s

        Returns
        -------
        list of torch.Tensor
            ``h[r]`` of shape ``(n_r, hidden_channels)`` for ``r = 0..max_rank``.
        """
        return self._encode(self._prepared(data), None)

    @property
    def _last_layer_ranks(self) -> tuple[int, ...] | None:
        """Ranks the last layer updates in :meth:`forward`: the readout ranks (``None``: all)."""
        if self.readouts is None or len(self.readout_ranks) == self.max_rank + 1:
            return None
        return tuple(sorted(self.readout_ranks))

    def _encode(self, inputs: CellularInputs, ranks: tuple[int, ...] | None) -> list[Tensor | None]:
        """:meth:`encode`; with ``ranks``, the last layer updates only those (others ``None``)."""
        h = self._embed(inputs)
        if self.embedding_norms is not None:
            h = [norm(hr) for norm, hr in zip(self.embedding_norms, h)]
        h = [self.embedding_dropout(hr) for hr in h]
        for layer in self.layers[:-1]:
            h = layer(h, inputs.structure)
        if ranks is not None and inputs.structure.output_ranks != ranks:
            ranks = None  # prepared by another model: the full last layer (same result)
        h = self.layers[-1](h, inputs.structure, ranks=ranks)
        if self.final_norms is None:
            return h
        return [None if hr is None else norm(hr) for norm, hr in zip(self.final_norms, h)]

    def _readout_features(self, inputs: CellularInputs) -> list[Tensor | None]:
        """Hidden features of the readout ranks (the last layer skips the arrows into the others)."""
        return self._encode(inputs, self._last_layer_ranks)

    def _require_readouts(self) -> None:
        if self.readouts is None:
            raise ValueError(
                "this CellularTransformer was built with out_channels=None (an encoder without "
                "readout): call encode(data) for the cell features, or build it with out_channels"
            )

    @fill_doc
    def cell_outputs(self, data: ComplexData | CellularInputs) -> dict[int, Tensor]:
        """Per-cell predictions of the readout ranks (node- or cell-level tasks).

        %(complex_data_parameters)s

        Returns
        -------
        dict of int to torch.Tensor
            ``{rank: (n_rank, out_channels)}`` for every readout rank.
        """
        self._require_readouts()
        h = self._readout_features(self._prepared(data))
        return {r: self.readouts[str(r)](h[r]) for r in self.readout_ranks}

    @fill_doc
    def forward(self, data: ComplexData | CellularInputs) -> Tensor | dict[int, Tensor]:
        """Predict one output per complex (or per cell when ``outputs`` lists ranks).

        The readout MLP runs on every cell of the readout ranks, then a global add (or mean)
        pool over the cells of each complex; several readout ranks are summed (Appendix A).
        The last layer updates only the readout ranks (its arrows into the other ranks and
        their FFNs are skipped: nothing reads them; same result as :meth:`encode`, which
        updates every rank); their parameters then get no gradient, as the final norms of
        ranks that are not read out.
        With ``readout_options={"before_pooling": False}`` the cells are pooled first, then the
        MLP.
        ``forward(data)`` is ``forward(prepare(data))``: the second form is the one to compile
        (``torch.compile(model, dynamic=True)(model.prepare(batch))``).

        %(complex_data_parameters)s

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            Predictions (``outputs="complex"``), one row per complex, empty complexes included;
            with ``outputs`` given as ranks the dict of :meth:`cell_outputs`.
        """
        inputs = self._prepared(data)
        num = inputs.num_complexes
        if not self.readout_before_pooling:  # MLP(Σ_c h_c) per readout rank
            self._require_readouts()
            h = self._readout_features(inputs)
            return sum(
                self.readouts[str(r)](segment_pool(h[r], inputs.batch[r], num, self.pooling))
                for r in self.readout_ranks
            )
        outputs = self.cell_outputs(inputs)
        if self.outputs != "complex":
            return outputs
        pooled = 0
        for rank, out in outputs.items():
            pooled = pooled + segment_pool(out, inputs.batch[rank], num, self.pooling)
        return pooled
