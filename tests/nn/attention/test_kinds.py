"""Kernels chosen by capability: global arrows, composites, the CAN drop-in; no name comparisons."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Batch

from tests.helpers import to_double
from tests.nn.cell.test_cellular_transformer import complexes
from topomodelx_attention.nn.attention import (
    COMPOSITE_KINDS,
    KERNELS,
    AttentionKernel,
    attends_all_pairs,
    block_kind,
    dense_attention,
    global_kind,
    kernel_kinds,
    register_composite,
    register_kernel,
)
from topomodelx_attention.nn.cell import CellularTransformer, CellularTransformerLayer
from topomodelx_attention.nn.topomodelx import CellAttentionLayer

PACKAGE = Path(__file__).resolve().parents[3] / "topomodelx_attention"

#: Comparisons with a kernel's name that are about something else (path → why).
NOT_KERNELS = {
    "datasets/cache.py": "a cached tensor's storage ('dense' / 'sparse' tensor), not a kernel",
}


@pytest.fixture
def probe():
    """A new all-pairs kernel (no neighbourhood, no bias) that records its calls."""
    calls: list[int] = []

    @register_kernel
    class Probe(AttentionKernel):
        kind = "all_pairs_probe"
        needs_layout = True

        def attend(self, query, key, value, tokens):
            calls.append(query.shape[0])
            return dense_attention(
                query, key, value, tokens.batch_target, tokens.batch_source,
                scale=self.scale, num_complexes=tokens.num_complexes, layout=tokens.layout,
            )

    Probe.calls = calls
    try:
        yield Probe
    finally:
        KERNELS.pop(Probe.kind, None)
        COMPOSITE_KINDS.pop("probe_mixed", None)


def test_the_registry_answers_by_capability():
    assert attends_all_pairs("dense") and attends_all_pairs("linear")
    assert not attends_all_pairs("sparse")
    assert [global_kind(k) for k in ("sparse", "dense", "linear", "mixed")] == [
        "dense", "dense", "linear", "dense"
    ]
    assert kernel_kinds("mixed") == ("dense", "sparse") and kernel_kinds("sparse") == ("sparse",)
    assert block_kind("mixed", within=True) == "dense"
    assert block_kind("mixed", within=False) == "sparse"
    assert block_kind("linear", within=False) == "linear"
    with pytest.raises(ValueError, match=r"kind must be one of .*'mixed'"):
        kernel_kinds("flash")
    with pytest.raises(ValueError, match="already registered"):
        register_composite("dense", within="dense", across="sparse")


def test_a_new_all_pairs_kernel_serves_the_global_arrows(probe):
    diagram = ["0->0:adjacency_0", "1->0:incidence_1", "0->0:all_0"]
    layer = CellularTransformerLayer(8, heads=2, kind=probe.kind, tensor_diagram=diagram)
    assert type(layer.blocks["0->0:all_0"].kernel) is probe
    # a mask kernel keeps dense global arrows
    sparse = CellularTransformerLayer(8, heads=2, kind="sparse", tensor_diagram=diagram)
    assert sparse.blocks["0->0:all_0"].kernel.kind == "dense"
    # a composite of the new kernel within ranks: its global arrows are the new kernel
    register_composite("probe_mixed", within=probe.kind, across="sparse")
    torch.manual_seed(0)
    model = CellularTransformer(
        [3, 3, 3], 8, 2, heads=2, kind="probe_mixed", tensor_diagram=diagram
    ).double()
    blocks = model.layers[0].blocks
    assert type(blocks["0->0:all_0"].kernel) is probe
    assert type(blocks["0->0:adjacency_0"].kernel) is probe
    assert model.layers[0].fused_kernel.kind == "sparse"  # the arrow across ranks
    probe.calls.clear()
    out = model(Batch.from_data_list([to_double(c) for c in complexes()]))
    assert out.shape == (3, 2) and torch.isfinite(out).all() and probe.calls


def test_the_can_drop_in_uses_a_new_all_pairs_kernel(probe):
    layer = CellAttentionLayer(3, 8, heads=2, kind=probe.kind).double()
    assert {type(b.kernel) for b in layer.layer.blocks.values()} == {probe}
    data = to_double(complexes()[0])
    probe.calls.clear()
    out = layer(data.x_1, data.down_laplacian_1, data.up_laplacian_1)
    assert out.shape == (data.x_1.shape[0], 8) and probe.calls
    with pytest.raises(ValueError, match="composite"):
        CellAttentionLayer(3, 8, kind="mixed")


def _kernel_name_comparisons(path: Path, names: set[str]) -> list[str]:
    """``x == "dense"``, ``kind in ("dense", "linear")``, ``case "mixed"`` in one module."""
    found = []

    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(e) for e in node.elts)
        return False

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(named(n) for n in (node.left, *node.comparators)):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.match_case) and any(
            named(n) for n in ast.walk(node.pattern)
        ):
            found.append(f"{path.relative_to(PACKAGE)}:{node.pattern.lineno}: case")
    return found


def test_no_module_compares_kernel_names():
    """Kernels are chosen by capability (``nn.attention.kinds``), never by comparing their names."""
    names = set(KERNELS) | set(COMPOSITE_KINDS)
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in NOT_KERNELS
        for hit in _kernel_name_comparisons(path, names)
    ]
    assert not found, "\n".join(found)
