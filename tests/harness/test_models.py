"""Model registry: every model maps a batch to one prediction per complex."""

import pytest
import torch
from torch_geometric.loader import DataLoader

from tests.helpers import HARNESS_MODELS as ALL_MODELS
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.models import (
    MODELS,
    build_model,
    get_spec,
    register_model,
)
from topomodelx_attention.harness.prepare import prepare_dataset, prune_keys

EDGE_GRAPH_MODELS = ("gine", "gps", "graph_transformer")


@pytest.fixture(scope="module")
def prepared_by_model(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    out = {}
    for name in ALL_MODELS:
        extra = ["model.params.pe_hidden_channels=4"] if name in ("gps", "graph_transformer") else []
        cfg = compose_config(["dataset.max_graphs=6", "model.params.hidden_channels=8", *extra], model=name)
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


def test_unknown_models():
    with pytest.raises(ValueError, match="registered models"):
        get_spec("nope")
    assert {"tokengt", "tokengt_cell", "n_simplicial", "gps", "gine", "graph_transformer"} <= set(MODELS)


def test_tokengt_gets_its_node_id_width_not_a_pe_width(prepared_by_model):
    _, prepared = prepared_by_model["tokengt"]
    assert prepared.info.node_id_channels == 16 and prepared.info.pe_channels is None
    _, prepared = prepared_by_model["gps"]
    assert prepared.info.pe_channels == 16 and prepared.info.node_id_channels is None


def test_gps_positional_encoding_is_rwse(prepared_by_model):
    from torch_geometric.transforms import AddRandomWalkPE

    from topomodelx_attention.datasets.tu import load_tu_dataset

    _, prepared = prepared_by_model["gps"]
    graph = load_tu_dataset("MUTAG")[0]
    expected = AddRandomWalkPE(16)(graph).random_walk_pe
    assert torch.allclose(prepared.complexes[0].pe_0, expected, atol=1e-5)


@pytest.mark.parametrize("name", EDGE_GRAPH_MODELS)
def test_edge_graph_models_read_edge_features_and_give_edgeless_complexes_a_row(prepared_by_model, name):
    cfg, prepared = prepared_by_model[name]
    torch.manual_seed(0)
    model = build_model(name, cfg.model.params, prepared.info).eval()
    complexes = [c.clone() for c in prepared.complexes]
    prune_keys(complexes, get_spec(name).keys(model, prepared.info))
    batch = next(iter(DataLoader(complexes, batch_size=6)))
    out = model(batch)
    changed = batch.clone()
    changed.x_1 = changed.x_1.flip(-1)
    assert not torch.allclose(model(changed), out, atol=1e-6)  # bond features are read
    empty = complexes[0].clone()  # a complex without edges still gets its row
    for key, width in (("x_1", empty.x_1.shape[1]),):
        empty[key] = empty[key].new_zeros(0, width)
    empty.incidence_1 = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0),
                                                (empty.x_0.shape[0], 0)).coalesce()
    empty.shape = torch.tensor([[empty.x_0.shape[0], 0]])
    mixed = next(iter(DataLoader([empty, complexes[1]], batch_size=2)))
    result = model(mixed)
    assert result.shape == (2, 2) and torch.isfinite(result).all()


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


# ------------------------------------------------------------------ the first loss of every model
def _write_six_class_tu(root):
    """An ENZYMES-like TU set: 24 ring graphs of 6 classes, one-hot labels and node attributes in the tens."""
    import numpy as np

    from tests.helpers import run_benchmark

    written = run_benchmark("ring_tu", "--out", root, "--name", "RINGS6", "--graphs", 24, "--seed", 0)
    assert written.returncode == 0, written.stderr
    raw = root / "RINGS6" / "raw"
    labels = np.array([int(v) for v in (raw / "RINGS6_node_labels.txt").read_text().split()])
    rng = np.random.default_rng(0)
    attributes = np.abs(rng.normal(30.0, 20.0, (len(labels), 4))) + 10.0 * labels[:, None]
    (raw / "RINGS6_node_attributes.txt").write_text(
        "".join(", ".join(f"{v:.2f}" for v in row) + "\n" for row in attributes)
    )
    return root


def test_every_model_starts_near_chance_on_a_multi_class_set(tmp_path):
    """Before any step, the cross-entropy of every registered model is near ln C (6 classes).

    Sum pooling over ~30-vertex complexes, unnormalised sum aggregations (CWN, SCCNN) and node
    attributes in the tens made the first losses 5-100x ln C, from which training did not recover.
    """
    import math

    data = _write_six_class_tu(tmp_path / "data")
    failures = []
    for name in sorted(MODELS):
        cfg = compose_config([f"dataset.data_dir={data}", "dataset.use_node_attr=true"], dataset="RINGS6", model=name)
        prepared = prepare_dataset(cfg.dataset, cfg.model.lifting, cfg.model.pe, tmp_path / "cache")
        classes = prepared.info.out_channels
        assert classes == 6
        for seed in range(3):
            torch.manual_seed(seed)
            model = build_model(name, cfg.model.params, prepared.info).train()  # as the first training step
            complexes = [c.clone() for c in prepared.complexes]
            prune_keys(complexes, get_spec(name).keys(model, prepared.info))
            batch = next(iter(DataLoader(complexes, batch_size=len(complexes))))
            with torch.no_grad():
                loss = float(torch.nn.functional.cross_entropy(model(batch), batch.y.view(-1)))
            if not 0.5 * math.log(classes) <= loss <= 2 * math.log(classes):
                failures.append(f"{name} seed {seed}: {loss:.2f}")
    assert not failures, f"first losses outside [0.5, 2] x ln 6 = [0.90, 3.58]: {failures}"
