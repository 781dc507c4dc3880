"""BERT's basic tokenization (cleaning, CJK spacing, casing, punctuation) as graph ops.

This reproduces `BasicTokenizer` of google-research/bert `tokenization.py` rule
for rule, with core TensorFlow ops only (no TF-Text custom ops), and keeps for
every output character the byte span of the ORIGINAL input character it came
from, so that word pieces can later point back into the raw text.

The original, for one string:

    text = decode("utf-8", errors="ignore")
    text = _clean_text(text)             # drop U+0000, U+FFFD, Cc/Cf controls; whitespace -> " "
    text = _tokenize_chinese_chars(text) # " " around every CJK ideograph
    for token in text.split():           # whitespace split
        if do_lower_case:
            token = token.lower()        # full Unicode lowercase, incl. Greek final sigma
            token = strip_accents(token) # NFD (not NFKD!), then drop Mn marks
        words += _run_split_on_punc(token)  # every punctuation char is its own word

HF's `BertTokenizer` separates the two uncased steps (`strip_accents`, which follows
`do_lower_case` unless given): `lowercase=True, strip_accents=False` lowercases and keeps
accents and Hangul syllables whole, which Korean vocabularies need (NFD turns every syllable
into conjoining jamo that they do not hold).

Here the same happens to arrays of code points: each character is classified
with a range table frozen from Python's `unicodedata` (`unicode_tables.py`),
removed characters are dropped, uncased characters are expanded through a
lookup table (one character may become zero, one or several), and word
boundaries are computed with vectorised comparisons. Splitting on the original
string before looking at normalized text is what keeps offsets exact
(compare tensorflow#45684, where offsets drift after special characters).
"""

import collections

import tensorflow as tf

from pipelines import row_ops
from pipelines.tokenizer import unicode_tables as ut

PreTokenized = collections.namedtuple(
    "PreTokenized",
    [
        "words",  # tf.RaggedTensor [batch, (words)] of UTF-8 normalized words
        "word_char_splits",  # int64 [num_words + 1]: word w owns chars [splits[w], splits[w+1])
        "word_rows",  # int64 [num_words]: the batch row of each word
        "char_codepoints",  # int32 [num_chars]: the normalized characters of all words
        "char_begin",  # int64 [num_chars]: byte where the source character starts in its input (or None)
        "char_end",  # int64 [num_chars]: byte where the source character ends in its input (or None)
        "nrows",  # int64 scalar: batch size
    ],
)


def resolved_strip_accents(lowercase, strip_accents=None):
    """Whether accents are stripped: `strip_accents` when given, else `lowercase` (HF's rule).

    >>> resolved_strip_accents(True), resolved_strip_accents(True, False), resolved_strip_accents(False)
    (True, False, False)
    """
    if strip_accents is None:
        return bool(lowercase)
    if strip_accents not in (True, False):  # numpy booleans too
        raise ValueError(f"strip_accents must be true, false or None (follow lowercase), got {strip_accents!r}")
    return bool(strip_accents)


def _lookup_runs(starts, values, codepoints):
    """Per code point, the value of the run it falls in (a range table of `unicode_tables`)."""
    index = tf.searchsorted(starts, codepoints, side="right") - 1
    return tf.gather(values, index)


def _exclusive_cumsum(x):
    return tf.math.cumsum(x, exclusive=True)


def _previous(x, first):
    """x shifted right by one: element i holds x[i - 1], element 0 holds `first`."""
    return tf.concat([[first], x], axis=0)[: tf.size(x)]


def _general_case_in_graphs(needed, general, shortcut):
    """`general()` where `needed()` holds, else `shortcut()`, which must give the same result
    (cheaper) in that case. Eagerly the predicate picks one; in a graph (`tf.data`, an
    export) the general form runs, with no `tf.cond`: tracing one (each branch a function
    graph) cost more than the general form costs to run on the strings that take this
    exact path (~0.1 s of every tokenizer graph's first trace, for three of them)."""
    if tf.executing_eagerly():
        return general() if bool(needed()) else shortcut()
    return general()


