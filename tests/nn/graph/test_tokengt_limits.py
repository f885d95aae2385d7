"""OrderKTokenGT(identifiers="ordered") counts its tokens before building them.

One 8-vertex simplex (the default ``max_cell_size=8``) has 8! = 40,320 orderings of its top
cell and 109,601 tokens with its faces (minutes of work): the tokens of every complex are
counted first (:func:`ordering_counts`) and a complex above ``max_tokens`` raises
a ``ValueError`` naming the cell size, the token count and the fixes.
"""

from __future__ import annotations

import math

import pytest
import toponetx as tnx
import torch
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges, random_cell_complex
from topomodelx_attention.data import from_toponetx
from topomodelx_attention.nn.graph import MAX_TOKENS, OrderKTokenGT, cell_orderings, ordering_counts
from topomodelx_attention.nn.graph import order_k_tokengt as tokengt_module
from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting


def simplex(vertices: int):
    return from_toponetx(tnx.SimplicialComplex([list(range(vertices))]))


def model_for(data, **kwargs) -> OrderKTokenGT:
    torch.manual_seed(0)
    return OrderKTokenGT([0] * (data.max_rank + 1), 8, 2, n_layers=1, heads=2, node_id_dim=0, **kwargs).eval()


def complexes():
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4), (4, 5), (5, 6), (6, 3)]
    graph = graph_from_edges(edges, feature_dim=1)
    cell = CellCycleLifting()(graph)
    clique = SimplicialCliqueLifting(complex_dim=3)(graph_from_edges([*edges, (1, 3)], feature_dim=1))
    hypergraph = tnx.CombinatorialComplex()
    hypergraph.add_cell([0, 1, 2, 3], rank=1)
    hypergraph.add_cell([2, 3, 4], rank=1)
    hypergraph.add_cell([0, 1, 2, 3, 4], rank=2)
    return [cell, clique, from_toponetx(hypergraph), from_toponetx(random_cell_complex(3))]


@pytest.mark.parametrize("index", range(4), ids=["cell", "clique", "hypergraph", "random_cell"])
def test_ordering_counts_equal_the_tokens_built(index):
    data = complexes()[index]
    for rank in range(data.max_rank + 1):
        counts = ordering_counts(data, rank, 8)
        built = cell_orderings(data, rank, 8)
        per_cell = torch.bincount(built.owner, minlength=data.num_cells(rank))
        torch.testing.assert_close(counts, per_cell.double())


def test_an_8_vertex_simplex_is_refused_before_its_tokens_are_built(monkeypatch):
    data = simplex(8)
    counts = [ordering_counts(data, r, 8) for r in range(8)]
    total = 1 + sum(int(c.sum()) for c in counts)
    assert total == 1 + sum(math.comb(8, s) * math.factorial(s) for s in range(1, 9)) == 109_601
    assert int(counts[7][0]) == math.factorial(8)
    # the unprotected path builds all of them: 40,320 tokens for the top cell alone
    assert cell_orderings(data, 7, 8).slots.shape == (40_320, 8)

    def never(*args, **kwargs):
        raise AssertionError("tokens were built before the count was checked")

    monkeypatch.setattr(tokengt_module, "cell_orderings", never)
    model = model_for(data)
    assert model.max_tokens == MAX_TOKENS
    pattern = (
        r"109,601 tokens for this complex, above max_tokens=8,192.*rank-7 cell 0, 8 vertices"
        r".*40,320 orderings.*identifiers=\"sum\".*max_cell_size \(now 8"
    )
    with pytest.raises(ValueError, match=pattern):
        model(data)
    monkeypatch.undo()
    out = model_for(data, identifiers="sum")(data)  # the fix the message names: 256 tokens
    assert out.shape == (1, 2) and torch.isfinite(out).all()


def test_the_limit_is_per_complex_of_a_batch():
    small = simplex(4)  # 1 + 4 + 12 + 24 + 24 = 65 tokens
    assert 1 + sum(int(ordering_counts(small, r, 8).sum()) for r in range(4)) == 65
    model = model_for(small, max_tokens=65)
    batch = Batch.from_data_list([small] * 6)  # 390 tokens in the batch, 65 per complex
    assert model(batch).shape == (6, 2)
    bigger = from_toponetx(tnx.SimplicialComplex([[0, 1, 2, 3], [3, 4]]))  # + 1 vertex, 1 edge
    with pytest.raises(ValueError, match=r"68 tokens for complex 1 of the batch, above max_tokens=65"):
        model(Batch.from_data_list([small, bigger]))
    unlimited = model_for(simplex(6), max_tokens=None)  # 1,957 tokens, no limit
    assert unlimited(simplex(6)).shape == (1, 2)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="max_tokens"):
            model_for(small, max_tokens=bad)


def test_rings_count_2l_and_oversized_cells_name_max_cell_size():
    data = CellCycleLifting()(graph_from_edges([(i, (i + 1) % 9) for i in range(9)], feature_dim=1))
    counts = ordering_counts(data, 2, 9)
    assert counts.tolist() == [18.0]  # one ring of length 9: 2L orderings
    with pytest.raises(ValueError, match="max_cell_size=8"):
        ordering_counts(data, 2, 8)
    with pytest.raises(ValueError, match="max_cell_size=8"):
        model_for(data)(data)
    with pytest.raises(ValueError, match="max_cell_size=4"):
        ordering_counts(simplex(5), 4, 4)
