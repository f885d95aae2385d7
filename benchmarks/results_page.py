"""Write the results page, ``docs/results.md``, from the committed result files of ``benchmarks/results/``.

Every number of the page is read or computed here from those files, so a table cannot drift from
its data (``tests/test_results_page.py`` regenerates the page and compares it byte for byte with
the committed one). Run it after adding or changing a result file, and commit both.

Sources, one section each:

* ``equal_budget/``: the equal-budget comparison (``harness_grid.py --equal-budget``): every data
  set's ``results.md`` (written by the harness), ``load.log`` and ``protocol.json`` (the run
  conditions that the harness does not record);
* ``design_space/`` and ``design_space_50ep/``: ``runs.jsonl`` of ``design_space.py``, rendered by
  that script's own table functions, and ``protocol.json``;
* ``learning_speed/``: ``runs.jsonl`` of ``learning_speed.py`` (diagnosis, candidates and the
  leave-one-data-set-out choice of the packaged CT, rendered by that script's table functions),
  its ``cost.md`` (interleaved seconds per epoch) and ``protocol.json``;
* ``graphuniverse/``: every model's ``results.json`` of ``graphuniverse_grid.py`` (the tuned study)
  and its other results files (selection runs), ``protocol.json``, ``two_cell_count.json`` of
  ``two_cell_count.py`` (the non-learned triangle count) and ``challenge_entry/`` of
  ``challenge_entry.py`` (the one-configuration entry scored by TopoBench's ``run_challenge_grid``);
* ``node_level/``: the results files of ``node_level.py`` (node classification on heterophilous
  graphs beside the published anchors), rendered by that script's table function;
* ``topobench/`` and ``speed/``: recorded outputs of ``topobench_check.py`` and of the speed and
  memory scripts, one JSON file per table, with the command, the baseline and the machine.

Usage::

    python benchmarks/results_page.py                # writes docs/results.md
    python benchmarks/results_page.py --out PATH     # writes PATH instead
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from design_space import DATASETS, load_rows, longer_training_table, tables  # noqa: E402

from topomodelx_attention.files import write_text  # noqa: E402

RESULTS = HERE / "results"
PAGE = ROOT / "docs" / "results.md"


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _bullets(lines: Sequence[str]) -> list[str]:
    return [f"- {line}" for line in lines]


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> list[str]:
    right = right or [False] * len(columns)
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    out += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return out


_ROOTS = {"results": RESULTS}


def _name(path: Path) -> str:
    """A result file as the page names it: ``benchmarks/results/...``, wherever ``--results`` points."""
    return (Path("benchmarks") / "results" / path.relative_to(_ROOTS["results"])).as_posix()


def _source(*paths: Path) -> str:
    names = ", ".join(f"`{_name(path)}`" for path in paths)
    return f"Source: {names}."


# ------------------------------------------------------------------------------------ equal budget
BUDGET_HEADER = re.compile(
    r"Equal budget: (?P<budget>\d+) s of wall time per seed, (?P<trials>\d+) hyperparameter trials per model"
    r".*seeds \[(?P<seeds>[\d, ]+)\]"
)


def read_budget_table(path: Path) -> dict[str, Any]:
    """The header and the main table of a ``results.md`` that ``harness.budget`` writes.

    Returns ``{"budget", "trials", "seeds", "rows"}``; every row a dict by column name.
    """
    lines = path.read_text().splitlines()
    header = BUDGET_HEADER.match(lines[0])
    if header is None:
        raise SystemExit(f"{path}: not an equal-budget results file (first line: {lines[0]!r})")
    start = next(i for i, line in enumerate(lines) if line.startswith("| data set | model |"))
    columns = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        rows.append(dict(zip(columns, (c.strip() for c in line.strip("|").split("|")))))
    seeds = [int(s) for s in header["seeds"].split(",")]
    return {"budget": int(header["budget"]), "trials": int(header["trials"]), "seeds": seeds, "rows": rows}


def _stat(text: str) -> tuple[float, float, int]:
    """``"0.121 ± 0.002"`` -> ``(0.121, 0.002, 3)`` (mean, sample std, decimals); one seed: std 0."""
    mean, _, std = text.partition("±")
    decimals = len(mean.strip().split(".")[1]) if "." in mean else 0
    return float(mean), float(std) if std else 0.0, decimals


def pooled(groups: Sequence[tuple[int, float, float]]) -> tuple[int, float, float]:
    """Mean and sample standard deviation of the union of groups given as ``(n, mean, std)``."""
    n = sum(g[0] for g in groups)
    mean = sum(g[0] * g[1] for g in groups) / n
    squares = sum((g[0] - 1) * g[2] ** 2 + g[0] * (g[1] - mean) ** 2 for g in groups)
    return n, mean, math.sqrt(squares / (n - 1)) if n > 1 else 0.0


def _check_per_seed(values, group, parts, stats, decimals, what) -> None:
    """Refuse per-seed values whose means per folder differ from the folders' rounded means."""
    seeds = [s for p in parts for s in p["seeds"]]
    if sorted(group["seeds"]) != sorted(seeds) or len(values) != len(seeds):
        raise SystemExit(f"per_seed of {group['data']} ({what}) must give one value per seed {sorted(seeds)}")
    by_seed = dict(zip(group["seeds"], values))
    for part, (_, mean, _) in zip(parts, stats):
        recorded = sum(by_seed[s] for s in part["seeds"]) / len(part["seeds"])
        if abs(recorded - mean) > 0.51 * 10**-decimals + 1e-12:
            raise SystemExit(f"per_seed of {group['data']} ({what}): seeds {part['seeds']} average {recorded}, the file {mean}")


