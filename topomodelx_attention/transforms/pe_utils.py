"""Shared numerics of the positional-encoding transforms.

One helper per idea, used by every encoding:

* :func:`check_dim` / :func:`check_single_complex` — argument and input validation;
* :func:`boundary_coos` / :func:`as_matrix` — the boundary matrices of a complex as
  :class:`~topomodelx_attention.data.coo.Coo`, then as a dense array (small complexes, where
  SciPy's per-call overhead would dominate) or a CSR matrix (large ones). The numerical
  helpers below accept either;
* :func:`pad_columns` — zero-padding (or truncation) to the output width ``dim``;
* :func:`canonical_signs` — the deterministic sign convention of eigenvector encodings;
* :func:`smallest_eigenpairs` — symmetric eigensolver: dense :func:`numpy.linalg.eigh` up to
  a few thousand rows, :func:`scipy.sparse.linalg.eigsh` (shift-invert) above, with bounded
  restarts and fallbacks (dense ``eigh``, LOBPCG) on any solver failure, whatever the BLAS
  (``benchmarks/pe_blas.py`` runs the PE tests under several OpenBLAS kernels);
* :func:`normalized_laplacian` — ``I - D^{-1/2} A D^{-1/2}`` with isolated vertices handled;
* :func:`column_stochastic` and :func:`return_probabilities` — random walks and
  ``diag(RW^t)``, ``t = 1..steps``, as repeated matrix products (sparse for large operators).

Everything is computed in float64; the transforms cast their outputs to float32.
"""

from __future__ import annotations

import numbers
import re
import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import (
    ArpackError,
    ArpackNoConvergence,
    LinearOperator,
    eigsh,
    lobpcg,
)
from torch import Tensor
from torch_geometric.data import Data

from topomodelx_attention.data import ComplexData
from topomodelx_attention.data.coo import Coo

_TOPOBENCH_KEY = re.compile(r"^(x|incidence)_(\d+)$")

__all__ = [
    "DENSE_FALLBACK",
    "DENSE_THRESHOLD",
    "EIGH_THRESHOLD",
    "KERNEL_TOL",
    "MAX_ITERATIVE_PAIRS",
    "RESIDUAL_TOL",
    "Matrix",
    "as_matrix",
    "boundary_coos",
    "canonical_signs",
    "check_dim",
    "check_single_complex",
    "column_stochastic",
    "diag_matrix",
    "normalized_laplacian",
    "orient_boundaries",
    "pad_columns",
    "pattern",
    "return_probabilities",
    "scale_columns",
    "smallest_eigenpairs",
    "topobench_cell_counts",
]

DENSE_THRESHOLD: int = 512
"""Operators with at most this many rows are dense arrays (dense products); larger ones are
CSR matrices (sparse products). The eigensolver choice is :data:`EIGH_THRESHOLD`."""

EIGH_THRESHOLD: int = 2048
"""Symmetric eigenproblems of at most this size are solved by dense ``eigh`` (about 1 s at
1,500, 6 s at 2,048 on one core), larger ones iteratively (:func:`smallest_eigenpairs`)."""

DENSE_FALLBACK: int = 4096
"""Largest size solved by dense ``eigh`` when the iterative solvers fail (about a minute)."""

MAX_ITERATIVE_PAIRS: int = 256
"""Most eigenpairs asked from ARPACK at once (its cost grows with their square)."""

_FILL_DENSITY = 0.02
"""Sparse walks denser than this (and at most ``DENSE_FALLBACK`` rows) are powered densely."""

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
    """Check that ``data`` is one complex (not a batch) and return its cell counts.

    Accepts a :class:`ComplexData` and any PyG :class:`~torch_geometric.data.Data` carrying
    the TopoBench keys of a lifted complex (``x_r`` and/or ``incidence_r``, see
    :func:`topobench_cell_counts`).

    Parameters
    ----------
    data : object
        The transform's input.
    transform : str
        Name of the calling transform, for error messages.

    Returns
    -------
    list of int
        ``[n_0, ..., n_R]`` (read from ``shape``, falling back to :meth:`ComplexData.cell_counts`
        or to the shapes of ``x_r`` / ``incidence_r``).
    """
    if not isinstance(data, Data):
        raise TypeError(
            f"{transform} expects a ComplexData or a torch_geometric Data with TopoBench keys "
            f"(x_r, incidence_r), got {type(data).__name__}"
        )
    if not isinstance(data, ComplexData):
        return topobench_cell_counts(data, transform)
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


