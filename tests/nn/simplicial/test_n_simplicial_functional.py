"""Functional N-simplicial attention against SDPA and a naive einsum reference (float64)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from topomodelx_attention.harness.memory import peak_tensor_bytes
from topomodelx_attention.nn.simplicial import (
    CausalMask,
    KeySelection,
    TupleMask,
    WindowMask,
    dense_mask_from_tuples,
    determinant_logits,
    n_simplicial_attention,
    simplicial_rope,
    topk_selection,
)

CHUNKS = [None, 1, (2, 3), (5, 1), 64]


# ---------------------------------------------------------------------------------- N = 1
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk", [None, (2, 3)])
def test_order_one_equals_sdpa(ref, causal, chunk):
    q, keys, values = ref.inputs(1, n=7, lead=(2, 3))
    out = n_simplicial_attention(
        q, keys, values, mask=CausalMask() if causal else None, chunk_size=chunk
    )
    want = F.scaled_dot_product_attention(q, keys[0], values[0], is_causal=causal)
    ref.same(out, want, [q, *keys, *values])


def test_order_one_default_scale_is_inverse_sqrt_d(ref):
    q, keys, values = ref.inputs(1, n=5, d=8)
    out = n_simplicial_attention(q, keys, values, chunk_size=2)
    want = F.scaled_dot_product_attention(q, keys[0], values[0], scale=1 / math.sqrt(8))
    torch.testing.assert_close(out, want)
    out = n_simplicial_attention(q, keys, values, scale=1 / 8, chunk_size=2)
    want = F.scaled_dot_product_attention(q, keys[0], values[0], scale=1 / 8)
    torch.testing.assert_close(out, want)


# ---------------------------------------------------------------------------------- exact
@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("chunk", CHUNKS)
def test_matches_naive_reference(ref, order, chunk):
    q, keys, values = ref.inputs(order, n=6, dv=4, seed=order)
    out = n_simplicial_attention(q, keys, values, chunk_size=chunk)
    ref.same(out, ref.naive(q, keys, values), [q, *keys, *values])


def test_chunked_equals_unchunked(ref):
    q, keys, values = ref.inputs(2, n=9, lead=(2, 2), seed=3)
    full = n_simplicial_attention(q, keys, values, chunk_size=(9, 9))
    for chunk in [1, 2, (4, 1), (1, 7), (3, 5)]:
        ref.same(n_simplicial_attention(q, keys, values, chunk_size=chunk), full, [q, *keys])


def test_gradcheck_dense_custom_backward(ref):
    q, keys, values = ref.inputs(2, n=4, d=3, lead=(1,), seed=5)

    def fn(q, k1, k2, v1, v2):
        return n_simplicial_attention(q, [k1, k2], [v1, v2], mask=CausalMask(), chunk_size=(2, 3))

    assert torch.autograd.gradcheck(fn, (q, *keys, *values))


def test_cross_attention_different_key_lengths(ref):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(5, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    keys = [torch.randn(m, 4, generator=gen, dtype=torch.float64) for m in (3, 7)]
    values = [torch.randn(m, 2, generator=gen, dtype=torch.float64) for m in (3, 7)]
    out = n_simplicial_attention(q, keys, values, chunk_size=(2, 2))
    ref.same(out, ref.naive(q, keys, values), [q])


def test_broadcast_leading_dimensions(ref):
    q, keys, values = ref.inputs(2, n=5, lead=(2, 3))
    shared_k = [k[:1, :1].detach() for k in keys]  # (1, 1, n, d) broadcast over (2, 3)
    out = n_simplicial_attention(q, shared_k, values, chunk_size=2)
    want = ref.naive(q, [k.expand_as(q) for k in shared_k], values)
    torch.testing.assert_close(out, want)


# ---------------------------------------------------------------------------------- masks
@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("chunk", [None, (2, 2)])
def test_causal_mask(ref, order, chunk):
    q, keys, values = ref.inputs(order, n=6, seed=order)
    out = n_simplicial_attention(q, keys, values, mask=CausalMask(), chunk_size=chunk)
    mask = ref.causal_mask(6, [6] * order, order)
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    ("order", "windows"), [(1, (3,)), (2, (2, 3)), (2, (1, 4)), (3, (2, 1, 3))]
)
def test_window_mask(ref, causal, order, windows):
    q, keys, values = ref.inputs(order, n=7, seed=len(windows))
    out = n_simplicial_attention(q, keys, values, mask=WindowMask(windows, causal), chunk_size=3)
    mask = ref.window_mask(7, windows, causal)
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


@pytest.mark.parametrize("order", [1, 2, 3])
def test_dense_bool_mask(ref, order):
    q, keys, values = ref.inputs(order, n=5, seed=11)
    gen = torch.Generator().manual_seed(order)
    mask = torch.rand((2, 5, *[5] * order), generator=gen) < 0.4
    out = n_simplicial_attention(q, keys, values, mask=mask, chunk_size=(2, 2))
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


@pytest.mark.parametrize("shape", [(5, 5, 5), (1, 1, 5, 5, 5), (1, 5, 1, 5), (3, 1, 5, 5, 5)])
def test_dense_mask_broadcasting(ref, shape):
    q, keys, values = ref.inputs(2, n=5, lead=(3, 2), seed=12)
    gen = torch.Generator().manual_seed(len(shape))
    mask = torch.rand(shape, generator=gen) < 0.5
    out = n_simplicial_attention(q, keys, values, mask=mask, chunk_size=(2, 3))
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


@pytest.mark.parametrize("order", [1, 2, 3])
def test_tuple_mask(ref, order):
    q, keys, values = ref.inputs(order, n=6, seed=13)
    gen = torch.Generator().manual_seed(order)
    tuples = torch.unique(torch.randint(0, 6, (40, order + 1), generator=gen), dim=0)
    out = n_simplicial_attention(q, keys, values, mask=TupleMask(tuples))
    mask = dense_mask_from_tuples(tuples, 6)
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


@pytest.mark.parametrize("order", [2, 3])
def test_key_selection(ref, order):
    q, keys, values = ref.inputs(order, n=6, seed=17)
    gen = torch.Generator().manual_seed(order)
    idx = [torch.randperm(6, generator=gen)[None, :3].expand(6, 3).clone() for _ in range(order)]
    valid = [torch.rand(6, 3, generator=gen) < 0.8 for _ in range(order)]
    out = n_simplicial_attention(q, keys, values, mask=KeySelection(idx, valid), chunk_size=4)
    mask = torch.ones((6, *[6] * order), dtype=torch.bool)
    for m in range(order):
        allowed = torch.zeros(6, 6, dtype=torch.bool)
        allowed.scatter_(1, idx[m], valid[m])
        shape = [6] + [1] * order
        shape[1 + m] = 6
        mask = mask & allowed.view(shape)
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


def _all_paths_with_empty_row(order, n):
    """Masks of every path under which query 0 has no allowed tuple."""
    dense = torch.ones((n, *[n] * order), dtype=torch.bool)
    dense[0] = False
    tuples = torch.cartesian_prod(*[torch.arange(n)] * (order + 1)).view(-1, order + 1)
    tuples = tuples[tuples[:, 0] != 0]
    idx = [torch.arange(n)[None].expand(n, n).clone() for _ in range(order)]
    valid = [torch.ones(n, n, dtype=torch.bool) for _ in range(order)]
    valid[0][0] = False
    return {
        "dense": dense,
        "tuples": TupleMask(tuples),
        "selection": KeySelection(idx, valid),
    }


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("kind", ["dense", "tuples", "selection"])
def test_fully_masked_row_gives_zeros(ref, order, kind):
    q, keys, values = ref.inputs(order, n=5, seed=19)
    mask = _all_paths_with_empty_row(order, 5)[kind]
    out = n_simplicial_attention(q, keys, values, mask=mask, chunk_size=2)
    assert torch.isfinite(out).all()
    assert torch.count_nonzero(out[:, 0]) == 0
    grads = torch.autograd.grad(out.square().sum(), [q, *keys, *values])
    assert all(torch.isfinite(g).all() for g in grads)
    assert torch.count_nonzero(grads[0][:, 0]) == 0


def test_fully_masked_chunk_streaming_softmax(ref):
    # the first key chunks are fully masked for some rows: the running max starts at -inf
    q, keys, values = ref.inputs(2, n=6, seed=23)
    mask = torch.zeros((6, 6, 6), dtype=torch.bool)
    mask[:, 4:, 5] = True
    mask[2] = False
    out = n_simplicial_attention(q, keys, values, mask=mask, chunk_size=(3, 1))
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


# ---------------------------------------------------------------------------------- bias
@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("kind", ["none", "causal", "window", "tuples"])
def test_key_value_bias(ref, order, kind):
    n, d = 5, 4
    q, keys, values = ref.inputs(order, n=n, d=d, seed=29)
    gen = torch.Generator().manual_seed(1)
    kb = [torch.randn(d, generator=gen, dtype=torch.float64).requires_grad_() for _ in keys]
    vb = [torch.randn(d, generator=gen, dtype=torch.float64).requires_grad_() for _ in keys]
    sizes = [n + 1] * order
    if kind == "none":
        mask, dense = None, None
    elif kind == "causal":
        mask, dense = CausalMask(), ref.causal_mask(n, sizes, order)
    elif kind == "window":
        mask, dense = WindowMask(2), ref.window_mask(n, [2] * order, True, sizes)
    else:
        tuples = torch.unique(torch.randint(-1, n, (30, order + 1), generator=gen), dim=0)
        tuples = tuples[tuples[:, 0] >= 0]
        mask, dense = TupleMask(tuples), dense_mask_from_tuples(tuples, n, sizes)
    out = n_simplicial_attention(
        q, keys, values, mask=mask, key_bias=kb, value_bias=vb, chunk_size=(2, 2)
    )
    ke = [torch.cat([k, b.expand(2, 1, d)], 1) for k, b in zip(keys, kb)]
    ve = [torch.cat([v, b.expand(2, 1, d)], 1) for v, b in zip(values, vb)]
    ref.same(out, ref.naive(q, ke, ve, mask=dense), [q, *keys, *values, *kb, *vb])


def test_bias_of_ones_reduces_order(ref):
    """Appendix F.1: K^(2) = V^(2) = 1 on the bias slot turns 2-simplicial into attention."""
    q, keys, values = ref.inputs(2, n=6, seed=31)
    ones = [None, torch.ones(6, dtype=torch.float64)]
    pairs = torch.cartesian_prod(torch.arange(6), torch.arange(6))
    tuples = torch.cat([pairs, torch.full((36, 1), -1)], 1)
    out = n_simplicial_attention(
        q, keys, values, mask=TupleMask(tuples), key_bias=ones, value_bias=ones
    )
    want = F.scaled_dot_product_attention(q, keys[0], values[0])
    torch.testing.assert_close(out, want)


# ---------------------------------------------------------------------------------- RoPE
def _chunk_rotate(x, rot):
    size = rot.shape[0]
    c = x.shape[-1] // size
    return (x[..., : c * size].unflatten(-1, (c, size)) @ rot.T).flatten(-2)


def _random_rotation(size, seed):
    gen = torch.Generator().manual_seed(seed)
    qmat, _ = torch.linalg.qr(torch.randn(size, size, generator=gen, dtype=torch.float64))
    if torch.det(qmat) < 0:
        qmat[:, 0] = -qmat[:, 0]
    return qmat


@pytest.mark.parametrize("order", [1, 2, 3])
def test_determinant_form_matches_naive_determinants(ref, order):
    d = 2 * (order + 1)
    q, keys, values = ref.inputs(order, n=5, d=d, seed=37)
    out = n_simplicial_attention(q, keys, values, logit_form="determinant", chunk_size=(2, 2))
    want = ref.naive(q, keys, values, logits=determinant_logits(q, keys))
    ref.same(out, want, [q, *keys, *values])


@pytest.mark.parametrize("order", [1, 2, 3])
def test_determinant_form_is_rotation_invariant(ref, order):
    d = 3 * (order + 1)
    q, keys, values = ref.inputs(order, n=5, d=d, seed=41)
    rot = _random_rotation(order + 1, seed=order)
    out = n_simplicial_attention(q, keys, values, logit_form="determinant")
    rotated = n_simplicial_attention(
        _chunk_rotate(q, rot),
        [_chunk_rotate(k, rot) for k in keys],
        values,
        logit_form="determinant",
    )
    torch.testing.assert_close(rotated, out)
    if order >= 2:  # the product form is not invariant: that is why §2.4 needs determinants
        plain = n_simplicial_attention(q, keys, values)
        plain_rot = n_simplicial_attention(
            _chunk_rotate(q, rot), [_chunk_rotate(k, rot) for k in keys], values
        )
        assert not torch.allclose(plain, plain_rot)


@pytest.mark.parametrize("order", [1, 2])
def test_simplicial_rope_depends_on_relative_positions(ref, order):
    d = 2 * (order + 1)
    q, keys, values = ref.inputs(order, n=6, d=d, seed=43)
    pos = torch.arange(6, dtype=torch.float64)

    def run(shift):
        p = pos + shift
        return n_simplicial_attention(
            simplicial_rope(q, p, order),
            [simplicial_rope(k, p, order) for k in keys],
            values,
            logit_form="determinant",
            mask=CausalMask(),
        )

    torch.testing.assert_close(run(0.0), run(17.0))
    assert not torch.allclose(
        run(0.0),
        n_simplicial_attention(q, keys, values, logit_form="determinant", mask=CausalMask()),
    )


# ---------------------------------------------------------------------------------- router
@pytest.mark.parametrize("order", [1, 2, 3])
def test_router_with_k_equal_n_is_full_attention(ref, order):
    q, keys, values = ref.inputs(order, n=6, seed=47)
    gen = torch.Generator().manual_seed(0)
    scores = [
        torch.randn(2, 6, 6, generator=gen, dtype=torch.float64).requires_grad_() for _ in keys
    ]
    selection = topk_selection(scores, 6)
    out = n_simplicial_attention(q, keys, values, mask=selection, chunk_size=4)
    ref.same(out, ref.naive(q, keys, values), [q, *keys, *values])
    grads = torch.autograd.grad(out.square().sum(), scores)
    assert all(torch.count_nonzero(g) > 0 for g in grads)  # straight-through signal


def test_router_topk_equals_masked_reference(ref):
    q, keys, values = ref.inputs(2, n=7, seed=53)
    gen = torch.Generator().manual_seed(3)
    scores = [torch.randn(2, 7, 7, generator=gen, dtype=torch.float64) for _ in keys]
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    scores = [s.masked_fill(~causal, float("-inf")) for s in scores]
    selection = topk_selection(scores, 3)
    out = n_simplicial_attention(q, keys, values, mask=selection)
    mask = torch.ones((2, 7, 7, 7), dtype=torch.bool)
    for m, s in enumerate(scores):
        top = s.topk(3, dim=-1).indices
        allowed = torch.zeros_like(s, dtype=torch.bool).scatter_(-1, top, True) & causal
        mask = mask & (allowed[:, :, :, None] if m == 0 else allowed[:, :, None, :])
    ref.same(out, ref.naive(q, keys, values, mask=mask), [q, *keys, *values])


# ---------------------------------------------------------------------------------- memory
def test_dense_path_never_materialises_the_cube():
    n, d = 48, 8
    q = torch.randn(n, d, requires_grad=True)
    keys = [torch.randn(n, d, requires_grad=True) for _ in range(2)]
    values = [torch.randn(n, d, requires_grad=True) for _ in range(2)]

    def step():
        out = n_simplicial_attention(q, keys, values, chunk_size=(8, 8))
        out.sum().backward()

    cube = n**3 * 4
    assert peak_tensor_bytes(step) < cube / 4


def test_window_path_memory_is_linear_in_n():
    def peak(n):
        x = [torch.randn(n, 8, requires_grad=True) for _ in range(5)]

        def step():
            out = n_simplicial_attention(x[0], x[1:3], x[3:], mask=WindowMask((4, 4)))
            out.sum().backward()

        return peak_tensor_bytes(step)

    small, large = peak(64), peak(256)
    assert large < 5 * small  # ~4x for 4x tokens, never n^3 (64x)


# ---------------------------------------------------------------------------------- dtypes/errors
def test_bfloat16_dense_path_close_to_float32():
    gen = torch.Generator().manual_seed(0)
    x = [torch.randn(2, 9, 8, generator=gen) for _ in range(5)]
    out32 = n_simplicial_attention(x[0], x[1:3], x[3:], chunk_size=(4, 4))
    xb = [t.bfloat16() for t in x]
    out16 = n_simplicial_attention(xb[0], xb[1:3], xb[3:], chunk_size=(4, 4))
    assert out16.dtype == torch.bfloat16
    torch.testing.assert_close(out16.float(), out32, atol=0.1, rtol=0.1)


def test_input_errors(ref):
    q, keys, values = ref.inputs(2, n=4)
    with pytest.raises(ValueError, match="channels"):
        n_simplicial_attention(q, [keys[0][..., :3], keys[1]], values)
    with pytest.raises(ValueError, match="N >= 1"):
        n_simplicial_attention(q, [], [])
    with pytest.raises(TypeError, match="sequences"):
        n_simplicial_attention(q, keys[0], values[0])
    with pytest.raises(ValueError, match="bias slot"):
        n_simplicial_attention(q, keys, values, mask=TupleMask(torch.tensor([[0, 1, -1]])))
    with pytest.raises(ValueError, match="N = 1"):
        n_simplicial_attention(q, keys, values, mask=TupleMask(torch.tensor([[0, 1]])))
    with pytest.raises(TypeError, match="mask"):
        n_simplicial_attention(q, keys, values, mask="causal")
    with pytest.raises(ValueError, match="both"):
        n_simplicial_attention(q, keys, values, key_bias=[q[0, 0], None], value_bias=None)
    with pytest.raises(ValueError, match="logit_form"):
        n_simplicial_attention(q, keys, values, logit_form="cosine")
    with pytest.raises(ValueError, match="windows"):
        WindowMask((0, 2))


@pytest.mark.parametrize(
    "mask", [None, CausalMask(), WindowMask(2), TupleMask(torch.zeros(0, 3, dtype=torch.long))]
)
def test_empty_inputs_and_empty_tuple_list(mask):
    q = torch.randn(2, 0, 4)
    assert n_simplicial_attention(q, [q, q], [q, q], mask=mask, chunk_size=2).shape == (2, 0, 4)
    x = torch.randn(2, 5, 4, requires_grad=True)
    out = n_simplicial_attention(x, [x, x], [x, x], mask=TupleMask(torch.zeros(0, 3).long()))
    assert torch.count_nonzero(out) == 0
