"""Fuzz: node-level outputs of every harness model, node labels, GraphUniverse family cache files.

* node outputs: random / degenerate batches (empty complexes, single vertices, no edges,
  isolated vertices) through every harness model built for a node-level task must give one
  finite row per vertex and finite gradients; NaN / Inf / 1e30 vertex features must be rejected;
* node labels: a node-level data set whose labels do not cover the vertices must be rejected;
* family cache: a truncated, byte-flipped or rewritten cache file must be rejected with a
  ``ValueError`` naming it, or (bytes nothing reads) load unchanged, never load altered data.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from tests.fuzz.cases import (
    ACCEPT,
    EITHER,
    REJECT,
    assert_finite,
    finite_float_graph,
    quietly,
    run_cases,
)
from topomodelx_attention.data import ComplexDataLoader
from topomodelx_attention.datasets import graphuniverse as gu
from topomodelx_attention.harness.models import build_model
from topomodelx_attention.harness.prepare import DatasetInfo, _infer_info
from topomodelx_attention.transforms import (
    CellCycleLifting,
    CellularRandomWalkPE,
    LaplacianNodeId,
    SimplicialCliqueLifting,
)

WIDTH, OUT, PE, NODE_ID = 8, 3, 3, 4
MODELS = {  # name: (lifting, needs a PE, needs node identifiers)
    "cellular_transformer": (lambda: CellCycleLifting(max_cell_length=8), True, False),
    "tokengt": (lambda: SimplicialCliqueLifting(complex_dim=1), False, True),
    "tokengt_cell": (lambda: CellCycleLifting(max_cell_length=8), False, True),
    "n_simplicial": (lambda: SimplicialCliqueLifting(complex_dim=2), False, False),
    "gps": (lambda: SimplicialCliqueLifting(complex_dim=1), True, False),
    "gin": (lambda: SimplicialCliqueLifting(complex_dim=1), False, False),
    "gine": (lambda: SimplicialCliqueLifting(complex_dim=1), False, False),
    "graph_transformer": (lambda: SimplicialCliqueLifting(complex_dim=1), True, False),
    "cwn": (lambda: CellCycleLifting(max_cell_length=8), False, False),
    "sccnn": (lambda: SimplicialCliqueLifting(complex_dim=2), False, False),
}
NAMES = tuple(MODELS)


def _params(name: str) -> dict:
    params = {"hidden_channels": WIDTH, "n_layers": 1}
    if name in ("cellular_transformer", "tokengt", "tokengt_cell", "n_simplicial", "gps", "graph_transformer"):
        params["heads"] = 2
    if name in ("gine", "gps", "graph_transformer"):
        params["pe_hidden_channels"] = 4
    if name in ("tokengt", "tokengt_cell"):
        params["identifiers"] = "sum"
    return params


def test_fuzz_node_outputs_of_every_model(fuzz_seeds):
    def make(seed, rng):
        name = NAMES[(seed + int(rng.integers(len(NAMES)))) % len(NAMES)]
        make_lifting, use_pe, use_ids = MODELS[name]
        lifting = make_lifting()

        def one(i):
            data = lifting(finite_float_graph(seed * 17 + i, feature_dim=2, edge_attr=False).data)
            data.y = torch.from_numpy(rng.integers(0, OUT, data.num_cells(0)))
            if use_pe:
                data = CellularRandomWalkPE(PE)(data)
            if use_ids:
                data = LaplacianNodeId(NODE_ID)(data)
            return data

        items = quietly(lambda: [one(i) for i in range(int(rng.integers(1, 4)))])
        batch = next(iter(ComplexDataLoader(items, batch_size=len(items))))
        max_rank = items[0].max_rank
        info = DatasetInfo(
            "fuzz", "classification", OUT, [2] * (max_rank + 1), [None] * (max_rank + 1),
            PE if use_pe else None, "accuracy", node_id_channels=NODE_ID if use_ids else None,
            task_level="node",
        )
        how = str(rng.choice(["clean", "clean", "clean", "nan", "inf", "huge"]))
        expect = ACCEPT
        if how != "clean" and batch.x_0.shape[0]:
            x = batch.x_0.clone()
            x[int(rng.integers(x.shape[0])), int(rng.integers(x.shape[1]))] = {"nan": float("nan"), "inf": float("inf"), "huge": 1e30}[how]
            batch.x_0 = x
            expect = REJECT
        torch.manual_seed(seed)
        model = build_model(name, _params(name), info)

        def run():
            model.train(bool(batch.x_0.shape[0] > 1))  # BatchNorm statistics need 2 rows
            out = model(batch)
            n_0 = batch.x_0.shape[0]
            assert out.shape == (n_0, OUT), f"output {tuple(out.shape)}, expected {(n_0, OUT)}"
            assert_finite("node outputs", out)
            loss = F.cross_entropy(out, batch.y) if n_0 else out.sum()
            loss.backward()
            assert_finite("gradients", model)

        return f"{name} x_0:{how} shapes={batch.shape.tolist()}", expect, run

    run_cases(fuzz_seeds, "node outputs", make, offset=91_000)


def test_fuzz_node_labels_must_cover_the_vertices(fuzz_seeds):
    cfg = {"name": "fuzz", "loader": "tu", "task": "classification", "task_level": "node", "num_classes": 4}

    def make(seed, rng):
        lifting = SimplicialCliqueLifting(complex_dim=1)
        items = quietly(lambda: [lifting(finite_float_graph(seed * 7 + i, feature_dim=2).data) for i in range(3)])
        how = str(rng.choice(["right", "right", "short", "long", "graph_label", "column"]))
        expect = ACCEPT
        for i, c in enumerate(items):
            n = c.num_cells(0)
            c.y = torch.from_numpy(rng.integers(0, 4, n))
            if i == 1 and how == "short" and n:
                c.y, expect = c.y[:-1], REJECT
            elif i == 1 and how == "long":
                c.y, expect = torch.cat([c.y, c.y.new_zeros(1)]), REJECT
            elif i == 1 and how == "graph_label" and n != 1:
                c.y, expect = torch.tensor([1]), REJECT
            elif i == 1 and how == "column":
                c.y = c.y.view(-1, 1)  # (n, 1) is one label per vertex too

        def run():
            info = _infer_info(cfg, items, None)
            assert info.task_level == "node" and info.out_channels == 4

        return f"labels {how} n={[c.num_cells(0) for c in items]}", expect, run

    run_cases(fuzz_seeds, "node labels", make, offset=92_000)


@pytest.fixture(scope="module")
def family_file(tmp_path_factory):
    parameters = gu.generation_parameters("hi", "hi", "lo", n_graphs=3, family={"n_nodes_range": [5, 12]})
    family = gu.generate_family(parameters)
    path = tmp_path_factory.mktemp("family") / "family.pt"
    gu.save_family(family, parameters, path)
    return parameters, family, path.read_bytes()


def test_fuzz_family_cache_files(fuzz_seeds, family_file, tmp_path):
    parameters, family, original = family_file

    def make(seed, rng):
        data = bytearray(original)
        how = str(rng.choice(["clean", "truncate", "flip", "flip", "zero_block"]))
        expect = EITHER
        if how == "clean":
            expect = ACCEPT
        elif how == "truncate":
            data, expect = data[: int(rng.integers(0, len(data)))], REJECT
        elif how == "flip":
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
        else:
            start = int(rng.integers(len(data)))
            end = min(len(data), start + int(rng.integers(1, 64)))
            data[start:end] = bytes(end - start)
        path = tmp_path / f"case{seed}.pt"
        path.write_bytes(bytes(data))

        def run():
            try:
                loaded = gu.read_family(path, parameters)
            except gu.GraphUniverseCacheError as error:
                if str(path) not in str(error):
                    raise AssertionError(f"the error does not name the file: {error}") from error
                raise
            assert len(loaded) == len(family), "a damaged file loaded with other graphs"
            for a, b in zip(family, loaded):
                assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index), "altered data loaded"
                assert torch.equal(a.community, b.community) and torch.equal(a.triangles, b.triangles), "altered labels loaded"

        return f"family file {how} ({len(data)} bytes)", expect, run

    run_cases(fuzz_seeds, "family cache", make, offset=93_000)
