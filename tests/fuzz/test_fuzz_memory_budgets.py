"""Fuzz: options and files that ask for memory are estimated and refused before anything is allocated.

* every numeric option of the packaged GraphUniverse data set config (found by walking the
  composed ``dataset`` section, never listed here: a new option is attacked as soon as the YAML
  has it) set to an out-of-range value — huge, zero, negative, non-finite, a reversed or
  oversized pair — or to a small in-range one: loading the family must either refuse it with a
  one-line ``ValueError`` that names the option, having traced less than 16 MiB, or generate a
  family whose features are finite and within the models' input range, within the memory
  :func:`~topomodelx_attention.datasets.graphuniverse.check_generation_budget` estimated;
* GCB files (original and converted), well-formed or with one member, picked at random,
  inflating to a random size, under a random budget: refused naming the member and
  ``GCB_MEMORY_BUDGET`` with under 1 MiB traced exactly when the estimate from the zip
  directory exceeds the budget; otherwise read or converted (a well-formed file) or refused for
  its content, never having traced more than that estimate.

Memory is traced with ``tracemalloc`` (numpy's and Python's allocations; torch's are not traced).
"""

from __future__ import annotations

import math
import tracemalloc
import zipfile

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from tests.datasets import gcb_payloads as g
from tests.fuzz.cases import ACCEPT, EITHER, REJECT, quietly, run_cases
from topomodelx_attention.datasets import gcb
from topomodelx_attention.datasets.gcb import convert_gcb, read_gcb
from topomodelx_attention.datasets.graphuniverse import (
    check_generation_budget,
    load_graphuniverse,
    parameters_from_config,
)
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.nn.common import MAX_ABS_INPUT

pytest.importorskip("graph_universe")

TINY = {"dataset.n_graphs": 10, "dataset.family.n_nodes_range": [5, 20]}
"""A family small enough to generate in every accepted case (unless the attacked option is one of these)."""

REFUSAL_PEAK = 16 * 2**20
"""Bytes a refusal may trace (imports and the configuration; no family, no array of the request)."""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _leaves(tree, prefix="dataset."):
    """``(key, value)`` of every number, and every pair of numbers, of a config tree."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, f"{prefix}{key}.")
    elif _number(tree) or (isinstance(tree, list) and len(tree) == 2 and all(map(_number, tree))):
        yield prefix[:-1], tree


def _numeric_options() -> list[tuple[str, object]]:
    tree = OmegaConf.to_container(compose_config([], dataset="graphuniverse", model="gin").dataset, resolve=True)
    return sorted(_leaves(tree))


def _out_of_range(default, rng: np.random.Generator):
    """A value outside any sensible range of an option with this default."""
    huge = [10**7, 10**9, 10**12, 2**40, 2**63 - 1]
    if isinstance(default, list):
        kind = str(rng.choice(["huge", "reversed", "negative", "zero", "nan"]))
        if kind == "huge":
            return [int(rng.choice(huge))] * 2 if isinstance(default[0], int) else [1e300, 1e300]
        if kind == "reversed":
            return [default[1] * 10 + 1, default[0]]
        if kind == "negative":
            return [-1, default[1]]
        if kind == "zero":
            return [0, 0]
        return [float("nan"), default[1]] if isinstance(default[0], float) else [-(2**63), default[1]]
    if isinstance(default, int):
        return int(rng.choice([*huge, 0, -1, -(2**40)]))
    return float(rng.choice([1e300, 1e12, -1.0, -1e-9, float("nan"), float("inf"), float("-inf")]))


def _in_range(default, rng: np.random.Generator):
    """A small value near the default (the same type), which may still break a cross-constraint."""
    if isinstance(default, list):
        if isinstance(default[0], int):
            high = min(int(max(default)), 64)
            a, b = sorted(int(v) for v in rng.integers(max(1, high // 4), high + 1, 2))
            return [a, b]
        a, b = sorted(float(v) for v in rng.uniform(0.0, 1.0, 2))
        return [round(a, 3), round(b, 3)]
    if isinstance(default, int):
        return int(rng.integers(max(0, min(default, 64) // 2), min(2 * default, 64) + 1))
    return round(float(rng.uniform(0.0, max(2 * default, 1e-3))), 4)


def _override(key: str, value) -> str:
    if isinstance(value, list):
        return f"{key}=[{','.join(_plain(v) for v in value)}]"
    return f"{key}={_plain(value)}"


def _plain(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value)


def _traced(fn):
    """``(result, peak bytes traced)`` of ``fn()``; an exception propagates after tracing stops."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_fuzz_graphuniverse_options_are_refused_naming_them_or_generate_within_the_estimate(fuzz_seeds, tmp_path):
    options = _numeric_options()
    assert {"dataset.n_graphs", "dataset.universe.feature_dim", "dataset.family.n_nodes_range"} <= {k for k, _ in options}

    def make(seed, rng):
        key, default = options[int(rng.integers(len(options)))]
        attack = bool(rng.random() < 0.7)
        value = _out_of_range(default, rng) if attack else _in_range(default, rng)
        base = {k: v for k, v in TINY.items() if k != key}
        overrides = [_override(k, v) for k, v in base.items()] + [_override(key, value)]
        cache = tmp_path / f"case_{seed}"

        def run():
            peak = 0
            try:
                cfg = compose_config(overrides, dataset="graphuniverse", model="gin").dataset
                splits, peak = _traced(lambda: quietly(load_graphuniverse, cfg, cache))
            except ValueError as error:
                message = str(error)
                assert "\n" not in message, "the error must be one line"
                assert key in message, f"the error does not name {key}: {message[:200]}"
                assert peak == 0 or peak < REFUSAL_PEAK, f"{peak:,} bytes traced before refusing"
                raise
            graphs = [graph for part in splits.values() for graph in part]
            parameters = parameters_from_config(cfg)
            estimate = check_generation_budget(parameters)
            assert peak <= estimate, f"generation traced {peak:,} bytes, estimated {estimate:,}"
            assert len(graphs) == parameters["family_parameters"]["n_graphs"]
            x = torch.cat([graph.x for graph in graphs])
            assert bool(torch.isfinite(x).all()) and float(x.abs().max()) < MAX_ABS_INPUT, "features out of range"

        return f"{_override(key, value)}", REJECT if _surely_bad(value) else EITHER, run

    run_cases(fuzz_seeds, "GraphUniverse option values", make, offset=93_000)


