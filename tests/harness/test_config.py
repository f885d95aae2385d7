"""Composition of the packaged hydra configs."""

import warnings

import pytest
from omegaconf import OmegaConf

from topomodelx_attention.harness.config import (
    CONFIG_DIR,
    available,
    compose_config,
    dataset_choice,
    model_choice,
    unused_additions,
)


def test_configs_ship_inside_the_package():
    assert (CONFIG_DIR / "train.yaml").is_file()
    assert set(available("dataset")) >= {"MUTAG", "PROTEINS", "GCB", "ZINC"}
    assert set(available("model")) >= {"cellular_transformer", "gin", "cwn", "sccnn"}


def test_defaults_and_overrides():
    cfg = compose_config()
    assert cfg.dataset.name == "MUTAG" and cfg.model.name == "cellular_transformer"
    assert list(cfg.seeds) == [1, 2, 3, 4, 5]
    assert cfg.optimizer.name == "adamw" and cfg.optimizer.eps == 1e-8
    assert cfg.trainer.gradient_clip_val == 5.0
    cfg = compose_config(
        ["trainer.max_epochs=7", "seeds=[3]", "model.params.hidden_channels=16", "trainer.devices=2",
         "trainer.strategy=ddp"],
        dataset="gcb", model="gin",
    )
    assert cfg.dataset.name == "GCB" and cfg.dataset.split.type == "fixed"
    assert cfg.model.name == "gin" and cfg.model.params.hidden_channels == 16
    assert cfg.trainer.max_epochs == 7 and list(cfg.seeds) == [3]
    assert cfg.trainer.devices == 2 and cfg.trainer.strategy == "ddp"


def test_group_override_syntax_works_too():
    cfg = compose_config(["dataset=graph/ZINC", "model=simplicial/sccnn"])
    assert cfg.dataset.task == "regression" and cfg.dataset.monitor_metric == "mae"
    assert cfg.model.domain == "simplicial"


def test_short_names():
    assert dataset_choice("mutag") == "graph/MUTAG"
    assert model_choice("cwn") == "cell/cwn"
    assert model_choice("graph/gin") == "graph/gin"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dataset": "CORA"}, "unknown dataset 'CORA'"),
        ({"model": "transformer9000"}, "unknown model 'transformer9000'"),
        ({"overrides": ["trainer.max_epochs=[oops"]}, "invalid configuration override"),
    ],
)
def test_unknown_names_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        compose_config(**kwargs)


@pytest.mark.parametrize(
    ("preset", "dataset", "model", "lr", "epochs"),
    [("ct_paper_zinc", "ZINC", "cellular_transformer_paper_zinc", 2e-4, 10000),
     ("ct_paper_gcb", "GCB", "cellular_transformer_paper_gcb", 3e-4, 350)],
)
def test_paper_training_presets_compose_with_the_paper_model(preset, dataset, model, lr, epochs):
    cfg = compose_config([f"experiment={preset}"], dataset=dataset, model=model)
    assert cfg.optimizer.lr == pytest.approx(lr)
    assert cfg.optimizer.weight_decay == pytest.approx(0.01)
    assert cfg.trainer.max_epochs == epochs
    assert cfg.dataset.dataloader.batch_size == 256
    assert cfg.model.params.n_layers == 12


# ------------------------------------------------------------------ +key additions nothing reads
@pytest.mark.parametrize(
    ("override", "suggestion"),
    [("+foo=1", None), ("+trainer_max_epochs=3", "trainer.max_epochs"),
     ("+dataset.use_node_atr=true", "dataset.use_node_attr"), ("++optimizer.lrr=0.1", "optimizer.lr")],
)
def test_an_added_key_nothing_reads_warns(override, suggestion):
    key = override.lstrip("+").split("=")[0]
    # the unprotected path: hydra adds the key silently
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        assert OmegaConf.select(compose(config_name="train", overrides=[override]), key) is not None
    with pytest.warns(UserWarning, match=rf"configuration key '{key}' \(override \+*{key}=.*no effect") as record:
        compose_config([override])
    if suggestion:
        assert f"did you mean {suggestion}" in str(record[0].message)


@pytest.mark.parametrize(
    "override",
    ["+trainer.accumulate_grad_batches=2", "+model.params.extra=1", "+dataset.dataloader.pin_memory=true",
     "dataset.use_node_attr=true", "+model.pe.resample=true", "trainer.max_epochs=3"],
)
def test_added_keys_that_are_read_do_not_warn(override):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compose_config([override], dataset="PROTEINS" if "use_node_attr" in override else None)


def test_group_additions_are_not_keys():
    assert unused_additions(["+experiment=ct_paper_zinc", "~model.pe", "model=graph/gin"]) == []
