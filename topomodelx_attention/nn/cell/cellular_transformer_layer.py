"""Cellular Transformer layers (Ballester et al., "Attending to Topological Spaces").

Two pre-norm layers (Appendix A):

* :class:`CellularTransformerLayer` with ``attention="pairwise"`` (§4.2.1, Eq. 2): one
  attention block ``A_{ks→kt}`` with its own Q/K/V per arrow ``ks → kt`` of a tensor diagram
  (§4.3); outputs for the same target rank are summed into the residual, then a per-rank
  LayerNorm + FFN.
* ``attention="general"`` (§4.2.2): all cells of all ranks form one token set; Q/K are shared,
  values have one projection per rank, and the neighbourhood is the block matrix of Eq. 3
  assembled from the same tensor diagram.

Both take explicit per-rank cochains and neighbourhood tensors (TopoModelX style) and use the
package's shared attention core (:class:`~topomodelx_attention.nn.attention.MultiHeadAttention`).

Execution of pairwise sparse attention: every arrow keeps its own block (parameters
``blocks[key].lin_query/lin_key/lin_value/lin_out``, one softmax per arrow), but the sparse
arrows of a layer run together: one query GEMM and one key/value GEMM per rank with the weights
of the arrows that read the rank stacked, one call of the core's ``sparse_attention`` on the
joined edge lists, and one output GEMM per target rank.

Preparation and computation (``torch.compile``): everything a layer derives from the *structure*
of a batch (neighbourhoods converted to index pairs, the joined index plan of the sparse arrows,
the padded layouts of the dense / linear kinds, the block neighbourhood of general attention) is
built once per forward by :meth:`CellularTransformerLayer.prepare` into a
:class:`CellStructure` and shared by every layer of a stack. A layer called with a
:class:`CellStructure` only runs tensor operations with no data-dependent size, so a compiled
stack has no graph break inside attention and no recompilation when the batch size changes.

Neighbourhood values
--------------------
The ``sparse`` kind uses a neighbourhood as a **mask**: only its pattern counts, its values
(and their signs) are ignored. The ``dense`` kind (and the same-rank arrows of ``mixed``) adds
the values as a bias ``θ·N`` to the logits. A *signed* matrix there (a TopoNetX Hodge / up /
down Laplacian, a signed incidence) makes the bias depend on the arbitrary orientation of the
cells, so the model is no longer invariant to re-orienting the complex; the layer warns
(:class:`UserWarning`) when a bias matrix has negative entries. Use the unsigned
``adjacency_r`` / ``coadjacency_r`` / ``incidence_r`` for dense attention.
"""

from __future__ import annotations

import inspect
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from topomodelx_attention.nn.attention import (
    MultiHeadAttention,
    NeighborhoodIndex,
    PaddedLayout,
    SparsePlan,
    padded_layout,
    prepare_neighborhood,
    sparse_attention,
    sparse_plan,
)

__all__ = [
    "ATTENTION_MECHANISMS",
    "BIAS_SCALES",
    "CELL_KINDS",
    "Arrow",
    "ArrowNeighborhoods",
    "CellStructure",
    "CellularTransformerLayer",
    "default_tensor_diagram",
    "parse_tensor_diagram",
    "to_coalesced_coo",
]

ATTENTION_MECHANISMS = ("pairwise", "general")
CELL_KINDS = ("sparse", "dense", "mixed", "linear")
"""Attention kinds: ``mixed`` is dense inside a rank and sparse across ranks (§4.2.1, •=c)."""
BIAS_SCALES = ("per_head", "shared")
"""θ of the dense bias θ·N: one per head, or one scalar shared by the heads (the paper's θ)."""

_ARROW = re.compile(r"^(?P<name>[a-z_]+)_(?P<rank>\d+)(?P<t>\.T)?$")
_CORE_OPTIONS = frozenset(inspect.signature(MultiHeadAttention).parameters)


@dataclass(frozen=True)
class Arrow:
    """One arrow ``source → target`` of a tensor diagram with its neighbourhood ``N``.

    An arrow is identified by ``(source, target, neighborhood, transpose)``: a diagram may hold
    several arrows between the same ranks through different neighbourhoods (e.g. CAN-style
    ``1 → 1`` through ``adjacency_1`` and through ``coadjacency_1``).

    Attributes
    ----------
    source, target : int
        Source rank ``ks`` and target rank ``kt``.
    neighborhood : str
        Key of the ``ComplexData`` neighbourhood (e.g. ``"incidence_1"``).
    transpose : bool
        Use ``Nᵀ``: the attention mask must have shape ``(n_kt, n_ks)``.
    """

    source: int
    target: int
    neighborhood: str
    transpose: bool = False

    @property
    def name(self) -> str:
        """Ranks of the arrow, e.g. ``"1->0"`` (not unique when two arrows join the same ranks)."""
        return f"{self.source}->{self.target}"

    @property
    def label(self) -> str:
        """Full description, e.g. ``"0->1:incidence_1.T"`` (unique in a diagram)."""
        return f"{self.name}:{self.neighborhood}{'.T' if self.transpose else ''}"

    def matrix(self, neighborhoods: Mapping[str, Tensor]) -> Tensor:
        """Return the ``(n_target, n_source)`` neighbourhood of this arrow.

        Parameters
        ----------
        neighborhoods : mapping of str to torch.Tensor
            Neighbourhoods by key: sparse tensors of any layout (COO, CSR, CSC, BSR) or dense
            tensors (zeros are non-neighbours).

        Returns
        -------
        torch.Tensor, shape = (n_target, n_source)
            ``N`` or its transpose, as a coalesced sparse COO tensor.
        """
        if self.neighborhood not in neighborhoods:
            raise ValueError(
                f"arrow {self.label} needs the neighbourhood {self.neighborhood!r}, which was not "
                f"given (available: {sorted(neighborhoods)})"
            )
        matrix = to_coalesced_coo(neighborhoods[self.neighborhood], self.neighborhood)
        return matrix.t().coalesce() if self.transpose else matrix


