"""Validation of a task's `fit`, and Keras' evaluation of it: data in any form of `fit`'s packed for
Keras' test loop (`validation_dataset`), the task's own metrics added to the logs as `val_<name>`
(`TaskValidationMetrics`), and Keras' validation outside a distribution strategy for several
replicas (`ValidationOnOneDevice`).
"""

import warnings

import keras
import numpy as np
import tensorflow as tf

from bert_keras.tasks.dataset_inputs import (dataset_of_batches, element_parts, is_batch_source,
                                             is_tokenized_dataset, unbatched)
from bert_keras.tasks.inputs import TaskInputError, is_tokenized
from bert_keras.tasks.task_batches import packed_batches


def validation_dataset(task, validation_data, batch_size, *, argument="validation_data"):
    """`validation_data` in any form of `fit`'s, as encoded batches for Keras' evaluation; an
    error in it names `argument` first (`fit`'s `x` / `y` are not the ones at fault). `evaluate`
    passes its own `x` / `y` (`argument=None`): its errors name them as they are."""
    try:
        return _validation_batches(task, validation_data, batch_size)
    except TaskInputError as error:
        if argument is None or str(error).startswith(argument):
            raise
        raise TaskInputError(f"{argument}: {error}") from None

def _validation_batches(task, validation_data, batch_size):
    if is_batch_source(validation_data):
        validation_data, _ = dataset_of_batches(validation_data, name="validation_data")
    if isinstance(validation_data, tf.data.Dataset):
        if is_tokenized_dataset(validation_data):
            return packed_batches(task, validation_data, batch_size)
        dataset, _ = task._train_dataset(validation_data, None, sample_weight=None,
                                         batch_size=batch_size, shuffle=False, seed=None)
        return dataset
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
        raise TaskInputError("validation_data: expected (x, y), (x, y, sample_weight) or a "
                             "tf.data.Dataset")
    vx, vy, *weights = validation_data
    dataset, _ = task._train_dataset(vx, vy, sample_weight=weights[0] if weights else None,
                                     batch_size=batch_size, shuffle=False, seed=None)
    return dataset


def validation_metrics(task, validation_data, batch_size, callbacks=None):
    """`[callback]` that adds the task's metrics on raw `validation_data` to the logs, or `[]`
    (tokenized validation data, an endless dataset or `PyDataset`, or a generator that cannot be
    read twice).
    `callbacks`: the user's, whose mode "auto" monitors of those metrics it tells to maximize."""
    regression = getattr(task, "is_regression", False)
    if isinstance(validation_data, keras.utils.PyDataset) and validation_data.num_batches is not None:
        # read by index: it can be read again for the metrics (a generator cannot)
        validation_data, _ = dataset_of_batches(validation_data, name="validation_data")
    if isinstance(validation_data, tf.data.Dataset):
        if is_tokenized_dataset(validation_data) \
                or validation_data.cardinality() == tf.data.INFINITE_CARDINALITY:
            return []
        if regression:
            count = _examples_up_to_two(task, validation_data)
            if count is not None and count < 2:
                _warn_too_few_for_correlations(count)
                return []
        return [TaskValidationMetrics(task, validation_data, None, batch_size, callbacks)]
    if isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3) \
            and not is_tokenized(validation_data[0]):
        targets = validation_data[1]
        if regression and hasattr(targets, "__len__") and len(targets) < 2:
            _warn_too_few_for_correlations(len(targets))
            return []
        return [TaskValidationMetrics(task, validation_data[0], targets, batch_size, callbacks)]
    return []


def _warn_too_few_for_correlations(count):
    # A correlation of one point has no value: score() refuses it, which failed fit after its first
    # epoch. Keras' val_loss stays.
    warnings.warn(f"validation data of {count} example: a regression model's pearson and spearman need 2 "
                  "or more, so only val_loss is logged", stacklevel=4)


def _examples_up_to_two(task, dataset):
    """The examples of `dataset` (batched or not), counted up to 2: it reads at most its first two
    examples. None when the task cannot read its elements (`validation_dataset` then says why)."""
    layout = task.dataset_layout
    try:
        parts = element_parts(dataset.element_spec, x_is_tuple=layout.x_is_tuple)
        rows = unbatched(dataset, parts, example_rank=layout.example_rank, is_batched=layout.is_batched)
        return sum(1 for _ in rows.take(2))
    except (TaskInputError, tf.errors.OpError):
        return None


