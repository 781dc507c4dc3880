"""bert_keras.training: LR schedule, AdamW decay exclusion and clipping, strategies, precision, the fit loop, the CLI."""

import json
import logging
import os

import numpy as np
import pytest

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_keras.cli.main import main  # noqa: E402
from bert_keras.encoder import BertEncoder  # noqa: E402
from bert_keras.models import BertPretrainer  # noqa: E402
from bert_keras.training import (  # noqa: E402
    StrategyError,
    WarmupLinearDecay,
    check_tf_config,
    choose_policy,
    create_optimizer,
    get_strategy,
    resumed_step,
    run_pretraining,
)
from bert_keras.training.loop import resolve_jit_compile  # noqa: E402
from bert_keras.loss_scaling import with_loss_scaling  # noqa: E402

BATCH, SEQ, PREDICTIONS = 4, 12, 3


@pytest.fixture
def one_layer_config(tiny_config):
    """`tiny_config` with one layer: tracing a training step costs seconds per layer on CPU."""
    import dataclasses

    return dataclasses.replace(tiny_config, num_layers=1)


def synthetic_dataset(vocab_size, batch=BATCH, seq=SEQ, predictions=PREDICTIONS):
    """An infinite, deterministic stream of (x, y) pretraining batches (batch i depends on i only)."""

    def batch_number(i):
        seed = tf.stack([i, tf.constant(7, tf.int64)])
        uniform = tf.random.stateless_uniform
        x = {
            "token_ids": uniform([batch, seq], seed, 0, vocab_size, tf.int32),
            "segment_ids": tf.concat([tf.zeros([batch, seq // 2], tf.int32), tf.ones([batch, seq - seq // 2], tf.int32)], 1),
            "padding_mask": tf.ones([batch, seq], tf.int32),
            "masked_lm_positions": uniform([batch, predictions], seed + 1, 1, seq, tf.int32),
        }
        y = {
            "masked_lm_ids": uniform([batch, predictions], seed + 2, 0, vocab_size, tf.int32),
            "masked_lm_weights": tf.ones([batch, predictions], tf.float32),
            "next_sentence_labels": uniform([batch], seed + 3, 0, 2, tf.int32),
        }
        return x, y

    return tf.data.Dataset.counter().map(batch_number)


# ---- learning-rate schedule ------------------------------------------------------


def test_schedule_warms_up_linearly_then_decays_to_zero():
    schedule = WarmupLinearDecay(1e-3, num_train_steps=110, num_warmup_steps=10)
    values = {step: float(schedule(step)) for step in (0, 1, 5, 10, 60, 109, 110, 200)}
    assert values[0] == 0.0
    assert values[1] == pytest.approx(1e-4)
    assert values[5] == pytest.approx(5e-4)
    assert values[10] == pytest.approx(1e-3)  # the peak at the end of warmup
    assert values[60] == pytest.approx(5e-4)  # halfway down
    assert values[109] == pytest.approx(1e-5)
    assert values[110] == 0.0 and values[200] == 0.0


def test_schedule_without_warmup_starts_at_peak_and_round_trips():
    schedule = WarmupLinearDecay(2e-5, num_train_steps=100, num_warmup_steps=0)
    assert float(schedule(0)) == pytest.approx(2e-5)
    assert float(schedule(50)) == pytest.approx(1e-5)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert isinstance(restored, WarmupLinearDecay) and restored.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="num_warmup_steps"):
        WarmupLinearDecay(1e-4, num_train_steps=10, num_warmup_steps=11)


def test_optimizer_serialises_with_its_schedule_and_exclusions():
    optimizer = create_optimizer(num_train_steps=100, num_warmup_steps=10)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored).__name__ == "BertAdamW"
    assert restored.exclude_from_weight_decay_paths == ("LayerNorm", "layer_norm", "bias")
    assert restored.global_clipnorm == 1.0 and restored.epsilon == 1e-6
    assert isinstance(restored._learning_rate, WarmupLinearDecay)


# ---- weight decay and clipping -------------------------------------------------------


def test_weight_decay_skips_layer_norm_and_bias_but_decays_kernels(tiny_config):
    """Zero gradients: Adam moves nothing, so any change is weight decay alone."""
    model = BertPretrainer(BertEncoder(tiny_config))
    optimizer = create_optimizer(learning_rate=0.5, num_train_steps=10, num_warmup_steps=0, weight_decay=0.1)
    variables = model.trainable_variables
    before = [v.numpy().copy() for v in variables]
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in variables])

    decayed, kept = [], []
    for variable, old in zip(variables, before):
        new = variable.numpy()
        if np.allclose(new, old):
            kept.append(variable.path)
        else:
            np.testing.assert_allclose(new, old * (1 - 0.5 * 0.1), rtol=1e-6)  # lr * wd, decoupled
            decayed.append(variable.path)
    layer_norms = [p for p in kept if "layer_norm" in p]
    assert layer_norms and all(p.endswith(("gamma", "beta")) for p in layer_norms)
    # Every LayerNorm and bias variable (including the MLM head's) is kept; nothing else is.
    assert sorted(kept) == sorted(p for p in map(lambda v: v.path, variables) if "layer_norm" in p or "bias" in p)
    assert any(p.endswith("kernel") for p in decayed) and any("embeddings" in p for p in decayed)


def test_gradients_are_clipped_by_global_norm():
    """One Adam step on g = [3, 4] (norm 5): with clipnorm=1 the update sees [0.6, 0.8].

    The first Adam step is lr * g / (|g| + eps) per element (bias corrected, epsilon on the
    corrected sqrt(v_hat), as torch); a large epsilon makes it depend on |g|.
    """
    gradient = np.array([3.0, 4.0], "float32")

    def first_step(clipnorm):
        variable = keras.Variable(np.zeros(2, "float32"), name="kernel")
        optimizer = create_optimizer(learning_rate=1.0, num_train_steps=10, num_warmup_steps=0,
                                     weight_decay=0.0, epsilon=1.0, clipnorm=clipnorm)
        optimizer.apply_gradients([(tf.constant(gradient), variable)])
        return -variable.numpy()

    def expected(g, epsilon=1.0):
        return g / (np.abs(g) + epsilon)

    np.testing.assert_allclose(first_step(1.0), expected(gradient / 5.0), rtol=1e-5)
    np.testing.assert_allclose(first_step(None), expected(gradient), rtol=1e-5)


