"""TU data sets: ``load_tu_dataset`` reads the raw text files, never a pickled processed file."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from topomodelx_attention.datasets.tu import embedded_raw_dir, load_tu_dataset, load_tu_graphs


def _read_ints(path) -> list[list[int]]:
    return [[int(v) for v in line.split(",")] for line in path.read_text().splitlines() if line.strip()]


def mutag_by_hand():
    """MUTAG parsed line by line, with TUDataset's conventions (one-hot labels, sorted edges)."""
    raw = embedded_raw_dir("MUTAG")
    indicator = [row[0] - 1 for row in _read_ints(raw / "MUTAG_graph_indicator.txt")]
    node_labels = [row[0] for row in _read_ints(raw / "MUTAG_node_labels.txt")]
    edge_labels = [row[0] for row in _read_ints(raw / "MUTAG_edge_labels.txt")]
    graph_labels = [row[0] for row in _read_ints(raw / "MUTAG_graph_labels.txt")]
    classes = sorted(set(graph_labels))
    first = {}
    for node, graph in enumerate(indicator):
        first.setdefault(graph, node)
    edges = {g: [] for g in range(len(graph_labels))}
    for (u, v), label in zip(_read_ints(raw / "MUTAG_A.txt"), edge_labels):
        g = indicator[u - 1]
        edges[g].append((u - 1 - first[g], v - 1 - first[g], label))
    graphs = []
    for g in range(len(graph_labels)):
        nodes = [node_labels[i] for i, owner in enumerate(indicator) if owner == g]
        pairs = sorted(edges[g])
        graphs.append({
            "x": F.one_hot(torch.tensor(nodes) - min(node_labels), max(node_labels) - min(node_labels) + 1).float(),
            "edge_index": torch.tensor([[u for u, _, _ in pairs], [v for _, v, _ in pairs]]),
            "edge_attr": F.one_hot(torch.tensor([lab for _, _, lab in pairs]) - min(edge_labels),
                                   max(edge_labels) - min(edge_labels) + 1).float(),
            "y": torch.tensor([classes.index(graph_labels[g])]),
        })
    return graphs


def test_load_tu_dataset_gives_tudataset_graphs_from_the_raw_files(tmp_path):
    dataset = load_tu_dataset("MUTAG", root=tmp_path)
    expected = mutag_by_hand()
    assert len(dataset) == len(expected) == 188
    assert dataset.num_classes == 2 and dataset.num_node_features == 7
    for i, want in enumerate(expected):
        graph = dataset[i]
        for key, value in want.items():
            assert torch.equal(graph[key], value), (i, key)
    assert not any(p.suffix == ".pt" for p in tmp_path.rglob("*"))  # nothing processed or cached


