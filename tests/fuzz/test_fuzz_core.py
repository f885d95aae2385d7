"""Fuzz: the attention core's shape: kernels by name with their options, fused blocks.

* random ``kind`` / ``kernel_options`` / ``attention_dropout`` for every model that takes a
  kernel (CellularTransformer pairwise and general, its layer, TokenGT, OrderKTokenGT,
  MultiHeadAttention): options the kernel takes are ACCEPTED (finite outputs, one row per
  complex), an option it does not take or attention dropout on a kernel without weights is
  REJECTED with a ``ValueError`` naming the option — the same behaviour in every model;
* random sets of sparse blocks between random token groups: the fused call of the core equals
  one ``MultiHeadAttention`` call per block (outputs and input gradients).
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Batch

from tests.fuzz.cases import ACCEPT, REJECT, finite_float_graph, quietly, run_cases
from topomodelx_attention.nn.attention import KERNELS, MultiHeadAttention
from topomodelx_attention.nn.attention.fused import fused_sparse_attention, prepare_fused
from topomodelx_attention.nn.cell import CellularTransformer, CellularTransformerLayer
from topomodelx_attention.nn.graph import OrderKTokenGT, TokenGT
from topomodelx_attention.transforms import CellCycleLifting, LaplacianNodeId

WIDTH, OUT, NODE_ID = 8, 2, 4
#: Valid values of every kernel option (keyed by option name).
VALUES = {
    "scale": [None, 1.0, 0.5],
    "neighborhood_bias": [True],
    "bias_scale": ["per_head", "shared"],
    "learn_bias_scale": [True, False],
    "bias_scale_init": [1.0, 0.0],
    "num_random_features": [4, 16],
    "redraw_features_in_training": [False, True],
}
MODELS = ("ct_pairwise", "ct_general", "ct_layer", "tokengt", "order_k", "mha")


def _kinds(model: str) -> list[str]:
    kinds = ["sparse", "dense", "linear"]
    if model in ("ct_pairwise", "ct_layer"):
        kinds.append("mixed")
    if model in ("tokengt", "order_k"):
        kinds.remove("sparse")  # TokenGT attends to all tokens
    return kinds


def _accepted(kind: str) -> set[str]:
    kinds = ("dense", "sparse") if kind == "mixed" else (kind,)
    return {name for k in kinds for name in KERNELS[k].option_names()} - {"attention_dropout"}


def _options(model: str, kind: str, rng: np.random.Generator) -> tuple[dict, float, str]:
    """Random kernel options and attention dropout, and whether the model must take them."""
    accepted = sorted(_accepted(kind) & set(VALUES))
    if model in ("tokengt", "order_k"):
        accepted = [o for o in accepted if o != "neighborhood_bias"]  # TokenGT sets it
    options = {
        name: VALUES[name][int(rng.integers(len(VALUES[name])))]
        for name in accepted
        if rng.integers(2)
    }
    expect = ACCEPT
    if rng.integers(4) == 0:  # an option of another kernel
        foreign = sorted(set(VALUES) - _accepted(kind) - {"neighborhood_bias"})
        if foreign:
            name = foreign[int(rng.integers(len(foreign)))]
            options[name] = VALUES[name][0]
            expect = REJECT
    attention_dropout = float(rng.choice([0.0, 0.0, 0.2]))
    if attention_dropout and kind == "linear":
        expect = REJECT  # no attention weights: one clear error in every model
    return options, attention_dropout, expect


def _complexes(seed: int, size: int) -> list:
    out = []
    for i in range(size):
        graph = finite_float_graph(seed * 7 + i, feature_dim=3, edge_attr=False).data
        data = quietly(CellCycleLifting(max_cell_length=6), graph)
        out.append(LaplacianNodeId(NODE_ID)(data))
    return out


def test_fuzz_kernel_options_in_every_model(fuzz_seeds):
    def make(seed, rng):
        model_name = MODELS[int(rng.integers(len(MODELS)))]
        kinds = _kinds(model_name)
        kind = kinds[int(rng.integers(len(kinds)))]
        options, attention_dropout, expect = _options(model_name, kind, rng)
        items = _complexes(seed, int(rng.integers(1, 4)))
        batch = Batch.from_data_list(items)

        def run():
            torch.manual_seed(seed)
            common = dict(heads=2, kind=kind, kernel_options=options, attention_dropout=attention_dropout)
            if model_name.startswith("ct_") and model_name != "ct_layer":
                attention = "general" if model_name == "ct_general" else "pairwise"
                model = CellularTransformer([3, 3, 3], WIDTH, OUT, n_layers=1, attention=attention, **common)
                out = model.train()(batch)
            elif model_name == "ct_layer":
                layer = CellularTransformerLayer(WIDTH, max_rank=2, **common)
                x = [torch.randn(batch.num_cells(r), WIDTH) for r in range(3)]
                keys = {a.neighborhood for a in layer.arrows}
                out = torch.cat(layer(x, {k: batch[k] for k in keys}, [batch[f"batch_{r}"] for r in range(3)]))
                assert out.shape == (sum(batch.num_cells(r) for r in range(3)), WIDTH)
                out = out.sum(0, keepdim=True).expand(len(items), -1)
            elif model_name == "tokengt":
                graphs = Batch.from_data_list([LaplacianNodeId(NODE_ID)(
                    finite_float_graph(seed * 7 + i, feature_dim=3, edge_attr=False).data) for i in range(len(items))])
                out = TokenGT(3, 0, WIDTH, OUT, n_layers=1, node_id_dim=NODE_ID, **common).train()(graphs)
            elif model_name == "order_k":
                model = OrderKTokenGT([3, 3, 3], WIDTH, OUT, n_layers=1, node_id_dim=NODE_ID, identifiers="sum", **common)
                out = model.train()(batch)
            else:
                mha = MultiHeadAttention(WIDTH, WIDTH, 2, kind=kind if kind != "mixed" else "dense",
                                         kernel_options={**options, "attention_dropout": attention_dropout})
                x = torch.randn(batch.num_cells(0), WIDTH)
                reads = KERNELS[mha.kind].needs_neighborhood or KERNELS[mha.kind].accepts_bias
                out = mha(x, None, batch.adjacency_0 if reads else None, batch.batch_0, num_complexes=len(items))
                out = out.sum(0, keepdim=True).expand(len(items), -1)
            assert out.shape[0] == len(items), out.shape
            assert torch.isfinite(out).all()
            out.square().sum().backward()
            return out

        return f"{model_name} kind={kind} options={options} attention_dropout={attention_dropout}", expect, run

    run_cases(fuzz_seeds, "kernel options", make, offset=20_000)


def test_fuzz_fused_blocks_equal_per_block_calls(fuzz_seeds):
    def make(seed, rng):
        groups = int(rng.integers(1, 4))
        sizes = [int(rng.integers(0, 6)) for _ in range(groups)]
        sizes[int(rng.integers(groups))] = max(1, sizes[0])  # at least one non-empty group
        pairs = [
            (int(rng.integers(groups)), int(rng.integers(groups))) for _ in range(int(rng.integers(1, 6)))
        ]
        pairs = [(s, t) for s, t in pairs if sizes[s] and sizes[t]] or [(0, 0)]
        sizes[0] = max(sizes[0], 1)
        heads = int(rng.choice([1, 2]))
        bias = bool(rng.integers(2))
        density = float(rng.choice([0.0, 0.3, 1.0]))

        def run():
            gen = torch.Generator().manual_seed(seed)
            torch.manual_seed(seed)
            blocks = [MultiHeadAttention(4, 4, heads, bias=bias).double() for _ in pairs]
            masks = [
                (torch.rand(sizes[t], sizes[s], generator=gen) < density).double().to_sparse().coalesce()
                for s, t in pairs
            ]
            x = [torch.randn(n, 4, generator=gen, dtype=torch.float64, requires_grad=True) for n in sizes]
            prepared = prepare_fused(blocks, pairs, masks, sizes)
            got = fused_sparse_attention(x, blocks, pairs, prepared)
            expected = [None] * groups
            for block, (s, t), mask in zip(blocks, pairs, masks):
                out = block(x[t], x[s], mask)
                expected[t] = out if expected[t] is None else expected[t] + out
            for g, e in zip(got, expected):
                assert (g is None) == (e is None)
                if g is not None:
                    torch.testing.assert_close(g, e)
            present = [g for g in got if g is not None]
            grads = torch.autograd.grad(sum(g.sum() for g in present), x, allow_unused=True)
            reference = torch.autograd.grad(
                sum(e.sum() for e in expected if e is not None), x, allow_unused=True
            )
            for a, b in zip(grads, reference):
                assert (a is None) == (b is None)
                if a is not None:
                    torch.testing.assert_close(a, b)
            return got

        return f"sizes={sizes} pairs={pairs} heads={heads} bias={bias} density={density}", ACCEPT, run

    run_cases(fuzz_seeds, "fused blocks", make, offset=21_000)
