r"""Exact streaming kernel of dense N-simplicial attention (§2.2) and its einsum contractions.

Tiles of ``c_q`` queries × ``c_k`` keys of the first key axis × all keys of the other axes are
combined with an online softmax; the custom backward recomputes each tile from the saved
log-sum-exp (as FlashAttention does), so forward **and** backward allocate
``O(L · c_q · c_k · n^{N-2} · max(n, d))`` at a time, never ``n^{N+1}``. This is the part of
N-simplicial attention that is specific to it (the multilinear logit over ``N`` key axes with one
joint softmax); sparse tuple lists run on the shared core
(:func:`topomodelx_attention.nn.attention.sparse_attention`).

Attention dropout (``dropout_p``) draws one Bernoulli keep-mask per tile from a generator seeded
with ``seed + tile number``, so the backward pass recomputes exactly the masks of the forward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from topomodelx_attention.nn.attention.dropout import dropout_factors

__all__ = ["TILE_BUDGET", "DenseSpec", "dense_n_simplicial", "resolve_chunks"]

#: Default number of logit elements of one tile when ``chunk_size`` is ``None``.
TILE_BUDGET: int = 1 << 20

_AXIS_LETTERS = "jkmnoprstuvwxyz"



# ----------------------------------------------------------------------------------------------
# einsum equations
# ----------------------------------------------------------------------------------------------


def _eq_logits(order: int, gathered: bool) -> str:
    """Q (l,i,a), keys -> logits (l,i,axes); gathered keys carry the query axis."""
    axes = _AXIS_LETTERS[:order]
    pre = "li" if gathered else "l"
    keys = ",".join(f"{pre}{x}a" for x in axes)
    return f"lia,{keys}->li{axes}"


def _eq_to_query(order: int, gathered: bool) -> str:
    """Weights (l,i,axes), factors of every axis (last axis first) -> (l,i,a)."""
    axes = _AXIS_LETTERS[:order]
    pre = "li" if gathered else "l"
    factors = ",".join(f"{pre}{x}a" for x in reversed(axes))
    return f"li{axes},{factors}->lia"


def _eq_to_axis(order: int, axis: int) -> str:
    """Weights (l,i,axes), other key factors (last first), query factor -> (l,axis,a)."""
    axes = _AXIS_LETTERS[:order]
    others = [x for m, x in enumerate(axes) if m != axis]
    factors = ",".join(f"l{x}a" for x in reversed(others))
    factors = f"{factors},lia" if factors else "lia"
    return f"li{axes},{factors}->l{axes[axis]}a"


def multilinear_logits(q: Tensor, keys: Sequence[Tensor], gathered: bool = False) -> Tensor:
    """Unscaled logits ``Σ_a q_ia k1_{j a} ⋯ kN_{m a}``: (l,i,a), N × (l,[i,]n_m,a) -> (l,i,n_1..n_N)."""
    if len(keys) == 1 and not gathered:
        return torch.matmul(q, keys[0].transpose(-1, -2))
    return torch.einsum(_eq_logits(len(keys), gathered), q, *keys)


def weighted_product(weights: Tensor, factors: Sequence[Tensor], gathered: bool = False) -> Tensor:
    """``Σ_{k_1..k_N} w_{i k_1..k_N} v1_{k_1} ⊙ ⋯ ⊙ vN_{k_N}``: (l,i,n_1..n_N) -> (l,i,a)."""
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
class DenseSpec:
    """Static configuration of one call of the streaming kernel.

    Attributes
    ----------
    scale : float
        Logit scale.
    causal : bool
        Causal mask ``k_m <= i`` (the bias slots are always allowed).
    cq, ck : int
        Query chunk and first-key-axis chunk.
    n_real : tuple of int
        Keys per axis without the bias slot.
    has_bias : tuple of bool
        Whether axis ``m`` carries a bias slot at index ``n_real[m]``.
    dropout_p : float, default=0.0
        Attention-weight dropout probability (0 disables it).
    seed : int, default=0
        Seed of the per-tile dropout masks.
    """

    scale: float
    causal: bool
    cq: int
    ck: int
    n_real: tuple[int, ...]
    has_bias: tuple[bool, ...]
    dropout_p: float = 0.0
    seed: int = 0


def _tiles(spec: DenseSpec, n: int, key_sizes: Sequence[int]):
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
    spec: DenseSpec, dense: Tensor | None, qs: int, qe: int, axes, device: torch.device
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


def _keep_scale(spec: DenseSpec, tile: int, like: Tensor) -> Tensor | None:
    """Dropout factor ``Bernoulli(1 - p) / (1 - p)`` of one tile (the same in forward and backward)."""
    if spec.dropout_p <= 0.0:
        return None
    gen = torch.Generator(device=like.device).manual_seed(spec.seed + tile)
    return dropout_factors(
        like.shape, spec.dropout_p, dtype=like.dtype, device=like.device, generator=gen
    )


def _expand_rows(x: Tensor, order: int) -> Tensor:
    return x.reshape(*x.shape, *([1] * order))


class _DenseNSimplicial(torch.autograd.Function):
    """Exact N-simplicial attention by tiles, streaming softmax, recomputing backward."""

    @staticmethod
    def forward(ctx, spec: DenseSpec, dense: Tensor | None, q: Tensor, *kv: Tensor) -> Tensor:
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
        for tile, (qs, qe, axes) in enumerate(_tiles(spec, n, key_sizes)):
            run_max, run_sum, acc = state.get(qs) or (
                qw.new_full((lead, qe - qs), float("-inf")),
                qw.new_zeros(lead, qe - qs),
                qw.new_zeros(lead, qe - qs, dv),
            )
            k_t = [_take(k, sel, spec.n_real[m]) for m, (k, sel) in enumerate(zip(kw, axes))]
            v_t = [_take(v, sel, spec.n_real[m]) for m, (v, sel) in enumerate(zip(vw, axes))]
            s = multilinear_logits(qw[:, qs:qe], k_t).mul_(spec.scale)
            tmask = _tile_mask(spec, dense, qs, qe, axes, q.device)
            if tmask is not None:
                s.masked_fill_(~tmask, float("-inf"))
            new_max = torch.maximum(run_max, s.amax(dim=red))
            ref = torch.where(torch.isfinite(new_max), new_max, torch.zeros_like(new_max))
            p = s.sub_(_expand_rows(ref, order)).exp_()  # in place: one tile buffer
            alpha = torch.exp(run_max - ref)
            run_sum = run_sum * alpha + p.sum(dim=red)
            keep = _keep_scale(spec, tile, p)
            acc = acc * alpha[..., None] + weighted_product(p if keep is None else p * keep, v_t)
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
        spec: DenseSpec = ctx.spec
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
        for tile, (qs, qe, axes) in enumerate(_tiles(spec, n, key_sizes)):
            k_t = [_take(k, sel, spec.n_real[m]) for m, (k, sel) in enumerate(zip(kw, axes))]
            v_t = [_take(v, sel, spec.n_real[m]) for m, (v, sel) in enumerate(zip(vw, axes))]
            q_c, g_c = qw[:, qs:qe], g[:, qs:qe]
            s = multilinear_logits(q_c, k_t).mul_(spec.scale)
            tmask = _tile_mask(spec, ctx.dense, qs, qe, axes, q.device)
            if tmask is not None:
                s.masked_fill_(~tmask, float("-inf"))
            p = s.sub_(_expand_rows(lse[:, qs:qe], order)).exp_()
            keep = _keep_scale(spec, tile, p)
            p_out = p if keep is None else p * keep  # weights that produced the output
            if need_v:
                for m, sel in enumerate(axes):
                    _put(dvs[m], _to_axis(p_out, g_c, v_t, m), sel, spec.n_real[m])
            del p_out
            dp = multilinear_logits(g_c, v_t)
            if keep is not None:
                dp = dp.mul_(keep)
            ds = dp.sub_(_expand_rows(delta[:, qs:qe], order)).mul_(p)
            del p, s
            dq[:, qs:qe] += weighted_product(ds, k_t) * spec.scale
            if need_k:
                for m, sel in enumerate(axes):
                    _put(dk[m], _to_axis(ds, q_c, k_t, m) * spec.scale, sel, spec.n_real[m])
        grads_k = [d.to(k.dtype) if need_k else None for d, k in zip(dk, keys)]
        grads_v = [d.to(v.dtype) if need_v else None for d, v in zip(dvs, values)]
        return None, None, dq.to(q.dtype), *grads_k, *grads_v




def dense_n_simplicial(
    spec: DenseSpec, dense: Tensor | None, q: Tensor, keys: Sequence[Tensor], values: Sequence[Tensor]
) -> Tensor:
    """Run the streaming kernel on flattened inputs.

    Parameters
    ----------
    spec : DenseSpec
        Scale, chunks, causal flag, bias slots and dropout.
    dense : torch.Tensor, shape = (L or 1, n, n_1', ..., n_N'), optional
        Boolean mask (``True`` = allowed), bias slots included in ``n_m'``.
    q : torch.Tensor, shape = (L, n, d)
        Queries.
    keys, values : sequences of N torch.Tensor, shapes (L, n_m', d) and (L, n_m', d_v)
        Keys and values, bias slots appended.

    Returns
    -------
    torch.Tensor, shape = (L, n, d_v)
        Attention output; zero rows for queries without an allowed tuple.
    """
    return _DenseNSimplicial.apply(spec, dense, q, *keys, *values)
