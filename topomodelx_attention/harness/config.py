"""Configuration: the hydra YAML files shipped in ``topomodelx_attention/configs``.

The layout follows TopoBench (``dataset/graph/<NAME>.yaml``, ``model/<domain>/<name>.yaml``,
``optimizer/``, ``trainer/``, ``paths/``); :func:`compose_config` composes ``train.yaml`` with
hydra's compose API and a list of overrides, without hydra's run directory or ``chdir``.

Every ``_target_`` of a configuration must name an allowed class (:func:`check_targets`): the
package's transforms, liftings and models, its TopoBench exports, ``torch.optim`` optimizers and
schedulers, and classes registered with :func:`register_target`. hydra's ``instantiate`` calls
any importable callable, so ``model.pe._target_=numpy.load +model.pe.allow_pickle=true`` would
otherwise unpickle (run) a file; such a configuration is refused before anything is built.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = [
    "ALLOWED_TARGETS",
    "CONFIG_DIR",
    "allowed_targets",
    "available",
    "check_targets",
    "choice",
    "compose_config",
    "register_target",
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
_NON_NEGATIVE = (
    "dataset.dataloader.num_workers", "trainer.early_stopping_patience", "optimizer.weight_decay",
    "optimizer.warmup_epochs", "trainer.gradient_clip_val",
)
_POSITIVE_FLOATS = ("optimizer.lr", "optimizer.eps", "optimizer.decay_epochs")
MAX_LOADER_WORKERS = 4 * (os.cpu_count() or 1)
"""Most data-loader worker processes a configuration may ask for (4 per CPU core)."""

MODEL_MEMORY_BUDGET = 8 * 2**30
"""Bytes of parameters a configured model may ask for (8 GiB): above it the configuration is refused.

