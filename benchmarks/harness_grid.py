"""Model comparison with the benchmark harness: several data sets × models, one table.

Runs ``topomodelx_attention.harness.run_experiment`` sequentially (one process, one thread) for
every requested (data set, model) pair with the same budget, and prints the comparison table
(Markdown: test metric at the best validation epoch, mean ± std over seeds, wall time). Each run
also writes its own results/curves under ``--output-root``.

Usage::

    python benchmarks/harness_grid.py --datasets MUTAG GCB --models cellular_transformer gin \\
        --max-epochs 50 --seeds 1 2 3 4 5 --data-root /path/to/data
    python benchmarks/harness_grid.py --datasets ZINC --models gin --max-epochs 30 \\
        --seeds 1 2 3 --data-root DATA -- dataset.subset={train:2000,val:1000,test:1000}

``--data-root`` holds ``tudataset/``, ``gcb/`` and ``zinc12k/`` folders (as the project's shared
data folder does); MUTAG needs nothing. Arguments after ``--`` are hydra overrides applied to
every run; ``--model-overrides name:key=value`` applies to one model only.

**Equal budget** (``--equal-budget``): every model gets the same wall time per seed
(``--max-time`` seconds, ``trainer.max_time``; no epoch cap unless ``--max-epochs``) and the same
hyperparameter search (``--trials`` settings drawn from ``budget.space`` of ``train.yaml``,
identical for every model, selected on the validation metric only); writes
``<output-root>/<stamp>/<dataset>/results.md`` (parameters, epochs reached, seconds per epoch,
budget), ``trials.csv`` and ``time_to_accuracy.png`` (validation metric against wall time, all
models)::

    python benchmarks/harness_grid.py --equal-budget --datasets MUTAG ZINC \
        --models cellular_transformer tokengt gps graph_transformer gine gin \
        --max-time 300 --trials 4 --seeds 1 2 3 --data-root /path/to/data

``--jobs N`` runs N models at once (one process and one thread each: all models share the
machine the same way) and merges their trials into the same tables; ``--space`` replaces the
search space (``KEY=V1,V2``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

from topomodelx_attention.files import append_text
from topomodelx_attention.harness import compose_config, run_equal_budget, run_experiment
from topomodelx_attention.harness.budget import resolve_budget, write_budget_tables
from topomodelx_attention.harness.results import comparison_table, summary_row

DATA_SUBDIR = {"MUTAG": None, "PROTEINS": "tudataset", "GCB": "gcb", "ZINC": "zinc12k"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["MUTAG"])
    parser.add_argument(
        "--models", nargs="+", default=["cellular_transformer", "gin", "cwn", "sccnn"]
    )
    parser.add_argument(
        "--max-epochs",
        type=int,
        default=None,
        help="epochs per seed (default 30; with --equal-budget: no cap)",
    )
    parser.add_argument(
        "--equal-budget",
        action="store_true",
        help="same wall time per seed and same hyperparameter trials for every model",
    )
    parser.add_argument(
        "--max-time",
        type=float,
        default=None,
        help="--equal-budget: seconds per seed (default budget.max_time of train.yaml)",
    )
    parser.add_argument(
        "--trials",
        type=int,
        default=None,
        help="--equal-budget: hyperparameter trials per model (default budget.trials)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--data-root", default=None, help="folder with tudataset/, gcb/, zinc12k/")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--output-root", default="outputs/grid")
    parser.add_argument("--model-overrides", nargs="*", default=[], help="name:key=value")
    parser.add_argument("--table", default=None, help="also append the table to this file")
    parser.add_argument(
        "--space",
        nargs="*",
        default=None,
        metavar="KEY=V1,V2",
        help="--equal-budget: search space (default budget.space of train.yaml), "
        "e.g. optimizer.lr=0.003,0.001 model.params.dropout=0.0",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="--equal-budget: models run in this many processes at once (one "
        "thread each); the tables are merged at the end",
    )
    parser.add_argument("overrides", nargs="*", help="hydra overrides for every run (after --)")
    args = parser.parse_args(argv)

    per_model: dict[str, list[str]] = {}
    for item in args.model_overrides:
        name, _, override = item.partition(":")
        per_model.setdefault(name, []).append(override)
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    if args.equal_budget:
        common = ["trainer.enable_progress_bar=false", *args.overrides]
        if args.cache_dir:
            common.append(f"paths.cache_dir={args.cache_dir}")
        data_dirs = {
            name: str(Path(args.data_root) / DATA_SUBDIR[name.upper()])
            for name in args.datasets
            if args.data_root and DATA_SUBDIR.get(name.upper())
        }
        space = None
        if args.space is not None:
            space = {}
            for item in args.space:
                key, _, values = item.partition("=")
                space[key] = [yaml.safe_load(v) for v in values.split(",")]
        # resolved once: the workers and the merged tables read the same settings
        max_time, trials, space, search_seed = resolve_budget(args.max_time, args.trials, space)
        options = dict(
            seeds=args.seeds, max_time=max_time, max_epochs=args.max_epochs, trials=trials,
            space=space, search_seed=search_seed, overrides=common, model_overrides=per_model,
            data_dirs=data_dirs, output_root=Path(args.output_root) / stamp,
        )
        if args.jobs <= 1:
            run_equal_budget(args.datasets, args.models, **options)
            return
        tasks = [(d, m) for d in args.datasets for m in args.models]
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
            futures = [pool.submit(_one_model, d, m, options) for d, m in tasks]
            results = [f.result() for f in futures]
        for dataset in args.datasets:
            rows = [row for (d, _), out in zip(tasks, results) if d == dataset for row in out[d]]
            write_budget_tables(
                Path(args.output_root) / stamp / dataset, rows, max_time, trials,
                list(args.seeds), verbose=True,
            )
        return
    if args.max_epochs is None:
        args.max_epochs = 30
    rows = []
    for dataset in args.datasets:
        for model in args.models:
            overrides = [
                f"trainer.max_epochs={args.max_epochs}",
                "seeds=[" + ",".join(map(str, args.seeds)) + "]",
                "trainer.enable_progress_bar=false",
                *args.overrides,
                *per_model.get(model, []),
            ]
            sub = DATA_SUBDIR.get(dataset.upper())
            if sub and args.data_root:
                overrides.append(f"dataset.data_dir={Path(args.data_root) / sub}")
            if args.cache_dir:
                overrides.append(f"paths.cache_dir={args.cache_dir}")
            cfg = compose_config(overrides, dataset=dataset, model=model)
            out = Path(args.output_root) / stamp / f"{dataset}_{model}"
            result = run_experiment(cfg, output_dir=out)
            rows.append(summary_row(result))
            print(comparison_table(rows[-1:]), flush=True)
    table = comparison_table(rows)
    print()
    print(
        f"budget: {args.max_epochs} epochs per seed, seeds {args.seeds}, extra overrides {args.overrides}"
    )
    print(table)
    if args.table:
        append_text(args.table, table + "\n")


def _one_model(dataset: str, model: str, options: dict):
    """One (data set, model) of an equal-budget comparison, in a worker process."""
    return run_equal_budget([dataset], [model], verbose=False, **options)


if __name__ == "__main__":
    main()
