"""Everything checked before a search writes anything or starts Ray, for both ``run`` and ``resume``.

A search that cannot run is refused while the experiment folder is still as the user left it,
and before any Ray process exists. The checks, in order:

- the folder: for ``run``, not an existing one unless ``--overwrite``;
- the storage;
- the budget: for ``resume``, not already spent;
- the trackers;
- the installed Ray's internals (:func:`hpsearch.runtime.internals.preflight`);
- the ``--cluster`` description.

Only then are the processes ended that a killed run of the same folder left running. So the
Ray about to start does not share the machine with them. The order is what the user sees: the
first refusal is the one printed. Each is a one-block ``Error:`` with exit status 2.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

import ray

from hpsearch.errors import ExperimentExistsError, Problem, SpecError
from hpsearch.experiment.files import is_experiment
from hpsearch.experiment.layout import SPEC_FILE
from hpsearch.formatting import plural
from hpsearch.runtime import internals
from hpsearch.runtime.nodes import session
from hpsearch.runtime.nodes.connect import job_cluster_address
from hpsearch.runtime.search.autoscaling import Autoscaling, autoscaling_for
from hpsearch.runtime.search.budget import check_not_spent
from hpsearch.spec import Spec, check_storage, total_trials

__all__ = ["check_preemption_options", "check_resume_overrides", "preflight"]


def check_preemption_options(spec: Spec) -> None:
    """Refuse ``failure``'s preemption options when the installed Ray Train's ``FailureConfig`` lacks them."""
    chosen = spec.failure.preemption_options()
    if not chosen:
        return
    from ray.train.v2.api.config import FailureConfig  # lazy: Ray Train, only when the spec sets one

    taken = inspect.signature(FailureConfig).parameters
    missing = [name for name in chosen if name not in taken]
    if missing:
        raise SpecError(
            [
                Problem(
                    f"failure.{name}",
                    f"the installed Ray ({ray.__version__}) has no such option in Ray Train's FailureConfig "
                    "(Ray 2.60 has it); remove it from the spec, or install ray==2.60.0",
                )
                for name in missing
            ]
        )


def preflight(
    spec: Spec,
    *,
    resuming: bool,
    address: str | None = None,
    overwrite: bool = False,
    cluster: str | None = None,
) -> Autoscaling | None:
    """Check a search before anything is written or Ray starts, then end what a killed run of its folder left.

    For ``run`` (``resuming=False``), the folder must be new, or an experiment folder with
    ``overwrite``. For ``resume``, the budget must not be spent already. Both check that the
    storage can be written and the trackers can be set up. Both check that the installed Ray
    has the internals this search needs. A missing optional one is turned off, and one line
    says so. Both check that ``cluster`` reads; it is ``run --cluster``, given with ``address``.

    Returns:
        The node groups the autoscaler may add, from ``run --cluster``. ``None`` without
        ``cluster``, and on ``resume``. A resume reads its groups back from the plan file once
        Ray is connected.

    Raises:
        ExperimentExistsError, SpecError, ClusterError, IncompatibleLibraryError: the first check
            that fails, with nothing written and no Ray started.
    """
    exp_dir = spec.experiment_dir
    if not resuming:
        _check_new_folder(exp_dir, overwrite=overwrite)
    check_storage(spec)  # refuse now a folder the search cannot write, e.g. a read-only copy or a Ray job's working dir
    if resuming:
        check_not_spent(spec)  # say at once if the budget is already spent, with the --set that raises it
    _check_tracking(spec)  # a tracker that cannot be set up is refused before anything is written
    check_preemption_options(spec)
    embedded = not (address or job_cluster_address())
    internals.preflight(spec, embedded=embedded)  # a Ray it cannot run on is refused before anything is written
    autoscaling = None
    if not resuming:
        # A bad --cluster is refused here, before Ray starts.
        autoscaling = autoscaling_for(cluster, address or job_cluster_address())
    if resuming or exp_dir.exists():  # resume or run --overwrite: first end what a killed run of this folder left
        session.end_leftovers(exp_dir)
    return autoscaling


def _check_new_folder(exp_dir: Path, *, overwrite: bool) -> None:
    """For ``run``, refuse an existing folder unless ``overwrite``, and any folder that is not an experiment."""
    if exp_dir.exists() and not overwrite:
        raise ExperimentExistsError(
            f"experiment folder {exp_dir} already exists; continue it with `hpsearch resume {exp_dir}`, "
            "pass --overwrite (overwrite=True) to delete it and start again, or choose another name (--set name=...)"
        )
    if exp_dir.exists() and not is_experiment(exp_dir):
        raise ExperimentExistsError(
            f"{exp_dir} exists and is not an hpsearch experiment folder (no {SPEC_FILE}); "
            "--overwrite only ever deletes experiment folders: choose another name or storage_path"
        )


def _check_tracking(spec: Spec) -> None:
    """Refuse a tracker of the spec that cannot be set up (SpecError).

    The result is remembered, so the same check in callbacks_for costs nothing.
    """
    if spec.tracking.enabled():
        # lazy: the trackers' module loads Ray's logger callbacks, and a search without tracking never needs them.
        from hpsearch.runtime.search.tracking_check import check_tracking

        check_tracking(spec)


def check_resume_overrides(overrides: Sequence[str]) -> None:
    """Only the budget and ``num_samples`` (to grow the search) may change on resume: any other change
    would mix trials of two different searches.

    Checked first, before the folder's spec is read.
    """
    bad = [o for o in overrides if "=" not in o or _resume_key(o) not in ("budget", GROW_KEY)]
    if bad:
        raise SpecError(
            [
                Problem(
                    f"--set {o}",
                    "cannot be changed on resume: only budget keys (e.g. --set budget.max_wall_time=4h) and "
                    "num_samples (to run more trials: --set num_samples=40) can; changing anything else would mix "
                    "trials of two searches: start a new one with hpsearch run",
                )
                for o in bad
            ]
        )


#: The one spec key besides ``budget.*`` that ``resume --set`` takes: a larger value grows the search.
GROW_KEY = "num_samples"


def _resume_key(override: str) -> str:
    key = override.partition("=")[0].strip()
    return key if key == GROW_KEY else key.split(".")[0]


def check_growth(before: Spec, after: Spec, *, started: int) -> int:
    """How many more trials ``resume --set num_samples=N`` runs: ``after`` (the spec with N) against
    ``before`` (as the search was started), of which ``started`` trials were made so far.

    Raises:
        SpecError: N is below the search's own (a search only grows; the message names the trials already
            run), or the search is a population (pbt, pb2), whose size is fixed for its whole run.
    """
    if after.num_samples == before.num_samples:
        return 0
    where = f"--set {GROW_KEY}={after.num_samples}"
    if after.num_samples < before.num_samples:
        raise SpecError(
            [
                Problem(
                    where,
                    f"is below the {before.num_samples} this search was started with ({plural(started, 'trial')} "
                    f"already run): a search only grows on resume; give {GROW_KEY} of {before.num_samples} or more",
                )
            ]
        )
    if after.scheduler.type in ("pbt", "pb2"):
        raise SpecError(
            [
                Problem(
                    where,
                    f"cannot grow a {after.scheduler.type} search: its population is fixed for its whole run; "
                    "start a new search with a larger num_samples",
                )
            ]
        )
    return total_trials(after) - total_trials(before)
