"""Pretraining corpora: text files or a TFDS dataset, read as documents of sentences.

BERT's next-sentence task needs sentence boundaries (segments A and B are
made of whole sentences) and document boundaries (a "random next" segment
comes from another document). Three text layouts are read:

- `"bert"`: the original `create_pretraining_data.py` input. One sentence per
  line, a blank line between documents.
- `"text"`: ordinary prose, one document per file. Blank lines separate
  paragraphs; the lines of a paragraph are joined (hard-wrapped text is fine)
  and split into sentences with `split_sentences`.
- `"lines"`: one document per line (a common dump layout; also what a TFDS
  text dataset gives), split into sentences with `split_sentences`.

Rules the readers share, whatever the layout:

- Every file starts a new document (the original let a document run on into
  the next file when no blank line separated them).
- A line ends at LF, CRLF or a lone CR, the CRs before an LF with it (`file_lines`), as every
  reader of a text file here reads it (`pipelines.line_ends`).
  TensorFlow's `TextLineDataset` (`file_documents`, the vocabulary's word
  counts) drops a CR instead, joining two words: `check_text_files`, the
  strict pass before those, refuses a CR inside a line, naming file and line.
- Text must be UTF-8. With `decode_errors="strict"` (default) a bad byte is an
  error naming the file and line; with `"replace"` bad bytes become U+FFFD
  and the corpus counts the lines and remembers where the first ones were, so
  the caller can report them. Nothing is dropped silently.
- Long lines are accepted as they are: tokens beyond the sequence budget are
  cut when instances are built (`truncate_seq_pair`).
- An empty corpus (no sentence in any file) is an error naming the files.
"""

import codecs
import dataclasses
import functools
import os
import re
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

FORMATS = ("bert", "text", "lines")
# `tfds:NAME` in place of file patterns reads a TFDS dataset.
TFDS_PREFIX = "tfds:"
# How many bad-line locations a corpus remembers for its report.
_MAX_REPORTED_LINES = 10

# -- sentence splitting ------------------------------------------------------

# Abbreviations whose period does not end a sentence (matched case-insensitively
# before a period). A sentence that really ends in one of them ("... and so
# on, etc. Then") is not split there: the price of a rule-based splitter.
ABBREVIATIONS = (
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "cf", "al",
    "e\\.g", "i\\.e", "fig", "no", "vol", "approx", "inc", "ltd", "co", "jan",
    "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
)
# Protected periods are swapped for this control character while splitting.
# BERT's text cleaning deletes control characters, so a stray one left in
# the input changes nothing.
_PROTECTED_PERIOD = "\x01"
_ABBREVIATION_PATTERN = r"(?i)\b(" + "|".join(ABBREVIATIONS) + r")\."
# A single capital letter and a period: initials ("J. R. R. Tolkien") and
# dotted acronyms ("U.S.").
_INITIAL_PATTERN = r"\b(\p{Lu})\."
# End punctuation (. ! ? and the ellipsis character, possibly repeated and
# followed by closing quotes/brackets), whitespace, then a capital letter or
# an opening quote/bracket: a sentence boundary.
_BOUNDARY_PATTERN = "([.!?\u2026]+[\"'\u201d\u2019)\\]]*)\\s+([\"'\u201c\u2018(\\[]*\\p{Lu})"


class CorpusError(ValueError):
    """A corpus that cannot be used: nothing in it, bad bytes, unknown layout."""


