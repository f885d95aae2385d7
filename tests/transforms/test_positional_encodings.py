import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import toponetx as tnx
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from tests.helpers import graph_from_edges, random_cell_complex, random_simplicial_complex
from topomodelx_attention.data import ComplexData, from_toponetx
from topomodelx_attention.transforms import (
    BarycentricRandomWalkPE,
    BarycentricSubdivisionPE,
    CellCycleLifting,
    CellularRandomWalkPE,
    HodgeLaplacianPE,
    LaplacianNodeId,
    RandomSignFlip,
    SimplicialCliqueLifting,
    TopologicalSlepiansPE,
    ZeroPE,
    barycentric_graph,
    barycentric_random_walk,
    cellular_random_walk,
    topological_slepians,
)
from topomodelx_attention.transforms.pe_utils import (
    boundary_coos,
    canonical_signs,
    normalized_laplacian,
    pad_columns,
)
from topomodelx_attention.transforms.positional_encodings import hodge_laplacians
from topomodelx_attention.transforms.slepians import LOWER, UPPER

ALL_PES = [
    ZeroPE,
    BarycentricSubdivisionPE,
    BarycentricRandomWalkPE,
    CellularRandomWalkPE,
    HodgeLaplacianPE,
    TopologicalSlepiansPE,
]
EIGEN_PES = [BarycentricSubdivisionPE, HodgeLaplacianPE]
WALK_PES = [BarycentricRandomWalkPE, CellularRandomWalkPE]


def pe(data, rank):
    return data[f"pe_{rank}"].double().numpy()


def two_cells_complex() -> ComplexData:
    """Square 0-1-2-3 and triangle 1-4-2 sharing the edge (1, 2) (cf. Figure 5)."""
    cc = tnx.CellComplex()
    cc.add_cell([0, 1, 2, 3], rank=2)
    cc.add_cell([1, 4, 2], rank=2)
    return from_toponetx(cc)


def disconnected_complex() -> ComplexData:
    """A filled triangle, a separate edge and an isolated vertex (3 components)."""
    graph = graph_from_edges([(0, 1), (1, 2), (2, 0), (3, 4)], num_nodes=6)
    return CellCycleLifting()(graph)


def permuted(data: ComplexData, seed: int):
    """The same complex with the cells of every rank relabelled; returns it and the perms."""
    rng = np.random.default_rng(seed)
    counts = data.cell_counts()
    perms = [rng.permutation(n) for n in counts]
    boundaries = []
    for rank, b in enumerate(data.boundary_matrices(signed=True), start=1):
        boundaries.append(sp.csr_matrix(b.toarray()[perms[rank - 1]][:, perms[rank]]))
    return ComplexData.from_boundaries(boundaries, counts), perms


def assert_columns_equal_up_to_sign(a, b, atol=1e-5):
    assert a.shape == b.shape
    for j in range(a.shape[1]):
        if np.allclose(a[:, j], b[:, j], atol=atol):
            continue
        np.testing.assert_allclose(a[:, j], -b[:, j], atol=atol)


# ----------------------------------------------------------------------------- shapes & input


@pytest.mark.parametrize("cls", ALL_PES)
def test_shapes_dtype_and_empty_rank(cls, path_graph):
    data = CellCycleLifting()(path_graph)  # no cycle: rank 2 is empty
    out = cls(5)(data)
    for rank, n in enumerate(data.cell_counts()):
        assert out[f"pe_{rank}"].shape == (n, 5)
        assert out[f"pe_{rank}"].dtype == torch.float32
        assert torch.isfinite(out[f"pe_{rank}"]).all()
    assert out.pe_2.shape == (0, 5)


@pytest.mark.parametrize("cls", ALL_PES)
def test_empty_top_rank_of_simplicial_complex(cls, triangle):
    data = SimplicialCliqueLifting(complex_dim=3)(triangle)
    out = cls(4)(data)
    assert out.pe_3.shape == (0, 4)
    assert out.pe_2.shape == (1, 4)


