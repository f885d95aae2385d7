"""Light-weight sparse matrices as NumPy COO triplets.

The neighbourhoods of a small complex (a molecule has tens of cells) are built thousands of
times when a data set is lifted; SciPy's per-object overhead dominates there. :class:`Coo`
keeps three NumPy arrays and implements the two operations neighbourhoods need — coalescing
and the product of two sparse matrices as a join on the shared index — with vectorised NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

__all__ = ["Coo"]

_NUMPY_DTYPES = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}
_DENSE_LIMIT = 1 << 16  # below this many matrix entries, coalesce with a dense bincount


def _coalesce(
    keys: np.ndarray, weights: list, shape: tuple[int, int]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Sorted unique ``keys`` and the sums of each weight array per key.

    Small matrices use a dense ``bincount`` over all ``n_rows * n_cols`` positions (no sort);
    large ones ``np.unique``.
    """
    keys = np.asarray(keys, dtype=np.int64)
    weights = [np.asarray(w, dtype=np.float64) for w in weights]
    size = shape[0] * shape[1]
    if keys.size == 0:
        return keys, [np.zeros(0) for _ in weights]
    if size <= _DENSE_LIMIT:
        present = np.bincount(keys, minlength=size) > 0
        unique = np.flatnonzero(present)
        return unique, [np.bincount(keys, weights=w, minlength=size)[unique] for w in weights]
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, [np.bincount(inverse, weights=w, minlength=unique.size) for w in weights]


