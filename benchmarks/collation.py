"""Collation benchmark: batching lifted complexes, PyG's generic path vs ours, and its share of a step.

Compares, in one run and on the same batches of 32 complexes:

* **baseline: PyG generic** — PyG's own ``Batch.from_data_list``
  (``topomodelx_attention.data.collate.pyg_from_data_list``; what PyG does for data that
  is not ``ComplexData``): one offset tensor and one index sum
  per complex and per sparse key (``torch_geometric.utils.sparse.cat``), one ``__inc__`` call
  and one addition per complex and dense key;
* **ours** — ``ComplexDataBatch.from_data_list`` (what ``ComplexDataLoader`` does): one
  concatenation of all neighbourhood indices, one offset table, values concatenated per key,
  coalesced by construction (``topomodelx_attention.data.collate``);
* **PyG's DataLoader** — ``torch_geometric.loader.DataLoader`` itself (its ``Collater`` calls
  ``Batch.from_data_list``, which importing the package routes to the same collation for lists
  of ``ComplexData``).

and the share of a Cellular Transformer training step taken by collation: a step is
``collate`` + forward + backward + AdamW step (fused, as the harness) of
``CellularTransformer`` (width 32, 2 layers, sparse pairwise attention, default
neighbourhoods) on that batch; share = collate / (collate + step). Both batches are checked
to be identical before timing. A third configuration keeps only the keys the CT reads, as the
harness batches them (``prune_keys``).

Data (nothing from ``../shared``): the embedded MUTAG (188 molecules) and a synthetic ZINC-like
set (random molecule-like graphs of ~23 atoms: a tree of valence <= 4 plus ring closures of
5-6 atoms, 21 atom types, 4 bond types), both lifted with ``CellCycleLifting``, once with all
seven neighbourhood kinds of ranks 0..2 (21 sparse keys, the default) and once with the three
kinds the CT's default tensor diagram reads (``incidence``, ``adjacency``, ``coadjacency``: 9
keys; ``neighborhoods=`` of the lifting). Times are CPU times of the calling thread (``time.thread_time``;
``time.process_time`` with several torch threads), so that other jobs on a shared machine do
not count: per batch the minimum over ``--repeats`` interleaved rounds, averaged over the
batches. Usage::

    python benchmarks/collation.py            # 8 batches, 15 rounds
    python benchmarks/collation.py --quick    # 2 batches, 5 rounds
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch
from _measure import print_table
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from topomodelx_attention.data import ComplexData, ComplexDataBatch
from topomodelx_attention.data.collate import pyg_from_data_list
from topomodelx_attention.datasets.tu import load_tu_dataset
from topomodelx_attention.harness.prepare import prune_keys
from topomodelx_attention.harness.task_module import adam_update_mode
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.transforms import CellCycleLifting

BATCH_SIZE = 32


CT_NEIGHBORHOODS = ("incidence", "adjacency", "coadjacency")
"""What the CT's default tensor diagram reads (adjacency_0, coadjacency_r, incidence_r)."""


def mutag_graphs() -> list[Data]:
    with tempfile.TemporaryDirectory() as root:
        dataset = load_tu_dataset("MUTAG", root=root)
        return [dataset[i] for i in range(len(dataset))]


def zinc_like_graph(rng: np.random.Generator) -> Data:
    """A random molecule-like graph: ~23 atoms, valence <= 4, a few 5- and 6-rings."""
    n = int(np.clip(rng.normal(23, 4.5), 9, 37))
    degree = np.zeros(n, dtype=np.int64)
    edges = set()
    parent = np.full(n, -1)
    for v in range(1, n):
        candidates = np.flatnonzero(degree[:v] < 3)
        u = int(rng.choice(candidates[-6:]))  # attach near the end: chain-like, as molecules
        edges.add((u, v))
        parent[v] = u
        degree[u] += 1
        degree[v] += 1
    for _ in range(int(rng.integers(1, 4))):  # ring closures along the tree
        v = int(rng.integers(5, n))
        path = [v]
        while len(path) < int(rng.integers(5, 7)) and parent[path[-1]] >= 0:
            path.append(int(parent[path[-1]]))
        u = path[-1]
        if (
            len(path) >= 5
            and degree[u] < 4
            and degree[v] < 4
            and (min(u, v), max(u, v)) not in edges
        ):
            edges.add((min(u, v), max(u, v)))
            degree[u] += 1
            degree[v] += 1
    pairs = torch.tensor(sorted(edges), dtype=torch.long).t()
    edge_index = torch.cat([pairs, pairs.flip(0)], dim=1)
    bonds = torch.nn.functional.one_hot(
        torch.from_numpy(rng.integers(0, 4, pairs.size(1))), 4
    ).float()
    atoms = torch.nn.functional.one_hot(torch.from_numpy(rng.integers(0, 21, n)), 21).float()
    return Data(
        x=atoms, edge_index=edge_index, edge_attr=torch.cat([bonds, bonds]), y=torch.randn(1)
    )


def zinc_like_graphs(count: int, seed: int = 0) -> list[Data]:
    rng = np.random.default_rng(seed)
    return [zinc_like_graph(rng) for _ in range(count)]


def identical(a: Batch, b: Batch) -> bool:
    if set(a.keys()) != set(b.keys()):
        return False
    for key in a.keys():
        x, y = a[key], b[key]
        if isinstance(x, torch.Tensor) and x.is_sparse:
            same = (
                x.shape == y.shape
                and x.is_coalesced() == y.is_coalesced()
                and torch.equal(x._indices(), y._indices())
                and torch.equal(x._values(), y._values())
            )
        elif isinstance(x, torch.Tensor):
            same = torch.equal(x, y)
        else:
            same = x == y
        if not same:
            return False
    return True


