r"""Head handling and input checks shared by every attention kernel.

* :func:`split_heads` / :func:`merge_heads`: ``(n, heads * d)`` ↔ ``(n, heads, d)``.
* :class:`HeadwiseLinear`: the per-head projection of the Cellular Transformer paper's
  split-input multi-head attention (§4.2.1: "splitting the cochains into multiple cochains of
  smaller dimension", one single-head attention per pair of pieces, outputs concatenated).
* the checks of projected ``(n, heads, d)`` query/key/value tensors and the two numerical
  tricks every kernel shares: :func:`safe_divide` (zero where the denominator is zero) and
  :func:`connected_zeros` (an all-zero output that keeps the autograd graph connected).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor, nn

__all__ = ["HeadwiseLinear", "check_dropout", "merge_heads", "split_heads"]


def split_heads(x: Tensor, heads: int) -> Tensor:
    """Split the channels of a feature matrix into heads.

    Parameters
    ----------
    x : torch.Tensor, shape = (n, heads * d)
        Projected features.
    heads : int
        Number of heads; must divide ``x.shape[-1]``.

    Returns
    -------
    torch.Tensor, shape = (n, heads, d)
        A view of ``x``.
    """
    if x.dim() != 2:
        raise ValueError(
            f"split_heads expects a 2-D (n, heads * d) tensor, got shape {tuple(x.shape)}"
        )
    if heads < 1 or x.shape[1] % heads != 0:
        raise ValueError(f"heads={heads} must be positive and divide the {x.shape[1]} channels")
    return x.view(x.shape[0], heads, x.shape[1] // heads)


def merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads of a head-split tensor (inverse of :func:`split_heads`).

    Parameters
    ----------
    x : torch.Tensor, shape = (n, heads, d)
        Head-split features.

    Returns
    -------
    torch.Tensor, shape = (n, heads * d)
        Heads concatenated along the channels.
    """
    if x.dim() != 3:
        raise ValueError(
            f"merge_heads expects a 3-D (n, heads, d) tensor, got shape {tuple(x.shape)}"
        )
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2])


class HeadwiseLinear(nn.Module):
    r"""One linear map per head, applied to that head's slice of the input channels.

    Input channels are split into ``heads`` consecutive pieces :math:`X^1, \dots, X^m`
    (§4.2.1 of the Cellular Transformer paper) and piece ``h`` is mapped by its own
    :math:`W_h \in \mathcal{M}(d_{in}/m, d_{out})`:
    :math:`\mathrm{out}[:, h] = X^h W_h (+ b_h)`. Equivalent to a block-diagonal
    :class:`torch.nn.Linear`, with :math:`m` times fewer parameters.

    Parameters
    ----------
    in_channels : int
        Input channels; must be divisible by ``heads``.
    head_out_channels : int
        Output channels per head.
    heads : int
        Number of heads.
    bias : bool, default = False
        Learnable bias per head.
    """

    def __init__(self, in_channels: int, head_out_channels: int, heads: int, *, bias: bool = False):
        super().__init__()
        if in_channels % heads != 0:
            raise ValueError(
                f"heads={heads} must divide in_channels={in_channels} (the input is split into "
                "heads)"
            )
        self.in_channels = in_channels
        self.heads = heads
        self.head_out_channels = head_out_channels
        self.weight = nn.Parameter(torch.empty(heads, in_channels // heads, head_out_channels))
        self.bias = nn.Parameter(torch.empty(heads, head_out_channels)) if bias else None
        self.reset_parameters()

    @property
    def out_features(self) -> int:
        """Total output width ``heads * head_out_channels`` (as ``nn.Linear.out_features``)."""
        return self.heads * self.head_out_channels

    def reset_parameters(self) -> None:
        """Xavier-uniform weights per head, zero bias."""
        fan_in, fan_out = self.weight.shape[1], self.weight.shape[2]
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Project every head's slice of the channels.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, in_channels)
            Input features.

        Returns
        -------
        torch.Tensor, shape = (n, heads, head_out_channels)
            Per-head projections.
        """
        out = torch.einsum("nhi,hio->nho", split_heads(x, self.heads), self.weight)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return (
            f"in_channels={self.in_channels}, head_out_channels={self.head_out_channels}, "
            f"heads={self.heads}, bias={self.bias is not None}"
        )


# ----------------------------------------------------------------------------------------------
# checks and shared numerical tricks (private to the attention core)
# ----------------------------------------------------------------------------------------------
def check_qkv(query: Tensor, key: Tensor, value: Tensor) -> None:
    """Check projected, head-split ``(n, heads, d)`` query / key / value tensors."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise ValueError(
                f"{name} must have shape (n, heads, d) (use split_heads), got {tuple(t.shape)}"
            )
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating point tensor, got {t.dtype}")
    if key.shape[0] != value.shape[0]:
        raise ValueError(
            f"key and value must have the same number of source tokens, got {key.shape[0]} "
            f"and {value.shape[0]}"
        )
    if not (query.shape[1] == key.shape[1] == value.shape[1]):
        raise ValueError(
            f"query, key and value must have the same number of heads, got {query.shape[1]}, "
            f"{key.shape[1]} and {value.shape[1]}"
        )
    if query.shape[2] != key.shape[2]:
        raise ValueError(
            f"query and key must have the same head dimension, got {query.shape[2]} and "
            f"{key.shape[2]}"
        )
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, "
            f"{value.dtype}"
        )


