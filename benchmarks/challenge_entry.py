"""The TopoBench pull request's one configuration, scored by TopoBench's own ``run_challenge_grid``.

The TDL Challenge 2026 notebook (TopoBench's ``2026_tdl_challenge/run_evaluation.ipynb``) sets one
``MODEL_CONFIG``, calls ``run_challenge_grid(project_root=..., model_config=MODEL_CONFIG)`` and
saves its rows with ``save_challenge_artifacts``. This script does the same with the
configuration that ``topobench contribute`` writes (default ``cell/cellular_transformer_rrwp``),
one row at a time so that a run of hours can stop and resume:

* a ``git worktree`` of the TopoBench checkout's ``HEAD`` in ``<work>/TopoBench`` (the folder
  must be named ``TopoBench``) receives the pull request (``contribute``); it is made once and
  reused on resume, so every row runs the same code;
* **prepare**: one process per task generates the GraphUniverse families of all 12 settings and
  lifts them (TopoBench's loader and preprocessor, ``build_datamodule_for_setting``), as the
  notebook's ``check_challenge_grid`` does before the grid — the training processes then only
  read them;
* **rows**: each pending row (task, setting, training seed) is one call of TopoBench's
  ``run_challenge_grid`` in a process of its own: ``experiment_modes`` = that task,
  ``train_seeds`` = that seed, ``limit_runs=1`` with the settings iterator starting at that setting
  (the function itself is TopoBench's, unchanged; the out-of-distribution tests still cover the
  other 11 settings, whose entries are put back in the grid's order). Everything else is the
  notebook's: the model's config as the PR ships it, TopoBench's optimiser and schedule
  (``configs/optimizer/default.yaml``: Adam, lr 0.001, StepLR 50 / 0.5), the default
  transforms of its domain (cell models on graph data: ``graph2cell/cycle``), width 64 (the
  notebook forces it), at most 500 epochs, patience 10, batch 16, 1,000 graphs per family;
* ``--workers`` processes (default 2) run at the same time, each with one thread
  (``torch.set_num_threads(1)``, ``OMP_NUM_THREADS=1``), at niceness ``--niceness`` (default 19),
  and each dies with this process (``prctl(PR_SET_PDEATHSIG)``);
* a finished row is added to ``results.json`` at once (atomic replace): a second call runs only
  the missing rows. ``results.json`` has the layout ``save_challenge_artifacts`` writes
  (metadata ``study_id``, ``model_config``, ``generated_at_utc``, ``n_runs``, ``train_seeds``,
  ``heatmap_note``; rows with NaN as ``null``); ``conditions.json`` beside it records how the
  rows differ from the notebook (CPU instead of its default GPU trainer, wandb offline, the seeds
  run, a smaller smoke run), the resolved lifting and optimiser and a digest of the pull request's
  model code and config. A later call with other conditions, or whose worktree holds other model
  code or config than the recorded rows ran with, is refused.

Runs with fewer graphs or epochs than the notebook (``--n-graphs``, ``--max-epochs``: smoke
tests) go to ``results_n<N>_e<E>.json``, never into ``results.json``.

The interpreter (``--python``) is TopoBench's environment (``topomodelx-attention topobench check
... --venv DIR`` makes it); the compiled PyG extensions are the check's stand-ins. This package
is not imported by the training processes: the pull request carries its model code.

Examples
--------
A smoke run (one setting, one task, 40 graphs, one epoch)::

    nice -n 19 python benchmarks/challenge_entry.py --topobench TopoBench --python tbvenv/bin/python
        --tasks community_detection --settings h_lo_d_lo_pl_lo --n-graphs 40 --max-epochs 1 --workers 1

The 24 seed-42 rows, in the background::

    nohup nice -n 19 python benchmarks/challenge_entry.py --topobench TopoBench
        --python tbvenv/bin/python > outputs/challenge_entry.log 2>&1 &
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topomodelx_attention import files
from topomodelx_attention.harness.graphuniverse_grid import (
    PROTOCOL,
    SETTINGS,
    TASKS,
    notebook_slug,
    read_results,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "graphuniverse"
"""Folder of the results: the entry's files go to ``<RESULTS>/challenge_entry/``."""
WORK = ROOT / "outputs" / "challenge_entry"
"""Worktree, logs and the launcher lock."""
ENTRY = "challenge_entry"
MODEL_CONFIG = "cell/cellular_transformer_rrwp"
"""The TopoBench config of the entry (the one the pull request's README row and results name)."""
ROW_MARK = "@@challenge-row@@ "
CONFIG_MARK = "@@challenge-config@@ "
PR_SET_PDEATHSIG = 1
HEATMAP_NOTE = "Cells show mean ± std over train_seeds (in-distribution test)."
"""``save_challenge_artifacts``' note (TopoBench main of 2026-06-11)."""

