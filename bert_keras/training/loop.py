"""`run_pretraining`: build under a strategy, compile, and `fit` with checkpoints and resume.

The loop is model- and data-agnostic: it takes a function that builds the model
(a `BertPretrainer`, or any Keras model whose `compute_loss` needs no `loss=`)
and one that makes the training `tf.data.Dataset` of *global* batches, so that
`bert_keras` never imports the data pipelines.
"""

import logging
import math
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field

import keras
import numpy as np

from bert_keras.training.backup import (RunBackup, backed_up_epoch, forget_restored_epoch, roll_back_backup,
                                        settle_backup)
from bert_keras.training.callbacks import StepCheckpoint, StopAtStep, ThroughputLogger
from bert_keras.training.optimizer import create_optimizer
from bert_keras.loss_scaling import with_loss_scaling
from bert_keras.training.run_directory import claim_run, plan_run, record_complete, record_segment
from bert_keras.training.strategy import gather_from_replicas, in_multi_worker_mode, is_chief
from pipelines.atomic_writes import release_owner

logger = logging.getLogger(__name__)


@dataclass
class PretrainingResult:
    """What `run_pretraining` did: the model, steps, metrics, speed and where things went."""

    model: object
    initial_step: int
    final_step: int
    metrics: dict = field(default_factory=dict)
    steps_per_sec: float = 0.0
    examples_per_sec: float = 0.0
    checkpoint: str = None
    jit_compile: bool = False
    skip_padding: bool = False
    notes: list = field(default_factory=list)
    already_complete: bool = False
    chief: bool = True  # this process writes the outputs (multi-worker: only the chief)

    def summary(self, steps, seconds):
        """What the run did, as lines: size, steps of `steps`, speed in `seconds`, final metrics (not the
        `notes`: the run logged them as it started)."""
        config, metrics = self.model.encoder.config, self.metrics
        lines = [f"pretrained {config.num_layers} layers, hidden {config.hidden_size}, "
                 f"vocab {config.vocab_size}: "
                 f"steps {self.initial_step} -> {self.final_step} of {steps} in {seconds:.0f}s "
                 f"({self.steps_per_sec:.2f} steps/s, {self.examples_per_sec:.0f} examples/s, "
                 f"XLA {'on' if self.jit_compile is True else 'off'}, "
                 f"padding {'skipped' if self.skip_padding else 'computed'})"]
        names = ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy")
        if metrics:
            lines.append("final " + ", ".join(f"{k} {metrics[k]:.4f}" for k in names if k in metrics))
        # The notes were logged when the run started (the XLA one: a second time here, word for word).
        return "\n".join(lines)

    def report(self, output_dir, steps, seconds, vocab_copied=False):
        """What `bert-keras pretrain` prints at the end: the `summary` and the files written (or that a
        finished run had nothing to do), then commands to try on `output_dir`'s `encoder.keras`."""
        encoder = os.path.join(output_dir, "encoder.keras")
        vocab = f" --vocab {shlex.quote(os.path.join(output_dir, 'vocab.txt'))}" if vocab_copied else ""
        embed = f'next: bert-keras embed --init {shlex.quote(encoder)}{vocab} "A sentence."'
        if self.already_complete:
            return (f"{output_dir} is already complete at step {self.final_step} (asked: {steps}): nothing to do, "
                    f"nothing changed. A larger --steps continues it; --overwrite starts afresh.\n{embed}")
        return "\n".join([
            "\n" + self.summary(steps, seconds),
            f"wrote {encoder}"
            + (" (heads: encoder.heads.npz)" if os.path.isfile(os.path.join(output_dir, "encoder.heads.npz")) else "")
            + f", config.json{', vocab.txt' if vocab_copied else ''}, checkpoints/ "
            f"(latest {os.path.basename(self.checkpoint or '-')}), logs/ "
            f"(tensorboard --logdir {shlex.quote(os.path.join(output_dir, 'logs'))})",
            # quoted, the alternative a shell comment: the block pasted whole runs both commands
            embed, f"      bert-keras convert {shlex.quote(encoder)} {shlex.quote('hf:' + os.path.join(output_dir, 'hf'))}"
                   f"   # or {shlex.quote('tf1:' + os.path.join(output_dir, 'tf1', 'bert_model.ckpt'))}"])


