"""A trial's checkpoint loaded back into its model, whatever wrote it: one call after a search.

A search keeps every trial's checkpoints in its nested runs' folders; ``load_results`` names each
trial's best one (``trials.best_checkpoint``). What a checkpoint folder holds depends on the loop that
wrote it, and :func:`load_model` reads each kind the way its framework does:

- ``hpsearch.train.report``: ``hpsearch_state.pt`` (the model's ``state_dict`` under ``"model"``), or,
  for an FSDP-sharded model, ``hpsearch_shards/`` (``torch.distributed.checkpoint``'s files, one per
  rank), loaded here in one process;
- Ray's Lightning ``RayTrainReportCallback``: ``checkpoint.ckpt``, read by the module class's
  ``load_from_checkpoint`` (hyperparameters saved with ``save_hyperparameters`` rebuild the model), or,
  from an FSDP strategy with ``state_dict_type="sharded"``, a ``checkpoint.ckpt/`` folder of every rank's
  shard and Lightning's ``meta.pt`` (the class is built from the hyperparameters there, then the shards read);
- Ray's Hugging Face ``RayTrainReportCallback``: ``checkpoint/`` (the ``Trainer``'s ``save_pretrained``
  folder), read by the model class's ``from_pretrained``;
- a folder with one ``*.pt``/``*.pth`` file of a ``state_dict`` (the way Ray Train's guides write a
  plain PyTorch checkpoint: ``torch.save(model.state_dict(), ...)``), or of a dict holding one under
  ``"model"`` / ``"model_state_dict"`` / ``"state_dict"``.

A folder someone sends you is not trusted: ``torch.load`` runs with ``weights_only=True`` (tensors and plain
values, and the NumPy arrays of ``hpsearch.train``'s random states), a file that needs more is refused, and so
are ``torch.distributed.checkpoint`` shards (their ``.metadata`` is a plain pickle) and a checkpoint the folder's
records place outside the folder. ``trust_folder=True`` loads them as their frameworks do. The search's own
restores (:func:`hpsearch.train.restore`, Ray Train's) read files the search itself wrote, and are not changed.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.analysis import Results, load_results
from hpsearch.errors import ResultsError
from hpsearch.experiment import files

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["load_model", "checkpoint_of"]

#: What each writer leaves in a checkpoint folder (hpsearch.train's names are its own constants; Ray's are
#: its callbacks' ``CHECKPOINT_NAME``, written here so that reading a folder needs neither Lightning nor HF).
HPSEARCH_STATE = "hpsearch_state.pt"
HPSEARCH_SHARDS = "hpsearch_shards"
LIGHTNING_CKPT = "checkpoint.ckpt"
HF_FOLDER = "checkpoint"
_STATE_KEYS = ("model", "model_state_dict", "state_dict")
#: What a refusal tells the user to pass.
TRUST = "trust_folder=True"


def checkpoint_of(results: Results | str | os.PathLike[str], trial_id: str | None = None) -> Path:
    """The folder of a trial's best checkpoint still on disk (the best trial's when ``trial_id`` is None).

    Raises:
        ResultsError: No trial ranks (none reported a finite value), the trial is unknown, or it
            kept no checkpoint (a loop that reports without one).
    """
    res = results if isinstance(results, Results) else load_results(results)
    if trial_id is None:
        best = res.best
        if best is None and res.constraints and bool(res.trials["rank"].notna().any()):
            rules = "; ".join(c.text for c in res.constraints)
            raise ResultsError(
                f"{res.experiment_dir}: no trial met the constraints ({rules}), so none is the best; "
                "name one with trial_id= (results.ranked() lists them by violation)"
            )
        if best is None:
            raise ResultsError(f"{res.experiment_dir}: no trial has a finite {res.metric}, so none is the best")
        row = best
    else:
        rows = res.trials[res.trials["trial_id"] == trial_id]
        if rows.empty:
            known = ", ".join(res.trials["trial_id"].astype(str)) or "none"
            raise ResultsError(f"{res.experiment_dir}: no trial {trial_id!r}; its trials: {known}")
        row = rows.iloc[0]
    path = row["best_checkpoint"]
    if not path:
        outside = _outside(res, str(row["trial_id"]))
        if outside is not None:
            raise ResultsError(
                f"trial {row['trial_id']}'s checkpoint {outside} (named in its result.json) lies outside the "
                f"experiment folder {res.experiment_dir}: refused; a folder's records may only name its own files "
                "(pass checkpoint= to load a folder you trust)"
            )
        raise ResultsError(
            f"trial {row['trial_id']} has no checkpoint on disk: its loop reported without one "
            "(hpsearch.train.report(..., model=...) or ray.train.report(..., checkpoint=...) saves one)"
        )
    folder = Path(str(path))
    if not files.inside(folder, res.experiment_dir):
        raise ResultsError(
            f"trial {row['trial_id']}'s checkpoint {folder} lies outside the experiment folder "
            f"{res.experiment_dir}: refused; a folder's records may only name its own files "
            "(pass checkpoint= to load a folder you trust)"
        )
    return folder


def _outside(res: Results, trial_id: str) -> str | None:
    """A checkpoint the trial's records name outside the experiment folder, if any (never read, so not ranked)."""
    recorded = res.history.loc[res.history["trial_id"] == trial_id, "checkpoint"]
    return next((p for p in recorded if isinstance(p, str) and not files.inside(Path(p), res.experiment_dir)), None)


