"""The one door to other libraries' internals: every private name hpsearch relies on, named and checked.

Ray has no public API for a few things a nested search needs: a trial driver's Tune session
(its queues, its stop event, its ``report``), the switch that keeps an embedded Ray on the
loopback, the hook Tune gives a function trainable's class, a Tune scheduler's exploit step,
the study an Optuna searcher builds; nor has PyTorch for a loaded optimizer that keeps its new
hyperparameters. Each such reliance lives in this package, and only here:

- Each one is an :class:`Internal` in :data:`INTERNALS`: what it relies on, the versions it
  was checked on, what stops working without it, the public alternative where the library has
  one (and why it is not used, where it is not), and what a missing one means for a search
  (``warn``: the feature named goes off with one line; ``refuse``: the search is refused
  before anything starts, with exit code 2).
- Each accessor (a function or a small base class) uses only the internals it names, beside
  the check of their contract. The door holds no hpsearch policy: what hpsearch does with an
  accessor is the module's that owns the feature. No other module of hpsearch imports
  ``ray._private``, a ``ray.*._internal`` module or ``ray.experimental.internal_kv``, or reads or
  writes an underscore attribute of another library's object: ``tests/runtime/test_internals_door.py``
  walks the package and enforces it.
- :func:`broken` checks every contract against the installed libraries (names, signatures,
  the attributes read, the module constants written), without a cluster, in well under a
  second. ``tests/runtime/test_ray_contract.py`` runs it in CI, and :func:`preflight` runs it at the
  start of every ``run`` and ``resume``, before anything is written.

A process that finds an internal missing treats its feature as off (:func:`available`); the
search process has said so once, at :func:`preflight`, so the trial drivers and Train
processes that check again stay quiet.

The modules, one library area each (the registry first; every other imports it):

- :mod:`~hpsearch.runtime.internals.registry`: every internal, ``broken``, ``available``, ``preflight``.
- :mod:`~hpsearch.runtime.internals.contract_checks`: what the checks are made of (``ContractBroken``, a name, a text in a source).
- :mod:`~hpsearch.runtime.internals.tune_session`: a trial driver's Tune session, the trainable's mixins, SIGUSR1, a trial's retries.
- :mod:`~hpsearch.runtime.internals.tune_schedulers`: PBT's exploit step and its per-trial state; a pause whose actor is not reused.
- :mod:`~hpsearch.runtime.internals.tune_search`: the variant generator's trials and Tune's saved search state.
- :mod:`~hpsearch.runtime.internals.train_worker`: a Train worker's reports and start checkpoint.
- :mod:`~hpsearch.runtime.internals.train_controller`: the Train controller's process, errors, failure policy and callbacks.
- :mod:`~hpsearch.runtime.internals.train_torch`: Ray Train's Torch backend, and hpsearch's mirror of it.
- :mod:`~hpsearch.runtime.internals.ray_core`: the loopback switch, the driver's error printing, the node, the head resource, the nodes being drained.
- :mod:`~hpsearch.runtime.internals.ray_data`: Ray Data's object-store share, its console handlers, the autoscaling coordinator.
- :mod:`~hpsearch.runtime.internals.optuna_search`: the study Ray's Optuna searcher builds, and its trials.
- :mod:`~hpsearch.runtime.internals.hyperopt_search`: Ray's HyperOpt searcher's ``Trials`` and live trials.
- :mod:`~hpsearch.runtime.internals.tensorboard`: Ray's TensorBoardX callback's writers.
- :mod:`~hpsearch.runtime.internals.torch_optim`: PyTorch's ``load_state_dict`` of optimizers and LR schedulers.
"""

