"""The Cellular Transformer with the sparse kernel's cardinality term (``kernel_options``).

``kernel_options={"cardinality": True}``: every sparse arrow adds ``w ⊙ Σ_{s∈N(t)} v_s``
(one learnt ``w`` per arrow, starting at zero). The layer properties of the plain model hold
with it: permutation equivariance, batched = each complex, no NaN on cells without
neighbours, gradients; and it tells apart what the softmax averages away.
"""

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges, to_double
from tests.nn.cell.test_cellular_transformer import (
    assert_equivariant_and_batched,
    complexes,
    make_model,
)
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.transforms import CellCycleLifting

CASES = [("pairwise", "sparse"), ("pairwise", "mixed"), ("general", "sparse")]


def _model(attention, kind, **kwargs):
    model = make_model(attention, kind, kernel_options={"cardinality": True}, **kwargs)
    with torch.no_grad():  # non-zero weights (they start at zero): the term counts
        for name, param in model.named_parameters():
            if "cardinality" in name:
                param.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(len(name)))
    return model


def _cardinality_parameters(model):
    return [name for name, _ in model.named_parameters() if "cardinality" in name]


@pytest.mark.parametrize(("attention", "kind"), CASES)
def test_permutation_equivariance_and_batched_equals_each_complex(attention, kind):
    model = _model(attention, kind)
    assert _cardinality_parameters(model)
    assert_equivariant_and_batched(model)


@pytest.mark.parametrize(("attention", "kind"), CASES)
def test_no_nan_without_neighbours_and_the_weights_get_gradients(attention, kind):
    model = _model(attention, kind, readout_options={"ranks": "all"}).train()
    batch = Batch.from_data_list([to_double(c) for c in complexes()[1:]])  # a tree, isolated vertices
    out = model(batch)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    for name in _cardinality_parameters(model):
        grad = model.get_parameter(name).grad
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name


def test_mixed_kind_gives_the_term_to_its_sparse_arrows_only():
    model = _model("pairwise", "mixed")
    layer = model.layers[0]
    for arrow in layer.arrows:
        weight = layer.arrow_weights(arrow)["cardinality"]
        assert (weight is None) == (arrow.source == arrow.target), arrow.label


def test_the_term_tells_apart_vertices_that_attention_averages_alike():
    """Stars with 2 and 5 identical leaves: the centre's plain CT output is the same."""
    stars = [graph_from_edges([(0, i) for i in range(1, k + 1)], feature_dim=3, seed=0) for k in (2, 5)]
    for star in stars:  # every vertex and every edge the same features
        star.x = torch.ones_like(star.x)
    lifted = [to_double(CellCycleLifting()(s)) for s in stars]
    for item in lifted:
        item.x_1 = torch.ones_like(item.x_1)
    plain = make_model("pairwise", "sparse", outputs=(0,))
    counting = _model("pairwise", "sparse", outputs=(0,))
    centres = [[m(item)[0][0] for item in lifted] for m in (plain, counting)]
    torch.testing.assert_close(centres[0][0], centres[0][1])
    assert (centres[1][0] - centres[1][1]).abs().max() > 1e-4


def test_a_new_model_equals_the_plain_one_and_dense_refuses_the_option():
    torch.manual_seed(0)
    plain = CellularTransformer([3, 3, 3], 16, 2, heads=4).double()
    torch.manual_seed(0)
    counting = CellularTransformer([3, 3, 3], 16, 2, heads=4, kernel_options={"cardinality": True}).double()
    data = Batch.from_data_list([to_double(c) for c in complexes()])
    torch.testing.assert_close(counting(data), plain(data))  # w = 0 at the start
    with pytest.raises(ValueError, match="cardinality"):
        CellularTransformer([3, 3, 3], 16, 2, kind="dense", kernel_options={"cardinality": True})
