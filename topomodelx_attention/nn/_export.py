"""``torch.export`` support and a clear ``torch.jit.script`` refusal for the model families.

``torch.export.export(model, (model.prepare(batch),))`` needs the prepared inputs to be pytree
nodes: :func:`register_prepared_inputs` registers the frozen dataclasses that carry them
(``CellularInputs``, ``CellStructure``, ``TokenGTInputs``, ``TupleIndex``, ``PaddedLayout``,
``NeighborhoodIndex``, ``SparsePlan``, ``FusedNeighborhood``) with :func:`torch.export.register_dataclass`; every
field is a tensor, an int, a bool, ``None`` or a tuple of those, so the exported program takes
the same object and ``torch.export.save`` / ``load`` round-trip it. A ``ComplexData`` (or PyG
batch) is not an export input: its preparation is data-dependent Python (sparse tensors,
validation, ``torch.unique``), so it stays outside the exported graph, as it stays outside a
``torch.compile`` graph.

TorchScript (deprecated by torch) cannot compile this package's Python; :func:`refuse_torchscript`
gives the modules a ``__prepare_scriptable__`` hook that ``torch.jit.script`` calls first, so it
raises one ``TypeError`` naming what is supported instead of failing deep in the TorchScript
frontend.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch._dynamo
import torch.utils._pytree as pytree
from torch import nn

__all__ = [
    "REFUSED",
    "SUPPORTED",
    "mark_dynamic_sizes",
    "prepared_inputs",
    "refuse_torchscript",
    "register_prepared_inputs",
]

SUPPORTED = (
    "torch.compile(model) (any input), or torch.export.export(model, (model.prepare(batch),)) for "
    "CellularTransformer and TokenGT, torch.export.export(model, (x, model.prepare_tuples(data), "
    "batch), {'num_complexes': n}) for NSimplicialTransformer (README: 'Compiling and exporting')"
)
"""What the refusal of ``torch.jit.script`` points to."""


def register_prepared_inputs(*classes: type) -> None:
    """Register frozen dataclasses of prepared inputs as pytree nodes (``torch.export`` inputs).

    Idempotent: a class already registered (e.g. by a reload) is skipped. The classes are also
    allowed for ``torch.load(weights_only=True)`` (plain containers of tensors), so that
    ``torch.export.load`` of a saved program reads its example inputs without torch's fallback
    to ``weights_only=False``.

    Parameters
    ----------
    *classes : type
        Dataclasses whose fields are tensors, ints, bools, ``None`` or tuples of those (or of
        other registered dataclasses).
    """
    for cls in classes:
        if cls in pytree.SUPPORTED_NODES:
            continue
        torch.export.register_dataclass(cls, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")
        torch.serialization.add_safe_globals([cls])


def _refuse_script(self: nn.Module) -> Any:
    raise TypeError(
        f"torch.jit.script does not support {type(self).__name__} (TorchScript is deprecated in "
        f"torch and cannot compile this package's Python code). Use {SUPPORTED}."
    )


REFUSED: list[type[nn.Module]] = []
"""The module classes given the refusing ``__prepare_scriptable__`` hook."""


def refuse_torchscript(*classes: type[nn.Module]) -> None:
    """Make ``torch.jit.script(module)`` raise one clear ``TypeError`` for these module classes.

    ``torch.jit.script`` calls ``__prepare_scriptable__`` on the module and all its submodules
    before compiling, so a user's module holding one of ours is refused too.

    Parameters
    ----------
    *classes : type of torch.nn.Module
        Module classes of the package.
    """
    for cls in classes:
        cls.__prepare_scriptable__ = _refuse_script
        if cls not in REFUSED:
            REFUSED.append(cls)


def mark_dynamic_sizes(prepared: Any) -> Any:
    """Give every size of the tensors in prepared inputs its own symbol under ``torch.compile``.

    ``torch._dynamo.maybe_mark_dynamic`` on every dimension of size >= 2 of every tensor in
    ``prepared`` (frozen dataclasses, tuples and lists are walked). Such a dimension is never
    *duck sized* (unified with another size that happens to be equal in the first batch, e.g.
    16 complexes and a 16-wide ``node_id``), which would make a later batch size recompile;
    a dimension the model fixes (a feature width) is still specialized, without error. Called
    by the models' compiled entry point on the result of their eager ``prepare``.

    Parameters
    ----------
    prepared : object
        A prepared-inputs dataclass (or a container of them).

    Returns
    -------
    object
        ``prepared`` itself.
    """
    stack = [prepared]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            for dim, size in enumerate(item.shape):
                if size >= 2:
                    torch._dynamo.maybe_mark_dynamic(item, dim)
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return prepared


def prepared_inputs(model: nn.Module, data: Any, inputs_type: type) -> Any:
    """Return ``data`` when it is already prepared, else ``model.prepare(data)`` (eager).

    The one entry point of the models' ``forward`` / ``encode``: a compiled model called on a
    raw batch breaks its graph once, here; while ``torch.compile`` traces, the eager
    preparation also gives every size of the prepared tensors its own symbol
    (:func:`mark_dynamic_sizes`), so that no later batch size recompiles.

    Parameters
    ----------
    model : torch.nn.Module
        A model with a ``prepare(data)`` method returning ``inputs_type``.
    data : object
        A raw batch (``ComplexData`` / PyG batch) or its prepared inputs.
    inputs_type : type
        The model's prepared-inputs dataclass (e.g. ``CellularInputs``).

    Returns
    -------
    object
        An ``inputs_type`` instance.
    """
    if isinstance(data, inputs_type):
        return data
    if torch.compiler.is_compiling():
        return _prepare_while_compiling(model, data)
    return model.prepare(data)


@torch.compiler.disable
def _prepare_while_compiling(model: nn.Module, data: Any) -> Any:
    return mark_dynamic_sizes(model.prepare(data))
