"""Fuzz: every model variant forward + backward on batches of random / degenerate complexes.

Well-formed batches (empty complexes, single vertices, no edges, isolated vertices, 3-cells)
must give one finite row per complex and finite gradients; NaN / Inf / 1e30 inputs, integer
codes without cardinalities and row-count mismatches must raise ``ValueError`` / ``TypeError``.
Models are tiny (width 8, one layer, two heads).
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from tests.fuzz.cases import ACCEPT, REJECT, assert_finite, finite_float_graph, quietly, run_cases
from topomodelx_attention.harness.models import build_model
from topomodelx_attention.harness.prepare import DatasetInfo
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.nn.graph import OrderKTokenGT, TokenGT
from topomodelx_attention.nn.simplicial import NSimplicialTransformer
from topomodelx_attention.transforms import (
    CellCycleLifting,
    HodgeLaplacianPE,
    LaplacianNodeId,
    SimplicialCliqueLifting,
)

WIDTH, OUT, PE, NODE_ID = 8, 2, 3, 4
CORRUPTIONS = ("clean", "clean", "clean", "clean", "float64", "nan", "inf", "huge", "int", "x_rows")


def corrupt(data, key: str, how: str, rng: np.random.Generator) -> str:
    """Corrupt ``data[key]`` in place; returns the expectation."""
    x = data[key]
    if how == "float64":
        data[key] = x.double()
    elif how in ("nan", "inf", "huge"):
        if x.shape[0] == 0:
            return ACCEPT
        x = x.clone()
        x[int(rng.integers(x.shape[0])), int(rng.integers(x.shape[1]))] = {"nan": float("nan"), "inf": float("inf"), "huge": 1e30}[how]
        data[key] = x
        return REJECT
    elif how == "int":
        data[key] = torch.from_numpy(rng.integers(0, 3, tuple(x.shape)))
        return REJECT
    elif how == "x_rows":
        data[key] = torch.cat([x, x.new_zeros(1, x.shape[1])])
        return REJECT
    return ACCEPT


def complexes(seed: int, lifting, size: int, pe: bool = False, node_id: bool = False) -> list:
    def one(i):
        data = lifting(finite_float_graph(seed * 13 + i, feature_dim=2, edge_attr=False).data)
        if pe:
            data = HodgeLaplacianPE(PE)(data)
        if node_id:
            data = LaplacianNodeId(NODE_ID)(data)
        return data

    return quietly(lambda: [one(i) for i in range(size)])


def forward_backward(model, batch, num_complexes: int):
    out = model(batch)
    assert out.shape == (num_complexes, OUT), f"output {tuple(out.shape)}, expected {(num_complexes, OUT)}"
    assert_finite("output", out)
    out.sum().backward()
    assert_finite("gradients", model)
    return out


def run_model_cases(fuzz_seeds, name: str, make) -> None:
    """``make(seed, rng) -> (description, model, batch, num_complexes, expect)`` per case."""

    def case(seed, rng):
        torch.manual_seed(seed)
        description, model, batch, num, expect = make(seed, rng)
        return description, expect, lambda: forward_backward(model, batch, num)

    run_cases(fuzz_seeds, name, case)


def _batch(items):
    return next(iter(DataLoader(items, batch_size=len(items))))


# ----------------------------------------------------------------------------------------------
def test_fuzz_cellular_transformer(fuzz_seeds):
    def make(seed, rng):
        attention = str(rng.choice(["pairwise", "general"]))
        kind = str(rng.choice(["sparse", "dense", "mixed", "linear"] if attention == "pairwise" else ["sparse", "dense", "linear"]))
        dim = int(rng.choice([2, 2, 3]))
        lifting = CellCycleLifting(max_cell_length=8) if dim == 2 and rng.integers(2) else SimplicialCliqueLifting(complex_dim=dim)
        use_pe = bool(rng.integers(2))
        items = complexes(seed, lifting, int(rng.integers(1, 4)), pe=use_pe)
        batch = _batch(items)
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        key = f"{'pe' if use_pe and rng.integers(2) else 'x'}_{int(rng.integers(dim + 1))}"
        expect = corrupt(batch, key, how, rng)
        model = CellularTransformer(
            [2] * (dim + 1), WIDTH, OUT, n_layers=1, heads=2, attention=attention, kind=kind,
            attention_dropout=0.0, pe_options={"channels": PE if use_pe else None},
            kernel_options={"num_random_features": 8} if kind == "linear" else None,
        )
        shapes = batch.shape.tolist()
        return f"CT {attention}/{kind} dim={dim} {key}:{how} shapes={shapes}", model, batch, len(items), expect

    run_model_cases(fuzz_seeds, "CellularTransformer", make)


def test_fuzz_tokengt(fuzz_seeds):
    def make(seed, rng):
        kind = str(rng.choice(["dense", "linear"]))
        edge_tokens = str(rng.choice(["directed", "undirected"]))
        size = int(rng.integers(1, 4))
        graphs = []
        for i in range(size):
            case = finite_float_graph(seed * 13 + i, feature_dim=2, edge_attr=True)
            graphs.append(LaplacianNodeId(NODE_ID)(case.data))
        batch = Batch.from_data_list(graphs)
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        key = str(rng.choice(["x", "edge_attr", "node_id"]))
        expect = corrupt(batch, key, how, rng)
        model = TokenGT(2, 2, WIDTH, OUT, n_layers=1, heads=2, node_id_dim=NODE_ID, kind=kind,
                        edge_tokens=edge_tokens,
                        kernel_options={"num_random_features": 8} if kind == "linear" else None)
        sizes = [g.num_nodes for g in graphs]
        return f"TokenGT {kind}/{edge_tokens} {key}:{how} n={sizes}", model, batch, size, expect

    run_model_cases(fuzz_seeds, "TokenGT", make)


def test_fuzz_order_k_tokengt(fuzz_seeds):
    def make(seed, rng):
        kind = str(rng.choice(["dense", "linear"]))
        identifiers = str(rng.choice(["ordered", "sum", "mean"]))
        dim = int(rng.choice([2, 3]))
        lifting = CellCycleLifting(max_cell_length=8) if dim == 2 and rng.integers(2) else SimplicialCliqueLifting(complex_dim=dim)
        items = complexes(seed, lifting, int(rng.integers(1, 4)), node_id=True)
        batch = _batch(items)
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        key = "node_id" if rng.integers(4) == 0 else f"x_{int(rng.integers(dim + 1))}"
        expect = corrupt(batch, key, how, rng)
        model = OrderKTokenGT([2] * (dim + 1), WIDTH, OUT, n_layers=1, heads=2, node_id_dim=NODE_ID,
                              kind=kind, identifiers=identifiers,
                              kernel_options={"num_random_features": 8} if kind == "linear" else None)
        return f"OrderKTokenGT {kind}/{identifiers} dim={dim} {key}:{how} shapes={batch.shape.tolist()}", model, batch, len(items), expect

    run_model_cases(fuzz_seeds, "OrderKTokenGT", make)


def test_fuzz_n_simplicial_transformer(fuzz_seeds):
    def make(seed, rng):
        dim = int(rng.choice([2, 3]))
        items = complexes(seed, SimplicialCliqueLifting(complex_dim=dim), int(rng.integers(1, 4)))
        batch = _batch(items)
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        expect = corrupt(batch, "x_0", how, rng)
        kv_bias = bool(rng.integers(2))
        model = NSimplicialTransformer(
            2,
            WIDTH,
            OUT,
            n_layers=1,
            heads=2,
            pooling=str(rng.choice(["sum", "mean"])),
            simplicial_options={"kv_bias": kv_bias},
        )
        return f"NSimplicial dim={dim} kv_bias={kv_bias} x_0:{how} shapes={batch.shape.tolist()}", model, batch, len(items), expect

    run_model_cases(fuzz_seeds, "NSimplicialTransformer", make)


BASELINES = ("gin", "gine", "gps", "graph_transformer", "cwn", "sccnn")


def test_fuzz_harness_baselines(fuzz_seeds):
    def make(seed, rng):
        name = BASELINES[int(rng.integers(len(BASELINES)))]
        simplicial = name == "sccnn"
        lifting = SimplicialCliqueLifting(complex_dim=2) if simplicial else CellCycleLifting(max_cell_length=8)
        use_pe = name in ("gine", "gps", "graph_transformer") and bool(rng.integers(2))
        items = complexes(seed, lifting, int(rng.integers(1, 4)), pe=use_pe)
        batch = _batch(items)
        how = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
        ranks = 0 if name == "gin" else (2 if name in ("cwn", "sccnn") else 1)  # ranks it reads
        key = "pe_0" if use_pe and rng.integers(3) == 0 else f"x_{int(rng.integers(ranks + 1))}"
        expect = corrupt(batch, key, how, rng)
        info = DatasetInfo("fuzz", "classification", OUT, [2, 2, 2], [None, None, None],
                           PE if use_pe else None, "accuracy")
        params = {"hidden_channels": WIDTH, "n_layers": 1}
        if name in ("gps", "graph_transformer"):
            params["heads"] = 2
        if name in ("gine", "gps", "graph_transformer"):
            params["pe_hidden_channels"] = 4
        model = build_model(name, params, info).eval()  # BatchNorm: batch statistics need >1 row
        return f"{name} pe={use_pe} {key}:{how} shapes={batch.shape.tolist()}", model, batch, len(items), expect

    run_model_cases(fuzz_seeds, "harness baselines", make)
