"""`BertEncoder`: the BERT transformer encoder as a Keras 3 functional model.

Layout follows google-research `modeling.py` / HF `modeling_bert.py`:

    embeddings  = Dropout(LayerNorm(word + position + segment))
    layer_i     = post-LN transformer block, i = 0 .. L-1
    pooled      = tanh(Dense(sequence_output[:, 0]))    # the [CLS] position

Weights map 1:1 to the google-research variable names through
`bert_keras.checkpoints.layout`.
"""

import keras
import tensorflow as tf

try:  # Whether a graph is being compiled by XLA (jit_compile=True, TPUs): no public API says.
    from tensorflow.python.framework import ops as _tf_ops
    from tensorflow.python.ops import control_flow_util as _control_flow_util
except ImportError:  # pragma: no cover - a TensorFlow without these internals
    _control_flow_util = None

from bert_keras.config import BertConfig
from bert_keras.layers.embeddings import BertEmbeddings
from bert_keras.layers.token_packing import pack_tokens, real_token_indices, unpack_tokens
from bert_keras.layers.transformer_block import BertTransformerBlock
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES

_INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


class _FunctionCache:
    """The encoder's cached `tf.function`s, in a plain object Keras and SavedModel do not track."""

    def __init__(self):
        self.inference = {}  # (jit_compile, skip_padding) -> inference_function()
        self.eager = {}  # (padding, jit_compile) -> the graph an eager inference call runs


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEncoder(keras.Model):
    """BERT encoder: token/segment/padding inputs to per-token and pooled outputs.

    Inputs (a dict):
        token_ids: int32 `[batch, seq]` word-piece ids.
        segment_ids: int32 `[batch, seq]` sentence A/B ids.
        padding_mask: int32 `[batch, seq]`, 1 for real tokens, 0 for padding.

    Outputs (a dict):
        sequence_output: float32 `[batch, seq, hidden]`, the last layer.
        pooled_output: `[batch, hidden]`, tanh-Dense of the [CLS] position.
        hidden_states: only with `output_hidden_states`; a list of L + 1
            `[batch, seq, hidden]` tensors, the embeddings output then every
            layer's output (as Hugging Face).
        attention_probs: only with `output_attentions`; a list of L float32
            `[batch, heads, seq, seq]` tensors.

    Example:

    >>> import numpy as np
    >>> encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100))
    >>> inputs = {
    ...     "token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),
    ...     "segment_ids": np.zeros((1, 5), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    ... }
    >>> outputs = encoder(inputs)
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 128), (1, 128))

    Inference skips padding by default: `encoder(inputs)` /
    `encoder(inputs, training=False)`, `predict`, `predict_on_batch`,
    `evaluate`, and every model that wraps the encoder (the task models),
    run the per-token layers on the real tokens only (`skip_padding` below),
    wherever shapes may be dynamic: not inside an XLA-compiled function
    (`jit_compile=True`) or on TPUs, where the full computation runs. Outputs
    at real tokens and `pooled_output` are the full computation's;
    `sequence_output` and `hidden_states` are 0 at padded positions (a
    padded query attends uniformly to the real tokens). An eager call runs
    a cached `tf.function`, traced once: the skip-padding graph when some
    position is padded, the plain graph when none is
    (`full_batch_jit_compile=True` makes that one XLA). Pass
    `padding="compute"` to a call for the full computation, or build with
    `inference_skip_padding=False` for it everywhere;
    `encoder.inference_function()` returns cached functions of each path.

    Args:
        config: `BertConfig` (or its `to_dict()`).
        output_hidden_states: bool. Also return every layer's output.
        output_attentions: bool. Also return every layer's attention probs.
        skip_padding: bool. Run the per-token layers (all dense layers,
            LayerNorms, dropout; nearly all FLOPs) on the real tokens only,
            in training too: a batch that is 25% padding trains ~1.25x
            faster. Outputs at real tokens are unchanged; `sequence_output`
            and `hidden_states` are 0 at padded positions. Needs dynamic
            shapes, so not with XLA (`jit_compile=True`) or on TPUs;
            `compile_for_finetuning` turns it on where it can. Also a
            settable attribute (set it before the model is traced).
        inference_skip_padding: bool. Skip padded tokens in inference (see
            above; default True). Also a settable attribute: set it before
            the first inference call, since Keras traces `predict` once.
        full_batch_jit_compile: bool. Eager inference calls on batches
            without padding run an XLA-compiled function (one compile per
            `[batch, seq]`); default False, the plain graph (oneDNN
            matmuls), which measured as fast on 2 CPU cores. Settable.
        dtype: dtype policy name or `keras.DTypePolicy`, e.g.
            `"mixed_float16"`; defaults to the global policy. LayerNorms and
            softmax always compute in float32.
        name: str. Model name.
    """

    def __init__(
        self,
        config,
        *,
        output_hidden_states=False,
        output_attentions=False,
        skip_padding=False,
        inference_skip_padding=True,
        full_batch_jit_compile=False,
        dtype=None,
        name="bert_encoder",
        **kwargs,
    ):
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        policy = keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()

        # ---- layers --------------------------------------------------------
        embeddings = BertEmbeddings(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            dropout=config.hidden_dropout,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            dtype=policy,
            name="embeddings",
        )
        blocks = [
            BertTransformerBlock(
                hidden_size=config.hidden_size,
                num_heads=config.num_heads,
                intermediate_size=config.intermediate_size,
                hidden_act=config.hidden_act,
                hidden_dropout=config.hidden_dropout,
                attention_dropout=config.attention_dropout,
                layer_norm_eps=config.layer_norm_eps,
                initializer_range=config.initializer_range,
                dtype=policy,
                name=f"transformer_layer_{i}",
            )
            for i in range(config.num_layers)
        ]
        # float32 so both outputs leave the model in float32 under any policy;
        # it is one [H, H] matmul per sequence, negligible.
        pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range),
            dtype="float32",
            name="pooler_dense",
        )

        # ---- functional graph ----------------------------------------------
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in ENCODER_INPUT_NAMES}
        x = embeddings(inputs["token_ids"], inputs["segment_ids"])
        hidden_states = [x]
        attention_probs = []
        for block in blocks:
            if output_attentions:
                x, probs = block(x, inputs["padding_mask"], return_attention_probs=True)
                attention_probs.append(probs)
            else:
                x = block(x, inputs["padding_mask"])
            hidden_states.append(x)
        # [CLS] is position 0: slice it before the Dense, not after.
        pooled = pooler(x[:, 0, :])

        outputs = {"sequence_output": x, "pooled_output": pooled}
        if output_hidden_states:
            outputs["hidden_states"] = hidden_states
        if output_attentions:
            outputs["attention_probs"] = attention_probs
        super().__init__(inputs=inputs, outputs=outputs, dtype=policy, name=name, **kwargs)
        # A functional Model drops the `dtype` it is given; keep it, so that
        # get_config / .keras round trips and compile's loss scaling see it.
        self.dtype_policy = policy

        # ---- public attributes -----------------------------------------------
        self.config = config
        self.output_hidden_states = output_hidden_states
        self.output_attentions = output_attentions
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler
        # Plain dicts inside an untracked holder: a SavedModel of a module that
        # holds this encoder must not save these cached functions (one is XLA).
        self._function_cache = _FunctionCache()
        self.skip_padding = skip_padding
        self.inference_skip_padding = bool(inference_skip_padding)
        self.full_batch_jit_compile = bool(full_batch_jit_compile)

    @property
    def skip_padding(self):
        """Whether the transformer blocks skip padded tokens (see the class docstring)."""
        return self._skip_padding

    @skip_padding.setter
    def skip_padding(self, value):
        self._skip_padding = bool(value)
        for block in self.transformer_layers:
            block.skip_padding = self._skip_padding

    @property
    def token_embedding(self):
        """The word embedding layer; its `.embeddings` is the `[V, H]` matrix to tie an MLM head to."""
        return self.embeddings.token_embedding

    def output_at_positions(self, inputs, positions, training=None):
        """The last layer's output at `positions` only: float32 `[B, Q, H]`.

        All layers but the last run on every token; the last one computes its
        output at the Q positions only (every token is still a key and value),
        so the result equals `self(inputs)["sequence_output"]` gathered at
        `positions`, for about (Q / S) of the last layer's work. Masked-LM
        pretraining reads the last layer at [CLS] and ~15% of the tokens, so
        this skips most of one layer. Static shapes: fine under XLA and TPUs.

        Example:

        >>> import numpy as np
        >>> encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100))
        >>> ids = np.array([[2, 7, 9, 3, 0]], "int32")
        >>> x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
        >>> tuple(encoder.output_at_positions(x, np.array([[0, 2]], "int32")).shape)
        (1, 2, 128)

        Args:
            inputs: the encoder's input dict.
            positions: int `[B, Q]` positions in the sequence.
            training: bool. Dropout on or off.
        """
        padding_mask = inputs["padding_mask"]
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"], training=training)
        for block in self.transformer_layers[:-1]:
            x = block(x, padding_mask, training=training)
        output = self.transformer_layers[-1](
            x, padding_mask, training=training, query_positions=positions
        )
        return tf.cast(output, "float32")

    def call(self, inputs, training=None, mask=None, padding="auto"):
        """The forward pass; in inference it skips padded tokens where it can.

        `padding="auto"` (what Keras passes): in training, or where shapes
        must be static (XLA, TPU), or with `inference_skip_padding=False`,
        the full computation (the functional graph); otherwise the
        skip-padding path, which an eager call runs through a cached
        `tf.function` (see the class docstring). `padding="compute"` forces
        the full computation, `padding="skip"` the skip-padding path.
        """
        if padding not in ("auto", "compute", "skip"):
            raise ValueError(f'padding must be "auto", "compute" or "skip", got {padding!r}')
        if padding == "compute" or not isinstance(inputs, dict) or (padding == "auto" and (
                training or not self.inference_skip_padding or _needs_static_shapes())):
            return super().call(inputs, training=training, mask=mask)
        if padding == "auto" and tf.executing_eagerly():
            return self._eager_inference(inputs)
        return self._forward_without_padding(inputs)

    def _eager_inference(self, inputs):
        """An eager inference call, run by the cached graph that fits the batch.

        Batches with padding run the skip-padding graph, batches without the
        plain (or, with `full_batch_jit_compile`, XLA) graph. Each is traced
        once for int32 `[None, None]` inputs: no retracing per batch shape.
        """
        inputs = {name: tf.cast(inputs[name], tf.int32) for name in _INPUT_NAMES}
        if bool(tf.reduce_all(inputs["padding_mask"] != 0)):
            key = ("compute", self.full_batch_jit_compile)
        else:
            key = ("skip", False)
        if key not in self._function_cache.eager:
            padding, jit_compile = key
            signature = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _INPUT_NAMES}
            self._function_cache.eager[key] = tf.function(
                lambda x: self(x, training=False, padding=padding),
                input_signature=[signature],
                jit_compile=jit_compile,
            )
        return self._function_cache.eager[key](inputs)

    def _forward_without_padding(self, inputs):
        """Inference forward that runs per-token layers on the real tokens only.

        The layers are the model's own; only the data layout differs: the
        residual stream is `[T, H]` (T = real tokens in the batch) between
        `token_indices`-aware blocks. Same results as the full computation on
        real tokens and for `pooled_output`; `sequence_output` and
        `hidden_states` are 0 at padding; a padded query (all zeros) attends
        uniformly to the real keys. `pooled_output` comes from a second run of
        the last block with [CLS] as its only query (`_cls_output`), so a
        graph that reads only `pooled_output` skips the full last layer.
        """
        padding_mask = inputs["padding_mask"]
        batch, seq = tf.shape(padding_mask)[0], tf.shape(padding_mask)[1]
        token_indices = real_token_indices(padding_mask)
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"], training=False)
        x = pack_tokens(x, token_indices)
        hidden_states = [x]
        attention_probs = []
        for block in self.transformer_layers:
            if self.output_attentions:
                x, probs = block(
                    x, padding_mask, training=False, token_indices=token_indices, return_attention_probs=True
                )
                attention_probs.append(probs)
            else:
                x = block(x, padding_mask, training=False, token_indices=token_indices)
            hidden_states.append(x)
        sequence_output = unpack_tokens(x, token_indices, batch, seq)
        outputs = {"sequence_output": sequence_output,
                   "pooled_output": self.pooler(self._cls_output(hidden_states, padding_mask, token_indices))}
        if self.output_hidden_states:
            outputs["hidden_states"] = [
                unpack_tokens(h, token_indices, batch, seq) for h in hidden_states[:-1]
            ] + [sequence_output]
        if self.output_attentions:
            outputs["attention_probs"] = attention_probs
        return outputs

    def _cls_output(self, hidden_states, padding_mask, token_indices):
        """The last layer's `[B, H]` output at [CLS] (position 0), 0 where that is padding.

        Computed apart from `sequence_output`: the last block runs again with
        [CLS] as its only query (`query_positions`), on B rows instead of T.
        A graph that reads only `pooled_output` (a classifier, multiple
        choice) never runs the full last block: TensorFlow prunes what no
        output needs, and the last layer costs ~B/T of its work.
        """
        if not self.transformer_layers:
            return unpack_tokens(hidden_states[-1], token_indices, tf.shape(padding_mask)[0],
                                 tf.shape(padding_mask)[1])[:, 0]
        at_cls = tf.zeros([tf.shape(padding_mask)[0], 1], tf.int32)
        output = self.transformer_layers[-1](
            hidden_states[-2], padding_mask, training=False, token_indices=token_indices,
            query_positions=at_cls,
        )[:, 0]
        return tf.where(padding_mask[:, :1] != 0, output, tf.zeros_like(output))

    def inference_function(self, jit_compile=False, skip_padding=False):
        """Returns a cached `tf.function(inputs_dict) -> outputs_dict` for inference.

        The fastest way to run the encoder: no `predict()` data pipeline, one
        graph per distinct `[batch, seq]` (so pad to a few fixed lengths).
        On a 2-core CPU the plain TensorFlow graph (oneDNN matmuls) measured
        as fast as XLA for a 6-layer/384 encoder and faster for BERT-base
        (`benchmarks/bench_encoder.py`), hence the default; XLA
        (`jit_compile=True`) fuses the element-wise ops and may win elsewhere.

        `skip_padding=True` runs every per-token layer (all dense layers,
        LayerNorms, activations: nearly all FLOPs) on the real tokens only,
        packed as `[T, H]`; only the score/context matmuls see the padded
        `[batch, seq]` grid. Time then scales with the number of real tokens
        instead of `batch * seq` (a batch that is 25% padding runs ~1.3x
        faster). Outputs on real tokens and `pooled_output` are the same;
        `sequence_output` (and `hidden_states`) are 0 at padded positions.
        `skip_padding=False` is the full computation. Eager and default
        calls pick between these two already (see the class docstring).

        Example:

        >>> import numpy as np
        >>> encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100))
        >>> fn = encoder.inference_function(skip_padding=True)
        >>> ids = np.array([[2, 5, 3, 0], [2, 6, 7, 3]], "int32")
        >>> batch = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
        >>> tuple(fn(batch)["pooled_output"].shape)
        (2, 128)

        Args:
            jit_compile: bool. Compile the forward pass with XLA.
            skip_padding: bool. Compute per-token layers on real tokens only.
                Needs dynamic shapes, so it cannot be combined with
                `jit_compile=True`.
        """
        if jit_compile and skip_padding:
            raise ValueError(
                "skip_padding=True packs a data-dependent number of tokens, which XLA "
                "cannot compile; use jit_compile=False with it"
            )
        key = (jit_compile, skip_padding)
        if key not in self._function_cache.inference:

            def forward(inputs):
                return self(inputs, training=False, padding="skip" if skip_padding else "compute")

            self._function_cache.inference[key] = tf.function(
                forward, jit_compile=jit_compile, reduce_retracing=True
            )
        return self._function_cache.inference[key]

    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "output_hidden_states": self.output_hidden_states,
            "output_attentions": self.output_attentions,
            "skip_padding": self.skip_padding,
            "inference_skip_padding": self.inference_skip_padding,
            "full_batch_jit_compile": self.full_batch_jit_compile,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def _needs_static_shapes():
    """True inside a graph XLA compiles (`jit_compile=True`, TPU) or under a TPU strategy."""
    if isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy):
        return True
    if tf.executing_eagerly() or _control_flow_util is None:
        return False
    return bool(_control_flow_util.GraphOrParentsInXlaContext(_tf_ops.get_default_graph()))