def test_fused_adam_update_equals_keras_adamw_step_by_step():
    """BertAdamW's one-kernel update and one-pass decay follow `keras.optimizers.AdamW` (dense, sparse)."""
    from bert_keras.training.optimizer import BertAdamW

    def train(fused):
        rng = np.random.default_rng(0)
        variables = [keras.Variable(rng.normal(size=shape).astype("float32"), name=name)
                     for shape, name in [((50, 8), "embeddings"), ((8,), "bias"), ((8,), "gamma")]]
        optimizer = create_optimizer(learning_rate=1e-2, num_train_steps=20, num_warmup_steps=2,
                                     bias_corrected_epsilon=False)  # Keras' epsilon rule
        if not fused:  # Keras' own element-wise update and weight decay
            optimizer.update_step = lambda g, v, lr: keras.optimizers.AdamW.update_step(optimizer, g, v, lr)
            optimizer._apply_weight_decay = lambda vs: keras.optimizers.AdamW._apply_weight_decay(optimizer, vs)
        for step in range(5):
            step_rng = np.random.default_rng(10 + step)
            gradients = [tf.constant(step_rng.normal(size=v.shape).astype("float32")) for v in variables]
            gradients[0] = tf.IndexedSlices(  # an embedding lookup's gradient
                tf.constant(step_rng.normal(size=(3, 8)).astype("float32")), tf.constant([1, 7, 7]),
                tf.constant([50, 8]))
            optimizer.apply(gradients, variables)
        return [v.numpy() for v in variables], optimizer

    fused, optimizer = train(True)
    reference, _ = train(False)
    assert isinstance(optimizer, BertAdamW) and int(optimizer.iterations) == 5
    for ours, theirs in zip(fused, reference):
        np.testing.assert_allclose(ours, theirs, atol=2e-6)
    assert not np.allclose(fused[0], np.random.default_rng(0).normal(size=(50, 8)))


def test_default_update_follows_torch_adamw_and_hf_schedule_step_by_step():
    """The default BertAdamW step is `torch.optim.AdamW` + HF's linear warmup schedule.

    Gradients of 1e-6..1e-4 make epsilon (1e-6) matter: torch adds it to the bias-corrected
    sqrt(v_hat), Keras to sqrt(v) (effectively 1 / sqrt(1 - beta_2^t) times larger). The default
    follows torch (an embedding's sparse gradient as the dense one); Keras' rule measurably does not.
    """
    import torch
    from transformers import get_linear_schedule_with_warmup

    shapes = {"embeddings": (50, 8), "kernel": (8, 4), "bias": (4,)}
    start = {name: np.random.default_rng(1).normal(size=shape).astype("float32") for name, shape in shapes.items()}
    rng = np.random.default_rng(2)
    steps = [{name: (rng.normal(size=shape) * 10.0 ** rng.uniform(-6, -4, size=shape)).astype("float32")
              for name, shape in shapes.items()} for _ in range(12)]
    for gradients in steps:  # an embedding lookup touches a few rows
        gradients["embeddings"][rng.permutation(50)[:44]] = 0.0

    def ours(**rule):
        variables = {name: keras.Variable(value, name=name) for name, value in start.items()}
        optimizer = create_optimizer(learning_rate=1e-2, num_train_steps=12, num_warmup_steps=2,
                                     weight_decay=0.01, clipnorm=None, **rule)
        for gradients in steps:
            rows = np.flatnonzero(np.abs(gradients["embeddings"]).sum(-1))
            sparse = tf.IndexedSlices(tf.constant(gradients["embeddings"][rows]), tf.constant(rows),
                                      tf.constant(shapes["embeddings"]))
            optimizer.apply([sparse, tf.constant(gradients["kernel"]), tf.constant(gradients["bias"])],
                            [variables["embeddings"], variables["kernel"], variables["bias"]])
        return {name: v.numpy() for name, v in variables.items()}

    parameters = {name: torch.nn.Parameter(torch.tensor(value)) for name, value in start.items()}
    optimizer = torch.optim.AdamW(
        [{"params": [parameters["embeddings"], parameters["kernel"]], "weight_decay": 0.01},
         {"params": [parameters["bias"]], "weight_decay": 0.0}], lr=1e-2, betas=(0.9, 0.999), eps=1e-6)
    schedule = get_linear_schedule_with_warmup(optimizer, 2, 12)
    for gradients in steps:
        for name, parameter in parameters.items():
            parameter.grad = torch.tensor(gradients[name])
        optimizer.step()
        schedule.step()
    theirs = {name: p.detach().numpy() for name, p in parameters.items()}

    default, keras_rule = ours(), ours(bias_corrected_epsilon=False)
    for name in shapes:
        moved = np.abs(theirs[name] - start[name]).max()
        assert moved > 1e-3
        np.testing.assert_allclose(default[name], theirs[name], atol=1e-4 * moved)
        assert np.abs(keras_rule[name] - theirs[name]).max() > 0.05 * moved  # Keras' rule moves less early


def test_an_embedding_gradient_is_clipped_as_rows_like_the_dense_gradient():
    """An embedding's IndexedSlices gradient (duplicate rows included) is clipped by the global norm
    without densifying it: variables and moments as when the same gradient comes dense."""

    def train(dense):
        rng = np.random.default_rng(0)
        variables = [keras.Variable(rng.normal(size=shape).astype("float32"), name=name)
                     for shape, name in [((50, 8), "embeddings"), ((8, 4), "kernel"), ((4,), "bias")]]
        optimizer = create_optimizer(learning_rate=1e-2, num_train_steps=20, num_warmup_steps=2)
        for step in range(8):
            step_rng = np.random.default_rng(10 + step)
            indices = step_rng.integers(0, 10 + 5 * step, size=6)  # repeats, and new rows every step
            sparse = tf.IndexedSlices(tf.constant(3 * step_rng.normal(size=(6, 8)).astype("float32")),
                                      tf.constant(indices), tf.constant([50, 8]))
            gradients = [tf.convert_to_tensor(sparse) if dense else sparse] + [
                tf.constant(step_rng.normal(size=v.shape).astype("float32")) for v in variables[1:]]
            optimizer.apply(gradients, variables)
        return [v.numpy() for v in variables] + [optimizer._momentums[0].numpy(), optimizer._velocities[0].numpy()]

    for ours, reference in zip(train(dense=False), train(dense=True)):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm", [0.5, 40.0, float("inf")])
def test_clipping_sparse_gradients_follows_keras_below_above_and_at_a_non_finite_norm(norm):
    """Compiled as in a train step, and under XLA (where the rows are densified first), the scale
    is Keras' clip_by_global_norm of the dense gradient: 1 below the limit, 1 / norm above it, NaN
    for a non-finite norm."""

    def clipped(xla=None):
        optimizer = create_optimizer(learning_rate=1e-2, num_train_steps=20, num_warmup_steps=2)
        values = np.zeros((2, 4), "float32")
        values[0, 0] = values[1, 0] = norm / 2  # one row, twice: the dense row's norm is `norm`
        sparse = tf.IndexedSlices(tf.constant(values), tf.constant([3, 3]), tf.constant([10, 4]))
        if xla is None:
            return tf.convert_to_tensor(optimizer._clip_gradients([sparse])[0]).numpy()
        function = tf.function(lambda: tf.convert_to_tensor(optimizer._clip_gradients([sparse])[0]),
                               jit_compile=xla)
        return function().numpy()

    expected = keras.optimizers.AdamW(global_clipnorm=1.0)._clip_gradients(
        [tf.convert_to_tensor(tf.IndexedSlices(tf.constant([[norm / 2, 0, 0, 0]] * 2, "float32"),
                                               tf.constant([3, 3]), tf.constant([10, 4])))])[0].numpy()
    for got in (clipped(), clipped(xla=False), clipped(xla=True)):
        if np.isfinite(norm):
            np.testing.assert_allclose(got, expected, rtol=1e-6)
        else:  # the rows a batch touched are NaN (and every dense gradient): the step is visibly lost
            assert np.isnan(got[3]).all() and np.isnan(expected).all()


