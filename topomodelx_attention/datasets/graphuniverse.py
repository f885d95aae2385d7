"""GraphUniverse graph families (``graph-universe==0.1.2``) with the protocol of TopoBench's challenge.

GraphUniverse (optional extra ``graphuniverse``) samples families of attributed graphs from a
"universe" of ``K`` communities (a degree-corrected stochastic block model with community
feature clusters). TopoBench's *TDL Challenge 2026* (``2026_tdl_challenge/utils.py``) evaluates
models on a grid of such families: three homophily levels × two average degrees × two
power-law exponents, each family 1,000 graphs of 50–300 nodes, with two tasks:

* ``community_detection``: node-level classification of the universe community of every node
  (``K = 20`` classes), inductive (the graphs are split, every node of a graph is in its split);
* ``triangle_counting``: graph-level regression of the number of triangles of the graph.

This module generates a family **in memory** with graph-universe's generator API
(:class:`graph_universe.GraphUniverse`, :class:`graph_universe.GraphFamilyGenerator`) and
converts it to PyG graphs exactly as graph-universe's ``GraphSample.to_pyg_graph`` does
(``x`` float features, symmetric ``edge_index``), plus both targets. graph-universe's own
``GraphUniverseDataset`` is not used: it stores the family as a pickle read back by PyG's
``fs.torch_load``, which falls back to ``torch.load(weights_only=False)`` (unpickling) when the
safe load fails. Our cache (:func:`load_family`) holds plain tensors only, read with
``torch.load(weights_only=True)`` and validated; a damaged file is regenerated.

Splits (:func:`challenge_split`) reproduce TopoBench's inductive ``random_splitting``
(``split_utils.py``): NumPy's global generator seeded with ``global_seed=42``, ten permutations
drawn, fold ``data_seed`` taken, ``int(n · train_prop)`` training and
``int(n · (1 - train_prop) / 2)`` validation graphs, the rest for testing.

The family ``dataset.loader=graphuniverse`` (``topomodelx-attention train --dataset
graphuniverse --model MODEL dataset.task=community_detection dataset.homophily=mid
dataset.avg_degree=hi dataset.power_law=lo [dataset.n_graphs=N]``) reads the family of that
setting (:func:`load_graphuniverse`: generated once, then cached), splits it by graph and sets
the task's protocol (:data:`TASK_PROTOCOL`, :func:`task_protocol`): community detection is
inductive node classification (cross-entropy, accuracy), triangle counting graph-level
regression (MSE, monitored MSE, and the challenge's ``mse_per_triangle`` = test MSE / number of
triangles of the test graphs).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.datasets.registry import DatasetFamily, default_root, register_family
from topomodelx_attention.files import atomic_output, write_text

__all__ = [
    "CACHE_FORMAT",
    "FAMILY_PARAMETERS",
    "GENERATION_MEMORY_BUDGET",
    "GRAPHUNIVERSE",
    "GRAPH_UNIVERSE_VERSION",
    "LEVELS",
    "MAX_FAILED_GRAPHS",
    "TASKS",
    "TASK_PROTOCOL",
    "UNIVERSE_PARAMETERS",
    "GraphUniverseCacheError",
    "cache_fields",
    "challenge_split",
    "check_generation_budget",
    "count_triangles",
    "family_cache_file",
    "generate_family",
    "generation_memory",
    "generation_parameters",
    "load_family",
    "load_graphuniverse",
    "parameters_from_config",
    "read_family",
    "save_family",
    "task_graphs",
    "task_protocol",
    "triangle_total",
]

GRAPH_UNIVERSE_VERSION = "0.1.2"
"""The graph-universe release the challenge pins (and the cache key includes)."""

CACHE_FORMAT = "topomodelx-attention graphuniverse family 1"
"""``format`` entry of a family cache file (:func:`save_family`)."""

TASKS = ("community_detection", "triangle_counting")
"""The two tasks of the challenge."""

UNIVERSE_PARAMETERS: dict[str, Any] = {
    "K": 20,
    "feature_dim": 15,
    "center_variance": 0.2,
    "cluster_variance": 0.4,
    "edge_propensity_variance": 0.5,
    "seed": 42,
}
"""``universe_parameters`` of the challenge (``STANDARD_GENERATION_PARAMETERS``, utils.py l.47-54)."""

FAMILY_PARAMETERS: dict[str, Any] = {
    "n_graphs": 1000,
    "n_nodes_range": [50, 300],
    "n_communities_range": [5, 10],
    "degree_separation_range": [0.5, 1.0],
    "seed": 42,
}
"""``family_parameters`` of the challenge (utils.py l.55-64) before the per-setting ranges."""

LEVELS: dict[str, dict[str, list[float]]] = {
    "homophily": {"lo": [0.0, 0.1], "mid": [0.4, 0.6], "hi": [0.9, 1.0]},
    "avg_degree": {"lo": [1.0, 2.5], "hi": [4.0, 5.0]},
    "power_law": {"lo": [1.5, 2.0], "hi": [4.0, 5.0]},
}
"""The levels of the challenge grid (utils.py l.67-80), by setting name."""

_RANGE_KEYS = {
    "homophily": "homophily_range",
    "avg_degree": "avg_degree_range",
    "power_law": "power_law_exponent_range",
}


GENERATION_MEMORY_BUDGET = 4 * 2**30
"""The most memory, in bytes, that generating one family may ask for: 4 GiB.

