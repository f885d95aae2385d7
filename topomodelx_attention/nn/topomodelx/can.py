r"""``CellAttentionLayer``: a Cellular Transformer layer called like TopoModelX's ``CANLayer``.

TopoModelX's :class:`topomodelx.nn.cell.can_layer.CANLayer` (Cell Attention Network) is called
``layer(x, down_laplacian_1, up_laplacian_1)`` on the edges (1-cells) of a cell complex and
maps ``in_channels`` to ``out_channels``. :class:`CellAttentionLayer` has the same ``forward``
and the same widths, and computes a pre-norm Cellular Transformer layer
(:class:`~topomodelx_attention.nn.cell.CellularTransformerLayer`) on those cells: one attention
block through the lower neighbourhood (the pattern of ``down_laplacian_1``) and one through the
upper neighbourhood (``up_laplacian_1``), summed into the residual, then the FFN. It takes care
of what a direct swap would need: the width change (a linear map ``in_channels →
out_channels`` before the layer), the list of ranks the CT layer expects and the mapping of
CAN's argument names to neighbourhood keys. Replacing the layers of TopoModelX's ``CAN``::

    from topomodelx.nn.cell.can import CAN
    from topomodelx_attention.nn.topomodelx import CellAttentionLayer

    model = CAN(in_channels_0=3, in_channels_1=4, out_channels=16, heads=2, n_layers=2,
                att_lift=False)
    for i, layer in enumerate(model.layers):
        model.layers[i] = CellAttentionLayer.from_can_layer(layer)
    out = model(x_0, x_1, adjacency_0, down_laplacian_1, up_laplacian_1)   # CAN's forward

(tested: ``tests/nn/topomodelx/test_adapters.py``; the tutorial
``tutorials/04_topomodelx_hybrid.ipynb`` trains it). ``topomodelx_inputs(data, "can")``
(:mod:`topomodelx_attention.data.topomodelx`) builds the three arguments from a
``ComplexData``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from topomodelx_attention.nn.attention import COMPOSITE_KINDS, KERNELS
from topomodelx_attention.nn.cell import CellularTransformerLayer
from topomodelx_attention.nn.topomodelx._neighborhoods import check_features, neighborhood_pattern

__all__ = ["CellAttentionLayer"]

# the CT layer works on one rank here; its two arrows read these keys
_LOWER, _UPPER = "coadjacency_0", "adjacency_0"


class CellAttentionLayer(nn.Module):
    r"""Cellular Transformer layer with the calling convention of TopoModelX's ``CANLayer``.

    .. math::
        h = W x,\qquad
        h' = h + \mathcal{A}_{\downarrow}(\mathrm{LN}(h)) + \mathcal{A}_{\uparrow}(\mathrm{LN}(h)),
        \qquad \mathrm{out} = h' + \mathrm{FFN}(\mathrm{LN}(h'))

    where :math:`\mathcal{A}_{\downarrow}` attends over the lower neighbours of a cell (the
    non-zero pattern of ``down_laplacian_1``) and :math:`\mathcal{A}_{\uparrow}` over its
    upper neighbours (``up_laplacian_1``), each with its own Q/K/V (Eq. 2 of the Cellular
    Transformer paper); :math:`W` is the identity when ``in_channels == out_channels``.

    Only the pattern of the matrices is read (their values and signs are not): with
    ``self_loops=True`` (default, like ``CANLayer(add_self_loops=True)``) every cell also
    attends to itself in both blocks; with ``False`` the diagonal is removed, so the blocks
    are exactly the lower and upper adjacency. A signed Laplacian can have an off-diagonal
    zero where two terms cancel (two edges of two 2-cells with opposite relative
    orientations); pass the unsigned ``coadjacency_1`` / ``adjacency_1`` of a ``ComplexData``
    in their place to avoid it.

    Parameters
    ----------
    in_channels : int
        Channels of the input ``x`` (as ``CANLayer``).
    out_channels : int
        Channels of the output; ``heads`` must divide it.
    heads : int, default=1
        Attention heads.
    kind : str, default="sparse"
        Attention kernel by name: ``"sparse"``: attention over the neighbours only.
        ``"dense"``: over all cells of the complex with the neighbourhood pattern as the bias
        ``θ·N``. ``"linear"``: Performer attention over all cells (neighbourhoods unused).
    kernel_options : mapping, optional
        Options of the kernel (see
        :class:`~topomodelx_attention.nn.cell.CellularTransformerLayer`).
    dropout : float, default=0.0
        Dropout on the output of each attention block and the FFN.
    attention_dropout : float, default=0.0
        Dropout on the attention weights (``CANLayer``'s ``dropout``).
    self_loops : bool, default=True
        Whether a cell attends to itself (see above).
    ffn_channels : int, optional
        Inner width of the FFN (default ``out_channels``).
    bias : bool, default=False
        Bias in the attention projections.
    output_projection : bool, default=True
        Output projection after the heads (``False``: split-input heads, concatenated).

    The tensor diagram is fixed (one rank, the lower and upper blocks of ``CANLayer``); other
    diagrams are :class:`~topomodelx_attention.nn.cell.CellularTransformerLayer`'s.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        heads: int = 1,
        kind: str = "sparse",
        kernel_options: Mapping[str, Any] | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        self_loops: bool = True,
        ffn_channels: int | None = None,
        bias: bool = False,
        output_projection: bool = True,
    ) -> None:
        super().__init__()
        if kind in COMPOSITE_KINDS:
            raise ValueError(
                f"kind={kind!r} is a composite kind (one kernel within a rank, another across "
                f"ranks): it needs several ranks; CellAttentionLayer takes one kernel {tuple(KERNELS)}"
            )
        in_channels, out_channels = int(in_channels), int(out_channels)
        if in_channels < 1 or out_channels < 1:
            raise ValueError(f"in_channels and out_channels must be positive, got {in_channels}, {out_channels}")
        if not isinstance(self_loops, bool):
            raise TypeError(f"self_loops must be a bool, got {self_loops!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.self_loops = self_loops
        self.lin_in = nn.Linear(in_channels, out_channels) if in_channels != out_channels else None
        self.layer = CellularTransformerLayer(
            out_channels,
            heads=heads,
            max_rank=0,
            kind=kind,
            kernel_options=kernel_options,
            tensor_diagram=[f"0->0:{_LOWER}", f"0->0:{_UPPER}"],
            ffn_channels=ffn_channels,
            dropout=dropout,
            attention_dropout=attention_dropout,
            bias=bias,
            output_projection=output_projection,
        )
        self.heads = self.layer.heads
        self.kind = kind

    @classmethod
    def from_can_layer(cls, layer: nn.Module, **options: Any) -> CellAttentionLayer:
        """Build the layer that replaces a TopoModelX ``CANLayer`` (same widths and heads).

        Reads ``in_channels``, the output width (``out_channels``, or ``out_channels //
        heads`` for ``concat=False``), ``heads``, ``add_self_loops`` and the attention
        ``dropout`` from the ``CANLayer``; ``options`` override them or add others. When the
        heads do not divide the output width (possible with ``concat=False``), pass ``heads=``.

        Parameters
        ----------
        layer : torch.nn.Module
            A ``topomodelx.nn.cell.can_layer.CANLayer``.
        **options
            Constructor options of :class:`CellAttentionLayer` (e.g. ``kind="dense"``).

        Returns
        -------
        CellAttentionLayer
            A new layer (its own parameters; nothing is copied from ``layer``).
        """
        attention = getattr(layer, "lower_att", None)
        needed = ("in_channels", "out_channels", "heads", "concat")
        if attention is None or not all(hasattr(attention, name) for name in needed):
            raise TypeError(
                f"from_can_layer expects a TopoModelX CANLayer (with lower_att.{'/'.join(needed)}), "
                f"got {type(layer).__name__}"
            )
        heads = int(attention.heads)
        out_channels = int(attention.out_channels)
        if not attention.concat:
            out_channels //= heads
        if "heads" not in options and out_channels % heads:
            raise ValueError(
                f"the CANLayer's heads={heads} do not divide its output width {out_channels} "
                "(concat=False averages the heads); pass heads= a divisor of it to "
                "from_can_layer"
            )
        settings: dict[str, Any] = {
            "heads": heads,
            "self_loops": bool(getattr(attention, "add_self_loops", True)),
            "attention_dropout": float(getattr(attention, "dropout", 0.0)),
        }
        settings.update(options)
        return cls(int(attention.in_channels), out_channels, **settings)

    def reset_parameters(self) -> None:
        """Reset every parameter (as ``CANLayer.reset_parameters``)."""
        _reset(self)

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return (
            f"{self.in_channels}, {self.out_channels}, heads={self.heads}, kind={self.kind!r}, "
            f"self_loops={self.self_loops}"
        )

    def forward(
        self,
        x: Tensor,
        down_laplacian_1: Tensor,
        up_laplacian_1: Tensor,
        batch: Tensor | None = None,
        num_complexes: int | None = None,
    ) -> Tensor:
        """Update the features of the cells (``CANLayer.forward``'s arguments).

        Parameters
        ----------
        x : torch.Tensor, shape = (n_cells, in_channels)
            Features of the cells (the edges for CAN).
        down_laplacian_1 : torch.Tensor, shape = (n_cells, n_cells)
            Lower neighbourhood (any sparse layout or dense; its pattern is used).
        up_laplacian_1 : torch.Tensor, shape = (n_cells, n_cells)
            Upper neighbourhood (its pattern is used).
        batch : torch.Tensor, shape = (n_cells,), optional
            Sorted complex index of every cell: needed by ``kind="dense"`` / ``"linear"`` on
            a batch of complexes (``None``: one complex; the sparse kind never needs it, the
            block-diagonal neighbourhoods already separate the complexes).
        num_complexes : int, optional
            Number of complexes of the batch (inferred otherwise).

        Returns
        -------
        torch.Tensor, shape = (n_cells, out_channels)
            Updated cell features.
        """
        check_features(x, self.in_channels, "x")
        n = int(x.shape[0])
        neighborhoods = {
            key: neighborhood_pattern(
                matrix, name, (n, n), dtype=x.dtype, device=x.device, self_loops=self.self_loops
            )
            for key, name, matrix in (
                (_LOWER, "down_laplacian_1", down_laplacian_1),
                (_UPPER, "up_laplacian_1", up_laplacian_1),
            )
        }
        h = self.lin_in(x) if self.lin_in is not None else x
        batches = None if batch is None else [batch]
        (out,) = self.layer([h], neighborhoods, batches, num_complexes)
        return out


def _reset(module: nn.Module) -> None:
    """Call ``reset_parameters`` of the outermost submodules that have one (their own init)."""
    for child in module.children():
        if hasattr(child, "reset_parameters"):
            child.reset_parameters()
        else:
            _reset(child)
