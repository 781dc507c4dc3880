"""Which texts hold no token: the one rule for "empty text", in the API, the readers and the export.

BERT's pre-tokenizer drops U+0000, U+FFFD and control / format characters (Cc, Cf other than
tab, newline and carriage return), and splits on whitespace (space, tab, newline, carriage
return, Zs, and the line / paragraph separators U+2028 / U+2029, where `str.split()` splits). Every other character yields a token (a word piece, a punctuation mark, or
[UNK]), but for the combining marks of an uncased model (below). A text made only of dropped
and space characters — "", "   ", "\\x00\\u200b" — reaches the model as `[CLS] [SEP]`:
training data and `fit` refuse it (an example with no text is a data bug); `predict` and the
exported signatures answer it as that empty input and flag it (`empty`).

That rule holds for every tokenizer. One that strips accents (the uncased rule: NFD, then drop
the Mn marks) also erases combining marks, so "\\u0301\\u0301" has no token for an uncased model
though a cased one reads it (a piece or [UNK]). `texts_without_token` asks the model's own
tokenizer: the rule that `fit` and `predict` apply, where the tokenizer is known.

>>> has_no_token("\\x00\\u200b \\t"), has_no_token(""), has_no_token("\\u2028"), has_no_token("ok")
(True, True, True, False)
"""

import functools
import re

import numpy as np


def has_no_token(text: str) -> bool:
    """True when BERT's pre-tokenizer keeps no character of `text` (see the module docstring)."""
    return _tokenless_text().fullmatch(text) is not None


def texts_without_token(texts, tokenizer=None):
    """The indices of `texts` (a list of `str`) of which `tokenizer` yields no word piece.

    The tokenizer decides. A text `has_no_token` holds none for any tokenizer; a tokenizer that
    strips accents also erases the characters its normalization maps to nothing (combining
    marks), so a text made only of those and of dropped or space characters is tokenized (all
    such texts in one call) and kept when no piece is left. Every other text leaves the regex
    at its first letter: on ordinary data the check costs what `has_no_token` costs, and no
    text is tokenized twice. Without a tokenizer (a data reader, before the model is known):
    `has_no_token`'s rule.

    Example:

    >>> from pipelines import BertTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"]
    >>> texts = ["a", " ", "\\u0301\\u0301", "a\\u0301"]
    >>> texts_without_token(texts, BertTokenizer(vocabulary=vocab, lowercase=True))
    [1, 2]
    >>> texts_without_token(texts, BertTokenizer(vocabulary=vocab, lowercase=False))
    [1]
    """
    empty = [index for index, text in enumerate(texts) if has_no_token(text)]
    if tokenizer is None or not tokenizer.strip_accents:
        return empty
    erasable = _erasable_text(bool(tokenizer.lowercase))
    candidates = [index for index, text in enumerate(texts) if erasable.fullmatch(text) and not has_no_token(text)]
    if not candidates:
        return empty
    pieces = tokenizer.tokenize([texts[index] for index in candidates]).row_lengths().numpy()
    return sorted(empty + [index for index, count in zip(candidates, pieces) if count == 0])


@functools.lru_cache(maxsize=None)
def _tokenless_text():
    """A regex of the characters the pre-tokenizer drops or splits on, from its own table."""
    from pipelines.tokenizer import unicode_tables as ut

    table = ut.class_table()
    return _text_of(np.isin(table, (ut.REMOVE, ut.SPACE)))


@functools.lru_cache(maxsize=None)
def _erasable_text(lowercase):
    """A regex of the texts an accent-stripping tokenizer may read no piece of: the characters the
    pre-tokenizer drops or splits on, and those its normalization maps to nothing (its own tables)."""
    from pipelines.tokenizer import unicode_tables as ut

    table = ut.class_table()
    slots, splits, _ = ut.character_expansions(lowercase=lowercase, strip_accents=True)
    changed = slots >= 0
    to_nothing = np.zeros(len(slots), bool)
    to_nothing[changed] = splits[slots[changed] + 1] == splits[slots[changed]]
    return _text_of(np.isin(table, (ut.REMOVE, ut.SPACE)) | to_nothing)


def _text_of(characters):
    """A regex matching the texts made only of the code points where `characters` (bool
    `[0x110000]`) is True (surrogates left out: a `str` of one cannot be encoded)."""
    dropped = characters.astype(np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], dropped, [0]])))
    ranges = "".join(
        re.escape(chr(begin)) + ("" if end - 1 == begin else "-" + re.escape(chr(end - 1)))
        for begin, end in zip(edges[::2], edges[1::2])
        if not 0xD800 <= begin <= 0xDFFF
    )
    return re.compile(f"[{ranges}]*")
