"""``benchmarks/topobench_check.py`` run as a command on a stand-in TopoBench checkout (no TopoBench needed).

The stand-in checkout has the folders and the pipeline-test list that ``topobench contribute``
edits; the challenge check is run with ``--python`` set to a stand-in interpreter that writes the
CSV logs a challenge run would write, so the script's own reading of them is what is checked.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import run_benchmark


def _git(folder, *args):
    subprocess.run(
        ["git", "-C", str(folder), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        check=True, capture_output=True,
    )


def _checkout(root, *, challenge=False):
    """A git checkout with TopoBench's layout (what ``contribute`` edits), committed."""
    tree = root / "TopoBench"
    for folder in ("topobench/nn/backbones", "topobench/nn/wrappers", "configs/model", "test/pipeline"):
        (tree / folder).mkdir(parents=True)
    (tree / "topobench" / "run.py").write_text("")
    (tree / "topobench" / "nn" / "backbones" / "__init__.py").write_text("")
    (tree / "topobench" / "nn" / "wrappers" / "__init__.py").write_text("")
    (tree / "configs" / "model" / ".keep").write_text("")
    (tree / "test" / "pipeline" / "test_pipeline.py").write_text('MODELS = [\n    "cell/cwn",\n]\n')
    if challenge:
        (tree / "2026_tdl_challenge").mkdir()
        (tree / "2026_tdl_challenge" / "utils.py").write_text("def check_challenge_grid(**kwargs):\n    pass\n")
    _git(tree.parent, "init", "-q", str(tree))
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "layout")
    return tree


#: A stand-in interpreter for ``--python``: writes the CSV log of one run per task into the
#: worktree (its working folder), as TopoBench's CSV logger lays them out.
FAKE_PYTHON = f"""#!{sys.executable}
import pathlib
runs = pathlib.Path("logs/check")
logs = {{
    "community_detection_h_lo__d_lo__pl_lo": "epoch,val/accuracy,train/loss\\n0,,2.5\\n0,0.25,\\n1,,2.0\\n1,0.5,\\n2,,1.0\\n",
    "triangle_counting_h_lo__d_lo__pl_lo": "epoch,train/loss\\n0,3.0\\n",
}}
for name, text in logs.items():
    folder = runs / name / "csv" / "version_0"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.csv").write_text(text)
(runs / "triangle_counting_h_hi__d_hi__pl_hi").mkdir(parents=True, exist_ok=True)  # a run without a log
"""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--no-tests"], "nothing to do"),
        (["--challenge", "--challenge-settings", "13"], "--challenge-settings"),
        (["--challenge", "--challenge-graphs", "5"], "--challenge-graphs"),
        (["--models", "nope"], "unknown contribution 'nope'"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(tmp_path, extra, message):
    checkout = tmp_path / "TopoBench"
    (checkout / "topobench").mkdir(parents=True)
    (checkout / "topobench" / "run.py").write_text("")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    run = run_benchmark("topobench_check", "--topobench", checkout, "--logs", tmp_path / "logs", *extra)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "logs").exists()  # refused before any folder is made


def test_the_challenge_check_needs_the_challenge_in_the_checkout(tmp_path):
    checkout = _checkout(tmp_path)
    run = run_benchmark(
        "topobench_check", "--topobench", checkout, "--no-tests", "--challenge", "--models", "cellular_transformer",
        "--logs", tmp_path / "logs",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "has no 2026_tdl_challenge/utils.py" in run.stdout and run.stdout.rstrip().endswith("FAILED")
    assert not (tmp_path / "logs" / "contributed").exists()  # the worktree is removed again
    assert subprocess.run(["git", "-C", str(checkout), "status", "--porcelain"], capture_output=True, text=True).stdout == ""


def test_the_challenge_table_reads_the_last_logged_validation_value_of_every_run(tmp_path):
    checkout = _checkout(tmp_path, challenge=True)
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    run = run_benchmark(
        "topobench_check", "--topobench", checkout, "--no-tests", "--challenge", "--models", "cellular_transformer",
        "--python", python, "--challenge-settings", "1", "--logs", tmp_path / "logs",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ") and "validation metric" not in line]
    for model in ("cell/cellular_transformer", "cell/cwn"):  # the contribution and the reference
        mine = {tuple(c.strip() for c in line.split("|")[2:5]) for line in rows if line.startswith(f"| {model} |")}
        assert mine == {
            ("community_detection", "h_lo__d_lo__pl_lo", "val/accuracy 0.5"),  # the last value, not the last row
            ("triangle_counting", "h_hi__d_hi__pl_hi", "val/mse –"),  # no log file
            ("triangle_counting", "h_lo__d_lo__pl_lo", "val/mse –"),  # the column is never logged
        }, rows
    assert run.stdout.rstrip().endswith("OK")
