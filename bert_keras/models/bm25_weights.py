"""`BM25Weights`: each token's BM25 weight in its text, from IDF statistics fitted on a corpus.

The weights of `BertEmbedder(pooling="bm25")` (a weighted mean that raises a text's rare,
telling word pieces over its frequent ones). The terms are word-piece ids; the corpus
statistics (IDF per id, average text length, k1, b) are non-trainable weights, so they are
saved with the model (`.keras`, the fine-tuned directory) and travel into a SavedModel.

For a text `d` whose terms are its word pieces ([CLS], [SEP], [PAD] and any id fitted as
excluded are not terms), `|d|` its number of terms, and a term `t` occurring `tf(t, d)`
times in it:

    IDF(t)     = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))                  (Lucene's BM25 IDF)
    BM25(t, d) = IDF(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with `N` the corpus' number of texts, `df(t)` how many of them hold `t`, `avgdl` their mean
number of terms. Each occurrence of `t` gets `BM25(t, d) / tf(t, d)` (a term's occurrences
share its score), and a text's weights are divided by their sum (they sum to 1; a text with
no term gets all zeros). IDF is never negative (Lucene's form, not Robertson's), and an id the
corpus never held gets the highest IDF, `ln(1 + (N + 0.5) / 0.5)`.
"""

import numbers

import keras
import numpy as np
import tensorflow as tf
from keras import ops


class NotFittedError(ValueError):
    """BM25 weights asked of a layer whose IDF was never fitted on a corpus."""


