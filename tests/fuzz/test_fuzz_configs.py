"""Fuzz: hydra ``_target_`` trees against the allow-list, and the cache key against changed data.

* random configuration trees (nested dicts, lists, ``_args_``, hydra's meta keys, leftover
  interpolations) with allowed and forbidden ``_target_`` paths anywhere: ``check_targets``
  accepts exactly the trees whose every target is allowed and refuses the others naming a
  violating key;
* transform specs with a payload (``builtins.open(marker, "w")`` reached through a nested
  target, ``_args_``, an alias, the keyword arguments or a re-interpolation): nothing runs, the
  error names the key;
* tiny TU data sets changed in random ways: the cache key changes exactly when the data read
  (its location or the content of a file read) changes.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.fuzz.cases import ACCEPT, REJECT, run_cases
from topomodelx_attention.datasets.cache import cache_key
from topomodelx_attention.harness.config import check_targets
from topomodelx_attention.harness.prepare import instantiate_transform

ALLOWED = (
    "topomodelx_attention.transforms.CellCycleLifting",
    "topomodelx_attention.transforms.liftings.CellCycleLifting",
    "topomodelx_attention.transforms.SimplicialCliqueLifting",
    "topomodelx_attention.transforms.HodgeLaplacianPE",
    "topomodelx_attention.transforms.RandomSignFlip",
    "topomodelx_attention.transforms.OrthogonalRandomNodeId",
    "topomodelx_attention.nn.cell.CellularTransformer",
    "topomodelx_attention.nn.graph.TokenGT",
    "topomodelx_attention.harness.baselines.GINBaseline",
    "topomodelx_attention.harness.models.NodeOutputs",  # handed over by models on import
    "topomodelx_attention.harness.registry.NodeOutputs",
    "topomodelx_attention.harness.topobench.TopoBenchWrapper",
    "topomodelx_attention.harness.topobench.CellularTransformerBackbone",
    "torch.optim.AdamW",
    "torch.optim.adam.Adam",
    "torch.optim.lr_scheduler.CosineAnnealingLR",
    "torch.optim.lr_scheduler.ReduceLROnPlateau",
)
"""Paths the harness must accept (public and canonical module paths)."""

FORBIDDEN = (
    "numpy.load", "torch.load", "pickle.loads", "os.system", "builtins.eval", "builtins.exec",
    "builtins.open", "subprocess.run", "shutil.rmtree", "hydra.utils.instantiate", "functools.partial",
    "omegaconf.OmegaConf.load", "importlib.import_module",
    # aliases through allowed modules: the object is compared, not the prefix
    "torch.optim.torch.load", "topomodelx_attention.harness.prepare.os.system",
    "topomodelx_attention.harness.prepare.torch.load", "topomodelx_attention.transforms.CellCycleLifting.lift_many",
    # functions and classes of the package that are no transforms, models or optimizers
    "topomodelx_attention.harness.prepare.save_cache", "topomodelx_attention.datasets.gcb.convert_gcb",
    "topomodelx_attention.harness.config.register_target", "topomodelx_attention.cli.main",
    "topomodelx_attention.harness.training.run_experiment", "topomodelx_attention.datasets.gcb.RestrictedUnpickler",
    "torch.optim.Optimizer", "torch.optim.swa_utils.AveragedModel",
    # malformed paths
    "", "topomodelx_attention", "torch.optim", "topomodelx_attention..transforms.ZeroPE",
    "Topomodelx_attention.transforms.ZeroPE", "topomodelx_attention.transforms.ZeroPE ",
    "topomodelx_attention.transforms.NoSuchPE", "topobench.model.TBModel",
)
"""Paths (and non-paths) the harness must refuse."""

NON_STRINGS = (3, None, True, ["topomodelx_attention.transforms.ZeroPE"], {"a": 1})


# ----------------------------------------------------------------------------------------------
# random configuration trees
# ----------------------------------------------------------------------------------------------
def _join(prefix, key):
    return f"{prefix}.{key}" if prefix else str(key)


def _random_tree(rng, key, depth, inside, bad):
    """A random config node; ``bad`` collects the keys a correct check may name."""
    kind = int(rng.integers(8)) if depth > 0 else int(rng.integers(3))
    if kind == 0:
        return int(rng.integers(-5, 5))
    if kind == 1:
        value = str(rng.choice(["basis", "sum", "${oc.env:HOME}", "\\${x}", "a${b}", "plain"]))
        if inside and "${" in value:
            bad.append(key)  # a leftover interpolation in arguments hydra would resolve again
        return value
    if kind == 2:
        return [None, 1.5, "x"][: int(rng.integers(4))]
    if kind in (3, 4):
        return [_random_tree(rng, f"{key}[{i}]", depth - 1, inside, bad) for i in range(int(rng.integers(1, 3)))]
    return _random_node(rng, key, depth - 1, inside, bad)


def _random_node(rng, key, depth, inside, bad):
    node = {}
    is_target = bool(rng.integers(2))
    if is_target:
        where = _join(key, "_target_")
        pick = float(rng.random())
        if pick < 0.6:
            node["_target_"] = str(rng.choice(ALLOWED))
        elif pick < 0.9:
            node["_target_"] = str(rng.choice(FORBIDDEN))
            bad.append(where)
        else:
            node["_target_"] = NON_STRINGS[int(rng.integers(len(NON_STRINGS)))]
            bad.append(where)
        meta = int(rng.integers(8))
        if meta == 0:
            node["_partial_"] = bool(rng.integers(2))
            if node["_partial_"]:
                bad.append(_join(key, "_partial_"))
        elif meta == 1:
            node["_recursive_"] = [False, True, "no", 0][int(rng.integers(4))]
            if not isinstance(node["_recursive_"], bool):
                bad.append(_join(key, "_recursive_"))
        elif meta == 2:
            node["_convert_"] = str(rng.choice(["none", "all", "partial", "object", "ALL", "deep"]))
            if node["_convert_"] not in ("none", "all", "partial", "object"):
                bad.append(_join(key, "_convert_"))
        elif meta == 3:
            if rng.integers(2):
                node["_args_"] = [_random_tree(rng, f"{_join(key, '_args_')}[{i}]", depth, True, bad) for i in range(2)]
            else:
                node["_args_"] = "not a list"
                bad.append(_join(key, "_args_"))
        inside = True
    for i in range(int(rng.integers(0, 3))):
        name = f"k{i}"
        node[name] = _random_tree(rng, _join(key, name), depth, inside, bad)
    return node


def test_fuzz_target_trees_are_checked_everywhere(fuzz_seeds):
    def make(seed, rng):
        bad: list[str] = []
        tree = {"model": _random_node(rng, "model", 3, False, bad), "seeds": [1]}
        if rng.integers(4) == 0:  # the data set's lifting keywords are merged into the lifting
            kwargs = {"_target_": str(rng.choice(FORBIDDEN + ALLOWED))}
            tree["dataset"] = {"lifting_kwargs": kwargs}
            if kwargs["_target_"] not in ALLOWED:
                bad.append("dataset.lifting_kwargs._target_")

        def run():
            try:
                check_targets(tree)
                if "dataset" in tree:
                    check_targets(tree["dataset"]["lifting_kwargs"], "dataset.lifting_kwargs", instantiated=True)
            except ValueError as error:
                message = str(error)
                assert "\n" not in message, "the error must be one line"
                assert any(f"{key}=" in message for key in bad), f"no violating key {bad} named in: {message[:200]}"
                raise

        return f"{len(bad)} violations {bad[:3]}", REJECT if bad else ACCEPT, run

    run_cases(fuzz_seeds, "target trees", make, offset=710_000)


# ----------------------------------------------------------------------------------------------
# payloads inside transform specs: nothing runs
# ----------------------------------------------------------------------------------------------
SPECS = (
    ({"_target_": "topomodelx_attention.transforms.CellCycleLifting", "max_cell_length": 6}, "CellCycleLifting"),
    ({"_target_": "topomodelx_attention.transforms.SimplicialCliqueLifting", "complex_dim": 2}, "SimplicialCliqueLifting"),
    ({"_target_": "topomodelx_attention.transforms.HodgeLaplacianPE", "dim": 4}, "HodgeLaplacianPE"),
    ({"_target_": "topomodelx_attention.transforms.positional_encodings.CellularRandomWalkPE", "dim": 3}, "CellularRandomWalkPE"),
    ({"_target_": "topomodelx_attention.transforms.RandomSignFlip"}, "RandomSignFlip"),
)


@pytest.fixture
def markers(tmp_path):
    return tmp_path


def test_fuzz_payloads_in_transform_specs_never_run(fuzz_seeds, markers):
    def make(seed, rng):
        spec, name = SPECS[int(rng.integers(len(SPECS)))]
        spec = dict(spec)
        marker = markers / f"pwned_{seed}"
        payload = {"_target_": "builtins.open", "_args_": [str(marker), "w"]}
        extra: dict = {}
        way = str(rng.choice(["none", "none", "nested", "args", "list", "alias", "kwargs", "kwargs_target",
                              "reinterpolation", "partial"]))
        key = "model.x"
        if way == "nested":
            spec["hidden"] = payload
            key = "model.x.hidden._target_"
        elif way == "args":
            spec["_args_"] = [payload]
            key = "model.x._args_[0]._target_"
        elif way == "list":
            spec["deep"] = [{"again": [payload]}]
            key = "model.x.deep[0].again[0]._target_"
        elif way == "alias":
            spec = {"_target_": "topomodelx_attention.harness.prepare.os.open",
                    "_args_": [str(marker), os.O_CREAT | os.O_WRONLY]}
            key = "model.x._target_"
        elif way == "kwargs":
            extra = {"hidden": payload}
            key = "model.x.hidden._target_"
        elif way == "kwargs_target":
            extra = {"_target_": "builtins.open", "_args_": [str(marker), "w"]}
            key = "model.x._target_"
        elif way == "reinterpolation":
            spec["hidden"] = f"${{oc.create:{{_target_: builtins.open, _args_: [{marker}, w]}}}}"
            key = "model.x.hidden"
        elif way == "partial":
            spec = {**payload, "_partial_": True}
            key = "model.x._target_"

        def run():
            try:
                built = instantiate_transform(spec, config_key="model.x", **extra)
            except ValueError as error:
                message = str(error)
                assert f"{key}=" in message, f"the error does not name {key}: {message[:200]}"
                raise
            finally:
                assert not marker.exists(), f"the payload ran ({way})"
            assert type(built).__name__ == name
            return built

        return f"{name} with payload {way}", ACCEPT if way == "none" else REJECT, run

    run_cases(fuzz_seeds, "payloads in transform specs", make, offset=720_000)


# ----------------------------------------------------------------------------------------------
# the cache key follows the data
# ----------------------------------------------------------------------------------------------
CELL = {"_target_": "topomodelx_attention.transforms.CellCycleLifting"}

MUTATIONS = {
    # mutation: whether the key must change
    "none": False,
    "same_size_same_mtime": True,  # another label, the old modification time restored
    "touch": True,
    "copy_elsewhere": True,
    "symlinked_dir": False,  # the same files through a link: the resolved location
    "unrelated_file": False,
    "other_data_set_changed": False,
    "file_read_added": True,
    "max_graphs": True,
}


def _write_tu(folder, name, rng):
    """A random tiny TU data set (paths with 2-5 vertices, labels 1/2) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    edges, indicator, node_labels, offset = [], [], [], 0
    count = int(rng.integers(1, 5))
    for g in range(1, count + 1):
        n = int(rng.integers(2, 6))
        for u in range(1, n):
            edges += [(offset + u, offset + u + 1), (offset + u + 1, offset + u)]
        indicator += [g] * n
        node_labels += [int(v) for v in rng.integers(0, 3, n)]
        offset += n
    (folder / f"{name}_A.txt").write_text("".join(f"{u}, {v}\n" for u, v in edges))
    (folder / f"{name}_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (folder / f"{name}_node_labels.txt").write_text("".join(f"{c}\n" for c in node_labels))
    (folder / f"{name}_graph_labels.txt").write_text("".join(f"{v}\n" for v in rng.integers(1, 3, count)))
    return offset


def test_fuzz_cache_key_follows_the_data_read(fuzz_seeds, tmp_path):
    def make(seed, rng):
        root = tmp_path / f"case_{seed}"
        raw = root / "data" / "TINY" / "raw"
        nodes = _write_tu(raw, "TINY", rng)
        _write_tu(raw, "TINYX", rng)  # another data set in the same folder
        mutation = list(MUTATIONS)[int(rng.integers(len(MUTATIONS)))]
        cfg = {"name": "TINY", "loader": "tu", "data_dir": str(root / "data"), "max_graphs": None}

        def run():
            before = cache_key(cfg, CELL, None, cache_dir=root / "cache")
            after_cfg = dict(cfg)
            labels = raw / "TINY_graph_labels.txt"
            if mutation == "same_size_same_mtime":
                stat = labels.stat()
                text = labels.read_text()
                labels.write_text(("2" if text[0] == "1" else "1") + text[1:])
                os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
                assert labels.stat().st_mtime_ns == stat.st_mtime_ns and labels.stat().st_size == stat.st_size
            elif mutation == "touch":
                stat = labels.stat()
                os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns + int(rng.integers(1, 10**9))))
            elif mutation == "copy_elsewhere":
                shutil.copytree(root / "data", root / "copy", copy_function=shutil.copy2)  # mtimes kept
                after_cfg["data_dir"] = str(root / "copy")
            elif mutation == "symlinked_dir":
                (root / "link").symlink_to(root / "data", target_is_directory=True)
                after_cfg["data_dir"] = str(root / "link")
            elif mutation == "unrelated_file":
                (raw / "README.txt").write_text("notes")
                (raw / "TINY.zip").write_bytes(b"PK")
            elif mutation == "other_data_set_changed":
                (raw / "TINYX_graph_labels.txt").write_text("1\n")
            elif mutation == "file_read_added":
                (raw / "TINY_node_attributes.txt").write_text("0.5\n" * nodes)
            elif mutation == "max_graphs":
                after_cfg["max_graphs"] = 1
            after = cache_key(after_cfg, CELL, None, cache_dir=root / "cache")
            changed = after != before
            assert changed == MUTATIONS[mutation], f"{mutation}: key {'changed' if changed else 'kept'}"

        return f"mutation {mutation}", ACCEPT, run

    run_cases(fuzz_seeds, "cache key and data", make, offset=730_000)
