"""Data sets as lists of lifted complexes for the harness: cached lifting + PE, task info, splits.

:func:`prepare_dataset` asks the data set's family (:func:`~topomodelx_attention.datasets.get_family`,
by ``dataset.loader``) for its graphs, lifts them with the model's lifting (``lift_many``) and
applies its positional encoding, with a progress bar; the result is stored in the complex cache
(:mod:`topomodelx_attention.datasets.cache`: ``<cache_dir>/processed/<NAME>/<key>.pt``, where
``key`` hashes the reading options, the lifting/PE configurations and the raw files read), so
a second run with the same configuration and data reads the cache, and different
configurations, another ``data_dir`` or changed files never collide. :func:`prepare_dataset`
then infers the task (:class:`DatasetInfo`) from the complexes and the family's task defaults.

Protocol (as TopoBench): TU data sets use random 50/25/25 splits drawn per seed
(:func:`random_split`); GCB, ZINC-12k and GraphUniverse keep the split of their files.
Transductive node tasks (``dataset.task_level=transductive``: one large graph, every vertex
labelled, e.g. the heterophilous benchmark) lift the one graph once and keep its fixed split
masks (``PreparedDataset.masks``); seed ``s`` runs split ``s``.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from torch import Tensor
from torch.utils.data import Dataset
from torch_geometric.data import Data
from tqdm import tqdm

from topomodelx_attention.data import ComplexData
from topomodelx_attention.datasets.cache import (
    CacheError,
    cache_key,
    check_cache_writable,
    clean_orphans,
    data_fingerprint,
    load_cache,
    missing_folders,
    remove_empty,
    save_cache,
)
from topomodelx_attention.datasets.registry import (
    SPLITS,
    data_files,
    get_family,
    load_graphs,
    plain,
    resolve_cache_dir,
)
from topomodelx_attention.files import write_text
from topomodelx_attention.harness.config import check_targets

__all__ = [
    "ComplexDataset",
    "DatasetInfo",
    "PreparedDataset",
    "instantiate_transform",
    "prepare_dataset",
    "process_graphs",
    "progress_bars",
    "prune_keys",
    "random_split",
]

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
        Monitored metric (``"accuracy"``, ``"roc_auc"`` (two classes: the area under the ROC
        curve of the positive class's probability), ``"mae"`` or ``"mse"``).
    node_id_channels : int or None, default=None
        Width of ``node_id`` (TokenGT node identifiers; ``None`` when the PE wrote none).
    task_level : {"graph", "node", "transductive"}, default="graph"
        One label per complex (``y`` of shape ``(1,)`` or ``(1, d)``) or one class per vertex
        (``y`` of shape ``(n_0,)``): ``"node"``, inductive node classification, every vertex of
        a complex belongs to the complex's split; ``"transductive"``, one complex whose vertices
        are split by masks (the loss and metrics read the vertices of ``node_mask``).
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
    masks : dict of str to numpy.ndarray or None
        Transductive tasks: the split masks of the one complex, ``{"train", "val", "test"}``,
        each bool of shape ``(num_splits, n_0)``; ``None`` otherwise.
    """

    info: DatasetInfo
    complexes: list[ComplexData]
    fixed_split: dict[str, np.ndarray] | None = None
    split_props: tuple[float, float] = (0.5, 0.25)
    cache_file: Path | None = None
    masks: dict[str, np.ndarray] | None = None

    @property
    def num_splits(self) -> int | None:
        """Fixed splits of a transductive task (its seeds are ``0..num_splits - 1``), else ``None``."""
        return None if self.masks is None else int(self.masks["train"].shape[0])

    def split(self, seed: int) -> tuple[ComplexDataset, ComplexDataset, ComplexDataset]:
        """Return the train, validation and test sets of one seed.

        Transductive tasks: the seed is the split index; each part is the one complex (a
        shallow copy) with ``node_mask``, bool of shape ``(n_0,)``, its vertices of that part.

        Parameters
        ----------
        seed : int
            Data seed of random splits (ignored by fixed splits; the split index of a
            transductive task).

        Returns
        -------
        tuple of ComplexDataset
            ``(train, val, test)``.

        Raises
        ------
        ValueError
            A transductive task's seed outside ``0..num_splits - 1``.
        """
        if self.masks is not None:
            splits = self.num_splits
            if isinstance(seed, bool) or not 0 <= int(seed) < splits:
                raise ValueError(
                    f"data set {self.info.name} has {splits} fixed splits and each seed runs one: "
                    f"seeds must be split indices 0..{splits - 1}, got {seed!r} (e.g. seeds=[0,1,2])"
                )
            parts = []
            for name in SPLITS:
                complex_ = copy.copy(self.complexes[0])
                complex_.node_mask = torch.from_numpy(np.ascontiguousarray(self.masks[name][int(seed)]))
                parts.append(ComplexDataset([complex_]))
            return tuple(parts)
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

    resolved = plain(spec)
    if not isinstance(resolved, Mapping) or "_target_" not in resolved:
        raise ValueError(f"a transform config needs a _target_ (a class path), got {config_key}={resolved!r}")
    check_targets(resolved, config_key)
    extra = {key: plain(value) for key, value in extra.items()}
    check_targets(extra, config_key, instantiated=True)
    objects = {"allow_objects": True}  # as hydra's own merge of keyword arguments (Python objects)
    merged = OmegaConf.merge(OmegaConf.create(resolved, flags=objects), OmegaConf.create(extra, flags=objects))
    merged = OmegaConf.to_container(merged, resolve=True)
    check_targets(merged, config_key)  # what hydra receives: no interpolation, no other target
    try:
        return instantiate(OmegaConf.create(merged, flags=objects))
    except InstantiationException as error:
        raise ValueError(f"cannot build {config_key}._target_={merged['_target_']}: {error}") from error


