"""TopoModelX drop-ins: our attention with TopoModelX's calling conventions.

* :class:`AttentionConv` — ``forward(x_source, neighborhood, x_target=None)`` like
  ``topomodelx.base.conv.Conv`` (attention over the neighbours instead of fixed weights).
* :class:`CellAttentionLayer` — ``forward(x, down_laplacian_1, up_laplacian_1)`` like
  ``topomodelx.nn.cell.can_layer.CANLayer`` (a Cellular Transformer layer through the lower
  and upper neighbourhoods); :meth:`CellAttentionLayer.from_can_layer` replaces a
  ``CANLayer`` of a TopoModelX ``CAN`` with the same widths.

Neither imports TopoModelX. To feed TopoModelX layers from a ``ComplexData`` see
:func:`topomodelx_attention.data.topomodelx.topomodelx_inputs`.
"""

from topomodelx_attention.nn.topomodelx.can import CellAttentionLayer
from topomodelx_attention.nn.topomodelx.conv import AttentionConv

__all__ = ["AttentionConv", "CellAttentionLayer"]
