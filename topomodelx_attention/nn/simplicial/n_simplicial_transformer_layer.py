"""Pre-norm N-simplicial transformer layer (attention + MLP), for sequences and complexes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from topomodelx_attention.nn.simplicial.functional import MaskLike
from topomodelx_attention.nn.simplicial.masks import TupleMask
from topomodelx_attention.nn.simplicial.n_simplicial_attention import NSimplicialAttention

__all__ = ["NSimplicialTransformerLayer"]

_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU}


class NSimplicialTransformerLayer(nn.Module):
    """Pre-norm transformer block around :class:`~.NSimplicialAttention`.

    ``X ← X + Dropout(Attn(LN(X)))``, then ``X ← X + Dropout(MLP(LN(X)))``. The paper's layer
    equation (§2.2) has the residual ``X + Σ A ⊙ V``; §3.2 shows that without the skip
    connection (and normalisation) stacked layers over-smooth, so both can be switched off
    (``residual=False``, ``norm=False``, ``mlp=False``) to reproduce pure stacked attention in
    :mod:`~topomodelx_attention.nn.simplicial.diagnostics`.

    Parameters
    ----------
    channels : int
        Token channels.
    heads : int, default=1
        Attention heads.
    order : int, default=2
        ``N``.
    mlp_ratio : float, default=2.0
        Hidden width of the MLP as a multiple of ``channels``.
    dropout : float, default=0.0
        Dropout after the attention and after the MLP (and inside the MLP).
    activation : {"gelu", "relu", "silu"}, default="gelu"
        MLP activation.
    residual : bool, default=True
        Skip connections.
    norm : bool, default=True
        Pre-LayerNorms.
    mlp : bool, default=True
        Feed-forward sub-block.
    kv_bias, causal, window, router_k, router_dim, rope, logit_form, rope_base, scale, chunk_size,
    include_lower, self_loops
        Forwarded to :class:`~.NSimplicialAttention`.
    """

    def __init__(
        self,
        channels: int,
        heads: int = 1,
        order: int = 2,
        *,
        mlp_ratio: float = 2.0,
        dropout: float = 0.0,
        activation: str = "gelu",
        residual: bool = True,
        norm: bool = True,
        mlp: bool = True,
        kv_bias: bool = False,
        causal: bool = False,
        window: int | Sequence[int] | None = None,
        router_k: int | Sequence[int] | None = None,
        router_dim: int = 16,
        rope: bool = False,
        logit_form: str | None = None,
        rope_base: float = 10000.0,
        scale: float | None = None,
        chunk_size: int | tuple[int, int] | None = None,
        include_lower: bool | None = None,
        self_loops: bool = False,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        if mlp_ratio <= 0:
            raise ValueError(f"mlp_ratio must be positive, got {mlp_ratio}")
        self.residual, self.use_norm, self.use_mlp = residual, norm, mlp
        self.attention = NSimplicialAttention(
            channels,
            heads,
            order,
            dropout=0.0,
            kv_bias=kv_bias,
            causal=causal,
            window=window,
            router_k=router_k,
            router_dim=router_dim,
            rope=rope,
            logit_form=logit_form,
            rope_base=rope_base,
            scale=scale,
            chunk_size=chunk_size,
            include_lower=include_lower,
            self_loops=self_loops,
        )
        self.norm1 = nn.LayerNorm(channels) if norm else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        if mlp:
            hidden = max(1, round(mlp_ratio * channels))
            self.norm2 = nn.LayerNorm(channels) if norm else nn.Identity()
            self.mlp = nn.Sequential(
                nn.Linear(channels, hidden),
                _ACTIVATIONS[activation](),
                nn.Dropout(dropout),
                nn.Linear(hidden, channels),
            )
        else:
            self.norm2 = None
            self.mlp = None

    @property
    def order(self) -> int:
        """``N``, the number of key axes."""
        return self.attention.order

    def forward(
        self,
        x: Tensor,
        *,
        tuples: Tensor | TupleMask | Any | None = None,
        mask: MaskLike = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """Apply the block.

        Parameters
        ----------
        x : torch.Tensor, shape = (batch, n, channels) or (n, channels)
            Tokens; 2-D for the concatenated cells of a batch of complexes.
        tuples : torch.Tensor, TupleMask or toponetx.SimplicialComplex, optional
            Allowed ``(N+1)``-tuples (the simplices of the complex), shape ``(n_tuples, N + 1)``.
        mask : CausalMask, WindowMask, KeySelection, TupleMask or torch.Tensor, optional
            Explicit attention mask.
        positions : torch.Tensor, shape = (n,) or (batch, n), optional
            Positions for RoPE.

        Returns
        -------
        torch.Tensor, shape = x.shape
            Updated tokens.
        """
        h = self.attention(self.norm1(x), tuples=tuples, mask=mask, positions=positions)
        h = self.dropout(h)
        x = x + h if self.residual else h
        if self.mlp is not None:
            h = self.dropout(self.mlp(self.norm2(x)))
            x = x + h if self.residual else h
        return x