def load_model(
    results: Results | str | os.PathLike[str] | None,
    model: Any,
    *,
    trial_id: str | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    map_location: str = "cpu",
    trust_folder: bool = False,
) -> Any:
    """The best trial's model (or ``trial_id``'s, or ``checkpoint``'s), trained weights loaded.

    By default nothing in the folder can run code: files are read with ``torch.load(..., weights_only=True)``,
    and a checkpoint that needs more (pickled objects, ``torch.distributed.checkpoint`` shards) is refused,
    as is a checkpoint the folder's records place outside the folder.

    Args:
        results: What :func:`hpsearch.load_results` returns, or the experiment folder (``None`` with ``checkpoint``).
        model: An ``nn.Module`` built as the loop built it (its weights are replaced, in place), or a
            class that loads itself: a ``LightningModule`` subclass (``load_from_checkpoint``) or a
            Hugging Face model class (``from_pretrained``).
        trial_id: Another trial than the best.
        checkpoint: A checkpoint folder to load instead of a trial's best (``results`` is then not read).
        map_location: Where the tensors go (``"cpu"``, ``"cuda:0"``).
        trust_folder: Load what the folder holds the way its framework does (``weights_only=False``, the
            shards' pickled index): only for a folder you trust, since unpickling a file can run its code.

    Returns:
        The model, in eval mode: the one passed, or the one the class built.

    Raises:
        ResultsError: No such trial or checkpoint, or a folder this cannot read into that model
            (the message says what the folder holds and what ``model`` must be for it), or one that
            needs ``trust_folder=True``.
    """
    if checkpoint is None and results is None:
        raise ResultsError("load_model: name the results (or their folder), or a checkpoint folder")
    folder = Path(checkpoint) if checkpoint is not None else checkpoint_of(results, trial_id)  # type: ignore[arg-type]  # not None: checked above
    if not folder.is_dir():
        raise ResultsError(f"checkpoint {folder} is not a folder on this machine (was it deleted or not copied?)")
    trust = bool(trust_folder)
    if (folder / LIGHTNING_CKPT).is_file():
        loaded = _lightning(folder / LIGHTNING_CKPT, model, map_location, trust)
    elif (folder / HF_FOLDER).is_dir():
        loaded = _hugging_face(folder / HF_FOLDER, model)
    elif (folder / LIGHTNING_CKPT).is_dir():
        loaded = _lightning_sharded(folder / LIGHTNING_CKPT, model, map_location, trust)
    elif (folder / HPSEARCH_SHARDS).is_dir():  # before the state file, which then holds no model
        loaded = _from_shards(folder / HPSEARCH_SHARDS, _module(model, folder), trust)
    elif (folder / HPSEARCH_STATE).is_file():
        state = _state_dict(folder / HPSEARCH_STATE, map_location, trust)
        loaded = _into(model, folder, state, map_location)
    else:
        loaded = _into(model, folder, _plain_state_dict(folder, map_location, trust), map_location)
    loaded.eval()
    return loaded


