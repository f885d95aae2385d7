"""The model code a TopoBench pull request carries, and ``topobench check``'s failure rules.

No TopoBench is needed: the vendored tree is imported from a stand-in checkout in a fresh
interpreter that cannot import this package; the check's environment, lint and command are run
with a stand-in for ``subprocess.run``. One test runs the real check; it is skipped unless
``TOPOBENCH_CHECKOUT`` names a TopoBench git checkout and ``TOPOBENCH_VENV`` its environment.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import topomodelx_attention
from tests.harness.test_topobench import ABSTRACT_WRAPPER, fake_checkout, run_contribute
from topomodelx_attention.harness.topobench import check
from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS, contribute
from topomodelx_attention.harness.topobench.vendor import (
    SOURCE_ROOT,
    VENDOR_FOLDER,
    module_closure,
    rewrite_imports,
    vendored_files,
)

#: Run in a fresh interpreter: this package cannot be imported, the checkout is first on sys.path.
ISOLATED = '''
import json, sys

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "topomodelx_attention" or name.startswith("topomodelx_attention."):
            raise ModuleNotFoundError(f"hidden: {name}", name=name)

sys.meta_path.insert(0, Hide())
sys.path.insert(0, sys.argv[1])
import torch
from torch_geometric.data import Data
from topobench.nn.backbones.cell.cellular_transformer import CellularTransformer
from topobench.nn.backbones.cell.tokengt import TokenGT
from topobench.nn.backbones.simplicial.n_simplicial import NSimplicialTransformer
from topobench.nn.wrappers.cell.cellular_transformer_wrapper import CellularTransformerWrapper

# a triangle (0, 1, 2) and a pendant edge (2, 3): 4 vertices, 4 edges, 1 face
b1 = torch.tensor([[1., 0, 1, 0], [1, 1, 0, 0], [0, 1, 1, 1], [0, 0, 0, 1]])
b2 = torch.tensor([[1.], [1], [1], [0]])
torch.manual_seed(0)
x = (torch.randn(4, 8), torch.randn(4, 8), torch.randn(1, 8))
a0 = ((b1 @ b1.T) != 0).float().fill_diagonal_(0)
c1 = ((b1.T @ b1) != 0).float().fill_diagonal_(0)
incidences = {"incidence_1": b1.to_sparse(), "incidence_2": b2.to_sparse(), "adjacency_0": a0.to_sparse(),
              "coadjacency_1": c1.to_sparse(), "coadjacency_2": torch.zeros(1, 1).to_sparse()}
shapes = {}
for cls, options in [(CellularTransformer, {}), (TokenGT, {"node_id_dim": 4}), (NSimplicialTransformer, {})]:
    model = cls(8, 8, n_layers=1, heads=2, num_cell_dimensions=3, **options).eval()
    with torch.no_grad():
        out = model(x, {key: incidences[key] for key in model.neighborhood_keys})
    shapes[cls.__name__] = [list(h.shape) for h in out] if all(bool(torch.isfinite(h).all()) for h in out) else "nan"
wrapper = CellularTransformerWrapper(CellularTransformer(8, 8, n_layers=1, heads=2, num_cell_dimensions=3),
                                     out_channels=8, num_cell_dimensions=3)
batch = Data(x_0=x[0], x_1=x[1], x_2=x[2], y=torch.tensor([1]), batch_0=torch.zeros(4, dtype=torch.long),
             **incidences)
shapes["wrapper"] = sorted(wrapper(batch))
loaded = sorted({m.__file__ for m in sys.modules.values() if getattr(m, "__file__", None)})
print(json.dumps({"shapes": shapes, "ours": [m for m in sys.modules if m.startswith("topomodelx_attention")], "files": loaded}))
'''


def test_the_contributed_backbones_run_where_this_package_cannot_be_imported(tmp_path):
    root = fake_checkout(tmp_path / "TopoBench")
    (root / "topobench" / "nn" / "wrappers" / "base.py").write_text(ABSTRACT_WRAPPER)
    contribute(root, list(CONTRIBUTIONS))
    script = tmp_path / "isolated.py"
    script.write_text(ISOLATED)
    done = subprocess.run(
        [sys.executable, "-I", str(script), str(root)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ours"] == []  # nothing of this package was imported
    # the files of the vendored tree were run, and no file of this package's source (the venv's own
    # path may contain the package name, so the test compares folders, not names)
    package = str(Path(topomodelx_attention.__file__).resolve().parent) + os.sep
    assert any(f.startswith(str(root / VENDOR_FOLDER)) for f in result["files"])
    assert [f for f in result["files"] if os.path.isabs(f) and str(Path(f).resolve()).startswith(package)] == []
    assert result["shapes"] == {
        "CellularTransformer": [[4, 8], [4, 8], [1, 8]],
        "TokenGT": [[4, 8], [4, 8], [1, 8]],
        "NSimplicialTransformer": [[4, 8], [4, 8], [1, 8]],
        "wrapper": ["batch_0", "labels", "x_0", "x_1", "x_2"],
    }


def _without_our_imports(tree: ast.AST) -> str:
    """The module's AST with the imports of this package (absolute or relative) removed."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                kept = [
                    n for n in block
                    if not (isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("topomodelx_attention")))
                ]
                setattr(node, name, kept or [ast.Pass()])
    return ast.dump(tree)


