r"""Attention kernels: the per-kind part of :class:`~.multihead.MultiHeadAttention`, by name.

A kernel maps projected, head-split queries / keys / values to the attention output
(:math:`\mathrm{softmax}(\mathrm{scale}\; Q K^\top \star \phi(N)) V`, Eq. 2 of the Cellular
Transformer paper) and owns exactly the options and parameters of its kind:

* :class:`SparseKernel` (``kind="sparse"``): mask ``N``;
* :class:`DenseKernel` (``kind="dense"``): all pairs per complex, and the optional
  :math:`\theta N` bias with its :math:`\theta` (created only when the bias is on);
* :class:`LinearKernel` (``kind="linear"``): Performer / FAVOR+ random features.

Every kernel takes ``heads`` and ``head_channels`` (positional), ``scale`` (``None``:
:math:`1/\sqrt{d}`; ``1.0``: the paper's logits) and ``attention_dropout``, plus the options
listed in its :attr:`~AttentionKernel.options`. Kernels are registered by kind
(:data:`KERNELS`, :func:`register_kernel`); every model that takes ``kind`` builds its kernels
with :func:`build_kernel` from ``kind`` and one ``kernel_options`` mapping, and reads the
kernel's capability flags (:attr:`~AttentionKernel.needs_neighborhood`,
:attr:`~AttentionKernel.accepts_bias`, :attr:`~AttentionKernel.needs_layout`,
:attr:`~AttentionKernel.returns_weights`, :attr:`~AttentionKernel.has_weights`) instead of
comparing kind names. A new kernel is one registered subclass that implements
:meth:`~AttentionKernel.attend` (``forward`` collects the token structure of a call into an
:class:`AttentionTokens` and hands it over); every model can then use it by its name.

Which kernel a block of a model uses (composite kinds, global attention) is chosen by these
flags in :mod:`~.kinds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.nn.attention.dense import dense_attention, dense_attention_weights
from topomodelx_attention.nn.attention.heads import check_dropout, positive_int
from topomodelx_attention.nn.attention.layout import LayoutArg
from topomodelx_attention.nn.attention.linear import (
    default_num_random_features,
    linear_attention,
    orthogonal_random_matrix,
)
from topomodelx_attention.nn.attention.neighborhood import Neighborhood
from topomodelx_attention.nn.attention.plan import SparsePlan
from topomodelx_attention.nn.attention.sparse import sparse_attention

__all__ = [
    "BIAS_SCALES",
    "COMMON_OPTIONS",
    "KERNELS",
    "AttentionKernel",
    "AttentionTokens",
    "DenseKernel",
    "LinearKernel",
    "SparseKernel",
    "build_kernel",
    "kernel_class",
    "register_kernel",
]

#: Values of ``bias_scale``: one :math:`\theta` per head, one shared scalar (the paper's), or
#: none (the bias is added as given, e.g. logits a layer has already mapped to its heads).
BIAS_SCALES: tuple[str, ...] = ("per_head", "shared", "none")

#: Options every kernel takes (keyword-only), besides the ones of its own ``options``.
COMMON_OPTIONS: tuple[str, ...] = ("scale", "attention_dropout")

#: Registered kernels by kind (``"sparse"``, ``"dense"``, ``"linear"``, and any added with
#: :func:`register_kernel`).
KERNELS: dict[str, type[AttentionKernel]] = {}


def register_kernel(cls: type[AttentionKernel]) -> type[AttentionKernel]:
    """Register a kernel class under its ``kind`` (class decorator).

    Parameters
    ----------
    cls : type
        A subclass of :class:`AttentionKernel` with a non-empty ``kind``.

    Returns
    -------
    type
        ``cls`` itself.
    """
    if not (isinstance(cls, type) and issubclass(cls, AttentionKernel)) or not cls.kind:
        raise TypeError(
            f"register_kernel takes an AttentionKernel subclass with a kind, got {cls!r}"
        )
    if KERNELS.get(cls.kind, cls) is not cls:
        raise ValueError(
            f"an attention kernel of kind {cls.kind!r} is already registered "
            f"({KERNELS[cls.kind].__name__}); give the new kernel another kind"
        )
    KERNELS[cls.kind] = cls
    return cls


def kernel_class(kind: str) -> type[AttentionKernel]:
    """Return the registered kernel class of ``kind`` (a clear error for unknown kinds)."""
    if kind not in KERNELS:
        raise ValueError(f"unknown attention kind {kind!r}; registered kinds: {tuple(KERNELS)}")
    return KERNELS[kind]


def build_kernel(
    kind: str, heads: int, head_channels: int, options: Mapping[str, Any] | None = None
) -> AttentionKernel:
    """Build the kernel of ``kind`` from one options mapping.

    Parameters
    ----------
    kind : str
        A registered kind (:data:`KERNELS`).
    heads : int
        Number of heads.
    head_channels : int
        Query/key dimension per head.
    options : mapping, optional
        Keyword options: :data:`COMMON_OPTIONS` and the kernel's own ``options``.

    Returns
    -------
    AttentionKernel
        The kernel.

    Raises
    ------
    ValueError
        For an unknown kind, or an option the kernel does not take (naming the kernel's
        options).
    """
    cls = kernel_class(kind)
    options = dict(options or {})
    unknown = sorted(set(options) - set(cls.option_names()))
    if unknown:
        raise ValueError(
            f"kernel_options {unknown} are not options of kind={kind!r}; it takes "
            f"{cls.option_names()}"
        )
    return cls(heads, head_channels, **options)


class AttentionTokens(NamedTuple):
    r"""Where the tokens of one attention call are: what :meth:`AttentionKernel.forward` got.

    Built by :meth:`AttentionKernel.forward` from its arguments and handed to the kernel's
    :meth:`~AttentionKernel.attend` (and :meth:`~AttentionKernel.weights`); a kernel reads the
    fields its kind uses (see :meth:`AttentionKernel.forward` for their meaning).
    """

    neighborhood: Neighborhood | None = None
    batch_target: Tensor | None = None
    batch_source: Tensor | None = None
    num_complexes: int | None = None
    layout: LayoutArg | None = None
    plan: SparsePlan | None = None


def _check_scale(scale: float | None) -> float | None:
    if scale is not None and (isinstance(scale, bool) or not scale > 0):
        raise ValueError(f"scale must be positive (or None for 1/sqrt(d)), got {scale}")
    return None if scale is None else float(scale)


class AttentionKernel(nn.Module):
    r"""Base class: attention of one kind on projected, head-split tensors.

    Parameters
    ----------
    heads : int
        Number of heads.
    head_channels : int
        Query/key dimension per head ``d``.
    scale : float, optional
        Logit scale; ``1 / sqrt(head_channels)`` when ``None``; ``1.0`` gives the paper's
        Eq. (2) logits :math:`X_t Q (X_s K)^\top` without scaling.
    attention_dropout : float, default = 0.0
        Dropout on the attention weights (training only); a kernel without weights
        (``has_weights = False``) raises for a positive value.
    """

    #: The attention kind, its name in :data:`KERNELS`.
    kind: ClassVar[str] = ""
    #: Keyword options of the kernel besides :data:`COMMON_OPTIONS`.
    options: ClassVar[tuple[str, ...]] = ()
    #: ``forward`` requires a neighbourhood (a mask).
    needs_neighborhood: ClassVar[bool] = False
    #: ``forward`` may take a neighbourhood as an additive bias :math:`\theta N`.
    accepts_bias: ClassVar[bool] = False
    #: Attention runs per complex on padded token sets (batch vectors or a ``layout``).
    needs_layout: ClassVar[bool] = False
    #: The kernel implements :meth:`weights`: explicit attention probabilities.
    returns_weights: ClassVar[bool] = False
    #: The kernel forms attention weights, so ``attention_dropout`` applies.
    has_weights: ClassVar[bool] = True
    #: The attention block adds the weighted neighbourhood sum ``w ⊙ Σ_{s∈N(t)} v_s``
    #: (:func:`~.sparse.neighborhood_sum`; the sparse kind's ``cardinality`` option).
    cardinality: bool = False

    def __init__(
        self,
        heads: int,
        head_channels: int,
        *,
        scale: float | None = None,
        attention_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.heads = positive_int(heads, "heads")
        self.head_channels = positive_int(head_channels, "head_channels")
        self.scale = _check_scale(scale)
        self.attention_dropout = check_dropout(attention_dropout, "attention_dropout")
        if self.attention_dropout > 0.0 and not self.has_weights:
            with_weights = tuple(k for k, c in KERNELS.items() if c.has_weights)
            raise ValueError(
                f"attention_dropout={attention_dropout} drops attention weights, which "
                f"kind={self.kind!r} never forms: set attention_dropout=0 or use one of "
                f"{with_weights}"
            )

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """Every keyword option of the kernel: :data:`COMMON_OPTIONS` + ``options``."""
        return (*COMMON_OPTIONS, *cls.options)

    def reset_parameters(self) -> None:
        """Reset the kernel's own parameters (none by default)."""

    @fill_doc
    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_complexes: int | None = None,
        layout: LayoutArg | None = None,
        *,
        plan: SparsePlan | None = None,
    ) -> Tensor:
        r"""Attend: collect the token structure into an :class:`AttentionTokens`, call :meth:`attend`.

        Parameters
        ----------
        %(qkv)s
        neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
            ``(n_target, n_source)`` neighbourhood: the mask of the sparse kind (required),
            the :math:`\theta N` bias of the dense kind (optional); must be ``None`` for the
            linear kind. Under ``torch.compile`` pass a
            :func:`~topomodelx_attention.nn.attention.prepare_neighborhood` result (sparse
            tensors cannot be traced).
        %(batch_pair)s
        %(num_complexes)s
        layout : PaddedLayout or tuple of PaddedLayout, optional
            Precomputed padding (dense and linear kinds; see
            :func:`~topomodelx_attention.nn.attention.padded_layout`): one layout for
            self-attention, ``(target_layout, source_layout)`` for cross-attention; replaces
            the batch vectors. Ignored by the sparse kind, whose block structure is ``N``.
        plan : SparsePlan, optional
            The fused CPU kernel's :class:`~.plan.SparsePlan` of ``neighborhood``, built once
            per batch (:func:`~.plan.sparse_plan`); only for kernels that attend on a
            neighbourhood (``needs_neighborhood``).

        Returns
        -------
        torch.Tensor, shape = (n_target, heads, d_v)
            Attention output per head.
        """
        if plan is not None and not self.needs_neighborhood:
            raise ValueError(
                f"plan= is the sparse kernel's CSR plan of a neighbourhood mask; "
                f"kind={self.kind!r} takes none"
            )
        tokens = AttentionTokens(
            neighborhood, batch_target, batch_source, num_complexes, layout, plan
        )
        return self.attend(query, key, value, tokens)

    def attend(self, query: Tensor, key: Tensor, value: Tensor, tokens: AttentionTokens) -> Tensor:
        """Attend on ``tokens`` (what a subclass implements); arguments as in :meth:`forward`."""
        raise NotImplementedError

    def weights(self, query: Tensor, key: Tensor, tokens: AttentionTokens) -> Tensor:
        """Return the attention probabilities of :meth:`attend` (``returns_weights`` kernels).

        Parameters
        ----------
        query, key : torch.Tensor
            As in :meth:`forward`.
        tokens : AttentionTokens
            The token structure (``plan`` unused).

        Returns
        -------
        torch.Tensor, shape = (B, heads, Lt, Ls)
            Probabilities per complex and head, padded.
        """
        raise NotImplementedError(f"kind={self.kind!r} forms no explicit attention weights")

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        options = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.options)
        common = f"scale={self.scale}, attention_dropout={self.attention_dropout}"
        return f"{common}, {options}" if options else common


