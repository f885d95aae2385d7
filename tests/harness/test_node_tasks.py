"""Node-level tasks: node outputs of every harness model, the node-level training module, and one
training epoch of every packaged model on a tiny generated GraphUniverse family."""

from __future__ import annotations

import csv
import math
import re

import pytest
import torch
from torch.nn import functional as F
from torch_geometric.data import Data

from tests.helpers import HARNESS_MODELS as ALL_MODELS
from topomodelx_attention.cli import main
from topomodelx_attention.data import ComplexDataLoader
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.models import MODELS, build_model, get_spec
from topomodelx_attention.harness.prepare import (
    DatasetInfo,
    instantiate_transform,
    prepare_dataset,
    prune_keys,
)
from topomodelx_attention.harness.task_module import GraphTaskModule
from topomodelx_attention.harness.training import _data_pe_config, run_experiment

RUN = ["seeds=[0]", "trainer.max_epochs=1", "plot=false", "trainer.enable_progress_bar=false"]
TINY = [
    "dataset.n_graphs=6", "dataset.family.n_nodes_range=[10,30]", "dataset.split.train_prop=0.5",
    "model.params.hidden_channels=8", "model.params.n_layers=1",
]


def _overrides(name: str) -> list[str]:
    extra = ["model.params.pe_hidden_channels=4"] if name in ("gps", "graph_transformer") else []
    return [*TINY, *extra]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def prepared(cache):
    made = {}

    def get(name: str, task: str = "community_detection", *extra: str):
        if (name, task, extra) not in made:
            cfg = compose_config(
                [*_overrides(name), f"dataset.task={task}", *extra, *RUN, f"paths.cache_dir={cache}"],
                dataset="graphuniverse", model=name,
            )
            made[name, task, extra] = (cfg, prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.pe), cache))
        return made[name, task, extra]

    return get


def test_every_packaged_model_is_covered():
    assert set(ALL_MODELS) == set(MODELS)


# ----------------------------------------------------------------------------------------------
# vertex permutation of a lifted complex
# ----------------------------------------------------------------------------------------------
_ROWS = {"x_0", "pe_0", "batch_0", "node_id", "y", "incidence_1", "signed_incidence_1"}
_SQUARE = re.compile(r"^(adjacency|coadjacency|up_laplacian|down_laplacian|hodge_laplacian)_0$")
_HIGHER = re.compile(r"^(x|pe|batch|incidence|signed_incidence|adjacency|coadjacency|up_laplacian|down_laplacian|hodge_laplacian)_[1-9]$")


def _relabel_sparse(matrix, inverse, rows: bool, cols: bool):
    matrix = matrix.coalesce()
    index = matrix.indices().clone()
    if rows:
        index[0] = inverse[index[0]]
    if cols:
        index[1] = inverse[index[1]]
    return torch.sparse_coo_tensor(index, matrix.values(), matrix.shape).coalesce()


def permute_vertices(data, perm):
    """The same complex with vertex ``i`` of the result being vertex ``perm[i]`` of ``data``."""
    out = data.clone()
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(len(perm))
    for key in data.keys():
        value = data[key]
        if key in ("shape", "num_nodes") or (key not in _ROWS and _HIGHER.match(key) and not key.startswith("vertex_")):
            continue
        if key == "edge_index":
            out[key] = inverse[value]
        elif key == "incidence_0":
            out[key] = _relabel_sparse(value, inverse, rows=False, cols=True)
        elif _SQUARE.match(key):
            out[key] = _relabel_sparse(value, inverse, rows=True, cols=True)
        elif key in _ROWS or key.startswith("vertex_incidence_"):
            out[key] = _relabel_sparse(value, inverse, True, False) if value.is_sparse else value[perm]
        else:
            raise AssertionError(f"permute_vertices does not know how to permute {key!r}")
    return out


def _batch(items):
    return next(iter(ComplexDataLoader(items, batch_size=len(items))))


def _model_and_data(prepared, name):
    cfg, data = prepared(name)
    torch.manual_seed(0)
    model = build_model(name, cfg.model.params, data.info)
    complexes = [c.clone() for c in data.complexes]
    prune_keys(complexes, get_spec(name).keys(model, data.info))
    return cfg, data, model, complexes


def _empty_complex(cfg, data, name, model, like):
    lifting = instantiate_transform(cfg.model.lifting, **cfg.dataset.lifting_kwargs)
    pe = instantiate_transform(_data_pe_config(cfg.model.pe))
    graph = Data(x=torch.zeros(0, 15), edge_index=torch.zeros(2, 0, dtype=torch.long), y=torch.zeros(0, dtype=torch.long), num_nodes=0)
    empty = lifting(graph)
    empty = pe(empty) if pe is not None else empty
    prune_keys([empty], get_spec(name).keys(model, data.info))
    assert set(empty.keys()) == set(like.keys())
    return empty


