"""Test helpers: tiny generated graphs and complexes (no files from ../shared)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import toponetx as tnx
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from topomodelx_attention.data import ComplexData, from_toponetx

HARNESS_MODELS = (
    "cellular_transformer", "gin", "cwn", "sccnn", "tokengt", "tokengt_cell", "n_simplicial",
    "gine", "gps", "graph_transformer", "mlp",
)
"""Every model of the harness registry (the harness tests check that none is missing)."""


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
"""The benchmark scripts of the checkout: tests run them as commands (:func:`run_benchmark`), never import them."""


def run_benchmark(name: str, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``benchmarks/<name>.py ARGS`` in a fresh interpreter; its exit status, stdout and stderr.

    The checkout is put first on ``PYTHONPATH`` so that the script imports this package.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCHMARKS.parent), os.environ.get("PYTHONPATH")]))}
    env.pop("TOPOMODELX_ATTENTION_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
    )


def graph_from_edges(edges, num_nodes=None, feature_dim=2, seed=0, **attrs) -> Data:
    """PyG graph (both directions) with asymmetric random float vertex features."""
    edge_index = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
    if num_nodes is None:
        num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
    edge_index = to_undirected(edge_index, num_nodes=num_nodes)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, feature_dim, generator=generator)
    return Data(x=x, edge_index=edge_index, **attrs)


def random_cell_complex(seed: int, n: int = 9, p: float = 0.35) -> tnx.CellComplex:
    """Random graph with its cycle basis as 2-cells, random labels, an isolated vertex."""
    rng = np.random.default_rng(seed)
    graph = nx.gnp_random_graph(n, p, seed=int(rng.integers(1 << 30)))
    labels = rng.permutation(100)[: n + 1]
    mapping = {i: int(labels[i]) for i in range(n)}
    graph = nx.relabel_nodes(graph, mapping)
    cc = tnx.CellComplex()
    for node in graph.nodes:
        cc.add_node(node)
    cc.add_node(int(labels[n]))
    for u, v in graph.edges:
        cc.add_edge(u, v)
    for cycle in nx.cycle_basis(graph):
        if len(cycle) >= 3:
            cc.add_cell(cycle, rank=2)
    return cc


def random_simplicial_complex(seed: int, n: int = 8, p: float = 0.5) -> tnx.SimplicialComplex:
    """Clique complex (up to tetrahedra) of a random graph."""
    graph = nx.gnp_random_graph(n, p, seed=seed)
    simplices = [c for c in nx.enumerate_all_cliques(graph) if len(c) <= 4]
    return tnx.SimplicialComplex(simplices)


def simplicial_complex_datas(
    complexes: list[tnx.SimplicialComplex], channels: int, max_rank: int
) -> list[ComplexData]:
    """``ComplexData`` (float64) of every complex, with ``randn`` vertex features of width
    ``channels`` drawn from torch's global generator, complex after complex."""
    return [
        from_toponetx(
            c,
            features={0: torch.randn(len(list(c.skeleton(0))), channels, dtype=torch.float64)},
            max_rank=max_rank,
            dtype=torch.float64,
        )
        for c in complexes
    ]


def random_coalesced(rows: int, cols: int, nnz: int, seed: int) -> torch.Tensor:
    """A coalesced float64 ``(rows, cols)`` sparse COO matrix from ``nnz`` random (possibly
    repeated) entries drawn under ``seed``.
    """
    gen = torch.Generator().manual_seed(seed)
    index = torch.stack(
        [torch.randint(0, rows, (nnz,), generator=gen), torch.randint(0, cols, (nnz,), generator=gen)]
    )
    values = torch.randn(nnz, generator=gen, dtype=torch.float64)
    return torch.sparse_coo_tensor(index, values, (rows, cols)).coalesce()


def assert_same_sparse(got: torch.Tensor, want: torch.Tensor) -> None:
    """``got`` is coalesced and equals the coalesced ``want`` exactly (shape, indices, values)."""
    assert got.is_coalesced() and tuple(got.shape) == tuple(want.shape), "shape/coalesced"
    assert torch.equal(got.indices(), want.indices()), "indices differ"
    assert torch.equal(got.values(), want.values()), "values differ"


