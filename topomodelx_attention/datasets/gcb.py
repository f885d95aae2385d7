"""The Graph Classification Benchmark (GCB, ``.npz`` files): ``dataset.loader=gcb``.

:func:`read_gcb` returns plain PyG graphs (``x``, ``edge_index``, ``edge_attr``, ``y``), split as
the file says; lifting and positional encodings happen later (the benchmark harness caches
them). The benchmark's own files pickle scipy matrices: :func:`convert_gcb` turns one into
plain arrays once (through :class:`RestrictedUnpickler`, which builds nothing but arrays), and
only that plain format is read. Missing files raise a ``FileNotFoundError`` that names the
file and where to get it.
"""

from __future__ import annotations

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

from topomodelx_attention.datasets.npz import (
    MAX_ARRAY_ENTRIES,
    PLAIN_DTYPES,
    check_member_sizes,
    check_plain_layout,
    count_entries,
    describe,
    npy_header,
    open_npz,
    plain_dtype,
)
from topomodelx_attention.datasets.registry import (
    DatasetFamily,
    register_family,
    require_data_dir,
    require_file,
)
from topomodelx_attention.files import atomic_output

__all__ = [
    "CONVERT_COMMAND",
    "GCB",
    "GCB_MEMORY_BUDGET",
    "GCB_SOURCE",
    "MAX_ARRAY_ENTRIES",
    "RestrictedUnpickler",
    "convert_gcb",
    "gcb_graph",
    "gcb_memory",
    "gcb_plain_path",
    "read_gcb",
]

GCB_SOURCE = (
    "the Graph Classification Benchmark of Bianchi et al. "
    "(https://github.com/FilippoMB/Benchmark_dataset_for_graph_classification, "
    "folder datasets/, e.g. hard_small.npz)"
)

_GCB_PREFIX = {"train": "tr", "val": "val", "test": "te"}


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

    plus ``format`` (the string :data:`_PLAIN_FORMAT`). Every member's header is checked
    against its size, and the memory the file asks for against :data:`GCB_MEMORY_BUDGET`,
    before any array is read.

    Parameters
    ----------
    path : path-like
        The converted ``.npz`` file (e.g. ``hard_small.plain.npz``).

    Returns
    -------
    dict of str to list of torch_geometric.data.Data
        ``{"train": [...], "val": [...], "test": [...]}``, the file's own split.
    """
    path = require_file(Path(path), "GCB file", GCB_SOURCE, example="hard_small.plain.npz")
    with open_npz(path) as archive:
        files = set(archive.files)
        if "format" not in files:
            if {"tr_adj", "tr_feat", "tr_class"} <= files:
                raise _original_format_error(path)
            raise ValueError(
                f"{path} is not a GCB file: it has neither the original keys (tr_adj, tr_feat, "
                f"tr_class, ...) nor the converted ones (format, tr_num_nodes, ...); got {sorted(files)}"
            )
        _check_plain_members(path)  # every header against its member's size, before any array is read
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
    for name in ("adj_data", "feat", "class"):
        if not plain_dtype(get[name].dtype):
            raise ValueError(f"{path}: {prefix}_{name} must hold plain numbers, got {get[name].dtype}")
    if get["class"].ndim not in (1, 2) or get["adj_data"].ndim != 1:
        raise ValueError(f"{path}: {prefix}_class must be (graphs,) or (graphs, classes) and {prefix}_adj_data 1-d")
    counts = {}
    for name in ("num_nodes", "adj_nnz", "feat_rows"):
        values = get[name]
        if len(values) and (int(values.min()) < 0 or int(values.max()) > MAX_ARRAY_ENTRIES):
            raise ValueError(f"{path}: {prefix}_{name} holds counts outside [0, {MAX_ARRAY_ENTRIES:,}]")
        counts[name] = values.astype(np.int64)  # bounded: sums of <= 1e8 counts <= 1e8 fit in int64
    num_nodes, nnz, rows = counts["num_nodes"], counts["adj_nnz"], counts["feat_rows"]
    count = len(num_nodes)
    if not len(nnz) == len(rows) == len(get["class"]) == count:
        raise ValueError(f"{path}: {prefix}_num_nodes, _adj_nnz, _feat_rows and _class differ in length")
    if len(get["adj_indptr"]) != int((num_nodes + 1).sum()) or len(get["adj_indices"]) != int(nnz.sum()):
        raise ValueError(f"{path}: {prefix}_adj_indptr / _adj_indices do not match _num_nodes / _adj_nnz")
    if len(get["adj_data"]) != len(get["adj_indices"]) or get["feat"].ndim != 2 or len(get["feat"]) != int(rows.sum()):
        raise ValueError(f"{path}: {prefix}_adj_data or {prefix}_feat do not match the counts")
    if bool((rows != num_nodes).any()):
        g = int(np.flatnonzero(rows != num_nodes)[0])
        raise ValueError(f"{path}: graph {g} of split {prefix} has {int(num_nodes[g])} vertices but {int(rows[g])} feature rows")
    pointer_start = np.concatenate([[0], np.cumsum(num_nodes + 1)])
    entry_start = np.concatenate([[0], np.cumsum(nnz)])
    row_start = np.concatenate([[0], np.cumsum(rows)])
    out = []
    for g in range(count):
        n = int(num_nodes[g])
        where = f"graph {g} of split {prefix} ({prefix}_adj_indptr / {prefix}_adj_indices)"
        indptr = get["adj_indptr"][pointer_start[g] : pointer_start[g + 1]]
        indices = get["adj_indices"][entry_start[g] : entry_start[g + 1]]
        data = get["adj_data"][entry_start[g] : entry_start[g + 1]]
        indptr, indices = _csr_structure(path, where, n, indptr, indices, data)
        adjacency = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        features = get["feat"][row_start[g] : row_start[g + 1]]
        out.append(gcb_graph(adjacency, features, get["class"][g]))
    return out


# ----------------------------------------------------------------------------------------------
# checked .npy members: sizes and dtypes from the headers, before anything is allocated
# ----------------------------------------------------------------------------------------------
GCB_MEMORY_BUDGET = 2**30
"""The most memory, in bytes, that reading or converting one GCB file may ask for: 1 GiB.

