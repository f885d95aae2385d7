"""Data model: :class:`ComplexData`, neighbourhoods, TopoNetX conversion and sampled sub-complexes."""

import topomodelx_attention._compat  # noqa: F401  (imports PyG without its import-time warning)
from topomodelx_attention.data.collate import (
    ComplexDataBatch,
    ComplexDataLoader,
    check_batchable,
    collate_complexes,
)
from topomodelx_attention.data.complex_data import PREPARED_STRUCTURE, ComplexData, check_features
from topomodelx_attention.data.convert import from_toponetx, to_toponetx
from topomodelx_attention.data.neighborhoods import (
    NEIGHBORHOODS,
    build_neighborhoods,
    shared_face_counts,
)
from topomodelx_attention.data.sampling import SubComplexSampler
from topomodelx_attention.data.scipy_sparse import (
    scipy_to_torch,
    sparsity_pattern,
    to_coalesced_coo,
    torch_to_scipy,
)

__all__ = [
    "NEIGHBORHOODS",
    "PREPARED_STRUCTURE",
    "ComplexData",
    "ComplexDataBatch",
    "ComplexDataLoader",
    "SubComplexSampler",
    "build_neighborhoods",
    "check_batchable",
    "check_features",
    "collate_complexes",
    "from_toponetx",
    "scipy_to_torch",
    "shared_face_counts",
    "sparsity_pattern",
    "to_coalesced_coo",
    "to_toponetx",
    "torch_to_scipy",
]
