"""BERT multi-head self-attention with one fused QKV projection.

Written here rather than using `keras.layers.MultiHeadAttention` because it
must (a) return the attention probabilities, (b) be fast on CPU: one
`[H, 3H]` matmul instead of three `[H, H]` ones, and no mask broadcasting
through Keras' generic masking machinery.
"""

import math

import keras
import tensorflow as tf
from keras import ops

from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initialization import truncated_normal
from bert_keras.layers.token_packing import as_token_packing, heads_at_positions, packed_from_heads, per_token

# Added to the scores of padded keys. Large enough that exp() underflows to
# exactly 0 in float32, small enough that it never overflows to -inf (a row of
# only padding then gets a uniform distribution, not NaN).
MASK_VALUE = -1e9


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention with a padding mask.

    The QKV kernel is one `[H, 3H]` matrix whose column blocks are query,
    key and value (each `[H, H]`, heads contiguous within a block), i.e. the
    google-research `query/kernel`, `key/kernel`, `value/kernel` concatenated
    on the output axis. Scores, mask and softmax are computed in float32
    whatever the compute dtype.

    Example:

    >>> import numpy as np
    >>> attn = BertSelfAttention(hidden_size=16, num_heads=2)
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> out, probs = attn(x, np.ones((2, 5), "int32"), return_attention_probs=True)
    >>> tuple(out.shape), tuple(probs.shape)
    ((2, 5, 16), (2, 2, 5, 5))

    Args:
        hidden_size: int. Model width H; divisible by `num_heads`.
        num_heads: int. Number of heads.
        dropout: float. Dropout on the attention probabilities.
        initializer_range: float. Stddev of the truncated-normal initializer.
    """

    def __init__(self, hidden_size, num_heads, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} not divisible by num_heads {num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        init = truncated_normal(initializer_range)
        self.qkv = keras.layers.Dense(
            3 * hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="qkv"
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="output"
        )
        self.probs_dropout = Dropout(dropout, dtype="float32", name="probs_dropout")

    def build(self, inputs_shape, padding_mask_shape=None):
        self.qkv.build(inputs_shape)
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(
        self,
        inputs,
        padding_mask,
        training=None,
        return_attention_probs=False,
        token_indices=None,
        query_positions=None,
    ):
        """Attention output `[B, S, H]` (and probs `[B, N, S, S]` on request).

        `token_indices` (flat `[T, 1]` positions of the real tokens, or the
        batch's `token_packing.TokenPacking`, shared by all blocks of a pass):
        `inputs` are packed `[T, H]` and so is the output. `query_positions` (int
        `[B, Q]`): only those positions attend (keys and values are still
        every token), so the output is `[B, Q, H]` and probs `[B, N, Q, S]`,
        with padded or packed inputs alike.
        """
        packing = None if token_indices is None else as_token_packing(token_indices, padding_mask)
        if query_positions is not None and token_indices is None:
            query, key, value = self._project_at_positions(inputs, query_positions)
        else:
            if token_indices is not None:
                # Packed inputs hold only the T real tokens (`token_indices`
                # are their flat positions in [B * S]). One gather lays them
                # out as [3, B, N, S, D] for the score matmuls; padded
                # positions get some real token's values: their keys are
                # masked below, their queries' outputs dropped. Built once
                # per pass for these inputs (the pooled output's second run
                # of the last block reads the full run's).
                qkv = packing.projected_heads(
                    self, inputs, lambda: heads_at_positions(self.qkv(inputs), packing, 3, self.num_heads))
            else:
                qkv = per_token(self.qkv, inputs)  # [B, S, 3H]
                batch, seq = ops.shape(padding_mask)[0], ops.shape(padding_mask)[1]
                qkv = ops.reshape(qkv, (batch, seq, 3, self.num_heads, self.head_size))
                # One transpose to [3, B, N, S, D] instead of one per projection.
                qkv = ops.transpose(qkv, (2, 0, 3, 1, 4))
            # Unstacked, not indexed: the gradient of three `qkv[i]` slices
            # is three zero-filled [3, B, N, S, D] tensors summed (a third of
            # a training step on CPU), that of an unstack one stack.
            query, key, value = ops.unstack(qkv, 3, axis=0)
            if query_positions is not None:
                # Packed inputs: the projection ran on every real token (keys
                # and values need them all); keep the queries at the positions.
                query = tf.gather(query, tf.cast(query_positions, tf.int32), axis=2, batch_dims=1)

        scores = ops.matmul(query, ops.swapaxes(key, -1, -2))  # [B, N, Q, S]
        # padding_mask: 1 = real token, 0 = padding; masks keys only.
        key_mask = ops.cast(padding_mask, "float32")[:, None, None, :]
        # Scaled after the matmul and then masked: on CPU the graph optimizer
        # fuses matmul, scale and mask into one oneDNN kernel.
        scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(self.head_size))
        scores = scores + (1.0 - key_mask) * MASK_VALUE
        probs = ops.softmax(scores, axis=-1)
        dropped = self.probs_dropout(probs, training=training)

        context = ops.matmul(ops.cast(dropped, value.dtype), value)  # [B, N, Q, D]
        if token_indices is not None and query_positions is None:  # back to packed [T, H] rows
            context = packed_from_heads(context, packing, self.num_heads)
        else:
            context = ops.transpose(context, (0, 2, 1, 3))
            context = ops.reshape(context, (ops.shape(context)[0], ops.shape(context)[1], self.hidden_size))
        output = per_token(self.output_dense, context)
        if return_attention_probs:
            return output, probs
        return output

    def _project_at_positions(self, inputs, query_positions):
        """Query `[B, N, Q, D]` at `query_positions`; key and value `[B, N, S, D]` everywhere.

        The fused kernel's query columns are applied to the Q gathered
        vectors only, which saves the query projection of the other tokens.
        """
        hidden = self.hidden_size
        # Split, not sliced (see `call`): cheap gradients.
        query_kernel, key_value_kernel = ops.split(
            ops.cast(self.qkv.kernel, self.compute_dtype), [hidden], axis=1
        )
        query_bias, key_value_bias = ops.split(ops.cast(self.qkv.bias, self.compute_dtype), [hidden])
        batch, seq = ops.shape(inputs)[0], ops.shape(inputs)[1]
        at_positions = ops.take_along_axis(
            inputs, ops.cast(query_positions, "int32")[:, :, None], axis=1
        )
        query = ops.matmul(at_positions, query_kernel) + query_bias
        query = ops.reshape(query, (batch, -1, self.num_heads, self.head_size))
        key_value = ops.matmul(inputs, key_value_kernel) + key_value_bias
        key_value = ops.reshape(key_value, (batch, seq, 2, self.num_heads, self.head_size))
        key, value = ops.unstack(ops.transpose(key_value, (2, 0, 3, 1, 4)), 2, axis=0)
        return ops.transpose(query, (0, 2, 1, 3)), key, value

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            dropout=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
