"""End to end through the command line: 1 epoch on a handful of MUTAG graphs."""

import csv
import math
import subprocess
import sys

import pytest
import torch
from torch_geometric.loader import DataLoader

from topomodelx_attention.cli import main
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.prepare import prepare_dataset
from topomodelx_attention.harness.task_module import (
    cosine_warmup_lambda,
    decay_epochs,
    max_time_seconds,
)
from topomodelx_attention.harness.training import (
    ResampleNodeIds,
    _data_pe_config,
    _ddp_strategy,
    _training_augment,
    run_experiment,
    unused_parameters,
)


@pytest.mark.parametrize("model", ["cellular_transformer", "gin"])
def test_train_command_writes_results(tmp_path, capsys, model):
    out = tmp_path / "out"
    status = main([
        "train", "--dataset", "MUTAG", "--model", model, "--max-epochs", "1", "--seeds", "1", "2",
        "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out), "--no-progress-bar",
        "dataset.max_graphs=16", "model.params.hidden_channels=8",
    ])
    assert status == 0
    printed = capsys.readouterr().out
    assert f"**MUTAG / {model}**" in printed and "| **mean ± std** |" in printed
    for name in ("results.md", "results.csv", "summary.csv", "curves.png", "time_to_accuracy.png", "config.yaml"):
        assert (out / name).is_file(), name
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["seed"] for r in rows] == ["1", "2"]
    assert all(0.0 <= float(r["test_accuracy"]) <= 1.0 for r in rows)
    assert (out / "seed_1" / "logs" / "metrics.csv").is_file()  # CSV logger
    assert list((out / "seed_1" / "checkpoints").glob("best-*.ckpt"))  # best-validation checkpoint


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "CORA"], "unknown dataset 'CORA'"),
        (["--model", "nope"], "unknown model 'nope'"),
        (["--dataset", "GCB"], "dataset.data_dir"),
        (["--dataset", "ZINC", "--data-dir", "/nonexistent/zinc"], "smiles_score.csv"),
    ],
)
def test_train_command_errors(tmp_path, capsys, args, message):
    status = main(["train", *args, "--cache-dir", str(tmp_path), "--output-dir", str(tmp_path / "o")])
    assert status == 2
    assert message in capsys.readouterr().err


def test_cosine_warmup_schedule():
    factor = cosine_warmup_lambda(4, 14)
    assert [factor(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(4) == 1.0
    assert math.isclose(factor(9), 0.5)
    assert factor(14) == 0.0 and factor(20) == 0.0


def _cfg(tmp_path, model, *overrides):
    return compose_config(
        ["seeds=[1]", "dataset.max_graphs=12", "model.params.hidden_channels=8",
         f"paths.cache_dir={tmp_path / 'cache'}", "trainer.enable_progress_bar=false", *overrides],
        dataset="MUTAG", model=model,
    )


@pytest.mark.parametrize("model", ["gine", "gps", "graph_transformer"])
def test_new_baselines_train_one_epoch_and_write_the_plots(tmp_path, model):
    extra = [] if model == "gine" else ["model.params.pe_hidden_channels=4"]
    result = run_experiment(_cfg(tmp_path, model, "trainer.max_epochs=1", *extra), tmp_path / "out", verbose=False)
    (seed,) = result.seeds
    assert seed.epochs == 1 and not seed.stopped_by_time and result.max_time is None
    assert 0.0 <= seed.test <= 1.0
    row = seed.history[0]
    assert 0 < row["epoch_seconds"] <= row["wall_seconds"] <= seed.seconds
    assert (tmp_path / "out" / "time_to_accuracy.png").stat().st_size > 0


def test_max_time_stops_training_and_is_recorded(tmp_path):
    cfg = _cfg(tmp_path, "gin", "trainer.max_epochs=-1", "trainer.max_time=0.3", "trainer.early_stopping_patience=null")
    result = run_experiment(cfg, tmp_path / "out", verbose=False)
    (seed,) = result.seeds
    assert seed.stopped_by_time and result.max_time == 0.3
    assert 1 <= seed.epochs < 1000 and seed.history[-1]["wall_seconds"] < 5.0
    with open(tmp_path / "out" / "results.csv") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["budget_s"] == "0.3" and row["stopped_by_time"] == "1" and float(row["s_per_epoch"]) > 0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, None), (90, 90.0), ("00:00:01:30", 90.0), ({"minutes": 1.5}, 90.0)],
)
def test_max_time_formats(value, seconds):
    assert max_time_seconds(value) == seconds


@pytest.mark.parametrize("value", [0, -1, "1:30", {"fortnights": 1}, True])
def test_bad_max_time_raises(value):
    with pytest.raises(ValueError, match="max_time"):
        max_time_seconds(value)