def test_vendored_modules_are_the_package_source_but_for_imports_and_header():
    files = vendored_files()
    modules = module_closure()
    assert "topomodelx_attention.harness.topobench.backbones" in modules
    assert not any(m.startswith(("topomodelx_attention.harness.training", "topomodelx_attention.datasets")) for m in modules)
    version = topomodelx_attention.__version__
    for module in modules:
        source = SOURCE_ROOT.joinpath(*module.split(".")).with_suffix(".py")
        name = module.removeprefix("topomodelx_attention.harness.topobench.").removeprefix("topomodelx_attention.")
        text = files[f"{VENDOR_FOLDER}/{name.replace('.', '/')}.py"]
        assert text.startswith(f"# Vendored from topomodelx-attention {version} (MIT License), file topomodelx_attention/")
        assert "# fmt: off\n# ruff: noqa\n" in text
        tree = ast.parse(text)
        ours = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("topomodelx_attention")]
        assert not ours, f"{module} still imports the package"
        assert _without_our_imports(tree) == _without_our_imports(ast.parse(source.read_text())), module
    folders = {str(Path(p).parent) for p in files}
    assert all(f"{folder}/__init__.py" in files for folder in folders)


def _package(root: Path, files: dict[str, str]) -> Path:
    """A stand-in package ``topomodelx_attention`` under ``root`` with ``files``."""
    for relative, text in files.items():
        path = root / "topomodelx_attention" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_rewrite_imports_follows_re_exports_and_keeps_indentation(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "data/__init__.py": "from topomodelx_attention.data.core import Complex, pattern\n",
        "data/core.py": "Complex = pattern = None\n",
        "data/extra.py": "helper = None\n",
        "nn/__init__.py": "",
        "nn/cell/__init__.py": "from topomodelx_attention.nn.cell.model import Model\n",
        "nn/cell/model.py": "Model = None\n",
        "harness/__init__.py": "", "harness/topobench/__init__.py": "",
        "harness/topobench/backbones.py": """\
            from topomodelx_attention.data import Complex as C, pattern  # noqa: F401
            from topomodelx_attention.data import extra


            def build():
                from topomodelx_attention.nn.cell import Model
                return Model
            """,
    })
    module = "topomodelx_attention.harness.topobench.backbones"
    text = rewrite_imports((root / "topomodelx_attention/harness/topobench/backbones.py").read_text(), module, root)
    assert text.splitlines()[:2] == ["from .data.core import Complex as C, pattern", "from .data import extra"]
    assert "    from .nn.cell.model import Model\n    return Model\n" in text
    assert module_closure((module,), root) == [
        "topomodelx_attention.data.core", "topomodelx_attention.data.extra",
        module, "topomodelx_attention.nn.cell.model",
    ]
    nested = rewrite_imports("from topomodelx_attention.data.core import Complex\n", "topomodelx_attention.nn.cell.model", root)
    assert nested == "from ...data.core import Complex\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import topomodelx_attention.data.core\n", "binds the package name"),
        ("x = 1; from topomodelx_attention.data.core import Complex\n", "shares its line"),
        ("from topomodelx_attention.data import defined_here\n", "defined in the package's __init__.py"),
        ("from .core import Complex\n", "relative import"),
    ],
)
def test_rewrite_imports_refuses_what_the_copy_cannot_follow(tmp_path, source, message):
    root = _package(tmp_path, {
        "__init__.py": "", "data/__init__.py": "defined_here = 1\n", "data/core.py": "Complex = None\n",
        "data/user.py": source,
    })
    with pytest.raises(ValueError, match=message):
        rewrite_imports(source, "topomodelx_attention.data.user", root)


def test_environment_commands_install_what_the_suite_imports_with_dependencies(tmp_path):
    make, install = check.environment_commands(tmp_path / "venv", "python3")
    assert make == ["python3", "-m", "venv", "--system-site-packages", str(tmp_path / "venv")]
    assert install[:4] == [str(tmp_path / "venv" / "bin" / "python"), "-m", "pip", "install"]
    assert "--no-deps" not in install and "-e" not in install  # dependencies come along; not this package
    assert {"torch_geometric", "graph-universe==0.1.2", "ruff", "pytest-mock", "pytest-cov", "rootutils"} <= set(install)


