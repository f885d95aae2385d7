"""Paper-exact switches of the Cellular Transformer and their robustness (arrows, layouts, signs, empty complexes, inputs).

Each paper form is checked against a small hand-written dense reference of Eq. 2 / Eq. 3 / Eq. 4
or against a hand example.
"""

import math
import warnings
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torch_geometric.data import Batch

from tests.helpers import graph_from_edges, permute_complex, to_double
from tests.nn.cell.test_cellular_transformer import COMBOS, complexes, make_model
from topomodelx_attention.harness.config import compose_config
from topomodelx_attention.nn.attention import MultiHeadAttention
from topomodelx_attention.nn.cell import (
    Arrow,
    CellularTransformer,
    CellularTransformerLayer,
    parse_tensor_diagram,
    vertex_membership,
)
from topomodelx_attention.transforms import CellCycleLifting

CONFIG_DIR = Path(__file__).resolve().parents[3] / "topomodelx_attention" / "configs" / "model" / "cell"
KEYS = ("adjacency_0", "coadjacency_1", "coadjacency_2", "incidence_1", "incidence_2", "adjacency_1",
        "hodge_laplacian_1")


def one_complex():
    data = to_double(complexes()[0])
    return data, {k: data[k] for k in KEYS}


def random_cochains(data, channels, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(data.num_cells(r), channels, generator=generator, dtype=torch.float64) for r in range(3)]


# ---------------------------------------------------------------- dense references of Eq. 2 / 3
def attention_reference(block, x_t, x_s, matrix, scale, output_projection):
    """Eq. 2 on one complex: softmax(scale · X_t Q (X_s K)ᵀ ⋆ φ(N)) X_s V, per head, θ = 1."""
    q, k, v = block.project_query(x_t), block.project_key(x_s), block.project_value(x_s)
    logits = torch.einsum("thd,shd->hts", q, k) * scale
    dense = matrix.to_dense()
    # dense: φ(N) = θN with θ initialised to 1; sparse: ⋆ = Hadamard, N is a mask
    logits = logits + dense if block.kind == "dense" else logits.masked_fill(dense == 0, -math.inf)
    alpha = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # a cell without neighbours gets 0
    out = torch.einsum("hts,shd->thd", alpha, v)
    return block.project_output(out) if output_projection else out.reshape(out.shape[0], -1)


def finish(layer, x, update):
    """Residual + pre-norm FFN of Appendix A (steps 4-6)."""
    out = []
    for r, xr in enumerate(x):
        h = xr + update[r]
        out.append(h + layer.ffn[r](layer.norm_ffn[r](h)))
    return out


def pairwise_reference(layer, x, neighborhoods, scale, output_projection):
    normed = [norm(xr) for norm, xr in zip(layer.norm_attention, x)]
    update = [torch.zeros_like(xr) for xr in x]
    for arrow, key in zip(layer.arrows, layer.block_keys):
        matrix = neighborhoods[arrow.neighborhood].to_dense()
        matrix = matrix.T if arrow.transpose else matrix
        update[arrow.target] = update[arrow.target] + attention_reference(
            layer.arrow_attention(key), normed[arrow.target], normed[arrow.source], matrix, scale, output_projection
        )
    return finish(layer, x, update)


def general_reference(layer, x, neighborhoods, scale, output_projection):
    """Eq. 3: shared Q/K over all cells, one V per rank, block matrix N of the diagram."""
    normed = [norm(xr) for norm, xr in zip(layer.norm_attention, x)]
    sizes = [xr.shape[0] for xr in x]
    offsets = [sum(sizes[:r]) for r in range(len(sizes) + 1)]
    big = torch.zeros(offsets[-1], offsets[-1], dtype=torch.float64)
    for arrow in layer.arrows:
        matrix = neighborhoods[arrow.neighborhood].to_dense()
        matrix = matrix.T if arrow.transpose else matrix
        big[offsets[arrow.target]:offsets[arrow.target + 1], offsets[arrow.source]:offsets[arrow.source + 1]] += matrix
    block = layer.general
    tokens = torch.cat(normed)
    q, k = block.project_query(tokens), block.project_key(tokens)
    v = torch.cat([lin(xr).reshape(xr.shape[0], layer.heads, -1) for lin, xr in zip(block.values, normed)])
    logits = torch.einsum("thd,shd->hts", q, k) * scale
    logits = logits + big if block.kind == "dense" else logits.masked_fill(big == 0, -math.inf)
    out = torch.einsum("hts,shd->thd", torch.softmax(logits, -1).nan_to_num(0.0), v)
    out = block.project_output(out) if output_projection else out.reshape(out.shape[0], -1)
    return finish(layer, x, list(torch.split(out, sizes)))


