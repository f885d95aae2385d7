"""Verify this package's TopoBench contributions inside a real TopoBench checkout.

TopoBench is not on PyPI: clone it (``git clone https://github.com/geometric-intelligence/TopoBench``)
and give its path. The checkout itself is never modified: the script makes temporary
``git worktree``s of its ``HEAD`` (TopoBench main) and

1. **tests** (default): runs TopoBench's own test suite (``test/nn test/pipeline test/utils``)
   on an untouched worktree (the baseline: failures there are TopoBench's own on this torch),
   then on a worktree where ``topomodelx-attention topobench contribute`` wrote the files of the
   pull requests (``--models``, default all three), with coverage of the added files (TopoBench's
   codecov gate for a contribution: at least 93 %) and TopoBench's ruff settings on the added
   modules; prints both pass/fail counts, the coverage per added file and the files a pull
   request holds;
2. **train** (``--train``): in the contributed worktree, runs ``python -m topobench
   model=<config> dataset=graph/MUTAG ...`` per model and data seed (through a small launcher)
   and prints a table of TopoBench's own test metric (``test_best_rerun/<metric>``: the checkpoint
   of the best validation epoch, as TopoBench reports). The bundled MUTAG raw files are put where
   TopoBench's ``TUDatasetLoader`` reads them, so nothing is downloaded.

**Stand-ins (this script only, never the package).** TopoBench pins torch 2.3 and imports the
compiled packages torch-scatter, torch-sparse and torch-cluster, which have no wheels for current
torch versions. The script writes a module ``tma_topobench_standins.py`` into its temporary
folder with *pure-torch stand-ins* for the functions TopoBench calls
(``torch_scatter.scatter`` / ``scatter_add``, ``torch_sparse.coalesce`` / ``spmm``;
``torch_cluster`` functions and ``torch_sparse.SparseTensor`` raise if used — only point-cloud
liftings and ``to_data_list`` need them) and loads it as a pytest plugin (``-p``) or from the
launcher, after ``torch_geometric`` and this package's scatter backend are imported, so neither
mistakes them for the compiled packages. TopoBench's pipeline test reloads the Lightning checkpoint
it has just written; torch >= 2.6 loads with ``weights_only=True`` by default and refuses its
pickled hyper-parameters (TopoBench's pinned torch 2.3 did not), so the test runs get
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (only for the checkpoints that run writes itself). Every
stand-in used is printed. TopoBench's other dependencies are pure Python, from PyPI, in a virtual
environment that has this package installed too (``benchmarks/README.md``)::

    python -m venv --system-site-packages tbvenv          # sees torch (and whatever else) installed system-wide
    tbvenv/bin/pip install -e . --no-deps                   # this package, into the venv itself
    tbvenv/bin/pip install rootutils hydra-colorlog rich tabulate einops wandb ogb pytest-mock pytest-cov
    tbvenv/bin/python benchmarks/topobench_check.py --topobench ../TopoBench

3. **challenge** (``--challenge``): in the contributed worktree, runs the TDL Challenge 2026's own
   sanity check, ``check_challenge_grid`` of TopoBench's ``2026_tdl_challenge/utils.py`` (1 epoch,
   seed 42, CSV logger, on the GraphUniverse families of its grid), per contributed model and for
   ``cell/cwn`` as a reference, and prints each run's validation metric. The function is TopoBench's,
   unchanged; the launcher only keeps the first ``--challenge-settings`` of the 12 settings and passes
   ``trainer=cpu`` and ``--challenge-graphs`` (graphs per family, default 40; the notebook generates
   1,000) as its ``extra_overrides``. Needs a TopoBench main that has the
   challenge (2026-06 or later) and ``graph-universe==0.1.2``.

Protocols of ``--train``: ``--protocol quick`` (default: 5 epochs, one seed — a smoke test) or
``topobench`` (TopoBench's MUTAG reproduction settings from its ``scripts/reproduce.sh`` for CWN:
lr 0.001, width 128, batch 32, ``max_cell_length=10``, data seeds 0, 3, 5, 7, 9, up to 500
epochs, validation every 5 epochs, early stopping with patience 10).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import topomodelx_attention
from topomodelx_attention.files import atomic_output, write_bytes, write_text

PACKAGE = Path(topomodelx_attention.__file__).resolve().parent


def _contribute():
    """``topobench contribute``'s ``(CONTRIBUTIONS, contribute)``, imported when first needed.

    The harness takes seconds to import: options are checked before it is.
    """
    from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS, contribute

    return CONTRIBUTIONS, contribute

STANDINS = r'''"""Pure-torch stand-ins for torch_scatter / torch_sparse / torch_cluster (benchmarks/topobench_check.py).

