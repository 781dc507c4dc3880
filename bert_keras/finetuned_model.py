"""The fine-tuned model directory: the one module that writes and reads it.

A fine-tuned task (`bert_keras.tasks.TextClassifier(...).save(D)`, `bert-keras finetune
--output-dir D`) is a directory; `bert_keras.tasks.load(D)`, `bert-keras evaluate /
predict / export` and `serving` read it back, only through `read_finetuned`.

`FinetunedModel` is the one description of a fine-tuned model, read or in memory (a
task's `to_finetuned()`): the export takes it as it is, and its options (packed length,
SQuAD windows and threshold, text pairs) are a copy with other settings (`with_settings`),
checked as every record is: the kind's settings and defaults come from its family
(`bert_keras.families`), and so does the family's own check (SQuAD windows).

Layout, format version 2 (`FORMAT_VERSION`):

==================  ======================================================================
file                content
==================  ======================================================================
`model.keras`       the Keras task head with its encoder (weights + architecture):
                    `BertClassifier`, `BertTokenClassifier`, `BertSpanQA`,
                    `BertMultipleChoice` or `BertEmbedder`
`task.json`         `format_version` (2), `kind`, `seq_length`, `labels`,
                    `tokenizer` (`vocab`, `lowercase`, `strip_accents`, `pre_tokenizer` if any,
                    `max_input_chars_per_word` if not 200, `unicode_normalization` if any ("NFC":
                    texts composed before tokenizing), `added_tokens` if any: the
                    tokens found whole, as an HF tokenizer's, with their flags), `settings` (per kind),
                    `encoder_config` (the `BertConfig`), `training` (provenance: init,
                    steps, learning rate, task spec, data files; informational), `recipe`
                    (optional: the fine-tuning recipe's settings, compiled again on load)
`vocab.txt`         the WordPiece vocabulary
`labels.txt`        class / tag names, line i = id i (classification, NER)
`eval_results.json` optional: the dev metrics of the run that wrote it
`optimizer.npz`     optional: the optimizer's state (moments, step count), so that `fit`
                    continues where the saved run stopped (`TextTask.save(include_optimizer=)`)
==================  ======================================================================

`kind` and its `settings`: `classification` / `regression` (`text_pair`), `ner`
(`aggregation`: how word labels come from pieces), `squad` (`version_2`, `stride`: word
pieces between the starts of two context windows, `max_query_length`, `max_answer_length`,
`n_best_size`, `null_score_diff_threshold`, `max_windows`: context windows a SavedModel
export reads per question, `evaluation_metric`: "squad" or "korquad", the official script
`evaluate` scores answers with),
`multiple_choice` (`num_choices`), `embedding` (`pooling`, `normalize`).
A setting renamed since a file was written is read under its name now (the family's
`earlier_names`: SQuAD's `doc_stride` is `stride`); a file that gives both names with
different values is refused.

Format version 1 is the layout `bert-keras finetune` wrote before versioning (a
`task.json` without `format_version`, with the task spec in `task`); it is read and
converted on the fly. A directory written by a newer library is refused by name.

Saving never deletes what the user owns: a missing or empty directory is written; one
that holds a fine-tuned model is updated only with `overwrite=True`, and then only the
files of the format (`OWNED_FILES`) are replaced, other files in it stay; a directory
holding anything else is refused (`DirectoryInUseError`). `check_can_save` asks the same
question before a long training run.

Writes are atomic (`pipelines.atomic_writes.atomic_directory`): a new directory is staged
beside its target and renamed in one step; an update stages the new files inside the
directory, fsyncs them, writes a commit manifest, then renames each into place. A run killed
before the manifest leaves the old model readable (its staging is removed by the next
save or read); one killed after it leaves a manifest that the next `save_finetuned` or
`read_finetuned` finishes, so the directory then holds the whole new model.

Reading checks everything it reads: `task.json` field by field, `labels.txt` under
`pipelines.label_names` (one rule for every label file) and against the head's number
of classes, and a damaged `model.keras`; errors are `FinetunedModelError` naming the file.

Example:

>>> import tempfile
>>> from bert_keras.config import BertConfig
>>> from bert_keras.encoder import BertEncoder
>>> from bert_keras.models import BertClassifier
>>> directory = tempfile.mkdtemp()
>>> vocab = os.path.join(directory, "v.txt")
>>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
>>> head = BertClassifier(BertEncoder(BertConfig.named("tiny", vocab_size=6)), num_classes=2)
>>> path = save_finetuned(os.path.join(directory, "model"), FinetunedModel(
...     kind="classification", model=head, vocab_file=vocab, seq_length=16, labels=["neg", "pos"]))
>>> read_finetuned(path).labels
['neg', 'pos']
"""

import dataclasses
import json
import math
import os
import shutil
import zipfile
from typing import Any, Dict, List, Optional

from bert_keras.families import KINDS, RenamedSettingError, UnknownFamilyError, family, setting_type
from bert_keras.json_output import finite_or_null
from pipelines.atomic_writes import (atomic_directory, check_free_space, is_staging_name, model_nbytes,
                                     remove_stale_staging, write_json, write_text)
from pipelines.label_names import LabelNamesError, check_label_count, check_label_names, read_label_names
from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD, checked_max_chars

