"""Multi-head N-simplicial attention module (§2.2–§2.4) and the functional re-exports.

The functional core lives in :mod:`~topomodelx_attention.nn.simplicial.functional`
(:func:`n_simplicial_attention`), the masks in :mod:`~topomodelx_attention.nn.simplicial.masks`,
the determinant logits and simplicial RoPE in :mod:`~topomodelx_attention.nn.simplicial.rope` and
the top-K router in :mod:`~topomodelx_attention.nn.simplicial.router`; this module wires them into
:class:`NSimplicialAttention`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention.heads import check_dropout
from topomodelx_attention.nn.common import check_options
from topomodelx_attention.nn.simplicial import masks
from topomodelx_attention.nn.simplicial.functional import (
    MaskLike,
    n_simplicial_attention,
    prepare_tuples,
)
from topomodelx_attention.nn.simplicial.rope import simplicial_rope
from topomodelx_attention.nn.simplicial.router import RouterContext, SimplicialRouter

__all__ = ["SIMPLICIAL_OPTIONS", "NSimplicialAttention", "n_simplicial_attention", "resolve_tuples"]

#: Keys of ``simplicial_options`` of :class:`NSimplicialAttention` and their defaults: the options of
#: the attention itself (which tuples it attends to, how it scores them), passed down unchanged by
#: :class:`~.NSimplicialTransformerLayer` and :class:`~.NSimplicialTransformer`.
SIMPLICIAL_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        "kv_bias": False,
        "causal": False,
        "window": None,
        "router_k": None,
        "router": "paper",
        "router_dim": 16,
        "rope": False,
        "logit_form": None,
        "rope_base": 10000.0,
        "scale": None,
        "chunk_size": None,
        "include_lower": None,
        "self_loops": False,
        "cardinality": False,
    }
)

ROPE_ON_COMPLEX = (
    "rope=True on a complex needs explicit positions: simplicial RoPE (§2.4) rotates every "
    "token by its position in a sequence, and the cells of a complex have no canonical order "
    "(rotating by the cell index makes the output depend on how the vertices are labelled). "
    "Pass positions= (one per cell, an order your data defines, permuted together with the "
    "cells) or build the model with rope=False in its simplicial_options for complexes (RoPE "
    "stays available on sequences)"
)
"""The error of ``rope=True`` on a complex without ``positions``."""


def resolve_tuples(
    tuples: Tensor | masks.TupleMask | Any,
    order: int,
    include_lower: bool = False,
    self_loops: bool = False,
    causal: bool = False,
) -> masks.TupleMask:
    """Normalise the ``tuples`` argument of the modules into a :class:`TupleMask`.

    Parameters
    ----------
    tuples : torch.Tensor, TupleMask or toponetx.SimplicialComplex
        A long tensor ``(n_tuples, N + 1)``, a :class:`TupleMask`, or a simplicial complex (its
        vertices are the tokens, see :func:`simplices_to_tuples`).
    order : int
        ``N``.
    include_lower : bool, default=False
        For a complex: add the null-padded lower-order tuples (needs a key/value bias).
    self_loops : bool, default=False
        For a complex: add ``(i, ..., i)``.
    causal : bool, default=False
        Drop the tuples with a key after its query (the bias slot ``-1`` is kept).

    Returns
    -------
    TupleMask
        The allowed tuples.
    """
    if isinstance(tuples, masks.TupleMask):
        mask = tuples
    elif isinstance(tuples, Tensor):
        mask = masks.TupleMask(tuples)
    elif hasattr(tuples, "skeleton"):
        mask = masks.TupleMask(
            masks.simplices_to_tuples(tuples, order, include_lower=include_lower, self_loops=self_loops)
        )
    else:
        raise TypeError(
            "tuples must be a long tensor (n_tuples, N + 1), a TupleMask or a "
            f"toponetx.SimplicialComplex, got {type(tuples).__name__}"
        )
    if mask.order != order:
        raise ValueError(f"tuples have N = {mask.order} key columns, the layer has order {order}")
    if causal:
        t = mask.tuples
        keys = t[:, 1:]
        keep = ((keys <= t[:, :1]) | (keys == masks.NULL_KEY)).all(dim=1)
        mask = masks.TupleMask(t[keep])
    return mask


def _checked_options(
    channels: int, heads: int, order: int, simplicial_options: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Check the attention's options against its widths; resolve ``logit_form``.

    Parameters
    ----------
    channels, heads, order : int
        As :class:`NSimplicialAttention` takes them.
    simplicial_options : mapping, optional
        The attention's options (keys of :data:`SIMPLICIAL_OPTIONS`).

    Returns
    -------
    dict
        Every option, the defaults filled in, ``cardinality`` a bool and ``logit_form``
        resolved (``"determinant"`` with ``rope``, else ``"product"``).

    Raises
    ------
    ValueError
        For an unknown key, widths that do not fit, or options that exclude each other.
    """
    options = check_options("simplicial_options", simplicial_options, SIMPLICIAL_OPTIONS)
    kv_bias, rope, window, router_k = (
        options["kv_bias"], options["rope"], options["window"], options["router_k"]
    )
    options["cardinality"] = bool(options["cardinality"])
    if channels < 1 or heads < 1 or channels % heads != 0:
        raise ValueError(f"channels ({channels}) must be a positive multiple of heads ({heads})")
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    if window is not None and router_k is not None:
        raise ValueError("choose either a sliding window or a router, not both")
    if options["cardinality"] and (window is not None or router_k is not None):
        raise ValueError(
            "cardinality needs tuple lists (complexes); a window or a router fixes each "
            "query's number of key tuples, so build the layer without window/router_k"
        )
    if rope and kv_bias and order % 2 == 1:
        raise ValueError(
            f"rope=True with kv_bias=True needs an even order: for N = {order} the rotations "
            "of §2.4 turn every channel, so a position-free bias key would break the shift "
            "invariance of the determinant logits (use kv_bias=False or an even order)"
        )
    logit_form = options["logit_form"] or ("determinant" if rope else "product")
    if logit_form not in ("product", "determinant"):
        raise ValueError(f"logit_form must be 'product' or 'determinant', got {logit_form!r}")
    if rope and logit_form != "determinant":
        raise ValueError(
            "rope needs logit_form='determinant': the product logit of N-simplicial attention "
            "is not rotation invariant (§2.4)"
        )
    if logit_form == "determinant" and (channels // heads) % (order + 1) != 0:
        raise ValueError(
            f"determinant logits split each head into chunks of N + 1 = {order + 1} channels; "
            f"head_dim = {channels // heads} is not divisible by {order + 1}"
        )
    options["logit_form"] = logit_form
    return options

class NSimplicialAttention(nn.Module):
    """Multi-head N-simplicial attention (Dussolle & Liò, §2.2) with masks, router and RoPE.

    Per head ``h``: ``Q = X W_Q``, ``K^{(m)} = X W_K^{(m)}``, ``V^{(m)} = X W_V^{(m)}``
    (``m = 1..N``), ``O_i = Σ_{k_1..k_N} softmax(s · Σ_a Q_{ia} K^{(1)}_{k_1 a} ⋯ K^{(N)}_{k_N a})
    · V^{(1)}_{k_1} ⊙ ⋯ ⊙ V^{(N)}_{k_N}``, heads concatenated and projected by ``W_O``. No
    residual here (see :class:`~.NSimplicialTransformerLayer`).

    Parameters
    ----------
    channels : int
        Token channels ``C`` (input and output).
    heads : int, default=1
        Number of heads; ``C`` must be divisible by it.
    order : int, default=2
        ``N``, the number of key axes (``N = 1``: standard attention).
    dropout : float, default=0.0
        Dropout on the output of the block (after ``W_O``), the sublayer-output dropout of the
        package vocabulary.
    attention_dropout : float, default=0.0
        Dropout on the attention weights ``A`` (every path; the dense streaming path draws one
        mask per tile and replays it in the backward pass).
    bias : bool, default=True
        Biases of the input and output projections.
    simplicial_options : mapping, optional
        The attention's own options as one mapping (:data:`SIMPLICIAL_OPTIONS` are the defaults; a
        key it does not take raises ``ValueError``), its keys listed below, ``kv_bias`` to
        ``self_loops``:

    kv_bias : bool, default=False
        Learnable key/value row appended to every key axis (Appendix F.1), initialised to ones so
        that order ``N`` contains all lower orders: tuples ``(i, j, NULL)`` are 1-simplicial
        attention. Also enables the lower-order tuples of a complex.
    causal : bool, default=False
        Causal mask ``k_m <= i`` (also applied to windows, the router and tuple lists).
    window : int or sequence of int, optional
        Sliding window per key axis (:class:`~.masks.WindowMask`), cost ``O(n · W_1 ⋯ W_N)``.
    router_k : int or sequence of int, optional
        Keep the top-``router_k`` keys per query and key axis with a trainable
        :class:`~.router.SimplicialRouter` (§2.3), cost ``O(n · K^N · d)``.
    router : {"paper", "bilinear"}, default="paper"
        Router scorer: §2.3's ``Σ_h w_ih ReLU(<Q_i, K_j>)`` on the previous layer's queries and
        keys (``context`` in :meth:`forward`), or a low-rank bilinear form of the input.
    router_dim : int, default=16
        Rank of the ``"bilinear"`` router's scorers.
    rope : bool, default=False
        Simplicial rotary embeddings (§2.4); implies determinant logits. With ``kv_bias`` the
        key bias has no position: it is restricted to the channels the rotations leave fixed
        (the last channel of every chunk of ``N + 1`` when ``N`` is even), so that
        ``det[R_i q, R_j k, b] = det[q, R_{j-i} k, b]`` stays shift invariant; for odd ``N``
        every channel turns and the combination is rejected. **Sequences only, unless
        positions are given:** §2.4 rotates each token by its position in a sequence, and
        the cells of a complex have no canonical order (their index is a labelling; rotating
        by it made the output change by 0.07–0.25 when the vertices were relabelled). With
        ``tuples`` (or a tuple ``mask``) and ``rope=True``, :meth:`forward` therefore
        requires explicit ``positions`` (an order the data defines, permuted with the cells)
        and raises ``ValueError`` without them.
    logit_form : {"product", "determinant"}, optional
        Logit form; default ``"determinant"`` when ``rope`` else ``"product"``.
    rope_base : float, default=10000.0
        RoPE base.
    scale : float, optional
        Logit scale; default ``1/sqrt(head_dim)`` (the paper's §2.2 uses ``1/d``).
    chunk_size : int or tuple of int, optional
        Chunking of the exact kernel (see :func:`~.functional.n_simplicial_attention`).
    include_lower : bool, optional
        When ``tuples`` is a simplicial complex: add lower-order null-padded tuples; default
        ``kv_bias``.
    self_loops : bool, default=False
        When ``tuples`` is a simplicial complex: add ``(i, ..., i)``.
    cardinality : bool, default=False
        Add ``w ⊙ Σ_t V_t``, the unnormalised sum of the values of the query's tuples, to each
        head's output (additive cardinality-preserving attention, Zhang & Xie 2020; see
        :mod:`~.functional`, *Cardinality*), with a learnable ``w`` per head channel
        initialised to zero. The softmax output is an average over the tuples, so without it a
        vertex cannot tell on how many triangles it lies (triangle counting needs that). Tuple
        lists only (complexes): a sequence without ``tuples`` raises ``ValueError``.
    """

    def __init__(
        self,
        channels: int,
        heads: int = 1,
        order: int = 2,
        *,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        bias: bool = True,
        simplicial_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        options = _checked_options(channels, heads, order, simplicial_options)
        kv_bias, causal, window = options["kv_bias"], options["causal"], options["window"]
        rope, logit_form, rope_base = options["rope"], options["logit_form"], options["rope_base"]
        include_lower, self_loops = options["include_lower"], options["self_loops"]
        dropout = check_dropout(dropout, "dropout")
        attention_dropout = check_dropout(attention_dropout, "attention_dropout")
        head_dim = channels // heads
        self.channels, self.heads, self.order, self.head_dim = channels, heads, order, head_dim
        self.causal, self.rope, self.rope_base = causal, rope, rope_base
        self.logit_form = logit_form
        self.window = (
            None
            if window is None
            else masks.WindowMask(tuple(window) if not isinstance(window, int) else window, causal=causal)
        )
        self.scale, self.chunk_size = options["scale"], options["chunk_size"]
        self.include_lower = kv_bias if include_lower is None else include_lower
        self.self_loops = self_loops
        self.in_proj = nn.Linear(channels, (1 + 2 * order) * channels, bias=bias)
        self.out_proj = nn.Linear(channels, channels, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attention_dropout = float(attention_dropout)
        if kv_bias:
            self.key_bias = nn.Parameter(torch.ones(order, heads, head_dim))
            self.value_bias = nn.Parameter(torch.ones(order, heads, head_dim))
        else:
            self.register_parameter("key_bias", None)
            self.register_parameter("value_bias", None)
        if rope and kv_bias:  # channels left unturned by simplicial_rope: last of each chunk
            fixed = torch.zeros(head_dim)
            fixed[order :: order + 1] = 1.0
            fixed[(head_dim // (order + 1)) * (order + 1) :] = 1.0
            self.register_buffer("rope_fixed", fixed, persistent=False)
        else:
            self.rope_fixed = None
        if options["cardinality"]:
            self.cardinality_weight = nn.Parameter(torch.zeros(heads, 1, head_dim))
        else:
            self.register_parameter("cardinality_weight", None)
        self.router = None
        if options["router_k"] is not None:
            self.router = SimplicialRouter(
                channels,
                order,
                options["router_k"],
                heads=heads,
                scorer=options["router"],
                router_dim=options["router_dim"],
            )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform init of every ``C × C`` projection block, zero biases, unit kv-bias.

        The cardinality weight starts at zero: the layer starts as plain N-simplicial attention.
        """
        c = self.channels
        with torch.no_grad():
            for block in range(1 + 2 * self.order):
                nn.init.xavier_uniform_(self.in_proj.weight[block * c : (block + 1) * c])
            nn.init.xavier_uniform_(self.out_proj.weight)
            if self.in_proj.bias is not None:
                self.in_proj.bias.zero_()
            if self.out_proj.bias is not None:
                self.out_proj.bias.zero_()
            if self.key_bias is not None:
                self.key_bias.fill_(1.0)
                self.value_bias.fill_(1.0)
            if self.cardinality_weight is not None:
                self.cardinality_weight.zero_()

    def prepare_tuples(
        self,
        tuples: Tensor | masks.TupleMask | Any,
        num_tokens: int,
        *,
        device: torch.device | str | None = None,
    ) -> masks.TupleIndex:
        """Prepare the ``tuples`` of :meth:`forward` once (outside ``torch.compile``).

        Applies the module's options (:func:`resolve_tuples`: lower-order tuples and self-loops
        of a simplicial complex, causal filter) and :func:`~.functional.prepare_tuples` (bias
        slots of ``kv_bias``, distinct key tuples). Passing the result as ``tuples`` gives the
        same output as passing ``tuples`` itself; the forward then has no data-dependent step,
        and a model can share one index between its layers.

        Parameters
        ----------
        tuples : torch.Tensor, TupleMask or toponetx.SimplicialComplex
            Allowed ``(N+1)``-tuples, as for :meth:`forward`.
        num_tokens : int
            Number of tokens ``n`` of the ``x`` it will be used with.
        device : torch.device or str, optional
            Device of the index tensors (that of ``x``).

        Returns
        -------
        TupleIndex
            The prepared tuples.
        """
        mask = resolve_tuples(tuples, self.order, self.include_lower, self.self_loops, self.causal)
        return prepare_tuples(
            mask, num_tokens, num_tokens, self.key_bias is not None, device=device
        )

    def _resolve_mask(
        self, x: Tensor, tuples: Any, mask: MaskLike, context: RouterContext | None
    ) -> MaskLike:
        if tuples is not None:
            if mask is not None:
                raise ValueError("pass either tuples or mask, not both")
            if self.router is not None or self.window is not None:
                raise ValueError(
                    "tuples restrict the attention to a complex; they cannot be combined with a "
                    "router or a window (build the layer without router_k/window)"
                )
            if isinstance(tuples, masks.TupleIndex):  # prepared by prepare_tuples: used as is
                return tuples
            return resolve_tuples(
                tuples, self.order, self.include_lower, self.self_loops, self.causal
            )
        if mask is not None:
            return mask
        if self.router is not None:
            sel = self.router(x, context=context, causal=self.causal)
            return masks.KeySelection(
                tuple(i.unsqueeze(-3) for i in sel.indices),
                tuple(v.unsqueeze(-3) for v in sel.valid) if sel.valid is not None else None,
                tuple(g.unsqueeze(-3) for g in sel.gate) if sel.gate is not None else None,
            )
        if self.window is not None:
            return self.window
        if self.causal:
            return masks.CausalMask()
        return None

    def _project(
        self, x: Tensor, positions: Tensor | None
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Project ``x`` (``(batch, n, C)``) to queries and ``N`` keys and values, RoPE applied.

        Each of shape ``(batch, heads, n, head_dim)``.
        """
        batch, n, _ = x.shape
        proj = self.in_proj(x).view(batch, n, 1 + 2 * self.order, self.heads, self.head_dim)
        proj = proj.permute(2, 0, 3, 1, 4)  # (1 + 2N, batch, heads, n, head_dim)
        q = proj[0]
        keys = list(proj[1 : 1 + self.order].unbind(0))
        values = list(proj[1 + self.order :].unbind(0))
        if self.rope:
            pos = positions if positions is not None else torch.arange(n, device=x.device)
            if pos.dim() == 2:
                pos = pos.unsqueeze(1)  # (batch, 1, n): broadcast over heads
            q = simplicial_rope(q, pos, self.order, self.rope_base)
            keys = [simplicial_rope(k, pos, self.order, self.rope_base) for k in keys]
        return q, keys, values

    def forward(
        self,
        x: Tensor,
        *,
        tuples: Tensor | masks.TupleMask | masks.TupleIndex | Any | None = None,
        mask: MaskLike = None,
        positions: Tensor | None = None,
        context: RouterContext | None = None,
        return_context: bool = False,
    ) -> Tensor | tuple[Tensor, RouterContext]:
        """Apply N-simplicial self-attention.

        Parameters
        ----------
        x : torch.Tensor, shape = (batch, n, channels) or (n, channels)
            Tokens (a 2-D input is one set of tokens, e.g. the concatenated cells of a batch of
            complexes).
        tuples : torch.Tensor, TupleMask, TupleIndex or toponetx.SimplicialComplex, optional
            Allowed ``(N+1)``-tuples, shape ``(n_tuples, N + 1)`` (e.g. from
            :func:`~.masks.simplices_to_tuples`), or their :class:`~.masks.TupleIndex` from
            :meth:`prepare_tuples` (the form to use under ``torch.compile``); overrides the
            configured masks.
        mask : CausalMask, WindowMask, KeySelection, TupleMask or torch.Tensor, optional
            Explicit mask passed to the kernel (overrides the configured ones). Index tensors
            and dense masks are in head-broadcast layout ``(batch, heads, n, ...)``.
        positions : torch.Tensor, shape = (n,) or (batch, n), optional
            Token positions for RoPE; default ``0, ..., n - 1`` for sequences. Required with
            ``rope=True`` on a complex (``tuples`` or a tuple ``mask``): its cells have no
            canonical order.
        context : RouterContext, optional
            Queries and keys of the previous layer for the ``"paper"`` router (§2.3); without
            it the router scores with this layer's own queries and keys.
        return_context : bool, default=False
            Also return this layer's :class:`~.router.RouterContext` (for the next layer).

        Returns
        -------
        torch.Tensor, shape = x.shape
            Attention output (and the context when ``return_context``).

        Raises
        ------
        ValueError
            With ``rope=True`` on a complex without ``positions`` (see ``rope``).
        """
        if not isinstance(x, Tensor) or x.dim() not in (2, 3):
            raise ValueError(
                "x must be a tensor of shape (batch, n, channels) or (n, channels), got "
                f"{tuple(getattr(x, 'shape', ()))}"
            )
        if x.shape[-1] != self.channels:
            raise ValueError(f"x has {x.shape[-1]} channels, the layer expects {self.channels}")
        if (
            self.rope
            and positions is None
            and (tuples is not None or isinstance(mask, (masks.TupleMask, masks.TupleIndex)))
        ):
            raise ValueError(ROPE_ON_COMPLEX)
        squeeze = x.dim() == 2
        xb = x.unsqueeze(0) if squeeze else x
        batch, n, _ = xb.shape
        q, keys, values = self._project(xb, positions)
        own = RouterContext(q, tuple(keys))
        if context is not None and squeeze:
            context = RouterContext(
                context.query if context.query.dim() == 4 else context.query.unsqueeze(0),
                tuple(k if k.dim() == 4 else k.unsqueeze(0) for k in context.keys),
            )
        resolved = self._resolve_mask(xb, tuples, mask, context if context is not None else own)
        key_bias = value_bias = None
        if self.key_bias is not None:
            kb = self.key_bias if self.rope_fixed is None else self.key_bias * self.rope_fixed
            key_bias, value_bias = list(kb.unbind(0)), list(self.value_bias.unbind(0))
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)
        out = n_simplicial_attention(
            q, keys, values, scale=scale, mask=resolved, chunk_size=self.chunk_size,
            key_bias=key_bias, value_bias=value_bias, logit_form=self.logit_form,
            dropout_p=self.attention_dropout, training=self.training,
            cardinality_weight=self.cardinality_weight,
        )  # (batch, heads, n, head_dim)
        out = out.transpose(1, 2).reshape(batch, n, self.channels)
        out = self.dropout(self.out_proj(out))
        out = out.squeeze(0) if squeeze else out
        return (out, own) if return_context else out

    def extra_repr(self) -> str:
        """Summarise the configuration for ``repr``."""
        parts = [f"channels={self.channels}", f"heads={self.heads}", f"order={self.order}"]
        if self.causal:
            parts.append("causal=True")
        if self.window is not None:
            parts.append(f"window={self.window.windows}")
        if self.rope:
            parts.append("rope=True")
        if self.logit_form != "product":
            parts.append(f"logit_form={self.logit_form!r}")
        if self.key_bias is not None:
            parts.append("kv_bias=True")
        if self.router is not None:
            parts.append(f"router={self.router.scorer!r}, router_k={self.router.k}")
        if self.cardinality_weight is not None:
            parts.append("cardinality=True")
        return ", ".join(parts)
