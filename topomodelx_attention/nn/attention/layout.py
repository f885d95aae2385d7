r"""Where tokens sit: the ONE padding system of the kernels that attend per complex.

:class:`PaddedLayout` (built by :func:`padded_layout`): the tokens of a batch of complexes
padded into a ``(num_complexes, length)`` grid, ``length`` = the largest complex. Every kernel
that works per complex (dense, linear) attends on the padded grid of its targets and the
padded grid of its sources (the same object for self-attention). Build it once outside a
``torch.compile`` region: the grid size is data-dependent, so the compiled attention takes it
as an input and has none. Where token *pairs* sit (a neighbourhood as an index) is
:mod:`~topomodelx_attention.nn.attention.neighborhood`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from topomodelx_attention.nn.attention.heads import check_qkv

__all__ = [
    "SIZE_GROUP_OVERHEAD",
    "PaddedLayout",
    "SizeGroup",
    "padded_layout",
    "size_groups",
]


# ----------------------------------------------------------------------------------------------
# padded layout
# ----------------------------------------------------------------------------------------------
SIZE_GROUP_OVERHEAD: int = 16384
"""Fixed cost of one :class:`SizeGroup`, in entries of the ``Lt × Ls`` score grids (see :func:`size_groups`).

Measured on CPU (one thread, dense attention with dropout 0.1, forward + backward, 4 heads ×
16): ≈ 47 ns per grid entry, and 0.3–0.7 ms for the ~15 extra calls of one more group (the
gathers, the slices of the mask, the padding of its output); at 16,384 a batch of 32
MUTAG-sized complexes stays one group (``benchmarks/attention_core.py --groups``)."""


@dataclass(frozen=True)
class SizeGroup:
    """Complexes of similar size attended together, padded to their own largest size.

    Attributes
    ----------
    complexes : torch.Tensor, shape = (g,)
        Indices of the complexes of the group (long, on the layout's device), largest first.
    length : int
        Their largest target count ``Lt_g`` (at least 1).
    source_length : int
        Their largest source count ``Ls_g`` (at least 1; ``length`` for self-attention): the
        group's scores are ``(g, heads, Lt_g, Ls_g)``.
    full : bool
        Every complex of the group has ``Lt_g`` targets and ``Ls_g`` sources (no padding slot).
    """

    complexes: Tensor
    length: int
    source_length: int
    full: bool


def size_groups(target: PaddedLayout, source: PaddedLayout | None = None) -> tuple[SizeGroup, ...]:
    r"""Partition the complexes of an attention call into groups of similar size (eager).

    Padding every complex to the largest one costs ``B·Lt·Ls`` score entries per head where
    the complexes need ``Σ_b n_t(b)·n_s(b)``: with sizes spread over 50–300 (GraphUniverse)
    the grid is 2.2× the need, with 150–800 TokenGT tokens 3×. Kernels that materialise the
    scores (dense attention with dropout) attend group by group instead, each group padded to
    its own largest complex. The partition minimises
    :math:`\sum_g (|g|\, L^t_g L^s_g + \text{SIZE\_GROUP\_OVERHEAD})` over groups that are
    consecutive in the order of decreasing ``n_t·n_s`` (a dynamic programme; for
    self-attention, the exact optimum over all partitions): many small complexes stay one
    group, complexes of very different sizes get their own. Complexes without targets or
    without sources are in no group (their output is zero either way).

    Parameters
    ----------
    target : PaddedLayout
        Layout of the targets.
    source : PaddedLayout, optional
        Layout of the sources (``None`` or ``target``: self-attention, cached on the layout as
        :attr:`PaddedLayout.size_groups`).

    Returns
    -------
    tuple of SizeGroup
        The groups; together they hold every complex with targets and sources exactly once.
    """
    if source is None or source is target:
        return target.size_groups
    _check_same_complexes(target, source)
    return _size_groups(target.counts, source.counts)


def _check_same_complexes(target: PaddedLayout, source: PaddedLayout) -> None:
    """Raise unless the target and source layouts describe the same number of complexes."""
    if target.num_complexes != source.num_complexes:
        raise ValueError(
            f"target and source layouts must have the same num_complexes, got "
            f"{target.num_complexes} and {source.num_complexes}"
        )


@dataclass(frozen=True)
class PaddedLayout:
    r"""Precomputed padding of a batch of token sets into a ``(num_complexes, length)`` grid.

    Build it once per forward with :func:`padded_layout` and pass it to every attention call
    (:func:`~topomodelx_attention.nn.attention.dense_attention`,
    :func:`~topomodelx_attention.nn.attention.linear_attention`,
    :func:`~topomodelx_attention.nn.attention.dense_attention_weights`,
    :class:`~topomodelx_attention.nn.attention.MultiHeadAttention`): the index arithmetic
    (counts, positions, key-padding mask) is then done once instead of once per layer, the
    tokens need not be sorted by graph, and the attention call has no data-dependent size
    (``torch.compile`` traces it without graph breaks). Self-attention takes one layout;
    cross-attention the pair ``(target_layout, source_layout)`` of two layouts with the same
    ``num_complexes``. Two forms:

    * **packed** (``index`` given): ``n`` tokens in any order; token ``t`` sits in slot
      ``index[t] = b * length + position``; attention pads / unpads with one
      ``index_copy`` / ``index_select`` per tensor.
    * **padded** (``index is None``, from :meth:`padded`): the rows *are* the
      ``num_complexes * length`` slots, row-major; attention only reshapes (no copy). Padding
      rows carry arbitrary finite values and are masked as keys.

    Attributes
    ----------
    index : torch.Tensor or None, shape = (n,)
        Flat slot of every token (long), or ``None`` for the padded form.
    batch : torch.Tensor, shape = (n,)
        Graph of every row (long); ``slot // length`` in the padded form.
    counts : torch.Tensor, shape = (num_complexes,)
        Number of real tokens of every graph.
    key_mask : torch.Tensor or None, shape = (num_complexes, 1, 1, length)
        Boolean mask for :func:`~torch.nn.functional.scaled_dot_product_attention` (``True`` =
        attend); ``None`` when no slot is padding. Graphs without tokens attend to all their
        (zero or masked) slots, which gives finite outputs instead of NaN.
    key_valid : torch.Tensor, shape = (num_complexes, length)
        ``True`` on the slots holding a real token. Its shape gives ``num_complexes`` and
        ``length`` (symbolic sizes under ``torch.compile(dynamic=True)``, no recompilation).
    """

    index: Tensor | None
    batch: Tensor
    counts: Tensor
    key_mask: Tensor | None
    key_valid: Tensor

    @property
    def num_complexes(self) -> int:
        """Number of graphs ``B``."""
        return self.key_valid.shape[0]

    @property
    def length(self) -> int:
        """Slots per graph ``L = max(counts)`` (at least 1)."""
        return self.key_valid.shape[1]

    @property
    def num_tokens(self) -> int:
        """Number of rows ``n`` the layout describes (``B * L`` in the padded form)."""
        return self.batch.shape[0]

    @property
    def fill(self) -> float:
        """Fraction of the ``B * L`` slots holding a real token."""
        return float(self.counts.sum()) / max(1, self.num_complexes * self.length)

    @classmethod
    def single(cls, n: int, device: torch.device | str | None = None) -> PaddedLayout:
        """Layout of one complex of ``n`` tokens (no index arithmetic, no data-dependent size).

        Parameters
        ----------
        n : int
            Number of tokens.
        device : torch.device or str, optional
            Device of the index tensors.

        Returns
        -------
        PaddedLayout
            ``num_complexes = 1``, ``length = max(n, 1)``; the padded form when ``n > 0``.
        """
        batch = torch.zeros(n, dtype=torch.long, device=device)
        counts = torch.full((1,), n, dtype=torch.long, device=device)
        if n > 0:
            valid = torch.ones(1, n, dtype=torch.bool, device=device)
            return cls(None, batch, counts, None, valid)
        valid = torch.zeros(1, 1, dtype=torch.bool, device=device)
        return cls(batch, batch, counts, None, valid)

    def pad(self, x: Tensor, value: float = 0.0) -> Tensor:
        """Scatter token rows into the grid.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, ...)
            One row per token of the packed form (or per slot of the padded form).
        value : float, default = 0.0
            Fill value of the padding slots (packed form only).

        Returns
        -------
        torch.Tensor, shape = (num_complexes, length, ...)
            Padded tensor (a view in the padded form).
        """
        if x.shape[0] != self.num_tokens:
            raise ValueError(f"x has {x.shape[0]} rows but the layout has {self.num_tokens}")
        rest = tuple(x.shape[1:])
        if self.index is None:
            return x.reshape(self.num_complexes, self.length, *rest)
        out = x.new_full((self.num_complexes * self.length, *rest), value)
        return out.index_copy(0, self.index, x).view(self.num_complexes, self.length, *rest)

    def unpad(self, x: Tensor) -> Tensor:
        """Gather the token rows back from the grid (inverse of :meth:`pad`).

        Parameters
        ----------
        x : torch.Tensor, shape = (num_complexes, length, ...)
            Padded tensor.

        Returns
        -------
        torch.Tensor, shape = (n, ...)
            One row per token (per slot in the padded form).
        """
        if tuple(x.shape[:2]) != (self.num_complexes, self.length):
            raise ValueError(
                f"x must have shape ({self.num_complexes}, {self.length}, ...), got {tuple(x.shape)}"
            )
        flat = x.reshape(self.num_complexes * self.length, *x.shape[2:])
        return flat if self.index is None else flat.index_select(0, self.index)

    def padded(self) -> PaddedLayout:
        """Return the layout of the padded rows themselves (``index=None``: ``pad`` reshapes)."""
        if self.index is None:
            return self
        device = self.counts.device
        batch = torch.arange(self.num_complexes, device=device).repeat_interleave(self.length)
        return PaddedLayout(None, batch, self.counts, self.key_mask, self.key_valid)

    def positions(self) -> Tensor:
        """Position of every row inside its graph's slots, shape ``(n,)``."""
        slots = self.index
        if slots is None:
            slots = torch.arange(self.num_tokens, device=self.batch.device)
        return slots - self.batch * self.length

    @cached_property
    def size_groups(self) -> tuple[SizeGroup, ...]:
        """Groups of similar-sized complexes for self-attention (:func:`size_groups`; cached).

        Computed once per layout (the counts are read on the host) and kept on it;
        ``torch.compile`` never reads it (compiled kernels keep the one padded grid, whose
        size is symbolic).

        Returns
        -------
        tuple of SizeGroup
            The complexes with tokens, in groups of decreasing size.
        """
        return _size_groups(self.counts, self.counts)

    def _heads(self, x: Tensor) -> Tensor:
        """(n, heads, d) → (B, heads, L, d) (zeros at padded slots in the packed form)."""
        return self.pad(x).transpose(1, 2)

    def _unheads(self, x: Tensor) -> Tensor:
        """(B, heads, L, d) → (n, heads, d)."""
        return self.unpad(x.transpose(1, 2))


