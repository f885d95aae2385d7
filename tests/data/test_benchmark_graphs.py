"""Readers of GCB (.npz) and ZINC-12k (CSV) files, on tiny generated files."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from tests.harness.files import write_gcb, write_zinc
from topomodelx_attention.data.benchmark_graphs import gcb_graph, read_gcb, read_zinc12k


@pytest.fixture
def gcb_file(tmp_path):
    return write_gcb(tmp_path)


@pytest.fixture
def zinc_dir(tmp_path):
    return write_zinc(tmp_path)


def test_gcb_graph_symmetrises_and_drops_the_diagonal():
    adjacency = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=float))
    graph = gcb_graph(adjacency, np.eye(3), np.array([0, 0, 1]))
    assert graph.y.tolist() == [2]
    assert graph.num_nodes == 3
    pairs = set(map(tuple, graph.edge_index.t().tolist()))
    assert pairs == {(0, 1), (1, 0), (1, 2), (2, 1)}


def test_read_gcb_keeps_the_files_split(gcb_file):
    graphs = read_gcb(gcb_file)
    assert {k: len(v) for k, v in graphs.items()} == {"train": 6, "val": 3, "test": 3}
    g = graphs["train"][0]
    assert g.x.shape[1] == 5 and g.x.dtype == torch.float32
    assert g.y.dtype == torch.long and 0 <= int(g.y) < 3


def test_read_gcb_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"hard_small\.npz.*data_dir"):
        read_gcb(tmp_path / "hard_small.npz")


def test_read_zinc_split_and_limits(zinc_dir):
    pytest.importorskip("rdkit")
    graphs = read_zinc12k(zinc_dir)
    assert {k: len(v) for k, v in graphs.items()} == {"train": 6, "val": 3, "test": 3}
    first = graphs["train"][0]
    assert first.x.dtype == torch.long and first.edge_attr.dtype == torch.long
    assert first.y.tolist() == [-1.0]  # score of row 0
    small = read_zinc12k(zinc_dir, {"train": 2, "test": 1})
    assert [len(small[k]) for k in ("train", "val", "test")] == [2, 3, 1]


def test_read_zinc_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"smiles_score\.csv"):
        read_zinc12k(tmp_path)
