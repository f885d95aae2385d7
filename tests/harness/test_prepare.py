"""Data sets of the harness: splits, loaders on tiny files, cached lifting + PE."""

import json
import os
from typing import ClassVar

import numpy as np
import pytest
import torch

import topomodelx_attention.datasets.tu as tu
import topomodelx_attention.harness.prepare as prepare
from topomodelx_attention.datasets.cache import cache_key, load_cache, save_cache
from topomodelx_attention.datasets.registry import data_files, load_graphs
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.prepare import (
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

    monkeypatch.setattr(prepare, "_process", fail)
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
    from topomodelx_attention.datasets.gcb import convert_gcb

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
    again = load_cache(first.cache_file)["complexes"]
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
    assert len(load_cache(path)["complexes"]) == 6  # a valid file again


def test_cache_with_out_of_range_sparse_indices_is_rejected(tmp_path):
    _cfg, first = _mutag_cache(tmp_path)
    raw = torch.load(first.cache_file, weights_only=True)
    raw["complexes"]["adjacency_0"]["indices"][0, 0] = 10**6
    torch.save(raw, first.cache_file)
    with pytest.raises(ValueError, match="outside its matrices"):
        load_cache(first.cache_file)


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


# ------------------------------------------------------------------ the cache key covers the data
def _tiny_tu(folder, labels=None, name="TINY"):
    from tests.test_cli_faults import write_tiny_tu

    raw = write_tiny_tu(folder, name=name)
    if labels is not None:
        (raw / f"{name}_graph_labels.txt").write_text("".join(f"{v}\n" for v in labels))
    return raw


def _tiny_cfg(data_dir):
    return compose_config(["dataset.data_dir=" + str(data_dir)], dataset="TINY").dataset


def test_same_name_in_another_data_dir_gets_its_own_cache_entry_and_labels(tmp_path, monkeypatch):
    _tiny_tu(tmp_path / "A", labels=[1, -1, 1, -1])
    _tiny_tu(tmp_path / "B", labels=[-1, 1, -1, 1])  # same name, same sizes, other labels
    cache = tmp_path / "cache"
    first = prepare_dataset(_tiny_cfg(tmp_path / "A"), CELL, None, cache_dir=cache)
    second = prepare_dataset(_tiny_cfg(tmp_path / "B"), CELL, None, cache_dir=cache)
    assert second.cache_file != first.cache_file
    assert [int(c.y) for c in first.complexes] == [1, 0, 1, 0]
    assert [int(c.y) for c in second.complexes] == [0, 1, 0, 1]  # B's own labels, not A's
    description = json.loads(second.cache_file.with_suffix(".json").read_text())
    assert all(str((tmp_path / "B").resolve()) in s["path"] for s in description["sources"])

    def fail(*args, **kwargs):
        raise AssertionError("an unchanged data set must be read from the cache")

    monkeypatch.setattr(prepare, "_process", fail)
    again = prepare_dataset(_tiny_cfg(tmp_path / "A"), CELL, None, cache_dir=cache)
    assert again.cache_file == first.cache_file and [int(c.y) for c in again.complexes] == [1, 0, 1, 0]


def test_a_changed_or_touched_raw_file_gets_a_new_cache_entry(tmp_path):
    raw = _tiny_tu(tmp_path / "data", labels=[1, -1, 1, -1])
    cache = tmp_path / "cache"
    cfg = _tiny_cfg(tmp_path / "data")
    first = prepare_dataset(cfg, CELL, None, cache_dir=cache)
    labels = raw / "TINY_graph_labels.txt"
    stat = labels.stat()
    labels.write_text("-1\n1\n-1\n1\n")  # same size, and the old modification time restored:
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert labels.stat().st_size == stat.st_size and labels.stat().st_mtime_ns == stat.st_mtime_ns
    changed = prepare_dataset(cfg, CELL, None, cache_dir=cache)  # the digest still tells
    assert changed.cache_file != first.cache_file
    assert [int(c.y) for c in changed.complexes] == [0, 1, 0, 1]
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: a new entry too
    touched = prepare_dataset(cfg, CELL, None, cache_dir=cache)
    assert touched.cache_file not in (first.cache_file, changed.cache_file)
    (raw / "README.txt").write_text("not read by the TU reader")  # other files: same entry
    assert prepare_dataset(cfg, CELL, None, cache_dir=cache).cache_file == touched.cache_file
    nodes = len((raw / "TINY_graph_indicator.txt").read_text().split())
    (raw / "TINY_node_attributes.txt").write_text("0.5\n" * nodes)  # a file the reader reads: new entry
    assert prepare_dataset(cfg, CELL, None, cache_dir=cache).cache_file != touched.cache_file


def test_data_files_are_those_each_reader_reads(tmp_path, gcb_file, zinc_dir):
    from topomodelx_attention.datasets.gcb import convert_gcb, gcb_plain_path
    from topomodelx_attention.datasets.tu import embedded_raw_dir

    mutag = data_files(_dataset_cfg("MUTAG"), tmp_path)
    assert mutag == sorted(p.resolve() for p in embedded_raw_dir("MUTAG").glob("MUTAG_*.txt"))  # bundled
    raw = _tiny_tu(tmp_path / "tu")
    assert [p.name for p in data_files(_tiny_cfg(tmp_path / "tu"), tmp_path)] == [
        "TINY_A.txt", "TINY_graph_indicator.txt", "TINY_graph_labels.txt", "TINY_node_labels.txt"
    ]
    assert data_files(_tiny_cfg(tmp_path / "nowhere"), tmp_path) is None  # the reader raises
    gcb = _dataset_cfg("GCB", data_dir=str(gcb_file.parent))
    assert data_files(gcb, tmp_path) == [gcb_file.resolve()]
    convert_gcb(gcb_file)  # the converted file is read instead: the key follows it
    assert data_files(gcb, tmp_path) == [gcb_plain_path(gcb_file).resolve()]
    zinc = data_files(_dataset_cfg("ZINC", data_dir=str(zinc_dir)), tmp_path)
    assert [p.name for p in zinc] == ["indexes_train_val_test.csv", "smiles_score.csv"]
    assert data_files(_dataset_cfg("ZINC"), tmp_path) is None
    link = tmp_path / "link"
    link.symlink_to(raw.parent.parent, target_is_directory=True)  # the resolved location is hashed
    assert data_files(_tiny_cfg(link), tmp_path) == data_files(_tiny_cfg(tmp_path / "tu"), tmp_path)
    with pytest.raises(FileNotFoundError, match="cache key covers their content"):
        cache_key(_tiny_cfg(tmp_path / "nowhere"), CELL, None)


def test_downloaded_tu_files_are_fingerprinted_once_they_are_there(tmp_path, monkeypatch):
    from tests.test_cli_faults import write_tiny_tu

    calls = []
    real = tu.load_tu_graphs

    def download(name, data_dir=None, root=None, download=False, **options):  # what the TU download leaves
        calls.append(name)
        raw = root / name / "raw"
        if not raw.is_dir():
            write_tiny_tu(root, name=name)
        return real(name, data_dir=data_dir, root=root, download=download, **options)

    monkeypatch.setattr(tu, "load_tu_graphs", download)
    cfg = {"name": "TINY", "loader": "tu", "download": True}
    first = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path)
    assert first.cache_file.is_file() and len(first.complexes) == 4
    second = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path)
    assert second.cache_file == first.cache_file and calls == ["TINY"]  # the second run: the cache


