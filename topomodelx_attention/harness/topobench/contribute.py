"""Write into a TopoBench checkout the files of a pull request that adds one of our models.

TopoBench takes a model as a pull request with, in its own tree and naming,

* the backbone ``topobench/nn/backbones/{domain}/{model}.py`` (auto-discovered),
* its wrapper ``topobench/nn/wrappers/{domain}/{model}_wrapper.py`` (auto-discovered),
* the model code they import,
* the config(s) ``configs/model/{domain}/{config}.yaml`` (feature_encoder, backbone,
  backbone_wrapper, readout), one per significant variant,
* unit tests ``test/nn/backbones/{domain}/test_{model}.py`` (its ``NNModuleAutoTest`` harness)
  and ``test/nn/wrappers/{domain}/test_{model}_wrapper.py``,
* a line in ``test/pipeline/test_pipeline.py`` (``MODELS``) and a row in its README's model
  table.

The backbone and wrapper modules are thin: they subclass the backbones of
``topobench.nn.topomodelx_attention``, the copy of this package's modules they need
(:mod:`~topomodelx_attention.harness.topobench.vendor`), and follow TopoBench's backbone
contract (tensors in, a tuple of tensors out). The pull request therefore installs with
TopoBench's own steps and depends on no package beyond TopoBench's (``--requirement`` adds a
dependency line to its ``pyproject.toml`` when one is wanted all the same). The other files are
package data: ``harness/topobench/templates/<path in TopoBench>.tmpl`` and
``configs/topobench/model/<domain>/<config>.yaml``; :func:`contribute` copies them and makes the
edits, refusing to overwrite a different file unless ``force``. The writing is all or
nothing (:func:`topomodelx_attention.files.replace_all`): everything is checked and every new
content is written to a temporary file beside its destination before the first file is replaced,
nothing is written through a link planted in the checkout, and on any failure every file is put
back byte for byte.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import topomodelx_attention
from topomodelx_attention.files import RestoreError, replace_all
from topomodelx_attention.harness.topobench.vendor import vendored_files

__all__ = ["CONTRIBUTIONS", "Change", "Contribution", "check_requirement", "contribute", "plan"]

PACKAGE = Path(topomodelx_attention.__file__).resolve().parent
TEMPLATES = PACKAGE / "harness" / "topobench" / "templates"
CONFIGS = PACKAGE / "configs" / "topobench" / "model"
PIPELINE_TEST = "test/pipeline/test_pipeline.py"
#: What makes a folder a TopoBench checkout (checked before anything is written).
CHECKOUT_MARKERS = ("topobench/nn/backbones", "topobench/nn/wrappers", "configs/model", PIPELINE_TEST)


@dataclass(frozen=True)
class Contribution:
    """One model's TopoBench pull request.

    Attributes
    ----------
    model : str
        Module name in TopoBench (``topobench/nn/backbones/{domain}/{model}.py``).
    domain : str
        TopoBench model domain (``cell``, ``simplicial``).
    backbone : str
        Backbone class name (TopoBench's config ``_target_``).
    wrapper : str
        Wrapper class name (``topobench.nn.wrappers.{wrapper}``).
    configs : tuple of str
        Config names in ``configs/model/{domain}/``; the first is the one the pipeline test runs.
    readme_row : str
        Row of TopoBench's README model table (section ``readme_section``).
    readme_section : str
        Heading of that table.
    """

    model: str
    domain: str
    backbone: str
    wrapper: str
    configs: tuple[str, ...]
    readme_row: str
    readme_section: str

    def files(self) -> dict[str, Path]:
        """Return the files to write: TopoBench-relative path → source in this package."""
        paths = [
            f"topobench/nn/backbones/{self.domain}/{self.model}.py",
            f"topobench/nn/wrappers/{self.domain}/{self.model}_wrapper.py",
            f"test/nn/backbones/{self.domain}/test_{self.model}.py",
            f"test/nn/wrappers/{self.domain}/test_{self.model}_wrapper.py",
        ]
        files = {path: TEMPLATES / f"{path}.tmpl" for path in paths}
        for name in self.configs:
            files[f"configs/model/{self.domain}/{name}.yaml"] = CONFIGS / self.domain / f"{name}.yaml"
        return files

    @property
    def pipeline_model(self) -> str:
        """The ``MODELS`` entry of TopoBench's pipeline test (``{domain}/{config}``)."""
        return f"{self.domain}/{self.configs[0]}"


CONTRIBUTIONS: dict[str, Contribution] = {
    "cellular_transformer": Contribution(
        "cellular_transformer", "cell", "CellularTransformer", "CellularTransformerWrapper",
        ("cellular_transformer", "cellular_transformer_general", "cellular_transformer_rrwp"),
        "| CellularTransformer | [Attending to Topological Spaces: The Cellular Transformer]"
        "(https://arxiv.org/abs/2405.14094) |",
        "### Cellular Complexes",
    ),
    "tokengt": Contribution(
        "tokengt", "cell", "TokenGT", "TokenGTWrapper", ("tokengt", "tokengt_ordered"),
        "| TokenGT | Order-k TokenGT from [Pure Transformers are Powerful Graph Learners]"
        "(https://arxiv.org/abs/2207.02505), every cell a token |",
        "### Cellular Complexes",
    ),
    "n_simplicial": Contribution(
        "n_simplicial", "simplicial", "NSimplicialTransformer", "NSimplicialWrapper",
        ("n_simplicial", "n_simplicial_counting"),
        "| NSimplicialTransformer | N-simplicial attention from *How Smoothing is N-simplicial "
        "Attention?* (Dussolle and Liò) |",
        "### Simplicial Complexes",
    ),
}
"""The models a TopoBench pull request can add (``--model`` of the command)."""


@dataclass(frozen=True)
class Change:
    """One file of the pull request and what :func:`contribute` does (or did) to it.

    Attributes
    ----------
    path : str
        Path relative to the TopoBench checkout.
    action : str
        ``"create"``, ``"update"`` (an edit of an existing file), ``"unchanged"``,
        ``"overwrite"`` (with ``force``) or ``"manual"`` (could not be edited: ``note`` says
        what to do by hand).
    content : str or None
        The new text (``None`` for ``"unchanged"`` and ``"manual"``).
    note : str
        Why, for ``"manual"``.
    """

    path: str
    action: str
    content: str | None = None
    note: str = ""


def check_checkout(topobench: Path) -> Path:
    """Return the resolved checkout path, or raise naming what is missing.

    Parameters
    ----------
    topobench : pathlib.Path
        Folder of a TopoBench checkout.

    Returns
    -------
    pathlib.Path
        The resolved folder.

    Raises
    ------
    ValueError
        When the folder lacks TopoBench's layout.
    """
    topobench = Path(topobench).expanduser().resolve()
    missing = [marker for marker in CHECKOUT_MARKERS if not (topobench / marker).exists()]
    if missing:
        raise ValueError(
            f"{topobench} is not a TopoBench checkout: it has no {', '.join(missing)} "
            "(clone https://github.com/geometric-intelligence/TopoBench and give its folder to --topobench)"
        )
    return topobench


def _pipeline_text(text: str, entries: list[str], path: Path) -> str | None:
    """``test_pipeline.py`` with ``entries`` added to ``MODELS`` (``None``: all present)."""
    match = re.search(r"^(MODELS\s*=\s*)(\[[^\]]*\])", text, flags=re.M)
    if match is None:
        raise ValueError(f"{path}: found no `MODELS = [...]` list to add the pipeline-test entries {entries} to")
    try:
        models = ast.literal_eval(match.group(2))
    except (ValueError, SyntaxError) as error:
        raise ValueError(f"{path}: MODELS is not a literal list of strings ({error})") from None
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ValueError(f"{path}: MODELS is not a literal list of strings")
    new = [entry for entry in entries if entry not in models]
    if not new:
        return None
    rendered = "[" + ", ".join(f'"{m}"' for m in [*models, *new]) + "]"
    return text[: match.start(2)] + rendered + text[match.end(2):]


def check_requirement(requirement: object) -> str:
    """Return ``requirement`` stripped if it is one PEP 508 requirement on one line, else raise.

    Parameters
    ----------
    requirement : str
        A dependency line for TopoBench's ``pyproject.toml``, e.g.
        ``"topomodelx-attention>=0.1.0"`` or ``"topomodelx-attention @ git+https://..."``.

    Returns
    -------
    str
        The requirement without surrounding spaces.

    Raises
    ------
    TypeError
        When it is not a string.
    ValueError
        When it is empty, spans several lines, holds control characters or is not a PEP 508
        requirement (``packaging.requirements.Requirement``).
    """
    if not isinstance(requirement, str):
        raise TypeError(f"--requirement must be a string, got {type(requirement).__name__}")
    value = requirement.strip()
    example = "e.g. 'topomodelx-attention>=0.1.0'"
    if not value:
        raise ValueError(f"--requirement is empty: give one PEP 508 requirement ({example})")
    if not value.isprintable():
        raise ValueError(
            f"--requirement {requirement!r} holds a line break or another control character: "
            f"give one PEP 508 requirement on one line ({example})"
        )
    try:
        Requirement(value)
    except (ValueError, SyntaxError) as error:  # packaging raises SyntaxError for some markers
        reason = (str(error).splitlines() or ["invalid"])[0]
        raise ValueError(
            f"--requirement {requirement!r} is not a PEP 508 requirement ({reason}; {example})"
        ) from None
    return value


def _requirement_name(requirement: str) -> str:
    try:
        return canonicalize_name(Requirement(requirement.strip()).name)
    except (ValueError, SyntaxError):
        return re.split(r"[\s<>=!~;\[@(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


#: A TOML string in a dependency list: basic ("...", with escapes) or literal ('...').
_TOML_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'([^\'\n]*)\'')


def _toml_string(value: str) -> str:
    """``value`` as a TOML basic string (one line: the caller has refused control characters)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pyproject_text(text: str, requirement: str, path: Path) -> str | None:
    """TopoBench's ``pyproject.toml`` with ``requirement`` in ``dependencies`` (``None``: present)."""
    requirement = check_requirement(requirement)
    match = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, flags=re.M | re.S)
    if match is None:
        raise ValueError(f"{path}: found no `dependencies = [` ... `]` block to add {requirement!r} to")
    listed = [
        found.group(2) if found.group(1) is None else re.sub(r"\\(.)", r"\1", found.group(1))
        for found in _TOML_STRING.finditer(match.group(1))
    ]
    name = _requirement_name(requirement)
    if any(_requirement_name(item) == name for item in listed):
        return None
    body = match.group(1)
    if body.strip() and not body.rstrip().endswith(","):
        body = body.rstrip() + ",\n"
    body += f"    {_toml_string(requirement)},\n"
    return text[: match.start(1)] + body + text[match.end(1):]


