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

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.nn.attention.heads import (
    HeadwiseLinear,
    check_features,
    merge_heads,
    positive_int,
    split_heads,
)
from topomodelx_attention.nn.attention.kernels import (
    AttentionKernel,
    AttentionTokens,
    build_kernel,
)
from topomodelx_attention.nn.attention.layout import LayoutArg
from topomodelx_attention.nn.attention.neighborhood import Neighborhood
from topomodelx_attention.nn.attention.sparse import neighborhood_sum

__all__ = ["MultiGroupAttention", "MultiHeadAttention"]

_ARGUMENT_ORDER = (
    ": the arguments are (x_target, x_source, neighborhood); for TopoModelX's Conv order "
    "(x_source, neighborhood, x_target) use topomodelx_attention.nn.topomodelx.AttentionConv"
)


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention from a source token set to a target token set (Eq. 2).

    .. math::
        \mathrm{MHA}(X_t, X_s) = \mathrm{Concat}_h\big[\mathrm{softmax}\big(
        \mathrm{scale}\; X_t Q_h (X_s K_h)^\top \star \phi(N)\big) X_s V_h\big]\, O

    The per-kind part is an :class:`~topomodelx_attention.nn.attention.kernels.AttentionKernel`
    (``self.kernel``), built from ``kind`` and ``kernel_options``
    (:func:`~topomodelx_attention.nn.attention.kernels.build_kernel`) or passed as ``kernel``:

    * ``kind="sparse"``: scores only on the entries of the neighbourhood ``N`` (mask,
      :math:`\star` = Hadamard, :math:`\phi` = identity); ``N`` is required and carries the
      block structure itself (PyG batching makes it block-diagonal); the batch vectors are
      only checked for length.
    * ``kind="dense"``: all pairs inside each complex; if ``N`` is given its values are added as
      :math:`\theta N` (:math:`\star` = sum) with a learnable :math:`\theta` (kernel options
      ``neighborhood_bias``, ``bias_scale``, ``learn_bias_scale``, ``bias_scale_init``).
    * ``kind="linear"``: Performer / FAVOR+ approximation of the dense kind (no bias, no
      attention weights; kernel options ``num_random_features``,
      ``redraw_features_in_training``).

    Every kernel takes the options ``scale`` (``None``: :math:`1/\sqrt{d}`) and
    ``attention_dropout``. Paper-exact switches (Cellular Transformer, Eq. 2 and §4.2.1;
    defaults unchanged): ``kernel_options={"scale": 1.0}`` (logits without :math:`1/\sqrt{d}`),
    ``output_projection=False`` (the paper's multi-head attention: the target and source
    cochains are split into ``heads`` pieces of smaller dimension, one single-head attention
    per pair of pieces with its own :math:`Q_h, K_h, V_h`, outputs concatenated, no :math:`O`),
    ``kernel_options={"bias_scale": "shared"}`` (one scalar :math:`\theta`, dense kind).

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
    kind : str, optional
        Attention kind, a registered kernel (:data:`~.kernels.KERNELS`: ``"sparse"``,
        ``"dense"``, ``"linear"``, ...); ``"sparse"`` by default, or the kind of ``kernel``.
    kernel_options : mapping, optional
        Options of the kernel of ``kind`` (``scale``, ``attention_dropout`` and the kernel's
        own ``options``); an option the kernel does not take raises ``ValueError``.
    kernel : AttentionKernel, optional
        A prebuilt kernel with ``heads`` heads of ``head_channels`` channels (then
        ``kernel_options`` must be empty).
    bias : bool, default = False
        Bias in the Q/K/V/O projections (the paper uses none "for simplicity").
    share_qk : bool, default = False
        Use the same projection for queries and keys (needs ``source_channels ==
        in_channels``).
    value_projection : bool, default = True
        Whether the module owns the value projection ``V``. ``False`` is for callers that
        project values themselves and call :meth:`attend` (e.g. :class:`MultiGroupAttention`);
        :meth:`project_value` is then the identity (needs ``source_channels == out_channels``),
        so no parameter stays unused.
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
        kernel_options: Mapping[str, Any] | None = None,
        kernel: AttentionKernel | None = None,
        bias: bool = False,
        share_qk: bool = False,
        value_projection: bool = True,
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
        self.kernel = _resolve_kernel(kind, kernel_options, kernel, heads, head_channels)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.source_channels = source_channels
        self.heads = heads
        self.head_channels = head_channels
        self.value_channels = out_channels // heads
        self.kind = self.kernel.kind
        self.share_qk = share_qk
        self.output_projection = bool(output_projection)
        self.bias = bool(bias)
        self.lin_query = self._projection(in_channels, head_channels)
        self.lin_key = None if share_qk else self._projection(source_channels, head_channels)
        self.lin_value = (
            self._projection(source_channels, self.value_channels) if value_projection else None
        )
        self.lin_out = (
            nn.Linear(out_channels, out_channels, bias=bias) if output_projection else None
        )
        if self.kernel.cardinality:  # w of the cardinality term w ⊙ Σ_{s∈N(t)} v_s
            self.cardinality_weight = nn.Parameter(torch.zeros(heads, self.value_channels))
        else:
            self.register_parameter("cardinality_weight", None)
        self.reset_parameters()

    def _projection(self, channels: int, head_width: int) -> nn.Module:
        """``channels -> heads * head_width``: full width, or per head (split input)."""
        if self.output_projection:
            return nn.Linear(channels, self.heads * head_width, bias=self.bias)
        return HeadwiseLinear(channels, head_width, self.heads, bias=self.bias)

    # ------------------------------------------------------------------------------------------
    def reset_parameters(self) -> None:
        r"""Reset: Xavier-uniform weights, zero biases and cardinality weight, the kernel's own."""
        for lin in (self.lin_query, self.lin_key, self.lin_value, self.lin_out):
            if lin is not None:
                _reset_projection(lin)
        if self.cardinality_weight is not None:
            nn.init.zeros_(self.cardinality_weight)
        self.kernel.reset_parameters()

    def redraw_features(self, generator: torch.Generator | None = None) -> None:
        """Draw new random features of the kernel (the linear kind's FAVOR+ projection).

        Parameters
        ----------
        generator : torch.Generator, optional
            CPU generator for reproducibility.
        """
        redraw = getattr(self.kernel, "redraw_features", None)
        if redraw is None:
            raise ValueError(
                f"redraw_features needs a kernel with random features (kind='linear'), not "
                f"{self.kind!r}"
            )
        redraw(generator)

    # ------------------------------------------------------------------------------------------
    def _project(self, lin: nn.Module, x: Tensor) -> Tensor:
        out = lin(x)
        return out if isinstance(lin, HeadwiseLinear) else split_heads(out, self.heads)

    @fill_doc
    def project_query(self, x_target: Tensor) -> Tensor:
        """Project the targets to queries :math:`X_t Q`, split into heads.

        %(x_target_parameters)s

        Returns
        -------
        torch.Tensor, shape = (n_target, heads, head_channels)
            Queries.
        """
        return self._project(self.lin_query, x_target)

    @fill_doc
    def project_key(self, x_source: Tensor) -> Tensor:
        """Project the sources to keys :math:`X_s K` (:math:`K = Q` if ``share_qk``), split.

        %(x_source_parameters)s

        Returns
        -------
        torch.Tensor, shape = (n_source, heads, head_channels)
            Keys.
        """
        lin = self.lin_query if self.lin_key is None else self.lin_key
        return self._project(lin, x_source)

    @fill_doc
    def project_value(self, x_source: Tensor) -> Tensor:
        """Project the sources to values :math:`X_s V` (identity without ``value_projection``).

        %(x_source_parameters)s

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

        The kernel's call, :meth:`AttentionKernel.forward
        <topomodelx_attention.nn.attention.kernels.AttentionKernel.forward>`, with the same
        arguments (documented there): queries / keys ``(n, heads, head_channels)``, values
        ``(n_source, heads, d_v)`` of any ``d_v``; returns ``(n_target, heads, d_v)``. With the
        kernel's ``cardinality`` option, plus ``cardinality_weight ⊙ Σ_{s∈N(t)} v_s``
        (:func:`~topomodelx_attention.nn.attention.sparse.neighborhood_sum`).
        """
        out = self.kernel(
            query, key, value, neighborhood, batch_target, batch_source, num_complexes, layout
        )
        if self.cardinality_weight is None:
            return out
        if self.cardinality_weight.shape[1] != value.shape[2]:
            raise ValueError(
                f"the cardinality weight is for values of width {self.cardinality_weight.shape[1]} "
                f"per head, got {value.shape[2]}"
            )
        total = neighborhood_sum(value, neighborhood, query.shape[0])
        return out + self.cardinality_weight * total

    @fill_doc
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
        %(x_target)s
        x_source : torch.Tensor, shape = (n_source, source_channels), optional
            Source (key) features; ``None`` for self-attention.
        neighborhood : torch.Tensor or tuple of torch.Tensor, optional
            The θ·N bias, as in :meth:`forward`.
        batch_target, batch_source : torch.Tensor, optional
            Sorted complex index of every token.
        %(num_complexes)s
        layout : PaddedLayout or tuple of PaddedLayout, optional
            Precomputed layout(s) (replaces the batch vectors).

        Returns
        -------
        torch.Tensor, shape = (B, heads, Lt, Ls)
            ``[b, h, i, j]``: weight of source ``j`` of complex ``b`` for its target ``i``
            (positions inside the complex, or the layout's slots); zero on padding.
        """
        if not self.kernel.returns_weights:
            raise ValueError(
                f"attention_weights needs a kernel with explicit weights (kind='dense'), not "
                f"{self.kind!r}"
            )
        x_source, batch_source = self._sources(x_target, x_source, batch_target, batch_source)
        tokens = AttentionTokens(neighborhood, batch_target, batch_source, num_complexes, layout)
        return self.kernel.weights(self.project_query(x_target), self.project_key(x_source), tokens)

    # ------------------------------------------------------------------------------------------
    def _check_features(self, x: Tensor, channels: int, name: str) -> None:
        check_features(x, channels, name, _ARGUMENT_ORDER)

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

    @fill_doc
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
        %(x_target)s
        x_source : torch.Tensor, shape = (n_source, source_channels), optional
            Source (key/value) features; ``None`` means self-attention (``x_source = x_target``
            and ``batch_source = batch_target``).
        neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
            Sparse ``(n_target, n_source)`` neighbourhood (coalesced COO), ``(2, nnz)`` edge
            index, ``(index_target, index_source)`` pair or prepared
            :class:`~topomodelx_attention.nn.attention.NeighborhoodIndex` (for
            ``torch.compile``). Required for ``sparse``, optional θ·N bias for ``dense``,
            forbidden for ``linear``.
        %(batch_target)s
        batch_source : torch.Tensor, shape = (n_source,), optional
            Sorted complex index of every source token.
        %(num_complexes)s
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
        """Describe the configuration in ``repr(module)`` (the kernel's options in its own)."""
        return (
            f"{self.in_channels}, {self.out_channels}, heads={self.heads}, kind={self.kind!r}, "
            f"source_channels={self.source_channels}, head_channels={self.head_channels}, "
            f"output_projection={self.output_projection}"
        )

    @torch.no_grad()
    def load_from_torch(self, attention: nn.MultiheadAttention) -> None:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (same width and heads).

        Both modules then compute the same function (self-attention with the dense kind, no
        dropout): ``in_proj`` gives Q/K/V, ``out_proj`` gives O.

        Parameters
        ----------
        attention : torch.nn.MultiheadAttention
            Source module with ``embed_dim == in_channels == out_channels`` and the same heads.
        """
        d = self.in_channels
        if attention.embed_dim != d or self.out_channels != d or self.source_channels != d:
            raise ValueError(
                f"the torch attention has width {attention.embed_dim}; this module maps "
                f"{self.in_channels} (source {self.source_channels}) to {self.out_channels}"
            )
        if attention.num_heads != self.heads:
            raise ValueError(
                f"the torch attention has {attention.num_heads} heads, this module {self.heads}"
            )
        if not self.output_projection or self.share_qk or self.lin_value is None:
            raise ValueError(
                "load_from_torch needs full-width Q/K/V/O projections (output_projection=True, "
                "share_qk=False, value_projection=True)"
            )
        weight, bias = attention.in_proj_weight, attention.in_proj_bias
        for i, lin in enumerate((self.lin_query, self.lin_key, self.lin_value)):
            lin.weight.copy_(weight[i * d : (i + 1) * d])
            if lin.bias is not None and bias is not None:
                lin.bias.copy_(bias[i * d : (i + 1) * d])
        self.lin_out.weight.copy_(attention.out_proj.weight)
        if self.lin_out.bias is not None and attention.out_proj.bias is not None:
            self.lin_out.bias.copy_(attention.out_proj.bias)


class MultiGroupAttention(MultiHeadAttention):
    r"""Attention over the union of several token groups with one value projection per group.

    The general cellular attention of Eq. (3) (Cellular Transformer, §4.2.2): the tokens of
    every group (rank) form one token set; queries and keys are shared by all groups,
    :math:`Q = X Q`, :math:`K = X K`, while the values of group ``g`` have their own
    :math:`V_g`; the neighbourhood is a block matrix over the concatenated groups. With
    ``output_projection=False`` the values of every group are split by heads, as the Q/K
    projections (:class:`~topomodelx_attention.nn.attention.heads.HeadwiseLinear`).

    Parameters
    ----------
    channels : int
        Width of every group (input and output).
    heads : int
        Number of heads (must divide ``channels``).
    groups : int
        Number of token groups (own value projections).
    kind : str, default = "sparse"
        Registered attention kind.
    kernel_options : mapping, optional
        Options of the kernel.
    bias : bool, default = False
        Bias in the Q/K/V/O projections.
    output_projection : bool, default = True
        As in :class:`MultiHeadAttention`.
    """

    def __init__(
        self,
        channels: int,
        heads: int,
        groups: int,
        *,
        kind: str = "sparse",
        kernel_options: Mapping[str, Any] | None = None,
        bias: bool = False,
        output_projection: bool = True,
    ) -> None:
        super().__init__(
            channels,
            channels,
            heads,
            kind=kind,
            kernel_options=kernel_options,
            bias=bias,
            value_projection=False,
            output_projection=output_projection,
        )
        self.values = nn.ModuleList(
            self._projection(channels, self.value_channels)
            for _ in range(positive_int(groups, "groups"))
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Reset the shared Q/K/O, the kernel and every group's value projection."""
        super().reset_parameters()
        for lin in getattr(self, "values", ()):  # absent while MultiHeadAttention.__init__ runs
            _reset_projection(lin)

    def forward(
        self,
        x: Sequence[Tensor],
        neighborhood: Neighborhood | None = None,
        layout: LayoutArg | None = None,
    ) -> list[Tensor]:
        """Attend over the concatenated groups.

        Parameters
        ----------
        x : sequence of torch.Tensor
            ``x[g]`` of shape ``(n_g, channels)`` for every group (0 rows allowed).
        neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
            Block neighbourhood on the concatenated tokens, group-major
            ``(Σ n_g, Σ n_g)`` (mask of the sparse kind, bias of the dense kind).
        layout : PaddedLayout, optional
            Padding of the concatenated tokens per complex (dense / linear kinds).

        Returns
        -------
        list of torch.Tensor
            Output of every group, ``(n_g, channels)``.
        """
        if len(x) != len(self.values):
            raise ValueError(f"expected {len(self.values)} token groups, got {len(x)}")
        tokens = torch.cat(list(x), dim=0)  # group-major: the order of the block neighbourhood
        value = torch.cat([self._project(lin, xg) for lin, xg in zip(self.values, x)])
        out = self.attend(
            self.project_query(tokens), self.project_key(tokens), value, neighborhood, layout=layout
        )
        return list(torch.split(self.project_output(out), [xg.shape[0] for xg in x], dim=0))


def _reset_projection(lin: nn.Module) -> None:
    """Xavier-uniform weights, zero bias (:class:`HeadwiseLinear` resets itself per head)."""
    if isinstance(lin, HeadwiseLinear):
        lin.reset_parameters()
        return
    nn.init.xavier_uniform_(lin.weight)
    if lin.bias is not None:
        nn.init.zeros_(lin.bias)


def _resolve_kernel(
    kind: str | None,
    kernel_options: Mapping[str, Any] | None,
    kernel: AttentionKernel | None,
    heads: int,
    head_channels: int,
) -> AttentionKernel:
    """Return the kernel of :class:`MultiHeadAttention`: ``kernel`` checked, or built from ``kind``."""
    if kernel is None:
        return build_kernel(
            "sparse" if kind is None else kind, heads, head_channels, kernel_options
        )
    if not isinstance(kernel, AttentionKernel):
        raise TypeError(f"kernel must be an AttentionKernel, got {type(kernel).__name__}")
    if kind is not None and kernel.kind != kind:
        raise ValueError(f"kind={kind!r} but the kernel is of kind {kernel.kind!r}")
    if kernel_options:
        raise ValueError(
            "kernel_options configure a kernel built from kind=; a prebuilt kernel takes its "
            f"options itself, got kernel_options={dict(kernel_options)}"
        )
    if (kernel.heads, kernel.head_channels) != (heads, head_channels):
        raise ValueError(
            f"the kernel has {kernel.heads} heads of {kernel.head_channels} channels, the module "
            f"{heads} heads of {head_channels} (head_channels)"
        )
    return kernel
