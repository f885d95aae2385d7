"""Benchmark of 2-simplicial attention: full (exact, chunked), windowed, routed, complex tuples.

Baseline: the naive einsum implementation that materialises the ``n^3`` logits (``naive``),
run only while it fits in memory.

Measurements (forward + backward of ``out.square().sum()``)
-----------------------------------------------------------
* time: minimum wall time over ``--repeats`` rounds after one warm-up call.
* peak memory: ``torch.profiler.profile(profile_memory=True)`` records every CPU allocator
  event (``[memory]`` events with signed byte counts); the running sum of the events sorted by
  time is the live tensor memory allocated during the call, its maximum is the peak. Inputs that
  exist before the call (q, k, v, parameters) are not counted. On CUDA
  ``torch.cuda.max_memory_allocated`` minus the memory before the call is used instead.

Tables
------
1. Time and peak memory vs ``n`` for every path, with the ratio to the naive baseline.
2. Windowed path: peak memory vs ``n`` and windows ``(w1, w2)``; ``peak / (n · w1 · w2)`` stays
   constant, i.e. memory grows as ``n · w1 · w2`` and never as ``n^3``.
3. Full path: peak memory vs the chunk sizes ``(c_q, c_k)`` (memory ``O(c_q · c_k · n)``).
4. Routers (§2.3, ``--router`` only): a student :class:`NSimplicialTransformer` with top-K
   routing (``router="paper"``: ``Σ_h w_ih ReLU(<Q_i, K_j>)`` on the previous layer's queries
   and keys; ``router="bilinear"``: low-rank bilinear form of the layer input) is fitted to a
   random full-attention teacher of the same architecture; the table gives the held-out MSE
   (mean ± std over seeds) relative to a full-attention student (baseline, ratio 1).
5. ``torch.compile`` (``--compile`` only): an ``--compile-layers``-layer
   :class:`NSimplicialTransformer` on
   sequences (dense, causal) and on batches of complexes (Delaunay 2-complexes, sparse tuple
   path). Graph breaks (``torch._dynamo.explain``) with the raw inputs and with the tuples
   prepared outside the compiled region (:meth:`NSimplicialTransformer.prepare_tuples`);
   forward + backward time of the eager model called with the raw inputs (baseline), of the
   eager model with the prepared tuples, and of the inductor-compiled one (``dynamic=True``,
   prepared tuples); compile time, and the recompilations caused by a second batch size.

Usage::

    python benchmarks/n_simplicial.py            # about 2-3 minutes on 2 CPU cores
    python benchmarks/n_simplicial.py --quick    # seconds
    python benchmarks/n_simplicial.py --quick --router   # + Table 4 (about a minute)
    python benchmarks/n_simplicial.py --compile --threads 1   # Table 5 only (inductor compiles:
    # about a minute per mode on an idle core; --compile-modes complex for the quickest)
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
import torch
from _measure import peak_bytes
from scipy.spatial import Delaunay
from torch import Tensor

from topomodelx_attention.nn.simplicial import (
    NSimplicialTransformer,
    RouterContext,
    SimplicialRouter,
    TupleMask,
    WindowMask,
    face_sets_to_tuples,
    n_simplicial_attention,
    tuples_batch,
)


# ----------------------------------------------------------------------------------------------
# measurement
# ----------------------------------------------------------------------------------------------
def best_time(fn: Callable[[], None], device: torch.device, repeats: int) -> float:
    fn()  # warm-up (twice: the first call also grows the allocator and the thread pool)
    fn()
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# ----------------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------------
def naive_attention(q: Tensor, keys: list[Tensor], values: list[Tensor]) -> Tensor:
    """Baseline: materialise the (heads, n, n, n) logits and weights."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    logits = torch.einsum("hia,hja,hka->hijk", q, keys[0], keys[1]) * scale
    n = q.shape[-2]
    weights = torch.softmax(logits.reshape(*logits.shape[:2], -1), -1).view(-1, n, n, n)
    return torch.einsum("hijk,hja,hka->hia", weights, values[0], values[1])


def delaunay_tuples(n: int, seed: int) -> tuple[Tensor, int]:
    """Triples of a Delaunay triangulation of ``n`` random points (a 2-complex on n vertices)."""
    points = np.random.default_rng(seed).random((n, 2))
    triangles = Delaunay(points).simplices
    tuples = face_sets_to_tuples([torch.from_numpy(triangles.astype(np.int64))], 2, n)
    return tuples, len(triangles)


def make_inputs(n: int, heads: int, head_dim: int, device: torch.device, seed: int):
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def rand() -> Tensor:
        return torch.randn(heads, n, head_dim, generator=gen).to(device).requires_grad_()

    return rand(), [rand(), rand()], [rand(), rand()]


