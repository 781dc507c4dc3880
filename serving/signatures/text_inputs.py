"""Raw text in a serving graph: validate, cut, tokenize, pack, and map offsets back.

Every text signature starts the same way, inside the SavedModel so that a
stock TF Serving answers bad requests with INVALID_ARGUMENT itself:

1. `validate`: each string must be valid UTF-8 (else
   `InvalidArgumentError: input 'text': invalid UTF-8 at row 1`). The check
   transcodes the string and compares; it is O(bytes) and cheap even for 1 MB.
   A text with no token (empty, only whitespace, or only characters BERT's cleaning
   drops: control and format characters such as U+200B) is NOT an error: it is
   tokenized to zero pieces and packed `[CLS] [SEP]` (the other segment as usual in a
   pair), so the model answers it as `predict` does (`bert_keras.tasks`: the model's
   answer to an empty input), and one such text never fails its neighbours. Every
   raw-text signature flags those rows with its `empty` output (bool `[B]`, `TextInputs.empty`:
   True where all of the row's texts had no token), as `predict_rows` marks them `"empty": true`.
2. Cut: a model reads at most `seq_length` tokens, so only the first
   `max_tokens * chars_per_token` code points (default 64 per token: 8,192 for
   128 tokens) after any leading whitespace are tokenized. A 1 MB string then costs milliseconds, not the
   ~1-2 s of tokenizing all of it. The result is exact whenever that prefix
   holds the tokens the model reads, i.e. for any real text (a token covers
   one word piece; 64 characters per token would need a 200-character word or
   long whitespace runs between every word).
3. `tokenize` / `tokenize_with_offsets`: the exported `pipelines.BertTokenizer`
   (a row with no token is a row of zero pieces).
4. `pack`: `pipelines.BertPacker` padding to the longest row of the batch
   (rounded up to 8, at most `seq_length`): padding never changes a BERT output,
   and short requests run on short tensors.
5. `char_offsets`: the tokenizer's BYTE offsets to CODE POINT offsets (what
   Python's `str` slicing, JSON clients and SQuAD use).

Example (inside a `tf.function` of a serving module):

    >>> import tensorflow as tf
    >>> from pipelines import BertTokenizer
    >>> text_inputs = TextInputs(BertTokenizer("vocab.txt"), seq_length=128)
    >>> texts = tf.constant(["Hello world", "Héllo wörld"])
    >>> ids = text_inputs.tokenize(tf.constant(["Hello world"]), "text")
    >>> x = text_inputs.pack([ids])                       # int32 token_ids/segment_ids/padding_mask
    >>> cut, ids, begin, end = text_inputs.tokenize_with_offsets(texts, "text")
    >>> begin.to_list()                                    # UTF-8 byte offsets: é and ö take 2
    [[0, 6], [0, 7]]
    >>> text_inputs.char_offsets(cut, begin.to_tensor(-1)).numpy().tolist()   # code points
    [[0, 6], [0, 6]]

Args:
    tokenizer: a `pipelines.BertTokenizer` (either backend).
    seq_length: the packed length, [CLS]/[SEP] included.
    chars_per_token: code points kept per token the model can read (see 2.).
"""

import tensorflow as tf

from pipelines import BertPacker
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES

# Enough for any natural text: the longest English words are ~30 characters
# and WordPiece splits every word into at least one token.
DEFAULT_CHARS_PER_TOKEN = 64
# In RE2 (whose `\s` is ASCII only), what BERT's pre-tokenizer splits on (tab, newline, carriage
# return, Zs, the line and paragraph separators U+2028 / U+2029) or drops (the other controls of
# `str.isspace`): never a token, as `pipelines.tokenizer.tokenless` says.
WHITESPACE = r"[\t\n\x{0b}\f\r\x{1c}-\x{1f}\x{85}\p{Zs}\x{2028}\x{2029}]"


