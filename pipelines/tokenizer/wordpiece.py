"""WordPiece on pre-split words, backed by TF-Text's FastWordpieceTokenizer.

FastWordpiece implements the same greedy longest-match-first algorithm as the
original `WordpieceTokenizer` (LinMaxMatch gives identical output), in linear
time. It is used here with `no_pretokenization=True`: the exact BERT word split
and normalization happen before, in `normalize.py`, because FastBertTokenizer's
own normalizer differs from the original (no CJK spacing, NFKD-like folding of
'™' and '…').
"""

import functools
import re

import tensorflow as tf

from pipelines.tokenizer import tf_text_kernels, tf_text_models


def utf8_lengths(codepoints):
    """Bytes each code point takes in UTF-8."""
    return (
        1
        + tf.cast(codepoints >= 0x80, tf.int64)
        + tf.cast(codepoints >= 0x800, tf.int64)
        + tf.cast(codepoints >= 0x10000, tf.int64)
    )


@functools.lru_cache(maxsize=None)
def normalizer_model(lowercase):
    """The `FastBertNormalizer` model buffer (uint8 numpy): built once per machine (~0.2 s), then
    read from `tf_text_models`' cache."""
    def build():  # (imports all of TF-Text: only when the model is not in the cache)
        from tensorflow_text.core.pybinds import pywrap_fast_bert_normalizer_model_builder as builder

        return builder.build_fast_bert_normalizer_model(bool(lowercase))

    return tf_text_models.cached_model("fast_bert_normalizer", [bool(lowercase)], build)


def fast_normalizer(lowercase):
    """TF-Text's FastBertNormalizer (`tf_text_kernels`) for the uncased (lowercase, NFD, strip
    accents) or cased rules."""
    return tf_text_kernels.FastBertNormalizerKernel(tf.constant(normalizer_model(lowercase)))


def has_fast_normalization(lowercase, strip_accents):
    """Whether `fast_normalize_function` has a form for these rules (all but strip-without-lowercase)."""
    return bool(lowercase) or not strip_accents


def fast_normalize_function(lowercase, strip_accents):
    """TF-Text's one-pass normalization for these rules, as `strings -> strings`, or None.

    FastBertNormalizer knows two rule sets: uncased (lowercase + NFD + strip accents) and cased.
    Lowercase without stripping (HF's `strip_accents=False`) is the cased normalizer after an
    ASCII lowercasing; `tf_text_agreement` keeps only the code points where that is exact (no
    non-ASCII capital letter). Stripping without lowercasing has no fast form.
    """
    if not has_fast_normalization(lowercase, strip_accents):
        return None
    if bool(lowercase) == bool(strip_accents):
        return fast_normalizer(lowercase).normalize
    normalizer = fast_normalizer(False)
    return lambda strings: normalizer.normalize(tf.strings.lower(strings))


def fast_wordpiece(vocabulary, *, unk_token, max_bytes_per_word, split_words):
    """TF-Text's FastWordpiece (`tf_text_kernels`) as every path here uses it: int64 ids, "##"
    suffixes.

    Args:
        split_words: True: it splits raw text on whitespace and punctuation
            itself (end to end); False: its inputs are words already.
    """
    vocabulary = list(vocabulary)
    if split_words:
        vocabulary = _without_whitespace_tokens(vocabulary)
    arguments = [int(max_bytes_per_word), "##", unk_token, not split_words, False]

    def build():  # (imports all of TF-Text: only when the model is not in the cache)
        from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder as builder

        try:
            return builder.build_fast_wordpiece_model(vocabulary, *arguments)
        except RuntimeError as error:
            if not split_words or "No valid vocab tokens" not in str(error):
                raise
            # End to end, TF-Text builds on tokens without punctuation only: a vocabulary of special
            # tokens and punctuation alone has none. One no input matches (U+10FFFF, which the strings
            # sent to it never hold) lets it build; every word is then [UNK] or punctuation, as in the
            # original.
            return builder.build_fast_wordpiece_model(vocabulary + ["\U0010FFFF"], *arguments)

    model = tf_text_models.cached_model(  # built once per machine, then read from the cache
        "fast_wordpiece", [arguments, vocabulary], build)
    # The model as a uint8 tensor made from the bytes directly: given the vocabulary instead,
    # TF-Text makes it from a Python list of its ~1.5M bytes (~0.05 s a model).
    return tf_text_kernels.FastWordpieceKernel(tf.constant(model))


def _without_whitespace_tokens(vocabulary):
    """`vocabulary` with each token that holds whitespace replaced by one no input can match.

    BERT splits words at whitespace, so such a token (`"x y"`, a vocab.txt line with a stray
    space) never matches a word: the original, HF and the pre-split paths give `x`, `y`. The
    end-to-end FastWordpiece matches it across the space instead (`"x y"` became one token), so
    it gets a placeholder of its id: U+10FFFF, which the strings sent to it never hold (printable
    ASCII, or code points `tf_text_agreement` accepts: no noncharacters).
    """
    return [f"\U0010FFFF{index}" if _WHITESPACE.search(token) else token for index, token in enumerate(vocabulary)]


# `str.isspace`'s characters, which include every Unicode separator (categories Zs, Zl, Zp): one
# search per token (~2 ms for a 30,522-token vocabulary; ~100 ms as a per-character test).
_WHITESPACE = re.compile(r"\s")


