"""A search's room on a shared cluster, without a cluster: the gated searchers and the keeper's beats.

The register is the real :class:`~hpsearch.planning.shares.Book`, called in this process in place of its
actor; Tune's own searchers make the trials.
"""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest
from ray import tune
from ray.tune.search.basic_variant import BasicVariantGenerator

from hpsearch.planning.planner import Node, TrialDemand
from hpsearch.planning.shares import Book, Entry
from hpsearch.runtime.search import room
from hpsearch.runtime.search.plugins import SearcherContext, build_searcher
from hpsearch.spec.plugins import PluginChoice, RandomOptions

NODES = [Node({"CPU": 1.0}, node_id="h1", is_head=True), Node({"CPU": 1.0}, node_id="h2")]
ONE = TrialDemand(driver={"CPU": 0.1}, worker={"CPU": 0.8}, num_workers=1)


@pytest.fixture(autouse=True)
def _fresh_gate() -> Any:
    room.GATE.reset()
    yield
    room.GATE.reset()


def _loop(config: dict[str, Any]) -> None:
    """A trainable for Tune's registry: the searcher only names it."""


def _generator() -> BasicVariantGenerator:
    tune.register_trainable("hpsearch_room_test", _loop)  # held in this process until Ray starts
    searcher = build_searcher(PluginChoice("random", RandomOptions(seed=1)), SearcherContext("loss", "min", 4))
    searcher.add_configurations({"t": {"run": "hpsearch_room_test", "num_samples": 4, "config": {"x": 1}}})
    return searcher


def test_a_search_with_no_register_makes_every_trial_its_plan_allows() -> None:
    gen = _generator()
    assert isinstance(gen, room.GatedVariantGenerator)
    assert sum(gen.next_trial() is not None for _ in range(6)) == 4


def test_the_gated_searcher_makes_no_trial_beyond_the_share_and_more_once_room_is_granted() -> None:
    gen = _generator()
    room.GATE.allowed = 1
    assert gen.next_trial() is not None
    assert gen.next_trial() is None  # one made, not yet counted live by a step: still held
    room.GATE.live, room.GATE.started = 1, 0  # the next step counts it
    assert gen.next_trial() is None
    room.GATE.allowed = 2
    assert gen.next_trial() is not None


def test_a_population_is_made_whole_or_not_at_all() -> None:
    gen = _generator()
    room.GATE.whole, room.GATE.wanted, room.GATE.allowed = True, 2, 1
    assert gen.next_trial() is None
    room.GATE.allowed = 2
    assert sum(gen.next_trial() is not None for _ in range(6)) == 4  # the whole population


class _LocalRegister:
    """The register's actor methods, called in this process: ``.beat.remote(entry)`` returns the answer itself."""

    def __init__(self) -> None:
        self.book = Book()
        self.now = 0.0
        self.beat = SimpleNamespace(remote=lambda entry: self.book.beat(entry, NODES, self.now))
        self.leave = SimpleNamespace(remote=self.book.leave)


def _keeper(name: str, monkeypatch: pytest.MonkeyPatch, register: _LocalRegister) -> room.RoomKeeper:
    from hpsearch.runtime.nodes import register as register_module

    monkeypatch.setattr(room.ray_cluster, "shared_cluster", lambda: True)
    monkeypatch.setattr(register_module, "register", lambda: register)
    monkeypatch.setattr(room.ray, "get", lambda answer, timeout=None: answer)
    keeper = room.RoomKeeper(name=name, folder=f"/r/{name}", priority=1.0, demand=ONE, concurrency=2, total=2,
                             metric="loss", mode="min", whole=False)  # fmt: skip
    monkeypatch.setattr(room.RoomKeeper, "_loop", lambda self: None)  # the test beats by hand
    return keeper


def _trial(status: str) -> Any:
    return SimpleNamespace(status=status)


def test_the_keeper_beats_sets_the_gate_and_says_who_holds_the_room_once(monkeypatch, capsys) -> None:
    register = _LocalRegister()
    register.book.beat(Entry(key="other", name="digits-b", user="alice", host="h1", folder="/r/b", priority=1.0,
                             demand=ONE, wanted=2, running=2), NODES, 0.0)  # fmt: skip
    keeper = _keeper("digits-a", monkeypatch, register)
    keeper.setup()
    assert room.GATE.allowed == 0 and room.GATE.waiting == 2
    keeper._beat()  # the same line again: not said twice
    err = capsys.readouterr().err
    line = "waiting: 2 trials, the cluster's room is held by search digits-b (alice@h1, 2 trials at once, priority 1)"
    assert err.count(line) == 1, err
    keeper.on_trial_result(0, [], _trial("RUNNING"), {"loss": 0.5})
    register.book.leave("other")
    keeper._beat()
    assert (room.GATE.allowed, room.GATE.waiting) == (2, 0)
    assert "room     this search has the room it wants again: 2 trial(s) at once" in capsys.readouterr().err
    keeper.on_step_begin(1, [_trial("RUNNING"), _trial("PENDING"), _trial("TERMINATED")])
    assert (room.GATE.live, keeper._entry().running, keeper._entry().done, keeper._entry().best) == (2, 2, 1, 0.5)
    keeper.on_experiment_end([])
    assert register.book.entries == {} and room.GATE.allowed is None


def test_a_keeper_on_an_embedded_ray_registers_nothing_and_pickles_without_its_handle(monkeypatch) -> None:
    register = _LocalRegister()
    keeper = _keeper("digits-a", monkeypatch, register)
    monkeypatch.setattr(room.ray_cluster, "shared_cluster", lambda: False)
    keeper.setup()
    assert room.GATE.allowed is None and register.book.entries == {}
    keeper._handle = object()  # never pickled: Tune pickles its callbacks into the folder
    copy = pickle.loads(pickle.dumps(keeper))
    assert copy._handle is None and copy._template.name == "digits-a"
