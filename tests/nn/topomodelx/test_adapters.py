"""TopoModelX drop-ins: our attention called with TopoModelX's conventions, swapped into its models."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from topomodelx_attention.data.topomodelx import topomodelx_inputs
from topomodelx_attention.nn.attention import MultiHeadAttention
from topomodelx_attention.nn.cell import CellularTransformerLayer
from topomodelx_attention.nn.topomodelx import AttentionConv, CellAttentionLayer
from topomodelx_attention.transforms import CellCycleLifting

pytest.importorskip("topomodelx")


def _graphs(count: int, seed: int) -> list[Data]:
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(count):
        g = nx.gnm_random_graph(8, int(rng.integers(8, 17)), seed=int(rng.integers(1 << 30)))
        edges = torch.tensor(list(g.edges()), dtype=torch.long).t()
        x = torch.from_numpy(rng.standard_normal((8, 3))).float()
        y = torch.tensor([float(len(nx.cycle_basis(g)) > 4)])  # a label the cycles decide
        graphs.append(Data(x=x, edge_index=torch.cat([edges, edges.flip(0)], 1), y=y, num_nodes=8))
    return graphs


@pytest.fixture(scope="module")
def batch():
    complexes = CellCycleLifting().lift_many(_graphs(8, 0))
    return next(iter(DataLoader(complexes, batch_size=8)))


def _train(model, loss_of, steps=15, lr=1e-2):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_of()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _pool(h, index, count):
    return torch.zeros(count, h.shape[1]).index_add_(0, index, h)


# ------------------------------------------------------------------------------ CANLayer swap


def test_swapping_the_layers_of_topomodelx_can_trains(batch):
    from topomodelx.nn.cell.can import CAN
    from topomodelx.nn.cell.can_layer import CANLayer

    torch.manual_seed(0)
    can = CAN(3, 3, 16, heads=2, n_layers=2, att_lift=False, dropout=0.0)
    for i, layer in enumerate(can.layers):
        can.layers[i] = CellAttentionLayer.from_can_layer(layer)
    assert not any(isinstance(m, CANLayer) for m in can.modules())
    assert [(m.in_channels, m.out_channels, m.heads) for m in can.layers] == [(3, 16, 2), (16, 16, 2)]
    head = torch.nn.Linear(16, 1)
    model = torch.nn.ModuleList([can, head])
    args = topomodelx_inputs(batch, "can")
    can.eval()  # CAN's own forward applies dropout(0.5) after each layer in training

    def loss_of():
        x_1 = can(batch.x_0, args["x"], batch.adjacency_0, args["down_laplacian_1"], args["up_laplacian_1"])
        logits = head(_pool(x_1, batch.batch_1, batch.num_complexes)).squeeze(1)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, batch.y)

    loss_of().backward()
    for i, layer in enumerate(can.layers):  # gradients reach every block of every swapped layer
        for name, p in layer.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), (i, name)
        for key in ("0->0:coadjacency_0", "0->0:adjacency_0"):
            assert layer.layer.arrow_weights(key, grad=True)["query"].abs().sum() > 0, (i, key)
    model.zero_grad()
    losses = _train(model, loss_of)
    assert losses[-1] < 0.8 * losses[0], losses


def _can_and_its_ct_layer(batch, width, self_loops):
    """A CellAttentionLayer, the CT layer of its two arrows with the same weights, edge features."""
    torch.manual_seed(0)
    layer = CellAttentionLayer(width, width, heads=2, self_loops=self_loops)
    reference = CellularTransformerLayer(
        width, heads=2, max_rank=0, tensor_diagram=["0->0:coadjacency_0", "0->0:adjacency_0"]
    )
    reference.load_state_dict(layer.layer.state_dict())
    return layer, reference, torch.randn(batch.x_1.shape[0], width)


def test_cell_attention_layer_is_two_ct_arrows_through_the_patterns(batch):
    """Same as a CT layer on edges with CAN's neighbourhoods: values and signs of the Laplacians unused."""
    layer, reference, x = _can_and_its_ct_layer(batch, 16, self_loops=False)
    ours = layer(x, batch.down_laplacian_1, batch.up_laplacian_1)
    (expected,) = reference([x], {"coadjacency_0": batch.coadjacency_1, "adjacency_0": batch.adjacency_1})
    torch.testing.assert_close(ours, expected)
    # signs and values of the Laplacians do not matter, dense or CSR neither
    flipped = layer(x, -2.0 * batch.down_laplacian_1.to_dense(), batch.up_laplacian_1.to_sparse_csr())
    torch.testing.assert_close(flipped, ours)


