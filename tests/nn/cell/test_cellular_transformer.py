import itertools
import math
from dataclasses import replace

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges, permute_complex, to_double
from topomodelx_attention.nn.cell import (
    Arrow,
    CellularTransformer,
    CellularTransformerLayer,
    default_tensor_diagram,
    parse_tensor_diagram,
)
from topomodelx_attention.transforms import CellCycleLifting

COMBOS = [
    ("pairwise", "sparse"),
    ("pairwise", "dense"),
    ("pairwise", "mixed"),
    ("pairwise", "linear"),
    ("general", "sparse"),
    ("general", "dense"),
    ("general", "linear"),
]


def complexes():
    """Three small complexes: two rings sharing an edge, a tree (no 2-cell), a triangle + isolated vertices."""
    graphs = [
        graph_from_edges([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4)], feature_dim=3, seed=1),
        graph_from_edges([(0, 1), (1, 2), (1, 3)], feature_dim=3, seed=2),
        graph_from_edges([(0, 1), (1, 2), (2, 0)], num_nodes=5, feature_dim=3, seed=3),
    ]
    lifting = CellCycleLifting()
    out = []
    for i, g in enumerate(graphs):
        g.y = torch.tensor([i])
        out.append(lifting(g))
    return out


def make_model(attention, kind, **kwargs):
    torch.manual_seed(0)
    defaults = dict(
        in_channels=[3, 3, 3], hidden_channels=16, out_channels=2, n_layers=2, heads=4,
        attention=attention, kind=kind, attention_dropout=0.0,
        kernel_options={"num_random_features": 64} if kind == "linear" else None,
    )
    defaults.update(kwargs)
    return CellularTransformer(**defaults).double().eval()






@pytest.mark.parametrize(("attention", "kind"), COMBOS)
def test_permutation_equivariance_per_rank(attention, kind):
    model = make_model(attention, kind)
    data = to_double(complexes()[0])
    generator = torch.Generator().manual_seed(5)
    perms = [torch.randperm(data.num_cells(r), generator=generator) for r in range(3)]
    h = model.encode(data)
    h_perm = model.encode(permute_complex(data, perms))
    for r in range(3):
        torch.testing.assert_close(h_perm[r], h[r][perms[r]], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(data), model(permute_complex(data, perms)), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("attention", "kind"), COMBOS)
