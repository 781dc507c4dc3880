"""Combining marks after a word belong to it, though an accent-stripping tokenizer drops them.

BERT's uncased normalization (NFD, then strip marks) removes combining marks (Unicode
categories Mn, Mc, Me) from the pieces, so the pieces' character offsets end before a
word's trailing marks: NFD "José" would end at "Jose", Hindi "में" at "म". A word's end
moves over the marks that follow it directly; a mark is never the start of a word, so the
next word's offsets never change. `extend_over_marks` does it in Python (`predict`),
`extend_over_marks_in_graph` in a serving signature: the same table, so both agree.

>>> import unicodedata
>>> text = unicodedata.normalize("NFD", "José ok")
>>> extend_over_marks(text, [4, 7])  # "Jose" ends at 4; the accent follows it
[5, 7]
"""

import functools
import re
import sys
import unicodedata

import numpy as np


@functools.lru_cache(maxsize=None)
def mark_ranges():
    """`(first, last)` int32 arrays: the inclusive code point ranges of categories Mn, Mc, Me."""
    first, last = [], []
    previous = -2
    for code_point in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code_point))[0] == "M":
            if code_point == previous + 1:
                last[-1] = code_point
            else:
                first.append(code_point)
                last.append(code_point)
            previous = code_point
    return np.array(first, np.int32), np.array(last, np.int32)


@functools.lru_cache(maxsize=None)
def _mark_runs():
    first, last = mark_ranges()
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in zip(first, last)) + "]+")


def extend_over_marks(text, ends):
    """Code point `ends` of words in `text`, each moved past the combining marks that follow it
    (one regex pass over `text`: nothing to do, and nearly no cost, where it has no marks)."""
    run_end = {position: match.end() for match in _mark_runs().finditer(text)
               for position in range(match.start(), match.end())}
    return [run_end.get(end, end) for end in ends]


def extend_over_marks_in_graph(strings, rows, byte_ends):
    """`extend_over_marks` on UTF-8 BYTE offsets in a TensorFlow graph.

    Args:
        strings: string `[batch]`.
        rows: int64 `[n]`: the string of each offset.
        byte_ends: int64 `[n]`: byte offsets (on character boundaries) into their strings.

    Returns:
        int64 `[n]`: each offset moved past the marks that follow it.
    """
    import tensorflow as tf

    from pipelines import row_ops

    first, last = (tf.constant(values) for values in mark_ranges())
    chars, starts = tf.strings.unicode_decode_with_offsets(strings, "UTF-8")
    rows, byte_ends = tf.cast(rows, tf.int64), tf.cast(byte_ends, tf.int64)
    code_points = chars.flat_values
    index = tf.searchsorted(first, code_points, side="right") - 1  # int32, as the table
    marks = (index >= 0) & (code_points <= tf.gather(last, tf.maximum(index, 0)))
    # Flat over the batch: each string's characters at global positions, each byte offset shifted
    # by the bytes of the strings before it.
    byte_lengths = tf.cast(tf.strings.length(strings), tf.int64)
    byte_base = tf.cumsum(byte_lengths, exclusive=True)
    char_starts = chars.row_starts()
    char_ends = char_starts + chars.row_lengths()
    global_starts = starts.flat_values + tf.gather(byte_base, row_ops.value_rowids(chars.row_splits))
    end_char = tf.searchsorted(global_starts, byte_ends + tf.gather(byte_base, rows), side="left",
                               out_type=tf.int64)
    end_char = tf.minimum(end_char, tf.gather(char_ends, rows))  # a string's end stays in its row
    # Where each end stops: the next character that is not a mark, or its string's end.
    total = tf.size(code_points, out_type=tf.int64)
    stops = tf.concat([tf.reshape(tf.where(~marks), [-1]), tf.reshape(total, [1])], axis=0)
    stop = tf.gather(stops, tf.searchsorted(stops, end_char, side="left", out_type=tf.int64))
    stop = tf.minimum(stop, tf.gather(char_ends, rows))
    at_end = stop >= tf.gather(char_ends, rows)
    padded_starts = tf.concat([global_starts, tf.zeros([1], tf.int64)], axis=0)  # gatherable when empty
    inner = tf.gather(padded_starts, tf.minimum(stop, tf.size(global_starts, out_type=tf.int64)))
    return tf.where(at_end, tf.gather(byte_lengths, rows), inner - tf.gather(byte_base, rows))