def _readme_text(text: str, row: str, section: str) -> str | None:
    """README with ``row`` appended to the table under ``section`` (``None``: no such table)."""
    lines = text.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == section)
    except StopIteration:
        return None
    index = start + 1
    while index < len(lines) and not lines[index].startswith("|"):
        index += 1
    if index == len(lines):
        return None
    while index < len(lines) and lines[index].startswith("|"):
        index += 1
    last = lines[index - 1]
    if not last.endswith("\n"):
        lines[index - 1] = last + "\n"
    lines.insert(index, row + "\n")
    return "".join(lines)


def _read(path: Path) -> str | None:
    """Return the text of ``path`` (``None`` when nothing is there), refusing a folder or a FIFO.

    A link is read where it points (reading changes nothing): the file that replaces it is
    written in the checkout, never through the link.
    """
    if not path.exists():
        return None
    if path.is_dir():
        raise ValueError(f"{path} is a folder where the pull request puts a file; move it away")
    if not path.is_file():
        raise ValueError(f"{path} is not a regular file (a pipe, socket or device); move it away")
    return path.read_text()


def _file_change(topobench: Path, relative: str, content: str, force: bool) -> Change:
    """Return what writing ``content`` at ``relative`` does: create, unchanged, overwrite (or raise)."""
    target = topobench / relative
    old = _read(target)
    if old is None:
        return Change(relative, "create", content)
    if old == content:
        return Change(relative, "unchanged")
    if force:
        return Change(relative, "overwrite", content)
    raise ValueError(f"{target} exists with other content; move it away or pass --force to overwrite it")


