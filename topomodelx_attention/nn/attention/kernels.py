r"""Attention kernels: the per-kind part of :class:`~.multihead.MultiHeadAttention`.

A kernel maps projected, head-split queries / keys / values to the attention output
(:math:`\mathrm{softmax}(\mathrm{scale}\; Q K^\top \star \phi(N)) V`, Eq. 2 of the Cellular
Transformer paper) and owns exactly the options and parameters of its kind:

* :class:`SparseKernel` (``kind="sparse"``): mask ``N``, attention dropout;
* :class:`DenseKernel` (``kind="dense"``): all pairs per complex, attention dropout, and the
  optional :math:`\theta N` bias with its :math:`\theta` (created only when the bias is on);
* :class:`LinearKernel` (``kind="linear"``): Performer / FAVOR+ random features.

Every kernel takes ``scale`` (``None``: :math:`1/\sqrt{d}`; ``1.0``: the paper's logits).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention.dense import dense_attention, dense_attention_weights
from topomodelx_attention.nn.attention.layout import LayoutArg, Neighborhood
from topomodelx_attention.nn.attention.linear import (
    default_num_random_features,
    linear_attention,
    orthogonal_random_matrix,
)
from topomodelx_attention.nn.attention.sparse import sparse_attention

__all__ = ["BIAS_SCALES", "AttentionKernel", "DenseKernel", "LinearKernel", "SparseKernel"]

#: Values of ``bias_scale``: one :math:`\theta` per head, or one shared scalar (the paper's).
BIAS_SCALES: tuple[str, ...] = ("per_head", "shared")


def positive_int(value: object, name: str) -> int:
    """Return ``value`` if it is a positive int; raise ``TypeError`` / ``ValueError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _check_scale(scale: float | None) -> float | None:
    if scale is not None and (isinstance(scale, bool) or not scale > 0):
        raise ValueError(f"scale must be positive (or None for 1/sqrt(d)), got {scale}")
    return None if scale is None else float(scale)


def _check_dropout(dropout: float) -> float:
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    return float(dropout)


class AttentionKernel(nn.Module):
    r"""Base class: attention of one kind on projected, head-split tensors.

    Parameters
    ----------
    scale : float, optional
        Logit scale; ``1 / sqrt(head_dim)`` when ``None``; ``1.0`` gives the paper's Eq. (2)
        logits :math:`X_t Q (X_s K)^\top` without scaling.
    """

    #: The attention kind (``"sparse"``, ``"dense"`` or ``"linear"``).
    kind: str = ""

    def __init__(self, *, scale: float | None = None) -> None:
        super().__init__()
        self.scale = _check_scale(scale)

    def reset_parameters(self) -> None:
        """Reset the kernel's own parameters (none by default)."""

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
    ) -> Tensor:
        r"""Attend.

        Parameters
        ----------
        query : torch.Tensor, shape = (n_target, heads, d)
            Queries.
        key : torch.Tensor, shape = (n_source, heads, d)
            Keys.
        value : torch.Tensor, shape = (n_source, heads, d_v)
            Values.
        neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex, optional
            ``(n_target, n_source)`` neighbourhood (mask of the sparse kind, θ·N bias of the
            dense kind, forbidden for the linear kind).
        batch_target, batch_source : torch.Tensor, optional
            Sorted complex index of every target / source token.
        num_complexes : int, optional
            Number of complexes.
        layout : PaddedLayout or tuple of PaddedLayout, optional
            Precomputed padding (dense and linear kinds).

        Returns
        -------
        torch.Tensor, shape = (n_target, heads, d_v)
            Attention output per head.
        """
        raise NotImplementedError


class SparseKernel(AttentionKernel):
    r"""Softmax over the entries of the neighbourhood ``N`` only (mask; Eq. 2, sparse kind).

    Parameters
    ----------
    scale : float, optional
        Logit scale (``None``: :math:`1/\sqrt{d}`).
    dropout : float, default = 0.0
        Dropout on the attention weights (training only).
    """

    kind = "sparse"

    def __init__(self, *, scale: float | None = None, dropout: float = 0.0) -> None:
        super().__init__(scale=scale)
        self.dropout = _check_dropout(dropout)

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
    ) -> Tensor:
        """Sparse attention; ``N`` carries the block structure (batch vectors, layout unused)."""
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

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return f"scale={self.scale}, dropout={self.dropout}"


