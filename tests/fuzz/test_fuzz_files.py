"""Fuzz: crafted GCB files and planted symlinks.

Random original-format files with one crafted member (structured / object dtypes with pointer
fields, dtype ``__setstate__`` payloads, uninitialised ``numpy.ndarray(shape, dtype)``, huge
shape claims, truncated or overlong bytes, malformed CSR states, lying zip sizes, cut or
flipped bytes), crafted converted (plain) files, and symlinks planted at the temporary names of
``convert-gcb`` and of the cache writer. A crafted file must be refused with a one-line
``ValueError`` naming the file (and the member where there is one) and leave nothing behind;
it must never crash, allocate its claim or write through a link. Well-formed files convert to
the same graphs :func:`gcb_graph` builds from the original objects.
"""

from __future__ import annotations

import os
import socket
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from tests.datasets import gcb_payloads as g
from tests.fuzz.cases import ACCEPT, EITHER, REJECT, run_cases
from topomodelx_attention import files
from topomodelx_attention.datasets import cache
from topomodelx_attention.datasets.gcb import (
    MAX_ARRAY_ENTRIES,
    convert_gcb,
    gcb_graph,
    read_gcb,
)

MEMBERS = [f"{p}_{k}" for p in g.PREFIXES for k in ("adj", "feat", "class")]
SPLIT = {"tr": "train", "val": "val", "te": "test"}


def _named_refusal(call, path: Path, member: str | None = None, leaves: Path | None = None):
    """Run ``call``; a refusal must be a one-line ValueError naming ``path`` (and ``member``)
    that writes nothing into ``leaves`` (the output folder)."""
    before = set(leaves.iterdir()) if leaves is not None else None
    try:
        return call()
    except ValueError as error:
        text = str(error)
        assert str(path) in text, f"the message does not name {path.name}: {text[:200]}"
        assert member is None or member in text, f"the message does not name member {member}: {text[:200]}"
        assert "\n" not in text, f"a multi-line message: {text[:200]}"
        if leaves is not None:
            assert set(leaves.iterdir()) == before, "a refused conversion left files behind"
        raise
    except TypeError as error:
        raise AssertionError(f"TypeError instead of a ValueError naming the file: {error}") from error


def _random_graphs(rng: np.random.Generator, count: int):
    """Valid per-graph objects of varied dtypes and layouts, and the graphs they must give."""
    mats, feats, labels = [], [], []
    width = int(rng.integers(1, 6))
    feat_dtype = rng.choice(["f4", "f8", "i8", "u1", "b1"])
    for _ in range(count):
        n = int(rng.integers(0, 7))
        dense = np.triu(rng.random((n, n)) < 0.5, 1)
        dense = (dense | dense.T).astype(rng.choice(["f4", "f8", "i4", "b1"]))
        mats.append(sp.csr_matrix(dense) if rng.random() < 0.8 else dense)  # dense items are accepted too
        f = rng.integers(0, 2, (n, width)).astype(feat_dtype)
        feats.append(np.asfortranarray(f) if rng.random() < 0.3 else f)
        labels.append(np.eye(3, dtype=rng.choice(["f4", "i8"]))[int(rng.integers(3))])
    expected = [gcb_graph(a, f, c) for a, f, c in zip(mats, feats, labels)]
    return mats, feats, labels, expected


def _same_graphs(got, want) -> None:
    assert len(got) == len(want), f"{len(got)} graphs instead of {len(want)}"
    for a, b in zip(got, want):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index), "graph changed by the conversion"
        assert torch.equal(a.y, b.y) and a.num_nodes == b.num_nodes, "label or size changed by the conversion"


