"""The results page (``docs/results.md``) is exactly what ``benchmarks/results_page.py`` makes of the result files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import run_benchmark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "results.md"


def _generate(tmp_path: Path, *args) -> str:
    out = tmp_path / "results.md"
    run = run_benchmark("results_page", "--out", out, *args)
    assert run.returncode == 0, run.stderr
    return out.read_text()


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    return _generate(tmp_path_factory.mktemp("page"))


def test_the_committed_page_is_byte_identical_to_what_the_script_makes_of_the_files(generated):
    assert PAGE.read_bytes() == generated.encode(), (
        "docs/results.md differs from the result files: run `python benchmarks/results_page.py` and commit the page"
    )


def _row(page: str, first_cells: str) -> str:
    rows = [line for line in page.splitlines() if line.startswith(f"| {first_cells} |")]
    assert rows, first_cells
    return rows[0]


def test_the_equal_budget_tables_hold_the_values_of_the_harness_results_files(generated):
    text = (RESULTS / "equal_budget" / "ZINC" / "results.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| ZINC | cellular_transformer |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    val, test = cells[5], cells[6]  # data set, model, metric, seeds, epochs, val, test, ...
    assert f"| {val} | {test} |" in _row(generated, "cellular_transformer | 1, 2")


def test_the_graphuniverse_entry_is_the_mean_of_its_rows(generated):
    data = json.loads((RESULTS / "graphuniverse" / "cellular_transformer" / "results.json").read_text())
    scores = [r["test_best_rerun_accuracy"] for r in data["results"] if r["experiment"] == "community_detection"]
    section = generated.split("### The entries: community detection")[1].split("###")[0]
    assert f"| {sum(scores) / len(scores):.4f} |" in _row(section, f"cellular_transformer | {len(scores)}")


def test_the_speed_tables_are_the_recorded_rows(generated):
    record = json.loads((RESULTS / "speed" / "user_loop.json").read_text())
    for row in record["rows"]:
        assert "| " + " | ".join(row) + " |" in generated
    assert f"command: `{record['command']}`" in generated


def test_a_changed_result_file_changes_the_page(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(RESULTS, copy)
    path = copy / "equal_budget" / "MUTAG" / "results.md"
    text = path.read_text()
    assert "| MUTAG | gps | accuracy (%) | 3 | 105 | 93.62 ± 2.13 | 85.11 ± 2.13 |" in text
    path.write_text(text.replace("93.62 ± 2.13 | 85.11 ± 2.13", "93.62 ± 2.13 | 12.34 ± 5.67"))
    page = _generate(tmp_path, "--results", copy)
    assert "| gps | 1, 2, 3 | 105 | 93.62 ± 2.13 | 12.34 ± 5.67 |" in page
    assert "| gps | 1, 2, 3 | 105 | 93.62 ± 2.13 | 85.11 ± 2.13 |" not in page


@pytest.mark.parametrize(("folder", "extra"), [("design_space", []), ("design_space_50ep", ["--best-of"])])
def test_the_design_space_tables_file_is_what_its_script_makes_of_the_runs(tmp_path, folder, extra):
    out = tmp_path / folder
    out.mkdir()
    shutil.copy(RESULTS / folder / "runs.jsonl", out / "runs.jsonl")
    if extra:
        extra = [*extra, RESULTS / "design_space" / "runs.jsonl"]
    run = run_benchmark("design_space", "--table", "--out", out, *extra)
    assert run.returncode == 0, run.stderr
    assert (out / "tables.md").read_bytes() == (RESULTS / folder / "tables.md").read_bytes()
