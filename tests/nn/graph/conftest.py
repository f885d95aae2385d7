"""Fixtures of the graph-transformer tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def single_thread():
    """Run on one intra-op thread: the inputs are tiny, and on a loaded machine the thread
    pool's synchronisation costs 10-100x the actual work. Restored after every test."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
