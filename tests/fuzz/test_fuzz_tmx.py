"""Fuzz: the TopoModelX drop-ins on random complexes and malformed calls, the edge-based 2-cell
feature lifting inside the liftings, and ``to_toponetx`` of random combinatorial complexes into
every complex type (a refusal must name the cell and a complex type that really holds it)."""

from __future__ import annotations

import re

import numpy as np
import torch

from tests.fuzz import cases
from topomodelx_attention.data import from_toponetx, to_toponetx
from topomodelx_attention.nn.topomodelx import AttentionConv, CellAttentionLayer
from topomodelx_attention.transforms import (
    CellCycleLifting,
    FeatureLifting,
    SimplicialCliqueLifting,
)

MALFORMED_CALLS = ("wrong_shape", "sparse_features", "wrong_width", "not_a_tensor")


def _lifted(seed: int):
    case = cases.finite_float_graph(seed, edge_attr=False, feature_dim=3)
    data = cases.quietly(CellCycleLifting(self_loops="drop"), case.data)
    if "x_0" not in data:  # graphs without features: give the cells some
        for r in range(3):
            data[f"x_{r}"] = torch.randn(data.num_cells(r), 3)
    return case, data


def test_fuzz_topomodelx_drop_ins(fuzz_seeds):
    def make(seed, rng):
        case, data = _lifted(seed)
        malformed = MALFORMED_CALLS[int(rng.integers(len(MALFORMED_CALLS)))] if rng.integers(3) == 0 else None
        layer_kind = str(rng.choice(["can", "conv_square", "conv_cross"]))
        kind = str(rng.choice(["sparse", "dense"]))
        heads = int(rng.choice([1, 2]))

        def run():
            x_1 = data.x_1.float()
            n = x_1.shape[0]
            if layer_kind == "can":
                layer = CellAttentionLayer(3, 4, heads=heads, kind=kind, self_loops=bool(rng.integers(2)))
                args = [x_1, data.down_laplacian_1, data.up_laplacian_1]
                rows = n
            elif layer_kind == "conv_square":
                layer = AttentionConv(3, 4, heads=heads, kind=kind, update_func="relu")
                args = [x_1, data.adjacency_1]
                rows = n
            else:  # edges -> vertices through B_1, or vertices -> edges through B_1ᵀ (no x_target)
                layer = AttentionConv(3, 4, heads=heads, kind=kind)
                args = [data.x_0.float(), data.incidence_1.t()] if rng.integers(2) else [x_1, data.incidence_1, data.x_0.float()]
                rows = args[1].shape[0]
            if malformed == "wrong_shape":
                args[1] = torch.zeros(rows + 1, args[0].shape[0] + 2).to_sparse()
            elif malformed == "sparse_features":
                args[0] = args[1]
            elif malformed == "wrong_width":
                args[0] = torch.randn(args[0].shape[0], 5)
            elif malformed == "not_a_tensor":
                args[1] = args[1].to_dense().tolist()
            out = layer(*args)
            assert out.shape == (rows, 4), f"output {tuple(out.shape)}, expected ({rows}, 4)"
            cases.assert_finite("output", out)
            out.sum().backward()
            for name, p in layer.named_parameters():
                if p.grad is not None:
                    cases.assert_finite(f"grad {name}", p.grad)
            return out

        expect = cases.REJECT if malformed else cases.ACCEPT
        return f"{layer_kind}/{kind}/heads={heads}/{malformed} {case.description}", expect, run

    cases.run_cases(fuzz_seeds, "TopoModelX drop-ins", make, offset=70_000)


def test_fuzz_liftings_with_edge_based_two_cells(fuzz_seeds):
    def make(seed, rng):
        case = cases.random_graph(seed, features=("float32", "float64", "int", "none", "nan"))
        method = str(rng.choice(["sum", "mean"]))
        feature_lifting = FeatureLifting(method, x2_from="edges")
        if rng.integers(2):
            lifting = CellCycleLifting(feature_lifting=feature_lifting, self_loops="drop")
        else:
            lifting = SimplicialCliqueLifting(feature_lifting=feature_lifting, self_loops="drop")
        expect = case.expect
        if expect == cases.ACCEPT and "int" in case.kinds:
            expect = cases.EITHER  # integer codes need categorical_cardinalities: a clear refusal is fine

        def run():
            data = cases.quietly(lifting, case.data.clone())
            if "x_2" not in data:
                assert "x_0" not in data, "x_0 lifted but no x_2"
                return data
            b2 = data.boundary_matrices(signed=False)[1].toarray() != 0
            x_1 = data.x_1.double().numpy()
            expected = b2.T.astype(np.float64) @ x_1  # TopoBench: x_2 = |B_2|ᵀ x_1
            if method == "mean":
                expected = expected / np.clip(b2.sum(0), 1, None)[:, None]
            got = data.x_2.double().numpy()
            assert got.shape == expected.shape, f"x_2 {got.shape} != {expected.shape}"
            assert np.allclose(got, expected, rtol=1e-4, atol=1e-4), "x_2 is not |B_2|ᵀ x_1"
            return data

        return f"{type(lifting).__name__}/{method} {case.description}", expect, run

    cases.run_cases(fuzz_seeds, "x2_from='edges' in the liftings", make, offset=71_000)


def test_fuzz_to_toponetx_of_combinatorial_complexes(fuzz_seeds):
    def make(seed, rng):
        cc = cases.combinatorial_complex(seed)
        target = str(rng.choice(["cell", "simplicial", "combinatorial"]))

        def run():
            data = from_toponetx(cc)
            try:
                back = to_toponetx(data, target)
            except ValueError as error:
                message = str(error)
                assert re.search(r"rank[- ]\d", message), f"the refusal names no cell: {message}"
                holders = re.findall(r"'(cell|simplicial|combinatorial)'", message.split("complex_type=")[-1])
                assert holders and target not in holders, f"no other complex type offered: {message}"
                for holder in holders:  # the offered types really hold the complex
                    again = from_toponetx(to_toponetx(data, holder), max_rank=data.max_rank)
                    assert torch.equal(again.shape, data.shape), f"{holder}: {again.shape} != {data.shape}"
                raise
            assert tuple(back.shape)[:1] == (data.num_cells(0),), f"{back.shape}"
            return back

        expect = cases.ACCEPT if target == "combinatorial" else cases.EITHER
        return f"to {target} shape={list(cc.shape)}", expect, run

    cases.run_cases(fuzz_seeds, "to_toponetx of combinatorial complexes", make, offset=72_000)
