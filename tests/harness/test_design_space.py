"""``benchmarks/design_space.py --best-of``: each model's best trial, re-run longer, and its table.

Synthetic ``runs.jsonl`` rows only: nothing is trained here.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import load_benchmark

ds = load_benchmark("design_space")


def _row(dataset, model, config, seed, val, test=None, *, metric="accuracy", epochs=10, loss=1.0):
    return {
        "key": ds.run_key(dataset, model, config, seed), "dataset": dataset, "model": model,
        "config": config, "seed": seed, "overrides": [], "metric": metric, "val": val,
        "test": val if test is None else test, "best_epoch": epochs - 1, "epochs": epochs,
        "params": 1000, "s_per_epoch": 0.1, "seconds": 1.0, "train_loss": [2.0, loss],
        "train_acc": [0.5, 0.6], "val_curve": [val, val], "wall": [0.1, 0.2], "chance": None,
        "first_epoch_loss": 2.0, "epoch_below_chance": None,
    }


def _rows(dataset, metric, values):
    """Rows of ``values[model] = {config: val}`` for seeds 1 and 2 (same value)."""
    return [
        _row(dataset, model, config, seed, val, metric=metric)
        for model, configs in values.items()
        for config, val in configs.items()
        for seed in (1, 2)
    ]


def _protocol():
    acc = {
        "cellular_transformer": {"packaged": 0.99, "packaged_trial_0": 0.6, "packaged_trial_1": 0.7},
        **{m: {"trial_0": 0.5, "trial_1": 0.4} for m in ds.BASELINES},
    }
    mae = {
        "cellular_transformer": {"packaged_trial_0": 0.9, "packaged_trial_1": 0.8},
        **{m: {"trial_0": 0.5, "trial_1": 0.3} for m in ds.BASELINES},
    }
    return _rows("MUTAG", "accuracy", acc) + _rows("ZINC", "mae", mae)


def test_best_trials_follow_the_metric_and_skip_design_variants():
    chosen = ds.best_trials(_protocol(), ["MUTAG", "ZINC"])
    # the packaged point (val 0.99) is not a trial: the CT's best trial is trial 1
    assert chosen[("MUTAG", "cellular_transformer")] == "packaged_trial_1"
    assert chosen[("MUTAG", "gps")] == "trial_0"  # accuracy: higher is better
    assert chosen[("ZINC", "gps")] == "trial_1"  # MAE: lower is better
    assert chosen[("ZINC", "cellular_transformer")] == "packaged_trial_1"
    assert len(chosen) == 2 * (1 + len(ds.BASELINES))


def test_best_trials_ignore_a_trial_not_every_baseline_finished():
    rows = [*_protocol(), _row("MUTAG", "gps", "trial_2", 1, 0.95)]  # only GPS ran trial 2
    assert ds.best_trials(rows, ["MUTAG", "ZINC"])[("MUTAG", "gps")] == "trial_0"


def test_longer_training_table_ranks_the_long_runs():
    short = _protocol()
    long = [
        _row("ZINC", "cellular_transformer", "packaged_trial_1", 1, 0.4, metric="mae", epochs=50, loss=0.2),
        _row("ZINC", "gps", "trial_1", 1, 0.45, metric="mae", epochs=50, loss=0.1),
    ]
    long[0].update(wall=[1.0, 2.0], val_curve=[0.9, 0.4])  # slower: no epoch within GPS's 0.2 s
    long[1].update(wall=[0.1, 0.2], val_curve=[0.6, 0.45])
    extra = _row("ZINC", "cellular_transformer", "packaged", 1, 0.5, metric="mae", epochs=50)
    extra.update(wall=[1.0, 2.0])
    text = ds.longer_training_table([*long, extra], short, ["MUTAG", "ZINC"])
    assert "at 50 epochs" in text
    lines = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| ZINC")}
    assert set(lines) == {"cellular_transformer", "gps"}  # only models with long runs
    packaged = [line for line in text.splitlines() if "| packaged |" in line]
    assert len(packaged) == 1 and " | 3 | " in packaged[0]  # the non-trial CT row, ranked 3rd of 3
    lines["cellular_transformer"] = next(line for line in text.splitlines() if "packaged_trial_1" in line)
    assert " | 1 | " in lines["cellular_transformer"]  # 0.4 < 0.45 MAE: ranked first
    assert " | 2 | " in lines["gps"]
    assert "0.800 ± 0.000 (0.800)" in lines["cellular_transformer"]  # the 10-epoch entry
    assert "0.400 ± 0.000 (0.400)" in lines["cellular_transformer"]
    assert "1.000 → 0.200" in lines["cellular_transformer"]  # final training loss, 10 → 50
    assert lines["gps"].endswith("| 0 | 0.450 |")  # T = GPS's whole run; its best MAE by then
    assert lines["cellular_transformer"].endswith("| 0 | – |")
    assert not any(line.startswith("| MUTAG") for line in text.splitlines())


def test_best_of_refuses_its_own_output(tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(json.dumps(r) for r in _protocol()) + "\n")
    with pytest.raises(SystemExit):
        ds.main(["--best-of", str(runs), "--out", str(tmp_path), "--table"])
    out = tmp_path / "long"
    ds.main(["--best-of", str(runs), "--out", str(out), "--table", "--datasets", "MUTAG", "ZINC"])
    assert (out / "tables.md").read_text().startswith("### Longer training")


def _args(**changes):
    import argparse

    values = {"models": ["cellular_transformer", *ds.BASELINES], "configs": None, "seeds": [1],
              "datasets": ["MUTAG", "ZINC"], "epochs": 50}
    values.update(changes)
    return argparse.Namespace(**values)


def test_plan_tasks_best_of_runs_the_chosen_trials_or_the_configs_named(tmp_path):
    chosen = ds.best_trials(_protocol(), ["MUTAG", "ZINC"])
    tasks = ds.plan_tasks(_args(), set(), chosen, tmp_path, tmp_path)
    assert {(t["dataset"], t["model"], t["config"]) for t in tasks} == {(d, m, c) for (d, m), c in chosen.items()}
    assert all(t["epochs"] == 50 for t in tasks)
    named = ds.plan_tasks(_args(models=["cellular_transformer"], configs=["packaged"]), set(), chosen, tmp_path, tmp_path)
    assert [(t["dataset"], t["config"]) for t in named] == [("MUTAG", "packaged"), ("ZINC", "packaged")]
    done = {ds.run_key("MUTAG", "cellular_transformer", "packaged", 1)}
    rest = ds.plan_tasks(_args(models=["cellular_transformer"], configs=["packaged"]), done, chosen, tmp_path, tmp_path)
    assert [t["dataset"] for t in rest] == ["ZINC"]  # resumable: finished runs are skipped
