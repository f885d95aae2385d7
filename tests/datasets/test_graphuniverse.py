"""GraphUniverse families: the challenge's parameters, conversion, split, triangles, safe cache."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest
import torch

from topomodelx_attention.datasets import graphuniverse as gu

TINY = {"n_nodes_range": [10, 30]}


@pytest.fixture(scope="module")
def parameters():
    return gu.generation_parameters("mid", "hi", "lo", n_graphs=6, family=TINY)


@pytest.fixture(scope="module")
def family(parameters):
    return gu.generate_family(parameters)


def test_generation_parameters_are_the_challenges():
    p = gu.generation_parameters()
    assert p["universe_parameters"] == {
        "K": 20, "feature_dim": 15, "center_variance": 0.2, "cluster_variance": 0.4,
        "edge_propensity_variance": 0.5, "seed": 42,
    }
    family = p["family_parameters"]
    assert family["n_graphs"] == 1000 and family["n_nodes_range"] == [50, 300]
    assert family["n_communities_range"] == [5, 10] and family["degree_separation_range"] == [0.5, 1.0]
    assert family["seed"] == 42
    assert (family["homophily_range"], family["avg_degree_range"], family["power_law_exponent_range"]) == (
        [0.0, 0.1], [1.0, 2.5], [1.5, 2.0]
    )
    hi = gu.generation_parameters("hi", "hi", "hi")["family_parameters"]
    assert (hi["homophily_range"], hi["avg_degree_range"], hi["power_law_exponent_range"]) == (
        [0.9, 1.0], [4.0, 5.0], [4.0, 5.0]
    )
    assert gu.generation_parameters("mid")["family_parameters"]["homophily_range"] == [0.4, 0.6]
    gu.generation_parameters()["family_parameters"]["n_nodes_range"].append(1)  # a copy
    assert gu.FAMILY_PARAMETERS["n_nodes_range"] == [50, 300]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"homophily": "medium"}, "dataset.homophily must be one of"),
        ({"avg_degree": "mid"}, "dataset.avg_degree must be one of"),
        ({"power_law": 2}, "dataset.power_law must be one of"),
        ({"n_graphs": 0}, "dataset.n_graphs must be a positive integer"),
        ({"n_graphs": 2.5}, "dataset.n_graphs must be a positive integer"),
        ({"universe": {"k": 3}}, "dataset.universe has unknown keys"),
        ({"family": {"homophily_range": [0, 1]}}, "dataset.family has unknown keys"),
        ({"family": {"n_nodes_range": [30, 10]}}, "n_nodes_range must be"),
        ({"family": {"n_nodes_range": 10}}, "n_nodes_range must be a pair"),
        ({"family": {"n_communities_range": [5, 30]}}, "exceeds the universe's K=20"),
        ({"universe": {"cluster_variance": -1}}, r"cluster_variance must be a number in \[0, 1e\+06\]"),
        ({"universe": {"center_variance": 1e300}}, r"center_variance must be a number in \[0, 1e\+06\]"),
        ({"universe": {"edge_propensity_variance": float("nan")}}, "edge_propensity_variance must be a number"),
        ({"universe": {"seed": -1}}, r"dataset.universe.seed must be null or an integer in 0..2\*\*32-1"),
        ({"family": {"seed": 2**40}}, r"dataset.family.seed must be null or an integer in 0..2\*\*32-1"),
        ({"family": {"n_nodes_range": [1, 1]}}, "n_nodes_range must start at 2 vertices"),
        ({"family": {"degree_separation_range": [float("nan"), 1.0]}}, "degree_separation_range must be"),
        ({"family": {"degree_separation_range": [0.2, 1.5]}}, "degree_separation_range must be"),
        ({"family": {"degree_separation_range": ["a", 1.0]}}, "degree_separation_range must be"),
    ],
)
def test_generation_parameters_reject_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gu.generation_parameters(**kwargs)


def test_conversion_equals_graph_universes_own(parameters, family):
    from graph_universe import GraphFamilyGenerator, GraphUniverse

    universe = GraphUniverse(**parameters["universe_parameters"])
    generator = GraphFamilyGenerator(universe=universe, **parameters["family_parameters"])
    generator.generate_family(show_progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        communities = generator.to_pyg_graphs("community_detection")
        triangles = generator.to_pyg_graphs("triangle_counting")
    assert len(family) == 6
    for ours, cd, tc in zip(family, communities, triangles):
        assert 10 <= ours.num_nodes <= 30
        assert torch.equal(ours.x, cd.x) and ours.x.dtype == torch.float32 and ours.x.shape[1] == 15
        assert torch.equal(ours.edge_index, cd.edge_index)
        assert torch.equal(ours.community, cd.y)
        assert int(ours.triangles) == int(tc.y)  # graph-universe counts on its networkx graph
    cd_graphs = gu.task_graphs(family, "community_detection")
    tc_graphs = gu.task_graphs(family, "triangle_counting")
    assert all(g.y.shape == (g.num_nodes,) and g.y.dtype == torch.long for g in cd_graphs)
    assert all(g.y.shape == (1,) and g.y.dtype == torch.float32 for g in tc_graphs)
    with pytest.raises(ValueError, match=r"dataset\.task must be one of"):
        gu.task_graphs(family, "node_classification")


def test_generation_is_deterministic_and_leaves_numpys_global_stream_alone(parameters, family):
    # graph-universe seeds NumPy's legacy global generator: its state must come back
    np.random.seed(7)  # noqa: NPY002
    expected = np.random.rand(3)  # noqa: NPY002
    np.random.seed(7)  # noqa: NPY002
    again = gu.generate_family(parameters)
    assert np.array_equal(np.random.rand(3), expected)  # noqa: NPY002
    for a, b in zip(family, again):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.community, b.community)


def test_triangles_are_counted_as_the_challenge_does():
    k4 = torch.tensor([[0, 0, 0, 1, 1, 2], [1, 2, 3, 2, 3, 3]])
    assert gu.count_triangles(k4, 4) == 4
    both = torch.cat([k4, k4.flip(0), torch.tensor([[2], [2]])], dim=1)  # both directions + a loop
    assert gu.count_triangles(both, 5) == 4
    assert gu.count_triangles(torch.zeros((2, 0), dtype=torch.long), 3) == 0
    graph = nx.gnp_random_graph(15, 0.4, seed=3)
    edges = torch.tensor(list(graph.edges)).t()
    assert gu.count_triangles(edges, 15) == sum(nx.triangles(graph).values()) // 3


def test_split_is_topobenchs_random_splitting():
    # TopoBench split_utils.random_splitting: np.random.seed(42), ten permutations, fold 0
    n = 1000
    np.random.seed(42)  # noqa: NPY002
    permutations = [np.random.permutation(n) for _ in range(10)]  # noqa: NPY002
    for fold in (0, 3):
        train, val, test = gu.challenge_split(n, 0.7, fold, 42)
        assert (len(train), len(val), len(test)) == (700, 150, 150)
        expected = permutations[fold]
        assert np.array_equal(np.concatenate([train, val, test]), expected)
    train, val, test = gu.challenge_split(6, 0.5)
    assert (len(train), len(val), len(test)) == (3, 1, 2)
    with pytest.raises(ValueError, match="leave a split empty"):
        gu.challenge_split(6, 0.7)  # int(6 * 0.15) = 0 validation graphs
    with pytest.raises(ValueError, match="data_seed must be a fold"):
        gu.challenge_split(100, 0.7, 10)
    with pytest.raises(ValueError, match="train_prop must be in"):
        gu.challenge_split(100, 1.0)
    with pytest.raises(ValueError, match=r"dataset.split.global_seed must be an integer in 0..2\*\*32-1"):
        gu.challenge_split(100, 0.7, 0, -1)  # numpy's own error names no option


def test_cache_round_trip_reads_plain_tensors(tmp_path, parameters, family, monkeypatch):
    path = gu.family_cache_file(parameters, tmp_path)
    assert path.parent == tmp_path / "graphuniverse"
    gu.save_family(family, parameters, path)
    raw = torch.load(path, weights_only=True)  # nothing but plain tensors and strings
    assert raw["format"] == gu.CACHE_FORMAT and raw["count"] == 6
    monkeypatch.setattr(gu, "generate_family", lambda *a, **k: pytest.fail("regenerated"))
    loaded = gu.load_family(parameters, tmp_path)
    for a, b in zip(family, loaded):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.community, b.community) and torch.equal(a.triangles, b.triangles)
        assert a.num_nodes == b.num_nodes
    other = gu.generation_parameters("hi", "hi", "lo", n_graphs=6, family=TINY)
    assert gu.family_cache_file(other, tmp_path) != path
    with pytest.raises(gu.GraphUniverseCacheError, match="other generation parameters"):
        gu.read_family(path, other)


class _WritesMarker:
    """Unpickling it opens (creates) the marker file: any unpickler executing globals runs it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_in_the_cache_is_refused_unexecuted(tmp_path, parameters, family, monkeypatch):
    path = gu.family_cache_file(parameters, tmp_path)
    marker = tmp_path / "executed"
    gu.save_family(family, parameters, path)
    payload = torch.load(path, weights_only=True)
    payload["x"] = _WritesMarker(marker)
    torch.save(payload, path)
    # the unprotected path really executes it
    with open(path, "rb") as handle:
        torch.load(handle, weights_only=False)
    assert marker.exists()
    marker.unlink()
    with pytest.raises(gu.GraphUniverseCacheError, match=str(path)):
        gu.read_family(path, parameters)
    assert not marker.exists()
    monkeypatch.setattr(gu, "generate_family", lambda *a, **k: list(family))
    with pytest.warns(UserWarning, match="regenerated"):
        regenerated = gu.load_family(parameters, tmp_path)
    assert not marker.exists() and len(regenerated) == 6
    assert gu.read_family(path, parameters)[0].num_nodes == family[0].num_nodes  # rewritten clean


