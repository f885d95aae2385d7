"""torch.compile of the attention core: no graph break, no recompilation across batch sizes."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

from topomodelx_attention.nn.attention import (
    MultiHeadAttention,
    padded_layout,
    prepare_neighborhood,
)

CHANNELS, HEADS = 8, 2
# warm-up batch, then two more batch sizes (all with padding: unequal complex sizes)
BATCHES = ([3, 5, 4], [6, 2, 7, 5], [2, 9, 3, 3, 8, 1])


def _batch(helpers, sizes, gen, source_sizes=None):
    bt = helpers.batch_vector(sizes)
    bs = bt if source_sizes is None else helpers.batch_vector(source_sizes)
    xt = torch.randn(bt.numel(), CHANNELS, generator=gen, dtype=torch.float64)
    xs = xt if source_sizes is None else torch.randn(bs.numel(), CHANNELS, generator=gen).double()
    mask = helpers.block_mask(bt, bs, 0.5, gen)
    return xt, xs, bt, bs, helpers.to_sparse(mask)


def _inputs(module, helpers, sizes, gen, cross):
    """Per-batch inputs, with the data-dependent parts (layouts, index) computed outside."""
    source_sizes = [s + 1 for s in sizes] if cross else None
    xt, xs, bt, bs, nb = _batch(helpers, sizes, gen, source_sizes)
    prepared = None
    if module.kind != "linear":
        prepared = prepare_neighborhood(nb, xt.shape[0], xs.shape[0])
    layout_t = padded_layout(bt, len(sizes))
    layout = (layout_t, padded_layout(bs, len(sizes))) if cross else layout_t
    return xt, (xs if cross else None), prepared, layout


def _call(module):
    def fn(x_target, x_source, neighborhood, layout):
        return module(x_target, x_source, neighborhood, layout=layout)

    return fn


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "cross"), [("sparse", True), ("dense", False), ("dense", True), ("linear", True)]
)
def test_compiled_attention_has_no_graph_break_and_no_recompile(helpers, gen, kind, cross):
    torch.manual_seed(0)
    module = MultiHeadAttention(CHANNELS, heads=HEADS, kind=kind).double()
    fn = _call(module)
    explanation = torch._dynamo.explain(fn)(*_inputs(module, helpers, BATCHES[1], gen, cross))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()  # explain() leaves its own cache entries
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(fn, backend=counter, dynamic=True)
    for sizes in BATCHES:
        args = _inputs(module, helpers, sizes, gen, cross)
        torch.testing.assert_close(compiled(*args), fn(*args))
    # one compilation, plus at most one when duck sizing at warm-up equated two sizes by
    # chance (e.g. nnz == n); none for the later batch sizes
    assert counter.frame_count <= 2
    frames = counter.frame_count
    args = _inputs(module, helpers, [7, 1, 4, 2, 2, 5, 3], gen, cross)
    torch.testing.assert_close(compiled(*args), fn(*args))
    assert counter.frame_count == frames


@pytest.mark.slow
def test_compiled_aot_backward_matches_eager(helpers, gen):
    """Gradients through the compiled (aot_eager) graph equal the eager ones.

    Sparse kind: the only one whose traced code differs from eager (plain gathers / scatters
    instead of the memory-light custom autograd functions).
    """
    for kind in ("sparse",):
        torch.manual_seed(0)
        module = MultiHeadAttention(CHANNELS, heads=HEADS, kind=kind).double()
        fn = _call(module)
        compiled = torch.compile(fn, backend="aot_eager", dynamic=True)
        for sizes in BATCHES[1:2]:
            x, _, prepared, layout = _inputs(module, helpers, sizes, gen, cross=False)
            grads = []
            for f in (fn, compiled):
                xr = x.clone().requires_grad_()
                f(xr, None, prepared, layout).square().sum().backward()
                grads.append(xr.grad)
            torch.testing.assert_close(grads[1], grads[0])
    torch._dynamo.reset()
