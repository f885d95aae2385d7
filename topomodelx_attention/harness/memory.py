"""The C allocator's settings for a training process: freed memory kept for reuse (glibc only).

A training step on large complexes allocates and frees the same tensors of tens of MB every step
(the fused sparse kernel's ``nnz·heads`` scores, weights and gathers, one per layer). glibc's
``malloc`` serves every block above its mmap threshold (dynamic, at most 32 MiB by default) with
a fresh ``mmap`` and unmaps it on ``free``, and it trims freed memory at the top of its heap:
the next step maps the memory again, and the kernel faults in and zeroes every page at its first
write. :func:`keep_freed_memory` sets the threshold to 2 GiB (``mallopt``'s largest ``int``) and
turns trimming off (``M_TRIM_THRESHOLD = -1``, documented in ``mallopt(3)``; a finite trim
threshold is at most 2 GiB, and a step on 10⁶ cells frees more than that at the heap's top), so
freed blocks stay in the process and are reused. Measured (``benchmarks/README.md``): a CT
layer's time per stored entry without it is 2.9× higher at 10⁶ cells than at 10⁴, and flat with
it; on the GraphUniverse grid's batches (10⁴ cells, 1.5·10⁶ joined entries) it cuts the page
faults of a training step from ~83,000 to ~18,000 (``benchmarks/keep_freed_memory.py``), a time
difference within the noise of a shared machine, at up to 6 % more peak memory.

The setting is process-wide and cannot be undone: the harness applies it once per run when
``trainer.keep_freed_memory`` is on (default off). In your own loop, set glibc's variables
before Python starts instead: ``MALLOC_MMAP_THRESHOLD_=2147483647
MALLOC_TRIM_THRESHOLD_=1099511627776`` (or ``LD_PRELOAD`` jemalloc / tcmalloc).
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Callable
from typing import Any

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory", "peak_tensor_bytes"]

#: ``mallopt`` parameters of glibc's ``<malloc.h>``.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

#: Blocks up to this size come from the heap (``mallopt`` takes an ``int``).
MMAP_THRESHOLD: int = 2**31 - 1

#: ``M_TRIM_THRESHOLD`` of -1: the heap's free top is never given back to the kernel.
TRIM_THRESHOLD: int = -1

#: glibc's environment variables for the two settings: set by a user, they are left alone.
_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def keep_freed_memory() -> bool:
    """Keep freed memory in the process for reuse (glibc's ``mallopt``; see the module docstring).

    Sets ``M_MMAP_THRESHOLD`` to :data:`MMAP_THRESHOLD` and ``M_TRIM_THRESHOLD`` to
    :data:`TRIM_THRESHOLD` for the whole process.

    Returns
    -------
    bool
        ``True`` when both settings were applied; ``False`` (nothing changed) on a C library
        other than glibc (macOS, Windows, musl) or when the user set glibc's variables
        (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) themselves.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in _ENVIRONMENT):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def peak_tensor_bytes(fn: Callable[[], Any], device: Any = "cpu") -> int:
    """Peak live tensor bytes allocated while running ``fn`` (memory held before is not counted).

    On CUDA the peak allocated memory above what was allocated before; on the CPU the running
    sum of the profiler's ``[memory]`` events (allocations positive, frees negative), in time
    order.

    Parameters
    ----------
    fn : callable
        The work to measure.
    device : torch.device or str, default="cpu"
        Where its tensors live.

    Returns
    -------
    int
        Bytes.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"), key=lambda e: e.start_ns()
    )
    live = peak = 0
    for event in events:
        live += event.nbytes()
        peak = max(peak, live)
    return peak
