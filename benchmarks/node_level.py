"""Node-level benchmark: the Cellular Transformer and graph baselines on heterophilous graphs.

Runs (data set, configuration, split) cells of the transductive node tasks of the heterophilous
benchmark (Platonov et al., ICLR 2023; configs ``configs/dataset/node/``) with the harness, and
prints them beside the published anchors (GAT-sep, GT-sep, Polynormer; :data:`ANCHORS`). A run is
one :func:`~topomodelx_attention.harness.training.run_experiment` with one seed, which the harness
reads as the index of the file's fixed split (seed ``s`` trains on split ``s``, ``0..9``).

Protocol (:data:`PROTOCOL`): full-batch training (one optimisation step per epoch), at most
``--epochs`` epochs (default 1000) with early stopping after ``--patience`` epochs without a
better validation metric (default 100), test at the best-validation epoch; the metric of the
data set config (ROC-AUC for minesweeper and tolokers, accuracy for the filtered chameleon and
squirrel); mean ± population std over the 10 splits. The benchmark's own ``train.py`` runs 1000
full-batch AdamW steps (learning rate 3e-5, 5 layers of width 512, dropout 0.2) and keeps the
step with the best validation metric, without early stopping: the 1000 epochs are its 1000
steps, the patience is this script's saving of CPU time (the harness's node configs set no
epoch budget; the harness's default is 50 epochs, patience 50). The optimiser and every model
setting are the packaged configs' (AdamW, cosine schedule with 5 warm-up epochs, the model's
own learning rate), changed only by the overrides a configuration of :data:`CONFIGS` names;
the data sets' own overrides are in :data:`DATASETS` (none: every set runs full batch).

Workers: ``--workers`` processes (default 2) of :func:`design_space.run_tasks` (spawned, ended
with this script), one thread each, at niceness 19 and under an address-space limit
(``--memory-gib``, so that a configuration that does not fit fails with ``MemoryError`` instead
of waking the kernel's OOM killer on a shared machine). Every task runs in a fresh process, so
that its peak resident memory (``ru_maxrss``) is its own. Each (data set, configuration) is
first lifted and encoded once in a process of its own (the harness's cache, under
``--work-dir``): its cost is recorded apart (``prepared``), and every run then loads the cached
complex.

Results: ``benchmarks/results/node_level/<name>.json`` (``--name``, default ``grid``):
``metadata`` (the protocol, which a later call must match), ``prepared`` (one entry per lifted
data set and configuration: cells per rank, seconds, peak memory) and ``runs`` (one row per
finished run: validation and test metric at the best-validation epoch, epochs, seconds per
epoch, peak resident memory, parameters, the overrides). Each finished run is added at once
(read, add, atomic replace through :mod:`topomodelx_attention.files`, under a lock); a second
call runs only the cells that have no row, so a stopped grid continues where it stopped.
``--table`` writes ``<name>.md`` beside it and prints it.

Usage::

    python benchmarks/node_level.py --list                          # the cells still to run
    nice -n 19 python benchmarks/node_level.py --data-dir DATA/heterophilous \\
        --datasets minesweeper chameleon_filtered --configs ct_skeleton gps --splits 0 1 2
    python benchmarks/node_level.py --table                         # the table with the anchors
    # a cost measurement: 5 epochs of split 0, one worker, its own results file
    nice -n 19 python benchmarks/node_level.py --data-dir DATA/heterophilous --name cost \\
        --epochs 5 --patience 0 --splits 0 --workers 1 --configs ct_skeleton
    # a variant of a configuration (its own rows, chosen on validation)
    nice -n 19 python benchmarks/node_level.py --data-dir DATA/heterophilous --name sanity \\
        --epochs 200 --patience 30 --datasets chameleon_filtered --configs ct_skeleton --splits 0 \\
        --variant lr3e-4 --set optimizer.lr=0.0003

``--data-dir`` is the folder holding ``<data set>.npz`` in the benchmark's own layout (default
``$TMA_DATA_ROOT/heterophilous``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from topomodelx_attention import files
from topomodelx_attention.harness.graphuniverse_grid import read_results as read_json_results

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from design_space import compose_run, run_tasks  # noqa: E402

RESULTS = HERE / "results" / "node_level"
WORK = ROOT / "outputs" / "node_level"

#: The protocol's defaults: epochs (full batch: one step each), early-stopping patience, splits.
PROTOCOL: dict[str, Any] = {"epochs": 1000, "patience": 100, "splits": list(range(10))}

#: The data sets: metric, the data set's own overrides (every configuration), ``about``.
DATASETS: dict[str, dict[str, Any]] = {
    "minesweeper": {"metric": "roc_auc", "overrides": [],
                    "about": "10,000 vertices (a 100 x 100 king graph), 39,402 edges, 7 features, 2 classes"},
    "tolokers": {"metric": "roc_auc", "overrides": [],
                 "about": "11,758 vertices, 519,000 edges, 10 features, 2 classes"},
    "chameleon_filtered": {"metric": "accuracy", "overrides": [],
                           "about": "890 vertices, 8,854 edges, 2,325 features, 5 classes"},
    "squirrel_filtered": {"metric": "accuracy", "overrides": [],
                          "about": "2,223 vertices, 46,998 edges, 2,089 features, 5 classes"},
}

#: Published results (mean, std over the 10 splits, in %): GAT-sep and GT-sep from Platonov et
#: al. (ICLR 2023), Polynormer from Deng et al. (ICLR 2024).
ANCHORS: dict[str, dict[str, tuple[float, float]]] = {
    "minesweeper": {"GAT-sep": (93.91, 0.35), "GT-sep": (92.29, 0.47), "Polynormer": (97.46, 0.36)},
    "tolokers": {"GAT-sep": (83.78, 0.43), "GT-sep": (82.52, 0.92), "Polynormer": (85.91, 0.74)},
    "chameleon_filtered": {"GAT-sep": (39.26, 2.50), "GT-sep": (40.31, 3.01)},
    "squirrel_filtered": {"GAT-sep": (35.46, 3.10), "GT-sep": (36.66, 1.63)},
}
ANCHOR_NAMES = ("GAT-sep", "GT-sep", "Polynormer")

#: The CT's tensor diagram on the 1-skeleton without the edge-to-edge arrow: vertices attend to
#: their neighbours and to their edges, edges to their two vertices (no line graph: its size
#: grows with the squared degrees; on tolokers building it asked for a 4 x 10^8-entry array).
_SKELETON_DIAGRAM = "+model.params.tensor_diagram=['0->0:adjacency_0','1->0:incidence_1','0->1:incidence_1.T']"

#: Configurations: the harness model and its overrides (of the packaged config), ``about``.
CONFIGS: dict[str, dict[str, Any]] = {
    # the packaged CT as the harness runs it on node tasks (a vertex readout): 2-cells from a
    # cycle basis (long cycles on these graphs), RWPe of every rank
    "ct": {"model": "cellular_transformer", "overrides": [],
           "about": "packaged CT (cycle-basis 2-cells, RWPe-8)"},
    # the packaged CT with the triangles as 2-cells (the clique complex of dimension 2: the
    # chordless cycles of at most 3 vertices, enumerated as cliques; minesweeper: 39,204 of them;
    # chameleon_filtered has 110,815, whose RWPe powers asked for 50 GiB: minesweeper only)
    "ct_triangles": {"model": "cellular_transformer", "overrides": [
        "~model.lifting", "+model.lifting={_target_:topomodelx_attention.transforms.SimplicialCliqueLifting,"
        "complex_dim:2}",
    ], "about": "packaged CT, 2-cells = triangles, RWPe-8"},
    # the packaged CT on the 1-skeleton (vertices and edges), without the edge-to-edge arrow and
    # without a PE (the exact return probabilities fill in on dense graphs)
    "ct_skeleton": {"model": "cellular_transformer", "overrides": [
        "~model.lifting", "+model.lifting={_target_:topomodelx_attention.transforms.SimplicialCliqueLifting,"
        "complex_dim:1,neighborhoods:[adjacency_0,incidence_1]}", _SKELETON_DIAGRAM, "model.pe=null",
    ], "about": "packaged CT on the 1-skeleton, arrows 0->0, 1->0, 0->1, no PE"},
    # graph baselines of the harness, packaged
    "gps": {"model": "gps", "overrides": [], "about": "GPS: GINE + global attention, RWSE-16"},
    "graph_transformer": {"model": "graph_transformer", "overrides": [],
                          "about": "TransformerConv (neighbour attention), LapPE-8"},
    "gine": {"model": "gine", "overrides": [], "about": "GINE"},
    "mlp": {"model": "mlp", "overrides": [], "about": "MLP on the vertex features"},
}
DEFAULT_CONFIGS = ("ct_skeleton", "gps", "graph_transformer", "gine", "mlp")

#: The 1-skeleton's neighbourhoods the graph baselines read: on tolokers the lifting's default
#: (every neighbourhood) builds the line graph, which asked for a 4 x 10^8-entry array (out of
#: memory at 10 GiB).
_BASELINE_NEIGHBOURHOODS = "+model.lifting.neighborhoods=[adjacency_0,incidence_1]"

#: Configurations a data set changes (on top of the configuration's overrides). GPS's dense
#: attention over all vertices does not fit minesweeper (10,000 vertices: 1.6 GB per attention
#: matrix, out of memory at 10 GiB) nor tolokers: the linear kernel there (Performer, without
#: attention dropout: it has no attention weights). Its RWSE-16 (the packaged
#: CellularRandomWalkPE of the 1-skeleton, which also walks the edges) took 313 s on
#: chameleon_filtered's 8,854 edges: none on squirrel_filtered (46,998 edges) and tolokers
#: (519,000), nor LapPE for the graph transformer on tolokers.
DATASET_CONFIG_OVERRIDES: dict[tuple[str, str], list[str]] = {
    ("minesweeper", "gps"): ["model.params.kind=linear", "model.params.attention_dropout=0.0"],
    ("squirrel_filtered", "gps"): ["model.pe=null"],
    ("tolokers", "gps"): [_BASELINE_NEIGHBOURHOODS, "model.pe=null", "model.params.kind=linear",
                         "model.params.attention_dropout=0.0"],
    ("tolokers", "graph_transformer"): [_BASELINE_NEIGHBOURHOODS, "model.pe=null", "model.augment=null"],
    ("tolokers", "gine"): [_BASELINE_NEIGHBOURHOODS],
    ("tolokers", "mlp"): [_BASELINE_NEIGHBOURHOODS],
}


# ------------------------------------------------------------------------------------ keys
def config_name(config: str, variant: str | None) -> str:
    """Name of a configuration with its variant: ``config`` or ``config~variant``."""
    return f"{config}~{variant}" if variant else config


def run_key(dataset: str, config: str, variant: str | None, split: int) -> str:
    """Key of one run: ``<data set>|<configuration>[~<variant>]|<split>``."""
    return f"{dataset}|{config_name(config, variant)}|{split}"


def prepared_key(dataset: str, config: str, variant: str | None) -> str:
    """Key of one lifted (data set, configuration): ``<data set>|<configuration>[~<variant>]``."""
    return f"{dataset}|{config_name(config, variant)}"


def run_overrides(dataset: str, config: str, extra: Sequence[str] = ()) -> list[str]:
    """Every override of a run: the data set's, the configuration's, the pair's, then ``extra``."""
    return [
        *DATASETS[dataset]["overrides"], *CONFIGS[config]["overrides"],
        *DATASET_CONFIG_OVERRIDES.get((dataset, config), []), *extra,
    ]


