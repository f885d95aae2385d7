import numpy as np
import pytest
import toponetx as tnx
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data
from torch_geometric.transforms import Compose

from tests.helpers import assert_same_complex, graph_from_edges
from topomodelx_attention.data import from_toponetx, to_toponetx
from topomodelx_attention.transforms import (
    CellCycleLifting,
    FeatureLifting,
    SimplicialCliqueLifting,
)


def counts(data):
    return data.shape.view(-1).tolist()


# ----------------------------------------------------------------------------- ring counts


def test_triangle_has_one_ring(triangle):
    data = CellCycleLifting()(triangle)
    assert counts(data) == [3, 3, 1]
    np.testing.assert_array_equal(data.incidence_2.to_dense().view(-1).numpy(), [1, 1, 1])
    # orientation 0 -> 1 -> 2 -> 0: edges (0,1) +, (0,2) -, (1,2) +
    np.testing.assert_array_equal(data.signed_incidence_2.to_dense().view(-1).numpy(), [1, -1, 1])


def test_square_with_diagonal(square_with_diagonal):
    basis = CellCycleLifting()(square_with_diagonal)
    chordless = CellCycleLifting(cycles="chordless")(square_with_diagonal)
    assert counts(basis) == [4, 5, 2] == counts(chordless)
    # the two triangles 0-1-2 and 0-2-3, sharing the diagonal (0,2)
    vc = basis.vertex_cells(2).to_dense().t().numpy()
    assert sorted(map(tuple, np.argwhere(vc)[:, 1].reshape(2, 3).tolist())) == [(0, 1, 2), (0, 2, 3)]
    assert CellCycleLifting(max_cell_length=3)(square_with_diagonal).num_cells(2) == 2


def test_two_rings_sharing_an_edge():
    # naphthalene-like: two hexagons sharing edge (0, 5)
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (5, 6), (6, 7), (7, 8), (8, 9), (9, 0)]
    data = CellCycleLifting()(graph_from_edges(edges))
    assert counts(data) == [10, 11, 2]
    b2 = data.incidence_2.to_dense()
    assert int((b2.sum(1) == 2).sum()) == 1  # one shared edge
    assert CellCycleLifting(max_cell_length=5)(graph_from_edges(edges)).num_cells(2) == 0


def test_k4_basis_versus_chordless_and_cliques():
    edges = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    graph = graph_from_edges(edges)
    assert CellCycleLifting()(graph).num_cells(2) == 3  # cycle rank = 6 - 4 + 1
    assert CellCycleLifting(cycles="chordless")(graph).num_cells(2) == 4
    simplicial = SimplicialCliqueLifting(complex_dim=3)(graph)
    assert counts(simplicial) == [4, 6, 4, 1]
    simplicial.validate_complex()
    # equals TopoNetX's clique complex
    sc = tnx.SimplicialComplex([[0, 1, 2, 3]])
    reference = from_toponetx(sc)
    for key in ("signed_incidence_3", "hodge_laplacian_2", "adjacency_1", "coadjacency_2"):
        assert torch.equal(simplicial[key].to_dense(), reference[key].to_dense()), key


def test_a_model_s_neighborhood_keys_select_what_the_lifting_computes(square_with_diagonal):
    # the CT's default tensor diagram reads these keys (CellularTransformer.neighborhood_keys)
    keys = ["adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2"]
    lifted = CellCycleLifting(neighborhoods=keys)(square_with_diagonal)
    full = CellCycleLifting()(square_with_diagonal)
    sparse = {k for k, v in lifted.items() if isinstance(v, torch.Tensor) and v.is_sparse}
    assert sparse == set(keys)  # those ranks only
    for key in keys:
        assert torch.equal(lifted[key].to_dense(), full[key].to_dense())


def test_tree_has_no_two_cells_but_keeps_the_rank(path_graph):
    data = CellCycleLifting()(path_graph)
    assert counts(data) == [4, 3, 0]
    assert data.x_2.shape == (0, 2) and data.incidence_2.shape == (3, 0)
    data.validate_complex()


