r"""Functional multi-head attention kernels shared by every model family (re-exports).

All functions work on **already projected, head-split** tensors: queries of shape
``(n_target, heads, d)``, keys ``(n_source, heads, d)``, values ``(n_source, heads, d_v)``.
They return ``(n_target, heads, d_v)``. The three kinds implement the cellular attention of
Eq. (2) (§4.2.1) and Eq. (3) (§4.2.2) of the Cellular Transformer paper,
:math:`\mathrm{softmax}(Q K^\top \star \phi(N)) V`, one module each:

* :mod:`~topomodelx_attention.nn.attention.sparse`: :func:`sparse_attention` (mask ``N``);
* :mod:`~topomodelx_attention.nn.attention.dense`: :func:`dense_attention` (all pairs per
  complex, optional θ·N bias) and :func:`dense_attention_weights`;
* :mod:`~topomodelx_attention.nn.attention.linear`: :func:`linear_attention` (Performer /
  FAVOR+), :func:`favor_features`, :func:`orthogonal_random_matrix`;

on the shared pieces of :mod:`~topomodelx_attention.nn.attention.heads` (head split/merge)
and :mod:`~topomodelx_attention.nn.attention.layout` (the padded layout of the tokens of a
batch and the neighbourhood index). Block structure: ``batch_target`` / ``batch_source`` give
the complex of every token (sorted, as produced by PyG concatenation), or a precomputed
:class:`PaddedLayout` replaces them; tokens of different complexes never attend to each other.
A target without any source gets zeros (never NaN) in every kind.
"""

from __future__ import annotations

import torch.nn.functional as F  # noqa: F401  (tests patch F.scaled_dot_product_attention)

from topomodelx_attention.nn.attention.dense import dense_attention, dense_attention_weights
from topomodelx_attention.nn.attention.heads import HeadwiseLinear, merge_heads, split_heads
from topomodelx_attention.nn.attention.layout import (
    Neighborhood,
    NeighborhoodIndex,
    PaddedLayout,
    neighborhood_index,
    padded_layout,
    prepare_neighborhood,
)
from topomodelx_attention.nn.attention.linear import (
    LINEAR_CHUNK_ELEMENTS,
    default_num_random_features,
    favor_features,
    linear_attention,
    orthogonal_random_matrix,
)
from topomodelx_attention.nn.attention.sparse import (
    SPARSE_CHUNK_ELEMENTS,
    SparsePlan,
    sparse_attention,
    sparse_plan,
)

__all__ = [
    "LINEAR_CHUNK_ELEMENTS",
    "SPARSE_CHUNK_ELEMENTS",
    "HeadwiseLinear",
    "Neighborhood",
    "NeighborhoodIndex",
    "PaddedLayout",
    "SparsePlan",
    "default_num_random_features",
    "dense_attention",
    "dense_attention_weights",
    "favor_features",
    "linear_attention",
    "merge_heads",
    "neighborhood_index",
    "orthogonal_random_matrix",
    "padded_layout",
    "prepare_neighborhood",
    "sparse_attention",
    "sparse_plan",
    "split_heads",
]