@pytest.mark.parametrize("name", ALL_MODELS)
def test_node_outputs_permute_with_the_vertices(prepared, name):
    _, data, model, complexes = _model_and_data(prepared, name)
    assert data.info.task_level == "node" and data.info.out_channels == 20
    model.eval()
    generator = torch.Generator().manual_seed(1)
    for complex_ in complexes[:1]:
        n = complex_.num_cells(0)
        perm = torch.randperm(n, generator=generator)
        permuted = permute_vertices(complex_, perm)
        with torch.no_grad():
            out = model(_batch([complex_]))
            out_permuted = model(_batch([permuted]))
        assert out.shape == (n, 20)
        assert torch.allclose(out_permuted, out[perm], atol=1e-4), (out_permuted - out[perm]).abs().max()
        assert not torch.allclose(out[perm], out, atol=1e-4)  # the check can fail


@pytest.mark.parametrize("name", ALL_MODELS)
def test_batched_node_outputs_equal_per_graph_ones_and_empty_graphs_give_no_row(prepared, name):
    cfg, data, model, complexes = _model_and_data(prepared, name)
    model.eval()
    a, b = complexes[0], complexes[1]
    empty = _empty_complex(cfg, data, name, model, a)
    with torch.no_grad():
        single = torch.cat([model(_batch([a])), model(_batch([b]))])
        batched = model(_batch([a, empty, b]))
        alone = model(_batch([empty]))
    assert batched.shape == (a.num_cells(0) + b.num_cells(0), 20)
    assert torch.isfinite(batched).all()
    assert torch.allclose(batched, single, atol=1e-4), (batched - single).abs().max()
    assert alone.shape == (0, 20)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_gradients_of_the_node_loss_reach_the_vertex_features(prepared, name):
    cfg, data, model, complexes = _model_and_data(prepared, name)
    empty = _empty_complex(cfg, data, name, model, complexes[0])
    batch = _batch([complexes[0], empty, complexes[1], complexes[2]])
    batch.x_0 = batch.x_0.clone().requires_grad_()
    model.train()
    loss = F.cross_entropy(model(batch), batch.y)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(batch.x_0.grad).all() and batch.x_0.grad.abs().sum() > 0
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_outputs_must_match_the_task_level(prepared):
    cfg, data = prepared("gin")
    with pytest.raises(ValueError, match=r"node-level task: model.params.outputs must be 'node'"):
        build_model("gin", {**cfg.model.params, "outputs": "complex"}, data.info)
    with pytest.raises(ValueError, match=r"model\.params\.outputs must be one of"):
        build_model("gin", {**cfg.model.params, "outputs": "cells"}, data.info)
    ct_cfg, ct_data = prepared("cellular_transformer")
    readout = dict(ct_cfg.model.params.readout_options)
    two_ranks = {**ct_cfg.model.params, "readout_options": {**readout, "ranks": [0, 1]}}
    with pytest.raises(ValueError, match=r"readout_options\.ranks must be \[0\]"):
        build_model("cellular_transformer", two_ranks, ct_data.info)
    # the packaged graph-level order (pool, then the MLP) gives way to the per-vertex readout
    for before in (False, True):
        params = {**ct_cfg.model.params, "readout_options": {**readout, "before_pooling": before}}
        assert build_model("cellular_transformer", params, ct_data.info).model.outputs == (0,)
    graph_info = DatasetInfo("g", "classification", 3, [15, 15, 15], [None] * 3, None, "accuracy")
    with pytest.raises(ValueError, match=r"graph-level task: model\.params\.outputs must be 'complex'"):
        build_model("gin", {"outputs": "node"}, graph_info)
    assert build_model("gin", {"hidden_channels": 8}, graph_info).outputs == "complex"


# ----------------------------------------------------------------------------------------------
# the training module
# ----------------------------------------------------------------------------------------------
class _Rows(torch.nn.Module):
    def __init__(self, rows):
        super().__init__()
        self.rows = torch.nn.Parameter(rows)

    def forward(self, batch):
        return self.rows


def _node_info():
    return DatasetInfo("nodes", "classification", 3, [2], [None], None, "accuracy", task_level="node")


