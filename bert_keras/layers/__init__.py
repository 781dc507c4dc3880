"""Keras layers that make up the BERT encoder."""

from bert_keras.layers.activations import get_activation
from bert_keras.layers.attention import BertSelfAttention
from bert_keras.layers.embeddings import BertEmbeddings
from bert_keras.layers.transformer_block import BertTransformerBlock

__all__ = ["BertEmbeddings", "BertSelfAttention", "BertTransformerBlock", "get_activation"]
