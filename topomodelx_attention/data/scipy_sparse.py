"""Conversions between SciPy sparse matrices and coalesced ``torch.sparse_coo`` tensors.

Every neighbourhood stored in a :class:`~topomodelx_attention.data.ComplexData` goes through
:func:`scipy_to_torch`, which guarantees the package-wide invariant: a coalesced COO tensor
with **no explicit zeros**.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

__all__ = [
    "has_explicit_zeros",
    "scipy_to_torch",
    "sparsity_pattern",
    "to_coalesced_coo",
    "torch_to_scipy",
]


def scipy_to_torch(matrix: sp.spmatrix | sp.sparray, dtype: torch.dtype = torch.float32) -> Tensor:
    """Convert a SciPy sparse matrix to a coalesced COO tensor without explicit zeros.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, shape = (n_rows, n_cols)
        Any SciPy sparse format. Duplicates are summed and stored zeros dropped.
    dtype : torch.dtype, default=torch.float32
        Value dtype of the result.

    Returns
    -------
    torch.Tensor, shape = (n_rows, n_cols)
        Coalesced ``torch.sparse_coo`` tensor.
    """
    csr = sp.csr_matrix(matrix, copy=True)
    csr.sum_duplicates()  # canonical: sorted indices, no duplicates
    csr.eliminate_zeros()
    n_rows, n_cols = csr.shape
    row = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(csr.indptr))
    col = csr.indices.astype(np.int64, copy=False)
    indices = torch.from_numpy(np.stack([row, col]))
    values = torch.from_numpy(np.asarray(csr.data)).to(dtype)
    return torch.sparse_coo_tensor(
        indices, values, (n_rows, n_cols), is_coalesced=True, check_invariants=False
    )


def torch_to_scipy(tensor: Tensor) -> sp.csr_matrix:
    """Convert a 2-D ``torch.sparse_coo`` (or dense) tensor to a SciPy CSR matrix.

    Parameters
    ----------
    tensor : torch.Tensor, shape = (n_rows, n_cols)
        Sparse COO or dense tensor.

    Returns
    -------
    scipy.sparse.csr_matrix, shape = (n_rows, n_cols)
        The same matrix in CSR format (float64 values).
    """
    if tensor.dim() != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(tensor.shape)}")
    if not tensor.is_sparse:
        return sp.csr_matrix(tensor.detach().cpu().double().numpy())
    coalesced = tensor.detach().coalesce().cpu()
    row, col = coalesced.indices().numpy()
    data = coalesced.values().double().numpy()
    return sp.csr_matrix((data, (row, col)), shape=tuple(tensor.shape))


def to_coalesced_coo(matrix: Tensor, name: str = "neighborhood") -> Tensor:
    """Convert a matrix of any torch layout to a coalesced sparse COO matrix.

    Parameters
    ----------
    matrix : torch.Tensor, shape = (n_rows, n_cols)
        Sparse COO / CSR / CSC / BSR / BSC tensor, or a dense tensor (its zero entries are not
        stored).
    name : str, default="neighborhood"
        Name used in error messages.

    Returns
    -------
    torch.Tensor, shape = (n_rows, n_cols)
        Coalesced ``torch.sparse_coo`` tensor (the input itself when it already is one).
    """
    if not isinstance(matrix, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(matrix).__name__}")
    if matrix.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(matrix.shape)}")
    if matrix.layout == torch.strided:
        matrix = matrix.to_sparse()
    elif matrix.layout != torch.sparse_coo:
        matrix = matrix.to_sparse_coo()
    return matrix if matrix.is_coalesced() else matrix.coalesce()


def sparsity_pattern(
    matrix: Tensor, name: str = "neighborhood", dtype: torch.dtype | None = None
) -> Tensor:
    """Return the 0/1 pattern of the non-zero entries of a matrix of any torch layout.

    Parameters
    ----------
    matrix : torch.Tensor, shape = (n_rows, n_cols)
        Sparse (any layout) or dense matrix; stored zeros are not part of the pattern.
    name : str, default="neighborhood"
        Name used in error messages.
    dtype : torch.dtype, optional
        Value dtype of the result (default: that of ``matrix``).

    Returns
    -------
    torch.Tensor, shape = (n_rows, n_cols)
        Coalesced ``torch.sparse_coo`` tensor of ones, no explicit zeros.
    """
    coo = to_coalesced_coo(matrix, name)
    index = coo.indices()[:, coo.values() != 0]
    ones = torch.ones(index.shape[1], dtype=dtype or coo.dtype, device=index.device)
    return torch.sparse_coo_tensor(
        index, ones, coo.shape, is_coalesced=True, check_invariants=False
    )


def has_explicit_zeros(tensor: Tensor) -> bool:
    """Return whether a sparse COO tensor stores any zero value.

    Parameters
    ----------
    tensor : torch.Tensor
        Sparse COO tensor.

    Returns
    -------
    bool
        ``True`` when at least one stored value equals zero.
    """
    values = tensor._values() if tensor.is_coalesced() else tensor.coalesce().values()
    return bool((values == 0).any())
