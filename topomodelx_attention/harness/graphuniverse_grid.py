"""The GraphUniverse challenge grid (TopoBench's TDL Challenge 2026) on this package's harness.

TopoBench ranks models on 12 GraphUniverse families (homophily lo/mid/hi × average degree lo/hi
× power-law exponent lo/hi, in that ``itertools.product`` order), two tasks (community
detection: node accuracy; triangle counting: test MSE / total test triangles) and three
training seeds (42, 43, 44), the best-validation checkpoint tested in distribution and on the
test splits of the 11 other settings (OOD). This module implements that protocol (TopoBench's
``2026_tdl_challenge/utils.py``) on the harness: every run is one
:func:`topomodelx_attention.harness.run_experiment` of ``experiment=graphuniverse_challenge``
(width 64, at most 500 epochs, patience 10, batch 16, 70/15/15 split by graph with seed 42,
families generated once and cached), then
:func:`~topomodelx_attention.harness.training.evaluate_checkpoint` of its best-validation
checkpoint on the other settings' test splits. No second training loop.

Results: ``<results>/<model>/results.json`` (:data:`RESULTS`, ``--results-dir``) in the
challenge's schema (``{"metadata": ..., "results": [row, ...]}``, rows as
``save_challenge_artifacts`` writes them; epoch-time mean/std and parameter counts from the
harness in ``wandb_config``). A run is finished when its row is in the file: a restart skips it
(resumable); rows are added under a file lock and the file is replaced atomically, so a killed
run leaves no partial row. Runs with fewer graphs or epochs than the protocol (``--n-graphs``,
``--max-epochs``) go to ``results_n<N>_e<E>[_f<seed>].json`` instead, never mixed with protocol
runs. **Selection never sees protocol test graphs**: graph-universe draws a family's graphs one
after another from its generation seed, so a family of ``n`` graphs with the protocol's seed is
the first ``n`` graphs of the protocol's 1,000, and the validation split of such a run holds
protocol test graphs. A run with fewer graphs than the protocol therefore generates its families
from :data:`SELECTION_FAMILY_SEED` (``dataset.family.seed``; the protocol's is 42), recorded as
``family_seed`` in its file's protocol and as ``_f<seed>`` in its name. The
workers import a copy of the package made when the grid starts (``<work>/code/<digest>``,
:data:`WORK`, ``--work-dir``; ``--live-code`` runs on the imported package), so editing the code
or the packaged configs during a grid of several hours neither changes nor breaks its runs.

From a source checkout, ``benchmarks/graphuniverse_grid.py`` runs :func:`cli` with the
checkout's ``benchmarks/results/graphuniverse`` and ``outputs/graphuniverse_grid``.

Examples
--------
Measure the epoch time (one epoch, one setting, no OOD)::

    python benchmarks/graphuniverse_grid.py --measure --models cellular_transformer

The CT grid, seed 42 first, two single-thread workers, at the lowest priority::

    nohup nice -n 19 python benchmarks/graphuniverse_grid.py --models cellular_transformer
        --seeds 42 --workers 2 > outputs/graphuniverse_grid/ct.log 2>&1 &

A variant's complete grid of one task becomes the entry (its rows and that task's overrides replace
those of ``results.json``; the replaced rows are kept in ``results_replaced_by_<variant>.json``)::

    python benchmarks/graphuniverse_grid.py --models cellular_transformer
        --tasks community_detection --promote cd-cardinality-global0-rrwp8

Configuration selection on a small subset (validation only, no OOD, its own file)::

    python benchmarks/graphuniverse_grid.py --models cellular_transformer --n-graphs 200
        --settings h_mid_d_hi_pl_lo --variant lr3e-3 --set optimizer.lr=0.003 --no-ood
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topomodelx_attention import files

__all__ = [
    "METRIC_KEYS",
    "PROTOCOL",
    "RESULTS",
    "SEEDS",
    "SELECTION_FAMILY_SEED",
    "SETTINGS",
    "TASKS",
    "WORK",
    "challenge_payload",
    "cli",
    "main",
    "notebook_slug",
    "parse_setting",
    "promote",
    "read_results",
    "results_file",
    "row_id",
    "run_id",
    "snapshot_package",
]

RESULTS = Path("benchmarks") / "results" / "graphuniverse"
"""Folder of the results files, one folder per model (relative: to the working folder; ``--results-dir``)."""
WORK = Path("outputs") / "graphuniverse_grid"
"""Folder of the runs' outputs, locks, claims and package copies (``--work-dir``)."""