@pytest.mark.parametrize("cls", ALL_PES)
def test_bad_input(cls, triangle):
    with pytest.raises(ValueError, match="dim"):
        cls(0)
    with pytest.raises(TypeError, match="dim"):
        cls(2.5)
    with pytest.raises(TypeError, match="ComplexData"):
        cls(3)(triangle)  # a graph, not a complex
    batch = next(iter(DataLoader([CellCycleLifting()(triangle)] * 2, batch_size=2)))
    with pytest.raises(ValueError, match="batch"):
        cls(3)(batch)


def test_unsigned_incidences_suffice_for_every_encoding(square_with_diagonal):
    data = CellCycleLifting(neighborhoods=["incidence"])(square_with_diagonal)
    full = CellCycleLifting()(square_with_diagonal)
    for cls in (BarycentricSubdivisionPE, *WALK_PES):
        torch.testing.assert_close(cls(4)(data).pe_1, cls(4)(full).pe_1)
    # the orientation recovered from |B_1|, |B_2| is CellCycleLifting's own
    for cls in (HodgeLaplacianPE, TopologicalSlepiansPE):
        for rank in range(3):
            torch.testing.assert_close(cls(4)(data)[f"pe_{rank}"], cls(4)(full)[f"pe_{rank}"])


@pytest.mark.parametrize("cls", ALL_PES)
def test_repr_shows_parameters(cls):
    assert "dim=7" in repr(cls(7))


def test_encodings_survive_batching(triangle, path_graph):
    complexes = [BarycentricSubdivisionPE(3)(CellCycleLifting()(g)) for g in (triangle, path_graph)]
    batch = next(iter(DataLoader(complexes, batch_size=2)))
    assert batch.pe_1.shape == (3 + 3, 3)
    for original, split in zip(complexes, batch.to_complex_list()):
        torch.testing.assert_close(original.pe_1, split.pe_1)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 9),
    edges=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=16),
    dim=st.integers(1, 6),
)
def test_random_graphs_finite_shapes_and_stochastic_walks(n, edges, dim):
    edges = sorted({(min(u, v), max(u, v)) for u, v in edges if u != v and max(u, v) < n})
    data = CellCycleLifting()(
        graph_from_edges(edges, num_nodes=n)
        if edges
        else Data(edge_index=torch.zeros((2, 0), dtype=torch.long), num_nodes=n)
    )
    for cls in ALL_PES:
        out = cls(dim)(data)
        for rank, count in enumerate(data.cell_counts()):
            assert out[f"pe_{rank}"].shape == (count, dim)
            assert torch.isfinite(out[f"pe_{rank}"]).all()
    transition, _ = barycentric_random_walk(data)
    np.testing.assert_allclose(transition.sum(0), 1.0)
    for rank in range(data.max_rank + 1):
        np.testing.assert_allclose(cellular_random_walk(data, rank).sum(0), 1.0)


# ----------------------------------------------------------------------------- helpers


def test_pad_columns_pads_and_truncates():
    a = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(pad_columns(a, 4)[:, 2:], 0)
    np.testing.assert_array_equal(pad_columns(a, 1), a[:, :1])


def test_canonical_signs_is_permutation_invariant_and_idempotent():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((7, 3))
    fixed = canonical_signs(vectors)
    assert ((fixed**3).sum(0) > 0).all()
    np.testing.assert_array_equal(canonical_signs(-vectors), fixed)
    perm = rng.permutation(7)
    np.testing.assert_allclose(canonical_signs(vectors[perm]), fixed[perm])


def test_eigsh_path_matches_dense_path():
    data = from_toponetx(random_cell_complex(4, n=30, p=0.12))
    dense = BarycentricSubdivisionPE(4)(data)
    sparse = BarycentricSubdivisionPE(4, dense_threshold=8, eigh_threshold=8)(data)
    for rank in range(3):
        assert_columns_equal_up_to_sign(pe(dense, rank), pe(sparse, rank))
    dense = HodgeLaplacianPE(3)(data)
    sparse = HodgeLaplacianPE(3, eigh_threshold=8)(data)
    for rank in range(3):
        assert_columns_equal_up_to_sign(pe(dense, rank), pe(sparse, rank))


