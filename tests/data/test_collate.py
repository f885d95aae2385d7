import pickle

import networkx as nx
import numpy as np
import pytest
import toponetx as tnx
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from tests.helpers import random_cell_complex
from topomodelx_attention.data import (
    ComplexData,
    ComplexDataBatch,
    ComplexDataLoader,
    collate_complexes,
    from_toponetx,
)
from topomodelx_attention.data.collate import pyg_from_data_list


def generic(data_list, **options):
    """PyG's own generic ``Batch.from_data_list`` (per-complex loops, ``__cat_dim__``/``__inc__``)."""
    return pyg_from_data_list(Batch, data_list, **options)


def lifted(seed, max_rank=2):
    cc = random_cell_complex(seed)
    rng = np.random.default_rng(seed)
    feats = {r: rng.normal(size=(n, 3)) for r, n in enumerate(cc.shape)}
    return from_toponetx(cc, features=feats, max_rank=max_rank, y=torch.tensor([seed]))


def graph_complex(graph, y):
    """A 1-dimensional complex padded to max_rank 2 (no 2-cells), edge_index kept."""
    n, m = graph.number_of_nodes(), graph.number_of_edges()
    features = {0: np.arange(3.0 * n).reshape(n, 3), 1: np.ones((m, 3)), 2: np.zeros((0, 3))}
    data = from_toponetx(graph, features=features, max_rank=2, y=torch.tensor([y]))
    data.edge_index = torch.tensor(sorted(graph.edges), dtype=torch.long).t().reshape(2, -1)
    return data


def mixed_complexes():
    """With and without 2-cells, an empty complex, a graph padded to rank 2."""
    complexes = [lifted(0), graph_complex(nx.balanced_tree(2, 2), 99), lifted(1)]
    complexes.append(graph_complex(nx.Graph(), 7))  # empty: 0 cells of every rank
    complexes.append(lifted(2))
    complexes.append(graph_complex(nx.path_graph(3), 5))
    for data in complexes:
        if "edge_index" not in data:
            data.edge_index = torch.zeros((2, 0), dtype=torch.long)
    return complexes


def assert_same(a, b):
    """Equal keys and values; sparse tensors compared densely."""
    assert set(a.keys()) == set(b.keys())
    for key in a.keys():
        x, y = a[key], b[key]
        if isinstance(x, torch.Tensor) and x.is_sparse:
            assert x.shape == y.shape, key
            x, y = x.to_dense(), y.to_dense()
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), key
        else:
            assert x == y, key


def assert_identical_batches(generic, fast):
    """Exactly equal: stored indices and values, shapes, coalesced flags, PyG bookkeeping."""
    assert type(generic) is type(fast) is ComplexDataBatch
    assert set(generic.keys()) == set(fast.keys())
    for key in generic.keys():
        x, y = generic[key], fast[key]
        if isinstance(x, torch.Tensor) and x.is_sparse:
            assert y.is_sparse and x.shape == y.shape, key
            assert x.is_coalesced() and y.is_coalesced(), key
            assert torch.equal(x.indices(), y.indices()), key
            assert x.values().dtype == y.values().dtype and torch.equal(x.values(), y.values()), key
            # marked coalesced without sorting: check that it truly is (sorted, no duplicates)
            recomputed = torch.sparse_coo_tensor(y.indices(), y.values(), y.shape).coalesce()
            assert torch.equal(recomputed.indices(), y.indices()), key
        elif isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), key
        else:
            assert x == y, key
    assert generic.num_graphs == fast.num_graphs
    assert list(generic._store._mapping) == list(fast._store._mapping)  # PyG's key order
    assert generic._slice_dict.keys() == fast._slice_dict.keys()
    for key, slices in generic._slice_dict.items():
        assert torch.equal(slices, fast._slice_dict[key]), key
        incs, other = generic._inc_dict[key], fast._inc_dict[key]
        assert (incs is None and other is None) or torch.equal(incs, other), key


