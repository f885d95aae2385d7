"""``topomodelx-attention topobench check``: a contribution checked inside a real TopoBench checkout.

The command builds (or reuses) TopoBench's test environment, then in temporary ``git worktree``
s of the checkout's ``HEAD`` (the checkout itself is not modified):

1. runs TopoBench's suite (``test/nn test/pipeline test/utils``) on the untouched tree — the
   baseline: failures there are TopoBench's own on this torch;
2. writes the pull request (``topobench contribute``) into a second tree and runs its own tests
   (the contributed ``test/nn/...`` files), then the whole suite with the coverage of the added
   backbone and wrapper modules (TopoBench's gate for a contribution: :data:`COVERAGE_GATE`);
3. runs TopoBench's lint on the added ``topobench/`` files: ``ruff check`` and
   ``ruff format --check`` with TopoBench's ``pyproject.toml``, by the environment's ruff.

It fails (exit status 1) when any step fails *or cannot run*: a module the suite imports is
missing from the environment, ruff is not installed in it, the baseline or a test run does not
finish, a test fails that did not fail on the baseline, a contributed test does not pass, the
coverage is below the gate, or ruff reports a problem. Nothing is skipped silently.

**The environment** (:func:`environment_commands`) is a virtual environment made with
``--system-site-packages`` (it uses the torch installed system-wide: TopoBench pins torch 2.3,
which has no wheels for current Pythons and CUDA) into which pip installs
:data:`ENVIRONMENT_PACKAGES` with their dependencies. This package is not installed in it: the
pull request carries its own model code. TopoBench itself is not installed either; its tests
run from the worktree (its pytest settings put the tree on ``sys.path``).

**Stand-ins.** TopoBench imports the compiled packages torch-scatter, torch-sparse and
torch-cluster, which have no wheels for current torch versions. The check writes
:data:`STANDINS` (pure-torch ``torch_scatter.scatter`` / ``scatter_add`` / ``scatter_max``,
``torch_sparse.coalesce`` / ``spmm``; ``torch_cluster`` and ``torch_sparse.SparseTensor`` raise
when used) as a module into its temporary folder and loads it as a pytest plugin (``-p``), after
``torch_geometric`` is imported so that PyG does not mistake them for the compiled packages; a
real compiled package wins. TopoBench's pipeline test reloads the Lightning checkpoint it has
just written, which torch >= 2.6 refuses by default (``weights_only=True``); the test runs get
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``. They exist only in the check's processes, never in the
package or the pull request.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import topomodelx_attention
from topomodelx_attention.files import atomic_output, write_bytes, write_text

__all__ = [
    "COVERAGE_GATE",
    "ENVIRONMENT_PACKAGES",
    "REQUIRED_MODULES",
    "STANDINS",
    "TEST_PATHS",
    "check_contribution",
    "check_environment",
    "environment_commands",
    "lint",
    "run_check",
    "run_tests",
    "write_standins",
]

PACKAGE = Path(topomodelx_attention.__file__).resolve().parent
#: Coverage TopoBench's codecov asks of a contribution's added code (percent).
COVERAGE_GATE = 93.0
#: TopoBench's test folders the check runs.
TEST_PATHS = ("test/nn", "test/pipeline", "test/utils")
#: What pip installs into the environment (with dependencies; torch comes from the system).
ENVIRONMENT_PACKAGES = (
    "torch_geometric", "graph-universe==0.1.2", "lightning", "hydra-core", "hydra-colorlog",
    "rootutils", "rich", "tabulate", "einops", "wandb", "ogb", "toponetx", "networkx", "scipy",
    "pytest", "pytest-mock", "pytest-cov", "ruff",
)
#: Modules TopoBench's suite and pipeline test import (checked before anything runs).
REQUIRED_MODULES = (
    "torch", "torch_geometric", "graph_universe", "lightning", "hydra", "hydra_plugins.hydra_colorlog",
    "rootutils", "rich", "tabulate", "einops", "wandb", "ogb", "toponetx", "topomodelx", "networkx",
    "scipy", "pytest", "pytest_mock", "pytest_cov", "ruff",
)
#: Name of the stand-in module (written into the check's temporary folder).
STANDINS_MODULE = "tma_topobench_standins"
STANDINS = r'''"""Pure-torch stand-ins for torch_scatter / torch_sparse / torch_cluster (topobench check).

