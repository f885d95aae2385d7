"""Training with Lightning: one run per seed, test at the best validation epoch.

:func:`run_experiment` takes a composed configuration (:func:`~.config.compose_config`),
prepares the data set once (cached lifting + PE), and for every seed trains a fresh model with
:class:`GraphTaskModule` under a :class:`lightning.Trainer` (progress bar, early stopping on the
monitored validation metric, best-validation checkpoint, CSV logger, gradient clipping,
``trainer.devices``/``strategy``/``num_nodes`` passed through for DDP, ``trainer.max_time`` as a
wall-time budget per seed, ``compile: true`` for ``torch.compile``), then evaluates the test set
with the best checkpoint. Wall time per epoch is recorded by :class:`EpochHistory`. Results,
learning curves, the time-to-accuracy plot and the resolved configuration are written to the
output folder.

The equal-budget comparison of models is in :mod:`~topomodelx_attention.harness.budget`.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import time
import warnings
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from topomodelx_attention.files import make_dirs, write_text
from topomodelx_attention.harness.config import validate_config
from topomodelx_attention.harness.lightning_logs import lightning_logs
from topomodelx_attention.harness.loaders import (
    FullBatch,
    sampled_loaders,
    sampler_options,
    structure_transform,
)
from topomodelx_attention.harness.memory import keep_freed_memory
from topomodelx_attention.harness.models import build_model, get_spec
from topomodelx_attention.harness.prepare import (
    ComplexDataset,
    DatasetInfo,
    PreparedDataset,
    instantiate_transform,
    prepare_dataset,
    prune_keys,
)
from topomodelx_attention.harness.results import (
    ExperimentResult,
    SeedResult,
    write_results,
)
from topomodelx_attention.harness.task_module import (
    EpochHistory,
    GraphTaskModule,
    TrainingDiverged,
    max_time_seconds,
)

__all__ = [
    "ExperimentResult",
    "ResampleNodeIds",
    "SeedResult",
    "best_checkpoint",
    "default_output_dir",
    "evaluate_checkpoint",
    "is_rank_zero",
    "run_experiment",
    "run_seed",
    "unused_parameters",
]

_HARNESS_TRAINER_KEYS = ("early_stopping_patience", "num_threads", "max_time", "keep_freed_memory")
_RUN_DIR_ENV = "TOPOMODELX_ATTENTION_RUN_DIR"


class ResampleNodeIds:
    """Fresh random node identifiers for every complex of a training batch.

    Wraps a node-identifier transform with ``resample=True``
    (:class:`~topomodelx_attention.transforms.OrthogonalRandomNodeId`): for each complex of the
    batch (node counts from ``batch_0``) it calls the transform on an edgeless graph with the
    complex's node count — resampled ORF identifiers depend on the node count only — and
    replaces ``node_id``. The data set keeps fixed identifiers (the same transform with
    ``resample=False``), used for validation and testing (see :func:`run_experiment`).

    Parameters
    ----------
    transform : callable
        ``transform(Data(num_nodes=n)).node_id`` of shape ``(n, dim)``, fresh at each call.
    """

    def __init__(self, transform: Any) -> None:
        if not getattr(transform, "resample", False):
            raise ValueError(
                f"{transform!r} does not resample; pass a transform with resample=True"
            )
        self.transform = transform

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.transform!r})"

    def __call__(self, batch: Any) -> Any:
        """Return a shallow copy of ``batch`` with new ``node_id`` rows (the input is unchanged)."""
        from torch_geometric.data import Data

        if "node_id" not in batch or "batch_0" not in batch:
            raise ValueError("ResampleNodeIds needs node_id and batch_0 in the batch")
        counts = torch.bincount(batch.batch_0, minlength=int(batch.num_complexes)).tolist()
        ids = [self.transform(Data(num_nodes=int(n))).node_id for n in counts]
        out = copy.copy(batch)
        out.node_id = torch.cat(ids).to(device=batch.node_id.device, dtype=batch.node_id.dtype)
        return out


class _Chain:
    """Apply batch transforms in order."""

    def __init__(self, transforms: Sequence[Any]) -> None:
        self.transforms = list(transforms)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.transforms!r})"

    def __call__(self, batch: Any) -> Any:
        for transform in self.transforms:
            batch = transform(batch)
        return batch


def _data_pe_config(pe_cfg: Any) -> Any:
    """PE config of the data set: a resampling identifier transform is stored fixed (``resample=False``)."""
    if pe_cfg is None:
        return None
    plain = (
        OmegaConf.to_container(pe_cfg, resolve=True)
        if OmegaConf.is_config(pe_cfg)
        else dict(pe_cfg)
    )
    if plain.get("resample"):
        plain["resample"] = False
    return plain


def _training_augment(cfg: DictConfig) -> Any:
    """Training batch transform: fresh node identifiers (``model.pe.resample``), then ``model.augment``."""
    transforms = []
    pe_cfg = cfg.model.get("pe")
    if pe_cfg is not None and pe_cfg.get("resample"):
        transforms.append(ResampleNodeIds(instantiate_transform(pe_cfg, config_key="model.pe")))
    augment = instantiate_transform(cfg.model.get("augment"), config_key="model.augment")
    if augment is not None:
        transforms.append(augment)
    if not transforms:
        return None
    return transforms[0] if len(transforms) == 1 else _Chain(transforms)


def unused_parameters(model: nn.Module, batch: Any) -> list[str]:
    """Names of the trainable parameters that get no gradient from ``model(batch)``.

    One forward and backward in evaluation mode (no dropout, BatchNorm statistics untouched);
    the gradients are cleared afterwards. DDP needs ``find_unused_parameters`` exactly when
    this list is not empty.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    batch : ComplexData
        One batch.

    Returns
    -------
    list of str
        Parameter names.
    """
    was_training = model.training
    model.eval()
    try:
        model.zero_grad(set_to_none=True)
        model(batch).sum().backward()
        return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)


def _ddp_strategy(strategy: Any, model: nn.Module, loader: Any) -> Any:
    """DDP strategy for ``model``: ``<strategy>_find_unused_parameters_true`` only when needed.

    DDP fails when a parameter gets no gradient (e.g. a layer updating cells that no readout
    pools) unless it searches for unused parameters every step, which costs time. Whether that
    is needed is measured on one batch (:func:`unused_parameters`), for any model.
    """
    ddp = ("ddp", "ddp_spawn", "ddp_fork", "ddp_notebook")
    if not isinstance(strategy, str) or strategy not in ddp:
        return strategy
    unused = unused_parameters(model, next(iter(loader)))
    if not unused:
        return strategy
    warnings.warn(
        f"{len(unused)} parameters get no gradient ({', '.join(unused[:4])}, ...): using "
        f"strategy={strategy}_find_unused_parameters_true",
        stacklevel=2,
    )
    return f"{strategy}_find_unused_parameters_true"


def default_output_dir(dataset: str, model: str, root: str | os.PathLike = "outputs") -> Path:
    """``outputs/<dataset>/<model>/<timestamp>`` (a fresh folder)."""
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    base = Path(root) / dataset / model / stamp
    path, k = base, 1
    while path.exists():
        path = base.with_name(f"{stamp}_{k}")
        k += 1
    return path


def _quiet_warnings() -> None:
    for pattern in (
        r".*does not have many workers.*",
        r".*The number of training batches.*",
        r".*Sparse invariant checks.*",
        r".*sparse.*beta state.*",
        r".*`isinstance\(treespec, LeafSpec\)` is deprecated.*",
        r".*GPU available but not used.*",
        r".*Trying to infer the `batch_size`.*",
        r".*Checkpoint directory .* exists and is not empty.*",
        r".*self_loops.*",
    ):
        warnings.filterwarnings("ignore", message=pattern)


def run_seed(
    cfg: DictConfig,
    prepared: PreparedDataset,
    seed: int,
    output_dir: Path,
) -> tuple[SeedResult, int]:
    """Train and test one seed.

    Parameters
    ----------
    cfg : omegaconf.DictConfig
        Composed configuration.
    prepared : PreparedDataset
        The data set (already pruned to the model's keys).
    seed : int
        Seed.
    output_dir : pathlib.Path
        Run folder; this seed writes to ``output_dir / f"seed_{seed}"``.

    Returns
    -------
    tuple of (SeedResult, int)
        The result and the number of trainable parameters.
    """
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from topomodelx_attention.data import ComplexDataLoader
    from topomodelx_attention.harness.lightning_files import SafeCheckpointIO, SafeCSVLogger

    _quiet_warnings()
    info = prepared.info
    L.seed_everything(int(seed), workers=True, verbose=False)
    train, val, test = prepared.split(int(seed))
    if info.task_level == "node":
        for part, name in ((train, "training"), (val, "validation"), (test, "test")):
            if not any(c.num_cells(0) for c in part.complexes):
                raise ValueError(
                    f"the {name} split of {info.name} has no vertex to classify: a node-level "
                    "task needs vertices in every split (more graphs, or other split proportions)"
                )
    loader_cfg = dict(cfg.dataset.get("dataloader") or {})
    batch_size = int(loader_cfg.pop("batch_size", 32))
    num_workers = int(loader_cfg.pop("num_workers", 0))
    model = build_model(cfg.model.name, cfg.model.get("params"), info)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    sampling = sampler_options(cfg.dataset, info.task_level)
    if sampling is not None:  # batches of target vertices, each with its k-hop sub-complex
        loaders = sampled_loaders(sampling, prepared.complexes[0], (train, val, test), model, num_workers, loader_cfg)
    elif info.task_level == "transductive":  # full batch: the one complex, collated (and prepared) once
        prepare = structure_transform(model, cfg.dataset, cfg.trainer)
        loaders = [FullBatch(part, prepare) for part in (train, val, test)]
    else:
        loaders = [
            # index-offset collation of the neighbourhoods (data/collate.py), 2.5-2.9x PyG's generic one
            ComplexDataLoader(
                part,
                batch_size=batch_size,
                shuffle=shuffle,
                num_workers=num_workers,
                persistent_workers=num_workers > 0,
                **loader_cfg,
            )  # e.g. pin_memory
            for part, shuffle in ((train, True), (val, False), (test, False))
        ]

    trainer_cfg = OmegaConf.to_container(cfg.trainer, resolve=True)
    patience = trainer_cfg.get("early_stopping_patience")
    budget = max_time_seconds(trainer_cfg.get("max_time"))
    for key in _HARNESS_TRAINER_KEYS:
        trainer_cfg.pop(key, None)
    if budget is not None:
        trainer_cfg["max_time"] = timedelta(seconds=budget)
    trainer_cfg["strategy"] = _ddp_strategy(trainer_cfg.get("strategy"), model, loaders[0])
    trained = torch.compile(model, dynamic=True) if cfg.get("compile", False) else model
    monitor = f"val/{info.metric}"
    seed_dir = output_dir / f"seed_{seed}"
    checkpoint = ModelCheckpoint(
        dirpath=seed_dir / "checkpoints",
        monitor=monitor,
        mode=info.mode,
        save_top_k=1,
        filename="best-{epoch}",
        auto_insert_metric_name=False,
    )
    history = EpochHistory()
    callbacks: list[Any] = [checkpoint, history]
    if patience:
        callbacks.append(EarlyStopping(monitor=monitor, mode=info.mode, patience=int(patience)))
    # checkpoints and logs through the package's safe write path (no link below output_dir followed)
    trainer_cfg["plugins"] = [*(trainer_cfg.get("plugins") or []), SafeCheckpointIO(output_dir)]
    trainer = L.Trainer(
        logger=SafeCSVLogger(save_dir=str(output_dir), name=f"seed_{seed}", version="logs"),
        callbacks=callbacks,
        default_root_dir=str(seed_dir),
        enable_model_summary=False,
        **trainer_cfg,
    )
    steps_per_epoch = max(math.ceil(len(loaders[0]) / max(trainer.world_size, 1)), 1)
    module = GraphTaskModule(
        trained, info, cfg.optimizer, _training_augment(cfg), budget, steps_per_epoch
    )
    start = time.perf_counter()
    try:
        trainer.fit(module, loaders[0], loaders[1])
    except TrainingDiverged as error:
        return _diverged(cfg, int(seed), error, history, time.perf_counter() - start), n_params
    stopped_by_time = _stopped_by_time(trainer)
    test_value = float("nan")
    test_metrics: dict[str, float] = {}
    if cfg.get("test", True):
        ckpt = checkpoint.best_model_path or None
        # the checkpoint is read as tensors only, whatever torch's default or environment says
        outcome = trainer.test(module, loaders[2], ckpt_path=ckpt, verbose=False, weights_only=True)
        if outcome:
            test_value = float(outcome[0].get(f"test/{info.metric}", float("nan")))
            test_metrics = {
                key.split("/", 1)[1]: float(value)
                for key, value in outcome[0].items()
                if key.startswith("test/") and key.split("/", 1)[1] in info.metrics
            }
    seconds = time.perf_counter() - start
    rows = [r for r in history.rows if monitor in r]
    if rows:
        pick = max if info.mode == "max" else min
        best = pick(rows, key=lambda r: r[monitor])
        best_epoch, best_val = int(best["epoch"]), float(best[monitor])
    else:
        best_epoch, best_val = -1, float("nan")
    result = SeedResult(
        int(seed),
        best_epoch,
        len(history.rows),
        best_val,
        test_value,
        seconds,
        history.rows,
        stopped_by_time,
        test_metrics,
    )
    return result, n_params


def _diverged(cfg: DictConfig, seed: int, error: TrainingDiverged, history: EpochHistory, seconds: float) -> SeedResult:
    """Return the failed :class:`SeedResult` of a diverged seed: no metric, the reason and what to try."""
    lr = cfg.optimizer.get("lr")
    clip = cfg.trainer.get("gradient_clip_val")
    failure = (
        f"diverged: {error}; try a lower optimizer.lr (now {lr})"
        + (" or trainer.gradient_clip_val=1.0 (now off)" if not clip else f" or a lower trainer.gradient_clip_val (now {clip})")
    )
    return SeedResult(
        seed, -1, error.epoch, float("nan"), float("nan"), seconds, history.rows, failure=failure
    )


def _stopped_by_time(trainer: L.Trainer) -> bool:
    """Whether Lightning's ``Timer`` (``trainer.max_time``) ended the fit."""
    from lightning.pytorch.callbacks import Timer

    for callback in trainer.callbacks:
        if isinstance(callback, Timer) and callback._duration is not None:
            return bool(callback.time_elapsed("train") >= callback._duration)
    return False


def run_experiment(
    cfg: DictConfig,
    output_dir: str | os.PathLike | None = None,
    verbose: bool = True,
    lightning_info: bool = False,
) -> ExperimentResult:
    """Run every seed of a configuration and write the results.

    Parameters
    ----------
    cfg : omegaconf.DictConfig
        Composed configuration (:func:`~.config.compose_config`). Besides the groups:
        ``seeds``, ``test``, ``plot``, ``compile`` (``torch.compile(model, dynamic=True)``),
        ``trainer.max_time`` (wall-time budget per seed: seconds, ``"DD:HH:MM:SS"`` or
        ``timedelta`` keywords), ``trainer.keep_freed_memory`` (glibc keeps freed memory in the
        process, :func:`~.memory.keep_freed_memory`; process-wide, for very large complexes).
        A node-identifier PE with ``resample: true`` (``OrthogonalRandomNodeId``) gives fixed
        identifiers to the data set (validation, test) and fresh ones to every training batch
        (:class:`ResampleNodeIds`). Transductive node tasks (``dataset.task_level=transductive``,
        e.g. ``configs/dataset/node/``) run one seed per fixed split: seed ``s`` trains on split
        ``s`` of the file's masks (seeds must be ``0..num_splits - 1``; the seed also initialises
        the model), full batch (:class:`FullBatch`) or on sampled sub-complexes
        (``dataset.sampler``, :func:`sampler_options`), and report mean ± std over those splits.
    output_dir : path-like, optional
        Output folder (default ``cfg.paths.output_dir`` or
        ``outputs/<dataset>/<model>/<timestamp>``).
    verbose : bool, default=True
        Print the per-seed progress lines.
    lightning_info : bool, default=False
        Show Lightning's INFO messages (available devices, checkpoint restores), as the CLI's
        ``--verbose`` does; off by default, as in the CLI
        (:func:`~.lightning_logs.lightning_logs`). Lightning's warnings are always shown.

    Returns
    -------
    ExperimentResult
        Per-seed results; ``results.csv``, ``results.md``, ``summary.csv``, ``curves.png``,
        ``time_to_accuracy.png`` and ``config.yaml`` are in ``output_dir`` (written by the
        rank-0 process).
    """
    validate_config(cfg)  # allowed _target_s, finite in-range values, distinct seeds (hand-made configs too)
    _quiet_warnings()
    seeds: Sequence[int] = list(cfg.get("seeds") or [0])
    name = cfg.model.get("name")
    spec = get_spec(name)  # fail early on an unknown model
    domain = cfg.model.get("domain", spec.domain)
    if domain != spec.domain:
        raise ValueError(
            f"model {name!r} works on the {spec.domain} domain, but model.domain={domain!r}"
        )
    budget = max_time_seconds(cfg.trainer.get("max_time"))
    if cfg.trainer.get("keep_freed_memory", False):
        keep_freed_memory()  # process-wide, once: large per-step temporaries reused, not re-mapped
    threads = cfg.trainer.get("num_threads")
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        prepared = prepare_dataset(
            cfg.dataset,
            cfg.model.lifting,
            _data_pe_config(cfg.model.get("pe")),
            cfg.paths.get("cache_dir"),
        )
        if prepared.num_splits is not None:  # transductive: a seed is a split index
            outside = [s for s in seeds if isinstance(s, bool) or not 0 <= int(s) < prepared.num_splits]
            if outside:
                raise ValueError(
                    f"data set {prepared.info.name} has {prepared.num_splits} fixed splits and each seed "
                    f"runs one: seeds must be split indices 0..{prepared.num_splits - 1}, got {outside} "
                    f"(e.g. seeds=[{','.join(str(i) for i in range(min(prepared.num_splits, 10)))}])"
                )
        sampler_options(cfg.dataset, prepared.info.task_level)  # a bad dataset.sampler fails before any seed
        probe = build_model(name, cfg.model.get("params"), prepared.info)
        prune_keys(prepared.complexes, spec.keys(probe, prepared.info))
        out = output_dir or cfg.paths.get("output_dir")
        if not out:
            # DDP children re-run the command: they inherit rank 0's folder through the environment
            inherited = None if is_rank_zero() else os.environ.get(_RUN_DIR_ENV)
            out = inherited or default_output_dir(prepared.info.name, name)
            os.environ[_RUN_DIR_ENV] = str(out)
        out = make_dirs(out)
        write_text(out / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True), root=out)
        results, n_params = [], 0
        for seed in seeds:
            with lightning_logs(verbose=lightning_info):
                result, n_params = run_seed(cfg, prepared, int(seed), out)
            results.append(result)
            if verbose and is_rank_zero() and result.failure:
                print(f"[{prepared.info.name} / {name}] seed {seed}: {result.failure}", flush=True)
            elif verbose and is_rank_zero():
                print(
                    f"[{prepared.info.name} / {name}] seed {seed}: best epoch {result.best_epoch}, "
                    f"val {prepared.info.metric} {result.val:.4f}, test {result.test:.4f} "
                    f"({result.epochs} epochs, {result.seconds:.1f} s"
                    f"{', stopped by the time budget' if result.stopped_by_time else ''})",
                    flush=True,
                )
    finally:
        torch.set_num_threads(previous_threads)
    experiment = ExperimentResult(
        dataset=prepared.info.name,
        model=name,
        metric=prepared.info.metric,
        seeds=results,
        num_parameters=n_params,
        output_dir=out,
        config=OmegaConf.to_container(cfg, resolve=True),
        max_time=budget,
    )
    if is_rank_zero():
        write_results(experiment, plot=bool(cfg.get("plot", True)))
    return experiment


