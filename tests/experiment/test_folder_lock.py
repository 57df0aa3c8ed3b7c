"""One search per experiment folder: the lock ``run``, ``resume`` and ``check`` take (no Ray).

A live holder refuses the next search in one line naming its PID and host; a dead one's lock is
taken over with a line saying so; one on another machine is kept; the lock survives the folder's
deletion (``--overwrite``) and is given back only by its holder. Last, the commands: a second
``run``, ``run --overwrite`` and ``resume`` of a folder another search holds exit 2 with that line,
before Ray starts, and leave the folder as it was.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hpsearch.errors import ExperimentLockedError
from hpsearch.experiment.folder_lock import FolderLock, Holder, lock_path


def _holder_file(exp: Path, **fields: object) -> None:
    data = {"host": socket.gethostname(), "pid": 1, "start": None, "user": "u", "command": "hpsearch run", "since": 0}
    data.update(fields)
    lock_path(exp).parent.mkdir(parents=True, exist_ok=True)
    lock_path(exp).write_text(json.dumps(data))


def test_the_lock_is_a_file_beside_the_folder_taken_once_and_given_back(tmp_path: Path) -> None:
    exp = tmp_path / "results" / "digits"
    assert lock_path(exp) == tmp_path / "results" / ".digits.hpsearch-lock"
    with FolderLock(exp, command="hpsearch run") as lock:
        held = json.loads(lock.path.read_text())
        assert held["pid"] == lock.holder.pid and held["host"] == socket.gethostname()
        with pytest.raises(ExperimentLockedError) as refused:
            FolderLock(exp, command="hpsearch resume").acquire()  # a second search in this process
        line = str(refused.value)
        assert line.startswith(f"{exp} is in use by another search: PID {held['pid']} on {socket.gethostname()} (")
        assert "hpsearch run, since " in line and f"kill {held['pid']}" in line and "\n" not in line
    assert not lock_path(exp).exists()


def test_a_lock_whose_holder_is_gone_is_taken_over_with_a_line_that_says_so(tmp_path: Path) -> None:
    exp = tmp_path / "digits"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    _holder_file(exp, pid=gone.pid)
    lock = FolderLock(exp, command="hpsearch resume")
    said = lock.acquire()
    assert said is not None and said.startswith(f"took over the lock of {exp} from PID {gone.pid} on ")
    assert said.endswith("which is no longer running")
    lock.release()


def test_a_reused_pid_is_not_the_holder_and_a_damaged_lock_is_taken_over(tmp_path: Path) -> None:
    exp = tmp_path / "digits"
    _holder_file(exp, pid=1, start="0")  # PID 1 lives, but it did not start at tick 0: not the holder
    lock = FolderLock(exp, command="hpsearch run")
    assert lock.acquire() is not None
    lock.release()
    lock_path(exp).write_text("{not json")
    assert "was damaged" in (FolderLock(exp, command="hpsearch run").acquire() or "")


def test_a_holder_alive_here_or_on_another_machine_keeps_its_lock(tmp_path: Path) -> None:
    exp = tmp_path / "digits"
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        me = Holder.me("x")
        _holder_file(exp, pid=alive.pid, start=None)
        with pytest.raises(ExperimentLockedError, match=rf"PID {alive.pid} on {socket.gethostname()}"):
            FolderLock(exp, command="hpsearch run").acquire()
        _holder_file(exp, host="another-host", pid=me.pid)
        with pytest.raises(ExperimentLockedError) as refused:
            FolderLock(exp, command="hpsearch run").acquire()
        assert "on another machine: PID" in str(refused.value)
        assert str(refused.value).endswith(f"If that search is gone, delete {lock_path(exp)} and run this again")
    finally:
        alive.kill()
        alive.wait()


def test_only_its_holder_gives_a_lock_back(tmp_path: Path) -> None:
    exp = tmp_path / "digits"
    lock = FolderLock(exp, command="hpsearch run")
    lock.acquire()
    _holder_file(exp, pid=lock.holder.pid + 1, host="another-host")  # taken over since, by another search
    lock.release()
    assert lock_path(exp).exists()


def test_a_lock_file_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    exp = tmp_path / "digits"
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    lock_path(exp).symlink_to(target)
    lock = FolderLock(exp, command="hpsearch run")
    said = lock.acquire()  # the link is no readable lock: replaced, never written through
    assert said is not None and "was damaged" in said
    assert target.read_text() == "keep me" and not lock_path(exp).is_symlink()
    lock.release()


# ----------------------------------------------------------------------------- the commands


def _folder(tmp_path: Path) -> tuple[Path, Path]:
    """A spec and the experiment folder a search of it made (its spec as run written)."""
    from hpsearch.experiment import files
    from hpsearch.spec import load_spec

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        json.dumps(
            {
                "name": "held",
                "trainable": f"{Path(__file__).resolve().parents[1] / 'loops.py'}:quadratic",
                "metric": "loss",
                "mode": "min",
                "search_space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
                "storage_path": str(tmp_path / "results"),
            }
        )
    )
    exp = load_spec(spec_path).experiment_dir
    exp.mkdir(parents=True)
    files.write_spec(exp, load_spec(spec_path).to_dict())
    return spec_path, exp


@pytest.mark.parametrize("argv", [["run", "{spec}"], ["run", "{spec}", "--overwrite"], ["resume", "{exp}"]])
def test_a_command_on_a_folder_another_search_holds_exits_2_naming_it(tmp_path, monkeypatch, capsys, argv) -> None:
    from hpsearch.cli import main
    from hpsearch.runtime.nodes import connect as cluster

    spec_path, exp = _folder(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _holder_file(exp, pid=holder.pid, command="hpsearch run")
        monkeypatch.setattr(cluster, "connect", lambda *a, **k: pytest.fail("Ray was started"))
        before = sorted(p.name for p in exp.iterdir())
        code = main([a.replace("{spec}", str(spec_path)).replace("{exp}", str(exp)) for a in argv])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"Error: {exp} is in use by another search: PID {holder.pid} on {socket.gethostname()} (")
        assert sorted(p.name for p in exp.iterdir()) == before  # --overwrite deleted nothing
    finally:
        holder.kill()
        holder.wait()
