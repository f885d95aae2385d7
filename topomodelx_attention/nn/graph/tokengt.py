r"""Tokenized Graph Transformer (TokenGT; Kim et al., "Pure Transformers are Powerful Graph Learners").

TokenGT feeds every node and every edge of a graph as an independent token to a standard
Transformer (§2). The structure is carried by the token embeddings only:

* node identifiers :math:`P \in \mathbb{R}^{n \times d_p}` with (near-)orthonormal rows, read
  from ``data.node_id`` (write them with
  :class:`~topomodelx_attention.transforms.LaplacianNodeId` or
  :class:`~topomodelx_attention.transforms.OrthogonalRandomNodeId`);
* type identifiers :math:`E^{\mathcal V}, E^{\mathcal E}` (learned embeddings).

Node ``v`` becomes :math:`[X_v, P_v, P_v, E^{\mathcal V}]` and edge ``(u, v)`` becomes
:math:`[X_{(u,v)}, P_u, P_v, E^{\mathcal E}]`; the token fed to the Transformer is
:math:`W [X; P_u; P_v] + E` (the type embedding has the model width, A.3.1), computed as
:math:`W_x X + W_1 P_u + W_2 P_v + E` with the identifier projections evaluated once per node
and gathered per edge. A learnable ``[graph]`` token is prepended to every graph and the
complex-level prediction is read from it (§2, Figure 1).

Two models:

:class:`TokenGT`
    Graphs (``torch_geometric`` ``Data`` / ``Batch``): node tokens + edge tokens, both
    directions of an undirected edge (``edge_tokens="directed"``, the paper's choice; the
    ``edge_index`` must then hold both directions), or one token per undirected edge with
    *pooled* identifiers ``[P_u + P_v, P_u + P_v]`` (``edge_tokens="undirected"``, the cheaper
    variant of A.5: half the edge tokens, symmetric in ``u, v``).
:class:`OrderKTokenGT`
    The order-k generalisation of §3 on any
    :class:`~topomodelx_attention.data.ComplexData` (cell complexes, simplicial complexes,
    hypergraphs / combinatorial complexes): every cell of every rank is represented by
    tokens carrying the identifiers of its vertices and a type identifier per rank.
    ``identifiers="ordered"`` (default) is the paper's construction: ordered identifier slots
    :math:`[P_{v_1}, \dots, P_{v_k}]`, one token per vertex ordering that describes the cell
    (both directions of an edge, every permutation of a simplex / hyperedge, the rotations
    and reflections of the boundary cycle of a ring; see
    :mod:`~topomodelx_attention.nn.graph.orderings`). ``identifiers="sum"`` / ``"mean"`` is
    the one-token-per-cell variant of A.5 with pooled identifiers
    :math:`\sum_{v \in \sigma} P_v`: cheaper, but the identifiers of two cells then only
    reveal their number of shared vertices, and two different cells on the same vertex set
    (two rings of K4 on the same four vertices) get identical tokens — the k-IGN argument of
    §3 does not hold for it.

Training-time regularisers on the identifiers (A.3.1, A.3.3), applied inside ``forward`` in
training mode only and drawn from PyTorch's global generator: a random sign flip per
(complex, eigenvector column) and eigenvector dropout (a whole column of one complex is zeroed,
the others rescaled by :math:`1/(1-p)`, like 2-D channel dropout).

Attention is the shared core's (:mod:`topomodelx_attention.nn.attention`): ``kind="dense"``
(exact softmax per complex, padded, SDPA with a key-padding mask) or ``kind="linear"``
(Performer FAVOR+, linear in the tokens), see
:mod:`~topomodelx_attention.nn.graph.tokengt_layer`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from topomodelx_attention.data import ComplexData
from topomodelx_attention.nn.attention import PaddedLayout, padded_layout
from topomodelx_attention.nn.attention.heads import check_dropout
from topomodelx_attention.nn.common import FeatureEncoder, check_inputs, segment_pool
from topomodelx_attention.nn.graph.orderings import boundary_cycles, cell_orderings, ordering_counts
from topomodelx_attention.nn.graph.tokengt_layer import TokenGTEncoder, all_pairs_kind

__all__ = [
    "EDGE_TOKENS",
    "IDENTIFIERS",
    "MAX_TOKENS",
    "TOKENGT_OUTPUTS",
    "OrderKTokenGT",
    "TokenBatch",
    "TokenGT",
    "TokenGTInputs",
    "TokenGTTokenizer",
    "eigenvector_dropout",
    "random_sign_flip",
]

#: ``"directed"``: one token per column of ``edge_index`` (both directions of an undirected
#: edge, §2); ``"undirected"``: one token per undirected edge, pooled identifiers (A.5).
EDGE_TOKENS: tuple[str, ...] = ("directed", "undirected")
#: Vertex identifiers of a cell in :class:`OrderKTokenGT`: ordered slots (one token per
#: ordering, §3) or pooled over the cell's vertices (one token per cell, A.5).
IDENTIFIERS: tuple[str, ...] = ("ordered", "sum", "mean")
#: Default ``max_tokens`` of :class:`OrderKTokenGT`: most tokens one complex may have with
#: ordered identifiers, counted before they are built. The packaged data sets stay far below
#: (ZINC molecules < 300, MUTAG ≤ 202, GCB ≤ 1,142 with cycle-basis rings); one 8-vertex
#: simplex with its faces has 109,601 (8! = 40,320 orderings of the simplex alone).
MAX_TOKENS: int = 8192

_NODE_ID_HELP = (
    "apply a node-identifier transform to every graph before batching, e.g. "
    "topomodelx_attention.transforms.LaplacianNodeId(dim={dim}) or "
    "OrthogonalRandomNodeId(dim={dim}) (it writes data.node_id), or build the model with "
    "node_id_dim=0 (no node identifiers)"
)


# ----------------------------------------------------------------------------------------------
# identifier regularisers (functional, training time)
# ----------------------------------------------------------------------------------------------
def random_sign_flip(node_id: Tensor, batch: Tensor, num_complexes: int) -> Tensor:
    """Multiply every (complex, eigenvector column) of the identifiers by a random ``±1`` (A.3.1).

    Laplacian eigenvectors are defined up to sign; flipping them at random during training
    makes the model robust to that ambiguity. One sign per complex and column (shared by all
    nodes of the complex), from PyTorch's global generator; not in place.

    Parameters
    ----------
    node_id : torch.Tensor, shape = (n, d_p)
        Node identifiers.
    batch : torch.Tensor, shape = (n,)
        Complex (graph) of every node.
    num_complexes : int
        Number of complexes.

    Returns
    -------
    torch.Tensor, shape = (n, d_p)
        Identifiers with flipped columns.
    """
    signs = torch.randint(0, 2, (num_complexes, node_id.shape[1]), device=node_id.device)
    signs = (2 * signs - 1).to(node_id.dtype)
    return node_id * signs.index_select(0, batch)


def eigenvector_dropout(node_id: Tensor, batch: Tensor, num_complexes: int, p: float) -> Tensor:
    """Zero whole identifier columns per complex with probability ``p`` (A.3.1, A.3.3).

    Like 2-D channel dropout: every (complex, column) is dropped independently and the kept
    columns are rescaled by ``1 / (1 - p)``. From PyTorch's global generator; not in place.

    Parameters
    ----------
    node_id : torch.Tensor, shape = (n, d_p)
        Node identifiers.
    batch : torch.Tensor, shape = (n,)
        Complex (graph) of every node.
    num_complexes : int
        Number of complexes.
    p : float
        Drop probability in ``[0, 1)``.

    Returns
    -------
    torch.Tensor, shape = (n, d_p)
        Identifiers with dropped columns.
    """
    if p == 0.0:
        return node_id
    keep = torch.empty(
        (num_complexes, node_id.shape[1]), dtype=node_id.dtype, device=node_id.device
    )
    keep = keep.bernoulli_(1.0 - p) / (1.0 - p)
    return node_id * keep.index_select(0, batch)


def _non_negative_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


# ----------------------------------------------------------------------------------------------
# token set
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenBatch:
    """The tokens of a batch of complexes (graphs), in the order [graph tokens; groups...].

    Attributes
    ----------
    x : torch.Tensor, shape = (n_tokens, hidden_channels)
        Token features: the ``num_complexes`` ``[graph]`` tokens first, then one block per
        token group (nodes, edges — or the cells of every rank).
    layout : PaddedLayout
        Padding of the tokens per complex (the ``[graph]`` token first in its complex's slots).
    num_complexes : int
        Number of complexes (graphs).
    sizes : tuple of int
        Rows of every token group after the ``[graph]`` tokens (``(n_nodes, n_edge_tokens)``
        for :class:`TokenGT`, the tokens of every rank for :class:`OrderKTokenGT`).
    edge_inverse : torch.Tensor or None, shape = (n_edges,)
        For ``edge_tokens="undirected"``: the edge token of every column of ``edge_index``.
    sparse_residual : tuple of torch.Tensor or None
        ``(target, source)`` token indices of the sparse equivariant basis operator (A.4.3),
        when the model uses it.
    owners : tuple of torch.Tensor or None
        For ``OrderKTokenGT(identifiers="ordered")``: the cell of every token of each group
        (several tokens — orderings — per cell); ``None`` when every token is one cell.
    padded : bool or None
        Whether the encoder runs on the padded grid
        (:meth:`~topomodelx_attention.nn.graph.tokengt_layer.TokenGTEncoder.use_padded`,
        decided once when the layout is built; ``None``: decided by the encoder).
    """

    x: Tensor
    layout: PaddedLayout
    num_complexes: int
    sizes: tuple[int, ...]
    edge_inverse: Tensor | None = None
    sparse_residual: tuple[Tensor, Tensor] | None = None
    owners: tuple[Tensor, ...] | None = None
    padded: bool | None = None

    def group(self, i: int, x: Tensor | None = None) -> Tensor:
        """Rows of token group ``i`` (of ``x``, default the tokens themselves).

        Parameters
        ----------
        i : int
            Group index (``0`` = nodes / rank 0).
        x : torch.Tensor, shape = (n_tokens, ...), optional
            Tensor aligned with the tokens (e.g. encoded tokens).

        Returns
        -------
        torch.Tensor, shape = (sizes[i], ...)
            The group's rows.
        """
        x = self.x if x is None else x
        start = self.num_complexes + sum(self.sizes[:i])
        return x[start : start + self.sizes[i]]

    def replace(self, x: Tensor) -> TokenBatch:
        """Return the same token set with new features ``x`` (same rows)."""
        return TokenBatch(
            x,
            self.layout,
            self.num_complexes,
            self.sizes,
            self.edge_inverse,
            self.sparse_residual,
            self.owners,
            self.padded,
        )


@dataclass(frozen=True)
class TokenGTInputs:
    """A graph batch prepared for :class:`TokenGT` (:meth:`TokenGT.prepare`).

    Validated inputs and every index / layout derived from the graph structure: the model's
    computation on it (:meth:`TokenGT.tokenize`, the encoder, the heads) has no data-dependent
    size or branch, so ``torch.compile`` traces it without graph breaks.

    Attributes
    ----------
    x : torch.Tensor or None, shape = (n, in_channels)
        Node features (``None`` when the model reads none).
    edge_index : torch.Tensor, shape = (2, m)
        Edges of the edge tokens (merged per undirected edge for ``edge_tokens="undirected"``).
    edge_attr : torch.Tensor or None, shape = (m, edge_channels)
        Edge features of the edge tokens.
    node_id : torch.Tensor or None, shape = (n, node_id_dim)
        Node identifiers (after the training-time sign flip / eigenvector dropout).
    batch : torch.Tensor, shape = (n,)
        Graph of every node.
    layout : PaddedLayout
        Padding of the ``[graph]``, node and edge tokens per graph.
    padded : bool
        Whether the encoder runs on the padded grid.
    edge_inverse : torch.Tensor or None, shape = (n_edges,)
        Edge token of every column of ``edge_index`` (``edge_tokens="undirected"``).
    sparse_residual : tuple of torch.Tensor or None
        Token indices of the sparse equivariant basis operator (A.4.3).
    """

    x: Tensor | None
    edge_index: Tensor
    edge_attr: Tensor | None
    node_id: Tensor | None
    batch: Tensor
    layout: PaddedLayout
    padded: bool
    edge_inverse: Tensor | None = None
    sparse_residual: tuple[Tensor, Tensor] | None = None

    @property
    def num_complexes(self) -> int:
        """Number of graphs (a symbolic size under ``torch.compile``)."""
        return self.layout.num_complexes


# ----------------------------------------------------------------------------------------------
# tokenizer
# ----------------------------------------------------------------------------------------------
class TokenGTTokenizer(nn.Module):
    r"""Node and edge tokens :math:`W [X; P_u; P_v] + E` of TokenGT (§2).

    Parameters
    ----------
    in_channels : int
        Node feature columns (0: no node features, tokens from identifiers and types only).
    edge_channels : int
        Edge feature columns (0: edge features ignored).
    hidden_channels : int
        Token width :math:`d`.
    node_id_dim : int
        Width :math:`d_p` of the node identifiers (0: no identifiers — the plain-Transformer
        ablation of §5).
    type_identifiers : bool, default = True
        Add the learned type embeddings :math:`E^{\mathcal V}, E^{\mathcal E}`.
    edge_tokens : {"directed", "undirected"}, default = "directed"
        One token per column of ``edge_index``, or one per undirected edge with pooled
        identifiers ``[P_u + P_v, P_u + P_v]`` and features averaged over the two directions
        (categorical edge features: taken from the first direction in ``edge_index``).
    categorical, edge_categorical : sequence of int, optional
        Categories per column when the node / edge features are integer codes (one embedding
        table per column, summed).
    """

    def __init__(
        self,
        in_channels: int,
        edge_channels: int,
        hidden_channels: int,
        *,
        node_id_dim: int,
        type_identifiers: bool = True,
        edge_tokens: str = "directed",
        categorical: Sequence[int] | None = None,
        edge_categorical: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.in_channels = _non_negative_int(in_channels, "in_channels")
        self.edge_channels = _non_negative_int(edge_channels, "edge_channels")
        self.node_id_dim = _non_negative_int(node_id_dim, "node_id_dim")
        if isinstance(hidden_channels, bool) or not isinstance(hidden_channels, int):
            raise ValueError(f"hidden_channels must be a positive int, got {hidden_channels!r}")
        if hidden_channels < 1:
            raise ValueError(f"hidden_channels must be positive, got {hidden_channels}")
        if edge_tokens not in EDGE_TOKENS:
            raise ValueError(f"edge_tokens must be one of {EDGE_TOKENS}, got {edge_tokens!r}")
        self.hidden_channels = hidden_channels
        self.edge_tokens = edge_tokens
        self.node_encoder = (
            FeatureEncoder(in_channels, hidden_channels, categorical, "node features x")
            if in_channels > 0
            else None
        )
        self.edge_encoder = (
            FeatureEncoder(edge_channels, hidden_channels, edge_categorical, "edge_attr")
            if edge_channels > 0
            else None
        )
        self.id_first = nn.Linear(node_id_dim, hidden_channels, bias=False) if node_id_dim else None
        self.id_second = (
            nn.Linear(node_id_dim, hidden_channels, bias=False) if node_id_dim else None
        )
        self.type_embedding = nn.Embedding(2, hidden_channels) if type_identifiers else None

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return (
            f"node_id_dim={self.node_id_dim}, edge_tokens={self.edge_tokens!r}, "
            f"type_identifiers={self.type_embedding is not None}"
        )

    def undirected_edges(
        self, edge_index: Tensor, edge_attr: Tensor | None, num_nodes: int
    ) -> tuple[Tensor, Tensor | None, Tensor]:
        """Merge the two directions of every edge (``edge_tokens="undirected"``).

        Parameters
        ----------
        edge_index : torch.Tensor, shape = (2, m)
            Edges (both directions, one, or a mix).
        edge_attr : torch.Tensor, shape = (m, edge_channels), optional
            Edge features.
        num_nodes : int
            Number of nodes.

        Returns
        -------
        edge_index : torch.Tensor, shape = (2, m_u)
            One ``(min, max)`` pair per undirected edge, sorted.
        edge_attr : torch.Tensor or None, shape = (m_u, edge_channels)
            Float features averaged over the directions; integer codes of the first direction.
        inverse : torch.Tensor, shape = (m,)
            Undirected edge of every input column.
        """
        low = torch.minimum(edge_index[0], edge_index[1])
        high = torch.maximum(edge_index[0], edge_index[1])
        keys, inverse = torch.unique(low * max(num_nodes, 1) + high, return_inverse=True)
        pairs = torch.stack([keys // max(num_nodes, 1), keys % max(num_nodes, 1)])
        if edge_attr is None:
            return pairs, None, inverse
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.unsqueeze(-1)
        if edge_attr.is_floating_point():  # both directions' features averaged
            return pairs, segment_pool(edge_attr, inverse, keys.numel(), "mean"), inverse
        first = torch.full((keys.numel(),), edge_index.shape[1], dtype=torch.long)
        first = first.to(edge_index.device).scatter_reduce(
            0, inverse, torch.arange(edge_index.shape[1], device=edge_index.device), "amin"
        )
        return pairs, edge_attr.index_select(0, first), inverse

    def forward(
        self,
        x: Tensor | None,
        edge_index: Tensor,
        edge_attr: Tensor | None,
        node_id: Tensor | None,
        num_nodes: int,
        dtype: torch.dtype | None = None,
    ) -> tuple[Tensor, Tensor]:
        r"""Embed the node and edge tokens.

        Parameters
        ----------
        x : torch.Tensor, shape = (n, in_channels), optional
            Node features (ignored when ``in_channels = 0``).
        edge_index : torch.Tensor, shape = (2, m)
            Edges of the tokens (already merged for ``"undirected"``, see
            :meth:`undirected_edges`).
        edge_attr : torch.Tensor, shape = (m, edge_channels), optional
            Edge features (ignored when ``edge_channels = 0``).
        node_id : torch.Tensor, shape = (n, node_id_dim), optional
            Node identifiers :math:`P` (ignored when ``node_id_dim = 0``).
        num_nodes : int
            Number of nodes ``n``.
        dtype : torch.dtype, optional
            Token dtype (default: the parameters' dtype).

        Returns
        -------
        node_tokens : torch.Tensor, shape = (n, hidden_channels)
            :math:`W_x X_v + (W_1 + W_2) P_v + E^{\mathcal V}`.
        edge_tokens : torch.Tensor, shape = (m, hidden_channels)
            :math:`W_e X_{uv} + W_1 P_u + W_2 P_v + E^{\mathcal E}` (directed) or
            :math:`W_e X_{uv} + (W_1 + W_2)(P_u + P_v) + E^{\mathcal E}` (undirected).
        """
        if self.id_first is not None and node_id is None:
            raise ValueError(
                f"node_id is required (node_id_dim={self.node_id_dim}); "
                + _NODE_ID_HELP.format(dim=self.node_id_dim)
            )
        if dtype is None:
            params = list(self.parameters())
            dtype = params[0].dtype if params else torch.get_default_dtype()
        device = edge_index.device
        m = edge_index.shape[1]
        node = torch.zeros((num_nodes, self.hidden_channels), dtype=dtype, device=device)
        edge = torch.zeros((m, self.hidden_channels), dtype=dtype, device=device)
        if self.node_encoder is not None:
            if x is None:
                raise ValueError(
                    f"the model has in_channels={self.in_channels} but the data has no node "
                    "features x; build it with in_channels=0 for feature-less graphs"
                )
            node = node + self.node_encoder(x, dtype)
        if self.edge_encoder is not None:
            if edge_attr is None:
                raise ValueError(
                    f"the model has edge_channels={self.edge_channels} but the data has no "
                    "edge_attr; build it with edge_channels=0 to ignore edge features"
                )
            edge = edge + self.edge_encoder(edge_attr, dtype)
        if self.id_first is not None:
            p = node_id.to(dtype)
            first, second = self.id_first(p), self.id_second(p)
            both = first + second
            node = node + both
            if self.edge_tokens == "directed":
                edge = (
                    edge
                    + first.index_select(0, edge_index[0])
                    + second.index_select(0, edge_index[1])
                )
            else:
                edge = (
                    edge + both.index_select(0, edge_index[0]) + both.index_select(0, edge_index[1])
                )
        if self.type_embedding is not None:
            node = node + self.type_embedding.weight[0].to(dtype)
            edge = edge + self.type_embedding.weight[1].to(dtype)
        return node, edge


# ----------------------------------------------------------------------------------------------
# shared model machinery
# ----------------------------------------------------------------------------------------------
def _check_outputs(outputs: object, allowed: Sequence[object], what: str) -> tuple:
    if isinstance(outputs, (str, int)):
        outputs = (outputs,)
    outputs = tuple(outputs)
    if not outputs or any(o not in allowed or isinstance(o, bool) for o in outputs):
        raise ValueError(
            f"outputs must be a non-empty subset of {tuple(allowed)} ({what}), got {outputs}"
        )
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"outputs lists an entry twice: {outputs}")
    return outputs


class _TokenModel(nn.Module):
    """[graph] token, identifier regularisers, encoder stack and readouts of both models."""

    def _build_common(
        self,
        hidden_channels: int,
        out_channels: int,
        outputs: tuple,
        *,
        n_layers: int,
        heads: int,
        node_id_dim: int,
        kind: str,
        kernel_options: Mapping[str, Any] | None,
        ffn_channels: int | None,
        dropout: float,
        attention_dropout: float,
        embedding_dropout: float,
        drop_path: float,
        sign_flip: bool,
        eigenvector_dropout: float,
        bias: bool,
        token_layout: str,
        check_inputs: bool,
    ) -> None:
        kind = all_pairs_kind(kind)
        self.hidden_channels = hidden_channels
        self.node_id_dim = _non_negative_int(node_id_dim, "node_id_dim")
        self.sign_flip = bool(sign_flip)
        self.check_inputs = bool(check_inputs)
        self.eigenvector_dropout = check_dropout(eigenvector_dropout, "eigenvector_dropout")
        self.graph_token = nn.Parameter(torch.empty(1, hidden_channels))
        nn.init.normal_(self.graph_token, std=0.02)
        self.embedding_dropout = nn.Dropout(check_dropout(embedding_dropout, "embedding_dropout"))
        self.encoder = TokenGTEncoder(
            hidden_channels,
            n_layers=n_layers,
            heads=heads,
            ffn_channels=ffn_channels,
            kind=kind,
            kernel_options=kernel_options,
            dropout=dropout,
            attention_dropout=attention_dropout,
            drop_path=drop_path,
            bias=bias,
            final_norm=True,
            token_layout=token_layout,
        )
        self.outputs = outputs
        self.out_channels = out_channels
        # one linear readout per output (a rank r of OrderKTokenGT is keyed "r")
        self.readouts = nn.ModuleDict(
            {str(o): nn.Linear(hidden_channels, out_channels) for o in outputs}
        )

    def _node_ids(
        self, data: object, num_nodes: int, batch: Tensor, num_complexes: int
    ) -> Tensor | None:
        if self.node_id_dim == 0:
            return None
        node_id = data.get("node_id", None) if hasattr(data, "get") else None
        if node_id is None:
            raise ValueError(
                "the data has no node identifiers (data.node_id); "
                + _NODE_ID_HELP.format(dim=self.node_id_dim)
            )
        if not isinstance(node_id, Tensor) or tuple(node_id.shape) != (num_nodes, self.node_id_dim):
            shape = tuple(node_id.shape) if isinstance(node_id, Tensor) else type(node_id).__name__
            raise ValueError(
                f"data.node_id must have shape (num_nodes, node_id_dim) = ({num_nodes}, "
                f"{self.node_id_dim}), got {shape}; " + _NODE_ID_HELP.format(dim=self.node_id_dim)
            )
        if not node_id.is_floating_point():
            raise TypeError(f"data.node_id must be a float tensor, got {node_id.dtype}")
        node_id = node_id.to(device=self.graph_token.device, dtype=self.graph_token.dtype)
        if self.training and self.sign_flip:
            node_id = random_sign_flip(node_id, batch, num_complexes)
        if self.training and self.eigenvector_dropout > 0.0:
            node_id = eigenvector_dropout(node_id, batch, num_complexes, self.eigenvector_dropout)
        return node_id

    def _layout(self, batches: Sequence[Tensor], num_complexes: int) -> tuple[PaddedLayout, bool]:
        """Layout of ``[graph]`` tokens + token groups, and the encoder's padded-or-packed choice."""
        device = self.graph_token.device
        token_batch = torch.cat([torch.arange(num_complexes, device=device), *batches])
        layout = padded_layout(token_batch, num_complexes)
        return layout, self.encoder.use_padded(layout)

    def _assemble(
        self,
        groups: Sequence[Tensor],
        layout: PaddedLayout,
        padded: bool,
        edge_inverse: Tensor | None = None,
        sparse_residual: tuple[Tensor, Tensor] | None = None,
        owners: tuple[Tensor, ...] | None = None,
    ) -> TokenBatch:
        num_complexes = layout.num_complexes
        special = self.graph_token.expand(num_complexes, self.hidden_channels)
        x = torch.cat([special, *groups], dim=0)
        return TokenBatch(
            self.embedding_dropout(x),
            layout,
            num_complexes,
            tuple(g.shape[0] for g in groups),
            edge_inverse,
            sparse_residual,
            owners,
            padded,
        )

    def encode_tokens(self, tokens: TokenBatch) -> TokenBatch:
        """Run the encoder stack (with its final LayerNorm) on a token set.

        Parameters
        ----------
        tokens : TokenBatch
            Embedded tokens.

        Returns
        -------
        TokenBatch
            Same tokens, encoded features.
        """
        return tokens.replace(
            self.encoder(
                tokens.x,
                layout=tokens.layout,
                sparse_residual=tokens.sparse_residual,
                padded=tokens.padded,
            )
        )

    def _readout(self, name: object) -> nn.Module:
        if str(name) not in self.readouts:
            raise ValueError(
                f"the model has no {name!r} output; build it with outputs including {name!r} "
                f"(it has {self.outputs})"
            )
        return self.readouts[str(name)]


def _graph_batch(data: object, num_nodes: int, device: torch.device) -> tuple[Tensor, int]:
    batch = data.get("batch", None) if hasattr(data, "get") else None
    num_graphs = getattr(data, "num_graphs", None)
    if batch is None:
        return torch.zeros(num_nodes, dtype=torch.long, device=device), int(num_graphs or 1)
    if num_graphs is None:
        num_graphs = int(batch.max()) + 1 if batch.numel() else 1
    return batch.long(), int(num_graphs)


def _check_symmetric(edge_index: Tensor, num_nodes: int) -> None:
    """Raise unless every column ``(u, v)`` of ``edge_index`` has its reverse ``(v, u)``."""
    if edge_index.numel() == 0:
        return
    n = max(num_nodes, 1)
    keys = edge_index[0] * n + edge_index[1]
    reverse = edge_index[1] * n + edge_index[0]
    missing = ~torch.isin(reverse, keys)
    if bool(missing.any()):
        j = int(missing.nonzero()[0, 0])
        u, v = int(edge_index[0, j]), int(edge_index[1, j])
        raise ValueError(
            f"edge_index column {j} ({u} -> {v}) has no reverse ({v} -> {u}); "
            f"{int(missing.sum())} of {edge_index.shape[1]} columns lack one. TokenGT with "
            "edge_tokens='directed' takes every column as one direction of an undirected edge "
            "(§2, A.5: both directions are tokens), and the Laplacian identifiers symmetrise "
            "the graph anyway: make it undirected (torch_geometric.utils.to_undirected) or use "
            "edge_tokens='undirected' (one token per undirected edge)"
        )


# ----------------------------------------------------------------------------------------------
# TokenGT for graphs
# ----------------------------------------------------------------------------------------------
#: Predictions :class:`TokenGT` can return (its ``outputs``).
#: Cell-level outputs are named by their rank, as in :class:`OrderKTokenGT`: 0 the nodes,
#: 1 the edges.
TOKENGT_OUTPUTS: tuple[str | int, ...] = ("complex", 0, 1)


class TokenGT(_TokenModel):
    r"""Tokenized Graph Transformer for (batches of) graphs (§2, A.3.3).

    ``[graph]`` token + node tokens + edge tokens (:class:`TokenGTTokenizer`) → pre-LN
    Transformer (:class:`~topomodelx_attention.nn.graph.tokengt_layer.TokenGTEncoder`) → linear
    readouts of the ``[graph]`` token (:meth:`forward`, one row per graph), the node tokens
    (:meth:`node_outputs`) or the edge tokens (:meth:`edge_outputs`).

    Parameters
    ----------
    in_channels : int
        Node feature columns ``data.x`` (0: no node features).
    edge_channels : int
        Edge feature columns ``data.edge_attr`` (0: ignore edge features).
    hidden_channels : int
        Model width :math:`d` (also the width of the type identifiers, A.3.1).
    out_channels : int
        Output width of every readout.
    n_layers : int, default = 4
        Encoder layers (the paper: 12).
    heads : int, default = 8
        Attention heads (the paper: 32).
    node_id_dim : int, default = 16
        Width :math:`d_p` of ``data.node_id`` (paper: 16 for Laplacian eigenvectors, 64 for
        ORF); 0 disables node identifiers.
    kind : str, default = "dense"
        Attention kernel over all tokens: exact softmax (``"dense"``) or Performer FAVOR+
        (``"linear"``, A.4.3), or another registered kernel without a neighbourhood mask.
    kernel_options : mapping, optional
        Options of the kernel (e.g. ``{"num_random_features": 64,
        "redraw_features_in_training": True}`` for the Performer; ``scale``).
    ffn_channels : int, optional
        MLP width (default ``hidden_channels``, as the paper's Graphormer configuration).
    dropout : float, default = 0.0
        Dropout on the output of every sublayer (attention block, MLP) before the residual sum.
    attention_dropout : float, default = 0.0
        Dropout on the attention weights (kernels that form them, ``"dense"``; a positive value
        with ``"linear"`` raises).
    embedding_dropout : float, default = 0.0
        Dropout on the input tokens.
    drop_path : float, default = 0.0
        Stochastic depth of the last layer, linear in depth (paper: 0.1).
    sign_flip : bool, default = True
        Random sign flip of the identifier columns per graph in training (A.3.1; meant for
        Laplacian eigenvectors, harmless for ORF).
    eigenvector_dropout : float, default = 0.0
        Identifier-column dropout per graph in training (paper: 0.2 for Laplacian ids).
    type_identifiers : bool, default = True
        Learned node / edge type embeddings.
    edge_tokens : {"directed", "undirected"}, default = "directed"
        Both directions of every edge (``edge_index`` must be symmetric: a column without its
        reverse raises ``ValueError``), or one token per undirected edge (pooled
        identifiers; any mix of directions is merged).
    outputs : sequence of {"complex", 0, 1}, default = ("complex",)
        Which predictions the model returns (one linear readout each): ``"complex"`` one row per
        graph (:meth:`forward`), ``0`` one per node (:meth:`node_outputs`), ``1`` one per edge
        (:meth:`edge_outputs`): cell-level outputs are named by their rank, as everywhere.
    sparse_equivariant_basis : bool, default = False
        "+ SEB" of A.4.3: after every layer add to every node token the sum of the tokens of
        its edges (``X_ii ← X_ii + Σ_{j≠i} X_ij``; for ``edge_tokens="directed"`` the edges
        ``(i, j)`` leaving ``i``, for ``"undirected"`` every edge at ``i``), an equivariant
        operator that near-orthonormal identifiers on large graphs approximate poorly.
    categorical, edge_categorical : sequence of int, optional
        Categories per column of integer-coded (categorical) node / edge features.
    bias : bool, default = True
        Biases in the attention projections.
    token_layout : {"auto", "packed", "padded"}, default = "auto"
        How the encoder holds the tokens (same results, different speed; see
        :class:`~topomodelx_attention.nn.graph.tokengt_layer.TokenGTEncoder`).
    check_inputs : bool, default = True
        Reject NaN / Inf / huge values of ``x``, ``edge_attr`` and ``node_id`` once per forward
        (:func:`~topomodelx_attention.nn.common.check_inputs`).

    Examples
    --------
    >>> from torch_geometric.data import Batch
    >>> from torch_geometric.datasets import FakeDataset  # doctest: +SKIP
    >>> from topomodelx_attention.transforms import LaplacianNodeId
    >>> graphs = [LaplacianNodeId(8)(g) for g in FakeDataset(4, 6, 9)]  # doctest: +SKIP
    >>> model = TokenGT(9, 0, 32, 2, n_layers=2, heads=4, node_id_dim=8)
    >>> model(Batch.from_data_list(graphs)).shape  # doctest: +SKIP
    torch.Size([4, 2])
    """

    def __init__(
        self,
        in_channels: int,
        edge_channels: int,
        hidden_channels: int,
        out_channels: int,
        *,
        n_layers: int = 4,
        heads: int = 8,
        node_id_dim: int = 16,
        kind: str = "dense",
        kernel_options: Mapping[str, Any] | None = None,
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        embedding_dropout: float = 0.0,
        drop_path: float = 0.0,
        sign_flip: bool = True,
        eigenvector_dropout: float = 0.0,
        type_identifiers: bool = True,
        edge_tokens: str = "directed",
        outputs: Sequence[str | int] = ("complex",),
        sparse_equivariant_basis: bool = False,
        categorical: Sequence[int] | None = None,
        edge_categorical: Sequence[int] | None = None,
        bias: bool = True,
        token_layout: str = "auto",
        check_inputs: bool = True,
    ) -> None:
        super().__init__()
        outputs = _check_outputs(outputs, TOKENGT_OUTPUTS, "the graph; 0: nodes, 1: edges")
        if isinstance(out_channels, bool) or not isinstance(out_channels, int) or out_channels < 1:
            raise ValueError(f"out_channels must be a positive int, got {out_channels!r}")
        self.tokenizer = TokenGTTokenizer(
            in_channels,
            edge_channels,
            hidden_channels,
            node_id_dim=node_id_dim,
            type_identifiers=type_identifiers,
            edge_tokens=edge_tokens,
            categorical=categorical,
            edge_categorical=edge_categorical,
        )
        self._build_common(
            hidden_channels,
            out_channels,
            outputs,
            n_layers=n_layers,
            heads=heads,
            node_id_dim=node_id_dim,
            kind=kind,
            kernel_options=kernel_options,
            ffn_channels=ffn_channels,
            dropout=dropout,
            attention_dropout=attention_dropout,
            embedding_dropout=embedding_dropout,
            drop_path=drop_path,
            sign_flip=sign_flip,
            eigenvector_dropout=eigenvector_dropout,
            bias=bias,
            token_layout=token_layout,
            check_inputs=check_inputs,
        )
        self.sparse_equivariant_basis = bool(sparse_equivariant_basis)

    @torch.compiler.disable
    def prepare(self, data: object) -> TokenGTInputs:
        """Validate a graph batch and build its token layout (eager, once per batch).

        Validates the inputs (shapes, index range, symmetric ``edge_index`` for
        ``edge_tokens="directed"``, finite values when ``check_inputs``), merges the edge
        directions (``edge_tokens="undirected"``), applies the identifier regularisers
        (training) and pads the tokens per graph. ``model(model.prepare(data))`` equals
        ``model(data)``; a ``torch.compile``-d model called on the prepared inputs traces
        without graph breaks and without recompiling when the batch size changes (this method
        is never traced: ``torch.compiler.disable``).

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            ``edge_index``, ``num_nodes``; ``x`` / ``edge_attr`` when the model uses them;
            ``node_id`` (``(num_nodes, node_id_dim)``) unless ``node_id_dim = 0``.

        Returns
        -------
        TokenGTInputs
            Inputs, indices and layout of the tokens.
        """
        if isinstance(data, ComplexData):
            raise TypeError("TokenGT takes graphs; use OrderKTokenGT for a ComplexData")
        if not hasattr(data, "get") or data.num_nodes is None:
            raise TypeError("TokenGT expects a torch_geometric Data/Batch with num_nodes")
        num_nodes = int(data.num_nodes)
        device = self.graph_token.device
        edge_index = data.get("edge_index", None)
        if edge_index is None:
            edge_index = torch.zeros((2, 0), dtype=torch.long, device=device)
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape (2, m), got {tuple(edge_index.shape)}")
        edge_index = edge_index.long()
        if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
            raise ValueError(f"edge_index refers to nodes outside 0..{num_nodes - 1}")
        x = data.get("x", None) if self.tokenizer.in_channels else None
        edge_attr = data.get("edge_attr", None) if self.tokenizer.edge_channels else None
        if x is not None and x.shape[0] != num_nodes:
            raise ValueError(
                f"x has {x.shape[0]} rows but the graph(s) have num_nodes = {num_nodes}: give "
                "one feature row per node"
            )
        if edge_attr is not None and edge_attr.shape[0] != edge_index.shape[1]:
            raise ValueError(
                f"edge_attr has {edge_attr.shape[0]} rows but edge_index has "
                f"{edge_index.shape[1]} columns: give one feature row per column"
            )
        if self.check_inputs:
            check_inputs({"x": x, "edge_attr": edge_attr, "node_id": data.get("node_id", None)})
        if self.tokenizer.edge_tokens == "directed":
            _check_symmetric(edge_index, num_nodes)
        batch, num_complexes = _graph_batch(data, num_nodes, device)
        node_id = self._node_ids(data, num_nodes, batch, num_complexes)
        inverse = None
        if self.tokenizer.edge_tokens == "undirected":
            edge_index, edge_attr, inverse = self.tokenizer.undirected_edges(
                edge_index, edge_attr, num_nodes
            )
        edge_batch = batch.index_select(0, edge_index[0])
        residual = None
        if self.sparse_equivariant_basis:
            residual = self._seb_index(edge_index, num_complexes, num_nodes)
        layout, padded = self._layout([batch, edge_batch], num_complexes)
        return TokenGTInputs(
            x, edge_index, edge_attr, node_id, batch, layout, padded, inverse, residual
        )

    def tokenize(self, data: object) -> TokenBatch:
        """Embed the ``[graph]``, node and edge tokens of a graph or a batch.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch or TokenGTInputs
            Graph(s) as for :meth:`prepare`, or its result.

        Returns
        -------
        TokenBatch
            Groups ``(nodes, edges)``.
        """
        inputs = data if isinstance(data, TokenGTInputs) else self.prepare(data)
        nodes, edges = self.tokenizer(
            inputs.x,
            inputs.edge_index,
            inputs.edge_attr,
            inputs.node_id,
            inputs.batch.shape[0],
            self.graph_token.dtype,
        )
        return self._assemble(
            [nodes, edges],
            inputs.layout,
            inputs.padded,
            inputs.edge_inverse,
            inputs.sparse_residual,
        )

    def _seb_index(
        self, edge_index: Tensor, num_complexes: int, num_nodes: int
    ) -> tuple[Tensor, Tensor]:
        """(node token, edge token) pairs of ``X_ii += Σ_{j≠i} X_ij`` (token indices)."""
        edge_tokens = (
            num_complexes + num_nodes + torch.arange(edge_index.shape[1], device=edge_index.device)
        )
        keep = edge_index[0] != edge_index[1]
        if self.tokenizer.edge_tokens == "directed":
            return num_complexes + edge_index[0][keep], edge_tokens[keep]
        nodes = torch.cat([edge_index[0][keep], edge_index[1][keep]])
        return num_complexes + nodes, torch.cat([edge_tokens[keep], edge_tokens[keep]])

    def encode(self, data: object) -> TokenBatch:
        """Tokenize and encode; the features are the final (LayerNorm-ed) hidden tokens.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`prepare`, or its result.

        Returns
        -------
        TokenBatch
            Encoded tokens (``x[:num_complexes]`` are the ``[graph]`` tokens).
        """
        return self.encode_tokens(self.tokenize(data))

    def forward(self, data: object) -> Tensor:
        """Complex-level (graph-level) prediction from the ``[graph]`` token.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`prepare`, or its result.

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            One prediction per graph, empty graphs included.
        """
        readout = self._readout("complex")
        # prepared here, in the called method: a compiled model breaks its graph once, at prepare
        inputs = data if isinstance(data, TokenGTInputs) else self.prepare(data)
        tokens = self.encode(inputs)
        return readout(tokens.x[: tokens.num_complexes])

    def node_outputs(self, data: object) -> Tensor:
        """Node-level predictions from the node tokens (A.4.3).

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`prepare`, or its result.

        Returns
        -------
        torch.Tensor, shape = (num_nodes, out_channels)
            One prediction per node.
        """
        readout = self._readout(0)
        # prepared here, in the called method: a compiled model breaks its graph once, at prepare
        inputs = data if isinstance(data, TokenGTInputs) else self.prepare(data)
        tokens = self.encode(inputs)
        return readout(tokens.group(0))

    def edge_outputs(self, data: object) -> Tensor:
        """Edge-level predictions from the edge tokens.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`prepare`, or its result.

        Returns
        -------
        torch.Tensor, shape = (num_edges, out_channels)
            One prediction per column of ``data.edge_index`` (with
            ``edge_tokens="undirected"`` both directions get their edge token's prediction).
        """
        readout = self._readout(1)
        # prepared here, in the called method: a compiled model breaks its graph once, at prepare
        inputs = data if isinstance(data, TokenGTInputs) else self.prepare(data)
        tokens = self.encode(inputs)
        out = readout(tokens.group(1))
        if tokens.edge_inverse is not None:
            out = out.index_select(0, tokens.edge_inverse)
        return out


# ----------------------------------------------------------------------------------------------
# order-k TokenGT for complexes
# ----------------------------------------------------------------------------------------------
class OrderKTokenGT(_TokenModel):
    r"""Order-k TokenGT (§3) on cell / simplicial / combinatorial complexes and hypergraphs.

    Every cell :math:`\sigma` of rank ``r = 0..max_rank`` is represented by tokens carrying
    its features, the identifiers of its vertices, a type identifier :math:`E^{(r)}` per rank
    and (ordered identifiers) a size identifier :math:`E_{|\sigma|}`; plus a ``[graph]``
    token per complex, from which the complex-level prediction is read.

    ``identifiers="ordered"`` (default, the paper's §3 construction)
        One token per vertex ordering :math:`(v_1, \dots, v_s)` that describes the cell,

        .. math::
            t_{\sigma, (v_1..v_s)} = W_r X_\sigma + \sum_{a=1}^{s} W_a P_{v_a}
            + E^{(r)} + E_{s},

        i.e. :math:`W [X_\sigma; P_{v_1}; \dots; P_{v_s}; 0; \dots; 0] + E` with
        ``max_cell_size`` = :math:`K` slots shared by every rank, the slots beyond :math:`s`
        zero (a zero identifier; the size identifier :math:`E_s` tells how many are used — in
        the order-k tensor of §3 the type identifier :math:`E^{\gamma}` of the equality
        pattern plays that role). A vertex is the diagonal entry :math:`(v, \dots, v)`: all
        :math:`K` slots hold :math:`P_v` (TokenGT's :math:`[P_v, P_v]`). Orderings per cell
        (:func:`~topomodelx_attention.nn.graph.orderings.cell_orderings`):

        ========================================  ================================
        cell                                      tokens per cell
        ========================================  ================================
        vertex                                    1
        edge                                      2 (both directions, as TokenGT)
        ring of length :math:`L` (2-cell whose    :math:`2L` (rotations ×
        boundary is a cycle of edges)             reflections of the boundary walk)
        other cell of :math:`s` vertices          :math:`s!` (triangle 6, tetrahedron
        (simplex, hyperedge)                      24, a 5-vertex hyperedge 120)
        ========================================  ================================

        each with :math:`K` slot gathers. On a graph (ranks 0–1, :math:`K = 2`) this is
        exactly :class:`TokenGT` with ``edge_tokens="directed"``. Cell-level outputs average
        the encoded tokens of each cell (mean over its orderings, an invariant pooling) and
        apply the readout.
    ``identifiers="sum"`` / ``"mean"`` (A.5's cheaper variant)
        One token per cell, :math:`W_r X_\sigma + W_P \sum_{v \in \sigma} P_v + E^{(r)}` (or
        the mean). Inner products of pooled identifiers only count shared vertices, and two
        cells on the same vertex set get the same identifiers (see the module notes). On a
        graph it is :class:`TokenGT` with ``edge_tokens="undirected"``.

    The vertices of every cell come from the unsigned incidences (``incidence_r``; ring
    boundaries are walked from ``incidence_2`` and ``incidence_1``), so any complex works,
    including hypergraphs (:class:`toponetx.CombinatorialComplex` via
    :func:`~topomodelx_attention.data.from_toponetx`), **once it carries node identifiers**:
    with the default ``node_id_dim=16`` the model reads ``data.node_id`` of shape
    ``(n_0, node_id_dim)`` and raises a ``ValueError`` without it. Write them on every complex
    before batching with :class:`~topomodelx_attention.transforms.LaplacianNodeId` or
    :class:`~topomodelx_attention.transforms.OrthogonalRandomNodeId` (both accept a
    ``ComplexData``; the Laplacian ones come from the vertex adjacency through the rank-1
    cells, ``incidence_1``), e.g.
    ``model(OrthogonalRandomNodeId(dim=16)(from_toponetx(complex_)))``, or build the model with
    ``node_id_dim=0`` (no identifiers: tokens of the same features are then indistinguishable).

    Parameters
    ----------
    in_channels : sequence of int
        Feature columns ``[d_0, ..., d_R]`` of ``x_0 .. x_R`` (sets ``max_rank = len - 1``);
        0 for a rank without features (its tokens are identifiers + type only).
    hidden_channels : int
        Model width.
    out_channels : int
        Output width of the readouts.
    n_layers : int, default = 4
        Encoder layers.
    heads : int, default = 8
        Attention heads.
    node_id_dim : int, default = 16
        Width of ``data.node_id`` (``LaplacianNodeId`` / ``OrthogonalRandomNodeId`` accept a
        ``ComplexData``: identifiers of its 1-skeleton); 0 disables identifiers.
    kind : str, default = "dense"
        Attention kernel over all tokens (``"dense"``: exact softmax, ``"linear"``: Performer).
    kernel_options : mapping, optional
        Options of the kernel, as in :class:`TokenGT`.
    categorical : sequence of (sequence of int or None), optional
        Per rank: cardinalities of integer-coded feature columns, or ``None`` (float).
    identifiers : {"ordered", "sum", "mean"}, default = "ordered"
        Ordered identifier slots (one token per ordering) or pooled identifiers (one token
        per cell), see above.
    max_cell_size : int, default = 8
        Identifier slots :math:`K` of ``identifiers="ordered"``: the largest number of
        vertices of a cell (rings up to length 8, simplices up to tetrahedra); a larger cell
        raises ``ValueError``. Ignored by ``"sum"`` / ``"mean"``.
    max_tokens : int or None, default = MAX_TOKENS (8192)
        With ``identifiers="ordered"``: most tokens one complex may have (its ``[graph]``
        token, one per vertex, two per edge, :math:`2L` per ring, :math:`s!` per other cell
        of :math:`s` vertices). They are counted
        (:func:`~topomodelx_attention.nn.graph.orderings.ordering_counts`) before any is
        built; a complex above the limit raises ``ValueError`` naming its cell sizes, the
        token count and the fixes (``identifiers="sum"``, smaller cells / ``max_cell_size``,
        a larger ``max_tokens``). ``None``: no limit. Ignored by ``"sum"`` / ``"mean"`` (one
        token per cell).
    type_identifiers : bool, default = True
        Learned rank embeddings :math:`E^{(r)}` (and the size embeddings :math:`E_s`).
    outputs : sequence of "complex" or int, default = ("complex",)
        Which predictions the model returns: ``"complex"`` one row per complex
        (:meth:`forward`), a rank ``r`` one row per r-cell (:meth:`cell_outputs`).
    ffn_channels, dropout, attention_dropout, embedding_dropout, drop_path, sign_flip, eigenvector_dropout, bias, token_layout
        As in :class:`TokenGT`.
    check_inputs : bool, default = True
        Reject NaN / Inf / huge values of ``x_r`` and ``node_id`` once per forward
        (:func:`~topomodelx_attention.nn.common.check_inputs`).
    """

    def __init__(
        self,
        in_channels: Sequence[int],
        hidden_channels: int,
        out_channels: int,
        *,
        n_layers: int = 4,
        heads: int = 8,
        node_id_dim: int = 16,
        kind: str = "dense",
        kernel_options: Mapping[str, Any] | None = None,
        categorical: Sequence[Sequence[int] | None] | None = None,
        identifiers: str = "ordered",
        max_cell_size: int = 8,
        max_tokens: int | None = MAX_TOKENS,
        type_identifiers: bool = True,
        outputs: Sequence[str | int] = ("complex",),
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        embedding_dropout: float = 0.0,
        drop_path: float = 0.0,
        sign_flip: bool = True,
        eigenvector_dropout: float = 0.0,
        bias: bool = True,
        token_layout: str = "auto",
        check_inputs: bool = True,
    ) -> None:
        super().__init__()
        in_channels = [_non_negative_int(c, "in_channels[r]") for c in in_channels]
        if not in_channels:
            raise ValueError("in_channels must list the feature width of every rank (0 = none)")
        if identifiers not in IDENTIFIERS:
            raise ValueError(f"identifiers must be one of {IDENTIFIERS}, got {identifiers!r}")
        if (
            isinstance(max_cell_size, bool)
            or not isinstance(max_cell_size, int)
            or max_cell_size < 1
        ):
            raise ValueError(f"max_cell_size must be a positive int, got {max_cell_size!r}")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ValueError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
        self.max_tokens = max_tokens
        self.max_rank = len(in_channels) - 1
        self.in_channels = in_channels
        if categorical is None:
            categorical = [None] * len(in_channels)
        if len(categorical) != len(in_channels):
            raise ValueError("categorical needs one entry (None or cardinalities) per rank")
        outputs = _check_outputs(
            outputs, ("complex", *range(self.max_rank + 1)), "or ranks for cell-level outputs"
        )
        self.identifiers = identifiers
        self.slots = max_cell_size if identifiers == "ordered" else 1
        self.encoders = nn.ModuleDict(
            {
                str(r): FeatureEncoder(c, hidden_channels, cards, f"x_{r}")
                for r, (c, cards) in enumerate(zip(in_channels, categorical))
                if c > 0
            }
        )
        # W_1 .. W_K stacked: the slot-a projection is rows a*d .. (a+1)*d of the weight
        self.id_projection = (
            nn.Linear(node_id_dim, hidden_channels * self.slots, bias=False)
            if node_id_dim
            else None
        )
        self.type_embedding = (
            nn.Embedding(self.max_rank + 1, hidden_channels) if type_identifiers else None
        )
        self.size_embedding = (
            nn.Embedding(self.slots + 1, hidden_channels)
            if type_identifiers and identifiers == "ordered"
            else None
        )
        self._build_common(
            hidden_channels,
            out_channels,
            outputs,
            n_layers=n_layers,
            heads=heads,
            node_id_dim=node_id_dim,
            kind=kind,
            kernel_options=kernel_options,
            ffn_channels=ffn_channels,
            dropout=dropout,
            attention_dropout=attention_dropout,
            embedding_dropout=embedding_dropout,
            drop_path=drop_path,
            sign_flip=sign_flip,
            eigenvector_dropout=eigenvector_dropout,
            bias=bias,
            token_layout=token_layout,
            check_inputs=check_inputs,
        )

    def extra_repr(self) -> str:
        """Describe the configuration in ``repr``."""
        return f"max_rank={self.max_rank}, identifiers={self.identifiers!r}, slots={self.slots}"

    def _check_token_count(self, data: ComplexData, cycles: tuple[Tensor, Tensor] | None) -> None:
        """Count the ordered tokens of every complex; refuse one above ``max_tokens``."""
        num_complexes = data.num_complexes
        total = torch.ones(num_complexes, dtype=torch.float64)  # the [graph] token
        largest = torch.zeros(num_complexes, dtype=torch.float64)
        largest_rank = torch.zeros(num_complexes, dtype=torch.long)
        sizes = {}
        for r in range(self.max_rank + 1):
            counts = ordering_counts(data, r, self.slots, cycles if r == 2 else None)
            sizes[r] = counts
            if not counts.numel():
                continue
            batch_r = data[f"batch_{r}"].long().cpu()
            total.index_add_(0, batch_r, counts)
            per_complex = torch.zeros(num_complexes, dtype=torch.float64).scatter_reduce(
                0, batch_r, counts, reduce="amax"
            )
            larger = per_complex > largest
            largest = torch.where(larger, per_complex, largest)
            largest_rank = torch.where(larger, torch.full_like(largest_rank, r), largest_rank)
        worst = int(torch.argmax(total))
        if self.max_tokens is None or float(total[worst]) <= self.max_tokens:
            return
        rank = int(largest_rank[worst])
        per_cell = float(largest[worst])
        batch_r = data[f"batch_{rank}"].long().cpu()
        cell = int(torch.nonzero((batch_r == worst) & (sizes[rank] == per_cell))[0])
        vertices = int(data.vertex_cells(rank).coalesce().indices()[1].cpu().eq(cell).sum())
        where = f"complex {worst} of the batch" if num_complexes > 1 else "this complex"
        raise ValueError(
            f'OrderKTokenGT(identifiers="ordered") would create {float(total[worst]):,.0f} '
            f"tokens for {where}, above max_tokens={self.max_tokens:,}: its largest cell "
            f"(rank-{rank} cell {cell}, {vertices} vertices) alone has {per_cell:,.0f} "
            f"orderings (s! for a cell of s vertices, 2L for a ring of length L). Use "
            'identifiers="sum" (one token per cell), lift with smaller cells and a smaller '
            f"max_cell_size (now {self.slots}; e.g. SimplicialCliqueLifting(complex_dim=...), "
            "CellCycleLifting(max_cell_length=...)), or raise max_tokens (None: no limit)"
        )

    def _pooled_ids(self, data: ComplexData, node_id: Tensor, rank: int) -> Tensor:
        if rank == 0:
            return node_id
        n_r = data.num_cells(rank)
        index = data.vertex_cells(rank).coalesce().indices().to(node_id.device)
        return segment_pool(node_id.index_select(0, index[0]), index[1], n_r, self.identifiers)

    def _ordered_ids(self, node_id: Tensor, slots: Tensor) -> Tensor:
        r""":math:`\sum_a W_a P_{v_a}` of every token (``slots`` (T, K), -1 = empty)."""
        projected = self.id_projection(node_id)  # (n_0, K d): every slot's projection once
        projected = projected.view(-1, self.hidden_channels)  # row v*K + a
        valid = slots >= 0
        flat = slots.clamp_min(0) * self.slots + torch.arange(self.slots, device=slots.device)
        gathered = projected.index_select(0, flat.reshape(-1)).view(*slots.shape, -1)
        return (gathered * valid.unsqueeze(-1).to(gathered.dtype)).sum(1)

    def tokenize(self, data: ComplexData) -> TokenBatch:
        """Embed the ``[graph]`` token and the tokens of the cells of every rank.

        Validates the inputs (rows of ``x_r``, finite values when ``check_inputs``) once per
        call.

        Parameters
        ----------
        data : ComplexData
            A complex or a batch: ``batch_r`` and ``incidence_r`` for ``r <= max_rank``,
            ``x_r`` for the ranks with features, ``node_id`` unless ``node_id_dim = 0``.

        Returns
        -------
        TokenBatch
            Groups ``(rank 0, ..., rank max_rank)``; with ordered identifiers ``owners``
            gives the cell of every token.
        """
        if not isinstance(data, ComplexData):
            raise TypeError(
                f"OrderKTokenGT expects a (batched) ComplexData, got {type(data).__name__}; "
                "lift graphs with CellCycleLifting / SimplicialCliqueLifting or convert with "
                "from_toponetx"
            )
        if data.max_rank < self.max_rank:
            raise ValueError(
                f"the model handles ranks 0..{self.max_rank} but the data stops at rank "
                f"{data.max_rank}; build the model with len(in_channels) = {data.max_rank + 1}"
            )
        features: dict[str, Tensor | None] = {}
        for r in range(self.max_rank + 1):
            if str(r) not in self.encoders:
                continue
            if f"x_{r}" not in data:
                raise ValueError(
                    f"the model has in_channels[{r}] = {self.in_channels[r]} but the data "
                    f"has no x_{r}; lift features (FeatureLifting) or set it to 0"
                )
            x_r = data[f"x_{r}"]
            if x_r.shape[0] != data.num_cells(r):
                raise ValueError(
                    f"x_{r} has {x_r.shape[0]} rows but the data has {data.num_cells(r)} "
                    f"rank-{r} cells: give one feature row per cell"
                )
            features[f"x_{r}"] = x_r
        if self.check_inputs:
            check_inputs({**features, "node_id": data.get("node_id", None)})
        num_complexes = data.num_complexes
        dtype = self.graph_token.dtype
        device = self.graph_token.device
        n0 = data.num_cells(0)
        batch0 = data["batch_0"].long()
        ordered = self.identifiers == "ordered"
        cycles = None
        if ordered:
            if self.max_rank >= 2 and data.num_cells(2):
                cycles = boundary_cycles(data)  # walked once: counted, then built
            self._check_token_count(data, cycles)
        node_id = self._node_ids(data, n0, batch0, num_complexes)
        groups, batches, owners = [], [], []
        for r in range(self.max_rank + 1):
            n_r = data.num_cells(r)
            cells = torch.zeros((n_r, self.hidden_channels), dtype=dtype, device=device)
            if str(r) in self.encoders:
                cells = cells + self.encoders[str(r)](features[f"x_{r}"], dtype)
            if self.type_embedding is not None:
                cells = cells + self.type_embedding.weight[r].to(dtype)
            batch_r = data[f"batch_{r}"].long().to(device)
            if ordered:
                order = cell_orderings(data, r, self.slots, cycles if r == 2 else None)
                owner = order.owner.to(device)
                h = cells.index_select(0, owner)
                if node_id is not None and owner.numel():
                    h = h + self._ordered_ids(node_id, order.slots.to(device))
                if self.size_embedding is not None:
                    h = h + self.size_embedding(order.size.to(device)).to(dtype)
                owners.append(owner)
                batches.append(batch_r.index_select(0, owner))
            else:
                h = cells
                if node_id is not None and n_r:
                    h = h + self.id_projection(self._pooled_ids(data, node_id, r))
                batches.append(batch_r)
            groups.append(h)
        layout, padded = self._layout(batches, num_complexes)
        return self._assemble(groups, layout, padded, owners=tuple(owners) if ordered else None)

    def encode(self, data: ComplexData) -> TokenBatch:
        """Tokenize and encode a complex or a batch (final LayerNorm-ed tokens).

        Parameters
        ----------
        data : ComplexData
            As for :meth:`tokenize`.

        Returns
        -------
        TokenBatch
            Encoded tokens.
        """
        return self.encode_tokens(self.tokenize(data))

    def forward(self, data: ComplexData) -> Tensor:
        """Complex-level prediction from the ``[graph]`` token.

        Parameters
        ----------
        data : ComplexData
            A complex or a batch.

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            One prediction per complex, empty complexes included.
        """
        readout = self._readout("complex")
        tokens = self.encode(data)
        return readout(tokens.x[: tokens.num_complexes])

    def cell_outputs(self, data: ComplexData) -> dict[int, Tensor]:
        """Cell-level predictions of the ranks listed in ``outputs``.

        With ordered identifiers a cell has several tokens (orderings): their encoded
        features are averaged (invariant to the orderings) before the readout.

        Parameters
        ----------
        data : ComplexData
            A complex or a batch.

        Returns
        -------
        dict of int to torch.Tensor
            ``{rank: (n_rank, out_channels)}``.
        """
        ranks = [o for o in self.outputs if o != "complex"]
        if not ranks:
            raise ValueError(
                f"the model has no cell-level output; build it with outputs including ranks "
                f"(it has {self.outputs})"
            )
        tokens = self.encode(data)
        out = {}
        for r in ranks:
            h = tokens.group(r)
            if tokens.owners is not None:
                h = segment_pool(h, tokens.owners[r], data.num_cells(r), "mean")
            out[r] = self.readouts[str(r)](h)
        return out
