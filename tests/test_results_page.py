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
    section = generated.split("### Tuned study: community detection")[1].split("###")[0]
    assert f"| {sum(scores) / len(scores):.4f} |" in _row(section, f"cellular_transformer | {len(scores)}")


def test_the_tuned_study_stands_beside_untuned_gps_on_matched_seed_42_rows(generated):
    section = generated.split("### What the tuned study's numbers show")[1].split("###")[0]
    for model in ("cellular_transformer", "gps"):
        data = json.loads((RESULTS / "graphuniverse" / model / "results.json").read_text())
        seed42 = [r["test_best_rerun_accuracy"] for r in data["results"]
                  if r["experiment"] == "community_detection" and r["train_seed"] == 42]
        assert len(seed42) == 12
        assert f"| {sum(seed42) / 12:.4f} |" in _row(section, f"{model} | 12")
    assert "packaged" in _row(section, "gps | 12") and "packaged" not in _row(section, "cellular_transformer | 12")


def test_the_one_configuration_entry_is_shown_with_its_conditions(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(RESULTS, copy)
    entry = copy / "graphuniverse" / "challenge_entry"
    shutil.rmtree(entry, ignore_errors=True)
    assert "Not scored yet." in _generate(tmp_path, "--results", copy)
    entry.mkdir()
    row = {"experiment": "community_detection", "train_seed": 42, "homophily": "h_lo", "run_slug": "h_lo__d_lo__pl_lo",
           "test_best_rerun_accuracy": 0.25, "ood_test": {"h_hi__d_hi__pl_hi": {"test_best_rerun_accuracy": 0.5}}}
    (entry / "results.json").write_text(json.dumps({"metadata": {"model_config": "cell/x"}, "results": [row]}))
    conditions = {"run": {"topobench": "abc 2026-06-11"}, "differences_from_the_notebook": ["trainer=cpu"]}
    (entry / "conditions.json").write_text(json.dumps(conditions))
    page = _generate(tmp_path, "--results", copy)
    section = page.split("### The one-configuration entry")[1].split("###")[0]
    assert "Differs from the notebook: trainer=cpu." in section and "`cell/x`" in section
    assert "| community detection | test accuracy of the nodes, higher is better | 1 | 42 | 0.2500 | 0.2500 | – | – | 0.5000 |" in section
    assert "challenge_entry" not in page.split("### Tuned study: community detection")[1].split("###")[0]


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
