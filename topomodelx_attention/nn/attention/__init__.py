"""The attention core shared by every model family.

* :mod:`~topomodelx_attention.nn.attention.scatter`: scatter reductions and segment softmax.
* :mod:`~topomodelx_attention.nn.attention.functional`: sparse / dense / linear (FAVOR+)
  multi-head attention on projected, head-split tensors.
* :mod:`~topomodelx_attention.nn.attention.multihead`: :class:`MultiHeadAttention`, the
  projected module (Eq. 2 of the Cellular Transformer paper).
"""

from topomodelx_attention.nn.attention.functional import (
    PaddedLayout,
    default_num_random_features,
    dense_attention,
    dense_attention_weights,
    favor_features,
    linear_attention,
    merge_heads,
    neighborhood_index,
    orthogonal_random_matrix,
    padded_layout,
    sparse_attention,
    split_heads,
)
from topomodelx_attention.nn.attention.multihead import ATTENTION_KINDS, MultiHeadAttention
from topomodelx_attention.nn.attention.scatter import (
    HAS_TORCH_SCATTER,
    scatter_max,
    scatter_sum,
    segment_softmax,
)

__all__ = [
    "ATTENTION_KINDS",
    "HAS_TORCH_SCATTER",
    "MultiHeadAttention",
    "PaddedLayout",
    "default_num_random_features",
    "dense_attention",
    "dense_attention_weights",
    "favor_features",
    "linear_attention",
    "merge_heads",
    "neighborhood_index",
    "orthogonal_random_matrix",
    "padded_layout",
    "scatter_max",
    "scatter_sum",
    "segment_softmax",
    "sparse_attention",
    "split_heads",
]