Imported first (pytest -p, or the launcher): torch_geometric and topomodelx_attention's scatter
backend are imported before the stand-ins exist, so neither mistakes them for the compiled packages.
"""
import sys
import types

import torch
import torch_geometric  # noqa: F401

import topomodelx_attention.nn.attention.scatter  # noqa: F401


def scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum"):
    dim = dim % src.dim()
    size = (int(index.max()) + 1 if index.numel() else 0) if dim_size is None else int(dim_size)
    if index.dim() == 1:
        index = index.view([-1 if d == dim else 1 for d in range(src.dim())]).expand_as(src)
    shape = list(src.shape)
    shape[dim] = size
    how = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax", "min": "amin", "mul": "prod"}[reduce]
    return torch.zeros(shape, dtype=src.dtype, device=src.device).scatter_reduce(
        dim, index, src, reduce=how, include_self=False)


def scatter_add(src, index, dim=-1, out=None, dim_size=None):
    return scatter(src, index, dim, dim_size=dim_size, reduce="sum")


def coalesce(index, value, m, n, op="add"):
    matrix = torch.sparse_coo_tensor(index, value, (m, n, *value.shape[1:])).coalesce()
    return matrix.indices(), matrix.values()


def spmm(index, value, m, n, matrix):
    return torch.sparse.mm(torch.sparse_coo_tensor(index, value, (m, n)), matrix)


class SparseTensor:
    """Named by TopoBench's to_data_list helper; using it needs the real torch_sparse."""

    @classmethod
    def from_torch_sparse_coo_tensor(cls, *args, **kwargs):
        raise NotImplementedError("torch_sparse.SparseTensor has no stand-in in topobench_check")


def _absent(name):
    def fail(*args, **kwargs):
        raise NotImplementedError(f"torch_cluster.{name} has no stand-in in topobench_check")
    return fail


