"""The positional-encoding tests under several OpenBLAS kernels.

ARPACK's behaviour depends on the BLAS kernel: with OpenBLAS's Haswell kernel (the one SciPy's
bundled OpenBLAS picks on this project's AMD EPYC machines) ``eigsh`` raised ``ArpackError 3``
("No shifts could be applied") on a Hodge Laplacian with a large kernel, and
``tests/transforms/test_pe_robustness.py`` failed. This script runs the PE test files in one
subprocess per ``OPENBLAS_CORETYPE`` setting (``unset`` = OpenBLAS's own detection) and prints
one table: the kernel SciPy's and NumPy's OpenBLAS actually use (``threadpoolctl``), the
pytest outcome and the wall time.

A kernel the CPU cannot run (``SkylakeX`` / ``Cooperlake`` need AVX-512) makes the process die
with ``SIGILL`` on its first BLAS call; the table says so ("not runnable on this CPU") instead
of counting it as a test failure. The script exits with status 1 when a runnable setting has a
failing test.

Result on this project's machine (AMD EPYC without AVX-512, 2 shared cores; SciPy 1.17.1
with its bundled OpenBLAS 0.3.30, NumPy's OpenBLAS 0.3.23), both PE test files:

==================  ==========================  ==============================================
OPENBLAS_CORETYPE   kernels in use              result
==================  ==========================  ==============================================
unset               numpy=Zen, scipy=Haswell    95 passed
Haswell             both Haswell                95 passed
SkylakeX            —                           not runnable on this CPU (SIGILL)
Zen                 numpy=Zen, scipy=Haswell    95 passed
Sandybridge         both Sandybridge            95 passed
==================  ==========================  ==============================================

Usage::

    python benchmarks/pe_blas.py                                   # unset, Haswell, SkylakeX
    python benchmarks/pe_blas.py --coretypes unset Haswell Zen Sandybridge Prescott
    python benchmarks/pe_blas.py --tests tests/transforms/test_pe_robustness.py -k iterative
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_TESTS = [
    "tests/transforms/test_pe_robustness.py",
    "tests/transforms/test_positional_encodings.py",
]
DEFAULT_CORETYPES = ["unset", "Haswell", "SkylakeX"]

_PROBE = """
import json, numpy, scipy.linalg
from threadpoolctl import threadpool_info
a = numpy.ones((64, 64)); a @ a; scipy.linalg.eigh(a)   # first BLAS calls: SIGILL here
print(json.dumps({i["prefix"]: i.get("architecture") for i in threadpool_info()
                  if i.get("internal_api") == "openblas"}))
"""


def _environment(coretype: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype != "unset":
        env["OPENBLAS_CORETYPE"] = coretype
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _killed_by_sigill(returncode: int) -> bool:
    return returncode in (-signal.SIGILL, 128 + signal.SIGILL)


def probe(coretype: str, timeout: float) -> tuple[str, bool]:
    """The OpenBLAS kernels in use under ``coretype`` (``"scipy=..., numpy=..."``), runnable."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=_environment(coretype),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if _killed_by_sigill(result.returncode):
        return "SIGILL (needs AVX-512 or similar)", False
    if result.returncode != 0:
        return f"probe failed (rc {result.returncode}): {result.stderr.strip()[-200:]}", False
    kernels = json.loads(result.stdout.strip().splitlines()[-1])
    names = {"libscipy_openblas": "scipy", "libopenblas": "numpy"}
    return ", ".join(f"{names.get(k, k)}={v}" for k, v in sorted(kernels.items())), True


def run_tests(
    coretype: str, tests: list[str], extra: list[str], timeout: float
) -> tuple[str, float, int]:
    """Run pytest on ``tests`` under ``coretype``: (summary line, seconds, return code)."""
    start = time.perf_counter()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests, *extra],
            env=_environment(coretype),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s", time.perf_counter() - start, 124
    seconds = time.perf_counter() - start
    if _killed_by_sigill(result.returncode):
        return "SIGILL", seconds, result.returncode
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    summary = next(
        (line.strip("= ") for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)),
        lines[-1] if lines else result.stderr.strip()[-200:],
    )
    summary = re.sub(r" in [\d.]+s.*$", "", summary)
    failed = [line.split(" ", 1)[1] for line in lines if line.startswith("FAILED ")]
    if failed:
        summary += " — " + "; ".join(failed)
    return summary, seconds, result.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--coretypes",
        nargs="+",
        default=DEFAULT_CORETYPES,
        help="OPENBLAS_CORETYPE values ('unset' removes the variable); default: %(default)s",
    )
    parser.add_argument(
        "--tests", nargs="+", default=DEFAULT_TESTS, help="test files; default: %(default)s"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per setting")
    parser.add_argument("-k", default=None, help="pytest -k expression")
    args = parser.parse_args(argv)
    extra = ["-k", args.k] if args.k else []

    print(f"OPENBLAS_CORETYPE in this shell: {os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"tests: {' '.join(args.tests)}{' -k ' + args.k if args.k else ''}\n")
    header = f"| {'OPENBLAS_CORETYPE':<17} | {'kernels in use':<38} | {'time':>7} | result"
    print(header)
    print("|" + "-" * 19 + "|" + "-" * 40 + "|" + "-" * 9 + "|" + "-" * 40)
    status = 0
    for coretype in args.coretypes:
        kernels, runnable = probe(coretype, timeout=120)
        if not runnable:
            print(f"| {coretype:<17} | {kernels[:38]:<38} | {'-':>7} | not runnable on this CPU")
            continue
        summary, seconds, code = run_tests(coretype, args.tests, extra, args.timeout)
        if code != 0:
            status = 1
        print(f"| {coretype:<17} | {kernels:<38} | {seconds:6.1f}s | {summary}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
