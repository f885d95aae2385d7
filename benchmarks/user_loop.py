"""Cellular Transformer vs PyG's GPS in a user's own loop: PyG ``DataLoader``, plain AdamW.

A user does not run the harness: the README batches complexes with
``torch_geometric.loader.DataLoader`` and trains with a plain loop. This script times, in one
run and interleaved, what such a loop costs for

* **CT**: :class:`~topomodelx_attention.nn.cell.CellularTransformer` as ``benchmarks/ct_step.py``
  builds it (pairwise sparse attention, width 32, 2 layers, 4 heads, cellular random-walk PE of
  dim 8, ConcatPE) on ``CellCycleLifting`` of MUTAG, the complexes keeping the keys the model
  reads (``--keys model``, as the harness batches them), every key of a lifting told the
  model's neighbourhoods (``--keys lifting``: ``CellCycleLifting(neighborhoods=
  model.neighborhood_keys)``, the README's loop) or every key of the default lifting
  (``--keys all``);
* **GPS** (the named baseline): ``ct_step.GPS`` (``GPSConv`` with a ``GINEConv`` local model and
  multi-head attention, RWSE of dim 8) on the same graphs as plain PyG ``Data``.

Cases (batch 32, every batch of the data set, collation included unless said otherwise):

* *training epoch*: shuffled PyG ``DataLoader``, forward, cross-entropy, backward,
  ``torch.optim.AdamW(model.parameters(), lr=1e-3)`` with its defaults (the plain optimiser a
  user writes; the harness uses the fused one);
* *inference*: ``model.eval()`` and ``torch.no_grad()``, PyG ``DataLoader``, and the same with
  :class:`~topomodelx_attention.data.ComplexDataLoader` (GPS batches plain graphs: PyG's loader
  in both rows);
* *collation*: one pass of each loader without a model;
* *inference by parts* (batches collated beforehand): the CT's per-batch ``prepare`` alone, and
  each model's forward on prepared inputs (GPS has nothing to prepare);
* *AdamW*: the optimiser steps of a training epoch alone (one per batch, on a copy of the model).

Time per epoch: minimum over ``--repeats`` interleaved rounds (every case once per round) after
``--warmup`` rounds, with ``torch.set_num_threads(--threads)``. ``--clock thread`` (default)
counts the CPU time of the calling thread (the loaders run in it: ``num_workers=0``), so other
jobs on a shared machine count less; ``--clock wall`` the elapsed time. Ratios are CT / GPS in
the same run; the load average is printed with the table.

``--before DIR`` adds the CT of another copy of the package (``DIR/topomodelx_attention``, e.g.
``git archive <commit> topomodelx_attention | tar -x -C DIR``), built with the same seed, to the
same interleaved rounds (rows "before" and "after / before"): a change's before / after at the
same load. That copy is imported first and set aside; batches are collated by this checkout.

Usage::

    python benchmarks/user_loop.py --quick
    python benchmarks/user_loop.py --repeats 15 --keys all
    python benchmarks/user_loop.py --quick --keys lifting
    python benchmarks/user_loop.py --repeats 6 --before BEFORE_DIR
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from collections.abc import Callable

from _measure import import_before

CellularTransformerBefore = import_before(sys.argv)

import torch  # noqa: E402
from _measure import add_common_args, interleaved_min, print_table  # noqa: E402
from ct_step import GPS, ct_kwargs, load_data, prune, prune_to_lifting  # noqa: E402
from torch import nn  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402

from topomodelx_attention.data import ComplexDataLoader  # noqa: E402
from topomodelx_attention.nn.cell import CellularTransformer  # noqa: E402

BATCH_SIZE = 32
CLOCKS = {"thread": time.thread_time, "wall": time.perf_counter}
KEYS_LABEL = {
    "model": "the keys the CT reads",
    "lifting": "the lifting's keys, neighbourhoods restricted to the CT's (the README's loop)",
    "all": "every key of the default lifting",
}


def training_epoch(model: nn.Module, items: list, loader_class: type, seed: int) -> Callable[[], None]:
    """One shuffled training epoch with plain ``torch.optim.AdamW`` (collation included)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)

    def run() -> None:
        model.train()
        for batch in loader_class(items, batch_size=BATCH_SIZE, shuffle=True, generator=generator):
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(batch), batch.y)
            loss.backward()
            optimizer.step()

    return run


