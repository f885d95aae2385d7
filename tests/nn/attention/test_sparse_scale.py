"""The sparse plan at scale: radix argsort, int32 plan indices, transposes without ``coalesce``.

Every changed path is checked against an independent formulation: ``torch.argsort(stable=True)``
for the radix sort, ``Tensor.t().coalesce()`` for the transposes, the composable gather /
segment-softmax / scatter kernel (``_sparse_attention_composable``) for the fused kernel on a
neighbourhood large enough (> 2¹⁶ rows) to take the two-digit radix path. No timing here:
speed is measured in ``benchmarks/cellular_transformer.py --tables scaling``.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers import assert_same_sparse, random_coalesced
from topomodelx_attention.nn.attention import sparse as sparse_module
from topomodelx_attention.nn.attention import sparse_attention, sparse_plan
from topomodelx_attention.nn.attention.fused import fused_slots, prepare_fused
from topomodelx_attention.nn.attention.multihead import MultiHeadAttention
from topomodelx_attention.nn.attention.plan import stable_argsort
from topomodelx_attention.nn.cell import CellularTransformerLayer
from topomodelx_attention.nn.cell.structure import transposed


@pytest.mark.parametrize(
    ("size", "n"),
    [(1, 0), (1, 1), (7, 50), (30_000, 5_000), (70_000, 200_000), (3_000_000, 100_000)],
)
def test_stable_argsort_equals_torch_stable_argsort(size, n):
    gen = torch.Generator().manual_seed(size + n)
    index = torch.randint(0, size, (n,), generator=gen)
    # many ties: stability is visible
    index[: n // 2] = index[: n // 2] % 17
    got = stable_argsort(index, size)
    assert torch.equal(got, torch.argsort(index, stable=True))


def test_stable_argsort_beyond_32_bits_uses_torch():
    index = torch.tensor([2**33, 5, 2**33, 0])
    assert torch.equal(stable_argsort(index, 2**34), torch.tensor([3, 1, 0, 2]))


@pytest.mark.parametrize(("rows", "cols", "nnz"), [(5, 4, 0), (3, 1, 1), (40, 90_000, 3_000)])
def test_transposed_equals_coalesced_transpose(rows, cols, nnz):
    matrix = random_coalesced(rows, cols, nnz, seed=rows)
    assert_same_sparse(transposed(matrix), matrix.t().coalesce())


def _large_edges(gen, n_t, n_s, nnz):
    t = torch.randint(0, n_t, (nnz,), generator=gen)
    s = torch.randint(0, n_s, (nnz,), generator=gen)
    index = torch.unique(torch.stack([t, s]), dim=1)
    return index[:, torch.randperm(index.shape[1], generator=gen)]  # unsorted: the plan sorts


def test_plan_indices_are_int32_and_large_plan_matches_composable():
    gen = torch.Generator().manual_seed(0)
    heads, d = 2, 3
    n_t, n_s = 70_000, 80_000  # beyond 16 bits: the two-digit radix sort of both orders
    edges = _large_edges(gen, n_t, n_s, 90_000)
    plan = sparse_plan(tuple(edges), heads, n_target=n_t, n_source=n_s)
    assert plan.col.dtype == plan.col_t.dtype == torch.int32
    assert plan.row.dtype == plan.to_transposed.dtype == torch.int32
    assert plan.order is not None and torch.equal(
        plan.order, torch.argsort(edges[0], stable=True)
    )
    q = torch.randn(n_t, heads, d, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(n_s, heads, d, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(n_s, heads, d, generator=gen, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(n_t, heads, d, generator=gen, dtype=torch.float64)
    out = sparse_attention(q, k, v, tuple(edges), plan=plan)
    grads = torch.autograd.grad((out * weights).sum(), (q, k, v))
    ref = sparse_module._sparse_attention_composable(
        q, k, v, edges[0], edges[1], d**-0.5, None, 0.0
    )
    ref_grads = torch.autograd.grad((ref * weights).sum(), (q, k, v))
    assert torch.allclose(out, ref, atol=1e-12, rtol=0)
    for got, want in zip(grads, ref_grads):
        assert torch.allclose(got, want, atol=1e-12, rtol=0)


def test_prepare_fused_sorts_like_torch_argsort():
    """The joined edge list of many blocks is ordered exactly as a stable comparison sort."""
    gen = torch.Generator().manual_seed(1)
    sizes = (40_000, 30_000)
    pairs = [(0, 0), (1, 0), (0, 1), (1, 1)]
    blocks = [MultiHeadAttention(8, 8, 2, kind="sparse") for _ in pairs]
    matrices = []
    for s, t in pairs:
        index = _large_edges(gen, sizes[t], sizes[s], 20_000)
        matrices.append(torch.sparse_coo_tensor(index, torch.ones(index.shape[1]), (sizes[t], sizes[s])).coalesce())
    fused = prepare_fused(blocks, pairs, matrices, sizes, transposed=True)
    # the same joined list, sorted by torch.argsort, must give the same index
    slots = fused_slots(pairs, sizes)
    query = []
    for i, ((_, t), m) in enumerate(zip(pairs, matrices)):
        query.append(m.indices()[0] * len(slots.targets[t]) + slots.q_offsets[t] + slots.targets[t].index(i))
    query = torch.cat(query)
    assert torch.equal(fused.index.index_target, query[torch.argsort(query, stable=True)])


def _grid(side: int):
    """Index-level square grid: vertices, edges, squares and the CT's five neighbourhoods."""
    import numpy as np

    idx = np.arange(side * side).reshape(side, side)
    edges = np.concatenate(
        [np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1), np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)]
    )
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    n0, n1 = side * side, edges.shape[0]
    key = {(int(u), int(v)): e for e, (u, v) in enumerate(edges)}
    corners = idx[:-1, :-1].ravel()
    rows, cols = [], []
    for c, v in enumerate(corners):
        cycle = [v, v + 1, v + side + 1, v + side]
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            rows.append(key[(min(a, b), max(a, b))])
            cols.append(c)
    n2 = len(corners)

    def coo(r, c, shape):
        r, c = torch.as_tensor(np.asarray(r)), torch.as_tensor(np.asarray(c))
        return torch.sparse_coo_tensor(torch.stack([r, c]), torch.ones(r.shape[0], dtype=torch.float64), shape).coalesce()

    b1 = coo(edges.ravel(), np.repeat(np.arange(n1), 2), (n0, n1))
    b2 = coo(rows, cols, (n1, n2))

    def adjacency(m):
        a = torch.sparse.mm(m, m.t()).coalesce()
        i = a.indices()
        keep = i[0] != i[1]
        return coo(i[0][keep], i[1][keep], tuple(a.shape))

    neighborhoods = {
        "incidence_1": b1, "incidence_2": b2, "adjacency_0": adjacency(b1),
        "coadjacency_1": adjacency(b1.t().coalesce()), "coadjacency_2": adjacency(b2.t().coalesce()),
    }
    return (n0, n1, n2), neighborhoods