def test_sparse_walks_match_dense_walks():
    data = from_toponetx(random_cell_complex(1))
    for cls in WALK_PES:
        np.testing.assert_allclose(
            pe(cls(6)(data), 1), pe(cls(6, dense_threshold=0)(data), 1), atol=1e-6
        )


def test_smallest_eigenpairs_never_uses_general_eig(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("np.linalg.eig called on a symmetric matrix")

    monkeypatch.setattr(np.linalg, "eig", forbidden)
    data = from_toponetx(random_cell_complex(1))
    for cls in (*EIGEN_PES, TopologicalSlepiansPE):
        cls(4)(data)


# ----------------------------------------------------------------------------- paper examples


def test_example_b1_triangle_graph_hodge_spectrum():
    """Example B.1: on the (unfilled) triangle graph, L_1 has eigenvalues 0 and 3."""
    data = from_toponetx(nx.cycle_graph(3))
    laplacians = hodge_laplacians(boundary_coos(data, signed=True), data.cell_counts())
    np.testing.assert_allclose(np.linalg.eigvalsh(laplacians[1]), [0.0, 3.0, 3.0], atol=1e-12)
    # the paper's eigenvector (1, 0, 1)/sqrt(2) of eigenvalue 3, for our orientation of the
    # edges (0,1), (0,2), (1,2) (each from its smaller vertex): the third sign flips
    x = np.array([1.0, 0.0, -1.0]) / np.sqrt(2)
    np.testing.assert_allclose(laplacians[1] @ x, 3 * x, atol=1e-12)
    # Example B.2: the harmonic edge vector has equal magnitudes 1/sqrt(3), signs by orientation
    harmonic = pe(HodgeLaplacianPE(3, include_harmonic=True)(data), 1)[:, 0]
    np.testing.assert_allclose(np.abs(harmonic), 1 / np.sqrt(3), atol=1e-6)
    b1 = data.boundary_matrices()[0].toarray()
    np.testing.assert_allclose(b1 @ harmonic, 0, atol=1e-6)


def test_hodge_kernel_handling_follows_betti_numbers():
    # unfilled triangle: beta_1 = 1 -> one harmonic column dropped, two eigenvalue-3 ones left
    data = from_toponetx(nx.cycle_graph(3))
    default = pe(HodgeLaplacianPE(3)(data), 1)
    assert np.abs(default[:, :2]).sum(0).min() > 0.5 and np.allclose(default[:, 2], 0)
    # filled triangle: beta_1 = 0 -> nothing dropped on edges (the first column is NOT harmonic)
    filled = CellCycleLifting()(graph_from_edges([(0, 1), (1, 2), (2, 0)]))
    columns = pe(HodgeLaplacianPE(3)(filled), 1)
    assert np.abs(columns).sum(0).min() > 0.5
    # eigenvalue 3 has multiplicity 3 (two down, one up): compare the spanned spaces
    literal = pe(HodgeLaplacianPE(3, include_harmonic=True)(filled), 1)
    np.testing.assert_allclose(literal @ literal.T, columns @ columns.T, atol=1e-6)
    # rank 0: the constant vector (beta_0 = 1) is the dropped one
    vertices = pe(HodgeLaplacianPE(2)(filled), 0)
    np.testing.assert_allclose(vertices.sum(0), 0, atol=1e-6)


def test_figure5_transitions_from_one_edge():
    data = two_cells_complex()
    # edges: (0,1) (0,3) (1,2) (1,4) (2,3) (2,4); 2-cells: square, triangle
    walk = cellular_random_walk(data, 1)
    # RWPe: upper neighbours (0,3),(1,2),(2,3) via the square, lower (0,3),(1,2),(1,4) via vertices
    np.testing.assert_allclose(walk[:, 0], [0, 1 / 3, 1 / 3, 1 / 6, 1 / 6, 0])
    transition, offsets = barycentric_random_walk(data)
    # RWBSPe: from the edge to its two vertices and to the square
    targets = np.nonzero(transition[:, offsets[1] + 0])[0]
    np.testing.assert_array_equal(targets, [0, 1, offsets[2] + 0])
    np.testing.assert_allclose(transition[targets, offsets[1]], 1 / 3)


def test_barycentric_graph_joins_all_comparable_cells():
    filled = CellCycleLifting()(graph_from_edges([(0, 1), (1, 2), (2, 0)]))
    adjacency, offsets = barycentric_graph(filled)
    assert offsets.tolist() == [0, 3, 6, 7]
    np.testing.assert_array_equal(adjacency, adjacency.T)
    assert adjacency.sum() == 2 * (6 + 3 + 3)  # vertex-edge, edge-face, vertex-face
    np.testing.assert_array_equal(adjacency.sum(0), [3, 3, 3, 3, 3, 3, 6])


# ----------------------------------------------------------------------------- random walks


@pytest.mark.parametrize("seed", [0, 3])
def test_random_walk_matrices_are_stochastic(seed):
    for data in (
        from_toponetx(random_cell_complex(seed)),
        from_toponetx(random_simplicial_complex(seed)),
    ):
        transition, _ = barycentric_random_walk(data)
        assert (transition >= 0).all()
        np.testing.assert_allclose(transition.sum(0), 1.0)
        for rank in range(data.max_rank + 1):
            walk = cellular_random_walk(data, rank)
            assert (walk >= 0).all()
            np.testing.assert_allclose(walk.sum(0), 1.0)
            sparse = cellular_random_walk(data, rank, dense_threshold=0)
            np.testing.assert_allclose(sparse.toarray(), walk)


@pytest.mark.parametrize("threshold", [512, 0])
def test_barycentric_walk_pe_is_return_probability(threshold):
    data = disconnected_complex()  # with an isolated vertex (self-loop)
    transition, _offsets = barycentric_random_walk(data)
    out = BarycentricRandomWalkPE(5, dense_threshold=threshold)(data)
    expected = np.stack(
        [np.diag(np.linalg.matrix_power(transition, t)) for t in range(1, 6)], axis=1
    )
    stacked = np.concatenate([pe(out, r) for r in range(3)])
    np.testing.assert_allclose(stacked, expected, atol=1e-6)


def test_random_walk_pe_is_return_probability():
    data = two_cells_complex()
    walk = cellular_random_walk(data, 1)
    out = CellularRandomWalkPE(4)(data)
    expected = np.stack([np.diag(np.linalg.matrix_power(walk, t)) for t in range(1, 5)], axis=1)
    np.testing.assert_allclose(pe(out, 1), expected, atol=1e-6)
    assert np.allclose(pe(out, 1)[:, 0], 0)  # no lazy steps: cannot return after one step


# ----------------------------------------------------------------------------- equivariance


@pytest.mark.parametrize("seed", [1, 4, 9])
@pytest.mark.parametrize("cls", WALK_PES)
def test_random_walk_pes_are_permutation_equivariant(seed, cls):
    data = from_toponetx(random_cell_complex(seed))
    other, perms = permuted(data, seed)
    a, b = cls(6)(data), cls(6)(other)
    for rank, perm in enumerate(perms):
        np.testing.assert_allclose(pe(a, rank)[perm], pe(b, rank), atol=1e-6)


@pytest.mark.parametrize("seed", [1, 4, 9])
@pytest.mark.parametrize("cls", EIGEN_PES)
def test_eigenvector_pes_are_equivariant_up_to_sign(seed, cls):
    """Complexes with simple spectra (seeds chosen for it): equal up to column signs."""
    data = from_toponetx(random_cell_complex(seed))
    other, perms = permuted(data, seed + 100)
    a, b = cls(4)(data), cls(4)(other)
    for rank, perm in enumerate(perms):
        assert_columns_equal_up_to_sign(pe(a, rank)[perm], pe(b, rank))


def test_bspe_vectors_are_smallest_nontrivial_eigenvectors():
    data = from_toponetx(random_cell_complex(1))
    adjacency, _offsets = barycentric_graph(data)
    laplacian = normalized_laplacian(adjacency)
    values = np.linalg.eigvalsh(laplacian)
    kernel = int((values < 1e-8).sum())
    assert kernel == 2  # the complex and its isolated vertex
    out = BarycentricSubdivisionPE(3)(data)
    stacked = np.concatenate([pe(out, r) for r in range(3)])
    np.testing.assert_allclose(stacked.T @ stacked, np.eye(3), atol=1e-5)
    np.testing.assert_allclose(
        laplacian @ stacked, stacked * values[kernel : kernel + 3], atol=1e-5
    )


# ----------------------------------------------------------------------------- padding, components


def test_padding_when_fewer_columns_than_dim(triangle):
    data = CellCycleLifting()(triangle)  # 3 + 3 + 1 cells
    bspe = BarycentricSubdivisionPE(10)(data)
    stacked = np.concatenate([pe(bspe, r) for r in range(3)])
    assert np.abs(stacked[:, :6]).sum(0).min() > 0  # 7 cells, 1 component -> 6 columns
    np.testing.assert_array_equal(stacked[:, 6:], 0)
    hodge = HodgeLaplacianPE(5)(data)
    np.testing.assert_array_equal(pe(hodge, 2)[:, 1:], 0)  # one 2-cell, one eigenvector
    # every edge has the same lower set (all 3 edges) and the same upper set: per set, one
    # Slepian per family; globally, all of the 1-dim upper and the 2-dim lower band
    assert topological_slepians(data, 1).vectors.shape[1] == 2
    available = topological_slepians(data, 1, selection="global").vectors.shape[1]
    assert available == 3
    slepians = TopologicalSlepiansPE(30, selection="global")(data)
    assert np.abs(pe(slepians, 1)[:, :available]).sum(0).min() > 0
    np.testing.assert_array_equal(pe(slepians, 1)[:, available:], 0)


def test_disconnected_complex():
    data = disconnected_complex()
    assert data.cell_counts() == [6, 4, 1]
    adjacency, _offsets = barycentric_graph(data)
    values = np.linalg.eigvalsh(normalized_laplacian(adjacency))
    assert int((values < 1e-8).sum()) == 3  # one kernel vector per component, all dropped
    out = BarycentricSubdivisionPE(6)(data)
    stacked = np.concatenate([pe(out, r) for r in range(3)])
    np.testing.assert_allclose(stacked.T @ stacked, np.eye(6), atol=1e-5)
    np.testing.assert_array_equal(pe(out, 0)[5], 0)  # the isolated vertex
    walks = BarycentricRandomWalkPE(4)(data)
    np.testing.assert_allclose(pe(walks, 0)[5], 1.0)  # stays put
    cellular = CellularRandomWalkPE(4)(data)
    np.testing.assert_allclose(pe(cellular, 0)[5], 1.0)
    for cls in ALL_PES:
        out = cls(6)(data)
        assert all(torch.isfinite(out[f"pe_{r}"]).all() for r in range(3))


# ----------------------------------------------------------------------------- Slepians


def test_slepians_are_band_limited_and_concentrated():
    data = two_cells_complex()
    b1, b2 = (m.toarray() for m in data.boundary_matrices())
    projectors = {
        UPPER: b2 @ np.linalg.pinv(b2),  # onto im B_2 (upper frequencies of edges)
        LOWER: b1.T @ np.linalg.pinv(b1.T),  # onto im B_1^T (lower frequencies)
    }
    upper_sets = (np.abs(b2) @ np.abs(b2).T) > 0
    lower_sets = (np.abs(b1).T @ np.abs(b1)) > 0
    result = topological_slepians(data, 1)
    assert result.vectors.shape[1] == result.concentration.size > 0
    assert (np.diff(np.round(result.concentration, 8)) <= 0).all()
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=0), 1.0)
    for j in range(result.vectors.shape[1]):
        s, family, center = result.vectors[:, j], result.family[j], result.center[j]
        np.testing.assert_allclose(projectors[family] @ s, s, atol=1e-8)
        cells = (upper_sets if family == UPPER else lower_sets)[center]
        np.testing.assert_allclose((s[cells] ** 2).sum(), result.concentration[j], atol=1e-8)
    gram = np.abs(result.vectors.T @ result.vectors)
    assert (gram[np.triu_indices_from(gram, 1)] < 1 - 1e-6).all()  # no duplicates


