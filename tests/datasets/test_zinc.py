"""The ZINC-12k reader (CSV files, RDKit), on tiny generated files."""

import pytest
import torch

from tests.harness.files import write_zinc
from topomodelx_attention.datasets.zinc import read_zinc12k


@pytest.fixture
def zinc_dir(tmp_path):
    return write_zinc(tmp_path)


def test_read_zinc_split_and_limits(zinc_dir):
    pytest.importorskip("rdkit")
    graphs = read_zinc12k(zinc_dir)
    assert {k: len(v) for k, v in graphs.items()} == {"train": 6, "val": 3, "test": 3}
    first = graphs["train"][0]
    assert first.x.dtype == torch.long and first.edge_attr.dtype == torch.long
    assert first.y.tolist() == [-1.0]  # score of row 0
    small = read_zinc12k(zinc_dir, {"train": 2, "test": 1})
    assert [len(small[k]) for k in ("train", "val", "test")] == [2, 3, 1]


def test_read_zinc_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"smiles_score\.csv"):
        read_zinc12k(tmp_path)


@pytest.mark.parametrize(
    ("file", "row", "error"),
    [
        ("smiles_score.csv", ["CCO", 2.0, 1.0, "not-a-number"], r"smiles_score\.csv, line 3: column score"),
        ("smiles_score.csv", ["C1CC", 2.0, 1.0, 0.5], r"smiles_score\.csv, line 3: .*SMILES"),
        ("smiles_score.csv", ["CCO", 2.0], r"smiles_score\.csv, line 3: expected 4 columns"),
        ("indexes_train_val_test.csv", ["x", "", ""], r"indexes_train_val_test\.csv, line 2: column train"),
    ],
)
def test_read_zinc_bad_rows_name_the_file_and_line(tmp_path, file, row, error):
    pytest.importorskip("rdkit")
    import csv

    folder = write_zinc(tmp_path)
    path = folder / file
    lines = path.read_text().splitlines()
    buffer = __import__("io").StringIO()
    csv.writer(buffer).writerow(row)
    position = 2 if file == "smiles_score.csv" else 1  # molecule row 1 / the first split row
    lines[position] = buffer.getvalue().strip()
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=error):
        read_zinc12k(folder)


def test_read_zinc_binary_file_names_it(tmp_path):
    folder = write_zinc(tmp_path)
    (folder / "smiles_score.csv").write_bytes(b"SMILES,SA,logp,score\n\xff\xfe\x00bad\n")
    with pytest.raises(ValueError, match=r"smiles_score\.csv is not a UTF-8 text file"):
        read_zinc12k(folder)
