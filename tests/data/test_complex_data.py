import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from tests.helpers import assert_same_complex, random_cell_complex
from topomodelx_attention.data import ComplexData, from_toponetx
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.data.neighborhoods import shared_face_counts


def lifted(seed, max_rank=2):
    cc = random_cell_complex(seed)
    rng = np.random.default_rng(seed)
    feats = {r: rng.normal(size=(n, 3)) for r, n in enumerate(cc.shape)}
    return from_toponetx(cc, features=feats, max_rank=max_rank, y=torch.tensor([seed]))


def tree(max_rank=2):
    data = from_toponetx(
        nx.balanced_tree(2, 2),
        features={0: np.arange(7.0)[:, None].repeat(3, 1), 1: np.ones((6, 3)), 2: np.zeros((0, 3))},
        max_rank=max_rank,
        y=torch.tensor([99]),
    )
    return data


def test_batch_is_block_diagonal_with_offsets_for_row_and_column_rank():
    complexes = [lifted(0), tree(), lifted(1)]
    batch = next(iter(DataLoader(complexes, batch_size=3)))
    assert isinstance(batch, ComplexData)
    batch.validate_complex()
    counts = torch.cat([c.shape for c in complexes])
    assert torch.equal(batch.shape, counts)
    for rank in range(3):
        expected = torch.cat([torch.full((int(c.shape[0, rank]),), i) for i, c in enumerate(complexes)])
        assert torch.equal(batch[f"batch_{rank}"], expected)
    for key in ("incidence_2", "signed_incidence_1", "adjacency_0", "hodge_laplacian_1", "coadjacency_2"):
        big = batch[key].to_dense()
        blocks = [c[key].to_dense() for c in complexes]
        assert torch.equal(big, torch.block_diag(*blocks)), key
    assert torch.equal(batch.y, torch.tensor([0, 99, 1]))
    assert batch.num_graphs == 3 and batch.num_nodes == int(counts[:, 0].sum())


def test_complexes_without_two_cells_batch_with_complexes_that_have_them():
    a, b = tree(), lifted(2)
    assert a.num_cells(2) == 0 and b.num_cells(2) > 0
    batch = Batch.from_data_list([a, b])
    assert batch.incidence_2.shape == (a.num_cells(1) + b.num_cells(1), b.num_cells(2))
    assert torch.equal(batch.batch_2, torch.ones(b.num_cells(2), dtype=torch.long))
    # the tree's edges have no 2-cell: their rows of B2 are empty
    rows = batch.incidence_2.coalesce().indices()[0]
    assert bool((rows >= a.num_cells(1)).all())


def test_batch_of_one_equals_the_complex_and_split_round_trips():
    single = lifted(3)
    batch = Batch.from_data_list([single])
    for key in single.keys():
        value = single[key]
        if isinstance(value, torch.Tensor):
            other = batch[key]
            if value.is_sparse:
                value, other = value.to_dense(), other.to_dense()
            assert torch.equal(value, other), key
    complexes = [lifted(4), tree(), lifted(5)]
    parts = Batch.from_data_list(complexes).to_complex_list()
    assert len(parts) == 3
    for original, part in zip(complexes, parts):
        assert_same_complex(original, part)


def test_no_dense_batch_sized_matrix_is_created():
    batch = Batch.from_data_list([lifted(s) for s in range(4)])
    for key in batch.keys():
        value = batch[key]
        if isinstance(value, torch.Tensor) and value.dim() == 2 and not value.is_sparse:
            assert value.size(0) != value.size(1) or value.size(0) < 8, key


def test_vertex_cells_and_counts():
    cc_data = from_toponetx(random_cell_complex(0))
    vc = cc_data.vertex_cells(2).to_dense()
    b1, b2 = (np.abs(m.toarray()) for m in cc_data.boundary_matrices())
    np.testing.assert_array_equal(vc.numpy(), (b1 @ b2) > 0)
    counts = shared_face_counts(cc_data.boundary_matrices()[1], upper=True)
    np.testing.assert_array_equal(counts.to_scipy().toarray(), cc_data.adjacency_1.to_dense().numpy())