def test_cache_writer_never_follows_planted_symlinks(tmp_path):
    import os
    import socket

    cfg, first = _mutag_cache(tmp_path)
    folder = first.cache_file.parent
    victim = tmp_path / "victim.txt"
    # the unprotected path: torch.save / write_bytes to a planted link write (truncate) its target
    bait = tmp_path / "bait.txt"
    bait.write_bytes(b"precious")
    (tmp_path / "link").symlink_to(bait)
    torch.save([1], tmp_path / "link")
    assert bait.read_bytes() != b"precious"
    victim.write_bytes(b"precious")
    host, pid = socket.gethostname(), os.getpid()
    planted = [  # every fixed name earlier versions wrote to, for this very process
        folder / f"{first.cache_file.name}.{host}.{pid}.tmp",
        folder / f".write-test.{host}.{pid}.tmp",
    ]
    for link in planted:
        link.symlink_to(victim)
    first.cache_file.unlink()
    second = prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)  # probes the folder, then saves
    save_cache({"complexes": second.complexes, "split": None}, first.cache_file)
    assert victim.read_bytes() == b"precious"
    assert all(link.is_symlink() for link in planted)  # this process's names: left alone
    assert len(load_cache(first.cache_file)["complexes"]) == 6
    assert not [p for p in folder.iterdir() if p.suffix == ".tmp" and p not in planted]