def to_coalesced_coo(matrix: Tensor, name: str = "neighborhood") -> Tensor:
    """Convert a neighbourhood of any torch layout to a coalesced sparse COO matrix.

    Parameters
    ----------
    matrix : torch.Tensor, shape = (n_rows, n_cols)
        Sparse COO / CSR / CSC / BSR / BSC tensor, or a dense tensor (its zero entries are not
        neighbours).
    name : str, default="neighborhood"
        Name used in error messages.

    Returns
    -------
    torch.Tensor, shape = (n_rows, n_cols)
        Coalesced ``torch.sparse_coo`` tensor (the input itself when it already is one).
    """
    if not isinstance(matrix, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(matrix).__name__}")
    if matrix.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(matrix.shape)}")
    if matrix.layout == torch.strided:
        matrix = matrix.to_sparse()
    elif matrix.layout != torch.sparse_coo:
        matrix = matrix.to_sparse_coo()
    return matrix if matrix.is_coalesced() else matrix.coalesce()


class ArrowNeighborhoods(dict):
    """Neighbourhood of every arrow, converted once per forward: ``{Arrow: (n_t, n_s) COO}``.

    Built by :meth:`CellularTransformerLayer.prepare_neighborhoods`; a stack of layers with the
    same tensor diagram shares it (the model converts once, not once per layer).
    """


@dataclass(frozen=True)
class _FusedSlots:
    """Row layout of several sparse arrows joined into one attention problem.

    The queries of every arrow form one table: rank ``r`` holds ``n_r × len(targets[r])`` rows,
    row ``q_offsets[r] + t · len(targets[r]) + i`` being the query of cell ``t`` for the
    ``i``-th arrow with target ``r`` (the row-major layout of ``X_r [Q_a1 | Q_a2 | …]``). Keys
    and values form a second table laid out in the same way by source rank. An entry ``(t, s)``
    of the neighbourhood of arrow ``a`` becomes one edge between its query row and its key row;
    the segment softmax over query rows is then the softmax of each arrow separately (Eq. 2).

    Attributes
    ----------
    targets, sources : tuple of tuple of Arrow
        Per rank: the arrows whose target (source) it is, in slot order.
    q_offsets, kv_offsets : tuple of int
        First query (key) row of every rank, and the total number of rows last (symbolic
        sizes under ``torch.compile``).
    """

    targets: tuple[tuple[Arrow, ...], ...]
    sources: tuple[tuple[Arrow, ...], ...]
    q_offsets: tuple[int, ...]
    kv_offsets: tuple[int, ...]


def _fused_slots(arrows: Sequence[Arrow], sizes: Sequence[int]) -> _FusedSlots:
    """Row layout (:class:`_FusedSlots`) of ``arrows`` on cochains with ``sizes[r]`` cells per rank."""
    ranks = range(len(sizes))
    targets = tuple(tuple(a for a in arrows if a.target == r) for r in ranks)
    sources = tuple(tuple(a for a in arrows if a.source == r) for r in ranks)
    q_offsets, kv_offsets = [0], [0]
    for r in ranks:
        q_offsets.append(q_offsets[-1] + sizes[r] * len(targets[r]))
        kv_offsets.append(kv_offsets[-1] + sizes[r] * len(sources[r]))
    return _FusedSlots(targets, sources, tuple(q_offsets), tuple(kv_offsets))


def _fused_plan(
    arrows: Sequence[Arrow], neighborhoods: Mapping[Arrow, Tensor], sizes: Sequence[int]
) -> NeighborhoodIndex:
    """Join the edge lists of the sparse ``arrows`` (rows of :class:`_FusedSlots`), sorted by query row.

    Parameters
    ----------
    arrows : sequence of Arrow
        The sparse arrows run in one call.
    neighborhoods : mapping of Arrow to torch.Tensor
        Coalesced COO neighbourhood of every arrow.
    sizes : sequence of int
        Cells of every rank.

    Returns
    -------
    NeighborhoodIndex
        ``(query row, key row)`` of every entry of every arrow, shape
        ``(q_offsets[-1], kv_offsets[-1])``.
    """
    slots = _fused_slots(arrows, sizes)
    targets, sources, q_offsets, kv_offsets = (
        slots.targets,
        slots.sources,
        slots.q_offsets,
        slots.kv_offsets,
    )
    index_query, index_key = [], []
    for arrow in arrows:
        matrix = neighborhoods[arrow]
        expected = (sizes[arrow.target], sizes[arrow.source])
        if tuple(matrix.shape) != expected:
            raise ValueError(
                f"neighbourhood of arrow {arrow.label} has shape {tuple(matrix.shape)} but must be "
                f"(n_target, n_source) = {expected}; neighbourhoods are oriented (target, source)"
            )
        t, s = matrix.indices()
        slots_t, slots_s = len(targets[arrow.target]), len(sources[arrow.source])
        index_query.append(
            t * slots_t + (q_offsets[arrow.target] + targets[arrow.target].index(arrow))
        )
        index_key.append(
            s * slots_s + (kv_offsets[arrow.source] + sources[arrow.source].index(arrow))
        )
    index_query, index_key = torch.cat(index_query), torch.cat(index_key)
    # edges sorted by query row: the scatters of the attention kernels then write in order
    order = torch.argsort(index_query, stable=True)
    return prepare_neighborhood(
        (index_query[order], index_key[order]),
        q_offsets[-1],
        kv_offsets[-1],
        name="joined sparse arrows",
    )


