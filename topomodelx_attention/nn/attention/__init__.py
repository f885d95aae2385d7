r"""The attention core shared by every model family.

* :mod:`~topomodelx_attention.nn.attention.scatter`: scatter reductions and segment softmax.
* :mod:`~topomodelx_attention.nn.attention.heads`: head split/merge, per-head projections.
* :mod:`~topomodelx_attention.nn.attention.dropout`: the attention dropout factors of every
  kernel (:func:`dropout_factors`, :func:`softmax_dropout`), eager and under ``torch.compile``.
* :mod:`~topomodelx_attention.nn.attention.layout`: the padded layout of a batch of token sets;
  :mod:`~topomodelx_attention.nn.attention.neighborhood`: the prepared neighbourhood index
  (both computed once, outside ``torch.compile``).
* :mod:`~topomodelx_attention.nn.attention.sparse` / :mod:`~.dense` / :mod:`~.linear`: the
  three attention kinds as functions on **projected, head-split** tensors — queries
  ``(n_target, heads, d)``, keys ``(n_source, heads, d)``, values ``(n_source, heads, d_v)``,
  output ``(n_target, heads, d_v)`` — implementing Eq. (2) / (3) of the Cellular Transformer
  paper, :math:`\mathrm{softmax}(Q K^\top \star \phi(N)) V`: :func:`sparse_attention` (mask
  ``N``), :func:`dense_attention` (all pairs per complex, optional θ·N bias) and
  :func:`dense_attention_weights`, :func:`linear_attention` (Performer / FAVOR+). Tokens of
  different complexes (sorted batch vectors, or a precomputed :class:`PaddedLayout`) never
  attend to each other; a target without any source gets zeros (never NaN) in every kind.
* :mod:`~topomodelx_attention.nn.attention.kernels`: one module per kind owning its options,
  registered by kind (:data:`KERNELS`, :func:`register_kernel`) with capability flags;
  :mod:`~topomodelx_attention.nn.attention.kinds`: which kernel a block uses, asked by those
  flags (:func:`global_kind`, :func:`block_kind`, the composite kinds such as ``"mixed"``).
* :mod:`~topomodelx_attention.nn.attention.multihead`: :class:`MultiHeadAttention`, the
  projected module (Eq. 2 of the Cellular Transformer paper), and
  :class:`MultiGroupAttention` (one value projection per token group, Eq. 3).
* :mod:`~topomodelx_attention.nn.attention.fused`: many sparse blocks between token groups in
  one fused call; :mod:`~topomodelx_attention.nn.attention.stacked`: :class:`StackedBlocks`,
  their Q/K/V/O weights stacked per group and role.
* :mod:`~topomodelx_attention.nn.attention.relative`: relative random-walk pair features
  (:func:`random_walk_pair_features`, GRIT's RRWP), the learned bias of global dense attention.
"""

from topomodelx_attention.nn._export import refuse_torchscript, register_prepared_inputs
from topomodelx_attention.nn.attention.dense import dense_attention, dense_attention_weights
from topomodelx_attention.nn.attention.dropout import dropout_factors, softmax_dropout
from topomodelx_attention.nn.attention.fused import FusedNeighborhood
from topomodelx_attention.nn.attention.heads import HeadwiseLinear, merge_heads, split_heads
from topomodelx_attention.nn.attention.kernels import (
    BIAS_SCALES,
    KERNELS,
    AttentionKernel,
    AttentionTokens,
    DenseKernel,
    LinearKernel,
    SparseKernel,
    build_kernel,
    kernel_class,
    register_kernel,
)
from topomodelx_attention.nn.attention.kinds import (
    COMPOSITE_KINDS,
    all_pairs_kinds,
    attends_all_pairs,
    block_kind,
    check_all_pairs,
    global_kind,
    kernel_kinds,
    reads_neighborhood,
    register_composite,
)
from topomodelx_attention.nn.attention.layout import (
    PaddedLayout,
    SizeGroup,
    padded_layout,
    size_groups,
)
from topomodelx_attention.nn.attention.linear import (
    default_num_random_features,
    favor_features,
    linear_attention,
    orthogonal_random_matrix,
)
from topomodelx_attention.nn.attention.multihead import MultiGroupAttention, MultiHeadAttention
from topomodelx_attention.nn.attention.neighborhood import (
    NeighborhoodIndex,
    PaddedBias,
    neighborhood_index,
    prepare_neighborhood,
)
from topomodelx_attention.nn.attention.plan import SparsePlan, sparse_plan
from topomodelx_attention.nn.attention.relative import random_walk_pair_features
from topomodelx_attention.nn.attention.scatter import (
    HAS_TORCH_SCATTER,
    scatter_max,
    scatter_sum,
    segment_softmax,
)
from topomodelx_attention.nn.attention.sparse import sparse_attention
from topomodelx_attention.nn.attention.stacked import StackedBlocks

# torch.export inputs
register_prepared_inputs(NeighborhoodIndex, PaddedLayout, SparsePlan, FusedNeighborhood)
refuse_torchscript(
    AttentionKernel,
    DenseKernel,
    HeadwiseLinear,
    LinearKernel,
    MultiGroupAttention,
    MultiHeadAttention,
    SparseKernel,
)

__all__ = [
    "BIAS_SCALES",
    "COMPOSITE_KINDS",
    "HAS_TORCH_SCATTER",
    "KERNELS",
    "AttentionKernel",
    "AttentionTokens",
    "DenseKernel",
    "HeadwiseLinear",
    "LinearKernel",
    "MultiGroupAttention",
    "MultiHeadAttention",
    "NeighborhoodIndex",
    "PaddedBias",
    "PaddedLayout",
    "SizeGroup",
    "SparseKernel",
    "SparsePlan",
    "StackedBlocks",
    "all_pairs_kinds",
    "attends_all_pairs",
    "block_kind",
    "build_kernel",
    "check_all_pairs",
    "default_num_random_features",
    "dense_attention",
    "dense_attention_weights",
    "dropout_factors",
    "favor_features",
    "global_kind",
    "kernel_class",
    "kernel_kinds",
    "linear_attention",
    "merge_heads",
    "neighborhood_index",
    "orthogonal_random_matrix",
    "padded_layout",
    "prepare_neighborhood",
    "random_walk_pair_features",
    "reads_neighborhood",
    "register_composite",
    "register_kernel",
    "scatter_max",
    "scatter_sum",
    "segment_softmax",
    "size_groups",
    "softmax_dropout",
    "sparse_attention",
    "sparse_plan",
    "split_heads",
]
