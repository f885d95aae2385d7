"""The model code a TopoBench pull request carries: this package's modules, vendored.

TopoBench takes a model's code into its own tree, and this package is installed from a
checkout or a wheel, not from PyPI: a pull request that listed it as a dependency would not
install with TopoBench's own steps. :func:`vendored_files` gives instead a copy of the modules
the contributed backbones and wrappers import — the closure of :data:`ENTRY_MODULES` over their
imports, module-level and inside functions — under :data:`VENDOR_FOLDER` of the TopoBench
checkout, each with

* its imports of this package rewritten to relative imports within the copy
  (:func:`rewrite_imports`: a name imported from a package is imported from the module that
  defines it, so the packages' ``__init__`` files, which import the rest of this package, are
  not copied; each copied package gets a short ``__init__.py`` instead);
* a header naming the source package, its version, its license and the source file, with
  ``# fmt: off`` and ``# ruff: noqa`` (the code is formatted and linted in this package, by its
  own settings, not TopoBench's).

Apart from the imports, the header and blank lines at the end of a file (TopoBench's formatter
wants none) every file is byte for byte this package's source. The
folder lies beside TopoBench's ``backbones/`` and ``wrappers/`` (whose auto-discovery executes
every module found one level down), so nothing in it is loaded unless a backbone imports it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import topomodelx_attention

__all__ = [
    "ENTRY_MODULES",
    "VENDOR_FOLDER",
    "VENDOR_PACKAGE",
    "module_closure",
    "rewrite_imports",
    "vendored_files",
    "vendored_name",
]

PACKAGE_NAME = "topomodelx_attention"
SOURCE_ROOT = Path(topomodelx_attention.__file__).resolve().parent.parent
#: Python package of the copy in TopoBench (what the backbone and wrapper modules import).
VENDOR_PACKAGE = "topobench.nn.topomodelx_attention"
#: Its folder in a TopoBench checkout.
VENDOR_FOLDER = VENDOR_PACKAGE.replace(".", "/")
#: The modules the TopoBench backbone and wrapper modules import (the roots of the closure).
ENTRY_MODULES = (
    f"{PACKAGE_NAME}.harness.topobench.backbones",
    f"{PACKAGE_NAME}.harness.topobench.wrapper",
)
#: Where the entry modules' package sits in the package: it is the root of the copy.
_FLATTENED = f"{PACKAGE_NAME}.harness.topobench."

HEADER = (
    "# Vendored from topomodelx-attention {version} (MIT License), file {source}.\n"
    "# Written by `topomodelx-attention topobench contribute`; its imports of the package point\n"
    "# into this copy. Formatted and linted in the package, by its own settings:\n"
    "# fmt: off\n"
    "# ruff: noqa\n"
)


def _source(module: str, root: Path) -> Path | None:
    """File of ``module`` under ``root`` (``__init__.py`` of a package), or ``None``."""
    path = root.joinpath(*module.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Return the parsed file (each source is parsed once per process)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _is_package(module: str, root: Path) -> bool:
    found = _source(module, root)
    return found is not None and found.name == "__init__.py"


def _defining_module(package: str, name: str, root: Path) -> str:
    """Return the module that ``from package import name`` takes ``name`` from.

    A submodule is its own answer.

    Follows the package's ``from ... import`` re-exports; raises when ``name`` is defined in
    the package's ``__init__`` itself (that file is not copied).
    """
    if _source(f"{package}.{name}", root) is not None:
        return f"{package}.{name}"
    for node in _tree(_source(package, root)).body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    if _is_package(node.module, root):
                        return _defining_module(node.module, alias.name, root)
                    return node.module
    raise ValueError(
        f"cannot vendor `from {package} import {name}`: {name} is defined in the package's "
        "__init__.py; define it in a module of the package and import it from there"
    )


def _ours(module: str | None) -> bool:
    return module is not None and (module == PACKAGE_NAME or module.startswith(PACKAGE_NAME + "."))


def _imports(
    module: str, root: Path, tree: ast.Module | None = None
) -> list[tuple[ast.ImportFrom, list[tuple[str, ast.alias]]]]:
    """Every import of this package in ``module`` (its ``tree``): the node and each name's defining module."""
    found = []
    for node in ast.walk(_tree(_source(module, root)) if tree is None else tree):
        if isinstance(node, ast.Import) and any(_ours(alias.name) for alias in node.names):
            raise ValueError(
                f"cannot vendor {module} (line {node.lineno}): `import {node.names[0].name}` binds "
                "the package name; import the names with `from ... import` instead"
            )
        if isinstance(node, ast.ImportFrom) and node.level:
            raise ValueError(f"cannot vendor {module} (line {node.lineno}): it uses a relative import")
        if isinstance(node, ast.ImportFrom) and _ours(node.module):
            if _is_package(node.module, root):
                targets = [(_defining_module(node.module, a.name, root), a) for a in node.names]
            else:
                targets = [(node.module, a) for a in node.names]
            found.append((node, targets))
    return found