def topobench_cell_counts(data: Data, transform: str) -> list[int]:
    """Cell counts ``[n_0, ..., n_R]`` of one complex stored with TopoBench keys.

    TopoBench's liftings produce a plain :class:`~torch_geometric.data.Data` with ``x_r``
    (features), ``incidence_r`` (**unsigned** ``(n_{r-1}, n_r)`` sparse tensors), Laplacians
    and adjacencies, and often ``shape`` (a list of cell counts). ``R`` is the largest rank
    with an ``x_r`` or ``incidence_r`` key; ``n_r`` comes from ``shape`` when present, else
    from ``x_r`` rows, else from the incidence shapes.

    Parameters
    ----------
    data : torch_geometric.data.Data
        One lifted complex (not a batch).
    transform : str
        Name of the calling transform, for error messages.

    Returns
    -------
    list of int
        ``[n_0, ..., n_R]``.
    """
    ranks = {
        int(m.group(2))
        for key in data.keys()
        if (m := _TOPOBENCH_KEY.match(key)) and (m.group(1) == "x" or int(m.group(2)) >= 1)
    }
    if not ranks:
        raise TypeError(
            f"{transform} expects a ComplexData or a Data with TopoBench keys (x_0, incidence_1, "
            f"...), got a {type(data).__name__} without them (a graph: lift it first, e.g. with "
            "CellCycleLifting or SimplicialCliqueLifting)"
        )
    batch = data.get("batch_0", data.get("batch", None))
    if isinstance(batch, Tensor) and batch.numel() and int(batch.max()) > 0:
        raise ValueError(f"{transform} encodes one complex at a time, got a batch")
    max_rank = max(ranks)
    counts: list[int | None] = [None] * (max_rank + 1)
    shape = data.get("shape", None)
    if shape is not None:
        flat = torch.as_tensor(shape).reshape(-1).tolist() if not isinstance(shape, list) else shape
        if isinstance(shape, Tensor) and shape.dim() == 2 and shape.size(0) > 1:
            raise ValueError(f"{transform} encodes one complex at a time, got a batch")
        if all(isinstance(v, numbers.Integral) for v in flat) and len(flat) >= max_rank + 1:
            counts = [int(v) for v in flat[: max_rank + 1]]
    for rank in range(max_rank + 1):
        sizes = set()
        if isinstance(data.get(f"x_{rank}", None), Tensor):
            sizes.add(int(data[f"x_{rank}"].size(0)))
        if rank >= 1 and isinstance(data.get(f"incidence_{rank}", None), Tensor):
            sizes.add(int(data[f"incidence_{rank}"].size(1)))
        if rank < max_rank and isinstance(data.get(f"incidence_{rank + 1}", None), Tensor):
            sizes.add(int(data[f"incidence_{rank + 1}"].size(0)))
        if counts[rank] is not None:
            sizes.add(counts[rank])
        if len(sizes) > 1:
            raise ValueError(
                f"{transform}: inconsistent numbers of {rank}-cells {sorted(sizes)} in shape, "
                f"x_{rank} and incidence_{rank}/incidence_{rank + 1}"
            )
        if not sizes:
            raise ValueError(
                f"{transform}: cannot tell how many {rank}-cells the complex has: give "
                f"x_{rank}, incidence_{rank + 1} or shape"
            )
        counts[rank] = sizes.pop()
    return counts


