"""Feature lifting: give features to cells that have none, from their vertices."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor
from torch_geometric.transforms import BaseTransform

from topomodelx_attention.data import ComplexData
from topomodelx_attention.data.coo import Coo
from topomodelx_attention.data.neighborhoods import vertex_cells

__all__ = ["FeatureLifting"]

_METHODS = ("sum", "mean", "concat")


class FeatureLifting(BaseTransform):
    """Fill missing ``x_r`` (``r >= 1``) from the vertex (or edge) features.

    * ``"sum"`` (default): a cell's feature is the sum of the features of its vertices;
    * ``"mean"``: their mean;
    * ``"concat"`` (edges only): ``[x_u, x_v]`` for the edge ``u → v`` (``u < v``), the CT
      paper's GCB setup.

    What is computed is the *raw* feature vector of each cell: ``x_r[c] = Σ_{v ∈ c} x_0[v]``
    (or the mean). The models embed every rank with its own encoder, so the embedding of a
    2-cell is **not** the sum of the embedded vertex signals (only for an encoder that is
    linear, without bias and shared between ranks would it be).

    Two conventions for 2-cells (``x2_from``):

    * ``"vertices"`` (default): the sum (mean) of the features of the 2-cell's vertices, as
      for every other rank;
    * ``"edges"``: the sum (mean) of the features ``x_1`` of its boundary edges —
      TopoBench's projection feature lifting (``ProjectionSum``: ``x_r = |B_r|ᵀ x_{r-1}``).
      With ``edge_method="sum"`` an edge carries ``x_u + x_v`` and every vertex of a cycle
      lies on two of its edges, so this is twice the ``"vertices"`` sum for a cycle-bounded
      2-cell; it differs when ``x_1`` are given edge features (``edge_attr``) or edges use
      ``"concat"``/``"mean"``.

    Categorical (integer) vertex features stay integer where that is meaningful: ``"concat"``
    keeps the codes. Summing codes is meaningless, so ``"sum"``/``"mean"`` of integer features
    needs ``categorical_cardinalities`` (categories per column): the cell then gets the sum
    (or mean) of the one-hot encodings of its vertices' categories — a bag of categories.
    Without it, an error says so. ``x2_from="edges"`` needs floating-point ``x_1``.

    Ranks that already have ``x_r`` are left unchanged, unless listed in ``overwrite``. A
    lifting that should give TopoBench's 2-cell features takes the transform as its feature
    lifting, ``CellCycleLifting(feature_lifting=FeatureLifting(x2_from="edges"))``; applied
    to an already lifted complex (which has ``x_2``), ``FeatureLifting(x2_from="edges",
    overwrite=[2])`` recomputes ``x_2`` from its ``x_1`` (without ``overwrite`` it warns that
    ``x_2`` is kept).

    Parameters
    ----------
    method : {"sum", "mean"}, default="sum"
        Lifting for ranks ``>= 2`` (and for edges unless ``edge_method`` is given).
    edge_method : {"sum", "mean", "concat"}, optional
        Lifting for edges (default: ``method``).
    categorical_cardinalities : sequence of int, optional
        Number of categories of each column of integer ``x_0``.
    x2_from : {"vertices", "edges"}, default="vertices"
        Source of the 2-cell features: vertex features ``x_0`` or edge features ``x_1``
        (TopoBench's convention).
    overwrite : sequence of int, default=()
        Ranks (``>= 1``) whose existing ``x_r`` is replaced by the lifted features, e.g.
        ``[2]`` to re-lift ``x_2`` of a lifted complex from its edges.
    """

    def __init__(
        self,
        method: str = "sum",
        edge_method: str | None = None,
        categorical_cardinalities: Sequence[int] | None = None,
        *,
        x2_from: str = "vertices",
        overwrite: Sequence[int] = (),
    ) -> None:
        if x2_from not in ("vertices", "edges"):
            raise ValueError(f"x2_from must be 'vertices' or 'edges', got {x2_from!r}")
        self.x2_from = x2_from
        if isinstance(overwrite, (str, bytes)) or not all(
            isinstance(r, (int, np.integer)) and not isinstance(r, bool) for r in overwrite
        ):
            raise TypeError(f"overwrite must be a sequence of ranks (ints), got {overwrite!r}")
        if any(int(r) < 1 for r in overwrite):
            raise ValueError(
                f"overwrite lists ranks >= 1 (x_0 is the source, never lifted), got {list(overwrite)}"
            )
        self.overwrite = tuple(sorted({int(r) for r in overwrite}))
        if method not in ("sum", "mean"):
            raise ValueError(f"method must be 'sum' or 'mean', got {method!r}")
        edge_method = method if edge_method is None else edge_method
        if edge_method not in _METHODS:
            raise ValueError(f"edge_method must be one of {_METHODS}, got {edge_method!r}")
        if categorical_cardinalities is not None:
            categorical_cardinalities = [int(c) for c in categorical_cardinalities]
            if any(c < 1 for c in categorical_cardinalities):
                raise ValueError("categorical_cardinalities must be positive integers")
        self.method = method
        self.edge_method = edge_method
        self.categorical_cardinalities = categorical_cardinalities

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(method={self.method!r}, edge_method={self.edge_method!r}, "
            f"categorical_cardinalities={self.categorical_cardinalities}, "
            f"x2_from={self.x2_from!r}"
            + (f", overwrite={list(self.overwrite)})" if self.overwrite else ")")
        )

    def _one_hot(self, x: Tensor) -> Tensor:
        cards = self.categorical_cardinalities
        if cards is None:
            raise ValueError(
                "x_0 holds integer (categorical) codes, which cannot be summed or averaged: pass "
                "categorical_cardinalities=[number of categories per column] to lift bags of "
                "one-hot categories, use edge_method='concat' for edges, or one-hot encode x_0"
            )
        if len(cards) != x.size(1):
            raise ValueError(
                f"categorical_cardinalities has {len(cards)} entries but x_0 has {x.size(1)} columns"
            )
        columns = []
        for j, card in enumerate(cards):
            col = x[:, j]
            if col.numel() and (int(col.min()) < 0 or int(col.max()) >= card):
                raise ValueError(f"x_0 column {j} has codes outside [0, {card})")
            columns.append(torch.nn.functional.one_hot(col, card).float())
        return torch.cat(columns, dim=1) if columns else x.new_zeros((x.size(0), 0)).float()

    def forward(self, data: ComplexData) -> ComplexData:
        """Lift features onto every rank that lacks them.

        Parameters
        ----------
        data : ComplexData
            Complex with ``x_0``.

        Returns
        -------
        ComplexData
            The same object with ``x_r`` for every rank ``r``.
        """
        if not isinstance(data, ComplexData):
            raise TypeError(f"FeatureLifting expects a ComplexData, got {type(data)!r}")
        boundaries = data.boundary_matrices(signed=False) if data.max_rank > 0 else []
        return self.lift(data, [Coo.from_scipy(b) for b in boundaries])

    def lift(self, data: ComplexData, boundaries: Sequence[Coo]) -> ComplexData:
        """Lift features given the boundary matrices (liftings pass the ones they built).

        Parameters
        ----------
        data : ComplexData
            Complex with ``x_0``.
        boundaries : sequence of Coo
            ``[B_1, ..., B_R]`` of ``data`` (signs ignored).

        Returns
        -------
        ComplexData
            The same object with ``x_r`` for every rank ``r``.
        """
        if "x_0" not in data:
            raise ValueError("FeatureLifting needs vertex features x_0")
        x0 = data.x_0
        one_hot = None
        for rank in range(1, data.max_rank + 1):
            if f"x_{rank}" in data and rank not in self.overwrite:
                if rank == 2 and self.x2_from == "edges":
                    warnings.warn(
                        "FeatureLifting(x2_from='edges'): this complex already has x_2, which is "
                        "kept unchanged; pass overwrite=[2] to recompute it from the edge "
                        "features, or lift with CellCycleLifting(feature_lifting="
                        "FeatureLifting(x2_from='edges'))",
                        UserWarning,
                        stacklevel=3,
                    )
                continue
            method = self.edge_method if rank == 1 else self.method
            if rank == 2 and self.x2_from == "edges":
                data["x_2"] = self._from_edges(data, boundaries[1])
                continue
            cells = vertex_cells(boundaries, rank, x0.size(0))  # rows: vertices, cols: cells
            order = np.argsort(cells.cols, kind="stable")
            vertex = torch.from_numpy(cells.rows[order])
            n_cells = cells.shape[1]
            if method == "concat":
                if rank != 1 or not bool((np.bincount(cells.cols, minlength=n_cells) == 2).all()):
                    raise ValueError("edge_method='concat' needs edges with exactly two vertices")
                data[f"x_{rank}"] = x0[vertex].reshape(n_cells, 2 * x0.size(1))  # [x_u, x_v], u < v; no edges: 0 rows
                continue
            if one_hot is None:
                one_hot = x0 if x0.is_floating_point() else self._one_hot(x0)
                source = one_hot.detach().cpu().numpy()
            # NumPy accumulation: per-complex arrays are tiny, torch's threaded kernels are not.
            lifted = np.zeros((n_cells, source.shape[1]), dtype=source.dtype)
            np.add.at(lifted, cells.cols[order], source[cells.rows[order]])
            if method == "mean":
                counts = np.bincount(cells.cols, minlength=n_cells).clip(min=1)
                lifted = lifted / counts[:, None].astype(lifted.dtype)
            lifted = torch.from_numpy(lifted).to(one_hot.device)
            data[f"x_{rank}"] = lifted
        return data

    def _from_edges(self, data: ComplexData, boundary: Coo) -> Tensor:
        """``x_2 = |B_2|ᵀ x_1`` (sum) or its mean over the boundary edges."""
        x1 = data.x_1
        if not x1.is_floating_point():
            raise ValueError(
                "x2_from='edges' sums edge features, but x_1 holds integer (categorical) codes: "
                "one-hot encode them first or use x2_from='vertices'"
            )
        n_cells = boundary.shape[1]
        source = x1.detach().cpu().numpy()
        lifted = np.zeros((n_cells, source.shape[1]), dtype=source.dtype)
        np.add.at(lifted, boundary.cols, source[boundary.rows])
        if self.method == "mean":
            counts = np.bincount(boundary.cols, minlength=n_cells).clip(min=1)
            lifted = lifted / counts[:, None].astype(lifted.dtype)
        return torch.from_numpy(lifted).to(x1.device)
