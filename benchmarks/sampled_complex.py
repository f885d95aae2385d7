"""Sampled sub-complexes at scale: a CT node task on one generated complex of ~10⁶ cells.

The complex: an ``s × s`` grid graph lifted to a cell complex with its unit squares as 2-cells
(``s²`` vertices, ``2s(s - 1)`` edges, ``(s - 1)²`` squares: about ``4s²`` cells, ``s`` from
``--cells``), the neighbourhoods the Cellular Transformer reads (its default tensor diagram), a
minesweeper-like task (a vertex is a mine with probability 0.2; its features are the one-hot
count of mines among its up to 8 grid neighbours, unknown (zero) for 10 % of the vertices;
edges and squares carry the mean of their vertices' features), one random 50/25/25 split.
Model: the CT (width ``--hidden``, ``--layers`` layers, 4 heads, sparse attention, node
outputs), AdamW.

Modes, each in a fresh process under an address-space limit of ``--memory-gib`` (``RLIMIT_AS``:
a mode that does not fit stops with ``MemoryError``, reported as "out of memory", instead of
waking the kernel's OOM killer on a shared machine):

* ``sampled``: one training epoch over the training vertices in batches of ``--batch-size``
  (:class:`~topomodelx_attention.data.SubComplexSampler`, ``hops`` = layers, no fan-out cap),
  then the evaluation of every vertex in chunks of the same size (``torch.no_grad``);
* ``full``: one full-batch training step (one epoch), then the full-batch evaluation;
* ``ddp-1``, ``ddp-2`` (``--ddp``): Lightning's ``trainer.fit`` of one sampled epoch with the
  harness's task module on 1 process, and on 2 CPU processes (``strategy=ddp_spawn``, gloo),
  ``--threads`` threads each: training targets per second of the epoch (Lightning's own timer
  in the processes; process start excluded).

Peak memory is the process's peak resident set (``ru_maxrss``: the complex, the sampler's
compressed rows, the model and the step together; the largest of the processes for ``ddp-2``).
The table goes to ``--output`` through the package's safe write path.

Usage::

    nice -n 19 python benchmarks/sampled_complex.py --cells 100000
    python benchmarks/sampled_complex.py --cells 1000000 --memory-gib 16 --ddp
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import numpy as np
import scipy.sparse as sp
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topomodelx_attention.files import write_text  # noqa: E402

MODES = ("sampled", "full", "ddp-1", "ddp-2")


# ----------------------------------------------------------------------------------------------
# the complex
# ----------------------------------------------------------------------------------------------
def grid_complex(side: int, seed: int = 0):
    """The ``side × side`` grid with its squares as 2-cells, features, labels and split masks.

    Returns
    -------
    ComplexData
        With ``x_0`` of shape ``(side², 10)``, ``x_1``, ``x_2`` (means of their vertices),
        ``y`` (mines) and the CT's neighbourhoods.
    dict of str to torch.Tensor
        ``{"train", "val", "test"}`` vertex masks, bool of shape ``(side²,)``.
    """
    from topomodelx_attention.data import ComplexData
    from topomodelx_attention.nn.cell import CellularTransformer

    rng = np.random.default_rng(seed)
    n = side * side
    vid = np.arange(n).reshape(side, side)
    horizontal = np.stack([vid[:, :-1].ravel(), vid[:, 1:].ravel()], 1)
    vertical = np.stack([vid[:-1, :].ravel(), vid[1:, :].ravel()], 1)
    edges = np.concatenate([horizontal, vertical])  # (n_1, 2), tail < head
    n_1 = edges.shape[0]
    b1 = sp.coo_matrix(
        (np.tile([-1.0, 1.0], n_1), (edges.ravel(), np.repeat(np.arange(n_1), 2))), shape=(n, n_1)
    )
    h_id = np.arange(horizontal.shape[0]).reshape(side, side - 1)
    v_id = horizontal.shape[0] + np.arange(vertical.shape[0]).reshape(side - 1, side)
    # square (i, j): bottom h(i, j) +, right v(i, j+1) +, top h(i+1, j) -, left v(i, j) -
    sides = np.stack([h_id[:-1, :].ravel(), v_id[:, 1:].ravel(), h_id[1:, :].ravel(), v_id[:, :-1].ravel()], 1)
    n_2 = sides.shape[0]
    b2 = sp.coo_matrix(
        (np.tile([1.0, 1.0, -1.0, -1.0], n_2), (sides.ravel(), np.repeat(np.arange(n_2), 4))), shape=(n_1, n_2)
    )
    mines = rng.random(n) < 0.2
    grid = np.pad(mines.reshape(side, side).astype(np.int64), 1)
    count = sum(
        grid[1 + di : 1 + di + side, 1 + dj : 1 + dj + side]
        for di in (-1, 0, 1) for dj in (-1, 0, 1) if (di, dj) != (0, 0)
    ).ravel()
    x_0 = np.zeros((n, 10), dtype=np.float32)
    x_0[np.arange(n), count] = 1.0
    x_0[rng.random(n) < 0.1] = 0.0
    x_0[:, 9] = (x_0.sum(1) == 0)  # the "unknown" flag
    x_1 = (x_0[edges[:, 0]] + x_0[edges[:, 1]]) / 2
    corners = np.stack([vid[:-1, :-1].ravel(), vid[:-1, 1:].ravel(), vid[1:, :-1].ravel(), vid[1:, 1:].ravel()], 1)
    x_2 = x_0[corners].mean(1)
    keys = CellularTransformer([10, 10, 10], 8, 2, n_layers=1, heads=1).neighborhood_keys
    data = ComplexData.from_boundaries(
        [b1, b2], [n, n_1, n_2], features={0: x_0, 1: x_1, 2: x_2}, neighborhoods=keys,
        y=torch.from_numpy(mines.astype(np.int64)),
    )
    order = rng.permutation(n)
    masks = {}
    for part, (lo, hi) in {"train": (0, n // 2), "val": (n // 2, 3 * n // 4), "test": (3 * n // 4, n)}.items():
        mask = torch.zeros(n, dtype=torch.bool)
        mask[torch.from_numpy(order[lo:hi])] = True
        masks[part] = mask
    return data, masks


def _model(args: argparse.Namespace):
    from topomodelx_attention.nn.cell import CellularTransformer

    torch.manual_seed(0)
    return CellularTransformer(
        [10, 10, 10], args.hidden, 2, n_layers=args.layers, heads=4, kind="sparse", outputs=(0,)
    )


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# ----------------------------------------------------------------------------------------------
# one mode, in this process
# ----------------------------------------------------------------------------------------------
def run_sampled(args, data, masks) -> dict:
    from torch.nn import functional as F

    from topomodelx_attention.data import SubComplexSampler

    model = _model(args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    sampler = SubComplexSampler(data, hops=args.layers)
    setup = time.perf_counter() - start
    loader = sampler.loader(torch.nonzero(masks["train"]).view(-1), batch_size=args.batch_size, shuffle=True)
    largest = 0
    start = time.perf_counter()
    for sub in loader:
        largest = max(largest, sum(sub.cell_counts()))
        out = model(sub)[0][sub.node_mask]
        loss = F.cross_entropy(out, sub.y[sub.node_mask])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    train = time.perf_counter() - start
    start = time.perf_counter()
    model.eval()
    with torch.no_grad():
        for sub in sampler.loader(torch.arange(data.num_cells(0)), batch_size=args.batch_size):
            model(sub)[0][sub.target_index]
    evaluate = time.perf_counter() - start
    return {"train_s": train, "eval_s": evaluate, "setup_s": setup, "steps": len(loader), "largest_batch_cells": largest}


def run_full(args, data, masks) -> dict:
    from torch.nn import functional as F

    model = _model(args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    out = model(data)[0][masks["train"]]
    loss = F.cross_entropy(out, data.y[masks["train"]])
    loss.backward()
    optimizer.step()
    train = time.perf_counter() - start
    model.eval()
    start = time.perf_counter()
    with torch.no_grad():
        model(data)
    return {"train_s": train, "eval_s": time.perf_counter() - start, "steps": 1, "largest_batch_cells": sum(data.cell_counts())}


class EpochTimer(L.Callback):
    """Lightning callback: ``threads`` torch threads per process; logs the epoch's wall time and peak memory."""

    def __init__(self, threads: int) -> None:
        self.threads, self.start = threads, 0.0

    def on_fit_start(self, trainer, pl_module) -> None:
        torch.set_num_threads(self.threads)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        pl_module.log("epoch_seconds", time.perf_counter() - self.start, reduce_fx="max", sync_dist=True)
        pl_module.log("peak_mib", _peak_mib(), reduce_fx="max", sync_dist=True)


