"""Results of the harness: result records, tables (Markdown, CSV), curves and plots (PNG).

This module owns the result records (:class:`SeedResult`, :class:`ExperimentResult`) and
imports nothing else of the harness, so that :mod:`~.training` imports it and not the reverse.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from topomodelx_attention.files import atomic_output, make_dirs, write_csv, write_text

__all__ = [
    "ExperimentResult",
    "SeedResult",
    "comparison_table",
    "format_mean_std",
    "markdown_table",
    "plot_curves",
    "plot_time_to_accuracy",
    "read_summary",
    "seconds_per_epoch",
    "summary_row",
    "write_results",
]


@dataclass
class SeedResult:
    """Outcome of one seed.

    Attributes
    ----------
    seed : int
        The seed (data split seed for random splits, initialisation seed always).
    best_epoch : int
        Epoch of the best validation metric (0-based).
    epochs : int
        Epochs trained (reached within the budget).
    val : float
        Best validation metric.
    test : float
        Test metric of the best-validation checkpoint (NaN without testing).
    seconds : float
        Wall time of training and testing.
    history : list of dict
        Per-epoch metrics, with ``epoch_seconds`` (wall time of the epoch's training part) and
        ``wall_seconds`` (wall time since the start of training, validation included).
    stopped_by_time : bool, default=False
        Whether ``trainer.max_time`` ended the training.
    test_metrics : dict of str to float, default={}
        Test values of the data set's further metrics (``dataset.metrics``, e.g.
        ``mse_per_triangle``), at the best-validation checkpoint.
    failure : str or None, default=None
        Why the seed did not finish (e.g. its training loss diverged): its ``val`` and ``test``
        are NaN and no table reports a metric of it.
    """

    seed: int
    best_epoch: int
    epochs: int
    val: float
    test: float
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    stopped_by_time: bool = False
    test_metrics: dict[str, float] = field(default_factory=dict)
    failure: str | None = None


@dataclass
class ExperimentResult:
    """All seeds of one (data set, model) configuration.

    Attributes
    ----------
    dataset : str
        Data set name.
    model : str
        Model name.
    metric : str
        Metric name (``accuracy`` or ``mae``).
    seeds : list of SeedResult
        Per-seed results.
    num_parameters : int
        Trainable parameters of the model.
    output_dir : pathlib.Path
        Where results, curves and logs are.
    config : dict
        The resolved configuration.
    max_time : float or None, default=None
        Wall-time budget per seed in seconds (``trainer.max_time``), ``None`` without one.
    """

    dataset: str
    model: str
    metric: str
    seeds: list[SeedResult]
    num_parameters: int
    output_dir: Path
    config: dict[str, Any]
    max_time: float | None = None

    @property
    def finished(self) -> list[SeedResult]:
        """The seeds that trained to the end (every table's means are over these)."""
        return [s for s in self.seeds if s.failure is None]

    @property
    def failed(self) -> list[SeedResult]:
        """The seeds that did not finish (:attr:`SeedResult.failure`)."""
        return [s for s in self.seeds if s.failure is not None]


_SCALE = {"accuracy": 100.0, "roc_auc": 100.0, "mae": 1.0}
_UNIT = {"accuracy": " (%)", "roc_auc": " (x100)"}
"""Metrics shown scaled (accuracy in %, ROC-AUC times 100 as the heterophilous benchmark reports it)."""


def format_mean_std(values: Sequence[float], scale: float = 1.0, digits: int = 2) -> str:
    """``"mean ± std"`` (sample std, ``ddof=1``; just the value for one seed; NaNs ignored).

    Parameters
    ----------
    values : sequence of float
        Per-seed values.
    scale : float, default=1.0
        Multiplier (100 for accuracies in %).
    digits : int, default=2
        Decimals.

    Returns
    -------
    str
        The formatted cell (``"n/a"`` when there is no finite value).
    """
    array = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float) * scale
    if array.size == 0:
        return "n/a"
    if array.size == 1:
        return f"{array[0]:.{digits}f}"
    return f"{array.mean():.{digits}f} ± {array.std(ddof=1):.{digits}f}"


def seconds_per_epoch(seed: SeedResult) -> float:
    """Median wall time of the training part of an epoch (``epoch_seconds`` of the history).

    Parameters
    ----------
    seed : SeedResult
        One seed.

    Returns
    -------
    float
        Seconds per epoch (NaN without timed epochs).
    """
    values = [row["epoch_seconds"] for row in seed.history if "epoch_seconds" in row]
    return float(np.median(values)) if values else float("nan")


