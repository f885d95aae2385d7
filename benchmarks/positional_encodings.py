"""Benchmark of the positional encodings over the lifted ZINC-12k complexes.

Each encoding transform is applied to every complex (as a dataset ``pre_transform`` would be)
and timed end to end (seconds for all complexes, single-threaded BLAS: the per-complex
matrices are tiny and the machine is shared).

Two **baselines**, written here, both on the dense reference path of the CT paper's code:
Python loops over cells, dense matrices, the general eigensolver ``np.linalg.eig`` (sorted
with ``argpartition``, "the first eigenvector" dropped), random walks as dense matrix powers,
one eigenproblem per concentration set for the Slepians; outputs float32 tensors per rank,
as the paper's PE classes and our transforms return.

* **paper-style** (the headline ratio): the input is a TopoNetX ``CellComplex`` — what the
  paper's pipeline stores — walked with its accessors (``nodes``, ``edges``, ``cells``,
  ``cell.boundary``, ``hodge_laplacian_matrix``, ...) into a networkx barycentric graph
  (``nx.normalized_laplacian_matrix``), as the paper's code does;
* **lean**: the same dense-``eig`` + Python-loop algorithms on plain Python lists of faces
  and signs (no TopoNetX object overhead; dense matrices filled by loops over those lists).

The TopoNetX complexes and the Python lists are prepared outside the timed region. Baselines
run on a subset (``--baseline-limit``) and are extrapolated to all complexes.

Usage::

    python benchmarks/positional_encodings.py                 # all 12,000 complexes
    python benchmarks/positional_encodings.py --limit 500     # quick run
    python benchmarks/positional_encodings.py --zinc-dir /path/to/zinc12k
    python benchmarks/positional_encodings.py --large-complex     # only the dense random complex

``--large-complex``: a random graph ``gnm_random_graph(25, 110, seed=0)`` lifted with
``CellCycleLifting(cycles="chordless", max_cell_length=6)`` (25 vertices, 110 edges, 1,339
2-cells); every PE once, time and peak memory growth: the case the PEs' bounded solvers are
for (an unbounded ARPACK call on its Hodge Laplacian does not converge within minutes).
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads its BLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import networkx as nx
import numpy as np
import toponetx as tnx
import torch
from torch_geometric.data import Data

from topomodelx_attention import transforms as T
from topomodelx_attention.data import ComplexData, to_toponetx
from topomodelx_attention.datasets.zinc import ZINC_ATOM_TYPES, smiles_to_graph

DEFAULT_ZINC_DIR = Path("DATA/zinc12k")  # relative to the working directory; see --zinc-dir


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
def load_complexes(zinc_dir: Path, limit: int | None) -> tuple[list[ComplexData], float]:
    """SMILES → RDKit graph → CellCycleLifting; returns the complexes and the lifting time."""
    path = zinc_dir / "smiles_score.csv"
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    if limit is not None:
        rows = rows[:limit]
    lifting = T.CellCycleLifting(categorical_cardinalities=[len(ZINC_ATOM_TYPES)])
    graphs = [smiles_to_graph(row["SMILES"]) for row in rows]
    start = time.perf_counter()
    complexes = [lifting(graph) for graph in graphs]
    return complexes, time.perf_counter() - start


def to_tensors(encodings: list[np.ndarray] | np.ndarray) -> list[torch.Tensor]:
    """Float32 tensors, as the paper's PE classes (and our transforms) return."""
    if isinstance(encodings, np.ndarray):
        encodings = [encodings]
    return [torch.tensor(e, dtype=torch.float32) for e in encodings]


def time_transform(transform: Callable, complexes: list) -> float:
    """Seconds to apply ``transform`` to every complex once."""
    start = time.perf_counter()
    for data in complexes:
        transform(data)
    return time.perf_counter() - start


