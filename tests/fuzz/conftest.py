"""Budget of the fuzz suite: a few seeded cases per test in CI, thousands on demand.

``TMA_FUZZ_CASES=N`` (environment) or ``pytest --fuzz-cases N`` sets the number of random cases
each fuzz test draws (default :data:`tests.fuzz.cases.DEFAULT_CASES`). Cases are seeded by their
index, so a failure names a seed that reproduces it (``TMA_FUZZ_SEED=<seed>`` reruns only it).
"""

from __future__ import annotations

import os

import pytest

from tests.fuzz.cases import DEFAULT_CASES
from tests.helpers import single_thread  # noqa: F401 (autouse fixture: one intra-op thread)


def pytest_addoption(parser):
    parser.addoption(
        "--fuzz-cases", type=int, default=None,
        help="random cases per fuzz test (default: $TMA_FUZZ_CASES or a small CI budget)",
    )


@pytest.fixture(scope="session")
def fuzz_seeds(request) -> list[int]:
    """Seeds of the cases each fuzz test runs."""
    only = os.environ.get("TMA_FUZZ_SEED")
    if only:
        return [int(s) for s in only.split(",")]
    cases = request.config.getoption("--fuzz-cases")
    if cases is None:
        cases = int(os.environ.get("TMA_FUZZ_CASES", DEFAULT_CASES))
    if cases < 1:
        raise pytest.UsageError(f"--fuzz-cases / TMA_FUZZ_CASES must be positive, got {cases}")
    return list(range(cases))
