"""Dynamic-range int8 dense layers for exports: int8 weights, uint8 activations, float32 outputs.

`Int8Dense.from_dense(layer)` turns a built `keras.layers.Dense` into a
`tf.Module` that computes the same function from core TensorFlow quantized ops
(no Keras, no calibration):

* weights: per output column `j`, `scale[j] = max|W[:, j]| / 127` and
  `W_q = round(W / scale)` in int8 (symmetric, per channel), stored as an int8
  graph constant (so oneDNN packs it once, not per call) and bitcast to
  `qint8`;
* activations: quantized per call from their own min and max
  (`QuantizeV2`, `MIN_FIRST`, quint8): `x ~ lo + step * x_q`;
* `QuantizedMatMulWithBiasAndDequantize` (oneDNN u8 x s8 -> s32 inner product,
  dequantized in the same kernel) with `input_quant_mode="SCALED"` computes
  `step * (x_q @ W_q) + bias'`, where `bias' = b / scale + lo * colsum(W_q)` puts
  back the activation offset, and one multiply by `scale` gives
  `x @ W + b` (then the layer's activation).

Measured on the 2-core development machine, `[512 x 384] x [384 x 1536]`:
~1.5 ms for this path against ~2.9 ms for float32 `tf.matmul` + bias. The
oneDNN kernel's own `MIN_FIRST` mode gives wrong results with a float bias
in TF 2.20 (its compensation term is left in integer units), and `Dequantize`
of `qint32` has no oneDNN kernel, hence this formulation. The kernels exist only
in oneDNN (`INTEL_MKL`) builds of TensorFlow, which the x86-64 pip wheels and
the official `tensorflow/serving` CPU images are (see `serving/op_sets.py`).

`int8_dense_layers(model)` is the export-time switch: inside it, the encoder's
per-token dense layers (attention QKV, attention output, FFN in, FFN out) are
replaced by their `Int8Dense`; the pooler and task heads stay float32 (one row
per example: too small to gain anything). Each block's FFN pair shares GELU's
`1/sqrt(2)` (folded into the second layer's scales) and the second layer's
input range starts at GELU's known floor. The encoder's LayerNorms run as
`FusedLayerNorm` (`serving/fused_layer_norm.py`, one oneDNN kernel each).
Outside it the model is unchanged.

Example:

    >>> import keras, numpy as np
    >>> dense = keras.layers.Dense(64); dense.build((None, 32))
    >>> int8 = Int8Dense.from_dense(dense)
    >>> x = np.random.rand(8, 32).astype("float32")
    >>> float(np.max(np.abs(int8(x) - dense(x)))) < 0.05
    True
"""

import contextlib
import weakref

import numpy as np
import tensorflow as tf

QUANTIZE_MODES = (None, "int8")
# The quantized ops an int8 export adds to the graph (op audit, docs).
INT8_OPS = ("QuantizeV2", "QuantizedMatMulWithBiasAndDequantize", "Bitcast")
# A constant input still needs a non-empty range.
_MIN_RANGE = 1e-6
_SQRT_HALF = 0.7071067811865476
# min over y of sqrt(2) * gelu(y) (= z + z * erf(z), z = y / sqrt 2) is -0.2403735 (at
# y ~ -0.7518); a bound a little below it, for the input range of the layer after GELU.
SCALED_GELU_FLOOR = -0.2404


def is_exact_gelu(activation):
    """Whether `activation` computes the exact (erf) GELU, checked on values, not by name."""
    if activation is None:
        return False
    import math

    probe = np.linspace(-6.0, 6.0, 97, dtype=np.float32)
    want = np.array([0.5 * v * (1.0 + math.erf(v * _SQRT_HALF)) for v in probe.astype(np.float64)])
    try:
        got = np.asarray(activation(tf.constant(probe)), np.float64)
    except Exception:  # an activation that does not take a float tensor: not GELU
        return False
    return got.shape == want.shape and bool(np.max(np.abs(got - want)) < 1e-5)


