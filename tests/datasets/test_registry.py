"""The registry of data set families: a new family is one module plus one config."""

import pytest

from tests.datasets import rings
from topomodelx_attention.datasets import (
    FAMILIES,
    DatasetFamily,
    get_family,
    load_graphs,
    register_family,
)
from topomodelx_attention.datasets.cache import cache_key
from topomodelx_attention.harness.prepare import instantiate_transform, prepare_dataset

CELL = {"_target_": "topomodelx_attention.transforms.CellCycleLifting"}


def test_the_packaged_families_are_registered():
    assert {"tu", "gcb", "zinc", "graphuniverse"} <= set(FAMILIES)
    assert get_family("tu").name == "tu"


def test_an_unknown_loader_names_the_registered_families():
    with pytest.raises(ValueError, match=r"dataset.loader must be one of .*'tu'.*'rings'.*got 'nope'"):
        get_family("nope")
    with pytest.raises(ValueError, match=r"dataset\.loader must be one of"):
        prepare_dataset({"name": "X", "loader": "nope"}, CELL, None, cache_dir="/nonexistent/never-made")


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        register_family(DatasetFamily("tu", read=rings._read, files=rings._files))
    with pytest.raises(TypeError, match="DatasetFamily"):
        register_family("rings")


def test_a_family_of_a_test_module_and_a_config_dict_go_through_the_harness(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "rings.csv").write_text("".join(f"{3 + i % 4},{i % 2}\n" for i in range(12)))
    cfg = dict(rings.CONFIG, data_dir=str(data))
    assert len(load_graphs(cfg)) == 12
    first = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")
    info = first.info
    assert (info.name, info.task, info.out_channels, info.in_channels) == ("RINGS", "classification", 2, [1, 1, 1])
    assert len(first.complexes) == 12 and [c.num_cells(2) for c in first.complexes[:2]] == [1, 1]
    lifting = instantiate_transform(CELL, **cfg["lifting_kwargs"])
    assert first.cache_file.name == f"{cache_key(cfg, CELL, None, lifting, cache_dir=tmp_path / 'cache')}.pt"
    again = prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache")  # read from the cache
    assert again.cache_file == first.cache_file and len(again.complexes) == 12
    train, val, test = first.split(seed=0)
    assert (len(train), len(val), len(test)) == (6, 3, 3)
    (data / "rings.csv").write_text("5,1\n" * 4)  # the files the family names are in the key
    assert prepare_dataset(cfg, CELL, None, cache_dir=tmp_path / "cache").cache_file != first.cache_file
