"""What README.md, CONTRIBUTING.md and docs/ say about signatures, paths and examples is true."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TOPOMODELX_GUIDE = ROOT / "docs" / "guide" / "topomodelx.md"


def _positional(cls) -> list[str]:
    return [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != "self" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def test_model_constructors_take_only_widths_positionally():
    from topomodelx_attention.nn.cell import CellularTransformer
    from topomodelx_attention.nn.graph import OrderKTokenGT, TokenGT
    from topomodelx_attention.nn.simplicial import NSimplicialTransformer
    from topomodelx_attention.nn.topomodelx import AttentionConv, CellAttentionLayer

    widths = ["in_channels", "hidden_channels", "out_channels"]
    for cls in (CellularTransformer, OrderKTokenGT, NSimplicialTransformer):
        assert _positional(cls) == widths, cls.__name__
    assert _positional(TokenGT) == ["in_channels", "edge_channels", "hidden_channels", "out_channels"]
    for cls in (AttentionConv, CellAttentionLayer):
        assert _positional(cls) == ["in_channels", "out_channels"], cls.__name__


def test_building_blocks_take_heads_positionally_as_the_readme_says():
    from topomodelx_attention.nn.attention import MultiHeadAttention
    from topomodelx_attention.nn.simplicial import NSimplicialAttention, NSimplicialTransformerLayer

    assert _positional(MultiHeadAttention) == ["in_channels", "out_channels", "heads"]
    for cls in (NSimplicialAttention, NSimplicialTransformerLayer):
        assert _positional(cls) == ["channels", "heads", "order"], cls.__name__
    text = " ".join(README.read_text().split())
    assert "`MultiHeadAttention(in_channels, out_channels, heads)`" in text
    assert "`NSimplicialTransformerLayer(channels, heads, order)`" in text
    assert "every constructor option after the widths is keyword-only" not in text


def test_orderk_tokengt_needs_node_identifiers_as_documented():
    import toponetx as tnx
    import torch

    from topomodelx_attention.data import from_toponetx
    from topomodelx_attention.nn.graph import OrderKTokenGT
    from topomodelx_attention.transforms import OrthogonalRandomNodeId

    hypergraph = tnx.CombinatorialComplex()
    for cell in ([0, 1, 2], [1, 3]):
        hypergraph.add_cell(cell, rank=1)
    data = from_toponetx(hypergraph, features={0: torch.randn(4, 3), 1: torch.randn(2, 3)})
    model = OrderKTokenGT([3, 3], 16, 2, n_layers=1, heads=2)
    with pytest.raises(ValueError, match="node_id"):
        model(data)  # "on any ComplexData" alone is not enough
    assert model(OrthogonalRandomNodeId(dim=16)(data.clone())).shape == (1, 2)
    assert "node identifiers" in " ".join(README.read_text().split())
    assert "once it carries node identifiers" in " ".join(OrderKTokenGT.__doc__.split())


def test_topomodelx_drop_in_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", TOPOMODELX_GUIDE.read_text(), flags=re.S)
    block = next(b for b in blocks if "CellAttentionLayer" in b and "AttentionConv" in b)
    exec(compile(block, "docs/guide/topomodelx.md (drop-ins)", "exec"), {})
    assert capsys.readouterr().out.split("\n")[:2] == ["torch.Size([6, 16])", "torch.Size([5, 3])"]


DEVELOPER_PATH = re.compile(r"(?<![\w.])/(work|tmp|root|home)/")


def test_docs_and_benchmarks_hold_no_developer_machine_paths():
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    for folder in ("benchmarks", "tutorials", "docs"):
        files += [
            p for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix in (".md", ".rst", ".py", ".ipynb", ".csv", ".yaml", ".txt")
            and "_build" not in p.relative_to(ROOT).parts
        ]
    found = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()[:80]}"
        for path in files
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if DEVELOPER_PATH.search(line)
    ]
    assert not found, found


@pytest.mark.parametrize("page", ["data_model", "transforms"])
def test_user_guide_examples_run(page, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "guide" / f"{page}.md").read_text(), flags=re.S)
    assert blocks, page
    for block in blocks:
        exec(compile(block, f"docs/guide/{page}.md", "exec"), {})
    printed = capsys.readouterr().out
    if page == "data_model":
        assert printed.split("\n")[0] == "6 torch.Size([6, 2])"  # as the comment in the page says
    else:
        assert "torch.Size([1, 8]) torch.Size([4, 4])" in printed
