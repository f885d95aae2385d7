"""Positional encodings of the cells of a complex (CT paper, §4.4 and Appendices B–C).

Every encoding is a :class:`~torch_geometric.transforms.BaseTransform` that takes one
:class:`~topomodelx_attention.data.ComplexData` and writes, for every rank ``r = 0..R``, a
float32 tensor ``pe_r`` of shape ``(n_r, dim)`` (zero columns when fewer than ``dim`` exist;
``(0, dim)`` for empty ranks). Apply them per complex (a dataset ``pre_transform``); a batch of
several complexes is refused.

=====================================  ========  ==============================================
transform                              scope     encoding
=====================================  ========  ==============================================
:class:`BarycentricSubdivisionPE`      global    BSPe: normalised-Laplacian eigenvectors of the
                                                 barycentric subdivision's 1-skeleton (§4.4.1)
:class:`BarycentricRandomWalkPE`       global    RWBSPe: return probabilities of the random
                                                 walk on that graph (§4.4.2)
:class:`CellularRandomWalkPE`          per rank  RWPe: return probabilities of the upper/lower
                                                 cellular random walk (Appendix C.1)
:class:`HodgeLaplacianPE`              per rank  HodgeLapPE: eigenvectors of ``L_r``
                                                 (§4.4.1, Appendix B)
:class:`~topomodelx_attention.transforms.slepians.TopologicalSlepiansPE`
                                       per rank  TopoSlepiansPE (§4.4.3, Appendix C.2)
:class:`ZeroPE`                        —         zeros ("no positional encoding")
=====================================  ========  ==============================================

:class:`RandomSignFlip` is the training-time augmentation against the sign ambiguity of the
eigenvector encodings (and of Laplacian node identifiers).

All computations are vectorised over cells: sparse incidence products build the graphs,
symmetric eigensolvers (:func:`~topomodelx_attention.transforms.pe_utils.smallest_eigenpairs`)
give the eigenvectors, repeated matrix products the random walks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from topomodelx_attention.data import ComplexData, shared_face_counts
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.transforms.pe_utils import (
    DENSE_THRESHOLD,
    EIGH_THRESHOLD,
    Matrix,
    as_matrix,
    boundary_coos,
    canonical_signs,
    check_dim,
    check_single_complex,
    column_stochastic,
    diag_matrix,
    normalized_laplacian,
    pad_columns,
    pattern,
    return_probabilities,
    scale_columns,
    smallest_eigenpairs,
)

__all__ = [
    "BarycentricRandomWalkPE",
    "BarycentricSubdivisionPE",
    "CellPositionalEncoding",
    "CellularRandomWalkPE",
    "HodgeLaplacianPE",
    "RandomSignFlip",
    "ZeroPE",
    "barycentric_graph",
    "barycentric_random_walk",
    "cellular_random_walk",
    "hodge_laplacians",
]

_RANK_KEY = re.compile(r"^(.+)_(\d+)$")


# ----------------------------------------------------------------------------------------------
# graphs and walks
# ----------------------------------------------------------------------------------------------
def _barycentric_adjacency(
    unsigned: Sequence[Coo], counts: Sequence[int], dense: bool
) -> tuple[Matrix, np.ndarray]:
    """Adjacency of the barycentric 1-skeleton (dense or CSR) and the rank offsets."""
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    total = int(offsets[-1])
    faces = [pattern(as_matrix(b, dense)) for b in unsigned]
    blocks = []  # (low rank, high rank, 0/1 "is a face of" matrix of shape (n_low, n_high))
    for low in range(len(faces)):
        reach = faces[low]
        for high in range(low + 1, len(counts)):
            if high > low + 1:
                reach = pattern(reach @ faces[high - 1])
            blocks.append((low, high, reach))
    if dense:
        adjacency = np.zeros((total, total))
        for low, high, reach in blocks:
            adjacency[offsets[low] : offsets[low + 1], offsets[high] : offsets[high + 1]] = reach
        return adjacency + adjacency.T, offsets
    rows, cols = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for low, high, reach in blocks:
        coo = reach.tocoo()
        rows += [coo.row + offsets[low], coo.col + offsets[high]]
        cols += [coo.col + offsets[high], coo.row + offsets[low]]
    row, col = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_matrix((np.ones(row.size), (row, col)), shape=(total, total)), offsets


def barycentric_graph(
    data: ComplexData, dense_threshold: int = DENSE_THRESHOLD
) -> tuple[Matrix, np.ndarray]:
    """1-skeleton of the barycentric subdivision of a complex (CT paper, §4.4.1, Figure 3).

    One vertex per cell; two cells are joined when one is a face of the other, at any rank
    distance (a vertex is joined to its edges *and* to the 2-cells containing it: both pairs
    are comparable in the face poset, whose order complex is the subdivision). Faces are
    found through products of the unsigned incidences ``|B_{r+1}| ... |B_s|``.

    Parameters
    ----------
    data : ComplexData
        One complex (``incidence_r`` keys are used, so unoriented complexes work too).
    dense_threshold : int, default=DENSE_THRESHOLD
        Return a dense array when the complex has at most this many cells, else CSR.

    Returns
    -------
    adjacency : numpy.ndarray or scipy.sparse.csr_matrix, shape = (N, N)
        Symmetric 0/1 adjacency, ``N = n_0 + ... + n_R``; cells ordered by rank, then by
        their index in the complex.
    offsets : numpy.ndarray, shape = (R + 2,)
        Cells of rank ``r`` are the vertices ``offsets[r]:offsets[r + 1]``.
    """
    return _barycentric_of(data, check_single_complex(data, "barycentric_graph"), dense_threshold)


def _barycentric_of(
    data: ComplexData, counts: list[int], dense_threshold: int
) -> tuple[Matrix, np.ndarray]:
    """:func:`barycentric_graph` of an already validated complex."""
    unsigned = boundary_coos(data, signed=False, max_rank=len(counts) - 1)
    return _barycentric_adjacency(unsigned, counts, sum(counts) <= dense_threshold)


def _walk_with_self_loops(adjacency: Matrix) -> Matrix:
    """Return ``A D^{-1}`` plus a weight-1 self-loop on vertices without neighbours."""
    transition, has_weight = column_stochastic(adjacency)
    return transition + diag_matrix((~has_weight).astype(np.float64), not sp.issparse(adjacency))


def barycentric_random_walk(
    data: ComplexData, dense_threshold: int = DENSE_THRESHOLD
) -> tuple[Matrix, np.ndarray]:
    """Random walk on the barycentric 1-skeleton (RWBSPe, CT paper §4.4.2, Figure 5a).

    From a cell the walk moves uniformly to any of its faces or cofaces (at any rank
    distance). A cell with neither (an isolated vertex alone in its complex) stays put.

    Parameters
    ----------
    data : ComplexData
        One complex.
    dense_threshold : int, default=DENSE_THRESHOLD
        Return a dense array when the complex has at most this many cells, else CSR.

    Returns
    -------
    transition : numpy.ndarray or scipy.sparse.csr_matrix, shape = (N, N)
        Left stochastic matrix ``A D^{-1}`` (column ``j`` is the distribution after one step
        from cell ``j``), in the vertex order of :func:`barycentric_graph`.
    offsets : numpy.ndarray, shape = (R + 2,)
        Rank offsets, as in :func:`barycentric_graph`.
    """
    adjacency, offsets = barycentric_graph(data, dense_threshold)
    return _walk_with_self_loops(adjacency), offsets


def _cellular_walk(
    unsigned: Sequence[Coo], counts: Sequence[int], rank: int, dense: bool
) -> Matrix:
    """Appendix C.1 walk of ``rank`` from the unsigned boundaries ``[|B_1|, ..., |B_R|]``."""
    n = counts[rank]
    empty = Coo.build([], [], [], (n, n))
    up = shared_face_counts(unsigned[rank], upper=True) if rank < len(counts) - 1 else empty
    down = shared_face_counts(unsigned[rank - 1], upper=False) if rank > 0 else empty
    walk_up, has_up = column_stochastic(as_matrix(up, dense))
    walk_down, has_down = column_stochastic(as_matrix(down, dense))
    both = has_up & has_down
    share_up = np.where(both, 0.5, has_up.astype(np.float64))
    share_down = np.where(both, 0.5, has_down.astype(np.float64))
    stay = (~(has_up | has_down)).astype(np.float64)
    return (
        scale_columns(walk_up, share_up)
        + scale_columns(walk_down, share_down)
        + diag_matrix(stay, dense)
    )


def cellular_random_walk(
    data: ComplexData, rank: int, dense_threshold: int = DENSE_THRESHOLD
) -> Matrix:
    """Random ``k``-walk on the cells of one rank (CT paper, Appendix C.1, Figure 5b).

    ``RW^up = wA^up (D^up)^{-1}`` moves to an upper adjacent cell with probability
    proportional to the number of shared ``(k+1)``-cells; ``RW^down`` to a lower adjacent
    cell proportionally to the number of shared ``(k-1)``-faces (weights from
    :func:`~topomodelx_attention.data.shared_face_counts`). Column ``j`` of the combined walk
    is ``½ RW^up + ½ RW^down`` when cell ``j`` has both kinds of neighbours, the one walk it
    has otherwise, and ``e_j`` (stay) when it has neither — the case analysis of the paper's
    equation for ``(RW_k)_{σ_i σ_j}``.

    Parameters
    ----------
    data : ComplexData
        One complex (``incidence_r`` keys).
    rank : int
        The rank ``k`` of the walking cells, ``0 <= k <= R``.
    dense_threshold : int, default=DENSE_THRESHOLD
        Return a dense array when the rank has at most this many cells, else CSR.

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_matrix, shape = (n_k, n_k)
        Left stochastic transition matrix (columns sum to 1).
    """
    counts = check_single_complex(data, "cellular_random_walk")
    if not 0 <= rank < len(counts):
        raise ValueError(f"rank must be in 0..{len(counts) - 1}, got {rank}")
    dense = counts[rank] <= dense_threshold
    unsigned = boundary_coos(data, signed=False, max_rank=len(counts) - 1)
    return _cellular_walk(unsigned, counts, rank, dense)


def _split_ranks(rows: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """Split the rows of a global (all-cells) array into per-rank blocks."""
    return [rows[offsets[r] : offsets[r + 1]] for r in range(len(offsets) - 1)]


# ----------------------------------------------------------------------------------------------
# transforms
# ----------------------------------------------------------------------------------------------
class CellPositionalEncoding(BaseTransform):
    """Base class: validates ``dim`` and the input, writes ``pe_r`` for every rank.

    Subclasses implement :meth:`encode`, returning one float64 array of shape ``(n_r, dim)``
    per rank; this class casts them to float32 tensors.

    Parameters
    ----------
    dim : int
        Output width per cell (at least 1).
    """

    eigenvector_based: ClassVar[bool] = False
    """Whether the columns are eigenvectors, i.e. carry an arbitrary sign (see
    :class:`RandomSignFlip`)."""

    per_rank: ClassVar[bool] = False
    """Whether each rank has its own columns (a *local* encoding: one eigenproblem per rank, so
    column ``i`` of ``pe_0`` and of ``pe_1`` are unrelated vectors with independent signs) or
    one global column is split over the ranks. Written as ``data.pe_per_rank`` (a 0/1 long tensor
    of shape ``(1,)``) for :class:`RandomSignFlip`."""

    shown: ClassVar[tuple[str, ...]] = ()
    """The options :func:`repr` shows after ``dim`` (the harness hashes the repr into its cache
    keys: an option that changes the encodings belongs here)."""

    def __init__(self, dim: int) -> None:
        self.dim = check_dim(dim)

    def __repr__(self) -> str:
        params = [f"dim={self.dim}"] + [f"{name}={getattr(self, name)!r}" for name in self.shown]
        return f"{self.__class__.__name__}({', '.join(params)})"

    def encode(self, data: ComplexData, counts: list[int]) -> list[np.ndarray]:
        """Compute the encodings of every rank.

        Parameters
        ----------
        data : ComplexData
            One complex.
        counts : list of int
            Its cell counts ``[n_0, ..., n_R]``.

        Returns
        -------
        list of numpy.ndarray
            ``R + 1`` arrays, entry ``r`` of shape ``(n_r, dim)``.
        """
        raise NotImplementedError

    def forward(self, data: ComplexData) -> ComplexData:
        """Write ``pe_r`` (float32, shape ``(n_r, dim)``) for every rank ``r``.

        Parameters
        ----------
        data : ComplexData
            One complex.

        Returns
        -------
        ComplexData or torch_geometric.data.Data
            The input with the ``pe_r`` keys and ``pe_per_rank`` (see :attr:`per_rank`).
        """
        counts = check_single_complex(data, self.__class__.__name__)
        for rank, encoding in enumerate(self.encode(data, counts)):
            data[f"pe_{rank}"] = torch.from_numpy(np.ascontiguousarray(encoding, dtype=np.float32))
        data.pe_per_rank = torch.tensor([int(self.per_rank)])
        return data


class ZeroPE(CellPositionalEncoding):
    """All-zero encodings: the "zero" baseline of the CT paper's experiments (§5).

    Parameters
    ----------
    dim : int
        Output width per cell.
    """

    def encode(self, data: ComplexData, counts: list[int]) -> list[np.ndarray]:  # noqa: D102
        return [np.zeros((n, self.dim)) for n in counts]


class _EigenvectorPE(CellPositionalEncoding):
    """Base of the Laplacian-eigenvector encodings: validates ``dim`` and the two thresholds.

    ``dense_threshold`` (dense arrays up to this many cells, CSR above) and ``eigh_threshold``
    (dense ``eigh`` up to this many rows, the iterative solvers of
    :func:`~topomodelx_attention.transforms.pe_utils.smallest_eigenpairs` above) are
    documented by :class:`BarycentricSubdivisionPE` and :class:`HodgeLaplacianPE`.
    """

    eigenvector_based = True

    def __init__(self, dim: int, dense_threshold: int, eigh_threshold: int) -> None:
        super().__init__(dim)
        self.dense_threshold = check_dim(dense_threshold, "dense_threshold", minimum=0)
        self.eigh_threshold = check_dim(eigh_threshold, "eigh_threshold", minimum=0)


class BarycentricSubdivisionPE(_EigenvectorPE):
    """BSPe: Laplacian eigenvectors of the barycentric subdivision (CT paper, §4.4.1).

    LapPE of the cells seen as the vertices of :func:`barycentric_graph`: the eigenvectors
    of the normalised Laplacian ``I - D^{-1/2} A D^{-1/2}`` for the ``dim`` smallest
    *non-trivial* eigenvalues, counting multiplicities (Appendix B, equation (5)). One
    eigenproblem for all ranks (a *global* encoding); the rows are split back into ``pe_r``.

    Parameters
    ----------
    dim : int
        Number of eigenvectors (output width).
    keep_kernel : bool, default=False
        Keep the trivial eigenvectors (eigenvalue 0) in front.
    dense_threshold : int, default=DENSE_THRESHOLD
        Graphs with at most this many cells are built as dense arrays, larger ones as CSR.
    eigh_threshold : int, default=EIGH_THRESHOLD
        Graphs with at most this many cells are solved with dense ``eigh``; larger ones with
        the iterative solvers of
        :func:`~topomodelx_attention.transforms.pe_utils.smallest_eigenpairs`.

    Notes
    -----
    *Trivial eigenvectors.* The kernel of the normalised Laplacian is spanned by
    ``D^{1/2} 1_C`` for every connected component ``C`` (an isolated cell is a component of
    its own, with its indicator as kernel vector). It carries no position inside a component,
    and for a disconnected complex any rotation of it is as valid as another. So by default
    *all* eigenvalues ``<= KERNEL_TOL * scale`` are dropped — as many as there are
    components — instead of "the first eigenvector" (the usual LapPE code, correct only for
    connected graphs). Isolated cells therefore get zero rows.

    *Signs and multiplicities.* Signs follow
    :func:`~topomodelx_attention.transforms.pe_utils.canonical_signs` (deterministic; use
    :class:`RandomSignFlip` during training). Inside a repeated eigenvalue the basis returned
    by the solver is deterministic for a given input but not permutation-equivariant.

    Missing columns (fewer than ``dim`` non-trivial eigenvectors) are zeros.
    """

    shown = ("keep_kernel",)

    def __init__(
        self,
        dim: int,
        keep_kernel: bool = False,
        dense_threshold: int = DENSE_THRESHOLD,
        *,
        eigh_threshold: int = EIGH_THRESHOLD,
    ) -> None:
        super().__init__(dim, dense_threshold, eigh_threshold)
        self.keep_kernel = bool(keep_kernel)

    def encode(self, data: ComplexData, counts: list[int]) -> list[np.ndarray]:  # noqa: D102
        adjacency, offsets = _barycentric_of(data, counts, self.dense_threshold)
        _, vectors = smallest_eigenpairs(
            normalized_laplacian(adjacency),
            self.dim,
            drop_kernel=not self.keep_kernel,
            eigh_threshold=self.eigh_threshold,
        )
        return _split_ranks(pad_columns(vectors, self.dim), offsets)


class BarycentricRandomWalkPE(CellPositionalEncoding):
    """RWBSPe: random-walk return probabilities on the barycentric subdivision (§4.4.2).

    ``pe[σ, t - 1] = (RW^t)_{σσ}`` for ``t = 1..dim`` with ``RW = A D^{-1}`` the walk of
    :func:`barycentric_random_walk` (uniform over faces and cofaces of every rank distance;
    a cell without any stays put, so its return probabilities are 1). Global: one walk for
    all ranks. Evaluated on the symmetric similar matrix ``D^{-1/2} A D^{-1/2}`` with half
    the matrix products (:func:`~topomodelx_attention.transforms.pe_utils.return_probabilities`).

    Parameters
    ----------
    dim : int
        Number of walk lengths (output width).
    dense_threshold : int, default=DENSE_THRESHOLD
        Walks on at most this many cells use dense matrix products, larger ones sparse ones.
    """

    def __init__(self, dim: int, dense_threshold: int = DENSE_THRESHOLD) -> None:
        super().__init__(dim)
        self.dense_threshold = check_dim(dense_threshold, "dense_threshold", minimum=0)

    def encode(self, data: ComplexData, counts: list[int]) -> list[np.ndarray]:  # noqa: D102
        adjacency, offsets = _barycentric_of(data, counts, self.dense_threshold)
        # D^{-1/2} A D^{-1/2} (identity on isolated cells): similar to the walk, symmetric
        similar = diag_matrix(np.ones(adjacency.shape[0]), not sp.issparse(adjacency))
        similar = similar - normalized_laplacian(adjacency)
        return _split_ranks(return_probabilities(similar, self.dim, symmetric=True), offsets)


class CellularRandomWalkPE(CellPositionalEncoding):
    """RWPe: return probabilities of the cellular random walk of each rank (Appendix C.1).

    ``pe_r[σ, t - 1] = (RW_r^t)_{σσ}`` for ``t = 1..dim`` with ``RW_r`` the upper/lower walk
    of :func:`cellular_random_walk` (weights: numbers of shared cofaces / faces; ½–½ mixing
    when a cell has both kinds of neighbours; a self-loop when it has neither). Local: one
    walk per rank.

    Parameters
    ----------
    dim : int
        Number of walk lengths (output width).
    dense_threshold : int, default=DENSE_THRESHOLD
        Walks on at most this many cells use dense matrix products, larger ones sparse ones.
    """

    per_rank = True

    def __init__(self, dim: int, dense_threshold: int = DENSE_THRESHOLD) -> None:
        super().__init__(dim)
        self.dense_threshold = check_dim(dense_threshold, "dense_threshold", minimum=0)

    def encode(self, data: ComplexData, counts: list[int]) -> list[np.ndarray]:  # noqa: D102
        unsigned = boundary_coos(data, signed=False, max_rank=len(counts) - 1)
        return [
            return_probabilities(
                _cellular_walk(unsigned, counts, rank, n <= self.dense_threshold), self.dim
            )
            for rank, n in enumerate(counts)
        ]


def hodge_laplacians(
    signed: Sequence[Coo], counts: Sequence[int], dense_threshold: int = DENSE_THRESHOLD
) -> list[Matrix]:
    """Hodge Laplacians ``L_r = B_rᵀ B_r + B_{r+1} B_{r+1}ᵀ`` of every rank.

    Parameters
    ----------
    signed : sequence of Coo
        Oriented boundaries ``[B_1, ..., B_R]`` (e.g. from
        :func:`~topomodelx_attention.transforms.pe_utils.boundary_coos`).
    counts : sequence of int
        ``[n_0, ..., n_R]``.
    dense_threshold : int, default=DENSE_THRESHOLD
        Dense arrays when the complex has at most this many cells, CSR matrices otherwise.

    Returns
    -------
    list of numpy.ndarray or scipy.sparse.csr_matrix
        ``L_r`` of shape ``(n_r, n_r)`` for ``r = 0..R``.
    """
    dense = sum(counts) <= dense_threshold
    boundaries = [as_matrix(b, dense) for b in signed]
    out = []
    for rank, n in enumerate(counts):
        laplacian = np.zeros((n, n)) if dense else sp.csr_matrix((n, n))
        if rank > 0:
            laplacian = laplacian + boundaries[rank - 1].T @ boundaries[rank - 1]
        if rank < len(counts) - 1:
            laplacian = laplacian + boundaries[rank] @ boundaries[rank].T
        out.append(laplacian if dense else sp.csr_matrix(laplacian))
    return out


def _nonzero_gram_pairs(
    boundary: Coo, k: int, eigh_threshold: int, dense_threshold: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return the ``k`` smallest nonzero eigenpairs of ``Bᵀ B`` (vectors of length ``n_cols``).

    Solved on the smaller of ``Bᵀ B`` and ``B Bᵀ``: they share their nonzero eigenvalues, and
    ``B Bᵀ u = λ u`` gives the unit eigenvector ``v = Bᵀ u / √λ`` of ``Bᵀ B``.
    """
    n, m = boundary.shape
    if n == 0 or m == 0:
        return np.zeros(0), np.zeros((m, 0))
    matrix = as_matrix(boundary, max(n, m) <= dense_threshold)
    small_side = n < m
    gram = matrix @ matrix.T if small_side else matrix.T @ matrix
    values, vectors = smallest_eigenpairs(gram, k, drop_kernel=True, eigh_threshold=eigh_threshold)
    if small_side:  # vectors are u (length n); v = Bᵀ u / sqrt(λ)
        vectors = np.asarray(matrix.T @ vectors) / np.sqrt(values)[None, :]
    return values, vectors


