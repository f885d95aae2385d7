"""Sampled sub-complexes: the k-hop cells, the restricted complex, exact outputs without a fan-out cap."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import random_cell_complex
from topomodelx_attention.data import ComplexData, SubComplexSampler, from_toponetx
from topomodelx_attention.data.neighborhoods import row_rank
from topomodelx_attention.transforms import CellularRandomWalkPE


def _complex(seed: int = 0, n: int = 40, p: float = 0.07) -> ComplexData:
    """A sparse random graph with its cycle basis as 2-cells: far-apart cells, float64 features."""
    cc = random_cell_complex(seed, n=n, p=p)
    gen = torch.Generator().manual_seed(seed)
    sizes = [len(list(cc.skeleton(r))) for r in range(3)]
    features = {r: torch.randn(sizes[r], 3, generator=gen, dtype=torch.float64) for r in range(3)}
    data = from_toponetx(cc, features=features, max_rank=2, dtype=torch.float64)
    data.y = torch.randint(0, 2, (sizes[0],), generator=gen)
    return data


def _reference_cells(data: ComplexData, targets: list[int], hops: int, keys: list[str]) -> list[set[int]]:
    """Breadth-first search over the dense neighbourhoods, then the closure under faces."""
    counts = data.cell_counts()
    keep = [set() for _ in counts]
    keep[0] = set(targets)
    frontier = [set(), set(), set()]
    frontier[0] = set(targets)
    for _ in range(hops):
        found = [set() for _ in counts]
        for key in keys:
            name, rank = key.rsplit("_", 1)
            col = int(rank)
            row = row_rank(name, col)
            if row < 0:
                continue
            dense = data[key].to_dense() != 0
            for a, b in dense.nonzero().tolist():
                if a in frontier[row]:
                    found[col].add(b)
                if b in frontier[col]:
                    found[row].add(a)
        frontier = [found[r] - keep[r] for r in range(len(counts))]
        for r in range(len(counts)):
            keep[r] |= frontier[r]
    for rank in range(len(counts) - 1, 0, -1):
        dense = data[f"incidence_{rank}"].to_dense() != 0
        for face, cell in dense.nonzero().tolist():
            if cell in keep[rank]:
                keep[rank - 1].add(face)
    return keep


@pytest.mark.parametrize("hops", [0, 1, 2, 3])
def test_cells_are_the_k_hop_cells_closed_under_faces(hops):
    data = _complex()
    keys = ["adjacency_0", "incidence_1", "coadjacency_1", "incidence_2"]
    sampler = SubComplexSampler(data, hops=hops, neighborhoods=keys)
    targets = [0, 5, 17]
    got = [set(c.tolist()) for c in sampler.cells(targets)]
    assert got == _reference_cells(data, targets, hops, keys)
    assert all(len(g) < n for g, n in zip(got, data.cell_counts())), "the sub-complex is the whole complex"


def test_sub_complex_is_the_restriction():
    data = _complex(seed=1)
    sampler = SubComplexSampler(data, hops=2)
    targets = torch.tensor([3, 11, 3, 20])
    cells = sampler.cells(targets)
    sub = sampler.sample(targets)
    assert sub.cell_counts() == [c.numel() for c in cells]
    assert sub.shape.tolist() == [[c.numel() for c in cells]]
    assert sub.num_nodes == cells[0].numel()
    assert torch.equal(cells[0][sub.target_index], torch.tensor([3, 11, 20]))
    assert sub.node_mask.sum() == 3 and sub.node_mask[sub.target_index].all()
    for r in range(3):
        assert torch.equal(sub[f"x_{r}"], data[f"x_{r}"][cells[r]])
    assert torch.equal(sub.y, data.y[cells[0]])
    for key in data.keys():
        value = data[key]
        if isinstance(value, torch.Tensor) and value.is_sparse:
            name, rank = key.rsplit("_", 1)
            row = row_rank(name, int(rank))
            want = value.to_dense()
            want = want[cells[row]] if row >= 0 else want[:0]
            want = want[:, cells[int(rank)]]
            assert sub[key].is_coalesced(), key
            assert torch.equal(sub[key].to_dense(), want), key
    sub.validate_complex()  # closed under faces: a complex (B_r B_{r+1} = 0, ...)


def test_node_mask_of_the_complex_is_kept_on_the_targets():
    data = _complex(seed=2)
    data.node_mask = torch.arange(data.num_cells(0)) % 2 == 0
    sub = SubComplexSampler(data, hops=1).sample([1, 2, 4])
    kept = sub.node_mask.nonzero().view(-1)
    assert torch.equal(kept, sub.target_index[[1, 2]])  # targets 2 and 4: the even ones


def test_fan_out_caps_the_neighbours_per_cell():
    data = _complex(seed=3, n=30, p=0.3)
    keys = ["adjacency_0"]
    full = SubComplexSampler(data, hops=1, neighborhoods=keys)
    capped = SubComplexSampler(data, hops=1, num_neighbors=[2], neighborhoods=keys)
    degree = (data.adjacency_0.to_dense() != 0).sum(1)
    target = int(torch.argmax(degree))
    assert full.cells([target])[0].numel() == int(degree[target]) + 1
    draws = [capped.cells([target], torch.Generator().manual_seed(s))[0] for s in range(6)]
    assert all(d.numel() == 3 for d in draws)
    assert len({tuple(d.tolist()) for d in draws}) > 1, "the draws never change"
    neighbours = set(torch.nonzero(data.adjacency_0.to_dense()[target]).view(-1).tolist()) | {target}
    assert all(set(d.tolist()) <= neighbours for d in draws)


def _ct(data: ComplexData, n_layers: int):
    from topomodelx_attention.nn.cell import CellularTransformer

    torch.manual_seed(0)
    model = CellularTransformer(
        in_channels=[data[f"x_{r}"].shape[1] for r in range(3)],
        hidden_channels=8,
        out_channels=3,
        n_layers=n_layers,
        heads=2,
        outputs=(0,),
        pe_options={"channels": data.pe_0.shape[1]},
    ).double()
    return model.eval()


@pytest.mark.parametrize("n_layers", [1, 2, 3])
def test_sampled_ct_logits_equal_full_batch(n_layers):
    data = CellularRandomWalkPE(dim=4)(_complex(seed=4))
    model = _ct(data, n_layers)
    sampler = SubComplexSampler(data, hops=n_layers, neighborhoods=model.neighborhood_keys)
    loader = sampler.loader(torch.arange(data.num_cells(0)), batch_size=7)
    with torch.no_grad():
        full = model(data)[0]
        sampled = torch.empty_like(full)
        sizes = []
        for targets, sub in zip(torch.arange(data.num_cells(0)).split(7), loader):
            sampled[targets] = model(sub)[0][sub.target_index]
            sizes.append(sub.num_cells(0))
    assert min(sizes) < data.num_cells(0), "every batch holds the whole complex: the test proves nothing"
    torch.testing.assert_close(sampled, full, rtol=0, atol=1e-6)


def test_fewer_hops_than_layers_change_the_logits():
    data = CellularRandomWalkPE(dim=4)(_complex(seed=4))
    model = _ct(data, 3)
    sampler = SubComplexSampler(data, hops=1, neighborhoods=model.neighborhood_keys)
    targets = torch.arange(0, data.num_cells(0), 3)
    with torch.no_grad():
        full = model(data)[0][targets]
        sub = sampler.sample(targets)
        sampled = model(sub)[0][sub.target_index]
    assert (sampled - full).abs().max() > 1e-4


def test_permuted_complex_samples_the_permuted_cells():
    data = _complex(seed=5)
    gen = torch.Generator().manual_seed(0)
    from tests.helpers import permute_complex

    perms = [torch.randperm(n, generator=gen) for n in data.cell_counts()]
    permuted = permute_complex(data, perms)
    targets = torch.tensor([2, 9])
    got = SubComplexSampler(permuted, hops=2).cells(torch.argsort(perms[0])[targets])
    want = SubComplexSampler(data, hops=2).cells(targets)
    for r in range(3):
        assert sorted(perms[r][got[r]].tolist()) == want[r].tolist()


def test_loader_batches_cover_the_targets_once():
    data = _complex(seed=6)
    data.vertex_id = torch.arange(data.num_cells(0))  # a vertex attribute: its rows follow the sampled vertices
    targets = torch.arange(1, data.num_cells(0), 2)
    loader = SubComplexSampler(data, hops=1).loader(targets, batch_size=4, shuffle=True)
    assert len(loader) == -(-targets.numel() // 4)
    seen = torch.cat([sub.vertex_id[sub.target_index] for sub in loader])
    assert torch.equal(torch.sort(seen).values, targets)


@pytest.mark.parametrize(
    ("change", "options", "message"),
    [
        (lambda d: setattr(d, "edge_index", torch.zeros(2, 5, dtype=torch.long)), {}, "edge_index"),
        (lambda d: setattr(d, "x_1", d.x_1[:-1]), {}, "x_1"),
        (lambda d: None, {"hops": -1}, "hops"),
        (lambda d: None, {"hops": 2, "num_neighbors": [3]}, "num_neighbors"),
        (lambda d: None, {"neighborhoods": ["adjacency_7"]}, "adjacency_7"),
        (lambda d: setattr(d, "target_index", torch.zeros(3)), {}, "target_index"),
    ],
)
def test_refusals_name_the_problem(change, options, message):
    data = _complex(seed=7)
    change(data)
    with pytest.raises(ValueError, match=message):
        SubComplexSampler(data, **{"hops": 1, **options})


def test_bad_targets_are_refused():
    sampler = SubComplexSampler(_complex(seed=8), hops=1)
    with pytest.raises(ValueError, match="vertex ids in 0"):
        sampler.sample([10_000])
    with pytest.raises(ValueError, match="empty"):
        sampler.sample([])
    with pytest.raises(TypeError, match="integer"):
        sampler.sample(torch.tensor([0.5]))


def test_the_sampled_complex_benchmark_writes_its_table(tmp_path):
    from tests.helpers import run_benchmark

    run = run_benchmark(
        "sampled_complex", "--cells", 1600, "--batch-size", 64, "--modes", "sampled", "full",
        "--output", tmp_path / "tables", timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    table = (tmp_path / "tables" / "cells_1521_batch_64.md").read_text()  # a 20 x 20 grid: 400 + 760 + 361 cells
    rows = {cells[1].strip(): cells for cells in (line.split("|") for line in table.splitlines()) if len(cells) > 7}
    assert int(rows["sampled"][4]) == 4 and int(rows["full"][4]) == 1  # 200 training vertices, batches of 64
    assert all(float(rows[mode][6].replace(",", "")) > 0 for mode in ("sampled", "full"))  # peak MiB