def build_layer(attention, kind, **kwargs):
    torch.manual_seed(0)
    return CellularTransformerLayer(8, heads=2, max_rank=2, attention=attention, kind=kind, **kwargs).double()


def paper_kernel(kind, scale=1.0):
    """Paper kernel options: unscaled logits, one shared θ where the kind has a dense kernel."""
    return {"scale": scale, **({"bias_scale": "shared"} if kind in ("dense", "mixed") else {})}


REFERENCE_COMBOS = [("pairwise", "sparse"), ("pairwise", "dense"), ("pairwise", "mixed"),
                    ("general", "sparse"), ("general", "dense")]


@pytest.mark.parametrize(("attention", "kind"), REFERENCE_COMBOS)
@pytest.mark.parametrize("attention_scale", [None, 1.0])
def test_layer_matches_dense_reference_of_eq2_eq3(attention, kind, attention_scale):
    data, neighborhoods = one_complex()
    layer = build_layer(attention, kind, kernel_options={"scale": attention_scale})
    x = random_cochains(data, 8)
    scale = 1.0 if attention_scale == 1.0 else 1.0 / math.sqrt(4)
    reference = pairwise_reference if attention == "pairwise" else general_reference
    expected = reference(layer, x, neighborhoods, scale, True)
    for got, want in zip(layer(x, neighborhoods), expected):
        torch.testing.assert_close(got, want)
    # the scale is not a no-op: the other scale gives a different layer output
    other = reference(layer, x, neighborhoods, 1.0 / math.sqrt(4) if scale == 1.0 else 1.0, True)
    assert not torch.allclose(torch.cat(other), torch.cat(expected))


@pytest.mark.parametrize(("attention", "kind"), REFERENCE_COMBOS)
def test_paper_heads_without_output_projection_match_reference(attention, kind):
    data, neighborhoods = one_complex()
    layer = build_layer(attention, kind, kernel_options=paper_kernel(kind), output_projection=False)
    assert not any("lin_out" in name for name, _ in layer.named_parameters())
    with_o = build_layer(attention, kind, kernel_options={"scale": 1.0})
    assert sum(p.numel() for p in layer.parameters()) < sum(p.numel() for p in with_o.parameters())
    x = random_cochains(data, 8)
    reference = pairwise_reference if attention == "pairwise" else general_reference
    expected = reference(layer, x, neighborhoods, 1.0, False)
    for got, want in zip(layer(x, neighborhoods), expected):
        torch.testing.assert_close(got, want)
    if attention == "general":  # per-rank values act on each head's own slice (split input)
        values = layer.general.values[0]
        probe = torch.zeros(1, 8, dtype=torch.float64)
        probe[0, :4] = 1.0  # only head 0's slice
        assert values(probe).reshape(1, 2, 4)[0, 1].abs().max() == 0  # bias=False


@pytest.mark.parametrize(("attention", "kind"), [("pairwise", "dense"), ("pairwise", "mixed"), ("general", "dense")])
def test_shared_bias_scale_has_one_theta_per_dense_block(attention, kind):
    data, neighborhoods = one_complex()
    per_head = build_layer(attention, kind)
    shared = build_layer(attention, kind, kernel_options={"bias_scale": "shared"})
    dense_blocks = sum(m.kind == "dense" for m in per_head.modules() if isinstance(m, MultiHeadAttention))
    assert dense_blocks > 0
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(per_head) - count(shared) == dense_blocks * (per_head.heads - 1)
    # θ starts at 1 in both forms: the shared form reproduces the reference at initialisation
    x = random_cochains(data, 8)
    reference = pairwise_reference if attention == "pairwise" else general_reference
    for got, want in zip(shared(x, neighborhoods), reference(shared, x, neighborhoods, 0.5, True)):
        torch.testing.assert_close(got, want)


