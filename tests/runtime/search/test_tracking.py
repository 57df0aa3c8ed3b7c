"""The trackers of the spec's ``tracking`` section: every trial one run in MLflow, W&B, TensorBoard, Optuna.

Most tests drive the Tune callbacks by hand with fake trials, in Tune's order (the outcome
recorder first), against local stores: an MLflow SQLite store (MLflow 3 refuses a file
store unless MLFLOW_ALLOW_FILE_STORE=true), W&B offline, TensorBoard event files and an
Optuna SQLite study. No network, no Ray. The shipped quick search runs end to end with all
four trackers on (the short Ray tier's quick search).
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import json
import math
import os
import struct
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from fake_tune import FakeTrial, TuneEvents
from ray import cloudpickle as pickle  # as Tune pickles its callbacks (tuner.pkl)

from hpsearch.errors import SpecError
from hpsearch.experiment.files import append_history, run_dir
from hpsearch.experiment.layout import (
    ERRORED,
    FINISHED,
    PLAN_FILE,
    SPEC_FILE,
    STOPPED,
    SUMMARY_FILE,
)
from hpsearch.runtime.search.outcomes import OutcomeRecorder
from hpsearch.runtime.search.tracking import OptunaTracker, TrialFacts, best_checkpoint, tracking_callbacks
from hpsearch.runtime.search.tracking_check import check_tracking
from hpsearch.spec import load_spec
from hpsearch.spec.tracking import TRACKER_PACKAGES, mlflow_tracking_uri


def _needs(*packages: str) -> pytest.MarkDecorator:
    """Skip a test whose trackers' packages are missing, so a missing one skips only its own tests; under CI
    (`.ci/run` installs every extra) it runs, and fails."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(
        bool(missing) and not os.environ.get("CI"),
        reason=f'pip install -e ".[mlflow,wandb,tensorboard]" for {", ".join(missing)}',
    )


class _Package:
    """A tracker's package, imported when a test first uses it (the tests that need it say so with _needs)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


mlflow = _Package("mlflow")
wandb = _Package("wandb")

REPO = Path(__file__).resolve().parents[3]


def _spec(tmp_path: Path, **tracking: Any) -> Any:
    raw = yaml.safe_load((REPO / "search_spaces" / "digits_quick.yaml").read_text())
    raw.update(name="track", storage_path=str(tmp_path / "results"), tracking=tracking)
    return load_spec(raw)


class Search(TuneEvents):
    """The recorder and the trackers in Tune's order, and the events Tune sends them."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.exp = spec.experiment_dir
        self.exp.mkdir(parents=True, exist_ok=True)
        self.recorder = OutcomeRecorder(self.exp, max_t=("epoch", 3))
        self.trackers = tracking_callbacks(spec, self.recorder)
        self.callbacks = [self.recorder, *self.trackers]
        self.pickled = pickle.dumps(self.callbacks)  # what Tune keeps in tuner.pkl, for a resume
        for callback in self.callbacks:
            callback.setup()

    def trial(self, trial_id: str, **config: Any) -> FakeTrial:
        return FakeTrial(trial_id, config, local_path=str(self.exp / f"driver_{trial_id}"))

    def report(self, trial: FakeTrial, *, checkpoint: bool = False, **result: Any) -> None:
        """A report as the nested run forwards it: appended to the trial's history, then given to Tune."""
        metrics = dict(result)
        path = None
        if checkpoint:
            path = str(run_dir(self.exp, trial.trial_id) / f"checkpoint_{metrics['epoch']:06d}")
            Path(path).mkdir(parents=True)
        append_history(run_dir(self.exp, trial.trial_id), metrics, checkpoint_path=path)
        result = {"done": False, "trial_id": trial.trial_id, "pid": 123, "config": trial.config, **result}
        trial.last_result = result
        for callback in self.callbacks:
            callback.on_trial_result(0, [], trial, result)

    def end(self) -> None:
        for callback in self.callbacks:
            callback.on_experiment_end([])


def _three_trials(search: Search) -> tuple[FakeTrial, FakeTrial, FakeTrial]:
    """t1 finishes its 3 epochs (best val_loss 0.3 at epoch 2), t2 is stopped at epoch 1, t3 errors.

    t1 also reports a nested metric, ``{"grad": {"norm": ...}}``: every tracker names it ``grad/norm``,
    as Tune, the spec's ``metric`` and ``load_results`` do.
    """
    t1, t2, t3 = (search.trial(t, lr=lr, hidden=64) for t, lr in (("t1", 0.01), ("t2", 0.001), ("t3", 0.02)))
    for trial in (t1, t2, t3):
        search.start(trial)
    # Tune's training_iteration says 1, 1, 2 (a restart): the step must be the epoch
    for epoch, loss, it in ((1, 0.5, 1), (2, 0.3, 1), (3, 0.4, 2)):
        search.report(
            t1,
            checkpoint=True,
            epoch=epoch,
            val_loss=loss,
            val_acc=1 - loss,
            grad={"norm": 10 * loss},
            training_iteration=it,
        )
    search.complete(t1)
    search.report(t2, epoch=1, val_loss=0.9, training_iteration=1, done=True)
    search.complete(t2)
    search.report(t3, epoch=1, val_loss=0.7, training_iteration=1)
    t3.error = RuntimeError("boom")
    search.error(t3)
    return t1, t2, t3


