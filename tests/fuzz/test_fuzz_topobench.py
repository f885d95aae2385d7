"""Fuzz: the TopoBench backbone contract and the edits of `topobench contribute`.

* The three TopoBench backbones on the tensors of batches of random / degenerate complexes
  (empty complexes, single vertices, no edges, isolated vertices): a tuple of one finite tensor
  per rank with one row per cell; malformed tensors (batch vectors or incidences of the wrong
  size, 1-D features, a missing rank, a non-tensor neighbourhood, NaN features) raise
  ``ValueError`` / ``TypeError`` naming the tensor.
* The edits of TopoBench's ``test/pipeline/test_pipeline.py`` (``MODELS``) and
  ``pyproject.toml`` (``dependencies``) on random layouts: every entry kept, the new one added
  once, the result still parses; files without the list are refused naming the file.
* ``--requirement`` values assembled from names, specifiers, markers, URLs, quotes, brackets,
  line breaks and TOML fragments: one PEP 508 requirement on one line is added as exactly one
  dependency (the file parses, no table appears); anything else is a ``ValueError``.
* ``topobench contribute`` attacked at whatever it writes: each case runs the real command
  once to find the files it writes and the folders on the way (nothing is listed here, so a
  file added to a contribution is attacked too), then plants links (to files or folders
  outside, dangling), plain files in place of folders and folders in place of files at a
  random few of them, or makes a random one of the os calls that write fail (disk full,
  file-size limit, Ctrl+C): nothing outside the checkout changes, and the command either
  refuses with the checkout byte for byte as before (saying so in one line) or writes its
  files inside.
"""

from __future__ import annotations

import ast
import errno
import re
from pathlib import Path

import pytest
import torch
from torch_geometric.loader import DataLoader

from tests.fuzz.cases import ACCEPT, REJECT, assert_finite, finite_float_graph, quietly, run_cases
from tests.harness.test_topobench import (
    NOTHING_CHANGED,
    check_attack,
    contribution_writes,
    fake_checkout,
    plant,
    run_contribute,
)
from tests.test_files_replace_all import os_calls, tree
from topomodelx_attention.harness.topobench import (
    CellularTransformerBackbone,
    NSimplicialBackbone,
    OrderKTokenGTBackbone,
)
from topomodelx_attention.harness.topobench.contribute import (
    CONTRIBUTIONS,
    _pipeline_text,
    _pyproject_text,
    check_requirement,
    contribute,
)
from topomodelx_attention.transforms import CellCycleLifting

WIDTH = 8
BACKBONES = (
    lambda: CellularTransformerBackbone(WIDTH, WIDTH, n_layers=1, heads=2),
    lambda: CellularTransformerBackbone(WIDTH, WIDTH, n_layers=1, heads=2, attention="general", kind="dense"),
    lambda: OrderKTokenGTBackbone(WIDTH, WIDTH, n_layers=1, heads=2, node_id_dim=4, identifiers="sum"),
    lambda: NSimplicialBackbone(WIDTH, WIDTH, n_layers=1, heads=2, simplicial_options={"kv_bias": True}),
)
CORRUPTIONS = (
    "clean", "clean", "clean", "clean", "batch_rows", "incidence_shape", "x_1d", "missing_rank",
    "not_tensor", "nan",
)


def _tensors(seed: int, rng):
    size = int(rng.integers(1, 4))
    lifting = CellCycleLifting()
    complexes = [quietly(lifting, finite_float_graph(seed * 11 + i, feature_dim=2, edge_attr=False).data) for i in range(size)]
    batch = next(iter(DataLoader(complexes, batch_size=size)))
    generator = torch.Generator().manual_seed(seed)
    x = [torch.randn(batch[f"x_{r}"].shape[0], WIDTH, generator=generator) for r in range(3)]
    index = [batch[f"batch_{r}"] for r in range(3)]
    return batch, x, index


