"""How a task's `fit` runs: every argument checked before the first step, the data packed as the
task packs it, the recipe's schedule sized to the steps, then Keras' own `fit` loop.

`fit` is `TextTask.fit`'s body (for raw text, and for batches already packed by the task's
preprocessor or your own); `keras_epochs` turns fractional epochs and `max_steps`
into whole Keras epochs whose last one stops at the right step.

Example:

>>> keras_epochs(total_steps=10, steps_per_epoch=4, callbacks=None)[0]  # 4 + 4 + 2 (stopped)
3
>>> split_off_validation(["a", "b", "c", "d"], [0, 1, 0, 1], None, 0.25)[3]  # Keras: the last rows
(['d'], [1])
"""

import contextlib
import functools
import inspect
import math
import warnings

import keras
import numpy as np
import tensorflow as tf

from bert_keras.tasks import recipe as finetuning_recipe
from bert_keras.tasks.dataset_inputs import is_tokenized_dataset, read_batch_source, without_autotune_thread
from bert_keras.tasks.finetuning_run import forget_run_start, task_backup_callback
from bert_keras.tasks.inputs import TaskInputError, check_count, check_epochs, label_ids, num_rows, take_rows
from bert_keras.tasks.validation import ValidationOnOneDevice, validation_dataset, validation_metrics
from bert_keras.tasks.task_batches import batch_size_for, packed_batches
from bert_keras.training.backup import forget_restored_epoch, resumed_backup_epoch, with_run_backups
from pipelines.tensorflow_logs import caller_stacklevel


