"""Fuzz: the CT layer's stacked parameters (fewer, larger tensors).

The layer stores the Q/K/V/O weights of its fused sparse arrows stacked per rank and role and
its per-rank LayerNorms / FFNs stacked over the ranks. Every case draws a random batch of
complexes (empty complexes, single vertices, graphs without edges or 2-cells) and a random
layer (``sparse`` / ``mixed`` / ``dense``, bias or not, 1–2 heads, a random part of the
default tensor diagram), then checks:

* ``ACCEPT``: the layer's output equals the definition of Eq. 2 evaluated one arrow at a time
  (one :class:`MultiHeadAttention` per arrow with that arrow's slices of the stacked weights,
  per-rank LayerNorm + FFN), and its state dict loads strictly into a fresh layer to
  bit-identical outputs and gradients;
* ``REJECT``: asking for the weights of an arrow the layer does not have raises a
  ``ValueError`` naming the block keys.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Batch

from tests.fuzz.cases import ACCEPT, REJECT, finite_float_graph, quietly, run_cases
from tests.helpers import to_double
from tests.nn.cell.test_cellular_transformer_layer import _per_arrow_reference
from topomodelx_attention.nn.cell import CellularTransformerLayer
from topomodelx_attention.transforms import CellCycleLifting

DIAGRAM = ("0->0:adjacency_0", "1->1:coadjacency_1", "2->2:coadjacency_2", "1->0:incidence_1",
           "0->1:incidence_1.T", "2->1:incidence_2", "1->2:incidence_2.T")


def _make_case(seed: int, rng: np.random.Generator):
    size = int(rng.integers(1, 4))
    graphs = [finite_float_graph(seed * 13 + i, feature_dim=2, edge_attr=False).data for i in range(size)]
    data = to_double(Batch.from_data_list(quietly(lambda: [CellCycleLifting()(g) for g in graphs])))
    kind = str(rng.choice(["sparse", "sparse", "mixed", "dense"]))
    bias, heads = bool(rng.integers(2)), int(rng.choice([1, 2]))
    arrows = [a for a in DIAGRAM if rng.random() < 0.7] or ["1->0:incidence_1"]
    description = f"{size} complexes, kind={kind}, bias={bias}, heads={heads}, arrows={arrows}"

    def build(generator_seed: int) -> CellularTransformerLayer:
        torch.manual_seed(generator_seed)
        layer = CellularTransformerLayer(4, heads=heads, max_rank=2, kind=kind, bias=bias, tensor_diagram=arrows)
        layer = layer.double().eval()
        with torch.no_grad():  # non-trivial norms and biases
            for param in layer.parameters():
                param.add_(0.2 * torch.randn_like(param))
        return layer

    if rng.random() < 0.15:
        def reject() -> None:
            build(seed).arrow_weights("3->0")
        return description + ", unknown arrow", REJECT, reject

    def run() -> None:
        layer = build(seed)
        neighborhoods = {k: data[k] for k in ("adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2")}
        batch = [data[f"batch_{r}"] for r in range(3)]
        generator = torch.Generator().manual_seed(seed)
        x = [torch.randn(data.num_cells(r), 4, generator=generator, dtype=torch.float64) for r in range(3)]
        got = layer(x, neighborhoods, batch)
        if kind == "sparse" or size == 1:  # (the reference's dense arrows see one complex only)
            expected = _per_arrow_reference(layer, x, neighborhoods)
            for r, (g, e) in enumerate(zip(got, expected)):
                torch.testing.assert_close(g, e, msg=f"rank {r}: stacked layer != per-arrow Eq. 2")
        other = build(seed + 1000)
        other.load_state_dict(layer.state_dict())  # strict
        again = other(x, neighborhoods, batch)
        assert all(torch.equal(a, b) for a, b in zip(got, again)), "loaded state dict: other outputs"
        for model in (layer, other):
            sum(o.square().sum() for o in model(x, neighborhoods, batch)).backward()
        for (name, p), q in zip(layer.named_parameters(), other.parameters()):
            assert (p.grad is None) == (q.grad is None), name
            assert p.grad is None or torch.equal(p.grad, q.grad), name
            assert p.grad is None or torch.isfinite(p.grad).all(), name

    return description, ACCEPT, run


def test_fuzz_stacked_ct_parameters_equal_per_arrow_definition_and_load(fuzz_seeds):
    run_cases(fuzz_seeds, "CT layer with stacked parameters", _make_case, offset=2600)
