"""The shared docstring fragments (:mod:`topomodelx_attention._docs`) and their use."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import topomodelx_attention
from topomodelx_attention import _docs
from topomodelx_attention._docs import DOCS, fill_doc

#: A placeholder line that fill_doc would have replaced.
_PLACEHOLDER = _docs._PLACEHOLDER


def _package_objects():
    """Every function, class and method defined in the package's modules."""
    for info in pkgutil.walk_packages(topomodelx_attention.__path__, "topomodelx_attention."):
        if info.name.endswith((".cli", "__main__")):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            yield obj
            if inspect.isclass(obj):
                yield from (m for m in vars(obj).values() if inspect.isfunction(m))


def test_docs_module_imports_nothing_of_the_package():
    tree = ast.parse(Path(_docs.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("topomodelx_attention")
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("topomodelx_attention") for a in node.names)


def test_every_placeholder_is_filled():
    unfilled = [
        getattr(obj, "__qualname__", repr(obj))
        for obj in _package_objects()
        if isinstance(getattr(obj, "__doc__", None), str) and _PLACEHOLDER.search(obj.__doc__)
    ]
    assert unfilled == []


def test_unknown_placeholder_raises_naming_it():
    def documented() -> None:
        """Summary.

        Parameters
        ----------
        %(no_such_fragment)s
        """

    with pytest.raises(KeyError, match="no_such_fragment"):
        fill_doc(documented)


def test_fragment_is_indented_like_its_placeholder():
    def documented() -> None:
        """Summary.

        Parameters
        ----------
        %(query)s
        """

    text = fill_doc(documented).__doc__
    assert "        query : torch.Tensor, shape = (n_target, heads, d)\n" in text
    assert "            Projected queries.\n" in text


def test_no_docstring_is_left_alone():
    def bare() -> None:
        pass

    assert fill_doc(bare) is bare and bare.__doc__ is None


@pytest.mark.parametrize(
    ("qualified", "fragments"),
    [
        ("nn.attention.dense_attention", ("qkv", "batches", "scale", "dropout", "num_complexes")),
        ("nn.attention.linear_attention", ("qkv", "batches", "num_complexes")),
        ("nn.attention.sparse_attention", ("qkv", "scale", "dropout")),
        ("nn.attention.scatter.scatter_sum", ("scatter_inputs",)),
        ("nn.attention.scatter.scatter_max", ("scatter_inputs",)),
        ("nn.attention.MultiHeadAttention.forward", ("x_target", "batch_target")),
        ("nn.attention.MultiHeadAttention.project_key", ("x_source",)),
        ("nn.graph.tokens.random_sign_flip", ("node_id", "per_complex")),
        ("nn.graph.tokens.eigenvector_dropout", ("node_id", "per_complex")),
    ],
)
def test_rendered_docstring_contains_the_shared_text(qualified, fragments):
    obj = topomodelx_attention
    for part in qualified.split("."):
        obj = getattr(obj, part) if hasattr(obj, part) else importlib.import_module(
            f"{obj.__name__}.{part}"
        )
    doc = inspect.getdoc(obj)
    for name in fragments:
        for line in DOCS[name].splitlines():
            assert line.strip() in doc, (qualified, name, line)
