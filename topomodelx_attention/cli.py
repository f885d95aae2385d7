"""Command line: ``topomodelx-attention <command>``.

Commands
--------
lift
    Lift a graph data set to complexes and print per-rank cell counts and the time taken.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

__all__ = ["main"]

LIFTINGS = ("cell_cycle", "clique")


def _lifting(args: argparse.Namespace):
    from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting

    if args.lifting == "cell_cycle":
        return CellCycleLifting(max_cell_length=args.max_cell_length, cycles=args.cycles)
    return SimplicialCliqueLifting(complex_dim=args.complex_dim)


def _cmd_lift(args: argparse.Namespace) -> int:
    from topomodelx_attention.data.datasets import load_tu_dataset

    dataset = load_tu_dataset(args.dataset, root=args.root)
    lifting = _lifting(args)
    graphs = [dataset[i] for i in range(len(dataset))]
    start = time.perf_counter()
    complexes = lifting.lift_many(graphs)
    elapsed = time.perf_counter() - start
    counts = torch.cat([c.shape for c in complexes], dim=0)  # (num_complexes, R + 1)
    print(f"dataset {args.dataset}: {len(complexes)} graphs, lifting {lifting!r}")
    print()
    print("| rank | cells (total) | mean per complex | max per complex | complexes with none |")
    print("|---:|---:|---:|---:|---:|")
    for rank in range(counts.size(1)):
        col = counts[:, rank]
        print(
            f"| {rank} | {int(col.sum())} | {col.float().mean():.2f} | {int(col.max())} "
            f"| {int((col == 0).sum())} |"
        )
    print()
    print(f"lifted in {elapsed:.3f} s ({1e3 * elapsed / max(len(complexes), 1):.3f} ms per graph)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``topomodelx-attention`` command."""
    parser = argparse.ArgumentParser(
        prog="topomodelx-attention",
        description="Transformers on cell, simplicial and combinatorial complexes.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    lift = sub.add_parser("lift", help="lift a graph data set and print cell counts per rank")
    lift.add_argument("--dataset", default="MUTAG", help="TU data set name (MUTAG is bundled)")
    lift.add_argument("--lifting", default="cell_cycle", choices=LIFTINGS)
    lift.add_argument("--max-cell-length", type=int, default=None, help="cell_cycle: longest ring")
    lift.add_argument("--cycles", default="basis", choices=("basis", "chordless"))
    lift.add_argument("--complex-dim", type=int, default=2, help="clique: highest simplex rank")
    lift.add_argument("--root", default=None, help="data folder (default: ~/.cache/...)")
    lift.set_defaults(func=_cmd_lift)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
