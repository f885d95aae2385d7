"""Large complexes (solver paths), TopoBench-keyed input, Slepian selection, per-rank sign
flips and the 2-cell feature conventions."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.linalg as spla
import toponetx as tnx
import torch
from torch_geometric.data import Data

from tests.helpers import graph_from_edges, random_cell_complex
from topomodelx_attention.data import ComplexData, from_toponetx
from topomodelx_attention.transforms import (
    BarycentricRandomWalkPE,
    BarycentricSubdivisionPE,
    CellCycleLifting,
    CellularRandomWalkPE,
    FeatureLifting,
    HodgeLaplacianPE,
    RandomSignFlip,
    TopologicalSlepiansPE,
    pe_utils,
    topological_slepians,
)
from topomodelx_attention.transforms.pe_utils import boundary_coos, smallest_eigenpairs
from topomodelx_attention.transforms.positional_encodings import hodge_laplacians


def pe(data, rank):
    return data[f"pe_{rank}"].double().numpy()


def dense_complex(seed=0, n=12, m=30) -> ComplexData:
    graph = nx.gnm_random_graph(n, m, seed=seed)
    data = graph_from_edges(list(graph.edges()), num_nodes=n)
    return CellCycleLifting(cycles="chordless", max_cell_length=6)(data)


def two_cells_complex() -> ComplexData:
    cc = tnx.CellComplex()
    cc.add_cell([0, 1, 2, 3], rank=2)
    cc.add_cell([1, 4, 2], rank=2)
    return from_toponetx(cc)


def same_span(a, b, atol=1e-6):
    np.testing.assert_allclose(a @ a.T, b @ b.T, atol=atol)


# ----------------------------------------------------------------------------- item 1: solvers


def test_iterative_path_agrees_with_dense_on_a_mid_size_complex():
    data = dense_complex()
    counts = data.cell_counts()
    assert counts[2] - (counts[1] - counts[0] + 1) > 16  # dim ker L_2 > 16: a large kernel
    dense = HodgeLaplacianPE(4)(data.clone())  # one dense eigh of each L_r
    iterative = HodgeLaplacianPE(4, eigh_threshold=0)(data.clone())  # eigsh on L_r
    gram = HodgeLaplacianPE(4, dense_threshold=0)(data.clone())  # the Gram path, dense eigh
    gram_iterative = HodgeLaplacianPE(4, dense_threshold=0, eigh_threshold=0)(data.clone())
    laplacians = hodge_laplacians(boundary_coos(data, signed=True), counts)
    for rank in range(3):
        a, b = pe(dense, rank), pe(iterative, rank)
        same_span(a, b, atol=1e-5)
        same_span(a, pe(gram, rank), atol=1e-5)
        same_span(a, pe(gram_iterative, rank), atol=1e-5)
        # the columns are eigenvectors of L_r for its smallest nonzero eigenvalues
        lap = laplacians[rank]
        values = np.linalg.eigvalsh(lap)
        nonzero = values[values > 1e-6][:4]
        np.testing.assert_allclose(np.sort(np.diag(b.T @ lap @ b)), nonzero, atol=1e-4)
    bspe = BarycentricSubdivisionPE(4)(data.clone())
    bspe_iterative = BarycentricSubdivisionPE(4, dense_threshold=0, eigh_threshold=0)(data.clone())
    for rank in range(3):
        same_span(pe(bspe, rank), pe(bspe_iterative, rank), atol=1e-5)


def test_large_kernel_falls_back_instead_of_growing_arpack():
    data = dense_complex()
    lap = hodge_laplacians(boundary_coos(data, signed=True), data.cell_counts(), 0)[2]
    reference, _ = smallest_eigenpairs(lap.toarray(), 3, drop_kernel=True)
    # max_pairs far below the kernel dimension: eigsh stops asking, dense eigh takes over
    values, vectors = smallest_eigenpairs(lap, 3, drop_kernel=True, eigh_threshold=0, max_pairs=16)
    np.testing.assert_allclose(values, reference, atol=1e-8)
    np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-6)


def test_lobpcg_fallback_when_arpack_does_not_converge(monkeypatch):
    data = dense_complex(n=10, m=18)
    lap = hodge_laplacians(boundary_coos(data, signed=True), data.cell_counts(), 0)[1]
    reference, _ = smallest_eigenpairs(lap.toarray(), 3, drop_kernel=True)

    def no_convergence(*args, **kwargs):
        raise spla.ArpackNoConvergence("forced", np.zeros(0), np.zeros((lap.shape[0], 0)))

    monkeypatch.setattr(pe_utils, "eigsh", no_convergence)
    values, vectors = smallest_eigenpairs(
        lap, 3, drop_kernel=True, eigh_threshold=0, dense_fallback=0
    )
    np.testing.assert_allclose(values, reference, atol=1e-6)
    np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-5)


def kernel_laplacian():
    """L_2 of a complex whose kernel (dim > 16) made ARPACK fail with error 3 under Haswell."""
    data = dense_complex()
    lap = hodge_laplacians(boundary_coos(data, signed=True), data.cell_counts(), 0)[2]
    reference, _ = smallest_eigenpairs(lap.toarray(), 4, drop_kernel=True)
    return lap, reference


def arpack_error():
    return spla.ArpackError(3)  # "No shifts could be applied ...": the BLAS-dependent failure


def arpack_no_convergence():
    return spla.ArpackNoConvergence("forced", np.zeros(0), np.zeros((0, 0)))


def lin_alg_error():
    return np.linalg.LinAlgError("forced: singular factorisation")


def splu_singular():
    return RuntimeError("Factor is exactly singular")


@pytest.mark.parametrize(
    "failure", [arpack_error, arpack_no_convergence, lin_alg_error, splu_singular]
)
@pytest.mark.parametrize("dense_fallback", [4096, 0], ids=["dense", "lobpcg"])
def test_any_eigsh_failure_falls_back_to_the_dense_answer(monkeypatch, failure, dense_fallback):
    lap, reference = kernel_laplacian()
    calls = []

    def failing_eigsh(*args, **kwargs):
        calls.append(kwargs)
        raise failure()

    monkeypatch.setattr(pe_utils, "eigsh", failing_eigsh)
    # the unprotected call raises: before the fix only ArpackNoConvergence was caught
    with pytest.raises(type(failure())):
        pe_utils.eigsh(lap, k=12, sigma=-0.01, which="LM")
    calls.clear()
    values, vectors = smallest_eigenpairs(
        lap, 4, drop_kernel=True, eigh_threshold=0, dense_fallback=dense_fallback
    )
    np.testing.assert_allclose(values, reference, atol=1e-6)
    np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-5)
    # bounded: no convergence stops at once (its budget is spent); others restart twice
    assert len(calls) == (1 if failure is arpack_no_convergence else 3)


def test_lobpcg_deflates_a_kernel_larger_than_its_block(monkeypatch):
    graph = nx.gnm_random_graph(50, 160, seed=0)
    data = CellCycleLifting(cycles="chordless", max_cell_length=4)(
        graph_from_edges(list(graph.edges()), num_nodes=50)
    )
    lap = hodge_laplacians(boundary_coos(data, signed=True), data.cell_counts(), 0)[2]
    assert lap.shape == (195, 195)  # kernel of dimension 84: seven times the first block
    reference, _ = smallest_eigenpairs(lap.toarray(), 4, drop_kernel=True)
    real_lobpcg, widths = spla.lobpcg, []

    def recorded(operator, guess, **kwargs):
        widths.append(guess.shape[1])
        return real_lobpcg(operator, guess, **kwargs)

    def failing_eigsh(*args, **kwargs):
        raise arpack_error()

    monkeypatch.setattr(pe_utils, "eigsh", failing_eigsh)
    monkeypatch.setattr(pe_utils, "lobpcg", recorded)
    values, vectors = smallest_eigenpairs(lap, 4, drop_kernel=True, eigh_threshold=0, dense_fallback=0)
    np.testing.assert_allclose(values, reference, atol=1e-8)
    np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-6)
    assert widths[:2] == [12, 24] and len(widths) >= 3  # block doubled, kernel deflated


def test_arpack_error_is_restarted_with_a_larger_krylov_space(monkeypatch):
    lap, reference = kernel_laplacian()
    real_eigsh, calls = spla.eigsh, []

    def fails_once(matrix, **kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise arpack_error()
        return real_eigsh(matrix, **kwargs)

    def no_fallback(*args, **kwargs):
        raise AssertionError("the restart should have succeeded without a fallback")

    monkeypatch.setattr(pe_utils, "eigsh", fails_once)
    monkeypatch.setattr(pe_utils, "lobpcg", no_fallback)
    values, vectors = smallest_eigenpairs(
        lap, 4, drop_kernel=True, eigh_threshold=0, dense_fallback=0
    )
    np.testing.assert_allclose(values, reference, atol=1e-8)
    np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-6)
    first, second = calls[0], calls[1]
    assert first["ncv"] is None and second["ncv"] > 2 * second["k"] + 1
    assert not np.allclose(first["v0"], second["v0"])


def test_a_wrong_eigsh_answer_is_caught_by_its_residual(monkeypatch):
    lap, reference = kernel_laplacian()

    def wrong(matrix, k, **kwargs):  # returns without error, but not eigenpairs
        vectors = np.linalg.qr(np.random.default_rng(3).standard_normal((matrix.shape[0], k)))[0]
        return np.linspace(1.0, 2.0, k), vectors

    monkeypatch.setattr(pe_utils, "eigsh", wrong)
    values, _ = smallest_eigenpairs(lap, 4, drop_kernel=True, eigh_threshold=0)
    np.testing.assert_allclose(values, reference, atol=1e-8)


def test_every_solver_failing_raises_one_error_naming_dense_fallback(monkeypatch):
    lap, _ = kernel_laplacian()

    def fail(*args, **kwargs):
        raise lin_alg_error()

    monkeypatch.setattr(pe_utils, "eigsh", fail)
    monkeypatch.setattr(pe_utils, "lobpcg", fail)
    with pytest.raises(RuntimeError, match=r"DENSE_FALLBACK.*at least 53"):
        smallest_eigenpairs(lap, 4, drop_kernel=True, eigh_threshold=0, dense_fallback=0)
    # the module constant is read at call time: raising it lets every encoding solve densely
    monkeypatch.setattr(pe_utils, "DENSE_FALLBACK", 100)
    values, _ = smallest_eigenpairs(lap, 4, drop_kernel=True, eigh_threshold=0)
    assert values.shape == (4,)


def test_dense_eigh_falls_back_to_the_qr_driver(monkeypatch):
    lap, reference = kernel_laplacian()

    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("Eigenvalues did not converge")

    monkeypatch.setattr(pe_utils.np.linalg, "eigh", fail)
    values, vectors = smallest_eigenpairs(lap.toarray(), 4, drop_kernel=True)
    np.testing.assert_allclose(values, reference, atol=1e-8)
    np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-6)


# ----------------------------------------------------------------------------- item 2: TopoBench


def topobench_data(complex_: ComplexData) -> Data:
    """What TopoBench's lifting stores: unsigned incidences, x_r, adjacencies; no shape."""
    out = Data()
    for rank in range(complex_.max_rank + 1):
        n = complex_.num_cells(rank)
        out[f"x_{rank}"] = torch.arange(n, dtype=torch.float32)[:, None]
        if rank >= 1:
            out[f"incidence_{rank}"] = complex_[f"incidence_{rank}"].abs().coalesce()
        out[f"adjacency_{rank}"] = complex_.get(f"adjacency_{rank}")
    out.num_nodes = complex_.num_cells(0)
    return out


