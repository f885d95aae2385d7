"""The documentation site builds without a warning, with the whole API and every tutorial."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SITE_PACKAGES = ("sphinx", "numpydoc", "myst_nb", "pydata_sphinx_theme")
MISSING = [name for name in SITE_PACKAGES if importlib.util.find_spec(name) is None]


def _api_modules() -> list[str]:
    text = (DOCS / "api" / "index.rst").read_text()
    return re.findall(r"^   (topomodelx_attention[\w.]*)$", text, flags=re.M)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if MISSING:
        pytest.skip(f"the docs extra is not installed (no {', '.join(MISSING)}): pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    return out


@pytest.mark.slow
def test_site_builds_warning_free_and_renders_every_tutorial(site):
    assert (site / "index.html").is_file()
    for notebook in sorted((ROOT / "tutorials").glob("*.ipynb")):
        assert (site / "tutorials" / f"{notebook.stem}.html").is_file(), notebook.name
    for page in ("install", "data_model", "families", "transforms", "harness", "topomodelx", "topobench"):
        assert (site / "guide" / f"{page}.html").is_file(), page


@pytest.mark.slow
def test_api_reference_has_a_page_for_everything_each_listed_module_exports(site):
    modules = _api_modules()
    assert "topomodelx_attention.nn.cell" in modules and "topomodelx_attention.harness" in modules
    missing = []
    for name in modules:
        module = importlib.import_module(name)
        assert (site / "api" / "generated" / f"{name}.html").is_file(), name
        missing += [
            f"{name}.{item}" for item in module.__all__
            if not (site / "api" / "generated" / f"{name}.{item}.html").is_file()
        ]
    assert missing == []


@pytest.mark.slow
def test_site_names_no_path_of_the_machine_that_built_it(site):
    found = [
        str(page.relative_to(site)) for page in site.rglob("*.html")
        if str(ROOT) in page.read_text(encoding="utf-8", errors="replace")
    ]
    assert found == []


def test_every_api_module_of_the_package_is_listed():
    # the subpackages with an __all__ of their own, and the modules the user guide points to
    listed = set(_api_modules())
    for name in ("data", "transforms", "nn.attention", "nn.cell", "nn.graph", "nn.simplicial",
                 "nn.topomodelx", "harness", "harness.topobench", "data.topomodelx"):
        assert f"topomodelx_attention.{name}" in listed, name
