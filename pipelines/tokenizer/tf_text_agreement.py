"""Where TF-Text's fast BERT normalizer and word splitter agree with the original rules.

`tf_text.FastBertNormalizer` + `FastWordpieceTokenizer` (end to end) run in
one C++ pass each, several times faster than the exact pre-tokenizer of
`normalize.py`, but they are not the original rules: the normalizer folds
compatibility characters ('™' -> "tm", '…' -> "...", 'ﬁ' -> "fi", fullwidth
letters), turns control characters into spaces where the original deletes
them, and some symbols are split differently. On most code points, though,
they do exactly what `tokenization.py` does: every Hangul syllable, Latin with
accents, Greek (but capital sigma), Cyrillic, CJK ideographs, kana, Arabic...

This module finds those code points by asking both sides, one code point at a
time, in the installed TF-Text and this interpreter's `unicodedata`:

* the normalizer's output for the character alone equals the original's
  `normalize_character` under the same rules (uncased, cased, or lowercase
  keeping accents), and
* the word pieces of "a<c>a" and "<c>" under a probe vocabulary agree between
  `normalizer + FastWordpiece` and the exact pre-tokenizer, so the character
  is deleted, splits words, stands alone or joins its neighbours the same way.

Both sides work character by character, so text made only of agreeing code
points gets the original's words from TF-Text. Code points are also left out
where per-character agreement is not enough: capital sigma (its lowercase
depends on the neighbours), anything whose normalized form keeps a combining
mark (NFD reorders those across characters), forms longer than
`MAX_EXPANSION` characters (the word-length guard below relies on it),
unassigned and private-use code points. The answer is cached on disk per
TF-Text version.

`BertTokenizer` sends a string down the fast path only when every character
agrees and no run of non-blank characters is long enough for a word to reach
the per-word character limit (the original counts characters after
normalization, FastWordpiece counts bytes); everything else takes the exact path.
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from pipelines.tokenizer import tf_text_models, wordpiece
from pipelines.tokenizer import unicode_tables as ut

# A character normalizes to at most this many characters on the fast path
# (a Hangul syllable becomes 2 or 3 jamo).
MAX_EXPANSION = 3
# RE2 refuses counted repetitions over 1,000: longer limits guard at this run
# length, which is only more cautious (longer runs take the exact path).
_LONGEST_GUARDED_RUN = 999
# Bump when the probe below changes, so cached answers are recomputed.
AGREEMENT_VERSION = 1

_PROBE_VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a"]
_PROBE_WIDTH = 3 * MAX_EXPANSION + 3


def agreeing_codepoints(lowercase, strip_accents=None):
    """Sorted int32 code points on which TF-Text's fast path gives the original's words.

    `strip_accents` None follows `lowercase`. Lowercasing without stripping accents is probed
    as `wordpiece.fast_normalize_function` runs it; stripping without lowercasing has no fast
    path (no code point agrees).
    """
    strip = bool(lowercase) if strip_accents is None else bool(strip_accents)
    return _agreeing_codepoints(bool(lowercase), strip)


@functools.lru_cache(maxsize=None)
def _agreeing_codepoints(lowercase, strip_accents):
    if lowercase == strip_accents:
        case = "uncased" if lowercase else "cased"
    else:
        case = "lowercase-keep-accents" if lowercase else "cased-strip-accents"
    name = f"tf_text_agreement{AGREEMENT_VERSION}-{case}-tf_text{tf_text_models.tf_text_version()}"
    if not wordpiece.has_fast_normalization(lowercase, strip_accents):
        return np.zeros([0], np.int32)
    # The probe runs eagerly, also when a tokenizer is built inside a tf.function or a graph.
    with tf.init_scope():
        return ut.cached_arrays(name, lambda: _find_agreeing_codepoints(lowercase, strip_accents))


agreeing_codepoints.cache_clear = _agreeing_codepoints.cache_clear


def _find_agreeing_codepoints(lowercase, strip_accents):
    from pipelines.tokenizer.normalize import BertPreTokenizer

    codepoints = np.arange(ut.MAX_CODEPOINT + 1)
    category = np.array([unicodedata.category(chr(c)) for c in codepoints])
    classes = ut.class_table()
    candidates = codepoints[
        ~np.isin(category, ["Cn", "Cs", "Co"])
        & (classes != ut.REMOVE)
        & (codepoints != ut.CAPITAL_SIGMA)
    ]
    chars = [chr(c) for c in candidates]
    normalize = wordpiece.fast_normalize_function(lowercase, strip_accents)

    # 1. The normalized form of each character alone.
    normalized = normalize(tf.constant([c.encode() for c in chars])).numpy()
    agree = np.zeros(len(candidates), bool)
    for i, (char, got) in enumerate(zip(chars, normalized)):
        if classes[candidates[i]] == ut.SPACE:
            agree[i] = got.decode() == " "  # a separator either way
            continue
        want = ut.normalize_character(char, lowercase, strip_accents)
        agree[i] = (
            got.decode() == want
            and len(want) <= MAX_EXPANSION
            and not any(unicodedata.combining(c) for c in want)
        )

    # 2. How it splits words: "a<c>a" and "<c>" under a probe vocabulary.
    pre = BertPreTokenizer(lowercase=lowercase, strip_accents=strip_accents)
    fast = wordpiece.fast_wordpiece(_PROBE_VOCABULARY, unk_token="[UNK]",
                                    max_bytes_per_word=4 * _PROBE_WIDTH, split_words=True)
    for template in ("a{}a", "{}"):
        probes = tf.constant([template.format(c).encode() for c in chars])
        exact = _probe_ids(pre.split(probes))
        ids = fast.tokenize(normalize(probes))
        agree &= (ids.row_lengths() == exact.row_lengths()).numpy()
        agree &= np.all(
            ids.to_tensor(-1, shape=[None, _PROBE_WIDTH]).numpy()
            == exact.to_tensor(-1, shape=[None, _PROBE_WIDTH]).numpy(), axis=1)
    return candidates[agree].astype(np.int32)


def _probe_ids(words):
    """The original's word pieces of `words` under `_PROBE_VOCABULARY` (only 'a' runs are known)."""
    unk, a, suffix_a = (_PROBE_VOCABULARY.index(t) for t in ("[UNK]", "a", "##a"))
    values, lengths = [], []
    for row in words.to_list():
        start = len(values)
        for word in row:
            if word and set(word) == {ord("a")}:
                values += [a] + [suffix_a] * (len(word) - 1)
            else:
                values.append(unk)
        lengths.append(len(values) - start)
    return tf.RaggedTensor.from_row_lengths(np.asarray(values, np.int64), np.asarray(lengths, np.int64))