def test_load_tu_dataset_never_unpickles(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("load_tu_dataset must not call torch.load")

    monkeypatch.setattr(torch, "load", refuse)
    import torch_geometric.io.fs as pyg_fs

    monkeypatch.setattr(pyg_fs, "torch_load", refuse)
    processed = tmp_path / "MUTAG" / "processed"
    processed.mkdir(parents=True)
    (processed / "data.pt").write_bytes(b"not a pickle: must never be read")
    dataset = load_tu_dataset("MUTAG", root=tmp_path)
    assert len(dataset) == 188


def test_load_tu_dataset_transform_pre_transform_and_pre_filter(tmp_path):
    def tag(graph):
        graph.tag = torch.tensor([graph.num_nodes])
        return graph

    dataset = load_tu_dataset(
        "MUTAG", root=tmp_path, transform=lambda g: g.update({"seen": torch.ones(1)}),
        pre_transform=tag, pre_filter=lambda g: g.num_nodes > 20,
    )
    assert 0 < len(dataset) < 188
    assert all(int(dataset[i].tag) > 20 and "seen" in dataset[i] for i in range(len(dataset)))


# ---------------------------------------------------------------------------------- raw TU files
# TINY (tests.test_cli_faults.write_tiny_tu): 4 graphs, 14 vertices, 26 directed edge lines
TINY_FILES = ("A", "graph_indicator", "node_labels", "graph_labels")


def _tiny(tmp_path, name="TINY"):
    from tests.test_cli_faults import write_tiny_tu

    return write_tiny_tu(tmp_path, name=name)


def _as_dicts(graphs):
    return [{key: value for key, value in graph.items()} for graph in graphs]


def _assert_same_graphs(graphs, expected):
    assert len(graphs) == len(expected)
    for i, (graph, want) in enumerate(zip(_as_dicts(graphs), _as_dicts(expected))):
        assert graph.keys() == want.keys(), i
        for key, value in want.items():
            if isinstance(value, torch.Tensor):
                assert graph[key].dtype == value.dtype and torch.equal(graph[key], value), (i, key)
            else:
                assert graph[key] == value, (i, key)


def _tiny_by_hand(raw, name="TINY"):
    """TINY parsed independently (Python's ``splitlines`` and ``int``), TUDataset's conventions."""
    def ints(part):
        text = (raw / f"{name}_{part}.txt").read_text()
        return [[int(v) for v in line.split(",")] for line in text.splitlines() if line.strip()]

    indicator = [row[0] for row in ints("graph_indicator")]
    labels = [row[0] for row in ints("node_labels")]
    classes = sorted({row[0] for row in ints("graph_labels")})
    graph_of = [classes.index(row[0]) for row in ints("graph_labels")]
    out = []
    for g in range(1, len(graph_of) + 1):
        nodes = [i for i, owner in enumerate(indicator) if owner == g]
        pairs = sorted({(u - 1 - nodes[0], v - 1 - nodes[0]) for u, v in ints("A") if indicator[u - 1] == g and u != v})
        out.append({
            "x": F.one_hot(torch.tensor([labels[i] for i in nodes]) - min(labels), max(labels) - min(labels) + 1).float(),
            "edge_index": torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1),
            "y": torch.tensor([graph_of[g - 1]]),
            "num_nodes": len(nodes),
        })
    return out


VARIANTS = {
    "no final newline": lambda text: text.rstrip("\n"),
    "CRLF": lambda text: text.replace("\n", "\r\n"),
    "CRLF, no final newline": lambda text: text.rstrip("\n").replace("\n", "\r\n"),
    "trailing blank lines": lambda text: text + "\n  \n\n",
    "trailing blanks on every line": lambda text: text.replace("\n", " \t\n"),
    "no blanks after the commas": lambda text: text.replace(", ", ","),
    "byte order mark": lambda text: "\ufeff" + text,
}


def test_pyg_read_tu_data_drops_the_last_line_of_a_file_without_final_newline(tmp_path):
    """Why this package parses TU files itself: PyG's reader loses (or dies on) the last line."""
    from torch_geometric.io import read_tu_data

    raw = _tiny(tmp_path / "edges")
    assert read_tu_data(str(raw), "TINY")[0].edge_index.size(1) == 26
    (raw / "TINY_A.txt").write_text((raw / "TINY_A.txt").read_text().rstrip("\n"))
    assert read_tu_data(str(raw), "TINY")[0].edge_index.size(1) == 25  # the last edge is lost
    assert sum(g.edge_index.size(1) for g in load_tu_graphs("TINY", data_dir=tmp_path / "edges")) == 26
    raw = _tiny(tmp_path / "vertices")
    (raw / "TINY_graph_indicator.txt").write_text((raw / "TINY_graph_indicator.txt").read_text().rstrip("\n"))
    with pytest.raises(IndexError):  # the last vertex is lost, an edge points past the others
        read_tu_data(str(raw), "TINY")
    assert sum(g.num_nodes for g in load_tu_graphs("TINY", data_dir=tmp_path / "vertices")) == 14


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_tu_files_give_the_same_graphs_whatever_the_line_ends(tmp_path, variant):
    from topomodelx_attention.datasets import load_graphs

    reference_raw = _tiny(tmp_path / "reference")
    reference = load_tu_graphs("TINY", data_dir=tmp_path / "reference")
    for graph, want in zip(reference, _tiny_by_hand(reference_raw)):
        for key, value in want.items():
            assert torch.equal(graph[key], value) if isinstance(value, torch.Tensor) else graph[key] == value
    assert sum(g.edge_index.size(1) for g in reference) == 26
    raw = _tiny(tmp_path / "variant")
    for part in TINY_FILES:
        path = raw / f"TINY_{part}.txt"
        path.write_bytes(VARIANTS[variant](path.read_text()).encode("utf-8"))
    # the package's route and the harness's route (dataset config, loader: tu)
    _assert_same_graphs(load_tu_graphs("TINY", data_dir=tmp_path / "variant"), reference)
    harness = load_graphs({"name": "TINY", "loader": "tu", "data_dir": str(tmp_path / "variant")}, tmp_path / "cache")
    _assert_same_graphs(harness, reference)


