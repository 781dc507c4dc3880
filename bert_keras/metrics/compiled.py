"""F1 and Matthews correlation as Keras metrics, for `compile(metrics=...)`, `evaluate` and the logs.

`bert_keras.metrics.classification` computes them from whole prediction lists (what `score`
reports per text); these accumulate a confusion matrix batch by batch, so Keras' loops can
report them: `evaluate` returns them after the loss, `fit` logs them (`f1` / `val_f1`) for
callbacks. Labels are class ids (`[B]` or `[B, 1]`) or one-hot rows `[B, C]`, predictions are
logits or probabilities `[B, C]` (the argmax is the predicted class); a negative label (-100:
padding) is not counted, one past the classes is refused (under XLA, which drops the check, the
metric reads NaN). The values equal sklearn's `f1_score` (binary: class 1 positive; macro: the
mean over the classes seen in either labels or predictions) and `matthews_corrcoef` on the same
labels and argmaxes; 0.0 where sklearn's is undefined.

A classifier task maps the names `"f1"` (binary for two classes, else macro), `"macro_f1"` and
`"matthews_corrcoef"` (or `"mcc"`) in `compile(metrics=[...])` to these, sized to its classes
and logged under the name given.

Example:

>>> import numpy as np
>>> metric = MatthewsCorrelation(num_classes=2)
>>> metric.update_state(np.array([1, 0, 1, 1]), np.array([[0., 1.], [1., 0.], [1., 0.], [0., 1.]]))
>>> round(float(metric.result()), 4)
0.5774
>>> f1 = F1Score(num_classes=2)
>>> f1.update_state(np.array([1, 0, 1, 1]), np.array([[0., 1.], [1., 0.], [1., 0.], [0., 1.]]))
>>> round(float(f1.result()), 4)
0.8
"""

import keras
import tensorflow as tf
from keras import ops


@keras.saving.register_keras_serializable(package="bert_keras")
class ConfusionMatrixMetric(keras.metrics.Metric):
    """A `[num_classes, num_classes]` count of (label, predicted class) pairs, weighted."""

    def __init__(self, num_classes, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        # Higher is better, as Keras' own F1Score says: EarlyStopping / ModelCheckpoint(monitor="val_f1")
        # in mode "auto" read the direction from it (without it they stopped with a ValueError).
        self._direction = "up"
        if int(num_classes) < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        self.num_classes = int(num_classes)
        self.counts = self.add_variable(shape=(self.num_classes, self.num_classes), initializer="zeros",
                                        dtype="float64", name="counts")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.convert_to_tensor(y_true)
        if len(y_true.shape) >= 2 and y_true.shape[-1] == self.num_classes:
            # One-hot rows (Keras' categorical labels): flattened as ids they would be counted as
            # num_classes labels each, a shape error or, in a batch of one, wrong counts.
            y_true = ops.argmax(y_true, axis=-1)
        labels = ops.reshape(ops.cast(y_true, "int32"), (-1,))
        # A label past the classes indexed past the counts: a raw "segment_ids[3] = 9 is out of range"
        # on a CPU, silently not counted on a GPU: refused by name. Negative labels (-100: padding) are not counted.
        # The check is a control dependency of the counts: in a graph nothing else orders it
        # before the segment sum, whose own range error would then come first.
        in_range = tf.debugging.assert_less(
            labels, self.num_classes, message=f"{type(self).__name__}(num_classes={self.num_classes}): a label "
            f"is past the classes (ids 0..{self.num_classes - 1}); give class ids, or one-hot rows of "
            f"{self.num_classes}, or build the metric with the model's number of classes")
        predicted = ops.reshape(ops.argmax(y_pred, axis=-1), (-1,))
        weights = ops.ones_like(labels, dtype="float64") if sample_weight is None \
            else ops.reshape(ops.cast(sample_weight, "float64"), (-1,))
        with tf.control_dependencies([in_range] if in_range is not None else []):
            labels = tf.identity(labels)
        # XLA (jit_compile, TPUs) drops the check and the segment sum drops an index past its end:
        # the metric read as if the label were not there (F1 1.0 for a wrong batch). There such a
        # label is counted in class 0 with the weight NaN, and the metric reads NaN instead.
        past = labels >= self.num_classes
        weights = ops.where(past, float("nan"), weights)
        labels = ops.where(past, 0, labels)
        pairs = labels * self.num_classes + ops.cast(predicted, "int32")
        counts = ops.segment_sum(weights, pairs, num_segments=self.num_classes * self.num_classes)
        self.counts.assign_add(ops.reshape(counts, (self.num_classes, self.num_classes)))

    def reset_state(self):
        self.counts.assign(ops.zeros_like(self.counts))

    def _nan_if_a_label_was_past_the_classes(self, value):
        """`value`, or NaN once a NaN count (a label past the classes under XLA) is in the counts."""
        return ops.where(ops.any(ops.isnan(self.counts)), float("nan"), value)

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes}


