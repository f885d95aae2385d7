r"""TokenGT encoder layer and stack (Kim et al., "Pure Transformers are Powerful Graph Learners").

TokenGT is a *standard* Transformer on node and edge tokens (§2); all the graph structure is in
the token embeddings. The encoder therefore is the plain pre-LN Transformer of §5.2 / A.3.3
(Graphormer configuration): for every layer :math:`\ell`

.. math::
    X' = X + \mathrm{DropPath}_{p_\ell}\big(\mathrm{Dropout}(\mathrm{MSA}(\mathrm{LN}(X)))\big),
    \qquad
    X'' = X' + \mathrm{DropPath}_{p_\ell}\big(\mathrm{Dropout}(\mathrm{MLP}(\mathrm{LN}(X')))\big),

with :math:`\mathrm{MSA}` the multi-head self-attention of Eq. (9) (every token attends to every
token of its own graph), :math:`\mathrm{MLP}` two linear layers with GELU in between (Eq. 10),
stochastic depth whose rate grows linearly with depth (A.3.3), and a final LayerNorm after the
last layer. Without dropout this is exactly the computation of
``torch.nn.TransformerEncoder(norm_first=True, activation="gelu")`` plus stochastic depth, and the layer's parameters can be copied from / to
it (see :meth:`TokenGTLayer.load_from_torch`).

Attention goes through the shared core
(:class:`~topomodelx_attention.nn.attention.MultiHeadAttention`) with any of its registered
kernels that attends to all tokens (no neighbourhood mask): ``kind="dense"`` (exact softmax,
per complex, padded + SDPA with a key-padding mask) or ``kind="linear"`` (Performer FAVOR+,
A.4.3; linear in the number of tokens); ``kernel_options`` go to the kernel. ``dropout`` is
applied to the output of every sublayer (attention block, MLP) before the residual sum,
``attention_dropout`` to the attention weights (kernels that form them: dense).
The padding of the token set is computed **once per forward**
(:func:`~topomodelx_attention.nn.attention.padded_layout`) and shared by every layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention import (
    MultiHeadAttention,
    PaddedLayout,
    check_all_pairs,
    kernel_class,
    padded_layout,
)
from topomodelx_attention.nn.attention.heads import check_dropout

__all__ = ["LAYOUTS", "TokenGTEncoder", "TokenGTLayer", "drop_path"]
#: How the encoder stack holds the tokens (see :class:`TokenGTEncoder`).
LAYOUTS: tuple[str, ...] = ("auto", "packed", "padded")


def drop_path(x: Tensor, batch: Tensor, num_complexes: int, p: float, training: bool) -> Tensor:
    r"""Stochastic depth per sample (complex): drop a residual branch for whole complexes.

    In training, every complex keeps the branch with probability :math:`1 - p` (then scaled by
    :math:`1 / (1 - p)`, so the expectation is unchanged) or loses it for all its tokens;
    identity in evaluation or for :math:`p = 0`. Random numbers come from PyTorch's global
    generator.

    Parameters
    ----------
    x : torch.Tensor, shape = (n, channels)
        Output of the residual branch, one row per token.
    batch : torch.Tensor, shape = (n,)
        Complex (graph) of every token.
    num_complexes : int
        Number of complexes.
    p : float
        Drop probability in ``[0, 1)``.
    training : bool
        Whether to drop.

    Returns
    -------
    torch.Tensor, shape = (n, channels)
        ``x`` with the rows of dropped complexes zeroed and the others rescaled.
    """
    if not training or p == 0.0:
        return x
    keep = torch.empty(num_complexes, dtype=x.dtype, device=x.device).bernoulli_(1.0 - p)
    keep = keep / (1.0 - p)
    return x * keep.index_select(0, batch).unsqueeze(-1)


class TokenGTLayer(nn.Module):
    r"""One pre-LN TokenGT (standard Transformer) encoder layer (Eqs. 9–10, A.3.3).

    Parameters
    ----------
    channels : int
        Token width :math:`d`.
    heads : int, default = 8
        Attention heads (must divide ``channels``).
    ffn_channels : int, optional
        Hidden width of the MLP (default ``channels``, as in the paper's Graphormer setting).
    kind : str, default = "dense"
        Attention kernel over all tokens (:func:`~topomodelx_attention.nn.attention.check_all_pairs`): exact softmax
        (``"dense"``) or its FAVOR+ approximation (``"linear"``, Performer, A.4.3).
    kernel_options : mapping, optional
        Options of the kernel (e.g. ``{"num_random_features": 64,
        "redraw_features_in_training": True}`` for ``"linear"``; ``scale``).
    dropout : float, default = 0.0
        Dropout on the output of each sublayer (attention block, MLP) before the residual sum.
    attention_dropout : float, default = 0.0
        Dropout on the attention weights (kernels that form them: linear attention has no
        weight matrix, a positive value with ``"linear"`` raises).
    drop_path : float, default = 0.0
        Stochastic-depth rate of this layer (per complex, training only).
    bias : bool, default = True
        Biases in the attention projections.
    layer_norm_eps : float, default = 1e-5
        LayerNorm epsilon.
    """

    def __init__(
        self,
        channels: int,
        *,
        heads: int = 8,
        ffn_channels: int | None = None,
        kind: str = "dense",
        kernel_options: Mapping[str, Any] | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        drop_path: float = 0.0,
        bias: bool = True,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        kind = check_all_pairs(kind, "TokenGT")
        options = {"attention_dropout": attention_dropout, **(kernel_options or {})}
        if kernel_class(kind).accepts_bias:  # no θ·N bias: TokenGT's attention is unmodified (§2)
            options.setdefault("neighborhood_bias", False)
        if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
            raise ValueError(f"channels must be a positive int, got {channels!r}")
        ffn_channels = channels if ffn_channels is None else int(ffn_channels)
        if ffn_channels < 1:
            raise ValueError(f"ffn_channels must be positive, got {ffn_channels}")
        self.channels = channels
        self.kind = kind
        self.drop_path = check_dropout(drop_path, "drop_path")
        self.attention = MultiHeadAttention(
            channels, channels, heads, kind=kind, kernel_options=options, bias=bias
        )
        self.norm_attention = nn.LayerNorm(channels, eps=layer_norm_eps)
        self.norm_ffn = nn.LayerNorm(channels, eps=layer_norm_eps)
        self.lin1 = nn.Linear(channels, ffn_channels)
        self.lin2 = nn.Linear(ffn_channels, channels)
        self.activation = nn.GELU()
        self.dropout = nn.Dropout(check_dropout(dropout, "dropout"))

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return f"kind={self.kind!r}, drop_path={self.drop_path}"

    def forward(self, x: Tensor, layout: PaddedLayout) -> Tensor:
        """Update every token.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, channels)
            Tokens: ``layout.num_tokens`` rows (packed tokens, or the padded grid).
        layout : PaddedLayout
            Padding of the token set (graph of every row, slots, key-padding mask), from
            :func:`~topomodelx_attention.nn.attention.padded_layout`.

        Returns
        -------
        torch.Tensor, shape = (n, channels)
            Updated tokens.
        """
        h = self.attention(self.norm_attention(x), layout=layout)
        x = x + drop_path(
            self.dropout(h), layout.batch, layout.num_complexes, self.drop_path, self.training
        )
        h = self.dropout(self.lin2(self.activation(self.lin1(self.norm_ffn(x)))))
        return x + drop_path(h, layout.batch, layout.num_complexes, self.drop_path, self.training)

    @torch.no_grad()
    def load_from_torch(self, layer: nn.TransformerEncoderLayer) -> None:
        """Copy the weights of a ``torch.nn.TransformerEncoderLayer(norm_first=True)``.

        Both layers then compute the same function (for ``kind="dense"``, GELU, no
        dropout), which the tests check and the benchmark uses for an equal-size comparison.

        Parameters
        ----------
        layer : torch.nn.TransformerEncoderLayer
            Source layer with the same width, heads and FFN width.
        """
        if layer.linear1.out_features != self.lin1.out_features:
            raise ValueError("the torch layer has a different FFN width")
        self.attention.load_from_torch(layer.self_attn)
        for mine, theirs in (
            (self.norm_attention, layer.norm1),
            (self.norm_ffn, layer.norm2),
            (self.lin1, layer.linear1),
            (self.lin2, layer.linear2),
        ):
            mine.load_state_dict(theirs.state_dict())


class TokenGTEncoder(nn.Module):
    r"""Stack of :class:`TokenGTLayer` with linear stochastic depth and a final LayerNorm.

    Layer :math:`\ell = 0..L-1` drops its residual branches with rate
    :math:`p_\ell = p_{\max}\,\ell / (L - 1)` (0 for the first layer, ``drop_path`` for the
    last, A.3.3). The token padding is computed once per forward and shared by all layers, in
    one of two forms (``token_layout``):

    ``"packed"``
        LayerNorms and MLPs run on the real tokens only; every attention call pads its
        queries/keys/values into the ``(graphs, L_max)`` grid with precomputed indices
        (one ``index_copy`` each) and gathers its output back.
    ``"padded"``
        Tokens are scattered into the grid once, the whole stack runs on ``graphs × L_max``
        rows (padding rows are masked as keys, like ``torch.nn.TransformerEncoder`` with a
        key-padding mask) and the real tokens are gathered at the end.
    ``"auto"`` (default)
        ``"padded"`` when at least ``padded_min_fill`` of the grid holds real tokens (the
        wasted work on padding is then smaller than the per-layer copies), else ``"packed"``.

    Parameters
    ----------
    channels : int
        Token width.
    layer : callable, optional
        ``layer(drop_path=rate)`` builds one layer (default ``TokenGTLayer(channels)``); the
        model passes ``functools.partial(TokenGTLayer, channels, heads=..., kind=..., ...)``, so
        that the layer options are listed once, on :class:`TokenGTLayer`.
    n_layers : int
        Number of layers.
    drop_path : float, default = 0.0
        Stochastic-depth rate of the last layer (the paper uses 0.1).
    final_norm : bool, default = True
        LayerNorm after the last layer (pre-LN Transformer).
    token_layout : {"auto", "packed", "padded"}, default = "auto"
        How the stack holds the tokens (see above); all three give the same result.
    padded_min_fill : float, default = 0.85
        Threshold of ``"auto"``.
    """

    def __init__(
        self,
        channels: int,
        *,
        layer: Callable[..., nn.Module] | None = None,
        n_layers: int,
        drop_path: float = 0.0,
        final_norm: bool = True,
        token_layout: str = "auto",
        padded_min_fill: float = 0.85,
    ) -> None:
        super().__init__()
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 0:
            raise ValueError(f"n_layers must be a non-negative int, got {n_layers!r}")
        if token_layout not in LAYOUTS:
            raise ValueError(f"token_layout must be one of {LAYOUTS}, got {token_layout!r}")
        drop_path = check_dropout(drop_path, "drop_path")
        self.token_layout = token_layout
        if not 0.0 <= float(padded_min_fill) <= 1.0:
            raise ValueError(f"padded_min_fill must be in [0, 1], got {padded_min_fill}")
        self.padded_min_fill = float(padded_min_fill)
        rates = [
            drop_path * i / (n_layers - 1) if n_layers > 1 else drop_path for i in range(n_layers)
        ]
        layer = partial(TokenGTLayer, channels) if layer is None else layer
        self.layers = nn.ModuleList(layer(drop_path=rate) for rate in rates)
        self.norm = nn.LayerNorm(channels) if final_norm else None

    def use_padded(self, layout: PaddedLayout) -> bool:
        """Whether a forward on ``layout`` runs in the padded form.

        Parameters
        ----------
        layout : PaddedLayout
            Layout of the tokens.

        Returns
        -------
        bool
            ``True`` for the padded form.
        """
        if self.token_layout == "auto":
            return layout.index is not None and layout.fill >= self.padded_min_fill
        return self.token_layout == "padded" and layout.index is not None

    def forward(
        self,
        x: Tensor,
        batch: Tensor | None = None,
        num_complexes: int | None = None,
        layout: PaddedLayout | None = None,
        sparse_residual: tuple[Tensor, Tensor] | None = None,
        *,
        padded: bool | None = None,
    ) -> Tensor:
        r"""Encode a batch of token sets.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, channels)
            Tokens of all complexes (graphs), in any order.
        batch : torch.Tensor, shape = (n,), optional
            Complex of every token (``None``: one complex); ignored when ``layout`` is given.
        num_complexes : int, optional
            Number of complexes (inferred otherwise).
        layout : PaddedLayout, optional
            Precomputed :func:`~topomodelx_attention.nn.attention.padded_layout` of ``batch``.
        sparse_residual : tuple of torch.Tensor, optional
            ``(target, source)`` token indices, shape ``(nnz,)`` each: after every layer,
            :math:`x_t \leftarrow x_t + \sum_{(t, s)} x_s` — the explicit sparse equivariant
            operator of A.4.3 ("+ SEB", e.g. node ``i`` ← node ``i`` + its edges ``(i, j)``),
            which near-orthonormal identifiers approximate poorly.
        padded : bool, optional
            Run on the padded grid (precomputed :meth:`use_padded` of ``layout``; decided here
            when ``None``). Pass it under ``torch.compile``: the ``"auto"`` choice reads the
            grid's fill, a data-dependent value.

        Returns
        -------
        torch.Tensor, shape = (n, channels)
            Encoded tokens (after the final LayerNorm).
        """
        if not isinstance(x, Tensor) or x.dim() != 2:
            raise ValueError("x must be a (n, channels) tensor")
        if layout is None:
            if batch is None:
                batch = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
            layout = padded_layout(batch, num_complexes)
        if layout.num_tokens != x.shape[0]:
            raise ValueError(f"x has {x.shape[0]} rows but the layout {layout.num_tokens}")
        if padded is None:
            padded = self.use_padded(layout)
        padded = padded and layout.index is not None
        if sparse_residual is not None:
            target, source = (t.long().to(x.device) for t in sparse_residual)
            if target.shape != source.shape or target.dim() != 1:
                raise ValueError("sparse_residual must be two (nnz,) index tensors")
            if padded:  # token indices -> rows of the padded grid
                target, source = layout.index[target], layout.index[source]
        h = x
        if padded:
            inner = layout.padded()
            h = layout.pad(x).reshape(inner.num_tokens, x.shape[1])
        for layer in self.layers:
            h = layer(h, inner if padded else layout)
            if sparse_residual is not None:
                h = h.index_add(0, target, h.index_select(0, source))
        if padded:
            h = layout.unpad(h.view(layout.num_complexes, layout.length, x.shape[1]))
        return self.norm(h) if self.norm is not None else h
