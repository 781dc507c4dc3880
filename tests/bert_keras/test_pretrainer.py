"""BertPretrainer: heads, google-research loss, training, distribution, precision, checkpoints."""

import json
import logging
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.checkpoints import CheckpointFormatError, CheckpointMismatchError, save_pretrained
from bert_keras.checkpoints.heads import assign_pretrainer_heads, pretrainer_heads_to_canonical
from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder
from bert_keras.models import BertPretrainer

# Unequal sizes (V=99, H=32, I=37, S=13, P=3, B*P=12) so a transposed or swapped
# weight fails a shape check, and a [B, S, V] tensor is told from [B, P, V].
# No dropout: the tests compare exact values.
CONFIG = BertConfig(
    vocab_size=99, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=37,
    max_position_embeddings=40, hidden_dropout=0.0, attention_dropout=0.0,
)
B, S, P = 4, 13, 3
# For the tests that train: one small layer keeps XLA compiles and float16
# (slow on CPU) short.
SMALL = BertConfig(
    vocab_size=40, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
    max_position_embeddings=16, hidden_dropout=0.0, attention_dropout=0.0,
)


def make_batch(batch=B, seq=S, masks=P, seed=0, vocab=CONFIG.vocab_size):
    """A random batch in the pipeline's contract: `(x, y)` dicts, padding and unused mask slots."""
    rng = np.random.default_rng(seed)
    lengths = np.maximum(seq - 2 * np.arange(batch), masks + 2)
    padding_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(5, vocab, (batch, seq)).astype("int32") * padding_mask
    segment_ids = (np.arange(seq)[None, :] >= lengths[:, None] // 2).astype("int32") * padding_mask
    positions = np.stack([rng.choice(np.arange(1, n), masks, replace=False) for n in lengths])
    weights = np.ones((batch, masks), "float32")
    weights[1::2, masks - 1] = 0.0  # odd rows use one slot fewer: padding slots
    positions = (positions * weights).astype("int32")  # google-research pads positions with 0
    x = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask,
         "masked_lm_positions": positions}
    y = {"masked_lm_ids": (rng.integers(5, vocab, (batch, masks)) * weights).astype("int32"),
         "masked_lm_weights": weights,
         "next_sentence_labels": rng.integers(0, 2, (batch,)).astype("int32")}
    return x, y


def make_pretrainer(seed=0, config=CONFIG, **kwargs):
    keras.utils.set_random_seed(seed)
    return BertPretrainer(BertEncoder(config, **kwargs))


@pytest.fixture(scope="module")
def pretrainer():
    model = make_pretrainer()
    # Non-zero biases and LayerNorm parameters, so that a head that forgot
    # one of them cannot pass the numerical checks.
    rng = np.random.default_rng(1)
    for variable in model.masked_lm_head.weights + model.next_sentence_head.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.1, variable.shape).astype("float32"))
    return model


def _log_softmax(logits):
    logits = logits - logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


# ---- heads ------------------------------------------------------------------


def test_outputs_are_float32_at_masked_positions_only(pretrainer):
    x, _ = make_batch()
    outputs = pretrainer(x)
    assert set(outputs) == {"mlm_logits", "nsp_logits"}
    assert tuple(outputs["mlm_logits"].shape) == (B, P, CONFIG.vocab_size)
    assert tuple(outputs["nsp_logits"].shape) == (B, 2)
    assert outputs["mlm_logits"].dtype == "float32" and outputs["nsp_logits"].dtype == "float32"


def test_mlm_head_is_tied_to_the_embedding_variable(pretrainer):
    embeddings = pretrainer.encoder.token_embedding.embeddings
    assert pretrainer.masked_lm_head.token_embedding.embeddings is embeddings
    # No second [V, H] / [H, V] matrix anywhere, and the shared one counted once.
    big = [v for v in pretrainer.weights if CONFIG.vocab_size in tuple(v.shape) and len(v.shape) == 2]
    assert big == [embeddings]
    assert len(pretrainer.trainable_weights) == len({id(v) for v in pretrainer.trainable_weights})


