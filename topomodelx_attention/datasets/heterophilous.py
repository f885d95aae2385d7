"""Transductive node classification on one large graph: the heterophilous benchmark's ``.npz`` files.

The benchmark of Platonov et al. ("A critical look at the evaluation of GNNs under heterophily",
ICLR 2023: roman-empire, amazon-ratings, minesweeper, tolokers, questions, and the filtered
chameleon / squirrel and actor) ships one graph per ``.npz`` file, every vertex labelled, with
its fixed splits as masks (the layout PyG's ``HeterophilousGraphDataset`` reads):

================== ============== ==========================================================
key                shape          meaning
================== ============== ==========================================================
``node_features``  ``(N, F)``     vertex features (bool, int or float; finite)
``node_labels``    ``(N,)``       class of every vertex (integers ``>= 0``)
``edges``          ``(E, 2)``     undirected edges, stored once (vertex indices ``0..N-1``)
``train_masks``    ``(S, N)``     bool: the training vertices of split ``s`` (row ``s``)
``val_masks``      ``(S, N)``     bool: validation vertices
``test_masks``     ``(S, N)``     bool: test vertices
================== ============== ==========================================================

(``S = 10`` in the benchmark's files; a ``(N,)`` mask is one split.) Files are read with
``np.load(path, allow_pickle=False)``; every member's ``.npy`` header is checked against its
size and the memory the file asks for is estimated from the headers before any array is read
(the GCB reader's mechanism and budget: :func:`~.gcb.gcb_memory`,
:data:`~.gcb.GCB_MEMORY_BUDGET`). A damaged file raises one ``ValueError`` naming the file and
the problem (a missing key, a shape or dtype that does not fit, an edge to a vertex that does
not exist, a mask that is not boolean, a vertex in two parts of a split, a non-finite feature,
pickled objects, a truncated archive).

Edge policy: the reverse of every edge is added; an edge stored in both directions or twice is
kept once and a self loop is dropped (as PyG's ``to_undirected`` and the liftings'
``self_loops: drop`` do; the benchmark's files have neither).

The family (``dataset.loader=heterophilous``, configs ``configs/dataset/node/<name>.yaml``) reads
``<data_dir>/<file>`` into one :class:`~torch_geometric.data.Data` with ``x``, ``edge_index``
(both directions), ``y`` and the masks ``train_masks``, ``val_masks``, ``test_masks`` of shape
``(S, N)``; its task is ``dataset.task_level=transductive`` (one complex, the masks select the
vertices of each part), and the harness's seeds are the split indices ``0..S-1``.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from topomodelx_attention.datasets import gcb, npz
from topomodelx_attention.datasets.registry import (
    DatasetFamily,
    register_family,
    require_data_dir,
    require_file,
)

__all__ = [
    "HETEROPHILOUS",
    "HETEROPHILOUS_KEYS",
    "HETEROPHILOUS_SOURCE",
    "MASK_KEYS",
    "heterophilous_memory",
    "read_heterophilous",
]

HETEROPHILOUS_SOURCE = (
    "https://github.com/yandex-research/heterophilous-graphs (data/<name>.npz; "
    "torch_geometric.datasets.HeterophilousGraphDataset downloads the same files)"
)
"""Where the benchmark's files come from."""

MASK_KEYS: tuple[str, ...] = ("train_masks", "val_masks", "test_masks")
"""The split masks of a file, in split order (train, validation, test)."""

HETEROPHILOUS_KEYS: tuple[str, ...] = ("node_features", "node_labels", "edges", *MASK_KEYS)
"""The members a file must hold (others are checked, then ignored)."""


def heterophilous_memory(members: list[zipfile.ZipInfo]) -> int:
    """Estimate the bytes reading a file asks for, from its members' uncompressed sizes.

    The GCB reader's estimate (:func:`~.gcb.gcb_memory` of one graph: 6 times the members'
    bytes, the arrays and then the tensors with both directions of every edge, plus 1 MiB),
    compared with the same budget, :data:`~.gcb.GCB_MEMORY_BUDGET` (raise that attribute to
    read larger files).

    Parameters
    ----------
    members : list of zipfile.ZipInfo
        The archive's members.

    Returns
    -------
    int
        Estimated bytes.
    """
    return gcb.gcb_memory(members, 1, converting=False)


