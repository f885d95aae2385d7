"""Neighbourhood matrices of a complex, built from its incidence matrices by sparse algebra.

Definitions (CT paper, Appendix B; TopoBench key names), for ranks ``r = 0..R`` and the
oriented boundary matrices ``B_r`` of shape ``(n_{r-1}, n_r)``:

* ``incidence_r``         ``|B_r|`` (unsigned, 0/1); ``incidence_0`` has shape ``(0, n_0)``.
* ``signed_incidence_r``  ``B_r`` (oriented, ±1), with ``B_r B_{r+1} = 0``.
* ``adjacency_r``         upper adjacency: off-diagonal pattern of ``|B_{r+1}| |B_{r+1}|ᵀ`` (0/1).
* ``coadjacency_r``       lower adjacency: off-diagonal pattern of ``|B_r|ᵀ |B_r|`` (0/1).
* ``down_laplacian_r``    ``B_rᵀ B_r``.
* ``up_laplacian_r``      ``B_{r+1} B_{r+1}ᵀ``.
* ``hodge_laplacian_r``   ``B_rᵀ B_r + B_{r+1} B_{r+1}ᵀ``.

Adjacencies are binary, as TopoNetX returns them (minus TopoNetX's stored zero diagonal);
the number of shared (co)faces, which random-walk encodings need, is
:func:`shared_face_counts`. Laplacians are the true (signed) Hodge operators.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from topomodelx_attention.data.sparse import scipy_to_torch

__all__ = [
    "NEIGHBORHOODS",
    "ORIENTED_NEIGHBORHOODS",
    "build_neighborhoods",
    "check_neighborhoods",
    "shared_face_counts",
    "vertex_cell_incidence",
]

NEIGHBORHOODS: tuple[str, ...] = (
    "incidence",
    "signed_incidence",
    "adjacency",
    "coadjacency",
    "down_laplacian",
    "up_laplacian",
    "hodge_laplacian",
)
"""Every neighbourhood name a :class:`ComplexData` can carry (key ``f"{name}_{rank}"``)."""

ORIENTED_NEIGHBORHOODS: frozenset[str] = frozenset(
    {"signed_incidence", "down_laplacian", "up_laplacian", "hodge_laplacian"}
)
"""Neighbourhoods that need an orientation (not available for combinatorial complexes)."""


def check_neighborhoods(neighborhoods: Iterable[str] | None, oriented: bool = True) -> tuple[str, ...]:
    """Validate a ``neighborhoods=`` argument and return it as a tuple.

    Parameters
    ----------
    neighborhoods : iterable of str or None
        Names from :data:`NEIGHBORHOODS`; ``None`` selects all of them (all unoriented ones when
        ``oriented`` is false).
    oriented : bool, default=True
        Whether the complex carries an orientation.

    Returns
    -------
    tuple of str
        The selected names, in the canonical order of :data:`NEIGHBORHOODS`.
    """
    if neighborhoods is None:
        selected = set(NEIGHBORHOODS) if oriented else set(NEIGHBORHOODS) - ORIENTED_NEIGHBORHOODS
    else:
        if isinstance(neighborhoods, str):
            raise TypeError(
                f"neighborhoods must be a list of names, got the string {neighborhoods!r}; "
                f"write [{neighborhoods!r}]"
            )
        selected = set(neighborhoods)
        unknown = selected - set(NEIGHBORHOODS)
        if unknown:
            raise ValueError(
                f"unknown neighborhoods {sorted(unknown)}; valid names are {list(NEIGHBORHOODS)}"
            )
        if not oriented and selected & ORIENTED_NEIGHBORHOODS:
            raise ValueError(
                f"neighborhoods {sorted(selected & ORIENTED_NEIGHBORHOODS)} need an orientation, "
                "which a combinatorial complex does not have; choose among "
                f"{sorted(set(NEIGHBORHOODS) - ORIENTED_NEIGHBORHOODS)}"
            )
    return tuple(name for name in NEIGHBORHOODS if name in selected)


def _offdiag_pattern(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """0/1 pattern of the off-diagonal nonzeros of a square matrix."""
    coo = sp.coo_matrix(matrix)
    keep = (coo.row != coo.col) & (coo.data != 0)
    ones = np.ones(int(keep.sum()), dtype=np.float64)
    return sp.csr_matrix((ones, (coo.row[keep], coo.col[keep])), shape=matrix.shape)


def build_neighborhoods(
    boundaries: Sequence[sp.spmatrix],
    shape: Sequence[int],
    neighborhoods: Iterable[str] | None = None,
    oriented: bool = True,
    dtype: torch.dtype = torch.float32,
) -> dict[str, Tensor]:
    """Compute the requested neighbourhood matrices of every rank.

    Parameters
    ----------
    boundaries : sequence of scipy.sparse matrices
        ``boundaries[r - 1]`` is ``B_r`` of shape ``(n_{r-1}, n_r)`` for ``r = 1..R``
        (signed when ``oriented``; only the nonzero pattern is used otherwise).
    shape : sequence of int
        Cells per rank ``(n_0, ..., n_R)``; ``len(shape) == len(boundaries) + 1``.
    neighborhoods : iterable of str, optional
        Names from :data:`NEIGHBORHOODS` (default: all that the orientation allows).
    oriented : bool, default=True
        Whether ``boundaries`` are oriented. Without orientation, signed incidences and
        Laplacians cannot be built.
    dtype : torch.dtype, default=torch.float32
        Value dtype of the tensors.

    Returns
    -------
    dict of str to torch.Tensor
        Keys ``f"{name}_{r}"`` for every selected name and every rank ``r = 0..R``; coalesced
        ``torch.sparse_coo`` tensors with no explicit zeros.
    """
    names = check_neighborhoods(neighborhoods, oriented)
    shape = [int(n) for n in shape]
    if len(boundaries) != len(shape) - 1:
        raise ValueError(
            f"expected {len(shape) - 1} boundary matrices for shape {shape}, got {len(boundaries)}"
        )
    signed = []
    for r, matrix in enumerate(boundaries, start=1):
        matrix = sp.csr_matrix(matrix, dtype=np.float64)
        if matrix.shape != (shape[r - 1], shape[r]):
            raise ValueError(
                f"boundary matrix B_{r} has shape {matrix.shape}, expected "
                f"(n_{r - 1}, n_{r}) = ({shape[r - 1]}, {shape[r]})"
            )
        matrix.eliminate_zeros()
        signed.append(matrix)
    absolute = [abs(matrix) for matrix in signed]
    if not oriented:
        absolute = [matrix.sign() for matrix in absolute]

    def boundary(r: int, unsigned: bool) -> sp.csr_matrix:
        """B_r, with ``B_0`` of shape ``(0, n_0)``."""
        if r == 0:
            return sp.csr_matrix((0, shape[0]))
        return absolute[r - 1] if unsigned else signed[r - 1]

    max_rank = len(shape) - 1
    out: dict[str, Tensor] = {}
    for r in range(max_rank + 1):
        n = shape[r]
        has_down = r > 0
        has_up = r < max_rank
        down = up = None
        if "incidence" in names:
            out[f"incidence_{r}"] = scipy_to_torch(boundary(r, unsigned=True), dtype)
        if "signed_incidence" in names:
            out[f"signed_incidence_{r}"] = scipy_to_torch(boundary(r, unsigned=False), dtype)
        if "adjacency" in names:
            up_abs = absolute[r] @ absolute[r].T if has_up else sp.csr_matrix((n, n))
            out[f"adjacency_{r}"] = scipy_to_torch(_offdiag_pattern(up_abs), dtype)
        if "coadjacency" in names:
            down_abs = absolute[r - 1].T @ absolute[r - 1] if has_down else sp.csr_matrix((n, n))
            out[f"coadjacency_{r}"] = scipy_to_torch(_offdiag_pattern(down_abs), dtype)
        if {"down_laplacian", "hodge_laplacian"} & set(names):
            down = signed[r - 1].T @ signed[r - 1] if has_down else sp.csr_matrix((n, n))
        if {"up_laplacian", "hodge_laplacian"} & set(names):
            up = signed[r] @ signed[r].T if has_up else sp.csr_matrix((n, n))
        if "down_laplacian" in names:
            out[f"down_laplacian_{r}"] = scipy_to_torch(down, dtype)
        if "up_laplacian" in names:
            out[f"up_laplacian_{r}"] = scipy_to_torch(up, dtype)
        if "hodge_laplacian" in names:
            out[f"hodge_laplacian_{r}"] = scipy_to_torch(down + up, dtype)
    return out


def shared_face_counts(incidence: sp.spmatrix, upper: bool) -> sp.csr_matrix:
    """Number of shared cofaces (``upper``) or faces (lower) between distinct cells.

    Parameters
    ----------
    incidence : scipy.sparse matrix
        For ``upper=True``: ``|B_{r+1}|`` of shape ``(n_r, n_{r+1})``; for ``upper=False``:
        ``|B_r|`` of shape ``(n_{r-1}, n_r)``. Signs are ignored.
    upper : bool
        Count shared cofaces (upper adjacency weights) or shared faces (lower).

    Returns
    -------
    scipy.sparse.csr_matrix, shape = (n_r, n_r)
        Off-diagonal counts (CT paper, Appendix C.1 weights ``wA``); zero diagonal not stored.
    """
    pattern = sp.csr_matrix(incidence, dtype=np.float64, copy=True)
    pattern.data = np.ones_like(pattern.data)
    counts = pattern @ pattern.T if upper else pattern.T @ pattern
    counts = sp.csr_matrix(counts)
    counts.setdiag(0)
    counts.eliminate_zeros()
    return counts


def vertex_cell_incidence(
    boundaries: Sequence[sp.spmatrix], rank: int, num_vertices: int
) -> sp.csr_matrix:
    """0/1 matrix telling which vertices lie on each cell of ``rank``.

    Parameters
    ----------
    boundaries : sequence of scipy.sparse matrices
        ``boundaries[r - 1] = B_r`` (signs ignored), as in :func:`build_neighborhoods`.
    rank : int
        Cell rank (``0`` gives the identity).
    num_vertices : int
        Number of vertices ``n_0``.

    Returns
    -------
    scipy.sparse.csr_matrix, shape = (n_0, n_rank)
        Entry ``(v, c)`` is 1 when vertex ``v`` is a vertex of cell ``c``.
    """
    if rank == 0:
        return sp.identity(num_vertices, format="csr")
    product = abs(sp.csr_matrix(boundaries[0], dtype=np.float64))
    for r in range(1, rank):
        product = product @ abs(sp.csr_matrix(boundaries[r], dtype=np.float64))
    product = sp.csr_matrix(product)
    product.eliminate_zeros()
    product.data = np.ones_like(product.data)
    return product
