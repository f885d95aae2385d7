"""Leave-one-data-set-out selection over the Cellular Transformer's design space.

Every *configuration* of every model is trained on every data set of the protocol (same epochs,
same seeds, one thread per process); a run is one
:func:`~topomodelx_attention.harness.training.run_experiment` with one seed. The Cellular
Transformer's configurations are the design variants of :data:`CT_VARIANTS` (attention kind,
pairwise / general, PE type and width, readout ranks and pooling, depth / width at about equal
parameters, dropouts, lr / warmup); each baseline (GPS, GINE, GIN, graph transformer, CWN) gets
the same number of configurations, drawn by :func:`~topomodelx_attention.harness.budget.search_trials`
from :data:`BASELINE_SPACE` (the equal-budget search of ``harness/budget.py``, widened by width and
depth), so every model has the same tuning budget.

Selection uses validation only:

* **leave one data set out**: for every data set D, the CT variant with the best mean rank of its
  validation metric on the *other* data sets is chosen, and its test metric on D reported (the
  honest held-out number); the baselines get their best-validation configuration on D itself
  (a selection that favours them).
* **the packaged default** is the variant with the best mean validation rank over all data sets.

Resumable: every finished run is one line of ``<out>/runs.jsonl`` (key: data set, model,
configuration, seed); a second call skips the finished runs and only runs the missing ones.
``--table`` prints the tables from the file without running anything.

Usage::

    python benchmarks/design_space.py --workers 2 --epochs 10 --seeds 1 --data-root DATA
    python benchmarks/design_space.py --table           # selection + comparison tables
    python benchmarks/design_space.py --list            # the runs still to do, nothing run
    python benchmarks/design_space.py --datasets RINGS6 MUTAG --models cellular_transformer gps
    # each model's best 10-epoch trial, trained for 50 epochs (resumable), and its table
    python benchmarks/design_space.py --best-of benchmarks/results/design_space/runs.jsonl \
        --epochs 50 --seeds 1 2 3 --workers 1 --out benchmarks/results/design_space_50ep --data-root DATA
    python benchmarks/design_space.py --best-of benchmarks/results/design_space/runs.jsonl \
        --out benchmarks/results/design_space_50ep --table

``--data-root`` holds ``tudataset/``, ``gcb/`` and ``zinc12k/`` (the project's shared data
folder); the protocol's derived data (RINGS6, the PROTEINS subset, the converted GCB file) are
written once into ``--work-dir``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from topomodelx_attention.files import append_text, make_dirs, write_text

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

OUT = HERE / "results" / "design_space"

#: Data sets of the protocol: harness name, overrides, number of classes (None: regression).
DATASETS: dict[str, dict[str, Any]] = {
    # ENZYMES-like: 300 ring graphs, 6 classes (benchmarks/ring_tu.py)
    "RINGS6": {"dataset": "RINGS6", "data_dir": "{work}", "classes": 6,
               "overrides": ["dataset.max_graphs=300"]},
    "MUTAG": {"dataset": "MUTAG", "data_dir": None, "classes": 2, "overrides": []},
    # a random 300-graph subset (PROTEINS' files are sorted by class)
    "PROTEINS300": {"dataset": "PROTEINS300", "data_dir": "{work}", "classes": 2, "overrides": []},
    "GCB": {"dataset": "GCB", "data_dir": "{work}/gcb", "classes": 3, "overrides": []},
    "ZINC": {"dataset": "ZINC", "data_dir": "{root}/zinc12k", "classes": None,
             "overrides": ["dataset.subset={train:400,val:200,test:200}"]},
}

#: The packaged CT this protocol ran (its "packaged" rows), as overrides of today's packaged config
#: (learning_speed.py changed the default since): the per-cell readout summed over the cells,
#: attention dropout 0.1, no cardinality term, the PE as it is, learning rate 1e-3. Every CT
#: configuration here starts from it.
PACKAGED_THEN = [
    "model.params.readout_options.before_pooling=true", "model.params.attention_dropout=0.1",
    "model.params.kernel_options.cardinality=false", "model.params.pe_options.norm=null",
    "optimizer.lr=0.001",
]

#: The CT's design variants, as overrides of the packaged config (explicit, so that they do not
#: move with the packaged default). "fit" is the 2 x 32 model with a readout that starts near
#: chance (``readout_options.init=zero``, readout of ranks 0-2, ``embedding_norm``); every
#: ``fit_*`` variant changes one thing of it. "rank0_readout" is the 2 x 32 model that reads out
#: rank 0 only, with the default readout init and no input norm; "zinc_variant" the variant
#: chosen on ZINC validation for the equal-budget comparison (pooled readout, no attention dropout).
_FIT = {
    "model.params.n_layers": 2, "model.params.hidden_channels": 32, "model.params.heads": 4,
    "model.params.readout_options.ranks": "[0,1,2]", "model.params.readout_options.init": "zero",
    "model.params.embedding_norm": "true", "model.params.readout_options.before_pooling": "true",
    "model.params.attention_dropout": 0.1, "model.params.kernel_options.cardinality": "false",
    "model.params.pe_options.norm": "null", "optimizer.lr": 0.001,
}

#: Short names of the readout group's keys in :data:`CT_VARIANTS`.
_READOUT = {"readout_ranks": "ranks", "readout_init": "init", "readout_before_pooling": "before_pooling"}


def _variant(**changes: Any) -> list[str]:
    values = dict(_FIT)
    for key, value in changes.items():
        if key in _READOUT:
            key = f"model.params.readout_options.{_READOUT[key]}"
        elif "." not in key:
            key = f"model.params.{key}"
        values[key] = value
    return [f"{k}={v}" for k, v in values.items()]


CT_VARIANTS: dict[str, list[str]] = {
    "rank0_readout": _variant(readout_ranks="[0]", readout_init="default", embedding_norm="false"),
    "zinc_variant": _variant(
        readout_before_pooling="false", attention_dropout=0.0, readout_init="default", embedding_norm="false",
    ),
    "fit": _variant(),
    "fit_pool_mlp": _variant(readout_before_pooling="false"),
    "fit_r0": _variant(readout_ranks="[0]"),
    "fit_mixed": _variant(kind="mixed"),
    "fit_mean": _variant(pooling="mean"),
    "fit_rwbspe16": _variant(**{
        "model.pe._target_": "topomodelx_attention.transforms.BarycentricRandomWalkPE", "model.pe.dim": 16,
    }),
    "fit_deep4x24": _variant(n_layers=4, hidden_channels=24),  # the protocol's winner
    # the packaged default this protocol ran (= fit_deep4x24 with readout_options.init=small); a
    # check, not a candidate of the selection
    "packaged": list(PACKAGED_THEN),
}

#: The default tensor diagram plus a global arrow ``0->0:all_0`` (unmasked attention among the
#: vertices of each complex), as an override.
_GLOBAL0 = (
    "+model.params.tensor_diagram=['0->0:adjacency_0','1->1:coadjacency_1','2->2:coadjacency_2',"
    "'1->0:incidence_1','0->1:incidence_1.T','2->1:incidence_2','1->2:incidence_2.T','0->0:all_0']"
)

#: A learned relative random-walk bias (8 walk lengths) on every global arrow, as an override.
_RRWP8 = "+model.params.kernel_options.rrwp_steps=8"

#: Checks of single changes to the packaged default, run on every data set and seed of the
#: protocol but neither candidates of the selection nor part of the budget (the baselines keep
#: ``len(CT_VARIANTS)`` trials, so their configurations do not move): evidence for or against a
#: change of the default, read against "packaged" in the checks table.
CT_CHECKS: dict[str, list[str]] = {
    # the sparse kernel's cardinality term w ⊙ Σ_{s∈N(t)} v_s on every arrow (GINE-style counting)
    "packaged_cardinality": ["model.params.kernel_options.cardinality=true"],
    # the optimiser, which the ten CT variants never vary while every baseline trial draws its
    # learning rate from {1e-3, 3e-4, 3e-3}: a 3x learning rate, a 1-epoch warmup (of 10), both
    "packaged_lr3e-3": ["optimizer.lr=0.003"],
    "packaged_warmup1": ["optimizer.warmup_epochs=1"],
    "packaged_lr3e-3_warmup1": ["optimizer.lr=0.003", "optimizer.warmup_epochs=1"],
    # GPS's recipe inside the CT: a global arrow (unmasked attention among the vertices of each
    # complex) beside the seven local arrows of the default tensor diagram
    "packaged_global0": [_GLOBAL0],
    # the global arrow with the CT's best ZINC trial point (packaged_trial_5: width 64, lr 3e-3):
    # what the ZINC gap to GPS is made of, global attention and tuning together
    "packaged_global0_lr3e-3_w64": [_GLOBAL0, "optimizer.lr=0.003", "model.params.hidden_channels=64"],
    # the global arrow biased by relative random-walk probabilities (GRIT's RRWP, 8 walk lengths:
    # the GraphUniverse grid's configuration), at the packaged point and at trial 5's point
    "packaged_global0_rrwp8": [_GLOBAL0, _RRWP8],
    "packaged_global0_rrwp8_lr3e-3_w64": [
        _GLOBAL0, _RRWP8, "optimizer.lr=0.003", "model.params.hidden_channels=64",
    ],
    # pool first, then the readout MLP (fit_pool_mlp on the packaged model): the variant that
    # matched the graph transformer on PROTEINS300 at 2 x 32
    "packaged_pool_mlp": ["model.params.readout_options.before_pooling=false"],
}

#: Search space of the baselines (their equal-budget configurations).
BASELINE_SPACE: dict[str, list[Any]] = {
    "optimizer.lr": [0.001, 0.0003, 0.003],
    "optimizer.weight_decay": [0.0, 0.01],
    "model.params.dropout": [0.0, 0.1],
    "model.params.hidden_channels": [32, 64],
}
BASELINES = ("gps", "gine", "gin", "graph_transformer", "cwn")
SEARCH_SEED = 0
#: Prefix of the packaged CT's trials: the baselines' trial points (the same draw of
#: :data:`BASELINE_SPACE`) applied to the packaged default, so that the CT gets the same tuning
#: budget as every baseline. Neither candidates of the design selection nor checks.
CT_TRIAL = "packaged_trial_"


def is_trial(config: str) -> bool:
    """Whether ``config`` is a trial of the shared search (a baseline's or the packaged CT's)."""
    return config.startswith(("trial_", CT_TRIAL))


def trial_index(config: str) -> int:
    """Index of a trial configuration in the shared draw (``-1`` for the CT's design variants)."""
    return int(config.rsplit("_", 1)[1]) if is_trial(config) else -1


def prepare_data(root: Path, work: Path) -> None:
    """Write the derived data sets once (RINGS6, PROTEINS300, converted GCB) into ``work``."""
    from ring_tu import write_ring_tu

    if not (work / "RINGS6" / "raw" / "RINGS6_A.txt").is_file():
        write_ring_tu(work, "RINGS6", 600, seed=0)
    if not (work / "PROTEINS300" / "raw" / "PROTEINS300_A.txt").is_file():
        subset_tu(root / "tudataset" / "PROTEINS" / "raw", "PROTEINS", work, "PROTEINS300", 300, seed=0)
    plain = work / "gcb" / "hard_small.plain.npz"
    if not plain.is_file():
        from topomodelx_attention.datasets.gcb import convert_gcb

        convert_gcb(root / "gcb" / "hard_small.npz", plain)


def subset_tu(raw: Path, name: str, out: Path, new: str, graphs: int, seed: int = 0) -> None:
    """Write a random ``graphs``-graph subset of a TU data set (labels and node labels kept)."""
    import numpy as np

    def lines(part: str) -> list[str]:
        return (raw / f"{name}_{part}.txt").read_text().split("\n")

    indicator = np.array([int(v) for v in lines("graph_indicator") if v.strip()])
    labels = [v for v in lines("graph_labels") if v.strip()]
    node_labels = [v for v in lines("node_labels") if v.strip()]
    keep = np.sort(np.random.default_rng(seed).choice(len(labels), size=graphs, replace=False)) + 1
    new_graph = {int(g): i + 1 for i, g in enumerate(keep)}
    node_mask = np.isin(indicator, keep)
    new_node = np.cumsum(node_mask)  # 1-based new ids of the kept vertices
    edges = []
    for line in lines("A"):
        if not line.strip():
            continue
        u, v = (int(t) for t in line.split(","))
        if node_mask[u - 1] and node_mask[v - 1]:
            edges.append(f"{new_node[u - 1]}, {new_node[v - 1]}")
    folder = out / new / "raw"
    files = {
        "A": edges,
        "graph_indicator": [str(new_graph[int(g)]) for g in indicator[node_mask]],
        "graph_labels": [labels[g - 1] for g in keep],
        "node_labels": [node_labels[i] for i in np.flatnonzero(node_mask)],
    }
    for part, rows in files.items():
        write_text(folder / f"{new}_{part}.txt", "\n".join(rows) + "\n", root=out)


def configurations(models: list[str]) -> list[tuple[str, str, list[str]]]:
    """``(model, configuration name, overrides)`` of every model: the same count for each."""
    from topomodelx_attention.harness.budget import search_trials

    out = [("cellular_transformer", name, list(ov)) for name, ov in CT_VARIANTS.items()]
    out += [("cellular_transformer", name, [*PACKAGED_THEN, *ov]) for name, ov in CT_CHECKS.items()]
    # the same trial points for the packaged CT and every baseline
    trials = [[f"{k}={v}" for k, v in values.items()]
              for values in search_trials(BASELINE_SPACE, len(CT_VARIANTS), SEARCH_SEED)]
    out += [("cellular_transformer", f"{CT_TRIAL}{index}", [*PACKAGED_THEN, *ov]) for index, ov in enumerate(trials)]
    out += [(model, f"trial_{index}", list(ov)) for model in BASELINES for index, ov in enumerate(trials)]
    return [c for c in out if c[0] in models]


def run_key(dataset: str, model: str, config: str, seed: int) -> str:
    """Key of one run in ``runs.jsonl``."""
    return f"{dataset}|{model}|{config}|{seed}"


def compose_run(
    spec: dict[str, Any], model: str, epochs: int, seed: int, work: str | Path, root: str | Path,
    overrides: Sequence[str] = (),
):
    """The harness configuration of one benchmark run of data set ``spec`` (a :data:`DATASETS` entry).

    ``epochs`` epochs, one seed, one thread, no plots, no progress bar, no early stopping, the
    cache under ``work``; the data set's own overrides, then ``overrides``.
    """
    from topomodelx_attention.harness.config import compose_config

    values = [
        f"trainer.max_epochs={epochs}", "trainer.num_threads=1", f"seeds=[{seed}]",
        "plot=false", "trainer.enable_progress_bar=false", "trainer.early_stopping_patience=null",
        f"paths.cache_dir={work}/cache", *spec["overrides"], *overrides,
    ]
    if spec["data_dir"]:
        values.append("dataset.data_dir=" + spec["data_dir"].format(work=work, root=root))
    return compose_config(values, dataset=spec["dataset"], model=model)


def run_one(task: dict[str, Any]) -> dict[str, Any]:
    """Train one (data set, model, configuration, seed); return its row (in a worker process)."""
    import torch

    torch.set_num_threads(1)
    import warnings

    warnings.filterwarnings("ignore")
    from topomodelx_attention.harness.training import run_experiment

    spec = task.get("spec") or DATASETS[task["dataset"]]  # another script's data sets travel in the task
    cfg = compose_run(spec, task["model"], task["epochs"], task["seed"], task["work"], task["root"], task["overrides"])
    out_dir = Path(task["work"]) / "runs" / task["key"].replace("|", "/")
    start = time.perf_counter()
    result = run_experiment(cfg, output_dir=out_dir, verbose=False)
    seed = result.seeds[0]
    history = seed.history
    train_loss = [float(r["train/loss"]) for r in history if "train/loss" in r]
    metric = result.metric
    chance = math.log(spec["classes"]) if spec["classes"] else None
    below = next((i for i, v in enumerate(train_loss) if chance is not None and v < chance), None)
    epoch_seconds = [float(r["epoch_seconds"]) for r in history if "epoch_seconds" in r]
    return {
        "key": task["key"], "dataset": task["dataset"], "model": task["model"],
        "config": task["config"], "seed": task["seed"], "overrides": task["overrides"],
        "metric": metric, "val": seed.val, "test": seed.test, "best_epoch": seed.best_epoch,
        "epochs": seed.epochs, "params": result.num_parameters,
        "s_per_epoch": statistics.fmean(epoch_seconds) if epoch_seconds else seed.seconds / max(seed.epochs, 1),
        "seconds": time.perf_counter() - start,
        "train_loss": train_loss,
        "train_acc": [float(r.get("train/accuracy", float("nan"))) for r in history if "train/loss" in r],
        "val_curve": [float(r[f"val/{metric}"]) for r in history if f"val/{metric}" in r],
        "wall": [float(r.get("wall_seconds", float("nan"))) for r in history if f"val/{metric}" in r],
        "chance": chance, "first_epoch_loss": train_loss[0] if train_loss else None,
        "epoch_below_chance": below,
    }


def worker_init() -> None:
    """Low priority, and end with the parent (Linux: ``PR_SET_PDEATHSIG``), so no orphan trains on."""
    os.nice(10)
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG (Lightning handles SIGTERM)


def run_tasks(
    tasks: list[dict[str, Any]], workers: int, runs: Path | None, out: Path | None, describe,
    *, target=None, record=None, fresh_process: bool = False,
) -> None:
    """Run :func:`run_one` on ``tasks`` in ``workers`` processes; append each row to ``runs`` as it ends.

    A failing run is reported and skipped, the others go on; ``describe(row)`` is the line printed
    for a finished run. ``target`` runs each task instead of :func:`run_one` (a function a spawned
    process imports by name); ``record(row)`` keeps each finished row instead of the line appended
    to ``runs`` (then ``runs`` and ``out`` are not read); ``fresh_process``: every task in a new
    worker process, so that per-process figures (peak resident memory) are the task's own.
    """
    context = multiprocessing.get_context("spawn")
    target = run_one if target is None else target
    fresh = {"max_tasks_per_child": 1} if fresh_process else {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=worker_init, **fresh) as pool:
        futures = {pool.submit(target, task): task for task in tasks}
        for future in as_completed(futures):
            task = futures[future]
            try:
                row = future.result()
            except Exception as error:  # a failing run is reported and skipped, the others go on
                print(f"FAILED {task['key']}: {type(error).__name__}: {error}", flush=True)
                continue
            if record is None:
                append_text(runs, json.dumps(row) + "\n", root=out)
            else:
                record(row)
            print(describe(row), flush=True)


def load_rows(path: Path) -> list[dict[str, Any]]:
    """Every finished run of ``runs.jsonl`` (the last row of a key wins)."""
    if not path.is_file():
        return []
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["key"]] = row
    return list(rows.values())


