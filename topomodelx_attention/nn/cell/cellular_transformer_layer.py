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

The kernel of every arrow and its block are chosen in :mod:`~.arrow_blocks` (by capability);
the structure of a batch (:class:`~.structure.CellStructure`: neighbourhood indices, layouts;
a warning for signed matrices used as a dense bias) is built in :mod:`~.structure`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention import (
    MultiGroupAttention,
    MultiHeadAttention,
    PaddedBias,
    PaddedLayout,
    kernel_class,
    padded_layout,
    reads_neighborhood,
)
from topomodelx_attention.nn.attention.fused import FusedNeighborhood, fused_subset
from topomodelx_attention.nn.attention.heads import check_dropout
from topomodelx_attention.nn.attention.stacked import StackedBlocks, projection_weights
from topomodelx_attention.nn.cell.arrow_blocks import ArrowKernels, pairwise_blocks
from topomodelx_attention.nn.cell.per_rank import RankFeedForwards, RankLayerNorms
from topomodelx_attention.nn.cell.structure import (
    CellStructure,
    arrow_indices,
    arrow_neighborhoods,
    checked_batch,
    converted_neighborhoods,
    fused_index,
    general_structure,
    relative_features,
)
from topomodelx_attention.nn.cell.tensor_diagram import (
    Arrow,
    ArrowNeighborhoods,
    block_keys,
    parse_tensor_diagram,
)

__all__ = ["ATTENTION_MECHANISMS", "CellularTransformerLayer", "valid_ranks"]

