"""Global arrows with a learned relative random-walk bias (``rrwp_steps``, GRIT's RRWP).

The bias of a global arrow ``r->r:all_r`` is ``W · f_ij`` per head, ``f_ij`` the random-walk
pair features of the attention core on ``adjacency_r``; ``W`` starts at zero. The layer
properties hold with it; the block equals softmax attention with that bias, complex by complex.
"""

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import to_double
from tests.nn.cell.test_cellular_transformer import (
    assert_equivariant_and_batched,
    complexes,
    make_model,
)
from tests.nn.cell.test_paper_options import assert_one_finite_row_per_complex_with_an_empty_one
from topomodelx_attention.nn.attention import padded_layout, random_walk_pair_features
from topomodelx_attention.nn.cell import CellularTransformerLayer, default_tensor_diagram

DIAGRAM = [*default_tensor_diagram(2), "0->0:all_0"]


def randomised(model):
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for layer in model.layers:
            for weight in layer.relative_bias.values():
                weight.copy_(torch.randn(weight.shape, generator=generator, dtype=weight.dtype))
    return model


@pytest.mark.parametrize("kind", ["sparse", "mixed", "dense"])
def test_permutation_equivariance_and_batched_equals_each_complex(kind):
    model = randomised(make_model("pairwise", kind, tensor_diagram=DIAGRAM, kernel_options={"rrwp_steps": 4}))
    assert_equivariant_and_batched(model)


def test_zero_at_initialisation_the_model_is_the_unbiased_one():
    batch = Batch.from_data_list([to_double(c) for c in complexes()])
    plain = make_model("pairwise", "sparse", tensor_diagram=DIAGRAM)
    biased = make_model("pairwise", "sparse", tensor_diagram=DIAGRAM, kernel_options={"rrwp_steps": 5})
    torch.testing.assert_close(biased(batch), plain(batch), atol=1e-12, rtol=0)
    assert "adjacency_0" in biased.neighborhood_keys
    shapes = [w.shape for layer in biased.layers for w in layer.relative_bias.values()]
    assert shapes == [(4, 5), (4, 5)]


def test_the_block_is_softmax_attention_with_the_learned_bias_per_complex():
    layer = CellularTransformerLayer(8, heads=2, tensor_diagram=["0->0:all_0"], kernel_options={"rrwp_steps": 3}).double()
    with torch.no_grad():
        layer.relative_bias["0->0"].copy_(torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]))
    items = [to_double(c) for c in complexes()]
    batch = Batch.from_data_list(items)
    gen = torch.Generator().manual_seed(0)
    x = [torch.randn(batch.num_cells(r), 8, generator=gen, dtype=torch.float64) for r in range(3)]
    b = [batch[f"batch_{r}"] for r in range(3)]
    adjacency = batch.neighborhood("adjacency", 0)
    out = layer(x, {"adjacency_0": adjacency}, b, len(items))
    block = layer.blocks["0->0"]
    normed = layer.norm_attention(x)[0]
    q = block.lin_query(normed).view(-1, 2, 4)
    k = block.lin_key(normed).view(-1, 2, 4)
    v = block.lin_value(normed).view(-1, 2, 4)
    layout = padded_layout(b[0])
    features = random_walk_pair_features(adjacency, layout, 3, dtype=torch.float64)
    position = layout.index - layout.batch * layout.length
    pair = features.permute(0, 2, 3, 1)[b[0].unsqueeze(1), position.unsqueeze(1), position.unsqueeze(0)]  # (n, n, K)
    bias = (pair @ layer.relative_bias["0->0"].t()).permute(2, 0, 1)  # (heads, n, n)
    expected = torch.empty(normed.shape[0], 2, 4, dtype=torch.float64)
    for i in range(len(items)):
        rows = (b[0] == i).nonzero().squeeze(1)
        logits = torch.einsum("thd,shd->hts", q[rows], k[rows]) / 2.0
        logits = logits + bias[:, rows][:, :, rows]
        expected[rows] = torch.einsum("hts,shd->thd", logits.softmax(-1), v[rows])
    h = x[0] + block.lin_out(expected.reshape(-1, 8))
    ffn = layer.ffn(layer.norm_ffn.rank_forward(h, 0), *layer.ffn.per_rank()[0])
    torch.testing.assert_close(out[0], h + ffn)


def test_gradients_reach_the_bias_and_no_nan_without_neighbours():
    model = make_model("pairwise", "sparse", tensor_diagram=DIAGRAM, kernel_options={"rrwp_steps": 4}).train()
    # complex 2 has isolated vertices; complex 1 (a tree) no 2-cell
    batch = Batch.from_data_list([to_double(c) for c in complexes()[1:]])
    out = model(batch)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    for layer in model.layers:
        for weight in layer.relative_bias.values():
            assert weight.grad is not None and torch.isfinite(weight.grad).all()
            assert weight.grad.abs().sum() > 0


def test_empty_complexes_give_one_finite_row_each():
    model = randomised(make_model("pairwise", "sparse", tensor_diagram=DIAGRAM, kernel_options={"rrwp_steps": 3}))
    assert_one_finite_row_per_complex_with_an_empty_one(model)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="global arrows"):
        CellularTransformerLayer(8, heads=2, kernel_options={"rrwp_steps": 4})
    with pytest.raises(ValueError, match="linear"):
        CellularTransformerLayer(8, heads=2, kind="linear", tensor_diagram=DIAGRAM, kernel_options={"rrwp_steps": 4})
    with pytest.raises(ValueError, match="non-negative int"):
        CellularTransformerLayer(8, heads=2, tensor_diagram=DIAGRAM, kernel_options={"rrwp_steps": -1})
    layer = CellularTransformerLayer(8, heads=2, tensor_diagram=["0->0:all_0"], kernel_options={"rrwp_steps": 2})
    x = [torch.randn(3, 8), torch.randn(0, 8), torch.randn(0, 8)]
    with pytest.raises(ValueError, match="adjacency_0"):
        layer(x, {})
