"""TokenGT node identifiers as PyG transforms (TokenGT paper, §2 and Appendix A.3.1).

TokenGT augments the token of node ``v`` with ``[P_v, P_v]`` and the token of edge ``(u, v)``
with ``[P_u, P_v]``, where the rows of ``P ∈ R^{n × d_p}`` are orthonormal node identifiers.
Two choices, both writing ``node_id`` of shape ``(num_nodes, dim)`` (float32):

* :class:`LaplacianNodeId` — eigenvectors of the normalised graph Laplacian;
* :class:`OrthogonalRandomNodeId` — orthogonal random features (ORF).

Both accept a plain graph (:class:`~torch_geometric.data.Data` with ``edge_index`` and
``num_nodes``; edges are taken as undirected, self-loops and repeated edges ignored) or a
:class:`~topomodelx_attention.data.ComplexData` (its 1-skeleton, from ``incidence_1``).
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from topomodelx_attention.data import ComplexData, shared_face_counts
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.transforms.pe_utils import (
    DENSE_THRESHOLD,
    EIGH_THRESHOLD,
    as_matrix,
    boundary_coos,
    check_dim,
    check_single_complex,
    diag_matrix,
    normalized_laplacian,
    pad_columns,
    smallest_eigenpairs,
)

__all__ = [
    "LaplacianNodeId",
    "OrthogonalRandomNodeId",
    "batched_orthogonal_random_ids",
    "graph_adjacency",
]


def batched_orthogonal_random_ids(
    batch: torch.Tensor, num_complexes: int, dim: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Fresh orthonormal random node identifiers for every complex of a batch, in torch.

    The batched, on-device counterpart of :class:`OrthogonalRandomNodeId` with
    ``resample=True`` (TokenGT, Appendix A.3.1: ORFs drawn at random every step): the nodes of
    each complex get rows of Haar-random orthogonal ``dim × dim`` matrices (stacked blocks when
    a complex has more than ``dim`` nodes), one QR of a ``(num_complexes, blocks, dim, dim)``
    Gaussian tensor for the whole batch — for models that receive batches built elsewhere
    (e.g. TopoBench) and cannot run the per-graph transform.

    Parameters
    ----------
    batch : torch.Tensor, shape = (num_nodes,)
        Complex index of every node, sorted.
    num_complexes : int
        Number of complexes.
    dim : int
        Identifier width.
    generator : torch.Generator, optional
        Random source.

    Returns
    -------
    torch.Tensor, shape = (num_nodes, dim)
        Identifiers; rows of one complex are orthonormal when it has at most ``dim`` nodes.
    """
    if int(dim) < 1:
        raise ValueError(f"dim must be a positive int, got {dim}")
    batch = batch.long()
    counts = torch.bincount(batch, minlength=num_complexes)
    if batch.numel() == 0:
        return torch.zeros((0, dim), device=batch.device)
    start = torch.cumsum(counts, 0) - counts
    local = torch.arange(batch.numel(), device=batch.device) - start[batch]
    blocks = max(1, -(-int(counts.max()) // dim))
    gaussian = torch.randn(
        (num_complexes, blocks, dim, dim), generator=generator, device=batch.device
    )
    q, r = torch.linalg.qr(gaussian)
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    q = q * torch.where(signs == 0, 1.0, signs).unsqueeze(-2)  # Haar measure (Mezzadri)
    return q.reshape(num_complexes, blocks * dim, dim)[batch, local]


def graph_adjacency(data: Data) -> Coo:
    """Symmetric 0/1 adjacency of a graph or of the 1-skeleton of a complex.

    Parameters
    ----------
    data : torch_geometric.data.Data or ComplexData
        One graph (``edge_index``, ``num_nodes``) or one complex (``incidence_1``).

    Returns
    -------
    Coo, shape = (num_nodes, num_nodes)
        Undirected adjacency without diagonal (self-loops and repeated edges ignored).
    """
    if isinstance(data, ComplexData):
        counts = check_single_complex(data, "node identifiers")
        if len(counts) < 2:
            return Coo.build([], [], [], (counts[0], counts[0]))
        unsigned = boundary_coos(data, signed=False, max_rank=1)[0]
        return shared_face_counts(unsigned, upper=True).pattern()
    if not isinstance(data, Data):
        raise TypeError(
            "node identifiers need a torch_geometric Data graph or a ComplexData, "
            f"got {type(data).__name__}"
        )
    batch = data.batch if "batch" in data else None
    if batch is not None and batch.numel() and int(batch.max()) > 0:
        raise ValueError(
            "node identifiers are computed per graph, got a batch of "
            f"{int(batch.max()) + 1}; apply the transform before batching"
        )
    if data.num_nodes is None:
        raise ValueError("the graph has no num_nodes (nor x or edge_index to infer it from)")
    n = int(data.num_nodes)
    x = data.x if "x" in data else None
    if isinstance(x, Tensor) and x.dim() >= 1 and x.size(0) != n:
        raise ValueError(
            f"num_nodes={n} but x has {x.size(0)} rows: node identifiers need one vertex count "
            "(fix num_nodes or x)"
        )
    edge_index = data.edge_index if "edge_index" in data else None
    if edge_index is None or edge_index.numel() == 0:
        return Coo.build([], [], [], (n, n))
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    source, target = edge_index.detach().cpu().long().numpy()
    if min(source.min(), target.min()) < 0 or max(source.max(), target.max()) >= n:
        raise ValueError(f"edge_index refers to nodes outside 0..{n - 1}")
    keep = source != target
    source, target = source[keep], target[keep]
    both = np.ones(2 * source.size)
    return Coo.build(np.r_[source, target], np.r_[target, source], both, (n, n)).pattern()


def _edge_digest(adjacency: Coo) -> int:
    """64-bit digest of ``(n, sorted undirected edges)``, stable across processes."""
    upper = adjacency.rows < adjacency.cols
    rows, cols = adjacency.rows[upper], adjacency.cols[upper]
    order = np.lexsort((cols, rows))
    edges = np.stack([rows[order], cols[order]]).astype(np.int64)
    digest = hashlib.blake2b(digest_size=8)
    digest.update(np.int64(adjacency.shape[0]).tobytes())
    digest.update(edges.tobytes())
    return int.from_bytes(digest.digest(), "little")


class NodeIdTransform(BaseTransform):
    """Base of the node-identifier transforms: ``node_id = identifiers(graph adjacency)``."""

    dim: int

    def identifiers(self, adjacency: Coo) -> np.ndarray:
        """Return the identifiers of the nodes of one graph.

        Parameters
        ----------
        adjacency : Coo
            The graph (:func:`graph_adjacency`).

        Returns
        -------
        numpy.ndarray, shape = (num_nodes, dim)
            One identifier per node.
        """
        raise NotImplementedError

    def forward(self, data: Data) -> Data:
        """Write ``node_id`` of shape ``(num_nodes, dim)``.

        Parameters
        ----------
        data : torch_geometric.data.Data or ComplexData
            One graph or complex.

        Returns
        -------
        torch_geometric.data.Data or ComplexData
            The (shallow-copied) input with ``node_id``.
        """
        vectors = self.identifiers(graph_adjacency(data))
        data.node_id = torch.from_numpy(vectors.astype(np.float32))
        return data


class LaplacianNodeId(NodeIdTransform):
    """Laplacian-eigenvector node identifiers (TokenGT "Lap", Appendix A.3.1).

    ``node_id`` holds eigenvectors of ``L = I - D^{-1/2} A D^{-1/2}`` in increasing order of
    eigenvalue, **including** the kernel: for ``n <= dim`` the ``n`` eigenvectors form an
    orthogonal matrix, so the rows of ``P`` are exactly orthonormal — the property TokenGT's
    theory needs — and the remaining ``dim - n`` columns are zeros.

    Parameters
    ----------
    dim : int
        Output width ``d_p``.
    select : {"smallest", "smallest_largest"}, default="smallest"
        Which eigenvectors when ``n > dim`` (rows then only approximately orthonormal):
        the ``dim`` smallest, or — as TokenGT does for large graphs (Appendix A.4.3) — the
        ``ceil(dim / 2)`` smallest and ``floor(dim / 2)`` largest.
    dense_threshold : int, default=DENSE_THRESHOLD
        Graphs with at most this many nodes are built as dense arrays, larger ones as CSR.
    eigh_threshold : int, default=EIGH_THRESHOLD
        Graphs with at most this many nodes use dense ``eigh``, larger ones the iterative
        solvers of :func:`~topomodelx_attention.transforms.pe_utils.smallest_eigenpairs`.

    Notes
    -----
    Isolated nodes: their row and column of ``L`` are zero (no division by zero); each one
    is a kernel vector of its own (its indicator), so its identifier is a unit vector too.
    Signs follow :func:`~topomodelx_attention.transforms.pe_utils.canonical_signs`; TokenGT
    flips them at random during training (:class:`RandomSignFlip` with ``keys=["node_id"]``).
    """

    def __init__(
        self,
        dim: int,
        select: str = "smallest",
        dense_threshold: int = DENSE_THRESHOLD,
        *,
        eigh_threshold: int = EIGH_THRESHOLD,
    ) -> None:
        self.dim = check_dim(dim)
        if select not in ("smallest", "smallest_largest"):
            raise ValueError(f"select must be 'smallest' or 'smallest_largest', got {select!r}")
        self.select = select
        self.dense_threshold = check_dim(dense_threshold, "dense_threshold", minimum=0)
        self.eigh_threshold = check_dim(eigh_threshold, "eigh_threshold", minimum=0)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(dim={self.dim}, select={self.select!r})"

    def identifiers(self, adjacency: Coo) -> np.ndarray:  # noqa: D102
        n = adjacency.shape[0]
        dense = n <= self.dense_threshold
        laplacian = normalized_laplacian(as_matrix(adjacency, dense))
        if n > self.dim and self.select == "smallest_largest":
            low, high = (self.dim + 1) // 2, self.dim // 2
            _, smallest = smallest_eigenpairs(laplacian, low, False, self.eigh_threshold)
            # largest eigenvalues of L = smallest of the PSD matrix 2I - L (spectrum in [0, 2])
            flipped = diag_matrix(np.full(n, 2.0), dense) - laplacian
            _, largest = smallest_eigenpairs(flipped, high, False, self.eigh_threshold)
            vectors = np.hstack([smallest, largest[:, ::-1]])
        else:
            _, vectors = smallest_eigenpairs(laplacian, self.dim, False, self.eigh_threshold)
        return pad_columns(vectors, self.dim)


class OrthogonalRandomNodeId(NodeIdTransform):
    """Orthogonal random features as node identifiers (TokenGT "ORF", Appendix A.3.1).

    For ``n <= dim`` the ``n`` rows are the first rows of a Haar-random orthogonal
    ``dim × dim`` matrix (QR of a Gaussian matrix, signs of ``diag(R)`` fixed): exactly
    orthonormal. For ``n > dim`` no ``n`` orthonormal vectors exist in ``R^dim``; the rows
    are stacked blocks of independent Haar matrices (the Performer construction TokenGT's
    code uses): unit norm, orthonormal inside each block of ``dim`` rows, nearly orthogonal
    across blocks (inner products of order ``1/√dim`` — the near-orthonormal regime of
    Appendix A.4.3, which draws ``±1/d_p`` coin-toss entries instead).

    Parameters
    ----------
    dim : int
        Output width ``d_p``.
    seed : int, default=0
        Base seed.
    resample : bool, default=False
        ``False``: the identifiers are a deterministic function of ``(seed, graph)`` — the
        generator is seeded with ``seed`` and a BLAKE2 digest of the node count and edge set —
        so evaluation is reproducible across runs and processes. ``True``: fresh identifiers
        at every call (training-time augmentation), drawn from PyTorch's global generator
        (reseeded per DataLoader worker, unlike a generator stored on the transform).

    Notes
    -----
    *Which default, and why.* TokenGT draws the ORFs at random, anew for every forward pass
    during training (Appendix A.3.1): use ``resample=True`` as a *training-time* transform
    (applied to each batch or sample, never cached). The class default is ``resample=False``
    because this transform is also used as a dataset ``pre_transform`` (cached on disk) and
    for evaluation, where identifiers must be reproducible: a cached "random" draw would be
    one fixed draw per graph for the whole training, i.e. the model would memorise
    identifiers instead of learning their invariance.
    """

    def __init__(self, dim: int, seed: int = 0, resample: bool = False) -> None:
        self.dim = check_dim(dim)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = seed
        self.resample = bool(resample)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(dim={self.dim}, seed={self.seed}, resample={self.resample})"
        )

    def identifiers(self, adjacency: Coo) -> np.ndarray:  # noqa: D102
        n = adjacency.shape[0]
        if self.resample:
            rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,))))
        else:
            rng = np.random.default_rng([self.seed, _edge_digest(adjacency)])
        blocks = max(1, -(-n // self.dim))
        q, r = np.linalg.qr(rng.standard_normal((blocks, self.dim, self.dim)))
        signs = np.sign(np.diagonal(r, axis1=1, axis2=2))
        signs[signs == 0] = 1.0
        q = q * signs[:, None, :]  # Haar measure (Mezzadri's correction)
        return q.reshape(-1, self.dim)[:n]