@pytest.mark.parametrize("norm", [0.5, 1.0, 40.0, float("nan")])
def test_dense_gradients_beside_sparse_ones_are_clipped_as_keras_clips_them(norm):
    """A dense gradient beside an embedding's rows: multiplied only when the scale is not exactly 1,
    the result is Keras' clip_by_global_norm of both, eagerly and in a traced step, at a norm
    below, at and above the limit, and NaN."""
    dense_values = np.array([[norm * 0.6, norm * 0.8]], "float32")  # the whole norm in the dense one
    sparse = lambda: tf.IndexedSlices(tf.zeros((1, 2)), tf.constant([1]), tf.constant([3, 2]))
    optimizer = create_optimizer(learning_rate=1e-2, num_train_steps=20, num_warmup_steps=2)
    expected = keras.optimizers.AdamW(global_clipnorm=1.0)._clip_gradients(
        [tf.convert_to_tensor(sparse()), tf.constant(dense_values)])
    given = tf.constant(dense_values)
    eager = optimizer._clip_gradients([sparse(), given])
    traced = tf.function(lambda: [tf.convert_to_tensor(g) for g in
                                  optimizer._clip_gradients([sparse(), tf.constant(dense_values)])])()
    for got in (eager, traced):
        rows = tf.convert_to_tensor(got[0]).numpy()
        if np.isnan(norm):  # only the touched row is NaN among the slices (see the test above)
            rows, reference = rows[1], expected[0].numpy()[1]
        else:
            reference = expected[0].numpy()
        np.testing.assert_allclose(rows, reference, rtol=1e-6)
        np.testing.assert_allclose(got[1].numpy(), expected[1].numpy(), rtol=1e-6)
    if norm <= 1.0:  # unclipped: the gradient itself, no pass over it multiplying by 1
        assert eager[1] is given


# ---- strategies, precision, XLA -----------------------------------------------------------


def test_multiworker_without_tf_config_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(StrategyError, match="needs the TF_CONFIG environment variable"):
        get_strategy("multiworker")


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ('{"task": {"type": "worker", "index": 0}}', "no cluster.worker"),
    ('{"cluster": {"worker": ["localhost:1"]}}', "no task.type"),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 3}}', "not in cluster.worker"),
])
def test_invalid_tf_config_is_named(text, message):
    with pytest.raises(StrategyError, match=message):
        check_tf_config({"TF_CONFIG": text})


def test_default_and_auto_strategies_on_this_machine():
    assert get_strategy("default").num_replicas_in_sync == 1
    assert get_strategy("auto").num_replicas_in_sync >= 1
    with pytest.raises(StrategyError, match="unknown strategy"):
        get_strategy("horovod")


def test_auto_strategy_inside_a_strategys_scope_is_that_strategy(monkeypatch):
    # On a machine of several GPUs, "auto" (the default of Pretrainer.pretrain) made a second
    # MirroredStrategy inside the caller's `with strategy.scope():`, and building the model in it
    # failed: "Mixing different tf.distribute.Strategy objects".
    outer = tf.distribute.MirroredStrategy(["/cpu:0"])
    two_gpus = [tf.config.LogicalDevice(f"/device:GPU:{i}", "GPU") for i in range(2)]
    real = tf.config.list_logical_devices
    monkeypatch.setattr(tf.config, "list_logical_devices",
                        lambda kind=None: two_gpus if kind == "GPU" else real(kind))
    with outer.scope():
        assert get_strategy("auto") is outer
        assert get_strategy("default") is outer
    assert get_strategy("auto") is not outer


def test_precision_policy_choice_and_float16_loss_scaling(tiny_config):
    assert choose_policy("off") == "float32"
    assert choose_policy("bfloat16") == "mixed_bfloat16"
    assert choose_policy("float16") == "mixed_float16"
    if not tf.config.list_physical_devices("GPU"):
        assert choose_policy("auto") == "float32"
    # With the global policy set before building, Keras' compile adds dynamic loss scaling.
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        model = BertPretrainer(BertEncoder(tiny_config))
    finally:
        keras.config.set_dtype_policy(previous)
    model.compile(optimizer=create_optimizer(num_train_steps=10, num_warmup_steps=1))
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert type(model.optimizer.inner_optimizer).__name__ == "BertAdamW"
    # A per-model dtype leaves the functional model's own policy float32, so Keras does
    # not wrap; with_loss_scaling (used by run_pretraining) does.
    model = BertPretrainer(BertEncoder(tiny_config, dtype="mixed_float16"))
    optimizer = create_optimizer(num_train_steps=10, num_warmup_steps=1)
    assert isinstance(with_loss_scaling(optimizer, model), keras.optimizers.LossScaleOptimizer)
    float32_model = BertPretrainer(BertEncoder(tiny_config, dtype="float32"))
    assert with_loss_scaling(optimizer, float32_model) is optimizer


def test_jit_compile_resolution_explains_itself():
    default = tf.distribute.get_strategy()
    assert resolve_jit_compile("on", default) == (True, None)
    assert resolve_jit_compile("off", default) == (False, None)
    value, note = resolve_jit_compile("auto", default)
    assert value == "auto"
    if not tf.config.list_physical_devices("GPU"):
        assert "only on GPU/TPU" in note


# ---- the fit loop --------------------------------------------------------------------------