def while_fitting(method):
    """Marks the task as fitting during `method` (`task.fitting`): the form of data a fit reads
    fixes what the task reads; a `predict` / `evaluate` before the first fit only guesses it."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        previous, self.fitting = getattr(self, "fitting", False), True
        try:
            return method(self, *args, **kwargs)
        finally:
            self.fitting = previous
    return wrapper


def fit(task, x, y, *, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
        class_weight, sample_weight, initial_epoch, steps_per_epoch, validation_steps, validation_batch_size,
        validation_freq, max_steps, seed, run_dir, checkpoint_every, keep_run_dir):
    """`TextTask.fit` (its docstring has the arguments): checks everything before the first step,
    packs the data as the task does, sizes the recipe's schedule, then runs Keras' own loop."""
    if isinstance(x, tf.data.Dataset) or inspect.isgenerator(x):
        shuffle = False  # as Keras: a dataset or generator is read in its own order
    x, batch_size = read_batch_source(x, batch_size, streamed=steps_per_epoch is not None)
    batch_size = batch_size_for(task, x, batch_size)
    epochs = check_epochs(epochs)
    max_steps = check_count("max_steps", max_steps)
    steps_per_epoch = check_count("steps_per_epoch", steps_per_epoch)
    validation_batch_size = check_count("validation_batch_size", validation_batch_size) or batch_size
    checkpoint_every = check_count("checkpoint_every", checkpoint_every)
    if checkpoint_every and not run_dir:
        raise TaskInputError("checkpoint_every: needs run_dir= (where the backups go)")
    if class_weight is not None:
        class_weight = class_weight_ids(task, class_weight, sample_weight)
    callbacks, keras_backup = with_run_backups(callbacks)  # also: one callback, a CallbackList
    finetuning_recipe.check_learning_rate_callbacks(task, callbacks)
    forget_restored_epoch(task)  # an earlier fit's restored epoch: this one starts at its own
    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise TaskInputError("y / sample_weight: with a tf.data.Dataset as x, labels and weights "
                                 "come from its elements ((x, y) or (x, y, sample_weight))")
        if validation_split and validation_data is None:
            raise TaskInputError("validation_split: works on in-memory data only (as in Keras); with "
                                 "a dataset, pass validation_data= (e.g. dataset.take(n))")
    elif validation_split and validation_data is None:  # as Keras: validation_data overrides the split
        x, y, sample_weight, validation_data = split_off_validation(x, y, sample_weight, validation_split)
    if x is None:
        raise TaskInputError("x: no training data given")
    if isinstance(x, tf.data.Dataset) and is_tokenized_dataset(x):  # packed already: read as they come
        dataset = packed_batches(task, x, batch_size)
        steps = packed_steps(dataset, counted=steps_per_epoch is None)
    else:
        dataset, steps = task._train_dataset(x, y, sample_weight=sample_weight, batch_size=batch_size,
                                             shuffle=shuffle, seed=seed)
    if steps is None and steps_per_epoch is None:
        raise TaskInputError("x: an infinite dataset (.repeat()); pass steps_per_epoch= (as Keras), or "
                             "a finite dataset")
    if validation_data is not None:
        if validation_steps is None:  # the task's metrics need every example: not on a part of them
            callbacks = [*validation_metrics(task, validation_data, validation_batch_size, callbacks),
                         *(callbacks or [])]
        validation_data = validation_dataset(task, validation_data, validation_batch_size)
        if task.distribute_strategy.num_replicas_in_sync > 1:
            # Keras' test loop fails on a batch the replicas cannot split evenly: validate here.
            callbacks = [ValidationOnOneDevice(validation_data, validation_freq, validation_steps),
                         *(callbacks or [])]
            validation_data = None
    if steps and steps_per_epoch and steps_per_epoch > steps:
        warnings.warn(f"steps_per_epoch={steps_per_epoch} is more than the {steps} batches of x: each epoch "
                      "reads the data again from its start (Keras would stop when it runs out)", stacklevel=3)
    steps_per_epoch = steps_per_epoch or steps
    if epochs == 0:
        return no_epochs(task, dataset, verbose=verbose, callbacks=callbacks)
    total_steps = max(1, int(round(epochs * steps_per_epoch)))
    if max_steps:
        total_steps = min(total_steps, max_steps)
    if task._recipe is not None:  # the schedule ends exactly at the last step
        finetuning_recipe.size_schedule(task, steps_to_run(total_steps, steps_per_epoch, initial_epoch))
    batches = dataset.repeat()
    steps_per_pass = steps_per_epoch
    if run_dir:
        steps_per_epoch = checkpoint_every or steps_per_epoch
        initial_epoch = keras_initial_epoch(initial_epoch, steps_per_pass, steps_per_epoch, total_steps)
        backup = task_backup_callback(
            task, run_dir, keep=keep_run_dir, total_steps=total_steps, steps_per_epoch=steps_per_epoch,
            batch_size=batch_size, seed=seed, data=(x, y, sample_weight))
        callbacks = list(callbacks or []) + [backup]
        batches = batches.skip(resumed_batches(backup, steps_per_epoch, total_steps, initial_epoch))
    elif keras_backup is not None:  # yours: resumed as run_dir's is
        batches = batches.skip(resumed_batches(keras_backup, steps_per_epoch, total_steps, initial_epoch))
    if task._recipe is not None:  # after the backup: its restore may move the step count
        callbacks = schedule_after_restore(callbacks, total_steps, steps_per_epoch, initial_epoch)
    whole_epochs, callbacks = keras_epochs(total_steps, steps_per_epoch, callbacks, steps_per_pass=steps_per_pass,
                                           verbose=verbose)
    # Repeat: fractional epochs and max_steps split into whole Keras epochs, the last one
    # cut at the last step. shuffle=False: the dataset shuffles itself.
    finetuning_recipe.build_optimizer(task)
    with executions_within_epochs(task, steps_per_epoch, total_steps):
        history = keras.Model.fit(task, without_autotune_thread(batches), epochs=whole_epochs, shuffle=False,
                                  verbose=verbose, steps_per_epoch=min(steps_per_epoch, total_steps),
                                  callbacks=callbacks, validation_data=without_autotune_thread(validation_data),
                                  class_weight=class_weight,
                                  initial_epoch=initial_epoch, validation_steps=validation_steps,
                                  validation_freq=validation_freq)
    if run_dir and not keep_run_dir:
        forget_run_start(task)
    return history


def packed_steps(dataset, *, counted):
    """The batches in one pass over a dataset of packed batches (None when it is endless, or
    unknown and not `counted`); an unknown cardinality (a `filter`, a generator) is counted by
    reading the dataset once when `counted` (without `steps_per_epoch`)."""
    steps = int(dataset.cardinality())
    if steps == tf.data.INFINITE_CARDINALITY or (steps < 0 and not counted):
        return None
    if steps < 0:
        steps = int(dataset.reduce(tf.constant(0, tf.int64), lambda n, *_: n + 1))
    if steps == 0:
        raise TaskInputError("x: an empty dataset")
    return steps


def no_epochs(task, dataset, *, verbose, callbacks):
    """`fit(epochs=0)`, as Keras: no step; the callbacks see the train begin and end; an empty
    `History`."""
    if task._recipe is not None and task.optimizer is None:  # Keras' fit needs a compiled model
        finetuning_recipe.size_schedule(task, 1)  # the next fit compiles the recipe for its steps
    return keras.Model.fit(task, without_autotune_thread(dataset.take(1)), epochs=0, shuffle=False,
                           verbose=verbose or 0, callbacks=callbacks)


@contextlib.contextmanager
def executions_within_epochs(task, steps_per_epoch, total_steps):
    """Runs Keras' loop with a `steps_per_execution` whose calls end where the fit's epochs end.

    Keras runs `steps_per_execution` steps per call, and stops a call early only where the
    data runs out. A fit reads its batches repeated (one sequence over its epochs), so a call
    that crosses the end of an epoch would train on the next epoch's batches, and past the
    fit's last step (the steps after it at the schedule's learning rate 0). Here the compiled
    value is used when it divides the steps per epoch (and those of a partial last epoch), else
    its largest divisor that does, with a warning; the compiled value is back afterwards.
    """
    compiled = int(getattr(task, "steps_per_execution", 1) or 1)
    per_epoch = min(steps_per_epoch, total_steps)
    ends = math.gcd(per_epoch, total_steps % per_epoch or per_epoch)
    usable = max(d for d in range(1, min(compiled, ends) + 1) if ends % d == 0)
    if usable == compiled:
        yield
        return
    warnings.warn(
        f"steps_per_execution={compiled}: this fit runs {usable} step(s) per call, because a call must "
        f"end with its epoch ({per_epoch} steps" + (f", the last one {total_steps % per_epoch}"
                                                    if total_steps % per_epoch else "")
        + "); choose a steps_per_execution that divides the steps per epoch",
        stacklevel=caller_stacklevel())
    task.steps_per_execution, task.train_function = usable, None
    try:
        yield
    finally:
        task.steps_per_execution, task.train_function = compiled, None


def schedule_after_restore(callbacks, total_steps, steps_per_epoch, initial_epoch):
    """`callbacks`, and last a `ScheduleAfterRestore` when one of them is Keras' `BackupAndRestore`."""
    callbacks = list(callbacks or [])
    if any(isinstance(c, keras.callbacks.BackupAndRestore) for c in callbacks):
        callbacks.append(ScheduleAfterRestore(total_steps, steps_per_epoch, initial_epoch))
    return callbacks


