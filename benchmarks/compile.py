"""``torch.compile`` from the public API on CPU: compiled vs eager forward + backward, recompiles, cold compile.

What a user writes: ``compiled = torch.compile(model)`` (``--dynamic default``; or
``torch.compile(model, dynamic=True)``, ``--dynamic true``) and then ``compiled(batch)`` on the
raw PyG batches of ``ComplexData``: each model's eager preparation of the batch (everything
data-dependent) runs at a call that ``torch.compile`` skips (``torch.compiler.disable``), and
everything after it is one graph. For every model and form one compiled object serves batch
sizes 16 / 32 / 48 (MUTAG, embedded; the harness's liftings and node identifiers):

* ``ct``: the Cellular Transformer (width 32, 2 layers, 4 heads, pairwise sparse; the README's
  model); the graph runs the embeddings, the layers (the sparse attention as the fused kernel's
  custom op) and the readout, after ``prepare``;
* ``tokengt``: the harness ``tokengt`` model (``OrderKTokenGT`` of
  ``configs/model/graph/tokengt.yaml``: width 32, 2 layers, pooled identifiers, dense attention,
  attention dropout 0.1); the graph runs the tokenizer, the encoder and the readout, the
  dense attention with dropout as one custom op that attends by size groups, as eager does;
* ``n_simplicial``: the harness ``n_simplicial`` model (``NSimplicialTransformer`` of
  ``configs/model/simplicial/n_simplicial.yaml``: 2-simplicial attention of every vertex over
  the triangles and, through the key/value bias, the edges of its clique complex; width 32,
  2 layers, 4 heads, sum pooling); the tuples of the batch (``TupleIndex``) are prepared
  eagerly, the graph runs the embedding, the layers and the pooled readout.

Timing: forward + backward (``model(batch).sum().backward()``, preparation included on both
sides), eager and compiled called in turn in every round (the order alternating), ``--rounds``
rounds after ``--warmup`` calls each, one thread, on the calling thread's CPU-time clock
(``--clock thread``: with one thread every kernel runs on it, so other processes on the machine
count only through the caches and memory they share; ``--clock wall`` for wall time, with the
machine otherwise idle). Columns: the minimum ms of each side, the
speed-up as the median of the per-round ratios eager / compiled with its interquartile range
(the noise of the comparison), first call s (the first compiled call at that size: at the first
size the cold compilation of forward and backward plus one step, wall time, in a fresh process
and inductor cache folder per model and form unless ``--in-process`` / ``--warm-cache``; at later
sizes it shows whether they compiled anything), graphs (``unique_graphs``: compiled graphs so far; 1 = one graph) and
recompiles (graphs compiled after the first size: 0 = none across the batch sizes).

    python benchmarks/compile.py                          # the three models, inductor, 1 thread
    python benchmarks/compile.py --dynamic default true   # both forms, one after the other
    python benchmarks/compile.py --models n_simplicial --sizes 16 32
    python benchmarks/compile.py --json benchmarks/results/speed/compile.json   # the results file
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch._dynamo
from _measure import interleaved_rounds, print_table
from torch._dynamo.utils import counters
from torch_geometric.loader import DataLoader

HEADER = [
    "model", "batch", "form", "eager ms", "compiled ms", "speed-up (median, IQR)", "first call s",
    "graphs", "recompiles",
]
FORMS = {"default": None, "true": True}
FORM_NAMES = {"default": "torch.compile(model)", "true": "dynamic=True"}
CLOCKS = {"thread": time.thread_time, "wall": time.perf_counter}


def ct_model_and_data():
    """The README's Cellular Transformer and lifted MUTAG complexes.

    Returns
    -------
    tuple
        ``(label, model, complexes)``.
    """
    from topomodelx_attention.datasets.tu import load_tu_dataset
    from topomodelx_attention.nn.cell import CellularTransformer
    from topomodelx_attention.transforms import CellCycleLifting

    dataset = load_tu_dataset("MUTAG")
    complexes = CellCycleLifting().lift_many([dataset[i] for i in range(len(dataset))])
    torch.manual_seed(0)
    model = CellularTransformer([7, 4, 7], 32, 2, n_layers=2, heads=4).train()
    return "CT pairwise sparse", model, complexes


def harness_model_and_data(name: str):
    """The harness model ``name`` and its prepared MUTAG complexes (keys pruned).

    Parameters
    ----------
    name : str
        A harness model (its packaged config and lifting).

    Returns
    -------
    tuple
        ``(label, model, complexes)``.
    """
    from topomodelx_attention.harness.config import compose_config
    from topomodelx_attention.harness.models import build_model, get_spec
    from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys

    cfg = compose_config([], model=name)
    with tempfile.TemporaryDirectory() as cache:
        prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cache)
    torch.manual_seed(0)
    model = build_model(name, cfg.model.params, prepared.info).train()
    complexes = [c.clone() for c in prepared.complexes]
    prune_keys(complexes, get_spec(name).keys(model, prepared.info))
    return f"harness {name}", model, complexes


MODELS: dict[str, Callable[[], tuple]] = {
    "ct": ct_model_and_data,
    "tokengt": lambda: harness_model_and_data("tokengt"),
    "n_simplicial": lambda: harness_model_and_data("n_simplicial"),
}
"""Every model of the table: a builder returning ``(label, model, complexes)``."""


def make_batches(complexes: Sequence, sizes: Sequence[int], device: torch.device | None = None) -> list:
    """One PyG batch per size, from different complexes (the ``i``-th starts at ``8 i``).

    Parameters
    ----------
    complexes : sequence of ComplexData
        The data set.
    sizes : sequence of int
        Complexes per batch.
    device : torch.device, optional
        Where to move the batches.

    Returns
    -------
    list
        The batches, in the order of ``sizes``.
    """
    batches = [next(iter(DataLoader(complexes[i * 8 :], batch_size=s))) for i, s in enumerate(sizes)]
    return batches if device is None else [b.to(device) for b in batches]


def compile_over_sizes(model, batches, backend: str, dynamic: bool | None, sync: Callable[[], None]):
    """Compile ``model`` once and make its first call at every batch, in turn.

    Parameters
    ----------
    model : torch.nn.Module
        The eager model.
    batches : list
        Raw batches, one per size.
    backend : str
        ``torch.compile`` backend.
    dynamic : bool or None
        ``torch.compile``'s ``dynamic``.
    sync : callable
        Waits for the device (a no-op on CPU).

    Returns
    -------
    compiled : callable
        The compiled model.
    first : list of float
        Seconds of the first forward + backward at every batch (the first: compilation).
    graphs : list of int
        ``unique_graphs`` after each of them.
    """
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)
    first, graphs = [], []
    for batch in batches:
        sync()
        start = time.perf_counter()
        compiled(batch).sum().backward()
        sync()
        first.append(time.perf_counter() - start)
        graphs.append(int(counters["stats"]["unique_graphs"]))
    return compiled, first, graphs


def time_rounds(
    model, compiled, batch, rounds: int, warmup: int, clock: Callable[[], float], device=None
) -> dict[str, float]:
    """Eager and compiled forward + backward of one batch in the same rounds.

    Parameters
    ----------
    model, compiled : callable
        The eager and the compiled model.
    batch : object
        A raw batch.
    rounds, warmup : int
        Timed rounds and untimed calls of each side (:func:`_measure.interleaved_rounds`).
    clock : callable
        Seconds (``time.thread_time`` or ``time.perf_counter``).
    device : torch.device, optional
        A CUDA device to synchronise around every call.

    Returns
    -------
    dict
        ``eager`` and ``compiled`` (minimum seconds), ``ratio`` (median of the per-round
        ratios eager / compiled), ``q1`` and ``q3`` (their quartiles).
    """
    steps = {
        "eager": lambda: model(batch).sum().backward(),
        "compiled": lambda: compiled(batch).sum().backward(),
    }
    times = interleaved_rounds(steps, rounds, warmup, clock, device=device)
    ratios = [e / c for e, c in zip(times["eager"], times["compiled"])]
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return {
        "eager": min(times["eager"]),
        "compiled": min(times["compiled"]),
        "ratio": statistics.median(ratios),
        "q1": q1,
        "q3": q3,
    }


def model_rows(label, model, complexes, args, form: str) -> list[list[str]]:
    """One row per batch size of one model and one form; one compiled object for all of them."""
    batches = make_batches(complexes, args.sizes)
    compiled, first, graphs = compile_over_sizes(model, batches, args.backend, FORMS[form], lambda: None)
    rows = []
    for index, (size, batch) in enumerate(zip(args.sizes, batches)):
        t = time_rounds(model, compiled, batch, args.rounds, args.warmup, CLOCKS[args.clock])
        rows.append(
            [
                label,
                str(size),
                FORM_NAMES[form],
                f"{t['eager'] * 1e3:.2f}",
                f"{t['compiled'] * 1e3:.2f}",
                f"{t['ratio']:.2f}× ({t['q1']:.2f}–{t['q3']:.2f})",
                f"{first[index]:.1f}" if index == 0 else f"{first[index]:.2f}",
                str(graphs[index]),
                str(graphs[index] - graphs[0]),
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    if int(counters["stats"]["unique_graphs"]) != graphs[-1]:  # the timed calls compiled again
        raise SystemExit(f"{label}: the timed calls compiled a new graph")
    torch._dynamo.reset()
    return rows


ROWS_TAG = "compile.py rows: "
"""Prefix of the line on which a child process hands its rows (JSON) to the parent."""


def rows_in_fresh_process(name: str, form: str, args) -> list[list[str]]:
    """The rows of one model and form, measured by a fresh process of this script.

    A fresh process compiles from nothing: no kernel that an earlier model or form compiled
    in memory, and (unless ``--warm-cache``) a fresh inductor cache folder, removed afterwards.
    Its progress lines are passed through.
    """
    command = [
        sys.executable, __file__, "--child", "--models", name, "--dynamic", form,
        "--sizes", *map(str, args.sizes), "--rounds", str(args.rounds), "--warmup", str(args.warmup),
        "--threads", str(args.threads), "--backend", args.backend, "--clock", args.clock,
    ]
    if args.warm_cache:
        command.append("--warm-cache")
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        rows = None
        for line in child.stdout:
            if line.startswith(ROWS_TAG):
                rows = json.loads(line[len(ROWS_TAG):])
            else:
                print(line, end="", flush=True)
    if child.returncode or rows is None:
        raise SystemExit(f"compile.py: the process for {name} ({form}) failed (status {child.returncode})")
    return rows


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo``), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average() -> float:
    """The 1-minute load average (NaN where the platform has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def record(args, argv: Sequence[str], rows: list[list[str]], loads: tuple[float, float]) -> dict:
    """The results file of this run, in the form of ``benchmarks/results/speed/`` (``results_page.py``)."""
    clock = (
        "thread CPU time of the calling thread" if args.clock == "thread" else "wall time"
    )
    speedups = [float(row[5].split("×")[0]) for row in rows]
    notes = [
        f"Speed-up: the median over {args.rounds} rounds of eager / compiled, each round timing both "
        f"(after {args.warmup} warm-up calls each), with the interquartile range of the per-round ratios; "
        f"eager and compiled ms are the minima. Smallest median speed-up {min(speedups):.2f}×, "
        f"largest {max(speedups):.2f}×.",
        "Recompiles: compiled graphs added after the first batch size (graphs: unique_graphs so far); "
        f"{'none for any model or form' if all(row[8] == '0' for row in rows) else 'see the column'}. "
        "First call: the first compiled forward + backward at that size, wall time; at the first size "
        "it is the cold compilation (a fresh process"
        f"{' and inductor cache folder' if not args.warm_cache else ' (inductor cache kept: --warm-cache)'}"
        " per model and form) plus one step, most of it inductor's code generation and the C++ compiler, "
        "which share the machine's cores with whatever else runs (the load average above).",
        *args.note,
    ]
    return {
        "title": "torch.compile from the public API (CPU)",
        "script": "benchmarks/compile.py",
        "command": shlex.join(["python", "benchmarks/compile.py", *argv]),
        "baseline": "the same model eager, in the same rounds",
        "machine": (
            f"{cpu_name()}, {os.cpu_count()} CPUs, no GPU used; torch {torch.__version__}; "
            f"{args.threads} thread(s); backend {args.backend}; clock: {clock}; load average "
            f"{loads[0]:.1f} before, {loads[1]:.1f} after"
        ),
        "data": (
            "MUTAG batches of " + ", ".join(map(str, args.sizes)) + " complexes through one compiled object "
            "per model and form, called on the raw batch; CT: pairwise sparse, width 32, 2 layers, 4 heads; "
            "harness tokengt: OrderKTokenGT of configs/model/graph/tokengt.yaml (dense attention, attention "
            "dropout 0.1); harness n_simplicial: NSimplicialTransformer of configs/model/simplicial/"
            "n_simplicial.yaml (2-simplicial attention over triangles and edges, width 32, 2 layers, 4 heads)"
        ),
        "columns": HEADER,
        "rows": rows,
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 48])
    parser.add_argument("--rounds", type=int, default=300, help="timed rounds per batch size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls of each side first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread")
    parser.add_argument(
        "--dynamic",
        nargs="+",
        choices=list(FORMS),
        default=["default"],
        help="torch.compile(model) (torch's default dynamic=None, the README's form) and/or "
        "torch.compile(model, dynamic=True)",
    )
    parser.add_argument(
        "--warm-cache", action="store_true", help="keep inductor's on-disk cache (default: fresh)"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="measure every model and form in this process (default: a fresh process each, so "
        "that every first call is a cold compilation; in one process the later ones reuse kernels)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # rows_in_fresh_process
    parser.add_argument("--json", type=Path, default=None, help="also write the results file here")
    parser.add_argument("--note", action="append", default=[], help="a note for the results file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    loads = [load_average()]
    if not args.child:
        print(
            f"torch {torch.__version__}, {args.threads} thread(s), backend {args.backend}, clock "
            f"{args.clock}, {'warm' if args.warm_cache else 'cold'} inductor cache, "
            f"{os.cpu_count()} CPUs, load average {loads[0]:.1f}",
            flush=True,
        )
    rows = []
    if args.in_process or args.child:
        with tempfile.TemporaryDirectory(prefix="tma_compile_") as cache:
            if not args.warm_cache:  # cold: a cache folder nothing was compiled into
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            for name in args.models:
                label, model, complexes = MODELS[name]()
                for form in args.dynamic:
                    rows += model_rows(label, model, complexes, args, form)
        if args.child:
            print(ROWS_TAG + json.dumps(rows, ensure_ascii=False), flush=True)
            return
    else:
        for name in args.models:
            for form in args.dynamic:
                rows += rows_in_fresh_process(name, form, args)
    loads.append(load_average())
    print_table("torch.compile on raw batches vs eager, forward + backward", HEADER, rows)
    if args.json is not None:
        from topomodelx_attention.files import write_text

        text = json.dumps(record(args, argv, rows, tuple(loads)), indent=2, ensure_ascii=False) + "\n"
        write_text(args.json, text)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
