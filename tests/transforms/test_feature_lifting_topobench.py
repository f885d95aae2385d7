"""``FeatureLifting(x2_from="edges")`` through a lifting gives TopoBench's ``x_2 = |B_2|ᵀ x_1``."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest
import toponetx as tnx
import torch

from tests.helpers import graph_from_edges
from topomodelx_attention.transforms import (
    CellCycleLifting,
    FeatureLifting,
    SimplicialCliqueLifting,
)

EDGES = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 1), (4, 5), (5, 6), (6, 4), (6, 7)]


def _topobench_features(graph, x0: np.ndarray):
    """TopoBench's cell-cycle lifting + ProjectionSum, on TopoNetX: x_1 = |B_1|ᵀ x_0, x_2 = |B_2|ᵀ x_1.

    Returns the features keyed by the vertex set of each cell (the cell order may differ).
    """
    g = nx.Graph()
    g.add_nodes_from(range(x0.shape[0]))
    g.add_edges_from(graph.edge_index.t().tolist())
    cc = tnx.CellComplex(g)
    cc.add_cells_from(nx.cycle_basis(g), rank=2)
    _, edge_keys, b1 = cc.incidence_matrix(1, signed=False, index=True)
    _, cell_keys, b2 = cc.incidence_matrix(2, signed=False, index=True)
    x1 = b1.T @ x0
    x2 = b2.T @ x1
    edges = {frozenset(key): x1[i] for key, i in edge_keys.items()}
    cells = {frozenset(key): x2[i] for key, i in cell_keys.items()}  # key: the cycle's vertices
    return edges, cells


def _ours_by_vertices(data, rank: int):
    vertex_cells = data.vertex_cells(rank).to_dense()
    return {
        frozenset(vertex_cells[:, c].nonzero().flatten().tolist()): data[f"x_{rank}"][c].numpy()
        for c in range(vertex_cells.shape[1])
    }


def _assert_same(ours: dict, theirs: dict):
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        np.testing.assert_allclose(ours[key], value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("many", [False, True], ids=["lift", "lift_many"])
def test_documented_form_gives_topobench_x2(many):
    graph = graph_from_edges(EDGES, feature_dim=3, seed=1)
    lifting = CellCycleLifting(feature_lifting=FeatureLifting(x2_from="edges"))
    data = lifting.lift_many([graph, graph])[1] if many else lifting(graph)
    edges, cells = _topobench_features(graph, graph.x.numpy().astype(np.float64))
    _assert_same(_ours_by_vertices(data, 1), edges)
    _assert_same(_ours_by_vertices(data, 2), cells)
    # the default (vertex sums) differs: TopoBench counts every vertex of a cycle twice
    default = CellCycleLifting()(graph)
    torch.testing.assert_close(2 * default.x_2, data.x_2)


def test_documented_form_used_to_be_refused():
    """The string-only argument raised "method must be 'sum' or 'mean'" for a FeatureLifting."""
    with pytest.raises(ValueError, match="method must be 'sum' or 'mean'"):
        FeatureLifting(FeatureLifting(x2_from="edges"))  # what the lifting used to build
    lifting = CellCycleLifting(feature_lifting=FeatureLifting(x2_from="edges"))
    assert lifting.feature_lifting.x2_from == "edges"
    assert "x2_from='edges'" in repr(lifting)
    assert SimplicialCliqueLifting(feature_lifting=FeatureLifting(x2_from="edges")).feature_lifting.x2_from == "edges"


def test_feature_lifting_instance_owns_its_options():
    with pytest.raises(ValueError, match="edge_feature_lifting"):
        CellCycleLifting(feature_lifting=FeatureLifting(), edge_feature_lifting="concat")
    with pytest.raises(ValueError, match="categorical_cardinalities"):
        CellCycleLifting(feature_lifting=FeatureLifting(), categorical_cardinalities=[3])
    with pytest.raises(TypeError, match="feature_lifting must be"):
        CellCycleLifting(feature_lifting=3)


def test_applied_afterwards_warns_or_overwrites():
    graph = graph_from_edges(EDGES, feature_dim=3, seed=1)
    lifted = CellCycleLifting()(graph)  # x_2 from the vertices
    expected = CellCycleLifting(feature_lifting=FeatureLifting(x2_from="edges"))(graph).x_2
    with pytest.warns(UserWarning, match="overwrite=\\[2\\]"):
        kept = FeatureLifting(x2_from="edges")(lifted.clone())
    torch.testing.assert_close(kept.x_2, lifted.x_2)  # kept, but not silently
    relifted = FeatureLifting(x2_from="edges", overwrite=[2])(lifted.clone())
    torch.testing.assert_close(relifted.x_2, expected)
    torch.testing.assert_close(relifted.x_1, lifted.x_1)  # rank 1 not listed: unchanged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FeatureLifting()(lifted.clone())  # vertices convention: filling only, no warning


def test_overwrite_is_validated():
    with pytest.raises(ValueError, match="overwrite"):
        FeatureLifting(overwrite=[0])
    with pytest.raises(TypeError, match="overwrite"):
        FeatureLifting(overwrite="2")
    assert "overwrite=[2]" in repr(FeatureLifting(overwrite=[2]))
    assert "overwrite" not in repr(FeatureLifting())  # cache keys of the default stay as they were