@register_kernel
@fill_doc
class SparseKernel(AttentionKernel):
    r"""Softmax over the entries of the neighbourhood ``N`` only (mask; Eq. 2, sparse kind).

    Parameters
    ----------
    heads, head_channels : int
        Heads and query/key dimension per head.
    %(kernel_scale_dropout)s
    cardinality : bool, default = False
        The attention block (:class:`~.multihead.MultiHeadAttention`, the fused sparse call)
        adds :math:`w \odot \sum_{s \in N(t)} v_s` to every target's output, a learnt
        ``(heads, d_v)`` weight ``w`` per block starting at zero (the block owns it): the
        softmax averages the neighbours, this term counts them (degree, rings around a
        vertex), as a GIN-style sum aggregation does; see :func:`~.sparse.neighborhood_sum`.
        The kernel's own output is unchanged.
    """

    kind = "sparse"
    needs_neighborhood = True
    options = ("cardinality",)

    def __init__(
        self,
        heads: int,
        head_channels: int,
        *,
        scale: float | None = None,
        attention_dropout: float = 0.0,
        cardinality: bool = False,
    ) -> None:
        super().__init__(heads, head_channels, scale=scale, attention_dropout=attention_dropout)
        if not isinstance(cardinality, bool):
            raise TypeError(f"cardinality must be a bool, got {cardinality!r}")
        self.cardinality = cardinality

    def attend(self, query: Tensor, key: Tensor, value: Tensor, tokens: AttentionTokens) -> Tensor:
        """Sparse attention; ``N`` carries the block structure (batch vectors, layout unused)."""
        if tokens.neighborhood is None:
            raise ValueError(
                "kind='sparse' needs a neighborhood (n_target, n_source); use kind='dense' "
                "for all-pairs attention"
            )
        return sparse_attention(
            query,
            key,
            value,
            tokens.neighborhood,
            scale=self.scale,
            dropout_p=self.attention_dropout,
            training=self.training,
            plan=tokens.plan,
        )


