"""The Lightning task module of the harness: loss, metrics, optimiser and schedule of one run.

:class:`GraphTaskModule` trains any harness model on a graph-level, inductive node-level or
transductive node-level task (:class:`~topomodelx_attention.harness.prepare.DatasetInfo`):
AdamW with a per-step cosine schedule and linear warm-up (:func:`cosine_warmup_lambda`), the
data set's loss and metrics, and :class:`TrainingDiverged` when the training loss is NaN or
infinite. :class:`EpochHistory` records each epoch's metrics and wall times.
:mod:`~topomodelx_attention.harness.training` runs it per seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import lightning as L
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from topomodelx_attention.harness.prepare import DatasetInfo

__all__ = [
    "EpochHistory",
    "GraphTaskModule",
    "TrainingDiverged",
    "adam_update_mode",
    "cosine_warmup_lambda",
    "decay_epochs",
    "max_time_seconds",
]

class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite: the seed stops and is reported as failed.

    Parameters
    ----------
    epoch : int
        Epoch of the step (0-based).
    step : int
        Optimisation steps taken before it.
    loss : float
        The loss value.
    """

    def __init__(self, epoch: int, step: int, loss: float) -> None:
        self.epoch, self.step, self.loss = int(epoch), int(step), float(loss)
        super().__init__(f"the training loss is {self.loss} at epoch {self.epoch}, step {self.step}")


def cosine_warmup_lambda(
    warmup_steps: int,
    total_steps: int,
    min_ratio: float = 0.0,
    progress: Callable[[int], float] | None = None,
):
    """Learning-rate factor: linear warmup to 1, then cosine decay to ``min_ratio``.

    Parameters
    ----------
    warmup_steps : int
        Steps of linear warmup (factor ``(step + 1) / warmup_steps``).
    total_steps : int
        Total optimisation steps (unused with ``progress``).
    min_ratio : float, default=0.0
        Final factor.
    progress : callable, optional
        ``step -> fraction`` (clipped to ``[0, 1]``) of the decay done after the warmup;
        default ``(step - warmup_steps) / (total_steps - warmup_steps)``. Under a wall-time
        budget the harness passes the elapsed fraction of ``trainer.max_time``.

    Returns
    -------
    callable
        ``step -> factor`` for :class:`torch.optim.lr_scheduler.LambdaLR`.
    """
    warmup_steps = max(int(warmup_steps), 0)
    total_steps = max(int(total_steps), 1)

    def step_progress(step: int) -> float:
        return (step - warmup_steps) / max(total_steps - warmup_steps, 1)

    fraction = progress or step_progress

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        done = min(max(float(fraction(step)), 0.0), 1.0)
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * done))

    return factor


