"""storage_path against the file system: refused before Ray when the search could not keep its results
there, proved writable by writing, and nothing left behind either way (hpsearch/spec/_storage.py)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.errors import SpecError
from hpsearch.experiment import files
from hpsearch.spec import _storage, check_storage, load_spec
from hpsearch.spec._storage import PATH_HEADROOM, path_problems, ray_job_working_dir

SPEC: dict[str, Any] = {
    "name": "storage",
    "trainable": "json:dumps",  # imports in no time; these tests are about the folder
    "metric": "loss",
    "mode": "min",
}
JOB_DIR = "ray/session_2025-01-01_00-00-00_000000_4242/runtime_resources/working_dir_files/_ray_pkg_0123abcd"


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def write(folder: Path, **changes: Any) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- writable: checked, nothing left


def test_validate_creates_a_missing_storage_folder_to_check_it_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, storage_path="runs/2026/june")
    before = tree(tmp_path)
    assert main(["validate", str(path)]) == 0
    assert f"results in {tmp_path}/runs/2026/june/storage" in capsys.readouterr().out
    assert tree(tmp_path) == before == ["spec.yaml"]


def test_validate_leaves_an_existing_storage_folder_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "older-search").mkdir(parents=True)
    (tmp_path / "runs" / "notes.txt").write_text("mine")
    path = write(tmp_path, storage_path="runs")
    before = tree(tmp_path)
    assert main(["validate", str(path)]) == 0
    assert tree(tmp_path) == before
    assert (tmp_path / "runs" / "notes.txt").read_text() == "mine"


def test_validate_refuses_what_run_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("a,b\n")
    path = write(tmp_path, storage_path="data.csv/results")
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"Error: invalid spec in {path} (1 problem):\n"
        f"  - storage_path: cannot create {tmp_path}/data.csv/results: {tmp_path}/data.csv is a file, not a folder\n"
    )
    assert tree(tmp_path) == ["data.csv", "spec.yaml"]


def test_folders_made_for_the_check_are_removed_when_the_probe_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(**kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_storage.tempfile, "mkstemp", full_disk)
    spec = load_spec({**SPEC, "storage_path": str(tmp_path / "a" / "b")})
    with pytest.raises(SpecError) as info:
        check_storage(spec)
    assert [str(p) for p in info.value.problems] == [
        f"storage_path: cannot write in {tmp_path}/a/b: No space left on device"
    ]
    assert tree(tmp_path) == []


def test_a_folder_made_meanwhile_by_someone_else_is_not_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "shared" / "runs"
    real_mkdir = Path.mkdir

    def racing_mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if self == target.parent:
            real_mkdir(self)  # another search created it first
            raise FileExistsError(errno.EEXIST, "File exists", str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    check_storage(load_spec({**SPEC, "storage_path": str(target)}))
    assert tree(tmp_path) == ["shared"]  # ours (runs/) removed, theirs kept


def _unwritable_system_folder() -> tuple[Path, str]:
    """A folder even root cannot create (sysfs refuses new entries), and why, as the OS says it."""
    target = Path("/sys/hpsearch-results")
    try:
        target.mkdir()
    except OSError as err:
        return target, err.strerror
    target.rmdir()
    pytest.skip("this system lets /sys/hpsearch-results be created")


def test_a_storage_path_that_cannot_be_created_is_refused_before_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path("/sys").is_dir():
        pytest.skip("no /sys on this system")
    target, why = _unwritable_system_folder()
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, storage_path=str(target))
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"Error: invalid spec in {path} (1 problem):\n  - storage_path: cannot create {target}: {why}\n"
    )
    assert not target.exists()
    assert tree(tmp_path) == ["spec.yaml"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder; the /sys test covers root")
def test_a_read_only_storage_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ro").mkdir(mode=0o555)
    path = write(tmp_path, storage_path="ro")
    try:
        assert main(["validate", str(path)]) == 2
    finally:
        (tmp_path / "ro").chmod(0o755)
    assert capsys.readouterr().err == (
        f"Error: invalid spec in {path} (1 problem):\n  - storage_path: cannot write in {tmp_path}/ro: Permission denied\n"
    )
    assert tree(tmp_path) == ["ro", "spec.yaml"]


# --------------------------------------------------------------------------- a Ray job's working directory


JOB_MESSAGE = (
    "storage_path: {storage} is inside a Ray job's temporary working directory (under {ray_dir}), which Ray "
    "deletes after the job; a relative storage_path, like the default ./hpsearch-results, lands there under "
    "`ray job submit --working-dir`: use an absolute path on storage every node reaches, "
    "e.g. --set storage_path=/mnt/shared/hpsearch-results"
)


def test_the_default_storage_path_inside_a_ray_job_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / JOB_DIR
    job.mkdir(parents=True)
    path = write(job)  # no storage_path: the default ./hpsearch-results, relative to the job's folder
    monkeypatch.chdir(job)
    before = tree(tmp_path)
    assert main(["validate", str(path)]) == 2
    message = JOB_MESSAGE.format(
        storage=job / "hpsearch-results", ray_dir=tmp_path / JOB_DIR.partition("/working_dir_files")[0]
    )
    assert capsys.readouterr().err == f"Error: invalid spec in {path} (1 problem):\n  - {message}\n"
    assert tree(tmp_path) == before


def test_an_absolute_storage_path_outside_works_inside_a_ray_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = tmp_path / JOB_DIR
    job.mkdir(parents=True)
    shared = tmp_path / "mnt" / "shared"
    shared.mkdir(parents=True)
    monkeypatch.chdir(job)
    path = write(job)
    assert main(["validate", str(path), "--set", f"storage_path={shared}"]) == 0
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (f"/tmp/{JOB_DIR}/hpsearch-results", "/tmp/ray/session_2025-01-01_00-00-00_000000_4242/runtime_resources"),
        ("/data/ray/session_1/runtime_resources/py_modules_files/x", "/data/ray/session_1/runtime_resources"),
        ("/tmp/ray/session_1/runtime_resources", "/tmp/ray/session_1/runtime_resources"),
        ("/tmp/ray/session_1/logs/results", None),  # Ray's session folder, but not a job's working copy
        ("/home/me/runtime_resources/results", None),  # a folder of the user's that has Ray's name
        ("/mnt/shared/hpsearch-results", None),
    ],
)
def test_ray_job_working_dir(path: str, expected: str | None) -> None:
    found = ray_job_working_dir(Path(path))
    assert (str(found) if found else None) == expected


def test_resume_checks_the_storage_too_before_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An experiment folder inside a job's working directory (copied there with the job's files) is refused."""
    exp = tmp_path / JOB_DIR / "results" / "storage"
    exp.mkdir(parents=True)
    files.write_spec(exp, load_spec({**SPEC, "storage_path": str(exp.parent)}).to_dict())
    before = tree(tmp_path)
    assert main(["resume", str(exp)]) == 2
    message = JOB_MESSAGE.format(storage=exp.parent, ray_dir=tmp_path / JOB_DIR.partition("/working_dir_files")[0])
    assert capsys.readouterr().err == f"Error: invalid spec in {exp}/hpsearch_spec.yaml (1 problem):\n  - {message}\n"
    assert tree(tmp_path) == before