def _seed_list(seeds: Sequence[int]) -> str:
    return ", ".join(str(s) for s in seeds)


def _load_range(path: Path) -> str:
    """``"1.9-2.3 over 65 samples"``: the 1-minute load averages of a ``load.log``."""
    values = [float(line.split()[-3]) for line in path.read_text().splitlines() if line.strip()]
    return f"{min(values):.1f}-{max(values):.1f} over {len(values)} samples"


def equal_budget_section(folder: Path) -> list[str]:
    """The equal-budget comparison: one table per data set and the CT / GPS table over more seeds."""
    protocol = _json(folder / "protocol.json")
    out = [f"## {protocol['title']}", "", f"*{protocol['question']}*", ""]
    out += _bullets([
        f"Script: `{protocol['script']}`.",
        f"Machine: {protocol['machine']}; 1-minute load {_load_range(folder / 'load.log')}.",
        *protocol["protocol"],
    ])
    out += [""]
    columns = ["model", "seeds", "epochs", "val", "test", "time (s)", "s/epoch", "budget (s)", "parameters"]
    right = [False, False, True, True, True, True, True, True, True]
    for section in protocol["sections"]:
        sources = [folder / name / "results.md" for name in section["folders"]]
        parts = [read_budget_table(path) for path in sources]
        out += [f"### {section['title']}", ""]
        budgets = sorted({p["budget"] for p in parts})
        trials = sorted({p["trials"] for p in parts})
        out += _bullets([
            f"Data: {section['data']}.",
            f"Metric: {section['metric']}; budget {', '.join(map(str, budgets))} s of wall time per seed; "
            f"{', '.join(map(str, trials))} hyperparameter trial(s) per model.",
        ])
        out += [""]
        rows = []
        for part in parts:
            for row in part["rows"]:
                rows.append([row["model"], _seed_list(part["seeds"]), row["epochs"], row["val"], row["test"],
                             row["time (s)"], row["s/epoch"], row["budget (s)"], row["parameters"]])
        out += _table(columns, rows, right)
        out += [""]
        if section.get("note"):
            out += [section["note"], ""]
        out += [_source(*sources), ""]
    more = protocol["more_seeds"]
    models = more["models"]
    out += [f"### {more['title']}", ""]
    out += [
        "The same settings, more seeds, the two models side by side: mean ± sample std over all seeds. "
        + more["note"],
        "",
    ]
    columns = ["data", "seeds"] + [f"{m} {split}" for m in models for split in ("val", "test")]
    rows, sources = [], []
    for group in more["groups"]:
        parts = [read_budget_table(folder / name / "results.md") for name in group["folders"]]
        sources += [folder / name / "results.md" for name in group["folders"]]
        seeds = sorted(s for p in parts for s in p["seeds"])
        per_seed = group.get("per_seed", {})
        cells = []
        for model in models:
            for split in ("val", "test"):
                stats = []
                for part in parts:
                    row = next(r for r in part["rows"] if r["model"] == model)
                    mean, std, decimals = _stat(row[split])
                    stats.append((len(part["seeds"]), mean, std))
                values = per_seed.get(model, {}).get(split)
                if values is not None:  # the recorded values of every seed, checked against the files' means
                    _check_per_seed(values, group, parts, stats, decimals, f"{model} {split}")
                    stats = [(1, v, 0.0) for v in values]
                _, mean, std = pooled(stats)
                cells.append(f"{mean:.{decimals}f} ± {std:.{decimals}f}")
        rows.append([group["data"], f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0]), *cells])
    out += _table(columns, rows, [False, False] + [True] * (len(columns) - 2))
    out += ["", _source(*sources, folder / "protocol.json"), ""]
    return out


