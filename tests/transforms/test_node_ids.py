import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data

from tests.helpers import graph_from_edges, random_cell_complex
from topomodelx_attention.data import from_toponetx
from topomodelx_attention.transforms import (
    CellCycleLifting,
    LaplacianNodeId,
    OrthogonalRandomNodeId,
    RandomSignFlip,
)
from topomodelx_attention.transforms.node_ids import graph_adjacency
from topomodelx_attention.transforms.pe_utils import normalized_laplacian

NODE_IDS = [LaplacianNodeId, OrthogonalRandomNodeId]


def ids(data):
    return data.node_id.double().numpy()


def random_graph(n, p, seed):
    rng = np.random.default_rng(seed)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return graph_from_edges(edges, num_nodes=n)


@pytest.mark.parametrize("cls", NODE_IDS)
def test_rows_orthonormal_when_n_at_most_dim(cls, square_with_diagonal):
    out = cls(8)(square_with_diagonal)
    assert out.node_id.shape == (4, 8) and out.node_id.dtype == torch.float32
    np.testing.assert_allclose(ids(out) @ ids(out).T, np.eye(4), atol=1e-6)


@pytest.mark.parametrize("cls", NODE_IDS)
def test_isolated_nodes_no_nan(cls):
    graph = graph_from_edges([(0, 1), (1, 2)], num_nodes=5)  # nodes 3 and 4 isolated
    out = cls(6)(graph)
    assert torch.isfinite(out.node_id).all()
    np.testing.assert_allclose(ids(out) @ ids(out).T, np.eye(5), atol=1e-6)
    empty = cls(3)(Data(num_nodes=2, edge_index=torch.zeros((2, 0), dtype=torch.long)))
    np.testing.assert_allclose(ids(empty) @ ids(empty).T, np.eye(2), atol=1e-6)


@pytest.mark.parametrize("cls", NODE_IDS)
def test_complex_uses_its_one_skeleton(cls):
    graph = random_graph(9, 0.35, seed=2)
    complex_ = CellCycleLifting()(graph)  # the lifting keeps the vertex order
    torch.testing.assert_close(cls(12)(complex_).node_id, cls(12)(graph).node_id)
    tnx_complex = from_toponetx(random_cell_complex(0))
    assert cls(4)(tnx_complex).node_id.shape == (tnx_complex.num_cells(0), 4)


@pytest.mark.parametrize("cls", NODE_IDS)
def test_bad_input(cls, triangle):
    with pytest.raises(ValueError, match="dim"):
        cls(0)
    with pytest.raises(TypeError, match="Data"):
        cls(3)(torch.zeros(3, 3))
    batch = Batch.from_data_list([triangle, triangle])
    with pytest.raises(ValueError, match="batch"):
        cls(3)(batch)
    assert "dim=3" in repr(cls(3))


def test_laplacian_ids_are_normalized_laplacian_eigenvectors():
    graph = random_graph(7, 0.5, seed=1)
    out = LaplacianNodeId(10)(graph)
    laplacian = normalized_laplacian(graph_adjacency(graph).to_scipy()).toarray()
    values = np.linalg.eigvalsh(laplacian)
    vectors = ids(out)[:, :7]
    np.testing.assert_allclose(laplacian @ vectors, vectors * values, atol=1e-5)
    np.testing.assert_array_equal(ids(out)[:, 7:], 0)  # zero-padded when n < dim


def test_laplacian_ids_large_graph_selection():
    graph = random_graph(12, 0.4, seed=3)
    laplacian = normalized_laplacian(graph_adjacency(graph).to_scipy()).toarray()
    values = np.linalg.eigvalsh(laplacian)
    low = ids(LaplacianNodeId(4)(graph))
    np.testing.assert_allclose(laplacian @ low, low * values[:4], atol=1e-5)
    both = ids(LaplacianNodeId(4, select="smallest_largest")(graph))
    np.testing.assert_allclose(laplacian @ both, both * values[[0, 1, -2, -1]], atol=1e-5)
    sparse = ids(
        LaplacianNodeId(4, select="smallest_largest", dense_threshold=0, eigh_threshold=0)(graph)
    )
    for j in range(4):
        assert (
            min(np.abs(sparse[:, j] - both[:, j]).max(), np.abs(sparse[:, j] + both[:, j]).max())
            < 1e-5
        )
    with pytest.raises(ValueError, match="select"):
        LaplacianNodeId(4, select="largest")