What a file asks for is estimated from the uncompressed sizes of its members in the zip
directory (checked against the archive's size first) and the number of graphs their headers
give, before any member's data is read: :func:`convert_gcb` needs about 4 times the bytes of the
members it reads (the pickled bytes, the arrays built from them, their concatenation; measured
2.6 times), :func:`read_gcb` about 6 times (the arrays, then each graph's tensors with both
directions of every edge), plus 2 KiB per graph (its objects) and 1 MiB. A file above the
budget is refused with a ``ValueError`` naming it, its largest member and the budget. ``hard_small.npz`` asks for about 5 MB; a crafted 781 kB file whose one member inflates
to 800 MB (within :data:`MAX_ARRAY_ENTRIES`) asks for 3 GB. Raise this module attribute to
read larger files on a machine with the memory for them."""

_CONVERT_BYTES_PER_BYTE = 4
_READ_BYTES_PER_BYTE = 6
_BYTES_PER_GRAPH = 2048
_FIXED_BYTES = 2**20


def gcb_memory(members: Sequence[zipfile.ZipInfo], graphs: int, converting: bool) -> int:
    """Estimate the bytes reading (or converting) a GCB file asks for (:data:`GCB_MEMORY_BUDGET`).

    Parameters
    ----------
    members : sequence of zipfile.ZipInfo
        The members read (their uncompressed sizes).
    graphs : int
        Graphs of the file (from the members' headers).
    converting : bool
        :func:`convert_gcb` (an original file) rather than :func:`read_gcb`.

    Returns
    -------
    int
        ``4`` (converting) or ``6`` (reading) times the members' bytes, plus 2 KiB per graph and
        1 MiB.
    """
    factor = _CONVERT_BYTES_PER_BYTE if converting else _READ_BYTES_PER_BYTE
    return factor * sum(info.file_size for info in members) + _BYTES_PER_GRAPH * graphs + _FIXED_BYTES


def _check_memory(path: Path, members: Sequence[zipfile.ZipInfo], graphs: int, converting: bool) -> int:
    """Refuse a file that asks for more than :data:`GCB_MEMORY_BUDGET` (:func:`gcb_memory`); return the estimate."""
    need = gcb_memory(members, graphs, converting)
    if need > GCB_MEMORY_BUDGET:
        held = sum(info.file_size for info in members)
        largest = max(members, key=lambda info: info.file_size)
        what = "converting" if converting else "reading"
        raise ValueError(
            f"{path}: {what} it needs about {need / 2**20:,.0f} MiB (for {graphs:,} graphs and the {held:,} "
            f"bytes its members hold uncompressed; the largest, member {largest.filename}, {largest.file_size:,} "
            f"bytes), above the budget of {GCB_MEMORY_BUDGET / 2**20:,.0f} MiB "
            "(topomodelx_attention.datasets.gcb.GCB_MEMORY_BUDGET): the file is damaged or "
            "crafted, or larger than any GCB file (refused before reading it)"
        )
    return need


_OBJECT_CODES = frozenset({"O8", "O4"})
"""numpy's pickle codes of the object dtype (allowed only for the top-level container array)."""

def _check_plain_members(path: Path) -> None:
    """Check every member header of a converted file before ``np.load`` reads (allocates) any array."""
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            infos, graphs = archive.infolist(), 0
            for info in infos:
                member = info.filename
                if not member.endswith(".npy"):
                    raise ValueError(f"{path}: member {member} is not a .npy array (a converted GCB file holds only arrays)")
                check_member_sizes(path, size, info)
                with archive.open(info) as handle:
                    shape, _fortran, dtype, offset = npy_header(path, member, handle)
                if dtype.hasobject:
                    raise ValueError(
                        f"{path}: member {member} holds pickled Python objects, which are never loaded"
                    )
                text = member == "format.npy" and dtype.kind == "U" and shape == ()
                if not (plain_dtype(dtype) or text):
                    raise ValueError(
                        f"{path}: member {member} has dtype {dtype}; a converted GCB file holds plain "
                        "numbers only (bool, int, uint, float)"
                    )
                check_plain_layout(path, info, shape, dtype, offset)
                if member.endswith("_num_nodes.npy") and len(shape) == 1:
                    graphs += shape[0]
            if infos:
                _check_memory(path, infos, graphs, converting=False)
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(f"{path} is truncated or damaged ({type(error).__name__}: {error})") from error


# ----------------------------------------------------------------------------------------------
# one-time conversion of an original (pickled) GCB file
# ----------------------------------------------------------------------------------------------
def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as numpy's protocol-2 pickles use it (bytes of a latin-1 string)."""
    if not isinstance(text, str) or not isinstance(encoding, str) or encoding.replace("-", "").lower() != "latin1":
        raise pickle.UnpicklingError(f"_codecs.encode is only allowed for latin-1 strings, got {describe(encoding)}")
    return text.encode("latin-1")


class _NdarrayGlobal:
    """Stand-in for the global ``numpy.ndarray``: only the marker ``_reconstruct`` receives.

    Calling it (``numpy.ndarray(shape, dtype)``) is refused: that makes an uninitialised array
    whose bytes are whatever the memory held (heap contents and pointers).
    """

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise pickle.UnpicklingError(
            "numpy.ndarray(shape, dtype) would create an uninitialised array (its bytes are whatever "
            "memory held, pointers included)"
        )


_NDARRAY = _NdarrayGlobal()


class _DtypeStub:
    """Stand-in for ``numpy.dtype(code, align, copy)`` and its ``__setstate__``.

    It records a plain numeric code (:data:`PLAIN_DTYPES`, or the object code of the container)
    and a byte order, and refuses any state with fields, names, sub-arrays, sizes or metadata:
    no dtype is ever built from a pickle's state.
    """

    __slots__ = ("code", "has_state", "order")

    def __init__(self, code: Any, align: Any = False, copy: Any = True) -> None:
        if type(code) is not str or code not in PLAIN_DTYPES | _OBJECT_CODES:
            raise pickle.UnpicklingError(
                f"numpy.dtype({describe(code)}) is not a plain numeric dtype (allowed: "
                f"{', '.join(sorted(PLAIN_DTYPES))}, and O8 for the container array)"
            )
        if type(align) not in (bool, int) or type(copy) not in (bool, int) or align:
            raise pickle.UnpicklingError(f"numpy.dtype({code!r}, ...) with unexpected arguments")
        self.code, self.order, self.has_state = code, "=", False

    def __setstate__(self, state: Any) -> None:
        if self.has_state:
            raise pickle.UnpicklingError(f"numpy.dtype({self.code!r}): its state is set twice")
        plain = (
            type(state) is tuple and len(state) in (8, 9) and type(state[0]) is int and state[0] in (3, 4)
            and type(state[1]) is str and state[1] in ("<", ">", "|", "=")
            and state[2] is None and state[3] is None and state[4] is None
            and all(type(v) is int and v == -1 for v in state[5:7]) and type(state[7]) is int
            and (len(state) == 8 or state[8] is None)
        )
        if not plain:
            raise pickle.UnpicklingError(
                f"numpy.dtype({self.code!r}) has a state with fields, names, sub-arrays, sizes or "
                "metadata (a structured or flexible dtype); only plain numeric dtypes are accepted"
            )
        self.order, self.has_state = state[1], True

    @property
    def is_object(self) -> bool:
        """Whether this is the object dtype (allowed only for the container array)."""
        return self.code in _OBJECT_CODES

    def build(self) -> np.dtype:
        """Build the numpy dtype (plain numeric, with the recorded byte order)."""
        dtype = np.dtype(self.code)
        return dtype.newbyteorder(self.order) if self.order in "<>" and dtype.itemsize > 1 else dtype


def _dtype_global(*args: Any) -> _DtypeStub:
    """Stand-in for the global ``numpy.dtype`` (a function, so that ``NEWOBJ`` refuses it)."""
    return _DtypeStub(*args)


class _ArrayStub:
    """Stand-in for an array of ``_reconstruct(numpy.ndarray, ...)`` and its ``__setstate__``.

    The state is checked when it is set: ``(version, shape, dtype, fortran_order, payload)``
    with a shape of at most :data:`MAX_ARRAY_ENTRIES` entries, a :class:`_DtypeStub` and exactly
    ``entries * itemsize`` bytes (numeric) or ``entries`` items (the object container). The
    numpy array is built later from the bytes with ``np.frombuffer`` (:func:`_numeric`); an array
    whose state is never set (uninitialised) is refused there.
    """

    __slots__ = ("count", "dtype", "fortran", "payload", "shape")

    def __init__(self) -> None:
        self.shape: tuple[int, ...] | None = None
        self.dtype: _DtypeStub | None = None
        self.fortran, self.payload, self.count = False, None, 0

    def __setstate__(self, state: Any) -> None:
        if self.shape is not None:
            raise pickle.UnpicklingError("an array's state is set twice")
        if type(state) is not tuple or len(state) not in (4, 5):
            raise pickle.UnpicklingError(f"an array state must be a 4- or 5-tuple, got {describe(state)}")
        if len(state) == 5:
            if type(state[0]) is not int or state[0] != 1:
                raise pickle.UnpicklingError(f"unknown array state version {describe(state[0])}")
            state = state[1:]
        shape, dtype, fortran, payload = state
        if not isinstance(dtype, _DtypeStub):
            raise pickle.UnpicklingError(f"an array's dtype is {describe(dtype)}, expected a numpy dtype")
        if type(fortran) is not bool:
            raise pickle.UnpicklingError(f"an array's order flag is {describe(fortran)}, expected a bool")
        try:
            count = count_entries(shape)
        except ValueError as error:
            raise pickle.UnpicklingError(f"an array of dtype {dtype.code}: {error}") from None
        if dtype.is_object:
            if type(payload) is not list or len(payload) != count:
                raise pickle.UnpicklingError(
                    f"an object array of shape {shape} holds {describe(payload)} instead of a list of {count} items"
                )
        else:
            needed = count * dtype.build().itemsize
            if type(payload) is not bytes or len(payload) != needed:
                got = f"{len(payload):,} bytes" if type(payload) is bytes else describe(payload)
                raise pickle.UnpicklingError(
                    f"an array of shape {shape} and dtype {dtype.code} holds {got} (it needs exactly "
                    f"{needed:,} bytes)"
                )
        self.shape, self.dtype, self.fortran, self.payload, self.count = shape, dtype, fortran, payload, count


def _reconstruct_global(subtype: Any, shape: Any, typecode: Any) -> _ArrayStub:
    """Stand-in for ``numpy.core.multiarray._reconstruct``: an empty :class:`_ArrayStub`."""
    if subtype is not _NDARRAY:
        raise pickle.UnpicklingError(f"_reconstruct of {describe(subtype)}: only numpy.ndarray is accepted")
    return _ArrayStub()


_CSR_KEYS = frozenset({
    "_shape", "shape", "maxprint", "data", "indices", "indptr", "format",
    "_has_sorted_indices", "_has_canonical_format",
})
"""Keys of a pickled scipy CSR matrix (``data``, ``indices``, ``indptr`` and the shape are used)."""


class _CsrStub:
    """Stand-in for a scipy CSR matrix (``NEWOBJ`` + ``__setstate__`` of its ``__dict__``).

    Records the shape and the three :class:`_ArrayStub` parts; the matrix is rebuilt from them
    after validation (:func:`_adjacency`).
    """

    __slots__ = ("parts",)

    def __new__(cls, *args: Any, **kwargs: Any) -> _CsrStub:
        if args or kwargs:
            raise pickle.UnpicklingError("a scipy CSR matrix may only be rebuilt from its pickled state")
        self = super().__new__(cls)
        self.parts = None
        return self

    def __setstate__(self, state: Any) -> None:
        if self.parts is not None:
            raise pickle.UnpicklingError("a CSR matrix's state is set twice")
        if type(state) is not dict:
            raise pickle.UnpicklingError(f"a CSR matrix's state is {describe(state)}, expected a dict")
        unknown = [key for key in state if type(key) is not str or key not in _CSR_KEYS]
        if unknown:
            raise pickle.UnpicklingError(f"a CSR matrix's state has unexpected keys {[describe(k) for k in unknown[:5]]}")
        shape = state.get("_shape", state.get("shape"))
        if type(shape) is not tuple or len(shape) != 2 or any(type(s) is not int for s in shape):
            raise pickle.UnpicklingError(f"a CSR matrix's shape is {describe(shape)}, expected two ints")
        if any(not isinstance(state.get(key), _ArrayStub) for key in ("data", "indices", "indptr")):
            raise pickle.UnpicklingError("a CSR matrix needs data, indices and indptr arrays")
        if any(type(value) not in (bool, int, str, type(None)) for key, value in state.items()
               if key not in ("_shape", "shape", "data", "indices", "indptr")):
            raise pickle.UnpicklingError("a CSR matrix's flags must be plain bools, ints or strings")
        self.parts = (shape, state["data"], state["indices"], state["indptr"])


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct_global,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct_global,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _dtype_global,
    ("_codecs", "encode"): _latin1_encode,
    ("scipy.sparse.csr", "csr_matrix"): _CsrStub,
    ("scipy.sparse._csr", "csr_matrix"): _CsrStub,
    ("scipy.sparse._csr", "csr_array"): _CsrStub,
    ("scipy.sparse", "csr_matrix"): _CsrStub,
    ("scipy.sparse", "csr_array"): _CsrStub,
}
"""The only globals a GCB pickle may name, each resolved to an inert stand-in.

numpy array reconstruction, ``numpy.dtype``, ``_codecs.encode`` (latin-1) and the scipy CSR
classes; none of them calls numpy or scipy: they record shapes, dtype codes and bytes."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of numpy arrays and scipy CSR matrices, to inert stand-ins.

    Any other global (``os.system``, ``builtins.eval``, ...) raises ``pickle.UnpicklingError``
    naming it, before anything is called. The allowed ones (:data:`_ALLOWED_GLOBALS`) never
    reach numpy's or scipy's reconstruction: ``load()`` returns stand-ins that hold checked
    shapes, plain dtype codes and raw bytes, from which :func:`convert_gcb` builds plain
    numeric arrays itself (``np.frombuffer``). No structured or object dtype, no dtype
    ``__setstate__`` and no uninitialised ``numpy.ndarray(shape, dtype)`` is ever created.
    """

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"disallowed global {module}.{name} (only numpy arrays and scipy CSR matrices are "
                "accepted in a GCB file)"
            ) from None


