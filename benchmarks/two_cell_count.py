"""Triangle counting on GraphUniverse without learning: predict the number of 2-cells of a lifting.

The challenge scores triangle counting by the test MSE divided by the number of test triangles.
A cell model sees the 2-cells its lifting makes; this script scores the predictor "number of
2-cells" (no parameters, no training) on the test split of the protocol's families, per lifting:

* ``chordless3`` — every chordless cycle of at most 3 vertices (``CellCycleLifting(cycles=
  "chordless", max_cell_length=3)``, the lifting of the tuned study's triangle-counting rows): a
  chordless cycle of 3 vertices is a triangle and every triangle is one, so the count is exact
  and the score is 0 on every graph;
* ``basis10`` — networkx's cycle basis, cycles of at most 10 vertices (``CellCycleLifting(cycles=
  "basis", max_cell_length=10)``: the options of TopoBench's default lifting of cell models on
  graph data, ``transforms/liftings/graph2cell/cycle.yaml``): ``m - n + c`` cycles at most, not the
  triangles.

A model whose lifting is ``chordless3`` can score 0 by counting its 2-cells, so its triangle
score shows the lifting as much as the model.

Usage (the protocol's families, 1,000 graphs, generated once into the harness cache)::

    nice -n 19 python benchmarks/two_cell_count.py [--settings all] [--n-graphs 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LIFTINGS = {
    "chordless3": {"cycles": "chordless", "max_cell_length": 3},
    "basis10": {"cycles": "basis", "max_cell_length": 10},
}
"""The liftings scored: name -> ``CellCycleLifting`` options."""


def two_cell_scores(graphs: Sequence[Any], liftings: dict[str, dict[str, Any]] = LIFTINGS) -> dict[str, Any]:
    """Score "number of 2-cells" as a triangle count on ``graphs``.

    Parameters
    ----------
    graphs : sequence of torch_geometric.data.Data
        Graphs with ``x`` ``(n, d)`` and ``edge_index`` ``(2, 2m)`` (both directions).
    liftings : dict
        Name -> ``CellCycleLifting`` options.

    Returns
    -------
    dict
        ``triangles`` (total), and per lifting name ``{"mse", "mse_by_total_triangles",
        "exact"}`` (exact: graphs whose 2-cell count equals their triangle count).
    """
    import numpy as np

    from topomodelx_attention.datasets.graphuniverse import count_triangles
    from topomodelx_attention.transforms import CellCycleLifting

    triangles = np.array([count_triangles(g.edge_index, int(g.num_nodes)) for g in graphs], dtype=float)
    out: dict[str, Any] = {"graphs": len(graphs), "triangles": int(triangles.sum())}
    for name, options in liftings.items():
        lifting = CellCycleLifting(**options, self_loops="drop")
        cells = np.array([int(lifting(g).incidence_2.shape[1]) for g in graphs], dtype=float)
        mse = float(np.mean((cells - triangles) ** 2))
        out[name] = {
            "mse": mse,
            "mse_by_total_triangles": mse / triangles.sum() if triangles.sum() else None,
            "exact": int(np.sum(cells == triangles)),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print (and with ``--json`` write) the scores per setting on the protocol's test split."""
    from topomodelx_attention import files
    from topomodelx_attention.datasets import graphuniverse as gu
    from topomodelx_attention.harness.graphuniverse_grid import PROTOCOL, SETTINGS, parse_setting

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", default=["all"], help="setting slugs or 'all'")
    parser.add_argument("--n-graphs", type=int, default=PROTOCOL["n_graphs"])
    parser.add_argument("--n-nodes-range", type=int, nargs=2, default=None, help="smaller graphs (a quick check)")
    parser.add_argument("--cache-dir", default=None, help="harness cache of the families")
    parser.add_argument("--json", type=Path, default=None, help="also write the scores to this file")
    args = parser.parse_args(argv)
    settings = list(SETTINGS) if args.settings == ["all"] else args.settings
    results = {}
    print("| setting | test graphs | test triangles | " + " | ".join(f"{n}: MSE / triangles (exact graphs)" for n in LIFTINGS) + " |")
    print("|---|---:|---:|" + "---:|" * len(LIFTINGS))
    for slug in settings:
        levels = parse_setting(slug)
        family = {"n_nodes_range": list(args.n_nodes_range)} if args.n_nodes_range else None
        parameters = gu.generation_parameters(**levels, n_graphs=args.n_graphs, family=family)
        graphs = gu.load_family(parameters, args.cache_dir)
        test = [graphs[i] for i in gu.challenge_split(len(graphs))[2]]
        results[slug] = scores = two_cell_scores(test)
        cells = " | ".join(
            f"{scores[n]['mse_by_total_triangles']:.4g} ({scores[n]['exact']}/{scores['graphs']})" for n in LIFTINGS
        )
        print(f"| {slug} | {scores['graphs']} | {scores['triangles']} | {cells} |", flush=True)
    if args.json:
        files.write_text(args.json, json.dumps({"n_graphs": args.n_graphs, "liftings": LIFTINGS, "settings": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