ATTENTION_MECHANISMS = ("pairwise", "general")


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
        if int(max_rank) < 0:
            raise ValueError(f"max_rank must be non-negative, got {max_rank}")
        if not isinstance(output_projection, bool):
            raise TypeError(f"output_projection must be a bool, got {output_projection!r}")
        self.channels, self.heads = int(channels), int(heads)
        if self.heads < 1 or self.channels % self.heads:
            raise ValueError(f"heads={heads} must be positive and divide channels={channels}")
        self.max_rank, self.attention, self.output_projection = int(max_rank), attention, output_projection
        self.arrows = parse_tensor_diagram(tensor_diagram, self.max_rank)
        self.kernels = ArrowKernels.checked(
            kind, kernel_options, attention_dropout, self.arrows, attention
        )
        self.block_keys = block_keys(self.arrows)
        self._block_of = dict(zip(self.arrows, self.block_keys))
        # the arrows that read a neighbourhood matrix (a global arrow reads none)
        self._matrix_arrows = tuple(a for a in self.arrows if not a.is_global)
        dropout = check_dropout(dropout, "dropout")
        ffn_channels = self.channels if ffn_channels is None else int(ffn_channels)
        ranks = self.max_rank + 1
        # per-rank LayerNorms and FFNs, each role stacked over the ranks (fewer, larger tensors)
        self.norm_attention = RankLayerNorms(ranks, self.channels)
        self.norm_ffn = RankLayerNorms(ranks, self.channels)
        self.ffn = RankFeedForwards(ranks, self.channels, ffn_channels, dropout)
        self.dropout = nn.Dropout(dropout)
        self._fused_arrows: tuple[Arrow, ...] = ()
        self.fused: StackedBlocks | None = None
        if attention == "pairwise":
            self.blocks, self.fused, self._fused_arrows = pairwise_blocks(
                self.arrows, self.block_keys, self.kernels, self.channels, self.heads, ranks,
                bias=bias, output_projection=output_projection,
            )
        else:
            self.general = MultiGroupAttention(
                self.channels, self.heads, ranks, kind=kind,
                kernel_options=self.kernels.options_for(kind),
                bias=bias, output_projection=output_projection,
            )
        # arrows whose neighbourhood values enter the logits as θ·N (checked for signs), and
        # those attended one by one on a prepared neighbourhood index
        self._bias_arrows = tuple(a for a in self._matrix_arrows if self._kernel(a).accepts_bias)
        self._indexed_arrows = tuple(
            a
            for a in self._matrix_arrows
            if a not in self._fused_arrows and reads_neighborhood(self.kernels.kind_of(a))
        )
        # global arrows biased by relative random-walk features: a K → heads map each, zero at
        # initialisation (no random draw: the other parameters are those without the bias)
        steps = self.rrwp_steps
        self._relative_arrows = tuple(a for a in self.arrows if a.is_global and steps)
        self.relative_bias = nn.ParameterDict(
            {
                self._block_of[a]: nn.Parameter(torch.zeros(self.heads, steps))
                for a in self._relative_arrows
            }
        )

    @property
    def kind(self) -> str:
        """The attention kind (a registered kernel or composite)."""
        return self.kernels.kind

    @property
    def kernel_options(self) -> dict[str, Any]:
        """The kernel options, without ``rrwp_steps``."""
        return self.kernels.kernel_options

    @property
    def attention_dropout(self) -> float:
        """Dropout on the attention weights."""
        return self.kernels.attention_dropout

    @property
    def rrwp_steps(self) -> int:
        """Relative random-walk steps of the global arrows' bias (0: none)."""
        return self.kernels.rrwp_steps

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

    def _kernel(self, arrow: Arrow) -> type:
        """Kernel class of one arrow (its capability flags)."""
        return kernel_class(self.kernels.kind_of(arrow))

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
        converted = converted_neighborhoods(neighborhoods, self._matrix_arrows)
        return arrow_neighborhoods(converted, self._matrix_arrows, self._bias_arrows)

    # ------------------------------------------------------------------ structure
    def structure_key(self, output_ranks: Sequence[int] | None = None) -> str:
        """Return what :meth:`prepare` depends on besides the data, as ``"name=value; ..."`` fields.

        Two layers with the same key build the same :class:`CellStructure` from the same
        complex: the tensor diagram (its arrows, which of them run fused, read their values as
        a bias, or carry relative random-walk features), the attention mechanism and kind, the
        heads (the CPU plan is laid out for them), the maximal rank and ``output_ranks``. A
        prepared structure stored with a complex
        (:class:`~topomodelx_attention.nn.cell.PrepareStructure`) is reused only by a model
        with the same key.

        Parameters
        ----------
        output_ranks : sequence of int, optional
            As in :meth:`prepare`.

        Returns
        -------
        str
            The fields, e.g. ``"max_rank=2; attention=pairwise; kind=sparse; heads=4; ..."``.
        """
        ranks = self._output_ranks(output_ranks)
        fields = {
            "max_rank": self.max_rank,
            "attention": self.attention,
            "kind": self.kind,
            "heads": self.heads,
            "arrows": [a.label for a in self.arrows],
            "fused": [a.label for a in self._fused_arrows],
            "bias": [a.label for a in self._bias_arrows],
            "rrwp_steps": self.rrwp_steps,
            "output_ranks": ranks,
        }
        return "; ".join(f"{name}={value}" for name, value in fields.items())

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
        batch, num_complexes, sizes = checked_batch(batch, self.max_rank, num_complexes)
        converted: Mapping[str, Tensor] = {}
        if isinstance(neighborhoods, ArrowNeighborhoods):
            prepared = self.prepare_neighborhoods(neighborhoods)
        else:  # the fused arrows read their (untransposed) matrices as they are
            converted = converted_neighborhoods(neighborhoods, self._matrix_arrows)
            rest = [a for a in self._matrix_arrows if a not in self._fused_arrows]
            prepared = arrow_neighborhoods(converted, rest, self._bias_arrows)
        if self.attention == "general":
            general, layout = general_structure(self.arrows, prepared, batch, num_complexes, self.kind)
            return CellStructure((None,) * len(self.arrows), None, (), general, layout, output_ranks)
        layouts: tuple[PaddedLayout, ...] = ()
        if any(self._kernel(a).needs_layout for a in self.arrows):
            layouts = tuple(padded_layout(b, num_complexes) for b in batch)
        device = batch[0].device
        fused, output_fused = self._fused_structure(prepared, converted, sizes, device, output_ranks)
        indices = arrow_indices(self.arrows, self._indexed_arrows, prepared, sizes, device)
        relative: tuple[Tensor | None, ...] = ()
        if self._relative_arrows:
            relative = tuple(
                relative_features(
                    arrow, neighborhoods, converted, layouts[arrow.source], sizes,
                    self.rrwp_steps, self.relative_bias[self._block_of[arrow]].dtype,
                )
                if arrow in self._relative_arrows
                else None
                for arrow in self.arrows
            )
        return CellStructure(indices, fused, layouts, None, None, output_ranks, output_fused, relative)

    def _fused_structure(
        self,
        prepared: ArrowNeighborhoods,
        converted: Mapping[str, Tensor],
        sizes: Sequence[int],
        device: torch.device,
        output_ranks: tuple[int, ...] | None,
    ) -> tuple[FusedNeighborhood | None, FusedNeighborhood | None]:
        """Return the joined index of the fused arrows that attend, and its rows into ``output_ranks``."""
        if self.fused is None:
            return None, None
        every = self.fused.active(sizes)
        arrows = [self._fused_arrows[i] for i in every]
        fused = fused_index(arrows, prepared, converted, sizes, self.heads, device)
        if output_ranks is None:
            return fused, None
        active = self.fused.active(sizes, output_ranks)
        if active == every:
            return fused, fused
        if not active:
            return fused, None
        # the arrows into output_ranks: their rows of the joined index
        subset = [every.index(i) for i in active]
        pairs = [self.fused.pairs[i] for i in every]
        return fused, fused_subset(fused, pairs, subset, sizes)

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
        x = self._checked_cochains(x)
        ranks = self._output_ranks(ranks)
        if ranks == tuple(range(self.max_rank + 1)):
            ranks = None  # every rank: the full layer
        structure = self._structure(x, neighborhoods, batch, num_complexes, ranks)
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

    def _checked_cochains(self, x: Sequence[Tensor]) -> list[Tensor]:
        """``x`` as a list of one ``(n_r, channels)`` cochain per rank (clear errors otherwise)."""
        x = list(x)
        if len(x) != self.max_rank + 1:
            raise ValueError(
                f"expected {self.max_rank + 1} cochains (ranks 0..{self.max_rank}), got {len(x)}"
            )
        for r, xr in enumerate(x):
            if not isinstance(xr, Tensor) or xr.dim() != 2 or xr.shape[1] != self.channels:
                shape = tuple(xr.shape) if isinstance(xr, Tensor) else type(xr).__name__
                raise ValueError(f"x[{r}] must have shape (n_{r}, {self.channels}), got {shape}")
        return x

    def _structure(
        self,
        x: Sequence[Tensor],
        neighborhoods: Mapping[str, Tensor] | ArrowNeighborhoods | CellStructure,
        batch: Sequence[Tensor] | None,
        num_complexes: int | None,
        ranks: tuple[int, ...] | None,
    ) -> CellStructure:
        """Return the :class:`CellStructure` a forward reads: given, or built by :meth:`prepare`."""
        if isinstance(neighborhoods, CellStructure):
            if ranks is not None and neighborhoods.output_ranks != ranks:
                raise ValueError(
                    f"ranks={ranks} needs a CellStructure prepared for them: call "
                    f"prepare(..., output_ranks={ranks}) (this one has output_ranks="
                    f"{neighborhoods.output_ranks})"
                )
            return neighborhoods
        if batch is None:
            batch = [torch.zeros(xr.shape[0], dtype=torch.long, device=xr.device) for xr in x]
        batch = list(batch)
        if len(batch) != len(x) or any(b.numel() != xr.shape[0] for b, xr in zip(batch, x)):
            raise ValueError("batch must hold one (n_r,) vector per rank, matching x")
        return self.prepare(neighborhoods, batch, num_complexes, output_ranks=ranks)

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