def _size_groups(target_counts: Tensor, source_counts: Tensor) -> tuple[SizeGroup, ...]:
    """:func:`size_groups` of per-complex target and source counts."""
    n_t = target_counts.detach().cpu().numpy().astype(np.int64)
    n_s = source_counts.detach().cpu().numpy().astype(np.int64)
    order = np.argsort(-(n_t * n_s), kind="stable")
    order = order[(n_t[order] > 0) & (n_s[order] > 0)]
    sizes_t, sizes_s = n_t[order], n_s[order]
    m = order.shape[0]
    # best[j]: cheapest partition of the first j; group = order[i:j] costs
    # (j - i) · max n_t · max n_s over it, + the overhead
    best = np.zeros(m + 1)
    start = np.zeros(m + 1, dtype=np.int64)
    for j in range(1, m + 1):
        max_t = np.maximum.accumulate(sizes_t[j - 1 :: -1])[::-1].astype(np.float64)
        max_s = np.maximum.accumulate(sizes_s[j - 1 :: -1])[::-1].astype(np.float64)
        cost = best[:j] + SIZE_GROUP_OVERHEAD + (j - np.arange(j)) * max_t * max_s
        start[j] = int(np.argmin(cost))
        best[j] = cost[start[j]]
    groups = []
    j = m
    while j > 0:
        i = int(start[j])
        members = torch.from_numpy(order[i:j].copy()).to(target_counts.device)
        t, s = sizes_t[i:j], sizes_s[i:j]
        full = bool(t.min() == t.max() and s.min() == s.max())
        groups.append(SizeGroup(members, int(t.max()), int(s.max()), full))
        j = i
    return tuple(reversed(groups))


