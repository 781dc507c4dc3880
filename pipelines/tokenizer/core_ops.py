"""WordPiece made of core TensorFlow ops only: no TF-Text custom ops in the graph.

TensorFlow Serving links its own, often older, copy of the TF-Text ops
(tensorflow/serving#2267, #2064): a SavedModel whose graph uses
`FastWordpieceTokenizeWithOffsets` may load in Python and still fail in the
server with "Op type not registered". This backend uses only `Substr`, a hash
table and a `while` loop, which every TF Serving build has. It returns the
same ids and offsets as `wordpiece.FastWordpiece`; it is slower.

The algorithm is the original greedy longest-match-first, run for all words at
once: each loop step tries, for every word not yet finished, every candidate
length from the longest vocabulary entry down, and keeps the longest match.
"""

import tensorflow as tf

from pipelines import row_ops

SUFFIX = "##"


class CoreWordpiece(tf.Module):
    """WordPiece for a flat list of normalized words, core TF ops only.

    Args:
        vocabulary: list of str, the vocabulary in id order.
        unk_token: the token for words that cannot be split.
    """

    uses_tf_text_ops = False

    def __init__(self, vocabulary, *, unk_token="[UNK]", name=None):
        super().__init__(name=name)
        vocabulary = list(vocabulary)
        self._unk_id = vocabulary.index(unk_token)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary), tf.range(len(vocabulary), dtype=tf.int64)
            ),
            default_value=-1,
        )
        # No match can be longer than the longest vocabulary entry.
        self._max_piece_chars = max(
            len(t[len(SUFFIX):]) if t.startswith(SUFFIX) else len(t) for t in vocabulary
        )

    def tokenize_word_ids(self, words, word_lengths):
        """ids RaggedTensor [num_words, (pieces)]."""
        return self._tokenize(words, word_lengths)[0]

    def tokenize_words(self, words, pre):
        """Returns (ids, begin_char, end_char), each a RaggedTensor [num_words, (pieces)]."""
        word_lengths = pre.word_char_splits[1:] - pre.word_char_splits[:-1]
        return self._tokenize(words, word_lengths)

    def _tokenize(self, words, word_lengths):
        num_words = tf.size(words, out_type=tf.int64)
        candidates = tf.range(1, self._max_piece_chars + 1, dtype=tf.int64)  # [L]
        num_candidates = tf.size(candidates, out_type=tf.int64)

        def step(position, bad, pieces):
            active = tf.reshape(
                tf.where(tf.logical_and(position < word_lengths, tf.logical_not(bad))), [-1]
            )
            start = tf.gather(position, active)  # [A]
            length = tf.gather(word_lengths, active)
            # [A, L] grids: every unfinished word against every candidate length.
            zeros = tf.zeros_like(candidates)[None, :]
            substrings = tf.strings.substr(
                tf.gather(words, active)[:, None] + tf.zeros_like(zeros, tf.string),
                start[:, None] + zeros,
                candidates[None, :] + tf.zeros_like(start)[:, None],
                unit="UTF8_CHAR",
            )
            # Every piece but a word's first carries the "##" continuation mark.
            substrings = tf.where(start[:, None] > 0, SUFFIX + substrings, substrings)
            ids = self._table.lookup(substrings)
            fits = start[:, None] + candidates[None, :] <= length[:, None]
            found = tf.logical_and(ids >= 0, fits)
            matched = tf.reduce_any(found, axis=1)
            # The longest candidate that matched: the last True in the row.
            longest = num_candidates - 1 - tf.argmax(
                tf.cast(tf.reverse(found, axis=[1]), tf.int32), axis=1, output_type=tf.int64
            )
            piece_id = tf.gather(ids, longest, batch_dims=1)
            end = start + longest + 1
            took = tf.reshape(tf.where(matched), [-1])
            new_pieces = tf.stack(
                [tf.gather(active, took), tf.gather(piece_id, took), tf.gather(start, took),
                 tf.gather(end, took)],
                axis=1,
            )
            position = tf.tensor_scatter_nd_update(
                position, tf.gather(active, took)[:, None], tf.gather(end, took)
            )
            failed = tf.gather(active, tf.reshape(tf.where(tf.logical_not(matched)), [-1]))
            bad = tf.tensor_scatter_nd_update(
                bad, failed[:, None], tf.ones_like(failed, dtype=tf.bool)
            )
            return position, bad, tf.concat([pieces, new_pieces], axis=0)

        def unfinished(position, bad, pieces):
            return tf.reduce_any(tf.logical_and(position < word_lengths, tf.logical_not(bad)))

        position, bad, pieces = tf.while_loop(
            unfinished,
            step,
            (tf.zeros([num_words], tf.int64), tf.zeros([num_words], tf.bool),
             tf.zeros([0, 4], tf.int64)),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]),
                              tf.TensorShape([None, 4])),
        )
        # A word with any unmatched rest becomes a single [UNK] spanning the word.
        keep = tf.logical_not(tf.gather(bad, pieces[:, 0]))
        (pieces,) = row_ops.masked([pieces], keep)
        bad_words = tf.reshape(tf.where(bad), [-1])
        unknown = tf.stack(
            [bad_words, tf.fill(tf.shape(bad_words), tf.constant(self._unk_id, tf.int64)),
             tf.zeros_like(bad_words), tf.gather(word_lengths, bad_words)],
            axis=1,
        )
        pieces = tf.concat([pieces, unknown], axis=0)
        # Pieces were produced step by step across words: order them by (word, start).
        stride = tf.reduce_max(tf.concat([word_lengths, [0]], axis=0)) + 1
        order = tf.argsort(pieces[:, 0] * stride + pieces[:, 2], stable=True)
        pieces = tf.gather(pieces, order)

        splits = row_ops.row_splits_of(pieces[:, 0], num_words)  # pieces are in word order

        def ragged(column):
            return tf.RaggedTensor.from_row_splits(pieces[:, column], splits, validate=False)

        return ragged(1), ragged(2), ragged(3)
