"""Training callbacks for long runs: throughput, step checkpoints, the last step.

* `ThroughputLogger`: steps/s and examples/s in the progress line and the logs.
* `StopAtStep`: ends `fit` at a step that is not a whole number of Keras epochs (a
  fractional `epochs`, `max_steps`).
* `PassProgress`: Keras' progress, each Keras epoch named by the passes over the data it
  covers, for a fit whose Keras epochs are not passes (backed up every N steps).
* `StepCheckpoint`: a `tf.train.CheckpointManager` over model + optimizer every
  N steps, keeping the last K (TensorFlow writes each checkpoint to temporary
  files and renames them, and updates the `checkpoint` index file last, so a
  kill mid-write leaves the previous checkpoint as "latest").
* Fault tolerance (the run backup a killed run resumes from) is `backup.RunBackup`.
* `callbacks_as_list`: `fit(callbacks=...)` in any form Keras takes, as a list.

TensorBoard is Keras's own `keras.callbacks.TensorBoard`.
"""

import os
import shutil
import tempfile
import time

import keras


def callbacks_as_list(callbacks):
    """`fit(callbacks=...)` in any form Keras' `fit` takes, as a list (None stays None).

    Keras takes a list, one callback, a nested list, or a `keras.callbacks.CallbackList`
    (`CallbackList` flattens what it is given); the fit loops here add their own callbacks
    to the user's, so they need the list.

    Example:

    >>> stop = keras.callbacks.EarlyStopping()
    >>> callbacks_as_list(stop) == [stop], callbacks_as_list(keras.callbacks.CallbackList([stop])) == [stop]
    (True, True)
    >>> callbacks_as_list(None) is None
    True
    """
    if callbacks is None:
        return None
    if isinstance(callbacks, keras.callbacks.CallbackList):
        return list(callbacks.callbacks)
    return keras.tree.flatten(callbacks)


class StopAtStep(keras.callbacks.Callback):
    """Stop `fit` once `final_step` steps are done, mid-epoch if need be.

    Keras runs whole epochs of `steps_per_epoch`; a fractional `epochs` or a `max_steps` that
    is not a multiple of it ends inside the last one. With `steps_per_epoch`, the step is
    counted from Keras' epoch index (so `initial_epoch` and a run resumed at an epoch boundary
    count the steps already done); without it, from `initial_step`.
    """

    def __init__(self, final_step, *, initial_step=0, steps_per_epoch=None):
        super().__init__()
        self.step = initial_step
        self.final_step = final_step
        self.steps_per_epoch = steps_per_epoch
        self._last_batch = -1

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = -1
        if self.steps_per_epoch:
            self.step = epoch * self.steps_per_epoch

    def on_train_batch_end(self, batch, logs=None):
        self.step += batch - self._last_batch
        self._last_batch = batch
        if self.step >= self.final_step:
            self.model.stop_training = True


class PassProgress(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, each Keras epoch headed by the passes over the data it covers.

    A fit backed up every N steps (`checkpoint_every`) runs Keras epochs of N steps, and Keras'
    own heading counted those: "Epoch 7/8" in a run of 3 epochs. Here the heading is the pass
    and the steps (`Epoch 3/3 (steps 13-14 of 15)`; `Epoch 1-2/3` for steps across two passes).

    >>> PassProgress(steps_per_pass=5, steps_per_epoch=2, total_steps=15).heading(2)
    'Epoch 1-2/3 (steps 5-6 of 15)'
    >>> PassProgress(steps_per_pass=5, steps_per_epoch=2, total_steps=15).heading(7)
    'Epoch 3/3 (step 15 of 15)'
    """

    def __init__(self, *, steps_per_pass, steps_per_epoch, total_steps):
        super().__init__()
        self.steps_per_pass = int(steps_per_pass)
        self.steps_per_epoch = int(steps_per_epoch)
        self.total_steps = int(total_steps)

    def steps(self, epoch):
        """The first and last step (from 1) of Keras epoch `epoch` (from 0)."""
        first = epoch * self.steps_per_epoch + 1
        return first, min(first + self.steps_per_epoch - 1, self.total_steps)

    def heading(self, epoch):
        first, last = self.steps(epoch)
        passes = -(-self.total_steps // self.steps_per_pass)
        start, end = (-(-step // self.steps_per_pass) for step in (first, last))
        steps = f"step {first}" if first == last else f"steps {first}-{last}"
        return f"Epoch {start if start == end else f'{start}-{end}'}/{passes} ({steps} of {self.total_steps})"

    def set_params(self, params):
        super().set_params(params)
        self.epochs = 1  # Keras' own heading ("Epoch k/N", shown when N > 1) is left out: ours replaces it

    def on_epoch_begin(self, epoch, logs=None):
        first, last = self.steps(epoch)
        self.target = last - first + 1  # the last epoch, cut short (`StopAtStep`), ends at its own count
        super().on_epoch_begin(epoch, logs)
        if self.verbose:
            print(self.heading(epoch), flush=True)


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
        self._save_at_epoch_end = False

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
            steps_per_epoch = (self.params or {}).get("steps")
            if steps_per_epoch and batch + 1 >= steps_per_epoch:
                # The epoch's last step: saved at the epoch's end, after the run's backup (a
                # `RunBackup` listed before this callback). A kill between the two writes then
                # leaves a backup of this step that the rerun resumes from exactly; a checkpoint
                # ahead of the backup was "continued" from instead, without the backup's random
                # state: not the uninterrupted run.
                self._save_at_epoch_end = True
            else:
                self._save()

    def on_epoch_end(self, epoch, logs=None):
        if self._save_at_epoch_end:
            self._save_at_epoch_end = False
            self._save()

    def on_train_end(self, logs=None):
        if not self.saved or not self.saved[-1].endswith(f"-{self.step}"):
            self._save()
        if not self.chief:
            shutil.rmtree(self._write_directory(), ignore_errors=True)

    def _save(self):
        from pipelines.atomic_writes import check_free_space, model_nbytes

        check_free_space(self._write_directory(), model_nbytes(self.model),
                         "a checkpoint (weights and optimizer state)")
        self.saved.append(self._manager.save(checkpoint_number=self.step))

    @property
    def latest(self):
        """Path prefix of the newest checkpoint in `directory`, or None."""
        import tensorflow as tf

        return tf.train.latest_checkpoint(self.directory)
