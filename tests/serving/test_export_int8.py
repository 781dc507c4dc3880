"""int8 exports: `Int8Dense` against float32, per-channel scales, the export round trip,
the op audit's kernel status, and the embedded server batching an int8 export.

Tolerances: dynamic-range int8 rounds every activation by at most half a step
`(max - min) / 255 / 2` and every weight by half its column's scale, so one output
is off by at most `step/2 * sum_i |W_ij| + scale_j/2 * sum_i |x_i|` (plus float
rounding): asserted per element, and the typical error must stay under 1% of the
output range.
"""

import os
import threading

import numpy as np
import pytest
import tensorflow as tf

from serving.fused_layer_norm import FusedLayerNorm, encoder_layer_norms
from serving.int8_dense import (
    INT8_OPS,
    Int8Dense,
    check_quantize,
    encoder_dense_layers,
    int8_dense_layers,
    is_exact_gelu,
    quantize_per_channel,
)
from serving.op_audit import audit_saved_model


def _error_bound(x, kernel):
    x = np.asarray(x, np.float64)
    low, high = min(x.min(), 0.0), max(x.max(), 0.0)
    step = (high - low) / 255.0
    _, scales = quantize_per_channel(kernel)
    return (step / 2 * np.abs(kernel).sum(0)[None, :]
            + scales[None, :] / 2 * np.abs(x).sum(1)[:, None]) * 1.01 + 1e-5


def test_int8_dense_matches_float32_within_the_rounding_bound():
    import keras

    rng = np.random.default_rng(0)
    dense = keras.layers.Dense(1536, activation=None)
    dense.build((None, 384))
    dense.kernel.assign(rng.normal(0, 0.05, (384, 1536)).astype("float32"))
    dense.bias.assign(rng.normal(0, 0.1, 1536).astype("float32"))
    x = rng.normal(0, 1, (64, 384)).astype("float32")
    want = np.asarray(dense(x), np.float64)
    got = np.asarray(Int8Dense.from_dense(dense)(x), np.float64)
    error = np.abs(got - want)
    assert np.all(error <= _error_bound(x, np.asarray(dense.kernel)))
    assert np.mean(error) < 0.01 * (want.max() - want.min())
    assert 0 < error.max() < 0.01 * (want.max() - want.min())  # really quantized, and close
    # [B, S, H] inputs and the layer's activation (GELU of the FFN) work too.
    gelu = keras.layers.Dense(96, activation="gelu")
    gelu.build((None, 384))
    x3 = rng.normal(0, 1, (2, 5, 384)).astype("float32")
    int8_gelu = Int8Dense.from_dense(gelu)
    assert int8_gelu.exact_gelu  # computed through Erf (cheaper than Keras' Erfc form)
    out = np.asarray(int8_gelu(x3))
    assert out.shape == (2, 5, 96)
    bound = _error_bound(x3.reshape(10, 384), np.asarray(gelu.kernel)).reshape(2, 5, 96)
    assert np.all(np.abs(out - np.asarray(gelu(x3))) <= 1.13 * bound)  # GELU is 1.13-Lipschitz


def test_exact_gelu_is_recognised_by_its_values():
    from bert_keras.layers.activations import get_activation

    assert is_exact_gelu(get_activation("gelu"))
    assert not is_exact_gelu(get_activation("gelu_approximate"))  # the tanh form keeps its own op
    assert not is_exact_gelu(None) and not is_exact_gelu(tf.nn.relu)


def test_weights_have_one_scale_per_output_column():
    kernel = np.array([[1.0, -0.5, 0.0], [-2.0, 0.25, 0.0]], "float32")
    weights, scales = quantize_per_channel(kernel)
    assert weights.dtype == np.int8 and weights.tolist() == [[64, -127, 0], [-127, 64, 0]]
    np.testing.assert_allclose(scales, [2.0 / 127, 0.5 / 127, 1.0])
    # A column 1000x smaller than its neighbour keeps its precision (one scale for the
    # whole tensor would round it to zero).
    rng = np.random.default_rng(1)
    kernel = rng.normal(0, 1, (64, 2)).astype("float32")
    kernel[:, 1] *= 1e-3
    x = rng.normal(0, 1, (16, 64)).astype("float32")
    got = np.asarray(Int8Dense(kernel)(x))
    want = x @ kernel
    small = np.abs(got[:, 1] - want[:, 1]).max() / np.abs(want[:, 1]).max()
    assert small < 0.02
    with pytest.raises(ValueError, match="in, out"):
        quantize_per_channel(np.zeros((2, 3, 4)))


def test_quantize_option_is_checked():
    assert check_quantize(None) is None and check_quantize("none") is None
    assert check_quantize("int8") == "int8"
    with pytest.raises(ValueError, match="None or 'int8'"):
        check_quantize("int4")


