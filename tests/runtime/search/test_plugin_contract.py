"""Every searcher and scheduler the spec accepts, driven through Tune's own API in one process (no cluster).

In the manner of Optuna's ``optuna/testing/pytest_samplers.py``: the cases come from the spec's
registries, so a new name, or a new value of an option that is a choice (an Optuna ``sampler``,
``failed_trials``), is tested the day it is registered. Each searcher runs single- and
multi-objective, with constraints and with a conditional space; a combination the spec refuses
must be refused by the spec (a ``SpecError`` naming its key), never later. Each scheduler runs from
its registry example. Every accepted case must:

- build the search's Tuner (Tune pickles the searcher and the scheduler into ``tuner.pkl`` there);
- take suggest -> result -> complete through Tune's ``Searcher`` / ``SearchAlgorithm`` /
  ``TrialScheduler`` API, with a NaN, an errored trial and a constraint in the results;
- survive Tune's experiment checkpoint and a restore (``save_to_dir`` / ``restore_from_dir`` for a
  searcher, a pickle round trip for a scheduler, as ``Tuner.restore`` reads ``tuner.pkl``) and go on.
"""

from __future__ import annotations

import itertools
import math
import time
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ray import cloudpickle
from ray.tune.execution.placement_groups import PlacementGroupFactory
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from ray.tune.search import Searcher

from hpsearch.errors import SpecError
from hpsearch.planning.cluster_shape import parse_cluster
from hpsearch.runtime.search.tune_space import to_tune
from hpsearch.runtime.search.tuner import build_tuner, search_plugins
from hpsearch.spec import Spec, load_spec
from hpsearch.spec.plugins import SCHEDULERS, SEARCHERS, Registry

LOOPS = Path(__file__).resolve().parents[2] / "loops.py"
NODES = parse_cluster("1x{CPU: 8, memory: 16}")
FEATURES = ("single", "multi", "constraints", "conditional")


def _choice_options(registry: Registry, name: str) -> list[dict[str, Any]]:
    """Every combination of the values of the plug-in's options that are a choice (``Literal``)."""
    model = registry[name].options
    fields = {k: typing.get_args(f.annotation) for k, f in model.model_fields.items()}
    choices = {
        k: v for k, v in fields.items() if v and typing.get_origin(model.model_fields[k].annotation) is typing.Literal
    }
    keys = sorted(choices)
    return [dict(zip(keys, values)) for values in itertools.product(*(choices[k] for k in keys))]


SEARCHER_CASES = [
    pytest.param(name, options, feature, id="-".join([name, *(str(v) for v in options.values()), feature]))
    for name in SEARCHERS.names()
    for options in _choice_options(SEARCHERS, name)
    for feature in FEATURES
]


def _raw(tmp_path: Path, searcher: dict[str, Any], feature: str, scheduler: Any = "fifo") -> dict[str, Any]:
    space: dict[str, Any] = {
        "x": {"type": "float", "low": 0.0, "high": 1.0},
        "opt": {"type": "choice", "values": ["a", "b"]},
    }
    raw: dict[str, Any] = {
        "name": "contract",
        "trainable": f"{LOOPS}:quadratic",
        "metric": "loss",
        "mode": "min",
        "num_samples": 6,
        "search_space": space,
        "searcher": searcher,
        "scheduler": scheduler,
        "scaling": {"num_workers": 1, "resources_per_worker": {"CPU": 1}},
        "storage_path": str(tmp_path / "results"),
    }
    if feature == "multi":
        raw.update(metric=["loss", "acc"], mode=["min", "max"])
    elif feature == "constraints":
        raw["constraints"] = [{"metric": "size", "max": 10}]
    elif feature == "conditional":
        space["m"] = {"type": "float", "low": 0.0, "high": 0.9, "when": {"opt": "a"}}
    return raw


def _result(i: int, *, nan: bool = False) -> dict[str, Any]:
    loss = math.nan if nan else 1.0 / (i + 1)
    return {"loss": loss, "acc": 1.0 - loss, "size": float(i * 4), "training_iteration": 1, "epoch": 1}