# ------------------------------------------------------------------------------------ design space
def _sections(markdown: str) -> list[tuple[str, str]]:
    """``(title, body)`` of every ``### `` section of a Markdown text."""
    parts = re.split(r"^### ", markdown.strip(), flags=re.M)
    out = []
    for part in parts:
        if not part.strip():
            continue
        title, _, body = part.partition("\n")
        out.append((title.strip(), body.strip()))
    return out


def learning_speed_section(folder: Path) -> list[str]:
    """How fast the packaged CT learns against GPS: diagnosis, candidates, selection and cost."""
    from learning_speed import render

    protocol = _json(folder / "protocol.json")
    rows = load_rows(folder / "runs.jsonl")
    out = [f"## {protocol['title']}", ""]
    out += _bullets([f"Script: `{protocol['script']}`; `{protocol['command']}`.", f"Machine: {protocol['machine']}.",
                     *protocol["protocol"], f"Runs: {len(rows)} (data set, model, configuration, seed)."])
    out += [""]
    for title, body in _sections(re.sub(r"^## ", "### ", render(rows), flags=re.M)):
        out += [f"### {title}", "", body, ""]
    sources = [folder / "runs.jsonl", folder / "protocol.json"]
    cost = folder / "cost.md"
    if cost.is_file():
        out += ["### Seconds per training epoch, CT against GPS (one process, interleaved)", "",
                cost.read_text().strip(), ""]
        sources.append(cost)
    out += [_source(*sources), ""]
    return out


def design_space_section(folder: Path, longer: Path) -> list[str]:
    """The leave-one-data-set-out selection (all sections but the long per-configuration table) and the 50-epoch runs."""
    protocol = _json(folder / "protocol.json")
    datasets = list(DATASETS)
    rows = load_rows(folder / "runs.jsonl")
    out = [f"## {protocol['title']}", ""]
    out += _bullets([f"Script: `{protocol['script']}`; `{protocol['command']}`.", f"Machine: {protocol['machine']}.",
                     *protocol["protocol"], f"Runs: {len(rows)} (data set, model, configuration, seed)."])
    out += [""]
    sections = _sections(tables(rows, datasets))
    every, rest = sections[0], sections[1:]
    out += [
        f"The table *{every[0]}* (every configuration on every data set) is "
        f"`{_name(folder / 'tables.md')}`, which `design_space.py --table` writes from the "
        "same runs.",
        "",
    ]
    for title, body in rest:
        out += [f"### {title}", "", body, ""]
    out += [_source(folder / "runs.jsonl", folder / "protocol.json"), ""]
    extra = _json(longer / "protocol.json")
    long_rows = load_rows(longer / "runs.jsonl")
    (title, body), = _sections(longer_training_table(long_rows, rows, datasets))
    out += [f"### {title}", ""]
    out += _bullets([f"`{extra['command']}`.", f"Machine: {extra['machine']}.", *extra["protocol"],
                     f"Runs: {len(long_rows)}."])
    out += ["", body, "", _source(longer / "runs.jsonl", folder / "runs.jsonl", longer / "protocol.json"), ""]
    return out


# ------------------------------------------------------------------------------------ GraphUniverse
TASKS = {
    "community_detection": ("test_best_rerun_accuracy", "accuracy", "test accuracy of the nodes, higher is better"),
    "triangle_counting": ("test_mse_by_total_triangles", "mse", "test MSE / total test triangles, lower is better"),
}


def _mean(values: Sequence[float]) -> float:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(values) / len(values) if values else float("nan")


def _f(value: float, digits: int = 4) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.{digits}f}" if value == 0 or abs(value) >= 10 ** -digits else f"{value:.2e}"


def _overrides(metadata: dict[str, Any], task: str) -> str:
    changes = [*metadata.get("overrides", []), *(metadata.get("task_overrides") or {}).get(task, [])]
    return "<br>".join(f"`{c}`" for c in changes) if changes else "packaged"


