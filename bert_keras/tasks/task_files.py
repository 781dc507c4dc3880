"""A task on disk: the fine-tuned model directory (`save` / `load`) and Keras' `.keras` config.

`save_task` writes `bert_keras.finetuned_model`'s layout (model, vocabulary, labels, `task.json`
with the settings and the fine-tuning recipe, and the optimizer's state once it has trained);
`load` reads it back as the family's task class, recipe compiled, the optimizer's state read by
the first `fit`. `task_config` / `task_from_config` are what Keras calls for a `.keras` file: the
head, and the text side inline (the vocabulary's tokens), so the file is self-contained.

Example:

    >>> from bert_keras import tasks
    >>> task = tasks.load("out/sentiment")           # doctest: +SKIP
    >>> task.save("out/sentiment-copy")              # doctest: +SKIP
    'out/sentiment-copy'
"""

import dataclasses
import hashlib
import os
import tempfile

import keras

from bert_keras.families import family, resolve
from bert_keras.finetuned_model import read_finetuned, save_finetuned
from bert_keras.models.frozen_layers import freeze_layers, frozen_layers
from bert_keras.tasks import recipe as finetuning_recipe
from bert_keras.tasks.inputs import TaskInputError
from pipelines.tokenizer.vocab import load_vocabulary


def to_finetuned(task):
    """`task` as a `bert_keras.finetuned_model.FinetunedModel` (what `save_task` writes)."""
    return dataclasses.replace(task._record, model=task.head, labels=task.labels, settings=task.settings,
                               training=dict(task._record.training), recipe=task.recipe)


def save_task(task, directory, overwrite=None, include_optimizer=True, **kwargs):
    """Writes the fine-tuned model directory (`bert_keras.finetuned_model`), atomically.

    Never deletes what you own: a directory holding anything but a fine-tuned model is refused
    (the error lists what is there); an existing fine-tuned model is replaced only with
    `overwrite=True`, and then only the files of the format. A path ending in `.h5` (Keras'
    legacy format) saves the head alone and overwrites by default, as Keras does. Returns the
    directory.

    The directory keeps the fine-tuning recipe's settings (`recipe`) and, with
    `include_optimizer` (the default, as Keras' `.keras` files), the optimizer's state once it has
    trained (`optimizer.npz`: AdamW's moments are twice the weights' size), so that
    `tasks.load(directory).fit(...)` continues the run.
    """
    path = os.fspath(directory)
    if path.endswith(".h5"):
        return task.head.save(path, overwrite=True if overwrite is None else overwrite, **kwargs)
    state = finetuning_recipe.optimizer_state(task) if include_optimizer else None
    return save_finetuned(path, to_finetuned(task), overwrite=bool(overwrite), optimizer_state=state)


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
    task = cls(finetuned.model, vocab_file=finetuned.vocab_file, seq_length=finetuned.seq_length,
               lowercase=finetuned.lowercase, strip_accents=finetuned.strip_accents,
               pre_tokenizer=finetuned.pre_tokenizer, max_input_chars_per_word=finetuned.max_input_chars_per_word,
               unicode_normalization=finetuned.unicode_normalization, added_tokens=finetuned.added_tokens, labels=finetuned.labels, settings=finetuned.settings,
               training=finetuned.training, eval_results=finetuned.eval_results)
    task._compile_recipe(**(finetuned.recipe or {}))
    task._saved_optimizer_directory = finetuned.directory  # its optimizer.npz, read by the first fit
    return task


def task_config(task):
    """The task as Keras serializes it: its head, and the text side inline (the vocabulary's
    tokens, so a `.keras` file is self-contained)."""
    text = task._record
    # Read as the tokenizer reads it: str.splitlines also ends a line at \v, \f, \x1c-\x1e, \x85, U+2028
    # and U+2029, so a token holding one became two, and the reloaded task's ids shifted from there.
    vocabulary = load_vocabulary(text.vocab_file)
    return {"name": task.name, "head": keras.saving.serialize_keras_object(task.head),
            "vocabulary": vocabulary, "lowercase": text.lowercase,
            "strip_accents": text.strip_accents, "pre_tokenizer": text.pre_tokenizer,
            "max_input_chars_per_word": text.max_input_chars_per_word, "added_tokens": text.added_tokens,
            "unicode_normalization": text.unicode_normalization,
            "seq_length": text.seq_length, "labels": task.labels, "settings": task.settings,
            "training": dict(text.training), "eval_results": text.eval_results,
            "recipe": task._recipe, "frozen": frozen_layers(task)}


def task_from_config(cls, config):
    """The task of class `cls` that `task_config` describes, its recipe compiled and its optimizer
    built (so Keras restores the saved moments and step)."""
    config = dict(config)
    head = keras.saving.deserialize_keras_object(config.pop("head"))
    vocab_file = stored_vocabulary(config.pop("vocabulary"))
    recipe = config.pop("recipe", None)
    frozen = config.pop("frozen", [])
    task = cls(head, vocab_file=vocab_file, **config)
    freeze_layers(task, frozen)  # before the optimizer: its slots are the trainable variables'
    task._compile_recipe(**(recipe or {}))
    finetuning_recipe.build_optimizer(task)
    return task


def stored_vocabulary(tokens):
    """A vocabulary file with these tokens, for a task read from a `.keras` file: written once
    per content (named by its hash) under the temp directory, atomically."""
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


class TaskFiles:
    """A task's files (mixed into `TextTask`): `save` (the fine-tuned directory, or a `.keras`
    file), `to_finetuned`, `record` (provenance and dev metrics for `task.json`), and what Keras
    calls for a `.keras` file (`get_config` / `from_config`)."""

    def to_finetuned(self):
        """This task as a `bert_keras.finetuned_model.FinetunedModel` (what `save` writes)."""
        return to_finetuned(self)

    def save(self, directory, overwrite=None, include_optimizer=True, **kwargs):
        """Writes the fine-tuned model directory, atomically (`bert_keras.tasks.task_files.save_task`
        says what is kept and what is never deleted); a path ending in `.keras` saves the whole task
        in Keras' format, `.h5` the head alone. Returns the directory."""
        path = os.fspath(directory)
        if path.endswith(".keras"):
            return super().save(path, overwrite=True if overwrite is None else overwrite, **kwargs)
        return save_task(self, path, overwrite=overwrite, include_optimizer=include_optimizer, **kwargs)

    def get_config(self):
        """The head, and the text side inline (the vocabulary's tokens: a `.keras` file is self-contained)."""
        return task_config(self)

    @classmethod
    def from_config(cls, config):
        return task_from_config(cls, config)

    def get_build_config(self):
        return None  # built by its head

    def record(self, *, training=None, eval_results=None):
        """Adds provenance (saved in `task.json`'s `training`) and dev metrics to what `save` writes."""
        if training:
            self._record.training.update(training)
        if eval_results is not None:
            self._record.eval_results = dict(eval_results)
