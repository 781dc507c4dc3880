"""Mean squared error of a regression head's `[B]` scores, one squared error per example."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_keras")
class ScoreMeanSquaredError(keras.losses.MeanSquaredError):
    """Keras' `MeanSquaredError` on scores of shape `[B]` (a regression head's output).

    Keras' `mean_squared_error` averages over the last axis, which for `[B]` scores is the
    batch itself: the loss comes out as one number per batch, not one per example. A
    `sample_weight` then scales the batch mean by the mean weight instead of weighting each
    example (weights `[1, 0]` gave half the mean of both errors, not the first one's), and
    under a `MirroredStrategy` the reported loss is multiplied by the number of replicas.
    Here `[B]` scores are read as `[B, 1]`: `[B]` squared errors, reduced as Keras reduces
    any per-example loss. Other shapes are Keras' own.

    Example:

    >>> import numpy as np
    >>> loss = ScoreMeanSquaredError()
    >>> float(loss(np.array([1.0, 0.0]), np.array([3.0, 0.0]), sample_weight=np.array([1.0, 0.0])))
    2.0
    """

    def call(self, y_true, y_pred):
        if len(y_pred.shape) == 1:
            y_pred = ops.expand_dims(y_pred, -1)
            if len(y_true.shape) == 1:
                y_true = ops.expand_dims(y_true, -1)
        return super().call(y_true, y_pred)
