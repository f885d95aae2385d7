"""Tuples of complexes, windows and tuple batching."""

from __future__ import annotations

import pytest
import toponetx as tnx
import torch
from torch_geometric.loader import DataLoader

from tests.helpers import random_simplicial_complex
from topomodelx_attention.data import from_toponetx
from topomodelx_attention.nn.simplicial import (
    NULL_KEY,
    complex_data_to_tuples,
    face_sets_to_tuples,
    resolve_tuples,
    simplices_to_tuples,
    tuples_batch,
    window_selection,
)


def _rows(t: torch.Tensor) -> set[tuple[int, ...]]:
    return {tuple(r) for r in t.tolist()}


def test_triangle_gives_both_orders_per_vertex():
    sc = tnx.SimplicialComplex([[10, 11, 12]])
    tuples = simplices_to_tuples(sc, order=2)
    assert _rows(tuples) == {
        (0, 1, 2),
        (0, 2, 1),
        (1, 0, 2),
        (1, 2, 0),
        (2, 0, 1),
        (2, 1, 0),
    }


def test_lower_order_pairs_and_self_loops():
    sc = tnx.SimplicialComplex([[0, 1, 2], [2, 3]])
    sc.add_node(4)
    tuples = simplices_to_tuples(sc, order=2, include_lower=True, self_loops=True)
    rows = _rows(tuples)
    assert (2, 3, NULL_KEY) in rows and (3, 2, NULL_KEY) in rows
    assert (0, 1, NULL_KEY) in rows  # edges of the triangle too
    assert (4, 4, 4) in rows
    assert not any(r[0] == 4 and r != (4, 4, 4) for r in rows)  # isolated vertex
    assert len(rows) == len(tuples)  # unique


def test_vertex_order_is_sorted_nodes():
    sc = tnx.SimplicialComplex([[5, 1, 3]])
    sc.add_node(0)
    tuples = simplices_to_tuples(sc, order=2)
    assert set(tuples[:, 0].tolist()) == {1, 2, 3}  # nodes 1, 3, 5 -> indices 1, 2, 3


def test_edges_as_tokens_of_a_triangle():
    sc = tnx.SimplicialComplex([[0, 1, 2]])
    tuples = simplices_to_tuples(sc, order=2, rank=1)
    assert tuples.shape == (6, 3)
    assert set(tuples.flatten().tolist()) == {0, 1, 2}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("order", "rank"), [(1, 0), (2, 0), (3, 0), (2, 1)])
def test_complex_data_matches_toponetx(seed, order, rank):
    sc = random_simplicial_complex(seed, n=7, p=0.6)
    data = from_toponetx(sc, max_rank=3)
    for lower in (False, True):
        a = simplices_to_tuples(sc, order, rank, include_lower=lower)
        b = complex_data_to_tuples(data, order, rank, include_lower=lower)
        assert torch.equal(a, b)


def test_batched_complex_data_equals_offset_tuples():
    complexes = [random_simplicial_complex(s, n=5 + s, p=0.6) for s in range(3)]
    loader = DataLoader([from_toponetx(c, max_rank=3) for c in complexes], batch_size=3)
    batch = next(iter(loader))
    got = complex_data_to_tuples(batch, 2, include_lower=True)
    want, vector = tuples_batch(
        [simplices_to_tuples(c, 2, include_lower=True) for c in complexes],
        [len(list(c.skeleton(0))) for c in complexes],
    )
    assert torch.equal(got, want)
    assert torch.equal(vector, batch.batch_0)


def test_face_sets_validation_and_empty():
    assert face_sets_to_tuples([], order=2, num_tokens=3).shape == (0, 3)
    with pytest.raises(ValueError, match="tokens"):
        face_sets_to_tuples([torch.tensor([[0, 1, 5]])], order=2, num_tokens=3)
    with pytest.raises(TypeError, match="SimplicialComplex"):
        simplices_to_tuples(object())


def test_window_selection_validity():
    sel = window_selection(5, (2, 3), causal=True)
    assert sel.indices[0].shape == (5, 2) and sel.indices[1].shape == (5, 3)
    assert sel.valid[0][0].tolist() == [False, True]
    assert bool(((sel.indices[1] <= torch.arange(5)[:, None]) | ~sel.valid[1]).all())
    sel = window_selection(5, (2,), causal=False)
    assert sel.indices[0].shape == (5, 3)


def test_resolve_tuples_causal_filter_keeps_bias_slot():
    t = torch.tensor([[1, 0, -1], [1, 2, -1], [2, 1, 0]])
    kept = resolve_tuples(t, order=2, causal=True).tuples
    assert _rows(kept) == {(1, 0, -1), (2, 1, 0)}
    with pytest.raises(ValueError, match="order"):
        resolve_tuples(t, order=3)