def test_run_pretraining_trains_checkpoints_and_resumes_from_a_backup(one_layer_config, tmp_path):
    output = str(tmp_path / "run")
    result = run_pretraining(
        build_model=lambda: BertPretrainer(BertEncoder(one_layer_config)),
        make_dataset=lambda: synthetic_dataset(one_layer_config.vocab_size),
        output_dir=output, num_train_steps=7, num_warmup_steps=2, global_batch_size=BATCH,
        checkpoint_every=3, keep_checkpoints=2, verbose=0,
    )
    assert (result.initial_step, result.final_step) == (0, 7)
    assert int(result.model.optimizer.iterations) == 7  # stopped inside the third 3-step epoch
    assert {"loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"} <= set(result.metrics)
    assert result.steps_per_sec > 0 and result.examples_per_sec == pytest.approx(result.steps_per_sec * BATCH)
    # Last 2 of ckpt-3, ckpt-6, ckpt-7 kept; the completed run's backup is gone.
    assert result.checkpoint.endswith("ckpt-7")
    assert tf.train.get_checkpoint_state(os.path.join(output, "checkpoints")).all_model_checkpoint_paths == [
        os.path.join(output, "checkpoints", "ckpt-6"), os.path.join(output, "checkpoints", "ckpt-7")]
    assert not os.path.exists(os.path.join(output, "backup"))
    assert os.listdir(os.path.join(output, "logs"))

    # The checkpoint holds the model and the optimizer state.
    fresh = BertPretrainer(BertEncoder(one_layer_config))
    fresh.compile(optimizer=create_optimizer(num_train_steps=7, num_warmup_steps=2))
    fresh.optimizer.build(fresh.trainable_variables)
    tf.train.Checkpoint(model=fresh, optimizer=fresh.optimizer).restore(result.checkpoint).assert_consumed()
    assert int(fresh.optimizer.iterations) == 7
    for a, b in zip(fresh.weights, result.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_resumed_step_reads_the_backup_epoch(tmp_path):
    assert resumed_step(str(tmp_path), steps_per_epoch=5) == 0
    (tmp_path / "training_metadata.json").write_text(json.dumps({"epoch": 3, "batch": 0}))
    assert resumed_step(str(tmp_path), steps_per_epoch=5) == 15



class _StopAfterBackupOfEpoch(keras.callbacks.Callback):
    """Ends the process's fit right after `RunBackup` saved the backup of `epoch` (as a kill there does:
    `on_train_end`, which removes the backup, never runs)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt("killed")


@pytest.mark.parametrize("rerun_steps, final_step", [(6, 6), (4, 6)])
def test_a_run_killed_after_its_last_backup_ends_with_the_backed_up_weights(
        one_layer_config, tmp_path, rerun_steps, final_step):
    # A kill between the last backup and the end of fit (or a rerun asking fewer steps than the
    # backup holds) left nothing to train: the rerun skipped fit, so the backup was never restored,
    # and the freshly built (untrained) model was returned and saved as the finished run's.
    def run(output, steps, callbacks=()):
        return run_pretraining(
            build_model=lambda: BertPretrainer(BertEncoder(one_layer_config)),
            make_dataset=lambda: synthetic_dataset(one_layer_config.vocab_size),
            output_dir=str(output), num_train_steps=steps, num_warmup_steps=2, global_batch_size=BATCH,
            checkpoint_every=3, verbose=0, tensorboard=False, seed=0, callbacks=list(callbacks))

    uninterrupted = run(tmp_path / "whole", 6)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "killed", 6, [_StopAfterBackupOfEpoch(1)])
    assert os.path.exists(tmp_path / "killed" / "backup" / "latest.weights.h5")
    resumed = run(tmp_path / "killed", rerun_steps)
    assert (resumed.initial_step, resumed.final_step) == (6, final_step)
    assert int(resumed.model.optimizer.iterations) == 6
    for a, b in zip(uninterrupted.model.weights, resumed.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert resumed.metrics["loss"] == pytest.approx(uninterrupted.metrics["loss"])
    assert not os.path.exists(tmp_path / "killed" / "backup")

# ---- the CLI ---------------------------------------------------------------------------------


def test_cli_multiworker_without_tf_config_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    code = main(["pretrain", "--data", "x*.tfrecord", "--steps", "1", "--strategy", "multiworker",
                 "--output-dir", str(tmp_path)])
    assert code == 2
    assert "TF_CONFIG" in capsys.readouterr().err


def write_google_tfrecord(path, vocab_size, examples=16, seq=SEQ, predictions=PREDICTIONS):
    """Examples in google-research create_pretraining_data.py's feature layout."""
    rng = np.random.default_rng(0)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(examples):
            length = int(rng.integers(6, seq + 1))
            ids = [2] + list(rng.integers(5, vocab_size, length - 2)) + [3] + [0] * (seq - length)
            positions = sorted(rng.choice(np.arange(1, length - 1), predictions, replace=False))
            features = {
                "input_ids": ints(ids),
                "input_mask": ints([1] * length + [0] * (seq - length)),
                "segment_ids": ints([0] * (length // 2) + [1] * (seq - length // 2)),
                "masked_lm_positions": ints(positions),
                "masked_lm_ids": ints(rng.integers(5, vocab_size, predictions)),
                "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * predictions)),
                "next_sentence_labels": ints([rng.integers(0, 2)]),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())


def test_cli_pretrain_end_to_end(one_layer_config, tiny_vocab_file, tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO)  # what `pretrain`'s logging.basicConfig(level=INFO) shows
    write_google_tfrecord(str(tmp_path / "part-0.tfrecord"), one_layer_config.vocab_size)
    config_file = tmp_path / "config.json"
    one_layer_config.to_json(str(config_file))
    output = tmp_path / "run"
    code = main(["pretrain", "--data", str(tmp_path / "*.tfrecord"), "--vocab", tiny_vocab_file,
                 "--config", str(config_file), "--seq-length", str(SEQ), "--max-predictions", str(PREDICTIONS),
                 "--global-batch-size", "4", "--steps", "4", "--warmup-steps", "1", "--checkpoint-every", "2",
                 "--strategy", "default", "--output-dir", str(output)])
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, printed
    assert "steps 0 -> 4 of 4" in printed and "next: bert-keras embed --init" in printed
    # Said once, on the strategy line (apply_policy's own "dtype policy: float32" line repeated it).
    assert (printed + captured.err + caplog.text).count("dtype policy") == 1, printed + caplog.text
    assert {"encoder.keras", "config.json", "vocab.txt", "checkpoints", "logs"} <= set(os.listdir(output))
    encoder = keras.saving.load_model(str(output / "encoder.keras"))
    assert encoder.config == one_layer_config


def test_cli_pretrain_into_a_directory_of_other_work_names_the_flags(one_layer_config, tiny_vocab_file, tmp_path,
                                                                      capsys):
    """The refusal of a non-empty directory told a Python caller to "choose another --output-dir" (and the
    command line to "pass overwrite=True"): the library says `output_dir` and `overwrite=True`, and
    `bert-keras pretrain` shows its own flags."""
    write_google_tfrecord(str(tmp_path / "part-0.tfrecord"), one_layer_config.vocab_size)
    config_file = tmp_path / "config.json"
    one_layer_config.to_json(str(config_file))
    output = tmp_path / "run"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    code = main(["pretrain", "--data", str(tmp_path / "*.tfrecord"), "--vocab", tiny_vocab_file,
                 "--config", str(config_file), "--seq-length", str(SEQ), "--max-predictions", str(PREDICTIONS),
                 "--global-batch-size", "4", "--steps", "1", "--strategy", "default", "--output-dir", str(output)])
    error = capsys.readouterr().err
    assert code == 2, error
    assert "choose an empty --output-dir or pass --overwrite to train there anyway" in error, error
    assert "output_dir" not in error and "overwrite=True" not in error
    assert os.listdir(output) == ["notes.txt"]


def test_cli_pretrain_dynamic_masking_from_text(one_layer_config, tiny_vocab_file, tmp_path, capsys):
    corpus = os.path.join(os.path.dirname(__file__), "..", "..", "pipelines", "data", "sample_corpus.txt")
    if not os.path.exists(corpus):
        pytest.skip("pipelines/data/sample_corpus.txt is missing")
    config_file = tmp_path / "config.json"
    one_layer_config.to_json(str(config_file))
    output = tmp_path / "run"
    code = main(["pretrain", "--text", corpus, "--vocab", tiny_vocab_file, "--config", str(config_file),
                 "--seq-length", "16", "--max-predictions", "3", "--global-batch-size", "4", "--steps", "2",
                 "--checkpoint-every", "2", "--strategy", "default", "--output-dir", str(output)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "steps 0 -> 2 of 2" in printed


def test_cli_pretrain_longer_than_the_position_embeddings_is_refused_before_anything_is_written(
        one_layer_config, tiny_vocab_file, tmp_path, capsys):
    # Keras' error from inside the embeddings' graph came once training started ("Dimensions must be
    # equal, but are 48 and 40 for '{{node ...}}'"), after run.json was written: the rerun with a
    # fitting --seq-length was then refused as a run of other settings.
    corpus = os.path.join(os.path.dirname(__file__), "..", "..", "pipelines", "data", "sample_corpus.txt")
    config_file = tmp_path / "config.json"
    one_layer_config.to_json(str(config_file))
    output = tmp_path / "run"
    positions = one_layer_config.max_position_embeddings
    code = main(["pretrain", "--text", corpus, "--vocab", tiny_vocab_file, "--config", str(config_file),
                 "--seq-length", str(positions + 8), "--max-predictions", "3", "--global-batch-size", "4",
                 "--steps", "2", "--checkpoint-every", "2", "--strategy", "default", "--output-dir", str(output)])
    error = capsys.readouterr().err
    assert code != 0
    assert f"seq_length {positions + 8} (--seq-length) is longer than the model's {positions} position" in error
    assert not output.exists()


def test_cli_pretrain_with_a_vocabulary_larger_than_the_model_is_refused(
        records_and_config, tiny_vocab_file, tmp_path, capsys):
    # Its ids past the model's vocab_size failed the embedding lookup once training started, with
    # TensorFlow's raw "indices[0,7] = 807 is not in [0, 600)" traceback (a GPU reads zeros instead).
    data, config_file = records_and_config
    bigger = tmp_path / "bigger.txt"
    bigger.write_text(open(tiny_vocab_file, encoding="utf-8").read() + "".join(f"extra{i}\n" for i in range(5)))
    output = tmp_path / "run"
    assert main(pretrain_args(data, str(bigger), config_file, output, 2)) != 0
    assert "bigger.txt: the vocabulary has 104 tokens, more than the model's 99 (vocab_size of its config)" in capsys.readouterr().err
    assert not output.exists()


def test_a_run_that_failed_before_its_first_checkpoint_does_not_block_the_corrected_rerun(
        records_and_config, tiny_vocab_file, tmp_path, capsys, monkeypatch):
    # Its run.json ("running") made the rerun with corrected settings "a run of other settings",
    # refused without --overwrite, though it had trained nothing.
    data, config_file = records_and_config
    output = tmp_path / "run"

    def fails(*args, **kwargs):
        raise RuntimeError("no optimizer")

    with monkeypatch.context() as patch:
        patch.setattr("bert_keras.training.loop.create_optimizer", fails)
        with pytest.raises(RuntimeError):
            main(pretrain_args(data, tiny_vocab_file, config_file, output, 2, "--seed", "5"))
    assert json.loads((output / "run.json").read_text())["status"] == "running"
    assert main(pretrain_args(data, tiny_vocab_file, config_file, output, 2)) == 0, capsys.readouterr().err
    assert json.loads((output / "run.json").read_text())["settings"]["seed"] == 0


# ---- pretrain never destroys work ----------------------------------------------------------


def pretrain_args(data, vocab, config_file, output, steps, *more):
    return ["pretrain", "--data", data, "--vocab", vocab, "--config", str(config_file), "--seq-length", str(SEQ),
            "--max-predictions", str(PREDICTIONS), "--global-batch-size", "4", "--steps", str(steps),
            "--warmup-steps", "1", "--checkpoint-every", "2", "--strategy", "default",
            "--output-dir", str(output), *more]


@pytest.fixture
def records_and_config(one_layer_config, tmp_path):
    write_google_tfrecord(str(tmp_path / "part-0.tfrecord"), one_layer_config.vocab_size)
    config_file = tmp_path / "config.json"
    one_layer_config.to_json(str(config_file))
    return str(tmp_path / "*.tfrecord"), config_file


def snapshot(directory):
    """Every file under `directory` with its bytes and mtime."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = (open(path, "rb").read(), os.stat(path).st_mtime_ns)
    return found


def test_cli_pretrain_rerun_of_a_finished_run_touches_nothing_and_more_steps_continue(
        records_and_config, tiny_vocab_file, tmp_path, capsys, caplog):
    import logging

    data, config_file = records_and_config
    output = tmp_path / "run"
    assert main(pretrain_args(data, tiny_vocab_file, config_file, output, 4)) == 0
    assert "steps 0 -> 4 of 4" in capsys.readouterr().out
    finished = snapshot(output)

    # The same command again: reported complete, nothing written, no checkpoint rotated.
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert main(pretrain_args(data, tiny_vocab_file, config_file, output, 4)) == 0
    printed = capsys.readouterr()
    assert "already complete at step 4" in printed.out and "next: bert-keras embed" in printed.out
    # Said once: the report on stdout, not a log line too (it was printed twice).
    said = printed.out + printed.err + "".join(record.getMessage() for record in caplog.records)
    assert said.count("nothing to do") == 1, said
    assert snapshot(output) == finished

    # A larger --steps continues from the last checkpoint (model and optimizer), not from step 0.
    assert main(pretrain_args(data, tiny_vocab_file, config_file, output, 6)) == 0
    printed = capsys.readouterr().out
    assert "steps 4 -> 6 of 6" in printed, printed
    assert tf.train.latest_checkpoint(str(output / "checkpoints")).endswith("ckpt-6")
    with open(output / "run.json") as f:
        record = json.load(f)
    assert record["status"] == "complete" and record["final_step"] == 6
    restored = BertPretrainer(BertEncoder(keras.saving.load_model(str(output / "encoder.keras")).config))
    restored.compile(optimizer=create_optimizer(num_train_steps=6, num_warmup_steps=1))
    restored.optimizer.build(restored.trainable_variables)
    tf.train.Checkpoint(model=restored, optimizer=restored.optimizer).restore(
        str(output / "checkpoints" / "ckpt-6")).expect_partial()
    assert int(restored.optimizer.iterations) == 6  # 4 from the first run + 2


def test_pretrain_in_float16_gives_the_callers_dtype_policy_back(records_and_config, tiny_vocab_file, tmp_path):
    # Pretrainer.pretrain set the global Keras policy and left it: after a float16 run (or a
    # float16 call refused by a check) every model the caller built next was mixed_float16.
    from bert_keras.tasks import Pretrainer, TaskInputError

    data, config_file = records_and_config
    settings = dict(records=data, vocab_file=tiny_vocab_file, config=str(config_file), steps=1,
                    max_predictions=PREDICTIONS, batch_size=4, strategy="default", mixed_precision="float16",
                    verbose=0)
    keras.config.set_dtype_policy("float32")
    try:
        with pytest.raises(TaskInputError, match="seq_length 600"):
            Pretrainer.pretrain(str(tmp_path / "refused"), seq_length=600, **settings)
        assert keras.config.dtype_policy().name == "float32"
        result = Pretrainer.pretrain(str(tmp_path / "run"), seq_length=SEQ, **settings)
        assert result.final_step == 1 and result.model.encoder.dtype_policy.name == "mixed_float16"
        assert keras.config.dtype_policy().name == "float32"
    finally:
        keras.config.set_dtype_policy("float32")


def test_cli_pretrain_into_other_work_needs_overwrite(records_and_config, tiny_vocab_file, tmp_path, capsys):
    data, config_file = records_and_config
    output = tmp_path / "busy"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    assert main(pretrain_args(data, tiny_vocab_file, config_file, output, 2)) != 0
    err = capsys.readouterr().err
    assert "pass --overwrite to train there anyway" in err and "overwrite=True" not in err, err
    assert os.listdir(output) == ["notes.txt"]
    assert main(pretrain_args(data, tiny_vocab_file, config_file, output, 2, "--overwrite")) == 0
    assert (output / "notes.txt").read_text() == "mine" and (output / "encoder.keras").exists()
    capsys.readouterr()

    # A finished run of other settings is not a run to resume: refused, untouched.
    finished = snapshot(output)
    assert main(pretrain_args(data, tiny_vocab_file, config_file, output, 2, "--seed", "5")) != 0
    assert "seed differ" in capsys.readouterr().err
    assert snapshot(output) == finished


def final_losses(printed):
    line = [line for line in printed.splitlines() if line.startswith("final loss")][-1]
    return line


def test_cli_pretrain_same_seed_same_losses(records_and_config, tiny_vocab_file, tmp_path, capsys):
    data, config_file = records_and_config
    runs = {}
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        assert main(pretrain_args(data, tiny_vocab_file, config_file, tmp_path / name, 3, "--seed", seed)) == 0
        runs[name] = final_losses(capsys.readouterr().out)
    assert runs["a"] == runs["b"], runs  # model init, dropout, data order and masks all seeded
    assert runs["a"] != runs["c"], runs


def test_cli_pretrain_records_of_other_sizes_fail_before_the_model_is_built(
        records_and_config, tiny_vocab_file, tmp_path, capsys, monkeypatch):
    data, config_file = records_and_config

    def no_model(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(BertPretrainer, "__init__", no_model)
    # google-style records without a config file: their widths are read from the first record.
    args = pretrain_args(data, tiny_vocab_file, config_file, tmp_path / "r1", 2)
    args[args.index("--seq-length") + 1] = "16"
    assert main(args) != 0
    error = capsys.readouterr().err
    assert f'"max_seq_length": {SEQ}, "max_predictions_per_seq": {PREDICTIONS}' in error, error
    assert "--seq-length" in error and not (tmp_path / "r1").exists()

    # Ours: the values of PREFIX-config.json (as create-pretraining-data writes it) are quoted.
    records = tmp_path / "ours"
    records.mkdir()
    write_google_tfrecord(str(records / "data-00000-of-00001.tfrecord"), 99)
    (records / "data-config.json").write_text(json.dumps(
        {"settings": {"max_seq_length": SEQ, "max_predictions_per_seq": PREDICTIONS}, "complete": True}))
    args = pretrain_args(str(records / "data-*.tfrecord"), tiny_vocab_file, config_file, tmp_path / "r2", 2)
    args[args.index("--max-predictions") + 1] = "5"
    assert main(args) != 0
    error = capsys.readouterr().err
    assert "data-config.json" in error and f'"max_predictions_per_seq": {PREDICTIONS}' in error, error
    assert "max_predictions_per_seq 5 was asked for" in error


def test_overwrite_never_removes_an_input_or_a_file_no_run_recorded(tmp_path):
    from bert_keras.training.run_directory import RunDirectoryError, plan_run, record_segment

    settings = {"seed": 0}
    # The user's files of the names a run writes, and no run.json: never removed, even with overwrite.
    user = tmp_path / "project"
    (user / "logs").mkdir(parents=True)
    (user / "logs" / "experiment-notes.txt").write_text("mine")
    (user / "vocab.txt").write_text("[PAD]\n")
    before = sorted(str(p) for p in user.rglob("*"))
    with pytest.raises(RunDirectoryError, match=r"holds logs, vocab.txt, of the names .* no run"):
        plan_run(str(user), settings=settings, num_train_steps=2, overwrite=True, inputs=[str(user / "vocab.txt")])
    with pytest.raises(RunDirectoryError) as refused:  # without --overwrite: the advice is not --overwrite
        plan_run(str(user), settings=settings, num_train_steps=2)
    assert "which no run recorded: choose another output_dir" in str(refused.value)
    assert "--" not in str(refused.value)  # a Python call: its keywords, not the command's flags
    assert sorted(str(p) for p in user.rglob("*")) == before
    # Files of other names only: the run starts beside them.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(RunDirectoryError) as refused:  # a Python call: its keyword, not the command's flag
        plan_run(str(other), settings=settings, num_train_steps=2)
    assert "pass overwrite=True to train there anyway" in str(refused.value) and "--" not in str(refused.value)
    assert plan_run(str(other), settings=settings, num_train_steps=2, overwrite=True).action == "start"
    assert os.listdir(other) == ["notes.txt"]
    # A recorded run: its outputs go, unless the new run reads one of them.
    run = tmp_path / "run"
    run.mkdir()
    record_segment(str(run), settings=settings, num_train_steps=2, segment_start=0, steps_per_epoch=1)
    (run / "encoder.keras").write_text("weights")
    (run / "notes.txt").write_text("mine")
    (run / "backup-worker-1.owner").write_text("o1.0.00000000\n")  # which process runs: not a run's output
    for path in ("checkpoints/checkpoint", "checkpoints/ckpt-2.index", "checkpoints/ckpt-2.data-00000-of-00001",
                 "logs/train/events.out.tfevents.1.host.1.v2", "logs/train/plugins/profile/x/host.xplane.pb",
                 "backup/latest.weights.h5", "backup/training_metadata.json",
                 "checkpoints/keep.txt", "logs/mynotes.txt"):  # the last two are the user's
        (run / path).parent.mkdir(parents=True, exist_ok=True)
        (run / path).write_text("x")
    with pytest.raises(RunDirectoryError, match=r"would remove .*encoder.keras, which this run reads"):
        plan_run(str(run), settings={"seed": 1}, num_train_steps=2, overwrite=True, inputs=[str(run / "encoder.keras")])
    assert (run / "encoder.keras").exists()
    assert plan_run(str(run), settings={"seed": 1}, num_train_steps=2, overwrite=True,
                    inputs=[str(tmp_path / "vocab.txt")]).action == "start"
    left = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
    assert left == ["backup-worker-1.owner", "checkpoints/keep.txt", "logs/mynotes.txt", "notes.txt"]
    # An owner file alone is not work: the directory counts as empty.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "backup.owner").write_text("o1.0.00000000\n")
    assert plan_run(str(fresh), settings=settings, num_train_steps=2).action == "start"


def test_a_corpus_that_is_empty_or_not_utf8_is_refused_before_training(tiny_vocab_file, tmp_path):
    from bert_keras.tasks.inputs import TaskInputError
    from bert_keras.tasks.pretrainer import dataset_factory

    options = dict(records=None, vocab_file=tiny_vocab_file, lowercase=True, batch_size=2, seq_length=16,
                   max_predictions=2, seed=0)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(TaskInputError, match="corpus is empty"):
        dataset_factory(corpus=str(empty), **options)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("A sentence.\nUn caf\u00e9.\n".encode("latin-1"))
    with pytest.raises(TaskInputError, match=r"latin.txt, line 2: not valid UTF-8"):
        dataset_factory(corpus=[str(empty), str(latin)], **options)
    # Lines of characters the tokenizer drops (a BOM, a zero-width space, control characters) are no
    # text either: they passed the check, and the stream, holding no token, never gave a batch (the
    # run waited forever for its first one).
    dropped = tmp_path / "dropped.txt"
    dropped.write_bytes("\ufeff\n\x01\x02\n\n\u200b \u200b\n".encode("utf-8"))
    with pytest.raises(TaskInputError, match="corpus is empty.*dropped.txt.*byte-order mark"):
        dataset_factory(corpus=str(dropped), **options)


_CLIPPED_ON_TWO_REPLICAS = """
from bert_keras.training.optimizer import BertAdamW

rng = np.random.default_rng(0)
ids = rng.integers(0, 20, (8, 3))
targets = rng.normal(size=(8, 1)).astype("float32") * 10  # large errors: every step is clipped

def train(strategy):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(20, 4),
                                  keras.layers.Flatten(), keras.layers.Dense(1)])
        model.compile(optimizer=BertAdamW(learning_rate=0.1, weight_decay=0.01, global_clipnorm=1.0), loss="mse")
    start = model.get_weights()
    history = model.fit(ids, targets, batch_size=4, epochs=3, shuffle=False, verbose=0).history["loss"]
    return history, start, model.get_weights()
"""


def test_bert_adamw_on_two_replicas_clips_the_summed_gradient(tmp_path):
    # Keras clips each replica's gradient by its own norm before summing them: a clipped
    # step on two replicas was not the one-device step of the same global batch.
    import two_replicas

    result = two_replicas.compare(_CLIPPED_ON_TWO_REPLICAS)
    np.testing.assert_allclose(result["two"], result["one"], rtol=1e-6)
    assert result["moved"] > 1e-2
    assert result["diff"] < 1e-6


_ONE_REPLICA_OVERFLOWS = """
from bert_keras.training.optimizer import BertAdamW
from bert_keras.loss_scaling import with_loss_scaling

x = np.ones((8, 2), "float32")
x[2:4] = 3e4  # the first batch's second half (replica 2's part): float16 overflows there only
y = np.ones((8, 1), "float32")

def train(strategy):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, dtype="mixed_float16")])
        model.compile(optimizer=with_loss_scaling(BertAdamW(learning_rate=0.1), model), loss="mse")
    start = model.get_weights()
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    scale = float(model.optimizer.dynamic_scale.numpy())
    return [scale, int(model.optimizer.iterations.numpy())], start, model.get_weights()
