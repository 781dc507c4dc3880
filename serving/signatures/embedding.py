"""Signatures of a sentence-embedding export (`BertEmbedder`).

* `serving_default` (predict): `text` string `[B]` -> `embedding` float32 `[B, H]`
  (the embedder's pooling over real tokens; unit length when exported with
  `normalize=True`).
* `token_ids` (predict): int32 `token_ids` / `segment_ids` / `padding_mask`
  `[B, S]` -> `embedding` float32 `[B, H]`.

Example (a loaded export):

    >>> loaded = tf.saved_model.load("models/minilm/1")
    >>> loaded.signatures["serving_default"](text=tf.constant(["A cat sat."]))["embedding"].shape
    TensorShape([1, 384])
"""

import numpy as np
import tensorflow as tf

from serving.signatures.module import PREDICT
from serving.signatures.text_inputs import ids_specs, string_spec


def build(module, source):
    """`{signature name: (concrete function, method name)}` for `module` (a `ServingModule`)."""

    def embed(inputs):
        return {"embedding": module.run_model(inputs)["sentence_embedding"]}

    serve = tf.function(lambda text: embed(module.text.pack([module.text.tokenize(text, "text")])),
                        input_signature=[string_spec("text")])
    token_ids = tf.function(embed, input_signature=[ids_specs(2)])
    return {"serving_default": (serve.get_concrete_function(), PREDICT),
            "token_ids": (token_ids.get_concrete_function(), PREDICT)}


def reference_outputs(source, inputs):
    """`serving_default`'s outputs the Python way: tokenizer + packer + Keras embedder."""
    tokenizer = source.tokenizer()
    packer = source.packer(tokenizer)
    x = packer(tokenizer.tokenize(tf.constant(list(inputs["text"]))))
    return {"embedding": np.asarray(source.model(x, training=False)["sentence_embedding"],
                                    np.float32)}


# -- what the export path asks of this family (serving.signatures.kind_module) -------------

QUERY_EXAMPLE = '"your text"'


def export_fields(finetuned, settings, overrides):
    return {"embedding": {"pooling": settings["pooling"], "normalize": bool(settings["normalize"])}}


def card_settings(source):
    return dict(source.embedding)


def sample_rows(source):
    from serving.signatures.samples import SENTENCES

    return [{"text": s} for s in SENTENCES]


def rows_from_file(source, path, count):
    return None


def encoder_spec_fields(spec, *, pooling, normalize, seq_length, lowercase, vocab_file):
    """The `ExportSource` fields of a sentence-embedding export straight from an encoder spec."""
    from bert_keras.checkpoints import find_vocabulary, load_pretrained
    from bert_keras.models import BertEmbedder

    vocab = vocab_file or find_vocabulary(spec)
    if vocab is None:
        raise ValueError(f"{spec}: no vocab.txt beside the model; pass vocab_file= / --vocab")
    encoder = load_pretrained(
        spec, output_hidden_states=pooling in ("concat_last4", "sum_last4", "weighted"))
    model = BertEmbedder(encoder, pooling=pooling, normalize=normalize)
    length = seq_length or min(128, encoder.config.max_position_embeddings)
    return dict(kind="embedding", model=model, vocab_file=vocab, seq_length=length,
                lowercase=True if lowercase is None else lowercase, origin=spec,
                embedding={"pooling": pooling, "normalize": bool(normalize)})