def test_coo_algebra_matches_scipy():
    rng = np.random.default_rng(0)
    a = (rng.random((7, 5)) < 0.4) * rng.integers(-2, 3, (7, 5))
    b = (rng.random((5, 6)) < 0.4) * rng.integers(-2, 3, (5, 6))
    ca, cb = Coo.build(*np.nonzero(a), a[np.nonzero(a)], a.shape), Coo.build(*np.nonzero(b), b[np.nonzero(b)], b.shape)
    np.testing.assert_array_equal(ca.matmul(cb).to_scipy().toarray(), a @ b)
    assert not (ca.matmul(cb).vals == 0).any()
    np.testing.assert_array_equal(ca.T.matmul(ca).add(ca.T.matmul(ca)).to_scipy().toarray(), 2 * a.T @ a)


def test_validate_complex_catches_broken_data():
    data = lifted(0)
    data.validate_complex()
    bad = data.clone()
    idx = bad.incidence_1.indices()
    bad.incidence_1 = torch.sparse_coo_tensor(idx, torch.zeros(idx.size(1)), bad.incidence_1.shape).coalesce()
    with pytest.raises(ValueError, match="explicit zeros"):
        bad.validate_complex()
    bad = data.clone()
    bad.x_1 = bad.x_1[:-1]
    with pytest.raises(ValueError, match="rows"):
        bad.validate_complex()
    bad = data.clone()
    b2 = bad.signed_incidence_2.coalesce()
    bad.signed_incidence_2 = torch.sparse_coo_tensor(b2.indices(), b2.values().abs(), b2.shape).coalesce()
    with pytest.raises(ValueError, match="orientation"):
        bad.validate_complex()


def test_from_boundaries_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="B_1"):
        ComplexData.from_boundaries([Coo.build([], [], [], (3, 2))], [2, 2])
    with pytest.raises(ValueError, match="boundary matrices"):
        ComplexData.from_boundaries([], [2, 2])
    with pytest.raises(TypeError, match="boolean"):
        ComplexData.from_boundaries([], [2], {0: torch.ones(2, 1, dtype=torch.bool)})


def test_from_boundaries_counts_complexes_without_cells():
    # regression (fuzz): num_complexes was max(batch_r) + 1, losing trailing empty complexes
    b1 = Coo.build([0, 1], [0, 0], [-1.0, 1.0], (2, 1))
    batch = [torch.tensor([1, 1]), torch.tensor([1])]  # complexes 0 and 2 have no cell
    data = ComplexData.from_boundaries([b1], [2, 1], batch=batch, num_complexes=3)
    assert data.shape.tolist() == [[0, 0], [2, 1], [0, 0]]
    assert [c.shape.tolist() for c in data.to_complex_list()] == [[[0, 0]], [[2, 1]], [[0, 0]]]
    assert ComplexData.from_boundaries([b1], [2, 1], batch=batch).shape.tolist() == [[0, 0], [2, 1]]
    empty = ComplexData.from_boundaries([Coo.build([], [], [], (0, 0))], [0, 0], batch=[torch.zeros(0, dtype=torch.long)] * 2, num_complexes=2)
    assert empty.num_complexes == 2 and empty.shape.tolist() == [[0, 0], [0, 0]]
    with pytest.raises(ValueError, match="num_complexes=1, but batch refers to complex 1"):
        ComplexData.from_boundaries([b1], [2, 1], batch=batch, num_complexes=1)
    with pytest.raises(ValueError, match="negative"):
        ComplexData.from_boundaries([b1], [2, 1], batch=[torch.tensor([-1, 0]), torch.tensor([0])])


def test_key_access_reads_the_one_store_like_pyg():
    from torch_geometric.data import Data

    data = from_toponetx(random_cell_complex(5), max_rank=2, y=torch.tensor([1]))
    batch = Batch.from_data_list([data, data])
    for item in (data, batch):
        assert sorted(item.keys()) == sorted(Data.keys(item))  # PyG's generic answer
        assert item.keys()[0] == "shape"  # insertion order: shape first
        for key in ("incidence_1", "shape", "y", "batch_2", "nothing", "x_9"):
            assert (key in item) == Data.__contains__(item, key)
    assert batch.neighborhood("adjacency", 1) is batch.adjacency_1
    del data["adjacency_1"]
    assert "adjacency_1" not in data and "adjacency_1" not in data.keys()
    with pytest.raises(ValueError, match=r"no 'adjacency_1'.*neighborhoods including 'adjacency'"):
        data.neighborhood("adjacency", 1)
    with pytest.raises(ValueError, match="unknown"):
        data.neighborhood("laplacian", 1)
    assert data.num_cells(7) == 0 and data.num_complexes == 1 and batch.num_complexes == 2