def _check_batch(batch: Tensor | None, n: int, name: str) -> Tensor | None:
    if batch is None:
        return None
    if not isinstance(batch, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(batch).__name__}")
    if batch.dim() != 1 or batch.shape[0] != n:
        raise ValueError(
            f"{name} must have shape ({n},) (one complex index per token), got {tuple(batch.shape)}"
        )
    if batch.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an integer (long) tensor, got {batch.dtype}")
    return batch.long()


def _build_layout(batch: Tensor, num_complexes: int) -> PaddedLayout:
    """Build the layout of validated graph indices (``num_complexes >= batch.max() + 1``)."""
    n = batch.shape[0]
    counts = torch.bincount(batch, minlength=num_complexes)
    length = max(int(counts.max()), 1)
    ptr = torch.cumsum(counts, 0) - counts  # exclusive cumsum: first token of every graph
    key_valid = torch.arange(length, device=batch.device).unsqueeze(0) < counts.unsqueeze(1)
    # A graph without tokens would give a fully masked row (NaN in SDPA): let it attend to its
    # all-zero padded keys/values instead, which yields exactly zero output and finite gradients.
    attend = key_valid | (counts == 0).unsqueeze(1)
    key_mask = None if bool(attend.all()) else attend.view(num_complexes, 1, 1, length)
    unsorted = n > 1 and bool((batch[1:] < batch[:-1]).any())
    if not unsorted and n == num_complexes * length:
        # sorted tokens filling the grid: the slots are the rows (padded form, no copies)
        return PaddedLayout(None, batch, counts, key_mask, key_valid)
    if unsorted:
        order = torch.argsort(batch, stable=True)
        position = torch.empty_like(batch)
        position[order] = torch.arange(n, device=batch.device) - ptr.index_select(
            0, batch.index_select(0, order)
        )
    else:
        position = torch.arange(n, device=batch.device) - ptr.index_select(0, batch)
    return PaddedLayout(batch * length + position, batch, counts, key_mask, key_valid)


