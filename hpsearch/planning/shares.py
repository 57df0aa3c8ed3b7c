"""Fair shares of one cluster between the searches that run on it, and the register that holds them.

Pure: no Ray. The register's actor (:mod:`hpsearch.runtime.nodes.register`) keeps a :class:`Book` and
answers each search's heartbeat with its :class:`Allotment`; ``hpsearch status`` and ``plan --address``
read the same book.

The rules:

- **Shares.** Each search's *share* is the trials at once it would get if every search ran as many as
  it wants: trials are handed out one at a time to the search whose dominant resource use, divided
  by its priority, is lowest (weighted dominant-resource fairness), each placed node by node with the
  planner, until no search wants more or no more fit (ties go to the search that would be least served
  after one more trial, then to the earliest). Equal priorities give equal shares of the
  cluster's scarcest resource; priority 2 counts twice.
- **Room now.** A search may have ``granted`` trials at once: it starts a trial only while it has
  fewer. Running trials are never stopped to make room, but a search above its share starts no
  more. Every other search counts the room a search was granted, at its last two heartbeats, or its
  running trials if more, as held (it may have started trials in it a moment before its grant fell);
  the room left goes, one trial at a time, to the search furthest below its share. So no search starts a trial
  that cannot be placed beside the others': its worker group never waits for room another search holds.
- **Whole searches.** A population-based search must run its population's slots together: it gets
  them all at once, or none.
- **Alone.** A search with no other on the cluster is granted what it wants: its own plan decides,
  exactly as without a register.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hpsearch.errors import PlanError
from hpsearch.formatting import number, plural, text_table
from hpsearch.planning.for_spec import demand_for
from hpsearch.planning.planner import Node, Plan, TrialDemand, plan_trials
from hpsearch.planning.resources import fmt_resources
from hpsearch.spec import Spec

__all__ = [
    "Entry",
    "Allotment",
    "Book",
    "share_out",
    "waiting_line",
    "would_get",
    "status_rows",
    "shared_plan",
    "render_status",
    "TTL_S",
    "BEAT_S",
]

#: A search not heard from for this long is dropped from the register: its process died, or lost
#: the cluster. Searches beat every :data:`BEAT_S` seconds.
TTL_S = 30.0
#: How often a search tells the register where it stands.
BEAT_S = 3.0
#: Resource amounts below this are nothing (Ray's fixed-point unit).
_EPS = 1e-4


@dataclass(frozen=True)
class Entry:
    """One search as the register knows it.

    ``wanted`` is how many trials it could run at once now (its plan's concurrency, fewer near its
    end); ``running`` how many it runs; ``whole``: all ``wanted`` at once or none (a PBT population).
    """

    key: str
    name: str
    user: str
    host: str
    folder: str
    priority: float
    demand: TrialDemand
    wanted: int
    running: int = 0
    done: int = 0
    total: int | None = None
    best: float | None = None
    metric: str = ""
    whole: bool = False
    joined_at: float = 0.0
    seen_at: float = 0.0
    granted: int = 0
    previous: int = 0

    def who(self) -> str:
        """``user@host``, as people name a search's owner."""
        return f"{self.user}@{self.host}"

    def at_once(self) -> int:
        """The trials at once this search holds room for: those running or starting, or its grant if more."""
        return max(self.running, self.granted, self.previous)

    def as_dict(self) -> dict[str, Any]:
        """The entry as ``hpsearch status --format json`` writes it (without the demand's internals)."""
        return {
            "name": self.name,
            "user": self.user,
            "host": self.host,
            "folder": self.folder,
            "priority": self.priority,
            "trial_needs": fmt_resources(self.demand.total(memory_estimates=False)),
            "wanted": self.wanted,
            "running": self.running,
            "done": self.done,
            "total": self.total,
            "metric": self.metric,
            "best": self.best,
            "whole": self.whole,
        }


@dataclass(frozen=True)
class Allotment:
    """A search's part of the cluster: its fair ``share``, the trials at once it may run now (``granted``),
    and those it wants beyond them, which wait.

    ``held_by`` names the searches holding the room its waiting trials would take: first those running
    more than their share, else every other search that holds room.
    """

    share: int
    granted: int
    held_by: tuple[str, ...] = ()
    wanted: int = 0
    running: int = 0

    @property
    def waiting(self) -> int:
        """Trials this search would run now if it were alone: the room they need is held by others."""
        return max(0, self.wanted - max(self.granted, self.running))


