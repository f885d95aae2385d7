import re

from topomodelx_attention.cli import main


def test_lift_mutag_offline_prints_counts(tmp_path, capsys):
    assert main(["lift", "--dataset", "MUTAG", "--lifting", "cell_cycle", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "188 graphs" in out
    rows = dict(re.findall(r"^\| (\d) \| (\d+) \|", out, flags=re.M))
    assert rows["0"] == "3371"  # MUTAG has 3,371 atoms
    assert rows["1"] == "3721"  # and 3,721 bonds
    assert int(rows["2"]) > 0
    assert re.search(r"lifted in [0-9.]+ s", out)


def test_lift_clique(tmp_path, capsys):
    assert main(["lift", "--dataset", "MUTAG", "--lifting", "clique", "--root", str(tmp_path)]) == 0
    assert "| 2 | 0 |" in capsys.readouterr().out  # molecules have no triangles of bonds


def test_bench_list_names_the_benchmark_scripts(capsys, monkeypatch):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # the checkout
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("lifting", "attention_core", "n_simplicial", "oversmoothing"):
        assert re.search(rf"^\s+{name}\s", out, flags=re.M), name


def test_bench_runs_a_script_in_a_subprocess(tmp_path, capsys):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "echo_args.py").write_text(
        '"""Write the arguments."""\nimport pathlib, sys\n'
        'pathlib.Path(sys.argv[1]).write_text(" ".join(sys.argv[2:]))\n'
    )
    target = tmp_path / "args.txt"
    assert main(["bench", "--benchmarks-dir", str(folder), "echo_args", str(target), "--quick", "7"]) == 0
    assert target.read_text() == "--quick 7"
    assert main(["bench", "--benchmarks-dir", str(folder), "missing"]) == 2
    assert "unknown benchmark 'missing'" in capsys.readouterr().err


def test_bench_outside_a_checkout_explains(tmp_path, capsys):
    assert main(["bench", "--benchmarks-dir", str(tmp_path / "nowhere"), "--list"]) == 2
    assert "source checkout" in capsys.readouterr().err