"""


def test_loss_scaling_on_two_replicas_skips_a_step_that_overflows_on_one_of_them(tmp_path):
    # Keras' LossScaleOptimizer checked each replica's own gradients: the replica that did not
    # overflow applied the summed (inf) gradient, and every weight turned NaN for good.
    import two_replicas

    result = two_replicas.compare(_ONE_REPLICA_OVERFLOWS)
    assert result["one"] == [16384.0, 1]  # the overflowing step skipped, the scale halved once
    assert result["two"] == result["one"]
    assert result["moved"] > 1e-2 and result["diff"] < 1e-6


def test_every_compile_of_a_float16_model_wraps_with_the_replica_consistent_loss_scaling(tiny_config, tmp_path):
    # Keras' compile wrapped a float16 model's optimizer in its own LossScaleOptimizer (the one
    # above that lets one replica's overflow reach the weights): a head model's own compile, the
    # fine-tuning recipe and a task compiled with an optimizer of the user's all get ours.
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "serving"))
    import export_fixtures
    from bert_keras import tasks
    from bert_keras.loss_scaling import ReplicaConsistentLossScaleOptimizer
    from bert_keras.models import BertClassifier

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        head = BertClassifier(BertEncoder(tiny_config), num_classes=2)
        task = tasks.TextClassifier(BertClassifier(BertEncoder(export_fixtures.tiny_config()), num_classes=2),
                                    labels=["a", "b"],
                                    vocab_file=export_fixtures.write_vocab(str(tmp_path / "vocab.txt")),
                                    seq_length=16)
    finally:
        keras.config.set_dtype_policy(previous)
    head.compile(optimizer="adam", loss="mse")
    assert type(head.optimizer) is ReplicaConsistentLossScaleOptimizer
    assert type(head.optimizer.inner_optimizer).__name__ == "Adam"
    task.compile()  # the recipe
    assert type(task.optimizer) is ReplicaConsistentLossScaleOptimizer
    assert type(task.optimizer.inner_optimizer).__name__ == "BertAdamW"
    task.compile(optimizer=keras.optimizers.SGD(0.1))
    assert type(task.optimizer) is ReplicaConsistentLossScaleOptimizer
    task.compile(optimizer=keras.optimizers.SGD(0.1), auto_scale_loss=False)
    assert type(task.optimizer).__name__ == "SGD"


def test_the_pretraining_report_does_not_repeat_the_notes_logged_at_the_start():
    """`bert-keras pretrain` on CPU printed "XLA (jit_compile) is off: ..." when the run started and
    again, word for word, as a note of the final report; the report's first line says "XLA off"."""
    import types

    from bert_keras.training.loop import PretrainingResult, resolve_jit_compile

    import tensorflow as tf

    _, note = resolve_jit_compile("auto", tf.distribute.get_strategy())
    config = types.SimpleNamespace(num_layers=2, hidden_size=128, vocab_size=65)
    result = PretrainingResult(model=types.SimpleNamespace(encoder=types.SimpleNamespace(config=config)),
                               initial_step=0, final_step=6, metrics={"loss": 4.8}, notes=[note] if note else [])
    report = result.report("run", 6, 8.0)
    assert "XLA off" in report.splitlines()[1]
    assert "XLA (jit_compile)" not in report and "note:" not in report, report


