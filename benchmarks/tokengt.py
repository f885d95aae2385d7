"""TokenGT benchmarks (forward + backward, CPU).

Tables
------
1. **TokenGT encoder vs ``torch.nn.TransformerEncoder``** of the same size
   (``norm_first=True``, GELU, same width / heads / FFN width / layers, final LayerNorm,
   ``batch_first=True``) on the same tokens: the tokens of a batch of Barabási–Albert graphs
   (``[graph]`` + node + directed-edge tokens, 20–60 tokens per graph), the baseline getting
   every graph's tokens padded to the longest graph with ``src_key_padding_mask`` (the padding
   is prepared outside the timed region, which favours the baseline). Rows: our encoder stack
   from the packed ``(n_tokens, d)`` tokens and their batch vector (layout computed inside,
   each form ``auto`` / ``packed`` / ``padded``), and the whole TokenGT model from the PyG
   batch (tokenizer included: features, identifiers, type embeddings, ``[graph]`` token,
   layout; graph-level head). Two batches: graphs of different sizes, and graphs of one size
   (no padding at all; the baseline is then also run without a mask). **Target ≤ 1.1×.**
2. **Performer scaling**: the whole TokenGT model with FAVOR+ attention on one graph of
   10³ … 10⁵ tokens (a BA graph, ORF identifiers); time and memory per token must stay flat.
   Exact softmax attention (SDPA) is shown for comparison up to ``--max-softmax-tokens``.

Time is the minimum over interleaved repeats of forward + ``out.sum().backward()``, on one
intra-op thread by default (``--threads``): on a shared 2-core machine the thread pool's
synchronisation makes multi-threaded timings erratic.
Memory is measured reliably on CPU as the bytes of the distinct tensor storages autograd saves
for backward (``torch.autograd.graph.saved_tensors_hooks``): the activation memory that grows
with the number of tokens (parameters, gradients and transient buffers are not counted).

Usage::

    python benchmarks/tokengt.py --quick        # ~1 minute
    python benchmarks/tokengt.py                # full tables (a few minutes)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial

import networkx as nx
import torch
from _compile import compile_rows, print_compile_table
from _measure import add_int_options, memory_fwd_bwd, print_table, time_cases
from torch import Tensor, nn
from torch_geometric.data import Batch, Data

from topomodelx_attention.nn.attention import default_num_random_features, padded_layout
from topomodelx_attention.nn.graph import TokenGT, TokenGTEncoder, TokenGTLayer
from topomodelx_attention.transforms import OrthogonalRandomNodeId

CPU = torch.device("cpu")


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
def ba_graph(n: int, k: int, seed: int, in_channels: int, edge_channels: int, id_dim: int) -> Data:
    """Barabási–Albert graph with random node / edge features and ORF identifiers."""
    graph = nx.barabasi_albert_graph(n, k, seed=seed)
    edges = torch.tensor(list(graph.edges), dtype=torch.long).t().reshape(2, -1)
    edge_index = torch.cat([edges, edges.flip(0)], dim=1)
    generator = torch.Generator().manual_seed(seed)
    data = Data(
        x=torch.randn(n, in_channels, generator=generator),
        edge_index=edge_index,
        edge_attr=torch.randn(edge_index.shape[1], edge_channels, generator=generator),
        num_nodes=n,
    )
    return OrthogonalRandomNodeId(id_dim, seed=seed)(data)


def graph_batch(num_graphs: int, sizes: list[int], args) -> Batch:
    """BA graphs with k = 2: ``1 + n + 4 (n - 2)`` tokens each (23 … 58 for n = 6 … 13)."""
    graphs = [
        ba_graph(sizes[i % len(sizes)], 2, i, args.in_channels, args.edge_channels, args.id_dim)
        for i in range(num_graphs)
    ]
    return Batch.from_data_list(graphs)


# ----------------------------------------------------------------------------------------------
# table 1
# ----------------------------------------------------------------------------------------------
def seeded_tokengt(args, channels: int, layers: int, heads: int, **options) -> TokenGT:
    """TokenGT on the benchmark graphs (``--in-channels``, ``--edge-channels``, ``--id-dim``),
    one output, initialised under ``torch.manual_seed(0)``."""
    torch.manual_seed(0)
    return TokenGT(
        args.in_channels,
        args.edge_channels,
        channels,
        1,
        n_layers=layers,
        heads=heads,
        node_id_dim=args.id_dim,
        **options,
    )


def encoder_table(args, title: str, batch: Batch) -> None:
    d = args.channels
    model = seeded_tokengt(args, d, args.layers, args.heads, ffn_channels=args.ffn)
    with torch.no_grad():
        tokens = model.tokenize(batch)
    x = tokens.x.detach().clone().requires_grad_(True)
    token_batch = tokens.layout.batch
    num = tokens.num_complexes
    layout = padded_layout(token_batch, num)
    counts = layout.counts

    base_layer = nn.TransformerEncoderLayer(
        d, args.heads, args.ffn, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    baseline = nn.TransformerEncoder(
        base_layer, args.layers, norm=nn.LayerNorm(d), enable_nested_tensor=False
    )
    encoders = {}
    for form in ("auto", "packed", "padded"):
        layer = partial(TokenGTLayer, d, heads=args.heads, ffn_channels=args.ffn)
        encoder = TokenGTEncoder(d, layer=layer, n_layers=args.layers, token_layout=form)
        for mine, theirs in zip(encoder.layers, baseline.layers):
            mine.load_from_torch(theirs)
        encoders[form] = encoder
    model.encoder.load_state_dict(encoders["auto"].state_dict())
    dense = layout.pad(x.detach()).clone().requires_grad_(True)
    pad_mask = ~layout.key_valid
    valid = layout.key_valid

    cases: dict[str, Callable[[], Tensor]] = {
        "nn.TransformerEncoder (padded + mask)": lambda: baseline(
            dense, src_key_padding_mask=pad_mask
        )[valid],
    }
    if bool(valid.all()):
        cases["nn.TransformerEncoder (no mask needed)"] = lambda: baseline(dense).flatten(0, 1)
    chosen = "padded" if encoders["auto"].use_padded(layout) else "packed"
    cases[f"TokenGT encoder, auto (→ {chosen})"] = lambda: encoders["auto"](x, token_batch, num)
    cases["TokenGT encoder, packed"] = lambda: encoders["packed"](x, token_batch, num)
    cases["TokenGT encoder, padded"] = lambda: encoders["padded"](x, token_batch, num)
    cases["TokenGT model (tokenizer + encoder + head)"] = lambda: model(batch)
    times = time_cases(cases, CPU, args.repeats, warmup=1)
    base_name = next(iter(cases))
    rows = []
    for name, fn in cases.items():
        mib = memory_fwd_bwd(fn, CPU)
        rows.append(
            [
                name,
                f"{1e3 * times[name]:.1f}",
                f"{times[name] / times[base_name]:.2f}x",
                f"{mib:.1f}",
            ]
        )
    print_table(
        f"{title}: {num} graphs, {x.shape[0]:,} tokens ({int(counts.min())}–{int(counts.max())} "
        f"per graph, grid fill {layout.fill:.2f}); {args.layers} layers, d={d}, {args.heads} "
        f"heads, FFN {args.ffn}; forward+backward, {torch.get_num_threads()} thread(s)",
        ["model", "time (ms)", "ratio vs nn.TransformerEncoder", "saved for backward (MiB)"],
        rows,
    )


# ----------------------------------------------------------------------------------------------
# table 2
# ----------------------------------------------------------------------------------------------
def scaling_table(args) -> None:
    rows = []
    d = args.scaling_channels
    for tokens in args.scaling_tokens:
        n = max(4, round((tokens + 7) / 5))  # BA(n, 2): 1 + n + 4 (n - 2) tokens
        graph = ba_graph(n, 2, 0, args.in_channels, args.edge_channels, args.id_dim)
        num_tokens = 1 + n + graph.edge_index.shape[1]
        for kind in ("linear", "dense"):
            if kind == "dense" and num_tokens > args.max_softmax_tokens:
                continue
            model = seeded_tokengt(
                args, d, args.scaling_layers, args.scaling_heads, kind=kind, ffn_channels=2 * d
            )
            repeats = args.repeats if num_tokens <= 20_000 else max(1, args.repeats // 3)
            seconds = time_cases({"m": lambda model=model: model(graph)}, CPU, repeats, warmup=1)["m"]
            mib = memory_fwd_bwd(lambda model=model: model(graph), CPU)
            rows.append(
                [
                    f"{num_tokens:,}",
                    kind,
                    f"{1e3 * seconds:.1f}",
                    f"{1e6 * seconds / num_tokens:.2f}",
                    f"{mib:.1f}",
                    f"{2**20 * mib / num_tokens:.0f}",
                ]
            )
    features = default_num_random_features(d // args.scaling_heads)
    print_table(
        f"TokenGT on one BA graph (k=2), whole model, {args.scaling_layers} layers, d={d}, "
        f"{args.scaling_heads} heads, FFN {2 * d}, {features} random features; forward+backward "
        f"(flat per-token columns = linear growth)",
        ["tokens", "kind", "time (ms)", "µs / token", "saved (MiB)", "bytes / token"],
        rows,
    )


def compile_table(args) -> None:
    """Compiled (inductor, dynamic=True) vs eager TokenGT, forward + backward (``--compile``).

    Lifted-free MUTAG graphs with Laplacian identifiers; the model is compiled once and run on
    ``model.prepare(batch)`` for several batch sizes (``graphs`` = compilations so far).
    """
    import tempfile

    from topomodelx_attention.datasets.tu import load_tu_dataset
    from topomodelx_attention.transforms import LaplacianNodeId

    with tempfile.TemporaryDirectory() as root:
        graphs = list(load_tu_dataset("MUTAG", root=root))
    graphs = [LaplacianNodeId(8)(g) for g in graphs[: max(args.compile_batches)]]
    batches = [Batch.from_data_list(graphs[:size]) for size in args.compile_batches]
    rows = []
    for kind in ("dense", "linear"):
        torch.manual_seed(0)
        model = TokenGT(
            7, 4, args.compile_channels, 2, n_layers=args.compile_layers, heads=4,
            node_id_dim=8, kind=kind, token_layout="packed", sign_flip=False,
        ).train()
        rows += compile_rows(model, batches, f"TokenGT {kind}", args.repeats)
    print_compile_table("TokenGT", args, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1: stable on a shared box)"
    )
    add_int_options(
        parser, graphs=64, channels=128, heads=8, ffn=256, layers=4, in_channels=16, edge_channels=4,
        id_dim=16, repeats=15, scaling_channels=64, scaling_heads=4, scaling_layers=2,
    )
    parser.add_argument(
        "--scaling-tokens", type=int, nargs="+", default=[1_000, 3_000, 10_000, 30_000, 100_000]
    )
    parser.add_argument("--max-softmax-tokens", type=int, default=10_000)
    parser.add_argument("--skip-encoder", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--compile", action="store_true", help="run only the compiled-vs-eager table")
    parser.add_argument("--compile-batches", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--compile-channels", type=int, default=32)
    parser.add_argument("--compile-layers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.compile:
        args.skip_encoder = args.skip_scaling = True
    if args.quick:
        args.repeats = 5
        args.scaling_tokens = [1_000, 3_000, 10_000]
        args.max_softmax_tokens = 3_000
    torch.set_num_threads(args.threads)
    if not args.skip_encoder:
        sizes = list(range(6, 14))  # 23 … 58 tokens per graph
        encoder_table(args, "Graphs of different sizes", graph_batch(args.graphs, sizes, args))
        encoder_table(args, "Graphs of one size (no padding)", graph_batch(args.graphs, [9], args))
    if not args.skip_scaling:
        scaling_table(args)
    if args.compile:
        compile_table(args)


if __name__ == "__main__":
    main()
