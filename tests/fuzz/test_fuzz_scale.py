"""Fuzz: the sparse plan's linear-time sorts on random index ranges.

* random index vectors over ranges below and above 16 bits (many ties, empty, one entry):
  the radix ``stable_argsort`` equals ``torch.argsort(stable=True)``;
* random coalesced sparse matrices (empty, one column, > 2¹⁶ columns): the CT layer's
  transpose equals ``t().coalesce()`` (indices and values);
* random neighbourhoods (unsorted, targets without sources, index ranges above 16 bits): the
  fused kernel with its plan equals the composable kernel in float64 (outputs and input
  gradients), ACCEPTED with finite results.
"""

from __future__ import annotations

import torch

from tests.fuzz.cases import ACCEPT, run_cases
from tests.helpers import assert_same_sparse, random_coalesced
from topomodelx_attention.nn.attention import sparse as sparse_module
from topomodelx_attention.nn.attention import sparse_attention, sparse_plan
from topomodelx_attention.nn.attention.plan import stable_argsort
from topomodelx_attention.nn.cell.structure import transposed

RANGES = (1, 2, 100, 2**15 - 1, 2**15, 2**16 + 3, 300_000, 2**31)


def test_fuzz_radix_argsort_equals_stable_argsort(fuzz_seeds):
    def make(seed, rng):
        size = int(rng.choice(RANGES))
        n = int(rng.choice([0, 1, 50, 5_000]))
        ties = int(rng.choice([1, 3, size]))

        def run():
            gen = torch.Generator().manual_seed(seed)
            index = torch.randint(0, size, (n,), generator=gen) % max(1, min(size, ties))
            got = stable_argsort(index, size)
            assert torch.equal(got, torch.argsort(index, stable=True)), "order differs"

        return f"size={size} n={n} ties={ties}", ACCEPT, run

    run_cases(fuzz_seeds, "radix argsort", make, offset=51_000)


def test_fuzz_transpose_equals_coalesce(fuzz_seeds):
    def make(seed, rng):
        rows = int(rng.choice([1, 7, 300]))
        cols = int(rng.choice([1, 9, 2**16 + 5]))
        nnz = int(rng.choice([0, 1, 40, 2_000]))

        def run():
            matrix = random_coalesced(rows, cols, nnz, seed)
            assert_same_sparse(transposed(matrix), matrix.t().coalesce())

        return f"rows={rows} cols={cols} nnz={nnz}", ACCEPT, run

    run_cases(fuzz_seeds, "CT transpose", make, offset=52_000)


def test_fuzz_fused_plan_equals_composable(fuzz_seeds):
    def make(seed, rng):
        n_t = int(rng.choice([1, 5, 40_000]))
        n_s = int(rng.choice([1, 6, 70_000]))
        nnz = int(rng.choice([1, 30, 3_000]))
        heads = int(rng.choice([1, 2, 4]))

        def run():
            gen = torch.Generator().manual_seed(seed)
            index = torch.unique(
                torch.stack(
                    [torch.randint(0, n_t, (nnz,), generator=gen), torch.randint(0, n_s, (nnz,), generator=gen)]
                ),
                dim=1,
            )
            index = index[:, torch.randperm(index.shape[1], generator=gen)]
            plan = sparse_plan(tuple(index), heads, n_target=n_t, n_source=n_s)
            q, k, v = (
                torch.randn(n, heads, 3, generator=gen, dtype=torch.float64, requires_grad=True)
                for n in (n_t, n_s, n_s)
            )
            out = sparse_attention(q, k, v, tuple(index), plan=plan)
            ref = sparse_module._sparse_attention_composable(
                q, k, v, index[0], index[1], 3**-0.5, None, 0.0
            )
            weights = torch.randn(out.shape, generator=gen, dtype=torch.float64)
            grads = torch.autograd.grad((out * weights).sum(), (q, k, v))
            ref_grads = torch.autograd.grad((ref * weights).sum(), (q, k, v))
            assert bool(torch.isfinite(out).all()), "non-finite output"
            assert torch.allclose(out, ref, atol=1e-12, rtol=0), "output differs"
            for got, want in zip(grads, ref_grads):
                assert torch.allclose(got, want, atol=1e-12, rtol=0), "gradient differs"

        return f"n_t={n_t} n_s={n_s} nnz={nnz} heads={heads}", ACCEPT, run

    run_cases(fuzz_seeds, "fused plan", make, offset=53_000)
