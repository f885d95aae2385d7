"""Write an ENZYMES-like TU-format data set of ring graphs (6 classes), offline.

Each graph (~30 vertices) is a tree-like chain of 2-5 rings (sizes 4-8) joined by short paths,
plus a few pendant vertices; every vertex carries one of 3 node labels. The class (0..5)
depends on the structure *and* on the label composition:

``class = 2 * (number of 6-rings, clipped to 0..2) + (label 2 is more frequent on ring
vertices than label 1)``,

then 10 % of the labels are redrawn at random (so the task is learnable but not trivial: the
Bayes accuracy is about 92 %). Counting 6-rings needs cycle information that a 1-WL message
passing on one-hot labels captures only partially; a cell complex lifting sees every ring as a
2-cell of its size.

The files are the TU layout that ``datasets.tu`` reads (``train --dataset NAME
--data-dir DIR``): ``NAME_A.txt``, ``NAME_graph_indicator.txt``, ``NAME_graph_labels.txt``,
``NAME_node_labels.txt``.

Usage::

    python benchmarks/ring_tu.py --out DIR [--name RINGS6] [--graphs 600] [--seed 0]
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

from topomodelx_attention.files import write_text

__all__ = ["TASKS", "odd_ring_label", "ring_graph", "ring_label", "write_ring_tu"]


def ring_graph(rng: np.random.Generator, n_target: int = 30) -> tuple[list[tuple[int, int]], np.ndarray, list[int]]:
    """One ring graph: ``(edges, node_labels, ring_sizes)``; the edges undirected, 0-based.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random source.
    n_target : int, default=30
        Approximate number of vertices (pendant vertices fill up to it).

    Returns
    -------
    tuple
        ``edges`` (list of ``(u, v)``), ``labels`` of shape ``(n,)`` in ``0..2`` and the sizes
        of the rings.
    """
    n_rings = int(rng.integers(2, 6))
    sizes = [int(s) for s in rng.choice([4, 5, 6, 7, 8], size=n_rings, p=[0.15, 0.25, 0.3, 0.15, 0.15])]
    edges: list[tuple[int, int]] = []
    ring_vertices: list[int] = []
    n = 0
    previous: list[int] | None = None
    for size in sizes:
        ring = list(range(n, n + size))
        n += size
        edges += [(ring[i], ring[(i + 1) % size]) for i in range(size)]
        ring_vertices += ring
        if previous is not None:  # join to the previous ring by a path of 0-2 vertices
            path = list(range(n, n + int(rng.integers(0, 3))))
            n += len(path)
            chain = [int(rng.choice(previous)), *path, int(rng.choice(ring))]
            edges += list(itertools.pairwise(chain))
        previous = ring
    while n < n_target:  # pendant vertices on random vertices
        edges.append((int(rng.integers(0, n)), n))
        n += 1
    labels = rng.choice(3, size=n, p=[0.4, 0.3, 0.3])
    return edges, labels, sizes


def ring_label(labels: np.ndarray, sizes: list[int]) -> int:
    """Class ``2 * min(#6-rings, 2) + [label 2 more frequent than label 1 on ring vertices]``."""
    ring = labels[: sum(sizes)]
    return 2 * min(sum(1 for s in sizes if s == 6), 2) + int((ring == 2).sum() > (ring == 1).sum())


def odd_ring_label(labels: np.ndarray, sizes: list[int]) -> int:
    """Class ``min(#odd rings, 3)`` (rings of 5 or 7 vertices): a cycle-parity task, labels unused."""
    del labels
    return min(sum(1 for s in sizes if s % 2), 3)


#: Graph-label rules by task name: the class of a graph from its node labels and ring sizes.
TASKS = {"six_rings": (ring_label, 6), "odd_rings": (odd_ring_label, 4)}


def write_ring_tu(
    out: str | Path, name: str = "RINGS6", graphs: int = 600, seed: int = 0, noise: float = 0.1,
    task: str = "six_rings",
) -> Path:
    """Write the data set's TU files into ``out/name/raw`` and return that folder.

    Parameters
    ----------
    out : path-like
        The ``--data-dir`` folder.
    name : str, default="RINGS6"
        Data set name (file prefix).
    graphs : int, default=600
        Number of graphs.
    seed : int, default=0
        Seed.
    noise : float, default=0.1
        Fraction of graph labels redrawn uniformly.
    task : {"six_rings", "odd_rings"}, default="six_rings"
        The label rule (:data:`TASKS`): 6-ring count and label majority (6 classes), or the
        number of odd rings clipped to 3 (4 classes).

    Returns
    -------
    pathlib.Path
        The folder of the files.
    """
    label_of, classes = TASKS[task]
    rng = np.random.default_rng(int(seed))
    raw = Path(out) / name / "raw"
    a_lines, indicator, graph_labels, node_labels = [], [], [], []
    offset = 0
    for g in range(int(graphs)):
        edges, labels, sizes = ring_graph(rng, int(rng.integers(25, 36)))
        y = label_of(labels, sizes)
        if rng.random() < noise:
            y = int(rng.integers(0, classes))
        for u, v in edges:
            a_lines += [f"{u + offset + 1}, {v + offset + 1}", f"{v + offset + 1}, {u + offset + 1}"]
        indicator += [str(g + 1)] * len(labels)
        node_labels += [str(int(c)) for c in labels]
        graph_labels.append(str(y))
        offset += len(labels)
    for part, lines in (
        ("A", a_lines), ("graph_indicator", indicator), ("graph_labels", graph_labels), ("node_labels", node_labels)
    ):
        write_text(raw / f"{name}_{part}.txt", "\n".join(lines) + "\n", root=out)
    return raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", default="RINGS6")
    parser.add_argument("--graphs", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise", type=float, default=0.1)
    args = parser.parse_args()
    raw = write_ring_tu(args.out, args.name, args.graphs, args.seed, args.noise)
    counts = np.bincount([int(x) for x in (raw / f"{args.name}_graph_labels.txt").read_text().split()], minlength=6)
    print(f"wrote {raw} (class counts {counts.tolist()})")


if __name__ == "__main__":
    main()
