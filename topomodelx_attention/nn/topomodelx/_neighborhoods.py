"""Neighbourhood matrices of TopoModelX calls → the 0/1 patterns our attention reads."""

from __future__ import annotations

import torch
from torch import Tensor

from topomodelx_attention.nn.attention.heads import check_features as _check_features

UPDATE_FUNCS = ("relu", "sigmoid", "tanh", None)


def neighborhood_pattern(
    matrix: Tensor,
    name: str,
    shape: tuple[int, int],
    *,
    dtype: torch.dtype,
    device: torch.device,
    self_loops: bool | None = None,
) -> Tensor:
    """0/1 pattern of a TopoModelX neighbourhood matrix (any layout), checked against ``shape``.

    Parameters
    ----------
    matrix : torch.Tensor, shape = (n_target, n_source)
        Sparse (COO, CSR, CSC, a transposed view, ...) or dense neighbourhood; its non-zero
        entries are the neighbours (values and signs are not used).
    name : str
        Argument name, for error messages.
    shape : tuple of int
        Expected ``(n_target, n_source)``.
    dtype : torch.dtype
        Dtype of the pattern (that of the features).
    device : torch.device
        Device of the pattern (that of the features).
    self_loops : bool, optional
        Square matrices only: ``True`` puts every diagonal entry in the pattern (each cell
        attends to itself), ``False`` removes the diagonal, ``None`` keeps it as given.

    Returns
    -------
    torch.Tensor, shape = (n_target, n_source)
        Coalesced ``sparse_coo`` tensor of ones, no explicit zeros.
    """
    if not isinstance(matrix, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor (a neighbourhood matrix), got {type(matrix).__name__}")
    if matrix.dim() != 2 or tuple(matrix.shape) != tuple(shape):
        raise ValueError(
            f"{name} must be an ({shape[0]}, {shape[1]}) matrix (rows: target cells, columns: "
            f"source cells), got shape {tuple(matrix.shape)}"
        )
    if matrix.layout == torch.strided:
        coo = matrix.to_sparse()
    elif matrix.layout != torch.sparse_coo:
        coo = matrix.to_sparse_coo()
    else:
        coo = matrix
    coo = coo.coalesce()
    index = coo.indices()[:, coo.values() != 0].to(device)
    if self_loops is not None:
        index = index[:, index[0] != index[1]]
        if self_loops:
            diagonal = torch.arange(shape[0], device=device)
            index = torch.cat([index, torch.stack([diagonal, diagonal])], dim=1)
    values = torch.ones(index.shape[1], dtype=dtype, device=device)
    return torch.sparse_coo_tensor(index, values, tuple(shape), check_invariants=False).coalesce()


def apply_update(x: Tensor, update_func: str | None) -> Tensor:
    """TopoModelX's ``update_func``: ``relu``, ``sigmoid``, ``tanh`` or ``None`` (identity)."""
    if update_func == "relu":
        return torch.relu(x)
    if update_func == "sigmoid":
        return torch.sigmoid(x)
    if update_func == "tanh":
        return torch.tanh(x)
    return x


def check_update_func(update_func: str | None) -> str | None:
    """Raise unless ``update_func`` is one of :data:`UPDATE_FUNCS`."""
    if update_func not in UPDATE_FUNCS:
        raise ValueError(f"update_func must be one of {UPDATE_FUNCS}, got {update_func!r}")
    return update_func


def check_features(x: Tensor, channels: int, name: str) -> None:
    """Raise unless ``x`` is a dense floating ``(n, channels)`` tensor (TopoModelX's order hint)."""
    hint = (
        " (a neighbourhood in the place of features? TopoModelX's order is (x_source, "
        "neighborhood, x_target))"
    )
    _check_features(x, channels, name, hint)
