r"""Order-k TokenGT (Kim et al., §3) on cell / simplicial / combinatorial complexes and hypergraphs.

The order-k generalisation of TokenGT on any :class:`~topomodelx_attention.data.ComplexData`:
every cell of every rank is represented by tokens carrying the identifiers of its vertices and
a type identifier per rank. ``identifiers="ordered"`` (default) is the paper's construction:
ordered identifier slots :math:`[P_{v_1}, \dots, P_{v_k}]`, one token per vertex ordering that
describes the cell (both directions of an edge, every permutation of a simplex / hyperedge, the
rotations and reflections of the boundary cycle of a ring; see
:mod:`~topomodelx_attention.nn.graph.orderings`), counted before they are built (``max_tokens``).
``identifiers="sum"`` / ``"mean"`` is the one-token-per-cell variant of A.5 with pooled
identifiers :math:`\sum_{v \in \sigma} P_v`: cheaper, but the identifiers of two cells then
only reveal their number of shared vertices, and two different cells on the same vertex set
(two rings of K4 on the same four vertices) get identical tokens — the k-IGN argument of §3
does not hold for it. The ``[graph]`` token, the identifier regularisers, the encoder and the
readouts are :class:`~.tokens.TokenModel`'s, shared with :class:`~.tokengt.TokenGT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.data import ComplexData
from topomodelx_attention.nn._export import prepared_inputs
from topomodelx_attention.nn.attention import PaddedLayout
from topomodelx_attention.nn.common import FeatureEncoder, check_inputs, segment_pool
from topomodelx_attention.nn.graph.orderings import boundary_cycles, cell_orderings, ordering_counts
from topomodelx_attention.nn.graph.token_model import (
    TokenModel,
    TokenModelOptions,
    check_outputs,
    token_model_options,
)
from topomodelx_attention.nn.graph.tokens import TokenBatch, non_negative_int

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["IDENTIFIERS", "MAX_TOKENS", "OrderKTokenGT", "OrderKTokenGTInputs"]

#: Vertex identifiers of a cell in :class:`OrderKTokenGT`: ordered slots (one token per
#: ordering, §3) or pooled over the cell's vertices (one token per cell, A.5).
IDENTIFIERS: tuple[str, ...] = ("ordered", "sum", "mean")
#: Default ``max_tokens`` of :class:`OrderKTokenGT`: most tokens one complex may have with
#: ordered identifiers, counted before they are built. The packaged data sets stay far below
#: (ZINC molecules < 300, MUTAG ≤ 202, GCB ≤ 1,142 with cycle-basis rings); one 8-vertex
#: simplex with its faces has 109,601 (8! = 40,320 orderings of the simplex alone).
MAX_TOKENS: int = 8192


@dataclass(frozen=True)
class OrderKTokenGTInputs:
    """A batch of complexes prepared for :class:`OrderKTokenGT` (:meth:`OrderKTokenGT.prepare`).

    Validated inputs and every index / layout derived from the structure of the batch (cell
    orderings or vertex-cell pairs, token layout): the model's computation on it has no
    data-dependent size or branch, so ``torch.compile`` traces it without graph breaks.

    Attributes
    ----------
    features : tuple of (torch.Tensor or None)
        ``x_r`` of shape ``(n_r, in_channels[r])`` per rank (``None`` for ranks without features).
    node_id : torch.Tensor or None, shape = (n_0, node_id_dim)
        Node identifiers (after the training-time sign flip / eigenvector dropout).
    batch : tuple of torch.Tensor
        ``batch_r`` of shape ``(n_r,)`` per rank (long, on the model's device).
    owners : tuple of torch.Tensor or None
        ``identifiers="ordered"``: the cell of every token of each rank, ``(T_r,)``.
    slots : tuple of torch.Tensor or None
        ``identifiers="ordered"``: the vertex in every identifier slot of every token,
        ``(T_r, max_cell_size)`` (-1 = empty slot).
    size : tuple of torch.Tensor or None
        ``identifiers="ordered"``: the number of vertices of every token's cell, ``(T_r,)``.
    membership : tuple of (tuple of torch.Tensor or None) or None
        ``identifiers="sum"`` / ``"mean"``: ``(vertex, cell)`` index pairs of the vertex-cell
        matrix of every rank ``>= 1`` (``None`` for rank 0 and for ranks without cells).
    layout : PaddedLayout
        Padding of the ``[graph]`` tokens and the tokens of every rank per complex.
    padded : bool
        Whether the encoder runs on the padded grid.
    """

    features: tuple[Tensor | None, ...]
    node_id: Tensor | None
    batch: tuple[Tensor, ...]
    owners: tuple[Tensor, ...] | None
    slots: tuple[Tensor, ...] | None
    size: tuple[Tensor, ...] | None
    membership: tuple[tuple[Tensor, Tensor] | None, ...] | None
    layout: PaddedLayout
    padded: bool

    @property
    def num_complexes(self) -> int:
        """Number of complexes (a symbolic size under ``torch.compile``)."""
        return self.layout.num_complexes



# ----------------------------------------------------------------------------------------------
# order-k TokenGT for complexes
# ----------------------------------------------------------------------------------------------
@fill_doc
class OrderKTokenGT(TokenModel):
    r"""Order-k TokenGT (§3) on cell / simplicial / combinatorial complexes and hypergraphs.

    Every cell :math:`\sigma` of rank ``r = 0..max_rank`` is represented by tokens carrying
    its features, the identifiers of its vertices, a type identifier :math:`E^{(r)}` per rank
    and (ordered identifiers) a size identifier :math:`E_{|\sigma|}`; plus a ``[graph]``
    token per complex, from which the complex-level prediction is read.

    ``identifiers="ordered"`` (default, the paper's §3 construction)
        One token per vertex ordering :math:`(v_1, \dots, v_s)` that describes the cell,

        .. math::
            t_{\sigma, (v_1..v_s)} = W_r X_\sigma + \sum_{a=1}^{s} W_a P_{v_a}
            + E^{(r)} + E_{s},

        i.e. :math:`W [X_\sigma; P_{v_1}; \dots; P_{v_s}; 0; \dots; 0] + E` with
        ``max_cell_size`` = :math:`K` slots shared by every rank, the slots beyond :math:`s`
        zero (a zero identifier; the size identifier :math:`E_s` tells how many are used — in
        the order-k tensor of §3 the type identifier :math:`E^{\gamma}` of the equality
        pattern plays that role). A vertex is the diagonal entry :math:`(v, \dots, v)`: all
        :math:`K` slots hold :math:`P_v` (TokenGT's :math:`[P_v, P_v]`). Orderings per cell
        (:func:`~topomodelx_attention.nn.graph.orderings.cell_orderings`):

        ========================================  ================================
        cell                                      tokens per cell
        ========================================  ================================
        vertex                                    1
        edge                                      2 (both directions, as TokenGT)
        ring of length :math:`L` (2-cell whose    :math:`2L` (rotations ×
        boundary is a cycle of edges)             reflections of the boundary walk)
        other cell of :math:`s` vertices          :math:`s!` (triangle 6, tetrahedron
        (simplex, hyperedge)                      24, a 5-vertex hyperedge 120)
        ========================================  ================================

        each with :math:`K` slot gathers. On a graph (ranks 0–1, :math:`K = 2`) this is
        exactly :class:`TokenGT` with ``edge_tokens="directed"``. Cell-level outputs average
        the encoded tokens of each cell (mean over its orderings, an invariant pooling) and
        apply the readout.
    ``identifiers="sum"`` / ``"mean"`` (A.5's cheaper variant)
        One token per cell, :math:`W_r X_\sigma + W_P \sum_{v \in \sigma} P_v + E^{(r)}` (or
        the mean). Inner products of pooled identifiers only count shared vertices, and two
        cells on the same vertex set get the same identifiers (see the module notes). On a
        graph it is :class:`TokenGT` with ``edge_tokens="undirected"``.

    The vertices of every cell come from the unsigned incidences (``incidence_r``; ring
    boundaries are walked from ``incidence_2`` and ``incidence_1``), so any complex works,
    including hypergraphs (:class:`toponetx.CombinatorialComplex` via
    :func:`~topomodelx_attention.data.from_toponetx`), **once it carries node identifiers**:
    with the default ``node_id_dim=16`` the model reads ``data.node_id`` of shape
    ``(n_0, node_id_dim)`` and raises a ``ValueError`` without it. Write them on every complex
    before batching with :class:`~topomodelx_attention.transforms.LaplacianNodeId` or
    :class:`~topomodelx_attention.transforms.OrthogonalRandomNodeId` (both accept a
    ``ComplexData``; the Laplacian ones come from the vertex adjacency through the rank-1
    cells, ``incidence_1``), e.g.
    ``model(OrthogonalRandomNodeId(dim=16)(from_toponetx(complex_)))``, or build the model with
    ``node_id_dim=0`` (no identifiers: tokens of the same features are then indistinguishable).

    With ``pooling="sum"`` / ``"mean"`` the tokens of the cells of every rank of each complex
    are pooled (with ``identifiers="ordered"`` every ordering of a cell is a token): a sum can
    count cells (e.g. the triangles of a lifting whose 2-cells are its triangles).

    Parameters
    ----------
    in_channels : sequence of int
        Feature columns ``[d_0, ..., d_R]`` of ``x_0 .. x_R`` (sets ``max_rank = len - 1``);
        0 for a rank without features (its tokens are identifiers + type only).
    hidden_channels : int
        Model width.
    out_channels : int
        Output width of the readouts.
    categorical : sequence of (sequence of int or None), optional
        Per rank: cardinalities of integer-coded feature columns, or ``None`` (float).
    identifiers : {"ordered", "sum", "mean"}, default = "ordered"
        Ordered identifier slots (one token per ordering) or pooled identifiers (one token
        per cell), see above.
    max_cell_size : int, default = 8
        Identifier slots :math:`K` of ``identifiers="ordered"``: the largest number of
        vertices of a cell (rings up to length 8, simplices up to tetrahedra); a larger cell
        raises ``ValueError``. Ignored by ``"sum"`` / ``"mean"``.
    max_tokens : int or None, default = MAX_TOKENS (8192)
        With ``identifiers="ordered"``: most tokens one complex may have (its ``[graph]``
        token, one per vertex, two per edge, :math:`2L` per ring, :math:`s!` per other cell
        of :math:`s` vertices). They are counted
        (:func:`~topomodelx_attention.nn.graph.orderings.ordering_counts`) before any is
        built; a complex above the limit raises ``ValueError`` naming its cell sizes, the
        token count and the fixes (``identifiers="sum"``, smaller cells / ``max_cell_size``,
        a larger ``max_tokens``). ``None``: no limit. Ignored by ``"sum"`` / ``"mean"`` (one
        token per cell).
    type_identifiers : bool, default = True
        Learned rank embeddings :math:`E^{(r)}` (and the size embeddings :math:`E_s`).
    outputs : sequence of "complex" or int, default = ("complex",)
        Which predictions the model returns: ``"complex"`` one row per complex
        (:meth:`forward`), a rank ``r`` one row per r-cell (:meth:`cell_outputs`).
    %(token_model_options)s
    """

    def __init__(
        self,
        in_channels: Sequence[int],
        hidden_channels: int,
        out_channels: int,
        *,
        categorical: Sequence[Sequence[int] | None] | None = None,
        identifiers: str = "ordered",
        max_cell_size: int = 8,
        max_tokens: int | None = MAX_TOKENS,
        type_identifiers: bool = True,
        outputs: Sequence[str | int] = ("complex",),
        **options: Unpack[TokenModelOptions],
    ) -> None:
        super().__init__()
        options = token_model_options("OrderKTokenGT", options)
        node_id_dim = options["node_id_dim"]
        in_channels = [non_negative_int(c, "in_channels[r]") for c in in_channels]
        if not in_channels:
            raise ValueError("in_channels must list the feature width of every rank (0 = none)")
        if identifiers not in IDENTIFIERS:
            raise ValueError(f"identifiers must be one of {IDENTIFIERS}, got {identifiers!r}")
        if (
            isinstance(max_cell_size, bool)
            or not isinstance(max_cell_size, int)
            or max_cell_size < 1
        ):
            raise ValueError(f"max_cell_size must be a positive int, got {max_cell_size!r}")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ValueError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
        self.max_tokens = max_tokens
        self.max_rank = len(in_channels) - 1
        self.in_channels = in_channels
        if categorical is None:
            categorical = [None] * len(in_channels)
        if len(categorical) != len(in_channels):
            raise ValueError("categorical needs one entry (None or cardinalities) per rank")
        outputs = check_outputs(
            outputs, ("complex", *range(self.max_rank + 1)), "or ranks for cell-level outputs"
        )
        self.identifiers = identifiers
        self.slots = max_cell_size if identifiers == "ordered" else 1
        self.encoders = nn.ModuleDict(
            {
                str(r): FeatureEncoder(c, hidden_channels, cards, f"x_{r}")
                for r, (c, cards) in enumerate(zip(in_channels, categorical))
                if c > 0
            }
        )
        # W_1 .. W_K stacked: the slot-a projection is rows a*d .. (a+1)*d of the weight
        self.id_projection = (
            nn.Linear(node_id_dim, hidden_channels * self.slots, bias=False)
            if node_id_dim
            else None
        )
        self.type_embedding = (
            nn.Embedding(self.max_rank + 1, hidden_channels) if type_identifiers else None
        )
        self.size_embedding = (
            nn.Embedding(self.slots + 1, hidden_channels)
            if type_identifiers and identifiers == "ordered"
            else None
        )
        self._build_common(hidden_channels, out_channels, outputs, options)

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return f"max_rank={self.max_rank}, identifiers={self.identifiers!r}, slots={self.slots}"

    def _check_token_count(self, data: ComplexData, cycles: tuple[Tensor, Tensor] | None) -> None:
        """Count the ordered tokens of every complex; refuse one above ``max_tokens``."""
        num_complexes = data.num_complexes
        total = torch.ones(num_complexes, dtype=torch.float64)  # the [graph] token
        largest = torch.zeros(num_complexes, dtype=torch.float64)
        largest_rank = torch.zeros(num_complexes, dtype=torch.long)
        sizes = {}
        for r in range(self.max_rank + 1):
            counts = ordering_counts(data, r, self.slots, cycles if r == 2 else None)
            sizes[r] = counts
            if not counts.numel():
                continue
            batch_r = data[f"batch_{r}"].long().cpu()
            total.index_add_(0, batch_r, counts)
            per_complex = torch.zeros(num_complexes, dtype=torch.float64).scatter_reduce(
                0, batch_r, counts, reduce="amax"
            )
            larger = per_complex > largest
            largest = torch.where(larger, per_complex, largest)
            largest_rank = torch.where(larger, torch.full_like(largest_rank, r), largest_rank)
        worst = int(torch.argmax(total))
        if self.max_tokens is None or float(total[worst]) <= self.max_tokens:
            return
        rank = int(largest_rank[worst])
        per_cell = float(largest[worst])
        batch_r = data[f"batch_{rank}"].long().cpu()
        cell = int(torch.nonzero((batch_r == worst) & (sizes[rank] == per_cell))[0])
        vertices = int(data.vertex_cells(rank).coalesce().indices()[1].cpu().eq(cell).sum())
        where = f"complex {worst} of the batch" if num_complexes > 1 else "this complex"
        raise ValueError(
            f'OrderKTokenGT(identifiers="ordered") would create {float(total[worst]):,.0f} '
            f"tokens for {where}, above max_tokens={self.max_tokens:,}: its largest cell "
            f"(rank-{rank} cell {cell}, {vertices} vertices) alone has {per_cell:,.0f} "
            f"orderings (s! for a cell of s vertices, 2L for a ring of length L). Use "
            'identifiers="sum" (one token per cell), lift with smaller cells and a smaller '
            f"max_cell_size (now {self.slots}; e.g. SimplicialCliqueLifting(complex_dim=...), "
            "CellCycleLifting(max_cell_length=...)), or raise max_tokens (None: no limit)"
        )

    def _ordered_ids(self, node_id: Tensor, slots: Tensor) -> Tensor:
        r""":math:`\sum_a W_a P_{v_a}` of every token (``slots`` (T, K), -1 = empty)."""
        projected = self.id_projection(node_id)  # (n_0, K d): every slot's projection once
        projected = projected.view(-1, self.hidden_channels)  # row v*K + a
        valid = slots >= 0
        flat = slots.clamp_min(0) * self.slots + torch.arange(self.slots, device=slots.device)
        gathered = projected.index_select(0, flat.reshape(-1)).view(*slots.shape, self.hidden_channels)
        return (gathered * valid.unsqueeze(-1).to(gathered.dtype)).sum(1)

    def _prepared(self, data: object) -> OrderKTokenGTInputs:
        """Return ``data`` when prepared, else :meth:`prepare` it (``nn._export.prepared_inputs``)."""
        return prepared_inputs(self, data, OrderKTokenGTInputs)

    def _checked_features(self, data: ComplexData) -> list[Tensor | None]:
        """Check the data against the model and return ``x_r`` of the ranks with features."""
        if not isinstance(data, ComplexData):
            raise TypeError(
                f"OrderKTokenGT expects a (batched) ComplexData, got {type(data).__name__}; "
                "lift graphs with CellCycleLifting / SimplicialCliqueLifting or convert with "
                "from_toponetx"
            )
        if data.max_rank < self.max_rank:
            raise ValueError(
                f"the model handles ranks 0..{self.max_rank} but the data stops at rank "
                f"{data.max_rank}; build the model with len(in_channels) = {data.max_rank + 1}"
            )
        features: list[Tensor | None] = [None] * (self.max_rank + 1)
        for r in range(self.max_rank + 1):
            if str(r) not in self.encoders:
                continue
            if f"x_{r}" not in data:
                raise ValueError(
                    f"the model has in_channels[{r}] = {self.in_channels[r]} but the data "
                    f"has no x_{r}; lift features (FeatureLifting) or set it to 0"
                )
            x_r = data[f"x_{r}"]
            if x_r.shape[0] != data.num_cells(r):
                raise ValueError(
                    f"x_{r} has {x_r.shape[0]} rows but the data has {data.num_cells(r)} "
                    f"rank-{r} cells: give one feature row per cell"
                )
            features[r] = x_r
        if self.check_inputs:
            named = {f"x_{r}": x for r, x in enumerate(features) if x is not None}
            check_inputs({**named, "node_id": data.get("node_id", None)})
        for r, x in enumerate(features):
            if x is not None:
                self.encoders[str(r)].check_codes(x)
        return features

    @torch.compiler.disable
    def prepare(self, data: ComplexData) -> OrderKTokenGTInputs:
        """Validate a batch and build everything derived from its structure (eager, once per batch).

        Validates the inputs (ranks, rows of ``x_r``, ``node_id``, finite values when
        ``check_inputs``), counts the ordered tokens (``max_tokens``), builds the cell
        orderings (ordered identifiers) or the vertex-cell pairs (pooled identifiers), applies
        the identifier regularisers (training) and pads the tokens per complex.
        ``model(model.prepare(data))`` equals ``model(data)``; ``torch.compile`` never traces
        this method (``torch.compiler.disable``): a compiled model called on a ``ComplexData``
        runs it eagerly, with one graph break at the call, and traces the rest as one graph.

        Parameters
        ----------
        data : ComplexData
            A complex or a batch: ``batch_r`` and ``incidence_r`` for ``r <= max_rank``,
            ``x_r`` for the ranks with features, ``node_id`` unless ``node_id_dim = 0``.

        Returns
        -------
        OrderKTokenGTInputs
            Inputs, indices and layout of the tokens.
        """
        features = self._checked_features(data)
        num_complexes = data.num_complexes
        device = self.graph_token.device
        n0 = data.num_cells(0)
        batch0 = data["batch_0"].long()
        ordered = self.identifiers == "ordered"
        cycles = None
        if ordered:
            if self.max_rank >= 2 and data.num_cells(2):
                cycles = boundary_cycles(data)  # walked once: counted, then built
            self._check_token_count(data, cycles)
        node_id = self._node_ids(data, n0, batch0, num_complexes)
        batch, batches, owners, slots, size = [], [], [], [], []
        membership: list[tuple[Tensor, Tensor] | None] = [None] * (self.max_rank + 1)
        for r in range(self.max_rank + 1):
            batch_r = data[f"batch_{r}"].long().to(device)
            batch.append(batch_r)
            if ordered:
                order = cell_orderings(data, r, self.slots, cycles if r == 2 else None)
                owner = order.owner.to(device)
                owners.append(owner)
                slots.append(order.slots.to(device))
                size.append(order.size.to(device))
                batches.append(batch_r.index_select(0, owner))
            else:
                if r and node_id is not None and data.num_cells(r):
                    index = data.vertex_cells(r).coalesce().indices().to(device)
                    membership[r] = (index[0].clone(), index[1].clone())
                batches.append(batch_r)
        layout, padded = self._layout(batches, num_complexes)
        return OrderKTokenGTInputs(
            tuple(x if x is None else x.to(device) for x in features),
            node_id,
            tuple(batch),
            tuple(owners) if ordered else None,
            tuple(slots) if ordered else None,
            tuple(size) if ordered else None,
            None if ordered else tuple(membership),
            layout,
            padded,
        )

    def tokenize(self, data: ComplexData | OrderKTokenGTInputs) -> TokenBatch:
        """Embed the ``[graph]`` token and the tokens of the cells of every rank.

        Parameters
        ----------
        data : ComplexData or OrderKTokenGTInputs
            A complex or a batch (as for :meth:`prepare`), or its :meth:`prepare` result.

        Returns
        -------
        TokenBatch
            Groups ``(rank 0, ..., rank max_rank)``; with ordered identifiers ``owners``
            gives the cell of every token.
        """
        inputs = self._prepared(data)
        dtype = self.graph_token.dtype
        device = self.graph_token.device
        node_id = inputs.node_id
        groups = []
        for r in range(self.max_rank + 1):
            n_r = inputs.batch[r].shape[0]
            cells = torch.zeros((n_r, self.hidden_channels), dtype=dtype, device=device)
            if str(r) in self.encoders:
                cells = cells + self.encoders[str(r)](inputs.features[r], dtype)
            if self.type_embedding is not None:
                cells = cells + self.type_embedding.weight[r].to(dtype)
            if inputs.owners is not None:
                owner = inputs.owners[r]
                h = cells.index_select(0, owner)
                if node_id is not None:
                    h = h + self._ordered_ids(node_id, inputs.slots[r])
                if self.size_embedding is not None:
                    h = h + self.size_embedding(inputs.size[r]).to(dtype)
            else:
                h = cells
                if node_id is not None and r == 0:
                    h = h + self.id_projection(node_id)
                elif node_id is not None and inputs.membership[r] is not None:
                    vertex, cell = inputs.membership[r]
                    pooled = segment_pool(
                        node_id.index_select(0, vertex), cell, n_r, self.identifiers
                    )
                    h = h + self.id_projection(pooled)
            groups.append(h)
        return self._assemble(groups, inputs.layout, inputs.padded, owners=inputs.owners)

    def cell_outputs(self, data: ComplexData | OrderKTokenGTInputs) -> dict[int, Tensor]:
        """Cell-level predictions of the ranks listed in ``outputs``.

        With ordered identifiers a cell has several tokens (orderings): their encoded
        features are averaged (invariant to the orderings) before the readout.

        Parameters
        ----------
        data : ComplexData or OrderKTokenGTInputs
            A complex or a batch, or its :meth:`prepare` result.

        Returns
        -------
        dict of int to torch.Tensor
            ``{rank: (n_rank, out_channels)}``.
        """
        ranks = self._cell_ranks()
        inputs = self._prepared(data)
        tokens = self.encode(inputs)
        out = {}
        for r in ranks:
            h = tokens.group(r)
            if tokens.owners is not None:
                h = segment_pool(h, tokens.owners[r], inputs.batch[r].shape[0], "mean")
            out[r] = self.readouts[str(r)](h)
        return out