# ------------------------------------------------------------------------------------- tables
def _aggregate(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Mean over seeds per (data set, model, configuration)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["dataset"], row["model"], row["config"]), []).append(row)
    out = {}
    for key, group in groups.items():
        vals = [r["val"] for r in group if math.isfinite(r["val"])]
        tests = [r["test"] for r in group if math.isfinite(r["test"])]
        out[key] = {
            "metric": group[0]["metric"], "seeds": len(group),
            "val": statistics.fmean(vals) if vals else float("nan"),
            "test": statistics.fmean(tests) if tests else float("nan"),
            "test_std": statistics.pstdev(tests) if len(tests) > 1 else 0.0,
            "params": group[0]["params"], "epochs": statistics.fmean(r["epochs"] for r in group),
            "s_per_epoch": statistics.median(r["s_per_epoch"] for r in group),  # robust to one loaded run
            "first_loss": statistics.fmean(r["first_epoch_loss"] for r in group),
            "final_loss": statistics.fmean(r["train_loss"][-1] for r in group),
            "final_acc": statistics.fmean(r["train_acc"][-1] for r in group),
            "below": [r["epoch_below_chance"] for r in group], "chance": group[0]["chance"],
            "curves": [list(zip(r["wall"], r["val_curve"])) for r in group],
        }
    return out


