"""Behaviour of the functional attention kernels (sparse / dense / linear)."""

from __future__ import annotations

import math

import pytest
import torch

from topomodelx_attention.nn.attention import (
    default_num_random_features,
    dense_attention,
    favor_features,
    linear_attention,
    merge_heads,
    neighborhood_index,
    orthogonal_random_matrix,
    scatter,
    sparse_attention,
    split_heads,
)
from topomodelx_attention.nn.attention import dense as dense_module
from topomodelx_attention.nn.attention import linear as linear_module
from topomodelx_attention.nn.attention import sparse as sparse_module

SIZES_T = [3, 4, 5, 2]
SIZES_S = [2, 5, 3, 4]
HEADS, D, DV = 2, 4, 3


def _cross_inputs(helpers, gen, scale: float = 1.0):
    bt, bs = helpers.batch_vector(SIZES_T), helpers.batch_vector(SIZES_S)
    q, k, v = helpers.qkv(bt.numel(), bs.numel(), HEADS, D, DV, gen, scale)
    return q, k, v, bt, bs


def _cross_case(helpers, gen):
    """Cross-attention inputs, a random neighbourhood within the complexes, FAVOR+ features."""
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.6, gen)
    projection = orthogonal_random_matrix(32, D, generator=gen, dtype=torch.float64)
    return q, k, v, bt, bs, mask, projection


def _run(kind, q, k, v, bt, bs, mask=None, projection=None, num_complexes=None):
    """Run one kind; ``mask`` is the dense neighbourhood (sparse kind only)."""
    if kind == "sparse":
        return sparse_attention(q, k, v, mask.nonzero().t())
    if kind == "dense":
        return dense_attention(q, k, v, bt, bs, num_complexes=num_complexes)
    return linear_attention(q, k, v, bt, bs, projection=projection, num_complexes=num_complexes)