def test_ct_layer_large_complex_matches_composable_kernel(monkeypatch):
    """A pairwise-sparse CT layer on > 2¹⁵ joined rows: fused plan (radix) = composable kernel."""
    sizes, neighborhoods = _grid(75)
    gen = torch.Generator().manual_seed(2)
    x = [torch.randn(n, 8, generator=gen, dtype=torch.float64) for n in sizes]
    batch = [torch.zeros(n, dtype=torch.long) for n in sizes]
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2, max_rank=2).double()
    structure = layer.prepare(neighborhoods, batch, 1)
    assert structure.fused.plan.shape[1] > 2**15

    def run(fused: bool):
        monkeypatch.setattr(sparse_module, "_use_fused", lambda *args: fused)
        inputs = [xr.clone().requires_grad_() for xr in x]
        out = layer(inputs, neighborhoods, batch, 1)
        weights = [torch.linspace(-1, 1, o.numel(), dtype=o.dtype).view_as(o) for o in out]
        total = sum((o * w).sum() for o, w in zip(out, weights))
        params = list(layer.parameters())
        grads = torch.autograd.grad(total, inputs + params)
        return out, grads

    out, grads = run(True)
    ref, ref_grads = run(False)
    for got, want in zip(out, ref):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    # parameter gradients are sums over ~22,000 cells (entries up to ~10²): relative 1e-12
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)