def _example_batch(dataset):
    """A batch shaped like `dataset`'s: zeros from its element_spec when shapes are static.

    Zeros cost nothing, where drawing a real batch would first fill the input
    pipeline's shuffle buffer (thousands of records).
    """
    import tensorflow as tf

    specs = tf.nest.flatten(dataset.element_spec)
    if all(spec.shape.is_fully_defined() for spec in specs):
        return tf.nest.map_structure(lambda spec: tf.zeros(spec.shape, spec.dtype), dataset.element_spec)
    return next(iter(dataset.take(1)))


def _build_from_own_batch(model, batch):
    """Make `fit` build the compiled metrics from `batch` instead of from its training iterator.

    Under a `tf.distribute` strategy, Keras 3.15 `fit` (`_maybe_symbolic_build`)
    takes the first batch off the training iterator to build its metrics: that
    batch is never trained on (so a resumed run would be one batch off), and it
    averages the batch over replicas with `strategy.reduce`, which fails for dict
    inputs under `MultiWorkerMirroredStrategy` ("Attempt to convert a value
    ({'token_ids': PerReplica...})"). The build only needs shapes, so a batch
    of our own does.
    """

    def build(iterator=None, data_batch=None):
        del iterator, data_batch
        with model.distribute_strategy.scope():
            model._symbolic_build(data_batch=batch)

    model._maybe_symbolic_build = build


def _log_vectors_for_multiworker(model):
    """Make `fit` work under `MultiWorkerMirroredStrategy` with Keras 3.15.

    Keras averages each step's logs over workers with
    `strategy.reduce("MEAN", value, axis=0)`, which fails on the scalar logs
    every model returns ("Invalid reduction dimension 0 for input with 0
    dimensions", tensorflow/tensorflow#72388). Returning each log as a
    1-element vector makes that reduction valid, and it yields the scalar mean
    over replicas, as on one machine.
    """
    import tensorflow as tf

    train_step = model.train_step

    def train_step_with_vector_logs(data):
        return {name: tf.reshape(value, [1]) for name, value in train_step(data).items()}

    model.train_step = train_step_with_vector_logs


def _restore_checkpoint(model, path):
    """Model and optimizer state from a `StepCheckpoint` checkpoint (the optimizer's step count included)."""
    import tensorflow as tf

    model.optimizer.build(model.trainable_variables)
    status = tf.train.Checkpoint(model=model, optimizer=model.optimizer).restore(path)
    status.assert_existing_objects_matched()


def agree_on_backup(strategy, backup_dir):
    """Multi-worker: the epoch every worker resumes from, each backup rolled back to it.

    Each worker keeps its own `RunBackup`. A kill during a save can leave one
    worker a save behind the others (its commit did not happen); resuming from different epochs would train different
    weights under one MirroredStrategy, silently. So the workers all-gather their
    epochs and step back to the lowest (the previous backup, which
    `double_checkpoint=True` keeps).
    """
    mine = backed_up_epoch(backup_dir)
    epochs = gather_from_replicas(strategy, mine)
    agreed = min(epochs)
    if agreed != mine:
        logger.warning("worker backups hold epochs %s: resuming every worker from epoch %d", epochs, agreed)
        roll_back_backup(backup_dir, agreed)
    return agreed


