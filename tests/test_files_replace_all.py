"""`files.replace_all`: several files replaced all or nothing, never through a link.

The helpers :func:`tree` (a byte-for-byte picture of a folder, links and permissions included)
and :func:`os_calls` (count the calls of the os primitives that write, and make the k-th one
fail) are shared with the TopoBench ``contribute`` tests and the fuzz suite.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from topomodelx_attention.files import LinkRefusedError, RestoreError, replace_all

#: The os functions by which a file or folder comes into being or is replaced (``os.link`` is
#: left out: where it fails, ``replace_all`` moves the original aside instead, and succeeds).
WRITING_CALLS = ("open", "write", "fsync", "mkdir", "replace", "rename")


def tree(root: Path) -> dict[str, tuple]:
    """Every entry below ``root`` (links not followed): kind, bytes or target, permissions, inode."""
    entries: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            relative = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                entries[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                entries[relative] = ("folder", stat.S_IMODE(info.st_mode))
            elif stat.S_ISREG(info.st_mode):
                entries[relative] = ("file", path.read_bytes(), stat.S_IMODE(info.st_mode), info.st_ino)
            else:
                entries[relative] = ("other", stat.S_IFMT(info.st_mode))
    return entries


@contextmanager
def os_calls(fail_at: int | None = None, error: BaseException | None = None,
             names: tuple[str, ...] = WRITING_CALLS) -> Iterator[list[str]]:
    """Record the calls of ``os.<names>`` made inside the block; the ``fail_at``-th raises ``error``.

    Only that one call fails: the calls that follow (the restoring ones) run normally.
    """
    calls: list[str] = []
    originals = {name: getattr(os, name) for name in names}

    def wrap(name, real):
        def call(*args, **kwargs):
            calls.append(name)
            if len(calls) - 1 == fail_at:
                raise error
            return real(*args, **kwargs)
        return call

    for name, real in originals.items():
        setattr(os, name, wrap(name, real))
    try:
        yield calls
    finally:
        for name, real in originals.items():
            setattr(os, name, real)


@pytest.fixture
def folder(tmp_path):
    """A folder with two files (one executable), a subfolder and a file in it."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"original a\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o750)
    (root / "sub" / "b.txt").write_bytes(b"original b\n" * 50)
    return root


def new_contents(root: Path) -> dict[Path, bytes]:
    """Replace two files, create one beside them and two in folders that do not exist yet."""
    return {
        root / "a.txt": b"new a\n",
        root / "sub" / "b.txt": b"new b\n",
        root / "run.sh": b"#!/bin/sh\necho new\n",
        root / "c.txt": b"new c\n",
        root / "x" / "y" / "d.txt": b"new d\n" * 1000,
    }


def test_replace_all_writes_every_file_and_keeps_the_permissions_of_replaced_ones(folder):
    contents = new_contents(folder)
    assert replace_all(contents, root=folder) == list(contents)
    for path, data in contents.items():
        assert path.read_bytes() == data
    assert stat.S_IMODE((folder / "run.sh").stat().st_mode) == 0o750
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((folder / "c.txt").stat().st_mode) == 0o666 & ~umask
    written = {path.relative_to(folder).as_posix() for path in contents}
    assert set(tree(folder)) == written | {"sub", "x", "x/y"}  # no temporary or backup left


def test_replace_all_with_nothing_to_write_touches_nothing(folder):
    before = tree(folder)
    assert replace_all({}, root=folder) == []
    assert tree(folder) == before


def test_a_link_at_a_destination_is_replaced_and_never_followed(folder, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"victim\n")
    (folder / "a.txt").unlink()
    (folder / "a.txt").symlink_to(outside / "victim.txt")
    (folder / "c.txt").symlink_to(outside / "created.txt")  # dangling: would create a file outside
    before = tree(outside)
    replace_all(new_contents(folder), root=folder)
    assert tree(outside) == before
    for name in ("a.txt", "c.txt"):
        assert not (folder / name).is_symlink() and (folder / name).is_file()


