"""Fuzz: every positional encoding and node identifier on random / degenerate complexes and
graphs (n smaller than the PE width included), and batching of the encoded complexes."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.loader import DataLoader

from tests.fuzz.cases import (
    ACCEPT,
    EITHER,
    REJECT,
    assert_finite,
    combinatorial_complex,
    finite_float_graph,
    quietly,
    random_graph,
    run_cases,
)
from topomodelx_attention import transforms as T
from topomodelx_attention.data import from_toponetx


def random_complex(seed: int):
    """A lifted well-formed graph (cycles or cliques up to 3-simplices) or a TopoNetX
    combinatorial complex with a rank-3 cell that converts."""
    rng = np.random.default_rng(seed)
    choice = int(rng.integers(5))
    if choice == 4:
        cc = combinatorial_complex(seed)
        counts = [len(cc.skeleton(r)) for r in range(cc.dim + 1)]
        if all(counts):  # graded (gaps are listed by the lifting fuzz)
            return from_toponetx(cc, {0: rng.standard_normal((counts[0], 2))}, max_rank=3), f"cc{counts}"
    case = finite_float_graph(seed)
    lifting = [T.CellCycleLifting(), T.CellCycleLifting(cycles="chordless"), T.SimplicialCliqueLifting(complex_dim=2),
               T.SimplicialCliqueLifting(complex_dim=3)][choice % 4]
    return lifting(case.data), f"{type(lifting).__name__}-{choice} {case.description}"


def random_encoding(rng: np.random.Generator):
    dim = int(rng.integers(1, 10))  # often larger than the number of cells
    options = [
        lambda: T.BarycentricSubdivisionPE(dim, keep_kernel=bool(rng.integers(2)), dense_threshold=int(rng.choice([0, 10_000]))),
        lambda: T.BarycentricRandomWalkPE(dim, dense_threshold=int(rng.choice([0, 10_000]))),
        lambda: T.CellularRandomWalkPE(dim, dense_threshold=int(rng.choice([0, 10_000]))),
        lambda: T.HodgeLaplacianPE(dim, include_harmonic=bool(rng.integers(2)), dense_threshold=int(rng.choice([0, 10_000]))),
        lambda: T.TopologicalSlepiansPE(dim, selection=str(rng.choice(["per_set", "global"])), harmonic=int(rng.integers(0, 3))),
        lambda: T.ZeroPE(dim),
    ]
    return options[int(rng.integers(len(options)))](), dim


def test_fuzz_positional_encodings_then_sign_flip(fuzz_seeds):
    def make(seed, rng):
        data, description = random_complex(seed)
        encoding, dim = random_encoding(rng)

        def run():
            counts = data.shape[0].tolist()
            out = encoding(data.clone())
            for r, n in enumerate(counts):
                pe = out[f"pe_{r}"]
                assert pe.shape == (n, dim) and pe.dtype == torch.float32, f"pe_{r} {tuple(pe.shape)} for {n} cells"
                assert_finite(f"pe_{r}", pe)
            flipped = T.RandomSignFlip(generator=torch.Generator().manual_seed(seed))(out.clone())
            for r in range(len(counts)):
                assert torch.equal(flipped[f"pe_{r}"].abs(), out[f"pe_{r}"].abs()), "sign flip changed magnitudes"
            return out

        # a combinatorial complex has no orientation: oriented encodings may refuse rank >= 3
        oriented = isinstance(encoding, (T.HodgeLaplacianPE, T.TopologicalSlepiansPE))
        expect = EITHER if oriented and description.startswith("cc") else ACCEPT
        return f"{encoding!r} on {description}", expect, run

    run_cases(fuzz_seeds, "positional encodings", make, offset=30_000)


def test_fuzz_node_identifiers(fuzz_seeds):
    def make(seed, rng):
        dim = int(rng.integers(1, 10))
        transform = [
            T.LaplacianNodeId(dim, select=str(rng.choice(["smallest", "smallest_largest"]))),
            T.OrthogonalRandomNodeId(dim, seed=int(rng.integers(100)), resample=bool(rng.integers(2))),
        ][int(rng.integers(2))]
        on_complex = bool(rng.integers(2))
        if on_complex:
            data, description = random_complex(seed)
            expect, n = ACCEPT, int(data.shape[0, 0])
        else:
            case = random_graph(seed)
            data, description, n = case.data, case.description, case.num_nodes
            # identifiers read only the graph: features do not matter; malformed edges may raise
            expect = ACCEPT if {"float32", "float64", "int", "none", "nan", "inf", "huge"} & case.kinds else EITHER
            if {"self_loop", "multi_edge"} & case.kinds:
                expect = EITHER  # identifiers ignore self-loops and repeated edges, or reject them
            if "x_rows" in case.kinds:
                expect = REJECT  # num_nodes and x disagree: which vertex count is meant?

        def run():
            out = transform(data.clone())
            assert out.node_id.shape == (n, dim), f"node_id {tuple(out.node_id.shape)}, expected {(n, dim)}"
            assert_finite("node_id", out.node_id)
            if n and n <= dim:  # exactly orthonormal rows
                gram = out.node_id @ out.node_id.t()
                assert torch.allclose(gram, torch.eye(n), atol=1e-4), "rows not orthonormal for n <= dim"
            return out

        return f"{transform!r} on {description}", expect, run

    run_cases(fuzz_seeds, "node identifiers", make, offset=40_000)


def test_fuzz_batching(fuzz_seeds):
    def make(seed, rng):
        size = int(rng.integers(1, 5))
        mixed = bool(rng.integers(2))

        def lift(i):
            case = finite_float_graph(seed * 11 + i, feature_dim=2)
            lifting = T.SimplicialCliqueLifting(complex_dim=3) if mixed and i % 2 else T.CellCycleLifting(max_cell_length=8)
            return T.HodgeLaplacianPE(3)(lifting(case.data))

        complexes = quietly(lambda: [lift(i) for i in range(size)])
        expect = EITHER if mixed else ACCEPT  # different max ranks may not batch: then a clear error

        def run():
            batch = next(iter(DataLoader(complexes, batch_size=len(complexes))))
            assert batch.num_complexes == len(complexes), f"num_complexes={batch.num_complexes}, {len(complexes)} complexes"
            counts = torch.stack([c.shape[0] for c in complexes])
            assert torch.equal(batch.shape, counts), f"shape {batch.shape.tolist()} != {counts.tolist()}"
            for r in range(counts.shape[1]):
                expected = torch.repeat_interleave(torch.arange(len(complexes)), counts[:, r])
                assert torch.equal(batch[f"batch_{r}"], expected), f"batch_{r}"
                n = int(counts[:, r].sum())
                assert batch[f"pe_{r}"].shape[0] == n and batch[f"x_{r}"].shape[0] == n, f"rank {r} rows"
                assert tuple(batch[f"adjacency_{r}"].shape) == (n, n), f"adjacency_{r}"
            back = batch.to_complex_list()
            assert len(back) == len(complexes), f"to_complex_list gave {len(back)} complexes for {len(complexes)}"
            for a, b in zip(back, complexes):
                assert torch.equal(a.shape, b.shape) and torch.equal(a.x_0, b.x_0), "round trip"
                assert torch.equal(a.adjacency_0.to_dense(), b.adjacency_0.to_dense()), "round trip adjacency_0"
            return batch

        shapes = [c.shape[0].tolist() for c in complexes]
        return f"{'mixed' if mixed else 'cells'} {shapes}", expect, run

    run_cases(fuzz_seeds, "batching", make, offset=50_000)
