"""Fuzz: the TopoBench backbone contract and the edits of `topobench contribute`.

* The three TopoBench backbones on the tensors of batches of random / degenerate complexes
  (empty complexes, single vertices, no edges, isolated vertices): a tuple of one finite tensor
  per rank with one row per cell; malformed tensors (batch vectors or incidences of the wrong
  size, 1-D features, a missing rank, a non-tensor neighbourhood, NaN features) raise
  ``ValueError`` / ``TypeError`` naming the tensor.
* The edits of TopoBench's ``test/pipeline/test_pipeline.py`` (``MODELS``) and
  ``pyproject.toml`` (``dependencies``) on random layouts: every entry kept, the new one added
  once, the result still parses; files without the list are refused naming the file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch
from torch_geometric.loader import DataLoader

from tests.fuzz.cases import ACCEPT, REJECT, assert_finite, finite_float_graph, quietly, run_cases
from topomodelx_attention.harness.topobench import (
    CellularTransformerBackbone,
    NSimplicialBackbone,
    OrderKTokenGTBackbone,
)
from topomodelx_attention.harness.topobench.contribute import _pipeline_text, _pyproject_text
from topomodelx_attention.transforms import CellCycleLifting

WIDTH = 8
BACKBONES = (
    lambda: CellularTransformerBackbone(WIDTH, WIDTH, n_layers=1, heads=2),
    lambda: CellularTransformerBackbone(WIDTH, WIDTH, n_layers=1, heads=2, attention="general", kind="dense"),
    lambda: OrderKTokenGTBackbone(WIDTH, WIDTH, n_layers=1, heads=2, node_id_dim=4, identifiers="sum"),
    lambda: NSimplicialBackbone(WIDTH, WIDTH, n_layers=1, heads=2, kernel_options={"kv_bias": True}),
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
