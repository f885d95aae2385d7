"""TopoBench-ready exports: wrapper + backbone on a TopoBench-like batch, and the YAML targets."""

import importlib

import pytest
import torch
import yaml
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from topomodelx_attention.data.datasets import load_tu_dataset
from topomodelx_attention.harness.config import CONFIG_DIR
from topomodelx_attention.harness.topobench import (
    CellularTransformerBackbone,
    TopoBenchWrapper,
    to_complex_data,
)
from topomodelx_attention.transforms import CellCycleLifting


def _topobench_like_batch(tmp_path, hidden):
    """A plain PyG Data (not ComplexData) holding encoded x_r, batch_r and neighbourhoods."""
    dataset = load_tu_dataset("MUTAG", root=tmp_path)
    complexes = CellCycleLifting().lift_many([dataset[i] for i in range(4)])
    batch = next(iter(DataLoader(complexes, batch_size=4)))
    keys = ["y", "batch_0", "batch_1", "batch_2", "adjacency_0", "coadjacency_1",
            "coadjacency_2", "incidence_1", "incidence_2"]
    plain = Data(**{key: batch[key] for key in keys})
    torch.manual_seed(0)
    for rank in range(3):  # what TopoBench's AllCellFeatureEncoder produces
        plain[f"x_{rank}"] = torch.randn(batch[f"x_{rank}"].shape[0], hidden)
    plain["incidence_1"] = -plain["incidence_1"]  # signs must not matter
    return plain, batch


def test_wrapper_returns_topobench_model_out(tmp_path):
    hidden = 8
    plain, batch = _topobench_like_batch(tmp_path, hidden)
    backbone = CellularTransformerBackbone(hidden, hidden, n_layers=1, heads=2)
    wrapper = TopoBenchWrapper(backbone, out_channels=hidden, num_cell_dimensions=3)
    out = wrapper(plain)
    assert set(out) == {"labels", "batch_0", "x_0", "x_1", "x_2"}
    assert torch.equal(out["labels"], plain.y)
    for rank in range(3):
        assert out[f"x_{rank}"].shape == (batch[f"x_{rank}"].shape[0], hidden)
        assert torch.isfinite(out[f"x_{rank}"]).all()
    # residual connection + LayerNorm, as TopoBench's AbstractWrapper does
    assert torch.allclose(out["x_0"].mean(-1), torch.zeros(out["x_0"].shape[0]), atol=1e-5)


def test_backbone_gives_every_parameter_a_gradient(tmp_path):
    # DDP raises on parameters without gradient: the backbone must not own an unused readout
    hidden = 8
    plain, _ = _topobench_like_batch(tmp_path, hidden)
    backbone = CellularTransformerBackbone(hidden, hidden, n_layers=2, heads=2)
    loss = sum(h.square().sum() for h in backbone(plain))
    loss.backward()
    missing = [name for name, p in backbone.named_parameters() if p.grad is None]
    assert not missing, f"parameters without gradient: {missing}"
    assert not any("readout" in name for name, _ in backbone.named_parameters())
    with pytest.raises(ValueError, match="out_channels=None"):
        backbone.transformer(to_complex_data(plain, 2, backbone.neighborhoods))


def test_topobench_yaml_targets_point_into_the_package():
    path = CONFIG_DIR / "topobench" / "model" / "cell" / "tma_cellular_transformer.yaml"
    cfg = yaml.safe_load(path.read_text())
    for section in ("backbone", "backbone_wrapper"):
        module, _, name = cfg[section]["_target_"].rpartition(".")
        assert module.startswith("topomodelx_attention.")
        assert hasattr(importlib.import_module(module), name)
    assert cfg["backbone_wrapper"]["_partial_"] is True


def test_backbone_rejects_batches_without_cell_batch_vectors(tmp_path):
    plain, _ = _topobench_like_batch(tmp_path, 8)
    del plain["batch_1"]
    backbone = CellularTransformerBackbone(8, 8, n_layers=1, heads=2)
    with pytest.raises(ValueError, match="batch_1"):
        backbone(plain)


# Resolvers TopoBench registers (topobench/run.py) plus OmegaConf's built-in ones.
TOPOBENCH_RESOLVERS = {
    "get_default_metrics", "get_default_trainer", "get_default_transform",
    "get_flattened_channels", "get_required_lifting", "get_monitor_metric", "get_monitor_mode",
    "get_non_relational_out_channels", "infer_in_channels", "infer_num_cell_dimensions",
    "infer_topotune_num_cell_dimensions", "parameter_multiplication",
    "oc.select", "oc.env", "oc.create", "oc.decode", "oc.deprecated", "oc.dict.keys", "oc.dict.values",
}


def _topobench_yamls():
    return sorted((CONFIG_DIR / "topobench").rglob("*.yaml"))


def test_topobench_yamls_use_only_topobench_resolvers():
    import re

    paths = _topobench_yamls()
    assert paths
    for path in paths:
        used = set(re.findall(r"\$\{([\w.]+):", path.read_text()))
        unknown = used - TOPOBENCH_RESOLVERS
        assert not unknown, f"{path.name} uses resolvers TopoBench does not define: {unknown}"