def test_fuzz_backbone_tensor_contract(fuzz_seeds):
    def make(seed, rng):
        model = BACKBONES[int(rng.integers(len(BACKBONES)))]()
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        batch, x, index = _tensors(seed, rng)
        neighborhoods = {key: batch[key] for key in model.neighborhood_keys}
        expect = ACCEPT
        if how == "batch_rows":
            index[1] = torch.cat([index[1], index[1].new_zeros(1)])
            expect = REJECT
        elif how == "incidence_shape":
            key = "incidence_2"
            matrix = neighborhoods[key]
            neighborhoods[key] = torch.sparse_coo_tensor(
                matrix.coalesce().indices(), matrix.coalesce().values(),
                (matrix.shape[0] + 1, matrix.shape[1]),
            )
            expect = REJECT
        elif how == "x_1d":
            x[2] = x[2][:, 0]
            expect = REJECT
        elif how == "missing_rank":
            x, index = x[:2], index[:2]
            expect = REJECT
        elif how == "not_tensor":
            neighborhoods["incidence_1"] = neighborhoods["incidence_1"].to_dense().tolist()
            expect = REJECT
        elif how == "nan" and x[0].shape[0]:
            x[0] = x[0].clone()
            x[0][0, 0] = float("nan")
            expect = REJECT
        counts = [xr.shape[0] for xr in x]

        def run():
            out = quietly(model, tuple(x), neighborhoods, tuple(index))
            assert type(out) is tuple, f"backbone returned {type(out).__name__}, not a tuple"
            assert [h.shape[0] for h in out] == counts, ([h.shape for h in out], counts)
            for rank, h in enumerate(out):
                assert h.shape[1] == model.out_channels
                assert_finite(f"h_{rank}", h)
            return out

        return f"{type(model).__name__} {how} counts={counts}", expect, run

    run_cases(fuzz_seeds, "topobench backbone tensors", make, offset=7100)


MODEL_NAMES = ("graph/gcn", "cell/topotune", "simplicial/topotune", "cell/cwn", "hypergraph/edgnn")
LAYOUTS = ("topobench", "multiline", "empty", "spaces", "no_models", "not_literal", "present")


def test_fuzz_pipeline_models_edit(fuzz_seeds):
    def make(seed, rng):
        layout = LAYOUTS[int(rng.integers(len(LAYOUTS)))]
        models = [m for m in MODEL_NAMES if rng.random() < 0.5] if layout != "empty" else []
        new = "cell/cellular_transformer"
        quoted = [f'"{m}"' for m in models]
        body = {
            "multiline": "[\n    " + ",\n    ".join(quoted) + ("," if rng.random() < 0.5 else "") + "\n]",
            "empty": "[]",
            "spaces": "[ " + " ,  ".join(quoted) + " ]",
            "present": "[" + ", ".join([*quoted, f'"{new}"']) + "]",
        }.get(layout, "[" + ", ".join(quoted) + "]")
        line = f"MODELS   = {body}        # ADD ONE OR SEVERAL MODELS OF YOUR CHOICE HERE"
        if layout == "no_models":
            line = "MODEL_LIST = []"
        elif layout == "not_literal":
            line = "MODELS = sorted(FOUND)"
        text = f'"""Test pipeline."""\n\nDATASET = "graph/MUTAG"\n{line}\n\n\nclass TestPipeline:\n    pass\n'
        expect = REJECT if layout in ("no_models", "not_literal") else ACCEPT

        def run():
            out = _pipeline_text(text, [new], Path("test/pipeline/test_pipeline.py"))
            if layout == "present":
                assert out is None, "an entry already present was added again"
                return None
            tree = ast.parse(out)
            value = next(
                node.value for node in tree.body
                if isinstance(node, ast.Assign) and node.targets[0].id == "MODELS"
            )
            assert ast.literal_eval(value) == [*models, new], ast.literal_eval(value)
            assert "class TestPipeline" in out and "ADD ONE OR SEVERAL" in out
            return out

        return f"{layout} {models}", expect, run

    run_cases(fuzz_seeds, "pipeline MODELS edit", make, offset=7200)


DEPENDENCIES = ('"torch==2.3.0"', '"numpy"', '"topomodelx @ git+https://github.com/pyt-team/TopoModelX.git"', "'rich'")


