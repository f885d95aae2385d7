"""Fuzz: the options of the positional encodings and graph liftings, whose repr is the harness
cache key.

* random valid options: the repr lists ``dim`` and every option of the class's ``shown`` table
  with its value, the transform rebuilt from those options has the same repr, and changing any
  shown option changes the repr (two encodings that differ never share a cache key);
* a zero ``dim`` or a negative ``dense_threshold`` / ``eigh_threshold``: REJECTED with a
  ``ValueError`` naming the option;
* random lifting options: changing any option the repr shows (the lifting's ``shown`` table,
  ``feature_lifting``, ``neighborhoods``, ``self_loops``) changes the repr; ``max_cycles`` (it
  only refuses or not) does not.
"""

from __future__ import annotations

from tests.fuzz.cases import ACCEPT, REJECT, run_cases
from topomodelx_attention.transforms import (
    BarycentricRandomWalkPE,
    BarycentricSubdivisionPE,
    CellCycleLifting,
    CellularRandomWalkPE,
    HodgeLaplacianPE,
    SimplicialCliqueLifting,
    TopologicalSlepiansPE,
    ZeroPE,
)

# class -> {option: (two valid values)}: the options its repr must show
SHOWN = {
    ZeroPE: {},
    BarycentricSubdivisionPE: {"keep_kernel": (False, True)},
    BarycentricRandomWalkPE: {},
    CellularRandomWalkPE: {},
    HodgeLaplacianPE: {"include_harmonic": (False, True)},
    TopologicalSlepiansPE: {
        "selection": ("per_set", "global"),
        "per_set": (1, 2),
        "max_cosine": (0.95, 0.5),
        "harmonic": (0, 2),
    },
}
THRESHOLDS = {
    BarycentricSubdivisionPE: ("dense_threshold", "eigh_threshold"),
    BarycentricRandomWalkPE: ("dense_threshold",),
    CellularRandomWalkPE: ("dense_threshold",),
    HodgeLaplacianPE: ("dense_threshold", "eigh_threshold"),
    TopologicalSlepiansPE: ("eigh_threshold",),
}


def test_fuzz_pe_repr_shows_every_encoding_option(fuzz_seeds):
    classes = list(SHOWN)

    def make(seed, rng):
        cls = classes[int(rng.integers(len(classes)))]
        dim = int(rng.integers(1, 9))
        options = {name: values[int(rng.integers(2))] for name, values in SHOWN[cls].items()}
        thresholds = {name: int(rng.choice([0, 3, 10_000])) for name in THRESHOLDS.get(cls, ())}

        def run():
            pe = cls(dim, **options, **thresholds)
            text = repr(pe)
            assert text.startswith(f"{cls.__name__}(dim={dim}"), text
            assert sorted(cls.shown) == sorted(SHOWN[cls]), f"{cls.__name__}.shown = {cls.shown}"
            for name, value in options.items():
                assert f"{name}={value!r}" in text, f"{name}={value!r} missing from {text}"
            assert repr(cls(dim, **{name: getattr(pe, name) for name in cls.shown})) == text
            for name, values in SHOWN[cls].items():
                other = values[1] if options[name] == values[0] else values[0]
                changed = repr(cls(dim, **{**options, name: other}, **thresholds))
                assert changed != text, f"changing {name} keeps the repr {text}"

        return f"{cls.__name__}(dim={dim}, {options}, {thresholds})", ACCEPT, run

    run_cases(fuzz_seeds, "PE reprs", make, offset=93_000)


def test_fuzz_pe_bad_sizes_are_refused_naming_the_option(fuzz_seeds):
    classes = list(THRESHOLDS)

    def make(seed, rng):
        cls = classes[int(rng.integers(len(classes)))]
        names = ("dim", *THRESHOLDS[cls])
        bad = names[int(rng.integers(len(names)))]
        value = 0 if bad == "dim" else -int(rng.integers(1, 1_000))
        dim = value if bad == "dim" else int(rng.integers(1, 9))
        options = {} if bad == "dim" else {bad: value}

        def run():
            try:
                cls(dim, **options)
            except ValueError as error:
                if bad not in str(error):
                    raise AssertionError(f"the error does not name {bad}: {error}") from error
                raise

        return f"{cls.__name__} {bad}={value}", REJECT, run

    run_cases(fuzz_seeds, "PE sizes", make, offset=94_000)


COMMON = {
    "feature_lifting": ("sum", "mean"),
    "neighborhoods": (None, ("incidence", "adjacency")),
    "self_loops": ("raise", "drop"),
}
LIFTINGS = {
    CellCycleLifting: {"max_cell_length": (None, 5), "cycles": ("basis", "chordless")},
    SimplicialCliqueLifting: {"complex_dim": (2, 3)},
}


def test_fuzz_lifting_repr_changes_with_every_lifting_option(fuzz_seeds):
    classes = list(LIFTINGS)

    def make(seed, rng):
        cls = classes[int(rng.integers(len(classes)))]
        table = {**LIFTINGS[cls], **COMMON}
        options = {name: values[int(rng.integers(2))] for name, values in table.items()}

        def run():
            text = repr(cls(**options))
            assert sorted(cls.shown) == sorted(LIFTINGS[cls]), f"{cls.__name__}.shown = {cls.shown}"
            for name, values in table.items():
                other = values[1] if options[name] == values[0] else values[0]
                assert repr(cls(**{**options, name: other})) != text, f"changing {name} keeps {text}"
            if cls is CellCycleLifting:
                assert repr(cls(**options, max_cycles=3)) == text, "max_cycles entered the repr"

        return f"{cls.__name__}({options})", ACCEPT, run

    run_cases(fuzz_seeds, "lifting reprs", make, offset=95_000)
