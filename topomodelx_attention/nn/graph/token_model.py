r"""What TokenGT and order-k TokenGT share beyond their tokens: the model and its options.

* :class:`TokenModel`: the learnable ``[graph]`` token of every complex (§2, Figure 1), the
  identifier regularisers (:func:`~.tokens.random_sign_flip`,
  :func:`~.tokens.eigenvector_dropout`, training only), the encoder stack
  (:class:`~.tokengt_layer.TokenGTEncoder`) and one linear readout per output;
* the options both constructors take as keywords (:class:`TokenModelOptions`, defaults
  :data:`TOKEN_MODEL_OPTIONS`), checked once by :func:`token_model_options`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any, TypedDict

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention import PaddedLayout, check_all_pairs, padded_layout
from topomodelx_attention.nn.attention.heads import check_dropout
from topomodelx_attention.nn.common import POOLINGS, segment_pool
from topomodelx_attention.nn.graph.tokengt_layer import TokenGTEncoder, TokenGTLayer
from topomodelx_attention.nn.graph.tokens import (
    NODE_ID_HELP,
    TokenBatch,
    eigenvector_dropout,
    non_negative_int,
    random_sign_flip,
)

__all__ = [
    "TOKEN_MODEL_OPTIONS",
    "TOKEN_POOLINGS",
    "TokenModel",
    "TokenModelOptions",
    "check_outputs",
    "token_model_options",
]


#: How the token models read their complex-level prediction: the ``[graph]`` token (the
#: paper's readout) or a sum / mean over the other tokens of each complex.
TOKEN_POOLINGS = ("graph_token", *POOLINGS)

#: The options :class:`~.tokengt.TokenGT` and :class:`~.order_k_tokengt.OrderKTokenGT` share
#: (keywords of both constructors, :class:`TokenModelOptions`) and their defaults.
TOKEN_MODEL_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        "n_layers": 4,
        "heads": 8,
        "node_id_dim": 16,
        "kind": "dense",
        "kernel_options": None,
        "ffn_channels": None,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "embedding_dropout": 0.0,
        "drop_path": 0.0,
        "sign_flip": True,
        "eigenvector_dropout": 0.0,
        "bias": True,
        "token_layout": "auto",
        "pooling": "graph_token",
        "check_inputs": True,
    }
)


class TokenModelOptions(TypedDict, total=False):
    """The keyword options both token models take (defaults :data:`TOKEN_MODEL_OPTIONS`)."""

    n_layers: int
    heads: int
    node_id_dim: int
    kind: str
    kernel_options: Mapping[str, Any] | None
    ffn_channels: int | None
    dropout: float
    attention_dropout: float
    embedding_dropout: float
    drop_path: float
    sign_flip: bool
    eigenvector_dropout: float
    bias: bool
    token_layout: str
    pooling: str
    check_inputs: bool


def check_outputs(outputs: object, allowed: Sequence[object], what: str) -> tuple:
    """Return the ``outputs`` of a token model as a tuple of distinct entries of ``allowed``."""
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


def token_model_options(model: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Check the shared options of a token model and fill in their defaults.

    Parameters
    ----------
    model : str
        The model's name (for the messages).
    options : mapping
        The keywords given (a subset of :data:`TOKEN_MODEL_OPTIONS`).

    Returns
    -------
    dict
        Every option of :data:`TOKEN_MODEL_OPTIONS`, the given ones checked.

    Raises
    ------
    TypeError
        For a keyword that is not a shared option.
    ValueError
        For a kernel that does not attend all pairs of tokens, an unknown pooling, a negative
        ``node_id_dim`` or a dropout outside ``[0, 1)``.
    """
    unknown = sorted(set(options) - set(TOKEN_MODEL_OPTIONS))
    if unknown:
        raise TypeError(
            f"{model}() got an unexpected keyword argument {unknown[0]!r}; its options besides "
            f"its own are {sorted(TOKEN_MODEL_OPTIONS)}"
        )
    options = {**TOKEN_MODEL_OPTIONS, **options}
    options["kind"] = check_all_pairs(options["kind"], model)
    if options["pooling"] not in TOKEN_POOLINGS:
        raise ValueError(f"pooling must be one of {TOKEN_POOLINGS}, got {options['pooling']!r}")
    options["node_id_dim"] = non_negative_int(options["node_id_dim"], "node_id_dim")
    for name in ("eigenvector_dropout", "embedding_dropout"):
        options[name] = check_dropout(options[name], name)
    return options


