"""The packaged Cellular Transformer learns a small multi-class set as fast as GPS does.

A TU data set of random trees (no rings, so no 2-cells: the CT has to learn from vertices and
edges, as on a molecule set without rings) with one-hot node labels is written in the test; the
class of a tree is the label most frequent among its leaves. Both packaged models are trained
through the harness exactly as ``train --dataset NAME --data-dir DIR`` trains them (packaged
model and optimiser configs, mini-batches of 32, warm-up and cosine schedule, one thread), on
an 80 % training split, for :data:`EPOCHS` epochs. GPS reaches 90 % training accuracy within
them (the reference); the packaged CT must too.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.harness.files import write_tu
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.training import run_experiment

NAME = "LEAFTREES"
CLASSES = 4
GRAPHS = 120
#: Epochs both models get.
EPOCHS = 20


def _tree(rng: np.random.Generator, favoured: int) -> tuple[list, np.ndarray, int]:
    """One random tree of 12-24 vertices whose leaves mostly carry label ``favoured``.

    Returns ``(edges, node labels, class)``; the class is the most frequent leaf label (the
    smallest such label on a tie).
    """
    n = int(rng.integers(12, 25))
    parents = [int(rng.integers(0, v)) for v in range(1, n)]
    labels = rng.integers(0, CLASSES, size=n)
    leaves = np.flatnonzero(np.bincount([*parents, *range(1, n)], minlength=n) == 1)
    weights = [0.55 if c == favoured else 0.15 for c in range(CLASSES)]
    labels[leaves] = rng.choice(CLASSES, size=len(leaves), p=weights)
    counts = np.bincount(labels[leaves], minlength=CLASSES)
    if (counts == counts.max()).sum() > 1:  # a tie: relabel one leaf (argmax breaks any tie left)
        labels[leaves[0]] = favoured
        counts = np.bincount(labels[leaves], minlength=CLASSES)
    return list(zip(range(1, n), parents)), labels, int(counts.argmax())


@pytest.fixture(scope="module")
def tree_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trees")
    rng = np.random.default_rng(0)
    write_tu(folder, NAME, [_tree(rng, g % CLASSES) for g in range(GRAPHS)])
    return folder


def _train_accuracy(model: str, folder, tmp_path) -> list[float]:
    """Training accuracy per epoch of the packaged ``model`` trained by the harness."""
    cfg = compose_config(
        [f"dataset.data_dir={folder}", f"paths.cache_dir={folder}/cache", f"trainer.max_epochs={EPOCHS}",
         "seeds=[1]", "plot=false", "test=false", "trainer.enable_progress_bar=false",
         "dataset.split.train_prop=0.8", "dataset.split.val_prop=0.1"],
        dataset=NAME, model=model,
    )
    result = run_experiment(cfg, output_dir=tmp_path / model, verbose=False)
    history = result.seeds[0].history
    return [float(r["train/accuracy"]) for r in history if "train/accuracy" in r]


@pytest.fixture(scope="module")
def gps_accuracy(tree_dir, tmp_path_factory):
    return _train_accuracy("gps", tree_dir, tmp_path_factory.mktemp("gps"))


def test_the_tree_set_has_every_class(tree_dir):
    labels = [int(v) for v in (tree_dir / NAME / "raw" / f"{NAME}_graph_labels.txt").read_text().split()]
    counts = np.bincount(labels, minlength=CLASSES)
    assert len(labels) == GRAPHS and counts.min() >= GRAPHS // (2 * CLASSES), counts


def test_gps_reaches_90_percent_training_accuracy(gps_accuracy):
    """The reference: GPS (packaged config) learns the set within the epochs."""
    assert max(gps_accuracy) >= 0.9, gps_accuracy


def test_packaged_ct_reaches_90_percent_training_accuracy_where_gps_does(tree_dir, gps_accuracy, tmp_path):
    """The packaged CT learns the set within the same epochs."""
    accuracy = _train_accuracy("cellular_transformer", tree_dir, tmp_path)
    assert len(accuracy) == EPOCHS
    assert max(accuracy) >= 0.9, f"CT {accuracy}, GPS {gps_accuracy}"
