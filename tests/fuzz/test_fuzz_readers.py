"""Fuzz: the TU text reader (``load_tu_graphs``, and the harness's ``load_graphs``) on random
small TU data sets written with or without a final newline, with LF or CRLF line ends, blank
trailing lines, trailing blanks and varied separators, some of them damaged.

A well-formed data set must give exactly the graphs its generator meant (TUDataset's
conventions, rebuilt here from the generator's own values, not by parsing the text); a
damaged one (a blank line in the middle, a bad token, an id beyond 64 bits or out of range,
a non-finite float, a ragged row, an edge across graphs, an empty ``_A.txt``, a short label
file) must be refused with one ``ValueError`` line that names the file and, where there is
one, the line.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from tests.fuzz.cases import ACCEPT, REJECT, run_cases
from topomodelx_attention.datasets import load_graphs
from topomodelx_attention.datasets.tu import load_tu_graphs

NAME = "FUZZ"

DAMAGES = (
    "blank_middle", "bad_token", "float_token", "overflow", "out_of_range", "non_finite",
    "ragged", "empty_edges", "across_graphs", "short_labels",
)


def random_spec(rng: np.random.Generator) -> dict:
    """Values of a random TU data set: graphs, edges (self-loops and repeats included), files."""
    sizes = [int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 5)))]
    indicator = [g + 1 for g, n in enumerate(sizes) for _ in range(n)]
    start = np.concatenate([[0], np.cumsum(sizes)])
    edges = []
    for g, n in enumerate(sizes):
        for _ in range(int(rng.integers(0 if g else 1, 2 * n + 1))):  # graph 1 has an edge
            u, v = (int(start[g] + rng.integers(n)) + 1 for _ in range(2))
            edges.append((u, v))
            if rng.random() < 0.7:
                edges.append((v, u))
    order = rng.permutation(len(edges))  # TU files need not be sorted
    edges = [edges[i] for i in order]
    n_nodes, n_edges, n_graphs = len(indicator), len(edges), len(sizes)

    def labels(rows: int) -> np.ndarray:
        return rng.integers(-2, 4, (rows, int(rng.integers(1, 3))))

    def floats(rows: int) -> np.ndarray:  # exact in float32
        return rng.integers(-800, 800, (rows, int(rng.integers(1, 3)))) / 8.0

    spec = {"A": np.array(edges, dtype=np.int64).reshape(-1, 2), "graph_indicator": np.array(indicator)[:, None]}
    if rng.random() < 0.6:
        spec["node_labels"] = labels(n_nodes)
    if rng.random() < 0.4:
        spec["node_attributes"] = floats(n_nodes)
    if rng.random() < 0.4:
        spec["edge_labels"] = labels(n_edges)
    if rng.random() < 0.4:
        spec["edge_attributes"] = floats(n_edges)
    if rng.random() < 0.3:
        spec["graph_attributes"] = floats(n_graphs)
    else:
        spec["graph_labels"] = rng.choice([-1, 1, 2, 7], (n_graphs, 1))
    return spec


def one_hot(labels: np.ndarray) -> torch.Tensor:
    parts = [F.one_hot(torch.from_numpy(c - c.min()), int(c.max() - c.min()) + 1).float() for c in labels.T]
    return torch.cat(parts, dim=1)


def expected_graphs(spec: dict) -> list[dict]:
    """TUDataset's graphs of ``spec``, from the values (not the text)."""
    indicator = spec["graph_indicator"][:, 0]
    edges = spec["A"]
    x = one_hot(spec["node_labels"]) if "node_labels" in spec else (
        torch.from_numpy(spec["node_attributes"]).float() if "node_attributes" in spec else None
    )
    parts = []
    if "edge_attributes" in spec:
        parts.append(torch.from_numpy(spec["edge_attributes"]).float())
    if "edge_labels" in spec:
        parts.append(one_hot(spec["edge_labels"]))
    edge_attr = torch.cat(parts, dim=1) if parts else None
    if "graph_attributes" in spec:
        y = torch.from_numpy(spec["graph_attributes"]).float()
        y = y[:, 0] if y.size(1) == 1 else y
    else:
        classes = sorted(set(spec["graph_labels"][:, 0].tolist()))
        y = torch.tensor([classes.index(c) for c in spec["graph_labels"][:, 0].tolist()])
    out = []
    for g in range(1, int(indicator.max()) + 1):
        nodes = np.nonzero(indicator == g)[0]
        lo = int(nodes[0])
        merged: dict[tuple[int, int], torch.Tensor | None] = {}
        for i, (u, v) in enumerate(edges.tolist()):
            if indicator[u - 1] != g or u == v:
                continue  # another graph's edge, or a self-loop (TUDataset drops them)
            key = (u - 1 - lo, v - 1 - lo)
            row = edge_attr[i] if edge_attr is not None else None
            merged[key] = row if key not in merged or row is None else merged[key] + row  # repeats: summed
        pairs = sorted(merged)
        graph = {
            "x": x[lo : lo + len(nodes)] if x is not None else torch.ones(len(nodes), 1),
            "edge_index": torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1),
            "y": y[g - 1 : g],
            "num_nodes": len(nodes),
        }
        if edge_attr is not None:
            graph["edge_attr"] = torch.stack([merged[p] for p in pairs]) if pairs else edge_attr[:0]
        out.append(graph)
    return out


