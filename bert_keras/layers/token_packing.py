"""Packing a padded `[B, S, H]` batch into its `[T, H]` real tokens, and back.

Every BERT layer except the two attention matmuls works on each token alone
(dense layers, GELU, LayerNorm, dropout, residuals). Run them on the `T` real
tokens only and the padding costs nothing: a batch that is 25% padding does
~25% less dense-layer work, forward and backward. The attention layer scatters
its query/key/value back to the padded grid for the score matmuls (see
`BertSelfAttention(token_indices=...)`), so results on real tokens are the
same as with padding: `heads_at_positions` gathers the packed query/key/value
rows straight into the `[parts, B, N, S, D]` layout of the score matmuls (one
gather instead of a scatter and a transpose), and `packed_from_heads` gathers
the `[B, N, S, D]` context back into `[T, H]` rows (instead of a transpose and
a gather). `rows_at_positions` reads packed rows back at given sequence
positions (the residual of a block that computes a few query positions only).

Their gradients are gathers too. Automatic differentiation of a gather is a
scatter-add (`UnsortedSegmentSum`: the table zero-filled, then one add per
index). Here every packed row is read by exactly one slot that matters (its
own position); the other slots that read it (padded positions, which hold
some real token's values) get exactly zero gradient (masked keys, discarded
queries). So the gradient of each packing gather is a gather of the upstream
gradient at the slots that matter (`gather_rows`): the same values, without
the scatter. (One case differs: a row with no real token at all, whose keys
are all masked. Its outputs are meaningless either way; a scatter-add would
pass their gradient to another row's tokens, the gather drops it.)

`token_indices` are flat positions `[T, 1]` (int64) into `B * S`, the layout
`tf.scatter_nd` and `tf.gather` take. The number of real tokens is only known
at run time, so packed shapes are dynamic: fine for graph execution on CPU and
GPU, not for XLA (`jit_compile=True`) or TPUs.
"""

import tensorflow as tf
from keras import ops

from bert_keras.layers.closed_form_gradient import closed_form_gradient


def _size(tensor, axis):
    """A dimension's static size, else its size at run time."""
    size = tensor.shape[axis]
    return size if size is not None else tf.shape(tensor)[axis]


def real_token_indices(padding_mask):
    """Flat positions `[T, 1]` int64 of the 1s in a `[B, S]` padding mask."""
    return tf.where(tf.reshape(padding_mask, [-1]) != 0)


def pack_tokens(sequence, token_indices, packing=None):
    """`[B, S, H]` -> `[T, H]`: the rows at `token_indices` (with `packing`, the batch's
    `TokenPacking`, its gradient is a gather, not a scatter-add)."""
    hidden = tf.shape(sequence)[-1]
    flat = tf.reshape(sequence, [-1, hidden])
    if packing is None:
        return tf.gather(flat, token_indices[:, 0])
    return gather_rows(flat, tf.cast(token_indices[:, 0], tf.int32), packing.position_readers)


def gather_rows(params, indices, readers, padding=None):
    """`tf.gather(params, indices)` (rows of a 2-D `params`) whose gradient is a gather.

    `padding`: the batch's `TokenPacking.empty_table_padding(...)`, for a `params` that has no
    rows in a batch without real tokens (where `tf.gather` would fail on the CPU): such a
    table gets zero rows, which its indices then read.

    `readers()` (called only when a gradient is taken, so inference graphs do not
    build it) gives `[rows of params]` int32: for each row of `params`, the one slot
    of the flattened `indices` whose gradient reaches it; `size(indices)` for a row
    no slot reads (its gradient is zero). Every other slot's gradient must be zero
    (the caller's contract): it is dropped, where a scatter-add would add it.
    """
    @closed_form_gradient
    def gather(params):
        def gradient(upstream):
            width = tf.shape(upstream)[-1]
            flat = tf.reshape(upstream, [-1, width])
            with_zero_row = tf.concat([flat, tf.zeros([1, width], flat.dtype)], axis=0)
            return tf.gather(with_zero_row, readers())

        if padding is not None:
            padded = tf.pad(params, padding)
            padded.set_shape(tf.TensorShape([None]).concatenate(params.shape[1:]))  # keeps the width static
            params = padded
        return tf.gather(params, indices), gradient

    return gather(params)


def unpack_tokens(packed, token_indices, batch, seq):
    """`[T, H]` -> `[batch, seq, H]`, with zeros at the padded positions."""
    hidden = tf.shape(packed)[-1]
    rows = tf.cast(batch, tf.int64) * tf.cast(seq, tf.int64)
    flat = tf.scatter_nd(token_indices, packed, tf.stack([rows, tf.cast(hidden, tf.int64)]))
    return tf.reshape(flat, [batch, seq, hidden])