@pytest.mark.parametrize(
    "cls",
    [BarycentricSubdivisionPE, BarycentricRandomWalkPE, CellularRandomWalkPE, HodgeLaplacianPE,
     TopologicalSlepiansPE],
)  # fmt: skip
def test_pes_accept_topobench_data(cls):
    complex_ = CellCycleLifting()(
        graph_from_edges([(0, 1), (1, 2), (2, 3), (3, 0), (1, 4), (4, 2), (3, 5)])
    )
    data = topobench_data(complex_)
    assert "shape" not in data and "signed_incidence_1" not in data
    ours, theirs = cls(4)(complex_.clone()), cls(4)(data)
    assert isinstance(theirs, Data)
    for rank in range(3):
        torch.testing.assert_close(theirs[f"pe_{rank}"], ours[f"pe_{rank}"])


def test_topobench_orientation_is_recovered_by_walking_cycles():
    complex_ = two_cells_complex()
    signed = pe_utils.orient_boundaries(boundary_coos(topobench_data(complex_), signed=False))
    b1, b2 = (b.to_scipy().toarray() for b in signed)
    np.testing.assert_array_equal(np.abs(b1), np.abs(complex_.boundary_matrices()[0].toarray()))
    np.testing.assert_array_equal(np.abs(b2), np.abs(complex_.boundary_matrices()[1].toarray()))
    np.testing.assert_array_equal(b1 @ b2, 0)


