"""Folds the choices of a multiple-choice batch into the batch axis."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_keras")
class FlattenChoices(keras.layers.Layer):
    """`[batch, choices, seq]` -> `[batch * choices, seq]`, so one encoder pass scores every choice.

    A layer rather than a bare `ops.reshape` in the functional graph: the
    sequence length is unknown (`None`) when the graph is built, and a reshape
    traced there would bake that `None` in. Here the length is read from the
    tensor at call time.

    Example:

    >>> import numpy as np
    >>> tuple(FlattenChoices()(np.zeros((2, 4, 7), "int32")).shape)
    (8, 7)
    """

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        batch, choices, seq = input_shape
        merged = None if batch is None or choices is None else batch * choices
        return (merged, seq)