def _module(model: Any, folder: Path) -> torch.nn.Module:
    import torch  # lazy: torch loads only when a model is loaded, not with the results

    if isinstance(model, torch.nn.Module):
        return model
    raise ResultsError(
        f"checkpoint {folder} holds a state_dict: pass the model built as the loop built it "
        f"(an nn.Module instance), not {_name(model)}"
    )


def _into(model: Any, folder: Path, state: dict[str, Any], map_location: str) -> torch.nn.Module:
    module = _module(model, folder)
    module.load_state_dict(state)
    return module.to(map_location)


def _load(path: Path, map_location: str, trust: bool) -> Any:
    """``torch.load`` of one file: weights only (plus NumPy's arrays of random states) unless the folder is trusted.

    Raises:
        ResultsError: The file needs more than weights (a pickled object), and the folder is not trusted.
    """
    import torch  # lazy: as in _module

    if trust:
        return torch.load(path, map_location=map_location, weights_only=False)
    try:
        with _numpy_arrays():
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise ResultsError(_refusal(path)) from None


def _refusal(path: Path) -> str:
    """The one line that refuses a file that needs more than weights, naming what it holds and what to pass."""
    import torch  # lazy: as in _module

    try:
        held = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))  # reads the opcodes, runs nothing
    except Exception:  # noqa: BLE001 - older torch (before 2.5) or a damaged file: the line says less
        held = []
    what = f" ({', '.join(held[:5])}{', ...' if len(held) > 5 else ''})" if held else ""
    return (
        f"{path} holds pickled objects{what}, not only weights, and loading them can run code from the folder: "
        f"refused; if you trust this folder, pass {TRUST} to hpsearch.load_model"
    )


def _numpy_arrays() -> Any:
    """A context in which ``weights_only`` also reads NumPy arrays of plain numbers (``hpsearch.train``'s random
    states hold NumPy's): the array's rebuild function, ``ndarray`` and ``dtype``, and number dtypes only (an
    object array, which holds pickled objects, stays refused)."""
    import numpy as np  # lazy: with torch, only when a model is loaded
    import torch  # lazy: as in _module

    if not hasattr(torch.serialization, "safe_globals"):  # torch < 2.5: weights_only reads no NumPy array at all
        return contextlib.nullcontext()
    # The array's rebuild function, as pickle itself finds it (numpy 2 keeps it in numpy._core, numpy 1 in
    # numpy.core): through the public pickle protocol, not a private name.
    rebuild: Callable[..., Any] = np.zeros(1).__reduce__()[0]  # type: ignore[assignment]  # a reduce tuple's callable
    dtypes = {type(np.dtype(t)) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16)}
    dtypes |= {type(np.dtype(t)) for t in (np.uint32, np.uint64, np.float16, np.float32, np.float64)}
    return torch.serialization.safe_globals([rebuild, np.ndarray, np.dtype, *sorted(dtypes, key=str)])


def _state_dict(path: Path, map_location: str, trust: bool) -> dict[str, Any]:
    import torch  # lazy: as in _module

    saved = _load(path, map_location, trust)
    for key in _STATE_KEYS:
        if isinstance(saved, dict) and isinstance(saved.get(key), dict):
            return saved[key]  # type: ignore[no-any-return]  # a state_dict: str -> tensor
    if isinstance(saved, dict) and saved and all(isinstance(v, torch.Tensor) for v in saved.values()):
        return saved
    keys = ", ".join(map(str, saved)) if isinstance(saved, dict) else type(saved).__name__
    raise ResultsError(f"{path} holds no state_dict (looked for {', '.join(_STATE_KEYS)}; it has: {keys})")


