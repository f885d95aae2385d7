r"""Sampled sub-complexes: the cells within ``hops`` hops of target vertices, for one large complex.

PyG's ``NeighborLoader`` for complexes. A transductive task on one complex too large for a full
batch trains on batches of target vertices: each batch is the sub-complex of the cells that
the model's layers can reach from the targets, so that memory follows the batch, not the
complex. :class:`SubComplexSampler` holds the complex and its neighbourhoods in compressed
rows (built once); :meth:`SubComplexSampler.sample` returns the sub-complex of a set of
targets; :meth:`SubComplexSampler.loader` is a :class:`torch.utils.data.DataLoader` over target
vertices whose batches are sub-complexes.

Definitions. The cells of the complex are joined by the neighbourhoods a model reads (its
tensor diagram: ``adjacency_r``, ``coadjacency_r``, ``incidence_r``, ...): cells ``a`` and
``b`` are neighbours when ``N[a, b] != 0`` or ``N[b, a] != 0`` for one of them (an incidence
joins a cell and its faces both ways). With ``S^0`` the target vertices, hop ``h = 1..k`` adds
the neighbours of the cells added at hop ``h - 1``,

.. math::

    S^h = S^{h-1} \cup \{\, b : a \in S^{h-1} \setminus S^{h-2},\ b \sim_N a,\ N \in
    \mathcal{N} \,\} , \tag{1}

at most ``num_neighbors[h - 1]`` of them per cell, per neighbourhood and per direction, drawn
uniformly without replacement (``-1`` or ``None``: all of them). The sub-complex is then closed
under faces: every cell brings the faces its incidences (``incidence_r``,
``signed_incidence_r``, ``vertex_incidence_r``) name, so that every boundary is whole. The
result is the complex restricted to these cells, every stored neighbourhood its submatrix
(values kept: adjacency counts, signs, Laplacian entries), every per-cell attribute its rows.

Exactness. A layer that updates a cell from its own state and those of its neighbours under
:math:`\mathcal{N}` (the Cellular Transformer with sparse attention and no global arrow,
message passing) gives, on the sub-complex of ``k`` hops, the outputs of the full complex for
every cell at distance ``d`` from the targets up to layer ``k - d``: with ``k`` the number of
layers and no fan-out cap, the targets' outputs equal the full-batch ones (the equality is
tested). Attention over all cells of a complex (global arrows, dense or linear kernels, GPS)
attends within the sub-complex instead.

Distributed training. The loader is a plain :class:`torch.utils.data.DataLoader` over the
target vertex ids: under Lightning's DDP (``trainer.strategy=ddp``) every process gets a
:class:`torch.utils.data.DistributedSampler` over the targets (Lightning's
``use_distributed_sampler``, on by default), so each process trains on its share, with the same
number of batches on every process (Lightning shuffles the training targets, seeded by the
global seed and the epoch); DDP averages the gradients, so a step equals one process's step on
the mean loss of all processes' batches (tested with two CPU processes). Outside Lightning, pass
``sampler=DistributedSampler(...)``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from topomodelx_attention.data.complex_data import PREPARED_STRUCTURE, ComplexData
from topomodelx_attention.data.neighborhoods import NEIGHBORHOODS, row_rank

__all__ = ["SubComplexSampler"]

#: Neighbourhoods equal to their transpose by definition (``data.neighborhoods``).
_SYMMETRIC = frozenset({"adjacency", "coadjacency", "down_laplacian", "up_laplacian", "hodge_laplacian"})

#: Neighbourhoods whose rows name faces (or vertices) of their column cells: the closure.
_FACES = ("incidence", "signed_incidence", "vertex_incidence")

_RANKED = re.compile(r"^(?P<base>.+)_(?P<rank>\d+)$")

#: Keys the sampler writes on every sub-complex.
_WRITTEN = ("target_index", "node_mask")


@dataclass(frozen=True)
class _Rows:
    """A sparse matrix by compressed rows: entries ``ptr[i]:ptr[i + 1]`` of row ``i``.

    Attributes
    ----------
    ptr : torch.Tensor, shape = (n_rows + 1,)
        Row offsets.
    index : torch.Tensor, shape = (nnz,)
        Column of every entry, ascending within a row.
    """

    ptr: Tensor
    index: Tensor

    @classmethod
    def of(cls, rows: Tensor, cols: Tensor, n_rows: int) -> _Rows:
        """Rows of entries given in row-major order (a coalesced COO tensor's indices)."""
        ptr = torch.zeros(n_rows + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(rows, minlength=n_rows), 0, out=ptr[1:])
        return cls(ptr, cols)

    @classmethod
    def transposed(cls, rows: Tensor, cols: Tensor, n_cols: int) -> _Rows:
        """Rows of the transpose (columns as rows; rows ascending within each)."""
        order = torch.sort(cols, stable=True).indices
        return cls.of(cols[order], rows[order], n_cols)

    def gather(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        """Entries of ``rows``: ``(segment, entry)``, the position in ``rows`` and the entry index.

        Parameters
        ----------
        rows : torch.Tensor, shape = (m,)
            Row indices.

        Returns
        -------
        tuple of torch.Tensor
            Both of shape ``(sum of the rows' entry counts,)``, grouped by row in the order of
            ``rows``, entries ascending within a row.
        """
        start = self.ptr[rows]
        count = self.ptr[rows + 1] - start
        segment = torch.repeat_interleave(torch.arange(rows.numel()), count)
        first = torch.cumsum(count, 0) - count
        entry = start[segment] + torch.arange(segment.numel()) - first[segment]
        return segment, entry


def _fan_out(segment: Tensor, cap: int, num_segments: int, generator: torch.Generator | None) -> Tensor:
    """Positions of at most ``cap`` entries per segment, drawn uniformly without replacement.

    Parameters
    ----------
    segment : torch.Tensor, shape = (e,)
        Segment of every entry (sorted).
    cap : int
        Entries kept per segment.
    num_segments : int
        Number of segments.
    generator : torch.Generator, optional
        Random numbers (default: torch's global generator).

    Returns
    -------
    torch.Tensor
        Positions into ``segment``.
    """
    keys = segment.double() + torch.rand(segment.numel(), generator=generator, dtype=torch.float64)
    order = torch.argsort(keys)
    count = torch.bincount(segment, minlength=num_segments)
    first = torch.cumsum(count, 0) - count
    place = torch.arange(order.numel()) - first[segment[order]]
    return order[place < cap]


class SubComplexSampler:
    """The sub-complexes of one complex around batches of target vertices (module docstring, Eq. 1).

    Parameters
    ----------
    data : ComplexData
        The complex (unbatched, or a batch: ``shape`` then counts the cells per complex).
        Every attribute must be assignable to cells: sparse neighbourhoods
        (``f"{name}_{rank}"``, :data:`~topomodelx_attention.data.NEIGHBORHOODS`), per-rank
        tensors ``f"{name}_{rank}"`` with one row per cell of the rank (``x_r``, ``pe_r``,
        ``batch_r``), vertex tensors without a rank suffix with one row per vertex (``y``,
        ``node_mask``, ``node_id``), and attributes of the whole complex (plain numbers,
        strings, tensors with one row per complex, e.g. ``pe_per_rank``: copied); anything else is
        refused (remove it first, e.g. with the harness's ``prune_keys``).
    hops : int
        Hops ``k`` of Eq. 1 (the number of layers of the model gives its exact outputs).
    num_neighbors : sequence of int, optional
        Fan-out cap per hop: at hop ``h`` at most ``num_neighbors[h - 1]`` neighbours per cell,
        per neighbourhood and per direction (``-1``: all); ``len(num_neighbors) == hops``.
        Default: no cap.
    neighborhoods : iterable of str, optional
        Neighbourhood keys the hops follow (the ones the model reads, e.g. a Cellular
        Transformer's ``neighborhood_keys``). Default: every sparse neighbourhood of ``data``.

    Raises
    ------
    ValueError
        An attribute that belongs to no cells, a neighbourhood key that ``data`` lacks, or
        ``hops`` / ``num_neighbors`` out of range.
    TypeError
        ``data`` that is not a :class:`ComplexData`.

    Examples
    --------
    >>> import toponetx as tnx
    >>> from topomodelx_attention.data import SubComplexSampler, from_toponetx
    >>> cc = tnx.CellComplex([[0, 1, 2], [2, 3, 4]], ranks=2)
    >>> sub = SubComplexSampler(from_toponetx(cc), hops=1).sample([0])
    >>> sub.cell_counts(), sub.target_index.tolist()
    ([3, 2, 0], [0])
    """

    def __init__(
        self,
        data: ComplexData,
        *,
        hops: int,
        num_neighbors: Sequence[int] | None = None,
        neighborhoods: Iterable[str] | None = None,
    ) -> None:
        if not isinstance(data, ComplexData):
            raise TypeError(f"SubComplexSampler needs a ComplexData, got {type(data).__name__}")
        if isinstance(hops, bool) or not isinstance(hops, numbers.Integral) or hops < 0:
            raise ValueError(f"hops must be a non-negative integer (the model's number of layers), got {hops!r}")
        self.data, self.hops = data, int(hops)
        self.num_neighbors = self._check_fan_out(num_neighbors, self.hops)
        self.counts = data.cell_counts()
        self.max_rank = len(self.counts) - 1
        self._plan = self._classify(data)
        sparse = {key: rank for key, (how, rank) in self._plan.items() if how == "neighborhood"}
        if neighborhoods is None:
            followed = sorted(sparse)
        else:
            if isinstance(neighborhoods, str):
                raise TypeError(f"neighborhoods must be a list of keys, got the string {neighborhoods!r}; write [{neighborhoods!r}]")
            followed = sorted(set(neighborhoods))
            for key in followed:
                name, _, rank = key.rpartition("_")
                if key not in sparse:
                    data.neighborhood(name, int(rank) if rank.isdigit() else -1)  # names what there is
        self.neighborhoods = tuple(followed)
        self._rows: dict[str, _Rows] = {}
        self._columns: dict[str, _Rows] = {}
        for key in sparse:
            index = data[key].indices()
            self._rows[key] = _Rows.of(index[0], index[1], int(data[key].shape[0]))
        # (source rank, destination rank, rows of the relation) of every hop direction
        self._steps: list[tuple[int, int, _Rows]] = []
        for key in self.neighborhoods:
            name, col = self._name_rank(key)
            row = row_rank(name, col)
            if row < 0:
                continue  # incidence_0: no rows
            self._steps.append((row, col, self._rows[key]))
            if name not in _SYMMETRIC:
                self._steps.append((col, row, self._transpose(key)))
        # (rank of the cells, rank of their faces, rows of the relation) of the closure
        self._closure: list[tuple[int, int, _Rows]] = []
        for key in sparse:
            name, col = self._name_rank(key)
            row = row_rank(name, col)
            if name in _FACES and 0 <= row < col:
                self._closure.append((col, row, self._transpose(key)))
        self._closure.sort(key=lambda step: -step[0])  # top rank first: faces of faces follow

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(cells={self.counts}, hops={self.hops}, "
            f"num_neighbors={self.num_neighbors}, neighborhoods={list(self.neighborhoods)})"
        )

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _check_fan_out(num_neighbors: Sequence[int] | None, hops: int) -> tuple[int, ...] | None:
        if num_neighbors is None:
            return None
        if isinstance(num_neighbors, (str, bytes)) or not isinstance(num_neighbors, Sequence):
            raise ValueError(f"num_neighbors must be a list of {hops} integers (one per hop) or None, got {num_neighbors!r}")
        caps = list(num_neighbors)
        if len(caps) != hops or any(
            isinstance(c, bool) or not isinstance(c, numbers.Integral) or c < -1 for c in caps
        ):
            raise ValueError(
                f"num_neighbors must hold one integer >= 0 (or -1: all) per hop, {hops} in all, "
                f"got {num_neighbors!r}"
            )
        return tuple(int(c) for c in caps)

    @staticmethod
    def _name_rank(key: str) -> tuple[str, int]:
        name, _, rank = key.rpartition("_")
        return name, int(rank)

    def _classify(self, data: ComplexData) -> dict[str, tuple[str, int]]:
        """``key -> (how, rank)``: how every attribute follows the sampled cells."""
        plan: dict[str, tuple[str, int]] = {}
        n_0 = self.counts[0]
        for key in data.keys():
            value = data[key]
            match = _RANKED.match(key)
            if key == PREPARED_STRUCTURE:
                raise ValueError(
                    f"the complex carries {key!r}, a model's structure prepared for the whole "
                    "complex: every sub-complex is prepared on its own, so sample the complex "
                    f"without it (del data.{key})"
                )
            if key in ("shape", "num_nodes"):
                plan[key] = ("counts", -1)
            elif key in _WRITTEN and key != "node_mask":
                raise ValueError(
                    f"the complex holds {key!r}, which the sampler writes on every sub-complex; "
                    "remove it first"
                )
            elif isinstance(value, Tensor) and value.is_sparse:
                name = match.group("base") if match else None
                if name not in NEIGHBORHOODS or value.dim() != 2:
                    raise ValueError(
                        f"sparse attribute {key!r} is not a neighbourhood f'{{name}}_{{rank}}' with a name of "
                        f"{list(NEIGHBORHOODS)}: the sampler cannot restrict it; remove it first"
                    )
                rank = int(match.group("rank"))
                plan[key] = ("neighborhood", rank)
                self._check_shape(key, value, (self._count(row_rank(name, rank)), self._count(rank)))
            elif isinstance(value, Tensor) and match and int(match.group("rank")) <= self.max_rank:
                rank = int(match.group("rank"))
                if value.dim() == 0 or value.shape[0] != self.counts[rank]:
                    raise ValueError(
                        f"{key} has shape {tuple(value.shape)} but the complex has {self.counts[rank]} "
                        f"rank-{rank} cells: a per-rank attribute needs one row per cell"
                    )
                plan[key] = ("rows", rank)
            elif isinstance(value, Tensor) and value.dim() > 0 and value.shape[0] == n_0 and not match:
                plan[key] = ("rows", 0)
            elif isinstance(value, (numbers.Number, str)) or (
                isinstance(value, Tensor) and (value.dim() == 0 or value.shape[0] == data.num_complexes)
            ):
                plan[key] = ("copy", -1)  # of the whole complex (e.g. pe_per_rank)
            else:
                shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
                raise ValueError(
                    f"attribute {key!r} ({shape}) belongs to no cells: a sub-complex keeps neighbourhoods, "
                    f"per-rank tensors f'{{name}}_{{rank}}' with one row per cell, vertex tensors with "
                    f"one row per vertex ({n_0}) and tensors with one row per complex; remove {key!r} before sampling"
                )
        return plan

    def _count(self, rank: int) -> int:
        return 0 if rank < 0 else self.counts[rank]

    @staticmethod
    def _check_shape(key: str, value: Tensor, expected: tuple[int, int]) -> None:
        if tuple(value.shape) != expected:
            raise ValueError(f"{key} has shape {tuple(value.shape)}, expected {expected} from the cell counts")

    def _transpose(self, key: str) -> _Rows:
        if key not in self._columns:
            index = self.data[key].indices()
            self._columns[key] = _Rows.transposed(index[0], index[1], int(self.data[key].shape[1]))
        return self._columns[key]

    def _targets(self, targets: Any) -> Tensor:
        """Targets as sorted unique vertex ids (long, 1-D), checked against ``n_0``."""
        if isinstance(targets, (list, tuple)) and targets and all(isinstance(t, Tensor) for t in targets):
            targets = torch.stack([t.reshape(()) for t in targets])  # a DataLoader's list of ids
        tensor = torch.as_tensor(targets)
        if not tensor.numel():
            raise ValueError("targets is empty: give at least one target vertex")
        if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
            raise TypeError(f"targets must be integer vertex ids, got dtype {tensor.dtype}")
        tensor = tensor.reshape(-1).long()
        n_0 = self.counts[0]
        if int(tensor.min()) < 0 or int(tensor.max()) >= n_0:
            raise ValueError(f"targets must be vertex ids in 0..{n_0 - 1}, got values in {int(tensor.min())}..{int(tensor.max())}")
        return torch.unique(tensor)

    # ------------------------------------------------------------------ sampling
    def cells(self, targets: Any, generator: torch.Generator | None = None) -> list[Tensor]:
        """Return the cells of the sub-complex of ``targets`` (Eq. 1, then the closure under faces).

        Parameters
        ----------
        targets : array-like of int, shape = (b,)
            Target vertex ids (repeats are merged).
        generator : torch.Generator, optional
            Random numbers of the fan-out draws (default: torch's global generator).

        Returns
        -------
        list of torch.Tensor
            ``cells[r]`` of shape ``(s_r,)``: sorted ids of the rank-``r`` cells kept.
        """
        targets = self._targets(targets)
        keep = [torch.zeros(n, dtype=torch.bool) for n in self.counts]
        keep[0][targets] = True
        frontier: list[Tensor] = [torch.zeros(0, dtype=torch.long) for _ in self.counts]
        frontier[0] = targets
        for hop in range(self.hops):
            cap = -1 if self.num_neighbors is None else self.num_neighbors[hop]
            found: list[list[Tensor]] = [[] for _ in self.counts]
            for source, destination, relation in self._steps:
                if not frontier[source].numel():
                    continue
                segment, entry = relation.gather(frontier[source])
                if cap >= 0:
                    entry = entry[_fan_out(segment, cap, frontier[source].numel(), generator)]
                found[destination].append(relation.index[entry])
            for rank, parts in enumerate(found):
                new = torch.cat(parts) if parts else frontier[rank][:0]
                new = torch.unique(new[~keep[rank][new]])
                keep[rank][new] = True
                frontier[rank] = new
        for rank, face_rank, relation in self._closure:
            _, entry = relation.gather(torch.nonzero(keep[rank]).view(-1))
            keep[face_rank][relation.index[entry]] = True
        return [torch.nonzero(mask).view(-1) for mask in keep]

    def sample(self, targets: Any, generator: torch.Generator | None = None) -> ComplexData:
        """Return the sub-complex of ``targets``.

        Parameters
        ----------
        targets : array-like of int, shape = (b,)
            The batch's target vertices, as for :meth:`cells`.
        generator : torch.Generator, optional
            The fan-out draws' random numbers, as for :meth:`cells`.

        Returns
        -------
        ComplexData
            The complex restricted to :meth:`cells` (cells in ascending order of their ids in
            the complex; neighbourhoods coalesced), plus ``target_index``, long of shape
            ``(b,)``, the rows of the sorted unique targets among its vertices, and
            ``node_mask``, bool of shape ``(s_0,)``, true at the targets (and-ed with the
            complex's own ``node_mask`` when it has one): the vertices a loss reads.
        """
        targets = self._targets(targets)
        cells = self.cells(targets, generator)
        keep = [torch.zeros(n, dtype=torch.bool) for n in self.counts]
        for mask, ids in zip(keep, cells):
            mask[ids] = True
        data = self.data
        out: dict[str, Any] = {}
        sizes = [ids.numel() for ids in cells]
        for key, (how, rank) in self._plan.items():
            value = data[key]
            if how == "counts":
                continue
            if how == "copy":
                out[key] = value
            elif how == "rows":
                out[key] = value.index_select(0, cells[rank])
            else:
                name, col = self._name_rank(key)
                row = row_rank(name, col)
                shape = (sizes[row] if row >= 0 else 0, sizes[col])
                if row < 0:
                    out[key] = torch.sparse_coo_tensor(
                        torch.zeros(2, 0, dtype=torch.long), value.values()[:0], shape, is_coalesced=True,
                        check_invariants=False,
                    )
                    continue
                segment, entry = self._rows[key].gather(cells[row])
                columns = self._rows[key].index[entry]
                inside = keep[col][columns]
                segment, entry, columns = segment[inside], entry[inside], columns[inside]
                index = torch.stack([segment, torch.searchsorted(cells[col], columns)])
                out[key] = torch.sparse_coo_tensor(
                    index, value.values()[entry], shape, is_coalesced=True, check_invariants=False
                )
        batches = [out[f"batch_{r}"] for r in range(self.max_rank + 1)]
        num = data.num_complexes
        shape = torch.stack([torch.bincount(b, minlength=num) for b in batches], dim=1)
        target_index = torch.searchsorted(cells[0], targets)
        node_mask = torch.zeros(sizes[0], dtype=torch.bool)
        node_mask[target_index] = True
        if "node_mask" in out:
            node_mask &= out["node_mask"].bool()
        out["node_mask"], out["target_index"] = node_mask, target_index
        sub = ComplexData(shape=shape, **out)
        sub.num_nodes = sizes[0]
        return sub

    def __call__(self, targets: Any) -> ComplexData:
        """:meth:`sample` (the loader's ``collate_fn``: a list of vertex ids)."""
        return self.sample(targets)

    def loader(self, targets: Any, *, batch_size: int, shuffle: bool = False, **kwargs: Any) -> DataLoader:
        """Return a loader of batches of target vertices as sub-complexes.

        Parameters
        ----------
        targets : array-like of int, shape = (t,)
            The target vertices of an epoch (e.g. the training vertices of a split).
        batch_size : int
            Targets per batch.
        shuffle : bool, default=False
            Draw new batches every epoch.
        **kwargs
            Further :class:`torch.utils.data.DataLoader` arguments (``num_workers``,
            ``sampler``: e.g. a :class:`~torch.utils.data.DistributedSampler`, ...).

        Returns
        -------
        torch.utils.data.DataLoader
            A loader over the sorted unique target ids with this sampler as ``collate_fn``:
            ``ceil(t / batch_size)`` sub-complexes per epoch.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if "collate_fn" in kwargs:
            raise ValueError("the loader's collate_fn is the sampler itself; leave collate_fn out")
        return DataLoader(self._targets(targets), batch_size=int(batch_size), shuffle=shuffle, collate_fn=self, **kwargs)
