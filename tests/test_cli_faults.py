"""Fault injection on the command line: every user error is one line on stderr and exit status 2.

Each case calls ``cli.main([...])`` in-process with tiny data in ``tmp_path``.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import topomodelx_attention.harness.prepare as harness_prepare
from tests.harness.files import write_gcb, write_zinc
from topomodelx_attention import cli

FAST = ["--max-epochs", "1", "--seeds", "1", "--no-progress-bar"]


def write_tiny_tu(folder, name="TINY"):
    """A 4-graph TU data set (triangle, square, triangle with a tail, path), 2 classes, 3 node labels."""
    raw = folder / name / "raw"
    raw.mkdir(parents=True)
    graphs = [
        [(1, 2), (2, 3), (3, 1)],
        [(1, 2), (2, 3), (3, 4), (4, 1)],
        [(1, 2), (2, 3), (3, 1), (3, 4)],
        [(1, 2), (2, 3)],
    ]
    edges, indicator, labels, offset = [], [], [], 0
    for g, pairs in enumerate(graphs, start=1):
        n = max(max(p) for p in pairs)
        for u, v in pairs:
            edges += [(u + offset, v + offset), (v + offset, u + offset)]
        indicator += [g] * n
        labels += [(i + g) % 3 for i in range(n)]
        offset += n
    (raw / f"{name}_A.txt").write_text("".join(f"{u}, {v}\n" for u, v in edges))
    (raw / f"{name}_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (raw / f"{name}_node_labels.txt").write_text("".join(f"{c}\n" for c in labels))
    (raw / f"{name}_graph_labels.txt").write_text("1\n-1\n1\n-1\n")
    return raw


def run(argv, capsys):
    """Exit status and stderr of ``main(argv)`` (argparse errors exit through SystemExit)."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    return code, err


def assert_user_error(code, err, *needles):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines and "error:" in lines[-1]
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])
    return lines[-1]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPOMODELX_ATTENTION_DATA", str(tmp_path / "default_cache"))
    monkeypatch.delenv("TOPOMODELX_ATTENTION_TRACEBACK", raising=False)


# ------------------------------------------------------------------ numeric options
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["train", "--max-epochs", "0"], "--max-epochs"),
        (["train", "--max-epochs", "-3"], "--max-epochs"),
        (["train", "--max-epochs", "ten"], "--max-epochs"),
        (["train", "--seeds", "1", "-1"], "--seeds"),
        (["train", "--num-nodes", "0"], "--num-nodes"),
        (["lift", "--complex-dim", "0"], "--complex-dim"),
        (["lift", "--max-cell-length", "-2"], "--max-cell-length"),
        (["lift", "--lifting", "rings"], "--lifting"),
    ],
)
def test_bad_numbers_and_choices_exit_2(argv, needle, capsys):
    assert_user_error(*run(argv, capsys), needle)


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("model.params.hidden_channels=abc", "model.params.hidden_channels='abc' must be an integer"),
        ("model.params.unknown_option=3", "model.params.unknown_option"),
        ("trainer.max_epochs=0", "trainer.max_epochs=0 must be a positive integer"),
        ("dataset.dataloader.batch_size=-4", "dataset.dataloader.batch_size=-4"),
        ("optimizer.lr=fast", "optimizer.lr='fast'"),
        ("trainer.max_epochs=[oops", "invalid configuration override"),
    ],
)
def test_bad_override_rejected_before_lifting(tmp_path, override, needle, capsys, monkeypatch):
    def no_lifting(*args, **kwargs):
        raise AssertionError("the lifting must not run for an invalid configuration")

    monkeypatch.setattr(harness_prepare, "process_graphs", no_lifting)
    argv = ["train", "--seeds", "1", "--cache-dir", tmp_path / "c", "--output-dir", tmp_path / "o", override]
    assert_user_error(*run(argv, capsys), needle)


# ------------------------------------------------------------------ names and paths
def test_unknown_dataset_without_files_names_the_expected_files(capsys):
    assert_user_error(*run(["train", "--dataset", "ENZYMES", *FAST], capsys), "ENZYMES_A.txt", "--data-dir")


def test_unknown_tu_name_in_an_empty_data_dir(tmp_path, capsys):
    argv = ["train", "--dataset", "ENZYMES", "--data-dir", tmp_path, *FAST, "--cache-dir", tmp_path / "c"]
    assert_user_error(*run(argv, capsys), "ENZYMES_A.txt", str(tmp_path))
    assert_user_error(*run(["lift", "--dataset", "ENZYMES", "--data-dir", tmp_path], capsys), "ENZYMES_A.txt")
    assert_user_error(*run(["lift", "--dataset", "ENZYMES"], capsys), "ENZYMES_A.txt", "--data-dir")


