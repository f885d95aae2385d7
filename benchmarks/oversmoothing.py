"""Over-smoothing of stacked N-simplicial attention (§3.2, §3.2.1 of Dussolle & Liò).

For N = 1, 2, 3 and random inputs (``--batch`` sequences of ``--tokens`` tokens, float64), the
relative residual ``‖res(X)‖_{1,∞} / ‖X‖_{1,∞}`` (distance of the tokens to their mean,
:func:`~topomodelx_attention.nn.simplicial.residual_norm`) is printed after each layer of four
stacks built with :func:`~topomodelx_attention.nn.simplicial.build_stack` (random init, no
training):

* ``pure``          ``X ← Attn(X)`` (Theorem 3.1: doubly exponential collapse),
* ``pure causal``   the same with a causal mask (Theorem 3.4: exponential collapse),
* ``skip``          ``X ← X + Attn(X)``,
* ``skip+LN``       ``X ← X + Attn(LN(X))`` (pre-norm, no MLP),
* ``transformer``   the full pre-norm layer (attention + MLP).

A second column block reports ``‖X‖_{1,∞}`` after the last layer: for ``N ≥ 2`` the value
branch is a product of ``N`` linear maps, so without normalisation the token magnitude itself
vanishes or explodes (``0`` = underflow, ``inf``/``nan`` = overflow), the regime excluded by the
assumption ``‖X‖^{N-1} max ‖W_V‖^N ≤ 1`` of Theorem 3.4. Medians over all sequences of
``--seeds`` seeds; an underflow to ``X = 0`` counts as collapsed (0), an overflow as +inf.

Usage::

    python benchmarks/oversmoothing.py [--quick] [--png oversmoothing.png]
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import Tensor

from topomodelx_attention.files import atomic_output
from topomodelx_attention.nn.simplicial import build_stack, mixed_norm, oversmoothing_profile

VARIANTS = {
    "pure": ("pure", {}),
    "pure causal": ("pure", {"causal": True}),
    "skip": ("skip", {}),
    "skip+LN": ("skip_norm", {}),
    "transformer": ("transformer", {}),
}


def run(order: int, label: str, args: argparse.Namespace, seed: int) -> tuple[Tensor, Tensor]:
    """Relative residual and ‖X‖ per layer and sequence: two tensors (depth + 1, batch)."""
    variant, extra = VARIANTS[label]
    torch.manual_seed(seed)
    x = torch.randn(args.batch, args.tokens, args.channels, dtype=torch.float64)
    stack = build_stack(variant, args.channels, args.depth, heads=args.heads, order=order, simplicial_options=extra)
    stack = stack.double()
    relative = oversmoothing_profile(stack, x)
    norms = [mixed_norm(x)]
    with torch.no_grad():
        h = x
        for layer in stack:
            h = layer(h)
            norms.append(mixed_norm(h))
    return relative, torch.stack(norms)


def summarise(relative: Tensor, norms: Tensor) -> tuple[list[float], list[float]]:
    """Median over sequences per layer; underflow (‖X‖ = 0) counts as 0, overflow as +inf."""
    rel = torch.where(norms == 0, torch.zeros_like(relative), relative)
    rel = torch.where(torch.isfinite(norms) & ~torch.isnan(rel), rel, math.inf)
    norm = torch.where(torch.isnan(norms), math.inf, norms)
    return rel.median(-1).values.tolist(), norm.median(-1).values.tolist()


def cell(value: float, norm: float) -> str:
    if math.isinf(value):
        return "overflow"
    if norm == 0:
        return "0 (underflow)"
    return f"{value:.1e}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--channels", type=int, default=24)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--png", default=None, help="save a plot of the curves (matplotlib)")
    args = parser.parse_args(argv)
    if args.quick:
        args.depth, args.tokens, args.seeds, args.batch = 8, 16, 1, 2
    layers = sorted({0, 1, 2, 4, args.depth // 2, args.depth})
    print(
        f"relative residual ‖res(X)‖/‖X‖ after L layers; {args.tokens} tokens, "
        f"{args.channels} channels, {args.heads} heads, median of {args.seeds} seeds\n"
    )
    header = " | ".join(f"L={L}" for L in layers)
    print(f"| N | stack | {header} | ‖X‖ after L={args.depth} |")
    print("|---:|---|" + "---:|" * (len(layers) + 1))
    curves: dict[tuple[int, str], list[float]] = {}
    for order in args.orders:
        for label in VARIANTS:
            runs = [run(order, label, args, seed) for seed in range(args.seeds)]
            rel, norms = summarise(
                torch.cat([r[0] for r in runs], -1), torch.cat([r[1] for r in runs], -1)
            )
            curves[(order, label)] = rel
            cells = " | ".join(cell(rel[L], norms[L]) for L in layers)
            print(f"| {order} | {label} | {cells} | {norms[-1]:.1e} |")
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(args.orders), figsize=(4 * len(args.orders), 3.2))
        axes = [axes] if len(args.orders) == 1 else list(axes)
        for ax, order in zip(axes, args.orders):
            for label in VARIANTS:
                ys = [
                    max(v, 1e-17) if not math.isnan(v) else float("nan")
                    for v in curves[(order, label)]
                ]
                ax.semilogy(range(args.depth + 1), ys, marker=".", label=label)
            ax.set_title(f"N = {order}")
            ax.set_xlabel("layer")
            ax.set_ylim(1e-17, 10)
        axes[0].set_ylabel("‖res(X)‖ / ‖X‖")
        axes[-1].legend(fontsize=7)
        fig.tight_layout()
        with atomic_output(args.png) as handle:
            fig.savefig(handle, format="png", dpi=120)
        print(f"\nplot saved to {args.png}")


if __name__ == "__main__":
    main()
