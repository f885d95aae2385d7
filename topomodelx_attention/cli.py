"""Command line: ``topomodelx-attention <command>``.

Commands
--------
lift
    Lift a graph data set to complexes and print per-rank cell counts and the time taken.
train
    Train and evaluate a model on a benchmark data set with the harness (hydra configs in
    ``topomodelx_attention/configs``; extra ``train``), print the results table.
bench
    Run one of the speed benchmarks of this project's source checkout (``benchmarks/<name>.py``
    of the checkout the package is installed from, or ``--benchmarks-dir``) in a subprocess;
    ``bench --list`` lists them.
convert-gcb
    Convert an original GCB ``.npz`` (pickled scipy matrices) once to the plain numeric format
    the harness reads (a restricted unpickler: numpy arrays and scipy CSR matrices only).
topobench contribute, topobench check
    Write the files of a TopoBench pull request adding one of the models into a TopoBench
    checkout; check it there (TopoBench's tests and lint in an environment the command makes).

User errors (bad paths, unknown names, damaged data files, unwritable folders) print one line
``topomodelx-attention <command>: error: ...`` on stderr and exit with status 2; other
exceptions are bugs and keep their traceback (``TOPOMODELX_ATTENTION_TRACEBACK=1`` shows the
traceback of user errors too). Ctrl+C (SIGINT) prints one line
``topomodelx-attention <command>: interrupted`` and exits with status 130, SIGTERM (``kill``, a
batch scheduler's time limit) prints ``topomodelx-attention <command>: terminated`` and exits
with status 143, both without a traceback and without a results row for the unfinished seed.
A ``train`` whose seed failed (its training loss became NaN or infinite) prints the finished
seeds' table, one line per failed seed, and exits with status 1.

The module imports nothing heavy: ``--help`` and argument errors never import torch, PyG or
Lightning; each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import itertools
import os
import pickle
import shlex
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["EXIT_INTERRUPTED", "EXIT_SEED_FAILED", "USER_ERRORS", "Interrupted", "UserError", "main"]

LIFTINGS = ("cell_cycle", "clique")


EXIT_INTERRUPTED = 130
"""Exit status after Ctrl+C (SIGINT): 128 + the signal number, as shells report it (143 after SIGTERM)."""

EXIT_SEED_FAILED = 1
"""Exit status of a ``train`` in which a seed failed (diverged): its metrics are never reported."""


class UserError(Exception):
    """An error the user can fix (printed as one line, exit status 2)."""


class Interrupted(BaseException):
    """Raised by the CLI's SIGINT and SIGTERM handlers (exit status 128 + the signal, one line).

    Deliberately not a ``KeyboardInterrupt``: Lightning turns a ``KeyboardInterrupt`` during
    ``fit`` into a "graceful shutdown" message and ``sys.exit(1)``, and a SIGTERM into a quiet
    stop of the fit; any other exception it tears down and re-raises, so the CLI reports one
    line and exits with 130 (SIGINT) or 143 (SIGTERM).

    Parameters
    ----------
    signum : int, default=signal.SIGINT
        The signal received.
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = int(signum)


USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError,
    ValueError,
    TypeError,
    OSError,
    zipfile.BadZipFile,
    EOFError,
    csv.Error,
    pickle.UnpicklingError,
    ImportError,
)
"""Exceptions :func:`main` reports as one line (bad input, files, options); others are bugs."""


def _positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (>= 1), got {value}")
    return value


