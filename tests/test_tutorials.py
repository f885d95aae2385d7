"""Execute every notebook of tutorials/ (nbclient, kernel python3, MPLBACKEND=Agg)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
TIMEOUT_S = 240  # per cell; each notebook is meant to finish in well under 2 minutes


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TOPOMODELX_ATTENTION_DATA", str(tmp_path / "cache"))  # no ~/.cache writes
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [
        output for cell in notebook.cells if cell.cell_type == "code"
        for output in cell.get("outputs", []) if output.get("output_type") == "error"
    ]
    assert not errors


def test_there_are_tutorials():
    assert len(NOTEBOOKS) >= 5


def _source(name: str) -> str:
    notebook = nbformat.read(TUTORIALS / name, as_version=4)
    return "\n".join(cell.source for cell in notebook.cells)


def test_tutorial_one_says_its_number_is_no_benchmark_result():
    text = " ".join(_source("01_cellular_transformer_mutag.ipynb").split())
    assert "15 epochs" in text and "not a benchmark result" in text


def test_topomodelx_tutorial_uses_the_drop_ins_and_the_input_mapping():
    text = _source("04_topomodelx_hybrid.ipynb")
    for name in ("topomodelx_inputs", "CellAttentionLayer.from_can_layer", "AttentionConv", "CAN(",
                 "CellularTransformerLayer", "plt."):
        assert name in text, name


def test_toponetx_tutorial_covers_every_complex_with_apis_of_both_toponetx_versions():
    text = _source("05_toponetx_in_and_out.ipynb")
    for name in ("tnx.CellComplex(", "tnx.SimplicialComplex(", "tnx.CombinatorialComplex(",
                 "hypergraph", "from_toponetx(", "to_toponetx(", "CellCycleLifting", "plt."):
        assert name in text, name
    for name in (".boundary", "maxdim", "graph_2_"):  # absent from TopoNetX 0.2 or 0.4
        assert name not in text, name


def test_graphuniverse_tutorial_trains_every_model_family_on_a_tiny_node_task():
    text = _source("06_graphuniverse_node_tasks.ipynb")
    for name in ("generation_parameters(", "load_family(", "community_detection", "compose_config(",
                 "run_experiment(", '"cellular_transformer"', '"tokengt_cell"', '"n_simplicial"',
                 '"gps"', "seeds=[0]", "trainer.max_epochs=3", "plt."):
        assert name in text, name
    assert "smoke run, not a benchmark" in " ".join(text.split())
    assert "N_GRAPHS, N_NODES = 12, [15, 30]" in text  # tiny: the notebook must stay fast


def test_topobench_tutorial_dry_runs_the_contribution_and_calls_the_backbone():
    text = _source("07_topobench_contribution.ipynb")
    for name in ('"topobench", "contribute"', '"--dry-run"', "contribute(checkout", "dry_run=True",
                 "CellularTransformerBackbone(", "neighborhood_keys", "CellCycleLifting",
                 "topobench/nn/backbones/{domain}/{model}.py", "test/pipeline/test_pipeline.py"):
        assert name in text, name
    assert "import topobench" not in text  # no TopoBench install needed or used