@register_kernel
@fill_doc
class DenseKernel(AttentionKernel):
    r"""All pairs inside every complex, optional :math:`\theta N` bias (Eq. 2, dense kind).

    Parameters
    ----------
    heads, head_channels : int
        Heads (size of a per-head :math:`\theta`) and query/key dimension per head.
    %(kernel_scale_dropout)s
    neighborhood_bias : bool, default = True
        Whether the kernel takes a neighbourhood bias :math:`\theta N`. ``False``: plain
        softmax attention (e.g. TokenGT), no :math:`\theta` is created and passing a
        neighbourhood raises ``ValueError``.
    bias_scale : {"per_head", "shared", "none"}, default = "per_head"
        One :math:`\theta` per head (shape ``(heads,)``), one scalar shared by the heads
        (shape ``(1,)``, the paper's :math:`\phi(N) = \theta N`), or none: the bias is added
        to the logits as given (no :math:`\theta` is stored or multiplied; for a bias that is
        already a learned logit per head, such as the CT's relative random-walk bias).
    learn_bias_scale : bool, default = True
        Whether :math:`\theta` is a trainable parameter (else a fixed buffer).
    bias_scale_init : float, default = 1.0
        Initial value of :math:`\theta` (neighbours start with a +1 logit).
    memory_budget : int, optional
        Largest ``(B, heads, Lt, Ls)`` tensor allowed, in bytes (default
        :data:`~topomodelx_attention.nn.attention.dense.DENSE_MEMORY_BUDGET`, read at call
        time); a larger batch raises ``ValueError`` before allocating.
    """

    kind = "dense"
    options = (
        "neighborhood_bias",
        "bias_scale",
        "learn_bias_scale",
        "bias_scale_init",
        "memory_budget",
    )
    accepts_bias = True
    needs_layout = True
    returns_weights = True

    def __init__(
        self,
        heads: int,
        head_channels: int,
        *,
        scale: float | None = None,
        attention_dropout: float = 0.0,
        neighborhood_bias: bool = True,
        bias_scale: str = "per_head",
        learn_bias_scale: bool = True,
        bias_scale_init: float = 1.0,
        memory_budget: int | None = None,
    ) -> None:
        super().__init__(heads, head_channels, scale=scale, attention_dropout=attention_dropout)
        if memory_budget is not None:
            memory_budget = positive_int(memory_budget, "memory_budget")
        self.memory_budget = memory_budget
        if bias_scale not in BIAS_SCALES:
            raise ValueError(f"bias_scale must be one of {BIAS_SCALES}, got {bias_scale!r}")
        self.neighborhood_bias = bool(neighborhood_bias)
        self.bias_scale_mode = bias_scale
        self.learn_bias_scale = bool(learn_bias_scale)
        self.bias_scale_init = float(bias_scale_init)
        if not self.neighborhood_bias or bias_scale == "none":
            self.bias_scale = None
        else:
            theta = torch.empty(self.heads if bias_scale == "per_head" else 1)
            if self.learn_bias_scale:
                self.bias_scale = nn.Parameter(theta)
            else:
                self.register_buffer("bias_scale", theta)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r""":math:`\theta` = ``bias_scale_init``."""
        if self.bias_scale is not None:
            with torch.no_grad():
                self.bias_scale.fill_(self.bias_scale_init)

    def _options(self, tokens: AttentionTokens) -> dict[str, object]:
        """Keyword options of ``dense_attention`` / ``dense_attention_weights``: θ·N bias, scale."""
        theta = None
        if tokens.neighborhood is not None:
            if not self.neighborhood_bias:
                raise ValueError(
                    "this dense kernel has no neighbourhood bias (neighborhood_bias=False): "
                    "pass neighborhood=None"
                )
            theta = self.bias_scale
        return {
            "bias": tokens.neighborhood,
            "bias_scale": theta,
            "scale": self.scale,
            "num_complexes": tokens.num_complexes,
            "layout": tokens.layout,
            "memory_budget": self.memory_budget,
        }

    def attend(self, query: Tensor, key: Tensor, value: Tensor, tokens: AttentionTokens) -> Tensor:
        """Dense attention with the θ·N bias when a neighbourhood is given."""
        return dense_attention(
            query,
            key,
            value,
            tokens.batch_target,
            tokens.batch_source,
            dropout_p=self.attention_dropout,
            training=self.training,
            **self._options(tokens),
        )

    def weights(self, query: Tensor, key: Tensor, tokens: AttentionTokens) -> Tensor:
        """Attention probabilities, ``(B, heads, Lt, Ls)`` (see ``dense_attention_weights``)."""
        return dense_attention_weights(
            query, key, tokens.batch_target, tokens.batch_source, **self._options(tokens)
        )

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        common = f"scale={self.scale}, attention_dropout={self.attention_dropout}"
        bias = (
            f"bias_scale={self.bias_scale_mode!r}"
            if self.neighborhood_bias
            else "neighborhood_bias=False"
        )
        return f"{common}, {bias}"


