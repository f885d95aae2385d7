"""The cardinality term of N-simplicial attention (``simplicial_options={"cardinality": True}``)."""

from __future__ import annotations

import pytest
import scipy.sparse as sp
import toponetx as tnx
import torch
from torch_geometric.loader import DataLoader

from tests.helpers import random_simplicial_complex, simplicial_complex_datas
from topomodelx_attention.data import ComplexData
from topomodelx_attention.nn.simplicial import (
    NSimplicialAttention,
    NSimplicialTransformer,
    NSimplicialTransformerLayer,
    TupleMask,
    n_simplicial_attention,
    simplices_to_tuples,
)

OPTIONS = {"kv_bias": True, "cardinality": True}


def _attention(channels: int = 12, heads: int = 2, **options) -> NSimplicialAttention:
    torch.manual_seed(0)
    attn = NSimplicialAttention(
        channels, heads=heads, order=2, simplicial_options={**OPTIONS, **options}
    ).double()
    with torch.no_grad():  # a nonzero weight: at its zero init the term is invisible
        attn.cardinality_weight.uniform_(0.5, 1.5)
    return attn


def test_functional_term_equals_the_sum_over_the_tuples():
    """O(w) - O(0) = w ⊙ Σ_{(i,j,k) ∈ T} V1_j ⊙ V2_k, bias slots (-1) included."""
    torch.manual_seed(1)
    n, d = 6, 4
    q = torch.randn(3, n, d, dtype=torch.float64)
    keys = [torch.randn(3, n, d, dtype=torch.float64) for _ in range(2)]
    values = [torch.randn(3, n, d, dtype=torch.float64) for _ in range(2)]
    value_bias = [torch.randn(3, d, dtype=torch.float64) for _ in range(2)]
    key_bias = [torch.randn(3, d, dtype=torch.float64) for _ in range(2)]
    tuples = torch.tensor([[0, 1, 2], [0, 2, 1], [0, 3, 4], [1, 0, -1], [2, -1, -1], [4, 5, 3]])
    w = torch.randn(3, 1, d, dtype=torch.float64)
    common = {"mask": TupleMask(tuples), "key_bias": key_bias, "value_bias": value_bias}
    plain = n_simplicial_attention(q, keys, values, **common)
    counted = n_simplicial_attention(q, keys, values, cardinality_weight=w, **common)
    v1 = torch.cat([values[0], value_bias[0].unsqueeze(1)], dim=1)  # index n = bias slot
    v2 = torch.cat([values[1], value_bias[1].unsqueeze(1)], dim=1)
    want = torch.zeros_like(plain)
    for i, j, k in tuples.tolist():
        want[:, i] += v1[:, j] * v2[:, k]
    torch.testing.assert_close(counted - plain, w * want)
    assert (counted[:, 3] == 0).all()  # a query without tuples: zero, never NaN


def test_vertices_on_more_triangles_are_told_apart():
    """Same features everywhere: plain attention cannot count the triangles, cardinality can."""
    sc = tnx.SimplicialComplex([[0, 1, 2], [3, 4, 5], [3, 5, 6], [3, 6, 7]])
    x = torch.ones(8, 12, dtype=torch.float64)
    attn = _attention()
    plain = NSimplicialAttention(12, heads=2, order=2).double()
    plain.load_state_dict(
        {k: v for k, v in attn.state_dict().items() if k not in ("cardinality_weight",)},
        strict=False,
    )
    tuples = simplices_to_tuples(sc, 2)
    same = plain(x, tuples=tuples)
    torch.testing.assert_close(same[0], same[3])  # vertex 0: 1 triangle, vertex 3: 3 triangles
    counted = attn(x, tuples=simplices_to_tuples(sc, 2))
    assert (counted[0] - counted[3]).abs().max() > 1e-3
    # with constant values the term is linear in the number of tuples: 3 vs 1 triangle
    torch.testing.assert_close(counted[3] - same[3], 3 * (counted[0] - same[0]))


def test_zero_init_is_plain_attention():
    torch.manual_seed(0)
    counted = NSimplicialAttention(12, heads=2, order=2, simplicial_options=OPTIONS)
    torch.manual_seed(0)
    plain = NSimplicialAttention(12, heads=2, order=2, simplicial_options={"kv_bias": True})
    assert torch.count_nonzero(counted.cardinality_weight) == 0
    sc = random_simplicial_complex(0, n=7, p=0.6)
    x = torch.randn(7, 12)
    torch.testing.assert_close(counted(x, tuples=sc), plain(x, tuples=sc))
    assert "cardinality=True" in repr(counted)