def case_fn(
    kind: str,
    n: int,
    args: argparse.Namespace,
    device: torch.device,
    router: SimplicialRouter,
    tuples: TupleMask | None,
) -> Callable[[], None]:
    q, keys, values = make_inputs(n, args.heads, args.head_dim, device, seed=n)
    x = torch.randn(1, n, args.heads * args.head_dim, device=device)
    context = RouterContext(q.unsqueeze(0), tuple(k.unsqueeze(0) for k in keys))

    def run() -> None:
        if kind == "naive":
            out = naive_attention(q, keys, values)
        elif kind == "full":
            out = n_simplicial_attention(q, keys, values)  # automatic chunks (TILE_BUDGET)
        elif kind == "full_c32":
            out = n_simplicial_attention(q, keys, values, chunk_size=(32, 32))
        elif kind == "windowed":
            out = n_simplicial_attention(q, keys, values, mask=WindowMask(args.window))
        elif kind == "routed":
            selection = router(x, context=context)  # §2.3 scores, gates carry the gradient
            out = n_simplicial_attention(q, keys, values, mask=selection)
        elif kind == "complex":
            out = n_simplicial_attention(q, keys, values, mask=tuples)
        else:
            raise ValueError(kind)
        out.square().sum().backward()

    return run


# ----------------------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------------------
def table_paths(args: argparse.Namespace, device: torch.device) -> None:
    channels = args.heads * args.head_dim
    router = SimplicialRouter(channels, 2, args.router_k, heads=args.heads).to(device)
    print(
        f"\n### Table 1 — N = 2, heads = {args.heads}, head_dim = {args.head_dim}, "
        f"forward + backward, {device.type}\n"
    )
    print(
        "naive: einsum materialising the n³ logits (baseline); full: exact streaming kernel with "
        "automatic chunks; full_c32: the same with (c_q, c_k) = (32, 32); "
        f"windowed: causal windows (w1, w2) = {tuple(args.window)}; routed: top-K = "
        f"{args.router_k} keys per axis (router scoring included); complex: the triangles of a "
        "Delaunay triangulation of n random points (6 ordered triples per triangle).\n"
    )
    print("| n | path | tuples / query | time (ms) | peak memory | time / naive | memory / naive |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        tuples, _ = delaunay_tuples(n, seed=n)
        mask = TupleMask(tuples.to(device))
        base_time = base_mem = None
        for kind in ("naive", "full", "full_c32", "windowed", "routed", "complex"):
            if kind == "naive" and n > args.naive_max:
                continue
            if kind.startswith("full") and n > args.full_max:
                continue
            fn = case_fn(kind, n, args, device, router, mask)
            seconds = best_time(fn, device, args.repeats)
            mem = peak_bytes(fn, device)
            per_query = {
                "naive": n * n,
                "full": n * n,
                "full_c32": n * n,
                "windowed": args.window[0] * args.window[1],
                "routed": args.router_k**2,
                "complex": tuples.shape[0] / n,
            }[kind]
            if kind == "naive":
                base_time, base_mem = seconds, mem
            ratio_t = f"{seconds / base_time:.3f}" if base_time else "—"
            ratio_m = f"{mem / base_mem:.4f}" if base_mem else "—"
            print(
                f"| {n} | {kind} | {per_query:.0f} | {seconds * 1e3:.1f} | {fmt_bytes(mem)} | "
                f"{ratio_t} | {ratio_m} |"
            )


def table_windows(args: argparse.Namespace, device: torch.device) -> None:
    print("\n### Table 2 — windowed path: peak memory vs n and windows (forward + backward)\n")
    print("| n | (w1, w2) | peak memory | peak / (n·w1·w2) (bytes) | n³ logits would be |")
    print("|---:|---|---:|---:|---:|")
    for windows in args.window_grid:
        for n in args.window_sizes:
            q, keys, values = make_inputs(n, args.heads, args.head_dim, device, seed=0)

            def run(q=q, keys=keys, values=values, windows=windows) -> None:
                out = n_simplicial_attention(q, keys, values, mask=WindowMask(windows))
                out.square().sum().backward()

            mem = peak_bytes(run, device)
            w1, w2 = windows
            cube = args.heads * n**3 * 4
            print(
                f"| {n} | ({w1}, {w2}) | {fmt_bytes(mem)} | {mem / (n * w1 * w2):.1f} | "
                f"{fmt_bytes(cube)} |"
            )


def table_chunks(args: argparse.Namespace, device: torch.device) -> None:
    n = args.chunk_n
    print(f"\n### Table 3 — full (exact) path, n = {n}: peak memory vs chunk sizes\n")
    print("| (c_q, c_k) | time (ms) | peak memory | one tile c_q·c_k·n·heads·4 B |")
    print("|---|---:|---:|---:|")
    q, keys, values = make_inputs(n, args.heads, args.head_dim, device, seed=1)
    for chunk in args.chunk_grid:

        def run(chunk=chunk) -> None:
            out = n_simplicial_attention(q, keys, values, chunk_size=chunk)
            out.square().sum().backward()

        seconds = best_time(run, device, args.repeats)
        mem = peak_bytes(run, device)
        tile = chunk[0] * chunk[1] * n * args.heads * 4
        print(f"| {tuple(chunk)} | {seconds * 1e3:.1f} | {fmt_bytes(mem)} | {fmt_bytes(tile)} |")


def table_routers(args: argparse.Namespace, device: torch.device) -> None:
    n, k, steps, seeds = args.router_n, args.router_k_fit, args.router_steps, args.router_seeds
    width, batch = 16, 32
    print(
        f"\n### Table 4 — routers (§2.3): fit a full-attention teacher, n = {n}, K = {k}, "
        f"{steps} Adam steps, batch {batch}, width {width}, 2 layers, {len(seeds)} seeds\n"
    )
    print("| student | test MSE (mean ± std) | MSE / full | ms per step |")
    print("|---|---:|---:|---:|")
    common = {"n_layers": 2, "heads": 2, "order": 2, "outputs": "tokens"}
    results: dict[str, list[float]] = {}
    timing: dict[str, float] = {}
    for seed in seeds:
        torch.manual_seed(seed)
        teacher = NSimplicialTransformer(8, width, 4, **common).to(device)
        x_test = torch.randn(256, n, 8, device=device)
        with torch.no_grad():
            y_test = teacher(x_test)
        for name, extra in (
            ("full", {}),
            ("paper", {"router_k": k, "router": "paper"}),
            ("bilinear", {"router_k": k, "router": "bilinear"}),
        ):
            torch.manual_seed(seed + 1)
            student = NSimplicialTransformer(8, width, 4, **common, simplicial_options=extra).to(device)
            opt = torch.optim.Adam(student.parameters(), lr=3e-3)
            start = time.perf_counter()
            for _ in range(steps):
                x = torch.randn(batch, n, 8, device=device)
                with torch.no_grad():
                    y = teacher(x)
                loss = (student(x) - y).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            timing[name] = timing.get(name, 0.0) + (time.perf_counter() - start) / steps
            with torch.no_grad():
                results.setdefault(name, []).append(float((student(x_test) - y_test).square().mean()))
    base = float(np.mean(results["full"]))
    for name, values in results.items():
        mean, std = float(np.mean(values)), float(np.std(values))
        print(
            f"| {name} | {mean:.4f} ± {std:.4f} | {mean / base:.2f} | "
            f"{timing[name] / len(seeds) * 1e3:.1f} |"
        )


def _graph_breaks(fn: Callable[..., Tensor], *args) -> int:
    import torch._dynamo

    torch._dynamo.reset()
    count = torch._dynamo.explain(fn)(*args).graph_break_count
    torch._dynamo.reset()
    return count


def table_compile(args: argparse.Namespace) -> None:
    """Table 5: graph breaks and compiled-vs-eager speed (CPU, forward + backward)."""
    import torch._dynamo
    import torch._dynamo.testing

    # distinct sizes everywhere (features 5, batch 6, n 24, 6 complexes): with dynamic=True, dims
    # equal at warm-up share one symbol (duck sizing) and a later batch would recompile
    feats, width, batch, n, n_complex, complexes = 5, 32, 6, 24, 20, 6
    print(
        f"\n### Table 5 — torch.compile (inductor, dynamic=True), {args.compile_layers}-layer NSimplicialTransformer, "
        f"N = 2, width {width}, 2 heads, float32, forward + backward, "
        f"{torch.get_num_threads()} thread(s)\n"
    )
    print(
        f"sequences: batch {batch} × n = {n} (second batch: {batch // 2}); complexes: {complexes} "
        f"Delaunay 2-complexes of {n_complex} vertices (second batch: {complexes // 2}), 6 ordered "
        "triples per triangle. Breaks (raw): the model called as in eager mode (tuples as a "
        "TupleMask); breaks (prepared): tuples prepared outside by `prepare_tuples`, `batch` and "
        "`num_complexes` given. Time: minimum of "
        f"{args.repeats} rounds after warm-up; recompiles: new compilations for the second batch "
        "size.\n"
    )
    print(
        "| mode | breaks (raw) | breaks (prepared) | eager (ms) | eager prepared (ms) | "
        "compiled (ms) | eager / compiled | compile (s) | recompiles |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")

    def complex_batch(count: int, seed: int):
        parts = [delaunay_tuples(n_complex, seed=seed + i)[0] for i in range(count)]
        tuples, index = tuples_batch(parts, [n_complex] * count)
        x = torch.randn(index.numel(), feats, generator=torch.Generator().manual_seed(seed))
        return x, TupleMask(tuples), index, count

    for mode in args.compile_modes:
        torch.manual_seed(0)
        model = NSimplicialTransformer(
            feats,
            width,
            4,
            n_layers=args.compile_layers,
            heads=2,
            order=2,
            simplicial_options={"causal": mode == "causal"},
        )
        if mode == "complex":
            x, tuples, index, count = complex_batch(complexes, 0)
            raw_args = (x, tuples, index, count)
            prep = (x, model.prepare_tuples(x, tuples), index, count)
            x2, tuples2, index2, count2 = complex_batch(complexes // 2, 100)
            second = (x2, model.prepare_tuples(x2, tuples2), index2, count2)

            def fn(x, tuples, index, count):
                return model(x, tuples, index, num_complexes=count)

        else:
            prep = raw_args = (torch.randn(batch, n, feats),)
            second = (torch.randn(batch // 2, n, feats),)

            def fn(x):
                return model(x)

        breaks_raw = _graph_breaks(fn, *raw_args)
        breaks_prep = _graph_breaks(fn, *prep)
        counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
        compiled = torch.compile(fn, backend=counter, dynamic=True)
        start = time.perf_counter()
        compiled(*prep).square().sum().backward()
        compile_s = time.perf_counter() - start
        frames = counter.frame_count
        compiled(*second).square().sum().backward()
        recompiles = counter.frame_count - frames
        torch.testing.assert_close(compiled(*prep), fn(*raw_args), atol=1e-4, rtol=1e-4)
        times = {}
        cases = (("eager", fn, raw_args), ("prepared", fn, prep), ("compiled", compiled, prep))
        for name, f, a in cases:
            times[name] = best_time(
                lambda f=f, a=a: f(*a).square().sum().backward(), torch.device("cpu"), args.repeats
            )
        print(
            f"| {mode} | {breaks_raw} | {breaks_prep} | {times['eager'] * 1e3:.1f} | "
            f"{times['prepared'] * 1e3:.1f} | {times['compiled'] * 1e3:.1f} | "
            f"{times['eager'] / times['compiled']:.2f} | "
            f"{compile_s:.1f} | {recompiles} |"
        )
        torch._dynamo.reset()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--router-k", type=int, default=8)
    parser.add_argument("--window", type=int, nargs=2, default=(16, 8))
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--router", action="store_true", help="add Table 4 (router comparison)")
    parser.add_argument(
        "--compile", action="store_true", help="only Table 5 (torch.compile: breaks and speed)"
    )
    parser.add_argument(
        "--compile-modes", nargs="+", default=["dense", "causal", "complex"],
        choices=["dense", "causal", "complex"], help="Table 5 rows",
    )
    parser.add_argument("--compile-layers", type=int, default=1, help="Table 5 model depth")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.quick:
        args.sizes, args.naive_max, args.full_max = [64, 128, 512], 128, 128
        args.window_sizes, args.window_grid = [256, 1024], [(4, 4), (8, 8)]
        args.chunk_n, args.chunk_grid, args.repeats = 96, [(8, 8), (32, 32), (96, 96)], 1
        args.router_n, args.router_k_fit, args.router_steps, args.router_seeds = 16, 4, 150, [0, 1, 2]
    else:
        args.sizes, args.naive_max, args.full_max = [64, 128, 256, 1024, 4096], 256, 256
        args.window_sizes = [512, 2048, 8192]
        args.window_grid = [(4, 4), (8, 8), (16, 8), (16, 16)]
        args.chunk_n, args.chunk_grid = 256, [(16, 16), (64, 64), (128, 256), (256, 256)]
        args.router_n, args.router_k_fit, args.router_steps = 32, 6, 400
        args.router_seeds = [0, 1, 2, 3, 4]
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, threads = {torch.get_num_threads()}, device = {device}")
    if args.compile:
        table_compile(args)
        return
    table_paths(args, device)
    table_windows(args, device)
    table_chunks(args, device)
    if args.router:
        table_routers(args, device)


if __name__ == "__main__":
    main()
