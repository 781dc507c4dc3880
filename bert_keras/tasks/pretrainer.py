"""`Pretrainer`: masked-LM + next-sentence pretraining from a text corpus or from records."""

import json
import logging
import os

import keras

from bert_keras.config import ConfigError
from bert_keras.models.pretrainer import BertPretrainer
from bert_keras.tasks.inputs import TaskInputError
from pipelines.pretraining.settings import MaskingSettings
from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD

# The size names `from_config` takes (`bert-keras pretrain --config NAME`).
NAMED_CONFIGS = ("tiny", "mini", "small", "medium", "base", "large")


@keras.saving.register_keras_serializable(package="bert_keras.tasks")
class Pretrainer(BertPretrainer):
    """BERT pretraining (MLM + NSP) as a `keras.Model`: `bert_keras.models.BertPretrainer` plus data.

    `fit(corpus=...)` masks a one-sentence-per-line corpus (blank line between
    documents) on the fly, in `tf.data` (`pipelines.pretraining.
    dynamic_pretraining_dataset`); `fit(records=...)` reads the TFRecords of
    `bert-keras create-pretraining-data`. Training is
    `bert_keras.training.run_pretraining`: AdamW with warmup and linear decay,
    step checkpoints and a backup in `output_dir`; run the same call again after
    a crash and it resumes. A `tf.data.Dataset` of `(x, y)` batches goes to
    Keras' own `fit`.

    Example:

    >>> from bert_keras.tasks import Pretrainer
    >>> pretrainer = Pretrainer.from_config("mini", vocab_file="vocab.txt")         # doctest: +SKIP
    >>> result = pretrainer.fit(corpus="corpus.txt", output_dir="run", steps=1000)  # doctest: +SKIP
    >>> pretrainer.encoder.save("run/encoder.keras")                                # doctest: +SKIP

    The whole run of `bert-keras pretrain` (distribution strategy, mixed
    precision, the model built in the strategy's scope, resume, and
    `encoder.keras` + `config.json` + `vocab.txt` written at the end) is
    the class method `pretrain`:

    >>> result = Pretrainer.pretrain("run", steps=1000, corpus="corpus.txt",
    ...                              vocab_file="vocab.txt", config="mini")  # doctest: +SKIP

    Outputs of `fit(corpus= | records=)` and `pretrain`: a
    `bert_keras.training.PretrainingResult` (`initial_step`, `final_step`,
    `metrics` with `loss`, `mlm_accuracy`, `nsp_accuracy`, `steps_per_sec`,
    `examples_per_sec`, `checkpoint`, `notes`, `already_complete`, `chief`).
    """

    vocab_file = None
    lowercase = True
    strip_accents = None
    pre_tokenizer = None  # the morpheme analyzer a corpus is split with (the vocabulary's recorded one)
    max_input_chars_per_word = None  # the vocabulary's word length limit (None: resolved from it)
    added_tokens = ()  # the tokens a corpus's text finds whole ("[E1]"): the checkpoint's, or the vocabulary's
    unicode_normalization = None  # "NFC": a corpus composed before tokenizing (the vocabulary's recorded one)

    @classmethod
    def from_config(cls, config, *, vocab_file=None, lowercase=None, strip_accents=None, pre_tokenizer=None,
                    max_input_chars_per_word=None, unicode_normalization=None, dtype=None):
        """A randomly initialised pretrainer.

        Args:
            config: a `BertConfig`, a size name (`NAMED_CONFIGS`: `"mini"`,
                `"base"`, ...; the vocabulary gives its `vocab_size`), or a
                config JSON file (ours, google-research's or Hugging Face's).
            vocab_file: the WordPiece vocabulary (needed by a size name and
                by `fit(corpus=)`).
            lowercase, strip_accents: the corpus' tokenization (None: the vocabulary's
                `tokenizer_config.json`, else as its vocabulary's tokens show; `pipelines.tokenizer.tokenizer_config`).
            pre_tokenizer: the morpheme analyzer a corpus is split with (None: the one the
                vocabulary records, `bert-keras vocab --pre-tokenizer kiwi`'s; "none": no analyzer).
            max_input_chars_per_word: a corpus's longer words read as one [UNK] (None: the
                vocabulary's limit: recorded, 100 in an HF directory, else the original's 200).
            unicode_normalization: "NFC" composes a corpus before tokenizing (None: the one the
                vocabulary records, `bert-keras vocab --unicode-normalization NFC`'s; "none": text as given).
            dtype: a Keras dtype policy (`"mixed_float16"`, ...); None = the global one.
        """
        from bert_keras.encoder import BertEncoder

        if isinstance(config, dict):  # Keras' own (`get_config`): load_model, clone_model
            return cls._from_keras_config(config)
        pretrainer = cls(BertEncoder(read_config(config, vocab_file), dtype=dtype))
        pretrainer.vocab_file = None if vocab_file is None else os.fspath(vocab_file)
        pretrainer._set_tokenization(lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word,
                                     unicode_normalization)
        pretrainer.added_tokens = corpus_added_tokens(pretrainer.vocab_file, pretrainer.pre_tokenizer)
        return pretrainer

    def get_config(self):
        # The corpus' tokenization too, so that a model read back from a `.keras` file reads a
        # corpus as this one does.
        return {**super().get_config(), "vocab_file": self.vocab_file, "lowercase": self.lowercase,
                "strip_accents": self.strip_accents, "pre_tokenizer": self.pre_tokenizer,
                "max_input_chars_per_word": self.max_input_chars_per_word,
                **({"added_tokens": list(self.added_tokens)} if self.added_tokens else {}),
                **({"unicode_normalization": self.unicode_normalization} if self.unicode_normalization else {})}

    @classmethod
    def _from_keras_config(cls, config):
        """The pretrainer `get_config` describes. `from_config` takes a size name, a `BertConfig`
        or a JSON file, and Keras hands it a dict: `keras.models.load_model` of a saved
        pretrainer failed with a TypeError from reading the dict as a path."""
        config = dict(config)
        tokenization = {key: config.pop(key, None)
                        for key in ("vocab_file", "lowercase", "strip_accents", "pre_tokenizer",
                                    "max_input_chars_per_word", "added_tokens", "unicode_normalization")}
        pretrainer = super().from_config(config)
        pretrainer.vocab_file = tokenization["vocab_file"]
        pretrainer.lowercase = cls.lowercase if tokenization["lowercase"] is None else bool(tokenization["lowercase"])
        pretrainer.strip_accents = tokenization["strip_accents"]
        pretrainer.pre_tokenizer = tokenization["pre_tokenizer"]
        # None (a file saved before it was kept): resolved from the vocabulary at `fit(corpus=)`
        pretrainer.max_input_chars_per_word = tokenization["max_input_chars_per_word"]
        pretrainer.added_tokens = tuple(tokenization["added_tokens"] or ())
        pretrainer.unicode_normalization = tokenization["unicode_normalization"]
        return pretrainer

    def _set_tokenization(self, lowercase, strip_accents, pre_tokenizer=None, max_input_chars_per_word=None,
                          unicode_normalization=None):
        from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings

        rules = resolve_tokenizer_settings(self.vocab_file, lowercase, strip_accents, pre_tokenizer,
                                           max_input_chars_per_word, unicode_normalization)
        self.unicode_normalization = rules["unicode_normalization"]
        self.lowercase, self.strip_accents = bool(rules["lowercase"]), rules["strip_accents"]
        self.pre_tokenizer = rules["pre_tokenizer"]
        self.max_input_chars_per_word = rules["max_input_chars_per_word"]

    @classmethod
    def from_pretrained(cls, spec, *, vocab_file=None, lowercase=None, strip_accents=None, pre_tokenizer=None,
                        max_input_chars_per_word=None, unicode_normalization=None, strict=False, dtype=None,
                        name="bert_pretrainer"):
        """Continues pretraining from a checkpoint (`BertPretrainer.from_pretrained`); the tokenization
        arguments are `from_config`'s. The tokens the checkpoint's tokenizer adds ("[E1]": an HF
        checkpoint's, or those recorded beside its vocabulary) are found whole in a corpus, as a task
        from it finds them (`bert_keras.checkpoints.reading_added_tokens`); with `vocab_file=`, those
        recorded beside that vocabulary."""
        from bert_keras.checkpoints import find_vocabulary, reading_added_tokens

        with reading_added_tokens(spec, vocab_file=vocab_file, pre_tokenizer=pre_tokenizer) as added:
            pretrainer = super().from_pretrained(spec, strict=strict, dtype=dtype, name=name)
            pretrainer.vocab_file = vocab_file or find_vocabulary(spec)
        pretrainer._set_tokenization(lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word,
                                     unicode_normalization)
        pretrainer.added_tokens = tuple(added) or corpus_added_tokens(pretrainer.vocab_file, pretrainer.pre_tokenizer)
        return pretrainer

    def corpus_tokenizer(self):
        """The `pipelines.BertTokenizer` `fit(corpus=)` reads a corpus with: the vocabulary, its rules and
        the added tokens found whole (`added_tokens`)."""
        if self.vocab_file is None:
            raise TaskInputError("the pretrainer has no vocabulary: Pretrainer.from_config(..., vocab_file=)")
        return corpus_tokenizer(self.vocab_file, self.lowercase, self.strip_accents, self.pre_tokenizer,
                                self.max_input_chars_per_word, self.added_tokens, self.unicode_normalization)

    def fit(self, x=None, y=None, *, corpus=None, records=None, output_dir=None, steps=None,
            batch_size=32, seq_length=None, max_predictions=None, learning_rate=1e-4, warmup_steps=None,
            weight_decay=0.01, seed=0, checkpoint_every=1000, strategy=None,
            masked_lm_prob=MaskingSettings.masked_lm_prob, short_seq_prob=MaskingSettings.short_seq_prob,
            whole_word_mask=MaskingSettings.whole_word_mask, **kwargs):
        """Pretrains on `corpus` (text file) or `records` (TFRecord glob); see the class docstring.

        Args:
            x, y, **kwargs: Keras' `fit` on your own `(x, y)` batches (no corpus / records;
                a `BackupAndRestore` among the callbacks resumes as the uninterrupted run:
                docs/resuming.md); with a corpus / records, `callbacks=` and `verbose=`
                (anything else is refused).
            corpus: a one-sentence-per-line text file (or a list of them), masked on the fly.
            records: a glob of `create-pretraining-data` TFRecord files.
            output_dir: checkpoints, backup and TensorBoard logs; `run.json` records the settings: the
                same call again resumes or continues the run, other settings raise `RunDirectoryError`.
            steps: total optimizer steps.
            batch_size, seq_length, max_predictions: the global batch and its shapes (None: the
                records' own, as `create-pretraining-data` wrote them; a corpus's 128 and 20).
            learning_rate, warmup_steps (default steps // 10), weight_decay: the optimizer.
            seed: data order and masking seed.
            checkpoint_every: steps between checkpoints (and backups).
            strategy: a `tf.distribute.Strategy`: the one whose `scope()` the pretrainer was built
                in (its variables live there); None = that one.
            masked_lm_prob, short_seq_prob, whole_word_mask: how a corpus's examples are cut and
                masked, as `create-pretraining-data`'s flags (`pipelines.pretraining.settings.
                MaskingSettings`); records were masked when they were written: with `records=` they
                stay at their defaults.
        """
        if corpus is None and records is None:
            _refuse_raw_text(x, "fit")
            from bert_keras.tasks.fit_loop import resumed_own_batches
            from bert_keras.training.backup import forget_restored_epoch, with_run_backups

            forget_restored_epoch(self)  # an earlier fit's restored epoch: this one starts at its own
            # Your BackupAndRestore resumes as a task's fit does: dropout masks and batches.
            kwargs["callbacks"], backup = with_run_backups(kwargs.get("callbacks"))
            if backup is not None:
                x = resumed_own_batches(x, backup, kwargs.get("steps_per_epoch"), kwargs.get("initial_epoch", 0))
            if _is_dataset(x):  # Keras' default shuffle=True only warns that a dataset is not shuffled
                kwargs.setdefault("shuffle", False)
            return super().fit(x, y, **kwargs)
        from bert_keras.training import run_pretraining

        if not output_dir or not steps or steps < 1:
            raise TaskInputError("pretraining needs output_dir= and steps= (a positive number)")
        ignored = sorted(set(kwargs) - {"callbacks", "verbose"})
        if ignored or x is not None or y is not None:
            raise TaskInputError(
                f"fit(corpus=/records=) takes callbacks= and verbose= of Keras' fit, not "
                f"{', '.join(ignored + [n for n, v in (('x', x), ('y', y)) if v is not None])}: the run is "
                "sized by steps= (and batch_size=), its data is the corpus / records")
        masking = masking_settings(records, masked_lm_prob, short_seq_prob, whole_word_mask)
        seq_length, max_predictions = data_shapes(records, seq_length, max_predictions)
        strategy = self._training_strategy(strategy)
        check_seq_length(self.encoder.config, seq_length)
        check_segments(self.encoder.config)
        if corpus is not None:
            check_vocabulary_size(self.encoder.config, self.vocab_file)
        if self.max_input_chars_per_word is None and self.vocab_file:  # one read back from a .keras file
            self._set_tokenization(self.lowercase, self.strip_accents, self.pre_tokenizer or "none",
                                   unicode_normalization=self.unicode_normalization or "none")
        make_dataset = dataset_factory(
            corpus=corpus, records=records, vocab_file=self.vocab_file, lowercase=self.lowercase,
            strip_accents=self.strip_accents, pre_tokenizer=self.pre_tokenizer, batch_size=batch_size,
            seq_length=seq_length, max_predictions=max_predictions, seed=seed, masking=masking,
            max_input_chars_per_word=self.max_input_chars_per_word, added_tokens=self.added_tokens,
            unicode_normalization=self.unicode_normalization)
        if records is not None and self.max_input_chars_per_word is not None:  # as `pretrain` checks them
            check_records_word_limit(records, self.max_input_chars_per_word, None, self.vocab_file, built=True)
        if records is not None:
            check_records_normalization(records, self.unicode_normalization, None, self.vocab_file, built=True)
        # What identifies the run in output_dir's run.json, as `pretrain` records it: without it, a
        # fit on another corpus (or batch, length, model...) into a finished run's directory
        # returned that run `already_complete`, untrained, with its metrics. checkpoint_every is
        # recorded as given, so that a later call with more steps continues the run.
        settings = run_settings(
            records=records, corpus=corpus, vocab_file=self.vocab_file, lowercase=self.lowercase,
            strip_accents=self.strip_accents, pre_tokenizer=self.pre_tokenizer, config=self.encoder.config,
            init=None, seq_length=seq_length, max_input_chars_per_word=self.max_input_chars_per_word,
            max_predictions=max_predictions, batch_size=batch_size, learning_rate=learning_rate,
            weight_decay=weight_decay, seed=seed, checkpoint_every=checkpoint_every, steps_per_execution=1,
            masking=masking, added_tokens=self.added_tokens, unicode_normalization=self.unicode_normalization)
        return run_pretraining(
            build_model=lambda: self, make_dataset=make_dataset, output_dir=output_dir,
            num_train_steps=int(steps), global_batch_size=batch_size,
            num_warmup_steps=steps // 10 if warmup_steps is None else warmup_steps,
            learning_rate=learning_rate, weight_decay=weight_decay, strategy=strategy,
            checkpoint_every=min(checkpoint_every, int(steps)), verbose=kwargs.get("verbose", "auto"),
            callbacks=list(kwargs.get("callbacks") or ()), run_settings=settings,
            input_paths=input_paths(vocab_file=self.vocab_file, corpus=corpus, records=records))

    def _training_strategy(self, strategy):
        """The strategy `fit(corpus= | records=)` trains under: the one the pretrainer was built in.

        A model built outside `strategy.scope()` cannot train under `strategy` (Keras: "Need to be
        inside "with strategy.scope()""), and one built inside it, fitted outside it with no
        `strategy=`, failed with "Mixing different tf.distribute.Strategy objects".
        """
        import tensorflow as tf

        from bert_keras.training.strategy import describe, is_default_strategy

        own = getattr(self, "_distribute_strategy", None)  # Keras: the scope the model was created in
        if own is None:  # built outside any strategy's scope: one device
            asked = strategy or tf.distribute.get_strategy()
            if is_default_strategy(asked):
                return asked
        elif strategy is None or strategy is own:
            return own
        else:
            asked = strategy
        built = describe(own) if own is not None else "no strategy (one device)"
        raise TaskInputError(
            f"the pretrainer was built under {built}, and its variables live there: it cannot train under "
            f"the {describe(asked)} asked. Build it inside `with strategy.scope():` "
            "(Pretrainer.from_config / from_pretrained) and call fit there, or let "
            "Pretrainer.pretrain(output_dir, strategy=...) build it")

    def predict(self, x, *args, **kwargs):
        """Keras' `predict` on packed, masked batches (MLM and NSP logits); raw text is refused."""
        _refuse_raw_text(x, "predict")
        return super().predict(x, *args, **kwargs)

    @classmethod
    def pretrain(cls, output_dir, *, steps, corpus=None, records=None, config="base", init=None,
                 vocab_file=None, lowercase=None, strip_accents=None, pre_tokenizer=None,
                 max_input_chars_per_word=None, unicode_normalization=None, seq_length=None, max_predictions=None, batch_size=32, learning_rate=1e-4, warmup_steps=None, weight_decay=0.01, seed=0,
                 checkpoint_every=1000, keep_checkpoints=3, strategy="auto", tpu=None,
                 mixed_precision="auto", jit_compile="auto", steps_per_execution=1, overwrite=False,
                 masked_lm_prob=MaskingSettings.masked_lm_prob, short_seq_prob=MaskingSettings.short_seq_prob,
                 whole_word_mask=MaskingSettings.whole_word_mask, verbose="auto", log=None):
        """One resumable pretraining run in `output_dir`, from a fresh model or from `init`.

        It never destroys work (`bert_keras.training.run_pretraining`): a killed
        run resumes where it stopped when called again with the same
        arguments; a finished run is returned `already_complete` and left
        untouched; a larger `steps` continues a finished run from its last
        checkpoint; any other non-empty `output_dir` needs `overwrite=True`.
        At the end the chief writes `encoder.keras` (atomically), `config.json`
        and a copy of `vocab_file` into `output_dir`.

        Example:

        >>> result = Pretrainer.pretrain("runs/mini", steps=10000, records="out/*.tfrecord",
        ...                              vocab_file="vocab.txt", config="mini")  # doctest: +SKIP
        >>> result.final_step, result.metrics["loss"]                            # doctest: +SKIP

        Args:
            output_dir: checkpoints, backup, TensorBoard logs, `run.json` and the outputs.
            steps: total optimizer steps (resumed ones included).
            corpus, records: the data, one of them (see `fit`).
            config: model size or config (see `from_config`); ignored with `init`.
            init: start from these weights (encoder, and pretraining heads when
                present): any spec `BertPretrainer.from_pretrained` reads.
            vocab_file, lowercase, strip_accents: the vocabulary (copied to `output_dir`, with HF's
                `tokenizer_config.json`) and its rules (None: the vocabulary's `tokenizer_config.json`,
                else as its tokens show). Korean vocabularies: `strip_accents=False` keeps syllables whole.
            pre_tokenizer: the morpheme analyzer a corpus is split with (None: the one the vocabulary
                records, `bert-keras vocab --pre-tokenizer kiwi`'s; "none": the corpus is split already).
            max_input_chars_per_word: longer words read as one [UNK] (None: the vocabulary's recorded
                limit, else 200), for a corpus and in the run's `tokenizer_config.json`; records written
                with another limit (their `PREFIX-config.json`) are refused before any model is built.
            seq_length, max_predictions, batch_size: the global batch and its shapes (None: the
                records' own, as `create-pretraining-data` wrote them; a corpus's 128 and 20).
            learning_rate, warmup_steps (default steps // 10), weight_decay: the optimizer.
            seed: model initialisation, dropout, data order and masking.
            checkpoint_every, keep_checkpoints: checkpoints (and backups) every
                that many steps; how many are kept.
            strategy, tpu: a `tf.distribute.Strategy`, or its name for
                `bert_keras.training.get_strategy` (`"auto"`, `"mirrored"`, ...).
            mixed_precision: `bert_keras.training.choose_policy` mode (`"auto"`, `"off"`, ...): the
                Keras dtype policy of the run (global while it builds and trains; the caller's comes back after).
            jit_compile, steps_per_execution: XLA, and steps per `tf.function` call.
            overwrite: start afresh in an `output_dir` holding other work.
            masked_lm_prob, short_seq_prob, whole_word_mask: how a corpus's examples are cut and
                masked (see `fit`).
            verbose: Keras' `fit` verbosity (1: a progress bar, 2: one line per checkpoint).
            log: callable taking one line (the strategy and precision chosen); default logging.

        Returns:
            `bert_keras.training.PretrainingResult`.

        Raises:
            TaskInputError: bad arguments; `RunDirectoryError`: `output_dir` holds
            other work; `RecordsMismatchError`: records of other shapes (before
            any model is built); `StrategyError`: a strategy that cannot start.
        """
        from bert_keras.training import choose_policy, get_strategy, run_pretraining
        from bert_keras.training.strategy import describe

        if steps <= 0:
            raise TaskInputError("steps must be positive")
        masking = masking_settings(records, masked_lm_prob, short_seq_prob, whole_word_mask)
        seq_length, max_predictions = data_shapes(records, seq_length, max_predictions)
        if checkpoint_every % steps_per_execution:
            raise TaskInputError("checkpoint_every must be a multiple of steps_per_execution")
        if isinstance(strategy, str):
            strategy = get_strategy(strategy, tpu=tpu)
        replicas = strategy.num_replicas_in_sync
        if batch_size % replicas:
            raise TaskInputError(f"the global batch size {batch_size} is not divisible by {replicas} replicas")
        policy = choose_policy(mixed_precision, strategy)  # global only while the run builds and trains
        given_vocab = vocab_file
        added = []
        if vocab_file is None and init:
            from bert_keras.checkpoints import find_vocabulary, reading_added_tokens

            # the tokens the checkpoint's tokenizer adds ("[E1]"), found whole in the corpus as a task finds them
            with reading_added_tokens(init, pre_tokenizer=pre_tokenizer) as added:
                vocab_file = find_vocabulary(init)
        from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings

        rules = resolve_tokenizer_settings(vocab_file, lowercase, strip_accents, pre_tokenizer,
                                           max_input_chars_per_word, unicode_normalization)
        lowercase, strip_accents, pre_tokenizer = rules["lowercase"], rules["strip_accents"], rules["pre_tokenizer"]
        given_normalization, unicode_normalization = unicode_normalization, rules["unicode_normalization"]
        added_tokens = tuple(added) or corpus_added_tokens(vocab_file, pre_tokenizer)
        max_chars = rules["max_input_chars_per_word"]
        model_config = None if init else read_config(config, vocab_file)
        if model_config is not None:  # before anything is written (an `init`'s config: once it is read)
            check_seq_length(model_config, seq_length)
            check_segments(model_config)
            check_vocabulary_size(model_config, vocab_file)
        make_dataset = dataset_factory(
            corpus=corpus, records=records, vocab_file=vocab_file, lowercase=lowercase,
            strip_accents=strip_accents, pre_tokenizer=pre_tokenizer, batch_size=batch_size, seq_length=seq_length,
            max_predictions=max_predictions, seed=seed, masking=masking, max_input_chars_per_word=max_chars,
            added_tokens=added_tokens, unicode_normalization=unicode_normalization)
        if records is not None:
            check_records_word_limit(records, max_chars, max_input_chars_per_word, vocab_file)
            check_records_normalization(records, unicode_normalization, given_normalization, vocab_file)

        def build_model():
            if init:
                model = cls.from_pretrained(init, vocab_file=given_vocab, lowercase=lowercase,
                                            strip_accents=strip_accents, pre_tokenizer=pre_tokenizer or "none",
                                            max_input_chars_per_word=max_chars, dtype=policy,
                                            unicode_normalization=unicode_normalization or "none")
                check_seq_length(model.encoder.config, seq_length)
                check_segments(model.encoder.config)
                check_vocabulary_size(model.encoder.config, vocab_file)
                return model
            return cls.from_config(model_config, vocab_file=vocab_file, lowercase=lowercase,
                                   strip_accents=strip_accents, pre_tokenizer=pre_tokenizer or "none",
                                   max_input_chars_per_word=max_chars, dtype=policy,
                                   unicode_normalization=unicode_normalization or "none")

        (log or logging.getLogger(__name__).info)(
            f"strategy: {describe(strategy)}; dtype policy {policy}; global batch {batch_size}")
        settings = run_settings(
            records=records, corpus=corpus, vocab_file=vocab_file, lowercase=lowercase,
            strip_accents=strip_accents, pre_tokenizer=pre_tokenizer, config=config,
            init=init, seq_length=seq_length, max_predictions=max_predictions, batch_size=batch_size,
            learning_rate=learning_rate, weight_decay=weight_decay, seed=seed,
            checkpoint_every=checkpoint_every, steps_per_execution=steps_per_execution, masking=masking,
            max_input_chars_per_word=max_chars, added_tokens=added_tokens, unicode_normalization=unicode_normalization)
        # The caller's global dtype policy comes back afterwards: a model built after a float16 run
        # (or after a failed check) was mixed_float16 too.
        previous_policy = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)
        try:
            return run_pretraining(
                build_model=build_model, make_dataset=make_dataset, output_dir=output_dir,
                num_train_steps=steps, num_warmup_steps=steps // 10 if warmup_steps is None else warmup_steps,
                learning_rate=learning_rate, weight_decay=weight_decay, global_batch_size=batch_size,
                strategy=strategy, steps_per_execution=steps_per_execution, jit_compile=jit_compile,
                checkpoint_every=checkpoint_every, keep_checkpoints=keep_checkpoints, verbose=verbose,
                run_settings=settings, overwrite=overwrite, seed=seed,
                save_outputs=lambda model: save_outputs(model, output_dir, vocab_file,
                                                        {"lowercase": lowercase, "strip_accents": strip_accents,
                                                         "pre_tokenizer": pre_tokenizer,
                                                         "max_input_chars_per_word":
                                                             None if max_chars == ORIGINAL_MAX_CHARS_PER_WORD
                                                             else max_chars, "added_tokens": added_tokens,
                                                         "unicode_normalization": unicode_normalization}),
                input_paths=input_paths(vocab_file=vocab_file, init=init, config=config, corpus=corpus,
                                        records=records))
        finally:
            keras.config.set_dtype_policy(previous_policy)


