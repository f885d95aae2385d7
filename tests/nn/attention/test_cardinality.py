"""The sparse kernel's ``cardinality`` term ``w ⊙ Σ_{s∈N(t)} v_s`` in every block that runs it.

Blocks, pairs and neighbourhoods are those of ``test_fused.py``.
"""

from __future__ import annotations

import pytest
import torch

from tests.nn.attention.test_fused import PAIRS, SIZES, _blocks, _neighborhoods
from topomodelx_attention.nn.attention import (
    MultiGroupAttention,
    MultiHeadAttention,
    StackedBlocks,
    build_kernel,
)
from topomodelx_attention.nn.attention.fused import fused_sparse_attention, prepare_fused
from topomodelx_attention.nn.attention.heads import merge_heads, split_heads
from topomodelx_attention.nn.attention.plan import sparse_plan
from topomodelx_attention.nn.attention.sparse import neighborhood_sum

CARDINALITY = {"kernel_options": {"cardinality": True}}


def test_neighborhood_sum_is_the_mask_times_the_values_per_head():
    gen = torch.Generator().manual_seed(0)
    mask = torch.rand(6, 5, generator=gen) < 0.4
    mask[2] = False  # a target without neighbours
    value = torch.randn(5, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    total = neighborhood_sum(value, mask.double().to_sparse().coalesce(), 6)
    expected = torch.einsum("ts,shd->thd", mask.double(), value)
    torch.testing.assert_close(total, expected)
    assert not total[2].any()
    grad = torch.randn(6, 3, 4, generator=gen, dtype=torch.float64)
    (got,) = torch.autograd.grad(total, value, grad)
    (want,) = torch.autograd.grad(expected, value, grad)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("transposed", [False, True])
def test_neighborhood_sum_on_a_plan_is_one_csr_product_with_the_same_values(transposed):
    gen = torch.Generator().manual_seed(3)
    mask = torch.rand(7, 5, generator=gen) < 0.4
    mask[1] = False
    matrix = mask.double().to_sparse().coalesce()
    plan = sparse_plan(matrix, 3, transposed=transposed)
    value = torch.randn(5, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    expected = torch.einsum("ts,shd->thd", mask.double(), value)
    total = neighborhood_sum(value, matrix, 7, plan=plan)
    # the CSR product's own autograd node when its gradient can be taken (transposed pattern),
    # or no gradient wanted; otherwise the gather / scatter path
    assert (type(total.grad_fn).__name__ == "_CsrSumBackward") == transposed
    torch.testing.assert_close(total, expected)
    grad = torch.randn(7, 3, 4, generator=gen, dtype=torch.float64)
    (got,) = torch.autograd.grad(total, value, grad)
    torch.testing.assert_close(got, torch.einsum("ts,thd->shd", mask.double(), grad))
    inference = sparse_plan(matrix, 3, transposed=False)
    with torch.no_grad():
        torch.testing.assert_close(neighborhood_sum(value, matrix, 7, plan=inference), expected)
    if transposed:  # double backward through the differentiable fallback of its backward
        torch.autograd.gradgradcheck(lambda v: neighborhood_sum(v, matrix, 7, plan=plan), (value,))


def test_block_adds_the_weighted_sum_before_the_output_projection():
    gen = torch.Generator().manual_seed(1)
    (block,) = _blocks(True, **CARDINALITY)[:1]
    assert block.cardinality_weight.shape == (2, 3) and block.cardinality_weight.abs().sum() > 0
    plain = MultiHeadAttention(6, 6, 2, bias=True).double()
    plain.load_state_dict({k: v for k, v in block.state_dict().items() if k != "cardinality_weight"})
    x_t = torch.randn(5, 6, generator=gen, dtype=torch.float64)
    x_s = torch.randn(4, 6, generator=gen, dtype=torch.float64)
    mask = torch.rand(5, 4, generator=gen) < 0.5
    mask[0] = False
    matrix = mask.double().to_sparse().coalesce()
    value = split_heads(block.lin_value(x_s), 2)
    total = torch.einsum("ts,shd->thd", mask.double(), value)
    attended = plain.attend(
        plain.project_query(x_t), plain.project_key(x_s), plain.project_value(x_s), matrix
    )
    expected = block.lin_out(merge_heads(attended + block.cardinality_weight * total))
    torch.testing.assert_close(block(x_t, x_s, matrix), expected)
    # a target without neighbours: no term, only the output bias
    torch.testing.assert_close(block(x_t, x_s, matrix)[0], block.lin_out.bias)


def test_the_weight_starts_at_zero_so_a_new_block_is_plain_attention():
    torch.manual_seed(0)
    block = MultiHeadAttention(8, 8, 2, **CARDINALITY)
    assert not block.cardinality_weight.any()
    torch.manual_seed(0)
    plain = MultiHeadAttention(8, 8, 2)
    x = torch.randn(4, 8)
    matrix = torch.ones(4, 4).to_sparse().coalesce()
    torch.testing.assert_close(block(x, x, matrix), plain(x, x, matrix))


def test_the_term_counts_identical_neighbours_that_the_softmax_averages():
    """A target with k identical sources: plain attention gives the same output for every k."""
    torch.manual_seed(0)
    block = MultiHeadAttention(4, 4, 1, **CARDINALITY).double()
    torch.nn.init.ones_(block.cardinality_weight)
    plain = MultiHeadAttention(4, 4, 1).double()
    plain.load_state_dict({k: v for k, v in block.state_dict().items() if k != "cardinality_weight"})
    target, source = torch.randn(1, 4, dtype=torch.float64), torch.randn(1, 4, dtype=torch.float64)
    outs = {}
    for k in (2, 5):
        matrix = torch.ones(1, k).to_sparse().coalesce()
        outs[k] = (block(target, source.expand(k, 4), matrix), plain(target, source.expand(k, 4), matrix))
    torch.testing.assert_close(outs[2][1], outs[5][1])  # the softmax cannot tell 2 from 5
    assert (outs[2][0] - outs[5][0]).abs().max() > 1e-3  # the sum term can


@pytest.mark.parametrize("bias", [False, True])
def test_fused_and_stacked_calls_equal_the_sum_of_the_blocks(bias):
    gen = torch.Generator().manual_seed(3)
    blocks = _blocks(bias, **CARDINALITY)
    neighborhoods = _neighborhoods(gen)
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64, requires_grad=True) for n in SIZES]
    expected: list[torch.Tensor | None] = [None] * len(SIZES)
    for block, (source, target), matrix in zip(blocks, PAIRS, neighborhoods):
        out = block(x[target], x[source], matrix)
        expected[target] = out if expected[target] is None else expected[target] + out
    fused_index = prepare_fused(blocks, PAIRS, neighborhoods, SIZES)
    fused = fused_sparse_attention(x, blocks, PAIRS, fused_index)
    stacked = StackedBlocks(blocks, [f"b{i}" for i in range(len(PAIRS))], PAIRS, len(SIZES))
    assert set(stacked.cardinality) == {"0", "1"}  # the groups with blocks into them
    got = stacked(x, fused_index)
    for g in range(2):
        torch.testing.assert_close(fused[g], expected[g])
        torch.testing.assert_close(got[g], expected[g])
    loss = sum(e.square().sum() for e in expected if e is not None)
    want = torch.autograd.grad(loss, [b.cardinality_weight for b in blocks] + x[:2])
    loss = sum(o.square().sum() for o in got if o is not None)
    have = torch.autograd.grad(loss, list(stacked.cardinality.values()) + x[:2])
    for g, weight in enumerate(have[:2]):  # per group, the blocks into it in slot order
        into = [want[i] for i in stacked.targets[g]]
        torch.testing.assert_close(weight, torch.stack(into))
    for a, b in zip(have[2:], want[len(blocks) :]):
        torch.testing.assert_close(a, b)
    for key, block in zip(stacked.keys, blocks):  # per-block views and copies
        torch.testing.assert_close(stacked.weights_of(key)["cardinality"], block.cardinality_weight)
        assert torch.equal(stacked.attention_of(key).cardinality_weight, block.cardinality_weight)


