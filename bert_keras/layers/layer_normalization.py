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

In a traced graph where no gradient tape records (inference: `predict`,
`evaluate`, validation in `fit`, exported signatures), a float32 input of rank
2 or 3 is normalized in the op pattern that TensorFlow's graph optimizer
rewrites into one oneDNN kernel, `_MklLayerNorm` (`layer_norm_one_kernel`):
one pass over the activations instead of ~9; the 13 LayerNorms of a 6x384
encoder's full 32 x 128 batch take ~7 ms instead of ~25. The kernel's results
differ from the ops' in the last bits (as the fused GELU's do,
`activations.py`); on rows with a large offset mean it is the more accurate of
the two. Eager calls keep the ops (no graph optimizer rewrites them there).

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

        from tensorflow.python.eager import record  # whether any gradient tape is active

        x = tf.convert_to_tensor(inputs)
        # As Keras: statistics in at least float32 (half precision loses too much).
        compute = tf.float64 if x.dtype == tf.float64 else tf.float32
        if (compute == tf.float32 and len(x.shape) in (2, 3) and not tf.executing_eagerly()
                and not record.could_possibly_record()):
            normalize = layer_norm_one_kernel  # a traced inference graph: nothing to differentiate
        else:
            normalize = layer_norm_last_axis
        outputs = normalize(
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


def layer_norm_one_kernel(x, gamma, beta, epsilon):
    """`(x - mean) / sqrt(var + epsilon) * gamma + beta` over the last axis of a float32 `x`,
    in the op pattern TensorFlow's graph optimizer (grappler's remapper, `FindMklLayerNorm`)
    rewrites into the single oneDNN kernel `_MklLayerNorm`.

    The pattern is the one TF-Keras 2's fused layer norm emitted: `Reshape [1, rows, H, 1]`
    -> `FusedBatchNormV3` (NCHW, training mode, scale `Fill` 1, offset `Fill` 0, empty mean and
    variance) -> `Reshape` back -> `Mul` gamma -> `AddV2` beta. Each row is one "channel" of an
    NCHW image, so batch-norm statistics per channel are layer-norm statistics per row. The
    rewrite needs an input of static rank 2 or 3 and oneDNN on (x86-64 builds, the default);
    it happens when the graph runs (in `tf.function`, `tf.saved_model.load` and TF Serving
    alike). Elsewhere, and eagerly, `FusedBatchNormV3` runs as it is: the same function. All
    ops are standard (in TF Serving's op set). Not differentiated in closed form: for inference.

    `epsilon` is passed to the raw op as it is (`tf.nn.fused_batch_norm` would raise it to
    1.001e-5).
    """
    import tensorflow as tf

    shape = tf.shape(x)
    width = x.shape[-1]
    # `[rows]`, the Fill ops' shape: for the encoder's packed `[tokens, H]` rows, one slice of
    # the shape (no product or stack of its parts in each of the 13-15 layer norms). Not read
    # from the reshaped tensor: the rewrite needs that to feed the batch norm alone.
    rows = shape[:1] if len(x.shape) == 2 else tf.reshape(tf.reduce_prod(shape[:-1]), [1])
    if width is not None:
        images = tf.reshape(x, [1, -1, width, 1])  # a constant shape
    else:
        images = tf.reshape(x, tf.concat([[1], rows, shape[-1:], [1]], 0))
    normalized, _, _, _, _, _ = tf.raw_ops.FusedBatchNormV3(
        x=images, scale=tf.fill(rows, tf.constant(1.0, x.dtype)), offset=tf.fill(rows, tf.constant(0.0, x.dtype)),
        mean=tf.constant([], x.dtype), variance=tf.constant([], x.dtype),
        epsilon=epsilon, data_format="NCHW", is_training=True)
    return tf.reshape(normalized, shape) * gamma + beta
