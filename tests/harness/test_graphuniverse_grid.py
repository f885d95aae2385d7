"""The GraphUniverse challenge grid: best-checkpoint (re-)tests on other data, the resumable runner, the ranking.

Tiny families (≤ 30 nodes) generated offline; the shared leaderboard is never read (a synthetic one is).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import run_benchmark
from topomodelx_attention.datasets import graphuniverse as gu
from topomodelx_attention.harness import compose_config, run_experiment
from topomodelx_attention.harness.models import build_model, get_spec
from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys
from topomodelx_attention.harness.training import best_checkpoint, evaluate_checkpoint

pytest.importorskip("graph_universe")

TINY = ["dataset.family.n_nodes_range=[10,30]"]


def _cfg(cache, *overrides):
    return compose_config(
        [*TINY, "dataset.n_graphs=10", "seeds=[0]", "trainer.max_epochs=2", "plot=false",
         "trainer.enable_progress_bar=false", f"paths.cache_dir={cache}", *overrides],
        dataset="graphuniverse", model="gin",
    )


def _test_split(cfg):
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cfg.paths.cache_dir)
    test = list(prepared.split(0)[2].complexes)
    prune_keys(test, get_spec("gin").keys(build_model("gin", cfg.model.params, prepared.info), prepared.info))
    return prepared, test


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny triangle-counting run: its config, output folder and result."""
    root = tmp_path_factory.mktemp("grid")
    cfg = _cfg(root / "cache", "dataset.task=triangle_counting", "dataset.avg_degree=hi")
    result = run_experiment(cfg, output_dir=root / "run", verbose=False)
    return cfg, root / "run", result


def test_best_checkpoint_is_retested_exactly(trained):
    cfg, out, result = trained
    checkpoint = best_checkpoint(out, 0)
    assert checkpoint.name == f"best-{result.seeds[0].best_epoch}.ckpt"
    prepared, test = _test_split(cfg)
    values = evaluate_checkpoint(cfg, prepared.info, checkpoint, test)
    # the re-test of the best checkpoint reproduces the run's own test (TopoBench's test_best_rerun_*)
    assert values["mse"] == pytest.approx(result.seeds[0].test, rel=1e-5)
    assert values["mse_per_triangle"] == pytest.approx(result.seeds[0].test_metrics["mse_per_triangle"], rel=1e-5)
    assert values["mse_per_triangle"] == pytest.approx(values["mse"] / sum(float(c.y) for c in test), rel=1e-5)


def test_the_weights_come_from_the_checkpoint(trained, tmp_path):
    cfg, out, _ = trained
    checkpoint = best_checkpoint(out, 0)
    prepared, test = _test_split(cfg)
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    for key, value in state["state_dict"].items():
        if value.is_floating_point():
            state["state_dict"][key] = torch.zeros_like(value)
    zeroed = tmp_path / "zeroed.ckpt"
    torch.save(state, zeroed)
    # a zero model predicts 0 triangles everywhere: MSE = mean of y², unlike the trained model
    values = evaluate_checkpoint(cfg, prepared.info, zeroed, test)
    expected = float(np.mean([float(c.y) ** 2 for c in test]))
    assert values["mse"] == pytest.approx(expected, rel=1e-5)
    assert values["mse"] != pytest.approx(evaluate_checkpoint(cfg, prepared.info, checkpoint, test)["mse"], rel=1e-3)


def test_ood_test_on_another_setting_uses_its_own_triangle_total(trained):
    cfg, out, _ = trained
    other = _cfg(cfg.paths.cache_dir, "dataset.task=triangle_counting", "dataset.avg_degree=hi", "dataset.homophily=hi")
    prepared, test = _test_split(other)
    values = evaluate_checkpoint(cfg, prepared.info, best_checkpoint(out, 0), test)
    params = gu.generation_parameters("hi", "hi", n_graphs=10, family={"n_nodes_range": [10, 30]})
    family = gu.load_family(params, cfg.paths.cache_dir)
    raw_test = [family[int(i)] for i in gu.challenge_split(10)[2]]
    total = gu.triangle_total(raw_test)  # networkx count on the generated graphs
    assert total > 0
    assert values["mse_per_triangle"] == pytest.approx(values["mse"] / total, rel=1e-5)


