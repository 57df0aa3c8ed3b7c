"""A results folder someone sends you: nothing in it runs code, reads or links outside it, or is written through a link.

Each folder is written with the project's writers (tests/fake_experiment.py), then crafted as an attacker (or a
damaged disk) would: a checkpoint whose unpickling runs code, records naming paths outside the folder, a trial id
that climbs out of it, a symlink where the report is written, a damaged spec. No Ray: each test runs in milliseconds
(torch's own loading aside).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from fake_experiment import standard_trials, write_experiment  # noqa: E402

import hpsearch  # noqa: E402
from hpsearch import analysis as an  # noqa: E402
from hpsearch.cli import main  # noqa: E402
from hpsearch.errors import ResultsError  # noqa: E402
from hpsearch.experiment import files  # noqa: E402
from hpsearch.experiment.layout import TUNE_RESULT_FILE  # noqa: E402
from hpsearch.results.report import trial_logs, write_report  # noqa: E402

BEST = "aaaa0003"  # standard_trials' best trial


class _RunsCode:
    """Unpickling this makes a folder: the marker that code from the checkpoint ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.marker),))


@pytest.fixture
def exp(tmp_path: Path) -> Path:
    return write_experiment(tmp_path / "fake", standard_trials())


def _best_folder(exp: Path) -> Path:
    best = an.load_results(exp).best
    assert best is not None
    return Path(best["best_checkpoint"])


def _rewrite_results(exp: Path, trial_id: str, change: Any) -> Path:
    """Apply ``change`` to every row of the trial's Tune result.json, as a crafted folder would hold it."""
    [result] = [p for p in exp.glob(f"*_{trial_id}_*/{TUNE_RESULT_FILE}")]
    rows = [json.loads(line) for line in result.read_text(encoding="utf-8").splitlines()]
    result.write_text("".join(json.dumps(change(row)) + "\n" for row in rows), encoding="utf-8")
    return result


# ----------------------------------------------------------------------------- load_model runs no code


@pytest.mark.parametrize("name", ["model.pt", "hpsearch_state.pt"])
def test_a_checkpoint_that_would_run_code_is_refused_unless_the_folder_is_trusted(
    exp: Path, tmp_path: Path, name: str
) -> None:
    marker = tmp_path / "ran"
    model = torch.nn.Linear(2, 1)
    torch.save({"model": model.state_dict(), "extra": _RunsCode(marker)}, _best_folder(exp) / name)
    with pytest.raises(ResultsError) as refused:
        hpsearch.load_model(exp, torch.nn.Linear(2, 1))
    assert not marker.exists()  # nothing ran
    line = str(refused.value)
    assert "\n" not in line and f"{name} holds pickled objects (posix.mkdir)" in line
    assert line.endswith("refused; if you trust this folder, pass trust_folder=True to hpsearch.load_model")
    loaded = hpsearch.load_model(exp, torch.nn.Linear(2, 1), trust_folder=True)  # as torch.load(weights_only=False)
    assert marker.is_dir() and torch.equal(loaded.weight, model.weight)


