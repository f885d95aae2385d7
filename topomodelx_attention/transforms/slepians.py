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

Computation: with ``P = B_F = W Wᵀ`` (``W`` an orthonormal basis of the band, ``ρ`` columns)
the nonzero eigenvalues of ``P C_S P`` are those of the small block ``P[S, S] = W_S W_Sᵀ``
(``|S| × |S|``, a handful of cells) or of ``W_Sᵀ W_S`` (``ρ × ρ``), whichever is smaller; for
``P[S, S] v = λ v`` the Slepian is ``s = P[:, S] v / √λ = W (W_Sᵀ v / √λ)`` — unit norm,
band-limited (``P s = s``) and with concentration ``‖C_S s‖² = λ``. Sets of one size are
solved by batched :func:`numpy.linalg.eigh` in blocks of bounded memory; ``P`` itself is
never formed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from torch_geometric.data import Data

from topomodelx_attention.data import shared_face_counts
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.transforms import pe_utils
from topomodelx_attention.transforms.positional_encodings import (
    CellPositionalEncoding,
    hodge_laplacians,
)

__all__ = [
    "SELECTIONS",
    "Slepians",
    "TopologicalSlepiansPE",
    "harmonic_vectors",
    "topological_slepians",
]

UPPER, LOWER = 0, 1
"""Family codes: upper sets with ``F^u``, lower sets with ``F^d``."""

_CONCENTRATION_DECIMALS = 8
_HALF_SQRT2 = float(np.sqrt(0.5))
SELECTIONS = ("per_set", "global")


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


