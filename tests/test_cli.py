import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topomodelx_attention.cli import main


def test_lift_mutag_offline_prints_counts(tmp_path, capsys):
    assert main(["lift", "--dataset", "MUTAG", "--lifting", "cell_cycle", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "188 graphs" in out
    rows = dict(re.findall(r"^\| (\d) \| (\d+) \|", out, flags=re.M))
    assert rows["0"] == "3371"  # MUTAG has 3,371 atoms
    assert rows["1"] == "3721"  # and 3,721 bonds
    assert int(rows["2"]) > 0
    assert re.search(r"lifted in [0-9.]+ s", out)


def test_lift_clique(tmp_path, capsys):
    assert main(["lift", "--dataset", "MUTAG", "--lifting", "clique", "--root", str(tmp_path)]) == 0
    assert "| 2 | 0 |" in capsys.readouterr().out  # molecules have no triangles of bonds


def test_bench_list_names_the_benchmark_scripts(capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # the checkout
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("lifting", "attention_core", "n_simplicial", "oversmoothing"):
        assert re.search(rf"^\s+{name}\s", out, flags=re.M), name


def _checkout(root, name="topomodelx-attention"):
    """A source-checkout-like folder: ``pyproject.toml`` naming the project, and ``benchmarks/``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0"\n')
    (root / "benchmarks").mkdir()
    return root / "benchmarks"


def test_bench_runs_a_script_in_a_subprocess(tmp_path, capsys):
    folder = _checkout(tmp_path / "checkout")
    (folder / "echo_args.py").write_text(
        '"""Write the arguments."""\nimport pathlib, sys\n'
        'pathlib.Path(sys.argv[1]).write_text(" ".join(sys.argv[2:]))\n'
    )
    target = tmp_path / "args.txt"
    assert main(["bench", "--benchmarks-dir", str(folder), "echo_args", str(target), "--quick", "7"]) == 0
    assert target.read_text() == "--quick 7"
    assert main(["bench", "--benchmarks-dir", str(folder), "missing"]) == 2
    assert "unknown benchmark 'missing'" in capsys.readouterr().err


def test_bench_outside_a_checkout_explains(tmp_path, capsys):
    assert main(["bench", "--benchmarks-dir", str(tmp_path / "nowhere"), "--list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "source checkout" in err[0] and err[0].startswith("topomodelx-attention bench: error:")


def _planted_project(root, marker):
    """Another project whose ``benchmarks/lifting.py`` would create ``marker`` if it ran."""
    folder = _checkout(root, name="someone-elses-project")
    (folder / "lifting.py").write_text(f'"""Planted."""\nopen({str(marker)!r}, "w").close()\n')
    (folder / "planted.py").write_text(f'"""Planted too."""\nopen({str(marker)!r}, "w").close()\n')
    return folder


def test_bench_never_runs_the_scripts_of_the_working_folder(tmp_path, capsys, monkeypatch):
    marker = tmp_path / "ran"
    planted = _planted_project(tmp_path / "other", marker)
    monkeypatch.chdir(planted.parent / "benchmarks")  # inside another project's checkout
    assert main(["bench", "planted"]) == 2
    assert "unknown benchmark 'planted'" in capsys.readouterr().err
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert str(ROOT / "benchmarks") in out and "planted" not in out
    assert not marker.exists()


def test_bench_refuses_a_benchmarks_dir_of_another_project(tmp_path, capsys):
    marker = tmp_path / "ran"
    planted = _planted_project(tmp_path / "other", marker)
    for folder in (planted, planted.parent):  # the other project's folder, and its root
        assert main(["bench", "--benchmarks-dir", str(folder), "lifting"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not the benchmarks/ folder of a source checkout of topomodelx-attention" in err[0]
    assert not marker.exists()


def test_bench_without_a_checkout_next_to_the_package_names_the_option(tmp_path, capsys, monkeypatch):
    from topomodelx_attention import cli

    # an installed (non-editable) package: no checkout above it
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "site-packages" / "topomodelx_attention" / "cli.py"))
    _planted_project(tmp_path / "other", tmp_path / "ran")
    monkeypatch.chdir(tmp_path / "other")
    assert cli.find_benchmarks_dir() is None
    assert main(["bench", "lifting"]) == 2
    err = capsys.readouterr().err
    assert "--benchmarks-dir" in err and "never run" in err
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--accelerator", "tpu"], "TPU training needs a TPU host"),
        (["trainer.accelerator=tpu"], "TPU training needs a TPU host"),
        (["--accelerator", "foo"], "is not an accelerator; choose one of ['auto', 'gpu', 'cpu'"),
        (["--accelerator", "TPU"], "is not an accelerator"),  # Lightning's names are lower case
    ],
)
def test_train_refuses_an_accelerator_this_machine_lacks_in_one_line(tmp_path, capsys, argv, needle):
    base = ["train", "--max-epochs", "1", "--seeds", "1", "--no-progress-bar",
            "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "out")]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("topomodelx-attention train: error: --accelerator") and needle in err[0]
    assert "pip install" not in err[0]  # Lightning's own message asks to install torch_xla
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # nothing lifted


def test_train_refuses_a_gpu_accelerator_without_a_gpu(tmp_path, capsys):
    import torch

    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("this machine has a GPU")
    for name in ("gpu", "cuda"):
        assert main(["train", "--max-epochs", "1", "--seeds", "1", "--accelerator", name, "--no-progress-bar",
                     "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--accelerator {name} (trainer.accelerator) is not available" in err[0]


# ------------------------------------------------------------------ a quiet, fast CLI (subprocesses)

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path, **extra):
    """The environment of a CLI subprocess: this checkout first on the path, a private cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TOPOMODELX_ATTENTION_DATA"] = str(tmp_path / "default_cache")
    env.pop("TOPOMODELX_ATTENTION_TRACEBACK", None)
    env.update(extra)
    return env


HEAVY = ("torch", "torch_geometric", "lightning", "hydra", "omegaconf", "numpy", "scipy")

_HELP_PROBE = f"""
import runpy, sys
sys.argv = ["topomodelx-attention", *sys.argv[1:]]
try:
    runpy.run_module("topomodelx_attention.cli", run_name="__main__", alter_sys=True)
except SystemExit as exit_:
    code = exit_.code
print("EXIT", code, file=sys.stderr)
print("HEAVY", " ".join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv", [["--help"], ["train", "--help"], ["lift", "--help"], ["train", "--max-epochs", "0"]]
)
def test_help_and_argument_errors_import_no_heavy_module(argv, tmp_path):
    # the probe can fail: importing the package's data layer does pull torch in
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, topomodelx_attention.data; print('torch' in sys.modules)"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=300, check=True,
    )
    assert probe.stdout.strip() == "True"
    run = subprocess.run(
        [sys.executable, "-c", _HELP_PROBE, *argv], capture_output=True, text=True,
        env=_env(tmp_path), timeout=300,
    )
    lines = run.stderr.strip().splitlines()
    assert lines[-2] in ("EXIT 0", "EXIT 2"), run.stderr
    assert lines[-1] == "HEAVY", f"{argv} imported {lines[-1][6:]}"
    if argv == ["train", "--help"]:
        assert "--no-progress-bar" in run.stdout and "--verbose" in run.stdout


PACKAGE_MODULES = (
    "topomodelx_attention", "topomodelx_attention.data", "topomodelx_attention.transforms",
    "topomodelx_attention.nn", "topomodelx_attention.nn.attention", "topomodelx_attention.nn.cell",
    "topomodelx_attention.nn.graph", "topomodelx_attention.nn.simplicial",
    "topomodelx_attention.harness", "topomodelx_attention.harness.topobench",
    "topomodelx_attention.cli",
)


def test_importing_the_package_warns_nothing(tmp_path):
    # the unprotected path: PyG's own import warns (torch.jit.script is deprecated)
    naive = subprocess.run(
        [sys.executable, "-W", "error", "-c", "import torch_geometric"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=300,
    )
    assert naive.returncode != 0 and "Warning" in naive.stderr
    code = "import " + ", ".join(PACKAGE_MODULES)
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True,
        env=_env(tmp_path), timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stderr == ""
    # the filter was scoped to our import of PyG: the same warning raised later is an error again
    later = "warnings.warn('`torch.jit.script` is deprecated. Please switch', DeprecationWarning)"
    check = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import warnings; {code}; {later}"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=300,
    )
    assert check.returncode != 0 and "DeprecationWarning: `torch.jit.script`" in check.stderr
    # and the filters the imported libraries install for themselves are kept, as after a plain import
    show = "import warnings; {}; print('\\n'.join(map(repr, warnings.filters)))"
    filters = [
        subprocess.run([sys.executable, "-c", show.format(code)], capture_output=True, text=True,
                       env=_env(tmp_path), timeout=300, check=True).stdout
        for code in ("import torch_geometric", "import topomodelx_attention._compat")
    ]
    assert "is in beta and the API may change" in filters[0]  # e.g. torch's own
    assert filters[1] == filters[0]


def _tiny_train(tmp_path, *overrides, epochs=1, output="o"):
    """``train`` of GIN on 12 MUTAG graphs (the overrides first: --seeds takes several values)."""
    return ["train", "dataset.max_graphs=12", *overrides, "--model", "gin", "--max-epochs", str(epochs),
            "--seeds", "1", "--cache-dir", str(tmp_path / "c"), "--output-dir", str(tmp_path / output)]


@pytest.mark.slow
def test_train_without_a_terminal_prints_no_bar_no_lightning_chatter(tmp_path):
    argv = _tiny_train(tmp_path, "+foo=1")
    run = subprocess.run(
        [sys.executable, "-m", "topomodelx_attention.cli", *argv], capture_output=True, text=True,
        env=_env(tmp_path), timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| **mean ± std** |" in run.stdout
    # stderr is a pipe: no progress bar (lifting or Lightning), no Lightning info, no tip; only
    # the one-line warning about the unused +foo
    assert run.stderr.strip().splitlines() == [
        "topomodelx-attention train: warning: configuration key 'foo' (override +foo=1) is not "
        "read by the harness: no packaged config has it, so it has no effect"
    ], run.stderr
    verbose = subprocess.run(
        [sys.executable, "-m", "topomodelx_attention.cli", *_tiny_train(tmp_path, output="o2"), "--verbose"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=600,
    )
    assert verbose.returncode == 0, verbose.stderr[-2000:]
    assert "GPU available" in verbose.stderr  # Lightning's info, asked for
    assert "litlogger" not in verbose.stderr and "%|" not in verbose.stderr


_SIGINT_WRAPPER = """
import contextlib, signal, sys
# Ctrl+C as in a terminal: a job started in the background (`cmd &` without job control, as CI
# scripts do) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from topomodelx_attention import cli
from topomodelx_attention.harness import training

marker, mode, argv = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
step = training.GraphTaskModule.training_step

def training_step(self, *args, **kwargs):  # the training runs: tell the test
    marker.touch()
    return step(self, *args, **kwargs)

training.GraphTaskModule.training_step = training_step
if mode == "naive":  # the CLI without its SIGINT handling
    cli._signals_interrupt = contextlib.nullcontext
sys.exit(cli.main(argv))
"""


def _interrupt_training(tmp_path, mode, signum=signal.SIGINT):
    marker = tmp_path / f"training-{mode}-{signum}"
    # no early stopping: on a loaded machine 50 epochs of 12 graphs can end the run (exit 0)
    # before the signal is sent
    argv = _tiny_train(tmp_path, "trainer.early_stopping_patience=null", epochs=100000, output=f"{mode}-{signum}")
    process = subprocess.Popen(
        [sys.executable, "-c", _SIGINT_WRAPPER, str(marker), mode, *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path),
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the training never started"
            time.sleep(0.2)
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, out, err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "naive_code", "code", "word"),
    [(signal.SIGINT, 1, 130, "interrupted"), (signal.SIGTERM, 0, 143, "terminated")],
)
def test_a_signal_during_training_prints_one_line_and_a_failing_status(tmp_path, signum, naive_code, code, word):
    # the unprotected path: Lightning turns Ctrl+C into its own sys.exit(1), and SIGTERM into a
    # quiet end of the fit that reports the unfinished seed as a result (exit 0)
    status, _, err = _interrupt_training(tmp_path, "naive", signum)
    assert status == naive_code, err
    status, out, err = _interrupt_training(tmp_path, "cli", signum)
    assert status == code, err
    assert err.strip().splitlines() == [f"topomodelx-attention train: {word}"], err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "mean ± std" not in out  # no results table of an unfinished seed


@pytest.mark.parametrize(
    "tail",
    [
        ["--seeds", "3", "4", "dataset.max_graphs=12", "model.params.hidden_channels=8"],
        ["dataset.max_graphs=12", "--seeds", "3", "4", "model.params.hidden_channels=8"],
        ["--seeds", "3", "4", "dataset.max_graphs=12", "--max-epochs", "1", "model.params.hidden_channels=8"],
    ],
)
def test_overrides_may_follow_the_seeds_in_any_order(tail, monkeypatch):
    """``train --seeds 1 2 KEY=VALUE`` (the order the README and --help show) is parsed as meant."""
    from topomodelx_attention import cli

    seen = {}
    monkeypatch.setattr(cli, "_cmd_train", lambda args: seen.update(seeds=args.seeds, overrides=args.overrides) or 0)
    assert cli.main(["train", "--model", "gin", "--output-dir", "x=1", *tail]) == 0
    assert seen == {"seeds": [3, 4], "overrides": ["dataset.max_graphs=12", "model.params.hidden_channels=8"]}
