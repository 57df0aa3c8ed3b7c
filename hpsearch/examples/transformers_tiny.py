"""A Hugging Face ``transformers.Trainer`` loop, written the way Ray Train's Transformers guide writes it, searched unchanged.

A tiny BERT-style classifier built from a ``BertConfig`` (no download: 2 layers of width 32, 2 heads, a
vocabulary of 64 tokens) learns whether a marker token occurs in a sequence of random tokens: a
synthetic, deterministic data set (:class:`MarkerDataset`; half the sequences hold the marker once).
:func:`train_loop` runs inside every worker of the trial's ``TorchTrainer``: it builds a
``transformers.Trainer``, adds Ray's ``RayTrainReportCallback``, passes it through ``prepare_trainer``
(``ray.train.huggingface.transformers``) and resumes from Ray's checkpoint as the guide does. Nothing
in it knows about hpsearch.

What reaches the search is what ``RayTrainReportCallback`` reports each time the Trainer saves a
checkpoint (its ``on_save``): every value the Trainer has logged so far, the latest of each name (its
``log_history`` merged in order), with a checkpoint: a folder holding the Trainer's own checkpoint
(``RayTrainReportCallback.CHECKPOINT_NAME``). Here the Trainer logs, evaluates and saves at the end of
every epoch (``logging_strategy``, ``eval_strategy`` and ``save_strategy`` all ``"epoch"``), in that
order, so each report holds that epoch's ``eval_loss`` (and ``eval_runtime``, ...), the epoch's mean
training ``loss``, ``grad_norm`` and ``learning_rate``, plus ``epoch`` (the Trainer's, a float counted
from 1: ``1.0`` after the first epoch) and ``step`` (the optimizer steps so far). Every worker reports
the same ``eval_loss`` and ``loss`` (the Trainer gathers them across the workers). The spec's ``metric``
is ``eval_loss`` in search_spaces/transformers_tiny.yaml.

Needs the ``transformers`` extra (``pip install "hpsearch[transformers]"``: transformers and accelerate).

Config keys (missing keys take the default, unknown keys are ignored):
    learning_rate (float): AdamW's peak learning rate (the Trainer decays it linearly to 0). Default 1e-3.
    weight_decay (float): AdamW's weight decay. Default 0.0.
    epochs (int): The Trainer's ``num_train_epochs``, counting resumed ones. Default 3.
    batch_size (int): ``per_device_train_batch_size``, per worker. Default 16.
    seed (int): The Trainer's seed (model init, shuffling). Default 0.
    threads (int): Torch threads per worker. Default 1.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import ray.train
import torch
from ray.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments, set_seed

__all__ = ["MarkerDataset", "build_model", "train_loop"]

VOCAB, SEQ_LEN = 64, 16
CLS, MARKER = 1, 2  # token 0 is BERT's padding id, never used: every sequence has SEQ_LEN tokens
N_TRAIN, N_EVAL = 2048, 512


class MarkerDataset(Dataset[dict[str, torch.Tensor]]):
    """``n`` sequences of random tokens after a ``CLS`` token; label 1 when the sequence holds ``MARKER``.

    Deterministic for a given ``seed``: the even items are label 0, the odd ones hold the marker once,
    at a random position.
    """

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(MARKER + 1, VOCAB, (n, SEQ_LEN), generator=g)
        ids[:, 0] = CLS
        labels = torch.arange(n) % 2
        where = torch.randint(1, SEQ_LEN, (n,), generator=g)
        ids[labels == 1, where[labels == 1]] = MARKER
        self.input_ids, self.labels = ids, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.input_ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": self.labels[i]}


def build_model() -> BertForSequenceClassification:
    """The tiny classifier, from a config (randomly initialised, nothing downloaded)."""
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=SEQ_LEN,
    )
    # marker or not; set after, as BertConfig's typed signature leaves out the base config's keywords
    config.num_labels = 2
    return BertForSequenceClassification(config)


def train_loop(config: dict[str, Any]) -> None:
    """Train the tiny classifier with ``transformers.Trainer`` on one Ray Train worker, as Ray's guide does.

    Args:
        config: Hyperparameters; see the module docstring for keys and defaults.
    """
    torch.set_num_threads(int(config.get("threads", 1)))
    seed = int(config.get("seed", 0))
    set_seed(seed)
    model = build_model()
    train_dataset, eval_dataset = MarkerDataset(N_TRAIN, seed=0), MarkerDataset(N_EVAL, seed=1)

    # The Trainer's output_dir only stages each checkpoint for RayTrainReportCallback, which copies it into
    # Ray's storage. A temporary folder per worker leaves nothing in the working directory (where the guide's
    # relative output_dir would go), and keeps one worker from copying another's checkpoint while it is
    # still being written: there is no barrier between the Trainer's save and the callback. Ray merges what
    # each worker's checkpoint holds: rank 0's model, optimizer and state, every worker's RNG state. A worker
    # killed mid-trial (a scheduler's stop, the budget's) leaves its last staged checkpoint there.
    with tempfile.TemporaryDirectory(prefix="hf-trainer-") as output_dir:
        training_args = TrainingArguments(
            output_dir=output_dir,
            # Log, evaluate and save once per epoch, in that order: each report holds that epoch's eval_loss.
            logging_strategy="epoch",
            eval_strategy="epoch",
            save_strategy="epoch",
            save_total_limit=1,  # the staging folder keeps the latest only; Ray keeps the reported ones
            learning_rate=float(config.get("learning_rate", 1e-3)),
            weight_decay=float(config.get("weight_decay", 0.0)),
            num_train_epochs=int(config.get("epochs", 3)),
            per_device_train_batch_size=int(config.get("batch_size", 16)),
            per_device_eval_batch_size=64,
            seed=seed,
            # The Trainer's default (True) multiplies every loss by the number of workers for models that take
            # loss kwargs, assuming they divide by the whole batch's token count; a classifier's loss is already
            # a mean, so eval_loss and loss would read twice their value with 2 workers (transformers#35078).
            average_tokens_across_devices=False,
            report_to="none",
            use_cpu=True,  # the shipped spec's workers have no GPU; Ray's guide leaves it out for GPU workers
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
        )
        # reports the logged metrics and a checkpoint on each save
        trainer.add_callback(RayTrainReportCallback())  # type: ignore[no-untyped-call]  # Ray's __init__ has no annotations
        trainer = prepare_trainer(trainer)

        checkpoint = ray.train.get_checkpoint()  # set when the trial resumes (or a scheduler restarts it)
        if checkpoint:
            with checkpoint.as_directory() as ckpt_dir:
                ckpt_path = os.path.join(ckpt_dir, RayTrainReportCallback.CHECKPOINT_NAME)
                trainer.train(resume_from_checkpoint=ckpt_path)
        else:
            trainer.train()