def _image_bases(boundary: Coo) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases of ``im B`` and ``im Bᵀ``, from one ``eigh`` of the smaller Gram.

    With ``B = U Σ Vᵀ`` (nonzero singular values only), ``im B = span U`` is the upper band
    ``F^u`` of the lower rank and ``im Bᵀ = span V`` the lower band ``F^d`` of the upper rank;
    ``V`` (or ``U``) comes from ``eigh`` of ``BᵀB`` (or ``BBᵀ``), the other as ``B V Σ^{-1}``.
    The projectors ``B_F = U Uᵀ`` are never formed: every Slepian is ``U c`` for a coefficient
    vector ``c`` of length ``ρ = rank B``.
    """
    matrix = pe_utils.as_matrix(boundary, dense=True)
    n, m = matrix.shape
    if n == 0 or m == 0:
        return np.zeros((n, 0)), np.zeros((m, 0))
    transpose = m > n
    if transpose:
        matrix = matrix.T
    values, right = np.linalg.eigh(matrix.T @ matrix)
    keep = values > pe_utils.KERNEL_TOL * max(1.0, float(values[-1]))
    right = right[:, keep]
    left = (matrix @ right) / np.sqrt(values[keep])
    if transpose:
        left, right = right, left
    return left, right


def _concentration_sets(neighbours: Coo) -> list[np.ndarray]:
    """Concentration sets ``{σ} ∪ neighbours(σ)`` grouped by size: ``(centres, members)`` rows.

    Returns one array per set size ``s``: shape ``(c, 1 + s)``, column 0 the centre cell ``σ``
    and columns ``1..s`` the members of its set (``σ`` first).
    """
    n = neighbours.shape[0]
    order = np.lexsort((neighbours.cols, neighbours.rows))
    rows, cols = neighbours.rows[order], neighbours.cols[order]
    per_row = np.bincount(rows, minlength=n)
    starts = np.concatenate([[0], np.cumsum(per_row)[:-1]]) if n else per_row
    groups = []
    for size in np.unique(per_row):
        centres = np.flatnonzero(per_row == size)
        members = np.empty((centres.size, int(size) + 2), dtype=np.int64)
        members[:, 0] = centres
        members[:, 1] = centres
        if size:
            members[:, 2:] = cols[starts[centres][:, None] + np.arange(size)[None, :]]
        groups.append(members)
    return groups


class _Candidates(NamedTuple):
    """Candidate Slepians ``W c`` of one family (several sets)."""

    coefficients: np.ndarray  # (c, ρ) unit coefficient vectors in the band basis W
    concentration: np.ndarray  # (c,)
    center: np.ndarray  # (c,)
    position: np.ndarray  # (c,) 0 = most concentrated of its set


_BLOCK_BUDGET = 1 << 21
"""Most float64 entries of the batched local eigenproblems solved at once (16 MB)."""


def _family_candidates(basis: np.ndarray, neighbours: Coo, keep: int | None) -> _Candidates:
    """Local eigenproblems of every concentration set; the ``keep`` most concentrated of each.

    For a set ``S`` and the band basis ``W`` (``B_F = W Wᵀ``), the nonzero eigenvalues of
    ``B_F C_S B_F`` are those of ``W_S W_Sᵀ`` (``|S| × |S|``) and of ``W_Sᵀ W_S`` (``ρ × ρ``);
    the smaller one is solved. From ``W_S W_Sᵀ a = λ a`` the Slepian is ``W c`` with
    ``c = W_Sᵀ a / √λ``; from ``W_Sᵀ W_S c = λ c`` directly ``W c``. Sets of one size are
    solved by batched ``eigh`` in blocks of at most :data:`_BLOCK_BUDGET` entries.
    """
    rho = basis.shape[1]
    out: list[tuple[np.ndarray, ...]] = []
    for group in _concentration_sets(neighbours):
        size = group.shape[1] - 1
        dim = min(size, rho)
        step = max(1, _BLOCK_BUDGET // max(1, dim * max(dim, rho)))
        for first in range(0, group.shape[0], step):
            chunk = group[first : first + step]
            rows = basis[chunk[:, 1:]]  # (c, |S|, ρ) = W_S
            if size <= rho:
                values, local = np.linalg.eigh(rows @ rows.transpose(0, 2, 1))
            else:
                values, local = np.linalg.eigh(rows.transpose(0, 2, 1) @ rows)
            values, local = values[:, ::-1], local[:, :, ::-1]  # most concentrated first
            width = dim if keep is None else min(dim, keep)
            values, local = values[:, :width], local[:, :, :width]
            if size <= rho:
                scale = np.sqrt(np.clip(values, 1e-300, None))
                coefficients = (rows.transpose(0, 2, 1) @ local) / scale[:, None, :]
            else:
                coefficients = local
            valid = values > 1e-8
            sets, which = np.nonzero(valid)
            out.append(
                (
                    coefficients[sets, :, which],
                    values[sets, which],
                    chunk[sets, 0],
                    which,
                )
            )
    if not out:
        return _Candidates(np.zeros((0, rho)), np.zeros(0), *(np.zeros(0, np.int64),) * 2)
    return _Candidates(*(np.concatenate(parts) for parts in zip(*out)))


class _Boundary(NamedTuple):
    """What the Slepians of the two ranks of one boundary ``B_r`` need."""

    image: np.ndarray  # (n_{r-1}, ρ) basis of im B_r: upper band of rank r - 1
    coimage: np.ndarray  # (n_r, ρ) basis of im B_rᵀ: lower band of rank r
    upper: Coo  # shared r-cells of the (r-1)-cells: upper sets of rank r - 1
    lower: Coo  # shared (r-1)-faces of the r-cells: lower sets of rank r


def _prepare(signed: Sequence[Coo]) -> list[_Boundary]:
    """Band bases and concentration sets of every boundary."""
    out = []
    for boundary in signed:
        image, coimage = _image_bases(boundary)
        out.append(
            _Boundary(
                image,
                coimage,
                shared_face_counts(boundary, upper=True),
                shared_face_counts(boundary, upper=False),
            )
        )
    return out


def _greedy_distinct(coefficients: np.ndarray, max_cosine: float, wanted: int) -> np.ndarray:
    """Greedy selection (indices, in order) of rows with pairwise ``|cos| <= max_cosine``."""
    kept: list[int] = []
    kept_rows = np.zeros((0, coefficients.shape[1]))
    chunk = max(4 * wanted, 64)
    for start in range(0, coefficients.shape[0], chunk):
        rows = coefficients[start : start + chunk]
        alive = ~(np.abs(rows @ kept_rows.T) > max_cosine).any(axis=1)
        close = np.abs(rows @ rows.T) > max_cosine
        for i in np.flatnonzero(alive):
            if not alive[i]:
                continue
            alive[i + 1 :] &= ~close[i, i + 1 :]
        new = np.flatnonzero(alive)
        kept.extend((start + new).tolist())
        kept_rows = np.vstack([kept_rows, rows[new]])
        if len(kept) >= wanted:
            break
    return np.asarray(kept[:wanted], dtype=np.int64)


def _slepians(
    boundaries: Sequence[_Boundary],
    counts: Sequence[int],
    rank: int,
    limit: int | None,
    selection: str = "per_set",
    per_set: int = 1,
    max_cosine: float = 0.95,
) -> Slepians:
    """Select the Slepians of ``rank`` (``boundaries`` from :func:`_prepare`)."""
    n = counts[rank]
    wanted = np.iinfo(np.int64).max if limit is None else int(limit)
    if selection == "per_set":
        keep = per_set
    else:  # exact truncation: a set's orthogonal Slepians cannot share a witness (see Notes)
        keep = None if limit is None or max_cosine <= _HALF_SQRT2 else wanted
    families = []
    if rank < len(counts) - 1 and boundaries[rank].image.shape[1]:
        families.append((UPPER, boundaries[rank].image, boundaries[rank].upper))
    if rank > 0 and boundaries[rank - 1].coimage.shape[1]:
        families.append((LOWER, boundaries[rank - 1].coimage, boundaries[rank - 1].lower))
    vectors, lam, fam, cen, pos = [np.zeros((n, 0))], [np.zeros(0)], [], [], []
    for code, basis, neighbours in families:
        found = _family_candidates(basis, neighbours, keep)
        order = np.lexsort(
            (found.center, found.position, -np.round(found.concentration, _CONCENTRATION_DECIMALS))
        )
        chosen = order[_greedy_distinct(found.coefficients[order], max_cosine, wanted)]
        # the two families are orthogonal (im B_{k+1} ⊥ im B_kᵀ): no duplicates across them
        vectors.append(basis @ found.coefficients[chosen].T)
        lam.append(found.concentration[chosen])
        fam.append(np.full(chosen.size, code))
        cen.append(found.center[chosen])
        pos.append(found.position[chosen])
    vectors, lam = np.hstack(vectors), np.concatenate(lam)
    fam, cen, pos = (np.concatenate([np.zeros(0, np.int64), *a]) for a in (fam, cen, pos))
    order = np.lexsort((cen, fam, pos, -np.round(lam, _CONCENTRATION_DECIMALS)))[:wanted]
    return Slepians(pe_utils.canonical_signs(vectors[:, order]), lam[order], fam[order], cen[order])


def _check_selection(selection: str, per_set: int, max_cosine: float) -> None:
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    pe_utils.check_dim(per_set, "per_set")
    if not 0.0 < float(max_cosine) <= 1.0:
        raise ValueError(f"max_cosine must be in (0, 1], got {max_cosine}")


def topological_slepians(
    data: Data,
    rank: int,
    limit: int | None = None,
    *,
    selection: str = "per_set",
    per_set: int = 1,
    max_cosine: float = 0.95,
) -> Slepians:
    """Topological Slepians of one rank, in the order :class:`TopologicalSlepiansPE` uses.

    Parameters
    ----------
    data : ComplexData or torch_geometric.data.Data
        One complex (``signed_incidence_r`` keys, or unsigned TopoBench ``incidence_r`` keys of
        a complex of rank <= 2, oriented by
        :func:`~topomodelx_attention.transforms.pe_utils.orient_boundaries`).
    rank : int
        Rank ``k`` of the cells, ``0 <= k <= R``.
    limit : int, optional
        Stop after this many Slepians (default: all distinct ones).
    selection : {"per_set", "global"}, default="per_set"
        Candidates: the ``per_set`` most concentrated Slepians of each pair of concentration
        sets (the paper's "top Slepians per each pair of concentration sets"), or every
        Slepian of every set.
    per_set : int, default=1
        Slepians kept per set with ``selection="per_set"``.
    max_cosine : float, default=0.95
        A candidate whose ``|cos|`` with an already selected Slepian exceeds this is skipped.

    Returns
    -------
    Slepians
        Vectors, concentrations, families and centre cells, in selection order: decreasing
        concentration ``λ`` (rounded to 8 decimals), then position inside its own set (a
        set's best Slepian first), then upper before lower family, then centre cell index.
        No two returned vectors have ``|cos| > max_cosine``.
    """
    counts = pe_utils.check_single_complex(data, "topological_slepians")
    if not 0 <= rank < len(counts):
        raise ValueError(f"rank must be in 0..{len(counts) - 1}, got {rank}")
    if limit is not None and int(limit) < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    _check_selection(selection, per_set, max_cosine)
    boundaries = _prepare(pe_utils.boundary_coos(data, signed=True, max_rank=len(counts) - 1))
    return _slepians(boundaries, counts, rank, limit, selection, per_set, max_cosine)


class TopologicalSlepiansPE(CellPositionalEncoding):
    """TopoSlepiansPE: the top topological Slepians of each rank (CT paper, §4.4.3, App. C.2).

    ``pe_k[σ, i] = s_k^i[σ]``: coordinate ``σ`` of the ``i``-th selected Slepian of rank ``k``
    (zero columns when fewer than ``dim`` exist). Local: Slepians per rank.

    Parameters
    ----------
    dim : int
        Number of columns per rank (output width).
    selection : {"per_set", "global"}, default="per_set"
        ``"per_set"``: the ``per_set`` most concentrated Slepians of every pair of
        concentration sets (the paper's choice, "taking just the top Slepians per each pair of
        concentration sets"); ``"global"``: every Slepian of every set is a candidate.
    per_set : int, default=1
        Slepians per set with ``selection="per_set"``.
    max_cosine : float, default=0.95
        Deduplication tolerance: no two output columns have ``|cos|`` above it.
    harmonic : int, default=0
        Put up to this many harmonic eigenvectors of ``L_k`` (an orthonormal basis of
        ``ker L_k``, Appendix C.2's "mixed positional encoding") in the first columns; they
        count towards ``dim``.
    eigh_threshold : int, default=EIGH_THRESHOLD
        Eigensolver threshold for the harmonic vectors
        (:func:`~topomodelx_attention.transforms.pe_utils.smallest_eigenpairs`).

    Notes
    -----
    *Candidates.* Every cell ``σ`` contributes two concentration sets — ``{σ}`` plus its upper
    adjacent cells (paired with ``F^u``) and ``{σ}`` plus its lower adjacent cells (paired
    with ``F^d``) — the paper's ``|X_k|`` pairs per family; each set yields up to
    ``min(|S|, rank B)`` Slepians (see the module docstring). Rank 0 has only the upper
    family, the top rank only the lower one.

    *Selection.* The paper concatenates the top Slepians of each pair of sets into an ordered
    multiset and takes its first ``d_pe``; it does not fix the order of the sets. Here the
    candidates are sorted by decreasing concentration ``λ``, ties broken by the position
    inside their own set, then the family (upper first), then the centre cell index — so the
    order does not depend on the cell labels except on ties. A candidate whose ``|cos|`` with
    an already selected column exceeds ``max_cosine`` (the same or nearly the same Slepian
    reached from neighbouring sets) is skipped. The two families never collide: ``im B_{k+1}
    ⊥ im B_kᵀ``. With ``"global"`` each set is truncated to its ``dim`` best Slepians, which
    is exact for ``max_cosine > 1/√2`` (a set's own Slepians are orthogonal, so two of them
    cannot both be near-parallel to one selected column).

    *Defaults.* ``selection="per_set"`` follows the paper and spreads the columns over the
    complex (one Slepian per set, rather than several of one well-concentrated set);
    ``max_cosine=0.95`` drops columns that add less than ``√(1 - 0.95²) ≈ 0.31`` of a new
    direction (the previous ``1 - 1e-6`` let pairs with ``|cos| = 0.996`` through);
    ``harmonic=0`` because the paper calls the mixing optional, the harmonic basis is
    arbitrary up to rotation when ``β_k > 1`` and on rank 0 it is the constant vector.

    *Cost.* Band bases from one ``eigh`` of the smaller Gram matrix of each boundary
    (``O(min(n_{k-1}, n_k)³)``), local eigenproblems of size ``min(|S|, rank B)`` in blocks
    of bounded memory: no ``n_k × n_k`` matrix is formed (except ``L_k`` for ``harmonic``).
    """

    eigenvector_based = True
    per_rank = True
    shown = ("selection", "per_set", "max_cosine", "harmonic")

    def __init__(
        self,
        dim: int,
        *,
        selection: str = "per_set",
        per_set: int = 1,
        max_cosine: float = 0.95,
        harmonic: int = 0,
        eigh_threshold: int = pe_utils.EIGH_THRESHOLD,
    ) -> None:
        super().__init__(dim)
        _check_selection(selection, per_set, max_cosine)
        self.selection = selection
        self.per_set = int(per_set)
        self.max_cosine = float(max_cosine)
        self.harmonic = pe_utils.check_dim(harmonic, "harmonic", minimum=0)
        self.eigh_threshold = pe_utils.check_dim(eigh_threshold, "eigh_threshold", minimum=0)


    def encode(self, data: Data, counts: list[int]) -> list[np.ndarray]:  # noqa: D102
        signed = pe_utils.boundary_coos(data, signed=True, max_rank=len(counts) - 1)
        boundaries = _prepare(signed)
        laplacians = hodge_laplacians(signed, counts) if self.harmonic else None
        out = []
        for rank in range(len(counts)):
            harmonic = np.zeros((counts[rank], 0))
            if self.harmonic:
                harmonic = harmonic_vectors(
                    laplacians[rank], min(self.harmonic, self.dim), self.eigh_threshold
                )
            slepians = _slepians(
                boundaries,
                counts,
                rank,
                self.dim - harmonic.shape[1],
                self.selection,
                self.per_set,
                self.max_cosine,
            )
            out.append(pe_utils.pad_columns(np.hstack([harmonic, slepians.vectors]), self.dim))
        return out


def harmonic_vectors(laplacian: pe_utils.Matrix, k: int, eigh_threshold: int = pe_utils.EIGH_THRESHOLD) -> np.ndarray:
    """Up to ``k`` orthonormal harmonic vectors (kernel of a Hodge Laplacian).

    Parameters
    ----------
    laplacian : numpy.ndarray or scipy.sparse matrix, shape = (n, n)
        ``L_k``.
    k : int
        Most vectors returned.
    eigh_threshold : int, default=EIGH_THRESHOLD
        Eigensolver threshold.

    Returns
    -------
    numpy.ndarray, shape = (n, m)
        ``m = min(k, dim ker L_k)`` columns (signs by ``canonical_signs``).
    """
    values, vectors = pe_utils.smallest_eigenpairs(laplacian, k, False, eigh_threshold)
    scale = max(1.0, float(np.abs(values).max())) if values.size else 1.0
    return vectors[:, values <= pe_utils.KERNEL_TOL * max(scale, 1.0) * 10]