def _better(metric: str) -> int:
    return 1 if metric == "accuracy" else -1


def _ranks(agg: dict, dataset: str, model: str) -> dict[str, float]:
    """Rank (1 = best validation; ties: their mean rank) of every configuration of ``model`` on ``dataset``."""
    entries = [(cfg, a) for (d, m, cfg), a in agg.items() if d == dataset and m == model and math.isfinite(a["val"])]
    if not entries:
        return {}
    sign = _better(entries[0][1]["metric"])
    # ties share their mean rank (a tie at the majority class says nothing about the variants)
    return {
        cfg: 1.0 + sum(sign * b["val"] > sign * a["val"] for _, b in entries)
        + 0.5 * (sum(b["val"] == a["val"] for _, b in entries) - 1)
        for cfg, a in entries
    }


def select_lodo(agg: dict, datasets: list[str]) -> tuple[dict[str, str], str | None, dict[str, float]]:
    """Leave-one-out choices per held-out data set, the all-data choice and mean ranks (validation only)."""
    # the shipped default and the checks of changes to it are no candidates
    candidates = {
        k: v for k, v in agg.items() if k[2] != "packaged" and k[2] not in CT_CHECKS and not k[2].startswith(CT_TRIAL)
    }
    ranks = {d: _ranks(candidates, d, "cellular_transformer") for d in datasets}
    configs = sorted({c for r in ranks.values() for c in r}, key=list(CT_VARIANTS).index)
    complete = [c for c in configs if all(c in ranks[d] for d in datasets if ranks[d])]

    def mean_rank(config: str, pool: list[str]) -> float:
        values = [ranks[d][config] for d in pool if config in ranks[d]]
        return statistics.fmean(values) if values else float("inf")

    choices = {}
    for held in datasets:
        pool = [d for d in datasets if d != held and ranks[d]]
        if pool and complete:
            choices[held] = min(complete, key=lambda c: mean_rank(c, pool))
    all_ranks = {c: mean_rank(c, [d for d in datasets if ranks[d]]) for c in complete}
    overall = min(complete, key=lambda c: all_ranks[c]) if complete else None
    return choices, overall, all_ranks


