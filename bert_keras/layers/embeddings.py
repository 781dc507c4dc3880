"""BERT input embeddings: word + position + segment, then LayerNorm and dropout."""

import keras
from keras import ops

from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initialization import truncated_normal
from bert_keras.layers.layer_normalization import LayerNormalization


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEmbeddings(keras.layers.Layer):
    """Sums word, absolute-position and segment embeddings, normalises, drops out.

    The three tables keep google-research's shapes (`[vocab, H]`,
    `[max_positions, H]`, `[type_vocab, H]`) so checkpoints map 1:1.
    The LayerNorm always runs in float32: under a mixed policy its input is
    upcast and its float32 output starts the residual stream.

    Example:

    >>> import numpy as np
    >>> layer = BertEmbeddings(vocab_size=100, hidden_size=16, max_position_embeddings=32)
    >>> tuple(layer(np.ones((2, 8), "int32"), np.zeros((2, 8), "int32")).shape)
    (2, 8, 16)

    Args:
        vocab_size: int. Rows of the word embedding table.
        hidden_size: int. Embedding width H.
        max_position_embeddings: int. Rows of the position table; longest input.
        type_vocab_size: int. Rows of the segment table.
        dropout: float. Dropout rate after the LayerNorm.
        layer_norm_eps: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the truncated-normal initializer.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        dropout=0.1,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range

        init = truncated_normal(initializer_range)
        # A keras Embedding layer (not a bare weight) so a masked-LM head can
        # tie its output projection to `token_embedding.embeddings`.
        self.token_embedding = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=init,
            dtype=self.dtype_policy, name="word_embeddings",
        )
        self.segment_embedding = keras.layers.Embedding(
            type_vocab_size, hidden_size, embeddings_initializer=init,
            dtype=self.dtype_policy, name="token_type_embeddings",
        )
        self.layer_norm = LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="layer_norm"
        )
        # float32 like the LayerNorm before it: layer outputs between blocks are float32.
        self.dropout = Dropout(dropout, dtype="float32", name="dropout")

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        self.segment_embedding.build(token_ids_shape)
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=truncated_normal(self.initializer_range),
        )
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_size,))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        seq_len = ops.shape(token_ids)[1]
        # Absolute positions 0..seq-1, broadcast over the batch.
        positions = ops.cast(self.position_embeddings[:seq_len], self.compute_dtype)
        x = self.token_embedding(token_ids) + self.segment_embedding(segment_ids)
        x = x + positions[None, :, :]
        x = self.layer_norm(x)
        return self.dropout(x, training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_size,)

    def compute_output_spec(self, token_ids, segment_ids, training=None):
        # float32 under any policy: the output leaves a float32 LayerNorm and dropout.
        return keras.KerasTensor(self.compute_output_shape(token_ids.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            dropout=self.dropout_rate,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
        )
        return config
