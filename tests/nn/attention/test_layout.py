"""Precomputed padded layouts (shared by a stack of layers) and explicit attention weights."""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.attention import (
    MultiHeadAttention,
    PaddedLayout,
    dense_attention,
    dense_attention_weights,
    linear_attention,
    orthogonal_random_matrix,
    padded_layout,
)

SIZES = [3, 0, 5, 1, 4]  # includes an empty graph
HEADS, D = 2, 4


def _inputs(helpers, gen):
    batch = helpers.batch_vector(SIZES)
    q, k, v = helpers.qkv(batch.numel(), batch.numel(), HEADS, D, 3, gen)
    return q, k, v, batch


def test_layout_fields_and_pad_unpad_roundtrip(helpers, gen):
    batch = helpers.batch_vector(SIZES)
    layout = padded_layout(batch, len(SIZES))
    assert isinstance(layout, PaddedLayout)
    assert layout.length == 5 and layout.num_complexes == 5 and layout.num_tokens == 13
    assert layout.counts.tolist() == SIZES
    assert layout.fill == pytest.approx(13 / 25)
    x = torch.randn(13, 2, generator=gen)
    padded = layout.pad(x)
    assert padded.shape == (5, 5, 2)
    assert torch.equal(padded[~layout.key_valid], torch.zeros(12, 2))
    torch.testing.assert_close(layout.unpad(padded), x)
    inner = layout.padded()
    assert inner.index is None and inner.num_tokens == 25
    assert torch.equal(inner.batch, torch.arange(5).repeat_interleave(5))
    torch.testing.assert_close(inner.pad(padded.reshape(25, 2)), padded)


def test_unsorted_batch_keeps_relative_order_inside_graphs(helpers, gen):
    batch = torch.tensor([2, 0, 0, 1, 2, 0])
    layout = padded_layout(batch, 3)
    # graph 0: tokens 1, 2, 5; graph 1: token 3; graph 2: tokens 0, 4
    assert layout.index.tolist() == [6, 0, 1, 3, 7, 2]


def test_layout_validation():
    with pytest.raises(ValueError, match="num_complexes"):
        padded_layout(torch.tensor([0, 3]), 2)
    with pytest.raises(ValueError, match="negative"):
        padded_layout(torch.tensor([-1, 0]))
    with pytest.raises(TypeError):
        padded_layout([0, 1])  # type: ignore[arg-type]


@pytest.mark.parametrize("padded_form", [False, True])
def test_dense_with_layout_equals_batch_vectors_on_shuffled_tokens(helpers, gen, padded_form):
    q, k, v, batch = _inputs(helpers, gen)
    reference = dense_attention(q, k, v, batch, batch, num_complexes=len(SIZES))
    perm = torch.randperm(batch.numel(), generator=gen)  # tokens in any order
    layout = padded_layout(batch[perm], len(SIZES))
    if padded_form:
        inner = layout.padded()
        grid = [layout.pad(t[perm]).reshape(inner.num_tokens, HEADS, -1) for t in (q, k, v)]
        out = dense_attention(*grid, layout=inner)
        out = layout.unpad(out.view(layout.num_complexes, layout.length, HEADS, -1))
    else:
        out = dense_attention(q[perm], k[perm], v[perm], layout=layout)
    torch.testing.assert_close(out, reference[perm], atol=1e-12, rtol=1e-10)


def test_dense_with_layout_and_bias_equals_without(helpers, gen):
    q, k, v, batch = _inputs(helpers, gen)
    mask = helpers.block_mask(batch, batch, 0.5, gen)
    values = torch.randn(mask.shape, generator=gen, dtype=torch.float64)
    bias = helpers.to_sparse(mask, values)
    theta = torch.tensor([0.5, -2.0], dtype=torch.float64)
    reference = dense_attention(q, k, v, batch, batch, bias=bias, bias_scale=theta, num_complexes=5)
    out = dense_attention(q, k, v, bias=bias, bias_scale=theta, layout=padded_layout(batch, 5))
    torch.testing.assert_close(out, reference, atol=1e-12, rtol=1e-10)