@dataclass(frozen=True)
class Coo:
    """A sparse matrix as row, column and value arrays.

    Attributes
    ----------
    rows, cols : numpy.ndarray of int64, shape = (nnz,)
        Coordinates.
    vals : numpy.ndarray of float64, shape = (nnz,)
        Values.
    shape : tuple of int
        ``(n_rows, n_cols)``.
    """

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def from_scipy(cls, matrix: sp.spmatrix | sp.sparray) -> Coo:
        """Convert any SciPy sparse matrix (duplicates summed, zeros dropped)."""
        coo = sp.coo_matrix(matrix)
        return cls.build(coo.row, coo.col, coo.data, coo.shape)

    @classmethod
    def from_torch(cls, tensor: Tensor) -> Coo:
        """Convert a 2-D ``torch.sparse_coo`` tensor (coalesced on the way)."""
        if tensor.layout != torch.sparse_coo or tensor.dim() != 2:
            raise ValueError("expected a 2-D torch.sparse_coo tensor")
        tensor = tensor.detach().coalesce().cpu()
        rows, cols = tensor.indices().numpy()
        vals = tensor.values().double().numpy()
        return cls.build(rows, cols, vals, tuple(tensor.shape))

    @classmethod
    def build(cls, rows, cols, vals, shape) -> Coo:
        """Coalesce raw triplets: sort row-major, sum duplicates, drop zeros.

        Parameters
        ----------
        rows, cols : array-like of int
            Coordinates (may repeat).
        vals : array-like of float
            Values.
        shape : tuple of int
            ``(n_rows, n_cols)``.

        Returns
        -------
        Coo
            Canonical matrix.
        """
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        shape = (int(shape[0]), int(shape[1]))
        keys, (sums,) = _coalesce(rows * max(shape[1], 1) + cols, [vals], shape)
        return cls._from_keys(keys, sums, shape, drop_zeros=True)

    @classmethod
    def _from_keys(cls, keys: np.ndarray, sums: np.ndarray, shape, drop_zeros: bool) -> Coo:
        if drop_zeros:
            keep = sums != 0
            keys, sums = keys[keep], sums[keep]
        width = max(shape[1], 1)
        return cls(keys // width, keys % width, sums, shape)

    @property
    def T(self) -> Coo:
        """Transpose (not re-sorted)."""
        return Coo(self.cols, self.rows, self.vals, (self.shape[1], self.shape[0]))

    def abs(self) -> Coo:
        """Entrywise absolute value."""
        return Coo(self.rows, self.cols, np.abs(self.vals), self.shape)

    def _join(self, other: Coo) -> tuple[np.ndarray, np.ndarray]:
        """Index pairs ``(i, j)`` of entries of ``self`` and ``other`` sharing the inner index."""
        if self.shape[1] != other.shape[0]:
            raise ValueError(f"cannot multiply {self.shape} by {other.shape}")
        order = np.argsort(other.rows, kind="stable")
        inner = np.arange(other.shape[0] + 1)
        bounds = np.searchsorted(other.rows[order], inner, side="left")
        starts = bounds[:-1]
        counts = np.diff(bounds)[self.cols]
        left = np.repeat(np.arange(self.cols.size), counts)
        within = np.arange(left.size) - np.repeat(np.cumsum(counts) - counts, counts)
        right = order[starts[self.cols[left]] + within]
        return left, right

    def matmul(self, other: Coo) -> Coo:
        """Sparse product ``self @ other`` as a join on the shared index.

        Parameters
        ----------
        other : Coo
            Right factor, ``other.shape[0] == self.shape[1]``.

        Returns
        -------
        Coo
            The product, coalesced.
        """
        left, right = self._join(other)
        shape = (self.shape[0], other.shape[1])
        keys = self.rows[left] * max(shape[1], 1) + other.cols[right]
        keys, (sums,) = _coalesce(keys, [self.vals[left] * other.vals[right]], shape)
        return Coo._from_keys(keys, sums, shape, drop_zeros=True)

    def product_and_counts(self, other: Coo) -> tuple[Coo, Coo]:
        """Signed product and off-diagonal count of shared inner indices, from one join.

        For ``B_rᵀ B_r`` this gives the down Laplacian and the lower-adjacency counts
        (number of shared faces) at once; for ``B B ᵀ`` the up Laplacian and upper adjacency.

        Parameters
        ----------
        other : Coo
            Right factor.

        Returns
        -------
        tuple of Coo
            ``self @ other`` (zeros dropped) and the off-diagonal of ``|self|^0 @ |other|^0``
            (how many inner indices two outer indices share).
        """
        left, right = self._join(other)
        shape = (self.shape[0], other.shape[1])
        rows, cols = self.rows[left], other.cols[right]
        off = (rows != cols).astype(np.float64)
        keys, (sums, counts) = _coalesce(
            rows * max(shape[1], 1) + cols, [self.vals[left] * other.vals[right], off], shape
        )
        return (
            Coo._from_keys(keys, sums, shape, drop_zeros=True),
            Coo._from_keys(keys, counts, shape, drop_zeros=True),
        )

    def add(self, other: Coo) -> Coo:
        """Sum of two matrices of the same shape."""
        if self.shape != other.shape:
            raise ValueError(f"cannot add {self.shape} and {other.shape}")
        return Coo.build(
            np.concatenate([self.rows, other.rows]),
            np.concatenate([self.cols, other.cols]),
            np.concatenate([self.vals, other.vals]),
            self.shape,
        )

    def nonzero(self) -> Coo:
        """Return the entries whose value is not zero (drops cancelled sums)."""
        keep = self.vals != 0
        if keep.all():
            return self
        return Coo(self.rows[keep], self.cols[keep], self.vals[keep], self.shape)

    def pattern(self) -> Coo:
        """0/1 pattern of the nonzero entries."""
        keep = self.vals != 0
        return Coo(self.rows[keep], self.cols[keep], np.ones(int(keep.sum())), self.shape)

    def to_torch(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """Coalesced ``torch.sparse_coo`` tensor (the arrays must be canonical).

        Parameters
        ----------
        dtype : torch.dtype, default=torch.float32
            Value dtype.

        Returns
        -------
        torch.Tensor, shape = self.shape
            Sparse COO tensor marked coalesced.
        """
        indices = torch.from_numpy(np.stack([self.rows, self.cols]))
        values = torch.from_numpy(self.vals.astype(_NUMPY_DTYPES.get(dtype, np.float64)))
        if values.dtype != dtype:
            values = values.to(dtype)
        return torch.sparse_coo_tensor(
            indices, values, self.shape, is_coalesced=True, check_invariants=False
        )

    @staticmethod
    def many_to_torch(matrices: dict[str, Coo], dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
        """Convert several canonical matrices at once (one NumPy→torch copy for all).

        Parameters
        ----------
        matrices : dict of str to Coo
            Canonical matrices.
        dtype : torch.dtype, default=torch.float32
            Value dtype.

        Returns
        -------
        dict of str to torch.Tensor
            Coalesced sparse COO tensors sharing one index and one value buffer.
        """
        if not matrices:
            return {}
        items = list(matrices.items())
        sizes = np.fromiter((m.rows.size for _, m in items), dtype=np.int64, count=len(items))
        ends = np.cumsum(sizes)
        indices = torch.from_numpy(
            np.stack([np.concatenate([m.rows for _, m in items]), np.concatenate([m.cols for _, m in items])])
        )
        numpy_dtype = _NUMPY_DTYPES.get(dtype, np.float64)
        values = torch.from_numpy(np.concatenate([m.vals for _, m in items]).astype(numpy_dtype))
        if values.dtype != dtype:
            values = values.to(dtype)
        out = {}
        for (key, matrix), end, size in zip(items, ends.tolist(), sizes.tolist()):
            out[key] = torch.sparse_coo_tensor(
                indices[:, end - size : end],
                values[end - size : end],
                matrix.shape,
                is_coalesced=True,
                check_invariants=False,
            )
        return out

    def to_scipy(self) -> sp.csr_matrix:
        """SciPy CSR copy."""
        return sp.csr_matrix((self.vals, (self.rows, self.cols)), shape=self.shape)