def _crafted_item(rng: np.random.Generator, key: str):
    """One crafted per-graph object for member ``key`` and what it is (all must be refused)."""
    kind = str(rng.choice([
        "pointer", "setstate", "bad_code", "nested_object", "uninitialised", "unset", "huge_shape",
        "payload_length", "bad_state", "csr_state", "csr_pointer_data", "python_object",
    ]))
    code = str(rng.choice(["f4", "f8", "i4", "i8", "u1", "b1"]))
    if kind == "pointer":
        variant = str(rng.choice(["object", "overlap", "nested"]))
        return g.pointer_array(int(rng.integers(1, 4)), variant), f"{kind}/{variant}"
    if kind == "setstate":
        obj = np.dtype("O")
        state = [
            (3, "<", None, ("a",), {"a": (obj, 0)}, 8, 1, 0),
            (3, "|", (obj, (1,)), None, None, 8, 8, 63),
            (3, "<", None, None, None, 16, 1, 0),
            (4, "<", None, None, None, -1, -1, 0, {"k": obj}),
            (3, "<", None, ("a", "b"), {"a": (obj, 0), "b": (np.dtype("<i8"), 0)}, 8, 1, 0),
        ][int(rng.integers(5))]
        return g.reconstructed((1, 1), g.dtype(code, state), b"A" * 16), kind
    if kind == "bad_code":
        bad = str(rng.choice(["V8", "U3", "S4", "c16", "M8", "m8", "O8", "f16", "i16", "b2", "<f4", "float32"]))
        state = (3, "|", None, None, None, -1, -1, 63 if bad == "O8" else 0)
        return g.reconstructed((1, 1), g.dtype(bad, state), b"A" * 16), f"{kind}/{bad}"
    if kind == "nested_object":
        return g.objects([np.zeros((1, 1)), 1]), kind
    if kind == "uninitialised":
        shape = tuple(int(s) for s in rng.integers(1, 10**int(rng.integers(1, 7)), int(rng.integers(1, 3))))
        return g.uninitialised(shape, code), f"{kind}{shape}"
    if kind == "unset":
        return g.unset_array(), kind
    if kind == "huge_shape":
        total = 10 ** int(rng.integers(9, 14))
        shape = (total,) if rng.random() < 0.5 else (int(rng.integers(0, 3)), total)
        return g.reconstructed(shape, g.plain_dtype(code), b"\0" * int(rng.integers(0, 64))), f"{kind}{shape}"
    if kind == "payload_length":
        n = int(rng.integers(1, 5))
        size = n * 5 * np.dtype(code).itemsize + int(rng.choice([-3, -1, 1, 8]))
        return g.reconstructed((n, 5), g.plain_dtype(code), b"\0" * max(size, 0)), kind
    if kind == "bad_state":
        states = [
            (2, (1, 1), "dtype", False, b"\0" * 8),  # unknown version
            ((1, 1), g.plain_dtype("f8"), 1, b"\0" * 8),  # fortran flag not a bool
            ((1, -1), g.plain_dtype("f8"), False, b""),  # negative dimension
            ((1, 1.5), g.plain_dtype("f8"), False, b"\0" * 8),  # float dimension
            ((1, 1), g.plain_dtype("f8"), False, "a str payload"),
            ((1, 1), g.plain_dtype("f8")),
        ]
        state = states[int(rng.integers(len(states)))]
        return g.Reduce(g._reconstruct, (np.ndarray, (0,), b"b"), state), kind
    if kind in ("csr_state", "csr_pointer_data"):
        matrix = sp.csr_matrix(np.eye(3, dtype=np.float32))
        state = dict(matrix.__dict__)
        if kind == "csr_pointer_data":
            state["data"] = g.pointer_array(3)
        else:
            change = int(rng.integers(6))
            if change == 0:
                state["_shape"] = (3, 4)
            elif change == 1:
                state["_shape"] = (10**9, 10**9)
            elif change == 2:
                state["indptr"] = np.array([0, 2, 1, 3], dtype=np.int32)
            elif change == 3:
                state["indices"] = np.array([0, 1, 7], dtype=np.int32)
            elif change == 4:
                state["evil"] = g.Reduce(np.dtype, ("f8", False, True))
            else:
                state["indptr"] = np.array([0, 10**8, 2, 3], dtype=np.uint64)
        return g.Reduce(sp.csr_matrix.__new__, (sp.csr_matrix,), state), kind
    return [7, "text", None, (1, 2)][int(rng.integers(4))], kind