def _ties(overall: str | None, all_ranks: dict[str, float]) -> str:
    """`` (tied with X, Y)`` when other variants share the winner's mean rank, else ``""``."""
    if overall is None:
        return ""
    tied = [c for c, r in all_ranks.items() if c != overall and math.isclose(r, all_ranks[overall])]
    return f" (tied with {', '.join(tied)}: the protocol does not separate them)" if tied else ""


def _fmt(value: float, metric: str) -> str:
    if not math.isfinite(value):
        return "–"
    return f"{100 * value:.1f}" if metric == "accuracy" else f"{value:.3f}"


def complete_trials(rows: list[dict[str, Any]], datasets: list[str]) -> list[dict[str, Any]]:
    """The rows without the baseline trials that not every (data set, baseline) finished.

    A run stopped in the middle of a trial round would otherwise give some baselines one more
    trial than others on some data sets (an unequal budget).
    """
    done = {(r["dataset"], r["model"], r["config"]) for r in rows}
    baselines = [m for m in BASELINES if any(r["model"] == m for r in rows)]
    trials = {r["config"] for r in rows if r["model"] != "cellular_transformer"}
    full = {t for t in trials if all((d, m, t) in done for d in datasets for m in baselines)}
    return [r for r in rows if r["model"] == "cellular_transformer" or r["config"] in full]


