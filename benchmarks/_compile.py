"""Compiled-vs-eager timing shared by the ``--compile`` tables of the model benchmarks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch._dynamo
import torch._dynamo.testing
import torch.fx.experimental._config as fx_config
from _measure import print_table, time_cases


def compile_rows(
    model: torch.nn.Module,
    batches: Sequence[object],
    label: str,
    repeats: int,
    backend: str = "inductor",
) -> list[list[str]]:
    """Rows ``[model, batch, eager ms, compiled ms, ratio, graphs]`` of forward + backward.

    The model is compiled once (``dynamic=True``, duck sizing off) and called on
    ``model.prepare(batch)`` for every batch: the eager side runs ``model(batch)`` (prepare
    included), the compiled side ``compiled(model.prepare(batch))`` (prepare included too, run
    eagerly). ``graphs`` counts the compilations after each batch (1 = no recompilation).
    """
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    compiled = torch.compile(model, backend=counter, dynamic=True)
    rows = []
    with fx_config.patch(use_duck_shape=False):
        for batch in batches:
            cases: dict[str, Callable[[], torch.Tensor]] = {
                "eager": lambda b=batch: model(b),
                "compiled": lambda b=batch: compiled(model.prepare(b)),
            }
            best = time_cases(cases, torch.device("cpu"), repeats=repeats, warmup=1)
            rows.append(
                [
                    label,
                    str(int(batch.num_graphs)),
                    f"{best['eager'] * 1e3:.1f}",
                    f"{best['compiled'] * 1e3:.1f}",
                    f"{best['compiled'] / best['eager']:.2f}x",
                    str(counter.frame_count),
                ]
            )
    torch._dynamo.reset()
    return rows


COMPILE_HEADER = ["model", "complexes", "eager ms", "compiled ms", "compiled/eager", "graphs"]


def print_compile_table(model_name: str, args, rows: list[list[str]]) -> None:
    """Print the ``--compile`` table of ``model_name`` (``args.compile_channels`` wide,
    ``args.compile_layers`` layers) from :func:`compile_rows` rows."""
    print_table(
        f"{model_name} compiled (inductor, dynamic=True) vs eager, forward+backward, width "
        f"{args.compile_channels}, {args.compile_layers} layers",
        COMPILE_HEADER,
        rows,
    )
