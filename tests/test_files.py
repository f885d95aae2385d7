"""The safe write path: atomic, exclusive temporaries, no link followed below the given root."""

from __future__ import annotations

import os

import pytest

from topomodelx_attention import files
from topomodelx_attention.files import (
    LinkRefusedError,
    atomic_output,
    check_writable,
    make_dirs,
    write_bytes,
    write_csv,
    write_text,
)


@pytest.fixture
def victim(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    path = outside / "victim.txt"
    path.write_bytes(b"precious")
    return path


def test_a_link_at_the_file_is_replaced_not_followed(tmp_path, victim):
    root = tmp_path / "root"
    root.mkdir()
    (root / "out.txt").symlink_to(victim)
    (root / "new.txt").symlink_to(victim.with_name("created-outside.txt"))  # a dangling link
    write_text(root / "out.txt", "result", root=root)
    write_text(root / "new.txt", "fresh", root=root)
    assert victim.read_bytes() == b"precious"
    assert not victim.with_name("created-outside.txt").exists()
    assert (root / "out.txt").read_text() == "result" and not (root / "out.txt").is_symlink()
    assert (root / "new.txt").read_text() == "fresh"


@pytest.mark.parametrize("depth", [1, 2])
def test_a_link_at_a_folder_below_the_root_is_refused(tmp_path, victim, depth):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    planted = root / "a" / "b" if depth == 2 else root / "b"
    planted.symlink_to(victim.parent, target_is_directory=True)
    before = sorted(p.name for p in victim.parent.iterdir())
    with pytest.raises(LinkRefusedError, match="refusing to write through") as error:
        write_text(planted / "c" / "out.txt", "x", root=root)
    assert error.value.filename == str(planted)
    with pytest.raises(LinkRefusedError):
        make_dirs(planted / "d", root=root)
    with pytest.raises(LinkRefusedError):
        check_writable(planted, root=root)
    assert sorted(p.name for p in victim.parent.iterdir()) == before
    assert victim.read_bytes() == b"precious"


def test_a_file_in_place_of_a_folder_is_refused(tmp_path):
    (tmp_path / "a").write_text("not a folder")
    with pytest.raises(LinkRefusedError):
        write_text(tmp_path / "a" / "b.txt", "x", root=tmp_path)


def test_the_root_itself_may_be_a_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    write_text(tmp_path / "alias" / "sub" / "x.txt", "ok", root=tmp_path / "alias")
    assert (real / "sub" / "x.txt").read_text() == "ok"


def test_paths_outside_the_root_or_through_dotdot_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not inside"):
        write_text(tmp_path / "elsewhere" / "x.txt", "x", root=tmp_path / "root")
    with pytest.raises(ValueError, match="not inside"):
        write_text(tmp_path / "root" / ".." / "x.txt", "x", root=tmp_path / "root")


def test_the_temporary_file_is_created_exclusively_and_gets_plain_permissions(tmp_path, monkeypatch, victim):
    planted = tmp_path / ".out.bin.guessed.tmp"
    planted.symlink_to(victim)
    names = iter(["guessed", "fresh"])  # an attacker who guessed the first random name
    monkeypatch.setattr(files, "_random_part", lambda: next(names))
    write_bytes(tmp_path / "out.bin", b"result")
    assert victim.read_bytes() == b"precious" and planted.is_symlink()
    assert (tmp_path / "out.bin").read_bytes() == b"result"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "out.bin").stat().st_mode & 0o777 == 0o666 & ~umask  # as a plain open(), not 0o600


def test_a_failed_write_leaves_the_destination_and_no_temporary(tmp_path):
    (tmp_path / "out.txt").write_text("old")

    def fail() -> None:
        with atomic_output(tmp_path / "out.txt") as handle:
            handle.write(b"half")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        fail()
    assert (tmp_path / "out.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_folder_at_the_destination_is_an_error_naming_it(tmp_path):
    (tmp_path / "out.txt").mkdir()
    with pytest.raises(IsADirectoryError) as error:
        write_text(tmp_path / "out.txt", "x")
    assert error.value.filename == str(tmp_path / "out.txt")
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_write_csv_and_text_round_trip(tmp_path):
    write_csv(tmp_path / "t.csv", [["a", "b"], [1, "x,y"]])
    assert (tmp_path / "t.csv").read_bytes() == b'a,b\r\n1,"x,y"\r\n'
    write_text(tmp_path / "u.txt", "é\n", encoding="utf-8")
    assert (tmp_path / "u.txt").read_bytes() == "é\n".encode()


def test_check_writable_reports_a_read_only_folder(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(PermissionError):
            check_writable(folder)
    finally:
        folder.chmod(0o700)


def test_append_text_appends_and_refuses_a_link(tmp_path, victim):
    from topomodelx_attention.files import append_text

    append_text(tmp_path / "log" / "runs.jsonl", "a\n", root=tmp_path)
    append_text(tmp_path / "log" / "runs.jsonl", "b\n", root=tmp_path)
    assert (tmp_path / "log" / "runs.jsonl").read_text() == "a\nb\n"
    (tmp_path / "log" / "other.jsonl").symlink_to(victim)
    with pytest.raises(LinkRefusedError):
        append_text(tmp_path / "log" / "other.jsonl", "c\n", root=tmp_path)
    assert victim.read_bytes() == b"precious"


def test_locked_serialises_processes_and_refuses_a_link(tmp_path, victim):
    import subprocess
    import sys

    from topomodelx_attention.files import locked

    lock = tmp_path / "locks" / "a.lock"
    with locked(lock, root=tmp_path):
        other = subprocess.run(
            [sys.executable, "-c",
             "import fcntl, os, sys\n"
             "fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n",
             str(lock)],
            check=False,
        )
        assert other.returncode == 3  # held while the block runs
    (tmp_path / "locks" / "b.lock").symlink_to(victim)
    with pytest.raises(LinkRefusedError), locked(tmp_path / "locks" / "b.lock", root=tmp_path):
        pass
    assert victim.read_bytes() == b"precious"
