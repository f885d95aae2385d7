"""torch.compile of TokenGT: no graph break, no recompilation across batch sizes."""

from __future__ import annotations

import pytest
import torch

from tests import helpers
from topomodelx_attention.nn.graph import TokenGT
from topomodelx_attention.transforms import LaplacianNodeId


@pytest.fixture(scope="module")
def mutag():
    return [LaplacianNodeId(4)(g) for g in helpers.compile_graphs()]


def _model(kind, **kwargs):
    torch.manual_seed(0)
    return TokenGT(7, 4, 8, 2, n_layers=1, heads=2, node_id_dim=4, kind=kind, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "token_layout"), [("dense", "packed"), ("dense", "padded"), ("linear", "auto")]
)
def test_compiled_tokengt_has_no_graph_break_and_no_recompile(mutag, kind, token_layout):
    model = _model(kind, token_layout=token_layout).eval()
    prepared = helpers.assert_compiles_across_sizes(model, mutag, 2)
    # one graph per padded/packed choice of the encoder (fixed by token_layout here)
    assert len({inputs.padded for inputs in prepared}) == 1


@pytest.mark.slow
def test_compiled_tokengt_on_graphs_breaks_only_at_prepare_and_matches_gradients(mutag):
    model = _model("dense", token_layout="packed").train()  # no dropout: deterministic
    model.sign_flip = False
    batch = helpers.batch_slice(mutag, helpers.COMPILE_SIZES[1])
    helpers.assert_one_graph(model, batch)
    helpers.assert_compiled_gradients_match(model, batch)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dense", "linear"])
def test_tokengt_compiled_with_default_dynamic_does_not_recompile_on_raw_batches(mutag, kind):
    """``torch.compile(model)`` (torch's default ``dynamic=None``, the README's form) on raw
    batches: ``prepare`` marks every prepared size dynamic, so one frame serves every size."""
    sizes = helpers.COMPILE_SIZES
    batches = [(size, helpers.batch_slice(mutag, size, start=i)) for i, size in enumerate(sizes)]
    helpers.assert_one_frame_on_raw_batches(_model(kind).eval(), batches, 2, dynamic=None)