def _free(nodes: Sequence[Node]) -> list[Node]:
    return [
        Node(dict(n.resources), node_id=n.node_id or f"node-{i}", is_head=n.is_head, labels=n.labels)
        for i, n in enumerate(nodes)
    ]


def _place(free: list[Node], demand: TrialDemand, count: int) -> list[Node] | None:
    """The nodes' free room after ``count`` more trials of ``demand``, or ``None`` when they do not fit.

    Trials are placed a few at a time, so the head's room is kept for the drivers that must run there:
    workers go to the other nodes first, and to the head only when they fit nowhere else.
    """
    if count <= 0:
        return free
    if demand.driver_node == "head":
        head = next((i for i, n in enumerate(free) if n.is_head), 0)
        drivers_only = {k: min(free[head].resources.get(k, 0.0), v * count) for k, v in demand.driver_bundle().items()}
        kept = [replace(n, resources=drivers_only) if i == head else n for i, n in enumerate(free)]
        placed = _place_on(kept, free, demand, count)
        if placed is not None:
            return placed
    return _place_on(free, free, demand, count)


def _place_on(view: list[Node], free: list[Node], demand: TrialDemand, count: int) -> list[Node] | None:
    """``_place`` on ``view`` (the nodes as the planner may use them), taken from ``free``."""
    try:
        plan = plan_trials(view, demand, requested=count)
    except PlanError:
        return None
    left = {n.node_id: dict(n.resources) for n in free}
    driver, worker = demand.driver_bundle(), demand.worker_bundle()
    for placement in plan.placements:
        for node_id, bundle in [(placement.driver_node, driver), *((w, worker) for w in placement.worker_nodes)]:
            room = left[node_id]
            for key, amount in bundle.items():
                room[key] = max(0.0, room.get(key, 0.0) - amount)
    return [replace(n, resources=left[n.node_id]) for n in free]


def _dominant(demand: TrialDemand, totals: Mapping[str, float]) -> float:
    """One trial's largest fraction of any resource the cluster has."""
    shares = [amount / totals[key] for key, amount in demand.total().items() if totals.get(key, 0.0) > _EPS]
    return max(shares, default=1.0)


def _shares(nodes: Sequence[Node], entries: Sequence[Entry]) -> dict[str, int]:
    """Each search's fair share of trials at once (see the module's rules)."""
    totals: dict[str, float] = {}
    for node in nodes:
        for key, amount in node.resources.items():
            totals[key] = totals.get(key, 0.0) + float(amount)
    share = {e.key: 0 for e in entries}
    free = _free(nodes)
    open_ = [e for e in entries if e.wanted > 0]
    while open_:
        # The search least served once it has one more trial: so a higher priority also breaks ties.
        pick = min(
            open_, key=lambda e: ((share[e.key] + 1) * _dominant(e.demand, totals) / e.priority, e.joined_at, e.key)
        )
        step = pick.wanted if pick.whole else 1
        after = _place(free, pick.demand, step)
        if after is None:
            open_.remove(pick)
            continue
        free, share[pick.key] = after, share[pick.key] + step
        if pick.whole or share[pick.key] >= pick.wanted:
            open_.remove(pick)
    return share


