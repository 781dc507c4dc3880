r"""Where a line of a text file ends: the one rule of every reader and every message that names a
line (task files, STS, SWAG, CoNLL, SQuAD's JSON errors, label files, `--input` texts, vocabularies, whose
reader refuses a lone CR, and the corpora: `pipelines.corpus.file_lines` applies it to a stream).

A line ends at LF, CRLF or a lone CR (classic Mac files, some exports), the CRs right before an LF
ending the line with it. Python's universal newlines read "\r\r\n" (Python on Windows writing
"\r\n" in text mode, or a CRLF file converted again) as a line and a blank one: each CoNLL word a
sentence, each corpus sentence a document, rows numbered twice as far, where TensorFlow's line
readers see one line end. No TensorFlow here.
"""

import re

# Where a line ends, for every reader of a text file and every message that names a line.
LINE_END = re.compile(r"\r*\n|\r")
_LINE_END_BYTES = re.compile(rb"\r*\n|\r")


def text_lines(text, keepends=False):
    r"""The lines of `text` (a str or bytes) as every reader here splits them (`LINE_END`); the end of
    the last line is optional, as in `str.splitlines` (which also ends lines at \v, \f, \x1c-\x1e, \x85, U+2028 and U+2029,
    characters of a line here).

    Example:
        >>> text_lines("a\rb\r\r\nc\r\n\nd"), text_lines("a\r\r\nb\n", keepends=True)
        (['a', 'b', 'c', '', 'd'], ['a\r\r\n', 'b\n'])
    """
    lines, start = [], 0
    for end in (LINE_END if isinstance(text, str) else _LINE_END_BYTES).finditer(text):
        lines.append(text[start:end.end() if keepends else end.start()])
        start = end.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def line_position(text, offset):
    r"""`(line, start)`: the line (from 1) of `text` (a str or bytes) that `offset` is in, and the
    offset its line starts at, lines ending as every reader reads them (`LINE_END`: LF, CRLF or a
    lone CR, "\r\r\n" one end; counting LF alone named line 1 for every byte of a file of CR line ends).

    Example:
        >>> line_position("a\rb\r\nc\nd", 7), line_position(b"a\rb\r\nc", 5), line_position("a\r\r\nb", 4)
        ((4, 7), (3, 5), (2, 4))
    """
    line, start = 1, 0
    for end in (LINE_END if isinstance(text, str) else _LINE_END_BYTES).finditer(text):
        if end.end() > offset:
            break
        line, start = line + 1, end.end()
    return line, start