def test_a_lightning_checkpoint_that_would_run_code_is_refused(exp: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    torch.save({"state_dict": {}, "hyper_parameters": {"x": _RunsCode(marker)}}, _best_folder(exp) / "checkpoint.ckpt")
    with pytest.raises(ResultsError, match=r"checkpoint.ckpt holds pickled objects .*pass trust_folder=True"):
        hpsearch.load_model(exp, torch.nn.Linear(2, 1))
    pl = pytest.importorskip("lightning.pytorch")

    class Module(pl.LightningModule):  # type: ignore[misc,name-defined]
        pass

    with pytest.raises(ResultsError, match=r"checkpoint.ckpt holds pickled objects .*pass trust_folder=True"):
        hpsearch.load_model(exp, Module)
    assert not marker.exists()


def test_hpsearch_trains_own_state_file_loads_without_trust(exp: Path) -> None:
    """hpsearch.train's state file holds Python's and NumPy's random states beside the weights: weights only reads it."""
    model = torch.nn.Linear(3, 2)
    state = {
        "epoch": 2,
        "model": model.state_dict(),
        "optimizer": torch.optim.Adam(model.parameters()).state_dict(),
        "scheduler": None,
        "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
        "extra": {"seen": 10},
        "shards": None,
    }
    torch.save(state, _best_folder(exp) / "hpsearch_state.pt")
    assert torch.equal(hpsearch.load_model(exp, torch.nn.Linear(3, 2)).weight, model.weight)


def test_sharded_checkpoints_are_read_only_from_a_trusted_folder(exp: Path) -> None:
    import torch.distributed.checkpoint as dcp

    model = torch.nn.Linear(4, 2)
    shards = _best_folder(exp) / "hpsearch_shards"
    dcp.save({"model": model.state_dict()}, checkpoint_id=str(shards))  # one process: no process group needed
    with pytest.raises(ResultsError) as refused:
        hpsearch.load_model(exp, torch.nn.Linear(4, 2))
    assert str(refused.value) == (
        f"checkpoint {shards} holds torch.distributed.checkpoint shards, whose index (.metadata) is a plain pickle "
        "that can run code from the folder when read: refused; if you trust this folder, pass trust_folder=True to "
        "hpsearch.load_model"
    )
    assert torch.equal(hpsearch.load_model(exp, torch.nn.Linear(4, 2), trust_folder=True).weight, model.weight)


# ----------------------------------------------------------------------------- paths from records stay in the folder


def test_a_checkpoint_the_records_place_outside_the_folder_is_refused(exp: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "ckpt"
    outside.mkdir(parents=True)
    torch.save(torch.nn.Linear(2, 1).state_dict(), outside / "model.pt")
    climbing = f"{exp}/train/../../outside/ckpt"
    _rewrite_results(exp, BEST, lambda row: {**row, "checkpoint_path": climbing})
    results = an.load_results(exp)
    assert results.trials.set_index("trial_id").loc[BEST, "best_checkpoint"] is None  # never listed, never ranked
    with pytest.raises(ResultsError) as refused:
        hpsearch.load_model(results, torch.nn.Linear(2, 1), trial_id=BEST)
    assert str(refused.value) == (
        f"trial {BEST}'s checkpoint {climbing} (named in its result.json) lies outside the experiment folder "
        f"{exp}: refused; a folder's records may only name its own files (pass checkpoint= to load a folder you trust)"
    )


def test_a_checkpoint_folder_that_links_out_of_the_folder_is_refused(exp: Path, tmp_path: Path) -> None:
    best = _best_folder(exp)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    torch.save(torch.nn.Linear(2, 1).state_dict(), outside / "model.pt")
    best.rmdir()
    best.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ResultsError, match=r"'s checkpoint .* lies outside the experiment folder .*: refused"):
        hpsearch.load_model(exp, torch.nn.Linear(2, 1))


def test_a_trial_id_that_climbs_out_of_the_folder_is_refused_in_one_line(
    exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "x"
    secret.mkdir()
    (secret / "hpsearch_history.jsonl").write_text('{"val_loss": 0.0, "epoch": 9}\n' * 20, encoding="utf-8")
    result = _rewrite_results(exp, "aaaa0001", lambda row: {**row, "trial_id": "../../x"})
    message = (
        f"{result}: trial id '../../x' is not a plain name (Tune's ids are letters, digits and _), so it cannot name "
        "a folder: this folder's records are damaged or crafted; refused"
    )
    with pytest.raises(ResultsError) as refused:
        an.load_results(exp)
    assert str(refused.value) == message
    assert main(["report", str(exp)]) == 2
    assert capsys.readouterr().err == f"Error: {message}\n"
    assert not (exp / "hpsearch_report.html").exists()


def test_a_trial_folder_that_links_out_of_the_folder_is_shown_without_its_logs(exp: Path, tmp_path: Path) -> None:
    from hpsearch.experiment import files

    elsewhere = tmp_path / "elsewhere"
    trial = files.run_dir(exp, "aaaa0004")
    trial.rename(elsewhere)  # the trial's run folder, moved out and linked back
    _, attempt = files.claim_attempt(elsewhere, group_id="g1", world_size=1)
    files.write_rank_progress(attempt, 0, {"reports": 1})
    files.rank_log(attempt, 0).write_text("secret\n", encoding="utf-8")
    trial.symlink_to(elsewhere, target_is_directory=True)
    results = an.load_results(exp)
    assert trial_logs(results) == {}  # no link into the folder it leads to
    assert results.trials.set_index("trial_id").loc["aaaa0004", "run_dir"] is None
    page = write_report(results).read_text(encoding="utf-8")
    assert "rank-0.log" not in page and "elsewhere" not in page
    assert files.trial_folder(exp, "aaaa0004") is None and files.trial_folder(exp, "aaaa0001") is not None
    for bad in ("", ".", "..", "../x", "a/b", "a\\b", "a\0b"):
        assert not files.is_trial_id(bad)
        assert files.trial_folder(exp, bad) is None
    with pytest.raises(ResultsError, match=r"trial id '\.\./x' in .* is not a plain name"):
        files.run_dir(exp, "../x")


# ----------------------------------------------------------------------------- writes follow no link


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_the_report_is_not_written_through_a_symlink(
    exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    link = exp / f"hpsearch_report.{fmt}"
    link.symlink_to(target)
    assert main(["report", str(exp), "--format", fmt]) == 2
    assert capsys.readouterr().err == (
        f"Error: {link} is a symbolic link, so writing there would overwrite what it points to: refused; "
        "remove it, or write elsewhere\n"
    )
    assert target.read_text(encoding="utf-8") == "keep me\n" and link.is_symlink()


def test_a_markdown_reports_png_is_not_written_through_a_symlink(exp: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious.png"
    target.write_bytes(b"keep me")
    (exp / "hpsearch_report_learning_curves.png").symlink_to(target)
    with pytest.raises(ResultsError, match=r"hpsearch_report_learning_curves.png is a symbolic link.*: refused"):
        write_report(exp, fmt="md")
    assert target.read_bytes() == b"keep me"


def test_the_report_is_not_written_through_a_hard_link_or_into_a_fifo(exp: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    os.link(target, exp / "hpsearch_report.html")
    with pytest.raises(ResultsError, match=r"hpsearch_report.html is a hard link to another file.*: refused"):
        write_report(exp)
    assert target.read_text(encoding="utf-8") == "keep me\n"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ResultsError, match=r"fifo is not a regular file: refused"):
        write_report(exp, tmp_path / "fifo")  # no reader: refused at once, not a hang
    assert write_report(exp, tmp_path / "fresh.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    assert write_report(exp, tmp_path / "fresh.html").is_file()  # an ordinary file is replaced as before


def test_export_does_not_write_a_study_through_a_symlink_in_the_folder(
    exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "precious.db"
    target.write_bytes(b"keep me")
    link = exp / "study.db"
    link.symlink_to(target)
    assert main(["export", str(exp), "--optuna", f"sqlite:///{link}"]) == 2
    assert capsys.readouterr().err == (
        f"Error: {link} is a symbolic link, so writing the study there would overwrite what it points to: refused; "
        "remove it, or choose another --optuna storage\n"
    )
    assert target.read_bytes() == b"keep me"


# ----------------------------------------------------------------------------- a damaged spec: one line, at once


def _damage(spec: Path, how: str) -> str:
    """Damage the folder's spec as run; return the end of the line that refuses it."""
    if how == "not-utf8":
        spec.write_bytes(spec.read_bytes().replace(b"name: fake", b"name: fa\xffke"))
        return "not UTF-8 text (byte 0xff at byte 8)"
    if how == "huge-int":
        spec.write_text(spec.read_text(encoding="utf-8") + "seed: " + "9" * 5000 + "\n", encoding="utf-8")
        return "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"
    with open(spec, "r+b") as f:  # 50 MB: refused before it is parsed (or even read whole)
        f.truncate(50 * 2**20)
    return "it is larger than 1 MiB (a spec as run is a few kB); refused unread"


@pytest.mark.parametrize("how", ["not-utf8", "huge-int", "50MB"])
def test_a_damaged_spec_in_the_folder_is_refused_in_one_line_at_once(
    exp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    spec = exp / "hpsearch_spec.yaml"
    line = f"{spec}: the spec as run is damaged: {_damage(spec, how)}"
    started = time.perf_counter()
    with pytest.raises(ResultsError) as refused:
        an.load_results(exp)
    assert str(refused.value) == line
    assert main(["report", str(exp)]) == 2
    assert capsys.readouterr().err == f"Error: {line}\n"
    assert main(["export", str(exp), "--optuna", f"sqlite:///{tmp_path / 'study.db'}"]) == 2
    assert capsys.readouterr().err == f"Error: {line}\n"
    with pytest.raises(ResultsError) as refused:
        files.experiment_spec(exp, check_trainable=False)  # resume and the budget read it as a Spec: the same reader
    assert str(refused.value) == line
    assert time.perf_counter() - started < 2


def test_the_spec_as_run_has_one_reader_whose_data_every_view_shares(exp: Path) -> None:
    """load_results' spec, read_spec and experiment_spec all come from read_spec_as_run."""
    found = files.read_spec_as_run(exp)
    assert found is not None and found.path == exp / "hpsearch_spec.yaml"
    assert found.data == files.read_spec(exp) == an.load_results(exp).spec
    assert found.to_spec(check_trainable=False).to_dict() == files.experiment_spec(exp, check_trainable=False).to_dict()
    assert files.experiment_spec(exp, check_trainable=False).name == found.data["name"] == "fake"


def test_a_spec_as_run_that_holds_no_keys_reads_as_none_and_cannot_be_resumed(exp: Path) -> None:
    spec = exp / "hpsearch_spec.yaml"
    spec.write_text("", encoding="utf-8")  # cut short to nothing
    found = files.read_spec_as_run(exp)
    assert found is not None and found.data is None and files.read_spec(exp) is None
    with pytest.raises(ResultsError) as refused:
        files.experiment_spec(exp, check_trainable=False)
    assert str(refused.value) == f"{spec}: the spec as run is damaged: it holds no keys"
    spec.unlink()
    assert files.read_spec_as_run(exp) is None


def test_an_experiment_folder_under_the_home_is_private_and_elsewhere_the_umask_decides(tmp_path: Path) -> None:
    """Another local user cannot read the results a search writes under your home (issue 36, point 8)."""
    import stat

    from hpsearch.experiment.folder_io import make_experiment_folder

    home, shared = tmp_path / "home", tmp_path / "shared"
    home.mkdir()
    old = os.umask(0o022)  # the common default: folders 0755
    try:
        make_experiment_folder(home / "hpsearch-results" / "digits", home=home)
        make_experiment_folder(shared / "hpsearch-results" / "digits", home=home)
    finally:
        os.umask(old)
    assert stat.S_IMODE((home / "hpsearch-results" / "digits").stat().st_mode) == 0o700
    assert stat.S_IMODE((shared / "hpsearch-results" / "digits").stat().st_mode) == 0o755
    with pytest.raises(FileExistsError):  # never into a folder that exists: run --overwrite deletes it first
        make_experiment_folder(home / "hpsearch-results" / "digits", home=home)
