"""Data sets of the harness: splits, loaders on tiny files, cached lifting + PE."""

import numpy as np
import pytest
import torch

import topomodelx_attention.harness.datasets as datasets
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.harness.datasets import (
    cache_key,
    load_graphs,
    prepare_dataset,
    prune_keys,
    random_split,
)

CELL = {"_target_": "topomodelx_attention.transforms.CellCycleLifting"}
PE = {"_target_": "topomodelx_attention.transforms.BarycentricRandomWalkPE", "dim": 4}


@pytest.mark.parametrize("n", [10, 188, 1113])
def test_random_split_is_disjoint_50_25_25_and_reproducible(n):
    train, val, test = random_split(n, seed=3)
    assert len(train) == round(0.5 * n) and len(val) == round(0.25 * n)
    assert len(train) + len(val) + len(test) == n
    union = np.concatenate([train, val, test])
    assert np.array_equal(np.sort(union), np.arange(n))  # disjoint and covering
    again = random_split(n, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((train, val, test), again))
    other = random_split(n, seed=4)
    assert not np.array_equal(train, other[0])


def test_random_split_rejects_bad_proportions():
    with pytest.raises(ValueError, match="train_prop"):
        random_split(10, 0, 0.8, 0.3)


def _dataset_cfg(name, **changes):
    cfg = compose_config(dataset=name).dataset
    for key, value in changes.items():
        cfg[key] = value
    return cfg


def test_mutag_cache_is_reused_and_keyed_by_the_configuration(tmp_path, monkeypatch):
    cfg = _dataset_cfg("MUTAG", max_graphs=12)
    first = prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    assert first.cache_file.is_file() and first.cache_file.with_suffix(".json").is_file()
    assert len(first.complexes) == 12 and first.info.pe_channels == 4
    assert first.info.in_channels == [7, 4, 7] and first.info.max_rank == 2
    assert first.complexes[0].pe_1.shape[1] == 4

    def fail(*args, **kwargs):
        raise AssertionError("the second load must read the cache, not process again")

    monkeypatch.setattr(datasets, "_process", fail)
    second = prepare_dataset(cfg, CELL, PE, cache_dir=tmp_path)
    assert second.cache_file == first.cache_file
    assert torch.equal(second.complexes[3].x_0, first.complexes[3].x_0)
    # another PE (or lifting) configuration gets its own cache file
    other_pe = {**PE, "dim": 3}
    assert cache_key(cfg, CELL, other_pe) != cache_key(cfg, CELL, PE)
    with pytest.raises(AssertionError, match="read the cache"):
        prepare_dataset(cfg, CELL, other_pe, cache_dir=tmp_path)


def test_mutag_random_splits_per_seed(tmp_path):
    prepared = prepare_dataset(_dataset_cfg("MUTAG", max_graphs=20), CELL, None, cache_dir=tmp_path)
    train, val, test = prepared.split(1)
    assert (len(train), len(val), len(test)) == (10, 5, 5)
    ids = lambda part: {id(c) for c in part.complexes}  # noqa: E731
    assert not ids(train) & ids(val) and not ids(train) & ids(test) and not ids(val) & ids(test)
    assert ids(prepared.split(1)[0]) == ids(train)
    assert ids(prepared.split(2)[0]) != ids(train)


def test_gcb_fixed_split_with_concatenated_endpoint_edge_features(tmp_path, gcb_file):
    cfg = _dataset_cfg("GCB", data_dir=str(gcb_file.parent))
    prepared = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    train, val, test = prepared.split(123)
    assert (len(train), len(val), len(test)) == (6, 3, 3)
    assert prepared.split(7)[0].complexes == train.complexes  # fixed: the seed does not matter
    assert prepared.info.in_channels == [5, 10, 5]  # x_1 = [x_u, x_v]
    assert prepared.info.out_channels == 3


def test_zinc_loader_categorical_features(tmp_path, zinc_dir):
    pytest.importorskip("rdkit")
    cfg = _dataset_cfg("ZINC", data_dir=str(zinc_dir), subset={"train": 4, "val": None, "test": 2})
    graphs = load_graphs(cfg, tmp_path)
    assert [len(graphs[k]) for k in ("train", "val", "test")] == [4, 3, 2]
    prepared = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    assert prepared.info.task == "regression" and prepared.info.metric == "mae"
    assert prepared.info.categorical == [[29], [4], None]
    assert prepared.info.in_channels == [1, 1, 29]
    assert prepared.complexes[0].x_0.dtype == torch.long


def test_missing_data_files_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"dataset\.data_dir"):
        load_graphs(_dataset_cfg("GCB"), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"hard_small\.npz"):
        load_graphs(_dataset_cfg("GCB", data_dir=str(tmp_path)), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"PROTEINS_A\.txt"):
        load_graphs(_dataset_cfg("PROTEINS", data_dir=str(tmp_path)), tmp_path)
    with pytest.raises(FileNotFoundError, match=r"smiles_score\.csv"):
        load_graphs(_dataset_cfg("ZINC", data_dir=str(tmp_path)), tmp_path)


def test_bad_transform_config_raises(tmp_path):
    with pytest.raises(ValueError, match="_target_"):
        prepare_dataset(_dataset_cfg("MUTAG", max_graphs=4), {"max_cell_length": 3}, None, tmp_path)


def test_prune_keys_keeps_what_models_read(tmp_path):
    prepared = prepare_dataset(_dataset_cfg("MUTAG", max_graphs=3), CELL, None, cache_dir=tmp_path)
    prune_keys(prepared.complexes, {"x_0", "batch_0", "edge_index"})
    assert set(prepared.complexes[0].keys()) == {"x_0", "batch_0", "edge_index", "y", "shape", "num_nodes"}
