"""Fuzz: the CT's readout scale and input scale on random / degenerate complexes.

* ``readout_options={"init": "zero"}`` / ``"small"``: every complex of any size starts at (zero) or near
  (small) the same output, so the cross-entropy of the first step is ``ln C`` (within 2 % for
  ``"small"``), whatever the pooling, the readout ranks and the scale of the inputs; gradients
  stay finite and reach the last readout layer (``"small"``: also the input features);
* ``embedding_norm=True``: inputs scaled by 1e-3..1e6 give finite, unit-scale embedded signals
  (per-row LayerNorm) and finite outputs and gradients;
* a wrong ``readout_options["init"]`` / ``embedding_norm`` is rejected with a message naming the option.
"""

from __future__ import annotations

import math

import torch
from torch_geometric.loader import DataLoader

from tests.fuzz.cases import ACCEPT, REJECT, assert_finite, finite_float_graph, quietly, run_cases
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting

WIDTH, OUT = 8, 3


def _batch(seed: int, rng, scale: float):
    dim = int(rng.choice([1, 2, 2]))
    lifting = CellCycleLifting(max_cell_length=8) if dim == 2 else SimplicialCliqueLifting(complex_dim=1)
    size = int(rng.integers(1, 4))
    items = quietly(lambda: [lifting(finite_float_graph(seed * 17 + i, feature_dim=2, edge_attr=False).data) for i in range(size)])
    batch = next(iter(DataLoader(items, batch_size=size)))
    for r in range(dim + 1):
        batch[f"x_{r}"] = batch[f"x_{r}"] * scale
    return batch, dim, size


def test_fuzz_zero_readout_starts_at_chance(fuzz_seeds):
    def make(seed, rng):
        scale = float(10.0 ** rng.uniform(-3, 6))
        batch, dim, size = _batch(seed, rng, scale)
        ranks = sorted({int(r) for r in rng.integers(0, dim + 1, size=int(rng.integers(1, dim + 2)))})
        pooling = str(rng.choice(["sum", "mean"]))
        before = bool(rng.integers(2))
        init = str(rng.choice(["zero", "small"]))

        def run():
            torch.manual_seed(seed)
            model = CellularTransformer(
                [2] * (dim + 1), WIDTH, OUT, n_layers=1, heads=2, pooling=pooling,
                readout_options={"ranks": ranks, "before_pooling": before, "init": init}, embedding_norm=True,
            )
            batch.x_0 = batch.x_0.detach().requires_grad_()
            out = model(batch)
            assert out.shape == (size, OUT), f"output {tuple(out.shape)}, expected {(size, OUT)}"
            if init == "zero":
                assert torch.equal(out, torch.zeros_like(out)), f"initial outputs not zero: {out.abs().max():.3g}"
            y = torch.arange(size) % OUT
            loss = torch.nn.functional.cross_entropy(out, y)
            tolerance = 1e-6 if init == "zero" else 0.02
            assert math.isclose(float(loss.detach()), math.log(OUT), rel_tol=tolerance), f"initial loss {float(loss.detach())}"
            loss.backward()
            if init == "small" and batch.x_0.shape[0] and 0 in ranks:
                assert batch.x_0.grad is not None and batch.x_0.grad.abs().sum() > 0, "no gradient reaches x_0"
            assert_finite("gradients", model)
            cells = sum(int(batch.shape[:, r].sum()) for r in ranks)
            last = [model.readouts[str(r)][-1].bias.grad for r in ranks]
            if cells:
                assert any(g is not None and g.abs().sum() > 0 for g in last), "no gradient reaches the readout"

        return f"{init} readout dim={dim} ranks={ranks} {pooling} before={before} x{scale:.3g}", ACCEPT, run

    run_cases(fuzz_seeds, "zero readout", make, offset=2300)


def test_fuzz_embedding_norm_input_scale(fuzz_seeds):
    def make(seed, rng):
        scale = float(10.0 ** rng.uniform(-3, 6))
        batch, dim, _ = _batch(seed, rng, scale)

        def run():
            torch.manual_seed(seed)
            model = CellularTransformer([2] * (dim + 1), WIDTH, OUT, n_layers=1, heads=2, embedding_norm=True)
            with torch.no_grad():
                embedded = model._embed(model.prepare(batch))
                normed = [model.embedding_norms[r](h) for r, h in enumerate(embedded)]
            for r, h in enumerate(normed):
                assert_finite(f"embedded rank {r}", h)
                if h.shape[0]:
                    rms = h.pow(2).mean(dim=1).sqrt()
                    assert float(rms.max()) < 5.0, f"rank {r}: embedded rms {float(rms.max()):.3g} at x{scale:.3g}"
            out = model(batch)
            assert_finite("output", out)
            out.sum().backward()
            assert_finite("gradients", model)

        return f"embedding_norm dim={dim} x{scale:.3g}", ACCEPT, run

    run_cases(fuzz_seeds, "embedding norm", make, offset=2400)


def test_fuzz_fit_options_rejected(fuzz_seeds):
    bad = [
        ("readout_options", {"init": "xavier"}, "init"),
        ("readout_options", {"init": None}, "init"),
        ("readout_options", {"init": "Small"}, "init"),
        ("embedding_norm", 1, "embedding_norm"),
        ("embedding_norm", "yes", "embedding_norm"),
    ]

    def make(seed, rng):
        option, value, key = bad[int(rng.integers(len(bad)))]

        def run():
            try:
                CellularTransformer([2, 2], WIDTH, OUT, **{option: value})
            except (ValueError, TypeError) as error:
                if key not in str(error):
                    raise AssertionError(f"message does not name {key}: {error}") from error
                raise

        return f"{key}={value!r}", REJECT, run

    run_cases(fuzz_seeds, "fit options", make, offset=2500)
