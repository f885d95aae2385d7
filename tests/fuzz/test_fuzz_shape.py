"""Fuzz: the Cellular Transformer's option groups (``readout_options``, ``pe_options``), and the
attention options of the edge-graph baselines (``EdgeGraphBaseline``: each ``conv`` takes its own).

Random mappings of valid keys with valid values must build a model whose forward pass gives
one finite row per complex and whose option values are the ones given (the others keep their
defaults); a key the group does not take, a value outside its choices, or a group that is not
a mapping must raise ``ValueError`` / ``TypeError`` with a message.
"""

from __future__ import annotations

import torch

from tests.fuzz.cases import ACCEPT, REJECT, run_cases
from topomodelx_attention.data import from_toponetx
from topomodelx_attention.harness.baselines import EDGE_GRAPH_CONVS, EdgeGraphBaseline
from topomodelx_attention.harness.prepare import DatasetInfo
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.nn.cell.cellular_transformer import PE_OPTIONS, READOUT_OPTIONS

PE = 3

GOOD_VALUES = {
    "readout_options": {
        "layers": [0, 1, 2],
        "dropout": [0.0, 0.3],
        "ranks": [None, (0,), (1, 2), "all"],
        "before_pooling": [True, False],
    },
    "pe_options": {"combination": ["concat", "sum"], "projection": ["per_rank", "shared"]},
}
BAD_VALUES = {
    "readout_options": {"ranks": [(3,), ()], "before_pooling": ["no", 1]},
    "pe_options": {"combination": ["product", None], "projection": ["both", "shared "]},
}
BAD_KEYS = ("readout_layers", "layer", "pooling", "width", "Ranks", 0)


def _complex():
    import toponetx as tnx

    cells = tnx.CellComplex([[0, 1, 2], [1, 2, 3]])
    features = {r: torch.randn(n, 3, dtype=torch.float64) for r, n in enumerate(cells.shape)}
    data = from_toponetx(cells, features=features)
    for r in range(3):
        data[f"pe_{r}"] = torch.randn(data.num_cells(r), PE, dtype=torch.float64)
    return data


def test_fuzz_option_groups(fuzz_seeds):
    data = _complex()

    def make(seed, rng):
        groups = {}
        for group, values in GOOD_VALUES.items():
            keys = [k for k in values if rng.random() < 0.5]
            groups[group] = {k: values[k][int(rng.integers(len(values[k])))] for k in keys}
        groups["pe_options"]["channels"] = PE  # the width of the data's pe_r
        fault = ("none", "bad_key", "bad_value", "not_mapping")[int(rng.integers(4))]
        group = ("readout_options", "pe_options")[int(rng.integers(2))]
        if fault == "bad_key":
            groups[group][BAD_KEYS[int(rng.integers(len(BAD_KEYS)))]] = 1
        elif fault == "bad_value":
            key = list(BAD_VALUES[group])[int(rng.integers(len(BAD_VALUES[group])))]
            groups[group][key] = BAD_VALUES[group][key][int(rng.integers(2))]
        elif fault == "not_mapping":
            groups[group] = [tuple(groups[group].items())] if groups[group] else "concat"

        def run():
            torch.manual_seed(seed)
            model = CellularTransformer(
                [3, 3, 3], 8, 2, n_layers=1, heads=2, **groups
            ).double()
            out = model(data)
            assert out.shape == (1, 2) and torch.isfinite(out).all(), out
            readout = {**READOUT_OPTIONS, **groups["readout_options"]}
            ranks = {None: (0,), "all": (0, 1, 2)}.get(readout["ranks"], readout["ranks"])
            assert model.readout_ranks == tuple(ranks) and sorted(model.readouts) == [
                str(r) for r in sorted(ranks)
            ]
            assert model.readout_before_pooling is readout["before_pooling"]
            pe = {**PE_OPTIONS, **groups["pe_options"]}
            assert (model.shared_pe is not None) == (pe["projection"] == "shared")
            assert all(e.pe_combination == pe["combination"] for e in model.encoders)

        return f"{fault} {groups}", (ACCEPT if fault == "none" else REJECT), run

    run_cases(fuzz_seeds, "CT option groups", make, offset=910_000)


CONV_VALUES = {"heads": [1, 2, 4], "attention_dropout": [0.0, 0.2], "kind": ["dense", "linear"]}
BAD_CONV_VALUES = {"heads": [3, 0], "kind": ["sparse", "performer"]}


def test_fuzz_edge_graph_baseline_options(fuzz_seeds):
    """A conv takes only its own attention options (listed in EDGE_GRAPH_CONVS); others raise."""
    data = _complex()
    info = DatasetInfo("g", "classification", 2, [3, 3], [None, None], None, "accuracy")

    def make(seed, rng):
        convs = [*EDGE_GRAPH_CONVS, "gat"]
        conv = convs[int(rng.integers(len(convs)))]
        options = {k: v[int(rng.integers(len(v)))] for k, v in CONV_VALUES.items() if rng.random() < 0.5}
        bad_value = rng.random() < 0.25
        if bad_value:
            key = list(BAD_CONV_VALUES)[int(rng.integers(len(BAD_CONV_VALUES)))]
            options[key] = BAD_CONV_VALUES[key][int(rng.integers(2))]
        n_layers = [None, 1, 2][int(rng.integers(3))]
        taken = EDGE_GRAPH_CONVS.get(conv, (0, {}))[1]
        ignored_rate = options.get("kind") == "linear" and options.get("attention_dropout", 0.0) != 0.0
        ok = conv in EDGE_GRAPH_CONVS and set(options) <= set(taken) and not bad_value and not ignored_rate

        def run():
            torch.manual_seed(seed)
            model = EdgeGraphBaseline(info, 8, conv=conv, n_layers=n_layers, **options).double()
            assert len(model.blocks) == (EDGE_GRAPH_CONVS[conv][0] if n_layers is None else n_layers)
            model.eval()
            out = model(data)
            assert out.shape == (1, 2) and torch.isfinite(out).all(), out

        return f"conv={conv} n_layers={n_layers} {options}", (ACCEPT if ok else REJECT), run

    run_cases(fuzz_seeds, "edge-graph baseline options", make, offset=920_000)
