"""Paper-exact switches of the Cellular Transformer (Eq. 2, §4.2.1) against dense references.

Eq. (2): A(X_t, X_s) = softmax(X_t Q (X_s K)^T ⋆ φ(N)) X_s V, φ(N) = θ N with ONE learnable
θ (dense) or the mask N (sparse), no 1/sqrt(d) scaling; multi-head attention splits X_t and
X_s into m cochains of smaller dimension, runs one single-head attention per pair and
concatenates the outputs (no output projection).
"""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.attention import (
    DenseKernel,
    HeadwiseLinear,
    LinearKernel,
    MultiHeadAttention,
    SparseKernel,
)

HEADS, D_T, D_S, D_OUT = 2, 6, 4, 6


def _paper_reference(module, xt, xs, n_dense, kind):
    """Hand-written Eq. (2) per head on the split cochains; one complex."""
    outs = []
    wq, wk, wv = module.lin_query.weight, module.lin_key.weight, module.lin_value.weight
    theta = getattr(module.kernel, "bias_scale", None)
    for h in range(HEADS):
        xt_h = xt[:, h * D_T // HEADS : (h + 1) * D_T // HEADS]  # X_t^h
        xs_h = xs[:, h * D_S // HEADS : (h + 1) * D_S // HEADS]  # X_s^h
        logits = (xt_h @ wq[h]) @ (xs_h @ wk[h]).T  # no 1/sqrt(d)
        if kind == "dense":
            logits = logits + theta[0] * n_dense  # φ(N) = θ N, one θ
        else:
            logits = logits.masked_fill(n_dense == 0, float("-inf"))  # N as mask
        outs.append(torch.softmax(logits, dim=-1).nan_to_num(0.0) @ (xs_h @ wv[h]))
    return torch.cat(outs, dim=-1)  # concatenation, no W_O


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_paper_form_matches_hand_written_eq2(gen, kind):
    torch.manual_seed(0)
    module = MultiHeadAttention(
        D_T,
        D_OUT,
        HEADS,
        source_channels=D_S,
        head_channels=3,
        kind=kind,
        kernel_options={"scale": 1.0, **({"bias_scale": "shared"} if kind == "dense" else {})},
        output_projection=False,
    ).double()
    assert module.lin_out is None
    assert isinstance(module.lin_query, HeadwiseLinear)
    # the input is split: head h only sees its own D/heads channels
    assert module.lin_query.weight.shape == (HEADS, D_T // HEADS, 3)
    assert module.lin_key.weight.shape == (HEADS, D_S // HEADS, 3)
    assert module.lin_value.weight.shape == (HEADS, D_S // HEADS, D_OUT // HEADS)
    if kind == "dense":
        assert module.kernel.bias_scale.shape == (1,)
        with torch.no_grad():
            module.kernel.bias_scale.fill_(0.7)
    xt = torch.randn(5, D_T, generator=gen, dtype=torch.float64)
    xs = torch.randn(7, D_S, generator=gen, dtype=torch.float64)
    n_dense = (torch.rand(5, 7, generator=gen) < 0.5).double()
    n_dense[2] = 0.0  # a target without neighbours
    out = module(xt, xs, n_dense.to_sparse())
    torch.testing.assert_close(out, _paper_reference(module, xt, xs, n_dense, kind))
    # the default form differs (1/sqrt(d) scaling, full-width projections and W_O)
    default = MultiHeadAttention(D_T, D_OUT, HEADS, source_channels=D_S, kind=kind).double()
    assert default.lin_out is not None
    assert isinstance(default.lin_query, torch.nn.Linear)


def test_scale_one_removes_sqrt_d(gen):
    torch.manual_seed(0)
    plain = MultiHeadAttention(
        8, heads=2, kind="dense", kernel_options={"neighborhood_bias": False}
    ).double()
    paper = MultiHeadAttention(
        8, heads=2, kind="dense", kernel_options={"neighborhood_bias": False, "scale": 1.0}
    )
    paper.load_state_dict(plain.state_dict())
    paper = paper.double()
    x = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    q, k, v = plain.project_query(x), plain.project_key(x), plain.project_value(x)
    logits = torch.einsum("thd,shd->hts", q, k)
    reference = torch.einsum("hts,shd->thd", torch.softmax(logits, -1), v)
    torch.testing.assert_close(paper(x), plain.project_output(reference))
    scaled = torch.einsum("hts,shd->thd", torch.softmax(logits / 2.0, -1), v)  # d = 4
    torch.testing.assert_close(plain(x), plain.project_output(scaled))


def test_bias_scale_options():
    per_head = MultiHeadAttention(8, heads=4, kind="dense")
    assert per_head.kernel.bias_scale.shape == (4,)
    shared = MultiHeadAttention(8, heads=4, kind="dense", kernel_options={"bias_scale": "shared"})
    assert shared.kernel.bias_scale.shape == (1,)
    with pytest.raises(ValueError, match="bias_scale"):
        MultiHeadAttention(8, heads=4, kind="dense", kernel_options={"bias_scale": "per_cell"})
    # "none": no θ at all; the bias is added unscaled (as θ = 1 would add it)
    none = MultiHeadAttention(8, heads=4, kind="dense", kernel_options={"bias_scale": "none"})
    assert none.kernel.bias_scale is None and "kernel.bias_scale" not in none.state_dict()
    unit = MultiHeadAttention(8, heads=4, kind="dense", kernel_options={"bias_scale": "shared", "learn_bias_scale": False})
    unit.load_state_dict(none.state_dict(), strict=False)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=generator)
    bias = torch.rand(5, 5, generator=generator).to_sparse()
    torch.testing.assert_close(none(x, None, bias), unit(x, None, bias))
    with pytest.raises(ValueError, match="bias_scale"):  # a dense option on the sparse kind
        MultiHeadAttention(8, heads=4, kind="sparse", kernel_options={"bias_scale": "shared"})


def test_output_projection_false_needs_divisible_inputs():
    with pytest.raises(ValueError, match="output_projection=False"):
        MultiHeadAttention(5, 4, heads=2, output_projection=False)
    with pytest.raises(ValueError, match="output_projection=False"):
        MultiHeadAttention(4, 4, heads=2, source_channels=3, output_projection=False)


def test_kernels_own_their_options(gen):
    """θ exists only where a θ·N bias is used; injected kernels work like the front door."""
    no_bias = MultiHeadAttention(8, kind="dense", kernel_options={"neighborhood_bias": False})
    assert no_bias.kernel.bias_scale is None
    assert not any(
        "bias_scale" in n for n, _ in MultiHeadAttention(8, kind="sparse").named_parameters()
    )
    assert "kernel.bias_scale" not in dict(no_bias.named_parameters())
    x = torch.randn(4, 8, generator=gen)
    with pytest.raises(ValueError, match="no neighbourhood bias"):
        no_bias(x, None, torch.ones(4, 4).to_sparse())
    torch.manual_seed(0)
    front = MultiHeadAttention(
        8, heads=2, kind="dense", kernel_options={"bias_scale": "shared", "scale": 0.5}
    )
    torch.manual_seed(0)
    injected = MultiHeadAttention(
        8, heads=2, kernel=DenseKernel(2, 4, bias_scale="shared", scale=0.5)
    )
    assert injected.kind == "dense"
    nb = (torch.rand(4, 4, generator=gen) < 0.5).float().to_sparse()
    torch.testing.assert_close(injected(x, None, nb), front(x, None, nb))
    assert MultiHeadAttention(8, kernel=SparseKernel(1, 8)).kind == "sparse"
    assert MultiHeadAttention(
        8, kernel=LinearKernel(1, 8, num_random_features=5)
    ).kernel.projection.shape == (5, 8)
    with pytest.raises(ValueError, match="kernel is of kind"):
        MultiHeadAttention(8, kind="dense", kernel=SparseKernel(1, 8))
    with pytest.raises(ValueError, match="heads"):  # a kernel built for other heads
        MultiHeadAttention(8, heads=2, kernel=SparseKernel(1, 8))
    with pytest.raises(ValueError, match="prebuilt kernel"):
        MultiHeadAttention(8, kernel=SparseKernel(1, 8), kernel_options={"scale": 1.0})
    with pytest.raises(TypeError, match="AttentionKernel"):
        MultiHeadAttention(8, kernel=torch.nn.Identity())
