"""Convert graph-classification sets stored in the DGCNN text format into TU raw files.

The DGCNN text format (one file ``<NAME>.txt``): the first line is the number of graphs; each
graph starts with a line ``n label`` followed by ``n`` node lines ``tag m nbr_1 ... nbr_m
[attributes]`` (neighbours 0-based). The TU raw format (``<NAME>_A.txt``,
``_graph_indicator.txt``, ``_graph_labels.txt``, ``_node_labels.txt``) is what
``train --dataset NAME --data-dir DIR`` reads. Node tags become node labels; attributes are
dropped; every undirected edge is written in both directions, as TU files do.

Usage::

    python benchmarks/dgcnn_tu.py SOURCE.txt OUT_DIR NAME [--max-graphs K --seed S]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from topomodelx_attention.files import write_text


def read_dgcnn(text: str) -> list[tuple[int, list[int], list[tuple[int, int]]]]:
    """``(label, node tags, directed edges)`` of every graph of a DGCNN-format text."""
    lines = text.split("\n")
    n_graphs = int(lines[0].strip())
    position = 1

    def line(graph: int) -> str:
        nonlocal position
        if position >= len(lines) or not lines[position].strip():
            raise ValueError(f"the file ends inside graph {graph + 1} of {n_graphs}: it is truncated")
        position += 1
        return lines[position - 1]

    graphs = []
    for g in range(n_graphs):
        n, label = (int(t) for t in line(g).split()[:2])
        tags, edges = [], []
        for i in range(n):
            row = [int(float(t)) for t in line(g).split()]
            tag, m = row[0], row[1]
            tags.append(tag)
            edges += [(i, j) for j in row[2:2 + m]]
        graphs.append((label, tags, edges))
    return graphs


def write_tu(graphs: list, out: Path, name: str) -> None:
    """Write ``graphs`` as the TU raw files of data set ``name`` under ``out/name/raw``."""
    a, indicator, labels, node_labels = [], [], [], []
    offset = 0
    for g, (label, tags, edges) in enumerate(graphs, start=1):
        pairs = {(u, v) for u, v in edges if u != v} | {(v, u) for u, v in edges if u != v}
        a += [f"{u + offset + 1}, {v + offset + 1}" for u, v in sorted(pairs)]
        indicator += [str(g)] * len(tags)
        labels.append(str(label))
        node_labels += [str(t) for t in tags]
        offset += len(tags)
    folder = out / name / "raw"
    parts = {"A": a, "graph_indicator": indicator, "graph_labels": labels, "node_labels": node_labels}
    for part, rows in parts.items():
        write_text(folder / f"{name}_{part}.txt", "\n".join(rows) + "\n", root=out)


def convert(source: Path, out: Path, name: str, max_graphs: int | None = None, seed: int = 0) -> int:
    """Convert ``source`` (optionally a random ``max_graphs`` subset); return the graph count."""
    graphs = read_dgcnn(source.read_text())
    if max_graphs is not None and max_graphs < len(graphs):
        keep = np.sort(np.random.default_rng(seed).choice(len(graphs), size=max_graphs, replace=False))
        graphs = [graphs[i] for i in keep]
    write_tu(graphs, out, name)
    return len(graphs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("name")
    parser.add_argument("--max-graphs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(convert(args.source, args.out, args.name, args.max_graphs, args.seed), "graphs")


if __name__ == "__main__":
    main()
