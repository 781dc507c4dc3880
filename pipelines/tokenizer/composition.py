"""Text composed before tokenization: the opt-in NFC step, and the note on decomposed Hangul.

Hangul can arrive decomposed (NFD: each syllable as two or three conjoining jamo, U+1100-U+11FF),
as macOS file names, HFS+ copies and some web scrapes give it. Korean vocabularies hold the
composed syllables, so such text reads as [UNK] with `strip_accents=False`, silently, as it does
in HF's `BertTokenizer` / `BertTokenizerFast` (neither composes text). Two answers:

- `BertTokenizer(..., unicode_normalization="NFC")` composes every text first, in the graph
  (TF-Text's `NormalizeUTF8WithOffsetsMap`, which stock TF Serving 2.20 / 2.21 bundle), offsets
  still into the original bytes (`NfcStep`). Off by default: the original BERT and HF do not
  compose.
- without it, `DecomposedHangulNote` warns once per tokenizer when a text holds conjoining jamo
  that the vocabulary lacks while it holds the syllable they compose, naming both fixes.

Example:

>>> note = DecomposedHangulNote(["[UNK]", "오늘", "##은"])
>>> note.first_decomposed(["plain", "\\u110b\\u1169\\u1102\\u1173\\u11af"])
(1, '오늘')
>>> checked_unicode_normalization("nfc"), checked_unicode_normalization("none")
('NFC', None)
"""

import re
import warnings

# The forms `unicode_normalization=` takes (None: text read as given, the original's rule).
UNICODE_NORMALIZATIONS = ("NFC",)
# What turns it off explicitly (`--unicode-normalization none`, or over a vocabulary that records NFC).
NO_UNICODE_NORMALIZATION = "none"

# A modern leading consonant + vowel (+ trailing consonant): what NFC composes into one syllable.
_DECOMPOSED_SYLLABLE = re.compile("([\u1100-\u1112])([\u1161-\u1175])([\u11a8-\u11c2]?)")
_CONJOINING_UTF8 = re.compile(b"\xe1[\x84-\x87]")  # U+1100-U+11FF in UTF-8
# The same block as an RE2 pattern, for the graph: a text holding one (`DecomposedHangulNote.stream_checked`).
_CONJOINING_RE2 = "(?s).*[\\x{1100}-\\x{11FF}].*"


def checked_unicode_normalization(value, where="unicode_normalization"):
    """`"NFC"` or None, from what a caller or a file says (`"nfc"`, `"none"` and None too).

    Raises:
        ValueError: any other value; the message names `where` and the choices.
    """
    if value is None or (isinstance(value, str) and value.lower() == NO_UNICODE_NORMALIZATION):
        return None
    if isinstance(value, str) and value.upper() in UNICODE_NORMALIZATIONS:
        return value.upper()
    raise ValueError(f"{where}: {value!r} is not a Unicode normalization this tokenizer applies; choose "
                     f"{', '.join(UNICODE_NORMALIZATIONS)} or {NO_UNICODE_NORMALIZATION!r} (text read as given)")


def _compose(leading, vowel, trailing):
    code = 0xAC00 + ((ord(leading) - 0x1100) * 21 + ord(vowel) - 0x1161) * 28
    return chr(code + (ord(trailing) - 0x11A7 if trailing else 0))


