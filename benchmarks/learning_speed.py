"""How fast the packaged Cellular Transformer learns, against GPS, on data it was never tuned on.

Three parts, one resumable run file (``<out>/runs.jsonl``, one line per finished run, keyed by
data set, model, configuration and seed; a second call runs only what is missing):

* **diagnosis** (``--part diagnosis``): the packaged CT, each :data:`ABLATIONS` entry (one change
  to it at a time) and the packaged baselines on the *held-out* sets (:data:`HELDOUT`: graph
  classification sets this project never used for any choice, plus a generated cycle-parity set).
  The table gives the training loss after 5 / 10 / 25 / 50 epochs, the last training accuracy,
  the test accuracy at the best-validation epoch, parameters and seconds per epoch.
* **selection** (``--part selection``): the candidate defaults of :data:`CANDIDATES` on the
  held-out sets *and* the protocol sets of ``design_space.py`` (RINGS6, MUTAG, PROTEINS300, GCB,
  ZINC); the default is chosen leave-one-data-set-out on validation only
  (:func:`design_space.select_lodo`'s rule: for each data set, the candidate with the best mean
  validation rank on the others).
* **cost** (``--part cost``): seconds per training epoch of the packaged CT and of GPS, measured
  in one process, one thread, interleaved (CT, GPS, CT, GPS, ... :data:`COST_REPEATS` times a few
  epochs each), so the ratio is not skewed by what else the machine runs; written to
  ``<out>/cost.md``. Run it on an otherwise idle machine.
* ``--table`` prints both tables from the run file without running anything.

Every run is one :func:`~topomodelx_attention.harness.training.run_experiment` with one seed and
one thread, in a worker process at low priority (``os.nice``); TU sets draw a random 50/25/25
split per seed. The held-out sets come from the DGCNN repository's text files (``--dgcnn-root``:
the folder holding ``ENZYMES/ENZYMES.txt``, ``PTC/PTC.txt``, ``IMDBMULTI/IMDBMULTI.txt``,
``NCI1/NCI1.txt``), converted once by ``dgcnn_tu.py`` into ``--work-dir``.

Usage::

    python benchmarks/learning_speed.py --part diagnosis --dgcnn-root SRC --seeds 1 2 3 --workers 2
    python benchmarks/learning_speed.py --part selection --dgcnn-root SRC --data-root DATA --seeds 1 2 3
    python benchmarks/learning_speed.py --table
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from design_space import (  # noqa: E402
    _GLOBAL0,
    PACKAGED_THEN,
    _ranks,
    compose_run,
    load_rows,
    prepare_data,
    run_tasks,
)
from design_space import DATASETS as PROTOCOL  # noqa: E402

from topomodelx_attention.files import make_dirs, write_text  # noqa: E402

OUT = HERE / "results" / "learning_speed"
CT = "cellular_transformer"

#: Held-out graph classification sets: name, source file (DGCNN text), graph subset, classes.
HELDOUT: dict[str, dict[str, Any]] = {
    "ENZYMES": {"source": "ENZYMES/ENZYMES.txt", "graphs": None, "classes": 6},  # 600 proteins, balanced
    "PTC": {"source": "PTC/PTC.txt", "graphs": None, "classes": 2},  # 344 molecules (carcinogenicity)
    "IMDBMULTI": {"source": "IMDBMULTI/IMDBMULTI.txt", "graphs": None, "classes": 3},  # ego networks, no labels
    "NCI1K": {"source": "NCI1/NCI1.txt", "graphs": 1000, "classes": 2},  # a random 1,000 of NCI1's 4,110
    "ODDRINGS": {"source": None, "graphs": 600, "classes": 4},  # generated: number of odd rings (ring_tu.py)
}

#: The packaged CT before this benchmark changed it, as overrides of today's packaged config
#: (``design_space.PACKAGED_THEN``): the per-cell readout summed over the cells, attention dropout
#: 0.1, no cardinality term, the PE as it is, learning rate 1e-3.
PREVIOUS_DEFAULT = list(PACKAGED_THEN)


def _previous(*changes: str) -> list[str]:
    """The previous default with ``changes`` (later overrides of a key win)."""
    return [*PREVIOUS_DEFAULT, *changes]


#: One change at a time to the previous default (the diagnosis).
ABLATIONS: dict[str, list[str]] = {
    "previous_default": _previous(),
    "init_default": _previous("model.params.readout_options.init=default"),
    "pool_then_mlp": _previous("model.params.readout_options.before_pooling=false"),
    "readout_rank0": _previous("model.params.readout_options.ranks=[0]"),
    "mean_pooling": _previous("model.params.pooling=mean"),
    "width32_depth2": _previous("model.params.hidden_channels=32", "model.params.n_layers=2"),
    "attention_dropout0": _previous("model.params.attention_dropout=0.0"),
    "warmup1": _previous("optimizer.warmup_epochs=1"),
    "lr3e-3": _previous("optimizer.lr=0.003"),
    "no_final_norm": _previous("model.params.final_norm=false"),
    "no_embedding_norm": _previous("model.params.embedding_norm=false"),
    "pe16": _previous("model.pe.dim=16"),
    # the sparse kernel's cardinality term w * sum of the neighbours' values on every arrow (softmax
    # attention averages: alone it cannot count neighbours, which GINE's sum does)
    "cardinality": _previous("model.params.kernel_options.cardinality=true"),
    # GPS's recipe: a global arrow (unmasked attention among each complex's vertices)
    "global0": _previous(_GLOBAL0),
    "width64_depth2": _previous("model.params.hidden_channels=64", "model.params.n_layers=2"),
    "heads1": _previous("model.params.heads=1"),
    "mixed_kind": _previous("model.params.kind=mixed"),
    # each PE column batch-normalised before its projection (GPS's RWSE encoder does so)
    "pe_norm": _previous("model.params.pe_options.norm=batch"),
    # combinations of the changes that helped alone
    "lr3e-3_attention_dropout0": _previous("optimizer.lr=0.003", "model.params.attention_dropout=0.0"),
    "lr3e-3_attention_dropout0_global0": _previous(
        "optimizer.lr=0.003", "model.params.attention_dropout=0.0", _GLOBAL0,
    ),
}

#: Candidate defaults of the selection: today's packaged CT (pooled readout, no attention
#: dropout, cardinality term, batch-normalised PE, lr 3e-3), the previous default, and the
#: packaged CT without the PE normalisation (at lr 3e-3 and 1e-3).
CANDIDATES: dict[str, list[str]] = {
    "packaged": [],
    "previous_default": list(PREVIOUS_DEFAULT),
    "fast_no_pe_norm": ["model.params.pe_options.norm=null"],
    "fast_lr1e-3_no_pe_norm": ["model.params.pe_options.norm=null", "optimizer.lr=0.001"],
    # regularised: dropout 0.1 after attention and FFN (where the packaged CT fits its training set
    # and trails GPS on test)
    "dropout0.1": ["model.params.dropout=0.1"],
    # half the depth at a larger width: about half the cost per epoch
    "layers2_width32": ["model.params.n_layers=2", "model.params.hidden_channels=32"],
}

#: Packaged baselines run beside the CT on every set.
BASELINES = ("gps", "gine", "gin")

#: Interleaved repetitions and epochs per repetition of the cost part.
COST_REPEATS = 3
COST_EPOCHS = 4

#: Epochs at which the diagnosis table reads the training loss.
LOSS_EPOCHS = (5, 10, 25, 50)


def prepare_heldout(dgcnn_root: Path | None, work: Path, names: list[str]) -> None:
    """Write the held-out sets' TU files into ``work`` once."""
    from dgcnn_tu import convert
    from ring_tu import write_ring_tu

    for name in names:
        spec = HELDOUT[name]
        if (work / name / "raw" / f"{name}_A.txt").is_file():
            continue
        if spec["source"] is None:
            write_ring_tu(work, name, spec["graphs"], seed=1, task="odd_rings")
            continue
        if dgcnn_root is None:
            raise SystemExit(f"--dgcnn-root is needed to convert {name} ({spec['source']})")
        convert(dgcnn_root / spec["source"], work, name, spec["graphs"], seed=0)


