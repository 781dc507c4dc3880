"""Sparse categorical cross-entropy that skips positions labelled `ignore_index` (-100)."""

import keras
from keras import ops

IGNORE_INDEX = -100


@keras.saving.register_keras_serializable(package="bert_keras")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Per-token cross-entropy from logits, averaged over the labelled tokens only.

    Token classification labels only the first word piece of each word;
    later pieces, `[CLS]`, `[SEP]` and padding carry `ignore_index` (-100, the
    Hugging Face / PyTorch convention). Those positions contribute nothing,
    and with the default `"sum_over_batch_size"` reduction the sum is divided
    by the number of labelled tokens, not by `batch * seq`, as
    `torch.nn.CrossEntropyLoss(ignore_index=-100)`: the loss of a sentence
    does not shrink because the batch holds more padding.

    `sample_weight` (`[B]` per example or `[B, S]` per token) multiplies the
    per-token losses as in any Keras loss. `reduction="none"` returns the
    `[B, S]` losses with 0 at ignored positions; `"sum"` their sum.

    Example:

    >>> import numpy as np
    >>> loss = MaskedSparseCategoricalCrossentropy()
    >>> logits = np.log(np.array([[[0.5, 0.5], [0.9, 0.1], [0.1, 0.9]]], "float32"))
    >>> round(float(loss(np.array([[0, -100, 1]]), logits)), 4)  # mean of -log .5, -log .9
    0.3993
    >>> round(float(loss(np.array([[0, 0, 1]]), logits)), 4)
    0.3013

    Args:
        ignore_index: int. Label value of positions to skip.
        from_logits: bool. `y_pred` are logits (the token heads' outputs), else probabilities.
        reduction: a Keras loss reduction; see above.
        name: str. Loss name.
    """

    def __init__(
        self,
        ignore_index=IGNORE_INDEX,
        reduction="sum_over_batch_size",
        name="masked_sparse_categorical_crossentropy",
        from_logits=True,
        **kwargs,
    ):
        super().__init__(reduction=reduction, name=name, **kwargs)
        self.ignore_index = int(ignore_index)
        self.from_logits = bool(from_logits)

    def __call__(self, y_true, y_pred, sample_weight=None):
        y_true, weights, labelled = labelled_positions(y_true, sample_weight, self.ignore_index)
        if self.reduction == "sum_over_batch_size":
            # Keras divides the weighted sum by the element count (batch * seq);
            # scale the weights by count / labelled so that it divides by the
            # labelled tokens instead (how Keras itself reduces masked losses).
            # Under a distribution strategy Keras divides each replica's share by its own
            # element count and then by the replica count: the labelled tokens are counted over
            # all replicas here, so that the shares add up to the global batch's token mean (a
            # replica's tokens do not weigh more because its half of the batch has fewer).
            count = ops.cast(ops.size(weights), "float32")
            replicas, labelled_tokens = _over_replicas(ops.sum(ops.cast(labelled, "float32")))
            weights = weights * ops.divide_no_nan(count * replicas, labelled_tokens)
        return super().__call__(y_true, y_pred, sample_weight=weights)

    @property
    def reduces_over_replicas(self):
        """Whether each replica's value is its share of the global batch's mean already: the labelled
        tokens are counted over all replicas (`__call__`), in the mean reduction only
        (`TextTask.compute_loss` then corrects only its reported value)."""
        return self.reduction == "sum_over_batch_size"

    def call(self, y_true, y_pred):
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=self.from_logits)

    def get_config(self):
        config = super().get_config()
        config.update(ignore_index=self.ignore_index, from_logits=self.from_logits)
        return config


def _over_replicas(value):
    """`(replica count, value summed over the replicas)` of the current `tf.distribute` step
    (`(1, value)` outside one, and in a cross-replica context)."""
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if keras.backend.backend() != "tensorflow" or context is None or context.num_replicas_in_sync == 1:
        return 1.0, value
    return float(context.num_replicas_in_sync), context.all_reduce("SUM", value)


def labelled_positions(y_true, sample_weight=None, ignore_index=IGNORE_INDEX):
    """`(y_true, weights, labelled)` of token labels for a loss or metric that skips `ignore_index`.

    `labelled`: bool, the positions with a label; `weights`: float32, `labelled` times
    `sample_weight` (`[B]` per example or `[B, S]` per token); `y_true` with class 0 standing in
    for `ignore_index` (any valid class id would do: its weight is 0).
    """
    y_true = ops.convert_to_tensor(y_true)
    labelled = ops.not_equal(y_true, ignore_index)
    weights = ops.cast(labelled, "float32")
    if sample_weight is not None:
        sample_weight = ops.cast(sample_weight, "float32")
        if len(sample_weight.shape) < len(weights.shape):
            sample_weight = ops.expand_dims(sample_weight, -1)  # [B] per example -> [B, 1]
        weights = weights * sample_weight
    return ops.where(labelled, y_true, ops.zeros_like(y_true)), weights, labelled