def test_topobench_data_without_recoverable_orientation_is_refused():
    data = topobench_data(two_cells_complex())
    # 2-cell whose "boundary" is two disjoint edges: no cycle to walk
    data.incidence_2 = torch.tensor([[1.0], [0.0], [0.0], [0.0], [1.0], [0.0]]).to_sparse()
    data.x_2 = torch.zeros(1, 1)
    with pytest.raises(ValueError, match="signed_incidence"):
        HodgeLaplacianPE(2)(data)
    with pytest.raises(TypeError, match="TopoBench"):
        HodgeLaplacianPE(2)(Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=3))


# ----------------------------------------------------------------------------- item 3: Slepians


def test_paper_selection_on_a_filled_triangle():
    data = CellCycleLifting()(graph_from_edges([(0, 1), (1, 2), (2, 0)]))
    b1, b2 = (m.toarray() for m in data.boundary_matrices())
    out = TopologicalSlepiansPE(4)(data)  # per_set: one Slepian per set
    # rank 2: one cell, its lower set is itself, band im B_2ᵀ = R: the Slepian is e_0
    np.testing.assert_allclose(np.abs(pe(out, 2)[:, 0]), [1.0])
    # rank 1: every upper set is all three edges, band im B_2 = span(B_2): first column
    # ±B_2 / sqrt(3) (λ = 1, upper family first); then one vector of the lower band im B_1ᵀ
    first = pe(out, 1)[:, 0]
    np.testing.assert_allclose(np.abs(first @ b2[:, 0]) / np.sqrt(3), 1.0, atol=1e-6)
    second = pe(out, 1)[:, 1]
    np.testing.assert_allclose(b1.T @ np.linalg.pinv(b1.T) @ second, second, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(second), 1.0, atol=1e-6)
    np.testing.assert_array_equal(pe(out, 1)[:, 2:], 0)  # every set is the same: 2 columns
    # rank 0: band im B_1 (orthogonal to the constant), one Slepian from the one set
    np.testing.assert_allclose(pe(out, 0)[:, 0].sum(), 0, atol=1e-6)
    np.testing.assert_array_equal(pe(out, 0)[:, 1:], 0)


