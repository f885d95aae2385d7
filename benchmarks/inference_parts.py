"""Where one CT inference batch spends its structure and kernel time.

One MUTAG batch of 32 lifted complexes, the CT of ``benchmarks/user_loop.py`` (pairwise sparse
attention, width 32, 2 layers, 4 heads; the lifting's keys restricted to the CT's), eval and
``no_grad``, one thread. Cases, timed interleaved (minimum over ``--repeats`` rounds of
``--calls`` calls, thread CPU time), in µs per call:

* *structure*: the model's whole ``prepare`` (input checks, batch counts and the layer's
  ``prepare``); of the layer's, the joined edge list of the fused arrows
  (``prepare_fused_edges``), its CSR plan (``sparse_plan``, without the transposed pattern, as
  in inference), and the last layer's slice of it (``fused_subset``: the arrows into the
  readout rank);
* *one fused sparse attention call on that joined problem* (queries, keys and values drawn at
  random, 4 heads × 8 dims): the whole CSR kernel (``csr_attention``) and its parts — the SDDMM
  (``sampled_addmm``), the segment softmax over the CSR rows (with its denominator, a segment
  sum), the SpMM — against the named baseline, attention without a plan: gather, segment
  softmax and scatter on the edge list (``index_select`` and the package's public
  ``segment_softmax`` / ``scatter_sum``: what the kernel does on devices without the CSR path);
* *the segment sum* (softmax denominator and softmax backward): ``torch.segment_reduce`` against
  ``index_add_`` on the vector, as ``scatter.segment_sum_sorted`` takes it.

Usage::

    python benchmarks/inference_parts.py
    python benchmarks/inference_parts.py --repeats 20 --calls 50
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # time this checkout's package, not another installed copy

import torch  # noqa: E402
from _measure import interleaved_min, print_table  # noqa: E402
from ct_step import ct_kwargs, load_data, prune_to_lifting  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402

from topomodelx_attention.nn.attention import sparse_plan  # noqa: E402
from topomodelx_attention.nn.attention.fused import fused_subset, prepare_fused_edges  # noqa: E402
from topomodelx_attention.nn.attention.scatter import (  # noqa: E402
    expand_segments,
    scatter_sum,
    segment_softmax,
    segment_softmax_sorted,
    segment_sum_sorted,
)
from topomodelx_attention.nn.attention.sparse_op import csr_attention  # noqa: E402
from topomodelx_attention.nn.cell import CellularTransformer  # noqa: E402

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


def rows(x: torch.Tensor) -> torch.Tensor:
    """``(n, heads, d)`` -> contiguous ``(n·heads, d)``: the node-major operand of the CSR kernel."""
    return x.contiguous().view(x.shape[0] * x.shape[1], x.shape[2])


def csr(plan, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A CSR matrix with the plan's node-major pattern and ``values``."""
    return torch.sparse_csr_tensor(plan.crow, plan.col, values, shape, check_invariants=False)


def sddmm(plan, left: torch.Tensor, right: torch.Tensor, shape: tuple[int, int], scale: float) -> torch.Tensor:
    """``scale · <left_i, right_j>`` on the plan's stored entries (``torch.sparse.sampled_addmm``)."""
    zeros = csr(plan, left.new_zeros(plan.col.shape[0]), shape)
    torch.sparse.sampled_addmm(zeros, left, right.t(), beta=0.0, alpha=scale, out=zeros)
    return zeros.values()


