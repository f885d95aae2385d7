"""Writers of tiny benchmark files (TU text files, fake GCB .npz, fake ZINC CSV) — tests never read ../shared."""

from __future__ import annotations

import csv

import numpy as np
import scipy.sparse as sp

SMILES = [
    "c1ccccc1O", "CCN", "C1CC1C(=O)O", "c1ccncc1", "CC(C)Cl", "C1CCOC1",
    "c1cc[nH]c1", "CC[NH3+]", "O=C([O-])c1ccccc1", "CCS", "C1=CC=CC=C1Br", "N#CC",
]


def write_tu(folder, name: str, graphs) -> None:
    """Write the TU raw files of ``graphs`` into ``folder/name/raw``.

    ``graphs``: ``(edges, node_labels, label)`` per graph; ``edges`` undirected, 0-based within
    the graph (each written in both directions, as TU files are).
    """
    a_lines, indicator, graph_labels, node_labels = [], [], [], []
    offset = 0
    for g, (edges, labels, y) in enumerate(graphs, start=1):
        for u, v in edges:
            a_lines += [f"{u + offset + 1}, {v + offset + 1}", f"{v + offset + 1}, {u + offset + 1}"]
        indicator += [str(g)] * len(labels)
        node_labels += [str(int(c)) for c in labels]
        graph_labels.append(str(int(y)))
        offset += len(labels)
    raw = folder / name / "raw"
    raw.mkdir(parents=True)
    for part, rows in (
        ("A", a_lines), ("graph_indicator", indicator), ("graph_labels", graph_labels),
        ("node_labels", node_labels),
    ):
        (raw / f"{name}_{part}.txt").write_text("\n".join(rows) + "\n")


def _cycle_with_tail(n: int) -> sp.csr_matrix:
    edges = [(i, (i + 1) % (n - 1)) for i in range(n - 1)] + [(0, n - 1)]
    rows = [u for u, v in edges] + [v for u, v in edges]
    cols = [v for u, v in edges] + [u for u, v in edges]
    return sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, n))


def _objects(items):
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def write_gcb(tmp_path):
    """Write ``tmp_path/gcb/hard_small.npz``: 6/3/3 graphs, 5 one-hot colours, 3 classes."""
    rng = np.random.default_rng(0)
    data = {}
    for prefix, count in (("tr", 6), ("val", 3), ("te", 3)):
        adjacency, features, labels = [], [], []
        for i in range(count):
            n = int(rng.integers(5, 9))
            adjacency.append(_cycle_with_tail(n))
            features.append(np.eye(5, dtype=np.float32)[rng.integers(0, 5, n)])
            labels.append(np.eye(3, dtype=np.float32)[i % 3])
        data[f"{prefix}_adj"] = _objects(adjacency)
        data[f"{prefix}_feat"] = _objects(features)
        data[f"{prefix}_class"] = np.stack(labels)
    folder = tmp_path / "gcb"
    folder.mkdir()
    np.savez(folder / "hard_small.npz", **data)
    return folder / "hard_small.npz"


def write_zinc(tmp_path):
    """Write ZINC-12k-format CSV files with 12 molecules (split 6/3/3) into ``tmp_path/zinc``."""
    folder = tmp_path / "zinc"
    folder.mkdir()
    with open(folder / "smiles_score.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["SMILES", "SA", "logp", "score"])
        for i, smiles in enumerate(SMILES):
            writer.writerow([smiles, 2.0, 1.0 + i, 0.5 * i - 1.0])
    with open(folder / "indexes_train_val_test.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["train", "val", "test"])
        for k in range(6):
            writer.writerow([k, 6 + k if k < 3 else "", 9 + k if k < 3 else ""])
    return folder
