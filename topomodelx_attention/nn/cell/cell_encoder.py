"""Cell embeddings of the Cellular Transformer: features and PEs of every rank (Eq. 4).

:class:`CellEncoder` embeds one rank's features and combines its positional encoding
(``X_k^1 = P_k(X_k, E_k)``); :func:`vertex_membership` gives the vertex-cell pattern that the
``cell_embedding="vertex_sum"`` option sums over.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from topomodelx_attention.data import ComplexData, sparsity_pattern
from topomodelx_attention.nn.common import FeatureEncoder

__all__ = [
    "CELL_EMBEDDINGS",
    "PE_COMBINATIONS",
    "PE_NORMS",
    "PE_PROJECTIONS",
    "CellEncoder",
    "pe_projection_layer",
    "vertex_membership",
]

PE_COMBINATIONS = ("concat", "sum")
#: Normalisations of the positional encoding before its projection (``None``: none, the paper).
PE_NORMS = (None, "batch")
PE_PROJECTIONS = ("per_rank", "shared")
CELL_EMBEDDINGS = ("own", "vertex_sum")


def pe_projection_layer(hidden_channels: int, pe_channels: int, pe_combination: str) -> nn.Linear:
    """``θ_pe, b_pe`` of Eq. 4: ``(d^h + d_pe) → d^h`` (ConcatPE) or ``d_pe → d^h`` (SumPE)."""
    width = hidden_channels + pe_channels if pe_combination == "concat" else pe_channels
    return nn.Linear(width, hidden_channels)


class CellEncoder(nn.Module):
    """Embed the features of one rank and combine them with its positional encoding (Eq. 4).

    Features go through a :class:`~topomodelx_attention.nn.common.FeatureEncoder` (linear map,
    or summed embeddings of categorical codes). With a positional
    encoding ``E``: ``ConcatPE = Concat(X, E) θ + b`` or ``SumPE = X θ_x + b_x + E θ_pe + b_pe``.

    Parameters
    ----------
    in_channels : int or None
        Feature columns of the rank; ``None`` for a rank without its own features, whose
        embedded signals are given to :meth:`combine` (the paper's 2-cells, Appendix A).
    out_channels : int
        Hidden width.
    cardinalities : sequence of int, optional
        Categories per column for categorical features (then the input must be ``long``).
    pe_channels : int, optional
        Width of ``pe_r`` (``None``: no positional encoding).
    pe_combination : {"concat", "sum"}, default="concat"
        ConcatPE (the paper's choice) or SumPE.
    pe_linear : torch.nn.Linear, optional
        The PE projection ``θ_pe, b_pe`` to use, e.g. one shared by every rank (Eq. 4);
        default: a projection of this encoder's own.
    pe_norm : {None, "batch"}, default=None
        ``"batch"``: every PE column is standardised over the cells of the batch before the
        projection (batch normalisation with a learned scale and shift; running statistics in
        eval mode, and for a batch of one cell), as GraphGPS encodes RWSE: return
        probabilities of odd walk lengths, small numbers that tell odd cycles apart, reach the
        projection at unit scale. ``None``: the PE as it is (the paper).
    """

    def __init__(
        self,
        in_channels: int | None,
        out_channels: int,
        cardinalities: Sequence[int] | None = None,
        pe_channels: int | None = None,
        pe_combination: str = "concat",
        pe_linear: nn.Linear | None = None,
        pe_norm: str | None = None,
    ) -> None:
        super().__init__()
        if pe_norm not in PE_NORMS:
            raise ValueError(f"pe_norm must be one of {PE_NORMS}, got {pe_norm!r}")
        if pe_combination not in PE_COMBINATIONS:
            raise ValueError(
                f"pe_combination must be one of {PE_COMBINATIONS}, got {pe_combination!r}"
            )
        self.in_channels = None if in_channels is None else int(in_channels)
        self.out_channels = int(out_channels)
        self.pe_channels = None if pe_channels is None else int(pe_channels)
        self.pe_combination = pe_combination
        self.features = (
            None
            if in_channels is None
            else FeatureEncoder(in_channels, out_channels, cardinalities, "cell features")
        )
        self.pe_linear = None
        if self.pe_channels is not None:
            self.pe_linear = (
                pe_projection_layer(self.out_channels, self.pe_channels, pe_combination)
                if pe_linear is None
                else pe_linear
            )
        self.pe_norm = (
            nn.BatchNorm1d(self.pe_channels) if pe_norm == "batch" and self.pe_channels else None
        )

    def forward(self, x: Tensor, pe: Tensor | None = None) -> Tensor:
        """Embed features and combine the positional encoding.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, in_channels)
            Features.
        pe : torch.Tensor, shape = (n, pe_channels), optional
            Positional encoding (required iff ``pe_channels`` was given).

        Returns
        -------
        torch.Tensor, shape = (n, out_channels)
            ``X^1`` of the first layer.
        """
        if self.features is None:
            raise ValueError(
                "this CellEncoder has no features of its own (in_channels=None); call combine()"
            )
        return self.combine(self.features(x), pe)

    def combine(self, h: Tensor, pe: Tensor | None = None) -> Tensor:
        """Combine embedded signals with the positional encoding (``P_k`` of Eq. 4).

        Parameters
        ----------
        h : torch.Tensor, shape = (n, out_channels)
            Embedded signals ``X_k`` of the rank.
        pe : torch.Tensor, shape = (n, pe_channels), optional
            Positional encoding ``E_k`` (required iff ``pe_channels`` was given).

        Returns
        -------
        torch.Tensor, shape = (n, out_channels)
            ``ConcatPE(X_k, E_k)`` or ``SumPE(X_k, E_k)`` (``X_k`` itself without PE).
        """
        if self.pe_linear is None:
            if pe is not None:
                raise ValueError(
                    "the data carries a positional encoding but the model has pe_channels=None "
                    "(CellularTransformer: give its width as pe_options['channels'])"
                )
            return h
        if pe is None:
            raise ValueError(
                "the model expects positional encodings pe_r; apply a PE transform to the data"
            )
        if pe.shape != (h.shape[0], self.pe_channels):
            raise ValueError(
                f"pe must have shape ({h.shape[0]}, {self.pe_channels}), got {tuple(pe.shape)}"
            )
        if not pe.is_floating_point():
            raise TypeError(
                f"positional encodings must be float, got {pe.dtype}; apply a PE transform"
            )
        pe = pe.to(h.dtype)
        if self.pe_norm is not None and pe.shape[0] > 0:
            norm = self.pe_norm
            pe = nn.functional.batch_norm(
                pe, norm.running_mean, norm.running_var, norm.weight, norm.bias,
                training=self.training and pe.shape[0] > 1, momentum=norm.momentum, eps=norm.eps,
            )
        if self.pe_combination == "concat":
            return self.pe_linear(torch.cat([h, pe], dim=-1))
        return h + self.pe_linear(pe)


def _pattern_product(left: Tensor, right: Tensor) -> Tensor:
    """0/1 pattern of the product of two coalesced sparse COO matrices (index join, any device)."""
    (a_row, a_col), (b_row, b_col) = left.indices(), right.indices()
    order = torch.argsort(a_col, stable=True)
    a_row, a_col = a_row[order], a_col[order]
    degree = torch.bincount(a_col, minlength=left.shape[1])
    start = torch.cumsum(degree, 0) - degree
    repeats = degree[b_row]  # entries of `left` in the column matching each entry of `right`
    entry = torch.repeat_interleave(torch.arange(b_row.numel(), device=b_row.device), repeats)
    first = torch.cumsum(repeats, 0) - repeats
    offset = torch.arange(entry.numel(), device=entry.device) - first[entry]
    index = torch.stack([a_row[start[b_row[entry]] + offset], b_col[entry]])
    ones = torch.ones(index.shape[1], dtype=left.dtype, device=index.device)
    shape = (left.shape[0], right.shape[1])
    product = torch.sparse_coo_tensor(index, ones, shape, check_invariants=False)
    return sparsity_pattern(product.coalesce())


def vertex_membership(data: ComplexData, rank: int) -> Tensor:
    """Which vertices lie on each cell of ``rank``, from the unsigned incidence chain.

    The pattern of ``incidence_1 · incidence_2 ⋯ incidence_rank``, computed with index joins
    on the data's device (the same matrix as :meth:`ComplexData.vertex_cells`, which goes
    through SciPy on the CPU).

    Parameters
    ----------
    data : ComplexData
        A complex or a batch (the result is block-diagonal).
    rank : int
        Cell rank, at least 1.

    Returns
    -------
    torch.Tensor, shape = (n_0, n_rank)
        Coalesced 0/1 sparse COO matrix.
    """
    if int(rank) < 1:
        raise ValueError(f"rank must be at least 1, got {rank}")
    product = sparsity_pattern(data.neighborhood("incidence", 1), "incidence_1")
    for r in range(2, int(rank) + 1):
        product = _pattern_product(
            product, sparsity_pattern(data.neighborhood("incidence", r), f"incidence_{r}")
        )
    return product
