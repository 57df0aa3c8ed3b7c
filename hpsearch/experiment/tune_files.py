"""Ray Tune's own files in an experiment folder, read as data: no Ray, and nothing of Tune imported.

Tune writes one folder per trial it started, ``<trainable>_<id>_<number>_<params>_<date>/``, holding
``params.json`` (the config), ``result.json`` (one JSON object per report; a half-written last line,
as in a running search, is skipped) and, for an errored trial, ``error.txt``; and, for the search,
``experiment_state-*.json`` (each trial's status, config and folder), large and read only when needed.
:func:`hpsearch.load_results` takes the trials from here (:func:`trial_folders`, :func:`started_trials`,
:func:`unstarted_trials`)
and Tune's word on a status where hpsearch's own records say nothing (:class:`TuneState`); the rule
that weighs the two is :mod:`hpsearch.experiment.trial_status`. File names are in
:mod:`hpsearch.experiment.layout`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpsearch.errors import ResultsError
from hpsearch.experiment.folder_io import PathLike, is_trial_id, read_json, read_json_lines
from hpsearch.experiment.layout import (
    TRAIN_RUNS_DIR,
    TUNE_COLUMNS,
    TUNE_ERROR_FILE,
    TUNE_PARAMS_FILE,
    TUNE_RESULT_FILE,
    TUNE_STATE_GLOB,
)
from hpsearch.experiment.metrics import flat_metrics

__all__ = [
    "TuneTrial",
    "TuneState",
    "trial_folders",
    "started_trials",
    "unstarted_trials",
    "without_housekeeping",
    "read_params",
    "has_error_file",
    "error_text",
]

# <trainable>_<trial id>_<number>_<params>_<date>; Tune's ids are 8 hex digits (5 + _00000 for grids).
_TRIAL_DIR = re.compile(r"^.+?_(?P<id>[0-9a-f]{5,8}(?:_\d{5})?)_(?P<number>\d+)(?:_|$)")
#: Tune's housekeeping keys of a report, left out of a trial's reports; the ones a report keeps are its
#: counter, its time, its checkpoint, its trial and when it was made.
_DROPPED = (TUNE_COLUMNS - {"training_iteration", "time_total_s", "checkpoint_path", "trial_id", "timestamp"}) | {
    "config"
}
#: Tune's status names of a trial it created but has not started.
_NOT_STARTED = ("PENDING", "PAUSED")


@dataclass(frozen=True)
class TuneTrial:
    """One trial as Tune's files show it.

    Attributes:
        trial_id: Tune's id (checked to be one plain name: it names ``train/<trial_id>/``).
        number: Its number in creation order (from its folder's name or Tune's tag), or ``None``.
        folder: Its Tune folder; ``None`` for a trial Tune created but has not started (it has no folder yet).
        config: Its config (``params.json``, else Tune's state's).
        reports: Its ``result.json`` rows, oldest first, without Tune's housekeeping keys, nested metrics
            flattened as Tune flattens them (``val/loss``); ``[]`` for a trial not started.
    """

    trial_id: str
    number: int | None
    folder: Path | None
    config: dict[str, Any]
    reports: list[dict[str, Any]]


class TuneState:
    """Tune's latest ``experiment_state-*.json`` in a folder, read only when first asked (it is large)."""

    def __init__(self, experiment_dir: PathLike) -> None:
        self._files = sorted(Path(experiment_dir).glob(TUNE_STATE_GLOB))
        self._trials: dict[str, dict[str, Any]] | None = None

    @property
    def exists(self) -> bool:
        """Whether the folder holds Tune's experiment state."""
        return bool(self._files)

    @property
    def path(self) -> Path | None:
        """The file the trials are read from."""
        return self._files[-1] if self._files else None

    def trials(self) -> dict[str, dict[str, Any]]:
        """Trial id -> its ``status`` (Tune's name), ``config``, ``number`` and ``dir`` (its folder's name)."""
        if self._trials is None:
            self._trials = {}
            data = read_json(self._files[-1]) if self._files else None
            for entry in (data or {}).get("trial_data", []):
                try:
                    info = json.loads(entry[0]) if isinstance(entry[0], str) else entry[0]
                except (ValueError, TypeError, IndexError):
                    continue
                tag = str(info.get("experiment_tag", ""))
                number = re.match(r"\d+", tag)
                self._trials[str(info.get("trial_id"))] = {
                    "status": info.get("status"),
                    "config": info.get("config") or {},
                    "number": int(number.group()) if number else None,
                    "dir": info.get("relative_logdir"),
                }
        return self._trials

    def status(self, trial_id: str) -> Any:
        """Tune's status name for the trial (``"TERMINATED"``, ``"ERROR"``, ...), or ``None``."""
        return self.trials().get(trial_id, {}).get("status")

    def by_dir(self, name: str) -> tuple[str, dict[str, Any]] | None:
        """The trial whose folder is ``name``: its id and entry, or ``None``."""
        return next(((tid, i) for tid, i in self.trials().items() if i["dir"] == name), None)