FORMAT_VERSION = 2
MODEL_FILE, TASK_FILE, VOCAB_FILE, LABELS_FILE = "model.keras", "task.json", "vocab.txt", "labels.txt"
EVAL_RESULTS_FILE, OPTIMIZER_FILE = "eval_results.json", "optimizer.npz"
# The files the format owns: the only ones a save replaces or removes in an existing directory.
OWNED_FILES = (MODEL_FILE, TASK_FILE, VOCAB_FILE, LABELS_FILE, EVAL_RESULTS_FILE, OPTIMIZER_FILE)
# The fine-tuning recipe's settings (`TextTask.compile_recipe`), as `task.json` keeps them.
RECIPE_SETTINGS = ("learning_rate", "warmup_ratio", "weight_decay")
# The backups of a `bert-keras finetune` run in progress (`TextTask.fit(run_dir=...)`): a rerun
# after a kill resumes from them; the fit removes them when it completes.
RUN_DIRECTORY = ".finetune-run"


class FinetunedModelError(ValueError):
    """A directory that is not a (readable) fine-tuned model; the message names what is wrong."""


class DirectoryInUseError(FinetunedModelError):
    """A save would replace a model without `overwrite`, or mix the model into a directory of other files."""


@dataclasses.dataclass
class FinetunedModel:
    """A fine-tuned task, in memory: what the directory holds.

    Args:
        kind: one of `KINDS`.
        model: the Keras task head (its `.encoder` is the `BertEncoder`).
        vocab_file: path of its `vocab.txt`.
        seq_length: packed length, special tokens included.
        lowercase: uncased tokenization.
        strip_accents: NFD + drop combining marks; None follows `lowercase` (HF's rule). Korean
            models keep Hangul syllables whole with `lowercase=True, strip_accents=False`.
        pre_tokenizer: None, or the morpheme analyzer ("kiwi") the model's text is split with
            before tokenization, on the host (`pipelines.BertTokenizer(pre_tokenizer=)`). The
            in-graph tokenizer (`tokenizer()`, the export's) does not run it: the export's
            clients send split text (its model card says so).
        max_input_chars_per_word: words longer than this read as one [UNK] (the checkpoint's own:
            100 for an HF tokenizer; 200, the original's, when it records none).
        unicode_normalization: None, or "NFC": every text composed before tokenizing, in the graph
            too (`pipelines.BertTokenizer(unicode_normalization=)`: Hangul that arrives decomposed).
        added_tokens: the tokens found whole before BERT's rules split the text, as HF's added tokens
            (`pipelines.BertTokenizer(added_tokens=)`: strings, dicts or `tokenizers.AddedToken`s), kept
            as plain dicts with their flags (`pipelines.tokenizer.added_tokens.added_token_specs`);
            [] (default): none.
        labels: class / tag names in id order (classification, NER), else None.
        settings: the kind's settings (see the module docstring); missing ones
            take the family's defaults (`bert_keras.families`). One dict: an export's
            options are a copy with other settings (`with_settings`).
        training: provenance of the run (free-form, JSON-serialisable).
        eval_results: the run's dev metrics, or None.
        recipe: the fine-tuning recipe's settings (`RECIPE_SETTINGS`), or None.
        directory: where it was read from (None when built in memory).
        format_version: the version it was read in.

    Raises (on construction):
        FinetunedModelError: an unknown kind, a labelled kind without labels, settings
            its family refuses (SQuAD: `seq_length` must exceed `max_query_length + 3`),
            and with a model: `seq_length` over its positions, or a label count that is
            not the head's number of classes.
    """

    kind: str
    model: Any
    vocab_file: str
    seq_length: int
    lowercase: bool = True
    strip_accents: Optional[bool] = None
    pre_tokenizer: Optional[str] = None
    max_input_chars_per_word: int = ORIGINAL_MAX_CHARS_PER_WORD
    unicode_normalization: Optional[str] = None
    added_tokens: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    labels: Optional[List[str]] = None
    settings: Dict[str, Any] = dataclasses.field(default_factory=dict)
    training: Dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_results: Optional[Dict[str, Any]] = None
    recipe: Optional[Dict[str, float]] = None
    directory: Optional[str] = None
    format_version: int = FORMAT_VERSION

    def __post_init__(self):
        try:
            kind_family = family(self.kind)
        except UnknownFamilyError as error:
            raise FinetunedModelError(str(error)) from None
        try:
            self.settings = kind_family.settings_with_defaults(self.settings)
        except RenamedSettingError as error:
            raise FinetunedModelError(f"settings: {error}") from None
        if self.strip_accents not in (None, True, False):
            raise FinetunedModelError(f"strip_accents must be true, false or null, got {self.strip_accents!r}")
        self.strip_accents = bool(self.lowercase if self.strip_accents is None else self.strip_accents)
        checked_max_chars(self.max_input_chars_per_word, "max_input_chars_per_word", FinetunedModelError)
        from pipelines.tokenizer.composition import checked_unicode_normalization

        try:
            self.unicode_normalization = checked_unicode_normalization(self.unicode_normalization)
        except ValueError as error:
            raise FinetunedModelError(str(error)) from None
        from pipelines.tokenizer.added_tokens import AddedTokenError, added_token_specs

        try:
            self.added_tokens = added_token_specs(self.added_tokens or [])
        except AddedTokenError as error:
            raise FinetunedModelError(str(error)) from None
        if self.added_tokens and self.pre_tokenizer is not None:
            raise FinetunedModelError(f"added_tokens cannot be combined with pre_tokenizer={self.pre_tokenizer!r} "
                                      "(the morpheme analyzer splits the text before they could be found)")
        if self.labels is not None:
            self.labels = [str(label) for label in self.labels]
        if kind_family.needs_labels and not self.labels:
            raise FinetunedModelError(f"a {self.kind} model needs its label names")
        problem = kind_family.check(self.seq_length, self.settings) if kind_family.check else None
        if problem:
            raise FinetunedModelError(problem)
        if self.model is not None:
            config = getattr(getattr(self.model, "encoder", None), "config", None)
            positions = getattr(config, "max_position_embeddings", None)
            if positions is not None and self.seq_length > positions:
                raise FinetunedModelError(f"seq_length {self.seq_length} exceeds the model's "
                                          f"{positions} positions")
            if self.labels:
                _check_label_count(self.labels, self.model, "labels", self.kind)

    def with_settings(self, **overrides):
        """A copy with some settings replaced, checked as a record is (e.g. an export's options).

        Args:
            **overrides: `seq_length`, `lowercase`, `strip_accents`, or a setting of the kind
                (`bert_keras.families`: `text_pair`, `null_score_diff_threshold`,
                `max_windows`, ...); None leaves a value as it is.

        Raises:
            FinetunedModelError: a name that is not a setting of this kind (lists
                them), a value of the wrong type, or settings that do not fit the
                model (packed length over its positions, SQuAD windows).

        >>> record = FinetunedModel(kind="squad", model=None, vocab_file="vocab.txt", seq_length=384)
        >>> short = record.with_settings(seq_length=128, max_windows=4, text_pair=None)
        >>> short.seq_length, short.settings["max_windows"], record.settings["max_windows"]
        (128, 4, 16)
        >>> record.with_settings(pooling="cls")
        Traceback (most recent call last):
        ...
        bert_keras.finetuned_model.FinetunedModelError: pooling=: not a setting of a squad model; its settings: evaluation_metric, max_answer_length, max_query_length, max_windows, n_best_size, null_score_diff_threshold, stride, version_2 (and seq_length, lowercase, strip_accents)
        """
        given = {key: value for key, value in overrides.items() if value is not None}
        fields = {key: given.pop(key) for key in ("seq_length", "lowercase", "strip_accents") if key in given}
        defaults = family(self.kind).default_settings
        for key, value in given.items():
            if key not in defaults:
                raise FinetunedModelError(
                    f"{key}=: not a setting of a {self.kind} model; its settings: "
                    f"{', '.join(sorted(defaults))} (and seq_length, lowercase, strip_accents)")
            _check_override(key, value, *setting_type(family(self.kind).settings, key))
        if "seq_length" in fields:
            _check_override("seq_length", fields["seq_length"], (int,), "a positive integer",
                            lambda v: v >= 1)
        for key in ("lowercase", "strip_accents"):
            if key in fields:
                _check_override(key, fields[key], (bool,), "true or false")
        if "lowercase" in fields and "strip_accents" not in fields:
            fields["strip_accents"] = None  # follows the new casing, unless given
        return dataclasses.replace(self, settings={**self.settings, **given}, **fields)

    @property
    def config(self):
        """The encoder's `BertConfig`."""
        return self.model.encoder.config

    def tokenizer(self, backend="tf_text"):
        """A `pipelines.BertTokenizer` of this model's vocabulary, casing and accent rule: the in-graph
        tokenizer (a `pre_tokenizer` runs on the host, before it)."""
        from pipelines import BertTokenizer

        return BertTokenizer(self.vocab_file, lowercase=self.lowercase, strip_accents=self.strip_accents,
                             backend=backend, max_input_chars_per_word=self.max_input_chars_per_word,
                             unicode_normalization=self.unicode_normalization, added_tokens=self.added_tokens)

    def packer(self, tokenizer):
        """A `pipelines.BertPacker` at this model's `seq_length` with `tokenizer`'s special ids."""
        from pipelines import BertPacker

        special = tokenizer.special_tokens
        return BertPacker(self.seq_length, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad)