def test_no_full_sequence_logits_in_the_training_graph(pretrainer):
    """No op of forward + loss + gradients outputs a [B, S, V] tensor (only [B, P, V])."""
    x, y = make_batch()

    # autograph=False: only the ops matter here, and autograph's conversion of
    # Keras internals depends on what earlier tests imported (flaky in a full run).
    @tf.function(autograph=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = pretrainer.compute_loss(x, y, pretrainer(x, training=True))
        return tape.gradient(loss, pretrainer.trainable_weights)

    graph = step.get_concrete_function(x, y).graph
    shapes = [tuple(t.shape.as_list()) for op in graph.get_operations() for t in op.outputs
              if t.shape.rank is not None]
    assert (B, P, CONFIG.vocab_size) in shapes
    full = [s for s in shapes if CONFIG.vocab_size in s and (S in s or B * S in s)]
    assert not full, f"full-sequence vocabulary tensors: {full}"


def test_heads_match_a_numpy_forward(pretrainer):
    """google-research get_masked_lm_output / get_next_sentence_output, by hand."""
    x, _ = make_batch()
    encoded = pretrainer.encoder({k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    sequence = np.asarray(encoded["sequence_output"])
    pooled = np.asarray(encoded["pooled_output"])
    mlm, nsp = pretrainer.masked_lm_head, pretrainer.next_sentence_head

    h = np.take_along_axis(sequence, x["masked_lm_positions"][:, :, None], axis=1)
    h = _gelu(h @ mlm.transform_dense.kernel.numpy() + mlm.transform_dense.bias.numpy())
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + CONFIG.layer_norm_eps)
    h = h * mlm.transform_layer_norm.gamma.numpy() + mlm.transform_layer_norm.beta.numpy()
    expected_mlm = h @ pretrainer.encoder.token_embedding.embeddings.numpy().T + mlm.output_bias.numpy()
    expected_nsp = pooled @ nsp.kernel.numpy() + nsp.bias.numpy()

    outputs = pretrainer(x)
    np.testing.assert_allclose(outputs["mlm_logits"], expected_mlm, atol=1e-4)
    np.testing.assert_allclose(outputs["nsp_logits"], expected_nsp, atol=1e-5)


# ---- loss and metrics -----------------------------------------------------------


def test_loss_and_metrics_equal_the_google_research_formula(pretrainer):
    x, y = make_batch()
    outputs = pretrainer(x)
    mlm_logits, nsp_logits = np.asarray(outputs["mlm_logits"]), np.asarray(outputs["nsp_logits"])
    w = y["masked_lm_weights"]
    mlm_ce = -np.take_along_axis(_log_softmax(mlm_logits), y["masked_lm_ids"][..., None], -1)[..., 0]
    nsp_ce = -np.take_along_axis(_log_softmax(nsp_logits), y["next_sentence_labels"][:, None], -1)[:, 0]
    mlm_loss = (w * mlm_ce).sum() / (w.sum() + 1e-5)
    nsp_loss = nsp_ce.mean()
    mlm_accuracy = (w * (mlm_logits.argmax(-1) == y["masked_lm_ids"])).sum() / w.sum()
    nsp_accuracy = (nsp_logits.argmax(-1) == y["next_sentence_labels"]).mean()
    assert 0 < w.sum() < w.size  # the padding slots are really there

    loss = pretrainer.compute_loss(x, y, outputs)
    assert loss.dtype == "float32"
    np.testing.assert_allclose(float(loss), mlm_loss + nsp_loss, rtol=1e-5)

    pretrainer.compile(optimizer="sgd")
    results = pretrainer.evaluate(x, y, batch_size=B, verbose=0, return_dict=True)
    np.testing.assert_allclose(results["loss"], mlm_loss + nsp_loss, rtol=1e-5)
    np.testing.assert_allclose(results["mlm_loss"], mlm_loss, rtol=1e-5)
    np.testing.assert_allclose(results["nsp_loss"], nsp_loss, rtol=1e-5)
    np.testing.assert_allclose(results["mlm_accuracy"], mlm_accuracy, rtol=1e-6)
    np.testing.assert_allclose(results["nsp_accuracy"], nsp_accuracy, rtol=1e-6)
    assert pretrainer.metrics_names == ["loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"]


def test_evaluate_over_batches_of_unequal_size_weighs_each_batch_by_its_examples(pretrainer):
    # mlm_loss and nsp_loss were plain means of the batches' values, while Keras weighs its `loss`
    # by each batch's examples: over batches of unequal size (an evaluation's last one) `loss` was
    # not mlm_loss + nsp_loss, and nsp_loss was not the mean over the examples.
    x, y = make_batch(batch=3)
    outputs = pretrainer(x)
    mlm_logits, nsp_logits = np.asarray(outputs["mlm_logits"]), np.asarray(outputs["nsp_logits"])
    w = y["masked_lm_weights"]
    mlm_ce = -np.take_along_axis(_log_softmax(mlm_logits), y["masked_lm_ids"][..., None], -1)[..., 0]
    nsp_ce = -np.take_along_axis(_log_softmax(nsp_logits), y["next_sentence_labels"][:, None], -1)[:, 0]
    batches = [slice(0, 2), slice(2, 3)]  # batch_size=2: two examples, then one
    mlm_of_batch = [(w[b] * mlm_ce[b]).sum() / (w[b].sum() + 1e-5) for b in batches]
    mlm_loss = (2 * mlm_of_batch[0] + mlm_of_batch[1]) / 3
    nsp_loss = nsp_ce.mean()

    pretrainer.compile(optimizer="sgd")
    results = pretrainer.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    np.testing.assert_allclose(results["mlm_loss"], mlm_loss, rtol=1e-5)
    np.testing.assert_allclose(results["nsp_loss"], nsp_loss, rtol=1e-5)
    np.testing.assert_allclose(results["loss"], mlm_loss + nsp_loss, rtol=1e-5)


def test_no_masked_tokens_gives_zero_mlm_loss_not_nan(pretrainer):
    x, y = make_batch()
    y = dict(y, masked_lm_weights=np.zeros_like(y["masked_lm_weights"]))
    outputs = pretrainer(x)
    loss = float(pretrainer.compute_loss(x, y, outputs))
    nsp_ce = -np.take_along_axis(
        _log_softmax(np.asarray(outputs["nsp_logits"])), y["next_sentence_labels"][:, None], -1
    )
    np.testing.assert_allclose(loss, nsp_ce.mean(), rtol=1e-5)


def _loss_and_gradients(model, x, y):
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x, y, model(x, training=True))
    gradients = tape.gradient(loss, model.trainable_variables)
    return float(loss), [np.asarray(tf.convert_to_tensor(g)) for g in gradients]


@pytest.mark.parametrize("skip_padding", [False, True])
def test_sparse_last_layer_gives_the_full_encoders_loss_and_gradients(pretrainer, skip_padding):
    """The last layer at [CLS] + masked positions only (the default) is the same computation."""
    x, y = make_batch(seed=4)
    dense = BertPretrainer(pretrainer.encoder, sparse_last_layer=False)
    dense.set_weights(pretrainer.get_weights())
    assert pretrainer.sparse_last_layer and not dense.sparse_last_layer
    assert [v.path for v in dense.weights] == [v.path for v in pretrainer.weights]
    loss, gradients = _loss_and_gradients(dense, x, y)
    pretrainer.encoder.skip_padding = skip_padding
    try:
        sparse_loss, sparse_gradients = _loss_and_gradients(pretrainer, x, y)
        training_logits = pretrainer(x, training=True)["mlm_logits"]
        # With skip_padding, training scores only the real slots (position > 0).
        real_slots = int((x["masked_lm_positions"] > 0).sum())
        assert tuple(training_logits.shape) == ((real_slots, CONFIG.vocab_size) if skip_padding
                                                else (B, P, CONFIG.vocab_size))
        for model in (dense, pretrainer):
            model.mlm_accuracy.reset_state()
            model.compute_metrics(x, y, model(x, training=True))
        assert float(pretrainer.mlm_accuracy.result()) == pytest.approx(float(dense.mlm_accuracy.result()))
        assert int((y["masked_lm_weights"] == 0).sum()) > 0 and real_slots < B * P
    finally:
        pretrainer.encoder.skip_padding = False
    assert sparse_loss == pytest.approx(loss, abs=1e-6)
    for full, sparse in zip(gradients, sparse_gradients):
        np.testing.assert_allclose(sparse, full, atol=1e-6)
    outputs, sparse_outputs = dense(x), pretrainer(x)
    for key in ("mlm_logits", "nsp_logits"):
        np.testing.assert_allclose(sparse_outputs[key], outputs[key], atol=1e-5)


def test_sparse_and_dense_pretrainers_share_one_weight_layout(tmp_path):
    """A `.weights.h5` or TF checkpoint of one mode restores into the other."""
    x, _ = make_batch()
    dense = make_pretrainer(seed=2)
    dense = BertPretrainer(dense.encoder, sparse_last_layer=False)
    dense.save_weights(str(tmp_path / "dense.weights.h5"))
    tf.train.Checkpoint(model=dense).write(str(tmp_path / "dense-ckpt"))
    expected = np.asarray(dense(x)["mlm_logits"])
    sparse = make_pretrainer(seed=3)
    sparse.load_weights(str(tmp_path / "dense.weights.h5"))
    np.testing.assert_allclose(sparse(x)["mlm_logits"], expected, atol=1e-5)
    restored = make_pretrainer(seed=4)
    restored(x)
    tf.train.Checkpoint(model=restored).read(str(tmp_path / "dense-ckpt")).assert_existing_objects_matched()
    np.testing.assert_allclose(restored(x)["mlm_logits"], expected, atol=1e-5)


def test_clone_model_names_the_way_to_clone_a_pretrainer():
    # clone_model failed inside Keras with "Object _EncodeForPretraining ... Please implement get_config()".
    model = make_pretrainer()
    with pytest.raises(NotImplementedError, match=r"type\(pretrainer\)\.from_config\(pretrainer\.get_config\(\)\)"):
        keras.models.clone_model(model)
    clone = type(model).from_config(model.get_config())
    assert type(clone) is BertPretrainer and clone.encoder is not model.encoder
    assert clone.masked_lm_head.token_embedding.embeddings is clone.encoder.token_embedding.embeddings
    assert [v.shape for v in clone.weights] == [v.shape for v in model.weights]
    clone.compile(optimizer="sgd")
    assert np.isfinite(clone.train_on_batch(*make_batch(), return_dict=True)["loss"])


def test_compile_with_a_loss_is_refused():
    model = make_pretrainer()
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="pretraining loss itself"):
        model.train_on_batch(*make_batch())


