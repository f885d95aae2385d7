"""N-simplicial transformer: embedding, stacked layers, pooling; sequences or complexes."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.common import POOLINGS, check_inputs, segment_pool
from topomodelx_attention.nn.simplicial.functional import MaskLike
from topomodelx_attention.nn.simplicial.masks import (
    TupleIndex,
    TupleMask,
    complex_data_to_tuples,
    get_key,
)
from topomodelx_attention.nn.simplicial.n_simplicial_transformer_layer import (
    NSimplicialTransformerLayer,
)

__all__ = ["OUTPUTS", "NSimplicialTransformer"]

#: Predictions :class:`NSimplicialTransformer` can return.
OUTPUTS = ("complex", "tokens")


class NSimplicialTransformer(nn.Module):
    """Stack of :class:`~.NSimplicialTransformerLayer` with an input embedding and a readout.

    Two input modes:

    * sequences: ``x`` of shape ``(batch, n, in_channels)`` (dense, causal, windowed or routed
      attention as configured); one output row per sequence.
    * complexes: ``x`` of shape ``(n_cells, in_channels)`` with ``tuples`` (the allowed
      ``(N+1)``-tuples, e.g. :func:`~.masks.simplices_to_tuples`, or a
      ``toponetx.SimplicialComplex``) and ``batch``; or a (batched) ``ComplexData`` as ``x``:
      the tokens are its rank-``rank`` cells (``x_{rank}``, ``batch_{rank}``) and the tuples come
      from its incidences (:func:`~.masks.complex_data_to_tuples`). One output row per complex
      (``ComplexData.num_complexes``), complexes without rank-``rank`` cells included (their
      pooled vector is zero).

    Under ``torch.compile`` pass the cells as a tensor with the :class:`~.masks.TupleIndex` of
    :meth:`prepare_tuples` (built outside the compiled region), ``batch`` and
    ``num_complexes``: the forward then has no data-dependent step (no graph break).

    Parameters
    ----------
    in_channels : int
        Input feature size (or number of categories per column when ``num_categories`` is set).
    hidden_channels : int
        Token width inside the stack.
    out_channels : int
        Output size of the head.
    n_layers : int, default=2
        Number of layers.
    heads : int, default=1
        Attention heads.
    order : int, default=2
        ``N``.
    pooling : {"sum", "mean"}, default="mean"
        Tokens → one vector per sequence / complex.
    outputs : {"complex", "tokens"}, default="complex"
        One row per sequence / complex, or per-token outputs ``(..., n, out_channels)``.
    num_categories : int, optional
        If set, inputs are long category codes with a trailing column axis — cells ``(n,)`` or
        ``(n, k)``, sequences ``(batch, n, k)`` — embedded by a shared
        ``nn.Embedding(num_categories, hidden_channels)`` and summed over the ``k`` columns.
    rank : int, default=0
        Token rank when ``x`` is a ``ComplexData``.
    include_lower : bool, optional
        Lower-order tuples of a complex (through the key/value bias); default ``kv_bias``.
    self_loops : bool, default=False
        Add ``(i, ..., i)`` tuples on complexes.
    check_inputs : bool, default=True
        Reject NaN / Inf / huge float inputs once per forward
        (:func:`~topomodelx_attention.nn.common.check_inputs`).
    **layer_kwargs
        Forwarded to every :class:`~.NSimplicialTransformerLayer` (``mlp_ratio``, ``dropout``,
        ``attention_dropout``, ``kv_bias``, ``causal``, ``window``, ``router_k``, ``router``,
        ``gating``, ``rope``, ``chunk_size``, ...). With ``router="paper"`` each layer's router
        scores with the previous layer's queries and keys (§2.3). ``rope=True`` (§2.4) is
        defined on sequence positions: on complexes :meth:`forward` needs explicit
        ``positions`` (the cells have no canonical order; the cell index is a labelling) and
        raises ``ValueError`` without them.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        *,
        n_layers: int = 2,
        heads: int = 1,
        order: int = 2,
        pooling: str = "mean",
        outputs: str = "complex",
        num_categories: int | None = None,
        rank: int = 0,
        include_lower: bool | None = None,
        self_loops: bool = False,
        check_inputs: bool = True,
        **layer_kwargs: Any,
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if outputs not in OUTPUTS:
            raise ValueError(f"outputs must be one of {OUTPUTS}, got {outputs!r}")
        if int(n_layers) < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        self.order, self.pooling, self.outputs, self.rank = order, pooling, outputs, rank
        self.check_inputs = bool(check_inputs)
        self.include_lower = (
            bool(layer_kwargs.get("kv_bias", False)) if include_lower is None else include_lower
        )
        self.self_loops = self_loops
        self.causal = bool(layer_kwargs.get("causal", False))
        if num_categories is not None:
            self.embedding: nn.Module = nn.Embedding(num_categories, hidden_channels)
        else:
            self.embedding = nn.Linear(in_channels, hidden_channels)
        self.layers = nn.ModuleList(
            NSimplicialTransformerLayer(
                hidden_channels,
                heads,
                order,
                include_lower=self.include_lower,
                self_loops=self_loops,
                **layer_kwargs,
            )
            for _ in range(int(n_layers))
        )
        self.norm = nn.LayerNorm(hidden_channels)
        self.head = nn.Linear(hidden_channels, out_channels)

    def _embed(self, x: Tensor) -> Tensor:
        if isinstance(self.embedding, nn.Embedding):
            if x.dtype != torch.long:
                raise TypeError("num_categories is set: x must hold long category codes")
            h = self.embedding(x)
            return h.sum(-2) if x.dim() >= 2 else h
        if not torch.is_floating_point(x):
            raise TypeError(
                f"x has dtype {x.dtype}; pass float features or set num_categories for codes"
            )
        return self.embedding(x.to(self.embedding.weight.dtype))  # e.g. float64 data

    def _pool(self, h: Tensor, batch: Tensor | None, num_complexes: int | None) -> Tensor:
        """One row per sequence (3-D ``h``) or per complex (2-D ``h`` with ``batch``)."""
        if h.dim() == 3:
            return h.sum(1) if self.pooling == "sum" else h.mean(1)
        if batch is None:
            batch = torch.zeros(h.shape[0], dtype=torch.long, device=h.device)
            num_complexes = 1 if num_complexes is None else num_complexes
        if num_complexes is None:  # data-dependent: pass num_complexes under torch.compile
            num_complexes = max(int(batch.max()) + 1 if batch.numel() else 0, 1)
        elif not torch.compiler.is_compiling() and batch.numel():
            top = int(batch.max()) + 1
            if top > num_complexes:
                raise ValueError(
                    f"batch indexes complex {top - 1} but num_complexes={num_complexes}"
                )
        return segment_pool(h, batch.to(h.device), num_complexes, self.pooling)

    def _cells(self, x: Tensor | Any) -> tuple[Tensor, Any | None]:
        """Return ``(x, None)`` for a tensor, ``(data.x_{rank}, data)`` for a ``ComplexData``."""
        if isinstance(x, Tensor):
            return x, None
        cells = get_key(x, f"x_{self.rank}")
        if not isinstance(cells, Tensor):
            raise TypeError(
                f"x must be a tensor or a ComplexData with key x_{self.rank}, got "
                f"{type(x).__name__}"
            )
        return cells, x

    def prepare_tuples(
        self,
        x: Tensor | Any,
        tuples: Tensor | TupleMask | Any | None = None,
        *,
        device: torch.device | str | None = None,
    ) -> TupleIndex:
        """Prepare the tuples of :meth:`forward` once, outside ``torch.compile``.

        Parameters
        ----------
        x : torch.Tensor or ComplexData
            ``(n_cells, in_channels)`` cells (only their number is used), or a (batched)
            ``ComplexData`` whose tuples come from its incidences when ``tuples`` is ``None``.
        tuples : torch.Tensor, TupleMask or toponetx.SimplicialComplex, optional
            Allowed tuples (required for a tensor ``x``).
        device : torch.device or str, optional
            Device of the index tensors; default that of the cells.

        Returns
        -------
        TupleIndex
            Pass it as ``tuples`` to :meth:`forward` (with the cells as a tensor); every layer
            uses it as is.
        """
        x, data = self._cells(x)
        if data is not None and tuples is None:
            tuples = complex_data_to_tuples(
                data, self.order, self.rank, self.include_lower, self.self_loops
            )
        if tuples is None:
            raise ValueError("pass the tuples of the cells (or x as a ComplexData)")
        device = x.device if device is None else device
        return self.layers[0].prepare_tuples(tuples, x.shape[0], device=device)

    def forward(
        self,
        x: Tensor | Any,
        tuples: Tensor | TupleMask | TupleIndex | Any | None = None,
        batch: Tensor | None = None,
        *,
        mask: MaskLike = None,
        positions: Tensor | None = None,
        num_complexes: int | None = None,
    ) -> Tensor:
        """Run the transformer.

        Parameters
        ----------
        x : torch.Tensor or ComplexData
            ``(batch, n, in_channels)`` sequences, ``(n_cells, in_channels)`` cells (with
            ``tuples``), or a (batched) ``ComplexData``.
        tuples : torch.Tensor, TupleMask, TupleIndex or toponetx.SimplicialComplex, optional
            Allowed tuples for 2-D ``x`` (shape ``(n_tuples, N + 1)``), or their
            :class:`~.masks.TupleIndex` from :meth:`prepare_tuples`; computed from the
            incidences when ``x`` is a ``ComplexData``.
        batch : torch.Tensor, shape = (n_cells,), optional
            Complex index of every cell (2-D ``x``); read from ``batch_{rank}`` for a
            ``ComplexData``; default one complex.
        mask : optional
            Explicit mask for the sequence mode (see :class:`~.NSimplicialAttention`).
        positions : torch.Tensor, optional
            Token positions for RoPE: ``(n,)`` or ``(batch, n)`` for sequences (default
            ``0..n-1``); ``(n_cells,)`` on complexes, where they are required with
            ``rope=True`` (an order the data defines, permuted together with the cells).
        num_complexes : int, optional
            Number of complexes of a 2-D ``x``; default ``data.num_complexes`` for a
            ``ComplexData``, else ``batch.max() + 1`` (at least 1).

        Returns
        -------
        torch.Tensor
            ``(num_sequences_or_complexes, out_channels)``, or per-token
            ``(..., n, out_channels)`` with ``outputs="tokens"``.
        """
        x, data = self._cells(x)
        if data is not None:
            if tuples is None:
                tuples = self.prepare_tuples(data)
            if batch is None:
                batch = get_key(data, f"batch_{self.rank}")
            if num_complexes is None and hasattr(data, "num_complexes"):
                num_complexes = int(data.num_complexes)
        if self.check_inputs:
            check_inputs({f"x_{self.rank}" if tuples is not None else "x": x, "positions": positions})
        categorical = isinstance(self.embedding, nn.Embedding)
        cells = x.dim() <= 2 if categorical else x.dim() == 2
        if cells and tuples is None:
            raise ValueError(
                "x of shape (n_cells, channels) is a set of cells: pass tuples (or a "
                "ComplexData); give sequences as (batch, n, channels)"
            )
        if not cells and tuples is not None:
            raise ValueError("tuples are for cells given as (n_cells, channels), not sequences")
        if x.dim() not in ((1, 2, 3) if categorical else (2, 3)):
            raise ValueError(f"x has an unsupported shape {tuple(x.shape)}")
        h = self._embed(x)
        if tuples is not None and not isinstance(tuples, TupleIndex):
            tuples = self.prepare_tuples(x, tuples)  # once for all the layers
        context = None
        for layer in self.layers:
            h, context = layer(
                h, tuples=tuples, mask=mask, positions=positions, context=context,
                return_context=True,
            )
        h = self.norm(h)
        if self.outputs == "tokens":
            return self.head(h)
        return self.head(self._pool(h, batch, num_complexes))
