"""The Unicode facts BERT's tokenization rules depend on, as sorted integer tables.

google-research/bert `tokenization.py` decides everything with Python's
`unicodedata` of the running interpreter. To reproduce it exactly inside a
TensorFlow graph, we ask the same `unicodedata` once, here, and freeze the
answers into constant tensors (range tables looked up with `tf.searchsorted`).
RE2 character classes or ICU case mapping inside TensorFlow would use other
Unicode versions and other definitions (e.g. ICU folds '™' to "tm" in NFKC-like
normalizers), which is exactly where `tf_text.FastBertTokenizer` drifts.

Everything here is plain numpy; nothing depends on TensorFlow.
"""

import functools
import os
import sys
import unicodedata

import numpy as np

from pipelines.atomic_writes import atomic_file

# Bump when a rule below changes, so cached tables are rebuilt.
TABLES_VERSION = 2

MAX_CODEPOINT = sys.maxunicode  # 0x10FFFF

# Character classes used by the pre-tokenizer. One class per code point.
OTHER = 0  # part of a word
REMOVE = 1  # U+0000, U+FFFD and control characters: deleted before anything else
SPACE = 2  # separates words
CJK = 3  # a word of its own (the original puts spaces around it)
PUNCT = 4  # a word of its own (split off by `_run_split_on_punc`)

# Context classes for the Greek final-sigma rule of `str.lower()` (Unicode
# SpecialCasing "Final_Sigma"): case-ignorable characters are skipped, the first
# other character decides.
SIGMA_BREAK = 0
SIGMA_IGNORABLE = 1
SIGMA_CASED = 2

CAPITAL_SIGMA = 0x03A3
SMALL_SIGMA = 0x03C3
FINAL_SIGMA = 0x03C2


def _is_whitespace(char):
    # tokenization.py `_is_whitespace`: \t \n \r count as whitespace although
    # they are control characters. The original then splits words with Python's `str.split()`,
    # which also splits at the line and paragraph separators U+2028 / U+2029 (Zl, Zp; every
    # other `str.isspace` character is a control or Zs, already removed or a space): they
    # separate words too (google-research/bert, tf-models-official and HF agree).
    return char in " \t\n\r" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def _is_control(char):
    # tokenization.py `_is_control`: Cc and Cf, except \t \n \r.
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    # tokenization.py `_is_punctuation`: every non-letter/number ASCII character,
    # and every Unicode P* category.
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk(cp):
    # tokenization.py `_is_chinese_char`: the CJK Unified Ideographs blocks only
    # (not Hangul, Hiragana or Katakana, which are written with spaces).
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def character_class(cp):
    char = chr(cp)
    if cp == 0 or cp == 0xFFFD or _is_control(char):
        return REMOVE
    if _is_whitespace(char):
        return SPACE
    if is_cjk(cp):
        return CJK
    if is_punctuation(char):
        return PUNCT
    return OTHER


def normalize_character(char, lowercase=True, strip_accents=True):
    """What the original does to one character of a token: `token.lower()` when `lowercase`, then,
    when `strip_accents`, NFD (not NFKD: '™' and '…' stay) and drop Mn marks.

    HF's `BertTokenizer(do_lower_case=True, strip_accents=False)` only lowercases: a Hangul
    syllable stays one character instead of becoming two or three conjoining jamo.
    """
    if lowercase:
        char = char.lower()
    if not strip_accents:
        return char
    decomposed = unicodedata.normalize("NFD", char)
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


def normalize_uncased(char):
    """The uncased rule of the original (`do_lower_case=True`): lowercase, NFD, drop Mn marks."""
    return normalize_character(char, lowercase=True, strip_accents=True)


def _cache_path(name):
    from pipelines.user_cache import cache_root

    root = cache_root()
    # The tables answer what this interpreter's `unicodedata` and `str.lower`
    # answer, so they are keyed by both.
    key = f"unicode-{unicodedata.unidata_version}-py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(root, key, f"{name}-v{TABLES_VERSION}.npz")


