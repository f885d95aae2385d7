"""Cellular Transformer (Ballester et al.): pairwise and general cellular attention.

* :mod:`~.tensor_diagram`: the arrows of a tensor diagram (§4.3) and their neighbourhoods;
* :mod:`~.cell_encoder`: the embedding of every rank's features and PE (Eq. 4);
* :mod:`~.cellular_transformer_layer`: one pre-norm layer (pairwise / general attention);
* :mod:`~.arrow_blocks`: the kernel of every arrow (by capability) and its attention block;
* :mod:`~.structure`: the structure of a batch as the layers read it (:class:`CellStructure`);
* :mod:`~.per_rank`: the layer's per-rank LayerNorms / FFNs, stacked over the ranks;
* :mod:`~.cellular_transformer`: the model: embedding, the layer stack, the readout.
"""

from topomodelx_attention.nn._export import refuse_torchscript, register_prepared_inputs
from topomodelx_attention.nn.cell.cell_encoder import CellEncoder, vertex_membership
from topomodelx_attention.nn.cell.cellular_transformer import CellularInputs, CellularTransformer
from topomodelx_attention.nn.cell.cellular_transformer_layer import CellularTransformerLayer
from topomodelx_attention.nn.cell.structure import CellStructure
from topomodelx_attention.nn.cell.structure_transform import PreparedStructure, PrepareStructure
from topomodelx_attention.nn.cell.tensor_diagram import (
    Arrow,
    ArrowNeighborhoods,
    default_tensor_diagram,
    parse_tensor_diagram,
)

# torch.export.export(model, (model.prepare(batch),)) (nn/_export.py)
register_prepared_inputs(CellStructure, CellularInputs)
refuse_torchscript(CellEncoder, CellularTransformer, CellularTransformerLayer)

__all__ = [
    "Arrow",
    "ArrowNeighborhoods",
    "CellEncoder",
    "CellStructure",
    "CellularInputs",
    "CellularTransformer",
    "CellularTransformerLayer",
    "PrepareStructure",
    "PreparedStructure",
    "default_tensor_diagram",
    "parse_tensor_diagram",
    "vertex_membership",
]
