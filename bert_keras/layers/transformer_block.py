"""One post-LayerNorm BERT transformer block."""

import keras

from bert_keras.layers.activations import get_activation
from bert_keras.layers.attention import BertSelfAttention
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initialization import truncated_normal
from bert_keras.layers.layer_normalization import LayerNormalization
from bert_keras.layers.token_packing import as_token_packing, per_token, rows_at_positions


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTransformerBlock(keras.layers.Layer):
    """Self-attention and feed-forward sub-layers, each `LN(x + dropout(f(x)))`.

    This is BERT's post-LN order (google-research `transformer_model`):

        a = LayerNorm(x + Dropout(Dense(Attention(x))))
        y = LayerNorm(a + Dropout(Dense(act(Dense(a)))))

    Both LayerNorms run in float32 (mean/variance of half-precision values
    lose too much), so under a mixed policy the block returns float32 and
    the next block's matmuls cast it back to the compute dtype.

    Example:

    >>> import numpy as np
    >>> block = BertTransformerBlock(hidden_size=16, num_heads=2, intermediate_size=64)
    >>> tuple(block(np.random.rand(2, 5, 16).astype("float32"), np.ones((2, 5), "int32")).shape)
    (2, 5, 16)

    Args:
        hidden_size: int. Model width H.
        num_heads: int. Attention heads.
        intermediate_size: int. Feed-forward width I.
        hidden_act: str. `BertConfig.hidden_act` name of the feed-forward
            activation.
        hidden_dropout: float. Dropout on each sub-layer output.
        attention_dropout: float. Dropout on attention probabilities.
        layer_norm_eps: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call with `token_indices` (flat `[T, 1]` positions of the real tokens,
    `token_packing.real_token_indices`, or a `token_packing.TokenPacking`
    made once for all blocks of a pass) and `[T, H]` packed inputs to run on
    the real tokens only; `bert_keras.padding_skipping` decides when.
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout=0.1,
        attention_dropout=0.1,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range

        init = truncated_normal(initializer_range)
        policy = self.dtype_policy
        self.attention = BertSelfAttention(
            hidden_size, num_heads, dropout=attention_dropout,
            initializer_range=initializer_range, dtype=policy, name="attention",
        )
        self.attention_dropout_layer = Dropout(
            hidden_dropout, dtype=policy, name="attention_output_dropout"
        )
        self.attention_layer_norm = LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="attention_layer_norm"
        )
        self.intermediate_dense = keras.layers.Dense(
            intermediate_size, activation=get_activation(hidden_act),
            kernel_initializer=init, dtype=policy, name="intermediate",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy, name="output"
        )
        self.output_dropout = Dropout(hidden_dropout, dtype=policy, name="output_dropout")
        self.output_layer_norm = LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="output_layer_norm"
        )

    def build(self, inputs_shape, padding_mask_shape=None):
        self.attention.build(inputs_shape)
        self.attention_layer_norm.build(inputs_shape)
        self.intermediate_dense.build(inputs_shape)
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_size,))
        self.output_layer_norm.build(inputs_shape)
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
        """Block output `[B, S, H]` (or `[T, H]` packed by `token_indices`).

        `query_positions` (int `[B, Q]`) computes the output at those
        positions only, `[B, Q, H]`: every token is still a key and value, so
        the result equals the full output gathered at them. A model that
        reads the last layer at a few positions (masked-LM pretraining: the
        masked tokens and [CLS]; the pooled output: [CLS] only) skips most of
        the last block's work. With `token_indices` the inputs are packed
        `[T, H]` and the output is still `[B, Q, H]`.
        """
        # `inputs` arrives in the compute dtype (Keras autocasts layer inputs).
        # It is [B, S, H], or [T, H] real tokens only when `token_indices`
        # (flat [T, 1] positions in B * S) is given: everything but the
        # attention scores is per token, so padding need not be computed.
        attention_output, probs = self.attention(
            inputs, padding_mask, training=training, return_attention_probs=True,
            token_indices=token_indices, query_positions=query_positions,
        )
        attention_output = self.attention_dropout_layer(attention_output, training=training)
        residual = inputs
        if query_positions is not None and token_indices is not None:
            residual = rows_at_positions(inputs, as_token_packing(token_indices, padding_mask), query_positions)
        elif query_positions is not None:
            residual = keras.ops.take_along_axis(
                inputs, keras.ops.cast(query_positions, "int32")[:, :, None], axis=1
            )
        x = self.attention_layer_norm(residual + attention_output)

        # x is float32 (LayerNorm); Dense casts it to the compute dtype.
        hidden = per_token(lambda rows: self.output_dense(self.intermediate_dense(rows)), x)
        hidden = self.output_dropout(hidden, training=training)
        output = self.output_layer_norm(x + keras.ops.cast(hidden, x.dtype))
        if return_attention_probs:
            return output, probs
        return output

    def compute_output_spec(
        self,
        inputs,
        padding_mask,
        training=None,
        return_attention_probs=False,
        token_indices=None,
        query_positions=None,
    ):
        """The output's shape and dtype without running `call`.

        Keras would otherwise trace `call` in a scratch graph for every block
        of a functional model (about a third of building a 6-layer encoder).
        Both outputs are float32: the block ends in a float32 LayerNorm, and
        the attention probabilities are a float32 softmax.
        """
        batch, seq = padding_mask.shape[0], padding_mask.shape[1]
        if query_positions is not None:
            queries = query_positions.shape[1]
            shape = (batch, queries, self.hidden_size)
        else:
            queries = seq
            shape = tuple(inputs.shape[:-1]) + (self.hidden_size,)
        output = keras.KerasTensor(shape, dtype="float32")
        if return_attention_probs:
            return output, keras.KerasTensor((batch, self.num_heads, queries, seq), dtype="float32")
        return output

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout=self.hidden_dropout,
            attention_dropout=self.attention_dropout,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
        )
        return config

    @classmethod
    def from_config(cls, config):
        # Models saved before padding skipping moved to `bert_keras.padding_skipping` carry a
        # per-block `skip_padding`; the encoder's own switch now decides.
        config = {key: value for key, value in config.items() if key != "skip_padding"}
        return cls(**config)
