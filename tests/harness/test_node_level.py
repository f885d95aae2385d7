"""``benchmarks/node_level.py``: two splits of one epoch on a tiny generated file, its results file and table."""

from __future__ import annotations

import json
import statistics

from tests.datasets.heterophilous_files import write_tiny
from tests.helpers import run_benchmark


def test_two_splits_fill_the_results_file_resume_and_give_the_table_with_the_anchors(tmp_path):
    write_tiny(tmp_path / "data", "minesweeper")  # 40 vertices, 60 edges, 2 classes, 10 splits
    results = tmp_path / "results"
    common = ["--results-dir", results, "--work-dir", tmp_path / "work", "--name", "tiny",
              "--datasets", "minesweeper", "--configs", "ct_skeleton", "--epochs", "1", "--patience", "0"]
    run = run_benchmark("node_level", *common, "--data-dir", tmp_path / "data", "--splits", "0", "1",
                        "--workers", "2", cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr + run.stdout

    data = json.loads((results / "tiny.json").read_text())
    assert data["metadata"]["protocol"] == {"epochs": 1, "patience": 0}
    [command] = data["metadata"]["commands"]  # the call, its data folder written DATA
    assert command.startswith("python benchmarks/node_level.py ") and "--data-dir DATA " in command and str(tmp_path / "data") not in command
    rows = sorted(data["runs"], key=lambda r: r["split"])
    assert [r["key"] for r in rows] == ["minesweeper|ct_skeleton|0", "minesweeper|ct_skeleton|1"]
    for split, row in enumerate(rows):
        assert (row["split"], row["metric"], row["epochs"], row["best_epoch"], row["failure"]) == (split, "roc_auc", 1, 0, None)
        assert 0.0 <= row["val"] <= 1.0 and 0.0 <= row["test"] <= 1.0 and row["val_curve"] == [round(row["val"], 5)]
        assert row["s_per_epoch"] > 0 and row["s_per_epoch_with_val"] >= row["s_per_epoch"]
        assert row["peak_rss_mib"] > 100 and row["params"] > 0
        assert "+model.params.tensor_diagram=['0->0:adjacency_0','1->0:incidence_1','0->1:incidence_1.T']" in row["overrides"]
    lifted = data["prepared"]["minesweeper|ct_skeleton"]
    assert lifted["cells"] == [40, 60] and lifted["peak_rss_mib"] > 100  # 1-skeleton: vertices and edges

    # resumable: only the missing split is left; another protocol in the same file is refused
    listing = run_benchmark("node_level", *common, "--splits", "0", "1", "2", "--list")
    assert listing.returncode == 0 and listing.stdout.splitlines() == ["minesweeper|ct_skeleton|2 (1 epochs, patience 0)"]
    other = [*common[:-4], "--epochs", "2", "--patience", "0", "--data-dir", tmp_path / "data", "--splits", "2"]
    refused = run_benchmark("node_level", *other)
    assert refused.returncode != 0 and "give another --name" in refused.stderr

    table = run_benchmark("node_level", *common, "--table")
    assert table.returncode == 0, table.stderr
    assert (results / "tiny.md").read_text() == table.stdout
    mean = 100 * statistics.fmean(r["test"] for r in rows)
    ours = next(line for line in table.stdout.splitlines() if line.startswith("| minesweeper | ct_skeleton | 2 |"))
    cells = [c.strip() for c in ours.strip("|").split("|")]
    assert cells[3].startswith(f"{mean:.2f} ± ")
    assert cells[-3:] == [f"{mean - 93.91:+.2f}", f"{mean - 92.29:+.2f}", f"{mean - 97.46:+.2f}"]
    assert "| minesweeper | GAT-sep (published) | 10 | 93.91 ± 0.35 |" in table.stdout
    assert "| minesweeper | Polynormer (published) | 10 | 97.46 ± 0.36 |" in table.stdout
    assert "| minesweeper | ct_skeleton | 40 / 60 |" in table.stdout  # the lifting's row


def _row(config: str, variant: str | None, split: int, val: float, test: float) -> dict:
    name = f"{config}~{variant}" if variant else config
    return {"key": f"minesweeper|{name}|{split}", "dataset": "minesweeper", "config": config, "variant": variant,
            "split": split, "metric": "roc_auc", "val": val, "test": test, "epochs": 3, "best_epoch": 1,
            "s_per_epoch": 0.1, "s_per_epoch_with_val": 0.2, "peak_rss_mib": 500.0, "params": 10, "failure": None}


def test_the_table_picks_the_variant_with_the_best_validation_mean_never_reading_test(tmp_path):
    runs = [
        _row("ct_skeleton", None, 0, 0.90, 0.99), _row("ct_skeleton", None, 1, 0.80, 0.99),  # val 85: best test
        _row("ct_skeleton", "a", 0, 0.95, 0.50), _row("ct_skeleton", "a", 1, 0.85, 0.50),    # val 90: chosen
        _row("ct_skeleton", "b", 0, 0.99, 0.99),  # one split only: listed, not compared
    ]
    results = tmp_path / "results"
    results.mkdir()
    (results / "pick.json").write_text(json.dumps({"metadata": {"protocol": {"epochs": 3, "patience": 0}},
                                                   "prepared": {}, "runs": runs}))
    table = run_benchmark("node_level", "--results-dir", results, "--work-dir", tmp_path / "work",
                          "--name", "pick", "--table")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    picks = lines[lines.index("| data set | configuration | splits | validation | |") + 2:]
    assert picks == [
        "| minesweeper | ct_skeleton~a | 0, 1 | 90.00 | **chosen** |",
        "| minesweeper | ct_skeleton | 0, 1 | 85.00 |  |",
        "| minesweeper | ct_skeleton~b | 0 | – | not compared (1 of 2 splits) |",
    ]
