"""TopoBench-native backbones, the batch mapping, and `topobench contribute` (no TopoBench needed).

TopoBench's ``NNModuleAutoTest`` is mirrored by :func:`nn_module_auto_test` (same rules: a
non-tuple result is wrapped in a tuple, at least one element must be a tensor, two seeded calls
must agree, shapes in order); the written TopoBench files are loaded the way TopoBench's
auto-discovery loads them (``spec_from_file_location``), the wrappers against a minimal
stand-in of ``topobench.nn.wrappers.base``.
"""

import ast
import contextlib
import copy
import errno
import importlib.util
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import yaml
from torch import nn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from tests.test_files_replace_all import os_calls, tree
from topomodelx_attention.cli import main
from topomodelx_attention.datasets.tu import load_tu_dataset
from topomodelx_attention.harness.config import CONFIG_DIR
from topomodelx_attention.harness.topobench import (
    CellularTransformerBackbone,
    NSimplicialBackbone,
    OrderKTokenGTBackbone,
    TopoBenchWrapper,
    backbone_inputs,
    complex_from_tensors,
)
from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS, contribute, plan
from topomodelx_attention.harness.topobench.vendor import vendored_files
from topomodelx_attention.transforms import CellCycleLifting

HIDDEN = 8
PIPELINE = "test/pipeline/test_pipeline.py"


# ----------------------------------------------------------------------------------------------
# helpers: a TopoBench-like batch, TopoBench's NNModuleAutoTest rules, a fake checkout
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lifted(tmp_path_factory):
    dataset = load_tu_dataset("MUTAG", root=tmp_path_factory.mktemp("mutag"))
    return CellCycleLifting().lift_many([dataset[i] for i in range(4)])


def topobench_batch(lifted, hidden=HIDDEN, num=4):
    """A plain PyG Data (not ComplexData) as TopoBench's encoder hands it to the wrapper."""
    batch = next(iter(DataLoader(lifted[:num], batch_size=num)))
    keys = ["y", "batch_0", "batch_1", "batch_2", "adjacency_0", "coadjacency_1",
            "coadjacency_2", "incidence_1", "incidence_2"]
    plain = Data(**{key: batch[key] for key in keys})
    generator = torch.Generator().manual_seed(0)
    for rank in range(3):  # what TopoBench's AllCellFeatureEncoder produces
        plain[f"x_{rank}"] = torch.randn(batch[f"x_{rank}"].shape[0], hidden, generator=generator)
    plain["incidence_1"] = -plain["incidence_1"]  # signs must not matter
    return plain


def nn_module_auto_test(module, init, forward, shapes=None):
    """TopoBench's NNModuleAutoTest.run for one entry (test/_utils/nn_module_auto_test.py)."""
    model = module(*init) if isinstance(init, tuple) else module(**init)
    clone = tuple(a.clone() if hasattr(a, "clone") else copy.deepcopy(a) for a in forward)
    torch.manual_seed(0)
    result = model(*forward)
    torch.manual_seed(0)
    result_2 = model(*clone)
    if type(result) is not tuple:
        result, result_2 = (result,), (result_2,)
    assert any(isinstance(r, torch.Tensor) for r in result), "assert_return_tensor"
    assert len(result) == len(result_2)
    for r1, r2 in zip(result, result_2):
        assert torch.equal(r1, r2) if isinstance(r1, torch.Tensor) else r1 == r2
    if shapes is not None:
        tensors = [t for t in result if isinstance(t, torch.Tensor)]
        assert [tuple(t.shape) for t in tensors] == [tuple(s) for s in shapes]
    return result


def backbone_args(batch, model):
    x = tuple(batch[f"x_{r}"] for r in range(model.max_rank + 1))
    neighborhoods = {key: batch[key] for key in model.neighborhood_keys}
    index = tuple(batch[f"batch_{r}"] for r in range(model.max_rank + 1))
    return x, neighborhoods, index


TOPOBENCH_PIPELINE = '''"""Test pipeline for a particular dataset and model."""

import hydra
from test._utils.simplified_pipeline import run


DATASET = "graph/MUTAG"                                                 # ADD YOUR DATASET HERE
MODELS   = ["graph/gcn", "cell/topotune", "simplicial/topotune"]        # ADD ONE OR SEVERAL MODELS OF YOUR CHOICE HERE


class TestPipeline:
    """Test pipeline for a particular dataset and model."""
'''
TOPOBENCH_PYPROJECT = '''[project]
name = "TopoBench"
dependencies=[
    "torch==2.3.0",
    "topomodelx @ git+https://github.com/pyt-team/TopoModelX.git",
    "torch-cluster",
]

[project.optional-dependencies]
test = ["pytest"]
'''
TOPOBENCH_README = '''# TopoBench

### Simplicial Complexes
| Model | Reference |
| --- | --- |
| SAN | [Simplicial Attention Neural Networks](https://arxiv.org/pdf/2203.07485) |

### Cellular Complexes
| Model | Reference |
| --- | --- |
| CWN | [Weisfeiler and Lehman Go Cellular: CW Networks](https://arxiv.org/pdf/2106.12575) |

### Hypergraphs
| Model | Reference |
'''
#: TopoBench's ruff settings (its pyproject.toml, March 2026); it lints only topobench/.
TOPOBENCH_RUFF = '''[tool.ruff]
target-version = "py311"
extend-exclude = ["test", "tutorials", "notebooks"]
line-length = 79

[tool.ruff.lint]
select = ["F", "E", "W", "I", "UP", "B", "PIE", "Q", "RET", "SIM", "NPY", "PERF"]
ignore = ["E501", "RET504", "RET505", "NPY002", "UP038", "W293", "PERF203"]

[tool.ruff.lint.pydocstyle]
convention = "numpy"
'''


