"""FSDP-sharded models and bfloat16 autocast, on CPU (gloo).

First without Ray: two processes of ``torch.distributed`` (gloo) run :func:`hpsearch.train.report` and
:func:`hpsearch.train.restore` on an FSDP model (``FullyShardedDataParallel`` as the digits loop wraps it on
CPU, and ``fully_shard``), with ``ray.train``'s report, context and checkpoint replaced by what Ray Train V2
does with them: one checkpoint folder per report for all ranks, each rank's files copied into it, the report
a barrier. Then the digits loop's ``precision: bf16`` in one process.

Then one search with Ray (marked ``ray``): the digits loop with ``parallel: fsdp`` and ``precision: bf16``,
and the Lightning loop with ``strategy: fsdp`` (Ray's ``RayFSDPStrategy``) and ``precision: bf16-mixed``,
2 workers of 0.45 CPU each, drivers of 0.05 CPU, 2 epochs. Each trial's first run trains one epoch and
raises (tests/data/fsdp_loops.py), Ray Train starts its worker group again, and the loop resumes from the
sharded checkpoint: no epoch twice, none skipped, and every rank's shard in the stored checkpoint, readable
in one process. About 80 s of this machine with Ray already up.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
import torch

import hpsearch
from hpsearch import train as hp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Context:
    """``ray.train.get_context()`` as hpsearch.train uses it. No ``get_storage``: no population-based start."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world

    def get_world_rank(self) -> int:
        return self.rank

    def get_world_size(self) -> int:
        return self.world


class _RayTrain:
    """Ray Train V2's report and get_checkpoint, as a loop sees them: every report of one round goes to one
    checkpoint folder (Ray syncs its name from rank 0), each rank's files uploaded into it; the report is a
    barrier; the run's latest checkpoint is what get_checkpoint() returns when a run (re)starts."""

    def __init__(self, storage: Path) -> None:
        self.storage, self.rounds, self.latest = storage, 0, None
        self.with_checkpoint: list[bool] = []  # this rank's reports: whether each carried a checkpoint

    def report(self, metrics: dict[str, Any], checkpoint: Any = None) -> None:
        import ray.train
        import torch.distributed as dist

        self.rounds += 1
        folder = self.storage / f"checkpoint_{self.rounds:06d}"
        if checkpoint is not None:
            shutil.copytree(checkpoint.path, folder, dirs_exist_ok=True)
        self.with_checkpoint.append(checkpoint is not None)
        dist.barrier()
        if folder.exists():
            self.latest = ray.train.Checkpoint(str(folder))

    def get_checkpoint(self) -> Any:
        return self.latest

    def get_preemption_info(self) -> Any:
        return None  # no node of the run is drained (hpsearch.train.report asks at every report)


def _build(kind: str, lr: float = 1e-2) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
    """A small MLP with dropout (the random states matter), wrapped as ``kind`` says, its AdamW and StepLR."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 3))
    model: torch.nn.Module
    if kind == "FullyShardedDataParallel":
        from torch.distributed.fsdp import FullyShardedDataParallel

        model = FullyShardedDataParallel(net, device_id=torch.device("cpu"))
    elif kind == "fully_shard":
        from torch.distributed.fsdp import fully_shard

        fully_shard(net)
        model = net
    else:
        model = net  # not sharded: each rank holds the whole model
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    return model, optimizer, scheduler


def _epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> float:
    """One training step on random data (drawn from the RNG that report saves and restore sets)."""
    model.train()
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return float(loss.item())


KINDS = ("FullyShardedDataParallel", "fully_shard")


def _probe(model: torch.nn.Module) -> list[float]:
    """The model's output on a fixed input, in eval mode (no dropout): what its parameters are."""
    model.eval()
    with torch.no_grad():
        return model(torch.linspace(-1, 1, 16).reshape(2, 8)).flatten().tolist()


def _ranks(rank: int, world: int, port: int, storage: str) -> None:
    """One rank, for each kind of FSDP model: :func:`_round_trips` in a folder of its own."""
    import ray.train
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ray.train.get_context = lambda: _Context(rank, world)  # type: ignore[assignment]
    start_checkpoint = hp._start_checkpoint
    for kind in KINDS:
        folder = Path(storage, kind)
        folder.mkdir(exist_ok=True)
        seen = _round_trips(kind, folder)
        hp._start_checkpoint = start_checkpoint  # type: ignore[assignment]
        torch.save(seen, folder / f"result-{rank}.pt")
    dist.destroy_process_group()