def dataset_spec(name: str, work: Path) -> dict[str, Any]:
    """The run spec of a held-out or protocol data set (``design_space.run_one``'s format)."""
    if name in HELDOUT:
        return {"dataset": name, "data_dir": str(work), "classes": HELDOUT[name]["classes"], "overrides": []}
    return PROTOCOL[name]


def tasks_for(args: argparse.Namespace, done: set[str], work: Path, root: Path) -> list[dict[str, Any]]:
    """The runs still to do for ``args.part``: CT configurations first, then the baselines."""
    configs = ABLATIONS if args.part == "diagnosis" else CANDIDATES
    datasets = args.datasets or (list(HELDOUT) if args.part == "diagnosis" else [*HELDOUT, *PROTOCOL])
    tasks = []
    for seed in args.seeds:
        for dataset in datasets:
            runs = [(CT, name, overrides) for name, overrides in configs.items()]
            runs += [(model, "packaged", []) for model in BASELINES]
            for model, config, overrides in runs:
                if args.configs and config not in args.configs:
                    continue
                key = f"{dataset}|{model}|{config}|{seed}"
                if key in done:
                    continue
                tasks.append({
                    "key": key, "dataset": dataset, "model": model, "config": config, "seed": seed,
                    "overrides": overrides, "epochs": args.epochs, "work": str(work), "root": str(root),
                    "spec": dataset_spec(dataset, work),
                })
    return tasks