# ----------------------------------------------------------------------------- the spec


@_needs("mlflow")
def test_relative_store_locations_are_resolved_against_the_current_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, mlflow={"tracking_uri": "file:./mlruns"}, optuna="sqlite:///digits.db")
    assert spec.tracking.mlflow.tracking_uri == (tmp_path / "mlruns").as_uri()
    assert spec.tracking.optuna == f"sqlite:///{tmp_path / 'digits.db'}"
    assert spec.to_dict()["tracking"]["optuna"] == f"sqlite:///{tmp_path / 'digits.db'}"  # the spec as run
    kept = _spec(tmp_path, mlflow={"tracking_uri": "http://mlflow.example:5000"}, optuna="postgresql://h/db")
    assert (kept.tracking.mlflow.tracking_uri, kept.tracking.optuna) == (
        "http://mlflow.example:5000",
        "postgresql://h/db",
    )


def test_a_missing_tracker_package_is_refused_with_its_pip_line(tmp_path, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(SpecError) as err:
        _spec(tmp_path, wandb={"mode": "offline"})
    assert 'tracking.wandb: needs the wandb package, which is not installed: pip install "hpsearch[wandb]"' in str(
        err.value
    )


# ----------------------------------------------------------------------------- what each tracker records


@_needs("mlflow")
def test_mlflow_one_run_per_trial_with_params_metrics_at_epochs_and_status_tags(tmp_path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    search = Search(_spec(tmp_path, mlflow={"tracking_uri": uri, "experiment_name": "digits"}))
    t1, _, _ = _three_trials(search)

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["digits"]).set_index("tags.hpsearch.trial_id")
    assert sorted(runs.index) == ["t1", "t2", "t3"]
    assert runs.loc["t1", "params.lr"] == "0.01" and runs.loc["t1", "params.hidden"] == "64"
    assert runs.loc["t1", "tags.hpsearch.experiment"] == "track"
    assert runs["tags.hpsearch.status"].to_dict() == {"t1": FINISHED, "t2": STOPPED, "t3": ERRORED}
    assert runs["status"].to_dict() == {"t1": "FINISHED", "t2": "FINISHED", "t3": "FAILED"}
    best = str(run_dir(search.exp, "t1") / "checkpoint_000002")
    assert runs.loc["t1", "tags.hpsearch.best_checkpoint"] == best
    assert runs.loc["t1", "tags.hpsearch.best_val_loss"] == "0.3"
    assert "metrics.pid" not in runs and "metrics.training_iteration" not in runs  # Tune's bookkeeping is not logged
    client = mlflow.tracking.MlflowClient(uri)
    history = client.get_metric_history(runs.loc["t1", "run_id"], "val_loss")
    assert [(m.step, m.value) for m in history] == [(1, 0.5), (2, 0.3), (3, 0.4)]
    nested = client.get_metric_history(runs.loc["t1", "run_id"], "grad/norm")
    assert [(m.step, m.value) for m in nested] == [(1, 5.0), (2, 3.0), (3, 4.0)]
    assert "metrics.grad.norm" not in runs

    # a resumed search (callbacks unpickled, as Tune restores them) continues the trial's run
    resumed = pickle.loads(search.pickled)
    tracker = resumed[1]
    tracker.setup()
    t4 = search.trial("t1", lr=0.01, hidden=64)
    tracker.on_trial_start(0, [], t4)
    tracker.on_trial_result(0, [], t4, {"epoch": 4, "val_loss": 0.2, "training_iteration": 1})
    assert len(mlflow.search_runs(experiment_names=["digits"])) == 3
    assert [m.step for m in client.get_metric_history(runs.loc["t1", "run_id"], "val_loss")] == [1, 2, 3, 4]


def _wandb_records(run_folder: Path) -> list[Any]:
    """The records of an offline W&B run file (LevelDB log format: 7-byte header, 32 KiB blocks)."""
    from wandb.proto import wandb_internal_pb2

    [path] = glob.glob(str(run_folder / "run-*.wandb"))
    data, pos, chunks, records = Path(path).read_bytes(), 7, b"", []
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:
            continue
        chunks = chunk if kind in (1, 2) else chunks + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            records.append(record)
    return records


def _wandb_run(exp: Path, trial_id: str) -> dict[str, Any]:
    [folder] = (exp / "wandb").glob(f"offline-run-*-{trial_id}")
    out: dict[str, Any] = {"steps": {}, "summary": {}, "tags": (), "config": {}}
    for record in _wandb_records(folder):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
            out["steps"][items["_step"]] = {k: v for k, v in items.items() if not k.startswith("_")}
        elif kind == "summary":
            out["summary"].update(
                {"/".join(u.nested_key) or u.key: json.loads(u.value_json) for u in record.summary.update}
            )
        elif kind == "run":
            out["tags"] = tuple(record.run.tags)
            out["config"] = {u.key: json.loads(u.value_json) for u in record.run.config.update if u.key != "_wandb"}
    return out


@_needs("wandb")
def test_wandb_offline_one_run_per_trial_at_epoch_steps_with_status(tmp_path) -> None:
    import wandb

    search = Search(_spec(tmp_path, wandb={"project": "digits", "mode": "offline"}))
    _three_trials(search)
    search.end()
    # Each run's file is written by W&B's service process; finish() can return before the last
    # run's records are on disk (seen on a loaded CI machine: t3's file read back empty). The
    # service's shutdown waits for them, as a script's exit does.
    wandb.teardown()

    t1 = _wandb_run(search.exp, "t1")
    assert t1["config"] == {"lr": 0.01, "hidden": 64}
    assert t1["steps"] == {
        1: {"val_loss": 0.5, "val_acc": 0.5, "grad/norm": 5.0, "epoch": 1},
        2: {"val_loss": 0.3, "val_acc": 0.7, "grad/norm": 3.0, "epoch": 2},
        3: {"val_loss": 0.4, "val_acc": 0.6, "grad/norm": 4.0, "epoch": 3},
    }
    assert t1["tags"] == ("track", FINISHED)
    assert t1["summary"]["hpsearch.best_checkpoint"] == str(run_dir(search.exp, "t1") / "checkpoint_000002")
    assert t1["summary"]["hpsearch.trial_id"] == "t1" and t1["summary"]["hpsearch.experiment"] == "track"
    assert _wandb_run(search.exp, "t2")["tags"] == ("track", STOPPED)
    assert _wandb_run(search.exp, "t3")["tags"] == ("track", ERRORED)


def _tensorboard_events(folder: Path) -> list[Any]:
    """Every event of a folder's TFRecord event files (length, crc, data, crc), parsed with tensorboardX's proto."""
    from tensorboardX.proto import event_pb2

    events = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, pos = path.read_bytes(), 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            event = event_pb2.Event()
            event.ParseFromString(data[pos + 12 : pos + 12 + length])
            events.append(event)
            pos += 12 + length + 4
    return events


@_needs("tensorboardX")
def test_tensorboard_scalars_at_epoch_steps_and_the_end_as_text(tmp_path) -> None:
    search = Search(_spec(tmp_path, tensorboard=True))
    t1, t2, _ = _three_trials(search)

    events = _tensorboard_events(Path(t1.path))
    scalars = [
        (e.step, v.tag, round(v.simple_value, 6)) for e in events for v in e.summary.value if v.HasField("simple_value")
    ]
    assert [(s, v) for s, tag, v in scalars if tag == "val_loss"] == [(1, 0.5), (2, 0.3), (3, 0.4)]
    assert [(s, v) for s, tag, v in scalars if tag == "grad/norm"] == [(1, 5.0), (2, 3.0), (3, 4.0)]
    assert not [tag for _, tag, _ in scalars if tag.startswith("ray/") or tag in ("pid", "training_iteration")]
    texts = {
        v.tag.split("/text_summary")[0]: v.tensor.string_val[0].decode()
        for e in events
        for v in e.summary.value
        if v.HasField("tensor")
    }
    assert texts["hpsearch/status"] == FINISHED and texts["hpsearch/trial_id"] == "t1"
    assert texts["hpsearch/best_checkpoint"] == str(run_dir(search.exp, "t1") / "checkpoint_000002")
    assert {
        v.tag.split("/text_summary")[0]: v.tensor.string_val[0].decode()
        for e in _tensorboard_events(Path(t2.path))
        for v in e.summary.value
        if v.HasField("tensor")
    }["hpsearch/status"] == STOPPED


def test_optuna_study_is_written_live_and_a_resume_continues_it(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'digits.db'}"
    search = Search(_spec(tmp_path, optuna=url))
    t1 = search.trial("t1", lr=0.01, hidden=64, layers=2)
    search.start(t1)
    search.report(t1, epoch=1, val_loss=0.5)
    [live] = optuna.load_study(study_name="track", storage=url).trials  # read while the trial runs
    assert live.state.name == "RUNNING" and live.intermediate_values == {1: 0.5}
    assert live.params == {"lr": 0.01, "hidden": 64, "layers": 2} and live.user_attrs["trial_id"] == "t1"
    assert isinstance(live.distributions["lr"], optuna.distributions.FloatDistribution) and live.distributions["lr"].log
    search.report(t1, epoch=2, val_loss=0.3, checkpoint=True)
    search.complete(t1)
    t2 = search.trial("t2", lr=0.001, hidden=32, layers=1)
    search.start(t2)
    search.report(t2, epoch=1, val_loss=0.9, done=True)
    search.complete(t2)
    t3 = search.trial("t3", lr=0.02, hidden=32, layers=1)
    search.start(t3)

    # killed here; `hpsearch resume` restores the callbacks from Tune's pickle: t3 goes on in the same study
    (search.exp / "experiment_state-2026.json").write_text("{}")  # Tune's state: this is a resume
    resumed = pickle.loads(search.pickled)
    for callback in resumed:
        callback.setup()
    resumed[0].outcomes = {"t1": FINISHED, "t2": STOPPED}
    resumed[1].on_trial_start(0, [], t3)
    append_history(run_dir(search.exp, "t3"), {"epoch": 1, "val_loss": float("nan")})
    resumed[1].on_trial_result(0, [], t3, {"epoch": 1, "val_loss": float("nan")})
    resumed[0].on_trial_complete(0, [], t3)
    resumed[1].on_trial_complete(0, [], t3)

    study = optuna.load_study(study_name="track", storage=url)
    assert study.user_attrs["hpsearch_experiment_dir"] == str(search.exp) and study.direction.name == "MINIMIZE"
    assert [(t.number, t.user_attrs["trial_id"], t.state.name, t.value) for t in study.trials] == [
        (0, "t1", "COMPLETE", 0.3),
        (1, "t2", "PRUNED", None),
        (2, "t3", "FAIL", None),  # finished with no finite value: FAIL, as the export says
    ]
    assert study.trials[0].intermediate_values == {1: 0.5, 2: 0.3}
    assert study.trials[2].user_attrs["fail_reason"] == "its best val_loss (nan) is not a finite number"

    # a fresh run of the same folder (`run --overwrite`) replaces its stale study; another folder's is refused
    (search.exp / "experiment_state-2026.json").unlink()
    Search(_spec(tmp_path, optuna=url))
    assert optuna.load_study(study_name="track", storage=url).trials == []
    other = _spec(tmp_path / "elsewhere", optuna=url)
    with pytest.raises(
        SpecError, match=r"tracking.optuna: study 'track' in .* holds another search \(.*results/track\)"
    ):
        check_tracking(other)


def test_optuna_takes_a_nested_objective_by_the_name_the_spec_gives_it(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'nested.db'}"
    search = Search(_nested(tmp_path, url))
    t1 = search.trial("t1", lr=0.01, hidden=64, layers=2)
    search.start(t1)
    search.report(t1, epoch=1, val={"loss": 0.5})
    search.report(t1, epoch=2, val={"loss": 0.25})
    search.complete(t1)
    [trial] = optuna.load_study(study_name="track", storage=url).trials
    assert trial.intermediate_values == {1: 0.5, 2: 0.25} and trial.value == 0.25


def _nested(tmp_path: Path, url: str) -> Any:
    raw = yaml.safe_load((REPO / "search_spaces" / "digits_quick.yaml").read_text())
    raw.update(name="track", storage_path=str(tmp_path / "results"), tracking={"optuna": url}, metric="val/loss")
    return load_spec(raw)


# ----------------------------------------------------------------------------- failures


@_needs("mlflow")
def test_an_unreachable_mlflow_is_refused_before_the_search_with_the_spec_key(tmp_path) -> None:
    spec = _spec(tmp_path, mlflow={"tracking_uri": "http://127.0.0.1:9"})  # nothing listens on port 9
    started = time.monotonic()
    with pytest.raises(SpecError) as err:
        check_tracking(spec)
    assert time.monotonic() - started < 30  # one try, not MLflow's minutes of retries
    [problem] = err.value.problems
    assert problem.path == "tracking.mlflow.tracking_uri"
    assert problem.message.startswith("cannot open MLflow at 'http://127.0.0.1:9': ")


@_needs("mlflow")
def test_mlflow_defaults_to_a_sqlite_store_in_the_experiment_folder(tmp_path, monkeypatch, capfd) -> None:
    """No tracking_uri: MLflow's recommended SQLite store, in the folder the search writes (not the current
    directory, MLflow's own default), readable with MLflow's plain client: no MLFLOW_ALLOW_FILE_STORE anywhere."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    spec = _spec(tmp_path, mlflow=True)
    db = spec.experiment_dir / "mlflow.db"
    assert spec.tracking.mlflow.tracking_uri is None  # the spec as run names no store: it follows the folder
    assert mlflow_tracking_uri(None, spec.experiment_dir) == f"sqlite:///{db}"

    check_tracking(spec)  # before `run` writes the folder: the check must not write into it
    assert not spec.experiment_dir.exists()
    search = Search(spec)
    _three_trials(search)

    client = mlflow.tracking.MlflowClient(f"sqlite:///{db}")  # what `mlflow ui --backend-store-uri` opens
    experiment = client.get_experiment_by_name("track")
    assert experiment.artifact_location == (spec.experiment_dir / "mlartifacts").as_uri()  # not <cwd>/mlruns/<id>
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.data.tags["hpsearch.status"] for r in runs) == [ERRORED, FINISHED, STOPPED]
    assert list(cwd.iterdir()) == []  # nothing in the current directory (MLflow's default writes mlflow.db there)
    assert "Creating initial MLflow database tables" not in capfd.readouterr().err  # the terminal stays hpsearch's

    # MLFLOW_TRACKING_URI, MLflow's own setting, is the default when set (a relative path made absolute)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///team.db")
    assert mlflow_tracking_uri(None, spec.experiment_dir) == f"sqlite:///{cwd / 'team.db'}"
    assert mlflow_tracking_uri("http://mlflow:5000", spec.experiment_dir) == "http://mlflow:5000"  # the spec wins


@_needs("mlflow")
def test_an_mlflow_file_store_is_refused_before_the_search_unless_mlflow_allows_it(tmp_path, monkeypatch) -> None:
    """MLflow 3 refuses a file store in its client and its server unless MLFLOW_ALLOW_FILE_STORE=true: hpsearch
    refuses it up front with the fix, rather than set the variable for its own writes and leave runs that
    `mlflow ui` and `mlflow.search_runs` then refuse to read."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    for given in ("file:./mlruns", "./mlruns"):  # a bare path is a file store to MLflow too
        spec = _spec(tmp_path, mlflow={"tracking_uri": given})
        with pytest.raises(SpecError) as err:
            check_tracking(spec)
        [problem] = err.value.problems
        assert problem.path == "tracking.mlflow.tracking_uri"
        assert problem.message.startswith(f"is {(tmp_path / 'mlruns').as_uri()!r}, an MLflow file store")
        assert "unless MLFLOW_ALLOW_FILE_STORE=true" in problem.message
        assert f"`mlflow migrate-filestore --source {tmp_path / 'mlruns'} --target sqlite:///mlflow.db`" in str(
            err.value
        )
        assert "export MLFLOW_ALLOW_FILE_STORE=true" in problem.message
        assert not (tmp_path / "mlruns").exists() and not spec.experiment_dir.exists()  # nothing written

    # the same store named by MLflow's own variable, the spec naming none
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:./mlruns")
    with pytest.raises(SpecError, match=r"tracking.mlflow.tracking_uri: is not set and MLFLOW_TRACKING_URI='file:///"):
        check_tracking(_spec(tmp_path, mlflow=True))
    monkeypatch.delenv("MLFLOW_TRACKING_URI")

    # with MLflow's opt-out set (in the shell: it reaches the viewer too), hpsearch writes the file store
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    spec = _spec(tmp_path, mlflow={"tracking_uri": uri})
    check_tracking(spec)
    _three_trials(Search(spec))
    mlflow.set_tracking_uri(uri)
    assert len(mlflow.search_runs(experiment_names=["track"])) == 3


@_needs("mlflow")
def test_the_cli_refuses_an_mlflow_file_store_with_exit_2_before_ray_starts(tmp_path, monkeypatch, capsys) -> None:
    from hpsearch import cli
    from hpsearch.runtime.nodes import connect as ray_cluster

    def no_ray(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Ray started")

    monkeypatch.setattr(ray_cluster, "connect", no_ray)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    raw = yaml.safe_load((REPO / "search_spaces" / "digits_quick.yaml").read_text())
    raw.update(name="track", storage_path=str(tmp_path / "results"), tracking={"mlflow": {"tracking_uri": "file:./m"}})
    path = tmp_path / "track.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"  - tracking.mlflow.tracking_uri: is {(tmp_path / 'm').as_uri()!r}, an MLflow file store" in err
    assert not (tmp_path / "results" / "track").exists()


@_needs("wandb")
def test_wandb_online_without_an_api_key_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    with pytest.raises(SpecError, match="tracking.wandb.mode: is online, but no W&B API key is known"):
        check_tracking(_spec(tmp_path, wandb={"project": "p"}))


@_needs("mlflow")
def test_a_tracker_failing_mid_search_warns_once_and_the_search_goes_on(tmp_path, said) -> None:
    search = Search(_spec(tmp_path, mlflow={"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}))
    tracker = search.trackers[0]

    class Down:
        def __getattr__(self, name: str) -> Any:
            raise ConnectionError("MLflow went away")

    tracker._client = Down()
    t1, _, _ = _three_trials(search)  # would raise into Tune without the guard
    warnings = [line for line in said.getvalue().splitlines() if "mlflow" in line]
    assert warnings == [
        "hpsearch: warning: tracking with mlflow failed (starting a run: ConnectionError: MLflow went away); "
        "the search goes on, this tracker may miss records (warned once)"
    ]
    assert search.recorder.outcomes == {"t1": FINISHED, "t2": STOPPED, "t3": ERRORED}


@_needs("mlflow", "wandb", "tensorboardX")
def test_trackers_come_after_the_recorder_and_none_when_tracking_is_off(tmp_path) -> None:
    from hpsearch.runtime.search.tracking import MlflowTracker, TensorboardTracker, WandbTracker
    from hpsearch.runtime.search.tuner import callbacks_for

    spec = _spec(
        tmp_path,
        mlflow=True,
        wandb={"mode": "offline"},
        tensorboard=True,
        optuna=f"sqlite:///{tmp_path / 'o.db'}",
    )
    callbacks = callbacks_for(spec, concurrency=2, workarounds=False)
    assert isinstance(callbacks[0], OutcomeRecorder)
    trackers = callbacks[4:-2]  # then Tune's CSV and JSON loggers, named so that Tune adds no TensorBoard one
    assert [type(c) for c in trackers] == [MlflowTracker, WandbTracker, TensorboardTracker, OptunaTracker]
    assert all(c.facts.recorder is callbacks[0] for c in trackers)
    # recorder, printer, node watch, room keeper, Tune's CSV and JSON loggers
    assert len(callbacks_for(_spec(tmp_path), concurrency=2, workarounds=False)) == 6


def test_best_checkpoint_is_the_best_still_on_disk(tmp_path) -> None:
    kept = tmp_path / "checkpoint_2"
    kept.mkdir()
    history = [
        {"epoch": 1, "val_loss": 0.1, "checkpoint_path": str(tmp_path / "checkpoint_1")},  # deleted (num_to_keep)
        {"epoch": 2, "val_loss": 0.5, "checkpoint_path": str(kept)},
        {"epoch": 3, "val_loss": 0.2},
    ]
    assert best_checkpoint(history, "val_loss", "min") == str(kept)
    assert best_checkpoint(history[2:], "val_loss", "min") is None
    assert TrialFacts.step({"epoch": 4, "training_iteration": 1}) == 4
    assert TrialFacts.step({"epoch": 0.5, "training_iteration": 3}) == 3  # a fractional epoch: Tune's counter


# ----------------------------------------------------------------------------- the quick search, all four trackers


@_needs("mlflow", "wandb", "tensorboardX")
@pytest.mark.ray
@pytest.mark.tier
@pytest.mark.timeout(300)
def test_the_quick_search_end_to_end_with_every_tracker(ray_cluster, tmp_path, capsys, monkeypatch) -> None:
    """The shipped default search, shrunk to 2 trials x 2 epochs (2 workers each, 2 at once), with MLflow,
    W&B offline, TensorBoard and a live Optuna study: every trial a 2-worker TorchTrainer on digits, and one
    run per trial in each tracker. (One search for what were the tier's quick search and the tracking search.)"""
    from hpsearch.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # MLflow's store is then hpsearch's default

    db = tmp_path / "digits.db"
    name = "digits-quick"
    exp = tmp_path / name

    # Read the study from a connection of its own, as optuna-dashboard does, each time the tracker has written a
    # report: what a reader sees while the trial runs, without racing a poller against one-second epochs.
    seen_live: list[list[tuple[str, dict[int, float]]]] = []
    write_report = OptunaTracker.on_trial_result

    def write_and_read(self: OptunaTracker, *args: Any, **info: Any) -> None:
        write_report(self, *args, **info)
        trials = optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials
        seen_live.append([(t.state.name, dict(t.intermediate_values)) for t in trials])

    monkeypatch.setattr(OptunaTracker, "on_trial_result", write_and_read)
    code = main(
        [
            "run",
            str(REPO / "search_spaces" / "digits_quick.yaml"),
            *("--set", "num_samples=2"),  # one round of two trials at once
            *("--set", "search_space.epochs=2"),
            *("--set", "scheduler.max_t=2"),
            *("--set", f"storage_path={tmp_path}"),
            *("--set", "tracking.mlflow=true"),  # the default store: sqlite:///<experiment folder>/mlflow.db
            *("--set", "tracking.wandb.mode=offline"),
            *("--set", "tracking.tensorboard=true"),
            *("--set", f"tracking.optuna=sqlite:///{db}"),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Best trials by val_loss (min):" in out.out
    assert f"Experiment folder: {exp}" in out.out
    assert "Wall time:" in out.out
    assert "warning: tracking" not in out.err
    noise = [
        line
        for line in (out.out + out.err).splitlines()
        if "wandb" in line.lower() or "study created" in line or "MLflow database" in line
    ]
    assert not noise  # the trackers keep the terminal quiet: hpsearch's progress lines only
    assert any(s == "RUNNING" and values for snapshot in seen_live for s, values in snapshot), seen_live

    spec_as_run = yaml.safe_load((exp / SPEC_FILE).read_text())
    assert spec_as_run["num_samples"] == 2 and spec_as_run["scaling"]["num_workers"] == 2
    assert json.loads((exp / PLAN_FILE).read_text())["max_concurrent_trials"] == 2
    summary = json.loads((exp / SUMMARY_FILE).read_text())
    assert len(summary["trials"]) == 2
    best = next(t for t in summary["trials"] if t["trial_id"] == summary["best_trial_id"])
    assert best["metrics"]["val_acc"] > 0.5
    # One nested Train run per trial, named by the trial id, inside the experiment folder.
    nested = sorted(p.name for p in (exp / "train").iterdir())
    assert nested == sorted(t["trial_id"] for t in summary["trials"])
    for run in nested:
        assert list((exp / "train" / run).glob("checkpoint_*")), f"no checkpoint for {run}"

    from hpsearch import load_results

    results = load_results(exp)
    trials = results.trials.set_index("trial_id")
    assert sorted(trials["status"]) == [FINISHED, FINISHED]  # ASHA's max_t reached: finished, not stopped

    # MLflow: one run per trial in the experiment folder's store, metrics at epochs 1 and 2
    store = f"sqlite:///{exp / 'mlflow.db'}"
    mlflow.set_tracking_uri(store)
    runs = mlflow.search_runs(experiment_names=[name]).set_index("tags.hpsearch.trial_id")
    assert sorted(runs.index) == sorted(trials.index)
    client = mlflow.tracking.MlflowClient(store)
    for trial_id, run in runs.iterrows():
        assert run["tags.hpsearch.status"] == FINISHED
        assert run["tags.hpsearch.best_checkpoint"] == trials.loc[trial_id, "best_checkpoint"]
        assert float(run["params.lr"]) == pytest.approx(trials.loc[trial_id, "lr"])
        assert [m.step for m in client.get_metric_history(run["run_id"], "val_loss")] == [1, 2]

    # W&B offline, TensorBoard: one run per trial at epoch steps
    for trial_id in trials.index:
        assert sorted(_wandb_run(exp, trial_id)["steps"]) == [1, 2]
        events = _tensorboard_events(Path(trials.loc[trial_id, "trial_dir"]))
        assert sorted(e.step for e in events for v in e.summary.value if v.tag == "val_loss") == [1, 2]

    # Optuna: the live study is the one the export writes (which replaces it)
    live = optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials
    assert main(["export", str(exp), "--optuna", f"sqlite:///{db}"]) == 0
    exported = optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials

    def view(trials: list[Any]) -> list[Any]:
        # by trial id: Optuna numbers the live trials as they start, the export as Tune created them,
        # and two trials started at once may start in either order
        return sorted(
            (t.user_attrs["trial_id"], t.state, t.value, t.params, t.distributions, t.intermediate_values)
            for t in trials
        )

    assert view(live) == view(exported) and len(live) == 2
    assert sorted(t.number for t in live) == sorted(t.number for t in exported) == [0, 1]


def test_an_optuna_storage_another_process_is_creating_is_opened_on_a_second_try(monkeypatch) -> None:
    """optuna-dashboard (or the watcher of a test) opening the same empty SQLite file creates Optuna's
    tables at the same moment: one side fails ("table ... already exists", "UNIQUE constraint failed:
    alembic_version...", both seen in CI); the schema is there then."""
    import optuna

    from hpsearch.runtime.search.tracking import open_optuna_storage

    calls: list[str] = []
    races = [
        "(sqlite3.OperationalError) table study_directions already exists",  # the tables being made
        "(sqlite3.IntegrityError) UNIQUE constraint failed: alembic_version.version_num",  # the version stamped
        "(sqlite3.OperationalError) database is locked",  # the other process writing
    ]

    def racing(url: str) -> object:
        calls.append(url)
        if len(calls) <= len(races):
            raise RuntimeError(races[len(calls) - 1])
        return "the storage"

    monkeypatch.setattr(optuna.storages, "get_storage", racing)
    monkeypatch.setattr("hpsearch.runtime.search.tracking.time.sleep", lambda s: None)
    assert open_optuna_storage("sqlite:///x.db") == "the storage" and len(calls) == 4

    def broken(url: str) -> object:
        raise RuntimeError("unable to open database file")

    monkeypatch.setattr(optuna.storages, "get_storage", broken)
    with pytest.raises(RuntimeError, match="unable to open database file"):  # any other error: at once
        open_optuna_storage("sqlite:///x.db")


# ----------------------------------------------------------------------------- credentials in tracker URLs

PASSWORD = "s3cret-pw"


@_needs("mlflow")
def test_a_tracker_urls_password_is_never_pickled_and_a_resume_reads_it_from_the_environment(
    tmp_path, monkeypatch
) -> None:
    from hpsearch.runtime.search import tracking as tracking_module

    sqlite = f"sqlite:///{tmp_path / 'study.db'}"
    opened: list[str] = []
    real_open = tracking_module.open_optuna_storage

    def open_storage(url: str, **_: Any) -> Any:  # the server's URL as the tracker resolves it, a SQLite store behind
        opened.append(url)
        return real_open(sqlite)

    monkeypatch.setattr(tracking_module, "open_optuna_storage", open_storage)
    url = f"postgresql://alice:{PASSWORD}@db.internal/optuna"
    spec = _spec(tmp_path, optuna=url, mlflow={"tracking_uri": f"https://alice:{PASSWORD}@mlflow.internal"})
    recorder = OutcomeRecorder(spec.experiment_dir, max_t=("epoch", 3))
    trackers = tracking_callbacks(spec, recorder)
    pickled = pickle.dumps(trackers)  # what Tune writes into tuner.pkl
    assert PASSWORD.encode() not in pickled

    mlflow, optuna_tracker = trackers
    assert mlflow.resolved_uri() == f"https://alice:{PASSWORD}@mlflow.internal"  # the search given it uses it
    optuna_tracker.setup()
    assert opened == [url]

    # a resume: a new process, the trackers from tuner.pkl, the password from the environment
    resumed_mlflow, resumed_optuna = pickle.loads(pickled)
    assert resumed_optuna.storage_url == "postgresql://alice:***@db.internal/optuna"
    monkeypatch.setenv("HPSEARCH_OPTUNA_PASSWORD", "from-env")
    monkeypatch.setenv("HPSEARCH_MLFLOW_PASSWORD", "from-env")
    resumed_optuna.setup()
    assert opened[-1] == "postgresql://alice:from-env@db.internal/optuna"
    assert resumed_mlflow.resolved_uri() == "https://alice:from-env@mlflow.internal"


def test_a_resume_that_lacks_the_password_is_refused_before_anything_opens(tmp_path, monkeypatch) -> None:
    from hpsearch.runtime.search import tracking_check

    monkeypatch.delenv("HPSEARCH_OPTUNA_PASSWORD", raising=False)
    monkeypatch.delenv("DB_PASSWORD", raising=False)
    monkeypatch.setattr(tracking_check, "open_optuna_storage", lambda url: pytest.fail(f"opened {url}"))
    redacted = _spec(tmp_path, optuna="postgresql://alice:***@db.internal/optuna")  # as the spec as run holds it
    with pytest.raises(SpecError, match=r"tracking.optuna: .*export HPSEARCH_OPTUNA_PASSWORD=<the password>"):
        check_tracking(redacted)
    named = _spec(tmp_path, optuna="postgresql://alice:${DB_PASSWORD}@db.internal/optuna")
    with pytest.raises(SpecError, match=r"tracking.optuna: names \$\{DB_PASSWORD\}, which is not set"):
        check_tracking(named)


# ----------------------------------------------------------------------------- every tracker, one contract


def _mlflow_stored(search: Search, trial_id: str, name: str) -> list[tuple[int, float]]:
    uri = search.trackers[0].resolved_uri()
    client = mlflow.tracking.MlflowClient(uri)
    [run] = mlflow.search_runs(
        experiment_names=["track"], filter_string=f"tags.`hpsearch.trial_id` = '{trial_id}'"
    ).itertuples()
    return [(m.step, m.value) for m in client.get_metric_history(run.run_id, name)]


def _wandb_stored(search: Search, trial_id: str, name: str) -> list[tuple[int, float]]:
    wandb.teardown()  # W&B's service writes the run file; its shutdown waits for the records
    steps = _wandb_run(search.exp, trial_id)["steps"]
    return [(step, items[name]) for step, items in sorted(steps.items()) if name in items]


def _tensorboard_stored(search: Search, trial_id: str, name: str) -> list[tuple[int, float]]:
    events = _tensorboard_events(search.exp / f"driver_{trial_id}")
    return [
        (e.step, v.simple_value)
        for e in events
        for v in e.summary.value
        if v.tag == name and v.HasField("simple_value")
    ]


def _optuna_stored(search: Search, trial_id: str, name: str) -> list[tuple[int, float]]:
    [trial] = [t for t in optuna.load_study(study_name="track", storage=search.spec.tracking.optuna).trials]
    assert trial.user_attrs["trial_id"] == trial_id
    return sorted(trial.intermediate_values.items())  # the spec's metric only: Optuna keeps one value per step


#: How each tracker's store is read back: one reader per name the spec's tracking section accepts.
STORED = {
    "mlflow": _mlflow_stored,
    "wandb": _wandb_stored,
    "tensorboard": _tensorboard_stored,
    "optuna": _optuna_stored,
}
TRACKER_SETTINGS = {
    "mlflow": lambda tmp: {"tracking_uri": f"sqlite:///{tmp / 'mlflow.db'}"},
    "wandb": lambda tmp: {"project": "track", "mode": "offline"},
    "tensorboard": lambda tmp: True,
    "optuna": lambda tmp: f"sqlite:///{tmp / 'study.db'}",
}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=_needs(TRACKER_PACKAGES[name][0])) for name in sorted(TRACKER_PACKAGES)]
)
def test_every_tracker_stores_the_specs_metric_by_its_name_with_nan_and_a_constraint(name: str, tmp_path) -> None:
    """Derived from the spec's tracker registry: a new tracker needs a reader here before it can land."""
    assert set(STORED) == set(TRACKER_PACKAGES) == set(TRACKER_SETTINGS)
    raw = yaml.safe_load((REPO / "search_spaces" / "digits_quick.yaml").read_text())
    raw.update(
        name="track",
        storage_path=str(tmp_path / "results"),
        metric="val/loss",
        tracking={name: TRACKER_SETTINGS[name](tmp_path)},
        constraints=[{"metric": "size", "max": 10}],
    )
    search = Search(load_spec(raw))
    trial = search.trial("t1", lr=0.01, hidden=64)
    search.start(trial)
    for epoch, loss in ((1, 0.5), (2, math.nan), (3, 0.25)):  # a NaN, as a diverging loop reports it
        search.report(trial, epoch=epoch, val={"loss": loss}, size=12.0, training_iteration=epoch)
    search.complete(trial)
    search.end()
    stored = STORED[name](search, "t1", "val/loss")
    # by the spec's name, at the epoch steps; the NaN kept as NaN, except by Optuna, whose intermediate values
    # leave out what is not a finite number
    assert [step for step, _ in stored] == ([1, 3] if name == "optuna" else [1, 2, 3]), stored
    values = dict(stored)
    assert values[1] == pytest.approx(0.5) and values[3] == pytest.approx(0.25)
    assert 2 not in values or math.isnan(values[2])
    if name == "optuna":  # the objective only, and the constraint told as Optuna takes it: > 0 is violated
        [study_trial] = optuna.load_study(study_name="track", storage=search.spec.tracking.optuna).trials
        assert study_trial.system_attrs["constraints"] == [2.0]
    else:  # every reported metric, the constraint's included
        assert [v for _, v in STORED[name](search, "t1", "size")] == [12.0, 12.0, 12.0]
