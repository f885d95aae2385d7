"""Graph transformers: TokenGT (Kim et al., "Pure Transformers are Powerful Graph Learners").

* :class:`TokenGT`: node + edge tokens with node / type identifiers, pre-LN Transformer,
  softmax or Performer attention (shared core), graph / node / edge heads.
* :class:`OrderKTokenGT`: the order-k variant (§3) on any ``ComplexData`` — cells of every
  rank as tokens with pooled vertex identifiers and a type identifier per rank.
* :class:`TokenGTLayer`, :class:`TokenGTEncoder`: the encoder layer and stack.
"""

from topomodelx_attention.nn.graph.tokengt import (
    EDGE_TOKENS,
    ID_POOLINGS,
    OrderKTokenGT,
    TokenBatch,
    TokenGT,
    TokenGTTokenizer,
    eigenvector_dropout,
    random_sign_flip,
)
from topomodelx_attention.nn.graph.tokengt_layer import (
    ATTENTIONS,
    LAYOUTS,
    TokenGTEncoder,
    TokenGTLayer,
    drop_path,
)

__all__ = [
    "ATTENTIONS",
    "EDGE_TOKENS",
    "ID_POOLINGS",
    "LAYOUTS",
    "OrderKTokenGT",
    "TokenBatch",
    "TokenGT",
    "TokenGTEncoder",
    "TokenGTLayer",
    "TokenGTTokenizer",
    "drop_path",
    "eigenvector_dropout",
    "random_sign_flip",
]