# ----------------------------------------------------------------------------------------------
# lean baseline: dense reference path on Python lists (Python loops, dense matrices, eig)
# ----------------------------------------------------------------------------------------------
class CellLists:
    """Python lists describing one complex, as the baseline loops over them (untimed)."""

    def __init__(self, data: ComplexData) -> None:
        self.counts = data.cell_counts()
        # faces[r][c] / signs[r][c]: the (r-1)-cells on the boundary of the c-th r-cell
        self.faces = [[[] for _ in range(self.counts[0])]]
        self.signs = [[[] for _ in range(self.counts[0])]]
        for b in data.boundary_matrices(signed=True):
            b = b.toarray()
            self.faces.append([np.nonzero(b[:, c])[0].tolist() for c in range(b.shape[1])])
            self.signs.append([b[np.nonzero(b[:, c])[0], c].tolist() for c in range(b.shape[1])])
        self.vertices = [[[v] for v in range(self.counts[0])]]
        for rank in range(1, len(self.counts)):
            self.vertices.append(
                [
                    sorted({v for f in self.faces[rank][c] for v in self.vertices[rank - 1][f]})
                    for c in range(self.counts[rank])
                ]
            )


def dense_smallest_eigenvectors(matrix: np.ndarray, k: int) -> np.ndarray:
    """The paper's helper: general ``eig``, ``argpartition``, drop the first, pad."""
    n = matrix.shape[0]
    values, vectors = np.linalg.eig(matrix)
    values, vectors = values.real, vectors.real
    count = min(n - 1, k)
    if count < 1:
        return np.zeros((n, k))
    part = np.argpartition(values, count)[: count + 1]
    chosen = part[values[part].argsort()][1:]
    out = np.zeros((n, k))
    out[:, : chosen.size] = vectors[:, chosen]
    return out


def baseline_barycentric_graph(cells: CellLists) -> tuple[nx.Graph, list[int]]:
    offsets = [0, *np.cumsum(cells.counts).tolist()]
    graph = nx.Graph()
    graph.add_nodes_from(range(offsets[-1]))
    for rank in range(1, len(cells.counts)):
        for c in range(cells.counts[rank]):
            node = offsets[rank] + c
            # every face of every lower rank: walk down the boundary lists
            frontier = set(cells.faces[rank][c])
            for lower in range(rank - 1, -1, -1):
                for f in frontier:
                    graph.add_edge(node, offsets[lower] + f)
                frontier = {g for f in frontier for g in cells.faces[lower][f]}
    return graph, offsets


def split(rows: np.ndarray, offsets: list[int]) -> list[np.ndarray]:
    return [rows[offsets[r] : offsets[r + 1]] for r in range(len(offsets) - 1)]


def baseline_bspe(cells: CellLists, dim: int) -> list[np.ndarray]:
    graph, offsets = baseline_barycentric_graph(cells)
    laplacian = nx.normalized_laplacian_matrix(graph, nodelist=range(offsets[-1])).toarray()
    return split(dense_smallest_eigenvectors(laplacian, dim), offsets)


def dense_return_probabilities(walk: np.ndarray, steps: int) -> np.ndarray:
    out = np.zeros((walk.shape[0], steps))
    power = np.eye(walk.shape[0])
    for t in range(steps):
        power = power @ walk
        for i in range(walk.shape[0]):
            out[i, t] = power[i, i]
    return out


def baseline_rwbspe(cells: CellLists, dim: int) -> list[np.ndarray]:
    graph, offsets = baseline_barycentric_graph(cells)
    adjacency = nx.to_numpy_array(graph, nodelist=range(offsets[-1]))
    walk = np.zeros_like(adjacency)
    for j in range(adjacency.shape[0]):
        degree = adjacency[:, j].sum()
        if degree == 0:
            walk[j, j] = 1.0
        else:
            walk[:, j] = adjacency[:, j] / degree
    return split(dense_return_probabilities(walk, dim), offsets)


def baseline_counts(cells: CellLists, rank: int, upper: bool) -> np.ndarray:
    n = cells.counts[rank]
    counts = np.zeros((n, n))
    if upper and rank + 1 < len(cells.counts):
        cofaces = [[] for _ in range(n)]
        for c, faces in enumerate(cells.faces[rank + 1]):
            for f in faces:
                cofaces[f].append(c)
        shared = cofaces
    elif not upper and rank > 0:
        shared = cells.faces[rank]
    else:
        return counts
    for i in range(n):
        for j in range(n):
            if i != j:
                counts[i, j] = len(set(shared[i]) & set(shared[j]))
    return counts