def test_cell_attention_self_loops_add_the_diagonal(batch):
    layer, reference, x = _can_and_its_ct_layer(batch, 8, self_loops=True)
    eye = torch.eye(x.shape[0])
    loops = {
        "coadjacency_0": (batch.coadjacency_1.to_dense() + eye).to_sparse(),
        "adjacency_0": (batch.adjacency_1.to_dense() + eye).to_sparse(),
    }
    ours = layer(x, batch.coadjacency_1, batch.adjacency_1)
    torch.testing.assert_close(ours, reference([x], loops)[0])
    plain = {"coadjacency_0": batch.coadjacency_1, "adjacency_0": batch.adjacency_1}
    assert not torch.allclose(ours, reference([x], plain)[0])


@pytest.mark.parametrize("kind", ["sparse", "dense", "linear"])
def test_cell_attention_batched_equals_one_by_one(batch, kind):
    torch.manual_seed(0)
    layer = CellAttentionLayer(3, 8, heads=2, kind=kind).eval()
    out = layer(batch.x_1, batch.down_laplacian_1, batch.up_laplacian_1, batch.batch_1)
    rows = []
    for data in batch.to_data_list():
        rows.append(layer(data.x_1, data.down_laplacian_1, data.up_laplacian_1))
    torch.testing.assert_close(out, torch.cat(rows), atol=1e-5, rtol=1e-4)


def test_cell_attention_errors_name_the_argument(batch):
    layer = CellAttentionLayer(3, 8, heads=2)
    n = batch.x_1.shape[0]
    with pytest.raises(ValueError, match=rf"up_laplacian_1 must be an \({n}, {n}\)"):
        layer(batch.x_1, batch.down_laplacian_1, batch.adjacency_0)
    with pytest.raises(ValueError, match=r"x must have shape \(n, 3\)"):
        layer(batch.x_0[:, :2], batch.down_laplacian_1, batch.up_laplacian_1)
    with pytest.raises(TypeError, match="tensor_diagram"):  # fixed: CANLayer's two blocks
        CellAttentionLayer(3, 8, tensor_diagram=["0->0:adjacency_0"])
    with pytest.raises(ValueError, match="mixed"):
        CellAttentionLayer(3, 8, kind="mixed")
    with pytest.raises(TypeError, match="CANLayer"):
        CellAttentionLayer.from_can_layer(torch.nn.Linear(3, 3))


def test_from_can_layer_reads_widths_of_concat_false():
    from topomodelx.nn.cell.can_layer import CANLayer

    layer = CellAttentionLayer.from_can_layer(CANLayer(5, 8, heads=2, concat=False, dropout=0.1))
    assert (layer.in_channels, layer.out_channels, layer.heads) == (5, 4, 2)
    assert layer.layer.attention_dropout == pytest.approx(0.1)
    assert CellAttentionLayer.from_can_layer(CANLayer(5, 8, heads=2), kind="dense").kind == "dense"
    odd = CANLayer(5, 6, heads=2, concat=False)  # output width 3: two heads cannot split it
    with pytest.raises(ValueError, match="heads=2 do not divide its output width 3"):
        CellAttentionLayer.from_can_layer(odd)
    assert CellAttentionLayer.from_can_layer(odd, heads=1).heads == 1


# ------------------------------------------------------------------------------ Conv swap


