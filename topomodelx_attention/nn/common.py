"""Input encoders and readout heads shared by every model family and the harness baselines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention.scatter import scatter_sum

__all__ = [
    "MAX_ABS_INPUT",
    "POOLINGS",
    "FeatureEncoder",
    "ReadoutMLP",
    "check_inputs",
    "check_options",
    "check_rows",
    "segment_pool",
]

POOLINGS = ("sum", "mean")

#: Largest absolute input value a model accepts: beyond it float32 products (Q·Kᵀ, x²) overflow.
MAX_ABS_INPUT: float = 1e15


def check_inputs(tensors: Mapping[str, Tensor | None], max_abs: float = MAX_ABS_INPUT) -> None:
    """Reject non-finite or overflowing floating-point model inputs (one vectorised pass each).

    Every model calls this once at the start of ``forward`` (constructor flag ``check_inputs``,
    default ``True``) so that NaN/Inf or huge values never flow silently into attention
    scores, where they would give NaN outputs or NaN gradients. Skipped while
    ``torch.compile`` traces (the check is a data-dependent branch).

    Parameters
    ----------
    tensors : Mapping[str, torch.Tensor or None]
        Inputs by name (e.g. ``{"x_0": x_0, "pe_0": pe_0}``); ``None`` and integer tensors
        (categorical codes) are skipped.
    max_abs : float, default=MAX_ABS_INPUT
        Largest accepted absolute value.

    Raises
    ------
    ValueError
        Naming the key, the first bad row and the offending value.
    """
    if torch.compiler.is_compiling():  # data-dependent branch: checked in eager mode only
        return
    for name, x in tensors.items():
        if x is None or not isinstance(x, Tensor) or not x.is_floating_point() or x.numel() == 0:
            continue
        rows = x.reshape(x.shape[0], -1) if x.dim() > 0 else x.reshape(1, 1)
        if bool(rows.abs().amax() <= max_abs):  # one reduction; NaN and Inf fail it too
            continue
        bad = ~torch.isfinite(rows) | (rows.abs() > max_abs)
        if bool(bad.any()):
            row = int(bad.any(dim=1).nonzero()[0, 0])
            value = rows[row][bad[row]][0]
            raise ValueError(
                f"{name}: row {row} holds {float(value)!r}; model inputs must be finite with "
                f"|value| <= {max_abs:g} (clean or rescale the features, or pass "
                "check_inputs=False to skip this check)"
            )


def check_options(
    name: str, options: Mapping[str, Any] | None, defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """One group of keyword options (e.g. ``readout_options``), completed with its defaults.

    Parameters
    ----------
    name : str
        Name of the option group, used in error messages (e.g. ``"readout_options"``).
    options : mapping, optional
        The keys given (``None``: every default).
    defaults : mapping
        Every key the group takes, with its default value.

    Returns
    -------
    dict
        ``defaults`` updated with ``options``.

    Raises
    ------
    TypeError
        If ``options`` is not a mapping.
    ValueError
        Naming the keys the group does not take, and the keys it takes.
    """
    if options is None:
        return dict(defaults)
    if not isinstance(options, Mapping):
        raise TypeError(
            f"{name} must be a mapping of {sorted(defaults)} (or None), got {type(options).__name__}"
        )
    unknown = sorted(set(options) - set(defaults), key=str)
    if unknown:
        raise ValueError(f"{name} {unknown} are not options; it takes {sorted(defaults)}")
    return {**defaults, **options}


def check_rows(tensors: Mapping[str, tuple[Tensor | None, int]]) -> None:
    """Reject inputs whose number of rows differs from the number of cells they describe.

    Parameters
    ----------
    tensors : Mapping[str, tuple of (torch.Tensor or None, int)]
        ``{name: (tensor, expected_rows)}``; ``None`` tensors are skipped.

    Raises
    ------
    ValueError
        Naming the key, its rows and the expected count.
    """
    for name, (x, expected) in tensors.items():
        if x is not None and int(x.shape[0]) != int(expected):
            raise ValueError(
                f"{name} has {int(x.shape[0])} rows but the batch has {int(expected)} such cells "
                "(one feature row per cell)"
            )


def segment_pool(x: Tensor, index: Tensor, size: int, how: str = "sum") -> Tensor:
    """Sum or average the rows of ``x`` per segment (global pooling per complex, cell pooling).

    Parameters
    ----------
    x : torch.Tensor, shape = (n, channels)
        Rows to pool.
    index : torch.Tensor, shape = (n,)
        Segment of every row, in ``[0, size)``.
    size : int
        Number of segments.
    how : {"sum", "mean"}, default="sum"
        Reduction; empty segments give zeros in both cases.

    Returns
    -------
    torch.Tensor, shape = (size, channels)
        Pooled rows.
    """
    if how not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {how!r}")
    out = scatter_sum(x, index, size)
    if how == "mean":
        # scatter_sum, not bincount: bincount's output size is data-dependent (torch.compile break)
        counts = scatter_sum(torch.ones_like(index, dtype=out.dtype), index, size).clamp_min(1)
        out = out / counts.unsqueeze(-1)
    return out


class FeatureEncoder(nn.Module):
    """Embed one set of features: a linear map, or summed embeddings of categorical codes.

    Continuous features (float) go through ``nn.Linear``; categorical features (a long tensor,
    one column per categorical variable) through one ``nn.Embedding`` table per column, summed.

    Parameters
    ----------
    in_channels : int
        Feature columns.
    out_channels : int
        Output width.
    cardinalities : sequence of int, optional
        Categories per column; then the input must hold integer codes in ``[0, cardinality)``.
    name : str, default="features"
        Name used in error messages (e.g. ``"x_1"``).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        cardinalities: Sequence[int] | None = None,
        name: str = "features",
    ) -> None:
        super().__init__()
        if int(in_channels) < 1 or int(out_channels) < 1:
            raise ValueError(
                f"{name}: in_channels and out_channels must be positive, got {in_channels}, {out_channels}"
            )
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        self.name = name
        self.cardinalities = None if cardinalities is None else [int(c) for c in cardinalities]
        if self.cardinalities is not None:
            if len(self.cardinalities) != self.in_channels or any(
                c < 1 for c in self.cardinalities
            ):
                raise ValueError(
                    f"{name}: give one positive cardinality per categorical column "
                    f"({self.in_channels}), got {self.cardinalities}"
                )
            self.embeddings = nn.ModuleList(
                nn.Embedding(c, out_channels) for c in self.cardinalities
            )
            self.linear = None
        else:
            self.embeddings = None
            self.linear = nn.Linear(self.in_channels, out_channels)

    def check_codes(self, x: Tensor) -> None:
        """Raise ``ValueError`` if a categorical column holds a code outside its table.

        Run by :meth:`forward` in eager mode; while ``torch.compile`` traces, the models run
        it in their eager ``prepare`` instead (a data-dependent check). No-op for continuous
        features.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, in_channels) or (n,)
            Integer codes.
        """
        if self.embeddings is None or x.is_floating_point():
            return
        if x.dim() == 1:
            x = x.unsqueeze(-1)
        if x.dim() != 2 or x.shape[1] != len(self.embeddings):
            return  # forward raises the shape error
        for j, table in enumerate(self.embeddings):
            column = x[:, j]
            if column.numel() and (
                int(column.min()) < 0 or int(column.max()) >= table.num_embeddings
            ):
                raise ValueError(
                    f"{self.name} column {j} has codes outside [0, {table.num_embeddings})"
                )

    def forward(self, x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
        """Encode.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, in_channels) or (n,)
            Float features, or long codes for categorical features.
        dtype : torch.dtype, optional
            Floating dtype of the result (default: the module's parameters' dtype).

        Returns
        -------
        torch.Tensor, shape = (n, out_channels)
            Embedded features.
        """
        if x.dim() == 1:
            x = x.unsqueeze(-1)
        if x.dim() != 2 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"{self.name} must have shape (n, {self.in_channels}), got {tuple(x.shape)}"
            )
        if self.embeddings is None:
            if not x.is_floating_point():
                raise TypeError(
                    f"{self.name} are integer codes: give their cardinalities to the model "
                    "(categorical embedding) or cast them to float"
                )
            out = self.linear(x.to(self.linear.weight.dtype))
        else:
            if x.is_floating_point():
                raise TypeError(f"{self.name} must be integer codes for categorical embeddings")
            if not torch.compiler.is_compiling():  # data-dependent: the models' prepare checks
                self.check_codes(x)
            columns = [table(x[:, j]) for j, table in enumerate(self.embeddings)]
            out = torch.stack(columns).sum(0)
        return out if dtype is None else out.to(dtype)


class ReadoutMLP(nn.Sequential):
    """Fully connected readout whose hidden widths halve (CT paper, Appendix A).

    Parameters
    ----------
    in_channels : int
        Input width (the model width).
    out_channels : int
        Output width.
    hidden_layers : int, default=1
        Number of hidden layers; widths ``in/2, in/4, ...``.
    dropout : float, default=0.0
        Dropout after each hidden activation.
    """

    def __init__(
        self, in_channels: int, out_channels: int, hidden_layers: int = 1, dropout: float = 0.0
    ) -> None:
        layers: list[nn.Module] = []
        width = int(in_channels)
        for _ in range(int(hidden_layers)):
            nxt = max(width // 2, 1)
            layers += [nn.Linear(width, nxt), nn.ReLU(), nn.Dropout(dropout)]
            width = nxt
        layers.append(nn.Linear(width, out_channels))
        super().__init__(*layers)
