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

Paths and memory (``L`` = product of the leading dimensions, ``d`` = channels)
---------------------------------------------------------------------------
* dense (no mask, :class:`~.masks.CausalMask`, or a boolean tensor): tiles of ``c_q`` queries ×
  ``c_k`` keys of the first key axis × all keys of the other axes, combined with a streaming
  (online) softmax. A custom autograd function recomputes the tiles in the backward pass from the
  saved log-sum-exp (as FlashAttention does), so forward **and** backward allocate
  ``O(L · c_q · c_k · n^{N-2} · max(n, d))`` at a time, never ``n^{N+1}``. Causal tiles skip keys
  ``> i``. For ``N = 1`` without mask/bias and without ``chunk_size`` the call is forwarded to
  :func:`torch.nn.functional.scaled_dot_product_attention`.
* gathered (:class:`~.masks.WindowMask`, :class:`~.masks.KeySelection` from the router):
  ``O(L · n · K_1 ⋯ K_N)`` logits and ``O(L · n · K_m · d)`` gathered rows (chunked over queries).
* tuples (:class:`~.masks.TupleMask`): a segment softmax over each query's tuples with the scatter
  utilities of the attention core, ``O(L · n_tuples · d)``.

A query that has no allowed tuple gets a zero output (never NaN), and zero gradients. The dense
path's backward is a hand-written first derivative (``once_differentiable``): double backward
through it is not supported; the gathered and tuple paths are plain autograd.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from topomodelx_attention.nn.attention.scatter import scatter_sum, segment_softmax
from topomodelx_attention.nn.simplicial.masks import (
    NULL_KEY,
    CausalMask,
    KeySelection,
    TupleMask,
    WindowMask,
    window_selection,
)
from topomodelx_attention.nn.simplicial.rope import determinant_expand

__all__ = ["TILE_BUDGET", "n_simplicial_attention", "resolve_chunks"]

#: Default number of logit elements of one tile when ``chunk_size`` is ``None``.
TILE_BUDGET: int = 1 << 20

_AXIS_LETTERS = "jkmnoprstuvwxyz"

MaskLike = CausalMask | WindowMask | KeySelection | TupleMask | Tensor | None


# ----------------------------------------------------------------------------------------------
# einsum equations
# ----------------------------------------------------------------------------------------------


@cache
def _eq_logits(order: int, gathered: bool) -> str:
    """Q (l,i,a), keys -> logits (l,i,axes); gathered keys carry the query axis."""
    axes = _AXIS_LETTERS[:order]
    pre = "li" if gathered else "l"
    keys = ",".join(f"{pre}{x}a" for x in axes)
    return f"lia,{keys}->li{axes}"


@cache
def _eq_to_query(order: int, gathered: bool) -> str:
    """Weights (l,i,axes), factors of every axis (last axis first) -> (l,i,a)."""
    axes = _AXIS_LETTERS[:order]
    pre = "li" if gathered else "l"
    factors = ",".join(f"{pre}{x}a" for x in reversed(axes))
    return f"li{axes},{factors}->lia"


@cache
def _eq_to_axis(order: int, axis: int) -> str:
    """Weights (l,i,axes), other key factors (last first), query factor -> (l,axis,a)."""
    axes = _AXIS_LETTERS[:order]
    others = [x for m, x in enumerate(axes) if m != axis]
    factors = ",".join(f"l{x}a" for x in reversed(others))
    factors = f"{factors},lia" if factors else "lia"
    return f"li{axes},{factors}->l{axes[axis]}a"


def _logits(q: Tensor, keys: Sequence[Tensor], gathered: bool = False) -> Tensor:
    if len(keys) == 1 and not gathered:
        return torch.matmul(q, keys[0].transpose(-1, -2))
    return torch.einsum(_eq_logits(len(keys), gathered), q, *keys)