def test_lifting_is_deterministic_under_edge_order(square_with_diagonal):
    shuffled = square_with_diagonal.clone()
    perm = torch.randperm(shuffled.edge_index.size(1), generator=torch.Generator().manual_seed(3))
    shuffled.edge_index = shuffled.edge_index[:, perm]
    a, b = CellCycleLifting()(square_with_diagonal), CellCycleLifting()(shuffled)
    for key in ("signed_incidence_2", "x_1", "x_2", "hodge_laplacian_1"):
        x, y = a[key], b[key]
        if x.is_sparse:
            x, y = x.to_dense(), y.to_dense()
        assert torch.equal(x, y), key


def test_lifted_complex_equals_toponetx_cell_complex(square_with_diagonal):
    data = CellCycleLifting()(square_with_diagonal)
    cc = to_toponetx(data)
    reference = from_toponetx(cc, feature_name="x")
    for key in reference.keys():
        x, y = reference[key], data[key]
        if isinstance(x, torch.Tensor) and x.is_sparse:
            assert torch.equal(x.to_dense(), y.to_dense()), key


# ----------------------------------------------------------------------------- features


def test_feature_lifting_sum_mean_concat(square_with_diagonal):
    x = square_with_diagonal.x
    data = CellCycleLifting()(square_with_diagonal)
    # edges sorted: (0,1), (0,2), (0,3), (1,2), (2,3)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (2, 3)]
    torch.testing.assert_close(data.x_1, torch.stack([x[u] + x[v] for u, v in pairs]))
    torch.testing.assert_close(data.x_2, torch.stack([x[[0, 1, 2]].sum(0), x[[0, 2, 3]].sum(0)]))
    mean = CellCycleLifting(feature_lifting="mean")(square_with_diagonal)
    torch.testing.assert_close(mean.x_2, torch.stack([x[[0, 1, 2]].mean(0), x[[0, 2, 3]].mean(0)]))
    concat = CellCycleLifting(edge_feature_lifting="concat")(square_with_diagonal)
    torch.testing.assert_close(concat.x_1, torch.stack([torch.cat([x[u], x[v]]) for u, v in pairs]))


def test_edge_attr_becomes_x1_and_categorical_stays_integer():
    graph = graph_from_edges([(0, 1), (1, 2), (2, 0)])
    graph.x = torch.tensor([[0], [2], [1]])
    # edge_attr per directed edge, equal in both directions
    codes = {(0, 1): 3, (1, 2): 1, (0, 2): 0}
    graph.edge_attr = torch.tensor([[codes[tuple(sorted(e))]] for e in graph.edge_index.t().tolist()])
    with pytest.raises(ValueError, match="categorical_cardinalities"):
        CellCycleLifting()(graph)
    data = CellCycleLifting(categorical_cardinalities=[3])(graph)
    assert data.x_0.dtype == torch.long and data.x_1.dtype == torch.long
    assert data.x_1.view(-1).tolist() == [3, 0, 1]  # (0,1), (0,2), (1,2)
    torch.testing.assert_close(data.x_2, torch.tensor([[1.0, 1.0, 1.0]]))


def test_feature_lifting_keeps_existing_and_repr():
    lifting = FeatureLifting("mean", edge_method="concat", categorical_cardinalities=[4])
    assert "mean" in repr(lifting) and "concat" in repr(lifting)
    assert "max_cell_length=5" in repr(CellCycleLifting(max_cell_length=5))
    with pytest.raises(ValueError, match="method"):
        FeatureLifting("max")
    with pytest.raises(ValueError, match="edge_method"):
        FeatureLifting("sum", edge_method="max")


def test_compose_with_pyg_transforms(triangle):
    transform = Compose([CellCycleLifting(), FeatureLifting()])
    assert transform(triangle).num_cells(2) == 1


# ----------------------------------------------------------------------------- bad input


