"""Shared numerics of the positional-encoding transforms.

One helper per idea, used by every encoding:

* :func:`check_dim` / :func:`check_single_complex` — argument and input validation;
* :func:`boundary_coos` / :func:`as_matrix` — the boundary matrices of a complex as
  :class:`~topomodelx_attention.data.coo.Coo`, then as a dense array (small complexes, where
  SciPy's per-call overhead would dominate) or a CSR matrix (large ones). The numerical
  helpers below accept either;
* :func:`pad_columns` — zero-padding (or truncation) to the output width ``dim``;
* :func:`canonical_signs` — the deterministic sign convention of eigenvector encodings;
* :func:`smallest_eigenpairs` — symmetric eigensolver: dense :func:`numpy.linalg.eigh` for
  small matrices, :func:`scipy.sparse.linalg.eigsh` (shift-invert) above a size threshold;
* :func:`normalized_laplacian` — ``I - D^{-1/2} A D^{-1/2}`` with isolated vertices handled;
* :func:`column_stochastic` and :func:`return_probabilities` — random walks and
  ``diag(RW^t)``, ``t = 1..steps``, as repeated matrix products (sparse for large operators).

Everything is computed in float64; the transforms cast their outputs to float32.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import eigsh
from torch import Tensor
from torch_geometric.data import Data

from topomodelx_attention.data import ComplexData
from topomodelx_attention.data.coo import Coo

__all__ = [
    "DENSE_THRESHOLD",
    "KERNEL_TOL",
    "Matrix",
    "as_matrix",
    "boundary_coos",
    "canonical_signs",
    "check_dim",
    "check_single_complex",
    "column_stochastic",
    "diag_matrix",
    "normalized_laplacian",
    "pad_columns",
    "pattern",
    "return_probabilities",
    "scale_columns",
    "smallest_eigenpairs",
]

DENSE_THRESHOLD: int = 512
"""Operators with at most this many rows are dense arrays (``eigh``, dense products); larger
ones are CSR matrices (``eigsh``, sparse products)."""

KERNEL_TOL: float = 1e-8
"""Eigenvalues ``<= KERNEL_TOL * scale`` count as zero (``scale`` bounds the spectral radius)."""

Matrix = np.ndarray | sp.csr_matrix
"""A dense float64 array or a SciPy CSR matrix."""


def check_dim(dim: int, name: str = "dim", minimum: int = 1) -> int:
    """Validate an output width (or another integer argument).

    Parameters
    ----------
    dim : int
        Number of output columns per cell.
    name : str, default="dim"
        Argument name used in error messages.
    minimum : int, default=1
        Smallest valid value.

    Returns
    -------
    int
        ``dim`` as a Python ``int``.
    """
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer >= {minimum}, got {dim!r} ({type(dim).__name__})"
        )
    if dim < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {dim}")
    return int(dim)


def check_single_complex(data: object, transform: str) -> list[int]:
    """Check that ``data`` is one :class:`ComplexData` (not a batch) and return its cell counts.

    Parameters
    ----------
    data : object
        The transform's input.
    transform : str
        Name of the calling transform, for error messages.

    Returns
    -------
    list of int
        ``[n_0, ..., n_R]`` (read from ``shape``, falling back to :meth:`ComplexData.cell_counts`).
    """
    if not isinstance(data, ComplexData):
        hint = (
            " (a graph: lift it first, e.g. with CellCycleLifting or SimplicialCliqueLifting)"
            if isinstance(data, Data)
            else ""
        )
        raise TypeError(f"{transform} expects a ComplexData, got {type(data).__name__}{hint}")
    shape = getattr(data, "shape", None)
    if isinstance(shape, Tensor) and shape.dim() == 2 and shape.size(0) > 1:
        raise ValueError(
            f"{transform} encodes one complex at a time, got a batch of {shape.size(0)}; "
            "apply it per complex (as a dataset pre_transform), before batching"
        )
    if isinstance(shape, Tensor) and shape.dim() == 2:
        return shape[0].tolist()
    counts = data.cell_counts()
    if "batch_0" in data and data.batch_0.numel() and int(data.batch_0.max()) > 0:
        raise ValueError(f"{transform} encodes one complex at a time, got a batch")
    return counts


def boundary_coos(data: ComplexData, signed: bool, max_rank: int | None = None) -> list[Coo]:
    """Boundary matrices ``[B_1, ..., B_R]`` of one complex as :class:`Coo` triplets.

    Reads the coalesced ``signed_incidence_r`` (``signed``) or ``incidence_r`` tensors
    without copying them through SciPy.

    Parameters
    ----------
    data : ComplexData
        One complex.
    signed : bool
        Oriented (``B_r``) or unsigned (``|B_r|``) boundaries.
    max_rank : int, optional
        ``R`` when already known (default: :attr:`ComplexData.max_rank`).

    Returns
    -------
    list of Coo
        ``B_r`` of shape ``(n_{r-1}, n_r)`` for ``r = 1..R``.
    """
    name = "signed_incidence" if signed else "incidence"
    out = []
    for rank in range(1, (data.max_rank if max_rank is None else max_rank) + 1):
        tensor = getattr(data, f"{name}_{rank}", None)
        if tensor is None:
            tensor = data.neighborhood(name, rank)  # raises a ValueError naming the key
        tensor = tensor.detach().cpu()
        if not tensor.is_coalesced():
            out.append(Coo.from_torch(tensor))
            continue
        rows, cols = tensor._indices().numpy().astype(np.int64)
        vals = tensor._values().numpy().astype(np.float64)
        out.append(Coo(rows, cols, vals, (int(tensor.shape[0]), int(tensor.shape[1]))))
    return out


def as_matrix(coo: Coo, dense: bool) -> Matrix:
    """Convert a :class:`Coo` to a dense float64 array or a CSR matrix.

    Parameters
    ----------
    coo : Coo
        Canonical triplets (no duplicates).
    dense : bool
        Dense output.

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_matrix, shape = coo.shape
        The matrix.
    """
    if not dense:
        return coo.to_scipy()
    out = np.zeros(coo.shape)
    out[coo.rows, coo.cols] = coo.vals
    return out


def pattern(matrix: Matrix) -> Matrix:
    """0/1 pattern of the nonzero entries, in the same format."""
    if sp.issparse(matrix):
        out = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
        out.eliminate_zeros()
        out.data[:] = 1.0
        return out
    return (matrix != 0).astype(np.float64)


def diag_matrix(values: np.ndarray, dense: bool) -> Matrix:
    """Diagonal matrix, dense or CSR."""
    return np.diag(values) if dense else sp.csr_matrix(sp.diags(values))


def scale_columns(matrix: Matrix, factors: np.ndarray) -> Matrix:
    """Return ``matrix @ diag(factors)`` in the same format."""
    if sp.issparse(matrix):
        return sp.csr_matrix(matrix @ sp.diags(factors))
    return matrix * factors[None, :]


def pad_columns(array: np.ndarray, dim: int) -> np.ndarray:
    """Return ``array`` with exactly ``dim`` columns: truncated, or zero-padded on the right.

    Parameters
    ----------
    array : numpy.ndarray, shape = (n, k)
        Column features.
    dim : int
        Output width.

    Returns
    -------
    numpy.ndarray, shape = (n, dim)
        ``array[:, :dim]`` followed by ``max(0, dim - k)`` zero columns (float64).
    """
    n, k = array.shape
    out = np.zeros((n, dim), dtype=np.float64)
    width = min(k, dim)
    out[:, :width] = array[:, :width]
    return out


def canonical_signs(vectors: np.ndarray, tol: float = 1e-6, chop: float = 1e-12) -> np.ndarray:
    """Fix the sign of each column of an eigenvector matrix deterministically.

    A unit eigenvector of a simple eigenvalue is defined up to ``±1``. The convention: the
    third moment ``Σ_i x_i³`` is made positive — a permutation-invariant choice, so the
    encodings of a relabelled complex are the relabelled encodings. Columns whose third moment
    vanishes (``|Σ x³| <= tol Σ |x|³``, e.g. eigenvectors that a symmetry maps to their
    negative, for which no equivariant choice exists) fall back to making their first
    largest-magnitude entry positive. Zero columns are left as they are. Entries of magnitude
    below ``chop`` (solver round-off on exact zeros, e.g. on isolated cells) are first set to
    exactly zero.

    Parameters
    ----------
    vectors : numpy.ndarray, shape = (n, k)
        Unit eigenvectors as columns.
    tol : float, default=1e-6
        Relative threshold under which the third moment counts as zero.
    chop : float, default=1e-12
        Absolute threshold under which entries are zeroed.

    Returns
    -------
    numpy.ndarray, shape = (n, k)
        The columns multiplied by ``±1``.
    """
    if vectors.size == 0:
        return vectors
    vectors = np.where(np.abs(vectors) < chop, 0.0, vectors)
    cubes = vectors * vectors * vectors
    moment = cubes.sum(axis=0)
    signs = np.sign(moment)
    ambiguous = np.abs(moment) <= tol * np.abs(cubes).sum(axis=0)
    if ambiguous.any():
        columns = np.flatnonzero(ambiguous)
        largest = np.abs(vectors[:, columns]).argmax(axis=0)
        signs[columns] = np.sign(vectors[largest, columns])
    signs[signs == 0] = 1.0
    return vectors * signs


def _spectral_scale(matrix: np.ndarray | sp.spmatrix) -> float:
    """Upper bound of the spectral radius (largest absolute row sum), at least 1."""
    if sp.issparse(matrix):
        row_sums = np.asarray(abs(matrix).sum(axis=1)).ravel()
    else:
        row_sums = np.abs(matrix).sum(axis=1)
    return max(1.0, float(row_sums.max())) if row_sums.size else 1.0


def smallest_eigenpairs(
    matrix: np.ndarray | sp.spmatrix,
    k: int,
    drop_kernel: bool,
    dense_threshold: int = DENSE_THRESHOLD,
    tol: float = KERNEL_TOL,
) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of the ``k`` smallest eigenvalues of a symmetric positive semi-definite matrix.

    Symmetric solvers only: :func:`numpy.linalg.eigh` on the dense matrix when it has at most
    ``dense_threshold`` rows, otherwise :func:`scipy.sparse.linalg.eigsh` in shift-invert mode
    around a small negative shift (deterministic start vector), asking for more pairs until
    ``k`` non-kernel ones are found (falling back to the dense solver when that would need
    almost all of them).

    Parameters
    ----------
    matrix : numpy.ndarray or scipy.sparse matrix, shape = (n, n)
        Symmetric positive semi-definite matrix (a Laplacian).
    k : int
        Number of eigenpairs wanted (fewer are returned when fewer exist).
    drop_kernel : bool
        Skip the eigenvalues ``<= tol * scale`` (the numerical kernel; ``scale`` is the spectral
        radius, or its bound the largest absolute row sum on the ``eigsh`` path) before
        taking ``k``.
    dense_threshold : int, default=DENSE_THRESHOLD
        Largest size solved densely.
    tol : float, default=KERNEL_TOL
        Relative kernel tolerance.

    Returns
    -------
    values : numpy.ndarray, shape = (m,)
        Ascending eigenvalues, ``m <= k``.
    vectors : numpy.ndarray, shape = (n, m)
        Unit eigenvectors as columns, signs fixed by :func:`canonical_signs`.
    """
    n = matrix.shape[0]
    if n == 0 or k < 1:
        return np.zeros(0), np.zeros((n, 0))
    values = vectors = None
    if n > dense_threshold:
        threshold = tol * _spectral_scale(matrix)
        values, vectors = _eigsh_smallest(sp.csr_matrix(matrix), k, drop_kernel, threshold)
    if values is None:
        dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix, dtype=np.float64)
        values, vectors = np.linalg.eigh(dense)
        threshold = tol * max(1.0, float(np.abs(values).max()))
    start = int(np.searchsorted(values, threshold, side="right")) if drop_kernel else 0
    return values[start : start + k], canonical_signs(vectors[:, start : start + k])