def test_the_package_order_is_not_topomodelx_order(batch):
    """TopoModelX's call order ``(x_1, adjacency_1)`` fails on MultiHeadAttention; AttentionConv takes it."""
    mha = MultiHeadAttention(3, 8, 2)
    with pytest.raises(TypeError, match=r"x_source.*sparse"):
        mha(batch.x_1, batch.adjacency_1)
    conv = AttentionConv(3, 8, heads=2)
    conv.attention.load_state_dict(mha.state_dict())
    torch.testing.assert_close(
        conv(batch.x_1, batch.adjacency_1), mha(batch.x_1, batch.x_1, batch.adjacency_1)
    )
    target = torch.randn(batch.x_0.shape[0], 3)
    torch.testing.assert_close(  # cross-rank: edges -> vertices through B_1
        conv(batch.x_1, batch.incidence_1, target), mha(target, batch.x_1, batch.incidence_1)
    )


def test_attention_conv_without_targets_queries_the_mean_of_the_sources(batch):
    torch.manual_seed(0)
    conv = AttentionConv(3, 8, heads=2, update_func="relu")
    incidence_t = batch.incidence_1.t()  # (n_edges, n_vertices), a transposed view as HSN passes
    mean = (batch.incidence_1.to_dense().t() @ batch.x_0) / 2.0  # every edge has 2 vertices
    torch.testing.assert_close(conv(batch.x_0, incidence_t), conv(batch.x_0, incidence_t, mean))
    assert (conv(batch.x_0, incidence_t) >= 0).all()


def test_swapping_every_conv_of_topomodelx_hsn_trains(batch):
    from topomodelx.base.conv import Conv
    from topomodelx.nn.simplicial.hsn import HSN

    torch.manual_seed(0)
    hsn = HSN(channels=16, n_layers=2)
    for layer in hsn.layers:
        for name, module in list(layer.named_children()):
            if isinstance(module, Conv):
                setattr(layer, name, AttentionConv(
                    module.in_channels, module.out_channels, heads=1, update_func=module.update_func
                ))
        layer.reset_parameters()  # HSN's own reset calls reset_parameters of its convolutions
    assert not any(isinstance(m, Conv) for m in hsn.modules())
    assert sum(isinstance(m, AttentionConv) for m in hsn.modules()) == 8
    encoder, head = torch.nn.Linear(3, 16), torch.nn.Linear(16, 1)
    model = torch.nn.ModuleList([encoder, hsn, head])

    def loss_of():
        x_0 = hsn(encoder(batch.x_0), batch.incidence_1, batch.adjacency_0)
        logits = head(_pool(x_0, batch.batch_0, batch.num_complexes)).squeeze(1)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, batch.y)

    loss_of().backward()
    for name, p in hsn.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    model.zero_grad()
    losses = _train(model, loss_of, steps=20, lr=2e-2)
    assert losses[-1] < 0.8 * losses[0], losses


def test_attention_conv_dense_kind_on_a_batch(batch):
    torch.manual_seed(0)
    conv = AttentionConv(3, 4, kind="dense").eval()
    out = conv(batch.x_1, batch.adjacency_1, batch_source=batch.batch_1)
    rows = [conv(d.x_1, d.adjacency_1) for d in batch.to_data_list()]
    torch.testing.assert_close(out, torch.cat(rows), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="batch_target"):
        conv(batch.x_1, batch.incidence_1, torch.randn(batch.x_0.shape[0], 3), batch_source=batch.batch_1)


def test_attention_conv_errors_are_clear(batch):
    conv = AttentionConv(3, 8, heads=2)
    with pytest.raises(ValueError, match=r"neighborhood must be an \("):
        conv(batch.x_1, batch.adjacency_0)
    with pytest.raises(ValueError, match="linear"):
        AttentionConv(3, 8, kind="linear")
    with pytest.raises(ValueError, match="update_func"):
        AttentionConv(3, 8, update_func="gelu")
    with pytest.raises(ValueError, match="x_target is required"):
        AttentionConv(3, 8, target_channels=5)(batch.x_0, batch.incidence_1.t())
    with pytest.raises(TypeError, match="x_source must be a dense"):
        conv(batch.adjacency_1, batch.adjacency_1)
