"""The fused CPU kernel of ``sparse_attention`` against its composable formulation."""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.attention import sparse as sparse_module
from topomodelx_attention.nn.attention import sparse_attention, sparse_plan
from topomodelx_attention.nn.attention.scatter import (
    segment_softmax,
    segment_softmax_sorted,
    segment_sum_sorted,
)

HEADS, D, DV = 3, 4, 5


def _edges(gen: torch.Generator, n_t: int, n_s: int, nnz: int, shuffle: bool):
    """Coalesced (sorted by target) random edges; targets ``n_t - 3 ..`` have no source."""
    t = torch.randint(0, n_t - 3, (nnz,), generator=gen)
    s = torch.randint(0, n_s, (nnz,), generator=gen)
    index = torch.unique(torch.stack([t, s]), dim=1)
    if shuffle:
        index = index[:, torch.randperm(index.shape[1], generator=gen)]
    return index[0], index[1]


def _run(fused: bool, monkeypatch, q, k, v, edges, bias=None, dropout_p=0.0):
    """Output and gradients (q, k, v, bias) of one call; the dropout generator is reseeded."""
    monkeypatch.setattr(sparse_module, "_use_fused", lambda *args: fused)
    inputs = [x.clone().requires_grad_() for x in (q, k, v)]
    bias = None if bias is None else bias.clone().requires_grad_()
    torch.manual_seed(3)
    out = sparse_attention(
        *inputs, edges, edge_bias=bias, dropout_p=dropout_p, training=dropout_p > 0
    )
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    (out * weights).sum().backward()
    grads = [x.grad for x in inputs] + ([] if bias is None else [bias.grad])
    return out, grads


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("bias_shape", [None, "nnz", "nnz_1", "nnz_heads"])
@pytest.mark.parametrize("dropout_p", [0.0, 0.4])
def test_fused_equals_composable(gen, monkeypatch, shuffle, bias_shape, dropout_p):
    n_t, n_s = 17, 13
    index_t, index_s = _edges(gen, n_t, n_s, 60, shuffle)
    kw = {"generator": gen, "dtype": torch.float64}
    q, k = torch.randn(n_t, HEADS, D, **kw), torch.randn(n_s, HEADS, D, **kw)
    v = torch.randn(n_s, HEADS, DV, **kw)
    nnz = index_t.shape[0]
    bias = {
        None: None,
        "nnz": torch.randn(nnz, **kw),
        "nnz_1": torch.randn(nnz, 1, **kw),
        "nnz_heads": torch.randn(nnz, HEADS, **kw),
    }[bias_shape]
    out_ref, grads_ref = _run(False, monkeypatch, q, k, v, (index_t, index_s), bias, dropout_p)
    out, grads = _run(True, monkeypatch, q, k, v, (index_t, index_s), bias, dropout_p)
    assert out.grad_fn.name() == "_FusedSparseAttentionBackward"
    torch.testing.assert_close(out, out_ref, atol=1e-12, rtol=1e-10)
    assert out[n_t - 3 :].abs().max() == 0  # targets without a source
    for grad, grad_ref in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(grad, grad_ref, atol=1e-12, rtol=1e-10)


def test_fused_float32_close_to_composable(gen, monkeypatch):
    index_t, index_s = _edges(gen, 40, 30, 200, False)
    q, k, v = (torch.randn(n, HEADS, D, generator=gen) for n in (40, 30, 30))
    out_ref, grads_ref = _run(False, monkeypatch, q, k, v, (index_t, index_s))
    out, grads = _run(True, monkeypatch, q, k, v, (index_t, index_s))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, out_ref, atol=1e-6, rtol=1e-5)
    for grad, grad_ref in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(grad, grad_ref, atol=1e-6, rtol=1e-5)


def test_fused_all_masked_target_gives_zeros_and_finite_gradients(gen, monkeypatch):
    index_t, index_s = _edges(gen, 12, 9, 50, False)
    q, k, v = (torch.randn(n, HEADS, D, generator=gen, dtype=torch.float64) for n in (12, 9, 9))
    bias = torch.zeros(index_t.shape[0], HEADS, dtype=torch.float64)
    bias[index_t == index_t[0]] = float("-inf")  # every source of the first target masked
    out, grads = _run(True, monkeypatch, q, k, v, (index_t, index_s), bias)
    assert out[index_t[0]].abs().max() == 0
    assert all(torch.isfinite(g).all() for g in grads)
    assert grads[0][index_t[0]].abs().max() == 0


def test_fused_double_backward(gen):
    index_t, index_s = _edges(gen, 8, 7, 25, True)
    q, k, v = (torch.randn(n, 2, 3, generator=gen, dtype=torch.float64) for n in (8, 7, 7))
    bias = torch.randn(index_t.shape[0], 2, generator=gen, dtype=torch.float64)
    inputs = tuple(x.requires_grad_() for x in (q, k, v, bias))

    def fn(q, k, v, bias):
        return sparse_attention(q, k, v, (index_t, index_s), edge_bias=bias)

    assert fn(*inputs).grad_fn.name() == "_FusedSparseAttentionBackward"
    assert torch.autograd.gradcheck(fn, inputs)
    assert torch.autograd.gradgradcheck(fn, inputs)


