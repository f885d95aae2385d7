"""The data set families, by the name a config gives as ``dataset.loader``.

A family is one :class:`DatasetFamily`: how to read its graphs, which files that reads (the
cache key fingerprints them), what else of the config the cache key holds, and the task
defaults it fills into the config. Each family module registers its own with
:func:`register_family` on import (``datasets/__init__.py`` imports the packaged ones; this
module imports none); the harness asks :func:`get_family`, :func:`load_graphs` and
:func:`data_files`, never a family name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch_geometric.data import Data

__all__ = [
    "FAMILIES",
    "SPLITS",
    "DatasetFamily",
    "Graphs",
    "data_files",
    "default_root",
    "get_family",
    "load_graphs",
    "plain",
    "register_family",
    "require_data_dir",
    "require_file",
    "resolve_cache_dir",
]

SPLITS: tuple[str, ...] = ("train", "val", "test")
"""Split names, in order (a family with its own split returns these keys)."""

Graphs = list[Data] | dict[str, list[Data]]
"""What a family reads: all graphs (random splits), or ``{"train", "val", "test"}`` (its own split)."""


def _nothing(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def _unchanged(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg)


def _config_name(cfg: Mapping[str, Any]) -> str:
    return str(cfg["name"])


@dataclass(frozen=True)
class DatasetFamily:
    """One family of data sets: how to read it and what of it the harness needs to know.

    Attributes
    ----------
    name : str
        The ``dataset.loader`` value that selects it.
    read : callable
        ``read(cfg, cache_dir) -> Graphs``: the graphs of a plain ``dataset`` config
        (``cache_dir``: the resolved cache folder, for downloads or generated files).
    files : callable
        ``files(cfg, cache_dir) -> list of Path or None``: the raw files ``read`` reads (their
        path, size, time and SHA-256 go into the cache key); ``[]`` for generated data,
        ``None`` when they are not there (``read`` then raises its error, or downloads them).
    key_fields : callable, optional
        ``key_fields(cfg) -> dict``: options of the config besides ``name``, ``loader``,
        ``file``, ``target``, ``subset``, ``max_graphs`` and ``lifting_kwargs`` that change
        the graphs read (hashed into the cache key). Default: none.
    protocol : callable, optional
        ``protocol(cfg) -> dict``: the config with the family's task defaults filled in
        (``task``, ``task_level``, ``loss``, ``monitor_metric``, ``num_classes``,
        ``metrics``), read by the harness's data set info. Default: the config unchanged.
    display_name : callable, optional
        ``display_name(cfg) -> str``: the data set's name in tables and result folders.
        Default: ``cfg["name"]``.
    """

    name: str
    read: Callable[[Mapping[str, Any], Path], Graphs]
    files: Callable[[Mapping[str, Any], Path], list[Path] | None]
    key_fields: Callable[[Mapping[str, Any]], dict[str, Any]] = _nothing
    protocol: Callable[[Mapping[str, Any]], dict[str, Any]] = _unchanged
    display_name: Callable[[Mapping[str, Any]], str] = _config_name


FAMILIES: dict[str, DatasetFamily] = {}
"""Registered families by name (:func:`register_family`)."""


def register_family(family: DatasetFamily) -> DatasetFamily:
    """Register a family under its name (a config selects it with ``dataset.loader=NAME``).

    Parameters
    ----------
    family : DatasetFamily
        The family.

    Returns
    -------
    DatasetFamily
        The same family.

    Raises
    ------
    ValueError
        When another family has that name.
    """
    if not isinstance(family, DatasetFamily):
        raise TypeError(f"register_family takes a DatasetFamily, got {type(family).__name__}")
    known = FAMILIES.get(family.name)
    if known is not None and known is not family:
        raise ValueError(f"a data set family named {family.name!r} is already registered")
    FAMILIES[family.name] = family
    return family


def get_family(loader: Any) -> DatasetFamily:
    """Return the family a ``dataset.loader`` value names.

    Raises
    ------
    ValueError
        Naming the registered families, for any other value.
    """
    family = FAMILIES.get(loader) if isinstance(loader, str) else None
    if family is None:
        raise ValueError(f"dataset.loader must be one of {tuple(FAMILIES)}, got {loader!r}")
    return family


def plain(value: Any) -> Any:
    """Return an OmegaConf config as plain, resolved containers (anything else unchanged)."""
    if isinstance(value, DictConfig) or OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def default_root() -> Path:
    """Cache folder for data sets: ``$TOPOMODELX_ATTENTION_DATA`` or ``~/.cache/topomodelx_attention``."""
    env = os.environ.get("TOPOMODELX_ATTENTION_DATA")
    return Path(env) if env else Path.home() / ".cache" / "topomodelx_attention"


def resolve_cache_dir(cache_dir: str | os.PathLike | None) -> Path:
    """Cache folder: the given one, else ``$TOPOMODELX_ATTENTION_DATA`` or ``~/.cache/...``."""
    return Path(cache_dir).expanduser() if cache_dir else default_root()


def require_data_dir(cfg: Mapping[str, Any], needed: str) -> Path:
    """``dataset.data_dir``, or a ``FileNotFoundError`` saying which files to put there."""
    data_dir = cfg.get("data_dir")
    if data_dir is None:
        raise FileNotFoundError(
            f"data set {cfg['name']} is not bundled: set dataset.data_dir (command line: "
            f"--data-dir DIR) to the folder holding {needed} (benchmarks/README.md says where to "
            "get it)"
        )
    return Path(data_dir).expanduser()


def require_file(path: Path, what: str, source: str, example: str | None = None) -> Path:
    """``path`` when it is a file; else a ``ValueError`` (a folder) or ``FileNotFoundError`` saying where to get it."""
    if path.is_dir():
        hint = f" (e.g. {path / example})" if example else ""
        raise ValueError(f"{what} {path} is a folder, not a file: pass the file itself{hint}")
    if not path.is_file():
        raise FileNotFoundError(
            f"{what} not found: {path} does not exist. Download {source} and pass its folder "
            "as data_dir (command line: --data-dir DIR, config: dataset.data_dir=DIR)."
        )
    return path


def load_graphs(cfg: Mapping[str, Any], cache_dir: str | os.PathLike | None = None) -> Graphs:
    """Read the graphs of a data set config (``dataset/graph/<NAME>.yaml``) with its family.

    Parameters
    ----------
    cfg : mapping
        The ``dataset`` config: ``name``, ``loader`` (a registered family: ``tu``, ``gcb``,
        ``zinc``, ``graphuniverse``, ...), the family's own options (``data_dir``, ``file``,
        ``target``, ``download``, ``use_node_attr``, ...), and ``max_graphs`` (keep the first
        graphs of each part) and ``subset`` (per split of a family's own split).
    cache_dir : path-like, optional
        Cache folder (TU downloads, generated families).

    Returns
    -------
    list of Data or dict of str to list of Data
        All graphs (random splits), or ``{"train", "val", "test"}`` (fixed splits).
    """
    cfg = plain(cfg)
    family = get_family(cfg.get("loader"))
    graphs = family.read(cfg, resolve_cache_dir(cache_dir))
    max_graphs = cfg.get("max_graphs")
    if max_graphs is not None:
        if isinstance(graphs, dict):
            graphs = {k: v[: int(max_graphs)] for k, v in graphs.items()}
        else:
            graphs = graphs[: int(max_graphs)]
    subset = cfg.get("subset")
    if subset and isinstance(graphs, dict):
        graphs = {k: v if subset.get(k) is None else v[: int(subset[k])] for k, v in graphs.items()}
    return graphs


def data_files(dataset_cfg: Mapping[str, Any], cache_dir: str | os.PathLike | None = None) -> list[Path] | None:
    """Return the raw files :func:`load_graphs` reads for a data set config, resolved.

    TU: every ``<NAME>_*.txt`` of the folder read (the bundled copy, ``data_dir`` or the
    downloaded ``<cache_dir>/tu/<NAME>/raw``); GCB: the ``.npz`` read (the converted
    ``<stem>.plain.npz`` when present); ZINC-12k: both CSV files; GraphUniverse: none (the
    families are generated from the parameters, which the cache key holds).

    Parameters
    ----------
    dataset_cfg : mapping
        ``dataset`` config.
    cache_dir : path-like, optional
        Cache folder (where TU downloads go).

    Returns
    -------
    list of pathlib.Path or None
        Absolute paths, sorted; ``None`` when the files are not there (the reader then raises
        its error naming them, or downloads them).
    """
    cfg = plain(dataset_cfg)
    files = get_family(cfg.get("loader")).files(cfg, resolve_cache_dir(cache_dir))
    if files is None:
        return None
    return sorted(Path(p).resolve() for p in files)