def _edit(path: str, old: str | None, new: str | None) -> Change:
    if new is None:
        return Change(path, "unchanged")
    return Change(path, "update" if old is not None else "create", new)


def plan(
    topobench: Path,
    models: list[str],
    *,
    requirement: str | None = None,
    force: bool = False,
) -> list[Change]:
    """Return what :func:`contribute` would write into the checkout (nothing is written).

    Parameters
    ----------
    topobench : pathlib.Path
        TopoBench checkout.
    models : list of str
        Keys of :data:`CONTRIBUTIONS`.
    requirement : str, optional
        A dependency line to add to TopoBench's ``pyproject.toml``: one PEP 508 requirement on
        one line (:func:`check_requirement`). Default: none (the pull request carries the
        model code, :func:`~topomodelx_attention.harness.topobench.vendor.vendored_files`).
    force : bool, default=False
        Overwrite files that exist with other content (else ``ValueError``).

    Returns
    -------
    list of Change
        One entry per file.

    Raises
    ------
    ValueError
        For an unknown model, a ``requirement`` that is not one PEP 508 requirement on one
        line, a folder that is not a TopoBench checkout, a file that exists with other content
        (without ``force``), a folder or another non-regular file where a file goes, or a
        ``test_pipeline.py`` / ``pyproject.toml`` that cannot be edited (the message names the
        file).
    TypeError
        For a ``requirement`` that is not a string.
    """
    unknown = [m for m in models if m not in CONTRIBUTIONS]
    if unknown or not models:
        raise ValueError(
            f"unknown --model {unknown or models}: choose from {sorted(CONTRIBUTIONS)} (or 'all')"
        )
    if requirement is not None:
        requirement = check_requirement(requirement)
    topobench = check_checkout(topobench)
    chosen = [CONTRIBUTIONS[m] for m in dict.fromkeys(models)]
    contents: dict[str, str] = {}
    for contribution in chosen:
        for relative, source in contribution.files().items():
            if not source.is_file():
                raise ValueError(f"the package lacks its template {source} (reinstall topomodelx-attention)")
            contents[relative] = source.read_text()
    contents.update(vendored_files())
    changes = [_file_change(topobench, relative, content, force) for relative, content in contents.items()]
    pipeline = topobench / PIPELINE_TEST
    old = _read(pipeline)
    if old is None:
        raise ValueError(f"{pipeline} is missing; TopoBench's pipeline test must be there to add the models to")
    changes.append(_edit(PIPELINE_TEST, old, _pipeline_text(old, [c.pipeline_model for c in chosen], pipeline)))
    if requirement is not None:
        pyproject = topobench / "pyproject.toml"
        old = _read(pyproject)
        if old is None:
            changes.append(Change("pyproject.toml", "manual", note=f"add the dependency {requirement!r}"))
        else:
            changes.append(_edit("pyproject.toml", old, _pyproject_text(old, requirement, pyproject)))
    original = _read(topobench / "README.md")
    text = original
    for contribution in chosen:
        row, section = contribution.readme_row, contribution.readme_section
        edited = None if text is None or row in text else _readme_text(text, row, section)
        if edited is not None:
            text = edited
        elif text is None or row not in text:
            changes.append(Change("README.md", "manual", note=f"add the row {row} to the table {section!r}"))
    if text is not None:
        changes.append(_edit("README.md", original, None if text == original else text))
    return changes