def format_value(value: float | int, integer: bool) -> str:
    return str(int(value)) if integer else repr(float(value))


def write_files(folder, spec: dict, rng: np.random.Generator, damage: str | None) -> tuple[str, int | None]:
    """Write every file with a random layout; apply ``damage``; return (damaged file, its line)."""
    raw = folder / NAME / "raw"
    raw.mkdir(parents=True)
    lines = {
        part: [
            rng.choice([", ", ",", " , ", ",  "]).join(format_value(v, part.endswith(("labels", "A", "indicator"))) for v in row)
            for row in table.tolist()
        ]
        for part, table in spec.items()
    }
    target, line = None, None
    if damage is not None:
        target, line = damage_lines(spec, lines, rng, damage)
    for part, rows in lines.items():
        ending = "\r\n" if rng.random() < 0.3 else "\n"
        text = ending.join(rows)
        if rows and rng.random() < 0.7:
            text += ending  # a final newline, or not
        if rows and rng.random() < 0.3:
            text += "".join(rng.choice(["", " ", "\t"]) + ending for _ in range(int(rng.integers(1, 3))))
        if rng.random() < 0.2:
            text = text.replace(ending, " " + ending)  # trailing blanks
        (raw / f"{NAME}_{part}.txt").write_bytes(text.encode("utf-8"))
    return target, line


def damage_lines(spec: dict, lines: dict, rng: np.random.Generator, damage: str) -> tuple[str, int | None]:
    """Damage one file's lines in place; return the file and the line (1-based) named."""
    n_nodes = len(spec["graph_indicator"])
    integer_parts = [p for p in lines if p.endswith(("labels", "A", "indicator")) and len(lines[p])]
    float_parts = [p for p in lines if p.endswith("attributes")]
    if damage == "blank_middle":
        part = str(rng.choice([p for p in lines if len(lines[p])]))
        at = int(rng.integers(len(lines[part])))  # before row ``at`` (the first row included)
        lines[part].insert(at, str(rng.choice(["", " ", "\t "])))
        return part, at + 1
    if damage in ("bad_token", "float_token"):
        part = str(rng.choice(integer_parts))
        row = int(rng.integers(len(lines[part])))
        token = str(rng.choice(["x", "1_0", "0x1", "--1"])) if damage == "bad_token" else str(rng.choice(["1.0", "1e2", "nan"]))
        lines[part][row] = ", ".join([token, *lines[part][row].split(",")[1:]]) if "," in lines[part][row] else token
        return part, row + 1
    if damage == "overflow":
        row = int(rng.integers(len(lines["A"])))
        big = int(rng.choice([2**63, 2**64 + 3, 10**25]))
        lines["A"][row] = f"{big}, 1"
        return "A", row + 1
    if damage == "out_of_range":
        row = int(rng.integers(len(lines["A"])))
        lines["A"][row] = f"1, {int(rng.choice([0, -1, n_nodes + 1]))}"
        return "A", row + 1
    if damage == "non_finite" and float_parts:
        part = str(rng.choice(float_parts))
        row = int(rng.integers(len(lines[part])))
        lines[part][row] = ", ".join([str(rng.choice(["nan", "inf", "-Infinity", "1e39"])), *lines[part][row].split(",")[1:]])
        return part, row + 1
    if damage == "ragged" and len(lines["A"]) > 1:
        row = int(rng.integers(1, len(lines["A"])))
        lines["A"][row] = lines["A"][row].split(",")[0]
        return "A", row + 1
    if damage == "across_graphs" and int(spec["graph_indicator"].max()) > 1:
        row = int(rng.integers(len(lines["A"])))
        lines["A"][row] = f"1, {n_nodes}"  # graph 1 to the last graph
        return "A", row + 1
    if damage == "short_labels" and "node_labels" in lines:
        lines["node_labels"] = lines["node_labels"][:-1]  # one row short
        return "node_labels", None
    if damage == "short_labels":
        graphs = "graph_attributes" if "graph_attributes" in lines else "graph_labels"
        lines[graphs].append(lines[graphs][-1])  # a graph without vertices at the end
        return "graph_indicator", n_nodes
    lines["A"] = []  # empty_edges, and the fallback of damages that do not apply
    return "A", None