def _crafted_original(seed: int, rng: np.random.Generator, folder: Path):
    kind = str(rng.choice(["item", "item", "item", "header", "size_lie", "cut", "flip", "valid", "container"]))
    count = int(rng.integers(1, 4))
    src = folder / f"gcb{seed}.npz"
    dst = folder / "out" / f"gcb{seed}.plain.npz"
    dst.parent.mkdir(parents=True, exist_ok=True)
    key = MEMBERS[int(rng.integers(len(MEMBERS)))]
    member = f"{key}.npy"
    if kind == "valid":
        data, expected = {}, {}
        for prefix in g.PREFIXES:
            mats, feats, labels, graphs = _random_graphs(rng, int(rng.integers(0, 4)))
            data[f"{prefix}_adj"], data[f"{prefix}_feat"] = g.objects(mats), g.objects(feats)
            data[f"{prefix}_class"] = g.objects(labels) if rng.random() < 0.3 else np.array(labels).reshape(len(labels), 3)
            expected[SPLIT[prefix]] = graphs
        np.savez(src, **data)

        def run():
            out = convert_gcb(src, dst)
            got = read_gcb(out)
            for split, want in expected.items():
                _same_graphs(got[split], want)

        return f"valid/{[len(v) for v in expected.values()]}", ACCEPT, run
    if kind == "item":
        item, what = _crafted_item(rng, key)
        good = g.graphs(count, seed)
        position = int(rng.integers(count))
        items = list({"adj": good[0], "feat": good[1], "class": list(good[2])}[key.split("_")[1]])
        items[position] = item
        g.write_original(src, {key: g.objects(items)}, count=count, seed=seed)
        return f"{key}[{position}] {what}", REJECT, lambda: _named_refusal(lambda: convert_gcb(src, dst), src, member, dst.parent)
    g.write_original(src, count=count, seed=seed)
    if kind == "container":  # the member itself is not a 1-d object array of graphs
        bad = [g.objects([[1], [2]]).reshape(2, 1), np.zeros(()), np.zeros((count, 3), dtype="U2"),
               np.zeros(count, dtype=[("a", "O"), ("b", "<i8")])][int(rng.integers(4))]
        g.write_original(src, {key: bad}, count=count, seed=seed)
        return f"{key} container {bad.dtype} {bad.shape}", REJECT, lambda: _named_refusal(lambda: convert_gcb(src, dst), src, None, dst.parent)
    if kind == "header":
        claim = tuple(int(s) for s in rng.choice([10**6, 10**9, 10**12, 4], int(rng.integers(1, 3))))
        descr = str(rng.choice(["<f4", "<i8", "|b1", "|O"]))
        header = {"descr": descr, "fortran_order": False, "shape": claim}
        g.replace_member(src, member, g.npy_bytes(header, b"\0" * int(rng.integers(0, 128))))
        return f"{member} header {descr} {claim}", REJECT, lambda: _named_refusal(lambda: convert_gcb(src, dst), src, member, dst.parent)
    if kind == "size_lie":
        g.claim_size(src, member, int(rng.integers(10**7, 2**31)))
        return f"{member} size lie", REJECT, lambda: _named_refusal(lambda: convert_gcb(src, dst), src, member, dst.parent)
    with zipfile.ZipFile(src) as archive:
        content = bytearray(archive.read(member))
    if kind == "cut":
        cut = int(rng.integers(0, len(content)))
        g.replace_member(src, member, bytes(content[:cut]))
        return f"{member} cut at {cut}/{len(content)}", REJECT, lambda: _named_refusal(lambda: convert_gcb(src, dst), src, None, dst.parent)
    for _ in range(int(rng.integers(1, 6))):  # flipped bytes: anything may happen except a crash
        content[int(rng.integers(len(content)))] = int(rng.integers(256))
    g.replace_member(src, member, bytes(content))

    def flipped():
        out = _named_refusal(lambda: convert_gcb(src, dst), src, None, dst.parent)
        _named_refusal(lambda: read_gcb(out), out)

    return f"{member} flipped bytes", EITHER, flipped


def _in_case_folders(tmp_path: Path, build):
    """``make(seed, rng)`` of :func:`run_cases`: ``build(seed, rng, folder)`` in a new folder per case."""

    def make(seed, rng):
        folder = tmp_path / f"case{seed}"
        folder.mkdir()
        return build(seed, rng, folder)

    return make


def test_fuzz_crafted_original_gcb_files(fuzz_seeds, tmp_path):
    run_cases(fuzz_seeds, "crafted original GCB files", _in_case_folders(tmp_path, _crafted_original), offset=70_000)