class FakeRun:
    """``subprocess.run`` stand-in: answers by the command, records every call."""

    def __init__(self, missing=(), ruff=True, make_fails=False):
        self.calls, self.missing, self.ruff, self.make_fails = [], missing, ruff, make_fails

    def __call__(self, command, **kwargs):
        self.calls.append(list(command))
        out, code = "", 0
        if command[1:3] == ["-m", "venv"] or command[1:4] == ["-m", "pip", "install"]:
            code = 1 if self.make_fails else 0
        elif command[1] == "-c":
            out = "".join(f"{name}: ModuleNotFoundError: No module named {name!r}\n" for name in self.missing)
        elif command[1:3] == ["-m", "ruff"]:
            code = 0 if self.ruff else 1
            out = "" if self.ruff else "No module named ruff"
        return subprocess.CompletedProcess(command, code, out, "")


def test_check_environment_names_missing_modules_and_a_missing_ruff(tmp_path):
    assert check.check_environment(tmp_path / "python", FakeRun()) == []
    problems = check.check_environment(tmp_path / "python", FakeRun(missing=("graph_universe",), ruff=False))
    assert len(problems) == 2 and problems[0].startswith("graph_universe: ModuleNotFoundError")
    assert "ruff does not run in the environment" in problems[1]


def test_lint_uses_the_environment_ruff_and_a_missing_ruff_is_a_failure(tmp_path):
    run = FakeRun(ruff=False)
    problems = check.lint("/venv/bin/python", tmp_path, [tmp_path / "a.py"], run)
    assert [call[:3] for call in run.calls] == [["/venv/bin/python", "-m", "ruff"]] * 2  # never a ruff on PATH
    assert len(problems) == 2 and all("No module named ruff" in p for p in problems)
    assert check.lint("/venv/bin/python", tmp_path, [tmp_path / "a.py"], FakeRun()) == []


def _git_checkout(root: Path) -> Path:
    (root / "topobench").mkdir(parents=True)
    (root / "topobench" / "run.py").write_text("")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.mark.parametrize(
    ("fake", "message"),
    [
        (FakeRun(make_fails=True), "could not be made"),
        (FakeRun(missing=("torch_geometric",)), "torch_geometric: ModuleNotFoundError"),
        (FakeRun(ruff=False), "ruff does not run"),
    ],
)
def test_the_check_fails_before_running_when_a_step_cannot_run(tmp_path, fake, message):
    lines = []
    status = check.run_check(
        _git_checkout(tmp_path / "TopoBench"), tmp_path / "venv", ["tokengt"], logs=tmp_path / "logs",
        run=fake, say=lines.append,
    )
    assert status == 1 and lines[-1].startswith("FAILED")
    assert any(message in line for line in lines), lines
    assert not (tmp_path / "logs").exists()  # no worktree, no test run


def test_the_check_refuses_a_folder_that_is_not_a_topobench_git_checkout(tmp_path):
    with pytest.raises(ValueError, match="not a TopoBench checkout"):
        check.run_check(tmp_path, tmp_path / "venv", ["tokengt"], run=FakeRun())
    (tmp_path / "topobench").mkdir()
    (tmp_path / "topobench" / "run.py").write_text("")
    with pytest.raises(ValueError, match="not a git checkout"):
        check.run_check(tmp_path, tmp_path / "venv", ["tokengt"], run=FakeRun())
    with pytest.raises(ValueError, match="unknown --model"):
        check.run_check(tmp_path, tmp_path / "venv", ["gcn"], run=FakeRun())


def test_contribute_prints_the_check_command_as_next_step(tmp_path):
    root = fake_checkout(tmp_path / "TopoBench")
    status, out, err = run_contribute(root, ["tokengt"])
    assert status == 0, err
    line = next(line for line in out.splitlines() if line.startswith("next:"))
    assert f"topomodelx-attention topobench check --topobench {root} --model tokengt --venv tbvenv" in line
    assert "--tests" not in out and "benchmarks/" not in out
    from topomodelx_attention.cli import build_parser

    args = build_parser().parse_args(line.split("(")[0].split()[2:])  # the printed command parses
    assert args.topobench == str(root) and args.model == ["tokengt"] and args.venv == "tbvenv"


@pytest.mark.skipif(
    not (os.environ.get("TOPOBENCH_CHECKOUT") and os.environ.get("TOPOBENCH_VENV")),
    reason="set TOPOBENCH_CHECKOUT (a TopoBench git checkout) and TOPOBENCH_VENV to run the real check",
)
def test_the_real_check_passes(tmp_path):
    lines = []
    status = check.run_check(
        Path(os.environ["TOPOBENCH_CHECKOUT"]), Path(os.environ["TOPOBENCH_VENV"]), ["tokengt"],
        logs=tmp_path / "logs", say=lines.append,
    )
    assert status == 0 and lines[-1] == "OK", "\n".join(lines)
