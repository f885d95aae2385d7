"""``torch.compile(model)`` of the CT on raw batches, as a user runs it.

No ``prepare`` by hand and torch's default duck sizing (the other compile tests turn it off):
one compiled frame for every batch size, with ``dynamic=True`` and with torch's default
``dynamic=None`` (the README's form: ``prepare`` marks every prepared size dynamic, so the first
compile is already the one for all sizes); training gradients equal to eager, and the sparse
attention of the compiled graph is the fused kernel's custom op.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from tests.helpers import assert_compiled_trains_like_eager, batch_slice, load_mutag, to_double
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.transforms import CellCycleLifting

# the first batch has as many complexes as x_0 has columns (7): duck sizing would unify the two
# sizes, specialize the batch size to 7 with the feature width and recompile at the next batch
SIZES = (7, 5, 3)
OP = torch.ops.topomodelx_attention.sparse_attention_csr.default


@pytest.fixture(scope="module")
def mutag():
    graphs = load_mutag(sum(SIZES) + 2)
    return [to_double(c) for c in CellCycleLifting().lift_many(graphs)]


def _model() -> CellularTransformer:
    torch.manual_seed(0)
    return CellularTransformer([7, 4, 7], 8, 2, n_layers=2, heads=2).double().train()


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [None, True])
def test_compiled_ct_on_raw_batches_trains_like_eager_without_recompiling(mutag, dynamic):
    model = _model()
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend="aot_eager", dynamic=dynamic)
    assert_compiled_trains_like_eager(model, compiled, mutag, SIZES)
    # one graph (after prepare's break) for every batch size (a backend call that dynamo restarts
    # to specialize the modules' floats, e.g. LayerNorm eps, is not a second graph)
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


@pytest.mark.slow
def test_compiled_ct_graph_calls_the_fused_sparse_op_once_per_layer(mutag):
    model = _model()
    calls = []

    def backend(gm, example_inputs):
        calls.extend(n for n in gm.graph.nodes if n.op == "call_function" and n.target is OP)
        return gm.forward

    compiled = torch.compile(model, backend=backend, dynamic=True)
    compiled(batch_slice(mutag, SIZES[0])).sum().backward()
    assert len(calls) == len(model.layers)  # one joined sparse call per layer
    torch._dynamo.reset()