def test_bad_paper_switches():
    with pytest.raises(ValueError, match="bias_scale must be one of"):
        CellularTransformerLayer(8, heads=2, kind="dense", kernel_options={"bias_scale": "per_rank"})
    with pytest.raises(ValueError, match=r"\['bias_scale'\] are not options of kind='sparse'"):
        CellularTransformerLayer(8, heads=2, kernel_options={"bias_scale": "shared"})
    with pytest.raises(ValueError, match="scale must be positive"):
        CellularTransformerLayer(8, heads=2, kernel_options={"scale": 0.0})
    with pytest.raises(ValueError, match=r"pe_options\['projection'\] must be one of"):
        CellularTransformer([3, 3, 3], 8, 2, pe_options={"projection": "both"})
    with pytest.raises(ValueError, match=r"pe_options\['combination'\] must be one of"):
        CellularTransformer([3, 3, 3], 8, 2, pe_options={"combination": "product"})
    with pytest.raises(ValueError, match="cell_embedding"):
        CellularTransformer([3, 3, 3], 8, 2, cell_embedding="edge_sum")
    with pytest.raises(TypeError, match="output_projection"):
        CellularTransformerLayer(8, heads=2, output_projection="no")


def test_option_groups_name_the_bad_key():
    """readout_options / pe_options: a key they do not take, or a non-mapping, raises naming it."""
    with pytest.raises(ValueError, match=r"readout_options \['layer'\] are not options; it takes"):
        CellularTransformer([3, 3, 3], 8, 2, readout_options={"layer": 2})
    with pytest.raises(ValueError, match=r"pe_options \['width'\] are not options; it takes"):
        CellularTransformer([3, 3, 3], 8, 2, pe_options={"width": 4})
    with pytest.raises(TypeError, match="readout_options must be a mapping"):
        CellularTransformer([3, 3, 3], 8, 2, readout_options=2)
    with pytest.raises(TypeError, match=r"readout_options\['before_pooling'\] must be a bool"):
        CellularTransformer([3, 3, 3], 8, 2, readout_options={"before_pooling": "no"})
    with pytest.raises(ValueError, match=r"readout_options\['ranks'\] must be ranks in 0\.\.2"):
        CellularTransformer([3, 3, 3], 8, 2, readout_options={"ranks": (3,)})
    # the keys given are the only ones changed: the others keep their defaults
    model = CellularTransformer([3, 3, 3], 8, 2, readout_options={"layers": 2})
    assert model.readout_ranks == (0,) and model.readout_before_pooling is True
    assert len(model.readouts["0"]) == 7  # two (Linear, ReLU, Dropout) blocks + the output Linear
    assert CellularTransformer([3, 3, 3], 8, 2, readout_options={}).readout_ranks == (0,)


# ---------------------------------------------------------------- model-level switches (Eq. 4, App. A)
def test_final_norm_false_skips_the_extra_layernorm():
    data = to_double(complexes()[0])
    with_norm = make_model("pairwise", "sparse")
    without = make_model("pairwise", "sparse", final_norm=False)
    assert without.final_norms is None
    state = {k: v for k, v in with_norm.state_dict().items() if not k.startswith("final_norms")}
    without.load_state_dict(state)
    raw = without.encode(data)
    for norm, h, h_raw in zip(with_norm.final_norms, with_norm.encode(data), raw):
        torch.testing.assert_close(h, norm(h_raw))
    # the readout of the paper runs on the last layer's output itself
    pooled = torch.zeros(1, 2, dtype=torch.float64)
    pooled += without.readouts["0"](raw[0]).sum(0)
    torch.testing.assert_close(without(data), pooled)


def test_readout_after_pooling_is_the_mlp_of_the_pooled_cells():
    """readout_options before_pooling=False: MLP_r(Σ_c h_c) per readout rank, summed; empty complexes give a row."""
    data_list = complexes()
    empty = CellCycleLifting()(graph_from_edges([], num_nodes=0, feature_dim=3, seed=0))
    empty.y = torch.tensor([0])
    data_list.insert(1, empty)
    batch = Batch.from_data_list([to_double(d) for d in data_list])
    model = make_model("pairwise", "sparse", readout_options={"before_pooling": False, "ranks": (0, 2)})
    h = model.encode(batch)
    expected = torch.zeros(4, 2, dtype=torch.float64)
    for r in (0, 2):
        pooled = torch.zeros(4, h[r].shape[1], dtype=torch.float64).index_add_(0, batch[f"batch_{r}"], h[r])
        expected += model.readouts[str(r)](pooled)
    torch.testing.assert_close(model(batch), expected)
    paper = make_model("pairwise", "sparse", readout_options={"ranks": (0, 2)})
    assert not torch.allclose(paper(batch), expected)  # the paper's Σ_c MLP(h_c) differs
    with pytest.raises(ValueError, match=r"readout_options\['before_pooling'\]=True"):
        make_model("pairwise", "sparse", readout_options={"before_pooling": False}, outputs=(0,))