def test_bad_graphs_raise_named_errors():
    lifting = CellCycleLifting()
    good = graph_from_edges([(0, 1), (1, 2)])
    with pytest.raises(TypeError, match="integers"):
        lifting(Data(x=good.x, edge_index=good.edge_index.float()))
    with pytest.raises(ValueError, match="vertex 5"):
        lifting(Data(x=good.x, edge_index=torch.tensor([[0, 5], [5, 0]])))
    with pytest.raises(ValueError, match="self-loop"):
        lifting(Data(x=good.x, edge_index=torch.tensor([[0, 1, 1], [1, 0, 1]])))
    with pytest.raises(ValueError, match="multi"):
        lifting(Data(x=good.x, edge_index=torch.tensor([[0, 0], [1, 1]])))
    with pytest.raises(ValueError, match="rows"):
        lifting(Data(x=good.x, edge_index=good.edge_index, edge_attr=torch.ones(3, 1)))
    with pytest.raises(ValueError, match="NaN"):
        lifting(Data(x=torch.full((3, 1), float("nan")), edge_index=good.edge_index))
    with pytest.raises(ValueError, match="different edge_attr"):
        lifting(Data(x=good.x, edge_index=torch.tensor([[0, 1], [1, 0]]), edge_attr=torch.tensor([[1.0], [2.0]])))
    with pytest.raises(ValueError, match="num_nodes"):
        lifting(Data(edge_index=torch.zeros((2, 0), dtype=torch.long)))
    with pytest.raises(ValueError, match="shape"):
        lifting(Data(x=good.x, edge_index=torch.zeros((3, 2), dtype=torch.long)))
    with pytest.raises(ValueError, match="max_cell_length"):
        CellCycleLifting(max_cell_length=2)
    with pytest.raises(ValueError, match="complex_dim"):
        SimplicialCliqueLifting(complex_dim=0)


def test_self_loops_can_be_dropped_with_a_warning(triangle):
    looped = triangle.clone()
    looped.edge_index = torch.cat([looped.edge_index, torch.tensor([[1], [1]])], dim=1)
    with pytest.warns(UserWarning, match="self-loop"):
        data = CellCycleLifting(self_loops="drop")(looped)
    assert counts(data) == [3, 3, 1]


def test_empty_graph_and_isolated_vertices():
    empty = Data(x=torch.zeros((0, 2)), edge_index=torch.zeros((2, 0), dtype=torch.long))
    for lifting in (CellCycleLifting(), SimplicialCliqueLifting(3)):
        data = lifting(empty)
        assert data.shape.view(-1).tolist() == [0] * (data.max_rank + 1)
        data.validate_complex()
    isolated = graph_from_edges([(0, 1), (1, 2), (2, 0)], num_nodes=5)
    data = CellCycleLifting()(isolated)
    assert counts(data) == [5, 3, 1]
    assert data.adjacency_0.to_dense()[3:].abs().sum() == 0
    data.validate_complex()


def test_lift_many_equals_lifting_each_graph(square_with_diagonal, triangle, path_graph):
    graphs = [square_with_diagonal, triangle, path_graph, graph_from_edges([(0, 1), (1, 2), (2, 0), (2, 3)], num_nodes=6)]
    for graph in graphs:
        graph.y = torch.tensor([graph.num_nodes])
    for lifting in (CellCycleLifting(), SimplicialCliqueLifting(3), CellCycleLifting(cycles="chordless")):
        many = lifting.lift_many(graphs, chunk_size=3)
        assert len(many) == len(graphs)
        for graph, lifted in zip(graphs, many):
            assert_same_complex(lifting(graph), lifted)


def test_lift_many_errors_name_the_graph(triangle, path_graph):
    bad = Data(x=torch.randn(2, 2), edge_index=torch.tensor([[0, 2], [2, 0]]))  # vertex 2 of 2
    with pytest.raises(ValueError, match=r"graph 1 of the list: .*vertex 2"):
        CellCycleLifting().lift_many([triangle, bad, path_graph])
    looped = Data(x=torch.randn(2, 2), edge_index=torch.tensor([[0, 1, 1], [1, 0, 1]]))
    with pytest.raises(ValueError, match=r"graph 2 of the list: .*self-loop"):
        CellCycleLifting().lift_many([triangle, path_graph, looped])
    with_attr = triangle.clone()
    with_attr.edge_attr = torch.ones(with_attr.edge_index.size(1), 1)
    with pytest.raises(ValueError, match="edge_attr and others not"):
        CellCycleLifting().lift_many([with_attr, path_graph])