def test_missing_data_dir(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert_user_error(*run(["train", "--dataset", "PROTEINS", "--data-dir", missing, *FAST], capsys), str(missing))
    assert_user_error(*run(["lift", "--dataset", "PROTEINS", "--data-dir", missing], capsys), str(missing))


def test_unknown_model(capsys):
    assert_user_error(*run(["train", "--model", "transformer9000", *FAST], capsys), "unknown model 'transformer9000'")


def test_bundled_mutag_with_an_unwritable_cache_says_so(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    line = assert_user_error(*run(["train", *FAST, "--cache-dir", blocker / "cache"], capsys), "--cache-dir", "a_file")
    assert "download" not in line
    line = assert_user_error(*run(["train", *FAST, "--output-dir", blocker / "out"], capsys), "--output-dir")
    # the default cache ($TOPOMODELX_ATTENTION_DATA) unwritable: the harness names it
    import os

    os.environ["TOPOMODELX_ATTENTION_DATA"] = str(blocker / "cache")
    line = assert_user_error(*run(["train", *FAST, "--output-dir", tmp_path / "o"], capsys), "not writable", "a_file")
    assert "download" not in line


# ------------------------------------------------------------------ damaged data files
def test_original_gcb_asks_for_conversion_and_converted_one_trains(tmp_path, capsys):
    src = write_gcb(tmp_path)
    base = ["train", "--dataset", "GCB", "--model", "gin", "--data-dir", src.parent, *FAST,
            "--cache-dir", tmp_path / "c", "--output-dir", tmp_path / "o"]
    line = assert_user_error(*run(base, capsys), str(src), "pickled Python objects", "convert-gcb")
    assert str(src.parent / "hard_small.plain.npz") in line
    assert run(["convert-gcb", src], capsys)[0] == 0
    assert (src.parent / "hard_small.plain.npz").is_file()
    code, err = run(base, capsys)
    assert code == 0, err
    assert "**GCB-hard_small / gin**" in (tmp_path / "o" / "results.md").read_text()  # which file


def test_gcb_without_the_default_file_names_dataset_file(tmp_path, capsys):
    src = write_gcb(tmp_path)
    src.rename(src.with_name("easy_small.npz"))
    argv = ["train", "--dataset", "GCB", "--data-dir", src.parent, *FAST, "--cache-dir", tmp_path / "c"]
    assert_user_error(*run(argv, capsys), "hard_small.npz not found", "easy_small.npz",
                      "dataset.file=easy_small.npz")


def test_misspelled_data_set_name_leaves_no_cache_folder(tmp_path, capsys):
    write_tiny_tu(tmp_path / "data")
    argv = ["train", "--dataset", "TINNY", "--data-dir", tmp_path / "data", *FAST, "--cache-dir", tmp_path / "c"]
    assert_user_error(*run(argv, capsys), "TINNY_A.txt")
    assert (tmp_path / "c").is_dir()  # --cache-dir is checked (created) first
    assert not (tmp_path / "c" / "processed").exists()


@pytest.mark.parametrize("content", [b"", b"\x00garbage\xff" * 10, "truncated"])
def test_damaged_gcb_file_names_it(tmp_path, content, capsys):
    src = write_gcb(tmp_path)
    if content == "truncated":
        content = src.read_bytes()[:300]
    src.write_bytes(content)
    argv = ["train", "--dataset", "GCB", "--data-dir", src.parent, *FAST, "--cache-dir", tmp_path / "c"]
    assert_user_error(*run(argv, capsys), str(src))
    assert_user_error(*run(["convert-gcb", src, tmp_path / "out.npz"], capsys), str(src))


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_convert_gcb_refuses_a_malicious_file(tmp_path, capsys):
    marker = tmp_path / "pwned"
    objects = np.empty(2, dtype=object)
    objects[:] = [_Payload(marker), _Payload(marker)]
    src = tmp_path / "evil.npz"
    np.savez(src, tr_adj=objects, tr_feat=objects, tr_class=np.zeros((2, 3)),
             val_adj=objects, val_feat=objects, val_class=np.zeros((2, 3)),
             te_adj=objects, te_feat=objects, te_class=np.zeros((2, 3)))
    assert_user_error(*run(["convert-gcb", src], capsys), str(src),
                      f"disallowed global {open.__module__}.{open.__qualname__}")  # _io.open on 3.12
    assert not marker.exists()
    argv = ["train", "--dataset", "GCB", "--data-dir", tmp_path, "dataset.file=evil.npz", *FAST,
            "--cache-dir", tmp_path / "c"]
    assert_user_error(*run(argv, capsys), str(src), "pickled")
    assert not marker.exists()


def test_convert_gcb_missing_source(tmp_path, capsys):
    assert_user_error(*run(["convert-gcb", tmp_path / "none.npz"], capsys), "none.npz")


def test_zinc_bad_csv_row_names_file_and_line(tmp_path, capsys):
    pytest.importorskip("rdkit")
    folder = write_zinc(tmp_path)
    path = folder / "smiles_score.csv"
    lines = path.read_text().splitlines()
    lines[4] = "CCO,2.0,1.0,oops"
    path.write_text("\n".join(lines) + "\n")
    argv = ["train", "--dataset", "ZINC", "--data-dir", folder, *FAST, "--cache-dir", tmp_path / "c"]
    assert_user_error(*run(argv, capsys), "smiles_score.csv, line 5", "score")
    (folder / "indexes_train_val_test.csv").write_bytes(b"train,val,test\n\xff\xfe,1,2\n")
    assert_user_error(*run(argv, capsys), "indexes_train_val_test.csv", "UTF-8")


@pytest.mark.parametrize(
    ("file", "content", "needle"),
    [
        ("TINY_A.txt", "1, 2\n2, x\n", "TINY_A.txt, line 2"),
        ("TINY_graph_labels.txt", "1\n", "TINY_graph_indicator.txt"),
        ("TINY_node_labels.txt", "0\n1\n", "TINY_node_labels.txt has 2 rows"),
        ("TINY_A.txt", "1, 99\n", "TINY_A.txt: vertex ids"),
        ("TINY_graph_indicator.txt", b"\xff\xfe\x00", "TINY_graph_indicator.txt is not a text file"),
    ],
)
def test_damaged_tu_files_name_the_file(tmp_path, file, content, needle, capsys):
    raw = write_tiny_tu(tmp_path)
    if isinstance(content, bytes):
        (raw / file).write_bytes(content)
    else:
        (raw / file).write_text(content)
    assert_user_error(*run(["lift", "--dataset", "TINY", "--data-dir", tmp_path], capsys), needle)
    argv = ["train", "--dataset", "TINY", "--data-dir", tmp_path, *FAST, "--cache-dir", tmp_path / "c"]
    assert_user_error(*run(argv, capsys), needle)


# ------------------------------------------------------------------ caches
def test_corrupt_and_malicious_cache_files_are_rebuilt(tmp_path, capsys):
    raw = write_tiny_tu(tmp_path)
    assert raw.is_dir()
    argv = ["train", "--dataset", "TINY", "--model", "gin", "--data-dir", tmp_path, *FAST,
            "--cache-dir", tmp_path / "c", "--output-dir", tmp_path / "o"]
    code, err = run(argv, capsys)
    assert code == 0, err
    (cache_file,) = (tmp_path / "c" / "processed" / "TINY").glob("*.pt")
    marker = tmp_path / "pwned"
    cache_file.write_bytes(pickle.dumps(_Payload(marker)))  # a crafted .pt at the cache path
    with pytest.warns(UserWarning, match=rf"{cache_file.name}.*deleted and is being rebuilt"):
        code, err = run(argv, capsys)
    assert code == 0, err
    assert not marker.exists()
    assert cache_file.stat().st_size > 1000  # rebuilt


# ------------------------------------------------------------------ any TU data set, bugs
def test_any_tu_data_set_by_name_lifts_and_trains(tmp_path, capsys):
    write_tiny_tu(tmp_path)
    assert cli.main(["lift", "--dataset", "TINY", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "dataset TINY: 4 graphs" in out
    assert "| 0 | 14 |" in out and "| 1 | 13 |" in out  # 3 + 4 + 4 + 3 vertices, 3 + 4 + 4 + 2 edges
    argv = ["train", "--dataset", "TINY", "--model", "gin", "--data-dir", tmp_path, *FAST,
            "--cache-dir", tmp_path / "c", "--output-dir", tmp_path / "o"]
    code, err = run(argv, capsys)
    assert code == 0, err
    assert (tmp_path / "o" / "results.csv").is_file()


def test_a_genuine_bug_keeps_its_traceback(monkeypatch):
    def bug(args):
        raise RuntimeError("a bug, not a user error")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["lift"].set_defaults(func=bug)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["lift"])