def run_ddp(args, data, masks, processes: int) -> dict:
    import warnings

    from topomodelx_attention.data import SubComplexSampler
    from topomodelx_attention.harness.prepare import DatasetInfo
    from topomodelx_attention.harness.registry import NodeOutputs
    from topomodelx_attention.harness.task_module import GraphTaskModule

    info = DatasetInfo(
        name="grid", task="classification", out_channels=2, in_channels=[10, 10, 10],
        categorical=[None, None, None], pe_channels=None, metric="accuracy", task_level="transductive",
    )
    module = GraphTaskModule(NodeOutputs(_model(args)), info, {"lr": 1e-3, "scheduler": "constant"})
    sampler = SubComplexSampler(data, hops=args.layers)
    targets = torch.nonzero(masks["train"]).view(-1)
    loader = sampler.loader(targets, batch_size=args.batch_size, shuffle=True)
    strategy = "auto"
    if processes > 1:
        from lightning.pytorch.strategies import DDPStrategy

        strategy = DDPStrategy(start_method="spawn", process_group_backend="gloo", find_unused_parameters=True)
    trainer = L.Trainer(
        accelerator="cpu", devices=processes, strategy=strategy, max_epochs=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0, callbacks=[EpochTimer(args.threads)],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, loader)
    seconds = float(trainer.callback_metrics["epoch_seconds"])
    return {
        "train_s": seconds, "steps": math.ceil(len(loader) / processes),
        "targets_per_s": targets.numel() / seconds, "peak_mib": float(trainer.callback_metrics["peak_mib"]),
    }