Imported first (pytest -p, or a launcher): torch_geometric is imported before the stand-ins
exist, so it does not mistake them for the compiled packages.
"""
import sys
import types

import torch
import torch_geometric  # noqa: F401


def scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum"):
    dim = dim % src.dim()
    if index.dim() == 1:
        index = index.view([-1 if d == dim else 1 for d in range(src.dim())]).expand_as(src)
    how = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax", "min": "amin", "mul": "prod"}[reduce]
    if out is not None:
        return out.scatter_reduce_(dim, index, src, reduce=how, include_self=True)
    size = (int(index.max()) + 1 if index.numel() else 0) if dim_size is None else int(dim_size)
    shape = list(src.shape)
    shape[dim] = size
    return torch.zeros(shape, dtype=src.dtype, device=src.device).scatter_reduce(
        dim, index, src, reduce=how, include_self=False)


def scatter_add(src, index, dim=-1, out=None, dim_size=None):
    return scatter(src, index, dim, out=out, dim_size=dim_size, reduce="sum")


def scatter_max(src, index, dim=-1, out=None, dim_size=None):
    """Maxima (0 in empty buckets, as torch_scatter) and no argmax (None)."""
    return scatter(src, index, dim, out=out, dim_size=dim_size, reduce="max"), None


def coalesce(index, value, m, n, op="add"):
    matrix = torch.sparse_coo_tensor(index, value, (m, n, *value.shape[1:])).coalesce()
    return matrix.indices(), matrix.values()


def spmm(index, value, m, n, matrix):
    return torch.sparse.mm(torch.sparse_coo_tensor(index, value, (m, n)), matrix)


class SparseTensor:
    """Named by TopoBench's to_data_list helper; using it needs the real torch_sparse."""

    @classmethod
    def from_torch_sparse_coo_tensor(cls, *args, **kwargs):
        raise NotImplementedError("torch_sparse.SparseTensor has no stand-in in topobench check")


def _absent(name):
    def fail(*args, **kwargs):
        raise NotImplementedError(f"torch_cluster.{name} has no stand-in in topobench check")
    return fail


MEMBERS = {
    "torch_scatter": {"scatter": scatter, "scatter_add": scatter_add, "scatter_max": scatter_max},
    "torch_sparse": {"coalesce": coalesce, "spmm": spmm, "SparseTensor": SparseTensor},
    # names TopoBench imports at module level (its data manipulations and liftings); calling one raises
    "torch_cluster": {name: _absent(name) for name in ("fps", "knn", "knn_graph", "radius", "radius_graph")},
}
for _name, _members in MEMBERS.items():
    try:  # a real compiled package wins
        __import__(_name)
    except ImportError:
        _module = types.ModuleType(_name)
        _module.__dict__.update(_members)
        _module.__tma_standin__ = True
        sys.modules[_name] = _module
