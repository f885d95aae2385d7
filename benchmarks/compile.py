"""``torch.compile`` from the public API: compiled vs eager forward + backward, compile cost.

What a user writes: ``compiled = torch.compile(model)`` (``--dynamic default``; or
``torch.compile(model, dynamic=True)``, ``--dynamic true``) and then ``compiled(batch)`` on the
raw PyG batches of ``ComplexData`` (the models' eager ``prepare`` runs at the one graph break,
everything after it is one graph). For every model one compiled object
serves batch sizes 16 / 32 / 48 (MUTAG, embedded; the harness's lifting and node identifiers):

* the Cellular Transformer (width 32, 2 layers, 4 heads, pairwise sparse; the README's model),
* the harness ``tokengt`` model (``OrderKTokenGT`` of ``configs/model/graph/tokengt.yaml``:
  width 32, 2 layers, pooled identifiers, dense attention, attention dropout 0.1).

Columns: eager and compiled ms (minimum of interleaved repeats of forward + backward on one
thread), speed-up (eager / compiled), first call s (the first compiled call at that size:
compilation + one step; later sizes show whether they recompiled), graphs (compiled frames so
far, ``unique_graphs``: 1 = no recompilation), graph breaks (``torch._dynamo.explain`` on the raw batch). The
inductor caches live in a fresh temporary folder unless ``--warm-cache`` (then the first call
shows what a second run of the same script costs).

    python benchmarks/compile.py                 # both models, inductor, 1 thread
    python benchmarks/compile.py --dynamic true  # the same with dynamic=True
    python benchmarks/compile.py --models ct --sizes 32
    python benchmarks/compile.py --warm-cache    # reuse inductor's on-disk cache
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
import torch._dynamo
from _measure import print_table, time_cases
from torch._dynamo.utils import counters
from torch_geometric.loader import DataLoader

HEADER = [
    "model", "batch", "eager ms", "compiled ms", "speed-up", "first call s", "graphs", "graph breaks",
]


def ct_model_and_data():
    """The README's Cellular Transformer and lifted MUTAG complexes."""
    from topomodelx_attention.datasets.tu import load_tu_dataset
    from topomodelx_attention.nn.cell import CellularTransformer
    from topomodelx_attention.transforms import CellCycleLifting

    dataset = load_tu_dataset("MUTAG")
    complexes = CellCycleLifting().lift_many([dataset[i] for i in range(len(dataset))])
    torch.manual_seed(0)
    model = CellularTransformer([7, 4, 7], 32, 2, n_layers=2, heads=4).train()
    return "CT pairwise sparse", model, complexes


def tokengt_model_and_data():
    """The harness ``tokengt`` model and its prepared MUTAG complexes (keys pruned)."""
    from topomodelx_attention.harness.config import compose_config
    from topomodelx_attention.harness.models import build_model, get_spec
    from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys

    cfg = compose_config([], model="tokengt")
    with tempfile.TemporaryDirectory() as cache:
        prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cache)
    torch.manual_seed(0)
    model = build_model("tokengt", cfg.model.params, prepared.info).train()
    complexes = [c.clone() for c in prepared.complexes]
    prune_keys(complexes, get_spec("tokengt").keys(model, prepared.info))
    return "harness tokengt", model, complexes


MODELS = {"ct": ct_model_and_data, "tokengt": tokengt_model_and_data}


def model_rows(
    label, model, complexes, sizes, repeats: int, backend: str, dynamic: bool | None
) -> list[list[str]]:
    """One row per batch size; one compiled object for all of them."""
    batches = [next(iter(DataLoader(complexes[i * 8 :], batch_size=s))) for i, s in enumerate(sizes)]
    explanation = torch._dynamo.explain(model)(batches[0])
    breaks = explanation.graph_break_count
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)
    rows = []
    for size, batch in zip(sizes, batches):
        start = time.perf_counter()
        compiled(batch).sum().backward()
        first = time.perf_counter() - start
        best = time_cases(
            {"eager": lambda b=batch: model(b), "compiled": lambda b=batch: compiled(b)},
            torch.device("cpu"),
            repeats=repeats,
            warmup=1,
        )
        rows.append(
            [
                label,
                str(size),
                f"{best['eager'] * 1e3:.1f}",
                f"{best['compiled'] * 1e3:.1f}",
                f"{best['eager'] / best['compiled']:.2f}x",
                f"{first:.1f}",
                str(counters["stats"]["unique_graphs"]),
                str(breaks),
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    torch._dynamo.reset()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 48])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument(
        "--dynamic",
        choices=["true", "default"],
        default="default",
        help="torch.compile(model, dynamic=True), or torch's default dynamic=None (the README's "
        "form; one run per mode, so that neither reuses the other's compiled kernels)",
    )
    parser.add_argument(
        "--warm-cache", action="store_true", help="keep inductor's on-disk cache (default: fresh)"
    )
    args = parser.parse_args(argv)
    if not args.warm_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="tma_compile_")
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), backend {args.backend}, "
        f"{'warm' if args.warm_cache else 'cold'} inductor cache, {os.cpu_count()} CPUs, "
        f"load average {load:.1f}"
    )
    dynamic = True if args.dynamic == "true" else None
    rows = []
    for name in args.models:
        label, model, complexes = MODELS[name]()
        rows += model_rows(label, model, complexes, args.sizes, args.repeats, args.backend, dynamic)
    form = "torch.compile(model, dynamic=True)" if dynamic else "torch.compile(model)"
    print_table(
        f"{form} on raw batches vs eager, forward + backward",
        HEADER,
        rows,
    )


if __name__ == "__main__":
    main()
