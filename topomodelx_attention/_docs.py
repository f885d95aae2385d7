"""Shared numpydoc fragments and the :func:`fill_doc` decorator that writes them in.

Parameters that several public functions take with the same meaning (the projected
``query`` / ``key`` / ``value`` of the attention functions, the ``src`` / ``index`` of the
scatter reductions, ...) are described once, in :data:`DOCS`. A docstring names a fragment
by a line holding only its placeholder, ``%(name)s``; :func:`fill_doc` replaces that line by
the fragment, indented like the placeholder, when the module is imported (MNE-Python's
``fill_doc`` idea), so that ``help(func)`` and the rendered documentation show the full text.
An unknown name raises ``KeyError`` at import.

This module imports nothing of the package (every layer may use it; ``tests/test_docs_fill.py``
checks it).
"""

from __future__ import annotations

import re
from typing import TypeVar

__all__ = ["DOCS", "fill_doc"]

_T = TypeVar("_T")

#: ``%(name)s`` alone on a docstring line (any indentation).
_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)%\((?P<name>\w+)\)s[ \t]*$", re.MULTILINE)

#: A numpydoc section header, for the fragments that open the section themselves.
_PARAMETERS = "Parameters\n----------\n"

_QKV = {
    "query": """\
query : torch.Tensor, shape = (n_target, heads, d)
    Projected queries.""",
    "key": """\
key : torch.Tensor, shape = (n_source, heads, d)
    Projected keys.""",
    "value": """\
value : torch.Tensor, shape = (n_source, heads, d_v)
    Projected values.""",
    "batch_target": """\
batch_target : torch.Tensor, shape = (n_target,), optional
    Sorted complex index of every target token; ``None`` means one complex.""",
    "batch_source": """\
batch_source : torch.Tensor, shape = (n_source,), optional
    Sorted complex index of every source token; ``None`` means one complex.""",
    "batch_pair": """\
batch_target, batch_source : torch.Tensor, shape = (n_target,) / (n_source,), optional
    Sorted complex index of every target / source token; ``None`` means one complex.""",
    "num_complexes": """\
num_complexes : int, optional
    Number of complexes ``B`` (inferred from the batch vectors otherwise; complexes beyond
    the last index are empty).""",
    "scale": """\
scale : float, optional
    Logit scale; ``1 / sqrt(d)`` by default (``1.0``: the paper's Eq. 2 without scaling).""",
    "dropout": """\
dropout_p : float, default = 0.0
    Dropout probability on the attention weights (only when ``training``).
training : bool, default = False
    Whether dropout is active.""",
    "attention_output": """\
torch.Tensor, shape = (n_target, heads, d_v)
    Attention output; zeros for targets whose complex has no source token.""",
}

# groups of the entries above, in the order the attention functions take them
_QKV["qkv"] = "\n".join(_QKV[name] for name in ("query", "key", "value"))
_QKV["batches"] = "\n".join(_QKV[name] for name in ("batch_target", "batch_source"))

_KERNEL = {
    "kernel_scale_dropout": """\
scale : float, optional
    Logit scale (``None``: :math:`1/\\sqrt{d}`).
attention_dropout : float, default = 0.0
    Dropout on the attention weights (training only).""",
}

_SCATTER = {
    "scatter_inputs": """\
src : torch.Tensor, shape = (n_items, ...)
    Values to reduce along the first dimension.
index : torch.Tensor, shape = (n_items,)
    Bucket of each row, in ``[0, dim_size)``.
dim_size : int
    Number of buckets.""",
}

_MODULES = {
    "x_target": """\
x_target : torch.Tensor, shape = (n_target, in_channels)
    Target (query) features.""",
    "x_source": """\
x_source : torch.Tensor, shape = (n_source, source_channels)
    Source (key / value) features.""",
    "per_complex": """\
batch : torch.Tensor, shape = (n,)
    Complex (graph) of every row.
num_complexes : int
    Number of complexes.""",
    "node_id": """\
node_id : torch.Tensor, shape = (n, d_p)
    Node identifiers.""",
    "complex_data_parameters": _PARAMETERS
    + """\
data : ComplexData or CellularInputs
    A complex or a batch of complexes, or its :meth:`prepare` result.""",
}

# the projections of MultiHeadAttention take one of them as their only parameter
_MODULES["x_target_parameters"] = _PARAMETERS + _MODULES["x_target"]
_MODULES["x_source_parameters"] = _PARAMETERS + _MODULES["x_source"]

_DATA = {
    "rank_parameters": _PARAMETERS
    + """\
rank : int
    Cell rank.""",
    "dataset_cfg_parameters": _PARAMETERS
    + """\
cfg : mapping
    The ``dataset`` config (keys of ``configs/dataset/graphuniverse.yaml``).""",
}

_MODELS = {
    "readout_layers": """\
readout_layers : int, default=1
    Hidden layers of the readout MLP.""",
    "readout_init": """\
readout_init : {"default", "small", "zero"}, default="small"
    Initialisation of the last linear map of the readout MLP
    (:func:`~topomodelx_attention.harness.baselines.init_last_layer`): ``"small"``, PyTorch's
    weights times 0.01 and a zero bias, so that every complex starts near the same output (a
    first loss near ``ln C`` on ``C`` classes) however many cells the sum pooling adds, while
    gradients reach every layer from the first step; ``"default"``: PyTorch's (logits that grow
    with the number of cells); ``"zero"``: zero weights and bias.""",
    "check_inputs": """\
check_inputs : bool, default=True
    Reject NaN / Inf / huge float inputs once per forward
    (:func:`~topomodelx_attention.nn.common.check_inputs`); feature rows that do not match
    the cells are rejected either way.""",
    "pooling": """\
pooling : {"sum", "mean"}, default="sum"
    Pooling of the cells of a complex (``outputs="complex"``).""",
    "outputs": """\
outputs : {"complex", "node"}, default="complex"
    One prediction per complex, or per vertex (the readout MLP on every vertex, no pooling).""",
    "norms": """\
embedding_norm : bool, default=True
    A LayerNorm per rank on the encoded inputs: the states no longer scale with the inputs.
final_norm : bool, default=True
    A LayerNorm per rank on the final states, before the pooling (and the vertex readout).""",
}