@keras.saving.register_keras_serializable(package="bert_keras")
class BM25Weights(keras.layers.Layer):
    """BM25 weights of each position of packed token ids (see the module docstring for the formula).

    Inputs: `token_ids` and `padding_mask`, int `[B, S]`. Output: float32 `[B, S]`, each
    row's weights summing to 1 over its terms, 0 at padding and at excluded ids.
    Vectorized: the term frequencies come from one `[B, S, S]` comparison, no loop over
    texts. Fit the statistics with `adapt` (token ids of a corpus) before calling it.

    Example:

    >>> import numpy as np
    >>> bm25 = BM25Weights(vocab_size=10)
    >>> # corpus: 3 texts of word-piece ids; [CLS] = 2 and [SEP] = 3 are not terms
    >>> bm25.adapt([[5, 6], [5, 7, 7], [5, 8]], excluded_ids=(0, 2, 3))
    >>> ids = np.array([[2, 5, 6, 3, 0]], "int32")
    >>> weights = bm25(ids, (ids > 0).astype("int32"))
    >>> [round(float(w), 3) for w in weights[0]]   # the rare 6 outweighs 5 (in every text)
    [0.0, 0.12, 0.88, 0.0, 0.0]
    >>> ids = np.array([[2, 5, 7, 7, 3]], "int32")   # 7 twice: its two occurrences share BM25(7, d)
    >>> [round(float(w), 3) for w in bm25(ids, (ids > 0).astype("int32"))[0]]
    [0.0, 0.087, 0.456, 0.456, 0.0]

    Args:
        vocab_size: int. Number of token ids.
        **kwargs: `keras.layers.Layer` arguments (the layer computes in float32).
    """

    def __init__(self, vocab_size, **kwargs):
        kwargs["dtype"] = "float32"  # the statistics and weights stay float32 under any policy
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)

    def build(self, *input_shapes):
        def scalar(name, value):
            return self.add_weight(shape=(), initializer=keras.initializers.Constant(value), name=name,
                                   trainable=False, dtype="float32")

        self.idf = self.add_weight(shape=(self.vocab_size,), initializer="zeros", name="idf",
                                   trainable=False, dtype="float32")
        self.average_length = scalar("average_length", 0.0)
        self.num_documents = scalar("num_documents", 0.0)
        self.k1 = scalar("k1", 1.2)
        self.b = scalar("b", 0.75)

    @property
    def is_fitted(self):
        """Whether `adapt` has fitted the statistics (read from the weights, so a loaded model knows)."""
        return self.built and float(ops.convert_to_numpy(self.num_documents)) > 0

    def adapt(self, token_ids, *, excluded_ids=(), k1=1.2, b=0.75):
        """Fits IDF and the average text length on a corpus (Keras' preprocessing-layer verb).

        Vectorized: document frequencies are one `np.unique` over (text, id) keys.

        Args:
            token_ids: the corpus' word-piece ids, one sequence per text (a `tf.RaggedTensor`
                `[N, (pieces)]`, or a list of int sequences), without [CLS] / [SEP].
            excluded_ids: ids that are not terms (IDF 0, not counted in lengths): the task
                passes [CLS], [SEP] and [PAD].
            k1: term-frequency saturation (a finite number >= 0).
            b: length normalization, in [0, 1].

        Raises:
            ValueError: an empty corpus, one without any term, an id outside the vocabulary,
                or k1 / b out of range.
        """
        # k1 = inf made every weight inf / inf: NaN vectors, silently.
        numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in (k1, b))
        if not numeric or not 0 <= k1 < float("inf") or not 0 <= b <= 1:
            raise ValueError(f"k1={k1!r} must be a finite number >= 0 and b={b!r} a number in [0, 1]")
        values, lengths = _flat_rows(token_ids)
        count = len(lengths)
        if count == 0:
            raise ValueError("adapt: an empty corpus (no text)")
        if values.size and (values.min() < 0 or values.max() >= self.vocab_size):
            raise ValueError(f"adapt: token ids must be in [0, {self.vocab_size}); got "
                             f"{int(values.min())} .. {int(values.max())}")
        excluded = np.zeros(self.vocab_size, bool)
        excluded[np.asarray(list(excluded_ids), np.int64)] = True
        rows = np.repeat(np.arange(count, dtype=np.int64), lengths)
        is_term = ~excluded[values]
        values, rows = values[is_term], rows[is_term]
        if values.size == 0:
            raise ValueError(f"adapt: the {count} corpus texts hold no term (no word piece)")
        pairs = np.unique(rows * self.vocab_size + values)  # each (text, id) once
        document_frequency = np.bincount(pairs % self.vocab_size, minlength=self.vocab_size)
        idf = np.log1p((count - document_frequency + 0.5) / (document_frequency + 0.5))
        idf[excluded] = 0.0
        if not self.built:
            self.build()
        self.idf.assign(idf.astype(np.float32))
        self.average_length.assign(float(values.size) / count)
        self.num_documents.assign(float(count))
        self.k1.assign(float(k1))
        self.b.assign(float(b))

    def call(self, token_ids, padding_mask):
        ids = ops.cast(token_ids, "int32")
        real = ops.cast(padding_mask, "float32")
        idf = ops.take(self.idf, ids, axis=0) * real  # [B, S]; 0 at padding and excluded ids
        term = ops.cast(idf > 0, "float32")
        # tf(t, d) at each position: how many of the row's terms have this position's id.
        same = ops.cast(ops.equal(ids[:, :, None], ids[:, None, :]), "float32")  # [B, S, S]
        frequency = ops.sum(same * term[:, None, :], axis=-1)  # [B, S]
        length = ops.sum(term, axis=1, keepdims=True)  # |d|, [B, 1]
        saturation = self.k1 * (1.0 - self.b + self.b * length / ops.maximum(self.average_length, 1e-9))
        # BM25(t, d) / tf(t, d): each occurrence's share of its term's score.
        share = idf * (self.k1 + 1.0) / ops.maximum(frequency + saturation, 1e-9)
        share = ops.where(term > 0, share, ops.zeros_like(share))
        return share / ops.maximum(ops.sum(share, axis=1, keepdims=True), 1e-30)

    def compute_output_shape(self, token_ids_shape, padding_mask_shape=None):
        return tuple(token_ids_shape)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size}


def _flat_rows(token_ids):
    """`(values int64 [T], lengths int64 [N])` of ragged / list rows of ids."""
    if isinstance(token_ids, tf.RaggedTensor):
        if token_ids.ragged_rank != 1:
            raise ValueError("adapt: token_ids must be [texts, (pieces)]")
        return (token_ids.flat_values.numpy().astype(np.int64),
                token_ids.row_lengths().numpy().astype(np.int64))
    rows = [np.asarray(row, np.int64).reshape(-1) for row in token_ids]
    lengths = np.array([len(row) for row in rows], np.int64)
    values = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    return values, lengths
