"""Fuzz: every numeric option of every packaged configuration refuses NaN, infinities and out-of-range values.

The options are found, not listed: each case composes a random packaged model's configuration,
picks one of its numeric leaves (optimizer, trainer, model parameters, data set) and sets a
non-finite value, or a value outside the option's range where it has one (a probability of
dropping outside [0, 1), a negative learning rate, ...). ``compose_config`` must refuse it
with a ``ValueError`` that names the option, before any work; a new option is attacked without
being named here.
"""

from __future__ import annotations

import random

from omegaconf import OmegaConf

from tests.fuzz.cases import REJECT, run_cases
from topomodelx_attention.harness.config import available, compose_config

SECTIONS = ("optimizer.", "trainer.", "model.params.", "dataset.")


def _numeric_leaves(tree, prefix=""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _numeric_leaves(value, f"{prefix}{key}.")
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield prefix[:-1], tree


def _out_of_range(key: str, rng: random.Random) -> str | None:
    """A value outside the documented range of ``key`` (``None``: no range beyond finiteness)."""
    leaf = key.split(".")[-1]
    if leaf.endswith("dropout") or key == "optimizer.min_lr_ratio":
        return rng.choice(["-0.1", "1.5", "-3"])
    if key in ("optimizer.lr", "optimizer.eps"):
        return rng.choice(["0", "-0.001"])
    if key in ("optimizer.weight_decay", "optimizer.warmup_epochs", "trainer.gradient_clip_val"):
        return rng.choice(["-1", "-0.5"])
    return None


def _case(seed: int, rng):
    pick = random.Random(seed)
    model = pick.choice(sorted(available("model")))
    tree = OmegaConf.to_container(compose_config([], dataset="MUTAG", model=model), resolve=True)
    leaves = [(k, v) for k, v in _numeric_leaves(tree) if k.startswith(SECTIONS)]
    key, _ = pick.choice(leaves)
    bad = _out_of_range(key, pick) if pick.random() < 0.5 else None
    bad = bad or pick.choice(["nan", "inf", "-inf", "NaN", "1e999"])

    def run():
        try:
            compose_config([f"{key}={bad}"], dataset="MUTAG", model=model)
        except ValueError as error:
            if key not in str(error):
                raise AssertionError(f"the error does not name {key}: {error}") from error
            raise

    return f"{model}: {key}={bad}", REJECT, run


def test_fuzz_non_finite_and_out_of_range_options_are_refused_naming_the_option(fuzz_seeds):
    run_cases(fuzz_seeds, "hyperparameter values", _case, offset=91_000)
