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
        vals = np.asarray(vals, dtype=np.float64)
        shape = (int(shape[0]), int(shape[1]))
        if rows.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty.copy(), np.zeros(0), shape)
        keys = rows * max(shape[1], 1) + cols
        unique, inverse = np.unique(keys, return_inverse=True)
        sums = np.bincount(inverse, weights=vals, minlength=unique.size)
        width = max(shape[1], 1)
        keep = sums != 0
        return cls(unique[keep] // width, unique[keep] % width, sums[keep], shape)

    @property
    def T(self) -> Coo:
        """Transpose (not re-sorted)."""
        return Coo(self.cols, self.rows, self.vals, (self.shape[1], self.shape[0]))

    def abs(self) -> Coo:
        """Entrywise absolute value."""
        return Coo(self.rows, self.cols, np.abs(self.vals), self.shape)

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
        if self.shape[1] != other.shape[0]:
            raise ValueError(f"cannot multiply {self.shape} by {other.shape}")
        shape = (self.shape[0], other.shape[1])
        order = np.argsort(other.rows, kind="stable")
        b_rows, b_cols, b_vals = other.rows[order], other.cols[order], other.vals[order]
        starts = np.searchsorted(b_rows, np.arange(other.shape[0]), side="left")
        ends = np.searchsorted(b_rows, np.arange(other.shape[0]), side="right")
        counts = (ends - starts)[self.cols] if self.cols.size else np.zeros(0, dtype=np.int64)
        total = int(counts.sum())
        left = np.repeat(np.arange(self.cols.size), counts)
        within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        right = starts[self.cols[left]] + within
        rows, cols = self.rows[left], b_cols[right]
        vals = self.vals[left] * b_vals[right]
        return Coo.build(rows, cols, vals, shape)

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
        values = torch.from_numpy(self.vals).to(dtype)
        return torch.sparse_coo_tensor(
            indices, values, self.shape, is_coalesced=True, check_invariants=False
        )

    def to_scipy(self) -> sp.csr_matrix:
        """SciPy CSR copy."""
        return sp.csr_matrix((self.vals, (self.rows, self.cols)), shape=self.shape)
