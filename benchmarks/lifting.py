"""Lifting benchmark: ZINC-12k molecules → cell complexes with all neighbourhoods.

Compares, in one run and on the same molecules:

* **ours, batched** — ``CellCycleLifting().lift_many(graphs)``: chunks of graphs lifted as one
  disjoint union (one NumPy pass), split into one ``ComplexData`` per molecule;
* **ours, per graph** — ``CellCycleLifting()(graph)`` for each graph (the PyG transform call);
  both produce ``ComplexData`` with every neighbourhood of every rank (cycle-basis 2-cells,
  NumPy COO neighbourhood algebra, features lifted);
* **baseline: TopoNetX path** — the same cell complex built as a ``toponetx.CellComplex``
  (vertices, edges, cycle-basis cells) and the same matrices obtained through TopoNetX's
  methods (``incidence_matrix``, ``adjacency_matrix``, ``coadjacency_matrix``,
  ``up/down/hodge_laplacian_matrix``) converted to torch sparse tensors.

SMILES parsing (RDKit) is done once beforehand and not timed. Usage::

    python benchmarks/lifting.py                      # all 12,000 molecules
    python benchmarks/lifting.py --limit 1000         # quick run
    python benchmarks/lifting.py --baseline-limit 2000  # extrapolate the slow baseline
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import time
from pathlib import Path

import networkx as nx
import toponetx as tnx
import torch

from topomodelx_attention.data.scipy_sparse import scipy_to_torch
from topomodelx_attention.datasets.zinc import ZINC_ATOM_TYPES, smiles_to_graph
from topomodelx_attention.transforms import CellCycleLifting

DEFAULT_ZINC = Path(__file__).resolve().parents[2] / "shared" / "data" / "zinc12k"


def load_zinc_graphs(zinc_dir: Path, limit: int | None = None):
    with open(zinc_dir / "smiles_score.csv") as handle:
        rows = list(csv.DictReader(handle))
    if limit is not None:
        rows = rows[:limit]
    return [smiles_to_graph(r["SMILES"], y=torch.tensor([float(r["score"])])) for r in rows]


def toponetx_path(graph) -> dict[str, torch.Tensor]:
    """Baseline: the same complex and matrices through TopoNetX."""
    nx_graph = nx.Graph()
    nx_graph.add_nodes_from(range(graph.num_nodes))
    nx_graph.add_edges_from(graph.edge_index.t().tolist())
    cc = tnx.CellComplex()
    for v in range(graph.num_nodes):
        cc.add_node(v)
    for u, v in nx_graph.edges:
        cc.add_edge(u, v)
    for cycle in nx.cycle_basis(nx_graph):
        cc.add_cell(cycle, rank=2)
    out = {}
    max_rank = 2
    for rank in range(max_rank + 1):
        if rank > 0:
            signed = cc.incidence_matrix(rank, signed=True)
            out[f"signed_incidence_{rank}"] = scipy_to_torch(signed)
            out[f"incidence_{rank}"] = scipy_to_torch(abs(signed))
        for name, method in [
            ("adjacency", "adjacency_matrix"),
            ("coadjacency", "coadjacency_matrix"),
            ("up_laplacian", "up_laplacian_matrix"),
            ("down_laplacian", "down_laplacian_matrix"),
            ("hodge_laplacian", "hodge_laplacian_matrix"),
        ]:
            with contextlib.suppress(ValueError):  # TopoNetX raises for ranks without one
                out[f"{name}_{rank}"] = scipy_to_torch(getattr(cc, method)(rank))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zinc-dir", type=Path, default=DEFAULT_ZINC)
    parser.add_argument("--limit", type=int, default=None, help="molecules for ours (default all)")
    parser.add_argument(
        "--baseline-limit", type=int, default=None,
        help="molecules for the TopoNetX baseline; its time is extrapolated to --limit",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    graphs = load_zinc_graphs(args.zinc_dir, args.limit)
    parse_time = time.perf_counter() - start
    lifting = CellCycleLifting(categorical_cardinalities=[len(ZINC_ATOM_TYPES)])

    start = time.perf_counter()
    complexes = lifting.lift_many(graphs)
    ours = time.perf_counter() - start
    start = time.perf_counter()
    for g in graphs:
        lifting(g)
    per_graph = time.perf_counter() - start

    subset = graphs if args.baseline_limit is None else graphs[: args.baseline_limit]
    start = time.perf_counter()
    for g in subset:
        toponetx_path(g)
    baseline_measured = time.perf_counter() - start
    baseline = baseline_measured * len(graphs) / max(len(subset), 1)

    cells = torch.cat([c.shape for c in complexes]).sum(0).tolist()
    print(f"ZINC-12k: {len(graphs)} molecules ({parse_time:.1f} s RDKit parsing, not timed), "
          f"cells per rank {cells}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print()
    print("| path | molecules timed | seconds (all molecules) | ms / molecule | ratio vs ours |")
    print("|---|---:|---:|---:|---:|")
    print(f"| ours, batched: CellCycleLifting.lift_many | {len(graphs)} | {ours:.2f} | "
          f"{1e3 * ours / len(graphs):.3f} | 1.0× |")
    print(f"| ours, per graph: CellCycleLifting()(g) | {len(graphs)} | {per_graph:.2f} | "
          f"{1e3 * per_graph / len(graphs):.3f} | {per_graph / ours:.1f}× slower |")
    note = "" if len(subset) == len(graphs) else " (extrapolated)"
    print(f"| baseline: TopoNetX CellComplex + its matrix methods | {len(subset)} | "
          f"{baseline:.2f}{note} | {1e3 * baseline_measured / max(len(subset), 1):.3f} | "
          f"{baseline / ours:.1f}× slower |")


if __name__ == "__main__":
    main()