def measure_cost(datasets: list[str], work: Path, root: Path, models: tuple[str, ...] = (CT, "gps")) -> str:
    """Median training seconds per epoch of each packaged model per data set; a Markdown table.

    The models alternate (``COST_REPEATS`` times ``COST_EPOCHS`` epochs each) in this process
    with one thread; the first epoch of every repetition is left out (warm-up: caches, allocator).
    """
    import torch

    from topomodelx_attention.harness.training import run_experiment

    torch.set_num_threads(1)
    lines = ["| data set | " + " | ".join(f"{m} s/epoch" for m in models) + f" | {models[0]} / {models[1]} | "
             + " | ".join(f"{m} params" for m in models) + " |", "|---|" + "---:|" * (2 * len(models) + 1)]
    for dataset in datasets:
        spec = dataset_spec(dataset, work)
        seconds: dict[str, list[float]] = {m: [] for m in models}
        params: dict[str, int] = {}
        for repeat in range(COST_REPEATS):
            for model in models:
                cfg = compose_run(spec, model, COST_EPOCHS, repeat + 1, work, root, ["test=false"])
                with tempfile.TemporaryDirectory() as folder:
                    result = run_experiment(cfg, output_dir=folder, verbose=False)
                history = result.seeds[0].history
                seconds[model] += [float(r["epoch_seconds"]) for r in history if "epoch_seconds" in r][1:]
                params[model] = result.num_parameters
        median = {m: statistics.median(v) for m, v in seconds.items()}
        lines.append(
            f"| {dataset} | " + " | ".join(f"{median[m]:.3f}" for m in models)
            + f" | {median[models[0]] / median[models[1]]:.2f} | "
            + " | ".join(f"{params[m] / 1000:.1f}k" for m in models) + " |"
        )
        print(lines[-1], flush=True)
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- tables
def _mean_std(values: list[float], scale: float = 100.0) -> str:
    """``mean ± std`` (population std over seeds): accuracies in % (``scale`` 100), else 3 decimals."""
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "–"
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    digits = 1 if scale == 100.0 else 3
    return f"{scale * statistics.fmean(values):.{digits}f} ± {scale * std:.{digits}f}"


def _loss_at(rows: list[dict[str, Any]], epoch: int) -> str:
    values = [r["train_loss"][epoch - 1] for r in rows if len(r["train_loss"]) >= epoch]
    return f"{statistics.fmean(values):.3f}" if values else "–"


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["dataset"], row["model"], row["config"]), []).append(row)
    return groups