def inference_epoch(model: nn.Module, items: list, loader_class: type) -> Callable[[], None]:
    """One pass in ``eval`` mode under ``torch.no_grad`` (collation included)."""

    def run() -> None:
        model.eval()
        with torch.no_grad():
            for batch in loader_class(items, batch_size=BATCH_SIZE):
                model(batch)

    return run


def collation_epoch(items: list, loader_class: type) -> Callable[[], None]:
    """One pass of the loader alone."""

    def run() -> None:
        for _ in loader_class(items, batch_size=BATCH_SIZE):
            pass

    return run


def prepared_epoch(model: nn.Module, items: list, part: str) -> Callable[[], None]:
    """One inference pass over batches collated beforehand: ``part`` of the model's time only.

    ``"prepare"``: the CT's per-batch :meth:`~CellularTransformer.prepare` alone (input checks,
    neighbourhood conversion, joined index and plan); ``"model"``: the forward on inputs already
    prepared (the CT's ``model(model.prepare(batch))`` without the ``prepare``; GPS's plain
    forward, which has nothing to prepare). Both in ``eval`` mode under ``torch.no_grad``.
    """
    batches = list(DataLoader(items, batch_size=BATCH_SIZE))
    if part == "model" and hasattr(model, "prepare"):
        model.eval()
        with torch.no_grad():
            batches = [model.prepare(batch) for batch in batches]

    def run() -> None:
        model.eval()
        with torch.no_grad():
            for batch in batches:
                model.prepare(batch) if part == "prepare" else model(batch)

    return run


