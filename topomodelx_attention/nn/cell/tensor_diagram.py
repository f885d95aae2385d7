"""Tensor diagrams of the Cellular Transformer (§4.3): arrows ``source → target`` through a neighbourhood.

A tensor diagram lists the attention blocks of a layer: every :class:`Arrow` joins a source rank
to a target rank through a ``ComplexData`` neighbourhood (``"incidence_1"``, its transpose
``"incidence_1.T"``, ``"adjacency_0"``, ...). :func:`default_tensor_diagram` is the paper's
(Figure 2), :func:`parse_tensor_diagram` reads the textual / tuple forms of configs, and
:func:`block_neighborhood` assembles the block matrix of general attention (Eq. 3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from topomodelx_attention.data import to_coalesced_coo

__all__ = [
    "GLOBAL",
    "Arrow",
    "ArrowNeighborhoods",
    "block_keys",
    "block_neighborhood",
    "default_tensor_diagram",
    "parse_tensor_diagram",
]

_ARROW = re.compile(r"^(?P<name>[a-z_]+)_(?P<rank>\d+)(?P<t>\.T)?$")

#: Neighbourhood name of a global arrow ``r -> r : all_r``: every cell of rank ``r`` attends to
#: every cell of rank ``r`` of the same complex (no mask; GPS-style global attention beside
#: the local arrows).
GLOBAL = "all"


@dataclass(frozen=True)
class Arrow:
    """One arrow ``source → target`` of a tensor diagram with its neighbourhood ``N``.

    An arrow is identified by ``(source, target, neighborhood, transpose)``: a diagram may hold
    several arrows between the same ranks through different neighbourhoods (e.g. CAN-style
    ``1 → 1`` through ``adjacency_1`` and through ``coadjacency_1``).

    Attributes
    ----------
    source, target : int
        Source rank ``ks`` and target rank ``kt``.
    neighborhood : str
        Key of the ``ComplexData`` neighbourhood (e.g. ``"incidence_1"``).
    transpose : bool
        Use ``Nᵀ``: the attention mask must have shape ``(n_kt, n_ks)``.
    """

    source: int
    target: int
    neighborhood: str
    transpose: bool = False

    @property
    def is_global(self) -> bool:
        """Whether the arrow attends to every cell of its rank in the same complex (``all_r``)."""
        return self.neighborhood.rpartition("_")[0] == GLOBAL

    @property
    def name(self) -> str:
        """Ranks of the arrow, e.g. ``"1->0"`` (not unique when two arrows join the same ranks)."""
        return f"{self.source}->{self.target}"

    @property
    def label(self) -> str:
        """Full description, e.g. ``"0->1:incidence_1.T"`` (unique in a diagram)."""
        return f"{self.name}:{self.neighborhood}{'.T' if self.transpose else ''}"

    def matrix(self, neighborhoods: Mapping[str, Tensor]) -> Tensor:
        """Return the ``(n_target, n_source)`` neighbourhood of this arrow.

        Parameters
        ----------
        neighborhoods : mapping of str to torch.Tensor
            Neighbourhoods by key: sparse tensors of any layout (COO, CSR, CSC, BSR) or dense
            tensors (zeros are non-neighbours).

        Returns
        -------
        torch.Tensor, shape = (n_target, n_source)
            ``N`` or its transpose, as a coalesced sparse COO tensor.
        """
        if self.is_global:
            raise ValueError(
                f"arrow {self.label} attends to every cell of rank {self.source} of its complex: "
                "it has no neighbourhood matrix"
            )
        if self.neighborhood not in neighborhoods:
            raise ValueError(
                f"arrow {self.label} needs the neighbourhood {self.neighborhood!r}, which was not "
                f"given (available: {sorted(neighborhoods)})"
            )
        matrix = to_coalesced_coo(neighborhoods[self.neighborhood], self.neighborhood)
        return matrix.t().coalesce() if self.transpose else matrix


class ArrowNeighborhoods(dict):
    """Neighbourhood of every arrow, converted once per forward: ``{Arrow: (n_t, n_s) COO}``.

    Built by :meth:`CellularTransformerLayer.prepare_neighborhoods`; a stack of layers with the
    same tensor diagram shares it (the model converts once, not once per layer).
    """


def default_tensor_diagram(max_rank: int) -> list[Arrow]:
    """Return the paper's tensor diagram (Figure 2, §4.2.1) for ranks ``0..max_rank``.

    ``0 → 0`` through the upper adjacency, ``k → k`` through the lower adjacency for
    ``k > 0``, ``k+1 → k`` through the unsigned incidence ``incidence_{k+1}`` and ``k → k+1``
    through its transpose.

    Parameters
    ----------
    max_rank : int
        Highest rank.

    Returns
    -------
    list of Arrow
        The arrows.
    """
    arrows = [Arrow(0, 0, "adjacency_0")]
    for k in range(1, max_rank + 1):
        arrows.append(Arrow(k, k, f"coadjacency_{k}"))
    for k in range(max_rank):
        arrows.append(Arrow(k + 1, k, f"incidence_{k + 1}"))
        arrows.append(Arrow(k, k + 1, f"incidence_{k + 1}", transpose=True))
    return arrows


def parse_tensor_diagram(
    diagram: Sequence[Arrow | tuple | str] | None, max_rank: int
) -> list[Arrow]:
    """Normalise a tensor-diagram description into a list of :class:`Arrow`.

    Parameters
    ----------
    diagram : sequence or None
        ``None`` for :func:`default_tensor_diagram`; otherwise items that are :class:`Arrow`,
        tuples ``(source, target, "key")`` where ``"key"`` may end in ``.T`` for a transpose
        (e.g. ``(0, 1, "incidence_1.T")``), or strings ``"0->1:incidence_1.T"``. Several arrows
        may join the same ranks through different neighbourhoods. ``"r->r:all_r"`` is a global
        arrow (:data:`GLOBAL`): all cells of rank ``r`` of a complex attend to each other,
        unmasked (pairwise attention only).
    max_rank : int
        Highest rank the layer handles.

    Returns
    -------
    list of Arrow
        Validated arrows (shapes are checked against the neighbourhood names).
    """
    if diagram is None:
        return default_tensor_diagram(max_rank)
    arrows: list[Arrow] = []
    for item in diagram:
        if isinstance(item, Arrow):
            arrow = item
        else:
            if isinstance(item, str):
                match = re.match(r"^\s*(\d+)\s*->\s*(\d+)\s*:\s*(\S+)\s*$", item)
                if not match:
                    raise ValueError(
                        f"cannot parse arrow {item!r}; write e.g. '0->1:incidence_1.T'"
                    )
                item = (int(match.group(1)), int(match.group(2)), match.group(3))
            if isinstance(item, list):
                item = tuple(item)  # YAML gives lists
            if not (isinstance(item, tuple) and len(item) == 3):
                raise TypeError(
                    f"arrow {item!r} must be an Arrow, (source, target, key) or a string"
                )
            source, target, key = item
            transpose = key.endswith(".T")
            arrow = Arrow(int(source), int(target), key[:-2] if transpose else key, transpose)
        match = _ARROW.match(arrow.neighborhood + (".T" if arrow.transpose else ""))
        if not match:
            raise ValueError(
                f"arrow {arrow.name}: {arrow.neighborhood!r} is not a neighbourhood key"
            )
        for rank in (arrow.source, arrow.target):
            if not 0 <= rank <= max_rank:
                raise ValueError(f"arrow {arrow.name} uses rank {rank} outside 0..{max_rank}")
        name, rank = match.group("name"), int(match.group("rank"))
        if name == GLOBAL and (arrow.transpose or not arrow.source == arrow.target == rank):
            raise ValueError(
                f"arrow {arrow.label}: a global arrow joins a rank to itself, written "
                f"'{rank}->{rank}:{GLOBAL}_{rank}'"
            )
        rows, cols = (rank - 1, rank) if "incidence" in name else (rank, rank)
        if arrow.transpose:
            rows, cols = cols, rows
        if (rows, cols) != (arrow.target, arrow.source):
            raise ValueError(
                f"arrow {arrow.name} needs an (n_{arrow.target}, n_{arrow.source}) matrix, but "
                f"{arrow.neighborhood}{'.T' if arrow.transpose else ''} is (n_{rows}, n_{cols})"
            )
        if arrow in arrows:
            raise ValueError(f"arrow {arrow.label} appears twice in the tensor diagram")
        arrows.append(arrow)
    if not arrows:
        raise ValueError("the tensor diagram has no arrow")
    return arrows


def block_keys(arrows: Sequence[Arrow]) -> list[str]:
    """Return the block (module) key of every arrow: ``"1->0"``, or ``"1->1:adjacency_1"`` when ranks repeat."""
    counts: dict[str, int] = {}
    for arrow in arrows:
        counts[arrow.name] = counts.get(arrow.name, 0) + 1
    return [
        arrow.name if counts[arrow.name] == 1 else arrow.label.replace(".T", "_T")  # no "." in keys
        for arrow in arrows
    ]


def block_neighborhood(
    arrows: Sequence[Arrow],
    neighborhoods: ArrowNeighborhoods,
    offsets: Sequence[int],
    device: torch.device,
) -> Tensor:
    """Assemble the block matrix ``N`` of Eq. 3: block ``(kt, ks)`` is the sum of ``N_{ks→kt}``."""
    total = offsets[-1]
    rows, cols, vals = [], [], []
    for arrow in arrows:
        matrix = neighborhoods[arrow]
        expected = (
            offsets[arrow.target + 1] - offsets[arrow.target],
            offsets[arrow.source + 1] - offsets[arrow.source],
        )
        if tuple(matrix.shape) != expected:
            raise ValueError(
                f"neighbourhood of arrow {arrow.label} has shape {tuple(matrix.shape)}, expected {expected}"
            )
        idx = matrix.indices().to(device)
        rows.append(idx[0] + offsets[arrow.target])
        cols.append(idx[1] + offsets[arrow.source])
        vals.append(matrix.values().to(device))
    if not rows:
        empty = torch.zeros((2, 0), dtype=torch.long, device=device)
        return torch.sparse_coo_tensor(empty, torch.zeros(0, device=device), (total, total))
    return torch.sparse_coo_tensor(
        torch.stack([torch.cat(rows), torch.cat(cols)]), torch.cat(vals), (total, total)
    ).coalesce()
