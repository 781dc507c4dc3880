"""Which texts hold no token: the one rule for "empty text", in the API, the readers and the export.

BERT's pre-tokenizer drops U+0000, U+FFFD and control / format characters (Cc, Cf
other than tab, newline and carriage return), and splits on whitespace (space, tab,
newline, carriage return, Zs). Every other character yields a token (a word piece, a
punctuation mark, or [UNK]). A text made only of dropped and space characters — "",
"   ", "\\x00\\u200b" — reaches the model as `[CLS] [SEP]`: training data and `fit` refuse it (an
example with no text is a data bug); `predict` and the exported signatures answer it as that
empty input and flag it (`empty`).

>>> has_no_token("\\x00\\u200b \\t"), has_no_token(""), has_no_token("\\u2028"), has_no_token("ok")
(True, True, False, False)
"""

import functools
import re

import numpy as np


def has_no_token(text: str) -> bool:
    """True when BERT's pre-tokenizer keeps no character of `text` (see the module docstring)."""
    return _tokenless_text().fullmatch(text) is not None


@functools.lru_cache(maxsize=None)
def _tokenless_text():
    """A regex of the characters the pre-tokenizer drops or splits on, from its own table."""
    from pipelines.tokenizer import unicode_tables as ut

    table = ut.class_table()
    dropped = np.isin(table, (ut.REMOVE, ut.SPACE)).astype(np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], dropped, [0]])))
    ranges = "".join(
        re.escape(chr(begin)) + ("" if end - 1 == begin else "-" + re.escape(chr(end - 1)))
        for begin, end in zip(edges[::2], edges[1::2])
        if not 0xD800 <= begin <= 0xDFFF
    )
    return re.compile(f"[{ranges}]*")
