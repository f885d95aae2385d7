"""Seconds per training epoch of the Cellular Transformer against its peers, one run, one table.

One training epoch = a shuffled ``ComplexDataLoader`` pass (the harness's loader) over the whole data
set (collation included) with forward, loss, backward and an AdamW step, as the harness trains.
Every model is built through the harness registry from its packaged YAML (its lifting,
positional encoding and options) at the same width and depth (``--hidden``, ``--layers``):

* ``cellular_transformer`` — ``nn.cell.CellularTransformer`` (cycle-basis cell complex, RWPe);
* ``tokengt`` — ``nn.graph.OrderKTokenGT`` on the 1-skeleton (Laplacian node identifiers);
* ``gps`` — PyG ``GPSConv`` (GINE + multi-head attention, RWSE) — **the named baseline**;
* ``graph_transformer`` — a stack of PyG ``TransformerConv`` blocks (LapPE);
* ``gine`` and ``gin`` — message passing.

Data: MUTAG (bundled, 188 molecules, lifted with ``lift_many``) and, with ``--zinc-csv`` pointing
at ZINC-12k's ``smiles_score.csv`` (next to ``indexes_train_val_test.csv``), the first
``--zinc-graphs`` training molecules (needs RDKit; skipped when the file is absent). Lifting and
PE are computed once and cached (``--cache-dir``), outside the timed epochs.

Timing: one warm-up epoch per model, then ``--repeats`` rounds in which every model trains one
epoch (round-robin), minimum kept. Ratios are against GPS in the same run.

With ``--phases`` it also splits the epoch into its parts (thread clock, the same shuffled
batches for every model in a round, minimum per part over the rounds): collation, the model's
per-batch ``prepare`` (the CT's attention plan and input checks; GPS has none), forward,
backward and the AdamW step, and counts the floating-point work of the dense matrix products
(``mm``/``addmm``/``bmm`` on strided operands, from the profiler's FLOP estimates over one
epoch) with the time they take: where an epoch's difference to GPS comes from.

It also prints the cost of the CT's sparse attention per stored neighbourhood entry (forward
of its attention blocks, one extra epoch with timing hooks) next to this machine's floor for
the same gathers and scatters: for every attention call, ``index_select`` of the source rows and
``index_add_`` into the target rows, at the model width, over the same index arrays.

Usage::

    python benchmarks/epoch_vs_peers.py                       # MUTAG, width 32, 2 layers, batch 32
    python benchmarks/epoch_vs_peers.py --zinc-csv /path/to/data/zinc12k/smiles_score.csv
    python benchmarks/epoch_vs_peers.py --models cellular_transformer gps --repeats 5 --threads 2
    python benchmarks/epoch_vs_peers.py --models cellular_transformer gps --phases
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from _measure import print_table
from torch.nn import functional as F

from topomodelx_attention.data import ComplexDataLoader
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.models import build_model, get_spec
from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys
from topomodelx_attention.harness.task_module import adam_update_mode

BASELINE = "gps"
MODELS = ("cellular_transformer", "tokengt", "gps", "graph_transformer", "gine", "gin")


def prepare(
    name: str, dataset: str, overrides: list[str], width: int, layers: int, cache: str | None
):
    """Model (fresh, seeded) and its pruned complexes, built as the harness builds them."""
    params = [f"model.params.hidden_channels={width}", f"model.params.n_layers={layers}"]
    cfg = compose_config([*params, *overrides], dataset=dataset, model=name)
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.get("pe"), cache)
    torch.manual_seed(0)
    model = build_model(name, cfg.model.params, prepared.info)
    complexes = [c.clone() for c in prepared.complexes]
    prune_keys(complexes, get_spec(name).keys(model, prepared.info))
    return model, complexes, prepared.info


def make_optimizer(model) -> torch.optim.AdamW:
    """AdamW over ``model``'s parameters, as the harness builds it."""
    return torch.optim.AdamW(model.parameters(), lr=1e-3, **adam_update_mode(model.parameters()))


def epoch_loss(out, batch, info):
    """The harness's training loss: cross-entropy for classification, L1 otherwise."""
    if info.task == "classification":
        return F.cross_entropy(out, batch.y.view(-1).long())
    return F.l1_loss(out.view(-1), batch.y.view(-1).to(out.dtype))


def make_epoch(model, complexes, info, batch_size: int):
    """A function training ``model`` for one epoch over ``complexes`` (collation included)."""
    optimizer = make_optimizer(model)

    def epoch() -> None:
        model.train()
        for batch in ComplexDataLoader(complexes, batch_size=batch_size, shuffle=True):
            optimizer.zero_grad(set_to_none=True)
            epoch_loss(model(batch), batch, info).backward()
            optimizer.step()

    return epoch


