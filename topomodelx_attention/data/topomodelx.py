r"""Feed TopoModelX layers from a :class:`~topomodelx_attention.data.ComplexData`.

TopoModelX layers take their neighbourhood matrices as positional ``forward`` arguments whose
names do not always match the TopoBench keys of :class:`ComplexData`, and they expect the
conventions of TopoModelX's own tutorials (signed or unsigned, transposed, normalised).
:func:`topomodelx_inputs` returns the keyword arguments of one layer family's ``forward`` so a
hybrid model calls ``layer(**topomodelx_inputs(data, "cwn"))`` with no glue:

========= ================================= ====================================================
family    TopoModelX layer                  what it receives (our key → its argument)
========= ================================= ====================================================
``cwn``   ``nn.cell.cwn_layer.CWNLayer``    ``x_0, x_1, x_2``; ``adjacency_1`` → ``adjacency_0``
                                            (CWN's edge-to-edge convolution uses the *upper
                                            adjacency of edges*); ``incidence_2``;
                                            ``incidence_1.T`` → ``incidence_1_t`` (unsigned)
``can``   ``nn.cell.can_layer.CANLayer``    ``x_1`` → ``x``; ``down_laplacian_1``,
                                            ``up_laplacian_1`` (signed; CAN uses their
                                            sparsity pattern)
``scnn``  ``nn.simplicial.scnn_layer``      ``x_r`` → ``x``; ``down_laplacian_r`` →
                                            ``laplacian_down``, ``up_laplacian_r`` →
                                            ``laplacian_up`` (signed Hodge convolution)
``sccnn`` ``nn.simplicial.sccnn_layer``     ``x_all = (x_0, x_1, x_2)``; ``laplacian_all =
                                            (L_0, L_1^down, L_1^up, L_2^down, L_2^up)``
                                            (``sc_order > 2``; ``(.., L_2)`` for 2);
                                            ``incidence_all = (B_1, B_2)`` signed
``scn2``  ``nn.simplicial.scn2_layer``      ``x_0, x_1, x_2``; ``laplacian_r`` = normalised
                                            Hodge Laplacians :math:`D^{-1/2} L_r D^{-1/2}`
                                            (:func:`normalized_hodge_laplacian`)
``hmc``   ``nn.combinatorial.hmc_layer``    ``x_0, x_1, x_2``; ``adjacency_0``, ``adjacency_1``,
                                            ``coadjacency_2``, ``incidence_1``, ``incidence_2``
                                            (unsigned)
========= ================================= ====================================================

Signed matrices need an oriented complex (``signed_incidence_r``: cell and simplicial
complexes); a combinatorial complex has none, and asking for a signed family raises. This module
imports torch and :mod:`topomodelx_attention.data` only (TopoModelX itself is not needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from topomodelx_attention.data.complex_data import ComplexData

__all__ = ["TOPOMODELX_FAMILIES", "normalized_hodge_laplacian", "topomodelx_inputs"]

#: Layer families :func:`topomodelx_inputs` knows, by TopoModelX layer class name.
TOPOMODELX_FAMILIES: dict[str, str] = {
    "CWNLayer": "cwn",
    "CANLayer": "can",
    "SCNNLayer": "scnn",
    "SCCNNLayer": "sccnn",
    "SCN2Layer": "scn2",
    "HMCLayer": "hmc",
}


def normalized_hodge_laplacian(matrix: Tensor) -> Tensor:
    r"""Symmetrically normalise a (Hodge) Laplacian: :math:`D^{-1/2} L D^{-1/2}`.

    ``D`` is the diagonal of the absolute row sums of ``L`` (as TopoNetX's
    ``normalized_laplacian_matrix`` and TopoBench's SCN wrapper compute it); rows that sum to 0
    (isolated cells) keep zeros.

    Parameters
    ----------
    matrix : torch.Tensor, shape = (n, n)
        Sparse (any layout) or dense Laplacian.

    Returns
    -------
    torch.Tensor, shape = (n, n)
        Coalesced ``sparse_coo`` normalised Laplacian with no explicit zeros.
    """
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"a Laplacian must be a square matrix, got shape {tuple(matrix.shape)}")
    coo = (matrix.to_sparse_coo() if matrix.layout != torch.sparse_coo else matrix).coalesce()
    row, col = coo.indices()
    values = coo.values()
    degree = torch.zeros(matrix.shape[0], dtype=values.dtype, device=values.device)
    degree.index_add_(0, row, values.abs())
    scale = torch.where(degree > 0, degree.clamp_min(torch.finfo(values.dtype).tiny).rsqrt(), 0.0)
    scaled = values * scale[row] * scale[col]
    keep = scaled != 0
    return torch.sparse_coo_tensor(
        coo.indices()[:, keep], scaled[keep], matrix.shape, is_coalesced=True
    ).coalesce()


def _family(layer: Any) -> str:
    if isinstance(layer, str):
        name = layer.lower()
        if name in TOPOMODELX_FAMILIES.values():
            return name
        name = TOPOMODELX_FAMILIES.get(layer, name)
        if name in TOPOMODELX_FAMILIES.values():
            return name
    else:
        cls = layer if isinstance(layer, type) else type(layer)
        if cls.__name__ in TOPOMODELX_FAMILIES:
            return TOPOMODELX_FAMILIES[cls.__name__]
    raise ValueError(
        f"no TopoModelX input mapping for {layer!r}; known families: "
        f"{sorted(TOPOMODELX_FAMILIES.values())} (or their layer classes {sorted(TOPOMODELX_FAMILIES)})"
    )


def _transpose(matrix: Tensor) -> Tensor:
    return matrix.t().coalesce()


def _signed(data: ComplexData, name: str, rank: int, family: str) -> Tensor:
    key = f"{name}_{rank}"
    if key not in data:
        raise ValueError(
            f"TopoModelX's {family} layers need the oriented {key!r}, which this complex lacks "
            "(combinatorial complexes carry no orientation); convert a cell or simplicial complex"
        )
    return data[key]


def topomodelx_inputs(
    data: ComplexData,
    layer: Any,
    *,
    features: Sequence[Tensor] | None = None,
    rank: int = 1,
    sc_order: int = 3,
) -> dict[str, Any]:
    """Keyword arguments of a TopoModelX layer's ``forward`` built from a complex.

    Parameters
    ----------
    data : ComplexData
        A complex or a batch (block-diagonal neighbourhoods work unchanged).
    layer : str or type or torch.nn.Module
        A family name (``"cwn"``, ``"can"``, ``"scnn"``, ``"sccnn"``, ``"scn2"``, ``"hmc"``),
        a TopoModelX layer class or instance (see the module table).
    features : sequence of torch.Tensor, optional
        Cell features ``[h_0, h_1, ...]`` to pass instead of ``data.x_r`` (hidden features of a
        hybrid model, e.g. the output of a :class:`CellularTransformerLayer`).
    rank : int, default=1
        Rank of the single-rank families (``scnn``; ``can`` is defined on edges only).
    sc_order : int, default=3
        ``SCCNNLayer``'s ``sc_order`` when ``layer`` is given by name (read from the instance
        otherwise): 2 passes four Laplacians ``(L_0, L_1^down, L_1^up, L_2)``, more passes five
        (TopoBench's SCCNN setting).

    Returns
    -------
    dict of str to Any
        ``forward`` keyword arguments: features ``x_r`` (or ``x`` / ``x_all``) and the
        neighbourhoods under the layer's own argument names.
    """
    family = _family(layer)
    if not isinstance(data, ComplexData):
        raise TypeError(f"topomodelx_inputs expects a ComplexData, got {type(data).__name__}")
    if features is None:
        features = {f"x_{r}": data[f"x_{r}"] for r in range(data.max_rank + 1) if f"x_{r}" in data}
    else:
        features = {f"x_{r}": h for r, h in enumerate(features)}
    for r, h in features.items():
        cells = data[f"batch_{r[2:]}"].shape[0] if f"batch_{r[2:]}" in data else h.shape[0]
        if h.shape[0] != cells:
            raise ValueError(f"{r}: {h.shape[0]} rows for {cells} cells")
    need = {"cwn": 2, "sccnn": 2, "scn2": 2, "hmc": 2, "can": 1, "scnn": rank}[family]
    if data.max_rank < need:
        raise ValueError(f"TopoModelX's {family} layers need ranks 0..{need}; this complex stops at {data.max_rank}")
    if family == "cwn":
        return {
            "x_0": features["x_0"], "x_1": features["x_1"], "x_2": features["x_2"],
            "adjacency_0": data.neighborhood("adjacency", 1),
            "incidence_2": data.neighborhood("incidence", 2),
            "incidence_1_t": _transpose(data.neighborhood("incidence", 1)),
        }
    if family == "can":
        return {
            "x": features["x_1"],
            "down_laplacian_1": data.neighborhood("down_laplacian", 1),
            "up_laplacian_1": data.neighborhood("up_laplacian", 1),
        }
    if family == "scnn":
        return {
            "x": features[f"x_{rank}"],
            "laplacian_down": data.neighborhood("down_laplacian", rank),
            "laplacian_up": data.neighborhood("up_laplacian", rank),
        }
    if family == "sccnn":
        incidence_all = (
            _signed(data, "signed_incidence", 1, family),
            _signed(data, "signed_incidence", 2, family),
        )
        order = int(getattr(layer, "sc_order", sc_order))
        laplacians = [
            data.neighborhood("hodge_laplacian", 0),
            data.neighborhood("down_laplacian", 1),
            data.neighborhood("up_laplacian", 1),
        ]
        if order == 2:  # SCCNNLayer(sc_order=2) reads one Laplacian for rank 2
            laplacians.append(data.neighborhood("hodge_laplacian", 2))
        else:
            laplacians += [data.neighborhood("down_laplacian", 2), data.neighborhood("up_laplacian", 2)]
        return {
            "x_all": (features["x_0"], features["x_1"], features["x_2"]),
            "laplacian_all": tuple(laplacians),
            "incidence_all": incidence_all,
        }
    if family == "scn2":
        return {
            "x_0": features["x_0"], "x_1": features["x_1"], "x_2": features["x_2"],
            **{
                f"laplacian_{r}": normalized_hodge_laplacian(data.neighborhood("hodge_laplacian", r))
                for r in range(3)
            },
        }
    return {  # hmc
        "x_0": features["x_0"], "x_1": features["x_1"], "x_2": features["x_2"],
        "adjacency_0": data.neighborhood("adjacency", 0),
        "adjacency_1": data.neighborhood("adjacency", 1),
        "coadjacency_2": data.neighborhood("coadjacency", 2),
        "incidence_1": data.neighborhood("incidence", 1),
        "incidence_2": data.neighborhood("incidence", 2),
    }