# ---- training -----------------------------------------------------------------


def test_learns_a_memorisable_corpus():
    """8 fixed sequences, 100 Adam steps: the loss falls and the masked tokens are learnt."""
    x, y = make_batch(batch=8, seq=12, masks=3, seed=3, vocab=SMALL.vocab_size)
    # The masked tokens are hidden behind [MASK] (id 4) in the input, as in BERT.
    rows = np.arange(8)[:, None]
    x["token_ids"][rows, x["masked_lm_positions"]] = np.where(
        y["masked_lm_weights"] > 0, 4, x["token_ids"][rows, x["masked_lm_positions"]]
    )
    model = make_pretrainer(seed=0, config=SMALL)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    first = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    # One epoch of 100 steps: far less per-step overhead than 100 epochs.
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    model.fit(data, steps_per_epoch=100, epochs=1, shuffle=False, verbose=0)
    last = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    assert last["loss"] < 0.2 * first["loss"], (first, last)
    assert last["mlm_accuracy"] >= 0.9 > first["mlm_accuracy"], (first, last)
    assert last["nsp_accuracy"] == 1.0, (first, last)


def test_one_train_step_compiles_with_xla():
    model = make_pretrainer(config=SMALL)
    model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=True)  # SGD: a smaller graph to compile
    x, y = make_batch(batch=8, vocab=SMALL.vocab_size)
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0).history  # 2 steps
    assert model.jit_compile is True
    assert all(np.isfinite(v[-1]) for v in history.values()), history


