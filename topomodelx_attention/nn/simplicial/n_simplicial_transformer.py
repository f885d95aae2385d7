"""N-simplicial transformer: embedding, stacked layers, pooling; sequences or complexes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn._export import mark_dynamic_sizes
from topomodelx_attention.nn.common import POOLINGS, FeatureEncoder, check_inputs, segment_pool
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

    Under ``torch.compile`` a call that still has data-dependent work to do (a ``ComplexData``,
    raw tuples, or a ``batch`` without ``num_complexes``) runs that work eagerly at one graph
    break (:meth:`_resolve_while_compiling`, ``torch.compiler.disable``), which also gives every
    prepared size its own symbol: ``torch.compile(model)(batch)`` compiles one graph for every
    batch size, as for the other model families. Passing the cells as a tensor with the
    :class:`~.masks.TupleIndex` of :meth:`prepare_tuples` (built outside the compiled region),
    ``batch`` and ``num_complexes`` has no data-dependent step at all (no graph break); its
    sizes and ``num_complexes`` are then plain inputs, which torch's default ``dynamic=None``
    specialises at the first call and makes dynamic at the first change (one recompilation).

    Parameters
    ----------
    in_channels : int
        Input feature columns.
    hidden_channels : int
        Token width inside the stack.
    out_channels : int or None
        Output size of the readout. ``None``: an encoder only, without readout (no parameter
        that never gets a gradient, e.g. a backbone); use :meth:`encode`.
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
    categorical : sequence of int, optional
        Categories per input column: the inputs are then long category codes — cells ``(n,)``
        or ``(n, in_channels)``, sequences ``(batch, n, in_channels)`` — embedded by one table
        per column, summed (:class:`~topomodelx_attention.nn.common.FeatureEncoder`).
    rank : int, default=0
        Token rank when ``x`` is a ``ComplexData``.
    mlp_ratio, dropout, attention_dropout, activation, gating
        Options of every :class:`~.NSimplicialTransformerLayer` (same defaults).
    final_norm : bool, default=True
        A LayerNorm after the last layer, before the readout (usual in pre-norm transformers).
        ``False`` keeps the residual stream linear up to the readout, so a count the layers
        add (``simplicial_options={"cardinality": True}``) reaches a sum pooling unsaturated: a
        LayerNorm maps ``h + T·u`` to about ``u / |u|`` for large counts ``T``.
    simplicial_options : mapping, optional
        Options of the attention of every layer, passed down unchanged
        (:data:`~.n_simplicial_attention.SIMPLICIAL_OPTIONS` are the keys and defaults; see
        :class:`~.NSimplicialAttention`; a key it does not take raises ``ValueError``):
        ``kv_bias``, ``causal``, ``window``, ``router_k``, ``router``, ``router_dim``,
        ``rope``, ``logit_form``, ``rope_base``, ``scale``, ``chunk_size``, and for complexes
        ``include_lower`` (lower-order tuples through the key/value bias; default ``kv_bias``)
        ``self_loops`` (add ``(i, ..., i)`` tuples) and ``cardinality`` (tell each vertex how
        many tuples it has: triangle counting needs it). With ``router="paper"`` each layer's
        router scores with the previous layer's queries and keys (§2.3). ``rope=True`` (§2.4)
        is defined on sequence positions: on complexes :meth:`forward` needs explicit
        ``positions`` (the cells have no canonical order; the cell index is a labelling) and
        raises ``ValueError`` without them.
    check_inputs : bool, default=True
        Reject NaN / Inf / huge float inputs once per forward
        (:func:`~topomodelx_attention.nn.common.check_inputs`).
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int | None,
        *,
        n_layers: int = 2,
        heads: int = 1,
        order: int = 2,
        pooling: str = "mean",
        outputs: str = "complex",
        categorical: Sequence[int] | None = None,
        rank: int = 0,
        mlp_ratio: float = 2.0,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation: str = "gelu",
        gating: str = "simplex",
        final_norm: bool = True,
        simplicial_options: Mapping[str, Any] | None = None,
        check_inputs: bool = True,
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
        self.embedding = FeatureEncoder(in_channels, hidden_channels, categorical, "x")
        self.layers = nn.ModuleList(
            NSimplicialTransformerLayer(
                hidden_channels,
                heads,
                order,
                mlp_ratio=mlp_ratio,
                dropout=dropout,
                attention_dropout=attention_dropout,
                activation=activation,
                gating=gating,
                simplicial_options=simplicial_options,
            )
            for _ in range(int(n_layers))
        )
        attention = self.layers[0].attention  # the options the tuples of a complex follow
        self.include_lower = bool(attention.include_lower)
        self.self_loops, self.causal = attention.self_loops, bool(attention.causal)
        self.norm = nn.LayerNorm(hidden_channels) if final_norm else None
        self.readout = None if out_channels is None else nn.Linear(hidden_channels, out_channels)

    @property
    def categorical(self) -> bool:
        """Whether the inputs are category codes."""
        return self.embedding.cardinalities is not None

    def _embed(self, x: Tensor) -> Tensor:
        """Embed cells ``(n, k)`` / ``(n,)`` or sequences ``(batch, n, k)`` (any float dtype)."""
        if self.categorical and x.is_floating_point():
            raise TypeError("categorical is set: x must hold long category codes")
        if not self.categorical and not x.is_floating_point():
            raise TypeError(
                f"x has dtype {x.dtype}; pass float features or set categorical for codes"
            )
        if x.dim() == 3:  # sequences: every token embedded alike
            h = self.embedding(x.reshape(-1, x.shape[-1]))
            return h.view(*x.shape[:2], h.shape[-1])
        return self.embedding(x)

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

    def _resolve(
        self,
        x: Tensor | Any,
        tuples: Tensor | TupleMask | TupleIndex | Any | None,
        batch: Tensor | None,
        positions: Tensor | None,
        num_complexes: int | None,
    ) -> tuple[Tensor, TupleIndex | None, Tensor | None, int | None]:
        """Cells / sequences, prepared tuples, batch and complex count of the call (checked)."""
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
        cells = x.dim() <= 2 if self.categorical else x.dim() == 2
        if cells and tuples is None:
            raise ValueError(
                "x of shape (n_cells, channels) is a set of cells: pass tuples (or a "
                "ComplexData); give sequences as (batch, n, channels)"
            )
        if not cells and tuples is not None:
            raise ValueError("tuples are for cells given as (n_cells, channels), not sequences")
        if x.dim() not in ((1, 2, 3) if self.categorical else (2, 3)):
            raise ValueError(f"x has an unsupported shape {tuple(x.shape)}")
        if tuples is not None and not isinstance(tuples, TupleIndex):
            tuples = self.prepare_tuples(x, tuples)  # once for all the layers
        return x, tuples, batch, num_complexes

    @staticmethod
    def _needs_preparing(
        x: Tensor | Any, tuples: Any, batch: Tensor | None, num_complexes: int | None
    ) -> bool:
        """Whether a call has data-dependent work left (tuples to prepare, complexes to count)."""
        if not isinstance(x, Tensor):
            return True
        if tuples is None:  # sequences
            return False
        return not isinstance(tuples, TupleIndex) or (batch is not None and num_complexes is None)

    @torch.compiler.disable
    def _resolve_while_compiling(self, *call: Any) -> tuple[Tensor, TupleIndex | None, Tensor | None, Tensor | None]:
        """Run the eager part of a compiled call: :meth:`_resolve` and the number of complexes.

        ``torch.compile`` never traces this method (``torch.compiler.disable``): the data-dependent
        work (the tuples of a ``ComplexData``, their :class:`~.masks.TupleIndex`, the count of
        complexes of a ``batch``) runs here, and every size of the returned tensors gets its own
        symbol (:func:`~topomodelx_attention.nn._export.mark_dynamic_sizes`), so that no later
        batch size recompiles the graph that follows.

        Parameters
        ----------
        *call
            ``x, tuples, batch, positions, num_complexes``, as in :meth:`forward`.

        Returns
        -------
        x : torch.Tensor
            The cells.
        tuples : TupleIndex or None
            The prepared tuples.
        batch : torch.Tensor or None
            Complex index of every cell.
        counts : torch.Tensor or None, shape = (num_complexes,)
            Cells per complex (``None`` without ``batch`` and ``num_complexes``): its length
            carries the number of complexes into the graph as a size, not as a Python int that
            the graph would specialise on.
        """
        x, tuples, batch, num_complexes = self._resolve(*call)
        counts = None
        if batch is not None or num_complexes is not None:
            index = batch
            if index is None:  # every cell in complex 0
                index = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
            top = int(index.max()) + 1 if index.numel() else 0
            if num_complexes is None:
                num_complexes = max(top, 1)
            elif top > num_complexes:
                raise ValueError(
                    f"batch indexes complex {top - 1} but num_complexes={num_complexes}"
                )
            counts = torch.bincount(index, minlength=num_complexes)
        return mark_dynamic_sizes((x, tuples, batch, counts))

    def _encode(
        self, x: Tensor, tuples: TupleIndex | None, mask: MaskLike, positions: Tensor | None
    ) -> Tensor:
        h = self._embed(x)
        context = None  # the previous layer's queries and keys (router="paper", §2.3)
        for layer in self.layers:
            h, context = layer(
                h, tuples=tuples, mask=mask, positions=positions, context=context,
                return_context=True,
            )
        return h if self.norm is None else self.norm(h)

    def encode(
        self,
        x: Tensor | Any,
        tuples: Tensor | TupleMask | TupleIndex | Any | None = None,
        *,
        mask: MaskLike = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """Token features after the last layer and the final LayerNorm.

        Parameters
        ----------
        x, tuples, mask, positions
            As in :meth:`forward`.

        Returns
        -------
        torch.Tensor
            ``(batch, n, hidden_channels)`` for sequences, ``(n_cells, hidden_channels)`` for
            cells (the rank-``rank`` cells of a ``ComplexData``).
        """
        if torch.compiler.is_compiling() and self._needs_preparing(x, tuples, None, None):
            x, tuples, _, _ = self._resolve_while_compiling(x, tuples, None, positions, None)
        else:
            x, tuples, _, _ = self._resolve(x, tuples, None, positions, None)
        return self._encode(x, tuples, mask, positions)

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
        if self.readout is None:
            raise ValueError(
                "this NSimplicialTransformer was built with out_channels=None (an encoder "
                "without readout): call encode(x), or build it with out_channels"
            )
        if torch.compiler.is_compiling() and self._needs_preparing(x, tuples, batch, num_complexes):
            # one graph break: the data-dependent part runs eagerly; the number of complexes
            # comes back as the length of a tensor (a size of the graph, not a constant)
            x, tuples, batch, counts = self._resolve_while_compiling(
                x, tuples, batch, positions, num_complexes
            )
            num_complexes = None if counts is None else counts.shape[0]
        else:
            x, tuples, batch, num_complexes = self._resolve(
                x, tuples, batch, positions, num_complexes
            )
        h = self._encode(x, tuples, mask, positions)
        if self.outputs == "tokens":
            return self.readout(h)
        return self.readout(self._pool(h, batch, num_complexes))