# ----------------------------------------------------------------------------------------------
# reading graphs
# ----------------------------------------------------------------------------------------------


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


_LOSSES = {"classification": ("cross_entropy",), "regression": ("mae", "mse")}
_METRICS = {"classification": ("accuracy", "roc_auc"), "regression": ("mae", "mse")}
_LEVELS = ("graph", "node", "transductive")
_MASK_KEYS = {"train": "train_masks", "val": "val_masks", "test": "test_masks"}
_EXTRA_METRICS = {"mse_per_triangle": "regression"}


def _node_labels(cfg: Mapping[str, Any], complexes: Sequence[ComplexData], labels: list[Tensor]) -> Tensor:
    """Node-level labels: one per vertex of every complex (raises naming the first bad complex)."""
    for i, (complex_, label) in enumerate(zip(complexes, labels)):
        n_0 = complex_.num_cells(0)
        if (label.dim() > 1 and label.shape[1:].numel() != 1) or label.reshape(-1).numel() != n_0:
            raise ValueError(
                f"data set {cfg['name']} is a node-level task (dataset.task_level={cfg.get('task_level')}) but graph "
                f"{i} has y of shape {tuple(label.shape)} for {n_0} vertices: give one label per vertex"
            )
    return torch.cat([label.reshape(-1, 1) for label in labels])