class DenseKernel(AttentionKernel):
    r"""All pairs inside every complex, optional :math:`\theta N` bias (Eq. 2, dense kind).

    Parameters
    ----------
    heads : int, default = 1
        Number of heads (size of a per-head :math:`\theta`).
    scale : float, optional
        Logit scale (``None``: :math:`1/\sqrt{d}`).
    dropout : float, default = 0.0
        Dropout on the attention weights (training only).
    bias : bool, default = True
        Whether the kernel takes a neighbourhood bias :math:`\theta N`. ``False``: plain
        softmax attention (e.g. TokenGT), no :math:`\theta` is created and passing a
        neighbourhood raises ``ValueError``.
    bias_scale : {"per_head", "shared"}, default = "per_head"
        One :math:`\theta` per head (shape ``(heads,)``) or one scalar shared by the heads
        (shape ``(1,)``, the paper's :math:`\phi(N) = \theta N`).
    learn_bias_scale : bool, default = True
        Whether :math:`\theta` is a trainable parameter (else a fixed buffer).
    bias_scale_init : float, default = 1.0
        Initial value of :math:`\theta`.
    memory_budget : int, optional
        Largest ``(B, heads, Lt, Ls)`` tensor allowed, in bytes (default
        :data:`~topomodelx_attention.nn.attention.dense.DENSE_MEMORY_BUDGET`, read at call
        time); a larger batch raises ``ValueError`` before allocating.
    """

    kind = "dense"

    def __init__(
        self,
        heads: int = 1,
        *,
        scale: float | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        bias_scale: str = "per_head",
        learn_bias_scale: bool = True,
        bias_scale_init: float = 1.0,
        memory_budget: int | None = None,
    ) -> None:
        super().__init__(scale=scale)
        heads = positive_int(heads, "heads")
        if memory_budget is not None:
            memory_budget = positive_int(memory_budget, "memory_budget")
        self.memory_budget = memory_budget
        if bias_scale not in BIAS_SCALES:
            raise ValueError(f"bias_scale must be one of {BIAS_SCALES}, got {bias_scale!r}")
        self.dropout = _check_dropout(dropout)
        self.bias = bool(bias)
        self.bias_scale_mode = bias_scale
        self.bias_scale_init = float(bias_scale_init)
        if not self.bias:
            self.bias_scale = None
        else:
            theta = torch.empty(heads if bias_scale == "per_head" else 1)
            if learn_bias_scale:
                self.bias_scale = nn.Parameter(theta)
            else:
                self.register_buffer("bias_scale", theta)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r""":math:`\theta` = ``bias_scale_init``."""
        if self.bias_scale is not None:
            with torch.no_grad():
                self.bias_scale.fill_(self.bias_scale_init)

    def _options(
        self,
        neighborhood: Neighborhood | None,
        num_complexes: int | None,
        layout: LayoutArg | None,
    ) -> dict[str, object]:
        """Keyword options of ``dense_attention`` / ``dense_attention_weights``: θ·N bias, scale."""
        theta = None
        if neighborhood is not None:
            if self.bias_scale is None:
                raise ValueError(
                    "this dense kernel has no neighbourhood bias (bias=False / "
                    "neighborhood_bias=False): pass neighborhood=None"
                )
            theta = self.bias_scale
        return {
            "bias": neighborhood,
            "bias_scale": theta,
            "scale": self.scale,
            "num_complexes": num_complexes,
            "layout": layout,
            "memory_budget": self.memory_budget,
        }

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
    ) -> Tensor:
        """Dense attention with the θ·N bias when ``neighborhood`` is given."""
        return dense_attention(
            query,
            key,
            value,
            batch_target,
            batch_source,
            dropout_p=self.dropout,
            training=self.training,
            **self._options(neighborhood, num_complexes, layout),
        )

    def weights(
        self,
        query: Tensor,
        key: Tensor,
        neighborhood: Neighborhood | None = None,
        batch_target: Tensor | None = None,
        batch_source: Tensor | None = None,
        num_complexes: int | None = None,
        layout: LayoutArg | None = None,
    ) -> Tensor:
        """Attention probabilities, ``(B, heads, Lt, Ls)`` (see ``dense_attention_weights``)."""
        return dense_attention_weights(
            query, key, batch_target, batch_source, **self._options(neighborhood, num_complexes, layout)
        )

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        bias = f"bias_scale={self.bias_scale_mode!r}" if self.bias else "bias=False"
        return f"scale={self.scale}, dropout={self.dropout}, {bias}"


class LinearKernel(AttentionKernel):
    r"""Performer / FAVOR+ approximation of the dense kind without bias (linear kind).

    Parameters
    ----------
    head_channels : int
        Query/key dimension per head ``d`` (columns of the random projection).
    scale : float, optional
        Logit scale of the approximated softmax (``None``: :math:`1/\sqrt{d}`).
    num_random_features : int, optional
        Random features ``m``; :func:`default_num_random_features` by default
        (:math:`\max(\lceil d \ln d\rceil, 32)`).
    redraw_features_in_training : bool, default = False
        Draw a fresh projection at every training forward (not stored; the ``projection``
        buffer, used in eval mode, only changes via :meth:`redraw_features`).
    """

    kind = "linear"

    def __init__(
        self,
        head_channels: int,
        *,
        scale: float | None = None,
        num_random_features: int | None = None,
        redraw_features_in_training: bool = False,
    ) -> None:
        super().__init__(scale=scale)
        head_channels = positive_int(head_channels, "head_channels")
        if num_random_features is None:
            num_random_features = default_num_random_features(head_channels)
        self.num_random_features = positive_int(num_random_features, "num_random_features")
        self.redraw_features_in_training = bool(redraw_features_in_training)
        self.register_buffer(
            "projection", orthogonal_random_matrix(self.num_random_features, head_channels)
        )

    @torch.no_grad()
    def redraw_features(self, generator: torch.Generator | None = None) -> None:
        """Draw a new FAVOR+ projection into the ``projection`` buffer.

        Parameters
        ----------
        generator : torch.Generator, optional
            CPU generator for reproducibility.
        """
        new = orthogonal_random_matrix(
            self.projection.shape[0],
            self.projection.shape[1],
            generator=generator,
            dtype=self.projection.dtype,
            device=self.projection.device,
        )
        self.projection.copy_(new)

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
    ) -> Tensor:
        """FAVOR+ attention per complex (no neighbourhood)."""
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
            num_complexes=num_complexes,
            layout=layout,
        )

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return (
            f"scale={self.scale}, num_random_features={self.num_random_features}, "
            f"redraw_features_in_training={self.redraw_features_in_training}"
        )