def test_a_run_of_other_settings_is_refused_naming_both_values(tmp_path):
    """The refusal named the settings that differ, not their values: a run recorded with the
    vocabulary's word length limit 100 said only "max_input_chars_per_word differ", leaving the user
    to read run.json to learn which limit the run had, and that this rerun had the default."""
    from bert_keras.training.run_directory import RunDirectoryError, plan_run, record_complete, record_segment

    run = str(tmp_path / "run")
    os.makedirs(run)
    recorded = {"seed": 0, "max_input_chars_per_word": 100, "text": ["/data/" + "x" * 200 + ".txt"]}
    record_segment(run, settings=recorded, num_train_steps=2, segment_start=0, steps_per_epoch=1)
    record_complete(run, final_step=2, metrics={})
    with pytest.raises(RunDirectoryError) as refused:
        plan_run(run, settings={"seed": 3, "text": ["/data/b.txt"]}, num_train_steps=2)
    message = str(refused.value)
    assert "max_input_chars_per_word, seed, text differ" in message
    assert "max_input_chars_per_word: 100 in run.json, the default (not recorded) now" in message
    assert "seed: 0 in run.json, 3 now" in message
    assert 'text: ["/data/xxx' in message and '... in run.json, ["/data/b.txt"] now' in message  # cut short
    assert len(message) < 700


