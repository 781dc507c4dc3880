"""UTF-8 byte offsets (what the tokenizer's `*_with_offsets` return) to code point offsets (what Python indexes)."""

import numpy as np


def byte_to_char_offsets(text):
    """Array mapping each UTF-8 byte offset of `text`, and its end, to a code point offset.

    `text[table[b]:table[e]]` is the text of the byte span `[b, e)`. Offsets
    inside a multi-byte character map to -1: a token boundary there would be a
    tokenizer bug, for the caller to catch.

    Example:
        >>> byte_to_char_offsets("aé!").tolist()  # "é" is two bytes
        [0, 1, -1, 2, 3]

    Args:
        text: a `str`.

    Returns:
        int32 array of `len(text.encode("utf-8")) + 1` entries.
    """
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    # Continuation bytes look like 0b10xxxxxx; every other byte starts a character.
    starts = (data & 0xC0) != 0x80
    char_index = np.cumsum(starts) - 1
    return np.append(np.where(starts, char_index, -1), len(text)).astype(np.int32)