ENTRY = "challenge_entry"
"""Folder of the one-configuration entry (``challenge_entry.py``), not a model of the tuned study."""


def _study_rows(runs: Sequence[dict[str, Any]], key: str) -> list[str]:
    """Mean, per-homophily means and OOD mean of rows (the tables' shared columns)."""
    per_level = [_mean([r.get(key) for r in runs if r["homophily"] == f"h_{h}"]) for h in ("lo", "mid", "hi")]
    ood = _mean([_mean([v.get(key) for v in (r.get("ood_test") or {}).values()]) for r in runs])
    return [_f(_mean([r.get(key) for r in runs])), *(_f(v) for v in per_level), _f(ood)]


def entry_section(folder: Path) -> list[str]:
    """The one-configuration entry: ``challenge_entry/results.json`` and its ``conditions.json``, if scored."""
    out = ["### The one-configuration entry (TopoBench's run_challenge_grid)", ""]
    path = folder / ENTRY / "results.json"
    if not path.is_file():
        return [
            *out,
            "Not scored yet. `benchmarks/challenge_entry.py` scores the configuration the TopoBench pull request "
            "contains (`cell/cellular_transformer_rrwp`), the same for both tasks, with TopoBench's optimiser, schedule "
            "and default cell lifting, through TopoBench's own `run_challenge_grid` (command in `benchmarks/README.md`).",
            "",
        ]
    data, conditions = _json(path), _json(path.with_name("conditions.json"))
    out += _bullets([
        f"Configuration: `{data['metadata']['model_config']}`, one for both tasks; TopoBench "
        f"{conditions['run']['topobench']}.",
        *(f"Differs from the notebook: {line}." for line in conditions["differences_from_the_notebook"]),
    ])
    rows = []
    for task, (key, _, meaning) in TASKS.items():
        runs = [r for r in data["results"] if r["experiment"] == task]
        if runs:
            rows.append([task.replace("_", " "), meaning, str(len(runs)),
                         _seed_list(sorted({int(r["train_seed"]) for r in runs})), *_study_rows(runs, key)])
    out += ["", *_table(["task", "metric", "runs", "seeds", "mean", "h_lo", "h_mid", "h_hi", "OOD"], rows,
                        [False, False, True, False, True, True, True, True, True])]
    return [*out, "", _source(path, path.with_name("conditions.json")), ""]


def baselines_section(folder: Path, entries: Sequence[Path]) -> list[str]:
    """What the tuned study's numbers show: the non-learned triangle count and our GPS on the CT's matched rows."""
    out = ["### What the tuned study's numbers show", ""]
    counts = folder / "two_cell_count.json"
    if counts.is_file():
        data = _json(counts)
        names = list(data["liftings"])
        out += [
            "Triangle counting without learning: predict the number of 2-cells of a lifting (`two_cell_count.py`), "
            "scored like the grid (test MSE / total test triangles, the protocol's test split). `chordless3` (chordless "
            "cycles of at most 3 vertices) is the lifting of the CT's and TokenGT's triangle rows above: every 2-cell is "
            "a triangle and every triangle a 2-cell, so counting 2-cells is exact; the CT's score on those rows "
            "measures how closely it reproduces a count its input lists. `basis10` (networkx's cycle basis, cycles of "
            "at most 10 vertices: the options of TopoBench's default cell lifting, which the one-configuration entry "
            f"uses) does not make the triangles its 2-cells. Families of {data['n_graphs']:,} graphs:",
            "",
        ]
        rows = [[slug, str(v["graphs"]), str(v["triangles"]),
                 *(f"{_f(v[n]['mse_by_total_triangles'])} ({v[n]['exact']}/{v['graphs']})" for n in names)]
                for slug, v in data["settings"].items()]
        out += _table(["setting", "test graphs", "test triangles",
                       *(f"{n}: MSE / triangles (graphs exact)" for n in names)], rows,
                      [False, True, True, *([True] * len(names))])
        out += ["", _source(counts), ""]
    key = TASKS["community_detection"][0]
    rows = []
    for path in entries:
        data = _json(path)
        runs = [r for r in data["results"] if r["experiment"] == "community_detection" and int(r["train_seed"]) == 42]
        if runs:
            rows.append([path.parent.name, str(len(runs)), _f(_mean([r.get(key) for r in runs])),
                         _overrides(data.get("metadata") or {}, "community_detection")])
    out += ["Community detection on the rows every model has (the 12 settings at training seed 42). Last column: "
            "what each model changes from its packaged config (`packaged`: untuned).", ""]
    out += _table(["model", "rows", "accuracy (seed 42)", "changes to the packaged config"], rows,
                  [False, True, True, False])
    return [*out, "", "Ranks against the challenge's leaderboard hold only under the conditions listed above.", ""]


