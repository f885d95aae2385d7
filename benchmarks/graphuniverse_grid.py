"""The GraphUniverse challenge grid (TopoBench's TDL Challenge 2026) with this package's harness.

The grid itself is :mod:`topomodelx_attention.harness.graphuniverse_grid` (its docstring holds
the protocol); this script runs it from the checkout: results in
``benchmarks/results/graphuniverse/<model>/results.json``, run outputs, locks and package copies
in ``outputs/graphuniverse_grid`` (``--results-dir`` / ``--work-dir`` to change them).
``--help`` lists the options.

Examples
--------
Measure the epoch time (one epoch, one setting, no OOD)::

    python benchmarks/graphuniverse_grid.py --measure --models cellular_transformer

The CT grid, seed 42 first, two single-thread workers, at the lowest priority::

    nohup nice -n 19 python benchmarks/graphuniverse_grid.py --models cellular_transformer \\
        --seeds 42 --workers 2 > outputs/graphuniverse_grid/ct.log 2>&1 &

A variant's complete grid of one task becomes the entry (its rows and that task's overrides replace
those of ``results.json``; the replaced rows are kept in ``results_replaced_by_<variant>.json``)::

    python benchmarks/graphuniverse_grid.py --models cellular_transformer \\
        --tasks community_detection --promote cd-cardinality-global0-rrwp8

Configuration selection on a small subset (validation only, no OOD, its own file)::

    python benchmarks/graphuniverse_grid.py --models cellular_transformer --n-graphs 200 \\
        --settings h_mid_d_hi_pl_lo --variant lr3e-3 --set optimizer.lr=0.003 --no-ood

One model's results in the challenge notebook's exact layout::

    python benchmarks/graphuniverse_grid.py --models cellular_transformer \\
        --model-config cell/cellular_transformer --export-challenge ct.json
"""

from __future__ import annotations

import sys
from pathlib import Path

from topomodelx_attention.harness.graphuniverse_grid import cli

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    sys.exit(cli(results=ROOT / "benchmarks" / "results" / "graphuniverse", work=ROOT / "outputs" / "graphuniverse_grid"))
