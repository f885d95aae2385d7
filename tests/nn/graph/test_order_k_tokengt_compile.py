"""torch.compile of OrderKTokenGT (the harness ``tokengt`` model) on raw ``ComplexData`` batches.

``prepare`` (``torch.compiler.disable``) builds what would break the graph eagerly (sparse COO
products, ``.item()``, ``nonzero``, ``repeat_interleave``, ``unique``: the cell-vertex
incidences and the token layout), and the rest is one graph, the same for every batch size
under ``dynamic=True`` (duck sizing as torch ships it: a user's run).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

from tests.helpers import (
    COMPILE_SIZES,
    assert_compiled_gradients_match,
    assert_one_frame_on_raw_batches,
    batch_slice,
    compile_graphs,
)
from topomodelx_attention.nn.graph import OrderKTokenGT
from topomodelx_attention.nn.graph.order_k_tokengt import OrderKTokenGTInputs
from topomodelx_attention.transforms import LaplacianNodeId, SimplicialCliqueLifting


@pytest.fixture(scope="module")
def skeletons():
    lifting = SimplicialCliqueLifting(complex_dim=1)
    return [LaplacianNodeId(4)(c) for c in lifting.lift_many(compile_graphs())]


def _model(identifiers: str, **kwargs) -> OrderKTokenGT:
    torch.manual_seed(0)
    options = dict(n_layers=1, heads=2, node_id_dim=4, identifiers=identifiers, sign_flip=False)
    options.update(kwargs)
    return OrderKTokenGT([7, 4], 8, 2, **options)


def _breaks(model, batch) -> tuple[int, int, list]:
    explanation = torch._dynamo.explain(model)(batch)
    torch._dynamo.reset()
    return explanation.graph_count, explanation.graph_break_count, explanation.break_reasons


@pytest.mark.slow
@pytest.mark.parametrize(
    ("identifiers", "pooling"), [("sum", "graph_token"), ("ordered", "graph_token"), ("sum", "sum")]
)
def test_compiled_orderk_tokengt_on_complex_data_has_no_graph_break(skeletons, identifiers, pooling):
    model = _model(identifiers, pooling=pooling).eval()
    batch = batch_slice(skeletons, COMPILE_SIZES[1])
    graphs, breaks, reasons = _breaks(model, batch)
    assert (graphs, breaks) == (1, 0), reasons
    # the traced part is the one after prepare: the prepared form has no break either
    assert isinstance(model.prepare(batch), OrderKTokenGTInputs)
    assert _breaks(model, model.prepare(batch))[:2] == (1, 0)


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [None, True])
def test_compiled_orderk_tokengt_does_not_recompile_across_batch_sizes(skeletons, dynamic):
    """``torch.compile(model[, dynamic=True])`` on raw batches: one frame, outputs equal eager."""
    # the first batch has as many complexes as node_id has columns (4): duck sizing would unify
    # the two sizes, specialize the batch size with the width and recompile at the next batch
    batches = [(size, batch_slice(skeletons, size, start=i)) for i, size in enumerate((4, 8, 3))]
    assert_one_frame_on_raw_batches(_model("sum").eval(), batches, 2, dynamic)


@pytest.mark.slow
def test_compiled_orderk_tokengt_gradients_match_eager(skeletons):
    """Training mode through aot_eager on a raw batch: same loss and parameter gradients."""
    model = _model("sum").train()  # no dropout, no sign flip: deterministic
    assert_compiled_gradients_match(model, batch_slice(skeletons, COMPILE_SIZES[1]))


def test_prepare_equals_raw_batch_and_keeps_the_checks(skeletons):
    """``model(model.prepare(b)) == model(b)``; bad inputs still fail in prepare, by name."""
    model = _model("sum").eval()
    batch = batch_slice(skeletons, COMPILE_SIZES[0])
    torch.testing.assert_close(model(model.prepare(batch)), model(batch))
    bad = batch.clone()
    bad["x_0"] = bad["x_0"].clone()
    bad["x_0"][0, 0] = float("nan")
    with pytest.raises(ValueError, match="x_0"):
        model.prepare(bad)
