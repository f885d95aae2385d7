"""Behaviour of the projected MultiHeadAttention module."""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.attention import (
    KERNELS,
    MultiHeadAttention,
    dense_attention,
    merge_heads,
    split_heads,
)

SIZES = [4, 3, 5]
KINDS = ["sparse", "dense", "linear"]


def _inputs(helpers, gen, channels=8, sizes=SIZES, density=0.5):
    batch = helpers.batch_vector(sizes)
    n = batch.numel()
    x = torch.randn(n, channels, generator=gen, dtype=torch.float64)
    mask = helpers.block_mask(batch, batch, density, gen)
    return x, batch, mask


def _module(kind, gen_seed=0, **kw):
    torch.manual_seed(gen_seed)
    kw.setdefault("heads", 2)
    return MultiHeadAttention(8, kind=kind, **kw).double()


def _dropout(kind, p):
    """Attention dropout ``p`` for kernels with weights (the linear kind takes none)."""
    return {"attention_dropout": p} if KERNELS[kind].has_weights else {}


def _forward(module, x, batch, mask, helpers, x_source=None, batch_source=None):
    nb = None
    if module.kind in ("sparse", "dense") and mask is not None:
        nb = helpers.to_sparse(mask)
    return module(x, x_source, nb, batch, batch_source)


