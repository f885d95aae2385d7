"""Fuzz: batching random complexes through PyG's own ``DataLoader``.

PyG's ``DataLoader`` / ``Batch.from_data_list`` batch lists of ``ComplexData`` with the
vectorised ``collate_complexes``. Every case draws a random batch — cell or simplicial
complexes of a random maximal rank and neighbourhood set, empty complexes, single vertices,
graphs without edges, extra keys (``edge_index``, graph labels), ``follow_batch`` /
``exclude_keys``, a block that is not coalesced — and checks it against PyG's own generic path
(``pyg_from_data_list``):

* ``ACCEPT``: the same keys in every complex: the loader's batch must equal the generic batch
  exactly (stored indices and values, coalesced flags, slice / increment bookkeeping), be valid
  (``validate_complex``: block-diagonal, coalesced, no explicit zeros) and split back into the
  complexes (``to_data_list``);
* ``REJECT``: one complex with other keys (another maximal rank, other neighbourhoods, a
  missing feature, an extra attribute): the loader must raise a ``ValueError`` naming a key
  that differs or the maximal ranks.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from tests.data.test_collate import assert_identical_batches, assert_same
from tests.fuzz.cases import ACCEPT, REJECT, finite_float_graph, quietly, run_cases
from topomodelx_attention.data import NEIGHBORHOODS
from topomodelx_attention.data.collate import pyg_from_data_list
from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting

ORIENTED = tuple(n for n in NEIGHBORHOODS if n != "vertex_incidence")


def _lifting(rng: np.random.Generator, max_rank: int, neighborhoods: list[str] | None):
    if max_rank == 2 and rng.integers(2):
        return CellCycleLifting(neighborhoods=neighborhoods)
    return SimplicialCliqueLifting(complex_dim=max_rank, neighborhoods=neighborhoods)


def _complexes(seed: int, rng: np.random.Generator, size: int, max_rank: int, neighborhoods, extras: bool):
    lifting = _lifting(rng, max_rank, neighborhoods)
    graphs = [finite_float_graph(seed * 17 + i, feature_dim=2, edge_attr=False).data for i in range(size)]
    complexes = quietly(lambda: [lifting(graph) for graph in graphs])
    for i, data in enumerate(complexes):
        data.y = torch.tensor([i % 2])
        if extras:  # PyG's rules: *index* keys shifted by the vertex counts, others stacked
            n = data.num_nodes
            data.edge_index = torch.from_numpy(rng.integers(0, max(n, 1), (2, int(rng.integers(0, 4))))) if n else torch.zeros(2, 0, dtype=torch.long)
            data.graph_attr = torch.randn(1, 3)
    return complexes


def _uncoalesce(data, rng: np.random.Generator) -> None:
    """Store one neighbourhood of ``data`` with its entries shuffled (not coalesced)."""
    keys = [k for k in data.keys() if isinstance(data[k], torch.Tensor) and data[k].is_sparse and data[k]._nnz() > 1]
    if not keys:
        return
    key = keys[int(rng.integers(len(keys)))]
    matrix = data[key].coalesce()
    order = torch.from_numpy(rng.permutation(matrix._nnz()))
    data[key] = torch.sparse_coo_tensor(matrix.indices()[:, order], matrix.values()[order], matrix.shape, check_invariants=True)


def _make_case(seed: int, rng: np.random.Generator):
    size = int(rng.integers(1, 7))
    max_rank = int(rng.integers(1, 4))
    neighborhoods = None if rng.integers(2) else sorted(
        rng.choice(ORIENTED, int(rng.integers(1, len(ORIENTED) + 1)), replace=False).tolist()
    )
    extras = bool(rng.integers(2))
    complexes = _complexes(seed, rng, size, max_rank, neighborhoods, extras)
    options = {}
    if rng.integers(3) == 0:
        options["follow_batch"] = ["x_0", "x_1"]
    if rng.integers(3) == 0:
        options["exclude_keys"] = ["y"]
    corruption = ["none", "none", "none", "uncoalesced", "max_rank", "neighborhoods", "feature", "extra"][
        int(rng.integers(8))
    ]
    if size < 2 and corruption in ("max_rank", "neighborhoods", "feature", "extra"):
        corruption = "none"
    expect = ACCEPT
    position = int(rng.integers(1, size)) if size > 1 else 0
    if corruption == "uncoalesced":
        _uncoalesce(complexes[position], rng)
    elif corruption == "max_rank":
        other = max_rank + 1 if max_rank < 3 else max_rank - 1
        complexes[position] = _complexes(seed + 1000, rng, 1, other, neighborhoods, extras)[0]
        expect = REJECT
    elif corruption == "neighborhoods":
        present = {k.rsplit("_", 1)[0] for k in complexes[0].keys()}
        names = [n for n in ORIENTED if n in present]
        if len(names) > 1:
            fewer = names[: len(names) - 1]
            lifting = SimplicialCliqueLifting(complex_dim=max_rank, neighborhoods=fewer)
            graph = finite_float_graph(seed * 17 + position, feature_dim=2, edge_attr=False).data
            replacement = quietly(lambda: lifting(graph))
            for key in ("y", "edge_index", "graph_attr"):
                if key in complexes[position]:
                    replacement[key] = complexes[position][key]
            complexes[position] = replacement
            expect = REJECT
    elif corruption == "feature":
        del complexes[position]["x_0"]
        expect = REJECT
    elif corruption == "extra":
        complexes[position].note = torch.zeros(1)
        expect = REJECT
    description = (
        f"{size} complexes, max_rank {max_rank}, neighborhoods={neighborhoods}, extras={extras}, "
        f"{options}, {corruption} at {position}"
    )

    def run():
        loader = DataLoader(complexes, batch_size=size, **options)
        batch = next(iter(loader))  # REJECT cases raise here
        reference = pyg_from_data_list(Batch, complexes, **options)
        for key in reference.keys():  # PyG leaves a block that was not coalesced uncoalesced
            value = reference[key]
            if isinstance(value, torch.Tensor) and value.is_sparse and not value.is_coalesced():
                assert corruption == "uncoalesced", f"PyG's {key} is not coalesced"
                reference[key] = value.coalesce()
        assert_identical_batches(reference, batch)
        assert_identical_batches(batch, Batch.from_data_list(complexes, **options))
        batch.validate_complex()
        if not options.get("follow_batch"):  # *_batch / *_ptr keys are not split back
            for original, part in zip(complexes, batch.to_data_list()):
                reference = copy.copy(original)
                for key in options.get("exclude_keys", []):
                    del reference[key]
                assert_same(reference, part)
        return batch

    def checked():
        try:
            return run()
        except ValueError as error:
            message = str(error)
            assert "max_rank" in message or "lacks" in message or "has [" in message, (
                f"the error names neither the keys nor the maximal ranks: {message[:200]}"
            )
            raise

    return description, expect, checked


def test_fuzz_pyg_dataloader_batches_equal_pyg_generic_collation(fuzz_seeds):
    run_cases(fuzz_seeds, "PyG DataLoader over random complexes", _make_case, offset=2100)