def test_graph_universes_own_dataset_class_would_unpickle_its_cache(tmp_path, parameters):
    """Why we generate in memory: GraphUniverseDataset reads its folder with PyG's fs.torch_load,
    which falls back to torch.load(weights_only=False) when the safe load fails."""
    from graph_universe import GraphUniverseDataset

    marker = tmp_path / "executed"
    name = "family"
    (tmp_path / name).mkdir()
    torch.save(_WritesMarker(marker), tmp_path / name / "data.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception):  # noqa: B017, PT011 - it fails after the load
            GraphUniverseDataset(root=str(tmp_path), parameters=parameters, name=name)
    assert marker.exists()


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda p: p.update(format="other"), "not a GraphUniverse family file"),
        (lambda p: p.update(edge_index=p["edge_index"] + 1000), "outside their graph"),
        (lambda p: p.update(community=p["community"] + 100), "community labels outside"),
        (lambda p: p.update(x=p["x"][:-1]), "shapes or dtypes"),
        (lambda p: p.update(x=p["x"].double()), "shapes or dtypes"),
        (lambda p: p["x"].__setitem__((0, 0), float("nan")), "not finite"),
        (lambda p: p.pop("triangles"), "missing or not tensors"),
        (lambda p: p.update(count=-1), "missing or not tensors"),
    ],
)
def test_damaged_cache_files_are_rejected_naming_the_file(tmp_path, parameters, family, tamper, message):
    path = tmp_path / "family.pt"
    gu.save_family(family, parameters, path)
    payload = torch.load(path, weights_only=True)
    tamper(payload)
    if all(isinstance(payload.get(k), torch.Tensor) for k in gu._TENSORS):
        payload["checksum"] = gu._checksum(payload)  # a consistent file with wrong contents
    torch.save(payload, path)
    with pytest.raises(gu.GraphUniverseCacheError, match=message) as error:
        gu.read_family(path, parameters)
    assert str(path) in str(error.value)


