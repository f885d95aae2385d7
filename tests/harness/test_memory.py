"""``harness.memory.keep_freed_memory``: glibc keeps blocks below 32 MiB in its heap, and the
harness applies it when ``trainer.keep_freed_memory`` is on."""

import os
import platform
import subprocess
import sys

import pytest

from tests.harness.test_training import _cfg
from topomodelx_attention.harness import memory
from topomodelx_attention.harness.training import run_experiment

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# In a fresh process: bytes glibc holds in mmap-ed blocks grow by a 30 MB malloc unless the
# block comes from the heap (glibc's mallinfo2, 2.33+; the block is freed at once).
_PROBE = """
import ctypes, sys
from topomodelx_attention.harness.memory import keep_freed_memory

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
before = libc.mallinfo2().hblkhd
block = libc.malloc(30 * 1024 * 1024)
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
print(int(applied), int(mapped >= 30 * 1024 * 1024))
"""


def _probe(mode: str) -> tuple[int, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], check=True, capture_output=True, text=True, env=env
    ).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_a_30_mb_block_comes_from_the_heap_after_keep_freed_memory_and_is_mapped_without():
    assert _probe("default") == (0, 1)  # glibc's default: a fresh 30 MB block is mmap-ed
    assert _probe("keep") == (1, 0)  # kept in the heap (threshold 32 MiB)


def test_nothing_changes_off_glibc_or_when_the_user_set_glibcs_variables(monkeypatch):
    monkeypatch.setattr(memory.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert memory.keep_freed_memory() is False
    monkeypatch.undo()
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert memory.keep_freed_memory() is False


def test_the_harness_applies_it_when_trainer_keep_freed_memory_is_on(tmp_path, monkeypatch):
    import topomodelx_attention.harness.training as training

    calls = []
    monkeypatch.setattr(training, "keep_freed_memory", lambda: calls.append(1) or True)
    base = ("trainer.max_epochs=1", "test=false")
    run_experiment(_cfg(tmp_path, "gin", *base), tmp_path / "a", verbose=False)
    assert calls == []  # off by default
    run_experiment(_cfg(tmp_path, "gin", *base, "trainer.keep_freed_memory=true"), tmp_path / "b",
                   verbose=False)
    assert calls == [1]
