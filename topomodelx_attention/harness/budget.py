"""Equal-budget comparison of models: the same wall time and the same hyperparameter trials.

:func:`run_equal_budget` compares models under the same budget: the same wall time per seed
and the same number of hyperparameter trials (drawn from one search space by
:func:`search_trials`, selected on the validation metric only), and writes one table and one
time-to-accuracy plot per data set (:func:`write_budget_tables`). Every run is one
:func:`~topomodelx_attention.harness.training.run_experiment`.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from topomodelx_attention.files import make_dirs, write_csv, write_text
from topomodelx_attention.harness.results import (
    ExperimentResult,
    comparison_table,
    plot_time_to_accuracy,
    summary_row,
)
from topomodelx_attention.harness.training import run_experiment

__all__ = ["BudgetTrial", "resolve_budget", "run_equal_budget", "search_trials", "write_budget_tables"]


def search_trials(
    space: Mapping[str, Sequence[Any]], trials: int, seed: int = 0
) -> list[dict[str, Any]]:
    """Hyperparameter trials: ``trials`` distinct points of the grid ``space``, drawn at random.

    The same ``(space, trials, seed)`` gives the same trials, so every model of a comparison
    gets the same search budget (and the same candidate values). With ``trials`` at least the
    grid size, the whole grid is returned (in grid order).

    Parameters
    ----------
    space : mapping of str to sequence
        ``{config key: candidate values}``, e.g. ``{"optimizer.lr": [1e-3, 3e-4]}``.
    trials : int
        Number of trials (at least 1).
    seed : int, default=0
        Seed of the draw.

    Returns
    -------
    list of dict
        One ``{config key: value}`` per trial (``[{}]`` for an empty space).
    """
    if int(trials) < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    keys = sorted(space)
    for key in keys:
        if isinstance(space[key], str) or not isinstance(space[key], Sequence) or not space[key]:
            raise ValueError(
                f"search space entry {key!r} must be a non-empty list of values, got {space[key]!r}"
            )
    grid = [
        dict(zip(keys, values)) for values in itertools.product(*(list(space[k]) for k in keys))
    ]
    if int(trials) >= len(grid):
        return grid
    import numpy as np

    picked = np.random.default_rng(int(seed)).choice(len(grid), size=int(trials), replace=False)
    return [grid[int(i)] for i in sorted(picked)]


@dataclass
class BudgetTrial:
    """One hyperparameter trial of one model under the equal budget.

    Attributes
    ----------
    model : str
        Model name.
    trial : int
        Trial index.
    values : dict
        The trial's config values.
    result : ExperimentResult
        All seeds of the trial.
    mean_val : float
        Mean best validation metric over the seeds (the selection criterion).
    selected : bool
        Whether this trial was selected for the model.
    """

    model: str
    trial: int
    values: dict[str, Any]
    result: ExperimentResult
    mean_val: float
    selected: bool = False


def resolve_budget(
    max_time: float | None = None,
    trials: int | None = None,
    space: Mapping[str, Sequence[Any]] | None = None,
    search_seed: int | None = None,
) -> tuple[float, int, dict[str, Sequence[Any]], int]:
    """Resolve the equal-budget settings: ``budget`` of ``train.yaml`` for those not given.

    Parameters
    ----------
    max_time, trials, space, search_seed : optional
        As for :func:`run_equal_budget`; ``None`` takes the packaged default.

    Returns
    -------
    tuple
        ``(max_time, trials, space, search_seed)``.
    """
    from topomodelx_attention.harness.config import compose_config

    defaults = compose_config().get("budget") or {}
    max_time = float(max_time if max_time is not None else defaults.get("max_time", 60))
    trials = int(trials if trials is not None else defaults.get("trials", 4))
    space = dict(
        space if space is not None else OmegaConf.to_container(defaults.get("space") or {})
    )
    search_seed = int(search_seed if search_seed is not None else defaults.get("search_seed", 0))
    return max_time, trials, space, search_seed


def run_equal_budget(
    datasets: Sequence[str],
    models: Sequence[str],
    *,
    seeds: Sequence[int] = (1, 2, 3),
    max_time: float | None = None,
    max_epochs: int | None = None,
    trials: int | None = None,
    space: Mapping[str, Sequence[Any]] | None = None,
    search_seed: int | None = None,
    overrides: Sequence[str] = (),
    model_overrides: Mapping[str, Sequence[str]] | None = None,
    data_dirs: Mapping[str, str] | None = None,
    output_root: str | os.PathLike = "outputs/equal_budget",
    verbose: bool = True,
) -> dict[str, list[BudgetTrial]]:
    """Compare models with the same wall-time and hyperparameter-search budget.

    For every data set and model, the same ``trials`` hyperparameter settings
    (:func:`search_trials` over ``space``) are each trained on every seed with
    ``trainer.max_time = max_time`` seconds per seed; the trial with the best mean validation
    metric is selected (the test split is never used to select) and its test metric reported.
    Writes, per data set, ``<output_root>/<dataset>/results.md`` (selected trials: test,
    validation, parameters, epochs reached, seconds per epoch, budget; then every trial),
    ``trials.csv`` and ``time_to_accuracy.png`` (validation metric against wall time, the
    selected trial of every model), next to one run folder per (model, trial).

    Parameters
    ----------
    datasets, models : sequence of str
        Data set and model names.
    seeds : sequence of int, default=(1, 2, 3)
        Seeds of every trial.
    max_time : float, optional
        Wall-time budget per seed in seconds (default: ``budget.max_time`` of ``train.yaml``).
    max_epochs : int, optional
        Epoch cap (default ``-1``: the time budget alone ends training).
    trials : int, optional
        Trials per model (default: ``budget.trials``).
    space : mapping, optional
        Search space (default: ``budget.space``).
    search_seed : int, optional
        Seed of the trial draw (default: ``budget.search_seed``).
    overrides : sequence of str
        Hydra overrides for every run.
    model_overrides : mapping of str to sequence of str, optional
        Extra overrides per model name.
    data_dirs : mapping of str to str, optional
        ``dataset.data_dir`` per data set name.
    output_root : path-like, default="outputs/equal_budget"
        Output folder.
    verbose : bool, default=True
        Print progress and the tables.

    Returns
    -------
    dict of str to list of BudgetTrial
        Every trial, by data set.
    """
    from topomodelx_attention.harness.config import compose_config

    max_time, trials, space, search_seed = resolve_budget(max_time, trials, space, search_seed)
    settings = search_trials(space, trials, search_seed)
    root = Path(output_root)
    out: dict[str, list[BudgetTrial]] = {}
    for dataset in datasets:
        rows: list[BudgetTrial] = []
        for model in models:
            base = [
                f"trainer.max_time={max_time}",
                f"trainer.max_epochs={-1 if max_epochs is None else int(max_epochs)}",
                "seeds=[" + ",".join(str(int(s)) for s in seeds) + "]",
                *overrides,
                *((model_overrides or {}).get(model, ())),
            ]
            if data_dirs and data_dirs.get(dataset):
                base.append(f"dataset.data_dir={data_dirs[dataset]}")
            candidates = []
            for index, values in enumerate(settings):
                cfg = compose_config(base, dataset=dataset, model=model)
                for key, value in values.items():
                    OmegaConf.update(cfg, key, value, force_add=True)
                result = run_experiment(
                    cfg, output_dir=root / dataset / model / f"trial_{index}", verbose=verbose
                )
                vals = [s.val for s in result.seeds if math.isfinite(s.val)]
                mean_val = sum(vals) / len(vals) if vals else float("nan")
                candidates.append(BudgetTrial(model, index, dict(values), result, mean_val))
            finite = [c for c in candidates if math.isfinite(c.mean_val)]
            if finite:
                pick = max if candidates[0].result.metric in ("accuracy", "roc_auc") else min
                pick(finite, key=lambda c: c.mean_val).selected = True
            rows.extend(candidates)
        out[dataset] = rows
        write_budget_tables(root / dataset, rows, max_time, trials, list(seeds), verbose)
    return out


def write_budget_tables(
    folder: Path,
    rows: Sequence[BudgetTrial],
    max_time: float,
    trials: int,
    seeds: list[int],
    verbose: bool,
) -> None:
    """Write the equal-budget tables and plot of one data set (what :func:`run_equal_budget` writes).

    ``results.md`` (selected trials, then every trial), ``trials.csv`` and
    ``time_to_accuracy.png`` in ``folder``; e.g. to merge trials run in separate processes.

    Parameters
    ----------
    folder : path-like
        Output folder of the data set.
    rows : sequence of BudgetTrial
        Every trial of every model, ``selected`` set on one trial per model.
    max_time : float
        Budget per seed (seconds), for the header.
    trials : int
        Trials per model, for the header.
    seeds : list of int
        Seeds, for the header.
    verbose : bool
        Also print the table.
    """
    folder = make_dirs(folder)
    selected = [r for r in rows if r.selected]
    lines = [
        f"Equal budget: {max_time:g} s of wall time per seed, {trials} hyperparameter trials per "
        f"model (selected on the mean validation metric), seeds {seeds}.",
        "",
        comparison_table([summary_row(r.result) for r in selected]),
        "",
        "| model | trial | values | mean val | selected |",
        "|---|---:|---|---:|---|",
    ]
    for r in rows:
        values = ", ".join(f"{k}={v}" for k, v in r.values.items()) or "defaults"
        lines.append(
            f"| {r.model} | {r.trial} | {values} | {r.mean_val:.4f} | {'**yes**' if r.selected else ''} |"
        )
    text = "\n".join(lines)
    write_text(folder / "results.md", text + "\n", root=folder)
    header = ["model", "trial", "values", "mean_val", "selected", "run_dir"]
    write_csv(
        folder / "trials.csv",
        [header, *([r.model, r.trial, repr(r.values), f"{r.mean_val:.6f}", int(r.selected), r.result.output_dir] for r in rows)],
        root=folder,
    )
    if selected:
        plot_time_to_accuracy([r.result for r in selected], folder / "time_to_accuracy.png")
    if verbose:
        print(text, flush=True)
