"""Train this package's TopoBench contributions inside a real TopoBench checkout (and check them).

TopoBench is not on PyPI: clone it into a folder named ``TopoBench``
(``git clone https://github.com/geometric-intelligence/TopoBench``; its root is a Python package
and its tests are imported under that folder's name) and give its path. The checkout itself is
never modified: the script makes temporary ``git worktree``s of its ``HEAD`` (TopoBench main) and

1. **tests** (default): what ``topomodelx-attention topobench check`` runs
   (:func:`topomodelx_attention.harness.topobench.check.check_contribution`: TopoBench's suite on
   the untouched tree, then the contributed tests, the suite with coverage of the added backbones
   and wrappers, and TopoBench's ruff settings on the added modules), in the interpreter
   ``--python`` — that command also makes the environment;
2. **train** (``--train``): in the contributed worktree, runs ``python -m topobench
   model=<config> dataset=graph/MUTAG ...`` per model and data seed (through a small launcher)
   and prints a table of TopoBench's own test metric (``test_best_rerun/<metric>``: the checkpoint
   of the best validation epoch, as TopoBench reports). The bundled MUTAG raw files are put where
   TopoBench's ``TUDatasetLoader`` reads them, so nothing is downloaded.

The stand-ins for torch-scatter / torch-sparse / torch-cluster (no wheels for current torch) are
the check's (:data:`topomodelx_attention.harness.topobench.check.STANDINS`), loaded as a pytest
plugin or from the launcher, in the script's processes only. The launcher of ``--train`` and
``--challenge`` also registers this package's positional encodings as TopoBench transforms, so
their environment has this package installed: the one ``topobench check`` makes plus this
package (``benchmarks/README.md``)::

    topomodelx-attention topobench check --topobench TopoBench --model all --venv tbvenv
    tbvenv/bin/pip install -e . --no-deps                   # this package, into the venv itself
    tbvenv/bin/python benchmarks/topobench_check.py --topobench TopoBench --no-tests --train

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
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from topomodelx_attention.files import atomic_output, write_text
from topomodelx_attention.harness.topobench.check import (
    TEST_PATHS,
    check_contribution,
    make_worktree,
    remove_worktree,
    run_environment,
    write_standins,
)


def _contribute():
    """``topobench contribute``'s ``(CONTRIBUTIONS, contribute)``, imported when first needed.

    The harness takes seconds to import: options are checked before it is.
    """
    from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS, contribute

    return CONTRIBUTIONS, contribute

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


def run_one(python: str, launcher: Path, root: Path, helpers: Path, overrides: list[str], log: Path) -> dict[str, float]:
    """Run TopoBench's training once; return its ``test_best_rerun`` metrics (empty on failure)."""
    with atomic_output(log) as handle:
        code = subprocess.run(
            [python, str(launcher), *overrides], cwd=root, env=run_environment(root, helpers), stdout=handle,
            stderr=subprocess.STDOUT, check=False,
        ).returncode
    text = log.read_text(errors="replace")
    metrics = {}
    match = re.search(r"\{('test_best_rerun/[^}]*)\}", text)
    if code == 0 and match:
        for key, value in re.findall(r"'test_best_rerun/(\w+)': ([-\d.e]+)", match.group(0)):
            metrics[key] = float(value)
    return metrics


def check_tests(args: argparse.Namespace, topobench: Path, work: Path) -> bool:
    """``topobench check``'s steps in ``--python``'s environment; return whether all passed."""
    report = check_contribution(
        topobench, args.models, args.python, work, test_paths=args.test_paths, baseline=not args.no_baseline,
        timeout=args.timeout, keep=args.keep, say=lambda line: print(line, flush=True),
    )
    args.tree = report.tree
    for failure in report.failures:
        print(f"  failed: {failure}")
    return not report.failures


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
    env = dict(run_environment(tree, work), TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")  # its runs reload their own checkpoints
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
    write_standins(work, lambda line: print(line, flush=True))
    ok = True
    try:
        if not args.no_tests:
            ok &= check_tests(args, topobench, work)
        if args.train:
            ok &= check_training(args, topobench, work)
        if args.challenge:
            ok &= check_challenge(args, topobench, work)
    finally:
        tree = getattr(args, "tree", None) or (work / "contributed" / "TopoBench")
        if not args.keep and tree.exists():
            remove_worktree(topobench, tree)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