def _seed(text: str) -> int:
    """``argparse`` type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer seed, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"seeds must be in 0..2**32-1, got {value}")
    return value


def _lifting(args: argparse.Namespace):
    from topomodelx_attention.transforms import CellCycleLifting, SimplicialCliqueLifting

    if args.lifting == "cell_cycle":
        return CellCycleLifting(max_cell_length=args.max_cell_length, cycles=args.cycles)
    return SimplicialCliqueLifting(complex_dim=args.complex_dim)


def _cmd_lift(args: argparse.Namespace) -> int:
    import torch

    from topomodelx_attention.datasets.tu import load_tu_graphs

    graphs = load_tu_graphs(args.dataset, data_dir=args.data_dir, root=args.root)
    lifting = _lifting(args)
    start = time.perf_counter()
    complexes = lifting.lift_many(graphs)
    elapsed = time.perf_counter() - start
    counts = torch.cat([c.shape for c in complexes], dim=0)  # (num_complexes, R + 1)
    print(f"dataset {args.dataset}: {len(complexes)} graphs, lifting {lifting!r}")
    print()
    print("| rank | cells (total) | mean per complex | max per complex | complexes with none |")
    print("|---:|---:|---:|---:|---:|")
    for rank in range(counts.size(1)):
        col = counts[:, rank]
        print(
            f"| {rank} | {int(col.sum())} | {col.float().mean():.2f} | {int(col.max())} "
            f"| {int((col == 0).sum())} |"
        )
    print()
    print(f"lifted in {elapsed:.3f} s ({1e3 * elapsed / max(len(complexes), 1):.3f} ms per graph)")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    try:
        from topomodelx_attention.harness import compose_config, run_experiment
        from topomodelx_attention.harness.prepare import progress_bars
        from topomodelx_attention.harness.results import markdown_table
    except ImportError as error:  # pragma: no cover - depends on the environment
        print(
            f"topomodelx-attention train: error: {error}. Install the training extra: "
            "pip install 'topomodelx-attention[train]'",
            file=sys.stderr,
        )
        return 2
    overrides = list(args.overrides)
    if args.max_epochs is not None:
        overrides.append(f"trainer.max_epochs={args.max_epochs}")
    if args.seeds:
        overrides.append("seeds=[" + ",".join(str(s) for s in args.seeds) + "]")
    for flag, key in (
        ("data_dir", "dataset.data_dir"),
        ("cache_dir", "paths.cache_dir"),
        ("output_dir", "paths.output_dir"),
        ("accelerator", "trainer.accelerator"),
        ("devices", "trainer.devices"),
        ("strategy", "trainer.strategy"),
        ("num_nodes", "trainer.num_nodes"),
    ):
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={_quote(value)}")
    # progress bars (lifting and Lightning's): only when asked and on a terminal; an explicit
    # trainer.enable_progress_bar=true override shows them anywhere
    asked = any(o.lstrip("+").startswith("trainer.enable_progress_bar=") for o in args.overrides)
    if args.no_progress_bar or not (asked or _is_terminal(sys.stderr)):
        overrides.append("trainer.enable_progress_bar=false")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            cfg = compose_config(overrides, dataset=args.dataset, model=args.model)
        except ValueError as error:
            raise UserError(str(error)) from error
    _check_accelerator(cfg.trainer.get("accelerator"))
    for warning in caught:  # e.g. a +key=value override that nothing reads: one line each
        print(f"topomodelx-attention train: warning: {warning.message}", file=sys.stderr)
    # after the configuration is checked: a refused option creates no folder
    for flag, value in (("--output-dir", args.output_dir), ("--cache-dir", args.cache_dir)):
        if value is not None:
            _check_writable_dir(flag, Path(value).expanduser())
    bars = bool(cfg.trainer.get("enable_progress_bar", True))
    try:
        with progress_bars(bars):
            result = run_experiment(cfg, lightning_info=args.verbose)
    except ImportError as error:
        raise UserError(
            f"{error} (training needs the extra `train`, ZINC also `chem`: pip install "
            "'topomodelx-attention[train,chem]')"
        ) from error
    from topomodelx_attention.harness.training import is_rank_zero

    if is_rank_zero():  # DDP: only the global rank 0 reports
        print()
        print(markdown_table(result))
        print()
        print(f"results, learning curves and logs: {result.output_dir}")
        for seed in result.failed:  # never a result: a failing status and the reason on stderr
            print(f"topomodelx-attention train: error: seed {seed.seed} {seed.failure}", file=sys.stderr)
    return EXIT_SEED_FAILED if result.failed else 0


def _is_terminal(stream: object) -> bool:
    """Whether ``stream`` is an interactive terminal (progress bars are drawn only there)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or detached stream
        return False


def _check_writable_dir(flag: str, folder: Path) -> None:
    """Raise :class:`UserError` when ``folder`` cannot be created or written (before any work)."""
    from topomodelx_attention.files import check_writable

    try:
        check_writable(folder)
    except OSError as error:
        raise UserError(
            f"{flag} {folder} is not a writable folder ({error.strerror or error}); choose another one"
        ) from error


_ACCELERATOR_HINTS = {
    "cuda": "no CUDA GPU is visible to torch here (torch.cuda.is_available() is False)",
    "gpu": "no GPU is visible to torch here (neither CUDA nor Apple MPS)",
    "mps": "Apple's MPS backend is not available here (macOS on Apple silicon only)",
    "tpu": "TPU training needs a TPU host with torch_xla installed",
}