# ----------------------------------------------------------------------------------------------
# agreement with references
# ----------------------------------------------------------------------------------------------
def test_sparse_with_full_blocks_equals_dense(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    full = bt[:, None] == bs[None, :]
    out_sparse = sparse_attention(q, k, v, helpers.to_sparse(full))
    out_dense = dense_attention(q, k, v, bt, bs)
    assert out_sparse.shape == (bt.numel(), HEADS, DV)
    torch.testing.assert_close(out_sparse, out_dense, atol=1e-12, rtol=1e-10)


def test_sparse_self_attention_full_blocks_equals_dense(helpers, gen):
    batch = helpers.batch_vector([4, 1, 6])
    q, k, v = helpers.qkv(11, 11, 3, 5, 2, gen)
    full = batch[:, None] == batch[None, :]
    torch.testing.assert_close(
        sparse_attention(q, k, v, helpers.to_sparse(full)),
        dense_attention(q, k, v, batch, batch),
        atol=1e-12,
        rtol=1e-10,
    )


def test_sparse_matches_naive_masked_softmax(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.5, gen)
    mask[0] = False  # a target without any source
    out = sparse_attention(q, k, v, helpers.to_sparse(mask))
    torch.testing.assert_close(out, helpers.naive(q, k, v, mask), atol=1e-12, rtol=1e-10)
    assert torch.equal(out[0], torch.zeros_like(out[0]))


def test_sparse_uses_mask_not_values(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.6, gen)
    weights = torch.rand(mask.shape, generator=gen, dtype=torch.float64) + 0.5
    out_ones = sparse_attention(q, k, v, helpers.to_sparse(mask))
    out_weighted = sparse_attention(q, k, v, helpers.to_sparse(mask, weights))
    torch.testing.assert_close(out_ones, out_weighted, atol=0, rtol=0)


def test_sparse_edge_bias_and_scale(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.7, gen)
    sparse = helpers.to_sparse(mask)
    idx = sparse.indices()
    edge_bias = torch.randn(idx.shape[1], HEADS, generator=gen, dtype=torch.float64)
    dense_bias = torch.zeros(HEADS, *mask.shape, dtype=torch.float64)
    dense_bias[:, idx[0], idx[1]] = edge_bias.t()
    out = sparse_attention(q, k, v, sparse, edge_bias=edge_bias, scale=0.3)
    ref = helpers.naive(q, k, v, mask, bias=dense_bias, scale=0.3)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_sparse_accepts_all_neighbourhood_formats(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.5, gen)
    sparse = helpers.to_sparse(mask)
    ref = sparse_attention(q, k, v, sparse)
    idx = sparse.indices()
    # edge index, index pair, CSR, uncoalesced COO (shuffled, unsorted entries)
    shuffled = idx[:, torch.randperm(idx.shape[1], generator=gen)]
    uncoalesced = torch.sparse_coo_tensor(
        shuffled, torch.ones(idx.shape[1]), tuple(mask.shape), check_invariants=True
    )
    for nb in (idx, (idx[0], idx[1]), [idx[0], idx[1]], sparse.to_sparse_csr(), uncoalesced):
        torch.testing.assert_close(sparse_attention(q, k, v, nb), ref, atol=1e-12, rtol=1e-10)


def test_dense_matches_naive_per_complex_with_bias(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    nmask = helpers.block_mask(bt, bs, 0.5, gen)
    nvalues = torch.rand(nmask.shape, generator=gen, dtype=torch.float64) * 2
    neighborhood = helpers.to_sparse(nmask, nvalues)
    theta = torch.tensor([0.7, -1.3], dtype=torch.float64)
    out = dense_attention(q, k, v, bt, bs, bias=neighborhood, bias_scale=theta)
    # naive reference: loop over complexes, dense softmax with torch
    ref = torch.zeros_like(out)
    for b in range(len(SIZES_T)):
        t, s = (bt == b).nonzero().flatten(), (bs == b).nonzero().flatten()
        n_block = (nvalues * nmask)[t][:, s]
        scores = torch.einsum("thd,shd->hts", q[t], k[s]) / math.sqrt(D)
        scores = scores + theta.view(-1, 1, 1) * n_block
        ref[t] = torch.einsum("hts,shd->thd", torch.softmax(scores, -1), v[s])
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    # a shared scalar θ equals the same θ repeated per head
    shared = dense_attention(q, k, v, bt, bs, bias=neighborhood, bias_scale=torch.tensor(0.7))
    per_head = dense_attention(
        q, k, v, bt, bs, bias=neighborhood, bias_scale=torch.full((HEADS,), 0.7)
    )
    torch.testing.assert_close(shared, per_head, atol=1e-12, rtol=1e-10)
    assert not torch.allclose(shared, out)


def test_dense_bias_with_per_head_values(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.5, gen)
    idx = mask.nonzero().t()
    per_head = torch.randn(idx.shape[1], HEADS, generator=gen, dtype=torch.float64)
    hybrid = torch.sparse_coo_tensor(
        idx, per_head, (*mask.shape, HEADS), check_invariants=True
    ).coalesce()
    out = dense_attention(q, k, v, bt, bs, bias=hybrid)
    dense_bias = torch.zeros(HEADS, *mask.shape, dtype=torch.float64)
    dense_bias[:, idx[0], idx[1]] = per_head.t()
    same = bt[:, None] == bs[None, :]
    torch.testing.assert_close(out, helpers.naive(q, k, v, same, bias=dense_bias))


def test_empty_neighbourhoods(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    empty = torch.sparse_coo_tensor(
        torch.zeros(2, 0, dtype=torch.long),
        torch.zeros(0, dtype=torch.float64),
        (14, 14),
        check_invariants=True,
    )
    plain = dense_attention(q, k, v, bt, bs)
    torch.testing.assert_close(dense_attention(q, k, v, bt, bs, bias=empty, bias_scale=2.0), plain)
    out = sparse_attention(q, k, v, empty)
    assert torch.equal(out, torch.zeros_like(out))


def test_dense_bias_index_pair_means_unit_values(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    nmask = helpers.block_mask(bt, bs, 0.5, gen)
    sparse = helpers.to_sparse(nmask)
    a = dense_attention(q, k, v, bt, bs, bias=sparse, bias_scale=2.0)
    b = dense_attention(q, k, v, bt, bs, bias=sparse.indices(), bias_scale=2.0)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)
    c = dense_attention(q, k, v, bt, bs)
    assert not torch.allclose(a, c)


def test_dense_gradient_wrt_theta_matches_finite_differences(helpers, gen):
    bt, bs = helpers.batch_vector([2, 3]), helpers.batch_vector([3, 2])
    q, k, v = helpers.qkv(5, 5, HEADS, 2, 2, gen)
    neighborhood = helpers.to_sparse(helpers.block_mask(bt, bs, 0.6, gen))
    theta = torch.tensor([0.5, -0.2], dtype=torch.float64, requires_grad=True)
    inputs = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), theta)

    def f(q, k, v, theta):
        return dense_attention(q, k, v, bt, bs, bias=neighborhood, bias_scale=theta)

    assert torch.autograd.gradcheck(f, inputs)


def test_sparse_gradcheck(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.5, gen)
    mask[1] = False
    nb = helpers.to_sparse(mask)
    q.requires_grad_()
    k.requires_grad_()
    v.requires_grad_()
    assert torch.autograd.gradcheck(lambda q, k, v: sparse_attention(q, k, v, nb), (q, k, v))


def test_sparse_double_backward(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = helpers.block_mask(bt, bs, 0.6, gen)
    nb = mask.nonzero().t()
    inputs = tuple(t.requires_grad_() for t in (q, k, v))
    assert torch.autograd.gradgradcheck(lambda q, k, v: sparse_attention(q, k, v, nb), inputs)


def test_sparse_chunking_gives_same_values_and_gradients(helpers, gen, monkeypatch):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    nb = helpers.block_mask(bt, bs, 0.6, gen).nonzero().t()

    def run():
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        out = sparse_attention(*inputs, nb)
        (out * torch.arange(out.numel()).view_as(out)).sum().backward()
        return [out] + [t.grad for t in inputs]

    # chunking lives in the composable path (CPU float otherwise runs the fused CSR kernel)
    monkeypatch.setattr(sparse_module, "_use_fused", lambda *args: False)
    whole = run()
    monkeypatch.setattr(sparse_module, "SPARSE_CHUNK_ELEMENTS", 5)  # about one edge per chunk
    for a, b in zip(run(), whole):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_linear_approximates_dense(helpers, gen):
    # small inputs: FAVOR+ variance grows like exp(|q + k|^2), so the test keeps logits moderate
    q, k, v, bt, bs = _cross_inputs(helpers, gen, scale=0.5)
    projection = orthogonal_random_matrix(4096, D, generator=gen, dtype=torch.float64)
    exact = dense_attention(q, k, v, bt, bs)
    approx = linear_attention(q, k, v, bt, bs, projection=projection)
    rel = (approx - exact).norm() / exact.norm()
    assert rel < 0.1
    # one complex (batch vectors None) takes the matmul path
    exact1 = dense_attention(q, k, v)
    approx1 = linear_attention(q, k, v, projection=projection)
    assert (approx1 - exact1).norm() / exact1.norm() < 0.1
    # few features are much worse than many: the approximation really depends on m
    few = orthogonal_random_matrix(4, D, generator=gen, dtype=torch.float64)
    rel_few = (linear_attention(q, k, v, bt, bs, projection=few) - exact).norm() / exact.norm()
    assert rel_few > rel


def test_linear_strategies_and_chunks_agree(helpers, gen, monkeypatch):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    projection = orthogonal_random_matrix(16, D, generator=gen, dtype=torch.float64)
    outs = [
        linear_attention(q, k, v, bt, bs, projection=projection, strategy=s)
        for s in ("auto", "scatter", "padded")
    ]
    monkeypatch.setattr(linear_module, "LINEAR_CHUNK_ELEMENTS", 1)  # one token per chunk
    outs.append(linear_attention(q, k, v, bt, bs, projection=projection, strategy="scatter"))
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], atol=1e-12, rtol=1e-10)


