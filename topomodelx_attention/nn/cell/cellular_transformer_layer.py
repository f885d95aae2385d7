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

Execution of pairwise sparse attention: every arrow keeps its own Q/K/V/O and its own softmax.
The sparse arrows' weights are stored stacked per rank and role in the layer's ``fused``
module (:class:`~topomodelx_attention.nn.attention.stacked.StackedBlocks`), and the attention
core runs them together (:mod:`~topomodelx_attention.nn.attention.fused`: blocks keyed by
their (source, target) ranks, one sparse call on the joined edge lists); the other arrows
have one :class:`~topomodelx_attention.nn.attention.MultiHeadAttention` each in ``blocks``.
General attention is the core's
:class:`~topomodelx_attention.nn.attention.MultiGroupAttention` (one value projection per rank).

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

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.data import to_coalesced_coo
from topomodelx_attention.nn.attention import (
    COMPOSITE_KINDS,
    KERNELS,
    MultiGroupAttention,
    MultiHeadAttention,
    NeighborhoodIndex,
    PaddedBias,
    PaddedLayout,
    block_kind,
    global_kind,
    kernel_class,
    kernel_kinds,
    padded_layout,
    prepare_neighborhood,
    random_walk_pair_features,
    reads_neighborhood,
)
from topomodelx_attention.nn.attention.fused import (
    FusedNeighborhood,
    fused_subset,
    prepare_fused_index,
)
from topomodelx_attention.nn.attention.heads import check_dropout
from topomodelx_attention.nn.attention.sparse import _stable_argsort
from topomodelx_attention.nn.attention.stacked import StackedBlocks, projection_weights, stackable
from topomodelx_attention.nn.cell.per_rank import RankFeedForwards, RankLayerNorms
from topomodelx_attention.nn.cell.tensor_diagram import (
    Arrow,
    ArrowNeighborhoods,
    block_keys,
    block_neighborhood,
    parse_tensor_diagram,
)

__all__ = ["ATTENTION_MECHANISMS", "CellStructure", "CellularTransformerLayer"]

