"""Cellular Transformer benchmarks (forward + backward, CPU unless ``--device cuda``).

Tables
------
1. **Scaling of one CT layer with the number of cells** on square-grid cell complexes (vertices,
   edges, square 2-cells; 10² … 10⁶ cells): pairwise-sparse, general-sparse and pairwise-linear
   (kernelised) layers, with the number of stored neighbourhood entries ``nnz``; time and memory
   per nnz must stay flat (linear growth). The dense kind is run while it fits (quadratic).
2. **CT vs ``torch.nn.TransformerEncoder``** of the same width, heads, FFN width and depth on
   the same cells of a batch of 128 lifted MUTAG complexes (the encoder gets every complex's
   cells padded to the longest complex, with a key-padding mask; the padding is prepared
   outside the timed region, which favours the baseline). Target: general-sparse CT ≤ 1.0×.
3. **CT layer vs TopoModelX's CAN and SAN layers** at equal width on growing batches of lifted
   MUTAG complexes (CAN and SAN work on edges; SAN needs a dense ``n_edges × n_edges``
   harmonic projector and its 5th matrix power — not run where the projector would exceed
   ``--memory-limit-gib``; the table gives the memory it would need).
4. **Compiled vs eager** (``--compile``; table ``compile``): the whole ``CellularTransformer``
   (pairwise sparse, general sparse, pairwise mixed) compiled once with
   ``torch.compile(dynamic=True)`` (inductor) and run on ``model.prepare(batch)`` for several
   batch sizes of lifted MUTAG complexes; ``graphs`` = compilations so far (1: no recompile).

Time is the minimum over interleaved repeats; memory is what autograd saves for backward on CPU
(see ``_measure.py``). Usage::

    python benchmarks/cellular_transformer.py --quick
    python benchmarks/cellular_transformer.py --max-cells 1000000
    python benchmarks/cellular_transformer.py --tables scaling --scaling-layers pairwise-sparse \
        --threads 1 --clock cpu --max-cells 1000000 --keep-freed-memory
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import scipy.sparse as sp
import torch
from _compile import compile_rows, print_compile_table
from _measure import keep_freed_memory, measure_once, padded, page_faults, print_table, time_cases
from torch import nn
from torch_geometric.data import Batch

from topomodelx_attention.data import ComplexData
from topomodelx_attention.datasets.tu import load_tu_dataset
from topomodelx_attention.nn.cell import CellularTransformer, CellularTransformerLayer
from topomodelx_attention.transforms import CellCycleLifting


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
def grid_complex(side: int) -> ComplexData:
    """Square grid of ``side × side`` vertices with every unit square as a 2-cell."""
    idx = np.arange(side * side).reshape(side, side)
    horizontal = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1)
    vertical = np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)
    edges = np.concatenate([horizontal, vertical])
    order = np.lexsort((edges[:, 1], edges[:, 0]))
    edges = edges[order]
    n0, n1 = side * side, edges.shape[0]
    b1 = sp.csr_matrix(
        (np.tile([-1.0, 1.0], n1), (edges.ravel(), np.repeat(np.arange(n1), 2))), shape=(n0, n1)
    )
    key = {(int(u), int(v)): e for e, (u, v) in enumerate(edges)}
    corners = idx[:-1, :-1].ravel()
    rows, cols, vals = [], [], []
    for c, v in enumerate(corners):  # square v → v+1 → v+side+1 → v+side → v
        cycle = [v, v + 1, v + side + 1, v + side]
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            rows.append(key[(min(a, b), max(a, b))])
            cols.append(c)
            vals.append(1.0 if a < b else -1.0)
    b2 = sp.csr_matrix((vals, (rows, cols)), shape=(n1, len(corners)))
    neighborhoods = ["incidence", "adjacency", "coadjacency"]
    return ComplexData.from_boundaries([b1, b2], [n0, n1, len(corners)], neighborhoods=neighborhoods)


def mutag_complexes() -> list[ComplexData]:
    with tempfile.TemporaryDirectory() as root:
        dataset = load_tu_dataset("MUTAG", root=root)
        graphs = [dataset[i] for i in range(len(dataset))]
    return CellCycleLifting().lift_many(graphs)


def batch_of(complexes: list[ComplexData], size: int) -> Batch:
    return Batch.from_data_list([complexes[i % len(complexes)] for i in range(size)])


def layer_inputs(data: ComplexData, channels: int, device: torch.device, dtype: torch.dtype):
    generator = torch.Generator().manual_seed(0)
    x = [torch.randn(data.num_cells(r), channels, generator=generator, dtype=dtype).to(device) for r in range(3)]
    neighborhoods = {
        key: data[key].to(dtype).to(device)
        for key in ("adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2")
    }
    batch = [data[f"batch_{r}"].to(device) for r in range(3)]
    nnz = sum(int(neighborhoods[k]._nnz()) for k in neighborhoods) + sum(
        int(neighborhoods[k]._nnz()) for k in ("incidence_1", "incidence_2")
    )  # both directions of the incidences
    return x, neighborhoods, batch, nnz


# ----------------------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------------------
def scaling_table(args, device, dtype) -> None:
    sides = [s for s in (6, 16, 50, 160, 500) if 4 * s * s <= args.max_cells * 1.05]
    variants = [("pairwise", "sparse"), ("general", "sparse"), ("pairwise", "linear"), ("pairwise", "dense")]
    variants = [v for v in variants if f"{v[0]}-{v[1]}" in args.scaling_layers]
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    header = [
        "cells", "nnz", "layer", "time (ms)", "ns / unit", "of which prepare", "faulted B / unit",
        "memory (MiB)", "bytes / unit",
    ]
    print(
        f"\n### One CT layer on square-grid complexes (width {args.channels}, {args.heads} heads), "
        f"forward+backward ({args.clock} time, min of repeats; 'prepare' = the layer's prepare: "
        "neighbourhood conversion, joined edge list, CSR plan; 'faulted' = bytes page-faulted per "
        "unit in one timed call). 'unit' = stored neighbourhood entry (nnz) for sparse, cell for "
        "linear/dense: flat columns = linear growth\n"
    )
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header), flush=True)
    for side in sides:
        data = grid_complex(side)
        cells = sum(data.num_cells(r) for r in range(3))
        x, neighborhoods, batch, nnz = layer_inputs(data, args.channels, device, dtype)
        for attention, kind in variants:
            if kind == "dense" and cells > args.max_dense_cells:
                continue
            if kind == "linear" and cells > args.max_linear_cells:
                continue
            torch.manual_seed(0)
            layer = CellularTransformerLayer(
                args.channels, heads=args.heads, max_rank=2, attention=attention, kind=kind,
                kernel_options={"num_random_features": args.features} if kind == "linear" else None,
            ).to(device, dtype)

            def run(layer=layer):
                return torch.cat(layer(x, neighborhoods, batch, 1))

            seconds, mib = measure_once(run, device)
            # small sizes: the usual repeats; large ones: --scaling-repeats (the first call of
            # measure_once above is the warm-up)
            repeats = args.repeats if cells <= 20_000 else args.scaling_repeats
            seconds = time_cases({"l": run}, device, repeats, 0, clock)["l"]
            faults = page_faults()
            time_cases({"l": run}, device, 1, 0, clock)
            faulted = 4096 * (page_faults() - faults)
            prepare = float("inf")
            for _ in range(max(1, repeats)):
                start = clock()
                layer.prepare(neighborhoods, batch, 1)
                prepare = min(prepare, clock() - start)
            per = cells if kind in ("linear", "dense") else nnz
            row = [
                f"{cells:,}", f"{nnz:,}", f"{attention}-{kind}", f"{1e3 * seconds:.1f}", f"{1e9 * seconds / per:.0f}",
                f"{1e9 * prepare / per:.0f}", f"{faulted / per:.0f}", f"{mib:.1f}", f"{2**20 * mib / per:.0f}",
            ]
            print("| " + " | ".join(row) + " |", flush=True)
            del layer


def encoder_table(args, complexes, device, dtype) -> None:
    batch = batch_of(complexes, 128).to(device)
    cells_per_complex = batch.shape.sum(1)
    tokens = int(cells_per_complex.sum())
    num = batch.num_graphs
    generator = torch.Generator().manual_seed(0)
    h = [torch.randn(batch.num_cells(r), args.channels, generator=generator, dtype=dtype).to(device) for r in range(3)]
    rows = []
    results = {}
    encoder_layer = nn.TransformerEncoderLayer(
        args.channels, args.heads, args.channels, dropout=0.0, batch_first=True, norm_first=True
    )
    encoder = nn.TransformerEncoder(encoder_layer, args.layers, enable_nested_tensor=False).to(device, dtype)
    token_batch = torch.cat([batch[f"batch_{r}"] for r in range(3)])
    order = torch.argsort(token_batch, stable=True)
    dense_tokens, pad = padded(torch.cat(h)[order], token_batch[order], num)

    def baseline():
        return encoder(dense_tokens, src_key_padding_mask=pad)[~pad]

    cases = {"nn.TransformerEncoder (padded)": baseline}
    keys = ("adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2")
    neighborhoods = {k: batch[k].to(dtype) for k in keys}
    cell_batch = [batch[f"batch_{r}"] for r in range(3)]
    for attention, kind in [("general", "sparse"), ("pairwise", "sparse"), ("general", "dense"), ("pairwise", "mixed")]:
        torch.manual_seed(0)
        layers = nn.ModuleList(
            CellularTransformerLayer(args.channels, heads=args.heads, max_rank=2, attention=attention, kind=kind)
            for _ in range(args.layers)
        ).to(device, dtype)

        def run(layers=layers):
            out = h
            for layer in layers:
                out = layer(out, neighborhoods, cell_batch, num)
            return torch.cat(out)

        cases[f"CT {attention}-{kind}"] = run
    times = time_cases(cases, device, args.repeats, 1)
    for name, fn in cases.items():
        results[name] = (times[name], measure_once(fn, device)[1])
    base_t, base_m = results["nn.TransformerEncoder (padded)"]
    for name, (t, m) in results.items():
        rows.append([name, f"{1e3 * t:.1f}", f"{t / base_t:.2f}x", f"{m:.1f}", f"{m / base_m:.2f}x"])
    print_table(
        f"128 lifted MUTAG complexes ({tokens:,} cells; longest complex {int(cells_per_complex.max())}), "
        f"{args.layers} layers, width {args.channels}, {args.heads} heads, FFN {args.channels}, forward+backward",
        ["model", "time (ms)", "time ratio", "memory (MiB)", "memory ratio"],
        rows,
    )


def topomodelx_table(args, complexes, device, dtype) -> None:
    from topomodelx.nn.cell.can_layer import CANLayer
    from topomodelx.nn.simplicial.san import SAN
    from topomodelx.nn.simplicial.san_layer import SANLayer

    rows = []
    for size in args.topomodelx_batches:
        batch = batch_of(complexes, size).to(device)
        n_edges = batch.num_cells(1)
        generator = torch.Generator().manual_seed(0)
        x = [torch.randn(batch.num_cells(r), args.channels, generator=generator, dtype=dtype).to(device) for r in range(3)]
        down, up = batch.down_laplacian_1.to(dtype), batch.up_laplacian_1.to(dtype)
        keys = ("adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2")
        neighborhoods = {k: batch[k].to(dtype) for k in keys}
        cell_batch = [batch[f"batch_{r}"] for r in range(3)]
        torch.manual_seed(0)
        ct = CellularTransformerLayer(args.channels, heads=args.heads, max_rank=2).to(device, dtype)
        ct_edges = CellularTransformerLayer(
            args.channels, heads=args.heads, max_rank=2, tensor_diagram=["1->1:coadjacency_1"]
        ).to(device, dtype)
        can = CANLayer(args.channels, args.channels // args.heads, heads=args.heads).to(device, dtype)
        san_layer = SANLayer(args.channels, args.channels).to(device, dtype)
        san_helper = SAN(args.channels, args.channels)
        cases = {
            "CT layer, pairwise-sparse, all ranks": lambda: torch.cat(ct(x, neighborhoods, cell_batch, size)),
            "CT layer, edges only (1->1)": lambda: ct_edges(x, neighborhoods, cell_batch, size)[1],
            "TopoModelX CANLayer (edges)": lambda: can(x[1], down, up),
        }
        projector_gib = n_edges * n_edges * torch.finfo(dtype).bits / 8 / 2**30
        if projector_gib * 3 <= args.memory_limit_gib:  # projector, identity and matrix power
            hodge = (down + up).to_dense()

            def san():
                projection = san_helper.compute_projection_matrix(hodge)
                return san_layer(x[1], up, down, projection)

            cases["TopoModelX SANLayer (edges, dense projector)"] = san
        times = time_cases(cases, device, args.repeats if size <= 256 else 1, 1)
        for name, fn in cases.items():
            memory = measure_once(fn, device)[1]
            rows.append([str(size), f"{n_edges:,}", name, f"{1e3 * times[name]:.1f}", f"{memory:.1f}"])
        if "TopoModelX SANLayer (edges, dense projector)" not in cases:
            rows.append([str(size), f"{n_edges:,}", "TopoModelX SANLayer (edges, dense projector)",
                         "not run", f"dense projector: ≥ {3 * projector_gib:.1f} GiB (limit {args.memory_limit_gib} GiB) and an O(n_edges³) matrix power"])
    print_table(
        f"CT vs TopoModelX attention layers, width {args.channels}, {args.heads} heads, forward+backward",
        ["complexes", "edges", "layer", "time (ms)", "memory (MiB)"],
        rows,
    )


def compile_table(args, complexes: list[ComplexData]) -> None:
    """Table 4: compiled (inductor) vs eager CellularTransformer, forward + backward."""
    rows = []
    for attention, kind in (("pairwise", "sparse"), ("general", "sparse"), ("pairwise", "mixed")):
        torch.manual_seed(0)
        model = CellularTransformer(
            [7, 4, 7], args.compile_channels, 2, n_layers=args.compile_layers, heads=4,
            attention=attention, kind=kind, attention_dropout=0.0,
        ).train()
        batches = [Batch.from_data_list(complexes[:size]) for size in args.compile_batches]
        rows += compile_rows(model, batches, f"{attention}-{kind}", args.repeats)
    print_compile_table("CellularTransformer", args, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--features", type=int, default=32, help="random features of the linear kind")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-cells", type=int, default=100_000)
    parser.add_argument(
        "--scaling-layers", nargs="+",
        default=["pairwise-sparse", "general-sparse", "pairwise-linear", "pairwise-dense"],
        choices=["pairwise-sparse", "general-sparse", "pairwise-linear", "pairwise-dense"],
        help="layers of the scaling table",
    )
    parser.add_argument(
        "--scaling-repeats", type=int, default=1,
        help="timed repeats of the scaling table above 20,000 cells (after one warm-up call)",
    )
    parser.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall",
        help="scaling table: wall time or CPU time of the thread (robust on a loaded machine)",
    )
    parser.add_argument(
        "--keep-freed-memory", action="store_true",
        help="mallopt: glibc keeps freed memory instead of unmapping blocks > 32 MiB "
        "(no page faults per step on large complexes; see _measure.keep_freed_memory)",
    )
    parser.add_argument("--max-dense-cells", type=int, default=3_000)
    parser.add_argument("--max-linear-cells", type=int, default=200_000)
    parser.add_argument(
        "--tables", nargs="+", default=["encoder", "topomodelx", "scaling"],
        choices=["encoder", "topomodelx", "scaling", "compile"], help="which tables to run",
    )
    parser.add_argument("--compile", action="store_true", help="run only the compiled-vs-eager table")
    parser.add_argument("--compile-batches", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--compile-channels", type=int, default=32)
    parser.add_argument("--compile-layers", type=int, default=2)
    parser.add_argument("--memory-limit-gib", type=float, default=2.0)
    parser.add_argument("--topomodelx-batches", type=int, nargs="+", default=[128, 512, 2048, 8192])
    args = parser.parse_args(argv)
    if args.quick:
        args.max_cells, args.repeats, args.topomodelx_batches, args.max_dense_cells = 2_000, 2, [32, 128], 2_000
    if args.compile:
        args.tables = ["compile"]
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.keep_freed_memory and not keep_freed_memory():
        raise SystemExit("--keep-freed-memory needs glibc (mallopt not found)")
    device, dtype = torch.device(args.device), torch.float32
    print(
        f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads"
        + (", glibc keeps freed memory (mallopt)" if args.keep_freed_memory else "")
    )
    complexes = mutag_complexes()
    if "encoder" in args.tables:
        encoder_table(args, complexes, device, dtype)
    if "topomodelx" in args.tables:
        topomodelx_table(args, complexes, device, dtype)
    if "scaling" in args.tables:
        scaling_table(args, device, dtype)
    if "compile" in args.tables:
        compile_table(args, complexes)


if __name__ == "__main__":
    main()
