"""NSimplicialAttention, NSimplicialTransformerLayer and NSimplicialTransformer behaviour."""

from __future__ import annotations

import pytest
import toponetx as tnx
import torch
from torch_geometric.loader import DataLoader

from tests.helpers import random_simplicial_complex, simplicial_complex_datas
from topomodelx_attention.nn.simplicial import (
    NSimplicialAttention,
    NSimplicialTransformer,
    NSimplicialTransformerLayer,
    simplices_to_tuples,
    tuples_batch,
)

CONFIGS = {
    "dense": {},
    "causal": {"causal": True},
    "window": {"window": (2, 3), "causal": True},
    "router": {"router_k": 3},
    "router_causal": {"router_k": 3, "causal": True},
    "rope": {"rope": True, "causal": True},
    "kv_bias": {"kv_bias": True},
    "order1": {"order": 1},
    "order3": {"order": 3, "chunk_size": (2, 2)},
}


def _seed_modules(seed: int = 0) -> None:
    torch.manual_seed(seed)


def _relabel(sc: tnx.SimplicialComplex, perm: list[int]) -> tnx.SimplicialComplex:
    out = tnx.SimplicialComplex([[perm[v] for v in s] for s in sc.simplices])
    for node in sc.skeleton(0):
        out.add_node(perm[next(iter(node))])
    return out


def _complex_with_isolated_vertex() -> tnx.SimplicialComplex:
    sc = tnx.SimplicialComplex([[0, 1, 2], [1, 2, 3], [3, 4], [4, 5, 6]])
    sc.add_node(7)
    return sc


def _all_grads_nonzero(module: torch.nn.Module) -> list[str]:
    return [
        name
        for name, p in module.named_parameters()
        if p.grad is None or not torch.isfinite(p.grad).all() or torch.count_nonzero(p.grad) == 0
    ]


# ---------------------------------------------------------------------------------- attention
def _attention(name: str) -> NSimplicialAttention:
    """The attention module of configuration ``name`` (width 12, 2 heads), seeded."""
    options = dict(CONFIGS[name])
    order = options.pop("order", 2)
    _seed_modules()
    return NSimplicialAttention(12, heads=2, order=order, simplicial_options=options)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_attention_shapes_and_gradients(name):
    attn = _attention(name)
    x = torch.randn(2, 7, 12)
    out = attn(x)
    assert out.shape == x.shape and torch.isfinite(out).all()
    out.square().sum().backward()
    assert _all_grads_nonzero(attn) == []


@pytest.mark.parametrize("name", ["dense", "window", "router", "rope", "order3"])
def test_attention_batched_equals_unbatched(name):
    attn = _attention(name).double()
    x = torch.randn(3, 6, 12, dtype=torch.float64)
    full = attn(x)
    for b in range(3):
        torch.testing.assert_close(full[b : b + 1], attn(x[b : b + 1]))
        torch.testing.assert_close(full[b], attn(x[b]))  # 2-D input = one sequence


@pytest.mark.parametrize("name", ["dense", "router", "kv_bias", "order3"])
def test_attention_permutation_equivariance_on_sequences(name):
    attn = _attention(name).double()
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    perm = torch.randperm(7)
    torch.testing.assert_close(attn(x)[:, perm], attn(x[:, perm]))


def test_rope_module_is_shift_invariant():
    _seed_modules()
    attn = NSimplicialAttention(
        12, heads=2, order=2, simplicial_options={"rope": True, "causal": True}
    ).double()
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    pos = torch.arange(6)
    torch.testing.assert_close(attn(x, positions=pos), attn(x, positions=pos + 100))


def test_router_k_n_equals_dense_module():
    _seed_modules()
    routed = NSimplicialAttention(12, heads=2, order=2, simplicial_options={"router_k": 7}).double()
    dense = NSimplicialAttention(12, heads=2, order=2).double()
    dense.load_state_dict(routed.state_dict(), strict=False)
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    torch.testing.assert_close(routed(x), dense(x))


def test_attention_construction_errors():
    with pytest.raises(ValueError, match="multiple of heads"):
        NSimplicialAttention(10, heads=3)
    with pytest.raises(ValueError, match="determinant"):
        NSimplicialAttention(
            12, heads=2, order=2, simplicial_options={"rope": True, "logit_form": "product"}
        )
    with pytest.raises(ValueError, match="divisible"):
        NSimplicialAttention(8, heads=1, order=2, simplicial_options={"rope": True})
    with pytest.raises(ValueError, match="either"):
        NSimplicialAttention(12, simplicial_options={"window": 2, "router_k": 2})
    attn = NSimplicialAttention(12, simplicial_options={"router_k": 2})
    with pytest.raises(ValueError, match="router"):
        attn(torch.randn(4, 12), tuples=torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="channels"):
        attn(torch.randn(2, 4, 10))