def test_backbone_pads_ranks_topobench_expects_but_the_lifting_lacks(tmp_path):
    # TopoBench's default max_dim_if_lifted=3 gives num_cell_dimensions=4 while the cycle lifting
    # stops at rank 2: the wrapper must return an empty x_3 and the batch must gain incidence_3.
    hidden = 8
    plain, batch = _topobench_like_batch(tmp_path, hidden)
    backbone = CellularTransformerBackbone(hidden, hidden, n_layers=1, heads=2, num_cell_dimensions=4)
    wrapper = TopoBenchWrapper(backbone, out_channels=hidden, num_cell_dimensions=4)
    out = wrapper(plain)
    assert out["x_3"].shape == (0, hidden)
    assert plain["incidence_3"].shape == (batch["x_2"].shape[0], 0)
    for rank in range(3):
        assert out[f"x_{rank}"].shape == (batch[f"x_{rank}"].shape[0], hidden)
        assert torch.isfinite(out[f"x_{rank}"]).all()


def test_backbone_rank_arguments_must_agree():
    with pytest.raises(ValueError, match="max_rank"):
        CellularTransformerBackbone(8, 8, max_rank=2, num_cell_dimensions=4)


def test_n_simplicial_backbone_runs_on_a_topobench_batch_and_every_parameter_learns(tmp_path):
    from topomodelx_attention.harness.topobench import NSimplicialBackbone

    hidden = 8
    plain, batch = _topobench_like_batch(tmp_path, hidden)
    backbone = NSimplicialBackbone(hidden, 12, n_layers=2, heads=2, num_cell_dimensions=4, kv_bias=True)
    wrapper = TopoBenchWrapper(backbone, out_channels=hidden, num_cell_dimensions=4)
    out = wrapper(plain)
    for rank in range(3):
        assert out[f"x_{rank}"].shape == (batch[f"x_{rank}"].shape[0], hidden)
        assert torch.isfinite(out[f"x_{rank}"]).all()
    assert out["x_3"].shape == (0, hidden)
    out["x_0"].square().sum().backward()
    missing = [name for name, p in backbone.named_parameters() if p.grad is None]
    assert not missing, missing


def test_every_topobench_yaml_targets_exist():
    for path in _topobench_yamls():
        cfg = yaml.safe_load(path.read_text())
        for section in ("backbone", "backbone_wrapper"):
            module, _, name = cfg[section]["_target_"].rpartition(".")
            if module.startswith("topomodelx_attention."):
                assert hasattr(importlib.import_module(module), name), (path.name, name)


@pytest.mark.parametrize("identifiers", ["sum", "ordered"])
def test_order_k_tokengt_backbone_on_a_topobench_batch(tmp_path, identifiers):
    from topomodelx_attention.harness.topobench import OrderKTokenGTBackbone

    hidden = 8
    plain, batch = _topobench_like_batch(tmp_path, hidden)
    backbone = OrderKTokenGTBackbone(
        hidden, 16, n_layers=1, heads=2, node_id_dim=8, num_cell_dimensions=3,
        identifiers=identifiers, max_cell_size=20,
    )
    wrapper = TopoBenchWrapper(backbone, out_channels=hidden, num_cell_dimensions=3)
    out = wrapper(plain)
    for rank in range(3):
        assert out[f"x_{rank}"].shape == (batch[f"x_{rank}"].shape[0], hidden)
        assert torch.isfinite(out[f"x_{rank}"]).all()
    sum(out[f"x_{r}"].square().sum() for r in range(3)).backward()
    missing = [name for name, p in backbone.named_parameters() if p.grad is None]
    assert not missing, missing
    backbone.eval()  # evaluation identifiers come from a fixed seed: deterministic
    with torch.no_grad():
        first, second = backbone(plain.clone()), backbone(plain.clone())
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_registered_pe_builds_from_topobench_kwargs_and_runs_on_topobench_data(tmp_path):
    from topomodelx_attention.harness.topobench import (
        TOPOBENCH_TRANSFORMS,
        register_topobench_transforms,
    )

    registry = {}
    assert register_topobench_transforms(registry) == list(TOPOBENCH_TRANSFORMS)
    # what TopoBench's DataTransform does: TRANSFORMS[name](transform_name=..., **config)
    pe = registry["CellularRandomWalkPE"](transform_name="CellularRandomWalkPE",
                                          transform_type="data manipulation", dim=4)
    dataset = load_tu_dataset("MUTAG", root=tmp_path)
    lifted = CellCycleLifting()(dataset[0])
    plain = Data(**{k: lifted[k] for k in lifted.keys() if k.startswith(("x_", "incidence_"))})
    out = pe(plain)
    for rank in range(3):
        assert out[f"pe_{rank}"].shape == (lifted[f"x_{rank}"].shape[0], 4)
        assert torch.isfinite(out[f"pe_{rank}"]).all()


def test_complex_count_includes_trailing_complexes_without_vertices(tmp_path):
    plain, _ = _topobench_like_batch(tmp_path, 8)
    keys = ["incidence_1", "incidence_2"]
    assert to_complex_data(plain, 2, keys).num_complexes == 4  # no count given: from batch_0
    plain.num_graphs = 5  # a PyG Batch whose last complex has no cells
    data = to_complex_data(plain, 2, keys)
    assert data.num_complexes == 5
    assert data.shape.shape == (5, 3) and int(data.shape[4].sum()) == 0
