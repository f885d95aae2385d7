"""Baselines of the harness: the edge graph of the 1-skeleton, registration on import."""

import subprocess
import sys

import pytest
import torch

from topomodelx_attention.harness.baselines import edge_graph

BASELINES = ("gin", "gine", "gps", "graph_transformer", "cwn", "sccnn")


def test_edge_graph_is_both_orientations_of_the_incidence_columns():
    # path 0-1-2 plus edge 0-2: columns (0,1), (1,2), (0,2)
    incidence = torch.sparse_coo_tensor([[0, 1, 1, 2, 0, 2], [0, 0, 1, 1, 2, 2]], torch.ones(6), (3, 3)).coalesce()
    edge_index, edge_id = edge_graph(incidence)
    pairs = {(int(s), int(t), int(e)) for (s, t), e in zip(edge_index.t(), edge_id)}
    assert pairs == {(0, 1, 0), (1, 0, 0), (1, 2, 1), (2, 1, 1), (0, 2, 2), (2, 0, 2)}
    loop = torch.sparse_coo_tensor([[0], [0]], torch.ones(1), (2, 1)).coalesce()
    with pytest.raises(ValueError, match="two vertices per edge"):
        edge_graph(loop)


def test_the_registry_holds_the_baselines_when_their_module_is_imported_first():
    """The baselines register themselves in harness.models' registry; importing them first works."""
    code = (
        "import topomodelx_attention.harness.baselines\n"
        "from topomodelx_attention.harness.models import MODELS\n"
        f"missing = [name for name in {BASELINES!r} if name not in MODELS]\n"
        "assert not missing, missing\n"
        "from topomodelx_attention.harness.baselines import EdgeGraphBaseline\n"
        "assert MODELS['gps'].build.__module__ == 'topomodelx_attention.harness.baselines'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


def test_edge_graph_baseline_refuses_an_attention_option_its_conv_does_not_take():
    """GINE has no attention: `heads` for it (or `kind` for the graph transformer) raises, naming it."""
    from topomodelx_attention.harness.baselines import EDGE_GRAPH_CONVS, EdgeGraphBaseline
    from topomodelx_attention.harness.prepare import DatasetInfo

    info = DatasetInfo("g", "classification", 2, [3, 2], [None, None], None, "accuracy")
    for conv, (depth, options) in EDGE_GRAPH_CONVS.items():
        model = EdgeGraphBaseline(info, 8, conv=conv)
        assert len(model.blocks) == depth
        if options:
            EdgeGraphBaseline(info, 8, conv=conv, **options)  # every option it lists is taken
    with pytest.raises(ValueError, match="heads is not an option of the 'gine' baseline"):
        EdgeGraphBaseline(info, 8, conv="gine", heads=2)
    with pytest.raises(ValueError, match="kind is not an option of the 'graph_transformer' baseline"):
        EdgeGraphBaseline(info, 8, conv="graph_transformer", kind="linear")
    with pytest.raises(ValueError, match="conv must be one of"):
        EdgeGraphBaseline(info, 8, conv="gat")
    with pytest.raises(ValueError, match="heads must divide hidden_channels=8, got 3"):
        EdgeGraphBaseline(info, 8, conv="gps", heads=3)


def test_linear_gps_refuses_an_attention_dropout_it_would_ignore():
    """PyG's Performer has no attention-weight dropout: a rate for it raises instead of vanishing."""
    from topomodelx_attention.harness.baselines import EdgeGraphBaseline
    from topomodelx_attention.harness.prepare import DatasetInfo

    info = DatasetInfo("g", "classification", 2, [3, 2], [None, None], None, "accuracy")
    EdgeGraphBaseline(info, 8, conv="gps", kind="linear")  # the dense default rate does not apply
    EdgeGraphBaseline(info, 8, conv="gps", kind="linear", attention_dropout=0.0)
    with pytest.raises(ValueError, match=r"attention_dropout=0.2 has no effect with kind='linear'"):
        EdgeGraphBaseline(info, 8, conv="gps", kind="linear", attention_dropout=0.2)
    dense = EdgeGraphBaseline(info, 8, conv="gps", attention_dropout=0.2)
    assert dense.blocks[0].conv.attn.dropout == 0.2
