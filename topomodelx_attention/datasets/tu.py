"""Graph data sets: the embedded MUTAG copy and any TU data set by name.

MUTAG (188 molecules, TU raw text files, 110 KB) ships inside the package so that the command
line and the tests run offline. :func:`load_tu_graphs` reads any TU data set (``ENZYMES``,
``NCI1``, ``IMDB-BINARY``, ...) straight from its raw text files, ``<NAME>_A.txt``,
``<NAME>_graph_indicator.txt``, ``<NAME>_graph_labels.txt`` (or ``_graph_attributes.txt``) and
the optional ``_node_labels``, ``_node_attributes``, ``_edge_labels``, ``_edge_attributes``
files, with this package's parser (every line counts, final newline or not; a damaged file
raises one error naming the file and the line); it never reads a processed (pickled) file.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset

from topomodelx_attention.datasets.registry import DatasetFamily, default_root, register_family
from topomodelx_attention.files import write_bytes

__all__ = [
    "EMBEDDED_DATASETS",
    "TU",
    "TU_SOURCE",
    "TUGraphDataset",
    "embedded_raw_dir",
    "find_tu_raw",
    "load_tu_dataset",
    "load_tu_graphs",
    "read_tu_graphs",
]

TU_SOURCE = "https://chrsmrrs.github.io/datasets/ (TUDataset)"
"""Where TU data sets come from."""

_TU_URL = "https://www.chrsmrrs.com/graphkerneldatasets"

EMBEDDED_DATASETS: tuple[str, ...] = ("MUTAG",)
"""TU data sets whose raw files ship with the package."""

_EMBEDDED = Path(__file__).resolve().parents[1] / "data" / "embedded"
# package data of data/ (its path is part of the cache key of the bundled data sets)


def embedded_raw_dir(name: str) -> Path:
    """Folder of the raw files of an embedded data set.

    Parameters
    ----------
    name : str
        Data set name, one of :data:`EMBEDDED_DATASETS`.

    Returns
    -------
    pathlib.Path
        The package folder holding ``<name>_A.txt`` and friends.
    """
    if name not in EMBEDDED_DATASETS:
        raise ValueError(f"{name!r} is not embedded; embedded data sets: {list(EMBEDDED_DATASETS)}")
    return _EMBEDDED / name / "raw"


class TUGraphDataset(InMemoryDataset):
    """In-memory TU data set read from its raw text files (the :class:`TUDataset` interface).

    Indexing, slicing, ``len``, ``num_classes``, ``num_node_features`` and ``transform`` work as
    for :class:`torch_geometric.datasets.TUDataset`, but nothing is written to or read from a
    ``processed`` folder: PyG's processed file is a pickle that its loader may read with
    ``weights_only=False``, and this package never unpickles from a data folder.

    Parameters
    ----------
    graphs : list of torch_geometric.data.Data
        The graphs (e.g. from :func:`load_tu_graphs`).
    name : str
        Data set name (shown by ``repr``).
    transform : callable, optional
        Applied to every graph on access.
    """

    def __init__(self, graphs: list[Data], name: str, transform: Any = None) -> None:
        self.name = name
        super().__init__(None, transform)
        self._data, self.slices = self.collate(graphs)

    def __repr__(self) -> str:
        return f"{self.name}({len(self)})"


def load_tu_dataset(
    name: str,
    root: str | os.PathLike | None = None,
    *,
    transform: Any = None,
    pre_transform: Any = None,
    pre_filter: Any = None,
    download: bool = True,
) -> TUGraphDataset:
    """Load a TU data set from its raw text files, offline for the embedded ones.

    The same graphs as :class:`torch_geometric.datasets.TUDataset` (``use_node_attr=False``,
    ``use_edge_attr=True``), read by :func:`load_tu_graphs`; no processed (pickled) file is
    written or read.

    Parameters
    ----------
    name : str
        TU data set name (``"MUTAG"``, ``"PROTEINS"``, ...).
    root : path-like, optional
        Folder of downloaded raw files ``root/<name>/raw`` (default :func:`default_root`
        ``/ "tu"``); unused for the embedded data sets.
    transform : callable, optional
        Applied to every graph on access (as PyG's ``transform``).
    pre_transform : callable, optional
        Applied once to every graph when loading (as PyG's ``pre_transform``; not cached).
    pre_filter : callable, optional
        Keeps the graphs for which it returns ``True`` (as PyG's ``pre_filter``).
    download : bool, default=True
        Download a data set that is neither embedded nor found under ``root``.

    Returns
    -------
    TUGraphDataset
        The data set.
    """
    graphs = load_tu_graphs(name, root=root, download=download)
    if pre_filter is not None:
        graphs = [g for g in graphs if pre_filter(g)]
    if pre_transform is not None:
        graphs = [pre_transform(g) for g in graphs]
    if not graphs:
        raise ValueError(f"TU data set {name}: no graph left after pre_filter")
    return TUGraphDataset(graphs, name, transform)


def _expected_tu_files(name: str) -> str:
    return (
        f"{name}_A.txt, {name}_graph_indicator.txt and {name}_graph_labels.txt (optional: "
        f"{name}_node_labels.txt, {name}_node_attributes.txt, {name}_edge_labels.txt, "
        f"{name}_edge_attributes.txt)"
    )


def find_tu_raw(name: str, data_dir: str | os.PathLike) -> Path:
    """Folder holding ``<name>_A.txt``: ``data_dir/<name>/raw``, ``data_dir/<name>``, ``data_dir/raw`` or ``data_dir``.

    Parameters
    ----------
    name : str
        TU data set name.
    data_dir : path-like
        Where to look.

    Returns
    -------
    pathlib.Path
        The folder.
    """
    data_dir = Path(data_dir).expanduser()
    if not data_dir.is_dir():
        raise FileNotFoundError(f"--data-dir {data_dir} is not a folder (it should hold {name}/raw/{name}_A.txt ...)")
    for candidate in (data_dir / name / "raw", data_dir / name, data_dir / "raw", data_dir):
        if (candidate / f"{name}_A.txt").is_file():
            return candidate
    raise FileNotFoundError(
        f"TU data set {name} not found under {data_dir}: expected {_expected_tu_files(name)} in "
        f"{data_dir / name / 'raw'} (or directly in {data_dir}). Download {name}.zip from "
        f"{TU_SOURCE} and unpack it there."
    )


_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)", re.IGNORECASE)
_INT64 = (-(2**63), 2**63 - 1)
_MAX_ONE_HOT = 2**30
"""Most values of a one-hot label encoding (rows x categories) before a label file is refused."""


def _read_tu_table(path: Path, integer: bool, content: str) -> np.ndarray:
    """Parse a comma-separated TU text file; row ``i`` of the result is line ``i + 1``.

    Every line is read, the last one with or without a final newline; LF, CRLF and CR
    end lines, blanks around the commas and trailing blank lines are ignored. A blank
    line before the last row, a token that is not an (64-bit) integer / a number, a ragged
    row, an empty file and (float files) a value that is not finite in float32 raise one
    ``ValueError`` naming the file and the line.

    Parameters
    ----------
    path : pathlib.Path
        The file.
    integer : bool
        Integer (``int64``) or float (``float32``) values.
    content : str
        What the file should hold (for the error messages), e.g. ``"one graph id per vertex"``.

    Returns
    -------
    numpy.ndarray, shape = (rows, columns)
        ``int64`` or ``float32`` values.
    """
    try:
        with open(path, encoding="utf-8-sig") as handle:  # universal newlines: \n, \r\n, \r
            text = handle.read()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a text file ({error.reason} at byte {error.start})") from None
    body = text.rstrip()  # trailing blanks and blank lines
    if not body:
        raise ValueError(f"{path} is empty (line 1 holds no row): it should hold {content}")
    lines = body.count("\n") + 1
    dtype = np.int64 if integer else np.float64
    # NumPy's C parser first (fast); any doubt goes to the line-by-line parse, which names the
    # line. NumPy parses an integer token it cannot read (1.0, 1e3, beyond 64 bits) as a
    # float with a DeprecationWarning and wraps what overflows to -2**63: that warning is an
    # error here, and a -2**63 is checked line by line all the same.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            values = np.loadtxt(io.StringIO(body), delimiter=",", dtype=dtype, ndmin=2, comments=None)
    except (ValueError, OverflowError, Warning):
        values = None
    if (
        values is None
        or values.shape[0] != lines  # NumPy skips empty lines
        or (integer and bool((values == _INT64[0]).any()))
    ):
        values = _parse_tu_lines(path, body.split("\n"), integer)
    if integer:
        return values
    with np.errstate(over="ignore"):  # beyond float32: inf, refused below
        narrow = values.astype(np.float32)
    bad = ~np.isfinite(narrow)
    if bad.any():
        row, column = (int(i[0]) for i in np.nonzero(bad))
        value = values[row, column]
        why = "is not a finite number" if not np.isfinite(value) else "overflows float32 (|value| > 3.4e38)"
        raise ValueError(
            f"{path}, line {row + 1}, column {column + 1}: {float(value)!r} {why}; every value must be a "
            "finite number (fix or drop that row, and its graph in every file)"
        )
    return narrow


def _parse_tu_lines(path: Path, lines: list[str], integer: bool) -> np.ndarray:
    """Line-by-line parse of :func:`_read_tu_table`, raising at the first bad line."""
    pattern, what = (_INTEGER, "integers") if integer else (_NUMBER, "numbers")
    rows: list[list[int | float]] = []
    width = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise ValueError(
                f"{path}, line {number}: blank line; every line up to the last must hold one row "
                "(delete the blank line)"
            )
        fields = [field.strip() for field in line.split(",")]
        if not all(pattern.fullmatch(field) for field in fields):
            raise ValueError(f"{path}, line {number}: expected comma-separated {what}, got {line.strip()[:60]!r}")
        row = [int(field) if integer else float(field) for field in fields]
        if integer and not all(_INT64[0] <= value <= _INT64[1] for value in row):
            big = next(field for field, value in zip(fields, row) if not _INT64[0] <= value <= _INT64[1])
            raise ValueError(f"{path}, line {number}: {big[:40]} does not fit in a 64-bit integer")
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise ValueError(f"{path}, line {number}: {_plural(len(fields), 'column')}, the first line has {width}")
        rows.append(row)
    return np.array(rows, dtype=np.int64 if integer else np.float64).reshape(len(rows), width or 0)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _columns(path: Path, table: np.ndarray, expected: int, content: str) -> np.ndarray:
    if table.shape[1] != expected:
        raise ValueError(f"{path}, line 1: {_plural(table.shape[1], 'column')}, expected {expected} ({content})")
    return table


def _one_hot_labels(path: Path, labels: np.ndarray) -> Tensor:
    """TUDataset's encoding of integer labels: every column shifted to 0 and one-hot, concatenated."""
    parts = []
    for column in labels.T:
        low = int(column.min())
        width = int(column.max()) - low + 1
        if width * len(column) > _MAX_ONE_HOT:
            line = int(column.argmax()) + 1
            raise ValueError(
                f"{path}, line {line}: label {int(column.max())} (the smallest is {low}) makes a "
                f"one-hot encoding of {len(column)} x {width} values; labels must be category "
                "codes (relabel them 0..C-1)"
            )
        parts.append(F.one_hot(torch.from_numpy(column - low), width).float())
    return torch.cat(parts, dim=1)


def read_tu_graphs(name: str, raw_dir: str | os.PathLike, *, use_node_attr: bool = False) -> list[Data]:
    """Read a TU data set from its raw text files (no processed cache, nothing unpickled).

    Features follow :class:`torch_geometric.datasets.TUDataset` (``use_edge_attr=True``): ``x``
    is the one-hot node labels (``use_node_attr=False``, PyG's default) or the continuous node
    attributes followed by the one-hot node labels (``use_node_attr=True``); without node labels
    the node attributes; without either a constant column of ones (one feature per vertex, so liftings
    and models see every vertex). ``edge_attr`` is the edge attributes and one-hot edge labels
    (when present). ``y`` is the float ``graph_attributes`` when that file exists (as
    TUDataset: regression), else the class index (``graph_labels``, remapped to ``0..C-1``).
    As TUDataset, self-loops are removed and a repeated edge is kept once (its edge features
    summed); edges are sorted.

    The files are parsed by this package (not by PyG's ``read_tu_data``, which drops the last
    line of a file without a final newline): every line counts, with or without a final
    newline, with LF or CRLF line ends. A damaged file (a blank line before the
    last row, a token that is not a number, an id out of range or beyond 64 bits, a
    non-finite float, a row count that does not match) raises one ``ValueError`` naming the
    file and the line.

    Parameters
    ----------
    name : str
        Data set name (the files' prefix).
    raw_dir : path-like
        Folder of the raw files.
    use_node_attr : bool, default=False
        Keep the node attributes (``<name>_node_attributes.txt``) of a data set that also has
        node labels (e.g. PROTEINS, ENZYMES); as PyG's ``TUDataset(use_node_attr=...)``.

    Returns
    -------
    list of torch_geometric.data.Data
        One graph per line of ``<name>_graph_labels.txt`` (or ``_graph_attributes.txt``).
    """
    from torch_geometric.utils import coalesce, remove_self_loops

    raw_dir = Path(raw_dir)

    def file(part: str) -> Path:
        return raw_dir / f"{name}_{part}.txt"

    labels = [file("graph_attributes"), file("graph_labels")]  # TUDataset prefers the attributes
    missing = [file(part).name for part in ("A", "graph_indicator") if not file(part).is_file()]
    if missing or not any(p.is_file() for p in labels):
        raise FileNotFoundError(f"TU data set {name} in {raw_dir} is incomplete: expected {_expected_tu_files(name)}")
    indicator_file, edge_file = file("graph_indicator"), file("A")
    indicator = _columns(
        indicator_file, _read_tu_table(indicator_file, True, "one graph id per vertex"), 1, "one graph id per vertex"
    )[:, 0]
    edges = _columns(
        edge_file, _read_tu_table(edge_file, True, "one 'u, v' line per directed edge"), 2, "u, v"
    )
    label_file = next(p for p in labels if p.is_file())
    regression = label_file is labels[0]
    targets = _read_tu_table(label_file, not regression, "one line per graph")
    if not regression:
        targets = _columns(label_file, targets, 1, "one class label per graph")[:, 0]
    num_nodes, num_graphs = len(indicator), len(targets)
    tables = {}
    for part, rows, integer, per in (
        ("node_labels", num_nodes, True, indicator_file), ("node_attributes", num_nodes, False, indicator_file),
        ("edge_labels", len(edges), True, edge_file), ("edge_attributes", len(edges), False, edge_file),
    ):
        path = file(part)
        if path.is_file():
            tables[part] = _read_tu_table(path, integer, f"{rows} rows, one per line of {per.name}")
            if len(tables[part]) != rows:
                raise ValueError(
                    f"{path} has {len(tables[part])} rows (its last row is line {len(tables[part])}), "
                    f"expected {rows} (one per line of {per.name})"
                )
    # graph ids: sorted, 1..num_graphs, every graph up to the last one present
    for bad, problem in (
        (indicator < 1, "graph ids start at 1"),
        (indicator > num_graphs, f"graph ids must be at most {num_graphs} (the lines of {label_file.name})"),
        (np.concatenate([[False], np.diff(indicator) < 0]), "graph ids must be sorted (all vertices of a graph together, in graph order)"),
    ):
        if bad.any():
            line = int(bad.argmax())
            raise ValueError(f"{indicator_file}, line {line + 1}: graph id {int(indicator[line])}; {problem}")
    if int(indicator[-1]) != num_graphs:
        raise ValueError(
            f"{indicator_file}, line {num_nodes}: the last graph id is {int(indicator[-1])}, but "
            f"{label_file.name} has {num_graphs} lines (one per graph); "
            + (f"graph {num_graphs}" if int(indicator[-1]) + 1 == num_graphs else f"graphs {int(indicator[-1]) + 1}..{num_graphs}")
            + " would have no vertex"
        )
    outside = (edges < 1) | (edges > num_nodes)
    if outside.any():
        line = int(outside.any(axis=1).argmax())
        raise ValueError(
            f"{edge_file}: vertex ids must be in 1..{num_nodes} (one per line of "
            f"{indicator_file.name}); line {line + 1} holds {int(edges[line, 0])}, {int(edges[line, 1])}"
        )
    owner = indicator[edges - 1]
    across = owner[:, 0] != owner[:, 1]
    if across.any():
        line = int(across.argmax())
        raise ValueError(
            f"{edge_file}, line {line + 1}: the edge {int(edges[line, 0])}, {int(edges[line, 1])} joins "
            f"vertices of graphs {int(owner[line, 0])} and {int(owner[line, 1])} (an edge lies in one graph)"
        )

    node_labels = _one_hot_labels(file("node_labels"), tables["node_labels"]) if "node_labels" in tables else None
    node_attributes = torch.from_numpy(tables["node_attributes"]) if "node_attributes" in tables else None
    if use_node_attr and node_labels is not None and node_attributes is not None:
        x = torch.cat([node_attributes, node_labels], dim=1)  # as TUDataset(use_node_attr=True)
    else:
        x = node_labels if node_labels is not None else node_attributes  # use_node_attr=False
    edge_parts = [torch.from_numpy(tables["edge_attributes"])] if "edge_attributes" in tables else []
    if "edge_labels" in tables:
        edge_parts.append(_one_hot_labels(file("edge_labels"), tables["edge_labels"]))
    edge_attr = torch.cat(edge_parts, dim=1) if edge_parts else None
    if regression:
        y = torch.from_numpy(targets)
        y = y[:, 0] if y.size(1) == 1 else y
    else:
        y = torch.unique(torch.from_numpy(targets), sorted=True, return_inverse=True)[1]
    edge_index = torch.from_numpy(edges.T - 1).contiguous()
    edge_index, edge_attr = remove_self_loops(edge_index, edge_attr)
    edge_index, edge_attr = coalesce(edge_index, edge_attr, num_nodes)  # sorted; repeats summed

    counts = np.bincount(indicator - 1, minlength=num_graphs)
    node_start = np.concatenate([[0], np.cumsum(counts)])
    edge_start = np.searchsorted(edge_index[0].numpy(), node_start).tolist()  # edges sorted by source
    node_start = node_start.tolist()
    graphs = []
    for g in range(num_graphs):
        lo, hi = node_start[g], node_start[g + 1]
        e_lo, e_hi = edge_start[g], edge_start[g + 1]
        graph = Data(
            x=x[lo:hi] if x is not None else torch.ones(hi - lo, 1),
            edge_index=edge_index[:, e_lo:e_hi] - lo,
            y=y[g : g + 1],
            num_nodes=hi - lo,
        )
        if edge_attr is not None:
            graph.edge_attr = edge_attr[e_lo:e_hi]
        graphs.append(graph)
    return graphs


def load_tu_graphs(
    name: str,
    data_dir: str | os.PathLike | None = None,
    root: str | os.PathLike | None = None,
    download: bool = False,
    *,
    use_node_attr: bool = False,
) -> list[Data]:
    """Graphs of a TU data set: bundled (MUTAG), from ``data_dir``, or downloaded into ``root``.

    Parameters
    ----------
    name : str
        TU data set name (``"MUTAG"``, ``"ENZYMES"``, ``"IMDB-BINARY"``, ...).
    data_dir : path-like, optional
        Folder holding the raw files (see :func:`find_tu_raw`); not needed for MUTAG.
    root : path-like, optional
        Cache folder of downloaded raw files (default :func:`default_root` ``/ "tu"``);
        ``root/<name>/raw`` is also read when it holds the files.
    download : bool, default=False
        Download ``<name>.zip`` from the TU site into ``root/<name>/raw`` when no files are
        found (needs internet).
    use_node_attr : bool, default=False
        Keep the continuous node attributes next to the node labels (:func:`read_tu_graphs`).

    Returns
    -------
    list of torch_geometric.data.Data
        The graphs (:func:`read_tu_graphs`).
    """
    if name in EMBEDDED_DATASETS and data_dir is None:
        return read_tu_graphs(name, embedded_raw_dir(name), use_node_attr=use_node_attr)
    if data_dir is not None:
        return read_tu_graphs(name, find_tu_raw(name, data_dir), use_node_attr=use_node_attr)
    root = Path(root).expanduser() if root is not None else default_root() / "tu"
    raw = root / name / "raw"
    if (raw / f"{name}_A.txt").is_file():
        return read_tu_graphs(name, raw, use_node_attr=use_node_attr)
    if not download:
        raise FileNotFoundError(
            f"TU data set {name} is not bundled and no files were given: pass --data-dir DIR "
            f"(config: dataset.data_dir) with {_expected_tu_files(name)} in DIR/{name}/raw or DIR "
            f"(download {name}.zip from {TU_SOURCE})"
        )
    from torch_geometric.data import download_url, extract_zip

    try:
        # download and extract into a fresh private folder, then copy the files into place
        # through the safe write path (no link planted under root is followed)
        with tempfile.TemporaryDirectory(prefix="tma-download-") as staging:
            archive = download_url(f"{_TU_URL}/{name}.zip", staging, log=False)
            extract_zip(archive, staging, log=False)
            for file in sorted((Path(staging) / name).iterdir()):
                if file.is_file():
                    write_bytes(raw / file.name, file.read_bytes(), root=root)
    except OSError as error:  # URLError, HTTPError (offline, unknown name), ...
        raise FileNotFoundError(
            f"TU data set {name} could not be downloaded into {raw} ({type(error).__name__}: "
            f"{error}); pass --data-dir DIR with {_expected_tu_files(name)} in DIR/{name}/raw"
        ) from error
    return read_tu_graphs(name, raw, use_node_attr=use_node_attr)


# ----------------------------------------------------------------------------------------------
# the family: dataset.loader=tu
# ----------------------------------------------------------------------------------------------
def _read(cfg: Mapping[str, Any], cache_dir: Path) -> list[Data]:
    use_node_attr = cfg.get("use_node_attr", False)
    if not isinstance(use_node_attr, bool):
        raise ValueError(f"dataset.use_node_attr must be true or false, got {use_node_attr!r}")
    return load_tu_graphs(
        str(cfg["name"]), data_dir=cfg.get("data_dir"), root=cache_dir / "tu",
        download=bool(cfg.get("download", False)), use_node_attr=use_node_attr,
    )


def _raw_dir(name: str, data_dir: Any, root: Path) -> Path | None:
    """Folder :func:`load_tu_graphs` reads, or ``None`` (not there yet)."""
    if name in EMBEDDED_DATASETS and data_dir is None:
        return embedded_raw_dir(name)
    if data_dir is not None:
        try:
            return find_tu_raw(name, data_dir)
        except FileNotFoundError:
            return None  # the reader raises its own error
    raw = root / name / "raw"
    return raw if (raw / f"{name}_A.txt").is_file() else None


def _files(cfg: Mapping[str, Any], cache_dir: Path) -> list[Path] | None:
    name = str(cfg.get("name"))
    raw = _raw_dir(name, cfg.get("data_dir"), cache_dir / "tu")
    if raw is None:
        return None
    return [p for p in raw.iterdir() if p.name.startswith(f"{name}_") and p.name.endswith(".txt") and p.is_file()]


def _key_fields(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"use_node_attr": True} if cfg.get("use_node_attr") else {}  # attributes kept next to the labels


TU = register_family(DatasetFamily("tu", read=_read, files=_files, key_fields=_key_fields))
"""TU data sets by name (``dataset.loader=tu``): bundled, from ``data_dir`` or downloaded; random splits."""