class TextInputs(tf.Module):
    """Validation, cutting, tokenization and packing of raw text inputs (see module docstring)."""

    def __init__(self, tokenizer, seq_length, *, chars_per_token=DEFAULT_CHARS_PER_TOKEN,
                 name="text_inputs"):
        super().__init__(name=name)
        self.tokenizer = tokenizer
        self.seq_length = int(seq_length)
        self.chars_per_token = int(chars_per_token)
        special = tokenizer.special_tokens
        self.cls_id, self.sep_id, self.pad_id = special.cls, special.sep, special.pad
        self.packer = BertPacker(self.seq_length, cls_id=special.cls, sep_id=special.sep,
                                 pad_id=special.pad, pad_to="longest")
        # Word pieces that continue a word ("##ing"): the tokenizer's words are
        # the maximal runs that start with a non-"##" piece.
        self._is_continuation = tf.constant(
            [token.startswith("##") for token in tokenizer.vocabulary], tf.bool)

    # -- checks ----------------------------------------------------------------

    def validate(self, strings, name, *, max_tokens=None):
        """`strings` after the UTF-8 check, cut to `max_tokens * chars_per_token` code points.

        Args:
            strings: tf.string tensor of any shape.
            name: the signature input's name, for the error message.
            max_tokens: tokens the model can read from this input (default
                `seq_length`).
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        transcoded = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace",
                                                  replacement_char=0xFFFD)
        check = input_check(tf.equal(transcoded, strings), f"input '{name}': invalid UTF-8")
        with tf.control_dependencies([check]):
            # Leading whitespace does not count against the cut, so a text after a long run of
            # spaces is still read (offsets stay those of the input: the cut keeps the prefix).
            text = tf.strings.regex_replace(strings, f"^{WHITESPACE}+", "", replace_global=False)
            leading = (tf.strings.length(strings, unit="UTF8_CHAR")
                       - tf.strings.length(text, unit="UTF8_CHAR"))
            max_chars = (max_tokens or self.seq_length) * self.chars_per_token
            return tf.strings.substr(strings, tf.zeros_like(leading), leading + max_chars, unit="UTF8_CHAR")

    @staticmethod
    def empty(segments):
        """Bool `[batch]`: rows where every one of `segments` (ragged ids `[batch, (pieces)]`,
        one per text input) has no piece: the signatures' `empty` output."""
        return tf.reduce_all(tf.stack([segment.row_lengths() == 0 for segment in segments]), axis=0)

    # -- tokenization ------------------------------------------------------------

    def tokenize(self, strings, name, *, max_tokens=None):
        """Ragged int64 ids `[batch, (tokens)]` of a validated `[batch]` string input."""
        return self.tokenizer.tokenize(self.validate(strings, name, max_tokens=max_tokens))

    def tokenize_with_offsets(self, strings, name, *, max_tokens=None):
        """(strings_cut, ids, begin, end): ragged ids with BYTE offsets into the input.

        The cut strings are returned too: their offsets (and `char_offsets`)
        refer to them, and they are a prefix of the input.
        """
        strings = self.validate(strings, name, max_tokens=max_tokens)
        ids, begin, end = self.tokenizer.tokenize_with_offsets(strings)
        return strings, ids, begin, end

    def windows(self, strings, name, *, max_length, stride):
        """Single texts as packed windows of their word pieces (`pipelines.windowing`).

        Returns `(inputs, document, truncated, empty)`: packed int32 `[W, width]` inputs of every
        window of the batch (`[CLS] window [SEP]`, windows of `seq_length - 2` pieces, `stride`
        apart, over each text's first `max_length` pieces), the text (row) of each window, and
        bool `[batch]`: texts with pieces (or characters past the `max_length *
        chars_per_token` cut) not read, and texts with no piece (one window `[CLS] [SEP]`,
        as `pipelines.windowing` gives every text at least one). A text has at most
        `pipelines.windowing.num_windows(max_length, ...)` windows: the bound is `max_length`,
        fixed at export, so a request's size is bounded before the model runs.
        """
        from pipelines.windowing import ragged_windows

        ids = self.tokenize(strings, name, max_tokens=max_length)
        windows, document, truncated = ragged_windows(ids, window=self.seq_length - 2, stride=stride,
                                                      max_length=max_length)
        cut = self.was_cut(strings, max_length)
        return self.pack([windows]), document, tf.logical_or(truncated, cut), self.empty([ids])

    def was_cut(self, strings, max_tokens):
        """Bool: strings longer than `validate`'s cut (`max_tokens * chars_per_token` code points)."""
        text = tf.strings.regex_replace(strings, f"^{WHITESPACE}+", "", replace_global=False)
        return tf.strings.length(text, unit="UTF8_CHAR") > max_tokens * self.chars_per_token

    def truncated(self, segments, strings):
        """Bool `[batch]`: rows the packer cuts (pieces past `seq_length` less the special
        tokens), or whose text was cut before tokenization (`validate`)."""
        pieces = tf.add_n([segment.row_lengths() for segment in segments])
        special = len(segments) + 1
        cut = tf.reduce_any(tf.stack([self.was_cut(s, self.seq_length) for s in strings]), axis=0)
        return tf.logical_or(pieces > self.seq_length - special, cut)

    def word_starts(self, ids):
        """Bool ragged `[batch, (tokens)]`: True where a piece starts a new word (not "##...")."""
        return tf.ragged.map_flat_values(
            lambda flat: tf.logical_not(tf.gather(self._is_continuation, flat)), ids)

    def pack(self, segments):
        """`{"token_ids", "segment_ids", "padding_mask"}` int32 `[batch, width]` of 1 or 2 segments."""
        return self.packer(tuple(segments))

    # -- offsets ---------------------------------------------------------------

    @staticmethod
    def char_offsets(strings, byte_offsets):
        """Code point offsets of `byte_offsets` (int `[batch, n]`, -1 = none) into `strings` `[batch]`.

        Offsets must fall on character boundaries (the tokenizer's always do).
        """
        byte_offsets = tf.cast(byte_offsets, tf.int64)
        _, starts = tf.strings.unicode_decode_with_offsets(strings, "UTF-8")
        # searchsorted reads [rows, columns] as [-1, columns], which a tensor of no element and no
        # column cannot be (a batch of no rows, of empty strings or with no offset): both get one
        # more column, past the last character (never before an offset) and an offset dropped after.
        column = tf.ones([tf.shape(strings, out_type=tf.int64)[0], 1], tf.int64)
        starts = tf.concat([starts.to_tensor(default_value=tf.int64.max), column * tf.int64.max], axis=1)
        # Characters starting before the offset = the offset's character index.
        chars = tf.searchsorted(starts, tf.concat([tf.maximum(byte_offsets, 0), column * 0], axis=1),
                                side="left", out_type=tf.int64)[:, :-1]
        return tf.where(byte_offsets < 0, tf.constant(-1, tf.int64), chars)