def graphuniverse_section(folder: Path) -> list[str]:
    """The tuned study (every model's ``results.json``) per task, what it shows, the one-configuration entry, selection files."""
    protocol = _json(folder / "protocol.json")
    out = [f"## {protocol['title']}", ""]
    out += _bullets([f"Scripts: {protocol['script']}.", f"Machine: {protocol['machine']}.", *protocol["protocol"]])
    out += [
        "",
        "The ranking against the challenge's leaderboard needs the leaderboard file, which is not part of the "
        "repository: `python benchmarks/graphuniverse_leaderboard.py --leaderboard PATH`.",
        "",
    ]
    entries = sorted(p for p in folder.glob("*/results.json") if p.parent.name != ENTRY)
    for task, (key, _, meaning) in TASKS.items():
        out += [f"### Tuned study: {task.replace('_', ' ')}", ""]
        out += [f"Metric: {meaning}; mean over the runs (12 settings × the seeds run); per homophily level; OOD: the mean "
                "over the runs of the mean over the 11 other settings. s/epoch: wall seconds of a training epoch; "
                "CPU s/epoch: training, validation and test of the run per epoch.", ""]
        rows = []
        for path in entries:
            data = _json(path)
            runs = [r for r in data["results"] if r["experiment"] == task]
            if not runs:
                continue
            seconds = _mean([(r.get("wandb_config") or {}).get("AvgTime/train_epoch_mean") for r in runs])
            cpu = _mean([(r.get("harness") or {}).get("cpu_seconds_per_epoch") for r in runs])
            params = sorted({(r.get("wandb_config") or {}).get("model/params/total") for r in runs} - {None})
            seeds = sorted({int(r["train_seed"]) for r in runs})
            rows.append([
                path.parent.name, str(len(runs)), _seed_list(seeds), *_study_rows(runs, key), _f(seconds, 1), _f(cpu, 1),
                ", ".join(f"{p:,}" for p in params), _overrides(data.get("metadata") or {}, task),
            ])
        out += _table(
            ["model", "runs", "seeds", "mean", "h_lo", "h_mid", "h_hi", "OOD", "s/epoch", "CPU s/epoch",
             "parameters", "changes to the packaged config"],
            rows, [False, True, False, True, True, True, True, True, True, True, True, False],
        )
        out += ["", _source(*entries), ""]
    out += baselines_section(folder, entries)
    out += entry_section(folder)
    out += ["### Selection runs", ""]
    out += [
        "Every other results file: configurations tried before a grid (fewer graphs or epochs, one or two settings, "
        "validation only) and the rows of an entry that a complete variant grid replaced "
        "(`results_replaced_by_<variant>.json`). Mean over the file's runs of the best validation metric "
        "(accuracy; MSE for triangle counting) and of the test metric. Family seed: the generation seed of the "
        "families; 42 with fewer than 1,000 graphs means the first graphs of the protocol's families, so the "
        "validation graphs include protocol test graphs.",
        "",
    ]
    rows = []
    others = sorted(p for p in folder.glob("*/*.json") if p.name != "results.json" and p.parent.name != ENTRY)
    for path in others:
        data = _json(path)
        metadata = data.get("metadata") or {}
        run_protocol = metadata.get("protocol") or {}
        for task, (key, metric, _) in TASKS.items():
            runs = [r for r in data["results"] if r["experiment"] == task]
            if not runs:
                continue
            val = _mean([(r.get("harness") or {}).get(f"val_best_{metric}") for r in runs])
            rows.append([
                path.parent.name, f"`{path.name}`", task.replace("_", " "), str(run_protocol.get("n_graphs", "–")),
                str(run_protocol.get("family_seed", 42)), str(run_protocol.get("max_epochs", "–")), str(len(runs)),
                _seed_list(sorted({int(r["train_seed"]) for r in runs})),
                _f(val), _f(_mean([r.get(key) for r in runs])), _overrides(metadata, task),
            ])
    out += _table(
        ["model", "file", "task", "graphs", "family seed", "max epochs", "runs", "seeds", "best val", "test",
         "changes to the packaged config"],
        rows, [False, False, False, True, True, True, True, False, True, True, False],
    )
    out += ["", _source(folder / "<model>" / "results_*.json"), ""]
    return out


