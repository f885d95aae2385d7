"""Training with Lightning: one run per seed, test at the best validation epoch.

:func:`run_experiment` takes a composed configuration (:func:`~.config.compose_config`),
prepares the data set once (cached lifting + PE), and for every seed trains a fresh model with
:class:`GraphTaskModule` under a :class:`lightning.Trainer` (progress bar, early stopping on the
monitored validation metric, best-validation checkpoint, CSV logger, gradient clipping,
``trainer.devices``/``strategy``/``num_nodes`` passed through for DDP), then evaluates the test
set with the best checkpoint. Results, learning curves and the resolved configuration are
written to the output folder.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn
from torch.nn import functional as F

from topomodelx_attention.harness.datasets import (
    DatasetInfo,
    PreparedDataset,
    instantiate_transform,
    prepare_dataset,
    prune_keys,
)
from topomodelx_attention.harness.models import build_model, get_spec

__all__ = [
    "ExperimentResult",
    "GraphTaskModule",
    "SeedResult",
    "cosine_warmup_lambda",
    "default_output_dir",
    "is_rank_zero",
    "run_experiment",
    "run_seed",
]

_HARNESS_TRAINER_KEYS = ("early_stopping_patience", "num_threads")
_RUN_DIR_ENV = "TOPOMODELX_ATTENTION_RUN_DIR"


def cosine_warmup_lambda(warmup_steps: int, total_steps: int, min_ratio: float = 0.0):
    """Learning-rate factor: linear warmup to 1, then cosine decay to ``min_ratio``.

    Parameters
    ----------
    warmup_steps : int
        Steps of linear warmup (factor ``(step + 1) / warmup_steps``).
    total_steps : int
        Total optimisation steps.
    min_ratio : float, default=0.0
        Final factor.

    Returns
    -------
    callable
        ``step -> factor`` for :class:`torch.optim.lr_scheduler.LambdaLR`.
    """
    warmup_steps = max(int(warmup_steps), 0)
    total_steps = max(int(total_steps), 1)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        span = max(total_steps - warmup_steps, 1)
        progress = min((step - warmup_steps) / span, 1.0)
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


class GraphTaskModule(L.LightningModule):
    """Graph-level classification or regression with any harness model.

    Parameters
    ----------
    model : torch.nn.Module
        ``model(batch) -> (num_complexes, out_channels)``.
    info : DatasetInfo
        Task, output width and metric of the data set.
    optimizer : mapping
        The ``optimizer`` config (``lr``, ``weight_decay``, ``betas``, ``eps``, ``scheduler``,
        ``warmup_epochs``, ``min_lr_ratio``).
    augment : callable, optional
        Transform applied to training batches (e.g. ``RandomSignFlip``).
    """

    def __init__(
        self,
        model: nn.Module,
        info: DatasetInfo,
        optimizer: Mapping[str, Any],
        augment: Any = None,
    ) -> None:
        super().__init__()
        import torchmetrics

        self.model = model
        self.info = info
        self.optimizer_cfg = dict(optimizer)
        self.augment = augment
        if info.task == "classification":
            make = lambda: torchmetrics.classification.MulticlassAccuracy(  # noqa: E731
                num_classes=info.out_channels, average="micro"
            )
        else:
            make = torchmetrics.MeanAbsoluteError
        self.metrics = nn.ModuleDict({f"{stage}_metric": make() for stage in ("train", "val", "test")})

    def forward(self, batch: Any) -> Tensor:
        """Predictions of the wrapped model, ``(num_complexes, out_channels)``."""
        return self.model(batch)

    def _loss_and_prediction(self, batch: Any) -> tuple[Tensor, Tensor, Tensor]:
        out = self.model(batch)
        y = batch.y
        if self.info.task == "classification":
            y = y.view(-1).long()
            return F.cross_entropy(out, y), out, y
        y = y.view(out.shape[0], -1).to(out.dtype)
        if y.shape[1] == 1:
            out, y = out.view(-1), y.view(-1)
        return F.l1_loss(out, y), out, y

    def _step(self, batch: Any, stage: str) -> Tensor:
        loss, prediction, target = self._loss_and_prediction(batch)
        metric = self.metrics[f"{stage}_metric"]
        metric.update(prediction.detach(), target)
        size = batch.num_complexes
        self.log(f"{stage}/loss", loss, on_step=False, on_epoch=True, batch_size=size, sync_dist=True,
                 prog_bar=stage == "train")
        self.log(f"{stage}/{self.info.metric}", metric, on_step=False, on_epoch=True, batch_size=size,
                 prog_bar=stage == "val")
        return loss

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:  # noqa: D102
        if self.augment is not None:
            batch = self.augment(batch)
        return self._step(batch, "train")

    def validation_step(self, batch: Any, batch_idx: int) -> None:  # noqa: D102
        self._step(batch, "val")

    def test_step(self, batch: Any, batch_idx: int) -> None:  # noqa: D102
        self._step(batch, "test")

    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW with a per-step cosine schedule and linear warmup (the CT paper's recipe)."""
        cfg = self.optimizer_cfg
        name = str(cfg.get("name", "adamw")).lower()
        kwargs = {
            "lr": float(cfg.get("lr", 1e-3)),
            "weight_decay": float(cfg.get("weight_decay", 0.0)),
            "betas": tuple(float(b) for b in cfg.get("betas", (0.9, 0.999))),
            "eps": float(cfg.get("eps", 1e-8)),
        }
        if name == "adamw":
            optimizer = torch.optim.AdamW(self.parameters(), **kwargs)
        elif name == "adam":
            optimizer = torch.optim.Adam(self.parameters(), **kwargs)
        else:
            raise ValueError(f"optimizer.name must be 'adamw' or 'adam', got {name!r}")
        scheduler = cfg.get("scheduler", "cosine_warmup")
        if scheduler in (None, "constant"):
            return {"optimizer": optimizer}
        if scheduler != "cosine_warmup":
            raise ValueError(f"optimizer.scheduler must be 'cosine_warmup' or 'constant', got {scheduler!r}")
        total = int(self.trainer.estimated_stepping_batches)
        epochs = max(int(self.trainer.max_epochs or 1), 1)
        warmup = round(float(cfg.get("warmup_epochs", 0)) * total / epochs)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, cosine_warmup_lambda(warmup, total, float(cfg.get("min_lr_ratio", 0.0)))
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class _History(L.Callback):
    """Collect per-epoch metrics (rank 0) for the learning curves."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        row = {"epoch": float(trainer.current_epoch)}
        for key, value in trainer.callback_metrics.items():
            if key.startswith(("train/", "val/")):
                row[key] = float(value)
        self.rows.append(row)


@dataclass
class SeedResult:
    """Outcome of one seed.

    Attributes
    ----------
    seed : int
        The seed (data split seed for random splits, initialisation seed always).
    best_epoch : int
        Epoch of the best validation metric (0-based).
    epochs : int
        Epochs trained.
    val : float
        Best validation metric.
    test : float
        Test metric of the best-validation checkpoint (NaN without testing).
    seconds : float
        Wall time of training and testing.
    history : list of dict
        Per-epoch metrics.
    """

    seed: int
    best_epoch: int
    epochs: int
    val: float
    test: float
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass
class ExperimentResult:
    """All seeds of one (data set, model) configuration.

    Attributes
    ----------
    dataset : str
        Data set name.
    model : str
        Model name.
    metric : str
        Metric name (``accuracy`` or ``mae``).
    seeds : list of SeedResult
        Per-seed results.
    num_parameters : int
        Trainable parameters of the model.
    output_dir : pathlib.Path
        Where results, curves and logs are.
    config : dict
        The resolved configuration.
    """

    dataset: str
    model: str
    metric: str
    seeds: list[SeedResult]
    num_parameters: int
    output_dir: Path
    config: dict[str, Any]


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
    from lightning.pytorch.loggers import CSVLogger
    from torch_geometric.loader import DataLoader

    _quiet_warnings()
    info = prepared.info
    L.seed_everything(int(seed), workers=True, verbose=False)
    train, val, test = prepared.split(int(seed))
    loader_cfg = dict(cfg.dataset.get("dataloader") or {})
    batch_size = int(loader_cfg.pop("batch_size", 32))
    num_workers = int(loader_cfg.pop("num_workers", 0))
    loaders = [
        DataLoader(part, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                   persistent_workers=num_workers > 0, **loader_cfg)  # e.g. pin_memory
        for part, shuffle in ((train, True), (val, False), (test, False))
    ]
    model = build_model(cfg.model.name, cfg.model.get("params"), info)
    augment = instantiate_transform(cfg.model.get("augment"))
    module = GraphTaskModule(model, info, cfg.optimizer, augment)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)

    trainer_cfg = OmegaConf.to_container(cfg.trainer, resolve=True)
    patience = trainer_cfg.pop("early_stopping_patience", None)
    for key in _HARNESS_TRAINER_KEYS:
        trainer_cfg.pop(key, None)
    if trainer_cfg.get("strategy") == "ddp":
        # the CT's last layer also updates ranks its readout does not pool: DDP must allow
        # parameters without gradients
        trainer_cfg["strategy"] = "ddp_find_unused_parameters_true"
    monitor = f"val/{info.metric}"
    seed_dir = output_dir / f"seed_{seed}"
    checkpoint = ModelCheckpoint(
        dirpath=seed_dir / "checkpoints", monitor=monitor, mode=info.mode, save_top_k=1,
        filename="best-{epoch}", auto_insert_metric_name=False,
    )
    history = _History()
    callbacks: list[Any] = [checkpoint, history]
    if patience:
        callbacks.append(EarlyStopping(monitor=monitor, mode=info.mode, patience=int(patience)))
    trainer = L.Trainer(
        logger=CSVLogger(save_dir=str(output_dir), name=f"seed_{seed}", version="logs"),
        callbacks=callbacks,
        default_root_dir=str(seed_dir),
        enable_model_summary=False,
        **trainer_cfg,
    )
    start = time.perf_counter()
    trainer.fit(module, loaders[0], loaders[1])
    test_value = float("nan")
    if cfg.get("test", True):
        ckpt = checkpoint.best_model_path or None
        outcome = trainer.test(module, loaders[2], ckpt_path=ckpt, verbose=False)
        if outcome:
            test_value = float(outcome[0].get(f"test/{info.metric}", float("nan")))
    seconds = time.perf_counter() - start
    rows = [r for r in history.rows if monitor in r]
    if rows:
        pick = max if info.mode == "max" else min
        best = pick(rows, key=lambda r: r[monitor])
        best_epoch, best_val = int(best["epoch"]), float(best[monitor])
    else:
        best_epoch, best_val = -1, float("nan")
    result = SeedResult(int(seed), best_epoch, len(history.rows), best_val, test_value, seconds, history.rows)
    return result, n_params


def run_experiment(cfg: DictConfig, output_dir: str | os.PathLike | None = None, verbose: bool = True) -> ExperimentResult:
    """Run every seed of a configuration and write the results.

    Parameters
    ----------
    cfg : omegaconf.DictConfig
        Composed configuration (:func:`~.config.compose_config`).
    output_dir : path-like, optional
        Output folder (default ``cfg.paths.output_dir`` or
        ``outputs/<dataset>/<model>/<timestamp>``).
    verbose : bool, default=True
        Print the per-seed progress lines.

    Returns
    -------
    ExperimentResult
        Per-seed results; ``results.csv``, ``results.md``, ``curves.png`` and ``config.yaml``
        are in ``output_dir`` (written by the rank-0 process).
    """
    from topomodelx_attention.harness import results as results_module

    _quiet_warnings()
    seeds: Sequence[int] = list(cfg.get("seeds") or [0])
    name = cfg.model.get("name")
    spec = get_spec(name)  # fail early on an unknown model
    domain = cfg.model.get("domain", spec.domain)
    if domain != spec.domain:
        raise ValueError(f"model {name!r} works on the {spec.domain} domain, but model.domain={domain!r}")
    threads = cfg.trainer.get("num_threads")
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.get("pe"), cfg.paths.get("cache_dir"))
        probe = build_model(name, cfg.model.get("params"), prepared.info)
        prune_keys(prepared.complexes, spec.keys(probe, prepared.info))
        out = output_dir or cfg.paths.get("output_dir")
        if not out:
            # DDP children re-run the command: they inherit rank 0's folder through the environment
            inherited = None if is_rank_zero() else os.environ.get(_RUN_DIR_ENV)
            out = inherited or default_output_dir(prepared.info.name, name)
            os.environ[_RUN_DIR_ENV] = str(out)
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, out / "config.yaml", resolve=True)
        results, n_params = [], 0
        for seed in seeds:
            result, n_params = run_seed(cfg, prepared, int(seed), out)
            results.append(result)
            if verbose and is_rank_zero():
                print(
                    f"[{prepared.info.name} / {name}] seed {seed}: best epoch {result.best_epoch}, "
                    f"val {prepared.info.metric} {result.val:.4f}, test {result.test:.4f} "
                    f"({result.seconds:.1f} s)",
                    flush=True,
                )
    finally:
        torch.set_num_threads(previous_threads)
    experiment = ExperimentResult(
        dataset=prepared.info.name, model=name, metric=prepared.info.metric, seeds=results,
        num_parameters=n_params, output_dir=out,
        config=OmegaConf.to_container(cfg, resolve=True),
    )
    if is_rank_zero():
        results_module.write_results(experiment, plot=bool(cfg.get("plot", True)))
    return experiment


def is_rank_zero() -> bool:
    """Whether this process is the global rank 0 (Lightning's view once a Trainer exists)."""
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return int(getattr(rank_zero_only, "rank", 0) or 0) == 0
