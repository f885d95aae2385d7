"""The heterophilous benchmark's .npz reader: round trip, edge policy and damaged files refused."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import torch

from tests.datasets.heterophilous_files import tiny_arrays, write_tiny
from topomodelx_attention.datasets import gcb, get_family, load_graphs
from topomodelx_attention.datasets.heterophilous import read_heterophilous


def test_a_file_round_trips_into_one_graph_with_both_edge_directions_and_the_masks(tmp_path):
    arrays = tiny_arrays(classes=3)
    path = tmp_path / "tiny.npz"
    np.savez(path, **arrays)
    graph = read_heterophilous(path)
    assert torch.equal(graph.x, torch.from_numpy(arrays["node_features"]))
    assert torch.equal(graph.y, torch.from_numpy(arrays["node_labels"]))
    assert graph.num_nodes == 40
    stored = {tuple(e) for e in arrays["edges"].tolist()}
    both = stored | {(v, u) for u, v in stored}
    assert {tuple(e) for e in graph.edge_index.t().tolist()} == both
    assert graph.edge_index.shape[1] == len(both)
    for key in ("train_masks", "val_masks", "test_masks"):
        assert graph[key].dtype == torch.bool and torch.equal(graph[key], torch.from_numpy(arrays[key]))


def test_repeated_edges_are_kept_once_and_self_loops_dropped(tmp_path):
    arrays = tiny_arrays()
    arrays["edges"] = np.concatenate([arrays["edges"], arrays["edges"][:3, ::-1], [[4, 4]]])
    np.savez(tmp_path / "t.npz", **arrays)
    clean = tiny_arrays()
    np.savez(tmp_path / "c.npz", **clean)
    assert torch.equal(read_heterophilous(tmp_path / "t.npz").edge_index, read_heterophilous(tmp_path / "c.npz").edge_index)


def test_one_mask_row_per_vertex_is_one_split(tmp_path):
    arrays = tiny_arrays()
    for key in ("train_masks", "val_masks", "test_masks"):
        arrays[key] = arrays[key][0]
    np.savez(tmp_path / "one.npz", **arrays)
    assert read_heterophilous(tmp_path / "one.npz").train_masks.shape == (1, 40)


def test_the_family_reads_name_npz_from_data_dir_and_asks_for_the_folder(tmp_path):
    write_tiny(tmp_path, "minesweeper")
    cfg = {"name": "minesweeper", "loader": "heterophilous", "data_dir": str(tmp_path)}
    graphs = load_graphs(cfg)
    assert len(graphs) == 1 and graphs[0].num_nodes == 40
    assert get_family("heterophilous").files(cfg, tmp_path) == [tmp_path / "minesweeper.npz"]
    with pytest.raises(FileNotFoundError, match="data_dir"):
        load_graphs({**cfg, "data_dir": None})
    with pytest.raises(FileNotFoundError, match=r"roman_empire\.npz"):
        load_graphs({**cfg, "name": "roman_empire"})


def _damaged(tmp_path, change) -> str:
    arrays = tiny_arrays()
    change(arrays)
    path = tmp_path / "damaged.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=r"damaged\.npz") as error:
        read_heterophilous(path)
    assert str(path) in str(error.value)
    return str(error.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda a: a.pop("val_masks"), "lacks val_masks"),
        (lambda a: a.update(node_labels=a["node_labels"][:-1]), "node_labels has shape (39,)"),
        (lambda a: a.update(node_labels=a["node_labels"].astype(np.float32)), "node_labels has dtype float32"),
        (lambda a: a.update(node_labels=-a["node_labels"] - 1), "classes are 0..C-1"),
        (lambda a: a.update(edges=a["edges"][:, :1]), "edges has shape (60, 1)"),
        (lambda a: a["edges"].__setitem__((7, 1), 40), "edges[7] = (7, 40) names a vertex outside 0..39"),
        (lambda a: a["edges"].__setitem__((2, 0), -1), "edges[2]"),
        (lambda a: a.update(train_masks=a["train_masks"].astype(np.int64)), "train_masks has dtype int64, expected bool"),
        (lambda a: a.update(test_masks=a["test_masks"][:9]), "test_masks holds 9 splits"),
        (lambda a: a.update(val_masks=a["val_masks"][:, :30]), "val_masks has shape (10, 30)"),
        (lambda a: a["node_features"].__setitem__((5, 2), np.nan), "node_features[5, 2] is nan"),
        (lambda a: a["node_features"].__setitem__((1, 0), np.inf), "finite"),
        (lambda a: a["val_masks"].__setitem__((3, int(np.argmax(a["train_masks"][3]))), True), "in both train_masks and val_masks of split 3"),
        (lambda a: a["test_masks"].__setitem__(4, False), "test_masks of split 4 selects no vertex"),
    ],
    ids=[
        "missing key", "labels shape", "float labels", "negative labels", "edges shape", "edge beyond the vertices",
        "negative edge", "integer mask", "masks of different splits", "mask shape", "NaN feature", "inf feature",
        "overlapping parts", "empty part",
    ],
)
def test_a_damaged_file_is_refused_naming_the_file_and_the_problem(tmp_path, change, expected):
    assert expected in _damaged(tmp_path, change)


def test_a_pickled_object_array_is_refused_unread(tmp_path, monkeypatch):
    arrays = tiny_arrays()
    arrays["node_labels"] = np.array(list(arrays["node_labels"]), dtype=object)
    path = tmp_path / "pickled.npz"
    np.savez(path, **arrays)

    def never(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    monkeypatch.setattr("pickle.loads", never)
    monkeypatch.setattr("pickle.load", never)
    with pytest.raises(ValueError, match=r"node_labels\.npy holds pickled Python objects"):
        read_heterophilous(path)


def test_a_truncated_or_foreign_file_is_refused(tmp_path):
    path = write_tiny(tmp_path, "whole")
    data = path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.npz"):
        read_heterophilous(cut)
    text = tmp_path / "text.npz"
    text.write_text("node_features,node_labels\n")
    with pytest.raises(ValueError, match=r"not a \.npz"):
        read_heterophilous(text)
    with pytest.raises(ValueError, match="is a folder"):
        read_heterophilous(tmp_path)


def test_a_member_whose_header_claims_more_than_its_bytes_is_refused_before_reading(tmp_path):
    path = write_tiny(tmp_path, "whole")
    forged = tmp_path / "forged.npz"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(forged, "w") as target:
        for info in source.infolist():
            payload = source.read(info)
            if info.filename == "node_features.npy":
                payload = payload.replace(b"(40, 3)", b"(4000, 3)", 1)
            target.writestr(info.filename, payload)
    with pytest.raises(ValueError, match=r"node_features\.npy claims shape"):
        read_heterophilous(forged)


def test_a_file_above_the_memory_budget_is_refused_before_reading(tmp_path, monkeypatch):
    path = write_tiny(tmp_path, "whole")
    monkeypatch.setattr(gcb, "GCB_MEMORY_BUDGET", 2**20)  # below the estimate's fixed 1 MiB
    with pytest.raises(ValueError, match="above the budget of 1 MiB"):
        read_heterophilous(path)
