"""A complex prepared once (``PrepareStructure``) against one prepared at every step.

A transductive node task trains the same complex for hundreds of epochs. This script times, in
one run and interleaved, the steps of the Cellular Transformer on one generated complex (the
``side × side`` grid of ``sampled_complex.py``: squares as 2-cells, a minesweeper-like task;
``side`` 100 gives minesweeper's 10,000 vertices) in two forms:

* **every step** (the named baseline): ``model(data)``, which prepares the structure (the
  neighbourhoods converted and checked, the fused edge lists joined, the CPU plan laid out) at
  every call;
* **prepared once**: ``model(prepared)`` with ``prepared = model.structure_transform()(data)``,
  made once before the timing.

Cases: a training step (forward on every vertex, cross-entropy on the training mask, backward,
``torch.optim.AdamW`` step) and an evaluation pass (``eval``, ``no_grad``). Time per step: the
minimum over ``--repeats`` interleaved rounds after ``--warmup`` (``_measure.interleaved_min``),
one thread, CPU time of the calling thread (``--clock thread``) or wall time. The outputs of
both forms are compared first (they must be equal). ``--out`` writes the table as a results file
(through the package's safe write path).

Usage::

    python benchmarks/prepared_structure.py --side 100
    python benchmarks/prepared_structure.py --side 20 --repeats 2 --warmup 1   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
from _measure import interleaved_min, print_table
from sampled_complex import grid_complex
from torch import nn

from topomodelx_attention.files import write_text
from topomodelx_attention.nn.cell import CellularTransformer

CLOCKS = {"thread": time.thread_time, "wall": time.perf_counter}
HEADER = ["case (one step)", "every step ms", "prepared once ms", "every step / prepared once"]


def training_step(model: nn.Module, data, mask: torch.Tensor):
    """One AdamW step on the training vertices (a closure over a fresh optimiser)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def run() -> None:
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(data)[0][mask], data.y[mask])
        loss.backward()
        optimizer.step()

    return run


def evaluation(model: nn.Module, data):
    """One forward pass in ``eval`` mode under ``no_grad``."""

    def run() -> None:
        model.eval()
        with torch.no_grad():
            model(data)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=100, help="grid side (side² vertices; 100: minesweeper's size)")
    for name, default in {"hidden": 32, "layers": 2, "heads": 4, "repeats": 10, "warmup": 2, "threads": 1}.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread")
    parser.add_argument("--out", type=Path, help="write the table as a results JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data, masks = grid_complex(args.side)
    kwargs = dict(n_layers=args.layers, heads=args.heads, kind="sparse", outputs=(0,))
    torch.manual_seed(0)
    every = CellularTransformer([10, 10, 10], args.hidden, 2, **kwargs)
    torch.manual_seed(0)
    once = CellularTransformer([10, 10, 10], args.hidden, 2, **kwargs)  # same weights, own optimiser
    prepared = once.structure_transform()(data)
    with torch.no_grad():
        every.eval(), once.eval()
        difference = (every(data)[0] - once(prepared)[0]).abs().max().item()
    if difference != 0.0:
        raise SystemExit(f"the prepared complex changes the outputs (max difference {difference})")
    calls = {
        "train every": training_step(every, data, masks["train"]),
        "train once": training_step(once, prepared, masks["train"]),
        "eval every": evaluation(every, data),
        "eval once": evaluation(once, prepared),
    }
    seconds = interleaved_min(calls, args.repeats, args.warmup, CLOCKS[args.clock])
    rows = []
    for case, label in (("train", "training step (forward, backward, AdamW)"), ("eval", "evaluation (eval, no_grad)")):
        a, b = seconds[f"{case} every"], seconds[f"{case} once"]
        rows.append([label, f"{a * 1e3:.1f}", f"{b * 1e3:.1f}", f"**{a / b:.2f}×**"])
    counts = data.cell_counts()
    title = f"One complex prepared once: {counts[0]:,} vertices, {counts[1]:,} edges, {counts[2]:,} squares"
    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.clock} clock, min of {args.repeats} "
          f"interleaved rounds after {args.warmup}; 1-min load average {load:.1f}")
    print_table(title, HEADER, rows)
    if args.out is not None:
        record = {
            "title": title,
            "script": "benchmarks/prepared_structure.py",
            "command": "python benchmarks/prepared_structure.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "baseline": "the same model preparing the structure at every call (model(data))",
            "machine": f"the project's shared 2-core CPU machine, torch {torch.__version__.split('+')[0]} (CPU); "
            f"{args.threads} thread; {args.clock} clock, minimum over {args.repeats} interleaved rounds; "
            f"1-minute load average {load:.1f}",
            "data": f"the generated {args.side} × {args.side} grid complex of sampled_complex.py (squares as 2-cells); "
            f"CT pairwise sparse, width {args.hidden}, {args.layers} layers, {args.heads} heads, vertex outputs",
            "columns": HEADER,
            "rows": rows,
            "notes": ["Both forms give the same outputs (checked before the timing, exactly)."],
        }
        write_text(args.out, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
