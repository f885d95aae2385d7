"""Data sets of the harness: splits, loaders on tiny files, cached lifting + PE."""

from typing import ClassVar

import numpy as np
import pytest
import torch

import topomodelx_attention.harness.datasets as datasets
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.datasets import (
    cache_key,
    load_graphs,
    prepare_dataset,
    prune_keys,
    random_split,
)

CELL = {"_target_": "topomodelx_attention.transforms.CellCycleLifting"}
PE = {"_target_": "topomodelx_attention.transforms.BarycentricRandomWalkPE", "dim": 4}


@pytest.mark.parametrize("n", [10, 188, 1113])
def test_random_split_is_disjoint_50_25_25_and_reproducible(n):
    train, val, test = random_split(n, seed=3)
    assert len(train) == round(0.5 * n) and len(val) == round(0.25 * n)
    assert len(train) + len(val) + len(test) == n
    union = np.concatenate([train, val, test])
    assert np.array_equal(np.sort(union), np.arange(n))  # disjoint and covering
    again = random_split(n, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((train, val, test), again))
    other = random_split(n, seed=4)
    assert not np.array_equal(train, other[0])


def test_random_split_rejects_bad_proportions():
    with pytest.raises(ValueError, match="train_prop"):
        random_split(10, 0, 0.8, 0.3)


def _dataset_cfg(name, **changes):
    cfg = compose_config(dataset=name).dataset
    for key, value in changes.items():
        cfg[key] = value
    return cfg


def test_mutag_cache_is_reused_and_keyed_by_the_configuration(tmp_path, monkeypatch):
    cfg = _dataset_cfg("MUTAG", max_graphs=12)
    first = prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    assert first.cache_file.is_file() and first.cache_file.with_suffix(".json").is_file()
    assert len(first.complexes) == 12 and first.info.pe_channels == 4
    assert first.info.in_channels == [7, 4, 7] and first.info.max_rank == 2
    assert first.complexes[0].pe_1.shape[1] == 4

    def fail(*args, **kwargs):
        raise AssertionError("the second load must read the cache, not process again")

    monkeypatch.setattr(datasets, "_process", fail)
    second = prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    assert second.cache_file == first.cache_file
    assert torch.equal(second.complexes[3].x_0, first.complexes[3].x_0)
    # another PE (or lifting) configuration gets its own cache file
    other_pe = {**PE, "dim": 3}
    assert cache_key(cfg, CELL, other_pe) != cache_key(cfg, CELL, PE)
    with pytest.raises(AssertionError, match="read the cache"):
        prepare_dataset(cfg, CELL, other_pe, cache_dir=tmp_path)


def test_mutag_random_splits_per_seed(tmp_path):
    prepared = prepare_dataset(_dataset_cfg("MUTAG", max_graphs=20), CELL, None, cache_dir=tmp_path)
    train, val, test = prepared.split(1)
    assert (len(train), len(val), len(test)) == (10, 5, 5)
    ids = lambda part: {id(c) for c in part.complexes}  # noqa: E731
    assert not ids(train) & ids(val) and not ids(train) & ids(test) and not ids(val) & ids(test)
    assert ids(prepared.split(1)[0]) == ids(train)
    assert ids(prepared.split(2)[0]) != ids(train)


def test_gcb_fixed_split_with_concatenated_endpoint_edge_features(tmp_path, gcb_file):
    from topomodelx_attention.data.benchmark_graphs import convert_gcb

    convert_gcb(gcb_file)  # hard_small.plain.npz next to it: read instead of the pickled original
    cfg = _dataset_cfg("GCB", data_dir=str(gcb_file.parent))
    prepared = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    train, val, test = prepared.split(123)
    assert (len(train), len(val), len(test)) == (6, 3, 3)
    assert prepared.split(7)[0].complexes == train.complexes  # fixed: the seed does not matter
    assert prepared.info.in_channels == [5, 10, 5]  # x_1 = [x_u, x_v]
    assert prepared.info.out_channels == 3


