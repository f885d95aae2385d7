"""TU data sets: ``load_tu_dataset`` reads the raw text files, never a pickled processed file."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from topomodelx_attention.data.datasets import embedded_raw_dir, load_tu_dataset


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
