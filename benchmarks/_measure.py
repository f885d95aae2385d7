"""Measurement and table helpers shared by the benchmark scripts (not part of the package).

Time: minimum over interleaved repeats of ``fn().sum().backward()`` (robust on a shared
machine). Memory: on CPU, the bytes of the distinct tensors autograd saves for backward
(``torch.autograd.graph.saved_tensors_hooks``); on CUDA, the peak allocated memory. Peak live
memory of any call (:func:`peak_bytes`): the profiler's allocator events on CPU, the peak
allocated memory on CUDA. Command line: :func:`add_common_args`.
"""

from __future__ import annotations

import argparse
import inspect
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor


# ----------------------------------------------------------------------------------------------
# measurement
# ----------------------------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved_min(
    calls: dict[str, Callable[[], object]],
    repeats: int,
    warmup: int,
    clock: Callable[[], float] = time.perf_counter,
    *,
    per_round: int = 1,
    device: torch.device | None = None,
) -> dict[str, float]:
    """Seconds per call of every case: minimum over ``repeats`` interleaved rounds.

    ``warmup`` untimed calls of each case first; then every round calls each case once in turn
    (``per_round`` times, the mean kept), so that ratios stay meaningful on a machine shared
    with other jobs. On a CUDA ``device`` the timings synchronise it before and after.
    """
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, fn in calls.items():
            if device is not None:
                _sync(device)
            start = clock()
            for _ in range(per_round):
                fn()
            if device is not None:
                _sync(device)
            best[name] = min(best[name], (clock() - start) / per_round)
    return best


def interleaved_rounds(
    calls: dict[str, Callable[[], object]],
    rounds: int,
    warmup: int,
    clock: Callable[[], float] = time.perf_counter,
    *,
    device: torch.device | None = None,
) -> dict[str, list[float]]:
    """Seconds of every call of every case, round by round (``rounds`` values per case).

    ``warmup`` untimed calls of each case first; then every round calls each case once, in
    turn, the order reversed every other round (no case always runs first, e.g. after the
    other's freed memory). Ratios of the same round compare cases under the same conditions,
    so their median resists the load of a shared machine better than a ratio of minima. On a
    CUDA ``device`` the timings synchronise it before and after every call.
    """
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            if device is not None:
                _sync(device)
            start = clock()
            calls[name]()
            if device is not None:
                _sync(device)
            times[name].append(clock() - start)
    return times