def diagnosis_table(rows: list[dict[str, Any]], configs: dict[str, list[str]]) -> str:
    """Markdown: per data set, every configuration's loss curve, accuracies and cost."""
    groups = _groups(rows)
    losses = " | ".join(f"loss @{e}" for e in LOSS_EPOCHS)
    lines = [f"| data set | model | configuration | seeds | {losses} | last train acc | test acc | "
             "params | s/epoch |", "|---|---|---|---:|" + "---:|" * (len(LOSS_EPOCHS) + 4)]
    datasets = [d for d in [*HELDOUT, *PROTOCOL] if any(k[0] == d for k in groups)]
    order = {name: i for i, name in enumerate(configs)}
    for d in datasets:
        keys = sorted((k for k in groups if k[0] == d and (k[1] != CT or k[2] in configs)),
                      key=lambda k: (k[1] != CT, k[1], order.get(k[2], 99)))
        for key in keys:
            group = groups[key]
            metric = group[0]["metric"]
            scale = 100.0 if metric == "accuracy" else 1.0
            cells = " | ".join(_loss_at(group, e) for e in LOSS_EPOCHS)
            acc = _mean_std([r["train_acc"][-1] for r in group])
            lines.append(
                f"| {d} | {key[1]} | {key[2]} | {len(group)} | {cells} | {acc} | "
                f"{_mean_std([r['test'] for r in group], scale)} | {group[0]['params'] / 1000:.1f}k | "
                f"{statistics.median(r['s_per_epoch'] for r in group):.2f} |"
            )
    return "\n".join(lines)


def against_gps_table(rows: list[dict[str, Any]], config: str = "packaged") -> str:
    """Markdown: the packaged CT against packaged GPS per data set, and whether the CT meets the targets.

    Targets: training loss after 10 and after 50 epochs at most GPS's; test score at least GPS's
    minus one standard deviation of GPS's (accuracy: higher is better; MAE: lower).
    """
    groups = _groups(rows)
    lines = ["| data set | seeds | CT loss @10 | GPS loss @10 | CT loss @50 | GPS loss @50 | CT test | GPS test | "
             "losses ≤ GPS | test ≥ GPS − std | CT / GPS s/epoch (runs) |", "|---|---:|" + "---:|" * 6 + "---|---|---:|"]
    for d in [*HELDOUT, *PROTOCOL]:
        ct, gps = groups.get((d, CT, config)), groups.get((d, "gps", "packaged"))
        if not ct or not gps:
            continue
        seeds = sorted({r["seed"] for r in ct} & {r["seed"] for r in gps})
        ct = [r for r in ct if r["seed"] in seeds]
        gps = [r for r in gps if r["seed"] in seeds]
        metric = ct[0]["metric"]
        scale = 100.0 if metric == "accuracy" else 1.0
        loss = {name: [statistics.fmean(r["train_loss"][e - 1] for r in group) for e in (10, 50)]
                for name, group in (("ct", ct), ("gps", gps))}
        test_ct = [r["test"] for r in ct]
        test_gps = [r["test"] for r in gps]
        std = statistics.pstdev(test_gps) if len(test_gps) > 1 else 0.0
        sign = 1 if metric == "accuracy" else -1
        meets_test = sign * statistics.fmean(test_ct) >= sign * statistics.fmean(test_gps) - std
        meets_loss = all(c <= g for c, g in zip(loss["ct"], loss["gps"]))
        ratio = statistics.median(r["s_per_epoch"] for r in ct) / statistics.median(r["s_per_epoch"] for r in gps)
        lines.append(
            f"| {d} | {len(seeds)} | {loss['ct'][0]:.3f} | {loss['gps'][0]:.3f} | {loss['ct'][1]:.3f} | "
            f"{loss['gps'][1]:.3f} | {_mean_std(test_ct, scale)} | {_mean_std(test_gps, scale)} | "
            f"{'yes' if meets_loss else 'no'} | {'yes' if meets_test else 'no'} | {ratio:.2f} |"
        )
    return "\n".join(lines)


