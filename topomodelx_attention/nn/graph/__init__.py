"""Graph transformers: TokenGT (Kim et al., "Pure Transformers are Powerful Graph Learners").

* :mod:`~.tokens`: the token set (:class:`TokenBatch`), the node / edge tokenizer and the
  identifier regularisers; :mod:`~.token_model`: the model machinery both TokenGTs share and
  their shared options (``TokenModelOptions``, checked once);
* :class:`TokenGT` (:mod:`~.tokengt`): node + edge tokens with node / type identifiers, pre-LN
  Transformer, attention kernels of the shared core, complex / node / edge outputs.
* :class:`OrderKTokenGT` (:mod:`~.order_k_tokengt`): the order-k variant (§3) on any
  ``ComplexData`` — cells of every rank as tokens with ordered vertex-identifier slots (one
  token per ordering) or pooled identifiers, and a type identifier per rank.
* :func:`cell_orderings`, :func:`boundary_cycles`: the vertex orderings of the cells;
  :func:`ordering_counts`: how many tokens they make, counted before building them.
* :class:`TokenGTLayer`, :class:`TokenGTEncoder`: the encoder layer and stack.
"""

from topomodelx_attention.nn._export import refuse_torchscript, register_prepared_inputs
from topomodelx_attention.nn.graph.order_k_tokengt import (
    IDENTIFIERS,
    MAX_TOKENS,
    OrderKTokenGT,
    OrderKTokenGTInputs,
)
from topomodelx_attention.nn.graph.orderings import (
    CellOrderings,
    boundary_cycles,
    cell_orderings,
    ordering_counts,
)
from topomodelx_attention.nn.graph.tokengt import TOKENGT_OUTPUTS, TokenGT, TokenGTInputs
from topomodelx_attention.nn.graph.tokengt_layer import (
    LAYOUTS,
    TokenGTEncoder,
    TokenGTLayer,
    drop_path,
)
from topomodelx_attention.nn.graph.tokens import (
    EDGE_TOKENS,
    TokenBatch,
    TokenGTTokenizer,
    eigenvector_dropout,
    random_sign_flip,
)

# torch.export.export(model, (model.prepare(data),)) for TokenGT (nn/_export.py)
register_prepared_inputs(TokenGTInputs, OrderKTokenGTInputs)
refuse_torchscript(OrderKTokenGT, TokenGT, TokenGTEncoder, TokenGTLayer, TokenGTTokenizer)

__all__ = [
    "EDGE_TOKENS",
    "IDENTIFIERS",
    "LAYOUTS",
    "MAX_TOKENS",
    "TOKENGT_OUTPUTS",
    "CellOrderings",
    "OrderKTokenGT",
    "OrderKTokenGTInputs",
    "TokenBatch",
    "TokenGT",
    "TokenGTEncoder",
    "TokenGTInputs",
    "TokenGTLayer",
    "TokenGTTokenizer",
    "boundary_cycles",
    "cell_orderings",
    "drop_path",
    "eigenvector_dropout",
    "ordering_counts",
    "random_sign_flip",
]