def time_cases(
    fns: dict[str, Callable[[], Tensor]],
    device: torch.device,
    repeats: int,
    warmup: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Seconds of ``fn().sum().backward()`` for every case (:func:`interleaved_min`)."""
    steps = {name: (lambda fn=fn: fn().sum().backward()) for name, fn in fns.items()}
    return interleaved_min(steps, repeats, warmup, clock, device=device)


def measure_once(fn: Callable[[], Tensor], device: torch.device) -> tuple[float, float]:
    """One ``fn().sum().backward()``: (seconds, MiB).

    MiB is the memory saved for backward on CPU (distinct storages seen by
    ``saved_tensors_hooks``), the peak allocated memory above the baseline on CUDA.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        start = time.perf_counter()
        fn().sum().backward()
        torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        return seconds, (torch.cuda.max_memory_allocated(device) - base) / 2**20
    seen: dict[tuple[int, int], int] = {}

    def pack(t: Tensor) -> Tensor:
        if t.layout == torch.strided and t.device.type != "meta":
            storage = t.untyped_storage()
            seen[(storage.data_ptr(), storage.nbytes())] = storage.nbytes()
        return t

    start = time.perf_counter()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    out.sum().backward()
    seconds = time.perf_counter() - start
    return seconds, sum(seen.values()) / 2**20


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak live tensor bytes allocated while running ``fn`` (:func:`~topomodelx_attention.harness.memory.peak_tensor_bytes`).

    Imported here, not at the top: importing the harness imports ``nn``, which ``import_before``
    must import from another copy first.
    """
    from topomodelx_attention.harness.memory import peak_tensor_bytes

    return peak_tensor_bytes(fn, device)


def page_faults() -> int:
    """Minor page faults of this process so far (first touches of freshly mapped memory)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def keep_freed_memory() -> bool:
    """glibc keeps freed memory in this process (the package's ``harness.memory.keep_freed_memory``).

    Imported when called: the harness package imports ``nn``, which ``import_before`` must
    import from another copy first.
    """
    from topomodelx_attention.harness.memory import keep_freed_memory as keep

    return keep()


def memory_fwd_bwd(fn: Callable[[], Tensor], device: torch.device) -> float:
    """MiB saved for backward (CPU) or peak allocated during forward+backward (CUDA)."""
    return measure_once(fn, device)[1]


def padded(x: Tensor, batch: Tensor, num_graphs: int) -> tuple[Tensor, Tensor]:
    """(B, L_max, d) padded copy and the key-padding mask (True = padding)."""
    counts = torch.bincount(batch, minlength=num_graphs)
    length = int(counts.max())
    ptr = torch.cumsum(counts, 0) - counts
    pos = torch.arange(batch.numel(), device=x.device) - ptr[batch]
    out = x.new_zeros(num_graphs, length, x.shape[1])
    out[batch, pos] = x
    pad = torch.arange(length, device=x.device)[None, :] >= counts[:, None]
    return out, pad


# ----------------------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------------------
def fmt_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n### {title}\n")
    print(fmt_row(header))
    print(fmt_row(["---"] * len(header)))
    for row in rows:
        print(fmt_row(row))


# ----------------------------------------------------------------------------------------------
# before / after
# ----------------------------------------------------------------------------------------------
def import_before(argv: list[str]) -> type | None:
    """``CellularTransformer`` of the copy named by ``--before DIR``: its ``nn``, this ``data``.

    This checkout's package and its ``data`` subpackage are imported first (so both models
    read the same ``ComplexData`` batches); then the other copy's ``nn`` is imported in its
    place and its modules are taken out of ``sys.modules`` again (its classes keep them alive),
    so that this checkout's ``nn`` is imported next as usual.
    """
    if "--before" not in argv or argv.index("--before") + 1 >= len(argv):
        return None
    directory = (Path(argv[argv.index("--before") + 1]) / "topomodelx_attention").resolve()
    if not directory.is_dir():
        raise ValueError(f"--before {directory.parent}: no topomodelx_attention/ package in it")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout
    import topomodelx_attention as package
    import topomodelx_attention.data

    path = package.__path__
    package.__path__ = [str(directory)]
    try:
        from topomodelx_attention.nn.cell import CellularTransformer as before

        if not Path(inspect.getfile(before)).resolve().is_relative_to(directory):
            raise ValueError(f"--before {directory.parent}: its CellularTransformer was not imported")
    finally:
        package.__path__ = path
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None) or ""
            if name.startswith("topomodelx_attention.") and Path(file).resolve().is_relative_to(directory):
                del sys.modules[name]
    return before


# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------
def add_common_args(
    parser: argparse.ArgumentParser,
    *,
    repeats: int,
    quick: str,
    clocks: dict[str, Callable[[], float]],
    clock: str,
    clock_help: str | None = None,
) -> None:
    """Add the options of the CT-vs-GPS epoch benchmarks (``ct_step``, ``user_loop``).

    Timing (``--quick`` with its help ``quick``, ``--repeats`` defaulting to ``repeats``,
    ``--warmup``, ``--threads``, ``--clock`` among ``clocks``, default ``clock``) and the model
    size (``--hidden``, ``--layers``, ``--heads``, ``--pe-dim``).
    """
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--clock", choices=sorted(clocks), default=clock, help=clock_help)
    add_int_options(parser, repeats=repeats, warmup=2, threads=1, hidden=32, layers=2, heads=4, pe_dim=8)


def add_int_options(parser: argparse.ArgumentParser, **defaults: int) -> None:
    """Add one integer option ``--name`` per keyword (``_`` written ``-``), with its default."""
    for name, default in defaults.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