class TokenPacking:
    """Where a batch's real tokens are, for every block of one forward pass.

    All blocks of a pass pack the same batch the same way, so the index
    arithmetic (the real tokens' positions, a running count of them, each
    head's gather indices) is built once here and shared, instead of once per
    block: about a third fewer ops in a traced encoder graph, traced and
    optimised faster. Create one per forward pass (inside the graph that runs
    it); `BertSelfAttention` and `BertTransformerBlock` take it as
    `token_indices`.

    Args:
        padding_mask: `[B, S]`, nonzero at real tokens.
        token_indices: `[T, 1]` int64, `real_token_indices(padding_mask)` if
            already computed.

    Attributes:
        padding_mask, token_indices: as given (`token_indices` computed when
            not given).
        batch, seq: scalar int32 tensors, `B` and `S`.
    """

    def __init__(self, padding_mask, token_indices=None):
        self.padding_mask = padding_mask
        self.token_indices = real_token_indices(padding_mask) if token_indices is None else token_indices
        shape = tf.shape(padding_mask)
        self.batch, self.seq = shape[0], shape[1]
        self._built = {}  # (what, graph, *sizes) -> tensor: each index built once per graph

    def _once(self, key, build):
        key = (key, tf.compat.v1.get_default_graph())
        if key not in self._built:
            self._built[key] = build()
        return self._built[key]

    def projected_heads(self, layer, inputs, project):
        """`project()` (a layer's `[parts, B, N, S, D]` projection of `inputs`), built once per pass.

        The pooled output runs the last block a second time with [CLS] as its only query, on
        the same inputs: its keys and values are the full block's. Where both outputs are read
        (`predict` of the encoder, features, export signatures), that second projection was a
        second `[T, H] x [H, 3H]` matmul and gather; now both calls read one tensor (the same
        values: the projection has no dropout). A graph reading only `pooled_output` still
        prunes the rest of the full block. Without a recognisable input tensor, `project()`.
        """
        source = _tensor_source(inputs)
        if source is None:
            return project()
        return self._once(("projected_heads", id(layer), source), project)

    def empty_table_padding(self, rows_per_token):
        """`tf.pad` paddings `[2, 2]` int32 for a 2-D table of `rows_per_token` vectors per packed
        token: in a batch without real tokens (an empty table, which a gather would fail on), one
        token's rows of zeros after it, which all its indices read (`row_of_position` is 0
        everywhere); none otherwise.

        `tf.pad` with zero paddings hands its input on without a copy, so batches that have tokens
        pay nothing; a `tf.cond` per block did the same with two branch functions each, traced and
        optimised in every first call.
        """
        def build():
            missing = 1 - tf.minimum(tf.shape(self.token_indices, out_type=tf.int32)[0], 1)
            return tf.reshape(tf.stack([0, missing * rows_per_token, 0, 0]), [2, 2])
        return self._once(("empty_table_padding", rows_per_token), build)

    def row_of_position(self):
        """`[B * S]` int32: the packed row of each position (a padded one: the last real token's
        before it, or 0)."""
        def build():
            real = tf.reshape(tf.cast(self.padding_mask != 0, tf.int32), [-1])
            return tf.maximum(tf.cumsum(real) - 1, 0)
        return self._once(("row_of_position",), build)

    def position_readers(self):
        """`[B * S]` int32: for `pack_tokens`' gradient, the packed row of each real position,
        `T` for a padded one."""
        def build():
            real = tf.reshape(self.padding_mask != 0, [-1])
            return tf.where(real, self.row_of_position(), tf.shape(self.token_indices)[0])
        return self._once(("position_readers",), build)

    def head_readers(self, parts, num_heads):
        """`[T * parts * N]` int32: for `heads_at_positions`' gradient, the slot of
        `head_slices` at each packed vector's own position."""
        def build():
            flat = tf.cast(self.token_indices[:, 0], tf.int32)
            example, position = flat // self.seq, flat % self.seq
            part = tf.reshape(tf.range(parts), [1, parts, 1])
            head = tf.reshape(tf.range(num_heads), [1, 1, num_heads])
            slot = ((part * self.batch + example[:, None, None]) * num_heads + head) * self.seq \
                + position[:, None, None]
            return tf.reshape(slot, [-1])
        return self._once(("head_readers", parts, num_heads), build)

    def token_readers(self, num_heads):
        """`[B * N * S]` int32: for `packed_from_heads`' gradient, the `[T, N]` slot of
        `token_slices` that reads each head vector, `T * N` for a padded position."""
        def build():
            real = tf.reshape(self.padding_mask != 0, [self.batch, 1, self.seq])
            row = tf.reshape(self.row_of_position(), [self.batch, 1, self.seq])
            head = tf.reshape(tf.range(num_heads), [1, num_heads, 1])
            total = tf.shape(self.token_indices)[0] * num_heads
            return tf.reshape(tf.where(real, row * num_heads + head, total), [-1])
        return self._once(("token_readers", num_heads), build)

    def head_slices(self, parts, num_heads):
        """`[parts, B, N, S]` int32: rows of `[T * parts * N, D]` vectors for `heads_at_positions`."""
        def build():
            row = tf.reshape(self.row_of_position(), [1, self.batch, 1, self.seq])
            part = tf.reshape(tf.range(parts), [parts, 1, 1, 1])
            head = tf.reshape(tf.range(num_heads), [1, 1, num_heads, 1])
            return (row * parts + part) * num_heads + head
        return self._once(("head_slices", parts, num_heads), build)

    def token_slices(self, num_heads):
        """`[T, N]` int32: rows of `[B * N * S, D]` vectors for `packed_from_heads`."""
        def build():
            flat = tf.cast(self.token_indices[:, 0], tf.int32)
            example, position = flat // self.seq, flat % self.seq
            return (example[:, None] * num_heads + tf.range(num_heads)[None, :]) * self.seq + position[:, None]
        return self._once(("token_slices", num_heads), build)


