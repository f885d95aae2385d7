"""Shared fixtures: tiny hand-made graphs (no files from ../shared)."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from tests.helpers import graph_from_edges


@pytest.fixture
def square_with_diagonal() -> Data:
    return graph_from_edges([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], y=torch.tensor([1]))


@pytest.fixture
def triangle() -> Data:
    return graph_from_edges([(0, 1), (1, 2), (2, 0)])


@pytest.fixture
def path_graph() -> Data:
    return graph_from_edges([(0, 1), (1, 2), (2, 3)])
