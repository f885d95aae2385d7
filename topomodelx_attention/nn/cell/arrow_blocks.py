"""The attention blocks of a Cellular Transformer layer's arrows (§4.2.1, §4.3).

Every arrow ``ks → kt`` of a tensor diagram attends with the kernel its layer's ``kind`` gives
it, asked of the attention core by capability (:mod:`~topomodelx_attention.nn.attention.kinds`):
a composite's kernel within or across ranks (``"mixed"``: dense inside a rank, sparse across
ranks), and for a global arrow ``r->r:all_r`` the kernel of global attention
(:func:`~topomodelx_attention.nn.attention.global_kind`: the layer's own kernel when it attends
all pairs, else dense). :class:`ArrowKernels` is a layer's checked kernel configuration and
answers per arrow; :func:`pairwise_blocks` builds the block of every arrow: the sparse blocks
stacked for the core's fused call (:class:`~topomodelx_attention.nn.attention.StackedBlocks`),
the others one :class:`~topomodelx_attention.nn.attention.MultiHeadAttention` each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from topomodelx_attention.nn.attention import (
    COMPOSITE_KINDS,
    KERNELS,
    MultiHeadAttention,
    block_kind,
    global_kind,
    kernel_class,
    kernel_kinds,
)
from topomodelx_attention.nn.attention.heads import check_dropout
from topomodelx_attention.nn.attention.stacked import StackedBlocks, stackable
from topomodelx_attention.nn.cell.tensor_diagram import Arrow

__all__ = ["ArrowKernels", "pairwise_blocks"]


@dataclass(frozen=True)
class ArrowKernels:
    """A layer's attention kernels: its ``kind`` and options, checked once, answered per arrow.

    Built by :meth:`checked`. The kernel of an arrow is :meth:`kind_of` (chosen by capability);
    its options are :meth:`options_of`: those of the layer's ``kernel_options`` its kernel
    takes, the layer's ``attention_dropout``, and for a global arrow no θ·N bias (or, with
    ``rrwp_steps``, the unscaled relative random-walk bias).

    Attributes
    ----------
    kind : str
        A registered kernel or composite kind.
    kernel_options : dict
        The layer's kernel options, without ``rrwp_steps``.
    attention_dropout : float
        Dropout on the attention weights.
    rrwp_steps : int
        Relative random-walk steps of the global arrows' bias (0: none).
    """

    kind: str
    kernel_options: dict[str, Any]
    attention_dropout: float
    rrwp_steps: int = 0

    @classmethod
    def checked(
        cls,
        kind: str,
        kernel_options: Mapping[str, Any] | None,
        attention_dropout: float,
        arrows: Sequence[Arrow],
        attention: str,
    ) -> ArrowKernels:
        """Check a layer's kernel configuration against its arrows and attention mechanism.

        Parameters
        ----------
        kind, kernel_options, attention_dropout
            As :class:`~topomodelx_attention.nn.cell.CellularTransformerLayer` takes them
            (``kernel_options`` with ``rrwp_steps``).
        arrows : sequence of Arrow
            The layer's tensor diagram.
        attention : {"pairwise", "general"}
            The layer's attention mechanism.

        Returns
        -------
        ArrowKernels
            The checked configuration.

        Raises
        ------
        ValueError
            For an unknown kind, a composite kind or a global arrow in general attention, an
            option no kernel of the layer takes, or a bad ``rrwp_steps``.
        """
        kernel_kinds(kind)  # a registered kernel or composite (a clear error otherwise)
        if attention == "general" and kind in COMPOSITE_KINDS:
            raise ValueError(
                f"kind={kind!r} is a pairwise kind (one kernel within a rank, another across "
                f"ranks); general attention takes one kernel ({tuple(KERNELS)})"
            )
        options = dict(kernel_options or {})
        rrwp_steps = options.pop("rrwp_steps", 0)  # the global arrows' option
        options = _check_kernel_options(kind, options)
        if attention == "general" and any(a.is_global for a in arrows):
            raise ValueError(
                "global arrows (r->r:all_r) are pairwise attention blocks; general attention "
                "attends over every cell already (kind='dense' or 'linear')"
            )
        rrwp_steps = _check_rrwp_steps(rrwp_steps, arrows, kind)
        attention_dropout = check_dropout(attention_dropout, "attention_dropout")
        return cls(kind, options, attention_dropout, rrwp_steps)

    def kind_of(self, arrow: Arrow) -> str:
        """Kernel kind of one arrow (a composite's kernel within / across ranks).

        A global arrow (``all_r``) attends all pairs of its rank's cells, without mask:
        :func:`~topomodelx_attention.nn.attention.global_kind` of the layer's kind.
        """
        if arrow.is_global:
            return global_kind(self.kind)
        return block_kind(self.kind, within=arrow.source == arrow.target)

    def options_of(self, arrow: Arrow) -> dict[str, Any]:
        """Kernel options of one arrow's block (a global arrow has no θ·N bias)."""
        kind = self.kind_of(arrow)
        options = self.options_for(kind)
        if arrow.is_global and kernel_class(kind).accepts_bias:
            options["neighborhood_bias"] = bool(self.rrwp_steps)
            if self.rrwp_steps:  # the learned K → heads map gives the logits: no θ
                options.update(bias_scale="none")
        return options

    def options_for(self, kind: str) -> dict[str, Any]:
        """Kernel options of one kernel: the attention dropout + the layer's options it takes."""
        names = kernel_class(kind).option_names()
        options = {k: v for k, v in self.kernel_options.items() if k in names}
        return {"attention_dropout": self.attention_dropout, **options}


def pairwise_blocks(
    arrows: Sequence[Arrow],
    keys: Sequence[str],
    kernels: ArrowKernels,
    channels: int,
    heads: int,
    ranks: int,
    *,
    bias: bool,
    output_projection: bool,
) -> tuple[nn.ModuleDict, StackedBlocks | None, tuple[Arrow, ...]]:
    """Build the attention block of every arrow of pairwise attention (Eq. 2).

    One :class:`~topomodelx_attention.nn.attention.MultiHeadAttention` per arrow, in arrow
    order (the random stream of the initialisation); the sparse blocks with plain Q/K/V/O
    projections then move into one :class:`~topomodelx_attention.nn.attention.StackedBlocks`
    (their weights stacked per rank and role, attended in one fused call of the core).

    Parameters
    ----------
    arrows : sequence of Arrow
        The tensor diagram.
    keys : sequence of str
        The arrows' block keys (:func:`~.tensor_diagram.block_keys`), same order.
    kernels : ArrowKernels
        The layer's kernels.
    channels, heads : int
        Width and heads of every block.
    ranks : int
        Number of ranks ``0..max_rank``.
    bias, output_projection : bool
        As :class:`~topomodelx_attention.nn.attention.MultiHeadAttention` takes them.

    Returns
    -------
    blocks : torch.nn.ModuleDict
        The blocks attended one by one, by key.
    fused : StackedBlocks or None
        The stacked sparse blocks (``None`` when there are none).
    fused_arrows : tuple of Arrow
        The arrows of ``fused``, in arrow order.
    """
    built = {
        key: MultiHeadAttention(
            channels,
            channels,
            heads,
            kind=kernels.kind_of(arrow),
            kernel_options=kernels.options_of(arrow),
            bias=bias,
            output_projection=output_projection,
        )
        for arrow, key in zip(arrows, keys)
    }
    fused_keys = [k for k in keys if stackable(built[k])]
    fused_arrows = tuple(a for a, k in zip(arrows, keys) if k in fused_keys)
    blocks = nn.ModuleDict({k: b for k, b in built.items() if k not in fused_keys})
    fused = None
    if fused_keys:
        pairs = [(a.source, a.target) for a in fused_arrows]
        fused = StackedBlocks([built[k] for k in fused_keys], fused_keys, pairs, ranks)
    return blocks, fused, fused_arrows


def _check_rrwp_steps(steps: object, arrows: Sequence[Arrow], kind: str) -> int:
    """``kernel_options["rrwp_steps"]`` as an int (``0``: off); it needs a global arrow with a bias."""
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


def _check_kernel_options(kind: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Raise unless every option is taken by a kernel of the layer (a composite's: either)."""
    options = dict(options)
    if "attention_dropout" in options:
        raise ValueError(
            "attention_dropout is an option of the layer/model itself: pass attention_dropout=, "
            "not kernel_options={'attention_dropout': ...}"
        )
    taken = {name for k in kernel_kinds(kind) for name in kernel_class(k).option_names()}
    unknown = sorted(set(options) - taken)
    if unknown:
        raise ValueError(
            f"kernel_options {unknown} are not options of kind={kind!r}; it takes {sorted(taken)} "
            "(drop the others from kernel_options)"
        )
    return options