def _check_accelerator(value: object) -> None:
    """Raise :class:`UserError` when ``--accelerator`` (``trainer.accelerator``) cannot run here.

    The name must be one Lightning knows (``auto``, ``cpu``, ``gpu``, ``cuda``, ``mps``,
    ``tpu``, and any registered accelerator), and its accelerator available on this machine,
    checked before any data is read (Lightning would fail later with a traceback, or with an
    installation hint for a TPU library). ``None`` and ``auto`` are always accepted; without
    Lightning installed nothing is checked (the run reports the missing extra).
    """
    if not isinstance(value, str) or value == "auto":
        return
    try:
        from lightning.pytorch.accelerators import AcceleratorRegistry
    except ImportError:  # pragma: no cover - depends on the environment
        return
    known = sorted(AcceleratorRegistry.available_accelerators())
    names = ["auto", "gpu", *known]
    if value not in names:
        raise UserError(
            f"--accelerator {value!r} (trainer.accelerator) is not an accelerator; choose one of {names}"
        )

    def available(key: str) -> bool:
        try:
            return key in known and bool(AcceleratorRegistry[key]["accelerator"].is_available())
        except Exception:  # a backend that cannot even be probed is not available
            return False

    if (value == "gpu" and (available("cuda") or available("mps"))) or available(value):
        return
    here = ["auto", *(key for key in known if available(key))]
    hint = _ACCELERATOR_HINTS.get(value, "its backend reports it unavailable")
    raise UserError(
        f"--accelerator {value} (trainer.accelerator) is not available on this machine: {hint}; "
        f"available here: {here}"
    )


def _cmd_convert_gcb(args: argparse.Namespace) -> int:
    from topomodelx_attention.datasets.gcb import convert_gcb, read_gcb

    dst = convert_gcb(args.src, args.dst)
    graphs = read_gcb(dst)
    counts = "/".join(str(len(graphs[k])) for k in ("train", "val", "test"))
    print(f"wrote {dst}: {counts} train/val/test graphs (plain arrays, read without unpickling)")
    return 0


def _quote(value: object) -> str:
    """Quote a value for a hydra override when it holds characters hydra would parse."""
    text = str(value)
    if any(c in text for c in " ,[]{}()=:'\"\\") or text == "":
        return "'" + text.replace("'", "\\'") + "'"
    return text


PROJECT_NAME = "topomodelx-attention"
"""``[project] name`` of this project's ``pyproject.toml`` (how a source checkout is recognised)."""


def _project_name(folder: Path) -> str | None:
    """``[project] name`` of ``folder/pyproject.toml``, normalised (``None``: no readable one)."""
    path = folder / "pyproject.toml"
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        import tomllib
    except ImportError:  # Python 3.10: the name line of the [project] table
        import re

        table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
        found = table and re.search(r"^name\s*=\s*[\"']([^\"']+)[\"']", table.group(1), flags=re.M)
        name = found.group(1) if found else None
    else:
        try:
            project = tomllib.loads(text).get("project")
        except tomllib.TOMLDecodeError:
            return None
        name = project.get("name") if isinstance(project, dict) else None
    if not isinstance(name, str):
        return None
    return name.replace("_", "-").replace(".", "-").lower()