def padded_layout(batch: Tensor, num_complexes: int | None = None) -> PaddedLayout:
    """Compute the :class:`PaddedLayout` of tokens with graph indices ``batch``.

    Tokens keep their relative order inside each graph (a stable sort), so ``batch`` need not
    be sorted: e.g. ``torch.cat([special_tokens_batch, node_batch, edge_batch])`` puts every
    graph's special token first in its slots.

    Parameters
    ----------
    batch : torch.Tensor, shape = (n,)
        Graph index of every token (long, non-negative).
    num_complexes : int, optional
        Number of graphs (``batch.max() + 1`` by default; graphs beyond it are empty).

    Returns
    -------
    PaddedLayout
        The packed layout (``index`` given), or the padded form (``index=None``) when the
        tokens are sorted by graph and all graphs have the same size (no copy is needed).
    """
    if not isinstance(batch, Tensor):
        raise TypeError(f"batch must be a (n,) long tensor, got {type(batch).__name__}")
    batch = _check_batch(batch, batch.shape[0], "batch")
    top = _graph_bound(batch, "batch")
    if num_complexes is None:
        num_complexes = max(top, 1)
    elif not isinstance(num_complexes, int) or isinstance(num_complexes, bool) or num_complexes < top:
        raise ValueError(f"num_complexes={num_complexes!r} must be an int >= batch.max() + 1 = {top}")
    return _build_layout(batch, max(num_complexes, 1))


def _graph_bound(batch: Tensor, name: str) -> int:
    """``batch.max() + 1`` (0 when empty); raise on negative graph indices."""
    if batch.numel() == 0:
        return 0
    if int(batch.min()) < 0:
        raise ValueError(f"{name} has negative graph indices")
    return int(batch.max()) + 1


