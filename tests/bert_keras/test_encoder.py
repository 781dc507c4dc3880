"""BertEncoder: outputs, padding, attention probs, mixed precision, saving, HF parity."""

import keras
import numpy as np
import pytest

from bert_keras.checkpoints.layout import assign_canonical
from bert_keras import padding_skipping
from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder

CONFIG = BertConfig(
    vocab_size=60, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
    max_position_embeddings=40, type_vocab_size=2,
)


def make_inputs(batch=3, seq=10, seed=0):
    """Random ids; row b has `seq - 2*b` real tokens followed by padding (id 0)."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, CONFIG.vocab_size, size=(batch, seq)).astype("int32")
    segment_ids = rng.integers(0, 2, size=(batch, seq)).astype("int32")
    lengths = np.maximum(seq - 2 * np.arange(batch), 2)
    padding_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    return {
        "token_ids": token_ids * padding_mask,
        "segment_ids": segment_ids * padding_mask,
        "padding_mask": padding_mask,
    }


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(1)
    return BertEncoder(CONFIG, output_hidden_states=True, output_attentions=True)


def test_output_shapes_and_keys(encoder):
    outputs = encoder(make_inputs())
    assert set(outputs) == {"sequence_output", "pooled_output", "hidden_states", "attention_probs"}
    assert outputs["sequence_output"].shape == (3, 10, 32)
    assert outputs["pooled_output"].shape == (3, 32)
    assert len(outputs["hidden_states"]) == CONFIG.num_layers + 1
    assert all(h.shape == (3, 10, 32) for h in outputs["hidden_states"])
    assert len(outputs["attention_probs"]) == CONFIG.num_layers
    assert all(p.shape == (3, 4, 10, 10) for p in outputs["attention_probs"])
    np.testing.assert_array_equal(outputs["hidden_states"][-1], outputs["sequence_output"])
    assert encoder.config == CONFIG
    assert tuple(encoder.token_embedding.embeddings.shape) == (60, 32)


def test_default_outputs_only_sequence_and_pooled():
    outputs = BertEncoder(CONFIG)(make_inputs())
    assert set(outputs) == {"sequence_output", "pooled_output"}


def test_attention_probs_normalised_and_masked(encoder):
    inputs = make_inputs()
    probs = [np.asarray(p) for p in encoder(inputs)["attention_probs"]]
    key_is_pad = inputs["padding_mask"][:, None, None, :] == 0
    for p in probs:
        np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
        assert np.all(np.where(np.broadcast_to(key_is_pad, p.shape), p, 0.0) < 1e-9)


def test_padding_invariance(encoder):
    """Extra padding (any ids under it) leaves the real positions unchanged."""
    inputs = make_inputs(batch=2, seq=8)
    padded = {k: np.pad(v, ((0, 0), (0, 5))) for k, v in inputs.items()}
    padded["token_ids"][:, 8:] = 7  # garbage under the mask must not leak
    short = encoder(inputs)
    long = encoder(padded)
    real = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(long["sequence_output"])[:, :8][real], np.asarray(short["sequence_output"])[real], atol=1e-5
    )
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def test_inference_paths_agree(encoder):
    inputs = make_inputs()
    full = encoder(inputs, padding="compute")["sequence_output"]
    for jit in (True, False):
        fast = encoder.inference_function(jit_compile=jit)(inputs)["sequence_output"]
        np.testing.assert_allclose(fast, full, atol=1e-5)
    real = inputs["padding_mask"].astype(bool)
    predicted = encoder.predict(inputs, verbose=0)["sequence_output"]
    np.testing.assert_allclose(predicted[real], np.asarray(full)[real], atol=1e-5)


def test_a_bool_padding_mask_reads_as_the_int_one(encoder):
    # keras-hub's preprocessors (MultiSegmentPacker) give padding_mask as bool.
    import tensorflow as tf

    inputs = make_inputs()
    as_bool = {**inputs, "padding_mask": inputs["padding_mask"].astype(bool)}
    expected = np.asarray(encoder(inputs, padding="compute")["pooled_output"])
    outputs = {"eager": encoder(as_bool), "graph": tf.function(lambda x: encoder(x))(as_bool),
               "computed": encoder(as_bool, padding="compute"), "predict": encoder.predict(as_bool, verbose=0)}
    for name, output in outputs.items():
        np.testing.assert_allclose(np.asarray(output["pooled_output"]), expected, atol=1e-5, err_msg=name)


def test_skip_padding_path_matches_on_real_tokens(encoder):
    inputs = make_inputs(batch=4, seq=12)
    full = encoder(inputs, padding="compute")
    packed = encoder.inference_function(skip_padding=True)(inputs)
    assert set(packed) == set(full)
    real = inputs["padding_mask"].astype(bool)
    for got, want in zip(packed["hidden_states"], full["hidden_states"]):
        np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real], atol=1e-5)
    query_real = np.broadcast_to(real[:, None, :, None], packed["attention_probs"][0].shape)
    for got, want in zip(packed["attention_probs"], full["attention_probs"]):
        np.testing.assert_allclose(np.asarray(got)[query_real], np.asarray(want)[query_real], atol=1e-6)
    sequence = np.asarray(packed["sequence_output"])
    np.testing.assert_allclose(sequence[real], np.asarray(full["sequence_output"])[real], atol=1e-5)
    assert np.all(sequence[~real] == 0)
    np.testing.assert_allclose(packed["pooled_output"], full["pooled_output"], atol=1e-5)
    with pytest.raises(ValueError, match="XLA"):
        encoder.inference_function(jit_compile=True, skip_padding=True)


def test_skip_padding_path_mixed_precision():
    encoder = BertEncoder(CONFIG, dtype="mixed_float16")
    inputs = make_inputs()
    packed = encoder.inference_function(skip_padding=True)(inputs)
    full = encoder(inputs, padding="compute")
    np.testing.assert_allclose(packed["pooled_output"], full["pooled_output"], atol=2e-2)
    assert np.all(np.isfinite(np.asarray(packed["sequence_output"])))


@pytest.mark.parametrize("task", ["classifier", "span_qa", "multiple_choice"])
def test_skip_padding_training_gives_the_same_loss_and_gradients(task):
    """The real-token path (`bert_keras.padding_skipping`) is the same computation: loss and every
    gradient match."""
    import tensorflow as tf

    from bert_keras.models import BertClassifier, BertMultipleChoice, BertSpanQA

    config = BertConfig.from_dict({**CONFIG.to_dict(), "hidden_dropout": 0.0, "attention_dropout": 0.0})
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(config)
    inputs = make_inputs(batch=4, seq=12, seed=5)
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if task == "classifier":
        model = BertClassifier(encoder, num_classes=3, dropout=0.0)
        loss_of = lambda out: cross_entropy(np.array([0, 2, 1, 2]), out)
    elif task == "span_qa":
        model = BertSpanQA(encoder, dropout=0.0)
        loss_of = lambda out: (cross_entropy(np.array([1, 2, 0, 3]), out["start_logits"])
                               + cross_entropy(np.array([4, 2, 0, 5]), out["end_logits"]))
    else:
        model = BertMultipleChoice(encoder, num_choices=2, dropout=0.0)
        inputs = {k: v.reshape(2, 2, 12) for k, v in inputs.items()}
        loss_of = lambda out: cross_entropy(np.array([1, 0]), out)

    def loss_and_gradients():
        with tf.GradientTape() as tape:
            loss = loss_of(model(inputs, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        # None: a variable the task does not use (the pooler, for span QA).
        return float(loss), [None if g is None else np.asarray(tf.convert_to_tensor(g)) for g in gradients]

    assert not encoder.skip_padding
    loss, gradients = loss_and_gradients()
    encoder.skip_padding = True
    assert padding_skipping.runs_on_real_tokens(encoder, training=True)
    packed_loss, packed_gradients = loss_and_gradients()
    assert packed_loss == pytest.approx(loss, abs=1e-6)
    assert len(packed_gradients) == len(gradients) > 0
    for full, packed in zip(gradients, packed_gradients):
        assert (full is None) == (packed is None)
        if full is not None:
            np.testing.assert_allclose(packed, full, atol=1e-6)


def test_skip_padding_training_zeroes_padded_outputs_and_round_trips():
    encoder = BertEncoder(CONFIG, skip_padding=True, output_hidden_states=True)
    inputs = make_inputs(batch=3, seq=10)
    outputs = encoder(inputs, training=True)
    padded = inputs["padding_mask"] == 0
    assert np.all(np.asarray(outputs["sequence_output"])[padded] == 0)
    assert np.all(np.asarray(outputs["hidden_states"][1])[padded] == 0)
    restored = BertEncoder.from_config(encoder.get_config())
    assert restored.skip_padding and padding_skipping.runs_on_real_tokens(restored, training=True)


def test_padding_skipping_decides_in_one_place():
    """Inference skips by default, training only with `skip_padding`, XLA never; an explicit
    `padding=` wins; blocks saved with the old per-block switch still load."""
    import tensorflow as tf

    from bert_keras.layers.transformer_block import BertTransformerBlock

    encoder = BertEncoder(CONFIG)
    assert padding_skipping.runs_on_real_tokens(encoder, training=False)
    assert not padding_skipping.runs_on_real_tokens(encoder, training=True)
    assert not padding_skipping.runs_on_real_tokens(encoder, training=False, padding="compute")
    assert padding_skipping.runs_on_real_tokens(encoder, training=True, padding="skip")
    with pytest.raises(ValueError, match="padding must be one of"):
        padding_skipping.runs_on_real_tokens(encoder, padding="never")

    @tf.function(jit_compile=True)
    def decided_under_xla():
        return tf.constant(padding_skipping.runs_on_real_tokens(encoder, training=False))

    assert not bool(decided_under_xla())
    block = encoder.transformer_layers[0]
    old_config = {**block.get_config(), "skip_padding": True}
    assert BertTransformerBlock.from_config(old_config).hidden_size == block.hidden_size


def test_compile_for_finetuning_skips_padding_only_without_xla():
    from bert_keras.models import BertClassifier, compile_for_finetuning

    classifier = BertClassifier(BertEncoder(CONFIG), num_classes=2)
    compile_for_finetuning(classifier, num_train_steps=10)  # CPU: Keras resolves XLA "auto" to off
    assert classifier.encoder.skip_padding
    compile_for_finetuning(classifier, num_train_steps=10, jit_compile=True)
    assert not classifier.encoder.skip_padding
    with pytest.raises(ValueError, match="skip_padding=True needs dynamic shapes"):
        compile_for_finetuning(classifier, num_train_steps=10, jit_compile=True, skip_padding=True)
    compile_for_finetuning(classifier, num_train_steps=10, skip_padding=False)
    assert not classifier.encoder.skip_padding
    compile_for_finetuning(classifier, num_train_steps=10)
    assert classifier.encoder.skip_padding
    inputs = make_inputs(batch=4, seq=10)
    fit = classifier.fit(inputs, np.array([0, 1, 0, 1]), epochs=2, verbose=0)
    assert np.all(np.isfinite(fit.history["loss"]))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_global_policy(policy):
    keras.mixed_precision.set_dtype_policy(policy)
    try:
        encoder = BertEncoder(CONFIG, output_attentions=True)
        outputs = encoder(make_inputs())
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert encoder.dtype_policy.name == policy
    # Variables stay float32; compute is half precision.
    assert encoder.transformer_layers[0].attention.qkv.kernel.dtype == "float32"
    assert encoder.transformer_layers[0].attention.qkv.compute_dtype == policy.split("_")[1]
    for name in ("sequence_output", "pooled_output"):
        value = np.asarray(outputs[name])
        assert value.dtype == np.float32 and np.all(np.isfinite(value))
    probs = np.asarray(outputs["attention_probs"][0])
    assert probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-4)


def test_mixed_precision_dtype_argument_close_to_float32(encoder):
    inputs = make_inputs()
    half = BertEncoder(CONFIG, dtype="mixed_bfloat16")
    half.set_weights(BertEncoder(CONFIG).get_weights())  # any weights; same in both
    full = BertEncoder(CONFIG, dtype="float32")
    full.set_weights(half.get_weights())
    diff = np.abs(np.asarray(half(inputs)["sequence_output"]) - np.asarray(full(inputs)["sequence_output"]))
    assert keras.config.dtype_policy().name == "float32"
    assert diff.max() < 0.2  # bfloat16 has ~3 significant digits


def test_keras_save_load_round_trip(encoder, tmp_path):
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertEncoder)
    assert loaded.config == CONFIG and loaded.output_attentions
    inputs = make_inputs()
    before, after = encoder(inputs), loaded(inputs)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(before[name], after[name])
    assert len(after["attention_probs"]) == CONFIG.num_layers


def test_dropout_active_only_in_training(encoder):
    inputs = make_inputs()
    a = encoder(inputs, training=True)["sequence_output"]
    b = encoder(inputs, training=False)["sequence_output"]
    assert not np.allclose(a, b)


def _hf_to_canonical(state_dict, num_layers):
    """Maps a HF BertModel state_dict to the canonical TF1 names (test-local)."""
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in state_dict.items()}
    out = {
        "bert/embeddings/word_embeddings": sd["embeddings.word_embeddings.weight"],
        "bert/embeddings/token_type_embeddings": sd["embeddings.token_type_embeddings.weight"],
        "bert/embeddings/position_embeddings": sd["embeddings.position_embeddings.weight"],
        "bert/embeddings/LayerNorm/gamma": sd["embeddings.LayerNorm.weight"],
        "bert/embeddings/LayerNorm/beta": sd["embeddings.LayerNorm.bias"],
        "bert/pooler/dense/kernel": sd["pooler.dense.weight"].T,
        "bert/pooler/dense/bias": sd["pooler.dense.bias"],
    }
    linears = {
        "attention/self/query": "attention.self.query",
        "attention/self/key": "attention.self.key",
        "attention/self/value": "attention.self.value",
        "attention/output/dense": "attention.output.dense",
        "intermediate/dense": "intermediate.dense",
        "output/dense": "output.dense",
    }
    norms = {"attention/output/LayerNorm": "attention.output.LayerNorm", "output/LayerNorm": "output.LayerNorm"}
    for i in range(num_layers):
        for tf_name, hf_name in linears.items():
            out[f"bert/encoder/layer_{i}/{tf_name}/kernel"] = sd[f"encoder.layer.{i}.{hf_name}.weight"].T
            out[f"bert/encoder/layer_{i}/{tf_name}/bias"] = sd[f"encoder.layer.{i}.{hf_name}.bias"]
        for tf_name, hf_name in norms.items():
            out[f"bert/encoder/layer_{i}/{tf_name}/gamma"] = sd[f"encoder.layer.{i}.{hf_name}.weight"]
            out[f"bert/encoder/layer_{i}/{tf_name}/beta"] = sd[f"encoder.layer.{i}.{hf_name}.bias"]
    return out


def test_parity_with_hf_bert_model():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf_config = transformers.BertConfig(**CONFIG.to_hf_dict())
    assert hf_config.hidden_act == "gelu"
    hf = transformers.BertModel(hf_config).eval()
    # Random (not initial) LayerNorm/bias values so every weight is exercised.
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.05 * torch.randn_like(p))

    encoder = BertEncoder(CONFIG)
    assign_canonical(encoder, _hf_to_canonical(hf.state_dict(), CONFIG.num_layers))
    inputs = make_inputs(batch=4, seq=12)
    with torch.inference_mode():
        ref = hf(
            input_ids=torch.from_numpy(inputs["token_ids"].astype(np.int64)),
            token_type_ids=torch.from_numpy(inputs["segment_ids"].astype(np.int64)),
            attention_mask=torch.from_numpy(inputs["padding_mask"].astype(np.int64)),
        )
    ours = encoder(inputs)
    real = inputs["padding_mask"].astype(bool)
    seq_diff = np.abs(np.asarray(ours["sequence_output"]) - ref.last_hidden_state.numpy())[real]
    assert seq_diff.max() <= 1e-4
    np.testing.assert_allclose(ours["pooled_output"], ref.pooler_output.numpy(), atol=1e-4, rtol=0)


def test_per_model_mixed_precision_policy_survives_keras_round_trip(tmp_path):
    import keras

    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    encoder = BertEncoder(BertConfig.named("tiny", vocab_size=50), dtype="mixed_float16")
    assert encoder.dtype_policy.name == "mixed_float16"
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    assert keras.saving.load_model(path).dtype_policy.name == "mixed_float16"


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_layers_declare_the_output_spec_their_call_traces(policy):
    # The encoder's functional build reads the blocks' and the embeddings' declared specs instead
    # of tracing `call`; they must say what `call` gives, in every mode a caller uses.
    from keras.src.backend import compute_output_spec as traced_spec

    from bert_keras.layers.embeddings import BertEmbeddings
    from bert_keras.layers.transformer_block import BertTransformerBlock

    block = BertTransformerBlock(hidden_size=32, num_heads=4, intermediate_size=64, dtype=policy)
    embeddings = BertEmbeddings(vocab_size=60, hidden_size=32, max_position_embeddings=40,
                                type_vocab_size=2, dtype=policy)
    hidden = keras.KerasTensor((3, None, 32), dtype=block.compute_dtype)  # as Keras autocasts it
    mask = keras.KerasTensor((3, None), dtype="int32")
    ids = keras.KerasTensor((3, None), dtype="int32")
    calls = [
        (embeddings, (ids, ids), {}),
        (block, (hidden, mask), {}),
        (block, (hidden, mask), {"return_attention_probs": True}),
        (block, (hidden, mask), {"query_positions": keras.KerasTensor((3, 2), dtype="int32")}),
        (block, (hidden, mask), {"query_positions": keras.KerasTensor((3, 2), dtype="int32"),
                                 "return_attention_probs": True}),
    ]
    embeddings.build((3, None))
    block.build((3, None, 32))
    for layer, args, kwargs in calls:
        declared = layer.compute_output_spec(*args, **kwargs)
        traced = traced_spec(layer.call, *args, **kwargs)  # Keras' default: trace `call`
        declared, traced = keras.tree.flatten(declared), keras.tree.flatten(traced)
        assert [(t.shape, t.dtype) for t in declared] == [(t.shape, t.dtype) for t in traced], kwargs
    # And the real outputs, in float32 whatever the policy.
    outputs = BertEncoder(CONFIG, output_attentions=True, dtype=policy)(make_inputs())
    assert outputs["sequence_output"].dtype == "float32"
    assert BertEncoder(CONFIG, output_attentions=True, dtype=policy).outputs[0].dtype == "float32"


def test_a_forward_pass_on_real_tokens_builds_its_token_indices_once():
    # Every block packs the batch the same way: the running count of real tokens (a Cumsum) and the
    # per-head gather indices are built once per pass (`token_packing.TokenPacking`), not per block.
    import tensorflow as tf

    import dataclasses

    encoder = BertEncoder(dataclasses.replace(CONFIG, num_layers=3))
    spec = {name: tf.TensorSpec([None, None], tf.int32) for name in make_inputs()}
    graph = tf.function(lambda x: encoder(x, training=False, padding="skip")).get_concrete_function(spec).graph
    types = [op.type for op in graph.get_operations()]
    assert types.count("Cumsum") == 1
    assert types.count("Range") == 3  # parts and heads of the QKV gather, heads of the context gather
    inputs = make_inputs()
    skipped = encoder(inputs, padding="skip")
    full = encoder(inputs, padding="compute")
    real = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(skipped["sequence_output"])[real],
                               np.asarray(full["sequence_output"])[real], atol=2e-5)
    np.testing.assert_allclose(skipped["pooled_output"], full["pooled_output"], atol=2e-5)


def test_the_unpacked_graph_runs_its_dense_layers_on_rows(encoder):
    """Keras' `Dense` runs a `[B, S, H]` input as a tensordot, whose reshape after the matmul kept
    TensorFlow from fusing the matmul with its bias and GELU: the unpacked graph (eager calls on
    batches without padding, `padding="compute"`, XLA) ran the GELU as separate passes, ~17% of
    a 6x384 full batch. Its dense layers now run on `[B * S, H]` rows: no tensordot, same outputs
    as the packed graph."""
    import tensorflow as tf

    signature = {name: tf.TensorSpec([None, None], tf.int32) for name in ("token_ids", "segment_ids", "padding_mask")}
    unpacked = tf.function(lambda x: encoder(x, training=False, padding="compute"))
    graph = unpacked.get_concrete_function(signature).graph
    assert not [op.name for op in graph.get_operations() if "Tensordot" in op.name]
    inputs = make_inputs()
    inputs["padding_mask"] = np.ones_like(inputs["padding_mask"])
    packed = encoder(inputs, padding="skip")
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(unpacked(inputs)[name], packed[name], atol=1e-5)
