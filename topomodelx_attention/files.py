"""The one path by which the package writes files: atomic, exclusive and never through a link.

Every file that the package, its command line and its scripts write (caches, results, logs,
checkpoints, TopoBench contributions) goes through :func:`atomic_output` or one of its thin
wrappers (:func:`write_bytes`, :func:`write_text`, :func:`make_dirs`):

* the content goes to a new temporary file in the destination folder, created exclusively
  (``O_CREAT | O_EXCL | O_NOFOLLOW``) under an unpredictable name, and replaces the
  destination in one ``rename``: a reader never sees half a file, and a link planted at the
  destination is replaced, never followed;
* the folders between ``root`` (the folder the user handed over: an output, cache or checkout
  folder) and the file are walked one at a time by descriptor with ``O_NOFOLLOW``: a link
  planted at any of them is refused (:class:`LinkRefusedError`), so nothing outside ``root`` is
  created or changed, whatever was planted inside it;
* the file gets the permissions a plain ``open(path, "w")`` would give (``0o666`` less the
  umask); on any failure the temporary file is removed and the destination is unchanged.

``root`` itself may be a link (a user's ``--output-dir`` may point anywhere they like); only
what lies below it is checked. Without ``root`` the destination's own folder is the root.
On platforms without ``dir_fd`` support (Windows) the folders are checked with ``lstat``
instead.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

__all__ = ["LinkRefusedError", "atomic_output", "make_dirs", "write_bytes", "write_text"]

_DIR_FD = {os.open, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class LinkRefusedError(OSError):
    """A symbolic link (or a non-folder) stands where the package was about to write."""


def _relative_parts(folder: Path, root: Path) -> tuple[str, ...]:
    """Return the components of ``folder`` below ``root`` (both taken as written, not resolved)."""
    folder_abs = Path(os.path.normpath(os.path.abspath(folder)))
    root_abs = Path(os.path.normpath(os.path.abspath(root)))
    try:
        return folder_abs.relative_to(root_abs).parts
    except ValueError:
        raise ValueError(f"{folder} is not inside {root}: the package writes only below the folder it was given") from None


def _refuse(path: Path, what: str) -> LinkRefusedError:
    return LinkRefusedError(
        errno.ELOOP,
        f"refusing to write through {what} (a link or file planted where the package writes; "
        "remove it or choose another folder)",
        str(path),
    )


def _open_root(root: Path, create: bool) -> int:
    if create:
        os.makedirs(root, exist_ok=True)
    return os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)


def _open_child(parent_fd: int, name: str, shown: Path, create: bool) -> int:
    """Open the folder ``name`` inside ``parent_fd`` without following a link (create it if asked)."""
    if create:
        with suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=parent_fd)
    try:
        return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=parent_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise _refuse(shown, "a link or file in place of a folder") from None
        raise


@contextmanager
def _folder(folder: Path, root: Path | None, create: bool) -> Iterator[int | None]:
    """Yield a descriptor of ``folder`` reached from ``root`` without following links (``None`` without dir_fd)."""
    root = folder if root is None else Path(root)
    parts = _relative_parts(folder, root)
    if ".." in parts:
        raise ValueError(f"{folder}: '..' below {root} is not allowed in a path the package writes")
    if not _DIR_FD:  # pragma: no cover - Windows
        current = root
        if create:
            os.makedirs(root, exist_ok=True)
        for part in parts:
            current = current / part
            if create and not os.path.lexists(current):
                os.mkdir(current)
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                raise _refuse(current, "a link or file in place of a folder")
        yield None
        return
    fd = _open_root(root, create)
    try:
        current = root
        for part in parts:
            current = current / part
            child = _open_child(fd, part, current, create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def make_dirs(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> Path:
    """Create ``path`` and its missing parents below ``root``, refusing any link below ``root``.

    Parameters
    ----------
    path : path-like
        The folder.
    root : path-like, optional
        The folder the user handed over (created if missing; may itself be a link). Default:
        ``path`` itself.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    LinkRefusedError
        When a link or a file stands where a folder below ``root`` should be.
    """
    path = Path(path)
    with _folder(path, Path(root) if root is not None else None, create=True):
        pass
    return path


@contextmanager
def atomic_output(
    path: str | os.PathLike,
    *,
    root: str | os.PathLike | None = None,
    prefix: str | None = None,
    suffix: str = ".tmp",
    create_folders: bool = True,
) -> Iterator[BinaryIO]:
    """Write ``path`` atomically: a new exclusive temporary file in its folder, then ``rename``.

    Parameters
    ----------
    path : path-like
        The file to write.
    root : path-like, optional
        The folder the user handed over; folders between it and ``path`` are created when
        missing (``create_folders``) and never followed when they are links. Default: the
        folder of ``path``.
    prefix : str, optional
        Start of the temporary file's name (default ``".<name>."``); a random part and
        ``suffix`` follow.
    suffix : str, default=".tmp"
        End of the temporary file's name.
    create_folders : bool, default=True
        Create missing folders below ``root``.

    Yields
    ------
    BinaryIO
        The temporary file, open for binary writing; it replaces ``path`` when the block ends
        without an exception, and is removed otherwise.

    Raises
    ------
    LinkRefusedError
        When a link or file stands in place of a folder below ``root``.
    IsADirectoryError
        When ``path`` is a folder.
    """
    path = Path(path)
    if not path.name or path.name in (".", ".."):
        raise ValueError(f"{path}: not a file name")
    folder = path.parent
    tmp_name = f"{prefix or '.' + path.name + '.'}{secrets.token_hex(6)}{suffix}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | getattr(os, "O_BINARY", 0)
    with _folder(folder, Path(root) if root is not None else None, create=create_folders) as dir_fd:
        if dir_fd is None:  # pragma: no cover - Windows
            descriptor = os.open(folder / tmp_name, flags, 0o666)
        else:
            descriptor = os.open(tmp_name, flags, 0o666, dir_fd=dir_fd)  # 0o666 less the umask
        handle = None
        try:
            handle = os.fdopen(descriptor, "wb")
            descriptor = -1
            yield handle
            handle.close()
            if dir_fd is None:  # pragma: no cover - Windows
                os.replace(folder / tmp_name, path)
            else:
                try:
                    os.rename(tmp_name, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                except IsADirectoryError:
                    raise IsADirectoryError(errno.EISDIR, "a folder stands where the file goes", str(path)) from None
        except BaseException:
            if handle is not None:
                handle.close()
            elif descriptor >= 0:
                os.close(descriptor)
            try:
                if dir_fd is None:  # pragma: no cover - Windows
                    os.unlink(folder / tmp_name)
                else:
                    os.unlink(tmp_name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise


def write_bytes(path: str | os.PathLike, data: bytes, *, root: str | os.PathLike | None = None) -> Path:
    """Write ``data`` to ``path`` through :func:`atomic_output`; returns ``path``."""
    with atomic_output(path, root=root) as handle:
        handle.write(data)
    return Path(path)


def write_text(
    path: str | os.PathLike,
    text: str,
    *,
    root: str | os.PathLike | None = None,
    encoding: str = "utf-8",
) -> Path:
    """Write ``text`` to ``path`` through :func:`atomic_output` (no newline translation); returns ``path``."""
    return write_bytes(path, text.encode(encoding), root=root)
