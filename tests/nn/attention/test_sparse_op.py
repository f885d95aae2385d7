"""The fused sparse kernel as a custom op (what ``torch.compile`` traces on CPU with a plan)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from topomodelx_attention.nn.attention import prepare_neighborhood, sparse_attention, sparse_plan
from topomodelx_attention.nn.attention.sparse_op import sparse_attention_csr

HEADS, D, DV = 3, 4, 5
OP = torch.ops.topomodelx_attention.sparse_attention_csr.default


def _problem(gen: torch.Generator, shuffle: bool = False):
    n_t, n_s = 12, 9
    t = torch.randint(0, n_t - 2, (40,), generator=gen)  # the last two targets have no source
    s = torch.randint(0, n_s, (40,), generator=gen)
    index = torch.unique(torch.stack([t, s]), dim=1)
    if shuffle:
        index = index[:, torch.randperm(index.shape[1], generator=gen)]
    kw = {"generator": gen, "dtype": torch.float64}
    q, k = torch.randn(n_t, HEADS, D, **kw), torch.randn(n_s, HEADS, D, **kw)
    v = torch.randn(n_s, HEADS, DV, **kw)
    edges = (index[0], index[1])
    return q, k, v, edges, sparse_plan(edges, HEADS, n_target=n_t, n_source=n_s)


def _output_and_grads(fn, q, k, v):
    inputs = [x.clone().requires_grad_() for x in (q, k, v)]
    out = fn(*inputs)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    (out * weights).sum().backward()
    return [out] + [x.grad for x in inputs]


def test_op_passes_torch_library_opcheck(gen):
    """Schema, fake (meta) implementation and autograd registration agree with the kernel."""
    q, k, v, _, plan = _problem(gen)
    pattern = [plan.crow, plan.col, plan.row, plan.lengths, plan.crow_t, plan.col_t, plan.to_transposed]
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), pattern, None)
    torch.library.opcheck(OP, args)


@pytest.mark.parametrize("shuffle", [False, True])
def test_op_equals_eager_sparse_attention(gen, shuffle):
    """Output and q/k/v gradients of the op = the eager kernel's (empty targets: zeros)."""
    q, k, v, edges, plan = _problem(gen, shuffle)
    want = _output_and_grads(lambda *x: sparse_attention(*x, edges, plan=plan), q, k, v)
    got = _output_and_grads(lambda *x: sparse_attention_csr(*x, plan, D**-0.5), q, k, v)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)
    assert torch.equal(got[0][-2:], torch.zeros_like(got[0][-2:]))


def test_compiled_sparse_attention_with_a_plan_traces_the_op(gen):
    """Under torch.compile the plan's call is one custom-op node (no gathers / scatters traced)."""
    q, k, v, edges, plan = _problem(gen)
    index = prepare_neighborhood(edges, q.shape[0], k.shape[0])  # the compilable form
    targets = []

    def backend(gm, example_inputs):
        targets.extend(node.target for node in gm.graph.nodes if node.op.startswith("call_"))
        return gm.forward

    def fn(q, k, v):
        return sparse_attention(q, k, v, index, plan=plan)

    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), fn(q, k, v), atol=1e-12, rtol=1e-10)
    assert torch.ops.topomodelx_attention.sparse_attention_csr in targets or OP in targets
    assert "index_select" not in targets and "scatter_reduce_" not in targets  # composable path
    torch._dynamo.reset()