def split_sentences(texts):
    """Splits text into sentences with a small documented rule set, in the TF graph.

    A sentence ends at `.`, `!`, `?` or `…` (repeats allowed, closing quotes
    or brackets included) when whitespace and then a capital letter or an
    opening quote/bracket follow. Periods of common abbreviations
    (`ABBREVIATIONS`: "Mr.", "Dr.", "e.g.", "i.e.", "etc.", ...) and of single
    capital initials ("J. R. R.", "U.S.") never end a sentence. All
    whitespace runs (newlines included) become one space, and empty
    sentences are dropped.

    It runs eagerly and inside `tf.data`, so the static writer and the
    dynamic pipeline split identically.

    Example:

    >>> split_sentences(["Mr. Smith arrived. He sat down! Then, e.g. tea? Yes."]).to_list()
    [[b'Mr. Smith arrived.', b'He sat down!', b'Then, e.g. tea?', b'Yes.']]

    Args:
        texts: string tensor `[batch]` (or a list of str).

    Returns:
        RaggedTensor of strings `[batch, (sentences)]`.
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    text = tf.strings.regex_replace(texts, r"\s+", " ")
    text = tf.strings.regex_replace(text, _ABBREVIATION_PATTERN, "\\1" + _PROTECTED_PERIOD)
    text = tf.strings.regex_replace(text, _INITIAL_PATTERN, "\\1" + _PROTECTED_PERIOD)
    text = tf.strings.regex_replace(text, _BOUNDARY_PATTERN, "\\1\n\\2")
    text = tf.strings.regex_replace(text, _PROTECTED_PERIOD, ".")
    sentences = tf.strings.strip(tf.strings.split(text, "\n"))
    return tf.ragged.boolean_mask(sentences, tf.strings.length(sentences) > 0)


# -- files ---------------------------------------------------------------------


def list_files(patterns: Union[str, Sequence[str]]) -> List[str]:
    """Expands file names, comma-separated lists and glob patterns, in order.

    Example:

    >>> list_files("/data/wiki-*.txt,/data/books.txt")  # doctest: +SKIP
    ['/data/wiki-00000.txt', '/data/wiki-00001.txt', '/data/books.txt']

    Args:
        patterns: str (comma-separated) or list of str. Globs (`*`, `?`,
            `[...]`) are expanded with `tf.io.gfile.glob` (`gs://` works).

    Returns:
        The files, each glob's matches sorted, duplicates removed.

    Raises:
        CorpusError: a pattern matches nothing, or names a directory (pass
            the files in it, e.g. `DIR/*.txt`: a directory may hold other files).
    """
    files = []
    for _, matches in match_patterns(patterns):
        files.extend(m for m in matches if m not in files)
    if not files:
        raise CorpusError("No input files given.")
    return files


def match_patterns(patterns: Union[str, Sequence[str]], glob=None) -> List[Tuple[str, List[str]]]:
    """(pattern, its sorted matches) for each pattern, checked as `list_files` checks them.

    Args:
        patterns: as `list_files`.
        glob: `pattern -> paths` (default `tf.io.gfile.glob`; the Beam path
            passes Beam's file systems).
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [p for p in os.fspath(patterns).split(",") if p.strip()]
    glob = glob or tf.io.gfile.glob
    out = []
    for pattern in patterns:
        pattern = os.fspath(pattern).strip()
        matches = sorted(glob(pattern))
        if not matches:
            raise CorpusError(f"No file matches {pattern!r}.")
        directories = [m for m in matches if tf.io.gfile.isdir(m)]
        if directories:
            directory = directories[0].rstrip("/") or "/"
            example = os.path.join(directory, "*.txt")
            raise CorpusError(
                f"{directory} is a directory: give the text files in it, e.g. {example!r} "
                "(quoted, so that the shell does not expand it)."
            )
        out.append((pattern, matches))
    return out


@dataclasses.dataclass
class Corpus:
    """Documents of sentences, stored flat.

    Attributes:
        sentences: list of str, all sentences in reading order.
        document_splits: int64 array `[num_documents + 1]`: document `d` is
            `sentences[document_splits[d]:document_splits[d + 1]]`.
        files: the files (or `tfds:NAME/SPLIT`) read.
        replaced_lines: how many lines had bytes that were not UTF-8 and were
            decoded with U+FFFD replacements (`decode_errors="replace"`).
        replaced_at: `"file, line N"` of the first of them.
        document_files, document_ordinals: int arrays `[num_documents]`:
            each document's file (index into `files`) and its ordinal among
            that file's documents, which identify a document however the
            input is split (None for `tfds:` corpora, whose documents are
            numbered in `document_ordinals` alone).
    """

    sentences: List[str]
    document_splits: np.ndarray
    files: List[str]
    replaced_lines: int = 0
    replaced_at: List[str] = dataclasses.field(default_factory=list)
    document_files: Optional[np.ndarray] = None
    document_ordinals: Optional[np.ndarray] = None

    @property
    def num_documents(self) -> int:
        return len(self.document_splits) - 1

    def documents(self) -> Iterator[List[str]]:
        """Yields each document as a list of sentences."""
        for start, end in zip(self.document_splits[:-1], self.document_splits[1:]):
            yield self.sentences[start:end]

    def check_composition(self, tokenizer) -> None:
        """Warns, once per `tokenizer` (a `BertTokenizer`), when the corpus holds Hangul in decomposed
        form (NFD jamo) that its vocabulary holds only composed, naming the file and line as
        `check_text_files` does (a `tfds:` corpus: the document). What `create-pretraining-data`
        checks before tokenizing: its tokenize batches would name a sentence by its place in a batch.

        Only files with a sentence holding conjoining jamo are read again, each at most once, and
        nothing is for a tokenizer that composes its text or has warned already."""
        if not getattr(tokenizer, "checks_composition", False):
            return
        scanned = set()
        for index in self._sentences_with_jamo():
            if not tokenizer.checks_composition:
                return
            document = int(np.searchsorted(self.document_splits, index, side="right")) - 1
            source = self.files[self.document_files[document]] if self.document_files is not None else None
            if source is not None and not source.startswith(TFDS_PREFIX):
                if source not in scanned:  # the file's lines, as read_corpus numbers them
                    scanned.add(source)
                    for number, raw in enumerate(_raw_lines(source), 1):
                        if not tokenizer.checks_composition:
                            return
                        if _CONJOINING_JAMO.search(raw):
                            tokenizer.check_composition([raw], names=[f"{source}:{number}"])
                continue
            name = f"{self.files[0]}, document {int(self.document_ordinals[document]) + 1}"
            tokenizer.check_composition([self.sentences[index]], names=[name])

    def _sentences_with_jamo(self) -> Iterator[int]:
        """The indices of the sentences holding a conjoining Hangul jamo (U+1100-U+11FF), in order."""
        for start in range(0, len(self.sentences), _JAMO_SCAN_BATCH):
            batch = self.sentences[start:start + _JAMO_SCAN_BATCH]
            if _JAMO_CHARACTER.search("\n".join(batch)):
                yield from (start + i for i, sentence in enumerate(batch) if _JAMO_CHARACTER.search(sentence))

    def replacement_report(self) -> str:
        """One line saying which lines had bytes replaced, or "" when none."""
        if not self.replaced_lines:
            return ""
        more = self.replaced_lines - len(self.replaced_at)
        where = "; ".join(self.replaced_at) + (f"; and {more} more" if more > 0 else "")
        return f"{self.replaced_lines} line(s) were not valid UTF-8; bad bytes became U+FFFD: {where}"


class _CorpusBuilder:
    """Collects sentences and document boundaries while files are read."""

    def __init__(self):
        self.sentences = []
        self.splits = [0]
        self.replaced_lines = 0
        self.replaced_at = []
        self.document_files = []
        self.document_ordinals = []

    def end_document(self):
        if len(self.sentences) > self.splits[-1]:  # empty documents are skipped
            self.splits.append(len(self.sentences))

    def add_document(self, sentences, file_index=0, ordinal=None):
        self.sentences.extend(sentences)
        if len(self.sentences) > self.splits[-1]:
            self.document_files.append(file_index)
            self.document_ordinals.append(len(self.document_ordinals) if ordinal is None else ordinal)
        self.end_document()

    def decode(self, raw: bytes, path: str, line_number: int, decode_errors: str) -> str:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            if decode_errors == "strict":
                raise _not_utf8(path, line_number, raw, error,
                                "Fix the file, or pass decode_errors='replace' (--decode-errors replace) to "
                                "read bad bytes as U+FFFD.") from None
            self.replaced_lines += 1
            if len(self.replaced_at) < _MAX_REPORTED_LINES:
                self.replaced_at.append(f"{path}, line {line_number}")
            text = raw.decode("utf-8", "replace")
        if "\0" in text:  # the tokenizer drops it, joining two words
            _refuse_nul(path, line_number, raw)
        return text

    def build(self, files) -> Corpus:
        self.end_document()
        if len(self.splits) == 1:
            shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
            raise CorpusError(f"The corpus is empty: no sentence in {shown}.")
        return Corpus(
            sentences=self.sentences,
            document_splits=np.asarray(self.splits, np.int64),
            files=list(files),
            replaced_lines=self.replaced_lines,
            replaced_at=self.replaced_at,
            document_files=np.asarray(self.document_files, np.int64),
            document_ordinals=np.asarray(self.document_ordinals, np.int64),
        )


def check_text_files(patterns: Union[str, Sequence[str]], tokenizer=None) -> int:
    """Reads text files through once, as a trainer that streams them (dynamic masking) needs
    before its first step: every line valid UTF-8, and at least one that holds a token. With the
    `tokenizer` that will read them (a `BertTokenizer`), decomposed Hangul its vocabulary holds only
    composed is warned of in the same pass, naming the file and line (`check_composition`).

    A line of characters BERT's tokenizer drops (a BOM, zero-width spaces, control characters:
    `pipelines.tokenizer.tokenless.has_no_token`) is not text: a stream of documents with no
    token never yields a batch, and the trainer waits for one forever.

    Example:

    >>> import tempfile
    >>> path = tempfile.mktemp(suffix=".txt")
    >>> _ = open(path, "wb").write(b"One sentence.\\nTwo caf\\xe9.\\n")
    >>> check_text_files(path)
    Traceback (most recent call last):
    ...
    pipelines.corpus.CorpusError: ...txt, line 2: not valid UTF-8 (invalid continuation byte at byte 7 of the line: ...

    Returns:
        The number of lines that hold a token.

    Raises:
        CorpusError: a pattern matches nothing, a line is not UTF-8 or holds a carriage return
            (TensorFlow's line reader drops it, joining two words; file and line named), or the
            files hold no text.
    """
    files = list_files(patterns)
    lines = sum(check_text_file(path, tokenizer) for path in files)
    if not lines:
        raise empty_text_error(files)
    return lines


# A conjoining Hangul jamo (U+1100-U+11FF) in UTF-8: a line that may hold decomposed Hangul.
_CONJOINING_JAMO = re.compile(b"\xe1[\x84-\x87]")
# The same in decoded text; a corpus's sentences are searched joined, this many at a time.
_JAMO_CHARACTER = re.compile("[\u1100-\u11ff]")
_JAMO_SCAN_BATCH = 4096


def check_text_file(path: str, tokenizer=None) -> int:
    """`check_text_files` of one file: the number of its lines that hold a token (0 is no error
    here). The Beam vocabulary count runs it in its workers, a file each.

    Raises:
        CorpusError: a line is not UTF-8 or holds a carriage return (file and line named).
    """
    from pipelines.tokenizer.tokenless import has_no_token

    lines = 0
    for number, raw in enumerate(_lf_lines(path), 1):
        # Up to its first CR, an LF line is line `number` as the readers count lines too (`file_lines`
        # ends a line at a lone CR, and this pass stops at the first): a bad byte after a CR was
        # named one line early.
        head, carriage_return, _ = raw.partition(b"\r")
        if head.strip():
            try:
                head.decode("utf-8")
            except UnicodeDecodeError as error:
                raise _not_utf8(path, number, head, error,
                                "Save the file as UTF-8 (iconv -f cp1252 -t utf-8 FILE > FILE.utf8).") from None
        if carriage_return:  # TensorFlow's line reader drops a CR: 'one\rtwo' was counted as 'onetwo'
            _refuse_carriage_return(path, number, raw)
        if b"\0" in raw:  # and the tokenizer a NUL: 'hello\0world' was learnt as 'helloworld'
            _refuse_nul(path, number, raw)
        if raw.strip():
            lines += not has_no_token(raw.decode("utf-8"))
        if tokenizer is not None and _CONJOINING_JAMO.search(raw) and tokenizer.checks_composition:
            tokenizer.check_composition([raw], names=[f"{path}:{number}"])
    return lines


def empty_text_error(files: Sequence[str]) -> CorpusError:
    """The `CorpusError` of files that hold no text (`check_text_files`)."""
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return CorpusError(f"The corpus is empty: no text in {shown} (blank lines only, or characters the "
                       "tokenizer drops: a byte-order mark, zero-width or control characters).")


def _refuse_carriage_return(path, number, raw):
    """The `CorpusError` of a line (as TensorFlow splits lines: at LF) that holds a CR."""
    from pipelines.datasets.text_files import iconv_advice, wide_unicode_encoding

    wide = wide_unicode_encoding(_head(path))  # its CRLF line ends are CR, NUL, LF, NUL
    if wide:
        raise CorpusError(f"{path}: the file is {wide}: save it as UTF-8 ({iconv_advice(wide)}).")
    raise CorpusError(
        f"{path}, line {number}: a carriage return (\\r) inside the line ({raw[:60]!r}); TensorFlow's line reader "
        "drops it, joining the words on either side. A file of CR line ends: convert it "
        "(tr '\\r' '\\n' < FILE > FILE.txt); stray ones: make them spaces (tr '\\r' ' ').")


def _refuse_nul(path, number, raw):
    """The `CorpusError` of a line that holds a NUL byte: BERT's tokenizer drops it, joining the
    words on either side, as every reader of a text file here refuses it (`pipelines.datasets.text_files`)."""
    from pipelines.datasets.text_files import wide_unicode_encoding

    wide = wide_unicode_encoding(_head(path))  # UTF-16 / UTF-32 text: NUL bytes between its characters
    if wide:
        from pipelines.datasets.text_files import iconv_advice

        raise CorpusError(f"{path}, line {number}: NUL bytes between its characters. The file is {wide}: save it "
                          f"as UTF-8 ({iconv_advice(wide)}).")
    offset = raw.index(b"\0")
    shown = raw[max(0, offset - 30):offset + 30].decode("utf-8", "replace")
    raise CorpusError(
        f"{path}, line {number}, column {len(raw[:offset].decode('utf-8', 'replace')) + 1}: a NUL byte (0x00): "
        f"{shown!r} would be read as {shown.replace(chr(0), '')!r} (the tokenizer drops it); the file may be "
        "damaged: check it, or remove the NUL bytes (tr -d '\\000' < FILE > FILE.clean).")


def _lf_lines(path: str) -> Iterator[bytes]:
    """The lines of a file as TensorFlow's `TextLineDataset` splits them (at LF), without their
    LF or CRLF end."""
    for raw in _lf_chunks(path):
        yield raw.rstrip(b"\r\n")


# How much of a file on another file system (`gs://`) one read takes.
_BLOCK_BYTES = 1 << 20


def _lf_chunks(path: str) -> Iterator[bytes]:
    r"""A file's bytes cut after each LF (the last chunk may lack one), every CR kept, from a local
    file or any file system `tf.io.gfile` knows. GFile's own line iterator drops every CR: a
    `gs://` corpus read 'one\rtwo' as 'onetwo' where a local copy read two lines, and the strict
    pass saw no CR to refuse. Other file systems are read in blocks and cut here."""
    if "://" not in path:
        with open(path, "rb") as f:
            yield from f
        return
    with tf.io.gfile.GFile(path, "rb") as f:
        unended = []  # the bytes since the last LF, block by block (a file of CR line ends has none)
        while True:
            block = f.read(_BLOCK_BYTES)
            if not block:
                break
            *ended, rest = block.split(b"\n")
            if ended:
                ended[0] = b"".join(unended) + ended[0]
                unended = []
                for chunk in ended:
                    yield chunk + b"\n"
            unended.append(rest)
        if any(unended):
            yield b"".join(unended)


def _not_utf8(path, line_number, raw, error, advice):
    """The `CorpusError` of a line that is not UTF-8: file, line, the bytes around it, `advice`
    (or, for a UTF-16 / UTF-32 file, the iconv command that saves it as UTF-8)."""
    from pipelines.datasets.text_files import compressed_format, iconv_advice, legacy_code_page, wide_unicode_encoding

    # A compressed file or archive (its magic at the file's start): no advice to convert its bytes
    # (it said "gunzip it first" and then to iconv it from cp1252; a zip, bzip2 or xz file got the latter alone).
    packed = compressed_format(_head(path) if line_number > 1 else raw)
    wide = wide_unicode_encoding(_head(path) if line_number > 1 else raw)  # later lines start mid-character
    if packed:
        advice = f"The file is {packed[0]}, not text: {packed[1]} and give the file inside."
    elif wide:
        advice = f"The file is {wide}: save it as UTF-8 ({iconv_advice(wide)})."
    elif _cut_inside_a_character(path, line_number, raw):
        advice = ("The file is UTF-8 cut inside a character (at the first line's start or the last line's end: "
                  "a file split by bytes, split -b or head -c): split it by lines (split -l, head -n), or remove "
                  "the broken character.")
    elif legacy_code_page(raw) == "cp949":  # U+FFFD for every syllable, or cp1252 mojibake
        advice = ("The line reads as Korean in cp949 (EUC-KR): save the file as UTF-8 "
                  "(iconv -f cp949 -t utf-8 FILE > FILE.utf8).")
    return CorpusError(f"{path}, line {line_number}: not valid UTF-8 ({error.reason} at byte {error.start} of the "
                       f"line: {raw[max(0, error.start - 20):error.start + 20]!r}). {advice}")


def _cut_inside_a_character(path: str, line_number: int, raw: bytes) -> bool:
    """Whether `raw` is UTF-8 whose only bad bytes are a character cut at the file's start (the
    rest of a character, on line 1) or at its end (the start of one, on the last line): a file
    split by bytes, not a file in another encoding."""
    head = len(raw) - len(raw.lstrip(bytes(range(0x80, 0xC0))))
    if head > 3 or (head and line_number != 1):
        return False
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(raw[head:], final=False)
    except UnicodeDecodeError:
        return False
    tail = decoder.getstate()[0]
    if tail and not _tail(path, len(raw) + 2).rstrip(b"\r\n").endswith(raw):
        return False  # a cut is the file's last line
    return bool(head or tail)


def _tail(path: str, size: int) -> bytes:
    """The last `size` bytes of a file (b"" when it cannot be read again)."""
    opener = open if "://" not in path else tf.io.gfile.GFile
    try:
        with opener(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - size))
            return f.read()
    except (OSError, tf.errors.OpError):
        return b""