def worker(args: argparse.Namespace) -> None:
    """Run one mode in this process and print its JSON line."""
    limit = int(args.memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:
        data, masks = grid_complex(args.side)
        built = time.perf_counter() - start
        if args.worker == "sampled":
            row = run_sampled(args, data, masks)
        elif args.worker == "full":
            row = run_full(args, data, masks)
        else:
            row = run_ddp(args, data, masks, int(args.worker.split("-")[1]))
        row["build_s"] = built
        row.setdefault("peak_mib", _peak_mib())
    except MemoryError:
        row = {"failure": f"out of memory (> {args.memory_gib:g} GiB)"}
    print(json.dumps(row), flush=True)


# ----------------------------------------------------------------------------------------------
# the table
# ----------------------------------------------------------------------------------------------
def table(args: argparse.Namespace, cells: list[int], rows: dict[str, dict]) -> str:
    lines = [
        f"Generated grid complex: {cells[0]:,} vertices, {cells[1]:,} edges, {cells[2]:,} squares "
        f"({sum(cells):,} cells); CT width {args.hidden}, {args.layers} layers, 4 heads, sparse attention; "
        f"batches of {args.batch_size} target vertices (hops = {args.layers}, no fan-out cap); "
        f"{args.threads} thread(s) per process; address-space limit {args.memory_gib:g} GiB per process.",
        "",
        "| mode | s / epoch (train) | s (evaluation) | steps | largest batch (cells) | peak memory (MiB) | train targets / s |",
        "|---|---|---|---|---|---|---|",
    ]
    n_train = cells[0] // 2
    for mode, row in rows.items():
        if "failure" in row:
            lines.append(f"| {mode} | {row['failure']} | | | | | |")
            continue
        evaluation = f"{row['eval_s']:.1f}" if "eval_s" in row else "—"
        largest = f"{row['largest_batch_cells']:,}" if "largest_batch_cells" in row else "—"
        rate = row.get("targets_per_s", n_train / row["train_s"])
        lines.append(
            f"| {mode} | {row['train_s']:.1f} | {evaluation} | {row['steps']} | {largest} | "
            f"{row['peak_mib']:,.0f} | {rate:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=float, default=1e6, help="about this many cells (default 10^6)")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4096, help="target vertices per batch")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--memory-gib", type=float, default=12.0, help="address-space limit of every process")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["sampled", "full"])
    parser.add_argument("--ddp", action="store_true", help="also ddp-1 and ddp-2")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "sampled_complex")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--side", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    side = args.side or max(round(math.sqrt(args.cells) / 2), 2)
    if args.worker:
        args.side = side
        worker(args)
        return 0
    modes = list(dict.fromkeys([*args.modes, *(["ddp-1", "ddp-2"] if args.ddp else [])]))
    cells = [side * side, 2 * side * (side - 1), (side - 1) ** 2]
    rows = {}
    for mode in modes:
        command = [
            sys.executable, __file__, "--worker", mode, "--side", str(side), "--hidden", str(args.hidden),
            "--layers", str(args.layers), "--batch-size", str(args.batch_size), "--threads", str(args.threads),
            "--memory-gib", str(args.memory_gib),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            rows[mode] = {"failure": f"failed (exit {done.returncode}: {tail[:120]})"}
        else:
            rows[mode] = json.loads(lines[-1])
        print(mode, rows[mode], flush=True)
    text = table(args, cells, rows)
    print(text)
    name = f"cells_{sum(cells)}_batch_{args.batch_size}.md"
    write_text(args.output / name, text, root=args.output.parent)
    print(f"written: {args.output / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
