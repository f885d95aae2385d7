"""The attention core shared by every model family of the package."""

from topomodelx_attention.nn.attention.scatter import (
    HAS_TORCH_SCATTER,
    scatter_max,
    scatter_sum,
    segment_softmax,
)

__all__ = ["HAS_TORCH_SCATTER", "scatter_max", "scatter_sum", "segment_softmax"]
