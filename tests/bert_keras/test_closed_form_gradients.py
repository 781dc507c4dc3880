"""The LayerNorm and exact-GELU gradients written out (bert_keras.layers) against automatic
differentiation of Keras' own ops, in float64 (where rounding cannot hide a wrong term) and in
float32 / float16 as the encoder runs them."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.layers import LayerNormalization, get_activation
from bert_keras.layers.layer_normalization import layer_norm_last_axis


def keras_layer_norm(x, gamma, beta, epsilon):
    return keras.ops.layer_normalization(x, gamma, beta, axis=-1, epsilon=epsilon)


def gradients(function, *inputs, upstream):
    inputs = [tf.constant(value) for value in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        output = function(*inputs)
        loss = tf.reduce_sum(output * upstream)
    return output, tape.gradient(loss, inputs)


@pytest.mark.parametrize("shape", [(7, 16), (2, 5, 16), (1, 1, 3, 8)])
@pytest.mark.parametrize("epsilon", [1e-12, 1e-3])
def test_layer_norm_gradient_equals_automatic_differentiation_in_float64(shape, epsilon):
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=shape)  # an offset mean: the centring term matters
    gamma, beta = rng.normal(1.0, 0.3, size=shape[-1]), rng.normal(0.0, 0.3, size=shape[-1])
    upstream = tf.constant(rng.normal(size=shape))
    ours, ours_grads = gradients(lambda *a: layer_norm_last_axis(*a, epsilon), x, gamma, beta, upstream=upstream)
    theirs, their_grads = gradients(lambda *a: keras_layer_norm(*a, epsilon), x, gamma, beta, upstream=upstream)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    for mine, reference in zip(ours_grads, their_grads):
        np.testing.assert_allclose(mine, reference, rtol=1e-10, atol=1e-12)
    # Layer norm's input gradient sums to zero along the normalized axis (the mean is removed).
    np.testing.assert_allclose(np.sum(ours_grads[0], axis=-1), 0.0, atol=1e-10)


def test_layer_norm_layer_trains_its_weights_as_keras_does():
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(4, 6, 32)), tf.float32)
    ours, reference = LayerNormalization(epsilon=1e-12), keras.layers.LayerNormalization(epsilon=1e-12)
    ours.build(x.shape)
    reference.build(x.shape)
    for layer in (ours, reference):
        layer.gamma.assign(np.linspace(0.5, 1.5, 32).astype("float32"))
        layer.beta.assign(np.linspace(-0.3, 0.3, 32).astype("float32"))
    weights = tf.constant(rng.normal(size=(4, 6, 32)), tf.float32)
    results = []
    for layer in (ours, reference):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) * weights)
        results.append(tape.gradient(loss, [x, layer.gamma, layer.beta]))
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=2e-4, atol=2e-5)
    assert [v.path for v in ours.weights] == [v.path.replace(reference.name, ours.name) for v in reference.weights]
    assert ours.get_config() | {"name": None} == reference.get_config() | {"name": None}


def test_layer_norm_under_mixed_precision_computes_in_float32():
    layer = LayerNormalization(epsilon=1e-12, dtype="mixed_float16")
    x = tf.constant(np.random.default_rng(2).normal(100.0, 1e-2, size=(3, 64)), tf.float16)
    output = layer(x)
    assert output.dtype == tf.float16
    reference = keras.layers.LayerNormalization(epsilon=1e-12, dtype="mixed_float16")(x)
    np.testing.assert_allclose(output.numpy().astype("float32"), reference.numpy().astype("float32"), atol=2e-2)
    assert np.isfinite(output.numpy()).all()


@pytest.mark.parametrize("options", [dict(axis=1), dict(scale=False), dict(center=False)])
def test_other_layer_norm_forms_run_keras_own_call(options):
    x = tf.constant(np.random.default_rng(3).normal(size=(2, 5, 8)), tf.float32)
    ours, reference = LayerNormalization(**options), keras.layers.LayerNormalization(**options)
    np.testing.assert_array_equal(ours(x), reference(x))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exact_gelu_gradient_equals_automatic_differentiation(dtype):
    x = np.concatenate([np.linspace(-12, 12, 2001), [0.0, -0.0, 1e-30, 40.0, -40.0]]).astype(dtype)
    upstream = tf.constant(np.random.default_rng(4).normal(size=x.shape).astype(dtype))
    ours, (ours_grad,) = gradients(get_activation("gelu"), x, upstream=upstream)
    theirs, (their_grad,) = gradients(lambda v: keras.activations.gelu(v, approximate=False), x,
                                      upstream=upstream)
    if dtype == "float32":
        np.testing.assert_array_equal(ours, theirs)  # the forward values are the same bits
    else:  # TensorFlow's own float64 GELU rounds 1/sqrt(2) to float32; ours does not
        np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    tolerance = 1e-5 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(ours_grad, their_grad, rtol=tolerance, atol=tolerance)


def test_exact_gelu_without_a_tape_is_keras_own_ops_so_the_graph_optimizer_can_fuse_it():
    """At inference the feed-forward layer must trace to the ops of `Dense(activation="gelu")`:
    that is the pattern TensorFlow's remapper fuses into one oneDNN matmul + bias + GELU kernel.
    Under a tape the written-out gradient is recorded instead."""
    ours = keras.layers.Dense(8, activation=get_activation("gelu"))
    theirs = keras.layers.Dense(8, activation="gelu")
    for layer in (ours, theirs):
        layer.build((None, 4))
    theirs.set_weights(ours.get_weights())
    spec = tf.TensorSpec([None, 4], tf.float32)

    def op_types(layer):
        graph = tf.function(layer).get_concrete_function(spec).graph
        return [op.type for op in graph.get_operations() if op.type not in ("Placeholder", "NoOp")]

    assert op_types(ours) == op_types(theirs)
    x = tf.constant(np.random.default_rng(2).normal(size=(5, 4)).astype("float32"))
    np.testing.assert_array_equal(ours(x), theirs(x))

    @tf.function
    def trained(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ours(x)
            loss = tf.reduce_sum(y)
        return y, tape.gradient(loss, x)

    graph = trained.get_concrete_function(spec).graph
    assert "Exp" in [op.type for op in graph.get_operations()]  # phi(x) of the written-out derivative
    y, grad = trained(x)
    np.testing.assert_array_equal(y, theirs(x))
    with tf.GradientTape() as tape:
        tape.watch(x)
        reference = tf.reduce_sum(theirs(x))
    np.testing.assert_allclose(grad, tape.gradient(reference, x), rtol=2e-6, atol=2e-6)


def test_exact_gelu_in_float16_stays_finite():
    x = tf.constant(np.array([-300.0, -20.0, -1.0, 0.0, 1.0, 20.0, 300.0, 60000.0]), tf.float16)
    output, (grad,) = gradients(get_activation("gelu"), x, upstream=tf.ones_like(x))
    np.testing.assert_array_equal(output, keras.activations.gelu(x, approximate=False))
    assert np.isfinite(grad.numpy()).all()
    np.testing.assert_allclose(grad.numpy().astype("float32"), [0, 0, -0.0833, 0.5, 1.0833, 1, 1, 1], atol=2e-3)


@pytest.mark.parametrize("x", [np.zeros((0, 8)), np.ones((2, 8)), np.array([[1e6, -1e6] * 4])],
                         ids=["no rows", "constant rows", "huge values"])
def test_layer_norm_edge_rows_match_keras(x):
    """No rows (a batch without real tokens, packed), zero variance (only epsilon keeps it
    finite), and large values: the same outputs and gradients as Keras' own layer."""
    x = tf.constant(x, tf.float32)
    upstream = tf.reshape(tf.range(tf.size(x), dtype=tf.float32), x.shape)
    results = []
    for layer in (LayerNormalization(epsilon=1e-12), keras.layers.LayerNormalization(epsilon=1e-12)):
        output, grads = gradients(lambda v: layer(v), x, upstream=upstream)
        results.append((output, grads[0]))
    (ours, our_grad), (theirs, their_grad) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(our_grad, their_grad, rtol=1e-5, atol=1e-6)
    assert np.isfinite(our_grad).all()


