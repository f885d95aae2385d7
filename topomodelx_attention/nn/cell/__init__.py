"""Cellular Transformer (Ballester et al.): pairwise and general cellular attention."""

from topomodelx_attention.nn.cell.cellular_transformer import CellEncoder, CellularTransformer
from topomodelx_attention.nn.cell.cellular_transformer_layer import (
    Arrow,
    CellularTransformerLayer,
    default_tensor_diagram,
    parse_tensor_diagram,
)

__all__ = [
    "Arrow",
    "CellEncoder",
    "CellularTransformer",
    "CellularTransformerLayer",
    "default_tensor_diagram",
    "parse_tensor_diagram",
]
