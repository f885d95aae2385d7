"""Readers of benchmark graph files that PyG does not ship: GCB (``.npz``) and ZINC-12k (CSV).

Both return plain PyG graphs (``x``, ``edge_index``, optional ``edge_attr``, ``y``), split as
the files say; lifting and positional encodings happen later (the benchmark harness caches
them). Missing files raise a ``FileNotFoundError`` that names the file and where to get it.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

__all__ = [
    "GCB_SOURCE",
    "SPLITS",
    "ZINC_SOURCE",
    "gcb_graph",
    "read_gcb",
    "read_zinc12k",
]

SPLITS: tuple[str, ...] = ("train", "val", "test")
"""Split names, in order."""

GCB_SOURCE = (
    "the Graph Classification Benchmark of Bianchi et al. "
    "(https://github.com/FilippoMB/Benchmark_dataset_for_graph_classification, "
    "folder datasets/, e.g. hard_small.npz)"
)
ZINC_SOURCE = (
    "the ZINC-12k benchmark subset as two CSV files: smiles_score.csv (columns SMILES,SA,logp,"
    "score; 12,000 molecules) and indexes_train_val_test.csv (columns train,val,test: row "
    "indices of the split) — see benchmarks/README.md"
)

_GCB_PREFIX = {"train": "tr", "val": "val", "test": "te"}


def _require(path: Path, what: str, source: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"{what} not found: {path} does not exist. Download {source} and pass its folder "
            "as data_dir (command line: --data-dir DIR, config: dataset.data_dir=DIR)."
        )
    return path


def gcb_graph(adjacency: sp.spmatrix | np.ndarray, features: np.ndarray, label: np.ndarray) -> Data:
    """One GCB graph as a PyG ``Data`` object.

    Parameters
    ----------
    adjacency : scipy.sparse matrix or numpy.ndarray, shape = (n, n)
        Symmetric adjacency (the diagonal is ignored).
    features : numpy.ndarray, shape = (n, d)
        Vertex features (one-hot colours in GCB).
    label : numpy.ndarray, shape = (num_classes,)
        One-hot class (or the class index as a scalar).

    Returns
    -------
    torch_geometric.data.Data
        ``x`` (n, d) float, ``edge_index`` (2, 2 n_edges) with both directions, ``y`` (1,) long.
    """
    coo = sp.coo_matrix(adjacency)
    keep = coo.row != coo.col
    rows, cols = coo.row[keep], coo.col[keep]
    # symmetrise the pattern (the files are symmetric; be robust to one-sided storage)
    pairs = np.unique(np.concatenate([np.stack([rows, cols]), np.stack([cols, rows])], axis=1), axis=1)
    label = np.asarray(label)
    y = int(label.argmax()) if label.ndim else int(label)
    return Data(
        x=torch.as_tensor(np.asarray(features, dtype=np.float32)),
        edge_index=torch.as_tensor(pairs.astype(np.int64)).reshape(2, -1),
        y=torch.tensor([y], dtype=torch.long),
        num_nodes=int(coo.shape[0]),
    )


def read_gcb(path: str | os.PathLike) -> dict[str, list[Data]]:
    """Read a GCB ``.npz`` file (keys ``tr_adj, tr_feat, tr_class, val_*, te_*``).

    Parameters
    ----------
    path : path-like
        The ``.npz`` file (e.g. ``hard_small.npz``).

    Returns
    -------
    dict of str to list of torch_geometric.data.Data
        ``{"train": [...], "val": [...], "test": [...]}``, the file's own split.
    """
    path = _require(Path(path), "GCB file", GCB_SOURCE)
    with np.load(path, allow_pickle=True) as archive:
        missing = [
            f"{p}_{k}" for p in _GCB_PREFIX.values() for k in ("adj", "feat", "class")
            if f"{p}_{k}" not in archive.files
        ]
        if missing:
            raise ValueError(f"{path} is not a GCB file: keys {missing} are missing")
        out = {}
        for split, prefix in _GCB_PREFIX.items():
            adjacency, features, labels = (
                archive[f"{prefix}_adj"], archive[f"{prefix}_feat"], archive[f"{prefix}_class"]
            )
            if not len(adjacency) == len(features) == len(labels):
                raise ValueError(f"{path}: {prefix}_adj, {prefix}_feat, {prefix}_class differ in length")
            out[split] = [gcb_graph(a, f, c) for a, f, c in zip(adjacency, features, labels)]
    return out


def read_zinc12k(
    folder: str | os.PathLike,
    limits: Mapping[str, int | None] | None = None,
    target: str = "score",
) -> dict[str, list[Data]]:
    """Read ZINC-12k from ``smiles_score.csv`` and ``indexes_train_val_test.csv`` (RDKit).

    Parameters
    ----------
    folder : path-like
        Folder holding both CSV files.
    limits : mapping of str to int or None, optional
        Keep only the first ``limits[split]`` molecules of a split (a quick subset).
    target : str, default="score"
        Column used as the regression target ``y``.

    Returns
    -------
    dict of str to list of torch_geometric.data.Data
        ``{"train", "val", "test"}`` graphs of :func:`~.molecules.smiles_to_graph` with
        ``y`` (1,) float.
    """
    from topomodelx_attention.data.molecules import smiles_to_graph

    folder = Path(folder)
    molecules = _require(folder / "smiles_score.csv", "ZINC-12k molecules", ZINC_SOURCE)
    index_file = _require(folder / "indexes_train_val_test.csv", "ZINC-12k split", ZINC_SOURCE)
    with open(molecules, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if rows and ("SMILES" not in rows[0] or target not in rows[0]):
        raise ValueError(f"{molecules} needs the columns SMILES and {target!r}, got {list(rows[0])}")
    with open(index_file, newline="") as handle:
        reader = csv.DictReader(handle)
        columns = {name: [] for name in SPLITS}
        if set(SPLITS) - set(reader.fieldnames or ()):
            raise ValueError(f"{index_file} needs the columns {list(SPLITS)}, got {reader.fieldnames}")
        for line in reader:
            for name in SPLITS:
                if line[name] not in ("", None):
                    columns[name].append(int(float(line[name])))
    limits = dict(limits or {})
    out = {}
    for name in SPLITS:
        indices = columns[name]
        limit = limits.get(name)
        if limit is not None:
            indices = indices[: int(limit)]
        bad = [i for i in indices if not 0 <= i < len(rows)]
        if bad:
            raise ValueError(f"{index_file}: {name} indices {bad[:5]} are outside the {len(rows)} molecules")
        out[name] = [
            smiles_to_graph(rows[i]["SMILES"], y=torch.tensor([float(rows[i][target])]))
            for i in indices
        ]
    return out