def test_missing_checkpoints_and_empty_data_are_refused(trained, tmp_path):
    cfg, out, _ = trained
    with pytest.raises(ValueError, match=r"seed_7.checkpoints.*found 0"):
        best_checkpoint(out, 7)
    prepared, test = _test_split(cfg)
    with pytest.raises(ValueError, match="does not exist"):
        evaluate_checkpoint(cfg, prepared.info, tmp_path / "none.ckpt", test)
    with pytest.raises(ValueError, match="at least one complex"):
        evaluate_checkpoint(cfg, prepared.info, best_checkpoint(out, 0), [])


# ----------------------------------------------------------------------------------------------
# harness.graphuniverse_grid (run by benchmarks/graphuniverse_grid.py)
# ----------------------------------------------------------------------------------------------
@pytest.fixture
def grid(tmp_path, monkeypatch):
    from topomodelx_attention.harness import graphuniverse_grid as module

    monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(module, "WORK", tmp_path / "work")
    return module


def _grid_args(tmp_path, *extra):
    return [
        "--models", "gin", "--tasks", "triangle_counting", "--settings", "h_lo_d_hi_pl_lo", "h_hi_d_hi_pl_hi",
        "--seeds", "42", "--n-graphs", "10", "--max-epochs", "1", "--cache-dir", str(tmp_path / "cache"),
        "--set", "dataset.family.n_nodes_range=[10,30]", "--live-code", *extra,
    ]


def test_grid_writes_challenge_rows_with_ood_and_resumes(grid, tmp_path, monkeypatch, capsys):
    assert grid.SETTINGS[:3] == ["h_lo_d_lo_pl_lo", "h_lo_d_lo_pl_hi", "h_lo_d_hi_pl_lo"] and len(grid.SETTINGS) == 12
    assert grid.main(_grid_args(tmp_path)) == 0
    path = tmp_path / "results" / "gin" / "results_n10_e1_f2718.json"  # not the protocol: never results.json
    data = json.loads(path.read_text())
    assert data["metadata"]["n_runs"] == 2 and data["metadata"]["train_seeds"] == [42]
    assert data["metadata"]["protocol"]["n_graphs"] == 10 and data["metadata"]["protocol"]["family_seed"] == 2718
    rows = {r["run_slug"]: r for r in data["results"]}
    assert list(rows) == ["h_lo_d_hi_pl_lo", "h_hi_d_hi_pl_hi"]  # the challenge's order
    row = rows["h_hi_d_hi_pl_hi"]
    assert (row["experiment"], row["train_seed"], row["homophily"], row["avg_degree"], row["power_law"]) == (
        "triangle_counting", 42, "h_hi", "d_hi", "pl_hi",
    )
    params = gu.generation_parameters("hi", "hi", "hi", n_graphs=10, family={"n_nodes_range": [10, 30], "seed": grid.SELECTION_FAMILY_SEED})
    family = gu.load_family(params, tmp_path / "cache")
    total = gu.triangle_total([family[int(i)] for i in gu.challenge_split(10)[2]])
    assert row["test_triangles_total_structural"] == total
    assert row["test_mse_by_total_triangles"] == pytest.approx(row["test_best_rerun_mse"] / total, rel=1e-5)
    assert row["test_best_rerun_accuracy"] is None
    assert list(row["ood_test"]) == [s for s in grid.SETTINGS if s != "h_hi_d_hi_pl_hi"]
    # the OOD test of a setting is its whole test split, normalised by that split's own triangle total
    other = gu.load_family(gu.generation_parameters("lo", "hi", "lo", n_graphs=10, family={"n_nodes_range": [10, 30], "seed": grid.SELECTION_FAMILY_SEED}), tmp_path / "cache")
    other_total = gu.triangle_total([other[int(i)] for i in gu.challenge_split(10)[2]])
    assert row["ood_test"]["h_lo_d_hi_pl_lo"]["test_triangles_total_structural"] == other_total
    assert other_total == rows["h_lo_d_hi_pl_lo"]["test_triangles_total_structural"]
    for metrics in row["ood_test"].values():
        assert set(metrics) == set(grid.METRIC_KEYS)
        if metrics["test_triangles_total_structural"]:
            assert metrics["test_mse_by_total_triangles"] == pytest.approx(
                metrics["test_best_rerun_mse"] / metrics["test_triangles_total_structural"], rel=1e-5
            )
    config = row["wandb_config"]
    assert config["model/params/total"] == config["model/params/trainable"] > 0
    assert config["AvgTime/train_epoch_mean"] > 0 and row["harness"]["epochs"] == 1

    # another configuration never joins the file
    with pytest.raises(ValueError, match=r"results_n10_e1_f2718\.json holds runs with overrides=.*--variant NAME"):
        grid.main([*_grid_args(tmp_path), "--set", "optimizer.lr=0.1"])
    with pytest.raises(ValueError, match=r"task_overrides\[triangle_counting\]=\[\]"):
        grid.main([*_grid_args(tmp_path), "--set-tc", "optimizer.lr=0.1"])
    # nor do runs made after the packaged config changed (the same overrides, other defaults)
    assert data["metadata"]["packaged_defaults"] == grid.packaged_defaults("gin")
    with monkeypatch.context() as patched:
        patched.setattr(grid, "packaged_defaults", lambda model: "changed")
        with pytest.raises(ValueError, match=r"holds runs with packaged_defaults="):
            grid.main(_grid_args(tmp_path))

    # restart: finished runs are skipped (nothing is trained again)
    monkeypatch.setattr(grid, "execute", lambda *a, **k: pytest.fail("a finished run ran again"))
    capsys.readouterr()
    assert grid.main(_grid_args(tmp_path)) == 0
    assert "0 of 2 runs pending" in capsys.readouterr().out


