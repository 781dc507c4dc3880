"""Training callbacks for long runs: throughput, step checkpoints, and resuming after a kill.

* `ThroughputLogger`: steps/s and examples/s in the progress line and the logs.
* `StepCheckpoint`: a `tf.train.CheckpointManager` over model + optimizer every
  N steps, keeping the last K (TensorFlow writes each checkpoint to temporary
  files and renames them, and updates the `checkpoint` index file last, so a
  kill mid-write leaves the previous checkpoint as "latest").
* Fault tolerance uses `keras.callbacks.BackupAndRestore`; `resumed_step` reads
  how far a killed run got, so that the caller can skip the batches it consumed
  (see `resumed_step` for why skipping, not a checkpointed iterator).
  `roll_back_backup` steps a backup back to its previous save, so that all
  workers of a multi-worker job resume from the same epoch.

TensorBoard is Keras's own `keras.callbacks.TensorBoard`.
"""

import json
import os
import shutil
import tempfile
import time

import keras


class ThroughputLogger(keras.callbacks.Callback):
    """Adds `steps_per_sec` and `examples_per_sec` to the batch and epoch logs.

    Rates are averaged from the end of the first training call on, so that the
    compile time of the first step does not drag them down; with
    `steps_per_execution=k` Keras reports every k-th step and the rate counts all k.
    Keras's progress bar shows the two keys next to the loss.

    Example:

    >>> logger = ThroughputLogger(global_batch_size=32)
    >>> # model.fit(dataset, callbacks=[logger]); logger.steps_per_sec afterwards

    Args:
        global_batch_size: int. Examples per step over all replicas.
    """

    def __init__(self, global_batch_size):
        super().__init__()
        self.global_batch_size = int(global_batch_size)
        self.steps_per_sec = 0.0
        self.examples_per_sec = 0.0
        self._started = None
        self._steps = 0
        self._last_batch = -1

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = -1

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        done = batch - self._last_batch  # > 1 with steps_per_execution
        self._last_batch = batch
        if self._started is None:
            self._started = now  # the first call compiles: start timing after it
        else:
            self._steps += done
            self.steps_per_sec = self._steps / max(now - self._started, 1e-9)
            self.examples_per_sec = self.steps_per_sec * self.global_batch_size
        if logs is not None:
            logs["steps_per_sec"] = self.steps_per_sec
            logs["examples_per_sec"] = self.examples_per_sec

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["steps_per_sec"] = self.steps_per_sec
            logs["examples_per_sec"] = self.examples_per_sec


class StepCheckpoint(keras.callbacks.Callback):
    """Save model + optimizer every `every` steps with a `tf.train.CheckpointManager`, keeping `keep`.

    Checkpoints are named `ckpt-STEP` after the global step (restored runs go on
    numbering), and the final step is always saved. Restore one with
    `tf.train.Checkpoint(model=model, optimizer=model.optimizer).restore(path)`.
    With multi-worker training every worker must save (saving runs collective
    ops); pass `chief=False` on the others and they write to a temporary
    directory that is deleted.

    Example:

    >>> checkpoints = StepCheckpoint("/tmp/run/checkpoints", every=1000, keep=3)
    >>> # model.fit(dataset, steps_per_epoch=..., callbacks=[checkpoints])

    Args:
        directory: str. Where the checkpoints go.
        every: int. Save every this many optimizer steps.
        keep: int. How many of the latest checkpoints to keep.
        initial_step: int. Global step at which this `fit` starts (for resumed runs).
        chief: bool. False on non-chief workers.
    """

    def __init__(self, directory, *, every, keep=3, initial_step=0, chief=True):
        super().__init__()
        if every <= 0:
            raise ValueError(f"every must be positive, got {every}")
        self.directory = directory
        self.every = int(every)
        self.keep = int(keep)
        self.chief = chief
        self.step = int(initial_step)
        self.saved = []  # paths written by this process, in order
        self._manager = None
        self._epoch = 0
        self._last_batch = -1

    def _write_directory(self):
        if self.chief:
            return self.directory
        return os.path.join(tempfile.gettempdir(), f"bert_keras_worker_ckpt_{os.getpid()}")

    def on_train_begin(self, logs=None):
        import tensorflow as tf

        checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.model.optimizer)
        self._manager = tf.train.CheckpointManager(checkpoint, self._write_directory(), max_to_keep=self.keep)

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = -1

    def on_train_batch_end(self, batch, logs=None):
        before = self.step
        self.step += batch - self._last_batch
        self._last_batch = batch
        # Crossed a multiple of `every` (with steps_per_execution the step can jump past it).
        if self.step // self.every > before // self.every:
            self._save()

    def on_train_end(self, logs=None):
        if not self.saved or not self.saved[-1].endswith(f"-{self.step}"):
            self._save()
        if not self.chief:
            shutil.rmtree(self._write_directory(), ignore_errors=True)

    def _save(self):
        self.saved.append(self._manager.save(checkpoint_number=self.step))

    @property
    def latest(self):
        """Path prefix of the newest checkpoint in `directory`, or None."""
        import tensorflow as tf

        return tf.train.latest_checkpoint(self.directory)


