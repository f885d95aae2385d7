"""Tensor diagrams: the paper's default, the textual / tuple forms, block keys, Eq. 3's matrix."""

import pytest
import torch

from topomodelx_attention.nn.cell import (
    Arrow,
    ArrowNeighborhoods,
    default_tensor_diagram,
    parse_tensor_diagram,
)
from topomodelx_attention.nn.cell.tensor_diagram import block_keys, block_neighborhood


def test_default_diagram_is_figure_2():
    arrows = default_tensor_diagram(2)
    assert [a.name for a in arrows] == ["0->0", "1->1", "2->2", "1->0", "0->1", "2->1", "1->2"]
    assert Arrow(0, 1, "incidence_1", True) in arrows
    assert [a.neighborhood for a in arrows[:3]] == ["adjacency_0", "coadjacency_1", "coadjacency_2"]
    assert parse_tensor_diagram(None, 2) == arrows
    assert default_tensor_diagram(0) == [Arrow(0, 0, "adjacency_0")]


def test_every_written_form_gives_the_same_arrow():
    forms = ["0->1:incidence_1.T", " 0 -> 1 : incidence_1.T ", (0, 1, "incidence_1.T"),
             [0, 1, "incidence_1.T"], Arrow(0, 1, "incidence_1", True)]
    for form in forms:
        assert parse_tensor_diagram([form], 1) == [Arrow(0, 1, "incidence_1", True)], form
    assert Arrow(0, 1, "incidence_1", True).label == "0->1:incidence_1.T"


def test_bad_diagrams_name_the_arrow_and_the_fix():
    with pytest.raises(ValueError, match="appears twice"):
        parse_tensor_diagram(["0->0:adjacency_0", (0, 0, "adjacency_0")], 2)
    with pytest.raises(ValueError, match=r"\(n_1, n_0\)"):  # incidence_1 is (n_0, n_1): needs .T
        parse_tensor_diagram([(0, 1, "incidence_1")], 2)
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        parse_tensor_diagram(["2->2:adjacency_2"], 1)
    with pytest.raises(ValueError, match="cannot parse"):
        parse_tensor_diagram(["0 to 1"], 1)
    with pytest.raises(ValueError, match="not a neighbourhood key"):
        parse_tensor_diagram(["0->0:Adjacency"], 1)
    with pytest.raises(TypeError, match="must be an Arrow"):
        parse_tensor_diagram([(0, 0)], 1)
    with pytest.raises(ValueError, match="no arrow"):
        parse_tensor_diagram([], 1)


def test_block_keys_are_unique_module_names():
    arrows = parse_tensor_diagram(["0->0:adjacency_0", "1->1:adjacency_1", "1->1:coadjacency_1",
                                   "0->1:incidence_1.T"], 1)
    assert block_keys(arrows) == ["0->0", "1->1:adjacency_1", "1->1:coadjacency_1", "0->1"]
    assert not any("." in key for key in block_keys(arrows))  # ModuleDict keys


def test_arrow_matrix_converts_any_layout_and_names_missing_keys():
    incidence = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])  # (n_0, n_1)
    arrow = Arrow(0, 1, "incidence_1", True)
    for matrix in (incidence, incidence.to_sparse(), incidence.to_sparse_csr()):
        got = arrow.matrix({"incidence_1": matrix})
        assert got.layout == torch.sparse_coo and got.is_coalesced()
        torch.testing.assert_close(got.to_dense(), incidence.T)
    with pytest.raises(ValueError, match=r"arrow 0->1:incidence_1\.T needs the neighbourhood"):
        arrow.matrix({"adjacency_0": incidence})


def test_block_neighborhood_of_eq3_sums_the_arrows_of_each_block():
    arrows = parse_tensor_diagram(["1->1:adjacency_1", "1->1:coadjacency_1", "1->0:incidence_1",
                                   "0->1:incidence_1.T"], 1)
    incidence = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    neighborhoods = ArrowNeighborhoods({
        arrows[0]: torch.tensor([[0.0, 1.0], [1.0, 0.0]]).to_sparse(),
        arrows[1]: torch.tensor([[0.0, 2.0], [0.0, 0.0]]).to_sparse(),
        arrows[2]: incidence.to_sparse(),
        arrows[3]: incidence.T.to_sparse(),
    })
    offsets = [0, 3, 5]
    big = block_neighborhood(arrows, neighborhoods, offsets, torch.device("cpu")).to_dense()
    expected = torch.zeros(5, 5)
    expected[3:, 3:] = torch.tensor([[0.0, 3.0], [1.0, 0.0]])  # adjacency + coadjacency
    expected[:3, 3:] = incidence
    expected[3:, :3] = incidence.T
    torch.testing.assert_close(big, expected)
    with pytest.raises(ValueError, match=r"arrow 1->0:incidence_1 has shape \(3, 2\), expected \(2, 3\)"):
        block_neighborhood(arrows[2:3], neighborhoods, [0, 2, 5], torch.device("cpu"))
