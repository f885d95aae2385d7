r"""Which kernel a block of a model uses: asked of the registry by capability, never by name.

A model names its attention by one ``kind``; the blocks it builds may need other kernels:

* :func:`reads_neighborhood`: the kernel reads a neighbourhood (a mask, or a θ·N bias);
* :func:`global_kind`: the kernel of *global* attention (every pair of tokens of a complex,
  no neighbourhood: the CT's global arrows) under a model's ``kind``: ``kind`` itself when its
  kernel attends all pairs (:func:`attends_all_pairs`: it needs no neighbourhood, as
  ``"dense"`` and ``"linear"``, or any such kernel registered later), else dense attention;
* composite kinds (:data:`COMPOSITE_KINDS`, :func:`register_composite`): one kernel for the
  blocks within a token group and another for the blocks across groups (the CT's ``"mixed"``:
  dense inside a rank, sparse across ranks); :func:`kernel_kinds` and :func:`block_kind` say
  which kernels a kind names and which one a block uses.
"""

from __future__ import annotations

from topomodelx_attention.nn.attention.kernels import (
    KERNELS,
    DenseKernel,
    SparseKernel,
    kernel_class,
)

__all__ = [
    "COMPOSITE_KINDS",
    "all_pairs_kinds",
    "attends_all_pairs",
    "block_kind",
    "check_all_pairs",
    "global_kind",
    "kernel_kinds",
    "reads_neighborhood",
    "register_composite",
]


#: Composite kinds by name: ``(within, across)``, the registered kernels of the blocks within
#: a token group (a rank) and of the blocks across groups (:func:`register_composite`).
COMPOSITE_KINDS: dict[str, tuple[str, str]] = {}


def register_composite(kind: str, *, within: str, across: str) -> None:
    """Register a composite kind: one kernel within a token group, another across groups.

    Parameters
    ----------
    kind : str
        Its name (neither a registered kernel nor composite).
    within, across : str
        Registered kernels (:data:`KERNELS`) of the blocks within a group and across groups.
    """
    if kind in KERNELS or kind in COMPOSITE_KINDS:
        raise ValueError(f"the kind {kind!r} is already registered; give the composite another name")
    COMPOSITE_KINDS[kind] = (kernel_class(within).kind, kernel_class(across).kind)


def kernel_kinds(kind: str) -> tuple[str, ...]:
    """Return the registered kernels a kind names: ``(kind,)``, or a composite's two.

    Raises
    ------
    ValueError
        For a kind that is neither a registered kernel nor a composite (naming both lists).
    """
    if kind in COMPOSITE_KINDS:
        return COMPOSITE_KINDS[kind]
    if kind not in KERNELS:
        raise ValueError(f"kind must be one of {(*KERNELS, *COMPOSITE_KINDS)}, got {kind!r}")
    return (kind,)


def block_kind(kind: str, *, within: bool) -> str:
    """Return the kernel of one block under ``kind`` (a composite's within / across kernel).

    Parameters
    ----------
    kind : str
        A registered kernel or composite kind.
    within : bool
        Whether the block attends within one token group (e.g. a rank to itself).

    Returns
    -------
    str
        A registered kernel kind.
    """
    kinds = kernel_kinds(kind)
    return kinds[0] if within or len(kinds) == 1 else kinds[1]


def reads_neighborhood(kind: str) -> bool:
    """Whether the kernel of ``kind`` reads a neighbourhood (a mask or a θ·N bias)."""
    cls = kernel_class(kind)
    return cls.needs_neighborhood or cls.accepts_bias


def attends_all_pairs(kind: str) -> bool:
    """Whether the kernel of ``kind`` attends every pair of tokens of a complex.

    A kernel that needs no neighbourhood has only the complexes of the tokens to go by: it
    attends all pairs of each complex (dense, linear, and any such kernel registered later).
    """
    return not kernel_class(kind).needs_neighborhood


def all_pairs_kinds() -> tuple[str, ...]:
    """Return the registered kernels that attend every pair of tokens (:func:`attends_all_pairs`)."""
    return tuple(k for k in KERNELS if attends_all_pairs(k))


def check_all_pairs(kind: str, model: str) -> str:
    """Return ``kind`` if its kernel attends all pairs of tokens, else raise naming ``model``.

    For a model without neighbourhoods (a plain Transformer on tokens, e.g. TokenGT).
    """
    if kind not in KERNELS or not attends_all_pairs(kind):
        raise ValueError(
            f"kind must be an attention kernel over all tokens of a complex, one of "
            f"{all_pairs_kinds()}; got {kind!r} ({model} has no neighbourhood to mask with)"
        )
    return kind


def global_kind(kind: str) -> str:
    """Return the kernel of global attention (all pairs of a complex, no neighbourhood) under ``kind``.

    ``kind`` itself when its kernel attends all pairs (:func:`attends_all_pairs`); for a
    composite, the global kernel of its within kernel; else (a mask kernel) dense attention.

    Parameters
    ----------
    kind : str
        A registered kernel or composite kind (a model's ``kind``).

    Returns
    -------
    str
        A registered kernel kind that attends all pairs.
    """
    kind = block_kind(kind, within=True)
    return kind if attends_all_pairs(kind) else DenseKernel.kind


#: The Cellular Transformer's composite (§4.2.1, •=c): dense inside a rank, sparse across ranks.
register_composite("mixed", within=DenseKernel.kind, across=SparseKernel.kind)
