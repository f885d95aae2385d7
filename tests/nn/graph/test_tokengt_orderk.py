"""Order-k TokenGT on complexes: cell / clique complexes, hypergraphs, invariance, consistency."""

from __future__ import annotations

import inspect

import pytest
import toponetx as tnx
import torch
from torch_geometric.data import Batch

from tests.helpers import (
    graph_from_edges,
    permute_complex,
    random_cell_complex,
    small_token_model,
    to_double,
)
from topomodelx_attention.data import ComplexData, from_toponetx
from topomodelx_attention.nn.graph import OrderKTokenGT, TokenGT, boundary_cycles, cell_orderings
from topomodelx_attention.nn.graph.token_model import TOKEN_MODEL_OPTIONS, TokenModelOptions
from topomodelx_attention.transforms import (
    CellCycleLifting,
    LaplacianNodeId,
    OrthogonalRandomNodeId,
    SimplicialCliqueLifting,
)

DIM = 8
EDGES = [
    [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4)],  # two rings sharing an edge + a pendant
    [(0, 1), (1, 2), (1, 3)],  # a tree: no 2-cell
    [(0, 1), (1, 2), (2, 0), (1, 3), (3, 2), (2, 4)],  # triangles
]


def lifted(lifting, num_nodes_extra: int = 0) -> list[ComplexData]:
    out = []
    for i, edges in enumerate(EDGES):
        n = max(max(e) for e in edges) + 1 + (num_nodes_extra if i == 2 else 0)
        graph = graph_from_edges(edges, num_nodes=n, feature_dim=3, seed=i)
        out.append(to_double(LaplacianNodeId(DIM)(lifting(graph))))
    return out


def make_model(max_rank: int = 2, kind: str = "dense", **kwargs) -> OrderKTokenGT:
    own = {"in_channels": [3] * (max_rank + 1), "node_id_dim": DIM, "outputs": ("complex", *range(max_rank + 1))}
    return small_token_model(OrderKTokenGT, kind, **{**own, **kwargs})


@pytest.mark.parametrize(
    ("kind", "identifiers"), [("dense", "ordered"), ("linear", "ordered"), ("dense", "sum")]
)
@pytest.mark.parametrize(
    ("lifting", "max_rank"),
    [(CellCycleLifting(), 2), (SimplicialCliqueLifting(complex_dim=3), 3)],
    ids=["cell", "clique"],
)
def test_runs_on_lifted_complexes_batched_equals_single(lifting, max_rank, kind, identifiers):
    model = make_model(max_rank, kind, identifiers=identifiers)
    items = lifted(lifting, num_nodes_extra=2)  # the last complex has isolated vertices
    batch = Batch.from_data_list(items)
    out = model(batch)
    assert out.shape == (3, 2) and torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(c) for c in items]), atol=1e-10, rtol=1e-8)
    cells = model.cell_outputs(batch)
    for r in range(max_rank + 1):
        assert cells[r].shape == (batch.num_cells(r), 2)
        single = torch.cat([model.cell_outputs(c)[r] for c in items])
        torch.testing.assert_close(cells[r], single, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("identifiers", ["ordered", "sum"])
@pytest.mark.parametrize(
    ("lifting", "max_rank"),
    [(CellCycleLifting(), 2), (SimplicialCliqueLifting(complex_dim=2), 2)],
    ids=["cell", "clique"],
)
def test_gradients_reach_every_parameter(lifting, max_rank, identifiers):
    model = make_model(
        max_rank, identifiers=identifiers, drop_path=0.1, eigenvector_dropout=0.1, dropout=0.1
    ).train()
    batch = Batch.from_data_list(lifted(lifting))
    loss = model(batch).square().sum()
    loss = loss + sum(o.square().sum() for o in model.cell_outputs(batch).values())
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize("identifiers", ["ordered", "sum", "mean"])
def test_invariant_to_relabelling_cells_of_every_rank(identifiers):
    model = make_model(2, identifiers=identifiers)
    data = lifted(CellCycleLifting())[0]
    generator = torch.Generator().manual_seed(5)
    perms = [torch.randperm(data.num_cells(r), generator=generator) for r in range(3)]
    permuted = permute_complex(data, perms)
    torch.testing.assert_close(model(permuted), model(data), atol=1e-10, rtol=1e-8)
    cells, cells_perm = model.cell_outputs(data), model.cell_outputs(permuted)
    for r in range(3):
        torch.testing.assert_close(cells_perm[r], cells[r][perms[r]], atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize(
    ("identifiers", "sizes"),
    # ordered: 6 vertices; hyperedges of 3, 2, 4 vertices -> 3! + 2! + 4! tokens; the rank-2
    # cell {0,1,2,3} is bounded by hyperedges (no ring), so its 4! vertex orderings
    [("ordered", (6, 32, 24)), ("sum", (6, 3, 1))],
)
def test_runs_on_a_hypergraph(identifiers, sizes):
    complexes = []
    for seed, cells in enumerate([[[0, 1, 2], [2, 3], [0, 3, 4, 5]], [[0, 1], [1, 2, 3]]]):
        cc = tnx.CombinatorialComplex()
        for cell in cells:
            cc.add_cell(cell, rank=1)
        cc.add_cell([0, 1, 2, 3], rank=2)
        data = OrthogonalRandomNodeId(DIM, seed=seed)(from_toponetx(cc))
        complexes.append(data)
    model = OrderKTokenGT(
        [0, 0, 0], 16, 3, n_layers=2, heads=4, node_id_dim=DIM, identifiers=identifiers
    ).eval()
    batch = Batch.from_data_list(complexes)
    out = model(batch)
    assert out.shape == (2, 3) and torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(c) for c in complexes]), atol=1e-5, rtol=1e-5)
    tokens = model.tokenize(complexes[0])
    assert tokens.sizes == sizes