class HodgeLaplacianPE(_EigenvectorPE):
    """HodgeLapPE: eigenvectors of the unnormalised Hodge Laplacian of each rank (§4.4.1).

    ``pe_r`` holds the eigenvectors of ``L_r = B_rᵀ B_r + B_{r+1} B_{r+1}ᵀ`` (signed
    boundaries) for its ``dim`` smallest eigenvalues, counting multiplicities. Local: one
    eigenproblem per rank. Appendix B (Examples B.1–B.2) explains why this is a weak
    encoding; it is provided as the paper's baseline.

    Parameters
    ----------
    dim : int
        Number of eigenvectors per rank (output width).
    include_harmonic : bool, default=False
        Also return the harmonic eigenvectors (kernel of ``L_r``), in front.
    dense_threshold : int, default=DENSE_THRESHOLD
        Operators with at most this many rows are built as dense arrays, larger ones as CSR.
    eigh_threshold : int, default=EIGH_THRESHOLD
        Eigenproblems with at most this many rows use dense ``eigh``, larger ones the
        iterative solvers of :func:`~topomodelx_attention.transforms.pe_utils.smallest_eigenpairs`.

    Notes
    -----
    *Kernel.* ``dim ker L_r`` is the Betti number ``β_r``: it is not always 1. Dropping "the
    first eigenvector" blindly (as LapPE code does) would discard an informative mode whenever
    ``β_r = 0`` — e.g. the edges of a molecule whose rings are all filled by 2-cells — and keep
    a harmonic one whenever ``β_r > 1``. By default the whole numerical kernel (eigenvalues
    ``<= KERNEL_TOL * scale``) is dropped, for every rank: on rank 0 it is the
    constant-per-component space (no position), on higher ranks a harmonic space whose basis
    is arbitrary up to rotation when ``β_r > 1``. ``include_harmonic=True`` keeps the paper's
    literal definition ("the ``k`` smallest eigenvalues"), harmonic vectors first (Example B.2
    shows one). Signs: :func:`~topomodelx_attention.transforms.pe_utils.canonical_signs`.

    *Computation.* By the Hodge decomposition (equation (7)) the nonzero spectrum of ``L_r``
    is the union of the nonzero spectra of ``L_r^down = B_rᵀ B_r`` and ``L_r^up = B_{r+1}
    B_{r+1}ᵀ``, with orthogonal eigenvectors. Each part is solved on the smaller of its two
    Gram matrices (``B_r B_rᵀ`` has ``n_{r-1}`` rows): a 25-vertex graph lifted with its
    chordless cycles has ~1,300 2-cells but only ~110 edges, so ``L_2`` (a kernel of
    dimension ~1,200, on which ARPACK did not converge) reduces to a 110 × 110 problem. This
    path is taken for complexes of more than ``dense_threshold`` cells; smaller ones, and
    ``include_harmonic=True`` (the kernel is needed), solve ``L_r`` itself.
    """

    per_rank = True

    shown = ("include_harmonic",)

    def __init__(
        self,
        dim: int,
        include_harmonic: bool = False,
        dense_threshold: int = DENSE_THRESHOLD,
        *,
        eigh_threshold: int = EIGH_THRESHOLD,
    ) -> None:
        super().__init__(dim, dense_threshold, eigh_threshold)
        self.include_harmonic = bool(include_harmonic)

    def encode(self, data: ComplexData, counts: list[int]) -> list[np.ndarray]:  # noqa: D102
        signed = boundary_coos(data, signed=True, max_rank=len(counts) - 1)
        if self.include_harmonic or sum(counts) <= self.dense_threshold:
            # small complexes: one dense eigh of L_r is cheapest
            return [
                pad_columns(
                    smallest_eigenpairs(
                        laplacian,
                        self.dim,
                        drop_kernel=not self.include_harmonic,
                        eigh_threshold=self.eigh_threshold,
                    )[1],
                    self.dim,
                )
                for laplacian in hodge_laplacians(signed, counts, self.dense_threshold)
            ]
        out = []
        for rank, n in enumerate(counts):
            parts = []
            if rank > 0:  # L_r^down = B_rᵀ B_r
                parts.append(self._gram(signed[rank - 1]))
            if rank < len(counts) - 1:  # L_r^up = B_{r+1} B_{r+1}ᵀ = (B_{r+1}ᵀ)ᵀ (B_{r+1}ᵀ)
                parts.append(self._gram(signed[rank].T))
            values = np.concatenate([np.zeros(0), *(v for v, _ in parts)])
            vectors = np.hstack([np.zeros((n, 0)), *(w for _, w in parts)])
            order = np.argsort(values, kind="stable")[: self.dim]
            out.append(pad_columns(canonical_signs(vectors[:, order]), self.dim))
        return out

    def _gram(self, boundary: Coo) -> tuple[np.ndarray, np.ndarray]:
        return _nonzero_gram_pairs(boundary, self.dim, self.eigh_threshold, self.dense_threshold)