LEVELS = {"homophily": ("lo", "mid", "hi"), "avg_degree": ("lo", "hi"), "power_law": ("lo", "hi")}
SETTINGS = [f"h_{h}_d_{d}_pl_{p}" for h, d, p in itertools.product(*LEVELS.values())]
"""The 12 settings, in the challenge's order (``itertools.product`` of h × d × pl)."""
TASKS = ("community_detection", "triangle_counting")
SEEDS = (42, 43, 44)
PROTOCOL = {"n_graphs": 1000, "max_epochs": 500, "patience": 10, "batch_size": 16, "width": 64}
METRIC_KEYS = (
    "test_loss",
    "test_best_rerun_accuracy",
    "test_best_rerun_mse",
    "test_triangles_total_structural",
    "test_mse_by_total_triangles",
)
"""The metrics of a row (and of every ``ood_test`` entry), as the challenge names them."""
PROTOCOL_FAMILY_SEED = 42
"""Generation seed of the protocol's families (``dataset.family.seed``, TopoBench's ``family_parameters.seed``)."""
SELECTION_FAMILY_SEED = 2718
"""Generation seed of the families of runs with fewer graphs than the protocol (configuration selection).

Any seed but the protocol's: a family drawn from it shares no graph with the protocol's families
(``tests/harness/test_graphuniverse_grid.py`` checks the graphs' contents on small families).
"""


def family_seed(n_graphs: int) -> int:
    """Return the generation seed of a run's families: the protocol's for ``n_graphs`` = 1,000, else :data:`SELECTION_FAMILY_SEED`."""
    return PROTOCOL_FAMILY_SEED if n_graphs == PROTOCOL["n_graphs"] else SELECTION_FAMILY_SEED


def parse_setting(slug: str) -> dict[str, str]:
    """``"h_mid_d_hi_pl_lo"`` -> ``{"homophily": "mid", "avg_degree": "hi", "power_law": "lo"}``.

    Parameters
    ----------
    slug : str
        A setting slug (:data:`SETTINGS`).

    Returns
    -------
    dict of str to str
        The ``dataset.*`` levels.

    Raises
    ------
    ValueError
        For a slug that is not one of the 12 settings.
    """
    if slug not in SETTINGS:
        raise ValueError(f"unknown setting {slug!r} (--settings): one of {SETTINGS} or 'all'")
    _, h, _, d, _, p = slug.split("_")
    return {"homophily": h, "avg_degree": d, "power_law": p}


def results_file(model: str, n_graphs: int, max_epochs: int, variant: str | None, root: Path | None = None) -> Path:
    """``<root>/<model>/results.json`` (root: :data:`RESULTS`) for protocol runs, else a file named by the deviation.

    ``results_n<N>_e<E>`` for fewer graphs or epochs, ``_f<seed>`` for families of another
    generation seed (:func:`family_seed`), then ``_<variant>``.
    """
    root = RESULTS if root is None else root
    name = "results"
    if n_graphs != PROTOCOL["n_graphs"] or max_epochs != PROTOCOL["max_epochs"]:
        name += f"_n{n_graphs}_e{max_epochs}"
    if family_seed(n_graphs) != PROTOCOL_FAMILY_SEED:
        name += f"_f{family_seed(n_graphs)}"
    if variant:
        name += f"_{variant}"
    return root / model / f"{name}.json"


def run_id(task: str, slug: str, seed: int) -> str:
    """Return the identifier of one run: ``<task>/<setting>/seed_<seed>``."""
    return f"{task}/{slug}/seed_{seed}"


# ----------------------------------------------------------------------------------------------
# results file: locked read-modify-write, atomic replace
# ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` (workers of one results file take turns; lock files in :data:`WORK`)."""
    with files.locked(WORK / "locks" / f"{path.parent.name}__{path.name}.lock"):
        yield


def read_results(
    path: Path, *, rows: str = "results", kind: str = "challenge results file", keys: tuple[str, ...] = ("metadata",)
) -> dict[str, Any]:
    """Read a JSON results file whose list of rows is ``data[rows]``; an empty one if it does not exist.

    Parameters
    ----------
    path : pathlib.Path
        The file.
    rows : str, default="results"
        Key of the list of rows.
    kind : str, default="challenge results file"
        What the file is, in the error.
    keys : tuple of str, default=("metadata",)
        Mappings the file holds beside the rows (empty ones added when absent).

    Returns
    -------
    dict
        The file's contents.

    Raises
    ------
    ValueError
        The file is not JSON, or has no list ``rows``.
    """
    data: Any = {**{key: {} for key in keys}, rows: []}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}); move it away to start over") from error
        if not isinstance(data, dict) or not isinstance(data.get(rows), list):
            raise ValueError(f"{path} is not a {kind} ({{{', '.join(map(repr, keys))}, '{rows}': [...]}})")
    for key in keys:
        data.setdefault(key, {})
    return data


def write_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON through the package's safe write path (exclusive temporary, then a rename)."""
    files.write_text(path, json.dumps(data, indent=1, allow_nan=True) + "\n")


def row_id(row: Mapping[str, Any]) -> str:
    """Run identifier of a results row."""
    return run_id(row["experiment"], row["run_slug"], int(row["train_seed"]))


def finished(path: Path) -> set[str]:
    """Return the identifiers of the runs that have a row in the results file."""
    with locked(path):
        return {row_id(r) for r in read_results(path)["results"]}