def optimizer_epoch(model: nn.Module, items: list) -> Callable[[], None]:
    """The plain ``torch.optim.AdamW`` steps of one epoch alone (one per batch, fixed gradients)."""
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps = -(-len(items) // BATCH_SIZE)

    def run() -> None:
        for _ in range(steps):
            optimizer.step()

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, repeats=10, quick="4 repeats, 1 warm-up round", clocks=CLOCKS, clock="thread")
    parser.add_argument(
        "--keys",
        choices=("model", "lifting", "all"),
        default="model",
        help="model: the complexes keep the keys the CT reads (as the harness); lifting: every "
        "key of a lifting given neighborhoods=model.neighborhood_keys (the README's loop); "
        "all: every key of the default lifting",
    )
    parser.add_argument(
        "--before", metavar="DIR", help="also time the CT of the package copy in DIR (before / after)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.warmup = 4, 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    complexes, graphs, num_classes, edge_channels = load_data(args.pe_dim)
    in_channels = [complexes[0][f"x_{r}"].shape[1] for r in range(3)]
    ct = CellularTransformer(in_channels, **ct_kwargs(args, num_classes))
    if args.keys == "model":
        keep = {f"{k}_{r}" for k in ("x", "batch", "pe") for r in range(3)}
        keep |= {"y", "shape", "num_nodes"} | set(ct.neighborhood_keys)
        complexes = prune(complexes, keep)
    elif args.keys == "lifting":  # = CellCycleLifting(neighborhoods=ct.neighborhood_keys)
        complexes = prune_to_lifting(complexes, ct)
    gps = GPS(graphs[0].x.shape[1], edge_channels, args.pe_dim, args.hidden, num_classes, args.layers, args.heads)
    data = {"CT": (ct, complexes), "GPS": (gps, graphs)}
    if args.before:
        if CellularTransformerBefore is None:
            raise ValueError("--before must be given on the command line (it is imported first)")
        torch.manual_seed(0)  # the seed of the CT above: the same initial weights
        before = CellularTransformerBefore(in_channels, **ct_kwargs(args, num_classes))
        data["CT before"] = (before, complexes)
        with torch.no_grad():  # same model, same batch: same outputs
            batch = next(iter(DataLoader(complexes, batch_size=BATCH_SIZE)))
            ct.eval(), before.eval()
            difference = (ct(batch) - before(batch)).abs().max().item()

    cases: dict[str, Callable[[], None]] = {}
    for name, (model, items) in data.items():
        cases[f"train pyg {name}"] = training_epoch(model, items, DataLoader, seed=1)
        cases[f"infer pyg {name}"] = inference_epoch(model, items, DataLoader)
        cases[f"infer ours {name}"] = inference_epoch(model, items, ComplexDataLoader)
        if name != "CT before":  # the same complexes and loaders as "CT"
            cases[f"collate pyg {name}"] = collation_epoch(items, DataLoader)
            cases[f"collate ours {name}"] = collation_epoch(items, ComplexDataLoader)
        cases[f"adamw {name}"] = optimizer_epoch(copy.deepcopy(model), items)
        if name != "CT before":
            cases[f"model {name}"] = prepared_epoch(model, items, "model")
    cases["prepare CT"] = prepared_epoch(ct, complexes, "prepare")
    load = os.getloadavg()[0]
    best = interleaved_min(cases, args.repeats, args.warmup, CLOCKS[args.clock])
    load = max(load, os.getloadavg()[0])

    def row(label: str, case: str) -> list[str]:
        ct_ms, gps_ms = 1e3 * best[f"{case} CT"], 1e3 * best[f"{case} GPS"]
        return [label, f"{ct_ms:.1f}", f"{gps_ms:.1f}", f"**{ct_ms / gps_ms:.2f}×**"]

    def model_row(label: str, case: str, collate: str) -> list[str]:
        ct_ms = 1e3 * (best[f"{case} CT"] - best[f"{collate} CT"])
        gps_ms = 1e3 * (best[f"{case} GPS"] - best[f"{collate} GPS"])
        return [label, f"{ct_ms:.1f}", f"{gps_ms:.1f}", f"{ct_ms / gps_ms:.2f}×"]

    def before_rows() -> list[list[str]]:
        out = []
        for label, case in (
            ("training epoch, PyG `DataLoader`, plain AdamW", "train pyg"),
            ("inference, PyG `DataLoader`", "infer pyg"),
            ("inference, `ComplexDataLoader`", "infer ours"),
            ("plain AdamW steps alone", "adamw"),
        ):
            after, before = best[f"{case} CT"], best[f"{case} CT before"]
            gps_ms = best[f"{case} GPS"]
            out.append([
                label, f"{1e3 * before:.1f}", f"{1e3 * after:.1f}", f"{after / before:.2f}×",
                f"{before / gps_ms:.2f}×", f"**{after / gps_ms:.2f}×**",
            ])
        return out

    rows = [
        row("training epoch, PyG `DataLoader`, plain `torch.optim.AdamW`", "train pyg"),
        row("inference (`eval`, `no_grad`), PyG `DataLoader`", "infer pyg"),
        row("inference (`eval`, `no_grad`), `ComplexDataLoader`", "infer ours"),
        row("collation, PyG `DataLoader`", "collate pyg"),
        row("collation, `ComplexDataLoader`", "collate ours"),
        model_row("inference, model only (PyG `DataLoader` row − its collation)", "infer pyg", "collate pyg"),
        [
            "of it: the CT's per-batch `prepare` (GPS: nothing to prepare)",
            f"{1e3 * best['prepare CT']:.1f}", "0.0", "–",
        ],
        row("of it: the forward on prepared inputs", "model"),
        row("of the training epoch: the plain AdamW steps alone", "adamw"),
    ]
    sparse = sum(1 for value in complexes[0].values() if isinstance(value, torch.Tensor) and value.is_sparse)
    print(
        f"torch {torch.__version__}, CPU, {torch.get_num_threads()} thread(s), {args.clock} clock, "
        f"min of {args.repeats} interleaved rounds after {args.warmup}; 1-min load average up to "
        f"{load:.1f} on {os.cpu_count()} cores"
    )
    print_table(
        f"MUTAG ({len(complexes)} complexes, batch {BATCH_SIZE}), width {args.hidden}, {args.layers} "
        f"layers, {args.heads} heads; CT complexes with {KEYS_LABEL[args.keys]} "
        f"({sparse} sparse keys); ms per epoch",
        ["case", "CT ms", "GPS ms", "CT / GPS"],
        rows,
    )
    if args.before:
        print_table(
            f"CT before ({args.before}) / after (this checkout), same rounds; largest output "
            f"difference on one batch {difference:.1e}",
            ["case", "before ms", "after ms", "after / before", "before / GPS", "after / GPS"],
            before_rows(),
        )


if __name__ == "__main__":
    main()