@pytest.mark.parametrize("combination", ["sum", "concat"])
def test_shared_pe_projection_reproduces_eq4(combination):
    data = to_double(complexes()[0])
    generator = torch.Generator().manual_seed(3)
    for r in range(3):
        data[f"pe_{r}"] = torch.randn(data.num_cells(r), 5, generator=generator, dtype=torch.float64)
    shared = make_model(
        "pairwise", "sparse", pe_options={"channels": 5, "combination": combination, "projection": "shared"}
    )
    per_rank = make_model("pairwise", "sparse", pe_options={"channels": 5, "combination": combination})
    theta = shared.shared_pe
    assert all(enc.pe_linear is theta for enc in shared.encoders)
    width = theta.weight.numel() + theta.bias.numel()
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(per_rank) - count(shared) == 2 * width
    embedded = shared._embed(data)
    for r in range(3):
        x_r = shared.encoders[r].features(data[f"x_{r}"])  # X_k θ_in,k + b_in,k
        e_r = data[f"pe_{r}"]
        if combination == "sum":  # SumPE: + E_k θ_in,pe + b_in,pe with ONE θ_in,pe
            expected = x_r + e_r @ theta.weight.T + theta.bias
        else:  # ConcatPE: Concat(X_k, E_k) θ_in,pe + b_in,pe
            expected = torch.cat([x_r, e_r], -1) @ theta.weight.T + theta.bias
        torch.testing.assert_close(embedded[r], expected)


def two_triangles():
    """Vertices 0..3, triangles {0,1,2} and {1,2,3} sharing the edge (1, 2)."""
    graph = graph_from_edges([(0, 1), (1, 2), (2, 0), (1, 3), (3, 2)], feature_dim=3, seed=4)
    return to_double(CellCycleLifting(cycles="chordless")(graph))


def test_vertex_sum_cell_embedding_on_a_hand_example():
    data = two_triangles()
    assert data.num_cells(2) == 2
    membership = vertex_membership(data, 2)
    torch.testing.assert_close(membership.to_dense(), data.vertex_cells(2).to_dense().to(membership.dtype))
    model = make_model("pairwise", "sparse", cell_embedding="vertex_sum")
    assert model.encoders[2].features is None
    embedded_vertices = model.encoders[0].features(data.x_0)
    hand = {frozenset({0, 1, 2}), frozenset({1, 2, 3})}
    got = model._embed(data)[2]
    for cell in range(2):
        vertices = frozenset(int(v) for v in membership.to_dense()[:, cell].nonzero().flatten())
        assert vertices in hand
        torch.testing.assert_close(got[cell], embedded_vertices[sorted(vertices)].sum(0))
    # x_2 is not read; the rank-2 PE is still combined (Eq. 4)
    del data["x_2"]
    assert torch.isfinite(model(data)).all()
    with_pe = make_model("pairwise", "sparse", cell_embedding="vertex_sum", pe_options={"channels": 2})
    for r in range(3):
        data[f"pe_{r}"] = torch.ones(data.num_cells(r), 2, dtype=torch.float64)
    h2 = with_pe.encoders[0].features(data.x_0)[[0, 1, 2]].sum(0)
    assert with_pe.encoders[2].combine(h2[None], data.pe_2[:1]).shape == (1, 16)
    assert "incidence_2" in with_pe.neighborhood_keys


def test_vertex_membership_equals_the_scipy_vertex_cells():
    from tests.helpers import random_cell_complex, random_simplicial_complex
    from topomodelx_attention.data import from_toponetx

    items = [from_toponetx(random_cell_complex(s)) for s in range(2)]
    items += [from_toponetx(random_simplicial_complex(s, n=7, p=0.6)) for s in range(2)]
    for data in items:
        for r in range(1, data.max_rank + 1):
            torch.testing.assert_close(vertex_membership(data, r).to_dense(), data.vertex_cells(r).to_dense().float())
    batch = Batch.from_data_list(items[:2])
    torch.testing.assert_close(vertex_membership(batch, 2).to_dense(), batch.vertex_cells(2).to_dense().float())