# The shapes of a corpus's examples (dynamic masking) when none are given: google-research's defaults.
DEFAULT_SEQ_LENGTH, DEFAULT_MAX_PREDICTIONS = 128, 20


def masking_settings(records, masked_lm_prob, short_seq_prob, whole_word_mask):
    """The checked `MaskingSettings` of a run; a `TaskInputError` for a setting out of range, or for
    settings other than the defaults with `records` (masked when `create-pretraining-data` wrote them:
    they would be ignored)."""
    try:
        masking = MaskingSettings(masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob,
                                  whole_word_mask=whole_word_mask)
    except ValueError as error:
        raise TaskInputError(str(error)) from None
    changed = [f"{name}={value!r}" for name, value in masking.masking().items()
               if value != getattr(MaskingSettings, name)]
    if records is not None and changed:
        raise TaskInputError(
            f"{', '.join(changed)}: records are masked when they are written, so this would be ignored; give "
            "it to create-pretraining-data (--masked-lm-prob, --short-seq-prob, --whole-word-mask) and write "
            "the records again, or pretrain on the text (corpus=, --input)")
    return masking


def check_records_word_limit(records, limit, given, vocab_file, *, built=False):
    """A `TaskInputError` naming both limits when `records` were tokenized with another word length
    limit than the run's `limit` (`given`, else the vocabulary's): the encoder saved beside the run
    would read fine-tuning text with `limit`, not the one it was pretrained on. `built`: the limit is
    a built pretrainer's (`fit(records=)`), set when it was built."""
    from pipelines.pretraining.reader import records_word_limits
    from pipelines.tokenizer.tokenizer_config import tokenizer_config_path

    for source, written in records_word_limits(records).items():
        if written == limit:
            continue
        if built:
            raise TaskInputError(
                f"records={records!r} were tokenized with max_input_chars_per_word {written} ({source}), but the "
                f"pretrainer reads words with {limit}, and the encoder it saves would read text with {limit}, not the "
                f"limit it was pretrained on; build it with max_input_chars_per_word={written} "
                "(Pretrainer.from_config / from_pretrained), or write the records again with "
                f"{limit} (create-pretraining-data --max-chars-per-word {limit})")
        if given is not None:
            run = "max_input_chars_per_word (--max-chars-per-word) was given"
        elif vocab_file and os.path.isfile(tokenizer_config_path(vocab_file)):
            run = f"the vocabulary reads words with that ({tokenizer_config_path(vocab_file)})"
        else:
            run = f"the vocabulary {vocab_file} records no limit, so this run reads words with that"
        raise TaskInputError(
            f"records={records!r} (--data) were tokenized with max_input_chars_per_word {written} ({source}), but this "
            f"run's is {limit}: {run}. The encoder it saves would read text with {limit}, not the limit it was "
            f"pretrained on; pass max_input_chars_per_word={written} (--max-chars-per-word {written}), or write the "
            f"records again with {limit}")


