"""Our positional encodings as TopoBench transforms (TopoBench builds them by ``transform_name``)."""

from __future__ import annotations

from typing import Any

__all__ = ["TOPOBENCH_TRANSFORMS", "register_topobench_transforms"]

#: Positional encodings :func:`register_topobench_transforms` adds to TopoBench's registry
#: (pre-transforms: deterministic, so TopoBench may cache them; ``RandomSignFlip`` and resampled
#: ORFs are training-time transforms and are not offered).
TOPOBENCH_TRANSFORMS = (
    "BarycentricSubdivisionPE",
    "BarycentricRandomWalkPE",
    "CellularRandomWalkPE",
    "HodgeLaplacianPE",
    "TopologicalSlepiansPE",
    "ZeroPE",
)


class _TopoBenchTransform:
    """Build one of our transforms from TopoBench's ``DataTransform`` keyword arguments."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, **kwargs: Any) -> Any:
        kwargs.pop("transform_name", None)
        kwargs.pop("transform_type", None)
        return self.cls(**kwargs)


def register_topobench_transforms(registry: dict[str, Any] | None = None) -> list[str]:
    """Add this package's positional encodings to TopoBench's transform registry.

    TopoBench builds every transform by name (``transform_name``) from the dictionary
    ``topobench.transforms.TRANSFORMS``, so a transform config cannot name an arbitrary
    ``_target_``. After this call a TopoBench ``transforms`` config can append, after the lifting::

        pe: {transform_type: data manipulation, transform_name: CellularRandomWalkPE, dim: 8}

    (``model.backbone.pe_channels=8``). Call it once in the process that runs TopoBench, before
    the data are prepared (``benchmarks/topobench_check.py`` does it in its launcher).

    Parameters
    ----------
    registry : dict, optional
        The registry to extend (default: TopoBench's ``TRANSFORMS``; TopoBench must be
        importable then).

    Returns
    -------
    list of str
        The names added (:data:`TOPOBENCH_TRANSFORMS`).
    """
    if registry is None:
        from topobench.transforms import TRANSFORMS as registry
    from topomodelx_attention import transforms

    for name in TOPOBENCH_TRANSFORMS:
        registry[name] = _TopoBenchTransform(getattr(transforms, name))
    return list(TOPOBENCH_TRANSFORMS)