@pytest.mark.parametrize(("attention", "kind"), [("pairwise", "sparse"), ("general", "dense")])
def test_vertex_sum_model_is_equivariant_and_batch_consistent(attention, kind):
    model = make_model(
        attention, kind, cell_embedding="vertex_sum", pe_options={"projection": "shared"}, final_norm=False
    )
    items = [to_double(c) for c in complexes()]
    torch.testing.assert_close(model(Batch.from_data_list(items)), torch.cat([model(c) for c in items]))
    data = items[0]
    generator = torch.Generator().manual_seed(1)
    perms = [torch.randperm(data.num_cells(r), generator=generator) for r in range(3)]
    h, h_perm = model.encode(data), model.encode(permute_complex(data, perms))
    for r in range(3):
        torch.testing.assert_close(h_perm[r], h[r][perms[r]])


# ---------------------------------------------------------------- packaged paper configs (Table 3)
TABLE_3 = {  # hidden, heads, readout layers, readout dropout
    "gcb": (80, 8, 1, 0.1),
    "zinc": (96, 8, 2, 0.0),
    "molhiv": (768, 32, 3, 0.0),
}


@pytest.mark.parametrize("name", sorted(TABLE_3))
def test_paper_configs_hold_table_3(name):
    cfg = OmegaConf.load(CONFIG_DIR / f"cellular_transformer_paper_{name}.yaml")
    hidden, heads, readout_layers, readout_dropout = TABLE_3[name]
    p = cfg.params
    assert cfg.name == "cellular_transformer" and cfg.domain == "cell"
    composed = compose_config(model=f"cell/cellular_transformer_paper_{name}")
    assert composed.model.params == cfg.params
    assert (p.n_layers, p.hidden_channels, p.ffn_channels, p.heads) == (12, hidden, hidden, heads)
    readout = p.readout_options
    assert (p.attention_dropout, p.embedding_dropout, readout.dropout) == (0.1, 0.0, readout_dropout)
    assert readout.layers == readout_layers and p.pooling == "sum" and list(readout.ranks) == [0]
    assert (p.kernel_options.scale, p.output_projection, p.final_norm) == (1.0, False, False)
    # the paper's one shared θ of θ·N, where the config's kind has a dense kernel
    assert p.kernel_options.get("bias_scale") == ("shared" if p.kind in ("dense", "mixed") else None)
    assert (p.cell_embedding, p.pe_options.combination, p.pe_options.projection) == ("vertex_sum", "concat", "shared")
    if name != "molhiv":  # molhiv (width 768) is too big for a unit test
        params = OmegaConf.to_container(p)
        params["readout_options"]["ranks"] = tuple(params["readout_options"]["ranks"])
        params["pe_options"]["channels"] = cfg.pe.dim
        torch.manual_seed(0)
        model = CellularTransformer([3, 3, 3], out_channels=2, **params).double().eval()
        data = to_double(complexes()[0])
        for r in range(3):
            data[f"pe_{r}"] = torch.zeros(data.num_cells(r), cfg.pe.dim, dtype=torch.float64)
        assert torch.isfinite(model(data)).all()