def test_swap_covers_the_four_dense_layers_of_each_block_and_restores_them(finetuned_dir):
    from bert_keras.finetuned_model import read_finetuned as load_finetuned

    model = load_finetuned(finetuned_dir("classification")).model
    found = encoder_dense_layers(model)
    blocks = model.encoder.transformer_layers
    assert len(found) == 4 * len(blocks)
    before = [getattr(owner, name) for owner, name, _ in found]
    norms = encoder_layer_norms(model)
    assert len(norms) == 2 * len(blocks) + 1  # each block's two, the embeddings' one
    norms_before = [getattr(owner, name) for owner, name, _ in norms]
    with int8_dense_layers(model) as swapped:
        assert len(swapped) == len(found) + len(norms)
        assert all(isinstance(getattr(owner, name), Int8Dense) for owner, name, _ in found)
        assert all(isinstance(getattr(owner, name), FusedLayerNorm) for owner, name, _ in norms)
    assert [getattr(owner, name) for owner, name, _ in found] == before
    assert [getattr(owner, name) for owner, name, _ in norms] == norms_before
    # Eager calls run cached graphs: none traced with float layers may run inside the
    # swap, nor one traced inside it after.
    ids = np.array([[2, 30, 31, 32, 3, 0, 0, 0], [2, 40, 41, 3, 50, 51, 3, 0]], "int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
              "padding_mask": (ids > 0).astype("int32")}
    float32 = np.asarray(model(inputs, training=False))
    with int8_dense_layers(model):
        int8 = np.asarray(model(inputs, training=False))
    assert np.max(np.abs(int8 - float32)) > 1e-4
    np.testing.assert_array_equal(np.asarray(model(inputs, training=False)), float32)


@pytest.fixture(scope="module")
def int8_export(finetuned_dir, tmp_path_factory):
    from serving.exporter import export_saved_model

    base = str(tmp_path_factory.mktemp("int8"))
    lines = []
    result = export_saved_model(finetuned_dir("classification"), base, "pair", quantize="int8",
                                progress=lines.append)
    return result, base, lines


def test_int8_export_round_trips_and_passes_the_fresh_process_check(int8_export, finetuned_dir):
    from bert_keras.finetuned_model import read_finetuned as load_finetuned

    result, _, lines = int8_export
    assert result.check is not None and result.check.ok  # fresh process vs the int8 Python path
    assert result.check.float32_max_abs_diff["probabilities"] > 0  # really int8
    assert result.card["check"]["float32_max_abs_diff"]["probabilities"] < 0.1
    assert any("int8 vs float32" in line for line in lines)
    loaded = tf.saved_model.load(result.path)
    outputs = loaded.signatures["serving_default"](
        text=tf.constant(["I loved this film.", "The battery died."]),
        text_b=tf.constant(["The actors were great.", "It was terrible."]))
    probabilities = outputs["probabilities"].numpy()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    # The float kernels of the replaced layers are not saved; the int8 weights are graph
    # constants (oneDNN packs a constant weight once), not variables.
    model = load_finetuned(finetuned_dir("classification")).model
    replaced = {tuple(dense.kernel.shape) for _, _, dense in encoder_dense_layers(model)}
    reader = tf.train.load_checkpoint(os.path.join(result.path, "variables", "variables"))
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    saved = {name: (tuple(shapes[name]), dtypes[name]) for name in shapes}
    assert len(replaced) == 4 and not [name for name, (_, dtype) in saved.items() if dtype == tf.int8]
    from tensorflow.core.protobuf import saved_model_pb2

    graph = saved_model_pb2.SavedModel()
    with open(os.path.join(result.path, "saved_model.pb"), "rb") as f:
        graph.ParseFromString(f.read())
    int8_constants = [tuple(d.size for d in node.attr["value"].tensor.tensor_shape.dim)
                      for function in graph.meta_graphs[0].graph_def.library.function
                      for node in function.node_def
                      if node.op == "Const" and node.attr["dtype"].type == tf.int8.as_datatype_enum]
    assert replaced <= set(int8_constants)
    # Saved once, not once per signature: every signature calls the same model function.
    assert len([shape for shape in int8_constants if len(shape) == 2]) == len(encoder_dense_layers(model))
    hidden = model.encoder.transformer_layers[0].hidden_size
    ffn_and_qkv = replaced - {(hidden, hidden)}  # [H, H] is also the (float) pooler's shape
    assert not [name for name, (shape, dtype) in saved.items()
                if dtype == tf.float32 and shape in ffn_and_qkv]


def test_op_audit_lists_the_quantized_ops_with_their_kernel_status(int8_export):
    result, _, lines = int8_export
    audit = audit_saved_model(result.path, release="2.20")
    assert audit.ok  # registered ops of the release
    assert "QuantizedMatMulWithBiasAndDequantize" in audit.ops
    assert set(audit.conditional_kernels) == {"QuantizedMatMulWithBiasAndDequantize"}
    assert "oneDNN" in audit.conditional_kernels["QuantizedMatMulWithBiasAndDequantize"]
    assert set(INT8_OPS) <= set(audit.ops)
    assert "TF_ENABLE_ONEDNN_OPTS=0" in audit.summary()
    assert audit.to_json()["conditional_kernels"] == audit.conditional_kernels
    assert any("Missing 0-th output" in line for line in lines)  # the export printed it