def assert_same_complex(a, b) -> None:
    """Equal keys and values (sparse tensors compared densely, with their shapes)."""
    assert set(a.keys()) == set(b.keys())
    for key in a.keys():
        x, y = a[key], b[key]
        if isinstance(x, torch.Tensor):
            if x.is_sparse:
                assert x.shape == y.shape, key
                x, y = x.to_dense(), y.to_dense()
            assert torch.equal(x, y), key
        else:
            assert x == y, key


def to_double(data):
    """Copy of a ComplexData with every floating tensor in float64."""
    data = data.clone()
    for key in data.keys():
        value = data[key]
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            data[key] = value.double()
    return data


def permute_complex(data, perms: list[torch.Tensor]):
    """Relabel the cells of every rank consistently: new cell i of rank r is old cell perms[r][i].

    Permutes ``x_r``, ``pe_r``, ``node_id`` (rank 0) and every sparse neighbourhood (rows and
    columns by the permutation of their rank).
    """
    out = data.clone()
    inverse = [torch.argsort(p) for p in perms]
    for key in data.keys():
        value = data[key]
        if not isinstance(value, torch.Tensor):
            continue
        if value.is_sparse:
            name, rank = key.rsplit("_", 1)
            rank = int(rank)
            row_rank, col_rank = (rank - 1, rank) if "incidence" in name else (rank, rank)
            value = value.coalesce()
            idx = value.indices()
            rows = inverse[row_rank][idx[0]] if row_rank >= 0 else idx[0]
            cols = inverse[col_rank][idx[1]]
            out[key] = torch.sparse_coo_tensor(torch.stack([rows, cols]), value.values(), value.shape).coalesce()
        elif key.startswith(("x_", "pe_")):
            out[key] = value[perms[int(key.split("_")[1])]]
        elif key == "node_id":
            out[key] = value[perms[0]]
    return out



# ----------------------------------------------------------------------------------------------
# torch.compile checks shared by the model compile tests (torch._dynamo imported on first use)
# ----------------------------------------------------------------------------------------------
def load_mutag(count: int) -> list[Data]:
    """The first ``count`` MUTAG graphs (downloaded by PyG into a temporary folder)."""
    import tempfile

    from topomodelx_attention.datasets.tu import load_tu_dataset

    with tempfile.TemporaryDirectory() as root:
        return list(load_tu_dataset("MUTAG", root=root))[:count]


def batch_slice(items: list, size: int, start: int = 0):
    """One PyG ``Batch`` of ``items[start : start + size]``."""
    from torch_geometric.data import Batch

    return Batch.from_data_list(items[start : start + size])


def assert_compiled_trains_like_eager(model, compiled, items: list, sizes) -> None:
    """Batches of ``sizes`` consecutive ``items``: compiled outputs and gradients equal eager's, no recompile.

    Every batch runs eager ``model`` and ``compiled`` (forward, ``square().sum().backward()``);
    dynamo raises on any recompilation. The caller resets dynamo and checks its counters.
    """
    import torch._dynamo

    start = 0
    with torch._dynamo.config.patch(error_on_recompile=True):
        for size in sizes:
            batch = batch_slice(items, size, start=start)
            start += size
            runs = []
            for fn in (model, compiled):
                model.zero_grad()
                out = fn(batch)
                out.square().sum().backward()
                runs.append([out.detach()] + [p.grad for p in model.parameters() if p.grad is not None])
            assert runs[1][0].shape == (size, 2) and len(runs[1]) == len(runs[0]) > 1
            for got, want in zip(runs[1], runs[0], strict=True):
                torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-7)


#: Batch sizes of the compile tests: the warm-up batch, then two more sizes.
COMPILE_SIZES = (5, 8, 3)