def _round_trips(kind: str, storage: Path) -> dict[str, Any]:
    """Train, report a checkpoint at epoch 1, train epochs 2-3; then as a restarted run, restore and train
    epochs 2-3 again; then as a run started from that checkpoint under population-based training; then a
    whole-model checkpoint restored into this sharded model. What this rank saw."""
    import ray.train

    fake = _RayTrain(storage)
    ray.train.report, ray.train.get_checkpoint = fake.report, fake.get_checkpoint  # type: ignore[assignment]
    ray.train.get_preemption_info = fake.get_preemption_info  # type: ignore[assignment]
    seen: dict[str, Any] = {}

    model, optimizer, scheduler = _build(kind)
    seen["fresh_start"] = hp.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    first = _epoch(model, optimizer, scheduler)
    hp.report({"loss": first}, epoch=1, model=model, optimizer=optimizer, scheduler=scheduler)
    seen["straight"] = [_epoch(model, optimizer, scheduler) for _ in (2, 3)]

    model, optimizer, scheduler = _build(kind)  # a restarted run: built afresh, then restored
    torch.manual_seed(123)  # another random state than the checkpoint's: restore must set it
    seen["resumed_start"] = hp.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    seen["restored_output"] = _probe(model)
    seen["resumed"] = [_epoch(model, optimizer, scheduler) for _ in (2, 3)]
    seen["with_checkpoint"] = list(fake.with_checkpoint)

    model, _, _ = _build(kind)  # the model alone (to evaluate it, say): its shards, no optimizer
    seen["model_only_start"] = hp.restore(model=model)
    seen["model_only_output"] = _probe(model)

    # Population-based training: a run from this checkpoint as a donor's, with a mutated lr of 2x.
    checkpoint, fake.latest = fake.latest, None
    hp._start_checkpoint = lambda: checkpoint  # type: ignore[assignment]  # the run's start file names it
    model, optimizer, scheduler = _build(kind, lr=2e-2)
    seen["exploit_start"] = hp.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    seen["exploit_lr"] = [group["lr"] for group in optimizer.param_groups]
    seen["exploit_base_lrs"] = list(scheduler.base_lrs)

    # A checkpoint of the model not sharded (each rank holds all of it: saved by rank 0 alone).
    plain, plain_optimizer, _ = _build("none")
    hp.report({"loss": 0.0}, epoch=1, model=plain, optimizer=plain_optimizer)
    seen["plain_with_checkpoint"] = fake.with_checkpoint[-1]
    hp._start_checkpoint = lambda: None  # type: ignore[assignment]
    try:
        hp.restore(model=model, optimizer=optimizer)
    except ValueError as err:
        seen["whole_into_sharded"] = str(err)
    return seen


