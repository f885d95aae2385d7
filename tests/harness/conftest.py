"""Fixtures: tiny generated GCB and ZINC files in tmp_path."""

from __future__ import annotations

import pytest

from tests.harness.files import write_gcb, write_zinc


@pytest.fixture
def gcb_file(tmp_path):
    return write_gcb(tmp_path)


@pytest.fixture
def zinc_dir(tmp_path):
    return write_zinc(tmp_path)
