"""A compile of your own on token labels: the loss and accuracy read the labelled positions only.

`TokenClassifier` labels a word's first piece with its tag and every other position (later
pieces, `[CLS]`, `[SEP]`, padding) with `IGNORE_INDEX` (-100). Keras' own
`SparseCategoricalCrossentropy` fails on -100 inside the graph, and its accuracy counts those
positions as errors. `on_labelled_positions` turns the usual compile arguments into their
labelled-positions forms: the sparse cross-entropy into `MaskedSparseCategoricalCrossentropy`
(same `from_logits`), `"accuracy"` into `LabelledTokenAccuracy`; anything else is kept.

Example:
    >>> loss, metrics = on_labelled_positions(
    ...     keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"])
    >>> type(loss).__name__, [m.name for m in metrics]
    ('MaskedSparseCategoricalCrossentropy', ['accuracy'])
"""

import keras

from bert_keras.losses.masked_sparse_categorical_crossentropy import MaskedSparseCategoricalCrossentropy
from bert_keras.losses.masked_sparse_categorical_crossentropy import labelled_positions

_CROSS_ENTROPY_NAMES = ("sparse_categorical_crossentropy",)
_ACCURACY_NAMES = ("accuracy", "acc", "sparse_categorical_accuracy")


@keras.saving.register_keras_serializable(package="bert_keras")
class LabelledTokenAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """Token accuracy over the positions whose label is not -100 (`IGNORE_INDEX`: a word's first piece)."""

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, weights, _ = labelled_positions(y_true, sample_weight)
        return super().update_state(y_true, y_pred, sample_weight=weights)


def on_labelled_positions(loss, metrics):
    """`(loss, metrics)` of a compile, with the sparse cross-entropy and accuracy made to skip -100."""
    if isinstance(loss, str) and loss in _CROSS_ENTROPY_NAMES:
        loss = MaskedSparseCategoricalCrossentropy(from_logits=True)  # the token heads output logits
    elif isinstance(loss, keras.losses.SparseCategoricalCrossentropy) and loss.ignore_class is None:
        loss = MaskedSparseCategoricalCrossentropy(from_logits=loss.from_logits, reduction=loss.reduction)
    if isinstance(metrics, (list, tuple)):
        metrics = [_labelled_metric(m) for m in metrics]
    return loss, metrics


def _labelled_metric(metric):
    if isinstance(metric, str) and metric in _ACCURACY_NAMES:
        return LabelledTokenAccuracy(name=metric)
    if type(metric) is keras.metrics.SparseCategoricalAccuracy:
        return LabelledTokenAccuracy(name=metric.name)
    return metric
