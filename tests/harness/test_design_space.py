"""``benchmarks/design_space.py --best-of``: each model's best trial, re-run longer, and its table.

Synthetic ``runs.jsonl`` rows only, the script run as a command (``--list``, ``--table``):
nothing is trained here.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_benchmark

BASELINES = ("gps", "gine", "gin", "graph_transformer", "cwn")
"""The script's baselines: every one gets the same trials as the packaged CT."""


def run_key(dataset, model, config, seed):
    """The key of a run in ``runs.jsonl``."""
    return f"{dataset}|{model}|{config}|{seed}"


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _listed(*args):
    """The runs ``--list`` plans: ``{(dataset, model): [(config, epochs), ...]}`` and the keys in order."""
    run = run_benchmark("design_space", "--list", *args)
    assert run.returncode == 0, run.stderr
    keys = [line.split(" (")[0] for line in run.stdout.splitlines() if line.strip()]
    planned = {}
    for line in run.stdout.splitlines():
        key, epochs = line.split(" (")
        dataset, model, config, _ = key.split("|")
        planned.setdefault((dataset, model), []).append((config, int(epochs.split()[0])))
    return planned, keys


def _row(dataset, model, config, seed, val, test=None, *, metric="accuracy", epochs=10, loss=1.0):
    return {
        "key": run_key(dataset, model, config, seed), "dataset": dataset, "model": model,
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
        **{m: {"trial_0": 0.5, "trial_1": 0.4} for m in BASELINES},
    }
    mae = {
        "cellular_transformer": {"packaged_trial_0": 0.9, "packaged_trial_1": 0.8},
        **{m: {"trial_0": 0.5, "trial_1": 0.3} for m in BASELINES},
    }
    return _rows("MUTAG", "accuracy", acc) + _rows("ZINC", "mae", mae)


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    """Each model's trial that ``--best-of`` re-runs for 50 epochs, per data set (``--list``)."""
    root = tmp_path_factory.mktemp("best_of")
    extra = _row("MUTAG", "gps", "trial_2", 1, 0.95)  # only GPS ran trial 2
    short = _write(root / "short" / "runs.jsonl", [*_protocol(), extra])
    planned, _ = _listed("--best-of", short, "--out", root / "long", "--datasets", "MUTAG", "ZINC", "--epochs", "50")
    assert all(len(runs) == 1 for runs in planned.values()), planned  # one trial per data set and model
    assert {epochs for runs in planned.values() for _, epochs in runs} == {50}
    return {pair: runs[0][0] for pair, runs in planned.items()}


def test_best_trials_follow_the_metric_and_skip_design_variants(chosen):
    # the packaged point (val 0.99) is not a trial: the CT's best trial is trial 1
    assert chosen[("MUTAG", "cellular_transformer")] == "packaged_trial_1"
    assert chosen[("MUTAG", "gin")] == "trial_0"  # accuracy: higher is better
    assert chosen[("ZINC", "gps")] == "trial_1"  # MAE: lower is better
    assert chosen[("ZINC", "cellular_transformer")] == "packaged_trial_1"
    assert len(chosen) == 2 * (1 + len(BASELINES))


def test_best_trials_ignore_a_trial_not_every_baseline_finished(chosen):
    assert chosen[("MUTAG", "gps")] == "trial_0"  # not trial 2 (0.95), which only GPS ran


def _longer_training_rows():
    long = [
        _row("ZINC", "cellular_transformer", "packaged_trial_1", 1, 0.4, metric="mae", epochs=50, loss=0.2),
        _row("ZINC", "gps", "trial_1", 1, 0.45, metric="mae", epochs=50, loss=0.1),
    ]
    long[0].update(wall=[1.0, 2.0], val_curve=[0.9, 0.4])  # slower: no epoch within GPS's 0.2 s
    long[1].update(wall=[0.1, 0.2], val_curve=[0.6, 0.45])
    extra = _row("ZINC", "cellular_transformer", "packaged", 1, 0.5, metric="mae", epochs=50)
    extra.update(wall=[1.0, 2.0])
    return [*long, extra]


def test_longer_training_table_ranks_the_long_runs(tmp_path):
    short = _write(tmp_path / "short" / "runs.jsonl", _protocol())
    out = tmp_path / "long"
    _write(out / "runs.jsonl", _longer_training_rows())
    run = run_benchmark("design_space", "--best-of", short, "--out", out, "--table", "--datasets", "MUTAG", "ZINC")
    assert run.returncode == 0, run.stderr
    text = (out / "tables.md").read_text()
    assert text.strip() == run.stdout.strip()  # printed and written
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
    runs = _write(tmp_path / "runs.jsonl", _protocol())
    refused = run_benchmark("design_space", "--best-of", runs, "--out", tmp_path, "--table")
    assert refused.returncode == 2 and "give a different --out" in refused.stderr
    assert not (tmp_path / "tables.md").exists()
    out = tmp_path / "long"
    run = run_benchmark("design_space", "--best-of", runs, "--out", out, "--table", "--datasets", "MUTAG", "ZINC")
    assert run.returncode == 0, run.stderr
    assert (out / "tables.md").read_text().startswith("### Longer training")


def test_best_of_runs_the_chosen_trials_or_the_configs_named_and_skips_finished_runs(tmp_path):
    short = _write(tmp_path / "short" / "runs.jsonl", _protocol())
    out = tmp_path / "long"
    named = ["--best-of", short, "--out", out, "--models", "cellular_transformer", "--configs", "packaged",
             "--datasets", "MUTAG", "ZINC", "--epochs", "50"]
    _, keys = _listed(*named)
    assert keys == [run_key("MUTAG", "cellular_transformer", "packaged", 1), run_key("ZINC", "cellular_transformer", "packaged", 1)]
    _write(out / "runs.jsonl", [_row("MUTAG", "cellular_transformer", "packaged", 1, 0.9, epochs=50)])
    _, rest = _listed(*named)
    assert rest == [run_key("ZINC", "cellular_transformer", "packaged", 1)]  # resumable: finished runs are skipped
