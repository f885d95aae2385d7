"""The dependency direction of CONTRIBUTING.md holds (data <- transforms <- datasets, nn <- harness/CLI), without import cycles."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topomodelx_attention"
FAMILIES = ("cell", "graph", "simplicial")


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _import_statements():
    """``(module, imported module, names)`` of every absolute import, in functions too.

    ``names`` are those of ``from module import names``; empty for ``import module``.
    """
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield module, node.module, [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield module, alias.name, []


def _imports():
    for module, name, _ in _import_statements():
        yield module, name


def _violation(module: str, name: str) -> str | None:
    if name.split(".")[0] in ("tests", "benchmarks"):
        return "the package never imports tests/ or benchmarks/"
    if not name.startswith("topomodelx_attention."):
        return None
    src, dst = module.split(".")[1:], name.split(".")[1:]
    if src[0] == "data" and dst[0] in ("transforms", "datasets", "nn", "harness", "cli"):
        return "data imports nothing above it"
    if src[0] == "transforms" and dst[0] in ("datasets", "nn", "harness", "cli"):
        return "transforms import data only"
    if src[0] == "datasets" and dst[0] in ("nn", "harness", "cli"):
        return "datasets import data and transforms only"
    if src[0] == "nn" and dst[0] == "datasets":
        return "models never read data sets"
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
     ("topomodelx_attention.harness.models", "benchmarks._measure"),
     ("topomodelx_attention.datasets.tu", "topomodelx_attention.harness.prepare"),
     ("topomodelx_attention.data.complex_data", "topomodelx_attention.datasets.registry"),
     ("topomodelx_attention.nn.common", "topomodelx_attention.datasets.tu")],
)
def test_the_check_catches_violations(module, name):
    assert _violation(module, name) is not None


# ------------------------------------------------------------------ import cycles
ALLOWED_CYCLES = {
    # ComplexData.__init_subclass__ registers a subclass's PyG batch class (data.collate), which
    # batches ComplexData: a hook both ways, imported lazily on the data side
    frozenset({"topomodelx_attention.data.collate", "topomodelx_attention.data.complex_data"}),
}
"""Import cycles between modules of the package that are there on purpose (see each comment)."""


def _module_graph():
    """``{module: {modules it imports}}`` over the package's modules (function-level imports too).

    ``from package import name`` counts as importing the submodule ``package.name`` when there is
    one; a package's ``__init__`` is a node of its own, so re-exports do not make cycles.
    """
    modules = {_module_name(path).removesuffix(".__init__") for path in PACKAGE.rglob("*.py")}
    graph = {module: set() for module in modules}
    for module, name, names in _import_statements():
        module = module.removesuffix(".__init__")
        targets = [f"{name}.{n}" if f"{name}.{n}" in modules else name for n in names] or [name]
        graph[module] |= {t for t in targets if t in modules and t != module}
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_but_the_documented_ones():
    unexpected = [sorted(c) for c in _cycles(_module_graph()) if c not in ALLOWED_CYCLES]
    assert not unexpected, (
        f"modules that import each other (directly or around a loop): {unexpected}; move what both "
        "need into a module of its own, or hand it over by registration (see harness/registry.py "
        "and config.allow_harness_classes)"
    )


def test_the_cycle_check_finds_a_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]


# ------------------------------------------------------------------ tests and benchmark scripts
def test_tests_run_the_benchmark_scripts_and_never_import_them():
    """A benchmark script is a command: tests run it (``tests.helpers.run_benchmark``), never import it."""
    root = PACKAGE.parent
    scripts = {path.stem for path in (root / "benchmarks").glob("*.py")}
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                if name.split(".")[0] == "benchmarks" or name in scripts:
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
            call = ast.unparse(node) if isinstance(node, ast.Call) else ""
            if "spec_from_file_location" in call.split("(")[0] and "benchmark" in call.lower():
                found.append(f"{path.relative_to(root)}:{node.lineno} loads a file of benchmarks/ as a module")
    assert not found, found
