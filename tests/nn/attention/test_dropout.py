"""Attention dropout factors (``nn/attention/dropout.py``): distribution, kernels, compile.

That the fused sparse kernel and the composable path draw the same factors is
``test_sparse_fused.test_fused_equals_composable`` (``dropout_p=0.4``).
"""

from __future__ import annotations

import math

import pytest
import torch

from topomodelx_attention.nn.attention import (
    PaddedBias,
    dense_attention,
    padded_layout,
    size_groups,
)
from topomodelx_attention.nn.attention.dropout import dropout_factors, softmax_dropout
from topomodelx_attention.nn.attention.layout import SIZE_GROUP_OVERHEAD


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_factors_are_bernoulli_over_keep_probability(p):
    torch.manual_seed(0)
    f = dropout_factors((200, 500), p, dtype=torch.float64, device=torch.device("cpu"))
    assert f.shape == (200, 500) and f.dtype == torch.float64
    kept = f != 0
    torch.testing.assert_close(f[kept], torch.full_like(f[kept], 1.0 / (1.0 - p)))
    # 10^5 draws: the dropped fraction is p within 5 standard deviations
    sd = (p * (1 - p) / f.numel()) ** 0.5
    assert abs((~kept).double().mean().item() - p) < 5 * sd
    assert abs(f.mean().item() - 1.0) < 5 * sd / (1 - p)


def test_factors_follow_the_default_generator():
    kw = {"dtype": torch.float32, "device": torch.device("cpu")}
    torch.manual_seed(3)
    a = dropout_factors((7, 9), 0.3, **kw)
    b = dropout_factors((7, 9), 0.3, **kw)
    torch.manual_seed(3)
    torch.testing.assert_close(dropout_factors((7, 9), 0.3, **kw), a, atol=0, rtol=0)
    assert not torch.equal(a, b)  # successive draws differ


def test_dense_dropout_is_softmax_times_the_drawn_factors(helpers, gen):
    """Per complex: softmax(scale q kᵀ) ⊙ factors · v, with the factors the kernel draws."""
    sizes = [3, 5, 2]
    heads, d = 2, 4
    batch = helpers.batch_vector(sizes)
    q, k, v = helpers.qkv(batch.numel(), batch.numel(), heads, d, d, gen)
    torch.manual_seed(11)
    out = dense_attention(q, k, v, batch, batch, dropout_p=0.4, training=True)
    torch.manual_seed(11)
    length = max(sizes)
    factors = dropout_factors(
        (len(sizes), heads, length, length), 0.4, dtype=q.dtype, device=q.device
    )
    start = 0
    for b, n in enumerate(sizes):
        rows = slice(start, start + n)
        qb, kb, vb = (t[rows].transpose(0, 1) for t in (q, k, v))  # (heads, n, d)
        weights = torch.softmax(qb @ kb.transpose(1, 2) / d**0.5, dim=-1)
        expected = (weights * factors[b, :, :n, :n]) @ vb
        torch.testing.assert_close(out[rows], expected.transpose(0, 1))
        start += n


