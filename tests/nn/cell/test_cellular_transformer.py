import itertools
import math

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges, permute_complex, to_double
from topomodelx_attention.nn.cell import CellularTransformer, CellularTransformerLayer
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


def assert_equivariant_and_batched(model, atol=1e-6, make=None):
    """Per-rank permutation equivariance on complex 0, and a batch equal to each complex alone.

    ``make``: the complexes to use (default :func:`complexes`).
    """
    make = make or complexes
    data = to_double(make()[0])
    generator = torch.Generator().manual_seed(5)
    perms = [torch.randperm(data.num_cells(r), generator=generator) for r in range(3)]
    h, h_perm = model.encode(data), model.encode(permute_complex(data, perms))
    for r in range(3):
        torch.testing.assert_close(h_perm[r], h[r][perms[r]], atol=atol, rtol=atol)
    items = [to_double(c) for c in make()]
    batched = model(Batch.from_data_list(items))
    torch.testing.assert_close(batched, torch.cat([model(c) for c in items]), atol=atol, rtol=atol)


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
    model = make_model(attention, kind, readout_options={"ranks": "all"}).train()
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

    def weights(key):  # the arrow's own Q/K/V/O (slices of the layer's stacked parameters)
        w = layer.arrow_weights(key)
        return (w["query"].T, w["key"].T, w["value"].T, w["out"].T)

    # 0 -> 0: each vertex has exactly one neighbour: weight 1 on the other vertex
    _, _, v, o = weights("0->0")
    a00 = torch.stack([n0[1] @ v @ o, n0[0] @ v @ o])
    # 1 -> 0: each vertex sees only the edge
    _, _, v, o = weights("1->0")
    a10 = (n1 @ v @ o).expand(2, 2)
    # 0 -> 1: the edge attends to both vertices with a softmax of scaled dot products
    q, k, v, o = weights("0->1")
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
            [1, 1, 4], 8, 3, heads=2, categorical=[[4], [2], None], pe_options={"channels": 5, "combination": combination}
        )
        assert model(data).shape == (1, 3)
    no_pe = CellularTransformer([1, 1, 4], 8, 3, heads=2, categorical=[[4], [2], None])
    with pytest.raises(ValueError, match=r"pe_options\['channels'\]"):
        no_pe(data)
    with pytest.raises(TypeError, match="pe_channels"):  # the width is pe_options["channels"]
        CellularTransformer([1, 1, 4], 8, 3, pe_channels=5)
    with pytest.raises(TypeError, match="cardinalities"):
        CellularTransformer([1, 1, 4], 8, 3, heads=2)(data)


def test_grouped_options_are_one_mapping_each_never_keywords_of_their_own():
    """PE, readout and kernel options reach the model only through their ``*_options`` mapping."""
    import inspect

    from topomodelx_attention.nn.attention import KERNELS
    from topomodelx_attention.nn.cell.cellular_transformer import PE_OPTIONS, READOUT_OPTIONS

    options = set(inspect.signature(CellularTransformer).parameters)
    assert {"pe_options", "readout_options", "kernel_options"} <= options
    grouped = {f"pe_{key}" for key in PE_OPTIONS} | {f"readout_{key}" for key in READOUT_OPTIONS}
    grouped |= {key for kernel in KERNELS.values() for key in kernel.options}
    assert not options & grouped, options & grouped


def test_bad_configuration_and_data():
    with pytest.raises(ValueError, match="attention"):
        CellularTransformer([3, 3, 3], 8, 2, attention="global")
    with pytest.raises(ValueError, match="kind"):
        CellularTransformer([3, 3, 3], 8, 2, kind="local")
    with pytest.raises(ValueError, match="mixed"):
        CellularTransformerLayer(8, heads=2, attention="general", kind="mixed")
    model = CellularTransformer([3, 3, 3, 3], 8, 2, heads=2)
    with pytest.raises(ValueError, match="max_rank=3"):
        model(complexes()[0])
    with pytest.raises(TypeError, match="ComplexData"):
        CellularTransformer([3, 3, 3], 8, 2, heads=2)(graph_from_edges([(0, 1)]))


def test_custom_tensor_diagram():
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

    from topomodelx_attention.datasets.tu import load_tu_dataset
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
