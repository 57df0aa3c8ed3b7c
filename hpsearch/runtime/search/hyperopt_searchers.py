"""HyperOpt's searchers: conditional spaces as nested ``hp.choice``, warm starts, constraints.

Kept apart from :mod:`hpsearch.runtime.search.searchers` because importing HyperOpt (and the
SciPy statistics it loads) costs about 0.9 CPU-seconds in the search's process; only a search
whose ``searcher.type`` is ``hyperopt`` imports this module (:mod:`hpsearch.runtime.search.plugins`).
How each searcher receives a conditional space and warm starts is told in
:mod:`hpsearch.runtime.search.searchers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import hyperopt as hpo
from hyperopt import hp
from ray.tune.search.hyperopt import HyperOptSearch

from hpsearch.runtime.internals import HyperOptTrialsHook
from hpsearch.runtime.search.searchers import Seed, WorstWhenInfeasible, complete_point, label, searched_params
from hpsearch.runtime.search.tune_space import tune_domain
from hpsearch.spec.space import (
    ChoiceParam,
    ConstParam,
    IntParam,
    Param,
    SearchSpace,
    condition_holds,
    iter_params,
    nested_config,
    same_value,
)

__all__ = ["hyperopt_space", "HpsearchHyperOptSearch", "ConstrainedHyperOptSearch"]


def hyperopt_space(tree: SearchSpace) -> dict[str, Any]:
    """A conditional tree as HyperOpt's nested choices, labelled as Ray labels them (``model/width``).

    A parameter sits in the branches of its first controlling ``choice`` whose values allow it
    (the same node in each, so HyperOpt sees one parameter); a condition on a constant is
    decided here; further conditions are applied by :class:`HpsearchHyperOptSearch`.
    """
    params = dict(iter_params(tree))
    constants = {n: p.value for n, p in params.items() if isinstance(p, ConstParam)}
    primary: dict[str, str] = {}
    for name, param in params.items():
        if isinstance(param, ConstParam):
            continue
        static = {c: v for c, v in (param.when or {}).items() if isinstance(params[c], ConstParam)}
        if static and not condition_holds(param.model_copy(update={"when": static}), constants):
            continue  # a constant rules it out: it never exists
        ctrl = next((c for c in (param.when or {}) if isinstance(params[c], ChoiceParam)), None)
        primary[name] = ctrl or ""
    plain = HyperOptSearch.convert_search_space(
        {label(n): tune_domain(params[n], "hyperopt") for n in primary if n not in primary.values()}
    )
    built: dict[str, Any] = {}

    def node(name: str) -> Any:
        if name not in built:
            param = params[name]
            deps = [d for d, c in primary.items() if c == name]
            if deps and isinstance(param, ChoiceParam):
                branches = [
                    {label(d): node(d) for d in deps if any(same_value(value, v) for v in (params[d].when or {})[name])}
                    for value in param.values
                ]
                built[name] = hp.choice(label(name), branches)
            else:
                built[name] = plain[label(name)]
        return built[name]

    return {label(n): node(n) for n, ctrl in primary.items() if not ctrl}


def _hyperopt_value(param: Param, value: Any) -> Any:
    """A config value as HyperOpt stores it in a trial's ``vals`` (a choice: its index)."""
    if isinstance(param, ChoiceParam):
        return next(i for i, v in enumerate(param.values) if same_value(v, value))
    return float(value)


def _from_hyperopt(param: Param, stored: Any) -> Any:
    if isinstance(param, ChoiceParam):
        return param.values[int(stored)]
    if isinstance(param, IntParam):
        return int(round(float(stored)))
    return float(stored)


class ConstrainedHyperOptSearch(WorstWhenInfeasible, HyperOptSearch):
    """Ray's ``HyperOptSearch``, told an infeasible trial as the worst value so far (:class:`WorstWhenInfeasible`)."""