def complexes_and_their_graphs():
    """The lifted test complexes and their graphs with the same vertex features and identifiers."""
    complexes = lifted(CellCycleLifting())
    graphs = []
    for data, edges in zip(complexes, EDGES):
        graph = graph_from_edges(edges, feature_dim=3)
        graph.x = data.x_0
        graph.node_id = data.node_id
        graphs.append(graph)
    return complexes, graphs


def test_graph_case_matches_tokengt_with_undirected_edge_tokens():
    """On ranks 0-1, pooled identifiers are TokenGT's one-token-per-undirected-edge variant."""
    complexes, graphs = complexes_and_their_graphs()
    order_k = make_model(1, in_channels=[3, 0], outputs=("complex",), identifiers="sum")
    torch.manual_seed(1)
    tokengt = (
        TokenGT(3, 0, 16, 2, n_layers=2, heads=4, node_id_dim=DIM, edge_tokens="undirected")
        .double()
        .eval()
    )
    with torch.no_grad():
        tokengt.graph_token.copy_(order_k.graph_token)
        tokengt.encoder.load_state_dict(order_k.encoder.state_dict())
        tokengt.readouts["complex"].load_state_dict(order_k.readouts["complex"].state_dict())
        tokengt.tokenizer.node_encoder.load_state_dict(order_k.encoders["0"].state_dict())
        tokengt.tokenizer.id_first.weight.copy_(order_k.id_projection.weight)
        tokengt.tokenizer.id_second.weight.zero_()
        tokengt.tokenizer.type_embedding.weight.copy_(order_k.type_embedding.weight[:2])
    expected = tokengt(Batch.from_data_list(graphs))
    got = order_k(Batch.from_data_list(complexes))
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-8)


