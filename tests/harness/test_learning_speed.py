"""``benchmarks/learning_speed.py`` and ``benchmarks/dgcnn_tu.py``: planning, tables, conversion.

Synthetic ``runs.jsonl`` rows and a hand-written DGCNN text file: nothing is trained here.
"""

from __future__ import annotations

import json

from tests.helpers import run_benchmark

#: Two graphs in the DGCNN text format: a labelled triangle (class 1) and a path of two
#: vertices (class 0); the second vertex of the path carries a continuous attribute.
DGCNN = """2
3 1
0 2 1 2
1 2 0 2
2 2 0 1
2 0
0 1 1
1 1 0 0.5
"""


def _convert(*args, expect: str) -> None:
    run = run_benchmark("dgcnn_tu", *args)
    assert run.returncode == 0 and run.stdout.strip() == expect, run.stderr


def test_dgcnn_text_becomes_the_tu_files_by_hand(tmp_path):
    """Vertices numbered from 1 across graphs, each edge in both directions, tags as node labels."""
    source = tmp_path / "X.txt"
    source.write_text(DGCNN)
    _convert(source, tmp_path / "out", "X", expect="2 graphs")
    raw = tmp_path / "out" / "X" / "raw"
    assert (raw / "X_A.txt").read_text().split("\n")[:-1] == [
        "1, 2", "1, 3", "2, 1", "2, 3", "3, 1", "3, 2", "4, 5", "5, 4",
    ]
    assert (raw / "X_graph_indicator.txt").read_text().split() == ["1", "1", "1", "2", "2"]
    assert (raw / "X_graph_labels.txt").read_text().split() == ["1", "0"]
    assert (raw / "X_node_labels.txt").read_text().split() == ["0", "1", "2", "0", "1"]


def test_a_subset_keeps_whole_graphs_and_is_seeded(tmp_path):
    source = tmp_path / "X.txt"
    source.write_text(DGCNN)
    _convert(source, tmp_path / "a", "X", "--max-graphs", "1", "--seed", "3", expect="1 graphs")
    _convert(source, tmp_path / "b", "X", "--max-graphs", "1", "--seed", "3", expect="1 graphs")
    a = (tmp_path / "a" / "X" / "raw" / "X_A.txt").read_text()
    assert a == (tmp_path / "b" / "X" / "raw" / "X_A.txt").read_text()
    assert a in ("1, 2\n1, 3\n2, 1\n2, 3\n3, 1\n3, 2\n", "1, 2\n2, 1\n")


def test_a_truncated_file_is_an_error(tmp_path):
    source = tmp_path / "X.txt"
    source.write_text("\n".join(DGCNN.split("\n")[:4]))
    run = run_benchmark("dgcnn_tu", source, tmp_path / "out", "X")
    assert run.returncode != 0 and "ends inside graph 1 of 2" in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


def _row(dataset, config, seed, val, losses, model="cellular_transformer"):
    return {
        "key": f"{dataset}|{model}|{config}|{seed}", "dataset": dataset, "model": model, "config": config,
        "seed": seed, "overrides": [], "metric": "accuracy", "val": val, "test": val - 0.05,
        "best_epoch": 1, "epochs": len(losses), "params": 1000, "s_per_epoch": 0.5, "seconds": 1.0,
        "train_loss": losses, "train_acc": [0.5] * len(losses), "val_curve": [val] * len(losses),
        "wall": [1.0] * len(losses), "chance": 0.69, "first_epoch_loss": losses[0], "epoch_below_chance": 0,
    }


def _table(tmp_path, rows):
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = run_benchmark("learning_speed", "--table", "--out", tmp_path)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_diagnosis_table_reads_the_loss_after_5_10_25_50_epochs(tmp_path):
    losses = [1.0 - 0.01 * e for e in range(50)]  # after e epochs: 1 - 0.01 (e - 1)
    out = _table(tmp_path, [_row("ENZYMES", "packaged", 1, 0.4, losses),
                            _row("ENZYMES", "packaged", 2, 0.4, [v + 0.1 for v in losses])])
    line = next(r for r in out.splitlines() if r.startswith("| ENZYMES | cellular_transformer | packaged"))
    assert "| 1.010 | 0.960 | 0.810 | 0.560 |" in line, line  # means over the two seeds


def test_the_selection_leaves_each_data_set_out(tmp_path):
    """The choice for a held-out set comes from the other sets' validation ranks, not its own."""
    rows = []
    values = {  # validation accuracy of each candidate per data set; MUTAG alone prefers "previous_default"
        "ENZYMES": {"previous_default": 0.3, "packaged": 0.5, "fast_no_pe_norm": 0.4},
        "PTC": {"previous_default": 0.6, "packaged": 0.7, "fast_no_pe_norm": 0.65},
        "NCI1K": {"previous_default": 0.6, "packaged": 0.7, "fast_no_pe_norm": 0.65},
        "MUTAG": {"previous_default": 0.9, "packaged": 0.8, "fast_no_pe_norm": 0.85},
    }
    for dataset, by_config in values.items():
        for config, val in by_config.items():
            rows.append(_row(dataset, config, 1, val, [0.7] * 10))
    out = _table(tmp_path, rows)
    assert "| ENZYMES | packaged |" in out and "| PTC | packaged |" in out and "| NCI1K | packaged |" in out
    assert "| MUTAG | packaged |" in out  # rank 1 on the three other sets, rank 3 on MUTAG itself
    assert "| packaged | 1 | 1 | 1 | 3 | 1.50 |" in out
    assert "Chosen on every data set: **packaged**" in out
