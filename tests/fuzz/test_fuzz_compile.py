"""Fuzz: ``torch.compile(model, dynamic=True)`` on raw batches of random / degenerate complexes.

The compiled models run ``prepare`` eagerly at their one graph
break and the rest as a graph, the CT's sparse attention through the fused kernel's custom op.
Every case: a well-formed batch (empty complexes, single vertices, no edges, isolated vertices)
gives the eager model's output and finite gradients through the compiled model; a malformed one
(NaN / Inf / 1e30, integer codes without cardinalities, extra rows) is still refused by the
eager ``prepare``. One compiled object per test serves all its
cases (``backend="aot_eager"``: dynamo + AOT autograd, no C++ compile; fast in CI).
"""

from __future__ import annotations

import torch
import torch._dynamo

from tests.fuzz.cases import REJECT, assert_finite, run_cases
from tests.fuzz.test_fuzz_models import CORRUPTIONS, NODE_ID, OUT, WIDTH, complexes, corrupt
from tests.fuzz.test_fuzz_models import _batch as batch_of
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.nn.graph import OrderKTokenGT
from topomodelx_attention.transforms import SimplicialCliqueLifting


def _compare(model, compiled, batch, num: int, key: str, expect: str):
    if expect == REJECT:  # the eager prepare must refuse it (ValueError / TypeError, a message)
        return compiled(batch)
    model.zero_grad()
    want = model(batch)
    want.square().sum().backward()
    want_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    got = compiled(batch)
    assert got.shape == (num, OUT), f"output {tuple(got.shape)}, expected {(num, OUT)}"
    assert_finite("compiled output", got)
    got.square().sum().backward()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    for name, p in model.named_parameters():
        if name in want_grads:
            assert p.grad is not None, f"compiled gives no gradient for {name}"
            torch.testing.assert_close(p.grad, want_grads[name], atol=1e-4, rtol=1e-4)
        else:  # AOT autograd returns zeros where eager leaves None (a parameter unused here)
            assert p.grad is None or not p.grad.any(), f"compiled gradient of unused {name}"
    return got


def _run(fuzz_seeds, name: str, model, make_batch) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", dynamic=True)

    def case(seed, rng):
        batch, num, key, how, expect = make_batch(seed, rng)
        description = f"{name} {key}:{how} shapes={batch.shape.tolist()}"
        return description, expect, lambda: _compare(model, compiled, batch, num, key, expect)

    try:
        run_cases(fuzz_seeds, f"compiled {name}", case)
    finally:
        torch._dynamo.reset()


def test_fuzz_compiled_cellular_transformer(fuzz_seeds):
    torch.manual_seed(0)
    model = CellularTransformer([2, 2, 2], WIDTH, OUT, n_layers=1, heads=2).train()

    def make_batch(seed, rng):
        items = complexes(seed, SimplicialCliqueLifting(complex_dim=2), int(rng.integers(1, 4)))
        batch = batch_of(items)
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        key = f"x_{int(rng.integers(3))}"
        return batch, len(items), key, how, corrupt(batch, key, how, rng)

    _run(fuzz_seeds, "CellularTransformer", model, make_batch)


def test_fuzz_compiled_order_k_tokengt(fuzz_seeds):
    torch.manual_seed(0)
    model = OrderKTokenGT(
        [2, 2], WIDTH, OUT, n_layers=1, heads=2, node_id_dim=NODE_ID, identifiers="sum",
        sign_flip=False,
    ).train()  # fmt: skip

    def make_batch(seed, rng):
        items = complexes(
            seed, SimplicialCliqueLifting(complex_dim=1), int(rng.integers(1, 4)), node_id=True
        )
        batch = batch_of(items)
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        key = "node_id" if rng.integers(4) == 0 else f"x_{int(rng.integers(2))}"
        return batch, len(items), key, how, corrupt(batch, key, how, rng)

    _run(fuzz_seeds, "OrderKTokenGT", model, make_batch)
