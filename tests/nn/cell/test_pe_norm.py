"""``pe_options["norm"] = "batch"``: each rank's PE columns standardised before their projection."""

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import to_double
from tests.nn.cell.test_cellular_transformer import (
    assert_equivariant_and_batched,
    complexes,
    make_model,
)
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.nn.cell.cell_encoder import CellEncoder


def _with_pe(items, width=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    for c in items:
        for r in range(3):
            # return-probability-like columns: small values of different scales per column
            scale = torch.tensor([1.0, 0.05, 0.5, 0.01][:width])
            c[f"pe_{r}"] = torch.rand(c.num_cells(r), width, generator=generator) * scale
    return items


def test_the_pe_is_standardised_per_column_by_hand():
    """Training mode: (E - mean) / sqrt(var + eps) per column over the cells (weight 1, bias 0)."""
    encoder = CellEncoder(2, 3, pe_channels=2, pe_combination="sum", pe_norm="batch").double()
    torch.nn.init.eye_(encoder.pe_linear.weight[:2, :2])
    with torch.no_grad():
        encoder.pe_linear.weight[2].zero_()
        encoder.pe_linear.bias.zero_()
    pe = torch.tensor([[0.0, 0.01], [0.0, 0.03], [0.3, 0.02]], dtype=torch.double)
    h = torch.zeros(3, 3, dtype=torch.double)
    out = encoder.combine(h, pe)
    mean, var = pe.mean(0), pe.var(0, unbiased=False)
    expected = (pe - mean) / torch.sqrt(var + 1e-5)
    torch.testing.assert_close(out[:, :2], expected)
    torch.testing.assert_close(out[:, 2], torch.zeros(3, dtype=torch.double))
    # the running statistics moved towards the batch's; eval mode uses them
    assert torch.all(encoder.pe_norm.running_mean > 0)
    encoder.eval()
    running = (pe - encoder.pe_norm.running_mean) / torch.sqrt(encoder.pe_norm.running_var + 1e-5)
    torch.testing.assert_close(encoder.combine(h, pe)[:, :2], running)


def test_a_rank_of_one_cell_or_none_is_not_an_error_in_training():
    encoder = CellEncoder(2, 3, pe_channels=2, pe_norm="batch").train()
    assert encoder.combine(torch.zeros(0, 3), torch.zeros(0, 2)).shape == (0, 3)
    one = encoder.combine(torch.zeros(1, 3), torch.tensor([[0.2, 0.1]]))  # running statistics
    assert one.shape == (1, 3) and torch.isfinite(one).all()


@pytest.mark.parametrize(("attention", "kind"), [("pairwise", "sparse"), ("general", "dense")])
def test_equivariant_and_batched_equals_each_complex_in_eval(attention, kind):
    model = make_model(attention, kind, pe_options={"channels": 4, "norm": "batch"})
    items = _with_pe([to_double(c) for c in complexes()])
    model.train()
    model(Batch.from_data_list(items))  # running statistics of a training step
    model.eval()
    assert_equivariant_and_batched(model, make=lambda: _with_pe(complexes()))


def test_trains_with_gradients_on_the_norm_and_no_nan_on_a_tree():
    model = make_model("pairwise", "sparse", pe_options={"channels": 4, "norm": "batch"}).train()
    items = _with_pe([to_double(c) for c in complexes()])
    out = model(Batch.from_data_list(items))
    assert torch.isfinite(out).all()
    out.sum().backward()
    norms = [m.pe_norm for m in model.modules() if isinstance(m, CellEncoder) and m.pe_norm is not None]
    assert len(norms) == 3 and all(n.weight.grad is not None and n.weight.grad.abs().sum() > 0 for n in norms)


def test_a_norm_it_does_not_know_is_refused():
    with pytest.raises(ValueError, match=r"pe_options\['norm'\] must be one of"):
        CellularTransformer([3, 3, 3], 8, 2, pe_options={"channels": 4, "norm": "layer"})
    with pytest.raises(ValueError, match="pe_norm must be one of"):
        CellEncoder(2, 3, pe_channels=2, pe_norm="instance")
