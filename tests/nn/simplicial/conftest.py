"""Naive O(n^{N+1}) reference of N-simplicial attention for the comparison tests."""

from __future__ import annotations

import math

import pytest
import torch

AXES = "jkmnop"


def naive_n_simplicial(query, keys, values, scale=None, mask=None, logits=None):
    """Materialise every logit with one einsum, mask, joint softmax, output einsum.

    ``mask``: bool tensor broadcastable to (..., n, n_1, ..., n_N); fully masked rows give 0.
    ``logits``: optional precomputed (unscaled) logits replacing the product form.
    """
    order = len(keys)
    d = query.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    ax = AXES[:order]
    if logits is None:
        eq = "...ia," + ",".join(f"...{x}a" for x in ax) + f"->...i{ax}"
        logits = torch.einsum(eq, query, *keys)
    logits = logits * scale
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    flat = logits.flatten(-order)
    empty = torch.isinf(flat).all(-1, keepdim=True)
    weights = torch.softmax(flat.masked_fill(empty, 0.0), -1).masked_fill(empty, 0.0)
    weights = weights.view_as(logits)
    eq = f"...i{ax}," + ",".join(f"...{x}a" for x in ax) + "->...ia"
    return torch.einsum(eq, weights, *values)


def causal_dense_mask(n, key_sizes, order):
    """Dense causal mask; an index >= n on a key axis is a bias slot (always allowed)."""
    rows = torch.arange(n)
    mask = torch.ones((n, *key_sizes), dtype=torch.bool)
    for m, size in enumerate(key_sizes):
        pos = torch.arange(size)
        ok = (pos[None, :] <= rows[:, None]) | (pos[None, :] >= n)
        shape = [n] + [1] * order
        shape[1 + m] = size
        mask = mask & ok.view(shape)
    return mask


def window_dense_mask(n, windows, causal, key_sizes=None):
    order = len(windows)
    key_sizes = key_sizes or [n] * order
    rows = torch.arange(n)
    mask = torch.ones((n, *key_sizes), dtype=torch.bool)
    for m, (w, size) in enumerate(zip(windows, key_sizes)):
        pos = torch.arange(size)
        diff = rows[:, None] - pos[None, :]
        ok = diff.abs() < w
        if causal:
            ok = ok & (diff >= 0)
        ok = ok | (pos[None, :] >= n)
        shape = [n] + [1] * order
        shape[1 + m] = size
        mask = mask & ok.view(shape)
    return mask


def make_inputs(order, n=6, d=6, lead=(2,), dv=None, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    dv = dv or d

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_()

    q = rand(*lead, n, d)
    keys = [rand(*lead, n, d) for _ in range(order)]
    values = [rand(*lead, n, dv) for _ in range(order)]
    return q, keys, values


def assert_same(out, ref, params, atol=1e-10, seed=1):
    """Compare values and the gradients of a random projection w.r.t. ``params``."""
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=atol, rtol=1e-8)
    gen = torch.Generator().manual_seed(seed)
    g = torch.randn(ref.shape, generator=gen, dtype=ref.dtype)
    got = torch.autograd.grad((out * g).sum(), params, retain_graph=True, allow_unused=True)
    want = torch.autograd.grad((ref * g).sum(), params, retain_graph=True, allow_unused=True)
    for a, b in zip(got, want):
        if b is None:
            assert a is None or torch.count_nonzero(a) == 0
            continue
        assert a is not None and torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=atol, rtol=1e-8)


class Ref:
    naive = staticmethod(naive_n_simplicial)
    causal_mask = staticmethod(causal_dense_mask)
    window_mask = staticmethod(window_dense_mask)
    inputs = staticmethod(make_inputs)
    same = staticmethod(assert_same)


@pytest.fixture
def ref() -> type[Ref]:
    return Ref
