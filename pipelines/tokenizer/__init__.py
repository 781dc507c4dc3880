"""Exact BERT tokenization in the TensorFlow graph.

The public names load lazily: `vocabulary_learning.VocabularyOptions` and `tokenizer_config` import
no TensorFlow, so the command line's `--help` reads them fast; the rest loads on first use.
"""

import importlib

_LAZY = {
    "BACKENDS": "bert_tokenizer", "BertTokenizer": "bert_tokenizer",
    "byte_to_char_offsets": "char_offsets",
    "BertPreTokenizer": "normalize",
    "RESERVED_TOKENS": "vocab", "SpecialTokens": "vocab", "VocabularyError": "vocab",
    "build_vocabulary": "vocab", "count_words": "vocab", "load_vocabulary": "vocab",
    "special_tokens_from_vocabulary": "vocab", "write_vocabulary": "vocab",
    "LearnedVocabulary": "vocabulary_learning", "VocabularyOptions": "vocabulary_learning",
    "learn_vocabulary": "vocabulary_learning",
}
__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"pipelines.tokenizer.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'pipelines.tokenizer' has no attribute {name!r}")