class TokenModel(nn.Module):
    """[graph] token, identifier regularisers, encoder stack and readouts of both models.

    A model defines ``prepare`` / ``_prepared`` (its inputs) and ``tokenize``; :meth:`encode`
    and :meth:`forward` are shared.
    """

    def _build_common(
        self, hidden_channels: int, out_channels: int, outputs: tuple, options: Mapping[str, Any]
    ) -> None:
        """Build the shared modules from the checked options (:func:`token_model_options`)."""
        self.pooling = options["pooling"]
        self.hidden_channels = hidden_channels
        self.node_id_dim = options["node_id_dim"]
        self.sign_flip = bool(options["sign_flip"])
        self.check_inputs = bool(options["check_inputs"])
        self.eigenvector_dropout = options["eigenvector_dropout"]
        self.graph_token = nn.Parameter(torch.empty(1, hidden_channels))
        nn.init.normal_(self.graph_token, std=0.02)
        self.embedding_dropout = nn.Dropout(options["embedding_dropout"])
        layer = partial(
            TokenGTLayer,
            hidden_channels,
            heads=options["heads"],
            ffn_channels=options["ffn_channels"],
            kind=options["kind"],
            kernel_options=options["kernel_options"],
            dropout=options["dropout"],
            attention_dropout=options["attention_dropout"],
            bias=options["bias"],
        )
        self.encoder = TokenGTEncoder(
            hidden_channels,
            layer=layer,
            n_layers=options["n_layers"],
            drop_path=options["drop_path"],
            token_layout=options["token_layout"],
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
                + NODE_ID_HELP.format(dim=self.node_id_dim)
            )
        if not isinstance(node_id, Tensor) or tuple(node_id.shape) != (num_nodes, self.node_id_dim):
            shape = tuple(node_id.shape) if isinstance(node_id, Tensor) else type(node_id).__name__
            raise ValueError(
                f"data.node_id must have shape (num_nodes, node_id_dim) = ({num_nodes}, "
                f"{self.node_id_dim}), got {shape}; " + NODE_ID_HELP.format(dim=self.node_id_dim)
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

    def encode(self, data: object) -> TokenBatch:
        """Tokenize and encode (``tokenize``, then :meth:`encode_tokens`): the final tokens.

        Parameters
        ----------
        data : object
            The model's input (TokenGT: a graph or a batch; OrderKTokenGT: a ``ComplexData``),
            or its ``prepare`` result.

        Returns
        -------
        TokenBatch
            Encoded, LayerNorm-ed tokens (``x[:num_complexes]`` are the ``[graph]`` tokens).
        """
        return self.encode_tokens(self.tokenize(data))

    def forward(self, data: object) -> Tensor:
        """Complex-level prediction: the readout of the pooled tokens.

        With ``pooling="graph_token"`` (the paper) the ``[graph]`` token of each complex is
        read; with ``"sum"`` / ``"mean"`` the sum / mean of its other tokens (every token once:
        with ordered identifiers every ordering of a cell, with directed edge tokens both
        directions; a complex without tokens pools to zeros). ``forward(data)`` is
        ``forward(prepare(data))``; a ``torch.compile``-d model called on either runs
        ``prepare`` eagerly and the rest as one graph.

        Parameters
        ----------
        data : object
            As for :meth:`encode`.

        Returns
        -------
        torch.Tensor, shape = (num_complexes, out_channels)
            One prediction per graph / complex, empty ones included.
        """
        readout = self._readout("complex")
        # prepared here, in the called method: a compiled model breaks its graph once, at prepare
        inputs = self._prepared(data)  # the compiled model's one graph break
        tokens = self.encode(inputs)
        count = tokens.num_complexes
        if self.pooling == "graph_token":
            return readout(tokens.x[:count])
        pooled = segment_pool(tokens.x[count:], tokens.layout.batch[count:], count, self.pooling)
        return readout(pooled)

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

    def _cell_ranks(self) -> list[int]:
        """Ranks of the cell-level outputs (``cell_outputs``); raise when ``outputs`` has none."""
        ranks = [o for o in self.outputs if o != "complex"]
        if not ranks:
            raise ValueError(
                f"the model has no cell-level output; build it with outputs including ranks "
                f"(it has {self.outputs})"
            )
        return ranks

    def _readout(self, name: object) -> nn.Module:
        if str(name) not in self.readouts:
            raise ValueError(
                f"the model has no {name!r} output; build it with outputs including {name!r} "
                f"(it has {self.outputs})"
            )
        return self.readouts[str(name)]