def _infer_info(cfg: Mapping[str, Any], complexes: Sequence[ComplexData], pe: Any) -> DatasetInfo:
    family = get_family(cfg.get("loader"))
    cfg = family.protocol(cfg)  # the family's task defaults (GraphUniverse: its challenge task)
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
    if level not in _LEVELS:
        raise ValueError(f"dataset.task_level must be one of {_LEVELS}, got {level!r}")
    if level == "transductive" and len(complexes) != 1:
        raise ValueError(
            f"data set {cfg['name']} is a transductive task (dataset.task_level=transductive): its "
            f"family must give one graph, got {len(complexes)}"
        )
    if level != "graph":
        y = _node_labels(cfg, complexes, labels)
    else:
        y = torch.cat([label.reshape(len(label), -1) if label.dim() else label.view(1, 1) for label in labels])
    task = cfg.get("task") or ("regression" if y.is_floating_point() else "classification")
    if task not in ("classification", "regression"):
        raise ValueError(f"dataset.task must be 'classification' or 'regression', got {task!r}")
    if level != "graph" and task != "classification":
        raise ValueError(f"dataset.task_level={level} supports dataset.task=classification only")
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
    if level == "transductive" and not cfg.get("monitor_metric") and int(num_classes) == 2:
        metric = "roc_auc"  # the heterophilous benchmark's metric for two classes
    if metric == "roc_auc" and int(num_classes) != 2:
        raise ValueError(
            f"dataset.monitor_metric=roc_auc needs two classes, data set {cfg['name']} has "
            f"{num_classes}: use accuracy"
        )
    return DatasetInfo(
        name=family.display_name(cfg),
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
    dataset_cfg = plain(dataset_cfg)
    lifting_kwargs = dataset_cfg.get("lifting_kwargs") or {}
    check_targets(lifting_kwargs, "dataset.lifting_kwargs", instantiated=True)
    lifting = instantiate_transform(lifting_cfg, config_key="model.lifting", **lifting_kwargs)
    if lifting is None:
        raise ValueError("model.lifting is required (a graph → complex lifting)")
    pe = instantiate_transform(pe_cfg, config_key="model.pe")
    get_family(dataset_cfg.get("loader"))  # an unknown dataset.loader fails before any folder is made
    cache = resolve_cache_dir(cache_dir)
    folder = cache / "processed" / str(dataset_cfg["name"])
    split_cfg = dataset_cfg.get("split") or {}
    payload = cache_file = sources = None
    created = missing_folders(folder)

    def entry(fingerprint: list[dict[str, Any]]) -> Path:
        return folder / f"{cache_key(dataset_cfg, lifting_cfg, pe_cfg, lifting, pe, sources=fingerprint)}.pt"

    if use_cache:
        check_cache_writable(folder, cache)  # before the lifting: fail fast
        clean_orphans(folder)
        files = data_files(dataset_cfg, cache)  # None: not there yet (a TU download), or missing
        if files is not None:
            sources = data_fingerprint(files)
            cache_file = entry(sources)
        if cache_file is not None and cache_file.is_file():
            try:
                payload = load_cache(cache_file)
            except CacheError as error:
                warnings.warn(
                    f"the cache file {cache_file} is invalid ({error}); it was deleted and is "
                    "being rebuilt", stacklevel=2,
                )
                cache_file.unlink(missing_ok=True)
    if payload is None:
        try:
            payload = _process(dataset_cfg, lifting, pe, cache)
        except BaseException:
            remove_empty(created)  # e.g. a misspelled name: no empty processed/<name>/ left behind
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
                    "dataset": dataset_cfg, "sources": sources, "lifting": plain(lifting_cfg),
                    "pe": plain(pe_cfg), "lifting_repr": repr(lifting), "pe_repr": repr(pe),
                }
                write_text(cache_file.with_suffix(".json"), json.dumps(description, indent=2, default=str), root=cache)
    complexes = payload["complexes"]
    fixed = payload.get("split")
    if fixed is None and split_cfg.get("type", "random") == "fixed":
        raise ValueError(f"dataset.split.type=fixed but {dataset_cfg['name']} has no split of its own")
    if fixed is not None and split_cfg.get("type", "fixed") == "random":
        fixed = None  # a random split over the union of the file's splits
    info = _infer_info(dataset_cfg, complexes, pe)
    masks = None
    if info.task_level == "transductive":
        if split_cfg.get("type", "fixed_masks") != "fixed_masks":
            raise ValueError(
                f"data set {dataset_cfg['name']} is a transductive task: dataset.split.type must be "
                f"fixed_masks (a run per split mask of its file), got {split_cfg.get('type')!r}"
            )
        masks = _take_masks(info, complexes)
    return PreparedDataset(
        info=info,
        complexes=complexes,
        fixed_split=None if fixed is None else {k: np.asarray(v) for k, v in fixed.items()},
        split_props=(float(split_cfg.get("train_prop", 0.5)), float(split_cfg.get("val_prop", 0.25))),
        cache_file=cache_file,
        masks=masks,
    )


def _take_masks(info: DatasetInfo, complexes: Sequence[ComplexData]) -> dict[str, np.ndarray]:
    """Remove the split masks from the one complex of a transductive task and return them.

    The family's graph carries ``train_masks``, ``val_masks``, ``test_masks``, bool of shape
    ``(num_splits, n_0)`` (the lifting keeps them on the complex, the cache stores them).
    """
    complex_ = complexes[0]
    n_0 = complex_.num_cells(0)
    masks = {}
    for part, key in _MASK_KEYS.items():
        mask = complex_.get(key, None)
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() != 2 or mask.shape[1] != n_0:
            got = "none" if mask is None else f"{getattr(mask, 'dtype', type(mask).__name__)} {tuple(getattr(mask, 'shape', ()))}"
            raise ValueError(
                f"data set {info.name} is a transductive task: its graph needs {key}, bool of shape "
                f"(num_splits, {n_0}) (the family gives the split masks), got {got}"
            )
        masks[part] = mask.numpy()
    if len({m.shape[0] for m in masks.values()}) != 1:
        raise ValueError(f"data set {info.name}: the train, val and test masks hold different numbers of splits")
    for key in _MASK_KEYS.values():
        del complex_[key]
    return masks


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