def test_cli_pretrain_refuses_records_of_another_word_length_limit(one_layer_config, tiny_vocab_file, tmp_path,
                                                                   capsys):
    """Records written with `max_input_chars_per_word` 100 (their PREFIX-config.json says so) trained a
    run whose vocabulary records no limit: the saved encoder said 200, so fine-tuning read long words
    otherwise than pretraining had, and `pretrain` had no flag to say 100. The mismatch is refused
    naming both limits and the file; `--max-chars-per-word 100` trains and records 100."""
    from pipelines.tokenizer.tokenizer_config import read_tokenizer_settings

    write_google_tfrecord(str(tmp_path / "data-00000-of-00001.tfrecord"), one_layer_config.vocab_size)
    (tmp_path / "data-config.json").write_text(json.dumps({"settings": {
        "max_seq_length": SEQ, "max_predictions_per_seq": PREDICTIONS, "max_input_chars_per_word": 100}}))
    config_file = tmp_path / "config.json"
    one_layer_config.to_json(str(config_file))
    data = str(tmp_path / "data-*.tfrecord")
    assert main(pretrain_args(data, tiny_vocab_file, config_file, tmp_path / "run", 2)) != 0
    error = capsys.readouterr().err
    assert "tokenized with max_input_chars_per_word 100" in error and "data-config.json" in error, error
    assert "but this run's is 200" in error and "--max-chars-per-word 100" in error, error
    assert not (tmp_path / "run" / "encoder.keras").exists()
    assert main(pretrain_args(data, tiny_vocab_file, config_file, tmp_path / "run", 2,
                              "--max-chars-per-word", "100")) == 0
    assert read_tokenizer_settings(str(tmp_path / "run" / "vocab.txt"))["max_input_chars_per_word"] == 100