LAUNCHER = r'''
"""One step of the challenge entry inside a TopoBench worktree (benchmarks/challenge_entry.py)."""
import dataclasses, importlib, json, sys
from pathlib import Path

import torch

torch.set_num_threads(1)
import tma_topobench_standins  # noqa: F401  before TopoBench is imported

root = Path.cwd()
sys.path.insert(0, str(root))
utils = importlib.import_module("2026_tdl_challenge.utils")
spec = json.loads(sys.argv[1])


def sized(setting):
    """The setting with the run's graphs per family (the notebook's 1,000 unless a smoke run asks fewer)."""
    patch = {"family_parameters": {"n_graphs": spec["n_graphs"]}}
    return dataclasses.replace(setting, generation_parameters=utils._deep_merge(setting.generation_parameters, patch))


settings = [sized(s) for s in utils.iter_challenge_settings()]
modes = [mode for mode in utils.DEFAULT_EXPERIMENT_MODES if mode[0] in spec["tasks"]]
if spec["step"] == "prepare":
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    utils.ensure_repo_on_path(root)
    utils.register_all_resolvers()
    for name, _, dataset_group, mode_overrides in modes:
        for setting in settings:
            GlobalHydra.instance().clear()
            with initialize_config_dir(version_base="1.3", config_dir=str(root / "configs")):
                cfg = compose(config_name="run.yaml", overrides=[
                    dataset_group, f"model={spec['model']}", *mode_overrides,
                    f"paths.output_dir={root / 'logs' / 'prepare'}", f"paths.work_dir={root}",
                    *utils.challenge_setting_to_hydra_overrides(setting),
                    *utils.CHALLENGE_GRID_HYDRA_OVERRIDES, *spec["extra"],
                ])
            utils.build_datamodule_for_setting(cfg, setting)
            print(f"prepared {name} {setting.run_slug}", flush=True)
        resolved = {key: OmegaConf.to_container(cfg[key], resolve=True) for key in ("transforms", "optimizer")}
        print("@@challenge-config@@ " + json.dumps({name: resolved}), flush=True)
else:
    target = next(s for s in settings if s.run_slug == spec["slug"])
    order = [target, *(s for s in settings if s is not target)]
    utils.iter_challenge_settings = lambda: iter(order)  # limit_runs=1 then runs `target` only

    # wandb offline keeps the run's config in its binary log (no files/config.yaml for the notebook's
    # reader): the values are taken where TopoBench hands them to the logger, the same values
    from lightning.pytorch.loggers.wandb import WandbLogger

    logged, log_hyperparams = {}, WandbLogger.log_hyperparams

    def capture(self, params, *args, **kwargs):
        for key in utils._WANDB_RUN_CONFIG_KEYS:
            if isinstance(params, dict) and key in params:
                logged[key] = params[key].item() if hasattr(params[key], "item") else params[key]
        return log_hyperparams(self, params, *args, **kwargs)

    WandbLogger.log_hyperparams = capture
    utils._read_wandb_run_metrics_from_config_yaml = lambda output_dir: {
        key: logged[key] for key in utils._WANDB_RUN_CONFIG_KEYS if key in logged
    }
    rows, _ = utils.run_challenge_grid(
        project_root=root, model_config=spec["model"], limit_runs=1, extra_overrides=spec["extra"],
        experiment_modes=modes, study_id=spec["study_id"], quiet=True, train_seeds=(spec["seed"],),
    )
    row = rows[0]
    row["ood_test"] = {s.run_slug: row["ood_test"][s.run_slug] for s in settings if s.run_slug in row["ood_test"]}
    print("@@challenge-row@@ " + json.dumps(utils._json_sanitize(row)), flush=True)
'''