def test_changed_tensor_values_fail_the_checksum(tmp_path, parameters, family):
    path = tmp_path / "family.pt"
    gu.save_family(family, parameters, path)
    payload = torch.load(path, weights_only=True)
    payload["x"][3, 2] += 1.0  # still finite, right shapes: only the checksum tells
    torch.save(payload, path)
    with pytest.raises(gu.GraphUniverseCacheError, match="checksum"):
        gu.read_family(path, parameters)


def test_truncated_cache_file_is_rejected(tmp_path, parameters, family):
    path = tmp_path / "family.pt"
    gu.save_family(family, parameters, path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(gu.GraphUniverseCacheError, match="not a readable family file"):
        gu.read_family(path, parameters)


def test_missing_package_names_the_extra(monkeypatch, parameters):
    import builtins

    real_import = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == "graph_universe":
            raise ImportError("No module named 'graph_universe'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match=r"topomodelx-attention\[graphuniverse\]"):
        gu.generate_family(parameters)


# ------------------------------------------------------------------ the memory a family asks for
@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"universe": {"feature_dim": 100_000_000}}, "dataset.universe.feature_dim=100000000"),
        ({"family": {"n_nodes_range": [1_000_000, 1_000_000]}}, "dataset.family.n_nodes_range=[1000000, 1000000]"),
        ({"n_graphs": 10**8}, "dataset.n_graphs=100000000"),
        ({"universe": {"K": 10**6}}, "dataset.universe.K=1000000"),
    ],
)
def test_a_family_above_the_memory_budget_is_refused_before_anything_is_allocated(kwargs, option):
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="GENERATION_MEMORY_BUDGET") as error:
            gu.generation_parameters(**kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(error.value)
    assert message.startswith(option) and f"lower {option.split('=')[0]}" in message and "\n" not in message
    assert peak < 2**20, f"{peak} bytes allocated before refusing"


def test_generate_family_checks_the_budget_of_hand_made_parameters(monkeypatch, parameters):
    import graph_universe

    def must_not_run(*args, **kwargs):
        raise AssertionError("graph-universe ran")

    monkeypatch.setattr(graph_universe, "GraphUniverse", must_not_run)
    huge = {
        "universe_parameters": {**parameters["universe_parameters"], "feature_dim": 10**8},
        "family_parameters": dict(parameters["family_parameters"]),
    }
    with pytest.raises(ValueError, match=r"dataset\.universe\.feature_dim=100000000"):
        gu.generate_family(huge)
    monkeypatch.setattr(gu, "GENERATION_MEMORY_BUDGET", 10**5)  # the module attribute is the budget
    with pytest.raises(ValueError, match=r"above the budget of 97.7 KiB"):
        gu.generate_family(parameters)


def test_the_estimate_bounds_what_generation_allocates(parameters):
    import tracemalloc

    estimate = gu.check_generation_budget(parameters)
    tracemalloc.start()
    try:
        graphs = gu.generate_family(parameters)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(graphs) == 6 and 0 < peak <= estimate, (peak, estimate)


def test_a_family_graph_universe_can_never_generate_stops(parameters):
    # graph-universe retries a failing graph forever (a 1-vertex graph divides by zero every time)
    stuck = {
        "universe_parameters": dict(parameters["universe_parameters"]),
        "family_parameters": {**parameters["family_parameters"], "n_nodes_range": [1, 1]},
    }
    with pytest.raises(ValueError, match=f"failed {gu.MAX_FAILED_GRAPHS} times in a row to generate graph 1"):
        gu.generate_family(stuck)