def share_out(nodes: Sequence[Node], entries: Sequence[Entry], asking: str | None = None) -> dict[str, Allotment]:
    """Every search's :class:`Allotment` on ``nodes`` (their total resources), by the module's rules.

    ``asking`` is the search whose heartbeat this answers: only its grant moves now, down to its share
    (it then starts no trial while it has as many as that) or up by the room left. Every other search
    holds the room it was granted at its last two heartbeats, or its running trials if more, because it
    may have started trials in it a moment before its grant fell; so no two searches are ever granted the
    same room. Without ``asking`` (``hpsearch status``), every grant stays as it was told.
    """
    live = [e for e in entries if e.wanted > 0 or e.running > 0]
    if len(live) <= 1:  # alone: its own plan decides
        return {
            e.key: Allotment(share=e.wanted, granted=max(e.wanted, e.running), wanted=e.wanted, running=e.running)
            for e in entries
        }
    share = _shares(nodes, live)
    told = {e.key: e.at_once() for e in live}
    held = dict(told)
    kept = 0
    if asking in held:  # its grant above its share is taken back, never its running trials
        mine = next(e for e in live if e.key == asking)
        kept = min(max(mine.granted, mine.running), share[asking])  # its running trials within its share stay granted
        held[asking] = max(mine.running, kept)
    free: list[Node] | None = _free(nodes)
    for e in sorted(live, key=lambda e: e.joined_at):
        free = _place(free, e.demand, held[e.key]) if free is not None else None
    # The room left goes to the searches furthest below their shares first: the asking search takes only
    # what is left once those further below than it have theirs (they take it at their own heartbeats).
    below = [e for e in live if held[e.key] < share[e.key]]
    while below and free is not None:
        pick = min(below, key=lambda e: (held[e.key] / max(share[e.key], 1), e.joined_at, e.key))
        step = share[pick.key] - held[pick.key] if pick.whole else 1
        after = _place(free, pick.demand, step)
        if after is None:
            below.remove(pick)
            continue
        free, held[pick.key] = after, held[pick.key] + step
        if pick.key == asking:
            kept += step
        if held[pick.key] >= share[pick.key]:
            below.remove(pick)
    over = tuple(e.key for e in live if e.running > share[e.key])
    out = {}
    for e in entries:
        if e.key not in share:
            out[e.key] = Allotment(share=0, granted=e.running, wanted=e.wanted, running=e.running)
            continue
        granted = kept if e.key == asking else told[e.key]
        waits = max(granted, e.running) < e.wanted
        holders = tuple(k for k in over if k != e.key) if waits else ()
        if waits and not holders:  # nobody is over its share: the room is held by the searches' fair use
            holders = tuple(o.key for o in live if o.key != e.key and max(o.running, told[o.key]) > 0)
        out[e.key] = Allotment(share=share[e.key], granted=granted, held_by=holders, wanted=e.wanted, running=e.running)
    return out


def waiting_line(waiting: int, holders: Sequence[Entry]) -> str:
    """What a search says while its trials wait for room: who holds the room, and how."""
    trials = f"{waiting} trial{'s' if waiting != 1 else ''}"
    if not holders:
        return f"waiting: {trials}, the cluster has no room for another now"
    named = "; ".join(
        f"search {h.name} ({h.who()}, {plural(h.at_once(), 'trial')} at once, priority {h.priority:g})" for h in holders
    )
    return f"waiting: {trials}, the cluster's room is held by {named}"


@dataclass
class Book:
    """The register's memory: the searches heard from within :data:`TTL_S`, and their allotments.

    Each search's heartbeat carries its whole entry, so a register that restarts is whole again after
    one beat of each search.
    """

    entries: dict[str, Entry] = field(default_factory=dict)
    ttl_s: float = TTL_S

    def expire(self, now: float) -> list[Entry]:
        """Drop the searches not heard from within the TTL; return them."""
        gone = [e for e in self.entries.values() if now - e.seen_at > self.ttl_s]
        for e in gone:
            del self.entries[e.key]
        return gone

    def beat(self, entry: Entry, nodes: Sequence[Node], now: float) -> tuple[Allotment, str | None]:
        """Record ``entry`` as it stands now; return its allotment and, when its trials wait, the line that says so."""
        self.expire(now)
        earlier = self.entries.get(entry.key)
        joined = earlier.joined_at if earlier is not None else now
        granted = earlier.granted if earlier is not None else 0
        self.entries[entry.key] = replace(entry, joined_at=joined, seen_at=now, granted=granted, previous=granted)
        mine = share_out(nodes, list(self.entries.values()), asking=entry.key)[entry.key]
        self.entries[entry.key] = replace(self.entries[entry.key], granted=mine.granted)
        line = None
        if mine.waiting:
            line = waiting_line(mine.waiting, [self.entries[k] for k in mine.held_by if k in self.entries])
        return mine, line

    def leave(self, key: str) -> None:
        """A search that ended: its room is free at once."""
        self.entries.pop(key, None)

    def listing(self, nodes: Sequence[Node], now: float) -> list[tuple[Entry, Allotment]]:
        """Every search on the register, by arrival, with its allotment as the book counts it now."""
        self.expire(now)
        allotments = share_out(nodes, list(self.entries.values()))
        return [(e, allotments[e.key]) for e in sorted(self.entries.values(), key=lambda e: e.joined_at)]


