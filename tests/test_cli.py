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
