"""Topological Slepians as positional encodings (CT paper, §4.4.3 and Appendix C.2).

For a rank ``k``, a cell concentration set ``S`` and a frequency set ``F``, the Slepians are
the eigenvectors of ``B_F C_S B_F`` (equation (12)) with ``C_S = diag(1_S)`` and ``B_F`` the
band-pass projector onto the eigenvectors of ``L_k`` whose eigenvalues are in ``F``. Following
the paper's choice:

* frequency sets: ``F^u`` = the nonzero spectrum of ``L_k^up = B_{k+1} B_{k+1}ᵀ`` and
  ``F^d`` = the nonzero spectrum of ``L_k^down = B_kᵀ B_k``; by the Hodge decomposition (7)
  ``B_{F^u}`` is the orthogonal projector onto ``im B_{k+1}`` and ``B_{F^d}`` the one onto
  ``im B_kᵀ`` (the choice of eigenbasis inside them does not matter);
* cell sets: for every ``k``-cell ``σ`` an *upper* set ``{σ} ∪ {upper adjacent cells}``,
  paired with ``F^u``, and a *lower* set ``{σ} ∪ {lower adjacent cells}``, paired with
  ``F^d``.

Computation: with ``P = B_F`` (``P² = P = Pᵀ``) the nonzero eigenvalues of ``P C_S P`` are
those of the small block ``P[S, S]`` (``|S| × |S|``, a handful of cells); for
``P[S, S] v = λ v`` the Slepian is ``s = P[:, S] v / √λ`` — unit norm, band-limited
(``P s = s``) and with concentration ``‖C_S s‖² = λ``. All blocks of one rank are solved by a
single batched :func:`numpy.linalg.eigh`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from topomodelx_attention.data import ComplexData, shared_face_counts
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.transforms.pe_utils import (
    KERNEL_TOL,
    as_matrix,
    boundary_coos,
    canonical_signs,
    check_single_complex,
    pad_columns,
)
from topomodelx_attention.transforms.positional_encodings import CellPositionalEncoding

__all__ = ["Slepians", "TopologicalSlepiansPE", "topological_slepians"]

UPPER, LOWER = 0, 1
"""Family codes: upper sets with ``F^u``, lower sets with ``F^d``."""

_CONCENTRATION_DECIMALS = 8
_PARALLEL = 1.0 - 1e-6


class Slepians(NamedTuple):
    """Selected topological Slepians of one rank, in selection order.

    Attributes
    ----------
    vectors : numpy.ndarray, shape = (n_k, m)
        Unit Slepians as columns (signs by
        :func:`~topomodelx_attention.transforms.pe_utils.canonical_signs`).
    concentration : numpy.ndarray, shape = (m,)
        ``λ = ‖C_S s‖²`` in ``(0, 1]``, non-increasing.
    family : numpy.ndarray of int, shape = (m,)
        :data:`UPPER` (upper set, ``F^u``) or :data:`LOWER` (lower set, ``F^d``).
    center : numpy.ndarray of int, shape = (m,)
        The cell ``σ`` whose concentration set produced the Slepian.
    """

    vectors: np.ndarray
    concentration: np.ndarray
    family: np.ndarray
    center: np.ndarray


def _image_projectors(boundary: Coo) -> tuple[np.ndarray, np.ndarray]:
    """Orthogonal projectors onto ``im B`` and ``im Bᵀ``, from one ``eigh`` of the smaller Gram.

    With ``B = U Σ Vᵀ`` (nonzero singular values only), ``im B = span U`` is the upper band
    ``F^u`` of the lower rank and ``im Bᵀ = span V`` the lower band ``F^d`` of the upper rank;
    ``V`` (or ``U``) comes from ``eigh`` of ``BᵀB`` (or ``BBᵀ``), the other as ``B V Σ^{-1}``.
    """
    matrix = as_matrix(boundary, dense=True)
    n, m = matrix.shape
    if n == 0 or m == 0:
        return np.zeros((n, n)), np.zeros((m, m))
    transpose = m > n
    if transpose:
        matrix = matrix.T
    values, right = np.linalg.eigh(matrix.T @ matrix)
    keep = values > KERNEL_TOL * max(1.0, float(values[-1]))
    right = right[:, keep]
    left = (matrix @ right) / np.sqrt(values[keep])
    if transpose:
        left, right = right, left
    return left @ left.T, right @ right.T


def _concentration_sets(neighbours: Coo) -> np.ndarray:
    """Row ``σ``: ``σ`` then its neighbours, padded with ``-1`` — shape ``(n, max |S|)``."""
    n = neighbours.shape[0]
    order = np.lexsort((neighbours.cols, neighbours.rows))
    rows, cols = neighbours.rows[order], neighbours.cols[order]
    per_row = np.bincount(rows, minlength=n)
    starts = np.concatenate([[0], np.cumsum(per_row)[:-1]]) if n else per_row
    width = 1 + (int(per_row.max()) if n else 0)
    sets = np.full((n, width), -1, dtype=np.int64)
    sets[:, 0] = np.arange(n)
    sets[rows, 1 + np.arange(rows.size) - starts[rows]] = cols
    return sets


class _Family(NamedTuple):
    projector: np.ndarray  # (n, n)
    sets: np.ndarray  # (n, width), -1 padded
    values: np.ndarray  # (n, width) local concentrations, ascending per set
    vectors: np.ndarray  # (n, width, width) local eigenvectors (columns)


def _solve_family(projector: np.ndarray, sets: np.ndarray) -> _Family:
    """Batched ``eigh`` of the blocks ``P[S, S]`` of every concentration set."""
    mask = sets >= 0
    index = np.where(mask, sets, 0)
    blocks = projector[index[:, :, None], index[:, None, :]]
    blocks *= mask[:, :, None] & mask[:, None, :]
    values, vectors = np.linalg.eigh(blocks)
    return _Family(projector, sets, values, vectors)


def _materialise(family: _Family, center: np.ndarray, which: np.ndarray) -> np.ndarray:
    """Slepians ``P[:, S] v / √λ`` of the chosen (set, local eigenvector) pairs, as rows."""
    index = family.sets[center]  # (c, width)
    mask = index >= 0
    columns = family.projector[:, np.where(mask, index, 0)] * mask[None]  # (n, c, width)
    coefficients = family.vectors[center, :, which]  # (c, width)
    scale = np.sqrt(family.values[center, which])
    return np.einsum("ncw,cw->cn", columns, coefficients) / scale[:, None]


class _Boundary(NamedTuple):
    """What the Slepians of the two ranks of one boundary ``B_r`` need."""

    upper: _Family | None  # rank r - 1: projector onto im B_r, upper sets (shared r-cells)
    lower: _Family | None  # rank r: projector onto im B_rᵀ, lower sets (shared (r-1)-faces)


def _prepare(signed: Sequence[Coo]) -> list[_Boundary]:
    """Projectors, concentration sets and local eigenproblems of every boundary."""
    out = []
    for boundary in signed:
        n, m = boundary.shape
        if n == 0 or m == 0:
            out.append(_Boundary(None, None))
            continue
        onto_image, onto_coimage = _image_projectors(boundary)
        upper = _concentration_sets(shared_face_counts(boundary, upper=True))
        lower = _concentration_sets(shared_face_counts(boundary, upper=False))
        out.append(_Boundary(_solve_family(onto_image, upper), _solve_family(onto_coimage, lower)))
    return out


def _slepians(
    boundaries: Sequence[_Boundary], counts: Sequence[int], rank: int, limit: int | None
) -> Slepians:
    """Select the Slepians of ``rank`` (``boundaries`` from :func:`_prepare`)."""
    n = counts[rank]
    families: dict[int, _Family] = {}
    if rank < len(counts) - 1 and boundaries[rank].upper is not None:
        families[UPPER] = boundaries[rank].upper
    if rank > 0 and boundaries[rank - 1].lower is not None:
        families[LOWER] = boundaries[rank - 1].lower

    # candidates: every (family, set, local eigenvector) with positive concentration
    fam, cen, loc, lam = [], [], [], []
    for code, family in families.items():
        valid = family.values > 1e-8
        centers, which = np.nonzero(valid)
        fam.append(np.full(centers.size, code))
        cen.append(centers)
        loc.append(which)
        lam.append(family.values[centers, which])
    if not fam:
        empty = np.zeros(0, dtype=np.int64)
        return Slepians(np.zeros((n, 0)), np.zeros(0), empty, empty)
    fam, cen, loc, lam = (np.concatenate(a) for a in (fam, cen, loc, lam))
    width = {code: family.sets.shape[1] for code, family in families.items()}
    position = np.array([width[f] for f in fam]) - 1 - loc  # 0 = most concentrated of its set
    order = np.lexsort((cen, fam, position, -np.round(lam, _CONCENTRATION_DECIMALS)))
    fam, cen, loc, lam = fam[order], cen[order], loc[order], lam[order]

    # materialise in selection order, chunk by chunk, dropping (anti)parallel duplicates
    wanted = fam.size if limit is None else int(limit)
    chunk = max(4 * wanted, 64) if limit is not None else fam.size
    kept_rows = np.zeros((0, n))
    kept_index = np.zeros(0, dtype=np.int64)
    for start in range(0, fam.size, chunk):
        stop = min(start + chunk, fam.size)
        rows = np.zeros((stop - start, n))
        for code, family in families.items():
            here = np.nonzero(fam[start:stop] == code)[0]
            if here.size:
                rows[here] = _materialise(family, cen[start:stop][here], loc[start:stop][here])
        duplicate = np.triu(np.abs(rows @ rows.T) > _PARALLEL, k=1).any(axis=0)
        if kept_rows.shape[0]:
            duplicate |= (np.abs(rows @ kept_rows.T) > _PARALLEL).any(axis=1)
        kept_rows = np.vstack([kept_rows, rows[~duplicate]])
        kept_index = np.concatenate([kept_index, start + np.nonzero(~duplicate)[0]])
        if kept_rows.shape[0] >= wanted:
            break
    kept_rows, kept_index = kept_rows[:wanted], kept_index[:wanted]
    return Slepians(canonical_signs(kept_rows.T), lam[kept_index], fam[kept_index], cen[kept_index])


def topological_slepians(data: ComplexData, rank: int, limit: int | None = None) -> Slepians:
    """Topological Slepians of one rank, in the order :class:`TopologicalSlepiansPE` uses.

    Parameters
    ----------
    data : ComplexData
        One oriented complex (``signed_incidence_r`` keys).
    rank : int
        Rank ``k`` of the cells, ``0 <= k <= R``.
    limit : int, optional
        Stop after this many Slepians (default: all distinct ones).

    Returns
    -------
    Slepians
        Vectors, concentrations, families and centre cells, in selection order: decreasing
        concentration ``λ`` (rounded to 8 decimals), then position inside its own set (a
        set's best Slepian first), then upper before lower family, then centre cell index.
        A Slepian parallel (up to sign, ``|cos| > 1 - 1e-6``) to an earlier one is skipped.
    """
    counts = check_single_complex(data, "topological_slepians")
    if not 0 <= rank < len(counts):
        raise ValueError(f"rank must be in 0..{len(counts) - 1}, got {rank}")
    if limit is not None and int(limit) < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    boundaries = _prepare(boundary_coos(data, signed=True, max_rank=len(counts) - 1))
    return _slepians(boundaries, counts, rank, limit)


class TopologicalSlepiansPE(CellPositionalEncoding):
    """TopoSlepiansPE: the top topological Slepians of each rank (CT paper, §4.4.3, App. C.2).

    ``pe_k[σ, i] = s_k^i[σ]``: coordinate ``σ`` of the ``i``-th selected Slepian of rank ``k``
    (zero columns when fewer than ``dim`` exist). Local: Slepians per rank.

    Parameters
    ----------
    dim : int
        Number of Slepians per rank (output width).

    Notes
    -----
    *Candidates.* Every cell ``σ`` contributes two concentration sets — ``{σ}`` plus its upper
    adjacent cells (paired with ``F^u``) and ``{σ}`` plus its lower adjacent cells (paired
    with ``F^d``) — the paper's ``|X_k|`` pairs per family; each set yields up to ``|S|``
    Slepians (the nonzero eigenvalues of ``P[S, S]``, see the module docstring). Rank 0 has
    only the upper family, the top rank only the lower one.

    *Selection ("top Slepians").* Candidates are sorted by decreasing concentration ``λ``,
    ties broken by the position inside their own set, then the family (upper first), then
    the centre cell index; candidates parallel to an already selected one (the same Slepian
    reached from several sets) are skipped; the first ``dim`` are kept. The order is
    deterministic, but — as the paper notes — the encoding is local, not permutation
    equivariant (ties at ``λ = 1`` are frequent and resolved by cell index), and inside a
    repeated local eigenvalue the basis is the solver's.

    *Harmonic part.* The optional mixing with harmonic eigenvectors of ``L_k`` that
    Appendix C.2 mentions is not included.

    *Cost.* Dense projectors, ``O(n_k³)`` per rank: meant for small complexes (molecules).
    """

    eigenvector_based = True

    def encode(self, data: ComplexData, counts: list[int]) -> list[np.ndarray]:  # noqa: D102
        boundaries = _prepare(boundary_coos(data, signed=True, max_rank=len(counts) - 1))
        return [
            pad_columns(_slepians(boundaries, counts, rank, self.dim).vectors, self.dim)
            for rank in range(len(counts))
        ]