@pytest.mark.parametrize("planted", ["link", "dangling link", "file"])
@pytest.mark.parametrize("where", ["sub", "x", "x/y"])
def test_a_link_or_file_in_place_of_a_folder_is_refused_before_anything_changes(folder, tmp_path, planted, where):
    outside = tmp_path / "outside"
    (outside / "y").mkdir(parents=True)
    (outside / "b.txt").write_bytes(b"outside b\n")
    target = folder / where
    if target.exists():
        (outside / "moved").mkdir()
        target.rename(outside / "moved" / target.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    if planted == "link":
        target.symlink_to(outside)
    elif planted == "dangling link":
        target.symlink_to(outside / "missing")
    else:
        target.write_bytes(b"a plain file\n")
    before, before_outside = tree(folder), tree(outside)
    with pytest.raises(LinkRefusedError, match="link or file in place of a folder"):
        replace_all(new_contents(folder), root=folder)
    assert tree(folder) == before
    assert tree(outside) == before_outside
    assert not (outside / "missing").exists()


def test_a_folder_where_a_file_goes_is_refused_before_anything_changes(folder):
    (folder / "c.txt").mkdir()
    before = tree(folder)
    with pytest.raises(IsADirectoryError, match="folder stands where the file goes"):
        replace_all(new_contents(folder), root=folder)
    assert tree(folder) == before


def test_paths_outside_the_root_twice_or_nested_and_text_content_are_refused(folder, tmp_path):
    with pytest.raises(ValueError, match="is not inside"):
        replace_all({tmp_path / "elsewhere.txt": b""}, root=folder)
    with pytest.raises(ValueError, match="is not inside"):
        replace_all({folder / "sub" / ".." / ".." / "escape.txt": b""}, root=folder / "sub")
    with pytest.raises(ValueError, match="given twice"):
        replace_all({folder / "a.txt": b"1", folder / "sub" / ".." / "a.txt": b"2"}, root=folder)
    with pytest.raises(ValueError, match="both a file to write and a folder of"):
        replace_all({folder / "n": b"1", folder / "n" / "m.txt": b"2"}, root=folder)
    with pytest.raises(TypeError, match="encode text first"):
        replace_all({folder / "a.txt": "text"}, root=folder)
    assert (folder / "a.txt").read_bytes() == b"original a\n"


def writing_calls(contents: dict[Path, bytes], root: Path) -> list[str]:
    """The writing os calls :func:`replace_all` makes for ``contents`` (run on a copy of ``root``)."""
    copy = root.parent / (root.name + ".count")
    shutil.copytree(root, copy, symlinks=True)
    try:
        with os_calls() as calls:
            replace_all({copy / Path(p).relative_to(root): d for p, d in contents.items()}, root=copy)
        return calls
    finally:
        shutil.rmtree(copy)


def test_a_failure_at_any_write_restores_every_original_byte_for_byte(folder):
    """Each os call that writes fails in turn: the folder is as before (same files, same bytes)."""
    before = tree(folder)
    calls = writing_calls(new_contents(folder), folder)
    assert {"open", "write", "fsync", "mkdir", "replace"} <= set(calls)
    for index, name in enumerate(calls):
        failure = OSError(errno.ENOSPC, "No space left on device (injected)")
        with pytest.raises(OSError, match="injected") as raised, os_calls(index, failure):
            replace_all(new_contents(folder), root=folder)
        assert not isinstance(raised.value, RestoreError)
        assert raised.value.filename is not None and Path(raised.value.filename).is_absolute()
        assert tree(folder) == before, f"not restored after a failure of call {index} ({name})"


def test_an_interruption_during_the_renames_puts_everything_back(folder):
    before = tree(folder)
    calls = writing_calls(new_contents(folder), folder)
    last_rename = max(i for i, name in enumerate(calls) if name == "replace")
    with pytest.raises(KeyboardInterrupt), os_calls(last_rename, KeyboardInterrupt()):
        replace_all(new_contents(folder), root=folder)
    assert tree(folder) == before


def test_the_original_file_itself_comes_back_not_a_copy(folder):
    """The original is kept under a second name and renamed back: same inode, same bytes."""
    inode = (folder / "a.txt").stat().st_ino
    calls = writing_calls(new_contents(folder), folder)
    with pytest.raises(OSError, match="injected"), os_calls(len(calls) - 1, OSError(errno.EIO, "I/O error (injected)")):
        replace_all(new_contents(folder), root=folder)  # the last rename fails: all others done
    assert (folder / "a.txt").stat().st_ino == inode
    assert (folder / "a.txt").read_bytes() == b"original a\n"


def test_without_hard_links_the_originals_are_moved_aside_and_still_restored(folder, monkeypatch):
    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    before = tree(folder)
    for index in range(len(writing_calls(new_contents(folder), folder))):
        failure = OSError(errno.EIO, "I/O error (injected)")
        with pytest.raises(OSError, match="injected"), os_calls(index, failure):
            replace_all(new_contents(folder), root=folder)
        assert tree(folder) == before, f"not restored after a failure of call {index}"
    replace_all(new_contents(folder), root=folder)
    assert (folder / "a.txt").read_bytes() == b"new a\n"
    assert set(tree(folder)) == {"a.txt", "run.sh", "sub", "sub/b.txt", "c.txt", "x", "x/y", "x/y/d.txt"}


def test_when_an_original_cannot_be_put_back_the_error_says_where_it_is_kept(folder, monkeypatch):
    real_replace = os.replace
    state = {"renamed": 0}

    def replace(src, dst, **kwargs):
        if str(src).endswith(".tmp"):
            state["renamed"] += 1
            if state["renamed"] == 3:
                raise OSError(errno.EIO, "I/O error (injected)")
        if str(src).endswith(".orig"):
            raise OSError(errno.EIO, "I/O error while restoring (injected)")
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(RestoreError, match=r"could not put everything back.*original is kept as") as raised:
        replace_all(new_contents(folder), root=folder)
    message = str(raised.value)
    assert "\n" not in message
    kept = [Path(part.split("original is kept as ", 1)[1].rstrip(")"))
            for part in message.split("; ") if "original is kept as" in part]
    assert kept and all(path.is_file() for path in kept)
    assert {path.read_bytes() for path in kept} <= {b"original a\n", b"original b\n" * 50, b"#!/bin/sh\n"}


def test_a_file_size_limit_fails_before_any_file_is_replaced(folder):
    """A real RLIMIT_FSIZE (`ulimit -f 8`) in a child process: the folder is unchanged."""
    resource = pytest.importorskip("resource")
    before = tree(folder)
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from topomodelx_attention.files import replace_all\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
        "root = Path(sys.argv[1])\n"
        "try:\n"
        "    replace_all({root / 'a.txt': b'new a', root / 'sub' / 'b.txt': b'b' * 30000,\n"
        "                 root / 'c.txt': b'new c'}, root=root)\n"
        "except OSError as error:\n"
        "    print(type(error).__name__, error.errno, error.filename)\n"
        "    sys.exit(2)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, check=False, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout.split()[:2] == ["OSError", str(errno.EFBIG)]
    assert done.stdout.split()[2] == str(folder / "sub" / "b.txt")
    assert tree(folder) == before
    assert resource.RLIMIT_FSIZE  # the limit exists on this platform