@dataclass(frozen=True)
class CellStructure:
    """Everything a layer stack derives from the structure of a batch, built once per forward.

    Built by :meth:`CellularTransformerLayer.prepare` (eagerly: sparse tensors, index checks and
    data-dependent sizes), shared by every layer of a stack with the same configuration, and
    passed to :meth:`CellularTransformerLayer.forward` in place of the neighbourhoods. It holds
    only index tensors and layouts, so a ``torch.compile``-d stack traces without graph breaks.

    Attributes
    ----------
    neighborhoods : tuple of (NeighborhoodIndex or None)
        Per arrow of the tensor diagram (same order): its ``(n_target, n_source)``
        neighbourhood (sparse mask, or the θ·N bias of the dense kind) for arrows attended one
        by one; ``None`` for linear arrows, arrows of the joined sparse call, general
        attention, or an arrow with an empty rank.
    fused : NeighborhoodIndex or None
        Joined edge list of the sparse arrows run in one call (pairwise attention).
    layouts : tuple of PaddedLayout
        Per rank: padding of the cells per complex (for dense / linear arrows; empty when
        no arrow needs it).
    general : NeighborhoodIndex or None
        Block neighbourhood of Eq. 3 on the cells of all ranks, rank-major (general sparse or
        dense attention).
    general_layout : PaddedLayout or None
        Padding of the cells of all ranks per complex (general dense / linear attention).
    fused_plan : SparsePlan or None
        CSR plan of ``fused`` for the fused CPU kernel (built on CPU only; shared by every
        layer, forward and backward).
    """

    neighborhoods: tuple[NeighborhoodIndex | None, ...]
    fused: NeighborhoodIndex | None
    layouts: tuple[PaddedLayout, ...]
    general: NeighborhoodIndex | None
    general_layout: PaddedLayout | None
    fused_plan: SparsePlan | None = None


def default_tensor_diagram(max_rank: int) -> list[Arrow]:
    """Return the paper's tensor diagram (Figure 2, §4.2.1) for ranks ``0..max_rank``.

    ``0 → 0`` through the upper adjacency, ``k → k`` through the lower adjacency for
    ``k > 0``, ``k+1 → k`` through the unsigned incidence ``incidence_{k+1}`` and ``k → k+1``
    through its transpose.

    Parameters
    ----------
    max_rank : int
        Highest rank.

    Returns
    -------
    list of Arrow
        The arrows.
    """
    arrows = [Arrow(0, 0, "adjacency_0")]
    for k in range(1, max_rank + 1):
        arrows.append(Arrow(k, k, f"coadjacency_{k}"))
    for k in range(max_rank):
        arrows.append(Arrow(k + 1, k, f"incidence_{k + 1}"))
        arrows.append(Arrow(k, k + 1, f"incidence_{k + 1}", transpose=True))
    return arrows


def parse_tensor_diagram(
    diagram: Sequence[Arrow | tuple | str] | None, max_rank: int
) -> list[Arrow]:
    """Normalise a tensor-diagram description into a list of :class:`Arrow`.

    Parameters
    ----------
    diagram : sequence or None
        ``None`` for :func:`default_tensor_diagram`; otherwise items that are :class:`Arrow`,
        tuples ``(source, target, "key")`` where ``"key"`` may end in ``.T`` for a transpose
        (e.g. ``(0, 1, "incidence_1.T")``), or strings ``"0->1:incidence_1.T"``. Several arrows
        may join the same ranks through different neighbourhoods.
    max_rank : int
        Highest rank the layer handles.

    Returns
    -------
    list of Arrow
        Validated arrows (shapes are checked against the neighbourhood names).
    """
    if diagram is None:
        return default_tensor_diagram(max_rank)
    arrows: list[Arrow] = []
    for item in diagram:
        if isinstance(item, Arrow):
            arrow = item
        else:
            if isinstance(item, str):
                match = re.match(r"^\s*(\d+)\s*->\s*(\d+)\s*:\s*(\S+)\s*$", item)
                if not match:
                    raise ValueError(
                        f"cannot parse arrow {item!r}; write e.g. '0->1:incidence_1.T'"
                    )
                item = (int(match.group(1)), int(match.group(2)), match.group(3))
            if isinstance(item, list):
                item = tuple(item)  # YAML gives lists
            if not (isinstance(item, tuple) and len(item) == 3):
                raise TypeError(
                    f"arrow {item!r} must be an Arrow, (source, target, key) or a string"
                )
            source, target, key = item
            transpose = key.endswith(".T")
            arrow = Arrow(int(source), int(target), key[:-2] if transpose else key, transpose)
        match = _ARROW.match(arrow.neighborhood + (".T" if arrow.transpose else ""))
        if not match:
            raise ValueError(
                f"arrow {arrow.name}: {arrow.neighborhood!r} is not a neighbourhood key"
            )
        for rank in (arrow.source, arrow.target):
            if not 0 <= rank <= max_rank:
                raise ValueError(f"arrow {arrow.name} uses rank {rank} outside 0..{max_rank}")
        name, rank = match.group("name"), int(match.group("rank"))
        rows, cols = (rank - 1, rank) if "incidence" in name else (rank, rank)
        if arrow.transpose:
            rows, cols = cols, rows
        if (rows, cols) != (arrow.target, arrow.source):
            raise ValueError(
                f"arrow {arrow.name} needs an (n_{arrow.target}, n_{arrow.source}) matrix, but "
                f"{arrow.neighborhood}{'.T' if arrow.transpose else ''} is (n_{rows}, n_{cols})"
            )
        if arrow in arrows:
            raise ValueError(f"arrow {arrow.label} appears twice in the tensor diagram")
        arrows.append(arrow)
    if not arrows:
        raise ValueError("the tensor diagram has no arrow")
    return arrows