from hpsearch.runtime.internals.contract_checks import ContractBroken
from hpsearch.runtime.internals.hyperopt_search import HyperOptTrialsHook
from hpsearch.runtime.internals.optuna_search import OptunaStudyHook
from hpsearch.runtime.internals.ray_core import (
    NodeInfo,
    current_node,
    draining_nodes,
    loopback_flag,
    reload_ray_config,
    set_driver_error_printing,
)
from hpsearch.runtime.internals.ray_data import (
    data_object_store_fraction,
    hold_in_coordinator,
    ray_data_console_handlers,
)
from hpsearch.runtime.internals.registry import (
    CHECKED_ON,
    CONTROLLER_CLASS,
    DATA_OBJECT_STORE_FRACTION,
    HEAD_NODE_RESOURCE,
    INTERNALS,
    LOOPBACK_ENV_VAR,
    RAY_DATA_FILE_HANDLER,
    TORCH_BACKEND_CLASS,
    TRAIN_ENV_VARS,
    TUNE_INTERRUPT_HANDLER,
    Internal,
    available,
    broken,
    library_versions,
    preflight,
    problem,
)
from hpsearch.runtime.internals.tensorboard import TBXWriters
from hpsearch.runtime.internals.torch_optim import (
    Load,
    load_state_dict_targets,
    set_last_lr,
    wrap_optimizer_load,
    wrap_scheduler_loads,
)
from hpsearch.runtime.internals.train_controller import (
    NO_DATASET_SHARD,
    NoDatasetShards,
    RankFailure,
    controller_failure,
    lean_trainer_class,
    rank_failures,
    veto_restarts,
)
from hpsearch.runtime.internals.train_torch import MIRRORED_BACKENDS, lean_torch_config, torch_config_with_worker_setup
from hpsearch.runtime.internals.train_worker import offer_start_checkpoint, watch_worker_reports, wrap_worker_reports
from hpsearch.runtime.internals.tune_schedulers import Exploit, ExploitHook, pause_without_reuse
from hpsearch.runtime.internals.tune_search import SavedSearch, VariantHook, read_search_state, write_search_state
from hpsearch.runtime.internals.tune_session import (
    DriverSession,
    add_trainable_mixin,
    count_callbacks_by_name,
    count_callbacks_without_imports,
    set_trial_retries_left,
    tune_interrupt_installed,
)

__all__ = [
    "CHECKED_ON",
    "CONTROLLER_CLASS",
    "DATA_OBJECT_STORE_FRACTION",
    "HEAD_NODE_RESOURCE",
    "INTERNALS",
    "LOOPBACK_ENV_VAR",
    "MIRRORED_BACKENDS",
    "NO_DATASET_SHARD",
    "RAY_DATA_FILE_HANDLER",
    "TORCH_BACKEND_CLASS",
    "TRAIN_ENV_VARS",
    "TUNE_INTERRUPT_HANDLER",
    "ContractBroken",
    "DriverSession",
    "Exploit",
    "ExploitHook",
    "HyperOptTrialsHook",
    "Internal",
    "Load",
    "NoDatasetShards",
    "NodeInfo",
    "OptunaStudyHook",
    "RankFailure",
    "SavedSearch",
    "TBXWriters",
    "VariantHook",
    "add_trainable_mixin",
    "available",
    "broken",
    "controller_failure",
    "current_node",
    "draining_nodes",
    "pause_without_reuse",
    "data_object_store_fraction",
    "hold_in_coordinator",
    "lean_torch_config",
    "lean_trainer_class",
    "library_versions",
    "load_state_dict_targets",
    "loopback_flag",
    "reload_ray_config",
    "offer_start_checkpoint",
    "preflight",
    "problem",
    "rank_failures",
    "ray_data_console_handlers",
    "read_search_state",
    "set_driver_error_printing",
    "set_last_lr",
    "set_trial_retries_left",
    "torch_config_with_worker_setup",
    "count_callbacks_by_name",
    "count_callbacks_without_imports",
    "tune_interrupt_installed",
    "veto_restarts",
    "watch_worker_reports",
    "wrap_optimizer_load",
    "wrap_scheduler_loads",
    "wrap_worker_reports",
    "write_search_state",
]
