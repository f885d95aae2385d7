"""``benchmarks/prepared_structure.py`` runs, checks equal outputs and writes its table."""

from __future__ import annotations

import json

from tests.helpers import run_benchmark


def test_the_benchmark_times_both_forms_and_writes_its_table(tmp_path):
    out = tmp_path / "prepared_structure.json"
    run = run_benchmark("prepared_structure", "--side", 6, "--repeats", 1, "--warmup", 0, "--out", out)
    assert run.returncode == 0, run.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["title"].startswith("One complex prepared once: 36 vertices, 60 edges, 25 squares")
    assert [row[0].split(" ")[0] for row in record["rows"]] == ["training", "evaluation"]
    assert all(row[3].startswith("**") and row[3].endswith("×**") for row in record["rows"])
