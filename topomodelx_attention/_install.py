"""A check of the installed environment, run once when the package is imported.

TopoModelX depends on ``pyg-nightly`` (PyTorch Geometric's nightly build) while this package and
graph-universe depend on the release, ``torch-geometric``. Both distributions install the same
folder, ``torch_geometric/``: after ``pip install`` of this package pip lists both, and the
folder holds the files of whichever was installed last over the other's. When that is the
release, a mix of two versions is imported; :func:`torch_geometric_conflict` says so, and
importing :mod:`topomodelx_attention` warns once with the repair (:data:`REPAIR`), which
rewrites the folder with the nightly build's files. After it pip still lists both
distributions, the folder holds one whole copy and nothing is reported.

The check reads package metadata and one small file; it imports neither torch nor PyG.
"""

from __future__ import annotations

import re
import warnings
from importlib import metadata
from pathlib import Path

__all__ = ["REPAIR", "torch_geometric_conflict", "warn_on_torch_geometric_conflict"]

REPAIR = "pip install --no-deps --force-reinstall pyg-nightly"
"""The command that makes ``torch_geometric/`` one whole copy (the one CI runs after its install)."""

_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def _installed_version(init: Path) -> str | None:
    """``__version__`` of ``torch_geometric/__init__.py``, or ``None`` if unreadable."""
    try:
        match = _VERSION.search(init.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return match.group(1) if match else None


def torch_geometric_conflict() -> str | None:
    """Describe a ``torch_geometric/`` folder shared by two distributions and not whole.

    Returns
    -------
    str or None
        ``None`` when at most one of ``pyg-nightly`` and ``torch-geometric`` is installed, or
        when the folder holds the nightly build's files (its ``__version__`` is the installed
        ``pyg-nightly`` version); otherwise a message naming both distributions, what the
        folder holds and the repair command (:data:`REPAIR`).
    """
    try:
        nightly = metadata.distribution("pyg-nightly")
        release = metadata.distribution("torch-geometric")
    except metadata.PackageNotFoundError:
        return None
    found = _installed_version(Path(nightly.locate_file("torch_geometric/__init__.py")))
    if found == nightly.version:
        return None
    if found is None:
        holds = "no readable torch_geometric/__init__.py"
    elif found == release.version:
        holds = f"torch-geometric {found}'s files over pyg-nightly's"
    else:
        holds = f"files of version {found}"
    return (
        f"two installed distributions own the folder torch_geometric/: pyg-nightly "
        f"{nightly.version} (required by TopoModelX) and torch-geometric {release.version}; "
        f"it holds {holds}. Make it one whole copy with `{REPAIR}` (pip then still lists both "
        "distributions, and this warning is gone)."
    )


def warn_on_torch_geometric_conflict() -> None:
    """Warn (``UserWarning``, once at import) when :func:`torch_geometric_conflict` finds one."""
    message = torch_geometric_conflict()
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=3)