Estimated before anything is built as ``4 · 64 · n_layers · hidden_channels²`` bytes (float32;
64 square blocks per layer bounds every packaged model: a CT layer of the packaged tensor
diagram has about 56, a TokenGT or GPS layer about 12), so ``model.params.hidden_channels``
or ``model.params.n_layers`` set to millions is refused in one line instead of exhausting the
machine's memory while the model is built.
"""

#: Keys whose values lie in [0, 1) (probabilities of dropping) or [0, 1] (ratios).
_UNIT_INTERVAL = {"optimizer.min_lr_ratio": True, "optimizer.betas": False}

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
"""Folder of the packaged YAML files."""

ALLOWED_TARGETS = (
    "the public classes of topomodelx_attention.transforms (liftings, positional encodings, node "
    "identifiers, augmentations), the models and layers of topomodelx_attention.nn, "
    "topomodelx_attention.harness.models and topomodelx_attention.harness.baselines, the TopoBench exports of "
    "topomodelx_attention.harness.topobench, the optimizers of torch.optim, the schedulers of "
    "torch.optim.lr_scheduler, and classes registered with "
    "topomodelx_attention.harness.config.register_target"
)
"""What a ``_target_`` may name (:func:`check_targets`; the text of its error)."""

_TARGET_ROOTS = ("topomodelx_attention", "torch.optim")
"""Modules under which a ``_target_`` path is looked up (besides those of registered classes)."""

_CONVERT_MODES = ("none", "partial", "all", "object")

_REGISTERED: dict[int, Any] = {}

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


def choice(group: str, name: str) -> str:
    """Hydra choice of a short name in a config group (case-insensitive).

    ``choice("dataset", "mutag")`` → ``"graph/MUTAG"``, ``choice("model", "gin")`` →
    ``"graph/gin"``; a full choice (``"graph/gin"``) is returned as it is.

    Parameters
    ----------
    group : str
        Config group (``"dataset"``, ``"model"``, ...; see :func:`available`).
    name : str
        Short name or full choice.

    Returns
    -------
    str
        The choice for the group.

    Raises
    ------
    ValueError
        Naming the group and the available names when ``name`` is none of them.
    """
    options = available(group)
    if name in options.values():
        return name
    if name in options:
        return options[name]
    lowered = {key.lower(): value for key, value in options.items()}
    if name.lower() in lowered:
        return lowered[name.lower()]
    raise ValueError(f"unknown {group} {name!r}; available: {sorted(options)}")


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
            head.append(f"dataset={choice('dataset', dataset)}")
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
        head.append(f"model={choice('model', model)}")
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
    non-negative integers, and every ``_target_`` must name an allowed class
    (:func:`check_targets`).

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
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except Exception as error:  # interpolation errors
        raise ValueError(f"invalid configuration: {' '.join(str(error).split())}") from error
    check_targets(resolved)
    if isinstance(resolved.get("dataset"), dict):  # merged into model.lifting when it is built
        check_targets(resolved["dataset"].get("lifting_kwargs"), "dataset.lifting_kwargs", instantiated=True)
    values = _leaves(resolved)
    if defaults is not None:
        for key, default in _leaves(OmegaConf.to_container(defaults, resolve=True)).items():
            if key in values and not key.endswith("._target_") and not _compatible(values[key], default):
                raise ValueError(
                    f"invalid configuration: {key}={values[key]!r} must be {_type_name(default)} "
                    f"(packaged default: {default!r})"
                )
    for key, value in values.items():  # a NaN or infinite hyperparameter never trains
        if any(isinstance(v, float) and not math.isfinite(v) for v in (value if isinstance(value, list) else [value])):
            raise ValueError(f"invalid configuration: {key}={value!r} must be a finite number")
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
    _check_model_size(values)
    workers = values.get("dataset.dataloader.num_workers")
    if isinstance(workers, int) and workers > MAX_LOADER_WORKERS:
        raise ValueError(
            f"invalid configuration: dataset.dataloader.num_workers={workers} exceeds "
            f"{MAX_LOADER_WORKERS} (harness.config.MAX_LOADER_WORKERS: 4 per CPU core of this machine); "
            "each worker is a process holding a copy of the data set"
        )
    unit = dict(_UNIT_INTERVAL)
    unit.update({key: False for key in values if key.startswith("model.params.") and key.split(".")[-1].endswith("dropout")})
    for key, closed in unit.items():
        found = values.get(key)
        for value in found if isinstance(found, list) else [found]:
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value <= 1 if closed else 0 <= value < 1):
                raise ValueError(
                    f"invalid configuration: {key}={found!r} must lie in [0, 1{']' if closed else ')'}"
                )
    seeds = resolved.get("seeds")
    if seeds is not None and (
        not isinstance(seeds, list) or not seeds
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
    ):
        raise ValueError(f"invalid configuration: seeds={seeds!r} must be a non-empty list of non-negative integers")
    if seeds is not None and len(set(seeds)) != len(seeds):
        repeated = sorted({s for s in seeds if seeds.count(s) > 1})
        raise ValueError(
            f"invalid configuration: seeds={seeds!r} repeats {repeated}: each seed trains once into its "
            "own folder (seed_<n>), so give every seed once"
        )


def _check_model_size(values: Mapping[str, Any]) -> None:
    """Refuse a model whose estimated parameters exceed :data:`MODEL_MEMORY_BUDGET` (names the options)."""
    width, depth = values.get("model.params.hidden_channels"), values.get("model.params.n_layers")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (width, depth)):
        return  # missing or ill-typed: the type and range checks name it
    estimate = 4 * 64 * depth * width**2
    if estimate > MODEL_MEMORY_BUDGET:
        raise ValueError(
            f"invalid configuration: model.params.hidden_channels={width} with model.params.n_layers="
            f"{depth} asks for about {estimate / 2**30:,.1f} GiB of parameters, above the budget of "
            f"{MODEL_MEMORY_BUDGET / 2**30:.0f} GiB (harness.config.MODEL_MEMORY_BUDGET); lower "
            "model.params.hidden_channels or model.params.n_layers"
        )


# ----------------------------------------------------------------------------------------------
# the _target_ allow-list
# ----------------------------------------------------------------------------------------------
def _classes(module: Any, base: type = object) -> list[type]:
    found = (getattr(module, name) for name in module.__all__)
    return [obj for obj in found if inspect.isclass(obj) and issubclass(obj, base)]


def _packaged_targets() -> dict[int, Any]:
    """Return the allowed objects of the package and of ``torch.optim``, by identity."""
    import torch
    from torch import nn

    from topomodelx_attention import transforms
    from topomodelx_attention.nn import attention, cell, common, graph, simplicial

    found = _classes(transforms)
    for module in (attention, cell, common, graph, simplicial):
        found += _classes(module, nn.Module)
    optim, schedulers = torch.optim, torch.optim.lr_scheduler
    found += [
        obj for obj in vars(optim).values()
        if inspect.isclass(obj) and issubclass(obj, optim.Optimizer) and obj is not optim.Optimizer
    ]
    bases = {schedulers.LRScheduler, getattr(schedulers, "_LRScheduler", schedulers.LRScheduler)}
    found += [
        obj for obj in vars(schedulers).values()
        if inspect.isclass(obj) and obj not in bases
        and (issubclass(obj, schedulers.LRScheduler) or obj is schedulers.ReduceLROnPlateau)
    ]
    return {id(obj): obj for obj in found}


_PACKAGED: dict[int, Any] = {}

_TOPOBENCH_EXPORTS = "topomodelx_attention.harness.topobench"
"""Imported only when a path names it (importing it imports TopoBench where installed)."""


def _allowed() -> dict[int, Any]:
    if not _PACKAGED:
        _PACKAGED.update(_packaged_targets())
    exports = sys.modules.get(_TOPOBENCH_EXPORTS)
    extra = {} if exports is None else {id(obj): obj for obj in _classes(exports)}
    return {**_PACKAGED, **extra, **_REGISTERED}


def allow_harness_classes(module_name: str) -> None:
    """Allow the ``nn.Module`` classes of a harness model module (its ``__all__``) as ``_target_``.

    Called by :mod:`~.models` and :mod:`~.baselines` at the end of their import (importing the
    harness imports both): they hand their classes to :func:`register_target`, so the allow-list
    holds them without this module importing them (they import it).

    Parameters
    ----------
    module_name : str
        ``__name__`` of the calling module (already in ``sys.modules``).
    """
    from torch import nn

    for obj in _classes(sys.modules[module_name], nn.Module):
        register_target(obj)


def register_target(target: Any) -> Any:
    """Allow a class of your own as a ``_target_`` of the harness configs (usable as a decorator).

    Only Python code can extend the allow-list, never a configuration: register a custom
    lifting or positional encoding before composing the configuration that names it. Only
    classes are accepted: a configuration may then build an instance of the class, and nothing
    else. Functions, lambdas, builtins such as ``os.system`` or ``builtins.eval``, methods,
    instances and classes defined inside a function (no configuration can name them) raise
    ``TypeError``; to register a factory, make it a class (its ``__init__`` or ``__new__``).

    Parameters
    ----------
    target : type
        The class configs may instantiate, defined at the top level of a module.

    Returns
    -------
    type
        ``target`` itself.

    Raises
    ------
    TypeError
        When ``target`` is not such a class (the message names what was given).
    """
    if not inspect.isclass(target):
        kind = "a lambda" if getattr(target, "__name__", None) == "<lambda>" else type(target).__name__
        name = getattr(target, "__qualname__", None)
        module = getattr(target, "__module__", None)
        shown = f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else repr(target)[:80]
        raise TypeError(
            f"register_target accepts classes only, got {kind} {shown}: a configuration may name a "
            "registered class to build an instance of it, never a function to call (wrap a factory "
            "in a class)"
        )
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if not isinstance(module, str) or module not in sys.modules or "<" in qualname:
        raise TypeError(
            f"register_target needs a class defined at the top level of an imported module, got "
            f"{qualname or target!r} of module {module!r} (no configuration could name it)"
        )
    _REGISTERED[id(target)] = target
    return target


def allowed_targets() -> dict[str, Any]:
    """Return the objects a ``_target_`` may name, by their canonical dotted path.

    Returns
    -------
    dict of str to object
        ``{"topomodelx_attention.transforms.liftings.CellCycleLifting": CellCycleLifting, ...}``
        (any other path to the same object, e.g. ``topomodelx_attention.transforms.CellCycleLifting``,
        is accepted too).
    """
    import_module(_TOPOBENCH_EXPORTS)
    return dict(sorted((f"{obj.__module__}.{obj.__qualname__}", obj) for obj in _allowed().values()))


def _locate(path: str) -> Any:
    """Return the object ``path`` names, found as hydra's ``_locate`` finds it but without importing.

    Only paths under :data:`_TARGET_ROOTS` (or the module of a registered class) are looked up:
    anything else is ``None`` before any attribute is read. The walk follows attributes from the
    top-level module (a submodule missing as an attribute is taken from ``sys.modules``), so
    ``topomodelx_attention.transforms.os.system`` resolves to ``os.system`` — and is refused by
    the identity check of the caller.
    """
    parts = path.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    roots = _TARGET_ROOTS + tuple(obj.__module__ for obj in _REGISTERED.values())
    if not any(path.startswith(f"{root}.") for root in roots):
        return None
    obj = sys.modules.get(parts[0])
    if obj is None:
        return None
    for index in range(1, len(parts)):
        try:
            obj = getattr(obj, parts[index])
        except AttributeError:
            name = ".".join(parts[: index + 1])
            if not inspect.ismodule(obj) or name not in sys.modules:
                return None
            obj = sys.modules[name]
    return obj


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _check_target_node(node: Mapping[str, Any], key: str) -> None:
    where = _join(key, "_target_")
    target = node["_target_"]
    if not isinstance(target, str):
        raise ValueError(f"invalid configuration: {where}={target!r} must be a string naming a class")
    if target.startswith(f"{_TOPOBENCH_EXPORTS}."):
        import_module(_TOPOBENCH_EXPORTS)
    allowed = _allowed()  # imports the allowed modules first: _locate only reads sys.modules
    obj = _locate(target)
    if obj is None or id(obj) not in allowed:
        raise ValueError(
            f"invalid configuration: {where}={target!r} is not an allowed target (nothing was "
            f"instantiated); the harness instantiates only {ALLOWED_TARGETS}"
        )
    partial = node.get("_partial_", False)
    if partial is not False:
        raise ValueError(
            f"invalid configuration: {_join(key, '_partial_')}={partial!r} is not supported: the "
            "harness needs the object itself, not a functools.partial (remove the key)"
        )
    if "_recursive_" in node and not isinstance(node["_recursive_"], bool):
        raise ValueError(f"invalid configuration: {_join(key, '_recursive_')}={node['_recursive_']!r} must be true or false")
    if "_convert_" in node and node["_convert_"] not in _CONVERT_MODES:
        raise ValueError(
            f"invalid configuration: {_join(key, '_convert_')}={node['_convert_']!r} must be one of {list(_CONVERT_MODES)}"
        )
    if "_args_" in node and not isinstance(node["_args_"], (list, tuple)):
        raise ValueError(f"invalid configuration: {_join(key, '_args_')}={node['_args_']!r} must be a list")


def _check_node(node: Any, key: str, instantiated: bool) -> None:
    if isinstance(node, Mapping):
        if "_target_" in node:
            _check_target_node(node, key)
            instantiated = True
        for name, value in node.items():
            _check_node(value, _join(key, name), instantiated)
    elif isinstance(node, (list, tuple)):
        for index, value in enumerate(node):
            _check_node(value, f"{key}[{index}]", instantiated)
    elif instantiated and isinstance(node, str) and "${" in node:
        raise ValueError(
            f"invalid configuration: {key}={node!r} is still an interpolation after resolving "
            "(an escaped \\${...}); hydra would resolve it again when instantiating, so the "
            "arguments of a _target_ must be plain values"
        )


def check_targets(tree: Any, prefix: str = "", *, instantiated: bool = False) -> None:
    """Refuse a configuration naming a ``_target_`` outside the allow-list, before any instantiation.

    The whole tree is walked (nested configs, lists, ``_args_``, nodes under
    ``_recursive_: false``): every ``_target_`` must be a string naming, through any import
    path, one of :func:`allowed_targets` (the path is resolved without importing anything and
    the object compared by identity, so an alias such as
    ``topomodelx_attention.transforms.os.system`` is refused). ``_partial_: true`` is refused
    (the harness needs the objects themselves), ``_recursive_`` must be a boolean, ``_convert_``
    a hydra conversion mode and ``_args_`` a list. Inside a config that is instantiated, no
    string may still be an interpolation after resolution (hydra would resolve it again, e.g.
    ``${oc.create:...}`` into a new ``_target_``).

    Parameters
    ----------
    tree : mapping, list, omegaconf config or None
        The configuration (resolved here when it is an omegaconf config).
    prefix : str, default=""
        Dotted key of ``tree`` in the whole configuration (``"model.pe"``), used in errors.
    instantiated : bool, default=False
        ``tree`` is passed to a target as arguments even without a ``_target_`` of its own
        (``dataset.lifting_kwargs``).

    Raises
    ------
    ValueError
        Naming the key (``model.pe._target_='numpy.load' is not an allowed target ...``).
    """
    if OmegaConf.is_config(tree):
        try:
            tree = OmegaConf.to_container(tree, resolve=True)
        except Exception as error:  # interpolation errors of any kind
            raise ValueError(f"invalid configuration{' ' + prefix if prefix else ''}: {' '.join(str(error).split())}") from error
    _check_node(tree, prefix, instantiated)