def window_reading(finetuned):
    """`(stride, max_length)` when a model reads single texts through `pipelines.windowing`
    (its settings' `max_length`, `window_options`), else None (one packed window).

    A `max_length` below one window is read that way too: `predict` reads a text's first
    `max_length` pieces (one window of them), where the plain packing would read
    `seq_length - 2`. Only `max_length` equal to the window reads the same either way.
    """
    from pipelines.windowing import window_options

    if finetuned.settings.get("text_pair") or finetuned.settings.get("max_length") is None:
        return None
    window, stride, max_length = window_options(finetuned.seq_length, finetuned.settings["max_length"],
                                                finetuned.settings.get("stride"))
    return (stride, max_length) if max_length != window else None


def python_windows(finetuned, texts):
    """The Python side of `TextInputs.windows` (export checks): `(inputs, document, truncated, empty)`
    with `pipelines.windowing.Windows` over the tokenizer's pieces of each text."""
    import numpy as np

    from pipelines.windowing import Windows

    stride, max_length = window_reading(finetuned)
    tokenizer = finetuned.tokenizer()
    ids = tokenizer.tokenize(tf.constant(list(texts)))
    windows = Windows.of(ids.row_lengths().numpy(), window=finetuned.seq_length - 2, stride=stride,
                         max_length=max_length)
    taken = windows.take(ids.flat_values.numpy(), pad=-1)
    pieces = tf.ragged.constant([[int(i) for i in row if i >= 0] for row in taken], tf.int64,
                                row_splits_dtype=tf.int64)
    inputs = finetuned.packer(tokenizer)((pieces,))
    cut = np.array([len(t.lstrip()) > max_length * DEFAULT_CHARS_PER_TOKEN for t in texts])
    return inputs, windows.document, windows.truncated | cut, ids.row_lengths().numpy() == 0


def input_check(ok, message):
    """An op that fails with InvalidArgumentError "<message> at row <i>" unless all of `ok` is True.

    An `Assert` op (in every TF Serving release), not `CheckNumerics` on a NaN flag, which
    appended " : Tensor had NaN values" to every message. `Assert` prints its message in
    brackets and C-escapes it: a stock TF Serving client reads
    `assertion failed: [input \\'text\\': invalid UTF-8 at row] [1]`; this project's server
    (`serving.server.errors`) turns it back into "input 'text': invalid UTF-8 at row 1".

    Args:
        ok: bool tensor; rank 0, or rows along its first axis (a row fails when any of its
            entries is False).
        message: what is wrong, naming the input; " at row" and the first failing row
            (counted from 0 in the request's batch) are appended for rank >= 1.
    """
    ok = tf.convert_to_tensor(ok, tf.bool)
    if ok.shape.rank == 0:
        return tf.raw_ops.Assert(condition=ok, data=[tf.constant(message)], summarize=1)
    rows = tf.reduce_all(tf.reshape(ok, [tf.shape(ok)[0], -1]), axis=1)
    # The first failing row (int32 max when none fails: then it is never printed); empty batches pass.
    first_bad = tf.reduce_min(tf.where(rows, tf.int32.max, tf.range(tf.size(rows), dtype=tf.int32)))
    return tf.raw_ops.Assert(condition=tf.reduce_all(rows), data=[tf.constant(f"{message} at row"), first_bad],
                             summarize=1)


def string_spec(name, rank=1):
    """`tf.TensorSpec([None] * rank, tf.string, name=name)`: a raw text signature input."""
    return tf.TensorSpec([None] * rank, tf.string, name=name)


def ids_specs(rank=2):
    """The `token_ids` signature's int32 inputs, `[None] * rank` each."""
    return {key: tf.TensorSpec([None] * rank, tf.int32, name=key)
            for key in ENCODER_INPUT_NAMES}


def python_token_spans(tokenizer, text):
    """(ids, char_begin, char_end) numpy arrays of one `str`, eagerly: the Python path's offsets.

    The same code point offsets as `TextInputs.char_offsets`, computed without
    the graph: for the reference outputs the export is checked against.
    """
    from pipelines.tokenizer import byte_to_char_offsets

    ids, begin, end = (t.numpy() for t in tokenizer.tokenize_with_offsets(tf.constant(text)))
    char_of_byte = byte_to_char_offsets(text)
    return ids, char_of_byte[begin], char_of_byte[end]