def would_get(nodes: Sequence[Node], entries: Sequence[Entry], newcomer: Entry) -> Allotment:
    """What ``newcomer`` would be allotted if it joined the searches ``entries`` now (``plan --address``)."""
    joined = replace(newcomer, joined_at=math.inf)
    return share_out(nodes, [*entries, joined])[joined.key]


def status_rows(listing: Sequence[tuple[Entry, Allotment]]) -> list[dict[str, Any]]:
    """``hpsearch status --format json``'s searches: each entry's fields, its share and what it runs."""
    return [{**e.as_dict(), "share": a.share, "at_once": a.granted, "waiting": a.waiting} for e, a in listing]


def render_status(listing: Sequence[tuple[Entry, Allotment]], nodes: Sequence[Node], where: str) -> str:
    """``hpsearch status``: every search on the cluster, its share, trials running/done/total, best value and folder."""
    totals: dict[str, float] = {}
    for node in nodes:
        for key, amount in node.resources.items():
            totals[key] = totals.get(key, 0.0) + float(amount)
    head = f"Searches on {where} ({plural(len(nodes), 'node')}: {fmt_resources(totals)})"
    if not listing:
        return f"{head}\n  none: no hpsearch search is running on this cluster"
    by = {e.key: e for e, _ in listing}
    rows = [["search", "owner", "priority", "one trial", "share", "at once", "running", "done", "best", "folder"]]
    waits = []
    for e, a in listing:
        best = f"{e.metric}={number(e.best)}" if e.best is not None else "-"
        done = f"{e.done}/{e.total}" if e.total is not None else str(e.done)
        share = f"{a.share} (all or none)" if e.whole else str(a.share)
        rows.append(
            [
                e.name,
                e.who(),
                f"{e.priority:g}",
                fmt_resources(e.demand.total(memory_estimates=False)),
                share,
                str(a.granted),
                str(e.running),
                done,
                best,
                e.folder,
            ]
        )
        if a.waiting:
            waits.append(f"  {e.name}: " + waiting_line(a.waiting, [by[k] for k in a.held_by if k in by]))
    return "\n".join([head, text_table(rows, indent="  "), *waits])


def shared_plan(spec: Spec, plan: Plan, nodes: Sequence[Node], running: Sequence[Entry]) -> dict[str, Any]:
    """``plan --address``: what the spec's search would get beside the searches ``running`` on the cluster now.

    The result holds the share, the trials at once it could start now, the searches it would wait for,
    and ``text``, the lines ``plan`` prints.
    """
    newcomer = Entry(
        key="(this spec)",
        name=spec.name,
        user="you",
        host="",
        folder=str(spec.experiment_dir),
        priority=spec.resources.priority,
        demand=demand_for(spec),
        wanted=plan.max_concurrent_trials,
        whole=spec.population_based,
    )
    mine = would_get(nodes, running, newcomer)
    alone = plan.max_concurrent_trials
    if not running:
        text = f"Beside other searches: none runs on this cluster now, so this search gets its plan: {alone} at once"
    else:
        names = ", ".join(f"{e.name} ({e.who()}, priority {e.priority:g})" for e in running)
        text = (
            f"Beside the {plural(len(running), 'search', 'searches')} running ({names}): a share of "
            f"{mine.share} trial(s) at once at priority {spec.resources.priority:g} (alone: {alone}); "
            f"{mine.granted} could start now"
        )
        if mine.waiting:
            holders = [e for e in running if e.key in mine.held_by]
            text += "\n" + waiting_line(mine.waiting, holders)
    return {
        "share": mine.share,
        "at_once_now": mine.granted,
        "alone": alone,
        "beside": [e.as_dict() for e in running],
        "text": text,
    }
