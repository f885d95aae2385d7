"""GraphUniverse in the harness: ``dataset/graph/graphuniverse.yaml`` → graphs, split, task protocol.

``topomodelx-attention train --dataset graphuniverse --model MODEL dataset.task=community_detection
dataset.homophily=mid dataset.avg_degree=hi dataset.power_law=lo [dataset.n_graphs=N]`` reads
the family of that setting (generated once with graph-universe, then cached:
:func:`~topomodelx_attention.data.graphuniverse.load_family`), splits it by graph as TopoBench
does (:func:`~topomodelx_attention.data.graphuniverse.challenge_split`) and sets the task's
protocol (:data:`TASK_PROTOCOL`): community detection is inductive node classification
(cross-entropy, accuracy), triangle counting graph-level regression (MSE, monitored MSE, and
the challenge's ``mse_per_triangle`` = test MSE / number of triangles of the test graphs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from torch_geometric.data import Data

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.data.graphuniverse import (
    TASKS,
    challenge_split,
    generation_parameters,
    load_family,
    task_graphs,
)

__all__ = ["TASK_PROTOCOL", "cache_fields", "load_graphuniverse", "parameters_from_config", "task_protocol"]

TASK_PROTOCOL: dict[str, dict[str, Any]] = {
    "community_detection": {
        "task": "classification",
        "task_level": "node",
        "loss": "cross_entropy",
        "monitor_metric": "accuracy",
        "metrics": [],
    },
    "triangle_counting": {
        "task": "regression",
        "task_level": "graph",
        "loss": "mse",
        "monitor_metric": "mse",
        "num_classes": 1,
        "metrics": ["mse_per_triangle"],
    },
}
"""Harness task settings of each challenge task (TopoBench's ``graphuniverse_inductive*.yaml``)."""


def _task(cfg: Mapping[str, Any]) -> str:
    task = cfg.get("challenge_task") or cfg.get("task")  # challenge_task: set by task_protocol
    if task not in TASKS:
        raise ValueError(f"dataset.task must be one of {TASKS} for GraphUniverse, got {task!r}")
    return str(task)


@fill_doc
def parameters_from_config(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Return the generation parameters of the ``dataset`` config (levels, ``n_graphs``, ``universe``, ``family``).

    %(dataset_cfg_parameters)s

    Returns
    -------
    dict
        :func:`~topomodelx_attention.data.graphuniverse.generation_parameters`.
    """
    return generation_parameters(
        cfg.get("homophily", "lo"),
        cfg.get("avg_degree", "lo"),
        cfg.get("power_law", "lo"),
        n_graphs=cfg.get("n_graphs"),
        universe=cfg.get("universe"),
        family=cfg.get("family"),
    )


def _split_options(cfg: Mapping[str, Any]) -> dict[str, Any]:
    split = dict(cfg.get("split") or {})
    return {
        "train_prop": split.get("train_prop", 0.7),
        "data_seed": split.get("data_seed", 0),
        "global_seed": split.get("global_seed", 42),
    }


@fill_doc
def cache_fields(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Return what determines the processed complexes besides the lifting: task, generation, split.

    %(dataset_cfg_parameters)s

    Returns
    -------
    dict
        Hashed into the harness cache key.
    """
    return {"task": _task(cfg), "generation": parameters_from_config(cfg), "split": _split_options(cfg)}


@fill_doc
def load_graphuniverse(cfg: Mapping[str, Any], cache_dir: str | os.PathLike) -> dict[str, list[Data]]:
    """Return the graphs of the configured task, split by graph as TopoBench does.

    %(dataset_cfg_parameters)s
    cache_dir : path-like
        Cache root; the family is stored under ``<cache_dir>/graphuniverse/``.

    Returns
    -------
    dict of str to list of Data
        ``{"train", "val", "test"}`` (the data set's own split).
    """
    task = _task(cfg)
    parameters = parameters_from_config(cfg)
    split = _split_options(cfg)
    n_graphs = parameters["family_parameters"]["n_graphs"]
    parts = challenge_split(n_graphs, **split)  # fails before the generation on an empty split
    graphs = task_graphs(load_family(parameters, cache_dir, progress=bool(cfg.get("progress", False))), task)
    return {name: [graphs[int(i)] for i in idx] for name, idx in zip(("train", "val", "test"), parts)}


@fill_doc
def task_protocol(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``dataset`` config with the harness task settings of its challenge task filled in.

    ``task`` becomes the harness task kind (``classification`` / ``regression``);
    ``task_level``, ``loss``, ``monitor_metric``, ``num_classes`` (``K`` communities) and
    ``metrics`` take the protocol's value unless set (not null). A ``task_level`` that
    contradicts the task raises.

    %(dataset_cfg_parameters)s

    Returns
    -------
    dict
        A new config.
    """
    task = _task(cfg)
    protocol = dict(TASK_PROTOCOL[task])
    if task == "community_detection":
        protocol["num_classes"] = int(parameters_from_config(cfg)["universe_parameters"]["K"])
    level = cfg.get("task_level")
    if level is not None and level != protocol["task_level"]:
        raise ValueError(
            f"dataset.task={task} is a {protocol['task_level']}-level task, but "
            f"dataset.task_level={level!r}: leave task_level null"
        )
    out = dict(cfg)
    out["challenge_task"] = task
    for key, value in protocol.items():
        if key == "task" or out.get(key) is None:
            out[key] = value
    return out