def add_row(path: Path, row: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
    """Add (or replace) one run's row and refresh the metadata, under the lock, atomically."""
    with locked(path):
        data = read_results(path)
        rows = [r for r in data["results"] if row_id(r) != row_id(row)] + [dict(row)]
        old = data.get("metadata", {})
        meta = {**old, **metadata}
        meta["task_overrides"] = {**old.get("task_overrides", {}), **metadata.get("task_overrides", {})}  # per task
        write_atomic(path, _file_of(meta, rows))


def _file_of(metadata: Mapping[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a results file of ``rows`` in the challenge's order, its counts and time stamp refreshed."""
    order = {rid: i for i, rid in enumerate(run_id(t, s, sd) for sd in SEEDS for s in SETTINGS for t in TASKS)}
    rows = sorted(rows, key=lambda r: order.get(row_id(r), len(order)))
    meta = {
        **metadata,
        "generated_at_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "n_runs": len(rows),
        "train_seeds": sorted({int(r["train_seed"]) for r in rows}),
    }
    return {"metadata": meta, "results": rows}


def notebook_slug(slug: str) -> str:
    """``"h_lo_d_lo_pl_lo"`` -> ``"h_lo__d_lo__pl_lo"``: the setting slug of TopoBench's notebook rows."""
    levels = parse_setting(slug)
    return f"h_{levels['homophily']}__d_{levels['avg_degree']}__pl_{levels['power_law']}"


def challenge_payload(data: Mapping[str, Any], model_config: str) -> dict[str, Any]:
    """Return a results file of this grid in exactly the layout the challenge notebook writes.

    TopoBench's ``run_challenge_grid`` / ``save_challenge_artifacts`` (main of 2026-06-11) name a
    setting ``h_lo__d_lo__pl_lo`` (double underscores) in ``run_slug`` and in the keys of
    ``ood_test``, whose entries hold only ``test_best_rerun_accuracy`` and ``test_best_rerun_mse``;
    its metadata are ``study_id``, ``model_config``, ``generated_at_utc``, ``n_runs``,
    ``train_seeds`` and ``heatmap_note``. This grid's rows use single underscores (its run keys and
    file names) and keep more per OOD entry; both are converted here. The rows keep this grid's
    extra ``harness`` entry (best epoch, validation curve, CPU seconds).

    Parameters
    ----------
    data : Mapping
        A results file of this grid (``{"metadata": ..., "results": [...]}``).
    model_config : str
        The TopoBench model config the entry stands for (``cell/cellular_transformer``).

    Returns
    -------
    dict
        ``{"metadata": ..., "results": [...]}`` in the notebook's layout.
    """
    rows = []
    for row in data.get("results", []):
        out = dict(row)
        out["run_slug"] = notebook_slug(row["run_slug"])
        out["ood_test"] = {
            notebook_slug(slug): {key: entry.get(key) for key in ("test_best_rerun_accuracy", "test_best_rerun_mse")}
            for slug, entry in (row.get("ood_test") or {}).items()
        }
        rows.append(out)
    metadata = data.get("metadata") or {}
    return {
        "metadata": {
            "study_id": metadata.get("study_id", "topomodelx_attention graphuniverse_grid"),
            "model_config": model_config,
            "generated_at_utc": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
            "n_runs": len(rows),
            "train_seeds": sorted({int(r["train_seed"]) for r in rows}),
            "heatmap_note": "Cells show mean ± std over train_seeds (in-distribution test).",
            "source": "benchmarks/graphuniverse_grid.py (the notebook's protocol on the topomodelx_attention harness)",
        },
        "results": rows,
    }


def promote(model: str, task: str, variant: str, root: Path | None = None) -> Path:
    """Make a variant's complete protocol grid of ``task`` the entry of ``results.json``.

    The variant file (``results_<variant>.json``) must hold all 36 runs of ``task`` (12 settings ×
    seeds 42, 43, 44) and share ``results.json``'s protocol and global overrides. Its rows of
    ``task`` and its ``task_overrides[task]`` replace those of ``results.json``; the other task's
    rows stay. The replaced rows, with the metadata they had, go to
    ``results_replaced_by_<variant>.json`` so that nothing is lost. Returns that file.
    """
    source = results_file(model, PROTOCOL["n_graphs"], PROTOCOL["max_epochs"], variant, root)
    target = results_file(model, PROTOCOL["n_graphs"], PROTOCOL["max_epochs"], None, root)
    kept = target.with_name(f"results_replaced_by_{variant}.json")
    with locked(target), locked(source):
        if not source.is_file() or not target.is_file():
            raise ValueError(f"--promote needs both {source} and {target}")
        if kept.exists():
            raise ValueError(f"{kept} exists: {variant} was promoted before (move that file away to promote again)")
        data, entry = read_results(source), read_results(target)
        new_rows = [r for r in data["results"] if r["experiment"] == task]
        have = {row_id(r) for r in new_rows}
        missing = [run_id(task, slug, seed) for seed in SEEDS for slug in SETTINGS if run_id(task, slug, seed) not in have]
        if missing:
            raise ValueError(
                f"{source.name} lacks {len(missing)} of the {len(SETTINGS) * len(SEEDS)} runs of {task} "
                f"(first: {missing[0]}); finish its grid before --promote"
            )
        old, meta = entry.get("metadata", {}), data.get("metadata", {})
        for key in ("protocol", "overrides"):
            if old.get(key) != meta.get(key):
                raise ValueError(f"{source.name} has {key}={meta.get(key)!r}, {target.name} {old.get(key)!r}: not the same entry")
        replaced = [r for r in entry["results"] if r["experiment"] == task]
        rows = [r for r in entry["results"] if r["experiment"] != task] + new_rows
        write_atomic(kept, {"metadata": {**old, "n_runs": len(replaced)}, "results": replaced})
        overrides = {**old.get("task_overrides", {}), task: list(meta.get("task_overrides", {}).get(task, []))}
        promoted = {**old.get("promoted", {}), task: source.name}
        write_atomic(target, _file_of({**old, "task_overrides": overrides, "promoted": promoted}, rows))
    return kept


# ----------------------------------------------------------------------------------------------
# one run
# ----------------------------------------------------------------------------------------------
def compose(model: str, task: str, slug: str, seed: int, args: argparse.Namespace, extra: Sequence[str] = ()):
    """Compose the harness configuration of one run (``experiment=graphuniverse_challenge`` + levels, then ``extra``)."""
    from topomodelx_attention.harness import compose_config

    levels = parse_setting(slug)
    overrides = [
        "experiment=graphuniverse_challenge",
        f"dataset.task={task}",
        *(f"dataset.{k}={v}" for k, v in levels.items()),
        f"dataset.n_graphs={args.n_graphs}",
        f"dataset.family.seed={family_seed(args.n_graphs)}",
        f"seeds=[{seed}]",
        f"trainer.max_epochs={args.max_epochs}",
        "trainer.num_threads=1",
        "trainer.enable_progress_bar=false",
        "plot=false",
        *(args.set or []),
        *(args.set_task.get(task, []) if isinstance(args.set_task, dict) else []),
        *extra,
    ]
    if args.cache_dir:
        overrides.append(f"paths.cache_dir={args.cache_dir}")
    return compose_config(overrides, dataset="graphuniverse", model=model)


def held_out_test(cfg, model_name: str) -> tuple[Any, list]:
    """Return the prepared data of a configuration and its test complexes, pruned to the model's keys."""
    from topomodelx_attention.harness.models import build_model, get_spec
    from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys
    from topomodelx_attention.harness.training import _data_pe_config

    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.get("pe")), cfg.paths.get("cache_dir"))
    _, _, test = prepared.split(0)
    complexes = list(test.complexes) if hasattr(test, "complexes") else [test[i] for i in range(len(test))]
    probe = build_model(model_name, cfg.model.get("params"), prepared.info)
    prune_keys(complexes, get_spec(model_name).keys(probe, prepared.info))
    prepared.complexes = []  # only the test split and the info are kept (memory)
    return prepared, complexes


def metrics_row(task: str, values: Mapping[str, float], triangles: int | None) -> dict[str, Any]:
    """Return the challenge's metric fields from harness test values (``loss``, ``accuracy``/``mse``, ``mse_per_triangle``)."""
    accuracy = values.get("accuracy") if task == "community_detection" else None
    mse = values.get("mse") if task == "triangle_counting" else None
    return {
        "test_loss": values.get("loss"),
        "test_best_rerun_accuracy": accuracy,
        "test_best_rerun_mse": mse,
        "test_triangles_total_structural": triangles,
        "test_mse_by_total_triangles": values.get("mse_per_triangle") if task == "triangle_counting" else None,
    }


def triangle_total(complexes: Sequence[Any]) -> int:
    """Triangles over test graphs: the sum of their targets (``y`` = networkx triangle count)."""
    return round(sum(float(c.y.sum()) for c in complexes))


def execute(model: str, task: str, slug: str, seed: int, args: argparse.Namespace, ood_cache: dict) -> dict[str, Any]:
    """Train one run, test its best checkpoint in distribution and OOD; return its row."""
    import numpy as np
    import torch

    from topomodelx_attention.harness import run_experiment
    from topomodelx_attention.harness.models import build_model
    from topomodelx_attention.harness.training import best_checkpoint, evaluate_checkpoint

    torch.set_num_threads(1)
    cfg = compose(model, task, slug, seed, args)
    out = WORK / Path(results_file(model, args.n_graphs, args.max_epochs, args.variant).stem) / model / task / slug / f"seed_{seed}_{datetime.now():%Y%m%d-%H%M%S}"
    start = time.perf_counter()
    prepared, test = held_out_test(cfg, model)  # lifts and caches the family first (not in the CPU time below)
    cpu_start = time.process_time()
    result = run_experiment(cfg, output_dir=out, verbose=True)
    train_cpu = time.process_time() - cpu_start  # CPU seconds: comparable on a shared machine, unlike wall time
    seed_result = result.seeds[0]
    checkpoint = best_checkpoint(out, seed)
    values = evaluate_checkpoint(cfg, prepared.info, checkpoint, test)  # = the run's own test (best ckpt re-tested)
    row: dict[str, Any] = {
        "experiment": task,
        "wandb_project": None,
        "wandb_run_name": f"{model}_{task}_{slug}_seed{seed}",
        "train_seed": seed,
        **dict(zip(("homophily", "avg_degree", "power_law"), (f"{p}_{v}" for p, v in zip(("h", "d", "pl"), parse_setting(slug).values())))),
        "run_slug": slug,
        **metrics_row(task, values, triangle_total(test) if task == "triangle_counting" else None),
    }
    ood: dict[str, Any] = {}
    if not args.no_ood:
        for other in reversed(SETTINGS):  # reversed: a generator filling the cache in grid order meets it halfway
            if other == slug:
                continue
            key = (model, task, other)
            if key not in ood_cache:
                # only the test split is needed: one training and one validation graph are lifted
                # besides it (dataset.subset cuts the splits from their start; the test split is whole)
                other_cfg = compose(model, task, other, seed, args, ["dataset.subset={train:1,val:1}"])
                ood_cache[key] = held_out_test(other_cfg, model)[1]
            complexes = ood_cache[key]
            ood_values = evaluate_checkpoint(cfg, prepared.info, checkpoint, complexes)
            ood[other] = metrics_row(task, ood_values, triangle_total(complexes) if task == "triangle_counting" else None)
    row["ood_test"] = {other: ood[other] for other in SETTINGS if other in ood}  # the challenge's order
    here = Path.cwd()
    row["output_dir"] = str(out.relative_to(here)) if out.is_absolute() and out.is_relative_to(here) else str(out)
    epoch_seconds = [float(r["epoch_seconds"]) for r in seed_result.history if "epoch_seconds" in r]
    params = build_model(model, cfg.model.get("params"), prepared.info)
    total = sum(p.numel() for p in params.parameters())
    trainable = sum(p.numel() for p in params.parameters() if p.requires_grad)
    row["wandb_config"] = {  # the challenge reads these from wandb's config.yaml; here: the harness's own
        "AvgTime/train_epoch_mean": float(np.mean(epoch_seconds)) if epoch_seconds else None,
        "AvgTime/train_epoch_std": float(np.std(epoch_seconds)) if epoch_seconds else None,
        "model/params/total": total,
        "model/params/trainable": trainable,
        "model/params/non_trainable": total - trainable,
    }
    row["harness"] = {  # ours, beyond the challenge's schema
        "variant": args.variant,
        "n_graphs": args.n_graphs,
        "max_epochs": args.max_epochs,
        "patience": int(cfg.trainer.early_stopping_patience),
        "best_epoch": seed_result.best_epoch,
        "epochs": seed_result.epochs,
        f"val_best_{prepared.info.metric}": seed_result.val,
        "val_curve": [r.get(f"val/{prepared.info.metric}") for r in seed_result.history],
        "run_test_metric": seed_result.test,
        "seconds": time.perf_counter() - start,
        "train_cpu_seconds": train_cpu,
        "cpu_seconds_per_epoch": train_cpu / max(seed_result.epochs, 1),  # cached data load, validation and test included
        "overrides": list(args.set or []) + list(args.set_task.get(task, []) if isinstance(args.set_task, dict) else []),
        "host_threads": 1,
    }
    return row


@functools.cache
def packaged_defaults(model: str) -> str:
    """Fingerprint of a model's packaged configuration (its ``model`` and ``optimizer`` groups).

    A results file records it, so that runs made after the packaged defaults changed never join
    runs made before (the overrides alone would look the same). Computed once per process: every
    row a worker writes carries it.
    """
    from omegaconf import OmegaConf

    from topomodelx_attention.harness import compose_config

    cfg = compose_config([], model=model)
    tree = {"model": OmegaConf.to_container(cfg.model, resolve=True),
            "optimizer": OmegaConf.to_container(cfg.optimizer, resolve=True)}
    return hashlib.sha256(json.dumps(tree, sort_keys=True, default=str).encode()).hexdigest()[:16]


def metadata(model: str, args: argparse.Namespace) -> dict[str, Any]:
    """Top-level metadata of a results file (the challenge's keys plus the protocol used)."""
    return {
        "study_id": results_file(model, args.n_graphs, args.max_epochs, args.variant).stem,
        "model_config": model,
        "heatmap_note": "topomodelx_attention harness, benchmarks/graphuniverse_grid.py (TopoBench "
        "2026_tdl_challenge protocol re-implemented; no wandb: epoch times and parameter counts from the harness)",
        "protocol": {
            **PROTOCOL, "n_graphs": args.n_graphs, "max_epochs": args.max_epochs, "ood": not args.no_ood,
            **({"family_seed": family_seed(args.n_graphs)} if family_seed(args.n_graphs) != PROTOCOL_FAMILY_SEED else {}),
        },
        "variant": args.variant,
        "overrides": list(args.set or []),
        "task_overrides": {t: list(args.set_task.get(t, [])) for t in args.tasks} if isinstance(args.set_task, dict) else {},
        "packaged_defaults": packaged_defaults(model),
    }


# ----------------------------------------------------------------------------------------------
# scheduling: claims (one worker per run), workers, resume
# ----------------------------------------------------------------------------------------------
def planned(args: argparse.Namespace) -> list[tuple[str, str, str, int]]:
    """Every run asked for, in order: model, seed, setting, task (both tasks of a setting together)."""
    return [(m, t, s, sd) for m in args.models for sd in args.seeds for s in args.settings for t in args.tasks]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim(model: str, rid: str, args: argparse.Namespace) -> bool:
    """Take a run for this process (a claim file); a claim of a dead process is taken over."""
    path = WORK / "claims" / results_file(model, args.n_graphs, args.max_epochs, args.variant).stem / model / (rid.replace("/", "__") + ".claim")
    with locked(path.parent / "claims"):
        if path.is_file():
            try:
                host, pid = path.read_text().split()
                if host != socket.gethostname() or _alive(int(pid)):
                    return False
            except ValueError:
                pass
        files.write_text(path, f"{socket.gethostname()} {os.getpid()}\n", root=WORK)
    return True


def check_configuration(args: argparse.Namespace) -> None:
    """Refuse to add runs of another configuration to an existing results file (one configuration per file)."""
    for model in args.models:
        path = results_file(model, args.n_graphs, args.max_epochs, args.variant)
        with locked(path):
            old = read_results(path).get("metadata", {})
        if not old:
            continue
        new = metadata(model, args)
        pairs = [(key, old.get(key), new[key]) for key in ("overrides", "protocol", "packaged_defaults") if key in old]
        pairs += [
            (f"task_overrides[{task}]", old["task_overrides"][task], new["task_overrides"][task])
            for task in args.tasks
            if task in old.get("task_overrides", {})
        ]
        for key, before, now in pairs:
            if before != now:
                raise ValueError(
                    f"{path} holds runs with {key}={before!r}, these runs would have {now!r}: "
                    "pass the same options to continue it, or --variant NAME for a file of their own"
                )


def worker(args: argparse.Namespace) -> int:
    """Run pending runs until none is left; return the number of failed runs."""
    import topomodelx_attention

    print(f"worker {os.getpid()}: package {Path(topomodelx_attention.__file__).parent}", flush=True)
    ood_cache: dict = {}
    failures = 0
    for model, task, slug, seed in planned(args):
        path = results_file(model, args.n_graphs, args.max_epochs, args.variant)
        rid = run_id(task, slug, seed)
        if rid in finished(path) or not claim(model, rid, args):
            continue
        if rid in finished(path):  # finished by another worker between the two checks
            continue
        print(f"[{datetime.now():%H:%M:%S}] {model} {rid}: start", flush=True)
        try:
            row = execute(model, task, slug, seed, args, ood_cache)
        except Exception as error:  # one failed run must not stop the grid; it stays pending
            failures += 1
            print(f"[{datetime.now():%H:%M:%S}] {model} {rid}: FAILED {type(error).__name__}: {error}", flush=True)
            continue
        add_row(path, row, metadata(model, args))
        score = row["test_best_rerun_accuracy"] if task == "community_detection" else row["test_mse_by_total_triangles"]
        print(
            f"[{datetime.now():%H:%M:%S}] {model} {rid}: done, test {score:.4g}, {row['harness']['epochs']} epochs, "
            f"{row['wandb_config']['AvgTime/train_epoch_mean']:.1f} s/epoch, {row['harness']['seconds']:.0f} s",
            flush=True,
        )
    return failures


def measure(args: argparse.Namespace) -> None:
    """Time training epochs of each model on the first setting (no OOD, nothing written to results)."""
    import numpy as np
    import torch

    from topomodelx_attention.harness import run_experiment

    torch.set_num_threads(1)
    for model in args.models:
        task, slug = args.tasks[0], args.settings[0]
        cfg = compose(model, task, slug, args.seeds[0], args)
        t = time.perf_counter()
        from topomodelx_attention.harness.prepare import prepare_dataset
        from topomodelx_attention.harness.training import _data_pe_config

        prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.get("pe")), cfg.paths.get("cache_dir"))
        prep = time.perf_counter() - t
        out = WORK / "measure" / model / f"{datetime.now():%Y%m%d-%H%M%S}"
        cpu = time.process_time()
        result = run_experiment(cfg, output_dir=out, verbose=False)
        cpu = time.process_time() - cpu
        epochs = [r["epoch_seconds"] for r in result.seeds[0].history]
        print(
            f"{model} {task} {slug} n_graphs={args.n_graphs}: prepare {prep:.1f} s (cached after the first run), "
            f"{len(epochs)} epochs, {np.mean(epochs):.1f} ± {np.std(epochs):.1f} s wall per training epoch, "
            f"{cpu / max(len(epochs), 1):.1f} CPU s per epoch (validation included), "
            f"{result.num_parameters} parameters",
            flush=True,
        )


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["cellular_transformer"], help="harness model names (harness.models)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--settings", nargs="+", default=["all"], help="setting slugs (h_lo_d_lo_pl_lo, ...) or 'all'")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--workers", type=int, default=1, help="worker processes, one thread each")
    parser.add_argument("--n-graphs", type=int, default=PROTOCOL["n_graphs"], help="graphs per family (smaller: documented non-protocol run)")
    parser.add_argument("--max-epochs", type=int, default=PROTOCOL["max_epochs"])
    parser.add_argument("--cache-dir", default=None, help="harness cache (families, lifted complexes)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="harness override for every run (repeatable)")
    parser.add_argument("--set-cd", action="append", metavar="KEY=VALUE", default=[], help="override for community detection only")
    parser.add_argument("--set-tc", action="append", metavar="KEY=VALUE", default=[], help="override for triangle counting only")
    parser.add_argument("--variant", default=None, help="name of a configuration variant (its own results file)")
    parser.add_argument("--no-ood", action="store_true", help="skip the OOD tests (configuration selection)")
    parser.add_argument("--measure", action="store_true", help="time the epochs of each model (2 epochs, first setting)")
    parser.add_argument("--list", action="store_true", help="print the pending runs and exit")
    parser.add_argument(
        "--promote", metavar="VARIANT", help="make VARIANT's complete grid of the one --tasks task the entry of results.json"
    )
    parser.add_argument(
        "--export-challenge",
        metavar="PATH",
        help="write the one --models model's results.json in the challenge notebook's exact layout to PATH and exit",
    )
    parser.add_argument(
        "--model-config", default=None, help="TopoBench model config named in --export-challenge's metadata (required there)"
    )
    parser.add_argument(
        "--live-code",
        action="store_true",
        help="run on the package as imported (default: the workers import a copy made at start, so that "
        "edits during the grid cannot change or break its runs)",
    )
    parser.add_argument("--results-dir", type=Path, default=None, help=f"folder of the results files (default {RESULTS})")
    parser.add_argument("--work-dir", type=Path, default=None, help=f"run outputs, locks and package copies (default {WORK})")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.settings = list(SETTINGS) if args.settings == ["all"] else args.settings
    for slug in args.settings:
        parse_setting(slug)
    if args.n_graphs < 10:
        parser.error("--n-graphs must be at least 10 (every split needs a graph)")
    if args.variant is not None and not args.variant.replace("-", "").replace(".", "").isalnum():
        parser.error("--variant must be letters, digits, '-' or '.'")
    args.set_task = {"community_detection": args.set_cd, "triangle_counting": args.set_tc}
    given = [item for items in (args.set or [], args.set_cd, args.set_tc) for item in items]
    if any(item.split("=", 1)[0].lstrip("+") == "dataset.family.seed" for item in given):
        parser.error(
            "dataset.family.seed is the grid's: the protocol's families for --n-graphs "
            f"{PROTOCOL['n_graphs']}, seed {SELECTION_FAMILY_SEED} for fewer graphs (no protocol test graph in selection)"
        )
    return args


def snapshot_package(root: Path) -> Path:
    """Copy the imported package's files to ``root/<digest>/topomodelx_attention`` (once per content).

    Workers started with the returned folder first on ``PYTHONPATH`` import this copy, so editing
    the working tree (code or packaged YAML configs) while a grid runs for hours changes none of
    its runs. The digest covers every file's path and bytes, so an unchanged package reuses its copy.

    Parameters
    ----------
    root : Path
        Folder holding the copies.

    Returns
    -------
    Path
        The folder to put on ``PYTHONPATH``.
    """
    import topomodelx_attention

    source = Path(topomodelx_attention.__file__).resolve().parent
    sources = sorted(
        f for f in source.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"
    )
    digest = hashlib.sha256()
    for f in sources:
        digest.update(str(f.relative_to(source)).encode() + b"\0" + f.read_bytes() + b"\0")
    target = root / digest.hexdigest()[:16]
    complete = target / ".complete"
    if complete.is_file():
        return target
    # every file written atomically (a concurrent launcher writes the same bytes), the marker last
    for f in sources:
        files.write_bytes(target / "topomodelx_attention" / f.relative_to(source), f.read_bytes(), root=root)
    files.write_text(complete, "", root=root)
    return target


def check_models(models: Sequence[str]) -> None:
    """Refuse a ``--models`` name that is not a harness model (``ValueError`` naming the option)."""
    from topomodelx_attention.harness.models import MODELS

    unknown = [name for name in models if name not in MODELS]
    if unknown:
        raise ValueError(f"unknown model {unknown[0]!r} (--models); harness models: {sorted(MODELS)}")


def export_paths(args: argparse.Namespace) -> tuple[Path, Path]:
    """``(results file, output file)`` of ``--export-challenge``, checked before anything is read or written.

    ``ValueError`` naming the option for: not exactly one ``--models`` name, no
    ``--model-config``, an unknown model or one without results, an output that is a folder,
    lies in a folder that does not exist, or is the results file itself.
    """
    if not args.model_config or len(args.models) != 1:
        given = "no --model-config" if not args.model_config else f"--models {' '.join(args.models)}"
        raise ValueError(
            f"--export-challenge takes exactly one model and its TopoBench config, got {given} "
            "(--models NAME --model-config DOMAIN/CONFIG, e.g. cell/cellular_transformer_rrwp)"
        )
    model = args.models[0]
    source = results_file(model, PROTOCOL["n_graphs"], PROTOCOL["max_epochs"], args.variant)
    if not source.is_file():
        check_models([model])
        raise ValueError(f"--export-challenge: model {model!r} has no results file {source} (run its grid first)")
    target = Path(args.export_challenge).expanduser()
    if target.is_dir():
        raise ValueError(
            f"--export-challenge {target} is a folder; pass the output file, e.g. {target / f'{model}.json'}"
        )
    if not target.parent.is_dir():
        raise ValueError(f"--export-challenge {target}: its folder {target.parent} does not exist (create it first)")
    if target.resolve() == source.resolve():
        raise ValueError(f"--export-challenge {target} is the grid's results file itself; write the export elsewhere")
    return source, target


def cli(argv: Sequence[str] | None = None, *, results: Path | None = None, work: Path | None = None) -> int:
    """:func:`main` as a command: a user error (bad option, file or folder) is one line on stderr, exit status 2.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line options; default: ``sys.argv[1:]``.
    results, work : Path, optional
        As for :func:`main`.

    Returns
    -------
    int
        Exit status (2 for a user error).
    """
    try:
        return main(argv, results=results, work=work)
    except (ValueError, OSError) as error:
        if os.environ.get("TOPOMODELX_ATTENTION_TRACEBACK"):
            raise
        text = " ".join(str(error).split()) or type(error).__name__
        print(f"{Path(__file__).name}: error: {text}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None, *, results: Path | None = None, work: Path | None = None) -> int:
    """Run the grid (or ``--measure`` / ``--list`` / ``--promote`` / ``--export-challenge``).

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line options (``--help`` lists them); default: ``sys.argv[1:]``.
    results, work : Path, optional
        Defaults of ``--results-dir`` and ``--work-dir`` (the options win); without either,
        :data:`RESULTS` and :data:`WORK`.

    Returns
    -------
    int
        Exit status: 0, or 1 when a run failed (it stays pending).
    """
    global RESULTS, WORK
    args = parse(argv)
    results = args.results_dir or results
    work = args.work_dir or work
    if results is not None:
        RESULTS = Path(results).expanduser().resolve()
    if work is not None:
        WORK = Path(work).expanduser().resolve()
    if args.export_challenge:
        source, target = export_paths(args)
        payload = challenge_payload(read_results(source), args.model_config)
        write_atomic(target, payload)
        print(f"{source} -> {target}: {payload['metadata']['n_runs']} rows in the notebook's layout")
        return 0
    if args.promote:
        if len(args.tasks) != 1:
            raise ValueError("--promote takes exactly one task (--tasks community_detection or triangle_counting)")
        for model in args.models:
            kept = promote(model, args.tasks[0], args.promote)
            print(f"{model}: {args.tasks[0]} rows of results_{args.promote}.json are the entry now; replaced rows in {kept}")
        return 0
    if args.measure:
        args.max_epochs = min(args.max_epochs, 2)
        measure(args)
        return 0
    check_models(args.models)
    check_configuration(args)
    pending = [
        (m, t, s, sd)
        for m, t, s, sd in planned(args)
        if run_id(t, s, sd) not in finished(results_file(m, args.n_graphs, args.max_epochs, args.variant))
    ]
    print(f"{len(pending)} of {len(planned(args))} runs pending", flush=True)
    if args.list:
        for item in pending:
            print(" ", item[0], run_id(*item[1:]))
        return 0
    if args.worker or (args.workers <= 1 and args.live_code):
        return min(worker(args), 1)
    # a worker runs this module's cli; '' (the working folder, first on sys.path under -c) is taken
    # off sys.path so that the package is imported from PYTHONPATH (the copy), not a checkout here
    starter = f"import sys; sys.path.pop(0); from {__name__} import cli; sys.exit(cli())"
    roots = ["--results-dir", str(Path(RESULTS).resolve()), "--work-dir", str(Path(WORK).resolve())]
    given = list(argv if argv is not None else sys.argv[1:])
    if args.cache_dir:  # the workers' relative paths are the launcher's
        given += ["--cache-dir", str(Path(args.cache_dir).expanduser().resolve())]
    command = [sys.executable, "-c", starter, *given, *roots, "--worker"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if not args.live_code:
        code = snapshot_package(WORK / "code")
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])
        print(f"workers import the package copied to {code} (--live-code: the package as imported)", flush=True)
    procs = []
    for i in range(args.workers):
        procs.append(subprocess.Popen(command, env=env))
        time.sleep(5 if i + 1 < args.workers else 0)  # the first claims its run before the next starts
    codes = [p.wait() for p in procs]
    return max(codes) if codes else 0


if __name__ == "__main__":
    sys.exit(cli())