def read_finetuned_encoder(directory, *, output_hidden_states=False, output_attentions=False):
    """The `BertEncoder` inside a fine-tuned model directory, with the tokenizer it was trained with.

    What `bert_keras.checkpoints.load_pretrained` / `load_tokenizer` give for a pretrained
    checkpoint, for the encoder a fine-tune changed: its attention (`bert-keras attention`) or
    its hidden states can be looked at as they are after fine-tuning.

    >>> encoder, tokenizer = read_finetuned_encoder("out/sentiment", output_attentions=True)  # doctest: +SKIP

    Args:
        directory: the fine-tuned model directory.
        output_hidden_states, output_attentions: passed to `BertEncoder`.

    Returns:
        `(BertEncoder, pipelines.BertTokenizer)`; the tokenizer applies the model's vocabulary,
        casing and accent rule, and its `pre_tokenizer` (on the host) if it has one.

    Raises:
        FinetunedModelError: as `read_finetuned`.
    """
    from pipelines import BertTokenizer

    record = read_finetuned(directory)
    encoder = finetuned_encoder(record, output_hidden_states=output_hidden_states,
                                output_attentions=output_attentions)
    tokenizer = BertTokenizer(record.vocab_file, lowercase=record.lowercase, strip_accents=record.strip_accents,
                              pre_tokenizer=record.pre_tokenizer,
                              max_input_chars_per_word=record.max_input_chars_per_word,
                              unicode_normalization=record.unicode_normalization,
                              added_tokens=record.added_tokens)
    return encoder, tokenizer


