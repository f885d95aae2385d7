"""Run this package's TopoBench exports inside a real TopoBench checkout, end to end.

TopoBench is not on PyPI: clone it (``git clone https://github.com/geometric-intelligence/TopoBench``)
and give its path. The script

1. copies this package's TopoBench model configs (``topomodelx_attention/configs/topobench/model``)
   into ``<TopoBench>/configs/model/`` (files named ``tma_*.yaml``),
2. puts the bundled MUTAG raw files where TopoBench's ``TUDatasetLoader`` looks for them
   (``<TopoBench>/datasets/graph/TUDataset/MUTAG/raw``), so nothing is downloaded,
3. runs ``python -m topobench model=... dataset=graph/MUTAG ...`` once per model and data seed,
   through a small launcher (below) and
4. prints every command it ran and a table of TopoBench's own test metric
   (``test_best_rerun/<metric>``: the checkpoint of the best validation epoch, as TopoBench reports).

**Running TopoBench on a current torch.** TopoBench pins torch 2.3 and imports the compiled
packages torch-scatter, torch-sparse and torch-cluster, which have no wheels for current torch
versions. The launcher registers *pure-torch stand-ins* for the few functions TopoBench uses
(``torch_scatter.scatter`` / ``scatter_add``, ``torch_sparse.coalesce``; ``torch_cluster``
functions raise if called — only point-cloud liftings use them). They exist only inside the
launcher process of this script, never in the package. The stand-ins are registered *after*
``torch_geometric`` and this package's scatter backend are imported, so neither mistakes them
for the real compiled packages. TopoBench's other Python dependencies install from PyPI into a
virtual environment that sees this package::

    python -m venv --system-site-packages tbvenv
    tbvenv/bin/pip install rootutils hydra-colorlog rich tabulate einops wandb ogb
    tbvenv/bin/python benchmarks/topobench_check.py --topobench ../TopoBench

Protocols: ``--protocol quick`` (default: 5 epochs, one seed — a smoke test) or ``topobench``
(TopoBench's MUTAG reproduction settings from its ``scripts/reproduce.sh`` for CWN: lr 0.001,
width 128, batch 32, ``max_cell_length=10``, data seeds 0, 3, 5, 7, 9, up to 500 epochs,
validation every 5 epochs, early stopping with patience 10).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import topomodelx_attention

PACKAGE = Path(topomodelx_attention.__file__).resolve().parent

LAUNCHER = r'''
import os, runpy, sys, types
import torch
import torch_geometric  # first: PyG must not mistake the stand-ins for torch-sparse
import topomodelx_attention.nn.attention.scatter  # our torch-only backend, chosen before the stand-ins


def scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum"):
    dim = dim % src.dim()
    size = int(index.max()) + 1 if dim_size is None else int(dim_size)
    if index.dim() == 1:
        index = index.view([-1 if d == dim else 1 for d in range(src.dim())]).expand_as(src)
    shape = list(src.shape)
    shape[dim] = size
    how = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax", "min": "amin", "mul": "prod"}[reduce]
    return torch.zeros(shape, dtype=src.dtype, device=src.device).scatter_reduce(
        dim, index, src, reduce=how, include_self=False)


def scatter_add(src, index, dim=-1, out=None, dim_size=None):
    return scatter(src, index, dim, dim_size=dim_size, reduce="sum")


def coalesce(index, value, m, n, op="add"):
    matrix = torch.sparse_coo_tensor(index, value, (m, n, *value.shape[1:])).coalesce()
    return matrix.indices(), matrix.values()


class SparseTensor:  # only named by TopoBench's to_data_list helper
    pass


def _absent(name):
    def fail(*args, **kwargs):
        raise NotImplementedError(f"torch_cluster.{name} has no stand-in in this check")
    return fail


scatter_module = types.ModuleType("torch_scatter")
scatter_module.scatter, scatter_module.scatter_add = scatter, scatter_add
sparse_module = types.ModuleType("torch_sparse")
sparse_module.coalesce, sparse_module.SparseTensor = coalesce, SparseTensor
cluster_module = types.ModuleType("torch_cluster")
cluster_module.fps, cluster_module.knn, cluster_module.radius = _absent("fps"), _absent("knn"), _absent("radius")
sys.modules.update(torch_scatter=scatter_module, torch_sparse=sparse_module, torch_cluster=cluster_module)
from topomodelx_attention.harness.topobench import register_topobench_transforms

register_topobench_transforms()  # our PEs become TopoBench transforms (by transform_name)
os.environ.setdefault("PROJECT_ROOT", os.getcwd())
sys.argv = ["topobench", *sys.argv[1:]]
runpy.run_module("topobench", run_name="__main__")
'''

#: TopoBench's MUTAG settings for cell models (its scripts/reproduce.sh, CWN line).
TOPOBENCH_PROTOCOL = [
    "optimizer.parameters.lr=0.001",
    "model.feature_encoder.out_channels=128",
    "model.feature_encoder.proj_dropout=0.25",
    "model.readout.readout_name=PropagateSignalDown",
    "dataset.dataloader_params.batch_size=32",
    "trainer.max_epochs=500",
    "trainer.min_epochs=50",
    "trainer.check_val_every_n_epoch=5",
    "callbacks.early_stopping.patience=10",
]
TOPOBENCH_SEEDS = [0, 3, 5, 7, 9]
#: Protocol overrides that exist only for one model domain (TopoBench's default liftings).
DOMAIN_PROTOCOL = {"cell": ["transforms.graph2cell_lifting.max_cell_length=10"]}
#: Layers per model under the TopoBench protocol (CWN: 2 in reproduce.sh).
LAYERS = {"cell/cwn": 2}


def install_configs(topobench: Path) -> list[str]:
    """Copy our ``tma_*.yaml`` model configs into the checkout; return the model names."""
    names = []
    source = PACKAGE / "configs" / "topobench" / "model"
    for path in sorted(source.rglob("*.yaml")):
        relative = path.relative_to(source)
        target = topobench / "configs" / "model" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        names.append(str(relative.with_suffix("")))
    return names


def install_mutag(topobench: Path) -> None:
    """Place the bundled MUTAG raw files where TopoBench's TU loader reads them."""
    raw = topobench / "datasets" / "graph" / "TUDataset" / "MUTAG" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for path in (PACKAGE / "data" / "embedded" / "MUTAG" / "raw").glob("MUTAG_*.txt"):
        if not (raw / path.name).exists():
            shutil.copyfile(path, raw / path.name)