def _head(path: str, size: int = 4096) -> bytes:
    """The first `size` bytes of a file (b"" when it cannot be read again)."""
    opener = open if "://" not in path else tf.io.gfile.GFile
    try:
        with opener(path, "rb") as f:
            return f.read(size)
    except (OSError, tf.errors.OpError):
        return b""


def _raw_lines(path: str) -> Iterator[bytes]:
    """The lines of a file as bytes, without line terminators (`file_lines`), on any file system."""
    yield from file_lines(_lf_chunks(path))


def file_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    r"""The lines of a file, without their ends, from its LF-ended chunks (iterating a binary file):
    LF and CRLF end a line, and so does a lone CR (classic Mac files, some exports): a file of CR
    line ends was one line, its sentences one, its documents one, cut at the sequence length when
    instances were built. The CRs before an LF end the line with it ("\r\r\n", Windows' text mode
    applied twice, is one end, not a line and a blank one that would end a document): the rule of
    every reader (`pipelines.line_ends`).

    >>> list(file_lines([b"One.\rTwo.\r\rThree.\r\n", b"Four.\r\r\n"]))
    [b'One.', b'Two.', b'', b'Three.', b'Four.']
    """
    for chunk in chunks:
        line = chunk.rstrip(b"\r\n")
        if b"\r" in line:
            yield from line.split(b"\r")
        else:
            yield line


