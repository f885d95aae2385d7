"""Cellular Transformer training step vs PyG's GPS on lifted MUTAG.

One training *epoch* (forward, cross-entropy, backward, Adam step over every batch) of

* **CT**: :class:`~topomodelx_attention.nn.cell.CellularTransformer`, pairwise sparse attention,
  the default tensor diagram, width 32, 2 layers, 4 heads, cellular random-walk PE (dim 8,
  ConcatPE) on ``CellCycleLifting`` of MUTAG (ranks 0..2), the harness defaults;
* **GPS** (the named baseline): ``torch_geometric.nn.GPSConv`` with a ``GINEConv`` local model
  and multi-head attention, same width / depth / heads, RWSE positional encoding (PyG's
  ``AddRandomWalkPE``, 8 steps) on the same graphs: input ``x_0`` (node features),
  ``edge_index`` of the graph, ``edge_attr = x_1`` (the edge features), add pooling, the same
  readout MLP shape;
* optionally **CT@REF** (``--compare-ref REF``): the ``nn/cell`` code of a git revision, loaded
  side by side, with the *same parameters* as CT (its ``state_dict``); the script checks the
  two give the same outputs before timing.

Batches (size 32) are collated once, outside the timed region (collation is excluded). Time is
the minimum over ``--repeats`` interleaved rounds after ``--warmup`` epochs, with
``torch.set_num_threads(1)`` (set ``OMP_NUM_THREADS=1`` too) for stable numbers.

The profile splits one CT epoch into parts with timers around methods (forward only: the
model's ``prepare`` — once per batch, inside ``forward`` — ``encode`` and its layers, and the
readout + pooling that is left) plus the backward + optimiser step, and lists the heaviest
operators (forward and backward) from ``torch.profiler``.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/ct_step.py --quick
    OMP_NUM_THREADS=1 python benchmarks/ct_step.py --compare-ref main
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
import types
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # time this checkout's package, not another installed copy

import torch  # noqa: E402
from _measure import add_common_args, interleaved_min, print_table  # noqa: E402
from torch import Tensor, nn  # noqa: E402
from torch_geometric.data import Batch, Data  # noqa: E402
from torch_geometric.nn import GINEConv, GPSConv, global_add_pool  # noqa: E402
from torch_geometric.transforms import AddRandomWalkPE  # noqa: E402

import topomodelx_attention.nn.attention.kernels as kernels_module  # noqa: E402
import topomodelx_attention.nn.cell.cellular_transformer_layer as layer_module  # noqa: E402
from topomodelx_attention.datasets.tu import load_tu_dataset  # noqa: E402
from topomodelx_attention.files import write_text  # noqa: E402
from topomodelx_attention.nn.attention import MultiHeadAttention  # noqa: E402
from topomodelx_attention.nn.cell import CellularTransformer  # noqa: E402
from topomodelx_attention.nn.common import ReadoutMLP  # noqa: E402
from topomodelx_attention.transforms import CellCycleLifting, CellularRandomWalkPE  # noqa: E402

CELL_DIR = "topomodelx_attention/nn/cell"


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
def load_data(pe_dim: int) -> tuple[list, list[Data], int, int]:
    """Lifted MUTAG complexes (with ``pe_r``) and the same graphs for GPS (with RWSE)."""
    with tempfile.TemporaryDirectory() as root:
        dataset = load_tu_dataset("MUTAG", root=root)
        graphs = list(dataset)
    complexes = CellCycleLifting().lift_many(graphs)
    pe = CellularRandomWalkPE(pe_dim)
    complexes = [pe(c) for c in complexes]
    rwse = AddRandomWalkPE(pe_dim, attr_name="pe")
    gps_graphs = []
    for c in complexes:  # GPS sees x_0, the graph's edge_index and edge_attr = x_1
        graph = Data(x=c.x_0, edge_index=c.edge_index, y=c.y, num_nodes=c.x_0.shape[0])
        edge_attr = c.x_1[_edge_of_arc(c.edge_index, c.incidence_1)]
        graph.edge_attr = edge_attr
        gps_graphs.append(rwse(graph))
    num_classes = int(torch.cat([c.y for c in complexes]).max()) + 1
    return complexes, gps_graphs, num_classes, int(complexes[0].x_1.shape[1])


def _edge_of_arc(edge_index: Tensor, incidence_1: Tensor) -> Tensor:
    """Index of the 1-cell of every arc ``(u, v)`` of ``edge_index`` (from ``incidence_1``)."""
    rows, cols = incidence_1.coalesce().indices()
    n = incidence_1.shape[0]
    order = torch.argsort(cols, stable=True)
    ends = rows[order].view(-1, 2)  # both vertices of every edge, edges in order
    keys = torch.minimum(ends[:, 0], ends[:, 1]) * n + torch.maximum(ends[:, 0], ends[:, 1])
    arcs = torch.minimum(edge_index[0], edge_index[1]) * n + torch.maximum(edge_index[0], edge_index[1])
    sorted_keys, perm = torch.sort(keys)
    pos = torch.searchsorted(sorted_keys, arcs)
    if not torch.equal(sorted_keys[pos], arcs):
        raise RuntimeError("an arc of edge_index is not a 1-cell")
    return perm[pos]


def prune(complexes: list, keep: set[str]) -> list:
    """Copies keeping only the keys a model reads (as the harness does before batching)."""
    out = []
    for c in complexes:
        c = c.clone()
        for key in list(c.keys()):
            if key not in keep:
                del c[key]
        out.append(c)
    return out


def prune_to_lifting(complexes: list, model: nn.Module) -> list:
    """Copies keeping every dense key and only ``model``'s neighbourhoods: the README's loop
    (``CellCycleLifting(neighborhoods=model.neighborhood_keys)``)."""
    dense = {k for k, v in complexes[0].items() if not (isinstance(v, torch.Tensor) and v.is_sparse)}
    return prune(complexes, dense | set(model.neighborhood_keys))


def batches(items: list, size: int) -> list:
    return [Batch.from_data_list(items[i : i + size]) for i in range(0, len(items), size)]


# ----------------------------------------------------------------------------------------------
# models
# ----------------------------------------------------------------------------------------------
class GPS(nn.Module):
    """PyG GPS: node/PE/edge encoders, ``GPSConv(GINEConv, multihead)`` layers, add pool, MLP."""

    def __init__(self, in_channels: int, edge_channels: int, pe_dim: int, hidden: int, out: int, layers: int, heads: int):
        super().__init__()
        self.node = nn.Linear(in_channels + pe_dim, hidden)
        self.edge = nn.Linear(edge_channels, hidden)
        self.convs = nn.ModuleList()
        for _ in range(layers):
            mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
            self.convs.append(GPSConv(hidden, GINEConv(mlp), heads=heads, attn_type="multihead", attn_kwargs={"dropout": 0.1}))
        self.readout = ReadoutMLP(hidden, out, 1, 0.0)

    def forward(self, data: Batch) -> Tensor:
        x = self.node(torch.cat([data.x, data.pe], dim=-1))
        edge_attr = self.edge(data.edge_attr)
        for conv in self.convs:
            x = conv(x, data.edge_index, data.batch, edge_attr=edge_attr)
        return self.readout(global_add_pool(x, data.batch, size=data.num_graphs))


def load_reference_cell(ref: str) -> types.ModuleType:
    """Import ``nn/cell`` of git revision ``ref`` as a separate package (``_ct_ref``)."""
    name = "_ct_ref"
    directory = Path(tempfile.mkdtemp()) / name
    files = ("cellular_transformer_layer.py", "cellular_transformer.py")
    for file in files:
        text = subprocess.run(
            ["git", "show", f"{ref}:{CELL_DIR}/{file}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        text = text.replace("topomodelx_attention.nn.cell.cellular_transformer_layer", f"{name}.cellular_transformer_layer")
        write_text(directory / file, text, root=directory.parent)
    write_text(directory / "__init__.py", "", root=directory.parent)
    sys.path.insert(0, str(directory.parent))
    package = importlib.import_module(name)
    for file in files:
        importlib.import_module(f"{name}.{file[:-3]}")
    return package


def ct_kwargs(args: argparse.Namespace, num_classes: int) -> dict:
    return dict(
        hidden_channels=args.hidden, out_channels=num_classes, n_layers=args.layers, heads=args.heads,
        attention="pairwise", kind="sparse", pe_options={"channels": args.pe_dim},
    )


# ----------------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------------
def make_epoch(model: nn.Module, data: list) -> Callable[[], None]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()

    def epoch() -> None:
        for batch in data:
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(batch), batch.y)
            loss.backward()
            optimizer.step()

    return epoch


CLOCKS = {"process": time.process_time, "wall": time.perf_counter}


def time_epochs(
    epochs: dict[str, Callable[[], None]], repeats: int, warmup: int, clock: Callable[[], float]
) -> dict[str, float]:
    """Seconds per epoch of every model: minimum over ``repeats`` interleaved rounds."""
    return interleaved_min(epochs, repeats, warmup, clock)


# ----------------------------------------------------------------------------------------------
# profile
# ----------------------------------------------------------------------------------------------
PARTS = {  # (owner, method) → timer name; nested timers are subtracted below
    (CellularTransformer, "forward"): "forward",
    (CellularTransformer, "prepare"): "prepare",  # inside forward, outside encode
    (CellularTransformer, "_encode"): "encode",  # encode and forward (its last layer pruned) both call it
    (CellularTransformer, "_embed"): "embed",
    (layer_module.CellularTransformerLayer, "prepare_neighborhoods"): "neighbourhoods",
    (layer_module.CellularTransformerLayer, "forward"): "layer",
    (layer_module.CellularTransformerLayer, "_pairwise"): "attention block",
    (MultiHeadAttention, "attend"): "attend",
    (kernels_module, "sparse_attention"): "attend",  # the fused sparse arrows (if the layer has them)
    (layer_module, "prepare_fused_index"): "plan",  # their index plan and CSR plan, built once (in prepare)
}


def profile_parts(
    model: nn.Module, data: list, rounds: int, clock: Callable[[], float], train: bool = True
) -> dict[str, float]:
    """Milliseconds per epoch of every part (forward timers; backward + step measured whole).

    ``train=False``: inference, ``eval`` mode under ``torch.no_grad`` (no loss, no backward).
    """
    totals: dict[str, float] = defaultdict(float)
    originals = {}

    def wrap(owner: object, method: str, label: str) -> None:
        if not hasattr(owner, method):
            return
        original = getattr(owner, method)
        originals[(owner, method)] = original

        def timed(*a, **k):
            start = clock()
            try:
                return original(*a, **k)
            finally:
                totals[label] += clock() - start

        setattr(owner, method, timed)

    for (owner, method), label in PARTS.items():
        wrap(owner, method, label)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train(train)
    try:
        with torch.set_grad_enabled(train):
            for _ in range(rounds):
                for batch in data:
                    optimizer.zero_grad(set_to_none=True)
                    start = clock()
                    out = model(batch)
                    if train:
                        nn.functional.cross_entropy(out, batch.y).backward()
                        optimizer.step()
                    totals["step"] += clock() - start
    finally:
        model.train()
        for (owner, method), original in originals.items():
            setattr(owner, method, original)
    t = defaultdict(float, {k: 1e3 * v / rounds for k, v in totals.items()})
    # ``forward(batch)`` = ``prepare`` (once per batch: checks, neighbourhood conversion, index
    # plan) + ``encode`` (embedding, layers, final norm) + readout and pooling. The layers read
    # the prepared structure, so the neighbourhood and plan timers fall inside ``prepare``.
    structure = t["neighbourhoods"] + t["plan"]
    return {
        "prepare: neighbourhoods (conversion, coalesce, transposes, index plan)": structure,
        "prepare: input checks, key access, cell counts": t["prepare"] - structure,
        "embedding + PE (Eq. 4)": t["embed"],
        "projections Q/K/V/O, dropout, sums over arrows": t["attention block"] - t["attend"],
        "attention kernels (SDDMM, segment softmax, SpMM)": t["attend"],
        "LayerNorm + FFN + residuals": t["layer"] - t["attention block"],
        "final norm + loop (encode - embed - layers)": t["encode"] - t["embed"] - t["layer"],
        "readout MLP + pooling (forward - prepare - encode)": t["forward"] - t["prepare"] - t["encode"],
        "loss + backward + Adam step": t["step"] - t["forward"],
        "total step": t["step"],
    }


def profile_ops(model: nn.Module, data: list, top: int) -> list[list[str]]:
    from torch.profiler import ProfilerActivity, profile

    epoch = make_epoch(model, data)
    epoch()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        epoch()
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    return [
        [e.key, str(e.count), f"{e.self_cpu_time_total / 1e3:.2f}", f"{100 * e.self_cpu_time_total / total:.1f}"]
        for e in events[:top]
    ]


# ----------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(
        parser,
        repeats=5,
        quick="3 repeats, 1 warm-up epoch, 3 profiled epochs",
        clocks=CLOCKS,
        clock="process",
        clock_help="process: CPU time of this process (robust on a shared machine; with one thread it "
        "is the wall time of an idle machine); wall: elapsed time",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--compare-ref", default=None, help="git revision whose nn/cell is timed too (CT@REF)")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.warmup = 3, 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    complexes, graphs, num_classes, edge_channels = load_data(args.pe_dim)
    ct = CellularTransformer([c.shape[1] for c in (complexes[0].x_0, complexes[0].x_1, complexes[0].x_2)], **ct_kwargs(args, num_classes))
    keep = {f"{k}_{r}" for k in ("x", "batch", "pe") for r in range(3)} | {"y", "shape", "num_nodes"}
    keep |= set(ct.neighborhood_keys)
    ct_batches = batches(prune(complexes, keep), args.batch_size)
    gps_batches = batches(graphs, args.batch_size)
    gps = GPS(graphs[0].x.shape[1], edge_channels, args.pe_dim, args.hidden, num_classes, args.layers, args.heads)

    models: dict[str, tuple[nn.Module, list]] = {"GPS (PyG GPSConv + GINEConv)": (gps, gps_batches), "CT": (ct, ct_batches)}
    if args.compare_ref:
        reference = load_reference_cell(args.compare_ref)
        old = reference.cellular_transformer.CellularTransformer(
            [c.shape[1] for c in (complexes[0].x_0, complexes[0].x_1, complexes[0].x_2)], **ct_kwargs(args, num_classes)
        )
        missing, unexpected = old.load_state_dict(ct.state_dict(), strict=False)
        if missing or unexpected:  # a former layout (one module per arrow / rank): this CT reads it
            missing, unexpected = ct.load_state_dict(old.state_dict(), strict=False)
        if missing or unexpected:
            print(f"CT@{args.compare_ref}: state_dict differs (missing {missing}, unexpected {unexpected})")
        else:
            ct.eval(), old.eval()
            with torch.no_grad():
                diff = max(float((ct(b) - old(b)).abs().max()) for b in ct_batches)
            print(f"CT vs CT@{args.compare_ref}, same parameters, eval mode: max |difference| = {diff:.2e}")
        models[f"CT@{args.compare_ref}"] = (old, ct_batches)

    n_params = {name: sum(p.numel() for p in m.parameters()) for name, (m, _) in models.items()}
    epochs = {name: make_epoch(m, d) for name, (m, d) in models.items()}
    best = time_epochs(epochs, args.repeats, args.warmup, CLOCKS[args.clock])
    base = best["GPS (PyG GPSConv + GINEConv)"]
    rows = [
        [name, str(n_params[name]), f"{1e3 * best[name]:.1f}", f"{best[name] / base:.2f}×"] for name in models
    ]
    print_table(
        f"Training epoch on lifted MUTAG ({len(complexes)} complexes, {len(ct_batches)} batches of "
        f"{args.batch_size}; width {args.hidden}, {args.layers} layers, {args.heads} heads; min of "
        f"{args.repeats} interleaved repeats, {args.clock} time, {torch.get_num_threads()} thread(s))",
        ["model", "parameters", "ms / epoch", "vs GPS"],
        rows,
    )
    if args.no_profile:
        return
    rounds = 3 if args.quick else 5
    parts = profile_parts(ct, ct_batches, rounds, CLOCKS[args.clock])
    inference = profile_parts(ct, ct_batches, rounds, CLOCKS[args.clock], train=False)
    step, infer = parts["total step"], inference["total step"]
    rows = [
        [k, f"{v:.1f}", f"{100 * v / step:.0f}%", f"{inference[k]:.1f}", f"{100 * inference[k] / infer:.0f}%"]
        for k, v in parts.items()
        if k != "loss + backward + Adam step"
    ]
    rows.insert(-1, ["loss + backward + Adam step", f"{parts['loss + backward + Adam step']:.1f}",
                     f"{100 * parts['loss + backward + Adam step'] / step:.0f}%", "—", "—"])
    print_table(
        f"CT epoch by part (ms / epoch, mean of {rounds} epochs, {args.clock}-time timers; backward "
        "is one part; inference = eval mode under torch.no_grad)",
        ["part", "training ms", "share", "inference ms", "share"],
        rows,
    )
    print_table(
        "CT epoch: heaviest operators (torch.profiler, self CPU time, forward + backward)",
        ["operator", "calls", "ms", "%"],
        profile_ops(ct, ct_batches, 15),
    )


if __name__ == "__main__":
    main()