def baseline_rwpe(cells: CellLists, dim: int) -> list[np.ndarray]:
    out = []
    for rank, n in enumerate(cells.counts):
        up, down = baseline_counts(cells, rank, True), baseline_counts(cells, rank, False)
        walk = np.zeros((n, n))
        for j in range(n):
            du, dd = up[:, j].sum(), down[:, j].sum()
            if du and dd:
                walk[:, j] = 0.5 * up[:, j] / du + 0.5 * down[:, j] / dd
            elif du:
                walk[:, j] = up[:, j] / du
            elif dd:
                walk[:, j] = down[:, j] / dd
            else:
                walk[j, j] = 1.0
        out.append(dense_return_probabilities(walk, dim))
    return out


def baseline_boundary(cells: CellLists, rank: int) -> np.ndarray:
    """Dense signed ``B_rank`` filled from the face lists."""
    out = np.zeros((cells.counts[rank - 1], cells.counts[rank]))
    for c in range(cells.counts[rank]):
        for face, sign in zip(cells.faces[rank][c], cells.signs[rank][c]):
            out[face, c] = sign
    return out


def baseline_hodge_laplacian(cells: CellLists, rank: int, part: str = "both") -> np.ndarray:
    n = cells.counts[rank]
    laplacian = np.zeros((n, n))
    if rank > 0 and part in ("both", "down"):
        lower = baseline_boundary(cells, rank)
        laplacian += lower.T @ lower
    if rank + 1 < len(cells.counts) and part in ("both", "up"):
        upper = baseline_boundary(cells, rank + 1)
        laplacian += upper @ upper.T
    return laplacian


def baseline_hodge(cells: CellLists, dim: int) -> list[np.ndarray]:
    return [
        dense_smallest_eigenvectors(baseline_hodge_laplacian(cells, rank), dim)
        for rank in range(len(cells.counts))
    ]


def slepians_of(parts: list[tuple[np.ndarray, np.ndarray]], n: int, dim: int) -> np.ndarray:
    """The per-cell Slepian construction, written out loop by loop (no vectorisation).

    ``parts``: (up or down Laplacian, its 0/1 adjacency) of one rank, as dense matrices.
    """
    candidates = []
    for laplacian, adjacency in parts:
        values, vectors = np.linalg.eig(laplacian)
        basis = vectors.real[:, values.real > 1e-8]
        if basis.shape[1] == 0:
            continue
        band = basis @ basis.T
        for cell in range(n):
            mask = np.zeros(n)
            for other in range(n):
                if other == cell or adjacency[cell, other]:
                    mask[other] = 1.0
            local_values, local_vectors = np.linalg.eig(band @ np.diag(mask) @ band)
            for j in np.argsort(-local_values.real):
                if local_values.real[j] > 1e-8:
                    candidates.append((-local_values.real[j], local_vectors.real[:, j]))
    candidates.sort(key=lambda item: item[0])
    pe = np.zeros((n, dim))
    for j, (_, vector) in enumerate(candidates[:dim]):
        pe[:, j] = vector / np.linalg.norm(vector)
    return pe


def baseline_slepians(cells: CellLists, dim: int) -> list[np.ndarray]:
    return [
        slepians_of(
            [
                (baseline_hodge_laplacian(cells, rank, part), baseline_counts(cells, rank, upper) > 0)
                for part, upper in (("up", True), ("down", False))
            ],
            n,
            dim,
        )
        for rank, n in enumerate(cells.counts)
    ]


def baseline_laplacian_node_id(cells: CellLists, dim: int) -> np.ndarray:
    graph = nx.Graph()
    graph.add_nodes_from(range(cells.counts[0]))
    for vertices in cells.vertices[1] if len(cells.counts) > 1 else []:
        graph.add_edge(*vertices)
    laplacian = nx.normalized_laplacian_matrix(graph, nodelist=range(cells.counts[0])).toarray()
    values, vectors = np.linalg.eig(laplacian)
    order = np.argsort(values.real)[:dim]
    out = np.zeros((cells.counts[0], dim))
    out[:, : order.size] = vectors.real[:, order]
    return out


def baseline_zero(cells: CellLists, dim: int) -> list[np.ndarray]:
    return [np.zeros((n, dim)) for n in cells.counts]


# ----------------------------------------------------------------------------------------------
# paper-style baseline: TopoNetX complex + networkx + dense eig (the CT paper's code path)
# ----------------------------------------------------------------------------------------------
def tnx_dense(complex_: tnx.CellComplex, method: str, rank: int, n: int) -> np.ndarray:
    """A TopoNetX neighbourhood as a dense array (zeros where TopoNetX has none)."""
    try:
        return np.asarray(getattr(complex_, method)(rank).todense())
    except ValueError:  # TopoNetX raises for ranks without that neighbourhood
        return np.zeros((n, n))