def read_corpus(
    patterns: Union[str, Sequence[str]],
    *,
    format: str = "bert",
    decode_errors: str = "strict",
    tfds_split: str = "train",
    tfds_text_field: str = "text",
    tfds_data_dir: str = None,
) -> Corpus:
    """Reads text files (or a TFDS dataset) into documents of sentences.

    Example:

    >>> corpus = read_corpus("pipelines/data/sample_corpus.txt")
    >>> corpus.num_documents > 1
    True
    >>> first_document = next(corpus.documents())

    Args:
        patterns: str or list of str: files, comma-separated lists and globs
            (see `list_files`), or `"tfds:NAME"` for a TFDS text dataset (one
            document per example, split into sentences).
        format: `"bert"`, `"text"` or `"lines"` (see the module docstring).
        decode_errors: `"strict"` (bad UTF-8 is an error naming file and
            line) or `"replace"` (U+FFFD; counted in the corpus).
        tfds_split, tfds_text_field, tfds_data_dir: for `tfds:` sources: the
            split, the text feature, and where the prepared data lives.

    Returns:
        A `Corpus`.

    Raises:
        CorpusError: no file matches, bad UTF-8 (strict), or no sentence at all.
    """
    if format not in FORMATS:
        raise CorpusError(f"Unknown corpus format {format!r}; choose one of {FORMATS}.")
    if decode_errors not in ("strict", "replace"):
        raise CorpusError(f"decode_errors must be 'strict' or 'replace', got {decode_errors!r}.")
    if isinstance(patterns, str) and patterns.startswith(TFDS_PREFIX):
        return _read_tfds(patterns[len(TFDS_PREFIX):], tfds_split, tfds_text_field, tfds_data_dir)

    files = list_files(patterns)
    builder = _CorpusBuilder()
    for file_index, path in enumerate(files):
        decode = functools.partial(builder.decode, decode_errors=decode_errors)
        for ordinal, sentences in enumerate(read_file_documents(_raw_lines(path), path, format=format, decode=decode)):
            builder.add_document(sentences, file_index, ordinal)
    return builder.build(files)