def character_class_pattern(codepoints):
    """An RE2 character class (`[...]`) of exactly these code points, as ranges."""
    codepoints = np.unique(np.asarray(codepoints, np.int64))
    if codepoints.size == 0:
        return "[^\\x00-\\x{10ffff}]"  # matches nothing
    breaks = np.flatnonzero(np.diff(codepoints) != 1) + 1
    starts = codepoints[np.concatenate([[0], breaks])]
    ends = codepoints[np.concatenate([breaks - 1, [codepoints.size - 1]])]
    ranges = "".join(
        f"\\x{{{s:x}}}" if s == e else f"\\x{{{s:x}}}-\\x{{{e:x}}}" for s, e in zip(starts, ends)
    )
    return f"[{ranges}]"


def fast_path_patterns(lowercase, max_chars_per_word, strip_accents=None):
    """(agreeing text, too-long run) RE2 patterns, or None when no word limit leaves room or the
    rules have no fast form (stripping accents without lowercasing).

    A string takes TF-Text's path when it fully matches the first and does not
    match the second: a run of non-blank characters that could normalize to
    more than `max_chars_per_word` characters.
    """
    longest_run = min(int(max_chars_per_word) // MAX_EXPANSION, _LONGEST_GUARDED_RUN)
    strip = bool(lowercase) if strip_accents is None else bool(strip_accents)
    if longest_run < 1 or not wordpiece.has_fast_normalization(lowercase, strip):
        return None
    agreeing = character_class_pattern(agreeing_codepoints(lowercase, strip_accents))
    return f"{agreeing}*", f"(?s).*[^ \\t\\n\\r]{{{longest_run + 1},}}.*"