@pytest.mark.parametrize("seed", [1, 2, 6])
def test_laplacian_ids_equivariant_up_to_sign(seed):
    graph = random_graph(8, 0.45, seed=seed)
    perm = np.random.default_rng(0).permutation(8)
    inverse = np.argsort(perm)
    relabelled = Data(edge_index=torch.from_numpy(inverse)[graph.edge_index], num_nodes=8)
    laplacian = normalized_laplacian(graph_adjacency(graph).to_scipy()).toarray()
    assert np.diff(np.linalg.eigvalsh(laplacian)).min() > 1e-6  # simple spectrum
    a, b = ids(LaplacianNodeId(8)(graph)), ids(LaplacianNodeId(8)(relabelled))
    for j in range(8):
        assert min(np.abs(a[perm, j] - b[:, j]).max(), np.abs(a[perm, j] + b[:, j]).max()) < 1e-5


def test_orf_deterministic_per_seed_and_graph():
    graph = random_graph(9, 0.4, seed=0)
    first, second = OrthogonalRandomNodeId(16)(graph), OrthogonalRandomNodeId(16)(graph)
    torch.testing.assert_close(first.node_id, second.node_id, rtol=0, atol=0)
    other_seed = OrthogonalRandomNodeId(16, seed=1)(graph)
    assert not torch.allclose(first.node_id, other_seed.node_id)
    other_graph = OrthogonalRandomNodeId(16)(random_graph(9, 0.4, seed=1))
    assert not torch.allclose(first.node_id, other_graph.node_id)


def test_orf_resample_draws_fresh_ids():
    graph = random_graph(6, 0.5, seed=0)
    torch.manual_seed(0)
    transform = OrthogonalRandomNodeId(8, resample=True)
    first, second = transform(graph), transform(graph)
    assert not torch.allclose(first.node_id, second.node_id)
    np.testing.assert_allclose(ids(second) @ ids(second).T, np.eye(6), atol=1e-6)
    torch.manual_seed(0)
    torch.testing.assert_close(transform(graph).node_id, first.node_id)  # follows torch's RNG
    draws = [transform(graph).node_id for _ in range(5)]  # a new draw at every call
    for i in range(5):
        for j in range(i):
            assert (draws[i] - draws[j]).abs().max() > 1e-3


def test_orf_more_nodes_than_dim_is_nearly_orthonormal():
    graph = random_graph(40, 0.1, seed=0)
    out = ids(OrthogonalRandomNodeId(16)(graph))
    assert out.shape == (40, 16)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    for start in (0, 16):  # each block of dim rows is exactly orthonormal
        block = out[start : start + 16]
        np.testing.assert_allclose(block @ block.T, np.eye(16), atol=1e-6)
    gram = np.abs(out @ out.T - np.eye(40))
    assert gram.max() < 0.9  # near-orthogonal across blocks, never parallel
    with pytest.raises(ValueError, match="seed"):
        OrthogonalRandomNodeId(4, seed=-1)


def test_sign_flip_on_laplacian_node_ids_of_graph_batch():
    graphs = [LaplacianNodeId(4)(random_graph(5, 0.6, seed=s)) for s in range(3)]
    batch = Batch.from_data_list(graphs)
    flipped = RandomSignFlip(keys=["node_id"], generator=torch.Generator().manual_seed(1))(batch)
    for i in range(3):
        mask = batch.batch == i
        old, new = batch.node_id[mask], flipped.node_id[mask]
        sign = (old * new).sum(0).sign()
        torch.testing.assert_close(new, old * sign)


def test_batched_orthogonal_random_ids_are_orthonormal_per_complex():
    from topomodelx_attention.transforms.node_ids import batched_orthogonal_random_ids

    batch = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])
    ids = batched_orthogonal_random_ids(batch, 4, dim=5, generator=torch.Generator().manual_seed(0))
    assert ids.shape == (10, 5)
    for c in range(3):
        block = ids[batch == c]
        assert torch.allclose(block @ block.T, torch.eye(block.shape[0]), atol=1e-5)
    again = batched_orthogonal_random_ids(batch, 4, dim=5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ids, again)
    other = batched_orthogonal_random_ids(batch, 4, dim=5, generator=torch.Generator().manual_seed(1))
    assert not torch.allclose(ids, other)
    # more nodes than dim: stacked blocks, every row still unit norm
    big = batched_orthogonal_random_ids(torch.zeros(7, dtype=torch.long), 1, dim=3)
    assert torch.allclose(big.norm(dim=1), torch.ones(7), atol=1e-5)
    with pytest.raises(ValueError, match="dim"):
        batched_orthogonal_random_ids(batch, 3, dim=0)