def run_one(python: str, launcher: Path, topobench: Path, overrides: list[str], log: Path) -> dict[str, float]:
    """Run TopoBench once; return its ``test_best_rerun`` metrics (empty on failure)."""
    env = dict(os.environ, PROJECT_ROOT=str(topobench), HYDRA_FULL_ERROR="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(topobench), env.get("PYTHONPATH", "")]))
    with log.open("w") as handle:
        code = subprocess.run(
            [python, str(launcher), *overrides], cwd=topobench, env=env, stdout=handle,
            stderr=subprocess.STDOUT, check=False,
        ).returncode
    text = log.read_text(errors="replace")
    metrics = {}
    match = re.search(r"\{('test_best_rerun/[^}]*)\}", text)
    if code == 0 and match:
        for key, value in re.findall(r"'test_best_rerun/(\w+)': ([-\d.e]+)", match.group(0)):
            metrics[key] = float(value)
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topobench", required=True, type=Path, help="path of a TopoBench checkout")
    parser.add_argument("--python", default=sys.executable, help="interpreter with TopoBench's dependencies")
    parser.add_argument("--models", nargs="+", default=None,
                        help="TopoBench model configs (default: every tma_* export and cell/cwn)")
    parser.add_argument("--dataset", default="graph/MUTAG")
    parser.add_argument("--protocol", choices=["quick", "topobench"], default="quick")
    parser.add_argument("--epochs", type=int, default=5, help="epochs of the quick protocol")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="data seeds (quick: 0; topobench: 0 3 5 7 9)")
    parser.add_argument("--metric", default="accuracy")
    parser.add_argument("--max-dim", type=int, default=2,
                        help="dataset.parameters.max_dim_if_lifted for every run (TopoBench's own cell "
                             "models need 2 with the cycle lifting; -1: keep TopoBench's default)")
    parser.add_argument("--logs", type=Path, default=None, help="folder for the run logs")
    parser.add_argument("overrides", nargs="*", help="extra hydra overrides for every run")
    args = parser.parse_args(argv)
    topobench = args.topobench.resolve()
    if not (topobench / "topobench" / "run.py").is_file():
        parser.error(f"{topobench} is not a TopoBench checkout (no topobench/run.py)")
    if args.max_dim == -1:
        args.max_dim = None
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    ours = install_configs(topobench)
    install_mutag(topobench)
    models = args.models or [*ours, "cell/cwn"]
    seeds = args.seeds or (TOPOBENCH_SEEDS if args.protocol == "topobench" else [0])
    logs = args.logs or Path(tempfile.mkdtemp(prefix="topobench_check_"))
    logs.mkdir(parents=True, exist_ok=True)
    launcher = logs / "launch_topobench.py"
    launcher.write_text(LAUNCHER)
    # TopoBench sizes models by max_dim_if_lifted (3 for its graph data sets) while its cycle
    # lifting stops at rank 2: its own cell models then fail with KeyError 'x_3'. Our exports pad
    # the empty rank and run either way; for a like-for-like comparison every run uses rank 2.
    common = [f"dataset={args.dataset}", "trainer=cpu", "logger=csv"]
    if args.max_dim is not None:
        common.append(f"dataset.parameters.max_dim_if_lifted={args.max_dim}")
    if args.protocol == "topobench":
        common += TOPOBENCH_PROTOCOL
    else:
        common += [f"trainer.max_epochs={args.epochs}", "trainer.check_val_every_n_epoch=1"]
    rows = []
    for model in models:
        scores, seconds = [], []
        layers = []
        if args.protocol == "topobench":
            layers += DOMAIN_PROTOCOL.get(model.split("/")[0], [])
            layers += [f"model.backbone.n_layers={LAYERS[model]}"] if model in LAYERS else []
        for seed in seeds:
            overrides = [f"model={model}", *common, *layers, f"dataset.split_params.data_seed={seed}", *args.overrides]
            log = logs / f"{model.replace('/', '_')}_seed{seed}.log"
            print("$ python -m topobench " + " ".join(overrides), flush=True)
            start = time.perf_counter()
            metrics = run_one(args.python, launcher, topobench, overrides, log)
            seconds.append(time.perf_counter() - start)
            if args.metric in metrics:
                scores.append(metrics[args.metric])
                print(f"  test {args.metric} {metrics[args.metric]:.4f}  ({seconds[-1]:.0f} s, log {log})", flush=True)
            else:
                print(f"  FAILED ({seconds[-1]:.0f} s): see {log}", flush=True)
        rows.append((model, scores, len(seeds), sum(seconds)))
    print(f"\nTopoBench {args.dataset}, protocol {args.protocol}, data seeds {seeds}")
    print(f"| model | test {args.metric} (mean ± std) | runs ok | total seconds |")
    print("|---|---:|---:|---:|")
    failed = False
    for model, scores, total, secs in rows:
        if scores:
            std = statistics.stdev(scores) if len(scores) > 1 else 0.0
            cell = f"{statistics.mean(scores):.4f} ± {std:.4f}"
        else:
            cell = "failed"
        failed |= len(scores) < total
        print(f"| {model} | {cell} | {len(scores)}/{total} | {secs:.0f} |")
    print(f"logs: {logs}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