def check_quantize(quantize):
    """`None` or `"int8"` (`"none"` -> None); anything else raises ValueError naming the choices."""
    if isinstance(quantize, str) and quantize.lower() == "none":
        return None
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be None or 'int8', not {quantize!r}")
    return quantize


def quantize_per_channel(kernel):
    """`(int8 [K, N] weights, float32 [N] scales)`: symmetric per output column.

    `kernel ~ weights * scales`; an all-zero column gets scale 1 (weights 0).

    >>> w, s = quantize_per_channel(np.array([[1.0, -0.5], [-2.0, 0.25]], "float32"))
    >>> w.tolist(), s.tolist()
    ([[64, -127], [-127, 64]], [0.015748031437397003, 0.003937007859349251])

    Args:
        kernel: float array `[K, N]` (input features x output features).
    """
    kernel = np.asarray(kernel, np.float32)
    if kernel.ndim != 2:
        raise ValueError(f"a dense kernel is [in, out]; got shape {list(kernel.shape)}")
    peak = np.max(np.abs(kernel), axis=0)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    weights = np.clip(np.round(kernel / scales), -127, 127).astype(np.int8)
    return weights, scales


class Int8Dense(tf.Module):
    """`activation(x @ W + b)` with int8 per-channel weights and dynamic uint8 activations.

    Args:
        kernel: float `[K, N]`.
        bias: float `[N]` or None.
        activation: callable applied to the float32 output, or None.
        name: module name (variables are saved under it).
        input_floor: None, or a float <= 0 known to bound every input from
            below: the activation range then starts there (one reduction
            over the inputs less).
        scaled_gelu_output: with an exact GELU activation, return
            `sqrt(2) * gelu(y)` (one multiply less per output); only for a
            consumer built with its kernel times `1/sqrt(2)` (`int8_dense_layers`
            pairs a transformer block's FFN layers so).
    """

    def __init__(self, kernel, bias=None, activation=None, name=None, input_floor=None,
                 scaled_gelu_output=False):
        super().__init__(name=name)
        if input_floor is not None and not input_floor <= 0:
            raise ValueError(f"input_floor must be <= 0, got {input_floor}")
        self.input_floor = None if input_floor is None else float(input_floor)
        weights, scales = quantize_per_channel(kernel)
        bias = np.zeros(weights.shape[1], np.float32) if bias is None else np.asarray(bias, np.float32)
        self.units = weights.shape[1]
        # A graph constant, not a variable: oneDNN caches its packed (reordered)
        # copy of a constant weight across calls, a variable's it reorders on every
        # call (~0.2 ms per [384 x 1536] matmul, ~15% of a short-text batch).
        self.weights_int8 = weights
        # One constant per graph, however often the layer is called in it (the
        # encoder calls its last block twice: once for [CLS] alone).
        self._weights_in_graph = weakref.WeakKeyDictionary()
        self.scales = tf.Variable(scales, trainable=False, name="scales")
        # In units of `scales`, so that one multiply after the matmul restores both.
        self.scaled_bias = tf.Variable(bias / scales, trainable=False, name="scaled_bias")
        self.column_sums = tf.Variable(weights.astype(np.float32).sum(axis=0), trainable=False,
                                       name="column_sums")
        self.activation = activation
        # Exact GELU after an int8 matmul: the float path gets it fused into oneDNN's
        # MatMul + BiasAdd + GELU kernel; alone, Keras' erfc form cost 28% of an int8
        # forward pass here (Erfc is 3x Erf). The same function through Erf, with the
        # 1/sqrt(2) folded into the scales, is ~2x cheaper.
        self.exact_gelu = is_exact_gelu(activation)
        if scaled_gelu_output and not self.exact_gelu:
            raise ValueError("scaled_gelu_output needs an exact GELU activation")
        self.scaled_gelu_output = bool(scaled_gelu_output)
        if self.exact_gelu:
            self.gelu_scales = tf.Variable(scales * np.float32(_SQRT_HALF), trainable=False,
                                           name="gelu_scales")

    @classmethod
    def from_dense(cls, layer, kernel_scale=1.0, **options):
        """The `Int8Dense` of a built `keras.layers.Dense` (2-D kernel), its kernel times `kernel_scale`.

        `options`: `input_floor`, `scaled_gelu_output` (see the class).
        """
        kernel = np.asarray(layer.kernel) * np.float32(kernel_scale)
        bias = np.asarray(layer.bias) if layer.use_bias else None
        activation = layer.activation
        if activation is not None and getattr(activation, "__name__", "") == "linear":
            activation = None
        return cls(kernel, bias, activation, name=f"{layer.name}_int8", **options)

    def dequantized_kernel(self):
        """The float32 `[K, N]` kernel the int8 weights stand for (what is actually multiplied)."""
        return tf.cast(self.weights_int8, tf.float32) * self.scales

    def _quantized_weights(self):
        """The int8 weights as a `qint8` tensor: the same graph constant on every call in a graph."""
        if tf.executing_eagerly():
            return tf.bitcast(tf.constant(self.weights_int8), tf.qint8)
        graph = tf.compat.v1.get_default_graph()
        if graph not in self._weights_in_graph:
            self._weights_in_graph[graph] = tf.bitcast(tf.constant(self.weights_int8), tf.qint8)
        return self._weights_in_graph[graph]

    def __call__(self, inputs, training=None):
        inputs = tf.convert_to_tensor(inputs)
        dtype = inputs.dtype
        x = tf.cast(inputs, tf.float32)
        rows = tf.reshape(x, [-1, tf.shape(x)[-1]])
        low = (tf.constant(self.input_floor) if self.input_floor is not None
               else tf.minimum(tf.reduce_min(rows), 0.0))
        high = tf.maximum(tf.reduce_max(rows), low + _MIN_RANGE)
        quantized = tf.raw_ops.QuantizeV2(input=rows, min_range=low, max_range=high, T=tf.quint8,
                                          mode="MIN_FIRST")
        low, high = quantized.output_min, quantized.output_max
        bias = self.scaled_bias + low * self.column_sums
        zero = tf.constant(0.0)
        product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
            a=quantized.output, b=self._quantized_weights(), bias=bias,
            min_a=zero, max_a=high - low, min_b=tf.constant(-127.0), max_b=tf.constant(127.0),
            min_freezed_output=zero, max_freezed_output=zero, Toutput=tf.float32,
            input_quant_mode="SCALED")
        if self.exact_gelu:
            # gelu(y) = y/2 * (1 + erf(y/sqrt2)) = (z + z*erf(z)) / sqrt2, z = y/sqrt2.
            z = product * self.gelu_scales
            outputs = z + z * tf.math.erf(z)
            if not self.scaled_gelu_output:
                outputs = outputs * _SQRT_HALF
        else:
            outputs = product * self.scales
            if self.activation is not None:
                outputs = self.activation(outputs)
        shape = tf.concat([tf.shape(x)[:-1], [self.units]], axis=0)
        return tf.cast(tf.reshape(outputs, shape), dtype)