def _module_keys(arrows: Sequence[Arrow]) -> list[str]:
    """Return the module key of every arrow: ``"1->0"``, or ``"1->1:adjacency_1"`` when ranks repeat."""
    counts: dict[str, int] = {}
    for arrow in arrows:
        counts[arrow.name] = counts.get(arrow.name, 0) + 1
    return [
        arrow.name if counts[arrow.name] == 1 else arrow.label.replace(".T", "_T")  # no "." in keys
        for arrow in arrows
    ]


class _FeedForward(nn.Module):
    """``Dropout(FFN_2(Dropout(ReLU(FFN_1(x)))))`` (Appendix A, steps 5–6 without the norm)."""

    def __init__(self, channels: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.lin1 = nn.Linear(channels, hidden)
        self.lin2 = nn.Linear(hidden, channels)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.lin2(self.dropout(torch.relu(self.lin1(x)))))


class _HeadwiseLinear(nn.Module):
    """Block-diagonal linear map: head ``h`` maps its own input slice ``X^h`` (§4.2.1, split heads).

    ``y[:, h] = X[:, h] W_h (+ b_h)`` with ``W_h`` of shape ``(d / heads, d / heads)``: the value
    projection of one rank in the paper's split-input multi-head general attention.
    """

    def __init__(self, channels: int, heads: int, bias: bool) -> None:
        super().__init__()
        self.heads = heads
        width = channels // heads
        bound = 1.0 / math.sqrt(width)
        self.weight = nn.Parameter(torch.empty(heads, width, width).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(heads, width)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        out = torch.einsum(
            "nhi,hio->nho", x.reshape(x.shape[0], self.heads, self.weight.shape[1]), self.weight
        )
        return out if self.bias is None else out + self.bias


def _check_dropout(value: float, name: str) -> float:
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def _core_options(attention_scale: float | None, output_projection: bool, bias_scale: str) -> dict:
    """Keyword arguments of :class:`MultiHeadAttention` for the paper-exact switches."""
    if attention_scale is not None:
        attention_scale = float(attention_scale)
        if not attention_scale > 0.0:
            raise ValueError(
                f"attention_scale must be positive (or None for 1/sqrt(d)), got {attention_scale}"
            )
    if not isinstance(output_projection, bool):
        raise TypeError(f"output_projection must be a bool, got {output_projection!r}")
    if bias_scale not in BIAS_SCALES:
        raise ValueError(f"bias_scale must be one of {BIAS_SCALES}, got {bias_scale!r}")
    options: dict = {"scale": attention_scale}
    if not output_projection:
        if "output_projection" not in _CORE_OPTIONS:
            raise ValueError(
                "output_projection=False needs MultiHeadAttention(output_projection=...), which this "
                "version of the attention core does not have"
            )
        options["output_projection"] = False
    if bias_scale != "per_head":
        if "bias_scale" in _CORE_OPTIONS:
            options["bias_scale"] = bias_scale
        elif "bias_scale_per_head" in _CORE_OPTIONS:
            options["bias_scale_per_head"] = False
        else:  # pragma: no cover - depends on the attention core
            raise ValueError(
                "bias_scale='shared' is not supported by this version of the attention core"
            )
    return options


class CellularTransformerLayer(nn.Module):
    """One pre-norm Cellular Transformer layer on ranks ``0..max_rank`` (Appendix A).

    Parameters
    ----------
    channels : int
        Hidden width ``d^h`` of every rank (the paper uses the same width for all ranks).
    heads : int, default=8
        Attention heads (must divide ``channels``).
    max_rank : int, default=2
        Highest rank handled; ranks without cells in the input are skipped.
    attention : {"pairwise", "general"}, default="pairwise"
        Pairwise (§4.2.1) or general (§4.2.2) cellular attention.
    kind : {"sparse", "dense", "mixed", "linear"}, default="sparse"
        ``sparse``: softmax over the neighbours given by ``N`` (a mask; values ignored).
        ``dense``: all cells of the complex with the bias ``θ·N``. ``mixed`` (pairwise only):
        dense for ``k → k`` arrows, sparse across ranks. ``linear``: Performer/FAVOR+ in place
        of dense (no bias), linear in the number of cells.
    tensor_diagram : sequence, optional
        Arrows (see :func:`parse_tensor_diagram`); default :func:`default_tensor_diagram`.
        Pairwise attention builds one block per arrow, also for several arrows between the same
        ranks; general attention adds such arrows into one block of ``N`` (Eq. 3).
    ffn_channels : int, optional
        Inner width of the FFN (default ``channels``, as Table 3).
    dropout : float, default=0.0
        Dropout on the output of every sublayer (each attention block, the FFN) and inside the
        FFN (Appendix A steps 3 and 6).
    attention_dropout : float, default=0.0
        Dropout on the attention weights.
    bias : bool, default=False
        Bias in the Q/K/V/O projections (the paper: none).
    num_random_features : int, optional
        Random features of the ``linear`` kind.
    attention_scale : float, optional
        Logit scale. ``None`` (default): ``1/sqrt(d_head)`` as usual in transformers; ``1.0``:
        the paper's Eq. 2 logits ``X_t Q (X_s K)ᵀ`` without scaling.
    output_projection : bool, default=True
        ``True``: heads are concatenated and mixed by an output projection ``W_O`` (standard
        multi-head attention). ``False``: the paper's multi-head (§4.2.1): each head attends on
        its own slice of the cochains and the heads are concatenated without ``W_O``; the
        per-rank values of general attention are then block-diagonal (one ``d/heads`` square
        map per head). Needs an attention core with this option.
    bias_scale : {"per_head", "shared"}, default="per_head"
        θ of the dense bias ``θ·N``: one per head, or one shared scalar as in the paper's
        ``φ(N) = θN``.
    """

    def __init__(
        self,
        channels: int,
        *,
        heads: int = 8,
        max_rank: int = 2,
        attention: str = "pairwise",
        kind: str = "sparse",
        tensor_diagram: Sequence[Arrow | tuple | str] | None = None,
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        bias: bool = False,
        num_random_features: int | None = None,
        attention_scale: float | None = None,
        output_projection: bool = True,
        bias_scale: str = "per_head",
    ) -> None:
        super().__init__()
        if attention not in ATTENTION_MECHANISMS:
            raise ValueError(f"attention must be one of {ATTENTION_MECHANISMS}, got {attention!r}")
        if kind not in CELL_KINDS:
            raise ValueError(f"kind must be one of {CELL_KINDS}, got {kind!r}")
        if attention == "general" and kind == "mixed":
            raise ValueError(
                "kind='mixed' is a pairwise kind; general attention takes sparse, dense or linear"
            )
        if int(max_rank) < 0:
            raise ValueError(f"max_rank must be non-negative, got {max_rank}")
        self.channels = int(channels)
        self.heads = int(heads)
        if self.heads < 1 or self.channels % self.heads:
            raise ValueError(f"heads={heads} must be positive and divide channels={channels}")
        self.max_rank = int(max_rank)
        self.attention = attention
        self.kind = kind
        self.arrows = parse_tensor_diagram(tensor_diagram, self.max_rank)
        self.block_keys = _module_keys(self.arrows)
        core = _core_options(attention_scale, output_projection, bias_scale)
        self.attention_scale = core["scale"]
        self.output_projection = output_projection
        self.bias_scale_mode = bias_scale  # ("per_head" | "shared"); θ itself lives in the blocks
        dropout = _check_dropout(dropout, "dropout")
        attention_dropout = _check_dropout(attention_dropout, "attention_dropout")
        ffn_channels = self.channels if ffn_channels is None else int(ffn_channels)
        ranks = range(self.max_rank + 1)
        self.norm_attention = nn.ModuleList(nn.LayerNorm(self.channels) for _ in ranks)
        self.norm_ffn = nn.ModuleList(nn.LayerNorm(self.channels) for _ in ranks)
        self.ffn = nn.ModuleList(_FeedForward(self.channels, ffn_channels, dropout) for _ in ranks)
        self.dropout = nn.Dropout(dropout)

        def block(arrow_kind: str, value_projection: bool = True) -> MultiHeadAttention:
            return MultiHeadAttention(
                self.channels,
                self.channels,
                self.heads,
                kind=arrow_kind,
                bias=bias,
                dropout=attention_dropout if arrow_kind != "linear" else 0.0,
                num_random_features=num_random_features,
                value_projection=value_projection,
                **core,
            )

        self._bias_arrows: tuple[Arrow, ...] = ()
        self._fused_arrows: tuple[Arrow, ...] = ()
        self._block_of = dict(zip(self.arrows, self.block_keys))
        self.attention_dropout = attention_dropout
        if attention == "pairwise":
            self.blocks = nn.ModuleDict()
            for arrow, key in zip(self.arrows, self.block_keys):
                arrow_kind = kind
                if kind == "mixed":
                    arrow_kind = "dense" if arrow.source == arrow.target else "sparse"
                self.blocks[key] = block(arrow_kind)
            self._bias_arrows = tuple(
                a for a, k in zip(self.arrows, self.block_keys) if self.blocks[k].kind == "dense"
            )
            # sparse arrows with plain Q/K/V/O projections run as one attention problem
            self._fused_arrows = tuple(
                a
                for a, k in zip(self.arrows, self.block_keys)
                if _fusable(self.blocks[k], output_projection)
            )
        else:
            self.general = block(kind, value_projection=False)
            if output_projection:
                self.values = nn.ModuleList(
                    nn.Linear(self.channels, self.channels, bias=bias) for _ in ranks
                )
            else:
                self.values = nn.ModuleList(
                    _HeadwiseLinear(self.channels, self.heads, bias) for _ in ranks
                )
            if kind == "dense":
                self._bias_arrows = tuple(self.arrows)

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        arrows = ", ".join(a.label for a in self.arrows)
        return (
            f"channels={self.channels}, heads={self.heads}, max_rank={self.max_rank}, "
            f"attention={self.attention!r}, kind={self.kind!r}, arrows=[{arrows}], "
            f"attention_scale={self.attention_scale}, output_projection={self.output_projection}, "
            f"bias_scale={self.bias_scale_mode!r}"
        )

    # ------------------------------------------------------------------ neighbourhoods
    def prepare_neighborhoods(self, neighborhoods: Mapping[str, Tensor]) -> ArrowNeighborhoods:
        """Convert the neighbourhoods of every arrow once (any layout → coalesced COO).

        Also warns (``UserWarning``) when a matrix used as a dense bias ``θ·N`` has negative
        entries (a signed Laplacian or incidence gives an orientation-dependent bias). Call it
        once and pass the result to every layer of a stack with the same tensor diagram.

        Parameters
        ----------
        neighborhoods : mapping of str to torch.Tensor
            Neighbourhoods by ``ComplexData`` key, in any torch sparse layout or dense.

        Returns
        -------
        ArrowNeighborhoods
            ``{arrow: (n_target, n_source) coalesced COO}`` for every arrow.
        """
        if isinstance(neighborhoods, ArrowNeighborhoods):
            missing = [arrow.label for arrow in self.arrows if arrow not in neighborhoods]
            if missing:
                raise ValueError(
                    f"the prepared neighbourhoods lack the arrows {missing} of this layer"
                )
            return neighborhoods
        converted: dict[str, Tensor] = {}
        prepared = ArrowNeighborhoods()
        for arrow in self.arrows:
            key = arrow.neighborhood
            if key not in converted:
                converted[key] = replace(arrow, transpose=False).matrix(neighborhoods)
            prepared[arrow] = converted[key].t().coalesce() if arrow.transpose else converted[key]
        if not torch.compiler.is_compiling():
            for arrow in self._bias_arrows:
                values = prepared[arrow].values()
                if values.numel() and bool((values < 0).any()):
                    warnings.warn(
                        f"the neighbourhood {arrow.neighborhood!r} of arrow {arrow.label} has negative "
                        "entries: dense attention adds θ·N to the logits, so a signed matrix (e.g. a "
                        "TopoNetX Hodge/up/down Laplacian or a signed incidence) gives a bias that "
                        "depends on the cells' orientations. Use an unsigned neighbourhood "
                        "(adjacency_r, coadjacency_r, incidence_r) or kind='sparse' (a mask: values "
                        "ignored).",
                        UserWarning,
                        stacklevel=2,
                    )
        return prepared

    # ------------------------------------------------------------------ structure
    def _active_fused(self, sizes: Sequence[int]) -> tuple[Arrow, ...]:
        """Arrows of the joined sparse call on cochains of ``sizes`` (both ranks non-empty)."""
        return tuple(a for a in self._fused_arrows if sizes[a.source] and sizes[a.target])

    def prepare(
        self,
        neighborhoods: Mapping[str, Tensor] | ArrowNeighborhoods,
        batch: Sequence[Tensor],
        num_complexes: int | None = None,
    ) -> CellStructure:
        """Build the :class:`CellStructure` of a batch (eager; once per forward, for a whole stack).

        Converts and checks the neighbourhoods (:meth:`prepare_neighborhoods`), joins the edge
        lists of the sparse arrows, and pads the cells of every rank per complex where a dense
        or linear kernel needs it. The result depends on the configuration (kind, attention,
        tensor diagram), not on the parameters: every layer of a stack built with the same
        options can use it.

        Parameters
        ----------
        neighborhoods : mapping of str to torch.Tensor, or ArrowNeighborhoods
            As in :meth:`forward`.
        batch : sequence of torch.Tensor
            ``batch[r]`` of shape ``(n_r,)``: sorted complex index of every r-cell, for
            ``r = 0..max_rank`` (zeros for one complex).
        num_complexes : int, optional
            Number of complexes (inferred when omitted).

        Returns
        -------
        CellStructure
            The index tensors and layouts the layers read.
        """
        batch = list(batch)
        if len(batch) != self.max_rank + 1 or not all(
            isinstance(b, Tensor) and b.dim() == 1 for b in batch
        ):
            raise ValueError(f"batch must hold one (n_r,) vector per rank 0..{self.max_rank}")
        if num_complexes is None:
            num_complexes = max((int(b.max()) + 1 for b in batch if b.numel()), default=1)
        sizes = tuple(int(b.shape[0]) for b in batch)
        prepared = self.prepare_neighborhoods(neighborhoods)
        device = batch[0].device
        kinds = (
            {self.kind}
            if self.attention == "general"
            else {block.kind for block in self.blocks.values()}
        )
        layouts: tuple[PaddedLayout, ...] = ()
        if self.attention == "pairwise" and kinds & {"dense", "linear"}:
            layouts = tuple(padded_layout(b, num_complexes) for b in batch)
        per_arrow: list[NeighborhoodIndex | None] = [None] * len(self.arrows)
        fused = general = general_layout = fused_plan = None
        if self.attention == "pairwise":
            active = self._active_fused(sizes)
            if active:
                fused = _fused_plan(active, prepared, sizes).to(device)
                if device.type == "cpu":  # the transposed pattern serves backward only
                    fused_plan = sparse_plan(fused, self.heads, transposed=torch.is_grad_enabled())
            for i, (arrow, key) in enumerate(zip(self.arrows, self.block_keys)):
                empty = sizes[arrow.source] == 0 or sizes[arrow.target] == 0
                if empty or arrow in self._fused_arrows or self.blocks[key].kind == "linear":
                    continue
                per_arrow[i] = prepare_neighborhood(
                    prepared[arrow],
                    sizes[arrow.target],
                    sizes[arrow.source],
                    device=device,
                    name=arrow.label,
                )
        elif sum(sizes):
            offsets = [0]
            for n in sizes:
                offsets.append(offsets[-1] + n)
            if self.kind != "linear":
                matrix = _block_neighborhood(self.arrows, prepared, offsets, device)
                general = prepare_neighborhood(
                    matrix, offsets[-1], offsets[-1], name="block neighbourhood (Eq. 3)"
                )
            if (
                self.kind != "sparse"
            ):  # tokens in rank-major order: the packed layout needs no sorting
                general_layout = padded_layout(torch.cat(batch).to(device), num_complexes)
        return CellStructure(tuple(per_arrow), fused, layouts, general, general_layout, fused_plan)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        x: Sequence[Tensor],
        neighborhoods: Mapping[str, Tensor] | ArrowNeighborhoods | CellStructure,
        batch: Sequence[Tensor] | None = None,
        num_complexes: int | None = None,
    ) -> list[Tensor]:
        """Update the cochains of every rank.

        Parameters
        ----------
        x : sequence of torch.Tensor
            ``x[r]`` of shape ``(n_r, channels)`` for ``r = 0..max_rank`` (0 rows allowed).
        neighborhoods : mapping of str to torch.Tensor, ArrowNeighborhoods or CellStructure
            Neighbourhoods by ``ComplexData`` key (those named by the tensor diagram), sparse
            of any torch layout or dense; or the output of :meth:`prepare_neighborhoods`; or
            the output of :meth:`prepare` (then ``batch`` and ``num_complexes`` are not read:
            the form to use under ``torch.compile``).
        batch : sequence of torch.Tensor, optional
            ``batch[r]`` of shape ``(n_r,)``: sorted complex index of every r-cell (needed for
            ``dense``/``linear`` attention on a batch; ``None`` means a single complex).
        num_complexes : int, optional
            Number of complexes in the batch (inferred when omitted).

        Returns
        -------
        list of torch.Tensor
            Updated ``x[r]``, same shapes.
        """
        x = list(x)
        if len(x) != self.max_rank + 1:
            raise ValueError(
                f"expected {self.max_rank + 1} cochains (ranks 0..{self.max_rank}), got {len(x)}"
            )
        for r, xr in enumerate(x):
            if not isinstance(xr, Tensor) or xr.dim() != 2 or xr.shape[1] != self.channels:
                shape = tuple(xr.shape) if isinstance(xr, Tensor) else type(xr).__name__
                raise ValueError(f"x[{r}] must have shape (n_{r}, {self.channels}), got {shape}")
        if isinstance(neighborhoods, CellStructure):
            structure = neighborhoods
        else:
            if batch is None:
                batch = [torch.zeros(xr.shape[0], dtype=torch.long, device=xr.device) for xr in x]
            batch = list(batch)
            if len(batch) != len(x) or any(b.numel() != xr.shape[0] for b, xr in zip(batch, x)):
                raise ValueError("batch must hold one (n_r,) vector per rank, matching x")
            structure = self.prepare(neighborhoods, batch, num_complexes)
        normed = [norm(xr) for norm, xr in zip(self.norm_attention, x)]
        if self.attention == "pairwise":
            update = self._pairwise(normed, structure)
        else:
            update = self._general(normed, structure)
        out = []
        for r, xr in enumerate(x):
            h = xr + update[r] if update[r] is not None else xr
            out.append(h + self.ffn[r](self.norm_ffn[r](h)))
        return out

    def _pairwise(self, x: list[Tensor], structure: CellStructure) -> list[Tensor | None]:
        update: list[Tensor | None] = [None] * len(x)
        sizes = tuple(xr.shape[0] for xr in x)
        # a rank absent from every complex of the batch: its arrows have nothing to attend
        fused = self._active_fused(sizes)
        if fused:
            self._fused_sparse(x, fused, structure.fused, update, structure.fused_plan)
        for i, (arrow, key) in enumerate(zip(self.arrows, self.block_keys)):
            source, target = x[arrow.source], x[arrow.target]
            if source.shape[0] == 0 or target.shape[0] == 0 or arrow in self._fused_arrows:
                continue
            attention = self.blocks[key]
            layout = None
            if attention.kind != "sparse":
                layout = (structure.layouts[arrow.target], structure.layouts[arrow.source])
            out = self.dropout(attention(target, source, structure.neighborhoods[i], layout=layout))
            update[arrow.target] = (
                out if update[arrow.target] is None else update[arrow.target] + out
            )
        return update

    def _fused_sparse(
        self,
        x: list[Tensor],
        arrows: tuple[Arrow, ...],
        plan: NeighborhoodIndex,
        update: list[Tensor | None],
        csr_plan: SparsePlan | None = None,
    ) -> None:
        """Sparse blocks ``A_{ks→kt}`` of several arrows (Eq. 2) in one attention call.

        Same result as one :class:`MultiHeadAttention` call per arrow (same parameters, one
        softmax per arrow), with one projection GEMM per rank (the query weights of the arrows
        that target the rank and the key / value weights of those that read it, stacked), one sparse attention on the edge lists of all
        arrows joined (``plan``, rows laid out as in :class:`_FusedSlots`) and one output GEMM
        per target rank (``Σ_a O_a W_Oa = [O_a1 | O_a2 | …] [W_Oa1; W_Oa2; …]``). Adds into
        ``update``. ``csr_plan``: the fused CPU kernel's plan of ``plan`` (built once per batch).
        """
        sizes = tuple(xr.shape[0] for xr in x)
        slots = _fused_slots(arrows, sizes)
        blocks = {a: self.blocks[self._block_of[a]] for a in arrows}
        width = self.channels // self.heads
        # one GEMM per rank: X_r [W_Q of its target arrows | W_K, W_V of its source arrows]
        projected, widths = [], []
        for r, xr in enumerate(x):
            lins = [blocks[a].lin_query for a in slots.targets[r]]
            lins += [blocks[a].lin_key for a in slots.sources[r]]
            lins += [blocks[a].lin_value for a in slots.sources[r]]
            n_q, n_kv = len(slots.targets[r]), len(slots.sources[r])
            widths.append((n_q * self.channels, n_kv * self.channels, n_kv * self.channels))
            projected.append(_stacked_linear(xr, lins) if lins else None)
        query, key, value = (
            t.view(-1, self.heads, width) for t in _split_projections(projected, widths)
        )
        out = sparse_attention(
            query,
            key,
            value,
            plan,
            scale=self.attention_scale,
            dropout_p=self.attention_dropout,
            training=self.training,
            plan=csr_plan,
        )
        per_arrow_dropout = self.training and self.dropout.p > 0.0
        for r, targets in enumerate(slots.targets):
            if not targets:
                continue
            rows = out[slots.q_offsets[r] : slots.q_offsets[r + 1]].reshape(
                sizes[r], len(targets) * self.channels
            )
            lins = [blocks[a].lin_out for a in targets]
            if per_arrow_dropout:  # dropout on each block's output, as the per-arrow sum
                pieces = rows.split(self.channels, dim=1)
                result = sum(self.dropout(lin(piece)) for lin, piece in zip(lins, pieces))
            else:
                bias = None if lins[0].bias is None else sum(lin.bias for lin in lins)
                result = F.linear(rows, torch.cat([lin.weight for lin in lins], dim=1), bias)
            update[r] = result if update[r] is None else update[r] + result

    def _general(self, x: list[Tensor], structure: CellStructure) -> list[Tensor | None]:
        sizes = [xr.shape[0] for xr in x]
        if sum(sizes) == 0:
            return [None] * len(x)  # no cell in the whole batch: nothing to attend
        tokens = torch.cat(x, dim=0)  # rank-major: the order of the block neighbourhood (Eq. 3)
        attention = self.general
        query = attention.project_query(tokens)
        key = attention.project_key(tokens)
        width = self.channels // self.heads
        value = torch.cat(
            [lin(xr).reshape(xr.shape[0], self.heads, width) for lin, xr in zip(self.values, x)]
        )
        # tokens need not be sorted by complex: the packed layout places them in their grids
        out = attention.attend(
            query, key, value, structure.general, layout=structure.general_layout
        )
        out = self.dropout(attention.project_output(out))
        return list(torch.split(out, sizes, dim=0))


