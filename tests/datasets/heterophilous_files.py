"""Tiny generated files in the heterophilous benchmark's ``.npz`` layout (tests never read the real ones)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def tiny_arrays(n: int = 40, features: int = 3, classes: int = 2, splits: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    """The members of one file: a ring plus chords, random features and labels, 50/25/25 masks per split."""
    rng = np.random.default_rng(seed)
    ring = [(i, (i + 1) % n) for i in range(n)]
    chords = [(i, (i + 5) % n) for i in range(0, n, 2)]
    train, val, test = (np.zeros((splits, n), dtype=bool) for _ in range(3))
    for s in range(splits):
        order = rng.permutation(n)
        train[s, order[: n // 2]] = True
        val[s, order[n // 2 : 3 * n // 4]] = True
        test[s, order[3 * n // 4 :]] = True
    labels = np.arange(n) % classes  # every class present
    rng.shuffle(labels)
    return {
        "node_features": rng.normal(size=(n, features)).astype(np.float32),
        "node_labels": labels.astype(np.int64),
        "edges": np.array(ring + chords, dtype=np.int64),
        "train_masks": train,
        "val_masks": val,
        "test_masks": test,
    }


def write_tiny(folder: Path, name: str, **options) -> Path:
    """Write ``<folder>/<name>.npz`` from :func:`tiny_arrays` and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.npz"
    np.savez(path, **tiny_arrays(**options))
    return path
