"""Molecular graphs from SMILES with RDKit (optional dependency, extra ``chem``).

Atoms become vertices with one categorical feature (the ZINC atom vocabulary: element, explicit
hydrogens and charge, e.g. ``"N H1 +"``); bonds become undirected edges (both directions, PyG
convention) with one categorical feature: single 0, double 1, triple 2, aromatic 3.
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data

__all__ = ["BOND_TYPES", "ZINC_ATOM_TYPES", "smiles_to_graph"]

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
