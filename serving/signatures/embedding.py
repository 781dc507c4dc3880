"""Signatures of a sentence-embedding export (`BertEmbedder`).

* `serving_default` (predict): `text` string `[B]` -> `embedding` float32 `[B, H]`
  (the embedder's pooling over real tokens, of its `pooling_layer`; BM25 weights from the
  IDF table inside the model; unit length when exported with `normalize=True`) and
  `truncated` bool `[B]` (texts read only in part) and `empty` bool `[B]` (texts with no token:
  empty, only whitespace or control / format characters; not an error, such a text gets the
  vector of an empty input, `[CLS] [SEP]`, as `predict` gives it). A model with
  `max_length` past one window reads a text in windows inside the graph, as its `predict`
  does: the mean of the windows' vectors weighted by their real tokens (re-normalized); a
  `max_length` under one window reads a text's first `max_length` pieces, as `predict`.
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
from serving.signatures.text_inputs import DEFAULT_CHARS_PER_TOKEN, ids_specs, python_windows, string_spec
from serving.signatures.text_inputs import window_reading


def build(module, finetuned):
    """`{signature name: (concrete function, method name)}` for `module` (a `ServingModule`)."""

    windows = window_reading(finetuned)
    normalize = bool(finetuned.settings.get("normalize"))

    def embed(inputs):
        return {"embedding": module.run_model(inputs)["sentence_embedding"]}

    def embed_texts(text):
        if not windows:
            ids = module.text.tokenize(text, "text")
            return {**embed(module.text.pack([ids])), "truncated": module.text.truncated([ids], [text]),
                    "empty": module.text.empty([ids])}
        stride, max_length = windows
        inputs, document, truncated, empty = module.text.windows(text, "text", max_length=max_length,
                                                                 stride=stride)
        vectors = module.run_model(inputs)["sentence_embedding"]
        weights = tf.cast(tf.reduce_sum(inputs["padding_mask"], axis=-1, keepdims=True), vectors.dtype)
        vectors = (tf.math.segment_sum(vectors * weights, document)
                   / tf.math.segment_sum(weights, document))
        if normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1, epsilon=1e-24)
        return {"embedding": vectors, "truncated": truncated, "empty": empty}

    serve = tf.function(embed_texts, input_signature=[string_spec("text")])
    token_ids = tf.function(embed, input_signature=[ids_specs(2)])
    return {"serving_default": (serve.get_concrete_function(), PREDICT),
            "token_ids": (token_ids.get_concrete_function(), PREDICT)}


def reference_outputs(finetuned, inputs):
    """`serving_default`'s outputs the Python way: tokenizer + packer + Keras embedder."""
    texts = list(inputs["text"])
    if window_reading(finetuned):
        x, document, truncated, empty = python_windows(finetuned, texts)
        vectors = np.asarray(finetuned.model(x, training=False)["sentence_embedding"], np.float64)
        weights = np.asarray(x["padding_mask"]).sum(-1).astype(np.float64)[:, None]
        starts = np.flatnonzero(np.diff(np.concatenate([[-1], document])))
        vectors = (np.add.reduceat(vectors * weights, starts, axis=0)
                   / np.add.reduceat(weights, starts, axis=0))
        if finetuned.settings.get("normalize"):
            vectors /= np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
        return {"embedding": vectors.astype(np.float32), "truncated": np.asarray(truncated),
                "empty": np.asarray(empty)}
    tokenizer = finetuned.tokenizer()
    packer = finetuned.packer(tokenizer)
    ids = tokenizer.tokenize(tf.constant(texts))
    x = packer(ids)
    cut = np.array([len(t.lstrip()) > finetuned.seq_length * DEFAULT_CHARS_PER_TOKEN for t in texts])
    return {"embedding": np.asarray(finetuned.model(x, training=False)["sentence_embedding"], np.float32),
            "truncated": (ids.row_lengths().numpy() > finetuned.seq_length - 2) | cut,
            "empty": ids.row_lengths().numpy() == 0}


# -- what the export path asks of this family (serving.signatures.kind_module) -------------

def sample_rows(finetuned):
    from serving.signatures.samples import SENTENCES

    return [{"text": s} for s in SENTENCES]


def rows_from_file(finetuned, path, count):
    return None


def from_encoder_spec(spec, *, pooling="mean", normalize=False, pooling_layer=-1, seq_length=None,
                      lowercase=None, strip_accents=None, vocab_file=None, unicode_normalization=None):
    """The `FinetunedModel` (kind "embedding") of an encoder spec: a `BertEmbedder` on it.

    Args:
        spec: what `bert_keras.checkpoints.load_pretrained` takes.
        pooling, normalize, pooling_layer: the `BertEmbedder`'s (recorded in the settings).
            `pooling="bm25"` needs a corpus' IDF, which a spec does not have: export a
            `bert_keras.tasks.Embedder` after its `fit_idf(texts)` (`bert-keras export
            --init SPEC --pooling bm25 --idf-corpus FILE`).
        seq_length: packed length (default a sentence-transformers checkpoint's `max_seq_length`,
            else 128; at most the encoder's positions).
        lowercase, strip_accents: the tokenizer's rules (None: the checkpoint's
            `tokenizer_config.json`, else as its vocabulary's tokens show).
        vocab_file: the vocabulary, when the spec has none beside it.
        unicode_normalization: "NFC" composes every request's text in the graph before tokenizing
            (None: the one the vocabulary records, `bert-keras vocab --unicode-normalization NFC`'s;
            "none": text read as given). On an encoder pretrained without it, NFC changes only what it
            would read as [UNK] or jamo: Hangul sent decomposed (NFD) by a client.

    An HF checkpoint's added tokens are found whole, as the tasks find them (`reading_added_tokens`).
    """
    from bert_keras.checkpoints import (find_sentence_seq_length, find_vocabulary, load_pretrained,
                                        reading_added_tokens)
    from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings
    from bert_keras.finetuned_model import FinetunedModel
    from bert_keras.models import BertEmbedder

    from bert_keras.models.embedder import NOT_FITTED

    if pooling == "bm25":
        raise ValueError(f"{spec}: {NOT_FITTED}; export that Embedder (task.export) instead of the spec")
    # an HF tokenizer's added tokens ("[E1]"), found whole as `Embedder.from_pretrained(spec)` finds them
    # (`task_from_pretrained`); a vocab_file= of another vocabulary is read by its own rules
    with reading_added_tokens(spec, vocab_file=vocab_file) as added:
        vocab = vocab_file or find_vocabulary(spec)
        if vocab is None:
            raise ValueError(f"{spec}: no vocab.txt beside the model; pass vocab_file= / --vocab")
        encoder = load_pretrained(
            spec, output_hidden_states=pooling in ("concat_last4", "sum_last4", "weighted") or pooling_layer != -1)
    model = BertEmbedder(encoder, pooling=pooling, normalize=normalize, pooling_layer=pooling_layer)
    positions = encoder.config.max_position_embeddings
    rules = resolve_tokenizer_settings(vocab, lowercase, strip_accents, unicode_normalization=unicode_normalization)
    return FinetunedModel(kind="embedding", model=model, vocab_file=vocab,
                          seq_length=seq_length or min(find_sentence_seq_length(spec) or 128, positions),
                          **rules, added_tokens=added,
                          settings={"pooling": pooling, "normalize": bool(normalize),
                                    "pooling_layer": int(pooling_layer)},
                          training={"init": spec})
