"""The structure of a batch as a Cellular Transformer layer reads it, built once per forward.

:class:`CellStructure` holds everything a layer stack derives from the *structure* of a batch
(neighbourhoods as index tensors, the joined index of the fused sparse arrows, the padded
layouts of the kernels that need them, the block neighbourhood of general attention, the
relative random-walk features of the global arrows); the functions here build its parts from
the neighbourhood matrices, for :meth:`~.CellularTransformerLayer.prepare`.

Neighbourhood values: the ``sparse`` kind uses a neighbourhood as a **mask** (its pattern), the
``dense`` kind adds its values as a bias ``θ·N``; :func:`arrow_neighborhoods` warns when a
matrix used as such a bias has negative entries (a signed Laplacian or incidence makes the bias
depend on the cells' orientations).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from topomodelx_attention.data import to_coalesced_coo
from topomodelx_attention.nn.attention import (
    NeighborhoodIndex,
    PaddedLayout,
    kernel_class,
    padded_layout,
    prepare_neighborhood,
    random_walk_pair_features,
    reads_neighborhood,
)
from topomodelx_attention.nn.attention.fused import FusedNeighborhood, prepare_fused_index
from topomodelx_attention.nn.attention.plan import stable_argsort
from topomodelx_attention.nn.cell.tensor_diagram import (
    Arrow,
    ArrowNeighborhoods,
    block_neighborhood,
)

__all__ = [
    "CellStructure",
    "arrow_indices",
    "arrow_neighborhoods",
    "checked_batch",
    "converted_neighborhoods",
    "fused_index",
    "general_structure",
    "relative_features",
    "transposed",
]


@dataclass(frozen=True)
class CellStructure:
    """Everything a layer stack derives from the structure of a batch, built once per forward.

    Built by :meth:`CellularTransformerLayer.prepare` (eagerly: sparse tensors, index checks and
    data-dependent sizes), shared by every layer of a stack with the same configuration, and
    passed to :meth:`CellularTransformerLayer.forward` in place of the neighbourhoods. It holds
    only index tensors and layouts, so a ``torch.compile``-d stack traces without graph breaks.

    Attributes
    ----------
    neighborhoods : tuple of (NeighborhoodIndex or None)
        Per arrow of the tensor diagram (same order): its ``(n_target, n_source)``
        neighbourhood (sparse mask, or the θ·N bias of the dense kind) for arrows attended one
        by one; ``None`` for kernels without neighbourhood (linear), arrows of the fused sparse
        call, general attention, or an arrow with an empty rank.
    fused : FusedNeighborhood or None
        Joined edge lists (and CPU plan) of the sparse arrows run in one call (pairwise
        attention; :func:`~topomodelx_attention.nn.attention.fused.prepare_fused`).
    layouts : tuple of PaddedLayout
        Per rank: padding of the cells per complex (for arrows whose kernel needs a layout;
        empty when no arrow needs it).
    general : NeighborhoodIndex or None
        Block neighbourhood of Eq. 3 on the cells of all ranks, rank-major (general attention
        with a kernel that reads a neighbourhood).
    general_layout : PaddedLayout or None
        Padding of the cells of all ranks per complex (general attention with a kernel that
        needs a layout).
    output_ranks : tuple of int or None
        The ranks a layer called with ``ranks=output_ranks`` updates (the last layer of a
        model that reads only its readout ranks); ``None``: prepared for full layers only.
    output_fused : FusedNeighborhood or None
        Joined edge lists of the fused sparse arrows into ``output_ranks`` (the fused call of
        such a layer), sliced out of ``fused``
        (:func:`~topomodelx_attention.nn.attention.fused.fused_subset`); ``None`` when none of
        them attends.
    relative : tuple of (torch.Tensor or None)
        Per arrow (same order): the relative random-walk pair features of a global arrow with
        ``rrwp_steps > 0``, ``(num_complexes, rrwp_steps, length, length)`` on the padded grid
        of its rank (:func:`~topomodelx_attention.nn.attention.random_walk_pair_features`);
        ``None`` for the other arrows and for an empty rank; empty when the layer has no such
        bias.
    """

    neighborhoods: tuple[NeighborhoodIndex | None, ...]
    fused: FusedNeighborhood | None
    layouts: tuple[PaddedLayout, ...]
    general: NeighborhoodIndex | None
    general_layout: PaddedLayout | None
    output_ranks: tuple[int, ...] | None = None
    output_fused: FusedNeighborhood | None = None
    relative: tuple[Tensor | None, ...] = ()



def checked_batch(
    batch: Sequence[Tensor], max_rank: int, num_complexes: int | None
) -> tuple[list[Tensor], int, tuple[int, ...]]:
    """Check the per-rank batch vectors; return them, the number of complexes and the sizes.

    Parameters
    ----------
    batch : sequence of torch.Tensor
        ``batch[r]`` of shape ``(n_r,)`` for ``r = 0..max_rank``.
    max_rank : int
        Highest rank.
    num_complexes : int, optional
        Number of complexes (inferred when ``None``).

    Returns
    -------
    batch : list of torch.Tensor
        The vectors.
    num_complexes : int
        The number of complexes.
    sizes : tuple of int
        Cells of every rank.
    """
    batch = list(batch)
    if len(batch) != max_rank + 1 or not all(isinstance(b, Tensor) and b.dim() == 1 for b in batch):
        raise ValueError(f"batch must hold one (n_r,) vector per rank 0..{max_rank}")
    if num_complexes is None:
        num_complexes = max((int(b.max()) + 1 for b in batch if b.numel()), default=1)
    return batch, num_complexes, tuple(int(b.shape[0]) for b in batch)


def converted_neighborhoods(
    neighborhoods: Mapping[str, Tensor], arrows: Sequence[Arrow]
) -> dict[str, Tensor]:
    """Every neighbourhood ``arrows`` read, by key, as coalesced COO (not transposed)."""
    converted: dict[str, Tensor] = {}
    for arrow in arrows:
        if arrow.neighborhood not in converted:
            converted[arrow.neighborhood] = replace(arrow, transpose=False).matrix(neighborhoods)
    return converted


def arrow_neighborhoods(
    converted: Mapping[str, Tensor], arrows: Sequence[Arrow], bias_arrows: Sequence[Arrow]
) -> ArrowNeighborhoods:
    """Return the ``(n_target, n_source)`` matrix of each of ``arrows``.

    Warns (``UserWarning``) when the matrix of one of ``bias_arrows`` (whose values enter the
    logits as ``θ·N``) has negative entries.
    """
    prepared = ArrowNeighborhoods()
    for arrow in arrows:
        matrix = converted[arrow.neighborhood]
        prepared[arrow] = transposed(matrix) if arrow.transpose else matrix
    if not torch.compiler.is_compiling():
        for arrow in bias_arrows:
            if arrow not in prepared:
                continue
            values = prepared[arrow].values()
            if values.numel() and bool((values < 0).any()):
                warnings.warn(
                    f"the neighbourhood {arrow.neighborhood!r} of arrow {arrow.label} has negative "
                    "entries: dense attention adds θ·N to the logits, so a signed matrix (e.g. a "
                    "TopoNetX Hodge/up/down Laplacian or a signed incidence) gives a bias that "
                    "depends on the cells' orientations. Use an unsigned neighbourhood "
                    "(adjacency_r, coadjacency_r, incidence_r) or kind='sparse' (a mask: values "
                    "ignored).",
                    UserWarning,
                    stacklevel=3,
                )
    return prepared


def transposed(matrix: Tensor) -> Tensor:
    """Transpose of a coalesced sparse COO matrix, coalesced (same as ``matrix.t().coalesce()``).

    On CPU the entries are reordered by a linear-time stable radix sort of the column index
    (stable: the rows of every column stay in order, which is the coalesced order of the
    transpose) instead of ``coalesce``'s comparison sort.
    """
    index = matrix.indices()
    if index.device.type != "cpu" or index.shape[1] < 2:
        return matrix.t().coalesce()
    order = stable_argsort(index[1].contiguous(), int(matrix.shape[1]))
    return torch.sparse_coo_tensor(
        index.flip(0).index_select(1, order),
        matrix.values().index_select(0, order),
        (int(matrix.shape[1]), int(matrix.shape[0])),
        is_coalesced=True,
        check_invariants=False,  # a permutation of valid entries: valid and coalesced
    )


def general_structure(
    arrows: Sequence[Arrow],
    prepared: ArrowNeighborhoods,
    batch: Sequence[Tensor],
    num_complexes: int,
    kind: str,
) -> tuple[NeighborhoodIndex | None, PaddedLayout | None]:
    """Block neighbourhood (Eq. 3) and layout of general attention on the cells of all ranks.

    Returns
    -------
    general : NeighborhoodIndex or None
        The block neighbourhood, rank-major (``None`` for a kernel that reads none, or no cell).
    layout : PaddedLayout or None
        Padding of the cells of all ranks per complex (``None`` for a kernel without layout).
    """
    sizes = [int(b.shape[0]) for b in batch]
    if not sum(sizes):
        return None, None
    device = batch[0].device
    general = layout = None
    if reads_neighborhood(kind):
        offsets = [0]
        for n in sizes:
            offsets.append(offsets[-1] + n)
        matrix = block_neighborhood(arrows, prepared, offsets, device)
        general = prepare_neighborhood(
            matrix, offsets[-1], offsets[-1], name="block neighbourhood (Eq. 3)"
        )
    if kernel_class(kind).needs_layout:  # tokens in rank-major order: no sorting needed
        layout = padded_layout(torch.cat(batch).to(device), num_complexes)
    return general, layout


def arrow_indices(
    arrows: Sequence[Arrow],
    indexed: Sequence[Arrow],
    prepared: ArrowNeighborhoods,
    sizes: Sequence[int],
    device: torch.device,
) -> tuple[NeighborhoodIndex | None, ...]:
    """Per arrow: the prepared neighbourhood of the ``indexed`` arrows (``None`` otherwise).

    ``indexed``: the arrows attended one by one whose kernel reads a neighbourhood; an arrow
    with an empty rank gets ``None`` too.
    """
    return tuple(
        prepare_neighborhood(
            prepared[arrow],
            sizes[arrow.target],
            sizes[arrow.source],
            device=device,
            name=arrow.label,
        )
        if arrow in indexed and sizes[arrow.source] and sizes[arrow.target]
        else None
        for arrow in arrows
    )


def fused_index(
    arrows: Sequence[Arrow],
    prepared: ArrowNeighborhoods,
    converted: Mapping[str, Tensor],
    sizes: Sequence[int],
    heads: int,
    device: torch.device,
) -> FusedNeighborhood | None:
    """Join the edge lists of the fused ``arrows`` (``None`` when there are none).

    An arrow not in ``prepared`` reads its untransposed matrix of ``converted``, with the
    index rows swapped when it is transposed (no transpose is built).
    """
    if not arrows:
        return None
    swapped = [a not in prepared and a.transpose for a in arrows]
    return prepare_fused_index(
        [(a.source, a.target) for a in arrows],
        [prepared[a] if a in prepared else converted[a.neighborhood] for a in arrows],
        sizes,
        heads,
        device=device,
        names=[a.label for a in arrows],
        transposes=swapped,
    )


def relative_features(
    arrow: Arrow,
    neighborhoods: Mapping[str, Tensor] | ArrowNeighborhoods,
    converted: Mapping[str, Tensor],
    layout: PaddedLayout,
    sizes: Sequence[int],
    steps: int,
    dtype: torch.dtype,
) -> Tensor | None:
    """Relative random-walk features of a global arrow's rank (``None`` for an empty rank).

    The walk is on ``adjacency_r`` (:func:`~topomodelx_attention.nn.attention.random_walk_pair_features`);
    ``converted``: the matrices already made coalesced COO for this batch, reused rather than
    converted again.
    """
    rank = arrow.source
    if sizes[rank] == 0:
        return None
    key = f"adjacency_{rank}"
    if isinstance(neighborhoods, ArrowNeighborhoods):
        matrix = next(
            (m for a, m in neighborhoods.items() if a.neighborhood == key and not a.transpose),
            None,
        )
        if matrix is None:
            raise ValueError(
                f"rrwp_steps={steps} walks on {key!r}, which the prepared "
                "neighbourhoods do not hold: pass the neighbourhoods by key"
            )
    elif key not in neighborhoods:
        raise ValueError(
            f"rrwp_steps={steps}: the global arrow {arrow.label} walks on {key!r}, "
            f"which was not given (available: {sorted(neighborhoods)})"
        )
    elif key in converted:
        matrix = converted[key]
    else:
        matrix = to_coalesced_coo(neighborhoods[key], key)
    return random_walk_pair_features(matrix, layout, steps, dtype=dtype, name=key)
