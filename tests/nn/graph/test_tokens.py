"""Tokens shared by TokenGT and order-k TokenGT: regularisers, the tokenizer, the shared model."""

from __future__ import annotations

import pytest
import torch

from topomodelx_attention.nn.graph import (
    OrderKTokenGT,
    TokenGT,
    TokenGTTokenizer,
    eigenvector_dropout,
    random_sign_flip,
)
from topomodelx_attention.nn.graph.token_model import TokenModel, check_outputs


def test_sign_flip_is_per_graph_and_column():
    torch.manual_seed(0)
    batch = torch.tensor([0, 0, 0, 1, 1, 2])
    node_id = torch.rand(6, 4) + 0.5
    flipped = random_sign_flip(node_id, batch, 3)
    signs = flipped / node_id
    assert set(signs.unique().tolist()) <= {-1.0, 1.0}
    for g in range(3):
        rows = signs[batch == g]
        assert torch.equal(rows, rows[:1].expand_as(rows))


def test_eigenvector_dropout_drops_whole_columns_per_graph():
    torch.manual_seed(0)
    batch = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    node_id = torch.rand(7, 50) + 0.5
    dropped = eigenvector_dropout(node_id, batch, 3, 0.5)
    ratio = dropped / node_id
    assert set(ratio.unique().tolist()) <= {0.0, 2.0}
    assert 0 < int((ratio == 0).sum()) < ratio.numel()
    for g in range(3):
        rows = ratio[batch == g]
        assert torch.equal(rows, rows[:1].expand_as(rows))
    assert eigenvector_dropout(node_id, batch, 3, 0.0) is node_id


def test_tokenizer_sums_identifier_projections_of_the_edge_ends():
    torch.manual_seed(0)
    tokenizer = TokenGTTokenizer(0, 0, 4, node_id_dim=3, type_identifiers=False)
    node_id = torch.randn(3, 3)
    edge_index = torch.tensor([[0, 1], [1, 2]])
    nodes, edges = tokenizer(None, edge_index, None, node_id, 3)
    first, second = tokenizer.id_first(node_id), tokenizer.id_second(node_id)
    torch.testing.assert_close(nodes, first + second)  # [P_v, P_v]
    torch.testing.assert_close(edges, first[[0, 1]] + second[[1, 2]])  # [P_u, P_v]
    with pytest.raises(ValueError, match="node_id is required"):
        tokenizer(None, edge_index, None, None, 3)


def test_both_models_share_the_token_model_and_name_their_readouts_by_output():
    tokengt = TokenGT(3, 0, 8, 2, heads=2, node_id_dim=4, outputs=("complex", 0, 1))
    order_k = OrderKTokenGT([3, 3], 8, 2, heads=2, node_id_dim=4, outputs=("complex", 1))
    for model in (tokengt, order_k):
        assert isinstance(model, TokenModel)
        assert not hasattr(model, "heads")  # ``heads`` is only ever the number of attention heads
    assert sorted(tokengt.readouts) == ["0", "1", "complex"]
    assert sorted(order_k.readouts) == ["1", "complex"]
    assert check_outputs(0, ("complex", 0), "x") == (0,)
    with pytest.raises(ValueError, match="twice"):
        check_outputs(("complex", "complex"), ("complex",), "x")
    with pytest.raises(ValueError, match="non-empty subset"):
        check_outputs((True,), ("complex", 1), "x")  # a bool is no rank
