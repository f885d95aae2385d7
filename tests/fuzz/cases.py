"""Random and degenerate inputs for the fuzz suite, and the one rule every case is judged by.

A case runs a callable on a generated input with an expectation:

* ``ACCEPT``: a well-formed input (empty graph, single vertex, isolated vertices, no edges,
  3-cells included): it must succeed and pass the caller's checks (shapes, finiteness);
* ``REJECT``: a malformed input (NaN / Inf / huge features given to a model, row-count
  mismatches, multi-edges, self-loops with ``self_loops="raise"``): it must raise
  ``ValueError`` or ``TypeError`` with a non-empty message;
* ``EITHER``: a documented limit may apply (e.g. integer features without cardinalities):
  success or a ``ValueError`` / ``TypeError`` with a message.

Any other exception type, an empty message, a silent acceptance of a malformed input, a
rejection of a well-formed one, a wrong number of rows or a non-finite output / gradient is a
failure. Failures are collected over all cases of a test and reported together, each with its
seed (rerun one with ``TMA_FUZZ_SEED=<seed>``) and the package line that raised.
"""

from __future__ import annotations

import os
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data

DEFAULT_CASES = 12
"""Cases per fuzz test in CI (the whole suite stays well under a minute on 2 cores)."""

ACCEPT, REJECT, EITHER = "accept", "reject", "either"

MAX_NODES = 12

# ----------------------------------------------------------------------------------------------
# failures located in files that other work streams are fixing now: reported, not hidden
# ----------------------------------------------------------------------------------------------
KNOWN_ELSEWHERE: dict[str, str] = {
}
"""Failures in files this suite may not fix (data/complex_data.py, data/convert.py,
transforms/liftings.py, nn/cell, nn/simplicial), keyed by a substring of the failure text
(exception type and package location; ``a&&b``: both). A test whose only failures are listed here is marked
``xfail`` with the list; ``TMA_FUZZ_STRICT=1`` turns them into failures to re-check them after
the fixes land."""


@dataclass
class GraphCase:
    """A generated PyG graph and what the liftings must do with it."""

    data: Data
    description: str
    expect: str = ACCEPT
    finite: bool = True  # features finite and within the models' range
    num_nodes: int = 0
    kinds: set[str] = field(default_factory=set)


def _matches(key: str, failure: str) -> bool:
    """``key`` is one substring, or several joined by ``&&`` that must all occur."""
    return all(part in failure for part in key.split("&&"))


def _package_location(error: BaseException) -> str:
    """``file:line`` of the innermost frame inside the package (else the innermost frame)."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [
        f"{frame.filename.split('topomodelx_attention/', 1)[-1]}:{frame.lineno}"
        for frame in frames
        if "topomodelx_attention" in frame.filename
    ]
    if ours:
        return " <- ".join(ours[::-1][:2])
    if frames:
        return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}"
    return "?"


class Fuzzer:
    """Collect the outcome of many cases; :meth:`finish` fails the test with all failures."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.failures: list[str] = []
        self.runs = 0
        self.rejected = 0

    def case(self, seed: int, description: str, expect: str, run: Callable[[], object]) -> object:
        """Run one case; returns its result (``None`` when it raised)."""
        self.runs += 1
        where = f"seed={seed} [{description}]"
        try:
            result = run()
        except (ValueError, TypeError) as error:
            self.rejected += 1
            message = str(error).strip()
            if not message:
                self.failures.append(f"{where}: {type(error).__name__} with an empty message at {_package_location(error)}")
            elif expect == ACCEPT:
                self.failures.append(
                    f"{where}: well-formed input rejected: {type(error).__name__}: {message[:160]} "
                    f"at {_package_location(error)}"
                )
            return None
        except AssertionError as error:
            self.failures.append(f"{where}: check failed: {str(error)[:240]}")
            return None
        except Exception as error:
            self.failures.append(
                f"{where}: {type(error).__name__}: {str(error)[:160]} at {_package_location(error)}"
            )
            return None
        if expect == REJECT:
            self.failures.append(f"{where}: malformed input accepted silently")
        return result

    def finish(self) -> None:
        """Fail (unknown failures), xfail (only failures known elsewhere) or pass."""
        if not self.failures:
            return
        known = [f for f in self.failures if any(_matches(k, f) for k in KNOWN_ELSEWHERE)]
        unknown = [f for f in self.failures if f not in known]
        strict = os.environ.get("TMA_FUZZ_STRICT", "") not in ("", "0")
        report = "\n".join(unknown[:25] + (known[:10] if strict or not unknown else []))
        summary = f"{self.name}: {len(self.failures)} failing of {self.runs} cases"
        if unknown or strict:
            pytest.fail(f"{summary}\n{report}", pytrace=False)
        reasons = sorted({KNOWN_ELSEWHERE[k] for k in KNOWN_ELSEWHERE if any(_matches(k, f) for f in known)})
        pytest.xfail(f"{summary}, all known elsewhere ({'; '.join(reasons)}):\n{report}")