# ---------------------------------------------------------------- arrows, layouts, signs
@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_two_arrows_between_the_same_ranks_are_separate_pairwise_blocks(kind):
    diagram = ["0->0:adjacency_0", "1->1:adjacency_1", "1->1:coadjacency_1"]
    parsed = parse_tensor_diagram(diagram, 2)
    assert parsed[1] != parsed[2] and parsed[1].name == parsed[2].name == "1->1"
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2, max_rank=2, kind=kind, tensor_diagram=diagram).double()
    assert sorted(layer.block_keys) == ["0->0", "1->1:adjacency_1", "1->1:coadjacency_1"]
    weights = [layer.arrow_weights(key) for key in layer.block_keys]
    assert not torch.equal(weights[1]["query"], weights[2]["query"])  # two blocks, own weights
    data, neighborhoods = one_complex()
    x = random_cochains(data, 8)
    out = layer(x, neighborhoods)
    for got, want in zip(out, pairwise_reference(layer, x, neighborhoods, 0.5, True)):
        torch.testing.assert_close(got, want)
    # each block sees only its own neighbourhood: removing one block changes rank 1
    single = CellularTransformerLayer(8, heads=2, max_rank=2, kind=kind, tensor_diagram=diagram[:2]).double()
    # the same weights without the coadjacency block (sparse arrows: slices of stacked parameters)
    single.load_state_dict({k.replace("1->1:adjacency_1", "1->1"): v for k, v in layer.state_dict().items()
                            if "coadjacency" not in k and not k.startswith("fused.")},
                           strict=kind == "dense")
    with torch.no_grad():
        for mine, theirs in (("0->0", "0->0"), ("1->1", "1->1:adjacency_1")):
            for name, tensor in single.arrow_weights(mine).items():
                if tensor is not None:
                    tensor.copy_(layer.arrow_weights(theirs)[name])
    single.eval()
    for got, want in zip(single(x, neighborhoods), pairwise_reference(single, x, neighborhoods, 0.5, True)):
        torch.testing.assert_close(got, want)
    assert not torch.allclose(single(x, neighborhoods)[1], out[1])
    with pytest.raises(ValueError, match="appears twice"):
        parse_tensor_diagram([*diagram, "1->1:coadjacency_1"], 2)


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_two_arrows_between_the_same_ranks_add_up_in_general_attention(kind):
    data, neighborhoods = one_complex()
    both = ["0->0:adjacency_0", "1->1:adjacency_1", "1->1:coadjacency_1", "1->0:incidence_1", "0->1:incidence_1.T"]
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2, max_rank=2, attention="general", kind=kind,
                                     tensor_diagram=both).double()
    x = random_cochains(data, 8)
    out = layer(x, neighborhoods)
    for got, want in zip(out, general_reference(layer, x, neighborhoods, 0.5, True)):
        torch.testing.assert_close(got, want)
    # equal to one arrow whose neighbourhood is the sum (Eq. 3 block N_{1→1} = adjacency + coadjacency)
    merged = dict(neighborhoods, adjacency_1=(neighborhoods["adjacency_1"] + neighborhoods["coadjacency_1"]).coalesce())
    single = CellularTransformerLayer(8, heads=2, max_rank=2, attention="general", kind=kind,
                                      tensor_diagram=[a for a in both if "coadjacency" not in a]).double()
    single.load_state_dict(layer.state_dict())
    for got, want in zip(single(x, merged), out):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(("attention", "kind"), [c for c in COMBOS if c[1] != "linear"])
def test_csr_csc_and_dense_neighbourhoods_equal_coo(attention, kind):
    data, neighborhoods = one_complex()
    layer = build_layer(attention, kind)
    x = random_cochains(data, 8)
    batch = [data[f"batch_{r}"] for r in range(3)]
    coo = layer(x, neighborhoods, batch, 1)
    for convert in (torch.Tensor.to_sparse_csr, torch.Tensor.to_sparse_csc, torch.Tensor.to_dense):
        other = layer(x, {k: convert(v) for k, v in neighborhoods.items()}, batch, 1)
        for got, want in zip(other, coo):
            torch.testing.assert_close(got, want)
    # the model converts once for the whole stack
    model = make_model(attention, kind)
    expected = model(data)
    converted = data.clone()
    for key in KEYS:
        converted[key] = data[key].to_sparse_csr()
    torch.testing.assert_close(model(converted), expected)


@pytest.mark.parametrize(
    ("attention", "kind", "warns"),
    [("pairwise", "dense", True), ("pairwise", "mixed", True), ("general", "dense", True),
     ("pairwise", "sparse", False), ("general", "sparse", False)],
)
def test_signed_laplacian_as_dense_bias_warns(attention, kind, warns):
    data, neighborhoods = one_complex()
    assert (neighborhoods["hodge_laplacian_1"].values() < 0).any()
    diagram = ["0->0:adjacency_0", "1->1:hodge_laplacian_1", "1->0:incidence_1"]
    torch.manual_seed(0)
    layer = CellularTransformerLayer(8, heads=2, max_rank=2, attention=attention, kind=kind,
                                     tensor_diagram=diagram).double()
    x = random_cochains(data, 8)
    if warns:
        with pytest.warns(UserWarning, match=r"hodge_laplacian_1.*negative entries.*orientation"):
            layer(x, neighborhoods)
    else:  # a sparse mask ignores the values: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            layer(x, neighborhoods)
    with warnings.catch_warnings():  # unsigned neighbourhoods never warn
        warnings.simplefilter("error", UserWarning)
        build_layer(attention, kind)(x, neighborhoods)