def die_with_parent(niceness: int) -> Callable[[], None]:
    """Return a ``preexec_fn`` that lowers the child's priority and ties its life to this process.

    Parameters
    ----------
    niceness : int
        Niceness the child runs at (0..19; a process already nicer keeps its own).

    Returns
    -------
    callable
        Run in the child between ``fork`` and ``exec``: ``prctl(PR_SET_PDEATHSIG, SIGTERM)``
        on Linux (the child gets SIGTERM when the thread that started it ends), then
        ``os.nice``. A child whose parent is already gone exits at once.
    """
    parent = os.getpid()

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the prctl
                os._exit(1)
        os.nice(max(0, niceness - os.nice(0)))

    return preexec


def row_key(row: Mapping[str, Any]) -> tuple[str, str, int]:
    """``(task, notebook setting slug, training seed)`` of a row."""
    return row["experiment"], row["run_slug"], int(row["train_seed"])


def payload(rows: Sequence[Mapping[str, Any]], model_config: str) -> dict[str, Any]:
    """Return ``results.json`` as ``save_challenge_artifacts`` writes it, rows in the notebook's order.

    Parameters
    ----------
    rows : sequence of Mapping
        Rows of ``run_challenge_grid`` (NaN already ``null``).
    model_config : str
        ``MODEL_CONFIG`` of the run.

    Returns
    -------
    dict
        ``{"metadata": {study_id, model_config, generated_at_utc, n_runs, train_seeds,
        heatmap_note}, "results": [...]}``; the notebook loops task, setting, seed.
    """
    order = {(t, notebook_slug(s)): i for i, (t, s) in enumerate((t, s) for t in TASKS for s in SETTINGS)}
    ordered = sorted(rows, key=lambda r: (order.get(row_key(r)[:2], len(order)), row_key(r)[2]))
    return {
        "metadata": {
            "study_id": ENTRY,
            "model_config": model_config,
            "generated_at_utc": datetime.now(timezone.utc).isoformat(),
            "n_runs": len(ordered),
            "train_seeds": sorted({int(r["train_seed"]) for r in ordered}),
            "heatmap_note": HEATMAP_NOTE,
        },
        "results": [dict(r) for r in ordered],
    }


def add_row(path: Path, row: Mapping[str, Any], model_config: str) -> int:
    """Add (or replace) one row of ``path`` atomically; return the number of rows now."""
    rows = [r for r in read_results(path)["results"] if row_key(r) != row_key(row)] + [dict(row)]
    files.write_text(path, json.dumps(payload(rows, model_config), indent=2) + "\n")
    return len(rows)


def pending(path: Path, tasks: Sequence[str], settings: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, str, int]]:
    """Rows asked for and not in ``path``, in the notebook's order (task, setting, seed)."""
    done = {row_key(r) for r in read_results(path)["results"]}
    return [(t, s, sd) for t in tasks for s in settings for sd in seeds if (t, notebook_slug(s), sd) not in done]


def check_conditions(path: Path, conditions: Mapping[str, Any]) -> None:
    """Refuse to add rows of other conditions to an existing entry (``ValueError`` saying what differs)."""
    if not path.is_file():
        return
    old = json.loads(path.read_text()).get("run", {})
    for key, value in conditions["run"].items():
        if key in old and old[key] != value:
            raise ValueError(
                f"{path} records {key}={old[key]!r}, this call has {value!r}: pass the same options to "
                "continue, or move the results and the work folder away to start over"
            )


