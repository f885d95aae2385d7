"""torch.compile of the Cellular Transformer: no graph break, no recompilation across batch sizes.

The model's ``prepare`` (eager) turns a batch into index tensors and layouts; the computation on
the prepared inputs must trace into one graph (no break inside attention) whose symbolic sizes
cover every batch size (duck sizing off, so that two sizes equal by chance at the first batch
are not assumed equal forever).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from tests import helpers
from tests.nn.cell.test_relative_bias import DIAGRAM, randomised
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.transforms import CellCycleLifting


@pytest.fixture(scope="module")
def mutag():
    return [helpers.to_double(c) for c in CellCycleLifting().lift_many(helpers.compile_graphs())]


def _model(attention, kind, **kwargs):
    torch.manual_seed(0)
    options = dict(n_layers=1, heads=2, attention=attention, kind=kind, attention_dropout=0.0)
    options.update(kwargs)
    return CellularTransformer([7, 4, 7], 8, 2, **options).double()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("attention", "kind"),
    [("pairwise", "sparse"), ("general", "sparse"), ("pairwise", "mixed"), ("general", "linear")],
)
def test_compiled_ct_has_no_graph_break_and_no_recompile(mutag, attention, kind):
    model = _model(attention, kind, pooling="mean").eval()
    helpers.assert_compiles_across_sizes(model, mutag, 2)


@pytest.mark.slow
def test_compiled_ct_on_complex_data_breaks_only_at_prepare(mutag):
    model = _model("pairwise", "sparse").eval()
    batch = helpers.batch_slice(mutag, helpers.COMPILE_SIZES[1])
    # prepare() is torch.compiler.disable-d: it runs eagerly, the rest is one graph
    helpers.assert_one_graph(model, batch)
    compiled = torch.compile(model, backend="eager", dynamic=True)
    torch.testing.assert_close(compiled(batch), model(batch), atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize("cardinality", [False, True])
def test_compiled_ct_gradients_match_eager(mutag, cardinality):
    """Training mode through aot_eager: same loss and parameter gradients as eager."""
    options = {"kernel_options": {"cardinality": True}} if cardinality else {}
    model = _model("pairwise", "sparse", dropout=0.0, **options).train()
    if cardinality:  # non-zero weights: the term reaches the loss
        for name, param in model.named_parameters():
            if "cardinality" in name:
                torch.nn.init.normal_(param, std=0.3)
    batch = helpers.batch_slice(mutag, helpers.COMPILE_SIZES[1])
    helpers.assert_compiled_gradients_match(model, model.prepare(batch))


def _rrwp_model(**kwargs):
    """A global vertex arrow with the relative random-walk bias, the bias's weights non-zero."""
    return randomised(_model("pairwise", "sparse", tensor_diagram=DIAGRAM, kernel_options={"rrwp_steps": 3}, **kwargs))


@pytest.mark.slow
def test_compiled_ct_with_the_rrwp_bias_has_no_graph_break_and_no_recompile(mutag):
    helpers.assert_compiles_across_sizes(_rrwp_model(pooling="mean").eval(), mutag, 2)


@pytest.mark.slow
def test_compiled_ct_with_the_rrwp_bias_gradients_match_eager(mutag):
    model = _rrwp_model(dropout=0.0).train()
    batch = helpers.batch_slice(mutag, helpers.COMPILE_SIZES[1])
    helpers.assert_compiled_gradients_match(model, model.prepare(batch))
