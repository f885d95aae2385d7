"""GraphUniverse in the harness: config → family → split → lifted complexes, task protocol, cache key."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from topomodelx_attention.datasets import graphuniverse as gu
from topomodelx_attention.datasets.cache import cache_key
from topomodelx_attention.datasets.graphuniverse import load_graphuniverse, task_protocol
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.prepare import prepare_dataset

TINY = ["dataset.n_graphs=8", "dataset.family.n_nodes_range=[10,30]"]


def _cfg(*overrides, model="gin"):
    return compose_config([*TINY, *overrides], dataset="graphuniverse", model=model)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_packaged_config_holds_the_challenge_protocol():
    cfg = compose_config([], dataset="graphuniverse", model="gin").dataset
    assert cfg.loader == "graphuniverse" and cfg.task == "community_detection"
    assert cfg.n_graphs == 1000 and cfg.dataloader.batch_size == 16
    assert dict(cfg.universe) == gu.UNIVERSE_PARAMETERS
    assert {k: list(v) if not isinstance(v, int) else v for k, v in cfg.family.items()} == {
        k: v for k, v in gu.FAMILY_PARAMETERS.items() if k != "n_graphs"
    }
    assert (cfg.split.train_prop, cfg.split.data_seed, cfg.split.global_seed) == (0.7, 0, 42)
    challenge = compose_config(["experiment=graphuniverse_challenge"], dataset="graphuniverse", model="gps")
    assert challenge.model.params.hidden_channels == 64 and challenge.trainer.max_epochs == 500
    assert challenge.trainer.early_stopping_patience == 10 and list(challenge.seeds) == [42, 43, 44]


def test_community_detection_is_inductive_node_classification(cache):
    cfg = _cfg("dataset.homophily=hi")
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cache)
    info = prepared.info
    assert (info.task, info.task_level, info.loss, info.metric) == ("classification", "node", "cross_entropy", "accuracy")
    assert info.out_channels == 20 and info.in_channels[0] == 15 and info.metrics == ()
    # the data set's own split: TopoBench's permutation, by graph (int(8 * 0.7) = 5, int(8 * 0.15) = 1)
    expected = gu.challenge_split(8, 0.7, 0, 42)
    assert [len(prepared.fixed_split[k]) for k in ("train", "val", "test")] == [5, 1, 2]
    family = gu.load_family(gu.generation_parameters("hi", n_graphs=8, family={"n_nodes_range": [10, 30]}), cache)
    order = np.concatenate(expected)
    for position, complex_ in enumerate(prepared.complexes):
        graph = family[int(order[position])]
        assert torch.equal(complex_.x_0, graph.x)  # vertices keep their order through the lifting
        assert torch.equal(complex_.y, graph.community)  # one label per vertex


def test_triangle_counting_is_graph_regression_with_mse(cache):
    cfg = _cfg("dataset.task=triangle_counting", "dataset.avg_degree=hi")
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cache)
    info = prepared.info
    assert (info.task, info.task_level, info.loss, info.metric) == ("regression", "graph", "mse", "mse")
    assert info.out_channels == 1 and info.metrics == ("mse_per_triangle",) and info.mode == "min"
    for complex_ in prepared.complexes:
        assert complex_.y.shape == (1,)
        assert float(complex_.y) == gu.count_triangles(complex_.edge_index, complex_.num_cells(0))
    assert sum(float(c.y) for c in prepared.complexes) > 0


def test_cache_key_separates_settings_tasks_and_splits():
    base = _cfg()

    def key(**changes):
        dataset = OmegaConf.to_container(base.dataset, resolve=True)
        for path, value in changes.items():
            *parents, leaf = path.split("__")
            target = dataset
            for parent in parents:
                target = target[parent]
            target[leaf] = value
        return cache_key(dataset, base.model.lifting, base.model.pe)

    keys = {
        key(), key(homophily="mid"), key(avg_degree="hi"), key(power_law="hi"),
        key(task="triangle_counting"), key(n_graphs=9), key(split__data_seed=1), key(universe__seed=1),
    }
    assert len(keys) == 8
    assert key() == cache_key(_cfg().dataset, base.model.lifting, base.model.pe)


def test_the_family_is_generated_once(cache, monkeypatch):
    cfg = _cfg("dataset.power_law=hi")
    first = load_graphuniverse(cfg.dataset, cache)
    monkeypatch.setattr(gu, "generate_family", lambda *a, **k: pytest.fail("generated twice"))
    again = load_graphuniverse(cfg.dataset, cache)
    assert [len(first[k]) for k in first] == [5, 1, 2]
    for part in first:
        for a, b in zip(first[part], again[part]):
            assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["dataset.task=node_counting"], r"dataset\.task must be one of"),
        (["dataset.homophily=medium"], r"dataset\.homophily must be one of"),
        (["dataset.n_graphs=4"], "leave a split empty"),
        (["dataset.task_level=graph"], "leave task_level null"),
        (["dataset.loss=mae"], "dataset.loss of a classification task must be one of"),
        (["dataset.task=triangle_counting", "dataset.metrics=[accuracy]"], "is not a metric"),
    ],
)
def test_bad_settings_are_rejected_naming_the_key(cache, overrides, message):
    cfg = _cfg(*overrides)
    with pytest.raises(ValueError, match=message):
        prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cache)


def test_node_labels_must_cover_every_vertex(cache):
    cfg = _cfg()
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cache)
    from topomodelx_attention.harness.prepare import _infer_info

    broken = [c.clone() for c in prepared.complexes]
    broken[3].y = broken[3].y[:-1]
    with pytest.raises(ValueError, match="graph 3 has y of shape"):
        _infer_info(cfg.dataset, broken, None)
    assert task_protocol(task_protocol(cfg.dataset)) == task_protocol(cfg.dataset)


@pytest.mark.parametrize(
    ("override", "option"),
    [
        ("dataset.universe.feature_dim=100000000", "dataset.universe.feature_dim=100000000"),
        ("dataset.family.n_nodes_range=[1000000,1000000]", "dataset.family.n_nodes_range=[1000000, 1000000]"),
    ],
)
def test_train_refuses_a_family_above_the_memory_budget_in_one_line(tmp_path, capsys, override, option):
    from topomodelx_attention.cli import main

    argv = ["train", "--dataset", "graphuniverse", "--max-epochs", "1", "--seeds", "1", "--no-progress-bar",
            "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "out"), override]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"topomodelx-attention train: error: {option}: ")
    assert "GENERATION_MEMORY_BUDGET" in err[0]
    assert not list((tmp_path / "cache").rglob("*.pt"))  # nothing generated
