"""Fair shares of a cluster between searches: the register's rules, pure, in milliseconds."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hpsearch.planning.planner import Node, TrialDemand
from hpsearch.planning.shares import TTL_S, Book, Entry, render_status, share_out, shared_plan, status_rows
from hpsearch.spec import load_spec

#: Two 1-CPU hosts; a trial is a 0.1-CPU driver on the head and one 0.8-CPU worker: 2 trials at once in all.
NODES = [Node({"CPU": 1.0}, node_id="h1", is_head=True), Node({"CPU": 1.0}, node_id="h2")]
ONE = TrialDemand(driver={"CPU": 0.1}, worker={"CPU": 0.8}, num_workers=1)
#: Eight 1-CPU hosts and trials of a 0.05-CPU driver and one 0.5-CPU worker: 14 trials at once.
WIDE = [Node({"CPU": 1.0}, node_id="head", is_head=True)] + [Node({"CPU": 1.0}, node_id=f"n{i}") for i in range(7)]
SMALL = TrialDemand(driver={"CPU": 0.05}, worker={"CPU": 0.5}, num_workers=1)


def entry(key: str, at: float = 0.0, demand: TrialDemand = ONE, **changes: object) -> Entry:
    base = Entry(key=key, name=key, user="alice", host="h1", folder=f"/r/{key}", priority=1.0, demand=demand,
                 wanted=2, joined_at=at, seen_at=at)  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]  # the test's own keyword values


def test_a_search_alone_gets_what_its_own_plan_wants_exactly_as_without_a_register() -> None:
    assert share_out(NODES, [entry("a", wanted=2)])["a"].granted == 2
    assert share_out(WIDE, [entry("a", demand=SMALL, wanted=13)])["a"].granted == 13  # its plan, not a re-count
    book = Book()
    allotment, line = book.beat(entry("a"), NODES, now=0.0)
    assert (allotment.share, allotment.granted, line) == (2, 2, None)


def test_equal_searches_get_equal_shares_and_a_priority_of_two_counts_twice() -> None:
    shares = share_out(WIDE, [entry("a", 0, SMALL, wanted=16), entry("b", 1, SMALL, wanted=16)])
    assert (shares["a"].share, shares["b"].share) == (7, 7)  # the 14 the cluster holds, halved
    weighted = share_out(WIDE, [entry("a", 0, SMALL, wanted=16), entry("b", 1, SMALL, wanted=16, priority=3.0)])
    assert (weighted["a"].share, weighted["b"].share) == (3, 11)  # 3.5 and 10.5, whole trials
    few = share_out(WIDE, [entry("a", 0, SMALL, wanted=2), entry("b", 1, SMALL, wanted=16)])
    assert (few["a"].share, few["b"].share) == (2, 12)  # what one search does not want goes to the other


def test_shares_count_each_search_by_its_scarcest_resource() -> None:
    """A search of 2-worker trials takes twice the room of one of 1-worker trials: equal priority, equal room."""
    double = TrialDemand(driver={"CPU": 0.05}, worker={"CPU": 0.5}, num_workers=3)
    shares = share_out(WIDE, [entry("a", 0, SMALL, wanted=16), entry("b", 1, double, wanted=16)])
    room = {k: a.share * d.total()["CPU"] for (k, a), d in zip(shares.items(), (SMALL, double), strict=True)}
    assert abs(room["a"] - room["b"]) <= double.total()["CPU"], (shares, room)


def test_running_trials_are_never_stopped_and_the_newcomer_waits_naming_who_holds_the_room() -> None:
    book = Book()
    book.beat(entry("a", running=2), NODES, now=0.0)  # alone: both slots
    allotment, line = book.beat(entry("b", 1.0), NODES, now=1.0)
    assert (allotment.share, allotment.granted) == (1, 0)
    assert line == "waiting: 2 trials, the cluster's room is held by search a (alice@h1, 2 trials at once, priority 1)"
    above, _ = book.beat(entry("a", running=2), NODES, now=2.0)
    assert above.granted == 1  # its two trials run on, but it starts no other while it has one
    assert book.beat(entry("b", 1.0), NODES, now=2.5)[0].granted == 0  # a's two still hold both slots
    book.beat(entry("a", running=1, done=1), NODES, now=3.0)  # one ended: a starts none in its place
    book.beat(entry("a", running=1, done=1), NODES, now=6.0)
    room, line = book.beat(entry("b", 1.0), NODES, now=7.0)
    assert room.granted == 1  # its share; its second trial waits for a's last one
    assert line == "waiting: 1 trial, the cluster's room is held by search a (alice@h1, 1 trial at once, priority 1)"


def test_two_searches_are_never_granted_the_same_room_before_the_first_has_said_what_it_uses() -> None:
    """The first search was granted both slots alone and may have started trials in them a moment before
    its grant fell: the second search gets none of that room until the first's heartbeats show it is free."""
    book = Book()
    book.beat(entry("a"), NODES, now=0.0)
    assert book.beat(entry("b", 1.0), NODES, now=0.5)[0].granted == 0
    assert book.beat(entry("a", running=1), NODES, now=1.0)[0].granted == 1  # down to its share ...
    assert book.beat(entry("b", 1.0), NODES, now=1.5)[0].granted == 0  # ... which it may not have seen yet
    book.beat(entry("a", running=1), NODES, now=4.0)  # it has: it runs one
    assert book.beat(entry("b", 1.0), NODES, now=4.5)[0].granted == 1