class RandomSignFlip(BaseTransform):
    """Flip the sign of whole eigenvector columns at random (training-time augmentation).

    Eigenvector encodings are defined up to the sign of each eigenvector (CT paper,
    Appendix B; TokenGT, Appendix A.3.1); multiplying each column by a random ``±1`` at every
    training step teaches the model that ambiguity. One sign is drawn per **(complex,
    column)** — never per cell — and, depending on the encoding:

    * *global* encodings (BSPe: one eigenproblem over all cells) split **one** eigenvector
      over ``pe_0, pe_1, ...``: one sign shared by all ranks (``per_rank=False``);
    * *local* encodings (HodgeLapPE, TopoSlepiansPE: one eigenproblem per rank) have
      unrelated vectors in column ``i`` of each rank: one independent sign per **(complex,
      rank, column)** (``per_rank=True``).

    On a batch (after :class:`~torch_geometric.loader.DataLoader`) each complex gets its own
    signs, through ``batch_r`` (``batch_0`` or ``batch`` for ``node_id``).

    Parameters
    ----------
    keys : sequence of str, optional
        Keys to flip. ``"pe"`` means every ``pe_r``. Default: every ``pe_r`` key and
        ``node_id`` that the input has. Only use it after eigenvector encodings (those with
        ``eigenvector_based = True``: :class:`BarycentricSubdivisionPE`,
        :class:`HodgeLaplacianPE`, topological Slepians, and
        :class:`~topomodelx_attention.transforms.node_ids.LaplacianNodeId`): random-walk
        return probabilities have no sign ambiguity.
    p : float, default=0.5
        Probability that a column is negated.
    generator : torch.Generator, optional
        Random generator (default: PyTorch's global one, reseeded per DataLoader worker).
    per_rank : bool, optional
        Independent signs per rank (local encodings) or shared ones (global encodings).
        Default ``None``: read ``data.pe_per_rank``, which every
        :class:`CellPositionalEncoding` writes (``True`` for :class:`HodgeLaplacianPE`, the
        Slepians and :class:`CellularRandomWalkPE`; ``False`` for the barycentric ones); when
        the input has no such key (data encoded before it existed), signs are shared — give
        ``per_rank`` explicitly then.

    Notes
    -----
    Keys are grouped by their prefix (``pe_0, pe_1, ...`` form the group ``pe``); each group
    gets its own sign table of shape ``(num_complexes, width)``, or one per key with
    ``per_rank``. Input tensors are never modified in place.
    """

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        p: float = 0.5,
        generator: torch.Generator | None = None,
        *,
        per_rank: bool | None = None,
    ) -> None:
        if isinstance(keys, str):
            raise TypeError(
                f"keys must be a list of names, got the string {keys!r}; write [{keys!r}]"
            )
        self.keys = None if keys is None else tuple(keys)
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"p must be a probability in [0, 1], got {p}")
        self.p = float(p)
        self.generator = generator
        self.per_rank = None if per_rank is None else bool(per_rank)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(keys={self.keys}, p={self.p}, per_rank={self.per_rank})"

    def _groups(self, data: Data) -> dict[str, list[str]]:
        """Map group name → keys to flip."""
        groups: dict[str, list[str]] = {}
        wanted = self.keys if self.keys is not None else ("pe", "node_id")
        for name in wanted:
            if name in data.keys() and isinstance(data[name], Tensor):
                groups.setdefault(name, []).append(name)
                continue
            ranked = sorted(
                (key for key in data.keys() if (m := _RANK_KEY.match(key)) and m.group(1) == name),
                key=lambda key: int(_RANK_KEY.match(key).group(2)),
            )
            if ranked:
                groups[name] = ranked
            elif self.keys is not None:
                raise ValueError(
                    f"RandomSignFlip: the input has no key {name!r} (nor {name}_r keys); "
                    "apply the positional encoding first or fix keys"
                )
        if not groups:
            raise ValueError(
                "RandomSignFlip: the input has no pe_r or node_id keys; apply an eigenvector "
                "positional encoding or LaplacianNodeId first"
            )
        return groups

    @staticmethod
    def _complex_index(data: Data, key: str, rows: int) -> Tensor:
        """Complex index of every row of ``data[key]``."""
        match = _RANK_KEY.match(key)
        candidates = [f"batch_{match.group(2)}"] if match else []
        if key == "node_id":
            candidates = ["batch_0", "batch"]
        for name in candidates:
            if name in data.keys() and data[name] is not None and data[name].numel() == rows:
                return data[name].long()
        return torch.zeros(rows, dtype=torch.long)

    def forward(self, data: Data) -> Data:
        """Multiply each selected column of each complex by a random sign.

        Parameters
        ----------
        data : torch_geometric.data.Data
            A complex, a graph, or a batch of them, carrying the keys to flip.

        Returns
        -------
        torch_geometric.data.Data
            A shallow copy with the flipped tensors.
        """
        per_rank = self.per_rank
        if per_rank is None:
            flag = data.get("pe_per_rank", None)
            per_rank = isinstance(flag, Tensor) and bool(flag.any())
        for keys in self._groups(data).values():
            widths = {data[key].size(-1) for key in keys}
            if len(widths) != 1 and not per_rank:
                raise ValueError(
                    f"RandomSignFlip: keys {keys} have different widths {sorted(widths)}"
                )
            index = {key: self._complex_index(data, key, data[key].size(0)) for key in keys}
            num = 1 + max((int(i.max()) for i in index.values() if i.numel()), default=0)
            shared = None
            for key in keys:
                if shared is None or per_rank:
                    flip = torch.rand((num, data[key].size(-1)), generator=self.generator) < self.p
                    shared = 1.0 - 2.0 * flip.float()
                value = data[key]
                data[key] = value * shared[index[key]].to(value.dtype)
        return data
