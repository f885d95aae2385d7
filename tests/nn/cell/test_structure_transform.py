"""A complex's structure prepared once (``PrepareStructure``): same model, same results, refused otherwise."""

from __future__ import annotations

import copy

import pytest
import torch
from omegaconf import OmegaConf
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges, to_double
from tests.nn.cell.test_cellular_transformer import COMBOS, complexes, make_model
from topomodelx_attention.data import PREPARED_STRUCTURE, SubComplexSampler
from topomodelx_attention.harness.loaders import FullBatch, structure_transform
from topomodelx_attention.nn.cell import PreparedStructure, PrepareStructure
from topomodelx_attention.transforms import CellCycleLifting

GLOBAL = ["0->0:adjacency_0", "1->0:incidence_1", "0->1:incidence_1.T", "0->0:all_0", "2->2:coadjacency_2"]


def _one_complex():
    """One complex of a few parts: two rings sharing an edge, a pendant path, a triangle, isolated vertices."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4), (5, 6), (6, 7), (7, 5), (8, 9)]
    graph = graph_from_edges(edges, num_nodes=12, feature_dim=3, seed=4)
    graph.y = torch.tensor([1])
    return to_double(CellCycleLifting()(graph))


def _run(model, data, train: bool):
    """Output and parameter gradients of one call (fixed dropout draws)."""
    model.train(train)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(3)
    with torch.set_grad_enabled(train):
        out = model(data)
        grads = []
        if train:
            out.square().sum().backward()
            grads = [p.grad.clone() if p.grad is not None else None for p in model.parameters()]
    return out.detach(), grads


@pytest.mark.parametrize(("attention", "kind"), COMBOS)
def test_the_prepared_complex_gives_the_same_outputs_and_gradients(attention, kind):
    model = make_model(attention, kind, attention_dropout=0.2 if kind != "linear" else 0.0, dropout=0.1)
    data = _one_complex()
    prepared = model.structure_transform()(data)
    assert PREPARED_STRUCTURE not in data  # a copy: the complex itself is unchanged
    for train in (True, False):
        out, grads = _run(model, data, train)
        out_prepared, grads_prepared = _run(model, prepared, train)
        torch.testing.assert_close(out_prepared, out, atol=0.0, rtol=0.0)
        for g, h in zip(grads, grads_prepared):
            assert (g is None) == (h is None)
            if g is not None:
                torch.testing.assert_close(h, g, atol=0.0, rtol=0.0)


def test_global_arrows_with_relative_walks_and_cell_outputs_reuse_the_structure():
    model = make_model("pairwise", "sparse", tensor_diagram=GLOBAL, kernel_options={"rrwp_steps": 3}, outputs=(0, 1))
    data = _one_complex()
    prepared = PrepareStructure(model)(data)
    stored = prepared[PREPARED_STRUCTURE]
    assert isinstance(stored, PreparedStructure) and stored.counts == tuple(data.cell_counts())
    with torch.no_grad():
        assert model.prepare(prepared).structure is stored.structure  # built once, not again
        for h, g in zip(model(prepared).values(), model(data).values()):
            torch.testing.assert_close(h, g, atol=0.0, rtol=0.0)


def test_a_batch_of_one_from_a_loader_reuses_it_and_a_complex_without_2_cells_works():
    model = make_model("pairwise", "sparse")
    tree = to_double(complexes()[1])  # no 2-cell: an empty rank
    prepared = model.structure_transform()(tree)
    batch = Batch.from_data_list([prepared])
    assert batch[PREPARED_STRUCTURE] == [prepared[PREPARED_STRUCTURE]]
    with torch.no_grad():
        assert model.prepare(batch).structure is prepared[PREPARED_STRUCTURE].structure
        torch.testing.assert_close(model(batch), model(tree), atol=0.0, rtol=0.0)


def test_another_model_a_batch_of_several_and_a_changed_complex_are_refused():
    model = make_model("pairwise", "sparse", heads=4)
    data = _one_complex()
    prepared = model.structure_transform()(data)
    with pytest.raises(ValueError, match=r"another model \(heads: prepared 4, this model 2\)"):
        make_model("pairwise", "sparse", heads=2)(prepared)
    with pytest.raises(ValueError, match=r"arrows: prepared .*this model"):
        make_model("pairwise", "sparse", tensor_diagram=["0->0:adjacency_0", "1->0:incidence_1"])(prepared)
    with pytest.raises(ValueError, match=r"kind: prepared sparse, this model dense"):
        make_model("pairwise", "dense")(prepared)
    with pytest.raises(ValueError, match="a batch of 2 complexes carries prepared structures"):
        model(Batch.from_data_list([prepared, prepared]))
    changed = copy.copy(prepared)
    adjacency = prepared.adjacency_0.coalesce()
    keep = adjacency.indices()[0] != 0  # vertex 0 loses its neighbours
    changed.adjacency_0 = torch.sparse_coo_tensor(
        adjacency.indices()[:, keep], adjacency.values()[keep], adjacency.shape
    ).coalesce()
    with pytest.raises(ValueError, match="the complex changed after PrepareStructure"):
        model(changed)
    wrong = copy.copy(prepared)
    wrong[PREPARED_STRUCTURE] = "not a structure"
    with pytest.raises(TypeError, match="not a PreparedStructure"):
        model(wrong)
    with pytest.raises(ValueError, match="prepares one complex, got a batch of 3"):
        model.structure_transform()(Batch.from_data_list([to_double(c) for c in complexes()]))
    with pytest.raises(TypeError, match="expects a ComplexData"):
        model.structure_transform()(torch.zeros(3))
    with pytest.raises(TypeError, match="prepares for a CellularTransformer"):
        PrepareStructure(torch.nn.Linear(2, 2))


def test_the_transform_again_replaces_the_structure_and_the_sampler_refuses_it():
    small, large = make_model("pairwise", "sparse", heads=2), make_model("pairwise", "sparse", heads=4)
    data = _one_complex()
    again = large.structure_transform()(small.structure_transform()(data))
    with torch.no_grad():
        torch.testing.assert_close(large(again), large(data), atol=0.0, rtol=0.0)
    del again.edge_index  # the graph's arcs: not a neighbourhood the sampler restricts
    with pytest.raises(ValueError, match="every sub-complex is prepared on its own"):
        SubComplexSampler(again, hops=1)
    del again[PREPARED_STRUCTURE]
    assert SubComplexSampler(again, hops=1).sample([0]).num_cells(0) > 1


def test_the_harness_prepares_the_full_batch_once_where_the_model_can():
    model = make_model("pairwise", "sparse")
    cpu = OmegaConf.create({"accelerator": "cpu"})
    transform = structure_transform(model, OmegaConf.create({}), cpu)
    assert isinstance(transform, PrepareStructure)
    assert structure_transform(model, OmegaConf.create({"prepare_structure": False}), cpu) is None
    assert structure_transform(torch.nn.Linear(2, 2), OmegaConf.create({}), cpu) is None
    assert structure_transform(model, OmegaConf.create({}), OmegaConf.create({"accelerator": "gpu"})) is None
    with pytest.raises(ValueError, match="prepare_structure must be true or false"):
        structure_transform(model, OmegaConf.create({"prepare_structure": "yes"}), cpu)
    loader = FullBatch([_one_complex()], transform)
    first, second = next(iter(loader)), next(iter(loader))
    assert first is second and isinstance(first[PREPARED_STRUCTURE], PreparedStructure)
