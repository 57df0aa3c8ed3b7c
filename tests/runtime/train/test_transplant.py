"""A run started from a donor's checkpoint keeps the mutated hyperparameters, however the loop loads the state.

Lightning's ``trainer.fit(ckpt_path=...)`` and the Hugging Face ``Trainer`` load the donor's optimizer and LR
scheduler with PyTorch's own ``load_state_dict``; so does a plain loop that ``torch.load``s them. These
tests do exactly that, with no Ray, in a process where :func:`keep_built_hyperparameters` was called.
"""

from __future__ import annotations

import pytest
import torch

from hpsearch.runtime import internals
from hpsearch.runtime.train import transplant


@pytest.fixture
def transplanted(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as a Train worker of a run from a donor's checkpoint; PyTorch is restored after the test."""
    for cls, name in internals.load_state_dict_targets():
        monkeypatch.setattr(cls, name, vars(cls)[name])
    monkeypatch.setattr(transplant, "_INSTALLED", False)
    transplant.keep_built_hyperparameters()


def _donor(lr: float, steps: int) -> tuple[dict, dict]:
    """A donor's optimizer and scheduler state after ``steps`` epochs of a StepLR that halves every 2."""
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for _ in range(steps):
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        scheduler.step()
    return optimizer.state_dict(), scheduler.state_dict()


def test_a_loaded_optimizer_keeps_the_new_configs_hyperparameters(transplanted: None) -> None:
    donor_optimizer, _ = _donor(lr=0.01, steps=1)
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.012, momentum=0.8, weight_decay=1e-3)
    optimizer.load_state_dict(donor_optimizer)
    [group] = optimizer.param_groups
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (0.012, 0.8, 1e-3)  # the mutated config's
    assert optimizer.state  # the donor's momentum buffers came with it


def test_a_loaded_schedule_continues_at_the_new_base_rate(transplanted: None) -> None:
    donor_optimizer, donor_scheduler = _donor(lr=0.01, steps=2)  # the donor's rate is now 0.005
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.012, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    optimizer.load_state_dict(donor_optimizer)  # Lightning's order: optimizers, then schedulers
    scheduler.load_state_dict(donor_scheduler)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.006)  # the donor's 0.005, at 1.2x
    assert scheduler.base_lrs == [0.012] and scheduler.get_last_lr() == [pytest.approx(0.006)]
    assert scheduler.last_epoch == 2  # the donor's progress through the schedule
    optimizer.step()
    scheduler.step()
    scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.003)  # halved on the donor's schedule, at 1.2x


def test_a_hugging_face_style_lambda_schedule_keeps_the_new_base_rate(transplanted: None) -> None:
    """transformers' linear schedule is a LambdaLR over the optimizer's initial rate."""
    decay = lambda step: max(0.0, 1.0 - step / 10)  # noqa: E731 - as transformers builds it

    donor = torch.optim.AdamW(torch.nn.Linear(2, 1).parameters(), lr=1e-3, weight_decay=0.0)
    donor_schedule = torch.optim.lr_scheduler.LambdaLR(donor, decay)
    for _ in range(5):
        donor.step()
        donor_schedule.step()
    new = torch.optim.AdamW(torch.nn.Linear(2, 1).parameters(), lr=2e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(new, decay)
    new.load_state_dict(donor.state_dict())
    schedule.load_state_dict(donor_schedule.state_dict())
    assert new.param_groups[0]["lr"] == pytest.approx(1e-3)  # 2e-3 x (1 - 5/10): the donor's step, the new rate
    assert new.param_groups[0]["weight_decay"] == 0.01
    schedule.step()
    assert new.param_groups[0]["lr"] == pytest.approx(2e-3 * 0.4)


def test_without_a_donor_nothing_changes() -> None:
    """Outside a transplanted run (every test above restores PyTorch): a load restores what was saved."""
    donor_optimizer, _ = _donor(lr=0.01, steps=1)
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.5)
    optimizer.load_state_dict(donor_optimizer)
    assert optimizer.param_groups[0]["lr"] == 0.01


def test_with_the_work_arounds_off_a_run_from_a_donor_leaves_pytorch_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """HPSEARCH_RAY_WORKAROUNDS=0: the donor's checkpoint is still offered (or the run would start from scratch),
    and PyTorch's own load_state_dict stays, as under Ray alone."""
    from hpsearch.runtime.train import worker

    offered: list[object] = []
    monkeypatch.setattr(transplant.ray.train, "get_checkpoint", lambda: None)  # the run has none of its own
    monkeypatch.setattr(transplant, "start_checkpoint", lambda: "donor checkpoint")
    monkeypatch.setattr(transplant, "offer_start_checkpoint", lambda start: offered.append(start()))
    monkeypatch.setattr(transplant, "_INSTALLED", False)
    before = {target: vars(target[0])[target[1]] for target in internals.load_state_dict_targets()}
    assert transplant.take_over(keep_hyperparameters=False)
    assert offered == ["donor checkpoint"]
    assert {target: vars(target[0])[target[1]] for target in internals.load_state_dict_targets()} == before

    taken: list[bool] = []  # the worker is told the switch as the search process read it
    monkeypatch.setattr(transplant, "take_over", lambda keep_hyperparameters=True: taken.append(keep_hyperparameters))
    worker.worker_loop(lambda: None, workarounds=False)()
    worker.worker_loop(lambda: None)()
    assert taken == [False, True]


def test_without_the_torch_internals_a_loaded_optimizer_is_pytorchs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch whose load_state_dict differs from the contract is left alone: the search said so at its start."""
    from hpsearch.runtime.internals import registry

    for cls, name in internals.load_state_dict_targets():
        monkeypatch.setattr(cls, name, vars(cls)[name])
    monkeypatch.setattr(transplant, "_INSTALLED", False)
    monkeypatch.setattr(registry, "_problem", lambda key: "it differs" if key.startswith("torch-") else None)
    transplant.keep_built_hyperparameters()
    donor_optimizer, _ = _donor(lr=0.01, steps=1)
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.012)
    optimizer.load_state_dict(donor_optimizer)
    assert optimizer.param_groups[0]["lr"] == 0.01  # the donor's, as PyTorch loads it
