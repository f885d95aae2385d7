"""Lightning's checkpoint and CSV-log writers, routed through the package's one safe write path.

Lightning writes checkpoints (``TorchCheckpointIO``) and the CSV logger's ``metrics.csv`` /
``hparams.yaml`` with plain ``open``, which follows a link planted at the file or at a folder
above it. The harness hands every Trainer these two replacements instead: each file is written
by :func:`topomodelx_attention.files.atomic_output` below the run folder (a link at the file is
replaced, a link at a folder below the run folder is refused, a reader never sees half a file).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import yaml
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from topomodelx_attention.files import atomic_output, make_dirs, write_csv, write_text

__all__ = ["SafeCSVLogger", "SafeCheckpointIO"]


class SafeCheckpointIO(TorchCheckpointIO):
    """Save checkpoints with :func:`torch.save` through :func:`~topomodelx_attention.files.atomic_output`.

    Parameters
    ----------
    root : path-like
        The run folder: no link between it and a checkpoint is followed.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        super().__init__()
        self.root = Path(root)

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        """Write ``checkpoint`` to ``path`` (a local file below :attr:`root`)."""
        if storage_options is not None:
            raise TypeError("SafeCheckpointIO.save_checkpoint takes no storage_options")
        with atomic_output(Path(path), root=self.root) as handle:
            torch.save(checkpoint, handle)


class _SafeExperimentWriter(ExperimentWriter):
    """Lightning's CSV experiment writer, rewriting ``metrics.csv`` whole on every save."""

    def __init__(self, log_dir: str, root: Path) -> None:
        self._root = root
        make_dirs(log_dir, root=root)
        super().__init__(log_dir=log_dir)
        self._rows: list[dict[str, Any]] = []

    def log_hparams(self, params: dict[str, Any]) -> None:
        self.hparams.update(params)
        text = yaml.safe_dump({k: v for k, v in self.hparams.items() if _plain(v)}, sort_keys=True)
        write_text(Path(self.log_dir) / self.NAME_HPARAMS_FILE, text, root=self._root)

    def save(self) -> None:
        if not self.metrics:
            return
        self._record_new_keys()
        self._rows.extend(self.metrics)
        self.metrics = []
        rows = [[row.get(key, "") for key in self.metrics_keys] for row in self._rows]
        write_csv(self.metrics_file_path, [self.metrics_keys, *rows], root=self._root)


def _plain(value: Any) -> bool:
    """Whether ``value`` is a plain YAML scalar or container of them."""
    try:
        yaml.safe_dump(value)
    except yaml.YAMLError:
        return False
    return True


class SafeCSVLogger(CSVLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.CSVLogger` writing through the safe path.

    Same folders and files (``<save_dir>/<name>/<version>/metrics.csv``, ``hparams.yaml``);
    no link below ``save_dir`` is followed.
    """

    @property
    @rank_zero_experiment
    def experiment(self) -> _SafeExperimentWriter:  # noqa: D102
        if self._experiment is None:
            self._experiment = _SafeExperimentWriter(self.log_dir, Path(self.save_dir))
        return self._experiment