def boundary_coos(data: Data, signed: bool, max_rank: int | None = None) -> list[Coo]:
    """Boundary matrices ``[B_1, ..., B_R]`` of one complex as :class:`Coo` triplets.

    Reads the coalesced ``signed_incidence_r`` (``signed``) or ``incidence_r`` tensors
    without copying them through SciPy. When ``signed`` boundaries are asked for but the
    complex only has unsigned ``incidence_r`` keys (TopoBench's convention), an orientation
    is recovered with :func:`orient_boundaries` (ranks 1 and 2 only).

    Parameters
    ----------
    data : ComplexData or torch_geometric.data.Data
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
    if max_rank is None:
        max_rank = (
            data.max_rank
            if isinstance(data, ComplexData)
            else len(check_single_complex(data, "boundary_coos")) - 1
        )
    if (
        signed
        and max_rank >= 1
        and all(f"signed_incidence_{r}" not in data for r in range(1, max_rank + 1))
        and all(f"incidence_{r}" in data for r in range(1, max_rank + 1))
    ):
        return orient_boundaries(boundary_coos(data, signed=False, max_rank=max_rank))
    name = "signed_incidence" if signed else "incidence"
    out = []
    for rank in range(1, max_rank + 1):
        tensor = data.get(f"{name}_{rank}", None)
        if not isinstance(tensor, Tensor):
            raise ValueError(
                f"this complex has no {name}_{rank} key; it is needed here"
                + (" (or unsigned incidence_r keys for every rank)" if signed else "")
            )
        tensor = tensor.detach().cpu()
        if not tensor.is_sparse:
            tensor = tensor.to_sparse()
        if not tensor.is_coalesced():
            out.append(Coo.from_torch(tensor.coalesce()))
            continue
        rows, cols = tensor._indices().numpy().astype(np.int64)
        vals = tensor._values().numpy().astype(np.float64)
        out.append(Coo(rows, cols, vals, (int(tensor.shape[0]), int(tensor.shape[1]))))
    return out


def orient_boundaries(unsigned: list[Coo]) -> list[Coo]:
    """Oriented boundaries ``[B_1, B_2]`` recovered from unsigned incidences ``[|B_1|, |B_2|]``.

    TopoBench stores unsigned incidences; the signed Hodge Laplacian (HodgeLapPE, Slepians)
    needs an orientation. One exists canonically here, the one of
    :class:`~topomodelx_attention.transforms.CellCycleLifting`:

    * an edge ``{u, v}`` with ``u < v`` is oriented ``u → v``: ``B_1[u, e] = -1``,
      ``B_1[v, e] = +1``;
    * a 2-cell whose boundary edges form one simple cycle is oriented by walking that cycle
      from its smallest vertex towards the smaller of its two cycle neighbours:
      ``B_2[e, c] = +1`` when the walk traverses ``e`` as ``u → v`` (``u < v``), else ``-1``.
      Walking a closed cycle makes ``B_1 B_2 = 0``.

    Parameters
    ----------
    unsigned : list of Coo
        ``[|B_1|]`` or ``[|B_1|, |B_2|]`` (values ignored).

    Returns
    -------
    list of Coo
        ``[B_1]`` or ``[B_1, B_2]``, signed.

    Raises
    ------
    ValueError
        For a complex of rank above 2 (no canonical orientation from unsigned incidences: give
        ``signed_incidence_r``), an edge without exactly two vertices, or a 2-cell whose edges
        do not form one simple cycle.
    """
    if len(unsigned) > 2:
        raise ValueError(
            f"only unsigned incidences of a rank-{len(unsigned)} complex were given: an "
            "orientation can only be recovered up to rank 2; give signed_incidence_r keys "
            "(oriented boundary matrices) for every rank"
        )
    if not unsigned:
        return []
    b1 = unsigned[0].pattern()
    n_edges = b1.shape[1]
    per_edge = np.bincount(b1.cols, minlength=n_edges)
    if n_edges and not (per_edge == 2).all():
        raise ValueError(
            "incidence_1 has edges without exactly two vertices; give signed_incidence_1"
        )
    order = np.lexsort((b1.rows, b1.cols))  # per edge: lower vertex first
    ends = b1.rows[order].reshape(n_edges, 2)
    signed = [
        Coo.build(
            ends.reshape(-1),
            np.repeat(np.arange(n_edges), 2),
            np.tile([-1.0, 1.0], n_edges),
            b1.shape,
        )
    ]
    if len(unsigned) == 1:
        return signed
    b2 = unsigned[1].pattern()
    if b2.shape[1] == 0:
        return [*signed, Coo.build([], [], [], b2.shape)]
    rows, cols, vals = [], [], []
    order = np.argsort(b2.cols, kind="stable")
    cell_edges = np.split(
        b2.rows[order], np.cumsum(np.bincount(b2.cols, minlength=b2.shape[1]))[:-1]
    )
    for cell, edges in enumerate(cell_edges):
        neighbours: dict[int, list[int]] = {}
        for u, v in ends[edges]:
            neighbours.setdefault(int(u), []).append(int(v))
            neighbours.setdefault(int(v), []).append(int(u))
        walk = _walk_cycle(neighbours)
        if walk is None or len(walk) != len(edges):
            raise ValueError(
                f"2-cell {cell}: its boundary edges do not form one simple cycle, so no "
                "orientation can be recovered from the unsigned incidence_2; give "
                "signed_incidence_1 and signed_incidence_2"
            )
        tails = np.array(walk)
        heads = np.roll(tails, -1)
        low, high = np.minimum(tails, heads), np.maximum(tails, heads)
        key = {(int(a), int(b)): int(e) for e, (a, b) in zip(edges, ends[edges])}
        rows += [key[(int(a), int(b))] for a, b in zip(low, high)]
        cols += [cell] * len(walk)
        vals += np.where(tails < heads, 1.0, -1.0).tolist()
    signed.append(Coo.build(rows, cols, vals, b2.shape))
    return signed


def _walk_cycle(neighbours: dict[int, list[int]]) -> list[int] | None:
    """Vertices of a simple cycle from the smallest, towards its smaller neighbour; else None."""
    if len(neighbours) < 2 or any(len(v) != 2 for v in neighbours.values()):
        return None
    start = min(neighbours)
    walk, previous, current = [start], start, min(neighbours[start])
    while current != start:
        walk.append(current)
        first, second = neighbours[current]
        previous, current = current, (second if first == previous else first)
        if len(walk) > len(neighbours):
            return None
    return walk if len(walk) == len(neighbours) else None


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
    eigh_threshold: int = EIGH_THRESHOLD,
    tol: float = KERNEL_TOL,
    *,
    dense_fallback: int | None = None,
    max_pairs: int = MAX_ITERATIVE_PAIRS,
) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of the ``k`` smallest eigenvalues of a symmetric positive semi-definite matrix.

    Symmetric solvers only, chosen by size, each with a bounded cost:

    1. ``n <= eigh_threshold``: dense :func:`numpy.linalg.eigh` (a 1,500 × 1,500 matrix takes
       about a second; should LAPACK's divide-and-conquer driver fail, the QR driver
       ``scipy.linalg.eigh(driver="ev")`` is used instead).
    2. Larger: :func:`scipy.sparse.linalg.eigsh` in shift-invert mode around the small
       negative shift ``σ = -0.01 · scale`` (``L - σI`` is positive definite, so its sparse
       LU factorisation exists; deterministic start vector). It asks for ``k + 8`` pairs (the
       margin keeps every copy of a multiple eigenvalue near the ``k``-th), with
       ``drop_kernel`` doubling while fewer than ``k`` of them lie above the kernel threshold, but never beyond ``max_pairs`` pairs (ARPACK's cost grows with the square
       of the number of pairs: a large kernel made it run for minutes).
       Any ``eigsh`` failure is retried at most twice (a larger Krylov space ``ncv`` with
       another start vector, then a shift ten times further with a third start vector) and
       every result is checked by its residuals (:data:`RESIDUAL_TOL`): ARPACK's errors
       depend on the BLAS kernel (error 3, "No shifts could be applied", appears with
       OpenBLAS's Haswell kernel on a Laplacian with a large kernel).
    3. When ``eigsh`` still fails (any :class:`~scipy.sparse.linalg.ArpackError`, including
       :class:`~scipy.sparse.linalg.ArpackNoConvergence`, a ``LinAlgError`` or a failed
       factorisation) or the kernel is larger than ``max_pairs``: dense ``eigh`` when
       ``n <= dense_fallback``, otherwise :func:`scipy.sparse.linalg.lobpcg` (smallest
       eigenvalues, the kernel vectors already found deflated, bounded iterations).
       No solver exception reaches the caller; only when LOBPCG fails too (or does not reach
       ``k`` non-kernel pairs) a :class:`RuntimeError` says so and names
       :data:`DENSE_FALLBACK`.

    Parameters
    ----------
    matrix : numpy.ndarray or scipy.sparse matrix, shape = (n, n)
        Symmetric positive semi-definite matrix (a Laplacian).
    k : int
        Number of eigenpairs wanted (fewer are returned when fewer exist).
    drop_kernel : bool
        Skip the eigenvalues ``<= tol * scale`` (the numerical kernel; ``scale`` is the spectral
        radius, or its bound the largest absolute row sum on the iterative paths) before
        taking ``k``.
    eigh_threshold : int, default=EIGH_THRESHOLD
        Largest size solved by dense ``eigh`` directly.
    tol : float, default=KERNEL_TOL
        Relative kernel tolerance.
    dense_fallback : int, optional
        Largest size solved by dense ``eigh`` when the iterative solver fails (default: the
        module's :data:`DENSE_FALLBACK`, read at call time, so that setting
        ``pe_utils.DENSE_FALLBACK`` applies to every encoding).
    max_pairs : int, default=MAX_ITERATIVE_PAIRS
        Most eigenpairs asked from ``eigsh`` at once.

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
    if dense_fallback is None:
        dense_fallback = DENSE_FALLBACK
    values = vectors = None
    if n > eigh_threshold:
        threshold = tol * _spectral_scale(matrix)
        values, vectors = _iterative_smallest(
            sp.csr_matrix(matrix, dtype=np.float64),
            k,
            drop_kernel,
            threshold,
            use_dense=n <= dense_fallback,
            max_pairs=max_pairs,
        )
    if values is None:
        dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix, dtype=np.float64)
        values, vectors = _dense_eigh(dense)
        threshold = tol * max(1.0, float(np.abs(values).max()))
    start = int(np.searchsorted(values, threshold, side="right")) if drop_kernel else 0
    return values[start : start + k], canonical_signs(vectors[:, start : start + k])


def _dense_eigh(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All eigenpairs of a dense symmetric matrix: LAPACK ``syevd``, else the QR driver ``syev``."""
    try:
        return np.linalg.eigh(dense)
    except np.linalg.LinAlgError:
        return scipy.linalg.eigh(dense, driver="ev")