def check_records_normalization(records, form, given, vocab_file, *, built=False):
    """A `TaskInputError` naming both forms and the files when `records` were written from text composed
    otherwise than the run's `form` ("NFC" or None; `given`, else the vocabulary's recorded one): the
    encoder saved beside the run would read fine-tuning text composed (or not) unlike the text it was
    pretrained on, and decomposed Hangul as [UNK] where it was pretrained on syllables. `built`: the form
    is a built pretrainer's (`fit(records=)`)."""
    from pipelines.pretraining.reader import records_unicode_normalizations
    from pipelines.tokenizer.tokenizer_config import UNICODE_NORMALIZATION_KEY, tokenizer_config_path

    for source, written in records_unicode_normalizations(records).items():
        if written == form:
            continue
        ours, theirs = form or "none", written or "none"
        if built:
            raise TaskInputError(
                f"records={records!r} were written with unicode_normalization={theirs} ({source}), but the "
                f"pretrainer's is {ours}, and the encoder it saves would read text with {ours}, not as it was "
                f"pretrained; build it with unicode_normalization={theirs!r} (Pretrainer.from_config / "
                f"from_pretrained), or write the records again with {ours} (create-pretraining-data "
                f"--unicode-normalization {ours})")
        config = tokenizer_config_path(vocab_file) if vocab_file else None
        if given is not None:
            run = "unicode_normalization (--unicode-normalization) was given"
        elif vocab_file is None:
            run = "no vocabulary is given (vocab_file=, --vocab), so this run reads text as given"
        elif form is not None:
            run = f"the vocabulary records it ({config}: {UNICODE_NORMALIZATION_KEY})"
        else:
            run = (f"the vocabulary records none ({config if config and os.path.isfile(config) else vocab_file}), "
                   "so this run reads text as given")
        raise TaskInputError(
            f"records={records!r} (--data) were written with unicode_normalization={theirs} ({source}), but this "
            f"run's is {ours}: {run}. The encoder it saves would read fine-tuning text with {ours}, not as it was "
            f"pretrained; pass unicode_normalization={theirs!r} (--unicode-normalization {theirs}), or write the "
            f"records again with {ours} (create-pretraining-data --unicode-normalization {ours})")


