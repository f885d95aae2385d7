"""The one path by which the package writes files: atomic, exclusive and never through a link.

Every file that the package, its command line and its scripts write (caches, results, logs,
checkpoints, TopoBench contributions) goes through this module: :func:`atomic_output` and its
thin wrappers (:func:`write_bytes`, :func:`write_text`, :func:`write_csv`), :func:`make_dirs`
and :func:`check_writable` for folders, :func:`append_text` for logs that several processes
extend, :func:`locked` for lock files, and :func:`replace_all` for several files that change
together or not at all (``tests/fuzz/test_fuzz_links.py`` finds any other write primitive in the
package or its scripts):

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

import csv
import errno
import io
import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "LinkRefusedError",
    "RestoreError",
    "append_text",
    "atomic_output",
    "check_writable",
    "locked",
    "make_dirs",
    "replace_all",
    "write_bytes",
    "write_csv",
    "write_text",
]

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


def _random_part() -> str:
    """Return the unpredictable part of a temporary file's name."""
    return secrets.token_hex(6)


def _create_temporary(folder: Path, dir_fd: int | None, prefix: str, suffix: str) -> tuple[int, str]:
    """Create a new file ``<prefix><random><suffix>`` exclusively in the folder; return its descriptor and name.

    A name that exists (a file or link planted at a guessed name) is never opened: another
    random name is drawn, as ``tempfile.mkstemp`` does.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = f"{prefix}{_random_part()}{suffix}"
        try:
            if dir_fd is None:  # pragma: no cover - Windows
                return os.open(folder / name, flags, 0o666), name
            return os.open(name, flags, 0o666, dir_fd=dir_fd), name  # 0o666 less the umask
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(folder))


def check_writable(folder: str | os.PathLike, *, root: str | os.PathLike | None = None) -> Path:
    """Create ``folder`` (as :func:`make_dirs`) and create and remove a probe file in it.

    Raises the ``OSError`` that a write there would raise (read-only, no permission, a link
    below ``root``), before any real work is done.

    Parameters
    ----------
    folder : path-like
        The folder.
    root : path-like, optional
        The folder the user handed over (default: ``folder``).

    Returns
    -------
    pathlib.Path
        ``folder``.
    """
    folder = Path(folder)
    with _folder(folder, Path(root) if root is not None else None, create=True) as dir_fd:
        descriptor, name = _create_temporary(folder, dir_fd, ".write-test.", ".tmp")
        os.close(descriptor)
        if dir_fd is None:  # pragma: no cover - Windows
            os.unlink(folder / name)
        else:
            os.unlink(name, dir_fd=dir_fd)
    return folder


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
    with _folder(folder, Path(root) if root is not None else None, create=create_folders) as dir_fd:
        descriptor, tmp_name = _create_temporary(folder, dir_fd, prefix or f".{path.name}.", suffix)
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


def write_csv(
    path: str | os.PathLike,
    rows: Iterable[Sequence[Any]],
    *,
    root: str | os.PathLike | None = None,
) -> Path:
    """Write ``rows`` (the header first) as a CSV file through :func:`atomic_output`; returns ``path``."""
    text = io.StringIO(newline="")
    csv.writer(text).writerows(rows)
    return write_text(path, text.getvalue(), root=root)


def append_text(
    path: str | os.PathLike,
    text: str,
    *,
    root: str | os.PathLike | None = None,
    encoding: str = "utf-8",
) -> Path:
    """Append ``text`` to ``path`` (created if missing) in one ``write``, never through a link.

    For logs that several processes extend (``O_APPEND``: each call's text lands whole at the
    end); the file is opened with ``O_NOFOLLOW`` below ``root`` (a link at it or at a folder
    below ``root`` is refused, :class:`LinkRefusedError`).
    """
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW | _CLOEXEC | getattr(os, "O_BINARY", 0)
    with _folder(path.parent, Path(root) if root is not None else None, create=True) as dir_fd:
        descriptor = _open_file(path, dir_fd, flags)
        try:
            os.write(descriptor, text.encode(encoding))
        finally:
            os.close(descriptor)
    return path


def _open_file(path: Path, dir_fd: int | None, flags: int) -> int:
    """Open ``path`` (its name in ``dir_fd``) with ``flags``; a link there is refused."""
    try:
        if dir_fd is None:  # pragma: no cover - Windows
            if os.path.islink(path):
                raise _refuse(path, "a link")
            return os.open(path, flags, 0o666)
        return os.open(path.name, flags, 0o666, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP and not isinstance(error, LinkRefusedError):
            raise _refuse(path, "a link") from None
        raise


@contextmanager
def locked(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing, never through a link).

    Processes that lock the same file take turns (``fcntl.flock``; no lock where there is no
    ``fcntl``).
    """
    path = Path(path)
    flags = os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC
    with _folder(path.parent, Path(root) if root is not None else None, create=True) as dir_fd:
        descriptor = _open_file(path, dir_fd, flags)
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


