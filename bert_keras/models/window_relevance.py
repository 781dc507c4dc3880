"""`WindowRelevance`: how much a window of a long text reads like the texts a classifier learned from.

A classifier that reads a long text in windows scores every window, and the windows of text
unlike anything it was trained on (an article in front of a review, boilerplate around a
clause) get confident scores too: the mean or max of the windows' logits is then about as
often wrong as right (docs/python-api.md, "Long documents"). The windows that hold the
evidence are the ones that look like the training texts, and low layers say that well:
the mean token vector after the first third of the blocks sits close to the training texts'
for text of their kind and far for other text (the Mahalanobis distance of Lee et al. 2018,
as Podolskiy et al. 2021 use it for text; measured on SST-2 reviews after Wikipedia or
fiction, it picks the review's window in 93-100% of the documents, where the last layer's
pooled vector picks it in 20-36%).

The layer holds what that needs, as non-trainable weights saved with the head: the class
means `[K, H]` and the shared precision `[H, H]` of the training windows' features (each
window under the class the model predicts for it, so unlabelled text fits it too),
`threshold`, the 99th percentile of the training windows' distances (0 until fitted), and
`typical`, their median.

A short text after unrelated text shares its window with that text (a 512-piece window can
hold a 20-piece review and 490 pieces of prose, and its distance is the prose's: in 512-piece
windows the closest window is the prose-only one in most such texts), so a text whose windows
are mostly far is read once more, sentence by sentence, each sentence encoded alone
(`closest_sentences`, over the text's pieces, the windows' overlap once). Fewer than half of
its sentences typical: it gets the mean logits of its closest sentence and the typical
sentences next to it (the evidence among unrelated text). More: it is a long text of the kind,
far only by its length (the token mean shifts with it), and gets the mean of all its windows
(measured on 256-piece windows: 69% of a long review's sentences are typical, 13-22% of
Wikipedia's or a story's). The second read costs about half the text's windows' pieces (the
windows overlap by half), for far texts only.

A classifier reads the features in the same real-token pass as its logits
(`BertClassifier.logits_and_features`, `padding_skipping.pooled_and_token_mean`), so they
cost nothing at inference; `features` / `distances` run that pass on their own.

Example:

>>> import numpy as np
>>> from bert_keras.config import BertConfig
>>> from bert_keras.encoder import BertEncoder
>>> encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100))
>>> relevance = WindowRelevance(num_classes=2, hidden_size=128, layer=1)
>>> ids = np.array([[2, 7, 9, 3], [2, 5, 3, 0]], "int32")
>>> x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
>>> features = relevance.features(encoder, x)
>>> relevance.fit_statistics(np.asarray(features), np.array([0, 1]))
>>> relevance.distances(encoder, x).shape, relevance.fitted
(TensorShape([2]), True)
"""

import keras
import numpy as np
import tensorflow as tf

# The training windows' distances below this quantile are "in domain".
THRESHOLD_QUANTILE = 0.99
# ... and below this one "typical": a window whose sentences, read alone, are mostly typical
# is a long text of the kind (its length alone put it out of domain), not evidence among
# unrelated text (measured on 256-piece windows: 69% of a long review's sentences are
# typical, 13-22% of Wikipedia's or a story's).
TYPICAL_QUANTILE = 0.5
# The share of a window's sentences that must be typical for that.
TYPICAL_SHARE = 0.5
# Ridge on the covariance, relative to its mean variance: keeps the precision finite when
# there are fewer windows than dimensions, and measured as good as the best absolute value.
RIDGE = 0.03


NOT_FITTED = ('window_aggregation="evidence" reads the statistics of the training windows, which are '
              "not fitted: call classifier.fit_window_statistics(training_texts) once it is trained")


def relevance_layer(num_layers):
    """The block after which windows are compared: the first third of the encoder (2 of 6, 4 of 12)."""
    return max(1, round(num_layers / 3))


