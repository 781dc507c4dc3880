"""Packing a padded `[B, S, H]` batch into its `[T, H]` real tokens, and back.

Every BERT layer except the two attention matmuls works on each token alone
(dense layers, GELU, LayerNorm, dropout, residuals). Run them on the `T` real
tokens only and the padding costs nothing: a batch that is 25% padding does
~25% less dense-layer work, forward and backward. The attention layer scatters
its query/key/value back to the padded grid for the score matmuls (see
`BertSelfAttention(token_indices=...)`), so results on real tokens are the
same as with padding.

`token_indices` are flat positions `[T, 1]` (int64) into `B * S`, the layout
`tf.scatter_nd` and `tf.gather` take. The number of real tokens is only known
at run time, so packed shapes are dynamic: fine for graph execution on CPU and
GPU, not for XLA (`jit_compile=True`) or TPUs.
"""

import tensorflow as tf


def real_token_indices(padding_mask):
    """Flat positions `[T, 1]` int64 of the 1s in a `[B, S]` padding mask."""
    return tf.where(tf.reshape(padding_mask, [-1]) != 0)


def pack_tokens(sequence, token_indices):
    """`[B, S, H]` -> `[T, H]`: the rows at `token_indices`."""
    hidden = tf.shape(sequence)[-1]
    return tf.gather(tf.reshape(sequence, [-1, hidden]), token_indices[:, 0])


def unpack_tokens(packed, token_indices, batch, seq):
    """`[T, H]` -> `[batch, seq, H]`, with zeros at the padded positions."""
    hidden = tf.shape(packed)[-1]
    rows = tf.cast(batch, tf.int64) * tf.cast(seq, tf.int64)
    flat = tf.scatter_nd(token_indices, packed, tf.stack([rows, tf.cast(hidden, tf.int64)]))
    return tf.reshape(flat, [batch, seq, hidden])