# ----------------------------------------------------------------------------- fast collation


def test_fast_collation_equals_pyg_generic_collation_exactly():
    complexes = mixed_complexes()
    fast = ComplexDataBatch.from_data_list(complexes)
    assert_identical_batches(generic(complexes), fast)
    fast.validate_complex()
    assert fast.shape.tolist() == torch.cat([c.shape for c in complexes]).tolist()
    assert fast.shape[3].tolist() == [0, 0, 0]  # the empty complex keeps its row
    # block-diagonal: every neighbourhood is the block_diag of the complexes' ones
    for key in ("incidence_2", "signed_incidence_1", "adjacency_0", "hodge_laplacian_1", "coadjacency_2"):
        blocks = [c[key].to_dense() for c in complexes]
        assert torch.equal(fast[key].to_dense(), torch.block_diag(*blocks)), key
    for rank in range(3):
        expected = torch.cat([torch.full((int(c.shape[0, rank]),), i) for i, c in enumerate(complexes)])
        assert torch.equal(fast[f"batch_{rank}"], expected)
    assert torch.equal(fast.batch, fast.batch_0)


def test_fast_collation_in_the_loader_and_with_follow_batch_and_exclude_keys():
    complexes = mixed_complexes()
    for start, pyg, fast in zip((0, 4), DataLoader(complexes, batch_size=4), ComplexDataLoader(complexes, batch_size=4)):
        assert_identical_batches(generic(complexes[start : start + 4]), fast)
        assert_identical_batches(pyg, fast)
    options = {"follow_batch": ["x_1", "adjacency_0"], "exclude_keys": ["y", "hodge_laplacian_1"]}
    fast = collate_complexes(complexes, **options)
    assert "y" not in fast and "hodge_laplacian_1" not in fast and "x_1_batch" in fast
    assert_identical_batches(generic(complexes, **options), fast)
    assert_identical_batches(generic(complexes, **options), next(iter(DataLoader(complexes, batch_size=6, **options))))


def test_fast_collation_coalesces_a_block_that_is_not():
    complexes = [lifted(3), lifted(4)]
    matrix = complexes[1].adjacency_1.coalesce()
    order = torch.randperm(matrix._nnz(), generator=torch.Generator().manual_seed(0))
    complexes[1].adjacency_1 = torch.sparse_coo_tensor(matrix.indices()[:, order], matrix.values()[order], matrix.shape)
    assert not complexes[1].adjacency_1.is_coalesced()
    fast = collate_complexes(complexes)
    assert fast.adjacency_1.is_coalesced()
    assert torch.equal(fast.adjacency_1.to_dense(), generic(complexes).adjacency_1.to_dense())


# ----------------------------------------------------------------------------- splitting


@pytest.mark.parametrize(
    "collate", [generic, Batch.from_data_list, ComplexDataBatch.from_data_list], ids=["pyg-generic", "pyg", "fast"]
)
def test_to_data_list_and_indexing_give_back_the_complexes(collate):
    complexes = mixed_complexes()
    batch = collate(complexes)
    parts = batch.to_data_list()
    assert len(parts) == len(complexes)
    for original, part in zip(complexes, parts):
        assert type(part) is ComplexData
        assert_same(original, part)
    assert_same(batch[1], complexes[1])
    assert_same(batch[-1], complexes[-1])
    assert_same(batch.get_example(3), complexes[3])
    for selection, positions in [
        (slice(1, 4), [1, 2, 3]),
        ([0, 2], [0, 2]),
        (torch.tensor([4, 0]), [4, 0]),
        (torch.tensor([True, False, True, False, False, True]), [0, 2, 5]),
    ]:
        chosen = batch[selection]
        assert len(chosen) == len(positions)
        for part, i in zip(chosen, positions):
            assert_same(part, complexes[i])
    with pytest.raises(IndexError, match="out of range"):
        batch[len(complexes)]
    again = pickle.loads(pickle.dumps(batch))
    assert type(again) is ComplexDataBatch
    assert_same(again[2], complexes[2])


