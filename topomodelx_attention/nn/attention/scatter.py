"""Scatter reductions and segment softmax used by every sparse attention path.

``torch_scatter`` is used automatically when it is importable (extra ``scatter``);
otherwise the pure-torch implementations (``index_add_`` / ``scatter_reduce_``) run.
Both paths return the same values; :func:`set_backend` lets tests force either one.
"""

from __future__ import annotations

import torch
from torch import Tensor

from topomodelx_attention._docs import fill_doc

try:  # pragma: no cover - depends on the environment
    import torch_scatter as _torch_scatter
except ImportError:  # pragma: no cover - depends on the environment
    _torch_scatter = None

__all__ = [
    "HAS_TORCH_SCATTER",
    "get_backend",
    "scatter_max",
    "scatter_sum",
    "segment_softmax",
    "segment_softmax_sorted",
    "segment_sum_sorted",
    "set_backend",
]

HAS_TORCH_SCATTER: bool = _torch_scatter is not None
_BACKEND: str = "torch_scatter" if HAS_TORCH_SCATTER else "torch"


def set_backend(name: str) -> None:
    """Choose the scatter backend.

    Parameters
    ----------
    name : str
        ``"torch"`` (pure PyTorch) or ``"torch_scatter"`` (needs the optional package).
    """
    global _BACKEND
    if name not in ("torch", "torch_scatter"):
        raise ValueError(f"scatter backend must be 'torch' or 'torch_scatter', got {name!r}")
    if name == "torch_scatter" and not HAS_TORCH_SCATTER:
        raise ValueError(
            "torch_scatter is not installed; install the 'scatter' extra or use backend 'torch'"
        )
    _BACKEND = name


def get_backend() -> str:
    """Return the active scatter backend name (``"torch"`` or ``"torch_scatter"``)."""
    return _BACKEND


def _broadcast_index(index: Tensor, src: Tensor) -> Tensor:
    return index.view(-1, *([1] * (src.dim() - 1))).expand_as(src)


@fill_doc
def scatter_sum(src: Tensor, index: Tensor, dim_size: int, out: Tensor | None = None) -> Tensor:
    """Sum the rows of ``src`` into ``dim_size`` buckets given by ``index``.

    Parameters
    ----------
    %(scatter_inputs)s
    out : torch.Tensor, shape = (dim_size, ...), optional
        Accumulate into this tensor **in place** (not differentiable; for chunked kernels that
        run without autograd) instead of allocating a zero tensor.

    Returns
    -------
    torch.Tensor, shape = (dim_size, ...)
        Sums (plus the previous content of ``out``); empty buckets are zero.
    """
    if _BACKEND == "torch_scatter":
        if out is not None:
            return _torch_scatter.scatter_add(src, index, dim=0, out=out)
        return _torch_scatter.scatter_add(src, index, dim=0, dim_size=dim_size)
    if out is None:
        out = src.new_zeros((dim_size, *src.shape[1:]))
    return out.index_add_(0, index, src)


@fill_doc
def scatter_max(src: Tensor, index: Tensor, dim_size: int) -> Tensor:
    """Maximum of the rows of ``src`` per bucket (empty buckets give ``-inf``).

    Parameters
    ----------
    %(scatter_inputs)s

    Returns
    -------
    torch.Tensor, shape = (dim_size, ...)
        Maxima; ``-inf`` for buckets that receive no row.
    """
    if _BACKEND == "torch_scatter":
        out = _torch_scatter.scatter_max(src, index, dim=0, dim_size=dim_size)[0]
        # torch_scatter fills empty buckets with 0; mark them -inf like the torch path.
        count = torch.zeros(dim_size, dtype=torch.long, device=src.device)
        count.index_add_(0, index, torch.ones_like(index))
        empty = (count == 0).view(-1, *([1] * (src.dim() - 1)))
        return out.masked_fill(empty, float("-inf"))
    out = src.new_full((dim_size, *src.shape[1:]), float("-inf"))
    return out.scatter_reduce_(0, _broadcast_index(index, src), src, reduce="amax")