class _Drive:
    """Tune's calls to a search algorithm: a ``Searcher`` (wrapped in its limiter) or a ``SearchAlgorithm``."""

    def __init__(self, searcher: Any, spec: Spec, *, restored: bool = False) -> None:
        """``restored``: a searcher ``restore_from_dir`` brought back, already set up as it was saved."""
        self.searcher = searcher
        self.searcher_ids: dict[str, str] = {}  # our trial id -> the SearchAlgorithm's own (it names its trials)
        if restored:
            return
        metric, mode = (None, None) if spec.multi_objective else (spec.metric, spec.mode)
        config = to_tune(spec.trial_space(), searcher=spec.searcher.type)
        searcher.set_search_properties(metric, mode, config)
        if not isinstance(searcher, Searcher):  # a SearchAlgorithm makes its trials from the experiment
            searcher.add_configurations({"contract": {"run": lambda config: None, "config": config, "num_samples": 6}})

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if isinstance(self.searcher, Searcher):
            return self.searcher.suggest(trial_id)
        trial = self.searcher.next_trial()
        if trial is None:
            return None
        self.searcher_ids[trial_id] = trial.trial_id
        return trial.config

    def complete(self, trial_id: str, result: dict[str, Any] | None, *, error: bool = False) -> None:
        tid = self.searcher_ids.get(trial_id, trial_id)
        if result is not None:
            self.searcher.on_trial_result(tid, result)
        self.searcher.on_trial_complete(tid, result=result, error=error)


def _cycle(drive: _Drive, start: int, count: int) -> list[dict[str, Any]]:
    """``count`` trials suggested, reported and completed one after another: one errors, one reports NaN."""
    configs = []
    for i in range(start, start + count):
        config = drive.suggest(f"t{i}")
        assert config is not None, f"no trial t{i} suggested"
        configs.append(config)
        if i == start + 1:
            drive.complete(f"t{i}", None, error=True)
        else:
            drive.complete(f"t{i}", _result(i, nan=i == start + 2))
    return configs


@pytest.mark.parametrize(("name", "options", "feature"), SEARCHER_CASES)
def test_every_searcher_survives_tunes_pickles_and_goes_on_after_a_restore(
    name: str, options: dict[str, Any], feature: str, tmp_path: Path
) -> None:
    raw = _raw(tmp_path, {"type": name, "seed": 0, **options}, feature)
    try:
        spec = load_spec(raw)
    except SpecError as err:  # refused where it must be: by the spec, naming the searcher or the objectives
        assert any(p.path.startswith(("searcher", "metric", "mode", "constraints")) for p in err.problems), err
        pytest.skip(f"refused by the spec, as it must be: {err.problems[0]}")
    build_tuner(spec, nodes=NODES)  # Tune pickles the searcher here (tuner.pkl)
    searcher, _ = search_plugins(spec, 2)
    drive = _Drive(searcher, spec)
    configs = _cycle(drive, 0, 3)
    if feature == "conditional":
        assert all(("m" in c) == (c["opt"] == "a") for c in configs), configs  # only where it exists
    (tmp_path / "state").mkdir()
    searcher.save_to_dir(str(tmp_path / "state"), session_str="contract")  # Tune's experiment checkpoint
    cloudpickle.loads(cloudpickle.dumps(searcher))
    restored, _ = search_plugins(spec, 2)
    restored.restore_from_dir(str(tmp_path / "state"))  # Tuner.restore
    assert len(_cycle(_Drive(restored, spec, restored=True), 3, 2)) == 2


def test_the_searcher_cases_cover_what_the_spec_allows() -> None:
    """The suite is not vacuous: the cases the README promises are accepted, not skipped."""
    ids = {p.id for p in SEARCHER_CASES}
    for sampler in ("tpe", "gp", "cmaes", "random", "nsga2", "nsga3"):
        assert f"optuna-infeasible-{sampler}-single" in ids
    assert {"optuna-infeasible-nsga2-multi", "optuna-infeasible-nsga3-multi", "random-single", "hyperopt-single"} <= ids


SCHEDULER_CASES = [pytest.param(name, id=name) for name in SCHEDULERS.names()]