def fake_checkout(root, *, missing=(), readme=TOPOBENCH_README):
    """An empty TopoBench layout at ``root``: the folders, test_pipeline.py, pyproject.toml, README.

    ``missing``: folders left out (``contribute`` creates them).
    """
    for domain in ("cell", "simplicial"):
        for folder in ("topobench/nn/backbones", "topobench/nn/wrappers", "configs/model",
                       "test/nn/backbones", "test/nn/wrappers"):
            if f"{folder}/{domain}" not in missing:
                (root / folder / domain).mkdir(parents=True)
    for folder in [root / "topobench", *(root / "topobench").rglob("*")]:
        (folder / "__init__.py").write_text("")  # packages, as in TopoBench (ruff's isort needs them)
    (root / "test" / "pipeline").mkdir(parents=True)
    (root / "test" / "pipeline" / "test_pipeline.py").write_text(TOPOBENCH_PIPELINE)
    (root / "pyproject.toml").write_text(TOPOBENCH_PYPROJECT)
    (root / "README.md").write_text(readme)
    return root


@pytest.fixture
def checkout(tmp_path):
    """An empty TopoBench layout: the folders, test_pipeline.py, pyproject.toml and README."""
    return fake_checkout(tmp_path / "TopoBench")


def load_module(path, name):
    """Load a file as TopoBench's auto-discovery does (``spec_from_file_location``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def discovered(module):
    """Classes TopoBench's ``discover_backbones`` / ``discover_wrappers`` export from a module."""
    return {
        name: obj for name, obj in inspect.getmembers(module)
        if inspect.isclass(obj) and obj.__module__ == module.__name__ and not name.startswith("_")
    }


ABSTRACT_WRAPPER = '''
"""Minimal stand-in of topobench.nn.wrappers.base (same interface as TopoBench's)."""
from abc import ABC, abstractmethod

import torch


class AbstractWrapper(ABC, torch.nn.Module):
    def __init__(self, backbone, **kwargs):
        super().__init__()
        self.backbone = backbone
        self.dimensions = range(kwargs["num_cell_dimensions"])
        self.residual_connections = kwargs.get("residual_connections", True)
        for i in self.dimensions:
            setattr(self, f"ln_{i}", torch.nn.LayerNorm(kwargs["out_channels"]))

    def __call__(self, batch):
        model_out = self.forward(batch)
        if self.residual_connections:
            for i in self.dimensions:
                if f"x_{i}" in batch and f"x_{i}" in model_out:
                    residual = model_out[f"x_{i}"] + batch[f"x_{i}"]
                    model_out[f"x_{i}"] = getattr(self, f"ln_{i}")(residual)
        return model_out

    @abstractmethod
    def forward(self, batch):
        """Forward pass."""
'''


@pytest.fixture
def topobench_on_path(checkout, monkeypatch):
    """The checkout's ``topobench`` importable, with a stand-in ``topobench.nn.wrappers.base``; removed after."""
    (checkout / "topobench" / "nn" / "wrappers" / "base.py").write_text(ABSTRACT_WRAPPER)
    monkeypatch.syspath_prepend(str(checkout))
    for name in [m for m in sys.modules if m == "topobench" or m.startswith("topobench.")]:
        monkeypatch.delitem(sys.modules, name)
    yield checkout
    for name in [m for m in sys.modules if m == "topobench" or m.startswith("topobench.")]:
        del sys.modules[name]


@pytest.fixture
def few_vendored_files(monkeypatch):
    """``contribute`` writes 2 of the vendored files: the tests that attack every write stay fast.

    What is attacked is the writing (one code path for every file); the vendored files
    themselves are checked by the tests of the written files.
    """
    files = dict(list(vendored_files().items())[:2])
    monkeypatch.setattr("topomodelx_attention.harness.topobench.contribute.vendored_files", lambda: files)
    return files


# ----------------------------------------------------------------------------------------------
# the backbone contract: tensors in, a tuple of tensors out (TopoBench's NNModuleAutoTest)
# ----------------------------------------------------------------------------------------------
BACKBONES = [
    (CellularTransformerBackbone, {"n_layers": 1, "heads": 2}),
    (CellularTransformerBackbone, {"n_layers": 1, "heads": 2, "attention": "general", "kind": "dense"}),
    (OrderKTokenGTBackbone, {"n_layers": 1, "heads": 2, "node_id_dim": 4, "identifiers": "sum"}),
    (OrderKTokenGTBackbone, {"n_layers": 1, "heads": 2, "node_id_dim": 4, "identifiers": "ordered", "max_cell_size": 20}),
    (NSimplicialBackbone, {"n_layers": 2, "heads": 2, "simplicial_options": {"kv_bias": True}}),
]


def test_the_auto_test_rejects_a_backbone_returning_a_list(lifted):
    # the old whole-batch backbones returned [h_0, h_1, h_2]: TopoBench's harness wraps a
    # non-tuple in a tuple and finds no tensor in it (assert_return_tensor)
    class ListBackbone(nn.Module):
        def forward(self, x, neighborhoods, batch=None):
            return list(x)

    x, neighborhoods, index = backbone_args(topobench_batch(lifted), CellularTransformerBackbone(HIDDEN, HIDDEN))
    with pytest.raises(AssertionError, match="assert_return_tensor"):
        nn_module_auto_test(ListBackbone, (), (x, neighborhoods, index))