@keras.saving.register_keras_serializable(package="bert_keras")
class WindowRelevance(keras.layers.Layer):
    """Class means, shared precision and in-domain threshold of a classifier's training windows.

    Args:
        num_classes: int. Classes of the classifier (the means' rows).
        hidden_size: int. The encoder's hidden size.
        layer: int. Blocks run before the mean token vector is taken (1..num_layers).
    """

    def __init__(self, num_classes, hidden_size, layer, **kwargs):
        kwargs.setdefault("trainable", False)
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.num_classes, self.hidden_size, self.layer = int(num_classes), int(hidden_size), int(layer)
        self.class_means = self.add_weight(shape=(self.num_classes, self.hidden_size), initializer="zeros",
                                           trainable=False, name="class_means")
        self.precision = self.add_weight(shape=(self.hidden_size, self.hidden_size), initializer="zeros",
                                         trainable=False, name="precision")
        self.threshold = self.add_weight(shape=(), initializer="zeros", trainable=False, name="threshold")
        self.typical = self.add_weight(shape=(), initializer="zeros", trainable=False, name="typical")
        self.built = True

    def load_own_variables(self, store):
        if len(store.keys()) == 3:  # saved before `typical`: the windows' rule, without sentences
            for index, variable in enumerate((self.class_means, self.precision, self.threshold)):
                variable.assign(store[str(index)])
            self.typical.assign(0.0)
            return
        super().load_own_variables(store)

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes, "hidden_size": self.hidden_size,
                "layer": self.layer}

    @property
    def fitted(self):
        return bool(float(self.threshold.numpy()) > 0)

    @property
    def reads_sentences(self):
        """Whether a far window's sentences are read alone (statistics fitted since `typical`)."""
        return bool(float(self.typical.numpy()) > 0)

    def features(self, encoder, inputs):
        """float32 `[B, H]`: the mean vector of each row's real tokens after `layer` blocks."""
        from bert_keras import padding_skipping

        return padding_skipping.pooled_and_token_mean(encoder, inputs, self.layer)[1]

    def distances_of(self, features):
        """float32 `[B]`: each feature row's squared Mahalanobis distance to the nearest class mean."""
        difference = features[:, tf.newaxis, :] - self.class_means[tf.newaxis]  # [B, K, H]
        squared = tf.einsum("bkh,hg,bkg->bk", difference, self.precision, difference)
        return tf.reduce_min(squared, axis=-1)

    def distances(self, encoder, inputs):
        """float32 `[B]`: how far each row of packed windows reads from the training windows."""
        return self.distances_of(self.features(encoder, inputs))

    def fit_statistics(self, features, classes):
        """Sets the means, precision and threshold from training windows' `features` `[N, H]`
        and `classes` `[N]` (a class without windows keeps the overall mean)."""
        features = np.asarray(features, np.float64)
        classes = np.asarray(classes)
        overall = features.mean(axis=0)
        means = np.stack([features[classes == k].mean(axis=0) if np.any(classes == k) else overall
                          for k in range(self.num_classes)])
        centered = features - means[classes]
        covariance = centered.T @ centered / max(len(features), 1)
        covariance += RIDGE * max(float(np.mean(np.diag(covariance))), 1e-12) * np.eye(self.hidden_size)
        precision = np.linalg.inv(covariance)
        self.class_means.assign(means.astype(np.float32))
        self.precision.assign(precision.astype(np.float32))
        distances = self.distances_of(tf.constant(features, tf.float32)).numpy()
        self.threshold.assign(max(float(np.quantile(distances, THRESHOLD_QUANTILE)), 1e-6))
        self.typical.assign(max(float(np.quantile(distances, TYPICAL_QUANTILE)), 1e-7))


# Pieces that end a sentence. BERT's basic tokenizer splits punctuation into words of their
# own, so each of these is a whole word and never followed by a "##" piece.
SENTENCE_END_PIECES = (".", "!", "?", "\u3002", "\uff01", "\uff1f")


def sentence_end_ids(vocabulary):
    """int32 `[E]`: the ids in `vocabulary` (a list of tokens) of the pieces that end a sentence."""
    ends = set(SENTENCE_END_PIECES)
    return np.array([i for i, token in enumerate(vocabulary) if token in ends], np.int32)


