"""The spec as run: written into the experiment folder once, and the one reader that reads it back.

``hpsearch_spec.yaml`` holds the spec with every default filled in. Every path that reads it back
goes through :func:`read_spec_as_run`, which reads it as a folder someone sent may hold it (its size
counted while reading, at most :data:`MAX_FOLDER_SPEC_BYTES`; UTF-8 checked; aliases measured before
they are expanded; an integer too long for Python refused) and refuses a damaged one in one line:
:func:`read_spec` gives its data (:func:`hpsearch.load_results`), :func:`experiment_spec` a
:class:`~hpsearch.spec.Spec` (``resume``, ``report``, the budget's resources).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpsearch.errors import ExperimentNotFoundError, ResultsError
from hpsearch.experiment.folder_format import check_format
from hpsearch.experiment.folder_io import PathLike
from hpsearch.experiment.layout import SPEC_FILE, is_experiment

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.spec import Spec

__all__ = ["MAX_FOLDER_SPEC_BYTES", "SpecAsRun", "write_spec", "read_spec_as_run", "read_spec", "experiment_spec"]

#: The largest spec as run read back from a folder. A spec is a few kB; a larger file is damaged (or crafted),
#: and is refused before it is parsed, so that reading it stays well under a second.
MAX_FOLDER_SPEC_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SpecAsRun:
    """A folder's spec as run, read back by :func:`read_spec_as_run`: its file, and what it holds.

    Attributes:
        path: The file, ``<experiment_dir>/hpsearch_spec.yaml``.
        data: The spec as written (every default filled in); ``None`` when the file holds no mapping of
            keys (empty, or cut short to nothing).
    """

    path: Path
    data: dict[str, Any] | None

    def to_spec(self, *, overrides: Sequence[str] = (), check_trainable: bool = True) -> Spec:
        """The spec as a validated :class:`~hpsearch.spec.Spec`, placed where its folder is now (it may have moved).

        ``overrides`` (``"budget.max_wall_time=4h"``) are applied first, as ``--set`` does.

        Raises:
            ResultsError: The file holds no mapping of keys.
            SpecError: An override makes the spec invalid.
        """
        # lazy: a cycle at import: spec/warm_start imports experiment.layout, whose package __init__ loads this module
        from hpsearch.spec import load_spec

        if self.data is None:
            raise ResultsError(f"{self.path}: the spec as run is damaged: it holds no keys")
        folder = self.path.parent
        placed = [f"name={folder.name}", f"storage_path={folder.parent}"]
        # load_spec reads the file again, with the spec's own reader, so that the Spec names its file (its source,
        # and the folder its relative paths resolve against); read_spec_as_run has checked it first
        return load_spec(self.path, overrides=[*overrides, *placed], check_trainable=check_trainable)


def write_spec(experiment_dir: PathLike, spec: Mapping[str, Any]) -> None:
    """Write the spec as run (a dict with every default filled in), every URL's password as ``***``.

    A password in a tracker URL is used by the search that was given it and written nowhere; a
    ``resume`` reads it from the environment (:mod:`hpsearch.spec.credentials`).
    """
    # lazy: a cycle at import (as in SpecAsRun.to_spec): hpsearch.spec's package imports this module's package
    from hpsearch.spec.credentials import redact_tree

    text = yaml.safe_dump(redact_tree(dict(spec)), sort_keys=False)
    (Path(experiment_dir) / SPEC_FILE).write_text(text, encoding="utf-8")


def read_spec_as_run(experiment_dir: PathLike) -> SpecAsRun | None:
    """The folder's spec as run, or ``None`` when the folder holds none: the one reader of the file.

    Raises:
        ResultsError: The spec is damaged: too large, not UTF-8, not YAML, or holding an integer too long to
            read; or it cannot be read (one line, naming the file).
    """
    # lazy: a cycle at import (as in SpecAsRun.to_spec): the spec's YAML reader, which measures aliases before expanding
    from hpsearch.spec._yaml import YamlError, load_text

    path = Path(experiment_dir) / SPEC_FILE
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FOLDER_SPEC_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise ResultsError(f"{path}: cannot read the spec as run: {err.strerror or err}") from None
    damaged = f"{path}: the spec as run is damaged"
    if len(data) > MAX_FOLDER_SPEC_BYTES:
        raise ResultsError(
            f"{damaged}: it is larger than {MAX_FOLDER_SPEC_BYTES // 2**20} MiB (a spec as run is a few kB); "
            "refused unread"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResultsError(f"{damaged}: not UTF-8 text (byte 0x{data[err.start]:02x} at byte {err.start})") from None
    try:
        spec = load_text(text)
    except YamlError as err:
        raise ResultsError(f"{damaged}: {err}") from None
    except ValueError as err:  # Python's int conversion limit (4,300 digits): a number no spec holds
        raise ResultsError(f"{damaged}: {str(err).partition(';')[0]}") from None
    return SpecAsRun(path, spec if isinstance(spec, dict) else None)


def read_spec(experiment_dir: PathLike) -> dict[str, Any] | None:
    """The spec as run, as a dict, or ``None`` when the folder holds none (:func:`read_spec_as_run`'s data).

    Raises:
        ResultsError: The spec is damaged (:func:`read_spec_as_run`).
    """
    found = read_spec_as_run(experiment_dir)
    return found.data if found is not None else None


def experiment_spec(experiment_dir: PathLike, *, overrides: Sequence[str] = (), check_trainable: bool = True) -> Spec:
    """The spec an experiment folder was run with, placed where the folder is now (it may have moved).

    ``overrides`` (``"budget.max_wall_time=4h"``) are applied first, as ``--set`` does. The one reader of a
    folder's spec as a :class:`~hpsearch.spec.Spec` (``resume``, ``report``, the budget's resources);
    ``check_trainable=False`` reads it without importing the loop.

    Raises:
        ExperimentNotFoundError: The folder holds no spec as run.
        ResultsError: The folder was written by a newer hpsearch (:func:`check_format`), or its spec is damaged.
        SpecError: An override makes the spec invalid.
    """
    exp_dir = Path(experiment_dir).expanduser().resolve()
    missing = ExperimentNotFoundError(f"{exp_dir} is not an hpsearch experiment folder (no {SPEC_FILE} in it)")
    if not is_experiment(exp_dir):
        raise missing
    check_format(exp_dir, doing="resume")
    found = read_spec_as_run(exp_dir)
    if found is None:  # removed since is_experiment looked
        raise missing
    return found.to_spec(overrides=overrides, check_trainable=check_trainable)