def _one_line_error(excinfo, *needles):
    message = str(excinfo.value)
    assert "\n" not in message.strip(), message
    for needle in needles:
        assert needle in message, (needle, message)


def _same_error(part, needles, *contents):
    """Rows of :data:`BAD_FILES`: every ``content`` of ``part`` raises naming ``needles``."""
    return [(part, content, needles) for content in contents]


BAD_FILES = [
    # (file, content, needles)
    *_same_error("A", ["TINY_A.txt is empty"], "", "   \n\n"),
    *_same_error("A", ["TINY_A.txt, line 2", "blank line"], "1, 2\n\n2, 1\n", "1, 2\n \t \n2, 1\n"),
    ("A", "\n1, 2\n2, 1\n", ["TINY_A.txt, line 1", "blank line"]),
    *_same_error(
        "A",
        ["TINY_A.txt, line 2", "integers"],
        *("1, 2\n2; 1\n", "1, 2\n2, 1.0\n", "1, 2\n2, 1e0\n", "1, 2\n2, 1_0\n", "1, 2\n2, \n"),
    ),
    *_same_error(
        "A",
        ["TINY_A.txt, line 1", "64-bit"],
        *("1, 99999999999999999999\n", "1, 9223372036854775808\n", "1, -9223372036854775809\n"),
    ),
    ("A", "2, 1\n1, 99999999999999999999999\n", ["TINY_A.txt, line 2", "64-bit"]),
    ("A", "1, 2\n1, -9223372036854775808\n", ["TINY_A.txt", "vertex ids", "line 2 holds 1, -9223372036854775808"]),
    ("A", "1, 2, 3\n", ["TINY_A.txt, line 1", "3 columns", "expected 2"]),
    ("A", "1, 2\n3\n", ["TINY_A.txt, line 2", "1 column,"]),
    ("A", "1, 2\n0, 1\n", ["TINY_A.txt", "vertex ids", "line 2"]),
    ("A", "1, 2\n2, 15\n", ["TINY_A.txt", "vertex ids must be in 1..14", "line 2"]),
    ("A", "1, 2\n-1, 2\n", ["TINY_A.txt", "vertex ids", "line 2"]),
    ("A", "1, 2\n3, 4\n", ["TINY_A.txt, line 2", "graphs 1 and 2"]),
    ("graph_indicator", "0\n" + "1\n" * 2 + "2\n" * 4 + "3\n" * 4 + "4\n" * 3, ["TINY_graph_indicator.txt, line 1"]),
    ("graph_indicator", "1\n" * 3 + "3\n" + "2\n" * 3 + "3\n" * 4 + "4\n" * 3, ["TINY_graph_indicator.txt, line 5", "sorted"]),
    ("graph_indicator", "1\n" * 3 + "2\n" * 4 + "3\n" * 7, ["TINY_graph_indicator.txt, line 14", "4 lines", "graph 4 would have no vertex"]),
    ("graph_indicator", "1\n" * 3 + "2\n" * 4 + "3\n" * 4 + "5\n" * 3, ["TINY_graph_indicator.txt, line 12", "at most 4"]),
    ("graph_indicator", "1\n" * 3 + "2\n" * 4 + "3\n" * 4 + "4\n" * 2 + "4, 1\n", ["TINY_graph_indicator.txt, line 14", "columns"]),
    ("node_labels", "0\n1\n", ["TINY_node_labels.txt has 2 rows", "expected 14"]),
    ("node_labels", "0\n" * 13 + "x\n", ["TINY_node_labels.txt, line 14"]),
    ("node_labels", "0\n" * 13 + "4000000000\n", ["TINY_node_labels.txt, line 14", "one-hot"]),
    ("graph_labels", "1\nnan\n1\n-1\n", ["TINY_graph_labels.txt, line 2", "integers"]),
    ("graph_labels", "1, 0\n-1, 0\n1, 0\n-1, 0\n", ["TINY_graph_labels.txt, line 1", "2 columns"]),
    ("graph_labels", "1\n-1\n1\n-1\n1\n", ["TINY_graph_indicator.txt, line 14", "5 lines"]),
]


