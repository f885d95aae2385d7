"""A complex that does not change, prepared once for a Cellular Transformer.

:meth:`CellularTransformer.prepare` derives from a batch everything its structure gives: the
neighbourhoods converted and checked, the edge lists of the fused arrows joined and sorted, the
CPU plan laid out (with its transposed pattern for the gradients), the padding layouts and the
relative random-walk features. For a complex that is used again and again on its own — the one
large complex of a transductive node task, trained full batch for hundreds of epochs — that work
is the same at every step. :class:`PrepareStructure` does it once and stores the result with the
complex (key :data:`~topomodelx_attention.data.PREPARED_STRUCTURE`), keyed by what it depends on
(:meth:`CellularTransformerLayer.structure_key`: tensor diagram, attention, kind, heads, output
ranks). The model's ``prepare`` then reuses it; a model with another key refuses it with a
``ValueError`` naming the fields that differ.

A prepared structure serves a complex alone (a batch of one). Batches of several complexes
are prepared batch by batch: a batch that carries several stored structures is refused, as is
a complex whose cells or neighbourhoods changed after the transform (a sub-complex of the
sampler, or an edited complex), and one moved to another device after it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from topomodelx_attention.data import PREPARED_STRUCTURE, ComplexData
from topomodelx_attention.nn.cell.structure import CellStructure

__all__ = ["PrepareStructure", "PreparedStructure", "stored_structure"]


@dataclass(frozen=True)
class PreparedStructure:
    """The :class:`CellStructure` of one complex, with what it was built for.

    Attributes
    ----------
    key : str
        :meth:`CellularTransformerLayer.structure_key` of the model that built it.
    counts : tuple of int
        Cells per rank of the complex.
    entries : tuple of (str, int)
        Every neighbourhood the model reads and its stored entries (a changed complex differs).
    device : torch.device
        Device of the complex and of the structure.
    structure : CellStructure
        Built with the gradients' transposed plan, so it serves training and evaluation.
    """

    key: str
    counts: tuple[int, ...]
    entries: tuple[tuple[str, int], ...]
    device: torch.device
    structure: CellStructure


def _entries(model: nn.Module, data: ComplexData) -> tuple[tuple[str, int], ...]:
    """``(key, stored entries)`` of every neighbourhood ``model`` reads in ``data``."""
    out = []
    for key in model.neighborhood_keys:
        name, _, rank = key.rpartition("_")
        matrix = data.neighborhood(name, int(rank))
        out.append((key, int(matrix._nnz()) if matrix.is_sparse else int(matrix.count_nonzero())))
    return tuple(out)


def _differing(key: str, expected: str) -> list[str]:
    """Return the ``name=value`` fields of ``key`` that differ from ``expected``."""
    ours = dict(field.split("=", 1) for field in expected.split("; "))
    theirs = dict(field.split("=", 1) for field in key.split("; "))
    return [
        f"{name}: prepared {theirs.get(name)!s}, this model {ours.get(name)!s}"
        for name in sorted(set(ours) | set(theirs))
        if ours.get(name) != theirs.get(name)
    ]


def stored_structure(model: nn.Module, data: ComplexData) -> CellStructure | None:
    """Return the structure :class:`PrepareStructure` stored with ``data`` for ``model``, if any.

    Parameters
    ----------
    model : CellularTransformer
        The model about to prepare ``data``.
    data : ComplexData
        A complex or a batch.

    Returns
    -------
    CellStructure or None
        ``None`` when ``data`` carries no prepared structure.

    Raises
    ------
    ValueError
        The structure was prepared for another model (the differing fields are named), ``data``
        batches several complexes that carry one, or the complex changed (cells, neighbourhood
        entries, device) since the transform.
    """
    stored: Any = data._store._mapping.get(PREPARED_STRUCTURE)
    if stored is None:
        return None
    if isinstance(stored, list):  # collated: one per complex
        if len(stored) != 1:
            raise ValueError(
                f"a batch of {len(stored)} complexes carries prepared structures: a prepared "
                "structure serves one complex alone (full batch); batches of several complexes "
                "are prepared batch by batch, so do not apply PrepareStructure to them"
            )
        stored = stored[0]
    if not isinstance(stored, PreparedStructure):
        raise TypeError(
            f"{PREPARED_STRUCTURE!r} holds a {type(stored).__name__}, not a PreparedStructure: "
            "the key is written by PrepareStructure only"
        )
    expected = model.layers[0].structure_key(model._last_layer_ranks)
    if stored.key != expected:
        raise ValueError(
            "the complex carries a structure prepared for another model ("
            + "; ".join(_differing(stored.key, expected))
            + "): apply this model's structure_transform() to the complex, or delete "
            f"data.{PREPARED_STRUCTURE}"
        )
    counts = tuple(data.num_cells(r) for r in range(model.max_rank + 1))
    if counts != stored.counts or _entries(model, data) != stored.entries:
        raise ValueError(
            f"the complex changed after PrepareStructure (cells per rank {list(counts)}, prepared "
            f"for {list(stored.counts)}; or neighbourhood entries differ): delete "
            f"data.{PREPARED_STRUCTURE} and apply the transform again"
        )
    device = data[f"batch_{0}"].device
    if device != stored.device:
        raise ValueError(
            f"the complex is on {device} but its structure was prepared on {stored.device}: "
            "apply PrepareStructure after moving the complex to its device"
        )
    return stored.structure


class PrepareStructure:
    """Prepare a complex's structure once for a Cellular Transformer (an opt-in transform).

    ``PrepareStructure(model)(data)`` returns a shallow copy of ``data`` carrying
    :class:`PreparedStructure` under :data:`~topomodelx_attention.data.PREPARED_STRUCTURE`:
    everything ``model.prepare`` derives from the complex's structure, built once (and
    checked once). ``model(data)`` then equals ``model`` on the complex without it and skips
    that work at every call. Use it for a complex trained or evaluated alone (a transductive
    task's graph, full batch); a model of another configuration refuses it
    (:func:`stored_structure`). :meth:`CellularTransformer.structure_transform` builds it.

    Parameters
    ----------
    model : CellularTransformer
        The model the structure is for (only its configuration is read, not its parameters).

    Examples
    --------
    >>> prepared = model.structure_transform()(complex_)  # doctest: +SKIP
    >>> for epoch in range(500):  # doctest: +SKIP
    ...     loss = loss_fn(model(prepared)[mask], y[mask])
    """

    def __init__(self, model: nn.Module) -> None:
        if not hasattr(model, "layers") or not hasattr(model.layers[0], "structure_key"):
            raise TypeError(
                f"PrepareStructure prepares for a CellularTransformer, got {type(model).__name__}"
            )
        self.model = model

    def __call__(self, data: ComplexData) -> ComplexData:
        """Return a shallow copy of ``data`` with its prepared structure.

        Parameters
        ----------
        data : ComplexData
            One complex (``num_complexes == 1``), on the device the model will run on.

        Returns
        -------
        ComplexData
            ``data`` with ``data.prepared_structure``.
        """
        if not isinstance(data, ComplexData):
            raise TypeError(f"PrepareStructure expects a ComplexData, got {type(data).__name__}")
        if data.num_complexes != 1:
            raise ValueError(
                f"PrepareStructure prepares one complex, got a batch of {data.num_complexes}: "
                "batches of several complexes are prepared batch by batch"
            )
        model = self.model
        out = copy.copy(data)
        if PREPARED_STRUCTURE in out:
            del out[PREPARED_STRUCTURE]
        with torch.enable_grad():  # the plan's transposed pattern: training and evaluation
            inputs = model.prepare(out)
        out[PREPARED_STRUCTURE] = PreparedStructure(
            model.layers[0].structure_key(model._last_layer_ranks),
            tuple(out.num_cells(r) for r in range(model.max_rank + 1)),
            _entries(model, out),
            out[f"batch_{0}"].device,
            inputs.structure,
        )
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.layers[0].structure_key(self.model._last_layer_ranks)})"