def read_file_documents(raw_lines: Iterable[bytes], path: str, *, format: str = "bert",
                        decode: Optional[Callable[[bytes, str, int], str]] = None) -> Iterator[List[str]]:
    """The documents of one file, each a non-empty list of sentences, in file order.

    What `read_corpus` reads from each file (every file starts a new
    document); the Apache Beam path reads files with it too, so a document's
    ordinal in its file is the same in both.

    Args:
        raw_lines: the file's lines as bytes, without line terminators.
        path: the file's name (for error messages).
        format: `"bert"`, `"text"` or `"lines"`.
        decode: `(raw, path, line_number) -> str`; default strict UTF-8 with
            `CorpusError` naming file and line.
    """
    decode = decode or functools.partial(_CorpusBuilder().decode, decode_errors="strict")
    if format == "bert":
        document = []
        for line_number, raw in enumerate(raw_lines, start=1):
            line = decode(raw, path, line_number).strip()
            if line:
                document.append(line)
            elif document:
                yield document
                document = []
        if document:
            yield document
        return
    texts = []  # paragraphs ("text") or documents ("lines")
    paragraph = []
    for line_number, raw in enumerate(raw_lines, start=1):
        line = decode(raw, path, line_number).strip()
        if format == "lines":
            texts.append(line)
        elif line:
            paragraph.append(line)
        elif paragraph:
            texts.append(" ".join(paragraph))
            paragraph = []
    if paragraph:
        texts.append(" ".join(paragraph))
    split = _split_in_batches(texts)
    if format == "lines":
        yield from (sentences for sentences in split if sentences)
    else:
        document = [s for sentences in split for s in sentences]
        if document:
            yield document


