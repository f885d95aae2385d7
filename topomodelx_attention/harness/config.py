"""Configuration: the hydra YAML files shipped in ``topomodelx_attention/configs``.

The layout follows TopoBench (``dataset/graph/<NAME>.yaml``, ``model/<domain>/<name>.yaml``,
``optimizer/``, ``trainer/``, ``paths/``); :func:`compose_config` composes ``train.yaml`` with
hydra's compose API and a list of overrides, without hydra's run directory or ``chdir``.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = [
    "CONFIG_DIR",
    "available",
    "compose_config",
    "dataset_choice",
    "model_choice",
    "unused_additions",
    "validate_config",
]

GENERIC_TU = "graph/TU"
"""Config of any TU data set given by name (``dataset.name`` set to the name)."""

_POSITIVE_INTS = (
    "trainer.max_epochs", "trainer.num_nodes", "dataset.dataloader.batch_size",
    "model.params.hidden_channels", "model.params.n_layers", "model.params.heads",
    "dataset.max_graphs",
)
_NON_NEGATIVE = ("dataset.dataloader.num_workers", "trainer.early_stopping_patience", "optimizer.weight_decay")
_POSITIVE_FLOATS = ("optimizer.lr",)

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
"""Folder of the packaged YAML files."""

PASS_THROUGH = (
    "trainer.",  # keyword arguments of lightning.Trainer
    "model.params.",  # of the model's constructor
    "model.lifting.", "model.pe.", "model.augment.",  # of the transforms (``_target_`` specs)
    "dataset.lifting_kwargs.",  # of the lifting
    "dataset.dataloader.",  # of the data loaders (e.g. pin_memory)
    "dataset.split.",
    "budget.space.",  # searched keys of the equal-budget comparison
)
"""Config sections handed on as keyword arguments: a ``+key`` added there is read (and checked) downstream."""


def available(group: str) -> dict[str, str]:
    """Options of a config group, by short name.

    Parameters
    ----------
    group : {"dataset", "model", "optimizer", "trainer", "paths"}
        Config group.

    Returns
    -------
    dict of str to str
        ``{short name: hydra choice}``, e.g. ``{"gin": "graph/gin", ...}``.
    """
    root = CONFIG_DIR / group
    if not root.is_dir():
        raise ValueError(f"unknown config group {group!r}; groups: {sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir())}")
    return {
        path.stem: path.relative_to(root).with_suffix("").as_posix()
        for path in sorted(root.rglob("*.yaml"))
    }


def _choice(group: str, name: str) -> str:
    options = available(group)
    if name in options.values():
        return name
    if name in options:
        return options[name]
    lowered = {key.lower(): value for key, value in options.items()}
    if name.lower() in lowered:
        return lowered[name.lower()]
    raise ValueError(f"unknown {group} {name!r}; available: {sorted(options)}")


def dataset_choice(name: str) -> str:
    """Hydra choice of a data set name (``"MUTAG"`` → ``"graph/MUTAG"``; case-insensitive).

    Parameters
    ----------
    name : str
        Short name or full choice.

    Returns
    -------
    str
        The choice for the ``dataset`` group.
    """
    return _choice("dataset", name)


def model_choice(name: str) -> str:
    """Hydra choice of a model name (``"gin"`` → ``"graph/gin"``).

    Parameters
    ----------
    name : str
        Short name or full choice.

    Returns
    -------
    str
        The choice for the ``model`` group.
    """
    return _choice("model", name)


def compose_config(
    overrides: Sequence[str] = (),
    dataset: str | None = None,
    model: str | None = None,
    config_name: str = "train",
) -> DictConfig:
    """Compose the harness configuration.

    Parameters
    ----------
    overrides : sequence of str
        Hydra overrides (``"trainer.max_epochs=10"``, ``"seeds=[1,2]"``, ``"model=graph/gin"``).
    dataset : str, optional
        Data set short name (``"MUTAG"``), prepended as ``dataset=<choice>``.
    model : str, optional
        Model short name (``"cellular_transformer"``), prepended as ``model=<choice>``.
    config_name : str, default="train"
        Primary config file.

    Returns
    -------
    omegaconf.DictConfig
        The composed configuration (struct mode off, so runs may add keys).
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    overrides = [str(o) for o in overrides]
    head = []
    if dataset is not None:
        try:
            head.append(f"dataset={dataset_choice(dataset)}")
        except ValueError as error:
            if not any(o.startswith("dataset.data_dir=") for o in overrides):
                raise ValueError(
                    f"{error}. Any other TU data set loads by name from its files: pass --data-dir "
                    f"DIR (config: dataset.data_dir) holding {dataset}/raw/{dataset}_A.txt, "
                    f"{dataset}_graph_indicator.txt and {dataset}_graph_labels.txt"
                ) from None
            text = str(dataset).replace("'", "\\'")
            head += [f"dataset={GENERIC_TU}", f"dataset.name='{text}'"]
    if model is not None:
        head.append(f"model={model_choice(model)}")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        try:
            cfg = compose(config_name=config_name, overrides=head + overrides)
            choices = [o for o in head + overrides if "=" in o and "." not in o.split("=", 1)[0]]
            defaults = compose(config_name=config_name, overrides=[o for o in choices if not o.startswith(("+", "~"))])
        except HydraException as error:
            raise ValueError(f"invalid configuration override: {' '.join(str(error).split())}") from error
    validate_config(cfg, defaults)
    for override, key, close in unused_additions(overrides):
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        warnings.warn(
            f"configuration key {key!r} (override {override}) is not read by the harness: no "
            f"packaged config has it, so it has no effect{hint}",
            UserWarning,
            stacklevel=2,
        )
    OmegaConf.set_struct(cfg, False)
    return cfg