def test_errors():
    model = make_model(2)
    data = lifted(CellCycleLifting())[0]
    del data.node_id
    with pytest.raises(ValueError, match="OrthogonalRandomNodeId"):
        model(data)
    with pytest.raises(TypeError, match="ComplexData"):
        model(graph_from_edges([(0, 1)]))
    with pytest.raises(ValueError, match="stops at rank"):
        make_model(3)(lifted(CellCycleLifting())[0])
    with pytest.raises(ValueError, match="identifiers"):
        OrderKTokenGT([3], 16, 1, identifiers="max")
    with pytest.raises(ValueError, match="outputs"):
        OrderKTokenGT([3, 3], 16, 1, outputs=("complex", 2))
    with pytest.raises(TypeError):
        OrderKTokenGT([3], 16, 1, 2)  # every option after the widths is keyword-only
    with pytest.raises(ValueError, match=r"ring of length 3.*max_cell_size=2"):
        make_model(2, max_cell_size=2)(lifted(CellCycleLifting())[0])  # triangles


def test_ordered_graph_case_matches_tokengt_with_directed_edge_tokens():
    """On ranks 0-1 with K = 2 slots, ordered identifiers are TokenGT's §2 tokens exactly."""
    complexes, graphs = complexes_and_their_graphs()
    order_k = make_model(1, in_channels=[3, 0], outputs=("complex",), max_cell_size=2)
    torch.manual_seed(1)
    tokengt = TokenGT(3, 0, 16, 2, n_layers=2, heads=4, node_id_dim=DIM).double().eval()
    d = 16
    with torch.no_grad():
        order_k.size_embedding.weight.zero_()  # sizes are fixed per rank on a graph
        tokengt.graph_token.copy_(order_k.graph_token)
        tokengt.encoder.load_state_dict(order_k.encoder.state_dict())
        tokengt.readouts["complex"].load_state_dict(order_k.readouts["complex"].state_dict())
        tokengt.tokenizer.node_encoder.load_state_dict(order_k.encoders["0"].state_dict())
        tokengt.tokenizer.id_first.weight.copy_(order_k.id_projection.weight[:d])
        tokengt.tokenizer.id_second.weight.copy_(order_k.id_projection.weight[d:])
        tokengt.tokenizer.type_embedding.weight.copy_(order_k.type_embedding.weight[:2])
    tokens = order_k.tokenize(complexes[0])
    assert tokens.sizes == (5, 12)  # 5 vertices, 6 edges x 2 directions
    expected = tokengt(Batch.from_data_list(graphs))
    got = order_k(Batch.from_data_list(complexes))
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-8)


def k4_with_rings(rings: list[list[int]]) -> ComplexData:
    """K4 with the given 2-cells, distinct vertex features, no edge / ring features."""
    cc = tnx.CellComplex()
    for u in range(4):
        for v in range(u + 1, 4):
            cc.add_edge(u, v)
    for ring in rings:
        cc.add_cell(ring, rank=2)
    data = OrthogonalRandomNodeId(DIM, seed=0)(from_toponetx(cc))
    data.x_0 = torch.arange(8.0).view(4, 2)
    return to_double(data)


@pytest.mark.parametrize("kind", ["dense", "linear"])
def test_two_rings_on_the_same_vertices_are_told_apart_by_ordered_identifiers(kind):
    """K4 carries the 4-rings 0-1-2-3 and 0-2-1-3 on the same vertex set."""
    both = k4_with_rings([[0, 1, 2, 3], [0, 2, 1, 3]])
    first, second = k4_with_rings([[0, 1, 2, 3]]), k4_with_rings([[0, 2, 1, 3]])
    for identifiers in ("sum", "ordered"):
        model = make_model(2, kind, in_channels=[2, 0, 0], identifiers=identifiers)
        rings = model.cell_outputs(both)[2]
        complexes = model(Batch.from_data_list([first, second]))
        if identifiers == "sum":  # identical identifier sums: the rings cannot be told apart
            torch.testing.assert_close(rings[0], rings[1], atol=1e-10, rtol=1e-8)
            torch.testing.assert_close(complexes[0], complexes[1], atol=1e-10, rtol=1e-8)
        else:
            assert (rings[0] - rings[1]).abs().max() > 1e-3
            assert (complexes[0] - complexes[1]).abs().max() > 1e-3
            # still invariant: relabelling vertices 1 <-> 2 maps ring 0-1-2-3 to 0-2-1-3
            swap = torch.tensor([0, 2, 1, 3])
            edges = both.incidence_1.to_dense()[swap]  # vertex rows permuted
            cols = [
                next(
                    j
                    for j in range(6)
                    if torch.equal(edges[:, j], both.incidence_1.to_dense()[:, k])
                )
                for k in range(6)
            ]
            permuted = permute_complex(both, [swap, torch.tensor(cols), torch.tensor([1, 0])])
            torch.testing.assert_close(
                model.cell_outputs(permuted)[2], rings.flip(0), atol=1e-10, rtol=1e-8
            )


