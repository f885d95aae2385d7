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
:math:`W [X; P_u; P_v] + E` (the type embedding has the model width, A.3.1;
:class:`~.tokens.TokenGTTokenizer`). A learnable ``[graph]`` token is prepended to every graph
and the complex-level prediction is read from it (§2, Figure 1).

:class:`TokenGT` takes graphs (``torch_geometric`` ``Data`` / ``Batch``): node tokens + edge
tokens, both directions of an undirected edge (``edge_tokens="directed"``, the paper's choice;
the ``edge_index`` must then hold both directions), or one token per undirected edge with
*pooled* identifiers ``[P_u + P_v, P_u + P_v]`` (``edge_tokens="undirected"``, the cheaper
variant of A.5: half the edge tokens, symmetric in ``u, v``). Its order-k generalisation on any
complex is :class:`~.order_k_tokengt.OrderKTokenGT`.

Attention is the shared core's (:mod:`topomodelx_attention.nn.attention`): ``kind="dense"``
(exact softmax per complex, padded, SDPA with a key-padding mask) or ``kind="linear"``
(Performer FAVOR+, linear in the tokens), see
:mod:`~topomodelx_attention.nn.graph.tokengt_layer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from topomodelx_attention._docs import fill_doc
from topomodelx_attention.data import ComplexData
from topomodelx_attention.nn._export import prepared_inputs
from topomodelx_attention.nn.attention import PaddedLayout
from topomodelx_attention.nn.common import check_inputs
from topomodelx_attention.nn.graph.token_model import (
    TokenModel,
    TokenModelOptions,
    check_outputs,
    token_model_options,
)
from topomodelx_attention.nn.graph.tokens import TokenBatch, TokenGTTokenizer

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["TOKENGT_OUTPUTS", "TokenGT", "TokenGTInputs"]


@dataclass(frozen=True)
class TokenGTInputs:
    """A graph batch prepared for :class:`TokenGT` (:meth:`TokenGT.prepare`).

    Validated inputs and every index / layout derived from the graph structure: the model's
    computation on it (:meth:`TokenGT.tokenize`, the encoder, the readouts) has no data-dependent
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


@fill_doc
class TokenGT(TokenModel):
    r"""Tokenized Graph Transformer for (batches of) graphs (§2, A.3.3).

    ``[graph]`` token + node tokens + edge tokens (:class:`TokenGTTokenizer`) → pre-LN
    Transformer (:class:`~topomodelx_attention.nn.graph.tokengt_layer.TokenGTEncoder`) → linear
    readouts of the ``[graph]`` token (:meth:`forward`, one row per graph), the node tokens and
    the edge tokens (:meth:`cell_outputs`, ``{0: nodes, 1: edges}``).

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
    type_identifiers : bool, default = True
        Learned node / edge type embeddings.
    edge_tokens : {"directed", "undirected"}, default = "directed"
        Both directions of every edge (``edge_index`` must be symmetric: a column without its
        reverse raises ``ValueError``), or one token per undirected edge (pooled
        identifiers; any mix of directions is merged). With ``pooling="sum"`` / ``"mean"``
        the tokens of both directions of an edge are pooled.
    outputs : sequence of {"complex", 0, 1}, default = ("complex",)
        Which predictions the model returns (one linear readout each): ``"complex"`` one row per
        graph (:meth:`forward`), ``0`` one per node, ``1`` one per edge (:meth:`cell_outputs`):
        cell-level outputs are named by their rank, as everywhere.
    sparse_equivariant_basis : bool, default = False
        "+ SEB" of A.4.3: after every layer add to every node token the sum of the tokens of
        its edges (``X_ii ← X_ii + Σ_{j≠i} X_ij``; for ``edge_tokens="directed"`` the edges
        ``(i, j)`` leaving ``i``, for ``"undirected"`` every edge at ``i``), an equivariant
        operator that near-orthonormal identifiers on large graphs approximate poorly.
    categorical, edge_categorical : sequence of int, optional
        Categories per column of integer-coded (categorical) node / edge features.
    %(token_model_options)s

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
        type_identifiers: bool = True,
        edge_tokens: str = "directed",
        outputs: Sequence[str | int] = ("complex",),
        sparse_equivariant_basis: bool = False,
        categorical: Sequence[int] | None = None,
        edge_categorical: Sequence[int] | None = None,
        **options: Unpack[TokenModelOptions],
    ) -> None:
        super().__init__()
        options = token_model_options("TokenGT", options)
        outputs = check_outputs(outputs, TOKENGT_OUTPUTS, "the graph; 0: nodes, 1: edges")
        if isinstance(out_channels, bool) or not isinstance(out_channels, int) or out_channels < 1:
            raise ValueError(f"out_channels must be a positive int, got {out_channels!r}")
        self.tokenizer = TokenGTTokenizer(
            in_channels,
            edge_channels,
            hidden_channels,
            node_id_dim=options["node_id_dim"],
            type_identifiers=type_identifiers,
            edge_tokens=edge_tokens,
            categorical=categorical,
            edge_categorical=edge_categorical,
        )
        self._build_common(hidden_channels, out_channels, outputs, options)
        self.sparse_equivariant_basis = bool(sparse_equivariant_basis)

    def _prepared(self, data: object) -> TokenGTInputs:
        """Return ``data`` when prepared, else :meth:`prepare` it (``nn._export.prepared_inputs``)."""
        return prepared_inputs(self, data, TokenGTInputs)

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
        inputs = self._prepared(data)
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

    def cell_outputs(self, data: object) -> dict[int, Tensor]:
        """Cell-level predictions of the ranks listed in ``outputs``: nodes (A.4.3) and edges.

        Parameters
        ----------
        data : torch_geometric.data.Data or Batch
            Graph(s) as for :meth:`prepare`, or its result.

        Returns
        -------
        dict of int to torch.Tensor
            ``{0: (num_nodes, out_channels), 1: (num_edges, out_channels)}`` (the ranks in
            ``outputs``): one prediction per node token, and one per column of
            ``data.edge_index`` (with ``edge_tokens="undirected"`` both directions get their
            edge token's prediction).
        """
        ranks = self._cell_ranks()
        # prepared here, in the called method: a compiled model breaks its graph once, at prepare
        inputs = self._prepared(data)
        tokens = self.encode(inputs)
        out = {r: self.readouts[str(r)](tokens.group(r)) for r in ranks}
        if 1 in out and tokens.edge_inverse is not None:
            out[1] = out[1].index_select(0, tokens.edge_inverse)
        return out
