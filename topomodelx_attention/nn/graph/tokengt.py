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
graph-level prediction is read from it (§2, Figure 1).

Two models:

:class:`TokenGT`
    Graphs (``torch_geometric`` ``Data`` / ``Batch``): node tokens + edge tokens, both
    directions of an undirected edge by default (``edge_tokens="directed"``, the paper's
    choice), or one token per undirected edge with *pooled* identifiers
    ``[P_u + P_v, P_u + P_v]`` (``edge_tokens="undirected"``, the cheaper variant discussed
    in A.5: half the edge tokens, symmetric in ``u, v``).
:class:`OrderKTokenGT`
    The order-k generalisation of §3 on any
    :class:`~topomodelx_attention.data.ComplexData` (cell complexes, simplicial complexes,
    hypergraphs / combinatorial complexes): every cell of every rank is one token carrying the
    identifiers of its vertices and a type identifier per rank. **Choice:** the vertex
    identifiers of a cell are *pooled* — summed, :math:`\sum_{v \in \sigma} P_v` — rather than
    put in a fixed number of ordered slots. A cell has no canonical vertex order (an ordered
    slot layout would need all :math:`|\sigma|!` orderings as tokens, as in the paper's
    tensor formulation, to stay permutation invariant), and the sum keeps exactly the
    incidence information attention needs: for orthonormal ``P``,
    :math:`\langle \sum_{\sigma} P, \sum_{\tau} P \rangle = |\sigma \cap \tau|`, the number of
    shared vertices (vertex ∈ cell, edges sharing a vertex, faces sharing an edge, ...). For
    a graph (ranks 0 and 1) it coincides with :class:`TokenGT` with
    ``edge_tokens="undirected"``.

Training-time regularisers on the identifiers (A.3.1, A.3.3), applied inside ``forward`` in
training mode only and drawn from PyTorch's global generator: a random sign flip per
(graph, eigenvector column) and eigenvector dropout (a whole column of one graph is zeroed,
the others rescaled by :math:`1/(1-p)`, like 2-D channel dropout).