def convert_finetuned(directory, dest, *, strict=True, overwrite=False):
    """Writes a fine-tuned model in a checkpoint format (`bert-keras convert DIR DEST`).

    To `hf:OUT` go the encoder, the task head as the `transformers` class that computes the
    same outputs (`BertForSequenceClassification` with `id2label` for a classifier,
    `BertForTokenClassification`, `BertForQuestionAnswering`, `BertForMultipleChoice`:
    `bert_keras.checkpoints.task_heads`), the vocabulary and its rules
    (`tokenizer_config.json`: the casing and Unicode normalization the model was trained with). `tf1:`, `keras-hub:` and
    `.keras` hold an encoder: the head is refused there unless `strict=False`, which writes the
    encoder alone with a warning. An embedding model (no head weights) is a `BertModel`.
    The tokens the model's tokenizer adds (`task.json` `added_tokens`) go into the `tokenizer_config.json`
    beside the vocabulary as `added_tokens_decoder`, transformers' own field (`BertTokenizerFast` gives
    the model's ids); a `tf1:` or `keras-hub:` checkpoint keeps them there for bert-keras alone (a warning
    says that its own tokenizer reads them as word pieces).

    >>> convert_finetuned("out/sentiment", "hf:sentiment-hf")  # doctest: +SKIP
    >>> transformers.AutoModelForSequenceClassification.from_pretrained("sentiment-hf")  # doctest: +SKIP

    Args:
        directory: the fine-tuned model directory.
        dest: `hf:DIR`, `tf1:PREFIX`, `keras-hub:DIR` or `PATH.keras`.
        strict: refuse to leave the head out (False: leave it out with a warning).
        overwrite: replace the files the destination holds.

    Returns:
        `bert_keras.checkpoints.loading.Conversion`.

    Raises:
        FinetunedModelError: as `read_finetuned`.
        CheckpointMismatchError: a head the destination has no place for, with `strict`.
    """
    import warnings

    from bert_keras.checkpoints.errors import CheckpointMismatchError
    from bert_keras.checkpoints.layout import encoder_to_canonical
    from bert_keras.checkpoints.loading import (Conversion, check_destination, parse_spec, save_pretrained,
                                                write_pretrained)
    from bert_keras.checkpoints.task_heads import hf_task_head

    destination = parse_spec(dest, for_writing=True)
    check_destination(directory, dest, overwrite=overwrite, source_path=os.fspath(directory),
                      source_files=[os.path.join(directory, name) for name in OWNED_FILES])
    record = read_finetuned(directory)
    encoder = record.model.encoder
    head = hf_task_head(record)
    if head is not None and destination.kind != "hf":
        message = (f"{directory}: its {record.kind} head ({', '.join(sorted(head[1]))}) has no place in a "
                   f"{destination.kind} checkpoint, which holds an encoder; convert to hf:DIR to keep it "
                   f"(transformers.{head[0]})")
        if strict:
            raise CheckpointMismatchError(message + ", or pass strict=False / --no-strict to write the encoder alone",
                                          unexpected=sorted(head[1]))
        warnings.warn(message + "; the encoder is written alone", stacklevel=2)
        head = None
    if head is not None and head[3]:
        warnings.warn(f"{directory}: transformers.{head[0]} has no place for {head[3]} (they weigh a long "
                      "text's windows): left out; the logits of one window are the same", stacklevel=2)
    settings = {"lowercase": record.lowercase, "strip_accents": record.strip_accents,
                "pre_tokenizer": record.pre_tokenizer or "none",
                "max_input_chars_per_word": record.max_input_chars_per_word,
                "unicode_normalization": record.unicode_normalization or "none",
                "added_tokens": record.added_tokens}
    if destination.kind == "keras":
        written = save_pretrained(encoder, destination.path, vocab_file=record.vocab_file, tokenizer_settings=settings)
    else:
        written = write_pretrained(destination, encoder.config, encoder_to_canonical(encoder),
                                   vocab_file=record.vocab_file, tokenizer_settings=settings,
                                   task_head=head[:3] if head is not None else None)
    return Conversion(config=encoder.config, heads=[], vocab=record.vocab_file, kind=destination.kind,
                      written=written, source=os.fspath(directory), dest=dest,
                      task_head=head[0] if head is not None else None)


def finetuned_encoder(record, *, output_hidden_states=False, output_attentions=False):
    """The `BertEncoder` of a read `FinetunedModel` (`read_finetuned`), rebuilt with the given
    outputs when they differ from its own (an encoder's outputs are fixed when it is built)."""
    from bert_keras.checkpoints.layout import assign_canonical, encoder_to_canonical
    from bert_keras.encoder import BertEncoder
    from bert_keras.layers.initialization import weights_from_checkpoint

    encoder = record.model.encoder
    if output_hidden_states or output_attentions:
        with weights_from_checkpoint():  # no random draws for weights assigned next
            rebuilt = BertEncoder(encoder.config, output_hidden_states=output_hidden_states,
                                  output_attentions=output_attentions)
        assign_canonical(rebuilt, encoder_to_canonical(encoder))
        encoder = rebuilt
    return encoder


def is_finetuned_directory(path):
    """True when `path` is a directory with a `task.json` (any format version)."""
    return os.path.isdir(os.fspath(path)) and os.path.isfile(os.path.join(path, TASK_FILE))


def without_task_file(path):
    """Why `path` is no fine-tuned model though it looks like one (its `model.keras` or `labels.txt`
    without `task.json`), else None: for an error where it was read as another kind of model."""
    path = os.fspath(path)
    if not os.path.isdir(path) or is_finetuned_directory(path):
        return None
    found = [name for name in (MODEL_FILE, LABELS_FILE) if os.path.isfile(os.path.join(path, name))]
    if not found:
        return None
    return (f"{path} holds {', '.join(found)} as a fine-tuned model's directory does, but no {TASK_FILE}, "
            "which names its task and settings: copy the directory again, whole, or save the model again")


