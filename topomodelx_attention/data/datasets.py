"""Graph data sets: the embedded MUTAG copy and PyG's TU data sets.

MUTAG (188 molecules, TU raw text files, 110 KB) ships inside the package so that the command
line and the tests run offline. Other TU data sets load through PyG's normal download, or from
raw files already placed under ``root/<NAME>/raw``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from torch_geometric.datasets import TUDataset

__all__ = ["EMBEDDED_DATASETS", "default_root", "embedded_raw_dir", "load_tu_dataset"]

EMBEDDED_DATASETS: tuple[str, ...] = ("MUTAG",)
"""TU data sets whose raw files ship with the package."""

_EMBEDDED = Path(__file__).resolve().parent / "embedded"


def default_root() -> Path:
    """Cache folder for data sets: ``$TOPOMODELX_ATTENTION_DATA`` or ``~/.cache/topomodelx_attention``."""
    env = os.environ.get("TOPOMODELX_ATTENTION_DATA")
    return Path(env) if env else Path.home() / ".cache" / "topomodelx_attention"


def embedded_raw_dir(name: str) -> Path:
    """Folder of the raw files of an embedded data set.

    Parameters
    ----------
    name : str
        Data set name, one of :data:`EMBEDDED_DATASETS`.

    Returns
    -------
    pathlib.Path
        The package folder holding ``<name>_A.txt`` and friends.
    """
    if name not in EMBEDDED_DATASETS:
        raise ValueError(f"{name!r} is not embedded; embedded data sets: {list(EMBEDDED_DATASETS)}")
    return _EMBEDDED / name / "raw"


def load_tu_dataset(name: str, root: str | os.PathLike | None = None, **kwargs: Any) -> TUDataset:
    """Load a TU data set, offline for the embedded ones.

    For an embedded data set the raw files are copied into ``root/<name>/raw`` first, so PyG
    never tries to download it.

    Parameters
    ----------
    name : str
        TU data set name (``"MUTAG"``, ``"PROTEINS"``, ...).
    root : path-like, optional
        Data folder (default :func:`default_root` ``/ "tu"``).
    **kwargs
        Passed to :class:`torch_geometric.datasets.TUDataset` (``transform``,
        ``pre_transform``, ...).

    Returns
    -------
    torch_geometric.datasets.TUDataset
        The data set.
    """
    root = Path(root) if root is not None else default_root() / "tu"
    if name in EMBEDDED_DATASETS:
        raw = root / name / "raw"
        source = embedded_raw_dir(name)
        if not raw.exists() or not all((raw / f.name).exists() for f in source.iterdir()):
            raw.mkdir(parents=True, exist_ok=True)
            for file in source.iterdir():
                shutil.copyfile(file, raw / file.name)
    return TUDataset(str(root), name, **kwargs)