def check_features(x: Tensor, channels: int, name: str, sparse_hint: str = "") -> None:
    """Raise unless ``x`` is a dense floating ``(n, channels)`` feature matrix.

    Parameters
    ----------
    x : torch.Tensor
        The features.
    channels : int
        Expected number of columns.
    name : str
        Argument name for the messages (``"x_target"``).
    sparse_hint : str, default=""
        Appended to the message for a sparse tensor (which argument order was expected).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(
            f"{name} must be a dense feature matrix, got a sparse {tuple(x.shape)} tensor{sparse_hint}"
        )
    if x.dim() != 2 or x.shape[1] != channels:
        raise ValueError(f"{name} must have shape (n, {channels}), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating point tensor, got {x.dtype}")


def positive_int(value: object, name: str) -> int:
    """Return ``value`` if it is a positive int; raise ``TypeError`` / ``ValueError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def check_dropout(value: float, name: str = "dropout_p") -> float:
    """Return ``value`` as a float if it is a dropout probability in ``[0, 1)``.

    The one dropout check of the package: every dropout option of every layer and model
    (``dropout``, ``attention_dropout``, ``embedding_dropout``, ``drop_path``, ...) goes through
    it, so a bad value gets the same message everywhere.

    Parameters
    ----------
    value : float
        The probability.
    name : str, default="dropout_p"
        Option name used in the error message.

    Returns
    -------
    float
        ``float(value)``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float in [0, 1), got {type(value).__name__}")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return float(value)


def resolve_scale(scale: float | None, head_dim: int) -> float:
    r"""Logit scale: ``1 / sqrt(head_dim)`` when ``None`` (``scale=1.0``: the paper's Eq. 2)."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0
    return float(scale)


def safe_divide(numerator: Tensor, denominator: Tensor) -> Tensor:
    """``numerator / denominator``, and exactly zero (finite gradients) where ``denominator <= 0``.

    Targets without any source have a zero softmax denominator: their output is zero.
    """
    positive = denominator > 0
    safe = torch.where(positive, denominator, torch.ones_like(denominator))
    return torch.where(positive, numerator / safe, torch.zeros_like(numerator))


def connected_zeros(shape: tuple[int, ...], *inputs: Tensor) -> Tensor:
    """All-zero tensor of ``shape`` that still depends on ``inputs`` (zero gradients, not None)."""
    anchor = sum(t.sum() for t in inputs)
    return inputs[0].new_zeros(shape) + 0.0 * anchor