@pytest.mark.parametrize(("cls", "options"), BACKBONES)
def test_backbones_pass_topobench_auto_test_on_tensors(lifted, cls, options):
    batch = topobench_batch(lifted)
    init = {"in_channels": HIDDEN, "hidden_channels": HIDDEN, "num_cell_dimensions": 3, **options}
    args = backbone_args(batch, cls(**init))
    shapes = [tuple(xr.shape) for xr in args[0]]
    result = nn_module_auto_test(cls, init, args, shapes)
    assert type(result) is tuple and all(torch.isfinite(h).all() for h in result)


@pytest.mark.parametrize(("cls", "options"), BACKBONES)
def test_every_backbone_parameter_gets_a_gradient(lifted, cls, options):
    # DDP raises on parameters without gradient: no unused readout inside a backbone
    batch = topobench_batch(lifted)
    model = cls(HIDDEN, 12, num_cell_dimensions=3, **options)
    sum(h.square().sum() for h in model(*backbone_args(batch, model))).backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    assert not missing, missing


@pytest.mark.parametrize(("cls", "options"), [BACKBONES[0], BACKBONES[4]])
def test_batched_backbone_equals_one_complex_at_a_time(lifted, cls, options):
    batch = topobench_batch(lifted)
    model = cls(HIDDEN, HIDDEN, num_cell_dimensions=3, **options).eval()
    x, neighborhoods, index = backbone_args(batch, model)
    with torch.no_grad():
        together = model(x, neighborhoods, index)
        for i in range(4):
            keep = [index[r] == i for r in range(3)]
            sub = {}
            for key, matrix in neighborhoods.items():
                rank = int(key.rsplit("_", 1)[1])
                rows = keep[rank - 1] if key.startswith("incidence") else keep[rank]
                sub[key] = matrix.to_dense()[rows][:, keep[rank]]
            alone = model(tuple(xr[k] for xr, k in zip(x, keep)), sub)  # batch=None: one complex
            for r in range(3):
                assert torch.allclose(alone[r], together[r][keep[r]], atol=1e-5), (i, r)


def test_backbones_take_no_out_channels():
    for cls in (CellularTransformerBackbone, NSimplicialBackbone, OrderKTokenGTBackbone):
        with pytest.raises(TypeError, match="readout"):
            cls(HIDDEN, HIDDEN, out_channels=2)
    with pytest.raises(ValueError, match="max_rank"):
        CellularTransformerBackbone(HIDDEN, HIDDEN, max_rank=2, num_cell_dimensions=4)


def test_backbone_refuses_missing_ranks_and_pe(lifted):
    batch = topobench_batch(lifted)
    model = CellularTransformerBackbone(HIDDEN, HIDDEN, n_layers=1, heads=2, pe_channels=3)
    x, neighborhoods, index = backbone_args(batch, model)
    with pytest.raises(ValueError, match=r"ranks 0\.\.2"):
        model(x[:2], neighborhoods, index[:2])
    with pytest.raises(ValueError, match="pe_channels=3"):
        model(x, neighborhoods, index)
    pe = tuple(torch.randn(xr.shape[0], 3) for xr in x)
    assert [h.shape[0] for h in model(x, neighborhoods, index, pe)] == [xr.shape[0] for xr in x]
    # a backbone built without pe_channels refuses positional encodings (never drops them)
    for plain in (
        CellularTransformerBackbone(HIDDEN, HIDDEN, n_layers=1, heads=2),
        NSimplicialBackbone(HIDDEN, HIDDEN, n_layers=1),
    ):
        x, neighborhoods, index = backbone_args(batch, plain)
        with pytest.raises(ValueError, match="built without pe_channels"):
            plain(x, neighborhoods, index, pe)
        assert len(plain(x, neighborhoods, index, (None,) * len(x))) == len(x)


def test_complex_from_tensors_names_the_bad_tensor(lifted):
    batch = topobench_batch(lifted)
    x = tuple(batch[f"x_{r}"] for r in range(3))
    index = tuple(batch[f"batch_{r}"] for r in range(3))
    good = {"incidence_1": batch.incidence_1, "incidence_2": batch.incidence_2}
    data = complex_from_tensors(x, good, index)
    assert data.num_complexes == 4 and data.shape.tolist()[0] == [
        int((index[r] == 0).sum()) for r in range(3)
    ]
    assert set(data.incidence_1.coalesce().values().tolist()) == {1.0}  # TopoBench's signs dropped
    with pytest.raises(ValueError, match="batch_1"):
        complex_from_tensors(x, good, (index[0], index[1][:-1], index[2]))
    with pytest.raises(ValueError, match="incidence_2"):
        complex_from_tensors(x, {"incidence_2": batch.incidence_1}, index)
    with pytest.raises(ValueError, match="x_1"):
        complex_from_tensors((x[0], x[1][:, 0], x[2]), good, index)
    with pytest.raises(TypeError, match="tuple"):
        complex_from_tensors(x[0], good, index)
    with pytest.raises(TypeError, match="incidence_1"):
        complex_from_tensors(x, {"incidence_1": [[1]]}, index)