def test_mixed_float16_trains_with_loss_scaling():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        model = make_pretrainer(config=SMALL)
        model.compile(optimizer=keras.optimizers.SGD(0.1))
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert model.masked_lm_head.transform_dense.compute_dtype == "float16"
        x, y = make_batch(batch=8, vocab=SMALL.vocab_size)
        outputs = model(x)
        assert outputs["mlm_logits"].dtype == "float32" and outputs["nsp_logits"].dtype == "float32"
        history = model.fit(x, y, batch_size=4, epochs=2, verbose=0).history
        assert all(np.isfinite(v).all() for v in history.values()), history
        assert model.encoder.token_embedding.embeddings.dtype == "float32"
    finally:
        keras.config.set_dtype_policy(previous)
    # A per-encoder policy reaches the pretrainer too, so compile scales the loss.
    per_model = BertPretrainer(BertEncoder(SMALL, dtype="mixed_float16"))
    per_model.compile(optimizer=keras.optimizers.SGD(0.1))
    assert isinstance(per_model.optimizer, keras.optimizers.LossScaleOptimizer)


# The replicated run needs two CPU devices, which must be configured before
# TensorFlow initialises its devices: a child process keeps that away from
# every other test.
_MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import numpy as np
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.models import BertPretrainer

    config = BertConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2,
                        intermediate_size=24, max_position_embeddings=16,
                        hidden_dropout=0.0, attention_dropout=0.0)
    B, S, P, STEPS = 8, 12, 4, 5
    rng = np.random.default_rng(0)
    n = B * STEPS
    x = {"token_ids": rng.integers(5, 50, (n, S)).astype("int32"),
         "segment_ids": (np.arange(S)[None] >= S // 2).repeat(n, 0).astype("int32"),
         "padding_mask": np.ones((n, S), "int32"),
         "masked_lm_positions": rng.integers(1, S, (n, P)).astype("int32")}
    # Uneven on purpose: each batch's first half (replica 0) has 4 masked
    # tokens per row, the second half 1, so averaging per-replica losses
    # would differ from google-research's global weighted mean.
    weights = np.zeros((n, P), "float32")
    for i in range(n):
        weights[i, : (4 if i % B < B // 2 else 1)] = 1
    y = {"masked_lm_ids": rng.integers(5, 50, (n, P)).astype("int32"),
         "masked_lm_weights": weights,
         "next_sentence_labels": rng.integers(0, 2, (n,)).astype("int32")}

    def run(strategy, initial):
        with strategy.scope():
            model = BertPretrainer(BertEncoder(config))
            if initial is not None:
                model.set_weights(initial)
            model.compile(optimizer=keras.optimizers.SGD(0.5))
        start = model.get_weights()
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(B, drop_remainder=True)
        history = model.fit(data, epochs=STEPS, steps_per_epoch=1, shuffle=False, verbose=0).history
        return start, history, model.get_weights()

    keras.utils.set_random_seed(0)
    start, single, end_single = run(tf.distribute.get_strategy(), None)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    _, replicated, end_replicated = run(mirrored, start)
    print("RESULT", json.dumps({
        "replicas": mirrored.num_replicas_in_sync,
        "single": single,
        "mirrored": replicated,
        "max_weight_diff": max(float(np.abs(a - b).max()) for a, b in zip(end_single, end_replicated)),
        "max_weight_change": max(float(np.abs(a - b).max()) for a, b in zip(start, end_single)),
    }))
    """
)


def _run_mirrored_script(tmp_path, script_text):
    script = tmp_path / "mirrored.py"
    script.write_text(script_text)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_mirrored_strategy_follows_the_single_device_trajectory(tmp_path):
    result = _run_mirrored_script(tmp_path, _MIRRORED_SCRIPT)
    assert result["replicas"] == 2
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
        np.testing.assert_allclose(result["mirrored"][key], result["single"][key], rtol=1e-4, err_msg=key)
    assert result["max_weight_change"] > 1e-2  # the 5 steps did move the weights...
    assert result["max_weight_diff"] < 1e-5  # ...identically



@pytest.mark.slow
def test_mirrored_fit_starts_on_a_batch_the_replicas_split_unevenly(tmp_path):
    # Batches of 7 split 4 / 3 over two replicas: Keras 3.15 built the compiled metrics from the
    # first batch averaged over the replicas, and `fit(dataset)` stopped before its first step with
    # "Inputs to operation AddN of type AddN must have the same size and shape".
    script = _MIRRORED_SCRIPT.replace("B, S, P, STEPS = 8, 12, 4, 5", "B, S, P, STEPS = 7, 12, 4, 5")
    assert script != _MIRRORED_SCRIPT
    result = _run_mirrored_script(tmp_path, script)
    assert result["replicas"] == 2
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
        np.testing.assert_allclose(result["mirrored"][key], result["single"][key], rtol=1e-4, err_msg=key)
    assert result["max_weight_change"] > 1e-2
    assert result["max_weight_diff"] < 1e-5  # the same steps as on one device


_UNEVEN_SCRIPT = textwrap.dedent(
    """
    import json
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import numpy as np
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.models import BertPretrainer

    config = BertConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=24,
                        max_position_embeddings=16, hidden_dropout=0.0, attention_dropout=0.0)
    n, S, P = 9, 12, 4  # batches of 4, 4 and 1: split 2 / 2 and 1 / 0 over two replicas
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(5, 50, (n, S)).astype("int32"),
         "segment_ids": (np.arange(S)[None] >= S // 2).repeat(n, 0).astype("int32"),
         "padding_mask": np.ones((n, S), "int32"),
         "masked_lm_positions": rng.integers(1, S, (n, P)).astype("int32")}
    weights = (np.arange(P)[None] <= (np.arange(n) % 4)[:, None]).astype("float32")
    y = {"masked_lm_ids": rng.integers(5, 50, (n, P)).astype("int32"), "masked_lm_weights": weights,
         "next_sentence_labels": rng.integers(0, 2, (n,)).astype("int32")}
    result, initial = {}, None
    for name, strategy in (("single", tf.distribute.get_strategy()),
                           ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = BertPretrainer(BertEncoder(config))
            if initial is not None:
                model.set_weights(initial)
            model.compile(optimizer=keras.optimizers.SGD(0.5))
        initial = initial or model.get_weights()
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
        result[name] = {"evaluate": model.evaluate(data, verbose=0, return_dict=True),
                        "fit": model.fit(data, epochs=2, verbose=0, shuffle=False).history,
                        "end": model.get_weights()[0].tolist()}
    print("RESULT", json.dumps(result))
    """
)


def test_mirrored_loss_is_the_global_batchs_when_the_replicas_split_a_batch_unevenly(tmp_path):
    # The replicas' losses were weighed by their examples as shares times the replica count: a
    # last batch of 1 on two replicas reported loss 5.12 for 4.61 (evaluate; fit's epochs too).
    # The gradient was right all along; the reported loss, mlm_loss and nsp_loss are now too.
    result = _run_mirrored_script(tmp_path, _UNEVEN_SCRIPT)
    single, mirrored = result["single"], result["mirrored"]
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
        np.testing.assert_allclose(mirrored["evaluate"][key], single["evaluate"][key], rtol=1e-5, err_msg=key)
        np.testing.assert_allclose(mirrored["fit"][key], single["fit"][key], rtol=1e-5, err_msg=key)
    np.testing.assert_allclose(single["evaluate"]["loss"],
                               single["evaluate"]["mlm_loss"] + single["evaluate"]["nsp_loss"], rtol=1e-6)
    np.testing.assert_allclose(mirrored["end"], single["end"], atol=1e-5)

# ---- saving and checkpoints ---------------------------------------------------------


def test_keras_file_round_trip(pretrainer, tmp_path):
    x, y = make_batch()
    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertPretrainer)
    for key, value in pretrainer(x).items():
        np.testing.assert_array_equal(loaded(x)[key], value)
    assert loaded.masked_lm_head.token_embedding.embeddings is loaded.encoder.token_embedding.embeddings
    loaded.compile(optimizer="sgd")
    assert np.isfinite(loaded.train_on_batch(x, y, return_dict=True)["loss"])


def test_heads_canonical_round_trip(pretrainer):
    heads = pretrainer_heads_to_canonical(pretrainer)
    assert sorted(heads) == [
        "cls/predictions/output_bias",
        "cls/predictions/transform/LayerNorm/beta",
        "cls/predictions/transform/LayerNorm/gamma",
        "cls/predictions/transform/dense/bias",
        "cls/predictions/transform/dense/kernel",
        "cls/seq_relationship/output_bias",
        "cls/seq_relationship/output_weights",
    ]
    # TF1 stores the NSP kernel [out, in].
    np.testing.assert_array_equal(
        heads["cls/seq_relationship/output_weights"], pretrainer.next_sentence_head.kernel.numpy().T
    )
    other = make_pretrainer(seed=5)
    assert assign_pretrainer_heads(other, heads) == {"missing": [], "unexpected": []}
    for name, value in pretrainer_heads_to_canonical(other).items():
        np.testing.assert_array_equal(value, heads[name], err_msg=name)

    bad = dict(heads, **{"cls/seq_relationship/output_weights": heads["cls/seq_relationship/output_weights"].T})
    with pytest.raises(CheckpointMismatchError, match="output_weights"):
        assign_pretrainer_heads(other, bad)
    partial = {k: v for k, v in heads.items() if k.startswith("cls/predictions/")}
    with pytest.raises(CheckpointMismatchError, match="missing"):
        assign_pretrainer_heads(other, partial)
    report = assign_pretrainer_heads(other, partial, strict=False)
    assert report["missing"] == ["cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]


@pytest.fixture(scope="module")
def hf_pretraining_dir(tmp_path_factory):
    """A random tiny `transformers.BertForPreTraining` saved with `save_pretrained`, and the model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf_config = transformers.BertConfig(
        vocab_size=CONFIG.vocab_size, hidden_size=CONFIG.hidden_size,
        num_hidden_layers=CONFIG.num_layers, num_attention_heads=CONFIG.num_heads,
        intermediate_size=CONFIG.intermediate_size,
        max_position_embeddings=CONFIG.max_position_embeddings, hidden_act="gelu",
    )
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(hf_config).eval()
    with torch.no_grad():  # move LayerNorms and zero biases off their initial values
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    directory = tmp_path_factory.mktemp("hf_pretraining")
    model.save_pretrained(directory)
    return str(directory), model


def _hf_logits(model, x):
    import torch

    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
        )
    mlm = np.take_along_axis(out.prediction_logits.numpy(), x["masked_lm_positions"][:, :, None], axis=1)
    return mlm, out.seq_relationship_logits.numpy()


def test_hf_bert_for_pretraining_parity(hf_pretraining_dir):
    directory, hf_model = hf_pretraining_dir
    loaded = BertPretrainer.from_pretrained("hf:" + directory, strict=True)
    x, _ = make_batch()
    hf_mlm, hf_nsp = _hf_logits(hf_model, x)
    outputs = loaded(x)
    assert np.abs(np.asarray(outputs["mlm_logits"]) - hf_mlm).max() <= 1e-4
    assert np.abs(np.asarray(outputs["nsp_logits"]) - hf_nsp).max() <= 1e-4


def test_save_pretrained_with_heads_round_trips_through_hf(hf_pretraining_dir, tmp_path):
    transformers = pytest.importorskip("transformers")
    directory, hf_model = hf_pretraining_dir
    loaded = BertPretrainer.from_pretrained("hf:" + directory)
    out_dir = str(tmp_path / "resaved")
    save_pretrained(loaded.encoder, "hf:" + out_dir, heads=pretrainer_heads_to_canonical(loaded))

    reloaded_hf = transformers.BertForPreTraining.from_pretrained(out_dir).eval()
    x, _ = make_batch(seed=4)
    for ours, theirs in zip(_hf_logits(reloaded_hf, x), _hf_logits(hf_model, x)):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    again = BertPretrainer.from_pretrained("hf:" + out_dir, strict=True)
    for key, value in loaded(x).items():
        np.testing.assert_array_equal(again(x)[key], value)


def test_a_pretraining_output_directory_loads_as_its_encoder(tmp_path, tiny_vocab_file):
    """`from_pretrained(run_dir)` / `--init run_dir` on what `bert-keras pretrain` wrote answered
    "cannot tell the weight format of directory", though the accepted forms list "PATH.keras ... or
    a directory of one of these": the directory is its `encoder.keras` (heads and vocabulary too)."""
    from bert_keras.tasks import TextClassifier
    from bert_keras.tasks.pretrainer import save_outputs

    trained = make_pretrainer(seed=4)
    trained.masked_lm_head.output_bias.assign(np.linspace(-1, 1, trained.masked_lm_head.output_bias.shape[0]))
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)  # as a run leaves it
    save_outputs(trained, str(run_dir), vocab_file=tiny_vocab_file)
    again = BertPretrainer.from_pretrained(str(run_dir), strict=True)
    x, _ = make_batch(seed=7)
    for key, value in trained(x).items():
        np.testing.assert_allclose(again(x)[key], value, atol=1e-6)
    classifier = TextClassifier.from_pretrained(str(run_dir), num_classes=2)
    np.testing.assert_array_equal(classifier.encoder.token_embedding.embeddings.numpy(),
                                  trained.encoder.token_embedding.embeddings.numpy())
    assert classifier.predict(["tok7 tok8"]).shape == (1, 2)


def test_checkpoint_without_heads_starts_them_fresh(tmp_path, caplog):
    encoder = make_pretrainer(seed=2).encoder
    save_pretrained(encoder, "hf:" + str(tmp_path / "encoder_only"))
    spec = "hf:" + str(tmp_path / "encoder_only")
    with caplog.at_level(logging.WARNING, logger="bert_keras.models.pretrainer"):
        loaded = BertPretrainer.from_pretrained(spec)
    assert "freshly initialized" in caplog.text
    np.testing.assert_array_equal(
        loaded.encoder.token_embedding.embeddings.numpy(), encoder.token_embedding.embeddings.numpy()
    )
    np.testing.assert_array_equal(loaded.masked_lm_head.output_bias.numpy(), 0.0)
    with pytest.raises(CheckpointMismatchError, match="missing"):
        BertPretrainer.from_pretrained(spec, strict=True)


def test_a_keras_encoder_file_keeps_its_pretraining_heads_for_a_second_phase(tmp_path, caplog):
    """`bert-keras pretrain` wrote `encoder.keras` alone: a second phase (`--init run/encoder.keras`
    at a longer sequence length, BERT's recipe) started both heads fresh. The heads now sit in
    `encoder.heads.npz` beside it, and come back; a save without heads removes the stale file."""
    from bert_keras.tasks.pretrainer import save_outputs

    trained = make_pretrainer(seed=3)
    trained.masked_lm_head.output_bias.assign(np.linspace(-1, 1, trained.masked_lm_head.output_bias.shape[0]))
    save_outputs(trained, str(tmp_path))
    assert os.path.isfile(tmp_path / "encoder.heads.npz")
    with caplog.at_level(logging.WARNING, logger="bert_keras.models.pretrainer"):
        phase_two = BertPretrainer.from_pretrained(str(tmp_path / "encoder.keras"), strict=True)
    assert "freshly initialized" not in caplog.text
    x, _ = make_batch(seed=6)
    for key, value in trained(x).items():
        np.testing.assert_allclose(phase_two(x)[key], value, atol=1e-6)

    # Converted elsewhere, the heads go along (an HF BertForPreTraining directory).
    from bert_keras.checkpoints import read_pretrained
    from bert_keras.checkpoints.loading import convert

    convert(str(tmp_path / "encoder.keras"), "hf:" + str(tmp_path / "hf"))
    _, weights, _ = read_pretrained("hf:" + str(tmp_path / "hf"))
    np.testing.assert_array_equal(weights["cls/predictions/output_bias"], trained.masked_lm_head.output_bias.numpy())

    save_pretrained(trained.encoder, str(tmp_path / "encoder.keras"))  # the encoder alone, replaced
    assert not os.path.exists(tmp_path / "encoder.heads.npz")
    (tmp_path / "other.heads.npz").write_bytes(b"not a zip")
    save_pretrained(trained.encoder, str(tmp_path / "other.keras"), heads={})
    assert not os.path.exists(tmp_path / "other.heads.npz")
    save_pretrained(trained.encoder, str(tmp_path / "third.keras"))
    (tmp_path / "third.heads.npz").write_bytes(b"not a zip")
    with pytest.raises(CheckpointFormatError, match=r"third.heads.npz: the pretraining heads .* cannot be read"):
        BertPretrainer.from_pretrained(str(tmp_path / "third.keras"))


def test_pretrain_reads_its_shapes_from_the_records(tmp_path, tiny_vocab_file, capsys):
    """`create-pretraining-data --seq-length 32 --max-predictions 5`, then `pretrain --data` without the
    two flags (docs/korean.md's commands) stopped with "The records were written with ... but
    max_seq_length 128, max_predictions_per_seq 20 was asked for": they are the records' own now."""
    import json

    from bert_keras.cli.main import main

    rng = np.random.default_rng(0)
    documents = [[" ".join(f"tok{i}" for i in rng.integers(5, 99, 12)) for _ in range(4)] for _ in range(12)]
    (tmp_path / "corpus.txt").write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    assert main(["create-pretraining-data", "--input", str(tmp_path / "corpus.txt"), "--vocab", tiny_vocab_file,
                 "--output-prefix", str(tmp_path / "pt"), "--seq-length", "32", "--max-predictions", "5"]) == 0
    records = str(tmp_path / "pt-*.tfrecord")
    capsys.readouterr()
    assert main(["pretrain", "--data", records, "--vocab", tiny_vocab_file, "--config", "tiny", "--steps", "1",
                 "--batch-size", "4", "--output-dir", str(tmp_path / "run")]) == 0
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as f:
        settings = json.load(f)["settings"]
    assert (settings["seq_length"], settings["max_predictions"]) == (32, 5)
    # Given and different, they still stop the run, quoting the records' file.
    assert main(["pretrain", "--data", records, "--vocab", tiny_vocab_file, "--config", "tiny", "--steps", "1",
                 "--max-predictions", "20", "--output-dir", str(tmp_path / "other")]) == 2
    assert '"max_predictions_per_seq": 5 (' in capsys.readouterr().err

    from bert_keras.tasks.pretrainer import data_shapes

    assert data_shapes(records, None, None) == (32, 5)
    assert data_shapes(records, 32, None) == (32, 5) and data_shapes(records, 64, 7) == (64, 7)
    assert data_shapes(None, None, None) == (128, 20)  # a corpus (dynamic masking)


@pytest.mark.parametrize("name", ["config.json", "vocab.txt"])
def test_a_pretraining_runs_config_and_vocabulary_are_replaced_whole_or_not_at_all(tmp_path, tiny_vocab_file,
                                                                                   monkeypatch, name):
    """`save_outputs` wrote config.json (`BertConfig.to_json(path)`) and vocab.txt (`shutil.copyfile`) in
    place: a run killed there left a truncated file beside a whole encoder.keras → atomic writes; a
    kill before the rename (here: at the fsync before it) leaves the previous file as it was."""
    from bert_keras import checkpoints
    from bert_keras.tasks.pretrainer import save_outputs
    from pipelines import atomic_writes

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text('{"previous": true}\n')
    (run_dir / "vocab.txt").write_text("[PAD]\nprevious\n")
    monkeypatch.setattr(checkpoints, "save_pretrained", lambda *args, **kwargs: None)
    fsync = atomic_writes.fsync_file

    def killed_at(path):
        if os.path.basename(path).startswith(f".{name}."):
            raise KeyboardInterrupt("killed before the rename")
        fsync(path)

    monkeypatch.setattr(atomic_writes, "fsync_file", killed_at)
    with pytest.raises(KeyboardInterrupt):
        save_outputs(make_pretrainer(seed=1), str(run_dir), vocab_file=tiny_vocab_file)
    previous = {"config.json": '{"previous": true}\n', "vocab.txt": "[PAD]\nprevious\n"}[name]
    assert (run_dir / name).read_text() == previous
    assert sorted(os.listdir(run_dir)) == ["config.json", "vocab.txt"]  # no temporary left
    monkeypatch.setattr(atomic_writes, "fsync_file", fsync)
    save_outputs(make_pretrainer(seed=1), str(run_dir), vocab_file=tiny_vocab_file)
    assert json.loads((run_dir / "config.json").read_text())["hidden_size"] > 0
    assert (run_dir / "vocab.txt").read_bytes() == open(tiny_vocab_file, "rb").read()
