"""Transductive tasks on sampled sub-complexes (``dataset.sampler``): the harness's loaders, losses and refusals."""

from __future__ import annotations

import csv

import pytest
import torch
from omegaconf import OmegaConf

from tests.datasets.heterophilous_files import write_tiny
from topomodelx_attention.cli import main
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.loaders import FullBatch, sampled_loaders, sampler_options
from topomodelx_attention.harness.models import build_model, get_spec
from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys
from topomodelx_attention.harness.task_module import GraphTaskModule
from topomodelx_attention.harness.training import _data_pe_config

SMALL = ["model.params.hidden_channels=8", "model.params.n_layers=2", "model.params.attention_dropout=0.0"]


def _prepared(tmp_path, model: str = "cellular_transformer"):
    write_tiny(tmp_path / "data", "minesweeper", classes=2, n=120)
    cfg = compose_config(
        [f"dataset.data_dir={tmp_path / 'data'}", *SMALL, "+model.params.outputs=node"],
        dataset="minesweeper", model=model,
    )
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.pe), tmp_path / "cache")
    torch.manual_seed(0)
    net = build_model(model, cfg.model.params, prepared.info).eval()
    prune_keys(prepared.complexes, get_spec(model).keys(net, prepared.info))
    return cfg, prepared, net


def test_evaluation_in_chunks_equals_the_full_batch(tmp_path):
    cfg, prepared, net = _prepared(tmp_path)
    module = GraphTaskModule(net, prepared.info, cfg.optimizer)
    parts = prepared.split(1)
    options = sampler_options(OmegaConf.create({"sampler": {"batch_size": 9}}), "transductive")
    loaders = sampled_loaders(options, prepared.complexes[0], parts, net, 0, {})
    whole = sum(prepared.complexes[0].cell_counts())
    with torch.no_grad():
        for part, loader in zip(parts[1:], loaders[1:]):  # validation and test: chunks in vertex order
            _, full, target = module._loss_and_prediction(next(iter(FullBatch(part))))
            chunks = [module._loss_and_prediction(sub) for sub in loader]
            assert len(chunks) == -(-int(part[0].node_mask.sum()) // 9) > 1
            assert min(sum(sub.cell_counts()) for sub in loader) < whole
            torch.testing.assert_close(torch.cat([c[1] for c in chunks]), full, rtol=0, atol=1e-6)
            assert torch.equal(torch.cat([c[2] for c in chunks]), target)


def test_a_sampled_training_batch_reads_the_loss_of_its_targets_only(tmp_path):
    cfg, prepared, net = _prepared(tmp_path)
    module = GraphTaskModule(net, prepared.info, cfg.optimizer)
    options = sampler_options(OmegaConf.create({"sampler": {"batch_size": 5}}), "transductive")
    train_loader = sampled_loaders(options, prepared.complexes[0], prepared.split(0), net, 0, {})[0]
    sub = next(iter(train_loader))
    loss, prediction, _ = module._loss_and_prediction(sub)
    assert prediction.shape[0] == int(sub.node_mask.sum()) == 5 < sub.num_cells(0)
    others = sub.clone()
    others.y = torch.where(sub.node_mask, sub.y, 1 - sub.y)  # every label but the targets' flipped
    assert torch.equal(module._loss_and_prediction(others)[0], loss)
    targets = sub.clone()
    targets.y = torch.where(sub.node_mask, 1 - sub.y, sub.y)
    assert not torch.equal(module._loss_and_prediction(targets)[0], loss)


def test_the_cli_trains_on_sampled_batches(tmp_path):
    write_tiny(tmp_path / "data", "minesweeper", classes=2, n=80)
    out = tmp_path / "out"
    status = main([
        "train", "--dataset", "minesweeper", "--data-dir", str(tmp_path / "data"), "--model",
        "cellular_transformer", "--max-epochs", "2", "--seeds", "0", "--cache-dir", str(tmp_path / "cache"),
        "--output-dir", str(out), "--no-progress-bar", "plot=false", *SMALL,
        "dataset.sampler={batch_size: 16, num_neighbors: [4, -1]}",
    ])
    assert status == 0
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0]["failure"] == "" and 0.0 <= float(rows[0]["test_roc_auc"]) <= 1.0
    with open(out / "seed_0" / "logs" / "metrics.csv") as handle:
        steps = [int(r["step"]) for r in csv.DictReader(handle) if r.get("train/loss")]
    assert max(steps) + 1 == 2 * -(-40 // 16)  # 40 training vertices, 3 batches per epoch


@pytest.mark.parametrize(
    ("spec", "level", "message"),
    [
        ({"batch_size": 8}, "graph", "task_level=transductive"),
        ({"batch": 8}, "transductive", r"unknown keys \['batch'\]"),
        ({"batch_size": 0}, "transductive", "batch_size=0"),
        ({"hops": -2}, "transductive", "hops=-2"),
        ({"num_neighbors": [3, -4]}, "transductive", "num_neighbors"),
        (7, "transductive", "mapping"),
    ],
)
def test_bad_sampler_options_are_refused(spec, level, message):
    with pytest.raises(ValueError, match=message):
        sampler_options({"sampler": spec}, level)


def test_a_fan_out_list_of_the_wrong_length_names_the_option(tmp_path):
    _, prepared, net = _prepared(tmp_path)
    options = sampler_options({"sampler": {"num_neighbors": [5]}}, "transductive")
    with pytest.raises(ValueError, match=r"dataset\.sampler: num_neighbors .* 2 in all"):
        sampled_loaders(options, prepared.complexes[0], prepared.split(0), net, 0, {})


def test_a_sampler_on_a_graph_level_task_is_refused_before_training(tmp_path):
    from topomodelx_attention.harness.training import run_experiment

    cfg = compose_config(
        ["+dataset.sampler={batch_size: 8}", "dataset.max_graphs=8", f"paths.cache_dir={tmp_path / 'cache'}"],
        dataset="MUTAG", model="mlp",
    )
    with pytest.raises(ValueError, match="task_level=transductive"):
        run_experiment(cfg, output_dir=tmp_path / "out", verbose=False)
    assert not (tmp_path / "out" / "seed_1").exists()