def is_project_benchmarks_dir(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is the ``benchmarks/`` folder of a source checkout of this project.

    That is: a folder named ``benchmarks`` whose parent holds a ``pyproject.toml`` declaring
    the project :data:`PROJECT_NAME` (``topomodelx-attention``).

    Parameters
    ----------
    folder : path-like
        The folder.

    Returns
    -------
    bool
        ``True`` for this project's benchmark folder.
    """
    folder = Path(folder).resolve()
    return folder.name == "benchmarks" and folder.is_dir() and _project_name(folder.parent) == PROJECT_NAME


def find_benchmarks_dir() -> Path | None:
    """Return the ``benchmarks/`` folder of the checkout this package runs from (``None``: none).

    Only the checkout that holds the imported package counts (an editable install or a
    checkout on ``PYTHONPATH``: the folder above the package, with this project's
    ``pyproject.toml``, :func:`is_project_benchmarks_dir`). The working folder and its parents
    are never searched: ``bench`` must not run the scripts of whatever project it is started in.

    Returns
    -------
    pathlib.Path or None
        The folder.
    """
    candidate = Path(__file__).resolve().parent.parent / "benchmarks"
    return candidate if is_project_benchmarks_dir(candidate) else None


def list_benchmarks(folder: Path) -> dict[str, str]:
    """Benchmark scripts of ``folder``: ``{name: first line of its docstring}`` (not imported)."""
    out = {}
    for script in sorted(folder.glob("*.py")):
        if script.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(script.read_text())) or ""
        except SyntaxError:
            doc = ""
        out[script.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    return out


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.benchmarks_dir:
        folder = Path(args.benchmarks_dir).expanduser()
        if not folder.is_dir():
            raise UserError(
                f"--benchmarks-dir {folder} is not a folder: pass the benchmarks/ folder of a source "
                f"checkout of {PROJECT_NAME}"
            )
        if not is_project_benchmarks_dir(folder):
            raise UserError(
                f"--benchmarks-dir {folder} is not the benchmarks/ folder of a source checkout of "
                f"{PROJECT_NAME} (a folder named benchmarks next to a pyproject.toml with "
                f"name = \"{PROJECT_NAME}\"); bench runs only this project's own scripts"
            )
    else:
        folder = find_benchmarks_dir()
        if folder is None:
            raise UserError(
                f"this installation of {PROJECT_NAME} has no benchmarks/ folder: the benchmark "
                "scripts live in a source checkout (they are not installed with the package). Clone "
                "the repository and install it editable (pip install -e .), or pass --benchmarks-dir "
                "PATH (the checkout's benchmarks/ folder); scripts of the working folder are never run"
            )
    scripts = list_benchmarks(folder)
    if args.list or not args.name:
        width = max((len(name) for name in scripts), default=0)
        print(f"benchmarks in {folder}:")
        for name, doc in scripts.items():
            print(f"  {name:<{width}}  {doc}")
        print(
            "run one with: topomodelx-attention bench <name> [args]  (<name> --help for its options)"
        )
        return 0
    name = args.name[:-3] if args.name.endswith(".py") else args.name
    if name not in scripts:
        raise UserError(f"unknown benchmark {args.name!r}; available: {sorted(scripts)}")
    command = [sys.executable, str(folder / f"{name}.py"), *args.args]
    return subprocess.run(command, cwd=folder.parent, check=False).returncode


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``topomodelx-attention`` command."""
    parser = argparse.ArgumentParser(
        prog="topomodelx-attention",
        description="Transformers on cell, simplicial and combinatorial complexes.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    lift = _add_command(sub, "lift", _cmd_lift, help="lift a graph data set and print cell counts per rank")
    lift.add_argument(
        "--dataset",
        default="MUTAG",
        help="TU data set name (MUTAG is bundled; others need --data-dir)",
    )
    lift.add_argument(
        "--data-dir", default=None, help="folder of the TU raw files (<NAME>/raw/<NAME>_A.txt ...)"
    )
    lift.add_argument("--lifting", default="cell_cycle", choices=LIFTINGS)
    lift.add_argument(
        "--max-cell-length", type=_positive_int, default=None, help="cell_cycle: longest ring"
    )
    lift.add_argument("--cycles", default="basis", choices=("basis", "chordless"))
    lift.add_argument(
        "--complex-dim", type=_positive_int, default=2, help="clique: highest simplex rank"
    )
    lift.add_argument(
        "--root", default=None, help="cache of downloaded raw files (default: ~/.cache/...)"
    )

    train = _add_command(
        sub,
        "train",
        _cmd_train,
        help="train and evaluate a model on a benchmark data set (results table, curves)",
        description=(
            "Train a model with the benchmark harness (TopoBench protocol: TU data sets 50/25/25 "
            "random splits per seed; GCB and ZINC their fixed split), test at the best validation "
            "epoch, print the table. Trailing KEY=VALUE arguments are hydra overrides of the "
            "packaged configs, e.g. model.params.hidden_channels=64 optimizer.lr=5e-4."
        ),
    )
    train.add_argument(
        "--dataset",
        default="MUTAG",
        help=(
            "MUTAG (bundled), PROTEINS, GCB, ZINC, any TU data set name with --data-dir, or a "
            "heterophilous node set with --data-dir (minesweeper, tolokers, questions, roman_empire, "
            "amazon_ratings, chameleon_filtered, squirrel_filtered, actor; seeds are split indices)"
        ),
    )
    packaged = sorted(
        f.stem for f in (Path(__file__).parent / "configs" / "model").glob("*/*.yaml")
    )
    train.add_argument(
        "--model",
        default="cellular_transformer",
        help="packaged model config: " + ", ".join(packaged),
    )
    train.add_argument(
        "--max-epochs", type=_positive_int, default=None, help="epochs per seed (>= 1)"
    )
    train.add_argument(
        "--seeds", type=_seed, nargs="+", default=None, help="seeds >= 0 (default 1..5)"
    )
    train.add_argument("--data-dir", default=None, help="folder of the data set's files")
    train.add_argument("--cache-dir", default=None, help="cache of lifted complexes")
    train.add_argument(
        "--output-dir", default=None, help="default outputs/<dataset>/<model>/<time>"
    )
    train.add_argument("--accelerator", default=None, help="cpu, gpu, auto (trainer.accelerator)")
    train.add_argument("--devices", default=None, help="devices per node (trainer.devices)")
    train.add_argument("--strategy", default=None, help="auto, ddp, ... (trainer.strategy)")
    train.add_argument(
        "--num-nodes", type=_positive_int, default=None, help="nodes (trainer.num_nodes)"
    )
    train.add_argument(
        "--no-progress-bar",
        action="store_true",
        help="hide the progress bars of the lifting and the training (they are shown only on a "
        "terminal anyway)",
    )
    train.add_argument(
        "-v", "--verbose", action="store_true", help="show Lightning's info messages (devices, checkpoints)"
    )
    train.add_argument("overrides", nargs="*", help="hydra overrides KEY=VALUE")

    bench = _add_command(
        sub,
        "bench",
        _cmd_bench,
        help="run a speed benchmark script of the source checkout (benchmarks/<name>.py)",
        description=(
            "Run benchmarks/<name>.py of this project's source checkout in a subprocess: the "
            "checkout the package is installed from (editable install), or --benchmarks-dir. "
            "Scripts of the working folder or of another project are never run."
        ),
    )
    bench.add_argument("--list", action="store_true", help="list the benchmark scripts")
    bench.add_argument(
        "--benchmarks-dir",
        default=None,
        help="the benchmarks/ folder of a source checkout of topomodelx-attention (default: the "
        "checkout this package is installed from; never the working folder)",
    )
    bench.add_argument("name", nargs="?", help="benchmark name (e.g. lifting)")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")

    convert = _add_command(
        sub,
        "convert-gcb",
        _cmd_convert_gcb,
        help="convert an original GCB .npz (pickled objects) once to the plain format the harness reads",
        description=(
            "Read SRC (keys tr_adj, tr_feat, tr_class, val_*, te_*; object arrays of scipy CSR "
            "matrices) with a restricted unpickler that accepts only numpy arrays and scipy CSR "
            "matrices and builds plain numeric arrays itself (no object or structured dtype, sizes "
            "checked before anything is allocated), and write DST with plain numeric arrays (read "
            "with allow_pickle=False) through a new temporary file in DST's folder. "
            "Put DST next to SRC as <stem>.plain.npz and `train --dataset GCB --data-dir DIR` reads it."
        ),
    )
    convert.add_argument("src", help="original GCB file, e.g. hard_small.npz")
    convert.add_argument(
        "dst", nargs="?", default=None, help="output (default: <stem>.plain.npz next to SRC)"
    )
    _add_topobench_parser(sub)
    return parser


def _add_command(
    sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], int], **kwargs: Any
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` (``kwargs``: its ``help``, ``description``) that runs ``func``."""
    command = sub.add_parser(name, **kwargs)
    command.set_defaults(func=func)
    return command


#: ``topobench check``: its one-line help and its description.
_CHECK_HELP = "check a contribution inside a TopoBench checkout: its tests, TopoBench's suite and lint"
_CHECK_DESCRIPTION = (
    "Make (or reuse) TopoBench's test environment at --venv (python -m venv "
    "--system-site-packages, then pip install of what TopoBench's suite imports, ruff "
    "included), check that every module is there, then in temporary git worktrees of the "
    "checkout's HEAD: run TopoBench's suite untouched (the baseline), write the pull "
    "request with `topobench contribute`, run its tests, the suite again with the "
    "coverage of the added backbones and wrappers, and TopoBench's ruff settings on the "
    "added modules with the venv's ruff. Pure-torch stand-ins for torch-scatter, "
    "torch-sparse and torch-cluster (no wheels for current torch) exist only in the "
    "check's processes. Exit status 1, with the failed steps named, when any step fails "
    "or cannot run; the checkout itself is not modified."
)


def _add_topobench_parser(sub: argparse._SubParsersAction) -> None:
    """``topobench contribute``: write a model's TopoBench pull-request files into a checkout."""
    topobench = sub.add_parser(
        "topobench",
        help="TopoBench contributions (topobench contribute | check --topobench PATH --model NAME)",
        description="Contribute this package's models to TopoBench.",
    )
    actions = topobench.add_subparsers(dest="topobench_command", required=True)
    contribute = _add_command(
        actions,
        "contribute",
        _cmd_topobench_contribute,
        help="write the files of a TopoBench pull request adding a model into a TopoBench checkout",
        description=(
            "Write into a TopoBench checkout exactly the files of a pull request that adds the "
            "model, in TopoBench's layout and naming: the backbone "
            "topobench/nn/backbones/{domain}/{model}.py and its wrapper "
            "topobench/nn/wrappers/{domain}/{model}_wrapper.py (thin modules), the model code "
            "they import (this package's modules, vendored in topobench/nn/topomodelx_attention/: "
            "the pull request installs with TopoBench's own steps), the configs "
            "configs/model/{domain}/*.yaml, the unit tests "
            "test/nn/{backbones,wrappers}/{domain}/test_{model}*.py, the entry of "
            "test/pipeline/test_pipeline.py and the row of the README's model table. All or nothing: everything is checked and every new "
            "content is written to a temporary file beside its destination before the first "
            "file is replaced; on any failure (a check, a full disk, a file-size limit, Ctrl+C) "
            "every file is put back byte for byte and the error says nothing was changed. "
            "Nothing is written through a link in the checkout (a link at a folder is refused, "
            "one at a file is replaced by the file). An existing file with other content is "
            "kept unless --force."
        ),
    )
    contribute.add_argument("--topobench", required=True, help="folder of a TopoBench checkout")
    contribute.add_argument(
        "--model",
        action="append",
        required=True,
        help="cellular_transformer, tokengt (order-k TokenGT), n_simplicial, or all; repeatable",
    )
    contribute.add_argument(
        "--requirement",
        default=None,
        help=(
            "a dependency line to add to TopoBench's pyproject.toml: one PEP 508 requirement on "
            "one line (default: none; the pull request carries the model code)"
        ),
    )
    contribute.add_argument("--force", action="store_true", help="overwrite files with other content")
    contribute.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    check = _add_command(actions, "check", _cmd_topobench_check, help=_CHECK_HELP, description=_CHECK_DESCRIPTION)
    check.add_argument("--topobench", required=True, help="folder of a git checkout of TopoBench")
    check.add_argument(
        "--model", action="append", required=True,
        help="cellular_transformer, tokengt, n_simplicial, or all; repeatable",
    )
    check.add_argument(
        "--venv", default="tbvenv",
        help="TopoBench's test environment: made when it has no interpreter, reused otherwise (default ./tbvenv)",
    )
    check.add_argument("--timeout", type=float, default=None, help="seconds per pytest run")
    check.add_argument("--logs", default=None, help="folder for the logs and worktrees (default: a new temporary folder)")
    check.add_argument("--keep", action="store_true", help="keep the worktrees (git worktree list)")


def _cmd_topobench_contribute(args: argparse.Namespace) -> int:
    from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS, contribute

    models = list(CONTRIBUTIONS) if "all" in args.model else args.model
    changes = contribute(
        Path(args.topobench), models, requirement=args.requirement, force=args.force,
        dry_run=args.dry_run,
    )
    verb = "would" if args.dry_run else "did"
    print(f"TopoBench checkout {Path(args.topobench).resolve()} ({verb}):")
    for change in changes:
        note = f"  <- {change.note}" if change.note else ""
        print(f"  {change.action:<9} {change.path}{note}")
    if not args.dry_run:
        print(f"next: {check_command(Path(args.topobench).resolve(), models)}")
    return 0


def check_command(topobench: Path, models: Sequence[str]) -> str:
    """Return the ``topobench check`` command line for ``models`` in the checkout ``topobench``."""
    flags = " ".join(f"--model {model}" for model in models)
    return (
        f"topomodelx-attention topobench check --topobench {shlex.quote(str(topobench))} {flags} --venv tbvenv "
        "(TopoBench's tests and lint on the contribution, in a venv it makes; the checkout is not modified)"
    )


def _cmd_topobench_check(args: argparse.Namespace) -> int:
    from topomodelx_attention.harness.topobench.check import run_check
    from topomodelx_attention.harness.topobench.contribute import CONTRIBUTIONS

    models = list(CONTRIBUTIONS) if "all" in args.model else args.model
    return run_check(
        Path(args.topobench), Path(args.venv), models, logs=None if args.logs is None else Path(args.logs),
        timeout=args.timeout, keep=args.keep,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0, 1 when a seed of ``train`` failed (:data:`EXIT_SEED_FAILED`), 2 for a
        user error, :data:`EXIT_INTERRUPTED` (130) after Ctrl+C, 143 after SIGTERM.
    """
    parser = build_parser()
    args = parser.parse_args(_overrides_first(parser, list(sys.argv[1:] if argv is None else argv)))
    try:
        with _signals_interrupt():
            return int(args.func(args))
    except (Interrupted, KeyboardInterrupt) as stop:
        signum = getattr(stop, "signum", signal.SIGINT)
        word = "terminated" if signum == signal.SIGTERM else "interrupted"
        print(f"topomodelx-attention {args.command}: {word}", file=sys.stderr)
        return 128 + signum
    except USER_ERRORS as error:
        if os.environ.get("TOPOMODELX_ATTENTION_TRACEBACK"):
            raise
        print(f"topomodelx-attention {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return 2


def _overrides_first(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """Move a command's ``KEY=VALUE`` overrides before its options (``train --seeds 1 2 k=v`` works).

    ``--seeds`` takes several values, so argparse would hand it a ``KEY=VALUE`` that follows;
    the overrides are positional, so they may stand anywhere. A token is an override when it
    holds ``=``, does not start with ``-`` and is not the value of an option that takes one;
    nothing after ``--`` moves.
    """
    if not argv or argv[0] not in _subparsers(parser):
        return argv
    command = _subparsers(parser)[argv[0]]
    positional = {a.dest for a in command._actions if not a.option_strings}
    if "overrides" not in positional:
        return argv
    one_value = {
        flag for a in command._actions if a.option_strings and a.nargs is None and a.const is None
        for flag in a.option_strings
    }
    overrides, rest, tokens = [], [], iter(argv[1:])
    for token in tokens:
        if token == "--":
            rest += [token, *tokens]
            break
        if token in one_value:
            rest += [token, *itertools.islice(tokens, 1)]  # its value, whatever it looks like
        elif "=" in token and not token.startswith("-"):
            overrides.append(token)
        else:
            rest.append(token)
    return [argv[0], *overrides, *rest] if overrides else argv


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into :class:`Interrupted` in this process while a command runs.

    A second signal during the clean-up is ignored; forked children (data loader workers) keep
    the usual ``KeyboardInterrupt`` on SIGINT. The previous handlers are restored afterwards.
    Lightning, during a fit, calls a SIGTERM handler found in place after its own. Only the
    main thread can install signal handlers: elsewhere nothing changes.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def interrupt(signum: int, frame: object) -> None:
        if os.getpid() != owner:  # a forked worker: the usual behaviour
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.signal(signum, signal.SIG_DFL)  # SIGTERM: end as without the CLI's handler
            os.kill(os.getpid(), signum)
            return
        for stop in handled:
            signal.signal(stop, signal.SIG_IGN)
        raise Interrupted(signum)

    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {stop: signal.signal(stop, interrupt) for stop in handled}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def _one_line(error: BaseException) -> str:
    """One line describing a user error (the file of an ``OSError`` named)."""
    if (
        isinstance(error, OSError)
        and error.filename is not None
        and str(error.filename) not in str(error)
    ):
        text = f"{error.strerror or error}: {error.filename}"
    elif isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = f"{error.strerror}: {error.filename}" + (
            f" -> {error.filename2}" if error.filename2 else ""
        )
    else:
        text = str(error) or type(error).__name__
    if isinstance(error, (zipfile.BadZipFile, EOFError, pickle.UnpicklingError, csv.Error)):
        text = f"damaged or unreadable data file ({type(error).__name__}: {text})"
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
