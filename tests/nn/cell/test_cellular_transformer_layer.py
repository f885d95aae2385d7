"""CellularTransformerLayer: the fused sparse arrows, the kernels of every arrow, its checks."""

from dataclasses import replace

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import to_double
from tests.nn.cell.test_cellular_transformer import complexes
from topomodelx_attention.nn.attention import MultiGroupAttention
from topomodelx_attention.nn.cell import CellularTransformerLayer


def test_sparse_with_all_ones_equals_dense_without_bias():
    torch.manual_seed(0)
    dense = CellularTransformerLayer(8, heads=2, max_rank=1, kind="dense").double()
    sparse = CellularTransformerLayer(8, heads=2, max_rank=1, kind="sparse").double()
    per_rank = {k: v for k, v in dense.state_dict().items() if not k.startswith("blocks.")}
    sparse.load_state_dict(per_rank, strict=False)
    with torch.no_grad():  # the dense blocks' weights into the sparse arrows' stacked views
        for key in dense.block_keys:
            for name, value in dense.arrow_weights(key).items():
                if value is not None:
                    sparse.arrow_weights(key)[name].copy_(value)
    for block in dense.blocks.values():
        block.kernel.bias_scale.data.zero_()  # θ = 0: no neighbourhood bias
    x = [torch.randn(4, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)]
    batch = [torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 1])]
    blocks = {}
    for r_t, r_s, key in [(0, 0, "adjacency_0"), (1, 1, "coadjacency_1"), (0, 1, "incidence_1")]:
        ones = (batch[r_t][:, None] == batch[r_s][None, :]).double()
        blocks[key] = ones.to_sparse().coalesce()
    for a, b in zip(sparse(x, blocks, batch), dense(x, blocks, batch)):
        torch.testing.assert_close(a, b)


def _per_arrow_reference(layer, x, neighborhoods):
    """Pairwise layer with one MultiHeadAttention call per arrow (the definition of Eq. 2)."""
    normed = [norm(xr) for norm, xr in zip(layer.norm_attention, x)]
    update = [torch.zeros_like(xr) for xr in x]
    for arrow, key in zip(layer.arrows, layer.block_keys):
        if normed[arrow.source].shape[0] == 0 or normed[arrow.target].shape[0] == 0:
            continue
        matrix = neighborhoods[arrow.neighborhood].coalesce()
        matrix = matrix.t().coalesce() if arrow.transpose else matrix
        block = layer.arrow_attention(key)  # the arrow's own Q/K/V/O (a copy of its weights)
        update[arrow.target] = update[arrow.target] + block(normed[arrow.target], normed[arrow.source], matrix)
    out = []
    for r, xr in enumerate(x):
        h = xr + update[r]
        out.append(h + layer.ffn[r](layer.norm_ffn[r](h)))
    return out


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("empty_rank_2", [False, True])
def test_joined_sparse_arrows_equal_one_attention_call_per_arrow(bias, empty_rank_2):
    # the layer runs all sparse arrows as one attention problem; the result must be the per-arrow sum
    data = to_double(Batch.from_data_list(complexes()))
    keys = ("adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2")
    neighborhoods = {k: data[k] for k in keys}
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2, max_rank=2, bias=bias).double()
    for param in layer.parameters():  # non-trivial biases
        torch.nn.init.normal_(param, std=0.3)
    generator = torch.Generator().manual_seed(1)
    x = [torch.randn(data.num_cells(r), 8, generator=generator, dtype=torch.float64) for r in range(3)]
    if empty_rank_2:
        x[2] = x[2][:0]
        neighborhoods["coadjacency_2"] = torch.zeros(0, 0, dtype=torch.float64).to_sparse()
        neighborhoods["incidence_2"] = torch.zeros(x[1].shape[0], 0, dtype=torch.float64).to_sparse()
    expected = _per_arrow_reference(layer, x, neighborhoods)
    batch = [torch.zeros(xr.shape[0], dtype=torch.long) for xr in x]
    structure = layer.prepare(neighborhoods, batch, 1)
    # the fused CPU kernel's plan is built once per batch, for the layer's heads
    plan = structure.fused.plan
    assert plan is not None and plan.heads == 2
    assert plan.nnz == structure.fused.index.index_target.shape[0]
    assert plan.crow_t is not None  # grad enabled: the backward's pattern too
    with torch.no_grad():  # inference: no transposed pattern
        assert layer.prepare(neighborhoods, batch, 1).fused.plan.crow_t is None
    got = layer(x, structure)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    # each call builds its own plan
    without_plan = layer(x, replace(structure, fused=replace(structure.fused, plan=None)))
    for g, e in zip(without_plan, expected):
        torch.testing.assert_close(g, e)
    # gradients reach every Q/K/V/O projection of the arrows that have cells on both ends
    sum(g.square().sum() for g in got).backward()
    # (each arrow's weights are slices of the stacked parameters: an unused arrow's are zero)
    for arrow, key in zip(layer.arrows, layer.block_keys):
        used = x[arrow.source].shape[0] > 0 and x[arrow.target].shape[0] > 0
        for name, g in layer.arrow_weights(key, grad=True).items():
            if (name.endswith("_bias") and not bias) or name == "cardinality":
                assert g is None, (arrow.label, name)  # no bias / no cardinality term
                continue
            if used:  # (a zero gradient is possible: a cell without neighbour in this arrow)
                assert g is not None and torch.isfinite(g).all(), (arrow.label, name)
            else:
                assert g is None or not g.any(), (arrow.label, name)
    # every stacked weight matrix gets a gradient (a key bias never does: softmax is shift-invariant)
    missing = [n for n, p in layer.named_parameters() if "bias" not in n and (p.grad is None or not p.grad.any())]
    assert missing == (["fused.query_key_value.2", "fused.output.2"] if empty_rank_2 else []), missing
    if empty_rank_2:  # the rank-2 rows of the stacked LayerNorms / FFNs get no gradient
        assert not layer.norm_attention.weight.grad[2].any() and not layer.ffn.weight_1.grad[2].any()