def _ratio(numerator, denominator):
    """numerator / denominator, 0 where the denominator is 0 (sklearn's zero_division=0)."""
    safe = ops.where(denominator > 0, denominator, ops.ones_like(denominator))
    return ops.where(denominator > 0, numerator / safe, ops.zeros_like(numerator))


@keras.saving.register_keras_serializable(package="bert_keras")
class F1Score(ConfusionMatrixMetric):
    """F1 of class 1 for two classes (`average="binary"`, named `f1`), else the macro mean over
    the classes seen (`average="macro"`, named `macro_f1`), as `score` names them."""

    def __init__(self, num_classes, average=None, name=None, dtype=None):
        average = average or ("binary" if int(num_classes) == 2 else "macro")
        if average not in ("binary", "macro"):
            raise ValueError(f"average must be 'binary' or 'macro', got {average!r}")
        if average == "binary" and int(num_classes) != 2:
            raise ValueError(f"average='binary' needs 2 classes, got {num_classes}; use average='macro'")
        super().__init__(num_classes, name=name or ("f1" if average == "binary" else "macro_f1"), dtype=dtype)
        self.average = average

    def result(self):
        true_positives = ops.diagonal(self.counts)
        per_class = _ratio(2 * true_positives, ops.sum(self.counts, axis=0) + ops.sum(self.counts, axis=1))
        if self.average == "binary":
            return ops.cast(self._nan_if_a_label_was_past_the_classes(per_class[1]), "float32")
        seen = ops.cast(ops.sum(self.counts, axis=0) + ops.sum(self.counts, axis=1) > 0, "float64")
        macro = _ratio(ops.sum(per_class * seen), ops.sum(seen))
        return ops.cast(self._nan_if_a_label_was_past_the_classes(macro), "float32")

    def get_config(self):
        return {**super().get_config(), "average": self.average}


@keras.saving.register_keras_serializable(package="bert_keras")
class MatthewsCorrelation(ConfusionMatrixMetric):
    """Matthews correlation coefficient over any number of classes (Gorodkin's R_K, sklearn's)."""

    def __init__(self, num_classes, name="matthews_corrcoef", dtype=None):
        super().__init__(num_classes, name=name, dtype=dtype)

    def result(self):
        total = ops.sum(self.counts)
        correct = ops.trace(self.counts)
        true_counts = ops.sum(self.counts, axis=1)
        predicted_counts = ops.sum(self.counts, axis=0)
        covariance = correct * total - ops.sum(true_counts * predicted_counts)
        spread = (total * total - ops.sum(predicted_counts * predicted_counts)) \
            * (total * total - ops.sum(true_counts * true_counts))
        return ops.cast(self._nan_if_a_label_was_past_the_classes(_ratio(covariance, ops.sqrt(spread))), "float32")


def named_metric(name, num_classes):
    """The metric a classifier's `compile(metrics=[name])` means (logged under `name`), or None
    for Keras' own names. `"f1"` is binary F1 for two classes, the macro mean for more."""
    if name in ("f1", "macro_f1"):
        return F1Score(num_classes, average="macro" if name == "macro_f1" or num_classes > 2 else "binary",
                       name=name)
    if name in ("matthews_corrcoef", "mcc"):
        return MatthewsCorrelation(num_classes, name=name)
    return None
