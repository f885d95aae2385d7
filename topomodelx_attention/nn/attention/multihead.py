r"""Projected multi-head attention module, the building block of every model family.

:class:`MultiHeadAttention` implements Eq. (2) of the Cellular Transformer paper (§4.2.1),
:math:`\mathcal{A}^\bullet(X_t, X_s) = \mathrm{softmax}(X_t Q (X_s K)^\top \star \phi(N))\, X_s V`,
with the Q/K/V (and optional output) projections around an injected attention kernel
(:mod:`~topomodelx_attention.nn.attention.kernels`: sparse / dense / linear). The projections
are separate methods (:meth:`~MultiHeadAttention.project_query`, ...) and the attention itself
is :meth:`~MultiHeadAttention.attend`, so that models can override or reuse them; e.g. the
general cellular attention (Eq. 3), with queries/keys shared over all ranks and one value
projection per rank, calls :meth:`~MultiHeadAttention.attend` on its own concatenated values.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention.heads import HeadwiseLinear, merge_heads, split_heads
from topomodelx_attention.nn.attention.kernels import (
    BIAS_SCALES,
    AttentionKernel,
    DenseKernel,
    LinearKernel,
    SparseKernel,
    _check_dropout,
    positive_int,
)
from topomodelx_attention.nn.attention.layout import LayoutArg, Neighborhood

__all__ = ["ATTENTION_KINDS", "MultiHeadAttention"]

ATTENTION_KINDS: tuple[str, ...] = ("sparse", "dense", "linear")


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention from a source token set to a target token set (Eq. 2).

    .. math::
        \mathrm{MHA}(X_t, X_s) = \mathrm{Concat}_h\big[\mathrm{softmax}\big(
        \mathrm{scale}\; X_t Q_h (X_s K_h)^\top \star \phi(N)\big) X_s V_h\big]\, O

    * ``kind="sparse"``: scores only on the entries of the neighbourhood ``N`` (mask,
      :math:`\star` = Hadamard, :math:`\phi` = identity); ``N`` is required and carries the
      block structure itself (PyG batching makes it block-diagonal); the batch vectors are
      only checked for length.
    * ``kind="dense"``: all pairs inside each complex; if ``N`` is given its values are added as
      :math:`\theta N` (:math:`\star` = sum) with a learnable :math:`\theta` (one per head by
      default, initialised to ``bias_scale_init = 1``, so neighbours start with a +1 logit).
      ``neighborhood_bias=False`` gives plain softmax attention without any :math:`\theta`.
    * ``kind="linear"``: Performer / FAVOR+ approximation of the dense kind (no bias; passing
      ``N`` raises ``ValueError``; attention dropout does not apply since no attention matrix is
      formed).

    The per-kind part is an :class:`~topomodelx_attention.nn.attention.kernels.AttentionKernel`
    (``self.kernel``) built from ``kind`` and the kind's options, or passed as ``kernel``.

    Paper-exact switches (Cellular Transformer, Eq. 2 and §4.2.1; defaults unchanged):
    ``scale=1.0`` (logits without :math:`1/\sqrt{d}`), ``output_projection=False`` (the
    paper's multi-head attention: the target and source cochains are split into ``heads``
    pieces of smaller dimension, one single-head attention per pair of pieces with its own
    :math:`Q_h, K_h, V_h`, outputs concatenated, no :math:`O`), ``bias_scale="shared"`` (one
    scalar :math:`\theta`).

    Tokens of different complexes (given by the sorted batch vectors, or a precomputed
    layout) never attend to each other; a target without sources outputs ``O``'s bias (zeros
    when ``bias=False`` or without output projection).

    Parameters
    ----------
    in_channels : int
        Channels ``d_t`` of the target features (queries).
    out_channels : int, optional
        Output channels; ``in_channels`` by default. Values have ``out_channels`` channels,
        ``out_channels / heads`` per head.
    heads : int, default = 1
        Number of heads; must divide ``out_channels`` (and ``heads * head_channels`` is the
        query/key width ``p``).
    source_channels : int, optional
        Channels ``d_s`` of the source features (keys/values); ``in_channels`` by default.
    head_channels : int, optional
        Query/key dimension per head; ``out_channels // heads`` by default.
    kind : {"sparse", "dense", "linear"}, optional
        Attention kind (``"sparse"`` by default, or the kind of ``kernel``).
    kernel : AttentionKernel, optional
        A prebuilt kernel (:class:`~.kernels.SparseKernel`, :class:`~.kernels.DenseKernel`,
        :class:`~.kernels.LinearKernel`); then the kernel options below must keep their
        defaults.
    bias : bool, default = False
        Bias in the Q/K/V/O projections (the paper uses none "for simplicity").
    dropout : float, default = 0.0
        Dropout on the attention weights (training only; ``sparse`` and ``dense``; ignored by
        ``linear``).
    neighborhood_bias : bool, default = True
        Dense kind: whether a neighbourhood may be passed as the :math:`\theta N` bias. With
        ``False`` no :math:`\theta` is created (plain softmax attention, e.g. TokenGT).
    bias_scale : {"per_head", "shared"}, default = "per_head"
        Dense kind: one :math:`\theta` per head, or one shared scalar (the paper's).
    learn_bias_scale : bool, default = True
        Whether :math:`\theta` is a trainable parameter (else a fixed buffer). Dense kind only.
    bias_scale_per_head : bool, optional
        Former spelling of ``bias_scale`` (``True`` = ``"per_head"``, ``False`` =
        ``"shared"``); kept for compatibility.
    bias_scale_init : float, default = 1.0
        Initial value of :math:`\theta`.
    num_random_features : int, optional
        Random features of the linear kind; :func:`default_num_random_features` by default
        (:math:`\max(\lceil d \ln d\rceil, 32)` for head dimension ``d``).
    redraw_features_in_training : bool, default = False
        Linear kind: draw a fresh projection at every training forward (not stored; the
        ``projection`` buffer, used in eval mode, only changes via :meth:`redraw_features`).
    share_qk : bool, default = False
        Use the same projection for queries and keys (needs ``source_channels ==
        in_channels``).
    value_projection : bool, default = True
        Whether the module owns the value projection ``V``. ``False`` is for callers that
        project values themselves and call :meth:`attend` (e.g. the general cellular attention
        of Eq. 3 with one ``V`` per rank); :meth:`project_value` is then the identity (needs
        ``source_channels == out_channels``), so no parameter stays unused.
    scale : float, optional
        Logit scale; ``1 / sqrt(head_channels)`` by default; ``1.0`` is the paper's Eq. (2).
    output_projection : bool, default = True
        ``True``: full-width Q/K/V projections split into heads, heads merged by the output
        projection ``O`` (standard transformer). ``False``: the paper's split-input multi-head
        attention (§4.2.1): ``in_channels`` and ``source_channels`` are split into ``heads``
        consecutive pieces, head ``h`` projects its own pieces
        (:class:`~topomodelx_attention.nn.attention.heads.HeadwiseLinear`), and the heads are
        concatenated with no ``O``. Needs ``heads`` to divide ``in_channels`` and
        ``source_channels``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int | None = None,
        heads: int = 1,
        *,
        source_channels: int | None = None,
        head_channels: int | None = None,
        kind: str | None = None,
        kernel: AttentionKernel | None = None,
        bias: bool = False,
        dropout: float = 0.0,
        neighborhood_bias: bool = True,
        bias_scale: str = "per_head",
        learn_bias_scale: bool = True,
        bias_scale_per_head: bool | None = None,
        bias_scale_init: float = 1.0,
        num_random_features: int | None = None,
        redraw_features_in_training: bool = False,
        share_qk: bool = False,
        value_projection: bool = True,
        scale: float | None = None,
        output_projection: bool = True,
    ) -> None:
        super().__init__()
        in_channels = positive_int(in_channels, "in_channels")
        out_channels = (
            in_channels if out_channels is None else positive_int(out_channels, "out_channels")
        )
        heads = positive_int(heads, "heads")
        source_channels = (
            in_channels
            if source_channels is None
            else positive_int(source_channels, "source_channels")
        )
        if kernel is not None and not isinstance(kernel, AttentionKernel):
            raise TypeError(f"kernel must be an AttentionKernel, got {type(kernel).__name__}")
        if kind is None:
            kind = "sparse" if kernel is None else kernel.kind
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; choose one of {ATTENTION_KINDS}")
        if kernel is not None and kernel.kind != kind:
            raise ValueError(f"kind={kind!r} but the kernel is of kind {kernel.kind!r}")
        if out_channels % heads != 0:
            raise ValueError(
                f"heads={heads} must divide out_channels={out_channels} (values are split into "
                "heads)"
            )
        if head_channels is None:
            head_channels = out_channels // heads
        head_channels = positive_int(head_channels, "head_channels")
        if share_qk and source_channels != in_channels:
            raise ValueError(
                f"share_qk needs source_channels == in_channels, got {source_channels} != "
                f"{in_channels}"
            )
        if not value_projection and source_channels != out_channels:
            raise ValueError(
                "value_projection=False (identity values) needs source_channels == out_channels, "
                f"got {source_channels} != {out_channels}"
            )
        if not output_projection:
            for name, channels in (
                ("in_channels", in_channels),
                ("source_channels", source_channels),
            ):
                if channels % heads != 0:
                    raise ValueError(
                        f"output_projection=False splits the inputs into heads: heads={heads} "
                        f"must divide {name}={channels}"
                    )
        if bias_scale_per_head is not None:
            legacy = "per_head" if bias_scale_per_head else "shared"
            if bias_scale != "per_head" and bias_scale != legacy:
                raise ValueError(
                    f"bias_scale={bias_scale!r} contradicts bias_scale_per_head="
                    f"{bias_scale_per_head}; pass only bias_scale"
                )
            bias_scale = legacy
        if bias_scale not in BIAS_SCALES:
            raise ValueError(f"bias_scale must be one of {BIAS_SCALES}, got {bias_scale!r}")
        if kernel is None:
            kernel = _build_kernel(
                kind,
                heads,
                head_channels,
                scale=scale,
                dropout=dropout,
                neighborhood_bias=neighborhood_bias,
                bias_scale=bias_scale,
                learn_bias_scale=learn_bias_scale,
                bias_scale_init=bias_scale_init,
                num_random_features=num_random_features,
                redraw_features_in_training=redraw_features_in_training,
            )

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.source_channels = source_channels
        self.heads = heads
        self.head_channels = head_channels
        self.value_channels = out_channels // heads
        self.kind = kind
        self.share_qk = share_qk
        self.output_projection = bool(output_projection)
        self.kernel = kernel

        def projection(channels: int, head_width: int) -> nn.Module:
            if output_projection:
                return nn.Linear(channels, heads * head_width, bias=bias)
            return HeadwiseLinear(channels, head_width, heads, bias=bias)

        self.lin_query = projection(in_channels, head_channels)
        self.lin_key = None if share_qk else projection(source_channels, head_channels)
        self.lin_value = (
            projection(source_channels, self.value_channels) if value_projection else None
        )
        self.lin_out = (
            nn.Linear(out_channels, out_channels, bias=bias) if output_projection else None
        )
        self.reset_parameters()

    # ------------------------------------------------------------------------------------------
    # the kernel's options, readable on the module (compatibility)
    @property
    def scale(self) -> float | None:
        """Logit scale of the kernel (``None``: ``1 / sqrt(head_channels)``)."""
        return self.kernel.scale

    @property
    def dropout(self) -> float:
        """Attention dropout of the kernel (0 for the linear kind)."""
        return getattr(self.kernel, "dropout", 0.0)

    @property
    def bias_scale(self) -> Tensor | None:
        r""":math:`\theta` of the dense kernel's θ·N bias (``None`` without one)."""
        return getattr(self.kernel, "bias_scale", None)

    @property
    def projection(self) -> Tensor | None:
        """FAVOR+ random projection of the linear kernel (``None`` for other kinds)."""
        return getattr(self.kernel, "projection", None)

    @property
    def num_random_features(self) -> int | None:
        """Random features of the linear kernel (``None`` for other kinds)."""
        return getattr(self.kernel, "num_random_features", None)

    @property
    def redraw_features_in_training(self) -> bool:
        """Whether the linear kernel redraws its projection at every training forward."""
        return getattr(self.kernel, "redraw_features_in_training", False)

    # ------------------------------------------------------------------------------------------
    def reset_parameters(self) -> None:
        r"""Reset: Xavier-uniform weights, zero biases, the kernel's own parameters."""
        for lin in (self.lin_query, self.lin_key, self.lin_value, self.lin_out):
            if isinstance(lin, HeadwiseLinear):
                lin.reset_parameters()
            elif lin is not None:
                nn.init.xavier_uniform_(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)
        self.kernel.reset_parameters()

    def redraw_features(self, generator=None) -> None:
        """Draw a new FAVOR+ projection into the ``projection`` buffer (linear kind only).

        Parameters
        ----------
        generator : torch.Generator, optional
            CPU generator for reproducibility.
        """
        if not isinstance(self.kernel, LinearKernel):
            raise ValueError(
                f"redraw_features is only defined for kind='linear', not {self.kind!r}"
            )
        self.kernel.redraw_features(generator)

    # ------------------------------------------------------------------------------------------
    def _project(self, lin: nn.Module, x: Tensor) -> Tensor:
        out = lin(x)
        return out if isinstance(lin, HeadwiseLinear) else split_heads(out, self.heads)

    def project_query(self, x_target: Tensor) -> Tensor:
        """Project the targets to queries :math:`X_t Q`, split into heads.

        Parameters
        ----------
        x_target : torch.Tensor, shape = (n_target, in_channels)
            Target features.

        Returns
        -------
        torch.Tensor, shape = (n_target, heads, head_channels)
            Queries.
        """
        return self._project(self.lin_query, x_target)

    def project_key(self, x_source: Tensor) -> Tensor:
        """Project the sources to keys :math:`X_s K` (:math:`K = Q` if ``share_qk``), split.

        Parameters
        ----------
        x_source : torch.Tensor, shape = (n_source, source_channels)
            Source features.

        Returns
        -------
        torch.Tensor, shape = (n_source, heads, head_channels)
            Keys.
        """
        lin = self.lin_query if self.lin_key is None else self.lin_key
        return self._project(lin, x_source)

    def project_value(self, x_source: Tensor) -> Tensor:
        """Project the sources to values :math:`X_s V` (identity without ``value_projection``).

        Parameters
        ----------
        x_source : torch.Tensor, shape = (n_source, source_channels)
            Source features.

        Returns
        -------
        torch.Tensor, shape = (n_source, heads, out_channels // heads)
            Values.
        """
        if self.lin_value is None:
            return split_heads(x_source, self.heads)
        return self._project(self.lin_value, x_source)

    def project_output(self, out: Tensor) -> Tensor:
        """Merge the heads and apply the output projection :math:`O` (if any).

        Parameters
        ----------
        out : torch.Tensor, shape = (n_target, heads, out_channels // heads)
            Attention output per head.

        Returns
        -------
        torch.Tensor, shape = (n_target, out_channels)
            Concatenated heads, projected by :math:`O` unless ``output_projection=False``.
        """
        merged = merge_heads(out)
        return merged if self.lin_out is None else self.lin_out(merged)

    def attend(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_complexes: int | None = None,
        layout: LayoutArg | None = None,
    ) -> Tensor:
        r"""Attention of this module's kernel on already projected, head-split tensors.

        Parameters
        ----------
        query : torch.Tensor, shape = (n_target, heads, head_channels)
            Queries.
        key : torch.Tensor, shape = (n_source, heads, head_channels)
            Keys.
        value : torch.Tensor, shape = (n_source, heads, d_v)
            Values (any ``d_v``).
        neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
            ``(n_target, n_source)`` neighbourhood: the mask of the sparse kind (required),
            the :math:`\theta N` bias of the dense kind (optional); must be ``None`` for the
            linear kind. Under ``torch.compile`` pass a
            :func:`~topomodelx_attention.nn.attention.prepare_neighborhood` result (sparse
            tensors cannot be traced).
        batch_target : torch.Tensor, shape = (n_target,), optional
            Sorted complex index of every target.
        batch_source : torch.Tensor, shape = (n_source,), optional
            Sorted complex index of every source.
        num_complexes : int, optional
            Number of complexes.
        layout : PaddedLayout or tuple of PaddedLayout, optional
            Precomputed padding (dense and linear kinds; see
            :func:`~topomodelx_attention.nn.attention.padded_layout`): one layout for
            self-attention, ``(target_layout, source_layout)`` for cross-attention; replaces
            the batch vectors. Ignored by the sparse kind, whose block structure is ``N``.

        Returns
        -------
        torch.Tensor, shape = (n_target, heads, d_v)
            Attention output per head.
        """
        return self.kernel(
            query, key, value, neighborhood, batch_target, batch_source, num_complexes, layout
        )

    def attention_weights(
        self,
        x_target: Tensor,
        x_source: Tensor | None = None,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_complexes: int | None = None,
        layout: LayoutArg | None = None,
    ) -> Tensor:
        r"""Softmax attention probabilities per complex and head, padded (dense kind only).

        The weights the ``dense`` kind uses in :meth:`forward` (without attention dropout),
        from :func:`~topomodelx_attention.nn.attention.dense_attention_weights`: for
        inspecting or supervising attention maps. Memory is quadratic in the largest complex.

        Parameters
        ----------
        x_target : torch.Tensor, shape = (n_target, in_channels)
            Target (query) features.
        x_source : torch.Tensor, shape = (n_source, source_channels), optional
            Source (key) features; ``None`` for self-attention.
        neighborhood : torch.Tensor or tuple of torch.Tensor, optional
            The θ·N bias, as in :meth:`forward`.
        batch_target, batch_source : torch.Tensor, optional
            Sorted complex index of every token.
        num_complexes : int, optional
            Number of complexes.
        layout : PaddedLayout or tuple of PaddedLayout, optional
            Precomputed layout(s) (replaces the batch vectors).

        Returns
        -------
        torch.Tensor, shape = (B, heads, Lt, Ls)
            ``[b, h, i, j]``: weight of source ``j`` of complex ``b`` for its target ``i``
            (positions inside the complex, or the layout's slots); zero on padding.
        """
        if not isinstance(self.kernel, DenseKernel):
            raise ValueError(
                f"attention_weights needs kind='dense' (explicit softmax), not {self.kind!r}"
            )
        x_source, batch_source = self._sources(x_target, x_source, batch_target, batch_source)
        return self.kernel.weights(
            self.project_query(x_target),
            self.project_key(x_source),
            neighborhood,
            batch_target,
            batch_source,
            num_complexes,
            layout,
        )

    # ------------------------------------------------------------------------------------------
    def _check_features(self, x: Tensor, channels: int, name: str) -> None:
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.layout != torch.strided:
            raise TypeError(
                f"{name} must be a dense feature matrix, got a sparse {tuple(x.shape)} tensor: the "
                "arguments are (x_target, x_source, neighborhood); for TopoModelX's Conv order "
                "(x_source, neighborhood, x_target) use topomodelx_attention.nn.topomodelx."
                "AttentionConv"
            )
        if x.dim() != 2 or x.shape[1] != channels:
            raise ValueError(f"{name} must have shape (n, {channels}), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating point tensor, got {x.dtype}")

    def _sources(
        self,
        x_target: Tensor,
        x_source: Tensor | None,
        batch_target: Tensor | None,
        batch_source: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """Check the features; return ``(x_source, batch_source)`` (the targets' for ``None``)."""
        self._check_features(x_target, self.in_channels, "x_target")
        if x_source is not None:
            self._check_features(x_source, self.source_channels, "x_source")
            return x_source, batch_source
        if self.source_channels != self.in_channels:
            raise ValueError(
                "x_source=None (self-attention) needs source_channels == in_channels, got "
                f"{self.source_channels} != {self.in_channels}"
            )
        return x_target, batch_target if batch_source is None else batch_source

    def forward(
        self,
        x_target: Tensor,
        x_source: Tensor | None = None,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_complexes: int | None = None,
        layout: LayoutArg | None = None,
    ) -> Tensor:
        """Attend from ``x_source`` to ``x_target``.

        Parameters
        ----------
        x_target : torch.Tensor, shape = (n_target, in_channels)
            Target (query) features.
        x_source : torch.Tensor, shape = (n_source, source_channels), optional
            Source (key/value) features; ``None`` means self-attention (``x_source = x_target``
            and ``batch_source = batch_target``).
        neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
            Sparse ``(n_target, n_source)`` neighbourhood (coalesced COO), ``(2, nnz)`` edge
            index, ``(index_target, index_source)`` pair or prepared
            :class:`~topomodelx_attention.nn.attention.NeighborhoodIndex` (for
            ``torch.compile``). Required for ``sparse``, optional θ·N bias for ``dense``,
            forbidden for ``linear``.
        batch_target : torch.Tensor, shape = (n_target,), optional
            Sorted complex index of every target token (``None``: one complex).
        batch_source : torch.Tensor, shape = (n_source,), optional
            Sorted complex index of every source token.
        num_complexes : int, optional
            Number of complexes (inferred otherwise).
        layout : PaddedLayout or tuple of PaddedLayout, optional
            Precomputed padding of the token set(s) (dense and linear kinds): computed once
            per forward by :func:`~topomodelx_attention.nn.attention.padded_layout` and shared
            by a stack of layers; one layout for self-attention, ``(target_layout,
            source_layout)`` for cross-attention; replaces the batch vectors (tokens need not
            be sorted) and makes the call free of data-dependent sizes (``torch.compile``).

        Returns
        -------
        torch.Tensor, shape = (n_target, out_channels)
            Output features of the targets.
        """
        x_source, batch_source = self._sources(x_target, x_source, batch_target, batch_source)
        if x_source.dtype != x_target.dtype:
            raise TypeError(
                f"x_target and x_source must share a dtype, got {x_target.dtype} and "
                f"{x_source.dtype}"
            )
        for name, batch, n in (
            ("batch_target", batch_target, x_target.shape[0]),
            ("batch_source", batch_source, x_source.shape[0]),
        ):
            if batch is not None and (batch.dim() != 1 or batch.shape[0] != n):
                raise ValueError(f"{name} must have shape ({n},), got {tuple(batch.shape)}")
        query = self.project_query(x_target)
        key = self.project_key(x_source)
        value = self.project_value(x_source)
        out = self.attend(
            query, key, value, neighborhood, batch_target, batch_source, num_complexes, layout
        )
        return self.project_output(out)

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr(module)``."""
        extra = f", num_random_features={self.num_random_features}" if self.kind == "linear" else ""
        return (
            f"{self.in_channels}, {self.out_channels}, heads={self.heads}, kind={self.kind!r}, "
            f"source_channels={self.source_channels}, head_channels={self.head_channels}, "
            f"dropout={self.dropout}, output_projection={self.output_projection}{extra}"
        )


def _build_kernel(
    kind: str,
    heads: int,
    head_channels: int,
    *,
    scale: float | None,
    dropout: float,
    neighborhood_bias: bool,
    bias_scale: str,
    learn_bias_scale: bool,
    bias_scale_init: float,
    num_random_features: int | None,
    redraw_features_in_training: bool,
) -> AttentionKernel:
    """Build the kernel of ``kind`` with the options that apply to it (others unused)."""
    if kind == "sparse":
        return SparseKernel(scale=scale, dropout=dropout)
    if kind == "dense":
        return DenseKernel(
            heads,
            scale=scale,
            dropout=dropout,
            bias=neighborhood_bias,
            bias_scale=bias_scale,
            learn_bias_scale=learn_bias_scale,
            bias_scale_init=bias_scale_init,
        )
    _check_dropout(dropout)  # accepted and unused: no attention matrix
    return LinearKernel(
        head_channels,
        scale=scale,
        num_random_features=num_random_features,
        redraw_features_in_training=redraw_features_in_training,
    )
