"""TokenGT on graphs: invariance, batching, Performer, regularisers, gradients, edge cases."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch import nn
from torch_geometric.data import Batch, Data

from tests.helpers import graph_from_edges, small_token_model
from topomodelx_attention.nn.attention import padded_layout
from topomodelx_attention.nn.graph import (
    TokenGT,
    TokenGTEncoder,
    TokenGTLayer,
    drop_path,
)
from topomodelx_attention.transforms import LaplacianNodeId, OrthogonalRandomNodeId

NODE_ID_DIM = 8
COMBOS = [
    ("dense", "directed"),
    ("dense", "undirected"),
    ("linear", "directed"),
    ("linear", "undirected"),
]


def with_edge_attr(graph: Data, seed: int) -> Data:
    """Symmetric random edge features (same vector for both directions)."""
    generator = torch.Generator().manual_seed(seed)
    ei = graph.edge_index
    n = max(int(graph.num_nodes), 1)
    key = torch.minimum(ei[0], ei[1]) * n + torch.maximum(ei[0], ei[1])
    table = torch.randn(n * n, 2, generator=generator)
    graph.edge_attr = table[key]
    return graph


def graphs(transform=None) -> list[Data]:
    """Graphs of different sizes: rings, a tree, isolated nodes, no edge, an empty graph."""
    items = [
        graph_from_edges([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4)], feature_dim=3, seed=1),
        graph_from_edges([(0, 1), (1, 2), (1, 3)], feature_dim=3, seed=2),
        graph_from_edges([(0, 1), (1, 2), (2, 0)], num_nodes=5, feature_dim=3, seed=3),
        graph_from_edges([], num_nodes=2, feature_dim=3, seed=4),
        graph_from_edges([], num_nodes=0, feature_dim=3, seed=5),
    ]
    transform = transform or LaplacianNodeId(NODE_ID_DIM)
    out = []
    for i, graph in enumerate(items):
        graph = with_edge_attr(transform(graph), seed=10 + i)
        graph.x = graph.x.double()
        graph.edge_attr = graph.edge_attr.double()
        graph.node_id = graph.node_id.double()
        out.append(graph)
    return out


def make_model(kind="dense", edge_tokens="directed", **kwargs) -> TokenGT:
    own = {"in_channels": 3, "edge_channels": 2, "node_id_dim": NODE_ID_DIM, "outputs": ("complex", 0, 1)}
    return small_token_model(TokenGT, kind, **{**own, "edge_tokens": edge_tokens, **kwargs})


def relabel(graph: Data, generator: torch.Generator) -> tuple[Data, torch.Tensor]:
    """New node i = old node perm[i]; the edges are shuffled too."""
    n = int(graph.num_nodes)
    perm = torch.randperm(n, generator=generator)
    inverse = torch.argsort(perm)
    edge_perm = torch.randperm(graph.edge_index.shape[1], generator=generator)
    out = Data(
        x=graph.x[perm],
        node_id=graph.node_id[perm],
        edge_index=inverse[graph.edge_index[:, edge_perm]],
        edge_attr=graph.edge_attr[edge_perm],
        num_nodes=n,
    )
    return out, perm


@pytest.mark.parametrize(("kind", "edge_tokens"), COMBOS)
def test_graph_output_invariant_to_node_relabelling(kind, edge_tokens):
    model = make_model(kind, edge_tokens)
    graph = graphs()[0]
    permuted, perm = relabel(graph, torch.Generator().manual_seed(3))
    torch.testing.assert_close(model(permuted), model(graph), atol=1e-10, rtol=1e-8)
    # node-level outputs are equivariant
    torch.testing.assert_close(
        model.cell_outputs(permuted)[0], model.cell_outputs(graph)[0][perm], atol=1e-10, rtol=1e-8
    )


@pytest.mark.parametrize(("kind", "edge_tokens"), COMBOS)
@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_batch_of_different_sizes_equals_each_graph_alone(kind, edge_tokens, layout):
    model = make_model(kind, edge_tokens, token_layout=layout)
    items = graphs()
    batch = Batch.from_data_list(items)
    out = model(batch)
    assert out.shape == (len(items), 2)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(g) for g in items]), atol=1e-10, rtol=1e-8)
    cells, alone = model.cell_outputs(batch), [model.cell_outputs(g) for g in items]
    torch.testing.assert_close(cells[0], torch.cat([c[0] for c in alone]))
    assert cells[1].shape == (batch.edge_index.shape[1], 2)
    torch.testing.assert_close(cells[1], torch.cat([c[1] for c in alone]))


def test_layouts_agree():
    batch = Batch.from_data_list(graphs())
    outs = [make_model(token_layout=layout)(batch) for layout in ("auto", "packed", "padded")]
    torch.testing.assert_close(outs[0], outs[1], atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(outs[0], outs[2], atol=1e-12, rtol=1e-10)


def test_undirected_edge_tokens_halve_the_edge_tokens():
    graph = graphs()[0]
    directed = make_model(edge_tokens="directed").tokenize(graph)
    undirected = make_model(edge_tokens="undirected").tokenize(graph)
    assert directed.sizes == (5, 12)
    assert undirected.sizes == (5, 6)
    assert undirected.edge_inverse.shape == (12,)
    # both directions of an edge share a token and hence an output
    out = make_model(edge_tokens="undirected").cell_outputs(graph)[1]
    ei = graph.edge_index
    for j in range(ei.shape[1]):
        back = ((ei[0] == ei[1, j]) & (ei[1] == ei[0, j])).nonzero().item()
        torch.testing.assert_close(out[j], out[back])


def test_performer_approximates_softmax_on_small_inputs():
    """Tolerance: relative error < 8 % with 4096 features and logits scaled down 4x."""
    batch = Batch.from_data_list(graphs()[:3])
    errors = []
    for features in (64, 4096):
        exact = make_model("dense", outputs=("complex",))
        with torch.no_grad():  # small inputs: query/key weights halved (logits / 4)
            for layer in exact.encoder.layers:
                layer.attention.lin_query.weight.mul_(0.5)
                layer.attention.lin_key.weight.mul_(0.5)
        torch.manual_seed(1)
        performer = make_model(
            "linear", outputs=("complex",), kernel_options={"num_random_features": features}
        )
        missing = performer.load_state_dict(exact.state_dict(), strict=False)
        assert all(key.endswith("projection") for key in missing.missing_keys)
        with torch.no_grad():
            reference = exact.encode(batch).x
            approx = performer.encode(batch).x
            errors.append(float((approx - reference).norm() / reference.norm()))
            out, out_ref = performer(batch), exact(batch)
        if features == 4096:
            assert float((out - out_ref).norm() / out_ref.norm()) < 0.08
    assert errors[1] < 0.08
    assert errors[1] < errors[0]


def test_matches_torch_transformer_encoder():
    torch.manual_seed(0)
    d, heads, ffn, layers = 16, 4, 24, 3
    base_layer = nn.TransformerEncoderLayer(
        d, heads, ffn, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    base = nn.TransformerEncoder(
        base_layer, layers, norm=nn.LayerNorm(d), enable_nested_tensor=False
    ).double()
    ours = TokenGTEncoder(d, layer=partial(TokenGTLayer, d, heads=heads, ffn_channels=ffn), n_layers=layers).double()
    for mine, theirs in zip(ours.layers, base.layers):
        mine.load_from_torch(theirs)
    ours.norm.load_state_dict(base.norm.state_dict())
    batch = torch.tensor([0, 0, 0, 1, 2, 2, 2, 2, 2])
    x = torch.randn(9, d, dtype=torch.float64)
    layout = padded_layout(batch, 3)
    reference = base(layout.pad(x), src_key_padding_mask=~layout.key_valid)[layout.key_valid]
    for mode in ("packed", "padded"):
        ours.token_layout = mode
        torch.testing.assert_close(ours(x, batch), reference, atol=1e-12, rtol=1e-10)


def test_regularisers_off_in_eval_and_active_in_training():
    model = make_model(
        sign_flip=True, eigenvector_dropout=0.5, drop_path=0.5, dropout=0.2, outputs=("complex",)
    )
    batch = Batch.from_data_list(graphs())
    first = model(batch)
    torch.manual_seed(123)
    torch.testing.assert_close(model(batch), first, atol=0, rtol=0)
    model.train()
    torch.manual_seed(0)
    a = model(batch)
    torch.manual_seed(1)
    b = model(batch)
    assert not torch.allclose(a, b)
    # only the identifier regularisers: sign flip changes the training output, eval does not
    flip_only = make_model(sign_flip=True, outputs=("complex",))
    evaluated = flip_only(batch)
    flip_only.train()
    outputs = [flip_only(batch) for _ in range(3)]
    assert any(not torch.allclose(o, evaluated) for o in outputs)


def test_drop_path_drops_whole_graphs_in_training_only():
    torch.manual_seed(0)
    batch = torch.tensor([0, 0, 1, 1, 1, 2, 3, 3] * 8).sort().values
    x = torch.ones(batch.numel(), 3)
    out = drop_path(x, batch, 4, 0.5, training=True)
    assert set(out.unique().tolist()) <= {0.0, 2.0}
    for g in range(4):
        assert out[batch == g].unique().numel() == 1
    assert drop_path(x, batch, 4, 0.5, training=False) is x
    encoder = TokenGTEncoder(8, layer=partial(TokenGTLayer, 8, heads=2), n_layers=5, drop_path=0.2)
    rates = [layer.drop_path for layer in encoder.layers]
    assert rates == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])


@pytest.mark.parametrize(("kind", "edge_tokens"), COMBOS)
def test_gradients_reach_every_parameter(kind, edge_tokens):
    model = make_model(
        kind, edge_tokens, dropout=0.1, drop_path=0.1, eigenvector_dropout=0.1
    ).train()
    batch = Batch.from_data_list(graphs()[:3])
    loss = (
        model(batch).square().sum()
        + sum(o.square().sum() for o in model.cell_outputs(batch).values())
    )
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


def test_missing_node_ids_raise_a_clear_error():
    model = make_model()
    graph = graphs()[0]
    del graph.node_id
    with pytest.raises(ValueError, match="LaplacianNodeId"):
        model(graph)
    graph.node_id = torch.zeros(graph.num_nodes, NODE_ID_DIM + 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="node_id must have shape"):
        model(graph)
    no_ids = make_model(node_id_dim=0)  # plain-Transformer ablation: node_id not needed
    assert torch.isfinite(no_ids(graph)).all()


def test_more_nodes_than_id_dim_with_near_orthogonal_orf():
    torch.manual_seed(0)
    edges = [(i, (i + 1) % 30) for i in range(30)] + [(0, 15), (5, 20)]
    graph = OrthogonalRandomNodeId(NODE_ID_DIM, seed=1)(graph_from_edges(edges, feature_dim=3))
    graph.edge_attr = torch.randn(graph.edge_index.shape[1], 2)
    model = TokenGT(3, 2, 16, 2, n_layers=2, heads=4, node_id_dim=NODE_ID_DIM).train()
    out = model(graph)
    assert out.shape == (1, 2) and torch.isfinite(out).all()
    out.sum().backward()


def test_feature_less_graphs_and_categorical_features():
    graph = graphs()[1]
    model = TokenGT(0, 0, 16, 3, n_layers=1, heads=2, node_id_dim=NODE_ID_DIM).double()
    assert model(graph).shape == (1, 3)
    coded = Data(
        x=torch.tensor([[0, 2], [1, 0], [2, 1], [0, 0]]),
        edge_index=graph.edge_index,
        edge_attr=torch.arange(graph.edge_index.shape[1]) % 3,
        node_id=graph.node_id.float(),
        num_nodes=4,
    )
    categorical = TokenGT(
        2,
        1,
        16,
        1,
        n_layers=1,
        heads=2,
        node_id_dim=NODE_ID_DIM,
        categorical=[3, 3],
        edge_categorical=[3],
    )
    assert torch.isfinite(categorical(coded)).all()
    with pytest.raises(TypeError, match="cardinalities"):
        TokenGT(2, 0, 16, 1, n_layers=1, heads=2, node_id_dim=NODE_ID_DIM)(coded)


def test_constructor_validation():
    with pytest.raises(ValueError, match="kind"):
        TokenGT(3, 0, 16, 1, kind="softmax")
    with pytest.raises(ValueError, match="attention_dropout"):
        TokenGT(3, 0, 16, 1, kind="linear", attention_dropout=0.1)
    with pytest.raises(TypeError):
        TokenGT(3, 0, 16, 1, 2)  # every option after the widths is keyword-only
    with pytest.raises(ValueError, match="edge_tokens"):
        TokenGT(3, 0, 16, 1, edge_tokens="both")
    with pytest.raises(ValueError, match="outputs"):
        TokenGT(3, 0, 16, 1, outputs=("nodes",))
    with pytest.raises(ValueError, match="eigenvector_dropout"):
        TokenGT(3, 0, 16, 1, eigenvector_dropout=1.0)
    with pytest.raises(ValueError, match="token_layout"):
        TokenGT(3, 0, 16, 1, token_layout="dense")
    model = TokenGT(3, 0, 16, 1, heads=4, node_id_dim=NODE_ID_DIM, outputs=("complex",)).double()
    with pytest.raises(ValueError, match="no cell-level output"):
        model.cell_outputs(graphs()[0])
    assert isinstance(model.encoder.layers[0], TokenGTLayer)


@pytest.mark.parametrize("edge_tokens", ["directed", "undirected"])
@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_sparse_equivariant_basis(edge_tokens, layout):
    model = make_model("linear", edge_tokens, sparse_equivariant_basis=True, token_layout=layout)
    items = graphs()
    batch = Batch.from_data_list(items)
    out = model(batch)
    torch.testing.assert_close(out, torch.cat([model(g) for g in items]), atol=1e-10, rtol=1e-8)
    permuted, _ = relabel(items[0], torch.Generator().manual_seed(3))
    torch.testing.assert_close(model(permuted), model(items[0]), atol=1e-10, rtol=1e-8)
    plain = make_model("linear", edge_tokens, token_layout=layout)
    assert not torch.allclose(plain(batch), out)
    # the operator: node i receives its edges (i, j), j != i (both endpoints if undirected)
    edge_index = torch.tensor([[0, 1, 1, 2, 2], [1, 0, 2, 1, 2]])  # with a self-loop at 2
    if edge_tokens == "undirected":
        edge_index = model.tokenizer.undirected_edges(edge_index, None, 3)[0]  # 01, 12, 22
    target, source = model._seb_index(edge_index, 1, 3)
    pairs = sorted(zip((target - 1).tolist(), (source - 4).tolist()))
    if edge_tokens == "directed":
        assert pairs == [(0, 0), (1, 1), (1, 2), (2, 3)]
    else:
        assert pairs == [(0, 0), (1, 0), (1, 1), (2, 1)]


@pytest.mark.parametrize("key", ["x", "edge_attr", "node_id"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e30])
def test_non_finite_or_huge_inputs_raise_naming_key_and_row(key, bad):
    kind = "dense"
    model = make_model(kind)
    graph = graphs()[0]
    value = getattr(graph, key).clone()
    value[2, 1] = bad
    setattr(graph, key, value)
    with pytest.raises(ValueError, match=rf"^{key}: row 2 "):
        model(graph)
    unchecked = make_model(kind, check_inputs=False)
    unchecked(graph)  # the check can be switched off


def test_performer_with_nan_input_raises_instead_of_nan_gradients():
    """Without the check a NaN feature gives finite Performer outputs but NaN gradients."""
    graph = graphs()[0]
    graph.x = graph.x.clone()
    graph.x[0, 0] = float("nan")
    unchecked = make_model("linear", check_inputs=False).train()
    out = unchecked(graph)
    out.sum().backward()
    grads = [p.grad for p in unchecked.parameters() if p.grad is not None]
    assert any(not torch.isfinite(g).all() for g in grads)  # the silent failure mode
    with pytest.raises(ValueError, match="x: row 0"):
        make_model("linear").train()(graph)


def test_feature_rows_must_match_the_graph():
    model = make_model()
    graph = graphs()[0]
    graph.num_nodes = 5
    graph.x = graph.x[:-1]
    with pytest.raises(ValueError, match="x has 4 rows but the graph"):
        model(graph)
    graph = graphs()[0]
    graph.edge_attr = graph.edge_attr[:-1]
    with pytest.raises(ValueError, match="edge_attr has 11 rows"):
        model(graph)


def test_directed_edge_tokens_reject_a_one_direction_edge_index():
    graph = graphs()[0]
    one_way = graph.edge_index[:, graph.edge_index[0] < graph.edge_index[1]]
    graph.edge_index, graph.edge_attr = one_way, graph.edge_attr[: one_way.shape[1]]
    with pytest.raises(ValueError, match=r"has no reverse.*to_undirected"):
        make_model(edge_tokens="directed")(graph)
    # one token per undirected edge merges any mix of directions: same result as symmetric
    undirected = make_model(edge_tokens="undirected", edge_channels=0)
    torch.testing.assert_close(undirected(graph), undirected(graphs()[0]))


def test_one_row_per_graph_with_empty_graphs_anywhere_in_the_batch():
    items = graphs()
    empty = items[-1]
    assert empty.num_nodes == 0
    order = [empty, items[0], empty, items[3], empty]
    for kind in ("dense", "linear"):
        model = make_model(kind)
        out = model(Batch.from_data_list(order))
        assert out.shape == (5, 2) and torch.isfinite(out).all()
        torch.testing.assert_close(out, torch.cat([model(g) for g in order]))
        torch.testing.assert_close(out[0], out[2])


@pytest.mark.parametrize("pooling", ["sum", "mean"])
@pytest.mark.parametrize("edge_tokens", ["directed", "undirected"])
def test_pooled_readout_invariant_batched_equals_single_with_empty_graphs(pooling, edge_tokens):
    model = make_model("dense", edge_tokens, pooling=pooling)
    items = graphs()
    empty = items[-1]
    assert empty.num_nodes == 0
    permuted, _ = relabel(items[0], torch.Generator().manual_seed(4))
    torch.testing.assert_close(model(permuted), model(items[0]), atol=1e-10, rtol=1e-8)
    order = [empty, *items[:-1], empty]
    out = model(Batch.from_data_list(order))
    assert out.shape == (len(order), 2) and torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(g) for g in order]), atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(out[0], model.readouts["complex"].bias)
    # the prediction reads the node and edge tokens, not the [graph] token
    tokens = model.encode(items[0])
    rest = tokens.x[tokens.num_complexes :]
    pooled = rest.sum(0) if pooling == "sum" else rest.mean(0)
    torch.testing.assert_close(model(items[0])[0], model.readouts["complex"](pooled))
