"""The kernel registry: options per kernel, capability flags, a new kernel usable by name."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges
from topomodelx_attention.nn.attention import (
    KERNELS,
    DenseKernel,
    MultiHeadAttention,
    build_kernel,
    dense_attention,
    kernel_class,
    register_kernel,
    sparse_plan,
)
from topomodelx_attention.nn.attention.kernels import COMMON_OPTIONS, AttentionTokens
from topomodelx_attention.nn.cell import CellularTransformer, CellularTransformerLayer
from topomodelx_attention.nn.graph import OrderKTokenGT, TokenGT, TokenGTLayer
from topomodelx_attention.transforms import CellCycleLifting, OrthogonalRandomNodeId


@pytest.mark.parametrize("kind", sorted(KERNELS))
def test_declared_options_are_the_constructor_options(kind):
    cls = KERNELS[kind]
    keyword_only = [
        name
        for name, p in inspect.signature(cls).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert keyword_only == list(cls.option_names())
    assert cls.option_names()[: len(COMMON_OPTIONS)] == COMMON_OPTIONS
    kernel = build_kernel(kind, 2, 4)
    assert (kernel.kind, kernel.heads, kernel.head_channels) == (kind, 2, 4)


def test_unknown_kind_and_foreign_options_are_clear_errors():
    with pytest.raises(ValueError, match=r"unknown attention kind 'flash'.*sparse"):
        kernel_class("flash")
    with pytest.raises(ValueError, match=r"\['num_random_features'\].*kind='dense'.*bias_scale"):
        build_kernel("dense", 2, 4, {"num_random_features": 8})
    with pytest.raises(TypeError, match="AttentionKernel"):
        register_kernel(torch.nn.Linear)
    with pytest.raises(ValueError, match="already registered"):

        @register_kernel
        class Impostor(DenseKernel):
            kind = "sparse"


def test_linear_attention_dropout_is_one_clear_error_everywhere():
    """A kernel without attention weights refuses attention dropout in every model, not silently."""
    expected = r"attention_dropout=0\.1 .*kind='linear' never forms"
    builders = [
        lambda: MultiHeadAttention(8, kind="linear", kernel_options={"attention_dropout": 0.1}),
        lambda: CellularTransformerLayer(8, heads=2, kind="linear", attention_dropout=0.1),
        lambda: CellularTransformerLayer(
            8, heads=2, attention="general", kind="linear", attention_dropout=0.1
        ),
        lambda: CellularTransformer([3, 3, 3], 8, 2, kind="linear", attention_dropout=0.1),
        lambda: TokenGTLayer(8, heads=2, kind="linear", attention_dropout=0.1),
        lambda: TokenGT(3, 0, 8, 2, kind="linear", attention_dropout=0.1),
        lambda: OrderKTokenGT([3, 3], 8, 2, kind="linear", attention_dropout=0.1),
    ]
    for build in builders:
        with pytest.raises(ValueError, match=expected):
            build()
    # the same models without the dropout build
    CellularTransformer([3, 3, 3], 8, 2, kind="linear")
    TokenGT(3, 0, 8, 2, kind="linear")


def test_kernel_options_reach_the_kernels_of_every_model():
    ct = CellularTransformer(
        [3, 3, 3], 8, 2, heads=2, kind="mixed", kernel_options={"scale": 1.0, "bias_scale": "shared"}
    )
    kernels = [b.kernel for layer in ct.layers for b in layer.blocks.values()]
    kernels += [layer.fused_kernel for layer in ct.layers]  # the sparse arrows' (stacked weights)
    assert {k.kind for k in kernels} == {"dense", "sparse"}
    assert all(k.scale == 1.0 for k in kernels)
    assert all(k.bias_scale.shape == (1,) for k in kernels if k.kind == "dense")
    with pytest.raises(ValueError, match=r"\['bias_scale'\].*kind='sparse'"):
        CellularTransformer([3, 3, 3], 8, 2, kind="sparse", kernel_options={"bias_scale": "shared"})
    with pytest.raises(ValueError, match="attention_dropout is an option of the layer"):
        CellularTransformerLayer(8, heads=2, kernel_options={"attention_dropout": 0.1})
    tokengt = TokenGT(
        3, 0, 8, 2, heads=2, kind="linear", kernel_options={"num_random_features": 5}
    )
    assert all(layer.attention.kernel.projection.shape == (5, 4) for layer in tokengt.encoder.layers)
    with pytest.raises(ValueError, match="kernel over all tokens"):
        TokenGT(3, 0, 8, 2, kind="sparse")


def _complex(seed):
    graph = graph_from_edges([(0, 1), (1, 2), (2, 0), (2, 3)], feature_dim=3, seed=seed)
    data = CellCycleLifting()(graph)
    return OrthogonalRandomNodeId(dim=4)(data)


def test_a_new_registered_kernel_is_usable_by_name_in_every_model():
    """The newcomer path: one registered class, then kind='...' works in every model."""
    calls = []

    @register_kernel
    class CountingDense(DenseKernel):
        """Dense attention that counts its calls (a stand-in for a new kernel)."""

        kind = "counting_dense"

        def attend(self, query, key, value, tokens):
            calls.append(self.kind)
            return super().attend(query, key, value, tokens)

    try:
        assert KERNELS["counting_dense"] is CountingDense
        batch = Batch.from_data_list([_complex(0), _complex(1)])
        models = [
            CellularTransformer([3, 3, 3], 8, 2, heads=2, kind="counting_dense"),
            CellularTransformer([3, 3, 3], 8, 2, heads=2, attention="general", kind="counting_dense"),
            OrderKTokenGT([3, 3, 3], 8, 2, heads=2, node_id_dim=4, kind="counting_dense"),
        ]
        for model in models:
            calls.clear()
            out = model(batch)
            assert out.shape == (2, 2) and torch.isfinite(out).all()
            assert calls, type(model).__name__
        layer = TokenGTLayer(8, heads=2, kind="counting_dense")
        assert layer.attention.kernel.bias_scale is None  # TokenGT: no θ·N bias
    finally:
        KERNELS.pop("counting_dense", None)


def test_forward_is_the_one_call_signature_and_hands_the_tokens_to_attend():
    """Every kind is called through AttentionKernel.forward; it collects the token structure."""
    seen = []

    class Recording(DenseKernel):
        kind = "recording"

        def attend(self, query, key, value, tokens):
            seen.append(tokens)
            return super().attend(query, key, value, tokens)

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 2, 4, generator=gen) for _ in range(3))
    batch = torch.tensor([0, 0, 0, 1, 1])
    kernel = Recording(2, 4, neighborhood_bias=False)
    out = kernel(q, k, v, None, batch, batch, 2)
    assert seen == [AttentionTokens(None, batch, batch, 2, None, None)]
    torch.testing.assert_close(out, dense_attention(q, k, v, batch, batch, num_complexes=2))
    # a plan is the sparse kernel's: another kind refuses it instead of ignoring it
    plan = sparse_plan((torch.arange(5), torch.arange(5)), 2, n_target=5, n_source=5)
    with pytest.raises(ValueError, match=r"plan= is the sparse kernel's.*kind='dense' takes none"):
        build_kernel("dense", 2, 4)(q, k, v, plan=plan)
    with pytest.raises(ValueError, match=r"plan= .*kind='linear' takes none"):
        build_kernel("linear", 2, 4)(q, k, v, plan=plan)
    sparse = build_kernel("sparse", 2, 4)
    edges = (torch.arange(5), torch.arange(5))
    assert torch.equal(sparse(q, k, v, edges, plan=plan), sparse(q, k, v, edges))
    with pytest.raises(NotImplementedError, match="kind='linear' forms no explicit"):
        build_kernel("linear", 2, 4).weights(q, k, AttentionTokens())