@functools.cache
def _known_keys() -> tuple[frozenset[str], tuple[str, ...]]:
    """Keys of the packaged configs over all options of every group: ``(all, leaves)``.

    ``all`` holds every leaf (``group.key.sub``) and its parents, ``leaves`` the leaves sorted.
    """
    keys: set[str] = set()
    leaves: set[str] = set()
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        parts = path.relative_to(CONFIG_DIR).parts
        if parts[0] in ("experiment", "topobench"):
            continue  # presets of keys declared elsewhere; TopoBench's own configs
        tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        if not isinstance(tree, dict):
            continue
        prefix = "" if len(parts) == 1 else f"{parts[0]}."
        tree.pop("defaults", None)
        for key in _leaves(tree):
            pieces = f"{prefix}{key}".split(".")
            keys.update(".".join(pieces[: i + 1]) for i in range(len(pieces)))
            leaves.add(f"{prefix}{key}")
    return frozenset(keys), tuple(sorted(leaves))


def unused_additions(overrides: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """Find the ``+key=value`` overrides whose key nothing reads (typos: ``+trainer_max_epochs=3``).

    A key added with ``+`` (or ``++``) is read when a packaged config of its group declares it
    (for any option of the group, e.g. ``dataset.use_node_attr``) or when it lies in a section
    handed on as keyword arguments (:data:`PASS_THROUGH`: ``trainer.``, ``model.params.``, ...,
    checked by their receivers). Group additions (``+experiment=ct_paper_zinc``) are not keys.

    Parameters
    ----------
    overrides : sequence of str
        Hydra overrides.

    Returns
    -------
    list of (str, str, list of str)
        ``(override, key, close packaged keys)`` of every unused addition.
    """
    groups = {p.name for p in CONFIG_DIR.iterdir() if p.is_dir()}
    known, leaves = _known_keys()
    unused = []
    for override in overrides:
        override = str(override)
        if not override.startswith("+") or "=" not in override:
            continue
        key = override.lstrip("+").split("=", 1)[0].strip()
        if key.split("@", 1)[0] in groups or key in known or key.startswith(PASS_THROUGH):
            continue
        close = difflib.get_close_matches(key, leaves, n=2, cutoff=0.75)
        unused.append((override, key, close))
    return unused


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), type(value).__name__
    )


def _compatible(value: Any, default: Any) -> bool:
    if value is None or default is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, list):
        return isinstance(value, list)
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


def _leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(_leaves(value, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: tree}
    return {prefix[:-1]: tree}


def validate_config(cfg: DictConfig, defaults: DictConfig | None = None) -> None:
    """Reject a composed configuration with wrongly typed or out-of-range values, before any work.

    Every value must have the type of the packaged default it overrides (an integer stays an
    integer, ...; ``null`` is accepted), counts and sizes must be positive, ``seeds`` a list of
    non-negative integers.

    Parameters
    ----------
    cfg : omegaconf.DictConfig
        The composed configuration.
    defaults : omegaconf.DictConfig, optional
        The same composition without value overrides (the types to respect).

    Raises
    ------
    ValueError
        Naming the key, the value and what is expected.
    """
    try:
        values = _leaves(OmegaConf.to_container(cfg, resolve=True))
    except Exception as error:  # interpolation errors
        raise ValueError(f"invalid configuration: {' '.join(str(error).split())}") from error
    if defaults is not None:
        for key, default in _leaves(OmegaConf.to_container(defaults, resolve=True)).items():
            if key in values and not key.endswith("._target_") and not _compatible(values[key], default):
                raise ValueError(
                    f"invalid configuration: {key}={values[key]!r} must be {_type_name(default)} "
                    f"(packaged default: {default!r})"
                )
    for key in _POSITIVE_INTS:
        value = values.get(key)
        if key == "trainer.max_epochs" and value == -1 and values.get("trainer.max_time") is not None:
            continue  # Lightning's "no epoch limit": the wall-time budget stops training
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            hint = " (or -1 together with trainer.max_time)" if key == "trainer.max_epochs" else ""
            raise ValueError(f"invalid configuration: {key}={value!r} must be a positive integer{hint}")
    for key in _NON_NEGATIVE:
        value = values.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise ValueError(f"invalid configuration: {key}={value!r} must be a non-negative number")
    for key in _POSITIVE_FLOATS:
        value = values.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ValueError(f"invalid configuration: {key}={value!r} must be a positive number")
    seeds = OmegaConf.to_container(cfg, resolve=True).get("seeds")
    if seeds is not None and (
        not isinstance(seeds, list) or not seeds
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
    ):
        raise ValueError(f"invalid configuration: seeds={seeds!r} must be a non-empty list of non-negative integers")