def tables(rows: list[dict[str, Any]], datasets: list[str]) -> str:
    """Markdown: every run (mean over seeds), the selection and the comparison."""
    datasets = [d for d in datasets if any(r["dataset"] == d for r in rows)]
    rows = complete_trials(rows, datasets)
    agg = _aggregate(rows)
    lines = ["### Every configuration (validation / test; accuracy % or MAE; mean over seeds)", ""]
    lines.append("| data set | model | configuration | seeds | val | test | params | epochs | s/epoch | "
                 "first-epoch loss | final train loss | final train acc | epoch < chance |")
    lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (d, m, c), a in sorted(agg.items(), key=lambda kv: (datasets.index(kv[0][0]) if kv[0][0] in datasets else 99, kv[0][1] != "cellular_transformer", kv[0][1], kv[0][2])):
        chance = "" if a["chance"] is None else f" (ln C = {a['chance']:.2f})"
        below = "n/a" if a["chance"] is None else ",".join("never" if b is None else str(b) for b in a["below"])
        lines.append(
            f"| {d} | {m} | {c} | {a['seeds']} | {_fmt(a['val'], a['metric'])} | {_fmt(a['test'], a['metric'])} | "
            f"{a['params']} | {a['epochs']:.0f} | {a['s_per_epoch']:.2f} | {a['first_loss']:.2f}{chance} | "
            f"{a['final_loss']:.3f} | {100 * a['final_acc']:.1f} | {below} |"
        )
    choices, overall, all_ranks = select_lodo(agg, datasets)
    lines += ["", "### Leave-one-data-set-out selection of the CT variant (validation ranks only)", ""]
    lines.append("| held-out data set | chosen on the others | its val | its test |")
    lines.append("|---|---|---:|---:|")
    for d in datasets:
        if d in choices:
            a = agg.get((d, "cellular_transformer", choices[d]))
            if a:
                lines.append(f"| {d} | {choices[d]} | {_fmt(a['val'], a['metric'])} | {_fmt(a['test'], a['metric'])} |")
    lines += ["", "Mean validation rank over all data sets (1 = best): " + ", ".join(
        f"{c} {r:.2f}" for c, r in sorted(all_ranks.items(), key=lambda kv: kv[1])) + f"; winner: **{overall}**{_ties(overall, all_ranks)}.", ""]
    lines += ["### Comparison: LODO-chosen CT and the rank-0-readout CT vs the baselines' best-validation configuration", ""]
    lines += [
        "Each cell: test at the best validation epoch (validation; parameters, epochs, s/epoch; "
        "best validation reached within the wall time T of the fastest of the row, `@T`). "
        f"Trials per baseline: {_trial_counts(agg)}.", "",
    ]
    models = ["cellular_transformer (LODO)", "cellular_transformer (rank0_readout)", *BASELINES]
    lines.append("| data set | T (s) | " + " | ".join(models) + " |")
    lines.append("|---|---:|" + "---:|" * len(models))
    for d in datasets:
        entries = []
        for m in models:
            if m.startswith("cellular_transformer"):
                config = choices.get(d) if "LODO" in m else "rank0_readout"
                entries.append(agg.get((d, "cellular_transformer", config)) if config else None)
            else:
                ranks = _ranks(agg, d, m)
                best = min(ranks, key=ranks.get) if ranks else None
                entries.append(agg.get((d, m, best)) if best else None)
        lines.append(_comparison_row(d, entries))
    lines += _equal_trials_table(agg, datasets)
    lines += _checks_table(agg, datasets)
    return "\n".join(lines)


