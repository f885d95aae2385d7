"""Cellular Transformer layers (Ballester et al., "Attending to Topological Spaces").

Two pre-norm layers (Appendix A):

* :class:`CellularTransformerLayer` with ``attention="pairwise"`` (§4.2.1, Eq. 2): one
  attention block ``A_{ks→kt}`` with its own Q/K/V per arrow ``ks → kt`` of a tensor diagram
  (§4.3); outputs for the same target rank are summed into the residual, then a per-rank
  LayerNorm + FFN.
* ``attention="general"`` (§4.2.2): all cells of all ranks form one token set; Q/K are shared,
  values have one projection per rank, and the neighbourhood is the block matrix of Eq. 3
  assembled from the same tensor diagram.

Both take explicit per-rank cochains and neighbourhood tensors (TopoModelX style) and use the
package's shared attention core (:class:`~topomodelx_attention.nn.attention.MultiHeadAttention`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention import MultiHeadAttention

__all__ = [
    "ATTENTION_MECHANISMS",
    "CELL_KINDS",
    "Arrow",
    "CellularTransformerLayer",
    "default_tensor_diagram",
    "parse_tensor_diagram",
]

ATTENTION_MECHANISMS = ("pairwise", "general")
CELL_KINDS = ("sparse", "dense", "mixed", "linear")
"""Attention kinds: ``mixed`` is dense inside a rank and sparse across ranks (§4.2.1, •=c)."""

_ARROW = re.compile(r"^(?P<name>[a-z_]+)_(?P<rank>\d+)(?P<t>\.T)?$")


@dataclass(frozen=True)
class Arrow:
    """One arrow ``source → target`` of a tensor diagram with its neighbourhood ``N``.

    Attributes
    ----------
    source, target : int
        Source rank ``ks`` and target rank ``kt``.
    neighborhood : str
        Key of the ``ComplexData`` neighbourhood (e.g. ``"incidence_1"``).
    transpose : bool
        Use ``Nᵀ``: the attention mask must have shape ``(n_kt, n_ks)``.
    """

    source: int
    target: int
    neighborhood: str
    transpose: bool = False

    @property
    def name(self) -> str:
        """Module key of the arrow, e.g. ``"1->0"``."""
        return f"{self.source}->{self.target}"

    def matrix(self, neighborhoods: Mapping[str, Tensor]) -> Tensor:
        """Return the ``(n_target, n_source)`` neighbourhood of this arrow.

        Parameters
        ----------
        neighborhoods : mapping of str to torch.Tensor
            Sparse neighbourhoods by key.

        Returns
        -------
        torch.Tensor, shape = (n_target, n_source)
            ``N`` or its transpose, coalesced.
        """
        if self.neighborhood not in neighborhoods:
            raise ValueError(
                f"arrow {self.name} needs the neighbourhood {self.neighborhood!r}, which was not "
                f"given (available: {sorted(neighborhoods)})"
            )
        matrix = neighborhoods[self.neighborhood]
        return matrix.t().coalesce() if self.transpose else matrix


def default_tensor_diagram(max_rank: int) -> list[Arrow]:
    """Return the paper's tensor diagram (Figure 2, §4.2.1) for ranks ``0..max_rank``.

    ``0 → 0`` through the upper adjacency, ``k → k`` through the lower adjacency for
    ``k > 0``, ``k+1 → k`` through the unsigned incidence ``incidence_{k+1}`` and ``k → k+1``
    through its transpose.

    Parameters
    ----------
    max_rank : int
        Highest rank.

    Returns
    -------
    list of Arrow
        The arrows.
    """
    arrows = [Arrow(0, 0, "adjacency_0")]
    for k in range(1, max_rank + 1):
        arrows.append(Arrow(k, k, f"coadjacency_{k}"))
    for k in range(max_rank):
        arrows.append(Arrow(k + 1, k, f"incidence_{k + 1}"))
        arrows.append(Arrow(k, k + 1, f"incidence_{k + 1}", transpose=True))
    return arrows


def parse_tensor_diagram(diagram: Sequence[Arrow | tuple | str] | None, max_rank: int) -> list[Arrow]:
    """Normalise a tensor-diagram description into a list of :class:`Arrow`.

    Parameters
    ----------
    diagram : sequence or None
        ``None`` for :func:`default_tensor_diagram`; otherwise items that are :class:`Arrow`,
        tuples ``(source, target, "key")`` where ``"key"`` may end in ``.T`` for a transpose
        (e.g. ``(0, 1, "incidence_1.T")``), or strings ``"0->1:incidence_1.T"``.
    max_rank : int
        Highest rank the layer handles.

    Returns
    -------
    list of Arrow
        Validated arrows (shapes are checked against the neighbourhood names).
    """
    if diagram is None:
        return default_tensor_diagram(max_rank)
    arrows: list[Arrow] = []
    for item in diagram:
        if isinstance(item, Arrow):
            arrow = item
        else:
            if isinstance(item, str):
                match = re.match(r"^\s*(\d+)\s*->\s*(\d+)\s*:\s*(\S+)\s*$", item)
                if not match:
                    raise ValueError(f"cannot parse arrow {item!r}; write e.g. '0->1:incidence_1.T'")
                item = (int(match.group(1)), int(match.group(2)), match.group(3))
            if not (isinstance(item, tuple) and len(item) == 3):
                raise TypeError(f"arrow {item!r} must be an Arrow, (source, target, key) or a string")
            source, target, key = item
            transpose = key.endswith(".T")
            arrow = Arrow(int(source), int(target), key[:-2] if transpose else key, transpose)
        match = _ARROW.match(arrow.neighborhood + (".T" if arrow.transpose else ""))
        if not match:
            raise ValueError(f"arrow {arrow.name}: {arrow.neighborhood!r} is not a neighbourhood key")
        for rank in (arrow.source, arrow.target):
            if not 0 <= rank <= max_rank:
                raise ValueError(f"arrow {arrow.name} uses rank {rank} outside 0..{max_rank}")
        name, rank = match.group("name"), int(match.group("rank"))
        rows, cols = (rank - 1, rank) if "incidence" in name else (rank, rank)
        if arrow.transpose:
            rows, cols = cols, rows
        if (rows, cols) != (arrow.target, arrow.source):
            raise ValueError(
                f"arrow {arrow.name} needs an (n_{arrow.target}, n_{arrow.source}) matrix, but "
                f"{arrow.neighborhood}{'.T' if arrow.transpose else ''} is (n_{rows}, n_{cols})"
            )
        if any(a.name == arrow.name for a in arrows):
            raise ValueError(f"arrow {arrow.name} appears twice in the tensor diagram")
        arrows.append(arrow)
    if not arrows:
        raise ValueError("the tensor diagram has no arrow")
    return arrows


class _FeedForward(nn.Module):
    """``Dropout(FFN_2(Dropout(ReLU(FFN_1(x)))))`` (Appendix A, steps 5–6 without the norm)."""

    def __init__(self, channels: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.lin1 = nn.Linear(channels, hidden)
        self.lin2 = nn.Linear(hidden, channels)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.lin2(self.dropout(torch.relu(self.lin1(x)))))


def _check_dropout(value: float, name: str) -> float:
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


class CellularTransformerLayer(nn.Module):
    """One pre-norm Cellular Transformer layer on ranks ``0..max_rank`` (Appendix A).

    Parameters
    ----------
    channels : int
        Hidden width ``d^h`` of every rank (the paper uses the same width for all ranks).
    heads : int, default=8
        Attention heads (must divide ``channels``).
    max_rank : int, default=2
        Highest rank handled; ranks without cells in the input are skipped.
    attention : {"pairwise", "general"}, default="pairwise"
        Pairwise (§4.2.1) or general (§4.2.2) cellular attention.
    kind : {"sparse", "dense", "mixed", "linear"}, default="sparse"
        ``sparse``: softmax over the neighbours given by ``N`` (mask). ``dense``: all cells of
        the complex with the bias ``θ·N``. ``mixed`` (pairwise only): dense for ``k → k``
        arrows, sparse across ranks. ``linear``: Performer/FAVOR+ in place of dense (no bias),
        linear in the number of cells.
    tensor_diagram : sequence, optional
        Arrows (see :func:`parse_tensor_diagram`); default :func:`default_tensor_diagram`.
    ffn_channels : int, optional
        Inner width of the FFN (default ``channels``, as Table 3).
    dropout : float, default=0.0
        Dropout after attention and in the FFN.
    attention_dropout : float, default=0.0
        Dropout on the attention weights.
    bias : bool, default=False
        Bias in the Q/K/V/O projections.
    num_random_features : int, optional
        Random features of the ``linear`` kind.
    """

    def __init__(
        self,
        channels: int,
        heads: int = 8,
        max_rank: int = 2,
        attention: str = "pairwise",
        kind: str = "sparse",
        tensor_diagram: Sequence[Arrow | tuple | str] | None = None,
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        bias: bool = False,
        num_random_features: int | None = None,
    ) -> None:
        super().__init__()
        if attention not in ATTENTION_MECHANISMS:
            raise ValueError(f"attention must be one of {ATTENTION_MECHANISMS}, got {attention!r}")
        if kind not in CELL_KINDS:
            raise ValueError(f"kind must be one of {CELL_KINDS}, got {kind!r}")
        if attention == "general" and kind == "mixed":
            raise ValueError("kind='mixed' is a pairwise kind; general attention takes sparse, dense or linear")
        if int(max_rank) < 0:
            raise ValueError(f"max_rank must be non-negative, got {max_rank}")
        self.channels = int(channels)
        self.heads = int(heads)
        self.max_rank = int(max_rank)
        self.attention = attention
        self.kind = kind
        self.arrows = parse_tensor_diagram(tensor_diagram, self.max_rank)
        dropout = _check_dropout(dropout, "dropout")
        attention_dropout = _check_dropout(attention_dropout, "attention_dropout")
        ffn_channels = self.channels if ffn_channels is None else int(ffn_channels)
        ranks = range(self.max_rank + 1)
        self.norm_attention = nn.ModuleList(nn.LayerNorm(self.channels) for _ in ranks)
        self.norm_ffn = nn.ModuleList(nn.LayerNorm(self.channels) for _ in ranks)
        self.ffn = nn.ModuleList(_FeedForward(self.channels, ffn_channels, dropout) for _ in ranks)
        self.dropout = nn.Dropout(dropout)

        def block(arrow_kind: str, value_projection: bool = True) -> MultiHeadAttention:
            return MultiHeadAttention(
                self.channels,
                self.channels,
                self.heads,
                kind=arrow_kind,
                bias=bias,
                dropout=attention_dropout if arrow_kind != "linear" else 0.0,
                num_random_features=num_random_features,
                value_projection=value_projection,
            )

        if attention == "pairwise":
            self.blocks = nn.ModuleDict()
            for arrow in self.arrows:
                arrow_kind = kind
                if kind == "mixed":
                    arrow_kind = "dense" if arrow.source == arrow.target else "sparse"
                self.blocks[arrow.name] = block(arrow_kind)
        else:
            self.general = block(kind, value_projection=False)
            self.values = nn.ModuleList(nn.Linear(self.channels, self.channels, bias=bias) for _ in ranks)

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        arrows = ", ".join(f"{a.name}:{a.neighborhood}{'.T' if a.transpose else ''}" for a in self.arrows)
        return (
            f"channels={self.channels}, heads={self.heads}, max_rank={self.max_rank}, "
            f"attention={self.attention!r}, kind={self.kind!r}, arrows=[{arrows}]"
        )

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        x: Sequence[Tensor],
        neighborhoods: Mapping[str, Tensor],
        batch: Sequence[Tensor] | None = None,
        num_complexes: int | None = None,
    ) -> list[Tensor]:
        """Update the cochains of every rank.

        Parameters
        ----------
        x : sequence of torch.Tensor
            ``x[r]`` of shape ``(n_r, channels)`` for ``r = 0..max_rank`` (0 rows allowed).
        neighborhoods : mapping of str to torch.Tensor
            Sparse neighbourhoods by ``ComplexData`` key (those named by the tensor diagram).
        batch : sequence of torch.Tensor, optional
            ``batch[r]`` of shape ``(n_r,)``: sorted complex index of every r-cell (needed for
            ``dense``/``linear`` attention on a batch; ``None`` means a single complex).
        num_complexes : int, optional
            Number of complexes in the batch (inferred when omitted).

        Returns
        -------
        list of torch.Tensor
            Updated ``x[r]``, same shapes.
        """
        x = list(x)
        if len(x) != self.max_rank + 1:
            raise ValueError(f"expected {self.max_rank + 1} cochains (ranks 0..{self.max_rank}), got {len(x)}")
        for r, xr in enumerate(x):
            if not isinstance(xr, Tensor) or xr.dim() != 2 or xr.shape[1] != self.channels:
                shape = tuple(xr.shape) if isinstance(xr, Tensor) else type(xr).__name__
                raise ValueError(f"x[{r}] must have shape (n_{r}, {self.channels}), got {shape}")
        if batch is None:
            batch = [torch.zeros(xr.shape[0], dtype=torch.long, device=xr.device) for xr in x]
        batch = list(batch)
        if len(batch) != len(x) or any(b.numel() != xr.shape[0] for b, xr in zip(batch, x)):
            raise ValueError("batch must hold one (n_r,) vector per rank, matching x")
        if num_complexes is None:
            num_complexes = max((int(b.max()) + 1 for b in batch if b.numel()), default=1)
        normed = [norm(xr) for norm, xr in zip(self.norm_attention, x)]
        if self.attention == "pairwise":
            update = self._pairwise(normed, neighborhoods, batch, num_complexes)
        else:
            update = self._general(normed, neighborhoods, batch, num_complexes)
        out = []
        for r, xr in enumerate(x):
            h = xr + self.dropout(update[r]) if update[r] is not None else xr
            out.append(h + self.ffn[r](self.norm_ffn[r](h)))
        return out

    def _pairwise(
        self,
        x: list[Tensor],
        neighborhoods: Mapping[str, Tensor],
        batch: list[Tensor],
        num_complexes: int,
    ) -> list[Tensor | None]:
        update: list[Tensor | None] = [None] * len(x)
        for arrow in self.arrows:
            source, target = x[arrow.source], x[arrow.target]
            if source.shape[0] == 0 or target.shape[0] == 0:
                continue  # rank absent from every complex of the batch: nothing to attend
            attention = self.blocks[arrow.name]
            matrix = None if attention.kind == "linear" else arrow.matrix(neighborhoods)
            out = attention(
                target,
                source,
                matrix,
                batch[arrow.target],
                batch[arrow.source],
                num_graphs=num_complexes,
            )
            update[arrow.target] = out if update[arrow.target] is None else update[arrow.target] + out
        return update

    def _general(
        self,
        x: list[Tensor],
        neighborhoods: Mapping[str, Tensor],
        batch: list[Tensor],
        num_complexes: int,
    ) -> list[Tensor | None]:
        sizes = [xr.shape[0] for xr in x]
        tokens = torch.cat(x, dim=0)
        attention = self.general
        query = attention.project_query(tokens)
        key = attention.project_key(tokens)
        value = torch.cat([lin(xr) for lin, xr in zip(self.values, x)], dim=0)
        value = value.view(value.shape[0], self.heads, -1)
        offsets = [0]
        for n in sizes:
            offsets.append(offsets[-1] + n)
        matrix = None
        if attention.kind != "linear":
            matrix = _block_neighborhood(self.arrows, neighborhoods, offsets, tokens.device, tokens.dtype)
        # dense/linear attention group tokens by complex: order them (complex, rank, cell)
        token_batch = torch.cat(batch)
        order = torch.argsort(token_batch, stable=True)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        if matrix is not None:
            idx = matrix.indices()
            matrix = torch.sparse_coo_tensor(
                inverse[idx], matrix.values(), matrix.shape, check_invariants=False
            ).coalesce()
        sorted_batch = token_batch[order]
        out = attention.attend(
            query[order], key[order], value[order], matrix, sorted_batch, sorted_batch, num_complexes
        )
        out = attention.project_output(out)[inverse]
        return list(torch.split(out, sizes, dim=0))


def _block_neighborhood(
    arrows: Sequence[Arrow],
    neighborhoods: Mapping[str, Tensor],
    offsets: Sequence[int],
    device: torch.device,
    dtype: torch.dtype,
) -> Tensor:
    """Assemble the block matrix ``N`` of Eq. 3: block ``(kt, ks)`` is ``N_{ks→kt}``."""
    total = offsets[-1]
    rows, cols, vals = [], [], []
    for arrow in arrows:
        matrix = arrow.matrix(neighborhoods).coalesce()
        expected = (offsets[arrow.target + 1] - offsets[arrow.target], offsets[arrow.source + 1] - offsets[arrow.source])
        if tuple(matrix.shape) != expected:
            raise ValueError(
                f"neighbourhood of arrow {arrow.name} has shape {tuple(matrix.shape)}, expected {expected}"
            )
        idx = matrix.indices()
        rows.append(idx[0] + offsets[arrow.target])
        cols.append(idx[1] + offsets[arrow.source])
        vals.append(matrix.values().to(dtype))
    if not rows:
        empty = torch.zeros((2, 0), dtype=torch.long, device=device)
        return torch.sparse_coo_tensor(empty, torch.zeros(0, dtype=dtype, device=device), (total, total))
    return torch.sparse_coo_tensor(
        torch.stack([torch.cat(rows), torch.cat(cols)]), torch.cat(vals), (total, total)
    ).coalesce()