# factor after epoch e (one step per epoch): 0.5 (1 + cos(pi e / horizon)), flat after the horizon
COS_4 = [(2 + 2**0.5) / 4, 0.5, (2 - 2**0.5) / 4, 0.0]


@pytest.mark.parametrize(("decay", "expected"), [(None, COS_4), (2, [0.5, 0.0, 0.0, 0.0])])
def test_decay_epochs_sets_the_cosine_horizon(tmp_path, decay, expected):
    """Cosine over trainer.max_epochs by default; over optimizer.decay_epochs when set, then flat."""
    cfg = _cfg(
        tmp_path, "gin", "trainer.max_epochs=4", "trainer.early_stopping_patience=null",
        "optimizer.warmup_epochs=0", "optimizer.lr=0.01", f"optimizer.decay_epochs={decay or 'null'}",
        "dataset.dataloader.batch_size=64",
    )
    (seed,) = run_experiment(cfg, tmp_path / "out", verbose=False).seeds
    assert [row["lr"] for row in seed.history] == pytest.approx([0.01 * f for f in expected], abs=1e-12)


@pytest.mark.parametrize("value", [0, 5, "ten", True, float("inf")])
def test_bad_decay_epochs_raises(value):
    with pytest.raises(ValueError, match="decay_epochs"):
        decay_epochs(value, warmup_epochs=5)


def test_time_budget_schedule_decays_with_elapsed_time():
    clock = iter([0.0, 0.5, 1.0, 2.0])
    factor = cosine_warmup_lambda(0, 1, progress=lambda step: next(clock))
    assert [factor(s) for s in range(4)] == pytest.approx([1.0, 0.5, 0.0, 0.0])


def test_results_module_imports_no_other_harness_module():
    # results.py loaded on its own (without the package __init__): training imports results,
    # never the reverse, so there is no import cycle
    code = (
        "import importlib.util, sys; import topomodelx_attention.data; "
        "spec = importlib.util.spec_from_file_location('results_alone', sys.argv[1]); "
        "module = importlib.util.module_from_spec(spec); sys.modules['results_alone'] = module; "
        "spec.loader.exec_module(module); "
        "assert not [m for m in sys.modules if m.startswith('topomodelx_attention.harness')]; "
        "assert module.ExperimentResult and module.write_results"
    )
    from topomodelx_attention.harness import results

    subprocess.run([sys.executable, "-c", code, results.__file__], check=True)


def test_compile_option_compiles_the_model_with_dynamic_shapes(tmp_path, monkeypatch):
    calls = []

    def fake_compile(model, **kwargs):
        calls.append(kwargs)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    run_experiment(_cfg(tmp_path, "gin", "trainer.max_epochs=1", "test=false"), tmp_path / "a", verbose=False)
    assert calls == []
    run_experiment(_cfg(tmp_path, "gin", "trainer.max_epochs=1", "test=false", "compile=true"), tmp_path / "b",
                   verbose=False)
    assert calls == [{"dynamic": True}]


def test_orf_identifiers_are_resampled_in_training_and_fixed_in_the_data(tmp_path):
    orf = "topomodelx_attention.transforms.OrthogonalRandomNodeId"
    cfg = _cfg(tmp_path, "tokengt", "trainer.max_epochs=1", f"model.pe._target_={orf}", "+model.pe.resample=true")
    assert _data_pe_config(cfg.model.pe)["resample"] is False
    augment = _training_augment(cfg)
    assert isinstance(augment, ResampleNodeIds)
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.pe), tmp_path / "cache")
    again = prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.pe), tmp_path / "c2")
    assert torch.equal(prepared.complexes[0].node_id, again.complexes[0].node_id)  # fixed for evaluation
    batch = next(iter(DataLoader(prepared.complexes[:4], batch_size=4)))
    before = batch.node_id.clone()
    first, second = augment(batch), augment(batch)
    assert torch.equal(batch.node_id, before)  # the input batch is not modified
    assert first.node_id.shape == before.shape and not torch.allclose(first.node_id, second.node_id)
    for k in range(4):  # per complex: orthonormal rows (n <= dim) or unit rows
        ids = first.node_id[batch.batch_0 == k]
        assert torch.allclose(ids.norm(dim=1), torch.ones(len(ids)), atol=1e-5)
    result = run_experiment(cfg, tmp_path / "out", verbose=False)
    assert result.seeds[0].epochs == 1


def test_ddp_asks_for_unused_parameter_search_only_when_a_parameter_gets_no_gradient():
    class Partial(torch.nn.Module):
        def __init__(self, used_only):
            super().__init__()
            self.used, self.spare = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
            self.used_only = used_only

        def forward(self, batch):
            out = self.used(batch)
            return out if self.used_only else out + self.spare(batch)

    loader = [torch.ones(3, 2)]
    assert unused_parameters(Partial(True), loader[0]) == ["spare.weight", "spare.bias"]
    with pytest.warns(UserWarning, match="no gradient"):
        assert _ddp_strategy("ddp", Partial(True), loader) == "ddp_find_unused_parameters_true"
    assert _ddp_strategy("ddp", Partial(False), loader) == "ddp"
    assert _ddp_strategy("auto", Partial(True), loader) == "auto"