def test_embedded_server_batches_the_int8_export(int8_export):
    from serving.server.engine import BatchingOptions, InferenceEngine, ModelSource

    result, base, _ = int8_export
    texts = ["I loved this film.", "The battery died.", "It is a film.", "A great film."] * 2
    pairs = ["The actors were great.", "It was terrible.", "It has actors.", "Good."] * 2
    loaded = tf.saved_model.load(result.path).signatures["serving_default"]
    one_by_one = [loaded(text=tf.constant([a]), text_b=tf.constant([b])) for a, b in zip(texts, pairs)]
    engine = InferenceEngine([ModelSource("pair", os.path.join(base, "pair"))],
                             batching=BatchingOptions(max_batch_size=8, batch_timeout_micros=200_000,
                                                      num_batch_threads=1),
                             poll_interval_s=0)
    engine.start()
    try:
        results = [None] * len(texts)
        barrier = threading.Barrier(len(texts))

        def request(i):
            barrier.wait()
            results[i] = engine.predict_arrays(
                "pair", inputs={"text": np.array([texts[i].encode()], object),
                                "text_b": np.array([pairs[i].encode()], object)})

        threads = [threading.Thread(target=request, args=(i,)) for i in range(len(texts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        stats = engine.batching_stats()
    finally:
        engine.stop(drain_timeout_s=5)
    assert stats.get("merged_batches", 0) >= 1, stats
    for single, (version, _, arrays) in zip(one_by_one, results):
        assert version == result.version
        # Merged rows share one activation range per call: close to, not equal to, alone.
        np.testing.assert_allclose(arrays["probabilities"], single["probabilities"].numpy(), atol=0.05)


def test_fused_layer_norm_matches_keras_and_runs_as_one_onednn_kernel(tmp_path):
    import keras

    norm = keras.layers.LayerNormalization(epsilon=1e-12)
    norm.build((None, 16))
    rng = np.random.default_rng(0)
    norm.gamma.assign(rng.uniform(0.5, 1.5, 16).astype("float32"))
    norm.beta.assign(rng.normal(size=16).astype("float32"))
    fused = FusedLayerNorm.from_keras(norm)
    x = (rng.normal(size=(3, 7, 16)) * 4 + 2).astype("float32")
    function = tf.function(fused, input_signature=[tf.TensorSpec([None, None, 16])])
    np.testing.assert_allclose(function(x).numpy(), np.asarray(norm(x)), atol=1e-5)
    np.testing.assert_allclose(fused(x).numpy(), np.asarray(norm(x)), atol=1e-5)
    # The saved graph holds standard ops only; grappler rewrites them into _MklLayerNorm
    # when the graph runs (the profile names the kernel).
    graph_ops = {node.op for node in function.get_concrete_function().graph.as_graph_def().node}
    assert "FusedBatchNormV3" in graph_ops and "Mean" not in graph_ops
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(str(tmp_path))
    function(x)
    tf.profiler.experimental.stop()
    kernels = set()
    for path in tmp_path.rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        kernels |= {meta.name.split(":")[-1] for plane in space.planes
                    for meta in plane.event_metadata.values()}
    assert "_MklLayerNorm" in kernels


def test_only_plain_last_axis_layer_norms_are_fused():
    import keras

    def built(**options):
        norm = keras.layers.LayerNormalization(**options)
        norm.build((None, 5, 16))
        return norm

    assert FusedLayerNorm.supports(built())  # the encoder's LayerNorms: axis -1, gamma and beta
    assert FusedLayerNorm.supports(built(axis=[-1]))
    assert not FusedLayerNorm.supports(built(axis=1))  # a middle axis: other statistics
    assert not FusedLayerNorm.supports(built(axis=[1, 2]))
    assert not FusedLayerNorm.supports(built(scale=False))
    assert not FusedLayerNorm.supports(built(center=False))
    assert not FusedLayerNorm.supports(built(rms_scaling=True))


def test_ffn_pair_folds_the_gelu_scale_into_the_next_layer():
    import keras

    from serving.int8_dense import SCALED_GELU_FLOOR

    rng = np.random.default_rng(1)
    first = keras.layers.Dense(64, activation="gelu")
    first.build((None, 16))
    second = keras.layers.Dense(16)
    second.build((None, 64))
    x = rng.normal(size=(40, 16)).astype("float32") * 3
    reference = np.asarray(second(first(x)))
    plain = Int8Dense.from_dense(second)(Int8Dense.from_dense(first)(x)).numpy()
    scaled = Int8Dense.from_dense(first, scaled_gelu_output=True)(x).numpy()
    assert scaled.min() >= SCALED_GELU_FLOOR  # the floor the next layer's range starts at
    paired = Int8Dense.from_dense(second, kernel_scale=np.sqrt(0.5),
                                  input_floor=SCALED_GELU_FLOOR)(scaled).numpy()
    bound = 2 * np.max(np.abs(plain - reference)) + 1e-3
    assert np.max(np.abs(paired - reference)) < bound
    with pytest.raises(ValueError, match="exact GELU"):
        Int8Dense.from_dense(second, scaled_gelu_output=True)
