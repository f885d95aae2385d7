"""Fuzz: every lifting (cycles basis / chordless, cliques up to 3-simplices, feature liftings,
``lift`` and ``lift_many``) on random and degenerate graphs, and TopoNetX combinatorial
complexes with a rank-3 cell through ``from_toponetx``."""

from __future__ import annotations

import numpy as np
import torch

from tests.fuzz.cases import (
    ACCEPT,
    EITHER,
    REJECT,
    assert_finite,
    combinatorial_complex,
    quietly,
    random_graph,
    run_cases,
)
from topomodelx_attention.data import from_toponetx
from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting


def random_lifting(rng: np.random.Generator):
    """A lifting with random options: both cycle modes, clique dims 1..3, feature liftings."""
    options = dict(
        feature_lifting=str(rng.choice(["sum", "mean"])),
        edge_feature_lifting=[None, "sum", "mean", "concat"][int(rng.integers(4))],
        self_loops=str(rng.choice(["raise", "drop"])),
        keep_edge_index=bool(rng.integers(2)),
    )
    if rng.integers(2):
        cycles = str(rng.choice(["basis", "chordless"]))
        bound = [None, 3, 4, 8][int(rng.integers(4))]
        return CellCycleLifting(max_cell_length=bound, cycles=cycles, **options), f"cycles-{cycles}-{bound}"
    dim = int(rng.integers(1, 4))
    return SimplicialCliqueLifting(complex_dim=dim, **options), f"cliques-{dim}"


def expectation(case, lifting) -> str:
    expect = case.expect
    if "has_self_loop" in case.kinds and lifting.self_loops == "raise":
        expect = REJECT
    if expect == ACCEPT and "int" in case.kinds:
        expect = EITHER  # integer codes need categorical_cardinalities for sum / mean liftings
    return expect


def check_complex(data, n: int, finite: bool) -> None:
    """Structure of one lifted complex: counts, batch vectors, boundaries, features."""
    counts = data.shape[0].tolist()
    assert data.num_complexes == 1, f"num_complexes={data.num_complexes}"
    assert counts[0] == n, f"{counts[0]} vertices, expected {n}"
    for r, count in enumerate(counts):
        assert data[f"batch_{r}"].shape == (count,) and not data[f"batch_{r}"].any(), f"batch_{r}"
        if f"x_{r}" in data:
            assert data[f"x_{r}"].shape[0] == count, f"x_{r} has {data[f'x_{r}'].shape[0]} rows, {count} cells"
            if finite and data[f"x_{r}"].is_floating_point():
                assert_finite(f"x_{r}", data[f"x_{r}"])
        if r:
            b = data[f"signed_incidence_{r}"]
            assert tuple(b.shape) == (counts[r - 1], count), f"signed_incidence_{r} shape {tuple(b.shape)}"
            if r >= 2:
                product = (data[f"signed_incidence_{r - 1}"].to_dense() @ b.to_dense()).abs().sum()
                assert float(product) == 0.0, f"B_{r - 1} B_{r} != 0"


def test_fuzz_single_graph_liftings(fuzz_seeds):
    def make(seed, rng):
        case = random_graph(seed)
        lifting, name = random_lifting(rng)

        def run():
            data = quietly(lifting, case.data.clone())
            check_complex(data, case.num_nodes, case.finite)
            return data

        return f"{name} {case.description}", expectation(case, lifting), run

    run_cases(fuzz_seeds, "lift one graph", make, offset=10_000)


def test_fuzz_lift_many_equals_lift(fuzz_seeds):
    def make(seed, rng):
        lifting, name = random_lifting(rng)
        size = int(rng.integers(1, 5))
        feature = str(rng.choice(["float32", "float64", "none"]))
        edge_attr = bool(rng.integers(2))
        width = 2 if rng.integers(6) else None  # None: widths differ between the graphs
        cases = [random_graph(seed * 7 + i, features=(feature,), edge_attr=edge_attr, feature_dim=width)
                 for i in range(size)]
        if rng.integers(4) == 0:  # one malformed graph spoils the list
            cases[int(rng.integers(size))] = random_graph(seed, features=("nan", "x_rows", "edge_attr_rows"))
        expects = [expectation(c, lifting) for c in cases]
        expect = REJECT if REJECT in expects else (EITHER if EITHER in expects else ACCEPT)
        widths = {c.data.x.size(1) for c in cases if "x" in c.data}
        if len(widths) > 1 and expect == ACCEPT:
            expect = EITHER  # lift_many = [lift(g) ...] may accept them, or refuse with a message

        def run():
            many = quietly(lifting.lift_many, [c.data.clone() for c in cases], chunk_size=int(rng.integers(1, 4)))
            one = quietly(lambda: [lifting(c.data.clone()) for c in cases])
            assert len(many) == len(cases), f"{len(many)} complexes for {len(cases)} graphs"
            for a, b, c in zip(many, one, cases):
                check_complex(a, c.num_nodes, c.finite)
                assert sorted(a.keys()) == sorted(b.keys()), f"keys {sorted(a.keys())} != {sorted(b.keys())}"
                for key in a.keys():
                    va, vb = a[key], b[key]
                    if isinstance(va, torch.Tensor):
                        va = va.to_dense() if va.is_sparse else va
                        vb = vb.to_dense() if vb.is_sparse else vb
                        assert va.shape == vb.shape and torch.equal(va, vb), f"lift_many differs from lift on {key}"
            return many

        return f"{name} x{size} {[c.description for c in cases]}", expect, run

    run_cases(fuzz_seeds, "lift_many", make, offset=20_000)


def test_fuzz_combinatorial_complexes_with_rank_3_cells(fuzz_seeds):
    def make(seed, rng):
        cc = combinatorial_complex(seed)

        def run():
            counts = [len(cc.skeleton(r)) if r <= cc.dim else 0 for r in range(4)]
            features = {r: rng.standard_normal((counts[r], 2)) for r in range(cc.dim + 1)}
            data = from_toponetx(cc, features, max_rank=3)
            assert data.shape[0].tolist() == counts, f"shape {data.shape[0].tolist()} != {counts}"
            for r in range(4):
                assert data[f"x_{r}"].shape[0] == counts[r] if f"x_{r}" in data else True, f"x_{r}"
                assert data[f"batch_{r}"].shape == (counts[r],), f"batch_{r}"
            return data

        return f"CombinatorialComplex shape={list(cc.shape)}", ACCEPT, run

    run_cases(fuzz_seeds, "from_toponetx combinatorial", make)
