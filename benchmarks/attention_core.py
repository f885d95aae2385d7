"""Benchmark of the shared attention core (sparse / dense / linear) against PyTorch attention.

Measures forward + backward wall time (median of repeats, after warm-up) and the memory saved
for backward (bytes of the distinct tensors the autograd graph keeps, measured with
``torch.autograd.graph.saved_tensors_hooks``; on CUDA the peak allocated memory is reported
instead). Prints Markdown tables with ratios against the baseline
``torch.nn.MultiheadAttention`` on a padded ``(B, L_max, d)`` batch with a key-padding mask
(the input is given already padded to the baseline, which favours it).

Tables
------
1. A batch of 128 small molecules (20-40 tokens each, chain + ring closures, average degree
   about 2.3): all three kinds of :class:`MultiHeadAttention` vs the padded baseline.
2. Sparse attention vs the number of tokens (one big complex, fixed average degree).
3. One complex of ``n`` tokens: sparse / dense / linear vs the baseline (dense kinds only up to
   the size where the quadratic cost stays reasonable).
4. With ``--sparse-backward``: ``sparse_attention`` alone (ms forward, ms forward + backward,
   bytes saved for backward) of this checkout against the ``nn`` of a base revision
   (``--sparse-base``, a ``git archive`` imported beside this checkout), timed round-robin in
   the same run with the process-time clock: the shape of one joined Cellular Transformer call
   on lifted MUTAG (about 7,300 edges, 4 heads × 8 dims), the molecule batch and a larger graph.
5. With ``--compile``: the molecule batch of table 1 per kind, eager vs
   ``torch.compile(dynamic=True)`` (layout / neighbourhood index precomputed outside), with the
   graph breaks counted by ``torch._dynamo.explain`` for the plain call (batch vectors, sparse
   COO neighbourhood) and for the precomputed call, and the number of compilations over three
   batch sizes.
6. With ``--cardinality``: the sparse kernel's cardinality sum (``neighborhood_sum``) as a
   gather + scatter against one CSR product on the plan's pattern, forward + backward.
7. With ``--dropout``: the attention-dropout factors, built in place by ``dropout_factors``
   against the out-of-place ``(U >= p).to(dtype) / (1 - p)``.
8. With ``--groups``: dense attention with dropout (training), forward + backward, on the
   layouts' size groups (``size_groups``: each group padded to its own largest complex)
   against one grid padded to the batch's largest complex; self- and
   cross-attention.

Usage::

    python benchmarks/attention_core.py            # full run (about 2 minutes on 2 CPU cores)
    python benchmarks/attention_core.py --quick    # seconds
    python benchmarks/attention_core.py --quick --compile   # + compiled-vs-eager table
    OMP_NUM_THREADS=1 python benchmarks/attention_core.py --quick --sparse-backward --threads 1
    OMP_NUM_THREADS=1 python benchmarks/attention_core.py --cardinality --threads 1
    OMP_NUM_THREADS=1 python benchmarks/attention_core.py --dropout --threads 1
    OMP_NUM_THREADS=1 python benchmarks/attention_core.py --groups --threads 1
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # time this checkout's package, not another installed copy

import torch  # noqa: E402
from _measure import (  # noqa: E402
    interleaved_min,
    measure_once,
    memory_fwd_bwd,
    padded,
    print_table,
    time_cases,
)
from torch import Tensor, nn  # noqa: E402

from topomodelx_attention.nn.attention import (  # noqa: E402
    MultiHeadAttention,
    dense_attention,
    padded_layout,
    prepare_neighborhood,
    size_groups,
    sparse_attention,
    sparse_plan,
)
from topomodelx_attention.nn.attention.dropout import dropout_factors  # noqa: E402
from topomodelx_attention.nn.attention.sparse import neighborhood_sum  # noqa: E402

#: revision before the fused CPU kernel of ``sparse_attention`` (the default "before")
SPARSE_BASE = "268424d"


# ----------------------------------------------------------------------------------------------
# synthetic data
# ----------------------------------------------------------------------------------------------
def molecule_batch(
    num_complexes: int, low: int, high: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Batch vector and symmetric adjacency (2, nnz) of chain + ring-closure graphs."""
    sizes = torch.randint(low, high + 1, (num_complexes,), generator=generator)
    batch = torch.repeat_interleave(torch.arange(num_complexes), sizes)
    ptr = torch.cumsum(sizes, 0) - sizes
    rows, cols = [], []
    for g in range(num_complexes):
        n, off = int(sizes[g]), int(ptr[g])
        chain = torch.arange(n - 1)
        src = [chain, torch.randint(0, n - 6, (max(1, n // 8),), generator=generator)]
        dst = [chain + 1, src[1] + 5]  # ring closures of six atoms
        s, d = torch.cat(src) + off, torch.cat(dst) + off
        rows += [s, d]
        cols += [d, s]
    index = torch.stack([torch.cat(rows), torch.cat(cols)])
    return batch, index


def random_graph(n: int, degree: int, generator: torch.Generator) -> Tensor:
    """(2, nnz) index of a random graph with ``degree`` out-neighbours per node (+ self loop)."""
    src = torch.arange(n).repeat_interleave(degree)
    dst = torch.randint(0, n, (n * degree,), generator=generator)
    return torch.stack([torch.cat([src, torch.arange(n)]), torch.cat([dst, torch.arange(n)])])


def to_sparse(
    index: Tensor, n_t: int, n_s: int, dtype: torch.dtype, device: torch.device
) -> Tensor:
    values = torch.ones(index.shape[1], dtype=dtype)
    return torch.sparse_coo_tensor(index, values, (n_t, n_s)).coalesce().to(device)


def molecules_table(args: argparse.Namespace, device: torch.device) -> None:
    gen = torch.Generator().manual_seed(0)
    batch, index = molecule_batch(128, 20, 40, gen)
    n, channels, heads = batch.numel(), args.channels, args.heads
    x = torch.randn(n, channels, generator=gen).to(device)
    batch = batch.to(device)
    adjacency = to_sparse(index, n, n, x.dtype, device)
    x_pad, pad = padded(x, batch, 128)
    baseline = nn.MultiheadAttention(channels, heads, bias=False, batch_first=True).to(device)

    def run_baseline() -> Tensor:
        xr = x_pad.detach().requires_grad_()
        return baseline(xr, xr, xr, key_padding_mask=pad, need_weights=False)[0]

    cases: list[tuple[str, Callable[[], Tensor]]] = [
        ("nn.MultiheadAttention (padded)", run_baseline)
    ]
    for kind, with_n in (("sparse", True), ("dense", False), ("dense", True), ("linear", False)):
        module = MultiHeadAttention(channels, heads=heads, kind=kind).to(device)

        def run(module: MultiHeadAttention = module, with_n: bool = with_n) -> Tensor:
            xr = x.detach().requires_grad_()
            return module(xr, None, adjacency if with_n else None, batch, batch, num_complexes=128)

        label = f"ours {kind}" + (" + θ·N bias" if kind == "dense" and with_n else "")
        cases.append((label, run))
    times = time_cases(dict(cases), device, args.repeats, args.warmup)
    rows, base_t, base_m = [], None, None
    for label, fn in cases:
        t = times[label]
        mem = memory_fwd_bwd(fn, device)
        if base_t is None:
            base_t, base_m = t, mem
        rows.append(
            [label, f"{t * 1e3:.2f}", f"{t / base_t:.2f}x", f"{mem:.1f}", f"{mem / base_m:.2f}x"]
        )
    print_table(
        f"128 molecules ({n} tokens, {index.shape[1]} adjacency nnz, d={channels}, "
        f"heads={heads}), forward+backward",
        ["variant", "time (ms)", "time ratio", "memory (MiB)", "memory ratio"],
        rows,
    )


def sparse_scaling_table(args: argparse.Namespace, device: torch.device) -> None:
    gen = torch.Generator().manual_seed(1)
    channels, heads, degree = args.scaling_channels, args.scaling_heads, args.degree
    module = MultiHeadAttention(channels, heads=heads, kind="sparse").to(device)
    rows, previous = [], None
    for n in args.sparse_sizes:
        index = random_graph(n, degree, gen)
        neighborhood = to_sparse(index, n, n, torch.float32, device)
        x = torch.randn(n, channels, generator=gen).to(device)

        def run(x: Tensor = x, neighborhood: Tensor = neighborhood) -> Tensor:
            return module(x.detach().requires_grad_(), None, neighborhood)

        if n <= 10**5:
            repeats = args.repeats if n <= 10**4 else 2
            t = time_cases({"sparse": run}, device, repeats, 1)["sparse"]
            mem = memory_fwd_bwd(run, device)
        else:  # a single (cold) run measures both
            t, mem = measure_once(run, device)
        nnz = neighborhood._nnz()
        growth = "—" if previous is None else f"{t / previous[0]:.1f}x / {nnz / previous[1]:.1f}x"
        previous = (t, nnz)
        rows.append(
            [f"{n:,}", f"{nnz:,}", f"{t * 1e3:.1f}", f"{t / nnz * 1e9:.0f}", growth, f"{mem:.1f}"]
        )
        del neighborhood, x
    print_table(
        f"Sparse kind vs number of tokens (one complex, {degree} random neighbours + self loop, "
        f"d={channels}, heads={heads}), forward+backward",
        [
            "tokens",
            "nnz",
            "time (ms)",
            "ns / nnz",
            "time / nnz growth vs previous row",
            "memory (MiB)",
        ],
        rows,
    )


def single_complex_table(args: argparse.Namespace, device: torch.device) -> None:
    gen = torch.Generator().manual_seed(2)
    channels, heads, degree = args.scaling_channels, args.scaling_heads, args.degree
    modules = {
        kind: MultiHeadAttention(channels, heads=heads, kind=kind).to(device)
        for kind in ("sparse", "dense", "linear")
    }
    baseline = nn.MultiheadAttention(channels, heads, bias=False, batch_first=True).to(device)
    rows = []
    for n in args.single_sizes:
        index = random_graph(n, degree, gen)
        neighborhood = to_sparse(index, n, n, torch.float32, device)
        x = torch.randn(n, channels, generator=gen).to(device)
        repeats = args.repeats if n <= 10**4 else 2
        warmup = 1 if n <= 10**4 else 0
        results: dict[str, tuple[float, float] | None] = {}

        def base(x: Tensor = x) -> Tensor:
            xr = x.detach().requires_grad_().unsqueeze(0)
            return baseline(xr, xr, xr, need_weights=False)[0]

        fns: dict[str, Callable[[], Tensor]] = {"baseline": base}
        for kind, module in modules.items():

            def run(
                module: MultiHeadAttention = module,
                x: Tensor = x,
                neighborhood: Tensor = neighborhood,
            ) -> Tensor:
                nb = neighborhood if module.kind == "sparse" else None
                return module(x.detach().requires_grad_(), None, nb)

            fns[kind] = run
        for name in ("baseline", "dense"):
            if n > args.max_dense:
                results[name] = None
                del fns[name]
        times = time_cases(fns, device, repeats, warmup)
        for name, fn in fns.items():
            results[name] = (times[name], memory_fwd_bwd(fn, device))
        ref = results["baseline"]
        row = [f"{n:,}"]
        for name in ("baseline", "sparse", "dense", "linear"):
            res = results[name]
            if res is None:
                row.append("—")
            elif ref is None or name == "baseline":
                row.append(f"{res[0] * 1e3:.1f} ms / {res[1]:.0f} MiB")
            else:
                row.append(
                    f"{res[0] * 1e3:.1f} ms / {res[1]:.0f} MiB "
                    f"({res[0] / ref[0]:.2f}x / {res[1] / max(ref[1], 1e-9):.2f}x)"
                )
        rows.append(row)
    print_table(
        f"One complex of n tokens (d={channels}, heads={heads}; sparse: {degree} random "
        "neighbours + self loop; linear: default random features), forward+backward; "
        "ratios vs nn.MultiheadAttention",
        ["tokens", "nn.MultiheadAttention", "ours sparse", "ours dense", "ours linear"],
        rows,
    )


def compile_table(args: argparse.Namespace, device: torch.device) -> None:
    """Eager vs ``torch.compile(dynamic=True)`` on molecule batches, graph breaks per call."""
    import torch._dynamo
    import torch._dynamo.testing

    gen = torch.Generator().manual_seed(3)
    channels, heads = args.channels, args.heads
    batches = []
    for num_complexes in args.compile_batches:
        batch, index = molecule_batch(num_complexes, 20, 40, gen)
        n = batch.numel()
        x = torch.randn(n, channels, generator=gen).to(device)
        adjacency = to_sparse(index, n, n, x.dtype, device)
        batch = batch.to(device)
        batches.append(
            (
                x,
                batch,
                adjacency,
                num_complexes,
                padded_layout(batch, num_complexes),
                prepare_neighborhood(adjacency, n, n, device=device),
            )
        )
    rows = []
    for kind in ("sparse", "dense", "linear"):
        module = MultiHeadAttention(channels, heads=heads, kind=kind).to(device)
        with_n = kind == "sparse"

        def plain(x, batch, adjacency, num_complexes, module=module, with_n=with_n):
            return module(x, None, adjacency if with_n else None, batch, batch, num_complexes)

        def prepared(x, layout, index, module=module, with_n=with_n):
            return module(x, None, index if with_n else None, layout=layout)

        x, batch, adjacency, num_complexes, layout, index = batches[0]
        breaks_plain = torch._dynamo.explain(plain)(x, batch, adjacency, num_complexes)
        breaks_prepared = torch._dynamo.explain(prepared)(x, layout, index)
        torch._dynamo.reset()
        counter = torch._dynamo.testing.CompileCounterWithBackend(args.compile_backend)
        compiled = torch.compile(prepared, backend=counter, dynamic=True)
        for x, _, _, _, layout, index in batches:  # warm-up: compile, then reuse
            compiled(x.detach().requires_grad_(), layout, index).sum().backward()
        x, batch, adjacency, num_complexes, layout, index = batches[0]
        cases = {
            "eager": lambda: plain(x.detach().requires_grad_(), batch, adjacency, num_complexes),
            "eager, precomputed": lambda: prepared(x.detach().requires_grad_(), layout, index),
            "compiled": lambda: compiled(x.detach().requires_grad_(), layout, index),
        }
        times = time_cases(cases, device, args.repeats, args.warmup)
        base = times["eager"]
        rows.append(
            [
                kind,
                str(breaks_plain.graph_break_count),
                str(breaks_prepared.graph_break_count),
                str(counter.frame_count),
                f"{base * 1e3:.2f}",
                f"{times['eager, precomputed'] * 1e3:.2f}",
                f"{times['compiled'] * 1e3:.2f} ({times['compiled'] / base:.2f}x)",
            ]
        )
        torch._dynamo.reset()
    sizes = ", ".join(str(b[0].shape[0]) for b in batches)
    print_table(
        f"torch.compile(dynamic=True, backend={args.compile_backend!r}) vs eager, molecule batches "
        f"of {args.compile_batches} graphs ({sizes} tokens; timed on the first), d={channels}, "
        f"heads={heads}, forward+backward",
        [
            "kind",
            "graph breaks (batch vectors, sparse COO)",
            "graph breaks (layout / NeighborhoodIndex)",
            "compilations (3 batch sizes)",
            "eager (ms)",
            "eager, precomputed (ms)",
            "compiled (ms, ratio vs eager)",
        ],
        rows,
    )


def load_base_sparse(revision: str) -> Callable[..., Tensor]:
    """``sparse_attention`` of the package's ``nn`` at a git revision.

    ``git archive`` of the revision's package into a temporary folder; its ``nn`` (the sparse
    kernel and everything it imports from the core: ``scatter``, ``sparse_op``, ``layout``)
    is imported in place of this checkout's and taken out of ``sys.modules`` again, this
    checkout's ``nn`` modules put back, so a change anywhere in the core shows on the base row.
    """
    import topomodelx_attention as package

    folder = Path(tempfile.mkdtemp(prefix="sparse_base_"))
    archive = subprocess.run(
        ["git", "archive", revision, "topomodelx_attention"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    directory = (folder / "topomodelx_attention").resolve()

    def nn_modules() -> dict[str, types.ModuleType]:
        return {n: m for n, m in sys.modules.items() if n == "topomodelx_attention.nn" or n.startswith("topomodelx_attention.nn.")}

    ours = nn_modules()
    for name in ours:
        del sys.modules[name]
    path, nn_module = package.__path__, getattr(package, "nn", None)
    package.__path__ = [str(directory)]
    try:
        module = importlib.import_module("topomodelx_attention.nn.attention.sparse")
        if not Path(module.__file__).resolve().is_relative_to(directory):
            raise RuntimeError(f"--sparse-base {revision}: its sparse.py was not imported")
    finally:
        package.__path__ = path
        for name in nn_modules():  # the base's
            del sys.modules[name]
        sys.modules.update(ours)
        if nn_module is not None:
            package.nn = nn_module
    return module.sparse_attention


def sparse_backward_table(args: argparse.Namespace, device: torch.device) -> None:
    """Table 4: ``sparse_attention`` forward / forward + backward, this checkout vs a base."""
    gen = torch.Generator().manual_seed(0)
    base = load_base_sparse(args.sparse_base)
    implementations = {f"base ({args.sparse_base})": base, "this checkout": sparse_attention}
    shapes = []
    # one joined CT call on lifted MUTAG (batch 32): ~1,800 cells, ~7,300 edges, 4 heads x 8
    index = random_graph(1800, 3, gen)
    shapes.append(("CT joined call", 1800, index[:, :7300], 4, 8))
    _, index = molecule_batch(128, 20, 40, gen)
    shapes.append(("128 molecules", int(index.max()) + 1, index, 8, 8))
    if not args.quick:
        shapes.append(("random graph", 20000, random_graph(20000, 8, gen), 4, 8))
    rows = []
    for label, n, index, heads, width in shapes:
        order = torch.argsort(index[0], stable=True)  # edges sorted by target (as CT passes them)
        pair = (index[0, order].to(device), index[1, order].to(device))
        q, k, v = (torch.randn(n, heads, width, generator=gen).to(device) for _ in range(3))
        grad = torch.randn(n, heads, width, generator=gen).to(device)
        inputs = [t.requires_grad_() for t in (q, k, v)]
        calls: dict[str, Callable[[], None]] = {}
        for name, fn in implementations.items():

            def forward(fn: Callable[..., Tensor] = fn) -> None:
                with torch.no_grad():
                    fn(q, k, v, pair)

            def forward_backward(fn: Callable[..., Tensor] = fn) -> None:
                torch.autograd.backward(fn(*inputs, pair), grad)

            calls[f"{name} fwd"] = forward
            calls[f"{name} fwd+bwd"] = forward_backward
        times = time_round_robin(calls, device, args.repeats, args.warmup, args.calls)
        base_fb = None
        for name, fn in implementations.items():
            fb = times[f"{name} fwd+bwd"]
            base_fb = fb if base_fb is None else base_fb
            memory = memory_fwd_bwd(lambda fn=fn: fn(*inputs, pair), device)
            rows.append(
                [
                    f"{label} ({index.shape[1]} edges, {heads}x{width})",
                    name,
                    f"{times[f'{name} fwd'] * 1e3:.3f}",
                    f"{fb * 1e3:.3f}",
                    f"{fb / base_fb:.2f}x",
                    f"{memory:.2f}",
                ]
            )
    print_table(
        f"sparse_attention alone: this checkout vs {args.sparse_base} (process time, min over "
        f"{args.repeats} round-robin rounds of {args.calls} calls)",
        ["shape", "implementation", "ms fwd", "ms fwd+bwd", "fwd+bwd ratio", "saved (MiB)"],
        rows,
    )


def cardinality_table(args: argparse.Namespace, device: torch.device) -> None:
    """Table 6: the cardinality sum ``Σ_{s∈N(t)} v_s``, gather + scatter vs one CSR product.

    ``neighborhood_sum`` without a plan (the baseline: gather the ``(nnz, heads, d_v)`` source
    rows, ``index_add_`` them into the targets; backward the same, transposed) against
    ``neighborhood_sum(..., plan=)`` (one CSR × dense product on the plan's pattern with unit
    values, the transposed pattern for the gradient), forward + backward, same inputs.
    """
    gen = torch.Generator().manual_seed(0)
    shapes = [("CT joined call, MUTAG batch", 1800, random_graph(1800, 3, gen)[:, :7300], 4, 8)]
    # a GraphUniverse h_lo_d_hi batch of the grid: ~23k cells, ~0.45M joined edges, 4 heads x 16
    n_big = 23000 if not args.quick else 5000
    shapes.append(("GraphUniverse-sized batch", n_big, random_graph(n_big, 20, gen), 4, 16))
    rows = []
    for label, n, index, heads, width in shapes:
        order = torch.argsort(index[0], stable=True)
        pair = (index[0, order].to(device), index[1, order].to(device))
        plan = sparse_plan(pair, heads, n_target=n, n_source=n) if device.type == "cpu" else None
        value = torch.randn(n, heads, width, generator=gen).to(device).requires_grad_()
        grad = torch.randn(n, heads, width, generator=gen).to(device)
        cases = {"gather + scatter": None, "CSR product (plan)": plan}
        calls = {
            name: (lambda p=p: torch.autograd.backward(neighborhood_sum(value, pair, n, plan=p), grad))
            for name, p in cases.items()
        }
        times = time_round_robin(calls, device, args.repeats, args.warmup, args.calls)
        base = times["gather + scatter"]
        for name in cases:
            rows.append(
                [
                    f"{label} ({index.shape[1]} edges, {heads}x{width})",
                    name,
                    f"{times[name] * 1e3:.3f}",
                    f"{times[name] / base:.2f}x",
                ]
            )
    print_table(
        "cardinality sum, forward + backward (process time, min over round-robin rounds)",
        ["shape", "implementation", "ms fwd+bwd", "vs gather + scatter"],
        rows,
    )


def dropout_table(args: argparse.Namespace, device: torch.device) -> None:
    """Table 7: attention-dropout factors, ``dropout_factors`` vs the out-of-place formula.

    The baseline draws the uniforms and builds ``(U >= p).to(dtype) / (1 - p)`` out of place (a
    bool mask and a second float tensor); ``dropout_factors`` turns the uniforms into the
    factors in place. Same values (same generator state), timed round-robin.
    """
    p = 0.1
    shapes = [("dense CT batch, 32 x 4 x 60 x 60", (32, 4, 60, 60))]
    shapes.append(("GraphUniverse global arrow, 16 x 4 x 300 x 300", (16, 4, 300, 300)))
    rows = []
    for label, shape in shapes:

        def out_of_place(shape: tuple = shape) -> None:
            uniform = torch.rand(shape, device=device)
            (uniform >= p).to(uniform.dtype) * (1.0 / (1.0 - p))

        def in_place(shape: tuple = shape) -> None:
            dropout_factors(shape, p, dtype=torch.float32, device=device)

        calls = {"out of place": out_of_place, "dropout_factors": in_place}
        times = time_round_robin(calls, device, args.repeats, args.warmup, args.calls)
        for name in calls:
            ratio = times[name] / times["out of place"]
            rows.append([label, name, f"{times[name] * 1e3:.3f}", f"{ratio:.2f}x"])
    print_table(
        f"attention-dropout factors, p = {p} (process time, min over round-robin rounds)",
        ["shape", "implementation", "ms", "vs out of place"],
        rows,
    )


def groups_table(args: argparse.Namespace, device: torch.device) -> None:
    """Table 8: dense dropout attention by size groups against one padded grid (fwd + bwd).

    Baseline: one padded grid, written here from public pieces (``PaddedLayout.pad`` /
    ``unpad``, ``softmax_dropout``): scores, softmax and dropout factors of shape
    ``(B, heads, Lt_max, Ls_max)``. Grouped: ``dense_attention`` as the
    models call it (``layout=``, training, ``dropout_p=0.1``), which attends on
    ``size_groups(target, source)``. Heads 4 × 16 dims; the complex sizes are drawn uniformly
    (in the cross case a complex's source count grows with its target count, as edges with
    nodes).
    """
    from topomodelx_attention.nn.attention import softmax_dropout

    heads, dim, p = 4, 16, 0.1
    gen = torch.Generator().manual_seed(1)
    cases = [  # label, complexes, target sizes, source sizes (None: self-attention)
        ("MUTAG-like, 32 complexes of 10-28 cells", 32, (10, 28), None),
        ("GraphUniverse, 16 graphs of 50-300 nodes", 16, (50, 300), None),
        ("TokenGT tokens, 16 graphs of 150-800 tokens", 16, (150, 800), None),
        ("cross: 16 graphs, 50-300 nodes <- 150-900 edges", 16, (50, 300), (150, 900)),
    ]
    rows = []
    for label, num, target_range, source_range in cases:
        sizes_t = torch.randint(target_range[0], target_range[1] + 1, (num,), generator=gen)
        sizes_s = sizes_t
        if source_range is not None:  # sources of every complex scale with its targets
            sizes_s = (sizes_t - target_range[0]) * (source_range[1] - source_range[0])
            sizes_s = sizes_s // (target_range[1] - target_range[0]) + source_range[0]
        target = padded_layout(torch.repeat_interleave(torch.arange(num), sizes_t).to(device), num)
        source = target
        if source_range is not None:
            source = padded_layout(torch.repeat_interleave(torch.arange(num), sizes_s).to(device), num)
        q = torch.randn(target.num_tokens, heads, dim, device=device, requires_grad=True)
        k, v = (
            torch.randn(source.num_tokens, heads, dim, device=device, requires_grad=True)
            for _ in range(2)
        )
        layout = target if source is target else (target, source)
        scale = dim**-0.5

        def padded(target=target, source=source, q=q, k=k, v=v) -> None:
            # (n, heads, d) -> (B, heads, L, d): every complex padded to the batch's largest
            qp, kp, vp = target.pad(q).transpose(1, 2), source.pad(k).transpose(1, 2), source.pad(v).transpose(1, 2)
            scores = torch.matmul(qp * scale, kp.transpose(-2, -1))
            if source.key_mask is not None:
                scores = scores.masked_fill(~source.key_mask, float("-inf"))
            out = torch.matmul(softmax_dropout(scores, p), vp)
            target.unpad(out.transpose(1, 2)).sum().backward()

        def grouped(layout=layout, q=q, k=k, v=v) -> None:
            out = dense_attention(q, k, v, layout=layout, dropout_p=p, training=True)
            out.sum().backward()

        calls = {"one padded grid": padded, "size groups": grouped}
        times = time_round_robin(calls, device, args.repeats, args.warmup, max(1, args.calls // 5))
        need = int((sizes_t.double() * sizes_s.double()).sum())
        grid = num * int(sizes_t.max()) * int(sizes_s.max())
        groups = size_groups(target, source)
        entries = sum(g.complexes.numel() * g.length * g.source_length for g in groups)
        for name in calls:
            ratio = times[name] / times["one padded grid"]
            held = grid if name == "one padded grid" else entries
            count = 1 if name == "one padded grid" else len(groups)
            rows.append(
                [label, name, str(count), f"{held / need:.2f}", f"{times[name] * 1e3:.2f}", f"{ratio:.2f}x"]
            )
    print_table(
        f"dense attention with dropout {p}, forward + backward, {heads} heads x {dim} "
        "(process time, min over round-robin rounds)",
        ["batch", "kernel", "grids", "score entries / sum n_t n_s", "ms", "vs one grid"],
        rows,
    )


def time_round_robin(
    calls: dict[str, Callable[[], None]],
    device: torch.device,
    repeats: int,
    warmup: int,
    per_round: int,
) -> dict[str, float]:
    """Seconds per call: minimum over round-robin rounds of the mean of ``per_round`` calls.

    Process time on CPU (less sensitive to other jobs on a shared machine), wall time on CUDA.
    """
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    sync = device if device.type == "cuda" else None
    return interleaved_min(calls, repeats, warmup, clock, per_round=per_round, device=sync)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--scaling-channels", type=int, default=32)
    parser.add_argument("--scaling-heads", type=int, default=4)
    parser.add_argument("--degree", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--compile", action="store_true", help="add the torch.compile table")
    parser.add_argument("--compile-only", action="store_true", help="only the compile table")
    parser.add_argument("--compile-backend", default="inductor")
    parser.add_argument(
        "--sparse-backward",
        action="store_true",
        help="only the sparse_attention before/after table",
    )
    parser.add_argument("--sparse-base", default=SPARSE_BASE, help="git revision of the 'before'")
    parser.add_argument(
        "--cardinality", action="store_true", help="only the cardinality-sum table"
    )
    parser.add_argument("--dropout", action="store_true", help="only the dropout-factors table")
    parser.add_argument("--groups", action="store_true", help="only the size-groups table")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.repeats, args.warmup = 3, 1
        args.sparse_sizes = [10**2, 10**3, 10**4]
        args.single_sizes = [10**2, 10**3]
        args.max_dense = 10**3
        args.compile_batches = [16, 24, 32]
        args.calls = 5
    else:
        args.repeats, args.warmup = 10, 3
        args.sparse_sizes = [10**2, 10**3, 10**4, 10**5, 10**6]
        args.single_sizes = [10**2, 10**3, 4 * 10**3, 10**4, 10**5]
        args.max_dense = 4 * 10**3
        args.compile_batches = [128, 96, 160]
        args.calls = 20
    device = torch.device(args.device)
    torch.manual_seed(0)
    print(
        f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
        f"memory = {'peak allocated' if device.type == 'cuda' else 'saved for backward'}"
    )
    if args.cardinality:
        cardinality_table(args, device)
        return
    if args.groups:
        groups_table(args, device)
        return
    if args.dropout:
        dropout_table(args, device)
        return
    if args.sparse_backward:
        if args.quick:
            args.repeats = 7
        sparse_backward_table(args, device)
        return
    if not args.compile_only:
        molecules_table(args, device)
        sparse_scaling_table(args, device)
        single_complex_table(args, device)
    if args.compile or args.compile_only:
        compile_table(args, device)


if __name__ == "__main__":
    main()
