"""Benchmark harness in TopoBench's conventions (needs the ``train`` extra).

* :mod:`~.config` — the packaged hydra YAML files and :func:`compose_config`;
* :mod:`~.datasets` — cached lifting + PE of MUTAG, PROTEINS, GCB, ZINC-12k and their splits;
* :mod:`~.registry` — the model registry (:func:`register_model`, :data:`MODELS`) and the pieces
  every model builder shares;
* :mod:`~.models` — our Cellular Transformer, TokenGT (graph and cell tokens) and N-simplicial
  transformer in the registry;
* :mod:`~.baselines` — the baselines GIN, GINE, GPS (RWSE), a ``TransformerConv`` graph
  transformer, CWN and SCCNN (registered on import);
* :mod:`~.training` — the Lightning module and :func:`run_experiment`;
* :mod:`~.memory` — glibc's allocator told to keep freed memory (``trainer.keep_freed_memory``);
* :mod:`~.budget` — the equal-budget comparison :func:`run_equal_budget`;
* :mod:`~.results` — result records, tables, learning curves and time-to-accuracy plots;
* :mod:`~.graphuniverse_grid` — TopoBench's GraphUniverse challenge grid (resumable runs, OOD tests, export);
* :mod:`~.topobench` — TopoBench-native tensor backbones, their wrapper and the ``topobench contribute`` templates.

Example
-------
>>> from topomodelx_attention.harness import compose_config, run_experiment
>>> cfg = compose_config(["trainer.max_epochs=5", "seeds=[1]"], dataset="MUTAG", model="gin")
>>> result = run_experiment(cfg)  # doctest: +SKIP
"""

import topomodelx_attention._compat  # noqa: F401  (imports PyG without its import-time warning)
from topomodelx_attention.harness.budget import run_equal_budget
from topomodelx_attention.harness.config import (
    CONFIG_DIR,
    available,
    choice,
    compose_config,
)
from topomodelx_attention.harness.models import MODELS, build_model, register_model
from topomodelx_attention.harness.prepare import (
    ComplexDataset,
    DatasetInfo,
    PreparedDataset,
    prepare_dataset,
    random_split,
)
from topomodelx_attention.harness.results import ExperimentResult, SeedResult
from topomodelx_attention.harness.task_module import GraphTaskModule
from topomodelx_attention.harness.training import run_experiment

__all__ = [
    "CONFIG_DIR",
    "MODELS",
    "ComplexDataset",
    "DatasetInfo",
    "ExperimentResult",
    "GraphTaskModule",
    "PreparedDataset",
    "SeedResult",
    "available",
    "build_model",
    "choice",
    "compose_config",
    "prepare_dataset",
    "random_split",
    "register_model",
    "run_equal_budget",
    "run_experiment",
]