def test_linear_single_complex_equals_batched_with_one_complex(helpers, gen):
    q, k, v = helpers.qkv(7, 9, HEADS, D, DV, gen)
    projection = orthogonal_random_matrix(32, D, generator=gen, dtype=torch.float64)
    zeros_t, zeros_s = torch.zeros(7, dtype=torch.long), torch.zeros(9, dtype=torch.long)
    a = linear_attention(q, k, v, projection=projection)
    for strategy in ("scatter", "padded"):
        b = linear_attention(q, k, v, zeros_t, zeros_s, projection=projection, strategy=strategy)
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_linear_stabiliser_cancels_and_survives_large_logits(helpers, gen):
    q, k, v = helpers.qkv(6, 8, 1, D, DV, gen, scale=0.5)
    projection = orthogonal_random_matrix(64, D, generator=gen, dtype=torch.float64)

    def unstabilised(q, k):
        phi_q = favor_features(q * D**-0.25, projection, True, stabilize=False)
        phi_k = favor_features(k * D**-0.25, projection, False, stabilize=False)
        weights = torch.einsum("thm,shm->hts", phi_q, phi_k)
        return torch.einsum("hts,shd->thd", weights / weights.sum(-1, keepdim=True), v)

    torch.testing.assert_close(linear_attention(q, k, v, projection=projection), unstabilised(q, k))
    # huge logits: the unstabilised estimator under/overflows (NaN), the stabilised one does not
    out = linear_attention(q * 60, k * 60, v, projection=projection)
    assert not torch.isfinite(unstabilised(q * 60, k * 60)).all()
    assert torch.isfinite(out).all()
    # positive features: every output is a convex combination of the values
    assert (out >= v.amin(0, keepdim=True) - 1e-9).all()
    assert (out <= v.amax(0, keepdim=True) + 1e-9).all()


