"""Dense attention checks its quadratic size before allocating.

General cellular attention with ``kind="dense"`` on 6·10⁴ cells would ask torch for 14 GB: the
size ``B × heads × Lt × Ls × bytes`` is checked against ``memory_budget`` first and the
``ValueError`` says what to use instead.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx
import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges
from topomodelx_attention.nn.attention import DenseKernel, dense_attention, dense_attention_weights
from topomodelx_attention.nn.attention import dense as dense_module
from topomodelx_attention.nn.attention.dense import check_dense_size, dense_attention_bytes
from topomodelx_attention.nn.cell import CellularTransformer
from topomodelx_attention.transforms import CellCycleLifting

ROOT = Path(__file__).resolve().parents[3]
N_LARGE = 40_000  # one (1, 1, n, n) float32 bias: 6.4 GB > the default 4 GiB budget


def diagonal_bias(n):
    index = torch.arange(n).repeat(2, 1)
    return torch.sparse_coo_tensor(index, torch.ones(n), (n, n)).coalesce()


def test_unchecked_dense_attention_on_a_large_complex_fails_in_torch():
    """The unprotected path: with the check disabled torch's allocation fails (2.5 GB more allowed)."""
    script = textwrap.dedent(
        f"""
        import resource
        import torch
        from topomodelx_attention.nn.attention import dense_attention
        # 2.5 GB beyond what the imports mapped (a CUDA build of torch maps more than that itself)
        mapped = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (mapped * 1024 + 2500 * 2**20, resource.RLIM_INFINITY))
        n = {N_LARGE}
        q = torch.randn(n, 1, 4)
        index = torch.arange(n).repeat(2, 1)
        bias = torch.sparse_coo_tensor(index, torch.ones(n), (n, n))
        dense_attention(q, q, q, bias=bias, memory_budget=2**62)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode != 0
    assert "RuntimeError" in result.stderr and "allocate" in result.stderr


def test_dense_attention_refuses_a_large_complex_before_allocating():
    q = torch.randn(N_LARGE, 1, 4)
    with pytest.raises(ValueError, match=r"\(1, 1, 40000, 40000\).*5\.96 GiB.*kind=\"sparse\".*kind=\"linear\""):
        dense_attention(q, q, q, bias=diagonal_bias(N_LARGE))
    with pytest.raises(ValueError, match="memory_budget"):
        dense_attention_weights(q, q)
    # the same shapes under a larger budget pass the check (nothing is allocated by it)
    check_dense_size(1, 1, N_LARGE, N_LARGE, torch.float32, memory_budget=7 * 2**30)


def test_budget_counts_the_padded_batch_heads_and_dtype(monkeypatch):
    assert dense_attention_bytes(3, 4, 10, 20, torch.float64) == 3 * 4 * 10 * 20 * 8
    q = torch.randn(30, 4, 8, dtype=torch.float64)
    batch = torch.tensor([0] * 25 + [1] * 5)  # padded to (2, 4, 25, 25) float64: 40,000 bytes
    dense_attention(q, q, q, batch, batch, memory_budget=40_000)
    with pytest.raises(ValueError, match=r"\(2, 4, 25, 25\).*a smaller batch"):
        dense_attention(q, q, q, batch, batch, memory_budget=39_999)
    kernel = DenseKernel(4, 8, neighborhood_bias=False, memory_budget=39_999)
    with pytest.raises(ValueError, match="DenseKernel"):
        kernel(q, q, q, batch_target=batch, batch_source=batch)
    monkeypatch.setattr(dense_module, "DENSE_MEMORY_BUDGET", 39_999)  # read at call time
    with pytest.raises(ValueError, match="DENSE_MEMORY_BUDGET"):
        dense_attention(q, q, q, batch, batch)
    with pytest.raises(TypeError, match="memory_budget"):
        dense_attention(q, q, q, batch, batch, memory_budget=1.5)
    with pytest.raises(ValueError, match="memory_budget"):
        DenseKernel(4, 8, memory_budget=0)


def lifted(n, m, seed=0):
    graph = nx.gnm_random_graph(n, m, seed=seed)
    return CellCycleLifting()(graph_from_edges(list(graph.edges()), num_nodes=n, feature_dim=3))


@pytest.mark.parametrize("attention", ["general", "pairwise"])
def test_cellular_transformer_dense_names_the_alternatives(monkeypatch, attention):
    data = lifted(60, 120)  # 60 + 120 + 61 = 241 cells
    # every rank read out: the one layer attends into every rank (the largest is the edges)
    model = CellularTransformer(
        [3, 3, 3], 16, 2, n_layers=1, heads=4, attention=attention, kind="dense",
        readout_options={"ranks": "all"},
    )
    model(data)  # within the default budget
    cells = sum(data.cell_counts())
    longest = cells if attention == "general" else max(data.cell_counts())
    monkeypatch.setattr(dense_module, "DENSE_MEMORY_BUDGET", 4 * longest * longest * 4 - 1)
    with pytest.raises(ValueError, match=rf"\(1, 4, {longest}, {longest}\).*kind=\"sparse\""):
        model(data)
    for kind in ("sparse", "linear"):  # the alternatives the message names work on it
        alternative = CellularTransformer([3, 3, 3], 16, 2, n_layers=1, heads=4, attention=attention, kind=kind)
        assert torch.isfinite(alternative(data)).all()


def test_packaged_batch_sizes_stay_within_the_default_budget():
    """A batch of 256 molecule-sized complexes (the paper configs' batch) passes the check."""
    data = Batch.from_data_list([lifted(38, 42, seed=s) for s in range(4)] * 64)
    heads, cells = 8, max(int(c) for c in data.shape.sum(1))
    check_dense_size(256, heads, cells, cells, torch.float32)