def test_a_failed_run_writes_no_row_and_stays_pending(grid, tmp_path, monkeypatch, capsys):
    def crash(model, task, slug, seed, args, cache):
        raise RuntimeError(f"killed during {slug}")

    monkeypatch.setattr(grid, "execute", crash)
    assert grid.main(_grid_args(tmp_path, "--no-ood")) == 1
    path = tmp_path / "results" / "gin" / "results_n10_e1_f2718.json"
    assert not path.exists()  # no partial row, no empty file
    assert "FAILED RuntimeError: killed during h_lo_d_hi_pl_lo" in capsys.readouterr().out
    assert grid.main([*_grid_args(tmp_path, "--no-ood"), "--list"]) == 0
    assert "2 of 2 runs pending" in capsys.readouterr().out


def test_bad_grid_options_are_refused(grid):
    with pytest.raises(ValueError, match=r"unknown setting 'h_low_d_lo_pl_lo' \(--settings\)"):
        grid.parse(["--settings", "h_low_d_lo_pl_lo"])
    with pytest.raises(SystemExit):
        grid.parse(["--n-graphs", "5"])
    with pytest.raises(SystemExit):  # the family seed is the grid's (selection off the protocol's graphs)
        grid.parse(["--n-graphs", "300", "--set-cd", "+dataset.family.seed=42"])


def _graph_hashes(n_graphs: int, seed: int) -> list[str]:
    """Content hashes (features, edges, communities) of a small family of the setting h_mid_d_hi_pl_lo."""
    parameters = gu.generation_parameters("mid", "hi", "lo", n_graphs=n_graphs, family={"n_nodes_range": [10, 14], "seed": seed})
    return [
        hashlib.sha256(g.x.numpy().tobytes() + g.edge_index.numpy().tobytes() + g.community.numpy().tobytes()).hexdigest()
        for g in gu.generate_family(parameters)
    ]


def test_selection_families_share_no_graph_with_the_protocol_families(grid):
    protocol = _graph_hashes(12, grid.family_seed(grid.PROTOCOL["n_graphs"]))
    # with the protocol's seed a smaller family is the start of the protocol's family (validation
    # graphs of a subset run would be protocol test graphs): the grid must not generate it so
    assert _graph_hashes(6, grid.PROTOCOL_FAMILY_SEED) == protocol[:6]
    selection = _graph_hashes(6, grid.family_seed(300))
    assert len(set(protocol)) == 12 and len(set(selection)) == 6
    assert not set(selection) & set(protocol)
    # and the grid's configurations use these seeds
    args = grid.parse(["--n-graphs", "300", "--max-epochs", "20"])
    assert grid.compose("gin", "community_detection", "h_mid_d_hi_pl_lo", 42, args).dataset.family.seed == grid.SELECTION_FAMILY_SEED
    args = grid.parse([])
    assert grid.compose("gin", "community_detection", "h_mid_d_hi_pl_lo", 42, args).dataset.family.seed == 42
    assert grid.results_file("gin", 300, 20, "x").name == "results_n300_e20_f2718_x.json"
    assert grid.results_file("gin", 1000, 20, None).name == "results_n1000_e20.json"