def _eigsh_smallest(
    matrix: sp.csr_matrix, k: int, drop_kernel: bool, threshold: float
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Shift-invert ``eigsh`` for the smallest eigenpairs; ``(None, None)`` means "use dense"."""
    n = matrix.shape[0]
    start = np.random.default_rng(0).standard_normal(n)  # deterministic Krylov start
    sigma = -1e-2 * _spectral_scale(matrix)
    wanted = k + (8 if drop_kernel else 0)
    while True:
        if wanted >= n - 1:
            return None, None
        values, vectors = eigsh(
            matrix.astype(np.float64), k=wanted, sigma=sigma, which="LM", v0=start
        )
        order = np.argsort(values)
        values, vectors = values[order], vectors[:, order]
        found = int((values > threshold).sum()) if drop_kernel else wanted
        if found >= k:
            return values, vectors
        wanted = min(2 * wanted, n - 1)


def normalized_laplacian(adjacency: Matrix) -> Matrix:
    """Symmetric normalised Laplacian ``D^{-1/2} (D - A) D^{-1/2}``.

    Equals ``I - D^{-1/2} A D^{-1/2}`` on vertices of positive degree. An isolated vertex gets
    a zero row and column (the networkx / SciPy convention) instead of a division by zero: it
    is a connected component of its own and contributes one kernel vector, its indicator.

    Parameters
    ----------
    adjacency : numpy.ndarray or scipy.sparse.csr_matrix, shape = (n, n)
        Symmetric non-negative weights, no diagonal.

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_matrix, shape = (n, n)
        The Laplacian (same format as the input), eigenvalues in ``[0, 2]``.
    """
    degree = np.asarray(adjacency.sum(axis=1), dtype=np.float64).ravel()
    connected = degree > 0
    inv_sqrt = np.zeros_like(degree)
    inv_sqrt[connected] = 1.0 / np.sqrt(degree[connected])
    if sp.issparse(adjacency):
        scaling = sp.diags(inv_sqrt)
        return sp.csr_matrix(sp.diags(connected.astype(np.float64)) - scaling @ adjacency @ scaling)
    laplacian = -(inv_sqrt[:, None] * adjacency * inv_sqrt[None, :])
    laplacian[np.diag_indices_from(laplacian)] += connected
    return laplacian


def column_stochastic(weights: Matrix) -> tuple[Matrix, np.ndarray]:
    """Divide every column by its sum: ``W D^{-1}`` (left stochastic where the sum is positive).

    Parameters
    ----------
    weights : numpy.ndarray or scipy.sparse.csr_matrix, shape = (n, n)
        Non-negative transition weights, ``weights[i, j]`` from ``j`` to ``i``.

    Returns
    -------
    transition : numpy.ndarray or scipy.sparse.csr_matrix, shape = (n, n)
        Columns summing to 1, or all zero for columns of zero weight (same format as input).
    has_weight : numpy.ndarray of bool, shape = (n,)
        Which columns have positive weight.
    """
    degree = np.asarray(weights.sum(axis=0), dtype=np.float64).ravel()
    has_weight = degree > 0
    inverse = np.zeros_like(degree)
    inverse[has_weight] = 1.0 / degree[has_weight]
    return scale_columns(weights, inverse), has_weight


def return_probabilities(transition: Matrix, steps: int, symmetric: bool = False) -> np.ndarray:
    """Return probabilities ``diag(RW^t)`` for ``t = 1..steps`` (RWPe, Dwivedi et al.).

    The powers are built by repeated products with ``RW`` (dense products for a dense
    input, SciPy sparse products for a CSR input). For a symmetric matrix ``S`` only the
    powers up to ``ceil(steps / 2)`` are formed: ``diag(S^{2h}) = Σ_j (S^h)_{ij}²`` and
    ``diag(S^{2h+1}) = Σ_j (S^h)_{ij} (S^{h+1})_{ij}`` — half the products, and less fill-in
    on the sparse path. A reversible walk ``RW = A D^{-1}`` has the same return
    probabilities as its symmetric similar ``D^{-1/2} RW D^{1/2} = D^{-1/2} A D^{-1/2}``.

    Parameters
    ----------
    transition : numpy.ndarray or scipy.sparse.csr_matrix, shape = (n, n)
        Random-walk matrix (left or right stochastic: the diagonal of the powers is the same),
        or a symmetric matrix similar to it.
    steps : int
        Number of walk lengths.
    symmetric : bool, default=False
        Whether ``transition`` is symmetric (enables the half-power evaluation).

    Returns
    -------
    numpy.ndarray, shape = (n, steps)
        Column ``t - 1`` is the probability of being back at the start after ``t`` steps.
    """
    n = transition.shape[0]
    out = np.zeros((n, steps), dtype=np.float64)
    if n == 0 or steps < 1:
        return out
    if not symmetric:
        power = transition
        for t in range(steps):
            out[:, t] = power.diagonal()
            if t + 1 < steps:
                power = power @ transition
        return out

    def row_dots(left: Matrix, right: Matrix) -> np.ndarray:
        if sp.issparse(left):
            return np.asarray(left.multiply(right).sum(axis=1)).ravel()
        return np.einsum("ij,ij->i", left, right)

    powers = [transition]  # powers[h - 1] = S^h
    for _ in range((steps + 1) // 2 - 1):
        powers.append(powers[-1] @ transition)
    out[:, 0] = transition.diagonal()
    for t in range(2, steps + 1):
        half = t // 2
        other = powers[half - 1] if t % 2 == 0 else powers[half]
        out[:, t - 1] = row_dots(powers[half - 1], other)
    return out
