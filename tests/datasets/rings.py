"""A data set family written as a user would: this one module (plus a config) is all it takes.

``dataset.loader=rings`` reads ``rings.csv`` of ``dataset.data_dir``: one ring graph per line,
``n_nodes,label``, random splits.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data

from topomodelx_attention.datasets import DatasetFamily, register_family
from topomodelx_attention.datasets.registry import require_data_dir, require_file

CONFIG = {
    "name": "RINGS",
    "loader": "rings",
    "data_dir": None,  # set by the test
    "split": {"type": "random", "train_prop": 0.5, "val_prop": 0.25},
    "lifting_kwargs": {"feature_lifting": "sum"},
}
"""The data set's config (what ``configs/dataset/graph/RINGS.yaml`` would hold)."""


def ring(n: int, label: int) -> Data:
    """A cycle of ``n`` vertices with one constant feature and a graph label."""
    source = torch.arange(n)
    target = (source + 1) % n
    edge_index = torch.stack([torch.cat([source, target]), torch.cat([target, source])])
    return Data(x=torch.ones(n, 1), edge_index=edge_index, y=torch.tensor([label]), num_nodes=n)


def _file(cfg: Mapping[str, Any]) -> Path:
    return require_data_dir(cfg, "rings.csv") / "rings.csv"


def _read(cfg: Mapping[str, Any], cache_dir: Path) -> list[Data]:
    lines = require_file(_file(cfg), "rings file", "nowhere (tests write it)").read_text().split()
    return [ring(int(n), int(label)) for n, label in (line.split(",") for line in lines)]


def _files(cfg: Mapping[str, Any], cache_dir: Path) -> list[Path] | None:
    file = _file(cfg) if cfg.get("data_dir") is not None else None
    return [file] if file is not None and file.is_file() else None


RINGS = register_family(DatasetFamily("rings", read=_read, files=_files))
