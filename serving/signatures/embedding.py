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


def build(module, finetuned):
    """`{signature name: (concrete function, method name)}` for `module` (a `ServingModule`)."""

    def embed(inputs):
        return {"embedding": module.run_model(inputs)["sentence_embedding"]}

    serve = tf.function(lambda text: embed(module.text.pack([module.text.tokenize(text, "text")])),
                        input_signature=[string_spec("text")])
    token_ids = tf.function(embed, input_signature=[ids_specs(2)])
    return {"serving_default": (serve.get_concrete_function(), PREDICT),
            "token_ids": (token_ids.get_concrete_function(), PREDICT)}


def reference_outputs(finetuned, inputs):
    """`serving_default`'s outputs the Python way: tokenizer + packer + Keras embedder."""
    tokenizer = finetuned.tokenizer()
    packer = finetuned.packer(tokenizer)
    x = packer(tokenizer.tokenize(tf.constant(list(inputs["text"]))))
    return {"embedding": np.asarray(finetuned.model(x, training=False)["sentence_embedding"],
                                    np.float32)}


# -- what the export path asks of this family (serving.signatures.kind_module) -------------

QUERY_EXAMPLE = '"your text"'


def sample_rows(finetuned):
    from serving.signatures.samples import SENTENCES

    return [{"text": s} for s in SENTENCES]


def rows_from_file(finetuned, path, count):
    return None


def from_encoder_spec(spec, *, pooling="mean", normalize=False, seq_length=None, lowercase=None,
                      vocab_file=None):
    """The `FinetunedModel` (kind "embedding") of an encoder spec: a `BertEmbedder` on it.

    Args:
        spec: what `bert_keras.checkpoints.load_pretrained` takes.
        pooling, normalize: the `BertEmbedder`'s (recorded in the settings).
        seq_length: packed length (default 128, at most the encoder's positions).
        lowercase: uncased tokenization (default True).
        vocab_file: the vocabulary, when the spec has none beside it.
    """
    from bert_keras.checkpoints import find_vocabulary, load_pretrained
    from bert_keras.finetuned_model import FinetunedModel
    from bert_keras.models import BertEmbedder

    vocab = vocab_file or find_vocabulary(spec)
    if vocab is None:
        raise ValueError(f"{spec}: no vocab.txt beside the model; pass vocab_file= / --vocab")
    encoder = load_pretrained(
        spec, output_hidden_states=pooling in ("concat_last4", "sum_last4", "weighted"))
    model = BertEmbedder(encoder, pooling=pooling, normalize=normalize)
    return FinetunedModel(kind="embedding", model=model, vocab_file=vocab,
                          seq_length=seq_length or min(128, encoder.config.max_position_embeddings),
                          lowercase=True if lowercase is None else lowercase,
                          settings={"pooling": pooling, "normalize": bool(normalize)},
                          training={"init": spec})
