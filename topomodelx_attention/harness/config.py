"""Configuration: the hydra YAML files shipped in ``topomodelx_attention/configs``.

The layout follows TopoBench (``dataset/graph/<NAME>.yaml``, ``model/<domain>/<name>.yaml``,
``optimizer/``, ``trainer/``, ``paths/``); :func:`compose_config` composes ``train.yaml`` with
hydra's compose API and a list of overrides, without hydra's run directory or ``chdir``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

__all__ = [
    "CONFIG_DIR",
    "available",
    "compose_config",
    "dataset_choice",
    "model_choice",
]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
"""Folder of the packaged YAML files."""


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
        head.append(f"dataset={dataset_choice(dataset)}")
    if model is not None:
        head.append(f"model={model_choice(model)}")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        try:
            cfg = compose(config_name=config_name, overrides=head + overrides)
        except HydraException as error:
            raise ValueError(f"invalid configuration override: {error}") from error
    OmegaConf.set_struct(cfg, False)
    return cfg
