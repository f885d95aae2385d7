"""Data sets: one module per family of data sets, a registry of them, and the complex cache.

A config names its family with ``dataset.loader``; :func:`get_family` returns it (a
:class:`DatasetFamily`: how to read its graphs, which files that reads, its task defaults).
The packaged families register on import: ``tu`` (TU text files, MUTAG bundled: :mod:`.tu`),
``gcb`` (:mod:`.gcb`), ``zinc`` (ZINC-12k with RDKit: :mod:`.zinc`), ``graphuniverse``
(generated families: :mod:`.graphuniverse`) and ``heterophilous`` (one large graph per ``.npz``
with fixed split masks, transductive node classification: :mod:`.heterophilous`); :mod:`.cache`
stores the lifted complexes.
Adding a data set is one module that calls :func:`register_family` plus one config
``configs/dataset/graph/<NAME>.yaml`` (CONTRIBUTING.md, "Adding a data set").
"""

import topomodelx_attention._compat  # noqa: F401  (imports PyG without its import-time warning)
from topomodelx_attention.datasets import gcb, graphuniverse, heterophilous, tu, zinc  # noqa: F401  (they register)
from topomodelx_attention.datasets.registry import (
    FAMILIES,
    SPLITS,
    DatasetFamily,
    data_files,
    get_family,
    load_graphs,
    register_family,
)
from topomodelx_attention.datasets.tu import load_tu_dataset, load_tu_graphs

__all__ = [
    "FAMILIES",
    "SPLITS",
    "DatasetFamily",
    "data_files",
    "get_family",
    "load_graphs",
    "load_tu_dataset",
    "load_tu_graphs",
    "register_family",
]
