r"""``AttentionConv``: attention with the calling convention of TopoModelX's ``Conv``.

TopoModelX's :class:`topomodelx.base.conv.Conv` is called ``conv(x_source, neighborhood,
x_target=None)`` with a ``(n_target, n_source)`` neighbourhood and computes
``update(N · x_source W)``. :class:`AttentionConv` takes the same arguments in the same order
and replaces the fixed weights ``N_{ts}`` by attention weights over the neighbours
(:class:`~topomodelx_attention.nn.attention.MultiHeadAttention`, Eq. 2 of the Cellular
Transformer paper), so it can stand wherever a ``Conv`` is, e.g. inside a TopoModelX layer::

    from topomodelx.nn.simplicial.hsn_layer import HSNLayer
    from topomodelx_attention.nn.topomodelx import AttentionConv

    layer = HSNLayer(channels=16)
    layer.conv_level1_0_to_0 = AttentionConv(16, 16, heads=2, update_func="sigmoid")
    out = layer(x_0, incidence_1, adjacency_0)        # HSN's own forward, unchanged

(the swap of every ``Conv`` of TopoModelX's ``HSN`` is tested:
``tests/nn/topomodelx/test_adapters.py``). :class:`MultiHeadAttention` itself keeps the
package's order ``(x_target, x_source, neighborhood)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention import (
    KERNELS,
    MultiHeadAttention,
    kernel_class,
    reads_neighborhood,
)
from topomodelx_attention.nn.topomodelx._neighborhoods import (
    apply_update,
    check_features,
    check_update_func,
    neighborhood_pattern,
)

__all__ = ["AttentionConv"]


class AttentionConv(nn.Module):
    r"""Attention message passing along one neighbourhood, called like TopoModelX's ``Conv``.

    .. math::
        h_t = \mathrm{update}\Big(\big[\mathrm{Concat}_h\, \mathrm{softmax}_{s \in N(t)}
        \big(\mathrm{scale}\; q_{t,h}^\top k_{s,h}\big)\, v_{s,h}\big]\, O\Big),\quad
        q = x_t Q,\ k = x_s K,\ v = x_s V

    * ``kind="sparse"`` (default): each target attends to its neighbours ``N(t)`` (the
      non-zero entries of its row of ``neighborhood``; values and signs are not used); a
      target without neighbours gets zeros before ``update``.
    * ``kind="dense"``: each target attends to every source of its complex, with the
      neighbourhood pattern as an additive bias :math:`\theta N` (one learnable
      :math:`\theta` per head).

    Queries come from ``x_target``. When ``x_target`` is omitted (as TopoModelX layers do),
    a square neighbourhood uses ``x_source`` (as ``Conv``); a rectangular one (e.g. nodes →
    edges through ``B_1ᵀ``) uses the mean of each target's source features as its query
    (zeros for a target without sources).

    Parameters
    ----------
    in_channels : int
        Channels of ``x_source`` (as ``Conv``'s ``in_channels``).
    out_channels : int
        Output channels; ``heads`` must divide it.
    heads : int, default=1
        Attention heads.
    target_channels : int, optional
        Channels of ``x_target`` (default ``in_channels``, as ``Conv`` assumes).
    kind : str, default="sparse"
        Attention kernel that reads the neighbourhood (a mask or a θ·N bias): ``"sparse"``,
        ``"dense"`` (see above), or another registered kernel that does.
    kernel_options : mapping, optional
        Options of the kernel, e.g. ``{"scale": 1.0}`` (default scale ``1 / sqrt(head
        channels)``) or ``{"bias_scale": "shared"}`` (dense).
    update_func : {"relu", "sigmoid", "tanh", None}, default=None
        Activation on the output, as ``Conv``'s ``update_func``.
    attention_dropout : float, default=0.0
        Dropout on the attention weights (training only).
    bias : bool, default=False
        Bias in the query/key/value/output projections.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        heads: int = 1,
        target_channels: int | None = None,
        kind: str = "sparse",
        kernel_options: Mapping[str, Any] | None = None,
        update_func: str | None = None,
        attention_dropout: float = 0.0,
        bias: bool = False,
    ) -> None:
        super().__init__()
        kinds = tuple(k for k in KERNELS if reads_neighborhood(k))
        if kind not in kinds:
            raise ValueError(
                f"AttentionConv kind must be one of {kinds}, got {kind!r} (a kernel that reads "
                "the neighbourhood; the linear kind ignores it: use "
                "MultiHeadAttention(kind='linear') directly)"
            )
        self.update_func = check_update_func(update_func)
        target_channels = in_channels if target_channels is None else target_channels
        self.attention = MultiHeadAttention(
            target_channels,
            out_channels,
            heads,
            source_channels=in_channels,
            kind=kind,
            kernel_options={"attention_dropout": attention_dropout, **(kernel_options or {})},
            bias=bias,
        )
        self.in_channels = self.attention.source_channels
        self.target_channels = self.attention.in_channels
        self.out_channels = self.attention.out_channels
        self.heads = self.attention.heads
        self.kind = kind

    def reset_parameters(self) -> None:
        """Reset the projections (TopoModelX layers call this on their ``Conv`` modules)."""
        self.attention.reset_parameters()

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return (
            f"{self.in_channels}, {self.out_channels}, heads={self.heads}, kind={self.kind!r}, "
            f"target_channels={self.target_channels}, update_func={self.update_func!r}"
        )

    def forward(
        self,
        x_source: Tensor,
        neighborhood: Tensor,
        x_target: Tensor | None = None,
        *,
        batch_source: Tensor | None = None,
        batch_target: Tensor | None = None,
        num_complexes: int | None = None,
    ) -> Tensor:
        """Attend from the source cells to the target cells along ``neighborhood``.

        Parameters
        ----------
        x_source : torch.Tensor, shape = (n_source, in_channels)
            Features of the source cells.
        neighborhood : torch.Tensor, shape = (n_target, n_source)
            Neighbourhood matrix, sparse (any layout, transposed views included) or dense;
            rows are targets, columns sources, as in TopoModelX.
        x_target : torch.Tensor, shape = (n_target, target_channels), optional
            Features of the target cells (the queries); see the class notes when omitted.
        batch_source, batch_target : torch.Tensor, optional
            Sorted complex index of every source / target cell: ``kind="dense"`` on a batch
            of complexes (``None``: one complex). ``batch_target`` defaults to
            ``batch_source`` when the neighbourhood is square and ``x_target`` is omitted.
        num_complexes : int, optional
            Number of complexes of the batch (inferred otherwise).

        Returns
        -------
        torch.Tensor, shape = (n_target, out_channels)
            Updated features of the target cells.
        """
        check_features(x_source, self.in_channels, "x_source")
        if not isinstance(neighborhood, Tensor) or neighborhood.dim() != 2:
            shape = tuple(neighborhood.shape) if isinstance(neighborhood, Tensor) else type(neighborhood).__name__
            raise ValueError(f"neighborhood must be an (n_target, n_source) matrix, got {shape}")
        n_target, n_source = int(neighborhood.shape[0]), int(x_source.shape[0])
        if x_target is not None:
            check_features(x_target, self.target_channels, "x_target")
            n_target = int(x_target.shape[0])
        pattern = neighborhood_pattern(
            neighborhood,
            "neighborhood",
            (n_target, n_source),
            dtype=x_source.dtype,
            device=x_source.device,
        )
        if x_target is None:
            if n_target == n_source:
                x_target = x_source
                if batch_target is None:
                    batch_target = batch_source
            else:
                if self.target_channels != self.in_channels:
                    raise ValueError(
                        f"x_target is required: target_channels={self.target_channels} differs "
                        f"from in_channels={self.in_channels}, so the targets' queries cannot be "
                        "taken from the source features"
                    )
                degree = torch.zeros(n_target, dtype=x_source.dtype, device=x_source.device)
                degree.index_add_(0, pattern.indices()[0], pattern.values())
                x_target = torch.sparse.mm(pattern, x_source) / degree.clamp_min(1.0)[:, None]
        if kernel_class(self.kind).needs_layout and (batch_source is None) != (
            batch_target is None
        ):
            raise ValueError(
                f"kind={self.kind!r} on a batch needs both batch_source and batch_target (or "
                "neither, for one complex)"
            )
        out = self.attention(
            x_target, x_source, pattern, batch_target, batch_source, num_complexes
        )
        return apply_update(out, self.update_func)