# ----------------------------------------------------------------------------------------------
# several files at once: all or nothing
# ----------------------------------------------------------------------------------------------
class RestoreError(OSError):
    """:func:`replace_all` failed and could not put every original back (the message says where)."""



class _Slot:
    """One destination of :func:`replace_all` and how far it got."""

    def __init__(self, path: Path, folder: tuple[str, ...], data: bytes) -> None:
        self.path = path
        self.name = path.name
        self.folder = folder
        self.data = data
        self.existed = False
        self.mode: int | None = None  # the original's permissions (a regular file's)
        self.temp: str | None = None  # the staged new content
        self.backup: str | None = None  # the original, kept under another name
        self.moved = False  # the original was renamed away (no hard links here)
        self.replaced = False


def _slots(contents: Mapping[str | os.PathLike, bytes], root: Path) -> list[_Slot]:
    """Return the destinations of :func:`replace_all`, checked for names and clashes (nothing touched)."""
    slots: dict[tuple[str, ...], _Slot] = {}
    for path, data in contents.items():
        path = Path(path)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"{path}: replace_all takes bytes, got {type(data).__name__} (encode text first)")
        if not path.name or path.name in (".", ".."):
            raise ValueError(f"{path}: not a file name")
        folder = _relative_parts(path.parent, root)
        if ".." in folder:
            raise ValueError(f"{path}: '..' below {root} is not allowed in a path the package writes")
        key = (*folder, path.name)
        if key in slots:
            raise ValueError(f"{path} is given twice")
        slots[key] = _Slot(path, folder, bytes(data))
    for key, slot in slots.items():
        for depth in range(1, len(key)):
            if key[:depth] in slots:
                raise ValueError(f"{slots[key[:depth]].path} is both a file to write and a folder of {slot.path}")
    return list(slots.values())


def _entry(folder: tuple[int | None, Path], name: str) -> str:
    """``name`` as the os functions take it with ``dir_fd=folder[0]`` (a full path without dir_fd)."""
    return name if folder[0] is not None else str(folder[1] / name)


@contextmanager
def _about(path: Path) -> Iterator[None]:
    """Name ``path`` (not a temporary or relative name) in an ``OSError`` raised inside."""
    try:
        yield
    except LinkRefusedError:
        raise
    except OSError as error:
        if error.errno is None or (error.filename is not None and os.path.isabs(str(error.filename))):
            raise
        raise type(error)(error.errno, error.strerror or os.strerror(error.errno), str(path)) from error


def _walk(slots: list[_Slot], root: Path) -> tuple[dict[tuple[str, ...], tuple[int | None, Path]], list[tuple[str, ...]]]:
    """Open every destination folder from ``root`` without following links or creating anything.

    Returns the folders that exist (prefix → (descriptor, path); the caller closes the
    descriptors) and, shortest first, those that must be created.
    """
    opened: dict[tuple[str, ...], tuple[int | None, Path]] = {}
    missing: dict[tuple[str, ...], None] = {}
    if _DIR_FD:
        with _about(root):
            opened[()] = (os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC), root)
    elif not os.path.isdir(root):  # pragma: no cover - Windows
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(root))
    else:  # pragma: no cover - Windows
        opened[()] = (None, root)
    try:
        for slot in slots:
            for depth in range(1, len(slot.folder) + 1):
                prefix = slot.folder[:depth]
                if prefix in opened or prefix in missing:
                    continue
                if prefix[:-1] in missing:
                    missing[prefix] = None
                    continue
                parent, shown = opened[prefix[:-1]], root.joinpath(*prefix)
                try:
                    if parent[0] is None:  # pragma: no cover - Windows
                        if not stat.S_ISDIR(os.lstat(shown).st_mode):
                            raise _refuse(shown, "a link or file in place of a folder")
                        opened[prefix] = (None, shown)
                    else:
                        with _about(shown):
                            opened[prefix] = (_open_child(parent[0], prefix[-1], shown, create=False), shown)
                except FileNotFoundError:
                    missing[prefix] = None
    except BaseException:
        _close(opened)
        raise
    return opened, sorted(missing, key=len)