# ---------------------------------------------------------------------------------- complexes
@pytest.mark.parametrize("kv_bias", [False, True])
def test_layer_on_complex_permutation_equivariance(kv_bias):
    _seed_modules()
    layer = NSimplicialTransformerLayer(
        12, heads=2, order=2, simplicial_options={"kv_bias": kv_bias}
    ).double()
    sc = _complex_with_isolated_vertex()
    x = torch.randn(8, 12, dtype=torch.float64)
    out = layer(x, tuples=sc)
    perm = torch.randperm(8)
    sc_perm = _relabel(sc, perm.tolist())
    x_perm = torch.empty_like(x)
    x_perm[perm] = x
    out_perm = layer(x_perm, tuples=sc_perm)
    torch.testing.assert_close(out_perm[perm], out)


def test_layer_isolated_vertex_no_nan_and_all_gradients():
    _seed_modules()
    layer = NSimplicialTransformerLayer(12, heads=2, order=2, simplicial_options={"kv_bias": True})
    sc = _complex_with_isolated_vertex()
    x = torch.randn(8, 12, requires_grad=True)
    out = layer(x, tuples=sc)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert _all_grads_nonzero(layer) == []
    # without lower-order tuples the isolated vertex gets a zero attention message
    attn = NSimplicialAttention(12, heads=2, order=2)
    msg = attn(layer.norm1(x), tuples=simplices_to_tuples(sc, 2))
    torch.testing.assert_close(msg[7], attn.out_proj.bias)


@pytest.mark.parametrize("cardinality", [False, True])
def test_layer_complex_batched_equals_unbatched(cardinality):
    _seed_modules()
    layer = NSimplicialTransformerLayer(
        12, heads=2, order=2, simplicial_options={"kv_bias": True, "cardinality": cardinality}
    ).double()
    if cardinality:  # a nonzero weight: at its zero init the count term is invisible
        torch.nn.init.constant_(layer.attention.cardinality_weight, 0.3)
    complexes = [random_simplicial_complex(s, n=6, p=0.6) for s in range(3)]
    sizes = [len(list(c.skeleton(0))) for c in complexes]
    xs = [torch.randn(n, 12, dtype=torch.float64) for n in sizes]
    tuples, _ = tuples_batch(
        [simplices_to_tuples(c, 2, include_lower=True) for c in complexes], sizes
    )
    full = layer(torch.cat(xs), tuples=tuples)
    torch.testing.assert_close(full, torch.cat([layer(x, tuples=c) for x, c in zip(xs, complexes)]))


# ---------------------------------------------------------------------------------- model
def test_model_on_sequences_and_gradients():
    _seed_modules()
    model = NSimplicialTransformer(
        5, 12, 3, n_layers=2, heads=2, order=2, simplicial_options={"causal": True, "router_k": 4}
    )
    out = model(torch.randn(4, 9, 5))
    assert out.shape == (4, 3)
    out.square().sum().backward()
    assert _all_grads_nonzero(model) == []
    token_model = NSimplicialTransformer(
        5, 12, 3, n_layers=1, outputs="tokens", simplicial_options={"window": 2}
    )
    assert token_model(torch.randn(2, 9, 5)).shape == (2, 9, 3)


def test_model_complex_data_batched_equals_unbatched():
    _seed_modules()
    model = NSimplicialTransformer(
        4, 12, 2, n_layers=2, heads=2, order=2, simplicial_options={"kv_bias": True, "self_loops": True}
    ).double()
    complexes = [random_simplicial_complex(s, n=5 + s, p=0.6) for s in range(3)]
    datas = simplicial_complex_datas(complexes, 4, max_rank=3)
    batch = next(iter(DataLoader(datas, batch_size=3)))
    out = model(batch)
    assert out.shape == (3, 2) and torch.isfinite(out).all()
    single = torch.cat([model(d) for d in datas])
    torch.testing.assert_close(out, single)
    # the explicit (x, tuples, batch) path and the SimplicialComplex path agree
    torch.testing.assert_close(model(datas[0].x_0, complexes[0]), single[:1])
    out.sum().backward()
    assert _all_grads_nonzero(model) == []


def test_model_categorical_inputs_and_errors():
    _seed_modules()
    model = NSimplicialTransformer(2, 12, 2, n_layers=1, categorical=[10, 4])
    sc = _complex_with_isolated_vertex()
    codes = torch.stack([torch.randint(0, 10, (8,)), torch.randint(0, 4, (8,))], dim=1)
    assert model(codes, sc).shape == (1, 2)
    sequences = torch.stack([torch.randint(0, 10, (3, 5)), torch.randint(0, 4, (3, 5))], dim=-1)
    assert model(sequences).shape == (3, 2)  # (batch, n, columns): one embedding per token
    with pytest.raises(ValueError, match="codes outside"):
        model(torch.full((8, 2), 7), sc)  # column 1 has 4 categories
    with pytest.raises(TypeError, match="category"):
        model(torch.randn(8, 2), sc)
    float_model = NSimplicialTransformer(3, 12, 2, n_layers=1)
    with pytest.raises(ValueError, match="tuples"):
        float_model(torch.randn(8, 3))
    with pytest.raises(ValueError, match="pooling"):
        NSimplicialTransformer(3, 12, 2, pooling="max")
    with pytest.raises(ValueError, match="outputs"):
        NSimplicialTransformer(3, 12, 2, outputs="cells")
