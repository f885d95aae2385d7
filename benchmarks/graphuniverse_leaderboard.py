"""Rank our GraphUniverse grid results against TopoBench's TDL Challenge 2026 leaderboard (Markdown).

Reads ``benchmarks/results/graphuniverse/<model>/results.json`` (written by
``benchmarks/graphuniverse_grid.py``) and the leaderboard copy
``../shared/data/graphuniverse/leaderboard_2026-07-25.json`` (38 submissions, in-distribution
scores: accuracy for community detection, higher is better; test MSE / total test triangles for
triangle counting, lower is better), and prints per task:

* our entries inserted into the ranking (overall and in their track: the TNN track for the
  topological models, the GNN track for GPS / GIN), with the per-homophily means, the number
  of rows they cover, the epoch time and parameter counts, and the OOD average (mean over the
  runs of the mean over the 11 other settings);
* beside them the peer Cellular Transformer (#371), GRIT (#370) and the track leaders;
* while our grid is incomplete, a *matched* mean: every leaderboard entry averaged over exactly
  the (setting, seed) rows we have, and our rank on those rows (the leaderboard's own mean is
  over all 36 rows of a task).

``--curves MODEL`` prints instead the community-detection learning curves of one of our models
per homophily level, read from the ``val_curve`` every grid row stores: the best validation
accuracy reached by epochs 1, 5, 10 and 20 (a run stopped earlier keeps its final best), the
best epoch and the epochs run, the test accuracy, and the same rows of a leaderboard entry
(``--against``, default GRIT #370) with the gap: how fast each homophily level reaches its
plateau, and where that plateau sits against the entry's test accuracy.

Usage::

    python benchmarks/graphuniverse_leaderboard.py [--results benchmarks/results/graphuniverse]
        [--leaderboard PATH] [--file results.json]
    python benchmarks/graphuniverse_leaderboard.py --curves cellular_transformer [--against 370]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The project's shared reference data next to the checkout (``../shared``).
DEFAULT_LEADERBOARD = REPO.parent / "shared" / "data" / "graphuniverse" / "leaderboard_2026-07-25.json"
TASKS = {
    "community_detection": ("test_best_rerun_accuracy", "max"),
    "triangle_counting": ("test_mse_by_total_triangles", "min"),
}
TRACK = {  # our harness models: topological (TNN) or graph (GNN) track
    "cellular_transformer": "track-2-tnn",
    "tokengt_cell": "track-2-tnn",
    "n_simplicial": "track-2-tnn",
    "cwn": "track-2-tnn",
    "sccnn": "track-2-tnn",
    "challenge_entry": "track-2-tnn",  # benchmarks/challenge_entry.py: the pull request's CT config
}
#: What each kind of our entries is; a rank holds only under these conditions.
CONDITIONS = {
    "challenge_entry": "one configuration for both tasks, TopoBench's run_challenge_grid, optimiser and default cell "
    "lifting; CPU (its conditions.json lists every difference)",
    "tuned study": "this package's harness, configurations tuned per task, the package's optimiser (AdamW, cosine, "
    "clipping 5), its own liftings and encoders, CPU (docs/results.md lists every difference)",
}
PEERS = (371, 370)


def _find_leaderboard(path: str | None) -> Path:
    if path:
        return Path(path)
    if DEFAULT_LEADERBOARD.is_file():
        return DEFAULT_LEADERBOARD
    raise ValueError(f"leaderboard file not found at {DEFAULT_LEADERBOARD}: pass --leaderboard PATH")


def load_leaderboard(path: Path) -> list[dict[str, Any]]:
    """Submissions as ``{name, pr, track, rows: {(task, slug, seed): score}}``."""
    data = json.loads(path.read_text())
    out = []
    for sub in data["submissions"]:
        title = sub.get("pr_title", "")
        name = title.split("Model:")[-1].strip() if "Model:" in title else sub.get("model_config", "?")
        rows = {
            (r["task"], f"{r['homophily']}_{r['avg_degree']}_{r['power_law']}", int(r["train_seed"])): float(r["score"])
            for r in sub["rows"]
            if r.get("score") is not None
        }
        out.append({
            "name": f"{name} ({sub.get('model_config', '')})", "pr": sub.get("pr_number"), "track": sub.get("track"),
            "state": sub.get("pr_state"), "rows": rows,
        })
    return out


def load_ours(root: Path, file: str) -> list[dict[str, Any]]:
    """Our results files as entries like the leaderboard's, plus epoch time, parameters and OOD."""
    out = []
    for path in sorted(root.glob(f"*/{file}")):
        model = path.parent.name
        data = json.loads(path.read_text())
        rows, ood, epoch, params = {}, {}, {}, {}
        for r in data.get("results", []):
            task = r["experiment"]
            key_name, _ = TASKS[task]
            value = r.get(key_name)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            key = (task, r["run_slug"].replace("__", "_"), int(r["train_seed"]))  # the notebook's slugs: h_lo__d_lo__pl_lo
            rows[key] = float(value)
            others = [v.get(key_name) for v in (r.get("ood_test") or {}).values() if v.get(key_name) is not None]
            if others:
                ood[key] = sum(others) / len(others)
            cfg = r.get("wandb_config") or {}
            if cfg.get("AvgTime/train_epoch_mean") is not None:
                epoch.setdefault(task, []).append(float(cfg["AvgTime/train_epoch_mean"]))
            if cfg.get("model/params/total") is not None:
                params[task] = int(cfg["model/params/total"])
        out.append({
            "name": f"ours: {model}", "pr": None, "track": TRACK.get(model, "track-1-gnn"), "state": "ours",
            "rows": rows, "ood": ood, "epoch": epoch, "params": params, "file": path,
            "protocol": (data.get("metadata") or {}).get("protocol") or {},
            "conditions": CONDITIONS.get(model, CONDITIONS["tuned study"]),
        })
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def summary(entry: Mapping[str, Any], task: str, keys: set | None = None) -> dict[str, Any]:
    """Mean over the task's rows (or over ``keys`` only) and the per-homophily means."""
    rows = {k: v for k, v in entry["rows"].items() if k[0] == task and (keys is None or k in keys)}
    out = {"n": len(rows), "mean": _mean(list(rows.values()))}
    for h in ("lo", "mid", "hi"):
        out[f"h_{h}"] = _mean([v for k, v in rows.items() if k[1].startswith(f"h_{h}_")])
    return out


