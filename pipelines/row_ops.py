"""Row bookkeeping of flat per-character / per-piece arrays, in a handful of graph ops each.

The tokenizer's graph carries flat arrays (code points, words, pieces) with the row each belongs to.
TensorFlow's own helpers for this are written in Python over many small ops:
`RaggedTensor.value_rowids()` of a tensor built from row splits is 72 ops (a `repeat` made of a
`boolean_mask`), `tf.boolean_mask` 27, `RaggedTensor.from_value_rowids` 22. Each op costs time
when a graph is traced (~0.3 ms here), when a `tf.data` pipeline instantiates its map function
(every `predict` over a streamed dataset), and on every call of an exported signature. The
functions below give the same values from sorted row indices with one binary-search kernel
(`UpperBound` / `LowerBound`, in every TensorFlow and TF Serving build) or a `Where` + `GatherV2`.

Example:

>>> import tensorflow as tf
>>> splits = tf.constant([0, 2, 2, 5], tf.int64)   # rows of 2, 0 and 3 values
>>> value_rowids(splits).numpy().tolist()
[0, 0, 2, 2, 2]
>>> row_splits_of(tf.constant([0, 0, 2, 2, 2], tf.int64), nrows=3).numpy().tolist()
[0, 2, 2, 5]
>>> [t.numpy().tolist() for t in masked([tf.constant([5, 6, 7]), tf.constant([0, 1, 2])],
...                                      tf.constant([True, False, True]))]
[[5, 7], [0, 2]]
"""

import tensorflow as tf


def value_rowids(row_splits):
    """The row of each value of a ragged tensor with `row_splits` (as `RaggedTensor.value_rowids()`):
    value `i` is in the row `r` with `row_splits[r] <= i < row_splits[r + 1]`, so its row is the
    number of row ends `row_splits[1:]` that are `<= i` (empty rows included)."""
    row_splits = tf.convert_to_tensor(row_splits)
    positions = tf.range(row_splits[-1], dtype=row_splits.dtype)
    rows = tf.raw_ops.UpperBound(sorted_inputs=tf.expand_dims(row_splits[1:], 0),
                                 values=tf.expand_dims(positions, 0), out_type=row_splits.dtype)
    return tf.reshape(rows, [-1])


def row_splits_of(rowids, nrows):
    """Row splits of values whose rows are `rowids` (sorted ascending, as `from_value_rowids` needs)
    in `nrows` rows: `row_splits[r]` is the number of values in rows before `r`."""
    rowids = tf.convert_to_tensor(rowids)
    boundaries = tf.range(tf.cast(nrows, rowids.dtype) + 1, dtype=rowids.dtype)
    splits = tf.raw_ops.LowerBound(sorted_inputs=tf.expand_dims(rowids, 0),
                                   values=tf.expand_dims(boundaries, 0), out_type=rowids.dtype)
    return tf.reshape(splits, [-1])


def ragged_from_rowids(values, rowids, nrows):
    """`tf.RaggedTensor.from_value_rowids(values, rowids, nrows, validate=False)`, in fewer ops."""
    return tf.RaggedTensor.from_row_splits(values, row_splits_of(rowids, nrows), validate=False)


def masked(tensors, mask):
    """Each of `tensors` (1-D or more, the same length) at the positions where the 1-D bool `mask`
    holds (as `tf.boolean_mask` on axis 0), the positions found once for all of them."""
    kept = tf.reshape(tf.where(mask), [-1])
    return [tf.gather(tensor, kept) for tensor in tensors]
