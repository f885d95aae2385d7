"""Composition of the packaged hydra configs; the ``_target_`` allow-list."""

import builtins
import contextlib
import functools
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
from omegaconf import OmegaConf

import topomodelx_attention.harness.config as config
from topomodelx_attention.harness.config import (
    CONFIG_DIR,
    available,
    check_targets,
    choice,
    compose_config,
    register_target,
    unused_additions,
)
from topomodelx_attention.harness.prepare import instantiate_transform


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
    assert choice("dataset", "mutag") == "graph/MUTAG"
    assert choice("model", "cwn") == "cell/cwn"
    assert choice("model", "graph/gin") == "graph/gin"


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


# ------------------------------------------------------------------ the _target_ allow-list


def _targets(tree, key=""):
    """``(key, _target_)`` of every target node of a plain tree."""
    if isinstance(tree, dict):
        if "_target_" in tree:
            yield key, tree["_target_"]
        for name, value in tree.items():
            yield from _targets(value, f"{key}.{name}" if key else str(name))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from _targets(value, f"{key}[{index}]")


def test_every_packaged_target_is_allowed_and_the_transforms_build():
    found, expected = 0, 0
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        expected += len(re.findall(r"^\s*_target_:", path.read_text(), flags=re.M))
        tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        if "topobench" in path.relative_to(CONFIG_DIR).parts:
            # instantiated by TopoBench: our exports must be allowed, the rest is TopoBench's own
            for key, target in _targets(tree):
                found += 1
                if target.startswith("topomodelx_attention."):
                    check_targets({"_target_": target}, key)
                else:
                    assert target.startswith("topobench."), (path, key, target)
            continue
        check_targets(tree, path.stem)
        for name in ("lifting", "pe", "augment"):
            spec = tree.get(name)
            if isinstance(spec, dict) and "_target_" in spec:
                found += 1
                assert instantiate_transform(spec, config_key=name) is not None
    assert found == expected >= 39  # every _target_ line of every file was checked


def test_documented_target_overrides_still_compose():
    # the alternatives named in configs/model/graph/gps.yaml and the README
    cfg = compose_config(
        ["model.pe._target_=topomodelx_attention.transforms.HodgeLaplacianPE", "model.pe.dim=8",
         "+model.augment._target_=topomodelx_attention.transforms.RandomSignFlip"],
        model="gps",
    )
    assert type(instantiate_transform(cfg.model.pe, config_key="model.pe")).__name__ == "HodgeLaplacianPE"
    assert type(instantiate_transform(cfg.model.augment)).__name__ == "RandomSignFlip"
    # any import path of an allowed class: the object is compared, not the string
    assert type(instantiate_transform(
        {"_target_": "topomodelx_attention.transforms.liftings.CellCycleLifting"}
    )).__name__ == "CellCycleLifting"
    check_targets({"opt": {"_target_": "torch.optim.AdamW"}, "s": {"_target_": "torch.optim.lr_scheduler.StepLR"}})


_EVIL = """
import pickle, sys
import numpy as np

class Payload:
    def __reduce__(self):
        return (open, (sys.argv[1], "w"))  # unpickling creates the marker file

array = np.empty(1, dtype=object)
array[0] = Payload()
np.save(sys.argv[2], array, allow_pickle=True)
with open(sys.argv[3], "wb") as handle:
    pickle.dump(Payload(), handle)
"""


@pytest.fixture
def payloads(tmp_path):
    marker = tmp_path / "pwned"
    script = tmp_path / "make_payloads.py"
    script.write_text(_EVIL)
    npy, pt = tmp_path / "evil.npy", tmp_path / "evil.pt"
    subprocess.run([sys.executable, str(script), str(marker), str(npy), str(pt)], check=True)
    assert not marker.exists()
    return marker, {"numpy.load": ("file", npy, "allow_pickle", "true"), "torch.load": ("f", pt, "weights_only", "false")}