def spmm(matrix: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    """``matrix @ dense`` (CSR × dense) into a fresh tensor (``addmm`` with ``beta = 0``)."""
    out = dense.new_empty((matrix.shape[0], dense.shape[1]))
    return torch.addmm(out, matrix, dense, beta=0.0, out=out)


def gather_scatter_attention(query, key, value, index_t, index_s, scale: float) -> torch.Tensor:
    """Sparse attention without a plan: gather, segment softmax, scatter on the edge list."""
    scores = (query.index_select(0, index_t) * key.index_select(0, index_s)).sum(-1) * scale
    alpha = segment_softmax(scores, index_t, query.shape[0])
    return scatter_sum(alpha.unsqueeze(-1) * value.index_select(0, index_s), index_t, query.shape[0])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="interleaved rounds (minimum kept)")
    parser.add_argument("--calls", type=int, default=30, help="calls per case and round (mean kept)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    complexes, _, num_classes, _ = load_data(8)
    options = argparse.Namespace(hidden=32, layers=2, heads=4, pe_dim=8)
    in_channels = [complexes[0][f"x_{r}"].shape[1] for r in range(3)]
    model = CellularTransformer(in_channels, **ct_kwargs(options, num_classes)).eval()
    batch = next(iter(DataLoader(prune_to_lifting(complexes, model), batch_size=32)))
    layer = model.layers[0]
    with torch.no_grad():
        structure = model.prepare(batch).structure
    fused = structure.fused
    index, plan = fused.index, fused.plan
    (n_q, n_k), heads, dim = index.shape, 4, 8
    sizes = tuple(int(batch[f"batch_{r}"].shape[0]) for r in range(3))
    every = layer.fused.active(sizes)
    by_key = {}
    for name in model.neighborhood_keys:
        kind, rank = name.rsplit("_", 1)
        by_key[name] = batch.neighborhood(kind, int(rank))
    # the (n_target, n_source) matrix of every arrow; those of the fused blocks, in their order
    arrow_matrices = layer.prepare_neighborhoods(by_key)
    arrows = [a for a in layer.arrows if a in arrow_matrices]
    if [(a.source, a.target) for a in arrows] != list(layer.fused.pairs):
        raise SystemExit("this benchmark needs a CT whose sparse arrows are all fused (pairwise sparse)")
    arrows = [arrows[i] for i in every]
    pairs = [(a.source, a.target) for a in arrows]
    edges = [tuple(arrow_matrices[a].indices()) for a in arrows]
    batch_vectors = [batch[f"batch_{r}"] for r in range(3)]
    output_ranks = structure.output_ranks  # the last layer's ranks (the readout's)
    active = layer.fused.active(sizes, output_ranks)
    subset = [every.index(i) for i in active]

    query, key, value = (torch.randn(n, heads, dim) for n in (n_q, n_k, n_k))
    shape = (n_q * heads, n_k * heads)
    q_rows, k_rows, v_rows = rows(query), rows(key), rows(value)
    scale = dim**-0.5
    scores = sddmm(plan, q_rows, k_rows, shape, scale).unsqueeze(0)
    alpha = segment_softmax_sorted(scores, plan.row, plan.lengths).squeeze(0)
    row_max = torch.segment_reduce(scores, "max", lengths=plan.lengths, axis=1, unsafe=True)

    cases = {
        "prepare": lambda: model.prepare(batch),
        "layer prepare": lambda: layer.prepare(by_key, batch_vectors, batch.num_complexes, output_ranks=output_ranks),
        "edges": lambda: prepare_fused_edges(pairs, edges, sizes),
        "plan": lambda: sparse_plan(index, heads, transposed=False),
        "subset": lambda: fused_subset(fused, pairs, subset, sizes),
        "kernel": lambda: csr_attention(query, key, value, plan, scale),
        "sddmm": lambda: sddmm(plan, q_rows, k_rows, shape, scale),
        "softmax": lambda: segment_softmax_sorted(scores, plan.row, plan.lengths),
        "spmm": lambda: spmm(csr(plan, alpha, shape), v_rows),
        "composable": lambda: gather_scatter_attention(
            query, key, value, index.index_target, index.index_source, scale
        ),
        "sum reduce": lambda: torch.segment_reduce(scores, "sum", lengths=plan.lengths, axis=1, unsafe=True),
        "sum index_add": lambda: segment_sum_sorted(scores, plan.row, plan.lengths),
        "max reduce": lambda: torch.segment_reduce(scores, "max", lengths=plan.lengths, axis=1, unsafe=True),
        "expand": lambda: expand_segments(row_max, plan.row),
    }
    with torch.no_grad():
        same = torch.equal(cases["sum reduce"](), cases["sum index_add"]())
        reference = csr_attention(query, key, value, plan, scale)[0]
        difference = (reference - cases["composable"]()).abs().max().item()

        def timed(fn):
            def run():
                for _ in range(args.calls):
                    fn()
            return run

        best = interleaved_min({k: timed(f) for k, f in cases.items()}, args.repeats, 2, time.thread_time)
    us = {k: 1e6 * v / args.calls for k, v in best.items()}
    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {args.threads} thread(s), thread clock, min of {args.repeats} "
          f"interleaved rounds of {args.calls} calls; 1-min load {load:.1f}")
    print(f"one MUTAG batch: {batch.num_complexes} complexes, cells {sizes}; joined fused problem "
          f"{n_q} query rows × {n_k} key rows, {index.index_target.shape[0]} entries × {heads} heads "
          f"({plan.col.shape[0]} stored values, {plan.lengths.shape[1]} CSR rows)")
    print_table(
        "structure of one batch (µs per batch)",
        ["part", "µs", "share of prepare"],
        [[name, f"{us[k]:.0f}", "" if k == "prepare" else f"{us[k] / us['prepare']:.0%}"]
         for name, k in [("the model's prepare", "prepare"), ("of it: the layer's prepare (structure)", "layer prepare"),
                         ("joined edge list", "edges"),
                         ("its CSR plan (no transpose)", "plan"), ("last layer's slice", "subset")]],
    )
    print_table(
        "one fused sparse attention call on that problem (µs per call)",
        ["kernel / part", "µs", "vs CSR kernel"],
        [[name, f"{us[k]:.0f}", f"{us[k] / us['kernel']:.2f}×"]
         for name, k in [("CSR kernel (csr_attention), plan given", "kernel"), ("  SDDMM (sampled_addmm)", "sddmm"),
                         ("  segment softmax", "softmax"), ("  SpMM", "spmm"),
                         ("gather / softmax / scatter kernel, no plan", "composable")]],
    )
    print(f"(largest output difference, CSR kernel vs gather / scatter kernel: {difference:.1e})")
    print_table(
        "segment reductions over the CSR rows (µs per call)",
        ["reduction", "µs", "vs segment_reduce sum"],
        [[name, f"{us[k]:.0f}", f"{us[k] / us['sum reduce']:.2f}×"]
         for name, k in [("sum, torch.segment_reduce", "sum reduce"), ("sum, index_add_ (segment_sum_sorted)", "sum index_add"),
                         ("max, torch.segment_reduce", "max reduce"), ("gather per entry (expand_segments)", "expand")]],
    )
    print(f"(the two sums are bit-identical: {same})")


if __name__ == "__main__":
    main()