class ValidationOnOneDevice(keras.callbacks.Callback):
    """Keras' validation (`val_loss` and the compiled metrics, its `test_step` batch by batch)
    outside the distribution strategy, for `fit` under several replicas.

    Keras' own test loop under `MirroredStrategy` fails ("Inputs to operation AddN ... must have
    the same size and shape") on a batch the replicas cannot split evenly, as the last batch of
    most validation sets; the same computation on one device takes any batch.
    """

    def __init__(self, batches, validation_freq=1, steps=None):
        super().__init__()
        self._batches = batches if steps is None else batches.take(steps)  # validation_steps, as Keras
        self._freq = validation_freq
        self._step = None

    def _validates(self, epoch):
        if isinstance(self._freq, int):
            return (epoch + 1) % self._freq == 0
        return epoch + 1 in self._freq

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or not self._validates(epoch):
            return
        for name, value in self.results(self.model).items():
            logs[f"val_{name}"] = value

    def results(self, model, callbacks=None):
        """`{loss, metric: value}` of `model` on the batches, as `model.evaluate(..., return_dict=True)`;
        `callbacks` (a `keras.callbacks.CallbackList`) get the test hooks Keras' `evaluate` calls."""
        if self._step is None:
            self._step = tf.function(model.test_step, reduce_retracing=True)
        model.reset_metrics()
        if callbacks is not None:
            callbacks.on_test_begin()
        for index, batch in enumerate(self._batches):
            if callbacks is not None:
                callbacks.on_test_batch_begin(index)
            self._step(batch)
            if callbacks is not None:
                callbacks.on_test_batch_end(index, {k: float(v) for k, v in model.get_metrics_result().items()})
        results = {name: float(value) for name, value in model.get_metrics_result().items()}
        model.reset_metrics()
        if callbacks is not None:
            callbacks.on_test_end(dict(results))
        return results


class TaskValidationMetrics(keras.callbacks.Callback):
    """Adds the task's own metrics on the validation data (`score`'s: `val_f1` or `val_macro_f1`,
    `val_matthews_corrcoef`, `val_exact_match`, `val_pearson`, ...) to the logs of every epoch
    that Keras validates.

    `fit` puts it before the user's callbacks, so `EarlyStopping(monitor="val_f1", mode="max")`,
    `ModelCheckpoint(monitor=...)`, `CSVLogger` and the `History` see them. Where a key is
    both Keras' and the task's (`val_accuracy`), the task's value is logged: per text, as
    `score` and `predict` count (Keras' counts windows when long texts train in windows).
    Keras' `val_loss` is kept. It costs one prediction pass over the validation data per
    validated epoch.

    Keras cannot tell which way these metrics improve: a monitor of one in mode "auto"
    (`EarlyStopping(monitor="val_f1")`, `ModelCheckpoint(..., save_best_only=True)`) stopped
    the fit after its first epoch with a ValueError. Every one is better higher (not the
    SQuAD v2 counts, `*total`, nor its thresholds, `*_thresh`), so the user's `callbacks` that
    monitor one in mode "auto" are told to maximize it, as Keras does for its own accuracy.
    """

    def __init__(self, task, x, y, batch_size, callbacks=None):
        super().__init__()
        self._task, self._x, self._y, self._batch_size = task, x, y, batch_size
        self._monitors = [callback for callback in callbacks or ()
                          if getattr(callback, "mode", None) == "auto" and hasattr(callback, "monitor_op")]
        self._held = []

    def _maximize_monitors_of(self, names):
        for callback in self._held:  # confirmed, or left to Keras (which may refuse it)
            if callback.monitor not in names or callback.monitor.endswith(("total", "_thresh")):
                callback.monitor_op = None
        self._held = []
        for callback in self._monitors:
            if callback.monitor_op is None and callback.monitor in names \
                    and not callback.monitor.endswith(("total", "_thresh")):
                callback.monitor_op = keras.ops.greater

    def _hold_monitors_until_validated(self):
        """Before the first validated epoch (`validation_freq=2`), a mode "auto" monitor of a
        validation metric other than `val_loss` is held as maximized, not yet resolved by Keras
        (which raised on `val_f1` at the first, unvalidated epoch); the first validated epoch
        confirms it (a task metric) or leaves it to Keras (`_maximize_monitors_of`)."""
        for callback in self._monitors:
            if callback.monitor_op is None and callback.monitor.startswith("val_") \
                    and callback.monitor != "val_loss":
                callback.monitor_op = keras.ops.greater
                self._held.append(callback)

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or "val_loss" not in logs:  # Keras did not validate this epoch (validation_freq)
            self._hold_monitors_until_validated()
            return
        metrics = self._task.score(self._x, self._y, batch_size=self._batch_size, verbose=0)
        for name, value in metrics.items():
            if isinstance(value, (int, float, np.number)) and not isinstance(value, bool) \
                    and not name.startswith("num_"):  # counts of examples are not metrics
                if name != "loss":
                    logs[f"val_{name}"] = float(value)
        self._maximize_monitors_of({f"val_{name}" for name in metrics if name != "loss"})
