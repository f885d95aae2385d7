r"""Projected multi-head attention module, the building block of every model family.

:class:`MultiHeadAttention` implements Eq. (2) of the Cellular Transformer paper (§4.2.1),
:math:`\mathcal{A}^\bullet(X_t, X_s) = \mathrm{softmax}(X_t Q (X_s K)^\top \star \phi(N))\, X_s V`,
followed by an output projection, for the three kinds ``sparse`` / ``dense`` / ``linear`` of
:mod:`topomodelx_attention.nn.attention.functional`. The projections are separate methods
(:meth:`~MultiHeadAttention.project_query`, ...) and the attention itself is
:meth:`~MultiHeadAttention.attend`, so that models can override or reuse them; e.g. the general
cellular attention (Eq. 3), with queries/keys shared over all ranks and one value projection per
rank, calls :meth:`~MultiHeadAttention.attend` on its own concatenated values.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention.functional import (
    Neighborhood,
    PaddedLayout,
    default_num_random_features,
    dense_attention,
    dense_attention_weights,
    linear_attention,
    merge_heads,
    orthogonal_random_matrix,
    sparse_attention,
    split_heads,
)

__all__ = ["ATTENTION_KINDS", "MultiHeadAttention"]

ATTENTION_KINDS: tuple[str, ...] = ("sparse", "dense", "linear")


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


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
    * ``kind="linear"``: Performer / FAVOR+ approximation of the dense kind (no bias; passing
      ``N`` raises ``ValueError``; attention dropout does not apply since no attention matrix is
      formed).

    Tokens of different complexes (given by the sorted batch vectors) never attend to each
    other; a target without sources outputs ``O``'s bias (zeros when ``bias=False``).

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
    kind : {"sparse", "dense", "linear"}, default = "sparse"
        Attention kind.
    bias : bool, default = False
        Bias in the Q/K/V/O projections (the paper uses none "for simplicity").
    dropout : float, default = 0.0
        Dropout on the attention weights (training only; ``sparse`` and ``dense``).
    learn_bias_scale : bool, default = True
        Whether :math:`\theta` is a trainable parameter (else a fixed buffer). Dense kind only.
    bias_scale_per_head : bool, default = True
        One :math:`\theta` per head (shape ``(heads,)``) or a single shared one (``(1,)``).
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
        Logit scale; ``1 / sqrt(head_channels)`` by default.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int | None = None,
        heads: int = 1,
        *,
        source_channels: int | None = None,
        head_channels: int | None = None,
        kind: str = "sparse",
        bias: bool = False,
        dropout: float = 0.0,
        learn_bias_scale: bool = True,
        bias_scale_per_head: bool = True,
        bias_scale_init: float = 1.0,
        num_random_features: int | None = None,
        redraw_features_in_training: bool = False,
        share_qk: bool = False,
        value_projection: bool = True,
        scale: float | None = None,
    ) -> None:
        super().__init__()
        in_channels = _positive_int(in_channels, "in_channels")
        out_channels = (
            in_channels if out_channels is None else _positive_int(out_channels, "out_channels")
        )
        heads = _positive_int(heads, "heads")
        source_channels = (
            in_channels
            if source_channels is None
            else _positive_int(source_channels, "source_channels")
        )
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; choose one of {ATTENTION_KINDS}")
        if out_channels % heads != 0:
            raise ValueError(
                f"heads={heads} must divide out_channels={out_channels} (values are split into "
                "heads)"
            )
        if head_channels is None:
            head_channels = out_channels // heads
        head_channels = _positive_int(head_channels, "head_channels")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
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
        if scale is not None and scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.source_channels = source_channels
        self.heads = heads
        self.head_channels = head_channels
        self.value_channels = out_channels // heads
        self.kind = kind
        self.dropout = float(dropout)
        self.share_qk = share_qk
        self.scale = scale
        self.redraw_features_in_training = redraw_features_in_training
        self.bias_scale_init = float(bias_scale_init)

        self.lin_query = nn.Linear(in_channels, heads * head_channels, bias=bias)
        self.lin_key = (
            None if share_qk else nn.Linear(source_channels, heads * head_channels, bias=bias)
        )
        self.lin_value = (
            nn.Linear(source_channels, out_channels, bias=bias) if value_projection else None
        )
        self.lin_out = nn.Linear(out_channels, out_channels, bias=bias)

        if kind == "dense":
            theta = torch.empty(heads if bias_scale_per_head else 1)
            if learn_bias_scale:
                self.bias_scale = nn.Parameter(theta)
            else:
                self.register_buffer("bias_scale", theta)
        else:
            self.bias_scale = None

        if kind == "linear":
            if num_random_features is None:
                num_random_features = default_num_random_features(head_channels)
            num_random_features = _positive_int(num_random_features, "num_random_features")
            self.num_random_features = num_random_features
            self.register_buffer(
                "projection", orthogonal_random_matrix(num_random_features, head_channels)
            )
        else:
            self.num_random_features = None
            self.projection = None
        self.reset_parameters()

    # ------------------------------------------------------------------------------------------
    def reset_parameters(self) -> None:
        r"""Reset: Xavier-uniform weights, zero biases, :math:`\theta` = ``bias_scale_init``."""
        for lin in (self.lin_query, self.lin_key, self.lin_value, self.lin_out):
            if lin is None:
                continue
            nn.init.xavier_uniform_(lin.weight)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
        if self.bias_scale is not None:
            with torch.no_grad():
                self.bias_scale.fill_(self.bias_scale_init)

    @torch.no_grad()
    def redraw_features(self, generator: torch.Generator | None = None) -> None:
        """Draw a new FAVOR+ projection into the ``projection`` buffer (linear kind only).

        Parameters
        ----------
        generator : torch.Generator, optional
            CPU generator for reproducibility.
        """
        if self.projection is None:
            raise ValueError(
                f"redraw_features is only defined for kind='linear', not {self.kind!r}"
            )
        new = orthogonal_random_matrix(
            self.projection.shape[0],
            self.projection.shape[1],
            generator=generator,
            dtype=self.projection.dtype,
            device=self.projection.device,
        )
        self.projection.copy_(new)

    # ------------------------------------------------------------------------------------------
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
        return split_heads(self.lin_query(x_target), self.heads)

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
        return split_heads(lin(x_source), self.heads)

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
        return split_heads(self.lin_value(x_source), self.heads)

    def project_output(self, out: Tensor) -> Tensor:
        """Merge the heads and apply the output projection :math:`O`.

        Parameters
        ----------
        out : torch.Tensor, shape = (n_target, heads, out_channels // heads)
            Attention output per head.

        Returns
        -------
        torch.Tensor, shape = (n_target, out_channels)
            Projected output.
        """
        return self.lin_out(merge_heads(out))

    def attend(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_graphs: int | None = None,
        layout: PaddedLayout | None = None,
    ) -> Tensor:
        r"""Attention of this module's kind on already projected, head-split tensors.

        Parameters
        ----------
        query : torch.Tensor, shape = (n_target, heads, head_channels)
            Queries.
        key : torch.Tensor, shape = (n_source, heads, head_channels)
            Keys.
        value : torch.Tensor, shape = (n_source, heads, d_v)
            Values (any ``d_v``).
        neighborhood : torch.Tensor or tuple of torch.Tensor, optional
            ``(n_target, n_source)`` neighbourhood: the mask of the sparse kind (required),
            the :math:`\theta N` bias of the dense kind (optional); must be ``None`` for the
            linear kind.
        batch_target : torch.Tensor, shape = (n_target,), optional
            Sorted complex index of every target.
        batch_source : torch.Tensor, shape = (n_source,), optional
            Sorted complex index of every source.
        num_graphs : int, optional
            Number of complexes.
        layout : PaddedLayout, optional
            Precomputed padding of a self-attention token set (dense and linear kinds; see
            :func:`~topomodelx_attention.nn.attention.functional.padded_layout`); replaces the
            batch vectors. Ignored by the sparse kind, whose block structure is ``N``.

        Returns
        -------
        torch.Tensor, shape = (n_target, heads, d_v)
            Attention output per head.
        """
        if self.kind == "sparse":
            if neighborhood is None:
                raise ValueError(
                    "kind='sparse' needs a neighborhood (n_target, n_source); use kind='dense' "
                    "for all-pairs attention"
                )
            return sparse_attention(
                query,
                key,
                value,
                neighborhood,
                scale=self.scale,
                dropout_p=self.dropout,
                training=self.training,
            )
        if self.kind == "dense":
            return dense_attention(
                query,
                key,
                value,
                batch_target,
                batch_source,
                bias=neighborhood,
                bias_scale=self.bias_scale if neighborhood is not None else None,
                scale=self.scale,
                dropout_p=self.dropout,
                training=self.training,
                num_graphs=num_graphs,
                layout=layout,
            )
        if neighborhood is not None:
            raise ValueError(
                "kind='linear' (FAVOR+) cannot use a neighbourhood bias θ·N: there is no attention "
                "matrix to add it to; pass neighborhood=None or use kind='dense'/'sparse'"
            )
        projection = self.projection
        if self.training and self.redraw_features_in_training:
            projection = orthogonal_random_matrix(
                projection.shape[0],
                projection.shape[1],
                dtype=projection.dtype,
                device=projection.device,
            )
        return linear_attention(
            query,
            key,
            value,
            batch_target,
            batch_source,
            projection=projection,
            scale=self.scale,
            num_graphs=num_graphs,
            layout=layout,
        )

    def attention_weights(
        self,
        x_target: Tensor,
        x_source: Tensor | None = None,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_graphs: int | None = None,
        layout: PaddedLayout | None = None,
    ) -> Tensor:
        r"""Softmax attention probabilities per complex and head, padded (dense kind only).

        The weights the ``dense`` kind uses in :meth:`forward` (without attention dropout),
        from :func:`~topomodelx_attention.nn.attention.functional.dense_attention_weights`:
        for inspecting or supervising attention maps. Memory is quadratic in the largest
        complex.

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
        num_graphs : int, optional
            Number of complexes.
        layout : PaddedLayout, optional
            Precomputed self-attention layout (replaces the batch vectors).

        Returns
        -------
        torch.Tensor, shape = (B, heads, Lt, Ls)
            ``[b, h, i, j]``: weight of source ``j`` of complex ``b`` for its target ``i``
            (positions inside the complex, or the layout's slots); zero on padding.
        """
        if self.kind != "dense":
            raise ValueError(
                f"attention_weights needs kind='dense' (explicit softmax), not {self.kind!r}"
            )
        self._check_features(x_target, self.in_channels, "x_target")
        if x_source is None:
            x_source = x_target
            if batch_source is None:
                batch_source = batch_target
        else:
            self._check_features(x_source, self.source_channels, "x_source")
        return dense_attention_weights(
            self.project_query(x_target),
            self.project_key(x_source),
            batch_target,
            batch_source,
            bias=neighborhood,
            bias_scale=self.bias_scale if neighborhood is not None else None,
            scale=self.scale,
            num_graphs=num_graphs,
            layout=layout,
        )

    # ------------------------------------------------------------------------------------------
    def _check_features(self, x: Tensor, channels: int, name: str) -> None:
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 2 or x.shape[1] != channels:
            raise ValueError(f"{name} must have shape (n, {channels}), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating point tensor, got {x.dtype}")

    def forward(
        self,
        x_target: Tensor,
        x_source: Tensor | None = None,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_graphs: int | None = None,
        layout: PaddedLayout | None = None,
    ) -> Tensor:
        """Attend from ``x_source`` to ``x_target``.

        Parameters
        ----------
        x_target : torch.Tensor, shape = (n_target, in_channels)
            Target (query) features.
        x_source : torch.Tensor, shape = (n_source, source_channels), optional
            Source (key/value) features; ``None`` means self-attention (``x_source = x_target``
            and ``batch_source = batch_target``).
        neighborhood : torch.Tensor or tuple of torch.Tensor, optional
            Sparse ``(n_target, n_source)`` neighbourhood (coalesced COO), ``(2, nnz)`` edge
            index or ``(index_target, index_source)`` pair. Required for ``sparse``, optional
            θ·N bias for ``dense``, forbidden for ``linear``.
        batch_target : torch.Tensor, shape = (n_target,), optional
            Sorted complex index of every target token (``None``: one complex).
        batch_source : torch.Tensor, shape = (n_source,), optional
            Sorted complex index of every source token.
        num_graphs : int, optional
            Number of complexes (inferred otherwise).
        layout : PaddedLayout, optional
            Precomputed padding of the token set for self-attention (dense and linear kinds):
            computed once per forward by
            :func:`~topomodelx_attention.nn.attention.functional.padded_layout` and shared by
            a stack of layers; replaces the batch vectors (tokens need not be sorted).

        Returns
        -------
        torch.Tensor, shape = (n_target, out_channels)
            Output features of the targets.
        """
        self._check_features(x_target, self.in_channels, "x_target")
        if x_source is None:
            if self.source_channels != self.in_channels:
                raise ValueError(
                    "x_source=None (self-attention) needs source_channels == in_channels, got "
                    f"{self.source_channels} != {self.in_channels}"
                )
            x_source = x_target
            if batch_source is None:
                batch_source = batch_target
        else:
            self._check_features(x_source, self.source_channels, "x_source")
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
            query, key, value, neighborhood, batch_target, batch_source, num_graphs, layout
        )
        return self.project_output(out)

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr(module)``."""
        extra = f", num_random_features={self.num_random_features}" if self.kind == "linear" else ""
        return (
            f"{self.in_channels}, {self.out_channels}, heads={self.heads}, kind={self.kind!r}, "
            f"source_channels={self.source_channels}, head_channels={self.head_channels}, "
            f"dropout={self.dropout}{extra}"
        )
