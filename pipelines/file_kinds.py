"""What a file that should be text is, from its first bytes: compressed (`compressed_format`), or
UTF-16 / UTF-32 (`wide_unicode_encoding`, with the `iconv_advice` that saves it as UTF-8);
`packed_or_wide` says either as the refusal of a one-kind file (a vocabulary, a label file); and of
a string that should be text, whether it holds half of a UTF-16 surrogate pair (`lone_surrogate`:
no text a file or TensorFlow can hold).

Plain Python, below every reader: the data files (`pipelines.datasets.text_files`), label files
(`pipelines.label_names`), vocabularies and corpora name such a file the same way.
"""

import codecs

# Leading bytes of the compressed files and archives a data file is mistaken for (`train.tsv.gz`, a
# spreadsheet saved as .xlsx: a zip), and what to do instead: none is read, none is text.
_COMPRESSED_MAGIC = ((b"\x1f\x8b", "gzip-compressed", "decompress it (gunzip -k FILE)"),
                     (b"PK\x03\x04", "a zip archive (or an .xlsx / .ods spreadsheet)",
                      "unzip it, or save the sheet as CSV UTF-8"),
                     (b"BZh", "bzip2-compressed", "decompress it (bunzip2 -k FILE)"),
                     (b"\xfd7zXZ\x00", "xz-compressed", "decompress it (unxz -k FILE)"),
                     (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it (unzstd FILE)"))


def compressed_format(data):
    """`(what the file is, what to do)` for bytes of a compressed file or archive, else None.

    Example:
        >>> import gzip
        >>> compressed_format(gzip.compress(b"text,label\\n"))[0], compressed_format(b"text,label\\n")
        ('gzip-compressed', None)
    """
    for magic, what, advice in _COMPRESSED_MAGIC:
        if data.startswith(magic):
            return what, advice
    return None


# Byte order marks of the Unicode encodings that are not ASCII-compatible (UTF-32 first: UTF-32-LE's
# starts with UTF-16-LE's).
_WIDE_BYTE_ORDER_MARKS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                          (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
# Without a mark: which of the four byte positions (offset mod 4) are mostly NUL, as in text of Latin
# letters in these encodings (and Hangul's in UTF-32); UTF-8 text (and a code page's) has no NUL bytes.
_NUL_POSITIONS = {(0, 1, 0, 1): "UTF-16LE", (1, 0, 1, 0): "UTF-16BE",
                  (0, 1, 1, 1): "UTF-32LE", (0, 0, 1, 1): "UTF-32LE",
                  (1, 1, 1, 0): "UTF-32BE", (1, 1, 0, 0): "UTF-32BE"}


def wide_unicode_encoding(data):
    """The encoding (iconv's name) of bytes that are UTF-16 or UTF-32 text, else None.

    Told by the byte order mark (`"UTF-16"`, `"UTF-32"`: iconv and Python read the byte order from it),
    or, without one, by the NUL bytes at every second or fourth byte of the first 4 KiB
    (`"UTF-16LE"`, `"UTF-16BE"`, `"UTF-32LE"`, `"UTF-32BE"`), as Windows' "Unicode" exports are.

    Example:
        >>> wide_unicode_encoding("text,label\\n".encode("utf-16"))
        'UTF-16'
        >>> wide_unicode_encoding("text,label\\n".encode("utf-16-le"))
        'UTF-16LE'
        >>> wide_unicode_encoding(b"text,label\\n") is None
        True
    """
    for mark, name in _WIDE_BYTE_ORDER_MARKS:
        if data.startswith(mark):
            return name
    sample = data[:4096]
    sample = sample[:len(sample) - len(sample) % 4]
    if not sample:
        return None
    quarter = len(sample) // 4
    return _NUL_POSITIONS.get(tuple(int(2 * sample[i::4].count(0) > quarter) for i in range(4)))


def _wide_unicode_evidence(data):
    """What `wide_unicode_encoding` saw: the byte order mark, or the NUL bytes."""
    for mark, _ in _WIDE_BYTE_ORDER_MARKS:
        if data.startswith(mark):
            return f"byte order mark {mark.hex(' ')}"
    return "NUL bytes between its characters"


def iconv_advice(wide_encoding):
    """The iconv command that saves a file in `wide_encoding` (a `wide_unicode_encoding`) as UTF-8."""
    return f"iconv -f {wide_encoding} -t UTF-8 FILE > FILE.utf8"


def packed_or_wide(data, path, *, kind, kinds):
    """The message refusing the bytes `data` of the file `path` as `kind` (`"a vocab.txt"`), one of
    `kinds` (`"vocabulary files"`, all UTF-8), when they are compressed or UTF-16 / UTF-32; else None.

    >>> packed_or_wide(b"\\x1f\\x8b\\x08", "labels.txt.gz", kind="a label file", kinds="label files")
    'labels.txt.gz: the file is gzip-compressed, not a label file; decompress it (gunzip -k FILE) and give the file inside.'
    >>> packed_or_wide(b"[PAD]\\n", "vocab.txt", kind="a vocab.txt", kinds="vocabulary files") is None
    True
    """
    packed = compressed_format(data)
    if packed:
        return f"{path}: the file is {packed[0]}, not {kind}; {packed[1]} and give the file inside."
    wide = wide_unicode_encoding(data)
    if wide:
        return f"{path}: the file is {wide}; {kinds} are UTF-8: save it as UTF-8 ({iconv_advice(wide)})."
    return None


def lone_surrogate(where, field, text, *, origin="json"):
    r"""What is wrong with a string that holds half of a UTF-16 surrogate pair, or None.

    Read from JSON (`origin="json"`), it is an escape such as `"\ud83d"` without its partner (a
    JSON writer that cut an emoji in two). Given from Python (`origin="python"`, `field` None), it
    is text decoded with `errors="surrogateescape"` (`os.fsdecode`, some file readers) or cut in
    two by UTF-16 code.

    Such a string is no Unicode text: TensorFlow refused it far from the file ("Error converting
    unicode string while converting Python sequence to Tensor"), and a label of one could not be
    written to labels.txt. A file's bytes never hold one (they are decoded as UTF-8); a JSON escape does.

    Example:
        >>> print(lone_surrogate("f.jsonl:2", "text", "good \ud83d film"))
        f.jsonl:2: field 'text': character 6 is \ud83d, half of a UTF-16 surrogate pair (a JSON escape of no character: an emoji cut in two?); write the character itself, or both escapes of its pair
        >>> print(lone_surrogate("x[1]", None, "caf\udce9", origin="python"))
        x[1]: character 4 is \udce9, half of a UTF-16 surrogate pair, no Unicode character (bytes decoded with errors="surrogateescape", or an emoji cut in two?); remove it, or decode the bytes as UTF-8 (or their own encoding)
        >>> lone_surrogate("f.jsonl:2", "text", "good \U0001f600 film") is None  # a whole character
        True
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as bad:
        named = f"{where}: " if field is None else f"{where}: field {field!r}: "
        what = f"character {bad.start + 1} is \\u{ord(text[bad.start]):04x}, half of a UTF-16 surrogate pair"
        if origin == "json":
            return (f"{named}{what} (a JSON escape of no character: an emoji cut in two?); write the character "
                    "itself, or both escapes of its pair")
        return (f"{named}{what}, no Unicode character (bytes decoded with errors=\"surrogateescape\", or an emoji "
                "cut in two?); remove it, or decode the bytes as UTF-8 (or their own encoding)")
    return None
