"""Layer normalization in the op pattern oneDNN runs as one kernel, for int8 exports.

The int8 export swaps the encoder's LayerNorms (Keras' or ours) for
`FusedLayerNorm`, a `tf.Module` computing `layer_norm_one_kernel`
(`bert_keras/layers/layer_normalization.py`): the pattern TensorFlow's graph
optimizer rewrites into the single oneDNN kernel `_MklLayerNorm` when the graph
is loaded, in TF Serving as in `tf.saved_model.load`. The saved graph holds only
standard ops (`Reshape`, `Fill`, `FusedBatchNormV3`, `Mul`, `AddV2`, all in TF
Serving's op set). Our own `LayerNormalization` already traces to that pattern
at inference; the swap also covers a plain Keras layer, and makes the
normalization a module of its own, next to the int8 dense layers.

Example:

    >>> import keras, numpy as np
    >>> norm = keras.layers.LayerNormalization(epsilon=1e-12); norm.build((None, 8))
    >>> x = np.random.rand(5, 8).astype("float32")
    >>> float(np.max(np.abs(FusedLayerNorm.from_keras(norm)(x) - norm(x)))) < 1e-5
    True
"""

import numpy as np
import tensorflow as tf

from bert_keras.layers.layer_normalization import layer_norm_one_kernel


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
        outputs = layer_norm_one_kernel(tf.cast(inputs, tf.float32), self.gamma, self.beta, self.epsilon)
        return tf.cast(outputs, inputs.dtype)


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