def kernels_run(function, *args, log_dir):
    """The kernel names TensorFlow's profiler records while `function(*args)` runs."""
    return {name for name, count in kernel_counts(function, *args, log_dir=log_dir).items() if count}


def traced_op_types(function, spec):
    return {op.type for op in tf.function(function).get_concrete_function(spec).graph.get_operations()}


@pytest.mark.parametrize("shape", [(None, 16), (None, None, 16)])
def test_layer_norm_at_inference_runs_as_one_onednn_kernel(shape, tmp_path):
    """A traced graph without a tape (predict, evaluate, exports) normalizes in the pattern
    grappler rewrites into `_MklLayerNorm`; under a tape (training) the closed form is
    recorded; eager calls keep the ops. All three agree with Keras' layer."""
    from tensorflow.python.util import _pywrap_util_port

    rng = np.random.default_rng(5)
    ours, reference = LayerNormalization(epsilon=1e-12), keras.layers.LayerNormalization(epsilon=1e-12)
    gamma, beta = rng.uniform(0.5, 1.5, 16).astype("float32"), rng.normal(size=16).astype("float32")
    for layer in (ours, reference):
        layer.build(shape)
        layer.gamma.assign(gamma)
        layer.beta.assign(beta)
    spec = tf.TensorSpec(shape, tf.float32)
    x = tf.constant((rng.normal(size=(6, 16) if len(shape) == 2 else (2, 3, 16)) * 4 + 2).astype("float32"))

    inference = traced_op_types(ours, spec)
    assert "FusedBatchNormV3" in inference and "Mean" not in inference

    def trained(v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            y = ours(v)
        return y, tape.gradient(tf.reduce_sum(y), v)

    training = traced_op_types(trained, spec)
    assert "FusedBatchNormV3" not in training and "Rsqrt" in training  # the closed form

    traced = tf.function(ours, input_signature=[spec])
    np.testing.assert_allclose(traced(x), reference(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tf.function(trained)(x)[0], reference(x), rtol=1e-5, atol=1e-5)
    eager_ops = layer_norm_last_axis(x, tf.constant(gamma), tf.constant(beta), 1e-12)
    np.testing.assert_array_equal(ours(x), eager_ops)
    if _pywrap_util_port.IsMklEnabled():
        assert "_MklLayerNorm" in kernels_run(traced, x, log_dir=tmp_path)


def kernel_counts(function, *args, log_dir):
    """How many times each kernel ran in `function(*args)` (TensorFlow's profiler)."""
    from collections import Counter

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(str(log_dir))
    function(*args)
    tf.profiler.experimental.stop()
    counts = Counter()
    for path in log_dir.rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            names = {key: meta.name.split(":")[-1] for key, meta in plane.event_metadata.items()}
            counts.update(names.get(event.metadata_id, "") for line in plane.lines for event in line.events)
    return counts


def test_an_encoders_inference_runs_each_blocks_scores_and_layer_norms_as_fused_kernels(tmp_path):
    """Per block, the graph optimizer fuses the attention scores' matmul, scale and mask into one
    oneDNN kernel and each LayerNorm into another. Both fusions are easy to lose to a graph
    change that keeps the values (the fused matmul adds its mask in place, so a mask bias shared
    by the blocks fused in one of them only): counted here on a 3-block encoder."""
    from tensorflow.python.util import _pywrap_util_port

    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    if not _pywrap_util_port.IsMklEnabled():
        pytest.skip("oneDNN is off in this TensorFlow build")
    encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100, num_layers=3))
    token_ids = tf.constant(np.random.default_rng(0).integers(5, 100, size=(4, 16)), tf.int32)
    mask = tf.constant((np.arange(16)[None] < np.array([16, 9, 4, 12])[:, None]).astype("int32"))
    inputs = {"token_ids": token_ids, "padding_mask": mask, "segment_ids": tf.zeros_like(token_ids)}
    traced = tf.function(lambda x: encoder(x))
    traced(inputs)
    counts = kernel_counts(traced, inputs, log_dir=tmp_path)
    assert counts["_MklFusedBatchMatMulV2"] == 3  # each block's scores (the pooled [CLS] run apart)
    assert counts["_MklLayerNorm"] == 6  # each block's two