def tnx_cells(complex_: tnx.CellComplex) -> list[list]:
    return [list(complex_.nodes), list(complex_.edges), list(complex_.cells)]


def paper_barycentric_graph(complex_: tnx.CellComplex) -> tuple[nx.Graph, dict, list]:
    nodes, edges, cells = tnx_cells(complex_)
    index = {cell: i for i, cell in enumerate(nodes + edges + cells)}
    graph = nx.Graph()
    graph.add_nodes_from(range(len(index)))
    nx.set_node_attributes(graph, {i: cell for cell, i in index.items()}, "cell")
    for edge in edges:
        graph.add_edge(index[edge[0]], index[edge])
        graph.add_edge(index[edge[1]], index[edge])
    for cell in cells:
        for vertex in cell.elements:
            graph.add_edge(index[cell], index[vertex])
        for edge in cell.boundary:
            graph.add_edge(index[cell], index[edge] if edge in index else index[edge[::-1]])
    return graph, index, [nodes, edges, cells]


def paper_rows_per_rank(rows: np.ndarray, index: dict, ranks: list) -> list[np.ndarray]:
    """Per-cell dictionary lookups, as the paper extracts the rows of each rank."""
    width = rows.shape[1]
    return [
        np.stack([rows[index[cell]] for cell in cells]) if cells else np.zeros((0, width))
        for cells in ranks
    ]


def paper_bspe(complex_: tnx.CellComplex, dim: int) -> list[np.ndarray]:
    graph, index, ranks = paper_barycentric_graph(complex_)
    laplacian = nx.normalized_laplacian_matrix(graph).toarray()
    return paper_rows_per_rank(dense_smallest_eigenvectors(laplacian, dim), index, ranks)


def paper_rwbspe(complex_: tnx.CellComplex, dim: int) -> list[np.ndarray]:
    graph, index, ranks = paper_barycentric_graph(complex_)
    adjacency = nx.adjacency_matrix(graph).toarray()
    inverse = [0.0 if graph.degree[i] == 0 else 1.0 / graph.degree[i] for i in range(len(index))]
    walk = adjacency @ np.diag(inverse)
    for i in range(len(index)):
        if graph.degree[i] == 0:
            walk[i, i] = 1.0
    return paper_rows_per_rank(dense_return_probabilities(walk, dim), index, ranks)


def paper_rwpe(complex_: tnx.CellComplex, dim: int) -> list[np.ndarray]:
    out = []
    for rank, cells in enumerate(tnx_cells(complex_)):
        n = len(cells)
        up = tnx_dense(complex_, "adjacency_matrix", rank, n)
        down = tnx_dense(complex_, "coadjacency_matrix", rank, n) if rank else np.zeros((n, n))
        walk = np.zeros((n, n))
        for j in range(n):
            du, dd = up[:, j].sum(), down[:, j].sum()
            for i in range(n):
                if du and dd:
                    walk[i, j] = 0.5 * up[i, j] / du + 0.5 * down[i, j] / dd
                elif du:
                    walk[i, j] = up[i, j] / du
                elif dd:
                    walk[i, j] = down[i, j] / dd
                else:
                    walk[i, j] = float(i == j)
        out.append(dense_return_probabilities(walk, dim))
    return out


def paper_hodge(complex_: tnx.CellComplex, dim: int) -> list[np.ndarray]:
    return [
        dense_smallest_eigenvectors(
            tnx_dense(complex_, "hodge_laplacian_matrix", rank, len(cells)), dim
        )
        for rank, cells in enumerate(tnx_cells(complex_))
    ]


TNX_SLEPIAN_PARTS = (("up_laplacian_matrix", "adjacency_matrix"), ("down_laplacian_matrix", "coadjacency_matrix"))


def paper_slepians(complex_: tnx.CellComplex, dim: int) -> list[np.ndarray]:
    out = []
    for rank, cells in enumerate(tnx_cells(complex_)):
        n = len(cells)
        parts = [
            (tnx_dense(complex_, laplacian, rank, n), tnx_dense(complex_, neighbours, rank, n))
            for laplacian, neighbours in TNX_SLEPIAN_PARTS
        ]
        out.append(slepians_of(parts, n, dim))
    return out