def _horizon(entries: list[dict[str, Any] | None]) -> float:
    """The wall time T of the fastest entry's whole run (its slowest seed), ``nan`` without curves."""
    walls = [max(w for c in a["curves"] for w, _ in c) for a in entries if a and a["curves"] and a["curves"][0]]
    return min(walls) if walls else float("nan")


def _best_within(a: dict[str, Any], horizon: float) -> float:
    """Best validation reached within ``horizon`` seconds, mean over the seeds that reached one (``nan``: none)."""
    sign = _better(a["metric"])
    at = [max((v for w, v in c if w <= horizon), key=lambda v: sign * v, default=float("nan")) for c in a["curves"]]
    at = [v for v in at if math.isfinite(v)]
    return statistics.fmean(at) if at else float("nan")


def _comparison_row(dataset: str, entries: list[dict[str, Any] | None]) -> str:
    """One row of a comparison: the horizon T (the fastest entry's wall time) and one cell per entry."""
    horizon = _horizon(entries)
    cells = []
    for a in entries:
        if a is None:
            cells.append("–")
            continue
        at_t = _best_within(a, horizon)
        cells.append(
            f"{_fmt(a['test'], a['metric'])} ± {_fmt(a['test_std'], a['metric'])} (val {_fmt(a['val'], a['metric'])}; "
            f"{a['params'] / 1000:.0f}k p, {a['epochs']:.0f} ep, {a['s_per_epoch']:.2f} s/ep; @T {_fmt(at_t, a['metric'])})"
        )
    return f"| {dataset} | {horizon:.0f} | " + " | ".join(cells) + " |"


def _equal_trials_table(agg: dict, datasets: list[str]) -> list[str]:
    """The packaged CT and every baseline, each at its best-validation trial of the same trial points.

    Only the trial indices the packaged CT finished on every data set count, for every model, so
    that each model gets exactly the same tuning budget (the same draw of :data:`BASELINE_SPACE`).
    """
    ct = "cellular_transformer"
    indices = sorted({trial_index(c) for _, m, c in agg if m == ct and c.startswith(CT_TRIAL)})
    indices = [i for i in indices if all((d, ct, f"{CT_TRIAL}{i}") in agg for d in datasets)]
    if not indices:
        return []
    models = [ct, *BASELINES]
    lines = ["", "### Equal tuning budget: the packaged CT and the baselines, each at its best-validation trial", ""]
    lines.append(
        f"Trials {', '.join(map(str, indices))} of the shared draw ({len(indices)} per model; the same "
        "learning rate, weight decay, dropout and width points for every model). Each cell: test mean ± std "
        "over seeds (validation; parameters, epochs, median s/epoch; best validation within the wall time T "
        "of the fastest entry of the row, `@T`)."
    )
    lines += ["", "| data set | T (s) | " + " | ".join(models) + " |", "|---|---:|" + "---:|" * len(models)]
    for d in datasets:
        entries = []
        for m in models:
            names = {f"{CT_TRIAL if m == ct else 'trial_'}{i}" for i in indices}
            pool = {k: v for k, v in agg.items() if k[0] == d and k[1] == m and k[2] in names}
            ranks = _ranks(pool, d, m)
            entries.append(pool.get((d, m, min(ranks, key=ranks.get))) if ranks else None)
        lines.append(_comparison_row(d, entries))
    return lines


