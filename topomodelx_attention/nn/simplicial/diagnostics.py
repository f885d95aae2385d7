r"""Over-smoothing diagnostics for stacked N-simplicial attention (§3.2, §3.2.1).

§3.2 measures how far the tokens are from a common representation with the residual

.. math::

    \mathrm{res}(X) = X - \mathbf{1} \bar x^\top, \qquad
    \|M\|_{1,\infty} = \sqrt{\|M\|_1 \, \|M\|_\infty},

(``‖M‖_1`` the largest column absolute sum, ``‖M‖_∞`` the largest row absolute sum, as in Dong et
al. 2021). Theorem 3.1 bounds ``‖res(X')‖_{1,∞}`` by a constant times ``‖res(X)‖_{1,∞}^3`` for pure
N-simplicial attention (no skip connection): stacking layers collapses the tokens doubly
exponentially; Theorem 3.4 gives exponential collapse for masked attention on a quasi-strongly
connected hypergraph. Skip connections and LayerNorm prevent it. The paper uses the minimiser
``x̄`` of the residual; here ``x̄`` is the token mean, the "distance to the common mean" (an upper
bound on the paper's quantity, equal up to a factor at most 2 in this norm).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention import scatter_max
from topomodelx_attention.nn.common import segment_pool
from topomodelx_attention.nn.simplicial.n_simplicial_transformer_layer import (
    NSimplicialTransformerLayer,
)

__all__ = [
    "STACK_VARIANTS",
    "build_stack",
    "mixed_norm",
    "oversmoothing_profile",
    "residual_norm",
    "token_residual",
]

#: Stack variants of :func:`build_stack`.
STACK_VARIANTS = ("pure", "skip", "skip_norm", "transformer")


def mixed_norm(m: Tensor) -> Tensor:
    """Composite norm ``‖M‖_{1,∞} = sqrt(‖M‖_1 ‖M‖_∞)`` over the last two axes.

    Parameters
    ----------
    m : torch.Tensor, shape = (..., n, d)
        Matrices.

    Returns
    -------
    torch.Tensor, shape = (...)
        Norms.
    """
    a = m.abs()
    col = a.sum(-2).amax(-1)  # ‖M‖_1: max column sum
    row = a.sum(-1).amax(-1)  # ‖M‖_∞: max row sum
    return torch.sqrt(col * row)


def token_residual(x: Tensor, batch: Tensor | None = None) -> Tensor:
    """Residual ``res(X) = X − 1 x̄ᵀ`` with ``x̄`` the token mean (per sequence or complex).

    Parameters
    ----------
    x : torch.Tensor, shape = (..., n, d) or (n_cells, d)
        Tokens.
    batch : torch.Tensor, shape = (n_cells,), optional
        Complex index per row of a 2-D ``x``; means are taken per complex.

    Returns
    -------
    torch.Tensor, same shape as x
        Residual.
    """
    if batch is None:
        return x - x.mean(-2, keepdim=True)
    size = int(batch.max()) + 1 if batch.numel() else 0
    return x - segment_pool(x, batch, size, "mean").index_select(0, batch)


def residual_norm(x: Tensor, batch: Tensor | None = None, relative: bool = False) -> Tensor:
    """``‖res(X)‖_{1,∞}`` (§3.2), per sequence or per complex.

    Parameters
    ----------
    x : torch.Tensor, shape = (..., n, d) or (n_cells, d)
        Tokens.
    batch : torch.Tensor, shape = (n_cells,), optional
        Complex index per row of a 2-D ``x``.
    relative : bool, default=False
        Divide by ``‖X‖_{1,∞}`` (scale-free; compares stacks with and without normalisation).
        NaN where ``X`` is exactly zero (e.g. after an underflow of a pure ``N >= 2`` stack).

    Returns
    -------
    torch.Tensor, shape = (...) or (num_complexes,)
        Residual norms.
    """
    res = token_residual(x, batch)
    if batch is None:
        out = mixed_norm(res)
        return _ratio(out, mixed_norm(x)) if relative else out
    size = int(batch.max()) + 1 if batch.numel() else 0

    def per_complex(m: Tensor) -> Tensor:
        a = m.abs()
        col = segment_pool(a, batch, size).amax(-1)
        row = scatter_max(a.sum(-1), batch, size)
        return torch.sqrt(col * row.clamp_min(0))

    out = per_complex(res)
    return _ratio(out, per_complex(x)) if relative else out


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` with NaN where ``den == 0`` (all tokens exactly zero: undefined)."""
    return torch.where(den > 0, num / den.clamp_min(torch.finfo(den.dtype).tiny), float("nan"))