def paper_laplacian_node_id(complex_: tnx.CellComplex, dim: int) -> np.ndarray:
    graph = nx.Graph()
    graph.add_nodes_from(complex_.nodes)
    graph.add_edges_from(complex_.edges)
    laplacian = nx.normalized_laplacian_matrix(graph).toarray()
    values, vectors = np.linalg.eig(laplacian)
    order = np.argsort(values.real)[:dim]
    out = np.zeros((laplacian.shape[0], dim))
    out[:, : order.size] = vectors.real[:, order]
    return out


def paper_zero(complex_: tnx.CellComplex, dim: int) -> list[np.ndarray]:
    return [np.zeros((len(cells), dim)) for cells in tnx_cells(complex_)]


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--zinc-dir",
        type=Path,
        default=DEFAULT_ZINC_DIR,
        help="folder holding ZINC-12k's smiles_score.csv (default: DATA/zinc12k)",
    )
    parser.add_argument("--limit", type=int, default=None, help="use the first N molecules")
    parser.add_argument(
        "--baseline-limit", type=int, default=1000, help="complexes timed for the baselines"
    )
    parser.add_argument("--dim", type=int, default=8, help="eigenvector / Slepian PE width")
    parser.add_argument("--walk-dim", type=int, default=16, help="random-walk PE width")
    parser.add_argument("--node-id-dim", type=int, default=64, help="node identifier width")
    parser.add_argument(
        "--grid-side", type=int, default=20, help="side of the large grid complex (0: skip)"
    )
    parser.add_argument(
        "--large-complex", action="store_true", help="only the dense random complex (no ZINC)"
    )
    args = parser.parse_args()
    if args.large_complex:
        dense_random_complex_table(args.dim, args.walk_dim)
        return

    if not (args.zinc_dir / "smiles_score.csv").is_file():
        parser.error(f"--zinc-dir {args.zinc_dir}: no smiles_score.csv there (ZINC-12k's CSV)")
    complexes, lift_seconds = load_complexes(args.zinc_dir, args.limit)
    total = len(complexes)
    cells_per_complex = np.mean([sum(c.cell_counts()) for c in complexes])
    subset = complexes[: min(args.baseline_limit, total)]
    cell_lists = [CellLists(c) for c in subset]  # untimed: what the lean baseline loops over
    toponetx = [to_toponetx(c) for c in subset]  # untimed: what the paper's pipeline stores
    scale = total / len(subset)

    dim, walk, node = args.dim, args.walk_dim, args.node_id_dim
    cases = [
        ("ZeroPE", T.ZeroPE(dim), paper_zero, baseline_zero, dim),
        ("BSPe (BarycentricSubdivisionPE)", T.BarycentricSubdivisionPE(dim), paper_bspe, baseline_bspe, dim),
        ("RWBSPe (BarycentricRandomWalkPE)", T.BarycentricRandomWalkPE(walk), paper_rwbspe, baseline_rwbspe, walk),
        ("RWPe (CellularRandomWalkPE)", T.CellularRandomWalkPE(walk), paper_rwpe, baseline_rwpe, walk),
        ("HodgeLapPE (HodgeLaplacianPE)", T.HodgeLaplacianPE(dim), paper_hodge, baseline_hodge, dim),
        ("TopoSlepiansPE (TopologicalSlepiansPE)", T.TopologicalSlepiansPE(dim), paper_slepians, baseline_slepians, dim),
        ("LaplacianNodeId", T.LaplacianNodeId(node), paper_laplacian_node_id, baseline_laplacian_node_id, node),
        ("OrthogonalRandomNodeId", T.OrthogonalRandomNodeId(node), None, None, node),
    ]  # fmt: skip

    extrapolated = f" (extrapolated x{scale:.0f})" if len(subset) < total else ""
    print(
        f"ZINC-12k: {total} complexes lifted with CellCycleLifting in {lift_seconds:.1f} s "
        f"({cells_per_complex:.1f} cells per complex on average); eigenvector PEs dim={dim}, "
        f"random walks dim={walk}, node identifiers dim={node}. Baselines timed on "
        f"{len(subset)} complexes{extrapolated}."
    )
    print()
    print(
        f"| PE | ours (s, {total} complexes) | ours (ms / complex) | paper-style dense-eig "
        f"Python-loop baseline (s){extrapolated} | ratio | lean dense-eig Python-loop baseline "
        f"(s){extrapolated} | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, transform, paper, lean, width in cases:
        ours = time_transform(transform, complexes)
        cells = [f"{ours:.1f}", f"{1e3 * ours / total:.2f}"]
        for baseline, inputs in ((paper, toponetx), (lean, cell_lists)):
            if baseline is None:
                cells += ["—", "—"]
                continue
            timed = lambda c, f=baseline, w=width: to_tensors(f(c, w))  # noqa: E731
            seconds = scale * time_transform(timed, inputs)
            cells += [f"{seconds:.1f}", f"{seconds / ours:.1f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    if args.grid_side:
        large_complex_table(args.grid_side, dim, walk)


def large_complex_table(side: int, dim: int, walk: int) -> None:
    """One large complex: the sparse paths (``eigsh``, sparse powers) against the dense path."""
    graph = nx.convert_node_labels_to_integers(nx.grid_2d_graph(side, side))
    edges = torch.tensor(list(graph.edges)).t()
    edge_index = torch.cat([edges, edges.flip(0)], dim=1)
    complex_ = T.CellCycleLifting()(Data(edge_index=edge_index, num_nodes=side * side))
    cells, toponetx = CellLists(complex_), to_toponetx(complex_)
    counts = complex_.cell_counts()
    print()
    print(
        f"One large complex: the {side}x{side} grid lifted with CellCycleLifting "
        f"({counts} cells, {sum(counts)} in all), one run each."
    )
    print()
    print("| PE | ours (s) | paper-style baseline (s) | ratio | lean baseline (s) | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    cases = [
        ("BSPe", T.BarycentricSubdivisionPE(dim), paper_bspe, baseline_bspe, dim),
        ("RWBSPe", T.BarycentricRandomWalkPE(walk), paper_rwbspe, baseline_rwbspe, walk),
        ("RWPe", T.CellularRandomWalkPE(walk), paper_rwpe, baseline_rwpe, walk),
        ("HodgeLapPE", T.HodgeLaplacianPE(dim), paper_hodge, baseline_hodge, dim),
    ]
    for name, transform, paper, lean, width in cases:
        ours = time_transform(transform, [complex_])
        row = [f"{ours:.2f}"]
        for baseline, inputs in ((paper, toponetx), (lean, cells)):
            seconds = time_transform(lambda c, f=baseline, w=width: to_tensors(f(c, w)), [inputs])
            row += [f"{seconds:.2f}", f"{seconds / ours:.1f}x"]
        print(f"| {name} | " + " | ".join(row) + " |", flush=True)


def dense_random_complex_table(dim: int, walk: int) -> None:
    """Every PE once on a 25-vertex graph lifted with all its chordless cycles up to length 6."""
    import resource
    import tracemalloc

    graph = nx.gnm_random_graph(25, 110, seed=0)
    edges = torch.tensor(list(graph.edges)).t()
    data = Data(edge_index=torch.cat([edges, edges.flip(0)], dim=1), num_nodes=25)
    complex_ = T.CellCycleLifting(cycles="chordless", max_cell_length=6)(data)
    print(
        f"gnm_random_graph(25, 110, seed=0), chordless cycles <= 6: cells {complex_.cell_counts()}"
    )
    print()
    print("| PE | seconds | peak traced memory (MB) |")
    print("|---|---:|---:|")
    cases = [
        ("BSPe", T.BarycentricSubdivisionPE(dim)),
        ("RWBSPe", T.BarycentricRandomWalkPE(walk)),
        ("RWPe", T.CellularRandomWalkPE(walk)),
        ("HodgeLapPE", T.HodgeLaplacianPE(dim)),
        ("HodgeLapPE include_harmonic", T.HodgeLaplacianPE(dim, include_harmonic=True)),
        ("TopoSlepiansPE per_set", T.TopologicalSlepiansPE(dim)),
        ("TopoSlepiansPE global", T.TopologicalSlepiansPE(dim, selection="global")),
        ("TopoSlepiansPE harmonic=2", T.TopologicalSlepiansPE(dim, harmonic=2)),
    ]
    for name, transform in cases:
        start = time.perf_counter()
        transform(complex_.clone())
        seconds = time.perf_counter() - start
        tracemalloc.start()  # a second run for memory: tracing slows allocations down
        transform(complex_.clone())
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(f"| {name} | {seconds:.2f} | {peak:.0f} |", flush=True)
    print(f"\nprocess max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