def test_num_nodes_disagreeing_with_x_raises_the_same_error_in_lift_and_lift_many(triangle, path_graph):
    # 4 vertices declared, 3 feature rows: lifting by x.size(0) would silently drop vertex 3
    wrong = Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=4)
    for lifting in (CellCycleLifting(), SimplicialCliqueLifting(2)):
        with pytest.raises(ValueError, match="num_nodes=4") as single:
            lifting(wrong)
        assert str(single.value) == "num_nodes=4 but x has 3 rows"
        with pytest.raises(ValueError, match="graph 2") as many:
            lifting.lift_many([triangle, path_graph, wrong])
        assert str(many.value) == f"graph 2 of the list: {single.value}"
    # num_nodes alone (no x) sizes the graph in both paths, isolated vertices included
    bare = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=4)
    assert CellCycleLifting().lift_many([bare])[0].shape.tolist() == [[4, 1, 0]]
    assert CellCycleLifting()(bare).shape.tolist() == [[4, 1, 0]]
    with pytest.raises(ValueError, match="graph 0 of the list: the graph has neither x nor num_nodes"):
        CellCycleLifting().lift_many([Data(edge_index=torch.tensor([[0], [1]]))])


def _assert_lift_many_equals_lift(lifting, graphs, chunk_size):
    many = lifting.lift_many([g.clone() for g in graphs], chunk_size=chunk_size)
    assert len(many) == len(graphs)
    for lifted, graph in zip(many, graphs):
        single = lifting(graph.clone())
        assert sorted(lifted.keys()) == sorted(single.keys())
        assert lifted.num_complexes == 1
        for key in single.keys():
            x, y = lifted[key], single[key]
            if isinstance(x, torch.Tensor):
                x, y = (x.to_dense(), y.to_dense()) if x.is_sparse else (x, y)
                assert x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y), key
            else:
                assert x == y, key
    return many


@pytest.mark.parametrize("position", ["last", "middle", "first", "all"])
def test_lift_many_gives_one_complex_per_graph_also_without_cells(position):
    # regression (fuzz): a 9-node graph followed by an empty graph gave 1 complex for 2 graphs
    rng = np.random.default_rng(0)
    edges = [(u, v) for u in range(9) for v in range(u + 1, 9) if rng.random() < 0.4]
    full = graph_from_edges(edges, num_nodes=9)
    empty = Data(x=torch.zeros(0, full.x.size(1)), edge_index=torch.zeros(2, 0, dtype=torch.long))
    graphs = {
        "last": [full, empty], "middle": [full, empty, full], "first": [empty, full], "all": [empty, empty],
    }[position]
    for lifting in (CellCycleLifting(), SimplicialCliqueLifting(complex_dim=3)):
        for chunk_size in (1, 2, 3):
            many = _assert_lift_many_equals_lift(lifting, graphs, chunk_size)
            for lifted, graph in zip(many, graphs):
                assert lifted.shape[0, 0] == graph.num_nodes


def test_lift_many_accepts_graphs_of_different_feature_widths():
    # regression (fuzz): different x widths raised torch.cat's RuntimeError; each graph alone is valid
    triangle = [(0, 1), (1, 2), (0, 2)]
    graphs = []
    for width, edge_width in ((2, 1), (3, 1), (3, 4), (2, 1), (1, 1)):
        graph = graph_from_edges(triangle)
        graph.x = torch.randn(3, width)
        graph.edge_attr = torch.ones(graph.edge_index.size(1), edge_width)
        graphs.append(graph)
    graphs.append(graph_from_edges(triangle))
    graphs[-1].x = torch.arange(6).view(3, 2)  # integer codes: not concatenated with floats
    graphs[-1].edge_attr = torch.ones(graphs[-1].edge_index.size(1), 1)
    lifting = CellCycleLifting(categorical_cardinalities=[6, 6])
    for chunk_size in (1, 4, 1024):
        many = _assert_lift_many_equals_lift(lifting, graphs, chunk_size)
        assert [c.x_0.size(1) for c in many] == [2, 3, 3, 2, 1, 2]
        assert [c.x_1.size(1) for c in many] == [1, 1, 4, 1, 1, 1]
    # errors still name the graph by its position in the whole list, across width groups
    outside = Data(x=torch.randn(2, 5), edge_index=torch.tensor([[0, 2], [2, 0]]), edge_attr=torch.ones(2, 1))
    bad = [*graphs[:4], outside]  # vertex 2 of 2
    with pytest.raises(ValueError, match=r"graph 4 of the list: .*vertex 2"):
        CellCycleLifting().lift_many(bad, chunk_size=3)
    mixed = [graphs[0], graph_from_edges(triangle)]
    del mixed[1].x
    mixed[1].num_nodes = 3
    with pytest.raises(ValueError, match=r"some graphs have x and others not \(graph 0 has it, graph 1"):
        CellCycleLifting().lift_many(mixed, chunk_size=1)