def _checks_table(agg: dict, datasets: list[str]) -> list[str]:
    """The packaged CT, each of :data:`CT_CHECKS` and GPS's best-validation trial, per data set."""
    checks = [c for c in CT_CHECKS if any(k[1] == "cellular_transformer" and k[2] == c for k in agg)]
    if not checks:
        return []
    names = ["packaged", *checks]
    lines = ["", "### Checks: single changes to the packaged CT (not candidates of the selection)", ""]
    lines.append("Each cell: test mean ± std over seeds (validation; s/epoch). GPS: its best-validation trial.")
    lines += ["", "| data set | " + " | ".join(names) + " | gps |", "|---|" + "---:|" * (len(names) + 1)]
    for d in datasets:
        entries = [agg.get((d, "cellular_transformer", c)) for c in names]
        ranks = _ranks(agg, d, "gps")
        entries.append(agg.get((d, "gps", min(ranks, key=ranks.get))) if ranks else None)
        cells = [
            "–" if a is None else
            f"{_fmt(a['test'], a['metric'])} ± {_fmt(a['test_std'], a['metric'])} "
            f"(val {_fmt(a['val'], a['metric'])}; {a['s_per_epoch']:.2f} s/ep)"
            for a in entries
        ]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return lines


def best_trials(rows: list[dict[str, Any]], datasets: list[str]) -> dict[tuple[str, str], str]:
    """Each model's best-validation trial per data set: ``{(data set, model): configuration}``.

    The packaged CT is taken among its ``packaged_trial_*`` points, every baseline among its
    ``trial_*`` points (the equal-budget table's choice; only trials finished on every data set
    count, as there). For ``--best-of``: those configurations re-run with more epochs.
    """
    agg = _aggregate(complete_trials(rows, datasets))
    ct = "cellular_transformer"
    out = {}
    for d in datasets:
        for m in (ct, *BASELINES):
            prefix = CT_TRIAL if m == ct else "trial_"
            pool = {k: v for k, v in agg.items() if k[0] == d and k[1] == m and k[2].startswith(prefix)}
            ranks = _ranks(pool, d, m)
            if ranks:  # ties: the lowest trial index
                out[(d, m)] = min(ranks, key=lambda c: (ranks[c], trial_index(c)))
    return out


def _score_cell(a: dict[str, Any] | None) -> str:
    """``test ± std (val)`` of an aggregated entry, ``–`` when missing."""
    if a is None:
        return "–"
    return f"{_fmt(a['test'], a['metric'])} ± {_fmt(a['test_std'], a['metric'])} ({_fmt(a['val'], a['metric'])})"