def _close(opened: dict[tuple[str, ...], tuple[int | None, Path]]) -> None:
    for fd, _ in opened.values():
        if fd is not None:
            with suppress(OSError):
                os.close(fd)


def _check_destination(slot: _Slot, folder: tuple[int | None, Path]) -> None:
    """Record whether ``slot``'s file exists (and its permissions); refuse a folder in its place."""
    with _about(slot.path):
        try:
            info = os.stat(_entry(folder, slot.name), dir_fd=folder[0], follow_symlinks=False)
        except FileNotFoundError:
            return
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a folder stands where the file goes", str(slot.path))
    slot.existed = True
    if stat.S_ISREG(info.st_mode):
        slot.mode = stat.S_IMODE(info.st_mode) & 0o777


def _stage(slot: _Slot, folder: tuple[int | None, Path]) -> None:
    """Write ``slot``'s new content to an exclusive temporary file beside its destination."""
    with _about(slot.path):
        descriptor, slot.temp = _create_temporary(folder[1], folder[0], f".{slot.name}.", ".tmp")
        try:
            view = memoryview(slot.data)
            while view:
                view = view[os.write(descriptor, view):]
            if slot.mode is not None and hasattr(os, "fchmod"):
                os.fchmod(descriptor, slot.mode)
            os.fsync(descriptor)  # a full disk shows here, before anything is replaced
        finally:
            os.close(descriptor)


def _swap(slot: _Slot, folder: tuple[int | None, Path]) -> None:
    """Keep ``slot``'s original under a backup name, then rename its new content into place."""
    fd = folder[0]
    with _about(slot.path):
        if slot.existed:
            backup = f".{slot.name}.{_random_part()}.orig"
            try:  # a second name for the original (a link planted there is kept as the link)
                os.link(_entry(folder, slot.name), _entry(folder, backup), src_dir_fd=fd, dst_dir_fd=fd,
                        follow_symlinks=False)
            except (OSError, NotImplementedError) as error:  # no hard links here: move it aside
                if isinstance(error, FileExistsError):
                    raise
                os.replace(_entry(folder, slot.name), _entry(folder, backup), src_dir_fd=fd, dst_dir_fd=fd)
                slot.moved = True
            slot.backup = backup
        os.replace(_entry(folder, slot.temp), _entry(folder, slot.name), src_dir_fd=fd, dst_dir_fd=fd)
        slot.temp = None
        slot.replaced = True