'''
STANDINS_NOTE = (
    "stand-ins of this check (TopoBench pins torch 2.3): torch_scatter.scatter/scatter_add/scatter_max, "
    "torch_sparse.coalesce/spmm in pure torch (torch_cluster, torch_sparse.SparseTensor raise), "
    "unless the compiled packages are installed; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for the test runs "
    "(the pipeline test reloads its own Lightning checkpoint)"
)
#: Prints the modules of its arguments that do not import (one per line).
_MISSING_MODULES = (
    "import importlib, sys\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except Exception as error:\n"
    "        print(f'{name}: {type(error).__name__}: {error}')\n"
)


def write_standins(work: Path, say: Callable[[str], None] = print) -> None:
    """Write the stand-in module :data:`STANDINS` into ``work`` and say which stand-ins it holds."""
    write_text(work / f"{STANDINS_MODULE}.py", STANDINS, root=work)
    say(STANDINS_NOTE)


def venv_python(venv: Path) -> Path:
    """Return the interpreter of the virtual environment ``venv``."""
    return Path(venv) / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def environment_commands(venv: Path, python: str = sys.executable) -> list[list[str]]:
    """Return the commands that make TopoBench's test environment at ``venv``.

    Parameters
    ----------
    venv : pathlib.Path
        Folder of the virtual environment.
    python : str
        Interpreter that makes it (its torch is the environment's: ``--system-site-packages``).

    Returns
    -------
    list of list of str
        ``python -m venv --system-site-packages VENV`` and ``VENV/bin/python -m pip install``
        of :data:`ENVIRONMENT_PACKAGES` (with their dependencies).
    """
    return [
        [python, "-m", "venv", "--system-site-packages", str(venv)],
        [str(venv_python(venv)), "-m", "pip", "install", *ENVIRONMENT_PACKAGES],
    ]


Runner = Callable[..., subprocess.CompletedProcess]


def check_environment(python: Path, run: Runner = subprocess.run) -> list[str]:
    """Return what TopoBench's suite needs and the environment of ``python`` lacks.

    Parameters
    ----------
    python : pathlib.Path
        The environment's interpreter.
    run : callable
        :func:`subprocess.run` (a stand-in in tests).

    Returns
    -------
    list of str
        One line per missing module of :data:`REQUIRED_MODULES` (with the import error), and
        one when ``python -m ruff`` does not run.
    """
    done = run([str(python), "-c", _MISSING_MODULES, *REQUIRED_MODULES], capture_output=True, text=True, check=False)
    problems = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode:
        problems.append(f"{python} could not check its modules: {(done.stderr or done.stdout).strip()}")
    ruff = run([str(python), "-m", "ruff", "--version"], capture_output=True, text=True, check=False)
    if ruff.returncode:
        problems.append(f"ruff does not run in the environment ({python} -m ruff): TopoBench's lint cannot be checked")
    return problems


def install_mutag(topobench: Path) -> None:
    """Place the bundled MUTAG raw files where TopoBench's TU loader reads them (no download)."""
    raw = topobench / "datasets" / "graph" / "TUDataset" / "MUTAG" / "raw"
    for path in (PACKAGE / "data" / "embedded" / "MUTAG" / "raw").glob("MUTAG_*.txt"):
        if not (raw / path.name).exists():
            write_bytes(raw / path.name, path.read_bytes(), root=topobench)


def make_worktree(topobench: Path, folder: Path) -> Path:
    """Make a detached ``git worktree`` of the checkout's ``HEAD`` at ``folder/TopoBench``, with MUTAG.

    The tree's folder is named ``TopoBench``: the checkout's root is itself a Python package
    (it has an ``__init__.py``), and its tests are imported under that folder's name.
    """
    tree = folder / "TopoBench"
    subprocess.run(
        ["git", "-C", str(topobench), "worktree", "add", "--detach", "--quiet", str(tree), "HEAD"],
        check=True,
    )
    install_mutag(tree)
    return tree


def remove_worktree(topobench: Path, tree: Path) -> None:
    """Remove a worktree made by :func:`make_worktree` (and its folder, when that is left empty)."""
    subprocess.run(["git", "-C", str(topobench), "worktree", "remove", "--force", str(tree)], check=False)
    with contextlib.suppress(OSError):
        tree.parent.rmdir()


def run_environment(root: Path, helpers: Path) -> dict[str, str]:
    """Return the environment of a TopoBench run in ``root``: the stand-ins' folder and the tree on ``PYTHONPATH``."""
    env = dict(os.environ, PROJECT_ROOT=str(root), HYDRA_FULL_ERROR="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(helpers), str(root), env.get("PYTHONPATH", "")]))
    return env


def suite_command(python: str, paths: Sequence[str]) -> list[str]:
    """Return the pytest command of TopoBench's ``paths``, the stand-ins loaded first."""
    return [
        str(python), "-m", "pytest", "-p", STANDINS_MODULE, "-q", "-o", "addopts=",
        "-p", "no:cacheprovider", *paths,
    ]


def run_tests(
    python: str, root: Path, helpers: Path, paths: Sequence[str], log: Path,
    coverage_files: Sequence[Path] | None = None, timeout: float | None = None,
) -> dict:
    """Run TopoBench's pytest in ``root``; return its counts, failures (and coverage per file).

    Parameters
    ----------
    python : str
        The environment's interpreter.
    root : pathlib.Path
        The TopoBench tree.
    helpers : pathlib.Path
        Folder holding the stand-in module (:data:`STANDINS`); coverage files go there too.
    paths : sequence of str
        Test folders or files, relative to ``root``.
    log : pathlib.Path
        File for pytest's output.
    coverage_files : sequence of pathlib.Path, optional
        Files whose coverage to measure.
    timeout : float, optional
        Seconds before the run is stopped.

    Returns
    -------
    dict
        ``returncode`` (``None``: timed out), ``counts`` (``{"passed": n, ...}`` of pytest's
        summary line), ``failures`` (test ids), ``seconds`` and, with ``coverage_files``,
        ``coverage``: file → (percent, statements, missing lines).
    """
    command = suite_command(python, paths)
    report = None
    if coverage_files:
        config = helpers / f"coveragerc_{log.stem}"
        write_text(
            config,
            "[run]\ninclude =\n" + "".join(f"    {p}\n" for p in coverage_files)
            + f"data_file = {helpers / ('.coverage_' + log.stem)}\n",
        )
        report = helpers / f"coverage_{log.stem}.json"
        # include patterns, never --cov=<module>: that would import TopoBench before the stand-ins
        command += ["--cov", f"--cov-config={config}", f"--cov-report=json:{report}"]
    env = run_environment(root, helpers)
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # see the module docstring
    start = time.perf_counter()
    with atomic_output(log) as handle:
        try:
            code = subprocess.run(
                command, cwd=root, env=env, stdout=handle, stderr=subprocess.STDOUT,
                check=False, timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            code = None
    text = log.read_text(errors="replace")
    last = text.strip().splitlines()[-1] if text.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", last)}
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, flags=re.M)
    result = {"returncode": code, "counts": counts, "failures": failures, "seconds": time.perf_counter() - start}
    if report is not None and report.is_file():
        files = json.loads(report.read_text())["files"]
        result["coverage"] = {
            name: (data["summary"]["percent_covered"], data["summary"]["num_statements"], data["missing_lines"])
            for name, data in files.items()
        }
    return result


def lint(python: str, root: Path, files: Sequence[Path], run: Runner = subprocess.run) -> list[str]:
    """TopoBench's ruff settings (its ``pyproject.toml``) on ``files``, by the environment's ruff.

    Parameters
    ----------
    python : str
        The environment's interpreter (``python -m ruff``; never a ruff found on ``PATH``).
    root : pathlib.Path
        The TopoBench tree.
    files : sequence of pathlib.Path
        Files to check.
    run : callable
        :func:`subprocess.run` (a stand-in in tests).

    Returns
    -------
    list of str
        The problems found; ``ruff check`` and ``ruff format --check`` each add one when they
        report something or do not run (a missing ruff is a problem, not a pass).
    """
    problems = []
    for args in (["check"], ["format", "--check"]):
        try:
            done = run(
                [str(python), "-m", "ruff", *args, "--config", str(root / "pyproject.toml"), *map(str, files)],
                cwd=root, capture_output=True, text=True, check=False,
            )
        except OSError as error:
            problems.append(f"ruff {' '.join(args)} did not run: {error}")
            continue
        if done.returncode:
            problems.append(f"ruff {' '.join(args)}: {(done.stdout + done.stderr).strip()}")
    return problems


def _counts(result: dict) -> str:
    if result["returncode"] is None:
        return "timed out"
    text = ", ".join(f"{n} {word}" for word, n in result["counts"].items()) or "no summary line"
    return f"{text} ({result['seconds']:.0f} s)"


def _finished(result: dict) -> bool:
    """Whether a pytest run ran to its summary (a collection error or a crash did not)."""
    return result["returncode"] in (0, 1) and bool(result["counts"])


@dataclass
class CheckReport:
    """What :func:`check_contribution` found.

    Attributes
    ----------
    failures : list of str
        One line per failed or unrunnable step (empty: the contribution passes).
    tree : pathlib.Path or None
        The contributed worktree (kept until the caller removes it).
    """

    failures: list[str] = field(default_factory=list)
    tree: Path | None = None


def check_contribution(
    topobench: Path, models: Sequence[str], python: str, work: Path, *,
    test_paths: Sequence[str] = TEST_PATHS, baseline: bool = True, timeout: float | None = None,
    keep: bool = False, say: Callable[[str], None] = print,
) -> CheckReport:
    """Baseline, contributed tests, suite with coverage, and lint; every step must run and pass.

    Parameters
    ----------
    topobench : pathlib.Path
        A git checkout of TopoBench (only its ``HEAD`` is used, through worktrees).
    models : sequence of str
        Contributions (keys of ``CONTRIBUTIONS``).
    python : str
        Interpreter of TopoBench's test environment.
    work : pathlib.Path
        Folder for the worktrees and the logs, holding the stand-in module (:func:`write_standins`).
    test_paths : sequence of str
        TopoBench's test folders.
    baseline : bool, default=True
        Run the suite on the untouched tree first. Without it every failure of the suite counts.
    timeout : float, optional
        Seconds per pytest run.
    keep : bool, default=False
        Keep the baseline worktree (the contributed one is in the report; the caller removes it).
    say : callable
        Where progress lines go.

    Returns
    -------
    CheckReport
        The failed steps and the contributed worktree.
    """
    from topomodelx_attention.harness.topobench.contribute import contribute

    head = subprocess.run(
        ["git", "-C", str(topobench), "log", "-1", "--format=%h %cs"], capture_output=True, text=True, check=False,
    ).stdout.strip()
    report = CheckReport()
    known: set[str] = set()
    if baseline:
        base = make_worktree(topobench, work / "baseline")
        say(f"$ (TopoBench {head}, untouched) pytest {' '.join(test_paths)}")
        result = run_tests(python, base, work, test_paths, work / "tests_baseline.log", timeout=timeout)
        say(f"  baseline: {_counts(result)}; failures: {result['failures'] or 'none'}")
        if not _finished(result):
            report.failures.append(f"the baseline run did not finish: see {work / 'tests_baseline.log'}")
        known = set(result["failures"])
        if not keep:
            remove_worktree(topobench, base)
    tree = report.tree = make_worktree(topobench, work / "contributed")
    changes = contribute(tree, list(models))
    added = [c.path for c in changes if c.action in ("create", "overwrite")]
    say(f"contribute --model {' --model '.join(models)} wrote {len(added)} files, "
        f"edited {[c.path for c in changes if c.action == 'update']}")
    own = [p for p in added if p.startswith("test/")]
    say(f"$ (TopoBench {head} + contribution) pytest {' '.join(own)}")
    result = run_tests(python, tree, work, own, work / "tests_contributed_own.log", timeout=timeout)
    say(f"  contributed tests: {_counts(result)}; failures: {result['failures'] or 'none'}")
    if not _finished(result) or result["failures"] or not result["counts"].get("passed"):
        report.failures.append(f"the contributed tests did not all pass: see {work / 'tests_contributed_own.log'}")
    thin = [tree / p for p in added if p.startswith(("topobench/nn/backbones/", "topobench/nn/wrappers/"))]
    say(f"$ (TopoBench {head} + contribution) pytest {' '.join(test_paths)} --cov (added backbones and wrappers)")
    result = run_tests(
        python, tree, work, test_paths, work / "tests_contributed.log", coverage_files=thin, timeout=timeout,
    )
    new = [f for f in result["failures"] if f not in known]
    say(f"  with the contribution: {_counts(result)}; failures not in the baseline: {new or 'none'}")
    if not _finished(result):
        report.failures.append(f"the suite with the contribution did not finish: see {work / 'tests_contributed.log'}")
    if new:
        where = "not in the baseline" if baseline else "(no baseline was run: every failure counts)"
        report.failures.append(f"suite failures {where}: {new}")
    coverage = result.get("coverage", {})
    say(f"coverage of the added backbones and wrappers (gate {COVERAGE_GATE:.0f} %):")
    for path in thin:
        name = str(path.relative_to(tree))
        percent, statements, missing = coverage.get(name, coverage.get(str(path), (0.0, 0, ["not measured"])))
        say(f"  {percent:6.1f} %  {name} ({statements} statements, missing {missing or 'none'})")
        if percent < COVERAGE_GATE:
            report.failures.append(f"coverage of {name} is {percent:.1f} %, below {COVERAGE_GATE:.0f} %")
    modules = [tree / p for p in added if p.startswith("topobench/")]
    problems = lint(python, tree, modules)
    say(f"TopoBench's ruff settings on the {len(modules)} added modules: " + ("clean" if not problems else "; ".join(problems)))
    report.failures += problems
    return report


def check_checkout(topobench: Path) -> Path:
    """Return the resolved git checkout of TopoBench, or raise ``ValueError`` naming what is wrong."""
    topobench = Path(topobench).expanduser().resolve()
    if not (topobench / "topobench" / "run.py").is_file():
        raise ValueError(
            f"{topobench} is not a TopoBench checkout (no topobench/run.py): "
            "git clone https://github.com/geometric-intelligence/TopoBench and give its folder to --topobench"
        )
    if not (topobench / ".git").exists():
        raise ValueError(f"{topobench} is not a git checkout: the check runs in `git worktree`s of its HEAD")
    return topobench


def run_check(
    topobench: Path, venv: Path, models: Sequence[str], *, logs: Path | None = None,
    timeout: float | None = None, keep: bool = False, run: Runner = subprocess.run,
    say: Callable[[str], None] = print,
) -> int:
    """Make or reuse the environment, check it, then :func:`check_contribution`; the exit status.

    Parameters
    ----------
    topobench : pathlib.Path
        A git checkout of TopoBench.
    venv : pathlib.Path
        TopoBench's test environment: made by :func:`environment_commands` when it has no
        interpreter yet, reused otherwise.
    models : sequence of str
        Contributions to check.
    logs : pathlib.Path, optional
        Folder for the logs and the temporary worktrees (default: a new temporary folder).
    timeout : float, optional
        Seconds per pytest run.
    keep : bool, default=False
        Keep the worktrees (``git worktree list``).
    run : callable
        :func:`subprocess.run` for the environment's commands (a stand-in in tests).
    say : callable
        Where the report goes.

    Returns
    -------
    int
        0 when every step ran and passed; 1 otherwise (the last line says ``FAILED`` and why).

    Raises
    ------
    ValueError
        When ``topobench`` is not a git checkout of TopoBench or a model is unknown.
    """
    from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS

    unknown = sorted(set(models) - set(CONTRIBUTIONS))
    if unknown or not models:
        raise ValueError(f"unknown --model {unknown or list(models)}: choose from {sorted(CONTRIBUTIONS)} (or 'all')")
    topobench = check_checkout(topobench)
    venv = Path(venv).expanduser().absolute()
    python = venv_python(venv)
    failures: list[str] = []
    if not python.exists():
        for command in environment_commands(venv):
            say("$ " + " ".join(command))
            if run(command, check=False).returncode:
                failures.append(f"`{' '.join(command)}` failed: TopoBench's test environment could not be made")
                break
    if not failures:
        say(f"environment {venv}: checking the modules TopoBench's suite imports and its ruff")
        failures = check_environment(python, run)
    if not failures:
        work = Path(logs).expanduser().resolve() if logs else Path(tempfile.mkdtemp(prefix="topobench_check_"))
        write_standins(work, say)
        report = check_contribution(topobench, models, str(python), work, timeout=timeout, keep=keep, say=say)
        if report.tree is not None and not keep:
            remove_worktree(topobench, report.tree)
        failures = report.failures
        say(f"logs: {work}")
    for failure in failures:
        say(f"  failed: {failure}")
    say("OK" if not failures else f"FAILED ({len(failures)} step(s) failed or could not run)")
    return 0 if not failures else 1
