"""PyG-style transforms: graph → complex liftings, feature liftings, positional encodings."""

import topomodelx_attention._compat  # noqa: F401  (imports PyG without its import-time warning)
from topomodelx_attention.transforms.feature_lifting import FeatureLifting
from topomodelx_attention.transforms.graph_checks import UndirectedGraph, undirected_graph
from topomodelx_attention.transforms.liftings import CellCycleLifting, SimplicialCliqueLifting
from topomodelx_attention.transforms.node_ids import LaplacianNodeId, OrthogonalRandomNodeId
from topomodelx_attention.transforms.positional_encodings import (
    BarycentricRandomWalkPE,
    BarycentricSubdivisionPE,
    CellPositionalEncoding,
    CellularRandomWalkPE,
    HodgeLaplacianPE,
    RandomSignFlip,
    ZeroPE,
    barycentric_graph,
    barycentric_random_walk,
    cellular_random_walk,
)
from topomodelx_attention.transforms.slepians import TopologicalSlepiansPE, topological_slepians

__all__ = [
    "BarycentricRandomWalkPE",
    "BarycentricSubdivisionPE",
    "CellCycleLifting",
    "CellPositionalEncoding",
    "CellularRandomWalkPE",
    "FeatureLifting",
    "HodgeLaplacianPE",
    "LaplacianNodeId",
    "OrthogonalRandomNodeId",
    "RandomSignFlip",
    "SimplicialCliqueLifting",
    "TopologicalSlepiansPE",
    "UndirectedGraph",
    "ZeroPE",
    "barycentric_graph",
    "barycentric_random_walk",
    "cellular_random_walk",
    "topological_slepians",
    "undirected_graph",
]