def test_fuzz_pyproject_dependency_edit(fuzz_seeds):
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    def make(seed, rng):
        shape = ("plain", "trailing_comma", "empty", "present", "present_other_spec", "no_block")[int(rng.integers(6))]
        listed = [d for d in DEPENDENCIES if rng.random() < 0.6] or ['"numpy"']
        if shape == "empty":
            listed = []
        if shape == "present":
            listed.append('"topomodelx-attention>=0.1.0"')
        if shape == "present_other_spec":
            listed.append('"topomodelx_attention @ git+https://example.org/tma.git"')
        lines = ",\n".join(f"    {d}" for d in listed)
        if shape == "trailing_comma" and lines:
            lines += ","
        space = " " if rng.random() < 0.5 else ""
        block = f"dependencies{space}={space}[\n{lines}\n]\n" if shape != "no_block" else 'requires = ["x"]\n'
        text = f'[project]\nname = "TopoBench"\n{block}\n[tool.ruff]\nline-length = 79\n'
        expect = REJECT if shape == "no_block" else ACCEPT

        def run():
            out = _pyproject_text(text, "topomodelx-attention>=0.1.0", Path("pyproject.toml"))
            if shape.startswith("present"):
                assert out is None, "a dependency already present was added again"
                return None
            parsed = tomllib.loads(out)["project"]["dependencies"]
            original = tomllib.loads(text)["project"]["dependencies"]
            assert parsed == [*original, "topomodelx-attention>=0.1.0"], parsed
            assert re.search(r"line-length = 79", out)
            return out

        return f"{shape} {len(listed)} deps", expect, run

    run_cases(fuzz_seeds, "pyproject dependency edit", make, offset=7300)


#: Parts of a requirement; the first name and the last of the other parts are malformed.
REQUIREMENT_NAMES = ("", "topomodelx-attention", "topomodelx_attention", "pkg", "Pkg.Name")
REQUIREMENT_EXTRAS = ("", "[scatter]", "[a,b]", "[")
REQUIREMENT_SPECS = ("", ">=0.1.0", "==1.*", "~=2.0", " != 1.1, <3", ">=")
REQUIREMENT_TAILS = (
    "", "; python_version>='3.11'", '; python_version >= "3.11"', "; sys_platform == 'linux'", ";",
)
#: Pieces put anywhere in a requirement: line breaks, control characters, TOML syntax, quotes.
HOSTILE_PIECES = (
    "\n", "\r\n", "\r", "\t", "\x00", "\x1b", "\u2028", "\x85", '"', "'", '"]', "]", "\n[tool.evil]\n",
    'x = "y"', "#", "\\", " ", "  ",
)


def test_fuzz_requirement_values(fuzz_seeds):
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from packaging.requirements import InvalidRequirement, Requirement

    text = '[project]\nname = "TopoBench"\ndependencies = [\n    "numpy",\n]\n\n[tool.ruff]\nline-length = 79\n'

    def make(seed, rng):
        clean = rng.random() < 0.4  # a name and well-formed parts only, no hostile piece
        value = "".join(
            pieces[int(rng.integers(1 if clean and pieces is REQUIREMENT_NAMES else 0, len(pieces) - 1 * clean))]
            for pieces in (REQUIREMENT_NAMES, REQUIREMENT_EXTRAS, REQUIREMENT_SPECS, REQUIREMENT_TAILS)
        )
        for _ in range(0 if clean else int(rng.integers(0, 3))):
            at = int(rng.integers(len(value) + 1))
            value = value[:at] + HOSTILE_PIECES[int(rng.integers(len(HOSTILE_PIECES)))] + value[at:]
        try:
            Requirement(value.strip())
            valid = bool(value.strip()) and value.strip().isprintable()
        except (InvalidRequirement, SyntaxError):  # packaging raises SyntaxError for some markers
            valid = False

        def run():
            try:
                out, refusal = _pyproject_text(text, value, Path("pyproject.toml")), None
            except ValueError as error:
                out, refusal = None, str(error)
            if refusal is not None:
                assert not valid, f"a valid requirement refused: {refusal}"
                assert "--requirement" in refusal and "\n" not in refusal, refusal
                return None
            assert valid, f"an invalid requirement accepted: {value!r}"
            assert check_requirement(value) == value.strip()
            if out is None:  # the name is numpy's
                return None
            parsed = tomllib.loads(out)
            assert set(parsed) == {"project", "tool"} and set(parsed["tool"]) == {"ruff"}, parsed
            assert parsed["project"]["dependencies"] == ["numpy", value.strip()], parsed
            return out

        return repr(value), ACCEPT, run

    run_cases(fuzz_seeds, "--requirement values", make, offset=7400)