def _split_in_batches(texts: List[str], batch_size: int = 4096) -> List[List[str]]:
    out = []
    for start in range(0, len(texts), batch_size):
        ragged = split_sentences(tf.constant(texts[start:start + batch_size], tf.string))
        out.extend([s.decode("utf-8", "replace") for s in row] for row in ragged.to_list())
    return out


def _read_tfds(name: str, split: str, text_field: str, data_dir) -> Corpus:
    where = f"tfds:{name}/{split}"
    dataset = tfds_documents(name, split=split, text_field=text_field, data_dir=data_dir)
    builder = _CorpusBuilder()
    for sentences in dataset.prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        builder.add_document([s.decode("utf-8", "replace") for s in sentences])
    return builder.build([where])


def tfds_documents(name: str, *, split: str = "train", text_field: str = "text", data_dir=None) -> tf.data.Dataset:
    """A TFDS text dataset as a `tf.data.Dataset` of documents (string vectors of sentences).

    Each example's `text_field` is one document, split with `split_sentences`.

    Example:

    >>> documents = tfds_documents("wikipedia/20230601.en", split="train")  # doctest: +SKIP

    Args:
        name: TFDS dataset name (with config/version if needed).
        split: the split to read (TFDS slicing like `"train[:1%]"` works).
        text_field: the string feature holding the text.
        data_dir: where TFDS keeps prepared data (default: TFDS's own).
    """
    import tensorflow_datasets as tfds

    dataset = tfds.load(name, split=split, data_dir=data_dir, shuffle_files=False)
    spec = dataset.element_spec
    if not isinstance(spec, dict) or text_field not in spec:
        fields = sorted(spec) if isinstance(spec, dict) else spec
        raise CorpusError(f"tfds:{name} has no text field {text_field!r}; its features are {fields}.")
    return dataset.map(
        lambda example: split_sentences(example[text_field][None])[0],
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    ).filter(lambda sentences: tf.size(sentences) > 0)


