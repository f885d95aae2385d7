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
d_p = 24), ORF (first-order) (the paper's control: an ORF vector ``P_t`` drawn for every token
``t`` independently, ``W P_t + E``, instead of the node identifiers ``[P_u, P_v]`` of its
endpoints — no incidence information), Laplacian (``LaplacianNodeId``, d_p = 20)} × type
identifiers {with, without} × input {sparse: the n node tokens and 2m directed edge tokens;
dense: all n² pairs}; ``--ids`` / ``--type-ids`` / ``--inputs`` select a subset. In training
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
to 0, input dropout 0.1, fresh graphs every step, 128 test graphs, one thread. Note that an
exact equality test between the ``d_p``-dimensional identifiers of two slots needs a
query/key head dim of at least ``d_p`` per tested slot pair (the bilinear form must be
``≈ a·I`` on the identifier subspace); with head dim 32 < 2 d_p several classes can only be
approximated.

Timing (measured on the shared 2-core machine, one thread, wall clock, other jobs running):
the default sizes take about 0.5 s per sparse step, i.e. ~100 s per sparse configuration and
~30 min for the full 20-configuration table with dense inputs. ``--quick`` runs the three
node-identifier choices that the paper contrasts
(none, ORF, ORF (first-order); type identifiers on, sparse) for 150 steps of 8 graphs at
width 64 and head dim 64 (≥ 2 d_p): 65 s, test L2 none 0.300, ORF 0.267, ORF (first-order)
0.291 — the paper's ordering, by a small margin at this budget (not a converged result).
``--experiment shared-vertex`` with the sizes of the usage line below (800 steps): 91 s,
test L2 pooled 0.081 vs ordered 0.018.

``--experiment shared-vertex``: one attention head over the edge tokens of BA
graphs (+ ``[null]``), ORF identifiers, supervised to attend to the edges sharing exactly one
vertex with the query edge — pooled identifiers ``W (P_u + P_v)`` (``OrderKTokenGT``'s
``identifiers="sum"``: the score can only depend on the number of shared vertices, so the
query edge itself, sharing two, cannot be excluded) against the ordered slots
``W_1 P_u + W_2 P_v`` of the two directed tokens (target of ``(u, v)``: the tokens
``(u, x)``, ``x ≠ v``; the mean over an edge's two tokens then covers exactly the edges
sharing one vertex).