def test_cache_file_gets_plain_permissions_and_a_failed_save_leaves_nothing(tmp_path, monkeypatch):
    import os

    _cfg, first = _mutag_cache(tmp_path)
    umask = os.umask(0)
    os.umask(umask)
    assert first.cache_file.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0o600
    folder = first.cache_file.parent
    before = set(folder.iterdir())
    content = first.cache_file.read_bytes()

    def fail(obj, target, *args, **kwargs):  # a save that dies half way (disk full)
        if isinstance(target, (str, os.PathLike)):
            with open(target, "wb") as handle:
                handle.write(b"half")
        else:
            target.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", fail)
    with pytest.raises(OSError, match="No space left"):
        save_cache({"complexes": first.complexes, "split": None}, first.cache_file)
    assert set(folder.iterdir()) == before and first.cache_file.read_bytes() == content


def test_orphans_of_killed_saves_with_random_names_are_cleaned(tmp_path):
    import os
    import socket
    import subprocess
    import sys

    cfg, first = _mutag_cache(tmp_path)
    folder = first.cache_file.parent
    # a save killed in the middle of writing its temporary file (os._exit: no cleanup runs)
    killed = subprocess.run(
        [sys.executable, "-c",
         "import os, socket, sys\n"
         "from pathlib import Path\n"
         "from topomodelx_attention.files import atomic_output\n"
         "path = Path(sys.argv[1])\n"
         "with atomic_output(path, prefix=f'{path.name}.{socket.gethostname()}.{os.getpid()}.') as handle:\n"
         "    handle.write(b'half written'); handle.flush(); os._exit(1)\n",
         str(first.cache_file)],
        capture_output=True, text=True,
    )
    assert killed.returncode == 1, killed.stderr
    orphans = [p for p in folder.glob("*.tmp")]
    assert len(orphans) == 1 and orphans[0].name.startswith(f"{first.cache_file.name}.{socket.gethostname()}.")
    alive = folder / f"other.pt.{socket.gethostname()}.{os.getpid()}.k2x_9abc.tmp"  # this process: kept
    alive.write_bytes(b"x")
    prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    assert not orphans[0].exists() and alive.exists()


# ------------------------------------------------------------------ parsers: ZINC targets, TU lines
def _zinc_rows(zinc_dir):
    path = zinc_dir / "smiles_score.csv"
    return path, path.read_text().splitlines()


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e39"])
def test_zinc_non_finite_targets_are_refused_with_file_and_line(tmp_path, zinc_dir, value):
    pytest.importorskip("rdkit")
    assert not torch.isfinite(torch.tensor([float(value)])).all()  # float() alone accepts it
    path, lines = _zinc_rows(zinc_dir)
    smiles, sa, logp, _ = lines[3].split(",")  # molecule 2 (train), line 4
    lines[3] = ",".join([smiles, sa, logp, value])
    path.write_text("\n".join(lines) + "\n")
    cfg = _dataset_cfg("ZINC", data_dir=str(zinc_dir))
    with pytest.raises(ValueError, match=r"smiles_score\.csv, line 4: column score holds") as excinfo:
        load_graphs(cfg, tmp_path)
    assert "finite" in str(excinfo.value) and "\n" not in str(excinfo.value)
    with pytest.raises(ValueError, match=r"smiles_score\.csv, line 4"):
        prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")


def test_zinc_errors_name_the_file_line_after_blank_lines(tmp_path, zinc_dir):
    pytest.importorskip("rdkit")
    path, lines = _zinc_rows(zinc_dir)
    smiles, sa, logp, _ = lines[5].split(",")  # molecule 4
    lines[5] = ",".join([smiles, sa, logp, "nan"])
    path.write_text("\n".join([*lines[:2], "", "", *lines[2:]]) + "\n")  # molecule 4 is now on line 8
    with pytest.raises(ValueError, match=r"smiles_score\.csv, line 8: column score"):
        load_graphs(_dataset_cfg("ZINC", data_dir=str(zinc_dir)), tmp_path)