def data_shapes(records, seq_length, max_predictions):
    """`(seq_length, max_predictions)`: each None one the records' own (`records_layout`: what
    `create-pretraining-data --seq-length --max-predictions` wrote), else 128 / 20.

    Records that are not found leave the defaults: `dataset_factory` reports them. Records that
    cannot be measured (a damaged `PREFIX-config.json`, a file that is not records) raise their
    `ValueError` here, before a size check reads the defaults as the records' own.
    """
    layout = {}
    if records is not None and (seq_length is None or max_predictions is None):
        from pipelines.pretraining.reader import records_layout

        try:
            layout = records_layout(records)
        except FileNotFoundError:
            pass
    if seq_length is None:
        seq_length = layout.get("max_seq_length", DEFAULT_SEQ_LENGTH)
    if max_predictions is None:
        max_predictions = layout.get("max_predictions_per_seq", DEFAULT_MAX_PREDICTIONS)
    return seq_length, max_predictions


def check_seq_length(config, seq_length):
    """A `TaskInputError` when `seq_length` is longer than the model's position embeddings.

    Keras' own error comes from inside the embeddings' graph, once training starts ("Dimensions must
    be equal, but are 600 and 512 for '{{node ...}}'").
    """
    if seq_length > config.max_position_embeddings:
        raise TaskInputError(
            f"seq_length {seq_length} (--seq-length) is longer than the model's {config.max_position_embeddings} "
            f"position embeddings (max_position_embeddings of its config): use {config.max_position_embeddings} "
            "or less, or a config with more positions")