def _surely_bad(value) -> bool:
    """Values no option of the data set config takes: negative, non-finite, or a reversed pair.

    Huge and zero values may be valid (a batch larger than the data set, a zero variance):
    those cases are judged by what happens, refused naming the option or generated within the
    estimate.
    """
    values = value if isinstance(value, list) else [value]
    return any(v < 0 or not math.isfinite(v) for v in values) or (isinstance(value, list) and value[0] > value[1])


# ----------------------------------------------------------------------------------------------
# GCB files
# ----------------------------------------------------------------------------------------------
MEMBERS = [f"{prefix}_{kind}" for prefix in g.PREFIXES for kind in ("adj", "feat", "class")]


def _inflate(path, member: str, payload: int):
    """Replace ``member`` of an original GCB file by one inflating to about ``payload`` bytes."""
    if member.endswith("_class"):
        header = g.npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (payload // 8,)})
        return g.inflating_member(path, f"{member}.npy", header, payload // 8 * 8)
    head, tail = g.pickled_payload_member(2, payload // 8 * 8)
    return g.inflating_member(path, f"{member}.npy", head, payload // 8 * 8, tail)


def _estimate(path, converting: bool) -> int:
    """What the file asks for by the documented rule (:func:`~.gcb.gcb_memory`): the
    members read, and the graphs their headers give (the ``*_adj`` items / ``*_num_nodes`` entries)."""
    names = {f"{m}.npy" for m in MEMBERS} if converting else None
    counted = "_adj.npy" if converting else "_num_nodes.npy"
    graphs = 0
    with zipfile.ZipFile(path) as archive:
        members = [info for info in archive.infolist() if names is None or info.filename in names]
        for info in members:
            if info.filename.endswith(counted):
                with archive.open(info) as handle:
                    np.lib.format.read_magic(handle)
                    graphs += np.lib.format.read_array_header_1_0(handle)[0][0]
    return gcb.gcb_memory(members, graphs, converting)


def test_fuzz_gcb_files_are_refused_above_the_budget_before_reading(fuzz_seeds, tmp_path):
    def make(seed, rng):
        member = MEMBERS[int(rng.integers(len(MEMBERS)))]
        inflated = bool(rng.random() < 0.8)  # else a well-formed file under a small budget
        payload = int(rng.integers(2 * 2**20, 16 * 2**20)) if inflated else 0
        converted = bool(rng.integers(2))
        folder = tmp_path / f"case_{seed}"
        folder.mkdir()
        path = g.write_original(folder / "src.npz", count=int(rng.integers(2, 6)))

        if converted:  # a converted file whose member inflates consistently with its header
            path = convert_gcb(path)
            name = str(rng.choice(["tr_feat", "val_adj_data", "te_adj_indices"]))
            if inflated:
                dtype = "<f8" if name != "te_adj_indices" else "<i8"
                shape = (payload // 40, 5) if name == "tr_feat" else (payload // 8,)
                header = g.npy_bytes({"descr": dtype, "fortran_order": False, "shape": shape})
                g.inflating_member(path, f"{name}.npy", header, int(np.prod(shape)) * 8)
            estimate = _estimate(path, converting=False)
            needle, call = f"member {name}.npy" if inflated else "member", (lambda: read_gcb(path))
        else:
            if inflated:
                _inflate(path, member, payload)
            estimate = _estimate(path, converting=True)
            needle, call = f"member {member}.npy" if inflated else "member", (lambda: convert_gcb(path, folder / "out.npz"))
        budget = int(rng.integers(2**20, 128 * 2**20)) if inflated else int(estimate * rng.uniform(0.5, 2.0))
        expect = REJECT if estimate > budget else (EITHER if inflated else ACCEPT)
        description = (
            f"{'converted' if converted else 'original'} {needle if inflated else 'untouched'} payload={payload:,} "
            f"estimate={estimate:,} budget={budget:,}"
        )

        def run():
            tracemalloc.start()
            try:
                try:
                    with pytest.MonkeyPatch.context() as patch:
                        patch.setattr(gcb, "GCB_MEMORY_BUDGET", budget)
                        call()
                finally:
                    peak = tracemalloc.get_traced_memory()[1]
            except ValueError as error:
                message = str(error)
                if "GCB_MEMORY_BUDGET" in message:
                    assert expect == REJECT, f"refused within the budget: {message[:200]}"
                    assert needle in message and str(path) in message, message[:300]
                    assert peak < 2**20, f"{peak:,} bytes traced before refusing"
                else:  # refused for its content after reading: never beyond the estimate
                    assert peak <= estimate, f"{peak:,} bytes traced, estimated {estimate:,}"
                raise
            finally:
                tracemalloc.stop()
            assert peak <= estimate, f"{peak:,} bytes traced, estimated {estimate:,}"

        return description, expect, run

    run_cases(fuzz_seeds, "GCB memory budget", make, offset=94_000)