class BertPreTokenizer(tf.Module):
    """Splits text into normalized BERT words, tracking where each character came from.

    Example:

    >>> pre = BertPreTokenizer(lowercase=True)
    >>> pre.split(tf.constant(["Héllo, 世界™…"])).to_list()
    [[b'hello', b',', b'\\xe4\\xb8\\x96', b'\\xe7\\x95\\x8c', b'\\xe2\\x84\\xa2', b'\\xe2\\x80\\xa6']]

    >>> BertPreTokenizer(lowercase=True, strip_accents=False).split(tf.constant(["Héllo 한국어"])).to_list()
    [[b'h\\xc3\\xa9llo', b'\\xed\\x95\\x9c\\xea\\xb5\\xad\\xec\\x96\\xb4']]

    Args:
        lowercase: apply the uncased rules (lowercase, NFD, strip Mn accents),
            as `do_lower_case=True` in the original.
        strip_accents: NFD and drop Mn marks (None: as `lowercase`, HF's rule). `lowercase=True,
            strip_accents=False` lowercases only, keeping accents and Hangul syllables whole.
    """

    def __init__(self, lowercase=True, strip_accents=None, name=None):
        super().__init__(name=name)
        self.lowercase = bool(lowercase)
        self.strip_accents = resolved_strip_accents(lowercase, strip_accents)
        self._classes = tf.constant(ut.class_table())
        self._normalizes = self.lowercase or self.strip_accents
        if self._normalizes:
            slots, splits, values = ut.character_expansions(self.lowercase, self.strip_accents)
            self._expansion_slots = tf.constant(slots)
            self._expansion_splits = tf.constant(splits)
            self._expansion_values = tf.constant(values)
        if self.lowercase:
            sigma_starts, sigma_context = ut.sigma_context_runs()
            self._sigma_starts = tf.constant(sigma_starts)
            self._sigma_context = tf.constant(sigma_context)

    # -- public ------------------------------------------------------------

    def split(self, strings):
        """Normalized words: tf.RaggedTensor [batch, (words)] of strings."""
        return self.pretokenize(strings).words

    def split_with_offsets(self, strings):
        """Words plus their byte [begin, end) spans in the original strings."""
        pre = self.pretokenize(strings)
        first = pre.word_char_splits[:-1]
        last = pre.word_char_splits[1:] - 1
        begin = tf.RaggedTensor.from_value_rowids(
            tf.gather(pre.char_begin, first), pre.word_rows, nrows=pre.nrows
        )
        end = tf.RaggedTensor.from_value_rowids(
            tf.gather(pre.char_end, last), pre.word_rows, nrows=pre.nrows
        )
        return pre.words, begin, end

    def pretokenize(self, strings, with_offsets=True):
        """The full analysis used by the word-piece backends (see `PreTokenized`).

        With `with_offsets=False` (token ids only), `char_begin` and `char_end`
        are None and the byte positions are never computed: every array that
        follows the characters through cleaning and normalization costs a
        gather per step, and ids do not need these two.
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        strings = tf.reshape(strings, [-1])
        # Invalid UTF-8 becomes U+FFFD, which the cleaning step drops: the same
        # result as the original's `decode("utf-8", "ignore")`.
        if with_offsets:
            codepoints, byte_begin = tf.strings.unicode_decode_with_offsets(
                strings, "UTF-8", errors="replace", replacement_char=0xFFFD
            )
        else:
            codepoints = tf.strings.unicode_decode(
                strings, "UTF-8", errors="replace", replacement_char=0xFFFD
            )
        nrows = tf.cast(codepoints.nrows(), tf.int64)
        cps = codepoints.flat_values
        # Per-character arrays that follow the characters through every step.
        carried = [row_ops.value_rowids(codepoints.row_splits)]
        if with_offsets:
            begin = byte_begin.flat_values
            carried += [begin, self._char_ends(begin, codepoints.row_splits, strings)]

        # _clean_text: removed characters vanish (they do not separate words).
        classes = tf.gather(self._classes, cps)
        removed = tf.equal(classes, ut.REMOVE)

        def drop_removed():
            kept = tf.reshape(tf.where(tf.logical_not(removed)), [-1])
            return [tf.gather(t, kept) for t in [cps, classes] + carried]

        cps, classes, *carried = _general_case_in_graphs(
            lambda: tf.reduce_any(removed), drop_removed, lambda: [cps, classes] + carried)
        if self._normalizes:
            # Whitespace/CJK classes stay those of the source character; the
            # normalized character gets its own class (for punctuation).
            source_classes, cps, *carried = self._normalize_characters(cps, classes, carried)
            classes = tf.gather(self._classes, cps)
        else:
            source_classes = classes
        rows = carried[0]

        # Whitespace and CJK are decided on the cleaned original text (before
        # lower/NFD), punctuation on the normalized text, as in the original.
        is_space = tf.equal(source_classes, ut.SPACE)
        is_single = tf.logical_and(
            tf.logical_not(is_space),
            tf.logical_or(tf.equal(source_classes, ut.CJK), tf.equal(classes, ut.PUNCT)),
        )
        same_row_as_previous = tf.equal(rows, _previous(rows, tf.constant(-1, rows.dtype)))
        previous_space = tf.logical_or(
            _previous(is_space, True), tf.logical_not(same_row_as_previous)
        )
        previous_single = tf.logical_and(_previous(is_single, False), same_row_as_previous)
        starts_word = tf.logical_and(
            tf.logical_not(is_space),
            tf.reduce_any(tf.stack([is_single, previous_single, previous_space]), axis=0),
        )
        in_word = tf.logical_not(is_space)
        cps, starts_word, rows, *offsets = row_ops.masked([cps, starts_word, *carried], in_word)
        begin, end = offsets if with_offsets else (None, None)

        word_first_char = tf.cast(tf.reshape(tf.where(starts_word), [-1]), tf.int64)
        num_chars = tf.shape(cps, out_type=tf.int64)[0]
        word_char_splits = tf.concat([word_first_char, [num_chars]], axis=0)
        word_rows = tf.gather(rows, word_first_char)
        words = tf.strings.unicode_encode(
            tf.RaggedTensor.from_row_splits(cps, word_char_splits, validate=False), "UTF-8"
        )
        words = row_ops.ragged_from_rowids(words, word_rows, nrows)
        return PreTokenized(words, word_char_splits, word_rows, cps, begin, end, nrows)

    # -- steps ---------------------------------------------------------------

    @staticmethod
    def _char_ends(begin, row_splits, strings):
        """Byte end of each character: the next character's start, or the string's end."""
        num = tf.shape(begin, out_type=tf.int64)[0]
        following = tf.concat([begin[1:], tf.zeros([1], begin.dtype)], axis=0)[:num]
        row_lengths = row_splits[1:] - row_splits[:-1]
        nonempty = tf.reshape(tf.where(row_lengths > 0), [-1])
        last_char = tf.gather(row_splits[1:], nonempty) - 1
        string_bytes = tf.cast(tf.gather(tf.strings.length(strings), nonempty), begin.dtype)
        return tf.tensor_scatter_nd_update(following, last_char[:, None], string_bytes)

    def _normalize_characters(self, cps, classes, carried):
        """`token.lower()` and / or NFD + strip Mn, character by character.

        One character may become zero (an accent), one, or several characters
        (a Hangul syllable, 'İ'); the per-character arrays are repeated to
        follow. Only capital sigma depends on context (Final_Sigma), handled apart.
        Returns [classes, normalized code points, *carried], each per output
        character; `carried[0]` is the row of each character.
        """
        rows = carried[0]
        if self.lowercase:
            final_sigma = _general_case_in_graphs(
                lambda: tf.reduce_any(tf.equal(cps, ut.CAPITAL_SIGMA)),
                lambda: self._final_sigma(cps, rows),  # all False without a capital sigma
                lambda: tf.zeros(tf.shape(cps), tf.bool))
        else:
            final_sigma = tf.zeros(tf.shape(cps), tf.bool)
        slot = tf.cast(tf.gather(self._expansion_slots, cps), tf.int32)
        changed = slot >= 0
        slot = tf.maximum(slot, 0)
        start = tf.gather(self._expansion_splits, slot)
        length = tf.where(changed, tf.gather(self._expansion_splits, slot + 1) - start, 1)
        last_value = tf.size(self._expansion_values) - 1

        def one_to_one():
            # The common case (ASCII, most Latin text): no array changes length.
            mapped = tf.gather(self._expansion_values, tf.minimum(start, last_value))
            out = tf.where(changed, mapped, cps)
            out = tf.where(final_sigma, tf.constant(ut.FINAL_SIGMA), out)
            return [classes, out] + carried

        def expand():
            source = tf.repeat(tf.range(tf.size(cps)), length)
            within = tf.range(tf.reduce_sum(length)) - tf.gather(
                _exclusive_cumsum(length), source
            )
            mapped = tf.gather(
                self._expansion_values, tf.minimum(tf.gather(start, source) + within, last_value)
            )
            out = tf.where(tf.gather(changed, source), mapped, tf.gather(cps, source))
            out = tf.where(tf.gather(final_sigma, source), tf.constant(ut.FINAL_SIGMA), out)
            return [tf.gather(classes, source), out] + [tf.gather(t, source) for t in carried]

        return _general_case_in_graphs(lambda: tf.logical_not(tf.reduce_all(tf.equal(length, 1))),
                                       expand, one_to_one)

    def _final_sigma(self, cps, rows):
        """Which capital sigmas `str.lower()` turns into final 'ς' rather than 'σ'.

        Final when preceded by a cased letter and not followed by one, skipping
        case-ignorable characters on both sides (CPython `handle_capital_sigma`).
        """
        sigma_at = tf.reshape(tf.where(tf.equal(cps, ut.CAPITAL_SIGMA)), [-1])
        context = _lookup_runs(self._sigma_starts, self._sigma_context, cps)
        deciding = tf.cast(tf.reshape(tf.where(context != ut.SIGMA_IGNORABLE), [-1]), tf.int64)
        count = tf.size(deciding, out_type=tf.int64)
        # Nearest deciding character before / after each sigma, within its row.
        before = tf.searchsorted(deciding, sigma_at, side="left", out_type=tf.int64) - 1
        after = tf.searchsorted(deciding, sigma_at, side="right", out_type=tf.int64)
        before_pos = tf.gather(deciding, tf.maximum(before, 0))
        after_pos = tf.gather(deciding, tf.minimum(after, tf.maximum(count - 1, 0)))
        sigma_rows = tf.gather(rows, sigma_at)

        def cased_at(valid, pos):
            pos = tf.where(valid, pos, tf.zeros_like(pos))
            return tf.logical_and(
                valid,
                tf.logical_and(
                    tf.equal(tf.gather(rows, pos), sigma_rows),
                    tf.equal(tf.gather(context, pos), ut.SIGMA_CASED),
                ),
            )

        cased_before = cased_at(before >= 0, before_pos)
        cased_after = cased_at(after < count, after_pos)
        final = tf.logical_and(cased_before, tf.logical_not(cased_after))
        return tf.scatter_nd(sigma_at[:, None], final, tf.shape(cps, out_type=tf.int64))
