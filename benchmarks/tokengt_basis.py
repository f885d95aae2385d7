"""TokenGT §5.1 / A.3.2: can self-attention approximate the 2→2 equivariant basis?

One multi-head self-attention layer with ``bell(4) = 15`` heads (the shared core's
:class:`~topomodelx_attention.nn.attention.MultiHeadAttention`, dense kind, attention maps from
its :meth:`attention_weights`) reads the order-2 tokens of a Barabási–Albert graph
(``n ~ U(10, 20)``, attachment ``k ~ U(2, 3)``, no features): node tokens ``(i, i)`` and edge
tokens ``(i, j)`` built by :class:`~topomodelx_attention.nn.graph.TokenGTTokenizer`
(``W [P_i; P_j] + E``), plus a learned ``[null]`` token. Head ``h`` is supervised (L2) to equal
the row-normalised basis tensor ``B^{μ_h}`` of the ``h``-th equality pattern ``μ_h`` of the
index 4-tuple ``(i, j, k, l)`` (query token ``(i, j)``, key token ``(k, l)``); a query row
whose basis row is empty must put all its weight on ``[null]``.

Configurations: node identifiers {none, random (i.i.d. Gaussian ``N(0, 1/d_p)``, not
orthogonal, fresh per step, d_p = 24), ORF (``OrthogonalRandomNodeId``, fresh per step,
d_p = 24), Laplacian (``LaplacianNodeId``, d_p = 20)} × type identifiers {with, without} ×
input {sparse: the n node tokens and 2m directed edge tokens; dense: all n² pairs}. In training
every identifier column gets a random sign per graph (``random_sign_flip``: the paper's
augmentation for Laplacian eigenvectors; it leaves the ORF and Gaussian distributions
unchanged).

Loss (train and the reported test loss on unseen graphs): for every graph, head and query
token, the squared L2 distance between the attention row (over ``[null]`` + all tokens of the
graph) and the normalised basis row, averaged over query tokens, heads and graphs (0 = exact,
2 = disjoint one-hot rows). "train" is an exponential moving average over the last steps (with
input dropout on).

CPU sizes (the paper: width 1024, head dim 128, 3k steps at batch 512 sparse / 256 dense,
1152 training graphs, peak lr 1e-4): width ``--hidden`` 128, query/key head dim
``--head-dim`` 32, ``--steps`` 200 AdamW steps at batch ``--batch-size`` 16 (sparse) /
``--dense-batch-size`` 4 (dense), linear warmup (10 %) to ``--lr`` 1e-2 then linear decay
to 0, input dropout 0.1, fresh graphs every step (3,200 sparse / 800 dense training graphs),
128 test graphs, one thread. Default ≈ 10 min; ``--quick`` (20 steps, 16 test graphs) ≈ 1 min
and only checks that everything runs: 20 steps are too few for the identifiers to matter.

Usage::

    python benchmarks/tokengt_basis.py --quick
    python benchmarks/tokengt_basis.py
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import networkx as nx
import numpy as np
import torch
from torch import Tensor, nn
from torch_geometric.data import Data

from topomodelx_attention.nn.attention import MultiHeadAttention, padded_layout
from topomodelx_attention.nn.graph import TokenGTTokenizer, random_sign_flip
from topomodelx_attention.transforms import LaplacianNodeId, OrthogonalRandomNodeId

HEADS = 15  # bell(2 + 2)
ID_DIMS = {"none": 0, "random": 24, "ORF": 24, "Lap": 20}


# ----------------------------------------------------------------------------------------------
# equivalence classes of (i, j, k, l): the 15 set partitions of 4 index positions
# ----------------------------------------------------------------------------------------------
_PAIRS = list(itertools.combinations(range(4), 2))  # (i,j) (i,k) (i,l) (j,k) (j,l) (k,l)


def _partition_table() -> Tensor:
    """Map the 6 pairwise-equality bits of (i, j, k, l) to the class index (0..14), -1 if
    inconsistent (not transitive)."""
    patterns: dict[tuple[int, ...], int] = {}
    for labels in itertools.product(range(4), repeat=4):
        canon: dict[int, int] = {}
        rgs = tuple(canon.setdefault(x, len(canon)) for x in labels)
        patterns.setdefault(rgs, len(patterns))
    assert len(patterns) == HEADS
    table = torch.full((64,), -1, dtype=torch.long)
    for rgs, cls in patterns.items():
        code = sum(int(rgs[a] == rgs[b]) << bit for bit, (a, b) in enumerate(_PAIRS))
        table[code] = cls
    return table


CLASS_OF_BITS = _partition_table()


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
def ba_graph(rng: np.random.Generator) -> Data:
    """BA graph with n ~ U{10..20} nodes and attachment k ~ U{2, 3} (A.3.2), both directions."""
    n = int(rng.integers(10, 21))
    k = int(rng.integers(2, 4))
    graph = nx.barabasi_albert_graph(n, k, seed=int(rng.integers(1 << 30)))
    edges = torch.tensor(list(graph.edges), dtype=torch.long).t().reshape(2, -1)
    return Data(edge_index=torch.cat([edges, edges.flip(0)], 1), num_nodes=n)


def identifiers(graphs: list[Data], kind: str, training: bool, seed: int) -> list[Tensor | None]:
    """Node identifiers of every graph for one configuration."""
    dim = ID_DIMS[kind]
    out: list[Tensor | None] = []
    for i, graph in enumerate(graphs):
        n = int(graph.num_nodes)
        if kind == "none":
            out.append(None)
        elif kind == "random":
            generator = None if training else torch.Generator().manual_seed(seed + i)
            out.append(torch.randn(n, dim, generator=generator) / math.sqrt(dim))
        elif kind == "ORF":
            transform = OrthogonalRandomNodeId(dim, seed=seed + i, resample=training)
            out.append(transform(graph.clone()).node_id)
        else:
            if "lap" not in graph:
                graph.lap = LaplacianNodeId(dim)(graph.clone()).node_id
            out.append(graph.lap)
    return out


# ----------------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------------
class BasisAttention(nn.Module):
    """Tokenizer + [null] token + one 15-head self-attention layer returning its maps."""

    def __init__(self, id_dim: int, type_ids: bool, hidden: int, head_dim: int) -> None:
        super().__init__()
        self.id_dim = id_dim
        self.tokenizer = TokenGTTokenizer(0, 0, hidden, id_dim, type_identifiers=type_ids)
        self.null = nn.Parameter(torch.randn(1, hidden))
        self.dropout = nn.Dropout(0.1)
        self.attention = MultiHeadAttention(
            hidden, HEADS, HEADS, head_channels=head_dim, kind="dense", bias=True
        )

    def forward(self, graphs: list[Data], ids: list[Tensor | None], dense: bool):
        """Attention maps (B, 15, L, L) and token coordinates (B, L, 2) (-1 for [null]/pad)."""
        node_tokens, edge_tokens, batches, coords = [], [], [], []
        num = len(graphs)
        for b, (graph, node_id) in enumerate(zip(graphs, ids)):
            n = int(graph.num_nodes)
            if dense:
                i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
                off = i != j
                edge_index = torch.stack([i[off], j[off]])
            else:
                edge_index = graph.edge_index
            if self.training and self.id_dim and node_id is not None:
                node_id = random_sign_flip(node_id, torch.zeros(n, dtype=torch.long), 1)
            nodes, edges = self.tokenizer(None, edge_index, None, node_id, n, self.null.dtype)
            node_tokens.append(nodes)
            edge_tokens.append(edges)
            batches.append(torch.full((n + edge_index.shape[1],), b, dtype=torch.long))
            arange = torch.arange(n)
            coords.append(torch.cat([torch.stack([arange, arange], 1), edge_index.t()]))
        x = torch.cat([self.null.expand(num, -1), *node_tokens, *edge_tokens])
        # same order as x: [null tokens; nodes of every graph; edges of every graph]
        token_batch = torch.cat(
            [
                torch.arange(num),
                *[b[: int(g.num_nodes)] for b, g in zip(batches, graphs)],
                *[b[int(g.num_nodes) :] for b, g in zip(batches, graphs)],
            ]
        )
        coordinate = torch.cat(
            [
                torch.full((num, 2), -1, dtype=torch.long),
                *[c[: int(g.num_nodes)] for c, g in zip(coords, graphs)],
                *[c[int(g.num_nodes) :] for c, g in zip(coords, graphs)],
            ]
        )
        layout = padded_layout(token_batch, num)
        weights = self.attention.attention_weights(self.dropout(x), layout=layout)
        return weights, layout.pad(coordinate, value=-1), layout.key_valid


def basis_classes(coords: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """Equivalence class ``μ`` of every (query, key) pair of real tokens.

    ``coords`` (B, L, 2) gives ``(i, j)`` of every slot (-1 for [null] and padding). Returns
    the class (B, L, L) in ``0..14`` (``15`` where the query or the key is not a real token)
    and the mask (B, L) of real tokens.
    """
    i, j = coords[..., 0], coords[..., 1]
    q_i, q_j = i.unsqueeze(2), j.unsqueeze(2)  # query (B, L, 1)
    k_i, k_j = i.unsqueeze(1), j.unsqueeze(1)  # key (B, 1, L)
    bits = (
        (q_i == q_j).long()
        + ((q_i == k_i).long() << 1)
        + ((q_i == k_j).long() << 2)
        + ((q_j == k_i).long() << 3)
        + ((q_j == k_j).long() << 4)
        + ((k_i == k_j).long() << 5)
    )
    real = valid & (i >= 0)
    pair = real.unsqueeze(2) & real.unsqueeze(1)
    classes = torch.where(pair, CLASS_OF_BITS[bits], torch.full_like(bits, HEADS))
    return classes, real


def basis_loss(weights: Tensor, classes: Tensor, real: Tensor) -> Tensor:
    r"""Mean over (graph, head, real query) of :math:`\lVert \alpha^h_p - \hat B^h_p \rVert^2`.

    The normalised basis row :math:`\hat B^h_p` is :math:`1/c` on the ``c`` keys of class
    ``h`` (``c > 0``) or one-hot on ``[null]`` (slot 0). Expanded as
    :math:`\sum_q \alpha^2 - 2 \sum_q \alpha \hat B + \sum_q \hat B^2` so that no
    (B, 15, L, L) target is built.
    """
    num_b, length = classes.shape[0], classes.shape[1]
    shape = (num_b, length, HEADS + 1)
    ones = torch.ones_like(classes, dtype=weights.dtype)
    counts = weights.new_zeros(shape).scatter_add_(2, classes, ones)[..., :HEADS]
    matching = weights.gather(1, classes.clamp_max(HEADS - 1).unsqueeze(1)).squeeze(1)
    matching = matching * (classes < HEADS).to(weights.dtype)  # α^{μ(p,q)}_{pq}
    within = weights.new_zeros(shape).scatter_add(2, classes, matching)[..., :HEADS]
    counts, within = counts.transpose(1, 2), within.transpose(1, 2)  # (B, 15, L)
    nonempty = counts > 0
    safe = counts.clamp_min(1.0)
    cross = torch.where(nonempty, within / safe, weights[..., 0])
    target_sq = torch.where(nonempty, 1.0 / safe, torch.ones_like(safe))
    per_row = weights.square().sum(-1) - 2.0 * cross + target_sq  # (B, 15, L)
    return per_row.transpose(1, 2)[real].mean()


# ----------------------------------------------------------------------------------------------
# experiment
# ----------------------------------------------------------------------------------------------
def run_config(args, id_kind: str, type_ids: bool, dense: bool, test: list[Data]) -> tuple:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = BasisAttention(ID_DIMS[id_kind], type_ids, args.hidden, args.head_dim)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    warmup = max(1, args.steps // 10)

    def rate(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (args.steps - step) / max(1, args.steps - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    batch_size = args.dense_batch_size if dense else args.batch_size
    start = time.perf_counter()
    train_loss = float("nan")
    model.train()
    for step in range(args.steps):
        graphs = [ba_graph(rng) for _ in range(batch_size)]
        ids = identifiers(graphs, id_kind, training=True, seed=step * batch_size)
        weights, coords, valid = model(graphs, ids, dense)
        loss = basis_loss(weights, *basis_classes(coords, valid))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        value = float(loss.detach())
        train_loss = value if step == 0 else 0.9 * train_loss + 0.1 * value
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for chunk in range(0, len(test), batch_size):
            graphs = test[chunk : chunk + batch_size]
            ids = identifiers(graphs, id_kind, training=False, seed=10**6 + chunk)
            weights, coords, valid = model(graphs, ids, dense)
            total += float(basis_loss(weights, *basis_classes(coords, valid))) * len(graphs)
            count += len(graphs)
    return total / count, train_loss, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~1 minute: few steps")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16, help="graphs per step, sparse")
    parser.add_argument("--dense-batch-size", type=int, default=4, help="graphs per step, dense")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--test-graphs", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (shared machine)")
    parser.add_argument("--inputs", nargs="+", default=["sparse", "dense"])
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 20
        args.test_graphs = 16
    torch.set_num_threads(args.threads)
    test_rng = np.random.default_rng(12345)
    test = [ba_graph(test_rng) for _ in range(args.test_graphs)]
    results: dict[tuple[str, bool, str], tuple] = {}
    total = time.perf_counter()
    for id_kind in ID_DIMS:
        for type_ids in (True, False):
            for inputs in args.inputs:
                results[id_kind, type_ids, inputs] = run_config(
                    args, id_kind, type_ids, inputs == "dense", test
                )
                loss, train, seconds = results[id_kind, type_ids, inputs]
                print(
                    f"  {id_kind:>6} type_ids={type_ids!s:5} {inputs:6}: test {loss:.4f} "
                    f"train {train:.4f} ({seconds:.0f} s)",
                    flush=True,
                )
    header = ["node identifiers", "type identifiers"]
    header += [f"{inputs} test loss (train)" for inputs in args.inputs]
    rows = []
    for id_kind in ID_DIMS:
        for type_ids in (True, False):
            row = [id_kind, "yes" if type_ids else "no"]
            for inputs in args.inputs:
                loss, train, _ = results[id_kind, type_ids, inputs]
                row.append(f"{loss:.4f} ({train:.4f})")
            rows.append(row)
    print(
        f"\n### Equivariant basis approximation (TokenGT §5.1): L2 loss, {args.steps} steps, "
        f"batch {args.batch_size} sparse / {args.dense_batch_size} dense, width {args.hidden}, "
        f"head dim {args.head_dim}, lr {args.lr}, {args.test_graphs} test graphs; "
        f"{time.perf_counter() - total:.0f} s\n"
    )
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join(["---"] * len(header)) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