def _naive_instantiate(spec, marker):
    """hydra's own instantiate of ``spec`` in a subprocess: whether it created ``marker``."""
    code = textwrap.dedent(f"""
        from hydra.utils import instantiate
        try:
            instantiate({spec!r})
        except Exception:
            pass
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    created = marker.exists()
    marker.unlink(missing_ok=True)
    return created


@pytest.mark.parametrize("loader", ["numpy.load", "torch.load"])
def test_a_loader_target_runs_the_pickle_with_plain_hydra_but_the_cli_refuses_it(tmp_path, payloads, capsys, loader):
    from topomodelx_attention.cli import main

    marker, files = payloads
    file_key, path, flag, value = files[loader]
    spec = {"_target_": loader, file_key: str(path), flag: value == "true"}
    assert _naive_instantiate(spec, marker)  # the unprotected path really executes the file
    code = main([
        "train", "--dataset", "MUTAG", "--model", "cellular_transformer", "--max-epochs", "1",
        "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "out"),
        f"model.pe._target_={loader}", f"+model.pe.{file_key}={path}", f"+model.pe.{flag}={value}",
    ])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"model.pe._target_='{loader}' is not an allowed target" in lines[0]
    assert not marker.exists()
    assert not (tmp_path / "cache" / "processed").exists()  # refused before any lifting


def test_hand_made_configs_are_checked_where_they_are_instantiated(tmp_path, payloads):
    marker, files = payloads
    _key, npy, _flag, _value = files["numpy.load"]
    with pytest.raises(ValueError, match=r"model\.pe\._target_='numpy\.load' is not an allowed target"):
        instantiate_transform({"_target_": "numpy.load", "file": str(npy), "allow_pickle": True}, config_key="model.pe")
    # the data set's lifting_kwargs are merged into the lifting: they cannot replace its target
    from topomodelx_attention.harness.prepare import prepare_dataset

    dataset = {"name": "MUTAG", "loader": "tu", "max_graphs": 2,
               "lifting_kwargs": {"_target_": "numpy.load", "file": str(npy), "allow_pickle": True}}
    with pytest.raises(ValueError, match=r"dataset\.lifting_kwargs\._target_='numpy\.load'"):
        prepare_dataset(dataset, {"_target_": "topomodelx_attention.transforms.CellCycleLifting"}, None, tmp_path)
    # run_experiment checks the whole tree first, also without compose_config
    from topomodelx_attention.harness.training import run_experiment

    cfg = compose_config(model="gin")
    cfg.model.params.bad = {"_target_": "numpy.load", "file": str(npy), "allow_pickle": True}
    with pytest.raises(ValueError, match=r"model\.params\.bad\._target_='numpy\.load'"):
        run_experiment(cfg, output_dir=tmp_path / "out")
    assert not marker.exists()


_LIFT = "topomodelx_attention.transforms.CellCycleLifting"
_OPEN = {"_target_": "builtins.open", "_args_": ["MARKER", "w"]}


def _fill(tree, marker):
    """``tree`` with every ``MARKER`` replaced by the marker path."""
    if isinstance(tree, dict):
        return {k: _fill(v, marker) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_fill(v, marker) for v in tree]
    return tree.replace("MARKER", str(marker)) if isinstance(tree, str) else tree


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"_target_": _LIFT, "cycles": _OPEN}, "model.lifting.cycles._target_"),
        ({"_target_": _LIFT, "_args_": [_OPEN]}, r"model.lifting._args_\[0\]._target_"),
        ({"_target_": _LIFT, "x": {"y": [_OPEN]}}, r"model.lifting.x.y\[0\]._target_"),
        # an allowed module's attribute leading elsewhere: os.open(MARKER, O_CREAT | O_WRONLY)
        ({"_target_": "topomodelx_attention.harness.prepare.os.open",
          "_args_": ["MARKER", os.O_CREAT | os.O_WRONLY]}, "model.lifting._target_"),
        # a string that becomes a new _target_ when hydra resolves the config again
        ({"_target_": _LIFT, "x": "${oc.create:{_target_: builtins.open, _args_: [MARKER, w]}}"},
         "model.lifting.x="),
    ],
    ids=["nested", "args", "deep-list", "alias", "re-interpolation"],
)
def test_nested_alias_and_interpolation_tricks_run_with_plain_hydra_and_are_refused(tmp_path, spec, key):
    from hydra.utils import instantiate

    marker = tmp_path / "pwned"
    spec = _fill(spec, marker)
    with contextlib.suppress(Exception):  # the outer call may fail once the payload has run
        instantiate(OmegaConf.create(spec))
    assert marker.exists()  # the unprotected path runs the payload
    marker.unlink()
    with pytest.raises(ValueError, match=key):
        instantiate_transform(spec, config_key="model.lifting")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({**_OPEN, "_partial_": True}, r"model.lifting._target_='builtins.open'"),
        ({"_target_": _LIFT, "_partial_": True}, r"model.lifting._partial_=True is not supported"),
        ({"_target_": _LIFT, "_recursive_": False, "x": {"y": [_OPEN]}}, r"model.lifting.x.y\[0\]._target_"),
        ({"_target_": _LIFT, "_recursive_": "no"}, "model.lifting._recursive_='no' must be true or false"),
        ({"_target_": _LIFT, "_convert_": "everything"}, "model.lifting._convert_='everything' must be one of"),
        ({"_target_": _LIFT, "_args_": "x"}, "model.lifting._args_='x' must be a list"),
        ({"_target_": 3}, "model.lifting._target_=3 must be a string"),
        ({"_target_": "torch.optim.torch.load"}, "model.lifting._target_='torch.optim.torch.load' is not an allowed"),
        ({"_target_": "topomodelx_attention.harness.prepare.save_cache"}, "is not an allowed target"),
    ],
    ids=["partial-open", "partial", "not-recursive", "recursive-type", "convert", "args-type", "non-string",
         "torch-alias", "package-function"],
)
def test_meta_keys_and_other_callables_are_refused_naming_the_key(tmp_path, spec, key):
    marker = tmp_path / "pwned"
    with pytest.raises(ValueError, match=key):
        instantiate_transform(_fill(spec, marker), config_key="model.lifting")
    assert not marker.exists()


def test_compose_time_errors_name_the_key():
    for override, key in [
        ("model.lifting._target_=topomodelx_attention.harness.prepare.os.system", "model.lifting._target_"),
        ("+dataset.lifting_kwargs._target_=numpy.load", "dataset.lifting_kwargs._target_"),
        ("+model.lifting._partial_=true", "model.lifting._partial_"),
        ("+model.lifting._args_=[{_target_:os.system}]", r"model.lifting._args_\[0\]._target_"),
        (r"+model.lifting.x='\${oc.create:{_target_: os.getcwd}}'", "model.lifting.x="),
    ]:
        with pytest.raises(ValueError, match=rf"invalid configuration: {key}"):
            compose_config([override])


class _MyLifting:
    def __init__(self, size: int = 1) -> None:
        self.size = size


def test_register_target_extends_the_allow_list_from_code_only(monkeypatch):
    monkeypatch.setattr(config, "_REGISTERED", {})
    spec = {"_target_": f"{__name__}._MyLifting", "size": 3}
    with pytest.raises(ValueError, match="is not an allowed target"):
        instantiate_transform(spec)
    assert register_target(_MyLifting) is _MyLifting
    assert instantiate_transform(spec).size == 3
    assert f"{__name__}._MyLifting" in config.allowed_targets()
    with pytest.raises(TypeError, match="register_target"):
        register_target(3)


def _factory(size: int = 1) -> _MyLifting:
    return _MyLifting(size)


@pytest.mark.parametrize(
    "target",
    [os.system, builtins.eval, builtins.exec, lambda: None, _factory, _MyLifting(2), _MyLifting.__init__,
     functools.partial(_MyLifting, 3), "tests.harness.test_config._MyLifting", None],
    ids=["os.system", "eval", "exec", "lambda", "function", "instance", "method", "partial", "string", "none"],
)
def test_register_target_accepts_classes_only(monkeypatch, target):
    monkeypatch.setattr(config, "_REGISTERED", {})
    with pytest.raises(TypeError, match="register_target accepts classes only"):
        register_target(target)
    assert config._REGISTERED == {}


def test_register_target_refuses_a_class_no_configuration_can_name(monkeypatch):
    monkeypatch.setattr(config, "_REGISTERED", {})

    class Local:
        pass

    with pytest.raises(TypeError, match="top level of an imported module"):
        register_target(Local)
    assert config._REGISTERED == {}


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


def test_a_model_config_brings_its_learning_rate_and_overrides_replace_it():
    """``optimizer.lr`` is the model config's ``optimizer.lr`` when it has one, else 1e-3;
    a command-line override or an experiment preset replaces it."""
    ct = compose_config(model="cellular_transformer")
    assert ct.model.optimizer.lr == 0.003 and ct.optimizer.lr == 0.003
    assert compose_config(model="gps").optimizer.lr == 0.001
    assert compose_config(["optimizer.lr=0.0005"], model="cellular_transformer").optimizer.lr == 0.0005
    assert compose_config(["model.optimizer.lr=0.002"], model="cellular_transformer").optimizer.lr == 0.002
    preset = compose_config(["experiment=ct_paper_gcb"], model="cellular_transformer")
    assert preset.optimizer.lr == 0.0003
    with pytest.raises(ValueError, match=r"optimizer\.lr=-1 must be a positive number"):
        compose_config(["model.optimizer.lr=-1"], model="cellular_transformer")
