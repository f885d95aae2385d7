"""The GCB reader (.npz, plain and original formats), on tiny generated files."""

import re

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from tests.datasets.gcb_payloads import graphs as payload_graphs
from tests.datasets.gcb_payloads import objects
from tests.harness.files import write_gcb
from topomodelx_attention.datasets.gcb import (
    convert_gcb,
    gcb_graph,
    gcb_plain_path,
    read_gcb,
)


@pytest.fixture
def gcb_file(tmp_path):
    """A converted (plain) GCB file."""
    return convert_gcb(write_gcb(tmp_path))


# The global a pickled ``open`` names: ``io.open`` up to Python 3.11, ``_io.open`` from 3.12.
OPEN_GLOBAL = f"{open.__module__}.{open.__qualname__}"


class _TouchOnUnpickle:
    """Unpickling this object opens (creates) ``marker`` — what an attacker's payload would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _original_gcb(tmp_path, adjacency=None):
    """An original-format GCB file (object arrays of scipy CSR) and the graphs it must give."""
    rng = np.random.default_rng(1)
    data, expected = {}, {}
    for prefix, split, count in (("tr", "train", 3), ("val", "val", 2), ("te", "test", 2)):
        mats, feats, labels = payload_graphs(count, rng=rng, sizes=(3, 7))
        data[f"{prefix}_adj"] = objects(mats if adjacency is None else adjacency)
        data[f"{prefix}_feat"] = objects(feats)
        data[f"{prefix}_class"] = labels
        expected[split] = [gcb_graph(a, f, c) for a, f, c in zip(mats, feats, labels)]
    path = tmp_path / "hard_small.npz"
    np.savez(path, **data)
    return path, expected


def test_gcb_graph_symmetrises_and_drops_the_diagonal():
    adjacency = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=float))
    graph = gcb_graph(adjacency, np.eye(3), np.array([0, 0, 1]))
    assert graph.y.tolist() == [2]
    assert graph.num_nodes == 3
    pairs = set(map(tuple, graph.edge_index.t().tolist()))
    assert pairs == {(0, 1), (1, 0), (1, 2), (2, 1)}


def test_read_gcb_keeps_the_files_split(gcb_file):
    graphs = read_gcb(gcb_file)
    assert {k: len(v) for k, v in graphs.items()} == {"train": 6, "val": 3, "test": 3}
    g = graphs["train"][0]
    assert g.x.shape[1] == 5 and g.x.dtype == torch.float32
    assert g.y.dtype == torch.long and 0 <= int(g.y) < 3


def test_convert_gcb_then_read_gives_the_same_graphs(tmp_path):
    src, expected = _original_gcb(tmp_path)
    dst = convert_gcb(src)
    assert dst == gcb_plain_path(src) == tmp_path / "hard_small.plain.npz"
    with np.load(dst, allow_pickle=False) as archive:  # plain numeric arrays only
        assert all(not archive[key].dtype.hasobject for key in archive.files)
    graphs = read_gcb(dst)
    for split, graphs_expected in expected.items():
        assert len(graphs[split]) == len(graphs_expected)
        for got, want in zip(graphs[split], graphs_expected):
            assert torch.equal(got.x, want.x) and torch.equal(got.edge_index, want.edge_index)
            assert torch.equal(got.y, want.y) and got.num_nodes == want.num_nodes


def test_read_gcb_refuses_the_pickled_original_and_names_the_conversion(tmp_path):
    src, _ = _original_gcb(tmp_path)
    with pytest.raises(ValueError, match=r"hard_small\.npz.*pickled Python objects.*convert-gcb") as info:
        read_gcb(src)
    assert str(gcb_plain_path(src)) in str(info.value)


def test_malicious_gcb_never_runs_code(tmp_path):
    import pickle

    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_TouchOnUnpickle(probe)))  # plain unpickling does run the payload
    assert probe.exists()
    marker = tmp_path / "pwned"
    src, _ = _original_gcb(tmp_path, adjacency=[_TouchOnUnpickle(marker)] * 3)
    with pytest.raises(ValueError, match=r"hard_small\.npz.*pickled"):
        read_gcb(src)
    assert not marker.exists()
    with pytest.raises(ValueError, match=rf"hard_small\.npz.*disallowed global {re.escape(OPEN_GLOBAL)}"):
        convert_gcb(src)
    assert not marker.exists()
    assert not gcb_plain_path(src).exists()


@pytest.mark.parametrize("content", [b"", b"garbage bytes, not a zip", "truncated"])
def test_read_gcb_damaged_file_names_it(tmp_path, gcb_file, content):
    if content == "truncated":
        content = gcb_file.read_bytes()[: gcb_file.stat().st_size // 2]
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match=r"bad\.npz"):
        read_gcb(bad)
    with pytest.raises(ValueError, match=r"bad\.npz"):
        convert_gcb(bad, tmp_path / "out.npz")


def test_read_gcb_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"hard_small\.npz.*data_dir"):
        read_gcb(tmp_path / "hard_small.npz")


# ------------------------------------------------------------------ crafted GCB files
HUNG = -9
"""The status :func:`_naive` gives a run that had to be killed (it hung)."""


def _naive(code, limit_memory=False):
    """Run ``code`` in a fresh interpreter (no core dump; optionally 4 GiB of address space)."""
    import resource
    import subprocess
    import sys

    def limits():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limit_memory:
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=limits, timeout=120)
    except subprocess.TimeoutExpired as hung:  # memory corruption can also hang (seen with Python 3.12's scipy)
        return subprocess.CompletedProcess(hung.cmd, HUNG, hung.stdout or "", str(hung))


def _refused(src, *needles, dst=None):
    """``convert_gcb(src)`` raises a ValueError naming the file (and ``needles``) and writes nothing."""
    dst = dst or src.with_name("out.npz")
    before = set(src.parent.iterdir())
    with pytest.raises(ValueError, match=re.escape(str(src))) as info:
        convert_gcb(src, dst)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    assert not dst.exists() and set(src.parent.iterdir()) == before  # no output, no temporary file
    return message


@pytest.mark.parametrize("variant", ["object", "overlap", "nested"])
@pytest.mark.parametrize("key", ["tr_feat", "val_class"])
def test_object_pointer_dtype_would_segfault_and_is_refused(tmp_path, variant, key):
    from tests.datasets import gcb_payloads as g

    rows = (2, 3) if key.endswith("feat") else (1, 1)  # labels are stacked: one shape
    src = g.write_original(tmp_path / "evil.npz", {key: g.objects([g.pointer_array(r, variant) for r in rows])})
    # the unprotected path: numpy rebuilds the structured dtype and reads 0x4141414141414141 as a pointer
    combine = "np.concatenate" if key.endswith("feat") else "np.stack"
    naive = _naive(f"import numpy as np; a = np.load({str(src)!r}, allow_pickle=True); {combine}(list(a[{key!r}]))")
    assert naive.returncode in (-11, -6), (naive.returncode, naive.stderr[-300:])  # SIGSEGV (or the allocator's abort)
    _refused(src, f"member {key}.npy", "not a plain numeric dtype")


def test_uninitialised_ndarray_payloads_are_refused(tmp_path):
    from tests.datasets import gcb_payloads as g

    src = g.write_original(tmp_path / "leak.npz", {"tr_feat": g.objects([g.uninitialised((2000, 5)), g.uninitialised((3, 5))])})
    # the unprotected path: 40 kB of "features" from a 6 kB file, i.e. whatever the heap held
    with np.load(src, allow_pickle=True) as archive:
        assert archive["tr_feat"][0].nbytes > src.stat().st_size
    _refused(src, "member tr_feat.npy", "uninitialised")
    src = g.write_original(tmp_path / "unset.npz", {"te_adj": g.objects([g.unset_array(), g.unset_array()])})
    _refused(src, "member te_adj.npy item 0", "never set")


@pytest.mark.parametrize(
    "payload",
    ["setstate_fields", "unicode", "complex", "datetime", "nested_objects", "truncated", "too_long",
     "csr_structured_data", "python_int"],
)
def test_non_plain_arrays_are_refused_naming_the_member(tmp_path, payload):
    from tests.datasets import gcb_payloads as g

    obj = np.dtype("O")
    items = {
        "setstate_fields": g.reconstructed((1, 1), g.dtype("f8", (3, "<", None, ("a",), {"a": (obj, 0)}, 8, 1, 0)), b"A" * 8),
        "unicode": np.array([["ab"]]),
        "complex": np.ones((1, 1), dtype=np.complex128),
        "datetime": np.zeros((1, 1), dtype="M8[s]"),
        "nested_objects": g.objects([1, 2]),
        "truncated": g.reconstructed((3, 5), g.plain_dtype(), b"\0" * 59),
        "too_long": g.reconstructed((3, 5), g.plain_dtype(), b"\0" * 61),
        "csr_structured_data": g.Reduce(sp.csr_matrix, (), None),
        "python_int": 7,
    }
    if payload == "csr_structured_data":
        adjacency = sp.csr_matrix(np.eye(2, dtype=np.float32))
        state = dict(adjacency.__dict__, data=g.pointer_array(2))
        items[payload] = g.Reduce(sp.csr_matrix.__new__, (sp.csr_matrix,), state)
    key = "tr_adj" if payload == "csr_structured_data" else "tr_feat"
    src = g.write_original(tmp_path / "bad.npz", {key: g.objects([items[payload], items[payload]])})
    _refused(src, f"member {key}.npy")


def test_huge_shape_claims_are_refused_from_the_header(tmp_path, capsys):
    from tests.datasets import gcb_payloads as g
    from topomodelx_attention import cli

    # a plain member whose header claims 10^12 x 4 float32 (4 TB) in a 6 kB file
    header = {"descr": "<f4", "fortran_order": False, "shape": (10**12, 4)}
    src = g.replace_member(g.write_original(tmp_path / "huge.npz"), "tr_class.npy", g.npy_bytes(header, b"\0" * 64))
    naive = _naive(f"import numpy as np; np.load({str(src)!r})['tr_class']", limit_memory=True)
    assert naive.returncode == 1 and "MemoryError" in naive.stderr  # the unprotected path allocates
    _refused(src, "member tr_class.npy", "MAX_ARRAY_ENTRIES")
    # pickled shapes: an uninitialised 10^6 x 10^6 float64 array, and a 10^13-entry claim
    pickled = g.write_original(tmp_path / "pickled.npz", {"val_feat": g.objects([g.uninitialised((10**6, 10**6), "f8")] * 2)})
    naive = _naive(f"import numpy as np; np.load({str(pickled)!r}, allow_pickle=True)['val_feat']", limit_memory=True)
    assert naive.returncode == 1 and "MemoryError" in naive.stderr
    _refused(pickled, "member val_feat.npy")
    claim = g.write_original(tmp_path / "claim.npz", {"te_feat": g.objects([g.reconstructed((10**13,), g.plain_dtype(), b"")] * 2)})
    _refused(claim, "member te_feat.npy", "MAX_ARRAY_ENTRIES")
    # a converted (plain) file whose header claims 10^12 x 4: read_gcb, and `train --dataset GCB`
    (tmp_path / "gcb").mkdir()
    plain = convert_gcb(g.write_original(tmp_path / "gcb" / "hard_small.npz"))
    g.replace_member(plain, "tr_feat.npy", g.npy_bytes(header, b"\0" * 64))
    naive = _naive(f"import numpy as np; np.load({str(plain)!r})['tr_feat']", limit_memory=True)
    assert naive.returncode == 1 and "MemoryError" in naive.stderr
    with pytest.raises(ValueError, match=r"hard_small\.plain\.npz: member tr_feat\.npy .*MAX_ARRAY_ENTRIES"):
        read_gcb(plain)
    code = cli.main(["train", "--dataset", "GCB", "--data-dir", str(plain.parent), "--max-epochs", "1", "--seeds", "1",
                     "--no-progress-bar", "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0]
    assert str(plain) in err[0] and "member tr_feat.npy" in err[0]
    code = cli.main(["convert-gcb", str(src)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(src) in err[0] and "member tr_class.npy" in err[0]


def test_sizes_the_archive_cannot_hold_are_refused(tmp_path):
    from tests.datasets import gcb_payloads as g

    src = g.claim_size(g.write_original(tmp_path / "claim.npz"), "tr_class.npy", 2**31 - 1)
    _refused(src, "member tr_class.npy", "impossible")
    plain = convert_gcb(g.write_original(tmp_path / "ok.npz"))
    g.claim_size(plain, "te_feat.npy", 2**31 - 1)
    with pytest.raises(ValueError, match=r"ok\.plain\.npz: member te_feat\.npy .*impossible"):
        read_gcb(plain)
    plain = convert_gcb(g.write_original(tmp_path / "ok2.npz"))
    header = {"descr": "<f8", "fortran_order": False, "shape": (1000, 1000)}
    g.replace_member(plain, "val_adj_data.npy", g.npy_bytes(header, b"\0" * 64))
    with pytest.raises(ValueError, match=r"ok2\.plain\.npz: member val_adj_data\.npy claims shape \(1000, 1000\)"):
        read_gcb(plain)


def test_plain_file_with_wrapping_unsigned_pointers_would_segfault_and_is_refused(tmp_path):
    from tests.datasets import gcb_payloads as g

    plain = convert_gcb(g.write_original(tmp_path / "ok.npz"))
    with np.load(plain) as archive:
        arrays = {key: archive[key] for key in archive.files}
    # graph 0: 2 vertices, 2 entries, indptr [0, 10^8, 2] as uint64: np.diff wraps, so ">= 0" passes
    indptr = np.array([0, 10**8, 2], dtype=np.uint64)
    n0, e0 = int(arrays["tr_num_nodes"][0]), int(arrays["tr_adj_nnz"][0])
    arrays["tr_adj_indptr"] = np.concatenate([indptr, arrays["tr_adj_indptr"][n0 + 1 :].astype(np.uint64)])
    arrays["tr_adj_indices"] = np.concatenate([[0, 1], arrays["tr_adj_indices"][e0:]])
    arrays["tr_adj_data"] = np.concatenate([[1.0, 1.0], arrays["tr_adj_data"][e0:]])
    arrays["tr_num_nodes"][0], arrays["tr_adj_nnz"][0], arrays["tr_feat_rows"][0] = 2, 2, 2
    arrays["tr_feat"] = np.concatenate([np.eye(5, dtype=np.float32)[:2], arrays["tr_feat"][n0:]])
    bad = tmp_path / "wrap.plain.npz"
    np.savez(bad, **arrays)
    assert bool((np.diff(indptr) >= 0).all())  # what the unprotected check saw
    naive = _naive(
        "import numpy as np, scipy.sparse as sp; "
        f"m = sp.csr_matrix((np.ones(2), np.array([0, 1]), np.array({indptr.tolist()}, dtype=np.uint64)), shape=(2, 2)); "
        "sp.coo_matrix(m)"
    )
    # scipy writes past its buffer: SIGSEGV, SIGABRT when the allocator notices first, or a hang
    assert naive.returncode in (-11, -6, HUNG), (naive.returncode, naive.stderr[-300:])
    with pytest.raises(ValueError, match=r"wrap\.plain\.npz: graph 0 of split tr .*not a valid CSR"):
        read_gcb(bad)


def test_a_folder_given_as_the_gcb_file_says_it_is_a_folder(tmp_path, capsys):
    from topomodelx_attention import cli

    folder = tmp_path / "gcb"
    folder.mkdir()
    for call in (convert_gcb, read_gcb):
        with pytest.raises(ValueError, match="is a folder, not a file") as info:
            call(folder)
        assert str(folder) in str(info.value) and "does not exist" not in str(info.value)
    assert cli.main(["convert-gcb", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{folder} is a folder, not a file" in err and "does not exist" not in err
    src, _ = _original_gcb(tmp_path)
    with pytest.raises(ValueError, match=r"the output .*gcb is a folder; pass the output file"):
        convert_gcb(src, folder)


# ------------------------------------------------------------------ output files
def test_convert_gcb_never_follows_planted_symlinks(tmp_path):
    src, expected = _original_gcb(tmp_path)
    victim = tmp_path / "victim.txt"
    dst = gcb_plain_path(src)
    # the unprotected path: writing to a planted link writes the link's target
    bait = tmp_path / "bait.txt"
    bait.write_bytes(b"precious")
    (tmp_path / "link").symlink_to(bait)
    with open(tmp_path / "link", "wb") as handle:
        handle.write(b"overwritten")
    assert bait.read_bytes() == b"overwritten"
    victim.write_bytes(b"precious")
    old_temp = dst.with_name(dst.name + ".part")  # the fixed temporary name of earlier versions
    old_temp.symlink_to(victim)
    dst.symlink_to(victim)
    assert convert_gcb(src) == dst
    assert victim.read_bytes() == b"precious"
    assert not dst.is_symlink() and dst.is_file()  # the link itself was replaced
    assert old_temp.is_symlink() and old_temp.resolve() == victim
    graphs = read_gcb(dst)
    assert [len(graphs[k]) for k in ("train", "val", "test")] == [len(expected[k]) for k in ("train", "val", "test")]


def test_failed_conversion_leaves_no_temporary_file(tmp_path, monkeypatch):
    src, _ = _original_gcb(tmp_path)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez_compressed", fail)
    before = set(tmp_path.iterdir())
    with pytest.raises(OSError, match="No space left"):
        convert_gcb(src)
    assert set(tmp_path.iterdir()) == before


# ------------------------------------------------------------------ the memory a file asks for
def _peak_while(fn):
    """``(result or the ValueError raised, peak bytes traced)`` of ``fn()``."""
    import tracemalloc

    tracemalloc.start()
    try:
        try:
            result = fn()
        except ValueError as error:
            result = error
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _inflating(path, member, pickled, payload):
    """An original GCB file whose ``member`` inflates to ``payload`` bytes of zeros (a pickled
    feature array, or a plain float64 member)."""
    from tests.datasets import gcb_payloads as g

    src = g.write_original(path)
    if pickled:
        head, tail = g.pickled_payload_member(2, payload)
    else:
        head, tail = g.npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (payload // 8,)}), b""
    return g.inflating_member(src, member, head, payload, tail)


@pytest.mark.parametrize(
    ("member", "pickled", "payload"),
    [("tr_class.npy", False, 8 * 10**8), ("val_feat.npy", True, 4 * 10**8)],
    ids=["plain-member-800MB", "pickled-member-400MB"],
)
def test_a_small_file_inflating_above_the_memory_budget_is_refused_before_reading(tmp_path, capsys, member, pickled, payload):
    from topomodelx_attention import cli
    from topomodelx_attention.datasets import gcb

    src = _inflating(tmp_path / "inflating.npz", member, pickled, payload)  # 10^8 float64: within MAX_ARRAY_ENTRIES
    assert src.stat().st_size < 1_000_000  # a 781 kB file for the 800 MB member
    error, peak = _peak_while(lambda: convert_gcb(src, tmp_path / "out.npz"))
    assert isinstance(error, ValueError), error
    for needle in (str(src), f"member {member}", "GCB_MEMORY_BUDGET", "refused before reading it"):
        assert needle in str(error), str(error)
    assert peak < 2**20, f"{peak:,} bytes allocated before refusing"
    assert cli.main(["convert-gcb", str(src), str(tmp_path / "out.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"member {member}" in err[0] and "GCB_MEMORY_BUDGET" in err[0]
    assert not (tmp_path / "out.npz").exists()
    # the unprotected path: without the budget the member is read, and refused only afterwards
    small = _inflating(tmp_path / "small.npz", member, pickled, 8 * 10**6)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gcb, "GCB_MEMORY_BUDGET", 2**40)
        error, peak = _peak_while(lambda: convert_gcb(small, tmp_path / "out.npz"))
    assert isinstance(error, ValueError) and peak > 8 * 10**6, (error, peak)


def test_a_converted_file_inflating_above_the_memory_budget_is_refused_before_reading(tmp_path):
    from tests.datasets import gcb_payloads as g

    plain = convert_gcb(g.write_original(tmp_path / "ok.npz"))
    rows = 10**8 // 5  # 10^8 float64 feature entries: within MAX_ARRAY_ENTRIES
    g.inflating_member(plain, "tr_feat.npy", g.npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (rows, 5)}), 8 * 10**8)
    error, peak = _peak_while(lambda: read_gcb(plain))
    assert isinstance(error, ValueError) and "reading it needs about" in str(error), error
    assert "member tr_feat.npy" in str(error) and "GCB_MEMORY_BUDGET" in str(error)
    assert peak < 2**20, f"{peak:,} bytes allocated before refusing"


def test_the_real_sized_file_is_far_below_the_memory_budget(tmp_path):
    from topomodelx_attention.datasets import gcb

    src = write_gcb(tmp_path)
    plain = convert_gcb(src)
    result, peak = _peak_while(lambda: read_gcb(plain))
    assert not isinstance(result, ValueError) and sum(len(v) for v in result.values()) == 12
    assert peak < gcb.GCB_MEMORY_BUDGET / 100