def summary_row(result: ExperimentResult) -> dict[str, Any]:
    """One summary line of an experiment (for comparison tables).

    Parameters
    ----------
    result : ExperimentResult
        The experiment.

    Returns
    -------
    dict
        ``dataset, model, metric, seeds, epochs, val, test, seconds, s_per_epoch, budget_s,
        parameters, failed`` over the finished seeds (``seeds``: their number; ``epochs``: mean
        epochs reached per seed; ``budget_s``: wall-time budget per seed, empty without one;
        ``failed``: the number of seeds that did not finish, whose metrics count nowhere).
    """
    scale = _SCALE.get(result.metric, 1.0)
    digits = 2 if result.metric in _UNIT else 3
    finished = result.finished
    epochs = [s.epochs for s in finished]
    per_epoch = [seconds_per_epoch(s) for s in finished]
    per_epoch = [v for v in per_epoch if math.isfinite(v)]
    return {
        "dataset": result.dataset,
        "model": result.model,
        "metric": result.metric + _UNIT.get(result.metric, ""),
        "seeds": len(finished),
        "epochs": f"{np.mean(epochs):.0f}" if epochs else "0",
        "val": format_mean_std([s.val for s in finished], scale, digits),
        "test": format_mean_std([s.test for s in finished], scale, digits),
        "seconds": f"{sum(s.seconds for s in result.seeds):.0f}",
        "s_per_epoch": f"{np.mean(per_epoch):.3f}" if per_epoch else "n/a",
        "budget_s": "" if result.max_time is None else f"{result.max_time:g}",
        "parameters": result.num_parameters,
        "failed": len(result.failed),
    }


def markdown_table(result: ExperimentResult) -> str:
    """Per-seed Markdown table with a final mean ± std row.

    Parameters
    ----------
    result : ExperimentResult
        The experiment.

    Returns
    -------
    str
        The table (with a title line).
    """
    scale = _SCALE.get(result.metric, 1.0)
    digits = 2 if result.metric in _UNIT else 3
    unit = _UNIT.get(result.metric, "")
    lines = [
        f"**{result.dataset} / {result.model}** — {result.num_parameters:,} parameters, "
        f"test {result.metric} at the best validation epoch",
        "",
        f"| seed | best epoch | epochs | val {result.metric}{unit} | test {result.metric}{unit} "
        "| time (s) | s/epoch | stopped by budget |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in result.seeds:
        if s.failure is not None:
            lines.append(f"| {s.seed} | — | {s.epochs} | failed | failed | {s.seconds:.1f} | | |")
            continue
        lines.append(
            f"| {s.seed} | {s.best_epoch} | {s.epochs} | {format_mean_std([s.val], scale, digits)} "
            f"| {format_mean_std([s.test], scale, digits)} | {s.seconds:.1f} "
            f"| {seconds_per_epoch(s):.3f} | {'yes' if s.stopped_by_time else 'no'} |"
        )
    summary = summary_row(result)
    over = f" ({summary['seeds']} finished)" if result.failed else ""
    lines.append(
        f"| **mean ± std**{over} | | | **{summary['val']}** | **{summary['test']}** "
        f"| {summary['seconds']} | {summary['s_per_epoch']} | |"
    )
    if result.failed:
        lines.append("")
    lines += [f"seed {s.seed} failed, no metric reported: {s.failure}" for s in result.failed]
    for name in _extra_metrics(result):
        values = [s.test_metrics.get(name, float("nan")) for s in result.finished]
        lines.append(f"\ntest {name}: {format_mean_std(values, 1.0, 4)} (per seed: "
                     + ", ".join(f"{v:.4f}" for v in values) + ")")
    if result.max_time is not None:
        lines.append(f"\nwall-time budget: {result.max_time:g} s per seed (`trainer.max_time`)")
    return "\n".join(lines)


def _extra_metrics(result: ExperimentResult) -> list[str]:
    """Names of the further test metrics of the seeds (:attr:`SeedResult.test_metrics`), sorted."""
    return sorted({name for s in result.seeds for name in s.test_metrics})


def comparison_table(rows: Iterable[dict[str, Any]]) -> str:
    """Markdown table of several :func:`summary_row` lines.

    Parameters
    ----------
    rows : iterable of dict
        Summary rows.

    Returns
    -------
    str
        The table.
    """
    header = (
        "| data set | model | metric | seeds | epochs | val | test | time (s) | s/epoch "
        "| budget (s) | parameters |"
    )
    lines = [header, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['metric']} | {r['seeds']} | {r['epochs']} "
            f"| {r['val']} | {r['test']} | {r['seconds']} | {r.get('s_per_epoch', 'n/a')} "
            f"| {r.get('budget_s') or '—'} | {int(r['parameters']):,} |"
        )
    return "\n".join(lines)


