"""TopoBench-native backbones, the batch → tensors mapping, and TopoBench contributions.

* :mod:`~.backbones` — the Cellular Transformer, order-k TokenGT and N-simplicial transformer
  under TopoBench's backbone contract: tensors in (``x = (x_0, ..., x_R)``, a dict of sparse
  neighbourhoods, ``batch = (batch_0, ..., batch_R)``), a tuple ``(h_0, ..., h_R)`` out.
* :mod:`~.wrapper` — :func:`backbone_inputs` (TopoBench batch → backbone arguments, padding the
  ranks a lifting did not produce) and :class:`TopoBenchWrapper`.
* :mod:`~.transforms` — our positional encodings in TopoBench's transform registry.
* :mod:`~.contribute` — ``topomodelx-attention topobench contribute``: writes into a TopoBench
  checkout the files of a pull request adding one of the models (thin backbone module and
  wrapper, the model code they import vendored by :mod:`~.vendor`, configs, unit tests, the
  pipeline-test entry).
* :mod:`~.check` — ``topomodelx-attention topobench check``: TopoBench's test environment, the
  contributed tests, TopoBench's suite and lint on the contribution.

The last three are not imported here (only the commands need them).
"""

from topomodelx_attention.harness.topobench.backbones import (
    CellularTransformerBackbone,
    NSimplicialBackbone,
    OrderKTokenGTBackbone,
    complex_from_tensors,
)
from topomodelx_attention.harness.topobench.transforms import (
    TOPOBENCH_TRANSFORMS,
    register_topobench_transforms,
)
from topomodelx_attention.harness.topobench.wrapper import (
    TopoBenchWrapper,
    backbone_inputs,
    pad_empty_ranks,
)

__all__ = [
    "TOPOBENCH_TRANSFORMS",
    "CellularTransformerBackbone",
    "NSimplicialBackbone",
    "OrderKTokenGTBackbone",
    "TopoBenchWrapper",
    "backbone_inputs",
    "complex_from_tensors",
    "pad_empty_ranks",
    "register_topobench_transforms",
]