def ranks(entries: Sequence[Mapping[str, Any]], task: str, keys: set | None = None) -> dict[int, tuple[int, int]]:
    """``id(entry) -> (overall rank, rank in its track)`` by the mean (NaN last)."""
    _, direction = TASKS[task]
    scored = [(summary(e, task, keys)["mean"], e) for e in entries]
    scored = [(m, e) for m, e in scored if not math.isnan(m)]
    scored.sort(key=lambda item: item[0] if direction == "min" else -item[0])
    out, per_track = {}, {}
    for position, (_, e) in enumerate(scored, 1):
        per_track[e["track"]] = per_track.get(e["track"], 0) + 1
        out[id(e)] = (position, per_track[e["track"]])
    return out


def _f(value: float, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    # a score below the last fixed digit (triangle counting near exact) keeps its significant digits
    return f"{value:.{digits}f}" if value == 0 or abs(value) >= 10 ** -digits else f"{value:.2e}"


def table(leaderboard: list[dict[str, Any]], ours: list[dict[str, Any]], task: str) -> str:
    """Markdown table of one task."""
    everyone = leaderboard + ours
    full = ranks(everyone, task)
    lines = [f"### {task} ({'accuracy, higher' if task == 'community_detection' else 'mse_per_triangle, lower'} is better)", ""]
    lines.append(
        "| entry | track | rank (all) | rank (track) | rows | mean | h_lo | h_mid | h_hi | matched mean | matched rank (all / track) "
        "| OOD mean | s/epoch | parameters |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ranked_ours = [o for o in ours if summary(o, task)["n"]]
    matched_sets = {id(o): {k for k in o["rows"] if k[0] == task} for o in ranked_ours}
    shown = list(ranked_ours)
    track_leaders = {}
    board_only = ranks(leaderboard, task)
    for e in leaderboard:
        r = board_only.get(id(e))
        if r and r[1] == 1:
            track_leaders[e["track"]] = e
    shown += [e for e in leaderboard if e["pr"] in PEERS] + [e for e in track_leaders.values() if e["pr"] not in PEERS]
    for e in shown:
        s = summary(e, task)
        rank = full.get(id(e), ("–", "–"))
        if e["state"] == "ours":
            keys = matched_sets[id(e)]
            mr = ranks([*leaderboard, e], task, keys).get(id(e), ("–", "–"))
            matched, matched_rank = _f(s["mean"]), f"{mr[0]} / {mr[1]}"
            ood = _f(_mean([v for k, v in e["ood"].items() if k[0] == task]))
            epoch = _f(_mean(e["epoch"].get(task, [])), 1)
            params = str(e["params"].get(task, "–"))
        else:
            keys_all = set().union(*matched_sets.values()) if matched_sets else set()
            matched = _f(summary(e, task, keys_all)["mean"]) if keys_all else "–"
            matched_rank, ood, epoch, params = "", "–", "–", "–"
        pr = f" #{e['pr']}" if e["pr"] else ""
        lines.append(
            f"| {e['name']}{pr} | {e['track']} | {rank[0]} | {rank[1]} | {s['n']} | {_f(s['mean'])} | {_f(s['h_lo'])} | "
            f"{_f(s['h_mid'])} | {_f(s['h_hi'])} | {matched} | {matched_rank} | {ood} | {epoch} | {params} |"
        )
    lines.append("")
    for o in ranked_ours:
        lines.append(f"*{o['name']}*: {o['conditions']}.\n")
    for o in ranked_ours:
        protocol = o.get("protocol") or {}
        if protocol.get("n_graphs", 1000) != 1000 or protocol.get("max_epochs", 500) != 500:
            lines.append(
                f"**Not the challenge protocol** ({o['name']}: {protocol.get('n_graphs')} graphs per family, at most "
                f"{protocol.get('max_epochs')} epochs; a smaller test set also divides the MSE by fewer triangles): not comparable.\n"
            )
    lines.append(
        f"Ranks among the {len(leaderboard)} leaderboard submissions plus our entries, by the mean over the rows each has "
        "(36 per task for a full grid). *Matched*: means over exactly the (setting, seed) rows of our entries "
        "(for the leaderboard rows: the union of ours), the fair comparison while our grid is incomplete."
    )
    return "\n".join(lines)


CURVE_EPOCHS = (1, 5, 10, 20)


def best_by_epoch(curve: Sequence[float], epoch: int) -> float:
    """Best validation accuracy of ``curve`` within its first ``epoch`` epochs (all of a shorter run)."""
    if not curve:
        return float("nan")
    return max(curve[:epoch])


def curves(root: Path, file: str, model: str, leaderboard: list[dict[str, Any]], against: int) -> str:
    """Markdown table of one model's community-detection learning curves per homophily level."""
    path = root / model / file
    if not path.is_file():
        raise SystemExit(f"no {path}")
    other = next((e for e in leaderboard if e["pr"] == against), None)
    if other is None:
        raise SystemExit(f"no leaderboard submission #{against}")
    task = "community_detection"
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in json.loads(path.read_text()).get("results", []):
        curve = (row.get("harness") or {}).get("val_curve")
        if row["experiment"] != task or not curve:
            continue
        groups.setdefault(row["run_slug"].split("_d_")[0], []).append(row)
    if not groups:
        raise SystemExit(f"no community-detection rows with a validation curve in {path}")
    heads = [f"val ≤ {e}" for e in CURVE_EPOCHS]
    lines = [
        f"### {model}: community-detection learning curves (validation accuracy) against #{against}",
        "",
        "| homophily | runs | " + " | ".join(heads) + " | best epoch | epochs run | test | "
        f"#{against} test (same rows) | gap |",
        "|---|---:|" + "---:|" * (len(heads) + 5),
    ]
    for level in ("h_lo", "h_mid", "h_hi"):
        rows = groups.get(level, [])
        if not rows:
            continue
        harness = [r["harness"] for r in rows]
        keys = [(task, r["run_slug"], int(r["train_seed"])) for r in rows]
        theirs = [other["rows"][k] for k in keys if k in other["rows"]]
        test = _mean([float(r["test_best_rerun_accuracy"]) for r in rows])
        points = [_mean([best_by_epoch(h["val_curve"], e) for h in harness]) for e in CURVE_EPOCHS]
        # the entry's mean only over all of our rows (a partial mean would compare other settings)
        theirs_mean = _mean(theirs) if len(theirs) == len(rows) else float("nan")
        gap = test - theirs_mean
        lines.append(
            f"| {level} | {len(rows)} | " + " | ".join(_f(p) for p in points)
            + f" | {_mean([h['best_epoch'] for h in harness]):.1f} | {_mean([h['epochs'] for h in harness]):.1f} | "
            f"{_f(test)} | {_f(theirs_mean)} | {_f(gap)} |"
        )
    lines += [
        "",
        "*val ≤ e*: best validation accuracy within the first e epochs, mean over the runs (the epoch of a "
        "run's best validation is the checkpoint it is tested with). The leaderboard holds no curves: its "
        "entry is compared on test only, over the same (setting, seed) rows (*gap*: ours − theirs).",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the Markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(REPO / "benchmarks" / "results" / "graphuniverse"))
    parser.add_argument("--leaderboard", default=None)
    parser.add_argument("--file", default="results.json", help="results file name in every model folder")
    parser.add_argument("--curves", metavar="MODEL", help="learning curves of one model's community-detection rows")
    parser.add_argument("--against", type=int, default=370, help="leaderboard PR compared in --curves (GRIT)")
    args = parser.parse_args(argv)
    leaderboard = load_leaderboard(_find_leaderboard(args.leaderboard))
    if args.curves:
        print(curves(Path(args.results), args.file, args.curves, leaderboard, args.against))
        return 0
    ours = load_ours(Path(args.results), args.file)
    if not ours:
        raise SystemExit(f"no {args.file} under {args.results}/<model>/")
    print("\n\n".join(table(leaderboard, ours, task) for task in TASKS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