def check_code(conditions_path: Path, results_path: Path, code: str) -> None:
    """Refuse to add rows of other model code or config to recorded rows (``ValueError``).

    ``code`` is the :func:`digest` of the worktree's pull request; ``conditions.json`` records the
    digest the recorded rows ran with.
    """
    if not conditions_path.is_file() or not results_path.is_file():
        return
    recorded = json.loads(conditions_path.read_text()).get("code_sha256")
    rows = json.loads(results_path.read_text()).get("results", [])
    if rows and recorded is not None and recorded != code:
        raise ValueError(
            f"the {len(rows)} rows of {results_path} ran with other model code or config (sha256 "
            f"{recorded[:12]}…, the worktree's pull request now {code[:12]}…): move the results and "
            "the work folder away to score the changed pull request from the start"
        )


def contributed_tree(topobench: Path, work: Path, model_config: str, say: Callable[[str], None]) -> Path:
    """``<work>/TopoBench``: a worktree of the checkout's ``HEAD`` with the pull request (made once, then reused)."""
    from topomodelx_attention.harness.topobench.check import make_worktree, remove_worktree
    from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS, contribute

    tree = work / "TopoBench"
    if (tree / "topobench" / "run.py").is_file():
        say(f"reusing the contributed worktree {tree} (its code runs every remaining row)")
        return tree
    domain, name = model_config.split("/", 1)
    models = [key for key, c in CONTRIBUTIONS.items() if c.domain == domain and name in c.configs]
    tree = make_worktree(topobench, work)
    try:
        changes = contribute(tree, models)
    except BaseException:
        remove_worktree(topobench, tree)
        raise
    say(f"contribute --model {models[0]} wrote {sum(c.action == 'create' for c in changes)} files into {tree}")
    return tree


def digest(tree: Path, model_config: str) -> str:
    """SHA-256 over the pull request's model code and the config (``topobench/nn/topomodelx_attention``, backbone, wrapper, yaml)."""
    domain, name = model_config.split("/", 1)
    paths = sorted((tree / "topobench" / "nn" / "topomodelx_attention").rglob("*.py"))
    paths += sorted((tree / "topobench" / "nn").glob(f"*/{domain}/*.py"))
    paths.append(tree / "configs" / "model" / domain / f"{name}.yaml")
    hashed = hashlib.sha256()
    for path in paths:
        if path.is_file() and "__pycache__" not in path.parts:
            hashed.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes() + b"\0")
    return hashed.hexdigest()


