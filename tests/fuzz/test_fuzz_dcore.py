"""Fuzz: one attention core, its fused CPU kernel, composable kernel and custom op agree.

* random neighbourhoods (unsorted, targets without sources, one entry, none), heads, scales,
  edge biases and any subset of inputs needing a gradient: the fused CPU kernel (its math,
  ``sparse_op.csr_attention`` / ``csr_attention_backward``, shared with the custom op) equals
  the composable kernel in float64, outputs and gradients; so does the custom op's eager call
  (without edge bias);
* random kinds and token structures (one complex, batch vectors, a padded layout): every
  kernel's one ``AttentionKernel.forward`` equals the kind's function; a ``plan`` given to a
  kind without a neighbourhood mask, a neighbourhood given to the linear kind, or none given
  to the sparse kind is REJECTED with a message.
"""

from __future__ import annotations

import torch

from tests.fuzz.cases import ACCEPT, REJECT, run_cases
from topomodelx_attention.nn.attention import (
    build_kernel,
    dense_attention,
    linear_attention,
    padded_layout,
    sparse_attention,
    sparse_plan,
)
from topomodelx_attention.nn.attention import sparse as sparse_module
from topomodelx_attention.nn.attention.sparse_op import sparse_attention_csr


def _edges(gen: torch.Generator, n_t: int, n_s: int, nnz: int) -> torch.Tensor:
    t = torch.randint(0, max(1, n_t - 1), (nnz,), generator=gen)  # the last target: no source
    s = torch.randint(0, n_s, (nnz,), generator=gen)
    index = torch.unique(torch.stack([t, s]), dim=1)
    return index[:, torch.randperm(index.shape[1], generator=gen)]  # unsorted: the plan sorts


def _grads(out: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor | None]:
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    wanted = [x for x in inputs if x.requires_grad]
    grads = iter(torch.autograd.grad((out * weights).sum(), wanted))
    return [next(grads) if x.requires_grad else None for x in inputs]


def test_fuzz_fused_kernel_equals_composable(fuzz_seeds):
    def make(seed, rng):
        n_t, n_s = int(rng.choice([1, 2, 9, 40])), int(rng.choice([1, 3, 25]))
        nnz = int(rng.choice([1, 5, 60, 400]))
        heads, d, d_v = int(rng.choice([1, 2, 3])), int(rng.choice([1, 4])), int(rng.choice([1, 3]))
        bias_heads = rng.choice([None, 1, heads])
        scale = float(rng.choice([0.3, 1.0]))
        needs = [bool(x) for x in rng.integers(0, 2, 4)]
        needs[int(rng.integers(0, 3))] = True  # at least one of q, k, v

        def run():
            gen = torch.Generator().manual_seed(seed)
            index = _edges(gen, n_t, n_s, nnz)
            edges = (index[0], index[1])
            kw = {"generator": gen, "dtype": torch.float64}
            q, k = torch.randn(n_t, heads, d, **kw), torch.randn(n_s, heads, d, **kw)
            v = torch.randn(n_s, heads, d_v, **kw)
            bias = None if bias_heads is None else torch.randn(index.shape[1], int(bias_heads), **kw)
            inputs = [x.clone().requires_grad_(need) for x, need in zip((q, k, v), needs)]
            if bias is not None:
                inputs.append(bias.clone().requires_grad_(needs[3]))
            edge_bias = None if bias is None else inputs[3]
            plan = sparse_plan(edges, heads, n_target=n_t, n_source=n_s)
            fused = sparse_attention(
                *inputs[:3], edges, scale=scale, edge_bias=edge_bias, plan=plan
            )
            composable = sparse_module._sparse_attention_composable(
                *inputs[:3], index[0], index[1], scale, edge_bias, 0.0
            )
            assert fused.grad_fn is not None and "Fused" in fused.grad_fn.name(), "not fused"
            torch.testing.assert_close(fused, composable, atol=1e-12, rtol=1e-10)
            fused_grads = _grads(fused, inputs)
            for a, b in zip(fused_grads, _grads(composable, inputs), strict=True):
                assert (a is None) == (b is None), "gradient presence differs"
                if a is not None:
                    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)
            if bias is None:
                op = sparse_attention_csr(*inputs[:3], plan, scale)  # scale on the queries
                torch.testing.assert_close(op, fused, atol=1e-12, rtol=1e-10)
                for a, b in zip(_grads(op, inputs[:3]), fused_grads[:3], strict=True):
                    if a is not None:
                        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)

        description = (
            f"n_t={n_t} n_s={n_s} nnz={nnz} heads={heads} d={d} d_v={d_v} "
            f"bias_heads={bias_heads} scale={scale} needs={needs}"
        )
        return description, ACCEPT, run

    run_cases(fuzz_seeds, "fused sparse kernel", make, offset=52_000)


def test_fuzz_kernel_forward_equals_the_kind_function(fuzz_seeds):
    def make(seed, rng):
        kind = str(rng.choice(["sparse", "dense", "linear"]))
        structure = str(rng.choice(["one", "batch", "layout"]))
        misuse = str(rng.choice(["none", "none", "plan", "neighborhood"]))
        sizes = [int(x) for x in rng.integers(1, 6, int(rng.integers(1, 4)))]
        heads, d = int(rng.choice([1, 2])), int(rng.choice([2, 4]))
        expect = ACCEPT
        if misuse == "plan" and kind != "sparse":
            expect = REJECT
        if misuse == "neighborhood" and kind in ("linear", "sparse"):
            expect = REJECT  # the linear kind takes none, the sparse kind needs one

        def run():
            gen = torch.Generator().manual_seed(seed)
            n = sum(sizes) if structure != "one" else sizes[0]
            batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))[:n]
            q, k, v = (torch.randn(n, heads, d, generator=gen, dtype=torch.float64) for _ in "qkv")
            kernel = build_kernel(kind, heads, d).double().eval()
            edges = _edges(gen, n, n, 3 * n)
            edges = (edges[0], edges[1])
            plan = sparse_plan(edges, heads, n_target=n, n_source=n)
            tokens = {}
            if structure == "batch":
                tokens = {"batch_target": batch, "batch_source": batch}
            elif structure == "layout":
                tokens = {"layout": padded_layout(batch)}
            neighborhood = edges if kind == "sparse" else None
            if misuse == "neighborhood":
                neighborhood = None if kind == "sparse" else edges
            extra = {"plan": plan} if misuse == "plan" or kind == "sparse" else {}
            out = kernel(q, k, v, neighborhood, **tokens, **extra)
            assert out.shape == (n, heads, d) and torch.isfinite(out).all()
            if kind == "sparse":
                want = sparse_attention(q, k, v, edges)
            elif kind == "dense":
                options = {"bias": neighborhood, "bias_scale": kernel.bias_scale}
                want = dense_attention(q, k, v, **tokens, **(options if neighborhood else {}))
            else:
                want = linear_attention(q, k, v, **tokens, projection=kernel.projection)
            torch.testing.assert_close(out, want, atol=1e-12, rtol=1e-10)

        description = f"kind={kind} structure={structure} misuse={misuse} sizes={sizes}"
        return description, expect, run

    run_cases(fuzz_seeds, "kernel forward", make, offset=53_000)