@pytest.mark.parametrize("selection", ["per_set", "global"])
@pytest.mark.parametrize("max_cosine", [0.9, 0.5])
def test_no_two_slepian_columns_are_near_parallel(selection, max_cosine):
    data = from_toponetx(random_cell_complex(2))
    out = TopologicalSlepiansPE(12, selection=selection, max_cosine=max_cosine)(data)
    for rank in range(3):
        columns = pe(out, rank)
        columns = columns[:, np.linalg.norm(columns, axis=0) > 0]
        cos = np.abs(columns.T @ columns) / np.outer(*(2 * [np.linalg.norm(columns, axis=0)]))
        assert (cos[np.triu_indices_from(cos, 1)] <= max_cosine + 1e-6).all()
    # global selection with a strict tolerance equals the exhaustive (untruncated) one
    if selection == "global":
        full = topological_slepians(data, 1, selection="global", max_cosine=max_cosine).vectors
        np.testing.assert_allclose(pe(out, 1)[:, : min(12, full.shape[1])], full[:, :12], atol=1e-6)


def test_harmonic_columns_come_first():
    data = from_toponetx(nx.cycle_graph(4))  # unfilled square: beta_1 = 1
    out = TopologicalSlepiansPE(3, harmonic=1)(data)
    harmonic = pe(out, 1)[:, 0]
    np.testing.assert_allclose(np.abs(harmonic), 0.5, atol=1e-6)
    np.testing.assert_allclose(data.boundary_matrices()[0].toarray() @ harmonic, 0, atol=1e-6)
    without = TopologicalSlepiansPE(3)(data)
    np.testing.assert_allclose(pe(out, 1)[:, 1:], pe(without, 1)[:, :2], atol=1e-6)
    with pytest.raises(ValueError, match="selection"):
        TopologicalSlepiansPE(3, selection="top")