def test_results_file_refuses_a_foreign_file(grid, tmp_path):
    path = tmp_path / "results.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"results\.json is not a challenge results file"):
        grid.read_results(path)


def _rows(grid, task, seeds, value):
    return [
        {"experiment": task, "run_slug": slug, "train_seed": seed, "test_best_rerun_accuracy": value}
        for seed in seeds for slug in grid.SETTINGS
    ]


def test_promote_makes_a_complete_variant_grid_the_entry(grid, tmp_path):
    root = grid.RESULTS / "ct"
    root.mkdir(parents=True)
    protocol = {**grid.PROTOCOL, "ood": True}
    meta = {"protocol": protocol, "overrides": [], "task_overrides": {"community_detection": ["a=1"], "triangle_counting": ["t=1"]}}
    entry = _rows(grid, "community_detection", grid.SEEDS, 0.4) + _rows(grid, "triangle_counting", grid.SEEDS, None)
    (root / "results.json").write_text(json.dumps({"metadata": meta, "results": entry}))
    variant = {"protocol": protocol, "overrides": [], "task_overrides": {"community_detection": ["a=1", "b=2"]}}
    source = root / "results_v.json"
    partial = _rows(grid, "community_detection", grid.SEEDS, 0.5)[:-1]
    source.write_text(json.dumps({"metadata": variant, "results": partial}))
    with pytest.raises(ValueError, match=r"results_v\.json lacks 1 of the 36 runs of community_detection \(first: community_detection/h_hi_d_hi_pl_hi/seed_44\)"):
        grid.promote("ct", "community_detection", "v")
    source.write_text(json.dumps({"metadata": {**variant, "overrides": ["x=1"]}, "results": partial + _rows(grid, "community_detection", [44], 0.5)[-1:]}))
    with pytest.raises(ValueError, match=r"has overrides=\['x=1'\], results\.json \[\]: not the same entry"):
        grid.promote("ct", "community_detection", "v")
    source.write_text(json.dumps({"metadata": variant, "results": _rows(grid, "community_detection", grid.SEEDS, 0.5)}))
    assert grid.main(["--models", "ct", "--tasks", "community_detection", "--promote", "v"]) == 0
    data = json.loads((root / "results.json").read_text())
    cd = [r for r in data["results"] if r["experiment"] == "community_detection"]
    assert len(cd) == 36 and {r["test_best_rerun_accuracy"] for r in cd} == {0.5}
    assert sum(r["experiment"] == "triangle_counting" for r in data["results"]) == 36  # the other task stays
    assert data["metadata"]["task_overrides"] == {"community_detection": ["a=1", "b=2"], "triangle_counting": ["t=1"]}
    assert data["metadata"]["promoted"] == {"community_detection": "results_v.json"} and data["metadata"]["n_runs"] == 72
    ids = [grid.row_id(r) for r in data["results"]]
    assert ids[:2] == ["community_detection/h_lo_d_lo_pl_lo/seed_42", "triangle_counting/h_lo_d_lo_pl_lo/seed_42"]
    kept = json.loads((root / "results_replaced_by_v.json").read_text())
    assert len(kept["results"]) == 36 and {r["test_best_rerun_accuracy"] for r in kept["results"]} == {0.4}
    assert kept["metadata"]["task_overrides"]["community_detection"] == ["a=1"]
    with pytest.raises(ValueError, match="was promoted before"):  # the replaced rows are never overwritten
        grid.promote("ct", "community_detection", "v")
    with pytest.raises(ValueError, match="exactly one task"):
        grid.main(["--models", "ct", "--promote", "v"])


