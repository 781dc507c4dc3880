"""Serving signatures per task kind, and the module that carries them into a SavedModel.

One file per family (`bert_keras.families` names it), each with `build(module, source)` -> `{signature name:
(concrete function, method name)}` and `reference_outputs(source, inputs)`
(the same outputs computed the Python way, for the export check):

| kind | file | `serving_default`: inputs -> outputs |
|---|---|---|
| classification | `classification.py` | text (+ text_b) -> label, class_id, probabilities |
| regression | `classification.py` | text (+ text_b) -> score |
| ner | `token_classification.py` | text -> entity_text, entity_label, start/end_char, score, num_entities |
| squad | `span_qa.py` | question, context -> answer, start_char, end_char, score, has_answer |
| embedding | `embedding.py` | text -> embedding |
| multiple_choice | `multiple_choice.py` | context, endings -> choice, probabilities |

Shared pieces: `text_inputs.py` (validate, cut, tokenize, pack, offsets),
`module.py` (`ServingModule`), `source.py` (`ExportSource`, `load_source`),
`samples.py` (representative inputs).

Example:

    >>> from serving.signatures import build_signatures, load_source
    >>> source = load_source("out/sentiment")
    >>> import tempfile
    >>> module, signatures = build_signatures(source, tokenizer_backend="tf_text",
    ...                                       asset_dir=tempfile.mkdtemp())
    >>> sorted(signatures)
    ['classification', 'serving_default', 'token_ids']
"""

from bert_keras.families import KINDS, family, resolve
from serving.signatures.source import ExportSource, load_source


def kind_module(kind):
    """The signature module of `kind`, as its family names it (`bert_keras.families`)."""
    return resolve(family(kind).signatures)


def build_signatures(source, *, tokenizer_backend="tf_text", asset_dir):
    """`(ServingModule, {name: (concrete function, method name)})` of an `ExportSource`."""
    from serving.signatures.module import ServingModule

    module = ServingModule(source, tokenizer_backend=tokenizer_backend, asset_dir=asset_dir)
    return module, kind_module(source.kind).build(module, source)


def reference_outputs(source, inputs):
    """`serving_default`'s outputs for `inputs`, computed the Python way (numpy arrays)."""
    return kind_module(source.kind).reference_outputs(source, inputs)


__all__ = ["KINDS", "ExportSource", "build_signatures", "kind_module", "load_source",
           "reference_outputs"]
