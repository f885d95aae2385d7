r"""Functional N-simplicial attention (Dussolle & Liò, §2.2), exact and memory-bounded.

For a query ``i`` and a key tuple ``(k_1, ..., k_N)`` (one key per key axis ``m``) the logit is
the scaled multilinear form

.. math::

    L_{i k_1 \dots k_N} = s \sum_{a=1}^{d} Q_{ia} K^{(1)}_{k_1 a} \cdots K^{(N)}_{k_N a},

one softmax runs jointly over the ``N`` key axes, ``A_{i·} = softmax(L_{i·})``, and the output is

.. math::

    O_{ia} = \sum_{k_1, \dots, k_N} A_{i k_1 \dots k_N}
             V^{(1)}_{k_1 a} \cdots V^{(N)}_{k_N a}.

For ``N = 1`` this is standard scaled dot-product attention. The paper writes the residual
``X + ...`` into the layer equation; here the functional is the attention alone and the residual
lives in :class:`~topomodelx_attention.nn.simplicial.NSimplicialTransformerLayer`.

Scale
-----
The default ``s = 1/sqrt(d)`` for every ``N`` (as SDPA): with unit-variance entries the logit is a
sum of ``d`` unit-variance products, so ``1/sqrt(d)`` keeps it at unit variance for any ``N``.
§2.2 of the paper writes ``softmax(1/d · ...)``; pass ``scale=1/d`` to reproduce it.

Paths (``L`` = product of the leading dimensions, ``d`` = channels)
-------------------------------------------------------------------
:func:`n_simplicial_attention` validates (:func:`_validate`), normalises the mask
(:func:`_normalise_mask`) and runs one of four paths:

* :func:`_sdpa_path` — ``N = 1`` without mask, bias or chunking:
  :func:`torch.nn.functional.scaled_dot_product_attention`.
* :func:`_dense_path` — no mask, :class:`~.masks.CausalMask` or a boolean tensor: the streaming
  exact kernel of :mod:`~topomodelx_attention.nn.simplicial.streaming`, memory
  ``O(L · c_q · c_k · n^{N-2} · max(n, d))``, never ``n^{N+1}``.
* :func:`_gathered_path` — :class:`~.masks.WindowMask`, :class:`~.masks.KeySelection` (router):
  ``O(L · n · K_1 ⋯ K_N)`` logits, chunked over queries.
* :func:`_tuple_path` — :class:`~.masks.TupleMask`, prepared by :func:`prepare_tuples` into a
  :class:`~.masks.TupleIndex` (or given prepared, e.g. under ``torch.compile``): the shared core's
  :func:`~topomodelx_attention.nn.attention.sparse_attention` on the bipartite graph
  *query → distinct key tuple*, whose key is ``K^{(1)}_{k_1} ⊙ ⋯ ⊙ K^{(N)}_{k_N}`` and whose
  value is ``V^{(1)}_{k_1} ⊙ ⋯ ⊙ V^{(N)}_{k_N}`` (then ``Σ_a Q_{ia} (K^{(1)} ⊙ ⋯)_a`` is the
  logit above), ``O(L · n_tuples · d)``. Only this path takes ``cardinality_weight`` (below).

Cardinality
-----------
The softmax makes ``O_i`` an average: it does not say how many tuples query ``i`` has (how many
triangles a vertex lies on, say). With ``cardinality_weight`` ``w`` the output gains the
unnormalised sum of the query's tuple values (the additive *cardinality-preserving attention* of
Zhang & Xie, 2020, applied to tuples):

.. math::

    O_{ia} \mathrel{+}= w_a \sum_{(i, k_1, \dots, k_N) \in T} V^{(1)}_{k_1 a} \cdots V^{(N)}_{k_N a}.

A query that has no allowed tuple gets a zero output (never NaN), and zero gradients. The dense
path's backward is a hand-written first derivative (``once_differentiable``): double backward
through it is not supported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from topomodelx_attention.nn.attention import (
    NeighborhoodIndex,
    scatter_sum,
    segment_softmax,
    sparse_attention,
)
from topomodelx_attention.nn.attention.dropout import dropout_factors
from topomodelx_attention.nn.attention.heads import check_dropout
from topomodelx_attention.nn.simplicial import masks
from topomodelx_attention.nn.simplicial.rope import determinant_expand
from topomodelx_attention.nn.simplicial.streaming import (
    TILE_BUDGET,
    DenseSpec,
    dense_n_simplicial,
    multilinear_logits,
    resolve_chunks,
    weighted_product,
)

__all__ = [
    "TILE_BUDGET",
    "MaskLike",
    "n_simplicial_attention",
    "prepare_tuples",
    "resolve_chunks",
]

MaskLike = (
    masks.CausalMask | masks.WindowMask | masks.KeySelection | masks.TupleMask | masks.TupleIndex
    | Tensor | None
)

LOGIT_FORMS = ("product", "determinant")


# ----------------------------------------------------------------------------------------------
# validation and mask normalisation
# ----------------------------------------------------------------------------------------------
def _validate(
    query: Tensor, keys: Sequence[Tensor], values: Sequence[Tensor], logit_form: str, dropout_p: float
) -> tuple[list[Tensor], list[Tensor]]:
    """Check types and shapes; return the keys and values as lists."""
    if not isinstance(query, Tensor):
        raise TypeError(f"query must be a torch.Tensor, got {type(query).__name__}")
    if isinstance(keys, Tensor) or isinstance(values, Tensor):
        raise TypeError("keys and values must be sequences (one tensor per key axis), not tensors")
    keys, values = list(keys), list(values)
    if not keys or len(values) != len(keys):
        raise ValueError(
            f"need N >= 1 key tensors and as many value tensors, got {len(keys)} and {len(values)}"
        )
    if query.dim() < 2:
        raise ValueError(f"query must have shape (..., n, d), got {tuple(query.shape)}")
    d = query.shape[-1]
    for m, (k, v) in enumerate(zip(keys, values)):
        if k.dim() < 2 or v.dim() < 2:
            raise ValueError(f"keys[{m}] and values[{m}] must have shape (..., n_m, channels)")
        if k.shape[-1] != d:
            raise ValueError(f"keys[{m}] has {k.shape[-1]} channels, the query has {d}")
        if k.shape[-2] != v.shape[-2]:
            raise ValueError(f"keys[{m}] and values[{m}] have different lengths")
        if v.shape[-1] != values[0].shape[-1]:
            raise ValueError("all value tensors must have the same number of channels")
    if logit_form not in LOGIT_FORMS:
        raise ValueError(f"logit_form must be one of {LOGIT_FORMS}, got {logit_form!r}")
    check_dropout(dropout_p)
    return keys, values


def _append_bias(
    keys: list[Tensor],
    values: list[Tensor],
    key_bias: Sequence[Tensor | None] | None,
    value_bias: Sequence[Tensor | None] | None,
) -> list[bool]:
    """Append the key/value bias row (Appendix F.1) to its axis in place; return which axes have one."""
    order = len(keys)
    if key_bias is None and value_bias is None:
        return [False] * order
    key_bias = list(key_bias) if key_bias is not None else [None] * order
    value_bias = list(value_bias) if value_bias is not None else [None] * order
    if len(key_bias) != order or len(value_bias) != order:
        raise ValueError(
            f"key_bias and value_bias need one entry (tensor or None) per key axis ({order})"
        )
    has = []
    for m in range(order):
        kb, vb = key_bias[m], value_bias[m]
        if (kb is None) != (vb is None):
            raise ValueError(f"key axis {m + 1}: give both a key bias and a value bias, or neither")
        if kb is None:
            has.append(False)
            continue
        k, v = keys[m], values[m]
        if kb.shape[-1] != k.shape[-1] or vb.shape[-1] != v.shape[-1]:
            raise ValueError(
                f"key axis {m + 1}: bias channels ({kb.shape[-1]}, {vb.shape[-1]}) do not match "
                f"keys/values ({k.shape[-1]}, {v.shape[-1]})"
            )
        kb = kb.unsqueeze(-2).expand(*k.shape[:-2], 1, k.shape[-1]).to(k.dtype)
        vb = vb.unsqueeze(-2).expand(*v.shape[:-2], 1, v.shape[-1]).to(v.dtype)
        keys[m] = torch.cat([k, kb], dim=-2)
        values[m] = torch.cat([v, vb], dim=-2)
        has.append(True)
    return has


def _with_bias_slot(selection: masks.KeySelection, has_bias: Sequence[bool]) -> masks.KeySelection:
    """Append the bias slot (always valid, zero gate) to every query's list of a biased axis.

    An axis whose list already uses :data:`NULL_KEY` somewhere is left as given.
    """
    indices, valid, gate = [], [], []
    for m, idx in enumerate(selection.indices):
        val = selection.valid[m] if selection.valid is not None else None
        gat = selection.gate[m] if selection.gate is not None else None
        if has_bias[m] and not bool((idx == masks.NULL_KEY).any()):
            extra = torch.full_like(idx[..., :1], masks.NULL_KEY)
            idx = torch.cat([idx, extra], -1)
            if val is not None:
                val = torch.cat([val, torch.ones_like(val[..., :1])], -1)
            if gat is not None:
                gat = torch.cat([gat, torch.zeros_like(gat[..., :1])], -1)
        indices.append(idx)
        valid.append(val)
        gate.append(gat)
    return masks.KeySelection(
        tuple(indices),
        tuple(valid) if selection.valid is not None else None,
        tuple(gate) if selection.gate is not None else None,
    )


def _normalise_mask(
    mask: MaskLike, n: int, n_real: Sequence[int], has_bias: Sequence[bool], device: torch.device
) -> masks.CausalMask | masks.KeySelection | masks.TupleIndex | Tensor | None:
    """Check the mask against the inputs.

    Windows become key selections, selections get bias slots, tuple lists are prepared
    (:func:`prepare_tuples`).
    """
    order = len(n_real)
    square = (masks.CausalMask, masks.WindowMask, masks.KeySelection)  # need n_m == n
    ordered = (masks.KeySelection, masks.TupleMask, masks.TupleIndex)  # built for one N
    if mask is not None and not isinstance(mask, (*square, *ordered, Tensor)):
        raise TypeError(
            "mask must be None, CausalMask, WindowMask, KeySelection, TupleMask, TupleIndex or a "
            f"bool tensor, got {type(mask).__name__}"
        )
    if isinstance(mask, square) and any(s != n for s in n_real):
        raise ValueError(
            f"{type(mask).__name__} needs every key axis to have as many tokens as queries (n_m == n)"
        )
    if isinstance(mask, ordered) and mask.order != order:
        raise ValueError(
            f"{type(mask).__name__} is for N = {mask.order}, the attention has N = {order}"
        )
    if isinstance(mask, Tensor) and mask.dtype != torch.bool:
        raise TypeError(f"a tensor mask must be boolean, got dtype {mask.dtype}")
    if isinstance(mask, masks.WindowMask):
        mask = masks.window_selection(n, mask.widths(order), mask.causal, device)
    if isinstance(mask, masks.KeySelection) and any(has_bias):
        mask = _with_bias_slot(mask, has_bias)
    if isinstance(mask, masks.TupleMask):
        mask = prepare_tuples(mask, n, n_real, has_bias, device=device)
    elif isinstance(mask, masks.TupleIndex):
        _check_tuple_index(mask, n, n_real, has_bias)
    return mask


def _bias_indices(col: Tensor, axis: int, n_real: int, has_bias: bool, size: int, what: str) -> Tensor:
    """Map :data:`NULL_KEY` to the bias slot ``n_real`` of one axis and range-check the indices.

    The checks read tensor values: they run in eager mode only (as the core's), not while
    ``torch.compile`` traces.
    """
    null = col == masks.NULL_KEY
    if torch.compiler.is_compiling():
        return torch.where(null, torch.full_like(col, n_real), col)
    if bool(null.any()) and not has_bias:
        raise ValueError(
            f"{what} uses the bias slot (-1) on key axis {axis + 1} but no key/value bias was "
            "given for that axis (pass key_bias/value_bias, or kv_bias=True in the module)"
        )
    col = torch.where(null, torch.full_like(col, n_real), col)
    if col.numel() and (int(col.min()) < 0 or int(col.max()) >= size):
        raise ValueError(f"{what} has key indices of axis {axis + 1} outside [0, {size})")
    return col


def _flat_lead(t: Tensor | None, lead_shape: torch.Size, n: int, width: int) -> Tensor | None:
    if t is None:
        return None
    return t.expand(*lead_shape, n, width).reshape(math.prod(lead_shape), n, width)


# ----------------------------------------------------------------------------------------------
# the four paths
# ----------------------------------------------------------------------------------------------
def _sdpa_path(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    lead_shape: torch.Size,
    causal: bool,
    scale: float,
    dropout_p: float,
) -> Tensor:
    """``N = 1`` without mask, bias or chunking: scaled dot-product attention."""

    def full(t: Tensor) -> Tensor:
        return t.expand(*lead_shape, *t.shape[-2:])

    return F.scaled_dot_product_attention(
        full(query), full(key), full(value), is_causal=causal, scale=scale, dropout_p=dropout_p
    )


class _Problem(NamedTuple):
    """What the paths share besides the flattened tokens and the mask."""

    lead_shape: torch.Size  # broadcast leading shape (batch, heads, ...)
    n_real: tuple[int, ...]  # real keys per axis (without the bias slot)
    has_bias: tuple[bool, ...]  # whether axis m carries a key/value bias slot
    scale: float
    chunk_size: int | tuple[int, int] | None
    dropout_p: float


def _dense_path(
    q: Tensor,
    keys: Sequence[Tensor],
    values: Sequence[Tensor],
    mask: masks.CausalMask | Tensor | None,
    problem: _Problem,
) -> Tensor:
    """All tuples, causal tuples or a boolean tensor mask: the streaming kernel."""
    lead_shape, n_real, has_bias, scale, chunk_size, dropout_p = problem
    order, n = len(keys), q.shape[1]
    key_sizes = [k.shape[1] for k in keys]
    dense = None
    if isinstance(mask, Tensor):
        full = (*lead_shape, n, *key_sizes)
        try:
            expanded = mask.to(q.device).expand(full)
        except RuntimeError as err:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to {full}") from err
        tail = full[-(order + 1) :]
        if mask.dim() <= order + 1 or all(s == 1 for s in mask.shape[: -(order + 1)]):
            # one mask shared by every leading index: keep it un-replicated
            base = mask.reshape(mask.shape[-(order + 1) :]) if mask.dim() > order else mask
            dense = base.to(q.device).expand(tail).unsqueeze(0)
        else:
            dense = expanded.reshape(math.prod(lead_shape), *tail)
    cq, ck = resolve_chunks(chunk_size, q.shape[0], n, key_sizes)
    seed = int(torch.randint(0, 2**62, (1,)).item()) if dropout_p > 0 else 0
    spec = DenseSpec(
        scale, isinstance(mask, masks.CausalMask), cq, ck, tuple(n_real), tuple(has_bias), dropout_p, seed
    )
    return dense_n_simplicial(spec, dense, q, keys, values)


def _gathered_path(
    q: Tensor,
    keys: Sequence[Tensor],
    values: Sequence[Tensor],
    selection: masks.KeySelection,
    problem: _Problem,
) -> Tensor:
    """Per-query key lists (windows, router): gather ``K_m`` keys per axis, joint softmax."""
    lead_shape, n_real, has_bias, scale, chunk_size, dropout_p = problem
    lead, n, _ = q.shape
    order = len(keys)
    idx_l, valid_l, gate_l = [], [], []
    for m in range(order):
        idx = selection.indices[m]
        if idx.shape[-2] != n:
            raise ValueError(f"KeySelection.indices[{m}] covers {idx.shape[-2]} queries, expected {n}")
        idx = _bias_indices(idx, m, n_real[m], has_bias[m], keys[m].shape[1], "KeySelection")
        width = idx.shape[-1]
        idx_l.append(_flat_lead(idx.to(q.device), lead_shape, n, width))
        valid_l.append(_flat_lead(selection.valid[m] if selection.valid is not None else None, lead_shape, n, width))
        gate_l.append(_flat_lead(selection.gate[m] if selection.gate is not None else None, lead_shape, n, width))
    widths = [i.shape[-1] for i in idx_l]
    if chunk_size is None:
        cq = max(1, min(n, TILE_BUDGET // max(lead * math.prod(widths), 1)))
    else:
        cq = chunk_size if isinstance(chunk_size, int) else int(chunk_size[0])
        if cq < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size!r}")
    rows = torch.arange(lead, device=q.device)[:, None, None]
    outs = []
    for qs in range(0, n, cq):
        qe = min(qs + cq, n)
        k_g = [k[rows, i[:, qs:qe]] for k, i in zip(keys, idx_l)]
        s = multilinear_logits(q[:, qs:qe], k_g, gathered=True) * scale
        for m in range(order):
            shape = [lead, qe - qs] + [1] * order
            shape[2 + m] = widths[m]
            if gate_l[m] is not None:
                s = s + gate_l[m][:, qs:qe].to(s.dtype).view(shape)
            if valid_l[m] is not None:
                s = s.masked_fill(~valid_l[m][:, qs:qe].view(shape), float("-inf"))
        # joint softmax over the N key axes: one segment per (leading index, query) column
        flat = s.reshape(-1, math.prod(widths)).t()
        a = segment_softmax(flat, flat.new_zeros(flat.shape[0], dtype=torch.long), 1).t()
        if dropout_p > 0:
            a = a * dropout_factors(a.shape, dropout_p, dtype=a.dtype, device=a.device)
        v_g = [v[rows, i[:, qs:qe]] for v, i in zip(values, idx_l)]
        outs.append(weighted_product(a.reshape(s.shape), v_g, gathered=True))
    return torch.cat(outs, dim=1) if outs else q.new_zeros(lead, 0, values[0].shape[-1])


def prepare_tuples(
    tuples: Tensor | masks.TupleMask,
    num_queries: int,
    num_keys: int | Sequence[int],
    has_bias: bool | Sequence[bool] = False,
    *,
    device: torch.device | str | None = None,
) -> masks.TupleIndex:
    """Validate a tuple list once and prepare it for the tuple path (and ``torch.compile``).

    Checks the indices, maps :data:`~.masks.NULL_KEY` to the bias slot ``n_m`` of each axis and
    finds the distinct key tuples ``(k_1, ..., k_N)`` (one source of the sparse attention per
    distinct key tuple: a pair shared by several triangles is built once). Everything
    data-dependent of the tuple path happens here, so a :class:`~.masks.TupleIndex` can be built
    once per batch, outside a compiled region, and reused by every layer.

    Parameters
    ----------
    tuples : torch.Tensor or TupleMask
        Long tensor ``(n_tuples, N + 1)`` (column 0 the query, ``-1`` = bias slot) or a
        :class:`~.masks.TupleMask`.
    num_queries : int
        ``n``, the number of queries.
    num_keys : int or sequence of N int
        Real keys per axis ``n_m`` (bias slot excluded); an int is used for every axis.
    has_bias : bool or sequence of N bool, default=False
        Whether axis ``m`` has a key/value bias slot (at index ``n_m``).
    device : torch.device or str, optional
        Device of the index tensors; default that of ``tuples``.

    Returns
    -------
    TupleIndex
        The prepared tuples.
    """
    mask = tuples if isinstance(tuples, masks.TupleMask) else masks.TupleMask(tuples)
    order = mask.order
    n_real = (int(num_keys),) * order if isinstance(num_keys, int) else tuple(int(s) for s in num_keys)
    bias = (bool(has_bias),) * order if isinstance(has_bias, bool) else tuple(bool(b) for b in has_bias)
    if len(n_real) != order or len(bias) != order:
        raise ValueError(
            f"num_keys and has_bias need one entry per key axis (N = {order}), got "
            f"{len(n_real)} and {len(bias)}"
        )
    t = mask.tuples if device is None else mask.tuples.to(device)
    target = t[:, 0].contiguous()
    if target.numel() and (int(target.min()) < 0 or int(target.max()) >= num_queries):
        raise ValueError(f"TupleMask query indices must lie in [0, {num_queries})")
    sizes = [n_real[m] + int(bias[m]) for m in range(order)]
    cols = torch.stack(
        [_bias_indices(t[:, m + 1], m, n_real[m], bias[m], sizes[m], "TupleMask") for m in range(order)],
        dim=1,
    )
    # tuples are coded as one integer (mixed radix) because a 1-D unique is much faster
    if math.prod(sizes) >= 2**62:  # the code would overflow int64
        sources, inverse = torch.unique(cols, dim=0, return_inverse=True)
    else:
        code = cols[:, 0].clone()
        for m in range(1, order):
            code = code * sizes[m] + cols[:, m]
        uniq, inverse = torch.unique(code, return_inverse=True)
        sources = torch.empty(uniq.shape[0], order, dtype=torch.long, device=t.device)
        for m in reversed(range(order)):
            sources[:, m] = uniq % sizes[m]
            uniq = torch.div(uniq, sizes[m], rounding_mode="floor")
    neighborhood = NeighborhoodIndex(
        target, inverse.reshape(-1).contiguous(), None, (int(num_queries), sources.shape[0])
    )
    return masks.TupleIndex(
        neighborhood, tuple(sources[:, m].contiguous() for m in range(order)), n_real, bias
    )


def _check_tuple_index(
    index: masks.TupleIndex, n: int, n_real: Sequence[int], has_bias: Sequence[bool]
) -> None:
    """Eager-mode check that a prepared index matches the inputs (skipped while compiling)."""
    if torch.compiler.is_compiling():  # comparing with symbolic sizes would specialise them
        return
    got = (index.num_queries, index.num_keys, index.has_bias)
    want = (n, tuple(n_real), tuple(has_bias))
    if got != want:
        raise ValueError(
            f"TupleIndex was prepared for (queries, keys per axis, bias slots) = {got}, the "
            f"inputs have {want}; prepare it again (prepare_tuples or the module's "
            "prepare_tuples) for these tokens"
        )


def _tuple_path(
    q: Tensor,
    keys: Sequence[Tensor],
    values: Sequence[Tensor],
    index: masks.TupleIndex,
    scale: float,
    dropout_p: float,
    cardinality_weight: Tensor | None = None,
) -> Tensor:
    """Explicit tuples: sparse attention of the queries over their distinct key tuples.

    The leading index ``L`` (batch × heads) plays the role of the core's heads. No
    data-dependent step (all of it is in :func:`prepare_tuples`). ``cardinality_weight``
    (``(L, 1, d_v)``) adds ``w ⊙ Σ_t V_t`` per query (module docstring, *Cardinality*).
    """
    tuple_key = tuple_value = None
    for m, source in enumerate(index.sources):
        source = source.to(q.device)
        k_m = keys[m].index_select(1, source)
        v_m = values[m].index_select(1, source)
        tuple_key = k_m if tuple_key is None else tuple_key * k_m
        tuple_value = v_m if tuple_value is None else tuple_value * v_m
    out = sparse_attention(
        q.transpose(0, 1),
        tuple_key.transpose(0, 1),
        tuple_value.transpose(0, 1),
        index.neighborhood,
        scale=scale,
        dropout_p=dropout_p,
        training=dropout_p > 0,
    )  # (n, L, d_v)
    out = out.transpose(0, 1)
    if cardinality_weight is None:
        return out
    nb = index.neighborhood
    per_tuple = tuple_value.index_select(1, nb.index_source.to(q.device))  # (L, n_tuples, d_v)
    total = scatter_sum(per_tuple.transpose(0, 1), nb.index_target.to(q.device), q.shape[1])
    return out + cardinality_weight * total.transpose(0, 1)


# ----------------------------------------------------------------------------------------------
# public entry point
# ----------------------------------------------------------------------------------------------
def n_simplicial_attention(
    query: Tensor,
    keys: Sequence[Tensor],
    values: Sequence[Tensor],
    scale: float | None = None,
    mask: MaskLike = None,
    chunk_size: int | tuple[int, int] | None = None,
    *,
    key_bias: Sequence[Tensor | None] | None = None,
    value_bias: Sequence[Tensor | None] | None = None,
    logit_form: str = "product",
    dropout_p: float = 0.0,
    training: bool = False,
    cardinality_weight: Tensor | None = None,
) -> Tensor:
    """Exact N-simplicial attention (§2.2) with masks, tuple lists, routing and determinant logits.

    Parameters
    ----------
    query : torch.Tensor, shape = (..., n, d)
        Queries ``Q``.
    keys : sequence of N torch.Tensor, each shape = (..., n_m, d)
        Keys ``K^{(1)}, ..., K^{(N)}``; ``n_m = n`` for causal, window and router masks.
    values : sequence of N torch.Tensor, each shape = (..., n_m, d_v)
        Values ``V^{(1)}, ..., V^{(N)}`` (combined by a Hadamard product).
    scale : float, optional
        Logit scale; default ``1/sqrt(d)`` for every ``N`` (the paper's §2.2 uses ``1/d``).
    mask : CausalMask, WindowMask, KeySelection, TupleMask, TupleIndex or torch.Tensor, optional
        Restriction of the tuples (see :mod:`~topomodelx_attention.nn.simplicial.masks`); a
        :class:`~.masks.TupleIndex` is a tuple list already prepared by :func:`prepare_tuples`
        for these token counts and bias slots (no data-dependent step left). A boolean
        tensor must broadcast to ``(..., n, n_1', ..., n_N')`` where ``n_m'`` counts the bias slot.
    chunk_size : int or tuple of int, optional
        Dense path: ``c`` or ``(c_q, c_k)`` — query chunk and first-key-axis chunk, bounding the
        tile at ``c_q · c_k · n_2 ⋯ n_N`` logits per leading index; gathered path: query chunk;
        ignored by the tuple path. ``None`` picks chunks automatically (tile under
        :data:`TILE_BUDGET` elements in all).
    key_bias, value_bias : sequence of N (torch.Tensor or None), each shape = (..., d) / (..., d_v)
        Optional extra key/value row per key axis (Appendix F.1): with ``K^{(N)} = 1`` and
        ``V^{(N)} = 1`` on the bias slot, order ``N`` contains order ``N - 1``. The slot is index
        ``n_m`` of its axis (``-1`` in tuple/selection lists) and is never masked by causal or
        window masks.
    logit_form : {"product", "determinant"}, default="product"
        ``"determinant"`` uses the chunked determinant logits of §2.4 (rotation invariant).
    dropout_p : float, default=0.0
        Dropout probability on the attention weights ``A`` (only when ``training``).
    training : bool, default=False
        Whether attention dropout is active.
    cardinality_weight : torch.Tensor, shape = (..., 1, d_v), optional
        ``w`` of the cardinality term ``w ⊙ Σ_t V_t`` (module docstring, *Cardinality*), which
        tells a query how many tuples it has; broadcast like the values. Only with a tuple
        list (``TupleMask`` or ``TupleIndex``): other masks raise ``ValueError``.

    Returns
    -------
    torch.Tensor, shape = (..., n, d_v)
        Attention output; zeros for a query with no allowed tuple (the cardinality term is
        then zero too).
    """
    keys, values = _validate(query, keys, values, logit_form, dropout_p)
    dropout_p = dropout_p if training else 0.0
    n, order = query.shape[-2], len(keys)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    n_real = tuple(k.shape[-2] for k in keys)
    has_bias = _append_bias(keys, values, key_bias, value_bias)
    mask = _normalise_mask(mask, n, n_real, has_bias, query.device)
    _check_cardinality(cardinality_weight, mask)
    if logit_form == "determinant":
        query, keys = determinant_expand(query, keys)
    lead_shape = torch.broadcast_shapes(
        query.shape[:-2], *(k.shape[:-2] for k in keys), *(v.shape[:-2] for v in values)
    )
    if (
        order == 1
        and chunk_size is None
        and not any(has_bias)
        and logit_form == "product"
        and (mask is None or isinstance(mask, masks.CausalMask))
    ):
        return _sdpa_path(
            query, keys[0], values[0], lead_shape, isinstance(mask, masks.CausalMask), scale, dropout_p
        )
    problem = _Problem(lead_shape, n_real, tuple(has_bias), scale, chunk_size, dropout_p)
    return _flat_paths(query, keys, values, mask, problem, cardinality_weight)


def _check_cardinality(cardinality_weight: Tensor | None, mask: MaskLike) -> None:
    """Raise for a cardinality term without a tuple list (not implemented there)."""
    if cardinality_weight is not None and not isinstance(mask, masks.TupleIndex):
        raise ValueError(
            "cardinality_weight needs a tuple list (TupleMask or TupleIndex, e.g. the tuples of "
            "a complex): without one (no mask, a causal, window or router mask, a boolean "
            "tensor) it is not implemented; drop cardinality there"
        )


def _flat_paths(
    query: Tensor,
    keys: Sequence[Tensor],
    values: Sequence[Tensor],
    mask: MaskLike,
    problem: _Problem,
    cardinality_weight: Tensor | None,
) -> Tensor:
    """Run the tuple, gathered or dense path on inputs flattened to one leading dimension."""
    lead_shape, n = problem.lead_shape, query.shape[-2]
    lead = math.prod(lead_shape)

    def flat(t: Tensor) -> Tensor:
        return t.expand(*lead_shape, *t.shape[-2:]).reshape(lead, *t.shape[-2:])

    q_f, k_f, v_f = flat(query), [flat(k) for k in keys], [flat(v) for v in values]
    if isinstance(mask, masks.TupleIndex):
        card = None if cardinality_weight is None else flat(cardinality_weight)
        out = _tuple_path(q_f, k_f, v_f, mask, problem.scale, problem.dropout_p, card)
    else:  # per-query key lists, or all / causal / masked tuples: same arguments
        path = _gathered_path if isinstance(mask, masks.KeySelection) else _dense_path
        out = path(q_f, k_f, v_f, mask, problem)
    return out.reshape(*lead_shape, n, out.shape[-1])