# ----------------------------------------------------------------------------------------------
# benchmarks/graphuniverse_leaderboard.py
# ----------------------------------------------------------------------------------------------
def _leaderboard(tmp_path, *args):
    """``benchmarks/graphuniverse_leaderboard.py`` on the files under ``tmp_path``: its stdout."""
    run = run_benchmark(
        "graphuniverse_leaderboard", "--results", tmp_path / "results", "--leaderboard", tmp_path / "lb.json",
        "--file", "results.json", *args,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_leaderboard_ranks_our_entry_overall_in_track_and_on_matched_rows(tmp_path):
    slugs = ["h_lo_d_lo_pl_lo", "h_hi_d_lo_pl_lo"]

    def rows(scores):
        return [
            {"task": "community_detection", "homophily": s[:4], "avg_degree": s[5:9], "power_law": s[10:], "train_seed": 42, "score": v}
            for s, v in zip(slugs, scores)
        ]

    leaderboard = {"submissions": [
        {"pr_number": 1, "pr_title": "Track: Track1; Team name: a; Model: A", "track": "track-1-gnn", "model_config": "graph/a", "pr_state": "open", "rows": rows([0.3, 0.9])},
        {"pr_number": 371, "pr_title": "Track: Track2; Team name: b; Model: CT", "track": "track-2-tnn", "model_config": "cell/ct", "pr_state": "open", "rows": rows([0.2, 0.5])},
    ]}
    (tmp_path / "lb.json").write_text(json.dumps(leaderboard))
    ours = tmp_path / "results" / "cellular_transformer"
    ours.mkdir(parents=True)
    result_rows = [
        {"experiment": "community_detection", "run_slug": slugs[0], "train_seed": 42, "test_best_rerun_accuracy": 0.4,
         "ood_test": {slugs[1]: {"test_best_rerun_accuracy": 0.1}}, "wandb_config": {"AvgTime/train_epoch_mean": 2.0, "model/params/total": 123}},
    ]
    (ours / "results.json").write_text(json.dumps({"metadata": {}, "results": result_rows}))
    text = _leaderboard(tmp_path).split("### triangle_counting")[0]  # the community-detection table
    assert text.startswith("### community_detection")
    line = next(r for r in text.splitlines() if r.startswith("| ours: cellular_transformer"))
    cells = [c.strip() for c in line.split("|")[1:-1]]
    # full means: A 0.6, ours 0.4 (1 row), CT 0.35 -> ours 2nd overall, 1st in the TNN track;
    # matched on our one row: ours 0.4 > A 0.3 > CT 0.2 -> 1st of all
    assert cells[1:5] == ["track-2-tnn", "2", "1", "1"]
    assert cells[9] == "0.4000" and cells[10] == "1 / 1"
    assert cells[11] == "0.1000" and cells[12] == "2.0" and cells[13] == "123"
    assert any(r.startswith("| CT (cell/ct) #371") for r in text.splitlines())
    assert "*ours: cellular_transformer*: this package's harness, configurations tuned per task" in text

    # the one-configuration entry: the notebook's slugs (h_lo__d_lo__pl_lo) match the leaderboard's rows
    entry = tmp_path / "results" / "challenge_entry"
    entry.mkdir()
    notebook_row = {**result_rows[0], "run_slug": "h_lo__d_lo__pl_lo", "test_best_rerun_accuracy": 0.35}
    (entry / "results.json").write_text(json.dumps({"metadata": {}, "results": [notebook_row]}))
    text = _leaderboard(tmp_path).split("### triangle_counting")[0]
    cells = [c.strip() for c in next(r for r in text.splitlines() if r.startswith("| ours: challenge_entry")).split("|")[1:-1]]
    assert cells[1] == "track-2-tnn" and cells[9] == "0.3500" and cells[10] == "1 / 1"  # matched: 0.35 > A 0.3 > CT 0.2
    assert "*ours: challenge_entry*: one configuration for both tasks, TopoBench's run_challenge_grid" in text


def test_leaderboard_curves_report_best_validation_by_epoch_and_the_gap_per_homophily(tmp_path):
    slugs = ["h_mid_d_lo_pl_lo", "h_mid_d_hi_pl_lo", "h_hi_d_lo_pl_lo"]
    leaderboard = {"submissions": [{
        "pr_number": 370, "pr_title": "Model: GRIT", "track": "track-1-gnn", "model_config": "graph/grit", "pr_state": "open",
        "rows": [{"task": "community_detection", "homophily": s.split("_d_")[0], "avg_degree": "d_" + s.split("_")[-3],
                  "power_law": s[-5:], "train_seed": 42, "score": v} for s, v in zip(slugs, [0.5, 0.7, 0.9])],
    }]}
    (tmp_path / "lb.json").write_text(json.dumps(leaderboard))
    ours = tmp_path / "results" / "ct"
    ours.mkdir(parents=True)
    curves = [[0.1] * 4 + [0.4] * 8, [0.2] * 3, [0.5, 0.6]]  # 12, 3 and 2 epochs
    rows = [
        {"experiment": "community_detection", "run_slug": s, "train_seed": 42, "test_best_rerun_accuracy": t,
         "harness": {"val_curve": c, "best_epoch": len(c) - 1, "epochs": len(c)}}
        for s, t, c in zip(slugs, [0.4, 0.6, 0.8], curves)
    ] + [{"experiment": "triangle_counting", "run_slug": slugs[0], "train_seed": 42, "harness": {"val_curve": [9.0]}}]
    (ours / "results.json").write_text(json.dumps({"metadata": {}, "results": rows}))
    text = _leaderboard(tmp_path, "--curves", "ct", "--against", "370")
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]] for r in text.splitlines() if r.startswith("| h_")}
    assert set(cells) == {"h_mid", "h_hi"}  # h_lo has no rows; the counting row is not read
    # h_mid: val ≤ 1 = mean(0.1, 0.2), ≤ 5 = mean(0.4, 0.2), ≤ 10, ≤ 20 the same (the 3-epoch run
    # keeps its final best); best epochs 11 and 2
    assert cells["h_mid"] == ["2", "0.1500", "0.3000", "0.3000", "0.3000", "6.5", "7.5", "0.5000", "0.6000", "-0.1000"]
    assert cells["h_hi"][:2] == ["1", "0.5000"] and cells["h_hi"][-3:] == ["0.8000", "0.9000", "-0.1000"]
    # an entry without every one of our rows of a level shows no mean and no gap for it
    (tmp_path / "lb.json").write_text(json.dumps({"submissions": [dict(leaderboard["submissions"][0], rows=leaderboard["submissions"][0]["rows"][:1])]}))
    partial = _leaderboard(tmp_path, "--curves", "ct", "--against", "370")
    mid = next(r for r in partial.splitlines() if r.startswith("| h_mid"))
    assert [c.strip() for c in mid.split("|")[-4:-1]] == ["0.5000", "–", "–"]
    missing = run_benchmark(
        "graphuniverse_leaderboard", "--results", tmp_path / "results", "--leaderboard", tmp_path / "lb.json",
        "--curves", "ct", "--against", "999",
    )
    assert missing.returncode != 0 and "#999" in missing.stderr