@pytest.mark.parametrize("dtype, shape", [("float64", (None, 8)), ("float32", (None, 2, 3, 8))],
                         ids=["float64", "rank 4"])
def test_layer_norm_forms_the_kernel_cannot_take_keep_the_ops_at_inference(dtype, shape):
    layer = LayerNormalization(epsilon=1e-12, dtype=dtype)
    layer.build(shape)
    assert "FusedBatchNormV3" not in traced_op_types(layer, tf.TensorSpec(shape, dtype))


@pytest.mark.parametrize("x", [np.zeros((0, 8)), np.zeros((2, 0, 8)), np.ones((2, 8)),
                               np.array([[1e6, -1e6] * 4]), np.full((2, 8), 100.0) + np.linspace(0, 0.07, 8)],
                         ids=["no rows", "no tokens", "constant rows", "huge values", "offset mean"])
def test_layer_norm_at_inference_edge_rows_match_keras(x):
    """The one-kernel form on rows a packed batch can hold: none at all, zero variance, large
    values, a large mean with a small spread. Measured against the float64 result: no less
    accurate than Keras' ops (they round differently, so they differ from each other)."""
    exact = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    x = tf.constant(x, tf.float32)
    ours, reference = LayerNormalization(epsilon=1e-12), keras.layers.LayerNormalization(epsilon=1e-12)
    spec = tf.TensorSpec([None] * (len(x.shape) - 1) + [8], tf.float32)
    output = tf.function(ours, input_signature=[spec])(x).numpy()
    assert output.shape == x.shape and np.isfinite(output).all()
    if output.size:
        keras_error = np.abs(reference(x).numpy() - exact).max()
        assert np.abs(output - exact).max() <= 1.5 * keras_error + 1e-6