def longer_training_table(
    long_rows: list[dict[str, Any]], short_rows: list[dict[str, Any]], datasets: list[str]
) -> str:
    """Markdown: each model's best 10-epoch trial, at the protocol's epochs and trained longer.

    One row per data set and model (the configuration of :func:`best_trials` on ``short_rows``),
    plus every CT configuration that is not a trial and was run long too (e.g. ``packaged``):
    test mean ± std over seeds, validation, the best epoch, final training loss and median
    s/epoch, at the short and the long epoch count; the rank of the row's validation among the
    rows of its data set at the long count (1 = best); the best validation within the wall time
    of the fastest row's whole run.
    """
    chosen = best_trials(short_rows, datasets)
    short, long = _aggregate(short_rows), _aggregate(long_rows)
    best_epochs: dict[tuple[str, str, str], list[int]] = {}
    for row in long_rows:
        best_epochs.setdefault((row["dataset"], row["model"], row["config"]), []).append(row["best_epoch"])
    epochs = sorted({round(a["epochs"]) for a in long.values()})
    lines = [f"### Longer training: each model's best 10-epoch trial at {', '.join(map(str, epochs))} epochs", ""]
    lines.append(
        "Test mean ± std over seeds (validation). Best epochs of the seeds; final training loss; median s/epoch; "
        "`val @T`: the best validation reached within the wall time T of the fastest model's whole long run on "
        "that data set (mean over seeds; `–`: no epoch finished by then)."
    )
    lines += ["", "| data set | model | trial | params | 10 epochs: test (val) | long: test (val) | best epochs | "
              "final train loss, 10 → long | s/epoch | val rank, long | T (s) | val @T |",
              "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for d in datasets:
        entries = [(m, c, short.get((d, m, c)), long.get((d, m, c))) for (dd, m), c in chosen.items() if dd == d]
        # CT configurations run long beside the trials (e.g. the packaged default itself)
        entries += [(m, c, short.get((d, m, c)), a) for (dd, m, c), a in sorted(long.items())
                    if dd == d and m == "cellular_transformer" and not c.startswith(CT_TRIAL)]
        entries = [e for e in entries if e[3] is not None]
        if not entries:
            continue
        sign = _better(entries[0][3]["metric"])
        horizon = _horizon([e[3] for e in entries])
        for m, c, a, b in entries:
            rank = 1 + sum(sign * other[3]["val"] > sign * b["val"] for other in entries)
            at_t = _fmt(_best_within(b, horizon), b["metric"])
            lines.append(
                f"| {d} | {m} | {c} | {b['params'] / 1000:.0f}k | {_score_cell(a)} | {_score_cell(b)} | "
                f"{','.join(map(str, best_epochs[(d, m, c)]))} of {b['epochs']:.0f} | "
                f"{'–' if a is None else format(a['final_loss'], '.3f')} → {b['final_loss']:.3f} | "
                f"{b['s_per_epoch']:.2f} | {rank} | {horizon:.0f} | {at_t} |"
            )
    return "\n".join(lines)


def _trial_counts(agg: dict) -> str:
    counts: dict[str, set] = {}
    for d, m, c in agg:
        if m != "cellular_transformer":
            counts.setdefault(m, set()).add((d, c))
    per = {m: len({c for _, c in v}) for m, v in counts.items()}
    return ", ".join(f"{m} {n}" for m, n in sorted(per.items())) + f"; CT variants {len(CT_VARIANTS)}"


def plan_tasks(
    args: argparse.Namespace,
    done: set[str],
    chosen: dict[tuple[str, str], str] | None,
    work: Path,
    root: Path,
) -> list[dict[str, Any]]:
    """The runs still to do, in run order.

    Every (seed, data set, configuration of ``args.models``) not in ``done``; only the
    ``args.configs`` named, if any; with ``chosen`` (``--best-of``) and no ``args.configs``, only
    each model's chosen trial per data set. Order: the CT's variants on every data set first (the
    selection needs them all), then the baselines trial by trial (a partial run leaves every
    baseline the same number of trials).
    """
    tasks = []
    for seed in args.seeds:
        for dataset in args.datasets:
            for model, config, overrides in configurations(args.models):
                if args.configs and config not in args.configs:
                    continue
                if chosen is not None and not args.configs and chosen.get((dataset, model)) != config:
                    continue
                key = run_key(dataset, model, config, seed)
                if key in done:
                    continue
                tasks.append({"key": key, "dataset": dataset, "model": model, "config": config,
                              "seed": seed, "overrides": overrides, "epochs": args.epochs,
                              "work": str(work), "root": str(root)})
    tasks.sort(key=lambda t: (trial_index(t["config"]), t["model"] != "cellular_transformer", t["seed"]))
    return tasks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--models", nargs="+", default=["cellular_transformer", *BASELINES])
    parser.add_argument("--configs", nargs="+", default=None, help="only these configuration names")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data-root", default=os.environ.get("TMA_DATA_ROOT"),
                        help="folder with tudataset/, gcb/, zinc12k/ (default $TMA_DATA_ROOT)")
    parser.add_argument("--work-dir", default=os.environ.get("TMA_DESIGN_WORK", str(Path(tempfile.gettempdir()) / "tma_design_space")),
                        help="derived data, cache and run folders (default $TMA_DESIGN_WORK or <tmp>/tma_design_space)")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--table", action="store_true", help="print the tables of the finished runs only")
    parser.add_argument("--list", action="store_true",
                        help="print the runs still to do (their key and epochs, one a line, in run order) and exit")
    parser.add_argument(
        "--best-of", metavar="RUNS",
        help="run only each model's best-validation trial per data set in the runs.jsonl RUNS (the "
        "10-epoch protocol), e.g. with more --epochs and another --out, or the --configs named; "
        "--table then compares them",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.best_of and Path(args.best_of).resolve() == (out / "runs.jsonl").resolve():
        parser.error("--best-of reads another protocol's runs: give a different --out for the re-runs")
    runs = out / "runs.jsonl"
    short_rows = load_rows(Path(args.best_of)) if args.best_of else []
    if args.best_of and not short_rows:
        parser.error(f"--best-of: no finished runs in {args.best_of}")
    chosen = best_trials(short_rows, args.datasets) if args.best_of else None
    if args.list:
        done = {row["key"] for row in load_rows(runs)}
        root, work = Path(args.data_root or "DATA"), Path(args.work_dir)
        for task in plan_tasks(args, done, chosen, work, root):
            print(f"{task['key']} ({task['epochs']} epochs)")
        return
    make_dirs(out)

    def render() -> str:
        if args.best_of:
            return longer_training_table(load_rows(runs), short_rows, args.datasets)
        return tables(load_rows(runs), args.datasets)

    if args.table:
        text = render()
        write_text(out / "tables.md", text + "\n", root=out)
        print(text)
        return
    if not args.data_root:
        parser.error("--data-root (or $TMA_DATA_ROOT) is needed: the folder holding tudataset/, gcb/ and zinc12k/")
    root, work = Path(args.data_root), Path(args.work_dir)
    make_dirs(work)
    prepare_data(root, work)
    done = {row["key"] for row in load_rows(runs)}
    tasks = plan_tasks(args, done, chosen, work, root)
    print(f"{len(done)} runs finished, {len(tasks)} to run with {args.workers} workers", flush=True)
    run_tasks(tasks, args.workers, runs, out, lambda row: (
        f"{row['key']}: val {row['val']:.4f} test {row['test']:.4f} first loss "
        f"{row['first_epoch_loss']:.2f} ({row['epochs']} ep, {row['s_per_epoch']:.2f} s/ep, {row['params']} params)"
    ))
    text = render()
    write_text(out / "tables.md", text + "\n", root=out)
    print(text)


if __name__ == "__main__":
    main()