def plot_curves(result: ExperimentResult, path: str | os.PathLike) -> Path:
    """Learning curves (loss and metric, train and validation, one line per seed) as a PNG.

    Parameters
    ----------
    result : ExperimentResult
        The experiment.
    path : path-like
        Output file.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    import matplotlib
    from matplotlib.figure import Figure

    # a bare Figure renders with Agg and leaves pyplot's backend alone (notebooks keep theirs)
    fig = Figure(figsize=(10, 3.6))
    axes = fig.subplots(1, 2)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, seed in enumerate(result.seeds):
        color = colors[i % len(colors)]
        epochs = [row["epoch"] for row in seed.history]
        for ax, name in zip(axes, ("loss", result.metric)):
            for stage, style in (("train", "--"), ("val", "-")):
                key = f"{stage}/{name}"
                values = [row.get(key, float("nan")) for row in seed.history]
                ax.plot(epochs, values, style, color=color, alpha=0.8,
                        label=f"seed {seed.seed} {stage}" if name == "loss" else None)
    axes[0].set_title(f"{result.dataset} / {result.model}: loss")
    axes[1].set_title(f"{result.metric} (dashed: train, solid: validation)")
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = Path(path)
    with atomic_output(path) as handle:
        fig.savefig(handle, format="png", dpi=110)
    return path


def plot_time_to_accuracy(
    results: Sequence[ExperimentResult], path: str | os.PathLike, title: str | None = None
) -> Path:
    """Plot the validation metric against wall time for every model of one data set (one PNG).

    One colour per model, one line per seed (``wall_seconds`` of each epoch, validation
    included, against the epoch's validation metric).

    Parameters
    ----------
    results : sequence of ExperimentResult
        The experiments (same data set and metric).
    path : path-like
        Output file.
    title : str, optional
        Figure title (default: the data set and the metric).

    Returns
    -------
    pathlib.Path
        The written file.
    """
    import matplotlib
    from matplotlib.figure import Figure

    if not results:
        raise ValueError("plot_time_to_accuracy needs at least one experiment")
    metric = results[0].metric
    if any(r.metric != metric for r in results):
        raise ValueError(f"all experiments must share one metric, got {sorted({r.metric for r in results})}")
    scale = _SCALE.get(metric, 1.0)
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, result in enumerate(results):
        color = colors[i % len(colors)]
        for j, seed in enumerate(result.seeds):
            rows = [r for r in seed.history if "wall_seconds" in r and f"val/{metric}" in r]
            ax.plot([r["wall_seconds"] for r in rows], [scale * r[f"val/{metric}"] for r in rows],
                    "-o", markersize=2, color=color, alpha=0.75, label=result.model if j == 0 else None)
    budgets = {r.max_time for r in results if r.max_time is not None}
    for budget in budgets:
        ax.axvline(budget, color="grey", linestyle=":", linewidth=1)
    unit = _UNIT.get(metric, "")
    ax.set_xlabel("wall time (s, training + validation)")
    ax.set_ylabel(f"validation {metric}{unit}")
    ax.set_title(title or f"{results[0].dataset}: time to {metric}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    with atomic_output(path) as handle:
        fig.savefig(handle, format="png", dpi=110)
    return path


def write_results(result: ExperimentResult, plot: bool = True) -> dict[str, Path]:
    """Write ``results.md``, ``results.csv``, ``summary.csv``, ``curves.png`` and ``time_to_accuracy.png``.

    Parameters
    ----------
    result : ExperimentResult
        The experiment.
    plot : bool, default=True
        Also draw the learning curves.

    Returns
    -------
    dict of str to pathlib.Path
        The written files.
    """
    out = make_dirs(result.output_dir)
    files = {"markdown": out / "results.md", "csv": out / "results.csv", "summary": out / "summary.csv"}
    write_text(files["markdown"], markdown_table(result) + "\n", root=out)
    header = ["dataset", "model", "seed", "best_epoch", "epochs", f"val_{result.metric}",
              f"test_{result.metric}", "seconds", "s_per_epoch", "stopped_by_time",
              "budget_s", "parameters", *(f"test_{m}" for m in _extra_metrics(result)), "failure"]
    rows = [[result.dataset, result.model, s.seed, s.best_epoch, s.epochs,
             "" if s.failure else f"{s.val:.6f}", "" if s.failure else f"{s.test:.6f}", f"{s.seconds:.2f}",
             f"{seconds_per_epoch(s):.4f}", int(s.stopped_by_time),
             "" if result.max_time is None else f"{result.max_time:g}",
             result.num_parameters,
             *(f"{s.test_metrics.get(m, float('nan')):.6f}" for m in _extra_metrics(result)),
             s.failure or ""]
            for s in result.seeds]
    write_csv(files["csv"], [header, *rows], root=out)
    row = summary_row(result)
    write_csv(files["summary"], [list(row), list(row.values())], root=out)
    if plot and result.seeds:
        files["curves"] = plot_curves(result, out / "curves.png")
        files["time_to_accuracy"] = plot_time_to_accuracy([result], out / "time_to_accuracy.png")
    return files


def read_summary(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Read the ``summary.csv`` of a finished run (to assemble comparison tables).

    Parameters
    ----------
    run_dir : path-like
        Output folder of :func:`~.training.run_experiment`.

    Returns
    -------
    dict
        The summary row.
    """
    path = Path(run_dir) / "summary.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} the output folder of a finished run?")
    with open(path, newline="") as handle:
        return next(csv.DictReader(handle))
