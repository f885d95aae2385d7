"""Batching of :class:`ComplexData`: one concatenation per neighbourhood, and splitting back.

PyG batches a list of ``Data`` objects with :func:`torch_geometric.data.collate.collate`; the
only hooks a ``Data`` subclass has there are ``__cat_dim__`` and ``__inc__``. For a torch
sparse tensor PyG's generic path (``torch_geometric.utils.sparse.cat``) builds one offset tensor
and one index sum per complex and per key, and every dense key costs a ``__inc__`` call and an
addition per complex — with ~20 neighbourhood keys and 32 complexes that is a large share of a
training step. :func:`collate_complexes` gives the same batch with one concatenation of the
indices of all neighbourhoods, one offset table and one concatenation of values per key, and
marks the block-diagonal result coalesced without sorting (the blocks are coalesced and their
row offsets increase, so the concatenation is already in row-major order). Dense keys
(features ``x_r``, ``batch_r``, ``y``, ``edge_index``, ``shape``, ...) are concatenated once
per key and shifted by one repeated offset vector, following the rules of
``__cat_dim__``/``__inc__``, so the batch equals PyG's own, including its
``_slice_dict``/``_inc_dict`` bookkeeping; keys with other rules still go through PyG's
``collate``.

Ways to batch complexes — all give the same batch through :func:`collate_complexes`:

* :class:`torch_geometric.loader.DataLoader` and ``Batch.from_data_list``, PyG's own entry
  points: importing :mod:`topomodelx_attention.data` wraps ``Batch.from_data_list`` (which PyG's
  ``Collater`` calls for every batch) so that a list made only of unbatched ``ComplexData``
  of one class goes to :func:`collate_complexes`; any other list (plain ``Data``, batches
  of batches, a list mixing classes) takes PyG's own method, unchanged
  (:data:`pyg_from_data_list`);
* :class:`ComplexDataLoader` (a drop-in :class:`torch_geometric.loader.DataLoader`) and
  ``ComplexDataBatch.from_data_list(complexes)``, which call it directly.

Every path checks that the complexes have the same keys (:func:`check_batchable`) and raises a
``ValueError`` naming the keys that differ. PyG's generic ``collate`` (reached only by calling
it directly, e.g. ``pyg_from_data_list``) batches the keys of the first complex (its own error
for a later complex lacking one is a bare ``KeyError``; a key only later complexes have is
dropped): ``ComplexData``'s batching hook on ``shape``, which PyG collates first, raises the
same ``ValueError`` there. Neither check sees ``exclude_keys``: keys that differ are removed
from the complexes before batching (``del data[key]``), not excluded.

Either way the batch is a :class:`ComplexDataBatch`: importing this package registers it as
the class PyG creates for batches of ``ComplexData`` (PyG caches one dynamically created
``<Name>Batch`` class per data class; this module provides that class). Its ``to_data_list()``,
``get_example(i)``, ``batch[i]`` and ``batch[i:j]`` split block-diagonal sparse tensors with
:meth:`ComplexData.to_complex_list`, which PyG's generic ``separate`` cannot do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import numpy as np
import torch
import torch_geometric.data.batch as pyg_batch_module
from torch import Tensor
from torch_geometric.data import Batch
from torch_geometric.data.collate import collate as pyg_collate
from torch_geometric.loader import DataLoader
from torch_geometric.loader.dataloader import Collater

from topomodelx_attention.data.complex_data import (
    _BATCH_KEY,
    _NEIGHBORHOOD_KEY,
    ComplexData,
    max_rank_mismatch,
)
from topomodelx_attention.data.neighborhoods import ORIENTED_NEIGHBORHOODS

__all__ = [
    "ComplexDataBatch",
    "ComplexDataLoader",
    "check_batchable",
    "collate_complexes",
    "keys_mismatch",
    "pyg_from_data_list",
    "register_batch_class",
]


# ---------------------------------------------------------------------------------- checks
def check_batchable(data_list: Sequence[ComplexData]) -> None:
    """Raise a ``ValueError`` unless every complex has the keys of the first one.

    PyG batches the keys of the first complex only: a later complex without one of them
    makes it raise ``KeyError``, a later complex with more keys loses them silently. The
    usual cause is a batch mixing complexes converted from a combinatorial complex (no
    orientation: no ``signed_incidence_r`` and no Laplacians) with cell or simplicial
    complexes, or complexes of different ``max_rank``.

    Parameters
    ----------
    data_list : sequence of ComplexData
        The complexes of one batch.
    """
    if not data_list:
        raise ValueError("cannot batch an empty list of complexes")
    for i, data in enumerate(data_list):
        if not isinstance(data, ComplexData):
            raise TypeError(
                f"complex {i} of the batch is a {type(data).__name__}, not a ComplexData"
            )
    reference = data_list[0]._store._mapping.keys()
    different = [i for i, data in enumerate(data_list) if data._store._mapping.keys() != reference]
    if not different:  # same keys: same batch_r keys, so the same maximal rank too
        return
    max_ranks = [_stored_max_rank(data) for data in data_list]
    for i, rank in enumerate(max_ranks):
        if rank != max_ranks[0] and None not in (rank, max_ranks[0]):
            raise ValueError(max_rank_mismatch(max_ranks[0], rank, i))
    raise ValueError(keys_mismatch(data_list[0], data_list[different[0]], different[0]))


def keys_mismatch(first: ComplexData, other: ComplexData, index: int | None = None) -> str:
    """Message of the ``ValueError`` raised when complexes with different keys are batched.

    Used by :func:`check_batchable` and, for PyG's own ``DataLoader`` / ``Batch.from_data_list``,
    by ``ComplexData.__inc__`` (before PyG's ``KeyError`` on a missing key).

    Parameters
    ----------
    first : ComplexData
        The first complex of the batch (PyG batches its keys).
    other : ComplexData
        A later complex whose keys differ.
    index : int, optional
        Position of ``other`` in the batch, when known.

    Returns
    -------
    str
        Which keys differ and how to fix it.
    """
    which = f"complex {index}" if index is not None else "a later complex"
    reference, keys = first._store._mapping.keys(), other._store._mapping.keys()
    missing, extra = sorted(reference - keys), sorted(keys - reference)
    problem = []
    if missing:
        problem.append(f"{which} lacks {missing}, which complex 0 has")
    if extra:
        problem.append(f"{which} has {extra}, which complex 0 lacks")
    return (
        "cannot batch these complexes: every complex of a batch needs the same keys, but "
        + " and ".join(problem)
        + ". "
        + _batch_fix(first, other, missing + extra)
    )


def _stored_max_rank(data: ComplexData) -> int | None:
    """Highest ``r`` with a ``batch_r`` key (``None`` without any)."""
    ranks = [int(m.group(1)) for key in data._store._mapping if (m := _BATCH_KEY.match(key))]
    return max(ranks, default=None)


def _batch_fix(first: ComplexData, other: ComplexData, differing: list[str]) -> str:
    """How to make two complexes batchable, from the keys that differ."""
    ranks = [
        {int(m.group(1)) for key in data._store._mapping if (m := _BATCH_KEY.match(key))}
        for data in (first, other)
    ]
    both = ranks[0] & ranks[1]  # a key of a rank only one complex has is a max_rank matter
    names = {
        m.group(1)
        for key in differing
        if (m := _NEIGHBORHOOD_KEY.match(key)) and int(m.group(2)) in both
    }
    hints = []
    if any(_BATCH_KEY.match(key) for key in differing):
        hints.append(
            "They have different maximal ranks: convert or lift all of them with the same "
            "max_rank= (from_toponetx) / complex_dim= (liftings), which pads empty ranks."
        )
    if names:
        common = sorted(
            {m.group(1) for key in first.keys() if (m := _NEIGHBORHOOD_KEY.match(key))}
            & {m.group(1) for key in other.keys() if (m := _NEIGHBORHOOD_KEY.match(key))}
        )
        hint = f"Build all of them with the same neighbourhoods, e.g. neighborhoods={common}."
        if names & ORIENTED_NEIGHBORHOODS:
            hint = (
                "Signed incidences and Laplacians need an orientation, which a combinatorial "
                "complex does not have, so a batch mixing it with oriented (cell, simplicial) "
                "complexes cannot carry them. " + hint
            )
        hints.append(hint)
    if not names and not any(_BATCH_KEY.match(key) for key in differing):
        hints.append("Give every complex the same features (x_r, pe_r) and attributes.")
    return " ".join(hints)


# ---------------------------------------------------------------------------------- collation
def _is_block_diagonal(value: Any) -> bool:
    return (
        isinstance(value, Tensor)
        and value.layout == torch.sparse_coo
        and value.sparse_dim() == 2
        and value.dense_dim() == 0
    )


def collate_complexes(
    data_list: Sequence[ComplexData],
    follow_batch: Iterable[str] | None = None,
    exclude_keys: Iterable[str] | None = None,
) -> ComplexDataBatch:
    """Batch complexes into their disjoint union (what PyG's generic ``collate`` gives, faster).

    Every 2-D sparse COO key becomes block-diagonal: block ``i`` is offset by the row and
    column counts of the complexes before it. All indices are concatenated at once and shifted
    by one offset table; values are concatenated per key; the result is marked coalesced when
    every block is (blocks with increasing offsets concatenate in row-major order), otherwise
    it is coalesced. ``batch_r`` becomes the complex index of every cell. Dense tensors follow
    the rules of ``ComplexData.__cat_dim__``/``__inc__`` (PyG's ``Data`` rules: ``*index*``
    keys are concatenated along the last dimension and shifted by the vertex counts, others
    along rows), vectorised, and ``num_nodes`` is summed as PyG does; the batch object is then
    built directly. Anything else (a subclass with its own rules, ``follow_batch`` keys,
    other non-tensors) goes through PyG's ``collate``. ``_slice_dict`` and ``_inc_dict`` are
    PyG's.

    Parameters
    ----------
    data_list : sequence of ComplexData
        Complexes with the same keys (see :func:`check_batchable`).
    follow_batch : iterable of str, optional
        As for :meth:`torch_geometric.data.Batch.from_data_list` (these keys take PyG's path).
    exclude_keys : iterable of str, optional
        Keys left out of the batch.

    Returns
    -------
    ComplexDataBatch
        The batch; ``shape`` is ``(num_complexes, R + 1)``.
    """
    data_list = list(data_list)
    check_batchable(data_list)
    first = data_list[0]
    exclude = set(exclude_keys or ())
    follow = set(follow_batch or ())
    mapping = first._store._mapping
    # ComplexData's rules (and Data's, which it defers to), unless a subclass changed them
    own_rules = (
        type(first).__inc__ is ComplexData.__inc__
        and type(first).__cat_dim__ is ComplexData.__cat_dim__
    )
    has_nodes = "num_nodes" in mapping
    sparse_keys, dense_keys, generic_keys = [], [], []  # dense: (key, cat_dim, increment kind)
    for key, value in mapping.items():
        if key in exclude:
            continue
        if key in follow or not isinstance(value, Tensor):
            generic_keys.append(key)
        elif _is_block_diagonal(value):
            if own_rules or first.__cat_dim__(key, value) == (0, 1):
                sparse_keys.append(key)
            else:
                generic_keys.append(key)
        elif own_rules and type(value) is Tensor and value.dim() >= 1 and not value.is_nested:
            if _BATCH_KEY.match(key) and value.dim() == 1:
                dense_keys.append((key, 0, "complex"))  # ComplexData.__inc__: 1 per complex
            elif "batch" in key:
                generic_keys.append(key)  # Data.__inc__: max + 1, left to PyG
            elif "index" in key or key == "face":
                if has_nodes:
                    dense_keys.append((key, -1, "nodes"))  # Data: cat_dim -1, increment num_nodes
                else:
                    generic_keys.append(key)
            else:
                dense_keys.append((key, 0, "zero"))  # Data: cat_dim 0, no increment
        else:
            generic_keys.append(key)
    mappings = [data._store._mapping for data in data_list]
    num = len(data_list)
    own_batch = own_rules and has_nodes and not isinstance(first, Batch)
    node_counts = [m["num_nodes"] for m in mappings] if has_nodes else None
    if (
        own_batch
        and all(key == "num_nodes" for key in generic_keys)
        and all(type(n) is int for n in node_counts)
    ):
        # nothing left for PyG's collate: build the batch as it would (class, num_nodes)
        out = _new_batch(type(first))
        slice_dict: dict[str, Any] = {}
        inc_dict: dict[str, Any] = {}
        if generic_keys:
            out._store._num_nodes = node_counts
            out._store.num_nodes = sum(node_counts)
    else:
        out, slice_dict, inc_dict = pyg_collate(
            Batch,
            data_list=data_list,
            increment=True,
            add_batch=not isinstance(first, Batch) and not own_batch,
            follow_batch=follow,
            exclude_keys=exclude | set(sparse_keys) | {key for key, _, _ in dense_keys},
        )
    out_mapping = out._store._mapping  # bulk insert: what Data.__setattr__ does, without its cost
    for key, (value, slices) in zip(sparse_keys, _block_diagonal(sparse_keys, mappings)):
        out_mapping[key] = value
        slice_dict[key] = slices
        inc_dict[key] = None
    steps = torch.arange(num)
    # per-complex counts in NumPy: these arrays are small, torch's per-op cost is not
    nodes = (
        np.fromiter((int(n or 0) for n in node_counts), np.int64, num) if has_nodes else None
    )
    node_incs = None if nodes is None else torch.from_numpy(np.cumsum(nodes) - nodes)
    zeros = torch.zeros(num, dtype=torch.long)
    for key, dim, kind in dense_keys:
        values = [m[key] for m in mappings]
        sizes = np.fromiter((value.shape[dim] for value in values), np.int64, num)
        value = torch.cat(values, dim=dim)
        incs = {"complex": steps, "nodes": node_incs, "zero": zeros}[kind]
        if kind != "zero" and num > 1 and int(incs[-1]) != 0:
            # as PyG: shifted only when some increment is not 0
            value = value + torch.repeat_interleave(
                incs, torch.from_numpy(sizes), output_size=value.shape[dim]
            )
        out_mapping[key] = value
        slice_dict[key] = torch.from_numpy(np.concatenate([[0], np.cumsum(sizes)]))
        inc_dict[key] = incs.clone()
    if own_batch:  # what PyG's add_batch gives: the complex of every vertex
        out_mapping["batch"] = torch.repeat_interleave(
            steps, torch.from_numpy(nodes), output_size=int(nodes.sum())
        )
        out_mapping["ptr"] = torch.from_numpy(np.concatenate([[0], np.cumsum(nodes)]))
    # PyG's key order: the first complex's (``shape`` first; ``follow_batch`` vectors after
    # their key), then ``batch`` and ``ptr``
    batched = dict(out_mapping)
    out_mapping.clear()
    for key in mapping:
        for name in (key, f"{key}_batch", f"{key}_ptr") if key in follow else (key,):
            if name in batched:
                out_mapping[name] = batched.pop(name)
    out_mapping.update(batched)
    out._num_graphs = num
    out._slice_dict = slice_dict
    out._inc_dict = inc_dict
    return out


def _new_batch(data_class: type) -> Batch:
    """Create an empty batch of ``data_class``, as ``Batch(_base_cls=data_class)`` does.

    PyG's ``DynamicInheritance`` looks the ``<Name>Batch`` class up (or creates it) and reads
    the signature of ``data_class.__init__`` on every call; for the classes this module
    registered, with ``ComplexData``'s constructor, the class is known and takes no argument.
    """
    batch_class = vars(pyg_batch_module).get(f"{data_class.__name__}{Batch.__name__}")
    if (
        batch_class is None
        or data_class.__init__ is not ComplexData.__init__
        or not (issubclass(batch_class, Batch) and issubclass(batch_class, data_class))
    ):
        return Batch(_base_cls=data_class)
    return type.__call__(batch_class)


def _block_diagonal(keys: list[str], mappings: list[dict[str, Any]]) -> list[tuple[Tensor, Tensor]]:
    """Block-diagonal concatenation of the sparse tensors ``mappings[i][key]`` for every key.

    Returns, per key, the batched tensor and PyG's slices (cumulated ``(rows, cols)``).
    """
    if not keys:  # e.g. a batch pruned to dense keys only
        return []
    num = len(mappings)
    tensors = [mapping[key] for key in keys for mapping in mappings]  # key-major
    # (rows, cols, nnz) of every block; NumPy: these arrays are small, torch's per-op cost is not
    count = len(tensors)
    sizes = np.fromiter(chain.from_iterable([t.shape for t in tensors]), np.int64, 2 * count)
    sizes = sizes.reshape(len(keys), num, 2)
    index_list = [t._indices() for t in tensors]
    nnz = np.fromiter([i.shape[1] for i in index_list], np.int64, count).reshape(len(keys), num)
    offsets = np.cumsum(sizes, axis=1) - sizes  # rows and columns before each block
    indices = torch.cat(index_list, dim=1)
    if indices.shape[1]:
        shift = np.repeat(offsets.reshape(-1, 2), nnz.reshape(-1), axis=0)
        indices = indices + torch.from_numpy(shift.T).to(indices.device)
    bounds = np.concatenate([[0], np.cumsum(nnz.sum(1))]).tolist()
    shapes = sizes.sum(1).tolist()
    zero = np.zeros((len(keys), 1, 2), dtype=np.int64)
    slices = torch.from_numpy(np.concatenate([zero, np.cumsum(sizes, axis=1)], axis=1))  # PyG's
    coalesced = (
        np.fromiter([t.is_coalesced() for t in tensors], bool, count).reshape(len(keys), num).all(1)
    )
    out = []
    for k in range(len(keys)):
        value = torch.sparse_coo_tensor(
            indices[:, bounds[k] : bounds[k + 1]].contiguous(),
            torch.cat([t._values() for t in tensors[k * num : (k + 1) * num]]),
            tuple(shapes[k]),
            is_coalesced=bool(coalesced[k]),
            check_invariants=False,
        )
        out.append((value if coalesced[k] else value.coalesce(), slices[k]))
    return out


# ---------------------------------------------------------------------------------- batch class
class _BatchMeta(type(Batch), type(ComplexData)):
    """Metaclass of :class:`ComplexDataBatch` (PyG's ``DynamicInheritance`` and ``Data``'s)."""


class ComplexDataBatch(Batch, ComplexData, metaclass=_BatchMeta):
    """A batch of :class:`ComplexData`: the disjoint union, with PyG's ``Batch`` interface.

    PyG creates it (``Batch.from_data_list``, :class:`torch_geometric.loader.DataLoader`);
    those, :meth:`from_data_list` of this class and :class:`ComplexDataLoader` all batch
    complexes with :func:`collate_complexes`. Splitting (``to_data_list``, ``get_example``,
    ``batch[i]``, ``batch[i:j]``) uses :meth:`ComplexData.to_complex_list`.
    """

    @classmethod
    def from_data_list(
        cls,
        data_list: Sequence[ComplexData],
        follow_batch: Iterable[str] | None = None,
        exclude_keys: Iterable[str] | None = None,
    ) -> ComplexDataBatch:
        """Batch complexes with :func:`collate_complexes` (same result as PyG's generic path, faster).

        Parameters
        ----------
        data_list : sequence of ComplexData
            Complexes with the same keys.
        follow_batch, exclude_keys : iterable of str, optional
            As for :meth:`torch_geometric.data.Batch.from_data_list`.

        Returns
        -------
        ComplexDataBatch
            The batch.
        """
        return collate_complexes(data_list, follow_batch, exclude_keys)

    def get_example(self, idx: int) -> ComplexData:
        """Return complex ``idx`` of the batch (negative indices count from the end).

        Parameters
        ----------
        idx : int
            Position in the batch.

        Returns
        -------
        ComplexData
            The complex, equal to the one that was batched.
        """
        num = self.num_complexes
        position = int(idx)
        if position < 0:
            position += num
        if not 0 <= position < num:
            raise IndexError(
                f"complex index {int(idx)} is out of range for a batch of {num} complexes"
            )
        return self.to_complex_list()[position]

    def index_select(self, idx: Any) -> list[ComplexData]:
        """Return the complexes at ``idx`` (slice, sequence, long or bool tensor/array).

        Parameters
        ----------
        idx : slice or sequence of int or torch.Tensor or numpy.ndarray
            Positions (or a boolean mask) in the batch.

        Returns
        -------
        list of ComplexData
            The selected complexes, split once from the batch.
        """
        if isinstance(idx, Tensor):
            idx = idx.detach().cpu().numpy()
        if isinstance(idx, str):
            raise IndexError(f"cannot select complexes with the string {idx!r}")
        selected = np.arange(self.num_complexes)[idx]
        parts = self.to_complex_list()
        return [parts[i] for i in np.atleast_1d(selected).tolist()]

    def to_data_list(self) -> list[ComplexData]:
        """Split the batch into its complexes (:meth:`ComplexData.to_complex_list`).

        Returns
        -------
        list of ComplexData
            One complex per batch entry.
        """
        return self.to_complex_list()


_BATCH_METHODS = ("from_data_list", "get_example", "index_select", "to_data_list")


def register_batch_class(data_class: type[ComplexData]) -> type:
    """Make PyG batch ``data_class`` objects into a class with :class:`ComplexDataBatch`'s methods.

    PyG names the batch class of a data class ``f"{data_class.__name__}Batch"`` and creates
    it once (bases ``(Batch, data_class)``) in ``torch_geometric.data.batch``; this function
    provides it there first. Called for ``ComplexData`` on import and for every subclass.

    Parameters
    ----------
    data_class : type
        ``ComplexData`` or a subclass.

    Returns
    -------
    type
        The batch class.
    """
    name = f"{data_class.__name__}{Batch.__name__}"
    if data_class is ComplexData:
        batch_class = ComplexDataBatch
    else:
        meta = type("MetaResolver", (type(Batch), type(data_class)), {})
        namespace = {attr: ComplexDataBatch.__dict__[attr] for attr in _BATCH_METHODS}
        namespace["__module__"] = data_class.__module__
        batch_class = meta(name, (Batch, data_class), namespace)
    vars(pyg_batch_module)[name] = batch_class
    return batch_class


register_batch_class(ComplexData)


# ---------------------------------------------------------------------------------- PyG's entry
def _is_complex_list(data_list: Any) -> bool:
    """Whether ``data_list`` is a non-empty list/tuple of unbatched ``ComplexData`` of one class.

    One class: PyG asks every item for its own ``__inc__``, ``collate_complexes`` the first.
    """
    if not isinstance(data_list, (list, tuple)) or not data_list:
        return False
    data_class = type(data_list[0])
    return (
        issubclass(data_class, ComplexData)
        and not issubclass(data_class, Batch)
        and all(type(data) is data_class for data in data_list)
    )


pyg_from_data_list = Batch.__dict__["from_data_list"].__func__
"""PyG's own ``Batch.from_data_list`` (the generic path), as it was before this module wrapped it.

``pyg_from_data_list(Batch, data_list)`` batches with PyG's ``collate`` whatever the items are:
the reference the fast path is tested and benchmarked against."""

if getattr(pyg_from_data_list, "_complex_dispatch", False):  # this module imported twice
    pyg_from_data_list = pyg_from_data_list.__wrapped__


def _from_data_list(
    cls: type,
    data_list: Sequence[Any],
    follow_batch: Iterable[str] | None = None,
    exclude_keys: Iterable[str] | None = None,
) -> Any:
    """``Batch.from_data_list`` with :func:`collate_complexes` for lists of ``ComplexData``.

    PyG's ``Collater`` (:class:`torch_geometric.loader.DataLoader`) batches every list of
    ``Data`` objects with ``Batch.from_data_list``; ``Data`` subclasses only hook into it
    through ``__cat_dim__`` / ``__inc__``, which leaves PyG's per-complex, per-key loops (one
    offset tensor and one index sum per complex and per sparse key). This wrapper, installed on
    ``Batch`` when :mod:`topomodelx_attention.data` is imported, sends a list whose items are
    all (unbatched) ``ComplexData`` to :func:`collate_complexes` — the same batch, same
    ``_slice_dict`` / ``_inc_dict``, same errors — and everything else to PyG's own method
    (:data:`pyg_from_data_list`) unchanged.
    """
    if cls is Batch and _is_complex_list(data_list):
        return collate_complexes(data_list, follow_batch, exclude_keys)
    return pyg_from_data_list(cls, data_list, follow_batch, exclude_keys)


_from_data_list.__wrapped__ = pyg_from_data_list  # type: ignore[attr-defined]
_from_data_list._complex_dispatch = True  # type: ignore[attr-defined]
Batch.from_data_list = classmethod(_from_data_list)  # type: ignore[method-assign]


# ---------------------------------------------------------------------------------- loader
class ComplexCollater(Collater):
    """PyG's ``Collater`` with :func:`collate_complexes` for lists of ``ComplexData``."""

    def __call__(self, batch: list[Any]) -> Any:
        if batch and isinstance(batch[0], ComplexData):
            return collate_complexes(batch, self.follow_batch, self.exclude_keys)
        return super().__call__(batch)


class ComplexDataLoader(DataLoader):
    """:class:`torch_geometric.loader.DataLoader` batching complexes with :func:`collate_complexes`.

    Same arguments, batches and speed as PyG's loader, which batches complexes with
    :func:`collate_complexes` too (see the module docstring); kept so that code written for
    it runs unchanged. Checks that the complexes of a batch have the same keys
    (:func:`check_batchable`).

    Parameters
    ----------
    dataset : Dataset or sequence of ComplexData
        The complexes.
    batch_size : int, default=1
        Complexes per batch.
    shuffle : bool, default=False
        Reshuffle every epoch.
    follow_batch, exclude_keys : list of str, optional
        As for :class:`torch_geometric.loader.DataLoader`.
    **kwargs
        Further :class:`torch.utils.data.DataLoader` arguments (``num_workers``, ...).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        follow_batch: list[str] | None = None,
        exclude_keys: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dataset, batch_size, shuffle, follow_batch, exclude_keys, **kwargs)
        self.collate_fn = ComplexCollater(dataset, follow_batch, exclude_keys)