def test_slepian_pe_takes_the_top_slepians():
    data = two_cells_complex()
    out = TopologicalSlepiansPE(5)(data)
    for rank in range(3):
        top = topological_slepians(data, rank, limit=5).vectors
        np.testing.assert_allclose(pe(out, rank), pad_columns(top, 5), atol=1e-6)
    # rank 0 has only upper sets, the top rank only lower ones
    assert set(topological_slepians(data, 0).family.tolist()) == {UPPER}
    assert set(topological_slepians(data, 2).family.tolist()) == {LOWER}


def test_slepians_deterministic():
    data = from_toponetx(random_cell_complex(3))
    first, second = TopologicalSlepiansPE(6)(data), TopologicalSlepiansPE(6)(data)
    for rank in range(3):
        torch.testing.assert_close(first[f"pe_{rank}"], second[f"pe_{rank}"], rtol=0, atol=0)


# ----------------------------------------------------------------------------- RandomSignFlip


def test_random_sign_flip_flips_whole_columns_per_complex():
    graphs = [
        graph_from_edges(e)
        for e in (
            [(0, 1), (1, 2), (2, 0), (2, 3)],
            [(0, 1), (1, 2), (2, 3), (3, 0)],
            [(0, 1), (1, 2)],
        )
    ]
    complexes = [BarycentricSubdivisionPE(4)(CellCycleLifting()(g)) for g in graphs]
    complexes = [LaplacianNodeId(4)(c) for c in complexes]
    batch = next(iter(DataLoader(complexes, batch_size=3)))
    generator = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(20):
        flipped = RandomSignFlip(generator=generator)(batch)
        for i in range(3):
            signs = []
            for key, batch_key in [("pe_0", "batch_0"), ("pe_1", "batch_1"), ("pe_2", "batch_2")]:
                mask = batch[batch_key] == i
                old, new = batch[key][mask], flipped[key][mask]
                if old.numel() == 0:
                    continue
                column_sign = torch.where(old.abs().sum(0) > 0, (new * old).sum(0).sign(), 0)
                # every cell of the column has the same sign: whole columns flip
                torch.testing.assert_close(new, old * column_sign.where(column_sign != 0, 1.0))
                signs.append(column_sign)
            # BSPe is global: one sign per (complex, column) shared by all ranks
            nonzero = [s for s in signs]
            for s in nonzero[1:]:
                both = (s != 0) & (nonzero[0] != 0)
                assert (s[both] == nonzero[0][both]).all()
            seen.update(nonzero[0].tolist())
        mask = batch.batch_0 == 0
        ratio = flipped.node_id[mask] / batch.node_id[mask]
        finite = torch.isfinite(ratio)
        assert ((ratio[finite].abs() - 1).abs() < 1e-6).all()
    assert {-1.0, 1.0} <= seen
    assert batch.pe_0.abs().sum() > 0  # input untouched


def test_random_sign_flip_p_and_keys():
    data = HodgeLaplacianPE(3)(from_toponetx(random_cell_complex(1)))
    unchanged = RandomSignFlip(p=0.0)(data)
    torch.testing.assert_close(unchanged.pe_1, data.pe_1)
    flipped = RandomSignFlip(p=1.0)(data)
    torch.testing.assert_close(flipped.pe_1, -data.pe_1)
    only = RandomSignFlip(keys=["pe"], p=1.0)(data)
    torch.testing.assert_close(only.pe_0, -data.pe_0)
    with pytest.raises(ValueError, match="node_id"):
        RandomSignFlip(keys=["node_id"])(data)
    with pytest.raises(ValueError, match="no pe_r"):
        RandomSignFlip()(Data(x=torch.zeros(2, 1)))
    with pytest.raises(TypeError, match="list"):
        RandomSignFlip(keys="pe")
    with pytest.raises(ValueError, match="probability"):
        RandomSignFlip(p=2.0)
    assert "p=0.5" in repr(RandomSignFlip())
