"""End to end through the command line: 1 epoch on a handful of MUTAG graphs."""

import csv
import math

import pytest

from topomodelx_attention.cli import main
from topomodelx_attention.harness.training import cosine_warmup_lambda


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
    for name in ("results.md", "results.csv", "summary.csv", "curves.png", "config.yaml"):
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