def as_dicts(graphs) -> list[dict]:
    return [dict(graph.items()) for graph in graphs]


def assert_equal_graphs(got: list[dict], want: list[dict], route: str) -> None:
    assert len(got) == len(want), f"{route}: {len(got)} graphs, expected {len(want)}"
    for i, (graph, expected) in enumerate(zip(got, want)):
        assert graph.keys() == expected.keys(), f"{route}: graph {i} keys {sorted(graph)} != {sorted(expected)}"
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                ok = graph[key].dtype == value.dtype and graph[key].shape == value.shape and torch.equal(graph[key], value)
                assert ok, f"{route}: graph {i} {key} = {graph[key].tolist()}, expected {value.tolist()}"
            else:
                assert graph[key] == value, f"{route}: graph {i} {key} = {graph[key]}, expected {value}"


def test_fuzz_tu_reader_layouts_and_damages(fuzz_seeds, tmp_path):
    def make(seed, rng):
        spec = random_spec(rng)
        damage = str(rng.choice(DAMAGES)) if rng.random() < 0.5 else None
        folder = tmp_path / f"case{seed}"
        target, line = write_files(folder, spec, rng, damage)
        description = f"{damage or 'well-formed'} in {target}" if damage else "well-formed"

        def run():
            if damage is None:
                want = expected_graphs(spec)
                assert_equal_graphs(as_dicts(load_tu_graphs(NAME, data_dir=folder)), want, "load_tu_graphs")
                harness = load_graphs({"name": NAME, "loader": "tu", "data_dir": str(folder)}, tmp_path / "cache")
                assert_equal_graphs(as_dicts(harness), want, "harness load_graphs")
                return want
            messages = []
            for route in (
                lambda: load_tu_graphs(NAME, data_dir=folder),
                lambda: load_graphs({"name": NAME, "loader": "tu", "data_dir": str(folder)}, tmp_path / "cache"),
            ):
                try:
                    route()
                except ValueError as error:
                    messages.append(str(error))
                else:
                    messages.append(None)
            assert messages[0] == messages[1], f"the two routes differ: {messages}"
            message = messages[0]
            if message is None:
                return None  # accepted: the Fuzzer reports a REJECT case accepted silently
            assert "\n" not in message, f"more than one line: {message!r}"
            assert f"{NAME}_{target}.txt" in message, f"the message does not name {NAME}_{target}.txt: {message}"
            if line is not None:
                assert f"line {line}" in message, f"the message does not name line {line}: {message}"
            raise ValueError(message)

        return description, (REJECT if damage else ACCEPT), run

    run_cases(fuzz_seeds, "TU reader", make, offset=91_000)