# the options every baseline takes: the keywords of harness.baselines.Baseline, which the
# baselines pass on to it (CWN and SCCNN take no pooling, but their per-rank LayerNorms)
_BASELINE_OPTIONS = ("n_layers", "dropout_rate", "readout_layers", "pooling", "check_inputs", "outputs", "readout_init")
_MODELS["n_layers"] = """\
n_layers : int or None, default=None
    Depth: layers or blocks of the baseline (``None``: its default, given in its
    description)."""
_MODELS["dropout_rate"] = """\
dropout : float, default=0.0
    Dropout probability (where it acts: the baseline's description), always inside the
    readout MLP."""
_MODELS["baseline_options"] = """\
**options
    The options every baseline takes (``PooledBaselineOptions``: the keywords of
    :class:`~topomodelx_attention.harness.baselines.Baseline`, the same defaults; another
    keyword raises ``TypeError``):
""" + "\n".join(_MODELS[name] for name in _BASELINE_OPTIONS)
_MODELS["rank_baseline_options"] = """\
**options
    The options of CWN and SCCNN (``RankBaselineOptions``): the keywords of
    :class:`~topomodelx_attention.harness.baselines.Baseline` but ``pooling`` (they sum), the
    same defaults, and their per-rank LayerNorms (another keyword raises ``TypeError``):
""" + "\n".join(_MODELS[name] for name in _BASELINE_OPTIONS if name != "pooling") + "\n" + _MODELS["norms"]

# the options TokenGT and OrderKTokenGT share (nn.graph.token_model.TOKEN_MODEL_OPTIONS)
_TOKEN_MODELS = {
    "token_model_options": """\
**options
    The options both token models take (``TokenModelOptions``, defaults
    ``TOKEN_MODEL_OPTIONS`` of :mod:`topomodelx_attention.nn.graph.token_model`), checked once
    (another keyword raises ``TypeError``):
n_layers : int, default = 4
    Encoder layers (the paper: 12).
heads : int, default = 8
    Attention heads (the paper: 32).
node_id_dim : int, default = 16
    Width :math:`d_p` of ``data.node_id`` (the paper: 16 for Laplacian eigenvectors, 64 for
    ORF; write them with ``LaplacianNodeId`` / ``OrthogonalRandomNodeId``); 0 disables node
    identifiers.
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
    Stochastic depth of the last layer, linear in depth (the paper: 0.1).
sign_flip : bool, default = True
    Random sign flip of the identifier columns per complex in training (A.3.1; meant for
    Laplacian eigenvectors, harmless for ORF).
eigenvector_dropout : float, default = 0.0
    Identifier-column dropout per complex in training (the paper: 0.2 for Laplacian ids).
bias : bool, default = True
    Biases in the attention projections.
token_layout : {"auto", "packed", "padded"}, default = "auto"
    How the encoder holds the tokens (same results, different speed; see
    :class:`~topomodelx_attention.nn.graph.tokengt_layer.TokenGTEncoder`).
pooling : {"graph_token", "sum", "mean"}, default = "graph_token"
    How ``forward`` reads the complex-level prediction: the ``[graph]`` token (the paper),
    or the sum / mean of the other tokens of each complex (every token once). A sum can
    count tokens, which the ``[graph]`` token's softmax average over them cannot.
check_inputs : bool, default = True
    Reject NaN / Inf / huge values of the features and ``node_id`` once per forward
    (:func:`~topomodelx_attention.nn.common.check_inputs`).""",
}

#: Every shared fragment, by placeholder name (dedented; continuation lines by four spaces).
DOCS: dict[str, str] = {
    **_QKV, **_KERNEL, **_SCATTER, **_MODULES, **_DATA, **_MODELS, **_TOKEN_MODELS
}


def _indent(text: str, indent: str) -> str:
    return "\n".join(indent + line if line else line for line in text.splitlines())


def fill_doc(obj: _T) -> _T:
    """Replace every ``%(name)s`` line of ``obj.__doc__`` by the fragment ``DOCS[name]``.

    Parameters
    ----------
    obj : function or class
        What to document; its ``__doc__`` is rewritten in place (nothing happens without a
        docstring, e.g. under ``python -OO``).

    Returns
    -------
    function or class
        ``obj`` itself (for use as a decorator).

    Raises
    ------
    KeyError
        When a placeholder names no entry of :data:`DOCS` (at import of the module using it).
    """
    doc = obj.__doc__
    if not doc:
        return obj

    def fragment(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in DOCS:
            raise KeyError(
                f"{getattr(obj, '__qualname__', obj)!s}: docstring placeholder %({name})s is "
                f"not in topomodelx_attention._docs.DOCS; add it there or fix the name "
                f"(known: {', '.join(sorted(DOCS))})"
            )
        return _indent(DOCS[name], match.group("indent"))

    obj.__doc__ = _PLACEHOLDER.sub(fragment, doc)
    return obj