# --------------------------------------------------------------------------- lengths (NAME_MAX, PATH_MAX)


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """A file system with NAME_MAX 20, to test the boundaries with short names."""
    limits = (20, 4096)
    monkeypatch.setattr(_storage, "_limits", lambda existing: limits)
    return limits


def test_a_name_of_exactly_name_max_fits(tmp_path: Path, small_limits: tuple[int, int]) -> None:
    assert path_problems(tmp_path, "n" * 20) == []
    assert [p.path for p in path_problems(tmp_path, "n" * 21)] == ["name"]


def test_only_folders_still_to_be_made_are_measured(tmp_path: Path, small_limits: tuple[int, int]) -> None:
    existing = tmp_path / ("e" * 25)  # longer than this fake NAME_MAX, but it exists: not ours to judge
    existing.mkdir()
    assert path_problems(existing / "new", "x") == []
    assert [str(p) for p in path_problems(existing / ("m" * 21), "x")] == [
        f"storage_path: the folder name '{'m' * 21}' is 21 bytes long, but the file system at {existing} "
        "allows at most 20"
    ]


def test_the_experiment_folder_leaves_headroom_below_path_max(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fits = 10  # the longest name that leaves the headroom free, on this fake file system
    path_max = len(str(tmp_path / ("n" * fits))) + 1 + PATH_HEADROOM
    monkeypatch.setattr(_storage, "_limits", lambda existing: (255, path_max))
    assert path_problems(tmp_path, "n" * fits) == []
    assert [str(p) for p in path_problems(tmp_path, "n" * (fits + 1))] == [
        f"storage_path: the experiment folder's path would be {path_max - PATH_HEADROOM} bytes long; with up to "
        f"{PATH_HEADROOM} more for the trial folders and files inside it, paths would pass the file system's limit "
        f"of {path_max} (PATH_MAX): choose a shorter storage_path (or name)"
    ]


def test_the_real_limits_are_those_of_the_nearest_existing_folder(tmp_path: Path) -> None:
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    assert _storage._nearest_existing(tmp_path / "not" / "yet") == tmp_path
    assert path_problems(tmp_path / "not" / "yet", "n" * name_max) == []
    assert [p.path for p in path_problems(tmp_path / "not" / "yet", "n" * (name_max + 1))] == ["name"]


def test_a_full_storage_is_said_in_one_line_naming_its_mount_point(small_disk: Path) -> None:
    import errno

    from full_disk import fill

    from hpsearch.spec._storage import storage_full

    storage = small_disk / "hpsearch-results"
    storage.mkdir()
    lost = FileNotFoundError(errno.ENOENT, "No such file or directory", str(storage / "exp" / "error.pkl"))
    assert storage_full(storage, lost) is None  # room left: a missing file is not a full disk
    filled = fill(storage)  # as 8 MB checkpoints do
    assert filled.errno == errno.ENOSPC
    line = storage_full(storage, lost)  # Tune then fails on a file it could not write
    assert line is not None and line.startswith(
        f"the storage is full: the file system at {small_disk} has 0.0 MiB free"
    )
    assert line.endswith(
        f"writing the search's results failed (No such file or directory: {storage / 'exp' / 'error.pkl'})"
    )
    assert storage_full(storage, filled) is not None
