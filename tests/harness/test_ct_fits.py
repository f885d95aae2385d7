"""The packaged Cellular Transformer fits what GPS fits.

A small TU data set is written in the test (ring graphs of ~30 vertices, 3 node labels, 3
classes that depend on the rings and on the labels); the packaged CT is built from its packaged
config exactly as the harness builds it (``compose_config`` → ``prepare_dataset`` →
``build_model``) and trained with the packaged optimiser's learning rate. It must

* start near chance and get its training loss below ``ln C`` within 10 epochs,
* fit the training set that GPS (packaged config, the reference) fits,
* still fit it when every input feature is multiplied by 1000.

A CT that reads out the vertices only (``Σ_c MLP(h_c)``) with PyTorch's initialisation of the
readout and no input normalisation fails the first and the third.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.harness.files import write_tu
from topomodelx_attention.data import ComplexDataLoader
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.models import build_model
from topomodelx_attention.harness.prepare import prepare_dataset
from topomodelx_attention.harness.training import _data_pe_config

NAME = "RINGFIT"
CLASSES = 3
GRAPHS = 24


def _write_rings(folder, graphs: int = GRAPHS, seed: int = 0) -> None:
    """TU files of ``graphs`` ring graphs: class = min(#6-rings, 1) + [label 2 > label 1]."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(graphs):
        sizes = [int(s) for s in rng.choice([5, 6, 7], size=int(rng.integers(2, 5)))]
        edges, n, previous = [], 0, None
        for size in sizes:
            ring = list(range(n, n + size))
            n += size
            edges += [(ring[i], ring[(i + 1) % size]) for i in range(size)]
            if previous is not None:
                edges.append((int(rng.choice(previous)), int(rng.choice(ring))))
            previous = ring
        while n < 30:
            edges.append((int(rng.integers(0, n)), n))
            n += 1
        labels = rng.choice(3, size=n)
        out.append((edges, labels, min(sizes.count(6), 1) + int((labels == 2).sum() > (labels == 1).sum())))
    write_tu(folder, NAME, out)


@pytest.fixture(scope="module")
def ring_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rings")
    _write_rings(folder)
    return folder


def _train(model_name: str, folder, scale: float = 1.0, epochs: int = 40, overrides=()) -> tuple[list[float], float]:
    """Train a packaged model on the whole ring set; return (loss per epoch, final accuracy).

    One thread, as the harness trains (``trainer.num_threads``): small batches run fastest so.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _fit(model_name, folder, scale, epochs, overrides)
    finally:
        torch.set_num_threads(threads)


def _fit(model_name: str, folder, scale: float, epochs: int, overrides) -> tuple[list[float], float]:
    cfg = compose_config(
        [f"dataset.data_dir={folder}", f"paths.cache_dir={folder}/cache", *overrides],
        dataset=NAME, model=model_name,
    )
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, _data_pe_config(cfg.model.get("pe")), cfg.paths.cache_dir)
    assert prepared.info.out_channels == CLASSES
    complexes = [c.clone() for c in prepared.complexes]
    for c in complexes:
        for r in range(prepared.info.max_rank + 1):
            if c[f"x_{r}"].is_floating_point():
                c[f"x_{r}"] = c[f"x_{r}"] * scale
    torch.manual_seed(0)
    model = build_model(cfg.model.name, cfg.model.params, prepared.info)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(cfg.optimizer.lr))
    batch = next(iter(ComplexDataLoader(complexes, batch_size=len(complexes))))
    y = batch.y.view(-1)
    losses = []
    for _ in range(epochs):
        loss = torch.nn.functional.cross_entropy(model(batch), y)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(cfg.trainer.gradient_clip_val))
        optimizer.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        accuracy = float((model(batch).argmax(1) == y).float().mean())
    return losses, accuracy


@pytest.fixture(scope="module")
def gps_fit(ring_dir):
    return _train("gps", ring_dir)


def test_gps_fits_the_ring_set(gps_fit):
    """The reference: GPS (packaged config) fits the training set."""
    _, accuracy = gps_fit
    assert accuracy >= 0.9


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_packaged_ct_fits_what_gps_fits(ring_dir, gps_fit, scale):
    """The packaged CT starts near chance, is below ln C within 10 epochs and fits the set GPS fits."""
    losses, accuracy = _train("cellular_transformer", ring_dir, scale)
    chance = math.log(CLASSES)
    assert losses[0] < 1.5 * chance, f"first loss {losses[0]:.2f} vs chance {chance:.2f}"
    assert min(losses[:10]) < chance, f"losses of the first 10 epochs {losses[:10]}"
    assert accuracy >= min(gps_fit[1], 0.9), f"CT x{scale:g}: {accuracy:.2f}, GPS {gps_fit[1]:.2f}"