def test_boundary_cycles_walk_every_ring_of_random_cell_complexes():
    for seed in range(4):
        data = from_toponetx(random_cell_complex(seed))
        cycles, length = boundary_cycles(data)
        ends = data.incidence_1.to_dense().t()  # (n_1, n_0)
        boundary = data.incidence_2.to_dense()  # (n_1, n_2)
        assert data.num_cells(2) > 0 and bool((length == boundary.sum(0).long()).all())
        for c in range(data.num_cells(2)):
            ring = cycles[c, : int(length[c])].tolist()
            assert len(set(ring)) == len(ring)
            walked = set()
            for a, b in zip(ring, ring[1:] + ring[:1]):  # consecutive vertices share an edge
                edge = int(((ends[:, a] > 0) & (ends[:, b] > 0)).nonzero()[0, 0])
                walked.add(edge)
            assert walked == set(boundary[:, c].nonzero().squeeze(1).tolist())
        tokens = cell_orderings(data, 2, 16)
        # 2L tokens per ring of length L: the rotations and reflections, all distinct
        assert torch.equal(torch.bincount(tokens.owner), 2 * length)
        assert torch.unique(tokens.slots, dim=0).shape[0] == tokens.slots.shape[0]


@pytest.mark.parametrize("identifiers", ["ordered", "sum"])
def test_one_row_per_complex_with_empty_complexes_in_the_batch(identifiers):
    items = lifted(CellCycleLifting())
    empty = graph_from_edges([], num_nodes=0, feature_dim=3)
    empty = to_double(LaplacianNodeId(DIM)(CellCycleLifting()(empty)))
    order = [empty, items[0], empty, items[1], empty]
    model = make_model(2, identifiers=identifiers)
    out = model(Batch.from_data_list(order))
    assert out.shape == (5, 2) and torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(c) for c in order]), atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("key", ["x_0", "x_2", "node_id"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e30])
def test_non_finite_or_huge_inputs_raise_naming_key_and_row(key, bad):
    data = lifted(CellCycleLifting())[0]
    value = data[key].clone()
    value[1, 0] = bad
    data[key] = value
    with pytest.raises(ValueError, match=rf"^{key}: row 1 "):
        make_model(2)(data)
    make_model(2, check_inputs=False)(data)


def test_feature_rows_must_match_the_cells():
    data = lifted(CellCycleLifting())[0]
    data.x_1 = data.x_1[:-1]
    with pytest.raises(ValueError, match="x_1 has 5 rows but the data has 6 rank-1 cells"):
        make_model(2)(data)


