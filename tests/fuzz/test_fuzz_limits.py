"""Fuzz: bounded costs and solvers (eigensolvers, cycle counts, token counts, dense sizes).

* eigensolver failures (``ArpackError``, ``ArpackNoConvergence``, ``LinAlgError``, a singular
  factorisation, a wrong answer) injected into ``eigsh`` at a random call: the answer is the
  dense one, no solver exception escapes (ACCEPT);
* ``CellCycleLifting(cycles="chordless", max_cycles=...)`` on random dense graphs: REJECT
  exactly when the graph has more chordless cycles than the limit (counted independently),
  else every cycle is a 2-cell;
* ``OrderKTokenGT(identifiers="ordered", max_tokens=..., max_cell_size=...)`` on random
  complexes: REJECT exactly when the tokens (built independently by ``cell_orderings``)
  exceed the limit or a cell exceeds the slots;
* dense attention with a random ``memory_budget``: REJECT exactly when
  ``B × heads × Lt × Ls × bytes`` exceeds it;
* ``rope=True`` on complexes: REJECT without positions, invariant to relabelling with them.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import scipy.sparse.linalg as spla
import toponetx as tnx
import torch

from tests.fuzz.cases import ACCEPT, REJECT, combinatorial_complex, quietly, run_cases
from topomodelx_attention.data import from_toponetx
from topomodelx_attention.nn.attention import dense_attention
from topomodelx_attention.nn.graph import OrderKTokenGT, cell_orderings
from topomodelx_attention.nn.simplicial import NSimplicialTransformerLayer
from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting, pe_utils
from topomodelx_attention.transforms.pe_utils import boundary_coos, smallest_eigenpairs
from topomodelx_attention.transforms.positional_encodings import hodge_laplacians

from tests.helpers import graph_from_edges  # isort: skip


def names(error: Exception, *needles: str) -> None:
    """A refusal must name what to change: every needle occurs in the message."""
    missing = [needle for needle in needles if needle not in str(error)]
    if missing:
        raise AssertionError(f"message lacks {missing}: {str(error)[:200]}") from error


def dense_graph(rng: np.random.Generator, n_range=(4, 14)):
    n = int(rng.integers(*n_range))
    graph = nx.gnp_random_graph(n, float(rng.uniform(0.3, 0.9)), seed=int(rng.integers(1 << 30)))
    return graph, graph_from_edges(list(graph.edges()), num_nodes=n, feature_dim=2)


# ----------------------------------------------------------------------------- item 7: solvers


def _failure(kind: str, n: int):
    if kind == "arpack":
        return spla.ArpackError(int(np.random.default_rng(n).choice([-9999, -14, -9, 1, 3])))
    if kind == "no_convergence":
        return spla.ArpackNoConvergence("forced", np.zeros(0), np.zeros((n, 0)))
    if kind == "linalg":
        return np.linalg.LinAlgError("forced")
    return RuntimeError("Factor is exactly singular")


def test_fuzz_eigensolver_failures_fall_back_to_the_dense_answer(fuzz_seeds):
    real_eigsh = pe_utils.eigsh

    def make(seed, rng):
        _, graph = dense_graph(rng, (6, 12))
        data = quietly(CellCycleLifting(cycles="chordless", max_cell_length=5), graph)
        counts = data.cell_counts()
        rank = int(rng.integers(len(counts)))
        kind = str(rng.choice(["arpack", "no_convergence", "linalg", "singular", "wrong", "none"]))
        fail_at = int(rng.integers(0, 3))  # which eigsh call fails (later ones succeed)
        k = int(rng.integers(1, 6))
        drop_kernel = bool(rng.integers(2))
        dense_fallback = int(rng.choice([0, 4096]))
        description = f"L_{rank} n={counts[rank] if rank < len(counts) else 0} {kind}@{fail_at} k={k} drop={drop_kernel} fallback={dense_fallback}"

        def run():
            lap = hodge_laplacians(boundary_coos(data, signed=True), counts, 0)[rank]
            reference, _ = smallest_eigenpairs(lap.toarray(), k, drop_kernel)
            calls = []

            def injected(matrix, **kwargs):
                calls.append(kwargs)
                if kind != "none" and len(calls) - 1 >= fail_at:
                    if kind == "wrong":
                        vectors = np.linalg.qr(rng.standard_normal((matrix.shape[0], kwargs["k"])))[0]
                        return np.linspace(1.0, 2.0, kwargs["k"]), vectors
                    raise _failure(kind, matrix.shape[0])
                return real_eigsh(matrix, **kwargs)

            pe_utils.eigsh = injected
            try:
                values, vectors = smallest_eigenpairs(
                    lap, k, drop_kernel, eigh_threshold=0, dense_fallback=dense_fallback
                )
            finally:
                pe_utils.eigsh = real_eigsh
            assert values.shape == reference.shape, f"{values.shape} vs {reference.shape}"
            np.testing.assert_allclose(values, reference, atol=1e-6)
            if values.size:
                np.testing.assert_allclose(lap @ vectors, vectors * values, atol=1e-5)

        return description, ACCEPT, run

    run_cases(fuzz_seeds, "eigensolver failures", make, offset=7000)


# ----------------------------------------------------------------------------- item 10: cycles


def test_fuzz_chordless_cycle_limit(fuzz_seeds):
    def make(seed, rng):
        graph, data = dense_graph(rng)
        bound = [None, 4, 5, 6][int(rng.integers(4))]
        limit = int(rng.choice([1, 5, 20, 60, 200]))
        # counted independently, stopping one past the limit
        found = (c for c in nx.chordless_cycles(graph, length_bound=bound) if len(c) >= 3)
        count = sum(1 for _ in itertools.islice(found, limit + 1))
        expect = REJECT if count > limit else ACCEPT
        many = bool(rng.integers(2))
        description = f"n={graph.number_of_nodes()} m={graph.number_of_edges()} bound={bound} max_cycles={limit} many={many}"

        def run():
            lifting = CellCycleLifting(max_cell_length=bound, cycles="chordless", max_cycles=limit)
            try:
                if many:
                    lifted = quietly(lifting.lift_many, [graph_from_edges([(0, 1)]), data])[1]
                else:
                    lifted = quietly(lifting, data)
            except ValueError as error:
                names(error, "max_cycles", "graph 1 of the list" if many else "this graph")
                raise
            assert lifted.num_cells(2) == count, f"{lifted.num_cells(2)} 2-cells, {count} cycles"

        return description, expect, run

    run_cases(fuzz_seeds, "chordless cycle limit", make, offset=7100)


# ----------------------------------------------------------------------------- item 9: tokens


def random_small_complex(rng: np.random.Generator):
    choice = int(rng.integers(3))
    if choice == 0:
        size = int(rng.integers(2, 7))
        extra = [[int(v) for v in rng.choice(8, 2, replace=False)] for _ in range(int(rng.integers(0, 3)))]
        return f"simplex-{size}", from_toponetx(tnx.SimplicialComplex([list(range(size)), *extra]))
    if choice == 1:
        _, graph = dense_graph(rng, (3, 9))
        return "cell", quietly(CellCycleLifting(max_cell_length=int(rng.choice([4, 6, 9]))), graph)
    if rng.integers(2):
        _, graph = dense_graph(rng, (3, 8))
        return "clique", quietly(SimplicialCliqueLifting(complex_dim=3), graph)
    return "combinatorial", from_toponetx(combinatorial_complex(int(rng.integers(1 << 30))))


def test_fuzz_ordered_token_limit(fuzz_seeds):
    def make(seed, rng):
        name, data = random_small_complex(rng)
        slots = int(rng.choice([3, 4, 6, 8]))
        limit = int(rng.choice([1, 20, 80, 400, 2000]))
        try:  # the tokens cell_orderings would build (None: a cell exceeds the slots)
            total = 1 + sum(cell_orderings(data, r, slots).owner.numel() for r in range(data.max_rank + 1))
        except ValueError:
            total = None
        expect = REJECT if total is None or total > limit else ACCEPT
        description = f"{name} cells={data.cell_counts()} slots={slots} max_tokens={limit} tokens={total}"

        def run():
            torch.manual_seed(seed)
            model = OrderKTokenGT(
                [0] * (data.max_rank + 1), 8, 2, n_layers=1, heads=2, node_id_dim=0,
                max_cell_size=slots, max_tokens=limit,
            ).eval()
            try:
                out = model(data)
            except ValueError as error:
                names(error, "max_tokens" if "max_tokens" in str(error) else "max_cell_size")
                raise
            assert out.shape == (1, 2) and torch.isfinite(out).all()

        return description, expect, run

    run_cases(fuzz_seeds, "ordered token limit", make, offset=7200)


# ----------------------------------------------------------------------------- item 10: dense


def test_fuzz_dense_memory_budget(fuzz_seeds):
    def make(seed, rng):
        sizes = [int(s) for s in rng.integers(0, 12, int(rng.integers(1, 4)))]
        heads = int(rng.integers(1, 4))
        dtype = [torch.float32, torch.float64][int(rng.integers(2))]
        itemsize = 4 if dtype == torch.float32 else 8
        need = len(sizes) * heads * max(max(sizes), 1) ** 2 * itemsize
        budget = max(1, need + int(rng.integers(-2, 3)) * itemsize)
        expect = REJECT if need > budget else ACCEPT
        bias = bool(rng.integers(2))
        description = f"sizes={sizes} heads={heads} {dtype} need={need} budget={budget} bias={bias}"

        def run():
            n = sum(sizes)
            batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
            q = torch.randn(n, heads, 4, dtype=dtype)
            kwargs = {}
            if bias and n:
                index = torch.arange(n).repeat(2, 1)
                kwargs["bias"] = torch.sparse_coo_tensor(index, torch.ones(n, dtype=dtype), (n, n))
            try:
                out = dense_attention(
                    q, q, q, batch, batch, num_complexes=len(sizes), memory_budget=budget, **kwargs
                )
            except ValueError as error:
                names(error, "memory_budget", 'kind="sparse"')
                raise
            assert out.shape == q.shape and torch.isfinite(out).all()

        return description, expect, run

    run_cases(fuzz_seeds, "dense memory budget", make, offset=7300)


# ----------------------------------------------------------------------------- item 6: RoPE


def test_fuzz_rope_on_complexes(fuzz_seeds):
    def make(seed, rng):
        n = int(rng.integers(3, 9))
        graph = nx.gnp_random_graph(n, float(rng.uniform(0.3, 0.8)), seed=seed)
        simplices = [list(c) for c in nx.find_cliques(graph) if len(c) <= 3] + [[v] for v in range(n)]
        rope = bool(rng.integers(2))
        given = bool(rng.integers(2))
        expect = REJECT if rope and not given else ACCEPT
        description = f"n={n} simplices={len(simplices)} rope={rope} positions={given}"

        def run():
            torch.manual_seed(seed)
            layer = NSimplicialTransformerLayer(
                12, heads=2, order=2, simplicial_options={"rope": rope}
            ).double()
            x = torch.randn(n, 12, dtype=torch.float64)
            perm = torch.from_numpy(rng.permutation(n))
            x_perm = torch.empty_like(x)
            x_perm[perm] = x
            positions = torch.from_numpy(rng.permutation(n)).double() if given else None
            positions_perm = None
            if given:
                positions_perm = torch.empty_like(positions)
                positions_perm[perm] = positions
            sc = tnx.SimplicialComplex(simplices)
            sc_perm = tnx.SimplicialComplex([[int(perm[v]) for v in s] for s in simplices])
            try:
                out = layer(x, tuples=sc, positions=positions)
            except ValueError as error:
                names(error, "positions", "rope=False")
                raise
            out_perm = layer(x_perm, tuples=sc_perm, positions=positions_perm)
            torch.testing.assert_close(out_perm[perm], out)
            assert torch.isfinite(out).all()

        return description, expect, run

    run_cases(fuzz_seeds, "rope on complexes", make, offset=7400)


def test_fuzz_limits_module_is_self_consistent():
    """The factorial rule the token fuzz relies on (s! per set cell)."""
    data = from_toponetx(tnx.SimplicialComplex([[0, 1, 2, 3]]))
    assert cell_orderings(data, 3, 4).owner.numel() == math.factorial(4)