def test_subclasses_batch_and_split_into_their_own_class():
    class LabelledComplex(ComplexData):
        pass

    complexes = [LabelledComplex(**dict(c.items())) for c in mixed_complexes()[:3]]
    batch = Batch.from_data_list(complexes)
    assert isinstance(batch, LabelledComplex) and isinstance(batch, Batch)
    parts = batch.to_data_list()
    assert all(type(p) is LabelledComplex for p in parts)
    assert_same(parts[1], complexes[1])
    fast = collate_complexes(complexes)
    assert type(fast) is type(batch)
    assert all(type(p) is LabelledComplex for p in fast.to_data_list())

    class ShiftedLabels(ComplexData):  # its own batching rule: PyG's rules apply, not ours
        def __inc__(self, key, value, *args, **kwargs):
            return 10 if key == "y" else super().__inc__(key, value, *args, **kwargs)

    complexes = [ShiftedLabels(**dict(c.items())) for c in mixed_complexes()]
    reference, fast = generic(complexes), collate_complexes(complexes)
    assert fast.y.tolist() == [c.y.item() + 10 * i for i, c in enumerate(complexes)]
    assert type(reference) is type(fast) is type(Batch.from_data_list(complexes))
    assert_same(reference, fast)
    assert_same(reference, next(iter(DataLoader(complexes, batch_size=len(complexes)))))


# ----------------------------------------------------------------------------- mixed key sets


def _combinatorial():
    ccc = tnx.CombinatorialComplex()
    ccc.add_cell([0, 1], rank=1)
    ccc.add_cell([1, 2], rank=1)
    ccc.add_cell([0, 1, 2], rank=2)
    return ccc


def test_batching_combinatorial_with_cell_complexes_names_the_missing_keys_and_the_fix():
    unoriented = from_toponetx(_combinatorial())
    oriented = from_toponetx(tnx.CellComplex([[0, 1, 2, 3]], ranks=2))
    for order in ([oriented, unoriented], [unoriented, oriented]):
        for collate in (collate_complexes, ComplexDataBatch.from_data_list):
            with pytest.raises(ValueError, match=r"signed_incidence_1.*orientation.*neighborhoods="):
                collate(order)
        with pytest.raises(ValueError, match="signed_incidence_0"):
            next(iter(ComplexDataLoader(order, batch_size=2)))
    with pytest.raises(ValueError, match="max_rank="):
        collate_complexes([lifted(0), from_toponetx(nx.path_graph(3))])


def test_combinatorial_and_cell_complexes_batch_with_the_same_neighborhoods():
    names = ["incidence", "adjacency", "coadjacency", "vertex_incidence"]
    complexes = [
        from_toponetx(_combinatorial()),
        from_toponetx(tnx.CellComplex([[0, 1, 2, 3]], ranks=2), neighborhoods=names),
        from_toponetx(_combinatorial()),
    ]
    fast = collate_complexes(complexes)
    assert_identical_batches(generic(complexes), fast)
    fast.validate_complex()
    expected = torch.block_diag(*[c.vertex_cells(2).to_dense() for c in complexes])
    assert torch.equal(fast.vertex_cells(2).to_dense(), expected)
    for original, part in zip(complexes, fast.to_data_list()):
        assert_same(original, part)


def test_fast_collation_of_complexes_without_sparse_keys():

    from topomodelx_attention.data import ComplexData, collate_complexes

    items = [ComplexData(x_0=torch.randn(n, 2), y=torch.tensor([n])) for n in (3, 0, 2)]
    ours, theirs = collate_complexes(items), generic(items)
    assert torch.equal(ours.x_0, theirs.x_0)
    assert torch.equal(ours.y, theirs.y)