MEMBERS = {
    "torch_scatter": {"scatter": scatter, "scatter_add": scatter_add},
    "torch_sparse": {"coalesce": coalesce, "spmm": spmm, "SparseTensor": SparseTensor},
    # names TopoBench imports at module level (main of 2026-06 imports knn_graph / radius_graph
    # in its data manipulations and liftings); calling one raises
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

LAUNCHER = r'''
import os, runpy, sys
import tma_topobench_standins  # noqa: F401  before TopoBench is imported
from topomodelx_attention.harness.topobench import register_topobench_transforms

register_topobench_transforms()  # our PEs become TopoBench transforms (by transform_name)
os.environ.setdefault("PROJECT_ROOT", os.getcwd())
sys.argv = ["topobench", *sys.argv[1:]]
runpy.run_module("topobench", run_name="__main__")
'''

CHALLENGE_LAUNCHER = r'''
import importlib, itertools, os, sys
from pathlib import Path
import tma_topobench_standins  # noqa: F401  before TopoBench is imported
from topomodelx_attention.harness.topobench import register_topobench_transforms

register_topobench_transforms()
root = Path(os.getcwd())
sys.path.insert(0, str(root))
utils = importlib.import_module("2026_tdl_challenge.utils")
model, count, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
settings = list(itertools.islice(utils.iter_challenge_settings(), count))
utils.iter_challenge_settings = lambda: iter(settings)  # the first `count` settings of the grid
utils.check_challenge_grid(project_root=root, model_config=model, extra_overrides=extra, quiet=False)
'''
#: Validation metric of each challenge task in TopoBench's CSV log.
CHALLENGE_METRICS = {"community_detection": "val/accuracy", "triangle_counting": "val/mse"}

#: Coverage TopoBench's codecov asks of a contribution's added code.
COVERAGE_GATE = 93.0
#: TopoBench's test folders the check runs.
TEST_PATHS = ["test/nn", "test/pipeline", "test/utils"]

#: TopoBench's MUTAG settings for cell models (its scripts/reproduce.sh, CWN line).
TOPOBENCH_PROTOCOL = [
    "optimizer.parameters.lr=0.001",
    "model.feature_encoder.out_channels=128",
    "model.feature_encoder.proj_dropout=0.25",
    "model.readout.readout_name=PropagateSignalDown",
    "dataset.dataloader_params.batch_size=32",
    "trainer.max_epochs=500",
    "trainer.min_epochs=50",
    "trainer.check_val_every_n_epoch=5",
    "callbacks.early_stopping.patience=10",
]
TOPOBENCH_SEEDS = [0, 3, 5, 7, 9]
#: Protocol overrides that exist only for one model domain (TopoBench's default liftings).
DOMAIN_PROTOCOL = {"cell": ["transforms.graph2cell_lifting.max_cell_length=10"]}
#: Layers per model under the TopoBench protocol (CWN: 2 in reproduce.sh).
LAYERS = {"cell/cwn": 2}


def install_mutag(topobench: Path) -> None:
    """Place the bundled MUTAG raw files where TopoBench's TU loader reads them."""
    raw = topobench / "datasets" / "graph" / "TUDataset" / "MUTAG" / "raw"
    for path in (PACKAGE / "data" / "embedded" / "MUTAG" / "raw").glob("MUTAG_*.txt"):
        if not (raw / path.name).exists():
            write_bytes(raw / path.name, path.read_bytes(), root=topobench)


def make_worktree(topobench: Path, folder: Path) -> Path:
    """A detached ``git worktree`` of the checkout's ``HEAD`` at ``folder`` (MUTAG installed)."""
    subprocess.run(
        ["git", "-C", str(topobench), "worktree", "add", "--detach", "--quiet", str(folder), "HEAD"],
        check=True,
    )
    install_mutag(folder)
    return folder


def remove_worktree(topobench: Path, folder: Path) -> None:
    """Remove a worktree made by :func:`make_worktree`."""
    subprocess.run(
        ["git", "-C", str(topobench), "worktree", "remove", "--force", str(folder)], check=False,
    )


def _env(root: Path, helpers: Path) -> dict[str, str]:
    env = dict(os.environ, PROJECT_ROOT=str(root), HYDRA_FULL_ERROR="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(helpers), str(root), env.get("PYTHONPATH", "")]))
    return env


def run_tests(
    python: str, root: Path, helpers: Path, paths: list[str], log: Path,
    coverage_files: list[Path] | None = None, timeout: float | None = None,
) -> dict:
    """Run TopoBench's pytest in ``root``; return counts (and coverage per file)."""
    command = [
        python, "-m", "pytest", "-p", "tma_topobench_standins", "-q", "-o", "addopts=",
        "-p", "no:cacheprovider", *paths,
    ]
    report = None
    if coverage_files:
        config = helpers / f"coveragerc_{root.name}"
        write_text(
            config,
            "[run]\ninclude =\n" + "".join(f"    {p}\n" for p in coverage_files)
            + f"data_file = {helpers / ('.coverage_' + root.name)}\n",
        )
        report = helpers / f"coverage_{root.name}.json"
        # include patterns, never --cov=<module>: that would import TopoBench before the stand-ins
        command += ["--cov", f"--cov-config={config}", f"--cov-report=json:{report}"]
    env = _env(root, helpers)
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
    counts = {
        word: int(number)
        for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", text.splitlines()[-1] if text else "")
    }
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, flags=re.M)
    result = {"returncode": code, "counts": counts, "failures": failures, "seconds": time.perf_counter() - start}
    if report is not None and report.is_file():
        files = json.loads(report.read_text())["files"]
        result["coverage"] = {
            name: (data["summary"]["percent_covered"], data["summary"]["num_statements"], data["missing_lines"])
            for name, data in files.items()
        }
    return result


def lint(root: Path, files: list[Path]) -> list[str]:
    """TopoBench's ruff settings (its pyproject) on ``files``: the problems found."""
    ruff = shutil.which("ruff")
    if ruff is None:
        return ["ruff is not installed: lint not checked"]
    problems = []
    for args in (["check"], ["format", "--check"]):
        done = subprocess.run(
            [ruff, *args, "--config", str(root / "pyproject.toml"), *map(str, files)],
            cwd=root, capture_output=True, text=True, check=False,
        )
        if done.returncode:
            problems.append(f"ruff {' '.join(args)}: {(done.stdout + done.stderr).strip()}")
    return problems


def run_one(python: str, launcher: Path, root: Path, helpers: Path, overrides: list[str], log: Path) -> dict[str, float]:
    """Run TopoBench's training once; return its ``test_best_rerun`` metrics (empty on failure)."""
    with atomic_output(log) as handle:
        code = subprocess.run(
            [python, str(launcher), *overrides], cwd=root, env=_env(root, helpers), stdout=handle,
            stderr=subprocess.STDOUT, check=False,
        ).returncode
    text = log.read_text(errors="replace")
    metrics = {}
    match = re.search(r"\{('test_best_rerun/[^}]*)\}", text)
    if code == 0 and match:
        for key, value in re.findall(r"'test_best_rerun/(\w+)': ([-\d.e]+)", match.group(0)):
            metrics[key] = float(value)
    return metrics


def _counts(result: dict) -> str:
    counts = result["counts"]
    if result["returncode"] is None:
        return "timed out"
    text = ", ".join(f"{n} {word}" for word, n in counts.items()) or "no summary line"
    return f"{text} ({result['seconds']:.0f} s)"


def check_tests(args: argparse.Namespace, topobench: Path, work: Path) -> bool:
    """Baseline and contributed test runs; return whether the contribution passes."""
    ok = True
    if not args.no_baseline:
        base = make_worktree(topobench, work / "baseline")
        print(f"$ (TopoBench {args.head}, untouched) pytest {' '.join(args.test_paths)}", flush=True)
        baseline = run_tests(args.python, base, work, args.test_paths, work / "tests_baseline.log", timeout=args.timeout)
        print(f"  baseline: {_counts(baseline)}; failures: {baseline['failures'] or 'none'}", flush=True)
        if not args.keep:
            remove_worktree(topobench, base)
    tree = make_worktree(topobench, work / "contributed")
    changes = _contribute()[1](tree, args.models)
    added = [c.path for c in changes if c.action in ("create", "overwrite")]
    edited = [c.path for c in changes if c.action == "update"]
    print(f"contribute --model {' --model '.join(args.models)} wrote {len(added)} files, edited {edited}:")
    for path in added:
        print(f"  + {path}")
    modules = [tree / p for p in added if p.startswith("topobench/")]
    ours = [PACKAGE / "harness" / "topobench" / name for name in ("backbones.py", "wrapper.py")]
    print(f"$ (TopoBench {args.head} + contribution) pytest {' '.join(args.test_paths)} --cov (added files)", flush=True)
    result = run_tests(
        args.python, tree, work, args.test_paths, work / "tests_contributed.log",
        coverage_files=[*modules, *ours], timeout=args.timeout,
    )
    print(f"  with the contribution: {_counts(result)}; failures: {result['failures'] or 'none'}")
    baseline_failures = set(baseline["failures"]) if not args.no_baseline else set()
    new = [f for f in result["failures"] if f not in baseline_failures]
    if new or result["returncode"] is None or not result["counts"].get("passed"):
        ok = False
        print(f"  FAILURES NOT IN THE BASELINE: {new or '(run did not finish)'}")
    coverage = result.get("coverage", {})
    print(f"coverage of the added files (gate {COVERAGE_GATE:.0f} %):")
    for path in modules:
        name = str(path.relative_to(tree))
        percent, statements, missing = coverage.get(name, coverage.get(str(path), (0.0, 0, ["not measured"])))
        ok &= percent >= COVERAGE_GATE
        print(f"  {percent:6.1f} %  {name} ({statements} statements, missing {missing or 'none'})")
    print("coverage of this package's code they call (information):")
    for path in ours:
        entry = next((v for k, v in coverage.items() if Path(k).name == path.name and "topobench" in k), None)
        if entry:
            print(f"  {entry[0]:6.1f} %  {path.relative_to(PACKAGE.parent)} (missing lines {entry[2]})")
    problems = lint(tree, modules)
    print("TopoBench's ruff settings on the added modules: " + ("clean" if not problems else "; ".join(problems)))
    ok &= not [p for p in problems if not p.startswith("ruff is not installed")]
    print(f"logs: {work}")
    args.tree = tree
    return ok


def contributed_tree(args: argparse.Namespace, topobench: Path, work: Path) -> Path:
    """The worktree holding the contribution: :func:`check_tests`'s, else a new one (kept in ``args.tree``)."""
    if getattr(args, "tree", None) is None:
        args.tree = make_worktree(topobench, work / "contributed")
        _contribute()[1](args.tree, args.models)
    return args.tree


def check_training(args: argparse.Namespace, topobench: Path, work: Path) -> bool:
    """Train every model in the contributed worktree; return whether all runs succeeded."""
    tree = contributed_tree(args, topobench, work)
    launcher = work / "launch_topobench.py"
    write_text(launcher, LAUNCHER)
    contributions = _contribute()[0]
    models = args.train_models or [*(contributions[m].pipeline_model for m in args.models), "cell/cwn"]
    seeds = args.seeds or (TOPOBENCH_SEEDS if args.protocol == "topobench" else [0])
    # TopoBench sizes models by max_dim_if_lifted (3 for its graph data sets) while its cycle
    # lifting stops at rank 2: its own cell models then fail with KeyError 'x_3'. Our backbones
    # pad the empty rank and run either way; for a like-for-like comparison every run uses rank 2.
    common = [f"dataset={args.dataset}", "trainer=cpu", "logger=csv"]
    if args.max_dim is not None:
        common.append(f"dataset.parameters.max_dim_if_lifted={args.max_dim}")
    if args.protocol == "topobench":
        common += TOPOBENCH_PROTOCOL
    else:
        common += [f"trainer.max_epochs={args.epochs}", "trainer.check_val_every_n_epoch=1"]
    rows = []
    for model in models:
        scores, seconds = [], []
        layers = []
        if args.protocol == "topobench":
            layers += DOMAIN_PROTOCOL.get(model.split("/")[0], [])
            layers += [f"model.backbone.n_layers={LAYERS[model]}"] if model in LAYERS else []
        for seed in seeds:
            overrides = [f"model={model}", *common, *layers, f"dataset.split_params.data_seed={seed}", *args.overrides]
            log = work / f"train_{model.replace('/', '_')}_seed{seed}.log"
            print("$ python -m topobench " + " ".join(overrides), flush=True)
            start = time.perf_counter()
            metrics = run_one(args.python, launcher, tree, work, overrides, log)
            seconds.append(time.perf_counter() - start)
            if args.metric in metrics:
                scores.append(metrics[args.metric])
                print(f"  test {args.metric} {metrics[args.metric]:.4f}  ({seconds[-1]:.0f} s, log {log})", flush=True)
            else:
                print(f"  FAILED ({seconds[-1]:.0f} s): see {log}", flush=True)
        rows.append((model, scores, len(seeds), sum(seconds)))
    print(f"\nTopoBench {args.dataset}, protocol {args.protocol}, data seeds {seeds}")
    print(f"| model | test {args.metric} (mean ± std) | runs ok | total seconds |")
    print("|---|---:|---:|---:|")
    failed = False
    for model, scores, total, secs in rows:
        if scores:
            std = statistics.stdev(scores) if len(scores) > 1 else 0.0
            cell = f"{statistics.mean(scores):.4f} ± {std:.4f}"
        else:
            cell = "failed"
        failed |= len(scores) < total
        print(f"| {model} | {cell} | {len(scores)}/{total} | {secs:.0f} |")
    return not failed


def last_logged(csv_path: Path, column: str) -> float | None:
    """Last non-empty value of ``column`` in a Lightning CSV log (``None`` if there is none)."""
    if not csv_path.is_file():
        return None
    with csv_path.open() as handle:
        values = [row[column] for row in csv.DictReader(handle) if row.get(column)]
    return float(values[-1]) if values else None


def check_challenge(args: argparse.Namespace, topobench: Path, work: Path) -> bool:
    """Run the challenge's ``check_challenge_grid`` per model; return whether every run succeeded."""
    tree = contributed_tree(args, topobench, work)
    if not (tree / "2026_tdl_challenge" / "utils.py").is_file():
        print(f"--challenge: TopoBench {args.head} has no 2026_tdl_challenge/utils.py (main of 2026-06 or later has)")
        return False
    launcher = work / "launch_challenge_check.py"
    write_text(launcher, CHALLENGE_LAUNCHER)
    contributions = _contribute()[0]
    models = [*(contributions[m].pipeline_model for m in args.models), "cell/cwn"]
    extra = ["trainer=cpu", f"dataset.loader.parameters.generation_parameters.family_parameters.n_graphs={args.challenge_graphs}"]
    env = dict(_env(tree, work), TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")  # its runs reload their own checkpoints
    ok, table = True, []
    for model in models:
        shutil.rmtree(tree / "logs" / "check", ignore_errors=True)
        log = work / f"challenge_{model.replace('/', '_')}.log"
        print(f"$ check_challenge_grid(model_config={model!r}) on {args.challenge_settings} settings, "
              f"{args.challenge_graphs} graphs per family", flush=True)
        start = time.perf_counter()
        with atomic_output(log) as handle:
            code = subprocess.run(
                [args.python, str(launcher), model, str(args.challenge_settings), *extra], cwd=tree, env=env,
                stdout=handle, stderr=subprocess.STDOUT, check=False,
            ).returncode
        seconds = time.perf_counter() - start
        ok &= code == 0
        print(f"  {'passed' if code == 0 else 'FAILED'} ({seconds:.0f} s, log {log})", flush=True)
        for task, column in CHALLENGE_METRICS.items():
            for run in sorted((tree / "logs" / "check").glob(f"{task}_*")):
                value = last_logged(run / "csv" / "version_0" / "metrics.csv", column)
                table.append((model, task, run.name[len(task) + 1:], column, value))
    print("\n| model | task | setting | validation metric (1 epoch) |")
    print("|---|---|---|---:|")
    for model, task, slug, column, value in table:
        print(f"| {model} | {task} | {slug} | {column} {'–' if value is None else f'{value:.4g}'} |")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topobench", required=True, type=Path, help="path of a TopoBench checkout (git)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with TopoBench's dependencies, pytest-cov and this package")
    parser.add_argument("--models", nargs="+", default=None,
                        help="contributions to check (default: all; names as `topobench contribute` takes)")
    parser.add_argument("--no-tests", action="store_true", help="skip TopoBench's test suite")
    parser.add_argument("--no-baseline", action="store_true", help="skip the run on untouched TopoBench")
    parser.add_argument("--test-paths", nargs="+", default=TEST_PATHS, help="TopoBench test folders / files")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per pytest run")
    parser.add_argument("--train", action="store_true", help="also train on MUTAG and print TopoBench's metric")
    parser.add_argument("--train-models", nargs="+", default=None,
                        help="TopoBench model configs to train (default: the contributions' and cell/cwn)")
    parser.add_argument("--dataset", default="graph/MUTAG")
    parser.add_argument("--protocol", choices=["quick", "topobench"], default="quick")
    parser.add_argument("--epochs", type=int, default=5, help="epochs of the quick protocol")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="data seeds (quick: 0; topobench: 0 3 5 7 9)")
    parser.add_argument("--metric", default="accuracy")
    parser.add_argument("--max-dim", type=int, default=2,
                        help="dataset.parameters.max_dim_if_lifted for every training run (TopoBench's own cell "
                             "models need 2 with the cycle lifting; -1: keep TopoBench's default)")
    parser.add_argument("--challenge", action="store_true",
                        help="also run the TDL Challenge 2026's check_challenge_grid per model")
    parser.add_argument("--challenge-settings", type=int, default=12, help="first K of the grid's 12 settings")
    parser.add_argument("--challenge-graphs", type=int, default=40, help="graphs per generated family")
    parser.add_argument("--logs", type=Path, default=None, help="folder for logs and the temporary worktrees")
    parser.add_argument("--keep", action="store_true", help="keep the worktrees (git worktree list)")
    parser.add_argument("overrides", nargs="*", help="extra hydra overrides for every training run")
    args = parser.parse_args(argv)
    topobench = args.topobench.resolve()
    if not (topobench / "topobench" / "run.py").is_file():
        parser.error(f"{topobench} is not a TopoBench checkout (no topobench/run.py)")
    if not (topobench / ".git").exists():
        parser.error(f"{topobench} is not a git checkout: the check runs in `git worktree`s of its HEAD")
    if args.max_dim == -1:
        args.max_dim = None
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    if args.no_tests and not (args.train or args.challenge):
        parser.error("nothing to do: --no-tests without --train or --challenge")
    if not 1 <= args.challenge_settings <= 12 or args.challenge_graphs < 10:
        parser.error("--challenge-settings must be in 1..12 and --challenge-graphs at least 10")
    contributions = _contribute()[0]
    unknown = sorted(set(args.models or ()) - set(contributions))
    if unknown:
        parser.error(f"--models: unknown contribution {unknown[0]!r} (choose from {', '.join(sorted(contributions))})")
    args.models = args.models or list(contributions)
    args.head = subprocess.run(
        ["git", "-C", str(topobench), "log", "-1", "--format=%h %cs"], capture_output=True, text=True, check=True,
    ).stdout.strip()
    work = (args.logs or Path(tempfile.mkdtemp(prefix="topobench_check_"))).resolve()
    write_text(work / "tma_topobench_standins.py", STANDINS, root=work)
    print(
        "stand-ins of this check (TopoBench pins torch 2.3): torch_scatter.scatter/scatter_add, "
        "torch_sparse.coalesce/spmm in pure torch (torch_cluster, torch_sparse.SparseTensor raise), "
        "unless the compiled packages are installed; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for the test runs "
        "(the pipeline test reloads its own Lightning checkpoint)", flush=True,
    )
    ok = True
    try:
        if not args.no_tests:
            ok &= check_tests(args, topobench, work)
        if args.train:
            ok &= check_training(args, topobench, work)
        if args.challenge:
            ok &= check_challenge(args, topobench, work)
    finally:
        tree = getattr(args, "tree", None) or (work / "contributed")
        if not args.keep and tree.exists():
            remove_worktree(topobench, tree)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
