"""The last layer updates only the readout ranks (``CellularTransformerLayer(..., ranks=)``).

A model reads its readout ranks only, so its last layer skips the arrows into the other ranks
and their FFNs. These tests hold the pruned forward to the full one: same outputs, same
gradients, on every attention combination, with empty ranks in the batch.
"""

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import to_double
from tests.nn.cell.test_cellular_transformer import COMBOS, complexes, make_model
from topomodelx_attention.nn.cell import CellularTransformerLayer
from topomodelx_attention.nn.common import segment_pool


def _full_reference(model, data):
    """``forward`` from the full :meth:`encode` (every rank through every layer)."""
    h = model.encode(data)
    num = data.num_complexes
    out = 0
    for r in model.readout_ranks:
        cells = model.readouts[str(r)](h[r])
        out = out + segment_pool(cells, data[f"batch_{r}"], num, model.pooling)
    return out


def _batch():
    return Batch.from_data_list([to_double(c) for c in complexes()])


def _matrix(data, key):
    name, rank = key.rsplit("_", 1)
    return data.neighborhood(name, int(rank))


def _neighborhoods(layer, data):
    return {a.neighborhood: _matrix(data, a.neighborhood) for a in layer.arrows}


@pytest.mark.parametrize(("attention", "kind"), COMBOS)
@pytest.mark.parametrize("ranks", [(0,), (1,), (0, 2)])
def test_pruned_forward_equals_the_full_layer_with_the_same_gradients(attention, kind, ranks):
    model = make_model(attention, kind, readout_options={"ranks": ranks})
    assert model._last_layer_ranks == ranks
    data = _batch()
    inputs = model.prepare(data)
    assert inputs.structure.output_ranks == ranks
    pruned = model(inputs)
    grads_pruned = torch.autograd.grad(pruned.square().sum(), list(model.parameters()), allow_unused=True)
    full = _full_reference(model, data)
    grads_full = torch.autograd.grad(full.square().sum(), list(model.parameters()), allow_unused=True)
    torch.testing.assert_close(pruned, full)
    assert pruned.shape == (data.num_complexes, 2)
    reached = 0
    for (name, _), a, b in zip(model.named_parameters(), grads_pruned, grads_full):
        if a is None:  # an arrow / FFN the pruned layer skips: no gradient in the full one either
            assert b is None or not b.abs().any(), name
            continue
        reached += 1
        torch.testing.assert_close(a, b, msg=name)
    assert reached > 0


def test_pruning_skips_the_arrows_into_other_ranks():
    model = make_model("pairwise", "sparse")  # readout ranks (0,): 2 of the 7 default arrows
    inputs = model.prepare(_batch())
    full, pruned = inputs.structure.fused, inputs.structure.output_fused
    assert pruned.index.index_target.numel() < full.index.index_target.numel()
    into_0 = [a for a in model.arrows if a.target == 0]
    assert 0 < len(into_0) < len(model.arrows)
    # one edge per nonzero of the arrows into rank 0
    data = _batch()
    nnz = sum(_matrix(data, a.neighborhood)._nnz() for a in into_0)
    assert pruned.index.index_target.numel() == nnz


def test_every_readout_rank_keeps_the_full_last_layer():
    model = make_model("pairwise", "sparse", readout_options={"ranks": "all"})
    assert model._last_layer_ranks is None
    inputs = model.prepare(_batch())
    assert inputs.structure.output_ranks is None and inputs.structure.output_fused is None
    torch.testing.assert_close(model(inputs), _full_reference(model, _batch()))


def test_cell_outputs_and_node_level_outputs_are_pruned_and_exact():
    model = make_model("pairwise", "sparse", outputs=(0,))
    data = _batch()
    out = model(data)
    assert set(out) == {0}
    torch.testing.assert_close(out[0], model.readouts["0"](model.encode(data)[0]))


def test_inputs_prepared_by_a_model_with_other_readout_ranks_run_the_full_layer():
    node = make_model("pairwise", "sparse")
    every = make_model("pairwise", "sparse", readout_options={"ranks": "all"})
    every.load_state_dict(node.state_dict(), strict=False)
    data = _batch()
    inputs = every.prepare(data)  # no output ranks
    torch.testing.assert_close(node(inputs), node(data))


def test_layer_ranks_return_none_for_the_other_ranks_and_need_a_matching_structure():
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2).double()
    data = _batch()
    x = [torch.randn(data.num_cells(r), 8, dtype=torch.float64) for r in range(3)]
    neighborhoods = _neighborhoods(layer, data)
    batch = [data[f"batch_{r}"] for r in range(3)]
    full = layer(x, neighborhoods, batch)
    out = layer(x, neighborhoods, batch, ranks=[2, 0])
    assert out[1] is None
    torch.testing.assert_close(out[0], full[0])
    torch.testing.assert_close(out[2], full[2])
    structure = layer.prepare(neighborhoods, batch)
    with pytest.raises(ValueError, match="output_ranks"):
        layer(x, structure, ranks=(0,))
    prepared = layer.prepare(neighborhoods, batch, output_ranks=(0,))
    torch.testing.assert_close(layer(x, prepared, ranks=(0,))[0], full[0])
    # every rank is the full layer, from any structure
    for a, b in zip(layer(x, structure, ranks=(0, 1, 2)), full):
        torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match=r"ranks in 0\.\.2"):
        layer(x, neighborhoods, batch, ranks=(3,))
    with pytest.raises(ValueError, match="non-empty"):
        layer(x, neighborhoods, batch, ranks=())
    with pytest.raises(TypeError, match="sequence of ranks"):
        layer(x, neighborhoods, batch, ranks=0)


def test_pruned_layer_with_empty_target_rank_has_no_nan():
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2).double()
    data = Batch.from_data_list([to_double(complexes()[1])])  # a tree: no 2-cell
    assert data.num_cells(2) == 0
    x = [torch.randn(data.num_cells(r), 8, dtype=torch.float64, requires_grad=True) for r in range(3)]
    neighborhoods = _neighborhoods(layer, data)
    batch = [data[f"batch_{r}"] for r in range(3)]
    out = layer(x, neighborhoods, batch, ranks=(2,))
    assert out[2].shape == (0, 8) and out[0] is None
    out = layer(x, neighborhoods, batch, ranks=(0,))
    assert torch.isfinite(out[0]).all()
    out[0].sum().backward()
    assert torch.isfinite(x[1].grad).all() and x[1].grad.abs().sum() > 0