:func:`generation_parameters` (and :func:`generate_family`) estimate what the parameters ask
for (:func:`generation_memory`) before graph-universe allocates anything and refuse a family
above this budget with a ``ValueError`` that names the option to lower
(``dataset.universe.feature_dim``, ``dataset.family.n_nodes_range``, ``dataset.n_graphs``,
``dataset.universe.K``). The challenge's families (1,000 graphs of 50-300 vertices, 15
features, K = 20) are estimated at 0.6-0.85 GiB. To generate larger families on a machine with
the memory for them, raise this module attribute before composing the configuration."""

MAX_FAILED_GRAPHS = 50
"""Consecutive graphs graph-universe may fail to generate before the family is given up.

graph-universe retries a failed graph forever; parameters under which every graph fails (the
failures are its warnings) would never finish. :func:`generate_family` stops after this many
failures in a row with a ``ValueError`` quoting graph-universe's last error."""

_MAX_SEED = 2**32 - 1
_MAX_VARIANCE = 1e6
"""Upper bound of the universe's variances: features stay below ~1e4, far from the models' input limit."""

# Bytes per unit of the memory model of :func:`generation_memory`, measured with tracemalloc
# on graph-universe 0.1.2 (and rounded up): a kept graph holds its networkx graph, scipy and
# numpy arrays (float64 features) and our tensors (float32 features).
_BYTES_PER_VERTEX = 1000
_BYTES_PER_FEATURE = 12
_BYTES_PER_EDGE = 300
_BYTES_PER_PAIR = 64  # the edge sampler draws every one of a graph's n^2 / 2 vertex pairs (int64 indices, probabilities)
_BYTES_PER_COVARIANCE = 80  # a d x d covariance and its factorisation, per cluster of a graph
_BYTES_PER_COMMUNITY_PAIR = 40  # the universe's K x K propensity and statistics matrices


class GraphUniverseCacheError(ValueError):
    """A family cache file that is not a valid :func:`save_family` file for the parameters."""


# ----------------------------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------------------------
def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _pair(value: Any, name: str) -> list:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be a pair [min, max], got {value!r}")
    return [v.item() if isinstance(v, np.generic) else v for v in value]


