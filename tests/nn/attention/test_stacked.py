"""StackedBlocks: blocks between token groups, weights stacked per group and role, one call.

The blocks, pairs and neighbourhoods are those of ``test_fused.py`` (the fused call itself).
"""

from __future__ import annotations

import pytest
import torch

from tests.nn.attention.test_fused import PAIRS, SIZES, _blocks, _neighborhoods
from topomodelx_attention.nn.attention import MultiHeadAttention, StackedBlocks
from topomodelx_attention.nn.attention.fused import prepare_fused
from topomodelx_attention.nn.attention.stacked import ROLES, projection_weights, stackable

KEYS = [f"b{i}" for i in range(len(PAIRS))]


@pytest.mark.parametrize("bias", [False, True])
def test_stacked_call_equals_the_sum_of_the_blocks(bias):
    gen = torch.Generator().manual_seed(3)
    blocks = _blocks(bias)
    assert all(stackable(block) for block in blocks)
    neighborhoods = _neighborhoods(gen)
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64) for n in SIZES]
    expected: list[torch.Tensor | None] = [None] * len(SIZES)
    for block, (source, target), matrix in zip(blocks, PAIRS, neighborhoods):
        out = block(x[target], x[source], matrix)
        expected[target] = out if expected[target] is None else expected[target] + out
    stacked = StackedBlocks(blocks, KEYS, PAIRS, len(SIZES))
    # one weight (and one bias) per group and role: Q/K/V of groups 0, 1, 2 and O of 0, 1
    assert len(list(stacked.parameters())) == (10 if bias else 5)
    got = stacked(x, prepare_fused(blocks, PAIRS, neighborhoods, SIZES))
    assert got[2] is None  # no block targets group 2
    for g, e in zip(got[:2], expected[:2]):
        assert not g.isnan().any()
        torch.testing.assert_close(g, e)
    # the target without sources: attention output zero, so the output biases alone
    into_1 = [block.lin_out.bias for block, (_, t) in zip(blocks, PAIRS) if t == 1]
    empty = sum(into_1) if bias else torch.zeros(6, dtype=torch.float64)
    torch.testing.assert_close(got[1][0], empty)


def test_weights_of_and_attention_of_return_each_block():
    gen = torch.Generator().manual_seed(4)
    blocks = _blocks(True)
    stacked = StackedBlocks(blocks, KEYS, PAIRS, len(SIZES))
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64) for n in SIZES]
    for key, block, (source, target), matrix in zip(KEYS, blocks, PAIRS, _neighborhoods(gen)):
        want = projection_weights(block)
        got = stacked.weights_of(key)
        assert set(got) == set(want) == {*ROLES, *(f"{r}_bias" for r in ROLES), "cardinality"}
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=0, atol=0)
        copy = stacked.attention_of(key)
        torch.testing.assert_close(
            copy(x[target], x[source], matrix), block(x[target], x[source], matrix)
        )
    with pytest.raises(ValueError, match="no stacked block with key 'nope'"):
        stacked.weights_of("nope")


def test_gradients_reach_every_stacked_parameter():
    gen = torch.Generator().manual_seed(5)
    blocks = _blocks(True)
    neighborhoods = _neighborhoods(gen)
    stacked = StackedBlocks(blocks, KEYS, PAIRS, len(SIZES))
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64) for n in SIZES]
    out = stacked(x, prepare_fused(blocks, PAIRS, neighborhoods, SIZES))
    sum(o.square().sum() for o in out if o is not None).backward()
    for name, param in stacked.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    # the per-block view of the gradient is the stacked gradient's slice
    assert stacked.weights_of("b3", grad=True)["query"].abs().sum() > 0


def test_refuses_mismatched_arguments():
    blocks = _blocks(False)
    with pytest.raises(ValueError, match="one key and pair per block"):
        StackedBlocks(blocks, KEYS[:-1], PAIRS, len(SIZES))
    linear = MultiHeadAttention(6, 6, 2, kind="linear")
    assert not stackable(linear)
    with pytest.raises(ValueError, match="stackable"):
        StackedBlocks([linear], ["l"], [(0, 0)], 1)
