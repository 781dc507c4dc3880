"""BERT's masked-LM head: predicts the original token at each masked position."""

import keras
from keras import ops

from bert_keras.layers.activations import get_activation
from bert_keras.layers.initialization import truncated_normal
from bert_keras.layers.layer_normalization import LayerNormalization


@keras.saving.register_keras_serializable(package="bert_keras")
class MaskedLMHead(keras.layers.Layer):
    """Gathers masked positions, transforms them, scores them against the word embeddings.

    This is google-research `run_pretraining.get_masked_lm_output`:

        h = LayerNorm(act(Dense_H(gather(sequence_output, positions))))
        logits = h @ word_embeddings^T + output_bias

    Only the `P` masked positions of each sequence are transformed and
    projected, so the `[B, P, V]` logits are all that is ever computed; the
    `[B, S, V]` logits of every position (about 7x more for P=20, S=128)
    never exist.

    The output projection is tied: it reads `token_embedding.embeddings`, the
    encoder's own `[V, H]` variable, so the gradients of both uses meet in
    one matrix (no copy, no second `[H, V]` weight). The projection runs in
    the compute dtype (the largest matmul of pretraining, so it should use
    float16/bfloat16 under a mixed policy); the logits are then cast to
    float32 before the bias so the softmax cross-entropy is float32.

    Example:

    >>> import numpy as np
    >>> embedding = keras.layers.Embedding(100, 16)
    >>> embedding.build((None,))
    >>> head = MaskedLMHead(embedding, hidden_act="gelu")
    >>> sequence_output = np.random.rand(2, 8, 16).astype("float32")
    >>> positions = np.array([[1, 4, 0], [2, 3, 7]], "int32")
    >>> tuple(head(sequence_output, positions).shape)
    (2, 3, 100)

    Args:
        token_embedding: the encoder's word-embedding `keras.layers.Embedding`
            (`BertEncoder.token_embedding`), already built. Not serialised:
            the model that owns both (e.g. `BertPretrainer`) passes it again
            when it is rebuilt from its config.
        hidden_act: str. `BertConfig.hidden_act` name of the transform
            activation (google-research uses the encoder's activation).
        layer_norm_eps: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the truncated-normal initializer
            of the transform kernel (the output bias starts at zero).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).
    """

    def __init__(
        self,
        token_embedding,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.vocab_size = token_embedding.input_dim
        self.hidden_size = token_embedding.output_dim

        self.transform_dense = keras.layers.Dense(
            self.hidden_size,
            activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        # float32 like every LayerNorm in the encoder: mean/variance of
        # half-precision values lose too much.
        self.transform_layer_norm = LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="transform_layer_norm"
        )

    def build(self, inputs_shape, masked_lm_positions_shape=None):
        gathered_shape = (None, None, self.hidden_size)
        self.transform_dense.build(gathered_shape)
        self.transform_layer_norm.build(gathered_shape)
        # float32 and never autocast to the compute dtype: it is added to the
        # float32 logits.
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros",
            dtype="float32", autocast=False,
        )
        self.built = True

    def call(self, inputs, masked_lm_positions=None):
        """Logits `[B, P, V]`; `masked_lm_positions=None`: `inputs` are already the `[B, P, H]` vectors."""
        x = inputs
        if masked_lm_positions is not None:
            # [B, S, H] -> [B, P, H]: everything after this sees masked tokens only.
            positions = ops.cast(masked_lm_positions, "int32")[:, :, None]
            x = ops.take_along_axis(inputs, positions, axis=1)
        x = self.transform_layer_norm(self.transform_dense(x))
        # The tied projection: the encoder's embedding variable itself.
        embeddings = ops.cast(self.token_embedding.embeddings, self.compute_dtype)
        logits = ops.matmul(ops.cast(x, self.compute_dtype), ops.transpose(embeddings))
        return ops.cast(logits, "float32") + self.output_bias

    def compute_output_shape(self, inputs_shape, masked_lm_positions_shape=None):
        if masked_lm_positions_shape is None:
            return tuple(inputs_shape[:2]) + (self.vocab_size,)
        return tuple(masked_lm_positions_shape) + (self.vocab_size,)

    def compute_output_spec(self, inputs, masked_lm_positions=None):
        shape = self.compute_output_shape(
            inputs.shape, None if masked_lm_positions is None else masked_lm_positions.shape
        )
        return keras.KerasTensor(shape, dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_act=self.hidden_act,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
        )
        return config