# ----------------------------------------------------------------------------- item 4: signs


def column_signs(old, new):
    return torch.where(old.abs().sum(0) > 0, (new * old).sum(0).sign(), 0)


@pytest.mark.parametrize("per_rank", [None, True, False])
def test_sign_flip_per_rank_for_local_encodings(per_rank):
    data = HodgeLaplacianPE(2)(
        CellCycleLifting()(graph_from_edges([(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)]))
    )
    assert int(data.pe_per_rank) == 1
    generator = torch.Generator().manual_seed(0)
    agree = []
    for _ in range(40):
        flipped = RandomSignFlip(generator=generator, per_rank=per_rank)(data.clone())
        s0, s1 = column_signs(data.pe_0, flipped.pe_0)[0], column_signs(data.pe_1, flipped.pe_1)[0]
        assert s0 != 0 and s1 != 0
        agree.append(bool(s0 == s1))
    if per_rank is False:
        assert all(agree)  # global mode: ranks flip together
    else:
        assert 5 < sum(agree) < 35  # independent draws per rank


def test_sign_flip_shares_signs_for_global_encodings_by_default():
    data = BarycentricSubdivisionPE(3)(
        CellCycleLifting()(graph_from_edges([(0, 1), (1, 2), (2, 0), (2, 3)]))
    )
    assert int(data.pe_per_rank) == 0
    generator = torch.Generator().manual_seed(1)
    for _ in range(20):
        flipped = RandomSignFlip(generator=generator)(data.clone())
        signs = [column_signs(data[f"pe_{r}"], flipped[f"pe_{r}"]) for r in range(3)]
        for s in signs[1:]:
            both = (s != 0) & (signs[0] != 0)
            assert (s[both] == signs[0][both]).all()


# ----------------------------------------------------------------------------- item 6: features


def test_two_cell_features_from_vertices_or_edges():
    data = two_cells_complex()  # 2-cells: square 0-1-2-3, triangle 1-4-2
    x0 = torch.tensor([[1.0], [2.0], [4.0], [8.0], [16.0]])
    edges = data.boundary_matrices()[0].toarray()  # (5, 6)
    x1 = torch.tensor([[10.0], [20.0], [30.0], [40.0], [50.0], [60.0]])
    b2 = np.abs(data.boundary_matrices()[1].toarray())  # (6, 2)
    by_vertices = FeatureLifting()(data.clone().update({"x_0": x0, "x_1": x1}))
    torch.testing.assert_close(by_vertices.x_2, torch.tensor([[15.0], [22.0]]))
    by_edges = FeatureLifting(x2_from="edges")(data.clone().update({"x_0": x0, "x_1": x1}))
    expected = torch.from_numpy(b2.T @ x1.numpy()).float()
    torch.testing.assert_close(by_edges.x_2, expected)
    # with edge features lifted from vertices (sum), each cycle vertex is on two of its edges
    lifted = FeatureLifting(x2_from="edges")(data.clone().update({"x_0": x0}))
    torch.testing.assert_close(lifted.x_1, torch.from_numpy(np.abs(edges).T @ x0.numpy()).float())
    torch.testing.assert_close(lifted.x_2, 2 * by_vertices.x_2)
    mean = FeatureLifting(method="mean", x2_from="edges")(
        data.clone().update({"x_0": x0, "x_1": x1})
    )
    torch.testing.assert_close(mean.x_2, expected / torch.tensor([[4.0], [3.0]]))
    with pytest.raises(ValueError, match="x2_from"):
        FeatureLifting(x2_from="faces")
