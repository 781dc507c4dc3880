"""Exact BERT tokenization in the TensorFlow graph."""

from pipelines.tokenizer.bert_tokenizer import BACKENDS, BertTokenizer
from pipelines.tokenizer.char_offsets import byte_to_char_offsets
from pipelines.tokenizer.normalize import BertPreTokenizer
from pipelines.tokenizer.vocab import (
    RESERVED_TOKENS,
    SpecialTokens,
    VocabularyError,
    build_vocabulary,
    count_words,
    load_vocabulary,
    special_tokens_from_vocabulary,
    write_vocabulary,
)