def encoder_dense_layers(model):
    """`[(owner, attribute, keras Dense)]` of the per-token dense layers of `model`'s encoder.

    Every `keras.layers.Dense` attribute of each transformer block and of its
    attention layer (QKV, attention output, FFN in and out): found by type,
    not by name.
    """
    import keras

    encoder = getattr(model, "encoder", model)
    blocks = getattr(encoder, "transformer_layers", None)
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no BertEncoder transformer layers to quantize")
    found = []
    for block in blocks:
        owners = [block] + [value for value in vars(block).values()
                            if isinstance(value, keras.layers.Layer)
                            and not isinstance(value, keras.layers.Dense)]
        for owner in owners:
            for attribute, value in sorted(vars(owner).items()):
                if isinstance(value, keras.layers.Dense) and not attribute.startswith("_"):
                    found.append((owner, attribute, value))
    return found


@contextlib.contextmanager
def int8_dense_layers(model):
    """Within the block, `model`'s encoder runs its per-token dense layers as `Int8Dense`.

    Its LayerNorms run as `FusedLayerNorm` (`serving/fused_layer_norm.py`: the
    same function in the op pattern oneDNN fuses into one kernel; with int8
    matmuls, Keras' layer-norm ops were the next largest cost).
    Yields the list of swapped-in modules (a `tf.Module` must track them for
    `tf.saved_model.save`). The Keras layers are put back on exit; the swap
    bypasses Keras' attribute tracking, so the model's weights are untouched.
    The encoder's caches of traced inference functions are emptied on entry
    and restored on exit, so no graph traced with one kind of layer runs
    with the other.
    """
    from serving.fused_layer_norm import FusedLayerNorm, encoder_layer_norms

    paired = _gelu_pairs(model)
    swapped = [(owner, attribute, dense, paired.get((id(owner), attribute)) or Int8Dense.from_dense(dense))
               for owner, attribute, dense in encoder_dense_layers(model)]
    swapped += [(owner, attribute, norm, FusedLayerNorm.from_keras(norm))
                for owner, attribute, norm in encoder_layer_norms(model)]
    caches = _traced_function_caches(getattr(model, "encoder", model))
    saved = [dict(cache) for cache in caches]
    try:
        for cache in caches:  # graphs traced with the float layers must not be reused
            cache.clear()
        for owner, attribute, _, int8 in swapped:
            object.__setattr__(owner, attribute, int8)
        yield [int8 for _, _, _, int8 in swapped]
    finally:
        for owner, attribute, dense, _ in swapped:
            object.__setattr__(owner, attribute, dense)
        for cache, before in zip(caches, saved):  # nor those traced with the int8 ones
            cache.clear()
            cache.update(before)