def test_layer_permutation_equivariance_isolated_vertex_and_gradients():
    torch.manual_seed(0)
    layer = NSimplicialTransformerLayer(12, heads=2, order=2, simplicial_options=OPTIONS).double()
    with torch.no_grad():
        layer.attention.cardinality_weight.fill_(0.7)
    sc = tnx.SimplicialComplex([[0, 1, 2], [1, 2, 3], [3, 4], [4, 5, 6]])
    sc.add_node(7)
    x = torch.randn(8, 12, dtype=torch.float64, requires_grad=True)
    out = layer(x, tuples=sc)
    perm = torch.randperm(8)
    sc_perm = tnx.SimplicialComplex([[int(perm[v]) for v in s] for s in sc.simplices])
    sc_perm.add_node(int(perm[7]))
    x_perm = torch.empty_like(x)
    x_perm[perm] = x
    torch.testing.assert_close(layer(x_perm, tuples=sc_perm)[perm], out)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    grad = layer.attention.cardinality_weight.grad
    assert grad is not None and torch.isfinite(grad).all() and torch.count_nonzero(grad) > 0
    assert torch.isfinite(x.grad).all()


# batched = unbatched for a layer: tests/nn/simplicial/test_n_simplicial_layers.py (parametrised)


def test_model_on_complex_data_batched_and_empty_complex():
    torch.manual_seed(0)
    model = NSimplicialTransformer(
        4, 12, 1, n_layers=2, heads=2, pooling="sum", simplicial_options=OPTIONS
    ).double()
    for layer in model.layers:
        torch.nn.init.constant_(layer.attention.cardinality_weight, 0.2)
    complexes = [random_simplicial_complex(s, n=5 + s, p=0.6) for s in range(3)]
    datas = simplicial_complex_datas(complexes, 4, max_rank=2)
    zero = sp.csr_matrix((0, 0))
    datas.append(  # an empty complex keeps its row
        ComplexData.from_boundaries(
            [zero, zero], [0, 0, 0], features={0: torch.zeros(0, 4)}, dtype=torch.float64
        )
    )
    batch = next(iter(DataLoader(datas, batch_size=4)))
    out = model(batch)
    assert out.shape == (4, 1) and torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(d) for d in datas]))
    out.sum().backward()
    assert all(torch.count_nonzero(la.attention.cardinality_weight.grad) > 0 for la in model.layers)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="cardinality needs tuple lists"):
        NSimplicialAttention(12, heads=2, simplicial_options={"cardinality": True, "window": 2})
    with pytest.raises(ValueError, match="cardinality needs tuple lists"):
        NSimplicialAttention(12, heads=2, simplicial_options={"cardinality": True, "router_k": 2})
    attn = _attention()
    with pytest.raises(ValueError, match="cardinality_weight needs a tuple list"):
        attn(torch.randn(2, 5, 12, dtype=torch.float64))  # a sequence: no tuples


def test_final_norm_false_keeps_the_count_unsaturated():
    """Without the final LayerNorm the hub's token grows with its triangle count; with it, not."""
    torch.manual_seed(0)
    kwargs = {"n_layers": 1, "heads": 2, "pooling": "sum", "simplicial_options": OPTIONS}
    model = NSimplicialTransformer(4, 12, 1, final_norm=False, **kwargs).double()
    assert model.norm is None
    normed = NSimplicialTransformer(4, 12, 1, **kwargs).double()
    assert isinstance(normed.norm, torch.nn.LayerNorm)
    normed.load_state_dict(model.state_dict(), strict=False)
    for m in (model, normed):
        torch.nn.init.constant_(m.layers[0].attention.cardinality_weight, 1.0)

    def hub_norm(m: NSimplicialTransformer, k: int) -> float:
        """Norm of the token of vertex 0, the hub of a fan of ``k`` triangles."""
        sc = tnx.SimplicialComplex([[0, i, i + 1] for i in range(1, k + 1)])
        x = torch.ones(k + 2, 4, dtype=torch.float64)
        with torch.no_grad():
            return float(m.encode(x, sc)[0].norm())

    grown = [hub_norm(model, k) for k in (8, 64, 512)]
    assert grown[1] > 4 * grown[0] and grown[2] > 4 * grown[1]  # about linear in k
    bounded = [hub_norm(normed, k) for k in (8, 64, 512)]
    assert max(bounded) < 1.01 * 12**0.5  # LayerNorm (unit gain, zero shift): norm sqrt(C)