def oversmoothing_profile(
    layers: Iterable[Callable[..., Tensor]],
    x: Tensor,
    *,
    batch: Tensor | None = None,
    relative: bool = True,
    no_grad: bool = True,
    **forward_kwargs: Any,
) -> Tensor:
    """Residual norm of the tokens after each layer of a stack (index 0 = the input).

    Parameters
    ----------
    layers : iterable of callables
        The stack (e.g. an ``nn.ModuleList`` of layers); each is called as
        ``layer(x, **forward_kwargs)``.
    x : torch.Tensor, shape = (..., n, d) or (n_cells, d)
        Input tokens.
    batch : torch.Tensor, shape = (n_cells,), optional
        Complex index per row of a 2-D ``x``.
    relative : bool, default=True
        Report ``‖res(X)‖ / ‖X‖``.
    no_grad : bool, default=True
        Run without building the autograd graph.
    **forward_kwargs
        Extra arguments of every layer (``tuples=...``, ``mask=...``).

    Returns
    -------
    torch.Tensor, shape = (num_layers + 1, ...)
        Residual norms (per sequence or complex) after 0, 1, ..., L layers.
    """
    context = torch.no_grad() if no_grad else torch.enable_grad()
    with context:
        values = [residual_norm(x, batch, relative)]
        for layer in layers:
            x = layer(x, **forward_kwargs)
            values.append(residual_norm(x, batch, relative))
    return torch.stack(values)


def build_stack(
    variant: str,
    channels: int,
    depth: int,
    heads: int = 1,
    order: int = 2,
    *,
    simplicial_options: Mapping[str, Any] | None = None,
) -> nn.ModuleList:
    """Build a stack of N-simplicial layers for the over-smoothing experiment of §3.2.

    Parameters
    ----------
    variant : {"pure", "skip", "skip_norm", "transformer"}
        ``"pure"``: ``X ← Attn(X)`` (the setting of Theorems 3.1/3.4); ``"skip"``:
        ``X ← X + Attn(X)``; ``"skip_norm"``: ``X ← X + Attn(LN(X))``; ``"transformer"``: the full
        pre-norm layer with MLP.
    channels : int
        Token width.
    depth : int
        Number of layers.
    heads : int, default=1
        Attention heads.
    order : int, default=2
        ``N``.
    simplicial_options : mapping, optional
        The attention's options, passed to every :class:`~.NSimplicialTransformerLayer`
        unchanged (e.g. ``{"causal": True}``).

    Returns
    -------
    torch.nn.ModuleList
        ``depth`` layers.
    """
    if variant not in STACK_VARIANTS:
        raise ValueError(f"variant must be one of {STACK_VARIANTS}, got {variant!r}")
    flags = {
        "pure": {"residual": False, "norm": False, "mlp": False},
        "skip": {"residual": True, "norm": False, "mlp": False},
        "skip_norm": {"residual": True, "norm": True, "mlp": False},
        "transformer": {"residual": True, "norm": True, "mlp": True},
    }[variant]
    return nn.ModuleList(
        NSimplicialTransformerLayer(channels, heads, order, **flags, simplicial_options=simplicial_options)
        for _ in range(depth)
    )