@pytest.fixture(scope="module")
def spawned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two gloo ranks through :func:`_ranks` (one start of the two processes for both kinds: ~7 s of imports)."""
    import torch.multiprocessing as mp

    storage = tmp_path_factory.mktemp("fsdp")
    mp.spawn(_ranks, args=(2, _free_port(), str(storage)), nprocs=2)
    return storage


@pytest.fixture(params=KINDS)
def ranks(request: pytest.FixtureRequest, spawned: Path) -> dict[str, Any]:
    """What the two ranks saw and stored with an FSDP model of one kind."""
    storage = spawned / request.param
    seen = [torch.load(storage / f"result-{rank}.pt", weights_only=False) for rank in range(2)]
    return {"storage": storage, "seen": seen}


def test_every_rank_saves_its_shard_into_the_one_checkpoint_folder(ranks: dict[str, Any]) -> None:
    for seen in ranks["seen"]:
        assert seen["with_checkpoint"] == [True]  # every rank's report of epoch 1 carried its folder
    folder = ranks["storage"] / "checkpoint_000001"
    shards = folder / hp.SHARDS_DIR
    # torch.distributed.checkpoint's format: each rank's file, and the index rank 0 wrote
    assert sorted(os.listdir(shards)) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    state = torch.load(folder / hp.STATE_FILE, weights_only=False)
    assert state["epoch"] == 1 and state["scheduler"]["last_epoch"] == 1
    assert state["model"] is None and state["optimizer"] is None  # no rank held the whole model
    assert state["shards"] == {"model": True, "optimizer": True}


def test_a_restored_run_continues_with_the_results_of_an_uninterrupted_one(ranks: dict[str, Any]) -> None:
    for seen in ranks["seen"]:
        assert seen["fresh_start"] == 1
        assert seen["resumed_start"] == 2
        # model and optimizer shards, LR schedule and random states restored: the same losses, to the bit
        assert seen["resumed"] == seen["straight"]
        # restored without an optimizer: the same model
        assert seen["model_only_start"] == 2 and seen["model_only_output"] == seen["restored_output"]
    assert ranks["seen"][0]["straight"] == ranks["seen"][1]["straight"]  # ranks alike, as the loop keeps them


def test_a_run_from_a_donors_sharded_checkpoint_keeps_the_mutated_lr(ranks: dict[str, Any]) -> None:
    for seen in ranks["seen"]:
        assert seen["exploit_start"] == 2
        # the donor's rate after one StepLR halving, 5e-3, scaled by the new base over the donor's: 2x
        assert seen["exploit_lr"] == [pytest.approx(1e-2)]
        assert seen["exploit_base_lrs"] == [2e-2]


def test_a_whole_model_checkpoint_is_refused_by_a_sharded_model(ranks: dict[str, Any]) -> None:
    for rank, seen in enumerate(ranks["seen"]):
        assert seen["plain_with_checkpoint"] == (rank == 0)  # a model not sharded: rank 0 saves it, as before
        assert "holds a whole model, saved from a model FSDP did not shard" in seen["whole_into_sharded"]


class _Recorder:
    """``ray.train`` for the digits loop in this one process: every report kept, checkpoints in ``storage``."""

    def __init__(self, storage: Path) -> None:
        self.storage, self.reports = storage, []

    def report(self, metrics: dict[str, Any], checkpoint: Any = None) -> None:
        if checkpoint is not None:
            shutil.copytree(checkpoint.path, self.storage / f"checkpoint_{len(self.reports) + 1:06d}")
        self.reports.append(metrics)


def _digits(monkeypatch: pytest.MonkeyPatch, storage: Path, **config: Any) -> tuple[list[dict], set[torch.dtype]]:
    """The digits loop run in this process as one Ray Train worker would (1 worker, CPU): its reports, and
    the dtypes of what its Linear layers computed."""
    import ray.train
    import ray.train.torch

    from hpsearch.examples.digits import train_loop

    recorder = _Recorder(storage)
    monkeypatch.setattr(ray.train, "report", recorder.report)
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: None)
    monkeypatch.setattr(ray.train, "get_preemption_info", lambda: None, raising=False)  # no node drained
    monkeypatch.setattr(ray.train, "get_context", lambda: _Context(0, 1))
    monkeypatch.setattr(ray.train.torch, "get_device", lambda: torch.device("cpu"))
    monkeypatch.setattr(ray.train.torch, "prepare_model", lambda model, **kwargs: model)  # 1 worker: as is
    monkeypatch.setattr(ray.train.torch, "prepare_data_loader", lambda loader, **kwargs: loader)
    computed: set[torch.dtype] = set()

    def linear_output(module: torch.nn.Module, args: Any, output: torch.Tensor) -> None:
        if isinstance(module, torch.nn.Linear):
            computed.add(output.dtype)

    hook = torch.nn.modules.module.register_module_forward_hook(linear_output)
    try:
        train_loop({"hidden": 32, "layers": 1, "batch_size": 128, "epochs": 2, "seed": 3, **config})
    finally:
        hook.remove()
    return recorder.reports, computed


def test_the_digits_loop_computes_in_bfloat16_only_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain, plain_dtypes = _digits(monkeypatch, tmp_path / "32")
    bf16, bf16_dtypes = _digits(monkeypatch, tmp_path / "bf16", precision="bf16")
    assert plain_dtypes == {torch.float32}  # the default: as before
    assert bf16_dtypes == {torch.bfloat16}  # training and evaluation forwards, under autocast
    assert [r["epoch"] for r in bf16] == [1, 2]
    # It trains (the val_loss falls), not to the same numbers as float32, and keeps float32 weights and moments.
    assert bf16[1]["val_loss"] < bf16[0]["val_loss"] and bf16[1]["val_loss"] != plain[1]["val_loss"]
    assert bf16[1]["val_loss"] == pytest.approx(plain[1]["val_loss"], rel=0.05)
    state = torch.load(tmp_path / "bf16" / "checkpoint_000002" / hp.STATE_FILE, weights_only=False)
    assert {t.dtype for t in state["model"].values()} == {torch.float32}
    assert {s["exp_avg"].dtype for s in state["optimizer"]["state"].values()} == {torch.float32}


@pytest.mark.parametrize(("key", "value"), [("precision", "fp16"), ("parallel", "zero3")])
def test_the_digits_loop_names_an_unknown_switch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, key, value) -> None:
    with pytest.raises(ValueError, match=f"{key} must be .*, got '{value}'"):
        _digits(monkeypatch, tmp_path, **{key: value})


# One search with Ray: 2-worker FSDP trials of the example loops, each cut once and resumed by Ray Train.
# Two trials, both in bfloat16, so that they run at once on this 2-CPU machine (a third, the digits loop in
# float32, made the search 130 s instead of about 80: it adds nothing the first trial and the tests without
# Ray do not check, as autocast is the one difference).

FSDP_LOOPS = Path(__file__).resolve().parents[1] / "data" / "fsdp_loops.py"
CASES = [
    {"name": "digits-bf16", "loop": "digits", "parallel": "fsdp", "precision": "bf16"},
    {"name": "lightning-bf16", "loop": "lightning_digits", "strategy": "fsdp", "precision": "bf16-mixed"},
]
HIDDEN = 32
#: Each trial's epochs (digits counts 1-2, Lightning 0-1); its first run trains CUT_AFTER of them, then raises.
EPOCHS, CUT_AFTER = 2, 1


@pytest.fixture(scope="module")
def search(_ray_session, tmp_path_factory) -> dict[str, Any]:
    """The search, run once for the module: its experiment folder and the cut marks.

    Module-scoped, so it checks for left-over placement groups itself, as ``ray_cluster`` does per test.
    """
    pytest.importorskip("lightning", reason='the lightning extra: pip install "hpsearch[lightning]"')
    import time

    from leftovers import placement_groups_left

    import hpsearch

    before = set(_ray_session.util.placement_group_table())
    tmp_path = tmp_path_factory.mktemp("fsdp-search")
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = {
        "name": "fsdp",
        "trainable": f"{FSDP_LOOPS}:cut_once",
        "metric": "val_loss",
        "mode": "min",
        "search_space": {
            "case": {"type": "grid", "values": CASES},
            "epochs": EPOCHS,
            "cut_after": CUT_AFTER,
            "hidden": HIDDEN,
            "lr": 0.01,
            "marks": str(marks),
        },
        "scheduler": {"type": "fifo"},
        "scaling": {"num_workers": 2, "resources_per_worker": {"CPU": 0.45}},
        "resources": {"driver_cpus": 0.05},
        "failure": {"worker_retries": 1},  # the cut: one restart of the worker group, from the checkpoint
        "storage_path": str(tmp_path),
    }
    started = time.monotonic()
    hpsearch.run(spec)
    print(f"fsdp search: {time.monotonic() - started:.1f} s")
    yield {"exp": tmp_path / "fsdp", "marks": marks}
    left = placement_groups_left(_ray_session, before)
    assert not left, f"placement groups left behind by the FSDP search: {left}"


def _trials(search: dict[str, Any]) -> dict[str, tuple[dict[str, Any], Any]]:
    """Each case's trial row and its history, by the case's name."""
    import hpsearch

    results = hpsearch.load_results(search["exp"])
    out = {}
    for trial in results.trials.to_dict("records"):
        history = results.history[results.history["trial_id"] == trial["trial_id"]].sort_values("iteration")
        out[trial["case.name"]] = (trial, history)
    return out


@pytest.mark.ray
@pytest.mark.timeout(900)  # the first Ray test runs the search (the fixture)
@pytest.mark.full
def test_every_trial_is_cut_and_resumes_from_its_sharded_checkpoint(search) -> None:
    trials = _trials(search)
    assert sorted(trials) == sorted(case["name"] for case in CASES)
    for name, (trial, history) in trials.items():
        assert trial["status"] == "finished", (name, trial["error"])
        # Both ranks of the first run trained CUT_AFTER epochs and raised; the restarted run went on from there.
        assert sorted(p.name for p in search["marks"].glob(f"{name}-rank*")) == [f"{name}-rank0", f"{name}-rank1"]
        first = 0 if name.startswith("lightning") else 1
        # One report per epoch, none twice, none skipped: the restarted run began after the checkpoint's epoch.
        assert history["epoch"].tolist() == list(range(first, first + EPOCHS)), (name, history["epoch"].tolist())
        assert history["checkpoint"].notna().all()
        assert history["val_loss"].iloc[-1] < history["val_loss"].iloc[0]  # and it kept learning


@pytest.mark.ray
@pytest.mark.full
def test_a_digits_checkpoint_holds_every_ranks_shard_and_loads_in_one_process(search) -> None:
    from hpsearch.examples.digits import _build_model, _load_split

    _, _, x_va, y_va = _load_split()
    for name in [case["name"] for case in CASES if case["loop"] == "digits"]:
        trial, history = _trials(search)[name]
        folder = Path(history["checkpoint"].iloc[-1])
        assert sorted(os.listdir(folder / hp.SHARDS_DIR)) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
        assert torch.load(folder / hp.STATE_FILE, weights_only=False)["epoch"] == EPOCHS
        # The shards' index is a pickle: load_model refuses them unless told to trust the folder (this search's own)
        with pytest.raises(hpsearch.ResultsError, match=r"torch.distributed.checkpoint shards.*trust_folder=True"):
            hpsearch.load_model(None, _build_model(64, 10, HIDDEN, 2, 0.1), checkpoint=folder)
        # The shards, read into the plain MLP, make the model that reported the last val_loss.
        model = hpsearch.load_model(None, _build_model(64, 10, HIDDEN, 2, 0.1), checkpoint=folder, trust_folder=True)
        bf16 = name.endswith("bf16")
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            val_loss = torch.nn.functional.cross_entropy(model(x_va), y_va).item()
        assert val_loss == pytest.approx(history["val_loss"].iloc[-1], rel=1e-2 if bf16 else 1e-5)


@pytest.mark.ray
@pytest.mark.full
def test_lightnings_fsdp_checkpoint_holds_every_ranks_shard_and_loads_in_one_process(search) -> None:
    from ray.train.lightning import RayTrainReportCallback

    from hpsearch.examples.digits import _load_split
    from hpsearch.examples.lightning_digits import DigitsClassifier

    _, _, x_va, y_va = _load_split()
    trial, history = _trials(search)["lightning-bf16"]
    ckpt = Path(history["checkpoint"].iloc[-1]) / RayTrainReportCallback.CHECKPOINT_NAME
    # state_dict_type="sharded": a folder of torch.distributed.checkpoint shards and Lightning's meta.pt
    assert sorted(os.listdir(ckpt)) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
    assert torch.load(ckpt / "meta.pt", weights_only=False)["epoch"] == EPOCHS - 1
    # The shards, read into the module, make the model that logged the last val_loss; it computed in bfloat16
    # (FSDP's MixedPrecision casts the parameters and inputs), and so does this evaluation.
    # hpsearch.load_model builds the module from meta.pt's hyperparameters, then reads the shards into it
    # (the shards' index is a pickle, read only when the folder is trusted: it is this search's own)
    model = hpsearch.load_model(None, DigitsClassifier, checkpoint=ckpt.parent, trust_folder=True)
    assert model.hparams["hidden"] == HIDDEN
    with torch.no_grad():
        val_loss = model.loss_fn(model.to(torch.bfloat16)(x_va.to(torch.bfloat16)), y_va).item()
    assert val_loss == pytest.approx(history["val_loss"].iloc[-1], rel=2e-2)
