r"""Tokens of TokenGT and order-k TokenGT: the token set, the graph tokenizer, the shared model.

* :class:`TokenBatch`: the tokens of a batch of complexes (graphs), ``[graph]`` tokens first;
* :class:`TokenGTTokenizer`: node and edge tokens :math:`W [X; P_u; P_v] + E` of TokenGT (§2):
  node identifiers :math:`P` (``data.node_id``, written by
  :class:`~topomodelx_attention.transforms.LaplacianNodeId` or
  :class:`~topomodelx_attention.transforms.OrthogonalRandomNodeId`), type identifiers
  :math:`E^{\mathcal V}, E^{\mathcal E}`, the identifier projections evaluated once per node
  and gathered per edge;
* what :class:`~.tokengt.TokenGT` and :class:`~.order_k_tokengt.OrderKTokenGT` share beyond
  their tokens is :mod:`~.token_model` (:class:`~.token_model.TokenModel`, the options);
* the training-time regularisers on the identifiers (A.3.1, A.3.3), applied inside ``forward``
  in training mode only and drawn from PyTorch's global generator: a random sign flip per
  (complex, eigenvector column) (:func:`random_sign_flip`) and eigenvector dropout (a whole
  column of one complex is zeroed, the others rescaled by :math:`1/(1-p)`, like 2-D channel
  dropout; :func:`eigenvector_dropout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.nn.attention import PaddedLayout
from topomodelx_attention.nn.common import FeatureEncoder, segment_pool

__all__ = [
    "EDGE_TOKENS",
    "NODE_ID_HELP",
    "TokenBatch",
    "TokenGTTokenizer",
    "eigenvector_dropout",
    "non_negative_int",
    "random_sign_flip",
]

#: ``"directed"``: one token per column of ``edge_index`` (both directions of an undirected
#: edge, §2); ``"undirected"``: one token per undirected edge, pooled identifiers (A.5).
EDGE_TOKENS: tuple[str, ...] = ("directed", "undirected")

#: What to do when a model needs node identifiers the data lacks.
NODE_ID_HELP = (
    "apply a node-identifier transform to every graph before batching, e.g. "
    "topomodelx_attention.transforms.LaplacianNodeId(dim={dim}) or "
    "OrthogonalRandomNodeId(dim={dim}) (it writes data.node_id), or build the model with "
    "node_id_dim=0 (no node identifiers)"
)

#: For a model with a feature encoder and data without the features: the model's channel
#: option, what the data lacks, and why building with that option 0 fixes it.
_MISSING_FEATURES: dict[str, tuple[str, str, str]] = {
    "x": ("in_channels", "node features x", "for feature-less graphs"),
    "edge_attr": ("edge_channels", "edge_attr", "to ignore edge features"),
}


# ----------------------------------------------------------------------------------------------
# identifier regularisers (functional, training time)
# ----------------------------------------------------------------------------------------------
@fill_doc
def random_sign_flip(node_id: Tensor, batch: Tensor, num_complexes: int) -> Tensor:
    """Multiply every (complex, eigenvector column) of the identifiers by a random ``±1`` (A.3.1).

    Laplacian eigenvectors are defined up to sign; flipping them at random during training
    makes the model robust to that ambiguity. One sign per complex and column (shared by all
    nodes of the complex), from PyTorch's global generator; not in place.

    Parameters
    ----------
    %(node_id)s
    %(per_complex)s

    Returns
    -------
    torch.Tensor, shape = (n, d_p)
        Identifiers with flipped columns.
    """
    signs = torch.randint(0, 2, (num_complexes, node_id.shape[1]), device=node_id.device)
    signs = (2 * signs - 1).to(node_id.dtype)
    return node_id * signs.index_select(0, batch)


@fill_doc
def eigenvector_dropout(node_id: Tensor, batch: Tensor, num_complexes: int, p: float) -> Tensor:
    """Zero whole identifier columns per complex with probability ``p`` (A.3.1, A.3.3).

    Like 2-D channel dropout: every (complex, column) is dropped independently and the kept
    columns are rescaled by ``1 / (1 - p)``. From PyTorch's global generator; not in place.

    Parameters
    ----------
    %(node_id)s
    %(per_complex)s
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


def non_negative_int(value: object, name: str) -> int:
    """Return ``value`` if it is a non-negative int (``ValueError`` naming ``name`` otherwise)."""
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
        self.in_channels = non_negative_int(in_channels, "in_channels")
        self.edge_channels = non_negative_int(edge_channels, "edge_channels")
        self.node_id_dim = non_negative_int(node_id_dim, "node_id_dim")
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

    def _add_features(
        self,
        tokens: Tensor,
        encoder: FeatureEncoder | None,
        features: Tensor | None,
        name: str,
        dtype: torch.dtype,
    ) -> Tensor:
        """``tokens + encoder(features)`` (``tokens`` without an encoder); refuse missing features.

        ``name`` (``"x"`` or ``"edge_attr"``) selects the wording of the ``ValueError`` raised
        when the model has an encoder but the data has no such features.
        """
        if encoder is None:
            return tokens
        if features is None:
            channels, what, why = _MISSING_FEATURES[name]
            raise ValueError(
                f"the model has {channels}={getattr(self, channels)} but the data has no {what}; "
                f"build it with {channels}=0 {why}"
            )
        return tokens + encoder(features, dtype)

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
                + NODE_ID_HELP.format(dim=self.node_id_dim)
            )
        if dtype is None:
            params = list(self.parameters())
            dtype = params[0].dtype if params else torch.get_default_dtype()
        device = edge_index.device
        m = edge_index.shape[1]
        node = torch.zeros((num_nodes, self.hidden_channels), dtype=dtype, device=device)
        edge = torch.zeros((m, self.hidden_channels), dtype=dtype, device=device)
        node = self._add_features(node, self.node_encoder, x, "x", dtype)
        edge = self._add_features(edge, self.edge_encoder, edge_attr, "edge_attr", dtype)
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
