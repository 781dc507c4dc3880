"""BERT's next-sentence-prediction head: is segment B the continuation of A?"""

import keras
from keras import ops

from bert_keras.layers.initialization import truncated_normal


@keras.saving.register_keras_serializable(package="bert_keras")
class NextSentenceHead(keras.layers.Layer):
    """Two logits from the pooled `[CLS]` vector: 0 = IsNext, 1 = random sentence.

    google-research `run_pretraining.get_next_sentence_output`: one affine
    map on `pooled_output`, no hidden layer (the pooler's `tanh` dense already
    is one). The kernel is `[H, 2]` (Keras `[in, out]`); checkpoints store
    its transpose as `cls/seq_relationship/output_weights` `[2, H]`.

    It always computes in float32: the matmul is `[B, H] x [H, 2]`, nothing to
    save in half precision, and the logits feed a float32 cross-entropy.

    Example:

    >>> import numpy as np
    >>> head = NextSentenceHead()
    >>> tuple(head(np.random.rand(4, 16).astype("float32")).shape)
    (4, 2)

    Args:
        initializer_range: float. Stddev of the truncated-normal kernel
            initializer (the bias starts at zero).
        **kwargs: `keras.layers.Layer` arguments (`name`, ...). A `dtype`
            is ignored: the head is float32.
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        kwargs.pop("dtype", None)
        super().__init__(dtype="float32", **kwargs)
        self.initializer_range = initializer_range

    def build(self, pooled_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(pooled_shape[-1], 2),
            initializer=truncated_normal(self.initializer_range),
        )
        self.bias = self.add_weight(name="bias", shape=(2,), initializer="zeros")
        self.built = True

    def call(self, pooled_output):
        return ops.matmul(pooled_output, self.kernel) + self.bias

    def compute_output_shape(self, pooled_shape):
        return tuple(pooled_shape[:-1]) + (2,)

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config