def test_node_level_checkpoint_of_the_ct_is_retested_exactly(tmp_path):
    cfg = compose_config(
        [*TINY, "dataset.n_graphs=10", "seeds=[0]", "trainer.max_epochs=2", "plot=false", "trainer.enable_progress_bar=false",
         f"paths.cache_dir={tmp_path / 'cache'}", "dataset.homophily=hi", "model.params.hidden_channels=8"],
        dataset="graphuniverse", model="cellular_transformer",
    )
    result = run_experiment(cfg, output_dir=tmp_path / "run", verbose=False)
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cfg.paths.cache_dir)
    test = list(prepared.split(0)[2].complexes)
    model = build_model("cellular_transformer", cfg.model.params, prepared.info)
    prune_keys(test, get_spec("cellular_transformer").keys(model, prepared.info))
    values = evaluate_checkpoint(cfg, prepared.info, best_checkpoint(tmp_path / "run", 0), test)
    assert set(values) == {"loss", "accuracy"}
    assert values["accuracy"] == pytest.approx(result.seeds[0].test, abs=1e-6)  # accuracy over the test vertices


def test_counting_config_builds_the_cardinality_variant(tmp_path):
    """``model=simplicial/n_simplicial_counting``: the cardinality term on, no final norm; it trains."""
    cfg = compose_config(
        [*TINY, "dataset.n_graphs=10", "seeds=[0]", "trainer.max_epochs=1", "plot=false",
         "trainer.enable_progress_bar=false", f"paths.cache_dir={tmp_path / 'cache'}",
         "dataset.task=triangle_counting"],
        dataset="graphuniverse", model="simplicial/n_simplicial_counting",
    )
    prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cfg.paths.cache_dir)
    model = build_model(cfg.model.name, cfg.model.params, prepared.info)
    assert model.norm is None
    assert all(layer.attention.cardinality_weight is not None for layer in model.layers)
    result = run_experiment(cfg, output_dir=tmp_path / "run", verbose=False)
    assert np.isfinite(result.seeds[0].test)


