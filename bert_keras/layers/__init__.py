"""Keras layers that make up the BERT encoder and its heads."""

from bert_keras.layers.activations import get_activation
from bert_keras.layers.attention import BertSelfAttention
from bert_keras.layers.choice_flattening import FlattenChoices
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.embeddings import BertEmbeddings
from bert_keras.layers.layer_normalization import LayerNormalization
from bert_keras.layers.masked_lm_head import MaskedLMHead
from bert_keras.layers.next_sentence_head import NextSentenceHead
from bert_keras.layers.span_head import SpanHead
from bert_keras.layers.transformer_block import BertTransformerBlock

__all__ = [
    "BertEmbeddings",
    "BertSelfAttention",
    "BertTransformerBlock",
    "Dropout",
    "FlattenChoices",
    "LayerNormalization",
    "MaskedLMHead",
    "NextSentenceHead",
    "SpanHead",
    "get_activation",
]
