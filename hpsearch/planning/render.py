"""The resource plan as a table a person reads (``hpsearch plan``) or JSON for scripts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hpsearch.formatting import duration, hours, plural, text_table
from hpsearch.planning.cluster_shape import cluster_text
from hpsearch.planning.helper_cpu import HELPER_CPU
from hpsearch.planning.planner import Plan
from hpsearch.planning.preemption import Cadence, spot_lines
from hpsearch.planning.resources import GB, MEMORY, fmt_resources
from hpsearch.spec.budget import format_duration

if TYPE_CHECKING:  # pragma: no cover
    from hpsearch.planning.autoscale import AutoscalingPlan
    from hpsearch.planning.estimate import Estimate, Spread

__all__ = ["render_plan", "render_autoscaling", "describe_groups", "render_estimate"]

_MAX_ROWS = 20


def _pct(used: float, total: float) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def _cell(key: str, used: float, total: float) -> str:
    if not total:
        return "-"
    if key == MEMORY:
        return f"{used / GB:.1f}/{total / GB:.1f} GiB ({_pct(used, total)})"
    return f"{used:g}/{total:g} ({_pct(used, total)})"


def render_plan(plan: Plan, *, title: str, total_trials: int | None = None, cadence: Cadence | None = None) -> str:
    """A readable plan: per-trial demand, trials at once, per-node placement, utilisation, idle, warnings; with
    workers on spot nodes, what a preemption costs a trial at the checkpoint ``cadence`` (``None``: one per report,
    assumed; :func:`~hpsearch.planning.estimate.workload.cadence_for` reads the spec's)."""
    d = plan.demand
    driver_where = "on the head node" if d.driver_node == "head" else "on any node"
    lines = [
        title,
        f"  per trial       driver {fmt_resources(d.driver_bundle())} {driver_where}"
        f" + {d.num_workers} worker(s) x {fmt_resources(d.worker_bundle())}, placed {d.strategy}",
        f"                  = {fmt_resources(plan.per_trial)}",
        *_searched_lines(plan),
        f"  trials at once  {plan.max_concurrent_trials}"
        + (f" (of {total_trials} in total)" if total_trials is not None else "")
        + (f"; the cluster fits {plan.capacity}" if plan.capacity != plan.max_concurrent_trials else ""),
        *_elastic_lines(plan, total_trials),
    ]
    if plan.reserved:
        share = plan.data_cpus_per_trial
        lines.append(
            f"  kept free       {fmt_resources(plan.reserved)} on the head node for Ray Data's tasks (data.cpus)"
            + (f"; each trial's data executor at most {share:g} CPU" if share is not None else "")
        )
    lines += [""]
    keys = [k for k in plan.totals() if plan.totals()[k] > 0]
    keys.sort(key=lambda k: (k != "CPU", k != "GPU", k == MEMORY, k))
    header = ["nodes", "head", "drivers", "workers", *keys] + (["kept free"] if plan.reserved else [])
    rows: list[list[str]] = []
    groups: dict[tuple[bool, int, int, tuple[str, ...]], int] = {}
    order: list[tuple[bool, int, int, tuple[str, ...]]] = []
    for u in plan.usage:
        cells = tuple(_cell(k, u.used.get(k, 0), u.total.get(k, 0)) for k in keys)
        if plan.reserved:
            cells += (fmt_resources(u.reserved)[1:-1] or "-",)
        key = (u.is_head, u.drivers, u.workers, cells)
        if key not in groups:
            order.append(key)
            groups[key] = 0
        groups[key] += 1
    for key in order[:_MAX_ROWS]:
        is_head, drivers, workers, cells = key
        rows.append([f"{groups[key]}x", "yes" if is_head else "", str(drivers), str(workers), *cells])
    lines += text_table([header, *rows], indent="  ").splitlines()
    if len(order) > _MAX_ROWS:
        lines.append(f"  ... and {len(order) - _MAX_ROWS} more kinds of node (see --format json)")
    util = plan.utilisation()
    idle = plan.idle()
    lines += [
        "",
        "  utilisation     " + ", ".join(f"{k} {100 * util[k]:.0f}%" for k in keys),
        "  idle            " + (fmt_resources({k: idle[k] for k in keys if idle[k] > 1e-9})[1:-1] or "nothing"),
    ]
    lines += _helper_lines(plan)
    lines += spot_lines(plan, cadence)
    if plan.warnings:
        lines += ["  notes"] + [f"    - {w}" for w in plan.warnings]
    return "\n".join(lines)


def _helper_lines(plan: Plan) -> list[str]:
    """What the plan leaves out: the CPU each trial's helper processes use on its driver's node (measured)."""
    h = HELPER_CPU
    where = "the head node" if plan.demand.driver_node == "head" else "its driver's node"
    at_once = plan.max_concurrent_trials
    return [
        f"  not reserved    about {h.cpu_s:.0f} CPU-seconds per trial on {where} as it starts, reports and ends,",
        f"                  in its {', '.join(h.processes)} (Ray starts them with 0 CPUs or little);",
        f"                  {at_once} starting at once: about {at_once * h.cpu_s:.0f} CPU-seconds "
        f"({h.ray_defaults_cpu_s:.0f} per trial with HPSEARCH_RAY_WORKAROUNDS=0)",
        f"                  measured: {h.measured}",
    ]


def _searched_lines(plan: Plan) -> list[str]:
    """With searched scaling: its values, and that the plan is for the largest trial of them."""
    if not plan.searched:
        return []
    values = "; ".join(f"{k} {list(v)}" for k, v in plan.searched.items())
    return [f"  searched        {values}", f"                  {plan.planned_for}"]


def _elastic_lines(plan: Plan, total_trials: int | None = None) -> list[str]:
    """Elastic trials: planned at the minimum; what the maximum takes; what each trial at once starts with."""
    e = plan.elastic
    if not e:
        return []
    low, high = e["min_workers"], e["max_workers"]
    fits = e["trials_at_once_at_max"]
    lines = [
        f"  elastic         {low} to {high} workers per trial (scaling.num_workers), planned at the minimum ({low})",
        f"                  at the maximum a trial = {fmt_resources(e['per_trial_at_max'])}; "
        + (
            f"trials at once at the maximum: {fits}"
            if fits
            else f"no trial of {high} workers fits: {e.get('at_max_reason', '')}"
        ),
    ]
    starts = list(e.get("start_workers") or [])[:total_trials]
    running = [n for n in starts if n]
    waiting = len(starts) - len(running)
    if starts:
        lines.append(
            "                  Ray gives room to the earliest trial first: the trials at once start with "
            + (" + ".join(str(n) for n in running) + " workers" if running else "no workers")
            + (f"; {waiting} of them wait for an earlier trial to end" if waiting else "")
        )
    if waiting and e.get("all_start_at_once"):
        lines.append(
            f"                  (resources.max_concurrent_trials: {e['all_start_at_once']} starts every trial at once)"
        )
    interval = e.get("resize_interval_s")
    lines.append(
        f"                  a running trial grows when room appears, checked every {interval or 60:g} s"
        + ("" if interval else " (Ray's default; scaling.resize_interval_s)")
        + "; each resize restarts its workers from the latest checkpoint"
    )
    return lines


def describe_groups(plan: AutoscalingPlan) -> str:
    """``1x{CPU: 8, memory: 32 GiB} + 0..4x{CPU: 8, GPU: 8}``: the node groups for people (the plan's title).

    ``hpsearch plan --format json`` writes them as ``--cluster`` reads them back
    (:func:`~hpsearch.planning.cluster_shape.cluster_text`).
    """
    return cluster_text(plan.groups, exact=False)


def render_autoscaling(
    plan: AutoscalingPlan, *, title: str, total_trials: int | None = None, cadence: Cadence | None = None
) -> str:
    """An autoscaling cluster's plans: at the minimum size, at the maximum size, and what each extra node adds.

    At the minimum size a spec whose trial does not fit yet is not refused: its trials wait for
    the autoscaler to start a node, and the plan says so with the reason.
    """
    low, high = plan.min_nodes, plan.max_nodes
    lines = [title, ""]
    min_title = f"At the minimum size ({plural(low, 'node')})"
    if plan.at_min is not None:
        lines.append(render_plan(plan.at_min, title=min_title, total_trials=total_trials, cadence=cadence))
    else:
        lines += [
            min_title,
            f"  trials at once  0: {plan.min_reason}",
            "                  trials wait for the autoscaler to start a node (see what each extra node adds below)",
        ]
    lines += [
        "",
        render_plan(
            plan.at_max,
            title=f"At the maximum size ({plural(high, 'node')})",
            total_trials=total_trials,
            cadence=cadence,
        ),
    ]
    if plan.per_node:
        lines += ["", "As the autoscaler adds nodes (the other groups at their minimum)"]
        lines += [f"  {g.describe()}" for g in plan.per_node]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the estimate (plan --estimate)

#: The scheduler options the estimate's text names, per scheduler (what shapes its schedule).
_SCHEDULE_OPTIONS = {
    "asha": ("grace_period", "reduction_factor", "max_t", "brackets"),
    "hyperband": ("reduction_factor", "max_t"),
    "median": ("grace_period", "min_samples_required"),
    "pbt": ("perturbation_interval", "quantile_fraction", "synch"),
    "pb2": ("perturbation_interval", "quantile_fraction", "synch"),
}


def _seconds(value: float) -> str:
    return f"{value:.3g} s"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _share(value: float) -> str:
    return f"{100 * value:.0f}%"


def _spread(spread: Spread, fmt: Callable[[float], str]) -> str:
    return spread.text(fmt)


def _cpus(value: float | None) -> str:
    return "?" if value is None else f"{value:.2g}"


def render_estimate(est: Estimate, *, title: str | None = None) -> str:
    """The estimate as ``hpsearch plan --estimate`` prints it under the plan: inputs, wall time, resource-hours,
    the work the scheduler leaves, whether and when a budget ends the search, and what the model leaves out."""
    w, t = est.workload, est.timing
    options = ", ".join(
        f"{k} {w.options[k]:g}" if isinstance(w.options[k], float) else f"{k} {w.options[k]}"
        for k in _SCHEDULE_OPTIONS.get(w.scheduler, ())
        if k in w.options and not (k == "brackets" and w.options[k] == 1)
    )
    epochs = "/".join(str(e) for e in w.epochs)
    lines = [
        title or f"Estimate: {plural(w.trials, 'trial')}, {est.slots} at once, scheduler {w.scheduler}",
        f"  inputs          start-up {_seconds(t.startup_s)}"
        + (f" (later trials {_seconds(t.later_startup_s)})" if t.later_startup_s != t.startup_s else "")
        + f", {_seconds(t.epoch_s)} per epoch, teardown {_seconds(t.teardown_s)}"
        + (f", a restarted run's start-up {_seconds(t.restart_s)}" if t.restore_s is not None else "")
        + (
            f"; alone, a trial keeps {_cpus(t.startup_cpus)} CPUs busy starting and {_cpus(t.epoch_cpus)} training"
            if t.startup_cpus is not None or t.epoch_cpus is not None
            else ""
        ),
        f"                  {t.source}",
        f"  epochs          {epochs} per trial ({w.epochs_from})" + (f"; {w.scheduler}: {options}" if options else ""),
        f"  wall time       {_spread(est.wall, duration)}" + _ended(est),
        "  resource-hours  "
        + (
            ", ".join(f"{k} {_spread(s, hours)}" for k, s in est.resource_hours().items())
            or "none (a trial holds no resource)"
        ),
        f"  work            {_spread(est.epochs, _count)} "
        + (
            f"epochs trained ({_count(est.max_epochs)} if no exploit sent a trial back to its donor's epoch)"
            if w.scheduler in ("pbt", "pb2")
            else f"of {_count(est.max_epochs)} epochs trained"
        )
        + (
            f"; {_spread(est.stopped_early, _count)} trial(s) stopped early"
            if w.scheduler in ("asha", "hyperband", "median")
            else ""
        )
        + (f"; {_spread(est.restarts, _count)} restart(s)" if est.restarts.high > 0 else "")
        + f"; the slots train {_spread(est.utilisation, _share)} of the time",
    ]
    lines += _preemption_lines(est)
    budget = _budget_lines(est)
    lines += [f"  budget          {budget[0]}"] + [f"                  {b}" for b in budget[1:]]
    stalled = sum(1 for r in est.runs if r.stalled)
    notes = est.notes() + (
        [f"in {stalled} of {len(est.runs)} runs the modelled schedule stalled with trials paused for good"]
        if stalled
        else []
    )
    lines += ["  notes"] + [f"    - {n}" for n in notes]
    return "\n".join(lines)


def _figure(value: float) -> str:
    return f"{value:.3g}"


def _chance(share: float) -> str:
    """``about 4.2%``, or ``under 0.1%`` for what rounds to nothing."""
    return "under 0.1%" if share < 0.001 else f"about {100 * share:.2g}%"


def _preemption_lines(est: Estimate) -> list[str]:
    """``--preemption-rate``: the expected preemptions, what each costs its trial, the extra wall time and
    resource-hours (an expectation added to each simulated run, not simulated). Empty without a rate or spot nodes."""
    p = est.preemption()
    if p is None or "expected_preemptions" not in p:
        return []
    w, t = est.workload, est.timing
    extra = ", ".join(f"{k} +{_dict_spread(s, hours)}" for k, s in p["extra_resource_hours"].items())
    lines = [
        f"  preemptions     {t.preemption_rate:g} per spot node-hour (--preemption-rate) x "
        f"{_dict_spread(p['spot_node_hours'], _figure)} spot node-hours under the trials' workers: "
        f"{_dict_spread(p['expected_preemptions'], _figure)} expected",
        f"                  each costs its trial {_seconds(est.lost_per_preemption_s)} of training (half a checkpoint "
        f"interval of {w.cadence.mean:g} epoch(s) at {_seconds(t.epoch_s)} each) + {_seconds(t.restart_s)} to restart "
        f"(a restarted run's start-up) = {_seconds(est.per_preemption_s)}",
        f"                  {' '.join(w.cadence.lines())}",
        f"                  expected extra: wall time +{_dict_spread(p['extra_wall_time_s'], duration)}, "
        f"resource-hours {extra or 'none'}",
    ]
    if p["beyond_retries"] is not None and p["per_spot_trial"] > 0:
        lines.append(
            f"                  a trial on spot nodes expects {p['per_spot_trial']:.2g} preemption(s); "
            f"failure.preemption_retries {w.preemption_retries}: {_chance(p['beyond_retries'])} of them are "
            "preempted more often and error"
        )
    lines.append(
        f"                  an expectation added to each run, not simulated: the extra slot-time spread over the "
        f"{est.slots} trial(s) at once; not counted: preemptions during redone work, the budget's limits, the wait "
        "for a replacement node, and the preemption notice's checkpoint (the loss counted as if none came in time)"
    )
    return lines


def _ended(est: Estimate) -> str:
    """`` (ended by its budget in 14 of 20 runs)`` when a budget ends some of the simulated searches."""
    ended = sum(1 for r in est.runs if r.ended_by)
    return f" (ended by its budget in {ended} of {len(est.runs)} runs)" if ended else ""


def _budget_lines(est: Estimate) -> list[str]:
    """One line per modelled budget limit: whether it ends the search, in how many runs, and when."""
    limits = est.budget()
    if not limits:
        return ["none set (budget.max_wall_time, budget.max_resource_hours would be modelled)"]
    out = []
    for limit in limits:
        key, value = limit["key"], limit["limit"]
        shown = format_duration(value) if key.endswith("max_wall_time") else f"{value:g}"
        head = f"{key} {shown}: "
        if not limit["held"]:
            out.append(head + f"never reached: no trial holds {key.rsplit('.', 1)[1]}")
        elif limit["ends_search_in"]:
            at = limit["at_s"]
            started = limit["trials_started"]
            out.append(
                head
                + f"ends the search in {limit['ends_search_in']} of {limit['runs']} runs, at "
                + _dict_spread(at, duration)
                + f", {_dict_spread(started, _count)} of {est.workload.trials} trials started by then"
            )
        elif limit["reached_in"]:
            out.append(head + f"reached in {limit['reached_in']} of {limit['runs']} runs, after another limit")
        else:
            out.append(head + "not reached: the search ends before it")
    return out


def _dict_spread(values: dict[str, float], fmt: Callable[[float], str]) -> str:
    """A spread kept as a dict (``{low, median, high}``), written as :meth:`Spread.text` writes one."""
    low, high = fmt(values["low"]), fmt(values["high"])
    return low if low == high else f"{low} to {high} (median {fmt(values['median'])})"