def check_can_save(directory, overwrite=False, inputs=()):
    """Raises `DirectoryInUseError` when `save_finetuned(directory, ..., overwrite=overwrite)` would,
    or when `directory` is or holds one of the run's `inputs`.

    Call it before training, so that a run refused at the end is refused at the start.

    Args:
        directory: where the model is to be saved.
        overwrite: whether an existing fine-tuned model there may be replaced.
        inputs: paths the run reads (weights, data files; None skipped): saving may replace
            what `directory` holds, so it may be none of them and hold none, even with `overwrite`.

    Raises:
        DirectoryInUseError, in this order: `directory` is a file; is or holds an input (no
            `overwrite` lifts it, so it is said first); holds other files and no fine-tuned model
            (names the first few); or holds a fine-tuned model and `overwrite` is False.
    """
    from pipelines.output_paths import input_inside

    directory = os.path.abspath(os.fspath(directory))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise DirectoryInUseError(f"{directory}: exists and is not a directory")
    held = input_inside(directory, inputs)  # first: no overwrite fixes it
    if held is not None:
        raise DirectoryInUseError(f"{directory} holds the run's input {held}: saving the model may replace "
                                  "what the directory holds; choose another output directory")
    names = sorted(name for name in (os.listdir(directory) if os.path.isdir(directory) else [])
                   if not is_staging_name(name) and name != RUN_DIRECTORY)
    if names and not _holds_finetuned_model(directory):
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise DirectoryInUseError(
            f"{directory} is not empty and holds no fine-tuned model ({shown}); choose a new or empty "
            "directory (saving is refused even with overwrite, so that none of these files is lost)")
    if names and not overwrite:
        raise DirectoryInUseError(
            f"{directory} already holds a fine-tuned model; pass overwrite=True to "
            f"replace it (only {', '.join(OWNED_FILES)} are replaced, other files stay), or choose "
            "another directory")


def save_finetuned(directory, finetuned, *, overwrite=False, optimizer_state=None):
    """Writes `finetuned` (a `FinetunedModel`) into `directory`, atomically; returns the path.

    Args:
        directory: the model directory: missing or empty, or (with `overwrite`) one that
            holds a fine-tuned model.
        finetuned: the `FinetunedModel`.
        overwrite: replace the fine-tuned model already in `directory`. Only the format's
            files (`OWNED_FILES`) are replaced or removed; other files in it stay.
        optimizer_state: `{name: array}` (a Keras optimizer's `save_own_variables`) written
            as `optimizer.npz`, or None (no state: an older one is removed).

    Raises:
        DirectoryInUseError: see `check_can_save`.
        FinetunedModelError: label names that break the rule (`pipelines.label_names`) or
            do not match the head's number of classes; weights that are NaN or infinite
            (a diverged run: nothing is written).
    """
    directory = os.path.abspath(os.fspath(directory))
    check_can_save(directory, overwrite)
    _check_finite_weights(finetuned.model, directory)
    if finetuned.labels:
        _check_labels(finetuned.labels, "labels", by_line=False)
        _check_label_count(finetuned.labels, finetuned.model, "labels", finetuned.kind)
    written = {MODEL_FILE, TASK_FILE, VOCAB_FILE}
    written |= {LABELS_FILE} if finetuned.labels else set()
    written |= {EVAL_RESULTS_FILE} if finetuned.eval_results is not None else set()
    written |= {OPTIMIZER_FILE} if optimizer_state else set()
    stale = [name for name in OWNED_FILES if name not in written]
    state_nbytes = sum(int(value.nbytes) for value in (optimizer_state or {}).values())
    check_free_space(directory, model_nbytes(finetuned.model) + state_nbytes, "the model")
    with atomic_directory(directory, remove=stale) as staging:
        finetuned.model.save(os.path.join(staging, MODEL_FILE))
        shutil.copyfile(finetuned.vocab_file, os.path.join(staging, VOCAB_FILE))
        if finetuned.labels:
            write_text(os.path.join(staging, LABELS_FILE), "".join(f"{l}\n" for l in finetuned.labels))
        if finetuned.eval_results is not None:
            write_json(os.path.join(staging, EVAL_RESULTS_FILE), finite_or_null(finetuned.eval_results),
                       sort_keys=True)
        if optimizer_state:
            import numpy as np

            with open(os.path.join(staging, OPTIMIZER_FILE), "wb") as stream:
                np.savez(stream, **optimizer_state)
        info = {
            "format_version": FORMAT_VERSION,
            "kind": finetuned.kind,
            "seq_length": int(finetuned.seq_length),
            "labels": finetuned.labels,
            "tokenizer": {"vocab": VOCAB_FILE, "lowercase": bool(finetuned.lowercase),
                          "strip_accents": bool(finetuned.strip_accents),
                          **({"pre_tokenizer": finetuned.pre_tokenizer} if finetuned.pre_tokenizer else {}),
                          # only when it is not the original's 200, which a record without it reads as
                          **({"max_input_chars_per_word": finetuned.max_input_chars_per_word}
                             if finetuned.max_input_chars_per_word != ORIGINAL_MAX_CHARS_PER_WORD else {}),
                          **({"unicode_normalization": finetuned.unicode_normalization}
                             if finetuned.unicode_normalization else {}),
                          **({"added_tokens": finetuned.added_tokens} if finetuned.added_tokens else {})},
            "settings": finetuned.settings,
            "encoder_config": finetuned.model.encoder.config.to_dict(),
            "training": finetuned.training,
            **({"recipe": finetuned.recipe} if finetuned.recipe else {}),
        }
        write_json(os.path.join(staging, TASK_FILE), info, default=str)
    return directory