def selection_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: validation ranks of the candidates per data set and the leave-one-out choices."""
    agg: dict[tuple[str, str, str], dict[str, Any]] = {}
    for key, group in _groups(rows).items():
        if key[1] == CT and key[2] in CANDIDATES:
            agg[key] = {"metric": group[0]["metric"], "val": statistics.fmean(r["val"] for r in group),
                        "seeds": len(group)}
    datasets = [d for d in [*HELDOUT, *PROTOCOL] if any(k[0] == d for k in agg)]
    ranks = {d: _ranks(agg, d, CT) for d in datasets}
    complete = [c for c in CANDIDATES if all(c in ranks[d] for d in datasets)]
    if not complete:
        return "(no candidate finished on every data set yet)"
    if len(datasets) < 2:
        return "(leaving one data set out needs at least two data sets)"

    def mean_rank(config: str, pool: list[str]) -> float:
        return statistics.fmean(ranks[d][config] for d in pool)

    lines = ["| candidate | " + " | ".join(datasets) + " | mean rank |", "|---|" + "---:|" * (len(datasets) + 1)]
    for c in complete:
        lines.append(f"| {c} | " + " | ".join(f"{ranks[d][c]:g}" for d in datasets)
                     + f" | {mean_rank(c, datasets):.2f} |")
    lines += ["", "| held-out data set | chosen on the others |", "|---|---|"]
    for held in datasets:
        pool = [d for d in datasets if d != held]
        lines.append(f"| {held} | {min(complete, key=lambda c: mean_rank(c, pool))} |")
    lines.append(f"\nChosen on every data set: **{min(complete, key=lambda c: mean_rank(c, datasets))}**")
    return "\n".join(lines)


def render(rows: list[dict[str, Any]]) -> str:
    diag = [r for r in rows if r["dataset"] in HELDOUT and (r["model"] != CT or r["config"] in ABLATIONS)]
    sel = [r for r in rows if r["model"] != CT or r["config"] in CANDIDATES]
    return "\n".join([
        "## Diagnosis (held-out sets; training loss after 5/10/25/50 epochs, mean over seeds)", "",
        diagnosis_table(diag, ABLATIONS), "",
        "## Candidates and baselines (every set)", "", diagnosis_table(sel, CANDIDATES), "",
        "## The packaged CT against GPS (seeds both ran)", "", against_gps_table(rows), "",
        "## Selection (validation ranks; leave one data set out)", "", selection_table(rows), "",
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("diagnosis", "selection", "cost"), default="diagnosis")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--configs", nargs="+", default=None, help="only these configuration names")
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dgcnn-root", type=Path, default=None)
    parser.add_argument("--data-root", default=os.environ.get("TMA_DATA_ROOT"),
                        help="folder with tudataset/, gcb/, zinc12k/ (the protocol sets; selection only)")
    parser.add_argument("--work-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "tma_learning_speed")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--table", action="store_true", help="print the tables of the finished runs only")
    parser.add_argument("--list", action="store_true", help="print the runs still to do and exit")
    args = parser.parse_args(argv)
    runs = args.out / "runs.jsonl"
    if args.table:
        text = render(load_rows(runs))
        make_dirs(args.out)
        write_text(args.out / "tables.md", text, root=args.out)
        print(text)
        return
    work = args.work_dir
    make_dirs(work)
    root = Path(args.data_root) if args.data_root else Path("DATA")
    def prepare(datasets: list[str]) -> None:
        prepare_heldout(args.dgcnn_root, work, [d for d in datasets if d in HELDOUT])
        if any(d in PROTOCOL for d in datasets):
            if not args.data_root:
                parser.error("--data-root is needed for the protocol sets")
            prepare_data(root, work)

    if args.part == "cost":
        datasets = args.datasets or [*HELDOUT, *PROTOCOL]
        prepare(datasets)
        text = measure_cost(datasets, work, root)
        make_dirs(args.out)
        write_text(args.out / "cost.md", text + "\n", root=args.out)
        print(text)
        return
    done = {row["key"] for row in load_rows(runs)}
    tasks = tasks_for(args, done, work, root)
    if args.list:
        print("\n".join(t["key"] for t in tasks))
        return
    prepare(sorted({t["dataset"] for t in tasks}))
    make_dirs(args.out)
    print(f"{len(done)} runs finished, {len(tasks)} to run with {args.workers} workers", flush=True)
    run_tasks(tasks, args.workers, runs, args.out, lambda row: (
        f"{row['key']}: val {row['val']:.4f} test {row['test']:.4f} loss "
        f"{row['train_loss'][0]:.2f} -> {row['train_loss'][-1]:.2f} ({row['s_per_epoch']:.2f} s/ep)"
    ))
    text = render(load_rows(runs))
    write_text(args.out / "tables.md", text, root=args.out)
    print(text)


if __name__ == "__main__":
    main()
