"""Fuzz: the CLI traps of the harness — added config keys, misspelled data set names, the lifting
progress bar, TU node attributes (``use_node_attr``).

Each test draws ``DEFAULT_CASES`` seeded cases in CI (``TMA_FUZZ_CASES=N`` for more) and judges
them by the rule of :mod:`tests.fuzz.cases`.
"""

from __future__ import annotations

import string
import warnings

import numpy as np
import torch

import topomodelx_attention.harness.prepare as harness_prepare
from tests.fuzz.cases import ACCEPT, EITHER, REJECT, quietly, run_cases
from tests.test_cli_faults import write_tiny_tu
from topomodelx_attention.datasets import load_graphs
from topomodelx_attention.harness.config import PASS_THROUGH, compose_config
from topomodelx_attention.harness.prepare import prepare_dataset, process_graphs

CELL = {"_target_": "topomodelx_attention.transforms.CellCycleLifting"}


def _random_name(rng: np.random.Generator, low: int = 1, high: int = 12) -> str:
    letters = string.ascii_letters + string.digits + "_"
    return "".join(rng.choice(list(letters), int(rng.integers(low, high))))


def test_fuzz_added_config_keys_warn_unless_read(fuzz_seeds):
    """``+key=value``: a key nothing reads is accepted with a warning naming it (or refused by
    hydra); a key of a pass-through section (``trainer.``, ``model.params.``, ...) without one."""

    def make(seed, rng):
        section = str(rng.choice(["", "dataset.", "optimizer.", "paths.", *PASS_THROUGH]))
        key = f"{section}k{_random_name(rng)}"  # a letter first (hydra's key grammar)
        value = str(rng.choice(["1", "0.5", "true", "abc", "[1,2]"]))
        override = f"{'+' * int(rng.integers(1, 3))}{key}={value}"
        passed_on = section in PASS_THROUGH

        def run():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                compose_config([override])
            named = [w for w in caught if f"configuration key {key!r}" in str(w.message)]
            if passed_on:
                assert not named, f"{override}: a pass-through key was reported unused"
            else:
                assert named, f"{override}: an unused key was accepted without a warning"

        # hydra may refuse the addition (e.g. below a null section): EITHER, judged when accepted
        return override, EITHER, run

    run_cases(fuzz_seeds, "added config keys", make, offset=9100)


def test_fuzz_misspelled_data_set_names_leave_no_folder(fuzz_seeds, tmp_path):
    """A TU name without files is refused (naming the expected file) and leaves no processed folder."""
    data = tmp_path / "data"
    write_tiny_tu(data, name="TINY")

    def make(seed, rng):
        name = "TINY" + _random_name(rng, 1, 4) if rng.integers(2) else _random_name(rng)
        cache = tmp_path / f"cache{seed}"
        cache.mkdir()

        def run():
            cfg = compose_config([f"dataset.data_dir={data}"], dataset=name).dataset
            try:
                prepare_dataset(cfg, CELL, None, cache_dir=cache)
            except FileNotFoundError as error:  # the documented error of a missing file
                message = str(error)
            else:
                return
            left = [p.relative_to(cache).as_posix() for p in cache.rglob("*")]
            assert f"{name}_A.txt" in message, message
            assert not left, f"left behind: {left}"
            raise ValueError(f"FileNotFoundError: {message}")

        return f"name={name!r}", REJECT, run

    run_cases(fuzz_seeds, "misspelled data set names", make, offset=9200)


class _CountingBar:
    last: _CountingBar | None = None

    def __init__(self, total=None, **kwargs):
        self.total, self.count = total, 0
        _CountingBar.last = self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.count += n


def test_fuzz_lifting_bar_counts_every_graph_once(fuzz_seeds, monkeypatch):
    """Any number of graphs, chunk size and PE: the bar's total and count are the number of graphs."""
    from topomodelx_attention.transforms import CellCycleLifting, CellularRandomWalkPE

    monkeypatch.setattr(harness_prepare, "tqdm", _CountingBar)
    graphs = load_graphs({"name": "MUTAG", "loader": "tu"})

    def make(seed, rng):
        n = int(rng.integers(0, 12))
        chunk = int(rng.integers(1, 6))
        pe = CellularRandomWalkPE(int(rng.integers(1, 5))) if rng.integers(2) else None

        def run():
            out = quietly(process_graphs, graphs[:n], CellCycleLifting(), pe, chunk_size=chunk)
            bar = _CountingBar.last
            assert len(out) == n, f"{len(out)} complexes for {n} graphs"
            assert bar.total == n and bar.count == n, f"bar {bar.count}/{bar.total} for {n} graphs"
            assert pe is None or all("pe_0" in c for c in out), "PE not applied"

        return f"n={n} chunk={chunk} pe={pe is not None}", ACCEPT, run

    run_cases(fuzz_seeds, "lifting progress bar", make, offset=9300)


def test_fuzz_tu_use_node_attr(fuzz_seeds, tmp_path):
    """TU files with random attribute widths: ``use_node_attr`` keeps them before the labels;
    a non-boolean value is refused."""

    def make(seed, rng):
        width = int(rng.integers(0, 4))
        value = [True, False, "yes", 1, None][int(rng.integers(5))]
        expect = ACCEPT if isinstance(value, bool) else REJECT
        if value is None:
            expect = ACCEPT  # null: the default (false)
        folder = tmp_path / f"d{seed}"
        raw = write_tiny_tu(folder, name="T")
        rows = len((raw / "T_graph_indicator.txt").read_text().split())
        attributes = rng.standard_normal((rows, width)).round(3)
        if width:
            (raw / "T_node_attributes.txt").write_text("".join(", ".join(map(str, r)) + "\n" for r in attributes))

        def run():
            cfg = {"name": "T", "loader": "tu", "data_dir": str(folder), "use_node_attr": value}
            if value is None:
                cfg.pop("use_node_attr")
            x = torch.cat([g.x for g in load_graphs(cfg, tmp_path)])
            keep = bool(value) and width > 0
            assert x.shape == (rows, 3 + (width if keep else 0)), f"x of shape {tuple(x.shape)}"
            if keep:
                assert torch.allclose(x[:, :width], torch.as_tensor(attributes, dtype=x.dtype)), "attributes lost"

        return f"width={width} use_node_attr={value!r}", expect, run

    run_cases(fuzz_seeds, "TU use_node_attr", make, offset=9400)


def test_fuzz_gcb_file_names(fuzz_seeds, tmp_path):
    """A GCB ``dataset.file`` that is not in the folder is refused naming ``dataset.file=``."""
    from tests.harness.files import write_gcb

    src = write_gcb(tmp_path)

    def make(seed, rng):
        file = _random_name(rng) + str(rng.choice([".npz", ".plain.npz", ""]))

        def run():
            cfg = compose_config([f"dataset.data_dir={src.parent}", f"dataset.file='{file}'"], dataset="GCB").dataset
            try:
                load_graphs(cfg, tmp_path)
            except FileNotFoundError as error:
                message = str(error)
            else:
                return
            assert "dataset.file=" in message and src.name in message, message
            raise ValueError(f"FileNotFoundError: {message}")

        return f"file={file!r}", REJECT, run

    run_cases(fuzz_seeds, "GCB file names", make, offset=9500)