class DecomposedHangulNote:
    """Warns once when texts hold Hangul the vocabulary can only read composed.

    Args:
        tokens: the vocabulary's tokens (`##` pieces count by their characters).
    """

    def __init__(self, tokens):
        self._tokens = tokens
        self._characters = None  # read from the tokens when a text first holds jamo
        self.warned = False

    @property
    def characters(self):
        """The characters of the vocabulary's tokens."""
        if self._characters is None:
            characters = set()
            for token in self._tokens:
                characters.update(token[2:] if token.startswith("##") else token)
            self._characters = characters
        return self._characters

    def first_decomposed(self, texts):
        """`(index, syllable)` of the first text holding a decomposed syllable that the vocabulary holds
        composed and not as its jamo, or None. `texts`: strings or UTF-8 bytes."""
        for index, text in enumerate(texts):
            if isinstance(text, bytes):
                if not _CONJOINING_UTF8.search(text):
                    continue
                text = text.decode("utf-8", "replace")
            for match in _DECOMPOSED_SYLLABLE.finditer(text):
                syllable = _compose(*match.groups())
                if syllable in self.characters and match.group(1) not in self.characters:
                    return index, self._word_at(text, match.start(), match.end())
        return None

    @staticmethod
    def _word_at(text, start, end):
        """The composed whitespace word around `text[start:end]` (what the warning shows)."""
        while start > 0 and not text[start - 1].isspace():
            start -= 1
        while end < len(text) and not text[end].isspace():
            end += 1
        word = text[start:end][:20]
        return _DECOMPOSED_SYLLABLE.sub(lambda m: _compose(*m.groups()), word)

    def check(self, texts, where="text", stacklevel=3, first=0, names=None):
        """Warns (once for the life of this note) when `first_decomposed(texts)` finds one, naming it
        `where[first + index]` (`first`: the position of `texts[0]` in a longer stream), or `names[index]`
        when given (one name per text: `"train.json: question 'q1'"`, `"swag.csv:2"`)."""
        if self.warned:
            return
        found = self.first_decomposed(texts)
        if found is None:
            return
        self.warned = True
        index, word = found
        name = names[index] if names is not None else f"{where}[{index + first}]"
        warnings.warn(
            f"{name} holds Hangul in decomposed form (NFD conjoining jamo, as macOS file names and some "
            f"web pages write it: {word!r} composed); this vocabulary holds the composed syllables, not the jamo, "
            "so such words read as [UNK]. Compose the text: unicodedata.normalize(\"NFC\", text); or build the "
            "tokenizer or fine-tune the model with unicode_normalization=\"NFC\" (bert-keras finetune, tokenize, "
            "pretrain, vocab: --unicode-normalization NFC), which composes every text before tokenizing, in its "
            "export too (a fine-tuned model keeps the setting it was trained with). (Warned once per tokenizer.)",
            stacklevel=stacklevel)

    def stream_checked(self, texts, position, where="text"):
        """`texts` (a string tensor of one element of a `tf.data` stream, any shape) as they are, once
        `check` has run on them, named `where[position]`, when they hold a conjoining jamo (tested in the
        graph; the host is called only for such an element, until the note has warned). For a stream
        that is never read through first (an infinite dataset `fit` takes with `steps_per_epoch`),
        which `check` cannot see whole."""
        import tensorflow as tf

        if self.warned:
            return texts
        values = tf.reshape(texts, [-1])

        def check_on_host(at, strings):
            if not self.warned:
                self.check(strings.numpy().tolist(), where, stacklevel=2, first=int(at))
            return True

        holds_jamo = tf.reduce_any(tf.strings.regex_full_match(values, _CONJOINING_RE2))
        checked = tf.cond(holds_jamo, lambda: tf.py_function(check_on_host, [position, values], tf.bool),
                          lambda: tf.constant(True))
        with tf.control_dependencies([checked]):
            return tf.identity(texts)


class NfcStep:
    """NFC in the graph, with the way back: `compose(strings)` gives the composed strings and a map,
    `source_offsets(map, offsets)` turns byte offsets into the composed strings into byte offsets
    into the original ones. Invalid UTF-8 is left as it is (identity map).

    TF-Text's `FindSourceOffsets` fails on a row with no offset and crashes the process on an
    empty batch: every call adds one empty string and one query of its own, and asks one offset a
    row (each offset's row map gathered), so neither ever reaches the op.
    """

    def __init__(self, form="NFC"):
        self.form = form

    def compose(self, strings):
        """`(composed [n], maps [n + 1])` of a 1-D batch of strings."""
        import tensorflow as tf

        from pipelines.tokenizer import tf_text_kernels

        composed, maps = tf_text_kernels.normalize_utf8_with_offsets_map(tf.concat([strings, [""]], 0), self.form)
        return composed[:-1], maps

    @staticmethod
    def source_offsets(maps, offsets):
        """`offsets` (ragged int64 `[n, (k)]`, into the composed strings) in the original strings."""
        import tensorflow as tf

        from pipelines import row_ops
        from pipelines.tokenizer import tf_text_kernels

        last = tf.shape(maps, out_type=tf.int64)[0] - 1
        rows = tf.concat([row_ops.value_rowids(offsets.row_splits), [last]], 0)
        values = tf.concat([offsets.flat_values, tf.zeros([1], offsets.flat_values.dtype)], 0)
        found = tf_text_kernels.find_source_offsets(tf.gather(maps, rows), tf.cast(values, tf.int64))
        return offsets.with_flat_values(tf.cast(found[:-1], offsets.flat_values.dtype))
