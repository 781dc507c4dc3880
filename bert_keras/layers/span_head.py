"""The BERT span head: start and end logits over the sequence for extractive QA."""

import keras
from keras import ops

from bert_keras.layers.initialization import truncated_normal

# Added to the logits of padded positions. Far below any real logit, yet finite,
# so a softmax over a row stays NaN-free; the head computes in float32, where
# -1e9 is representable (float16's max is 65504, hence float32 only).
PADDING_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="bert_keras")
class SpanHead(keras.layers.Layer):
    """Start and end logits of an answer span from the last encoder layer.

    The BERT paper (section 4.2) learns a start vector S and an end vector E;
    the score of token i as the start is `S . T_i`, as the end `E . T_i`.
    Both vectors are the two columns of one `[H, 2]` kernel (plus a bias, as
    google-research `run_squad.py`'s `cls/squad/output_weights`), so this is a
    `Dense(2)` on `sequence_output` split in two.

    Padded positions get `PADDING_LOGIT` so that neither a softmax nor an
    argmax can pick them. `[CLS]` (position 0) is a real token and keeps its
    logit: SQuAD v2 scores "no answer" there.

    It computes in float32 under any dtype policy: the logits feed a float32
    softmax over the sequence and the mask value needs float32 range.

    Example:

    >>> import numpy as np
    >>> head = SpanHead()
    >>> start, end = head(np.random.rand(2, 5, 8).astype("float32"),
    ...                   np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]))
    >>> tuple(start.shape), float(start[0, 4]) < -1e8
    ((2, 5), True)

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

    def build(self, sequence_output_shape, padding_mask_shape=None):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(sequence_output_shape[-1], 2),
            initializer=truncated_normal(self.initializer_range),
        )
        self.bias = self.add_weight(name="bias", shape=(2,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, padding_mask):
        logits = ops.matmul(sequence_output, self.kernel) + self.bias  # [B, S, 2]
        is_real = ops.expand_dims(ops.cast(padding_mask, "bool"), -1)
        logits = ops.where(is_real, logits, PADDING_LOGIT)
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, sequence_output_shape, padding_mask_shape=None):
        shape = tuple(sequence_output_shape[:-1])
        return shape, shape

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config