def read_optimizer_state(directory):
    """The optimizer state saved in a fine-tuned model directory (`{name: array}`), or None."""
    path = os.path.join(os.fspath(directory), OPTIMIZER_FILE)
    if not os.path.isfile(path):
        return None
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise FinetunedModelError(f"{path}: the optimizer state is damaged ({error}); save the model "
                                  "again, or delete the file to continue with a fresh optimizer") from None


def _check_finite_weights(model, directory):
    """Refuses a model whose weights hold NaN / inf: it would save, load and answer NaN."""
    import numpy as np

    for weight in model.weights:
        values = np.asarray(weight.numpy())
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            raise FinetunedModelError(
                f"{directory}: not saved: weight {weight.path} holds NaN or infinite values (the training "
                "diverged: lower the learning rate, check the targets for huge values)")


def _holds_finetuned_model(directory):
    # task.json is what marks the directory (even a damaged one, so that it can be overwritten).
    return os.path.isfile(os.path.join(directory, TASK_FILE))


def write_eval_results(directory, metrics):
    """Writes (atomically) the dev metrics beside a saved model; returns the path. Strict JSON, as
    `bert-keras evaluate --output` writes it: an undefined metric (Pearson of a constant
    prediction: NaN) is `null`, not the `NaN` that jq and other parsers refuse."""
    return write_json(os.path.join(os.fspath(directory), EVAL_RESULTS_FILE), finite_or_null(metrics),
                      sort_keys=True)


def read_finetuned(directory, *, load_model=True):
    """The `FinetunedModel` of a directory (format version 1 or 2).

    A save that a killed run left half done is finished (or dropped) first; see the
    module docstring.

    Args:
        directory: the fine-tuned model directory.
        load_model: build the Keras model (False: settings only, `model=None`).

    Raises:
        FinetunedModelError: no such directory, not a fine-tuned model (says
            which files are missing), a format version newer than this library,
            an inconsistent `task.json` (names the field), a label file that breaks
            the rule of `pipelines.label_names` or does not match the head's number
            of classes (names file, line and both numbers), or a damaged `model.keras`.
    """
    directory = os.fspath(directory)
    if not os.path.exists(directory):
        raise FinetunedModelError(f"{directory}: no such directory")
    if not os.path.isdir(directory):
        raise FinetunedModelError(f"{directory}: not a directory (a fine-tuned model is a directory "
                                  f"holding {MODEL_FILE}, {TASK_FILE} and {VOCAB_FILE})")
    _finish_interrupted_save(directory)
    missing = [name for name in (TASK_FILE, MODEL_FILE) if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise FinetunedModelError(f"{directory}: not a fine-tuned model directory: no "
                                  f"{' and no '.join(missing)}")
    info = _read_json_object(os.path.join(directory, TASK_FILE))
    version = info.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise FinetunedModelError(f"{directory}/{TASK_FILE}: format_version {version!r} is not a "
                                  "positive integer")
    if version > FORMAT_VERSION:
        raise FinetunedModelError(
            f"{directory}: format_version {version} is newer than this library reads "
            f"(up to {FORMAT_VERSION}); upgrade bert_keras to load it")
    fields = _fields_v2(directory, info) if version == 2 else _fields_v1(directory, info)
    labels_source = fields.pop("labels_source")
    vocab = fields["vocab_file"]
    if not os.path.isfile(vocab):
        raise FinetunedModelError(f"{directory}: not a fine-tuned model directory: no "
                                  f"{os.path.basename(vocab)}")
    if fields.get("added_tokens"):
        from pipelines.tokenizer.vocab import load_vocabulary  # TensorFlow: not for `bert-keras --help`

        lines = set(load_vocabulary(vocab))  # as the tokenizer reads it (str.splitlines also cuts at U+2028, ...)
        missing = [spec["content"] for spec in fields["added_tokens"] if spec["content"] not in lines]
        if missing:
            raise FinetunedModelError(f"{directory}/{TASK_FILE}: field 'tokenizer': added token(s) {missing} are "
                                      f"not lines of {vocab}")
    results = os.path.join(directory, EVAL_RESULTS_FILE)
    eval_results = _read_json_object(results) if os.path.isfile(results) else None
    model = _load_model(os.path.join(directory, MODEL_FILE)) if load_model else None
    if model is not None:
        _check_model_kind(model, fields["kind"], os.path.join(directory, MODEL_FILE))
    if model is not None and fields["labels"]:  # named by the file they came from
        _check_label_count(fields["labels"], model, labels_source, fields["kind"])
    try:
        return FinetunedModel(model=model, eval_results=eval_results,
                              directory=os.path.abspath(directory), format_version=version, **fields)
    except FinetunedModelError as error:
        raise FinetunedModelError(f"{directory}/{TASK_FILE}: {error}") from None


def _finish_interrupted_save(directory):
    """Completes (or drops) the staged save a killed run left inside `directory`."""
    try:
        remove_stale_staging(directory)
    except OSError as error:
        raise FinetunedModelError(
            f"{directory}: a save into it was interrupted and cannot be finished here ({error}); "
            "open it once with write permission, or save the model again") from None


def _load_model(path):
    import keras

    import bert_keras.models  # noqa: F401  (registers the task models for load_model)
    from bert_keras.layers.initialization import weights_from_checkpoint

    try:
        # compile=False: no optimizer to rebuild; a task compiles again when trained.
        # No random start for BERT's weights (~0.5 s for a 6-layer encoder): Keras assigns every
        # variable from the file next, or fails when the file does not hold them all.
        with weights_from_checkpoint():
            return keras.saving.load_model(path, compile=False)
    except Exception as error:
        damage = _zip_damage(path)
        if damage is None:
            raise
        raise FinetunedModelError(f"{path}: the file is damaged ({damage}); save or fine-tune "
                                  "it again") from error


def _zip_damage(path):
    """What is wrong with the zip archive `path` (a `.keras` file), or None when it reads whole."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()  # reads every member and checks its CRC-32
    except zipfile.BadZipFile as error:
        return f"not a readable zip archive: {error}"
    except (OSError, EOFError, RuntimeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return f"member {bad} fails its CRC-32 check" if bad is not None else None


# -- task.json, field by field ------------------------------------------------------------------

_MISSING = object()


def _field(info, name, types, where, *, default=_MISSING, check=None, expected=None):
    """`info[name]` when it has one of `types` (and passes `check`), else a FinetunedModelError.

    Args:
        info: the parsed JSON object.
        name: the field.
        types: accepted Python types (bool is never an int here).
        where: the file, for the message.
        default: the value when the field is absent (or null); absent without one: an error.
        check: optional predicate on the value.
        expected: how the accepted values are described in the message.
    """
    value = info.get(name)
    if value is None:
        if default is _MISSING:
            raise FinetunedModelError(f"{where}: field {name!r} is missing")
        return default
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok or (check is not None and not check(value)):
        described = expected or " or ".join(t.__name__ for t in types)
        raise FinetunedModelError(f"{where}: field {name!r} is {value!r}; expected {described}")
    return value


def _positive_int(info, name, where, default=_MISSING):
    return _field(info, name, (int,), where, default=default, check=lambda v: v >= 1,
                  expected="a positive integer")


def _label_list(info, where):
    labels = _field(info, "labels", (list,), where, default=None, expected="a list of names or null")
    if labels is not None:
        _check_labels(labels, f"{where} field 'labels'", by_line=False)
    return labels


def _check_settings(kind, settings, where):
    """`settings` under today's names (`Family.current_settings`: a setting's earlier name reads as
    its name now), each known setting of `kind` with its default's type (`bert_keras.families`)."""
    try:
        settings = family(kind).current_settings(settings)
    except RenamedSettingError as error:
        raise FinetunedModelError(f"{where} field 'settings': {error}") from None
    for key, default in family(kind).default_settings.items():
        if key not in settings:
            continue
        types, expected = setting_type(family(kind).settings, key)
        expected += " or null" if default is None else ""
        _field(settings, key, types, f"{where} field 'settings'", default=default, expected=expected)
    return settings