class HpsearchHyperOptSearch(WorstWhenInfeasible, HyperOptTrialsHook, HyperOptSearch):
    """``HyperOptSearch`` for conditional spaces and warm starts.

    With ``hp_conditional`` it takes :func:`hyperopt_space` and returns only the active
    parameters (and constants), their inactive siblings cleared from HyperOpt's trial. It runs
    ``hp_points`` first (an active parameter a point leaves out is drawn from its
    distribution, which Ray's ``points_to_evaluate`` cannot do) and holds ``hp_seeds`` as
    completed HyperOpt trials.
    """

    def __init__(
        self,
        *,
        hp_tree: SearchSpace,
        hp_conditional: bool,
        hp_points: Sequence[Mapping[str, Any]] = (),
        hp_seeds: Sequence[Seed] = (),
        **kwargs: Any,
    ) -> None:
        self._hp_tree = hp_tree
        self._hp_conditional = hp_conditional
        self._hp_points = [dict(p) for p in hp_points]
        self._hp_seeds = list(hp_seeds)
        super().__init__(space=hyperopt_space(hp_tree) if hp_conditional else None, **kwargs)

    def after_hyperopt_setup(self) -> None:
        if not self._hp_seeds:
            return
        tids = self.hyperopt_trials.new_trial_ids(len(self._hp_seeds))
        docs = []
        for tid, (config, values) in zip(tids, self._hp_seeds):
            doc = self._doc(tid, config)
            doc["state"] = hpo.base.JOB_STATE_DONE
            doc["result"] = {"loss": self.metric_op * values[0], "status": hpo.STATUS_OK}
            docs.append(doc)
        self.hyperopt_trials.insert_trial_docs(docs)
        self.hyperopt_trials.refresh()

    def _doc(self, tid: int, config: Mapping[str, Any]) -> dict[str, Any]:
        """A HyperOpt trial document holding ``config``'s searched values (the others: empty)."""
        searched = searched_params(self._hp_tree)
        by_label = {label(n): n for n in searched}
        vals: dict[str, list[Any]] = {}
        idxs: dict[str, list[int]] = {}
        domain: Any = self.domain
        for key in domain.params:
            name = by_label.get(key)
            has = name is not None and name in config
            vals[key] = [_hyperopt_value(searched[name], config[name])] if has else []  # type: ignore[index]
            idxs[key] = [tid] if has else []
        return {
            "state": 0,
            "tid": tid,
            "spec": None,
            "result": {"status": "new"},
            "misc": {
                "tid": tid,
                "cmd": ("domain_attachment", "FMinIter_Domain"),
                "workdir": None,
                "idxs": idxs,
                "vals": vals,
            },
            "exp_key": None,
            "owner": None,
            "version": 0,
            "book_time": None,
            "refresh_time": None,
        }

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self._hp_points and self.domain is not None:
            point = self._hp_points.pop(0)
            config = complete_point(self._hp_tree, point, self._sample)
            tid = self.hyperopt_trials.new_trial_ids(1)[0]
            doc = self._doc(tid, config)
            self.hyperopt_trials.insert_trial_docs([doc])
            self.hyperopt_trials.refresh()
            doc = next(t for t in self.hyperopt_trials.trials if t["tid"] == tid)
            self.live_trials[trial_id] = (tid, doc)
            return self._config(config)
        config = super().suggest(trial_id)
        if not self._hp_conditional or not isinstance(config, dict):
            return config
        _, doc = self.live_trials[trial_id]
        vals, idxs = doc["misc"]["vals"], doc["misc"]["idxs"]
        searched = searched_params(self._hp_tree)
        drawn = {n: _from_hyperopt(p, vals[label(n)][0]) for n, p in searched.items() if vals.get(label(n))}
        active = complete_point(self._hp_tree, drawn)
        for name in drawn:
            if name not in active:  # drawn in an active branch, but another condition is false
                vals[label(name)], idxs[label(name)] = [], []
        self.hyperopt_trials.refresh()
        return self._config(active)

    def _config(self, flat: Mapping[str, Any]) -> dict[str, Any]:
        """The config Tune gets, constants included (as HyperOpt's own suggestions hold them)."""
        return nested_config(flat)

    def _sample(self, param: Param) -> Any:
        value = tune_domain(param, "random").sample(random_state=self.rstate)
        return value.item() if hasattr(value, "item") else value
