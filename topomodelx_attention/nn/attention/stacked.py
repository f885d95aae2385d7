"""Many attention blocks' Q/K/V/O weights stacked per group and role, run in one fused call.

A layer that attends along several ``(source, target)`` pairs of token groups (the ranks of a
complex, for the pairwise :class:`~topomodelx_attention.nn.cell.CellularTransformerLayer`: its
sparse arrows) can run them all in one call of
:func:`~topomodelx_attention.nn.attention.fused.fused_sparse_attention_weights`. Their weights
then live in :class:`StackedBlocks` as one parameter per group and role instead of four per
block: ``query_key_value[g]`` holds ``[W_Q…; W_K…; W_V…]`` (``nn.Linear`` convention: the query
maps of the blocks into group ``g``, then the key and the value maps of the blocks out of it,
in block order) and ``output[g]`` holds ``[W_O… ]`` of the blocks into ``g`` side by side. The
same computation as one :class:`~topomodelx_attention.nn.attention.MultiHeadAttention` per
block, with one GEMM per group and role, and far fewer tensors for an optimiser to loop over.

:class:`StackedBlocks` answers "the weights of block ``key``" (:meth:`StackedBlocks.weights_of`,
views of the stacked parameters; :meth:`StackedBlocks.attention_of`, a block holding a copy),
"the weights for this forward" (:meth:`StackedBlocks.weights`). It knows its blocks by key and ``(source, target)`` group only (plain tuples: ``torch.compile`` traces them as
constants). Only the attention core touches a block's projections: ``multihead.py`` (the
block itself), ``fused.py`` (the fused call on unstacked blocks) and this module.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from topomodelx_attention.nn.attention.fused import (
    FusedNeighborhood,
    fusable,
    fused_slots,
    fused_sparse_attention_weights,
)
from topomodelx_attention.nn.attention.multihead import MultiHeadAttention

__all__ = ["ROLES", "StackedBlocks", "projection_weights", "stackable"]

#: The projections of a block, in the order of :meth:`StackedBlocks.weights_of`.
ROLES = ("query", "key", "value", "out")

Weights = tuple[Tensor, Tensor | None]


def stackable(block: MultiHeadAttention) -> bool:
    """Whether an attention block can join the fused call with stacked weights.

    Parameters
    ----------
    block : MultiHeadAttention
        The attention block.

    Returns
    -------
    bool
        ``True`` for a :func:`~topomodelx_attention.nn.attention.fused.fusable` block whose
        kernel has no parameter of its own.
    """
    return fusable(block) and not any(True for _ in block.kernel.parameters())


def projection_weights(block: MultiHeadAttention, *, grad: bool = False) -> dict[str, Tensor | None]:
    """Return the Q/K/V/O weights and biases of one attention block (its parameters).

    Parameters
    ----------
    block : MultiHeadAttention
        An attention block with ``lin_query``, ``lin_key``, ``lin_value``, ``lin_out``.
    grad : bool, default=False
        Return the parameters' ``.grad`` instead (``None`` where a parameter has none).

    Returns
    -------
    dict of str to (torch.Tensor or None)
        As :meth:`StackedBlocks.weights_of`.
    """
    lins = (block.lin_query, block.lin_key, block.lin_value, block.lin_out)
    weights = {r: None if lin is None else _of(lin.weight, grad) for r, lin in zip(ROLES, lins)}
    biases = {
        f"{r}_bias": None if lin is None else _of(lin.bias, grad) for r, lin in zip(ROLES, lins)
    }
    cardinality = getattr(block, "cardinality_weight", None)
    return {**weights, **biases, "cardinality": _of(cardinality, grad)}


class StackedBlocks(nn.Module):
    """Attention blocks between token groups: their stacked weights and their one fused call.

    Built from one :class:`~topomodelx_attention.nn.attention.MultiHeadAttention` per
    ``(source, target)`` pair (every block :func:`stackable`, all with the same kernel and the
    same bias setting): their weights are copied into the stacked parameters (so a layer built
    under a seed has the same weights as one block per pair); the blocks themselves are not kept.

    Parameters
    ----------
    blocks : sequence of MultiHeadAttention
        The blocks.
    keys : sequence of str
        Their names (the CT's arrow keys ``"1->0"``, ``"1->1:adjacency_1"``), same order.
    pairs : sequence of (int, int)
        Their ``(source group, target group)``, same order.
    ranks : int
        Number of groups ``0..ranks-1`` (the ranks of a complex).

    Attributes
    ----------
    query_key_value : torch.nn.ParameterDict
        ``query_key_value[str(g)]`` of shape ``((n_q + 2·n_kv)·C, C)`` for the ``n_q`` blocks
        into group ``g`` and the ``n_kv`` blocks out of it (groups no block reads: no entry).
    output : torch.nn.ParameterDict
        ``output[str(g)]`` of shape ``(C, n_q·C)``.
    query_key_value_bias, output_bias : torch.nn.ParameterDict or None
        Shapes ``((n_q + 2·n_kv)·C,)`` and ``(n_q, C)`` (one output bias per block); ``None``
        for blocks without bias.
    cardinality : torch.nn.ParameterDict or None
        ``cardinality[str(g)]`` of shape ``(n_q, heads, C / heads)``: the weights of the
        cardinality term of the blocks into group ``g`` (the kernel's ``cardinality``
        option); ``None`` without it.
    kernel : SparseKernel
        The blocks' kernel (scale, attention dropout).
    targets, sources : tuple of tuple of int
        Per group: the blocks (indices) whose target / source it is, in slot order.
    """

    def __init__(
        self,
        blocks: Sequence[MultiHeadAttention],
        keys: Sequence[str],
        pairs: Sequence[tuple[int, int]],
        ranks: int,
    ) -> None:
        super().__init__()
        if not blocks or not len(blocks) == len(keys) == len(pairs):
            raise ValueError(
                f"StackedBlocks needs one key and pair per block, got {len(blocks)} blocks, "
                f"{len(keys)} keys, {len(pairs)} pairs"
            )
        if not all(stackable(block) for block in blocks):
            raise ValueError(f"every block of {list(keys)} must be stackable (see stackable())")
        self.keys = tuple(keys)
        self.pairs = tuple((int(s), int(t)) for s, t in pairs)
        self.kernel = blocks[0].kernel
        self.heads = self.kernel.heads
        self.channels = int(blocks[0].lin_query.weight.shape[1])
        slots = fused_slots(self.pairs, [0] * int(ranks))
        # plain tuples: torch.compile reconstructs them at a graph break, not a frozen dataclass
        self.targets, self.sources = slots.targets, slots.sources
        with_bias = blocks[0].lin_query.bias is not None
        self.cardinality = nn.ParameterDict() if self.kernel.cardinality else None
        self.query_key_value = nn.ParameterDict()
        self.output = nn.ParameterDict()
        self.query_key_value_bias = nn.ParameterDict() if with_bias else None
        self.output_bias = nn.ParameterDict() if with_bias else None
        for g, (targets, sources) in enumerate(zip(self.targets, self.sources)):
            lins = [blocks[i].lin_query for i in targets] + [blocks[i].lin_key for i in sources]
            lins += [blocks[i].lin_value for i in sources]
            outs = [blocks[i].lin_out for i in targets]
            with torch.no_grad():
                if lins:
                    self.query_key_value[str(g)] = nn.Parameter(
                        torch.cat([lin.weight for lin in lins])
                    )
                    if with_bias:
                        self.query_key_value_bias[str(g)] = nn.Parameter(
                            torch.cat([lin.bias for lin in lins])
                        )
                if outs:
                    self.output[str(g)] = nn.Parameter(
                        torch.cat([lin.weight for lin in outs], dim=1)
                    )
                    if with_bias:
                        self.output_bias[str(g)] = nn.Parameter(
                            torch.stack([lin.bias for lin in outs])
                        )
                if outs and self.cardinality is not None:
                    self.cardinality[str(g)] = nn.Parameter(
                        torch.stack([blocks[i].cardinality_weight for i in targets])
                    )

    def active(
        self, sizes: Sequence[int], targets: Sequence[int] | None = None
    ) -> tuple[int, ...]:
        """Return the blocks (indices) that attend, in block order.

        Parameters
        ----------
        sizes : sequence of int
            Tokens of every group: a block attends when both its groups have tokens.
        targets : sequence of int, optional
            Only the blocks into these groups (the outputs a caller reads, e.g. the readout
            ranks of a model's last layer); default every group.

        Returns
        -------
        tuple of int
            Indices into :attr:`pairs`.
        """
        return tuple(
            i
            for i, (s, t) in enumerate(self.pairs)
            if sizes[s] and sizes[t] and (targets is None or t in targets)
        )

    def forward(
        self,
        x: Sequence[Tensor],
        neighborhood: FusedNeighborhood | None,
        *,
        output_dropout: nn.Module | None = None,
        targets: Sequence[int] | None = None,
    ) -> list[Tensor | None]:
        """Attend along every active block in one fused sparse call (CT Eq. 2, summed per target).

        Parameters
        ----------
        x : sequence of torch.Tensor
            ``x[g]`` of shape ``(n_g, C)``: the (normalised) tokens of every group.
        neighborhood : FusedNeighborhood or None
            The joined edge lists of the active blocks
            (:func:`~topomodelx_attention.nn.attention.fused.prepare_fused_index`, in the order
            of :meth:`active`); ``None`` when no block is active.
        output_dropout : torch.nn.Module, optional
            Dropout on the output of every block.
        targets : sequence of int, optional
            Attend only along the blocks into these groups (:meth:`active`); ``neighborhood``
            must then hold exactly those blocks' edge lists.

        Returns
        -------
        list of (torch.Tensor or None)
            Per group: the sum of the blocks into it, shape ``(n_g, C)``; ``None`` for a group
            no active block reaches.
        """
        active = self.active(tuple(xr.shape[0] for xr in x), targets)
        if not active:  # a group without tokens everywhere: nothing to attend
            return [None] * len(x)
        projections, outputs, cardinality = self.weights(active)
        head_channels = self.channels // self.heads
        return fused_sparse_attention_weights(
            x,
            self.kernel,
            [self.pairs[i] for i in active],
            neighborhood,
            projections,
            outputs,
            head_channels=head_channels,
            value_channels=head_channels,
            output_dropout=output_dropout,
            cardinality=cardinality,
        )

    def weights(
        self, active: Sequence[int]
    ) -> tuple[list[Weights | None], list[Weights | None], list[Tensor | None] | None]:
        """Return the stacked ``(W, b)`` per group for a forward on the ``active`` blocks.

        Parameters
        ----------
        active : sequence of int
            The blocks that attend (:meth:`active`).

        Returns
        -------
        projections : list of ((torch.Tensor, torch.Tensor or None) or None)
            Per group: ``(W, b)`` with ``W`` of shape ``((n_q + 2·n_kv)·C, C)`` for the active
            blocks (the parameters themselves when all blocks are active, else the slices of the
            active ones); ``None`` for a group none of them reads.
        outputs : list of ((torch.Tensor, torch.Tensor or None) or None)
            Per group: ``(W_O, b_O)`` of shapes ``(C, n_q·C)`` and ``(n_q, C)`` (or ``None``).
        cardinality : list of (torch.Tensor or None), or None
            Per group: the cardinality weights ``(n_q, heads, C / heads)`` of the active blocks
            into it (``None`` for a group none of them targets); ``None`` without the term.
        """
        qkv, out = self.query_key_value, self.output
        qkv_bias, out_bias = self.query_key_value_bias, self.output_bias
        card = self.cardinality
        keep = set(active)
        if len(keep) == len(self.pairs):  # the usual case: the parameters as they are
            ranks = range(len(self.targets))
            projections = [
                (qkv[str(g)], None if qkv_bias is None else qkv_bias[str(g)])
                if str(g) in qkv
                else None
                for g in ranks
            ]
            outputs = [
                (out[str(g)], None if out_bias is None else out_bias[str(g)])
                if str(g) in out
                else None
                for g in ranks
            ]
            cardinality = None if card is None else [card.get(str(g)) for g in ranks]
            return projections, outputs, cardinality
        # a group without tokens in this batch, or targets left out: the active blocks' slices
        c = self.channels
        projections, outputs = [], []
        cardinality = None if card is None else []
        for g, (targets, sources) in enumerate(zip(self.targets, self.sources)):
            n_q, n_kv = len(targets), len(sources)
            rows = [j for j, i in enumerate(targets) if i in keep]
            rows += [n_q + j for j, i in enumerate(sources) if i in keep]
            rows += [n_q + n_kv + j for j, i in enumerate(sources) if i in keep]
            if rows:
                w = torch.cat([qkv[str(g)][j * c : (j + 1) * c] for j in rows])
                b = None
                if qkv_bias is not None:
                    b = torch.cat([qkv_bias[str(g)][j * c : (j + 1) * c] for j in rows])
                projections.append((w, b))
            else:
                projections.append(None)
            cols = [j for j, i in enumerate(targets) if i in keep]
            if cols:
                w = torch.cat([out[str(g)][:, j * c : (j + 1) * c] for j in cols], dim=1)
                b = None if out_bias is None else out_bias[str(g)][cols]
                outputs.append((w, b))
            else:
                outputs.append(None)
            if cardinality is not None:
                cardinality.append(card[str(g)][cols] if cols else None)
        return projections, outputs, cardinality

    def weights_of(self, key: str, *, grad: bool = False) -> dict[str, Tensor | None]:
        """Return the Q/K/V/O weights and biases of one block (views of the stacked parameters).

        Parameters
        ----------
        key : str
            The block's key (one of :attr:`keys`).
        grad : bool, default=False
            Return the same slices of the parameters' ``.grad`` instead (``None`` where a
            parameter has none).

        Returns
        -------
        dict of str to (torch.Tensor or None)
            ``query``, ``key``, ``value``, ``out`` of shape ``(C, C)`` (``nn.Linear``
            convention: ``(out, in)``) and ``query_bias``, ``key_bias``, ``value_bias``,
            ``out_bias`` of shape ``(C,)`` (``None`` without bias); ``cardinality`` of shape
            ``(heads, C / heads)``, the weight of the cardinality term (``None`` without it).
        """
        if key not in self.keys:
            raise ValueError(f"no stacked block with key {key!r}; they are {list(self.keys)}")
        i, c = self.keys.index(key), self.channels
        source, target = self.pairs[i]
        q, kv = self.targets[target].index(i), self.sources[source].index(i)
        n_q, n_kv = len(self.targets[source]), len(self.sources[source])
        rows = {"query": (target, q), "key": (source, n_q + kv), "value": (source, n_q + n_kv + kv)}
        out: dict[str, Tensor | None] = {}
        for role, (g, j) in rows.items():
            out[role] = _of(self.query_key_value[str(g)], grad, rows=slice(j * c, (j + 1) * c))
            bias = self.query_key_value_bias
            out[f"{role}_bias"] = (
                None if bias is None else _of(bias[str(g)], grad, rows=slice(j * c, (j + 1) * c))
            )
        out["out"] = _of(self.output[str(target)], grad, cols=slice(q * c, (q + 1) * c))
        bias = self.output_bias
        out["out_bias"] = None if bias is None else _of(bias[str(target)], grad, rows=q)
        weight = self.cardinality
        out["cardinality"] = None if weight is None else _of(weight[str(target)], grad, rows=q)
        return out

    def attention_of(self, key: str) -> MultiHeadAttention:
        """One block as a :class:`MultiHeadAttention` of its own, holding a copy of its weights.

        A new :class:`~topomodelx_attention.nn.attention.MultiHeadAttention` (not a parameter
        of the layer; the global random state is left untouched) with the blocks' kernel and
        this module's training mode: ``MHA(x_target, x_source, neighbourhood)`` of the block
        (CT Eq. 2), for references and tests.

        Parameters
        ----------
        key : str
            The block's key (one of :attr:`keys`).

        Returns
        -------
        MultiHeadAttention
            The block.
        """
        weights = self.weights_of(key)
        with torch.random.fork_rng(devices=[]):
            block = MultiHeadAttention(
                self.channels,
                self.channels,
                self.heads,
                kernel=self.kernel,
                bias=weights["query_bias"] is not None,
                output_projection=True,
            )
        reference = weights["query"]
        block = block.to(device=reference.device, dtype=reference.dtype)
        with torch.no_grad():
            for role in ROLES:
                lin = getattr(block, f"lin_{role}")
                lin.weight.copy_(weights[role])
                if lin.bias is not None:
                    lin.bias.copy_(weights[f"{role}_bias"])
            if block.cardinality_weight is not None:
                block.cardinality_weight.copy_(weights["cardinality"])
        return block.train(self.training)

    def extra_repr(self) -> str:
        """Describe the blocks in ``repr``."""
        return f"blocks={list(self.keys)}, channels={self.channels}, heads={self.heads}"


def _of(
    param: Tensor | None, grad: bool, rows: slice | int | None = None, cols: slice | None = None
) -> Tensor | None:
    """``param[rows, cols]`` (or the same slice of its ``.grad``; ``None`` where there is none)."""
    tensor = param.grad if grad and param is not None else param
    if tensor is None:
        return None
    if rows is not None:
        tensor = tensor[rows]
    return tensor if cols is None else tensor[:, cols]