def _gelu_pairs(model):
    """`{(id(block), attribute): Int8Dense}` for each block's FFN with exact GELU, built as a pair.

    The FFN-in layer returns `sqrt(2) * gelu(y)` and the FFN-out layer takes
    it with its kernel times `1/sqrt(2)` (the same per-channel int8 weights,
    scales divided by sqrt 2) and the known floor of GELU as the bottom of its
    input range: two passes over the `[tokens, intermediate]` activations
    fewer, the same function. Blocks are `BertTransformerBlock`s (their
    `intermediate_dense` feeds `output_dense`); others are left alone.
    """
    from bert_keras.layers.transformer_block import BertTransformerBlock

    encoder = getattr(model, "encoder", model)
    pairs = {}
    for block in getattr(encoder, "transformer_layers", []):
        if not isinstance(block, BertTransformerBlock):
            continue
        first, second = block.intermediate_dense, block.output_dense
        if not is_exact_gelu(first.activation):
            continue
        pairs[(id(block), "intermediate_dense")] = Int8Dense.from_dense(first, scaled_gelu_output=True)
        pairs[(id(block), "output_dense")] = Int8Dense.from_dense(
            second, kernel_scale=_SQRT_HALF, input_floor=SCALED_GELU_FLOOR)
    return pairs


def _traced_function_caches(encoder):
    """The encoder's dicts of cached `tf.function`s (`inference_function`, eager inference).

    Attributes named like `*function*` that are dicts, or plain holders of
    dicts (`BertEncoder._function_cache`): found by shape, not by exact name.
    """
    caches = []
    for name, value in vars(encoder).items():
        if "function" not in name:
            continue
        if isinstance(value, dict):
            caches.append(value)
        elif hasattr(value, "__dict__"):
            caches += [inner for inner in vars(value).values() if isinstance(inner, dict)]
    return caches