class ScheduleAfterRestore(keras.callbacks.Callback):
    """Ends the recipe's schedule at the fit's last step after Keras' `BackupAndRestore` restored.

    The schedule is sized before the fit from the optimizer's step count, but the callback
    restores the step count and the epoch to start from when the fit begins: in the process whose
    fit was interrupted, the count it had at the interruption would stretch the schedule. Called
    after the other callbacks, this sizes it again from what was restored (`run_dir`'s backup
    too: `steps_per_epoch` is then its Keras epoch, `checkpoint_every` steps).
    """

    def __init__(self, total_steps, steps_per_epoch, initial_epoch):
        super().__init__()
        self.total_steps, self.steps_per_epoch, self.initial_epoch = total_steps, steps_per_epoch, initial_epoch

    def on_train_begin(self, logs=None):
        from bert_keras.training.optimizer import WarmupLinearDecay

        start = getattr(self.model, "_initial_epoch", None) or self.initial_epoch  # as Keras' loop reads it
        end = int(self.model.optimizer.iterations.numpy()) + steps_to_run(self.total_steps, self.steps_per_epoch,
                                                                          start)
        schedule = getattr(self.model.optimizer, "_learning_rate", None)
        if isinstance(schedule, WarmupLinearDecay) and schedule.extendable and schedule.num_train_steps != end:
            schedule.extend(end, min(schedule.num_warmup_steps, end))


