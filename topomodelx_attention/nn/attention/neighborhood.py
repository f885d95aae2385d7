r"""Where token pairs sit: a neighbourhood as a validated index, and a bias on the padded grid.

* :class:`NeighborhoodIndex` (built by :func:`prepare_neighborhood`): the validated
  ``(target, source)`` index pair and values of a sparse neighbourhood, computed once outside a
  compiled region (``torch.compile`` does not trace sparse tensors); :func:`neighborhood_index`
  reads every accepted format (sparse matrix, edge index, index pair).
* :class:`PaddedBias`: a dense attention bias already on the padded grid of the dense kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "Neighborhood",
    "NeighborhoodIndex",
    "PaddedBias",
    "neighborhood_index",
    "prepare_neighborhood",
]


@dataclass(frozen=True)
class NeighborhoodIndex:
    r"""A validated sparse ``(n_target, n_source)`` neighbourhood as plain index tensors.

    Built by :func:`prepare_neighborhood` (once per batch, outside a ``torch.compile`` region:
    sparse tensors cannot be traced and the range checks read tensor values); the kernels use
    it as is, without checks.

    Attributes
    ----------
    index_target : torch.Tensor, shape = (nnz,)
        Row (target) of every entry, long, in coalesced (row-major) order for sparse inputs.
    index_source : torch.Tensor, shape = (nnz,)
        Column (source) of every entry, long.
    values : torch.Tensor or None, shape = (nnz, ...)
        Stored values (used as the θ·N bias of the dense kind), ``None`` for index pairs
        (values 1).
    shape : tuple of int
        ``(n_target, n_source)``.
    """

    index_target: Tensor
    index_source: Tensor
    values: Tensor | None
    shape: tuple[int, int]

    def to(self, device: torch.device | str) -> NeighborhoodIndex:
        """Move the index tensors (and values) to ``device``."""
        values = None if self.values is None else self.values.to(device)
        return NeighborhoodIndex(
            self.index_target.to(device), self.index_source.to(device), values, self.shape
        )


Neighborhood = Tensor | Sequence[Tensor] | NeighborhoodIndex


@dataclass(frozen=True)
class PaddedBias:
    """A dense attention bias given on the padded grid of the dense kernel (not as pairs).

    For biases that hold a value for (almost) every pair of tokens of a complex, e.g. the
    relative random-walk bias of a global arrow
    (:func:`~topomodelx_attention.nn.attention.random_walk_pair_features`): scattering pairs
    into the grid would cost more than the attention itself.

    Attributes
    ----------
    values : torch.Tensor, shape = (num_complexes, 1 or heads, length_target, length_source)
        The logit bias of every pair of slots of the layouts of the call (the bias is
        multiplied by the kernel's θ, as a neighbourhood's values; padding slots are masked
        by the kernel whatever their value).
    """

    values: Tensor


def prepare_neighborhood(
    neighborhood: Neighborhood,
    n_target: int,
    n_source: int,
    *,
    device: torch.device | str | None = None,
    name: str = "neighborhood",
) -> NeighborhoodIndex:
    """Validate a neighbourhood once and return it as a :class:`NeighborhoodIndex`.

    Parameters
    ----------
    neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex
        Any format accepted by :func:`neighborhood_index`.
    n_target, n_source : int
        Expected shape.
    device : torch.device or str, optional
        Move the indices there (e.g. the device of the features).
    name : str
        Name used in error messages.

    Returns
    -------
    NeighborhoodIndex
        Index pair and values, ready for ``torch.compile``-d attention.
    """
    index_target, index_source, values = neighborhood_index(
        neighborhood, n_target, n_source, name=name
    )
    # own copies: views into a sparse tensor's storage are not traceable graph inputs
    prepared = NeighborhoodIndex(
        index_target.clone(),
        index_source.clone(),
        None if values is None else values.clone(),
        (n_target, n_source),
    )
    return prepared if device is None else prepared.to(device)


def neighborhood_index(
    neighborhood: Neighborhood, n_target: int, n_source: int, *, name: str = "neighborhood"
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Return the (target, source) index pair and the values of a neighbourhood.

    Parameters
    ----------
    neighborhood : torch.Tensor or tuple of torch.Tensor or NeighborhoodIndex
        Either a sparse COO (or CSR) tensor of shape ``(n_target, n_source)`` (coalesced by
        convention; coalesced here otherwise), a ``(2, nnz)`` integer tensor
        ``[index_target; index_source]``, a pair ``(index_target, index_source)`` of
        ``(nnz,)`` integer tensors, or a :class:`NeighborhoodIndex` (already validated: used
        as is, its shape is only checked in eager mode). Every stored entry counts as a
        neighbour, whatever its value (the package convention is that neighbourhoods have no
        explicit zeros).
    n_target, n_source : int
        Expected shape.
    name : str
        Name used in error messages.

    Returns
    -------
    index_target : torch.Tensor, shape = (nnz,)
        Row (target) of every entry, long.
    index_source : torch.Tensor, shape = (nnz,)
        Column (source) of every entry, long.
    values : torch.Tensor or None, shape = (nnz, ...)
        The stored values of a sparse tensor, ``None`` for index pairs.
    """
    if isinstance(neighborhood, NeighborhoodIndex):
        # The shape was validated at construction; comparing it with the (symbolic) token
        # counts while compiling would specialise them, so only eager mode re-checks it.
        if not torch.compiler.is_compiling() and neighborhood.shape != (n_target, n_source):
            raise ValueError(
                f"{name} has shape {neighborhood.shape} but must be (n_target, n_source) = "
                f"({n_target}, {n_source}); neighbourhoods are oriented (target, source)"
            )
        return neighborhood.index_target, neighborhood.index_source, neighborhood.values
    if isinstance(neighborhood, Tensor):
        if neighborhood.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr):
            neighborhood = neighborhood.to_sparse_coo()
        if neighborhood.layout == torch.sparse_coo:
            return _sparse_index(neighborhood, n_target, n_source, name)
        if neighborhood.layout != torch.strided:
            raise TypeError(f"{name}: unsupported tensor layout {neighborhood.layout}")
        if neighborhood.is_floating_point() or neighborhood.dtype == torch.bool:
            raise TypeError(
                f"{name} is a dense {tuple(neighborhood.shape)} {neighborhood.dtype} tensor; pass "
                "a sparse COO matrix (e.g. dense.to_sparse()) or an integer (2, nnz) edge index"
            )
        if neighborhood.dim() != 2 or neighborhood.shape[0] != 2:
            raise ValueError(
                f"{name} as an edge index must have shape (2, nnz), got {tuple(neighborhood.shape)}"
            )
        index_target, index_source = neighborhood[0], neighborhood[1]
    elif isinstance(neighborhood, (tuple, list)) and len(neighborhood) == 2:
        index_target, index_source = neighborhood
    else:
        raise TypeError(
            f"{name} must be a sparse (n_target, n_source) tensor, a (2, nnz) edge index, a pair "
            f"(index_target, index_source) or a NeighborhoodIndex, got "
            f"{type(neighborhood).__name__}"
        )
    _check_pairs(index_target, index_source, n_target, n_source, name)
    return index_target.long(), index_source.long(), None