PHASES = ("collate", "prepare", "forward", "backward", "step")


def phase_epoch(model, complexes, info, batch_size: int, seed: int) -> dict[str, float]:
    """Thread seconds of each part of one training epoch (the batches of ``seed``'s shuffle)."""
    optimizer = make_optimizer(model)
    seconds = dict.fromkeys(PHASES, 0.0)
    model.train()
    torch.manual_seed(seed)
    batches = iter(ComplexDataLoader(complexes, batch_size=batch_size, shuffle=True))
    while True:
        start = time.thread_time()
        batch = next(batches, None)
        if batch is None:
            return seconds
        collated = time.thread_time()
        seconds["collate"] += collated - start
        optimizer.zero_grad(set_to_none=True)
        inputs = model.prepare(batch) if hasattr(model, "prepare") else batch
        prepared = time.thread_time()
        seconds["prepare"] += prepared - collated
        out = model(inputs)
        forward = time.thread_time()
        seconds["forward"] += forward - prepared
        epoch_loss(out, batch, info).backward()
        backward = time.thread_time()
        seconds["backward"] += backward - forward
        optimizer.step()
        seconds["step"] += time.thread_time() - backward


def dense_gemm_work(model, complexes, info, batch_size: int) -> tuple[float, float, int]:
    """``(GFLOP, seconds, calls)`` of the dense matrix products of one training epoch.

    Products whose operands are strided (``mm``, ``addmm``, ``bmm``): the profiler's FLOP
    estimate of a product with a sparse operand counts it as dense, so the products inside the
    sparse attention kernel (an ancestor event named ``*Sparse*``) are left out.
    """
    products = ("aten::mm", "aten::addmm", "aten::bmm")
    with torch.profiler.profile(with_flops=True, record_shapes=True) as prof:
        make_epoch(model, complexes, info, batch_size)()
    flops = seconds = 0.0
    calls = 0
    for event in prof.events():
        if event.name not in products or not event.flops:
            continue
        parent, in_sparse_kernel = event.cpu_parent, False
        while parent is not None and not in_sparse_kernel:
            in_sparse_kernel, parent = "Sparse" in parent.name, parent.cpu_parent
        if in_sparse_kernel:
            continue
        flops += event.flops
        seconds += (event.cpu_time_total - sum(c.cpu_time_total for c in event.cpu_children)) / 1e6
        calls += 1
    return flops / 1e9, seconds, calls


def print_phases(built: dict, batch_size: int, repeats: int, title: str) -> None:
    """The epoch of every model split into its parts, and its dense GEMM work, as one table."""
    best = {name: dict.fromkeys(PHASES, float("inf")) for name in built}
    for seed in range(repeats + 1):  # the first round warms up
        for name, (model, complexes, info) in built.items():
            seconds = phase_epoch(model, complexes, info, batch_size, seed)
            if seed:
                best[name] = {k: min(best[name][k], v) for k, v in seconds.items()}
    rows = []
    for name, (model, complexes, info) in built.items():
        gflop, gemm_s, calls = dense_gemm_work(model, complexes, info, batch_size)
        parts = [f"{1e3 * best[name][k]:.1f}" for k in PHASES]
        total = sum(best[name].values())
        rows.append(
            [
                name,
                *parts,
                f"{1e3 * total:.1f}",
                f"{gflop:.2f}",
                f"{1e3 * gemm_s:.1f}",
                str(calls),
                f"{gflop / max(gemm_s, 1e-9):.0f}",
            ]
        )
    print_table(
        title,
        [
            "model",
            *(f"{k} ms" for k in PHASES),
            "sum ms",
            "dense GEMM GFLOP",
            "GEMM ms",
            "GEMM calls",
            "GFLOP/s",
        ],
        rows,
    )