def test_linear_with_layout_equals_batch_vectors(helpers, gen):
    q, k, v, batch = _inputs(helpers, gen)
    projection = orthogonal_random_matrix(16, D, generator=gen, dtype=torch.float64)
    reference = linear_attention(q, k, v, batch, batch, projection=projection, num_complexes=5)
    perm = torch.randperm(batch.numel(), generator=gen)
    layout = padded_layout(batch[perm], 5)
    out = linear_attention(q[perm], k[perm], v[perm], projection=projection, layout=layout)
    torch.testing.assert_close(out, reference[perm], atol=1e-10, rtol=1e-8)
    # padded form: garbage (large) values in the padding rows must not leak into the result
    inner = layout.padded()
    grids = []
    for t in (q, k, v):
        grid = layout.pad(t[perm]).reshape(inner.num_tokens, HEADS, -1).clone()
        grid[~layout.key_valid.flatten()] = 50.0
        grids.append(grid)
    out = linear_attention(*grids, projection=projection, layout=inner)
    out = layout.unpad(out.view(5, layout.length, HEADS, -1))
    torch.testing.assert_close(out, reference[perm], atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("kind", ["dense", "linear"])
def test_layout_gradients_finite_with_empty_graphs(helpers, gen, kind):
    q, k, v, batch = _inputs(helpers, gen)
    for t in (q, k, v):
        t.requires_grad_(True)
    layout = padded_layout(batch, 7)  # two more empty graphs at the end
    if kind == "dense":
        out = dense_attention(q, k, v, layout=layout)
    else:
        projection = orthogonal_random_matrix(8, D, generator=gen, dtype=torch.float64)
        out = linear_attention(q, k, v, projection=projection, layout=layout)
    out.square().sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_layout_excludes_batch_vectors(helpers, gen):
    q, k, v, batch = _inputs(helpers, gen)
    layout = padded_layout(batch)
    with pytest.raises(ValueError, match="either a layout or batch"):
        dense_attention(q, k, v, batch, batch, layout=layout)
    with pytest.raises(ValueError, match="self-attention"):
        dense_attention(q[:4], k, v, layout=layout)


def test_attention_weights_match_dense_attention(helpers, gen):
    q, k, v, batch = _inputs(helpers, gen)
    weights = dense_attention_weights(q, k, batch, batch, num_complexes=5)
    assert weights.shape == (5, HEADS, 5, 5)
    layout = padded_layout(batch, 5)
    rows = weights.sum(-1)  # (B, H, L)
    expected = layout.key_valid.unsqueeze(1).expand_as(rows).to(rows.dtype)
    torch.testing.assert_close(rows, expected)
    # weights @ V reproduces the attention output
    v_pad = layout.pad(v).transpose(1, 2)  # (B, H, L, dv)
    out = layout.unpad(torch.matmul(weights, v_pad).transpose(1, 2))
    torch.testing.assert_close(out, dense_attention(q, k, v, batch, batch), atol=1e-12, rtol=1e-10)
    with_layout = dense_attention_weights(q, k, layout=layout)
    torch.testing.assert_close(with_layout, weights)


def test_attention_weights_cross_and_single(helpers, gen):
    bt, bs = helpers.batch_vector([2, 3]), helpers.batch_vector([4, 1])
    q, k, _ = helpers.qkv(5, 5, HEADS, D, 1, gen)
    weights = dense_attention_weights(q, k, bt, bs)
    assert weights.shape == (2, HEADS, 3, 4)
    torch.testing.assert_close(weights[0, :, :2].sum(-1), torch.ones(HEADS, 2, dtype=q.dtype))
    assert torch.equal(weights[0, :, 2], torch.zeros(HEADS, 4, dtype=q.dtype))
    assert torch.equal(weights[1, :, :, 1:], torch.zeros(HEADS, 3, 3, dtype=q.dtype))
    single = dense_attention_weights(q, k)
    assert single.shape == (1, HEADS, 5, 5)


def test_module_layout_and_attention_weights(helpers, gen):
    torch.manual_seed(0)
    batch = helpers.batch_vector(SIZES)
    x = torch.randn(batch.numel(), 8, generator=gen, dtype=torch.float64)
    module = MultiHeadAttention(8, 8, HEADS, kind="dense").double()
    layout = padded_layout(batch, 5)
    torch.testing.assert_close(
        module(x, layout=layout), module(x, batch_target=batch, num_complexes=5)
    )
    weights = module.attention_weights(x, layout=layout)
    assert weights.shape == (5, HEADS, 5, 5)
    linear = MultiHeadAttention(8, 8, HEADS, kind="linear").double()
    torch.testing.assert_close(
        linear(x, layout=layout), linear(x, batch_target=batch, num_complexes=5), atol=1e-10, rtol=1e-8
    )
    with pytest.raises(ValueError, match="kind='dense'"):
        linear.attention_weights(x, layout=layout)