def test_zinc_loader_categorical_features(tmp_path, zinc_dir):
    pytest.importorskip("rdkit")
    cfg = _dataset_cfg("ZINC", data_dir=str(zinc_dir), subset={"train": 4, "val": None, "test": 2})
    graphs = load_graphs(cfg, tmp_path)
    assert [len(graphs[k]) for k in ("train", "val", "test")] == [4, 3, 2]
    prepared = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert prepared.info.task == "regression" and prepared.info.metric == "mae"
    assert prepared.info.categorical == [[29], [4], None]
    assert prepared.info.in_channels == [1, 1, 29]
    assert prepared.complexes[0].x_0.dtype == torch.long


def test_missing_data_files_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"dataset\.data_dir"):
        load_graphs(_dataset_cfg("GCB"), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"hard_small\.npz"):
        load_graphs(_dataset_cfg("GCB", data_dir=str(tmp_path)), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"PROTEINS_A\.txt"):
        load_graphs(_dataset_cfg("PROTEINS", data_dir=str(tmp_path)), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"smiles_score\.csv"):
        load_graphs(_dataset_cfg("ZINC", data_dir=str(tmp_path)), tmp_path)


def test_bad_transform_config_raises(tmp_path):
    with pytest.raises(ValueError, match="_target_"):
        prepare_dataset(_dataset_cfg("MUTAG", max_graphs=4), {"max_cell_length": 3}, None, tmp_path)


def test_prune_keys_keeps_what_models_read(tmp_path):
    prepared = prepare_dataset(_dataset_cfg("MUTAG", max_graphs=3), CELL, None, cache_dir=tmp_path)
    prune_keys(prepared.complexes, {"x_0", "batch_0", "edge_index"})
    assert set(prepared.complexes[0].keys()) == {"x_0", "batch_0", "edge_index", "y", "shape", "num_nodes"}


# ------------------------------------------------------------------ cache files (never unpickled)
def _mutag_cache(tmp_path):
    cfg = _dataset_cfg("MUTAG", max_graphs=6)
    first = prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    return cfg, first


def test_cache_round_trip_keeps_every_key(tmp_path):
    _cfg, first = _mutag_cache(tmp_path)
    again = datasets.load_cache(first.cache_file)["complexes"]
    for a, b in zip(first.complexes, again):
        assert set(a.keys()) == set(b.keys())
        for key in a.keys():
            if isinstance(a[key], torch.Tensor):
                assert a[key].layout == b[key].layout and a[key].dtype == b[key].dtype
                if a[key].is_sparse:
                    assert b[key].is_coalesced() == a[key].is_coalesced()
                    assert torch.equal(a[key].to_dense(), b[key].to_dense()), key
                else:
                    assert torch.equal(a[key], b[key]), key
            else:
                assert a[key] == b[key]


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("kind", ["malicious", "truncated", "garbage", "empty", "wrong_type"])
def test_invalid_cache_file_is_warned_deleted_and_rebuilt(tmp_path, kind):
    import pickle

    cfg, first = _mutag_cache(tmp_path)
    path = first.cache_file
    marker = tmp_path / "pwned"
    if kind == "malicious":
        path.write_bytes(pickle.dumps(_Payload(marker)))
    elif kind == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif kind == "garbage":
        path.write_bytes(b"\x89garbage" * 100)
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        torch.save([1, 2, 3], path)  # a valid torch file of another kind
    with pytest.warns(UserWarning, match=rf"{path.name}.*deleted and is being rebuilt"):
        second = prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    assert not marker.exists()
    assert len(second.complexes) == 6 and torch.equal(second.complexes[2].x_0, first.complexes[2].x_0)
    assert len(datasets.load_cache(path)["complexes"]) == 6  # a valid file again


def test_cache_with_out_of_range_sparse_indices_is_rejected(tmp_path):
    _cfg, first = _mutag_cache(tmp_path)
    raw = torch.load(first.cache_file, weights_only=True)
    raw["complexes"]["adjacency_0"]["indices"][0, 0] = 10**6
    torch.save(raw, first.cache_file)
    with pytest.raises(ValueError, match="outside its matrices"):
        datasets.load_cache(first.cache_file)