def time_epochs(epochs: dict, repeats: int) -> dict[str, float]:
    """Minimum epoch time of every model over ``repeats`` round-robin rounds (after a warm-up)."""
    for run in epochs.values():
        run()
    best = dict.fromkeys(epochs, float("inf"))
    for _ in range(repeats):
        for name, run in epochs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def attention_cost(
    model, complexes, info, batch_size: int, repeats: int
) -> tuple[float, float, int]:
    """CT sparse attention kernels (forward) and the gather/scatter floor, in ns per stored entry.

    Returns ``(attention_ns, floor_ns, entries)`` for one epoch.
    """
    # Every sparse attention call of the CT layers goes through the core's sparse kernel
    # (the fused call of all sparse arrows, or one call per arrow): time it there.
    from topomodelx_attention.nn.attention import kernels as ct_layer

    calls: list[tuple[torch.Tensor, int, int, int]] = []  # (indices, n_target, n_source, width)
    seconds = [0.0]
    original = ct_layer.sparse_attention

    def timed(query, key, value, neighborhood, **kwargs):
        if hasattr(neighborhood, "index_target"):  # a prepared NeighborhoodIndex
            indices = torch.stack([neighborhood.index_target, neighborhood.index_source])
        else:
            indices = neighborhood.coalesce().indices()
        width = value.shape[-1] * (value.shape[-2] if value.dim() == 3 else 1)
        calls.append((indices, query.shape[0], key.shape[0], width))
        start = time.perf_counter()
        out = original(query, key, value, neighborhood, **kwargs)
        seconds[0] += time.perf_counter() - start
        return out

    ct_layer.sparse_attention = timed
    try:
        make_epoch(model, complexes, info, batch_size)()
    finally:
        ct_layer.sparse_attention = original
    entries = sum(int(idx.shape[1]) for idx, *_ in calls)
    inputs = [
        (idx[0].contiguous(), idx[1].contiguous(), torch.randn(ns, w), torch.zeros(nt, w))
        for idx, nt, ns, w in calls
    ]
    floor = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for rows, cols, source, out in inputs:
            out.index_add_(0, rows, source.index_select(0, cols))
        floor = min(floor, time.perf_counter() - start)
    return 1e9 * seconds[0] / max(entries, 1), 1e9 * floor / max(entries, 1), entries


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (the harness default is 1)"
    )
    parser.add_argument(
        "--zinc-csv", default=None, help="ZINC-12k smiles_score.csv (skipped if absent)"
    )
    parser.add_argument(
        "--zinc-graphs", type=int, default=3000, help="first N training molecules of ZINC-12k"
    )
    parser.add_argument(
        "--cache-dir", default=None, help="lifting/PE cache (default: the harness cache)"
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="also split the epoch into collate / prepare / forward / backward / step and count "
        "the dense GEMM work",
    )
    args = parser.parse_args(argv)
    if BASELINE not in args.models:
        parser.error(f"--models must include the baseline {BASELINE!r}")
    torch.set_num_threads(args.threads)

    datasets = [("MUTAG", [])]
    if args.zinc_csv:
        csv_path = Path(args.zinc_csv)
        if csv_path.is_file():
            subset = f"dataset.subset={{train:{args.zinc_graphs},val:1,test:1}}"
            datasets.append(("ZINC", [f"dataset.data_dir={csv_path.parent}", subset]))
        else:
            print(f"{csv_path} not found: ZINC skipped")

    for dataset, overrides in datasets:
        built = {
            name: prepare(name, dataset, overrides, args.hidden, args.layers, args.cache_dir)
            for name in args.models
        }
        n = len(next(iter(built.values()))[1])
        epochs = {
            name: make_epoch(model, c, info, args.batch_size)
            for name, (model, c, info) in built.items()
        }
        best = time_epochs(epochs, args.repeats)
        rows = []
        for name, (model, _, _) in built.items():
            params = sum(p.numel() for p in model.parameters() if p.requires_grad)
            rows.append(
                [name, f"{params:,}", f"{best[name]:.3f}", f"{best[name] / best[BASELINE]:.2f}×"]
            )
        print_table(
            f"{dataset} ({n} complexes): one training epoch, width {args.hidden}, {args.layers} layers, "
            f"batch {args.batch_size}, {args.threads} thread(s), min of {args.repeats}",
            ["model", "parameters", "s/epoch", f"vs {BASELINE}"],
            rows,
        )
        if args.phases:
            print()
            print_phases(
                built,
                args.batch_size,
                args.repeats,
                f"{dataset}: one training epoch by parts (thread ms, min of {args.repeats}; "
                "dense GEMM work of one epoch from the profiler)",
            )
        if "cellular_transformer" in built:
            model, complexes, info = built["cellular_transformer"]
            attention_ns, floor_ns, entries = attention_cost(
                model, complexes, info, args.batch_size, args.repeats
            )
            print(
                f"\nCT sparse attention, forward: {attention_ns:.1f} ns per stored neighbourhood entry "
                f"({entries:,} entries per epoch, all layers and arrows); floor on this machine "
                f"(index_select + index_add_ of the same rows, width {args.hidden}): {floor_ns:.1f} ns "
                f"per entry -> {attention_ns / floor_ns:.1f}× the floor"
            )


if __name__ == "__main__":
    main()
