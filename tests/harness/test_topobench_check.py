"""benchmarks/topobench_check.py: the parts that run without a TopoBench checkout."""

import subprocess

import pytest

from tests.helpers import load_benchmark


def test_last_logged_reads_the_last_value_of_a_column(tmp_path):
    check = load_benchmark("topobench_check")
    log = tmp_path / "metrics.csv"
    log.write_text("epoch,val/accuracy,train/loss\n0,,2.5\n0,0.25,\n1,,2.0\n1,0.5,\n2,,1.0\n")
    assert check.last_logged(log, "val/accuracy") == 0.5
    assert check.last_logged(log, "val/mse") is None  # a column that is not logged
    assert check.last_logged(tmp_path / "missing.csv", "val/accuracy") is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--no-tests"], "nothing to do"),
        (["--challenge", "--challenge-settings", "13"], "--challenge-settings"),
        (["--challenge", "--challenge-graphs", "5"], "--challenge-graphs"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(tmp_path, capsys, extra, message):
    check = load_benchmark("topobench_check")
    checkout = tmp_path / "TopoBench"
    (checkout / "topobench").mkdir(parents=True)
    (checkout / "topobench" / "run.py").write_text("")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    with pytest.raises(SystemExit):
        check.main(["--topobench", str(checkout), *extra])
    assert message in capsys.readouterr().err


def test_the_challenge_check_needs_the_challenge_in_the_checkout(tmp_path, capsys):
    check = load_benchmark("topobench_check")
    args = type("Args", (), {"tree": tmp_path, "head": "abc 2026-03-20"})()
    assert check.check_challenge(args, tmp_path, tmp_path) is False
    assert "no 2026_tdl_challenge/utils.py" in capsys.readouterr().out
