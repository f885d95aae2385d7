"""``to_toponetx(complex_type="cell")`` of complexes a CellComplex cannot hold: errors naming the cell
and the complex types that can hold it (and those types really do)."""

from __future__ import annotations

import re

import pytest
import toponetx as tnx
import torch

from topomodelx_attention.data import from_toponetx, to_toponetx


def _combinatorial(cells: dict[int, list[list[int]]], n: int = 4) -> tnx.CombinatorialComplex:
    cc = tnx.CombinatorialComplex()
    for v in range(n):
        cc.add_cell([v], rank=0)
    for rank, members in cells.items():
        for cell in members:
            cc.add_cell(cell, rank=rank)
    return cc


def _named_types(message: str) -> list[str]:
    return re.findall(r"'(cell|simplicial|combinatorial)'", message.split("use complex_type=")[-1])


def test_hypergraph_shaped_complex_names_the_cell_and_the_holder():
    data = from_toponetx(_combinatorial({1: [[0, 1, 2], [2, 3]]}))
    vertex_sets = [sorted(c.nonzero().flatten().tolist()) for c in data.vertex_cells(1).to_dense().t()]
    with pytest.raises(ValueError, match="too many values to unpack"):
        for _u, _v in vertex_sets:  # the conversion's former loop over edges
            pass
    with pytest.raises(ValueError, match=r"rank-1 cell 0 has 3 vertices \[0, 1, 2\]") as error:
        to_toponetx(data, "cell")
    assert _named_types(str(error.value)) == ["combinatorial"]
    held = to_toponetx(data, "combinatorial")
    assert {frozenset(c) for c in held.skeleton(1)} == {frozenset({0, 1, 2}), frozenset({2, 3})}
    with pytest.raises(ValueError, match=r"rank-1 cell 0 has 3 vertices .*'combinatorial'"):
        to_toponetx(data, "simplicial")


def test_unoriented_two_cell_names_the_cell_and_the_holders():
    cc = _combinatorial({1: [[0, 1], [1, 2], [0, 2], [2, 3]], 2: [[0, 1, 2]]})
    data = from_toponetx(cc)
    assert "signed_incidence_2" not in data
    with pytest.raises(ValueError, match=r"signed_incidence_2.*rank-2 cell 0 has vertices \[0, 1, 2\]") as error:
        to_toponetx(data, "cell")
    assert _named_types(str(error.value)) == ["simplicial", "combinatorial"]
    assert to_toponetx(data, "simplicial").shape == (4, 4, 1)
    assert to_toponetx(data, "combinatorial").shape == (4, 4, 1)


def test_two_cell_without_its_faces_is_not_offered_to_simplicial():
    data = from_toponetx(_combinatorial({2: [[0, 1, 2, 3]]}))
    with pytest.raises(ValueError, match="rank-2 cell 0") as error:
        to_toponetx(data, "cell")
    assert _named_types(str(error.value)) == ["combinatorial"]


def test_rank_three_names_the_holders():
    sc = tnx.SimplicialComplex([[0, 1, 2, 3]])
    with pytest.raises(ValueError, match=r"rank 3.*complex_type='simplicial' or 'combinatorial'"):
        to_toponetx(from_toponetx(sc), "cell")


def test_a_boundary_that_is_no_cycle_names_the_cell():
    cc = tnx.CellComplex([[0, 1, 2], [2, 3, 4]], ranks=2)
    data = from_toponetx(cc)
    b2 = data.signed_incidence_2.to_dense()
    b2[:, 0] = b2[:, 0].abs()  # all +1: the edges no longer chain head to tail
    data.signed_incidence_2 = b2.to_sparse()
    with pytest.raises(ValueError, match=r"rank-2 cell 0 \(vertices \[0, 1, 2\].*simple cycle"):
        to_toponetx(data, "cell")


def test_cell_complexes_still_round_trip():
    cc = tnx.CellComplex([[0, 1, 2], [1, 2, 3, 4]], ranks=2)
    data = from_toponetx(cc, features={0: torch.randn(5, 2)})
    back = to_toponetx(data, "cell")
    assert back.shape == cc.shape