@pytest.mark.parametrize("content, named", [
    ("{}", "field 'settings.max_seq_length' must be a positive integer, got None"),
    ("{bad", "not a JSON records config"),
    ('{"settings": {"max_seq_length": "x", "max_predictions_per_seq": 20}}',
     "field 'settings.max_seq_length' must be a positive integer, got 'x'"),
    ("[1]", "expected a JSON object with the writer's 'settings'"),
    ('{"settings": {"max_seq_length": 16, "max_predictions_per_seq": 4, "max_input_chars_per_word": 0}}',
     "field 'settings.max_input_chars_per_word' must be a positive integer, got 0"),
])
def test_cli_pretrain_names_a_damaged_records_config(one_layer_config, tiny_vocab_file, tmp_path, capsys, content,
                                                     named):
    """A damaged PREFIX-config.json beside the records stopped `pretrain --data` with a KeyError
    traceback ('max_seq_length'), or, read as no layout, with a misleading complaint about the
    default --seq-length 128. It is named, with the field."""
    write_google_tfrecord(str(tmp_path / "data-00000-of-00001.tfrecord"), one_layer_config.vocab_size)
    (tmp_path / "data-config.json").write_text(content)
    config_file = tmp_path / "config.json"
    one_layer_config.to_json(str(config_file))
    assert main(["pretrain", "--data", str(tmp_path / "data-*.tfrecord"), "--vocab", tiny_vocab_file, "--config",
                 str(config_file), "--global-batch-size", "2", "--steps", "1", "--strategy", "default",
                 "--output-dir", str(tmp_path / "run")]) != 0
    error = capsys.readouterr().err
    assert f"{tmp_path / 'data-config.json'}: {named}" in error and "Traceback" not in error, error


def test_pretrainer_fit_refuses_records_of_another_word_length_limit(one_layer_config, tiny_vocab_file, tmp_path):
    """`pretrain` refused records written with another limit (their PREFIX-config.json: 100), but
    `Pretrainer.fit(records=)` trained on them, and the saved encoder said 200. Refused as `pretrain`
    refuses them, before any step; a pretrainer built with the records' limit trains."""
    from bert_keras.tasks import Pretrainer, TaskInputError

    write_google_tfrecord(str(tmp_path / "data-00000-of-00001.tfrecord"), one_layer_config.vocab_size)
    (tmp_path / "data-config.json").write_text(json.dumps({"settings": {
        "max_seq_length": SEQ, "max_predictions_per_seq": PREDICTIONS, "max_input_chars_per_word": 100}}))
    settings = dict(records=str(tmp_path / "data-*.tfrecord"), steps=2, batch_size=4, checkpoint_every=2, verbose=0)
    pretrainer = Pretrainer.from_config(one_layer_config, vocab_file=tiny_vocab_file)
    with pytest.raises(TaskInputError, match=r"tokenized with max_input_chars_per_word 100 \(.*data-config\.json\), "
                                             r"but the pretrainer reads words with 200.*max_input_chars_per_word=100"):
        pretrainer.fit(output_dir=str(tmp_path / "run"), **settings)
    assert not (tmp_path / "run").exists()
    pretrainer = Pretrainer.from_config(one_layer_config, vocab_file=tiny_vocab_file, max_input_chars_per_word=100)
    assert pretrainer.fit(output_dir=str(tmp_path / "run"), **settings).final_step == 2
