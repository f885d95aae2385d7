"""torch.compile of TokenGT: no graph break, no recompilation across batch sizes."""

from __future__ import annotations

import tempfile

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch.fx.experimental._config as fx_config
from torch_geometric.data import Batch

from topomodelx_attention.data.datasets import load_tu_dataset
from topomodelx_attention.nn.graph import TokenGT
from topomodelx_attention.transforms import LaplacianNodeId

SIZES = (5, 8, 3)  # warm-up batch, then two more batch sizes


@pytest.fixture(scope="module")
def mutag():
    with tempfile.TemporaryDirectory() as root:
        graphs = list(load_tu_dataset("MUTAG", root=root))[: max(SIZES) + 4]
    return [LaplacianNodeId(4)(g) for g in graphs]


def _batch(graphs, size, start=0):
    return Batch.from_data_list(graphs[start : start + size])


def _model(kind, **kwargs):
    torch.manual_seed(0)
    return TokenGT(7, 4, 8, 2, n_layers=1, heads=2, node_id_dim=4, kind=kind, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "token_layout"), [("dense", "packed"), ("dense", "padded"), ("linear", "auto")]
)
def test_compiled_tokengt_has_no_graph_break_and_no_recompile(mutag, kind, token_layout):
    model = _model(kind, token_layout=token_layout).eval()
    explanation = torch._dynamo.explain(model)(model.prepare(_batch(mutag, SIZES[0])))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(model, backend=counter, dynamic=True)
    choices = set()
    with fx_config.patch(use_duck_shape=False):
        for i, size in enumerate(SIZES):
            batch = _batch(mutag, size, start=i)
            inputs = model.prepare(batch)
            choices.add(inputs.padded)
            got = compiled(inputs)
            assert got.shape == (size, 2)
            torch.testing.assert_close(got, model(batch), atol=1e-5, rtol=1e-5)
    # one graph per padded/packed choice of the encoder (fixed by token_layout here)
    assert len(choices) == 1
    assert counter.frame_count == 1
    torch._dynamo.reset()


@pytest.mark.slow
def test_compiled_tokengt_on_graphs_breaks_only_at_prepare_and_matches_gradients(mutag):
    model = _model("dense", token_layout="packed").train()  # no dropout: deterministic
    model.sign_flip = False
    batch = _batch(mutag, SIZES[1])
    explanation = torch._dynamo.explain(model)(batch)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", dynamic=True)
    grads = []
    for fn in (model, compiled):
        model.zero_grad()
        fn(batch).square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()
