"""Many sparse attention blocks in one fused call equal one MultiHeadAttention call per block."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from topomodelx_attention.nn.attention import MultiHeadAttention
from topomodelx_attention.nn.attention.fused import (
    FusedNeighborhood,
    fusable,
    fused_slots,
    fused_sparse_attention,
    fused_subset,
    prepare_fused,
    prepare_fused_edges,
    prepare_fused_index,
)
from topomodelx_attention.nn.attention.plan import SparsePlan, plan_rows, sparse_plan

SIZES = (5, 4, 3)
# (source, target): two blocks join group 1 to itself, group 2 only sends
PAIRS = [(0, 0), (1, 1), (1, 1), (0, 1), (1, 0), (2, 1)]


def _blocks(bias, **kw):
    torch.manual_seed(0)
    blocks = [MultiHeadAttention(6, 6, 2, bias=bias, **kw).double() for _ in PAIRS]
    for block in blocks:
        for param in block.parameters():  # non-trivial biases too
            torch.nn.init.normal_(param, std=0.4)
    return blocks


def _neighborhoods(gen):
    out = []
    for source, target in PAIRS:
        mask = torch.rand(SIZES[target], SIZES[source], generator=gen) < 0.5
        mask[0] = False  # a target without sources in every block
        out.append(mask.double().to_sparse().coalesce())
    return out


@pytest.mark.parametrize("bias", [False, True])
def test_fused_call_equals_the_sum_of_per_block_calls(gen, bias):
    blocks = _blocks(bias)
    neighborhoods = _neighborhoods(gen)
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64, requires_grad=True) for n in SIZES]
    expected = [None, None, None]
    for block, (source, target), matrix in zip(blocks, PAIRS, neighborhoods):
        out = block(x[target], x[source], matrix)
        expected[target] = out if expected[target] is None else expected[target] + out
    prepared = prepare_fused(blocks, PAIRS, neighborhoods, SIZES)
    assert prepared.plan is not None and prepared.plan.heads == 2  # CPU: the fused kernel's plan
    got = fused_sparse_attention(x, blocks, PAIRS, prepared)
    assert got[2] is None  # no block targets group 2
    for g, e in zip(got[:2], expected[:2]):
        torch.testing.assert_close(g, e)
    # the same without the CPU plan (composable kernels)
    no_plan = FusedNeighborhood(prepared.index)
    for g, e in zip(fused_sparse_attention(x, blocks, PAIRS, no_plan)[:2], expected[:2]):
        torch.testing.assert_close(g, e)
    # gradients equal those of the per-block calls
    (sum(g.square().sum() for g in got[:2])).backward()
    fused_grads = [t.grad.clone() for t in x]
    for t in x:
        t.grad = None
    (sum(e.square().sum() for e in expected[:2])).backward()
    for a, b in zip(fused_grads, (t.grad for t in x)):
        torch.testing.assert_close(a, b)


def test_output_dropout_is_applied_per_block_in_training(gen):
    blocks = _blocks(False)
    neighborhoods = _neighborhoods(gen)
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64) for n in SIZES]
    prepared = prepare_fused(blocks, PAIRS, neighborhoods, SIZES)
    dropout = torch.nn.Dropout(0.5)
    eval_out = fused_sparse_attention(x, blocks, PAIRS, prepared, output_dropout=dropout.eval())
    torch.manual_seed(3)
    train_out = fused_sparse_attention(x, blocks, PAIRS, prepared, output_dropout=dropout.train())
    assert not torch.allclose(train_out[1], eval_out[1])
    assert train_out[1].shape == eval_out[1].shape and torch.isfinite(train_out[1]).all()


def test_slots_and_errors(gen):
    slots = fused_slots(PAIRS, SIZES)
    assert slots.targets == ((0, 4), (1, 2, 3, 5), ())
    assert slots.sources == ((0, 3), (1, 2, 4), (5,))
    assert slots.q_offsets == (0, 10, 26, 26)
    blocks = _blocks(False)
    neighborhoods = _neighborhoods(gen)
    wrong = list(neighborhoods)
    wrong[3] = wrong[3].t().coalesce()  # (n_source, n_target): misoriented
    with pytest.raises(ValueError, match=r"arrow 0->1.*\(n_target, n_source\) = \(4, 5\)"):
        prepare_fused(blocks, PAIRS, wrong, SIZES, names=[f"arrow {s}->{t}" for s, t in PAIRS])
    dense = MultiHeadAttention(6, 6, 2, kind="dense")
    assert not fusable(dense) and fusable(blocks[0])
    with pytest.raises(ValueError, match="block 1 cannot join"):
        prepare_fused([blocks[0], dense], PAIRS[:2], neighborhoods[:2], SIZES)
    other_scale = MultiHeadAttention(6, 6, 2, kernel_options={"scale": 1.0})
    with pytest.raises(ValueError, match="block 1 differs"):
        prepare_fused([blocks[0], other_scale], PAIRS[:2], neighborhoods[:2], SIZES)


def test_prepare_fused_edges_joins_and_sorts_by_query_row(gen):
    neighborhoods = _neighborhoods(gen)
    slots = fused_slots(PAIRS, SIZES)
    edges = [tuple(m.indices()) for m in neighborhoods]
    query, key = prepare_fused_edges(PAIRS, edges, SIZES)
    # reference: the joined rows of every block, stably sorted by query row in torch
    rows, cols = [], []
    for i, ((source, target), (t, s)) in enumerate(zip(PAIRS, edges)):
        rows.append(
            t * len(slots.targets[target])
            + slots.q_offsets[target]
            + slots.targets[target].index(i)
        )
        cols.append(
            s * len(slots.sources[source])
            + slots.kv_offsets[source]
            + slots.sources[source].index(i)
        )
    rows, cols = torch.cat(rows), torch.cat(cols)
    order = torch.argsort(rows, stable=True)
    assert query.dtype == key.dtype == torch.long
    assert torch.equal(query, rows[order]) and torch.equal(key, cols[order])


def test_a_transposed_neighbourhood_read_swapped_equals_its_transpose(gen):
    # transposes[i]: block i gets N_iᵀ given as N_i; its edges are N_i's index rows swapped
    neighborhoods = _neighborhoods(gen)
    transposes = [s != t for s, t in PAIRS]
    given = [m.t().coalesce() if flip else m for m, flip in zip(neighborhoods, transposes)]
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            expected = prepare_fused_index(PAIRS, neighborhoods, SIZES, 2)
            got = prepare_fused_index(PAIRS, given, SIZES, 2, transposes=transposes)
        assert torch.equal(got.index.index_target, expected.index.index_target)
        assert torch.equal(got.index.index_source, expected.index.index_source)
        for name in ("crow", "col", "row", "position", "crow_t", "col_t", "to_transposed"):
            a, b = getattr(got.plan, name), getattr(expected.plan, name)
            assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), name
    with pytest.raises(ValueError, match=r"block 3.*\(4, 5\).*given transposed"):
        prepare_fused_index(PAIRS, neighborhoods, SIZES, 2, transposes=transposes)


def _assert_same_plan(got: SparsePlan, expected: SparsePlan) -> None:
    for field in dataclasses.fields(SparsePlan):
        a, b = getattr(got, field.name), getattr(expected, field.name)
        if isinstance(b, torch.Tensor) or b is None:
            assert (a is None) == (b is None), field.name
            assert a is None or (a.dtype == b.dtype and torch.equal(a, b)), field.name
        else:
            assert a == b, field.name


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("heads", [1, 3])
def test_the_subset_into_some_groups_is_sliced_out_of_the_joined_index(gen, grad, heads):
    # every target-closed subset (all blocks into some groups) equals its own joined index
    neighborhoods = _neighborhoods(gen)
    with torch.set_grad_enabled(grad):
        joined = prepare_fused_index(PAIRS, neighborhoods, SIZES, heads)
        for k in (1, 2):
            for groups in itertools.combinations((0, 1), k):
                subset = [i for i, (_, t) in enumerate(PAIRS) if t in groups]
                pairs = [PAIRS[i] for i in subset]
                expected = prepare_fused_index(pairs, [neighborhoods[i] for i in subset], SIZES, heads)
                got = fused_subset(joined, PAIRS, subset, SIZES)
                assert got.index.shape == expected.index.shape
                assert torch.equal(got.index.index_target, expected.index.index_target)
                assert torch.equal(got.index.index_source, expected.index.index_source)
                _assert_same_plan(got.plan, expected.plan)
                assert (got.plan.crow_t is not None) == grad
                # without a plan (another device): the index alone, by its query-row ranges
                bare = fused_subset(dataclasses.replace(joined, plan=None), PAIRS, subset, SIZES)
                assert bare.plan is None and bare.index.shape == expected.index.shape
                assert torch.equal(bare.index.index_target, expected.index.index_target)
                assert torch.equal(bare.index.index_source, expected.index.index_source)


def test_a_sliced_index_gives_the_subset_s_attention(gen):
    blocks = _blocks(True)
    neighborhoods = _neighborhoods(gen)
    x = [torch.randn(n, 6, generator=gen, dtype=torch.float64) for n in SIZES]
    subset = [i for i, (_, t) in enumerate(PAIRS) if t == 1]
    joined = prepare_fused(blocks, PAIRS, neighborhoods, SIZES)
    sliced = fused_subset(joined, PAIRS, subset, SIZES)
    pairs = [PAIRS[i] for i in subset]
    got = fused_sparse_attention(x, [blocks[i] for i in subset], pairs, sliced)
    full = fused_sparse_attention(x, blocks, PAIRS, joined)
    assert got[0] is None and got[2] is None
    torch.testing.assert_close(got[1], full[1], rtol=0, atol=1e-12)


def test_fused_subset_refuses_a_subset_that_splits_a_target_group(gen):
    joined = prepare_fused_index(PAIRS, _neighborhoods(gen), SIZES, 2)
    with pytest.raises(ValueError, match="only some of the blocks into group 1"):
        fused_subset(joined, PAIRS, [1, 2], SIZES)  # blocks 3 and 5 also target group 1
    for bad in ([], [2, 1], [0, 0], [0, 6]):
        with pytest.raises(ValueError, match="increasing, distinct"):
            fused_subset(joined, PAIRS, bad, SIZES)


def test_plan_rows_slices_target_rows_and_renames_sources(gen):
    # rows 1..2 and 4..5 of a 6 × 5 mask, sources renamed by a reversal
    mask = torch.rand(6, 5, generator=gen) < 0.6
    mask[2] = False  # a kept row without entries
    rows, rename = [(1, 3), (4, 6)], torch.arange(4, -1, -1)
    plan = sparse_plan(mask.double().to_sparse().coalesce(), 2)
    kept = torch.cat([mask[a:b] for a, b in rows])
    # the reversal flips the order of a row's sources, so compare the patterns as sets
    expected = kept.flip(1)
    got = plan_rows(plan, rows, rename, 5)
    assert got.shape == (4, 5) and got.nnz == int(kept.sum())
    dense = torch.zeros(4, 5, dtype=torch.bool)
    dense[got.index_target, got.index_source] = True
    assert torch.equal(dense, expected)
    # an order-keeping renaming (the key rows of fused blocks) gives the sub-mask's own plan
    identity = plan_rows(plan, rows, torch.arange(5), 5)
    _assert_same_plan(identity, sparse_plan(kept.double().to_sparse().coalesce(), 2))
    unsorted = dataclasses.replace(plan, order=torch.arange(plan.nnz))
    with pytest.raises(ValueError, match="target-sorted"):
        plan_rows(unsorted, rows, rename, 5)