def sentences_of_texts(windows, text, window, step, end_ids):
    """Each sentence of each text, read from its packed single-text windows, as a row of its own:
    `(rows, owner)`.

    `windows`: packed windows `[W, S]` of consecutive texts (`text` `[W]`: 0, 0, 1, 2, 2, ...),
    each text's windows of up to `window` pieces starting `step` pieces apart
    (`pipelines.windowing`). A text's pieces are its windows' own parts (the first `step` of
    each, all of its last), so the overlap is read once. A sentence runs to the last of a run
    of end pieces (`end_ids`: "!!!" and "..." stay with their sentence), or `window` pieces,
    or the text's end; each row of `rows` (int32 `tf.RaggedTensor` `[R, (pieces)]`) is `[CLS] sentence
    [SEP]` with the text's special pieces, and `owner` `[R]` the text of each row, in order.
    A text of special pieces only has no row.
    """
    token_ids = tf.cast(windows["token_ids"], tf.int32)
    text = tf.cast(text, tf.int64)
    lengths = tf.reduce_sum(tf.cast(tf.cast(windows["padding_mask"], tf.bool), tf.int32), axis=-1)
    content = tf.maximum(lengths - 2, 0)
    is_last = tf.concat([text[1:] != text[:-1], tf.ones_like(text[:1], tf.bool)], axis=0)
    own = tf.where(is_last, content, tf.minimum(content, step))
    positions = tf.range(tf.shape(token_ids)[1])[tf.newaxis]
    parts = tf.ragged.boolean_mask(token_ids, (positions >= 1) & (positions < 1 + own[:, tf.newaxis]))
    count = tf.reduce_max(tf.concat([text, [-1]], 0)) + 1
    texts = tf.RaggedTensor.from_value_rowids(parts.flat_values, tf.gather(text, parts.value_rowids()),
                                              nrows=count)
    pieces, owner_of_piece = texts.flat_values, texts.value_rowids()
    is_end = tf.reduce_any(pieces[:, tf.newaxis] == tf.cast(end_ids, tf.int32)[tf.newaxis], axis=-1)
    index = tf.range(tf.size(pieces, out_type=tf.int64))
    first_of_text = index == tf.gather(texts.row_starts(), owner_of_piece)
    ends_run = tf.concat([is_end[:-1] & ~is_end[1:], [False]], 0)[:tf.size(is_end)]  # the last of a run
    sentence = tf.cumsum(tf.cast(first_of_text | tf.concat([[False], ends_run], 0)[:-1], tf.int64)) - 1
    # a sentence longer than a window is cut into rows of `window` pieces
    in_sentence = index - tf.gather(tf.math.unsorted_segment_min(index, sentence, tf.size(index, tf.int64)), sentence)
    cap = tf.constant(max(int(window), 1), tf.int64)
    opens = (index == 0) | (sentence != tf.concat([[-1], sentence[:-1]], 0)) | (in_sentence % cap == 0)
    row = tf.cumsum(tf.cast(opens, tf.int64)) - 1
    sentences = tf.RaggedTensor.from_value_rowids(pieces, row)
    owner = tf.math.segment_min(owner_of_piece, row)
    first_window = tf.math.unsorted_segment_min(tf.range(tf.size(text, out_type=tf.int64)), text, count)
    cls = tf.gather(token_ids[:, 0], tf.gather(first_window, owner))
    sep_at = tf.stack([tf.gather(first_window, owner), tf.cast(tf.gather(tf.gather(lengths, first_window), owner) - 1,
                                                               tf.int64)], -1)
    sep = tf.gather_nd(token_ids, sep_at)
    return tf.concat([cls[:, tf.newaxis], sentences, sep[:, tf.newaxis]], axis=1), owner


def packed_rows(rows):
    """Model inputs of ragged rows of pieces, padded to the longest (at least 2 positions)."""
    width = tf.maximum(tf.reduce_max(rows.row_lengths()), 2)  # no row: reduce_max is the int minimum
    shape = tf.stack([rows.nrows(), width])
    token_ids = rows.to_tensor(0, shape=shape)
    return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids),
            "padding_mask": tf.ones_like(rows).to_tensor(0, shape=shape)}