def _fusable(block: MultiHeadAttention, output_projection: bool) -> bool:
    """Whether a block is plain sparse attention with Q/K/V/O linear maps (see ``_fused_sparse``)."""
    lins = [getattr(block, name, None) for name in ("lin_query", "lin_key", "lin_value", "lin_out")]
    return (
        block.kind == "sparse"
        and output_projection
        and all(isinstance(lin, nn.Linear) for lin in lins)
        and len({lin.bias is None for lin in lins}) == 1
    )


class _SplitProjections(torch.autograd.Function):
    """Gather the query, key and value columns of every rank's projection into three tables.

    ``projected[r]`` is ``X_r [W_Q… | W_K… | W_V…]`` of shape ``(n_r, q_r + k_r + v_r)``;
    the outputs are the row-wise concatenations over the ranks of its three column blocks
    (``(Σ n_r q_r / C, C)`` etc. after a view), each written once. Backward assembles the
    gradient of every ``projected[r]`` with one concatenation (autograd's slicing would
    build a zero-filled full-size gradient per block and add them up).
    """

    @staticmethod
    def forward(ctx, widths, *projected):
        ctx.widths, ctx.rows = widths, [None if p is None else p.shape[0] for p in projected]
        reference = next(p for p in projected if p is not None)
        tables = []
        for part in range(3):
            pieces = _column_blocks(projected, widths, part)
            table = reference.new_empty(sum(piece.numel() for piece in pieces))
            start = 0
            for piece in pieces:  # one copy per block, straight into the table
                table[start : start + piece.numel()].view_as(piece).copy_(piece)
                start += piece.numel()
            tables.append(table)
        return tuple(tables)

    @staticmethod
    def backward(ctx, *grads):
        out, starts = [], [0, 0, 0]
        for rows, w in zip(ctx.rows, ctx.widths):
            if rows is None:
                out.append(None)
                continue
            pieces = []
            for part in range(3):
                size = rows * w[part]
                pieces.append(grads[part][starts[part] : starts[part] + size].view(rows, w[part]))
                starts[part] += size
            out.append(torch.cat(pieces, dim=1))
        return (None, *out)


