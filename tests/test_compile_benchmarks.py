"""The compile benchmarks run as commands: ``benchmarks/compile.py`` (CPU) and ``gpu_check.py`` (GPU).

Run with tiny sizes and dynamo's ``eager`` backend (no code generation): the scripts' structure,
their three models and the recompile count are checked, never a time.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_benchmark


@pytest.mark.slow
def test_compile_script_measures_the_three_models_without_recompiling(tmp_path):
    out = tmp_path / "compile.json"
    run = run_benchmark(
        "compile", "--in-process", "--backend", "eager", "--sizes", 3, 4, "--rounds", 2,
        "--warmup", 1, "--json", out,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads(out.read_text())
    columns = record["columns"]
    rows = [dict(zip(columns, row, strict=True)) for row in record["rows"]]
    assert [(r["model"], r["batch"]) for r in rows] == [
        (model, size)
        for model in ("CT pairwise sparse", "harness tokengt", "harness n_simplicial")
        for size in ("3", "4")
    ]
    # one compiled graph per model serves both batch sizes
    assert all(r["graphs"] == "1" and r["recompiles"] == "0" for r in rows), rows
    assert record["command"].startswith("python benchmarks/compile.py --in-process")


def test_gpu_check_help_runs_without_a_gpu():
    run = run_benchmark("gpu_check", "--help")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "--compile-target" in run.stdout and "--compile" in run.stdout
