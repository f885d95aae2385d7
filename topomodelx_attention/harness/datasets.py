"""Benchmark data sets as lists of lifted complexes: loading, cached lifting + PE, splits.

:func:`prepare_dataset` reads the graphs of a data set (TU, GCB or ZINC-12k), lifts them with
the model's lifting (``lift_many``) and applies its positional encoding, with a progress bar;
the result is stored under ``<cache_dir>/processed/<NAME>/<key>.pt`` where ``key`` hashes the
data set's reading options, the lifting/PE configurations and the raw files read (resolved
path, size, modification time and SHA-256 of each), so a second run with the same
configuration and data reads the cache, and different configurations, another ``data_dir`` or
changed files never collide.

Protocol (as TopoBench): TU data sets use random 50/25/25 splits drawn per seed
(:func:`random_split`); GCB and ZINC-12k keep the split of their files.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import re
import socket
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor
from torch.utils.data import Dataset
from torch_geometric.data import Data
from tqdm import tqdm

from topomodelx_attention.data import ComplexData
from topomodelx_attention.data.benchmark_graphs import (
    GCB_SOURCE,
    SPLITS,
    gcb_plain_path,
    read_gcb,
    read_zinc12k,
)
from topomodelx_attention.data.datasets import (
    EMBEDDED_DATASETS,
    default_root,
    embedded_raw_dir,
    find_tu_raw,
    load_tu_graphs,
)
from topomodelx_attention.files import atomic_output, check_writable, write_text
from topomodelx_attention.harness.config import check_targets

__all__ = [
    "CACHE_FORMAT",
    "CACHE_VERSION",
    "LOADERS",
    "ComplexDataset",
    "DatasetInfo",
    "PreparedDataset",
    "cache_key",
    "data_files",
    "data_fingerprint",
    "instantiate_transform",
    "load_cache",
    "load_graphs",
    "prepare_dataset",
    "process_graphs",
    "progress_bars",
    "prune_keys",
    "random_split",
    "resolve_cache_dir",
    "save_cache",
]

CACHE_VERSION = 2
"""Bumped when the processed format changes (part of the cache key)."""

CACHE_FORMAT = "topomodelx-attention complexes 2"
"""``format`` entry of a cache file (:func:`save_cache`)."""

LOADERS = ("tu", "gcb", "zinc", "graphuniverse")
"""Data set readers known to :func:`load_graphs`."""

_ALWAYS_KEPT = ("y", "shape", "num_nodes")


class ComplexDataset(Dataset):
    """A list of :class:`~topomodelx_attention.data.ComplexData` as a PyTorch data set.

    Parameters
    ----------
    complexes : sequence of ComplexData
        The complexes.
    """

    def __init__(self, complexes: Sequence[ComplexData]) -> None:
        self.complexes = list(complexes)

    def __len__(self) -> int:
        return len(self.complexes)

    def __getitem__(self, index: int) -> ComplexData:
        return self.complexes[index]


@dataclass
class DatasetInfo:
    """What models need to know about a prepared data set.

    Attributes
    ----------
    name : str
        Data set name.
    task : {"classification", "regression"}
        Learning task.
    out_channels : int
        Classes (classification) or targets (regression).
    in_channels : list of int
        Feature columns of ``x_r`` per rank.
    categorical : list of (list of int or None)
        Per rank: categories of integer feature columns, or ``None`` for float features.
    pe_channels : int or None
        Width of ``pe_r`` (``None`` without a positional encoding writing ``pe_r``).
    metric : str
        Monitored metric (``"accuracy"`` or ``"mae"``).
    node_id_channels : int or None, default=None
        Width of ``node_id`` (TokenGT node identifiers; ``None`` when the PE wrote none).
    task_level : {"graph", "node"}, default="graph"
        One label per complex (``y`` of shape ``(1,)`` or ``(1, d)``) or one class per vertex
        (``y`` of shape ``(n_0,)``: inductive node classification, every vertex of a complex
        belongs to the complex's split).
    loss : {"cross_entropy", "mae", "mse"} or None, default=None
        Training loss (``None``: cross-entropy for classification, MAE for regression).
    metrics : tuple of str, default=()
        Metrics logged besides ``metric`` (``"mse_per_triangle"``: the GraphUniverse
        challenge's MSE divided by the targets' total, for triangle counting).
    """

    name: str
    task: str
    out_channels: int
    in_channels: list[int]
    categorical: list[list[int] | None]
    pe_channels: int | None
    metric: str
    node_id_channels: int | None = None
    task_level: str = "graph"
    loss: str | None = None
    metrics: tuple[str, ...] = ()

    @property
    def max_rank(self) -> int:
        """Highest rank of the complexes."""
        return len(self.in_channels) - 1

    @property
    def mode(self) -> str:
        """``"max"`` when a larger monitored metric is better, else ``"min"``."""
        return "min" if self.metric in ("mae", "mse", "rmse") else "max"


@dataclass
class PreparedDataset:
    """Lifted complexes and their split protocol.

    Attributes
    ----------
    info : DatasetInfo
        Shapes and task.
    complexes : list of ComplexData
        All complexes (random splits) — or the concatenation of the fixed splits.
    fixed_split : dict of str to numpy.ndarray or None
        Indices of the file's own ``train``/``val``/``test`` split, or ``None`` for random splits.
    split_props : tuple of float
        ``(train, val)`` proportions of random splits.
    cache_file : pathlib.Path or None
        Where the processed complexes are cached.
    """

    info: DatasetInfo
    complexes: list[ComplexData]
    fixed_split: dict[str, np.ndarray] | None = None
    split_props: tuple[float, float] = (0.5, 0.25)
    cache_file: Path | None = None

    def split(self, seed: int) -> tuple[ComplexDataset, ComplexDataset, ComplexDataset]:
        """Return the train, validation and test sets of one seed.

        Parameters
        ----------
        seed : int
            Data seed of random splits (ignored by fixed splits).

        Returns
        -------
        tuple of ComplexDataset
            ``(train, val, test)``.
        """
        if self.fixed_split is not None:
            parts = [self.fixed_split[name] for name in SPLITS]
        else:
            parts = random_split(len(self.complexes), seed, *self.split_props)
        return tuple(ComplexDataset([self.complexes[int(i)] for i in idx]) for idx in parts)


def random_split(
    n: int, seed: int, train_prop: float = 0.5, val_prop: float = 0.25
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random train/validation/test indices (TopoBench's ``random`` split, 50/25/25 by default).

    Parameters
    ----------
    n : int
        Number of items.
    seed : int
        Seed of the permutation (the same seed gives the same split).
    train_prop, val_prop : float
        Proportions of the training and validation sets; the test set gets the rest.

    Returns
    -------
    tuple of numpy.ndarray
        Disjoint, sorted index arrays ``(train, val, test)`` covering ``0..n-1``.
    """
    if not (0 < train_prop < 1 and 0 <= val_prop < 1 and train_prop + val_prop < 1):
        raise ValueError(
            f"train_prop and val_prop must be in (0, 1) with a positive remainder for the test "
            f"set, got {train_prop}, {val_prop}"
        )
    permutation = np.random.default_rng(int(seed)).permutation(int(n))
    n_train = round(train_prop * n)
    n_val = round(val_prop * n)
    return (
        np.sort(permutation[:n_train]),
        np.sort(permutation[n_train : n_train + n_val]),
        np.sort(permutation[n_train + n_val :]),
    )


def resolve_cache_dir(cache_dir: str | os.PathLike | None) -> Path:
    """Cache folder: the given one, else ``$TOPOMODELX_ATTENTION_DATA`` or ``~/.cache/...``."""
    return Path(cache_dir).expanduser() if cache_dir else default_root()


def instantiate_transform(spec: Any, *, config_key: str = "transform", **extra: Any) -> Any:
    """Build a lifting or PE from a ``{_target_: ..., **kwargs}`` config (``None`` stays ``None``).

    The spec, merged with ``extra``, is resolved to plain values and checked by
    :func:`~topomodelx_attention.harness.config.check_targets` first: every ``_target_`` in it
    (nested ones too) must name an allowed class, so a config can never make hydra call
    ``numpy.load``, ``torch.load`` or any other function.

    Parameters
    ----------
    spec : mapping or None
        Hydra-style spec.
    config_key : str, default="transform"
        Key of the spec in the configuration (``"model.pe"``), named by errors.
    **extra
        Additional keyword arguments (e.g. the data set's ``lifting_kwargs``).

    Returns
    -------
    object or None
        The transform.

    Raises
    ------
    ValueError
        A spec without ``_target_``, a ``_target_`` outside the allow-list (nothing is
        instantiated then), or a target that fails to build.
    """
    if spec is None:
        return None
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    plain = _plain(spec)
    if not isinstance(plain, Mapping) or "_target_" not in plain:
        raise ValueError(f"a transform config needs a _target_ (a class path), got {config_key}={plain!r}")
    check_targets(plain, config_key)
    extra = {key: _plain(value) for key, value in extra.items()}
    check_targets(extra, config_key, instantiated=True)
    objects = {"allow_objects": True}  # as hydra's own merge of keyword arguments (Python objects)
    merged = OmegaConf.merge(OmegaConf.create(plain, flags=objects), OmegaConf.create(extra, flags=objects))
    merged = OmegaConf.to_container(merged, resolve=True)
    check_targets(merged, config_key)  # what hydra receives: no interpolation, no other target
    try:
        return instantiate(OmegaConf.create(merged, flags=objects))
    except InstantiationException as error:
        raise ValueError(f"cannot build {config_key}._target_={merged['_target_']}: {error}") from error


def _plain(value: Any) -> Any:
    if isinstance(value, DictConfig) or OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


# ----------------------------------------------------------------------------------------------
# reading graphs
# ----------------------------------------------------------------------------------------------
def _load_tu(cfg: Mapping[str, Any], cache_dir: Path) -> list[Data]:
    data_dir = cfg.get("data_dir")
    use_node_attr = cfg.get("use_node_attr", False)
    if not isinstance(use_node_attr, bool):
        raise ValueError(f"dataset.use_node_attr must be true or false, got {use_node_attr!r}")
    return load_tu_graphs(
        str(cfg["name"]), data_dir=data_dir, root=cache_dir / "tu", download=bool(cfg.get("download", False)),
        use_node_attr=use_node_attr,
    )


def _gcb_stem(file: str) -> str:
    """``hard_small.npz`` / ``hard_small.plain.npz`` → ``hard_small`` (the benchmark's file name)."""
    name = Path(file).name
    for suffix in (".plain.npz", ".npz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _gcb_file(data_dir: Path, file: str) -> Path:
    """Return the GCB file to read: ``<stem>.plain.npz`` next to ``file`` when present, else ``file``.

    Raises a ``FileNotFoundError`` naming ``dataset.file=`` and the ``.npz`` files of
    ``data_dir`` when neither exists (GCB ships several files; ``hard_small.npz`` is only the
    default).
    """
    path = data_dir / file
    plain = gcb_plain_path(path)
    if plain.is_file() and not path.name.endswith(".plain.npz"):
        return plain
    if not path.is_file() and data_dir.is_dir():
        found = sorted({_gcb_stem(p.name) + ".npz" for p in data_dir.glob("*.npz")})
        hint = (
            f"it holds {', '.join(found)}: choose one with dataset.file=NAME (e.g. dataset.file={found[0]})"
            if found else "it holds no .npz file"
        )
        raise FileNotFoundError(
            f"GCB file {file} not found in --data-dir {data_dir} (nor {plain.name}); {hint}. "
            f"The benchmark ships several files (hard_small.npz is only the default of dataset.file); "
            f"download them from {GCB_SOURCE}"
        )
    return path


def load_graphs(cfg: Mapping[str, Any], cache_dir: str | os.PathLike | None = None) -> list[Data] | dict[str, list[Data]]:
    """Read the graphs of a data set config (``dataset/graph/<NAME>.yaml``).

    Parameters
    ----------
    cfg : mapping
        The ``dataset`` config: ``name``, ``loader`` (``tu``/``gcb``/``zinc``), ``data_dir``,
        ``file`` (GCB: the converted ``<stem>.plain.npz`` next to it is read when present),
        ``target`` (ZINC), ``download`` and ``use_node_attr`` (TU: keep the continuous node
        attributes next to the one-hot node labels, PyG's ``TUDataset(use_node_attr=True)``),
        ``max_graphs``, ``subset``.
    cache_dir : path-like, optional
        Cache folder (TU raw files are copied there).

    Returns
    -------
    list of Data or dict of str to list of Data
        All graphs (random splits), or ``{"train", "val", "test"}`` (fixed splits).
    """
    cfg = _plain(cfg)
    loader = cfg.get("loader")
    if loader not in LOADERS:
        raise ValueError(f"dataset.loader must be one of {LOADERS}, got {loader!r}")
    cache = resolve_cache_dir(cache_dir)
    data_dir = cfg.get("data_dir")
    if loader == "tu":
        graphs: list[Data] | dict[str, list[Data]] = _load_tu(cfg, cache)
    elif loader == "graphuniverse":  # generated (graph-universe), cached under <cache>/graphuniverse
        from topomodelx_attention.harness.graphuniverse import load_graphuniverse

        graphs = load_graphuniverse(cfg, cache)
    elif data_dir is None:
        needed = cfg.get("file", "hard_small.npz") if loader == "gcb" else (
            "smiles_score.csv and indexes_train_val_test.csv"
        )
        raise FileNotFoundError(
            f"data set {cfg['name']} is not bundled: set dataset.data_dir (command line: "
            f"--data-dir DIR) to the folder holding {needed} (benchmarks/README.md says where to "
            "get it)"
        )
    elif loader == "gcb":
        graphs = read_gcb(_gcb_file(Path(data_dir).expanduser(), str(cfg.get("file", "hard_small.npz"))))
    else:
        graphs = read_zinc12k(Path(data_dir).expanduser(), cfg.get("subset"), cfg.get("target", "score"))
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


# ----------------------------------------------------------------------------------------------
# lifting + PE with a cache
# ----------------------------------------------------------------------------------------------
_PROGRESS: contextvars.ContextVar[bool | None] = contextvars.ContextVar("progress_bars", default=None)


@contextlib.contextmanager
def progress_bars(enabled: bool | None) -> Iterator[None]:
    """Show (``True``), hide (``False``) or auto-show (``None``) the lifting progress bars inside the block.

    :func:`process_graphs` (hence :func:`prepare_dataset`) uses it when called with
    ``progress=None``; outside any block the bar is drawn only when stderr is a terminal. The
    command line's ``train --no-progress-bar`` runs the harness inside ``progress_bars(False)``.

    Parameters
    ----------
    enabled : bool or None
        ``None``: only on a terminal.
    """
    token = _PROGRESS.set(enabled)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def process_graphs(
    graphs: Sequence[Data],
    lifting: Any,
    pe: Any = None,
    desc: str = "lifting",
    chunk_size: int = 256,
    progress: bool | None = None,
) -> list[ComplexData]:
    """Lift graphs (``lifting.lift_many`` in chunks) and apply a PE, with a progress bar.

    The bar counts graphs: each graph once, when it is lifted and encoded (total
    ``len(graphs)``).

    Parameters
    ----------
    graphs : sequence of torch_geometric.data.Data
        Input graphs.
    lifting : transform
        A lifting with ``lift_many`` (or a plain per-graph transform).
    pe : transform, optional
        Positional encoding applied to every complex.
    desc : str, default="lifting"
        Progress bar label.
    chunk_size : int, default=256
        Graphs per ``lift_many`` call.
    progress : bool, optional
        Draw the progress bar; default: as set by :func:`progress_bars`, else only when stderr
        is a terminal.

    Returns
    -------
    list of ComplexData
        One complex per graph.
    """
    if progress is None:
        progress = _PROGRESS.get()
    out: list[ComplexData] = []
    # tqdm's disable=None: drawn only when its stream (stderr) is a terminal
    disable = None if progress is None else not progress
    label = desc if pe is None else f"{desc}: lifting + {type(pe).__name__}"
    with tqdm(total=len(graphs), desc=label, unit="graph", leave=False, disable=disable) as bar:
        for start in range(0, len(graphs), chunk_size):
            chunk = list(graphs[start : start + chunk_size])
            lifted = lifting.lift_many(chunk) if hasattr(lifting, "lift_many") else [lifting(g) for g in chunk]
            if pe is not None:
                lifted = [pe(complex_) for complex_ in lifted]
            out.extend(lifted)
            bar.update(len(chunk))
    return out


def _tu_raw_dir(name: str, data_dir: Any, root: Path) -> Path | None:
    """Folder :func:`~topomodelx_attention.data.datasets.load_tu_graphs` reads, or ``None`` (not there yet)."""
    if name in EMBEDDED_DATASETS and data_dir is None:
        return embedded_raw_dir(name)
    if data_dir is not None:
        try:
            return find_tu_raw(name, data_dir)
        except FileNotFoundError:
            return None  # the reader raises its own error
    raw = root / name / "raw"
    return raw if (raw / f"{name}_A.txt").is_file() else None


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
    cfg = _plain(dataset_cfg)
    loader, name, data_dir = cfg.get("loader"), str(cfg.get("name")), cfg.get("data_dir")
    if loader == "graphuniverse":
        return []  # generated, not read: the generation parameters are in the key
    if loader == "tu":
        raw = _tu_raw_dir(name, data_dir, resolve_cache_dir(cache_dir) / "tu")
        if raw is None:
            return None
        files = [p for p in raw.iterdir() if p.name.startswith(f"{name}_") and p.name.endswith(".txt") and p.is_file()]
    elif loader in ("gcb", "zinc") and data_dir is not None:
        folder = Path(data_dir).expanduser()
        if loader == "gcb":
            files = [_gcb_file(folder, str(cfg.get("file", "hard_small.npz")))]
        else:
            files = [folder / "smiles_score.csv", folder / "indexes_train_val_test.csv"]
        if not all(p.is_file() for p in files):
            return None
    else:
        return None
    return sorted(p.resolve() for p in files)


_DIGESTS: dict[tuple[Any, ...], str] = {}
"""SHA-256 of files already hashed by this process, by (path, device, inode, size, mtime, ctime)."""


def data_fingerprint(files: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    """Path, size, modification time and SHA-256 digest of every file (what the cache key hashes).

    Parameters
    ----------
    files : sequence of path-like
        The raw files of a data set (:func:`data_files`).

    Returns
    -------
    list of dict
        ``{"path", "size", "mtime_ns", "sha256"}`` per file, in the given order.
    """
    out = []
    for file in files:
        path = Path(file).resolve()
        stat = path.stat()
        # ctime changes with every write and every utime: a digest is reused only for the same bytes
        memo = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        digest = _DIGESTS.get(memo)
        if digest is None:
            sha = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(block)
            digest = _DIGESTS[memo] = sha.hexdigest()
        out.append({"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest})
    return out


def cache_key(
    dataset_cfg: Mapping[str, Any],
    lifting_cfg: Any,
    pe_cfg: Any,
    lifting: Any = None,
    pe: Any = None,
    *,
    sources: Sequence[Mapping[str, Any]] | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> str:
    """Hash of everything that determines the processed complexes.

    That is the data set's reading options, the lifting and PE configurations (and ``repr``),
    and where the data came from: the resolved path, size, modification time and SHA-256 of
    every raw file read (:func:`data_fingerprint`). Another ``--data-dir`` with the same data
    set name, or an edited or replaced file, gives another key.

    Parameters
    ----------
    dataset_cfg : mapping
        ``dataset`` config (reading options: name, loader, file, target, subset, max_graphs,
        lifting_kwargs, and use_node_attr when true).
    lifting_cfg, pe_cfg : mapping or None
        Lifting and PE configs.
    lifting, pe : object, optional
        The instantiated transforms (their ``repr`` is hashed too).
    sources : sequence of mapping, optional
        :func:`data_fingerprint` of the raw files (default: computed from ``dataset_cfg``).
    cache_dir : path-like, optional
        Cache folder (where downloaded TU files are), when ``sources`` is not given.

    Returns
    -------
    str
        Hex digest (first 16 characters).

    Raises
    ------
    FileNotFoundError
        When ``sources`` is not given and the raw files are not found.
    """
    dataset_cfg = _plain(dataset_cfg)
    if sources is None:
        files = data_files(dataset_cfg, cache_dir)
        if files is None:
            raise FileNotFoundError(
                f"the raw files of data set {dataset_cfg.get('name')} are not found (dataset.data_dir="
                f"{dataset_cfg.get('data_dir')!r}): the cache key covers their content"
            )
        sources = data_fingerprint(files)
    reading = {
        key: dataset_cfg.get(key)
        for key in ("name", "loader", "file", "target", "subset", "max_graphs", "lifting_kwargs")
    }
    if dataset_cfg.get("loader") == "graphuniverse":  # task, generation parameters, split
        from topomodelx_attention.harness.graphuniverse import cache_fields

        reading["graphuniverse"] = cache_fields(dataset_cfg)
    if dataset_cfg.get("use_node_attr"):  # TU: node attributes kept next to the labels
        reading["use_node_attr"] = True
    payload = {
        "version": CACHE_VERSION,
        "dataset": reading,
        "sources": [dict(source) for source in sources],
        "lifting": _plain(lifting_cfg),
        "pe": _plain(pe_cfg),
        "lifting_repr": repr(lifting) if lifting is not None else None,
        "pe_repr": repr(pe) if pe is not None else None,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


class _CacheError(ValueError):
    """A cache file that is not a valid :func:`save_cache` file."""


def _pack_complexes(complexes: Sequence[ComplexData]) -> dict[str, Any]:
    """Complexes as a few concatenated plain tensors per key (what ``weights_only`` loads)."""
    keys = sorted({key for c in complexes for key in c.keys()})
    packed: dict[str, Any] = {}
    for key in keys:
        present = torch.tensor([key in c for c in complexes], dtype=torch.bool)
        values = [c[key] for c in complexes if key in c]
        first = values[0]
        if isinstance(first, Tensor) and first.layout == torch.sparse_coo and first.dim() == 2 and first.dense_dim() == 0:
            if any(not isinstance(v, Tensor) or v.layout != torch.sparse_coo or v.dim() != 2 or v.dtype != first.dtype for v in values):
                raise TypeError(f"cannot cache {key!r}: mixed sparse and other values")
            entry = {
                "kind": "sparse",
                "indices": torch.cat([v._indices() for v in values], dim=1),
                "values": torch.cat([v._values() for v in values]),
                "sizes": torch.tensor([list(v.shape) for v in values], dtype=torch.long).view(-1, 2),
                "nnz": torch.tensor([v._nnz() for v in values], dtype=torch.long),
                "coalesced": torch.tensor([v.is_coalesced() for v in values], dtype=torch.bool),
            }
        elif isinstance(first, Tensor) and first.layout == torch.strided:
            if any(not isinstance(v, Tensor) or v.layout != torch.strided or v.dim() != first.dim() or v.dtype != first.dtype for v in values):
                raise TypeError(f"cannot cache {key!r}: tensors of different kinds")
            entry = {
                "kind": "dense",
                "values": torch.cat([v.reshape(-1) for v in values]),
                "shapes": torch.tensor([list(v.shape) for v in values], dtype=torch.long).view(len(values), first.dim()),
            }
        elif isinstance(first, (bool, int, float)) and all(type(v) is type(first) for v in values):
            entry = {"kind": type(first).__name__, "values": list(values)}
        else:
            raise TypeError(f"cannot cache {key!r} of type {type(first).__name__}")
        entry["present"] = present
        packed[key] = entry
    return packed


def _unpack_complexes(packed: Any, count: int) -> list[ComplexData]:
    """Inverse of :func:`_pack_complexes`; validates every entry (raises :class:`_CacheError`)."""
    if not isinstance(packed, dict):
        raise _CacheError(f"'complexes' is a {type(packed).__name__}, expected a dict")
    items: list[dict[str, Any]] = [{} for _ in range(count)]
    for key, entry in packed.items():
        if not isinstance(key, str) or not isinstance(entry, dict):
            raise _CacheError(f"entry {key!r} is not a dict")
        present = entry.get("present")
        if not isinstance(present, Tensor) or present.dtype != torch.bool or present.shape != (count,):
            raise _CacheError(f"entry {key!r} has no valid 'present' mask")
        owners = present.nonzero().view(-1).tolist()
        kind = entry.get("kind")
        if kind == "dense":
            values, shapes = entry.get("values"), entry.get("shapes")
            if not (isinstance(values, Tensor) and isinstance(shapes, Tensor) and values.dim() == 1
                    and shapes.dtype == torch.long and shapes.dim() == 2 and len(shapes) == len(owners)
                    and bool((shapes >= 0).all())):
                raise _CacheError(f"dense entry {key!r} is malformed")
            numels = shapes.prod(dim=1) if shapes.size(1) else torch.ones(len(owners), dtype=torch.long)
            if int(numels.sum()) != values.numel():
                raise _CacheError(f"dense entry {key!r}: shapes and values differ in size")
            for owner, part, shape in zip(owners, values.split(numels.tolist()), shapes.tolist()):
                items[owner][key] = part.view(shape)
        elif kind == "sparse":
            indices, values, sizes, nnz, coalesced = (
                entry.get(name) for name in ("indices", "values", "sizes", "nnz", "coalesced")
            )
            tensors = (indices, values, sizes, nnz, coalesced)
            if not (all(isinstance(t, Tensor) for t in tensors) and indices.dtype == torch.long
                    and indices.dim() == 2 and indices.size(0) == 2 and values.dim() == 1
                    and values.numel() == indices.size(1) and sizes.shape == (len(owners), 2)
                    and nnz.shape == (len(owners),) and coalesced.shape == (len(owners),)
                    and bool((nnz >= 0).all()) and bool((sizes >= 0).all()) and int(nnz.sum()) == values.numel()):
                raise _CacheError(f"sparse entry {key!r} is malformed")
            owner = torch.repeat_interleave(torch.arange(len(nnz)), nnz)  # matrix of each entry
            if indices.numel() and (
                int(indices.min()) < 0 or bool((indices[0] >= sizes[owner, 0]).any())
                or bool((indices[1] >= sizes[owner, 1]).any())
            ):
                raise _CacheError(f"sparse entry {key!r} has indices outside its matrices")
            counts = nnz.tolist()
            for owner, idx, val, size, flag in zip(
                owners, indices.split(counts, dim=1), values.split(counts), sizes.tolist(), coalesced.tolist()
            ):
                items[owner][key] = torch.sparse_coo_tensor(idx, val, size, is_coalesced=bool(flag), check_invariants=False)
        elif kind in ("bool", "int", "float"):
            values = entry.get("values")
            expected = {"bool": bool, "int": int, "float": float}[kind]
            if not isinstance(values, list) or len(values) != len(owners) or any(type(v) is not expected for v in values):
                raise _CacheError(f"entry {key!r} is malformed")
            for owner, value in zip(owners, values):
                items[owner][key] = value
        else:
            raise _CacheError(f"entry {key!r} has an unknown kind {kind!r}")
    return [ComplexData(**item) for item in items]


def save_cache(payload: Mapping[str, Any], path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> None:
    """Write processed complexes as plain tensors, atomically (a temporary file, then a rename).

    The temporary file is created next to ``path`` with an unpredictable name and exclusive
    creation (:func:`topomodelx_attention.files.atomic_output`): a file or symlink planted at
    a guessed name is never followed or overwritten, nor is a link planted at a folder between
    ``root`` and ``path``.

    The file holds only tensors, lists, ints and strings, so :func:`load_cache` reads it with
    ``torch.load(weights_only=True)``: nothing in a cache folder is ever unpickled.

    Parameters
    ----------
    payload : mapping
        ``{"complexes": list of ComplexData, "split": dict of str to array or None}``.
    path : path-like
        Cache file.
    root : path-like, optional
        The cache folder (default: the folder of ``path``).
    """
    path = Path(path)
    complexes = list(payload["complexes"])
    split = payload.get("split")
    plain = {
        "format": CACHE_FORMAT,
        "count": len(complexes),
        "complexes": _pack_complexes(complexes),
        "split": None if split is None else {k: torch.as_tensor(np.asarray(v), dtype=torch.long) for k, v in split.items()},
    }
    # <name>.<host>.<pid>.<random>.tmp, created exclusively (a planted symlink is never followed);
    # host and pid let _clean_orphans tell a killed save from a running one
    with atomic_output(path, root=root, prefix=f"{path.name}.{socket.gethostname()}.{os.getpid()}.") as handle:
        torch.save(plain, handle)


def load_cache(path: str | os.PathLike) -> dict[str, Any]:
    """Read a :func:`save_cache` file with ``torch.load(weights_only=True)`` and validate it.

    Parameters
    ----------
    path : path-like
        Cache file.

    Returns
    -------
    dict
        ``{"complexes": list of ComplexData, "split": dict of str to numpy.ndarray or None}``.

    Raises
    ------
    ValueError
        When the file is truncated, damaged, not a cache file, or holds anything but plain
        tensors (a pickle naming any other global is refused by ``weights_only``, unexecuted).
    """
    path = Path(path)
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, garbage, foreign pickles: all invalid
        raise _CacheError(f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from error
    if not isinstance(raw, dict) or raw.get("format") != CACHE_FORMAT:
        raise _CacheError(f"not a cache file of this version (expected format {CACHE_FORMAT!r})")
    count = raw.get("count")
    if not isinstance(count, int) or count < 0:
        raise _CacheError("no valid complex count")
    complexes = _unpack_complexes(raw.get("complexes"), count)
    split = raw.get("split")
    if split is not None:
        if not isinstance(split, dict) or set(split) != set(SPLITS):
            raise _CacheError(f"'split' must be None or a dict with keys {list(SPLITS)}")
        for name, idx in split.items():
            if not isinstance(idx, Tensor) or idx.dtype != torch.long or idx.dim() != 1 or (
                idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= count)
            ):
                raise _CacheError(f"split {name!r} is not a vector of complex indices")
        split = {name: idx.numpy() for name, idx in split.items()}
    return {"complexes": complexes, "split": split}


def _temporary_pid(name: str, host: str) -> int | None:
    """Process id in a temporary name of this host (``<name>.<host>.<pid>[.<random>].tmp``), else None."""
    match = re.fullmatch(rf"(?P<name>.+)\.{re.escape(host)}\.(?P<pid>\d+)(?:\.[A-Za-z0-9_]+)?\.tmp", name)
    return int(match["pid"]) if match else None


def _clean_orphans(folder: Path, max_age: float = 24 * 3600.0) -> None:
    """Delete temporary files of saves that were killed (this host: their process is gone).

    Temporary names are ``<name>.<host>.<pid>.<random>.tmp`` (:func:`save_cache`; older
    versions wrote ``<name>.<host>.<pid>.tmp``); those of other hosts, or of no known
    pattern, are deleted once older than ``max_age`` seconds.
    """
    if not folder.is_dir():
        return
    host = socket.gethostname()
    for tmp in folder.glob("*.tmp"):
        pid = _temporary_pid(tmp.name, host)
        try:
            if pid is not None:
                if pid == os.getpid():
                    continue
                try:
                    os.kill(pid, 0)
                    continue  # a running save of another process
                except ProcessLookupError:
                    pass
                except PermissionError:
                    continue
            elif time.time() - tmp.lstat().st_mtime < max_age:
                continue  # possibly a save in progress on another machine (shared cache)
            tmp.unlink()
        except OSError:
            continue


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: Sequence[Path]) -> None:
    """Remove the folders (deepest first) that this run created and left empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (another process wrote there) or already gone
            return


def _check_writable(folder: Path, root: Path) -> None:
    """Raise a ``PermissionError`` naming the cache folder when files cannot be written there."""
    try:
        check_writable(folder, root=root)
    except OSError as error:
        raise PermissionError(
            f"the cache folder {folder} is not writable ({error.strerror or error}): pass a writable "
            "--cache-dir DIR (config: paths.cache_dir) or set $TOPOMODELX_ATTENTION_DATA"
        ) from error


_LOSSES = {"classification": ("cross_entropy",), "regression": ("mae", "mse")}
_METRICS = {"classification": ("accuracy",), "regression": ("mae", "mse")}
_EXTRA_METRICS = {"mse_per_triangle": "regression"}


def _node_labels(cfg: Mapping[str, Any], complexes: Sequence[ComplexData], labels: list[Tensor]) -> Tensor:
    """Node-level labels: one per vertex of every complex (raises naming the first bad complex)."""
    for i, (complex_, label) in enumerate(zip(complexes, labels)):
        n_0 = complex_.num_cells(0)
        if (label.dim() > 1 and label.shape[1:].numel() != 1) or label.reshape(-1).numel() != n_0:
            raise ValueError(
                f"data set {cfg['name']} is a node-level task (dataset.task_level=node) but graph "
                f"{i} has y of shape {tuple(label.shape)} for {n_0} vertices: give one label per vertex"
            )
    return torch.cat([label.reshape(-1, 1) for label in labels])


def _infer_info(cfg: Mapping[str, Any], complexes: Sequence[ComplexData], pe: Any) -> DatasetInfo:
    if cfg.get("loader") == "graphuniverse":  # the challenge task sets the harness task
        from topomodelx_attention.harness.graphuniverse import task_protocol

        cfg = task_protocol(cfg)
    if not complexes:
        raise ValueError(f"data set {cfg['name']} has no graphs")
    first = complexes[0]
    max_rank = first.max_rank
    in_channels = []
    for rank in range(max_rank + 1):
        key = f"x_{rank}"
        if key not in first:
            raise ValueError(f"the lifted complexes have no {key}: the lifting must lift features")
        in_channels.append(int(first[key].shape[1]))
    categorical = list(cfg.get("categorical") or [])
    categorical = (categorical + [None] * (max_rank + 1))[: max_rank + 1]
    for rank, cards in enumerate(categorical):
        is_integer = not first[f"x_{rank}"].is_floating_point()
        if is_integer and cards is None:
            raise ValueError(
                f"x_{rank} of {cfg['name']} holds integer codes: set dataset.categorical[{rank}] "
                "to the number of categories of each column"
            )
        if not is_integer:
            categorical[rank] = None
    labels = [c.y for c in complexes if "y" in c and c.y is not None]
    if len(labels) != len(complexes):
        raise ValueError(f"data set {cfg['name']}: {len(complexes) - len(labels)} graphs have no label y")
    level = cfg.get("task_level") or "graph"
    if level not in ("graph", "node"):
        raise ValueError(f"dataset.task_level must be 'graph' or 'node', got {level!r}")
    if level == "node":
        y = _node_labels(cfg, complexes, labels)
    else:
        y = torch.cat([label.reshape(len(label), -1) if label.dim() else label.view(1, 1) for label in labels])
    task = cfg.get("task") or ("regression" if y.is_floating_point() else "classification")
    if task not in ("classification", "regression"):
        raise ValueError(f"dataset.task must be 'classification' or 'regression', got {task!r}")
    if level == "node" and task != "classification":
        raise ValueError("dataset.task_level=node supports dataset.task=classification only")
    metric = cfg.get("monitor_metric") or ("accuracy" if task == "classification" else "mae")
    if metric not in _METRICS[task]:
        raise ValueError(f"dataset.monitor_metric of a {task} task must be one of {_METRICS[task]}, got {metric!r}")
    loss = cfg.get("loss") or _LOSSES[task][0]
    if loss not in _LOSSES[task]:
        raise ValueError(f"dataset.loss of a {task} task must be one of {_LOSSES[task]}, got {loss!r}")
    metrics = tuple(cfg.get("metrics") or ())
    for name in metrics:
        if _EXTRA_METRICS.get(name) != task or level != "graph":
            raise ValueError(
                f"dataset.metrics: {name!r} is not a metric of a {level}-level {task} task "
                f"(known: {sorted(_EXTRA_METRICS)}, for graph-level regression)"
            )
    pe_channels = node_id_channels = None
    if pe is not None and "node_id" in first:  # TokenGT identifiers, not a pe_r encoding
        node_id_channels = int(first["node_id"].shape[1])
    elif pe is not None:
        pe_channels = getattr(pe, "dim", None)
        if pe_channels is None:
            if "pe_0" not in first:
                raise ValueError(f"the positional encoding {pe!r} wrote no pe_0")
            pe_channels = first["pe_0"].shape[1]
    num_classes = cfg.get("num_classes")
    if task == "classification":
        if y.is_floating_point() and not bool((y == y.round()).all()):
            raise ValueError(f"data set {cfg['name']} has non-integer labels: set dataset.task=regression")
        found = int(y.max()) + 1 if y.numel() else 0
        if int(y.min()) < 0:
            raise ValueError(f"data set {cfg['name']} has negative class labels")
        if num_classes is None:
            num_classes = found  # read from the files
        elif found > int(num_classes):
            raise ValueError(
                f"data set {cfg['name']} has labels up to {found - 1} but dataset.num_classes={num_classes}"
            )
    elif num_classes is None:
        num_classes = y.size(1)
    name = str(cfg["name"])
    if cfg.get("loader") == "gcb":  # GCB ships several files: name the one read (tables, folders)
        name = f"{name}-{_gcb_stem(str(cfg.get('file') or 'hard_small.npz'))}"
    return DatasetInfo(
        name=name,
        task=task,
        out_channels=int(num_classes),
        in_channels=in_channels,
        categorical=[None if c is None else [int(v) for v in c] for c in categorical],
        pe_channels=None if pe_channels is None else int(pe_channels),
        metric=metric,
        node_id_channels=node_id_channels,
        task_level=level,
        loss=loss,
        metrics=metrics,
    )


def prepare_dataset(
    dataset_cfg: Mapping[str, Any],
    lifting_cfg: Any,
    pe_cfg: Any = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
) -> PreparedDataset:
    """Read, lift and encode a data set, or load it from the cache.

    Parameters
    ----------
    dataset_cfg : mapping
        ``dataset`` config.
    lifting_cfg : mapping
        Lifting spec (``_target_`` and arguments); the data set's ``lifting_kwargs`` are added.
    pe_cfg : mapping, optional
        Positional encoding spec.
    cache_dir : path-like, optional
        Cache folder (see :func:`resolve_cache_dir`).
    use_cache : bool, default=True
        Read and write ``<cache_dir>/processed/<NAME>/<key>.pt``.

    Returns
    -------
    PreparedDataset
        Complexes, info and split protocol.
    """
    dataset_cfg = _plain(dataset_cfg)
    lifting_kwargs = dataset_cfg.get("lifting_kwargs") or {}
    check_targets(lifting_kwargs, "dataset.lifting_kwargs", instantiated=True)
    lifting = instantiate_transform(lifting_cfg, config_key="model.lifting", **lifting_kwargs)
    if lifting is None:
        raise ValueError("model.lifting is required (a graph → complex lifting)")
    pe = instantiate_transform(pe_cfg, config_key="model.pe")
    cache = resolve_cache_dir(cache_dir)
    folder = cache / "processed" / str(dataset_cfg["name"])
    split_cfg = dataset_cfg.get("split") or {}
    payload = cache_file = sources = None
    created = _missing_folders(folder)

    def entry(fingerprint: list[dict[str, Any]]) -> Path:
        return folder / f"{cache_key(dataset_cfg, lifting_cfg, pe_cfg, lifting, pe, sources=fingerprint)}.pt"

    if use_cache:
        _check_writable(folder, cache)  # before the lifting: fail fast
        _clean_orphans(folder)
        files = data_files(dataset_cfg, cache)  # None: not there yet (a TU download), or missing
        if files is not None:
            sources = data_fingerprint(files)
            cache_file = entry(sources)
        if cache_file is not None and cache_file.is_file():
            try:
                payload = load_cache(cache_file)
            except _CacheError as error:
                warnings.warn(
                    f"the cache file {cache_file} is invalid ({error}); it was deleted and is "
                    "being rebuilt", stacklevel=2,
                )
                cache_file.unlink(missing_ok=True)
    if payload is None:
        try:
            payload = _process(dataset_cfg, lifting, pe, cache)
        except BaseException:
            _remove_empty(created)  # e.g. a misspelled name: no empty processed/<name>/ left behind
            raise
        if use_cache:
            files = data_files(dataset_cfg, cache)
            if files is None:
                raise RuntimeError(f"the raw files of {dataset_cfg['name']} were read but cannot be located for the cache key")
            after = data_fingerprint(files)
            if sources is not None and after != sources:
                warnings.warn(
                    f"the files of data set {dataset_cfg['name']} changed while they were read; "
                    "the complexes are not cached (run again to cache them)", stacklevel=2,
                )
                cache_file = None
            else:
                sources, cache_file = after, entry(after)
                save_cache(payload, cache_file, root=cache)
                description = {
                    "dataset": dataset_cfg, "sources": sources, "lifting": _plain(lifting_cfg),
                    "pe": _plain(pe_cfg), "lifting_repr": repr(lifting), "pe_repr": repr(pe),
                }
                write_text(cache_file.with_suffix(".json"), json.dumps(description, indent=2, default=str), root=cache)
    complexes = payload["complexes"]
    fixed = payload.get("split")
    if fixed is None and split_cfg.get("type", "random") == "fixed":
        raise ValueError(f"dataset.split.type=fixed but {dataset_cfg['name']} has no split of its own")
    if fixed is not None and split_cfg.get("type", "fixed") == "random":
        fixed = None  # a random split over the union of the file's splits
    info = _infer_info(dataset_cfg, complexes, pe)
    return PreparedDataset(
        info=info,
        complexes=complexes,
        fixed_split=None if fixed is None else {k: np.asarray(v) for k, v in fixed.items()},
        split_props=(float(split_cfg.get("train_prop", 0.5)), float(split_cfg.get("val_prop", 0.25))),
        cache_file=cache_file,
    )


def _process(dataset_cfg: Mapping[str, Any], lifting: Any, pe: Any, cache: Path) -> dict[str, Any]:
    """Read and lift (no cache). Returns ``{"complexes": [...], "split": {...} or None}``."""
    graphs = load_graphs(dataset_cfg, cache)
    name = str(dataset_cfg["name"])
    if isinstance(graphs, dict):
        complexes, split, offset = [], {}, 0
        for part in SPLITS:
            lifted = process_graphs(graphs[part], lifting, pe, desc=f"{name} {part}")
            split[part] = np.arange(offset, offset + len(lifted))
            offset += len(lifted)
            complexes.extend(lifted)
        return {"complexes": complexes, "split": split}
    return {"complexes": process_graphs(graphs, lifting, pe, desc=name), "split": None}


def prune_keys(complexes: Iterable[ComplexData], keep: Iterable[str]) -> None:
    """Delete, in place, every key a model does not read (batching gets much faster).

    ``y``, ``shape`` and ``num_nodes`` are always kept.

    Parameters
    ----------
    complexes : iterable of ComplexData
        Complexes to prune.
    keep : iterable of str
        Keys to keep.
    """
    keep = set(keep) | set(_ALWAYS_KEPT)
    for complex_ in complexes:
        for key in list(complex_.keys()):
            if key not in keep:
                del complex_[key]
