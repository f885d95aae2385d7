"""Model registry of the benchmark harness, and the pieces every model builder shares.

A builder registered with :func:`register_model` maps the config's ``model.params`` and the
data set's :class:`~topomodelx_attention.harness.prepare.DatasetInfo` to a model whose
``forward(batch)`` gives one prediction per complex, ``(num_complexes, out_channels)``, or one
per vertex for node-level tasks (``outputs="node"``); its :class:`ModelSpec` also says which
data keys the built model reads, so that the harness drops the others before batching.

The registered models are this package's (:mod:`~topomodelx_attention.harness.models`) and the
baselines (:mod:`~topomodelx_attention.harness.baselines`); both register on import, and
importing :mod:`topomodelx_attention.harness` imports both, so :data:`MODELS` is complete
wherever this module is reached through the package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from topomodelx_attention.harness.prepare import DatasetInfo
from topomodelx_attention.nn.common import FeatureEncoder

__all__ = [
    "MODELS",
    "OUTPUTS",
    "ModelSpec",
    "NodeOutputs",
    "build_model",
    "check_outputs",
    "get_spec",
    "rank_encoders",
    "rank_keys",
    "register_model",
    "task_outputs",
]


# ----------------------------------------------------------------------------------------------
# registry
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes
    ----------
    name : str
        Registry name (``model.name`` in the config).
    domain : {"graph", "cell", "simplicial"}
        Domain of its input.
    build : callable
        ``build(params, info) -> nn.Module`` with ``params`` the config's ``model.params``.
    keys : callable
        ``keys(model, info) -> set of str``: data keys the built model reads.
    """

    name: str
    domain: str
    build: Callable[[Mapping[str, Any], DatasetInfo], nn.Module]
    keys: Callable[[nn.Module, DatasetInfo], set[str]]


MODELS: dict[str, ModelSpec] = {}
"""Registered models, by name."""


def register_model(
    name: str, domain: str, keys: Callable[[nn.Module, DatasetInfo], set[str]]
) -> Callable[[Callable[[Mapping[str, Any], DatasetInfo], nn.Module]], Callable]:
    """Register a model builder (decorator).

    Parameters
    ----------
    name : str
        Registry name, as in ``model.name`` of its YAML.
    domain : {"graph", "cell", "simplicial"}
        Input domain.
    keys : callable
        ``keys(model, info)``: the data keys the model reads.

    Returns
    -------
    callable
        The decorator, returning the builder unchanged.

    Examples
    --------
    >>> @register_model("my_model", "graph", lambda model, info: {"x_0", "edge_index", "batch_0"})
    ... def build_my_model(params, info):
    ...     ...
    """
    if domain not in ("graph", "cell", "simplicial"):
        raise ValueError(f"domain must be 'graph', 'cell' or 'simplicial', got {domain!r}")

    def decorator(build):
        MODELS[name] = ModelSpec(name, domain, build, keys)
        return build

    return decorator


def get_spec(name: str) -> ModelSpec:
    """Return the registered :class:`ModelSpec` of ``name`` (clear error for unknown names)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; registered models: {sorted(MODELS)}")
    return MODELS[name]


def build_model(name: str, params: Mapping[str, Any] | None, info: DatasetInfo) -> nn.Module:
    """Build a registered model for a data set.

    Parameters
    ----------
    name : str
        Registry name.
    params : mapping, optional
        ``model.params`` of the config.
    info : DatasetInfo
        Feature widths, categories, PE width, output width of the data set.

    Returns
    -------
    torch.nn.Module
        ``forward(batch) -> (num_complexes, info.out_channels)``.
    """
    spec = get_spec(name)
    params = dict(params or {})
    try:
        return spec.build(params, info)
    except TypeError as error:
        raise TypeError(f"model {name!r}: invalid model.params {sorted(params)}: {error}") from error


# ----------------------------------------------------------------------------------------------
# shared pieces
# ----------------------------------------------------------------------------------------------
OUTPUTS = ("complex", "node")
"""``outputs`` of the harness models: one row per complex, or one row per vertex."""


def check_outputs(outputs: str) -> str:
    """Return ``outputs`` if it is one of :data:`OUTPUTS` (``"complex"`` / ``"node"``)."""
    if outputs not in OUTPUTS:
        raise ValueError(f"outputs must be one of {OUTPUTS}, got {outputs!r}")
    return outputs


def task_outputs(params: dict[str, Any], info: DatasetInfo) -> str:
    """Pop ``outputs`` from ``params``: the data set's task level by default, never another."""
    expected = "complex" if info.task_level == "graph" else "node"  # inductive or transductive node tasks
    outputs = params.pop("outputs", expected)
    if outputs not in OUTPUTS:
        raise ValueError(f"model.params.outputs must be one of {OUTPUTS}, got {outputs!r}")
    if outputs != expected:
        raise ValueError(
            f"data set {info.name} is a {info.task_level}{'' if info.task_level == 'transductive' else '-level'} task: model.params.outputs must be "
            f"{expected!r} (or left out), got {outputs!r}"
        )
    return outputs


class NodeOutputs(nn.Module):
    """Rank-0 rows of a family model's cell-level outputs, ``(n_0, out_channels)``.

    Parameters
    ----------
    model : torch.nn.Module
        A model whose ``method(batch)`` returns ``{rank: (n_rank, out_channels)}``.
    method : str, default="forward"
        The method returning the cell-level outputs (``"cell_outputs"`` for OrderKTokenGT).
    """

    def __init__(self, model: nn.Module, method: str = "forward") -> None:
        super().__init__()
        self.model = model
        self.method = method

    @staticmethod
    def unwrap(model: nn.Module) -> nn.Module:
        """Return the family model inside ``model`` (``model`` itself when it is not a :class:`NodeOutputs`)."""
        return model.model if isinstance(model, NodeOutputs) else model

    def forward(self, batch: Any) -> Tensor:
        """Return the node-level predictions, ``(n_0, out_channels)``."""
        call = self.model if self.method == "forward" else getattr(self.model, self.method)
        return call(batch)[0]


def rank_encoders(info: DatasetInfo, hidden: int, ranks: Sequence[int]) -> nn.ModuleList:
    """One :class:`~topomodelx_attention.nn.common.FeatureEncoder` per rank, sized by ``info``."""
    return nn.ModuleList(FeatureEncoder(info.in_channels[r], hidden, info.categorical[r]) for r in ranks)


def rank_keys(max_rank: int, *names: str) -> set[str]:
    """``{name}_{r}`` for every name and rank ``r = 0..max_rank`` (data keys a model reads)."""
    return {f"{name}_{r}" for name in names for r in range(max_rank + 1)}