def _check_override(key, value, types, expected, check=None):
    """`with_settings`' check of one value (bool is never an int here)."""
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok or (check is not None and not check(value)):
        raise FinetunedModelError(f"{key}={value!r}: expected {expected}")


def _fields_v2(directory, info):
    where = f"{directory}/{TASK_FILE}"
    kind = info.get("kind")
    if kind not in KINDS:
        raise FinetunedModelError(f"{where}: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    tokenizer = _field(info, "tokenizer", (dict,), where, default={}, expected="an object")
    vocab = _field(tokenizer, "vocab", (str,), f"{where} field 'tokenizer'", default=VOCAB_FILE)
    lowercase = _field(tokenizer, "lowercase", (bool,), f"{where} field 'tokenizer'", default=True)
    # Written since strip_accents became a setting; before, it always followed lowercase.
    strip_accents = _field(tokenizer, "strip_accents", (bool,), f"{where} field 'tokenizer'", default=lowercase)
    pre_tokenizer = _field(tokenizer, "pre_tokenizer", (str,), f"{where} field 'tokenizer'", default=None)
    max_chars = _field(tokenizer, "max_input_chars_per_word", (int,), f"{where} field 'tokenizer'",
                       default=ORIGINAL_MAX_CHARS_PER_WORD, check=lambda v: v >= 1, expected="an integer >= 1")
    added = _field(tokenizer, "added_tokens", (list,), f"{where} field 'tokenizer'", default=[], expected="a list")
    normalization = _field(tokenizer, "unicode_normalization", (str,), f"{where} field 'tokenizer'", default=None)
    from pipelines.tokenizer.composition import checked_unicode_normalization

    try:
        normalization = checked_unicode_normalization(normalization, f"{where} field 'tokenizer.unicode_normalization'")
    except ValueError as error:
        raise FinetunedModelError(str(error)) from None
    from pipelines.tokenizer.added_tokens import AddedTokenError, added_token_specs

    try:
        added = added_token_specs(added)
    except AddedTokenError as error:
        raise FinetunedModelError(f"{where}: field 'tokenizer': {error}") from None
    settings = _field(info, "settings", (dict,), where, default={}, expected="an object")
    training = _field(info, "training", (dict,), where, default={}, expected="an object")
    recipe = _field(info, "recipe", (dict,), where, default=None, expected="an object")
    for key, value in (recipe or {}).items():
        if key not in RECIPE_SETTINGS or not isinstance(value, (int, float)) or isinstance(value, bool) \
                or not math.isfinite(value) or value < 0:
            raise FinetunedModelError(f"{where}: field 'recipe': {key}={value!r}; expected non-negative numbers "
                                      f"named {', '.join(RECIPE_SETTINGS)}")
    labels, labels_source = _label_list(info, where), f"{where} field 'labels'"
    if os.path.isfile(os.path.join(directory, LABELS_FILE)):
        labels_source = os.path.join(directory, LABELS_FILE)
        labels = _read_labels(labels_source)
    return dict(kind=kind, seq_length=_positive_int(info, "seq_length", where), labels=labels,
                labels_source=labels_source, vocab_file=os.path.join(directory, vocab),
                lowercase=lowercase, strip_accents=strip_accents, pre_tokenizer=pre_tokenizer,
                max_input_chars_per_word=max_chars, unicode_normalization=normalization, added_tokens=added,
                settings=_check_settings(kind, dict(settings), where),
                training=dict(training), recipe=dict(recipe) if recipe else None)


def _fields_v1(directory, info):
    """Today's `bert-keras finetune` layout, converted (see the module docstring)."""
    where = f"{directory}/{TASK_FILE}"
    kind = info.get("kind")
    spec = str(info.get("task", ""))
    if kind not in ("classification", "ner", "squad", "multiple_choice"):
        raise FinetunedModelError(f"{where}: unknown kind {kind!r}")
    labels, labels_source = _label_list(info, where), f"{where} field 'labels'"
    label_file = _field(info, "label_file", (str,), where, default="")
    if label_file:
        labels_source = os.path.join(directory, label_file)
        labels = _read_labels(labels_source)
    settings = {}
    if kind == "classification":
        if _field(info, "regression", (bool,), where, default=False):
            kind, labels = "regression", None
        settings["text_pair"] = _v1_text_pair(info)
    elif kind == "squad":
        names = (*family(kind).default_settings, *(earlier for earlier, _ in family(kind).earlier_names))
        settings = _check_settings(kind, {key: info[key] for key in names if info.get(key) is not None}, where)
        settings["version_2"] = spec.lower().endswith("v2.0")
    training = {key: info.get(key) for key in ("init", "train_steps", "batch_size", "learning_rate",
                                              "epochs", "train_path", "eval_path") if key in info}
    training["task"] = spec
    default_length = family(kind).default_seq_length
    return dict(kind=kind, seq_length=_positive_int(info, "seq_length", where, default=default_length),
                labels=labels, labels_source=labels_source,
                vocab_file=os.path.join(directory, _field(info, "vocab", (str,), where, default=VOCAB_FILE)),
                lowercase=_field(info, "lowercase", (bool,), where, default=True), settings=settings,
                training=training)


def _v1_text_pair(info):
    """Did a version-1 classification task read (text, text_b) pairs? GLUE knows; a CSV header tells."""
    spec = str(info.get("task", "")).lower()
    if spec.startswith("glue/"):
        from pipelines.datasets.glue import glue_task

        return len(glue_task(spec).text_fields) == 2
    column = info.get("text_b_column") or "text_b"
    for key in ("train_path", "eval_path"):
        path = info.get(key) or (info["task"][4:] if key == "train_path" and spec.startswith("csv:")
                                 else None)
        if path and os.path.isfile(path):
            from pipelines.datasets.text_files import read_columns

            return column in read_columns(path)
    return False


def squad_threshold(settings, eval_results=None):
    """The v2.0 null threshold: the settings' own, else 0.0 (run_squad.py's default).

    The dev set's best threshold (`eval_results.json`'s `best_f1_thresh`) is adopted
    only when asked (`SpanQA.score(..., tune_threshold=True)`, `bert-keras finetune
    --tune-threshold`), which writes it into the settings: evaluating never changes
    what a model answers. `eval_results` is accepted for callers of the old signature.
    Returns `(threshold, where it came from)`.
    """
    value = (settings or {}).get("null_score_diff_threshold")
    # NO_SPAN_NULL_ODDS (float max) is "never answer", not a threshold.
    if isinstance(value, (int, float)) and math.isfinite(value) and abs(value) < 1e30:
        return float(value), "settings null_score_diff_threshold"
    return 0.0, "default 0.0"


def _check_labels(labels, where, *, by_line=True):
    """`pipelines.label_names.check_label_names`, its error as a `FinetunedModelError`."""
    try:
        return check_label_names(labels, where, by_line=by_line)
    except LabelNamesError as error:
        raise FinetunedModelError(str(error)) from None


def _check_model_kind(model, kind, path):
    """The model a directory's `model.keras` holds is a head of the kind its `task.json` names: an
    encoder or another kind's model copied over it failed later, deep in a task, with an
    AttributeError."""
    from bert_keras.models.encoder_head import EncoderHead

    head = family(kind).hf_head
    if not isinstance(model, EncoderHead) or (head is not None and not hasattr(model, head.layer)):
        raise FinetunedModelError(f"{path}: holds a {type(model).__name__}, not the {kind} model {TASK_FILE} names; "
                                  "save or fine-tune the model again (or copy back its own model.keras)")


def _check_label_count(labels, model, where, kind=None):
    """One label name per output of the head (its family's `label_count_attribute`)."""
    attribute = family(kind).label_count_attribute if kind else None
    num_classes = getattr(model, attribute or "num_classes", None)
    if num_classes is None:
        return
    try:
        check_label_count(labels, int(num_classes), where)
    except LabelNamesError as error:
        raise FinetunedModelError(str(error)) from None


def _read_labels(path):
    if not os.path.isfile(path):
        raise FinetunedModelError(f"{os.path.dirname(path)}: not a fine-tuned model directory: no "
                                  f"{os.path.basename(path)}")
    try:
        return read_label_names(path)
    except LabelNamesError as error:
        raise FinetunedModelError(str(error)) from None


def _read_json_object(path):
    """The JSON object in `path`; anything else (invalid JSON, a list, a number) is an error."""
    try:
        with open(path, encoding="utf-8") as f:
            content = json.load(f)
    except ValueError as error:
        raise FinetunedModelError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(content, dict):
        raise FinetunedModelError(f"{path}: expected a JSON object ({{...}}), got a "
                                  f"{type(content).__name__}")
    return content
