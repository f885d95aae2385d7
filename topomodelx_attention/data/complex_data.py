"""``ComplexData``: a PyG ``Data`` object holding a cell/simplicial/combinatorial complex.

Keys (TopoBench names) for every rank ``r = 0..R`` — see
:mod:`topomodelx_attention.data.neighborhoods` for the matrix definitions:

========================  ====================  ==============================================
key                       shape                 content
========================  ====================  ==============================================
``x_r``                   ``(n_r, d_r)``        cell features (float, or long categorical codes)
``batch_r``               ``(n_r,)``            complex index of each cell (zeros when unbatched)
``incidence_r``           ``(n_{r-1}, n_r)``    unsigned incidence ``|B_r|`` — attention masks
``signed_incidence_r``    ``(n_{r-1}, n_r)``    oriented boundary ``B_r`` — Laplacians, PEs
``adjacency_r``           ``(n_r, n_r)``        upper adjacency (0/1, no diagonal)
``coadjacency_r``         ``(n_r, n_r)``        lower adjacency (0/1, no diagonal)
``down_laplacian_r``      ``(n_r, n_r)``        ``B_rᵀ B_r``
``up_laplacian_r``        ``(n_r, n_r)``        ``B_{r+1} B_{r+1}ᵀ``
``hodge_laplacian_r``     ``(n_r, n_r)``        down + up
``pe_r``                  ``(n_r, dim)``        positional encodings (written by PE transforms)
``vertex_incidence_r``    ``(n_0, n_r)``        vertices of each cell (combinatorial complexes)
========================  ====================  ==============================================

plus ``shape`` (``(1, R + 1)`` long tensor of cell counts; ``(B, R + 1)`` once batched) and
``num_nodes = n_0``. Neighbourhoods are coalesced ``torch.sparse_coo`` tensors with no explicit
zeros; empty ranks have 0-row tensors. With :class:`torch_geometric.loader.DataLoader` a batch is
the disjoint union: every neighbourhood becomes block-diagonal (the offsets of its row rank and
of its column rank), features are concatenated and ``batch_r`` counts complexes. PyG's
loader (``Batch.from_data_list``) and
:class:`~topomodelx_attention.data.collate.ComplexDataLoader` batch complexes with the same
vectorised collation (:mod:`topomodelx_attention.data.collate`); a batch splits back with
``to_data_list()``. All complexes of a batch need the same keys: a combinatorial complex (no
``signed_incidence_r``, no Laplacians) batches with cell or simplicial complexes only when all
are built with the same ``neighborhoods=``. Batching raises a ``ValueError`` naming the keys
that differ and the fix, where PyG's generic ``collate`` would raise a bare ``KeyError`` (or
drop keys only later complexes have); called directly, that generic path gets the same
``ValueError`` from ``ComplexData.__inc__`` on ``shape``, which PyG collates first.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.data.neighborhoods import (
    NEIGHBORHOODS,
    build_neighborhoods,
    check_neighborhoods,
    row_rank,
    vertex_cells,
)
from topomodelx_attention.data.scipy_sparse import has_explicit_zeros, torch_to_scipy

__all__ = ["PREPARED_STRUCTURE", "ComplexData", "check_features"]

PREPARED_STRUCTURE = "prepared_structure"
"""Key of a model's structure prepared once for a complex (written by
:class:`~topomodelx_attention.nn.cell.PrepareStructure`; a non-tensor attribute that batching
keeps as a list, one entry per complex)."""

_NEIGHBORHOOD_KEY = re.compile(r"^(" + "|".join(NEIGHBORHOODS) + r")_(\d+)$")
_BATCH_KEY = re.compile(r"^batch_(\d+)$")

_COLLATING = threading.local()
"""The first complex of the batch PyG is collating: its ``shape`` width, its keys, a weak
reference to it, and how many complexes ``__inc__`` has seen (see ``__cat_dim__``)."""


def max_rank_mismatch(first: int, other: int, index: int | None = None) -> str:
    """Message of the ``ValueError`` raised when complexes of different maximal ranks are batched.

    Parameters
    ----------
    first : int
        Maximal rank of the first complex of the batch.
    other : int
        Maximal rank of a later complex.
    index : int, optional
        Position of that complex in the batch, when known.

    Returns
    -------
    str
        What differs and how to fix it.
    """
    which = f"complex {index}" if index is not None else "a later complex"
    wider = max(first, other)
    return (
        f"cannot batch complexes of different maximal ranks: complex 0 has max_rank {first} and "
        f"{which} has max_rank {other}. Build all of them with the same maximal rank, which pads "
        f"empty ranks: from_toponetx(..., max_rank={wider}) or "
        f"SimplicialCliqueLifting(complex_dim={wider}) (CellCycleLifting gives max_rank 2)."
    )


def check_features(features: Any, num_cells: int, name: str) -> Tensor:
    """Validate a feature matrix and return it as a 2-D tensor.

    Parameters
    ----------
    features : array-like, shape = (num_cells,) or (num_cells, d)
        Features of the cells of one rank. Floating point or integer (categorical codes).
    num_cells : int
        Expected number of rows.
    name : str
        Key used in error messages (e.g. ``"x_1"``).

    Returns
    -------
    torch.Tensor, shape = (num_cells, d)
        Float features keep their dtype; integer features become ``torch.long``.
    """
    if isinstance(features, Tensor):
        tensor = features
    else:
        array = np.asarray(features)
        if array.dtype == object:
            raise TypeError(f"{name}: features must be numeric, got an object array")
        tensor = torch.from_numpy(array.copy()) if array.ndim else torch.tensor(array)
    if tensor.dtype == torch.bool:
        raise TypeError(f"{name}: boolean features are ambiguous; cast them to float or long")
    if tensor.is_complex():
        raise TypeError(f"{name}: complex-valued features are not supported")
    if tensor.dim() == 1:
        tensor = tensor.unsqueeze(-1)
    if tensor.dim() != 2:
        raise ValueError(f"{name}: features must be 1-D or 2-D, got shape {tuple(tensor.shape)}")
    if tensor.size(0) != num_cells:
        raise ValueError(
            f"{name}: feature matrix has {tensor.size(0)} rows but the complex has {num_cells} "
            "cells of that rank"
        )
    if tensor.is_floating_point():
        if not torch.isfinite(tensor).all():
            raise ValueError(f"{name}: features contain NaN or infinite values")
    else:
        tensor = tensor.long()
    return tensor


class ComplexData(Data):
    """A complex of any dimension as a :class:`torch_geometric.data.Data` object.

    Build one with :meth:`from_boundaries`, :func:`~topomodelx_attention.data.from_toponetx`
    or a lifting transform; batch them with :class:`torch_geometric.loader.DataLoader` or
    :class:`~topomodelx_attention.data.collate.ComplexDataLoader` (the same vectorised
    collation, :func:`~topomodelx_attention.data.collate.collate_complexes`). Both need the
    same keys in every complex of a batch (same ``max_rank`` and ``neighborhoods=``; a
    combinatorial complex has no signed incidences or Laplacians) and raise a ``ValueError``
    naming the keys that differ. ``shape``, the first key PyG's generic ``collate`` batches,
    carries the same check for that path, so keep it first (:meth:`from_boundaries` does).
    The module docstring lists the keys.

    Parameters
    ----------
    **kwargs
        Attributes, as for :class:`torch_geometric.data.Data`.

    Examples
    --------
    >>> import toponetx as tnx
    >>> from topomodelx_attention.data import from_toponetx
    >>> cc = tnx.CellComplex([[0, 1, 2]], ranks=2)
    >>> data = from_toponetx(cc)
    >>> data.num_cells(1), data.incidence_2.shape
    (3, torch.Size([3, 1]))
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not issubclass(cls, Batch):
            # PyG's batches of the subclass split like ours (see data.collate)
            from topomodelx_attention.data.collate import register_batch_class

            register_batch_class(cls)

    # ------------------------------------------------------------------ key access
    # A ComplexData (and its batch) has one store: PyG's generic ``keys()`` / ``in`` gather the
    # keys of every store into a set on each call, which models pay several times per batch.
    def keys(self) -> list[str]:
        """Attribute names, in insertion order (``shape`` first for :meth:`from_boundaries`)."""
        return list(self._store._mapping)

    def __contains__(self, key: str) -> bool:
        return key in self._store._mapping

    # ------------------------------------------------------------------ batching rules
    def __cat_dim__(self, key: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        if key == "shape" and isinstance(value, Tensor) and value.dim() == 2:
            # PyG's collate asks the first complex, then calls __inc__ on every complex
            _COLLATING.shape_width = int(value.size(1))
            _COLLATING.keys = frozenset(self._store._mapping.keys())
            _COLLATING.first = weakref.ref(self)
            _COLLATING.position = 0
        if isinstance(value, Tensor) and value.is_sparse:
            return (0, 1)  # block-diagonal: rows and columns both offset
        if _BATCH_KEY.match(key):
            return 0
        return super().__cat_dim__(key, value, *args, **kwargs)

    def __inc__(self, key: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        if key == "shape":
            # Batching complexes of different max ranks or keys (e.g. a combinatorial complex,
            # which has no signed_incidence_r, with simplicial ones): a clear error before
            # PyG's RuntimeError on ``shape`` or its KeyError on a later key (``shape`` is
            # collated first, see from_boundaries). ``ComplexDataLoader`` checks up front.
            width = getattr(_COLLATING, "shape_width", None)
            position = getattr(_COLLATING, "position", 0)
            _COLLATING.position = position + 1
            if width is not None and isinstance(value, Tensor) and value.dim() == 2 and value.size(1) != width:
                _COLLATING.shape_width = None
                raise ValueError(max_rank_mismatch(width - 1, int(value.size(1)) - 1, position))
            reference = getattr(_COLLATING, "keys", None)
            first = _COLLATING.first() if getattr(_COLLATING, "first", None) is not None else None
            if (
                reference is not None
                and first is not None
                and first is not self
                and self._store._mapping.keys() != reference  # set comparison, no copy
            ):
                from topomodelx_attention.data.collate import keys_mismatch

                _COLLATING.keys = _COLLATING.first = None
                raise ValueError(keys_mismatch(first, self, position))
            return 0
        if _BATCH_KEY.match(key):
            # One complex per ``ComplexData``: increments 0, 1, 2, ... also for empty ranks.
            return 1
        if _NEIGHBORHOOD_KEY.match(key):
            return 0
        return super().__inc__(key, value, *args, **kwargs)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_boundaries(
        cls,
        boundaries: Sequence[sp.spmatrix | Coo],
        shape: Sequence[int],
        features: Mapping[int, Any] | None = None,
        neighborhoods: Iterable[str] | None = None,
        oriented: bool = True,
        dtype: torch.dtype = torch.float32,
        batch: Sequence[Tensor] | None = None,
        vertex_incidence: Sequence[sp.spmatrix | Coo] | None = None,
        num_complexes: int | None = None,
        **attributes: Any,
    ) -> ComplexData:
        """Build a complex (or the disjoint union of several) from its boundary matrices.

        Parameters
        ----------
        boundaries : sequence of scipy.sparse matrices or Coo
            ``boundaries[r - 1] = B_r`` of shape ``(n_{r-1}, n_r)``, signed when ``oriented``.
        shape : sequence of int
            Cells per rank ``(n_0, ..., n_R)``.
        features : mapping of int to array-like, optional
            ``{rank: (n_rank, d) features}``; ranks not given get no ``x_r`` key.
        neighborhoods : iterable of str, optional
            Which neighbourhoods to store (default: all the orientation allows).
        oriented : bool, default=True
            Whether ``boundaries`` carry signs.
        dtype : torch.dtype, default=torch.float32
            Dtype of the neighbourhood values and of floating-point features.
        batch : sequence of torch.Tensor, optional
            For a disjoint union of several complexes: ``batch[r]`` gives the (sorted) complex
            index of every r-cell; ``shape`` then counts cells per complex. Default: one complex.
        vertex_incidence : sequence of scipy.sparse matrices or Coo, optional
            ``(n_0, n_r)`` vertex sets of the cells of every rank, for ``vertex_incidence_r``
            (see :func:`~topomodelx_attention.data.neighborhoods.build_neighborhoods`).
        num_complexes : int, optional
            Number of complexes of the union (rows of ``shape``). Give it with ``batch``
            whenever some complexes may have no cell at all (an empty graph, trailing or
            not): ``batch`` alone cannot count them. Default: ``max(batch_r) + 1`` (1 without
            ``batch``).
        **attributes
            Extra attributes (e.g. ``y``) stored as they are.

        Returns
        -------
        ComplexData
            The complex with ``x_r``, ``batch_r``, the neighbourhoods, ``shape`` and
            ``num_nodes``.
        """
        shape = [int(n) for n in shape]
        if any(n < 0 for n in shape) or not shape:
            raise ValueError(f"shape must be a non-empty list of cell counts, got {shape}")
        if batch is None:
            batch = [torch.zeros(n, dtype=torch.long) for n in shape]
        if len(batch) != len(shape) or any(b.numel() != n for b, n in zip(batch, shape)):
            raise ValueError("batch must hold one index per cell of every rank")
        needed = max((int(b.max()) + 1 for b in batch if b.numel()), default=1)
        if num_complexes is None:
            num_complexes = needed
        elif int(num_complexes) < needed or int(num_complexes) < 1:
            raise ValueError(
                f"num_complexes={num_complexes}, but batch refers to complex {needed - 1}; "
                "give the number of complexes of the union (at least 1)"
            )
        num_complexes = int(num_complexes)
        if any(b.numel() and int(b.min()) < 0 for b in batch):
            raise ValueError("batch holds negative complex indices")
        counts = torch.stack([torch.bincount(b, minlength=num_complexes) for b in batch], dim=1)
        # ``shape`` is the first key: PyG collates keys in this order, and ComplexData's
        # batching hooks compare the maximal ranks on ``shape`` before any rank-indexed key
        data = cls(
            shape=counts,
            **build_neighborhoods(boundaries, shape, neighborhoods, oriented, dtype, vertex_incidence),
        )
        for rank, vector in enumerate(batch):
            data[f"batch_{rank}"] = vector
        for rank, value in (features or {}).items():
            if not 0 <= int(rank) < len(shape):
                raise ValueError(f"features given for rank {rank}, but the ranks are 0..{len(shape) - 1}")
            tensor = check_features(value, shape[rank], f"x_{rank}")
            data[f"x_{rank}"] = tensor.to(dtype) if tensor.is_floating_point() else tensor
        data.num_nodes = shape[0]
        for key, value in attributes.items():
            data[key] = value
        return data

    # ------------------------------------------------------------------ accessors
    @property
    def max_rank(self) -> int:
        """Highest rank ``R`` stored (ranks ``0..R`` all have ``batch_r``)."""
        ranks = [int(m.group(1)) for key in self._store._mapping if (m := _BATCH_KEY.match(key))]
        if not ranks:
            raise ValueError("this ComplexData has no batch_r keys; build it with from_boundaries")
        return max(ranks)

    @property
    def num_complexes(self) -> int:
        """Number of complexes: rows of ``shape`` (1 for a single complex)."""
        shape = self._store._mapping.get("shape", None)
        return int(shape.shape[0]) if isinstance(shape, Tensor) and shape.dim() == 2 else 1

    @fill_doc
    def num_cells(self, rank: int) -> int:
        """Return the number of cells of ``rank`` (all complexes of a batch together).

        %(rank_parameters)s

        Returns
        -------
        int
            ``n_rank`` (0 for ranks above :attr:`max_rank`).
        """
        value = self._store._mapping.get(f"batch_{rank}", None)
        return 0 if value is None else int(value.numel())

    def cell_counts(self) -> list[int]:
        """Cells per rank ``[n_0, ..., n_R]`` of the whole (batched) complex."""
        return [self.num_cells(r) for r in range(self.max_rank + 1)]

    def neighborhood(self, name: str, rank: int) -> Tensor:
        """Return the neighbourhood ``f"{name}_{rank}"`` with a helpful error when absent.

        Parameters
        ----------
        name : str
            One of :data:`~topomodelx_attention.data.neighborhoods.NEIGHBORHOODS`.
        rank : int
            Rank.

        Returns
        -------
        torch.Tensor
            The sparse matrix.
        """
        value = self._store._mapping.get(f"{name}_{rank}", None)
        if value is not None and name in NEIGHBORHOODS:
            return value
        check_neighborhoods([name], keys=False)
        key = f"{name}_{rank}"
        available = sorted(k for k in self.keys() if _NEIGHBORHOOD_KEY.match(k))
        raise ValueError(
            f"this complex has no {key!r}; build it with neighborhoods including {name!r} "
            f"(available: {available})"
        )

    def boundary_matrices(self, signed: bool = True) -> list[sp.csr_matrix]:
        """Boundary matrices ``[B_1, ..., B_R]`` as SciPy CSR matrices.

        Parameters
        ----------
        signed : bool, default=True
            Read ``signed_incidence_r`` (oriented) or ``incidence_r`` (unsigned).

        Returns
        -------
        list of scipy.sparse.csr_matrix
            ``B_r`` of shape ``(n_{r-1}, n_r)`` for ``r = 1..R``.
        """
        name = "signed_incidence" if signed else "incidence"
        return [torch_to_scipy(self.neighborhood(name, r)) for r in range(1, self.max_rank + 1)]

    @fill_doc
    def vertex_cells(self, rank: int) -> Tensor:
        """Which vertices lie on each cell of ``rank``.

        %(rank_parameters)s

        Returns
        -------
        torch.Tensor, shape = (n_0, n_rank)
            Coalesced 0/1 sparse COO tensor (block-diagonal in a batch): ``vertex_incidence_rank``
            when stored (combinatorial complexes), else the pattern of ``|B_1| ... |B_rank|``.
        """
        stored = f"vertex_incidence_{rank}"
        if stored in self:
            return self[stored]
        boundaries = [Coo.from_torch(self.neighborhood("incidence", r)) for r in range(1, rank + 1)]
        dtype = self.incidence_1.dtype if "incidence_1" in self else torch.float32
        return vertex_cells(boundaries, rank, self.num_cells(0)).to_torch(dtype)

    def to_complex_list(self) -> list[ComplexData]:
        """Split a batch (disjoint union) back into its complexes.

        ``torch_geometric``'s generic ``separate`` cannot slice block-diagonal sparse
        tensors; this method can (a batch's ``to_data_list()``, ``get_example(i)`` and
        ``batch[i]`` call it, see :class:`~topomodelx_attention.data.collate.ComplexDataBatch`).
        It uses ``shape`` (cells per rank and complex) for every
        rank-indexed key (``x_r``, ``pe_r``, ``batch_r``, neighbourhoods) and PyG's slice
        bookkeeping for the others (``y``, ``edge_index``, ...).

        Returns
        -------
        list of ComplexData
            One complex per batch entry, equal to the complexes that were batched.
        """
        counts = self.shape
        if counts.dim() != 2:
            raise ValueError("shape must be a (num_complexes, max_rank + 1) tensor")
        num = counts.size(0)
        zero = torch.zeros((1, counts.size(1)), dtype=torch.long)
        ptr = torch.cat([zero, counts.cumsum(0)], dim=0)  # (num + 1, R + 1)
        ptr_np = ptr.numpy()
        ptr_list = ptr.t().tolist()  # ptr_list[rank][i]
        count_list = counts.tolist()
        slice_dict = getattr(self, "_slice_dict", {}) or {}
        inc_dict = getattr(self, "_inc_dict", {}) or {}
        parts: list[dict[str, Any]] = [{} for _ in range(num)]
        for key in self.keys():
            value = self[key]
            neighborhood = _NEIGHBORHOOD_KEY.match(key)
            rank_match = re.match(r"^.*_(\d+)$", key)
            if key == "shape":
                for i in range(num):
                    parts[i]["shape"] = counts[i : i + 1].clone()
            elif key in ("ptr", "batch"):
                continue
            elif key == "num_nodes":
                for i in range(num):
                    parts[i]["num_nodes"] = count_list[i][0]
            elif neighborhood:
                name, rank = neighborhood.group(1), int(neighborhood.group(2))
                rows_of = row_rank(name, rank)
                value = value.coalesce()
                indices, values = value.indices(), value.values()
                # coalesced → row-major: each complex's block is one contiguous run
                # (index arithmetic in NumPy: torch's threaded kernels cost more on these sizes)
                idx = indices.numpy()
                row_ptr = ptr_np[:, rows_of] if rows_of >= 0 else np.zeros(num + 1, dtype=np.int64)
                bounds = np.searchsorted(idx[0], row_ptr) if rows_of >= 0 else np.zeros(num + 1, dtype=np.int64)
                block = np.repeat(np.arange(num), np.diff(bounds))
                local = torch.from_numpy(idx - np.stack([row_ptr[block], ptr_np[block, rank]]))
                bounds = bounds.tolist()
                for i in range(num):
                    lo, hi = bounds[i], bounds[i + 1]
                    rows = count_list[i][rows_of] if rows_of >= 0 else 0
                    parts[i][key] = torch.sparse_coo_tensor(
                        local[:, lo:hi],
                        values[lo:hi],
                        (rows, count_list[i][rank]),
                        is_coalesced=True,
                        check_invariants=False,
                    )
            elif (
                rank_match
                and isinstance(value, Tensor)
                and int(rank_match.group(1)) < counts.size(1)
                and value.dim() >= 1
                and value.size(0) == ptr_list[int(rank_match.group(1))][-1]
            ):
                rank = int(rank_match.group(1))
                chunks = torch.tensor_split(value, ptr[1:-1, rank])
                is_batch = bool(_BATCH_KEY.match(key))
                for i in range(num):
                    parts[i][key] = chunks[i] - i if is_batch else chunks[i]
            elif key in slice_dict:
                slices = slice_dict[key]
                incs = inc_dict.get(key)
                dim = self.__cat_dim__(key, value)
                for i in range(num):
                    if isinstance(value, Tensor):
                        part = value.narrow(dim, int(slices[i]), int(slices[i + 1] - slices[i]))
                        if incs is not None and isinstance(incs, Tensor) and incs.dim() > 0:
                            part = part - incs[i]
                        parts[i][key] = part
                    else:
                        parts[i][key] = value[int(slices[i]) : int(slices[i + 1])]
            else:
                raise ValueError(f"cannot split key {key!r}: it is not indexed by rank or batch")
        data_class = next(
            c for c in type(self).__mro__ if issubclass(c, ComplexData) and not issubclass(c, Batch)
        )
        out = []
        for part in parts:
            data = data_class()
            # Bulk insert: what Data.__setattr__ does for non-None values, without its
            # per-attribute overhead (this loop runs once per complex of a data set).
            data._store._mapping.update(part)
            out.append(data)
        return out

    # ------------------------------------------------------------------ checks
    def validate_complex(self, atol: float = 1e-6) -> None:
        """Check the invariants every model relies on; raise ``ValueError`` when one fails.

        Checked: shapes of every neighbourhood against the cell counts, coalesced tensors
        without explicit zeros, ``B_r B_{r+1} = 0`` for signed incidences, feature row counts,
        finite float features, and ``batch_r`` lengths.

        Parameters
        ----------
        atol : float, default=1e-6
            Tolerance of the ``B_r B_{r+1} = 0`` check.
        """
        counts = self.cell_counts()
        for key in self.keys():
            match = _NEIGHBORHOOD_KEY.match(key)
            if not match:
                continue
            name, rank = match.group(1), int(match.group(2))
            value = self[key]
            if not (isinstance(value, Tensor) and value.layout == torch.sparse_coo):
                raise ValueError(f"{key} must be a torch.sparse_coo tensor")
            if rank > len(counts) - 1:
                raise ValueError(f"{key} refers to rank {rank} but max_rank is {len(counts) - 1}")
            rows_of = row_rank(name, rank)
            expected = (counts[rows_of] if rows_of >= 0 else 0, counts[rank])
            if tuple(value.shape) != expected:
                raise ValueError(f"{key} has shape {tuple(value.shape)}, expected {expected}")
            if not value.is_coalesced():
                raise ValueError(f"{key} is not coalesced")
            if has_explicit_zeros(value):
                raise ValueError(f"{key} stores explicit zeros")
        for rank in range(1, len(counts) - 1):
            lower, upper = f"signed_incidence_{rank}", f"signed_incidence_{rank + 1}"
            if lower in self and upper in self:
                product = torch_to_scipy(self[lower]) @ torch_to_scipy(self[upper])
                if product.nnz and np.abs(product.data).max() > atol:
                    raise ValueError(f"B_{rank} B_{rank + 1} != 0: the orientation is inconsistent")
        for rank, n in enumerate(counts):
            key = f"x_{rank}"
            if key in self:
                check_features(self[key], n, key)