def check_segments(config):
    """A `TaskInputError` when the model has fewer than two token types.

    Pretraining packs `[CLS] A [SEP] B [SEP]` with segment id 1 on sentence B (the next-sentence
    task): a one-type model failed at the first step ("indices[0,8] = 1 is not in [0, 1)") on a
    CPU, and reads zero embeddings on a GPU.
    """
    if config.type_vocab_size < 2:
        raise TaskInputError(
            f"the model has type_vocab_size={config.type_vocab_size} (of its config): pretraining packs two "
            "segments ([CLS] A [SEP] B [SEP], sentence B with segment id 1, for next-sentence prediction) and "
            "needs 2; use a config with type_vocab_size 2")


def check_vocabulary_size(config, vocab_file):
    """A `TaskInputError` when `vocab_file` holds more tokens than the model has embeddings.

    Its ids past the model's `vocab_size` would fail the embedding lookup mid-training
    ("indices[0,7] = 807 is not in [0, 600)"; a GPU reads zeros instead). Fewer tokens are
    allowed: a model's embedding table may be padded past its vocabulary.
    """
    if vocab_file is None:
        return
    from pipelines.tokenizer.vocab import load_vocabulary

    try:
        config.check_vocabulary_size(len(load_vocabulary(vocab_file)), vocab_file)
    except ConfigError as error:
        raise TaskInputError(f"{error}, or a config of its size") from None


