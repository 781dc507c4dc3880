"""Skipping padded tokens: the one place that decides when the encoder does it, and does it.

Every BERT layer but the two attention matmuls works on each token alone (dense layers, GELU,
LayerNorm, dropout, residuals), so the padding of a batch can cost nothing: pack the `[B, S, H]`
batch into its `[T, H]` real tokens once after the embeddings, run every transformer block on
the packed rows (`bert_keras.layers.token_packing`; attention scatters its query/key/value back
to the padded grid for the score matmuls), and unpack once at the end. Outputs at real tokens
and `pooled_output` are the full computation's (the same layers, only the data layout
differs); `sequence_output` and `hidden_states` are 0 at padded positions. A batch that is 25%
padding does ~25% less work, in training and in inference.

`BertEncoder` stays the plain functional model of google-research `modeling.py` / HF
`modeling_bert.py`; its `call` asks `runs_on_real_tokens` and, on yes, hands the batch to
`forward`. Nothing else in the project packs the encoder's tokens or decides whether to.

The decision (`runs_on_real_tokens`), in order:

1. Static shapes needed (`needs_static_shapes`: inside an XLA-compiled function, or under a
   `TPUStrategy`): never; the number of real tokens is only known at run time.
2. `padding="compute"` (full computation) or `"skip"` (this path), when a caller says so.
3. Training: the encoder's `skip_padding` switch, which `EncoderHead.use_skip_padding` (and so
   `compile_for_finetuning` and the task API) turns on wherever the train step is not XLA.
4. Inference: the encoder's `inference_skip_padding` (default True).

Example:

>>> import numpy as np
>>> from bert_keras.config import BertConfig
>>> from bert_keras.encoder import BertEncoder
>>> encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100))
>>> ids = np.array([[2, 7, 9, 3, 0, 0]], "int32")
>>> x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
>>> runs_on_real_tokens(encoder, training=False)           # inference: skipped by default
True
>>> skipped = encoder(x)["sequence_output"]
>>> full = encoder(x, padding="compute")["sequence_output"]
>>> bool(np.allclose(skipped[0, :4], full[0, :4], atol=1e-5)), float(np.abs(skipped[0, 4:]).max())
(True, 0.0)
"""

import tensorflow as tf

from bert_keras.layers.token_packing import TokenPacking, pack_tokens, unpack_tokens

try:  # Whether a graph is being compiled by XLA (jit_compile=True, TPUs): no public API says.
    from tensorflow.python.framework import ops as _tf_ops
    from tensorflow.python.ops import control_flow_util as _control_flow_util
except ImportError:  # pragma: no cover - a TensorFlow without these internals
    _control_flow_util = None

PADDING_MODES = ("auto", "compute", "skip")
_INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


def needs_static_shapes():
    """True inside a graph XLA compiles (`jit_compile=True`, TPU) or under a TPU strategy."""
    if isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy):
        return True
    if tf.executing_eagerly() or _control_flow_util is None:
        return False
    return bool(_control_flow_util.GraphOrParentsInXlaContext(_tf_ops.get_default_graph()))


def train_step_needs_static_shapes(model):
    """True when `model`'s compiled train step is XLA (`jit_compile`, as Keras resolved it in
    `compile`) or runs under a `TPUStrategy`: then training cannot skip padding."""
    return bool(getattr(model, "jit_compile", False)) or isinstance(
        model.distribute_strategy, tf.distribute.TPUStrategy)


def runs_on_real_tokens(encoder, training=None, padding="auto"):
    """Whether a call of `encoder` now runs its per-token layers on the real tokens only.

    Args:
        encoder: a `BertEncoder`.
        training: the call's `training` flag.
        padding: `"auto"` (the encoder's switches decide), `"compute"` or `"skip"`.
    """
    if padding not in PADDING_MODES:
        raise ValueError(f"padding must be one of {PADDING_MODES}, got {padding!r}")
    if padding == "compute" or needs_static_shapes():
        return False
    if padding == "skip":
        return True
    return bool(encoder.skip_padding if training else encoder.inference_skip_padding)


def forward(encoder, inputs, training=None):
    """The encoder's outputs, per-token layers on the real tokens only.

    An eager inference call runs a cached `tf.function` instead (`_eager_inference`): one
    trace for int32 `[None, None]` inputs, no retracing per batch shape.
    """
    if tf.executing_eagerly() and not training:
        return _eager_inference(encoder, inputs)
    return _forward_on_real_tokens(encoder, inputs, training)


