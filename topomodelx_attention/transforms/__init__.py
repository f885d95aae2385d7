"""PyG-style transforms: graph → complex liftings, feature liftings, positional encodings."""

from topomodelx_attention.transforms.feature_lifting import FeatureLifting
from topomodelx_attention.transforms.graph_checks import UndirectedGraph, undirected_graph
from topomodelx_attention.transforms.liftings import CellCycleLifting, SimplicialCliqueLifting

__all__ = [
    "CellCycleLifting",
    "FeatureLifting",
    "SimplicialCliqueLifting",
    "UndirectedGraph",
    "undirected_graph",
]