_UNPICKLE_ERRORS = (
    pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError, IndexError, KeyError,
    OverflowError, RecursionError,
)


class _Budget:
    """Entries built from one pickled member, in all (shared references count each time)."""

    def __init__(self, path: Path, member: str) -> None:
        self.path, self.member, self.used = path, member, 0

    def take(self, count: int) -> None:
        self.used += count
        if self.used > MAX_ARRAY_ENTRIES:
            raise ValueError(
                f"{self.path}: member {self.member} holds more than {MAX_ARRAY_ENTRIES:,} entries in "
                "all (MAX_ARRAY_ENTRIES): the file is damaged or crafted"
            )


def _read_member(path: Path, archive_size: int, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray | list[Any]:
    """One ``.npy`` member of an original GCB file: a plain numeric array, or the items of a pickled object array.

    Sizes, dtype and shape are checked from the zip entry and the ``.npy`` header before any
    array is built; pickled members are read with :class:`RestrictedUnpickler`, whose items are
    inert stand-ins (checked and built by :func:`_numeric` / :func:`_adjacency`).
    """
    member = info.filename
    check_member_sizes(path, archive_size, info)
    with archive.open(info) as handle:
        shape, fortran, dtype, offset = npy_header(path, member, handle)
        if not dtype.hasobject:
            if not plain_dtype(dtype):
                raise ValueError(f"{path}: member {member} has dtype {dtype}, expected plain numbers (bool, int, uint, float)")
            count = check_plain_layout(path, info, shape, dtype, offset)
            if not shape:
                raise ValueError(f"{path}: member {member} is a scalar, expected one entry per graph")
            raw = handle.read(count * dtype.itemsize)
            if len(raw) != count * dtype.itemsize:
                raise ValueError(f"{path}: member {member} is truncated")
            return np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if fortran else "C")
        if dtype != np.dtype(object) or len(shape) != 1:
            raise ValueError(
                f"{path}: member {member} has dtype {dtype} and shape {shape}; pickled members must be "
                "1-d object arrays (one item per graph)"
            )
        try:
            count_entries(shape)
            stub = RestrictedUnpickler(handle).load()
            trailing = handle.read(1)
        except _UNPICKLE_ERRORS as error:
            raise ValueError(f"{path}: member {member} cannot be converted: {error}") from error
    if trailing:
        raise ValueError(f"{path}: member {member} has data after its pickle")
    if not isinstance(stub, _ArrayStub) or stub.dtype is None or not stub.dtype.is_object or stub.shape != shape:
        raise ValueError(f"{path}: member {member} is not an object array of shape {shape}")
    return list(stub.payload)


