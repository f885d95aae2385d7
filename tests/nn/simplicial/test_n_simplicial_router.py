"""§2.3 routers (paper / bilinear, simplex / token gating), RoPE with kv-bias, dropout vocabulary."""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.simplicial import (
    NSimplicialAttention,
    NSimplicialTransformer,
    NSimplicialTransformerLayer,
    SimplicialRouter,
    n_simplicial_attention,
)
from topomodelx_attention.nn.simplicial.masks import TupleMask, WindowMask


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ---------------------------------------------------------------------------------- simplex router
@pytest.mark.parametrize("router", ["paper", "bilinear"])
@pytest.mark.parametrize("causal", [False, True])
def test_router_k_equal_n_is_full_attention(router, causal):
    torch.manual_seed(0)
    routed = NSimplicialAttention(
        12, 2, 2, simplicial_options={"router_k": 7, "router": router, "causal": causal}
    ).double()
    dense = NSimplicialAttention(12, 2, 2, simplicial_options={"causal": causal}).double()
    dense.load_state_dict(routed.state_dict(), strict=False)
    x = _x(2, 7, 12)
    context = NSimplicialAttention(12, 2, 2).double()(x, return_context=True)[1]
    torch.testing.assert_close(routed(x, context=context), dense(x))


def test_paper_router_scores_are_the_papers():
    """s_ij = Σ_h w_ih ReLU(<Q_ih, K_jh>/sqrt(d_h)) from the previous layer; top-K of it."""
    torch.manual_seed(0)
    attn = NSimplicialAttention(8, 2, 1, simplicial_options={"router_k": 3}).double()
    prev = NSimplicialAttention(8, 2, 1).double()
    x = _x(1, 6, 8, seed=1)
    _, context = prev(_x(1, 6, 8, seed=2), return_context=True)
    sel = attn.router(x, context=context)
    q, k = context.query[0], context.keys[0][0]  # (H, n, d_h)
    w = attn.router.weight_proj(x)[0]  # (n, H)
    scores = (w.t()[:, :, None] * (q @ k.transpose(-1, -2) / 2.0).relu()).sum(0)  # (n, n)
    kept = scores.gather(-1, sel.indices[0][0])  # the scores of the selected keys ...
    want = scores.topk(3, dim=-1).values  # ... are the 3 largest (ties: any of them)
    torch.testing.assert_close(kept.sort(-1, descending=True).values, want)
    assert bool((scores.sort(-1, descending=True).values[:, 2] == 0).any())  # ReLU ties happen


@pytest.mark.parametrize("router", ["paper", "bilinear"])
def test_router_is_causal(router):
    """With causal=True the selection (and output) of token i never depends on tokens > i."""
    torch.manual_seed(0)
    model = NSimplicialTransformer(
        4,
        12,
        3,
        n_layers=2,
        heads=2,
        outputs="tokens",
        simplicial_options={"causal": True, "router_k": 2, "router": router},
    ).double()
    x = _x(1, 9, 4)
    changed = x.clone()
    changed[:, 5:] = _x(1, 4, 4, seed=3)
    torch.testing.assert_close(model(x)[:, :5], model(changed)[:, :5])
    layer = model.layers[1].attention
    h = _x(1, 9, 12, seed=4)
    h2 = h.clone()
    h2[:, 5:] += 1.0
    _, ctx = model.layers[0].attention(h, return_context=True)
    _, ctx2 = model.layers[0].attention(h2, return_context=True)
    a, b = layer.router(h, context=ctx, causal=True), layer.router(h2, context=ctx2, causal=True)
    for m in range(2):
        assert torch.equal(a.indices[m][:, :5], b.indices[m][:, :5])
        rows = torch.arange(9)[:, None].expand_as(a.indices[m][0])
        assert bool((a.indices[m][0][a.valid[m][0]] <= rows[a.valid[m][0]]).all())


@pytest.mark.parametrize("router", ["paper", "bilinear"])
def test_gradients_reach_the_scorer(router):
    torch.manual_seed(0)
    model = NSimplicialTransformer(
        4, 12, 3, n_layers=2, heads=2, simplicial_options={"router_k": 3, "router": router}
    )
    model(torch.randn(2, 8, 4)).square().sum().backward()
    for layer in model.layers:
        grads = [p.grad for p in layer.attention.router.parameters()]
        assert grads and all(g is not None and torch.count_nonzero(g) > 0 for g in grads)


def test_router_errors():
    with pytest.raises(ValueError, match="router"):
        SimplicialRouter(8, 2, 2, scorer="learned")
    router = SimplicialRouter(8, 2, 2, heads=2)
    with pytest.raises(ValueError, match="context"):
        router(torch.randn(1, 5, 8))


# ---------------------------------------------------------------------------------- token gating
def test_token_gating_k_equal_n_is_the_gated_block():
    torch.manual_seed(0)
    gated = NSimplicialTransformerLayer(
        12, 2, 2, gating="token", simplicial_options={"router_k": 7}
    ).double()
    plain = NSimplicialTransformerLayer(12, 2, 2).double()
    plain.load_state_dict(gated.state_dict(), strict=False)
    x = _x(2, 7, 12)
    s = gated.token_scorer(x)
    torch.testing.assert_close(gated(x), x + s * (plain(x) - x))  # X + s_i f(X)_i for all i