# ----------------------------------------------------------------------------------------------
# the batch mapping (backbone_inputs) and this package's wrapper
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("cls", "options"), [BACKBONES[0], BACKBONES[2], BACKBONES[4]])
def test_wrapper_pads_the_ranks_topobench_expects_but_the_lifting_lacks(lifted, cls, options):
    # max_dim_if_lifted=3 (TopoBench's default) gives num_cell_dimensions=4 while the cycle
    # lifting stops at rank 2: the wrapper returns an empty x_3, the batch gains incidence_3
    batch = topobench_batch(lifted)
    wrapper = TopoBenchWrapper(cls(HIDDEN, HIDDEN, num_cell_dimensions=4, **options),
                               out_channels=HIDDEN, num_cell_dimensions=4)
    out = wrapper(batch)
    assert set(out) == {"labels", "batch_0", "x_0", "x_1", "x_2", "x_3"}
    assert out["x_3"].shape == (0, HIDDEN)
    assert batch["incidence_3"].shape == (batch["x_2"].shape[0], 0)
    for rank in range(3):
        assert out[f"x_{rank}"].shape == batch[f"x_{rank}"].shape
        assert torch.isfinite(out[f"x_{rank}"]).all()
    # residual connection + LayerNorm, as TopoBench's AbstractWrapper does
    assert torch.allclose(out["x_0"].mean(-1), torch.zeros(out["x_0"].shape[0]), atol=1e-5)


def test_backbone_inputs_name_what_the_batch_lacks(lifted):
    model = CellularTransformerBackbone(HIDDEN, HIDDEN, n_layers=1, heads=2)
    batch = topobench_batch(lifted)
    del batch["coadjacency_1"]
    with pytest.raises(ValueError, match="coadjacency_1"):
        backbone_inputs(batch, model)
    batch = topobench_batch(lifted)
    del batch["batch_1"]
    with pytest.raises(ValueError, match="batch_1"):
        backbone_inputs(batch, model)
    one = topobench_batch(lifted, num=1)  # a single complex needs no batch vectors
    for r in range(3):
        del one[f"batch_{r}"]
    assert all(int(v.sum()) == 0 for v in backbone_inputs(one, model)["batch"])
    with pytest.raises(ValueError, match="pe_0"):
        backbone_inputs(topobench_batch(lifted), CellularTransformerBackbone(HIDDEN, HIDDEN, pe_channels=2))


def test_order_k_tokengt_evaluation_is_deterministic(lifted):
    batch = topobench_batch(lifted)
    model = OrderKTokenGTBackbone(HIDDEN, 16, n_layers=1, heads=2, node_id_dim=8, num_cell_dimensions=3)
    args = backbone_args(batch, model)
    model.eval()  # evaluation identifiers come from a fixed seed
    with torch.no_grad():
        first, second = model(*args), model(*args)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    model.train()  # training identifiers are drawn again every step
    torch.manual_seed(1)
    assert not all(torch.equal(a, b) for a, b in zip(first, model(*args)))


def test_registered_pe_builds_from_topobench_kwargs_and_runs_on_topobench_data(lifted):
    from topomodelx_attention.harness.topobench import (
        TOPOBENCH_TRANSFORMS,
        register_topobench_transforms,
    )

    registry = {}
    assert register_topobench_transforms(registry) == list(TOPOBENCH_TRANSFORMS)
    # what TopoBench's DataTransform does: TRANSFORMS[name](transform_name=..., **config)
    pe = registry["CellularRandomWalkPE"](transform_name="CellularRandomWalkPE",
                                          transform_type="data manipulation", dim=4)
    plain = Data(**{k: lifted[0][k] for k in lifted[0].keys() if k.startswith(("x_", "incidence_"))})
    out = pe(plain)
    for rank in range(3):
        assert out[f"pe_{rank}"].shape == (lifted[0][f"x_{rank}"].shape[0], 4)
        assert torch.isfinite(out[f"pe_{rank}"]).all()


# ----------------------------------------------------------------------------------------------
# `topobench contribute`: the files of a TopoBench pull request
# ----------------------------------------------------------------------------------------------
def expected_files(contribution):
    domain, model = contribution.domain, contribution.model
    return {
        f"topobench/nn/backbones/{domain}/{model}.py",
        f"topobench/nn/wrappers/{domain}/{model}_wrapper.py",
        f"test/nn/backbones/{domain}/test_{model}.py",
        f"test/nn/wrappers/{domain}/test_{model}_wrapper.py",
        *(f"configs/model/{domain}/{name}.yaml" for name in contribution.configs),
        *vendored_files(),  # the model code the backbone and wrapper import
    }


@pytest.mark.parametrize("model", sorted(CONTRIBUTIONS))
def test_contribute_writes_exactly_the_pull_request_files(checkout, model):
    before = {p.relative_to(checkout).as_posix() for p in checkout.rglob("*") if p.is_file()}
    changes = contribute(checkout, [model])
    contribution = CONTRIBUTIONS[model]
    after = {p.relative_to(checkout).as_posix() for p in checkout.rglob("*") if p.is_file()}
    assert after - before == expected_files(contribution)
    assert {c.path for c in changes if c.action == "create"} == expected_files(contribution)
    assert {c.path for c in changes if c.action == "update"} == {"test/pipeline/test_pipeline.py", "README.md"}
    for path, source in contribution.files().items():
        assert (checkout / path).read_text() == source.read_text()
    # the pipeline-test entry and the README row; no dependency (the pull request carries the code)
    pipeline = (checkout / "test/pipeline/test_pipeline.py").read_text()
    models = ast.literal_eval(re.search(r"^MODELS\s*=\s*(\[.*?\])", pipeline, flags=re.M).group(1))
    assert models == ["graph/gcn", "cell/topotune", "simplicial/topotune", contribution.pipeline_model]
    assert "# ADD ONE OR SEVERAL MODELS" in pipeline  # the rest of the line is kept
    assert (checkout / "pyproject.toml").read_text() == TOPOBENCH_PYPROJECT
    readme = (checkout / "README.md").read_text()
    section = readme.split(contribution.readme_section, 1)[1].split("###", 1)[0]
    assert contribution.readme_row in section
    # a second run changes nothing
    assert {c.action for c in contribute(checkout, [model])} == {"unchanged"}


