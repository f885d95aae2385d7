"""Transformers for topological deep learning on TopoX complexes.

Subpackages
-----------
data
    :class:`~topomodelx_attention.data.ComplexData` and conversions from/to TopoNetX.
transforms
    Liftings (graph → complex), feature liftings and positional encodings.
nn
    The shared attention core and the three model families (``cell``, ``graph``,
    ``simplicial``).
harness
    Benchmark harness in TopoBench's conventions (hydra configs, cached datasets, Lightning
    training, baselines, result tables; extra ``train``).
"""

from topomodelx_attention._install import warn_on_torch_geometric_conflict

__version__ = "0.1.0"

# two distributions (pyg-nightly, torch-geometric) share torch_geometric/: say how to repair a mix
warn_on_torch_geometric_conflict()
