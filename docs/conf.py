"""Sphinx configuration of the topomodelx_attention documentation site.

Build (from the repository root, with the ``docs`` extra installed)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The API reference is generated from the docstrings (autosummary writes its stub pages to
``docs/api/generated/``); the tutorials are the notebooks of ``tutorials/``, copied to
``docs/tutorials/`` at the start of the build and rendered as stored (never executed here: the
test suite executes them).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, also when it is not installed

import topomodelx_attention  # noqa: E402

# -- Project information -----------------------------------------------------

project = "topomodelx_attention"
author = "topomodelx_attention developers"
copyright = "topomodelx_attention developers"
version = release = topomodelx_attention.__version__
language = "en"

# -- General configuration ---------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "jupyter_execute"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
nitpicky = False
suppress_warnings = ["myst.header"]  # the tutorials number their sections from a level-2 heading

# -- API reference -------------------------------------------------------------

autosummary_generate = True
autosummary_ignore_module_all = False  # a subpackage's page lists exactly its __all__
autosummary_imported_members = True
autodoc_default_options = {
    "members": True,
    "inherited-members": False,  # never torch.nn.Module's own methods
    "undoc-members": False,
}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc sections give the types and shapes
autodoc_inherit_docstrings = False  # an override without a docstring shows none, not torch's
numpydoc_show_class_members = False  # the class page lists its members itself
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

# -- Notebooks (myst-nb) ---------------------------------------------------------

nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3


def _copy_tutorials() -> None:
    """Copy ``tutorials/*.ipynb`` into ``docs/tutorials/`` (only those that changed)."""
    target = DOCS / "tutorials"
    target.mkdir(exist_ok=True)
    sources = sorted((ROOT / "tutorials").glob("*.ipynb"))
    names = {path.name for path in sources}
    for stale in target.glob("*.ipynb"):
        if stale.name not in names:
            stale.unlink()
    for path in sources:
        copy = target / path.name
        if not copy.exists() or copy.read_bytes() != path.read_bytes():
            shutil.copyfile(path, copy)


_copy_tutorials()

_MISSING = object()


def _constant_docstring(app, what, name, obj, options, lines) -> None:
    """Give a re-exported constant the docstring it has where it is defined.

    A subpackage re-exports constants of its modules (``nn.graph.MAX_TOKENS`` is
    ``nn.graph.order_k_tokengt.MAX_TOKENS``); autodoc looks for their ``#:`` / string docstring
    in the subpackage only and would otherwise show the docstring of the value's type (``int``).
    """
    if what != "data":
        return
    modname, _, attr = name.rpartition(".")
    package = modname.split(".")[0] + "."
    candidates = [modname, *sorted(m for m in sys.modules if m.startswith(package) and m != modname)]
    for module_name in candidates:
        if getattr(sys.modules.get(module_name), attr, _MISSING) is not obj:
            continue
        try:
            doc = ModuleAnalyzer.for_module(module_name).find_attr_docs().get(("", attr))
        except PycodeError:
            continue
        if doc:
            lines[:] = list(doc)
            return
    if getattr(obj, "__doc__", None) == getattr(type(obj), "__doc__", None):  # none of its own: not its type's
        lines[:] = []


def setup(app) -> None:
    """Connect the docstring hook before numpydoc's (a lower priority runs first)."""
    app.connect("autodoc-process-docstring", _constant_docstring, priority=100)

# -- HTML output -----------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = "topomodelx_attention"
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_context = {"default_mode": "light"}