def generation_parameters(
    homophily: str = "lo",
    avg_degree: str = "lo",
    power_law: str = "lo",
    *,
    n_graphs: int | None = None,
    universe: Mapping[str, Any] | None = None,
    family: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Return the generation parameters of one setting of the challenge grid (``build_generation_parameters``).

    Parameters
    ----------
    homophily : {"lo", "mid", "hi"}, default="lo"
        Homophily level: ranges ``[0.0, 0.1]``, ``[0.4, 0.6]``, ``[0.9, 1.0]``.
    avg_degree : {"lo", "hi"}, default="lo"
        Average degree level: ``[1.0, 2.5]`` or ``[4.0, 5.0]``.
    power_law : {"lo", "hi"}, default="lo"
        Power-law exponent level of the degree distribution: ``[1.5, 2.0]`` or ``[4.0, 5.0]``.
    n_graphs : int, optional
        Graphs of the family (default: the challenge's 1,000).
    universe : mapping, optional
        Entries replacing those of :data:`UNIVERSE_PARAMETERS` (unknown keys raise).
    family : mapping, optional
        Entries replacing those of :data:`FAMILY_PARAMETERS` (unknown keys raise; the three
        ranges of the levels are set by the levels, not here).

    Returns
    -------
    dict
        ``{"universe_parameters": {...}, "family_parameters": {...}}``, the arguments of
        ``GraphUniverse`` and ``GraphFamilyGenerator``.

    Raises
    ------
    ValueError
        For an unknown level, key or a malformed value (the message names it).
    """
    levels = {"homophily": homophily, "avg_degree": avg_degree, "power_law": power_law}
    universe_parameters = copy.deepcopy(UNIVERSE_PARAMETERS)
    family_parameters = copy.deepcopy(FAMILY_PARAMETERS)
    for name, given, target in (
        ("universe", universe, universe_parameters),
        ("family", family, family_parameters),
    ):
        unknown = sorted(set(given or {}) - set(target))
        if unknown:
            raise ValueError(
                f"dataset.{name} has unknown keys {unknown}; known: {sorted(target)} (the "
                "homophily, degree and power-law ranges are set by dataset.homophily, "
                "dataset.avg_degree and dataset.power_law)"
            )
        target.update({k: copy.deepcopy(v) for k, v in (given or {}).items()})
    for name, level in levels.items():
        if level not in LEVELS[name]:
            raise ValueError(
                f"dataset.{name} must be one of {sorted(LEVELS[name])} (the challenge's levels), "
                f"got {level!r}"
            )
        family_parameters[_RANGE_KEYS[name]] = list(LEVELS[name][level])
    if n_graphs is not None:
        family_parameters["n_graphs"] = n_graphs
    family_parameters["n_graphs"] = _positive_int(family_parameters["n_graphs"], "dataset.n_graphs")
    universe_parameters["K"] = _positive_int(universe_parameters["K"], "dataset.universe.K")
    universe_parameters["feature_dim"] = _positive_int(
        universe_parameters["feature_dim"], "dataset.universe.feature_dim"
    )
    for key in ("n_nodes_range", "n_communities_range"):
        pair = [_positive_int(v, f"dataset.family.{key}") for v in _pair(family_parameters[key], f"dataset.family.{key}")]
        if pair[0] > pair[1]:
            raise ValueError(f"dataset.family.{key} must be [min, max] with min <= max, got {pair}")
        family_parameters[key] = pair
    if family_parameters["n_nodes_range"][0] < 2:
        raise ValueError(
            f"dataset.family.n_nodes_range must start at 2 vertices or more (graph-universe cannot "
            f"scale the degree of a 1-vertex graph), got {family_parameters['n_nodes_range']}"
        )
    if family_parameters["n_communities_range"][1] > universe_parameters["K"]:
        raise ValueError(
            f"dataset.family.n_communities_range {family_parameters['n_communities_range']} "
            f"exceeds the universe's K={universe_parameters['K']} communities (dataset.universe.K)"
        )
    separation = _pair(family_parameters["degree_separation_range"], "dataset.family.degree_separation_range")
    if (
        any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1 for v in separation)
        or separation[0] > separation[1]
    ):
        raise ValueError(
            f"dataset.family.degree_separation_range must be [min, max] with 0 <= min <= max <= 1, "
            f"got {separation!r}"
        )
    family_parameters["degree_separation_range"] = [float(v) for v in separation]
    for key in ("center_variance", "cluster_variance", "edge_propensity_variance"):
        value = universe_parameters[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= _MAX_VARIANCE:
            raise ValueError(
                f"dataset.universe.{key} must be a number in [0, {_MAX_VARIANCE:g}], got {value!r}"
            )
    for name, parameters in (("universe", universe_parameters), ("family", family_parameters)):
        seed = parameters["seed"]
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= _MAX_SEED):
            raise ValueError(f"dataset.{name}.seed must be null or an integer in 0..2**32-1, got {seed!r}")
    out = {"universe_parameters": universe_parameters, "family_parameters": family_parameters}
    check_generation_budget(out)
    return out


def generation_memory(parameters: Mapping[str, Any]) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Estimate the memory one family's generation asks for, before anything is allocated.

    A model of graph-universe 0.1.2's allocations (rounded up from tracemalloc measurements),
    in four terms, each with the options it grows with:

    * ``"graphs"``: the generated graphs kept until the family is converted, ``n_graphs ×
      n_max × (1000 + 12 d)`` bytes plus 300 bytes per edge (at most ``n_max`` times the
      largest average degree, plus the edges joining components);
    * ``"pairs"``: the edge sampler of one graph, 64 bytes for each of its ``n_max²`` vertex
      pairs (it draws every pair at once);
    * ``"features"``: the ``d × d`` covariance of the feature clusters and its factorisation
      (``80 d²``) plus a graph's features (``16 n_max d``);
    * ``"universe"``: the ``K × K`` propensity and statistics matrices (``40 K²``) and the
      ``K × d`` cluster centres.

    Parameters
    ----------
    parameters : mapping
        ``{"universe_parameters": ..., "family_parameters": ...}``.

    Returns
    -------
    dict of str to (int, tuple of str)
        Bytes of each term and the options (dotted config keys) it grows with.
    """
    universe, family = parameters["universe_parameters"], parameters["family_parameters"]
    n_graphs, n_max = int(family["n_graphs"]), int(family["n_nodes_range"][1])
    d, k = int(universe["feature_dim"]), int(universe["K"])
    degree = float(max(family.get("avg_degree_range") or [LEVELS["avg_degree"]["hi"][1]]))
    edges = math.ceil(n_max * degree) + n_max
    return {
        "graphs": (
            n_graphs * (n_max * (_BYTES_PER_VERTEX + _BYTES_PER_FEATURE * d) + edges * _BYTES_PER_EDGE),
            ("dataset.n_graphs", "dataset.family.n_nodes_range", "dataset.universe.feature_dim"),
        ),
        "pairs": (_BYTES_PER_PAIR * n_max * n_max, ("dataset.family.n_nodes_range",)),
        "features": (_BYTES_PER_COVARIANCE * d * d + 16 * n_max * d, ("dataset.universe.feature_dim",)),
        "universe": (_BYTES_PER_COMMUNITY_PAIR * k * k + 8 * k * d, ("dataset.universe.K",)),
    }


def _size(nbytes: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes / 2**10:,.1f} KiB"


def check_generation_budget(parameters: Mapping[str, Any], budget: int | None = None) -> int:
    """Refuse parameters whose generation asks for more than the budget (before any allocation).

    Parameters
    ----------
    parameters : mapping
        Generation parameters (:func:`generation_parameters`).
    budget : int, optional
        Bytes (default :data:`GENERATION_MEMORY_BUDGET`, read at the call).

    Returns
    -------
    int
        The estimate, in bytes (:func:`generation_memory`, summed).

    Raises
    ------
    ValueError
        Naming the options of the largest term with their values, the estimate and the budget.
    """
    budget = GENERATION_MEMORY_BUDGET if budget is None else int(budget)
    terms = generation_memory(parameters)
    total = sum(nbytes for nbytes, _ in terms.values())
    if total <= budget:
        return total
    _, options = max(terms.values(), key=lambda term: term[0])
    values = {
        "dataset.n_graphs": parameters["family_parameters"]["n_graphs"],
        "dataset.family.n_nodes_range": list(parameters["family_parameters"]["n_nodes_range"]),
        "dataset.universe.feature_dim": parameters["universe_parameters"]["feature_dim"],
        "dataset.universe.K": parameters["universe_parameters"]["K"],
    }
    named = ", ".join(f"{option}={values[option]}" for option in options)
    raise ValueError(
        f"{named}: generating this GraphUniverse family asks for about {_size(total)}, above the "
        f"budget of {_size(budget)} (topomodelx_attention.datasets.graphuniverse.GENERATION_MEMORY_BUDGET); "
        f"lower {' or '.join(options)}"
    )


# ----------------------------------------------------------------------------------------------
# generation and conversion
# ----------------------------------------------------------------------------------------------
def count_triangles(edge_index: Tensor, num_nodes: int) -> int:
    """Triangles of a graph as the challenge counts them (``networkx.triangles``, summed / 3).

    Parameters
    ----------
    edge_index : torch.Tensor, shape = (2, n_edges)
        Edges (any direction; both directions of an edge count once, self-loops are dropped).
    num_nodes : int
        Number of vertices.

    Returns
    -------
    int
        Number of triangles.
    """
    graph = nx.Graph()
    graph.add_nodes_from(range(int(num_nodes)))
    graph.add_edges_from((u, v) for u, v in edge_index.t().tolist() if u != v)
    return sum(nx.triangles(graph).values()) // 3


def _sample_to_data(sample: Any) -> Data:
    """Convert a ``GraphSample`` to ``Data(x, edge_index, community, triangles)`` (``to_pyg_graph``'s rules)."""
    from torch_geometric.utils import to_undirected

    features = getattr(sample, "features", None)
    labels = getattr(sample, "community_labels_universe_level", None)
    if features is None or labels is None:
        raise ValueError("graph-universe returned a graph without features or community labels")
    x = torch.tensor(np.asarray(features), dtype=torch.float)
    n = x.shape[0]
    edges = list(sample.graph.edges())
    if edges:
        edge_index = to_undirected(torch.tensor(edges, dtype=torch.long).t().contiguous(), num_nodes=n)
    else:
        edge_index = torch.zeros((2, 0), dtype=torch.long)
    community = torch.tensor(np.asarray(labels), dtype=torch.long).view(-1)
    if community.numel() != n:
        raise ValueError(f"graph-universe returned {community.numel()} labels for {n} nodes")
    triangles = torch.tensor([count_triangles(edge_index, n)], dtype=torch.long)
    return Data(x=x, edge_index=edge_index, community=community, triangles=triangles, num_nodes=n)


def generate_family(parameters: Mapping[str, Any], progress: bool = False) -> list[Data]:
    """Generate a family in memory with graph-universe (no file is written).

    graph-universe seeds NumPy's global generator; its state is restored afterwards, so the
    caller's random stream is untouched.

    Parameters
    ----------
    parameters : mapping
        ``{"universe_parameters": ..., "family_parameters": ...}``
        (:func:`generation_parameters`).
    progress : bool, default=False
        Show graph-universe's progress bar.

    Returns
    -------
    list of torch_geometric.data.Data
        One graph per member of the family, in generation order: ``x`` ``(n, feature_dim)``
        float, ``edge_index`` ``(2, 2m)`` (both directions), ``community`` ``(n,)`` long
        (universe community of every node), ``triangles`` ``(1,)`` long.

    Raises
    ------
    ImportError
        When graph-universe is not installed (the message names the extra).
    ValueError
        When the parameters ask for more memory than :data:`GENERATION_MEMORY_BUDGET`
        (:func:`check_generation_budget`, before graph-universe runs), or graph-universe fails
        :data:`MAX_FAILED_GRAPHS` times in a row to generate a graph.
    """
    try:
        from graph_universe import GraphFamilyGenerator, GraphUniverse
    except ImportError as error:
        raise ImportError(
            f"GraphUniverse data needs graph-universe=={GRAPH_UNIVERSE_VERSION}: pip install "
            "'topomodelx-attention[graphuniverse]'"
        ) from error
    check_generation_budget(parameters)
    universe_parameters = dict(parameters["universe_parameters"])
    family_parameters = dict(parameters["family_parameters"])
    state = np.random.get_state()  # noqa: NPY002 (graph-universe seeds the legacy global generator)
    family = None
    failures = {"in_a_row": 0, "kept": -1}

    def on_warning(message: Any, *args: Any, **kwargs: Any) -> None:
        # graph-universe warns once per failed graph and retries forever: count the failures
        if family is None or "Failed to generate graph" not in str(message):
            return
        kept = len(family.graphs)
        failures["in_a_row"] = failures["in_a_row"] + 1 if kept == failures["kept"] else 1
        failures["kept"] = kept
        if failures["in_a_row"] >= MAX_FAILED_GRAPHS:
            raise ValueError(
                f"graph-universe failed {MAX_FAILED_GRAPHS} times in a row to generate graph {kept + 1} of "
                f"the family ({message}): these dataset.universe / dataset.family parameters cannot "
                "produce it; change them"
            )

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # graph-universe warns on retried samples: counted, not shown
            warnings.showwarning = on_warning
            universe = GraphUniverse(**universe_parameters)
            family = GraphFamilyGenerator(
                universe=universe, **{k: tuple(v) if isinstance(v, list) else v for k, v in family_parameters.items()}
            )
            family.generate_family(show_progress=progress, collect_stats=False)
        return [_sample_to_data(sample) for sample in family.graphs]
    finally:
        np.random.set_state(state)  # noqa: NPY002


def task_graphs(family: Sequence[Data], task: str) -> list[Data]:
    """Graphs of one task: ``Data(x, edge_index, y)``.

    Parameters
    ----------
    family : sequence of Data
        Graphs of :func:`generate_family` / :func:`load_family`.
    task : {"community_detection", "triangle_counting"}
        ``y`` is the community of every node (``(n,)`` long) or the number of triangles of
        the graph (``(1,)`` float).

    Returns
    -------
    list of torch_geometric.data.Data
        New graphs sharing the tensors of ``family``.
    """
    if task not in TASKS:
        raise ValueError(f"dataset.task must be one of {TASKS} for GraphUniverse, got {task!r}")
    out = []
    for graph in family:
        y = graph.community if task == "community_detection" else graph.triangles.to(torch.float)
        out.append(Data(x=graph.x, edge_index=graph.edge_index, y=y, num_nodes=graph.num_nodes))
    return out


def challenge_split(
    n: int, train_prop: float = 0.7, data_seed: int = 0, global_seed: int = 42
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TopoBench's inductive random split (``split_utils.random_splitting``), by graph.

    Parameters
    ----------
    n : int
        Number of graphs.
    train_prop : float, default=0.7
        Training proportion; validation and test get ``(1 - train_prop) / 2`` each
        (``int`` rounding, the test set the rest).
    data_seed : int, default=0
        Fold: which of the ten permutations drawn after seeding (0..9).
    global_seed : int, default=42
        Seed of NumPy's generator (TopoBench's ``global_data_seed``).

    Returns
    -------
    tuple of numpy.ndarray
        ``(train, val, test)`` graph indices, in TopoBench's (permutation) order.

    Raises
    ------
    ValueError
        For proportions outside ``(0, 1)``, a fold outside 0..9, or a split that would be empty.
    """
    if isinstance(train_prop, bool) or not isinstance(train_prop, (int, float)) or not 0 < train_prop < 1:
        raise ValueError(f"dataset.split.train_prop must be in (0, 1), got {train_prop!r}")
    if isinstance(data_seed, bool) or not isinstance(data_seed, int) or not 0 <= data_seed < 10:
        raise ValueError(f"dataset.split.data_seed must be a fold in 0..9 (TopoBench draws ten), got {data_seed!r}")
    if isinstance(global_seed, bool) or not isinstance(global_seed, (int, np.integer)) or not 0 <= global_seed <= _MAX_SEED:
        raise ValueError(f"dataset.split.global_seed must be an integer in 0..2**32-1, got {global_seed!r}")
    n = int(n)
    n_train = int(n * train_prop)
    n_val = int(n * (1 - train_prop) / 2)
    if min(n_train, n_val, n - n_train - n_val) < 1:
        raise ValueError(
            f"{n} graphs with dataset.split.train_prop={train_prop} leave a split empty "
            f"({n_train} train, {n_val} validation, {n - n_train - n_val} test graphs): generate "
            "more graphs (dataset.n_graphs) or change train_prop"
        )
    rng = np.random.RandomState(int(global_seed))  # = np.random.seed(global_seed) + np.random.permutation
    for _ in range(data_seed + 1):
        permutation = rng.permutation(n)
    return permutation[:n_train], permutation[n_train : n_train + n_val], permutation[n_train + n_val :]


# ----------------------------------------------------------------------------------------------
# cache: plain tensors, read with torch.load(weights_only=True)
# ----------------------------------------------------------------------------------------------
def _parameters_text(parameters: Mapping[str, Any]) -> str:
    plain = {
        "graph_universe": GRAPH_UNIVERSE_VERSION,
        "universe_parameters": dict(parameters["universe_parameters"]),
        "family_parameters": dict(parameters["family_parameters"]),
    }
    return json.dumps(plain, sort_keys=True, default=str)


def family_cache_file(parameters: Mapping[str, Any], cache_dir: str | os.PathLike | None = None) -> Path:
    """Cache file of a family: ``<cache_dir>/graphuniverse/<hash of the parameters>.pt``.

    Parameters
    ----------
    parameters : mapping
        Generation parameters (:func:`generation_parameters`).
    cache_dir : path-like, optional
        Cache root (default ``$TOPOMODELX_ATTENTION_DATA`` or ``~/.cache/topomodelx_attention``).

    Returns
    -------
    pathlib.Path
        The file (it may not exist yet).
    """
    root = Path(cache_dir).expanduser() if cache_dir else default_root()
    key = hashlib.sha1((CACHE_FORMAT + _parameters_text(parameters)).encode()).hexdigest()[:16]
    return root / "graphuniverse" / f"{key}.pt"


_TENSORS = ("num_nodes", "num_edges", "x", "edge_index", "community", "triangles")


def _checksum(payload: Mapping[str, Any]) -> str:
    """SHA-1 of the bytes of the family's tensors (detects damaged files that still load)."""
    digest = hashlib.sha1()
    for key in _TENSORS:
        tensor = payload[key]
        digest.update(f"{key}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()


def save_family(
    graphs: Sequence[Data],
    parameters: Mapping[str, Any],
    path: str | os.PathLike,
    *,
    root: str | os.PathLike | None = None,
) -> None:
    """Write a family as concatenated plain tensors, atomically (:func:`topomodelx_attention.files.atomic_output`).

    Parameters
    ----------
    graphs : sequence of Data
        Graphs of :func:`generate_family`.
    parameters : mapping
        Their generation parameters (stored, checked when read back).
    path : path-like
        Cache file.
    root : path-like, optional
        The cache folder (default: the folder of ``path``); no link below it is followed.
    """
    path = Path(path)
    graphs = list(graphs)
    payload = {
        "format": CACHE_FORMAT,
        "parameters": _parameters_text(parameters),
        "count": len(graphs),
        "num_nodes": torch.tensor([int(g.num_nodes) for g in graphs], dtype=torch.long),
        "num_edges": torch.tensor([int(g.edge_index.shape[1]) for g in graphs], dtype=torch.long),
        "x": torch.cat([g.x for g in graphs]) if graphs else torch.zeros(0, 0),
        "edge_index": torch.cat([g.edge_index for g in graphs], dim=1) if graphs else torch.zeros(2, 0, dtype=torch.long),
        "community": torch.cat([g.community for g in graphs]) if graphs else torch.zeros(0, dtype=torch.long),
        "triangles": torch.cat([g.triangles for g in graphs]) if graphs else torch.zeros(0, dtype=torch.long),
    }
    payload["checksum"] = _checksum(payload)
    with atomic_output(path, root=root) as handle:
        torch.save(payload, handle)


def read_family(path: str | os.PathLike, parameters: Mapping[str, Any]) -> list[Data]:
    """Read a :func:`save_family` file with ``torch.load(weights_only=True)`` and validate it.

    Parameters
    ----------
    path : path-like
        Cache file.
    parameters : mapping
        The generation parameters the file must hold.

    Returns
    -------
    list of torch_geometric.data.Data
        The graphs, as :func:`generate_family` returns them.

    Raises
    ------
    GraphUniverseCacheError
        When the file is damaged, not a family file, holds other parameters, or anything but
        plain tensors (a pickle naming any other global is refused by ``weights_only``,
        unexecuted); the message names the file.
    """
    path = Path(path)

    def bad(why: str) -> GraphUniverseCacheError:
        return GraphUniverseCacheError(f"{path}: {why}")

    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, garbage, foreign pickles: all invalid
        first = str(error).splitlines()[0] if str(error) else ""
        raise bad(f"not a readable family file ({type(error).__name__}: {first})") from error
    if not isinstance(raw, dict) or raw.get("format") != CACHE_FORMAT:
        raise bad(f"not a GraphUniverse family file (expected format {CACHE_FORMAT!r})")
    if raw.get("parameters") != _parameters_text(parameters):
        raise bad("holds a family of other generation parameters")
    count = raw.get("count")
    if not isinstance(count, int) or count < 0 or not all(isinstance(raw.get(k), Tensor) for k in _TENSORS):
        raise bad("entries missing or not tensors")
    if raw.get("checksum") != _checksum(raw):
        raise bad("its tensors do not match their checksum (a damaged file)")
    nodes, edges, x, edge_index, community, triangles = (raw[k] for k in _TENSORS)
    feature_dim = int(parameters["universe_parameters"]["feature_dim"])
    k = int(parameters["universe_parameters"]["K"])
    total_nodes = int(nodes.sum()) if nodes.numel() else 0
    shapes_ok = (
        nodes.dtype == edges.dtype == edge_index.dtype == community.dtype == triangles.dtype == torch.long
        and nodes.shape == edges.shape == triangles.shape == (count,)
        and bool((nodes >= 0).all()) and bool((edges >= 0).all()) and bool((triangles >= 0).all())
        and x.dtype == torch.float32 and x.shape == (total_nodes, feature_dim)
        and community.shape == (total_nodes,)
        and edge_index.dim() == 2 and edge_index.shape[0] == 2
        and edge_index.shape[1] == (int(edges.sum()) if edges.numel() else 0)
    )
    if not shapes_ok:
        raise bad("tensor shapes or dtypes do not match")
    if not bool(torch.isfinite(x).all()):
        raise bad("features are not finite")
    if community.numel() and (int(community.min()) < 0 or int(community.max()) >= k):
        raise bad(f"community labels outside 0..{k - 1}")
    owner = torch.repeat_interleave(torch.arange(count), edges)
    if edge_index.numel() and (int(edge_index.min()) < 0 or bool((edge_index >= nodes[owner]).any())):
        raise bad("edges refer to vertices outside their graph")
    out = []
    for xs, es, cs, t, n in zip(
        x.split(nodes.tolist()), edge_index.split(edges.tolist(), dim=1),
        community.split(nodes.tolist()), triangles.split(1), nodes.tolist(),
    ):
        out.append(Data(x=xs.clone(), edge_index=es.clone(), community=cs.clone(), triangles=t.clone(), num_nodes=int(n)))
    return out


def load_family(
    parameters: Mapping[str, Any],
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = False,
) -> list[Data]:
    """Return a family from the cache, else generate (and cache) it.

    Parameters
    ----------
    parameters : mapping
        Generation parameters (:func:`generation_parameters`).
    cache_dir : path-like, optional
        Cache root (see :func:`family_cache_file`).
    use_cache : bool, default=True
        Read and write the cache file.
    progress : bool, default=False
        Show graph-universe's progress bar while generating.

    Returns
    -------
    list of torch_geometric.data.Data
        The graphs of :func:`generate_family`.
    """
    path = family_cache_file(parameters, cache_dir)
    if use_cache and path.is_file():
        try:
            return read_family(path, parameters)
        except GraphUniverseCacheError as error:
            warnings.warn(f"{error}; the file was deleted and the family is regenerated", stacklevel=2)
            path.unlink(missing_ok=True)
    graphs = generate_family(parameters, progress=progress)
    if use_cache:
        root = path.parent.parent  # the cache root (family_cache_file)
        save_family(graphs, parameters, path, root=root)
        write_text(path.with_suffix(".json"), _parameters_text(parameters) + "\n", root=root)
    return graphs


def triangle_total(graphs: Sequence[Data]) -> int:
    """Total number of triangles of graphs (the challenge's normaliser of the test MSE)."""
    return int(sum(count_triangles(g.edge_index, int(g.num_nodes)) for g in graphs))


# ----------------------------------------------------------------------------------------------
# the family: dataset.loader=graphuniverse (the challenge's task protocol)
# ----------------------------------------------------------------------------------------------
TASK_PROTOCOL: dict[str, dict[str, Any]] = {
    "community_detection": {
        "task": "classification",
        "task_level": "node",
        "loss": "cross_entropy",
        "monitor_metric": "accuracy",
        "metrics": [],
    },
    "triangle_counting": {
        "task": "regression",
        "task_level": "graph",
        "loss": "mse",
        "monitor_metric": "mse",
        "num_classes": 1,
        "metrics": ["mse_per_triangle"],
    },
}
"""Harness task settings of each challenge task (TopoBench's ``graphuniverse_inductive*.yaml``)."""


def _task(cfg: Mapping[str, Any]) -> str:
    task = cfg.get("challenge_task") or cfg.get("task")  # challenge_task: set by task_protocol
    if task not in TASKS:
        raise ValueError(f"dataset.task must be one of {TASKS} for GraphUniverse, got {task!r}")
    return str(task)


@fill_doc
def parameters_from_config(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Return the generation parameters of the ``dataset`` config (levels, ``n_graphs``, ``universe``, ``family``).

    %(dataset_cfg_parameters)s

    Returns
    -------
    dict
        :func:`generation_parameters`.
    """
    return generation_parameters(
        cfg.get("homophily", "lo"),
        cfg.get("avg_degree", "lo"),
        cfg.get("power_law", "lo"),
        n_graphs=cfg.get("n_graphs"),
        universe=cfg.get("universe"),
        family=cfg.get("family"),
    )


def _split_options(cfg: Mapping[str, Any]) -> dict[str, Any]:
    split = dict(cfg.get("split") or {})
    return {
        "train_prop": split.get("train_prop", 0.7),
        "data_seed": split.get("data_seed", 0),
        "global_seed": split.get("global_seed", 42),
    }


@fill_doc
def cache_fields(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Return what determines the processed complexes besides the lifting: task, generation, split.

    %(dataset_cfg_parameters)s

    Returns
    -------
    dict
        Hashed into the harness cache key.
    """
    return {"task": _task(cfg), "generation": parameters_from_config(cfg), "split": _split_options(cfg)}


@fill_doc
def load_graphuniverse(cfg: Mapping[str, Any], cache_dir: str | os.PathLike) -> dict[str, list[Data]]:
    """Return the graphs of the configured task, split by graph as TopoBench does.

    %(dataset_cfg_parameters)s
    cache_dir : path-like
        Cache root; the family is stored under ``<cache_dir>/graphuniverse/``.

    Returns
    -------
    dict of str to list of Data
        ``{"train", "val", "test"}`` (the data set's own split).
    """
    task = _task(cfg)
    parameters = parameters_from_config(cfg)
    split = _split_options(cfg)
    n_graphs = parameters["family_parameters"]["n_graphs"]
    parts = challenge_split(n_graphs, **split)  # fails before the generation on an empty split
    graphs = task_graphs(load_family(parameters, cache_dir, progress=bool(cfg.get("progress", False))), task)
    return {name: [graphs[int(i)] for i in idx] for name, idx in zip(("train", "val", "test"), parts)}


@fill_doc
def task_protocol(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``dataset`` config with the harness task settings of its challenge task filled in.

    ``task`` becomes the harness task kind (``classification`` / ``regression``);
    ``task_level``, ``loss``, ``monitor_metric``, ``num_classes`` (``K`` communities) and
    ``metrics`` take the protocol's value unless set (not null). A ``task_level`` that
    contradicts the task raises.

    %(dataset_cfg_parameters)s

    Returns
    -------
    dict
        A new config.
    """
    task = _task(cfg)
    protocol = dict(TASK_PROTOCOL[task])
    if task == "community_detection":
        protocol["num_classes"] = int(parameters_from_config(cfg)["universe_parameters"]["K"])
    level = cfg.get("task_level")
    if level is not None and level != protocol["task_level"]:
        raise ValueError(
            f"dataset.task={task} is a {protocol['task_level']}-level task, but "
            f"dataset.task_level={level!r}: leave task_level null"
        )
    out = dict(cfg)
    out["challenge_task"] = task
    for key, value in protocol.items():
        if key == "task" or out.get(key) is None:
            out[key] = value
    return out


GRAPHUNIVERSE = register_family(DatasetFamily(
    "graphuniverse",
    read=load_graphuniverse,
    files=lambda cfg, cache_dir: [],  # generated, not read: the generation parameters are in the key
    key_fields=lambda cfg: {"graphuniverse": cache_fields(cfg)},
    protocol=task_protocol,
))
"""Generated GraphUniverse families (``dataset.loader=graphuniverse``): their challenge split and task protocol."""