# ---------------------------------------------------------------- empty complexes, inputs
def empty_complex():
    data = CellCycleLifting()(graph_from_edges([], num_nodes=0, feature_dim=3))
    data.y = torch.tensor([9])
    return to_double(data)


def assert_one_finite_row_per_complex_with_an_empty_one(model):
    """An empty complex alone and between two others: one finite row each, batched = single.

    Returns the batch's output (empty complex in row 1).
    """
    empty = empty_complex()
    assert [empty.num_cells(r) for r in range(3)] == [0, 0, 0]
    alone = model(Batch.from_data_list([empty]))
    assert alone.shape == (1, 2) and torch.isfinite(alone).all()
    items = [to_double(complexes()[0]), empty, to_double(complexes()[2])]
    out = model(Batch.from_data_list(items))
    assert out.shape == (3, 2) and torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.cat([model(c) for c in items]))
    return out


@pytest.mark.parametrize(("attention", "kind"), COMBOS)
def test_batch_with_an_empty_complex_gives_one_finite_row_per_complex(attention, kind):
    out = assert_one_finite_row_per_complex_with_an_empty_one(make_model(attention, kind))
    torch.testing.assert_close(out[1], torch.zeros(2, dtype=torch.float64))  # readout bias pooled over 0 cells


@pytest.mark.parametrize(
    ("key", "value", "row"), [("x_0", float("nan"), 2), ("x_1", 1e30, 1), ("pe_2", float("inf"), 0)]
)
def test_check_inputs_names_the_key_and_the_row(key, value, row):
    data = to_double(complexes()[0])
    for r in range(3):
        data[f"pe_{r}"] = torch.zeros(data.num_cells(r), 3, dtype=torch.float64)
    data[key] = data[key].clone()
    data[key][row, 0] = value
    model = make_model("pairwise", "sparse", pe_options={"channels": 3})
    with pytest.raises(ValueError, match=rf"{key}: row {row}"):
        model(data)
    unchecked = make_model("pairwise", "sparse", pe_options={"channels": 3}, check_inputs=False)
    unchecked(data)  # no check: whatever comes out, no ValueError


# ---------------------------------------------------------------- vocabulary
def test_keyword_only_options_and_outputs():
    with pytest.raises(TypeError):
        CellularTransformer([3, 3, 3], 8, 2, 2)
    with pytest.raises(TypeError):
        CellularTransformerLayer(8, 2)
    with pytest.raises(ValueError, match="outputs"):
        CellularTransformer([3, 3, 3], 8, 2, outputs="nodes")
    with pytest.raises(ValueError, match="outputs"):  # cell-level outputs are named by rank
        CellularTransformer([3, 3, 3], 8, 2, outputs="cells")
    with pytest.raises(ValueError, match=r"ranks in 0\.\.2"):
        CellularTransformer([3, 3, 3], 8, 2, outputs=(3,))
    with pytest.raises(ValueError, match="give the ranks once"):
        CellularTransformer([3, 3, 3], 8, 2, outputs=(0, 2), readout_options={"ranks": (0,)})
    data = to_double(complexes()[0])
    model = make_model("pairwise", "sparse", outputs=(0, 2))
    cells = model(data)
    assert set(cells) == {0, 2} and cells[2].shape == (data.num_cells(2), 2)
    for r, out in model.cell_outputs(data).items():
        torch.testing.assert_close(cells[r], out)
    assert Arrow(0, 1, "incidence_1", True).label == "0->1:incidence_1.T"


def test_integer_positional_encodings_are_rejected():
    from topomodelx_attention.nn.cell.cellular_transformer import CellEncoder

    encoder = CellEncoder(3, 8, pe_channels=2)
    with pytest.raises(TypeError, match="positional encodings must be float"):
        encoder(torch.randn(4, 3), torch.ones(4, 2, dtype=torch.long))
