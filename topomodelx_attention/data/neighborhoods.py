"""Neighbourhood matrices of a complex, built from its incidence matrices by sparse algebra.

Definitions (CT paper, Appendix B; TopoBench key names), for ranks ``r = 0..R`` and the
oriented boundary matrices ``B_r`` of shape ``(n_{r-1}, n_r)``:

* ``incidence_r``         ``|B_r|`` (unsigned, 0/1); ``incidence_0`` has shape ``(0, n_0)``.
* ``signed_incidence_r``  ``B_r`` (oriented, ±1), with ``B_r B_{r+1} = 0``.
* ``adjacency_r``         upper adjacency: off-diagonal of ``|B_{r+1}| |B_{r+1}|ᵀ``, the number of
  shared (r+1)-cells of two distinct r-cells.
* ``coadjacency_r``       lower adjacency: off-diagonal of ``|B_r|ᵀ |B_r|``, the number of shared
  (r-1)-cells.
* ``down_laplacian_r``    ``B_rᵀ B_r``.
* ``up_laplacian_r``      ``B_{r+1} B_{r+1}ᵀ``.
* ``hodge_laplacian_r``   ``B_rᵀ B_r + B_{r+1} B_{r+1}ᵀ``.
* ``vertex_incidence_r``  ``(n_0, n_r)`` 0/1: entry ``(v, c)`` is 1 when vertex ``v`` lies on the
  r-cell ``c``. For cell and simplicial complexes it is the pattern of ``|B_1| ... |B_r|``
  (:func:`vertex_cells`) and not stored by default; a combinatorial complex stores it, because
  there a cell need not be the union of the cells of the rank below (its vertex set cannot be
  recovered from the incidences of consecutive ranks, e.g. when rank ``r - 1`` is empty).

Adjacencies hold counts, as the CT paper (Appendix B, ``A = I Iᵀ`` with the diagonal zeroed)
and TopoNetX define them (minus TopoNetX's stored zero diagonal); sparse attention uses their
pattern, dense attention their values as the bias ``θ·N``, random walks their values as
weights (Appendix C.1). Laplacians are the true (signed) Hodge operators.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from topomodelx_attention.data.coo import Coo

__all__ = [
    "NEIGHBORHOODS",
    "ORIENTED_NEIGHBORHOODS",
    "build_neighborhoods",
    "check_neighborhoods",
    "row_rank",
    "shared_face_counts",
    "vertex_cells",
]

NEIGHBORHOODS: tuple[str, ...] = (
    "incidence",
    "signed_incidence",
    "adjacency",
    "coadjacency",
    "down_laplacian",
    "up_laplacian",
    "hodge_laplacian",
    "vertex_incidence",
)
"""Every neighbourhood name a :class:`ComplexData` can carry (key ``f"{name}_{rank}"``)."""

ORIENTED_NEIGHBORHOODS: frozenset[str] = frozenset(
    {"signed_incidence", "down_laplacian", "up_laplacian", "hodge_laplacian"}
)
"""Neighbourhoods that need an orientation (not available for combinatorial complexes)."""

CHAIN_DERIVED_NEIGHBORHOODS: frozenset[str] = frozenset({"vertex_incidence"})
"""Neighbourhoods an oriented complex does not store by default: the incidence chain gives them."""


def row_rank(name: str, rank: int) -> int:
    """Rank of the cells indexing the rows of the neighbourhood ``f"{name}_{rank}"``.

    Columns always index the cells of ``rank``. Block-diagonal batching offsets the rows by the
    cell counts of this rank and the columns by those of ``rank``.

    Parameters
    ----------
    name : str
        One of :data:`NEIGHBORHOODS`.
    rank : int
        Column rank.

    Returns
    -------
    int
        ``rank - 1`` for (signed) incidences (``-1`` for ``incidence_0``: no rows), ``0`` for
        ``vertex_incidence``, ``rank`` for the square neighbourhoods.
    """
    if name in ("incidence", "signed_incidence"):
        return rank - 1
    if name == "vertex_incidence":
        return 0
    return rank


def _name_of_key(name: str) -> str:
    """``"adjacency_0"`` → ``"adjacency"`` for a data key of a known neighbourhood, else ``name``."""
    if name in NEIGHBORHOODS:
        return name
    base, _, rank = name.rpartition("_")
    return base if rank.isdigit() and base in NEIGHBORHOODS else name


def check_neighborhoods(
    neighborhoods: Iterable[str] | None, oriented: bool = True, *, keys: bool = True
) -> tuple[str, ...]:
    """Validate a ``neighborhoods=`` argument and return it as a tuple.

    Parameters
    ----------
    neighborhoods : iterable of str or None
        Names from :data:`NEIGHBORHOODS`. ``None`` selects, for an oriented complex, all but
        :data:`CHAIN_DERIVED_NEIGHBORHOODS`; for an unoriented (combinatorial) complex, all
        unoriented ones, ``vertex_incidence`` included. With ``keys``, data keys with a rank
        suffix (``"adjacency_0"``, ``"down_laplacian_1"``: e.g. a model's
        ``neighborhood_keys``) select their name (:func:`build_neighborhoods` then builds
        that neighbourhood at the given ranks only).
    oriented : bool, default=True
        Whether the complex carries an orientation.
    keys : bool, default=True
        Accept data keys ``f"{name}_{rank}"`` for ``name``.

    Returns
    -------
    tuple of str
        The selected names, in the canonical order of :data:`NEIGHBORHOODS`.
    """
    if neighborhoods is None:
        if oriented:
            selected = set(NEIGHBORHOODS) - CHAIN_DERIVED_NEIGHBORHOODS
        else:
            selected = set(NEIGHBORHOODS) - ORIENTED_NEIGHBORHOODS
    else:
        if isinstance(neighborhoods, str):
            raise TypeError(
                f"neighborhoods must be a list of names, got the string {neighborhoods!r}; "
                f"write [{neighborhoods!r}]"
            )
        selected = {_name_of_key(name) if keys else name for name in neighborhoods}
        unknown = selected - set(NEIGHBORHOODS)
        if unknown:
            raise ValueError(
                f"unknown neighborhoods {sorted(unknown)}; valid names are {list(NEIGHBORHOODS)}"
            )
        if not oriented and selected & ORIENTED_NEIGHBORHOODS:
            raise ValueError(
                f"neighborhoods {sorted(selected & ORIENTED_NEIGHBORHOODS)} need an orientation, "
                "which a combinatorial complex does not have; choose among "
                f"{sorted(set(NEIGHBORHOODS) - ORIENTED_NEIGHBORHOODS)}"
            )
    return tuple(name for name in NEIGHBORHOODS if name in selected)


def _as_coo(matrix: sp.spmatrix | Coo) -> Coo:
    return matrix if isinstance(matrix, Coo) else Coo.from_scipy(matrix)


def build_neighborhoods(
    boundaries: Sequence[sp.spmatrix | Coo],
    shape: Sequence[int],
    neighborhoods: Iterable[str] | None = None,
    oriented: bool = True,
    dtype: torch.dtype = torch.float32,
    vertex_incidence: Sequence[sp.spmatrix | Coo] | None = None,
) -> dict[str, Tensor]:
    """Compute the requested neighbourhood matrices of every rank.

    Products are joins on the shared index (:meth:`Coo.matmul`): signed for Laplacians,
    unsigned for (co)adjacency counts.

    Parameters
    ----------
    boundaries : sequence of scipy.sparse matrices or Coo
        ``boundaries[r - 1]`` is ``B_r`` of shape ``(n_{r-1}, n_r)`` for ``r = 1..R``
        (signed when ``oriented``; only the nonzero pattern is used otherwise).
    shape : sequence of int
        Cells per rank ``(n_0, ..., n_R)``; ``len(shape) == len(boundaries) + 1``.
    neighborhoods : iterable of str, optional
        Names from :data:`NEIGHBORHOODS` (default: all that the orientation allows), built at
        every rank, and / or data keys ``f"{name}_{rank}"`` (e.g. a model's
        ``neighborhood_keys``), built at those ranks only.
    oriented : bool, default=True
        Whether ``boundaries`` are oriented. Without orientation, signed incidences and
        Laplacians cannot be built.
    dtype : torch.dtype, default=torch.float32
        Value dtype of the tensors.
    vertex_incidence : sequence of scipy.sparse matrices or Coo, optional
        ``vertex_incidence[r]`` of shape ``(n_0, n_r)`` for ``r = 0..R``: the vertices of every
        cell (only the nonzero pattern is used). Needed for ``"vertex_incidence"`` when the
        cells are not unions of the cells one rank below (combinatorial complexes); by default
        it is the pattern of ``|B_1| ... |B_r|``.

    Returns
    -------
    dict of str to torch.Tensor
        Keys ``f"{name}_{r}"`` for every selected name and every rank ``r = 0..R`` (only the
        given ranks of a name selected by data keys alone); coalesced ``torch.sparse_coo``
        tensors with no explicit zeros.
    """
    names = set(check_neighborhoods(neighborhoods, oriented))
    ranks = _requested_ranks(neighborhoods)
    shape = [int(n) for n in shape]
    if len(boundaries) != len(shape) - 1:
        raise ValueError(
            f"expected {len(shape) - 1} boundary matrices for shape {shape}, got {len(boundaries)}"
        )
    signed: list[Coo] = []
    for r, matrix in enumerate(boundaries, start=1):
        coo = _as_coo(matrix)
        if coo.shape != (shape[r - 1], shape[r]):
            raise ValueError(
                f"boundary matrix B_{r} has shape {coo.shape}, expected "
                f"(n_{r - 1}, n_{r}) = ({shape[r - 1]}, {shape[r]})"
            )
        signed.append(coo if oriented else coo.pattern())
    max_rank = len(shape) - 1
    vertex_sets: list[Coo] = []
    if "vertex_incidence" in names and vertex_incidence is not None:
        if len(vertex_incidence) != len(shape):
            raise ValueError(
                f"vertex_incidence needs one matrix per rank 0..{max_rank}, got {len(vertex_incidence)}"
            )
        for r, matrix in enumerate(vertex_incidence):
            coo = _as_coo(matrix)
            if coo.shape != (shape[0], shape[r]):
                raise ValueError(
                    f"vertex_incidence[{r}] has shape {coo.shape}, expected (n_0, n_{r}) = "
                    f"({shape[0]}, {shape[r]})"
                )
            vertex_sets.append(coo.pattern())
    elif "vertex_incidence" in names:
        vertex_sets = [vertex_cells(signed, r, shape[0]) for r in range(max_rank + 1)]

    def square_empty(n: int) -> Coo:
        return Coo.build([], [], [], (n, n))

    mats: dict[str, Coo] = {}
    for r in range(max_rank + 1):
        here = {name for name in names if ranks.get(name) is None or r in ranks[name]}
        # B_r^T B_r (down Laplacian, lower-adjacency counts) and B_{r+1} B_{r+1}^T (up), one join each
        need_lower = bool(here & {"coadjacency", "down_laplacian", "hodge_laplacian"})
        need_upper = bool(here & {"adjacency", "up_laplacian", "hodge_laplacian"})
        empty = square_empty(shape[r])
        lower = upper = (empty, empty)
        if need_lower and r > 0:
            lower = signed[r - 1].T.product_and_counts(signed[r - 1])
        if need_upper and r < max_rank:
            upper = signed[r].product_and_counts(signed[r].T)
        boundary = signed[r - 1] if r > 0 else Coo.build([], [], [], (0, shape[0]))
        candidates = {
            "incidence": boundary.pattern,
            "signed_incidence": lambda b=boundary: b,
            "adjacency": lambda u=upper: u[1],
            "coadjacency": lambda lo=lower: lo[1],
            "down_laplacian": lambda lo=lower: lo[0],
            "up_laplacian": lambda u=upper: u[0],
            "hodge_laplacian": lambda lo=lower, u=upper: lo[0].add(u[0]),
            "vertex_incidence": lambda r=r: vertex_sets[r],
        }
        for name in NEIGHBORHOODS:
            if name in here:
                mats[f"{name}_{r}"] = candidates[name]()
    return Coo.many_to_torch(mats, dtype)


def _requested_ranks(neighborhoods: Iterable[str] | None) -> dict[str, set[int] | None]:
    """Per name selected by data keys alone, the ranks of those keys (``None``: every rank)."""
    ranks: dict[str, set[int] | None] = {}
    for entry in neighborhoods or ():
        name = _name_of_key(entry)
        if name == entry:  # a bare name: every rank
            ranks[name] = None
        elif name not in ranks or ranks[name] is not None:
            ranks.setdefault(name, set()).add(int(entry.rpartition("_")[2]))
    return ranks


def shared_face_counts(incidence: sp.spmatrix | Coo, upper: bool) -> Coo:
    """Count the shared cofaces (``upper``) or faces (lower) of distinct cells.

    Parameters
    ----------
    incidence : scipy.sparse matrix or Coo
        For ``upper=True``: ``B_{r+1}`` of shape ``(n_r, n_{r+1})``; for ``upper=False``:
        ``B_r`` of shape ``(n_{r-1}, n_r)``. Signs are ignored.
    upper : bool
        Count shared cofaces (upper adjacency) or shared faces (lower adjacency).

    Returns
    -------
    Coo, shape = (n_r, n_r)
        Off-diagonal counts — the values of ``adjacency_r`` / ``coadjacency_r`` (CT paper,
        Appendix B; the weights ``wA`` of Appendix C.1).
    """
    incidence = _as_coo(incidence).pattern()
    if upper:
        return incidence.product_and_counts(incidence.T)[1]
    return incidence.T.product_and_counts(incidence)[1]


def vertex_cells(boundaries: Sequence[sp.spmatrix | Coo], rank: int, num_vertices: int) -> Coo:
    """0/1 matrix telling which vertices lie on each cell of ``rank``.

    Parameters
    ----------
    boundaries : sequence of scipy.sparse matrices or Coo
        ``[B_1, ..., B_R]`` (signs ignored).
    rank : int
        Cell rank (``0`` gives the identity).
    num_vertices : int
        ``n_0``.

    Returns
    -------
    Coo, shape = (n_0, n_rank)
        Entry ``(v, c)`` is 1 when ``v`` is a vertex of cell ``c`` (pattern of
        ``|B_1| |B_2| ... |B_rank|``).
    """
    product = Coo.build(np.arange(num_vertices), np.arange(num_vertices), np.ones(num_vertices),
                        (num_vertices, num_vertices))
    for r in range(1, rank + 1):
        product = product.matmul(_as_coo(boundaries[r - 1]).pattern())
    return product.pattern()
