"""Checked ``.npz`` members: sizes, dtypes and shapes read from the zip directory and the ``.npy`` headers.

The data-set readers that take ``.npz`` files (:mod:`~.gcb`, :mod:`~.heterophilous`) inspect
every member with these functions before any array is allocated: impossible stored sizes
(:func:`check_member_sizes`), a header that is not valid ``.npy`` (:func:`npy_header`), a dtype
that is not plain numeric (:func:`plain_dtype`), a claimed shape above
:data:`MAX_ARRAY_ENTRIES` or one that does not match the member's bytes
(:func:`check_plain_layout`); :func:`open_npz` loads without pickles. Every refusal is a
``ValueError`` naming the file and member.
"""

from __future__ import annotations

import tokenize
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFLATE_MAX_RATIO",
    "MAX_ARRAY_ENTRIES",
    "PLAIN_DTYPES",
    "check_member_sizes",
    "check_plain_layout",
    "count_entries",
    "describe",
    "npy_header",
    "open_npz",
    "plain_dtype",
]


def open_npz(path: Path) -> Any:
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


MAX_ARRAY_ENTRIES = 10**8
"""The most entries one array of a ``.npz`` data file may hold (100 million: 800 MB of float64).

The GCB readers refuse a larger claim (in a ``.npy`` header, a pickled shape, or in all the
arrays of one pickled member together) with a ``ValueError`` naming the file and member,
before anything is allocated; the 1,800-graph GCB file needs about 10**6."""

PLAIN_DTYPES = frozenset({"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"})
"""``kind + itemsize`` of the plain numeric dtypes (also numpy's pickle codes of them)."""

DEFLATE_MAX_RATIO = 1032
"""Deflate never expands data by more than 1032:1 (a bound on a member's uncompressed size)."""


def describe(value: Any) -> str:
    """Describe a value from a file for an error message: ints and short strings as such, others by type."""
    if type(value) in (int, bool) or value is None:
        return repr(value)
    if type(value) is str:
        return repr(value[:40] + ("..." if len(value) > 40 else ""))
    if type(value) is tuple and len(value) <= 8 and all(type(v) is int for v in value):
        return repr(value)
    return f"a {type(value).__name__}"


def plain_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is a plain bool / int / uint / float dtype (no fields, objects or sub-arrays)."""
    return (
        isinstance(dtype, np.dtype) and dtype.fields is None and dtype.subdtype is None
        and not dtype.hasobject and f"{dtype.kind}{dtype.itemsize}" in PLAIN_DTYPES
    )


def count_entries(shape: Any) -> int:
    """Count the entries of a claimed shape; ``ValueError`` for an invalid or too large shape."""
    if type(shape) is not tuple or len(shape) > 32 or any(type(s) is not int or s < 0 for s in shape):
        raise ValueError(f"invalid shape {describe(shape)} (expected a tuple of non-negative ints)")
    count = int(np.prod(shape, dtype=object)) if all(s <= MAX_ARRAY_ENTRIES for s in shape) else None
    if count is None or count > MAX_ARRAY_ENTRIES:
        raise ValueError(
            f"shape {shape} claims more than {MAX_ARRAY_ENTRIES:,} entries (the limit per array, "
            "MAX_ARRAY_ENTRIES)"
        )
    return count


def check_member_sizes(path: Path, archive_size: int, info: zipfile.ZipInfo) -> None:
    """Refuse a zip member whose stored sizes are impossible for an ``.npz`` of this size."""
    member = info.filename
    if info.flag_bits & 0x1:
        raise ValueError(f"{path}: member {member} is encrypted; a .npz member never is")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ValueError(
            f"{path}: member {member} uses zip compression method {info.compress_type}; "
            ".npz files are stored or deflated"
        )
    possible = info.compress_size if info.compress_type == zipfile.ZIP_STORED else (
        DEFLATE_MAX_RATIO * info.compress_size + 64
    )
    if info.compress_size > archive_size or info.file_size > possible:
        raise ValueError(
            f"{path}: member {member} claims {info.file_size:,} bytes from {info.compress_size:,} "
            f"compressed bytes in a {archive_size:,}-byte archive, which is impossible: the file is "
            "damaged or crafted (refused before reading it)"
        )


def npy_header(path: Path, member: str, handle: Any) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, data_offset)`` of an open ``.npy`` member."""
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, TypeError, EOFError, SyntaxError, tokenize.TokenError, RecursionError, OverflowError) as error:
        detail = " ".join(str(error).split())[:160]
        raise ValueError(f"{path}: member {member} has no valid .npy header ({type(error).__name__}: {detail})") from error
    return tuple(shape), bool(fortran), dtype, handle.tell()


def check_plain_layout(
    path: Path, info: zipfile.ZipInfo, shape: tuple[int, ...], dtype: np.dtype, offset: int
) -> int:
    """Check that a numeric member's header matches its size; return the number of entries."""
    try:
        count = count_entries(shape)
    except ValueError as error:
        raise ValueError(
            f"{path}: member {info.filename} ({dtype}) {error}: the file is damaged or crafted "
            "(refused before reading it)"
        ) from None
    if offset + count * dtype.itemsize != info.file_size:
        raise ValueError(
            f"{path}: member {info.filename} claims shape {shape} of {dtype} "
            f"({count * dtype.itemsize:,} bytes) but holds {max(info.file_size - offset, 0):,} bytes "
            "of data: the file is damaged or crafted (refused before reading it)"
        )
    return count
