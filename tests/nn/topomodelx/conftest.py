"""Fixtures of the TopoModelX drop-in tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def single_thread():
    """One intra-op thread: the inputs are tiny (thread-pool overhead dominates otherwise)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