def test_token_gating_updates_only_the_top_k_and_trains_the_scorer():
    torch.manual_seed(0)
    layer = NSimplicialTransformerLayer(
        12, 2, 2, gating="token", simplicial_options={"router_k": 3, "rope": True}
    ).double()
    x = _x(2, 7, 12, seed=1)
    out = layer(x)
    top = layer.token_scorer(x).squeeze(-1).topk(3, dim=-1).indices
    moved = (out - x).abs().sum(-1) > 0
    chosen = torch.zeros_like(moved).scatter_(1, top, True)
    assert torch.equal(moved, chosen)
    # a kept token's update only depends on the kept tokens (attention among them)
    other = x.clone()
    dropped = ~chosen
    other[dropped] += 1.0
    layer.token_scorer.weight.data.zero_()  # same scores (0) for any input: same selection
    base, moved_inputs = layer(x), layer(other)
    torch.testing.assert_close(base[chosen], moved_inputs[chosen])
    out.square().sum().backward()
    assert torch.count_nonzero(layer.token_scorer.weight.grad) > 0
    with pytest.raises(ValueError, match="causal"):
        NSimplicialTransformerLayer(
            12, 2, 2, gating="token", simplicial_options={"router_k": 3, "causal": True}
        )
    with pytest.raises(ValueError, match="gating"):
        NSimplicialTransformerLayer(12, 2, 2, gating="tokens", simplicial_options={"router_k": 3})
    with pytest.raises(ValueError, match="tuples"):
        layer(x[0], tuples=torch.tensor([[0, 1, 2]]))


# ---------------------------------------------------------------------------------- RoPE + bias
def test_rope_with_kv_bias_is_shift_invariant():
    torch.manual_seed(0)
    attn = NSimplicialAttention(
        12, 2, 2, simplicial_options={"rope": True, "kv_bias": True, "causal": True}
    ).double()
    with torch.no_grad():
        attn.key_bias.normal_()  # a generic bias, not the initial ones
    x = _x(2, 6, 12)
    pos = torch.arange(6)
    base = attn(x, positions=pos)
    assert (base - attn(x, positions=pos + 1000)).abs().max() <= 1e-5
    off = NSimplicialAttention(12, 2, 2, simplicial_options={"rope": True, "causal": True}).double()
    off.load_state_dict(attn.state_dict(), strict=False)
    assert not torch.allclose(base, off(x, positions=pos))  # the bias slot does contribute
    out = attn(x, positions=pos).square().sum()
    out.backward()
    assert torch.count_nonzero(attn.key_bias.grad) > 0
    with pytest.raises(ValueError, match="even order"):
        NSimplicialAttention(12, 2, 1, simplicial_options={"rope": True, "kv_bias": True})


# ---------------------------------------------------------------------------------- dropout
def test_dropout_is_output_dropout_and_attention_dropout_is_on_weights():
    torch.manual_seed(0)
    x = _x(2, 6, 12)
    out_drop = NSimplicialAttention(12, 2, 2, dropout=0.5).double().train()
    zeros = (out_drop(x) == 0).double().mean()
    assert 0.3 < zeros < 0.7  # whole output entries are dropped
    attn_drop = NSimplicialAttention(12, 2, 2, attention_dropout=0.5).double()
    plain = NSimplicialAttention(12, 2, 2).double()
    plain.load_state_dict(attn_drop.state_dict())
    torch.testing.assert_close(attn_drop.eval()(x), plain(x))  # off in eval mode
    noisy = attn_drop.train()(x)
    assert (noisy == 0).sum() == 0 and not torch.allclose(noisy, plain(x))


@pytest.mark.parametrize("kind", ["dense", "window", "tuples"])
def test_attention_dropout_every_path(kind):
    q, k1, k2, v1, v2 = (_x(2, 5, 4, seed=s).requires_grad_() for s in range(5))
    mask = {
        "dense": None,
        "window": WindowMask(2),
        "tuples": TupleMask(torch.cartesian_prod(*[torch.arange(5)] * 3)),
    }[kind]

    def run(training, seed=0):
        torch.manual_seed(seed)
        return n_simplicial_attention(
            q, [k1, k2], [v1, v2], mask=mask, chunk_size=2, dropout_p=0.5, training=training
        )

    clean = n_simplicial_attention(q, [k1, k2], [v1, v2], mask=mask, chunk_size=2)
    torch.testing.assert_close(run(False), clean)
    assert not torch.allclose(run(True), clean)
    torch.testing.assert_close(run(True, seed=3), run(True, seed=3))  # seeded by torch's RNG
    if kind == "dense":  # the streaming backward replays the forward's tile masks
        assert torch.autograd.gradcheck(
            lambda *t: (torch.manual_seed(1), n_simplicial_attention(
                t[0], t[1:3], t[3:], chunk_size=(2, 3), dropout_p=0.3, training=True
            ))[1],
            tuple(_x(1, 4, 3, seed=s).requires_grad_() for s in range(5)),
        )