def measure(name: str, complexes: list[ComplexData], args) -> list[str]:
    batches = [complexes[i * BATCH_SIZE : (i + 1) * BATCH_SIZE] for i in range(args.batches)]
    batches = [b for b in batches if len(b) == BATCH_SIZE]
    if not batches:
        raise ValueError(f"{name}: fewer than {BATCH_SIZE} complexes")
    loaders = [DataLoader(b, batch_size=BATCH_SIZE) for b in batches]
    for data_list, loader in zip(batches, loaders):
        generic = pyg_from_data_list(Batch, data_list)
        if not identical(generic, ComplexDataBatch.from_data_list(data_list)):
            raise RuntimeError(f"{name}: the fast batch differs from PyG's")
        if not identical(generic, next(iter(loader))):
            raise RuntimeError(f"{name}: PyG's DataLoader batch differs from PyG's generic one")
    first = ComplexDataBatch.from_data_list(batches[0])
    in_channels = [first[f"x_{r}"].size(1) for r in range(3)]
    torch.manual_seed(0)
    model = CellularTransformer(in_channels, 32, 1, n_layers=2)
    collated = [ComplexDataBatch.from_data_list(b) for b in batches]

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=1e-4, **adam_update_mode(model.parameters())
    )

    def step(batch: Batch) -> None:  # a training step as the harness runs it
        optimizer.zero_grad(set_to_none=True)
        loss = (model(batch).view(-1) - batch.y.view(-1).float()).square().mean()
        loss.backward()
        optimizer.step()

    cases: dict[str, Callable[[int], object]] = {
        "generic": lambda i: pyg_from_data_list(Batch, batches[i]),
        "ours": lambda i: ComplexDataBatch.from_data_list(batches[i]),
        "loader": lambda i: next(iter(loaders[i])),
        "step": lambda i: step(collated[i]),
    }
    for fn in cases.values():  # warm-up
        fn(0)
    clock = time.thread_time if torch.get_num_threads() == 1 else time.process_time
    best = {case: [float("inf")] * len(batches) for case in cases}
    for _ in range(args.repeats):
        for case, fn in cases.items():
            for i in range(len(batches)):
                start = clock()
                fn(i)
                best[case][i] = min(best[case][i], clock() - start)
    generic, ours, loader, step_time = (
        float(np.mean(best[case])) for case in ("generic", "ours", "loader", "step")
    )
    cells = torch.cat([c.shape for c in complexes[: len(batches) * BATCH_SIZE]]).float().mean(0)
    keys = sum(1 for k in first.keys() if isinstance(first[k], torch.Tensor) and first[k].is_sparse)
    return [
        name,
        " / ".join(f"{c:.1f}" for c in cells.tolist()),
        str(keys),
        f"{1e3 * generic:.2f}",
        f"{1e3 * ours:.2f}",
        f"{1e3 * loader:.2f}",
        f"{generic / ours:.1f}×",
        f"{1e3 * step_time:.1f}",
        f"{100 * generic / (generic + step_time):.1f} %",
        f"{100 * ours / (ours + step_time):.1f} %",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=8, help="batches of 32 per data set")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="2 batches, 5 rounds")
    args = parser.parse_args()
    if args.quick:
        args.batches, args.repeats = 2, 5
    torch.set_num_threads(args.threads)
    rows = []
    for name, graphs in [
        ("MUTAG (embedded)", mutag_graphs()),
        ("ZINC-like (synthetic)", zinc_like_graphs(args.batches * BATCH_SIZE)),
    ]:
        for label, neighborhoods in [("all 7", None), ("CT's 3", CT_NEIGHBORHOODS)]:
            complexes = CellCycleLifting(neighborhoods=neighborhoods).lift_many(graphs)
            rows.append(measure(f"{name}, {label} neighbourhood kinds", complexes, args))
        # what the harness batches: only the keys the model reads (prune_keys)
        complexes = CellCycleLifting(neighborhoods=CT_NEIGHBORHOODS).lift_many(graphs)
        keep = set(CellularTransformer([1, 1, 1], 32, 1, n_layers=2).neighborhood_keys)
        keep |= {f"{k}_{r}" for k in ("x", "batch") for r in range(3)} | {"y", "shape", "num_nodes"}
        prune_keys(complexes, keep)
        rows.append(measure(f"{name}, the CT's keys only (as the harness)", complexes, args))
    print(
        f"torch {torch.__version__}, CPU, {torch.get_num_threads()} thread(s); batches of {BATCH_SIZE} "
        f"lifted complexes, {args.batches} batches per data set, CPU time per batch: min over "
        f"{args.repeats} rounds, mean over batches. "
        "Batches checked identical (indices, values, shapes, coalesced flags, every key)."
    )
    print_table(
        "Collation of 32 complexes: PyG generic (PyG's own Batch.from_data_list) vs ours "
        "(ComplexDataBatch.from_data_list) and PyG's DataLoader (one batch, loader included), "
        "and share of a CT training step (collate + forward + backward + AdamW step, width 32, "
        "2 layers)",
        [
            "data set",
            "cells per complex (0/1/2)",
            "sparse keys",
            "PyG generic (ms)",
            "ours (ms)",
            "PyG DataLoader (ms)",
            "speed-up (generic / ours)",
            "CT step: fwd+bwd+AdamW (ms)",
            "collation share, PyG generic",
            "collation share, ours",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