def test_contribute_all_models_at_once(checkout):
    contribute(checkout, list(CONTRIBUTIONS))
    pipeline = (checkout / "test/pipeline/test_pipeline.py").read_text()
    for contribution in CONTRIBUTIONS.values():
        assert f'"{contribution.pipeline_model}"' in pipeline
        assert all((checkout / p).is_file() for p in expected_files(contribution))
    assert "topomodelx-attention" not in (checkout / "pyproject.toml").read_text()


def test_contribute_refuses_before_writing_anything(checkout, tmp_path):
    target = checkout / "topobench/nn/wrappers/cell/cellular_transformer_wrapper.py"
    target.write_text("# someone's own wrapper\n")
    with pytest.raises(ValueError, match=r"cellular_transformer_wrapper\.py exists with other content"):
        contribute(checkout, ["cellular_transformer"])
    assert not (checkout / "topobench/nn/backbones/cell/cellular_transformer.py").exists()
    assert target.read_text() == "# someone's own wrapper\n"
    changes = contribute(checkout, ["cellular_transformer"], force=True)
    assert "overwrite" in {c.action for c in changes} and "someone" not in target.read_text()
    with pytest.raises(ValueError, match="unknown --model"):
        plan(checkout, ["gcn"])
    with pytest.raises(ValueError, match="not a TopoBench checkout"):
        plan(tmp_path / "nowhere", ["cellular_transformer"])
    (checkout / "test/pipeline/test_pipeline.py").write_text("DATASET = 'graph/MUTAG'\n")
    with pytest.raises(ValueError, match=r"test_pipeline\.py: found no `MODELS"):
        plan(checkout, ["tokengt"])


def test_contribute_dry_run_and_requirement(checkout):
    changes = contribute(checkout, ["n_simplicial"], dry_run=True, requirement="topomodelx-attention @ git+https://example.org/tma.git")
    assert not (checkout / "topobench/nn/backbones/simplicial/n_simplicial.py").exists()
    assert any(c.path == "pyproject.toml" and "example.org" in c.content for c in changes)


def test_cli_topobench_contribute(checkout, tmp_path, capsys):
    assert main(["topobench", "contribute", "--topobench", str(checkout), "--model", "all"]) == 0
    out = capsys.readouterr().out
    assert "create    topobench/nn/backbones/cell/cellular_transformer.py" in out
    assert "update    test/pipeline/test_pipeline.py" in out
    assert main(["topobench", "contribute", "--topobench", str(tmp_path), "--model", "tokengt"]) == 2
    assert "not a TopoBench checkout" in capsys.readouterr().err