def test_orphan_temporary_files_of_a_killed_save_are_cleaned(tmp_path):
    import socket
    import subprocess
    import sys

    cfg, first = _mutag_cache(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = first.cache_file.parent
    orphan = folder / f"{first.cache_file.name}.{socket.gethostname()}.{int(dead.stdout)}.tmp"
    orphan.write_bytes(b"half written")
    legacy = folder / "tmpabc123.tmp"  # mkstemp name of older versions
    legacy.write_bytes(b"x")
    import os

    os.utime(legacy, (1, 1))
    alive = folder / f"other.pt.{socket.gethostname()}.{os.getpid()}.tmp"  # this process: kept
    alive.write_bytes(b"x")
    prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    assert not orphan.exists() and not legacy.exists()
    assert alive.exists()


def test_tiny_tu_data_set_by_name_reads_classes_and_widths_from_files(tmp_path):
    from tests.test_cli_faults import write_tiny_tu

    write_tiny_tu(tmp_path / "data")
    cfg = compose_config(["dataset.data_dir=" + str(tmp_path / "data")], dataset="TINY").dataset
    assert cfg.name == "TINY" and cfg.num_classes is None
    prepared = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert len(prepared.complexes) == 4
    assert prepared.info.out_channels == 2  # labels 1 / -1 remapped to 0 / 1
    assert prepared.info.task == "classification" and prepared.info.metric == "accuracy"
    assert prepared.info.in_channels[0] == 3  # 3 one-hot node labels
    assert sorted(int(c.y) for c in prepared.complexes) == [0, 0, 1, 1]


def test_tu_without_node_features_gets_a_constant_column(tmp_path):
    from tests.test_cli_faults import write_tiny_tu

    raw = write_tiny_tu(tmp_path / "data", name="BARE")
    (raw / "BARE_node_labels.txt").unlink()
    graphs = load_graphs({"name": "BARE", "loader": "tu", "data_dir": str(tmp_path / "data")}, tmp_path)
    assert all(g.x.shape == (g.num_nodes, 1) and bool((g.x == 1).all()) for g in graphs)


def test_num_classes_smaller_than_the_labels_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="num_classes=1"):
        prepare_dataset(_dataset_cfg("MUTAG", max_graphs=20, num_classes=1), CELL, None, cache_dir=tmp_path)


# ------------------------------------------------------------------ progress bars, names, options
class _RecordingBar:
    """Stands in for tqdm: records the total, the updates and ``disable``."""

    bars: ClassVar[list] = []

    def __init__(self, total=None, disable=False, **kwargs):
        self.total, self.disable, self.updates = total, disable, []
        _RecordingBar.bars.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.updates.append(n)


@pytest.mark.parametrize("chunk_size", [1, 4, 256])
def test_lifting_bar_counts_each_graph_once(monkeypatch, chunk_size):
    from topomodelx_attention.data.datasets import load_tu_graphs
    from topomodelx_attention.transforms import BarycentricRandomWalkPE, CellCycleLifting

    monkeypatch.setattr(datasets, "tqdm", _RecordingBar)
    _RecordingBar.bars = []
    graphs = load_tu_graphs("MUTAG")[:9]
    out = datasets.process_graphs(graphs, CellCycleLifting(), BarycentricRandomWalkPE(dim=2), chunk_size=chunk_size)
    (bar,) = _RecordingBar.bars
    assert len(out) == 9 and all("pe_0" in c for c in out)  # lifted and encoded
    assert bar.total == 9 and sum(bar.updates) == 9  # one count per graph, lifting + PE together


def test_lifting_bar_only_when_asked_or_on_a_terminal(monkeypatch):
    from topomodelx_attention.transforms import CellCycleLifting

    monkeypatch.setattr(datasets, "tqdm", _RecordingBar)
    _RecordingBar.bars = []
    graphs = load_graphs(_dataset_cfg("MUTAG", max_graphs=2))
    datasets.process_graphs(graphs, CellCycleLifting())  # default: tqdm's disable=None (a TTY only)
    with datasets.progress_bars(False):
        datasets.process_graphs(graphs, CellCycleLifting())
        datasets.process_graphs(graphs, CellCycleLifting(), progress=True)  # explicit wins
    with datasets.progress_bars(True):
        datasets.process_graphs(graphs, CellCycleLifting())
    datasets.process_graphs(graphs, CellCycleLifting())  # the block is over
    assert [bar.disable for bar in _RecordingBar.bars] == [None, True, False, False, None]