def test_batched_equals_each_complex(attention, kind):
    model = make_model(attention, kind)
    items = [to_double(c) for c in complexes()]
    batched = model(Batch.from_data_list(items))
    single = torch.cat([model(c) for c in items])
    torch.testing.assert_close(batched, single, atol=1e-6, rtol=1e-6)
    cells = model.cell_outputs(Batch.from_data_list(items))[0]
    torch.testing.assert_close(cells, torch.cat([model.cell_outputs(c)[0] for c in items]), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(("attention", "kind"), COMBOS)
def test_no_nan_on_tree_and_isolated_vertices_and_all_parameters_get_gradients(attention, kind):
    model = make_model(attention, kind, readout_ranks="all").train()
    batch = Batch.from_data_list([to_double(c) for c in complexes()[1:]])
    out = model(batch)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
    # on a complex where every arrow has neighbours, every parameter gets a nonzero gradient
    model.zero_grad()
    rich = graph_from_edges([(0, 1), (1, 2), (2, 0), (1, 3), (3, 2), (3, 4), (4, 2)], feature_dim=3, seed=7)
    model(to_double(CellCycleLifting(cycles="chordless")(rich))).square().sum().backward()
    unused = [n for n, p in model.named_parameters() if p.grad.abs().sum() == 0]
    assert unused == [], unused


def test_sparse_with_all_ones_equals_dense_without_bias():
    torch.manual_seed(0)
    dense = CellularTransformerLayer(8, heads=2, max_rank=1, kind="dense").double()
    sparse = CellularTransformerLayer(8, heads=2, max_rank=1, kind="sparse").double()
    state = {k: v for k, v in dense.state_dict().items() if "bias_scale" not in k}
    sparse.load_state_dict(state)
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


def test_hand_computed_one_head_example_on_three_cells():
    """Two vertices and the edge joining them; one head, sparse pairwise attention."""
    torch.manual_seed(0)
    layer = CellularTransformerLayer(2, heads=1, max_rank=1, kind="sparse").double()
    x0 = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    x1 = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    neighborhoods = {
        "adjacency_0": torch.tensor([[0.0, 1.0], [1.0, 0.0]]).to_sparse().coalesce(),
        "coadjacency_1": torch.zeros(1, 1).to_sparse().coalesce(),
        "incidence_1": torch.tensor([[1.0], [1.0]]).to_sparse().coalesce(),
    }
    out0, out1 = layer([x0, x1], neighborhoods)

    def ln(x, norm):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias

    n0, n1 = ln(x0, layer.norm_attention[0]), ln(x1, layer.norm_attention[1])

    def weights(block):
        return (block.lin_query.weight.T, block.lin_key.weight.T, block.lin_value.weight.T, block.lin_out.weight.T)

    # 0 -> 0: each vertex has exactly one neighbour: weight 1 on the other vertex
    _, _, v, o = weights(layer.blocks["0->0"])
    a00 = torch.stack([n0[1] @ v @ o, n0[0] @ v @ o])
    # 1 -> 0: each vertex sees only the edge
    _, _, v, o = weights(layer.blocks["1->0"])
    a10 = (n1 @ v @ o).expand(2, 2)
    # 0 -> 1: the edge attends to both vertices with a softmax of scaled dot products
    q, k, v, o = weights(layer.blocks["0->1"])
    scores = (n1 @ q) @ (n0 @ k).T / math.sqrt(2)
    alpha = torch.exp(scores) / torch.exp(scores).sum()
    a01 = alpha @ (n0 @ v) @ o
    # 1 -> 1: the edge has no lower neighbour: no update
    h0 = x0 + a00 + a10
    h1 = x1 + a01

    def ffn(h, r):
        f = layer.ffn[r]
        hidden = torch.relu(ln(h, layer.norm_ffn[r]) @ f.lin1.weight.T + f.lin1.bias)
        return h + hidden @ f.lin2.weight.T + f.lin2.bias

    torch.testing.assert_close(out0, ffn(h0, 0))
    torch.testing.assert_close(out1, ffn(h1, 1))


def test_categorical_features_and_positional_encodings():
    graph = graph_from_edges([(0, 1), (1, 2), (2, 0), (2, 3)])
    graph.x = torch.tensor([[0], [3], [1], [2]])
    graph.edge_attr = torch.tensor([[1]] * graph.edge_index.size(1))
    data = CellCycleLifting(categorical_cardinalities=[4])(graph)
    for r in range(3):
        data[f"pe_{r}"] = torch.randn(data.num_cells(r), 5)
    for combination in ("concat", "sum"):
        model = CellularTransformer(
            [1, 1, 4], 8, 3, heads=2, categorical=[[4], [2], None], pe_channels=5, pe_combination=combination
        )
        assert model(data).shape == (1, 3)
    no_pe = CellularTransformer([1, 1, 4], 8, 3, heads=2, categorical=[[4], [2], None])
    with pytest.raises(ValueError, match="pe_channels=None"):
        no_pe(data)
    with pytest.raises(TypeError, match="cardinalities"):
        CellularTransformer([1, 1, 4], 8, 3, heads=2)(data)


def test_bad_configuration_and_data():
    with pytest.raises(ValueError, match="attention"):
        CellularTransformer([3, 3, 3], 8, 2, attention="global")
    with pytest.raises(ValueError, match="kind"):
        CellularTransformer([3, 3, 3], 8, 2, kind="local")
    with pytest.raises(ValueError, match="mixed"):
        CellularTransformerLayer(8, heads=2, attention="general", kind="mixed")
    with pytest.raises(ValueError, match="appears twice"):
        parse_tensor_diagram(["0->0:adjacency_0", (0, 0, "adjacency_0")], 2)
    with pytest.raises(ValueError, match=r"\(n_1, n_0\)"):
        parse_tensor_diagram([(0, 1, "incidence_1")], 2)
    model = CellularTransformer([3, 3, 3, 3], 8, 2, heads=2)
    with pytest.raises(ValueError, match="max_rank=3"):
        model(complexes()[0])
    with pytest.raises(TypeError, match="ComplexData"):
        CellularTransformer([3, 3, 3], 8, 2, heads=2)(graph_from_edges([(0, 1)]))


def test_custom_tensor_diagram_and_default():
    arrows = default_tensor_diagram(2)
    assert [a.name for a in arrows] == ["0->0", "1->1", "2->2", "1->0", "0->1", "2->1", "1->2"]
    assert Arrow(0, 1, "incidence_1", True) in arrows
    model = CellularTransformer([3, 3, 3], 8, 2, heads=2, tensor_diagram=["0->0:adjacency_0", "1->0:incidence_1"])
    data = complexes()[0]
    assert torch.isfinite(model(data)).all()
    # ranks without an arrow into them still get the FFN update and keep their shape
    assert [h.shape[0] for h in model.encode(data)] == [data.num_cells(r) for r in range(3)]


@pytest.mark.parametrize(("attention", "kind"), list(itertools.islice(COMBOS, 0, None, 3)))
def test_higher_dimensional_complex(attention, kind):
    from topomodelx_attention.transforms import SimplicialCliqueLifting

    k4 = graph_from_edges([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (3, 4)], feature_dim=2)
    data = to_double(SimplicialCliqueLifting(complex_dim=3)(k4))
    model = make_model(attention, kind, in_channels=[2, 2, 2, 2])
    assert model(data).shape == (1, 2)


def test_composes_with_a_topomodelx_layer_and_trains_on_mutag(tmp_path):
    from topomodelx.nn.cell.cwn_layer import CWNLayer
    from torch_geometric.loader import DataLoader

    from topomodelx_attention.data.datasets import load_tu_dataset
    from topomodelx_attention.nn.attention import scatter_sum

    dataset = load_tu_dataset("MUTAG", root=tmp_path)
    complexes = CellCycleLifting().lift_many([dataset[i] for i in range(48)])

    class Hybrid(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoders = torch.nn.ModuleList(torch.nn.Linear(d, 16) for d in (7, 4, 7))
            self.ct = CellularTransformerLayer(16, heads=2, max_rank=2)
            self.cwn = CWNLayer(16, 16, 16, 16)
            self.head = torch.nn.Linear(16, 2)

        def forward(self, batch):
            h = [enc(batch[f"x_{r}"]) for r, enc in enumerate(self.encoders)]
            needed = {a.neighborhood: batch[a.neighborhood] for a in self.ct.arrows}
            h = self.ct(h, needed, [batch[f"batch_{r}"] for r in range(3)], batch.num_graphs)
            x_1 = self.cwn(h[0], h[1], h[2], batch.adjacency_1, batch.incidence_2, batch.incidence_1.t().coalesce())
            return self.head(scatter_sum(x_1, batch.batch_1, batch.num_graphs))

    torch.manual_seed(0)
    model = Hybrid()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loader = DataLoader(complexes, batch_size=48)
    batch = next(iter(loader))
    losses = []
    for _ in range(15):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch), batch.y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def _per_arrow_reference(layer, x, neighborhoods):
    """Pairwise layer with one MultiHeadAttention call per arrow (the definition of Eq. 2)."""
    normed = [norm(xr) for norm, xr in zip(layer.norm_attention, x)]
    update = [torch.zeros_like(xr) for xr in x]
    for arrow, key in zip(layer.arrows, layer.block_keys):
        if normed[arrow.source].shape[0] == 0 or normed[arrow.target].shape[0] == 0:
            continue
        matrix = neighborhoods[arrow.neighborhood].coalesce()
        matrix = matrix.t().coalesce() if arrow.transpose else matrix
        update[arrow.target] = update[arrow.target] + layer.blocks[key](normed[arrow.target], normed[arrow.source], matrix)
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
    for arrow, key in zip(layer.arrows, layer.block_keys):
        used = x[arrow.source].shape[0] > 0 and x[arrow.target].shape[0] > 0
        for name, param in layer.blocks[key].named_parameters():
            assert (param.grad is not None) == used, (arrow.label, name)


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


def test_encoder_only_model_has_no_readout_and_refuses_forward():
    data = Batch.from_data_list(complexes())
    torch.manual_seed(0)
    encoder = CellularTransformer([3, 3, 3], 16, None, n_layers=1, heads=4).double()
    assert encoder.readouts is None
    assert not any("readout" in name for name, _ in encoder.named_parameters())
    h = encoder.encode(to_double(data))
    assert [t.shape for t in h] == [(data.num_cells(r), 16) for r in range(3)]
    sum(t.square().sum() for t in h).backward()
    assert all(p.grad is not None for p in encoder.parameters())
    for call in (encoder, encoder.cell_outputs):
        with pytest.raises(ValueError, match="out_channels=None"):
            call(to_double(data))
    # the same parameters as a full model's encoder part: a full model loads them (strict=False)
    full = CellularTransformer([3, 3, 3], 16, 2, n_layers=1, heads=4).double()
    missing, unexpected = full.load_state_dict(encoder.state_dict(), strict=False)
    assert not unexpected and missing and all(k.startswith("readouts.") for k in missing)
