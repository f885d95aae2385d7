"""What the relative random-walk bias (RRWP) of the CT's global arrow costs.

The GraphUniverse community-detection grid runs the CT with a global arrow ``0->0:all_0``
biased by relative random-walk features (``kernel_options={"rrwp_steps": 8}``). This script
times, in one run and interleaved, a training step (forward + backward, ``train()`` mode with
attention dropout) of

* **CT, no bias** (the named baseline): the same model with ``rrwp_steps`` unset;
* **CT, RRWP**: ``rrwp_steps=--steps``;
* with ``--before DIR``: **CT before, RRWP**, the same model from another copy of the package
  (``git archive <commit> topomodelx_attention | tar -x -C DIR``), same seed and weights, so a
  change's before / after is read at the same load;

and, apart, the features alone (``random_walk_pair_features``, once per batch in ``prepare``).
The batch is GraphUniverse-like and generated here (no data needed): ``--graphs`` random graphs
of 50–300 vertices with ~3 edges per vertex, 15 features, lifted by ``CellCycleLifting``. Time:
CPU time of the calling thread, minimum over ``--repeats`` interleaved rounds after
``--warmup``, ``torch.set_num_threads(--threads)``; the load average is printed with the table.

Usage::

    python benchmarks/rrwp_cost.py
    python benchmarks/rrwp_cost.py --repeats 8 --before BEFORE_DIR
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _measure import import_before

CellularTransformerBefore = import_before(sys.argv)

import torch  # noqa: E402
from _measure import add_int_options, interleaved_min, print_table  # noqa: E402
from torch_geometric.data import Batch, Data  # noqa: E402

from topomodelx_attention.nn.attention import padded_layout, random_walk_pair_features  # noqa: E402
from topomodelx_attention.nn.cell import CellularTransformer  # noqa: E402
from topomodelx_attention.transforms import CellCycleLifting  # noqa: E402

FEATURES = 15
#: The grid's tensor diagram (the default one plus the global arrow), as strings: a copy given
#: by ``--before`` parses them with its own classes.
DIAGRAM = [
    "0->0:adjacency_0", "1->1:coadjacency_1", "2->2:coadjacency_2", "1->0:incidence_1",
    "0->1:incidence_1.T", "2->1:incidence_2", "1->2:incidence_2.T", "0->0:all_0",
]


def graphuniverse_like(graphs: int, seed: int = 0) -> Batch:
    """``graphs`` lifted random graphs of 50–300 vertices (~3 edges per vertex), one batch."""
    generator = torch.Generator().manual_seed(seed)
    lifting = CellCycleLifting()
    items = []
    for _ in range(graphs):
        n = int(torch.randint(50, 301, (1,), generator=generator))
        u, v = (torch.randint(0, n, (3 * n,), generator=generator) for _ in range(2))
        keep = u != v
        edges = torch.stack([u[keep], v[keep]])
        edges = torch.cat([edges, edges.flip(0)], dim=1).unique(dim=1)
        x = torch.randn(n, FEATURES, generator=generator)
        items.append(lifting(Data(x=x, edge_index=edges, num_nodes=n)))
    return Batch.from_data_list(items)


def build(cls: type, args: argparse.Namespace, steps: int) -> torch.nn.Module:
    """The grid's CT shape: default diagram plus the global arrow, cardinality term."""
    torch.manual_seed(0)
    options = {"cardinality": True}
    if steps:
        options["rrwp_steps"] = steps
    model = cls(
        [FEATURES] * 3, args.hidden, 20, n_layers=args.layers, heads=args.heads,
        tensor_diagram=DIAGRAM, kernel_options=options,
        attention_dropout=args.attention_dropout, outputs=(0,),
    ).train()
    with torch.no_grad():  # a trained bias, not the zero initialisation
        generator = torch.Generator().manual_seed(1)
        for name, parameter in model.named_parameters():
            if "relative_bias" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_int_options(parser, repeats=6, warmup=1, threads=1, graphs=16, hidden=64, layers=4, heads=4, steps=8)
    parser.add_argument("--attention-dropout", type=float, default=0.1)
    parser.add_argument("--before", metavar="DIR", help="also time the CT of the package copy in DIR")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    batch = graphuniverse_like(args.graphs)
    print(f"batch: {args.graphs} complexes, cells per rank {[batch.num_cells(r) for r in range(3)]}")

    models = {"CT, no bias": build(CellularTransformer, args, 0), "CT, RRWP": build(CellularTransformer, args, args.steps)}
    if args.before:
        if CellularTransformerBefore is None:
            raise ValueError("--before must be given on the command line (it is imported first)")
        models["CT before, RRWP"] = build(CellularTransformerBefore, args, args.steps)

    def step(model: torch.nn.Module):
        def call() -> None:
            torch.manual_seed(3)  # the same dropout draws for every model
            model(batch)[0].sum().backward()
            model.zero_grad(set_to_none=True)

        return call

    adjacency = batch.neighborhood("adjacency", 0)
    layout = padded_layout(batch["batch_0"])
    calls = {name: step(model) for name, model in models.items()}
    calls["features alone"] = lambda: random_walk_pair_features(adjacency, layout, args.steps)
    best = interleaved_min(calls, args.repeats, args.warmup, time.thread_time)
    base = best["CT, no bias"]
    rows = []
    for name, seconds in best.items():
        ratio = f"{seconds / base:.2f}×" if name != "features alone" else "–"
        row = [name, f"{seconds * 1e3:.1f}", ratio]
        if args.before:
            row.append(f"{seconds / best['CT before, RRWP']:.2f}×" if name == "CT, RRWP" else "–")
        rows.append(row)
    header = ["case", "ms per step", "/ no bias"] + (["after / before"] if args.before else [])
    title = (
        f"RRWP cost: {args.graphs} graphs, width {args.hidden}, {args.layers} layers, {args.heads} heads, "
        f"{args.steps} steps, min of {args.repeats}, thread time, load {os.getloadavg()[0]:.1f}"
    )
    print_table(title, header, rows)


if __name__ == "__main__":
    main()