def trial_folders(experiment_dir: PathLike) -> list[Path]:
    """Every folder of a trial Tune started (it holds ``params.json`` or ``result.json``), in the order the folder
    lists them; a link is not followed (a trial folder that leads out of the experiment folder is not read)."""
    out = []
    with os.scandir(experiment_dir) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and entry.name != TRAIN_RUNS_DIR and not entry.name.startswith("."):
                path = Path(entry.path)
                if (path / TUNE_PARAMS_FILE).exists() or (path / TUNE_RESULT_FILE).exists():
                    out.append(path)
    return out


def started_trials(folders: Iterable[Path], state: TuneState) -> list[TuneTrial]:
    """The trials of Tune's trial ``folders`` (:func:`trial_folders`), in their order.

    Raises:
        ResultsError: A trial id is not a plain name (damaged or crafted records).
    """
    out = []
    for folder in folders:
        reports = without_housekeeping(read_json_lines(folder / TUNE_RESULT_FILE))
        trial_id, number = _identify(folder, reports, state)
        _check_trial_id(trial_id, folder / TUNE_RESULT_FILE)
        out.append(TuneTrial(trial_id, number, folder, read_params(folder) or {}, reports))
    return out


def unstarted_trials(state: TuneState, started: set[str]) -> list[TuneTrial]:
    """The trials Tune created but has not started (no folder yet), those not in ``started``.

    Raises:
        ResultsError: A trial id is not a plain name (damaged or crafted records).
    """
    out = []
    for trial_id, info in state.trials().items():
        if trial_id not in started and info["status"] in _NOT_STARTED:
            _check_trial_id(trial_id, state.path)
            out.append(TuneTrial(trial_id, info["number"], None, info["config"], []))
    return out


def without_housekeeping(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reports without Tune's housekeeping keys, nested metrics flattened as Tune flattens them (``val/loss``)."""
    for row in rows:
        for key in _DROPPED.intersection(row):
            del row[key]
    return [flat_metrics(row) for row in rows]


def read_params(folder: PathLike) -> dict[str, Any] | None:
    """A trial's config as Tune saved it (``params.json``), or ``None`` (missing, half-written, not a mapping)."""
    config = read_json(Path(folder) / TUNE_PARAMS_FILE)
    return config if isinstance(config, dict) else None


def has_error_file(folder: PathLike | None) -> bool:
    """Whether Tune wrote the trial's ``error.txt`` (it errored)."""
    return folder is not None and (Path(folder) / TUNE_ERROR_FILE).exists()


def error_text(folder: PathLike | None) -> str:
    """The trial's ``error.txt`` (the whole traceback; bytes that are not UTF-8 replaced), ``""`` when there is none."""
    if folder is None:
        return ""
    try:
        return (Path(folder) / TUNE_ERROR_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _identify(path: Path, reports: list[dict[str, Any]], state: TuneState) -> tuple[str, int | None]:
    match = _TRIAL_DIR.match(path.name)
    number = int(match.group("number")) if match else None
    if reports and reports[0].get("trial_id"):
        return str(reports[0]["trial_id"]), number
    if match:
        return match.group("id"), number
    found = state.by_dir(path.name)
    return (found[0], found[1]["number"]) if found else (path.name, number)


def _check_trial_id(trial_id: str, source: Path | None) -> None:
    """Refuse a trial id that is not a plain name: it names the trial's folder (``train/<trial_id>/``), and one
    like ``../../x`` would read records outside the experiment folder."""
    if not is_trial_id(trial_id):
        raise ResultsError(
            f"{source}: trial id {trial_id!r} is not a plain name (Tune's ids are letters, digits and _), so it "
            "cannot name a folder: this folder's records are damaged or crafted; refused"
        )
