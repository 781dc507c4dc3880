"""The packing gathers' gradients (bert_keras.layers.token_packing): gathers of the upstream
gradient instead of scatter-adds, the same values as automatic differentiation of `tf.gather`."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.layers import token_packing
from bert_keras.layers.token_packing import TokenPacking, heads_at_positions, pack_tokens, packed_from_heads

PARTS, HEADS, WIDTH = 3, 2, 4


def padding_mask(lengths, seq):
    return tf.constant((np.arange(seq)[None, :] < np.asarray(lengths)[:, None]).astype("int32"))


def plain_gathers(monkeypatch):
    """Automatic differentiation of `tf.gather` (a scatter-add), as before the closed form."""
    def gather(params, indices, readers, padding=None):
        return tf.gather(params if padding is None else tf.pad(params, padding), indices)

    monkeypatch.setattr(token_packing, "gather_rows", gather)


def gradients_of(function, source, upstream):
    with tf.GradientTape() as tape:
        tape.watch(source)
        loss = tf.reduce_sum(function(source) * upstream)
    return tape.gradient(loss, source, unconnected_gradients=tf.UnconnectedGradients.ZERO)


def attention_like(mask):
    """Packed rows -> heads -> a masked function of them -> packed rows: the attention layer's data
    movement, with padded keys masked and padded queries dropped (the contract the gradient uses)."""
    key_mask = tf.cast(mask, tf.float32)[None, :, None, :, None]  # [1, B, 1, S, 1]

    def forward(packed):
        packing = TokenPacking(mask)  # built in the graph that runs it, as the encoder does
        heads = heads_at_positions(packed, packing, PARTS, HEADS)  # [3, B, N, S, D]
        query, key, value = tf.unstack(heads, axis=0)
        # Each query position reads the sum of the real keys' and values' products: padded keys
        # contribute nothing; the padded queries' outputs are dropped by packed_from_heads.
        mixed = query * tf.reduce_sum(key * value * key_mask[0], axis=2, keepdims=True)
        return packed_from_heads(mixed, packing, HEADS)

    return forward


@pytest.mark.parametrize("lengths", [[5, 3, 1], [4, 4, 4], [2, 0, 3], [0, 0, 0]],
                         ids=["ragged", "no padding", "an empty row", "no real token"])
def test_packing_gradients_equal_automatic_differentiation(lengths, monkeypatch):
    mask = padding_mask(lengths, seq=5)
    tokens = int(np.sum(lengths))
    rng = np.random.default_rng(0)
    packed = tf.constant(rng.normal(size=(tokens, PARTS * HEADS * WIDTH)), tf.float32)
    upstream = tf.constant(rng.normal(size=(tokens, HEADS * WIDTH)), tf.float32)
    sequence = tf.constant(rng.normal(size=(3, 5, 6)), tf.float32)
    packed_upstream = tf.constant(rng.normal(size=(tokens, 6)), tf.float32)

    def both():
        heads = gradients_of(attention_like(mask), packed, upstream)
        packing = TokenPacking(mask)
        rows = gradients_of(lambda s: pack_tokens(s, packing.token_indices, packing), sequence, packed_upstream)
        return [tf.convert_to_tensor(heads), tf.convert_to_tensor(rows)]

    ours = both()
    with monkeypatch.context() as patch:
        plain_gathers(patch)
        reference = both()
    for mine, theirs in zip(ours, reference):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-6)


def test_packing_gradients_in_a_traced_step_use_no_scatter_add():
    mask = padding_mask([5, 3, 1], seq=5)
    forward = attention_like(mask)

    @tf.function
    def step(packed):
        with tf.GradientTape() as tape:
            tape.watch(packed)
            loss = tf.reduce_sum(forward(packed))
        return tape.gradient(loss, packed)

    graph = step.get_concrete_function(tf.TensorSpec([None, PARTS * HEADS * WIDTH], tf.float32)).graph
    types = set()
    for function in graph.as_graph_def().library.function:
        types.update(node.op for node in function.node_def)
    types.update(op.type for op in graph.get_operations())
    assert "UnsortedSegmentSum" not in types
    np.testing.assert_allclose(step(tf.ones([9, PARTS * HEADS * WIDTH])).shape, [9, PARTS * HEADS * WIDTH])