def _crafted_plain(seed: int, rng: np.random.Generator, folder: Path):
    src = g.write_original(folder / f"gcb{seed}.npz", count=int(rng.integers(1, 4)), seed=seed)
    plain = convert_gcb(src)
    with np.load(plain) as archive:
        arrays = {key: archive[key] for key in archive.files}
    prefix = str(rng.choice(g.PREFIXES))
    kind = str(rng.choice(["header", "size_lie", "object", "counts", "pointers", "rows", "dtype", "valid"]))
    member = None
    if kind == "valid":
        return "valid", ACCEPT, lambda: read_gcb(plain)
    if kind == "header":
        key = f"{prefix}_" + str(rng.choice(["feat", "adj_indptr", "adj_data", "class", "num_nodes"]))
        member = f"{key}.npy"
        claim = (10 ** int(rng.integers(8, 14)), int(rng.integers(1, 5)))
        header = {"descr": "<f4", "fortran_order": False, "shape": claim}
        g.replace_member(plain, member, g.npy_bytes(header, b"\0" * 64))
    elif kind == "size_lie":
        member = f"{prefix}_feat.npy"
        g.claim_size(plain, member, int(rng.integers(10**7, 2**31)))
    else:
        if kind == "object":
            key = f"{prefix}_" + str(rng.choice(["feat", "class", "adj_data"]))
            arrays[key] = g.objects([g.pointer_array(1)] * len(arrays[key]))
            member = f"{key}.npy"
        elif kind == "counts":
            key = f"{prefix}_" + str(rng.choice(["num_nodes", "adj_nnz", "feat_rows"]))
            arrays[key] = arrays[key].copy()
            arrays[key][0] = [-1, 2**62, MAX_ARRAY_ENTRIES + 1, 2**63 - 1][int(rng.integers(4))]
        elif kind == "pointers":
            indptr = arrays[f"{prefix}_adj_indptr"].astype(np.uint64)
            n0 = int(arrays[f"{prefix}_num_nodes"][0])
            if n0 >= 1:
                indptr[1] = 10**8  # decreasing again later: np.diff of uint64 wraps
            else:
                indptr[0] = 1
            arrays[f"{prefix}_adj_indptr"] = indptr
        elif kind == "rows":
            arrays[f"{prefix}_feat_rows"] = arrays[f"{prefix}_feat_rows"].copy()
            arrays[f"{prefix}_feat_rows"][0] += 1
            arrays[f"{prefix}_feat"] = np.concatenate([arrays[f"{prefix}_feat"], arrays[f"{prefix}_feat"][:1]])
        else:
            key = f"{prefix}_" + str(rng.choice(["feat", "class", "adj_data"]))
            arrays[key] = arrays[key].astype(str(rng.choice(["U3", "c8", "M8[s]"])))
        np.savez(plain, **arrays)
    return f"{kind} {member or prefix}", REJECT, lambda: _named_refusal(lambda: read_gcb(plain), plain, member)


def test_fuzz_crafted_plain_gcb_files(fuzz_seeds, tmp_path):
    run_cases(fuzz_seeds, "crafted converted GCB files", _in_case_folders(tmp_path, _crafted_plain), offset=71_000)


def _planted(seed: int, rng: np.random.Generator, folder: Path):
    """Symlinks at every name an attacker can predict (and at one guessed random name)."""
    victim = folder / "victim.txt"
    victim.write_bytes(b"precious")
    guessed = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz0123456789_"), 8))
    writer = str(rng.choice(["convert", "cache", "probe"]))
    host, pid = socket.gethostname(), os.getpid()
    if writer == "convert":
        src = g.write_original(folder / "hard_small.npz", count=int(rng.integers(1, 3)), seed=seed)
        dst = folder / "hard_small.plain.npz"
        links = [dst.with_name(dst.name + ".part"), folder / f".{dst.name}.{guessed}.tmp"]
        if rng.random() < 0.5:
            links.append(dst)

        def write():
            convert_gcb(src)
            return dst
    elif writer == "cache":
        dst = folder / "processed" / "key.pt"
        dst.parent.mkdir()
        links = [folder / "processed" / f"key.pt.{host}.{pid}.tmp", folder / "processed" / f"key.pt.{host}.{pid}.{guessed}.tmp"]

        def write():
            cache.save_cache({"complexes": [], "split": None}, dst)
            return dst
    else:
        dst = None
        links = [folder / f".write-test.{host}.{pid}.tmp", folder / f".write-test.{guessed}.tmp"]

        def write():
            files.check_writable(folder)
            return None
    for link in links:
        link.symlink_to(victim)

    def run():
        names = iter([guessed, *(f"n{seed}x{i}" for i in range(100))])  # the first random name is the planted one
        original = files._random_part
        files._random_part = lambda: next(names)
        try:
            out = write()
        finally:
            files._random_part = original
        assert victim.read_bytes() == b"precious", f"{writer} wrote through a planted symlink"
        planted = [link for link in links if link != dst]
        assert all(link.is_symlink() for link in planted), "a planted link was replaced"
        if out is not None:
            assert out.is_file() and not out.is_symlink()
            if writer == "convert":
                read_gcb(out)
            else:
                cache.load_cache(out)
        leftovers = [p for p in folder.rglob("*.tmp") if p not in links]
        assert not leftovers, f"temporary files left: {leftovers}"

    return f"{writer} with {len(links)} planted links", ACCEPT, run


def test_fuzz_planted_symlinks_are_never_followed(fuzz_seeds, tmp_path):
    run_cases(fuzz_seeds, "planted symlinks", _in_case_folders(tmp_path, _planted), offset=72_000)
