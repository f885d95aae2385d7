"""Attention dropout factors (``nn/attention/dropout.py``): distribution, kernels, compile.

That the fused sparse kernel and the composable path draw the same factors is
``test_sparse_fused.test_fused_equals_composable`` (``dropout_p=0.4``).
"""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.attention import dense_attention
from topomodelx_attention.nn.attention.dropout import dropout_factors, softmax_dropout


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
