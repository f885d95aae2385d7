"""torch.compile of the N-simplicial layer and model: no graph break, no recompile across batches.

The tuple (complex) mode compiles with the tuples prepared outside the compiled region
(:meth:`NSimplicialTransformerLayer.prepare_tuples` → :class:`TupleIndex`); the eager API with raw
tuples is unchanged and gives the same result.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch._dynamo.utils import counters

from topomodelx_attention.nn.simplicial import (
    NSimplicialTransformer,
    NSimplicialTransformerLayer,
    TupleIndex,
    TupleMask,
    face_sets_to_tuples,
    n_simplicial_attention,
    prepare_tuples,
    tuples_batch,
)

CHANNELS, HEADS = 8, 2


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)
# complexes per batch: warm-up, then two more batch sizes (unequal complex sizes)
COMPLEX_BATCHES = ([4, 6, 5], [7, 3, 5, 6], [3, 9, 4, 4, 8])
SEQUENCE_BATCHES = (3, 5, 2)


def _strip(n: int) -> torch.Tensor:
    """Ordered triples of the triangles (i, i+1, i+2) of a strip of n vertices."""
    i = torch.arange(n - 2)
    return face_sets_to_tuples([torch.stack([i, i + 1, i + 2], 1)], 2, n)


def _complexes(sizes, gen):
    tuples, batch = tuples_batch([_strip(s) for s in sizes], sizes)
    x = torch.randn(batch.numel(), CHANNELS, generator=gen, dtype=torch.float64)
    return x, tuples, batch


def _compiled_matches_eager(fn, batches, make_args, params=None):
    """Compile ``fn`` (dynamic, eager backend): no graph break, equal to eager, no recompile.

    ``make_args(sizes)`` returns the arguments of the compiled call and of the eager reference.
    With ``params``, the gradients of ``out.square().sum()`` are compared too. Graph breaks are
    read from dynamo's counters during this compilation (what ``torch._dynamo.explain`` reports,
    without tracing a second time).
    """
    torch._dynamo.reset()
    counters["graph_break"].clear()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(fn, backend=counter, dynamic=True)
    frames = None
    for step, sizes in enumerate(batches):
        args, eager_args = make_args(sizes)
        out, ref = compiled(*args), fn(*eager_args)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        if params is not None:
            got = torch.autograd.grad(out.square().sum(), params)
            want = torch.autograd.grad(ref.square().sum(), params)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        if step == 0:
            frames = counter.frame_count
            assert not counters["graph_break"], dict(counters["graph_break"])
    # one graph (no break); later batch sizes compile nothing new
    assert frames == 1
    assert counter.frame_count == frames
    torch._dynamo.reset()


def _sequence_case(causal, gen):
    torch.manual_seed(0)
    layer = NSimplicialTransformerLayer(
        CHANNELS, HEADS, 2, simplicial_options={"causal": causal}
    ).double()

    def fn(x):
        return layer(x)

    def make(batch):
        args = (torch.randn(batch, 6, CHANNELS, generator=gen, dtype=torch.float64),)
        return args, args

    return layer, fn, make


@pytest.mark.parametrize("causal", [False, True])
def test_sequence_layer_compiles_without_break_or_recompile(gen, causal):
    """Dense and causal sequences (streaming kernel), forward only (tracing its backward with
    symbolic shapes takes ~10 s: see the slow test below)."""
    _, fn, make = _sequence_case(causal, gen)
    with torch.no_grad():
        _compiled_matches_eager(fn, SEQUENCE_BATCHES, make)


@pytest.mark.slow
def test_sequence_layer_compiled_backward_matches_eager(gen):
    layer, fn, make = _sequence_case(True, gen)
    _compiled_matches_eager(fn, SEQUENCE_BATCHES[:2], make, params=list(layer.parameters()))


def test_tuple_layer_compiles_without_break_or_recompile(gen):
    """Complexes (sparse tuple path on the core), with bias slots and the causal filter."""
    torch.manual_seed(0)
    layer = NSimplicialTransformerLayer(
        CHANNELS, HEADS, 2, simplicial_options={"kv_bias": True, "causal": True}
    ).double()

    def fn(x, tuples):
        return layer(x, tuples=tuples)

    def make(sizes):  # compiled: prepared index; eager reference: the raw tuples
        x, tuples, _ = _complexes(sizes, gen)
        return (x, layer.prepare_tuples(tuples, x.shape[0])), (x, tuples)

    _compiled_matches_eager(fn, COMPLEX_BATCHES, make, params=list(layer.parameters()))


@pytest.mark.slow
def test_model_on_complexes_compiles_without_break_or_recompile(gen):
    torch.manual_seed(0)
    model = NSimplicialTransformer(CHANNELS, CHANNELS, 3, n_layers=2, heads=HEADS).double()

    def fn(x, tuples, batch, num_complexes):
        return model(x, tuples, batch, num_complexes=num_complexes)

    def make(sizes):
        x, tuples, batch = _complexes(sizes, gen)
        return (x, model.prepare_tuples(x, tuples), batch, len(sizes)), (x, tuples, batch, None)

    _compiled_matches_eager(fn, COMPLEX_BATCHES, make)


def test_prepared_tuples_equal_raw_tuples_and_gradients(gen):
    """Eager: a TupleIndex gives the output and gradients of the raw tuple list it came from."""
    x, tuples, batch = _complexes([5, 4], gen)
    x.requires_grad_()
    layer = NSimplicialTransformerLayer(
        CHANNELS, HEADS, 2, simplicial_options={"kv_bias": True, "causal": True}
    ).double()
    index = layer.prepare_tuples(tuples, x.shape[0])
    assert isinstance(index, TupleIndex)
    out_raw, out_prep = layer(x, tuples=tuples), layer(x, tuples=index)
    torch.testing.assert_close(out_prep, out_raw, atol=0, rtol=0)
    g_raw, = torch.autograd.grad(out_raw.square().sum(), x)
    g_prep, = torch.autograd.grad(out_prep.square().sum(), x)
    torch.testing.assert_close(g_prep, g_raw, atol=0, rtol=0)
    model = NSimplicialTransformer(CHANNELS, CHANNELS, 3, heads=HEADS).double()
    torch.testing.assert_close(
        model(x, model.prepare_tuples(x, tuples), batch), model(x, tuples, batch), atol=0, rtol=0
    )


def test_prepared_tuples_must_match_the_inputs(ref):
    q, keys, values = ref.inputs(2, n=5)
    tuples = torch.tensor([[0, 1, 2], [1, 0, -1], [4, 3, 2]])
    with pytest.raises(ValueError, match="bias slot"):  # -1 without a key/value bias
        prepare_tuples(tuples, 5, 5)
    index = prepare_tuples(tuples[[0, 2]], 5, 5)
    out = n_simplicial_attention(q, keys, values, mask=index)
    torch.testing.assert_close(out, n_simplicial_attention(q, keys, values, mask=TupleMask(tuples[[0, 2]])))
    with pytest.raises(ValueError, match="prepared for"):  # index built for other token counts
        n_simplicial_attention(q, keys, values, mask=prepare_tuples(tuples[[0, 2]], 6, 6))
    with pytest.raises(ValueError, match="query indices"):
        prepare_tuples(tuples[[0, 2]], 4, 5)
    layer = NSimplicialTransformerLayer(6, 2, 2, gating="token", simplicial_options={"router_k": 2})
    with pytest.raises(ValueError, match="no tuples"):
        layer.prepare_tuples(tuples, 5)


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [None, True])
def test_compiled_model_on_raw_complex_batches_trains_like_eager_without_recompiling(dynamic):
    """``torch.compile(model)(batch)`` on raw ComplexData batches, as a user calls it: the tuples
    are prepared eagerly at one graph break, one graph serves every batch size (with torch's
    default ``dynamic=None`` too: the first batch has as many complexes as x_0 has columns, which
    duck sizing would unify), outputs and gradients equal eager's."""
    from tests.helpers import assert_compiled_trains_like_eager, load_mutag, to_double
    from topomodelx_attention.transforms import SimplicialCliqueLifting

    lifting = SimplicialCliqueLifting(complex_dim=2)
    complexes = [to_double(lifting(g)) for g in load_mutag(17)]
    torch.manual_seed(0)
    model = NSimplicialTransformer(
        7, 8, 2, n_layers=2, heads=HEADS, pooling="sum", simplicial_options={"kv_bias": True}
    ).double().train()
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend="aot_eager", dynamic=dynamic)
    assert_compiled_trains_like_eager(model, compiled, complexes, (7, 5, 3))
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()