FOLDERS_IT_CREATES = ("test/nn/wrappers/cell", "test/nn/backbones/simplicial", "configs/model/simplicial")
FILE_PLANTS = ("link", "dangling", "folder")
FOLDER_PLANTS = ("link", "dangling", "file")


def _models(rng) -> list[str]:
    names = sorted(CONTRIBUTIONS)
    chosen = [name for name in names if rng.random() < 0.5]
    return chosen or [names[int(rng.integers(len(names)))]]


def test_fuzz_contribute_with_links_planted_at_its_writes(fuzz_seeds, tmp_path):
    def make(seed, rng):
        models = _models(rng)
        missing = tuple(folder for folder in FOLDERS_IT_CREATES if rng.random() < 0.5)
        plants = int(rng.integers(1, 4))
        case = tmp_path / f"seed{seed}"

        def run():
            files, _, folders = contribution_writes(case / "discover", models, missing)
            targets = [(path, FILE_PLANTS) for path in files] + [(path, FOLDER_PLANTS) for path in folders]
            root, outside = fake_checkout(case / "TopoBench", missing=missing), case / "outside"
            outside.mkdir()
            chosen, at_folder = [], False
            for index in rng.permutation(len(targets))[:plants]:
                path, kinds = targets[int(index)]
                if not (root / path).parent.is_dir() or any(path.startswith(p + "/") for p, _ in chosen):
                    continue  # below an earlier plant
                how = kinds[int(rng.integers(len(kinds)))]
                plant(root, outside, path, how)
                chosen.append((path, how))
                at_folder |= kinds is FOLDER_PLANTS
            planted, planted_outside = tree(root), tree(outside)
            status, _, err = run_contribute(root, models)
            assert tree(outside) == planted_outside, f"something outside changed ({chosen})"
            check_attack(root, outside, status, err, planted, files)
            assert not at_folder or status == 2, f"a link or file at a folder was not refused ({chosen})"
            return status

        return f"{models} missing={list(missing)} plants={plants}", ACCEPT, run

    run_cases(fuzz_seeds, "contribute with planted links", make, offset=7500)


FAULTS = (errno.ENOSPC, errno.EFBIG, errno.EIO, errno.EACCES, errno.EMFILE, errno.EROFS, "interrupt")


def test_fuzz_contribute_failing_in_the_middle(fuzz_seeds, tmp_path):
    def make(seed, rng):
        models = _models(rng)
        missing = tuple(folder for folder in FOLDERS_IT_CREATES if rng.random() < 0.5)
        fault = FAULTS[int(rng.integers(len(FAULTS)))]
        where = float(rng.random())
        case = tmp_path / f"seed{seed}"

        def run():
            discover = fake_checkout(case / "discover", missing=missing)
            with os_calls() as calls:
                contribute(discover, models)
            index = int(where * len(calls))
            root = fake_checkout(case / "TopoBench", missing=missing)
            before = tree(root)
            error = KeyboardInterrupt() if fault == "interrupt" else OSError(fault, errno.errorcode[fault])
            with pytest.raises((OSError, KeyboardInterrupt)) as raised, os_calls(index, error):
                contribute(root, models)
            if fault != "interrupt":
                assert NOTHING_CHANGED in str(raised.value), str(raised.value)
                assert raised.value.errno == fault
            assert tree(root) == before, f"the checkout changed after a failure of call {index} ({calls[index]})"
            return index

        return f"{models} missing={list(missing)} fault={fault} at {where:.2f}", ACCEPT, run

    run_cases(fuzz_seeds, "contribute failing in the middle", make, offset=7600)