def batch_layouts(
    batch_target: Tensor | None,
    batch_source: Tensor | None,
    n_target: int,
    n_source: int,
    num_complexes: int | None,
    device: torch.device,
) -> tuple[PaddedLayout, PaddedLayout]:
    """Target and source layouts of sorted batch vectors (``None``: one complex).

    Parameters
    ----------
    batch_target, batch_source : torch.Tensor or None
        Sorted complex index of every target / source token; both or neither.
    n_target, n_source : int
        Number of target / source tokens.
    num_complexes : int or None
        Number of complexes (inferred otherwise).
    device : torch.device
        Device of the layouts.

    Returns
    -------
    tuple of PaddedLayout
        ``(target_layout, source_layout)`` with the same ``num_complexes``.
    """
    batch_target = _check_batch(batch_target, n_target, "batch_target")
    batch_source = _check_batch(batch_source, n_source, "batch_source")
    if (batch_target is None) != (batch_source is None):
        raise ValueError("give both batch_target and batch_source, or neither (one complex)")
    if num_complexes is not None and (
        isinstance(num_complexes, bool) or not isinstance(num_complexes, int) or num_complexes < 0
    ):
        raise ValueError(f"num_complexes must be a non-negative int or None, got {num_complexes!r}")
    if batch_target is None:
        if num_complexes not in (None, 0, 1) and (n_target > 0 or n_source > 0):
            raise ValueError("num_complexes must be 1 when batch vectors are None (one complex)")
        if num_complexes in (None, 1) or (n_target == 0 and n_source == 0):
            return PaddedLayout.single(n_target, device), PaddedLayout.single(n_source, device)
        batch_target = torch.zeros(n_target, dtype=torch.long, device=device)
        batch_source = torch.zeros(n_source, dtype=torch.long, device=device)
    top = 0
    for name, batch in (("batch_target", batch_target), ("batch_source", batch_source)):
        top = max(top, _graph_bound(batch, name))
        if batch.numel() > 1 and bool((batch[1:] < batch[:-1]).any()):
            raise ValueError(
                f"{name} must be sorted (tokens of complex 0 first, as PyG batching produces)"
            )
    if num_complexes is None:
        num_complexes = top
    elif top > num_complexes:
        raise ValueError(f"batch vectors index complex {top - 1} but num_complexes={num_complexes}")
    num_complexes = max(num_complexes, 1)
    target = _build_layout(batch_target.to(device), num_complexes)
    if batch_source is batch_target:
        return target, target
    return target, _build_layout(batch_source.to(device), num_complexes)


LayoutArg = PaddedLayout | tuple[PaddedLayout, PaddedLayout]


def _given_layouts(
    layout: LayoutArg, n_target: int, n_source: int, num_complexes: int | None
) -> tuple[PaddedLayout, PaddedLayout]:
    """Check a given layout (or pair) against the call; return ``(target, source)``."""
    if isinstance(layout, PaddedLayout):
        if not n_target == n_source == layout.num_tokens:
            raise ValueError(
                "a single layout describes self-attention: queries and keys must both have "
                f"layout.num_tokens={layout.num_tokens} rows, got {n_target} and {n_source}; "
                "pass (target_layout, source_layout) for cross-attention"
            )
        pair = (layout, layout)
    elif (
        isinstance(layout, tuple)
        and len(layout) == 2
        and all(isinstance(part, PaddedLayout) for part in layout)
    ):
        pair = layout
        for side, part, n in (("target", pair[0], n_target), ("source", pair[1], n_source)):
            if part.num_tokens != n:
                raise ValueError(
                    f"the {side} layout has {part.num_tokens} tokens but there are {n} {side}s"
                )
        _check_same_complexes(*pair)
    else:
        raise TypeError(
            "layout must be a PaddedLayout (padded_layout(...)) or a pair (target_layout, "
            f"source_layout), got {type(layout)!r}"
        )
    if num_complexes is not None and num_complexes != pair[0].num_complexes:
        raise ValueError(f"num_complexes={num_complexes} but layout.num_complexes={pair[0].num_complexes}")
    return pair


def qkv_layouts(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    batch_target: Tensor | None,
    batch_source: Tensor | None,
    num_complexes: int | None,
    layout: LayoutArg | None,
) -> tuple[PaddedLayout, PaddedLayout]:
    """Check head-split ``query`` / ``key`` / ``value`` and return their ``(target, source)`` layouts.

    The input checks of every padded kernel (dense, dense weights, linear):
    :func:`~topomodelx_attention.nn.attention.heads.check_qkv`, then the layouts of the
    ``n_target = len(query)`` targets and ``n_source = len(key)`` sources: the given
    ``layout`` (checked against them), or :func:`batch_layouts` of the batch vectors.
    """
    check_qkv(query, key, value)
    n_target, n_source = query.shape[0], key.shape[0]
    if layout is None:
        return batch_layouts(
            batch_target, batch_source, n_target, n_source, num_complexes, query.device
        )
    if batch_target is not None or batch_source is not None:
        raise ValueError("give either a layout or batch vectors, not both")
    return _given_layouts(layout, n_target, n_source, num_complexes)