class FastWordpiece(tf.Module):
    """WordPiece for a flat list of normalized words (TF-Text custom ops).

    Args:
        vocabulary: list of str, the vocabulary in id order.
        unk_token: the token for words that cannot be split.
        max_chars_per_word: longer words never reach this class (the caller
            maps them to the unknown token), so the byte budget only needs to
            cover words of at most this many characters.
    """

    uses_tf_text_ops = True

    def __init__(self, vocabulary, *, unk_token="[UNK]", max_chars_per_word=200, name=None):
        super().__init__(name=name)
        self._tokenizer = fast_wordpiece(vocabulary, unk_token=unk_token,
                                         max_bytes_per_word=4 * max_chars_per_word + 4,
                                         split_words=False)

    def tokenize_word_ids(self, words, word_lengths):
        """ids RaggedTensor [num_words, (pieces)] (no offsets: `tokenize_words` has them)."""
        del word_lengths  # FastWordpiece needs none; CoreWordpiece does.
        return self._tokenizer.tokenize(words)

    def tokenize_words(self, words, pre):
        """Returns (ids, begin_char, end_char), each a RaggedTensor [num_words, (pieces)].

        Characters are counted within each word: piece p of word w covers the
        normalized characters [begin_char, end_char) of w.
        """
        ids, begin_byte, end_byte = self._tokenizer.tokenize_with_offsets(words)
        # FastWordpiece reports byte offsets inside each word; convert them to
        # character indices, which the caller maps back to the original text.
        char_bytes = utf8_lengths(pre.char_codepoints)
        char_byte_start = tf.math.cumsum(char_bytes, exclusive=True)
        total = tf.reduce_sum(char_bytes)
        word_byte_start = tf.gather(
            tf.concat([char_byte_start, [total]], axis=0), pre.word_char_splits[:-1]
        )
        piece_word = ids.value_rowids()
        base = tf.gather(word_byte_start, piece_word)
        first_char = tf.gather(pre.word_char_splits, piece_word)

        def char_index(global_byte):
            return tf.searchsorted(char_byte_start, global_byte, side="right", out_type=tf.int64) - 1

        begin = char_index(base + begin_byte.flat_values) - first_char
        end = char_index(base + end_byte.flat_values - 1) + 1 - first_char
        return ids, ids.with_flat_values(begin), ids.with_flat_values(end)


# Printable ASCII plus \t \n \r: on such text the original rules reduce to
# ASCII lowercasing, splitting on the same whitespace and the same ASCII
# punctuation ranges FastWordpiece's own pre-tokenizer uses, and a word limit
# where bytes equal characters. Other control characters, which the original
# deletes, are not in the set, so those strings take the exact path.
ASCII_SAFE_PATTERN = r"[\t\n\r\x20-\x7e]*"


class FastAsciiWordpiece(tf.Module):
    """End-to-end FastWordpiece for strings that are printable ASCII.

    One pass splits words and word pieces; lowercasing ASCII keeps every byte
    where it was, so the offsets it reports are offsets into the original
    string. (FastBertTokenizer would give the same ids, but its normalizer
    makes `tokenize_with_offsets` several times slower.) `BertTokenizer` sends
    only the strings that match `ASCII_SAFE_PATTERN` here.
    """

    def __init__(self, vocabulary, *, lowercase, unk_token="[UNK]", max_chars_per_word=200,
                 name=None):
        super().__init__(name=name)
        self.lowercase = lowercase
        self._tokenizer = fast_wordpiece(vocabulary, unk_token=unk_token,
                                         max_bytes_per_word=max_chars_per_word, split_words=True)

    def _prepare(self, strings):
        return tf.strings.lower(strings) if self.lowercase else strings

    def tokenize(self, strings):
        """ids RaggedTensor [batch, (tokens)]."""
        return self._tokenizer.tokenize(self._prepare(strings))

    def tokenize_with_offsets(self, strings):
        """(ids, begin, end) RaggedTensors [batch, (tokens)], byte offsets."""
        return self._tokenizer.tokenize_with_offsets(self._prepare(strings))


class FastAgreeingWordpiece(tf.Module):
    """TF-Text's `FastBertNormalizer` + end-to-end FastWordpiece, for text where they agree.

    On strings that `tf_text_agreement.fast_path_patterns` accepts (every
    character handled as the original handles it, no word near the length
    limit), this gives the original's token ids in two C++ passes. Ids only:
    offsets take the exact path. `BertTokenizer` routes strings here.
    """

    def __init__(self, vocabulary, *, lowercase, strip_accents=None, unk_token="[UNK]",
                 max_chars_per_word=200, name=None):
        super().__init__(name=name)
        self._normalize = fast_normalize_function(
            bool(lowercase), bool(lowercase) if strip_accents is None else bool(strip_accents))
        # Accepted strings have no word over `max_chars_per_word` characters,
        # so the byte budget never turns a word into [UNK] by itself.
        self._tokenizer = fast_wordpiece(vocabulary, unk_token=unk_token,
                                         max_bytes_per_word=4 * max_chars_per_word + 4,
                                         split_words=True)

    def tokenize(self, strings):
        """ids RaggedTensor [batch, (tokens)]."""
        return self._tokenizer.tokenize(self._normalize(strings))