def decay_epochs(value: Any, warmup_epochs: float = 0.0) -> float | None:
    """Check ``optimizer.decay_epochs``: the epoch at which the cosine reaches ``min_lr_ratio``.

    ``None`` (the default) decays over ``trainer.max_epochs``. A number decouples the schedule
    from the epoch cap: under early stopping with a large cap (the GraphUniverse protocol's
    500 epochs, runs that stop after 20–60) the cosine over the cap keeps the learning rate at
    its peak for the whole run, where a short selection run with the cap at 20 decays to zero.
    After ``decay_epochs`` the factor stays at ``min_lr_ratio``.

    Parameters
    ----------
    value : float or None
        ``optimizer.decay_epochs``; warmup included, so it must exceed ``warmup_epochs``.
    warmup_epochs : float, default=0.0
        ``optimizer.warmup_epochs``.

    Returns
    -------
    float or None
        The horizon in epochs, or ``None``.

    Raises
    ------
    ValueError
        When ``value`` is not a number larger than ``warmup_epochs``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"optimizer.decay_epochs must be a number of epochs or null, got {value!r}")
    if value <= warmup_epochs:
        raise ValueError(
            f"optimizer.decay_epochs={value} must be larger than optimizer.warmup_epochs="
            f"{warmup_epochs} (the cosine decay starts after the warmup)"
        )
    return float(value)


class _TimeProgress:
    """Elapsed fraction of a wall-time budget, counted from the first call (the fit start)."""

    def __init__(self, budget_seconds: float) -> None:
        self.budget = float(budget_seconds)
        self.start: float | None = None

    def __call__(self, step: int) -> float:
        now = time.perf_counter()
        if self.start is None:
            self.start = now
        return (now - self.start) / self.budget


def max_time_seconds(value: Any) -> float | None:
    """Seconds of a ``trainer.max_time`` value.

    Parameters
    ----------
    value : None, number, str or mapping
        Seconds (a number), Lightning's ``"DD:HH:MM:SS"`` string or ``timedelta`` keywords
        (``{"minutes": 5}``).

    Returns
    -------
    float or None
        The budget in seconds, ``None`` without one.
    """
    if value is None:
        return None
    message = (
        f"trainer.max_time must be seconds, 'DD:HH:MM:SS' or timedelta keywords, got {value!r}"
    )
    if isinstance(value, bool):
        raise ValueError(message)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        parts = value.split(":")
        if len(parts) != 4 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(message)
        days, hours, minutes, secs = (int(p) for p in parts)
        seconds = timedelta(days=days, hours=hours, minutes=minutes, seconds=secs).total_seconds()
    elif isinstance(value, Mapping):
        try:
            seconds = timedelta(**{str(k): float(v) for k, v in value.items()}).total_seconds()
        except TypeError as error:
            raise ValueError(f"{message} ({error})") from error
    else:
        raise ValueError(message)
    if not seconds > 0:
        raise ValueError(f"trainer.max_time must be positive, got {value!r}")
    return seconds


def _mse_per_total_target() -> Any:
    """Squared error summed over the epoch / predictions / targets summed (torchmetrics ``Metric``)."""
    import torchmetrics

    class MSEPerTotalTarget(torchmetrics.Metric):
        """MSE of the epoch divided by the sum of the epoch's targets.

        The GraphUniverse challenge's ``mse_per_triangle``: with ``y`` the number of triangles
        of every graph, test MSE / total number of triangles over the test graphs
        (TopoBench ``2026_tdl_challenge/utils.py``). States are sums, so batches and DDP
        processes combine exactly.
        """

        full_state_update = False

        def __init__(self) -> None:
            super().__init__()
            zero = torch.tensor(0.0, dtype=torch.float64)
            self.add_state("squared_error", default=zero.clone(), dist_reduce_fx="sum")
            self.add_state("count", default=zero.clone(), dist_reduce_fx="sum")
            self.add_state("target_total", default=zero.clone(), dist_reduce_fx="sum")

        def update(self, prediction: Tensor, target: Tensor) -> None:
            prediction, target = prediction.double().reshape(-1), target.double().reshape(-1)
            self.squared_error += ((prediction - target) ** 2).sum()
            self.count += target.numel()
            self.target_total += target.sum()

        def compute(self) -> Tensor:
            if not bool(self.target_total != 0):  # undefined without triangles: NaN, not inf
                return self.squared_error.new_tensor(float("nan"))
            return self.squared_error / self.count.clamp_min(1) / self.target_total

    return MSEPerTotalTarget()


class GraphTaskModule(L.LightningModule):
    """Graph-level classification or regression, or node classification, with any harness model.

    Graph-level tasks (``info.task_level == "graph"``): one prediction per complex. Node-level
    tasks (``"node"``, inductive): one prediction per vertex, every vertex of a batch is
    labelled (the split is by complex), and the loss and accuracy are means over the vertices
    (the epoch metrics weight every batch by its number of vertices). Transductive node tasks
    (``"transductive"``): one complex per step, the whole of it through the model, and the loss
    and metric read only the vertices of the batch's ``node_mask`` (the part's mask of the
    split, :meth:`~.prepare.PreparedDataset.split`); ``roc_auc`` (two classes) scores the
    softmax probability of class 1 (torchmetrics ``BinaryAUROC``).

    Parameters
    ----------
    model : torch.nn.Module
        ``model(batch) -> (num_complexes, out_channels)``, or ``(n_0, out_channels)`` for a
        node-level task.
    info : DatasetInfo
        Task, task level, output width, loss and metrics of the data set.
    optimizer : mapping
        The ``optimizer`` config (``lr``, ``weight_decay``, ``betas``, ``eps``, ``scheduler``,
        ``warmup_epochs``, ``min_lr_ratio``, ``decay_epochs``: see :func:`decay_epochs`).
    augment : callable, optional
        Transform applied to training batches (e.g. ``RandomSignFlip``).
    time_budget : float, optional
        Wall-time budget of the training in seconds (``trainer.max_time``): the cosine schedule
        then decays over the budget instead of over ``max_epochs``.
    steps_per_epoch : int, optional
        Optimisation steps per epoch (converts ``warmup_epochs`` to steps under a time budget).
    """

    def __init__(
        self,
        model: nn.Module,
        info: DatasetInfo,
        optimizer: Mapping[str, Any],
        augment: Any = None,
        time_budget: float | None = None,
        steps_per_epoch: int | None = None,
    ) -> None:
        super().__init__()
        import torchmetrics

        self.model = model
        self.info = info
        self.optimizer_cfg = dict(optimizer)
        self.augment = augment
        self.time_budget = time_budget
        self.steps_per_epoch = steps_per_epoch
        if info.metric == "accuracy":
            make = lambda: torchmetrics.classification.MulticlassAccuracy(  # noqa: E731
                num_classes=info.out_channels, average="micro"
            )
        elif info.metric == "roc_auc":
            make = torchmetrics.classification.BinaryAUROC
        elif info.metric == "mse":
            make = torchmetrics.MeanSquaredError
        else:
            make = torchmetrics.MeanAbsoluteError
        self.metrics = nn.ModuleDict(
            {f"{stage}_metric": make() for stage in ("train", "val", "test")}
        )
        extra = {"mse_per_triangle": _mse_per_total_target}
        unknown = sorted(set(info.metrics) - set(extra))
        if unknown:
            raise ValueError(f"unknown metrics {unknown} (dataset.metrics); known: {sorted(extra)}")
        self.extra_metrics = nn.ModuleDict(
            {f"{stage}_{name}": extra[name]() for name in info.metrics for stage in ("val", "test")}
        )

    def forward(self, batch: Any) -> Tensor:
        """Predictions of the wrapped model, ``(num_complexes, out_channels)`` (node tasks: ``(n_0, ...)``)."""
        return self.model(batch)

    def _loss_and_prediction(self, batch: Any) -> tuple[Tensor, Tensor, Tensor]:
        out = self.model(batch)
        y = batch.y
        loss = self.info.loss or ("cross_entropy" if self.info.task == "classification" else "mae")
        if self.info.task_level == "transductive":
            y = y.reshape(-1).long()
            mask = batch.get("node_mask") if hasattr(batch, "get") else None
            if mask is None or mask.shape != y.shape or mask.dtype != torch.bool:
                raise ValueError(
                    "a transductive task needs node_mask, bool of shape (n_0,), in every batch "
                    "(PreparedDataset.split adds it)"
                )
            if out.dim() != 2 or out.shape[0] != y.shape[0]:
                raise ValueError(
                    f"a transductive node task needs one prediction row per vertex: the model returned "
                    f"{tuple(out.shape)} for {y.shape[0]} vertices (build it with model.params.outputs=node)"
                )
            out, y = out[mask], y[mask]
            return F.cross_entropy(out, y), out, y
        if self.info.task_level == "node":
            y = y.reshape(-1).long()
            if out.dim() != 2 or out.shape[0] != y.shape[0]:
                raise ValueError(
                    f"a node-level task needs one prediction row per vertex: the model returned "
                    f"{tuple(out.shape)} for {y.shape[0]} labelled vertices (build it with "
                    "model.params.outputs=node)"
                )
            if not y.numel():  # only empty complexes: nothing to learn, no NaN mean
                return out.sum() * 0.0, out, y
            return F.cross_entropy(out, y), out, y
        if self.info.task == "classification":
            y = y.view(-1).long()
            return F.cross_entropy(out, y), out, y
        y = y.view(out.shape[0], -1).to(out.dtype)
        if y.shape[1] == 1:
            out, y = out.view(-1), y.view(-1)
        return (F.mse_loss if loss == "mse" else F.l1_loss)(out, y), out, y

    def _step(self, batch: Any, stage: str) -> Tensor:
        loss, prediction, target = self._loss_and_prediction(batch)
        metric = self.metrics[f"{stage}_metric"]
        size = batch.num_complexes if self.info.task_level == "graph" else target.shape[0]
        if not size:  # a batch of empty complexes of a node task: no vertex to count
            return loss
        scores = prediction.detach()
        if self.info.metric == "roc_auc":  # the probability of the positive class
            scores = scores.float().softmax(dim=-1)[:, 1]
        metric.update(scores, target)
        for name in self.info.metrics:
            key = f"{stage}_{name}"
            if key in self.extra_metrics:
                self.extra_metrics[key].update(prediction.detach(), target)
                self.log(f"{stage}/{name}", self.extra_metrics[key], on_step=False, on_epoch=True, batch_size=size)
        self.log(
            f"{stage}/loss",
            loss,
            on_step=False,
            on_epoch=True,
            batch_size=size,
            sync_dist=True,
            prog_bar=stage == "train",
        )
        self.log(
            f"{stage}/{self.info.metric}",
            metric,
            on_step=False,
            on_epoch=True,
            batch_size=size,
            prog_bar=stage == "val",
        )
        return loss

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        """Loss of one training batch; :class:`TrainingDiverged` when it is NaN or infinite."""
        if self.augment is not None:
            batch = self.augment(batch)
        loss = self._step(batch, "train")
        if not bool(torch.isfinite(loss.detach()).all()):  # never step on (or report) a diverged loss
            raise TrainingDiverged(self.current_epoch, self.global_step, float(loss.detach()))
        return loss

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
            **adam_update_mode(self.parameters()),
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
            raise ValueError(
                f"optimizer.scheduler must be 'cosine_warmup' or 'constant', got {scheduler!r}"
            )
        min_ratio = float(cfg.get("min_lr_ratio", 0.0))
        warmup_epochs = float(cfg.get("warmup_epochs", 0))
        if self.time_budget is not None:
            warmup = round(warmup_epochs * max(int(self.steps_per_epoch or 1), 1))
            factor = cosine_warmup_lambda(
                warmup, 1, min_ratio, progress=_TimeProgress(self.time_budget)
            )
        else:
            epochs = int(self.trainer.max_epochs or 0)
            if epochs < 1:
                raise ValueError(
                    "set trainer.max_epochs (>= 1) or trainer.max_time for the cosine schedule"
                )
            total = int(self.trainer.estimated_stepping_batches)
            decay = decay_epochs(cfg.get("decay_epochs"), warmup_epochs)
            horizon = total if decay is None else max(round(decay * total / epochs), 1)
            factor = cosine_warmup_lambda(round(warmup_epochs * total / epochs), horizon, min_ratio)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class EpochHistory(L.Callback):
    """Per-epoch metrics and wall times (rank 0), for the learning curves and time-to-accuracy.

    Every row holds ``epoch``, the logged ``train/*`` and ``val/*`` metrics,
    ``epoch_seconds`` (wall time of the epoch's training part, collation included: from the
    epoch start to the validation start, or to the epoch end without validation) and
    ``wall_seconds`` (wall time since the start of training, validation included, at the end
    of the epoch) and ``lr`` (the learning rate of the first parameter group after the epoch's
    last scheduler step).
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []
        self._start = self._epoch_start = 0.0
        self._train_end: float | None = None

    def on_train_start(self, trainer, pl_module) -> None:  # noqa: D102
        self._start = time.perf_counter()

    def on_train_epoch_start(self, trainer, pl_module) -> None:  # noqa: D102
        self._epoch_start = time.perf_counter()
        self._train_end = None

    def on_validation_start(self, trainer, pl_module) -> None:  # noqa: D102
        if not trainer.sanity_checking and self._train_end is None:
            self._train_end = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:  # noqa: D102
        if trainer.sanity_checking:
            return
        now = time.perf_counter()
        row = {
            "epoch": float(trainer.current_epoch),
            "epoch_seconds": (self._train_end or now) - self._epoch_start,
            "wall_seconds": now - self._start,
        }
        for key, value in trainer.callback_metrics.items():
            if key.startswith(("train/", "val/")):
                row[key] = float(value)
        if trainer.optimizers:  # the learning rate the next step uses
            row["lr"] = float(trainer.optimizers[0].param_groups[0]["lr"])
        self.rows.append(row)



def adam_update_mode(parameters: Any) -> dict[str, bool]:
    """``fused=True`` when every parameter allows PyTorch's fused Adam(W) kernel, else ``foreach``.

    Both update all parameters per step without a Python loop over them (models with many
    small tensors, e.g. the CT's per-arrow blocks, pay for that loop); the fused kernel (CPU
    and CUDA floating-point parameters) also does the whole update in one pass per tensor:
    ``benchmarks/epoch_vs_peers.py`` uses the same choice (timings in ``benchmarks/README.md``).
    Same update up to rounding.
    """
    params = [p for p in parameters if p.requires_grad]
    fusable = (
        bool(params)
        and all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
        and len({p.device for p in params}) == 1
    )
    return {"fused": True} if fusable else {"foreach": True}