def _split_projections(
    projected: Sequence[Tensor | None], widths: Sequence[tuple[int, int, int]]
) -> tuple[Tensor, Tensor, Tensor]:
    """Query, key and value tables (flat) from the per-rank stacked projections.

    :class:`_SplitProjections` in eager mode; plain slicing and concatenation while
    ``torch.compile`` traces.
    """
    if torch.compiler.is_compiling():
        return tuple(
            torch.cat([piece.reshape(-1) for piece in _column_blocks(projected, widths, part)])
            for part in range(3)
        )
    return _SplitProjections.apply(tuple(widths), *projected)


def _column_blocks(
    projected: Sequence[Tensor | None], widths: Sequence[tuple[int, int, int]], part: int
) -> list[Tensor]:
    """Column block ``part`` (0: queries, 1: keys, 2: values) of every rank that has one."""
    return [
        p[:, sum(w[:part]) : sum(w[: part + 1])]
        for p, w in zip(projected, widths)
        if p is not None and w[part]
    ]


def _stacked_linear(x: Tensor, lins: Sequence[nn.Linear]) -> Tensor:
    """``x [W_1ᵀ | W_2ᵀ | …] + [b_1 | b_2 | …]``: several linear maps of ``x`` in one GEMM."""
    if len(lins) == 1:
        return lins[0](x)
    bias = None if lins[0].bias is None else torch.cat([lin.bias for lin in lins])
    return F.linear(x, torch.cat([lin.weight for lin in lins]), bias)


