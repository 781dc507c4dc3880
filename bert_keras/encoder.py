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

from bert_keras import padding_skipping
from bert_keras.config import BertConfig
from bert_keras.layers.embeddings import BertEmbeddings
from bert_keras.layers.initialization import truncated_normal
from bert_keras.layers.transformer_block import BertTransformerBlock
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES


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

    Padded tokens are skipped where that is exact and shapes may be dynamic
    (`bert_keras.padding_skipping`, the one place that decides and does it):
    inference does it by default (`encoder(inputs)`, `predict`, `evaluate`
    and every task model that wraps the encoder), training when `skip_padding`
    is on (the task API and `compile_for_finetuning` turn it on unless the
    step is XLA), never inside an XLA-compiled function or on TPUs. Outputs at
    real tokens and `pooled_output` are the full computation's;
    `sequence_output` and `hidden_states` are 0 at padded positions. Pass
    `padding="compute"` to a call for the full computation, or build with
    `inference_skip_padding=False` for it everywhere;
    `encoder.inference_function()` returns cached functions of each path.

    Args:
        config: `BertConfig` (or its `to_dict()`).
        output_hidden_states: bool. Also return every layer's output.
        output_attentions: bool. Also return every layer's attention probs.
        skip_padding: bool. Skip padded tokens in training too: a batch that
            is 25% padding trains ~1.25x faster, with the same loss and
            gradients. `compile_for_finetuning` turns it on where shapes may
            be dynamic. Also a settable attribute (set it before the train
            step is traced).
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
            kernel_initializer=truncated_normal(config.initializer_range),
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
        self.skip_padding = bool(skip_padding)
        self.inference_skip_padding = bool(inference_skip_padding)
        self.full_batch_jit_compile = bool(full_batch_jit_compile)

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
        if padding_skipping.runs_on_real_tokens(self, training):
            return padding_skipping.output_at_positions(self, inputs, positions, training)
        padding_mask = inputs["padding_mask"]
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"], training=training)
        for block in self.transformer_layers[:-1]:
            x = block(x, padding_mask, training=training)
        output = self.transformer_layers[-1](
            x, padding_mask, training=training, query_positions=positions
        )
        return tf.cast(output, "float32")

    def call(self, inputs, training=None, mask=None, padding="auto"):
        """The forward pass: the functional graph, or the same layers on the real tokens only.

        `padding="auto"` (what Keras passes) lets `bert_keras.padding_skipping` decide (the
        encoder's `skip_padding` in training, `inference_skip_padding` otherwise, never where
        XLA / TPUs need static shapes); `"compute"` forces the full computation, `"skip"` the
        real-token path.
        """
        if isinstance(inputs, dict):  # keras-hub's preprocessors give a bool padding_mask
            inputs = {name: keras.ops.cast(value, "int32") if name in ENCODER_INPUT_NAMES else value
                      for name, value in inputs.items()}
            if padding_skipping.runs_on_real_tokens(self, training, padding):
                return padding_skipping.forward(self, inputs, training)
        return super().call(inputs, training=training, mask=mask)

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