def _numeric(path: Path, where: str, value: Any, budget: _Budget, ndim: int | None = None) -> np.ndarray:
    """Build a plain numeric array from a stand-in (or check a built one); ``ValueError`` naming ``where`` else."""
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, _ArrayStub) and value.dtype is not None and not value.dtype.is_object:
        budget.take(value.count)
        array = np.frombuffer(value.payload, dtype=value.dtype.build()).reshape(
            value.shape, order="F" if value.fortran else "C"
        )
    elif isinstance(value, _ArrayStub) and value.dtype is None:
        raise ValueError(f"{path}: {where} is an array whose contents are never set (uninitialised memory)")
    elif isinstance(value, _ArrayStub):
        raise ValueError(f"{path}: {where} is an object array (nested pickled objects), expected numbers")
    else:
        raise ValueError(f"{path}: {where} is {describe(value)}, expected a numeric array")
    if not plain_dtype(array.dtype):
        raise ValueError(f"{path}: {where} has dtype {array.dtype}, expected plain numbers")
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{path}: {where} has {array.ndim} dimensions, expected {ndim}")
    return array


def _csr_structure(
    path: Path, where: str, n: int, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Check a CSR pattern of an ``(n, n)`` matrix; its ``(indptr, indices)`` as int64."""
    if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu" or indptr.ndim != 1 or indices.ndim != 1 or data.ndim != 1:
        raise ValueError(f"{path}: {where} needs 1-d integer indptr and indices and 1-d data")
    valid = (
        len(indptr) == n + 1 and len(data) == len(indices) and int(indptr[0]) == 0
        and int(indptr[-1]) == len(indices) and not bool((indptr[1:] < indptr[:-1]).any())
        and (not len(indices) or (int(indices.min()) >= 0 and int(indices.max()) < n))
    )
    if not valid:
        raise ValueError(f"{path}: {where} is not a valid CSR adjacency of a {n}-vertex graph")
    return indptr.astype(np.int64), indices.astype(np.int64)


def _adjacency(path: Path, where: str, value: Any, budget: _Budget) -> sp.csr_matrix:
    """Rebuild a validated square CSR matrix from a stand-in (or a dense numeric array)."""
    if isinstance(value, _CsrStub) and value.parts is not None:
        shape, data, indices, indptr = value.parts
        if not 0 <= shape[0] <= MAX_ARRAY_ENTRIES or shape[0] != shape[1]:
            raise ValueError(f"{path}: {where} has shape {describe(shape)}, expected a square matrix")
        data = _numeric(path, f"{where} (data)", data, budget, ndim=1)
        indices = _numeric(path, f"{where} (indices)", indices, budget, ndim=1)
        indptr = _numeric(path, f"{where} (indptr)", indptr, budget, ndim=1)
        n = shape[0]
    elif isinstance(value, _CsrStub):
        raise ValueError(f"{path}: {where} is a CSR matrix whose contents are never set")
    elif isinstance(value, (_ArrayStub, np.ndarray)):
        dense = _numeric(path, where, value, budget, ndim=2)
        if dense.shape[0] != dense.shape[1]:
            raise ValueError(f"{path}: {where} is not square ({dense.shape})")
        matrix = sp.csr_matrix(dense)
        data, indices, indptr, n = matrix.data, matrix.indices, matrix.indptr, dense.shape[0]
    else:
        raise ValueError(f"{path}: {where} is {describe(value)}, expected a sparse matrix")
    indptr, indices = _csr_structure(path, where, n, indptr, indices, data)
    rebuilt = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    rebuilt.check_format(full_check=True)
    return rebuilt


def convert_gcb(src: str | os.PathLike, dst: str | os.PathLike | None = None) -> Path:
    """Convert an original GCB file (object arrays of scipy CSR matrices) to the plain format.

    The pickled members are read with :class:`RestrictedUnpickler`, never with
    ``np.load(..., allow_pickle=True)``: a global other than numpy array / scipy CSR
    reconstruction raises a ``ValueError`` naming it, and the allowed ones are inert stand-ins,
    so that only plain numeric arrays are ever built (``np.frombuffer`` of bytes whose length
    matches the checked shape and a bool / int / uint / float dtype). Structured or object
    dtypes, dtype states, uninitialised ``numpy.ndarray(shape, dtype)`` payloads and shapes
    above :data:`MAX_ARRAY_ENTRIES` raise a ``ValueError`` naming the file and member before
    any allocation, and so does a file whose members ask for more memory than
    :data:`GCB_MEMORY_BUDGET` in all (estimated from the zip directory before any member is
    read). The result is read by :func:`read_gcb`.

    The output is written to a new temporary file in its folder (unpredictable name, exclusive
    creation: a planted file or symlink is never followed) and renamed over ``dst``.

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
    src = require_file(Path(src), "GCB file", GCB_SOURCE, example="hard_small.npz")
    dst = Path(dst) if dst is not None else gcb_plain_path(src)
    if dst.is_dir():
        raise ValueError(
            f"the output {dst} is a folder; pass the output file, e.g. "
            f"{dst / gcb_plain_path(src).name}"
        )
    if dst.resolve() == src.resolve():
        raise ValueError(f"the output {dst} must differ from the input file {src}")
    try:
        archive = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError) as error:
        raise ValueError(f"{src} is not a readable .npz archive ({error})") from error
    size = src.stat().st_size
    out: dict[str, np.ndarray] = {"format": np.array(_PLAIN_FORMAT)}
    try:
        with archive:
            members = {info.filename[:-4]: info for info in archive.infolist() if info.filename.endswith(".npy")}
            missing = [
                f"{p}_{k}" for p in _GCB_PREFIX.values() for k in ("adj", "feat", "class")
                if f"{p}_{k}" not in members
            ]
            if missing:
                raise ValueError(f"{src} is not an original GCB file: keys {missing} are missing")
            read = [members[f"{p}_{k}"] for p in _GCB_PREFIX.values() for k in ("adj", "feat", "class")]
            for info in read:  # sizes the archive can hold, then what they ask for against the budget
                check_member_sizes(src, size, info)
            graphs = sum(_graph_count(src, archive, members[f"{p}_adj"]) for p in _GCB_PREFIX.values())
            _check_memory(src, read, graphs, converting=True)
            for prefix in _GCB_PREFIX.values():
                out.update(_convert_split(src, size, archive, members, prefix))
    except (zipfile.BadZipFile, EOFError, zlib.error) as error:
        raise ValueError(f"{src} is truncated or damaged ({type(error).__name__}: {error})") from error
    with atomic_output(dst) as handle:
        np.savez_compressed(handle, **out)
    return dst