class _Controller(SimpleNamespace):
    """What a scheduler asks of Tune's controller; every action it takes is recorded, none is carried out."""

    def __init__(self, trials: list[Trial]) -> None:
        super().__init__(search_alg=None, actions=[])
        self.trials = trials

    def get_trials(self) -> list[Trial]:
        return self.trials

    def get_live_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.is_finished()]

    def __getattr__(self, name: str) -> Any:  # _schedule_trial_save, _schedule_trial_pause, ...
        return lambda *args, **kwargs: self.actions.append(name)


def _trials(count: int) -> list[Trial]:
    """``count`` stub trials of the contract's space, ``t0``, ``t1``, ..."""
    resources = PlacementGroupFactory([{"CPU": 1}])
    return [
        Trial(
            "contract", config={"x": i / 4, "opt": "a"}, trial_id=f"t{i}", stub=True, placement_group_factory=resources
        )
        for i in range(count)
    ]


def _add_running(scheduler: Any, spec: Spec, controller: _Controller) -> None:
    """Tell the scheduler the search's metric and every trial of ``controller``, each then running, as Tune does."""
    scheduler.set_search_properties(spec.metric, spec.mode)
    for trial in controller.trials:
        scheduler.on_trial_add(controller, trial)
        trial.set_status(Trial.RUNNING)


def _step(scheduler: Any, controller: _Controller, step: int) -> list[str]:
    """One result from every running trial, as Tune hands them to the scheduler; its decisions."""
    decisions = []
    for i, trial in enumerate(controller.trials):
        if trial.status == Trial.RUNNING:
            result = {"training_iteration": step, "loss": 1.0 / (i + step), "epoch": step, "time_total_s": float(step)}
            trial.update_last_result(result)
            decisions.append(scheduler.on_trial_result(controller, trial, result))
    assert set(decisions) <= {TrialScheduler.CONTINUE, TrialScheduler.PAUSE, TrialScheduler.STOP, TrialScheduler.NOOP}
    for trial, decision in zip([t for t in controller.trials if t.status == Trial.RUNNING], decisions):
        if decision == TrialScheduler.PAUSE:
            trial.set_status(Trial.PAUSED)
    return decisions


@pytest.mark.parametrize("name", SCHEDULER_CASES)
def test_every_scheduler_decides_survives_a_pickle_and_goes_on(name: str, tmp_path: Path) -> None:
    scheduler_raw: dict[str, Any] = {"type": name, **SCHEDULERS[name].example}
    spec = load_spec(_raw(tmp_path, {"type": "random", "seed": 0}, "single", scheduler=scheduler_raw))
    build_tuner(spec, nodes=NODES)  # Tune pickles the scheduler here (tuner.pkl)
    _, scheduler = search_plugins(spec, 2)
    assert isinstance(scheduler, TrialScheduler)
    pickled = cloudpickle.dumps(scheduler)  # before any trial, as tuner.pkl holds it (Tune saves no scheduler state)
    trials = _trials(4)
    controller = _Controller(trials)
    _add_running(scheduler, spec, controller)
    _step(scheduler, controller, 1)
    _step(scheduler, controller, 2)

    # Tuner.restore: the scheduler from tuner.pkl, told the trials again, goes on from their last results
    restored = cloudpickle.loads(pickled)
    restored.set_search_properties(spec.metric, spec.mode)
    for trial in trials:
        restored.on_trial_add(controller, trial)
    chosen = restored.choose_trial_to_run(controller)
    if chosen is not None:
        chosen.set_status(Trial.RUNNING)
    _step(restored, controller, 3)
    ended = next(t for t in trials if t.status == Trial.RUNNING)
    ended.set_status(Trial.TERMINATED)
    restored.on_trial_complete(controller, ended, ended.last_result)
    assert isinstance(restored.debug_string(), str)