ATTENTION_MECHANISMS = ("pairwise", "general")


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
        by one; ``None`` for kernels without neighbourhood (linear), arrows of the fused sparse
        call, general attention, or an arrow with an empty rank.
    fused : FusedNeighborhood or None
        Joined edge lists (and CPU plan) of the sparse arrows run in one call (pairwise
        attention; :func:`~topomodelx_attention.nn.attention.fused.prepare_fused`).
    layouts : tuple of PaddedLayout
        Per rank: padding of the cells per complex (for arrows whose kernel needs a layout;
        empty when no arrow needs it).
    general : NeighborhoodIndex or None
        Block neighbourhood of Eq. 3 on the cells of all ranks, rank-major (general attention
        with a kernel that reads a neighbourhood).
    general_layout : PaddedLayout or None
        Padding of the cells of all ranks per complex (general attention with a kernel that
        needs a layout).
    output_ranks : tuple of int or None
        The ranks a layer called with ``ranks=output_ranks`` updates (the last layer of a
        model that reads only its readout ranks); ``None``: prepared for full layers only.
    output_fused : FusedNeighborhood or None
        Joined edge lists of the fused sparse arrows into ``output_ranks`` (the fused call of
        such a layer), sliced out of ``fused``
        (:func:`~topomodelx_attention.nn.attention.fused.fused_subset`); ``None`` when none of
        them attends.
    relative : tuple of (torch.Tensor or None)
        Per arrow (same order): the relative random-walk pair features of a global arrow with
        ``rrwp_steps > 0``, ``(num_complexes, rrwp_steps, length, length)`` on the padded grid
        of its rank (:func:`~topomodelx_attention.nn.attention.random_walk_pair_features`);
        ``None`` for the other arrows and for an empty rank; empty when the layer has no such
        bias.
    """

    neighborhoods: tuple[NeighborhoodIndex | None, ...]
    fused: FusedNeighborhood | None
    layouts: tuple[PaddedLayout, ...]
    general: NeighborhoodIndex | None
    general_layout: PaddedLayout | None
    output_ranks: tuple[int, ...] | None = None
    output_fused: FusedNeighborhood | None = None
    relative: tuple[Tensor | None, ...] = ()


def valid_ranks(ranks: Sequence[object], max_rank: int) -> bool:
    """Whether ``ranks`` is a non-empty sequence of int ranks in ``0..max_rank`` (no bools)."""
    return bool(ranks) and all(
        not isinstance(r, bool) and isinstance(r, int) and 0 <= r <= max_rank for r in ranks
    )


class CellularTransformerLayer(nn.Module):
    r"""One pre-norm Cellular Transformer layer on ranks ``0..max_rank`` (Appendix A).

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
    kind : str, default="sparse"
        Attention kernel, by name (:data:`~topomodelx_attention.nn.attention.KERNELS`):
        ``sparse``: softmax over the neighbours given by ``N`` (a mask; values ignored).
        ``dense``: all cells of the complex with the bias ``θ·N``. ``linear``: Performer/FAVOR+
        in place of dense (no bias), linear in the number of cells. Or a composite kind
        (:data:`~topomodelx_attention.nn.attention.COMPOSITE_KINDS`, pairwise only): ``mixed``,
        dense for ``k → k`` arrows, sparse across ranks.
    kernel_options : mapping, optional
        Options of the kernel(s) (:func:`~topomodelx_attention.nn.attention.build_kernel`):
        ``scale`` (``None``: ``1/sqrt(d_head)``; ``1.0``: the paper's Eq. 2 logits
        ``X_t Q (X_s K)ᵀ``), and the kernel's own, e.g. ``bias_scale`` (``"per_head"`` or the
        paper's one shared θ of ``φ(N) = θN``, dense) or ``num_random_features`` (linear).
        With a composite kind each kernel gets the options it takes; an option no kernel of
        the layer takes raises ``ValueError``. One more option belongs to the global arrows:
        ``rrwp_steps`` (int, default 0). ``K > 0``: every global arrow ``r->r:all_r``
        adds to its logits a learned bias of the relative random-walk probabilities of each
        pair of rank-``r`` cells (GRIT's RRWP; not in the paper): the features
        :math:`\log(1 + n_b (P^k)_{ij})`, ``k = 0..K-1``, of the walk
        :math:`P = D^{-1} A` on ``adjacency_r``
        (:func:`~topomodelx_attention.nn.attention.random_walk_pair_features`), mapped to one
        logit per head by a ``K → heads`` linear map of the layer (``relative_bias[key]``, of
        shape ``(heads, K)``, zero at initialisation: the layer starts as the unbiased global
        arrow; the arrow's kernel, which must take a bias (dense), adds these logits unscaled,
        ``bias_scale="none"``). The neighbourhoods must then hold ``adjacency_r``.
    tensor_diagram : sequence, optional
        Arrows (see :func:`parse_tensor_diagram`); default :func:`default_tensor_diagram`.
        Pairwise attention builds one block per arrow, also for several arrows between the same
        ranks; general attention adds such arrows into one block of ``N`` (Eq. 3). A global
        arrow ``"r->r:all_r"`` (pairwise only) is a block without mask or θ·N bias over the
        rank-``r`` cells of each complex: the layer's kernel when it attends all pairs
        (``dense``, ``linear`` or another registered kernel without a mask), else dense
        (:func:`~topomodelx_attention.nn.attention.global_kind`); it reads no neighbourhood.
    ffn_channels : int, optional
        Inner width of the FFN (default ``channels``, as Table 3).
    dropout : float, default=0.0
        Dropout on the output of every sublayer (each attention block, the FFN) and inside the
        FFN (Appendix A steps 3 and 6).
    attention_dropout : float, default=0.0
        Dropout on the attention weights (a kernel without weights, ``linear``, raises for a
        positive value).
    bias : bool, default=False
        Bias in the Q/K/V/O projections (the paper: none).
    output_projection : bool, default=True
        ``True``: heads are concatenated and mixed by an output projection ``W_O`` (standard
        multi-head attention). ``False``: the paper's multi-head (§4.2.1): each head attends on
        its own slice of the cochains and the heads are concatenated without ``W_O``; the
        per-rank values of general attention are then block-diagonal (one ``d/heads`` square
        map per head).
    """

    def __init__(
        self,
        channels: int,
        *,
        heads: int = 8,
        max_rank: int = 2,
        attention: str = "pairwise",
        kind: str = "sparse",
        kernel_options: Mapping[str, Any] | None = None,
        tensor_diagram: Sequence[Arrow | tuple | str] | None = None,
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        bias: bool = False,
        output_projection: bool = True,
    ) -> None:
        super().__init__()
        if attention not in ATTENTION_MECHANISMS:
            raise ValueError(f"attention must be one of {ATTENTION_MECHANISMS}, got {attention!r}")
        kernel_kinds(kind)  # a registered kernel or composite (a clear error otherwise)
        if attention == "general" and kind in COMPOSITE_KINDS:
            raise ValueError(
                f"kind={kind!r} is a pairwise kind (one kernel within a rank, another across "
                f"ranks); general attention takes one kernel ({tuple(KERNELS)})"
            )
        if int(max_rank) < 0:
            raise ValueError(f"max_rank must be non-negative, got {max_rank}")
        if not isinstance(output_projection, bool):
            raise TypeError(f"output_projection must be a bool, got {output_projection!r}")
        self.channels = int(channels)
        self.heads = int(heads)
        if self.heads < 1 or self.channels % self.heads:
            raise ValueError(f"heads={heads} must be positive and divide channels={channels}")
        self.max_rank = int(max_rank)
        self.attention = attention
        self.kind = kind
        kernel_options = dict(kernel_options or {})
        rrwp_steps = kernel_options.pop("rrwp_steps", 0)  # the global arrows' option
        self.kernel_options = _check_kernel_options(kind, kernel_options)
        self.output_projection = output_projection
        self.arrows = parse_tensor_diagram(tensor_diagram, self.max_rank)
        if attention == "general" and any(a.is_global for a in self.arrows):
            raise ValueError(
                "global arrows (r->r:all_r) are pairwise attention blocks; general attention "
                "attends over every cell already (kind='dense' or 'linear')"
            )
        self.block_keys = block_keys(self.arrows)
        self.rrwp_steps = _check_rrwp_steps(rrwp_steps, self.arrows, kind)
        # the arrows that read a neighbourhood matrix (a global arrow reads none)
        self._matrix_arrows = tuple(a for a in self.arrows if not a.is_global)
        self.attention_dropout = check_dropout(attention_dropout, "attention_dropout")
        dropout = check_dropout(dropout, "dropout")
        ffn_channels = self.channels if ffn_channels is None else int(ffn_channels)
        ranks = range(self.max_rank + 1)
        # per-rank LayerNorms and FFNs, each role stacked over the ranks (fewer, larger tensors)
        self.norm_attention = RankLayerNorms(len(ranks), self.channels)
        self.norm_ffn = RankLayerNorms(len(ranks), self.channels)
        self.ffn = RankFeedForwards(len(ranks), self.channels, ffn_channels, dropout)
        self.dropout = nn.Dropout(dropout)
        self._block_of = dict(zip(self.arrows, self.block_keys))
        self._fused_arrows: tuple[Arrow, ...] = ()
        self.fused: StackedBlocks | None = None
        if attention == "pairwise":
            # one block per arrow, in arrow order (the random stream of the initialisation)
            built = {
                key: MultiHeadAttention(
                    self.channels,
                    self.channels,
                    self.heads,
                    kind=self._arrow_kind(arrow),
                    kernel_options=self._arrow_options(arrow),
                    bias=bias,
                    output_projection=output_projection,
                )
                for arrow, key in zip(self.arrows, self.block_keys)
            }
            # sparse blocks with plain Q/K/V/O projections: one fused call of the core, on
            # weights stored stacked (one parameter per rank and role, nn/attention/stacked.py)
            fused_keys = [k for k in self.block_keys if stackable(built[k])]
            self._fused_arrows = tuple(a for a in self.arrows if self._block_of[a] in fused_keys)
            self.blocks = nn.ModuleDict({k: b for k, b in built.items() if k not in fused_keys})
            if fused_keys:
                self.fused = StackedBlocks(
                    [built[k] for k in fused_keys],
                    fused_keys,
                    [(a.source, a.target) for a in self._fused_arrows],
                    len(ranks),
                )
        else:
            self.general = MultiGroupAttention(
                self.channels,
                self.heads,
                self.max_rank + 1,
                kind=kind,
                kernel_options=self._options_of(kind),
                bias=bias,
                output_projection=output_projection,
            )
        # arrows whose neighbourhood values enter the logits as θ·N (checked for signs)
        self._bias_arrows = tuple(a for a in self._matrix_arrows if self._kernel(a).accepts_bias)
        # global arrows biased by relative random-walk features: a K → heads map each
        self._relative_arrows = tuple(a for a in self.arrows if a.is_global and self.rrwp_steps)
        # (heads, K) weights, zero at initialisation (no random draw: the other parameters
        # are those of the same layer without the bias)
        self.relative_bias = nn.ParameterDict(
            {
                self._block_of[a]: nn.Parameter(torch.zeros(self.heads, self.rrwp_steps))
                for a in self._relative_arrows
            }
        )

    # ------------------------------------------------------------------ arrow weights
    @property
    def fused_kernel(self) -> nn.Module | None:
        """The sparse kernel of the fused arrows (``None`` when no arrow is fused)."""
        return None if self.fused is None else self.fused.kernel

    def _arrow_key(self, arrow: Arrow | str) -> str:
        """Block key of an arrow of the tensor diagram (pairwise only; a clear error otherwise)."""
        if self.attention != "pairwise":
            raise ValueError(
                "arrow_weights needs pairwise attention (general attention has no arrows)"
            )
        key = arrow if isinstance(arrow, str) else self._block_of.get(arrow)
        if key not in self.block_keys:
            raise ValueError(
                f"no arrow with block key {key!r}; the keys are {list(self.block_keys)}"
            )
        return key

    def arrow_weights(self, arrow: Arrow | str, *, grad: bool = False) -> dict[str, Tensor | None]:
        """Return the Q/K/V/O weights and biases of one arrow (views of the parameters).

        Pairwise attention only. The weights of the fused sparse arrows are slices of the
        stacked parameters ``fused.query_key_value[r]`` / ``fused.output[r]``
        (:meth:`StackedBlocks.weights_of`); the others are those of the arrow's block in
        ``blocks``.

        Parameters
        ----------
        arrow : Arrow or str
            An arrow of the tensor diagram, or its block key (e.g. ``"1->0"``).
        grad : bool, default=False
            The parameters' ``.grad`` instead (as :meth:`StackedBlocks.weights_of`).

        Returns
        -------
        dict of str to (torch.Tensor or None)
            The nine entries of :meth:`StackedBlocks.weights_of` (``out`` and ``out_bias``
            are ``None`` without output projection).
        """
        key = self._arrow_key(arrow)
        if key in self.blocks:
            return projection_weights(self.blocks[key], grad=grad)
        return self.fused.weights_of(key, grad=grad)

    def arrow_attention(self, arrow: Arrow | str) -> MultiHeadAttention:
        """One arrow's attention block as a :class:`MultiHeadAttention` (for references, tests).

        Pairwise attention only. A fused sparse arrow has no block of its own (its weights are
        slices of the stacked parameters): this returns a new block holding a copy of its
        current weights (:meth:`StackedBlocks.attention_of`). Other arrows return their block
        in ``blocks`` itself.

        Parameters
        ----------
        arrow : Arrow or str
            An arrow of the tensor diagram, or its block key (e.g. ``"1->0"``).

        Returns
        -------
        MultiHeadAttention
            ``MHA(x_target, x_source, neighbourhood)`` of the arrow (Eq. 2).
        """
        key = self._arrow_key(arrow)
        return self.blocks[key] if key in self.blocks else self.fused.attention_of(key)

    def _arrow_kind(self, arrow: Arrow) -> str:
        """Kernel kind of one arrow (a composite's kernel within / across ranks).

        A global arrow (``all_r``) attends all pairs of its rank's cells, without mask:
        :func:`~topomodelx_attention.nn.attention.global_kind` of the layer's kind.
        """
        if arrow.is_global:
            return global_kind(self.kind)
        return block_kind(self.kind, within=arrow.source == arrow.target)

    def _arrow_options(self, arrow: Arrow) -> dict[str, Any]:
        """Kernel options of one arrow's block (a global arrow has no θ·N bias)."""
        kind = self._arrow_kind(arrow)
        options = self._options_of(kind)
        if arrow.is_global and kernel_class(kind).accepts_bias:
            options["neighborhood_bias"] = bool(self.rrwp_steps)
            if self.rrwp_steps:  # the learned K → heads map gives the logits: no θ
                options.update(bias_scale="none")
        return options

    def _options_of(self, kind: str) -> dict[str, Any]:
        """Kernel options of one kernel: the layer's attention dropout + the options it takes."""
        names = kernel_class(kind).option_names()
        options = {k: v for k, v in self.kernel_options.items() if k in names}
        return {"attention_dropout": self.attention_dropout, **options}

    def _kernel(self, arrow: Arrow) -> type:
        """Kernel class of one arrow (its capability flags)."""
        return kernel_class(self.kind if self.attention == "general" else self._arrow_kind(arrow))

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        arrows = ", ".join(a.label for a in self.arrows)
        return (
            f"channels={self.channels}, heads={self.heads}, max_rank={self.max_rank}, "
            f"attention={self.attention!r}, kind={self.kind!r}, arrows=[{arrows}], "
            f"output_projection={self.output_projection}"
            + (f", rrwp_steps={self.rrwp_steps}" if self.rrwp_steps else "")
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
            missing = [a.label for a in self._matrix_arrows if a not in neighborhoods]
            if missing:
                raise ValueError(
                    f"the prepared neighbourhoods lack the arrows {missing} of this layer"
                )
            return neighborhoods
        return self._arrow_neighborhoods(self._converted(neighborhoods), self._matrix_arrows)

    def _converted(self, neighborhoods: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """Every neighbourhood the arrows read, by key, as coalesced COO (not transposed)."""
        converted: dict[str, Tensor] = {}
        for arrow in self._matrix_arrows:
            if arrow.neighborhood not in converted:
                converted[arrow.neighborhood] = replace(arrow, transpose=False).matrix(
                    neighborhoods
                )
        return converted

    def _arrow_neighborhoods(
        self, converted: Mapping[str, Tensor], arrows: Sequence[Arrow]
    ) -> ArrowNeighborhoods:
        """Return the ``(n_target, n_source)`` matrix of each of ``arrows`` (warns on signs)."""
        prepared = ArrowNeighborhoods()
        for arrow in arrows:
            matrix = converted[arrow.neighborhood]
            prepared[arrow] = _transposed(matrix) if arrow.transpose else matrix
        if not torch.compiler.is_compiling():
            for arrow in self._bias_arrows:
                if arrow not in prepared:
                    continue
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
                        stacklevel=3,
                    )
        return prepared

    # ------------------------------------------------------------------ structure
    def prepare(
        self,
        neighborhoods: Mapping[str, Tensor] | ArrowNeighborhoods,
        batch: Sequence[Tensor],
        num_complexes: int | None = None,
        *,
        output_ranks: Sequence[int] | None = None,
    ) -> CellStructure:
        """Build the :class:`CellStructure` of a batch (eager; once per forward, for a whole stack).

        Converts and checks the neighbourhoods (:meth:`prepare_neighborhoods`), joins the edge
        lists of the fused sparse arrows, and pads the cells of every rank per complex where a
        kernel needs a layout. The result depends on the configuration (kind, attention,
        tensor diagram), not on the parameters: every layer of a stack built with the same
        options can use it.

        With ``output_ranks``, the structure also serves a layer called with
        ``ranks=output_ranks`` (:meth:`forward`): the joined index of the fused arrows into those
        ranks is sliced out of the full one (their query rows, with the key rows renumbered).

        Parameters
        ----------
        neighborhoods : mapping of str to torch.Tensor, or ArrowNeighborhoods
            As in :meth:`forward`.
        batch : sequence of torch.Tensor
            ``batch[r]`` of shape ``(n_r,)``: sorted complex index of every r-cell, for
            ``r = 0..max_rank`` (zeros for one complex).
        num_complexes : int, optional
            Number of complexes (inferred when omitted).
        output_ranks : sequence of int, optional
            Ranks updated by a layer of the stack called with ``ranks=output_ranks`` (e.g. the
            readout ranks, for the last layer).

        Returns
        -------
        CellStructure
            The index tensors and layouts the layers read.
        """
        output_ranks = self._output_ranks(output_ranks)
        batch = list(batch)
        if len(batch) != self.max_rank + 1 or not all(
            isinstance(b, Tensor) and b.dim() == 1 for b in batch
        ):
            raise ValueError(f"batch must hold one (n_r,) vector per rank 0..{self.max_rank}")
        if num_complexes is None:
            num_complexes = max((int(b.max()) + 1 for b in batch if b.numel()), default=1)
        sizes = tuple(int(b.shape[0]) for b in batch)
        converted: Mapping[str, Tensor] = {}
        if isinstance(neighborhoods, ArrowNeighborhoods):
            prepared = self.prepare_neighborhoods(neighborhoods)
        else:  # the fused arrows read their (untransposed) matrices as they are
            converted = self._converted(neighborhoods)
            rest = [a for a in self._matrix_arrows if a not in self._fused_arrows]
            prepared = self._arrow_neighborhoods(converted, rest)
        device = batch[0].device
        if self.attention == "general":
            general = general_layout = None
            if sum(sizes):
                cls = kernel_class(self.kind)
                offsets = [0]
                for n in sizes:
                    offsets.append(offsets[-1] + n)
                if reads_neighborhood(self.kind):
                    matrix = block_neighborhood(self.arrows, prepared, offsets, device)
                    general = prepare_neighborhood(
                        matrix, offsets[-1], offsets[-1], name="block neighbourhood (Eq. 3)"
                    )
                if (
                    cls.needs_layout
                ):  # tokens in rank-major order: the packed layout needs no sorting
                    general_layout = padded_layout(torch.cat(batch).to(device), num_complexes)
            return CellStructure(
                (None,) * len(self.arrows), None, (), general, general_layout, output_ranks
            )
        layouts: tuple[PaddedLayout, ...] = ()
        if any(self._kernel(a).needs_layout for a in self.arrows):
            layouts = tuple(padded_layout(b, num_complexes) for b in batch)
        fused = output_fused = None
        if self.fused is not None:
            matrices = (prepared, converted, sizes, device)
            every = self.fused.active(sizes)
            fused = self._fused_index(every, *matrices)
            if output_ranks is not None:
                active = self.fused.active(sizes, output_ranks)
                output_fused = fused
                if active != every:  # the arrows into output_ranks: their rows of the joined index
                    subset = [every.index(i) for i in active]
                    pairs = [self.fused.pairs[i] for i in every]
                    output_fused = fused_subset(fused, pairs, subset, sizes) if subset else None
        per_arrow: list[NeighborhoodIndex | None] = [None] * len(self.arrows)
        for i, arrow in enumerate(self.arrows):
            empty = sizes[arrow.source] == 0 or sizes[arrow.target] == 0
            if (
                empty
                or arrow in self._fused_arrows
                or arrow.is_global
                or not reads_neighborhood(self._arrow_kind(arrow))
            ):
                continue
            per_arrow[i] = prepare_neighborhood(
                prepared[arrow],
                sizes[arrow.target],
                sizes[arrow.source],
                device=device,
                name=arrow.label,
            )
        relative: tuple[Tensor | None, ...] = ()
        if self._relative_arrows:
            relative = tuple(
                self._relative_features(
                    arrow, neighborhoods, converted, layouts[arrow.source], sizes
                )
                if arrow in self._relative_arrows
                else None
                for arrow in self.arrows
            )
        return CellStructure(
            tuple(per_arrow), fused, layouts, None, None, output_ranks, output_fused, relative
        )

    def _relative_features(
        self,
        arrow: Arrow,
        neighborhoods: Mapping[str, Tensor] | ArrowNeighborhoods,
        converted: Mapping[str, Tensor],
        layout: PaddedLayout,
        sizes: Sequence[int],
    ) -> Tensor | None:
        """Relative random-walk features of a global arrow's rank (``None`` for an empty rank).

        ``converted``: the matrices :meth:`_converted` already made coalesced COO in this
        ``prepare`` (e.g. ``adjacency_0`` of the arrow ``0->0``), reused rather than converted again.
        """
        rank = arrow.source
        if sizes[rank] == 0:
            return None
        key = f"adjacency_{rank}"
        if isinstance(neighborhoods, ArrowNeighborhoods):
            matrix = next(
                (m for a, m in neighborhoods.items() if a.neighborhood == key and not a.transpose),
                None,
            )
            if matrix is None:
                raise ValueError(
                    f"rrwp_steps={self.rrwp_steps} walks on {key!r}, which the prepared "
                    "neighbourhoods do not hold: pass the neighbourhoods by key"
                )
        elif key not in neighborhoods:
            raise ValueError(
                f"rrwp_steps={self.rrwp_steps}: the global arrow {arrow.label} walks on {key!r}, "
                f"which was not given (available: {sorted(neighborhoods)})"
            )
        elif key in converted:
            matrix = converted[key]
        else:
            matrix = to_coalesced_coo(neighborhoods[key], key)
        dtype = self.relative_bias[self._block_of[arrow]].dtype
        return random_walk_pair_features(matrix, layout, self.rrwp_steps, dtype=dtype, name=key)

    def _fused_index(
        self,
        active: Sequence[int],
        prepared: ArrowNeighborhoods,
        converted: Mapping[str, Tensor],
        sizes: Sequence[int],
        device: torch.device,
    ) -> FusedNeighborhood | None:
        """Join the edge lists of the fused arrows ``active`` (:meth:`StackedBlocks.active`)."""
        arrows = [self._fused_arrows[i] for i in active]
        if not arrows:
            return None
        # a transposed arrow reads the index rows of its matrix swapped (no transpose built)
        swapped = [a not in prepared and a.transpose for a in arrows]
        return prepare_fused_index(
            [(a.source, a.target) for a in arrows],
            [prepared[a] if a in prepared else converted[a.neighborhood] for a in arrows],
            sizes,
            self.heads,
            device=device,
            names=[a.label for a in arrows],
            transposes=swapped,
        )

    def _output_ranks(self, ranks: Sequence[int] | None) -> tuple[int, ...] | None:
        """``ranks`` as a sorted tuple of distinct ranks of the layer (``None`` stays ``None``)."""
        if ranks is None:
            return None
        if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Sequence):
            raise TypeError(f"ranks must be a sequence of ranks, got {ranks!r}")
        if not valid_ranks(ranks, self.max_rank):
            raise ValueError(
                f"ranks must be a non-empty sequence of ranks in 0..{self.max_rank}, got {ranks!r}"
            )
        return tuple(sorted(set(int(r) for r in ranks)))

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        x: Sequence[Tensor],
        neighborhoods: Mapping[str, Tensor] | ArrowNeighborhoods | CellStructure,
        batch: Sequence[Tensor] | None = None,
        num_complexes: int | None = None,
        *,
        ranks: Sequence[int] | None = None,
    ) -> list[Tensor | None]:
        """Update the cochains of every rank (or of ``ranks`` only).

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
        ranks : sequence of int, optional
            Update only these ranks (e.g. the readout ranks in the last layer of a stack):
            pairwise attention skips the arrows into the other ranks, and their FFNs are
            skipped (general attention still attends over every cell, its one token set). The
            result equals the full layer's on these ranks. A :class:`CellStructure` passed as
            ``neighborhoods`` must come from :meth:`prepare` with ``output_ranks=ranks``.

        Returns
        -------
        list of (torch.Tensor or None)
            Updated ``x[r]``, same shapes; ``None`` for a rank not in ``ranks``.
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
        ranks = self._output_ranks(ranks)
        if ranks == tuple(range(self.max_rank + 1)):
            ranks = None  # every rank: the full layer
        if isinstance(neighborhoods, CellStructure):
            structure = neighborhoods
            if ranks is not None and structure.output_ranks != ranks:
                raise ValueError(
                    f"ranks={ranks} needs a CellStructure prepared for them: call "
                    f"prepare(..., output_ranks={ranks}) (this one has output_ranks="
                    f"{structure.output_ranks})"
                )
        else:
            if batch is None:
                batch = [torch.zeros(xr.shape[0], dtype=torch.long, device=xr.device) for xr in x]
            batch = list(batch)
            if len(batch) != len(x) or any(b.numel() != xr.shape[0] for b, xr in zip(batch, x)):
                raise ValueError("batch must hold one (n_r,) vector per rank, matching x")
            structure = self.prepare(neighborhoods, batch, num_complexes, output_ranks=ranks)
        normed = self.norm_attention(x)
        if self.attention == "pairwise":
            update = self._pairwise(normed, structure, ranks)
        elif sum(xr.shape[0] for xr in normed):
            update = [
                self.dropout(u)
                for u in self.general(normed, structure.general, layout=structure.general_layout)
            ]
        else:  # no cell in the whole batch: nothing to attend
            update = [None] * len(x)
        h = [xr + u if u is not None else xr for xr, u in zip(x, update)]
        if ranks is None:
            return [
                hr + self.ffn(nr, *weights)
                for hr, nr, weights in zip(h, self.norm_ffn(h), self.ffn.per_rank())
            ]
        weights = self.ffn.per_rank()
        return [
            h[r] + self.ffn(self.norm_ffn.rank_forward(h[r], r), *weights[r])
            if r in ranks
            else None
            for r in range(len(h))
        ]

    def _pairwise(
        self, x: list[Tensor], structure: CellStructure, ranks: tuple[int, ...] | None
    ) -> list[Tensor | None]:
        update: list[Tensor | None] = [None] * len(x)
        if self.fused is not None:  # the sparse arrows: one fused call
            fused = structure.fused if ranks is None else structure.output_fused
            update = self.fused(x, fused, output_dropout=self.dropout, targets=ranks)
        for i, (arrow, key) in enumerate(zip(self.arrows, self.block_keys)):
            source, target = x[arrow.source], x[arrow.target]
            if (
                source.shape[0] == 0
                or target.shape[0] == 0
                or arrow in self._fused_arrows
                or (ranks is not None and arrow.target not in ranks)
            ):
                continue
            attention = self.blocks[key]
            layout = None
            if attention.kernel.needs_layout:
                layout = (structure.layouts[arrow.target], structure.layouts[arrow.source])
            neighborhood = structure.neighborhoods[i]
            if key in self.relative_bias:  # learned relative random-walk bias, (B, heads, L, L)
                if not structure.relative or structure.relative[i] is None:
                    raise ValueError(
                        f"the global arrow {arrow.label} has rrwp_steps={self.rrwp_steps}: its "
                        "CellStructure must come from a layer with the same rrwp_steps"
                    )
                # (B, K, L, L) features → (B, heads, L, L) logits on the kernel's padded
                # grid: (heads, K) @ (B, K, L·L) as one bmm (torch.matmul would fold it into
                # a transposed copy of the features), contiguous forward and backward
                features = structure.relative[i]
                weight = self.relative_bias[key]
                values = torch.bmm(weight.expand(features.shape[0], -1, -1), features.flatten(2))
                neighborhood = PaddedBias(values.view(features.shape[0], -1, *features.shape[2:]))
            out = self.dropout(attention(target, source, neighborhood, layout=layout))
            update[arrow.target] = (
                out if update[arrow.target] is None else update[arrow.target] + out
            )
        return update


def _transposed(matrix: Tensor) -> Tensor:
    """Transpose of a coalesced sparse COO matrix, coalesced (same as ``matrix.t().coalesce()``).

    On CPU the entries are reordered by a linear-time stable radix sort of the column index
    (stable: the rows of every column stay in order, which is the coalesced order of the
    transpose) instead of ``coalesce``'s comparison sort.
    """
    index = matrix.indices()
    if index.device.type != "cpu" or index.shape[1] < 2:
        return matrix.t().coalesce()
    order = _stable_argsort(index[1].contiguous(), int(matrix.shape[1]))
    return torch.sparse_coo_tensor(
        index.flip(0).index_select(1, order),
        matrix.values().index_select(0, order),
        (int(matrix.shape[1]), int(matrix.shape[0])),
        is_coalesced=True,
        check_invariants=False,  # a permutation of valid entries: valid and coalesced
    )


def _check_rrwp_steps(steps: object, arrows: Sequence[Arrow], kind: str) -> int:
    """``kernel_options["rrwp_steps"]`` as an int (``0``: off); it needs a global dense arrow."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(
            f"kernel_options['rrwp_steps'] must be a non-negative int (0: no bias), got {steps!r}"
        )
    if steps and not any(a.is_global for a in arrows):
        raise ValueError(
            f"kernel_options['rrwp_steps']={steps} biases the global arrows (r->r:all_r); the "
            "tensor diagram has none: add one (e.g. '0->0:all_0') or set rrwp_steps=0"
        )
    if steps and not kernel_class(global_kind(kind)).accepts_bias:
        biased = [k for k in (*KERNELS, *COMPOSITE_KINDS) if kernel_class(global_kind(k)).accepts_bias]
        raise ValueError(
            f"kernel_options['rrwp_steps']={steps} is a bias of the global arrows' logits; "
            f"kind={kind!r} makes them {global_kind(kind)!r}, which takes no bias: use one of {biased}"
        )
    return int(steps)


def _check_kernel_options(kind: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Raise unless every option is taken by a kernel of the layer (a composite's: either)."""
    options = dict(options or {})
    if "attention_dropout" in options:
        raise ValueError(
            "attention_dropout is an option of the layer/model itself: pass attention_dropout=, "
            "not kernel_options={'attention_dropout': ...}"
        )
    taken = {name for k in kernel_kinds(kind) for name in kernel_class(k).option_names()}
    unknown = sorted(set(options) - taken)
    if unknown:
        raise ValueError(
            f"kernel_options {unknown} are not options of kind={kind!r}; it takes {sorted(taken)}"
        )
    return options
