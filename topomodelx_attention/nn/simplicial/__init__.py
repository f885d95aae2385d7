"""N-simplicial attention (Dussolle & Liò, "How Smoothing is N-simplicial Attention?").

Functional core (§2.2): :func:`n_simplicial_attention` — exact, chunked with a streaming softmax,
with causal / window / routed / explicit-tuple / dense masks, key-value bias (Appendix F.1) and
determinant logits (§2.4). Modules: :class:`NSimplicialAttention` (multi-head),
:class:`NSimplicialTransformerLayer` (pre-norm block), :class:`NSimplicialTransformer` (stack +
readout, for sequences and complexes), :class:`SimplicialRouter` (top-K router, §2.3; the previous
layer's queries and keys travel as a :class:`RouterContext`; token-level gating is the layer
option ``gating="token"``). Sparse tuple lists run on the shared attention core; under
``torch.compile`` prepare them once outside the compiled region (:func:`prepare_tuples`, or the
modules' ``prepare_tuples``) and pass the :class:`TupleIndex`; a compiled
:class:`NSimplicialTransformer` called on a raw ``ComplexData`` batch prepares them itself, eagerly,
at one graph break.
Over-smoothing diagnostics (§3.2) in :mod:`~topomodelx_attention.nn.simplicial.diagnostics`.
"""

from topomodelx_attention.nn._export import refuse_torchscript, register_prepared_inputs
from topomodelx_attention.nn.simplicial.diagnostics import (
    build_stack,
    mixed_norm,
    oversmoothing_profile,
    residual_norm,
    token_residual,
)
from topomodelx_attention.nn.simplicial.functional import n_simplicial_attention, prepare_tuples
from topomodelx_attention.nn.simplicial.masks import (
    NULL_KEY,
    CausalMask,
    KeySelection,
    TupleIndex,
    TupleMask,
    WindowMask,
    complex_data_to_tuples,
    dense_mask_from_tuples,
    face_sets_to_tuples,
    simplices_to_tuples,
    tuples_batch,
    window_selection,
)
from topomodelx_attention.nn.simplicial.n_simplicial_attention import (
    SIMPLICIAL_OPTIONS,
    NSimplicialAttention,
    resolve_tuples,
)
from topomodelx_attention.nn.simplicial.n_simplicial_transformer import NSimplicialTransformer
from topomodelx_attention.nn.simplicial.n_simplicial_transformer_layer import (
    NSimplicialTransformerLayer,
)
from topomodelx_attention.nn.simplicial.rope import (
    determinant_expand,
    determinant_logits,
    simplicial_rope,
)
from topomodelx_attention.nn.simplicial.router import (
    RouterContext,
    SimplicialRouter,
    topk_selection,
)

# torch.export.export(model, (x, model.prepare_tuples(data), batch), {"num_complexes": n})
register_prepared_inputs(TupleIndex)
refuse_torchscript(NSimplicialAttention, NSimplicialTransformer, NSimplicialTransformerLayer, SimplicialRouter)

__all__ = [
    "NULL_KEY",
    "SIMPLICIAL_OPTIONS",
    "CausalMask",
    "KeySelection",
    "NSimplicialAttention",
    "NSimplicialTransformer",
    "NSimplicialTransformerLayer",
    "RouterContext",
    "SimplicialRouter",
    "TupleIndex",
    "TupleMask",
    "WindowMask",
    "build_stack",
    "complex_data_to_tuples",
    "dense_mask_from_tuples",
    "determinant_expand",
    "determinant_logits",
    "face_sets_to_tuples",
    "mixed_norm",
    "n_simplicial_attention",
    "oversmoothing_profile",
    "prepare_tuples",
    "residual_norm",
    "resolve_tuples",
    "simplices_to_tuples",
    "simplicial_rope",
    "token_residual",
    "topk_selection",
    "tuples_batch",
    "window_selection",
]