def test_traced_models_are_freed_after_their_gradients():
    """`tf.custom_gradient` keeps every traced graph alive in TensorFlow's gradient registry
    (tensorflow#27492): the closed-form gradients must not, or each retrace leaks a model."""
    import gc
    import weakref
    from concurrent.futures import ThreadPoolExecutor

    from tensorflow.python.framework import ops

    from bert_keras.layers.token_packing import TokenPacking, pack_tokens

    norm, gelu = LayerNormalization(), get_activation("gelu")
    norm.build((None, 8))
    mask = tf.constant([[1, 1, 0], [1, 0, 0]])
    registered = len(ops._gradient_registry._registry)

    def trace_three_times():
        graphs = []
        for _ in range(3):
            @tf.function
            def step(x, sequence):
                with tf.GradientTape() as tape:
                    tape.watch([x, sequence])
                    packing = TokenPacking(mask)
                    loss = tf.reduce_sum(gelu(norm(x))) + tf.reduce_sum(
                        pack_tokens(sequence, packing.token_indices, packing) ** 2)
                return tape.gradient(loss, [x, sequence])

            traced = step.get_concrete_function(tf.TensorSpec([None, 8]), tf.TensorSpec([2, 3, 8]))
            graphs.append(weakref.ref(traced.graph))
            _, sequence_grad = traced(tf.ones([2, 8]) * tf.range(8.0), tf.ones([2, 3, 8]))
            del step, traced
        return graphs, sequence_grad

    # Gradient tapes are per thread, and a tape open while a function is traced keeps what it
    # recorded there (TensorFlow's own ops too, through the layer's variables) until it closes:
    # trace in a thread of its own, which no tape left open by other code in this process reaches.
    with ThreadPoolExecutor(1) as pool:
        graphs, sequence_grad = pool.submit(trace_three_times).result()
    for _ in range(3):  # finalizers can free more on a second pass
        gc.collect()
    assert len(ops._gradient_registry._registry) == registered
    alive = [graph() for graph in graphs if graph() is not None]
    assert not alive, f"{len(alive)} of 3 traced graphs still held: {_holders(alive[0])}"
    np.testing.assert_array_equal(sequence_grad[..., 0], [[2, 2, 0], [2, 0, 0]])


def _holders(obj, depth=3):
    """What keeps `obj` alive, as chains of type names (for the failure message)."""
    import gc
    import types

    chains, frontier, seen = [], [(obj, type(obj).__name__)], {id(obj)}
    for _ in range(depth):
        next_frontier = []
        for target, chain in frontier:
            for holder in gc.get_referrers(target):
                if id(holder) in seen or isinstance(holder, types.FrameType) or holder is frontier:
                    continue
                seen.add(id(holder))
                next_frontier.append((holder, f"{chain} <- {type(holder).__name__}"))
        frontier = next_frontier[:20]
        chains = [chain for _, chain in frontier]
    return "; ".join(sorted(set(chains))[:12])


def test_symbolic_gradients_fall_back_to_automatic_differentiation():
    """TF1-style `tf.gradients` does not read the tape: it differentiates the forward ops."""
    x = np.random.default_rng(5).normal(size=(3, 8)).astype("float32")
    gamma, beta = np.linspace(0.5, 1.5, 8).astype("float32"), np.zeros(8, "float32")

    @tf.function
    def symbolic(x):
        return tf.gradients(tf.reduce_sum(get_activation("gelu")(layer_norm_last_axis(x, gamma, beta, 1e-12)) * x), x)[0]

    with tf.GradientTape() as tape:
        value = tf.constant(x)
        tape.watch(value)
        loss = tf.reduce_sum(get_activation("gelu")(layer_norm_last_axis(value, gamma, beta, 1e-12)) * value)
    np.testing.assert_allclose(symbolic(tf.constant(x)), tape.gradient(loss, value), rtol=1e-4, atol=1e-5)