def test_real_tqdm_draws_nothing_on_a_pipe(capsys):
    from topomodelx_attention.transforms import CellCycleLifting

    graphs = load_graphs(_dataset_cfg("MUTAG", max_graphs=2))
    datasets.process_graphs(graphs, CellCycleLifting())  # pytest's captured stderr is no terminal
    assert capsys.readouterr().err == ""
    datasets.process_graphs(graphs, CellCycleLifting(), progress=True)
    assert "graph" in capsys.readouterr().err  # the bar exists and would be drawn when asked


def test_misspelled_data_set_leaves_no_empty_processed_folder(tmp_path):
    from topomodelx_attention.harness.datasets import _check_writable

    # the unprotected path: the fail-fast writability probe creates processed/<name>/
    probe = tmp_path / "probe" / "processed" / "X"
    _check_writable(probe)
    assert probe.is_dir()
    (tmp_path / "data").mkdir()
    cfg = compose_config(["dataset.data_dir=" + str(tmp_path / "data")], dataset="ENZYMSE").dataset
    with pytest.raises(FileNotFoundError, match=r"ENZYMSE_A\.txt"):
        prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # every folder this call created, removed again
    (tmp_path / "cache").mkdir()
    with pytest.raises(FileNotFoundError):
        prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []  # an existing (e.g. --cache-dir) folder stays
    # an existing processed/ folder with other data sets is kept
    prepare_dataset(_dataset_cfg("MUTAG", max_graphs=2), CELL, None, cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError):
        prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache" / "processed").iterdir()) == ["MUTAG"]


def test_gcb_without_the_default_file_names_dataset_file_and_the_files_found(tmp_path, gcb_file):
    from topomodelx_attention.data.benchmark_graphs import convert_gcb

    gcb_file.rename(gcb_file.with_name("easy_small.npz"))
    cfg = _dataset_cfg("GCB", data_dir=str(gcb_file.parent))
    with pytest.raises(FileNotFoundError, match=r"hard_small\.npz not found.*easy_small\.npz: choose one with dataset\.file=NAME"):
        load_graphs(cfg, tmp_path)
    convert_gcb(gcb_file.with_name("easy_small.npz"))  # easy_small.plain.npz: still one choice
    with pytest.raises(FileNotFoundError, match=r"it holds easy_small\.npz: choose"):
        load_graphs(cfg, tmp_path)
    cfg.file = "easy_small.npz"
    prepared = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert prepared.info.name == "GCB-easy_small"  # tables and output folders name the file


def _tu_with_attributes(folder, name="ATTR"):
    """The tiny TU data set with 2 continuous node attributes next to its 3 node labels."""
    from tests.test_cli_faults import write_tiny_tu

    raw = write_tiny_tu(folder, name=name)
    rows = len((raw / f"{name}_graph_indicator.txt").read_text().split())
    (raw / f"{name}_node_attributes.txt").write_text("".join(f"{0.5 * i}, {-1.0 * i}\n" for i in range(rows)))
    return raw


def test_tu_use_node_attr_keeps_the_attributes(tmp_path):
    _tu_with_attributes(tmp_path / "data")
    cfg = compose_config(["dataset.data_dir=" + str(tmp_path / "data")], dataset="ATTR").dataset
    assert cfg.use_node_attr is False  # PyG's default: the labels only
    labels = load_graphs(cfg, tmp_path)
    assert labels[0].x.shape[1] == 3
    cfg.use_node_attr = True
    both = load_graphs(cfg, tmp_path)
    x = torch.cat([g.x for g in both])
    assert x.shape[1] == 5  # [2 attributes, 3 one-hot labels], as TUDataset(use_node_attr=True)
    assert torch.equal(x[:, :2], torch.tensor([[0.5 * i, -1.0 * i] for i in range(len(x))]))
    assert torch.equal(x[:, 2:], torch.cat([g.x for g in labels]))
    # a different cache entry, and the models see the wider features
    assert cache_key(cfg, CELL, None) != cache_key({**cfg, "use_node_attr": False}, CELL, None)
    prepared = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert prepared.info.in_channels[0] == 5
    cfg.use_node_attr = "yes"
    with pytest.raises(ValueError, match=r"dataset\.use_node_attr must be true or false"):
        load_graphs(cfg, tmp_path)
