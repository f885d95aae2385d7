r"""Attention dropout: the one routine that draws its factors, eager and under ``torch.compile``.

Attention dropout multiplies every attention weight by a factor :math:`m / (1 - p)` with
:math:`m \sim \mathrm{Bernoulli}(1 - p)`, the factors :func:`torch.nn.functional.dropout` applies.
:func:`dropout_factors` draws them as ``(U >= p) / (1 - p)`` from uniforms ``U`` of
:func:`torch.rand` (the same distribution); :func:`softmax_dropout` is the softmax of the dense
kernel followed by them. Measured on one CPU thread (``benchmarks/compile.py``; a
``(32, 4, 60, 60)`` weight tensor, forward + backward):

* eager: ``torch.rand`` + compare costs 0.6–1.2 ms where ``bernoulli_`` (what ``F.dropout`` and
  the math path of ``scaled_dot_product_attention`` call) costs 2.1 ms;
* compiled: inductor's own random-number kernels take 3.2–3.5 ms for the same draw, and its
  generated softmax kernels made the compiled dense attention with dropout 1.5–2× slower than
  eager. While ``torch.compile`` traces, the uniforms therefore come from the custom op
  ``topomodelx_attention::uniform_like`` and the softmax + dropout (forward and backward) from
  ``topomodelx_attention::softmax_dropout`` / ``softmax_dropout_backward``: eager ATen kernels
  behind opaque ops, with fake implementations for the shapes. ``uniform_like`` is tagged
  ``nondeterministic_seeded`` (the partitioner saves its output for the backward instead of
  recomputing it) and takes the tensor it draws for, so that two draws of the same shape in
  one graph stay two draws. The dense kernel's attention dropout, which attends by size groups
  (data-dependent), runs whole as one op while compiling
  (``topomodelx_attention::grouped_dropout_attention`` of ``dense.py``).

The attention kernels with dropout draw their factors here: dense, sparse (composable and
fused), and N-simplicial (tuples, and the streaming tiles with their per-tile generator). Kernels
given the same generator state draw the same factors, eager or compiled. The one exception is the
N-simplicial ``N = 1`` path without mask, which is a plain ``scaled_dot_product_attention`` call
with SDPA's own dropout.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["dropout_factors", "softmax_dropout"]

_NAMESPACE = "topomodelx_attention"


def _define_ops() -> tuple[object, object]:
    """Define the ops once per process (a reloaded module finds them defined)."""
    namespace = getattr(torch.ops, _NAMESPACE)
    if hasattr(namespace, "uniform_like"):
        return namespace.uniform_like, namespace.softmax_dropout

    @torch.library.custom_op(
        f"{_NAMESPACE}::uniform_like", mutates_args=(), tags=(torch.Tag.nondeterministic_seeded,)
    )
    def uniform_like(like: Tensor) -> Tensor:
        return torch.rand(like.shape, dtype=like.dtype, device=like.device)

    @uniform_like.register_fake
    def _(like):
        return torch.empty_like(like, memory_format=torch.contiguous_format)

    @torch.library.custom_op(f"{_NAMESPACE}::softmax_dropout", mutates_args=())
    def forward_op(scores: Tensor, factors: Tensor) -> tuple[Tensor, Tensor]:
        probs = torch.softmax(scores, dim=-1)
        return probs * factors, probs

    @forward_op.register_fake
    def _(scores, factors):
        return torch.empty_like(scores), torch.empty_like(scores)

    @torch.library.custom_op(f"{_NAMESPACE}::softmax_dropout_backward", mutates_args=())
    def backward_op(grad: Tensor, probs: Tensor, factors: Tensor) -> Tensor:
        return torch._softmax_backward_data(grad * factors, probs, -1, probs.dtype)

    @backward_op.register_fake
    def _(grad, probs, factors):
        return torch.empty_like(probs)

    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(output[1], inputs[1])

    def backward(ctx, grad: Tensor, grad_probs: Tensor | None):
        probs, factors = ctx.saved_tensors
        return backward_op(grad.contiguous(), probs, factors), None

    forward_op.register_autograd(backward, setup_context=setup_context)
    return uniform_like, forward_op


_UNIFORM_LIKE, _SOFTMAX_DROPOUT = _define_ops()


def dropout_factors(
    shape: Sequence[int],
    p: float,
    *,
    dtype: torch.dtype,
    device: torch.device,
    generator: torch.Generator | None = None,
    out: Tensor | None = None,
) -> Tensor:
    r"""Dropout factors :math:`\mathrm{Bernoulli}(1 - p) / (1 - p)` of the given shape.

    Parameters
    ----------
    shape : sequence of int
        Shape of the attention weights the factors multiply.
    p : float
        Dropout probability in ``[0, 1)`` (checked by the callers with
        :func:`~topomodelx_attention.nn.attention.heads.check_dropout`).
    dtype : torch.dtype
        Floating dtype of the factors (the uniforms are drawn in it).
    device : torch.device
        Device of the factors.
    generator : torch.Generator, optional
        Draw from this generator instead of the default one (eager only): the streaming
        N-simplicial kernel reseeds one per tile to redraw the same factors in its backward.
    out : torch.Tensor, optional
        A contiguous tensor of this shape, dtype and device to draw into (eager only; the same
        draw as without it): the grouped dense kernel writes its factors into its saved buffer.

    Returns
    -------
    torch.Tensor, shape = shape
        ``0`` with probability ``p``, else ``1 / (1 - p)``: one ``torch.rand`` draw from
        ``generator`` or the default generator of ``device``, eager or (through
        ``uniform_like``) compiled.
    """
    if generator is None and out is None and torch.compiler.is_compiling():
        uniform = _UNIFORM_LIKE(torch.empty(list(shape), dtype=dtype, device=device))
    else:
        if out is None:
            uniform = torch.rand(list(shape), dtype=dtype, device=device, generator=generator)
        else:  # torch.rand is uniform_ on a new tensor: the same numbers
            uniform = out.view(list(shape)).uniform_(generator=generator)
        # in place: the uniforms become the factors (no bool mask, no second float tensor)
        return uniform.ge_(p).mul_(1.0 / (1.0 - p))
    return (uniform >= p).to(dtype) * (1.0 / (1.0 - p))


def softmax_dropout(scores: Tensor, p: float) -> Tensor:
    r"""``softmax(scores, dim=-1)`` times fresh :func:`dropout_factors` (attention dropout).

    Parameters
    ----------
    scores : torch.Tensor, shape = (..., n_source)
        Attention logits, masked entries ``-inf``; no row may be masked entirely.
    p : float
        Dropout probability in ``[0, 1)``.

    Returns
    -------
    torch.Tensor, shape = scores.shape
        The dropped attention weights; differentiable (the custom ops while compiling,
        autograd of the eager ops otherwise, which also supports double backward).
    """
    factors = dropout_factors(scores.shape, p, dtype=scores.dtype, device=scores.device)
    if torch.compiler.is_compiling():
        return _SOFTMAX_DROPOUT(scores.contiguous(), factors)[0]
    return torch.softmax(scores, dim=-1) * factors
