"""One documented way to feed each TopoModelX layer family from a ComplexData (hybrids train)."""

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from topomodelx_attention.data import from_toponetx
from topomodelx_attention.data.topomodelx import normalized_hodge_laplacian, topomodelx_inputs
from topomodelx_attention.nn.cell import CellularTransformerLayer
from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting

WIDTH = 16


def _graphs(count, seed):
    rng = np.random.default_rng(seed)
    graphs = []
    for i in range(count):
        g = nx.gnm_random_graph(9, 18, seed=int(rng.integers(1 << 30)))
        edges = torch.tensor(list(g.edges()), dtype=torch.long).t()
        edge_index = torch.cat([edges, edges.flip(0)], dim=1)
        graphs.append(Data(x=torch.randn(9, 3), edge_index=edge_index, y=torch.tensor([i % 2]), num_nodes=9))
    return graphs


def _batch(domain):
    lifting = CellCycleLifting() if domain == "cell" else SimplicialCliqueLifting(complex_dim=2)
    return next(iter(DataLoader(lifting.lift_many(_graphs(8, 0)), batch_size=8)))


def _layer(family):
    if family == "cwn":
        from topomodelx.nn.cell.cwn_layer import CWNLayer
        return CWNLayer(WIDTH, WIDTH, WIDTH, WIDTH)
    if family == "can":
        from topomodelx.nn.cell.can_layer import CANLayer
        return CANLayer(WIDTH, WIDTH, heads=1)
    if family == "scnn":
        from topomodelx.nn.simplicial.scnn_layer import SCNNLayer
        return SCNNLayer(WIDTH, WIDTH, conv_order_down=1, conv_order_up=1)
    if family == "sccnn":
        from topomodelx.nn.simplicial.sccnn_layer import SCCNNLayer
        return SCCNNLayer((WIDTH,) * 3, (WIDTH,) * 3, conv_order=1, sc_order=2)
    if family == "scn2":
        from topomodelx.nn.simplicial.scn2_layer import SCN2Layer
        return SCN2Layer(WIDTH, WIDTH, WIDTH)
    from topomodelx.nn.combinatorial.hmc_layer import HMCLayer
    return HMCLayer([WIDTH] * 3, [WIDTH] * 3, [WIDTH] * 3, negative_slope=0.2)


FAMILIES = {"cwn": "cell", "can": "cell", "scnn": "simplicial", "sccnn": "simplicial",
            "scn2": "simplicial", "hmc": "simplicial"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hybrid_with_each_topomodelx_family_trains(family):
    batch = _batch(FAMILIES[family])
    torch.manual_seed(0)

    class Hybrid(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoders = torch.nn.ModuleList(torch.nn.Linear(batch[f"x_{r}"].shape[1], WIDTH) for r in range(3))
            self.ct = CellularTransformerLayer(WIDTH, heads=2, max_rank=2)
            self.topo = _layer(family)
            self.head = torch.nn.Linear(WIDTH, 2)

        def forward(self, data):
            h = [enc(data[f"x_{r}"]) for r, enc in enumerate(self.encoders)]
            neighborhoods = {a.neighborhood: data[a.neighborhood] for a in self.ct.arrows}
            h = self.ct(h, neighborhoods, [data[f"batch_{r}"] for r in range(3)], data.num_complexes)
            out = self.topo(**topomodelx_inputs(data, self.topo, features=h))
            if isinstance(out, tuple):  # per-rank outputs: pool the vertices
                pooled, index = out[0], data.batch_0
            else:  # a single-rank layer (edges)
                pooled, index = out, data.batch_1
            summed = torch.zeros(data.num_complexes, WIDTH).index_add_(0, index, pooled)
            counts = torch.bincount(index, minlength=data.num_complexes).clamp_min(1)
            return self.head(summed / counts.unsqueeze(1))

    model = Hybrid()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(12):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch), batch.y)
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]


def test_cwn_mapping_uses_edge_adjacency_and_transposed_incidence():
    batch = _batch("cell")
    args = topomodelx_inputs(batch, "CWNLayer")
    assert torch.equal(args["adjacency_0"].to_dense(), batch.adjacency_1.to_dense())
    assert torch.equal(args["incidence_1_t"].to_dense(), batch.incidence_1.to_dense().t())
    assert args["incidence_1_t"].is_coalesced()


def test_normalized_laplacian_matches_toponetx():
    toponetx = pytest.importorskip("toponetx")
    sc = toponetx.SimplicialComplex([[0, 1, 2], [1, 2, 3], [3, 4], [5]])
    data = from_toponetx(sc)
    for rank in range(3):
        ours = normalized_hodge_laplacian(data[f"hodge_laplacian_{rank}"]).to_dense().double()
        theirs = torch.from_numpy(sc.normalized_laplacian_matrix(rank).toarray()).double()
        assert torch.allclose(ours, theirs, atol=1e-6), rank
        assert (normalized_hodge_laplacian(data[f"hodge_laplacian_{rank}"]).values() != 0).all()


def test_signed_family_on_an_unoriented_complex_names_the_key():
    toponetx = pytest.importorskip("toponetx")
    cc = toponetx.CombinatorialComplex()
    cc.add_cell([0, 1], rank=1)
    cc.add_cell([1, 2], rank=1)
    cc.add_cell([0, 2], rank=1)
    cc.add_cell([0, 1, 2], rank=2)
    data = from_toponetx(cc)
    with pytest.raises(ValueError, match="signed_incidence_1"):
        topomodelx_inputs(data, "sccnn")


def test_unknown_family_and_bad_features_are_clear():
    batch = _batch("cell")
    with pytest.raises(ValueError, match="known families"):
        topomodelx_inputs(batch, "gat")
    with pytest.raises(ValueError, match="x_0"):
        topomodelx_inputs(batch, "cwn", features=[torch.zeros(1, WIDTH), batch.x_1, batch.x_2])


def test_sccnn_laplacian_count_follows_sc_order():
    batch = _batch("simplicial")
    assert len(topomodelx_inputs(batch, "sccnn")["laplacian_all"]) == 5  # TopoBench's sc_order 3
    assert len(topomodelx_inputs(batch, "sccnn", sc_order=2)["laplacian_all"]) == 4
