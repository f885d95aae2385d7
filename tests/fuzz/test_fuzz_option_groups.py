"""Fuzz: the option groups (N-simplicial ``simplicial_options``, CT ``pe_options``).

* N-simplicial: the attention's options travel as one ``simplicial_options`` mapping from the model
  through every layer to the attention, unchanged: random valid groups build and run (and every
  attention holds them); a key the group does not take, a non-mapping, or a separate
  keyword (``kv_bias=...``) is rejected with a message naming it.
* Cellular Transformer: the width of ``pe_r`` is ``pe_options["channels"]``: a width equal to
  the data's runs; a different one, none for data with PE, or a ``pe_channels=``
  keyword is rejected with a message naming it.
"""

from __future__ import annotations

import torch

from tests.fuzz.cases import ACCEPT, REJECT, run_cases
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.nn.simplicial import SIMPLICIAL_OPTIONS, NSimplicialTransformer

WIDTH, HEADS, OUT = 12, 2, 3  # head_dim 6: divisible by N + 1 = 3 (determinant logits, RoPE)

#: Choices per key that combine into a valid group (window and router_k are drawn exclusively).
VALID = {
    "kv_bias": [False, True],
    "causal": [False, True],
    "rope": [False, True],
    "scale": [None, 0.5],
    "chunk_size": [None, 2],
    "include_lower": [None, False],
    "self_loops": [False, True],
    "rope_base": [10000.0, 500.0],
}
SELECTIONS = [{}, {"window": 2}, {"window": (2, 3)}, {"router_k": 2, "router": "paper"},
              {"router_k": 3, "router": "bilinear", "router_dim": 4}]
BAD_KEYS = ("router_K", "heads", "dropout", "kernel", "kvbias")


def test_fuzz_n_simplicial_simplicial_options(fuzz_seeds):
    def make(seed, rng):
        options = {k: v[int(rng.integers(len(v)))] for k, v in VALID.items() if rng.random() < 0.5}
        options.update(SELECTIONS[int(rng.integers(len(SELECTIONS)))])
        fault = ("none", "none", "bad_key", "not_mapping", "old_keyword")[int(rng.integers(5))]
        kwargs = {"simplicial_options": options}
        if fault == "bad_key":
            options[BAD_KEYS[int(rng.integers(len(BAD_KEYS)))]] = 1
        elif fault == "not_mapping":
            kwargs = {"simplicial_options": list(options.items()) or "causal"}
        elif fault == "old_keyword":
            kwargs = {"kv_bias": True, "simplicial_options": options}

        def run():
            torch.manual_seed(seed)
            model = NSimplicialTransformer(2, WIDTH, OUT, n_layers=2, heads=HEADS, **kwargs)
            want = {**SIMPLICIAL_OPTIONS, **options}
            for layer in model.layers:  # passed down unchanged
                attention = layer.attention
                assert attention.causal == want["causal"] and attention.rope == want["rope"]
                assert (attention.key_bias is not None) == want["kv_bias"]
                assert (attention.scale, attention.chunk_size) == (want["scale"], want["chunk_size"])
                assert (attention.router is not None) == (want["router_k"] is not None)
                assert (attention.window is not None) == (want["window"] is not None)
            assert model.self_loops == want["self_loops"] and model.causal == want["causal"]
            out = model(torch.randn(2, 5, 2))
            assert out.shape == (2, OUT) and torch.isfinite(out).all(), out

        return f"{fault} {kwargs}", (ACCEPT if fault == "none" else REJECT), run

    run_cases(fuzz_seeds, "N-simplicial simplicial_options", make, offset=2_020_000)


def _complex(pe_width):
    import toponetx as tnx

    from topomodelx_attention.data import from_toponetx

    cells = tnx.CellComplex([[0, 1, 2], [1, 2, 3]])
    features = {r: torch.randn(n, 3) for r, n in enumerate(cells.shape)}
    data = from_toponetx(cells, features=features)
    if pe_width:
        for r in range(3):
            data[f"pe_{r}"] = torch.randn(data.num_cells(r), pe_width)
    return data


def test_fuzz_ct_pe_channels_in_pe_options(fuzz_seeds):
    def make(seed, rng):
        data_width = int(rng.choice([0, 2, 3]))  # 0: the data carries no PE
        channels = [None, 2, 3][int(rng.integers(3))]
        options = {"channels": channels}
        if rng.random() < 0.5:
            options["combination"] = str(rng.choice(["concat", "sum"]))
        if rng.random() < 0.5:
            options["projection"] = str(rng.choice(["per_rank", "shared"]))
        old = rng.random() < 0.2
        kwargs = {"pe_channels": channels} if old else {"pe_options": options}
        good = not old and (channels or 0) == data_width

        def run():
            torch.manual_seed(seed)
            model = CellularTransformer([3, 3, 3], 8, 2, n_layers=1, heads=2, **kwargs)
            assert model.pe_channels == channels
            out = model(_complex(data_width))
            assert out.shape == (1, 2) and torch.isfinite(out).all(), out

        return f"data pe {data_width} {kwargs}", (ACCEPT if good else REJECT), run

    run_cases(fuzz_seeds, "CT pe_options channels", make, offset=2_021_000)
