"""Global arrows ``r->r:all_r`` of a tensor diagram: unmasked attention within each complex.

A global arrow is one more pairwise block beside the local ones (GPS-style global attention
next to message passing): every cell of rank ``r`` attends to every cell of rank ``r`` of its
own complex, with the dense kernel and no θ·N bias (the linear kernel for ``kind="linear"``).
The layer properties hold with it; the block equals plain softmax attention over each
complex; it never reads a neighbourhood matrix.
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
from topomodelx_attention.nn.attention import MultiHeadAttention
from topomodelx_attention.nn.cell import (
    CellularTransformerLayer,
    default_tensor_diagram,
    parse_tensor_diagram,
)

DIAGRAM = [*default_tensor_diagram(2), "0->0:all_0", "1->1:all_1"]
KINDS = ["sparse", "mixed", "linear"]


@pytest.mark.parametrize("kind", KINDS)
def test_permutation_equivariance_and_batched_equals_each_complex(kind):
    assert_equivariant_and_batched(make_model("pairwise", kind, tensor_diagram=DIAGRAM))


def test_the_block_is_softmax_attention_over_each_complex_and_reads_no_matrix():
    layer = CellularTransformerLayer(8, heads=2, tensor_diagram=["0->0:all_0"]).double()
    block = layer.blocks["0->0"]
    assert block.kernel.kind == "dense" and block.kernel.bias_scale is None
    items = [to_double(c) for c in complexes()]
    batch = Batch.from_data_list(items)
    gen = torch.Generator().manual_seed(0)
    x = [torch.randn(batch.num_cells(r), 8, generator=gen, dtype=torch.float64) for r in range(3)]
    b = [batch[f"batch_{r}"] for r in range(3)]
    out = layer(x, {}, b, len(items))  # no neighbourhood is given, none is needed
    normed = layer.norm_attention(x)[0]
    options = {"neighborhood_bias": False}
    reference = MultiHeadAttention(8, 8, 2, kind="dense", kernel_options=options).double()
    reference.load_state_dict(block.state_dict())
    expected = torch.cat(
        [reference(normed[b[0] == i], normed[b[0] == i]) for i in range(len(items))]
    )
    h = x[0] + expected
    ffn = layer.ffn(layer.norm_ffn.rank_forward(h, 0), *layer.ffn.per_rank()[0])
    torch.testing.assert_close(out[0], h + ffn)
    for r in (1, 2):  # no arrow into ranks 1 and 2: only their FFN
        ffn = layer.ffn(layer.norm_ffn.rank_forward(x[r], r), *layer.ffn.per_rank()[r])
        torch.testing.assert_close(out[r], x[r] + ffn)


def test_no_nan_on_empty_ranks_and_every_global_block_gets_gradients():
    readout = {"ranks": "all"}
    model = make_model("pairwise", "sparse", tensor_diagram=DIAGRAM, readout_options=readout).train()
    batch = Batch.from_data_list([to_double(c) for c in complexes()[1:]])  # a tree: no 2-cell
    out = model(batch)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    names = [n for n, _ in model.named_parameters() if "all_" in n]
    assert names
    for name in names:
        grad = model.get_parameter(name).grad
        assert grad is not None and torch.isfinite(grad).all(), name
    assert "all_0" not in model.neighborhood_keys and "adjacency_0" in model.neighborhood_keys


def test_a_linear_model_makes_its_global_arrows_linear():
    model = make_model("pairwise", "linear", tensor_diagram=DIAGRAM)
    assert model.layers[0].blocks["0->0:all_0"].kernel.kind == "linear"
    assert model.layers[0].blocks["0->0:adjacency_0"].kernel.kind == "linear"


@pytest.mark.parametrize(
    "arrow", ["0->1:all_1", "1->1:all_0", (0, 0, "all_0.T"), "2->2:all_3"]
)
def test_a_global_arrow_joins_a_rank_to_itself(arrow):
    with pytest.raises(ValueError, match=r"global arrow|outside"):
        parse_tensor_diagram([arrow], 2)


def test_general_attention_refuses_global_arrows():
    with pytest.raises(ValueError, match="global arrows"):
        CellularTransformerLayer(8, heads=2, attention="general", tensor_diagram=DIAGRAM)
    arrow = parse_tensor_diagram(["0->0:all_0"], 2)[0]
    with pytest.raises(ValueError, match="no neighbourhood matrix"):
        arrow.matrix({})
