"""Masks of N-simplicial attention: causal, sliding windows, routed keys and explicit tuples.

Dussolle & Liò, "How Smoothing is N-simplicial Attention?", §2.2 and §3.2.1: a masked
N-simplicial attention layer attends, for a query ``i``, only over the allowed key tuples
``(k_1, ..., k_N)``; the allowed ``(N+1)``-tuples ``(i, k_1, ..., k_N)`` are the hyper-edges of an
``N``-uniform directed hypergraph on the tokens.

Four kinds of restriction are supported, each with its own cost:

* :class:`CausalMask` — ``k_m <= i`` for every key axis ``m`` (dense streaming path).
* :class:`WindowMask` — a sliding window per key axis, ``|i - k_m| < w_m`` (and ``k_m <= i``
  when causal); gathered path, memory ``O(n · W_1 ⋯ W_N)`` with ``W_m`` the window width.
* :class:`KeySelection` — an explicit per-query list of keys on each axis (what the top-K router
  of §2.3 produces, see :mod:`~topomodelx_attention.nn.simplicial.router`); gathered path.
* :class:`TupleMask` — an explicit sparse list of allowed ``(N+1)``-tuples, e.g. the simplices of
  a complex (:func:`simplices_to_tuples`, :func:`complex_data_to_tuples`); cost
  ``O(n_tuples · d)``. :class:`TupleIndex` is the same list prepared once for given token counts
  (:func:`~topomodelx_attention.nn.simplicial.functional.prepare_tuples`): validated, bias slots
  resolved, distinct key tuples found, so that the attention call has no data-dependent step
  (the form to pass under ``torch.compile``).

A boolean tensor broadcastable to ``(..., n, n_1, ..., n_N)`` (``True`` = allowed) is accepted by
:func:`~topomodelx_attention.nn.simplicial.functional.n_simplicial_attention` as a dense mask.

Key/value bias slot
-------------------
When a key/value bias (Appendix F.1) is used on axis ``m``, that axis gets one extra key at index
``n_m`` (after the real keys). Masks treat it as always allowed; in tuple lists it is written
``-1`` (:data:`NULL_KEY`), so that tuples do not depend on the number of tokens.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from topomodelx_attention.data import sparsity_pattern, torch_to_scipy
from topomodelx_attention.nn.attention import NeighborhoodIndex

__all__ = [
    "NULL_KEY",
    "CausalMask",
    "KeySelection",
    "TupleIndex",
    "TupleMask",
    "WindowMask",
    "complex_data_to_tuples",
    "dense_mask_from_tuples",
    "face_sets_to_tuples",
    "simplices_to_tuples",
    "tuples_batch",
    "window_selection",
]

#: Index used in tuple lists for the key/value bias slot ("null key", Appendix F.1).
NULL_KEY: int = -1


@dataclass(frozen=True)
class CausalMask:
    """Causal N-simplicial mask: query ``i`` sees the tuple ``(k_1, ..., k_N)`` iff ``k_m <= i``.

    Every key axis must have as many tokens as the query axis (self-attention on a sequence).
    """


@dataclass(frozen=True)
class WindowMask:
    """Sliding windows, one per key axis.

    Query ``i`` sees key ``k_m`` on axis ``m`` iff ``|i - k_m| < windows[m]`` (and ``k_m <= i``
    when ``causal``), so a causal window of width ``w_m`` holds the ``w_m`` latest tokens and a
    non-causal one ``2 w_m - 1`` tokens centred on ``i``. The joint window is the product of the
    per-axis windows; the cost is ``O(n · W_1 ⋯ W_N · d)`` with ``W_m`` the number of keys of axis
    ``m``, never ``n^{N+1}``.

    Parameters
    ----------
    windows : sequence of int
        ``(w_1, ..., w_N)``, each ``>= 1``. A single int is used for every axis.
    causal : bool, default=True
        Also require ``k_m <= i``.
    """

    windows: tuple[int, ...] | int
    causal: bool = True

    def __post_init__(self) -> None:
        windows = self.windows
        if isinstance(windows, int):
            windows = (windows,)
        windows = tuple(int(w) for w in windows)
        if not windows or any(w < 1 for w in windows):
            raise ValueError(f"WindowMask windows must be positive integers, got {self.windows!r}")
        object.__setattr__(self, "windows", windows)

    def widths(self, order: int) -> tuple[int, ...]:
        """Return the per-axis window sizes for ``order`` key axes.

        Parameters
        ----------
        order : int
            Number of key axes ``N``.

        Returns
        -------
        tuple of int
            ``(w_1, ..., w_N)``; a single window is repeated for every axis.
        """
        windows = tuple(self.windows) if not isinstance(self.windows, int) else (self.windows,)
        if len(windows) == 1:
            return windows * order
        if len(windows) != order:
            raise ValueError(
                f"WindowMask has {len(windows)} windows but the attention has {order} key axes; "
                "give one window per key axis or a single int"
            )
        return windows


@dataclass(frozen=True)
class KeySelection:
    """Per-query key lists, one per key axis (the gathered path; produced by the router, §2.3).

    Query ``i`` attends over the tuples ``(indices[0][..., i, a_1], ..., indices[N-1][..., i,
    a_N])`` for every combination of slots ``a_m`` whose entries are all ``valid``. Cost
    ``O(n · K_1 ⋯ K_N · d)``.

    Parameters
    ----------
    indices : sequence of torch.Tensor, each shape = (..., n, K_m)
        Long key indices into axis ``m``, leading dimensions broadcastable to those of the query.
        The bias slot (Appendix F.1) is index ``n_m`` (or :data:`NULL_KEY`).
    valid : sequence of torch.Tensor or None, each shape = (..., n, K_m)
        Boolean; ``False`` marks an unused slot (e.g. outside the sequence). ``None``: all valid.
    gate : sequence of torch.Tensor or None, each shape = (..., n, K_m)
        Optional additive logit term per selected key (the straight-through router gate: zero
        in value, carries the router gradient). ``None``: no gate.
    """

    indices: tuple[Tensor, ...]
    valid: tuple[Tensor | None, ...] | None = None
    gate: tuple[Tensor | None, ...] | None = None

    def __post_init__(self) -> None:
        indices = tuple(self.indices)
        if not indices:
            raise ValueError("KeySelection needs one index tensor per key axis")
        for m, idx in enumerate(indices):
            if not isinstance(idx, Tensor) or idx.dtype != torch.long or idx.dim() < 2:
                raise TypeError(
                    f"KeySelection.indices[{m}] must be a long tensor of shape (..., n, K), got "
                    f"{getattr(idx, 'dtype', type(idx))} with shape "
                    f"{tuple(getattr(idx, 'shape', ()))}"
                )
        object.__setattr__(self, "indices", indices)
        for name in ("valid", "gate"):
            value = getattr(self, name)
            if value is None:
                continue
            value = tuple(value)
            if len(value) != len(indices):
                raise ValueError(
                    f"KeySelection.{name} has {len(value)} entries, expected {len(indices)} "
                    "(one per key axis)"
                )
            for m, (entry, idx) in enumerate(zip(value, indices)):
                if entry is not None and entry.shape[-2:] != idx.shape[-2:]:
                    raise ValueError(
                        f"KeySelection.{name}[{m}] has shape {tuple(entry.shape)}, which does not "
                        f"match indices[{m}] of shape {tuple(idx.shape)}"
                    )
            object.__setattr__(self, name, value)

    @property
    def order(self) -> int:
        """Number of key axes ``N``."""
        return len(self.indices)


@dataclass(frozen=True)
class TupleMask:
    """Explicit sparse list of allowed ``(N+1)``-tuples ``(i, k_1, ..., k_N)``.

    The attention of query ``i`` is a softmax over its own tuples only (a segment softmax), so the
    cost is ``O(n_tuples · d)`` and a query without tuples gets a zero output.

    Parameters
    ----------
    tuples : torch.Tensor, shape = (n_tuples, N + 1)
        Long tensor; column 0 is the query, column ``m`` the key on axis ``m``. :data:`NULL_KEY`
        (``-1``) selects the key/value bias slot of that axis. Tuples should be unique (a repeated
        tuple is counted twice in the softmax).
    """

    tuples: Tensor

    def __post_init__(self) -> None:
        tuples = self.tuples
        if not isinstance(tuples, Tensor):
            raise TypeError(f"TupleMask.tuples must be a torch.Tensor, got {type(tuples).__name__}")
        if tuples.dtype != torch.long:
            raise TypeError(f"TupleMask.tuples must be a long tensor, got dtype {tuples.dtype}")
        if tuples.dim() != 2 or tuples.shape[1] < 2:
            raise ValueError(
                f"TupleMask.tuples must have shape (n_tuples, N + 1) with N >= 1, got "
                f"{tuple(tuples.shape)}"
            )

    @property
    def order(self) -> int:
        """Number of key axes ``N``."""
        return self.tuples.shape[1] - 1


@dataclass(frozen=True)
class TupleIndex:
    """A :class:`TupleMask` prepared for given token counts (built by ``prepare_tuples``).

    The tuple list becomes the bipartite graph *query → distinct key tuple* on which the shared
    core's :func:`~topomodelx_attention.nn.attention.sparse_attention` runs (see
    :func:`~topomodelx_attention.nn.simplicial.functional.n_simplicial_attention`). Building it
    validates the indices, maps :data:`NULL_KEY` to the bias slot of each axis and finds the
    distinct key tuples (a ``torch.unique``): all the data-dependent work of the tuple path. Build
    it once per batch, outside a ``torch.compile`` region, and pass it to every layer; the
    attention call then only gathers, multiplies and scatters.

    Attributes
    ----------
    neighborhood : NeighborhoodIndex
        ``(n, n_sources)`` index pair: tuple ``t`` links its query (target) to its key tuple
        (source); in the order of the tuples.
    sources : tuple of N torch.Tensor, each shape = (n_sources,)
        Key on axis ``m`` of every distinct key tuple, the bias slot written ``n_m`` (long).
    num_keys : tuple of int
        ``(n_1, ..., n_N)``: real keys per axis, bias slot excluded.
    has_bias : tuple of bool
        Whether axis ``m`` carries a bias slot (index ``n_m``).
    """

    neighborhood: NeighborhoodIndex
    sources: tuple[Tensor, ...]
    num_keys: tuple[int, ...]
    has_bias: tuple[bool, ...]

    @property
    def order(self) -> int:
        """Number of key axes ``N``."""
        return len(self.sources)

    @property
    def num_queries(self) -> int:
        """Number of queries ``n``."""
        return self.neighborhood.shape[0]

    def to(self, device: torch.device | str) -> TupleIndex:
        """Move the index tensors to ``device``."""
        return TupleIndex(
            self.neighborhood.to(device),
            tuple(s.to(device) for s in self.sources),
            self.num_keys,
            self.has_bias,
        )


def window_selection(
    n: int,
    windows: Sequence[int],
    causal: bool = True,
    device: torch.device | str | None = None,
) -> KeySelection:
    """Turn per-axis sliding windows into a :class:`KeySelection` (gathered path).

    Parameters
    ----------
    n : int
        Number of tokens (queries and keys).
    windows : sequence of int
        ``(w_1, ..., w_N)``; see :class:`WindowMask`.
    causal : bool, default=True
        Keep only ``k_m <= i``.
    device : torch.device or str, optional
        Device of the index tensors.

    Returns
    -------
    KeySelection
        ``indices[m]`` of shape ``(n, W_m)`` with ``W_m = w_m`` (causal) or ``2 w_m - 1``;
        out-of-range slots are clamped and marked invalid.
    """
    positions = torch.arange(n, device=device)
    indices, valid = [], []
    for w in windows:
        offsets = (
            torch.arange(-(w - 1), 1, device=device)
            if causal
            else torch.arange(-(w - 1), w, device=device)
        )
        raw = positions[:, None] + offsets[None, :]
        ok = (raw >= 0) & (raw < n)
        indices.append(raw.clamp(0, max(n - 1, 0)))
        valid.append(ok)
    return KeySelection(indices=tuple(indices), valid=tuple(valid))


def dense_mask_from_tuples(
    tuples: Tensor, n: int, key_sizes: Sequence[int] | None = None
) -> Tensor:
    """Dense boolean mask equivalent to a tuple list (for tests and small inputs only).

    Parameters
    ----------
    tuples : torch.Tensor, shape = (n_tuples, N + 1)
        Allowed tuples; :data:`NULL_KEY` maps to the last index of its axis.
    n : int
        Number of queries.
    key_sizes : sequence of int, optional
        ``(n_1, ..., n_N)`` including bias slots; default ``n`` for every axis.

    Returns
    -------
    torch.Tensor, shape = (n, n_1, ..., n_N)
        ``True`` where the tuple is allowed. Memory ``O(n^{N+1})``.
    """
    order = tuples.shape[1] - 1
    sizes = list(key_sizes) if key_sizes is not None else [n] * order
    mask = torch.zeros((n, *sizes), dtype=torch.bool, device=tuples.device)
    cols = [tuples[:, 0]]
    for m in range(order):
        col = tuples[:, m + 1]
        cols.append(torch.where(col < 0, torch.full_like(col, sizes[m] - 1), col))
    mask[tuple(cols)] = True
    return mask


# ----------------------------------------------------------------------------------------------
# Tuples from complexes
# ----------------------------------------------------------------------------------------------


def face_sets_to_tuples(
    face_sets: Sequence[Tensor],
    order: int,
    num_tokens: int,
    include_lower: bool = False,
    self_loops: bool = False,
) -> Tensor:
    r"""Expand unordered token sets (the faces of each cell) into ordered attention tuples.

    A set ``S`` of ``N + 1`` tokens yields the ``(N+1)!`` tuples ``(i, k_1, ..., k_N)`` with
    ``i ∈ S`` and ``(k_1, ..., k_N)`` any ordering of ``S \ {i}``, so attention on a complex is
    invariant to the orientation of its cells. With ``include_lower``, a set of ``s + 1 < N + 1``
    tokens (``s >= 1``) yields the tuples ``(i, k_1, ..., k_s, NULL, ..., NULL)`` that reach order
    ``s`` through the key/value bias (Appendix F.1).

    Parameters
    ----------
    face_sets : sequence of torch.Tensor, each shape = (n_cells, size)
        Token indices of each cell's faces, one tensor per set size (sizes may repeat).
    order : int
        ``N``, the number of key axes.
    num_tokens : int
        Number of tokens (for ``self_loops`` and validation).
    include_lower : bool, default=False
        Also emit the null-padded tuples of smaller sets.
    self_loops : bool, default=False
        Also emit ``(i, i, ..., i)`` for every token (the "self-loop" simplex of §3.2.1; keeps
        every query's softmax non-empty).

    Returns
    -------
    torch.Tensor, shape = (n_tuples, N + 1)
        Unique tuples, sorted lexicographically (long).
    """
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    chunks: list[np.ndarray] = []
    for sets in face_sets:
        arr = np.asarray(sets.detach().cpu().numpy() if isinstance(sets, Tensor) else sets)
        if arr.size == 0:
            continue
        arr = arr.reshape(arr.shape[0], -1).astype(np.int64)
        size = arr.shape[1]
        if size == order + 1:
            perms = np.array(list(itertools.permutations(range(size))), dtype=np.int64)
            chunks.append(arr[:, perms].reshape(-1, size))
        elif include_lower and 2 <= size < order + 1:
            perms = np.array(list(itertools.permutations(range(size))), dtype=np.int64)
            ordered = arr[:, perms].reshape(-1, size)
            pad = np.full((ordered.shape[0], order + 1 - size), NULL_KEY, dtype=np.int64)
            chunks.append(np.concatenate([ordered, pad], axis=1))
    if self_loops:
        chunks.append(np.repeat(np.arange(num_tokens, dtype=np.int64)[:, None], order + 1, axis=1))
    if not chunks:
        return torch.zeros((0, order + 1), dtype=torch.long)
    out = np.unique(np.concatenate(chunks, axis=0), axis=0)
    if out.size and (out[:, 0].min() < 0 or out.max() >= num_tokens):
        raise ValueError(
            f"face sets reference token {int(out.max())} but there are only {num_tokens} tokens"
        )
    return torch.from_numpy(np.ascontiguousarray(out))


def _face_size_ok(size: int, order: int, include_lower: bool) -> bool:
    return size == order + 1 or (include_lower and 2 <= size < order + 1)


def simplices_to_tuples(
    complex: Any,
    order: int = 2,
    rank: int = 0,
    include_lower: bool = False,
    self_loops: bool = False,
) -> Tensor:
    """List the allowed attention tuples of a TopoNetX ``SimplicialComplex``.

    Tokens are the ``rank``-simplices in TopoNetX order (``complex.skeleton(rank)``, which for
    ``rank = 0`` is the sorted node order and is the row order of ``incidence_matrix``). A set of
    ``N + 1`` tokens is allowed when they are the ``rank``-faces of one simplex of the complex:
    for ``rank = 0`` and ``N = 2`` the triangles, each giving the triples ``(i, j, k)`` and
    ``(i, k, j)`` for each of its vertices ``i`` (see :func:`face_sets_to_tuples`).

    Parameters
    ----------
    complex : toponetx.SimplicialComplex
        The complex.
    order : int, default=2
        ``N``.
    rank : int, default=0
        Rank of the token cells.
    include_lower : bool, default=False
        Add null-padded tuples for simplices with fewer faces (e.g. the edges ``(i, j, NULL)`` for
        ``N = 2``), reached through the key/value bias of Appendix F.1.
    self_loops : bool, default=False
        Add ``(i, ..., i)`` for every token.

    Returns
    -------
    torch.Tensor, shape = (n_tuples, N + 1)
        Long tensor of tuples (``-1`` = bias slot).
    """
    if not hasattr(complex, "skeleton") or not hasattr(complex, "dim"):
        raise TypeError(
            "simplices_to_tuples expects a toponetx.SimplicialComplex, got "
            f"{type(complex).__name__}"
        )
    if rank < 0 or rank > complex.dim:
        raise ValueError(f"rank {rank} is outside 0..{complex.dim} for this complex")
    tokens = [tuple(sorted(s)) for s in complex.skeleton(rank)]
    index = {t: i for i, t in enumerate(tokens)}
    face_sets: list[Tensor] = []
    for k in range(rank + 1, complex.dim + 1):
        n_faces = math.comb(k + 1, rank + 1)
        if not _face_size_ok(n_faces, order, include_lower):
            continue
        rows = []
        for simplex in complex.skeleton(k):
            verts = tuple(sorted(simplex))
            rows.append([index[f] for f in itertools.combinations(verts, rank + 1)])
        if rows:
            face_sets.append(torch.tensor(rows, dtype=torch.long))
    return face_sets_to_tuples(face_sets, order, len(tokens), include_lower, self_loops)


def _binarise(m: sp.csr_matrix) -> sp.csr_matrix:
    m = sp.csr_matrix(m)
    m.sum_duplicates()
    m.eliminate_zeros()
    m.data[:] = 1.0
    return m


def get_key(data: Any, key: str) -> Any:
    """Read ``key`` from a mapping, a ``ComplexData`` or any object (``None`` when absent)."""
    if isinstance(data, dict):
        return data.get(key)
    try:
        return data[key]
    except (KeyError, TypeError, AttributeError, IndexError):
        return getattr(data, key, None)


def complex_data_to_tuples(
    data: Any,
    order: int = 2,
    rank: int = 0,
    include_lower: bool = False,
    self_loops: bool = False,
) -> Tensor:
    """List the allowed attention tuples of a (batched) ``ComplexData`` from its incidences.

    The ``rank``-faces of a ``k``-cell are the nonzero pattern of the product of the unsigned
    incidences ``incidence_{rank+1} ⋯ incidence_k`` (TopoBench keys, see CONTRIBUTING.md); a cell
    with exactly ``N + 1`` such faces gives the tuples of :func:`face_sets_to_tuples`. Batched
    data have block-diagonal incidences, so the tuples index the concatenated cells directly.
    Works on any object exposing ``incidence_r`` by item or attribute (duck typing, so this module
    does not import the data package).

    Parameters
    ----------
    data : ComplexData or mapping
        Needs ``incidence_{rank+1}``, ``incidence_{rank+2}``, ... (sparse ``(n_{r-1}, n_r)``) and
        ``x_{rank}``, ``batch_{rank}`` or ``shape`` to know the number of tokens.
    order : int, default=2
        ``N``.
    rank : int, default=0
        Rank of the token cells.
    include_lower : bool, default=False
        Add null-padded tuples for cells with fewer faces.
    self_loops : bool, default=False
        Add ``(i, ..., i)`` for every token.

    Returns
    -------
    torch.Tensor, shape = (n_tuples, N + 1)
        Long tensor of tuples (``-1`` = bias slot).
    """
    x = get_key(data, f"x_{rank}")
    if not isinstance(x, Tensor):
        x = get_key(data, f"batch_{rank}")
    if isinstance(x, Tensor):
        num_tokens = x.shape[0]
    else:
        shape = get_key(data, "shape")
        if not isinstance(shape, Tensor):
            raise ValueError(f"data has neither x_{rank} nor shape; cannot count the tokens")
        num_tokens = int(shape[:, rank].sum()) if shape.dim() == 2 else int(shape[rank])
    face_sets: list[Tensor] = []
    chain: sp.csr_matrix | None = None
    k = rank + 1
    while True:
        inc = get_key(data, f"incidence_{k}")
        if not isinstance(inc, Tensor):
            break
        pattern = torch_to_scipy(sparsity_pattern(inc.detach(), "incidence"))
        if chain is None and pattern.shape[0] != num_tokens:
            raise ValueError(
                f"incidence_{k} has {pattern.shape[0]} rows but there are {num_tokens} "
                f"rank-{rank} cells"
            )
        chain = pattern if chain is None else _binarise(chain @ pattern)
        csc = chain.tocsc()
        csc.sort_indices()
        counts = np.diff(csc.indptr)
        for size in np.unique(counts).tolist():
            if size == 0 or not _face_size_ok(size, order, include_lower):
                continue
            cells = np.flatnonzero(counts == size)
            starts = csc.indptr[cells]
            rows = csc.indices[starts[:, None] + np.arange(size)[None, :]]
            face_sets.append(torch.from_numpy(rows.astype(np.int64)))
        k += 1
    return face_sets_to_tuples(face_sets, order, num_tokens, include_lower, self_loops)


def tuples_batch(tuples_list: Sequence[Tensor], num_tokens: Sequence[int]) -> tuple[Tensor, Tensor]:
    """Concatenate the tuples of several complexes (token offsets applied).

    Parameters
    ----------
    tuples_list : sequence of torch.Tensor, each shape = (n_tuples_b, N + 1)
        Tuples of each complex (``-1`` entries are kept as the bias slot).
    num_tokens : sequence of int
        Number of tokens of each complex.

    Returns
    -------
    tuples : torch.Tensor, shape = (sum n_tuples_b, N + 1)
        Tuples indexing the concatenated tokens.
    batch : torch.Tensor, shape = (sum num_tokens,)
        Complex index of every token.
    """
    if len(tuples_list) != len(num_tokens):
        raise ValueError("tuples_list and num_tokens must have the same length")
    out, offset = [], 0
    for t, n in zip(tuples_list, num_tokens):
        shifted = torch.where(t < 0, t, t + offset)
        out.append(shifted)
        offset += int(n)
    batch = torch.repeat_interleave(
        torch.arange(len(num_tokens)), torch.tensor([int(n) for n in num_tokens])
    )
    if not out:
        return torch.zeros((0, 2), dtype=torch.long), batch
    return torch.cat(out, 0), batch
