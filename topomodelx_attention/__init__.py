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

__version__ = "0.1.0"