def run_rows_in_chunks(run, rows, positions):
    """`run(inputs) -> (logits, distances)` over ragged `rows`, longest first, in chunks of at
    most `positions` padded positions: a window of one long sentence and many one-piece ones
    would otherwise pad every row to the long one (quadratic in the window). Returns the
    outputs (logits `[R, C]`, a regressor's scores as `[R, 1]`; distances `[R]`) and the order
    (row indices) they come in."""
    order = tf.argsort(rows.row_lengths(), direction="DESCENDING", stable=True)
    rows = tf.gather(rows, order)
    count = rows.nrows()
    lengths = tf.concat([rows.row_lengths(), [0]], 0)
    budget = tf.cast(positions, tf.int64)
    logits = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                            element_shape=tf.TensorShape([None, None]))
    distances = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                               element_shape=tf.TensorShape([None]))

    def body(i, start, logits, distances):
        # as many rows as the chunk's first (longest) row allows
        size = tf.maximum(budget // tf.maximum(tf.gather(lengths, start), 2), 1)
        chunk_logits, chunk_distances = run(packed_rows(rows[start:start + size]))
        chunk_logits = tf.reshape(chunk_logits, [tf.shape(chunk_logits)[0], -1])  # a regressor's [R]: [R, 1]
        return (i + 1, start + size, logits.write(i, tf.cast(chunk_logits, tf.float32)),
                distances.write(i, tf.cast(chunk_distances, tf.float32)))

    # no row: one run on none (the outputs' shapes)
    _, _, logits, distances = tf.while_loop(lambda i, start, *_: (i == 0) | (start < count), body,
                                            [tf.constant(0), tf.constant(0, tf.int64), logits, distances])
    return logits.concat(), distances.concat(), order


# Padded positions of sentence rows per model call (a few 512-piece windows' worth).
SENTENCE_CHUNK_POSITIONS = 4096


def closest_sentences(run, windows, text, window, step, end_ids, typical):
    """What each text says by its sentences, each encoded alone (`sentences_of_texts`;
    `run(inputs) -> (logits, distances)`): `(logits [T, C], distances [T], typical_share [T])`.

    `distances`: its closest sentence's; `logits`: the mean logits of that sentence and the
    typical sentences (within `typical`) next to it, up to the first sentence that is not (a
    review of several sentences reads whole: on 3-sentence SST-2 reviews after prose, 0.80-0.88
    against 0.77-0.79 for the closest sentence alone); `typical_share`: the share of its
    sentences within `typical`. A text with no sentence gets distance +inf (zero logits, share
    0). A regressor's scores `[R]` come back as `[T, 1]`.
    """
    rows, owner = sentences_of_texts(windows, text, window, step, end_ids)
    logits, distances, order = run_rows_in_chunks(run, rows, SENTENCE_CHUNK_POSITIONS)
    inverse = tf.math.invert_permutation(tf.cast(order, tf.int32))  # back to the texts' order
    logits, distances = tf.gather(logits, inverse), tf.gather(distances, inverse)
    count = tf.reduce_max(tf.concat([tf.cast(text, tf.int64), [-1]], 0)) + 1
    best = tf.math.unsorted_segment_min(distances, owner, count)  # float max where none
    index = tf.range(tf.size(distances, out_type=tf.int64))
    first_best = tf.math.unsorted_segment_min(tf.where(distances <= tf.gather(best, owner), index, tf.int64.max),
                                              owner, count)
    none = tf.size(distances, out_type=tf.int64)
    has = first_best < none
    # the run of typical sentences around the closest one: runs numbered from 1, 0 outside
    typical_row = distances <= typical
    in_run = typical_row | (index == tf.gather(first_best, owner))
    follows = tf.concat([[False], in_run[:-1] & (owner[1:] == owner[:-1])], axis=0)[:tf.size(in_run)]
    run_id = tf.where(in_run, tf.cumsum(tf.cast(in_run & ~follows, tf.int64)), 0)
    best_run = tf.gather(tf.concat([run_id, [0]], 0), tf.where(has, first_best, none))
    member = tf.cast(in_run & (run_id == tf.gather(best_run, owner)), logits.dtype)
    members = tf.math.unsorted_segment_sum(member, owner, count)
    region = tf.math.unsorted_segment_sum(logits * member[:, tf.newaxis], owner, count) / tf.maximum(members, 1.0)[:, tf.newaxis]
    sentences = tf.math.unsorted_segment_sum(tf.ones_like(distances), owner, count)
    typical_count = tf.math.unsorted_segment_sum(tf.cast(typical_row, distances.dtype), owner, count)
    return region, tf.where(has, best, tf.constant(np.inf, best.dtype)), typical_count / tf.maximum(sentences, 1.0)


def sentence_reading(read_texts, windows_of, document):
    """The `sentence_reading` of `evidence_logits`: `far` text
    indices -> what `read_texts` says of those texts' windows (TensorFlow, eager or in a graph).

    Args:
        read_texts: `(windows, text) -> closest_sentences(run, windows, text, ...)`, `text` the
            text of each window numbered from 0.
        windows_of: window indices `[N]` -> those windows' packed inputs.
        document: int `[W]`, the text of each window (sorted).
    """
    document = tf.cast(document, tf.int64)

    def reading(far):
        far = tf.cast(far, tf.int64)
        texts = tf.reduce_max(tf.concat([document, far, [-1]], 0)) + 1
        is_far = tf.scatter_nd(far[:, tf.newaxis], tf.ones_like(far, tf.bool), texts[tf.newaxis])
        index = tf.where(tf.gather(is_far, document))[:, 0]
        text = tf.searchsorted(far, tf.gather(document, index))  # 0 .. len(far) - 1
        return read_texts(windows_of(index), text)

    return reading


def evidence_logits(logits, distances, threshold, document, sentence_reading=None):
    """One row of logits per text from its windows' logits and distances (TensorFlow, eager or in
    a graph: `predict` and the export run this one rule).

    A text whose windows read mostly like the training texts (at least half within
    `threshold`) gets the mean logits of those windows; any other ("far") text, the logits of
    the window that reads most like them. With `sentence_reading(far text indices) ->
    (logits, distances, typical_share)` (`closest_sentences`), a far text is read by its
    sentences instead: fewer than `TYPICAL_SHARE` of them typical, its closest sentences
    (the evidence among unrelated text: a window of 512 pieces drowns a 20-piece review in
    prose, and its distance is the prose's); more, the mean of all its windows (a long text
    of the kind, far only by its length). A text of one window follows the same rule.

    Args:
        logits: `[W, C]` (or a regressor's `[W]`) of each window.
        distances: `[W]` each window's distance to the training windows (`distances_of`).
        threshold: the distance within which a window reads like the training texts.
        document: int64 `[W]`, the text of each window (sorted segment ids, from 0).
        sentence_reading: see above, or None (windows only).
    """
    if logits.shape.rank == 1:  # a regressor's scores: one column, and back
        return evidence_logits(logits[:, tf.newaxis], distances, threshold, document, sentence_reading)[:, 0]
    near = tf.cast(distances <= threshold, logits.dtype)
    count = tf.math.segment_sum(tf.ones_like(near), document)
    near_count = tf.math.segment_sum(near, document)
    near_mean = tf.math.segment_sum(logits * near[:, tf.newaxis], document) / tf.maximum(near_count, 1.0)[:, tf.newaxis]
    nearest = tf.math.segment_min(distances, document)
    positions = tf.range(tf.shape(distances, out_type=tf.int64)[0])
    is_nearest = distances <= tf.gather(nearest, document)
    first_nearest = tf.math.segment_min(tf.where(is_nearest, positions, tf.int64.max), document)
    mostly_near = 2 * near_count >= count
    result = tf.where(mostly_near[:, tf.newaxis], near_mean, tf.gather(logits, first_nearest))
    if sentence_reading is None:
        return result
    far = tf.where(tf.logical_not(mostly_near))[:, 0]
    sentence_logits, sentence_distances, typical_share = sentence_reading(far)
    sentence_logits = tf.reshape(tf.cast(sentence_logits, logits.dtype), [-1, tf.shape(logits)[1]])
    by_sentences = tf.where((tf.math.is_finite(sentence_distances))[:, tf.newaxis], sentence_logits,
                            tf.gather(result, far))
    all_windows = tf.gather(tf.math.segment_mean(logits, document), far)
    far_logits = tf.where((typical_share >= TYPICAL_SHARE)[:, tf.newaxis], all_windows, by_sentences)
    return tf.tensor_scatter_nd_update(result, far[:, tf.newaxis], far_logits)