def _to_query(weights: Tensor, factors: Sequence[Tensor], gathered: bool = False) -> Tensor:
    if len(factors) == 1 and not gathered:
        return torch.matmul(weights, factors[0])
    return torch.einsum(_eq_to_query(len(factors), gathered), weights, *reversed(factors))


def _to_axis(weights: Tensor, query: Tensor, factors: Sequence[Tensor], axis: int) -> Tensor:
    if len(factors) == 1:
        return torch.matmul(weights.transpose(-1, -2), query)
    others = [f for m, f in enumerate(factors) if m != axis]
    return torch.einsum(_eq_to_axis(len(factors), axis), weights, *reversed(others), query)


# ----------------------------------------------------------------------------------------------
# chunk sizes
# ----------------------------------------------------------------------------------------------


def resolve_chunks(
    chunk_size: int | tuple[int, int] | None,
    lead: int,
    n: int,
    key_sizes: Sequence[int],
    budget: int = TILE_BUDGET,
) -> tuple[int, int]:
    """Choose the query and first-key-axis chunk sizes of the dense path.

    Parameters
    ----------
    chunk_size : int, tuple of int or None
        ``c`` (used for both), ``(c_q, c_k)``, or ``None`` for an automatic choice that keeps a
        tile of ``lead · c_q · c_k · n_2 ⋯ n_N`` logits under ``budget``.
    lead : int
        Product of the leading (batch, head) dimensions.
    n : int
        Number of queries.
    key_sizes : sequence of int
        ``(n_1, ..., n_N)``.
    budget : int, default=TILE_BUDGET
        Target tile size (elements) for the automatic choice.

    Returns
    -------
    tuple of int
        ``(c_q, c_k)``.
    """
    n1 = max(key_sizes[0], 1)
    if chunk_size is not None:
        if isinstance(chunk_size, int):
            cq = ck = chunk_size
        else:
            if len(chunk_size) != 2:
                raise ValueError(f"chunk_size must be an int or (c_q, c_k), got {chunk_size!r}")
            cq, ck = (int(c) for c in chunk_size)
        if cq < 1 or ck < 1:
            raise ValueError(f"chunk sizes must be positive, got {chunk_size!r}")
        return min(cq, max(n, 1)), min(ck, n1)
    rest = max(lead, 1) * math.prod(key_sizes[1:])
    cq = min(max(n, 1), 128)
    ck = max(1, min(n1, budget // max(rest * cq, 1)))
    if rest * cq * ck > budget:
        cq = max(1, min(cq, budget // max(rest * ck, 1)))
    return cq, ck


# ----------------------------------------------------------------------------------------------
# dense path: streaming softmax with recomputing backward
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DenseSpec:
    scale: float
    causal: bool
    cq: int
    ck: int
    n_real: tuple[int, ...]  # keys per axis without the bias slot
    has_bias: tuple[bool, ...]


def _tiles(spec: _DenseSpec, n: int, key_sizes: Sequence[int]):
    """Yield ``(qs, qe, axes)``; each axis selection is ``(start, stop, with_bias_row)``."""
    for qs in range(0, n, spec.cq):
        qe = min(qs + spec.cq, n)
        if spec.causal:
            others = [
                (0, min(qe, spec.n_real[m]), spec.has_bias[m]) for m in range(1, len(key_sizes))
            ]
            stop1 = min(qe, spec.n_real[0])
            starts = list(range(0, stop1, spec.ck)) or [0]
            for ks in starts:
                ke = min(ks + spec.ck, stop1)
                last = ke >= stop1
                yield qs, qe, [(ks, ke, spec.has_bias[0] and last), *others]
        else:
            others = [(0, key_sizes[m], False) for m in range(1, len(key_sizes))]
            for ks in range(0, key_sizes[0], spec.ck):
                yield qs, qe, [(ks, min(ks + spec.ck, key_sizes[0]), False), *others]


def _take(t: Tensor, sel: tuple[int, int, bool], n_real: int) -> Tensor:
    start, stop, with_bias = sel
    part = t[:, start:stop]
    if with_bias:
        part = torch.cat([part, t[:, n_real : n_real + 1]], dim=1)
    return part


def _put(grad: Tensor, tile_grad: Tensor, sel: tuple[int, int, bool], n_real: int) -> None:
    start, stop, with_bias = sel
    if with_bias:
        grad[:, start:stop] += tile_grad[:, :-1]
        grad[:, n_real] += tile_grad[:, -1]
    else:
        grad[:, start:stop] += tile_grad


def _positions(sel: tuple[int, int, bool], n_real: int, device: torch.device) -> Tensor:
    start, stop, with_bias = sel
    pos = torch.arange(start, stop, device=device)
    if with_bias:
        pos = torch.cat([pos, pos.new_tensor([n_real])])
    return pos


def _tile_mask(
    spec: _DenseSpec, dense: Tensor | None, qs: int, qe: int, axes, device: torch.device
) -> Tensor | None:
    order = len(axes)
    mask: Tensor | None = None
    if spec.causal:
        rows = torch.arange(qs, qe, device=device)
        for m, sel in enumerate(axes):
            pos = _positions(sel, spec.n_real[m], device)
            ok = (pos[None, :] <= rows[:, None]) | (pos[None, :] >= spec.n_real[m])
            shape = [qe - qs] + [1] * order
            shape[1 + m] = pos.numel()
            ok = ok.view(shape)
            mask = ok if mask is None else mask & ok
        mask = mask.unsqueeze(0)
    if dense is not None:
        tile = dense[:, qs:qe]
        for m, sel in enumerate(axes):
            if sel[2]:
                tile = tile.index_select(2 + m, _positions(sel, spec.n_real[m], device))
            else:
                tile = tile.narrow(2 + m, sel[0], sel[1] - sel[0])
        mask = tile if mask is None else mask & tile
    return mask


def _expand_rows(x: Tensor, order: int) -> Tensor:
    return x.reshape(*x.shape, *([1] * order))


class _DenseNSimplicial(torch.autograd.Function):
    """Exact N-simplicial attention by tiles, streaming softmax, recomputing backward."""

    @staticmethod
    def forward(ctx, spec: _DenseSpec, dense: Tensor | None, q: Tensor, *kv: Tensor) -> Tensor:
        order = len(kv) // 2
        keys, values = kv[:order], kv[order:]
        work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
        qw = q.to(work)
        kw = [k.to(work) for k in keys]
        vw = [v.to(work) for v in values]
        lead, n, _ = q.shape
        dv = values[0].shape[-1]
        key_sizes = [k.shape[1] for k in keys]
        out = qw.new_zeros(lead, n, dv)
        lse = qw.new_full((lead, n), float("inf"))
        red = tuple(range(2, 2 + order))
        state: dict[int, tuple[Tensor, Tensor, Tensor]] = {}
        for qs, qe, axes in _tiles(spec, n, key_sizes):
            run_max, run_sum, acc = state.get(qs) or (
                qw.new_full((lead, qe - qs), float("-inf")),
                qw.new_zeros(lead, qe - qs),
                qw.new_zeros(lead, qe - qs, dv),
            )
            k_t = [_take(k, sel, spec.n_real[m]) for m, (k, sel) in enumerate(zip(kw, axes))]
            v_t = [_take(v, sel, spec.n_real[m]) for m, (v, sel) in enumerate(zip(vw, axes))]
            s = _logits(qw[:, qs:qe], k_t).mul_(spec.scale)
            tmask = _tile_mask(spec, dense, qs, qe, axes, q.device)
            if tmask is not None:
                s.masked_fill_(~tmask, float("-inf"))
            new_max = torch.maximum(run_max, s.amax(dim=red))
            ref = torch.where(torch.isfinite(new_max), new_max, torch.zeros_like(new_max))
            p = s.sub_(_expand_rows(ref, order)).exp_()  # in place: one tile buffer
            alpha = torch.exp(run_max - ref)
            run_sum = run_sum * alpha + p.sum(dim=red)
            acc = acc * alpha[..., None] + _to_query(p, v_t)
            state[qs] = (new_max, run_sum, acc)
        for qs, (run_max, run_sum, acc) in state.items():
            qe = qs + run_sum.shape[1]
            has = run_sum > 0
            ref = torch.where(torch.isfinite(run_max), run_max, torch.zeros_like(run_max))
            out[:, qs:qe] = torch.where(
                has[..., None], acc / run_sum.clamp_min(torch.finfo(work).tiny)[..., None], 0.0
            )
            lse[:, qs:qe] = torch.where(
                has, ref + torch.log(run_sum.clamp_min(torch.finfo(work).tiny)), float("inf")
            )
        ctx.spec = spec
        ctx.dense = dense
        ctx.save_for_backward(q, *keys, *values, out, lse)
        return out.to(q.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        spec: _DenseSpec = ctx.spec
        saved = ctx.saved_tensors
        q = saved[0]
        order = (len(saved) - 3) // 2
        keys, values = saved[1 : 1 + order], saved[1 + order : 1 + 2 * order]
        out, lse = saved[-2], saved[-1]
        work = out.dtype
        qw = q.to(work)
        kw = [k.to(work) for k in keys]
        vw = [v.to(work) for v in values]
        g = grad_out.to(work)
        n = q.shape[1]
        key_sizes = [k.shape[1] for k in keys]
        need_k = any(ctx.needs_input_grad[3 : 3 + order])
        need_v = any(ctx.needs_input_grad[3 + order : 3 + 2 * order])
        dq = torch.zeros_like(qw)
        dk = [torch.zeros_like(k) for k in kw]
        dvs = [torch.zeros_like(v) for v in vw]
        delta = (g * out).sum(-1)
        for qs, qe, axes in _tiles(spec, n, key_sizes):
            k_t = [_take(k, sel, spec.n_real[m]) for m, (k, sel) in enumerate(zip(kw, axes))]
            v_t = [_take(v, sel, spec.n_real[m]) for m, (v, sel) in enumerate(zip(vw, axes))]
            q_c, g_c = qw[:, qs:qe], g[:, qs:qe]
            s = _logits(q_c, k_t).mul_(spec.scale)
            tmask = _tile_mask(spec, ctx.dense, qs, qe, axes, q.device)
            if tmask is not None:
                s.masked_fill_(~tmask, float("-inf"))
            p = s.sub_(_expand_rows(lse[:, qs:qe], order)).exp_()
            if need_v:
                for m, sel in enumerate(axes):
                    _put(dvs[m], _to_axis(p, g_c, v_t, m), sel, spec.n_real[m])
            dp = _logits(g_c, v_t)
            ds = dp.sub_(_expand_rows(delta[:, qs:qe], order)).mul_(p)
            del p, s
            dq[:, qs:qe] += _to_query(ds, k_t) * spec.scale
            if need_k:
                for m, sel in enumerate(axes):
                    _put(dk[m], _to_axis(ds, q_c, k_t, m) * spec.scale, sel, spec.n_real[m])
        grads_k = [d.to(k.dtype) if need_k else None for d, k in zip(dk, keys)]
        grads_v = [d.to(v.dtype) if need_v else None for d, v in zip(dvs, values)]
        return None, None, dq.to(q.dtype), *grads_k, *grads_v


# ----------------------------------------------------------------------------------------------
# gathered path (windows, router)
# ----------------------------------------------------------------------------------------------


def _safe_joint_softmax(scores: Tensor, order: int) -> Tensor:
    flat = scores.flatten(-order)
    ref = flat.detach().amax(-1, keepdim=True)
    ref = torch.where(torch.isfinite(ref), ref, torch.zeros_like(ref))
    e = torch.exp(flat - ref)
    denom = e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    return (e / denom).view_as(scores)


def _flat_lead(t: Tensor | None, lead_shape: torch.Size, n: int, width: int) -> Tensor | None:
    if t is None:
        return None
    t = t.expand(*lead_shape, n, width)
    return t.reshape(math.prod(lead_shape), n, width)


def _gathered_attention(
    q: Tensor,
    keys: Sequence[Tensor],
    values: Sequence[Tensor],
    selection: KeySelection,
    scale: float,
    n_real: Sequence[int],
    has_bias: Sequence[bool],
    lead_shape: torch.Size,
    chunk_size: int | tuple[int, int] | None,
) -> Tensor:
    lead, n, _ = q.shape
    order = len(keys)
    idx_l, valid_l, gate_l = [], [], []
    for m in range(order):
        idx = selection.indices[m]
        if idx.shape[-2] != n:
            raise ValueError(
                f"KeySelection.indices[{m}] covers {idx.shape[-2]} queries, expected {n}"
            )
        width = idx.shape[-1]
        null = idx == NULL_KEY
        if bool(null.any()) and not has_bias[m]:
            raise ValueError(
                f"KeySelection uses the bias slot (-1) on key axis {m + 1} but no key/value bias "
                "was given for that axis"
            )
        idx = torch.where(null, torch.full_like(idx, n_real[m]), idx)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= keys[m].shape[1]):
            raise ValueError(
                f"KeySelection.indices[{m}] has entries outside [0, {keys[m].shape[1]})"
            )
        idx_l.append(_flat_lead(idx.to(q.device), lead_shape, n, width))
        valid = selection.valid[m] if selection.valid is not None else None
        valid_l.append(_flat_lead(valid, lead_shape, n, width))
        gate = selection.gate[m] if selection.gate is not None else None
        gate_l.append(_flat_lead(gate, lead_shape, n, width))
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
        s = _logits(q[:, qs:qe], k_g, gathered=True) * scale
        for m in range(order):
            shape = [lead, qe - qs] + [1] * order
            shape[2 + m] = widths[m]
            if gate_l[m] is not None:
                s = s + gate_l[m][:, qs:qe].to(s.dtype).view(shape)
            if valid_l[m] is not None:
                s = s.masked_fill(~valid_l[m][:, qs:qe].view(shape), float("-inf"))
        a = _safe_joint_softmax(s, order)
        v_g = [v[rows, i[:, qs:qe]] for v, i in zip(values, idx_l)]
        outs.append(_to_query(a, v_g, gathered=True))
    return torch.cat(outs, dim=1) if outs else q.new_zeros(lead, 0, values[0].shape[-1])


# ----------------------------------------------------------------------------------------------
# tuple path (simplices of a complex)
# ----------------------------------------------------------------------------------------------


def _tuple_attention(
    q: Tensor,
    keys: Sequence[Tensor],
    values: Sequence[Tensor],
    tuples: Tensor,
    scale: float,
    n_real: Sequence[int],
    has_bias: Sequence[bool],
) -> Tensor:
    n = q.shape[1]
    order = len(keys)
    if tuples.shape[1] != order + 1:
        raise ValueError(
            f"TupleMask has tuples of length {tuples.shape[1]}, expected N + 1 = {order + 1}"
        )
    tuples = tuples.to(q.device)
    target = tuples[:, 0]
    if target.numel() and (int(target.min()) < 0 or int(target.max()) >= n):
        raise ValueError(f"TupleMask query indices must lie in [0, {n})")
    cols = []
    for m in range(order):
        col = tuples[:, m + 1]
        null = col == NULL_KEY
        if bool(null.any()) and not has_bias[m]:
            raise ValueError(
                f"TupleMask uses the bias slot (-1) on key axis {m + 1} but no key/value bias was "
                "given for that axis (pass key_bias/value_bias, or kv_bias=True in the module)"
            )
        col = torch.where(null, torch.full_like(col, n_real[m]), col)
        if col.numel() and (int(col.min()) < 0 or int(col.max()) >= keys[m].shape[1]):
            raise ValueError(f"TupleMask key indices of axis {m + 1} are out of range")
        cols.append(col)
    prod = q.index_select(1, target)
    for k, col in zip(keys, cols):
        prod = prod * k.index_select(1, col)
    logits = prod.sum(-1) * scale  # (lead, T)
    del prod
    weights = segment_softmax(logits.transpose(0, 1), target, n)  # (T, lead)
    msg = weights.transpose(0, 1).unsqueeze(-1)
    for v, col in zip(values, cols):
        msg = msg * v.index_select(1, col)
    out = scatter_sum(msg.transpose(0, 1), target, n)  # (n, lead, dv)
    return out.transpose(0, 1)


# ----------------------------------------------------------------------------------------------
# public entry point
# ----------------------------------------------------------------------------------------------


def _with_bias_slot(selection: KeySelection, has_bias: Sequence[bool]) -> KeySelection:
    """Append the bias slot (always valid, zero gate) to every query's list of a biased axis.

    An axis whose list already uses :data:`NULL_KEY` somewhere is left as given.
    """
    indices, valid, gate = [], [], []
    for m, idx in enumerate(selection.indices):
        val = selection.valid[m] if selection.valid is not None else None
        gat = selection.gate[m] if selection.gate is not None else None
        if has_bias[m] and not bool((idx == NULL_KEY).any()):
            extra = torch.full_like(idx[..., :1], NULL_KEY)
            idx = torch.cat([idx, extra], -1)
            if val is not None:
                val = torch.cat([val, torch.ones_like(val[..., :1])], -1)
            if gat is not None:
                gat = torch.cat([gat, torch.zeros_like(gat[..., :1])], -1)
        indices.append(idx)
        valid.append(val)
        gate.append(gat)
    return KeySelection(
        tuple(indices),
        tuple(valid) if selection.valid is not None else None,
        tuple(gate) if selection.gate is not None else None,
    )


def _append_bias(
    keys: list[Tensor],
    values: list[Tensor],
    key_bias: Sequence[Tensor | None] | None,
    value_bias: Sequence[Tensor | None] | None,
) -> list[bool]:
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
    mask : CausalMask, WindowMask, KeySelection, TupleMask or torch.Tensor, optional
        Restriction of the tuples (see :mod:`~topomodelx_attention.nn.simplicial.masks`). A boolean
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

    Returns
    -------
    torch.Tensor, shape = (..., n, d_v)
        Attention output; zeros for a query with no allowed tuple.
    """
    if not isinstance(query, Tensor):
        raise TypeError(f"query must be a torch.Tensor, got {type(query).__name__}")
    if isinstance(keys, Tensor) or isinstance(values, Tensor):
        raise TypeError("keys and values must be sequences (one tensor per key axis), not tensors")
    keys, values = list(keys), list(values)
    order = len(keys)
    if order < 1 or len(values) != order:
        raise ValueError(
            f"need N >= 1 key tensors and as many value tensors, got {len(keys)} and {len(values)}"
        )
    if query.dim() < 2:
        raise ValueError(f"query must have shape (..., n, d), got {tuple(query.shape)}")
    d = query.shape[-1]
    n = query.shape[-2]
    for m, (k, v) in enumerate(zip(keys, values)):
        if k.dim() < 2 or v.dim() < 2:
            raise ValueError(f"keys[{m}] and values[{m}] must have shape (..., n_m, channels)")
        if k.shape[-1] != d:
            raise ValueError(f"keys[{m}] has {k.shape[-1]} channels, the query has {d}")
        if k.shape[-2] != v.shape[-2]:
            raise ValueError(f"keys[{m}] and values[{m}] have different lengths")
        if v.shape[-1] != values[0].shape[-1]:
            raise ValueError("all value tensors must have the same number of channels")
    if logit_form not in ("product", "determinant"):
        raise ValueError(f"logit_form must be 'product' or 'determinant', got {logit_form!r}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    n_real = tuple(k.shape[-2] for k in keys)
    has_bias = _append_bias(keys, values, key_bias, value_bias)
    if logit_form == "determinant":
        query, keys = determinant_expand(query, keys)
    lead_shape = torch.broadcast_shapes(
        query.shape[:-2], *(k.shape[:-2] for k in keys), *(v.shape[:-2] for v in values)
    )
    if isinstance(mask, WindowMask):
        if any(s != n for s in n_real):
            raise ValueError("WindowMask needs every key axis to have as many tokens as queries")
        mask = window_selection(n, mask.widths(order), mask.causal, query.device)
    if isinstance(mask, (CausalMask, WindowMask, KeySelection)) and any(s != n for s in n_real):
        raise ValueError(f"{type(mask).__name__} needs n_m == n on every key axis")
    if isinstance(mask, (KeySelection, TupleMask)) and mask.order != order:
        raise ValueError(
            f"{type(mask).__name__} is for N = {mask.order}, the attention has N = {order}"
        )
    if isinstance(mask, KeySelection) and any(has_bias):
        mask = _with_bias_slot(mask, has_bias)
    if mask is not None and not isinstance(mask, (CausalMask, KeySelection, TupleMask, Tensor)):
        raise TypeError(
            "mask must be None, CausalMask, WindowMask, KeySelection, TupleMask or a bool tensor, "
            f"got {type(mask).__name__}"
        )

    # N = 1 standard attention: hand over to SDPA when nothing special is asked for.
    if (
        order == 1
        and chunk_size is None
        and not any(has_bias)
        and logit_form == "product"
        and (mask is None or isinstance(mask, CausalMask))
    ):
        return F.scaled_dot_product_attention(
            query.expand(*lead_shape, *query.shape[-2:]),
            keys[0].expand(*lead_shape, *keys[0].shape[-2:]),
            values[0].expand(*lead_shape, *values[0].shape[-2:]),
            is_causal=isinstance(mask, CausalMask),
            scale=scale,
        )

    lead = math.prod(lead_shape)

    def flat(t: Tensor) -> Tensor:
        return t.expand(*lead_shape, *t.shape[-2:]).reshape(lead, *t.shape[-2:])

    q_f, k_f, v_f = flat(query), [flat(k) for k in keys], [flat(v) for v in values]
    if isinstance(mask, TupleMask):
        out = _tuple_attention(q_f, k_f, v_f, mask.tuples, scale, n_real, has_bias)
    elif isinstance(mask, KeySelection):
        out = _gathered_attention(
            q_f, k_f, v_f, mask, scale, n_real, has_bias, lead_shape, chunk_size
        )
    else:
        dense = None
        if isinstance(mask, Tensor):
            if mask.dtype != torch.bool:
                raise TypeError(f"a tensor mask must be boolean, got dtype {mask.dtype}")
            full = (*lead_shape, n, *(k.shape[-2] for k in keys))
            try:
                dense = mask.to(query.device).expand(full)
            except RuntimeError as err:
                raise ValueError(
                    f"mask of shape {tuple(mask.shape)} does not broadcast to {full}"
                ) from err
            tail = full[-(order + 1) :]
            if mask.dim() <= order + 1 or all(s == 1 for s in mask.shape[: -(order + 1)]):
                # one mask shared by every leading index: keep it un-replicated
                base = mask.reshape(mask.shape[-(order + 1) :]) if mask.dim() > order else mask
                dense = base.to(query.device).expand(tail).unsqueeze(0)
            else:
                dense = dense.reshape(math.prod(lead_shape), *tail)
        cq, ck = resolve_chunks(chunk_size, math.prod(lead_shape), n, [k.shape[-2] for k in keys])
        spec = _DenseSpec(scale, isinstance(mask, CausalMask), cq, ck, n_real, tuple(has_bias))
        out = _DenseNSimplicial.apply(spec, dense, q_f, *k_f, *v_f)
    return out.reshape(*lead_shape, n, out.shape[-1])
