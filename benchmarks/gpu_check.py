"""GPU check: CUDA + bf16 autocast forward/backward of the three model families; the torch.compile target.

For a lent GPU. Runs, on synthetic data (PyG ``FakeDataset`` graphs; cycle-lifted cell
complexes for the Cellular Transformer; Laplacian node identifiers for TokenGT; random token
sequences for the N-simplicial transformer):

* ``nn.cell.CellularTransformer`` (pairwise sparse / dense / linear attention),
* ``nn.graph.TokenGT`` (softmax / Performer attention),
* ``nn.simplicial.NSimplicialTransformer`` (2-simplicial attention),
* the attention core ``MultiHeadAttention`` of every kind,

each in float32 and under ``torch.autocast("cuda", dtype=torch.bfloat16)``: forward +
backward time (median over repeats, after warm-up, CUDA-synchronised), peak allocated memory,
whether outputs and gradients are finite, and the bf16-vs-float32 relative output difference.
Prints one Markdown table.

Then the compile case, measured on a GPU only (``--compile auto``): the three models of
``benchmarks/compile.py`` (the CT, the harness ``tokengt`` and ``n_simplicial`` models on MUTAG
batches of ``--compile-sizes`` complexes, moved to the GPU), each ``torch.compile(model)`` once
and called on the raw batches: eager and compiled forward + backward in the same rounds
(CUDA-synchronised wall time), the speed-up as the median of the per-round ratios, the first
call (cold compile) and the compiled graphs. The target is a speed-up of at least
``--compile-target`` (1.3×) for every model and size; on a CPU ``benchmarks/compile.py`` holds
the CPU claim (compiled never slower than eager).

Exit status: 0 when every output and gradient is finite and every measured compile row meets
the target, 1 otherwise; 0 with a message when CUDA is absent (``--device cpu`` runs the first
table's code on the CPU with tiny sizes, to check the script; ``--compile yes`` adds the compile
case there too, e.g. with ``--compile-backend eager`` to check its code quickly).

Usage::

    python benchmarks/gpu_check.py              # on a CUDA machine (a few minutes: compilation)
    python benchmarks/gpu_check.py --quick      # smaller batches
    python benchmarks/gpu_check.py --compile no # the first table only
    python benchmarks/gpu_check.py --device cpu --quick   # dry run without a GPU
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch._dynamo
from torch import Tensor, nn


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _graphs(num_complexes: int, avg_nodes: int, channels: int, seed: int) -> list:
    from torch_geometric.datasets import FakeDataset

    torch.manual_seed(seed)
    dataset = FakeDataset(num_complexes, avg_num_nodes=avg_nodes, num_channels=channels)
    return [dataset[i] for i in range(len(dataset))]


def build_cases(args: argparse.Namespace, device: torch.device) -> dict[str, tuple]:
    """Model and input of every case: ``{name: (model, run(model) -> Tensor)}``."""
    from torch_geometric.data import Batch

    from topomodelx_attention.nn.attention import MultiHeadAttention, padded_layout
    from topomodelx_attention.nn.cell import CellularTransformer
    from topomodelx_attention.nn.graph import TokenGT
    from topomodelx_attention.nn.simplicial import NSimplicialTransformer
    from topomodelx_attention.transforms import CellCycleLifting, LaplacianNodeId

    channels, hidden, heads = args.channels, args.hidden, args.heads
    graphs = _graphs(args.graphs, args.nodes, channels, seed=0)
    cases: dict[str, tuple] = {}

    lifting = CellCycleLifting()
    complexes = Batch.from_data_list([lifting(g) for g in graphs]).to(device)
    for kind in ("sparse", "dense", "linear"):
        model = CellularTransformer(
            [channels, channels, channels],
            hidden,
            2,
            n_layers=args.layers,
            heads=heads,
            attention="pairwise",
            kind=kind,
            attention_dropout=0.0,
        ).to(device)
        cases[f"CT pairwise {kind}"] = (model, lambda m, d=complexes: m(d))

    node_ids = LaplacianNodeId(args.node_id_dim)
    tokens = Batch.from_data_list([node_ids(g) for g in graphs]).to(device)
    for kind in ("dense", "linear"):
        model = TokenGT(
            channels,
            0,
            hidden,
            2,
            n_layers=args.layers,
            heads=heads,
            node_id_dim=args.node_id_dim,
            kind=kind,
        ).to(device)
        cases[f"TokenGT {kind}"] = (model, lambda m, d=tokens: m(d))

    sequences = torch.randn(args.graphs, args.sequence, channels, device=device)
    model = NSimplicialTransformer(
        channels, hidden, 2, n_layers=args.layers, heads=heads, order=2
    ).to(device)
    cases["N-simplicial (order 2)"] = (model, lambda m, x=sequences: m(x))

    batch = complexes["batch_0"]
    x0 = torch.randn(batch.numel(), hidden, device=device)
    layout = padded_layout(batch, int(complexes.num_complexes))
    adjacency = complexes["adjacency_0"].float()
    for kind in ("sparse", "dense", "linear"):
        module = MultiHeadAttention(hidden, heads=heads, kind=kind).to(device)
        neighborhood = adjacency if kind == "sparse" else None
        cases[f"MultiHeadAttention {kind}"] = (
            module,
            lambda m, nb=neighborhood: m(x0, None, nb, layout=layout),
        )
    return cases


def measure(
    model: nn.Module,
    run: Callable[[nn.Module], Tensor],
    device: torch.device,
    dtype: torch.dtype | None,
    repeats: int,
) -> tuple[float, float, bool, Tensor]:
    """(median seconds, peak MiB, finite outputs and gradients, output) of forward+backward."""

    def step() -> tuple[Tensor, bool]:
        model.zero_grad(set_to_none=True)
        if dtype is None:
            out = run(model)
        else:
            with torch.autocast(device.type, dtype=dtype):
                out = run(model)
        out.float().square().mean().backward()
        grads_ok = all(
            torch.isfinite(p.grad).all().item() for p in model.parameters() if p.grad is not None
        )
        return out.detach().float(), bool(torch.isfinite(out).all().item()) and grads_ok

    out, finite = step()  # warm-up
    _sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    return statistics.median(times), peak, finite, out


def compile_rows(args: argparse.Namespace, device: torch.device) -> list[list[str]]:
    """The compile case: ``benchmarks/compile.py``'s models compiled on ``device``, one row per size.

    Parameters
    ----------
    args : argparse.Namespace
        ``compile_sizes``, ``compile_rounds``, ``compile_backend`` and ``compile_target``.
    device : torch.device
        Where the models and batches run.

    Returns
    -------
    list of list of str
        ``[model, batch, eager ms, compiled ms, speed-up (median, IQR), first call s, graphs,
        meets the target]`` per model and batch size.
    """
    from compile import MODELS, compile_over_sizes, make_batches, time_rounds

    rows = []
    for build in MODELS.values():
        label, model, complexes = build()
        model = model.to(device)
        batches = make_batches(complexes, args.compile_sizes, device)
        compiled, first, graphs = compile_over_sizes(
            model, batches, args.compile_backend, None, lambda: _sync(device)
        )
        for index, (size, batch) in enumerate(zip(args.compile_sizes, batches)):
            t = time_rounds(
                model, compiled, batch, args.compile_rounds, 3, time.perf_counter,
                device if device.type == "cuda" else None,
            )
            rows.append([
                label, str(size), f"{t['eager'] * 1e3:.2f}", f"{t['compiled'] * 1e3:.2f}",
                f"{t['ratio']:.2f}× ({t['q1']:.2f}–{t['q3']:.2f})", f"{first[index]:.1f}",
                str(graphs[index]), "yes" if t["ratio"] >= args.compile_target else "NO",
            ])
            print(" | ".join(rows[-1]), flush=True)
        torch._dynamo.reset()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="smaller batches, fewer repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--compile",
        choices=["auto", "yes", "no"],
        default="auto",
        help="the compile case: auto = on a GPU only (default), yes = on any device, no = skip",
    )
    parser.add_argument("--compile-sizes", type=int, nargs="+", default=[16, 32, 48, 128])
    parser.add_argument("--compile-rounds", type=int, default=50, help="timed rounds per size")
    parser.add_argument("--compile-backend", default="inductor")
    parser.add_argument(
        "--compile-target", type=float, default=1.3, help="the speed-up every compile row must reach"
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: CUDA is not available on this machine; nothing to check (exit 0).")
        return 0
    small = args.quick or device.type == "cpu"
    args.graphs = 16 if small else 128
    args.nodes = 20 if small else 30
    args.sequence = 32 if small else 128
    args.channels, args.hidden, args.heads, args.layers = 8, 64, 8, 2
    args.node_id_dim = 8
    repeats = args.repeats or (2 if small else 10)
    torch.manual_seed(0)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        bf16 = torch.cuda.is_bf16_supported()
    else:
        name, bf16 = "cpu", True
    print(f"torch {torch.__version__}, device {device} ({name}), bf16 supported: {bf16}")
    print(
        f"{args.graphs} graphs of ~{args.nodes} nodes, sequences of {args.sequence} tokens, "
        f"hidden={args.hidden}, heads={args.heads}, layers={args.layers}, repeats={repeats}"
    )
    rows = []
    for name, (model, run) in build_cases(args, device).items():
        model.train()
        t32, m32, ok32, out32 = measure(model, run, device, None, repeats)
        row = [name, f"{t32 * 1e3:.1f}", f"{m32:.0f}", "yes" if ok32 else "NO"]
        if bf16:
            tb, mb, okb, outb = measure(model, run, device, torch.bfloat16, repeats)
            rel = ((outb - out32).norm() / out32.norm().clamp_min(1e-12)).item()
            row += [
                f"{tb * 1e3:.1f} ({tb / t32:.2f}x)",
                f"{mb:.0f} ({mb / max(m32, 1e-9):.2f}x)",
                "yes" if okb else "NO",
                f"{rel:.3f}",
            ]
        else:
            row += ["—"] * 4
        rows.append(row)
    header = [
        "case",
        "fp32 fwd+bwd (ms)",
        "fp32 peak (MiB)",
        "fp32 finite",
        "bf16 autocast (ms, vs fp32)",
        "bf16 peak (MiB, vs fp32)",
        "bf16 finite",
        "bf16 vs fp32 rel. diff",
    ]
    print()
    _print_table(header, rows)
    ok = all("NO" not in row for row in rows)
    if args.compile == "yes" or (args.compile == "auto" and device.type == "cuda"):
        torch._dynamo.reset()
        if args.quick or device.type == "cpu":
            args.compile_sizes, args.compile_rounds = args.compile_sizes[:2], min(args.compile_rounds, 5)
        print(
            f"\ntorch.compile(model) vs eager on raw batches, forward + backward, backend "
            f"{args.compile_backend}, {args.compile_rounds} rounds per size; target "
            f"{args.compile_target:.2f}×"
        )
        compiled = compile_rows(args, device)
        header = [
            "model", "batch", "eager ms", "compiled ms", "speed-up (median, IQR)", "first call s",
            "graphs", f"≥ {args.compile_target:.2f}×",
        ]
        print()
        _print_table(header, compiled)
        ok = ok and all(row[-1] == "yes" for row in compiled)
    else:
        print(
            "\ncompile case: skipped (measured on a GPU; --compile yes runs it here; on a CPU "
            "benchmarks/compile.py holds the CPU claim)"
        )
    return 0 if ok else 1


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    sys.exit(main())