def test_node_loss_and_accuracy_are_means_over_the_vertices():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    y = torch.tensor([0, 1, 0, 2])
    module = GraphTaskModule(_Rows(logits), _node_info(), {})
    batch = Data(y=y, num_complexes=2)
    loss, prediction, target = module._loss_and_prediction(batch)
    assert torch.allclose(loss, F.cross_entropy(logits, y))
    module.metrics["val_metric"].update(prediction, target)
    assert float(module.metrics["val_metric"].compute()) == 0.5
    with pytest.raises(ValueError, match="one prediction row per vertex"):
        GraphTaskModule(_Rows(logits[:3]), _node_info(), {})._loss_and_prediction(batch)
    empty = GraphTaskModule(_Rows(torch.zeros(0, 3)), _node_info(), {})
    loss, _, _ = empty._loss_and_prediction(Data(y=torch.zeros(0, dtype=torch.long), num_complexes=1))
    assert float(loss.detach()) == 0.0 and loss.requires_grad  # no NaN mean over zero vertices
    loss.backward()


def test_mse_per_triangle_is_the_epoch_mse_over_the_total_target():
    info = DatasetInfo("t", "regression", 1, [2], [None], None, "mse", loss="mse", metrics=("mse_per_triangle",))
    module = GraphTaskModule(_Rows(torch.zeros(1, 1)), info, {})
    metric = module.extra_metrics["test_mse_per_triangle"]
    predictions = [torch.tensor([1.0, 2.0]), torch.tensor([7.0])]
    targets = [torch.tensor([2.0, 2.0]), torch.tensor([4.0])]
    for p, t in zip(predictions, targets):
        metric.update(p, t)
    expected = ((1.0 + 0.0 + 9.0) / 3) / 8.0
    assert math.isclose(float(metric.compute()), expected, rel_tol=1e-9)
    rows = torch.tensor([[3.0], [0.0]])
    loss, _, _ = GraphTaskModule(_Rows(rows), info, {})._loss_and_prediction(Data(y=torch.tensor([1.0, 2.0]), num_complexes=2))
    assert math.isclose(float(loss.detach()), (4.0 + 4.0) / 2)  # MSE, not the MAE of other regressions


# ----------------------------------------------------------------------------------------------
# one epoch of every packaged model on a tiny generated family, through the harness
# ----------------------------------------------------------------------------------------------
def _run(prepared, tmp_path, name, *args):
    cfg, _ = prepared(name, *args)  # the configuration of the tests above, data read from the cache
    return run_experiment(cfg, output_dir=tmp_path / name, verbose=False)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_every_model_trains_one_epoch_of_community_detection(prepared, tmp_path, name):
    result = _run(prepared, tmp_path, name)
    seed = result.seeds[0]
    assert result.metric == "accuracy" and seed.epochs == 1
    assert 0.0 <= seed.test <= 1.0 and 0.0 <= seed.val <= 1.0
    assert math.isfinite(seed.history[0]["train/loss"])


def test_triangle_counting_reports_mse_per_triangle(tmp_path, prepared):
    result = _run(prepared, tmp_path, "gin", "triangle_counting", "dataset.avg_degree=hi")
    seed = result.seeds[0]
    assert result.metric == "mse" and math.isfinite(seed.test)
    _, data = prepared("gin", "triangle_counting", "dataset.avg_degree=hi")
    assert data.info.task_level == "graph" and data.info.metrics == ("mse_per_triangle",)
    test_triangles = sum(float(data.complexes[int(i)].y) for i in data.fixed_split["test"])
    assert test_triangles > 0
    assert math.isclose(seed.test_metrics["mse_per_triangle"], seed.test / test_triangles, rel_tol=1e-4)
    with open(tmp_path / "gin" / "results.csv") as handle:
        row = next(csv.DictReader(handle))
    assert math.isclose(float(row["test_mse_per_triangle"]), seed.test_metrics["mse_per_triangle"], rel_tol=1e-5)
    assert "test mse_per_triangle" in (tmp_path / "gin" / "results.md").read_text()


def test_the_documented_command_trains_community_detection(cache, tmp_path, capsys):
    out = tmp_path / "cli"
    status = main([
        "train", "--dataset", "graphuniverse", "--model", "gin", "--max-epochs", "1", "--seeds", "0",
        "--cache-dir", str(cache), "--output-dir", str(out), "--no-progress-bar",
        "dataset.task=community_detection", "dataset.homophily=mid", "dataset.avg_degree=hi",
        "dataset.power_law=lo", *TINY, "plot=false",
    ])
    assert status == 0
    assert "**graphuniverse / gin**" in capsys.readouterr().out
    with open(out / "results.csv") as handle:
        assert 0.0 <= float(next(csv.DictReader(handle))["test_accuracy"]) <= 1.0