def compile_graphs() -> list[Data]:
    """MUTAG graphs enough for one batch of every size in :data:`COMPILE_SIZES`, shifted by one."""
    return load_mutag(max(COMPILE_SIZES) + len(COMPILE_SIZES) + 1)


def assert_compiles_across_sizes(model, graphs: list, out_channels: int) -> list:
    """One graph without a break on a prepared batch, then one frame for every batch size.

    The batches are ``graphs[i : i + size]`` for the i-th size of :data:`COMPILE_SIZES`;
    returns their prepared inputs (:func:`assert_no_recompile`).
    """
    assert_one_graph(model, model.prepare(batch_slice(graphs, COMPILE_SIZES[0])))
    batches = [(size, batch_slice(graphs, size, start=i)) for i, size in enumerate(COMPILE_SIZES)]
    return assert_no_recompile(model, batches, out_channels)


def assert_one_graph(model, inputs) -> None:
    """``model(inputs)`` traces into exactly one graph, without a graph break."""
    import torch._dynamo

    explanation = torch._dynamo.explain(model)(inputs)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    torch._dynamo.reset()


def assert_no_recompile(model, batches, out_channels: int) -> list:
    """Compile ``model`` once (dynamic, duck sizing off) and run it on every ``(size, batch)``.

    Every output must have ``size`` rows of ``out_channels`` and equal the eager model's, and
    one compiled frame must serve every batch size. Returns the prepared inputs.
    """
    import torch._dynamo
    import torch._dynamo.testing
    import torch.fx.experimental._config as fx_config

    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(model, backend=counter, dynamic=True)
    prepared = []
    with fx_config.patch(use_duck_shape=False):
        for size, batch in batches:
            inputs = model.prepare(batch)
            prepared.append(inputs)
            got = compiled(inputs)
            assert got.shape == (size, out_channels)
            torch.testing.assert_close(got, model(batch), atol=1e-5, rtol=1e-5)
    assert counter.frame_count == 1  # one graph for every batch size
    torch._dynamo.reset()
    return prepared


def assert_one_frame_on_raw_batches(model, batches, out_channels: int, dynamic: bool | None) -> None:
    """``torch.compile(model, dynamic=dynamic)`` called on raw ``(size, batch)`` pairs, as a user does.

    Every output has ``size`` rows of ``out_channels`` and equals the eager model's, and one
    compiled frame (the one after ``prepare``'s break) serves every size: a recompile raises.
    """
    import torch._dynamo
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(model, backend=counter, dynamic=dynamic)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for size, batch in batches:
            got = compiled(batch)
            assert got.shape == (size, out_channels)
            torch.testing.assert_close(got, model(batch), atol=1e-5, rtol=1e-5)
    assert counter.frame_count == 1
    torch._dynamo.reset()


def small_token_model(cls, kind: str = "dense", **options):
    """The seeded, double, eval-mode token model (``TokenGT`` / ``OrderKTokenGT``) of the tests.

    Width 16, 2 layers, 4 heads, output width 2; ``kind="linear"`` a 32-feature Performer.
    ``options`` (the model's own widths and options) are added and override these.
    """
    torch.manual_seed(0)
    defaults = {
        "hidden_channels": 16,
        "out_channels": 2,
        "n_layers": 2,
        "heads": 4,
        "kind": kind,
        "kernel_options": {"num_random_features": 32} if kind == "linear" else None,
    }
    return cls(**{**defaults, **options}).double().eval()


def assert_compiled_gradients_match(model, inputs) -> None:
    """Through ``aot_eager``: the same parameter gradients of ``sum(model(inputs)²)`` as eager."""
    import torch._dynamo

    compiled = torch.compile(model, backend="aot_eager", dynamic=True)
    grads = []
    for fn in (model, compiled):
        model.zero_grad()
        fn(inputs).square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def single_thread():
    """One intra-op thread (restored after every test): on tiny inputs on a loaded machine the
    thread pool's synchronisation costs 10-100x the actual work. Used autouse by the conftests
    that import it (tests/nn/graph, tests/nn/topomodelx, tests/fuzz).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