def _undo(
    slots: list[_Slot],
    opened: dict[tuple[str, ...], tuple[int | None, Path]],
    created: list[tuple[str, ...]],
    root: Path,
) -> list[str]:
    """Put every original back, remove what was added; returns what could not be undone."""
    problems: list[str] = []
    for slot in reversed(slots):
        folder = opened.get(slot.folder)
        if folder is None:
            continue
        fd = folder[0]
        try:
            if slot.backup is not None and (slot.replaced or slot.moved):
                os.replace(_entry(folder, slot.backup), _entry(folder, slot.name), src_dir_fd=fd, dst_dir_fd=fd)
                slot.backup = None
            elif slot.replaced:
                os.unlink(_entry(folder, slot.name), dir_fd=fd)
            elif slot.backup is not None:
                os.unlink(_entry(folder, slot.backup), dir_fd=fd)
                slot.backup = None
        except OSError as error:
            kept = f" (the original is kept as {slot.path.parent / slot.backup})" if slot.backup else ""
            problems.append(f"{slot.path}: {error.strerror or error}{kept}")
        if slot.temp is not None:
            try:
                os.unlink(_entry(folder, slot.temp), dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError as error:
                problems.append(f"{slot.path.parent / slot.temp}: {error.strerror or error} (a temporary file)")
    for prefix in reversed(created):
        parent = opened[prefix[:-1]]
        try:
            os.rmdir(_entry(parent, prefix[-1]), dir_fd=parent[0])
        except OSError as error:
            problems.append(f"{root.joinpath(*prefix)}: {error.strerror or error} (a folder it created)")
    return problems


def replace_all(contents: Mapping[str | os.PathLike, bytes], *, root: str | os.PathLike) -> list[Path]:
    """Replace or create several files below ``root``: all of them, or none.

    1. Check: every destination folder is walked from ``root`` by descriptor without following
       links (a link or file in place of a folder is refused), nothing is a folder where a file
       goes, no path is given twice or is the folder of another. Nothing is written yet.
    2. Create the missing folders, then write every new content to an exclusive temporary file
       beside its destination (``O_CREAT | O_EXCL | O_NOFOLLOW``, unpredictable name) and
       ``fsync`` it: a full disk or a file-size limit fails here, before any file is replaced.
       A file that existed keeps its permissions; a new one gets ``0o666`` less the umask.
    3. Rename the temporaries over their destinations one after another, each original kept
       under a second name (a hard link; renamed aside where the file system has none). A link
       planted at a destination is replaced, never followed.

    On any failure or interruption before the last rename, every original is put back (the same
    file, byte for byte, with its permissions) and every file and folder it created is removed;
    the error is then raised unchanged, naming the destination. After success the second
    names are removed (one that cannot be, is left as ``.<name>.<random>.orig``).

    Parameters
    ----------
    contents : mapping of path-like to bytes
        Each file's new content; the paths (as :func:`atomic_output` takes them) lie below
        ``root``.
    root : path-like
        The folder the user handed over (it must exist; it may itself be a link).

    Returns
    -------
    list of pathlib.Path
        The files written, in the order given.

    Raises
    ------
    LinkRefusedError
        When a link or a file stands where a folder below ``root`` should be.
    IsADirectoryError
        When a folder stands where a file goes.
    ValueError
        For a path outside ``root``, a path given twice, or a file that is another's folder.
    TypeError
        For content that is not bytes.
    RestoreError
        When the replacement failed and not every original could be put back (the message
        names the files and where their originals are kept).
    OSError
        Any other failure (disk full, file-size limit, permissions): nothing has changed.
    """
    root = Path(root)
    slots = _slots(contents, root)
    if not slots:
        return []
    opened, missing = _walk(slots, root)
    created: list[tuple[str, ...]] = []
    try:
        try:
            for slot in slots:
                if slot.folder in opened:
                    _check_destination(slot, opened[slot.folder])
            for prefix in missing:
                parent, shown = opened[prefix[:-1]], root.joinpath(*prefix)
                with _about(shown):
                    os.mkdir(_entry(parent, prefix[-1]), 0o777, dir_fd=parent[0])
                    created.append(prefix)
                    if parent[0] is None:  # pragma: no cover - Windows
                        opened[prefix] = (None, shown)
                    else:
                        opened[prefix] = (_open_child(parent[0], prefix[-1], shown, create=False), shown)
            for slot in slots:
                _stage(slot, opened[slot.folder])
            for slot in slots:
                _swap(slot, opened[slot.folder])
        except BaseException as error:
            problems = _undo(slots, opened, created, root)
            if problems:
                shown = _describe(error)
                raise RestoreError(
                    f"{shown}; then could not put everything back: {'; '.join(problems)}"
                ) from error
            raise
        for slot in slots:
            if slot.backup is not None:
                folder = opened[slot.folder]
                with suppress(OSError):
                    os.unlink(_entry(folder, slot.backup), dir_fd=folder[0])
    finally:
        _close(opened)
    return [slot.path for slot in slots]


def _describe(error: BaseException) -> str:
    """One line for ``error`` (an ``OSError``'s reason and file)."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.strerror or error}: {error.filename}"
    return str(error) or type(error).__name__