def read_config(config, vocab_file=None):
    """A `BertConfig` from a `BertConfig`, a size name, or a JSON file in our, google-research or HF format.

    Example:

    >>> read_config("tiny", None)
    Traceback (most recent call last):
    ...
    bert_keras.tasks.inputs.TaskInputError: config 'tiny' needs the vocabulary (vocab_file=, --vocab) for its vocab_size
    """
    from bert_keras.config import BertConfig
    from pipelines.tokenizer.vocab import load_vocabulary

    if isinstance(config, BertConfig):
        return config
    if config in NAMED_CONFIGS:
        if vocab_file is None:
            raise TaskInputError(f"config {config!r} needs the vocabulary (vocab_file=, --vocab) for its vocab_size")
        return BertConfig.named(config, vocab_size=len(load_vocabulary(vocab_file)))
    if not os.path.isfile(config):
        raise TaskInputError(f"config {config!r} is neither a size ({', '.join(NAMED_CONFIGS)}) nor a JSON file")
    try:
        with open(config, encoding="utf-8") as f:
            data = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise TaskInputError(f"config {config}: not a JSON file ({error})") from None
    if not isinstance(data, dict):
        raise TaskInputError(f"config {config}: a JSON object of BertConfig fields is expected")
    # Read from the path, so that an error names the file.
    if "model_type" in data:
        return BertConfig.from_hf_json(config)
    if "num_hidden_layers" in data:
        return BertConfig.from_google_json(config)
    return BertConfig.from_json(config)