def module_closure(entries: tuple[str, ...] = ENTRY_MODULES, root: Path = SOURCE_ROOT) -> list[str]:
    """Return the modules of this package that ``entries`` import, directly or not, sorted.

    Parameters
    ----------
    entries : tuple of str
        Dotted module names to start from (included in the result).
    root : pathlib.Path
        Folder holding the package folder (default: where this package is installed).

    Returns
    -------
    list of str
        Dotted names of the modules (never a package ``__init__``: names imported from a
        package count as imports of the module that defines them).

    Raises
    ------
    ValueError
        When an entry is not a module of the package, or a module imports in a way the copy
        cannot follow (``import topomodelx_attention...``, a relative import, a name defined in
        a package ``__init__``): the message names the module and what to change.
    """
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        if not _ours(module) or _source(module, root) is None or _is_package(module, root):
            raise ValueError(f"{module} is not a module of the package {PACKAGE_NAME} under {root}")
        seen.add(module)
        for _, targets in _imports(module, root):
            todo += [target for target, _ in targets if not _is_package(target, root)]
    return sorted(seen)


def vendored_name(module: str) -> str:
    """Dotted name of ``module`` inside the copy (the TopoBench harness modules at its root).

    Parameters
    ----------
    module : str
        A module of this package, e.g. ``"topomodelx_attention.nn.cell.structure"``.

    Returns
    -------
    str
        E.g. ``"nn.cell.structure"``; ``"backbones"`` for
        ``"topomodelx_attention.harness.topobench.backbones"``.
    """
    if module in (PACKAGE_NAME, _FLATTENED[:-1]):
        return ""
    if module.startswith(_FLATTENED):
        return module[len(_FLATTENED):]
    return module[len(PACKAGE_NAME) + 1:]


def _relative(importer: str, target: str) -> str:
    """``from`` clause that imports ``target`` relative to the module ``importer`` (copy names)."""
    here = importer.split(".")[:-1]
    there = target.split(".") if target else []
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    dots = "." * (len(here) - common + 1)
    return dots + ".".join(there[common:])


def rewrite_imports(source: str, module: str, root: Path = SOURCE_ROOT) -> str:
    """``source`` of ``module`` with its imports of this package made relative within the copy.

    Every ``from topomodelx_attention.X import a, b`` becomes one relative import per defining
    module (``from ..data.complex_data import ComplexData``), at the same indentation; the
    statement's own lines are replaced, nothing else changes.

    Parameters
    ----------
    source : str
        The module's text.
    module : str
        Its dotted name in this package (the importer, for the relative paths).
    root : pathlib.Path
        Folder holding the package folder.

    Returns
    -------
    str
        The rewritten text.

    Raises
    ------
    ValueError
        When an import shares a line with other code, or cannot be followed
        (:func:`module_closure`).
    """
    lines = source.splitlines(keepends=True)
    importer = vendored_name(module)
    edits = []
    for node, targets in _imports(module, root, ast.parse(source)):
        first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
        rest = last[node.end_col_offset:].strip()
        if first[: node.col_offset].strip() or (rest and not rest.startswith("#")):
            raise ValueError(
                f"cannot vendor {module} (line {node.lineno}): the import shares its line with "
                "other code; give it a line of its own"
            )
        groups: dict[str, list[str]] = {}
        for target, alias in targets:
            named = alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
            if target == f"{node.module}.{alias.name}":  # a submodule, imported from its package
                clause = _relative(importer, vendored_name(node.module))
            else:
                clause = _relative(importer, vendored_name(target))
            groups.setdefault(clause, []).append(named)
        indent = first[: node.col_offset]
        text = "".join(f"{indent}from {clause} import {', '.join(names)}\n" for clause, names in groups.items())
        edits.append((node.lineno - 1, node.end_lineno, text))
    for start, stop, text in sorted(edits, reverse=True):
        lines[start:stop] = [text]
    return "".join(lines)


def _header(source: str) -> str:
    return HEADER.format(version=topomodelx_attention.__version__, source=source)


@functools.cache
def vendored_files() -> dict[str, str]:
    """Return the copy: TopoBench-relative path → text, per module of the closure and package.

    Returns
    -------
    dict of str to str
        ``topobench/nn/topomodelx_attention/...`` paths: one per module of
        :func:`module_closure` (rewritten by :func:`rewrite_imports`, with the header) and an
        ``__init__.py`` per folder of the copy.
    """
    files = {}
    folders = {""}
    for module in module_closure():
        name = vendored_name(module)
        parts = name.split(".")
        folders.update(".".join(parts[:i]) for i in range(1, len(parts)))
        source = _source(module, SOURCE_ROOT)
        text = rewrite_imports(source.read_text(encoding="utf-8"), module)
        relative = source.relative_to(SOURCE_ROOT).as_posix()
        # one newline at the end of the file, as TopoBench's formatter and end-of-file hook ask
        files[f"{VENDOR_FOLDER}/{name.replace('.', '/')}.py"] = _header(relative) + text.rstrip("\n") + "\n"
    for folder in sorted(folders):
        path = f"{VENDOR_FOLDER}/{folder.replace('.', '/')}/__init__.py".replace("//", "/")
        files[path] = _header(f"{PACKAGE_NAME}/ (the modules the TopoBench backbones import)") + (
            f'"""Vendored modules of topomodelx-attention {topomodelx_attention.__version__}."""\n'
        )
    return dict(sorted(files.items()))
