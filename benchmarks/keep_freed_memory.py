"""What the harness's ``trainer.keep_freed_memory`` buys: CT training steps, glibc told or not.

``harness.memory.keep_freed_memory`` makes glibc keep freed memory in the process (mmap
threshold 2 GiB, trimming off) instead of unmapping every large block on ``free`` and faulting
it in again at the next step. The setting is process-wide and cannot be undone, so every round
runs two fresh Python processes, alternated: one with glibc's defaults (the named baseline), one
that calls ``keep_freed_memory()`` first. Each process builds the same seeded model and batch and
reports the minimum thread time of ``--steps`` training steps (forward, backward, ``zero_grad``)
after ``--warmup``, the minor page faults per step (first writes to freshly mapped pages: a count,
unlike the time, not disturbed by the machine's load) and its peak resident memory. Cases:

* ``grid``: the GraphUniverse grid's CT on one batch of 16 generated graphs of 50–300 vertices
  (``benchmarks/rrwp_cost.py``: width 64, 4 layers, 4 heads, cardinality term, RRWP bias of 8
  steps, attention dropout 0.1), about 1.5·10⁶ joined sparse entries per layer;
* ``mutag``: the user-loop CT (``benchmarks/ct_step.py``: width 32, 2 layers, 4 heads) on one
  MUTAG batch of 32 complexes.

The table gives, per case, the median over rounds of each side and of the per-round ratio.

Usage::

    python benchmarks/keep_freed_memory.py
    python benchmarks/keep_freed_memory.py --cases grid --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
CASES = ("grid", "mutag")


def _grid_step():
    import rrwp_cost

    options = argparse.Namespace(hidden=64, layers=4, heads=4, attention_dropout=0.1)
    batch = rrwp_cost.graphuniverse_like(16)
    model = rrwp_cost.build(rrwp_cost.CellularTransformer, options, 8)

    def step() -> None:
        torch.manual_seed(3)
        model(batch)[0].sum().backward()
        model.zero_grad(set_to_none=True)

    return step


def _mutag_step():
    from ct_step import ct_kwargs, load_data, prune_to_lifting
    from torch_geometric.loader import DataLoader

    from topomodelx_attention.nn.cell import CellularTransformer

    complexes, _, num_classes, _ = load_data(8)
    options = argparse.Namespace(hidden=32, layers=2, heads=4, pe_dim=8)
    widths = [complexes[0][f"x_{r}"].shape[1] for r in range(3)]
    torch.manual_seed(0)
    model = CellularTransformer(widths, **ct_kwargs(options, num_classes)).train()
    batch = next(iter(DataLoader(prune_to_lifting(complexes, model), batch_size=32)))

    def step() -> None:
        torch.manual_seed(3)
        torch.nn.functional.cross_entropy(model(batch), batch.y).backward()
        model.zero_grad(set_to_none=True)

    return step


def child(case: str, keep: bool, steps: int, warmup: int) -> None:
    """One process: apply the setting or not, then time ``steps`` steps; print one JSON line."""
    applied = False
    if keep:
        from topomodelx_attention.harness.memory import keep_freed_memory

        applied = keep_freed_memory()
        if not applied:
            raise SystemExit("keep_freed_memory() changed nothing here (no glibc, or MALLOC_* set)")
    from _measure import page_faults

    torch.set_num_threads(1)
    step = {"grid": _grid_step, "mutag": _mutag_step}[case]()
    for _ in range(warmup):
        step()
    best, faults = float("inf"), page_faults()
    for _ in range(steps):
        start = time.thread_time()
        step()
        best = min(best, time.thread_time() - start)
    faults = (page_faults() - faults) / steps  # first touches of freshly mapped pages
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"ms": best * 1e3, "faults": faults, "peak_mib": peak, "applied": applied}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--rounds", type=int, default=3, help="alternated pairs of processes")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per process (minimum kept)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--child", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(ROOT))  # this checkout's package
    if args.child:
        case, mode = args.child
        child(case, mode == "keep", args.steps, args.warmup)
        return
    from _measure import print_table

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    rows = []
    for case in args.cases:
        runs: dict[str, list[dict]] = {"default": [], "keep": []}
        for _ in range(args.rounds):
            for mode in ("default", "keep"):
                command = [sys.executable, __file__, "--child", case, mode,
                           "--steps", str(args.steps), "--warmup", str(args.warmup)]
                out = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
        ratios = [k["ms"] / d["ms"] for d, k in zip(runs["default"], runs["keep"])]
        rows.append([
            case,
            f"{statistics.median(r['ms'] for r in runs['default']):.1f}",
            f"{statistics.median(r['ms'] for r in runs['keep']):.1f}",
            f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})",
            f"{statistics.median(r['faults'] for r in runs['default']):,.0f} / "
            f"{statistics.median(r['faults'] for r in runs['keep']):,.0f}",
            f"{max(r['peak_mib'] for r in runs['default']):.0f} / {max(r['peak_mib'] for r in runs['keep']):.0f}",
        ])
    load = os.getloadavg()[0]
    print_table(
        f"CT training step, glibc defaults vs keep_freed_memory(): {args.rounds} alternated pairs of "
        f"fresh processes, min of {args.steps} steps each, thread time, 1 thread, load {load:.1f}",
        ["case", "default ms", "kept ms", "kept / default (min–max)", "page faults per step default / kept",
         "peak MiB default / kept"],
        rows,
    )


if __name__ == "__main__":
    main()