def test_stacked_call_on_a_subset_of_targets_slices_the_weights():
    gen = torch.Generator().manual_seed(4)
    blocks = _blocks(False, **CARDINALITY)
    neighborhoods = _neighborhoods(gen)
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64) for n in SIZES]
    stacked = StackedBlocks(blocks, [f"b{i}" for i in range(len(PAIRS))], PAIRS, len(SIZES))
    keep = stacked.active(SIZES, (0,))
    index = prepare_fused(
        [blocks[i] for i in keep], [PAIRS[i] for i in keep], [neighborhoods[i] for i in keep], SIZES
    )
    got = stacked(x, index, targets=(0,))
    expected = sum(
        blocks[i](x[PAIRS[i][1]], x[PAIRS[i][0]], neighborhoods[i]) for i in keep
    )
    assert got[1] is None
    torch.testing.assert_close(got[0], expected)


def test_general_attention_adds_the_term_on_the_block_neighbourhood():
    torch.manual_seed(0)
    group = MultiGroupAttention(6, 2, 2, **CARDINALITY).double()
    torch.nn.init.normal_(group.cardinality_weight)
    x = [torch.randn(3, 6, dtype=torch.float64), torch.randn(2, 6, dtype=torch.float64)]
    mask = torch.tensor([[1, 1, 0, 1, 0], [0, 1, 0, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 1, 1], [0, 0, 1, 0, 1]])
    matrix = mask.double().to_sparse().coalesce()
    out = torch.cat(group(x, matrix))
    tokens = torch.cat(x)
    value = torch.cat([split_heads(lin(xg), 2) for lin, xg in zip(group.values, x)])
    attended = group.kernel(group.project_query(tokens), group.project_key(tokens), value, matrix)
    total = torch.einsum("ts,shd->thd", mask.double(), value)
    torch.testing.assert_close(out, group.project_output(attended + group.cardinality_weight * total))


def test_only_the_sparse_kernel_takes_the_option():
    assert build_kernel("sparse", 2, 4, {"cardinality": True}).cardinality
    assert not build_kernel("sparse", 2, 4).cardinality
    for kind in ("dense", "linear"):
        with pytest.raises(ValueError, match="cardinality"):
            build_kernel(kind, 2, 4, {"cardinality": True})
    with pytest.raises(TypeError, match="cardinality must be a bool"):
        build_kernel("sparse", 2, 4, {"cardinality": 1})
    plain = MultiHeadAttention(6, 6, 2)
    assert plain.cardinality_weight is None
    assert "cardinality_weight" not in plain.state_dict()