# ------------------------------------------------------------------------- results file
def results_path(results_dir: Path, name: str) -> Path:
    """``<results_dir>/<name>.json``."""
    return Path(results_dir) / f"{name}.json"


def read_results(path: Path) -> dict[str, Any]:
    """The results file (an empty one when missing); a file of another layout raises, naming it."""
    try:
        return read_json_results(path, rows="runs", kind="node_level results file", keys=("metadata", "prepared"))
    except ValueError as error:
        raise SystemExit(str(error)) from None


def _write(path: Path, data: dict[str, Any]) -> None:
    files.write_text(path, json.dumps(data, indent=1, allow_nan=True) + "\n", root=path.parent)


def add_entry(path: Path, lock: Path, section: str, row: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Add (or replace) one row of ``runs`` or one entry of ``prepared``, under the lock, atomically."""
    with files.locked(lock):
        data = read_results(path)
        commands = [*data["metadata"].get("commands", [])]
        commands += [c for c in metadata.get("commands", []) if c not in commands]  # every call that added rows
        data["metadata"] = {**data["metadata"], **metadata, "commands": commands}
        if section == "runs":
            data["runs"] = [r for r in data["runs"] if r["key"] != row["key"]] + [row]
        elif row.get("cached") and row["key"] in data["prepared"]:
            return  # keep the entry of the run that lifted it (a cache hit costs nothing)
        else:
            data["prepared"][row["key"]] = row
        _write(path, data)


def check_protocol(data: dict[str, Any], protocol: dict[str, Any], path: Path) -> None:
    """Refuse to add runs of another protocol (epochs, patience) to a results file."""
    old = data["metadata"].get("protocol")
    if old and any(old.get(k) != protocol[k] for k in ("epochs", "patience")):
        raise SystemExit(
            f"{path} holds runs of epochs={old.get('epochs')} patience={old.get('patience')}, not "
            f"epochs={protocol['epochs']} patience={protocol['patience']}: give another --name"
        )


# ------------------------------------------------------------------------------- workers
def _limit_process(memory_gib: float) -> None:
    """Niceness 19 and an address-space limit of ``memory_gib`` GiB for this process."""
    import resource

    current = os.nice(0)
    if current < 19:
        os.nice(19 - current)
    limit = int(memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _compose(task: dict[str, Any], epochs: int):
    spec = {"dataset": task["dataset"], "data_dir": task["data_dir"], "classes": None, "overrides": []}
    overrides = [*task["overrides"], f"trainer.early_stopping_patience={task['patience'] or 'null'}"]
    return compose_run(spec, CONFIGS[task["config"]]["model"], epochs, task["split"], task["work"], task["data_dir"], overrides)


def run_node(task: dict[str, Any]) -> dict[str, Any]:
    """Run one task in a worker: ``kind`` ``"prepare"`` (lift and encode once) or ``"run"`` (train one split).

    Parameters
    ----------
    task : dict
        ``kind``, ``key``, ``dataset``, ``config``, ``variant``, ``split``, ``overrides``,
        ``epochs``, ``patience``, ``data_dir``, ``work``, ``memory_gib``.

    Returns
    -------
    dict
        The entry of ``prepared`` or the row of ``runs``.
    """
    _limit_process(task["memory_gib"])
    import warnings

    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    if task["kind"] == "prepare":
        return _prepare(task)
    return _train(task)


def _prepare(task: dict[str, Any]) -> dict[str, Any]:
    from topomodelx_attention.harness.prepare import prepare_dataset
    from topomodelx_attention.harness.training import _data_pe_config

    cfg = _compose(task, 1)
    began, start, cpu = time.time(), time.perf_counter(), time.process_time()
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.get("pe")), cfg.paths.get("cache_dir"))
    seconds = time.perf_counter() - start
    complex_ = prepared.complexes[0]
    ranks = [int(complex_.num_cells(r)) for r in range(prepared.info.max_rank + 1)]
    return {
        "key": task["key"], "dataset": task["dataset"], "config": task["config"], "variant": task["variant"],
        "cells": ranks, "seconds": round(seconds, 2), "cpu_seconds": round(time.process_time() - cpu, 2),
        "peak_rss_mib": round(_peak_mib(), 1),
        # loaded from the cache another call wrote (its cost is that call's entry)
        "cached": prepared.cache_file is not None and prepared.cache_file.stat().st_mtime < began,
        "overrides": task["overrides"],
    }


def _train(task: dict[str, Any]) -> dict[str, Any]:
    from topomodelx_attention.harness.graphuniverse_grid import packaged_defaults
    from topomodelx_attention.harness.training import run_experiment

    cfg = _compose(task, task["epochs"])
    load = os.getloadavg()[0]
    start, cpu = time.perf_counter(), time.process_time()
    result = run_experiment(cfg, output_dir=Path(task["work"]) / "runs" / task["key"].replace("|", "/"), verbose=False)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    seed = result.seeds[0]
    metric = result.metric
    history = seed.history
    train = [float(r["epoch_seconds"]) for r in history if "epoch_seconds" in r]
    walls = [float(r["wall_seconds"]) for r in history if "wall_seconds" in r]
    whole = [b - a for a, b in zip([0.0, *walls], walls)]  # training + validation of each epoch

    def median(values: list[float]) -> float:  # the first epoch warms up (allocator, caches)
        values = values[1:] if len(values) > 1 else values
        return statistics.median(values) if values else float("nan")

    return {
        "key": task["key"], "dataset": task["dataset"], "config": task["config"], "variant": task["variant"],
        "model": CONFIGS[task["config"]]["model"], "split": task["split"], "overrides": task["overrides"],
        "metric": metric, "val": seed.val, "test": seed.test, "best_epoch": seed.best_epoch, "epochs": seed.epochs,
        "max_epochs": task["epochs"], "patience": task["patience"], "failure": seed.failure,
        "s_per_epoch": round(median(train), 4), "s_per_epoch_with_val": round(median(whole), 4),
        "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "peak_rss_mib": round(_peak_mib(), 1),
        "params": result.num_parameters, "load_at_start": round(load, 2),
        "packaged_defaults": packaged_defaults(CONFIGS[task["config"]]["model"]),
        "train_loss_last": next((float(r["train/loss"]) for r in reversed(history) if "train/loss" in r), None),
        "val_curve": [round(float(r[f"val/{metric}"]), 5) for r in history if f"val/{metric}" in r],
        "torch": torch_version(),
    }


def torch_version() -> str:
    """The torch version of this process."""
    import torch

    return str(torch.__version__)


# ------------------------------------------------------------------------------ planning
def plan(args: argparse.Namespace, done: set[str]) -> list[dict[str, Any]]:
    """The runs still to do, split by split (every data set and configuration of a split first).

    Parameters
    ----------
    args : argparse.Namespace
        The command line (``datasets``, ``configs``, ``splits``, ``variant``, ``set``, ``epochs``,
        ``patience``, ``data_dir``, ``work_dir``, ``memory_gib``).
    done : set of str
        Keys of the runs that have a row.

    Returns
    -------
    list of dict
        The tasks of :func:`run_node` (``kind="run"``), in run order.
    """
    tasks = []
    for split in args.splits:
        for dataset in args.datasets:
            for config in args.configs:
                key = run_key(dataset, config, args.variant, split)
                if key in done:
                    continue
                tasks.append({
                    "kind": "run", "key": key, "dataset": dataset, "config": config, "variant": args.variant,
                    "split": split, "overrides": run_overrides(dataset, config, args.set),
                    "epochs": args.epochs, "patience": args.patience, "data_dir": str(args.data_dir),
                    "work": str(args.work_dir), "memory_gib": args.memory_gib,
                })
    return tasks


def prepare_tasks(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``kind="prepare"`` task per (data set, configuration) among ``tasks``."""
    out: dict[str, dict[str, Any]] = {}
    for task in tasks:
        key = prepared_key(task["dataset"], task["config"], task["variant"])
        out.setdefault(key, {**task, "kind": "prepare", "key": key})
    return list(out.values())


# -------------------------------------------------------------------------------- tables
def _pct(values: list[float]) -> str:
    """``mean ± std`` in % (population std), ``–`` without values."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return "–"
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.2f} ± {100 * std:.2f}"


def _order(dataset: str, name: str) -> tuple[int, int, str]:
    config = name.split("~", 1)[0]
    return (list(DATASETS).index(dataset) if dataset in DATASETS else len(DATASETS),
            list(CONFIGS).index(config) if config in CONFIGS else len(CONFIGS), name)


def table(data: dict[str, Any]) -> str:
    """Markdown: every (data set, configuration) over its splits beside the anchors, and the lifting costs.

    Parameters
    ----------
    data : dict
        A results file as :func:`read_results` gives it (``metadata``, ``prepared``, ``runs``).

    Returns
    -------
    str
        The tables: test metric mean ± std over the splits (validation), epochs and best epoch,
        median seconds per epoch (training part; with the validation pass), the largest peak
        resident memory, parameters, and the difference of the test mean to each published
        anchor (points); the anchors' own rows; then the lifting and encoding of each data set;
        then, where a configuration ran in several variants, the one validation picks (:func:`choice`).
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in data["runs"]:
        groups.setdefault((row["dataset"], config_name(row["config"], row.get("variant"))), []).append(row)
    protocol = data["metadata"].get("protocol", {})
    lines = [
        f"Test metric at the best-validation epoch, mean ± std over the splits run (ROC-AUC or accuracy, %; "
        f"validation in brackets); at most {protocol.get('epochs', '?')} full-batch epochs, early stopping after "
        f"{protocol.get('patience', '?') or 'no'} epochs without a better validation metric. s/epoch: median "
        "seconds of the training part of an epoch / of the whole epoch with its validation pass (one thread, "
        "niceness 19, a shared machine: indicative). Peak RSS: the largest peak resident memory of the runs' "
        "processes. Δ: test mean minus the published mean (points).",
        "",
        "| data set | configuration | splits | test (val) | epochs (best) | s/epoch | peak RSS (MiB) | params | "
        + " | ".join(f"Δ {a}" for a in ANCHOR_NAMES) + " |",
        "|---|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(ANCHOR_NAMES),
    ]
    datasets = sorted({d for d, _ in groups} | (set(ANCHORS) & {d for d, _ in groups}), key=lambda d: _order(d, ""))
    for dataset in datasets:
        anchors = ANCHORS.get(dataset, {})
        for (d, name), rows in sorted(groups.items(), key=lambda kv: _order(*kv[0])):
            if d != dataset:
                continue
            ok = [r for r in rows if not r.get("failure")]
            tests = [r["test"] for r in ok]
            mean = 100 * statistics.fmean(tests) if tests else float("nan")
            deltas = [
                f"{mean - anchors[a][0]:+.2f}" if a in anchors and math.isfinite(mean) else "–" for a in ANCHOR_NAMES
            ]
            failed = len(rows) - len(ok)
            splits = f"{len(ok)}" + (f" (+{failed} failed)" if failed else "")
            vals = statistics.fmean(r["val"] for r in ok) if ok else float("nan")
            lines.append(
                f"| {dataset} | {name} | {splits} | {_pct(tests)} ({100 * vals:.2f}) | "
                f"{statistics.fmean(r['epochs'] for r in rows):.0f} ({statistics.fmean(r['best_epoch'] for r in rows):.0f}) | "
                f"{statistics.median(r['s_per_epoch'] for r in rows):.3f} / "
                f"{statistics.median(r['s_per_epoch_with_val'] for r in rows):.3f} | "
                f"{max(r['peak_rss_mib'] for r in rows):.0f} | {rows[0]['params']:,} | " + " | ".join(deltas) + " |"
            )
        for name, (mean, std) in anchors.items():
            lines.append(f"| {dataset} | {name} (published) | 10 | {mean:.2f} ± {std:.2f} | – | – | – | – |"
                         + " – |" * len(ANCHOR_NAMES))
    prepared = sorted(data.get("prepared", {}).values(), key=lambda e: _order(e["dataset"], config_name(e["config"], e.get("variant"))))
    if prepared:
        lines += [
            "", "Lifting and encoding, once per data set and configuration (then cached): cells per rank, "
            "seconds (CPU seconds), peak resident memory of the process (loading the cache only, when another "
            "configuration or call lifted the same complex).", "",
            "| data set | configuration | cells per rank | seconds (CPU) | peak RSS (MiB) |", "|---|---|---|---:|---:|",
        ]
        for e in prepared:
            lines.append(
                f"| {e['dataset']} | {config_name(e['config'], e.get('variant'))} | "
                f"{' / '.join(f'{n:,}' for n in e['cells'])} | "
                + ("loaded from the cache" if e["cached"] else f"{e['seconds']:.0f} ({e['cpu_seconds']:.0f})") + " | "
                f"{e['peak_rss_mib']:.0f} |"
            )
    chosen = choice(data)
    return "\n".join([*lines, "", *chosen] if chosen else lines)


def choice(data: dict[str, Any]) -> list[str]:
    """Markdown: for every (data set, configuration) run in several variants, the one validation picks.

    The variants of a configuration (``--variant``; the configuration itself is one of them) that
    finished the most splits are compared on the splits all of them finished: mean validation
    metric at the best-validation epoch, the highest chosen (test metrics are not read; a tie goes
    to the variant recorded first). A variant with fewer splits is listed, not compared. Empty when
    no configuration has two variants.

    Parameters
    ----------
    data : dict
        A results file as :func:`read_results` gives it.

    Returns
    -------
    list of str
        A paragraph and a table, or nothing.
    """
    groups: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    for row in data["runs"]:
        if row.get("failure"):
            continue
        variants = groups.setdefault((row["dataset"], row["config"]), {})
        variants.setdefault(row.get("variant") or "", {})[int(row["split"])] = float(row["val"])
    rows = []
    for (dataset, config), variants in sorted(groups.items(), key=lambda kv: _order(*kv[0])):
        most = max(len(v) for v in variants.values())
        compared = {name: v for name, v in variants.items() if len(v) == most}
        shared = set.intersection(*(set(v) for v in compared.values()))
        if len(variants) < 2 or not shared:
            continue
        means = {name: statistics.fmean(v[s] for s in shared) for name, v in compared.items()}
        best = max(means, key=means.get)
        for name, mean in sorted(means.items(), key=lambda kv: -kv[1]):
            rows.append(
                f"| {dataset} | {config_name(config, name or None)} | {', '.join(map(str, sorted(shared)))} | "
                f"{100 * mean:.2f} | {'**chosen**' if name == best else ''} |"
            )
        for name, v in variants.items():
            if name not in compared:
                rows.append(
                    f"| {dataset} | {config_name(config, name or None)} | {', '.join(map(str, sorted(v)))} | – | "
                    f"not compared ({len(v)} of {most} splits) |"
                )
    if not rows:
        return []
    return [
        "Choice on validation: the variants of a configuration that finished the most splits, on the splits all "
        "of them finished, mean validation metric (%); the highest is chosen (a tie: the variant recorded first), "
        "test metrics unread.", "",
        "| data set | configuration | splits | validation | |", "|---|---|---|---:|---|", *rows,
    ]


# ---------------------------------------------------------------------------------- main
def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.environ.get("TMA_DATA_ROOT")
    parser.add_argument("--data-dir", type=Path, default=Path(root) / "heterophilous" if root else None,
                        help="folder holding <data set>.npz (default $TMA_DATA_ROOT/heterophilous)")
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(DEFAULT_CONFIGS))
    parser.add_argument("--splits", nargs="+", type=int, default=PROTOCOL["splits"], help="split indices 0..9")
    parser.add_argument("--epochs", type=int, default=PROTOCOL["epochs"], help="most epochs (full batch: steps)")
    parser.add_argument("--patience", type=int, default=PROTOCOL["patience"],
                        help="early stopping after this many epochs without a better validation metric (0: none)")
    parser.add_argument("--variant", default=None, help="name of the --set overrides (their own rows)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="overrides of every run (with --variant)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-gib", type=float, default=10.0, help="address-space limit of every worker")
    parser.add_argument("--name", default="grid", help="results file <results-dir>/<name>.json")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--work-dir", type=Path, default=WORK, help="cache, run folders and locks (not committed)")
    parser.add_argument("--table", action="store_true", help="write <name>.md and print it, run nothing")
    parser.add_argument("--list", action="store_true", help="print the runs still to do, run nothing")
    args = parser.parse_args(argv)
    if args.set and not args.variant:
        parser.error("--set needs --variant NAME (the rows of a variant are kept apart)")
    if args.variant and not args.variant.replace("-", "").replace("_", "").replace(".", "").isalnum():
        parser.error("--variant: letters, digits, '-', '_' and '.' only")
    if any(not 0 <= s < 10 for s in args.splits):
        parser.error("--splits: the benchmark's split indices are 0..9")
    if args.epochs < 1 or args.patience < 0 or args.workers < 1:
        parser.error("--epochs and --workers must be at least 1, --patience at least 0")
    return args


def recorded_command(argv: Sequence[str]) -> str:
    """The command line as a results file records it, the data folder written ``DATA``."""
    words, hide = ["python", "benchmarks/node_level.py"], False
    for word in map(str, argv):
        words.append("DATA" if hide else "--data-dir=DATA" if word.startswith("--data-dir=") else word)
        hide = word == "--data-dir"
    return shlex.join(words)


def _describe(row: dict[str, Any]) -> str:
    if "val" not in row:  # a prepared entry
        return (f"{row['key']}: cells {row['cells']}, {row['seconds']:.0f} s, {row['peak_rss_mib']:.0f} MiB"
                + (" (cached)" if row["cached"] else ""))
    return (f"{row['key']}: val {row['val']:.4f} test {row['test']:.4f} ({row['epochs']} ep, best {row['best_epoch']}, "
            f"{row['s_per_epoch']:.3f} s/ep, {row['peak_rss_mib']:.0f} MiB, {row['params']} params)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cells still missing from the results file, or print the table or the list."""
    args = parse(argv)
    path = results_path(args.results_dir, args.name)
    data = read_results(path)
    if args.table:
        text = table(data)
        files.write_text(path.with_suffix(".md"), text + "\n", root=path.parent)
        print(text)
        return 0
    done = {row["key"] for row in data["runs"]}
    tasks = plan(args, done)
    if args.list:
        for task in tasks:
            print(f"{task['key']} ({task['epochs']} epochs, patience {task['patience']})")
        return 0
    if args.data_dir is None:
        raise SystemExit("node_level.py: --data-dir (or $TMA_DATA_ROOT) is needed: the folder holding <data set>.npz")
    missing = [d for d in args.datasets if not (args.data_dir / f"{d}.npz").is_file()]
    if missing:
        raise SystemExit(f"node_level.py: no {', '.join(f'{d}.npz' for d in missing)} in {args.data_dir}")
    protocol = {"epochs": args.epochs, "patience": args.patience}
    check_protocol(data, protocol, path)
    metadata = {
        "script": "benchmarks/node_level.py", "protocol": protocol,
        "commands": [recorded_command(sys.argv[1:] if argv is None else argv)],
        "conditions": "full batch unless a configuration samples; one thread per worker, niceness 19; "
        "test at the best-validation epoch; mean ± population std over the splits",
    }
    lock = Path(args.work_dir) / "locks" / f"{args.name}.lock"
    files.make_dirs(args.work_dir)
    print(f"{len(done)} runs finished, {len(tasks)} to run with {args.workers} workers -> {path}", flush=True)
    if not tasks:
        return 0
    lifts = prepare_tasks(tasks)
    lifted: set[str] = set()

    def record_prepared(entry: dict[str, Any]) -> None:
        lifted.add(entry["key"])
        add_entry(path, lock, "prepared", entry, metadata)

    # each (data set, configuration) is lifted once, in a process of its own, before its runs
    run_tasks(lifts, args.workers, None, None, _describe, target=run_node, record=record_prepared, fresh_process=True)
    tasks = [t for t in tasks if prepared_key(t["dataset"], t["config"], t["variant"]) in lifted]
    run_tasks(tasks, args.workers, None, None, _describe, target=run_node,
              record=lambda row: add_entry(path, lock, "runs", row, metadata), fresh_process=True)
    print(table(read_results(path)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