@pytest.mark.parametrize("kind", ["sparse", "dense", "linear"])
def test_no_leakage_between_complexes(helpers, gen, kind):
    q, k, v, bt, bs, mask, projection = _cross_case(helpers, gen)
    out = _run(kind, q, k, v, bt, bs, mask, projection)
    k2, v2, q2 = k.clone(), v.clone(), q.clone()
    k2[bs == 1] *= 5.0
    v2[bs == 1] += 3.0
    q2[bt == 1] -= 1.0
    out2 = _run(kind, q2, k2, v2, bt, bs, mask, projection)
    other = bt != 1
    torch.testing.assert_close(out2[other], out[other], atol=1e-12, rtol=1e-10)
    assert not torch.allclose(out2[~other], out[~other])


@pytest.mark.parametrize("kind", ["sparse", "dense", "linear"])
def test_batched_equals_per_complex(helpers, gen, kind):
    q, k, v, bt, bs, mask, projection = _cross_case(helpers, gen)
    out = _run(kind, q, k, v, bt, bs, mask, projection)
    for b in range(len(SIZES_T)):
        t, s = bt == b, bs == b
        alone = _run(kind, q[t], k[s], v[s], None, None, mask[t][:, s], projection)
        torch.testing.assert_close(out[t], alone, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("kind", ["sparse", "dense", "dense_bias", "linear"])
def test_permutation_equivariance(helpers, gen, kind):
    batch = helpers.batch_vector([5, 3, 6])
    n = batch.numel()
    q, k, v = helpers.qkv(n, n, HEADS, D, DV, gen)
    mask = helpers.block_mask(batch, batch, 0.5, gen)
    projection = orthogonal_random_matrix(32, D, generator=gen, dtype=torch.float64)
    perm = helpers.perm_within(batch, gen)
    assert not torch.equal(perm, torch.arange(n))
    mask_p = mask[perm][:, perm]

    def run(q, k, v, mask):
        if kind == "dense_bias":
            nb = helpers.to_sparse(mask)
            return dense_attention(
                q, k, v, batch, batch, bias=nb, bias_scale=torch.tensor([1.0, 2.0])
            )
        return _run(kind, q, k, v, batch, batch, mask, projection)

    out = run(q, k, v, mask)
    out_p = run(q[perm], k[perm], v[perm], mask_p)
    torch.testing.assert_close(out_p, out[perm], atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# empty neighbourhoods: zeros, never NaN, finite gradients
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sparse", "dense", "linear"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_targets_without_sources_get_zeros(helpers, gen, kind, dtype):
    bt = helpers.batch_vector([3, 2, 4])
    bs = helpers.batch_vector([2, 0, 3])  # complex 1 has no source token
    q, k, v = (t.to(dtype).requires_grad_() for t in helpers.qkv(9, 5, HEADS, D, DV, gen))
    mask = helpers.block_mask(bt, bs, 1.0, gen)
    mask[0] = False  # an isolated target in complex 0 (sparse kind)
    projection = orthogonal_random_matrix(16, D, generator=gen, dtype=dtype)
    out = _run(kind, q, k, v, bt, bs, mask, projection)
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    assert torch.equal(out[bt == 1], torch.zeros_like(out[bt == 1]))
    if kind == "sparse":
        assert torch.equal(out[0], torch.zeros_like(out[0]))
    (out**2).sum().backward()
    for t in (q, k, v):
        assert t.grad is not None
        assert torch.isfinite(t.grad).all()
    assert q.grad[bt == 0].abs().sum() > 0


@pytest.mark.parametrize("kind", ["sparse", "dense", "linear"])
def test_no_source_tokens_at_all(helpers, gen, kind):
    bt = helpers.batch_vector([3, 2])
    bs = torch.zeros(0, dtype=torch.long)
    q, k, v = helpers.qkv(5, 0, HEADS, D, DV, gen)
    q.requires_grad_()
    mask = torch.zeros(5, 0, dtype=torch.bool)
    projection = orthogonal_random_matrix(16, D, generator=gen, dtype=torch.float64)
    out = _run(kind, q, k, v, bt, bs, mask, projection, num_complexes=2)
    assert out.shape == (5, HEADS, DV)
    assert torch.equal(out, torch.zeros_like(out))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_dense_bias_gradient_finite_with_empty_complex(helpers, gen):
    bt = helpers.batch_vector([3, 2, 4])
    bs = helpers.batch_vector([2, 0, 3])
    q, k, v = helpers.qkv(9, 5, HEADS, D, DV, gen)
    nb = helpers.to_sparse(helpers.block_mask(bt, bs, 0.7, gen))
    theta = torch.ones(HEADS, dtype=torch.float64, requires_grad=True)
    out = dense_attention(q, k, v, bt, bs, bias=nb, bias_scale=theta, num_complexes=3)
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert torch.isfinite(theta.grad).all()
    assert theta.grad.abs().sum() > 0


def test_dense_survives_sdpa_that_returns_nan_on_fully_masked_rows(helpers, gen, monkeypatch):
    """Older torch versions / some kernels give NaN rows when every key is masked."""

    def naive_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, scale=None):
        scores = q @ k.transpose(-2, -1) * scale
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        elif attn_mask is not None:
            scores = scores + attn_mask
        return torch.softmax(scores, dim=-1) @ v  # NaN on fully masked rows

    monkeypatch.setattr(dense_module.F, "scaled_dot_product_attention", naive_sdpa)
    bt = helpers.batch_vector([3, 2, 4])
    bs = helpers.batch_vector([2, 0, 3])
    q, k, v = helpers.qkv(9, 5, HEADS, D, DV, gen)
    nb = helpers.to_sparse(helpers.block_mask(bt, bs, 0.7, gen))
    for bias in (None, nb):
        out = dense_attention(q, k, v, bt, bs, bias=bias, bias_scale=1.0)
        assert torch.isfinite(out).all()
        assert torch.equal(out[bt == 1], torch.zeros_like(out[bt == 1]))
        ref = torch.cat([dense_attention(q[bt == b], k[bs == b], v[bs == b]) for b in (0, 2)])
        if bias is None:
            torch.testing.assert_close(out[bt != 1], ref)


def test_dense_ignores_bias_entries_across_complexes(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    inside = helpers.block_mask(bt, bs, 0.5, gen)
    across = (bt[:, None] != bs[None, :]) & (torch.rand(inside.shape, generator=gen) < 0.3)
    assert across.any()
    a = dense_attention(q, k, v, bt, bs, bias=helpers.to_sparse(inside), bias_scale=1.5)
    b = dense_attention(q, k, v, bt, bs, bias=helpers.to_sparse(inside | across), bias_scale=1.5)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_linear_key_stabiliser_is_per_complex(helpers, gen):
    """Keys with huge logits in one complex must not underflow another complex's features."""
    bt, bs = helpers.batch_vector([3, 3]), helpers.batch_vector([4, 4])
    q, k, v = (t.float() for t in helpers.qkv(6, 8, 1, D, DV, gen, scale=0.5))
    # complex 0: keys of norm 30 in a narrow cone; their log-features are about -|k|^2 / 4 =
    # -225 (below log(float32 tiny)) for all of them, but differ by O(10) between each other
    cone = torch.nn.functional.normalize(torch.ones(4, 1, D) + 0.2 * k[bs == 0], dim=-1)
    k[bs == 0] = 30.0 * cone
    projection = orthogonal_random_matrix(64, D, generator=gen)
    out = linear_attention(q, k, v, bt, bs, projection=projection, strategy="scatter")
    alone = linear_attention(q[:3], k[:4], v[:4], projection=projection)
    assert torch.isfinite(out).all()
    assert alone.abs().sum() > 0
    torch.testing.assert_close(out[:3], alone)


def test_dense_num_complexes_with_trailing_empty_complexes(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    a = dense_attention(q, k, v, bt, bs)
    b = dense_attention(q, k, v, bt, bs, num_complexes=len(SIZES_T) + 3)
    torch.testing.assert_close(a, b, atol=0, rtol=0)


# ----------------------------------------------------------------------------------------------
# dropout
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_dropout_only_in_training(helpers, gen, kind):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    mask = bt[:, None] == bs[None, :]

    def run(**kw):
        if kind == "sparse":
            return sparse_attention(q, k, v, mask.nonzero().t(), **kw)
        return dense_attention(q, k, v, bt, bs, **kw)

    ref = run()
    torch.testing.assert_close(run(dropout_p=0.5, training=False), ref, atol=0, rtol=0)
    torch.manual_seed(0)
    dropped = run(dropout_p=0.5, training=True)
    assert not torch.allclose(dropped, ref)


# ----------------------------------------------------------------------------------------------
# random features
# ----------------------------------------------------------------------------------------------
def test_orthogonal_random_matrix_structure():
    g = torch.Generator().manual_seed(0)
    w = orthogonal_random_matrix(10, 4, generator=g, dtype=torch.float64)
    assert w.shape == (10, 4)
    block = w[:4]
    gram = block @ block.t()
    off_diag = gram - torch.diag(torch.diagonal(gram))
    assert off_diag.abs().max() < 1e-10  # rows of a block are orthogonal
    norms = w.norm(dim=1)
    assert norms.std() > 1e-3  # chi-distributed norms, not all equal
    again = orthogonal_random_matrix(10, 4, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(again, w.float())
    assert again.dtype == torch.get_default_dtype()


def test_favor_features_estimate_softmax_kernel():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 4, generator=g, dtype=torch.float64) * 0.4
    y = torch.randn(6, 4, generator=g, dtype=torch.float64) * 0.4
    w = orthogonal_random_matrix(20000, 4, generator=g, dtype=torch.float64)
    fx = favor_features(x, w, True, stabilize=False)
    fy = favor_features(y, w, False, stabilize=False)
    assert (fx >= 0).all()
    ratio = (fx @ fy.t()) / torch.exp(x @ y.t())
    # relative std of one feature is sqrt(exp(|x + y|^2) - 1), here < 5 -> < 4 % with 20000
    assert (ratio - 1).abs().max() < 0.15
    assert (ratio - 1).abs().mean() < 0.03


def test_favor_key_stabiliser_is_constant_per_complex():
    g = torch.Generator().manual_seed(4)
    k = torch.randn(7, 2, 4, generator=g, dtype=torch.float64)
    batch = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    w = orthogonal_random_matrix(8, 4, generator=g, dtype=torch.float64)
    raw = favor_features(k, w, False, stabilize=False)
    stab = favor_features(k, w, False, batch=batch, num_complexes=3)
    ratio = raw / stab  # exp(c_b) for every token of complex b, per head
    for b in range(3):
        r = ratio[batch == b]
        torch.testing.assert_close(r, r[:1].expand_as(r))
    assert stab.max() <= 8**-0.5 + 1e-12


def test_default_num_random_features():
    assert default_num_random_features(8) == 32
    assert default_num_random_features(64) == math.ceil(64 * math.log(64))
    with pytest.raises(ValueError, match="head_dim"):
        default_num_random_features(0)


# ----------------------------------------------------------------------------------------------
# helpers, dtypes, backends, errors
# ----------------------------------------------------------------------------------------------
def test_split_merge_heads_roundtrip():
    x = torch.randn(5, 12)
    h = split_heads(x, 3)
    assert h.shape == (5, 3, 4)
    torch.testing.assert_close(merge_heads(h), x)
    with pytest.raises(ValueError, match="divide"):
        split_heads(x, 5)
    with pytest.raises(ValueError, match="3-D"):
        merge_heads(x)


@pytest.mark.parametrize("kind", ["sparse", "dense", "linear"])
def test_float32_matches_float64(helpers, gen, kind):
    q, k, v, bt, bs, mask, projection = _cross_case(helpers, gen)
    out64 = _run(kind, q, k, v, bt, bs, mask, projection)
    out32 = _run(kind, q.float(), k.float(), v.float(), bt, bs, mask, projection.float())
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32.double(), out64, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["sparse", "dense", "linear"])
def test_scatter_backends_agree(helpers, gen, kind):
    pytest.importorskip("torch_scatter")
    q, k, v, bt, bs, mask, projection = _cross_case(helpers, gen)
    previous = scatter.get_backend()
    try:
        scatter.set_backend("torch")
        a = _run(kind, q, k, v, bt, bs, mask, projection)
        scatter.set_backend("torch_scatter")
        b = _run(kind, q, k, v, bt, bs, mask, projection)
    finally:
        scatter.set_backend(previous)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_neighborhood_index_errors():
    dense = torch.ones(3, 4)
    with pytest.raises(ValueError, match=r"\(n_target, n_source\)"):
        neighborhood_index(dense.to_sparse(), 4, 3)
    with pytest.raises(TypeError, match="sparse"):
        neighborhood_index(dense, 3, 4)
    with pytest.raises(ValueError, match=r"\(2, nnz\)"):
        neighborhood_index(torch.zeros(3, 5, dtype=torch.long), 3, 4)
    with pytest.raises(ValueError, match="out of range"):
        neighborhood_index((torch.tensor([0, 3]), torch.tensor([0, 1])), 3, 4)
    with pytest.raises(ValueError, match="same length"):
        neighborhood_index((torch.tensor([0, 1]), torch.tensor([0])), 3, 4)
    with pytest.raises(TypeError, match="integer"):
        neighborhood_index((torch.tensor([0.0]), torch.tensor([0.0])), 3, 4)
    with pytest.raises(TypeError, match="pair"):
        neighborhood_index("edges", 3, 4)


def test_functional_input_errors(helpers, gen):
    q, k, v, bt, bs = _cross_inputs(helpers, gen)
    nb = (bt[:, None] == bs[None, :]).nonzero().t()
    w = orthogonal_random_matrix(8, D, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"\(n, heads, d\)"):
        sparse_attention(q[:, 0], k, v, nb)
    with pytest.raises(ValueError, match="same number of source tokens"):
        sparse_attention(q, k, v[:-1], nb)
    with pytest.raises(ValueError, match="heads"):
        dense_attention(q, k[:, :1], v[:, :1], bt, bs)
    with pytest.raises(ValueError, match="head dimension"):
        dense_attention(q, k[..., :2], v, bt, bs)
    with pytest.raises(TypeError, match="dtype"):
        dense_attention(q, k.float(), v, bt, bs)
    with pytest.raises(ValueError, match="batch_target"):
        dense_attention(q, k, v, bt[:-1], bs)
    with pytest.raises(ValueError, match="both"):
        dense_attention(q, k, v, bt, None)
    with pytest.raises(ValueError, match="sorted"):
        dense_attention(q, k, v, bt.flip(0), bs)
    with pytest.raises(ValueError, match="num_complexes"):
        dense_attention(q, k, v, bt, bs, num_complexes=2)
    with pytest.raises(ValueError, match="sorted"):
        linear_attention(q, k, v, bt, bs.flip(0), projection=w)
    with pytest.raises(ValueError, match="num_complexes must be 1"):
        dense_attention(q, k, v, num_complexes=3)
    with pytest.raises(ValueError, match="dropout_p"):
        sparse_attention(q, k, v, nb, dropout_p=1.5)
    with pytest.raises(ValueError, match="edge_bias"):
        sparse_attention(q, k, v, nb, edge_bias=torch.zeros(3, HEADS, dtype=torch.float64))
    with pytest.raises(ValueError, match="bias_scale"):
        dense_attention(q, k, v, bt, bs, bias=nb, bias_scale=torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="columns"):
        linear_attention(q, k, v, bt, bs, projection=w[:, :2])
    with pytest.raises(ValueError, match="strategy"):
        linear_attention(q, k, v, bt, bs, projection=w, strategy="fast")
    with pytest.raises(TypeError, match="long"):
        linear_attention(q, k, v, bt.float(), bs, projection=w)