def _plain_state_dict(folder: Path, map_location: str, trust: bool) -> dict[str, Any]:
    candidates = sorted(p for p in folder.iterdir() if p.suffix in (".pt", ".pth") and p.is_file())
    if len(candidates) != 1:
        held = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
        raise ResultsError(
            f"checkpoint {folder} holds {held}: not one this can read (hpsearch.train's {HPSEARCH_STATE}, "
            f"Lightning's {LIGHTNING_CKPT}, Hugging Face's {HF_FOLDER}/, or one .pt file of a state_dict)"
        )
    return _state_dict(candidates[0], map_location, trust)


def _shards_refusal(shards: Path) -> str:
    return (
        f"checkpoint {shards} holds torch.distributed.checkpoint shards, whose index (.metadata) is a plain "
        f"pickle that can run code from the folder when read: refused; if you trust this folder, pass {TRUST} "
        "to hpsearch.load_model"
    )


def _from_shards(shards: Path, module: torch.nn.Module, trust: bool) -> torch.nn.Module:
    """Every rank's shard of an FSDP model, read into a whole model in this one process (a trusted folder only:
    ``torch.distributed.checkpoint`` reads its index, ``.metadata``, with plain ``pickle``)."""
    if not trust:
        raise ResultsError(_shards_refusal(shards))
    from torch.distributed.checkpoint.state_dict_loader import load  # lazy: as in _module

    state = {"model": module.state_dict()}
    load(state, checkpoint_id=str(shards))  # no process group: Torch reads every shard here
    module.load_state_dict(state["model"])
    return module


def _lightning(ckpt: Path, model: Any, map_location: str, trust: bool) -> Any:
    if isinstance(model, type) and hasattr(model, "load_from_checkpoint"):
        if not trust and "weights_only" not in inspect.signature(model.load_from_checkpoint).parameters:
            _load(ckpt, "cpu", trust)  # a Lightning without weights_only: the file is checked first, refused here
            return model.load_from_checkpoint(str(ckpt), map_location=map_location)
        try:
            return model.load_from_checkpoint(str(ckpt), map_location=map_location, weights_only=not trust)
        except pickle.UnpicklingError:
            raise ResultsError(_refusal(ckpt)) from None
    import torch  # lazy: as in _module

    if isinstance(model, torch.nn.Module):  # a LightningModule built by hand: its weights only
        model.load_state_dict(_load(ckpt, map_location, trust)["state_dict"])
        return model
    raise ResultsError(
        f"checkpoint {ckpt.parent} is Lightning's ({LIGHTNING_CKPT}): pass the LightningModule class "
        f"(load_from_checkpoint) or a module instance, not {_name(model)}"
    )


def _lightning_sharded(ckpt: Path, model: Any, map_location: str, trust: bool) -> Any:
    """Lightning's FSDP checkpoint with ``state_dict_type="sharded"``: a folder of every rank's shard of the
    module (``torch.distributed.checkpoint``, under ``"model"``) and ``meta.pt`` (epoch, hyperparameters)."""
    import torch  # lazy: as in _module

    if not trust:  # before meta.pt is read: the shards are refused anyway
        raise ResultsError(_shards_refusal(ckpt))
    if isinstance(model, type) and hasattr(model, "load_from_checkpoint"):
        meta = ckpt / "meta.pt"
        hparams = _load(meta, "cpu", trust).get("hyper_parameters") if meta.is_file() else None
        model = model(**(hparams or {}))  # as load_from_checkpoint builds it
    if not isinstance(model, torch.nn.Module):
        raise ResultsError(
            f"checkpoint {ckpt.parent} is Lightning's, sharded ({LIGHTNING_CKPT}/): pass the LightningModule class "
            f"or a module instance, not {_name(model)}"
        )
    return _from_shards(ckpt, model, trust).to(map_location)


def _hugging_face(folder: Path, model: Any) -> Any:
    if not (isinstance(model, type) and hasattr(model, "from_pretrained")):
        raise ResultsError(
            f"checkpoint {folder.parent} is a Hugging Face Trainer's ({HF_FOLDER}/): pass the model class "
            f"(from_pretrained), e.g. transformers.AutoModelForSequenceClassification, not {_name(model)}"
        )
    return model.from_pretrained(str(folder))


def _name(model: Any) -> str:
    return model.__name__ if isinstance(model, type) else f"a {type(model).__name__}"