def test_registered_kernels_and_their_capabilities():
    assert set(KINDS) <= set(KERNELS)
    flags = {
        k: (c.needs_neighborhood, c.accepts_bias, c.needs_layout, c.returns_weights, c.has_weights)
        for k, c in KERNELS.items()
        if k in KINDS
    }
    assert flags == {
        "sparse": (True, False, False, False, True),
        "dense": (False, True, True, True, True),
        "linear": (False, False, True, False, False),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_forward_shapes_self_and_cross(helpers, gen, kind):
    x, batch, mask = _inputs(helpers, gen)
    module = _module(kind)
    out = _forward(module, x, batch, mask, helpers)
    assert out.shape == (x.shape[0], 8)
    assert out.dtype == torch.float64
    # cross-attention with other source channels and out_channels
    bs = helpers.batch_vector([2, 6, 1])
    xs = torch.randn(bs.numel(), 5, generator=gen, dtype=torch.float64)
    cross = MultiHeadAttention(8, 6, heads=3, source_channels=5, kind=kind).double()
    cmask = helpers.block_mask(batch, bs, 0.6, gen)
    nb = helpers.to_sparse(cmask) if kind != "linear" else None
    out = cross(x, xs, nb, batch, bs)
    assert out.shape == (x.shape[0], 6)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("share_qk", [False, True])
def test_every_parameter_gets_a_gradient(helpers, gen, kind, bias, share_qk):
    x, batch, mask = _inputs(helpers, gen)
    module = _module(kind, bias=bias, share_qk=share_qk, kernel_options=_dropout(kind, 0.1))
    module.train()
    out = _forward(module, x, batch, mask, helpers)
    (out**2).sum().backward()
    names = [name for name, _ in module.named_parameters()]
    assert ("lin_key.weight" in names) is not share_qk
    assert ("lin_query.bias" in names) is bias
    assert ("kernel.bias_scale" in names) is (kind == "dense")
    for name, p in module.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kind", KINDS)
def test_dropout_inactive_in_eval(helpers, gen, kind):
    x, batch, mask = _inputs(helpers, gen)
    with_dropout = _module(kind, kernel_options=_dropout(kind, 0.5))
    without = _module(kind)
    without.load_state_dict(with_dropout.state_dict())
    with_dropout.eval()
    without.eval()
    a = _forward(with_dropout, x, batch, mask, helpers)
    b = _forward(with_dropout, x, batch, mask, helpers)
    c = _forward(without, x, batch, mask, helpers)
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    torch.testing.assert_close(a, c, atol=0, rtol=0)
    if kind != "linear":  # there is no attention matrix to drop in the linear kind
        with_dropout.train()
        torch.manual_seed(1)
        assert not torch.allclose(_forward(with_dropout, x, batch, mask, helpers), c)


@pytest.mark.parametrize("kind", KINDS)
def test_module_batched_equals_per_complex(helpers, gen, kind):
    x, batch, mask = _inputs(helpers, gen)
    module = _module(kind).eval()
    out = _forward(module, x, batch, mask, helpers)
    for b in range(len(SIZES)):
        sel = batch == b
        alone = _forward(module, x[sel], None, mask[sel][:, sel], helpers)
        torch.testing.assert_close(out[sel], alone, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_module_permutation_equivariance(helpers, gen, kind):
    x, batch, mask = _inputs(helpers, gen)
    module = _module(kind).eval()
    perm = helpers.perm_within(batch, gen)
    out = _forward(module, x, batch, mask, helpers)
    out_p = _forward(module, x[perm], batch, mask[perm][:, perm], helpers)
    torch.testing.assert_close(out_p, out[perm], atol=1e-5, rtol=1e-5)
    # float32 as well
    module32 = module.float()
    out32 = _forward(module32, x.float(), batch, mask, helpers)
    out32_p = _forward(module32, x[perm].float(), batch, mask[perm][:, perm], helpers)
    torch.testing.assert_close(out32_p, out32[perm], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_module_targets_without_sources_get_zeros(helpers, gen, kind):
    bt, bs = helpers.batch_vector([3, 2, 2]), helpers.batch_vector([2, 0, 3])
    x = torch.randn(7, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    xs = torch.randn(5, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    mask = helpers.block_mask(bt, bs, 1.0, gen)
    mask[1] = False
    module = _module(kind)
    nb = helpers.to_sparse(mask) if kind != "linear" else None
    out = module(x, xs, nb, bt, bs)
    empty = bt == 1
    if kind == "sparse":
        empty = empty.clone()
        empty[1] = True
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert torch.isfinite(xs.grad).all()


def test_bias_scale_per_head_shared_and_fixed(helpers, gen):
    per_head = MultiHeadAttention(8, heads=4, kind="dense")
    assert isinstance(per_head.kernel.bias_scale, torch.nn.Parameter)
    assert per_head.kernel.bias_scale.shape == (4,)
    assert torch.equal(per_head.kernel.bias_scale.detach(), torch.ones(4))
    shared = MultiHeadAttention(8, heads=4, kind="dense", kernel_options={"bias_scale": "shared"})
    assert shared.kernel.bias_scale.shape == (1,)
    fixed = MultiHeadAttention(
        8,
        heads=4,
        kind="dense",
        kernel_options={"learn_bias_scale": False, "bias_scale_init": 0.0},
    )
    assert "kernel.bias_scale" not in dict(fixed.named_parameters())
    assert "kernel.bias_scale" in dict(fixed.named_buffers())
    # θ = 0 makes the neighbourhood irrelevant
    x, batch, mask = _inputs(helpers, gen)
    fixed = fixed.double()
    a = fixed(x, None, helpers.to_sparse(mask), batch)
    b = fixed(x, None, None, batch)
    torch.testing.assert_close(a, b)
    assert not hasattr(MultiHeadAttention(8, kind="sparse").kernel, "bias_scale")


def test_dense_neighbourhood_bias_changes_output(helpers, gen):
    x, batch, mask = _inputs(helpers, gen)
    module = _module("dense")
    with_bias = _forward(module, x, batch, mask, helpers)
    without = module(x, None, None, batch)
    assert not torch.allclose(with_bias, without)


def test_linear_redraw_features(helpers, gen):
    x, batch, _ = _inputs(helpers, gen)
    module = _module("linear").eval()
    kernel = module.kernel
    assert kernel.projection.shape == (kernel.num_random_features, module.head_channels)
    assert "kernel.projection" in module.state_dict()
    before = kernel.projection.clone()
    out = module(x, None, None, batch)
    module.redraw_features(generator=torch.Generator().manual_seed(5))
    assert not torch.equal(kernel.projection, before)
    assert kernel.projection.dtype == torch.float64
    assert not torch.allclose(module(x, None, None, batch), out)
    with pytest.raises(ValueError, match="linear"):
        _module("dense").redraw_features()


def test_linear_redraw_in_training_does_not_store_state(helpers, gen):
    x, batch, _ = _inputs(helpers, gen)
    module = _module("linear", kernel_options={"redraw_features_in_training": True})
    stored = module.kernel.projection.clone()
    module.train()
    a = module(x, None, None, batch)
    b = module(x, None, None, batch)
    assert not torch.allclose(a, b)  # fresh features at every training step
    assert torch.equal(module.kernel.projection, stored)  # ... never written to the module
    module.eval()
    torch.testing.assert_close(module(x, None, None, batch), module(x, None, None, batch))


def test_num_random_features_and_head_channels(helpers, gen):
    module = MultiHeadAttention(
        8, heads=2, kind="linear", kernel_options={"num_random_features": 7}, head_channels=3
    )
    assert module.kernel.projection.shape == (7, 3)
    assert module.lin_query.out_features == 6
    assert module.lin_value.out_features == 8
    x, batch, _ = _inputs(helpers, gen)
    assert module.double()(x, None, None, batch).shape == (x.shape[0], 8)
    assert MultiHeadAttention(16, heads=2, kind="linear").kernel.num_random_features == 32


def test_projections_reusable_for_general_attention(helpers, gen):
    """Eq. (3): shared Q/K over all cells, one V per rank, through the public pieces."""
    x, batch, mask = _inputs(helpers, gen)
    module = _module("dense").eval()
    nb = helpers.to_sparse(mask)
    # the pieces compose to forward
    q, k, v = module.project_query(x), module.project_key(x), module.project_value(x)
    out = module.project_output(module.attend(q, k, v, nb, batch, batch))
    torch.testing.assert_close(out, module(x, None, nb, batch))
    # ranks 0 and 1 concatenated: same Q/K, a different value projection for rank 1
    rank = torch.arange(x.shape[0]) % 2
    value_rank1 = torch.nn.Linear(8, 8, bias=False).double()
    v_general = torch.where(rank[:, None] == 0, module.lin_value(x), value_rank1(x))
    o = module.attend(q, k, split_heads(v_general, 2), nb, batch, batch)
    general = module.project_output(o)
    ref = dense_attention(
        q, k, split_heads(v_general, 2), batch, batch, bias=nb, bias_scale=module.kernel.bias_scale
    )
    torch.testing.assert_close(general, module.lin_out(merge_heads(ref)))
    assert not torch.allclose(general, out)


@pytest.mark.parametrize("kind", KINDS)
def test_without_value_projection(helpers, gen, kind):
    x, batch, mask = _inputs(helpers, gen)
    module = _module(kind, value_projection=False)
    assert module.lin_value is None
    assert "lin_value.weight" not in dict(module.named_parameters())
    # values are the (head-split) source features themselves
    torch.testing.assert_close(module.project_value(x), split_heads(x, 2))
    out = _forward(module, x, batch, mask, helpers)
    out.sum().backward()
    assert all(p.grad is not None for p in module.parameters())
    with pytest.raises(ValueError, match="value_projection"):
        MultiHeadAttention(8, 4, heads=2, value_projection=False)


def test_module_errors(helpers, gen):
    x, batch, mask = _inputs(helpers, gen)
    nb = helpers.to_sparse(mask)
    with pytest.raises(ValueError, match="unknown attention kind"):
        MultiHeadAttention(8, kind="flash")
    with pytest.raises(ValueError, match="divide"):
        MultiHeadAttention(8, heads=3)
    with pytest.raises(ValueError, match="share_qk"):
        MultiHeadAttention(8, source_channels=4, share_qk=True)
    with pytest.raises(ValueError, match="attention_dropout"):
        MultiHeadAttention(8, kernel_options={"attention_dropout": 1.0})
    with pytest.raises(ValueError, match=r"not options of kind='sparse'.*scale"):
        MultiHeadAttention(8, kernel_options={"num_random_features": 8})
    with pytest.raises(ValueError, match="never forms"):  # one behaviour: a clear error
        MultiHeadAttention(8, kind="linear", kernel_options={"attention_dropout": 0.1})
    with pytest.raises(TypeError, match="heads"):
        MultiHeadAttention(8, heads=2.0)
    with pytest.raises(ValueError, match="positive"):
        MultiHeadAttention(0)
    sparse = _module("sparse")
    with pytest.raises(ValueError, match="needs a neighborhood"):
        sparse(x, None, None, batch)
    with pytest.raises(ValueError, match=r"\(n, 8\)"):
        sparse(x[:, :5], None, nb, batch)
    with pytest.raises(ValueError, match="batch_target"):
        sparse(x, None, nb, batch[:-1])
    with pytest.raises(ValueError, match=r"\(n_target, n_source\)"):
        sparse(x[:-1], None, nb, batch[:-1])
    with pytest.raises(TypeError, match="floating"):
        sparse(torch.ones(x.shape, dtype=torch.long), None, nb, batch)
    with pytest.raises(ValueError, match="θ·N"):
        _module("linear")(x, None, nb, batch)
    cross = MultiHeadAttention(8, source_channels=4, kind="dense").double()
    with pytest.raises(ValueError, match="source_channels"):
        cross(x, None, None, batch)
    with pytest.raises(ValueError, match="both"):
        cross(x, torch.randn(3, 4, dtype=torch.float64), None, batch, None)
    with pytest.raises(TypeError, match="dtype"):
        cross(x, torch.randn(3, 4), None, None, None)


def test_repr_mentions_kind():
    text = repr(MultiHeadAttention(8, heads=2, kind="linear"))
    assert "kind='linear'" in text
    assert "num_random_features=32" in text
