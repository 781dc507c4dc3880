"""BERT's dropout: Keras' `Dropout`, with a mask that costs half the random numbers.

The function is Keras' inverted dropout: in training, each element is zeroed
with probability `rate` and the others are scaled by `1 / (1 - rate)`, so the
expectation is unchanged; at inference it is the identity. What changes is
how the mask is drawn on the TensorFlow backend.

Keras draws one float32 uniform per element (`stateless_dropout`), and on a
CPU the Philox generator behind it is the slowest op of a training step by
far: ~10x the time of a softmax over the same tensor. A BERT step draws one
per attention probability (`[batch, heads, seq, seq]`) and per hidden value,
so at sequence length 384 the masks cost a large share of the step. Here
each 32-bit Philox output gives two 16-bit draws (one reinterpretation of
the buffer, no extra pass), and an element is dropped when its draw is below
`round(rate * 2**16)`: half the random numbers, and a compare on 16-bit
integers instead of a float conversion.

The drop probability is therefore `rate` rounded to a multiple of 2**-16
(0.1 -> 0.1000061), where Keras' float draws round it to 2**-23 or so; the
survivors are scaled by the inverse of the kept fraction actually used, so
the output's expectation is the input exactly. Rates that 16 bits cannot
hold within 0.1% (below ~0.008) and `noise_shape` run Keras' own `call`, as
do other backends. The masks differ from Keras' for the same seed (both are
deterministic given the layer's seed generator).

Example:

>>> import numpy as np, tensorflow as tf
>>> drop = Dropout(0.1, seed=0)
>>> x = tf.ones([1000, 100])
>>> y = drop(x, training=True)
>>> kept = float(tf.reduce_mean(tf.cast(y != 0, tf.float32)))
>>> abs(kept - 0.9) < 0.005
True
>>> bool(tf.reduce_all(drop(x, training=False) == x))
True
"""

import keras

#: Resolution of one draw: 16 bits.
_DRAW_LEVELS = 1 << 16


@keras.saving.register_keras_serializable(package="bert_keras")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` whose training mask uses 16-bit draws.

    Same arguments (`rate`, `noise_shape`, `seed`), config and seed generator
    as Keras' layer. See the module docstring for what differs.
    """

    def call(self, inputs, training=False):
        if not (training and self.rate > 0) or not self._sixteen_bit_draws_apply():
            return super().call(inputs, training=training)
        import tensorflow as tf

        seed = self.seed_generator.next()
        if seed.dtype != tf.int32:  # as Keras' TensorFlow backend casts it
            seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        return dropout_with_16_bit_draws(inputs, _drop_threshold(self.rate), seed)

    def _sixteen_bit_draws_apply(self):
        threshold = _drop_threshold(self.rate)
        return (keras.backend.backend() == "tensorflow" and self.noise_shape is None
                and 0 < threshold < _DRAW_LEVELS
                and abs(threshold / _DRAW_LEVELS - self.rate) <= 1e-3 * self.rate)


def _drop_threshold(rate):
    """Draws below this (of 2**16 levels) are dropped."""
    return int(round(float(rate) * _DRAW_LEVELS))


def dropout_with_16_bit_draws(inputs, threshold, seed):
    """Inverted dropout of `inputs`: an element is kept when its 16-bit draw is at least
    `threshold`, the kept ones scaled by `2**16 / (2**16 - threshold)`. `seed`: `[2]` int32
    (stateless: the same seed gives the same mask). TensorFlow only."""
    import tensorflow as tf

    x = tf.convert_to_tensor(inputs)
    shape = tf.shape(x)
    count = tf.size(x)
    # One 32-bit word holds two draws: reinterpret the buffer as twice as many uint16.
    words = tf.random.stateless_uniform(
        tf.reshape((count + 1) // 2, [1]), seed, minval=None, maxval=None, dtype=tf.uint32)
    draws = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:count]
    keep = tf.reshape(draws >= tf.constant(threshold, tf.uint16), shape)
    scale = _DRAW_LEVELS / (_DRAW_LEVELS - threshold)
    # The gradient of x * mask is upstream * mask: no other op to differentiate.
    mask = tf.cast(keep, x.dtype) * tf.constant(scale, x.dtype)
    return x * mask
