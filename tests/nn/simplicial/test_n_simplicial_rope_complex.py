"""RoPE on complexes: no canonical order, so explicit positions or a refusal.

§2.4 of the N-simplicial paper rotates every token by its *sequence* position. The cells of a
complex have none: with the cell index as position, ``NSimplicialTransformer(rope=True)`` would
not be invariant to relabelling the vertices (differences 0.07–0.25). So ``rope=True`` on a
complex needs ``positions`` (an order the data defines) and raises without them; sequences
keep the default ``0..n-1``.
"""

from __future__ import annotations

import pytest
import toponetx as tnx
import torch

from topomodelx_attention.data import from_toponetx
from topomodelx_attention.nn.simplicial import (
    NSimplicialAttention,
    NSimplicialTransformer,
    NSimplicialTransformerLayer,
    simplices_to_tuples,
)
from topomodelx_attention.nn.simplicial.masks import TupleMask

SIMPLICES = [[0, 1, 2], [1, 2, 3], [3, 4], [4, 5, 6], [2, 5]]
N_VERTICES = 7


def relabel(perm):
    return tnx.SimplicialComplex([[perm[v] for v in s] for s in SIMPLICES])


def layer():
    torch.manual_seed(0)
    return NSimplicialTransformerLayer(12, heads=2, order=2, simplicial_options={"rope": True}).double()


def relabelled_inputs(seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(N_VERTICES, 12, generator=generator, dtype=torch.float64)
    perm = torch.randperm(N_VERTICES, generator=generator)
    x_perm = torch.empty_like(x)
    x_perm[perm] = x  # vertex v of the complex is vertex perm[v] of the relabelled one
    return x, x_perm, perm


def test_cell_index_as_position_is_not_invariant_to_relabelling():
    """The old default (position = cell index), passed explicitly: relabelling changes the output."""
    block = layer()
    x, x_perm, perm = relabelled_inputs()
    index = torch.arange(N_VERTICES)
    out = block(x, tuples=tnx.SimplicialComplex(SIMPLICES), positions=index)
    out_perm = block(x_perm, tuples=relabel(perm.tolist()), positions=index)
    assert (out_perm[perm] - out).abs().max() > 1e-3


def test_rope_on_a_complex_without_positions_is_refused():
    x, _, _ = relabelled_inputs()
    sc = tnx.SimplicialComplex(SIMPLICES)
    pattern = r"rope=True on a complex needs explicit positions.*positions=.*rope=False"
    with pytest.raises(ValueError, match=pattern):
        layer()(x, tuples=sc)
    torch.manual_seed(0)
    attention = NSimplicialAttention(12, heads=2, order=2, simplicial_options={"rope": True}).double()
    with pytest.raises(ValueError, match=pattern):
        attention(x, tuples=simplices_to_tuples(sc, 2))
    with pytest.raises(ValueError, match=pattern):
        attention(x, mask=TupleMask(simplices_to_tuples(sc, 2)))
    data = from_toponetx(sc, features={0: x.float()}, max_rank=2)
    model = NSimplicialTransformer(12, 12, 2, heads=2, order=2, simplicial_options={"rope": True})
    with pytest.raises(ValueError, match=pattern):
        model(data)
    # without rope the same model runs on the complex
    assert NSimplicialTransformer(12, 12, 2, heads=2, order=2)(data).shape == (1, 2)


def test_positions_permuted_with_the_cells_make_rope_invariant():
    block = layer()
    x, x_perm, perm = relabelled_inputs(seed=1)
    positions = torch.tensor([3.0, 0.0, 5.0, 1.0, 6.0, 2.0, 4.0])  # an order the data defines
    positions_perm = torch.empty_like(positions)
    positions_perm[perm] = positions
    out = block(x, tuples=tnx.SimplicialComplex(SIMPLICES), positions=positions)
    out_perm = block(x_perm, tuples=relabel(perm.tolist()), positions=positions_perm)
    torch.testing.assert_close(out_perm[perm], out)
    data = from_toponetx(tnx.SimplicialComplex(SIMPLICES), features={0: x}, max_rank=2, dtype=torch.float64)
    torch.manual_seed(0)
    model = NSimplicialTransformer(
        12, 12, 2, heads=2, order=2, simplicial_options={"rope": True}
    ).double()
    assert torch.isfinite(model(data, positions=positions)).all()


def test_sequences_keep_the_default_positions():
    torch.manual_seed(0)
    attention = NSimplicialAttention(
        12, heads=2, order=2, simplicial_options={"rope": True, "causal": True}
    ).double()
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    torch.testing.assert_close(attention(x), attention(x, positions=torch.arange(6)))
    model = NSimplicialTransformer(
        12, 12, 2, heads=2, order=2, simplicial_options={"rope": True, "causal": True}
    )
    assert model(x.float()).shape == (2, 2)