@contextlib.contextmanager
def _quiet_lightning() -> Any:
    """Lightning's info lines (devices, checkpoint restored) and its callback hint off for a test call."""
    with lightning_logs(verbose=False), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*when using `ckpt_path`.*")
        yield


def best_checkpoint(output_dir: str | os.PathLike, seed: int) -> Path:
    """Return the best-validation checkpoint that :func:`run_experiment` kept for one seed.

    Parameters
    ----------
    output_dir : path-like
        ``ExperimentResult.output_dir`` of the run.
    seed : int
        The seed.

    Returns
    -------
    pathlib.Path
        ``<output_dir>/seed_<seed>/checkpoints/best-<epoch>.ckpt``.

    Raises
    ------
    ValueError
        When the folder holds no checkpoint or more than one (the message names the folder).
    """
    folder = Path(output_dir) / f"seed_{int(seed)}" / "checkpoints"
    found = sorted(folder.glob("best-*.ckpt"))
    if len(found) != 1:
        raise ValueError(
            f"{folder}: expected exactly one best-validation checkpoint (best-<epoch>.ckpt), "
            f"found {len(found)}; was the seed trained to the end with run_experiment?"
        )
    return found[0]


def evaluate_checkpoint(
    cfg: DictConfig,
    info: DatasetInfo,
    checkpoint: str | os.PathLike,
    complexes: Sequence[Any],
) -> dict[str, float]:
    """Test a checkpoint of :func:`run_experiment` on other complexes (e.g. another data set's test split).

    The model is built from ``cfg.model`` for ``info`` (the task of the training data), the
    checkpoint's weights are loaded by Lightning as for the in-distribution test, and the test
    loop of :class:`GraphTaskModule` runs over ``complexes`` (batch size of
    ``cfg.dataset.dataloader``): the same metrics as the training run's test.

    Parameters
    ----------
    cfg : omegaconf.DictConfig
        The configuration the checkpoint was trained with.
    info : DatasetInfo
        Task and shapes of the training data set; ``complexes`` must match them (same
        lifting, PE and task).
    checkpoint : path-like
        A checkpoint written by the run (:func:`best_checkpoint`).
    complexes : sequence of ComplexData
        The complexes to test on, already holding the keys the model reads.

    Returns
    -------
    dict of str to float
        ``{"loss": ..., info.metric: ..., <dataset.metrics>: ...}`` (the logged ``test/*`` values).

    Raises
    ------
    ValueError
        When ``complexes`` is empty or the checkpoint file does not exist.
    """
    from topomodelx_attention.data import ComplexDataLoader

    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise ValueError(f"checkpoint {checkpoint} does not exist")
    complexes = list(complexes)
    if not complexes:
        raise ValueError("evaluate_checkpoint needs at least one complex to test on")
    _quiet_warnings()
    loader_cfg = dict(cfg.dataset.get("dataloader") or {})
    loader = ComplexDataLoader(
        ComplexDataset(complexes), batch_size=int(loader_cfg.get("batch_size", 32)), shuffle=False
    )
    model = build_model(cfg.model.name, cfg.model.get("params"), info)
    module = GraphTaskModule(model, info, cfg.optimizer)
    with _quiet_lightning():
        trainer = L.Trainer(
        logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            accelerator=cfg.trainer.get("accelerator", "cpu"),
            devices=1,
            precision=cfg.trainer.get("precision", "32-true"),
        )
        outcome = trainer.test(
            module, loader, ckpt_path=str(checkpoint), verbose=False, weights_only=True
        )
    return {key.split("/", 1)[1]: float(value) for key, value in (outcome[0] if outcome else {}).items() if key.startswith("test/")}


def is_rank_zero() -> bool:
    """Whether this process is the global rank 0 (Lightning's view once a Trainer exists)."""
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return int(getattr(rank_zero_only, "rank", 0) or 0) == 0