@register_kernel
class LinearKernel(AttentionKernel):
    r"""Performer / FAVOR+ approximation of the dense kind without bias (linear kind).

    No attention matrix is formed: ``attention_dropout`` must be 0 and a neighbourhood raises.

    Parameters
    ----------
    heads, head_channels : int
        Heads and query/key dimension per head ``d`` (columns of the random projection).
    scale : float, optional
        Logit scale of the approximated softmax (``None``: :math:`1/\sqrt{d}`).
    attention_dropout : float, default = 0.0
        Must be 0 (there are no attention weights to drop).
    num_random_features : int, optional
        Random features ``m``; :func:`default_num_random_features` by default
        (:math:`\max(\lceil d \ln d\rceil, 32)`).
    redraw_features_in_training : bool, default = False
        Draw a fresh projection at every training forward (not stored; the ``projection``
        buffer, used in eval mode, only changes via :meth:`redraw_features`).
    """

    kind = "linear"
    options = ("num_random_features", "redraw_features_in_training")
    needs_layout = True
    has_weights = False

    def __init__(
        self,
        heads: int,
        head_channels: int,
        *,
        scale: float | None = None,
        attention_dropout: float = 0.0,
        num_random_features: int | None = None,
        redraw_features_in_training: bool = False,
    ) -> None:
        super().__init__(heads, head_channels, scale=scale, attention_dropout=attention_dropout)
        if num_random_features is None:
            num_random_features = default_num_random_features(self.head_channels)
        self.num_random_features = positive_int(num_random_features, "num_random_features")
        self.redraw_features_in_training = bool(redraw_features_in_training)
        self.register_buffer(
            "projection", orthogonal_random_matrix(self.num_random_features, self.head_channels)
        )

    @torch.no_grad()
    def redraw_features(self, generator: torch.Generator | None = None) -> None:
        """Draw a new FAVOR+ projection into the ``projection`` buffer.

        Parameters
        ----------
        generator : torch.Generator, optional
            CPU generator for reproducibility.
        """
        self.projection.copy_(self._draw_projection(generator))

    def _draw_projection(self, generator: torch.Generator | None = None) -> Tensor:
        """Draw a FAVOR+ projection of the ``projection`` buffer's shape, dtype and device."""
        return orthogonal_random_matrix(
            self.projection.shape[0],
            self.projection.shape[1],
            generator=generator,
            dtype=self.projection.dtype,
            device=self.projection.device,
        )

    def attend(self, query: Tensor, key: Tensor, value: Tensor, tokens: AttentionTokens) -> Tensor:
        """FAVOR+ attention per complex (no neighbourhood)."""
        if tokens.neighborhood is not None:
            raise ValueError(
                "kind='linear' (FAVOR+) cannot use a neighbourhood bias θ·N: there is no attention "
                "matrix to add it to; pass neighborhood=None or use kind='dense'/'sparse'"
            )
        projection = self.projection
        if self.training and self.redraw_features_in_training:
            projection = self._draw_projection()
        return linear_attention(
            query,
            key,
            value,
            tokens.batch_target,
            tokens.batch_source,
            projection=projection,
            scale=self.scale,
            num_complexes=tokens.num_complexes,
            layout=tokens.layout,
        )