def test_shared_options_are_taken_once_with_one_set_of_defaults():
    """Both constructors take the shared options as keywords, checked by one function."""
    for cls in (TokenGT, OrderKTokenGT):
        parameters = inspect.signature(cls).parameters
        own = [p for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
        assert own and not {p.name for p in own} & set(TOKEN_MODEL_OPTIONS), cls.__name__
        assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD, cls.__name__
    assert set(TokenModelOptions.__annotations__) == set(TOKEN_MODEL_OPTIONS)
    graph = TokenGT(3, 0, 8, 2, heads=2, n_layers=3, node_id_dim=4, pooling="sum")
    cells = OrderKTokenGT([3, 3], 8, 2, heads=2, n_layers=3, node_id_dim=4, pooling="sum")
    for model in (graph, cells):
        assert len(model.encoder.layers) == 3 and model.pooling == "sum" and model.node_id_dim == 4
        assert model.sign_flip is TOKEN_MODEL_OPTIONS["sign_flip"]
    with pytest.raises(TypeError, match=r"OrderKTokenGT.*'n_layer'"):
        OrderKTokenGT([3], 8, 1, n_layer=2)
    with pytest.raises(TypeError, match=r"TokenGT.*'edge_token'"):
        TokenGT(3, 0, 8, 1, edge_token="directed")


@pytest.mark.parametrize("pooling", ["sum", "mean"])
@pytest.mark.parametrize("identifiers", ["ordered", "sum"])
def test_pooled_readout_one_row_per_complex_batched_equals_single(pooling, identifiers):
    items = lifted(CellCycleLifting(), num_nodes_extra=2)
    empty = to_double(
        LaplacianNodeId(DIM)(CellCycleLifting()(graph_from_edges([], num_nodes=0, feature_dim=3)))
    )
    order = [empty, items[0], items[1], empty, items[2]]
    model = make_model(2, identifiers=identifiers, pooling=pooling)
    out = model(Batch.from_data_list(order))
    assert out.shape == (5, 2) and torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(c) for c in order]), atol=1e-10, rtol=1e-8)
    # an empty complex pools to zeros: its row is the readout's bias
    torch.testing.assert_close(out[0], model.readouts["complex"].bias)


@pytest.mark.parametrize("pooling", ["sum", "mean"])
def test_pooled_readout_reads_the_sum_or_mean_of_the_cell_tokens(pooling):
    data = lifted(CellCycleLifting())[0]
    model = make_model(2, identifiers="sum", pooling=pooling)
    tokens = model.encode(data)
    cells = tokens.x[tokens.num_complexes :]  # every token but [graph]: one per cell
    assert cells.shape[0] == sum(data.num_cells(r) for r in range(3))
    pooled = cells.sum(0) if pooling == "sum" else cells.mean(0)
    torch.testing.assert_close(model(data)[0], model.readouts["complex"](pooled))


def test_pooled_readout_is_invariant_and_differs_from_the_graph_token():
    data = lifted(CellCycleLifting())[0]
    generator = torch.Generator().manual_seed(3)
    perms = [torch.randperm(data.num_cells(r), generator=generator) for r in range(3)]
    torch.manual_seed(0)
    summed = make_model(2, identifiers="ordered", pooling="sum")
    torch.manual_seed(0)
    token = make_model(2, identifiers="ordered")
    permuted = permute_complex(data, perms)
    torch.testing.assert_close(summed(permuted), summed(data), atol=1e-10, rtol=1e-8)
    assert not torch.allclose(summed(data), token(data))


def test_pooled_readout_gradients_reach_every_parameter_but_the_graph_token_readout_path():
    model = make_model(2, identifiers="sum", pooling="sum").train()
    batch = Batch.from_data_list(lifted(CellCycleLifting()))
    model(batch).square().sum().backward()
    readout = model.readouts["complex"]
    assert readout.weight.grad is not None and readout.weight.grad.abs().sum() > 0
    for name, parameter in model.named_parameters():
        if name.startswith("readouts.") and not name.startswith("readouts.complex"):
            continue  # the cell-level readouts are not read by forward
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name


@pytest.mark.parametrize(
    "options",
    [
        {"model_class": TokenGT, "in_channels": 3, "edge_channels": 0},
        {"model_class": OrderKTokenGT, "in_channels": [3, 3]},
    ],
    ids=["tokengt", "order_k"],
)
def test_unknown_pooling_raises(options):
    options = dict(options)
    model_class = options.pop("model_class")
    with pytest.raises(ValueError, match=r"pooling must be one of \('graph_token', 'sum', 'mean'\)"):
        small_token_model(model_class, "dense", node_id_dim=DIM, pooling="max", **options)
