"""Crafted GCB files for the converter and reader tests (tiny, generated; never ../shared).

Each builder writes an ``.npz`` whose members are what ``np.savez`` writes for object arrays
(pickles), with one member replaced by a crafted one: reducers produce exactly the pickle
opcodes an attacker would write (``numpy.dtype('V8', False, True)`` + ``__setstate__`` with an
object field, ``_reconstruct`` from raw bytes, ``numpy.ndarray(shape, dtype)``, ...).
"""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

try:  # numpy 2
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy 1
    from numpy.core.multiarray import _reconstruct

PREFIXES = ("tr", "val", "te")


class Reduce:
    """Pickles as ``callable(*args)`` followed by ``BUILD state`` (what the crafted file says)."""

    def __init__(self, *reduce):
        self.reduce = reduce

    def __reduce__(self):
        return self.reduce


def objects(items) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def dtype(code: str, state: tuple) -> Reduce:
    """``numpy.dtype(code, False, True)`` + ``__setstate__(state)``."""
    return Reduce(np.dtype, (code, False, True), state)


def structured_object_dtype(variant: str = "object") -> Reduce:
    """A structured dtype whose field ``a`` is an object pointer read from the array's bytes.

    ``"object"``: one object field at offset 0 (``V8``); ``"overlap"``: an object field and an
    int64 field at the same offset (``V8``); ``"nested"``: ``V16`` with a float field then the
    object field.
    """
    obj = np.dtype("O")
    fields = {
        "object": (("a",), {"a": (obj, 0)}, 8, "V8"),
        "overlap": (("a", "b"), {"a": (obj, 0), "b": (np.dtype("<i8"), 0)}, 8, "V8"),
        "nested": (("x", "a"), {"x": (np.dtype("<f8"), 0), "a": (obj, 8)}, 16, "V16"),
    }[variant]
    names, table, size, code = fields
    return dtype(code, (3, "|", None, names, table, size, 1, 0))


def reconstructed(shape, dtype_reducer, payload: bytes, version: bool = True, fortran: bool = False) -> Reduce:
    """``_reconstruct(numpy.ndarray, (0,), b'b')`` + ``__setstate__((1, shape, dtype, fortran, payload))``."""
    state = (shape, dtype_reducer, fortran, payload)
    return Reduce(_reconstruct, (np.ndarray, (0,), b"b"), (1, *state) if version else state)


def plain_dtype(code: str = "f4") -> Reduce:
    """A plain numeric dtype exactly as numpy pickles it."""
    order = "|" if code in ("b1", "i1", "u1") else "<"
    return dtype(code, (3, order, None, None, None, -1, -1, 0))


def pointer_array(rows: int = 2, variant: str = "object") -> Reduce:
    """A ``(rows, 1)`` structured array whose object pointers are ``0x4141414141414141``."""
    size = 16 if variant == "nested" else 8
    return reconstructed((rows, 1), structured_object_dtype(variant), b"A" * size * rows)


def uninitialised(shape=(4, 5), code: str = "f4") -> Reduce:
    """``numpy.ndarray(shape, dtype)``: an array of uninitialised memory (no bytes in the file)."""
    return Reduce(np.ndarray, (shape, np.dtype(code)))


def unset_array() -> Reduce:
    """``_reconstruct(numpy.ndarray, (0,), b'b')`` whose state is never set."""
    return Reduce(_reconstruct, (np.ndarray, (0,), b"b"))


def graphs(count: int = 2, seed: int = 0, *, rng: np.random.Generator | None = None, sizes=(2, 6)):
    """Adjacency (CSR), features and one-hot labels of ``count`` small graphs.

    ``sizes``: the range of node counts (high end excluded); ``rng`` (default: seeded by
    ``seed``) lets several calls draw from one stream.
    """
    rng = np.random.default_rng(seed) if rng is None else rng
    mats, feats, labels = [], [], []
    for i in range(count):
        n = int(rng.integers(*sizes))
        dense = np.triu(rng.random((n, n)) < 0.5, 1)
        mats.append(sp.csr_matrix((dense | dense.T).astype(np.float32)))
        feats.append(np.eye(5, dtype=np.float32)[rng.integers(0, 5, n)])
        labels.append(np.eye(3, dtype=np.float32)[i % 3])
    return mats, feats, np.stack(labels)


def write_original(path: Path, replace: dict | None = None, count: int = 2, seed: int = 0) -> Path:
    """An original-format GCB file; ``replace`` maps member keys (``tr_feat``) to other arrays."""
    data = {}
    for p, prefix in enumerate(PREFIXES):
        mats, feats, labels = graphs(count, seed + p)
        data[f"{prefix}_adj"] = objects(mats)
        data[f"{prefix}_feat"] = objects(feats)
        data[f"{prefix}_class"] = labels
    data.update(replace or {})
    np.savez(path, **data)
    return path


def npy_bytes(header: dict, payload: bytes = b"") -> bytes:
    """A ``.npy`` member with a given header (it may claim any shape) and payload."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + payload


def replace_member(path: Path, member: str, content: bytes) -> Path:
    """Rewrite ``path`` with ``member`` (e.g. ``tr_feat.npy``) replaced by raw ``content``."""
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    members[member] = content
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def claim_size(path: Path, member: str, size: int) -> Path:
    """Patch the uncompressed size the zip directory gives for ``member`` (both headers)."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            name_length_at = 28 if signature == b"PK\x01\x02" else 26
            name_at = 46 if signature == b"PK\x01\x02" else 30
            length = struct.unpack_from("<H", data, start + name_length_at)[0]
            if bytes(data[start + name_at : start + name_at + length]) == name:
                struct.pack_into("<I", data, start + offset, size)
            start += 4
    path.write_bytes(bytes(data))
    return path


def inflating_member(path: Path, member: str, head: bytes, zeros: int, tail: bytes = b"") -> Path:
    """Rewrite ``path`` with ``member`` = ``head`` + ``zeros`` zero bytes + ``tail``, deflated.

    The zeros are streamed into the archive, never held whole: a file of a few hundred kB whose
    member inflates to any size.
    """
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist() if info.filename != member}
    chunk = memoryview(bytes(1 << 20))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        info = zipfile.ZipInfo(member)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as handle:
            handle.write(head)
            left = zeros
            while left:
                step = min(left, len(chunk))
                handle.write(chunk[:step])
                left -= step
            handle.write(tail)
    return path


def pickled_payload_member(items: int, payload_bytes: int) -> tuple[bytes, bytes]:
    """``(head, tail)`` of a pickled object member of ``items`` feature arrays, the first one of
    ``payload_bytes`` zero bytes (float64): the member is ``head + zeros + tail`` (:func:`inflating_member`)."""
    import pickle

    marker = b"\x5a" * 64
    first = reconstructed((payload_bytes // 8,), plain_dtype("f8"), marker)
    rest = [np.zeros((2, 3), dtype=np.float32) for _ in range(items - 1)]
    stream = pickle.dumps(objects([first, *rest]), protocol=3)
    at = stream.index(b"C\x40" + marker)  # SHORT_BINBYTES of the marker -> BINBYTES of the payload
    head = npy_bytes({"descr": "|O", "fortran_order": False, "shape": (items,)})
    return head + stream[:at] + b"B" + struct.pack("<I", payload_bytes), stream[at + 2 + len(marker):]
