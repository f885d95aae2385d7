"""Relative random-walk pair features (RRWP) of the attention core, checked by hand."""

import math

import pytest
import torch

from topomodelx_attention.nn.attention import padded_layout, random_walk_pair_features


def adjacency(edges, n):
    index = torch.tensor(edges, dtype=torch.long).t()
    index = torch.cat([index, index.flip(0)], dim=1)
    return torch.sparse_coo_tensor(index, torch.ones(index.shape[1]), (n, n)).coalesce()


def as_dict(features, layout):
    """``{(token i, token j): features}`` of the pairs with a nonzero feature (same complex)."""
    slots = layout.index if layout.index is not None else torch.arange(layout.num_tokens)
    batch, position = layout.batch, slots - layout.batch * layout.length
    out = {}
    for i in range(layout.num_tokens):
        for j in range(layout.num_tokens):
            if batch[i] != batch[j]:
                continue
            row = features[batch[i], :, position[i], position[j]]
            if bool(row.ne(0).any()):
                out[(i, j)] = row.tolist()
    return out


def pairs(matrix, batch, steps, dtype=torch.float32):
    layout = padded_layout(batch)
    return as_dict(random_walk_pair_features(matrix, layout, steps, dtype=dtype), layout)


def test_a_path_and_a_triangle_by_hand():
    # complex 0: path 0-1-2 (n=3); complex 1: triangle 3-4-5 (n=3)
    matrix = adjacency([(0, 1), (1, 2), (3, 4), (4, 5), (5, 3)], 6)
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    got = pairs(matrix, batch, 3, torch.float64)
    f = lambda p: math.log1p(3 * p)  # noqa: E731
    # path: P = [[0,1,0],[.5,0,.5],[0,1,0]], P^2 = [[.5,0,.5],[0,1,0],[.5,0,.5]]
    expected = {
        (0, 0): [f(1), 0, f(0.5)], (0, 1): [0, f(1), 0], (0, 2): [0, 0, f(0.5)],
        (1, 0): [0, f(0.5), 0], (1, 1): [f(1), 0, f(1)], (1, 2): [0, f(0.5), 0],
        (2, 0): [0, 0, f(0.5)], (2, 1): [0, f(1), 0], (2, 2): [f(1), 0, f(0.5)],
    }
    # triangle: P = (J - I)/2, P^2 = diag 1/2, off-diagonal 1/4
    for i in range(3, 6):
        for j in range(3, 6):
            expected[(i, j)] = [f(1), 0, f(0.5)] if i == j else [0, f(0.5), f(0.25)]
    assert got.keys() == expected.keys()  # no pair across the two complexes
    for pair, row in expected.items():
        assert got[pair] == pytest.approx(row, abs=1e-12), pair


def test_pairs_further_than_the_walk_are_not_stored_and_isolated_vertices_keep_themselves():
    # a path of 4 vertices and an isolated vertex, walks of length 0 and 1
    matrix = adjacency([(0, 1), (1, 2), (2, 3)], 5)
    got = pairs(matrix, torch.zeros(5, dtype=torch.long), 2)
    assert (0, 2) not in got and (0, 3) not in got and (4, 0) not in got
    assert got[(4, 4)] == pytest.approx([math.log1p(5), 0.0])  # P^0 only
    assert set(got) == {(i, i) for i in range(5)} | {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}


def test_relabelling_the_vertices_relabels_the_pairs():
    generator = torch.Generator().manual_seed(0)
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (4, 5), (5, 6)]
    batch = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    base = pairs(adjacency(edges, 7), batch, 4, torch.float64)
    perm = torch.cat([torch.randperm(4, generator=generator), 4 + torch.randperm(3, generator=generator)])
    new = torch.empty_like(perm)
    new[perm] = torch.arange(7)  # vertex v becomes new[v]
    moved = [(int(new[a]), int(new[b])) for a, b in edges]
    got = pairs(adjacency(moved, 7), batch, 4, torch.float64)
    assert got.keys() == {(int(new[a]), int(new[b])) for a, b in base}
    for (a, b), row in base.items():
        assert got[(int(new[a]), int(new[b]))] == pytest.approx(row, abs=1e-12)


def test_padding_slots_are_zero_and_an_empty_batch_gives_an_empty_grid():
    # complexes of 3 and 1 vertices: the second complex's row has two padding slots
    matrix = adjacency([(0, 1), (1, 2)], 4)
    features = random_walk_pair_features(matrix, padded_layout(torch.tensor([0, 0, 0, 1])), 2)
    assert features.shape == (2, 2, 3, 3)  # (complexes, walk lengths, L, L)
    assert features[1, :, 0, 0].tolist() == pytest.approx([math.log1p(1), 0.0])
    assert features[1, :, 1:].abs().sum() == 0 and features[1, :, :, 1:].abs().sum() == 0
    empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (0, 0))
    features = random_walk_pair_features(empty, padded_layout(torch.zeros(0, dtype=torch.long)), 3)
    assert features.shape[1] == 3 and features.abs().sum() == 0


def test_bad_input_raises():
    layout = padded_layout(torch.tensor([0, 0, 1, 1]))
    with pytest.raises(ValueError, match="steps"):
        random_walk_pair_features(adjacency([(0, 1)], 4), layout, 0)
    with pytest.raises(ValueError, match="two different complexes"):
        random_walk_pair_features(adjacency([(1, 2)], 4), layout, 2)
    with pytest.raises(ValueError, match="shape"):
        random_walk_pair_features(adjacency([(0, 1)], 3), layout, 2)
    with pytest.raises(ValueError, match="sparse COO"):
        random_walk_pair_features(adjacency([(0, 1)], 4).to_dense(), layout, 2)


def test_a_padded_bias_equals_the_same_bias_given_as_pairs():
    from topomodelx_attention.nn.attention import PaddedBias, dense_attention

    generator = torch.Generator().manual_seed(1)
    batch = torch.tensor([0, 0, 0, 1, 1])
    layout = padded_layout(batch)
    q, k, v = (torch.randn(5, 2, 3, generator=generator, dtype=torch.float64) for _ in range(3))
    grid = torch.randn(2, 2, 3, 3, generator=generator, dtype=torch.float64)  # (B, heads, L, L)
    position = layout.index - layout.batch * layout.length
    target, source = torch.meshgrid(torch.arange(5), torch.arange(5), indexing="ij")
    same = batch[target] == batch[source]
    target, source = target[same], source[same]
    values = grid[batch[target], :, position[target], position[source]]  # (nnz, heads)
    pairs = torch.sparse_coo_tensor(torch.stack([target, source]), values, (5, 5, 2)).coalesce()
    theta = torch.tensor([0.5, 2.0], dtype=torch.float64)
    expected = dense_attention(q, k, v, layout=layout, bias=pairs, bias_scale=theta)
    got = dense_attention(q, k, v, layout=layout, bias=PaddedBias(grid), bias_scale=theta)
    torch.testing.assert_close(got, expected)
    with pytest.raises(ValueError, match="PaddedBias must have shape"):
        dense_attention(q, k, v, layout=layout, bias=PaddedBias(grid[:, :, :2]))