def segment_softmax(scores: Tensor, index: Tensor, dim_size: int) -> Tensor:
    """Softmax of ``scores`` over the items that share the same ``index``.

    Numerically stable (the per-segment maximum is subtracted; it is detached, which leaves
    the softmax and its gradient unchanged). ``-inf`` scores get weight zero; a segment whose
    scores are all ``-inf`` gets zeros, never NaN.

    Parameters
    ----------
    scores : torch.Tensor, shape = (n_items, ...)
        Unnormalised logits (for multi-head attention: ``(nnz, heads)``).
    index : torch.Tensor, shape = (n_items,)
        Segment (for attention: the target) of each item.
    dim_size : int
        Number of segments.

    Returns
    -------
    torch.Tensor, shape = (n_items, ...)
        Weights that sum to one inside every segment that has a finite score.
    """
    if scores.numel() == 0:
        return scores
    seg_max = scatter_max(scores.detach(), index, dim_size)
    seg_max = torch.where(torch.isfinite(seg_max), seg_max, torch.zeros_like(seg_max))
    exp = torch.exp(scores - seg_max.index_select(0, index))
    denom = scatter_sum(exp, index, dim_size).index_select(0, index)
    return exp / denom.clamp_min(torch.finfo(exp.dtype).tiny)


def segment_softmax_sorted(scores: Tensor, index: Tensor, lengths: Tensor) -> Tensor:
    """:func:`segment_softmax` along the **last** dimension, for items sorted by segment.

    Same values and the same conventions as :func:`segment_softmax` (per-segment maximum
    subtracted, ``-inf`` scores get weight zero, all-``-inf`` segments give zeros), computed
    with ``torch.segment_reduce`` over the contiguous runs of a sorted index (no scatter).
    Not differentiable by autograd in a useful way: for kernels with a hand-written backward.

    Parameters
    ----------
    scores : torch.Tensor, shape = (batch, n_items)
        Logits, contiguous; every row is normalised separately (for attention:
        ``(heads, nnz)``).
    index : torch.Tensor, shape = (n_items,)
        Segment of each item, non-decreasing.
    lengths : torch.Tensor, shape = (batch, dim_size)
        Number of items of every segment (``bincount(index)``), repeated for every row.

    Returns
    -------
    torch.Tensor, shape = (batch, n_items)
        Weights that sum to one inside every segment that has a finite score.
    """
    seg_max = torch.segment_reduce(scores, "max", lengths=lengths, axis=1, unsafe=True)
    seg_max = seg_max.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)  # 0 where not finite
    exp = (scores - expand_segments(seg_max, index)).exp_()
    denom = segment_sum_sorted(exp, index, lengths)
    return exp.div_(expand_segments(denom.clamp_min_(torch.finfo(exp.dtype).tiny), index))


def segment_sum_sorted(values: Tensor, index: Tensor, lengths: Tensor) -> Tensor:
    """Sum along the **last** dimension over the segments of a sorted index.

    One row (the fused kernels' case) is summed with ``index_add_`` on a vector: about 2× faster
    on CPU than ``torch.segment_reduce`` on the 3·10⁴ stored values of a MUTAG batch's joined
    problem (``benchmarks/inference_parts.py``), with the same left-to-right order of additions
    within every segment (bit-identical results, tested). Several rows take
    ``torch.segment_reduce``.

    Parameters
    ----------
    values : torch.Tensor, shape = (batch, n_items)
        Values, every row summed separately.
    index : torch.Tensor, shape = (n_items,)
        Segment of each item, non-decreasing (int32 or int64).
    lengths : torch.Tensor, shape = (batch, dim_size)
        Number of items of every segment, repeated for every row.

    Returns
    -------
    torch.Tensor, shape = (batch, dim_size)
        The sums; zero for an empty segment.
    """
    if values.shape[0] == 1:
        out = values.new_zeros(lengths.shape[1])
        return out.index_add_(0, index, values[0]).unsqueeze(0)
    return torch.segment_reduce(values, "sum", lengths=lengths, axis=1, unsafe=True)


def expand_segments(per_segment: Tensor, index: Tensor) -> Tensor:
    """Give every item its segment's value: ``per_segment[:, index]``.

    A single row is gathered as a 1-D tensor: ``index_select`` along dim 0 of a vector is
    ~1.5× faster on CPU than along dim 1 of a ``(1, n)`` matrix (same values).

    Parameters
    ----------
    per_segment : torch.Tensor, shape = (batch, n_segments)
        One value per segment, for every row.
    index : torch.Tensor, shape = (n_items,)
        Segment of each item (int32 or int64).

    Returns
    -------
    torch.Tensor, shape = (batch, n_items)
        ``per_segment[b, index[i]]`` at ``(b, i)``.
    """
    if per_segment.shape[0] == 1:
        return per_segment[0].index_select(0, index).unsqueeze(0)
    return per_segment.index_select(1, index)