def test_cli_help_names_every_contribution(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["topobench", "contribute", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for name in CONTRIBUTIONS:
        assert name in text


# ----------------------------------------------------------------------------------------------
# `topobench contribute` is all or nothing and never writes through a link: the files and
# folders it writes are found by running it (not listed here), then attacked one by one
# ----------------------------------------------------------------------------------------------
NOTHING_CHANGED = "nothing in the checkout was changed"


def run_contribute(root, models=("all",), *extra):
    """Run the real command; returns (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["topobench", "contribute", "--topobench", str(root), *extra]
    for model in models:
        argv += ["--model", model]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def contribution_writes(folder, models=("all",), missing=()):
    """Find what the command writes by running it on a fresh checkout in ``folder``.

    Returns the checkout-relative files it creates or replaces, the folders it creates, and
    every folder between the checkout and those files. Anything else it leaves behind
    (a temporary file, a backup) fails here.
    """
    root = fake_checkout(folder, missing=missing)
    before = tree(root)
    status, _, err = run_contribute(root, models)
    assert status == 0, err
    after = tree(root)
    changed = {path for path in after if after[path] != before.get(path)}
    files = {path for path in changed if after[path][0] == "file"}
    created = changed - files
    assert all(after[path][0] == "folder" and path not in before for path in created), created
    assert not set(before) - set(after), "the command removed something"
    on_the_way = {"/".join(path.split("/")[:depth]) for path in files for depth in range(1, path.count("/") + 1)}
    assert created <= on_the_way, created - on_the_way
    return sorted(files), sorted(created), sorted(on_the_way)


def plant(root, outside, relative, how):
    """Plant ``how`` at ``root/relative``, its current content moved into ``outside``.

    ``link``: a link to that content (or, for a file not there yet, to a file of other
    content outside); ``dangling``: a link to a path outside that does not exist; ``file``:
    a plain file in place of a folder; ``folder``: a folder in place of a file.
    """
    target = root / relative
    flat = relative.replace("/", "__")
    moved = outside / flat
    if target.exists():
        shutil.move(target, moved)
    elif how == "link":
        moved.write_text("# a file outside the checkout\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    if how == "link":
        if not moved.exists():
            moved.mkdir()
        target.symlink_to(moved)
    elif how == "dangling":
        target.symlink_to(outside / f"missing__{flat}")
    elif how == "file":
        target.write_text("a plain file where a folder should be\n")
    elif how == "folder":
        target.mkdir()
        (target / "keep.txt").write_text("someone's folder\n")
    else:
        raise ValueError(how)


def check_attack(root, outside, status, err, planted, written):
    """Nothing outside changed; either refused with the checkout unchanged, or written inside."""
    assert status in (0, 2), err
    if status == 2:
        assert NOTHING_CHANGED in err and len(err.strip().splitlines()) == 1, err
        assert tree(root) == planted, "a refused contribution changed the checkout"
    else:  # each file it wrote is a plain file now (one it left alone, e.g. a README it could not read, is as planted)
        now = tree(root)
        for path in written:
            kind = now.get(path, ("missing",))[0]
            assert kind == "file" or now.get(path) == planted.get(path), f"{path} is {now.get(path)} after the run"


@pytest.mark.parametrize("how", ["link", "dangling", "folder"])
def test_contribute_never_writes_through_a_link_planted_at_any_file_it_writes(tmp_path, how, few_vendored_files):
    files, _, _ = contribution_writes(tmp_path / "discover")
    assert len(files) >= 19 + len(few_vendored_files) and {"README.md", PIPELINE} <= set(files)
    for index, relative in enumerate(files):
        root, outside = fake_checkout(tmp_path / f"c{index}"), tmp_path / f"outside{index}"
        outside.mkdir()
        plant(root, outside, relative, how)
        planted, planted_outside = tree(root), tree(outside)
        status, _, err = run_contribute(root)
        assert tree(outside) == planted_outside, f"{how} at {relative}: something outside changed"
        check_attack(root, outside, status, err, planted, [] if how == "folder" else files)
        if how == "folder":
            assert status == 2 and "is a folder where the pull request puts a file" in err, err


@pytest.mark.parametrize("how", ["link", "dangling", "file"])
def test_contribute_refuses_a_link_or_file_at_any_folder_it_writes_in_before_writing(tmp_path, how, few_vendored_files):
    missing = ("test/nn/wrappers/cell", "configs/model/simplicial")  # folders it must create
    _, created, folders = contribution_writes(tmp_path / "discover", missing=missing)
    assert set(missing) <= set(created)
    assert {"topobench", "configs/model/cell", "test/pipeline"} <= set(folders)
    for index, relative in enumerate(folders):
        root = fake_checkout(tmp_path / f"c{index}", missing=missing)
        outside = tmp_path / f"outside{index}"
        outside.mkdir()
        plant(root, outside, relative, how)
        planted, planted_outside = tree(root), tree(outside)
        status, _, err = run_contribute(root)
        assert tree(outside) == planted_outside, f"{how} at {relative}/: something outside changed"
        assert status == 2, f"{how} at {relative}/ was not refused: {err}"
        check_attack(root, outside, status, err, planted, [])


def test_contribute_replaces_links_at_all_its_files_at_once_and_changes_nothing_outside(tmp_path):
    files, _, _ = contribution_writes(tmp_path / "discover")
    expected = tree(tmp_path / "discover")
    root, outside = fake_checkout(tmp_path / "TopoBench"), tmp_path / "outside"
    outside.mkdir()
    for relative in files:
        plant(root, outside, relative, "link" if (root / relative).exists() else "dangling")
    before_outside = tree(outside)
    status, _, err = run_contribute(root)
    assert status == 0, err
    assert tree(outside) == before_outside
    now = tree(root)
    assert {path: now[path][:2] for path in files} == {path: expected[path][:2] for path in files}


def test_a_failure_at_any_write_of_contribute_leaves_the_checkout_byte_for_byte(tmp_path, few_vendored_files):
    """Every os call that writes fails in turn (disk full): the checkout is exactly as before.

    One model (every call of all three: the fuzz suite, at random calls).
    """
    missing, models = ("test/nn/wrappers/cell",), ["cellular_transformer"]
    discover = fake_checkout(tmp_path / "discover", missing=missing)
    with os_calls() as calls:
        contribute(discover, models)
    assert {"mkdir", "open", "write", "fsync", "replace"} <= set(calls)
    root = fake_checkout(tmp_path / "TopoBench", missing=missing)
    before = tree(root)
    for index, name in enumerate(calls):
        failure = OSError(errno.ENOSPC, "No space left on device")
        with pytest.raises(OSError, match=NOTHING_CHANGED) as raised, os_calls(index, failure):
            contribute(root, models)
        assert raised.value.errno == errno.ENOSPC and str(root) in str(raised.value)
        assert tree(root) == before, f"the checkout changed after a failure of call {index} ({name})"


def test_contribute_under_a_file_size_limit_changes_nothing(tmp_path):
    """`ulimit -f 8` (a real RLIMIT_FSIZE in a child process): exit 2, every byte kept."""
    resource = pytest.importorskip("resource")
    readme = TOPOBENCH_README + "".join(f"| Model{i} | [a paper](https://example.org/{i}) |\n" for i in range(800))
    assert len(readme.encode()) > 30_000
    root = fake_checkout(tmp_path / "TopoBench", readme=readme)
    before = tree(root)
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (Python >= 3.12)
        pid = os.fork()
    if pid == 0:  # the child: the command under the limit, its output into the pipe
        status = 3
        try:
            os.close(read)
            stream = io.TextIOWrapper(os.fdopen(write, "wb"), line_buffering=True)
            sys.stdout = sys.stderr = stream
            resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
            status = main(["topobench", "contribute", "--topobench", str(root), "--model", "all"])
            stream.flush()
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        err = pipe.read()
    _, code = os.waitpid(pid, 0)
    assert os.WIFEXITED(code) and os.WEXITSTATUS(code) == 2, err
    assert "File too large" in err and NOTHING_CHANGED in err, err
    assert tree(root) == before
    assert len((root / "README.md").read_bytes()) == len(readme.encode())


BAD_REQUIREMENTS = {
    "newline": "topomodelx-attention>=0.1.0\n[tool.evil]",
    "toml injection": 'x"]\n[tool.evil]\ncmd = "rm -rf ~"\n#',
    "quote injection": 'x", "evil>=0',
    "carriage return": "topomodelx-attention\r>=0.1.0",
    "empty": "",
    "spaces": "   ",
    "no name": ">=0.1.0",
    "not PEP 508": "topomodelx-attention>=",
    "two requirements": "topomodelx-attention numpy",
    "escaped quote in a marker": "topomodelx-attention; python_version>='3\\'",
}


@pytest.mark.parametrize("value", BAD_REQUIREMENTS.values(), ids=BAD_REQUIREMENTS)
def test_requirement_must_be_one_pep508_requirement_on_one_line(checkout, value, capsys):
    before = tree(checkout)
    with pytest.raises(ValueError, match=r"--requirement .*(empty|PEP 508)"):
        plan(checkout, ["tokengt"], requirement=value)
    with pytest.raises(ValueError, match=NOTHING_CHANGED):
        contribute(checkout, ["tokengt"], requirement=value)
    assert main(["topobench", "contribute", "--topobench", str(checkout), "--model", "tokengt",
                 "--requirement", value]) == 2
    err = capsys.readouterr().err
    assert "--requirement" in err and len(err.strip().splitlines()) == 1, err
    assert tree(checkout) == before
    with pytest.raises(TypeError, match="must be a string"):
        plan(checkout, ["tokengt"], requirement=["topomodelx-attention"])


VALID_REQUIREMENTS = (
    "topomodelx-attention>=0.1.0",
    "topomodelx-attention[scatter]>=1; python_version>='3.11'",
    'topomodelx-attention>=1; python_version >= "3.11"',
    "topomodelx-attention @ file:///opt/wheels/topomodelx_attention-0.1.0-py3-none-any.whl",
    "  topomodelx_attention @ git+https://example.org/tma.git  ",
)


@pytest.mark.parametrize("value", VALID_REQUIREMENTS)
def test_a_pep508_requirement_is_added_once_and_pyproject_still_parses(checkout, value):
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    contribute(checkout, ["tokengt"], requirement=value)
    dependencies = tomllib.loads((checkout / "pyproject.toml").read_text())["project"]["dependencies"]
    assert dependencies[-1] == value.strip()
    assert len(dependencies) == 4
    assert {c.action for c in contribute(checkout, ["tokengt"], requirement=value)} == {"unchanged"}


# ----------------------------------------------------------------------------------------------
# the written files: they import, pass the auto-test, parse, and match each other
# ----------------------------------------------------------------------------------------------
def config_backbone(section, hidden=HIDDEN, dims=3):
    """The backbone section of a TopoBench config with its interpolations resolved."""
    values = {}
    for key, value in section.items():
        if key == "_target_":
            continue
        if isinstance(value, str) and "${" in value:
            value = {"in_channels": hidden, "hidden_channels": hidden, "num_cell_dimensions": dims}[key]
        values[key] = value
    return values


@pytest.mark.parametrize("model", sorted(CONTRIBUTIONS))
def test_written_backbones_import_and_pass_the_auto_test(topobench_on_path, lifted, model):
    checkout = topobench_on_path
    contribution = CONTRIBUTIONS[model]
    contribute(checkout, [model])
    path = checkout / f"topobench/nn/backbones/{contribution.domain}/{model}.py"
    module = load_module(path, f"{contribution.domain}.{model}")
    classes = discovered(module)
    assert list(classes) == [contribution.backbone]  # what TopoBench's discovery exports
    cls = classes[contribution.backbone]
    batch = topobench_batch(lifted)
    for name in contribution.configs:
        cfg = yaml.safe_load((checkout / f"configs/model/{contribution.domain}/{name}.yaml").read_text())
        assert cfg["backbone"]["_target_"] == f"topobench.nn.backbones.{contribution.domain}.{model}.{cls.__name__}"
        init = config_backbone(cfg["backbone"])
        init.update(n_layers=1)
        if init.get("identifiers") == "ordered":
            init.update(max_cell_size=20)  # MUTAG's basis cycles here are longer than the lifting's 18
        args = backbone_args(batch, cls(**init))
        result = nn_module_auto_test(cls, init, args, [tuple(x.shape) for x in args[0]])
        assert all(torch.isfinite(h).all() for h in result)


@pytest.mark.parametrize("model", sorted(CONTRIBUTIONS))
def test_written_wrappers_map_a_batch_to_model_out(topobench_on_path, lifted, model):
    checkout = topobench_on_path
    contribution = CONTRIBUTIONS[model]
    contribute(checkout, [model])
    domain = contribution.domain
    backbone = discovered(load_module(checkout / f"topobench/nn/backbones/{domain}/{model}.py", "b"))
    wrappers = discovered(load_module(checkout / f"topobench/nn/wrappers/{domain}/{model}_wrapper.py", "w"))
    assert list(wrappers) == [contribution.wrapper]
    cfg = yaml.safe_load((checkout / f"configs/model/{domain}/{contribution.configs[0]}.yaml").read_text())
    assert cfg["backbone_wrapper"]["_target_"] == f"topobench.nn.wrappers.{contribution.wrapper}"
    assert cfg["backbone_wrapper"]["wrapper_name"] == contribution.wrapper
    init = config_backbone(cfg["backbone"], dims=4)
    wrapper = wrappers[contribution.wrapper](
        backbone[contribution.backbone](**init), out_channels=HIDDEN, num_cell_dimensions=4,
    )
    batch = topobench_batch(lifted)
    out = wrapper(batch)
    assert set(out) == {"labels", "batch_0", "x_0", "x_1", "x_2", "x_3"}
    assert torch.equal(out["labels"], batch.y)
    for rank in range(4):
        assert out[f"x_{rank}"].shape == batch[f"x_{rank}"].shape


TOPOBENCH_RESOLVERS = {
    "get_default_metrics", "get_default_trainer", "get_default_transform",
    "get_flattened_channels", "get_required_lifting", "get_monitor_metric", "get_monitor_mode",
    "get_non_relational_out_channels", "infer_in_channels", "infer_num_cell_dimensions",
    "infer_topotune_num_cell_dimensions", "parameter_multiplication", "define_task_level",
    "oc.select", "oc.env", "oc.create", "oc.decode", "oc.deprecated", "oc.dict.keys", "oc.dict.values",
}
"""Resolvers TopoBench registers (topobench/utils/config_resolvers.py; define_task_level since its main of 2026-06) plus OmegaConf's built-in ones."""


def test_written_configs_parse_and_use_only_topobench_resolvers(checkout):
    contribute(checkout, list(CONTRIBUTIONS))
    paths = sorted((checkout / "configs" / "model").rglob("*.yaml"))
    assert len(paths) == sum(len(c.configs) for c in CONTRIBUTIONS.values())
    for path in paths:
        text = path.read_text()
        cfg = yaml.safe_load(text)
        assert cfg["_target_"] == "topobench.model.TBModel"
        assert set(cfg) >= {"model_name", "model_domain", "feature_encoder", "backbone", "backbone_wrapper", "readout"}
        assert cfg["model_name"] == path.stem and cfg["model_domain"] == path.parent.name
        assert cfg["backbone_wrapper"]["_partial_"] is True
        # node- and graph-level; "node_inductive" on inductive node tasks, as TopoBench's own configs (with "node",
        # TBModel would index the node outputs with the per-graph split masks of an inductive data set)
        assert cfg["readout"]["task_level"] == (
            "${define_task_level:${dataset.parameters.task_level},${dataset.split_params.learning_setting}}"
        )
        unknown = set(re.findall(r"\$\{([\w.]+):", text)) - TOPOBENCH_RESOLVERS
        assert not unknown, f"{path.name} uses resolvers TopoBench does not define: {unknown}"
        assert "neighborhoods" not in cfg["backbone"]  # TopoBench's liftings read that key


def test_written_tests_are_topobench_style_and_import_the_written_modules(checkout):
    contribute(checkout, list(CONTRIBUTIONS))
    for contribution in CONTRIBUTIONS.values():
        d, m = contribution.domain, contribution.model
        tests = checkout / f"test/nn/backbones/{d}/test_{m}.py"
        tree = ast.parse(tests.read_text())
        imports = {(node.module, node.level, alias.name) for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert ("_utils.nn_module_auto_test", 4, "NNModuleAutoTest") in imports
        assert (f"topobench.nn.backbones.{d}.{m}", 0, contribution.backbone) in imports
        assert any(isinstance(n, ast.FunctionDef) and n.name.startswith("test_") for n in tree.body)
        wrapper_tests = ast.parse((checkout / f"test/nn/wrappers/{d}/test_{m}_wrapper.py").read_text())
        imports = {(node.module, alias.name) for node in ast.walk(wrapper_tests)
                   if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert ("topobench.nn.wrappers", contribution.wrapper) in imports
        for node in ast.walk(tree):  # every test documents itself (numpydoc, as TopoBench's)
            if isinstance(node, ast.FunctionDef):
                assert ast.get_docstring(node), (tests.name, node.name)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
def test_written_modules_pass_topobench_lint(checkout):
    contribute(checkout, list(CONTRIBUTIONS))
    (checkout / "pyproject.toml").write_text(TOPOBENCH_RUFF)
    files = [str(p) for p in (checkout / "topobench").rglob("*.py") if p.name != "__init__.py"]
    vendored = [p for p in vendored_files() if not p.endswith("__init__.py")]
    assert len(files) == 2 * len(CONTRIBUTIONS) + len(vendored)
    for args in (["check"], ["format", "--check", "--diff"]):
        done = subprocess.run(["ruff", *args, "--config", str(checkout / "pyproject.toml"), *files],
                              cwd=checkout, capture_output=True, text=True, check=False)
        assert done.returncode == 0, textwrap.shorten(done.stdout + done.stderr, 2000)


def test_package_configs_are_the_contributed_ones():
    # the package ships exactly the configs the contributions write (TopoBench layout)
    shipped = {p.relative_to(CONFIG_DIR / "topobench" / "model").as_posix()
               for p in (CONFIG_DIR / "topobench" / "model").rglob("*.yaml")}
    written = {f"{c.domain}/{name}.yaml" for c in CONTRIBUTIONS.values() for name in c.configs}
    assert shipped == written
