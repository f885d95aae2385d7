r"""Pre-norm N-simplicial transformer layer (attention + MLP), for sequences and complexes.

Token-level gating (§2.3, first equation, ``gating="token"``): with the router score
``s_i = X_i ω`` of every token,

.. math::

    X^{(t+1)}_i = \begin{cases} X^{(t)}_i + s_i\, f_t(X^{(t)})_i & s_i \ge \mathrm{TopK}_{j \le n}(s_j)
    \\ X^{(t)}_i & \text{otherwise,} \end{cases}

where ``f_t`` is the block's update (attention and MLP with their inner skip connections, minus
the input) computed on the selected tokens only, so the attention costs ``O(K^{N+1})`` instead of
``O(n^{N+1})`` per sequence. The multiplication by ``s_i`` trains ``ω``. The choice of token ``i``
depends on the scores of all the tokens of the sequence, later ones included, so token gating is
not causal and is rejected with ``causal=True`` (the simplex router, ``gating="simplex"``, is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.common import check_options
from topomodelx_attention.nn.simplicial.functional import MaskLike
from topomodelx_attention.nn.simplicial.masks import TupleIndex, TupleMask
from topomodelx_attention.nn.simplicial.n_simplicial_attention import (
    SIMPLICIAL_OPTIONS,
    NSimplicialAttention,
)
from topomodelx_attention.nn.simplicial.router import RouterContext

__all__ = ["GATINGS", "NSimplicialTransformerLayer"]

_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU}

#: Router gatings of :class:`NSimplicialTransformerLayer`.
GATINGS = ("simplex", "token")


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
        Dropout on the output of the attention and of the MLP, before each residual sum.
    attention_dropout : float, default=0.0
        Dropout on the attention weights.
    activation : {"gelu", "relu", "silu"}, default="gelu"
        MLP activation.
    residual : bool, default=True
        Skip connections.
    norm : bool, default=True
        Pre-LayerNorms.
    mlp : bool, default=True
        Feed-forward sub-block.
    gating : {"simplex", "token"}, default="simplex"
        Route simplices (keys of each query) or tokens (``X_i + s_i f(X)_i`` for the top-K):
        ``simplicial_options["router_k"]`` is ``K`` of the §2.3 top-K, keys per query and key axis
        (``gating="simplex"``) or tokens per sequence (``gating="token"``, the attention then
        runs without router on the selected tokens).
    simplicial_options : mapping, optional
        Options of the attention (:data:`~.n_simplicial_attention.SIMPLICIAL_OPTIONS`: ``kv_bias``,
        ``causal``, ``window``, ``router_k``, ``router``, ``router_dim``, ``rope``,
        ``logit_form``, ``rope_base``, ``scale``, ``chunk_size``, ``include_lower``,
        ``self_loops``, ``cardinality``), passed to :class:`~.NSimplicialAttention` unchanged.
    """

    def __init__(
        self,
        channels: int,
        heads: int = 1,
        order: int = 2,
        *,
        mlp_ratio: float = 2.0,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation: str = "gelu",
        residual: bool = True,
        norm: bool = True,
        mlp: bool = True,
        gating: str = "simplex",
        simplicial_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        if mlp_ratio <= 0:
            raise ValueError(f"mlp_ratio must be positive, got {mlp_ratio}")
        if gating not in GATINGS:
            raise ValueError(f"gating must be one of {GATINGS}, got {gating!r}")
        self.gating, self.token_k, self.token_scorer = gating, None, None
        if gating == "token":
            simplicial_options = check_options("simplicial_options", simplicial_options, SIMPLICIAL_OPTIONS)
            router_k = simplicial_options["router_k"]
            if router_k is None or not isinstance(router_k, int) or router_k < 1:
                raise ValueError("gating='token' needs simplicial_options['router_k'] = tokens kept (int >= 1), "
                    f"got {router_k!r}")
            if simplicial_options["causal"]:
                raise ValueError(
                    "gating='token' is not causal (the top-K of a sequence depends on later tokens); "
                    "use gating='simplex' with causal=True"
                )
            if not residual:
                raise ValueError("gating='token' updates X + s f(X): it needs residual=True")
            self.token_k = router_k  # the attention runs on the selected tokens, unrouted
            simplicial_options = {**simplicial_options, "router_k": None}
            self.token_scorer = nn.Linear(channels, 1, bias=False)  # s_i = X_i ω
        self.residual, self.use_norm, self.use_mlp = residual, norm, mlp
        self.attention = NSimplicialAttention(
            channels,
            heads,
            order,
            dropout=dropout,
            attention_dropout=attention_dropout,
            simplicial_options=simplicial_options,
        )
        self.norm1 = nn.LayerNorm(channels) if norm else nn.Identity()
        if mlp:
            hidden = max(1, round(mlp_ratio * channels))
            self.norm2 = nn.LayerNorm(channels) if norm else nn.Identity()
            self.mlp = nn.Sequential(
                nn.Linear(channels, hidden),
                _ACTIVATIONS[activation](),
                nn.Linear(hidden, channels),
                nn.Dropout(dropout),
            )
        else:
            self.norm2 = None
            self.mlp = None

    @property
    def order(self) -> int:
        """``N``, the number of key axes."""
        return self.attention.order

    def prepare_tuples(
        self,
        tuples: Tensor | TupleMask | Any,
        num_tokens: int,
        *,
        device: torch.device | str | None = None,
    ) -> TupleIndex:
        """Prepare the ``tuples`` of :meth:`forward` once (see :meth:`.NSimplicialAttention.prepare_tuples`).

        Parameters
        ----------
        tuples : torch.Tensor, TupleMask or toponetx.SimplicialComplex
            Allowed ``(N+1)``-tuples.
        num_tokens : int
            Number of tokens of the ``x`` it will be used with.
        device : torch.device or str, optional
            Device of the index tensors.

        Returns
        -------
        TupleIndex
            Tuples to pass as ``tuples`` (no data-dependent step left in :meth:`forward`).
        """
        if self.gating == "token":
            raise ValueError(
                "gating='token' attends among the selected tokens of each sequence; it takes "
                "no tuples"
            )
        return self.attention.prepare_tuples(tuples, num_tokens, device=device)

    def _block(self, x: Tensor, **attention_kwargs: Any) -> tuple[Tensor, RouterContext]:
        h, context = self.attention(self.norm1(x), return_context=True, **attention_kwargs)
        x = x + h if self.residual else h
        if self.mlp is not None:
            h = self.mlp(self.norm2(x))
            x = x + h if self.residual else h
        return x, context

    def _token_gated(self, x: Tensor, positions: Tensor | None) -> Tensor:
        squeeze = x.dim() == 2
        xb = x.unsqueeze(0) if squeeze else x
        batch, n, channels = xb.shape
        score = self.token_scorer(xb).squeeze(-1)  # (batch, n)
        keep = min(self.token_k, n)
        index = torch.topk(score.detach(), keep, dim=-1).indices.sort(-1).values  # keep order
        pos = torch.arange(n, device=x.device) if positions is None else positions
        pos = pos.expand(batch, n).gather(1, index)
        chosen = xb.gather(1, index.unsqueeze(-1).expand(batch, keep, channels))
        updated, _ = self._block(chosen, positions=pos)
        gate = score.gather(1, index).unsqueeze(-1)
        out = xb.scatter(1, index.unsqueeze(-1).expand(batch, keep, channels), chosen + gate * (updated - chosen))
        return out.squeeze(0) if squeeze else out

    def forward(
        self,
        x: Tensor,
        *,
        tuples: Tensor | TupleMask | TupleIndex | Any | None = None,
        mask: MaskLike = None,
        positions: Tensor | None = None,
        context: RouterContext | None = None,
        return_context: bool = False,
    ) -> Tensor | tuple[Tensor, RouterContext | None]:
        """Apply the block.

        Parameters
        ----------
        x : torch.Tensor, shape = (batch, n, channels) or (n, channels)
            Tokens; 2-D for the concatenated cells of a batch of complexes.
        tuples : torch.Tensor, TupleMask, TupleIndex or toponetx.SimplicialComplex, optional
            Allowed ``(N+1)``-tuples (the simplices of the complex), shape ``(n_tuples, N + 1)``,
            or their :class:`~.masks.TupleIndex` from :meth:`prepare_tuples` (the form to use
            under ``torch.compile``).
        mask : CausalMask, WindowMask, KeySelection, TupleMask or torch.Tensor, optional
            Explicit attention mask.
        positions : torch.Tensor, shape = (n,) or (batch, n), optional
            Positions for RoPE.
        context : RouterContext, optional
            Queries and keys of the previous layer (``router="paper"``, §2.3).
        return_context : bool, default=False
            Also return this layer's queries and keys for the next layer's router.

        Returns
        -------
        torch.Tensor, shape = x.shape
            Updated tokens (and the :class:`~.router.RouterContext` when ``return_context``;
            ``None`` with ``gating="token"``, whose attention sees a subset of the tokens).
        """
        if self.gating == "token":
            if tuples is not None or mask is not None:
                raise ValueError(
                    "gating='token' attends among the selected tokens of each sequence; it takes "
                    "no tuples or explicit mask"
                )
            out, own = self._token_gated(x, positions), None
        else:
            out, own = self._block(x, tuples=tuples, mask=mask, positions=positions, context=context)
        return (out, own) if return_context else out