def class_weight_ids(task, class_weight, sample_weight=None):
    """`{class id: weight}` from a dict keyed by label names (or ids, compared as names)."""
    if sample_weight is not None:
        raise TaskInputError("class_weight / sample_weight: give one of them (Keras takes one); for both, "
                             "multiply each example's weight by its class's into sample_weight")
    if not isinstance(class_weight, dict) or not class_weight:
        raise TaskInputError("class_weight: expected a dict {label: weight}")
    classes = task._class_names()
    if not classes:
        what = ("a regression (num_classes=1) has a float target per example, not a class"
                if getattr(task, "is_regression", False)
                else f"a {type(task).__name__} has no class per example (tags per word or answer spans)")
        raise TaskInputError(f"class_weight: {what}; use sample_weight")
    ids = label_ids(list(class_weight), classes, "class_weight")
    weights = {i: 1.0 for i in range(len(classes))}  # as Keras: a class not named weighs 1
    for key, i in zip(class_weight, ids):
        weight = class_weight[key]
        if not isinstance(weight, (int, float, np.number)) or not np.isfinite(weight) or weight < 0:
            raise TaskInputError(f"class_weight[{key!r}]: {weight!r} is not a finite weight >= 0")
        weights[i] = float(weight)
    return weights


def keras_epochs(total_steps, steps_per_epoch, callbacks, *, steps_per_pass=None, verbose=0):
    """`(epochs, callbacks)` of a Keras fit of `total_steps` in epochs of `steps_per_epoch`: whole
    epochs, and a `StopAtStep` that ends the last one at `total_steps` when it is partial.

    `steps_per_pass`: the steps of one pass over the data, when a Keras epoch is not one (a run
    backed up every `checkpoint_every` steps); with a `verbose` fit, the progress then heads each
    Keras epoch with the pass it is in (`training.callbacks.PassProgress`), not Keras' count of
    its own epochs, unless `callbacks` holds a progress bar of the caller's.
    """
    from bert_keras.training.callbacks import PassProgress, StopAtStep

    per_epoch = min(steps_per_epoch, total_steps)
    epochs = max(1, -(-total_steps // per_epoch))
    callbacks = list(callbacks or [])
    if total_steps % per_epoch:
        callbacks.insert(0, StopAtStep(total_steps, steps_per_epoch=per_epoch))
    if (verbose != 0 and steps_per_pass and steps_per_pass != per_epoch and epochs > 1
            and not any(isinstance(callback, keras.callbacks.ProgbarLogger) for callback in callbacks)):
        callbacks.append(PassProgress(steps_per_pass=steps_per_pass, steps_per_epoch=per_epoch,
                                      total_steps=total_steps))
    return epochs, callbacks


def resumed_batches(backup, steps_per_epoch, total_steps, initial_epoch=0):
    """The batches a run resumed from `backup` (a `RunBackup`, or your `BackupAndRestore`) has
    trained on, to skip: those of the epochs from `initial_epoch` (where the fit's Keras loop
    starts, reading the batches from their first) to the backup's.

    The batches of a fit are one sequence over its epochs (`dataset.repeat()` of a shuffle
    seeded by `seed`, reshuffled each pass): the resumed run reads on where its backup left
    off, so it sees the batches the uninterrupted run sees, in the same order. Skipping reads
    (tokenizes, batches) those batches without training on them: a pass over the data already
    trained on, input work only (`bert_keras.training.backup.resumed_step` says why not a
    checkpointed iterator). An unseeded shuffle (`seed=None`) is another order in each process.
    """
    trained = resumed_backup_epoch(backup) - int(initial_epoch or 0)
    return max(0, trained) * min(steps_per_epoch, total_steps)


def resumed_own_batches(x, backup, steps_per_epoch, initial_epoch):
    """`x` for Keras' `fit` on your own batches (`Pretrainer.fit(x)`) with a backup callback
    `backup` (a `RunBackup`): an infinite `tf.data.Dataset` (read on across epochs of
    `steps_per_epoch`) with the batches the backup has trained on skipped; a resumed fit read it
    from its start again, the first epochs' batches.

    Other data is left as Keras reads it: a finite dataset (or arrays) one pass an epoch, each
    epoch from its start, which a resume gives back when each pass reads the same order (no
    shuffle, or `shuffle(..., reshuffle_each_iteration=False)`; a reshuffling pass is drawn
    afresh in a new process); a generator as it gives its batches.

    >>> import tensorflow as tf
    >>> resumed_own_batches([1, 2], None, None, 0)  # not a dataset: as Keras reads it
    [1, 2]
    """
    if (not isinstance(x, tf.data.Dataset) or steps_per_epoch is None
            or int(x.cardinality()) != tf.data.INFINITE_CARDINALITY):
        return x
    return x.skip(resumed_batches(backup, steps_per_epoch, steps_per_epoch, initial_epoch))


def keras_initial_epoch(initial_epoch, steps_per_pass, steps_per_epoch, total_steps):
    """`initial_epoch` (in passes over the data, as `fit` takes it) in the fit's Keras epochs of
    `steps_per_epoch` steps (`checkpoint_every`'s backup intervals): Keras starts there.

    >>> keras_initial_epoch(1, steps_per_pass=4, steps_per_epoch=2, total_steps=12)  # step 4
    2

    Raises:
        TaskInputError: the pass starts inside a backup interval (Keras epochs are all as long).
    """
    if not initial_epoch or steps_per_pass == steps_per_epoch:
        return initial_epoch
    start = int(initial_epoch) * min(steps_per_pass, total_steps)
    interval = min(steps_per_epoch, total_steps)
    if start % interval:
        raise TaskInputError(
            f"initial_epoch={initial_epoch}: the fit would start at step {start} ({initial_epoch} pass(es) of "
            f"{steps_per_pass} steps), inside a backup interval of checkpoint_every={steps_per_epoch} steps; "
            f"choose a checkpoint_every that divides {start}")
    return start // interval


def steps_to_run(total_steps, steps_per_epoch, initial_epoch):
    """The steps a fit runs: Keras starts at `initial_epoch` (a resumed run), not at epoch 0."""
    skipped = int(initial_epoch or 0) * min(steps_per_epoch, total_steps)
    return max(1, total_steps - skipped)


def split_off_validation(x, y, sample_weight, validation_split):
    """Keras' `validation_split`: the last fraction of the rows, taken before any shuffling."""
    if isinstance(validation_split, bool) or not 0 < validation_split < 1:
        raise TaskInputError(f"validation_split={validation_split!r}: expected a fraction in (0, 1)")
    count = num_rows(x)
    split_at = int(math.ceil(count * (1.0 - validation_split)))
    if not 0 < split_at < count:
        raise TaskInputError(f"validation_split={validation_split}: {count} examples leave none for "
                             "training or none for validation")
    head = (take_rows(x, 0, split_at), take_rows(y, 0, split_at), take_rows(sample_weight, 0, split_at))
    tail = (take_rows(x, split_at, count), take_rows(y, split_at, count))
    if sample_weight is not None:
        tail += (take_rows(sample_weight, split_at, count),)
    return head + (tail,)
