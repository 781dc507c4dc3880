"""`pipelines.row_ops` gives what TensorFlow's own ragged helpers give, in fewer ops."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines import row_ops

# rows of 0..4 values, empty rows (leading, trailing, all) and no rows at all included
row_lengths = st.lists(st.integers(0, 4), min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(row_lengths)
def test_value_rowids_and_row_splits_equal_tensorflows(lengths):
    ragged = tf.RaggedTensor.from_row_lengths(tf.range(sum(lengths), dtype=tf.int64),
                                              tf.constant(lengths, tf.int64))
    rowids = row_ops.value_rowids(ragged.row_splits)
    assert rowids.dtype == tf.int64
    np.testing.assert_array_equal(rowids.numpy(), ragged.value_rowids().numpy())
    splits = row_ops.row_splits_of(ragged.value_rowids(), len(lengths))
    np.testing.assert_array_equal(splits.numpy(), ragged.row_splits.numpy())
    rebuilt = row_ops.ragged_from_rowids(ragged.flat_values, ragged.value_rowids(), tf.constant(len(lengths), tf.int64))
    assert rebuilt.to_list() == ragged.to_list()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=0, max_size=20))
def test_masked_equals_boolean_mask_for_every_tensor(mask):
    mask = tf.constant(mask, tf.bool, shape=[len(mask)])
    values = tf.range(tf.size(mask), dtype=tf.int32)
    pairs = tf.reshape(tf.range(2 * tf.size(mask)), [-1, 2])
    for got, tensor in zip(row_ops.masked([values, pairs], mask), [values, pairs]):
        np.testing.assert_array_equal(got.numpy(), tf.boolean_mask(tensor, mask).numpy())


def test_the_graph_ops_are_few_and_in_every_serving_build():
    """The point of the module: a handful of ops where TensorFlow's helpers add dozens."""
    from serving.op_sets import load_op_set

    def op_types(build):
        graph = tf.Graph()
        with graph.as_default():
            splits = tf.compat.v1.placeholder(tf.int64, [None])
            before = len(graph.get_operations())
            build(splits)
            return [op.type for op in graph.get_operations()[before:]]

    ours = op_types(row_ops.value_rowids)
    theirs = op_types(lambda splits: tf.RaggedTensor.from_row_splits(splits[1:], splits, validate=False)
                      .value_rowids())
    assert len(ours) <= 20 < 60 <= len(theirs)
    assert len(op_types(lambda s: row_ops.masked([s], s > 0))) < len(op_types(lambda s: tf.boolean_mask(s, s > 0))) / 3
    for release in ("2.20", "2.21"):
        assert set(ours) <= load_op_set(release).core