# ----------------------------------------------------------------------------------------------
# graphs
# ----------------------------------------------------------------------------------------------
STRUCTURES = (
    "empty", "single", "no_edges", "random", "isolated", "complete", "tree",
    "one_direction", "self_loop", "multi_edge",
)
FEATURES = (
    "float32", "float32", "float32", "float64", "int", "none", "nan", "inf", "huge",
    "x_rows", "edge_attr_rows",
)


def run_cases(fuzz_seeds, name: str, make: Callable, *, offset: int = 0) -> None:
    """Run one fuzz test: a :class:`Fuzzer` case per seed, all failures reported together.

    ``make(seed, rng) -> (description, expect, run)`` builds the case of ``seed`` with
    ``rng = np.random.default_rng(offset + seed)`` (``offset`` keeps the tests' streams apart).
    """
    fuzz = Fuzzer(name)
    for seed in fuzz_seeds:
        description, expect, run = make(seed, np.random.default_rng(offset + seed))
        fuzz.case(seed, description, expect, run)
    fuzz.finish()


def quietly(function: Callable, *args, **kwargs):
    """Call ``function(*args, **kwargs)`` with warnings silenced (liftings warn on degenerate graphs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def _undirected(edges: list[tuple[int, int]]) -> torch.Tensor:
    both = [(u, v) for u, v in edges] + [(v, u) for u, v in edges]
    return torch.tensor(both, dtype=torch.long).t().reshape(2, -1)


def random_graph(
    seed: int,
    structures: tuple[str, ...] = STRUCTURES,
    features: tuple[str, ...] = FEATURES,
    edge_attr: bool | None = None,
    feature_dim: int | None = None,
) -> GraphCase:
    """A small random or degenerate PyG graph, with what lifting it must do.

    ``structure`` picks the edge set (``self_loop``/``multi_edge`` are malformed unless the
    lifting drops self-loops), ``feature`` the vertex features (``nan``/``inf`` are rejected by
    the liftings, ``huge`` = 1e30 only by the models, ``x_rows``/``edge_attr_rows`` are
    row-count mismatches).
    """
    rng = np.random.default_rng(seed)
    structure = structures[int(rng.integers(len(structures)))]
    feature = features[int(rng.integers(len(features)))]
    n = {"empty": 0, "single": 1}.get(structure, int(rng.integers(2, MAX_NODES + 1)))
    if structure == "isolated":
        n = max(n, 5)
    kinds = {structure, feature}
    edges: list[tuple[int, int]] = []
    if structure in ("random", "isolated", "one_direction", "self_loop", "multi_edge"):
        graph = nx.gnp_random_graph(n - (3 if structure == "isolated" else 0), float(rng.uniform(0.2, 0.7)), seed=seed)
        edges = sorted(graph.edges)
    elif structure == "complete":
        n = min(n, 6)
        edges = [(u, v) for u in range(n) for v in range(u + 1, n)]
    elif structure == "tree":
        edges = sorted(nx.random_labeled_tree(n, seed=seed).edges) if n > 1 else []
    if structure == "isolated":
        n = max(n, max((v for e in edges for v in e), default=-1) + 1 + int(rng.integers(1, 4)))
    expect = ACCEPT
    edge_index = _undirected(edges)
    if structure == "one_direction" and edges:
        edge_index = torch.tensor(edges, dtype=torch.long).t()
    if structure == "self_loop" and n:
        v = int(rng.integers(n))
        edge_index = torch.cat([edge_index, torch.tensor([[v], [v]])], dim=1)
        kinds.add("has_self_loop")
    if structure == "multi_edge" and edges:
        u, v = edges[int(rng.integers(len(edges)))]
        edge_index = torch.cat([edge_index, torch.tensor([[u], [v]])], dim=1)
        expect = REJECT
    d = int(rng.integers(1, 4)) if feature_dim is None else feature_dim
    data = Data(edge_index=edge_index, num_nodes=n)
    finite = True
    if feature == "none":
        pass
    elif feature == "int":
        data.x = torch.from_numpy(rng.integers(0, 3, (n, d)))
    else:
        x = torch.from_numpy(rng.standard_normal((n, d)))
        x = x.double() if feature == "float64" else x.float()
        if feature in ("nan", "inf", "huge") and n:
            x[int(rng.integers(n)), int(rng.integers(d))] = {"nan": float("nan"), "inf": -float("inf"), "huge": 1e30}[feature]
            finite = False
            if feature != "huge":
                expect = REJECT
        data.x = x
    if feature == "x_rows":
        data.num_nodes = n + 1  # x has n rows
        expect = REJECT
    use_edge_attr = bool(rng.integers(2)) if edge_attr is None else edge_attr
    if use_edge_attr or feature == "edge_attr_rows":
        e = edge_index.size(1)
        undirected_values = torch.from_numpy(rng.standard_normal((MAX_NODES * MAX_NODES, 2))).float()
        keys = torch.minimum(edge_index[0], edge_index[1]) * MAX_NODES + torch.maximum(edge_index[0], edge_index[1])
        data.edge_attr = undirected_values[keys] if e else torch.zeros(0, 2)
        if feature == "edge_attr_rows":
            data.edge_attr = torch.zeros(e + 1, 2)
            expect = REJECT
    return GraphCase(data, f"{structure}/{feature}/n={n}", expect, finite, n, kinds)


def finite_float_graph(seed: int, structures: tuple[str, ...] | None = None, **kwargs) -> GraphCase:
    """A well-formed graph with float32 features (the models' valid inputs)."""
    structures = structures or ("empty", "single", "no_edges", "random", "isolated", "complete", "tree")
    return random_graph(seed, structures, ("float32",), **kwargs)


def combinatorial_complex(seed: int):
    """A random TopoNetX ``CombinatorialComplex`` with cells of ranks 1..3 (a rank-3 cell)."""
    import toponetx as tnx

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    cc = tnx.CombinatorialComplex()
    for v in range(n):
        cc.add_cell([v], rank=0)
    cells = {1: [], 2: [], 3: []}
    for rank, size in ((1, 2), (2, 3), (3, 4)):
        for _ in range(int(rng.integers(0, 4))):
            if n < size:
                break
            cell = tuple(sorted(int(v) for v in rng.choice(n, size, replace=False)))
            if cell not in cells[rank]:
                cells[rank].append(cell)
                cc.add_cell(list(cell), rank=rank)
    if n >= 4 and not cells[3]:
        cc.add_cell(list(range(4)), rank=3)
    if n >= 4 and rng.integers(2):  # graded: every rank below a rank-3 cell non-empty
        cc.add_cell([0, 1], rank=1)
        cc.add_cell([0, 1, 2], rank=2)
    return cc


def assert_finite(name: str, value: torch.Tensor | torch.nn.Module) -> None:
    """``value`` is finite; for a module, every gradient a backward pass left on its parameters."""
    if isinstance(value, torch.nn.Module):
        for key, p in value.named_parameters():
            if p.grad is not None:
                assert torch.isfinite(p.grad).all(), f"gradient of {key} is not finite"
        return
    assert torch.isfinite(value).all(), f"{name} is not finite: {value.flatten()[:6].tolist()}"