def resumed_step(backup_dir, steps_per_epoch):
    """The global step a run killed under `BackupAndRestore` will resume at (0 if none).

    Keras 3's `BackupAndRestore` restores weights + optimizer and the *epoch*
    (`training_metadata.json`); a mid-epoch backup (integer `save_freq`)
    restores the weights but replays that epoch from its start. So the
    pretraining loop makes one Keras epoch = one backup interval (`save_freq=
    "epoch"`): the resume point is then exact, `epoch * steps_per_epoch`.

    The data position: pretraining reads an infinite (repeated) stream, so the
    data position *is* the step count, and the caller resumes it with
    `dataset.skip(step)` on the same seeded pipeline. That yields exactly the
    batches the uninterrupted run would have seen, and needs nothing beyond the
    step number. A checkpointed `tf.data` iterator would avoid re-reading the
    skipped records, but Keras `fit` owns its iterator (it cannot be put in a
    checkpoint), and iterator checkpoints hold shuffle buffers (hundreds of MB)
    and break when the pipeline or the number of workers changes. Skipping
    reads (not trains on) the consumed batches: input-pipeline work only.

    Example:

    >>> resumed_step("/nonexistent/backup", steps_per_epoch=100)
    0

    Args:
        backup_dir: str. The `backup_dir` given to `BackupAndRestore`.
        steps_per_epoch: int. Steps per Keras epoch (= per backup).
    """
    return backed_up_epoch(backup_dir) * int(steps_per_epoch)


# File names of keras.callbacks.BackupAndRestore (double_checkpoint keeps the previous pair).
_BACKUP_FILES = ("latest.weights.h5", "training_metadata.json")


def backed_up_epoch(backup_dir, previous=False):
    """The epoch a `BackupAndRestore` backup holds (0 when there is none or it cannot be read).

    Args:
        backup_dir: str. The callback's `backup_dir`.
        previous: bool. Read the previous backup (the `.bkp` pair that
            `double_checkpoint=True` keeps) instead of the latest.
    """
    path = os.path.join(backup_dir, "training_metadata.json" + (".bkp" if previous else ""))
    try:
        with open(path, encoding="utf-8") as f:
            return int(json.load(f).get("epoch", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def repair_backup(backup_dir):
    """Falls back to the previous backup when the latest one's metadata was cut off mid-write.

    Keras writes the weights, then `training_metadata.json`; a kill during the
    second write leaves a file that `BackupAndRestore` cannot parse (it raises on
    restart). The previous pair (`double_checkpoint=True`) is restored instead;
    the cut-off pair is kept as `<file>.ahead`. Returns True when it repaired.

    Args:
        backup_dir: str. A `BackupAndRestore` backup directory.
    """
    path = os.path.join(backup_dir, "training_metadata.json")
    if not os.path.exists(path):
        return False
    try:
        with open(path, encoding="utf-8") as f:
            int(json.load(f)["epoch"])
        return False
    except (OSError, ValueError, KeyError, TypeError):
        pass
    names = [os.path.join(backup_dir, name) for name in _BACKUP_FILES]
    for name in names:
        if os.path.exists(name):
            os.replace(name, name + ".ahead")
        if os.path.exists(name + ".bkp"):
            os.replace(name + ".bkp", name)
    return True


def roll_back_backup(backup_dir, epoch):
    """Makes `backup_dir` hold the backup of `epoch`: the latest one, or the previous (`.bkp`) one.

    Multi-worker runs need every worker to resume from the same epoch. A worker
    killed while writing its backup has one epoch fewer than the others (Keras
    falls back to its previous backup); the others then step back to theirs.
    The backup that is given up is moved to `<file>.ahead` (removed with the backup
    directory when the run completes).

    Args:
        backup_dir: str. A `BackupAndRestore` backup directory (double_checkpoint=True).
        epoch: int. The epoch to resume from; 0 moves the backup aside (start afresh).

    Raises:
        RuntimeError: neither the latest nor the previous backup is of `epoch`.
    """
    latest = backed_up_epoch(backup_dir)
    if latest == epoch:
        return
    names = [os.path.join(backup_dir, name) for name in _BACKUP_FILES]
    if epoch == 0:
        for name in names:
            for path in (name, name + ".bkp"):
                if os.path.exists(path):
                    os.replace(path, path + ".ahead")
        return
    previous = backed_up_epoch(backup_dir, previous=True)
    if previous != epoch or not all(os.path.exists(name + ".bkp") for name in names):
        raise RuntimeError(
            f"{backup_dir} holds the backups of epochs {latest} and {previous}, but the other workers can only "
            f"resume from epoch {epoch}: their backups differ by more than one save. Start every worker "
            f"afresh (move the backup directories aside) or restore matching backups."
        )
    for name in names:
        os.replace(name, name + ".ahead")
        os.replace(name + ".bkp", name)
