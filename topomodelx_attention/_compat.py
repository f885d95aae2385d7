"""Import ``torch_geometric`` without the warning its own import raises.

``import torch_geometric`` (2.8) calls ``torch.jit.script`` at import time
(``torch_geometric.nn.pool.select.base``), which torch 2.10+ reports with a
``DeprecationWarning`` that a user of this package cannot act on. Importing this module imports
PyG once with exactly that warning ignored, for the duration of the import only: no filter of the
user's is changed, the filters the imported libraries install stay, and every other warning (PyG's
own included) is shown as usual. Each
subpackage that reads PyG (``data``, ``transforms``, ``harness``) imports this module first.
Nothing happens when PyG is already imported.
"""

from __future__ import annotations

import contextlib
import sys
import warnings

__all__ = ["PYG_IMPORT_WARNINGS", "import_torch_geometric"]

PYG_IMPORT_WARNINGS: tuple[tuple[str, type[Warning]], ...] = (
    (r"`torch\.jit\.script` is deprecated", DeprecationWarning),
)
"""``(message regex, category)`` of the warnings ignored while PyG is imported."""


def import_torch_geometric() -> None:
    """Import ``torch_geometric`` with :data:`PYG_IMPORT_WARNINGS` ignored during the import.

    Our filters are added in front and removed again right after the import, one by one: the
    filters the imported libraries install for themselves (torch, numpy, urllib3, ...) stay, as
    after a plain ``import torch_geometric`` (``warnings.catch_warnings`` would drop them). A
    no-op when PyG is already imported (by the user or an earlier call).
    """
    if "torch_geometric" in sys.modules:
        return
    ours = []
    for message, category in PYG_IMPORT_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
        ours.append(warnings.filters[0])
    try:
        import torch_geometric  # noqa: F401
    finally:
        for entry in ours:
            with contextlib.suppress(ValueError):
                warnings.filters.remove(entry)
        mutated = getattr(warnings, "_filters_mutated", None)  # invalidate the "once" registries
        if mutated is not None:
            mutated()


import_torch_geometric()
