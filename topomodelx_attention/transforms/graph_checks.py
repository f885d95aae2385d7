"""Validation and canonicalisation of PyG graphs before they are lifted to complexes."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from topomodelx_attention.data import check_features

__all__ = ["UndirectedGraph", "graph_num_nodes", "undirected_graph"]


@dataclass
class UndirectedGraph:
    """A simple undirected graph in the package's canonical edge order.

    Attributes
    ----------
    num_nodes : int
        Number of vertices ``n``.
    edges : numpy.ndarray, shape = (n_edges, 2)
        One row ``(u, v)`` per undirected edge with ``u < v``, sorted lexicographically
        (TopoNetX's order); each edge is oriented ``u → v``.
    edge_attr : torch.Tensor or None, shape = (n_edges, d)
        Edge features in that order (from ``data.edge_attr``), or ``None``.
    x : torch.Tensor or None, shape = (n, d)
        Vertex features (from ``data.x``), or ``None``.
    edge_index : torch.Tensor, shape = (2, n_directed)
        The validated input ``edge_index`` (self-loops removed when ``self_loops="drop"``).
    """

    num_nodes: int
    edges: np.ndarray
    edge_attr: Tensor | None
    x: Tensor | None
    edge_index: Tensor


def graph_num_nodes(data: Data) -> int:
    """Return the number of vertices of a PyG graph from ``x`` and ``num_nodes`` (which must agree).

    Parameters
    ----------
    data : torch_geometric.data.Data
        Graph with ``x`` (rows = vertices) and/or a stored ``num_nodes``.

    Returns
    -------
    int
        The number of vertices.

    Raises
    ------
    ValueError
        When ``x`` and ``num_nodes`` disagree, or when the graph has neither (PyG would guess
        the count from ``edge_index`` and miss isolated vertices).
    """
    x = data.x if "x" in data else None
    if x is not None:
        if not isinstance(x, Tensor) or x.dim() == 0:
            raise TypeError(f"x must be a 1-D or 2-D torch.Tensor (one row per vertex), got {type(x)!r}")
        num_nodes = int(x.size(0))
        if "num_nodes" in data and int(data.num_nodes) != num_nodes:
            raise ValueError(f"num_nodes={data.num_nodes} but x has {num_nodes} rows")
        return num_nodes
    if "num_nodes" in data:
        return int(data.num_nodes)
    raise ValueError("the graph has neither x nor num_nodes: cannot tell how many vertices")


def undirected_graph(data: Data, self_loops: str = "raise") -> UndirectedGraph:
    """Validate a PyG graph and collapse ``edge_index`` to one edge per vertex pair.

    Both directions of an undirected edge (the PyG convention) become one edge; a single
    direction is accepted too. Rules, each raising an error that names the problem:

    * ``edge_index`` must be an integer tensor of shape ``(2, E)`` with entries in
      ``[0, num_nodes)``;
    * ``x`` (if any) needs ``num_nodes`` rows of finite values; ``edge_attr`` (if any) ``E`` rows;
    * a self-loop raises (``self_loops="raise"``, default) or is dropped with a warning
      (``self_loops="drop"``);
    * a repeated directed edge (multi-edge) raises;
    * the two directions of an edge must carry the same ``edge_attr``.

    Parameters
    ----------
    data : torch_geometric.data.Data
        Graph with ``edge_index`` and optionally ``x``, ``edge_attr``, ``num_nodes``.
    self_loops : {"raise", "drop"}, default="raise"
        What to do with self-loops (a cell complex has none).

    Returns
    -------
    UndirectedGraph
        The canonical graph.
    """
    if self_loops not in ("raise", "drop"):
        raise ValueError(f"self_loops must be 'raise' or 'drop', got {self_loops!r}")
    if not isinstance(data, Data):
        raise TypeError(f"expected a torch_geometric.data.Data graph, got {type(data)!r}")
    edge_index = data.edge_index if "edge_index" in data else None
    if edge_index is None:
        edge_index = torch.zeros((2, 0), dtype=torch.long)
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"edge_index must be a torch.Tensor, got {type(edge_index)!r}")
    if edge_index.is_floating_point() or edge_index.dtype == torch.bool or edge_index.is_complex():
        raise TypeError(f"edge_index must hold integers, got dtype {edge_index.dtype}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    edge_index = edge_index.long().cpu()

    num_nodes = graph_num_nodes(data)
    x = data.x if "x" in data else None
    if x is not None:
        x = check_features(x, num_nodes, "x")

    if edge_index.numel():
        low, high = int(edge_index.min()), int(edge_index.max())
        if low < 0 or high >= num_nodes:
            bad = low if low < 0 else high
            raise ValueError(
                f"edge_index refers to vertex {bad}, but the graph has {num_nodes} vertices "
                f"(valid ids 0..{num_nodes - 1})"
            )

    edge_attr = data.edge_attr if "edge_attr" in data else None
    if edge_attr is not None:
        edge_attr = check_features(edge_attr, edge_index.size(1), "edge_attr")

    loops = edge_index[0] == edge_index[1]
    if bool(loops.any()):
        where = int(edge_index[0, loops][0])
        if self_loops == "raise":
            raise ValueError(
                f"the graph has {int(loops.sum())} self-loop(s) (e.g. at vertex {where}); a cell "
                "complex has none: remove them or pass self_loops='drop'"
            )
        warnings.warn(f"dropping {int(loops.sum())} self-loop(s)", UserWarning, stacklevel=2)
        edge_index = edge_index[:, ~loops]
        edge_attr = edge_attr[~loops] if edge_attr is not None else None

    src, dst = edge_index.numpy()
    directed = src * num_nodes + dst
    if np.unique(directed).size != directed.size:
        raise ValueError("edge_index contains a repeated (multi-)edge; remove duplicates first")
    low, high = np.minimum(src, dst), np.maximum(src, dst)
    keys = low * num_nodes + high
    unique_keys, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    edges = np.stack([unique_keys // max(num_nodes, 1), unique_keys % max(num_nodes, 1)], axis=1)
    if edge_attr is not None:
        canonical = edge_attr[torch.from_numpy(first)]
        mismatch = canonical[torch.from_numpy(inverse)] != edge_attr
        if bool(mismatch.any()):
            row = int(mismatch.any(dim=-1).nonzero()[0])
            raise ValueError(
                f"edge ({int(src[row])}, {int(dst[row])}) carries different edge_attr in its two "
                "directions; an undirected edge has one feature vector"
            )
        edge_attr = canonical
    return UndirectedGraph(num_nodes, edges.astype(np.int64), edge_attr, x, edge_index)