def resolve_jit_compile(jit_compile, strategy):
    """Resolve "auto"/"on"/"off" (or a bool) to what `compile(jit_compile=...)` gets, with a note.

    Keras 3 turns XLA off under every `tf.distribute` strategy when
    `jit_compile="auto"` (keras-team/keras#19005) and on CPU-only machines. That
    is decided silently inside Keras; here it is said in the log.

    Example:

    >>> import tensorflow as tf
    >>> resolve_jit_compile("off", tf.distribute.get_strategy())
    (False, None)

    Returns:
        (value for `compile`, a note to log or None).
    """
    import tensorflow as tf

    if jit_compile in (True, "on"):
        return True, None
    if jit_compile in (False, "off"):
        return False, None
    if jit_compile != "auto":
        raise ValueError(f"jit_compile must be auto, on or off, got {jit_compile!r}")
    accelerators = [d for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
    if not accelerators:
        return "auto", "XLA (jit_compile) is off: Keras enables it automatically only on GPU/TPU"
    if strategy is not tf.distribute.get_strategy() or tf.distribute.has_strategy():
        return "auto", ("XLA (jit_compile) is off: Keras 3 disables auto XLA under tf.distribute "
                        "strategies (keras-team/keras#19005); pass --jit-compile on to force it")
    return "auto", None


def run_pretraining(
    *,
    build_model,
    make_dataset,
    output_dir,
    num_train_steps,
    global_batch_size,
    num_warmup_steps=0,
    learning_rate=1e-4,
    weight_decay=0.01,
    strategy=None,
    steps_per_execution=1,
    jit_compile="auto",
    skip_padding="auto",
    checkpoint_every=1000,
    keep_checkpoints=3,
    tensorboard=True,
    callbacks=(),
    verbose="auto",
    run_settings=None,
    overwrite=False,
    seed=None,
    save_outputs=None,
    input_paths=(),
):
    """Pretrain with `model.fit`: AdamW + warmup/decay, step checkpoints, TensorBoard, resume after a kill.

    Layout of `output_dir`: `run.json` (the run's settings and state),
    `checkpoints/ckpt-STEP*` (last `keep_checkpoints`), `backup/` (fault
    tolerance, deleted when the run completes), `logs/` (TensorBoard).

    It never destroys work (`bert_keras.training.run_directory`): run the
    same call again after a crash or preemption and it resumes at the last
    backup, with the data position restored by skipping the batches already
    consumed (see `bert_keras.training.backup.resumed_step`); on a finished
    run it returns at once (`already_complete`, no model built, nothing
    written); with a larger `num_train_steps` it continues from the last
    checkpoint (model and optimizer) to the new total. A non-empty directory
    that is not a run of the same `run_settings` raises `RunDirectoryError`
    unless `overwrite=True`.

    Example:

    >>> # result = run_pretraining(
    >>> #     build_model=lambda: BertPretrainer(BertEncoder(BertConfig.named("mini", vocab_size=30522))),
    >>> #     make_dataset=lambda: pretraining_dataset("out/*.tfrecord", batch_size=32, seq_length=128,
    >>> #                                              max_predictions_per_seq=20, seed=0),
    >>> #     output_dir="run", num_train_steps=10000, num_warmup_steps=1000, global_batch_size=32)
    >>> # result.final_step, result.metrics["loss"]

    Args:
        build_model: callable () -> Keras model, called inside `strategy.scope()`.
            Its `compute_loss` must handle the `(x, y)` batches (no `loss=`).
        make_dataset: callable () -> infinite `tf.data.Dataset` of `(x, y)`
            global batches; must be deterministic (seeded) for exact resume.
        output_dir: str. Checkpoints, backup and logs go here.
        num_train_steps: int. Total optimizer steps (including resumed ones).
        global_batch_size: int. Examples per step over all replicas (for throughput).
        num_warmup_steps, learning_rate, weight_decay: see `create_optimizer`.
        strategy: `tf.distribute.Strategy`; None = the current (default) one.
        steps_per_execution: int. Steps per `tf.function` call (fewer host round trips).
        jit_compile: "auto" | "on" | "off" (or bool): XLA.
        skip_padding: "auto" | True | False: the encoder's per-token layers
            skip padded tokens (`EncoderHead.use_skip_padding`; "auto" = unless
            XLA or TPU).
        checkpoint_every: int. Steps between checkpoints and backups (= one Keras epoch).
        keep_checkpoints: int. Checkpoints kept.
        tensorboard: bool. Write TensorBoard logs.
        callbacks: more Keras callbacks for `fit`.
        verbose: passed to `fit`.
        run_settings: JSON-able dict that identifies the run (data, model,
            batch, optimizer, seed...; not the step count): a rerun must
            match it to resume or continue.
        overwrite: start afresh in a directory holding other work (removes
            what a recorded run wrote there; never a file no run recorded).
        seed: int or None. Seeds model initialisation and dropout
            (`keras.utils.set_random_seed`) before `build_model`.
        save_outputs: optional callable (model) -> None, called on the chief
            after training and before the run is recorded complete (e.g.
            saving `encoder.keras`), so that a complete run has its outputs.
        input_paths: files the run reads (vocabulary, initial weights, data):
            `overwrite` refuses to remove them.

    Returns:
        `PretrainingResult` (`model` is None and `already_complete` True when
        the run was already complete).

    Raises:
        RunDirectoryError: `output_dir` holds other work, and not `overwrite`.
    """
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    chief = is_chief(strategy)
    notes = []
    compile_jit, note = resolve_jit_compile(jit_compile, strategy)
    if note:
        notes.append(note)
        logger.warning(note)

    run_settings = dict(run_settings or {})
    # Every worker restores its own copy of the state, so non-chief workers keep
    # their own backup next to the chief's; their checkpoints and TensorBoard
    # logs go to a throw-away directory.
    if chief:
        backup_dir = os.path.join(output_dir, "backup")
    else:
        backup_dir = os.path.join(output_dir, f"backup-worker-{strategy.cluster_resolver.task_id}")
    # One run per backup: a second run on this directory while this one trains would
    # resume from, and write over, the same backup and checkpoints.
    owner = claim_run(output_dir, backup_dir)
    try:
        for note in settle_backup(backup_dir):
            logger.warning(note)
        plan = plan_run(output_dir, settings=run_settings, num_train_steps=num_train_steps,
                        backup_epoch=backed_up_epoch(backup_dir), overwrite=overwrite, chief=chief, inputs=input_paths)
        if plan.action == "complete":  # said once, by the caller (`PretrainingResult.report`: the CLI)
            return PretrainingResult(model=None, initial_step=plan.completed_step, final_step=plan.completed_step,
                                     metrics=dict(plan.metrics), checkpoint=plan.checkpoint, notes=notes,
                                     already_complete=True, chief=chief)
        worker_dir = output_dir if chief else tempfile.mkdtemp(prefix="bert_keras_worker_")
        segment_start = plan.segment_start
        steps_per_epoch = plan.steps_per_epoch or max(1, min(int(checkpoint_every),
                                                              int(num_train_steps) - segment_start))
        epochs = math.ceil(max(num_train_steps - segment_start, 0) / steps_per_epoch)
        if plan.action == "resume":
            if in_multi_worker_mode(strategy):
                # Every worker resumes from the same epoch, or their mirrored weights would differ.
                epoch = agree_on_backup(strategy, backup_dir)
            else:
                epoch = backed_up_epoch(backup_dir)
            # The step the backup holds, even past `num_train_steps` (asked fewer steps than a
            # killed run reached): the run ends there, as a complete one asked for fewer does.
            initial_step = segment_start + epoch * steps_per_epoch
        else:
            initial_step = segment_start
        if chief:
            record_segment(output_dir, settings=run_settings, num_train_steps=num_train_steps,
                           segment_start=segment_start, steps_per_epoch=steps_per_epoch)
        if seed is not None:
            keras.utils.set_random_seed(int(seed))

        dataset = make_dataset()
        if initial_step:
            # Same seeded stream, minus the batches the earlier run already trained on.
            dataset = dataset.skip(initial_step)
            if plan.action == "resume":
                logger.info("resuming at step %d from %s", initial_step, backup_dir)
            else:
                logger.info("continuing from step %d (%s) to step %d", initial_step, plan.checkpoint, num_train_steps)

        first_batch = _example_batch(dataset)
        with strategy.scope():
            model = build_model()
            if not model.built:
                # BackupAndRestore loads weights before the first step: build now.
                model(first_batch[0])
            optimizer = create_optimizer(
                learning_rate=learning_rate,
                num_train_steps=num_train_steps,
                num_warmup_steps=num_warmup_steps,
                weight_decay=weight_decay,
            )
            optimizer = with_loss_scaling(optimizer, model)
            model.compile(optimizer=optimizer, steps_per_execution=steps_per_execution, jit_compile=compile_jit)
            if plan.action == "continue":
                _restore_checkpoint(model, plan.checkpoint)
            # Without XLA, the encoder's per-token layers skip padded tokens.
            skip_padding = model.use_skip_padding(skip_padding) if hasattr(model, "use_skip_padding") else False
        if tf.distribute.has_strategy() or strategy is not tf.distribute.get_strategy():
            _build_from_own_batch(model, first_batch)
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            _log_vectors_for_multiworker(model)

        throughput = ThroughputLogger(global_batch_size)
        checkpoints = StepCheckpoint(
            os.path.join(output_dir, "checkpoints"),
            every=checkpoint_every,
            keep=keep_checkpoints,
            initial_step=initial_step,
            chief=chief,
        )
        all_callbacks = [
            # First: at an epoch's end the backup is written before the checkpoint of that step (StepCheckpoint).
            RunBackup(backup_dir, save_freq="epoch", delete_checkpoint=True, double_checkpoint=True),
            throughput,
            checkpoints,
            StopAtStep(num_train_steps, initial_step=initial_step),
        ]
        all_callbacks += list(callbacks)  # after ThroughputLogger: they see its keys in the logs
        if tensorboard:
            all_callbacks.append(keras.callbacks.TensorBoard(os.path.join(worker_dir, "logs"), update_freq="epoch"))

        metrics = {}
        # A resume always goes through `fit`, even with no step left to train (killed after its
        # last backup, before `fit` ended): the backup's weights come back in `RunBackup`'s
        # `on_train_begin` (and the backup is removed at its end). Without it, the outputs
        # would be the freshly built model's.
        if initial_step < num_train_steps or plan.action == "resume":
            # shuffle=False: the dataset shuffles itself (Keras warns that it ignores shuffle=True for datasets).
            forget_restored_epoch(model)  # a stopped earlier run's (the same model): this one's backup says
            history = model.fit(dataset, steps_per_epoch=steps_per_epoch, epochs=epochs, callbacks=all_callbacks,
                                shuffle=False, verbose=verbose)
            metrics = {name: float(np.mean(values[-1])) for name, values in history.history.items() if values}
        if not chief:
            shutil.rmtree(worker_dir, ignore_errors=True)
        final_checkpoint = checkpoints.saved[-1] if checkpoints.saved else plan.checkpoint
        if chief:
            if save_outputs is not None:
                save_outputs(model)
            record_complete(output_dir, final_step=checkpoints.step,
                            metrics={k: v for k, v in metrics.items() if math.isfinite(v)})
        return PretrainingResult(
            model=model,
            initial_step=initial_step,
            final_step=checkpoints.step,
            metrics=metrics,
            steps_per_sec=throughput.steps_per_sec,
            examples_per_sec=throughput.examples_per_sec,
            checkpoint=final_checkpoint if chief else None,
            jit_compile=bool(model.jit_compile),
            skip_padding=bool(skip_padding),
            notes=notes,
            chief=chief,
        )
    finally:
        if owner:
            release_owner(owner)
