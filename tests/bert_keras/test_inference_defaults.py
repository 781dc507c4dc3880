"""Inference skips padding by default: every inference entry point equals the full computation.

The full computation is `encoder(inputs, padding="compute")` (the functional
graph, every position). The default paths must give the same outputs on the
real tokens and the same pooled / task outputs (rtol ~1e-5); `sequence_output`
is 0 at padded positions, which shows the skip-padding path ran.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder
from bert_keras.models.classifier import BertClassifier
from bert_keras.models.token_classifier import BertTokenClassifier

CONFIG = BertConfig(
    vocab_size=60, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
    max_position_embeddings=40, type_vocab_size=2,
)
TOLERANCE = dict(rtol=1e-5, atol=2e-6)


def make_inputs(batch=4, seq=12, padded=True, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, CONFIG.vocab_size, size=(batch, seq)).astype("int32")
    lengths = np.maximum(seq - 3 * np.arange(batch), 2) if padded else np.full(batch, seq)
    padding_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    return {
        "token_ids": token_ids * padding_mask,
        "segment_ids": rng.integers(0, 2, size=(batch, seq)).astype("int32") * padding_mask,
        "padding_mask": padding_mask,
    }


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(3)
    return BertEncoder(CONFIG)


def assert_equal_to_full(outputs, full, padding_mask):
    real = padding_mask.astype(bool)
    sequence = np.asarray(outputs["sequence_output"])
    np.testing.assert_allclose(sequence[real], np.asarray(full["sequence_output"])[real], **TOLERANCE)
    np.testing.assert_allclose(outputs["pooled_output"], full["pooled_output"], **TOLERANCE)
    return sequence[~real]


@pytest.mark.parametrize("padded", [True, False])
def test_default_inference_entry_points_equal_the_full_computation(encoder, padded):
    inputs = make_inputs(padded=padded)
    full = encoder(inputs, padding="compute")
    in_graph = tf.function(lambda x: encoder(x, training=False))
    entry_points = {
        "__call__()": encoder(inputs),
        "__call__(training=False)": encoder(inputs, training=False),
        "predict": encoder.predict(inputs, batch_size=2, verbose=0),
        "predict_on_batch": encoder.predict_on_batch(inputs),
        "tf.function": in_graph(inputs),
    }
    for name, outputs in entry_points.items():
        at_padding = assert_equal_to_full(outputs, full, inputs["padding_mask"])
        assert np.all(at_padding == 0), f"{name} did not skip padding"
        if not padded:
            np.testing.assert_allclose(outputs["sequence_output"], full["sequence_output"], **TOLERANCE)


def test_full_computation_when_turned_off_or_training():
    keras.utils.set_random_seed(4)
    no_dropout = BertConfig.from_dict({**CONFIG.to_dict(), "hidden_dropout": 0.0, "attention_dropout": 0.0})
    encoder = BertEncoder(no_dropout)
    inputs = make_inputs()
    full = np.asarray(encoder(inputs, padding="compute")["sequence_output"])
    assert np.all(np.abs(full[inputs["padding_mask"] == 0]) > 0)
    # Training is unchanged: every position computed (dropout 0 here, so comparable).
    np.testing.assert_allclose(encoder(inputs, training=True)["sequence_output"], full, **TOLERANCE)
    # Turned off (before any inference call traced the model): the full computation everywhere.
    restored = BertEncoder.from_config({**encoder.get_config(), "inference_skip_padding": False})
    restored.set_weights(encoder.get_weights())
    assert not BertEncoder.from_config(restored.get_config()).inference_skip_padding
    np.testing.assert_allclose(restored(inputs, training=False)["sequence_output"], full, **TOLERANCE)
    np.testing.assert_allclose(restored.predict_on_batch(inputs)["sequence_output"], full, **TOLERANCE)


def test_xla_paths_compute_everything_and_agree(encoder):
    inputs = make_inputs()
    full = encoder(inputs, padding="compute")
    # Inside an XLA-compiled function the encoder needs static shapes: full computation.
    compiled = tf.function(lambda x: encoder(x, training=False), jit_compile=True)(inputs)
    np.testing.assert_allclose(compiled["sequence_output"], full["sequence_output"], rtol=1e-5, atol=1e-5)
    xla_encoder = BertEncoder(CONFIG, full_batch_jit_compile=True)
    xla_encoder.set_weights(encoder.get_weights())
    xla_encoder.compile(jit_compile=True)
    predicted = xla_encoder.predict_on_batch(inputs)
    np.testing.assert_allclose(predicted["sequence_output"], full["sequence_output"], rtol=1e-5, atol=1e-5)
    # Eager call on a batch without padding: the cached XLA function.
    unpadded = make_inputs(padded=False)
    eager = xla_encoder(unpadded)
    assert ("compute", True) in xla_encoder._function_cache.eager
    np.testing.assert_allclose(
        eager["sequence_output"], encoder(unpadded, padding="compute")["sequence_output"], rtol=1e-5, atol=1e-5
    )


def test_eager_calls_reuse_their_graphs_across_batch_sizes(encoder):
    for batch, seq in [(4, 12), (3, 12), (5, 9), (2, 16), (7, 11)]:
        encoder(make_inputs(batch=batch, seq=seq))
    assert set(encoder._function_cache.eager) <= {("skip", False), ("compute", False)}
    for function in encoder._function_cache.eager.values():
        assert function.experimental_get_tracing_count() == 1


def full_computation_twin(encoder):
    """The same weights with `inference_skip_padding=False`: the reference of every task output."""
    twin = BertEncoder(CONFIG, inference_skip_padding=False)
    twin.set_weights(encoder.get_weights())
    return twin


def test_task_models_predict_and_evaluate_skip_padding_with_the_same_results(encoder):
    inputs = make_inputs()
    labels = np.array([0, 1, 2, 1])
    classifier = BertClassifier(encoder, num_classes=3)
    reference = BertClassifier(full_computation_twin(encoder), num_classes=3)
    reference.set_weights(classifier.get_weights())
    for model in (classifier, reference):
        model.compile(loss=model.default_loss(), metrics=model.default_metrics())
    full_logits = np.asarray(reference.predict_on_batch(inputs))
    for logits in (classifier.predict(inputs, verbose=0), classifier.predict_on_batch(inputs),
                   classifier(inputs, training=False), classifier(inputs)):
        np.testing.assert_allclose(logits, full_logits, **TOLERANCE)
    evaluated = classifier.evaluate(inputs, labels, verbose=0, return_dict=True)
    assert evaluated == pytest.approx(reference.evaluate(inputs, labels, verbose=0, return_dict=True), rel=1e-5)

    tagger = BertTokenClassifier(encoder, num_classes=5)
    reference = BertTokenClassifier(full_computation_twin(encoder), num_classes=5)
    reference.set_weights(tagger.get_weights())
    real = inputs["padding_mask"].astype(bool)
    full_tags = np.asarray(reference.predict_on_batch(inputs))
    tags = np.asarray(tagger.predict_on_batch(inputs))
    np.testing.assert_allclose(tags[real], full_tags[real], **TOLERANCE)
    # At padded positions the head saw zeros (the skip-padding path): logits are its bias.
    bias = np.asarray(tagger.token_classifier.bias)
    np.testing.assert_allclose(tags[~real], np.broadcast_to(bias, tags[~real].shape), atol=1e-6)
    assert not np.allclose(full_tags[~real], np.broadcast_to(bias, full_tags[~real].shape), atol=1e-6)


def executed_kernels(function, *args, logdir):
    """`{op name: kernel}` of the ops one call of `function` ran (TensorFlow's profiler)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(str(logdir))
    function(*args)
    tf.profiler.experimental.stop()
    kernels = {}
    for path in logdir.rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            for meta in plane.event_metadata.values():
                name, _, kernel = meta.name.rpartition(":")
                if name:
                    kernels[name] = kernel
    return kernels


def test_pooled_output_runs_the_last_layer_at_cls_only(encoder, tmp_path):
    """A pooled-only model (classifier) never runs the last block on every token.

    The skip-padding forward computes `pooled_output` with [CLS] as the last
    block's only query; TensorFlow prunes the full last block when nothing
    reads `sequence_output`. Same logits as the full computation, including a
    row whose [CLS] slot is padding (pooled from zeros, as before) and a
    batch without a real token.
    """
    inputs = make_inputs(batch=5)
    inputs["padding_mask"][4] = np.roll(inputs["padding_mask"][4], 2)  # position 0 is padding
    classifier = BertClassifier(encoder, num_classes=3)
    reference = BertClassifier(full_computation_twin(encoder), num_classes=3)
    reference.set_weights(classifier.get_weights())
    logits = np.asarray(classifier.predict_on_batch(inputs))
    np.testing.assert_allclose(logits[:4], np.asarray(reference.predict_on_batch(inputs))[:4], **TOLERANCE)
    sequence = encoder(inputs)["sequence_output"]
    np.testing.assert_allclose(encoder(inputs)["pooled_output"], encoder.pooler(sequence[:, 0]), **TOLERANCE)
    empty = {name: np.zeros_like(value) for name, value in inputs.items()}
    assert np.all(np.isfinite(classifier.predict_on_batch(empty)))

    function = tf.function(lambda x: classifier(x, training=False))
    graph = function.get_concrete_function(inputs).graph.as_graph_def()
    dense_in_graph = sum(node.op == "MatMul" for node in graph.node)
    ran = executed_kernels(function, inputs, logdir=tmp_path)
    dense_ran = [name for name, kernel in ran.items() if kernel.endswith("MatMul") and "Batch" not in kernel]
    per_block = 4  # QKV, attention output, FFN in, FFN out
    # The graph holds the last block twice (every token; [CLS] only), their QKV projection
    # once (both runs read its keys and values) ...
    assert dense_in_graph == per_block * (CONFIG.num_layers + 1) - 1 + 2  # + pooler and head
    # ... and the run does the [CLS]-only one (its QKV on every token: keys and values):
    # as many dense layers as one forward pass, 3 of them on one row per example.
    assert len(dense_ran) == per_block * CONFIG.num_layers + 2, sorted(dense_ran)


def test_a_pass_reading_both_outputs_projects_the_last_blocks_keys_and_values_once(encoder, tmp_path):
    """`sequence_output` and `pooled_output` in one graph (the encoder's `predict`, features,
    export signatures): the [CLS]-only run of the last block reads the full run's query / key /
    value projection instead of a second `[T, H] x [H, 3H]` matmul. Same outputs as the full
    computation, and the same gradients in training."""
    inputs = make_inputs(batch=5)
    function = tf.function(lambda x: encoder(x, training=False))
    ran = executed_kernels(function, inputs, logdir=tmp_path)
    qkv_ran = [name for name, kernel in ran.items() if kernel.endswith("MatMul") and "/qkv" in name]
    assert len(qkv_ran) == CONFIG.num_layers, sorted(qkv_ran)
    full = full_computation_twin(encoder)(inputs, training=False)
    assert_equal_to_full(function(inputs), full, inputs["padding_mask"])

    # Training: the projection read twice gets both reads' gradients (dropout off: one function).
    twin = full_computation_twin(encoder)  # the same layers in the same order

    def gradients(model, padding):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=False, padding=padding)
            real = tf.cast(inputs["padding_mask"][:, :, None], tf.float32)
            loss = tf.reduce_sum(outputs["sequence_output"] * real * 0.5) + tf.reduce_sum(
                outputs["pooled_output"] ** 2)
        return tape.gradient(loss, model.trainable_weights)

    for ours, reference, weight in zip(gradients(encoder, "skip"), gradients(twin, "compute"),
                                       encoder.trainable_weights):
        np.testing.assert_allclose(tf.convert_to_tensor(ours), tf.convert_to_tensor(reference),
                                   rtol=1e-4, atol=1e-5, err_msg=weight.path)