def test_workers_import_a_copy_of_the_package_made_at_start(grid, tmp_path, monkeypatch):
    launched = []

    class Finished:
        def wait(self):
            return 0

    real_popen = subprocess.Popen

    def popen(command, *args, **kwargs):
        if command[-1] != "--worker":
            return real_popen(command, *args, **kwargs)
        launched.append((command, kwargs["env"]))
        return Finished()

    monkeypatch.setattr(grid.subprocess, "Popen", popen)
    args = [a for a in _grid_args(tmp_path) if a != "--live-code"]
    assert grid.main(args) == 0  # one worker: still a subprocess, on the copy
    (command, env), = launched
    assert command[-1] == "--worker"
    code = Path(env["PYTHONPATH"].split(os.pathsep)[0])
    assert code.parent == tmp_path / "work" / "code"
    copied = code / "topomodelx_attention"
    import topomodelx_attention

    source = Path(topomodelx_attention.__file__).parent
    for name in ("__init__.py", "configs/model/cell/cellular_transformer.yaml", "nn/graph/tokens.py"):
        assert (copied / name).read_bytes() == (source / name).read_bytes(), name
    assert not list(copied.rglob("__pycache__"))
    # the same package content reuses its copy; an import from it sees the copy
    assert grid.snapshot_package(tmp_path / "work" / "code") == code
    found = subprocess.run(
        [sys.executable, "-c", "import topomodelx_attention as m; print(m.__file__)"],
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(found.stdout.strip()).resolve() == (copied / "__init__.py").resolve()


def test_challenge_export_matches_the_notebook_layout(tmp_path):
    """``--export-challenge``: the notebook's ``h__d__pl`` slugs and OOD entries; nothing else is lost."""
    from topomodelx_attention.harness import graphuniverse_grid as grid

    assert grid.notebook_slug("h_mid_d_hi_pl_lo") == "h_mid__d_hi__pl_lo"
    with pytest.raises(ValueError, match="unknown setting"):
        grid.notebook_slug("h_mid__d_hi__pl_lo")  # not one of this grid's slugs
    ood = {"test_loss": 2.0, "test_best_rerun_accuracy": 0.3, "test_best_rerun_mse": None, "test_mse_by_total_triangles": None}
    row = {"experiment": "community_detection", "run_slug": "h_lo_d_lo_pl_lo", "train_seed": 43,
           "test_best_rerun_accuracy": 0.4, "ood_test": {"h_hi_d_hi_pl_hi": ood}, "harness": {"best_epoch": 3}}
    payload = grid.challenge_payload({"metadata": {"protocol": {}}, "results": [row]}, "cell/ct")
    out = payload["results"][0]
    assert out["run_slug"] == "h_lo__d_lo__pl_lo"
    assert out["ood_test"] == {"h_hi__d_hi__pl_hi": {"test_best_rerun_accuracy": 0.3, "test_best_rerun_mse": None}}
    assert out["test_best_rerun_accuracy"] == 0.4 and out["harness"] == {"best_epoch": 3}
    assert row["run_slug"] == "h_lo_d_lo_pl_lo"  # the source row is not modified
    meta = payload["metadata"]
    assert meta["model_config"] == "cell/ct" and meta["n_runs"] == 1 and meta["train_seeds"] == [43]
    assert {"study_id", "generated_at_utc", "heatmap_note"} <= set(meta)


def test_challenge_export_user_errors_are_one_line_and_write_nothing(grid, tmp_path, capsys):
    source = grid.results_file("gin", grid.PROTOCOL["n_graphs"], grid.PROTOCOL["max_epochs"], None)
    source.parent.mkdir(parents=True)
    rows = _rows(grid, "community_detection", [42], 0.5)
    source.write_text(json.dumps({"metadata": {}, "results": rows}))
    before = source.read_bytes()
    (tmp_path / "out").mkdir()
    out = str(tmp_path / "out" / "gin.json")
    cases = [
        (["--models", "gin", "--export-challenge", out], "got no --model-config"),
        (["--models", "gin", "gps", "--export-challenge", out, "--model-config", "graph/gin"], "exactly one model"),
        (["--models", "nope", "--export-challenge", out, "--model-config", "graph/x"], "unknown model 'nope' (--models)"),
        (["--models", "gps", "--export-challenge", out, "--model-config", "graph/gps"], "has no results file"),
        (["--models", "gin", "--export-challenge", str(tmp_path / "missing" / "gin.json"), "--model-config", "graph/gin"],
         "does not exist"),
        (["--models", "gin", "--export-challenge", str(tmp_path / "out"), "--model-config", "graph/gin"], "is a folder"),
        (["--models", "gin", "--export-challenge", str(source), "--model-config", "graph/gin"], "results file itself"),
    ]
    for argv, needle in cases:
        assert grid.cli(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("graphuniverse_grid.py: error: "), err
        assert "--export-challenge" in err[0] or "(--models)" in err[0], err  # the option to fix
        assert needle in err[0], (argv, err)
    assert source.read_bytes() == before and not (tmp_path / "out" / "gin.json").exists()
    assert not (tmp_path / "missing").exists() and not (grid.RESULTS / "nope").exists()
    assert grid.cli(["--models", "gin", "--export-challenge", out, "--model-config", "graph/gin"]) == 0
    assert json.loads(Path(out).read_text())["metadata"]["model_config"] == "graph/gin"


def test_grid_refuses_an_unknown_model_before_creating_anything(grid, capsys):
    assert grid.cli(["--models", "nope", "--list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown model 'nope' (--models)" in err[0]
    assert not (grid.RESULTS / "nope").exists()


def test_the_grid_script_reports_a_user_error_without_a_traceback(tmp_path):
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "graphuniverse_grid.py"
    env = {k: v for k, v in os.environ.items() if k != "TOPOMODELX_ATTENTION_TRACEBACK"}
    run = subprocess.run(
        [sys.executable, str(script), "--models", "gin", "--export-challenge", str(tmp_path / "x.json")],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        "graphuniverse_grid.py: error: --export-challenge takes exactly one model and its TopoBench config, got no "
        "--model-config (--models NAME --model-config DOMAIN/CONFIG, e.g. cell/cellular_transformer_rrwp)"
    ]


def test_counting_two_cells_of_the_chordless_triangle_lifting_scores_zero(tmp_path):
    # the non-learned baseline beside the triangle-counting rows: with chordless cycles of at most
    # 3 vertices every 2-cell is a triangle and every triangle a 2-cell; a cycle basis is not that
    out = tmp_path / "two_cells.json"
    run = run_benchmark(
        "two_cell_count", "--settings", "h_lo_d_hi_pl_lo", "h_hi_d_hi_pl_hi", "--n-graphs", "20",
        "--n-nodes-range", "12", "20", "--cache-dir", tmp_path / "cache", "--json", out,
    )
    assert run.returncode == 0, run.stderr
    scores = json.loads(out.read_text())["settings"]
    assert set(scores) == {"h_lo_d_hi_pl_lo", "h_hi_d_hi_pl_hi"}
    for setting in scores.values():
        assert setting["graphs"] == 3 and setting["triangles"] > 0  # the protocol's test split of 20 graphs
        assert setting["chordless3"]["mse"] == 0 and setting["chordless3"]["exact"] == 3
    assert any(s["basis10"]["mse"] > 0 for s in scores.values())
    assert "| h_hi_d_hi_pl_hi | 3 |" in run.stdout
