"""TopoBench backbones: tensors in, a tuple of tensors out (TopoBench's backbone contract).

Every backbone takes the tensors a TopoBench batch holds, never the batch itself::

    h_0, ..., h_R = backbone(x, neighborhoods, batch)

* ``x`` — the tuple ``(x_0, ..., x_R)`` of encoded features (TopoBench's feature encoder gives
  every rank the same width);
* ``neighborhoods`` — a dict of the sparse neighbourhood matrices named by
  ``backbone.neighborhood_keys`` (TopoBench keys: ``incidence_r``, ``adjacency_r``, ...; signs
  and values are ignored, only the 0/1 pattern is used);
* ``batch`` — the tuple ``(batch_0, ..., batch_R)`` of complex indices (``None``: one complex);

and returns the tuple ``(h_0, ..., h_R)`` of cell embeddings, ``h_r`` of shape
``(n_r, out_channels)``. This is the form of TopoBench's own cell / simplicial backbones
(e.g. ``SCCNN(x_all, laplacian_all, incidence_all)``), so its ``NNModuleAutoTest`` accepts them.
The models themselves are this package's (one source of the math): a backbone only views the
tensors as a :class:`~topomodelx_attention.data.ComplexData` (:func:`complex_from_tensors`) and
calls the model's cell-level API. :func:`~topomodelx_attention.harness.topobench.wrapper.backbone_inputs`
maps a TopoBench batch to these arguments (what the TopoBench wrappers call).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.data import ComplexData, sparsity_pattern

__all__ = [
    "CellularTransformerBackbone",
    "NSimplicialBackbone",
    "OrderKTokenGTBackbone",
    "complex_from_tensors",
]

#: Neighbourhoods of one rank: ``(n_r, n_r)`` matrices.
RANK_NEIGHBORHOODS = (
    "adjacency", "coadjacency", "down_laplacian", "up_laplacian", "hodge_laplacian",
)
_KEY = re.compile(r"^([a-z_]+)_(\d+)$")


def _expected_shape(key: str, counts: Sequence[int]) -> tuple[int, int] | None:
    """Shape a TopoBench neighbourhood key must have (``None``: not checked)."""
    match = _KEY.match(key)
    if match is None:
        return None
    name, rank = match.group(1), int(match.group(2))
    if rank >= len(counts):
        return None
    if name == "incidence":  # incidence_0 has no fixed convention (TopoBench: (1, n_0))
        return (counts[rank - 1], counts[rank]) if rank else None
    if name in RANK_NEIGHBORHOODS:
        return (counts[rank], counts[rank])
    return None


def complex_from_tensors(
    x: Sequence[Tensor],
    neighborhoods: Mapping[str, Tensor],
    batch: Sequence[Tensor] | None = None,
    pe: Sequence[Tensor | None] | None = None,
) -> ComplexData:
    """View the tensors of a TopoBench batch as a batched :class:`ComplexData`.

    Parameters
    ----------
    x : sequence of torch.Tensor
        ``(x_0, ..., x_R)``, ``x_r`` of shape ``(n_r, d_r)``.
    neighborhoods : mapping of str to torch.Tensor
        Neighbourhoods by TopoBench key (``"incidence_1"``, ``"adjacency_0"``, ...), sparse or
        dense; stored as coalesced 0/1 COO patterns (TopoBench's signs do not matter).
        ``incidence_r`` must be ``(n_{r-1}, n_r)``, a rank neighbourhood ``(n_r, n_r)``.
    batch : sequence of torch.Tensor, optional
        ``(batch_0, ..., batch_R)``, ``batch_r`` of shape ``(n_r,)``: complex of every cell.
        Default: every cell belongs to one complex.
    pe : sequence of (torch.Tensor or None), optional
        ``(pe_0, ..., pe_R)`` positional encodings, ``pe_r`` of shape ``(n_r, pe_channels)``.

    Returns
    -------
    ComplexData
        ``x_r``, ``batch_r``, the neighbourhoods, ``pe_r`` and ``shape``
        ``(num_complexes, R + 1)`` (``num_complexes`` = largest complex index + 1).

    Raises
    ------
    TypeError
        When ``x``, ``batch`` or ``pe`` is not a sequence of tensors, or ``neighborhoods`` not a
        mapping of tensors.
    ValueError
        When a tensor has the wrong number of rows or dimensions (the message names it).
    """
    if isinstance(x, Tensor) or not isinstance(x, Sequence) or not x:
        raise TypeError(
            "x must be the tuple (x_0, ..., x_R) of feature tensors, one per rank, got "
            f"{type(x).__name__}"
        )
    for rank, xr in enumerate(x):
        if not isinstance(xr, Tensor) or xr.dim() != 2:
            shape = tuple(xr.shape) if isinstance(xr, Tensor) else type(xr).__name__
            raise ValueError(f"x_{rank} must be a 2-D (n_{rank}, channels) tensor, got {shape}")
    counts = [int(xr.shape[0]) for xr in x]
    device = x[0].device
    if batch is None:
        batch = [torch.zeros(n, dtype=torch.long, device=device) for n in counts]
    elif isinstance(batch, Tensor) or not isinstance(batch, Sequence):
        raise TypeError(
            f"batch must be the tuple (batch_0, ..., batch_R) or None, got {type(batch).__name__}"
        )
    if len(batch) != len(x):
        raise ValueError(f"batch has {len(batch)} vectors but x has {len(x)} ranks: give one batch_r per x_r")
    for rank, (index, n) in enumerate(zip(batch, counts)):
        if not isinstance(index, Tensor) or index.dim() != 1 or index.numel() != n:
            shape = tuple(index.shape) if isinstance(index, Tensor) else type(index).__name__
            raise ValueError(f"batch_{rank} must be a ({n},) index tensor (one entry per row of x_{rank}), got {shape}")
        if index.numel() and int(index.min()) < 0:
            raise ValueError(f"batch_{rank} has negative complex indices")
    if not isinstance(neighborhoods, Mapping):
        raise TypeError(
            f"neighborhoods must be a dict of sparse matrices by key, got {type(neighborhoods).__name__}"
        )
    data = ComplexData()
    batch = [index.long() for index in batch]
    sizes = [int(index.max()) + 1 for index in batch if index.numel()]
    num = max(sizes, default=1)
    for rank, (xr, index) in enumerate(zip(x, batch)):
        data[f"x_{rank}"] = xr
        data[f"batch_{rank}"] = index
    if pe is not None:
        if isinstance(pe, Tensor) or not isinstance(pe, Sequence) or len(pe) != len(x):
            raise TypeError(f"pe must be a tuple (pe_0, ..., pe_R) of {len(x)} entries (tensor or None)")
        for rank, value in enumerate(pe):
            if value is None:
                continue
            if not isinstance(value, Tensor) or value.dim() != 2 or value.shape[0] != counts[rank]:
                shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
                raise ValueError(f"pe_{rank} must be a ({counts[rank]}, pe_channels) tensor, got {shape}")
            data[f"pe_{rank}"] = value
    for key, matrix in neighborhoods.items():
        # 0/1 pattern: TopoBench's neighbourhoods may carry signs or weights
        pattern = sparsity_pattern(matrix, f"neighborhoods[{key!r}]", torch.float32)
        expected = _expected_shape(key, counts)
        if expected is not None and tuple(pattern.shape) != expected:
            raise ValueError(
                f"neighborhoods[{key!r}] has shape {tuple(pattern.shape)} but the cell counts "
                f"{counts} need {expected}"
            )
        data[key] = pattern
    data.num_nodes = counts[0]
    data.shape = torch.stack([torch.bincount(index, minlength=num) for index in batch], dim=1)
    return data


def _max_rank(max_rank: int | None, num_cell_dimensions: int | None) -> int:
    """Highest rank of a backbone from ``max_rank`` or TopoBench's ``num_cell_dimensions``."""
    if max_rank is None:
        max_rank = 2 if num_cell_dimensions is None else int(num_cell_dimensions) - 1
    elif num_cell_dimensions is not None and int(max_rank) != int(num_cell_dimensions) - 1:
        raise ValueError(
            f"max_rank={max_rank} disagrees with num_cell_dimensions={num_cell_dimensions}; "
            "give one of them"
        )
    if int(max_rank) < 0:
        raise ValueError(f"max_rank must be at least 0, got {max_rank}")
    return int(max_rank)


def _widths(in_channels: int | Sequence[int], max_rank: int) -> list[int]:
    """Per-rank input widths from one width (TopoBench's encoder) or a list."""
    if isinstance(in_channels, Sequence) and not isinstance(in_channels, str):
        widths = [int(c) for c in in_channels]
        if len(widths) != max_rank + 1:
            raise ValueError(
                f"in_channels lists {len(widths)} widths for the {max_rank + 1} ranks 0..{max_rank}"
            )
        return widths
    return [int(in_channels)] * (max_rank + 1)


def _check_ranks(x: Sequence[Tensor], max_rank: int, name: str) -> None:
    if isinstance(x, Sequence) and not isinstance(x, Tensor) and len(x) != max_rank + 1:
        raise ValueError(
            f"{name} handles ranks 0..{max_rank} but got {len(x)} feature tensors; pass "
            f"(x_0, ..., x_{max_rank}) (backbone_inputs pads the ranks a lifting did not produce)"
        )


class TensorBackbone(nn.Module):
    """Base of the backbones: cell features and neighbourhood tensors in, cell embeddings out.

    :meth:`forward` checks the ranks (and the positional encodings), builds one
    :class:`~topomodelx_attention.data.ComplexData` of the tensors (:func:`complex_from_tensors`)
    and returns :meth:`encode_cells` of it.
    """

    max_rank: int
    out_channels: int
    pe_channels: int | None = None

    def __init__(
        self, max_rank: int | None, num_cell_dimensions: int | None, kwargs: Mapping[str, Any]
    ) -> None:
        """Check the options every backbone shares and set :attr:`max_rank`.

        Parameters
        ----------
        max_rank, num_cell_dimensions : int, optional
            The subclass's options (see :func:`_max_rank`).
        kwargs : mapping
            The subclass's other keyword options, passed to its model: ``out_channels`` is
            refused (the backbone returns cell embeddings, TopoBench's readout predicts).
        """
        super().__init__()
        if "out_channels" in kwargs:
            raise TypeError(
                f"{type(self).__name__} takes no out_channels: it returns cell embeddings and "
                "TopoBench's readout predicts (set the readout's out_channels instead)"
            )
        self.max_rank = _max_rank(max_rank, num_cell_dimensions)

    @property
    def neighborhood_keys(self) -> list[str]:
        """Neighbourhood keys :meth:`forward` reads (the incidences ``incidence_1..R``)."""
        return [f"incidence_{r}" for r in range(1, self.max_rank + 1)]

    def encode_cells(self, data: ComplexData, x: Sequence[Tensor]) -> tuple[Tensor, ...]:
        """Return the cell embeddings of the complex built from ``x`` (see :meth:`forward`)."""
        raise NotImplementedError

    def forward(
        self,
        x: Sequence[Tensor],
        neighborhoods: Mapping[str, Tensor],
        batch: Sequence[Tensor] | None = None,
        pe: Sequence[Tensor | None] | None = None,
    ) -> tuple[Tensor, ...]:
        """Cell embeddings of every rank.

        Parameters
        ----------
        x : sequence of torch.Tensor
            ``(x_0, ..., x_R)``, ``x_r`` of shape ``(n_r, d_r)``.
        neighborhoods : mapping of str to torch.Tensor
            The sparse matrices of :attr:`neighborhood_keys`.
        batch : sequence of torch.Tensor, optional
            ``(batch_0, ..., batch_R)`` (default: one complex).
        pe : sequence of (torch.Tensor or None), optional
            ``(pe_0, ..., pe_R)``: required by a backbone built with ``pe_channels``, refused
            by the others.

        Returns
        -------
        tuple of torch.Tensor
            ``h_r`` of shape ``(n_r, out_channels)``, ``r = 0..max_rank``.
        """
        name = type(self).__name__
        _check_ranks(x, self.max_rank, name)
        if self.pe_channels is not None and pe is None:
            raise ValueError(
                f"{name} was built with pe_channels={self.pe_channels}: pass pe "
                "(pe_0, ..., pe_R), e.g. from a positional-encoding transform"
            )
        if self.pe_channels is None and pe is not None and any(p is not None for p in pe):
            raise ValueError(f"{name} was built without pe_channels: it takes no pe")
        return self.encode_cells(complex_from_tensors(x, neighborhoods, batch, pe), x)


def _pe_options(pe_channels: int | None, kwargs: dict[str, Any]) -> Any:
    """``pe_options`` of the transformer: ``kwargs``' (popped) with ``"channels"`` = the backbone's ``pe_channels``."""
    pe = kwargs.pop("pe_options", None)
    if pe is not None and not isinstance(pe, Mapping):
        return pe  # the transformer's own error names it
    if pe is not None and "channels" in pe:
        raise ValueError(
            "give the width of pe_r once, as the backbone's pe_channels "
            "(model.backbone.pe_channels), not as pe_options['channels']"
        )
    return {**(pe or {}), "channels": pe_channels}


class CellularTransformerBackbone(TensorBackbone):
    """Cellular Transformer layers on encoded cell features (TopoBench backbone contract).

    Parameters
    ----------
    in_channels : int or sequence of int
        Width of every ``x_r`` (TopoBench's feature encoder output), or one width per rank.
    hidden_channels : int
        Transformer width (the width of every returned ``h_r``).
    n_layers : int, default=2
        Layers.
    heads : int, default=4
        Attention heads.
    max_rank : int, optional
        Highest rank. Default: ``num_cell_dimensions - 1`` when given (TopoBench's
        ``${infer_num_cell_dimensions:...}``), else 2. Ranks without cells are legal.
    num_cell_dimensions : int, optional
        TopoBench's count of cell dimensions (ranks ``0..num_cell_dimensions - 1``).
    pe_channels : int, optional
        Width of the positional encodings ``pe_r`` (then :meth:`forward` needs ``pe``): the
        transformer's ``pe_options["channels"]``.
    **kwargs
        Other :class:`~topomodelx_attention.nn.cell.CellularTransformer` options (``attention``,
        ``kind``, ``tensor_diagram``, ``dropout``, ``attention_dropout``, ...). The transformer
        is built without readout (``out_channels=None``): every parameter is used by
        :meth:`forward` (no unused parameters under DDP).
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        hidden_channels: int,
        *,
        n_layers: int = 2,
        heads: int = 4,
        max_rank: int | None = None,
        num_cell_dimensions: int | None = None,
        pe_channels: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_rank, num_cell_dimensions, kwargs)
        from topomodelx_attention.nn.cell import CellularTransformer

        self.out_channels = int(hidden_channels)
        self.pe_channels = None if pe_channels is None else int(pe_channels)
        self.transformer = CellularTransformer(
            _widths(in_channels, self.max_rank), hidden_channels, None,
            n_layers=n_layers, heads=heads, pe_options=_pe_options(self.pe_channels, kwargs), **kwargs,
        )

    @property
    def neighborhood_keys(self) -> list[str]:
        """Neighbourhood keys :meth:`forward` reads (the tensor diagram's)."""
        return self.transformer.neighborhood_keys

    def encode_cells(self, data: ComplexData, x: Sequence[Tensor]) -> tuple[Tensor, ...]:  # noqa: D102
        return tuple(self.transformer.encode(data))


class NSimplicialBackbone(TensorBackbone):
    """N-simplicial transformer layers on encoded cell features (TopoBench backbone contract).

    The tokens are the rank-``rank`` cells; the allowed ``(N+1)``-tuples come from the
    incidences (:func:`~topomodelx_attention.nn.simplicial.masks.complex_data_to_tuples`: the
    vertices of every ``N``-simplex for ``rank=0``). Cells of the other ranks are returned
    unchanged (TopoBench's wrapper adds its residual + LayerNorm, its readout propagates down).

    Parameters
    ----------
    in_channels : int
        Width of every ``x_r`` after TopoBench's feature encoder.
    hidden_channels : int
        Token width (the transformer's embedding maps ``in_channels`` to it; outputs are
        projected back when they differ, so every returned ``h_r`` has ``in_channels`` columns).
    n_layers : int, default=2
        Layers.
    heads : int, default=1
        Attention heads.
    order : int, default=2
        ``N`` (2: attention over triangles of tokens).
    rank : int, default=0
        Rank of the token cells.
    max_rank : int, optional
        Highest rank (default ``num_cell_dimensions - 1``, else 2).
    num_cell_dimensions : int, optional
        TopoBench's count of cell dimensions.
    **layer_kwargs
        Other :class:`~topomodelx_attention.nn.simplicial.NSimplicialTransformer` options
        (``dropout``, ``attention_dropout``, ``simplicial_options`` with ``kv_bias``,
        ``include_lower``, ``self_loops``, ``router_k``, ...), as TopoBench's backbone config
        names them.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        *,
        n_layers: int = 2,
        heads: int = 1,
        order: int = 2,
        rank: int = 0,
        max_rank: int | None = None,
        num_cell_dimensions: int | None = None,
        **layer_kwargs: Any,
    ) -> None:
        super().__init__(max_rank, num_cell_dimensions, layer_kwargs)
        from topomodelx_attention.nn.simplicial import NSimplicialTransformer

        if not 0 <= int(rank) <= self.max_rank:
            raise ValueError(f"rank must be in 0..{self.max_rank}, got {rank}")
        self.rank = int(rank)
        self.out_channels = int(in_channels)
        # out_channels=None: the transformer without readout (every parameter gets a gradient);
        # its encode() embeds the tokens, runs the layers (router context included) and the norm
        self.transformer = NSimplicialTransformer(
            int(in_channels), hidden_channels, None, n_layers=n_layers, heads=heads,
            order=order, rank=self.rank, **layer_kwargs,
        )
        same = int(in_channels) == int(hidden_channels)
        self.project = nn.Identity() if same else nn.Linear(hidden_channels, in_channels)

    def encode_cells(self, data: ComplexData, x: Sequence[Tensor]) -> tuple[Tensor, ...]:  # noqa: D102
        out = list(x)
        out[self.rank] = self.project(self.transformer.encode(data))
        return tuple(out)


class OrderKTokenGTBackbone(TensorBackbone):
    """Order-k TokenGT over all cells (TopoBench backbone contract): every cell is a token.

    TopoBench batches carry no node identifiers, so fresh orthonormal random identifiers
    (ORFs, TokenGT Appendix A.3.1) are drawn per complex at every training step
    (:func:`~topomodelx_attention.transforms.node_ids.batched_orthogonal_random_ids`, from
    torch's global generator: ``torch.manual_seed`` makes a step reproducible); in eval mode
    they are drawn from a fixed seed, so evaluation is deterministic.

    Parameters
    ----------
    in_channels : int or sequence of int
        Width of every ``x_r`` after TopoBench's feature encoder, or one per rank.
    hidden_channels : int
        Token width.
    n_layers : int, default=2
        Layers.
    heads : int, default=4
        Attention heads.
    node_id_dim : int, default=16
        Identifier width (0: no identifiers).
    max_rank : int, optional
        Highest rank (default ``num_cell_dimensions - 1``, else 2).
    num_cell_dimensions : int, optional
        TopoBench's count of cell dimensions.
    eval_seed : int, default=0
        Seed of the evaluation identifiers.
    out_width : int, optional
        Width of the returned ``h_r`` (default: ``in_channels`` when one width is given, else
        ``hidden_channels``): TopoBench's wrapper adds ``x_r`` to ``h_r`` (residual).
    **kwargs
        Other :class:`~topomodelx_attention.nn.graph.OrderKTokenGT` options (``kind``,
        ``identifiers``, ``max_cell_size``, ``dropout``, ...).
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        hidden_channels: int,
        *,
        n_layers: int = 2,
        heads: int = 4,
        node_id_dim: int = 16,
        max_rank: int | None = None,
        num_cell_dimensions: int | None = None,
        eval_seed: int = 0,
        out_width: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_rank, num_cell_dimensions, kwargs)
        from topomodelx_attention.nn.graph import OrderKTokenGT

        widths = _widths(in_channels, self.max_rank)
        if out_width is None:
            out_width = widths[0] if len(set(widths)) == 1 else hidden_channels
        self.node_id_dim = int(node_id_dim)
        self.eval_seed = int(eval_seed)
        self.out_channels = int(out_width)
        self.model = OrderKTokenGT(
            widths, hidden_channels, self.out_channels,
            n_layers=n_layers, heads=heads, node_id_dim=node_id_dim,
            outputs=tuple(range(self.max_rank + 1)), **kwargs,
        )

    def encode_cells(self, data: ComplexData, x: Sequence[Tensor]) -> tuple[Tensor, ...]:  # noqa: D102
        from topomodelx_attention.transforms.node_ids import batched_orthogonal_random_ids

        if self.node_id_dim:
            generator = None
            if not self.training:
                generator = torch.Generator(device=data.x_0.device).manual_seed(self.eval_seed)
            data.node_id = batched_orthogonal_random_ids(
                data.batch_0, data.num_complexes, self.node_id_dim, generator
            ).to(data.x_0.dtype)
        out = self.model.cell_outputs(data)
        return tuple(out[r] for r in range(self.max_rank + 1))
