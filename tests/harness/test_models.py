"""Model registry: every model maps a batch to one prediction per complex."""

import pytest
import torch
from torch_geometric.loader import DataLoader

from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.datasets import prepare_dataset, prune_keys
from topomodelx_attention.harness.models import MODELS, build_model, get_spec, register_model

ALL_MODELS = ("cellular_transformer", "gin", "cwn", "sccnn", "tokengt", "tokengt_cell", "n_simplicial")


@pytest.fixture(scope="module")
def prepared_by_model(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    out = {}
    for name in ALL_MODELS:
        cfg = compose_config(["dataset.max_graphs=6", "model.params.hidden_channels=8"], model=name)
        out[name] = (cfg, prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, cache))
    return out


@pytest.mark.parametrize("name", ALL_MODELS)
def test_models_predict_per_complex_from_their_keys_only(prepared_by_model, name):
    cfg, prepared = prepared_by_model[name]
    model = build_model(name, cfg.model.params, prepared.info)
    spec = get_spec(name)
    complexes = [c.clone() for c in prepared.complexes]
    prune_keys(complexes, spec.keys(model, prepared.info))
    batch = next(iter(DataLoader(complexes, batch_size=6)))
    out = model(batch)
    assert out.shape == (6, 2)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_every_model_has_a_config():
    assert set(ALL_MODELS) == set(MODELS)


def test_unknown_and_planned_models():
    with pytest.raises(ValueError, match="registered models"):
        get_spec("nope")
    assert {"tokengt", "tokengt_cell", "n_simplicial"} <= set(MODELS)


def test_invalid_params_name_the_model(prepared_by_model):
    _, prepared = prepared_by_model["gin"]
    with pytest.raises(TypeError, match="model 'gin'"):
        build_model("gin", {"hidden": 3}, prepared.info)


def test_register_model_extension_point(prepared_by_model):
    _, prepared = prepared_by_model["gin"]

    @register_model("constant_test_model", "graph", lambda model, info: {"x_0", "batch_0"})
    def build(params, info):
        return torch.nn.Linear(1, info.out_channels)

    try:
        assert isinstance(build_model("constant_test_model", {}, prepared.info), torch.nn.Linear)
    finally:
        MODELS.pop("constant_test_model")
    with pytest.raises(ValueError, match="domain"):
        register_model("x", "hypergraph", lambda m, i: set())
