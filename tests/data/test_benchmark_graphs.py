"""Readers of GCB (.npz) and ZINC-12k (CSV) files, on tiny generated files."""

import re

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from tests.harness.files import write_gcb, write_zinc
from topomodelx_attention.data.benchmark_graphs import (
    convert_gcb,
    gcb_graph,
    gcb_plain_path,
    read_gcb,
    read_zinc12k,
)


@pytest.fixture
def gcb_file(tmp_path):
    """A converted (plain) GCB file."""
    return convert_gcb(write_gcb(tmp_path))


# The global a pickled ``open`` names: ``io.open`` up to Python 3.11, ``_io.open`` from 3.12.
OPEN_GLOBAL = f"{open.__module__}.{open.__qualname__}"


class _TouchOnUnpickle:
    """Unpickling this object opens (creates) ``marker`` — what an attacker's payload would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _objects(items):
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def _original_gcb(tmp_path, adjacency=None):
    """An original-format GCB file (object arrays of scipy CSR) and the graphs it must give."""
    rng = np.random.default_rng(1)
    data, expected = {}, {}
    for prefix, split, count in (("tr", "train", 3), ("val", "val", 2), ("te", "test", 2)):
        mats, feats, labels = [], [], []
        for i in range(count):
            n = int(rng.integers(3, 7))
            dense = np.triu(rng.random((n, n)) < 0.5, 1)
            mats.append(sp.csr_matrix((dense | dense.T).astype(np.float32)))
            feats.append(np.eye(5, dtype=np.float32)[rng.integers(0, 5, n)])
            labels.append(np.eye(3, dtype=np.float32)[i % 3])
        data[f"{prefix}_adj"] = _objects(mats if adjacency is None else adjacency)
        data[f"{prefix}_feat"] = _objects(feats)
        data[f"{prefix}_class"] = np.stack(labels)
        expected[split] = [gcb_graph(a, f, c) for a, f, c in zip(mats, feats, labels)]
    path = tmp_path / "hard_small.npz"
    np.savez(path, **data)
    return path, expected


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


def test_convert_gcb_then_read_gives_the_same_graphs(tmp_path):
    src, expected = _original_gcb(tmp_path)
    dst = convert_gcb(src)
    assert dst == gcb_plain_path(src) == tmp_path / "hard_small.plain.npz"
    with np.load(dst, allow_pickle=False) as archive:  # plain numeric arrays only
        assert all(not archive[key].dtype.hasobject for key in archive.files)
    graphs = read_gcb(dst)
    for split, graphs_expected in expected.items():
        assert len(graphs[split]) == len(graphs_expected)
        for got, want in zip(graphs[split], graphs_expected):
            assert torch.equal(got.x, want.x) and torch.equal(got.edge_index, want.edge_index)
            assert torch.equal(got.y, want.y) and got.num_nodes == want.num_nodes


def test_read_gcb_refuses_the_pickled_original_and_names_the_conversion(tmp_path):
    src, _ = _original_gcb(tmp_path)
    with pytest.raises(ValueError, match=r"hard_small\.npz.*pickled Python objects.*convert-gcb") as info:
        read_gcb(src)
    assert str(gcb_plain_path(src)) in str(info.value)


def test_malicious_gcb_never_runs_code(tmp_path):
    import pickle

    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_TouchOnUnpickle(probe)))  # plain unpickling does run the payload
    assert probe.exists()
    marker = tmp_path / "pwned"
    src, _ = _original_gcb(tmp_path, adjacency=[_TouchOnUnpickle(marker)] * 3)
    with pytest.raises(ValueError, match=r"hard_small\.npz.*pickled"):
        read_gcb(src)
    assert not marker.exists()
    with pytest.raises(ValueError, match=rf"hard_small\.npz.*disallowed global {re.escape(OPEN_GLOBAL)}"):
        convert_gcb(src)
    assert not marker.exists()
    assert not gcb_plain_path(src).exists()


@pytest.mark.parametrize("content", [b"", b"garbage bytes, not a zip", "truncated"])
def test_read_gcb_damaged_file_names_it(tmp_path, gcb_file, content):
    if content == "truncated":
        content = gcb_file.read_bytes()[: gcb_file.stat().st_size // 2]
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match=r"bad\.npz"):
        read_gcb(bad)
    with pytest.raises(ValueError, match=r"bad\.npz"):
        convert_gcb(bad, tmp_path / "out.npz")


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


@pytest.mark.parametrize(
    ("file", "row", "error"),
    [
        ("smiles_score.csv", ["CCO", 2.0, 1.0, "not-a-number"], r"smiles_score\.csv, line 3: column score"),
        ("smiles_score.csv", ["C1CC", 2.0, 1.0, 0.5], r"smiles_score\.csv, line 3: .*SMILES"),
        ("smiles_score.csv", ["CCO", 2.0], r"smiles_score\.csv, line 3: expected 4 columns"),
        ("indexes_train_val_test.csv", ["x", "", ""], r"indexes_train_val_test\.csv, line 2: column train"),
    ],
)
def test_read_zinc_bad_rows_name_the_file_and_line(tmp_path, file, row, error):
    pytest.importorskip("rdkit")
    import csv

    folder = write_zinc(tmp_path)
    path = folder / file
    lines = path.read_text().splitlines()
    buffer = __import__("io").StringIO()
    csv.writer(buffer).writerow(row)
    position = 2 if file == "smiles_score.csv" else 1  # molecule row 1 / the first split row
    lines[position] = buffer.getvalue().strip()
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=error):
        read_zinc12k(folder)


def test_read_zinc_binary_file_names_it(tmp_path):
    folder = write_zinc(tmp_path)
    (folder / "smiles_score.csv").write_bytes(b"SMILES,SA,logp,score\n\xff\xfe\x00bad\n")
    with pytest.raises(ValueError, match=r"smiles_score\.csv is not a UTF-8 text file"):
        read_zinc12k(folder)
