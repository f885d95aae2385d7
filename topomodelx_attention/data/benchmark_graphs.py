"""Readers of benchmark graph files that PyG does not ship: GCB (``.npz``) and ZINC-12k (CSV).

Both return plain PyG graphs (``x``, ``edge_index``, optional ``edge_attr``, ``y``), split as
the files say; lifting and positional encodings happen later (the benchmark harness caches
them). Missing files raise a ``FileNotFoundError`` that names the file and where to get it.
"""

from __future__ import annotations

import csv
import math
import os
import pickle
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

__all__ = [
    "CONVERT_COMMAND",
    "GCB_SOURCE",
    "SPLITS",
    "ZINC_SOURCE",
    "RestrictedUnpickler",
    "convert_gcb",
    "gcb_graph",
    "gcb_plain_path",
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


_PLAIN_FORMAT = "topomodelx-attention GCB plain 1"
"""Value of the ``format`` member of a converted (pickle-free) GCB file."""

CONVERT_COMMAND = "topomodelx-attention convert-gcb"
"""Command line that converts an original GCB file (see :func:`convert_gcb`)."""


def gcb_plain_path(path: str | os.PathLike) -> Path:
    """Where :func:`convert_gcb` writes by default: ``hard_small.npz`` → ``hard_small.plain.npz``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.plain.npz")


def _open_npz(path: Path) -> Any:
    """``np.load(path, allow_pickle=False)`` with one ``ValueError`` naming the file when unreadable."""
    if path.is_file() and not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a .npz (zip) archive: it is empty, truncated or another kind of file")
    try:
        return np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(
            f"{path} is not a readable .npz archive ({type(error).__name__}: {error}); "
            "download the file again"
        ) from error


def _original_format_error(path: Path) -> ValueError:
    return ValueError(
        f"{path} stores its graphs as pickled Python objects (object arrays of scipy matrices), "
        "which are never loaded (loading a pickle can run code). Convert it once to the plain "
        f"numeric format: {CONVERT_COMMAND} {path} {gcb_plain_path(path)}"
    )


def read_gcb(path: str | os.PathLike) -> dict[str, list[Data]]:
    """Read a converted, pickle-free GCB ``.npz`` file (written by :func:`convert_gcb`).

    The original GCB files store object arrays of scipy matrices, i.e. pickles, which are never
    loaded here (``np.load(..., allow_pickle=False)``): such a file raises a ``ValueError`` that
    names the one-time conversion command (``topomodelx-attention convert-gcb SRC DST``).

    Plain format, per split prefix ``p`` in ``tr``, ``val``, ``te`` (``G`` graphs, ``n_g``
    vertices and ``e_g`` stored adjacency entries in graph ``g``):

    ========================= ========================== ======================================
    key                       shape                      meaning
    ========================= ========================== ======================================
    ``p_num_nodes``           ``(G,)`` int64             ``n_g``
    ``p_adj_nnz``             ``(G,)`` int64             ``e_g``
    ``p_adj_indptr``          ``(sum_g (n_g + 1),)``     CSR row pointers, one block per graph
    ``p_adj_indices``         ``(sum_g e_g,)`` int64     CSR column indices
    ``p_adj_data``            ``(sum_g e_g,)`` float     CSR values
    ``p_feat_rows``           ``(G,)`` int64             feature rows of each graph
    ``p_feat``                ``(sum rows, d)`` float    vertex features, concatenated
    ``p_class``               ``(G, C)`` or ``(G,)``     one-hot labels (or class indices)
    ========================= ========================== ======================================

    plus ``format`` (the string :data:`_PLAIN_FORMAT`).

    Parameters
    ----------
    path : path-like
        The converted ``.npz`` file (e.g. ``hard_small.plain.npz``).

    Returns
    -------
    dict of str to list of torch_geometric.data.Data
        ``{"train": [...], "val": [...], "test": [...]}``, the file's own split.
    """
    path = _require(Path(path), "GCB file", GCB_SOURCE)
    with _open_npz(path) as archive:
        files = set(archive.files)
        if "format" not in files:
            if {"tr_adj", "tr_feat", "tr_class"} <= files:
                raise _original_format_error(path)
            raise ValueError(
                f"{path} is not a GCB file: it has neither the original keys (tr_adj, tr_feat, "
                f"tr_class, ...) nor the converted ones (format, tr_num_nodes, ...); got {sorted(files)}"
            )
        try:
            arrays = {key: archive[key] for key in files}
        except ValueError as error:  # an object array: pickled objects
            raise ValueError(f"{path} holds pickled Python objects, which are never loaded: {error}") from error
        except (zipfile.BadZipFile, EOFError, OSError) as error:
            raise ValueError(f"{path} is truncated or damaged ({type(error).__name__}: {error})") from error
    if str(arrays["format"]) != _PLAIN_FORMAT:
        raise ValueError(f"{path}: unknown format {str(arrays['format'])!r}, expected {_PLAIN_FORMAT!r}")
    return {split: _plain_split(path, arrays, prefix) for split, prefix in _GCB_PREFIX.items()}


def _plain_split(path: Path, arrays: Mapping[str, np.ndarray], prefix: str) -> list[Data]:
    names = ("num_nodes", "adj_nnz", "adj_indptr", "adj_indices", "adj_data", "feat_rows", "feat", "class")
    missing = [f"{prefix}_{name}" for name in names if f"{prefix}_{name}" not in arrays]
    if missing:
        raise ValueError(f"{path} is not a complete converted GCB file: keys {missing} are missing")
    get = {name: arrays[f"{prefix}_{name}"] for name in names}
    for name in ("num_nodes", "adj_nnz", "adj_indptr", "adj_indices", "feat_rows"):
        if get[name].dtype.kind not in "iu" or get[name].ndim != 1:
            raise ValueError(f"{path}: {prefix}_{name} must be a 1-d integer array, got {get[name].dtype} {get[name].shape}")
    num_nodes, nnz, rows = get["num_nodes"], get["adj_nnz"], get["feat_rows"]
    count = len(num_nodes)
    if not len(nnz) == len(rows) == len(get["class"]) == count:
        raise ValueError(f"{path}: {prefix}_num_nodes, _adj_nnz, _feat_rows and _class differ in length")
    if (num_nodes < 0).any() or (nnz < 0).any() or (rows < 0).any():
        raise ValueError(f"{path}: negative counts in {prefix}_num_nodes, _adj_nnz or _feat_rows")
    if len(get["adj_indptr"]) != int((num_nodes + 1).sum()) or len(get["adj_indices"]) != int(nnz.sum()):
        raise ValueError(f"{path}: {prefix}_adj_indptr / _adj_indices do not match _num_nodes / _adj_nnz")
    if len(get["adj_data"]) != len(get["adj_indices"]) or get["feat"].ndim != 2 or len(get["feat"]) != int(rows.sum()):
        raise ValueError(f"{path}: {prefix}_adj_data or {prefix}_feat do not match the counts")
    pointer_start = np.concatenate([[0], np.cumsum(num_nodes + 1)])
    entry_start = np.concatenate([[0], np.cumsum(nnz)])
    row_start = np.concatenate([[0], np.cumsum(rows)])
    out = []
    for g in range(count):
        n = int(num_nodes[g])
        indptr = get["adj_indptr"][pointer_start[g] : pointer_start[g + 1]]
        indices = get["adj_indices"][entry_start[g] : entry_start[g + 1]]
        data = get["adj_data"][entry_start[g] : entry_start[g + 1]]
        valid = (
            indptr[0] == 0 and indptr[-1] == len(indices) and bool((np.diff(indptr) >= 0).all())
            and bool(((indices >= 0) & (indices < n)).all())
        )
        if not valid:
            raise ValueError(f"{path}: graph {g} of split {prefix} has an invalid CSR adjacency")
        adjacency = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        features = get["feat"][row_start[g] : row_start[g + 1]]
        out.append(gcb_graph(adjacency, features, get["class"][g]))
    return out


# ----------------------------------------------------------------------------------------------
# one-time conversion of an original (pickled) GCB file
# ----------------------------------------------------------------------------------------------
def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as numpy's protocol-2 pickles use it (bytes of a latin-1 string)."""
    if not isinstance(text, str) or encoding.replace("-", "").lower() != "latin1":
        raise pickle.UnpicklingError(f"_codecs.encode is only allowed for latin-1 strings, got {encoding!r}")
    return text.encode("latin-1")


_RECONSTRUCT = np.zeros(0).__reduce__()[0]  # numpy's array reconstructor (numpy 1 and 2)

_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
    ("scipy.sparse.csr", "csr_matrix"): sp.csr_matrix,
    ("scipy.sparse._csr", "csr_matrix"): sp.csr_matrix,
    ("scipy.sparse._csr", "csr_array"): sp.csr_array,
    ("scipy.sparse", "csr_matrix"): sp.csr_matrix,
    ("scipy.sparse", "csr_array"): sp.csr_array,
}
"""The only globals a GCB pickle may name: numpy array reconstruction and scipy CSR classes."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only numpy array and scipy CSR globals (:data:`_ALLOWED_GLOBALS`).

    Any other global (``os.system``, ``builtins.eval``, ...) raises ``pickle.UnpicklingError``
    naming it, before anything is called.
    """

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"disallowed global {module}.{name} (only numpy arrays and scipy CSR matrices are "
                "accepted in a GCB file)"
            ) from None