# ----------------------------------------------------------------------------- hypothesis


@st.composite
def random_graphs(draw):
    n = draw(st.integers(0, 12))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    both = [(u, v) for u, v in chosen] + [(v, u) for u, v in chosen]
    edge_index = torch.tensor(both, dtype=torch.long).t().reshape(2, -1)
    x = torch.randn(n, 2)
    return Data(x=x, edge_index=edge_index)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graphs_lift_to_valid_complexes(graph):
    for lifting in (CellCycleLifting(), CellCycleLifting(cycles="chordless", max_cell_length=6), SimplicialCliqueLifting(3)):
        data = lifting(graph)
        data.validate_complex()  # shapes, coalesced, no explicit zeros, B_r B_{r+1} = 0
        n, m = graph.num_nodes, graph.edge_index.size(1) // 2
        assert data.num_cells(0) == n and data.num_cells(1) == m
        if isinstance(lifting, CellCycleLifting) and lifting.cycles == "basis":
            import networkx as nx

            g = nx.Graph()
            g.add_nodes_from(range(n))
            g.add_edges_from(graph.edge_index.t().tolist())
            assert data.num_cells(2) == m - n + nx.number_connected_components(g)


# ----------------------------------------------------------------------------- cycle limit


def dense_graph(n, p=0.5, seed=0):
    import networkx as nx

    return graph_from_edges(list(nx.gnp_random_graph(n, p, seed=seed).edges()), num_nodes=n)


def test_chordless_cycles_grow_exponentially_and_are_bounded(monkeypatch):
    import networkx as nx

    from topomodelx_attention.transforms import liftings

    # the unprotected enumeration: 4,896 2-cells on 30 vertices (G(40, 0.5): 22,521, 6 GB)
    unbounded = CellCycleLifting(cycles="chordless", max_cycles=None)(dense_graph(30))
    assert counts(unbounded) == [30, 213, 4896]
    pulled = []
    real = nx.chordless_cycles

    def counted(*args, **kwargs):
        for cycle in real(*args, **kwargs):
            pulled.append(cycle)
            yield cycle

    monkeypatch.setattr(liftings.nx, "chordless_cycles", counted)
    bounded = CellCycleLifting(cycles="chordless", max_cycles=1000)
    pattern = (
        r"this graph \(30 vertices, 213 edges\) has more than max_cycles=1,000 chordless "
        r"cycles with no length cap.*max_cell_length.*cycles='basis'.*raise max_cycles"
    )
    with pytest.raises(ValueError, match=pattern) as error:
        bounded(dense_graph(30))
    assert isinstance(error.value, liftings.CycleLimitError)
    assert len(pulled) == 1001  # stopped at the first cycle past the limit
    # the same graph within the limit, and the basis (m - n + 1 cycles) are unaffected
    assert counts(CellCycleLifting(cycles="chordless", max_cycles=4896)(dense_graph(30)))[2] == 4896
    assert counts(CellCycleLifting(max_cycles=10)(dense_graph(30)))[2] == 213 - 30 + 1


def test_the_default_cycle_limit_refuses_the_issue_graphs_fast():
    # G(60, 0.5) with length cap 6 ended in numpy's _ArrayMemoryError; now a ValueError
    with pytest.raises(ValueError, match=r"60 vertices, 885 edges.*max_cycles=10,000.*length <= 6"):
        CellCycleLifting(cycles="chordless", max_cell_length=6)(dense_graph(60))


def test_lift_many_names_the_graph_past_the_cycle_limit(triangle, path_graph):
    lifting = CellCycleLifting(cycles="chordless", max_cycles=50)
    graphs = [triangle, path_graph, dense_graph(14), triangle]
    with pytest.raises(ValueError, match=r"graph 2 of the list \(14 vertices, \d+ edges\).*max_cycles=50"):
        lifting.lift_many(graphs, chunk_size=2)
    with pytest.raises(ValueError, match=r"graph 2 of the list"):
        lifting.lift_many(graphs, chunk_size=4)
    # the limit is per graph: many small graphs together stay within it
    assert len(lifting.lift_many([dense_graph(8, seed=s) for s in range(20)])) == 20
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_cycles"):
            CellCycleLifting(cycles="chordless", max_cycles=bad)