def _check_members(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every member's header against its size, and the memory estimate, before any array is read.

    Returns ``{key: (shape, dtype)}`` of the ``.npy`` members.
    """
    size = path.stat().st_size
    headers: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            for info in infos:
                npz.check_member_sizes(path, size, info)
                if not info.filename.endswith(".npy"):
                    continue  # not an array: np.load never reads it
                with archive.open(info) as handle:
                    shape, _fortran, dtype, offset = npz.npy_header(path, info.filename, handle)
                if dtype.hasobject:
                    raise ValueError(
                        f"{path}: member {info.filename} holds pickled Python objects, which are never "
                        "loaded; the benchmark's files hold plain numbers only"
                    )
                if not npz.plain_dtype(dtype):
                    raise ValueError(
                        f"{path}: member {info.filename} has dtype {dtype}; expected plain numbers "
                        "(bool, int, uint, float)"
                    )
                npz.check_plain_layout(path, info, shape, dtype, offset)
                headers[info.filename[: -len(".npy")]] = (shape, dtype)
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(f"{path} is truncated or damaged ({type(error).__name__}: {error})") from error
    missing = [key for key in HETEROPHILOUS_KEYS if key not in headers]
    if missing:
        raise ValueError(
            f"{path} is not a heterophilous-benchmark file: it lacks {', '.join(missing)} "
            f"(expected {', '.join(HETEROPHILOUS_KEYS)}; it holds {sorted(headers)})"
        )
    need = heterophilous_memory(infos)
    if need > gcb.GCB_MEMORY_BUDGET:
        largest = max(infos, key=lambda info: info.file_size)
        raise ValueError(
            f"{path}: reading it needs about {need / 2**20:,.0f} MiB (its largest member, "
            f"{largest.filename}, holds {largest.file_size:,} bytes uncompressed), above the budget of "
            f"{gcb.GCB_MEMORY_BUDGET / 2**20:,.0f} MiB (topomodelx_attention.datasets.gcb.GCB_MEMORY_BUDGET; "
            "raise it on a machine with the memory, or the file is damaged)"
        )
    return headers


def _check_shapes(path: Path, headers: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    """Shapes and dtypes from the headers: consistent sizes, integer labels and edges, boolean masks."""
    features, _ = headers["node_features"]
    labels, label_dtype = headers["node_labels"]
    edges, edge_dtype = headers["edges"]
    if len(features) != 2:
        raise ValueError(f"{path}: node_features has shape {features}, expected (num_nodes, num_features)")
    n = features[0]
    if labels != (n,):
        raise ValueError(f"{path}: node_labels has shape {labels}, expected ({n},) (one class per row of node_features)")
    if label_dtype.kind not in "iu":
        raise ValueError(f"{path}: node_labels has dtype {label_dtype}, expected integer class indices")
    if len(edges) != 2 or edges[1] != 2:
        raise ValueError(f"{path}: edges has shape {edges}, expected (num_edges, 2)")
    if edge_dtype.kind not in "iu":
        raise ValueError(f"{path}: edges has dtype {edge_dtype}, expected integer vertex indices")
    splits = None
    for key in MASK_KEYS:
        shape, dtype = headers[key]
        if dtype.kind != "b":
            raise ValueError(f"{path}: {key} has dtype {dtype}, expected bool (one True per vertex of the part)")
        if shape == (n,):
            shape = (1, n)
        if len(shape) != 2 or shape[1] != n:
            raise ValueError(f"{path}: {key} has shape {headers[key][0]}, expected (num_splits, {n}) or ({n},)")
        if splits is None:
            splits = shape[0]
        elif shape[0] != splits:
            raise ValueError(f"{path}: {key} holds {shape[0]} splits, {MASK_KEYS[0]} {splits}; every mask needs one row per split")
    if not splits:
        raise ValueError(f"{path}: the masks hold no split (shape (0, {n}))")


def read_heterophilous(path: str | os.PathLike) -> Data:
    """Read one ``.npz`` file of the heterophilous benchmark (module docstring: its layout).

    Parameters
    ----------
    path : path-like
        The file (e.g. ``minesweeper.npz``).

    Returns
    -------
    torch_geometric.data.Data
        ``x`` ``(N, F)`` float32, ``edge_index`` ``(2, 2 E')`` long (both directions, sorted,
        no self loop, no repeat), ``y`` ``(N,)`` long, ``train_masks`` / ``val_masks`` /
        ``test_masks`` ``(S, N)`` bool, ``num_nodes``.

    Raises
    ------
    FileNotFoundError
        When the file does not exist.
    ValueError
        When it is damaged (the message names the file and the problem).
    """
    from torch_geometric.utils import coalesce, remove_self_loops

    path = require_file(Path(path), "heterophilous-benchmark file", HETEROPHILOUS_SOURCE, example="minesweeper.npz")
    with npz.open_npz(path) as archive:
        headers = _check_members(path)
        _check_shapes(path, headers)
        try:
            arrays = {key: archive[key] for key in HETEROPHILOUS_KEYS}
        except ValueError as error:  # an object array: pickled objects
            raise ValueError(f"{path} holds pickled Python objects, which are never loaded: {error}") from error
        except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as error:
            raise ValueError(f"{path} is truncated or damaged ({type(error).__name__}: {error})") from error
    features = arrays["node_features"]
    n = len(features)
    with np.errstate(over="ignore"):
        x = features.astype(np.float32)
    bad = ~np.isfinite(x)
    if bad.any():
        row, column = (int(i[0]) for i in np.nonzero(bad))
        raise ValueError(
            f"{path}: node_features[{row}, {column}] is {features[row, column]!r}; every feature must "
            "be a finite number (in float32)"
        )
    labels = arrays["node_labels"]
    if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= 2**31):
        at = int(np.argmin(labels)) if int(labels.min()) < 0 else int(np.argmax(labels))
        raise ValueError(f"{path}: node_labels[{at}] is {int(labels[at])}; classes are 0..C-1")
    edges = arrays["edges"]
    outside = (edges < 0) | (edges >= n)
    if outside.any():
        row = int(outside.any(axis=1).argmax())
        raise ValueError(
            f"{path}: edges[{row}] = ({int(edges[row, 0])}, {int(edges[row, 1])}) names a vertex "
            f"outside 0..{n - 1} (the rows of node_features)"
        )
    masks = {}
    for key in MASK_KEYS:
        mask = arrays[key]
        masks[key] = mask.reshape(1, n) if mask.ndim == 1 else mask
    for first, second in ((0, 1), (0, 2), (1, 2)):
        both = masks[MASK_KEYS[first]] & masks[MASK_KEYS[second]]
        if both.any():
            split, vertex = (int(i[0]) for i in np.nonzero(both))
            raise ValueError(
                f"{path}: vertex {vertex} is in both {MASK_KEYS[first]} and {MASK_KEYS[second]} of "
                f"split {split}; the parts of a split are disjoint"
            )
    for key in MASK_KEYS:
        empty = ~masks[key].any(axis=1)
        if empty.any():
            raise ValueError(f"{path}: {key} of split {int(empty.argmax())} selects no vertex")
    edge_index = torch.from_numpy(np.ascontiguousarray(edges.T, dtype=np.int64))
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    edge_index, _ = remove_self_loops(edge_index)
    edge_index = coalesce(edge_index, num_nodes=n)
    graph = Data(
        x=torch.from_numpy(x),
        edge_index=edge_index,
        y=torch.from_numpy(labels.astype(np.int64)),
        num_nodes=n,
    )
    for key in MASK_KEYS:
        graph[key] = torch.from_numpy(np.ascontiguousarray(masks[key]))
    return graph


# ----------------------------------------------------------------------------------------------
# the family: dataset.loader=heterophilous
# ----------------------------------------------------------------------------------------------
def _file_name(cfg: Mapping[str, Any]) -> str:
    return str(cfg.get("file") or f"{cfg['name']}.npz")


def _read(cfg: Mapping[str, Any], cache_dir: Path) -> list[Data]:
    folder = require_data_dir(cfg, _file_name(cfg))
    return [read_heterophilous(folder / _file_name(cfg))]


def _files(cfg: Mapping[str, Any], cache_dir: Path) -> list[Path] | None:
    if cfg.get("data_dir") is None:
        return None
    file = Path(cfg["data_dir"]).expanduser() / _file_name(cfg)
    return [file] if file.is_file() else None


def _protocol(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {**cfg, "task_level": cfg.get("task_level") or "transductive", "task": cfg.get("task") or "classification"}


HETEROPHILOUS = register_family(DatasetFamily("heterophilous", read=_read, files=_files, protocol=_protocol))
"""One graph per ``.npz`` file (``dataset.loader=heterophilous``, ``dataset.file``, default ``<name>.npz``): transductive node classification, fixed split masks."""