def _read_member(path: Path, archive: zipfile.ZipFile, member: str) -> Any:
    """Read one ``.npy`` member; object arrays through :class:`RestrictedUnpickler`."""
    with archive.open(member) as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        else:
            shape, _fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        if not dtype.hasobject:
            return np.lib.format.read_array(archive.open(member), allow_pickle=False)
        try:
            array = RestrictedUnpickler(handle).load()
        except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: member {member} cannot be converted: {error}") from error
    if not isinstance(array, np.ndarray) or array.shape != tuple(shape):
        raise ValueError(f"{path}: member {member} is not an array of shape {tuple(shape)}")
    return array


def _csr_parts(path: Path, member: str, index: int, value: Any) -> sp.csr_matrix:
    if not sp.issparse(value) and not isinstance(value, np.ndarray):
        raise ValueError(f"{path}: {member}[{index}] is a {type(value).__name__}, expected a sparse matrix")
    if isinstance(value, np.ndarray) and (value.dtype.hasobject or value.ndim != 2):
        raise ValueError(f"{path}: {member}[{index}] is not a 2-d numeric array")
    # rebuild from the validated parts: scipy checks indices, pointers and the shape
    matrix = sp.csr_matrix(value) if isinstance(value, np.ndarray) else value
    rebuilt = sp.csr_matrix(
        (np.asarray(matrix.data), np.asarray(matrix.indices), np.asarray(matrix.indptr)),
        shape=tuple(int(s) for s in matrix.shape),
    )
    rebuilt.check_format(full_check=True)
    if rebuilt.shape[0] != rebuilt.shape[1]:
        raise ValueError(f"{path}: {member}[{index}] is not square ({rebuilt.shape})")
    return rebuilt


