"""FAVOR+ (linear kind) numerics: extreme logits in float32."""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.attention import (
    favor_features,
    linear_attention,
    orthogonal_random_matrix,
)

D = 8


def _extreme(gen: torch.Generator):
    q = torch.randn(32, 2, D, generator=gen) * 60  # |q|·|k| / sqrt(d) in the thousands
    k = torch.randn(32, 2, D, generator=gen) * 60
    v = torch.randn(32, 2, 3, generator=gen)
    return q, k, v, orthogonal_random_matrix(64, D, generator=gen)


def test_global_stabilisers_underflow_in_this_setting(gen):
    """The input really is extreme: one stabiliser per query row / per key set zeroes rows."""
    q, k, _, w = _extreme(gen)
    phi_q = favor_features(q * D**-0.25, w, True)
    phi_k = favor_features(k * D**-0.25, w, False)
    denominator = torch.einsum("thm,shm->th", phi_q, phi_k)
    assert (denominator == 0).any()


@pytest.mark.parametrize("strategy", ["auto", "scatter", "padded"])
def test_extreme_logits_float32_give_nonzero_softmax_rows(gen, strategy):
    q, k, v, w = _extreme(gen)
    batch = torch.tensor([0] * 20 + [1] * 12)
    out = linear_attention(q, k, v, batch, batch, projection=w, strategy=strategy)
    reference = linear_attention(
        q.double(), k.double(), v.double(), batch, batch, projection=w.double(), strategy=strategy
    )
    assert torch.isfinite(out).all()
    assert (out.abs().sum(-1) > 0).all()  # no silent all-zero row
    # the same estimator in float64: float32 lost nothing but rounding
    torch.testing.assert_close(out.double(), reference, atol=1e-3, rtol=1e-3)
    # positive weights: every row is a convex combination of its complex's values
    for b in (0, 1):
        rows, values = out[batch == b], v[batch == b]
        assert (rows >= values.amin(0) - 1e-4).all() and (rows <= values.amax(0) + 1e-4).all()


def test_extreme_logits_one_complex_and_layout(gen):
    from topomodelx_attention.nn.attention import padded_layout

    q, k, v, w = _extreme(gen)
    out = linear_attention(q, k, v, projection=w)
    assert torch.isfinite(out).all() and (out.abs().sum(-1) > 0).all()
    layout = padded_layout(torch.zeros(32, dtype=torch.long))
    torch.testing.assert_close(linear_attention(q, k, v, projection=w, layout=layout), out)
