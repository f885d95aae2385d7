"""Over-smoothing diagnostics (§3.2): residual norms and the collapse of pure stacks."""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.simplicial import (
    build_stack,
    mixed_norm,
    oversmoothing_profile,
    residual_norm,
    token_residual,
)


def test_mixed_norm_of_known_matrix():
    m = torch.tensor([[1.0, -2.0], [3.0, 0.5]])
    # ‖M‖_1 = max column sum = 4, ‖M‖_∞ = max row sum = 3.5
    torch.testing.assert_close(mixed_norm(m), torch.tensor((4.0 * 3.5) ** 0.5))


def test_residual_is_zero_for_identical_tokens_and_batch_matches_split():
    same = torch.ones(5, 3) * torch.tensor([1.0, 2.0, 3.0])
    assert residual_norm(same) == 0
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 3, generator=gen), torch.randn(6, 3, generator=gen)
    batch = torch.tensor([0] * 4 + [1] * 6)
    joint = residual_norm(torch.cat([a, b]), batch)
    torch.testing.assert_close(joint, torch.stack([residual_norm(a), residual_norm(b)]))
    torch.testing.assert_close(token_residual(torch.cat([a, b]), batch)[:4], token_residual(a))
    rel = residual_norm(torch.cat([a, b]), batch, relative=True)
    torch.testing.assert_close(rel[0], residual_norm(a) / mixed_norm(a))


@pytest.mark.parametrize("order", [1, 2])
def test_pure_stack_collapses_and_skip_norm_does_not(order):
    torch.manual_seed(0)
    x = torch.randn(2, 16, 16, dtype=torch.float64)
    pure = build_stack("pure", 16, 5, heads=2, order=order).double()
    kept = build_stack("skip_norm", 16, 5, heads=2, order=order).double()
    pure_profile, kept_profile = oversmoothing_profile(pure, x), oversmoothing_profile(kept, x)
    assert pure_profile.shape == (6, 2)
    assert bool((pure_profile[4] < 1e-8).all())  # tokens converged to a common vector (§3.2)
    assert bool((kept_profile > 0.2).all())  # skip + LayerNorm keep them apart


def test_masked_pure_stack_also_collapses():
    torch.manual_seed(0)
    x = torch.randn(1, 16, 16, dtype=torch.float64)
    profile = oversmoothing_profile(build_stack("pure", 16, 16, order=1, simplicial_options={"causal": True}).double(), x)
    assert profile[-1].item() < 1e-2 * profile[0].item()  # §3.2.1: a causal mask does not help


def test_relative_residual_is_nan_for_zero_tokens():
    assert torch.isnan(residual_norm(torch.zeros(3, 4), relative=True))


def test_build_stack_rejects_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        build_stack("post_norm", 8, 2)