def cached_arrays(name, build):
    """`build()` (an array or a tuple of arrays), saved on disk under `name` the first time.

    A scan of all code points takes seconds; loading the saved arrays takes
    milliseconds. Any problem with the cache directory just means the arrays
    are computed. `name` must say everything the result depends on beyond this
    interpreter's Unicode data (which the directory already says).
    """
    path = _cache_path(name)
    try:
        with np.load(path) as saved:
            arrays = tuple(saved[f"a{i}"] for i in range(len(saved.files)))
        return arrays[0] if len(arrays) == 1 else arrays
    except (OSError, ValueError, KeyError):
        pass
    result = build()
    arrays = result if isinstance(result, tuple) else (result,)
    try:
        with atomic_file(path, "wb") as f:  # readers never see a partial file
            np.savez(f, **{f"a{i}": a for i, a in enumerate(arrays)})
    except OSError:
        pass
    return result


def _disk_cached(build):
    """Memoises a table builder in memory and on disk (see `cached_arrays`)."""

    @functools.lru_cache(maxsize=None)
    def cached():
        return cached_arrays(build.__name__, build)

    cached.__doc__ = build.__doc__
    cached.__name__ = build.__name__
    return cached


def _runs(values):
    """Compresses a per-code-point array into (starts, values) of constant runs."""
    change = np.flatnonzero(np.diff(values)) + 1
    starts = np.concatenate([[0], change]).astype(np.int32)
    return starts, values[starts].astype(np.int32)


@_disk_cached
def class_table():
    """int8 [0x110000]: the character class of every code point (1.1 MB).

    A dense table costs one gather per character, against a binary search over
    thousands of ranges: the pre-tokenizer spends most of its time here.
    """
    return np.fromiter(
        (character_class(cp) for cp in range(MAX_CODEPOINT + 1)), np.int8, MAX_CODEPOINT + 1
    )


@_disk_cached
def sigma_context_runs():
    """(starts, context classes) for the final-sigma rule, derived from `str.lower()`.

    For a character c: in "AΣc" Σ stays non-final iff c is cased (and not
    ignorable); in "AΣc," Σ is final iff c is ignorable or not cased, and in
    "AΣcA" Σ is non-final iff c is ignorable or cased.
    """
    context = np.zeros(MAX_CODEPOINT + 1, np.int8)
    final = chr(FINAL_SIGMA)
    for cp in range(MAX_CODEPOINT + 1):
        category = unicodedata.category(chr(cp))
        if category in ("Cn", "Cs", "Co"):
            continue  # unassigned, surrogates, private use: neither cased nor ignorable
        char = chr(cp)
        followed_by_letter = ("AΣ" + char + "A").lower()[1] != final
        if not followed_by_letter:
            continue  # breaks the context: SIGMA_BREAK
        directly = ("AΣ" + char + ",").lower()[1] != final
        context[cp] = SIGMA_CASED if directly else SIGMA_IGNORABLE
    return _runs(context)


def character_expansions(lowercase=True, strip_accents=True):
    """The code points that normalization changes under these rules, and what they become.

    Returns (slots, row_splits, values): int16 slots[cp] = i >= 0 means the code point becomes
    values[row_splits[i]:row_splits[i + 1]] (possibly nothing, e.g. a combining accent that is
    stripped); slots[cp] = -1 leaves it unchanged. Capital sigma maps to small sigma when
    lowercasing; the final form is decided from context by the caller. Cached in memory and on
    disk per rule.
    """
    if lowercase and strip_accents:
        return uncased_expansions()
    return _expansion_tables(bool(lowercase), bool(strip_accents))


@functools.lru_cache(maxsize=None)
def _expansion_tables(lowercase, strip_accents):
    name = f"expansions-{'lower' if lowercase else 'cased'}-{'strip' if strip_accents else 'keep'}"
    return cached_arrays(name, lambda: _build_expansions(lowercase, strip_accents))


def _build_expansions(lowercase, strip_accents):
    slots = np.full(MAX_CODEPOINT + 1, -1, np.int16)  # ~16k changed code points fit int16
    splits, values = [0], []
    for cp in range(MAX_CODEPOINT + 1):
        char = chr(cp)
        if unicodedata.category(char) in ("Cn", "Cs", "Co"):
            continue
        normalized = normalize_character(char, lowercase, strip_accents)
        if normalized != char:
            slots[cp] = len(splits) - 1
            values.extend(ord(c) for c in normalized)
            splits.append(len(values))
    return slots, np.asarray(splits, np.int32), np.asarray(values, np.int32)


@_disk_cached
def uncased_expansions():
    """`character_expansions` of the uncased rule (lowercase, NFD, strip Mn marks)."""
    return _build_expansions(True, True)