class Step:
    """One launcher process: its output lines go to a log; the marked lines are kept."""

    def __init__(self, command: list[str], cwd: Path, env: Mapping[str, str], log: Path, niceness: int) -> None:
        self.log = log
        self.marked: list[str] = []
        self.start = time.perf_counter()
        files.append_text(log, f"$ {' '.join(command[:2])} {command[-1]}\n")
        self.process = subprocess.Popen(  # started by the main thread: PR_SET_PDEATHSIG follows it
            command, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=die_with_parent(niceness),
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith((ROW_MARK, CONFIG_MARK)):
                self.marked.append(line.rstrip("\n"))
                continue
            files.append_text(self.log, line)

    def done(self) -> bool:
        """Whether the process has ended and its output is read."""
        if self.process.poll() is None:
            return False
        self.reader.join()
        return True

    def values(self, mark: str) -> list[Any]:
        """The JSON values of the lines marked ``mark``."""
        return [json.loads(line[len(mark):]) for line in self.marked if line.startswith(mark)]


def run_steps(specs: list[dict[str, Any]], start: Callable[[dict[str, Any]], Step], workers: int,
              finish: Callable[[dict[str, Any], Step], None]) -> None:
    """Run ``specs`` with at most ``workers`` processes at a time; ``finish`` each as it ends (main thread)."""
    queue, running = list(specs), []
    while queue or running:
        while queue and len(running) < workers:
            spec = queue.pop(0)
            running.append((spec, start(spec)))
        time.sleep(1)
        for item in [item for item in running if item[1].done()]:
            running.remove(item)
            finish(*item)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (``ValueError`` for a bad one, naming it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topobench", required=True, type=Path, help="a git checkout of TopoBench (folder named TopoBench)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of TopoBench's environment")
    parser.add_argument("--model-config", default=MODEL_CONFIG, help="the pull request's TopoBench config (DOMAIN/NAME)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--settings", nargs="+", default=["all"], help="setting slugs (h_lo_d_lo_pl_lo, ...) or 'all'")
    parser.add_argument("--seeds", nargs="+", type=int, default=[42], help="training seeds (the notebook: 42 43 44)")
    parser.add_argument("--n-graphs", type=int, default=PROTOCOL["n_graphs"], help="graphs per family (fewer: a smoke run)")
    parser.add_argument("--max-epochs", type=int, default=PROTOCOL["max_epochs"], help="(fewer: a smoke run)")
    parser.add_argument("--workers", type=int, default=2, help="training processes at a time, one thread each")
    parser.add_argument("--niceness", type=int, default=19, help="niceness of the training processes (0..19)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help=f"default {RESULTS}")
    parser.add_argument("--work-dir", type=Path, default=WORK, help=f"worktree and logs (default {WORK})")
    parser.add_argument("--list", action="store_true", help="print the pending rows and exit")
    args = parser.parse_args(argv)
    args.settings = list(SETTINGS) if args.settings == ["all"] else args.settings
    for slug in args.settings:
        if slug not in SETTINGS:
            raise ValueError(f"unknown setting {slug!r} (--settings): one of {SETTINGS} or 'all'")
    from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS

    shipped = sorted(f"{c.domain}/{name}" for c in CONTRIBUTIONS.values() for name in c.configs)
    if args.model_config not in shipped:
        raise ValueError(f"--model-config {args.model_config!r} is not a config the pull request ships: one of {shipped}")
    if args.workers < 1 or not 0 <= args.niceness <= 19:
        raise ValueError("--workers must be at least 1 and --niceness in 0..19")
    if args.n_graphs < 10 or args.max_epochs < 1:
        raise ValueError("--n-graphs must be at least 10 (every split needs a graph) and --max-epochs at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Score the pending rows; return 0 when every asked row is in the results file, else 1."""
    from topomodelx_attention.harness.topobench.check import (
        check_checkout,
        run_environment,
        write_standins,
    )

    args = parse(argv)
    say = lambda line: print(f"[{datetime.now():%H:%M:%S}] {line}", flush=True)  # noqa: E731
    smoke = "" if (args.n_graphs, args.max_epochs) == (PROTOCOL["n_graphs"], PROTOCOL["max_epochs"]) else f"_n{args.n_graphs}_e{args.max_epochs}"
    path = args.results_dir.resolve() / ENTRY / f"results{smoke}.json"
    conditions_path = path.with_name(f"conditions{smoke}.json")
    topobench = check_checkout(args.topobench)
    work = args.work_dir.expanduser().resolve()
    head = subprocess.run(["git", "-C", str(topobench), "log", "-1", "--format=%H %cs"], capture_output=True,
                          text=True, check=True).stdout.strip()
    extra = ["trainer=cpu"] + ([f"trainer.max_epochs={args.max_epochs}"] if args.max_epochs != PROTOCOL["max_epochs"] else [])
    run = {"topobench": head, "model_config": args.model_config, "n_graphs": args.n_graphs,
           "max_epochs": args.max_epochs, "extra_overrides": extra}
    check_conditions(conditions_path, {"run": run})
    todo = pending(path, args.tasks, args.settings, args.seeds)
    say(f"{len(todo)} of {len(args.tasks) * len(args.settings) * len(args.seeds)} rows pending in {path}")
    if args.list or not todo:
        for task, slug, seed in todo:
            print(f"  {task} {slug} seed {seed}")
        return 0
    lock = work / "launcher.lock"
    say(f"taking {lock} (one launcher at a time; a second waits here)")
    with files.locked(lock):
        todo = pending(path, args.tasks, args.settings, args.seeds)
        tree = contributed_tree(topobench, work, args.model_config, say)
        code = digest(tree, args.model_config)
        check_code(conditions_path, path, code)
        write_standins(work, say)
        script = work / "challenge_entry_launcher.py"
        files.write_text(script, LAUNCHER)
        env = {**run_environment(tree, work), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "WANDB_MODE": "offline",
               "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        base = {"model": args.model_config, "n_graphs": args.n_graphs, "extra": extra}

        def start(spec: dict[str, Any]) -> Step:
            task = spec["tasks"][0]
            name = f"prepare_{task}" if spec["step"] == "prepare" else f"{task}__{spec['slug']}__s{spec['seed']}"
            log = work / "logs" / f"{name}.log"
            say(f"start {spec['step']} {spec.get('tasks')} {spec.get('slug', '')} (log {log})")
            return Step([args.python, str(script), json.dumps(spec)], tree, env, log, args.niceness)

        resolved: dict[str, Any] = {}
        failed: list[str] = []

        def prepared(spec: dict[str, Any], step: Step) -> None:
            seconds = time.perf_counter() - step.start
            for value in step.values(CONFIG_MARK):
                resolved.update(value)
            if step.process.returncode:
                failed.append(f"prepare {spec['tasks']}: exit status {step.process.returncode}, see {step.log}")
            say(f"prepared {spec['tasks'][0]} families and liftings in {seconds:.0f} s")

        tasks = sorted({t for t, _, _ in todo}, key=TASKS.index)
        run_steps([{**base, "step": "prepare", "tasks": [t]} for t in tasks], start, args.workers, prepared)
        if failed:
            say("FAILED: " + "; ".join(failed))
            return 1
        conditions = {
            "run": run,
            "row_seconds": json.loads(conditions_path.read_text()).get("row_seconds", {}) if conditions_path.is_file() else {},
            "code_sha256": code,
            "resolved": resolved,
            "differences_from_the_notebook": [
                "trainer=cpu (the notebook runs TopoBench's default trainer, accelerator gpu)",
                f"one thread per run, {args.workers} runs at a time, niceness {args.niceness}",
                "wandb offline (wandb_config: the epoch times and parameter counts TopoBench hands to its logger)",
                f"training seeds {args.seeds} (the notebook: 42, 43, 44)",
                "each row is its own run_challenge_grid call (limit_runs=1, the settings iterator starting at that setting)",
            ] + ([f"{args.n_graphs} graphs per family, at most {args.max_epochs} epochs (smoke run)"]
                 if extra[1:] or args.n_graphs != PROTOCOL["n_graphs"] else []),
        }
        files.write_text(conditions_path, json.dumps(conditions, indent=2) + "\n")

        def finished(spec: dict[str, Any], step: Step) -> None:
            seconds = time.perf_counter() - step.start
            rows = step.values(ROW_MARK)
            what = f"{spec['tasks'][0]} {spec['slug']} seed {spec['seed']}"
            if step.process.returncode or len(rows) != 1:
                failed.append(what)
                say(f"FAILED {what} after {seconds:.0f} s (exit status {step.process.returncode}): see {step.log}")
                return
            row = rows[0]
            count = add_row(path, row, args.model_config)
            conditions["row_seconds"][" ".join(map(str, row_key(row)))] = round(seconds, 1)
            files.write_text(conditions_path, json.dumps(conditions, indent=2) + "\n")
            score = row["test_best_rerun_accuracy"] if row["experiment"] == "community_detection" else row["test_mse_by_total_triangles"]
            say(f"done {what}: test {score}, {seconds:.0f} s; {count} rows in {path}")

        specs = [{**base, "step": "row", "tasks": [t], "slug": notebook_slug(s), "seed": sd, "study_id": ENTRY}
                 for t, s, sd in todo]
        run_steps(specs, start, args.workers, finished)
    say(f"{len(todo) - len(failed)} rows scored, {len(failed)} failed (they stay pending)")
    return 1 if failed else 0


def cli(argv: Sequence[str] | None = None) -> int:
    """:func:`main` with a user error as one line on stderr and exit status 2."""
    try:
        return main(argv)
    except (ValueError, OSError) as error:
        print(f"{Path(__file__).name}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