def file_documents(files: Sequence[str], *, format: str = "bert") -> tf.data.Dataset:
    """Text files as a `tf.data.Dataset` of documents (string vectors of sentences), read in graph.

    The graph counterpart of `read_corpus` for streaming pipelines: same
    layouts, same splitting, files in the given order. Bytes that are not
    UTF-8 are replaced by U+FFFD here (a stream cannot stop to report them;
    check a corpus once with `read_corpus` to find them).

    Example:

    >>> documents = file_documents(list_files("pipelines/data/sample_corpus.txt"))

    Args:
        files: list of file names (see `list_files`).
        format: `"bert"`, `"text"` or `"lines"`.
    """
    if format not in FORMATS:
        raise CorpusError(f"Unknown corpus format {format!r}; choose one of {FORMATS}.")
    files = tf.data.Dataset.from_tensor_slices(list(files))

    def clean(lines):
        lines = tf.strings.unicode_transcode(lines, "UTF-8", "UTF-8", errors="replace")
        return tf.strings.strip(lines)

    if format == "text":
        def read_text(path):
            text = clean(tf.io.read_file(path))
            paragraphs = tf.strings.split(tf.strings.regex_replace(text, r"\r?\n[ \t\r]*\n", "\x02"), "\x02")
            return split_sentences(paragraphs).flat_values

        return files.map(read_text).filter(lambda s: tf.size(s) > 0)

    if format == "lines":
        lines = files.flat_map(tf.data.TextLineDataset).map(clean)
        return lines.filter(lambda line: tf.strings.length(line) > 0).map(
            lambda line: split_sentences(line[None])[0]
        ).filter(lambda s: tf.size(s) > 0)

    def bert_documents(path):
        # A trailing blank line closes the file's last document.
        lines = tf.data.TextLineDataset(path).map(clean).concatenate(tf.data.Dataset.from_tensors(tf.constant("")))

        def step(document, line):
            # The state is the document read so far; a blank line emits it and
            # starts an empty one.
            done = tf.equal(line, "")
            grown = tf.concat([document, [line]], axis=0)
            following = tf.cond(done, lambda: tf.zeros([0], tf.string), lambda: grown)
            return following, (done, document)

        return lines.scan(tf.zeros([0], tf.string), step).filter(
            lambda done, document: done & (tf.size(document) > 0)
        ).map(lambda done, document: document)

    return files.flat_map(bert_documents)