def _block_neighborhood(
    arrows: Sequence[Arrow],
    neighborhoods: ArrowNeighborhoods,
    offsets: Sequence[int],
    device: torch.device,
) -> Tensor:
    """Assemble the block matrix ``N`` of Eq. 3: block ``(kt, ks)`` is the sum of ``N_{ks→kt}``."""
    total = offsets[-1]
    rows, cols, vals = [], [], []
    for arrow in arrows:
        matrix = neighborhoods[arrow]
        expected = (
            offsets[arrow.target + 1] - offsets[arrow.target],
            offsets[arrow.source + 1] - offsets[arrow.source],
        )
        if tuple(matrix.shape) != expected:
            raise ValueError(
                f"neighbourhood of arrow {arrow.label} has shape {tuple(matrix.shape)}, expected {expected}"
            )
        idx = matrix.indices().to(device)
        rows.append(idx[0] + offsets[arrow.target])
        cols.append(idx[1] + offsets[arrow.source])
        vals.append(matrix.values().to(device))
    if not rows:
        empty = torch.zeros((2, 0), dtype=torch.long, device=device)
        return torch.sparse_coo_tensor(empty, torch.zeros(0, device=device), (total, total))
    return torch.sparse_coo_tensor(
        torch.stack([torch.cat(rows), torch.cat(cols)]), torch.cat(vals), (total, total)
    ).coalesce()