@pytest.mark.parametrize("order", [(2, 3), (3, 2)])
def test_batching_different_max_ranks_names_both_ranks_and_the_fix(order):
    # regression (fuzz): PyG's DataLoader raised "Sizes of tensors must match" on ``shape``
    # (or KeyError on incidence_3); both paths now raise a ValueError naming the max ranks
    from tests.helpers import graph_from_edges
    from topomodelx_attention.transforms import SimplicialCliqueLifting

    k4 = graph_from_edges([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])
    complexes = [SimplicialCliqueLifting(complex_dim=dim)(k4) for dim in order]
    message = (
        rf"max_rank {order[0]} and (complex 1|a later complex) has max_rank {order[1]}.*"
        r"from_toponetx\(\.\.\., max_rank=3\).*SimplicialCliqueLifting\(complex_dim=3\)"
    )
    for loader in (DataLoader, ComplexDataLoader):
        with pytest.raises(ValueError, match=message):
            next(iter(loader(complexes, batch_size=2)))
    for collate in (generic, Batch.from_data_list, collate_complexes):
        with pytest.raises(ValueError, match=message):
            collate(complexes)
    # padding to the same max rank is the fix; the check keeps no state that breaks later batches
    same = [SimplicialCliqueLifting(complex_dim=3)(k4), SimplicialCliqueLifting(complex_dim=3)(k4)]
    for loader in (DataLoader, ComplexDataLoader):
        batch = next(iter(loader(same, batch_size=2)))
        assert batch.shape.tolist() == [[4, 6, 4, 1], [4, 6, 4, 1]]
    for loader in (DataLoader, ComplexDataLoader):
        small = [SimplicialCliqueLifting(complex_dim=2)(k4)] * 2
        assert next(iter(loader(small, batch_size=2))).shape.tolist() == [[4, 6, 4]] * 2


def test_pyg_dataloader_over_simplicial_and_combinatorial_complexes_names_the_keys_and_the_fix():
    # PyG batches the keys of the first complex: its own error for a later complex lacking one
    # is a bare KeyError, and keys only later complexes have are dropped without a word
    simplicial = from_toponetx(tnx.SimplicialComplex([[0, 1, 2]]))
    combinatorial = from_toponetx(_combinatorial())
    plain = [Data(**dict(simplicial.items())), Data(**dict(combinatorial.items()))]
    with pytest.raises(KeyError, match="signed_incidence_0"):
        Batch.from_data_list(plain)
    fewer = Data(**dict(from_toponetx(tnx.SimplicialComplex([[0, 1, 2]]), neighborhoods=["incidence"]).items()))
    assert "adjacency_1" not in Batch.from_data_list([fewer, plain[0]])  # dropped silently
    # ComplexData's hook on ``shape`` (collated first) raises what ComplexDataLoader raises
    for order in ([simplicial, combinatorial], [combinatorial, simplicial]):
        with pytest.raises(ValueError, match="signed_incidence_0") as fast:
            next(iter(ComplexDataLoader(order, batch_size=2)))
        for batch in (lambda o: next(iter(DataLoader(o, batch_size=2))), Batch.from_data_list, generic):
            with pytest.raises(ValueError, match=r"signed_incidence_0.*orientation.*neighborhoods=\[") as error:
                batch(order)
            assert str(error.value) == str(fast.value)
            assert "complex 1 lacks" in str(error.value) or "complex 1 has" in str(error.value)
    # a key that only a later complex has (first complex without edge_index): refused too
    with_edges = from_toponetx(tnx.SimplicialComplex([[0, 1, 2]]), edge_index=torch.tensor([[0], [1]]))
    for collate in (Batch.from_data_list, generic):
        with pytest.raises(ValueError, match=r"complex 2 has \['edge_index'\], which complex 0 lacks"):
            collate([simplicial, simplicial, with_edges])
    # the fix the message names batches; no state of the failed batch is left behind
    names = ["incidence", "adjacency", "coadjacency"]
    fixed = [from_toponetx(tnx.SimplicialComplex([[0, 1, 2]]), neighborhoods=names),
             from_toponetx(_combinatorial(), neighborhoods=names)]
    batch = next(iter(DataLoader(fixed, batch_size=2)))
    assert_identical_batches(batch, collate_complexes(fixed))
    assert_identical_batches(generic(fixed), collate_complexes(fixed))
    assert next(iter(DataLoader([simplicial, simplicial], batch_size=2))).num_complexes == 2


