"""The cache of processed complexes: ``<cache_dir>/processed/<NAME>/<key>.pt``.

``key`` (:func:`cache_key`) hashes the data set's reading options (its family adds its own:
:attr:`~topomodelx_attention.datasets.registry.DatasetFamily.key_fields`), the lifting/PE
configurations and the raw files read (:func:`data_fingerprint`: resolved path, size,
modification time and SHA-256 of each file the family names), so different configurations,
another ``data_dir`` or changed files never collide. A file (:func:`save_cache`) holds plain
tensors only, written atomically through :mod:`topomodelx_attention.files`, and is read back
with ``torch.load(weights_only=True)`` and validated (:func:`load_cache`): nothing in a cache
folder is ever unpickled. :func:`clean_orphans` deletes the temporary files of killed saves.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from topomodelx_attention.data import ComplexData
from topomodelx_attention.datasets.registry import SPLITS, data_files, get_family, plain
from topomodelx_attention.files import atomic_output, check_writable

__all__ = [
    "CACHE_FORMAT",
    "CACHE_VERSION",
    "CacheError",
    "cache_key",
    "check_cache_writable",
    "clean_orphans",
    "data_fingerprint",
    "load_cache",
    "missing_folders",
    "remove_empty",
    "save_cache",
]

CACHE_VERSION = 2
"""Bumped when the processed format changes (part of the cache key)."""


CACHE_FORMAT = "topomodelx-attention complexes 2"
"""``format`` entry of a cache file (:func:`save_cache`)."""


_DIGESTS: dict[tuple[Any, ...], str] = {}
"""SHA-256 of files already hashed by this process, by (path, device, inode, size, mtime, ctime)."""


def data_fingerprint(files: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    """Path, size, modification time and SHA-256 digest of every file (what the cache key hashes).

    Parameters
    ----------
    files : sequence of path-like
        The raw files of a data set (:func:`data_files`).

    Returns
    -------
    list of dict
        ``{"path", "size", "mtime_ns", "sha256"}`` per file, in the given order.
    """
    out = []
    for file in files:
        path = Path(file).resolve()
        stat = path.stat()
        # ctime changes with every write and every utime: a digest is reused only for the same bytes
        memo = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        digest = _DIGESTS.get(memo)
        if digest is None:
            sha = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(block)
            digest = _DIGESTS[memo] = sha.hexdigest()
        out.append({"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest})
    return out


def cache_key(
    dataset_cfg: Mapping[str, Any],
    lifting_cfg: Any,
    pe_cfg: Any,
    lifting: Any = None,
    pe: Any = None,
    *,
    sources: Sequence[Mapping[str, Any]] | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> str:
    """Hash of everything that determines the processed complexes.

    That is the data set's reading options, the lifting and PE configurations (and ``repr``),
    and where the data came from: the resolved path, size, modification time and SHA-256 of
    every raw file read (:func:`data_fingerprint`). Another ``--data-dir`` with the same data
    set name, or an edited or replaced file, gives another key.

    Parameters
    ----------
    dataset_cfg : mapping
        ``dataset`` config (reading options: name, loader, file, target, subset, max_graphs,
        lifting_kwargs, and use_node_attr when true).
    lifting_cfg, pe_cfg : mapping or None
        Lifting and PE configs.
    lifting, pe : object, optional
        The instantiated transforms (their ``repr`` is hashed too).
    sources : sequence of mapping, optional
        :func:`data_fingerprint` of the raw files (default: computed from ``dataset_cfg``).
    cache_dir : path-like, optional
        Cache folder (where downloaded TU files are), when ``sources`` is not given.

    Returns
    -------
    str
        Hex digest (first 16 characters).

    Raises
    ------
    FileNotFoundError
        When ``sources`` is not given and the raw files are not found.
    """
    dataset_cfg = plain(dataset_cfg)
    if sources is None:
        files = data_files(dataset_cfg, cache_dir)
        if files is None:
            raise FileNotFoundError(
                f"the raw files of data set {dataset_cfg.get('name')} are not found (dataset.data_dir="
                f"{dataset_cfg.get('data_dir')!r}): the cache key covers their content"
            )
        sources = data_fingerprint(files)
    reading = {
        key: dataset_cfg.get(key)
        for key in ("name", "loader", "file", "target", "subset", "max_graphs", "lifting_kwargs")
    }
    # the family's own options (TU: use_node_attr; GraphUniverse: task, generation, split)
    reading.update(get_family(dataset_cfg.get("loader")).key_fields(dataset_cfg))
    payload = {
        "version": CACHE_VERSION,
        "dataset": reading,
        "sources": [dict(source) for source in sources],
        "lifting": plain(lifting_cfg),
        "pe": plain(pe_cfg),
        "lifting_repr": repr(lifting) if lifting is not None else None,
        "pe_repr": repr(pe) if pe is not None else None,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


class CacheError(ValueError):
    """A cache file that is not a valid :func:`save_cache` file."""


def _pack_complexes(complexes: Sequence[ComplexData]) -> dict[str, Any]:
    """Complexes as a few concatenated plain tensors per key (what ``weights_only`` loads)."""
    keys = sorted({key for c in complexes for key in c.keys()})
    packed: dict[str, Any] = {}
    for key in keys:
        present = torch.tensor([key in c for c in complexes], dtype=torch.bool)
        values = [c[key] for c in complexes if key in c]
        first = values[0]
        if isinstance(first, Tensor) and first.layout == torch.sparse_coo and first.dim() == 2 and first.dense_dim() == 0:
            if any(not isinstance(v, Tensor) or v.layout != torch.sparse_coo or v.dim() != 2 or v.dtype != first.dtype for v in values):
                raise TypeError(f"cannot cache {key!r}: mixed sparse and other values")
            entry = {
                "kind": "sparse",
                "indices": torch.cat([v._indices() for v in values], dim=1),
                "values": torch.cat([v._values() for v in values]),
                "sizes": torch.tensor([list(v.shape) for v in values], dtype=torch.long).view(-1, 2),
                "nnz": torch.tensor([v._nnz() for v in values], dtype=torch.long),
                "coalesced": torch.tensor([v.is_coalesced() for v in values], dtype=torch.bool),
            }
        elif isinstance(first, Tensor) and first.layout == torch.strided:
            if any(not isinstance(v, Tensor) or v.layout != torch.strided or v.dim() != first.dim() or v.dtype != first.dtype for v in values):
                raise TypeError(f"cannot cache {key!r}: tensors of different kinds")
            entry = {
                "kind": "dense",
                "values": torch.cat([v.reshape(-1) for v in values]),
                "shapes": torch.tensor([list(v.shape) for v in values], dtype=torch.long).view(len(values), first.dim()),
            }
        elif isinstance(first, (bool, int, float)) and all(type(v) is type(first) for v in values):
            entry = {"kind": type(first).__name__, "values": list(values)}
        else:
            raise TypeError(f"cannot cache {key!r} of type {type(first).__name__}")
        entry["present"] = present
        packed[key] = entry
    return packed


def _unpack_complexes(packed: Any, count: int) -> list[ComplexData]:
    """Inverse of :func:`_pack_complexes`; validates every entry (raises :class:`CacheError`)."""
    if not isinstance(packed, dict):
        raise CacheError(f"'complexes' is a {type(packed).__name__}, expected a dict")
    items: list[dict[str, Any]] = [{} for _ in range(count)]
    for key, entry in packed.items():
        if not isinstance(key, str) or not isinstance(entry, dict):
            raise CacheError(f"entry {key!r} is not a dict")
        present = entry.get("present")
        if not isinstance(present, Tensor) or present.dtype != torch.bool or present.shape != (count,):
            raise CacheError(f"entry {key!r} has no valid 'present' mask")
        owners = present.nonzero().view(-1).tolist()
        kind = entry.get("kind")
        if kind == "dense":
            values, shapes = entry.get("values"), entry.get("shapes")
            if not (isinstance(values, Tensor) and isinstance(shapes, Tensor) and values.dim() == 1
                    and shapes.dtype == torch.long and shapes.dim() == 2 and len(shapes) == len(owners)
                    and bool((shapes >= 0).all())):
                raise CacheError(f"dense entry {key!r} is malformed")
            numels = shapes.prod(dim=1) if shapes.size(1) else torch.ones(len(owners), dtype=torch.long)
            if int(numels.sum()) != values.numel():
                raise CacheError(f"dense entry {key!r}: shapes and values differ in size")
            for owner, part, shape in zip(owners, values.split(numels.tolist()), shapes.tolist()):
                items[owner][key] = part.view(shape)
        elif kind == "sparse":
            indices, values, sizes, nnz, coalesced = (
                entry.get(name) for name in ("indices", "values", "sizes", "nnz", "coalesced")
            )
            tensors = (indices, values, sizes, nnz, coalesced)
            if not (all(isinstance(t, Tensor) for t in tensors) and indices.dtype == torch.long
                    and indices.dim() == 2 and indices.size(0) == 2 and values.dim() == 1
                    and values.numel() == indices.size(1) and sizes.shape == (len(owners), 2)
                    and nnz.shape == (len(owners),) and coalesced.shape == (len(owners),)
                    and bool((nnz >= 0).all()) and bool((sizes >= 0).all()) and int(nnz.sum()) == values.numel()):
                raise CacheError(f"sparse entry {key!r} is malformed")
            owner = torch.repeat_interleave(torch.arange(len(nnz)), nnz)  # matrix of each entry
            if indices.numel() and (
                int(indices.min()) < 0 or bool((indices[0] >= sizes[owner, 0]).any())
                or bool((indices[1] >= sizes[owner, 1]).any())
            ):
                raise CacheError(f"sparse entry {key!r} has indices outside its matrices")
            counts = nnz.tolist()
            for owner, idx, val, size, flag in zip(
                owners, indices.split(counts, dim=1), values.split(counts), sizes.tolist(), coalesced.tolist()
            ):
                items[owner][key] = torch.sparse_coo_tensor(idx, val, size, is_coalesced=bool(flag), check_invariants=False)
        elif kind in ("bool", "int", "float"):
            values = entry.get("values")
            expected = {"bool": bool, "int": int, "float": float}[kind]
            if not isinstance(values, list) or len(values) != len(owners) or any(type(v) is not expected for v in values):
                raise CacheError(f"entry {key!r} is malformed")
            for owner, value in zip(owners, values):
                items[owner][key] = value
        else:
            raise CacheError(f"entry {key!r} has an unknown kind {kind!r}")
    return [ComplexData(**item) for item in items]


def save_cache(payload: Mapping[str, Any], path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> None:
    """Write processed complexes as plain tensors, atomically (a temporary file, then a rename).

    The temporary file is created next to ``path`` with an unpredictable name and exclusive
    creation (:func:`topomodelx_attention.files.atomic_output`): a file or symlink planted at
    a guessed name is never followed or overwritten, nor is a link planted at a folder between
    ``root`` and ``path``.

    The file holds only tensors, lists, ints and strings, so :func:`load_cache` reads it with
    ``torch.load(weights_only=True)``: nothing in a cache folder is ever unpickled.

    Parameters
    ----------
    payload : mapping
        ``{"complexes": list of ComplexData, "split": dict of str to array or None}``.
    path : path-like
        Cache file.
    root : path-like, optional
        The cache folder (default: the folder of ``path``).
    """
    path = Path(path)
    complexes = list(payload["complexes"])
    split = payload.get("split")
    stored = {
        "format": CACHE_FORMAT,
        "count": len(complexes),
        "complexes": _pack_complexes(complexes),
        "split": None if split is None else {k: torch.as_tensor(np.asarray(v), dtype=torch.long) for k, v in split.items()},
    }
    # <name>.<host>.<pid>.<random>.tmp, created exclusively (a planted symlink is never followed);
    # host and pid let clean_orphans tell a killed save from a running one
    with atomic_output(path, root=root, prefix=f"{path.name}.{socket.gethostname()}.{os.getpid()}.") as handle:
        torch.save(stored, handle)


def load_cache(path: str | os.PathLike) -> dict[str, Any]:
    """Read a :func:`save_cache` file with ``torch.load(weights_only=True)`` and validate it.

    Parameters
    ----------
    path : path-like
        Cache file.

    Returns
    -------
    dict
        ``{"complexes": list of ComplexData, "split": dict of str to numpy.ndarray or None}``.

    Raises
    ------
    ValueError
        When the file is truncated, damaged, not a cache file, or holds anything but plain
        tensors (a pickle naming any other global is refused by ``weights_only``, unexecuted).
    """
    path = Path(path)
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, garbage, foreign pickles: all invalid
        raise CacheError(f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from error
    if not isinstance(raw, dict) or raw.get("format") != CACHE_FORMAT:
        raise CacheError(f"not a cache file of this version (expected format {CACHE_FORMAT!r})")
    count = raw.get("count")
    if not isinstance(count, int) or count < 0:
        raise CacheError("no valid complex count")
    complexes = _unpack_complexes(raw.get("complexes"), count)
    split = raw.get("split")
    if split is not None:
        if not isinstance(split, dict) or set(split) != set(SPLITS):
            raise CacheError(f"'split' must be None or a dict with keys {list(SPLITS)}")
        for name, idx in split.items():
            if not isinstance(idx, Tensor) or idx.dtype != torch.long or idx.dim() != 1 or (
                idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= count)
            ):
                raise CacheError(f"split {name!r} is not a vector of complex indices")
        split = {name: idx.numpy() for name, idx in split.items()}
    return {"complexes": complexes, "split": split}


def _temporary_pid(name: str, host: str) -> int | None:
    """Process id in a temporary name of this host (``<name>.<host>.<pid>[.<random>].tmp``), else None."""
    match = re.fullmatch(rf"(?P<name>.+)\.{re.escape(host)}\.(?P<pid>\d+)(?:\.[A-Za-z0-9_]+)?\.tmp", name)
    return int(match["pid"]) if match else None


def clean_orphans(folder: Path, max_age: float = 24 * 3600.0) -> None:
    """Delete temporary files of saves that were killed (this host: their process is gone).

    Temporary names are ``<name>.<host>.<pid>.<random>.tmp`` (:func:`save_cache`; older
    versions wrote ``<name>.<host>.<pid>.tmp``); those of other hosts, or of no known
    pattern, are deleted once older than ``max_age`` seconds.
    """
    if not folder.is_dir():
        return
    host = socket.gethostname()
    for tmp in folder.glob("*.tmp"):
        pid = _temporary_pid(tmp.name, host)
        try:
            if pid is not None:
                if pid == os.getpid():
                    continue
                try:
                    os.kill(pid, 0)
                    continue  # a running save of another process
                except ProcessLookupError:
                    pass
                except PermissionError:
                    continue
            elif time.time() - tmp.lstat().st_mtime < max_age:
                continue  # possibly a save in progress on another machine (shared cache)
            tmp.unlink()
        except OSError:
            continue


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def remove_empty(folders: Sequence[Path]) -> None:
    """Remove the folders (deepest first) that this run created and left empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (another process wrote there) or already gone
            return


def check_cache_writable(folder: Path, root: Path) -> None:
    """Raise a ``PermissionError`` naming the cache folder when files cannot be written there."""
    try:
        check_writable(folder, root=root)
    except OSError as error:
        raise PermissionError(
            f"the cache folder {folder} is not writable ({error.strerror or error}): pass a writable "
            "--cache-dir DIR (config: paths.cache_dir) or set $TOPOMODELX_ATTENTION_DATA"
        ) from error
