"""torch.export of the model families on their prepared inputs; torch.jit.script refused clearly.

``torch.export.export(model, (model.prepare(batch),))`` works because the prepared inputs are
registered pytree dataclasses (``nn/_export.py``); the exported program equals the eager model
and survives ``torch.export.save`` / ``load``. TorchScript cannot compile the package: without
the ``__prepare_scriptable__`` hook it fails deep in its frontend, with it one ``TypeError`` says
what is supported.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers import batch_slice, load_mutag
from topomodelx_attention.data import ComplexDataLoader
from topomodelx_attention.nn._export import REFUSED
from topomodelx_attention.nn.attention import MultiHeadAttention
from topomodelx_attention.nn.cell import CellularInputs, CellularTransformer
from topomodelx_attention.nn.graph import TokenGT, TokenGTInputs
from topomodelx_attention.nn.simplicial import (
    NSimplicialTransformer,
    TupleIndex,
    face_sets_to_tuples,
    tuples_batch,
)
from topomodelx_attention.transforms import CellCycleLifting, LaplacianNodeId


@pytest.fixture(scope="module")
def mutag():
    return load_mutag(6)


@pytest.fixture(scope="module")
def cell_batch(mutag):
    complexes = CellCycleLifting().lift_many(mutag[:4])
    return next(iter(ComplexDataLoader(complexes, batch_size=4)))


def _export_matches_eager(model, args, tmp_path, kwargs=None):
    """Export ``model(*args, **kwargs)``, compare with eager, save, load and compare again."""
    kwargs = kwargs or {}
    with torch.no_grad():
        expected = model(*args, **kwargs)
        program = torch.export.export(model, args, kwargs)
        torch.testing.assert_close(program.module()(*args, **kwargs), expected, atol=1e-5, rtol=1e-5)
        path = tmp_path / "model.pt2"
        torch.export.save(program, path)
        loaded = torch.export.load(path)
        torch.testing.assert_close(loaded.module()(*args, **kwargs), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_cellular_transformer_exports_on_its_prepared_inputs(cell_batch, tmp_path):
    torch.manual_seed(0)
    model = CellularTransformer([7, 4, 7], 8, 2, heads=2).eval()
    with torch.no_grad():
        prepared = model.prepare(cell_batch)
    assert isinstance(prepared, CellularInputs)
    _export_matches_eager(model, (prepared,), tmp_path)


@pytest.mark.slow
def test_tokengt_exports_on_its_prepared_inputs(mutag, tmp_path):
    torch.manual_seed(0)
    graphs = [LaplacianNodeId(4)(g) for g in mutag[:4]]
    model = TokenGT(7, 4, 8, 2, n_layers=1, heads=2, node_id_dim=4, kind="dense").eval()
    prepared = model.prepare(batch_slice(graphs, 4))
    assert isinstance(prepared, TokenGTInputs)
    _export_matches_eager(model, (prepared,), tmp_path)


@pytest.mark.slow
def test_n_simplicial_transformer_exports_with_prepared_tuples(tmp_path):
    sizes = [4, 6, 5]
    strips = []
    for n in sizes:  # ordered triples of the triangles (i, i+1, i+2) of a strip of n vertices
        i = torch.arange(n - 2)
        strips.append(face_sets_to_tuples([torch.stack([i, i + 1, i + 2], 1)], 2, n))
    tuples, batch = tuples_batch(strips, sizes)
    torch.manual_seed(0)
    x = torch.randn(batch.numel(), 8)
    model = NSimplicialTransformer(8, 8, 3, n_layers=1, heads=2).eval()
    prepared = model.prepare_tuples(x, tuples)
    assert isinstance(prepared, TupleIndex)
    _export_matches_eager(model, (x, prepared, batch), tmp_path, {"num_complexes": len(sizes)})


def _modules():
    return [
        CellularTransformer([7, 4, 7], 8, 2, heads=2),
        TokenGT(7, 4, 8, 2, n_layers=1, heads=2, node_id_dim=4),
        NSimplicialTransformer(8, 8, 3, n_layers=1, heads=2),
        MultiHeadAttention(8, heads=2),
    ]


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_torchscript_is_refused_with_one_clear_error(monkeypatch):
    models = _modules()
    # the unprotected path: TorchScript's frontend fails deep inside on the package's Python
    for cls in REFUSED:
        monkeypatch.delattr(cls, "__prepare_scriptable__")
    with pytest.raises(Exception) as naive:  # noqa: PT011 - whatever TorchScript raises
        torch.jit.script(models[0])
    assert not isinstance(naive.value, TypeError) and "torch.export" not in str(naive.value)
    monkeypatch.undo()
    for model in models:
        with pytest.raises(TypeError, match=rf"torch\.jit\.script does not support {type(model).__name__}.*torch\.compile.*torch\.export"):
            torch.jit.script(model)
    # a user's module holding one of ours is refused too (the hook runs on submodules)
    wrapper = torch.nn.Sequential(torch.nn.Identity(), MultiHeadAttention(8, heads=2))
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        torch.jit.script(wrapper)
