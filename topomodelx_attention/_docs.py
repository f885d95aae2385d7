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
}

#: Every shared fragment, by placeholder name (dedented; continuation lines by four spaces).
DOCS: dict[str, str] = {**_QKV, **_KERNEL, **_SCATTER, **_MODULES, **_DATA, **_MODELS}


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