# ------------------------------------------------------------------------------------ speed
#: Titles of the node-level results files (``node_level.py --name``); another file is titled by its name.
NODE_LEVEL_TITLES = {
    "cost": "Cost: 5 full-batch epochs of split 0 per data set",
    "sanity": "First learning runs: split 0, validation only for choices",
    "selection": "Selection: learning rate, and width on minesweeper, on the first splits (validation decides)",
    "grid": "The grid: 10 splits",
}


def node_level_section(folder: Path) -> list[str]:
    """The node-level runs of ``node_level.py`` beside the published anchors, one subsection per results file."""
    from node_level import read_results, table

    paths = sorted(folder.glob("*.json"))
    if not paths:
        return []
    out = [
        "## Node classification on heterophilous graphs", "",
        "`benchmarks/node_level.py`: transductive node classification on the heterophilous benchmark's graphs "
        "(Platonov et al., ICLR 2023; the files' 10 fixed splits), the CT's node-level configurations and the "
        "harness's graph baselines, beside the published GAT-sep, GT-sep (Platonov et al.) and Polynormer (Deng et "
        "al., ICLR 2024) means. Each file's protocol is in its first paragraph; `benchmarks/README.md` has the "
        "configurations.", "",
    ]
    for path in paths:
        data = read_results(path)
        commands = data["metadata"].get("commands", [])
        out += [f"### {NODE_LEVEL_TITLES.get(path.stem, path.stem)}", ""]
        out += ["Commands:", "", *_bullets([f"`{c}`" for c in commands]), ""] if commands else []
        out += [table(data), "", _source(path), ""]
    return out


def recorded_section(folder: Path, title: str, intro: str) -> list[str]:
    """Recorded outputs of scripts, one subsection per JSON file of ``folder`` (its own table, command and machine)."""
    out = [f"## {title}", "", intro, ""]
    for path in sorted(folder.glob("*.json")):
        record = _json(path)
        out += [f"### {record['title']}", ""]
        out += _bullets([
            f"Script: `{record['script']}`; command: `{record['command']}`.",
            f"Baseline: {record['baseline']}.",
            f"Data: {record['data']}.",
            f"Machine: {record['machine']}.",
        ])
        out += [""]
        right = [False] + [True] * (len(record["columns"]) - 1)
        out += _table(record["columns"], record["rows"], right)
        out += [""]
        out += [*record.get("notes", []), ""] if record.get("notes") else []
        out += [_source(path), ""]
    return out


# ------------------------------------------------------------------------------------ page
def page(results: Path = RESULTS) -> str:
    """The whole results page (Markdown, MyST)."""
    _ROOTS["results"] = results
    out = [
        "# Results",
        "",
        "The current results of the project, generated by `python benchmarks/results_page.py` from the result files "
        "committed under `benchmarks/results/` (do not edit this page by hand: change the files, rerun the script). "
        "Every table names its source files and its protocol: data, seeds, epochs or budget, metric, machine. "
        "All of it ran on CPU, with short budgets: these numbers compare models under the stated conditions; they "
        "are not converged benchmark results. The scripts and their commands are listed in `benchmarks/README.md`.",
        "",
    ]
    out += equal_budget_section(results / "equal_budget")
    out += learning_speed_section(results / "learning_speed")
    out += design_space_section(results / "design_space", results / "design_space_50ep")
    out += graphuniverse_section(results / "graphuniverse")
    out += node_level_section(results / "node_level")
    out += recorded_section(
        results / "topobench", "Inside TopoBench",
        "Recorded outputs of `benchmarks/topobench_check.py`: the contribution that `topomodelx-attention topobench "
        "contribute` writes, checked inside a TopoBench checkout.",
    )
    out += recorded_section(
        results / "speed", "Speed and memory",
        "Recorded outputs of the speed and memory scripts, each with its command, its named baseline and the "
        "machine it ran on. On a shared 2-core machine absolute times are indicative; the ratios within one run "
        "are the comparable figure. Rerun a script on your machine for your numbers.",
    )
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PAGE, help="the page to write (default: docs/results.md)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the result files (default: benchmarks/results)")
    args = parser.parse_args(argv)
    text = page(args.results.resolve())
    write_text(args.out, text)
    print(f"wrote {args.out} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