@pytest.mark.parametrize("value", ["nan", "inf", "1.5", "x"])
def test_zinc_split_index_that_is_not_an_integer_names_file_and_line(tmp_path, zinc_dir, value):
    index = zinc_dir / "indexes_train_val_test.csv"
    lines = index.read_text().splitlines()
    lines[2] = f"{value},7,10"
    index.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"indexes_train_val_test\.csv, line 3: column train holds"):
        load_graphs(_dataset_cfg("ZINC", data_dir=str(zinc_dir)), tmp_path)


def test_tu_without_final_newlines_prepares_the_same_data_set(tmp_path):
    from tests.test_cli_faults import write_tiny_tu

    write_tiny_tu(tmp_path / "with")
    raw = write_tiny_tu(tmp_path / "without")
    for path in raw.glob("*.txt"):
        path.write_text(path.read_text().rstrip("\n").replace("\n", "\r\n"))
    prepared = [
        prepare_dataset(
            compose_config(["dataset.data_dir=" + str(tmp_path / kind)], dataset="TINY").dataset,
            CELL, None, cache_dir=tmp_path / f"cache-{kind}",
        )
        for kind in ("with", "without")
    ]
    assert prepared[0].info == prepared[1].info
    assert len(prepared[0].complexes) == len(prepared[1].complexes) == 4
    for a, b in zip(prepared[0].complexes, prepared[1].complexes):
        assert torch.equal(a.shape, b.shape) and torch.equal(a.y, b.y) and torch.equal(a.x_0, b.x_0)
        assert torch.equal(a.incidence_1.to_dense(), b.incidence_1.to_dense())


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
    from topomodelx_attention.datasets.tu import load_tu_graphs
    from topomodelx_attention.transforms import BarycentricRandomWalkPE, CellCycleLifting

    monkeypatch.setattr(prepare, "tqdm", _RecordingBar)
    _RecordingBar.bars = []
    graphs = load_tu_graphs("MUTAG")[:9]
    out = prepare.process_graphs(graphs, CellCycleLifting(), BarycentricRandomWalkPE(dim=2), chunk_size=chunk_size)
    (bar,) = _RecordingBar.bars
    assert len(out) == 9 and all("pe_0" in c for c in out)  # lifted and encoded
    assert bar.total == 9 and sum(bar.updates) == 9  # one count per graph, lifting + PE together


def test_lifting_bar_only_when_asked_or_on_a_terminal(monkeypatch):
    from topomodelx_attention.transforms import CellCycleLifting

    monkeypatch.setattr(prepare, "tqdm", _RecordingBar)
    _RecordingBar.bars = []
    graphs = load_graphs(_dataset_cfg("MUTAG", max_graphs=2))
    prepare.process_graphs(graphs, CellCycleLifting())  # default: tqdm's disable=None (a TTY only)
    with prepare.progress_bars(False):
        prepare.process_graphs(graphs, CellCycleLifting())
        prepare.process_graphs(graphs, CellCycleLifting(), progress=True)  # explicit wins
    with prepare.progress_bars(True):
        prepare.process_graphs(graphs, CellCycleLifting())
    prepare.process_graphs(graphs, CellCycleLifting())  # the block is over
    assert [bar.disable for bar in _RecordingBar.bars] == [None, True, False, False, None]


def test_real_tqdm_draws_nothing_on_a_pipe(capsys):
    from topomodelx_attention.transforms import CellCycleLifting

    graphs = load_graphs(_dataset_cfg("MUTAG", max_graphs=2))
    prepare.process_graphs(graphs, CellCycleLifting())  # pytest's captured stderr is no terminal
    assert capsys.readouterr().err == ""
    prepare.process_graphs(graphs, CellCycleLifting(), progress=True)
    assert "graph" in capsys.readouterr().err  # the bar exists and would be drawn when asked


def test_misspelled_data_set_leaves_no_empty_processed_folder(tmp_path):
    from topomodelx_attention.datasets.cache import check_cache_writable as _check_writable

    # the unprotected path: the fail-fast writability probe creates processed/<name>/
    probe = tmp_path / "probe" / "processed" / "X"
    _check_writable(probe, tmp_path / "probe")
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
    from topomodelx_attention.datasets.gcb import convert_gcb

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
