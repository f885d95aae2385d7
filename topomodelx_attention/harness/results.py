"""Results of the harness: per-seed tables (Markdown, CSV), summaries and learning curves (PNG)."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from topomodelx_attention.harness.training import ExperimentResult

__all__ = [
    "comparison_table",
    "format_mean_std",
    "markdown_table",
    "plot_curves",
    "read_summary",
    "summary_row",
    "write_results",
]

_SCALE = {"accuracy": 100.0, "mae": 1.0}


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


def summary_row(result: ExperimentResult) -> dict[str, Any]:
    """One summary line of an experiment (for comparison tables).

    Parameters
    ----------
    result : ExperimentResult
        The experiment.

    Returns
    -------
    dict
        ``dataset, model, metric, seeds, epochs, val, test, seconds, parameters``.
    """
    scale = _SCALE.get(result.metric, 1.0)
    digits = 2 if result.metric == "accuracy" else 3
    return {
        "dataset": result.dataset,
        "model": result.model,
        "metric": result.metric + (" (%)" if result.metric == "accuracy" else ""),
        "seeds": len(result.seeds),
        "epochs": format_mean_std([s.epochs for s in result.seeds], digits=0).split(" ")[0],
        "val": format_mean_std([s.val for s in result.seeds], scale, digits),
        "test": format_mean_std([s.test for s in result.seeds], scale, digits),
        "seconds": f"{sum(s.seconds for s in result.seeds):.0f}",
        "parameters": result.num_parameters,
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
    digits = 2 if result.metric == "accuracy" else 3
    unit = " (%)" if result.metric == "accuracy" else ""
    lines = [
        f"**{result.dataset} / {result.model}** — {result.num_parameters:,} parameters, "
        f"test {result.metric} at the best validation epoch",
        "",
        f"| seed | best epoch | epochs | val {result.metric}{unit} | test {result.metric}{unit} | time (s) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for s in result.seeds:
        lines.append(
            f"| {s.seed} | {s.best_epoch} | {s.epochs} | {format_mean_std([s.val], scale, digits)} "
            f"| {format_mean_std([s.test], scale, digits)} | {s.seconds:.1f} |"
        )
    summary = summary_row(result)
    lines.append(
        f"| **mean ± std** | | | **{summary['val']}** | **{summary['test']}** "
        f"| {summary['seconds']} |"
    )
    return "\n".join(lines)


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
    header = "| data set | model | metric | seeds | epochs | val | test | time (s) | parameters |"
    lines = [header, "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['metric']} | {r['seeds']} | {r['epochs']} "
            f"| {r['val']} | {r['test']} | {r['seconds']} | {int(r['parameters']):,} |"
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
    fig.savefig(path, dpi=110)
    return path


def write_results(result: ExperimentResult, plot: bool = True) -> dict[str, Path]:
    """Write ``results.md``, ``results.csv``, ``summary.csv`` and ``curves.png``.

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
    out = result.output_dir
    out.mkdir(parents=True, exist_ok=True)
    files = {"markdown": out / "results.md", "csv": out / "results.csv", "summary": out / "summary.csv"}
    files["markdown"].write_text(markdown_table(result) + "\n")
    with open(files["csv"], "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["dataset", "model", "seed", "best_epoch", "epochs", f"val_{result.metric}",
                         f"test_{result.metric}", "seconds"])
        for s in result.seeds:
            writer.writerow([result.dataset, result.model, s.seed, s.best_epoch, s.epochs,
                             f"{s.val:.6f}", f"{s.test:.6f}", f"{s.seconds:.2f}"])
    row = summary_row(result)
    with open(files["summary"], "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    if plot and result.seeds:
        files["curves"] = plot_curves(result, out / "curves.png")
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