def contribute(
    topobench: Path,
    models: list[str],
    *,
    requirement: str | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> list[Change]:
    """Write the pull-request files of ``models`` into a TopoBench checkout: all of them or none.

    Everything is checked (:func:`plan`, then every destination folder reached from the
    checkout without following links), every new content is written to a temporary file beside
    its destination, and only then are the files replaced one after another
    (:func:`topomodelx_attention.files.replace_all`). A link planted in the checkout is never
    written through: one at a folder is refused, one at a file is replaced by the file. On any
    failure (a check, a full disk, a file-size limit, Ctrl+C) every original is put back byte
    for byte, what was created is removed, and the error says that nothing was changed.

    Parameters
    ----------
    topobench, models, requirement, force
        As for :func:`plan`.
    dry_run : bool, default=False
        Only return the plan.

    Returns
    -------
    list of Change
        What was (or, with ``dry_run``, would be) done to each file.

    Raises
    ------
    ValueError, TypeError
        As for :func:`plan`, and for a path of the plan outside the checkout.
    OSError
        When a destination cannot be written (a link or file in place of a folder:
        :class:`~topomodelx_attention.files.LinkRefusedError`; a full disk; a file-size limit):
        nothing in the checkout was changed.
    topomodelx_attention.files.RestoreError
        When writing failed and not every original could be put back (the message names the
        files and where their originals are kept).
    """
    try:
        changes = plan(topobench, models, requirement=requirement, force=force)
        if not dry_run:
            root = check_checkout(topobench)
            replace_all(
                {root / c.path: c.content.encode("utf-8") for c in changes if c.content is not None},
                root=root,
            )
    except RestoreError:
        raise
    except (ValueError, TypeError, OSError) as error:
        raise _nothing_changed(error) from error
    return changes


def _nothing_changed(error: Exception) -> Exception:
    """``error`` (same type) with its message ending in "nothing in the checkout was changed"."""
    if isinstance(error, OSError) and error.filename is not None:
        text = f"{error.strerror or error}: {error.filename}"
    else:
        text = str(error) or type(error).__name__
    message = f"{text}; nothing in the checkout was changed"
    try:
        new = type(error)(message)
    except Exception:  # an exception type that takes other arguments
        new = (OSError if isinstance(error, OSError) else ValueError)(message)
    if isinstance(error, OSError):
        new.errno = error.errno
    return new
