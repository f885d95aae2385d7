"""Graph data sets: the embedded MUTAG copy and any TU data set by name.

MUTAG (188 molecules, TU raw text files, 110 KB) ships inside the package so that the command
line and the tests run offline. :func:`load_tu_graphs` reads any TU data set (``ENZYMES``,
``NCI1``, ``IMDB-BINARY``, ...) straight from its raw text files, ``<NAME>_A.txt``,
``<NAME>_graph_indicator.txt``, ``<NAME>_graph_labels.txt`` (or ``_graph_attributes.txt``) and
the optional ``_node_labels``, ``_node_attributes``, ``_edge_labels``, ``_edge_attributes``
files, with PyG's parser; it never reads a processed (pickled) file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data, InMemoryDataset

__all__ = [
    "EMBEDDED_DATASETS",
    "TU_SOURCE",
    "TUGraphDataset",
    "default_root",
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

_EMBEDDED = Path(__file__).resolve().parent / "embedded"


def default_root() -> Path:
    """Cache folder for data sets: ``$TOPOMODELX_ATTENTION_DATA`` or ``~/.cache/topomodelx_attention``."""
    env = os.environ.get("TOPOMODELX_ATTENTION_DATA")
    return Path(env) if env else Path.home() / ".cache" / "topomodelx_attention"


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


def _check_tu_table(path: Path, integer: bool) -> int:
    """Parse a TU text file once to name the first bad line; returns the number of rows."""
    kind = int if integer else float
    count, width = 0, None
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                fields = [f.strip() for f in line.split(",")]
                try:
                    [kind(f) for f in fields]
                except ValueError:
                    what = "integers" if integer else "numbers"
                    raise ValueError(f"{path}, line {number}: expected comma-separated {what}, got {line.strip()[:60]!r}") from None
                if width is None:
                    width = len(fields)
                elif len(fields) != width:
                    raise ValueError(f"{path}, line {number}: {len(fields)} columns, the first line has {width}")
                count += 1
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a text file ({error.reason} at byte {error.start})") from None
    return count


def read_tu_graphs(name: str, raw_dir: str | os.PathLike, *, use_node_attr: bool = False) -> list[Data]:
    """Read a TU data set from its raw text files (no processed cache, nothing unpickled).

    Features follow :class:`torch_geometric.datasets.TUDataset` (``use_edge_attr=True``): ``x``
    is the one-hot node labels (``use_node_attr=False``, PyG's default) or the continuous node
    attributes followed by the one-hot node labels (``use_node_attr=True``); without node labels
    the node attributes; without either a constant column of ones (one feature per vertex, so
    liftings and models see every vertex). ``edge_attr`` is the edge attributes and one-hot edge
    labels (when present). ``y`` is the class index (``graph_labels``, remapped to ``0..C-1``)
    or the float ``graph_attributes``.

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
        One graph per line of ``<name>_graph_labels.txt``.
    """
    from torch_geometric.io import read_tu_data

    raw_dir = Path(raw_dir)
    required = [raw_dir / f"{name}_{part}.txt" for part in ("A", "graph_indicator")]
    labels = [raw_dir / f"{name}_graph_{part}.txt" for part in ("labels", "attributes")]
    missing = [p.name for p in required if not p.is_file()]
    if missing or not any(p.is_file() for p in labels):
        raise FileNotFoundError(f"TU data set {name} in {raw_dir} is incomplete: expected {_expected_tu_files(name)}")
    # validate every file (first bad line named) and the counts before PyG's parser runs
    num_nodes = _check_tu_table(raw_dir / f"{name}_graph_indicator.txt", integer=True)
    num_edges = _check_tu_table(raw_dir / f"{name}_A.txt", integer=True)
    label_file = next(p for p in labels if p.is_file())
    num_graphs = _check_tu_table(label_file, integer=label_file is labels[0])
    for part, rows, integer in (
        ("node_labels", num_nodes, True), ("node_attributes", num_nodes, False),
        ("edge_labels", num_edges, True), ("edge_attributes", num_edges, False),
    ):
        path = raw_dir / f"{name}_{part}.txt"
        if path.is_file() and _check_tu_table(path, integer) != rows:
            raise ValueError(f"{path} has {_check_tu_table(path, integer)} rows, expected {rows} (one per line of {name}_{'graph_indicator' if 'node' in part else 'A'}.txt)")
    if num_nodes == 0 or num_graphs == 0:
        raise ValueError(f"TU data set {name} in {raw_dir} has no graphs")
    indicator = torch.as_tensor(
        [int(v) for v in (raw_dir / f"{name}_graph_indicator.txt").read_text().split()], dtype=torch.long
    )
    if int(indicator.min()) != 1 or int(indicator.max()) != num_graphs or bool((indicator.diff() < 0).any()):
        raise ValueError(
            f"{raw_dir / f'{name}_graph_indicator.txt'}: graph ids must be sorted and run from 1 to "
            f"{num_graphs} (the lines of {label_file.name}), got {int(indicator.min())}..{int(indicator.max())}"
        )
    if num_edges:
        pairs = torch.as_tensor(
            [int(v) for v in (raw_dir / f"{name}_A.txt").read_text().replace(",", " ").split()], dtype=torch.long
        ).view(-1, 2) - 1
        if int(pairs.min()) < 0 or int(pairs.max()) >= num_nodes:
            raise ValueError(f"{raw_dir / f'{name}_A.txt'}: vertex ids must be in 1..{num_nodes}")
        if bool((indicator[pairs[:, 0]] != indicator[pairs[:, 1]]).any()):
            raise ValueError(f"{raw_dir / f'{name}_A.txt'}: an edge joins vertices of two different graphs")
    data, slices, sizes = read_tu_data(str(raw_dir), name)
    n_attr = sizes["num_node_attributes"]
    counts = torch.bincount(indicator - 1, minlength=num_graphs)
    node_start = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    graphs = []
    for g in range(num_graphs):
        lo, hi = int(node_start[g]), int(node_start[g + 1])
        e_lo, e_hi = int(slices["edge_index"][g]), int(slices["edge_index"][g + 1])
        if data.x is not None and data.x.size(1) > n_attr and not use_node_attr:
            x = data.x[lo:hi, n_attr:]  # one-hot node labels (TUDataset's use_node_attr=False)
        elif data.x is not None:
            x = data.x[lo:hi]  # node attributes (then the one-hot labels, with use_node_attr)
        else:
            x = torch.ones(hi - lo, 1)
        graph = Data(x=x, edge_index=data.edge_index[:, e_lo:e_hi], y=data.y[g : g + 1], num_nodes=hi - lo)
        if data.edge_attr is not None:
            graph.edge_attr = data.edge_attr[e_lo:e_hi]
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
        archive = download_url(f"{_TU_URL}/{name}.zip", str(root / name), log=False)
        extract_zip(archive, str(root / name), log=False)
        os.unlink(archive)
        if raw.exists():
            shutil.rmtree(raw)
        os.rename(root / name / name, raw)
    except OSError as error:  # URLError, HTTPError (offline, unknown name), ...
        raise FileNotFoundError(
            f"TU data set {name} could not be downloaded into {raw} ({type(error).__name__}: "
            f"{error}); pass --data-dir DIR with {_expected_tu_files(name)} in DIR/{name}/raw"
        ) from error
    return read_tu_graphs(name, raw, use_node_attr=use_node_attr)