def _diverging_run(tmp_path, capsys, *overrides):
    out = tmp_path / "out"
    status = main([
        "train", "--dataset", "MUTAG", "--model", "gin", "--max-epochs", "2", "--seeds", "1", "2",
        "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out), "--no-progress-bar",
        "dataset.max_graphs=16", "model.params.hidden_channels=8", *overrides,
    ])
    captured = capsys.readouterr()
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    return status, captured, rows, (out / "results.md").read_text()


def test_a_diverged_seed_is_reported_as_failed_never_as_a_result(tmp_path, capsys):
    status, captured, rows, table = _diverging_run(tmp_path, capsys, "optimizer.lr=1e30")
    assert status == 1
    assert [r["val_accuracy"] for r in rows] == ["", ""] and [r["test_accuracy"] for r in rows] == ["", ""]
    assert all(r["failure"].startswith("diverged: the training loss is") for r in rows)
    assert "**n/a**" in table and "(0 finished)" in table
    errors = captured.err.strip().splitlines()
    assert len(errors) == 2 and all(
        line.startswith(f"topomodelx-attention train: error: seed {s} diverged:") and "optimizer.lr" in line
        for s, line in zip((1, 2), errors)
    ), captured.err
    assert "Traceback" not in captured.err


def test_only_the_finished_seeds_make_the_mean(tmp_path, capsys, monkeypatch):
    from topomodelx_attention.harness import training

    step = training.GraphTaskModule._step

    def nan_in_the_second_epoch_of_seed_2(self, batch, stage):
        loss = step(self, batch, stage)
        if stage == "train" and self.current_epoch == 1 and torch.initial_seed() == 2:
            return loss * float("nan")
        return loss

    monkeypatch.setattr(training.GraphTaskModule, "_step", nan_in_the_second_epoch_of_seed_2)
    status, _, rows, table = _diverging_run(tmp_path, capsys)
    assert status == 1
    assert rows[0]["failure"] == "" and 0.0 <= float(rows[0]["test_accuracy"]) <= 1.0
    assert rows[1]["failure"].startswith("diverged: the training loss is nan at epoch 1") and rows[1]["test_accuracy"] == ""
    assert "(1 finished)" in table
    seed_1 = 100 * float(rows[0]["test_accuracy"])
    assert f"**{seed_1:.2f}**" in table  # the mean of one finished seed is that seed's value


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("optimizer.lr=inf", "optimizer.lr"),
        ("optimizer.lr=nan", "optimizer.lr"),
        ("optimizer.lr=0", "optimizer.lr"),
        ("optimizer.weight_decay=-1", "optimizer.weight_decay"),
        ("optimizer.weight_decay=inf", "optimizer.weight_decay"),
        ("trainer.gradient_clip_val=nan", "trainer.gradient_clip_val"),
        ("trainer.gradient_clip_val=-1", "trainer.gradient_clip_val"),
        ("optimizer.warmup_epochs=-2", "optimizer.warmup_epochs"),
        ("optimizer.warmup_epochs=inf", "optimizer.warmup_epochs"),
        ("optimizer.min_lr_ratio=1.5", "optimizer.min_lr_ratio"),
        ("optimizer.betas=[0.9,1.0]", "optimizer.betas"),
        ("optimizer.eps=0", "optimizer.eps"),
        ("model.params.dropout=1.0", "model.params.dropout"),
        ("model.params.attention_dropout=-0.5", "model.params.attention_dropout"),
        ("seeds=[3,1,3]", "seeds"),
        ("dataset.dataloader.num_workers=100000", "dataset.dataloader.num_workers"),
    ],
)
def test_out_of_range_hyperparameters_are_refused_before_any_work(tmp_path, capsys, override, key):
    status = main(["train", "--dataset", "MUTAG", "--cache-dir", str(tmp_path), "--output-dir", str(tmp_path / "o"), override])
    assert status == 2
    err = capsys.readouterr().err
    assert f"error: invalid configuration: {key}=" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("override", ["model.params.hidden_channels=100000000", "model.params.n_layers=100000000"])
def test_a_model_above_the_parameter_budget_is_refused_before_it_is_built(tmp_path, capsys, override):
    status = main(["train", "--dataset", "MUTAG", "--cache-dir", str(tmp_path), "--output-dir", str(tmp_path / "o"), override])
    assert status == 2
    err = capsys.readouterr().err
    assert "above the budget" in err and "MODEL_MEMORY_BUDGET" in err and override.split("=")[0] in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()