# ----------------------------------------------------------------------------- PyG's own loader


def _refuse_generic_sparse_cat(monkeypatch):
    """Make PyG's generic sparse concatenation (its per-complex offset loop) raise."""
    import torch_geometric.data.collate as pyg_collate_module

    def refuse(*args, **kwargs):
        raise AssertionError("PyG's generic sparse cat was called")

    monkeypatch.setattr(pyg_collate_module, "cat", refuse)


def test_pyg_dataloader_and_batch_from_data_list_take_the_fast_collation(monkeypatch):
    complexes = mixed_complexes()
    reference = generic(complexes)
    _refuse_generic_sparse_cat(monkeypatch)
    # the generic path really goes through PyG's per-complex sparse cat (it now raises) ...
    with pytest.raises(AssertionError, match="generic sparse cat"):
        generic(complexes)
    # ... while PyG's DataLoader and Batch.from_data_list batch complexes without it
    assert_identical_batches(reference, Batch.from_data_list(complexes))
    assert_identical_batches(reference, next(iter(DataLoader(complexes, batch_size=len(complexes)))))
    # other Data objects keep PyG's own path (and its errors), as do lists mixing classes
    # (PyG asks every item for its own __inc__) and batches of batches
    plain = [Data(x=torch.ones(2, 1), adjacency=torch.eye(2).to_sparse()) for _ in range(2)]
    with pytest.raises(AssertionError, match="generic sparse cat"):
        Batch.from_data_list(plain)

    class Other(ComplexData):
        pass

    mixed = [complexes[0], Other(**dict(complexes[1].items()))]
    with pytest.raises(AssertionError, match="generic sparse cat"):
        Batch.from_data_list(mixed)
    with pytest.raises(AssertionError, match="generic sparse cat"):
        Batch.from_data_list([reference, reference])
    with pytest.raises(IndexError):
        Batch.from_data_list([])


def test_pyg_dataloader_keeps_every_batch_behaviour(monkeypatch):
    complexes = mixed_complexes()
    reference = generic(complexes)
    _refuse_generic_sparse_cat(monkeypatch)
    batch = next(iter(DataLoader(complexes, batch_size=len(complexes))))
    for key in ("incidence_2", "adjacency_0", "hodge_laplacian_1"):  # block-diagonal, coalesced, no zeros
        blocks = [c[key].to_dense() for c in complexes]
        assert batch[key].is_coalesced() and bool((batch[key].values() != 0).all()), key
        assert torch.equal(batch[key].to_dense(), torch.block_diag(*blocks)), key
    batch.validate_complex()
    for original, part in zip(complexes, batch.to_data_list()):
        assert_same(original, part)
    assert_same(batch[2], complexes[2])
    again = pickle.loads(pickle.dumps(batch))
    assert_identical_batches(reference, again)
    # a batch of batches still goes through PyG (its own rules for ``batch`` and ``ptr``)
    monkeypatch.undo()
    twice = Batch.from_data_list([reference, reference])
    assert twice.num_graphs == 2 and twice.shape.shape[0] == 2 * len(complexes)


def test_pyg_dataloader_with_two_workers_gives_the_generic_batches():
    complexes = mixed_complexes() * 2
    loader = DataLoader(complexes, batch_size=4, num_workers=2)
    batches = list(loader)
    assert len(batches) == 3
    for i, batch in enumerate(batches):
        assert_identical_batches(generic(complexes[4 * i : 4 * i + 4]), batch)