def _tensor_source(tensor):
    """A hashable key for "these values": the tensor itself, or for a traced `Cast` (Keras'
    autocast of a layer's inputs under mixed precision) its input and dtype. None for a
    non-tensor."""
    if not isinstance(tensor, tf.Tensor):
        return None
    op = None if tf.executing_eagerly() or not hasattr(tensor, "op") else tensor.op
    if op is not None and op.type == "Cast":
        return op.inputs[0].ref(), tensor.dtype
    return tensor.ref()


def as_token_packing(token_indices, padding_mask):
    """`token_indices` as a `TokenPacking` (a `[T, 1]` tensor gets one of its own)."""
    if isinstance(token_indices, TokenPacking):
        return token_indices
    return TokenPacking(padding_mask, token_indices)


def heads_at_positions(packed, packing, parts, num_heads):
    """`[T, parts * N * D]` packed rows -> `[parts, B, N, S, D]` on the padded grid.

    The rows of each part (query, key, value) are split into `num_heads`
    heads and laid out for batched per-head matmuls, in one gather (pure data
    movement: exact). A padded position holds the values of some real token
    of the batch (or zeros when the batch has none), not zeros: only for
    consumers that ignore padded positions (masked keys, discarded queries).

    Args:
        packed: `[T, parts * num_heads * D]`, the real tokens in the row-major
            order of `padding_mask`'s nonzeros (`real_token_indices`).
        packing: the batch's `TokenPacking`.
        parts: int. How many `[N * D]` blocks a row holds (3 for QKV).
        num_heads: int. N.
    """
    width = _size(packed, -1) // (parts * num_heads)
    slices = packing.head_slices(parts, num_heads)
    vectors = tf.reshape(packed, [-1, width])
    return gather_rows(vectors, slices, lambda: packing.head_readers(parts, num_heads),
                       padding=packing.empty_table_padding(parts * num_heads))


def packed_from_heads(heads, packing, num_heads):
    """`[B, N, S, D]` per-head vectors -> `[T, N * D]` rows at the packing's real tokens (exact)."""
    width = _size(heads, 3)
    rows = gather_rows(tf.reshape(heads, [-1, width]), packing.token_slices(num_heads),
                       lambda: packing.token_readers(num_heads))  # [T, N, D]
    return tf.reshape(rows, [-1, num_heads * width])


def per_token(function, x):
    """`function(x)` for per-token work (dense layers and what follows them), a `[B, S, H]` `x` run
    as `[B * S, H]` rows and the result shaped back; another rank as it is.

    Keras' `Dense` runs a rank-3 input as a tensordot (a matmul between two reshapes), and the
    reshape after the matmul keeps TensorFlow's graph optimizer from fusing the matmul with its
    bias and the GELU after it (packed `[T, H]` rows fuse). On a 6x384 full 32 x 128 batch
    through the unpacked graph that was ~60 of ~360 ms. The products are the same.
    """
    if len(x.shape) != 3:
        return function(x)
    shape = ops.shape(x)
    width = x.shape[-1] if x.shape[-1] is not None else shape[-1]
    rows = function(ops.reshape(x, (-1, width)))
    return ops.reshape(rows, (shape[0], shape[1], rows.shape[-1] if rows.shape[-1] is not None else -1))


def rows_at_positions(packed, packing, positions):
    """`[T, H]` packed rows -> `[B, Q, H]`: the rows at sequence `positions` `[B, Q]`.

    A position that is padding gets a row of zeros (what `unpack_tokens`
    puts there). Exact: pure data movement.

    Args:
        packed: `[T, H]`, the real tokens in the row-major order of
            `padding_mask`'s nonzeros (`real_token_indices`).
        packing: the batch's `TokenPacking`.
        positions: int `[B, Q]`, positions in `[0, S)`.
    """
    real = tf.reshape(packing.padding_mask != 0, [-1])
    # A real position's row; padding: the zero row appended below.
    row = tf.where(real, packing.row_of_position(), tf.shape(packed)[0])
    row = tf.reshape(row, [packing.batch, packing.seq])
    picked = tf.gather(row, tf.cast(positions, tf.int32), batch_dims=1)
    with_zero_row = tf.concat([packed, tf.zeros([1, tf.shape(packed)[-1]], packed.dtype)], axis=0)
    return tf.gather(with_zero_row, picked)
