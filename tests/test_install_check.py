"""The import-time check of ``torch_geometric/``, shared by pyg-nightly and torch-geometric."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from topomodelx_attention import _install

NIGHTLY, RELEASE = "2.9.0.dev20261027", "2.8.1"


class _Distribution:
    def __init__(self, version: str, root) -> None:
        self.version = version
        self._root = root

    def locate_file(self, path):
        return self._root / path


def _environment(monkeypatch, tmp_path, installed: dict[str, str], folder_version: str | None):
    """Fake distributions in ``installed`` whose ``torch_geometric/__init__.py`` has ``folder_version``."""
    if folder_version is not None:
        (tmp_path / "torch_geometric").mkdir()
        (tmp_path / "torch_geometric" / "__init__.py").write_text(
            f"import torch\n\n__version__ = '{folder_version}'\n"
        )

    def distribution(name):
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return _Distribution(installed[name], tmp_path)

    monkeypatch.setattr(_install.metadata, "distribution", distribution)


@pytest.mark.parametrize(
    ("installed", "folder_version"),
    [
        ({"pyg-nightly": NIGHTLY}, NIGHTLY),  # TopoModelX's only
        ({"torch-geometric": RELEASE}, RELEASE),  # the release only
        ({"pyg-nightly": NIGHTLY, "torch-geometric": RELEASE}, NIGHTLY),  # both, repaired
    ],
)
def test_nothing_to_report(monkeypatch, tmp_path, installed, folder_version):
    _environment(monkeypatch, tmp_path, installed, folder_version)
    assert _install.torch_geometric_conflict() is None


@pytest.mark.parametrize(
    ("folder_version", "holds"),
    [
        (RELEASE, f"torch-geometric {RELEASE}'s files over pyg-nightly's"),
        ("2.7.0", "files of version 2.7.0"),
        (None, "no readable torch_geometric/__init__.py"),
    ],
)
def test_both_installed_and_not_whole_is_reported_with_the_repair(monkeypatch, tmp_path, folder_version, holds):
    _environment(monkeypatch, tmp_path, {"pyg-nightly": NIGHTLY, "torch-geometric": RELEASE}, folder_version)
    message = _install.torch_geometric_conflict()
    assert message is not None
    assert f"pyg-nightly {NIGHTLY}" in message and f"torch-geometric {RELEASE}" in message
    assert holds in message
    assert "`pip install --no-deps --force-reinstall pyg-nightly`" in message
    with pytest.warns(UserWarning, match="force-reinstall pyg-nightly"):
        _install.warn_on_torch_geometric_conflict()


def test_no_warning_when_whole(monkeypatch, tmp_path, recwarn):
    _environment(monkeypatch, tmp_path, {"pyg-nightly": NIGHTLY, "torch-geometric": RELEASE}, NIGHTLY)
    _install.warn_on_torch_geometric_conflict()
    assert not [w for w in recwarn if "torch_geometric/" in str(w.message)]


def test_importing_the_package_warns_once_and_imports_no_torch(tmp_path):
    # a fresh interpreter whose metadata lookup sees a mixed folder: the package import warns
    (tmp_path / "torch_geometric").mkdir()
    (tmp_path / "torch_geometric" / "__init__.py").write_text(f"__version__ = '{RELEASE}'\n")
    code = textwrap.dedent(f"""
        import importlib.metadata as metadata, pathlib, sys, warnings

        class Distribution:
            def __init__(self, version):
                self.version = version
            def locate_file(self, path):
                return pathlib.Path({str(tmp_path)!r}) / path

        versions = {{"pyg-nightly": {NIGHTLY!r}, "torch-geometric": {RELEASE!r}}}
        metadata.distribution = lambda name: Distribution(versions[name])
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            import topomodelx_attention
        print(len([w for w in caught if "torch_geometric/" in str(w.message)]), "torch" in sys.modules)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.split() == ["1", "False"], run.stderr