def _sparse_index(
    matrix: Tensor, n_target: int, n_source: int, name: str
) -> tuple[Tensor, Tensor, Tensor]:
    """Index pair and values of a sparse COO ``(n_target, n_source)`` matrix (coalesced here)."""
    if matrix.sparse_dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D sparse (n_target, n_source) matrix, got sparse_dim="
            f"{matrix.sparse_dim()}"
        )
    shape = tuple(matrix.shape[:2])
    if shape != (n_target, n_source):
        raise ValueError(
            f"{name} has shape {shape} but must be (n_target, n_source) = "
            f"({n_target}, {n_source}); neighbourhoods are oriented (target, source)"
        )
    if not matrix.is_coalesced():
        matrix = matrix.coalesce()
    index = matrix.indices()
    return index[0], index[1], matrix.values()


def _check_pairs(
    index_target: object, index_source: object, n_target: int, n_source: int, name: str
) -> None:
    """Raise unless the pair is two 1-D integer tensors of one length, in range."""
    for part, idx, bound in (
        ("target", index_target, n_target),
        ("source", index_source, n_source),
    ):
        if not isinstance(idx, Tensor) or idx.dim() != 1:
            raise TypeError(f"{name}: index_{part} must be a 1-D integer tensor")
        if idx.is_floating_point() or idx.dtype == torch.bool:
            raise TypeError(f"{name}: index_{part} must be an integer tensor, got {idx.dtype}")
        if idx.numel() > 0 and (int(idx.min()) < 0 or int(idx.max()) >= bound):
            raise ValueError(f"{name}: index_{part} out of range [0, {bound})")
    if index_target.shape[0] != index_source.shape[0]:
        raise ValueError(
            f"{name}: index_target and index_source must have the same length, got "
            f"{index_target.shape[0]} and {index_source.shape[0]}"
        )