@pytest.mark.slow
def test_compiled_softmax_dropout_matches_eager_and_draws_twice():
    """Under torch.compile: the same factors as eager for one seed, gradients included, and two
    draws of one shape in one graph stay two draws (the ops are not merged)."""
    scores = torch.randn(3, 2, 5, 6, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(3, 2, 5, 6, dtype=torch.float64)

    def fn(s):
        return softmax_dropout(s, 0.5), softmax_dropout(s, 0.5)

    compiled = torch.compile(fn, fullgraph=True)
    results = []
    for f in (fn, compiled):
        torch.manual_seed(2)
        first, second = f(scores)
        (g,) = torch.autograd.grad((first * grad).sum() + second.sum(), scores)
        results.append((first, second, g))
    for eager, comp in zip(results[0], results[1]):
        torch.testing.assert_close(comp, eager)
    assert not torch.equal(results[1][0], results[1][1])


def _brute_force_cost(sizes: list[int]) -> float:
    """Cheapest split of the sorted sizes into consecutive groups, by enumeration."""
    from itertools import product

    ordered = sorted(sizes, reverse=True)
    best = float("inf")
    for cuts in product([False, True], repeat=len(ordered) - 1):
        cost, start = 0.0, 0
        for i, cut in enumerate([*cuts, True]):
            if cut:
                cost += (i + 1 - start) * ordered[start] ** 2 + SIZE_GROUP_OVERHEAD
                start = i + 1
        best = min(best, cost)
    return best


@pytest.mark.parametrize(
    "counts",
    [[150, 0, 3, 140, 2, 150], [18, 20, 17, 25, 19, 22, 18], [300, 50, 120, 240, 90, 60, 180], [0, 0], [5]],
)
def test_size_groups_are_an_optimal_partition_of_the_complexes_with_tokens(helpers, counts):
    layout = padded_layout(helpers.batch_vector(counts), len(counts))
    groups = layout.size_groups
    assert layout.size_groups is groups  # computed once per layout
    members = torch.cat([g.complexes for g in groups]).tolist() if groups else []
    assert sorted(members) == [b for b, n in enumerate(counts) if n > 0]
    for group in groups:
        sizes = [counts[b] for b in group.complexes.tolist()]
        assert sizes == sorted(sizes, reverse=True) and group.length == sizes[0]
        assert group.source_length == group.length
        assert group.full == (min(sizes) == max(sizes))
    lengths = [g.length for g in groups]
    assert lengths == sorted(lengths, reverse=True)
    nonzero = [n for n in counts if n > 0]
    if nonzero:
        cost = sum(g.complexes.numel() * g.length**2 + SIZE_GROUP_OVERHEAD for g in groups)
        assert cost == pytest.approx(_brute_force_cost(nonzero))


def test_cross_size_groups_cover_the_complexes_with_targets_and_sources(helpers):
    n_t, n_s = [150, 3, 0, 140, 2, 7], [20, 160, 5, 150, 0, 2]
    target = padded_layout(helpers.batch_vector(n_t), len(n_t))
    source = padded_layout(helpers.batch_vector(n_s), len(n_s))
    groups = size_groups(target, source)
    members = sorted(torch.cat([g.complexes for g in groups]).tolist())
    assert members == [b for b in range(len(n_t)) if n_t[b] and n_s[b]]
    assert len(groups) > 1
    for group in groups:
        index = group.complexes.tolist()
        assert group.length == max(n_t[b] for b in index)
        assert group.source_length == max(n_s[b] for b in index)
    assert size_groups(target) is target.size_groups
    with pytest.raises(ValueError, match="num_complexes"):
        size_groups(target, padded_layout(helpers.batch_vector(n_s[:3]), 3))


def _group_factors(
    layout, heads: int, p: float, dtype: torch.dtype, source=None
) -> dict[int, torch.Tensor]:
    """The factors the grouped kernel draws, per complex: one draw per group, in group order."""
    out = {}
    for group in size_groups(layout, source):
        factors = dropout_factors(
            (group.complexes.numel(), heads, group.length, group.source_length), p,
            dtype=dtype, device=torch.device("cpu"),
        )
        for slot, b in enumerate(group.complexes.tolist()):
            out[b] = factors[slot]
    return out


@pytest.mark.parametrize("with_bias", [None, "pairs", "padded"])
def test_grouped_dense_dropout_is_softmax_times_the_group_factors(helpers, gen, with_bias):
    """Complexes of very different sizes (and an empty one), tokens shuffled across complexes:
    per complex softmax(scale q kᵀ + θ·N) ⊙ factors · v, the factors drawn group by group;
    gradients equal the reference's, those of θ and of a bias on the padded grid included."""
    big = math.isqrt(SIZE_GROUP_OVERHEAD) + 10  # big² > the cost of a second group
    sizes = [big, 3, 0, big - 6, 2, big]
    heads, d = 2, 4
    batch = helpers.batch_vector(sizes)
    perm = torch.randperm(batch.numel(), generator=gen)
    batch = batch[perm]  # packed form: unsorted tokens
    layout = padded_layout(batch, len(sizes))
    assert len(layout.size_groups) > 1
    q, k, v = (t.requires_grad_() for t in helpers.qkv(batch.numel(), batch.numel(), heads, d, d, gen))
    bias, theta, dense_bias, learned = None, None, None, ()
    if with_bias == "pairs":
        mask = helpers.block_mask(batch, batch, 0.3, gen)
        values = torch.rand(mask.shape, generator=gen, dtype=torch.float64)
        bias = helpers.to_sparse(mask, values)
        theta = torch.tensor([0.7, -1.3], dtype=torch.float64, requires_grad=True)
        dense_bias = theta.view(-1, 1, 1) * (values * mask).unsqueeze(0)  # (H, n, n)
        learned = (theta,)
    elif with_bias == "padded":  # a learned (B, heads, L, L) grid, as the CT's RRWP bias
        grid = torch.randn(len(sizes), heads, layout.length, layout.length, generator=gen, dtype=torch.float64)
        grid.requires_grad_()
        bias = PaddedBias(grid)
        position = layout.index - layout.batch * layout.length
        dense_bias = grid[batch.unsqueeze(1), :, position.unsqueeze(1), position.unsqueeze(0)]
        dense_bias = dense_bias.permute(2, 0, 1)  # (H, n, n); pairs across complexes unused
        learned = (grid,)
    torch.manual_seed(5)
    out = dense_attention(
        q, k, v, layout=layout, bias=bias, bias_scale=theta, dropout_p=0.3, training=True
    )
    torch.manual_seed(5)
    factors = _group_factors(layout, heads, 0.3, q.dtype)
    expected = torch.zeros_like(out)
    for b, n in enumerate(sizes):
        rows = (batch == b).nonzero().view(-1)
        if n == 0:
            assert b not in factors
            continue
        qb, kb, vb = (t[rows].transpose(0, 1) for t in (q, k, v))
        scores = qb @ kb.transpose(1, 2) / d**0.5
        if dense_bias is not None:
            scores = scores + dense_bias[:, rows][:, :, rows]
        block = (torch.softmax(scores, dim=-1) * factors[b][:, :n, :n]) @ vb
        expected = expected.index_copy(0, rows, block.transpose(0, 1))
    torch.testing.assert_close(out, expected)
    # gradients: the same as the per-complex reference's, for a random output weighting
    weight = torch.randn(out.shape, generator=gen, dtype=out.dtype)
    grads = torch.autograd.grad((out * weight).sum(), (q, k, v, *learned))
    expected_grads = torch.autograd.grad((expected * weight).sum(), (q, k, v, *learned))
    for grad, reference in zip(grads, expected_grads):
        torch.testing.assert_close(grad, reference)


def test_grouped_cross_attention_dropout_is_softmax_times_the_group_factors(helpers, gen):
    """Cross-attention (targets and sources of different counts, complexes without targets or
    without sources): per complex softmax(scale q kᵀ) ⊙ factors · v, outputs and gradients."""
    n_t, n_s = [150, 3, 0, 140, 2, 7], [20, 160, 5, 150, 0, 2]
    heads, d = 2, 4
    batch_t, batch_s = helpers.batch_vector(n_t), helpers.batch_vector(n_s)
    layouts = (padded_layout(batch_t, len(n_t)), padded_layout(batch_s, len(n_s)))
    assert len(size_groups(*layouts)) > 1
    q, k, v = (t.requires_grad_() for t in helpers.qkv(batch_t.numel(), batch_s.numel(), heads, d, d, gen))
    torch.manual_seed(7)
    out = dense_attention(q, k, v, layout=layouts, dropout_p=0.3, training=True)
    torch.manual_seed(7)
    factors = _group_factors(layouts[0], heads, 0.3, q.dtype, source=layouts[1])
    expected = torch.zeros_like(out)
    for b in range(len(n_t)):
        rows, cols = (batch_t == b).nonzero().view(-1), (batch_s == b).nonzero().view(-1)
        if n_t[b] == 0 or n_s[b] == 0:
            assert b not in factors  # no targets: no rows; no sources: zero rows
            continue
        qb = q[rows].transpose(0, 1)
        kb, vb = (t[cols].transpose(0, 1) for t in (k, v))
        weights = torch.softmax(qb @ kb.transpose(1, 2) / d**0.5, dim=-1)
        block = (weights * factors[b][:, : n_t[b], : n_s[b]]) @ vb
        expected = expected.index_copy(0, rows, block.transpose(0, 1))
    torch.testing.assert_close(out, expected)
    weight = torch.randn(out.shape, generator=gen, dtype=out.dtype)
    grads = torch.autograd.grad((out * weight).sum(), (q, k, v))
    for grad, reference in zip(grads, torch.autograd.grad((expected * weight).sum(), (q, k, v))):
        torch.testing.assert_close(grad, reference)


@pytest.mark.parametrize("case", ["self", "padded bias", "cross", "small grid"])
def test_compiled_grouped_dropout_draws_the_eager_factors_and_gradients(helpers, gen, case):
    """Under torch.compile the grouped dense dropout (one custom op, its groups computed at run
    time) gives eager's output and gradients for the same seed: the same blocks, the same factor
    draws; with a learned padded bias its gradient too; a grid below one group's overhead is one
    block, as in eager."""
    heads, d = 2, 4
    big = math.isqrt(SIZE_GROUP_OVERHEAD) + 10
    n_t = [big, 3, 0, big - 6, 2, big] if case != "small grid" else [5, 3, 0, 4]
    n_s = [20, big, 5, big - 4, 0, 2] if case == "cross" else n_t
    batch_t, batch_s = helpers.batch_vector(n_t), helpers.batch_vector(n_s)
    layout_t = padded_layout(batch_t, len(n_t))
    layouts = (layout_t, padded_layout(batch_s, len(n_s))) if case == "cross" else layout_t
    q, k, v = (t.requires_grad_() for t in helpers.qkv(batch_t.numel(), batch_s.numel(), heads, d, d, gen))
    learned, bias = (), None
    if case == "padded bias":
        grid = torch.randn(len(n_t), heads, layout_t.length, layout_t.length, generator=gen, dtype=torch.float64)
        learned, bias = (grid.requires_grad_(),), PaddedBias(grid)
    assert (len(size_groups(*layouts if case == "cross" else (layouts,))) > 1) == (case != "small grid")

    def fn(q, k, v):
        return dense_attention(q, k, v, layout=layouts, bias=bias, dropout_p=0.3, training=True)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    weight = torch.randn(batch_t.numel(), heads, d, generator=gen, dtype=torch.float64)
    results = []
    for f in (fn, compiled):
        torch.manual_seed(5)
        out = f(q, k, v)
        results.append((out, *torch.autograd.grad((out * weight).sum(), (q, k, v, *learned))))
    for comp, eager in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(comp, eager)
    torch._dynamo.reset()
