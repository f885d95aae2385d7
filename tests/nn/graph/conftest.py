"""Fixtures of the graph-transformer tests."""

from tests.helpers import single_thread  # noqa: F401 (autouse fixture: one intra-op thread)