def test_training_dropout_on_joined_arrows_keeps_expectation_shape_and_gradients():
    data = to_double(Batch.from_data_list(complexes()))
    neighborhoods = {k: data[k] for k in ("adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2")}
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2, max_rank=2, dropout=0.5, attention_dropout=0.5).double().train()
    x = [torch.randn(data.num_cells(r), 8, dtype=torch.float64, requires_grad=True) for r in range(3)]
    first, second = layer(x, neighborhoods), layer(x, neighborhoods)
    assert not torch.allclose(torch.cat(first), torch.cat(second))  # dropout is active
    sum(o.sum() for o in first).backward()
    assert all(torch.isfinite(xr.grad).all() for xr in x)
    layer.eval()  # eval: no dropout, the per-arrow definition again
    for g, e in zip(layer(x, neighborhoods), _per_arrow_reference(layer, x, neighborhoods)):
        torch.testing.assert_close(g, e)


def test_layer_builds_its_kernels_by_name_and_the_core_owns_the_blocks():
    pairwise = CellularTransformerLayer(8, heads=2, kind="mixed", kernel_options={"scale": 1.0})
    kinds = {key: block.kind for key, block in pairwise.blocks.items()}
    assert kinds == {"0->0": "dense", "1->1": "dense", "2->2": "dense"}
    # the sparse arrows run in the core's fused call, on weights stored stacked in layer.fused: per
    # rank, [W_Q of the arrows into it; W_K; W_V of the arrows out of it], and [W_O...] per target
    assert [a.name for a in pairwise._fused_arrows] == ["1->0", "0->1", "2->1", "1->2"]
    assert pairwise.fused_kernel.kind == "sparse" and pairwise.fused_kernel.scale == 1.0
    stacked = {n: tuple(p.shape) for n, p in pairwise.named_parameters() if not n.startswith(("blocks.", "norm", "ffn"))}
    assert stacked == {
        "fused.query_key_value.0": (3 * 8, 8), "fused.query_key_value.1": (6 * 8, 8),
        "fused.query_key_value.2": (3 * 8, 8), "fused.output.0": (8, 8), "fused.output.1": (8, 2 * 8),
        "fused.output.2": (8, 8),
    }
    # every arrow keeps its own weights: slices of them
    w = pairwise.arrow_weights("2->1")
    stacked = pairwise.fused
    assert w["query"].data_ptr() == stacked.query_key_value["1"][8:16].data_ptr()  # 2nd query into rank 1
    assert w["key"].data_ptr() == stacked.query_key_value["2"][8:16].data_ptr()
    assert w["value"].data_ptr() == stacked.query_key_value["2"][16:24].data_ptr()
    assert torch.equal(w["out"], stacked.output["1"][:, 8:16])
    assert stacked.keys == ("1->0", "0->1", "2->1", "1->2") and stacked.pairs == ((1, 0), (0, 1), (2, 1), (1, 2))
    general = CellularTransformerLayer(8, heads=2, attention="general", kind="dense", output_projection=False)
    assert isinstance(general.general, MultiGroupAttention) and len(general.general.values) == 3
    with pytest.raises(ValueError, match=r"kind must be one of .*'mixed'"):
        CellularTransformerLayer(8, heads=2, kind="flash")


def test_stacked_blocks_have_two_parameter_tensors_per_rank():
    # the optimiser steps over far fewer tensors: per layer 2 per rank for the 7 default arrows
    # (was 4 per arrow), and the LayerNorms / FFNs of all ranks as 2 / 4 stacked tensors (was 12 / 12)
    layer = CellularTransformerLayer(32, heads=4, max_rank=2)
    names = [n for n, _ in layer.named_parameters()]
    attention = [n for n in names if not n.startswith(("norm", "ffn"))]
    assert attention == [f"fused.query_key_value.{r}" for r in range(3)] + [f"fused.output.{r}" for r in range(3)]
    assert names[:8] == ["norm_attention.weight", "norm_attention.bias", "norm_ffn.weight", "norm_ffn.bias",
                         "ffn.weight_1", "ffn.bias_1", "ffn.weight_2", "ffn.bias_2"]
    assert len(names) == 14
    assert tuple(layer.ffn.weight_1.shape) == (3, 32, 32) and tuple(layer.norm_ffn.weight.shape) == (3, 32)