@pytest.mark.parametrize(("part", "content", "needles"), BAD_FILES, ids=[f"{p}:{c[:24]!r}" for p, c, _ in BAD_FILES])
def test_a_damaged_tu_file_raises_one_line_naming_the_file_and_line(tmp_path, part, content, needles):
    raw = _tiny(tmp_path)
    (raw / f"TINY_{part}.txt").write_text(content)
    with pytest.raises(ValueError, match=r"TINY_\w+\.txt") as excinfo:
        load_tu_graphs("TINY", data_dir=tmp_path)
    _one_line_error(excinfo, *needles)


def test_an_id_beyond_64_bits_overflows_in_torch_without_naming_the_file(tmp_path):
    """What the package's own check replaces: torch's error on such an id names no file."""
    with pytest.raises((RuntimeError, ValueError), match="Overflow when unpacking long"):
        torch.as_tensor([99999999999999999999], dtype=torch.long)
    raw = _tiny(tmp_path)
    (raw / "TINY_A.txt").write_text("1, 2\n2, 99999999999999999999\n")
    with pytest.raises(ValueError, match=r"TINY_\w+\.txt") as excinfo:
        load_tu_graphs("TINY", data_dir=tmp_path)
    _one_line_error(excinfo, str(raw / "TINY_A.txt") + ", line 2", "99999999999999999999")


@pytest.mark.parametrize(
    ("part", "value", "needle"),
    [
        *(
            (part, value, "not a finite number")
            for part, value in [
                ("graph_attributes", "nan"),
                ("graph_attributes", "-inf"),
                ("node_attributes", "inf"),
                ("edge_attributes", "NaN"),
            ]
        ),
        ("graph_attributes", "1e39", "overflows float32"),
    ],
)
def test_non_finite_floats_in_tu_files_are_refused_with_file_and_line(tmp_path, part, value, needle):
    raw = _tiny(tmp_path)
    rows = {"graph_attributes": 4, "node_attributes": 14, "edge_attributes": 26}[part]
    lines = [f"{0.5 * i}, 1.0" for i in range(rows)]
    lines[2] = f"1.0, {value}"
    (raw / f"TINY_{part}.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"TINY_\w+\.txt") as excinfo:
        load_tu_graphs("TINY", data_dir=tmp_path)
    _one_line_error(excinfo, f"TINY_{part}.txt, line 3, column 2", needle)


def test_tu_regression_targets_attributes_and_edge_labels(tmp_path):
    raw = _tiny(tmp_path)
    (raw / "TINY_graph_labels.txt").unlink()
    (raw / "TINY_graph_attributes.txt").write_text("0.5\n-1.5\n2\n3e-1")  # no final newline
    (raw / "TINY_node_labels.txt").unlink()
    (raw / "TINY_node_attributes.txt").write_text("".join(f"{i}, {-i - 0.5}\n" for i in range(14)))
    (raw / "TINY_edge_labels.txt").write_text("".join(f"{i % 3 + 1}\n" for i in range(26)))
    graphs = load_tu_graphs("TINY", data_dir=tmp_path)
    assert [g.y.tolist() for g in graphs] == [[0.5], [-1.5], [2.0], [0.30000001192092896]]
    assert all(g.y.dtype == torch.float32 and g.y.shape == (1,) for g in graphs)
    x = torch.cat([g.x for g in graphs])
    assert x.shape == (14, 2) and torch.equal(x[:, 0], torch.arange(14.0)) and torch.equal(x[:, 1], -torch.arange(14.0) - 0.5)
    attr = torch.cat([g.edge_attr for g in graphs])
    assert attr.shape == (26, 3) and bool((attr.sum(1) == 1).all())  # one-hot of 3 edge labels
