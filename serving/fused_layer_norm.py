"""Layer normalization in the op pattern oneDNN runs as one kernel, for exports.

Keras 3's `LayerNormalization` is ~9 element-wise and reduction ops over the
`[tokens, H]` activations (mean, squared difference, mean, rsqrt, 3 muls,
adds): memory-bound passes that cost an int8 encoder about as much as its
quantized matmuls. TensorFlow's graph optimizer (grappler remapper,
`FindMklLayerNorm`) rewrites one particular pattern, the one TF-Keras 2's
fused layer norm emitted, into the single oneDNN kernel `_MklLayerNorm`:

    Reshape [1, rows, H, 1] -> FusedBatchNormV3 (NCHW, is_training, scale
    Fill 1, offset Fill 0, empty mean/variance) -> Reshape back -> Mul gamma
    -> AddV2 beta

`FusedLayerNorm` computes layer normalization in exactly that form. The saved
graph holds only standard ops (`Reshape`, `Fill`, `FusedBatchNormV3`, `Mul`,
`AddV2`, all in TF Serving's op set); the rewrite happens when the graph is
loaded, in TF Serving as in `tf.saved_model.load` (grappler runs on both), on
x86-64 builds with oneDNN on (the default). Elsewhere the same graph runs
`FusedBatchNormV3` as it is: same function, no fused kernel. Measured on the
2-core development machine, `[4000 x 384]`: ~6x less time than Keras' ops.
The `epsilon` is the layer's own (the raw op, not `tf.nn.fused_batch_norm`,
which raises it to 1.001e-5).

Example:

    >>> import keras, numpy as np
    >>> norm = keras.layers.LayerNormalization(epsilon=1e-12); norm.build((None, 8))
    >>> x = np.random.rand(5, 8).astype("float32")
    >>> float(np.max(np.abs(FusedLayerNorm.from_keras(norm)(x) - norm(x)))) < 1e-5
    True
"""

import numpy as np
import tensorflow as tf


class FusedLayerNorm(tf.Module):
    """`(x - mean) / sqrt(var + eps) * gamma + beta` over the last axis, as oneDNN fuses it.

    Args:
        gamma: float `[H]`.
        beta: float `[H]`.
        epsilon: float.
        name: module name (variables are saved under it).
    """

    def __init__(self, gamma, beta, epsilon, name=None):
        super().__init__(name=name)
        self.gamma = tf.Variable(np.asarray(gamma, np.float32), trainable=False, name="gamma")
        self.beta = tf.Variable(np.asarray(beta, np.float32), trainable=False, name="beta")
        self.epsilon = float(epsilon)
        self.units = int(self.gamma.shape[0])

    @classmethod
    def supports(cls, layer):
        """Whether `layer` (a Keras `LayerNormalization`) is plain last-axis layer norm with both weights."""
        axis = getattr(layer, "axis", None)
        axis = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        # Only axis -1 is surely the last axis whatever the input rank; a layer given a positive
        # axis keeps Keras' own (exact, unfused) computation.
        return bool(getattr(layer, "center", False) and getattr(layer, "scale", False)
                    and not getattr(layer, "rms_scaling", False) and axis == [-1]
                    and getattr(layer, "gamma", None) is not None and len(layer.gamma.shape) == 1)

    @classmethod
    def from_keras(cls, layer):
        """The `FusedLayerNorm` of a built Keras `LayerNormalization` (see `supports`)."""
        return cls(np.asarray(layer.gamma), np.asarray(layer.beta), layer.epsilon,
                   name=f"{layer.name}_fused")

    def __call__(self, inputs, training=None):
        inputs = tf.convert_to_tensor(inputs)
        dtype = inputs.dtype
        x = tf.cast(inputs, tf.float32)
        shape = tf.shape(x)
        rows = tf.reduce_prod(shape[:-1])
        # Each row is one "channel" of an NCHW image [1, rows, H, 1]: batch-norm
        # statistics per channel are layer-norm statistics per row.
        normalized, _, _, _, _, _ = tf.raw_ops.FusedBatchNormV3(
            x=tf.reshape(x, tf.stack([1, rows, self.units, 1])),
            scale=tf.fill([rows], 1.0), offset=tf.fill([rows], 0.0),
            mean=tf.constant([], tf.float32), variance=tf.constant([], tf.float32),
            epsilon=self.epsilon, data_format="NCHW", is_training=True)
        outputs = tf.reshape(normalized, shape) * self.gamma + self.beta
        return tf.cast(outputs, dtype)


def encoder_layer_norms(model):
    """`[(owner, attribute, keras LayerNormalization)]` of `model`'s encoder (embeddings and blocks).

    Found by type, not by name; only those `FusedLayerNorm.supports`.
    """
    import keras

    encoder = getattr(model, "encoder", model)
    owners = [getattr(encoder, "embeddings", None)] + list(getattr(encoder, "transformer_layers", []))
    found = []
    for owner in owners:
        if owner is None:
            continue
        for attribute, value in sorted(vars(owner).items()):
            if (isinstance(value, keras.layers.LayerNormalization) and not attribute.startswith("_")
                    and FusedLayerNorm.supports(value)):
                found.append((owner, attribute, value))
    return found