def convert_gcb(src: str | os.PathLike, dst: str | os.PathLike | None = None) -> Path:
    """Convert an original GCB file (object arrays of scipy CSR matrices) to the plain format.

    The pickled members are read with :class:`RestrictedUnpickler` (numpy arrays and scipy CSR
    matrices only; anything else raises a ``ValueError`` naming the disallowed global), never
    with ``np.load(..., allow_pickle=True)``. The result holds numeric arrays only and is read
    by :func:`read_gcb`.

    Parameters
    ----------
    src : path-like
        Original file (e.g. ``hard_small.npz``).
    dst : path-like, optional
        Output file (default :func:`gcb_plain_path` of ``src``).

    Returns
    -------
    pathlib.Path
        The written file.
    """
    src = _require(Path(src), "GCB file", GCB_SOURCE)
    dst = Path(dst) if dst is not None else gcb_plain_path(src)
    if dst.resolve() == src.resolve():
        raise ValueError(f"convert-gcb: the output {dst} must differ from the input file")
    try:
        archive = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError) as error:
        raise ValueError(f"{src} is not a readable .npz archive ({error})") from error
    out: dict[str, np.ndarray] = {"format": np.array(_PLAIN_FORMAT)}
    try:
        with archive:
            members = {name[:-4]: name for name in archive.namelist() if name.endswith(".npy")}
            missing = [
                f"{p}_{k}" for p in _GCB_PREFIX.values() for k in ("adj", "feat", "class")
                if f"{p}_{k}" not in members
            ]
            if missing:
                raise ValueError(f"{src} is not an original GCB file: keys {missing} are missing")
            for prefix in _GCB_PREFIX.values():
                adjacency, features, labels = (
                    _read_member(src, archive, members[f"{prefix}_{k}"]) for k in ("adj", "feat", "class")
                )
                if not len(adjacency) == len(features) == len(labels):
                    raise ValueError(f"{src}: {prefix}_adj, {prefix}_feat, {prefix}_class differ in length")
                matrices = [_csr_parts(src, f"{prefix}_adj", i, a) for i, a in enumerate(adjacency)]
                feats = []
                for i, f in enumerate(features):
                    f = np.asarray(f)
                    if f.dtype.hasobject or f.ndim != 2:
                        raise ValueError(f"{src}: {prefix}_feat[{i}] is not a 2-d numeric array")
                    feats.append(f)
                labels = np.asarray(
                    np.stack([np.asarray(c) for c in labels]) if labels.dtype.hasobject else labels
                )
                if labels.dtype.hasobject:
                    raise ValueError(f"{src}: {prefix}_class is not numeric")
                width = feats[0].shape[1] if feats else 0
                if any(f.shape[1] != width for f in feats):
                    raise ValueError(f"{src}: the graphs of {prefix}_feat have different feature widths")
                out[f"{prefix}_num_nodes"] = np.array([m.shape[0] for m in matrices], dtype=np.int64)
                out[f"{prefix}_adj_nnz"] = np.array([m.nnz for m in matrices], dtype=np.int64)
                out[f"{prefix}_adj_indptr"] = _concat([m.indptr.astype(np.int64) for m in matrices], np.int64)
                out[f"{prefix}_adj_indices"] = _concat([m.indices.astype(np.int64) for m in matrices], np.int64)
                out[f"{prefix}_adj_data"] = _concat([m.data for m in matrices], np.float64)
                out[f"{prefix}_feat_rows"] = np.array([len(f) for f in feats], dtype=np.int64)
                out[f"{prefix}_feat"] = (
                    np.concatenate(feats) if feats else np.zeros((0, width), dtype=np.float32)
                )
                out[f"{prefix}_class"] = labels
    except (zipfile.BadZipFile, EOFError, zlib.error) as error:
        raise ValueError(f"{src} is truncated or damaged ({type(error).__name__}: {error})") from error
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".part")
    with open(tmp, "wb") as handle:
        np.savez_compressed(handle, **out)
    os.replace(tmp, dst)
    return dst


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


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

    Raises
    ------
    ValueError
        Naming the file and the line: a target that is not a finite float32 number (NaN,
        inf, 1e39), a split index that is not an integer, a SMILES RDKit cannot parse, a
        malformed row.
    """
    from topomodelx_attention.data.molecules import smiles_to_graph

    folder = Path(folder)
    molecules = _require(folder / "smiles_score.csv", "ZINC-12k molecules", ZINC_SOURCE)
    index_file = _require(folder / "indexes_train_val_test.csv", "ZINC-12k split", ZINC_SOURCE)
    rows = _read_csv(molecules, ("SMILES", target), numbered=True)
    columns: dict[str, list[int]] = {name: [] for name in SPLITS}
    for line, record in _read_csv(index_file, SPLITS, numbered=True):
        for name in SPLITS:
            value = record[name]
            if value in ("", None):
                continue
            try:
                number = float(value)
            except ValueError:
                raise ValueError(
                    f"{index_file}, line {line}: column {name} holds {value!r}, expected a row index"
                ) from None
            if not math.isfinite(number) or number != int(number):
                raise ValueError(f"{index_file}, line {line}: column {name} holds {value!r}, not an integer")
            columns[name].append(int(number))
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
        graphs = []
        for i in indices:
            line, record = rows[i]  # the file's own line (the header is line 1)
            value = record[target]
            try:
                y = torch.tensor([float(value)])
            except (TypeError, ValueError):
                raise ValueError(
                    f"{molecules}, line {line}: column {target} holds {value!r}, expected a number"
                ) from None
            if not bool(torch.isfinite(y).all()):  # NaN, inf, or beyond float32 (1e39)
                raise ValueError(
                    f"{molecules}, line {line}: column {target} holds {value!r}, not a finite "
                    "float32 number; a regression target must be finite (fix or drop that row)"
                )
            try:
                graphs.append(smiles_to_graph(record["SMILES"], y=y))
            except ValueError as error:
                raise ValueError(f"{molecules}, line {line}: {error}") from error
        out[name] = graphs
    return out


def _read_csv(path: Path, required: Sequence[str], numbered: bool = False) -> list[Any]:
    """Rows of a CSV file as dicts (with their line numbers when ``numbered``); errors name the file and line."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [name for name in required if name not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{path} needs the columns {list(required)}, got {reader.fieldnames}")
            rows = []
            for record in reader:
                if None in record or any(record[name] is None for name in required):
                    raise ValueError(
                        f"{path}, line {reader.line_num}: expected {len(reader.fieldnames)} columns "
                        f"{reader.fieldnames}"
                    )
                rows.append((reader.line_num, record) if numbered else record)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a UTF-8 text file ({error.reason} at byte {error.start})") from None
    except csv.Error as error:
        raise ValueError(f"{path}: malformed CSV ({error})") from error
    return rows