def test_freed_room_goes_to_the_search_furthest_below_its_share() -> None:
    """c arrives at priority 2: shares a 1, b 0, c 1. When b's trial ends, its slot is c's, not b's again."""
    book = Book()
    book.beat(entry("a", 0.0, running=1, wanted=1), NODES, now=0.0)
    book.beat(entry("b", 1.0, running=1, wanted=1), NODES, now=1.0)
    waits, line = book.beat(entry("c", 2.0, priority=2.0, wanted=1), NODES, now=2.0)
    assert (waits.share, waits.granted) == (1, 0)
    assert line is not None and "held by search b (alice@h1, 1 trial at once, priority 1)" in line
    for now in (3.0, 6.0):  # b's trial ended, and b wants another
        b_after, _ = book.beat(entry("b", 1.0, running=0, done=1, wanted=1), NODES, now=now)
        assert (b_after.share, b_after.granted) == (0, 0)  # its share went to c
    c_now, line = book.beat(entry("c", 2.0, priority=2.0, wanted=1), NODES, now=7.0)
    assert (c_now.granted, line) == (1, None)


def test_a_population_gets_all_its_slots_at_once_or_waits_whole() -> None:
    book = Book()
    book.beat(entry("a", running=1, wanted=1), NODES, now=0.0)
    whole, line = book.beat(entry("pbt", 1.0, wanted=2, whole=True), NODES, now=1.0)
    assert (whole.share, whole.granted) == (0, 0)  # two slots together do not fit beside a's trial
    assert line is None or "waiting" in line
    book.leave("a")
    whole, _ = book.beat(entry("pbt", 1.0, wanted=2, whole=True), NODES, now=2.0)
    assert whole.granted == 2


def test_a_search_not_heard_from_within_the_ttl_is_dropped_and_its_room_freed() -> None:
    book = Book()
    book.beat(entry("a", running=2), NODES, now=0.0)
    assert book.beat(entry("b", 1.0), NODES, now=1.0)[0].granted == 0
    assert [e.key for e, _ in book.listing(NODES, now=TTL_S - 1)] == ["a", "b"]
    allotment, line = book.beat(entry("b", 1.0), NODES, now=TTL_S + 1)  # a died: no beat since 0.0
    assert (allotment.granted, line) == (2, None)
    assert [e.key for e, _ in book.listing(NODES, now=TTL_S + 2)] == ["b"]


def test_status_shows_every_search_its_share_and_who_its_waiting_trials_wait_for() -> None:
    book = Book()
    book.beat(entry("a", running=2, done=1, total=4, best=0.25, metric="loss"), NODES, now=0.0)
    book.beat(entry("b", 1.0, total=2, metric="loss", priority=2.0), NODES, now=1.0)
    listing = book.listing(NODES, now=2.0)
    text = render_status(listing, NODES, "the cluster at 10.0.0.1:6379")
    assert text.splitlines()[0] == "Searches on the cluster at 10.0.0.1:6379 (2 nodes: {CPU: 2})"
    assert "a       alice@h1  1         {CPU: 0.9}  1      2        2        1/4   loss=0.25  /r/a" in text, text
    assert "  b: waiting: 2 trials, the cluster's room is held by search a (alice@h1, 2 trials at once" in text, text
    rows = json.loads(json.dumps(status_rows(listing)))
    assert rows[1] | {"share": 1, "at_once": 0, "waiting": 2, "priority": 2.0, "folder": "/r/b"} == rows[1]
    assert render_status([], NODES, "x").endswith("none: no hpsearch search is running on this cluster")


@pytest.mark.parametrize("running", [[], ["a"]])
def test_plan_address_says_what_this_spec_would_get_beside_the_searches_running(tmp_path, running) -> None:
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "name: mine\ntrainable: hpsearch.examples.digits:train_loop\nmetric: loss\nmode: min\nnum_samples: 2\n"
        "search_space: {lr: {type: float, low: 0.001, high: 0.1}}\n"
        "scaling: {num_workers: 1, resources_per_worker: {CPU: 0.8}}\n"
        "resources: {driver_cpus: 0.1, driver_memory_gb: 0, worker_memory_gb: 0}\n"
        f"storage_path: {tmp_path}\n"
    )
    spec = load_spec(spec_file)
    from hpsearch.planning.for_spec import plan_for

    plan = plan_for(spec, NODES)
    others = [entry("a", running=2, granted=2)] if running else []
    out = shared_plan(spec, plan, NODES, others)
    if not running:
        assert out["at_once_now"] == 2 and "none runs on this cluster now" in out["text"]
    else:
        assert (out["share"], out["at_once_now"], out["alone"]) == (1, 0, 2)
        assert "held by search a (alice@h1, 2 trials at once, priority 1)" in out["text"], out["text"]