def dataset_factory(*, corpus, records, vocab_file, lowercase, batch_size, seq_length, max_predictions, seed,
                    strip_accents=None, pre_tokenizer=None, masking=None, max_input_chars_per_word=None,
                    added_tokens=(), unicode_normalization=None):
    """A () -> infinite `tf.data.Dataset` of global `(x, y)` batches, the same stream on every call.

    The inputs are checked before any model is built: records must exist and
    have the asked shapes (`pipelines.pretraining.RecordsMismatchError`), a
    corpus must exist and have a vocabulary. `masking`: the corpus's `MaskingSettings`
    (None: the defaults). `added_tokens`: found whole in the corpus (one id each, a word of its own
    for the masked LM; a special one never masked). `unicode_normalization`: "NFC" composes the corpus first.
    """
    import tensorflow as tf

    from pipelines import pretraining as pretraining_data

    if (corpus is None) == (records is None):
        raise TaskInputError("pass corpus= (text files) or records= (TFRecord files), not both")
    common = dict(batch_size=batch_size, seq_length=seq_length, max_predictions_per_seq=max_predictions,
                  seed=seed, shuffle=True, repeat=True)
    if records is not None:
        from pipelines.pretraining.reader import record_files

        try:
            record_files(records)
        except FileNotFoundError as error:
            problem = str(error).removeprefix("No pretraining data: ")
            raise TaskInputError(f"records={records!r} (--data): {problem}") from None
        pretraining_data.check_records_layout(records, seq_length=seq_length,
                                              max_predictions_per_seq=max_predictions)
        return lambda: pretraining_data.pretraining_dataset(records, **common)
    paths = [os.fspath(path) for path in ([corpus] if isinstance(corpus, (str, os.PathLike)) else corpus)]
    for path in paths:
        if not tf.io.gfile.glob(path):
            raise TaskInputError(f"corpus={path!r}: no such file")
    from pipelines.corpus import CorpusError, check_text_files

    if vocab_file is None:
        raise TaskInputError("corpus= needs the vocabulary: Pretrainer.from_config(..., vocab_file=)")
    tokenizer = corpus_tokenizer(vocab_file, lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word,
                                 added_tokens, unicode_normalization)
    try:
        # one pass: a bad byte or an empty corpus stops here, not mid-training; decomposed Hangul is warned
        check_text_files(paths, tokenizer)
    except CorpusError as error:
        raise TaskInputError(str(error)) from None
    masking = (masking or MaskingSettings()).masking()
    return lambda: pretraining_data.dynamic_pretraining_dataset(corpus, tokenizer, **common, **masking)


def corpus_tokenizer(vocab_file, lowercase, strip_accents=None, pre_tokenizer=None, max_input_chars_per_word=None,
                     added_tokens=(), unicode_normalization=None):
    """The `pipelines.BertTokenizer` a corpus is read with (`fit(corpus=)`, `pretrain(corpus=)`): the run's
    rules, the vocabulary's word length limit unless given, its `added_tokens` found whole, its text
    composed first with `unicode_normalization` ("NFC") when given."""
    from pipelines import BertTokenizer

    if max_input_chars_per_word is None:  # the vocabulary's word length limit, as the models built on it read
        from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings

        max_input_chars_per_word = resolve_tokenizer_settings(
            vocab_file, lowercase, strip_accents, pre_tokenizer or "none")["max_input_chars_per_word"]
    return BertTokenizer(vocab_file, lowercase=lowercase, strip_accents=strip_accents, pre_tokenizer=pre_tokenizer,
                         max_input_chars_per_word=max_input_chars_per_word, added_tokens=list(added_tokens),
                         unicode_normalization=unicode_normalization)


def corpus_added_tokens(vocab_file, pre_tokenizer=None):
    """The added tokens recorded beside `vocab_file` (a conversion's, an earlier run's `tokenizer_config.json`),
    found whole in a corpus, as `create-pretraining-data` finds them
    (`pipelines.tokenizer.tokenizer_config.recorded_added_tokens`); () without any."""
    from pipelines.tokenizer.tokenizer_config import recorded_added_tokens

    return tuple(recorded_added_tokens(vocab_file, pre_tokenizer or "none"))