def test_a_sampler_is_pickled_without_its_locks_and_gets_new_ones_with_its_state_kept() -> None:
    """Optuna 5.1's NSGA samplers hold a thread lock, which Tune's pickles of the searcher cannot carry."""
    import threading

    import optuna

    from hpsearch.runtime.search.plugins import LocksRecreated, NSGAIISampler

    class Locked(LocksRecreated, optuna.samplers.RandomSampler):
        def __init__(self) -> None:
            super().__init__(seed=3)
            self.guard = threading.Lock()

    sampler = Locked()
    sampler.guard.acquire()  # even held: a copy in another process starts unlocked
    copy = cloudpickle.loads(cloudpickle.dumps(sampler))  # as Tune pickles the searcher
    assert isinstance(copy.guard, type(threading.Lock())) and not copy.guard.locked()
    assert copy.guard is not sampler.guard
    space = {"x": optuna.distributions.FloatDistribution(0, 1)}
    draws = [optuna.create_study(sampler=s).ask(space).params["x"] for s in (sampler, copy)]
    assert draws[0] == draws[1]  # the random generator's state travelled with it
    nsga = cloudpickle.loads(cloudpickle.dumps(NSGAIISampler(seed=0)))
    assert type(nsga).__name__ == "NSGAIISampler"  # the study keys its generations by this name, as Optuna's


class _Tune(_Controller):
    """Tune's scheduler wrapper as a drained driver's pause uses it: ``pause_trial`` and the controller behind,
    whose ``_reuse_actors`` Tune reads as the paused trial's actor stops (recorded at each pause)."""

    def __init__(self, trials: list[Trial]) -> None:
        super().__init__(trials)
        self._tune_controller = SimpleNamespace(_reuse_actors=True)
        self.paused: list[tuple[str, bool, bool]] = []

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        self.paused.append((trial.trial_id, should_checkpoint, self._tune_controller._reuse_actors))
        trial.set_status(Trial.PAUSED)


@pytest.mark.parametrize("name", SCHEDULER_CASES)
def test_every_scheduler_pauses_a_trial_whose_drivers_node_is_drained_or_keeps_drivers_on_the_head(
    name: str, tmp_path: Path
) -> None:
    """With `resources.driver_node: any`, each scheduler pauses, at the result carrying the notice's checkpoint,
    a trial whose driver's node is drained, without a Tune checkpoint or a reused actor, and runs it first;
    its own decisions stand for every other trial. A scheduler that cannot is refused drivers off the head."""
    from hpsearch.experiment import driver_drains

    raw = _raw(tmp_path, {"type": "random", "seed": 0}, "single", scheduler={"type": name, **SCHEDULERS[name].example})
    raw["resources"] = {"driver_node": "any"}
    try:
        spec = load_spec(raw)
    except SpecError as err:  # population-based training keeps its drivers on the head node
        assert any(p.path == "resources.driver_node" for p in err.problems), err
        assert name in ("pbt", "pb2"), f"{name} refuses drivers on any node: {err}"
        return
    _, scheduler = search_plugins(spec, 2)
    trials = _trials(3)
    tune = _Tune(trials)
    _add_running(scheduler, spec, tune)
    own = _step(scheduler, tune, 1)  # no notice: the scheduler's own decisions
    assert TrialScheduler.NOOP not in own and tune.paused == []
    drained = next(t for t in trials if t.status == Trial.RUNNING)
    folder = spec.experiment_dir / "train" / drained.trial_id
    folder.mkdir(parents=True)
    notice = driver_drains.DriverNotice("n2", "h2", noticed_at=time.time(), deadline=time.time() + 60)
    driver_drains.write_notice(folder, notice)
    before = {"training_iteration": 2, "loss": 0.5, "epoch": 2, "time_total_s": 2.0}
    assert scheduler.on_trial_result(tune, drained, before) != TrialScheduler.NOOP  # made before the save
    driver_drains.mark_saved(folder, notice, report=2, epoch=2)
    saved = {**before, "training_iteration": 3, "epoch": 3, "time_total_s": 3.0, "checkpoint_path": "/ckpt"}
    assert scheduler.on_trial_result(tune, drained, saved) == TrialScheduler.NOOP
    assert tune.paused == [(drained.trial_id, False, False)]  # no Tune checkpoint; no actor kept for reuse
    assert tune._tune_controller._reuse_actors is True  # as it was, after that one pause
    assert scheduler.choose_trial_to_run(tune) is drained  # resumed first, on a node not being drained
