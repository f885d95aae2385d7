"""Equal-budget comparison: the same trials for every model, selection on validation only."""

import pytest

from topomodelx_attention.harness.budget import run_equal_budget, search_trials


def test_search_trials_are_the_same_draw_for_every_model():
    space = {"optimizer.lr": [1e-3, 3e-4, 3e-3], "model.params.dropout": [0.0, 0.1]}
    trials = search_trials(space, 4, seed=0)
    assert trials == search_trials(space, 4, seed=0) and len(trials) == 4
    assert len({tuple(sorted(t.items())) for t in trials}) == 4
    assert len(search_trials(space, 10)) == 6  # the whole grid
    with pytest.raises(ValueError, match="trials"):
        search_trials(space, 0)


def test_equal_budget_selects_on_validation_and_writes_table_and_plot(tmp_path):
    rows = run_equal_budget(
        ["MUTAG"], ["gin", "gine"], seeds=[1], max_time=0.3, trials=2,
        space={"optimizer.lr": [1e-3, 1e-2]},
        # early stopping off: with 3 validation graphs the accuracy stalls, and a fast machine
        # reaches the default patience (50 epochs) inside 0.3 s, so the budget would not bind
        overrides=["dataset.max_graphs=12", "model.params.hidden_channels=8", "test=false",
                   "trainer.early_stopping_patience=null",
                   f"paths.cache_dir={tmp_path / 'cache'}", "trainer.enable_progress_bar=false"],
        output_root=tmp_path / "budget", verbose=False,
    )["MUTAG"]
    assert [(r.model, r.trial) for r in rows] == [("gin", 0), ("gin", 1), ("gine", 0), ("gine", 1)]
    for model in ("gin", "gine"):
        trials = [r for r in rows if r.model == model]
        (chosen,) = [r for r in trials if r.selected]
        assert chosen.mean_val == max(r.mean_val for r in trials)
        assert all(s.stopped_by_time for s in chosen.result.seeds) and chosen.result.max_time == 0.3
    text = (tmp_path / "budget" / "MUTAG" / "results.md").read_text()
    assert "0.3 s of wall time per seed, 2 hyperparameter trials" in text and "| MUTAG | gine |" in text
    assert (tmp_path / "budget" / "MUTAG" / "time_to_accuracy.png").stat().st_size > 0
