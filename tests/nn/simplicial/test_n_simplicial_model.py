"""NSimplicialTransformer: one row per complex (empty ones included) and input checks."""

from __future__ import annotations

import pytest
import scipy.sparse as sp
import toponetx as tnx
import torch
from torch_geometric.loader import DataLoader

from topomodelx_attention.data import ComplexData, from_toponetx
from topomodelx_attention.nn.simplicial import NSimplicialTransformer


def _complex(simplices, nodes=(), channels=3, seed=0):
    sc = tnx.SimplicialComplex(simplices)
    for v in nodes:
        sc.add_node(v)
    gen = torch.Generator().manual_seed(seed)
    sizes = [len(list(sc.skeleton(r))) if r <= sc.dim else 0 for r in (0, 1)]
    features = {r: torch.randn(n, channels, generator=gen, dtype=torch.float64) for r, n in enumerate(sizes)}
    return from_toponetx(sc, features=features, max_rank=2, dtype=torch.float64)


def _empty(channels=3):
    zero = sp.csr_matrix((0, 0))
    return ComplexData.from_boundaries(
        [zero, zero],
        [0, 0, 0],
        features={0: torch.zeros(0, channels), 1: torch.zeros(0, channels)},
        dtype=torch.float64,
    )


@pytest.mark.parametrize("pooling", ["sum", "mean"])
def test_one_row_per_complex_with_empty_and_rankless_complexes(pooling):
    torch.manual_seed(0)
    model = NSimplicialTransformer(
        3, 8, 2, n_layers=2, heads=2, pooling=pooling, simplicial_options={"kv_bias": True}
    )
    model = model.double()
    full = _complex([[0, 1, 2], [1, 2, 3]])
    vertices_only = _complex([], nodes=(0, 1), seed=1)  # no edge, no triangle
    datas = [full, _empty(), vertices_only, _empty()]  # trailing empty complex too
    batch = next(iter(DataLoader(datas, batch_size=4)))
    assert batch.num_complexes == 4
    out = model(batch)
    assert out.shape == (4, 2) and torch.isfinite(out).all()
    empty_row = model.readout(torch.zeros(1, 8, dtype=torch.float64))[0]
    torch.testing.assert_close(out[1], empty_row)  # nothing pooled: the head of a zero vector
    torch.testing.assert_close(out[3], empty_row)
    for row, data in ((0, full), (2, vertices_only)):  # batched = unbatched
        torch.testing.assert_close(out[row], model(data)[0])
    # rank-1 tokens: the vertices-only complex has no cells of that rank, it keeps its row
    edges = NSimplicialTransformer(
        3, 8, 2, n_layers=1, order=1, rank=1, simplicial_options={"kv_bias": True}
    ).double()
    out = edges(batch)
    assert out.shape == (4, 2)
    torch.testing.assert_close(out[2], edges.readout(torch.zeros(1, 8, dtype=torch.float64))[0])
    torch.testing.assert_close(out[0], edges(full)[0])


def test_explicit_num_complexes_for_cells():
    torch.manual_seed(0)
    model = NSimplicialTransformer(3, 8, 2, n_layers=1)
    x = torch.randn(4, 3)
    tuples = torch.tensor([[0, 1, 2], [1, 0, 2], [2, 0, 1]])
    assert model(x, tuples, torch.zeros(4, dtype=torch.long), num_complexes=3).shape == (3, 2)
    with pytest.raises(ValueError, match="num_complexes"):
        model(x, tuples, torch.tensor([0, 0, 1, 1]), num_complexes=1)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e30])
def test_non_finite_or_huge_inputs_raise(bad):
    model = NSimplicialTransformer(3, 8, 2, n_layers=1)
    data = _complex([[0, 1, 2]])
    data.x_0 = data.x_0.float()
    data.x_0[2, 1] = bad
    with pytest.raises(ValueError, match=r"x_0: row 2"):
        model.float()(data)
    seqs = torch.randn(2, 5, 3)
    seqs[1, 3, 0] = bad
    with pytest.raises(ValueError, match=r"x: row 1"):
        model(seqs)
    unchecked = NSimplicialTransformer(3, 8, 2, n_layers=1, check_inputs=False)
    unchecked(seqs)  # the flag turns the check off (the output may then be NaN)


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        NSimplicialTransformer(3, 8, 2, 2)  # n_layers must be named


def test_float64_inputs_are_cast_to_the_model_dtype():
    from topomodelx_attention.nn.simplicial import NSimplicialTransformer

    torch.manual_seed(0)
    model = NSimplicialTransformer(3, 8, 2, n_layers=1, heads=2)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    assert torch.allclose(model(x), model(x.float()))


def test_attention_options_are_one_mapping_passed_down_unchanged():
    """The attention's options are one ``simplicial_options`` mapping, checked once."""
    import inspect

    from topomodelx_attention.nn.simplicial import (
        SIMPLICIAL_OPTIONS,
        NSimplicialAttention,
        NSimplicialTransformerLayer,
    )

    for cls in (NSimplicialTransformer, NSimplicialTransformerLayer, NSimplicialAttention):
        names = set(inspect.signature(cls).parameters)
        assert "simplicial_options" in names and not names & set(SIMPLICIAL_OPTIONS), cls.__name__
    options = {"kv_bias": True, "self_loops": True, "chunk_size": 4, "scale": 0.5}
    model = NSimplicialTransformer(3, 8, 2, n_layers=2, heads=2, simplicial_options=options)
    for layer in model.layers:
        attention = layer.attention
        assert attention.key_bias is not None and attention.self_loops and attention.include_lower
        assert (attention.chunk_size, attention.scale) == (4, 0.5)
    assert model.include_lower and model.self_loops and not model.causal
    with pytest.raises(ValueError, match=r"simplicial_options \['router_K'\] are not options"):
        NSimplicialTransformer(3, 8, 2, simplicial_options={"router_K": 2})
    with pytest.raises(TypeError, match="simplicial_options must be a mapping"):
        NSimplicialTransformerLayer(8, 2, 2, simplicial_options=[("kv_bias", True)])
    with pytest.raises(TypeError, match="kv_bias"):  # an attention option, not a keyword of its own
        NSimplicialTransformer(3, 8, 2, kv_bias=True)
    with pytest.raises(TypeError, match="kernel_options"):  # the core kernels' word, another meaning
        NSimplicialTransformer(3, 8, 2, kernel_options={"kv_bias": True})
    token = NSimplicialTransformerLayer(8, 2, 2, gating="token", simplicial_options={"router_k": 3})
    assert token.token_k == 3 and token.attention.router is None  # K tokens, no simplex router
    with pytest.raises(ValueError, match=r"simplicial_options\['router_k'\]"):
        NSimplicialTransformerLayer(8, 2, 2, gating="token")