def _iterative_smallest(
    matrix: sp.csr_matrix,
    k: int,
    drop_kernel: bool,
    threshold: float,
    use_dense: bool,
    max_pairs: int,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Shift-invert ``eigsh``, then LOBPCG; ``(None, None)`` means "use dense ``eigh``".

    Each ``eigsh`` call goes through :func:`_eigsh_with_restarts` (bounded restarts on any
    ARPACK or factorisation failure, results checked by their residuals). When it still fails,
    or the kernel is larger than ``max_pairs``, the answer is dense ``eigh`` (``use_dense``)
    or LOBPCG; no solver exception reaches the caller, only the documented
    :class:`RuntimeError` of :func:`_lobpcg_smallest` when every solver failed.
    """
    n = matrix.shape[0]
    scale = _spectral_scale(matrix)
    # 8 pairs more than needed, also without drop_kernel: a Krylov method can miss copies of
    # a multiple eigenvalue at the edge of the wanted set (found by the fuzz suite on L_1)
    wanted = min(k + 8, n - 2)
    values = vectors = None
    while 1 <= wanted <= max(max_pairs, k):
        result = _eigsh_with_restarts(matrix, wanted, scale)
        if result is None:
            values = vectors = None
            break
        values, vectors = result
        found = int((values > threshold).sum()) if drop_kernel else wanted
        if found >= k:
            return values, vectors
        if wanted >= n - 2:
            break
        wanted = min(2 * wanted, n - 2)
    if use_dense:
        return None, None
    kernel = vectors[:, values <= threshold] if values is not None and drop_kernel else None
    return _lobpcg_smallest(matrix, k, drop_kernel, threshold, kernel, max_pairs=max_pairs)


_SOLVER_FAILURES = (ArpackError, np.linalg.LinAlgError, RuntimeError, ValueError)
"""What ``eigsh`` / ``lobpcg`` raise when they fail on a valid symmetric matrix: every ARPACK
error (``ArpackNoConvergence``; ``ArpackError`` such as error 3, "No shifts could be applied",
which depends on the BLAS kernel), singular or failed factorisations (``LinAlgError``,
SuperLU's ``RuntimeError`` "Factor is exactly singular") and LOBPCG's ``ValueError`` on a
rank-deficient block."""

RESIDUAL_TOL: float = 1e-6
"""Eigenpairs from an iterative solver are accepted when ``|A v - λ v| <= RESIDUAL_TOL * scale``
for every pair (``scale`` bounds the spectral radius)."""


def _eigsh_attempts(n: int, wanted: int, scale: float) -> list[tuple[float, int, int | None]]:
    """``(sigma, seed, ncv)`` of the bounded ``eigsh`` restarts.

    ARPACK's default first (``ncv = max(2 k + 1, 20)``); then a larger Krylov space with
    another start vector (ARPACK's own advice for error 3); then a shift ten times further
    from the spectrum (a better-conditioned ``L - σI``) with a third start vector.
    """
    larger = min(n, max(2 * wanted + 1, 20) + max(16, wanted // 2))
    return [(-1e-2 * scale, 0, None), (-1e-2 * scale, 1, larger), (-1e-1 * scale, 2, larger)]


def _eigsh_with_restarts(
    matrix: sp.csr_matrix, wanted: int, scale: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """``wanted`` smallest eigenpairs by shift-invert ``eigsh``, ascending; ``None`` if it fails.

    Tries the settings of :func:`_eigsh_attempts` in turn (at most three ARPACK runs). A run
    that raises (:data:`_SOLVER_FAILURES`) or returns pairs whose residual exceeds
    :data:`RESIDUAL_TOL` is discarded; ``ArpackNoConvergence`` stops at once (its iteration
    budget, ``max(1000, 20 n)`` restarts, is already spent).
    """
    n = matrix.shape[0]
    for sigma, seed, ncv in _eigsh_attempts(n, wanted, scale):
        start = np.random.default_rng(seed).standard_normal(n)  # deterministic Krylov start
        try:
            values, vectors = eigsh(
                matrix,
                k=wanted,
                sigma=sigma,
                which="LM",
                v0=start,
                ncv=ncv,
                maxiter=max(1000, 20 * n),
            )
        except ArpackNoConvergence:
            return None
        except _SOLVER_FAILURES:
            continue
        if not (np.isfinite(values).all() and np.isfinite(vectors).all()):
            continue
        residual = np.linalg.norm(matrix @ vectors - vectors * values, axis=0)
        if residual.size and float(residual.max()) > RESIDUAL_TOL * scale:
            continue
        order = np.argsort(values)
        return values[order], vectors[:, order]
    return None


LOBPCG_ROUNDS: int = 8
"""Most LOBPCG runs of the last-resort fallback: each deflates the kernel vectors it found."""


def _lobpcg_smallest(
    matrix: sp.csr_matrix,
    k: int,
    drop_kernel: bool,
    threshold: float,
    kernel: np.ndarray | None,
    maxiter: int = 500,
    rounds: int = LOBPCG_ROUNDS,
    max_pairs: int = MAX_ITERATIVE_PAIRS,
) -> tuple[np.ndarray, np.ndarray]:
    """LOBPCG for the smallest eigenpairs, orthogonal to the known kernel vectors ``kernel``.

    The known kernel vectors ``C`` are deflated by a spectral shift, LOBPCG running on
    ``A + 2 scale C Cᵀ`` (their eigenvalue moves above the spectrum; the other eigenpairs are
    unchanged) rather than as LOBPCG constraints, which SciPy's small-problem path does not
    support. With ``drop_kernel``, a kernel larger than the LOBPCG block fills the block with
    kernel vectors: those are deflated too and LOBPCG runs again with a block twice as wide,
    at most ``rounds`` times, until ``k`` converged pairs above ``threshold`` are found, and
    while the deflated kernel has at most ``max_pairs`` vectors (the same bound as
    ``eigsh``'s).

    Returns
    -------
    values : numpy.ndarray, shape = (m,)
        Ascending; the kernel vectors (given and found) first, as exact zeros.
    vectors : numpy.ndarray, shape = (n, m)
        Orthonormal columns.

    Raises
    ------
    RuntimeError
        When LOBPCG fails (raises, or fewer than ``k`` converged non-kernel pairs after
        ``rounds`` runs) after the iterative solvers before it failed: the message names
        :data:`DENSE_FALLBACK`.
    """
    n = matrix.shape[0]
    constraints = kernel if kernel is not None and kernel.shape[1] else np.zeros((n, 0))
    failure = (
        f"no eigensolver converged on this {n} x {n} matrix within the iteration budget "
        f"(eigsh shift-invert with restarts, then LOBPCG: {rounds} runs of {maxiter} "
        "iterations); set topomodelx_attention.transforms.pe_utils.DENSE_FALLBACK (now "
        f"{DENSE_FALLBACK}) or smallest_eigenpairs(dense_fallback=...) to at least {n} to "
        f"solve it densely (O(n^3) time, {8 * n * n / 2**20:,.0f} MiB)"
    )
    shift = 2.0 * _spectral_scale(matrix)  # moves the known kernel above the whole spectrum
    for attempt in range(rounds if drop_kernel else 1):
        free = n - constraints.shape[1]
        wanted = min(k, free)
        if wanted < 1:
            break
        # the block doubles like eigsh's pairs; one that does not fit five times into the free
        # space is solved by SciPy's dense path (exact, and the deflated operator allows it)
        block = (k + 8) * 2**attempt
        width = max(1, min(block, max_pairs + k + 8 - constraints.shape[1], free))
        guess = np.random.default_rng(1 + attempt).standard_normal((n, width))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "did not converge" is checked below
            try:
                values, vectors = lobpcg(
                    _deflated(matrix, constraints, shift),
                    guess,
                    largest=False,
                    tol=1e-8,
                    maxiter=maxiter,
                )
            except _SOLVER_FAILURES as error:
                raise RuntimeError(
                    f"{failure} (LOBPCG: {type(error).__name__}: {error})"
                ) from error
        order = np.argsort(values)
        values, vectors = values[order], vectors[:, order]
        residual = np.linalg.norm(matrix @ vectors - vectors * values, axis=0)
        converged = np.isfinite(residual) & (
            residual <= 1e-4 * max(1.0, float(np.abs(values).max()))
        )
        if not drop_kernel:
            if int(converged.sum()) >= wanted:
                break
            raise RuntimeError(failure)
        above = converged & (values > threshold)
        if int(above.sum()) >= wanted:
            values, vectors = values[above], vectors[:, above]
            break
        new_kernel = converged & (values <= threshold)
        if not new_kernel.any() or constraints.shape[1] + int(new_kernel.sum()) > max_pairs:
            raise RuntimeError(failure)  # no progress, or a kernel above max_pairs
        constraints = np.hstack([constraints, vectors[:, new_kernel]])
    else:
        raise RuntimeError(failure)
    if constraints.shape[1]:  # the kernel vectors count as eigenvalue 0 (dropped later)
        values = np.concatenate([np.zeros(constraints.shape[1]), values])
        vectors = np.hstack([constraints, vectors])
    return values, vectors


def _deflated(matrix: sp.csr_matrix, kernel: np.ndarray, shift: float) -> Matrix | LinearOperator:
    """``matrix + shift * kernel kernelᵀ`` as a linear operator (``matrix`` itself if no kernel)."""
    if not kernel.shape[1]:
        return matrix

    def apply(block: np.ndarray) -> np.ndarray:
        block = np.asarray(block, dtype=np.float64)
        return matrix @ block + shift * (kernel @ (kernel.T @ block))

    return LinearOperator(matrix.shape, matvec=apply, matmat=apply, dtype=np.float64)


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
    on the sparse path. A sparse input with more than 2 % nonzeros (and at most
    ``DENSE_FALLBACK`` rows) is powered densely: its powers fill in within a few steps. A reversible walk ``RW = A D^{-1}`` has the same return
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
    if sp.issparse(transition) and n <= DENSE_FALLBACK and transition.nnz > _FILL_DENSITY * n * n:
        # dense enough that its powers fill in: dense BLAS products beat sparse ones
        transition = transition.toarray()
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
