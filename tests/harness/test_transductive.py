"""Transductive node classification on one complex: the heterophilous benchmark's files through the harness."""

from __future__ import annotations

import csv

import pytest
import torch

from tests.datasets.heterophilous_files import write_tiny
from topomodelx_attention.cli import main
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.loaders import FullBatch
from topomodelx_attention.harness.models import build_model, get_spec
from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys
from topomodelx_attention.harness.task_module import GraphTaskModule
from topomodelx_attention.harness.training import _data_pe_config

SMALL = ["model.params.hidden_channels=8", "model.params.n_layers=1"]


def _small(model: str) -> list[str]:
    return [*SMALL, "model.params.pe_hidden_channels=4"] if model == "gps" else SMALL


def _train(tmp_path, dataset: str, model: str, *extra: str) -> tuple[int, list[dict[str, str]], list[dict[str, str]]]:
    out = tmp_path / f"out-{dataset}-{model}"
    status = main([
        "train", "--dataset", dataset, "--data-dir", str(tmp_path / "data"), "--model", model,
        "--max-epochs", "2", "--seeds", "0", "1", "--cache-dir", str(tmp_path / "cache"),
        "--output-dir", str(out), "--no-progress-bar", "plot=false", *_small(model), *extra,
    ])
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    with open(out / "summary.csv") as handle:
        summary = list(csv.DictReader(handle))
    return status, rows, summary


@pytest.mark.parametrize("model", ["cellular_transformer", "mlp", "gps"])
def test_two_classes_report_roc_auc_and_more_classes_accuracy_for_every_split_seed(tmp_path, model):
    write_tiny(tmp_path / "data", "minesweeper", classes=2)
    write_tiny(tmp_path / "data", "chameleon_filtered", classes=3)
    outputs = ["+model.params.outputs=node"] if model == "cellular_transformer" else []
    for dataset, metric in (("minesweeper", "roc_auc"), ("chameleon_filtered", "accuracy")):
        status, rows, summary = _train(tmp_path, dataset, model, *outputs)
        assert status == 0
        assert [r["seed"] for r in rows] == ["0", "1"] and all(r["failure"] == "" for r in rows)
        for row in rows:
            assert 0.0 <= float(row[f"val_{metric}"]) <= 1.0 and 0.0 <= float(row[f"test_{metric}"]) <= 1.0
        assert summary[0]["metric"].startswith(metric) and " ± " in summary[0]["test"]


def test_a_seed_is_a_split_index_and_one_beyond_the_splits_is_refused(tmp_path):
    write_tiny(tmp_path / "data", "actor", classes=3, splits=4)
    cfg = compose_config(
        [f"dataset.data_dir={tmp_path / 'data'}", f"paths.cache_dir={tmp_path / 'cache'}", "seeds=[0,4]", *SMALL],
        dataset="actor", model="mlp",
    )
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, None, tmp_path / "cache")
    assert prepared.num_splits == 4 and prepared.info.task_level == "transductive"
    train, _, test = prepared.split(3)
    assert torch.equal(train[0].node_mask, torch.from_numpy(prepared.masks["train"][3]))
    assert not bool((train[0].node_mask & test[0].node_mask).any())
    with pytest.raises(ValueError, match=r"split indices 0\.\.3, got 4"):
        prepared.split(4)
    from topomodelx_attention.harness.training import run_experiment

    with pytest.raises(ValueError, match=r"seeds must be split indices 0\.\.3, got \[4\]"):
        run_experiment(cfg, output_dir=tmp_path / "out", verbose=False)


def test_a_random_split_of_a_transductive_task_is_refused(tmp_path):
    write_tiny(tmp_path / "data", "actor", classes=3)
    cfg = compose_config([f"dataset.data_dir={tmp_path / 'data'}", "dataset.split.type=random"], dataset="actor", model="mlp")
    with pytest.raises(ValueError, match=r"dataset\.split\.type must be fixed_masks"):
        prepare_dataset(cfg.dataset, cfg.model.lifting, None, tmp_path / "cache")


@pytest.mark.parametrize("model", ["mlp", "cellular_transformer"])
def test_the_training_loss_sees_only_the_training_vertices(tmp_path, model):
    write_tiny(tmp_path / "data", "chameleon_filtered", classes=3)
    cfg = compose_config([f"dataset.data_dir={tmp_path / 'data'}", *SMALL], dataset="chameleon_filtered", model=model)
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.pe), tmp_path / "cache")
    torch.manual_seed(0)
    net = build_model(model, cfg.model.params, prepared.info).eval()
    prune_keys(prepared.complexes, get_spec(model).keys(net, prepared.info))
    module = GraphTaskModule(net, prepared.info, cfg.optimizer)
    train, _, _ = prepared.split(2)
    batch = next(iter(FullBatch(train)))
    loss, prediction, _ = module._loss_and_prediction(batch)
    mask = batch.node_mask
    assert prediction.shape[0] == int(mask.sum())
    flipped = batch.clone()
    flipped.y = torch.where(mask, batch.y, (batch.y + 1) % 3)  # every label outside the training part changed
    assert torch.equal(module._loss_and_prediction(flipped)[0], loss)
    changed = batch.clone()
    changed.y = torch.where(mask, (batch.y + 1) % 3, batch.y)
    assert not torch.equal(module._loss_and_prediction(changed)[0], loss)


def test_a_diverged_split_is_reported_as_failed_never_as_a_result(tmp_path, capsys):
    write_tiny(tmp_path / "data", "minesweeper", classes=2)
    out = tmp_path / "out"
    status = main([
        "train", "--dataset", "minesweeper", "--data-dir", str(tmp_path / "data"), "--model", "mlp",
        "--max-epochs", "2", "--seeds", "0", "1", "--cache-dir", str(tmp_path / "cache"),
        "--output-dir", str(out), "--no-progress-bar", "plot=false", "optimizer.lr=1e30", *SMALL,
    ])
    assert status == 1
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["test_roc_auc"] for r in rows] == ["", ""]
    assert all(r["failure"].startswith("diverged:") for r in rows)
    assert "(0 finished)" in (out / "results.md").read_text()