def run_settings(*, records, corpus, vocab_file, lowercase, config, init, seq_length, max_predictions,
                 batch_size, learning_rate, weight_decay, seed, checkpoint_every, steps_per_execution,
                 strip_accents=None, pre_tokenizer=None, masking=None, max_input_chars_per_word=None,
                 added_tokens=(), unicode_normalization=None):
    """What identifies a run in its `run.json`: a rerun must match it to resume or continue."""
    def absolute(path):
        if path is None:
            return None
        path = os.fspath(path)
        return path if "://" in path or ":" in path.split("/")[0] else os.path.abspath(path)

    def weights(spec):
        kind, colon, rest = (spec or "").partition(":")
        if colon and kind in ("hf", "tf1", "keras-hub"):
            return f"{kind}:{os.path.abspath(rest)}"
        return spec if colon or spec is None else os.path.abspath(spec)

    if corpus is not None and isinstance(corpus, (str, os.PathLike)):
        corpus = [corpus]
    named = isinstance(config, str) and (config in NAMED_CONFIGS or init)
    return {
        "data": absolute(records), "text": [absolute(p) for p in corpus] if corpus else None,
        "vocab": absolute(vocab_file), "cased": not lowercase,
        "config": config if named else absolute(config) if isinstance(config, str) else config.to_dict(),
        "init": weights(init), "seq_length": seq_length, "max_predictions": max_predictions,
        "global_batch_size": batch_size, "learning_rate": learning_rate, "weight_decay": weight_decay,
        "seed": seed, "checkpoint_every": checkpoint_every, "steps_per_execution": steps_per_execution,
        # only when it departs from the casing, so that runs recorded before the setting still match
        **({"strip_accents": bool(strip_accents)}
           if strip_accents is not None and bool(strip_accents) != bool(lowercase) else {}),
        **({"pre_tokenizer": pre_tokenizer} if pre_tokenizer else {}),  # likewise: only when there is one
        # likewise: the vocabulary's word length limit, when it is not the original's 200, for a run
        # that tokenizes a corpus (records were tokenized when written: the limit changes nothing there)
        **({"max_input_chars_per_word": max_input_chars_per_word}
           if corpus and max_input_chars_per_word not in (None, ORIGINAL_MAX_CHARS_PER_WORD) else {}),
        # likewise: the added tokens a corpus's text finds whole
        **({"added_tokens": [entry if isinstance(entry, str) else entry["content"] for entry in added_tokens]}
           if corpus and added_tokens else {}),
        # likewise: a corpus composed before tokenizing
        **({"unicode_normalization": unicode_normalization} if corpus and unicode_normalization else {}),
        # likewise: the masking settings that depart from the defaults
        **{name: value for name, value in (masking or MaskingSettings()).masking().items()
           if value != getattr(MaskingSettings, name)},
    }


def input_paths(*, vocab_file=None, init=None, config=None, corpus=None, records=None):
    """The local files a pretraining run reads (a run's `--overwrite` must not remove them)."""
    import glob

    from bert_keras.checkpoints.loading import local_path

    paths = [local_path(init)] if init else []
    if isinstance(config, (str, os.PathLike)) and os.path.exists(config):
        paths.append(config)
    if corpus is not None:
        paths += [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
    if records is not None:
        paths += glob.glob(os.fspath(records)) or [os.path.dirname(os.fspath(records)) or "."]
    if vocab_file:  # its rules file too (HF's tokenizer_config.json), when it has one
        from pipelines.tokenizer.tokenizer_config import tokenizer_config_path

        rules = tokenizer_config_path(vocab_file)
        paths += [rules] if os.path.exists(rules) else []
    return [os.fspath(p) for p in [vocab_file, *paths] if p]


def save_outputs(model, output_dir, vocab_file=None, tokenizer_settings=None):
    """`encoder.keras` (atomically) with its pretraining heads in `encoder.heads.npz` (so that a second
    phase, `--init run/encoder.keras` at a longer sequence length, continues them), `config.json`, a
    copy of `vocab_file` and HF's `tokenizer_config.json` (the tokenization the run used, so that
    fine-tuning reads text the same way) into `output_dir`."""
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.checkpoints.heads import pretrainer_heads_to_canonical

    from pipelines.atomic_writes import write_bytes, write_text

    save_pretrained(model.encoder, os.path.join(output_dir, "encoder.keras"),
                    heads=pretrainer_heads_to_canonical(model))
    # Atomically, as every file of the project: `to_json(path)` and `shutil.copyfile` wrote in place, so
    # a run killed there left a truncated config.json or vocab.txt beside a whole encoder.keras.
    write_text(os.path.join(output_dir, "config.json"), model.encoder.config.to_json())
    target = os.path.join(output_dir, "vocab.txt")
    if vocab_file and not (os.path.exists(target) and os.path.samefile(vocab_file, target)):
        with open(vocab_file, "rb") as source:
            write_bytes(target, source.read())
    if vocab_file and tokenizer_settings is not None:
        from pipelines.tokenizer.tokenizer_config import write_tokenizer_settings

        write_tokenizer_settings(target, lowercase=tokenizer_settings.get("lowercase", True),
                                 strip_accents=tokenizer_settings.get("strip_accents"),
                                 pre_tokenizer=tokenizer_settings.get("pre_tokenizer"),
                                 max_input_chars_per_word=tokenizer_settings.get("max_input_chars_per_word"),
                                 added_tokens=tokenizer_settings.get("added_tokens"),
                                 unicode_normalization=tokenizer_settings.get("unicode_normalization"))


def _refuse_raw_text(x, call):
    """A `TaskInputError` for raw text given to Keras' `fit` / `predict` of a `Pretrainer`."""
    import numpy as np

    if isinstance(x, np.ndarray):
        texts = x.dtype.kind in "US" or (x.dtype.kind == "O" and x.size and isinstance(x.flat[0], (str, bytes)))
    else:
        texts = isinstance(x, (str, bytes)) or (isinstance(x, (list, tuple)) and bool(x)
                                                and all(isinstance(t, (str, bytes)) for t in x))
    if texts:
        raise TaskInputError(
            f"Pretrainer.{call}: raw text is read from a corpus file, not from x: "
            "fit(corpus='corpus.txt', output_dir='run', steps=N) (one sentence per line, a blank line "
            "between documents); x takes packed, masked batches (pipelines.pretraining)")


def _is_dataset(x):
    import tensorflow as tf

    return isinstance(x, tf.data.Dataset)
