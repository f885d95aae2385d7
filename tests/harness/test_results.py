"""Result tables and curves."""

import math

import pytest

from topomodelx_attention.harness.results import (
    comparison_table,
    format_mean_std,
    markdown_table,
    read_summary,
    summary_row,
    write_results,
)
from topomodelx_attention.harness.training import ExperimentResult, SeedResult


def _result(tmp_path, metric="accuracy"):
    seeds = [
        SeedResult(seed, seed, 3, 0.5 + 0.1 * seed, 0.4 + 0.1 * seed, 1.0,
                   [{"epoch": float(e), "train/loss": 1.0 / (e + 1), f"val/{metric}": 0.5} for e in range(3)])
        for seed in (1, 2)
    ]
    return ExperimentResult("MUTAG", "gin", metric, seeds, 1234, tmp_path / "run", {})


def test_format_mean_std():
    assert format_mean_std([0.8, 0.9], scale=100) == "85.00 ± 7.07"
    assert format_mean_std([1.23456], digits=3) == "1.235"
    assert format_mean_std([math.nan, math.nan]) == "n/a"


def test_tables_and_files(tmp_path):
    result = _result(tmp_path)
    table = markdown_table(result)
    assert "| 1 | 1 | 3 | 60.00 | 50.00 | 1.0 |" in table
    assert "**65.00 ± 7.07**" in table
    row = summary_row(result)
    assert row["test"] == "55.00 ± 7.07" and row["metric"] == "accuracy (%)"
    assert "| MUTAG | gin | accuracy (%) | 2 |" in comparison_table([row])
    files = write_results(result)
    assert all(path.is_file() for path in files.values())
    assert read_summary(result.output_dir)["test"] == "55.00 ± 7.07"
    with pytest.raises(FileNotFoundError, match=r"summary\.csv"):
        read_summary(tmp_path)


def test_regression_metric_is_not_scaled(tmp_path):
    row = summary_row(_result(tmp_path, "mae"))
    assert row["metric"] == "mae" and row["test"] == "0.550 ± 0.071"