Attention is the shared core's (:mod:`topomodelx_attention.nn.attention`): exact softmax per
graph (padded, SDPA with a key-padding mask) or Performer FAVOR+ (linear in the tokens), see
:mod:`~topomodelx_attention.nn.graph.tokengt_layer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from topomodelx_attention.data import ComplexData
from topomodelx_attention.nn.attention import PaddedLayout, padded_layout, scatter_sum
from topomodelx_attention.nn.common import FeatureEncoder, segment_pool
from topomodelx_attention.nn.graph.tokengt_layer import ATTENTIONS, TokenGTEncoder

__all__ = [
    "EDGE_TOKENS",
    "ID_POOLINGS",
    "OrderKTokenGT",
    "TokenBatch",
    "TokenGT",
    "TokenGTTokenizer",
    "eigenvector_dropout",
    "random_sign_flip",
]

#: ``"directed"``: one token per column of ``edge_index`` (both directions of an undirected
#: edge, §2); ``"undirected"``: one token per undirected edge, pooled identifiers (A.5).
EDGE_TOKENS: tuple[str, ...] = ("directed", "undirected")
#: Pooling of the vertex identifiers of a cell in :class:`OrderKTokenGT`.
ID_POOLINGS: tuple[str, ...] = ("sum", "mean")

_NODE_ID_HELP = (
    "apply a node-identifier transform to every graph before batching, e.g. "
    "topomodelx_attention.transforms.LaplacianNodeId(dim={dim}) or "
    "OrthogonalRandomNodeId(dim={dim}) (it writes data.node_id), or build the model with "
    "node_id_dim=0 (no node identifiers)"
)


# ----------------------------------------------------------------------------------------------
# identifier regularisers (functional, training time)
# ----------------------------------------------------------------------------------------------
def random_sign_flip(node_id: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
    """Multiply every (graph, eigenvector column) of the identifiers by a random ``±1`` (A.3.1).

    Laplacian eigenvectors are defined up to sign; flipping them at random during training
    makes the model robust to that ambiguity. One sign per graph and column (shared by all
    nodes of the graph), from PyTorch's global generator; not in place.

    Parameters
    ----------
    node_id : torch.Tensor, shape = (n, d_p)
        Node identifiers.
    batch : torch.Tensor, shape = (n,)
        Graph of every node.
    num_graphs : int
        Number of graphs.

    Returns
    -------
    torch.Tensor, shape = (n, d_p)
        Identifiers with flipped columns.
    """
    signs = torch.randint(0, 2, (num_graphs, node_id.shape[1]), device=node_id.device)
    signs = (2 * signs - 1).to(node_id.dtype)
    return node_id * signs.index_select(0, batch)


def eigenvector_dropout(node_id: Tensor, batch: Tensor, num_graphs: int, p: float) -> Tensor:
    """Zero whole identifier columns per graph with probability ``p`` (A.3.1, A.3.3).

    Like 2-D channel dropout: every (graph, column) is dropped independently and the kept
    columns are rescaled by ``1 / (1 - p)``. From PyTorch's global generator; not in place.

    Parameters
    ----------
    node_id : torch.Tensor, shape = (n, d_p)
        Node identifiers.
    batch : torch.Tensor, shape = (n,)
        Graph of every node.
    num_graphs : int
        Number of graphs.
    p : float
        Drop probability in ``[0, 1)``.

    Returns
    -------
    torch.Tensor, shape = (n, d_p)
        Identifiers with dropped columns.
    """
    if p == 0.0:
        return node_id
    keep = torch.empty((num_graphs, node_id.shape[1]), dtype=node_id.dtype, device=node_id.device)
    keep = keep.bernoulli_(1.0 - p) / (1.0 - p)
    return node_id * keep.index_select(0, batch)


def _check_rate(value: float, name: str) -> float:
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def _non_negative_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


# ----------------------------------------------------------------------------------------------
# token set
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenBatch:
    """The tokens of a batch of graphs (or complexes), in the order [graph tokens; groups...].

    Attributes
    ----------
    x : torch.Tensor, shape = (n_tokens, hidden_channels)
        Token features: the ``num_graphs`` ``[graph]`` tokens first, then one block per token
        group (nodes, edges — or the cells of every rank).
    layout : PaddedLayout
        Padding of the tokens per graph (the ``[graph]`` token first in its graph's slots).
    num_graphs : int
        Number of graphs / complexes.
    sizes : tuple of int
        Rows of every token group after the ``[graph]`` tokens (``(n_nodes, n_edge_tokens)``
        for :class:`TokenGT`, ``(n_0, ..., n_R)`` for :class:`OrderKTokenGT`).
    edge_inverse : torch.Tensor or None, shape = (n_edges,)
        For ``edge_tokens="undirected"``: the edge token of every column of ``edge_index``.
    sparse_residual : tuple of torch.Tensor or None
        ``(target, source)`` token indices of the sparse equivariant basis operator (A.4.3),
        when the model uses it.
    """

    x: Tensor
    layout: PaddedLayout
    num_graphs: int
    sizes: tuple[int, ...]
    edge_inverse: Tensor | None = None
    sparse_residual: tuple[Tensor, Tensor] | None = None

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
        start = self.num_graphs + sum(self.sizes[:i])
        return x[start : start + self.sizes[i]]

    def replace(self, x: Tensor) -> TokenBatch:
        """Return the same token set with new features ``x`` (same rows)."""
        return TokenBatch(
            x, self.layout, self.num_graphs, self.sizes, self.edge_inverse, self.sparse_residual
        )


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
    node_cardinalities, edge_cardinalities : sequence of int, optional
        Categories per column when the features are integer codes (one embedding table per
        column, summed).
    """

    def __init__(
        self,
        in_channels: int,
        edge_channels: int,
        hidden_channels: int,
        node_id_dim: int,
        type_identifiers: bool = True,
        edge_tokens: str = "directed",
        node_cardinalities: Sequence[int] | None = None,
        edge_cardinalities: Sequence[int] | None = None,
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
            FeatureEncoder(in_channels, hidden_channels, node_cardinalities, "node features x")
            if in_channels > 0
            else None
        )
        self.edge_encoder = (
            FeatureEncoder(edge_channels, hidden_channels, edge_cardinalities, "edge_attr")
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
        if edge_attr.is_floating_point():
            counts = torch.bincount(inverse, minlength=keys.numel()).clamp_min(1)
            summed = scatter_sum(edge_attr, inverse, keys.numel())
            return pairs, summed / counts.unsqueeze(-1).to(edge_attr.dtype), inverse
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
class _TokenModel(nn.Module):
    """[graph] token, identifier regularisers and the encoder stack shared by both models."""

    def _build_common(
        self,
        hidden_channels: int,
        n_layers: int,
        heads: int,
        node_id_dim: int,
        attention: str,
        ffn_channels: int | None,
        dropout: float,
        attention_dropout: float,
        embedding_dropout: float,
        drop_path: float,
        sign_flip: bool,
        eigenvector_dropout: float,
        bias: bool,
        num_random_features: int | None,
        redraw_features_in_training: bool,
        token_layout: str,
    ) -> None:
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {tuple(ATTENTIONS)}, got {attention!r}")
        self.hidden_channels = hidden_channels
        self.node_id_dim = _non_negative_int(node_id_dim, "node_id_dim")
        self.sign_flip = bool(sign_flip)
        self.eigenvector_dropout = _check_rate(eigenvector_dropout, "eigenvector_dropout")
        self.graph_token = nn.Parameter(torch.empty(1, hidden_channels))
        nn.init.normal_(self.graph_token, std=0.02)
        self.embedding_dropout = nn.Dropout(_check_rate(embedding_dropout, "embedding_dropout"))
        self.encoder = TokenGTEncoder(
            hidden_channels,
            n_layers,
            heads,
            ffn_channels,
            attention,
            dropout,
            attention_dropout,
            drop_path,
            bias,
            num_random_features,
            redraw_features_in_training,
            final_norm=True,
            token_layout=token_layout,
        )

    def _node_ids(
        self, data: object, num_nodes: int, batch: Tensor, num_graphs: int
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
            node_id = random_sign_flip(node_id, batch, num_graphs)
        if self.training and self.eigenvector_dropout > 0.0:
            node_id = eigenvector_dropout(node_id, batch, num_graphs, self.eigenvector_dropout)
        return node_id

    def _assemble(
        self,
        groups: Sequence[Tensor],
        batches: Sequence[Tensor],
        num_graphs: int,
        edge_inverse: Tensor | None = None,
        sparse_residual: tuple[Tensor, Tensor] | None = None,
    ) -> TokenBatch:
        device = self.graph_token.device
        special = self.graph_token.expand(num_graphs, self.hidden_channels)
        x = torch.cat([special, *groups], dim=0)
        token_batch = torch.cat([torch.arange(num_graphs, device=device), *batches])
        layout = padded_layout(token_batch, num_graphs)
        return TokenBatch(
            self.embedding_dropout(x),
            layout,
            num_graphs,
            tuple(int(g.shape[0]) for g in groups),
            edge_inverse,
            sparse_residual,
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
            self.encoder(tokens.x, layout=tokens.layout, sparse_residual=tokens.sparse_residual)
        )


def _graph_batch(data: object, num_nodes: int, device: torch.device) -> tuple[Tensor, int]:
    batch = data.get("batch", None) if hasattr(data, "get") else None
    num_graphs = getattr(data, "num_graphs", None)
    if batch is None:
        return torch.zeros(num_nodes, dtype=torch.long, device=device), int(num_graphs or 1)
    if num_graphs is None:
        num_graphs = int(batch.max()) + 1 if batch.numel() else 1
    return batch.long(), int(num_graphs)


# ----------------------------------------------------------------------------------------------
# TokenGT for graphs
# ----------------------------------------------------------------------------------------------
READOUTS: tuple[str, ...] = ("graph", "node", "edge")


class TokenGT(_TokenModel):
    r"""Tokenized Graph Transformer for (batches of) graphs (§2, A.3.3).

    ``[graph]`` token + node tokens + edge tokens (:class:`TokenGTTokenizer`) → pre-LN
    Transformer (:class:`~topomodelx_attention.nn.graph.tokengt_layer.TokenGTEncoder`) → linear
    heads on the ``[graph]`` token (:meth:`forward`), the node tokens (:meth:`node_outputs`) or
    the edge tokens (:meth:`edge_outputs`).

    Parameters
    ----------
    in_channels : int
        Node feature columns ``data.x`` (0: no node features).
    edge_channels : int
        Edge feature columns ``data.edge_attr`` (0: ignore edge features).
    hidden_channels : int
        Model width :math:`d` (also the width of the type identifiers, A.3.1).
    out_channels : int
        Output width of every head.
    n_layers : int, default = 4
        Encoder layers (the paper: 12).
    heads : int, default = 8
        Attention heads (the paper: 32).
    node_id_dim : int, default = 16
        Width :math:`d_p` of ``data.node_id`` (paper: 16 for Laplacian eigenvectors, 64 for
        ORF); 0 disables node identifiers.
    attention : {"softmax", "performer"}, default = "softmax"
        Exact softmax attention or Performer FAVOR+ (A.4.3).
    ffn_channels : int, optional
        MLP width (default ``hidden_channels``, as the paper's Graphormer configuration).
    dropout : float, default = 0.0
        Dropout in the encoder layers.
    attention_dropout : float, default = 0.0
        Dropout on the attention weights (softmax only).
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
        Both directions of every edge, or one token per undirected edge (pooled identifiers).
    readout : sequence of {"graph", "node", "edge"}, default = ("graph",)
        Which linear heads to build.
    sparse_equivariant_basis : bool, default = False
        "+ SEB" of A.4.3: after every layer add to every node token the sum of the tokens of
        its edges (``X_ii ← X_ii + Σ_{j≠i} X_ij``; for ``edge_tokens="directed"`` the edges
        ``(i, j)`` leaving ``i``, for ``"undirected"`` every edge at ``i``), an equivariant
        operator that near-orthonormal identifiers on large graphs approximate poorly.
    node_cardinalities, edge_cardinalities : sequence of int, optional
        For integer-coded (categorical) node / edge features.
    num_random_features : int, optional
        Performer random features (default: the core's choice from the head width).
    redraw_features_in_training : bool, default = False
        Fresh Performer features at every training forward.
    bias : bool, default = True
        Biases in the attention projections.
    token_layout : {"auto", "packed", "padded"}, default = "auto"
        How the encoder holds the tokens (same results, different speed; see
        :class:`~topomodelx_attention.nn.graph.tokengt_layer.TokenGTEncoder`).

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
        n_layers: int = 4,
        heads: int = 8,
        node_id_dim: int = 16,
        attention: str = "softmax",
        *,
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        embedding_dropout: float = 0.0,
        drop_path: float = 0.0,
        sign_flip: bool = True,
        eigenvector_dropout: float = 0.0,
        type_identifiers: bool = True,
        edge_tokens: str = "directed",
        readout: Sequence[str] = ("graph",),
        sparse_equivariant_basis: bool = False,
        node_cardinalities: Sequence[int] | None = None,
        edge_cardinalities: Sequence[int] | None = None,
        num_random_features: int | None = None,
        redraw_features_in_training: bool = False,
        bias: bool = True,
        token_layout: str = "auto",
    ) -> None:
        super().__init__()
        if isinstance(readout, str):
            readout = (readout,)
        readout = tuple(readout)
        if not readout or any(r not in READOUTS for r in readout):
            raise ValueError(f"readout must be a non-empty subset of {READOUTS}, got {readout}")
        if isinstance(out_channels, bool) or not isinstance(out_channels, int) or out_channels < 1:
            raise ValueError(f"out_channels must be a positive int, got {out_channels!r}")
        self.tokenizer = TokenGTTokenizer(
            in_channels,
            edge_channels,
            hidden_channels,
            node_id_dim,
            type_identifiers,
            edge_tokens,
            node_cardinalities,
            edge_cardinalities,
        )
        self._build_common(
            hidden_channels,
            n_layers,
            heads,
            node_id_dim,
            attention,
            ffn_channels,
            dropout,
            attention_dropout,
            embedding_dropout,
            drop_path,
            sign_flip,
            eigenvector_dropout,
            bias,
            num_random_features,
            redraw_features_in_training,
            token_layout,
        )
        self.readout = readout
        self.sparse_equivariant_basis = bool(sparse_equivariant_basis)
        self.out_channels = out_channels
        self.readout_heads = nn.ModuleDict(
            {r: nn.Linear(hidden_channels, out_channels) for r in readout}
        )

    def tokenize(self, data: object) -> TokenBatch:
        """Embed the ``[graph]``, node and edge tokens of a graph or a batch.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            ``edge_index``, ``num_nodes``; ``x`` / ``edge_attr`` when the model uses them;
            ``node_id`` (``(num_nodes, node_id_dim)``) unless ``node_id_dim = 0``.

        Returns
        -------
        TokenBatch
            Groups ``(nodes, edges)``.
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
        batch, num_graphs = _graph_batch(data, num_nodes, device)
        node_id = self._node_ids(data, num_nodes, batch, num_graphs)
        edge_attr = data.get("edge_attr", None) if self.tokenizer.edge_channels else None
        inverse = None
        if self.tokenizer.edge_tokens == "undirected":
            edge_index, edge_attr, inverse = self.tokenizer.undirected_edges(
                edge_index, edge_attr, num_nodes
            )
        nodes, edges = self.tokenizer(
            data.get("x", None), edge_index, edge_attr, node_id, num_nodes, self.graph_token.dtype
        )
        edge_batch = batch.index_select(0, edge_index[0])
        residual = None
        if self.sparse_equivariant_basis:
            residual = self._seb_index(edge_index, num_graphs, num_nodes)
        return self._assemble([nodes, edges], [batch, edge_batch], num_graphs, inverse, residual)

    def _seb_index(
        self, edge_index: Tensor, num_graphs: int, num_nodes: int
    ) -> tuple[Tensor, Tensor]:
        """(node token, edge token) pairs of ``X_ii += Σ_{j≠i} X_ij`` (token indices)."""
        edge_tokens = (
            num_graphs + num_nodes + torch.arange(edge_index.shape[1], device=edge_index.device)
        )
        loop = edge_index[0] == edge_index[1]
        if self.tokenizer.edge_tokens == "directed":
            keep = ~loop
            return num_graphs + edge_index[0][keep], edge_tokens[keep]
        keep = ~loop
        nodes = torch.cat([edge_index[0][keep], edge_index[1][keep]])
        return num_graphs + nodes, torch.cat([edge_tokens[keep], edge_tokens[keep]])

    def encode(self, data: object) -> TokenBatch:
        """Tokenize and encode; the features are the final (LayerNorm-ed) hidden tokens.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`tokenize`.

        Returns
        -------
        TokenBatch
            Encoded tokens (``x[:num_graphs]`` are the ``[graph]`` tokens).
        """
        return self.encode_tokens(self.tokenize(data))

    def _head(self, name: str) -> nn.Module:
        if name not in self.readout_heads:
            raise ValueError(
                f"the model has no {name}-level head; build it with readout including {name!r}"
            )
        return self.readout_heads[name]

    def forward(self, data: object) -> Tensor:
        """Graph-level prediction from the ``[graph]`` token.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`tokenize`.

        Returns
        -------
        torch.Tensor, shape = (num_graphs, out_channels)
            One prediction per graph.
        """
        head = self._head("graph")
        tokens = self.encode(data)
        return head(tokens.x[: tokens.num_graphs])

    def node_outputs(self, data: object) -> Tensor:
        """Node-level predictions from the node tokens (A.4.3).

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`tokenize`.

        Returns
        -------
        torch.Tensor, shape = (num_nodes, out_channels)
            One prediction per node.
        """
        head = self._head("node")
        tokens = self.encode(data)
        return head(tokens.group(0))

    def edge_outputs(self, data: object) -> Tensor:
        """Edge-level predictions from the edge tokens.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`tokenize`.

        Returns
        -------
        torch.Tensor, shape = (num_edges, out_channels)
            One prediction per column of ``data.edge_index`` (with
            ``edge_tokens="undirected"`` both directions get their edge token's prediction).
        """
        head = self._head("edge")
        tokens = self.encode(data)
        out = head(tokens.group(1))
        if tokens.edge_inverse is not None:
            out = out.index_select(0, tokens.edge_inverse)
        return out


# ----------------------------------------------------------------------------------------------
# order-k TokenGT for complexes
# ----------------------------------------------------------------------------------------------
class OrderKTokenGT(_TokenModel):
    r"""Order-k TokenGT (§3) on cell / simplicial / combinatorial complexes and hypergraphs.

    Every cell :math:`\sigma` of rank ``r = 0..max_rank`` is a token
    :math:`W_r X_\sigma + W_P\, \mathrm{pool}_{v \in \sigma} P_v + E^{(r)}` (pooled vertex
    identifiers, see the module notes; ``pool`` = sum by default), with one learned type
    identifier :math:`E^{(r)}` per rank; plus a ``[graph]`` token per complex. The vertices of
    every cell come from :meth:`ComplexData.vertex_cells
    <topomodelx_attention.data.ComplexData.vertex_cells>` (unsigned incidences), so any
    complex with ``incidence_r`` keys works, including hypergraphs
    (:class:`toponetx.CombinatorialComplex` via
    :func:`~topomodelx_attention.data.from_toponetx`).

    Parameters
    ----------
    in_channels : sequence of int
        Feature columns ``[d_0, ..., d_R]`` of ``x_0 .. x_R`` (sets ``max_rank = len - 1``);
        0 for a rank without features (its tokens are identifiers + type only).
    hidden_channels : int
        Model width.
    out_channels : int
        Output width of the heads.
    n_layers : int, default = 4
        Encoder layers.
    heads : int, default = 8
        Attention heads.
    node_id_dim : int, default = 16
        Width of ``data.node_id`` (``LaplacianNodeId`` / ``OrthogonalRandomNodeId`` accept a
        ``ComplexData``: identifiers of its 1-skeleton); 0 disables identifiers.
    attention : {"softmax", "performer"}, default = "softmax"
        Exact softmax or Performer attention.
    categorical : sequence of (sequence of int or None), optional
        Per rank: cardinalities of integer-coded feature columns, or ``None`` (float).
    id_pooling : {"sum", "mean"}, default = "sum"
        Pooling of the vertex identifiers of a cell (sum: inner products count shared
        vertices; mean: divided by the number of vertices).
    type_identifiers : bool, default = True
        Learned rank embeddings :math:`E^{(r)}`.
    graph_readout : bool, default = True
        Build the complex-level head on the ``[graph]`` token (:meth:`forward`).
    cell_readout : sequence of int, default = ()
        Ranks with a cell-level head (:meth:`cell_outputs`).
    ffn_channels, dropout, attention_dropout, embedding_dropout, drop_path, sign_flip, eigenvector_dropout, num_random_features, redraw_features_in_training, bias, token_layout
        As in :class:`TokenGT`.
    """

    def __init__(
        self,
        in_channels: Sequence[int],
        hidden_channels: int,
        out_channels: int,
        n_layers: int = 4,
        heads: int = 8,
        node_id_dim: int = 16,
        attention: str = "softmax",
        *,
        categorical: Sequence[Sequence[int] | None] | None = None,
        id_pooling: str = "sum",
        type_identifiers: bool = True,
        graph_readout: bool = True,
        cell_readout: Sequence[int] = (),
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        embedding_dropout: float = 0.0,
        drop_path: float = 0.0,
        sign_flip: bool = True,
        eigenvector_dropout: float = 0.0,
        num_random_features: int | None = None,
        redraw_features_in_training: bool = False,
        bias: bool = True,
        token_layout: str = "auto",
    ) -> None:
        super().__init__()
        in_channels = [_non_negative_int(c, "in_channels[r]") for c in in_channels]
        if not in_channels:
            raise ValueError("in_channels must list the feature width of every rank (0 = none)")
        if id_pooling not in ID_POOLINGS:
            raise ValueError(f"id_pooling must be one of {ID_POOLINGS}, got {id_pooling!r}")
        self.max_rank = len(in_channels) - 1
        self.in_channels = in_channels
        if categorical is None:
            categorical = [None] * len(in_channels)
        if len(categorical) != len(in_channels):
            raise ValueError("categorical needs one entry (None or cardinalities) per rank")
        self.cell_readout = tuple(int(r) for r in cell_readout)
        if any(not 0 <= r <= self.max_rank for r in self.cell_readout):
            raise ValueError(f"cell_readout ranks must be in 0..{self.max_rank}")
        if not graph_readout and not self.cell_readout:
            raise ValueError("enable graph_readout or give cell_readout ranks")
        self.id_pooling = id_pooling
        self.encoders = nn.ModuleDict(
            {
                str(r): FeatureEncoder(c, hidden_channels, cards, f"x_{r}")
                for r, (c, cards) in enumerate(zip(in_channels, categorical))
                if c > 0
            }
        )
        self.id_projection = (
            nn.Linear(node_id_dim, hidden_channels, bias=False) if node_id_dim else None
        )
        self.type_embedding = (
            nn.Embedding(self.max_rank + 1, hidden_channels) if type_identifiers else None
        )
        self._build_common(
            hidden_channels,
            n_layers,
            heads,
            node_id_dim,
            attention,
            ffn_channels,
            dropout,
            attention_dropout,
            embedding_dropout,
            drop_path,
            sign_flip,
            eigenvector_dropout,
            bias,
            num_random_features,
            redraw_features_in_training,
            token_layout,
        )
        self.graph_head = nn.Linear(hidden_channels, out_channels) if graph_readout else None
        self.cell_heads = nn.ModuleDict(
            {str(r): nn.Linear(hidden_channels, out_channels) for r in self.cell_readout}
        )

    def _pooled_ids(self, data: ComplexData, node_id: Tensor, rank: int) -> Tensor:
        if rank == 0:
            return node_id
        n_r = data.num_cells(rank)
        index = data.vertex_cells(rank).coalesce().indices().to(node_id.device)
        return segment_pool(node_id.index_select(0, index[0]), index[1], n_r, self.id_pooling)

    def tokenize(self, data: ComplexData) -> TokenBatch:
        """Embed the ``[graph]`` token and one token per cell of every rank.

        Parameters
        ----------
        data : ComplexData
            A complex or a batch: ``batch_r`` and ``incidence_r`` for ``r <= max_rank``,
            ``x_r`` for the ranks with features, ``node_id`` unless ``node_id_dim = 0``.

        Returns
        -------
        TokenBatch
            Groups ``(rank 0, ..., rank max_rank)``.
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
        num_graphs = data.num_complexes
        dtype = self.graph_token.dtype
        device = self.graph_token.device
        n0 = data.num_cells(0)
        batch0 = data["batch_0"].long()
        node_id = self._node_ids(data, n0, batch0, num_graphs)
        groups, batches = [], []
        for r in range(self.max_rank + 1):
            n_r = data.num_cells(r)
            h = torch.zeros((n_r, self.hidden_channels), dtype=dtype, device=device)
            if str(r) in self.encoders:
                if f"x_{r}" not in data:
                    raise ValueError(
                        f"the model has in_channels[{r}] = {self.in_channels[r]} but the data "
                        f"has no x_{r}; lift features (FeatureLifting) or set it to 0"
                    )
                h = h + self.encoders[str(r)](data[f"x_{r}"], dtype)
            if node_id is not None and n_r:
                h = h + self.id_projection(self._pooled_ids(data, node_id, r))
            if self.type_embedding is not None:
                h = h + self.type_embedding.weight[r].to(dtype)
            groups.append(h)
            batches.append(data[f"batch_{r}"].long())
        return self._assemble(groups, batches, num_graphs)

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
            One prediction per complex.
        """
        if self.graph_head is None:
            raise ValueError("the model has no complex-level head; build it with graph_readout")
        tokens = self.encode(data)
        return self.graph_head(tokens.x[: tokens.num_graphs])

    def cell_outputs(self, data: ComplexData) -> dict[int, Tensor]:
        """Cell-level predictions of the ``cell_readout`` ranks.

        Parameters
        ----------
        data : ComplexData
            A complex or a batch.

        Returns
        -------
        dict of int to torch.Tensor
            ``{rank: (n_rank, out_channels)}``.
        """
        if not self.cell_readout:
            raise ValueError("the model has no cell-level head; build it with cell_readout")
        tokens = self.encode(data)
        return {r: self.cell_heads[str(r)](tokens.group(r)) for r in self.cell_readout}