def test_segment_softmax_sorted_equals_segment_softmax(gen):
    index = torch.sort(torch.randint(0, 9, (40,), generator=gen)).values
    scores = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    scores[index == index[0]] = float("-inf")
    lengths = torch.bincount(index, minlength=11).expand(3, 11).contiguous()
    sorted_ = segment_softmax_sorted(scores.t().contiguous(), index, lengths).t()
    torch.testing.assert_close(sorted_, segment_softmax(scores, index, 11), atol=1e-15, rtol=0)
    assert sorted_[index == index[0]].abs().max() == 0


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("rows", [1, 3])
def test_segment_sum_sorted_equals_segment_reduce(gen, rows, dtype):
    """Bit-identical to ``torch.segment_reduce`` (the one-row path adds in the same order),
    with empty segments (zeros), a segment of 5,000 entries and an empty last segment."""
    lengths = torch.tensor([0, 3, 1, 0, 5000, 2, 0])
    index = torch.repeat_interleave(torch.arange(7), lengths).to(dtype)
    values = torch.randn(rows, int(lengths.sum()), generator=gen)
    expected = torch.segment_reduce(
        values, "sum", lengths=lengths.expand(rows, 7).contiguous(), axis=1, unsafe=True
    )
    got = segment_sum_sorted(values, index, lengths.expand(rows, 7).contiguous())
    assert got.shape == (rows, 7) and torch.equal(got, expected)
    assert got[:, [0, 3, 6]].abs().max() == 0


@pytest.mark.parametrize("transposed", [True, False])
@pytest.mark.parametrize("shuffle", [False, True])
def test_shared_plan_gives_the_same_outputs_and_gradients(gen, monkeypatch, shuffle, transposed):
    """A plan built once (sparse_plan) = the plan each call builds itself, bias and dropout included."""
    n_t, n_s = 15, 11
    index_t, index_s = _edges(gen, n_t, n_s, 50, shuffle)
    kw = {"generator": gen, "dtype": torch.float64}
    q, k = torch.randn(n_t, HEADS, D, **kw), torch.randn(n_s, HEADS, D, **kw)
    v = torch.randn(n_s, HEADS, DV, **kw)
    bias = torch.randn(index_t.shape[0], HEADS, **kw)
    edges = (index_t, index_s)
    plan = sparse_plan(edges, HEADS, n_target=n_t, n_source=n_s, transposed=transposed)
    assert (plan.order is None) == (not shuffle)
    assert (plan.crow_t is not None) == transposed  # else the backward builds it
    monkeypatch.setattr(sparse_module, "_use_fused", lambda *args: True)
    results = []
    for given in (None, plan):
        inputs = [x.clone().requires_grad_() for x in (q, k, v, bias)]
        torch.manual_seed(5)
        out = sparse_attention(
            *inputs[:3], edges, edge_bias=inputs[3], dropout_p=0.3, training=True, plan=given
        )
        out.pow(2).sum().backward()
        results.append([out] + [x.grad for x in inputs])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_shared_plan_is_not_written_by_the_kernel(gen, monkeypatch):
    """The SDDMMs write into a fresh values buffer on the plan's index tensors (sampled_addmm
    with out=its input): two forward + backward passes leave every index of the plan as it was
    and give the same results."""
    n_t, n_s = 15, 11
    index_t, index_s = _edges(gen, n_t, n_s, 50, False)
    kw = {"generator": gen, "dtype": torch.float64}
    q, k = torch.randn(n_t, HEADS, D, **kw), torch.randn(n_s, HEADS, D, **kw)
    v = torch.randn(n_s, HEADS, DV, **kw)
    edges = (index_t, index_s)
    plan = sparse_plan(edges, HEADS, n_target=n_t, n_source=n_s)
    fields = ("crow", "col", "row", "lengths", "position", "crow_t", "col_t", "to_transposed")
    snapshot = {name: getattr(plan, name).clone() for name in fields}
    monkeypatch.setattr(sparse_module, "_use_fused", lambda *args: True)
    results = []
    for _ in range(2):
        inputs = [x.clone().requires_grad_() for x in (q, k, v)]
        out = sparse_attention(*inputs, edges, plan=plan)
        out.pow(2).sum().backward()
        results.append([out] + [x.grad for x in inputs])
    for name in fields:
        assert torch.equal(getattr(plan, name), snapshot[name]), name
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)


def test_plan_of_another_neighbourhood_is_refused(gen):
    index_t, index_s = _edges(gen, 10, 8, 30, False)
    q, k, v = (torch.randn(n, HEADS, D, generator=gen) for n in (10, 8, 8))
    wrong_heads = sparse_plan((index_t, index_s), HEADS + 1, n_target=10, n_source=8)
    with pytest.raises(ValueError, match="heads"):
        sparse_attention(q, k, v, (index_t, index_s), plan=wrong_heads)
    fewer = sparse_plan((index_t[:-1], index_s[:-1]), HEADS, n_target=10, n_source=8)
    with pytest.raises(ValueError, match="entries"):
        sparse_attention(q, k, v, (index_t, index_s), plan=fewer)
    with pytest.raises(ValueError, match="n_target and n_source"):
        sparse_plan((index_t, index_s), HEADS)


def test_plan_pattern_is_node_major(gen):
    """Row t·H + h of the plan's CSR holds head h of target t: the dense operands need no copy."""
    index_t, index_s = _edges(gen, 9, 7, 25, True)
    plan = sparse_plan((index_t, index_s), 2, n_target=9, n_source=7)
    dense = torch.sparse_csr_tensor(
        plan.crow, plan.col, torch.ones(plan.col.shape[0]), (18, 14)
    ).to_dense()
    expected = torch.zeros(18, 14)
    for t, s in zip(index_t.tolist(), index_s.tolist(), strict=True):
        for h in range(2):
            expected[2 * t + h, 2 * s + h] = 1
    assert torch.equal(dense, expected)
    transposed = torch.sparse_csr_tensor(
        plan.crow_t, plan.col_t, torch.ones(plan.col_t.shape[0]), (14, 18)
    )
    assert torch.equal(transposed.to_dense(), expected.t())
