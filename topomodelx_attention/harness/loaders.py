"""How a harness run is batched: one full batch, or sampled sub-complexes of one large complex.

A transductive task trains on one complex: :class:`FullBatch` collates it once (and, through
:func:`structure_transform`, prepares the model's structure once); ``dataset.sampler``
(:func:`sampler_options`) trains on batches of target vertices with their k-hop sub-complexes
(:func:`sampled_loaders`, hops defaulting to :func:`model_layers`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import nn

__all__ = ["FullBatch", "model_layers", "sampled_loaders", "sampler_options", "structure_transform"]


class FullBatch:
    """A loader of one batch: every complex of a data set collated once, yielded every epoch.

    Transductive tasks train on one complex: collating it again each epoch (as a
    ``ComplexDataLoader`` would) repeats the same work; this loader does it once, at the first
    iteration, so that the batch's tensors are made in the mode of the loop that reads them
    (evaluation loops run under ``torch.inference_mode``, and some sparse operations refuse to
    mix inference tensors with normal ones).

    Parameters
    ----------
    dataset : sequence of ComplexData
        The complexes (one, for a transductive task).
    transform : callable, optional
        Applied once to the collated batch (e.g. the model's
        :meth:`~topomodelx_attention.nn.cell.CellularTransformer.structure_transform`: its
        structure prepared once for every epoch).
    """

    def __init__(self, dataset: Sequence[Any], transform: Callable[[Any], Any] | None = None) -> None:
        self.complexes = list(dataset)
        if not self.complexes:
            raise ValueError("FullBatch needs at least one complex")
        self.transform = transform
        self.batch: Any = None

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Any:
        if self.batch is None:
            from topomodelx_attention.data import ComplexDataLoader

            loader = ComplexDataLoader(self.complexes, batch_size=len(self.complexes), shuffle=False)
            batch = next(iter(loader))
            self.batch = batch if self.transform is None else self.transform(batch)
        yield self.batch


_SAMPLER_KEYS = ("batch_size", "hops", "num_neighbors")


def sampler_options(dataset_cfg: Any, task_level: str) -> dict[str, Any] | None:
    """Check ``dataset.sampler``: training and evaluation on sampled sub-complexes, or ``None``.

    ``dataset.sampler`` (default ``null``: one full batch, :class:`FullBatch`) switches a
    transductive task to batches of target vertices, each with the cells within ``hops`` hops
    of them (:class:`~topomodelx_attention.data.SubComplexSampler`, the semantics of PyG's
    ``NeighborLoader``): ``batch_size`` targets per batch (default 1024), ``hops`` (default
    ``null``: the model's number of layers, which gives the full-batch outputs for models
    whose layers move one hop over the neighbourhoods they read, e.g. the Cellular Transformer
    with sparse attention and no global arrow; a graph baseline's layer crosses an edge, vertex to
    edge to vertex, two incidence hops: set ``hops`` for it), ``num_neighbors`` (default ``null``: no
    cap; else one fan-out cap per hop, ``-1`` for all). Validation and test run over their
    vertices in batches of the same size.

    Parameters
    ----------
    dataset_cfg : mapping
        The ``dataset`` config.
    task_level : str
        ``DatasetInfo.task_level`` of the data set.

    Returns
    -------
    dict or None
        ``{"batch_size": int, "hops": int or None, "num_neighbors": list or None}``.

    Raises
    ------
    ValueError
        A sampler on a task that is not transductive, an unknown key or a value out of range.
    """
    spec = dataset_cfg.get("sampler") if hasattr(dataset_cfg, "get") else None
    if spec is None:
        return None
    spec = OmegaConf.to_container(spec, resolve=True) if OmegaConf.is_config(spec) else spec
    if not isinstance(spec, dict):
        raise ValueError(
            f"dataset.sampler must be a mapping {{batch_size, hops, num_neighbors}} or null, got {spec!r}"
        )
    if task_level != "transductive":
        raise ValueError(
            f"dataset.sampler samples sub-complexes of one large complex: it needs "
            f"dataset.task_level=transductive, got {task_level!r}; remove dataset.sampler"
        )
    unknown = sorted(set(spec) - set(_SAMPLER_KEYS))
    if unknown:
        raise ValueError(f"dataset.sampler has unknown keys {unknown}; its keys are {list(_SAMPLER_KEYS)}")
    options = {"batch_size": 1024, "hops": None, "num_neighbors": None, **spec}
    size, hops = options["batch_size"], options["hops"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"dataset.sampler.batch_size={size!r} must be a positive integer (target vertices per batch)")
    if hops is not None and (isinstance(hops, bool) or not isinstance(hops, int) or hops < 0):
        raise ValueError(f"dataset.sampler.hops={hops!r} must be a non-negative integer or null (the model's number of layers)")
    caps = options["num_neighbors"]
    if caps is not None and (
        not isinstance(caps, list) or any(isinstance(c, bool) or not isinstance(c, int) or c < -1 for c in caps)
    ):
        raise ValueError(
            f"dataset.sampler.num_neighbors={caps!r} must be a list of integers >= 0 (or -1: all), one per hop, or null"
        )
    return options


def model_layers(model: nn.Module) -> int:
    """Return the number of layers of a harness model (the default ``dataset.sampler.hops``).

    Parameters
    ----------
    model : torch.nn.Module
        A model of the registry (node outputs unwrapped).

    Returns
    -------
    int
        ``len(model.layers)`` or ``len(model.blocks)`` (module lists), else ``model.n_layers``.

    Raises
    ------
    ValueError
        When the model shows none of them (set ``dataset.sampler.hops``).
    """
    from topomodelx_attention.harness.registry import NodeOutputs

    inner = NodeOutputs.unwrap(model)
    for name in ("layers", "blocks"):
        stack = getattr(inner, name, None)
        if isinstance(stack, nn.ModuleList):
            return len(stack)
    layers = getattr(inner, "n_layers", None)
    if isinstance(layers, int) and not isinstance(layers, bool):
        return layers
    raise ValueError(
        f"cannot tell the number of layers of {type(inner).__name__}: set dataset.sampler.hops"
    )


def structure_transform(model: nn.Module, dataset_cfg: Any, trainer_cfg: Any) -> Callable[[Any], Any] | None:
    """Return the model's structure transform for a full-batch transductive task, or ``None``.

    With ``dataset.prepare_structure`` (default ``true``), a model that has a
    ``structure_transform`` (the Cellular Transformer:
    :class:`~topomodelx_attention.nn.cell.PrepareStructure`) prepares the one complex's
    structure once, on CPU, and reuses it at every step of every epoch; the predictions are the
    same. Models without one, runs on an accelerator (the batch moves there after the loader)
    and ``dataset.prepare_structure=false`` prepare every step.

    Parameters
    ----------
    model : torch.nn.Module
        A model of the registry (node outputs unwrapped).
    dataset_cfg, trainer_cfg : mapping
        ``cfg.dataset`` and ``cfg.trainer``.

    Returns
    -------
    callable or None
        The transform of the collated complex.
    """
    from topomodelx_attention.harness.registry import NodeOutputs

    wanted = dataset_cfg.get("prepare_structure", True) if hasattr(dataset_cfg, "get") else True
    if not isinstance(wanted, bool):
        raise ValueError(f"dataset.prepare_structure must be true or false, got {wanted!r}")
    accelerator = str(trainer_cfg.get("accelerator", "auto") if hasattr(trainer_cfg, "get") else "auto")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    inner = NodeOutputs.unwrap(model)
    make = getattr(inner, "structure_transform", None)
    return make() if wanted and on_cpu and callable(make) else None


def sampled_loaders(
    options: dict[str, Any],
    complex_: Any,
    parts: Sequence[Any],
    model: nn.Module,
    num_workers: int,
    loader_cfg: dict[str, Any],
) -> list[Any]:
    """Training, validation and test loaders of sub-complexes around the vertices of each part's mask."""
    from topomodelx_attention.data import SubComplexSampler

    hops = options["hops"] if options["hops"] is not None else model_layers(model)
    try:
        sampler = SubComplexSampler(complex_, hops=hops, num_neighbors=options["num_neighbors"])
    except ValueError as error:
        raise ValueError(f"dataset.sampler: {error}") from error
    loaders = []
    for part, shuffle in zip(parts, (True, False, False)):
        targets = torch.nonzero(part.complexes[0].node_mask).view(-1)
        loaders.append(
            sampler.loader(
                targets,
                batch_size=options["batch_size"],
                shuffle=shuffle,
                num_workers=num_workers,
                persistent_workers=num_workers > 0,
                **loader_cfg,
            )
        )
    return loaders