def output_at_positions(encoder, inputs, positions, training=None):
    """`BertEncoder.output_at_positions` on real tokens: the last layer at `positions` `[B, Q]`.

    All blocks but the last run on the packed `[T, H]` rows; the last computes its output at
    the Q positions only (a padded position gets zeros, as `unpack_tokens` puts there).
    """
    padding_mask = inputs["padding_mask"]
    packing = TokenPacking(padding_mask)  # one for every block of the pass
    x = pack_tokens(encoder.embeddings(inputs["token_ids"], inputs["segment_ids"], training=training),
                    packing.token_indices, packing)
    for block in encoder.transformer_layers[:-1]:
        x = block(x, padding_mask, training=training, token_indices=packing)
    output = encoder.transformer_layers[-1](x, padding_mask, training=training, token_indices=packing,
                                            query_positions=positions)
    return tf.cast(output, "float32")


def pooled_and_token_mean(encoder, inputs, layer):
    """Inference on real tokens: `(pooled_output [B, H], mean [B, H])`, `mean` the float32 mean of
    each row's real tokens after `layer` blocks, read on the way (one pass, the classifier's
    `window_aggregation="evidence"`; `bert_keras.models.window_relevance`)."""
    inputs = {name: tf.cast(inputs[name], tf.int32) for name in _INPUT_NAMES}
    outputs = _forward_on_real_tokens(encoder, inputs, False, token_mean_after=layer)
    return outputs["pooled_output"], outputs["token_mean"]


def _forward_on_real_tokens(encoder, inputs, training, token_mean_after=None):
    """The forward pass on the packed `[T, H]` residual stream (see the module docstring).

    `pooled_output` comes from a second run of the last block with [CLS] as its only query
    (`_cls_output`), so a graph that reads only `pooled_output` (a classifier, multiple choice)
    never runs the full last block: TensorFlow prunes what no output needs. With
    `token_mean_after=k`, `token_mean` is each row's mean real-token vector after block k.
    """
    padding_mask = inputs["padding_mask"]
    packing = TokenPacking(padding_mask)  # one for every block of the pass
    batch, seq, token_indices = packing.batch, packing.seq, packing.token_indices
    x = pack_tokens(encoder.embeddings(inputs["token_ids"], inputs["segment_ids"], training=training),
                    token_indices, packing)
    hidden_states = [x]
    attention_probs = []
    for block in encoder.transformer_layers:
        if encoder.output_attentions:
            x, probs = block(x, padding_mask, training=training, token_indices=packing,
                             return_attention_probs=True)
            attention_probs.append(probs)
        else:
            x = block(x, padding_mask, training=training, token_indices=packing)
        hidden_states.append(x)
    sequence_output = unpack_tokens(x, token_indices, batch, seq)
    cls_output = _cls_output(encoder, hidden_states, packing, training)
    outputs = {"sequence_output": sequence_output, "pooled_output": encoder.pooler(cls_output)}
    if token_mean_after is not None:
        rows = token_indices[:, 0] // tf.cast(seq, tf.int64)
        outputs["token_mean"] = tf.math.unsorted_segment_mean(
            tf.cast(hidden_states[token_mean_after], tf.float32), rows, tf.cast(batch, tf.int64))
    if encoder.output_hidden_states:
        outputs["hidden_states"] = [unpack_tokens(h, token_indices, batch, seq)
                                    for h in hidden_states[:-1]] + [sequence_output]
    if encoder.output_attentions:
        outputs["attention_probs"] = attention_probs
    return outputs


def _cls_output(encoder, hidden_states, packing, training):
    """The last layer's `[B, H]` output at [CLS] (position 0), 0 where that is padding.

    The last block runs again with [CLS] as its only query (`query_positions`), on B rows
    instead of T; every token is still a key and value, so the result is exact. In training
    its dropout draws other masks than the full block's: the pooled path and the token path
    are then two dropout samples of the same layer, each the full computation's in
    distribution.
    """
    padding_mask, batch = packing.padding_mask, packing.batch
    if not encoder.transformer_layers:
        return unpack_tokens(hidden_states[-1], packing.token_indices, batch, packing.seq)[:, 0]
    at_cls = tf.zeros([batch, 1], tf.int32)
    output = encoder.transformer_layers[-1](hidden_states[-2], padding_mask, training=training,
                                            token_indices=packing, query_positions=at_cls)[:, 0]
    return tf.where(padding_mask[:, :1] != 0, output, tf.zeros_like(output))


def _eager_inference(encoder, inputs):
    """An eager inference call, run by the cached graph that fits the batch.

    Batches with padding run the real-token graph, batches without the plain (or, with the
    encoder's `full_batch_jit_compile`, XLA) graph. Each is traced once for int32
    `[None, None]` inputs.
    """
    inputs = {name: tf.cast(inputs[name], tf.int32) for name in _INPUT_NAMES}
    if bool(tf.reduce_all(inputs["padding_mask"] != 0)):
        key = ("compute", encoder.full_batch_jit_compile)
    else:
        key = ("skip", False)
    cache = encoder._function_cache.eager
    if key not in cache:
        padding, jit_compile = key
        signature = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _INPUT_NAMES}
        cache[key] = tf.function(lambda x: encoder(x, training=False, padding=padding),
                                 input_signature=[signature], jit_compile=jit_compile)
    return cache[key](inputs)
