"""BERT's LayerNorm: Keras' `LayerNormalization`, with the gradient written out.

The function is Keras' (mean and biased variance over the last axis, in at
least float32, `(x - mean) / sqrt(var + eps) * gamma + beta`). What changes is
the backward pass on the TensorFlow backend. Left to automatic
differentiation, Keras' forward ops and their gradients are 51 ops (reductions
and broadcasts over `[tokens, H]`, each a pass over memory); with the closed
form below, 22. The closed form is

    dx = inv * (g - mean(g) - x_hat * mean(g * x_hat)),   g = dy * gamma
    dgamma = sum(dy * x_hat),   dbeta = sum(dy)

with `inv = 1 / sqrt(var + eps)` and `x_hat` kept from the forward pass. It
is the same derivative (rounding aside). A
6-layer encoder has 13 LayerNorms; measured on MiniLM fine-tuning (2 CPU
cores), the whole training step is ~3% faster (`docs/benchmarks.md`).

Example:

>>> import numpy as np, tensorflow as tf
>>> norm = LayerNormalization(epsilon=1e-12)
>>> x = tf.constant(np.random.default_rng(0).normal(size=(3, 8)), tf.float32)
>>> reference = keras.layers.LayerNormalization(epsilon=1e-12)
>>> float(tf.reduce_max(tf.abs(norm(x) - reference(x)))) < 1e-5
True
"""

import keras


@keras.saving.register_keras_serializable(package="bert_keras")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis with a closed-form gradient.

    Same arguments, weights (`gamma`, `beta`) and config as Keras' layer. Other
    forms (another axis, `rms_scaling`, no `center` / `scale`, another backend)
    run Keras' own `call`.
    """

    def call(self, inputs):
        if not self._closed_form_applies(inputs):
            return super().call(inputs)
        import tensorflow as tf

        x = tf.convert_to_tensor(inputs)
        # As Keras: statistics in at least float32 (half precision loses too much).
        compute = tf.float64 if x.dtype == tf.float64 else tf.float32
        outputs = layer_norm_last_axis(
            tf.cast(x, compute), tf.cast(self.gamma, compute), tf.cast(self.beta, compute), self.epsilon)
        return tf.cast(outputs, self.compute_dtype)

    def _closed_form_applies(self, inputs):
        axis = list(self.axis) if isinstance(self.axis, (list, tuple)) else [self.axis]
        rank = len(inputs.shape)
        return (keras.backend.backend() == "tensorflow" and self.center and self.scale
                and not self.rms_scaling and len(axis) == 1 and axis[0] in (-1, rank - 1))


def layer_norm_last_axis(x, gamma, beta, epsilon):
    """`(x - mean) / sqrt(var + epsilon) * gamma + beta` over `x`'s last axis (TensorFlow
    tensors of one float dtype; `gamma`, `beta`: `[H]`), differentiated in closed form."""
    import tensorflow as tf

    from bert_keras.layers.closed_form_gradient import closed_form_gradient

    @closed_form_gradient
    def normalize(x, gamma, beta):
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        centered = x - mean
        inv = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
        x_hat = centered * inv

        def gradient(dy):
            g = dy * gamma
            dx = inv * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                        - x_hat * tf.reduce_mean(g * x_hat, axis=-1, keepdims=True))
            rows = [-1, tf.shape(dy)[-1]]  # gamma / beta gradients: sums over every other axis
            return (dx, tf.reduce_sum(tf.reshape(dy * x_hat, rows), axis=0),
                    tf.reduce_sum(tf.reshape(dy, rows), axis=0))

        return x_hat * gamma + beta, gradient

    return normalize(x, gamma, beta)
