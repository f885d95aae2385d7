"""``benchmarks/challenge_entry.py`` on a stand-in TopoBench checkout with a stand-in interpreter.

The stand-in interpreter (``--python``) plays TopoBench's side: for the prepare step it reports the
resolved lifting and optimiser, for a row it prints the row ``run_challenge_grid`` would return
(or fails, or hangs, as the test asks) and records its process id, niceness and thread setting.
What is checked is the script's own part: resumable rows, the notebook's ``results.json`` layout,
low-priority single-thread workers that die with the launcher, and refused mixtures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.test_topobench_check import _checkout
from tests.helpers import BENCHMARKS, run_benchmark

FAKE_PYTHON = f"""#!{sys.executable}
import json, os, sys, time
spec = json.loads(sys.argv[2])
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"step": spec["step"], "slug": spec.get("slug"), "pid": os.getpid(), "nice": os.nice(0),
                          "threads": os.environ.get("OMP_NUM_THREADS")}}) + "\\n")
if spec["step"] == "prepare":
    resolved = {{"transforms": {{"graph2cell_lifting": {{"transform_name": "CellCycleLifting"}}}}, "optimizer": {{"optimizer_id": "Adam"}}}}
    print("@@challenge-config@@ " + json.dumps({{spec["tasks"][0]: resolved}}))
    sys.exit(0)
if spec["slug"] == os.environ.get("FAKE_HANG"):
    time.sleep(120)
if spec["slug"] == os.environ.get("FAKE_FAIL"):
    print("boom")
    sys.exit(3)
row = {{"experiment": spec["tasks"][0], "train_seed": spec["seed"], "run_slug": spec["slug"], "test_loss": 1.0,
       "test_best_rerun_accuracy": 0.5, "test_best_rerun_mse": None, "ood_test": {{}}}}
print("@@challenge-row@@ " + json.dumps(row))
"""

NOTEBOOK_METADATA = {"study_id", "model_config", "generated_at_utc", "n_runs", "train_seeds", "heatmap_note"}


def _setup(tmp_path):
    checkout = _checkout(tmp_path)
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    options = [
        "--topobench", checkout, "--python", python, "--results-dir", tmp_path / "results",
        "--work-dir", tmp_path / "work", "--tasks", "community_detection",
    ]
    return options, tmp_path / "fake.log"


def _log(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _run(options, log, *extra, **env):
    old = {key: os.environ.get(key) for key in ["FAKE_LOG", *env]}
    os.environ.update({"FAKE_LOG": str(log), **env})
    try:
        return run_benchmark("challenge_entry", *options, *extra, timeout=120)
    finally:
        for key, value in old.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def test_rows_are_recorded_as_they_finish_and_a_second_call_runs_only_the_missing_ones(tmp_path):
    options, log = _setup(tmp_path)
    settings = ["--settings", "h_hi_d_hi_pl_hi", "h_lo_d_lo_pl_lo", "--workers", "2", "--niceness", "7"]
    first = _run(options, log, *settings, FAKE_FAIL="h_lo__d_lo__pl_lo")
    assert first.returncode == 1, first.stdout + first.stderr
    path = tmp_path / "results" / "challenge_entry" / "results.json"
    data = json.loads(path.read_text())
    assert set(data["metadata"]) == NOTEBOOK_METADATA and data["metadata"]["model_config"] == "cell/cellular_transformer_rrwp"
    assert [r["run_slug"] for r in data["results"]] == ["h_hi__d_hi__pl_hi"]  # the failed row is not recorded
    rows = [entry for entry in _log(log) if entry["step"] == "row"]
    assert all(entry["threads"] == "1" and entry["nice"] >= 7 for entry in _log(log))

    second = _run(options, log, *settings)
    assert second.returncode == 0, second.stdout + second.stderr
    again = [entry for entry in _log(log) if entry["step"] == "row"][len(rows):]
    assert [entry["slug"] for entry in again] == ["h_lo__d_lo__pl_lo"]  # only the missing row ran
    data = json.loads(path.read_text())
    assert data["metadata"]["n_runs"] == 2 and data["metadata"]["train_seeds"] == [42]
    assert [r["run_slug"] for r in data["results"]] == ["h_lo__d_lo__pl_lo", "h_hi__d_hi__pl_hi"]  # the notebook's order
    conditions = json.loads((path.parent / "conditions.json").read_text())
    assert conditions["resolved"]["community_detection"]["optimizer"] == {"optimizer_id": "Adam"}
    assert any("trainer=cpu" in line for line in conditions["differences_from_the_notebook"])

    # another configuration never joins these rows, even with nothing pending
    other = _run(options, log, *settings, "--model-config", "cell/cellular_transformer")
    assert other.returncode == 2 and "model_config='cell/cellular_transformer_rrwp'" in other.stderr

    # nor does the same configuration once the worktree's model config changed
    config = tmp_path / "work" / "TopoBench" / "configs" / "model" / "cell" / "cellular_transformer_rrwp.yaml"
    config.write_text(config.read_text().replace("n_layers: 4", "n_layers: 5"))
    more = ["--settings", "h_hi_d_hi_pl_hi", "h_lo_d_lo_pl_lo", "h_mid_d_lo_pl_lo", "--workers", "1"]
    changed = _run(options, log, *more)
    assert changed.returncode == 2 and "ran with other model code or config" in changed.stderr, changed.stderr
    assert [r["run_slug"] for r in json.loads(path.read_text())["results"]] == ["h_lo__d_lo__pl_lo", "h_hi__d_hi__pl_hi"]


def test_a_smoke_run_has_files_of_its_own_and_bad_options_are_refused(tmp_path):
    options, log = _setup(tmp_path)
    run = _run(options, log, "--settings", "h_lo_d_lo_pl_lo", "--n-graphs", "40", "--max-epochs", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    folder = tmp_path / "results" / "challenge_entry"
    assert sorted(p.name for p in folder.iterdir()) == ["conditions_n40_e1.json", "results_n40_e1.json"]
    for extra, message in [
        (["--settings", "h_low"], "unknown setting 'h_low'"),
        (["--model-config", "cell/cwn"], "not a config the pull request ships"),
        (["--niceness", "20"], "--niceness in 0..19"),
    ]:
        refused = _run(options, log, *extra)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_die_with_the_launcher(tmp_path):
    options, log = _setup(tmp_path)
    env = {
        **os.environ, "FAKE_LOG": str(log), "FAKE_HANG": "h_lo__d_lo__pl_lo",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCHMARKS.parent), os.environ.get("PYTHONPATH")])),
    }
    launcher = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "challenge_entry.py"), *map(str, options), "--settings", "h_lo_d_lo_pl_lo"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while not [e for e in _log(log) if e["step"] == "row"] and time.monotonic() < deadline:
            time.sleep(0.2)
        worker = next(e["pid"] for e in _log(log) if e["step"] == "row")
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            break
        if state in ("Z", "X"):
            break
        time.sleep(0.2)
    else:
        os.kill(worker, signal.SIGKILL)
        raise AssertionError("the worker outlived its launcher")
