"""The dependency direction of CONTRIBUTING.md holds: data <- transforms <- nn <- harness/CLI."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topomodelx_attention"
FAMILIES = ("cell", "graph", "simplicial")


def _imports():
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                yield module, name


def _violation(module: str, name: str) -> str | None:
    if name.split(".")[0] in ("tests", "benchmarks"):
        return "the package never imports tests/ or benchmarks/"
    if not name.startswith("topomodelx_attention."):
        return None
    src, dst = module.split(".")[1:], name.split(".")[1:]
    if src[0] == "data" and dst[0] in ("transforms", "nn", "harness", "cli"):
        return "data imports nothing above it"
    if src[0] == "transforms" and dst[0] in ("nn", "harness", "cli"):
        return "transforms import data only"
    if src[0] == "nn" and dst[0] in ("harness", "cli"):
        return "nn never imports the harness or the CLI"
    if (
        src[0] == dst[0] == "nn" and len(src) > 1 and len(dst) > 1
        and src[1] in FAMILIES and dst[1] in FAMILIES and src[1] != dst[1]
    ):
        return "model families never import each other"
    if src[:2] == ["nn", "attention"] and dst[0] == "nn" and len(dst) > 1 and dst[1] in FAMILIES:
        return "the attention core never imports a model family"
    return None


def test_dependency_direction():
    bad = [(m, n, why) for m, n in _imports() if (why := _violation(m, n))]
    assert not bad, bad


@pytest.mark.parametrize(
    ("module", "name"),
    [("topomodelx_attention.data.convert", "topomodelx_attention.nn.common"),
     ("topomodelx_attention.nn.cell.cellular_transformer", "topomodelx_attention.nn.graph.tokengt"),
     ("topomodelx_attention.nn.attention.sparse", "topomodelx_attention.nn.cell"),
     ("topomodelx_attention.harness.models", "benchmarks._measure")],
)
def test_the_check_catches_violations(module, name):
    assert _violation(module, name) is not None