Usage::

    python benchmarks/tokengt_basis.py --quick
    python benchmarks/tokengt_basis.py --experiment shared-vertex --steps 800 --batch-size 8 \
        --hidden 64 --head-dim 64 --test-graphs 32
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
ID_DIMS = {"none": 0, "random": 24, "ORF": 24, "ORF1": 24, "Lap": 20}
#: "ORF1" is the paper's "ORF (first-order)" control: an ORF vector P_t drawn independently for
#: every *token* t (node or edge) instead of the concatenated node identifiers [P_u, P_v].
ID_LABELS = {"ORF1": "ORF (first-order)"}


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
        elif kind in ("ORF", "ORF1"):
            transform = OrthogonalRandomNodeId(dim, seed=seed + i, resample=training)
            out.append(transform(graph.clone()).node_id)  # ORF1: redrawn per token in forward
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

    def __init__(
        self, id_dim: int, type_ids: bool, hidden: int, head_dim: int, first_order: bool = False
    ) -> None:
        super().__init__()
        self.id_dim = id_dim
        self.first_order = first_order
        self.tokenizer = TokenGTTokenizer(
            0, 0, hidden, node_id_dim=0 if first_order else id_dim, type_identifiers=type_ids
        )
        # first order: one identifier per token, W P_t
        self.token_id = nn.Linear(id_dim, hidden, bias=False) if first_order else None
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
            if self.first_order:  # an ORF per token (n + m of them), no incidence information
                count = n + edge_index.shape[1]
                orf = OrthogonalRandomNodeId(self.id_dim, seed=b, resample=self.training)
                p_t = orf(Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=count))
                nodes, edges = self.tokenizer(None, edge_index, None, None, n, self.null.dtype)
                per_token = self.token_id(p_t.node_id.to(self.null.dtype))
                nodes, edges = nodes + per_token[:n], edges + per_token[n:]
            else:
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
def _warmup_decay(steps: int):
    """Linear warmup over 10 % of the steps, then linear decay to 0 (A.3.2)."""
    warmup = max(1, steps // 10)

    def rate(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (steps - step) / max(1, steps - warmup))

    return rate


def fit_steps(model: nn.Module, args, step_loss) -> float:
    """``args.steps`` AdamW steps (warm-up then linear decay) on ``step_loss(step)``; the model
    is left in eval mode. Returns the exponential moving average of the training loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_decay(args.steps))
    train_loss = float("nan")
    model.train()
    for step in range(args.steps):
        loss = step_loss(step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        value = float(loss.detach())
        train_loss = value if step == 0 else 0.9 * train_loss + 0.1 * value
    model.eval()
    return train_loss


def run_config(args, id_kind: str, type_ids: bool, dense: bool, test: list[Data]) -> tuple:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = BasisAttention(
        ID_DIMS[id_kind], type_ids, args.hidden, args.head_dim, first_order=id_kind == "ORF1"
    )
    batch_size = args.dense_batch_size if dense else args.batch_size
    start = time.perf_counter()

    def step_loss(step: int) -> torch.Tensor:
        graphs = [ba_graph(rng) for _ in range(batch_size)]
        ids = identifiers(graphs, id_kind, training=True, seed=step * batch_size)
        weights, coords, valid = model(graphs, ids, dense)
        return basis_loss(weights, *basis_classes(coords, valid))

    train_loss = fit_steps(model, args, step_loss)
    total, count = 0.0, 0
    with torch.no_grad():
        for chunk in range(0, len(test), batch_size):
            graphs = test[chunk : chunk + batch_size]
            ids = identifiers(graphs, id_kind, training=False, seed=10**6 + chunk)
            weights, coords, valid = model(graphs, ids, dense)
            total += float(basis_loss(weights, *basis_classes(coords, valid))) * len(graphs)
            count += len(graphs)
    return total / count, train_loss, time.perf_counter() - start


# ----------------------------------------------------------------------------------------------
# shared-vertex experiment: pooled vs ordered identifier slots (OrderKTokenGT)
# ----------------------------------------------------------------------------------------------
class SharedVertexAttention(nn.Module):
    """Edge tokens (+ ``[null]``) of one graph and one attention head returning its map.

    ``ordered``: TokenGT's two directed tokens per edge ``W_1 P_u + W_2 P_v + E`` (the ordered
    slots of OrderKTokenGT); ``pooled``: one token per edge ``W (P_u + P_v) + E`` (its
    ``identifiers="sum"``, A.5).
    """

    def __init__(self, ordered: bool, id_dim: int, hidden: int, head_dim: int) -> None:
        super().__init__()
        edge_tokens = "directed" if ordered else "undirected"
        self.tokenizer = TokenGTTokenizer(0, 0, hidden, node_id_dim=id_dim, edge_tokens=edge_tokens)
        self.null = nn.Parameter(torch.randn(1, hidden))
        self.attention = MultiHeadAttention(hidden, 1, 1, head_channels=head_dim, kind="dense")

    def forward(self, graphs: list[Data], ids: list[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """Attention map (B, L, L) of the head, token endpoints (B, L, 2), valid mask (B, L)."""
        edge_tokens, batches, coords = [], [], []
        undirected = self.tokenizer.edge_tokens == "undirected"
        for b, (graph, node_id) in enumerate(zip(graphs, ids)):
            n = int(graph.num_nodes)
            if self.training:
                node_id = random_sign_flip(node_id, torch.zeros(n, dtype=torch.long), 1)
            edge_index = graph.edge_index
            if undirected:
                edge_index = self.tokenizer.undirected_edges(edge_index, None, n)[0]
            _, edges = self.tokenizer(None, edge_index, None, node_id, n, self.null.dtype)
            edge_tokens.append(edges)
            batches.append(torch.full((edges.shape[0],), b, dtype=torch.long))
            coords.append(edge_index.t())
        num = len(graphs)
        x = torch.cat([self.null.expand(num, -1), *edge_tokens])
        token_batch = torch.cat([torch.arange(num), *batches])
        coordinate = torch.cat([torch.full((num, 2), -1, dtype=torch.long), *coords])
        layout = padded_layout(token_batch, num)
        weights = self.attention.attention_weights(x, layout=layout)[:, 0]
        return weights, layout.pad(coordinate, value=-1), layout.key_valid


def shared_vertex_target(coords: Tensor, valid: Tensor, ordered: bool) -> tuple[Tensor, Tensor]:
    """Target keys of every query token (B, L, L) and the mask of real query tokens (B, L).

    Pooled tokens: the edges sharing exactly one vertex with the query edge. Ordered tokens
    ``(u, v)``: the tokens ``(u, x)``, ``x != v`` (first slot equal, second different — one
    equivalence class μ of (i, j, k, l), what one head can select from ordered slots); the mean
    of the two directions of an edge then aggregates exactly the edges sharing one vertex.
    """
    i, j = coords[..., 0], coords[..., 1]
    q_i, q_j, k_i, k_j = i.unsqueeze(2), j.unsqueeze(2), i.unsqueeze(1), j.unsqueeze(1)
    if ordered:
        target = (q_i == k_i) & (q_j != k_j)
    else:
        shared = (
            (q_i == k_i).long() + (q_i == k_j).long() + (q_j == k_i).long() + (q_j == k_j).long()
        )
        target = shared == 1
    real = valid & (i >= 0)
    return target & real.unsqueeze(2) & real.unsqueeze(1), real


def row_l2_loss(weights: Tensor, target: Tensor, real: Tensor) -> Tensor:
    """Mean over real query rows of ||α_p - uniform(target_p)||² (one-hot on [null] if empty)."""
    count = target.sum(-1, keepdim=True)
    goal = torch.where(count > 0, target / count.clamp_min(1), torch.zeros_like(weights))
    goal[..., 0] = torch.where(count.squeeze(-1) > 0, goal[..., 0], 1.0)  # slot 0 = [null]
    return (weights - goal).square().sum(-1)[real].mean()


def run_shared_vertex(args, ordered: bool, test: list[Data]) -> tuple[float, float, float]:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    dim = ID_DIMS["ORF"]
    model = SharedVertexAttention(ordered, dim, args.hidden, args.head_dim)
    start = time.perf_counter()

    def step_loss(step: int) -> torch.Tensor:
        graphs = [ba_graph(rng) for _ in range(args.batch_size)]
        ids = identifiers(graphs, "ORF", training=True, seed=step * args.batch_size)
        weights, coords, valid = model(graphs, ids)
        return row_l2_loss(weights, *shared_vertex_target(coords, valid, ordered))

    train_loss = fit_steps(model, args, step_loss)
    with torch.no_grad():
        ids = identifiers(test, "ORF", training=False, seed=10**6)
        weights, coords, valid = model(test, ids)
        loss = float(row_l2_loss(weights, *shared_vertex_target(coords, valid, ordered)))
    return loss, train_loss, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="~2 minutes: sparse inputs, type identifiers on, node identifiers "
        "none / ORF / ORF (first-order), 150 steps of 8 graphs, width 64, head dim 64",
    )
    parser.add_argument(
        "--experiment",
        choices=["basis", "shared-vertex"],
        default="basis",
        help="basis: the §5.1 table; shared-vertex: one head attending to the edges that share "
        "exactly one vertex, pooled (sum) vs ordered identifier slots",
    )
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
    parser.add_argument("--ids", nargs="+", default=list(ID_DIMS), choices=list(ID_DIMS))
    parser.add_argument(
        "--type-ids", nargs="+", default=["yes", "no"], choices=["yes", "no"], dest="type_ids"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.batch_size, args.hidden, args.head_dim = 150, 8, 64, 64
        args.test_graphs, args.inputs, args.type_ids = 32, ["sparse"], ["yes"]
        args.ids = ["none", "ORF", "ORF1"]
    torch.set_num_threads(args.threads)
    test_rng = np.random.default_rng(12345)
    test = [ba_graph(test_rng) for _ in range(args.test_graphs)]
    if args.experiment == "shared-vertex":
        total = time.perf_counter()
        rows = []
        for name, ordered in (
            ("pooled (sum, 1 token / edge)", False),
            ("ordered slots (2 tokens / edge)", True),
        ):
            loss, train, seconds = run_shared_vertex(args, ordered, test)
            print(f"  {name}: test {loss:.4f} train {train:.4f} ({seconds:.0f} s)", flush=True)
            rows.append(f"| {name} | {loss:.4f} ({train:.4f}) |")
        print(
            f"\n### One head, attend to the edges sharing exactly one vertex: L2 loss, ORF "
            f"identifiers (d_p 24), {args.steps} steps, batch {args.batch_size}, width "
            f"{args.hidden}, head dim {args.head_dim}, lr {args.lr}, {args.test_graphs} test "
            f"graphs; {time.perf_counter() - total:.0f} s\n"
        )
        print("| identifiers | test loss (train) |\n| --- | --- |")
        print("\n".join(rows))
        return
    results: dict[tuple[str, bool, str], tuple] = {}
    total = time.perf_counter()
    type_options = [t == "yes" for t in args.type_ids]
    for id_kind in args.ids:
        for type_ids in type_options:
            for inputs in args.inputs:
                results[id_kind, type_ids, inputs] = run_config(
                    args, id_kind, type_ids, inputs == "dense", test
                )
                loss, train, seconds = results[id_kind, type_ids, inputs]
                print(
                    f"  {id_kind:>6} type_ids={type_ids!s:5} {inputs:6}: test {loss:.4f} "
                    f"train {train:.4f} ({seconds:.0f} s, {seconds / args.steps:.2f} s/step)",
                    flush=True,
                )
    header = ["node identifiers", "type identifiers"]
    header += [f"{inputs} test loss (train)" for inputs in args.inputs]
    rows = []
    for id_kind in args.ids:
        for type_ids in type_options:
            row = [ID_LABELS.get(id_kind, id_kind), "yes" if type_ids else "no"]
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
