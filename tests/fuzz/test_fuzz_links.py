"""No command writes through a link planted where it writes: nothing outside its folders changes.

Each command runs once while every write primitive is watched (:class:`WriteRecorder`: ``open``
in a writing mode, ``os.open`` with a writing flag, ``os.mkdir``, ``os.rename`` / ``os.replace``
targets), and the files and folders it left are listed. Then links to files and folders
outside the workspace are planted at what it wrote — every file, or one folder it created
below the folders it was given — and the command runs again: it may refuse (one line, exit 2),
but nothing outside may be created or changed. A new writer is attacked without being listed
here, since the writes are found, not named.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.datasets.gcb_payloads import write_original
from tests.test_cli_faults import write_tiny_tu
from topomodelx_attention import cli

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _fd_path(dir_fd: int | None, path: object) -> Path | None:
    """Absolute path of ``path`` (relative to ``dir_fd`` when given), or ``None`` for a descriptor."""
    if isinstance(path, int):
        return None
    path = Path(os.fsdecode(path))
    if dir_fd is not None and not path.is_absolute():
        return Path(os.readlink(f"/proc/self/fd/{dir_fd}")) / path
    return Path(os.path.abspath(path))


class WriteRecorder:
    """Record the paths that ``open`` / ``os.open`` / ``os.mkdir`` / ``os.rename`` / ``os.replace`` write."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: set[Path] = set()
        real_open, real_os_open = builtins.open, os.open
        real_mkdir, real_rename, real_replace = os.mkdir, os.rename, os.replace

        def note(path: Path | None) -> None:
            if path is not None:
                self.paths.add(path)

        def open_(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+"):
                note(_fd_path(None, file))
            return real_open(file, mode, *args, **kwargs)

        def os_open(path, flags, *args, dir_fd=None, **kwargs):
            if flags & _WRITE_FLAGS:
                note(_fd_path(dir_fd, path))
            return real_os_open(path, flags, *args, dir_fd=dir_fd, **kwargs)

        def mkdir(path, *args, dir_fd=None, **kwargs):
            note(_fd_path(dir_fd, path))
            return real_mkdir(path, *args, dir_fd=dir_fd, **kwargs)

        def rename(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
            note(_fd_path(dst_dir_fd, dst))
            return real_rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

        def replace(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
            note(_fd_path(dst_dir_fd, dst))
            return real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(io, "open", open_)
        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(os, "rename", rename)
        monkeypatch.setattr(os, "replace", replace)


def _tree(folder: Path) -> dict[str, str]:
    """Every entry below ``folder``: a file's digest, a link's target, ``dir`` for a folder."""
    out = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[key] = "dir"
        else:
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# the commands: (setup of the inputs, argv, the folders the user hands over)
# ----------------------------------------------------------------------------------------------
def _train(ws: Path) -> tuple[list[str], list[Path]]:
    write_tiny_tu(ws / "data")
    out, cache = ws / "out", ws / "cache"
    argv = ["train", "--dataset", "TINY", "--data-dir", ws / "data", "--model", "gin", "--max-epochs", "1",
            "--seeds", "1", "--no-progress-bar", "--output-dir", out, "--cache-dir", cache,
            "model.params.hidden_channels=4", "dataset.dataloader.batch_size=2"]
    return argv, [out, cache]


def _graphuniverse(ws: Path) -> tuple[list[str], list[Path]]:
    out, cache = ws / "out", ws / "cache"
    argv = ["train", "--dataset", "graphuniverse", "--model", "gin", "--max-epochs", "1", "--seeds", "0",
            "--no-progress-bar", "--output-dir", out, "--cache-dir", cache, "plot=false",
            "dataset.n_graphs=6", "dataset.family.n_nodes_range=[10,20]", "dataset.split.train_prop=0.5",
            "model.params.hidden_channels=4", "model.params.n_layers=1"]
    return argv, [out, cache]


def _convert_gcb(ws: Path) -> tuple[list[str], list[Path]]:
    (ws / "gcb").mkdir()
    src = write_original(ws / "gcb" / "hard_small.npz")
    return ["convert-gcb", src], [ws / "gcb"]


def _contribute(ws: Path) -> tuple[list[str], list[Path]]:
    from tests.harness.test_topobench import fake_checkout

    checkout = fake_checkout(ws / "TopoBench")
    return ["topobench", "contribute", "--topobench", checkout, "--model", "all", "--force"], [checkout]


COMMANDS: dict[str, Callable[[Path], tuple[list[str], list[Path]]]] = {
    "topobench-contribute": _contribute,
    "train": _train,
    "train-graphuniverse": _graphuniverse,
    "convert-gcb": _convert_gcb,
}


def _written(recorder: WriteRecorder, ws: Path, given: list[Path]) -> tuple[list[Path], list[Path]]:
    """Files the run wrote (found by the recorder and in the tree) and folders it created below ``given``."""
    inside = [p for p in recorder.paths if ws in p.parents]
    files = {p for p in inside if p.is_file()}
    files |= {p for root in given for p in root.rglob("*") if p.is_file() and not p.is_symlink()}
    files = {p for p in files if any(root in p.parents for root in given)}
    folders = {p for root in given for p in root.rglob("*") if p.is_dir() and not p.is_symlink()}
    return sorted(files), sorted(folders)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_write_follows_a_link_planted_at_what_it_wrote(command, tmp_path, monkeypatch, capsys, fuzz_seeds):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    argv, given = COMMANDS[command](ws)
    with monkeypatch.context() as patch:
        recorder = WriteRecorder(patch)
        code, err = _run(argv, capsys)
    assert code == 0, err
    files, folders = _written(recorder, ws, given)
    assert files, "the command wrote no file: the test would prove nothing"
    original = tmp_path / "first-run"
    shutil.copytree(ws, original, symlinks=True)

    def attack(targets: list[Path], folder: Path | None) -> None:
        shutil.rmtree(ws)
        shutil.copytree(original, ws, symlinks=True)
        shutil.rmtree(outside)
        outside.mkdir()
        for i, path in enumerate(targets):
            victim = outside / f"file{i}"
            victim.write_bytes(f"outside {i}".encode())
            if path.exists() or path.is_symlink():
                path.unlink()
            path.symlink_to(victim)
        if folder is not None:
            away = outside / "folder"
            shutil.copytree(folder, away)
            shutil.rmtree(folder)
            folder.symlink_to(away, target_is_directory=True)
        before = _tree(outside)
        code, err = _run(argv, capsys)
        assert code in (0, 2), err
        if code == 2:
            assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("topomodelx-attention")
        assert _tree(outside) == before, f"{command} changed files outside through a link (exit {code}: {err})"

    attack(files, None)  # a link at every file it wrote
    attack([p.with_name(p.name + ".part") for p in files] + [p.with_suffix(".tmp") for p in files], None)
    nested = [f for f in folders if f not in given]
    for seed in fuzz_seeds[:2]:  # one created folder replaced by a link (random per seed)
        if nested:
            attack([], random.Random(seed).choice(nested))


_PATH_WRITERS = {"write_text", "write_bytes", "mkdir", "touch", "symlink_to", "hardlink_to", "savefig", "to_csv"}
_MODULE_WRITERS = {
    "os": {"replace", "rename", "renames", "mkdir", "makedirs", "symlink", "link", "truncate"},
    "shutil": {"copy", "copy2", "copyfile", "copytree", "move"},
    "torch": {"save"},
    "np": {"save", "savez", "savez_compressed", "savetxt"},
    "numpy": {"save", "savez", "savez_compressed", "savetxt"},
    "OmegaConf": {"save"},
    "json": {"dump"},
}


def _unsafe_writes(path: Path) -> list[str]:
    """Calls in ``path`` that write a file other than through :mod:`topomodelx_attention.files`.

    ``torch.save`` / ``np.savez*`` / ``savefig`` / ``json.dump`` into ``handle`` (the file that
    ``atomic_output`` yields) are the safe path's own use; folders made by ``tempfile`` are
    created exclusively, but what is written into them goes through the safe path too.
    """
    import ast

    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "open":
                mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
                if mode is not None and not (isinstance(mode, ast.Constant) and set(str(mode.value)) <= set("rbt")):
                    bad.append(node)
            continue
        if not isinstance(func, ast.Attribute):
            continue
        owner = ast.unparse(func.value)
        into_handle = any(isinstance(a, ast.Name) and a.id == "handle" for a in node.args)
        if owner in _MODULE_WRITERS:
            if func.attr in _MODULE_WRITERS[owner] and not into_handle:
                bad.append(node)
        elif (func.attr in _PATH_WRITERS and not into_handle and owner != "files") or (func.attr == "open" and any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) and set(a.value) & set("wax+") for a in node.args
        )):
            bad.append(node)
    return [f"{path.name}:{node.lineno}: {ast.unparse(node)[:90]}" for node in bad]


def test_the_package_writes_files_only_through_the_safe_write_path():
    """No module but ``files.py`` calls a write primitive: a new writer cannot skip the safe path."""
    package = Path(cli.__file__).resolve().parent
    sources = [p for p in package.rglob("*.py") if p != package / "files.py"]
    sources += sorted((package.parent / "benchmarks").glob("*.py"))
    bad = [line for path in sources for line in _unsafe_writes(path)]
    assert not bad, "write through topomodelx_attention.files instead:\n" + "\n".join(bad)


def test_the_write_check_finds_each_kind_of_write(tmp_path):
    """The static check above can fail: each primitive it knows is found in a sample module."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "open(p, 'w')\nopen(p, mode='ab')\npath.write_text('x')\nos.replace(a, b)\nshutil.copy(a, b)\n"
        "torch.save(x, path)\nfig.savefig(path)\nout.mkdir(parents=True)\nnp.savez(path, a=x)\n"
        "torch.save(x, handle)\nfig.savefig(handle, dpi=9)\nopen(p)\nopen(p, 'rb')\ntext.replace('a', 'b')\n"
    )
    assert len(_unsafe_writes(sample)) == 9