def _graph_count(src: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Items of a 1-d member, from its ``.npy`` header alone (0 for another shape, refused when read)."""
    with archive.open(info) as handle:
        shape, _fortran, _dtype, _offset = npy_header(src, info.filename, handle)
    return max(shape[0], 0) if len(shape) == 1 and type(shape[0]) is int else 0


def _convert_split(
    src: Path, size: int, archive: zipfile.ZipFile, members: Mapping[str, zipfile.ZipInfo], prefix: str
) -> dict[str, np.ndarray]:
    """Convert one split (``prefix`` ``tr`` / ``val`` / ``te``) of an original GCB file to plain arrays."""
    names = {k: f"{prefix}_{k}" for k in ("adj", "feat", "class")}
    adjacency, features, labels = (_read_member(src, size, archive, members[names[k]]) for k in ("adj", "feat", "class"))
    item = {k: f"member {name}.npy item {{}}".format for k, name in names.items()}
    if not len(adjacency) == len(features) == len(labels):
        raise ValueError(f"{src}: {prefix}_adj, {prefix}_feat, {prefix}_class differ in length")
    budget = _Budget(src, names["adj"])
    matrices = [_adjacency(src, item["adj"](i), a, budget) for i, a in enumerate(adjacency)]
    budget = _Budget(src, names["feat"])
    feats = [_numeric(src, item["feat"](i), f, budget, ndim=2) for i, f in enumerate(features)]
    for i, (m, f) in enumerate(zip(matrices, feats)):
        if len(f) != m.shape[0]:
            raise ValueError(f"{src}: {item['feat'](i)} has {len(f)} rows but graph {i} has {m.shape[0]} vertices")
    if isinstance(labels, list):  # an object array of per-graph labels
        budget = _Budget(src, names["class"])
        items = [_numeric(src, item["class"](i), c, budget) for i, c in enumerate(labels)]
        if any(c.shape != items[0].shape or c.ndim > 1 for c in items):
            raise ValueError(f"{src}: the labels of {names['class']} are not scalars or vectors of one length")
        labels = np.stack(items) if items else np.zeros(0, dtype=np.float32)
    if labels.ndim not in (1, 2):
        raise ValueError(f"{src}: {names['class']} has shape {labels.shape}, expected (graphs,) or (graphs, classes)")
    width = feats[0].shape[1] if feats else 0
    if any(f.shape[1] != width for f in feats):
        raise ValueError(f"{src}: the graphs of {names['feat']} have different feature widths")
    return {
        f"{prefix}_num_nodes": np.array([m.shape[0] for m in matrices], dtype=np.int64),
        f"{prefix}_adj_nnz": np.array([m.nnz for m in matrices], dtype=np.int64),
        f"{prefix}_adj_indptr": _concat([m.indptr.astype(np.int64) for m in matrices], np.int64),
        f"{prefix}_adj_indices": _concat([m.indices.astype(np.int64) for m in matrices], np.int64),
        f"{prefix}_adj_data": _concat([m.data for m in matrices], np.float64),
        f"{prefix}_feat_rows": np.array([len(f) for f in feats], dtype=np.int64),
        f"{prefix}_feat": np.concatenate(feats) if feats else np.zeros((0, width), dtype=np.float32),
        f"{prefix}_class": np.ascontiguousarray(labels),
    }


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


# ----------------------------------------------------------------------------------------------
# the family: dataset.loader=gcb
# ----------------------------------------------------------------------------------------------
def _stem(file: str) -> str:
    """``hard_small.npz`` / ``hard_small.plain.npz`` → ``hard_small`` (the benchmark's file name)."""
    name = Path(file).name
    for suffix in (".plain.npz", ".npz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def gcb_file(data_dir: Path, file: str) -> Path:
    """Return the GCB file to read: ``<stem>.plain.npz`` next to ``file`` when present, else ``file``.

    Raises a ``FileNotFoundError`` naming ``dataset.file=`` and the ``.npz`` files of
    ``data_dir`` when neither exists (GCB ships several files; ``hard_small.npz`` is only the
    default).
    """
    path = data_dir / file
    plain = gcb_plain_path(path)
    if plain.is_file() and not path.name.endswith(".plain.npz"):
        return plain
    if not path.is_file() and data_dir.is_dir():
        found = sorted({_stem(p.name) + ".npz" for p in data_dir.glob("*.npz")})
        hint = (
            f"it holds {', '.join(found)}: choose one with dataset.file=NAME (e.g. dataset.file={found[0]})"
            if found else "it holds no .npz file"
        )
        raise FileNotFoundError(
            f"GCB file {file} not found in --data-dir {data_dir} (nor {plain.name}); {hint}. "
            f"The benchmark ships several files (hard_small.npz is only the default of dataset.file); "
            f"download them from {GCB_SOURCE}"
        )
    return path


def _file_option(cfg: Mapping[str, Any]) -> str:
    return str(cfg.get("file", "hard_small.npz"))


def _read(cfg: Mapping[str, Any], cache_dir: Path) -> dict[str, list[Data]]:
    folder = require_data_dir(cfg, str(cfg.get("file", "hard_small.npz")))
    return read_gcb(gcb_file(folder, _file_option(cfg)))


def _files(cfg: Mapping[str, Any], cache_dir: Path) -> list[Path] | None:
    if cfg.get("data_dir") is None:
        return None
    file = gcb_file(Path(cfg["data_dir"]).expanduser(), _file_option(cfg))
    return [file] if file.is_file() else None


def _display_name(cfg: Mapping[str, Any]) -> str:
    """GCB ships several files: the name of the one read is part of the data set's (tables, folders)."""
    return f"{cfg['name']}-{_stem(str(cfg.get('file') or 'hard_small.npz'))}"


GCB = register_family(DatasetFamily("gcb", read=_read, files=_files, display_name=_display_name))
"""GCB files (``dataset.loader=gcb``, ``dataset.file``): the file's own train/val/test split."""
