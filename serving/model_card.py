"""`assets.extra/model_card.json`: what a served model is, written beside it at export time.

One JSON object a person or a deploy script can read without TensorFlow:
the task and its labels, how text is tokenized (vocabulary size, lowercase,
tokenizer backend, sequence length, SQuAD / embedding settings), the model's
`BertConfig`, library versions, the finetune run's evaluation results, every
signature with its inputs and outputs (name, dtype, shape; -1 = any size),
the op audit, and the outcome of the export's portability check.

Example:

    >>> card = read_model_card("models/sentiment/1")
    >>> card["task"]["kind"], card["labels"], card["signatures"]["serving_default"]["inputs"]
    ('classification', ['neg', 'pos'], {'text': {'dtype': 'string', 'shape': [-1]}})
"""

import datetime
import importlib.metadata
import json
import os

from pipelines.atomic_writes import write_json

MODEL_CARD_FILE = os.path.join("assets.extra", "model_card.json")
CARD_FORMAT = "bert-keras-model-card/1"
LIBRARIES = ("tensorflow", "tensorflow-text", "keras", "bert-keras", "tensorflow-serving-api")


def build_model_card(finetuned, *, model_name, version, tokenizer_backend, chars_per_token,
                     signatures, audit=None, check=None, warmup=None, origin=None):
    """The model card dict of an export.

    Args:
        finetuned: the `bert_keras.finetuned_model.FinetunedModel` exported.
        model_name, version: where it is served.
        tokenizer_backend: `"tf_text"` or `"core"`.
        chars_per_token: the text cut (see `serving.signatures.text_inputs`).
        signatures: `{name: {"method_name", "inputs", "outputs"}}` as read
            from the saved `saved_model.pb`.
        audit: the op audit's `to_json()` dict (or None).
        check: the portability `CheckReport.to_json()` (None: skipped).
        warmup: `{"requests": N, "batch_sizes": [...]}` (or None).
        origin: where the model came from (default: the directory it was read
            from, else "<in memory>").
    """
    from serving.signatures import card_settings

    settings = card_settings(finetuned)
    labels = list(finetuned.labels) if finetuned.labels else None
    return {
        "format": CARD_FORMAT,
        "model_name": model_name,
        "version": int(version),
        "exported_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": origin or finetuned.directory or "<in memory>",
        # task_json: the run's provenance (task spec, eval_path, text columns), kind and settings.
        "task": {"kind": finetuned.kind, "spec": finetuned.training.get("task"), "settings": settings,
                 "task_json": {**finetuned.training, "kind": finetuned.kind,
                               "settings": dict(finetuned.settings)}},
        "labels": labels,
        "tokenization": {"vocab_size": finetuned.config.vocab_size, "lowercase": finetuned.lowercase,
                         "strip_accents": finetuned.strip_accents,
                         # the clients split the text with this morpheme analyzer first (None: raw text)
                         "pre_tokenizer": finetuned.pre_tokenizer,
                         # texts composed (NFC) in the graph before tokenizing (None: read as given)
                         "unicode_normalization": finetuned.unicode_normalization,
                         "tokenizer_backend": tokenizer_backend, "seq_length": finetuned.seq_length,
                         "chars_per_token": chars_per_token, "vocab_asset": "assets/vocab.txt",
                         "labels_asset": "assets/labels.txt" if labels else None},
        "seq_length": finetuned.seq_length,
        "lowercase": finetuned.lowercase,
        "tokenizer_backend": tokenizer_backend,
        "config": finetuned.config.to_dict(),
        "libraries": library_versions(),
        "evaluation": finetuned.eval_results,
        "signatures": signatures,
        "op_audit": audit,
        "check": check if check is not None else {"skipped": True},
        "warmup": warmup,
    }


def library_versions():
    """Installed versions of `LIBRARIES` (None when one is not installed)."""
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def write_model_card(version_dir, card):
    """Writes `<version_dir>/assets.extra/model_card.json` atomically; returns its path."""
    path = os.path.join(version_dir, MODEL_CARD_FILE)
    write_json(path, card, indent=2, default=_jsonable)
    return path


def read_model_card(version_dir):
    """The model card of a version directory (dict)."""
    with open(os.path.join(version_dir, MODEL_CARD_FILE), encoding="utf-8") as f:
        return json.load(f)


def card_pre_tokenizer(card):
    """The morpheme analyzer a model card says its clients split text with (`tokenization.pre_tokenizer`:
    a (c) Korean vocabulary's "kiwi"), or None (none recorded, or not a name).

    >>> card_pre_tokenizer({"tokenization": {"pre_tokenizer": "kiwi"}}), card_pre_tokenizer({})
    ('kiwi', None)
    """
    tokenization = card.get("tokenization") if isinstance(card, dict) else None
    value = tokenization.get("pre_tokenizer") if isinstance(tokenization, dict) else None
    return value if isinstance(value, str) and value else None


def _jsonable(value):
    """numpy scalars and other stragglers as plain JSON values."""
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
