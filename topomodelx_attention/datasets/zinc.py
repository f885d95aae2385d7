"""ZINC-12k (``dataset.loader=zinc``): molecular graphs from SMILES with RDKit (extra ``chem``).

:func:`read_zinc12k` reads the benchmark's two CSV files (``smiles_score.csv``,
``indexes_train_val_test.csv``), split as they say.

Atoms become vertices with one categorical feature (the ZINC atom vocabulary: element, explicit
hydrogens and charge, e.g. ``"N H1 +"``); bonds become undirected edges (both directions, PyG
convention) with one categorical feature: single 0, double 1, triple 2, aromatic 3.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data

from topomodelx_attention.datasets.registry import (
    SPLITS,
    DatasetFamily,
    register_family,
    require_data_dir,
    require_file,
)

__all__ = ["BOND_TYPES", "ZINC", "ZINC_ATOM_TYPES", "ZINC_SOURCE", "read_zinc12k", "smiles_to_graph"]

ZINC_ATOM_TYPES: tuple[str, ...] = (
    "C", "O", "N", "F", "C H1", "S", "Cl", "O -", "N H1 +", "Br", "N H3 +", "N H2 +", "N +",
    "N -", "S -", "I", "P", "O H1 +", "N H1 -", "O +", "S +", "P H1", "P H2", "C H2 -", "P +",
    "S H1 +", "C H1 -", "P H1 +", "N H1",
)  # fmt: skip
"""Atom vocabulary: the 28 types of the ZINC benchmark, plus ``"N H1"`` (aromatic ``[nH]``,
which RDKit reports with an explicit hydrogen)."""

BOND_TYPES: tuple[str, ...] = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
"""Bond vocabulary (RDKit bond type names)."""

_ATOM_INDEX = {name: i for i, name in enumerate(ZINC_ATOM_TYPES)}
_BOND_INDEX = {name: i for i, name in enumerate(BOND_TYPES)}


def _atom_token(atom) -> str:
    token = atom.GetSymbol()
    hydrogens = atom.GetNumExplicitHs()
    if hydrogens:
        token += f" H{hydrogens}"
    charge = atom.GetFormalCharge()
    if charge:
        token += " +" if charge > 0 else " -"
    return token


def smiles_to_graph(smiles: str, **attributes) -> Data:
    """Parse a SMILES string into a PyG graph with categorical atom and bond features.

    Parameters
    ----------
    smiles : str
        The molecule.
    **attributes
        Graph-level attributes to attach (e.g. ``y``).

    Returns
    -------
    torch_geometric.data.Data
        ``x`` (n_atoms, 1) long atom types, ``edge_index`` (2, 2 n_bonds), ``edge_attr``
        (2 n_bonds, 1) long bond types.
    """
    try:
        from rdkit import Chem
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("smiles_to_graph needs RDKit: pip install 'topomodelx-attention[chem]'") from error
    molecule = Chem.MolFromSmiles(smiles)
    if molecule is None:
        raise ValueError(f"RDKit cannot parse the SMILES {smiles!r}")
    atoms = []
    for atom in molecule.GetAtoms():
        token = _atom_token(atom)
        if token not in _ATOM_INDEX:
            raise ValueError(f"atom type {token!r} of {smiles!r} is not in the ZINC vocabulary")
        atoms.append(_ATOM_INDEX[token])
    src, dst, bonds = [], [], []
    for bond in molecule.GetBonds():
        u, v = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        kind = str(bond.GetBondType())
        if kind not in _BOND_INDEX:
            raise ValueError(f"bond type {kind} of {smiles!r} is not supported")
        src += [u, v]
        dst += [v, u]
        bonds += [_BOND_INDEX[kind]] * 2
    return Data(
        x=torch.tensor(atoms, dtype=torch.long).view(-1, 1),
        edge_index=torch.tensor([src, dst], dtype=torch.long).view(2, -1),
        edge_attr=torch.tensor(bonds, dtype=torch.long).view(-1, 1),
        **attributes,
    )


ZINC_SOURCE = (
    "the ZINC-12k benchmark subset as two CSV files: smiles_score.csv (columns SMILES,SA,logp,"
    "score; 12,000 molecules) and indexes_train_val_test.csv (columns train,val,test: row "
    "indices of the split) — see benchmarks/README.md"
)


def read_zinc12k(
    folder: str | os.PathLike,
    limits: Mapping[str, int | None] | None = None,
    target: str = "score",
) -> dict[str, list[Data]]:
    """Read ZINC-12k from ``smiles_score.csv`` and ``indexes_train_val_test.csv`` (RDKit).

    Parameters
    ----------
    folder : path-like
        Folder holding both CSV files.
    limits : mapping of str to int or None, optional
        Keep only the first ``limits[split]`` molecules of a split (a quick subset).
    target : str, default="score"
        Column used as the regression target ``y``.

    Returns
    -------
    dict of str to list of torch_geometric.data.Data
        ``{"train", "val", "test"}`` graphs of :func:`smiles_to_graph` with
        ``y`` (1,) float.

    Raises
    ------
    ValueError
        Naming the file and the line: a target that is not a finite float32 number (NaN,
        inf, 1e39), a split index that is not an integer, a SMILES RDKit cannot parse, a
        malformed row.
    """
    folder = Path(folder)
    molecules = require_file(folder / "smiles_score.csv", "ZINC-12k molecules", ZINC_SOURCE)
    index_file = require_file(folder / "indexes_train_val_test.csv", "ZINC-12k split", ZINC_SOURCE)
    rows = _read_csv(molecules, ("SMILES", target), numbered=True)
    columns: dict[str, list[int]] = {name: [] for name in SPLITS}
    for line, record in _read_csv(index_file, SPLITS, numbered=True):
        for name in SPLITS:
            value = record[name]
            if value in ("", None):
                continue
            try:
                number = float(value)
            except ValueError:
                raise ValueError(
                    f"{index_file}, line {line}: column {name} holds {value!r}, expected a row index"
                ) from None
            if not math.isfinite(number) or number != int(number):
                raise ValueError(f"{index_file}, line {line}: column {name} holds {value!r}, not an integer")
            columns[name].append(int(number))
    limits = dict(limits or {})
    out = {}
    for name in SPLITS:
        indices = columns[name]
        limit = limits.get(name)
        if limit is not None:
            indices = indices[: int(limit)]
        bad = [i for i in indices if not 0 <= i < len(rows)]
        if bad:
            raise ValueError(f"{index_file}: {name} indices {bad[:5]} are outside the {len(rows)} molecules")
        graphs = []
        for i in indices:
            line, record = rows[i]  # the file's own line (the header is line 1)
            value = record[target]
            try:
                y = torch.tensor([float(value)])
            except (TypeError, ValueError):
                raise ValueError(
                    f"{molecules}, line {line}: column {target} holds {value!r}, expected a number"
                ) from None
            if not bool(torch.isfinite(y).all()):  # NaN, inf, or beyond float32 (1e39)
                raise ValueError(
                    f"{molecules}, line {line}: column {target} holds {value!r}, not a finite "
                    "float32 number; a regression target must be finite (fix or drop that row)"
                )
            try:
                graphs.append(smiles_to_graph(record["SMILES"], y=y))
            except ValueError as error:
                raise ValueError(f"{molecules}, line {line}: {error}") from error
        out[name] = graphs
    return out


def _read_csv(path: Path, required: Sequence[str], numbered: bool = False) -> list[Any]:
    """Rows of a CSV file as dicts (with their line numbers when ``numbered``); errors name the file and line."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [name for name in required if name not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{path} needs the columns {list(required)}, got {reader.fieldnames}")
            rows = []
            for record in reader:
                if None in record or any(record[name] is None for name in required):
                    raise ValueError(
                        f"{path}, line {reader.line_num}: expected {len(reader.fieldnames)} columns "
                        f"{reader.fieldnames}"
                    )
                rows.append((reader.line_num, record) if numbered else record)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a UTF-8 text file ({error.reason} at byte {error.start})") from None
    except csv.Error as error:
        raise ValueError(f"{path}: malformed CSV ({error})") from error
    return rows


# ----------------------------------------------------------------------------------------------
# the family: dataset.loader=zinc
# ----------------------------------------------------------------------------------------------
_FILES = ("smiles_score.csv", "indexes_train_val_test.csv")


def _read(cfg: Mapping[str, Any], cache_dir: Path) -> dict[str, list[Data]]:
    folder = require_data_dir(cfg, " and ".join(_FILES))
    return read_zinc12k(folder, cfg.get("subset"), cfg.get("target", "score"))


def _files(cfg: Mapping[str, Any], cache_dir: Path) -> list[Path] | None:
    if cfg.get("data_dir") is None:
        return None
    files = [Path(cfg["data_dir"]).expanduser() / name for name in _FILES]
    return files if all(p.is_file() for p in files) else None


ZINC = register_family(DatasetFamily("zinc", read=_read, files=_files))
"""ZINC-12k (``dataset.loader=zinc``): both CSV files of ``data_dir``; their own split."""
