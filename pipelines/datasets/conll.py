"""Token classification (NER) from CoNLL-2003 files or TFDS `conll2003`.

1. `read_conll` / `conll_from_tfds`: sentences as `(words, tags)`.
2. `convert_tags` (of a `Sentence`: `with_scheme`, whose errors name the
   file and line): between tag schemes IOB1 (CoNLL-2003's original files:
   `B-` only between two adjacent entities of the same type), IOB2 (a.k.a.
   BIO: every entity starts with `B-`) and IOBES.
3. `encode_sentences`: words -> word pieces with one label per piece. Each
   word is tokenized on its own (the tokenizer's ragged output per word), so
   piece -> word is exact. The FIRST piece of a word carries the word's
   label; the other pieces, `[CLS]`, `[SEP]` and padding get -100 (ignored
   by the loss). With `label_all_tokens=True` every piece carries a label:
   a continuation piece of a `B-X` word gets `I-X` (when the label set has
   it), so that the piece sequence is still valid IOB2 (`B-X I-X`, never
   `B-X B-X`, which would read as two entities); in IOBES a word's pieces are
   one entity too (`S-X`: `B-X .. E-X`, `E-X`: `I-X .. E-X`, never `S-X S-X`),
   so its first piece carries `B-X` / `I-X` there: read words back with
   `convert_tags(tags, "IOBES", "IOBES")`. `word_ids` maps each piece to
   its word (-1 for special tokens and padding). A tokenizer that splits words
   into morphemes (`BertTokenizer(pre_tokenizer="kiwi")`, a vocabulary of
   morphemes as words) also labels each later morpheme's first piece, with the
   continuation label (`서울시에서` B-LOC: `서울시` B-LOC, `에서` I-LOC; in IOBES
   `S-LOC`: `서울시` B-LOC, `에서` E-LOC, `morpheme_label_ids`): its
   export reads text split by the client, where every morpheme is a word of its
   own, tagged by its own first piece.
4. `word_scores` (windows) / `aggregate_word_predictions` (one row per
   sentence): piece scores back to one label per word.

A word the tokenizer turns into no piece at all (e.g. only control
characters) becomes one `[UNK]` so every word keeps a label.

Long documents: a "sentence" may be a whole document. `encode_sentences` reads
at most `max_length` word pieces of it, as overlapping windows of
`seq_length - 2` pieces `stride` apart (`pipelines.windowing`, the windows of
SQuAD); `word_scores` takes each word from the window where its first piece is
most central. By default (`max_length=None`) a sentence is one window and
longer ones are truncated: their last words lose their labels, and
`encode_sentences` reports which (`truncated`, `words_read`) and logs how many.

Example:
    >>> from pipelines import BertTokenizer
    >>> from pipelines.datasets import conll
    >>> sentences = conll.read_conll("tests/data/tasks/conll2003_mini.txt")
    >>> sentences[0].words[:3], sentences[0].tags[:3]
    (['EU', 'rejects', 'German'], ['I-ORG', 'O', 'I-MISC'])
    >>> sentences = [s.with_scheme("IOB1", "IOB2") for s in sentences]
    >>> tokenizer = BertTokenizer("vocab.txt")
    >>> features = conll.encode_sentences(sentences, tokenizer, conll.CONLL2003_NER_LABELS,
    ...                                   seq_length=32)
    >>> ds = conll.token_dataset(features, batch_size=8)
"""

import dataclasses
import logging
import os
from typing import List, Optional

import numpy as np
import tensorflow as tf

from pipelines.datasets import batching
from pipelines.datasets.text_files import decode_text_file
from pipelines.line_ends import text_lines
from pipelines.tokenizer.char_offsets import byte_to_char_offsets
from pipelines.tokenizer.combining_marks import extend_over_marks

logger = logging.getLogger(__name__)

# TFDS `conll2003` label order (IOB2), the usual order for CoNLL-2003 NER heads.
CONLL2003_NER_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
SCHEMES = ("IOB1", "IOB2", "BIO", "IOBES")
STRATEGIES = ("first", "average", "max")
IGNORE_LABEL = batching.IGNORE_LABEL
DOCSTART = "-DOCSTART-"


class ConllFormatError(ValueError):
    """A CoNLL file that cannot be read (names the file and line)."""


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One sentence: its words and one tag per word.

    Args:
        words: list of words as in the file.
        tags: list of tags (e.g. `"B-PER"`), same length as `words`.
        source: where it starts (`"file:line"`), for messages.
        first_line: the file line of its first word (`read_conll`: one word a line), so that a
            message names a word's own line (`word_source`); None for a sentence not read from a file.
    """

    words: List[str]
    tags: List[str]
    source: str = ""
    first_line: Optional[int] = dataclasses.field(default=None, compare=False, repr=False)

    def word_source(self, position):
        """Where word `position` (from 0) is, for messages: `"file:line"` of its own line for a
        sentence read from a file, else the sentence's `source`.

        Example:
            >>> Sentence(["EU", "rejects"], ["I-ORG", "O"], "ner.txt:3", first_line=3).word_source(1)
            'ner.txt:4'
        """
        suffix = f":{self.first_line}"
        if self.first_line is None or not self.source.endswith(suffix):
            return self.source
        return f"{self.source[:-len(suffix)]}:{self.first_line + position}"

    def with_tags(self, tags):
        return dataclasses.replace(self, tags=list(tags))

    def with_scheme(self, from_scheme, to_scheme):
        """This sentence with its tags converted (`convert_tags`); a tag that is not valid
        `from_scheme` is a `ConllFormatError` naming the word's line (`word_source`), the word and the tag.

        Example:
            >>> Sentence(["EU", "rejects"], ["I-ORG", "O"], "ner.txt:1").with_scheme("IOB1", "IOB2").tags
            ['B-ORG', 'O']
            >>> Sentence(["EU", "rejects"], ["X-ORG", "O"], "ner.txt:1").with_scheme("IOB1", "IOB2")
            Traceback (most recent call last):
            ...
            pipelines.datasets.conll.ConllFormatError: ner.txt:1: tag 'X-ORG' (word 1, 'EU') is neither 'O' nor '<B|I|E|S>-<type>'.
        """
        try:
            return self.with_tags(convert_tags(self.tags, from_scheme, to_scheme))
        except _TagError as e:
            word = self.words[e.position] if e.position < len(self.words) else None
            where = self.word_source(e.position) or "a sentence"
            raise ConllFormatError(f"{where}: tag {self.tags[e.position]!r} (word {e.position + 1}, {word!r}) "
                                   f"{e.problem}.") from None


# -- reading -------------------------------------------------------------------


def read_conll(path, *, tag_column=-1):
    """Reads a CoNLL-2003 style file: one `word POS chunk NER` line per word.

    Sentences are separated by blank lines; `-DOCSTART-` lines (document
    boundaries) are skipped. Every word line must have as many
    whitespace-separated columns as the first one.

    Example:
        >>> read_conll("tests/data/tasks/conll2003_mini.txt", tag_column=1)[0].tags[:2]
        ['NNP', 'VBZ']

    Args:
        path: the file.
        tag_column: which column holds the tags (default: the last, NER);
            the word is always column 0.

    Returns:
        List of `Sentence`, tags as written (CoNLL-2003 files are IOB1).

    Raises:
        ConllFormatError: empty file, or a line whose column count differs
            from the first word line's, or `tag_column` out of range; names
            the file and line.
    """
    path = os.fspath(path)
    sentences, words, tags = [], [], []
    num_columns, start, docstarts = None, None, 0

    def flush():
        if words:
            sentences.append(Sentence(list(words), list(tags), f"{path}:{start}", first_line=start))
            words.clear()
            tags.clear()

    # A bad byte or a byte order mark: the error names file and line, the mark is dropped. A line ends
    # at LF, CRLF or a lone CR, as every reader reads them (`pipelines.line_ends`): a file
    # of lone CRs (classic Mac, some exports) read with "\n" alone was one line, its first word kept
    # with the last line's tag and every other word dropped. CRs before an LF end nothing more: read as
    # universal newlines, "\r\r\n" (Python on Windows writing "\r\n" in text mode) was a line and a
    # blank one, each word a sentence of its own.
    for line_number, line in enumerate(text_lines(decode_text_file(path, error=ConllFormatError)), start=1):
        columns = line.split()
        if not columns:
            flush()
            continue
        if columns[0] == DOCSTART:
            flush()
            docstarts += 1
            continue
        if num_columns is None:
            num_columns = len(columns)
            if num_columns == 1:  # words without tags (text to tag, not data to train or score on)
                raise ConllFormatError(f"{path}:{line_number}: {line.strip()!r} has no tag: a CoNLL line is a "
                                       "word and its tags separated by spaces or tabs, the NER tag last "
                                       "(e.g. 'Paris NNP B-NP B-LOC').")
            if not -num_columns <= tag_column < num_columns or tag_column in (0, -num_columns):
                raise ConllFormatError(f"{path}:{line_number}: tag_column {tag_column} is not a tag "
                                       f"column of a line with {num_columns} columns.")
        if len(columns) != num_columns:
            raise ConllFormatError(f"{path}:{line_number}: {len(columns)} columns, expected "
                                   f"{num_columns} (as the first word line): {line.rstrip()!r}.")
        if not words:
            start = line_number
        words.append(columns[0])
        tags.append(columns[tag_column])
    flush()
    if not sentences:
        raise ConllFormatError(f"{path}: no sentences (empty file?).")
    logger.info("%s: %d sentences, %d -DOCSTART- lines skipped.", path, len(sentences), docstarts)
    return sentences


def conll_from_tfds(split="train", *, data_dir=None):
    """TFDS `conll2003` NER as `Sentence`s (tags as names, IOB2).

    Example:
        >>> dev = conll_from_tfds("validation")  # TFDS download  # doctest: +SKIP

    Args:
        split: `"train"`, `"validation"` or `"test"`.
        data_dir: TFDS data directory.

    Returns:
        List of `Sentence`; label names are `CONLL2003_NER_LABELS`.
    """
    import tensorflow_datasets as tfds  # only this function needs it

    builder = tfds.builder("conll2003", data_dir=data_dir)
    names = builder.info.features["ner"].feature.names
    dataset = tfds.load("conll2003", split=split, data_dir=data_dir, shuffle_files=False)
    sentences = []
    for i, example in enumerate(tfds.as_numpy(dataset)):
        words = [w.decode("utf-8") for w in example["tokens"]]
        tags = [names[t] for t in example["ner"]]
        if len(words) != len(tags):
            raise ConllFormatError(f"tfds:conll2003[{split}] example {i}: {len(words)} tokens, {len(tags)} tags.")
        sentences.append(Sentence(words, tags, f"tfds:conll2003[{split}]:{i}"))
    return sentences


# -- tag schemes -----------------------------------------------------------------


def file_scheme(sentences):
    """The scheme a file's tags are read in: `"IOBES"` when any tag starts with `E-` or `S-` (only
    IOBES has them), else `"IOB1"`, which reads IOB2 (BIO) tags as the same entities (a `B-X`
    starts one in both), so CoNLL-2003's original files and BIO files alike need no setting.

    Example:
        >>> file_scheme([Sentence(["Anna", "Berg"], ["B-PER", "E-PER"])]), file_scheme([Sentence(["EU"], ["I-ORG"])])
        ('IOBES', 'IOB1')
    """
    iobes = any(tag[:2] in ("E-", "S-") for sentence in sentences for tag in sentence.tags)
    return "IOBES" if iobes else "IOB1"


def convert_tags(tags, from_scheme, to_scheme):
    """Converts one sentence's tags between IOB1, IOB2 (= BIO) and IOBES.

    Example:
        >>> convert_tags(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"], "IOB1", "IOB2")
        ['B-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC']
        >>> convert_tags(["B-PER", "I-PER", "O", "B-LOC"], "IOB2", "IOBES")
        ['B-PER', 'E-PER', 'O', 'S-LOC']

    Args:
        tags: list of tags (`"O"` or `"<prefix>-<type>"`).
        from_scheme, to_scheme: `"IOB1"`, `"IOB2"`/`"BIO"` or `"IOBES"`.

    Returns:
        The converted list.

    Lenient like seqeval: an `I-X` that follows `O` or another type starts
    a new entity in every scheme (IOB2 files produced by models do that).

    Raises:
        ValueError: unknown scheme, a malformed tag, or `E-`/`S-` outside IOBES.
    """
    spans = _entities(tags, _scheme(from_scheme))
    return _tags_from_entities(spans, len(tags), _scheme(to_scheme))


def _scheme(name):
    upper = str(name).upper()
    if upper not in SCHEMES:
        raise ValueError(f"Unknown tag scheme {name!r}; known: {SCHEMES}.")
    return "IOB2" if upper == "BIO" else upper


class _TagError(ValueError):
    """A tag `convert_tags` cannot read: its `position` and the `problem`, for a message that
    names the word (`Sentence.with_scheme`)."""

    def __init__(self, message, position, problem):
        super().__init__(message)
        self.position, self.problem = position, problem


def _split(tag, position):
    if tag == "O":
        return "O", None
    prefix, sep, kind = tag.partition("-")
    if not sep or prefix not in ("B", "I", "E", "S") or not kind:
        problem = "is neither 'O' nor '<B|I|E|S>-<type>'"
        raise _TagError(f"Tag {tag!r} {problem}.", position, problem)
    return prefix, kind


def _entities(tags, scheme):
    """(start, end_exclusive, type) of every entity."""
    entities = []
    current = None  # [start, type]
    for i, tag in enumerate(tags):
        prefix, kind = _split(tag, i)
        if prefix in ("E", "S") and scheme != "IOBES":
            problem = f"is not valid {scheme} (E- and S- are IOBES tags)"
            raise _TagError(f"Tag {tag!r} at position {i} {problem}.", i, problem)
        begins = (prefix in ("B", "S")
                  or (prefix in ("I", "E") and (current is None or current[1] != kind)))
        if prefix == "O" or begins:
            if current is not None:
                entities.append((current[0], i, current[1]))
                current = None
        if begins:
            current = [i, kind]
        if prefix in ("E", "S") and current is not None:
            entities.append((current[0], i + 1, current[1]))
            current = None
    if current is not None:
        entities.append((current[0], len(tags), current[1]))
    return entities


def _tags_from_entities(entities, length, scheme):
    tags = ["O"] * length
    previous = None  # (end, type) of the previous entity, for IOB1
    for start, end, kind in entities:
        for i in range(start, end):
            tags[i] = f"I-{kind}"
        if scheme == "IOB2":
            tags[start] = f"B-{kind}"
        elif scheme == "IOB1":
            # B- only where an entity directly follows one of the same type.
            if previous == (start, kind):
                tags[start] = f"B-{kind}"
        else:  # IOBES
            if end - start == 1:
                tags[start] = f"S-{kind}"
            else:
                tags[start], tags[end - 1] = f"B-{kind}", f"E-{kind}"
        previous = (end, kind)
    return tags


# -- word pieces and labels ------------------------------------------------------


@dataclasses.dataclass
class TokenClassificationFeatures:
    """Encoded sentences as windows, numpy arrays `[num_windows, seq_length]`.

    With the default `max_length` (one window) there is one row per sentence, in order;
    a longer document is several rows, its windows in order (`document` says whose).

    Args:
        token_ids, segment_ids, padding_mask: int32 BERT inputs.
        labels: int32 label id per piece; -100 where no label (see `encode_sentences`:
            a word is labelled only in the window where its first piece is most central).
        word_ids: int32 word index (in its sentence) per piece; -1 for
            `[CLS]`, `[SEP]` and padding.
        num_truncated: how many sentences lost words to `max_length`.
        document: int32 `[num_windows]`, the sentence of each row.
        window_start: int32 `[num_windows]`, index (among its sentence's pieces) of
            the row's first piece.
        is_max_context: bool `[num_windows, seq_length]`, the pieces this row
            predicts: each piece of a sentence is max-context in exactly one row
            (`pipelines.windowing`).
        truncated: bool `[num_sentences]`, sentences longer than `max_length` pieces.
        words_read: int32 `[num_sentences]`, words whose first piece was read (the
            words after them get no prediction).
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    labels: np.ndarray
    word_ids: np.ndarray
    num_truncated: int = 0
    document: np.ndarray = None
    window_start: np.ndarray = None
    is_max_context: np.ndarray = None
    truncated: np.ndarray = None
    words_read: np.ndarray = None

    def __len__(self):
        return len(self.token_ids)


def encode_sentences(sentences, tokenizer, label_names, *, seq_length=128, label_all_tokens=False,
                     max_length=None, stride=None, spans=None):
    """Word pieces, per-piece labels and `word_ids` for `Sentence`s (see the module docstring).

    A sentence (or a whole document) of more than `seq_length - 2` pieces is read as
    overlapping windows (`pipelines.windowing`): `max_length` pieces at most, in windows
    of `seq_length - 2` pieces starting `stride` pieces apart, on exact word-piece
    boundaries (a window may start inside a word). Each row is `[CLS] window [SEP]`.
    Training labels: a word is labelled in ONE window, the one where its first piece has
    the most context (where it is predicted); with `label_all_tokens` its other pieces
    are labelled in that window too. So every word counts once in the loss.

    Example (`"Johanson"` -> `johan ##son`, `"Paris"` -> `paris`):
        >>> from pipelines import BertTokenizer
        >>> tokenizer = BertTokenizer("vocab.txt")
        >>> s = Sentence(["Johanson", "visits", "Paris"], ["B-PER", "O", "B-LOC"])
        >>> f = encode_sentences([s], tokenizer, CONLL2003_NER_LABELS, seq_length=8)
        >>> f.labels[0].tolist()          # [CLS] johan ##son visits paris [SEP] pad pad
        [-100, 1, -100, 0, 5, -100, -100, -100]
        >>> f.word_ids[0].tolist()
        [-1, 0, 0, 1, 2, -1, -1, -1]
        >>> f = encode_sentences([s], tokenizer, CONLL2003_NER_LABELS, seq_length=5,
        ...                      max_length=100, stride=2)   # windows of 3 pieces, 2 apart
        >>> f.word_ids.tolist(), f.labels.tolist()
        ([[-1, 0, 0, 1, -1], [-1, 1, 2, -1, -1]], [[-100, 1, -100, 0, -100], [-100, -100, 5, -100, -100]])

    Args:
        sentences: list of `Sentence` (tags in the scheme of `label_names`); a
            sentence may be a whole document.
        tokenizer: a `pipelines.BertTokenizer`.
        label_names: tag names in label-id order (e.g. `CONLL2003_NER_LABELS`).
        seq_length: packed length, `[CLS]` and `[SEP]` included.
        label_all_tokens: label every piece, not only the first of a word
            (continuations of `B-X` get `I-X`; in IOBES the pieces of an `S-X` word
            `B-X .. E-X`, of an `E-X` word `I-X .. E-X`). A `tokenizer` with a morpheme
            `pre_tokenizer` labels each later morpheme's first piece so anyway.
        max_length: word pieces of a sentence read at all; None: one window
            (`seq_length - 2`). Longer sentences are truncated (counted, logged).
        stride: word pieces between the starts of consecutive windows (None:
            half a window; see `pipelines.windowing`).
        spans: per sentence, `(text, starts, ends)`: the text its words are spans of
            (`split_words`' answer; None: the words joined by spaces). A tokenizer with
            a morpheme `pre_tokenizer` splits the whole text, as the export's clients do
            (`split_morphemes`), not each word alone (kiwi cuts 4% of NSMC's words
            otherwise there).

    Returns:
        `TokenClassificationFeatures`.

    Raises:
        ValueError: a tag not in `label_names` (names the sentence and tag), or
            bad window options.
    """
    from pipelines.windowing import Windows, window_options

    window, stride, max_length = window_options(seq_length, max_length, stride)
    index = {name: i for i, name in enumerate(label_names)}
    special = tokenizer.special_tokens
    all_words = [w for s in sentences for w in s.words]
    if getattr(tokenizer, "morpheme_splitter", None) is not None:
        split = words_split_in_context([s.words for s in sentences], tokenizer.morpheme_splitter, spans)
        pieces = tokenizer.tokenize_split(tf.constant(split or [""], tf.string))
    else:
        pieces = tokenizer.tokenize(tf.constant(all_words or [""], tf.string))
    piece_values = pieces.flat_values.numpy().astype(np.int32)
    piece_splits = pieces.row_splits.numpy()

    word_labels = []
    for row, sentence in enumerate(sentences):
        for w, tag in enumerate(sentence.tags):
            if tag not in index:
                raise ValueError(f"{sentence.word_source(w) or f'sentence {row}'}: tag {tag!r} (word "
                                 f"{sentence.words[w]!r}) is not in label_names {list(label_names)}.")
            word_labels.append(index[tag])
    num_words = len(all_words)
    word_labels = np.asarray(word_labels, np.int32)
    # A word the tokenizer drops entirely becomes one [UNK], so that every word keeps a label.
    counts = np.diff(piece_splits)[:num_words]
    empty = np.flatnonzero(counts == 0)
    piece_values = np.insert(piece_values[:piece_splits[num_words]], piece_splits[empty], special.unk)
    counts = np.maximum(counts, 1)
    piece_word = np.repeat(np.arange(num_words), counts)              # global word of each piece
    word_first_piece = (np.cumsum(counts) - counts).astype(np.int64)
    is_first = np.zeros(len(piece_values), bool)
    is_first[word_first_piece] = True
    words_per_sentence = np.asarray([len(s.words) for s in sentences], np.int64)
    sentence_first_word = np.concatenate([[0], np.cumsum(words_per_sentence)[:-1]]).astype(np.int64)
    word_sentence = np.repeat(np.arange(len(sentences)), words_per_sentence)
    word_in_sentence = (np.arange(num_words) - sentence_first_word[word_sentence]).astype(np.int32)
    pieces_per_sentence = np.bincount(word_sentence, weights=counts, minlength=len(sentences)).astype(np.int64)

    windows = Windows.of(pieces_per_sentence, window=window, stride=stride, max_length=max_length)
    # Labels: on a word's first piece (all its pieces with label_all_tokens), in the window
    # where that first piece is at its max context.
    piece_label = np.where(is_first, word_labels[piece_word], IGNORE_LABEL).astype(np.int32)
    if label_all_tokens or getattr(tokenizer, "morpheme_analyzer", None) is not None:
        # The labelled pieces of a word (all of them with label_all_tokens; else a morpheme-split
        # word's later morphemes, which start words where the export reads them: the client sends
        # the text split, each tagged there by its own first piece) get the tags that keep the
        # word one entity (B-X: B-X I-X ..; in IOBES S-X: B-X .. E-X, E-X: I-X .. E-X;
        # morpheme_label_ids), never the word's own tag again (S-X S-X: two entities).
        unit = np.ones(len(piece_values), bool) if label_all_tokens else (
            word_start_pieces(tokenizer)[piece_values] | is_first)
        unit_at = np.flatnonzero(unit)
        last_unit = np.zeros(len(piece_values), bool)
        last_unit[unit_at[np.r_[piece_word[unit_at][1:] != piece_word[unit_at][:-1], True]]] = True
        first_ids, middle_ids, last_ids = morpheme_label_ids(label_names)
        labels_of = word_labels[piece_word]
        unit_label = np.where(is_first, first_ids[labels_of],
                              np.where(last_unit, last_ids[labels_of], middle_ids[labels_of]))
        unit_label = np.where(is_first & last_unit, labels_of, unit_label)
        piece_label = np.where(unit, unit_label, piece_label).astype(np.int32)
    owner = windows.token_window[word_first_piece][piece_word]
    window_index = np.arange(len(windows))[:, None]
    labelled = windows.take(owner, pad=-1) == window_index

    n, length = len(windows), windows.length
    shape = (n, seq_length)
    token_ids = np.full(shape, special.pad, np.int32)
    token_ids[:, 0] = special.cls
    token_ids[:, 1:1 + window] = windows.take(piece_values, pad=special.pad)
    token_ids[np.arange(n), length + 1] = special.sep
    labels = np.full(shape, IGNORE_LABEL, np.int32)
    labels[:, 1:1 + window] = np.where(labelled, windows.take(piece_label, pad=IGNORE_LABEL), IGNORE_LABEL)
    word_ids = np.full(shape, -1, np.int32)
    word_ids[:, 1:1 + window] = windows.take(word_in_sentence[piece_word], pad=-1)
    padding_mask = (np.arange(seq_length)[None, :] < (length + 2)[:, None]).astype(np.int32)
    is_max_context = np.zeros(shape, bool)
    is_max_context[:, 1:1 + window] = windows.is_max_context

    # Words read: those whose first piece is within max_length.
    first_kept = windows.token_window[word_first_piece] >= 0
    words_read = np.bincount(word_sentence[first_kept], minlength=len(sentences)).astype(np.int32)
    truncated = windows.truncated
    if truncated.any():
        logger.warning("%d of %d sentences longer than max_length=%d word pieces (seq_length=%d) were "
                       "truncated (their last words get no prediction).", int(truncated.sum()),
                       len(sentences), max_length, seq_length)
    return TokenClassificationFeatures(
        token_ids, np.zeros(shape, np.int32), padding_mask, labels, word_ids, int(truncated.sum()),
        document=windows.document.astype(np.int32), window_start=windows.start.astype(np.int32),
        is_max_context=is_max_context, truncated=truncated, words_read=words_read)


def words_split_in_context(word_lists, splitter, spans=None):
    """Every word of `word_lists` (one list per text), flat, with a space at each morpheme boundary
    the analyzer (`splitter`, a `MorphemeSplitter`) finds in the whole text (`spans`, else the words
    joined by spaces): what `encode_sentences` and `TokenClassifierPreprocessor` tokenize
    (`BertTokenizer.tokenize_split`), as the export's clients split the text."""
    if spans is None:
        spans = []
        for words in word_lists:
            starts = np.cumsum([0] + [len(w) + 1 for w in words])[:-1].tolist()
            spans.append((" ".join(words), starts, [b + len(w) for b, w in zip(starts, words)]))
    split = []
    for (text, starts, ends), cuts in zip(spans, splitter.boundaries([text for text, _, _ in spans])):
        cuts = np.asarray(cuts, np.int64)
        for start, end in zip(starts, ends):
            inside = cuts[(cuts > start) & (cuts < end)] - start
            word, at, pieces = text[start:end], 0, []
            for cut in inside.tolist():
                pieces.append(word[at:cut])
                at = cut
            split.append(" ".join(pieces + [word[at:]]))
    return split


def continuation_label_ids(label_names):
    """int32 per label id: the id a later piece of a word with that label gets (`B-X` -> `I-X`
    when the label set has it; any other label itself), so pieces stay valid IOB2 (`B-X I-X`).

    >>> continuation_label_ids(["O", "B-LOC", "I-LOC", "B-MISC"]).tolist()
    [0, 2, 2, 3]
    """
    index = {name: i for i, name in enumerate(label_names)}
    return np.asarray([index.get("I-" + name[2:], i) if name.startswith("B-") else i
                       for i, name in enumerate(label_names)], np.int32)


def morpheme_label_ids(label_names):
    """int32 per label id, three arrays: the id of a word's first, middle and last morpheme when the
    word is split into two or more (a word of one morpheme keeps its own), so that the morphemes,
    each a word where the export reads the split text, tag the word's entity and no other:
    `B-X` -> B-X I-X .. I-X, `I-X` -> I-X .. I-X, and in IOBES `S-X` -> B-X I-X .. E-X,
    `E-X` -> I-X .. E-X (a label missing from `label_names` keeps the word's own).

    >>> [ids.tolist() for ids in morpheme_label_ids(["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"])]
    [[0, 1, 2, 2, 1], [0, 2, 2, 2, 2], [0, 2, 2, 3, 3]]
    """
    index = {name: i for i, name in enumerate(label_names)}

    def mapped(prefixes):
        ids = []
        for i, name in enumerate(label_names):
            prefix, kind = name[:2], name[2:]
            ids.append(index.get(prefixes.get(prefix, prefix) + kind, i) if prefix in prefixes else i)
        return np.asarray(ids, np.int32)

    return (mapped({"S-": "B-", "E-": "I-"}), mapped({"B-": "I-", "S-": "I-", "E-": "I-"}),
            mapped({"B-": "I-", "S-": "E-"}))


def word_start_pieces(tokenizer):
    """bool per vocabulary id: the piece is no `##` continuation, so it starts a word where the
    exported graph groups pieces into words (a later morpheme of a kiwi-split word does)."""
    return ~np.fromiter((token.startswith("##") for token in tokenizer.vocabulary), bool,
                        len(tokenizer.vocabulary))


def token_dataset(features, *, batch_size=32, shuffle=False, static_shapes=False,
                  bucket_boundaries=None, with_word_ids=False, seed=None, drop_remainder=None,
                  sample_weights=None):
    """Batched `(x, labels)` for `model.fit` from `TokenClassificationFeatures`.

    Example:
        >>> from pipelines import BertTokenizer
        >>> sentences = read_conll("tests/data/tasks/conll2003_mini.txt")
        >>> features = encode_sentences(sentences, BertTokenizer("vocab.txt"), CONLL2003_NER_LABELS,
        ...                             seq_length=32)
        >>> ds = token_dataset(features, batch_size=16, bucket_boundaries=[16, 32])
        >>> x, labels = next(iter(ds))
        >>> sorted(x), labels.shape[0] <= 16
        (['padding_mask', 'segment_ids', 'token_ids'], True)

    Args:
        features: from `encode_sentences`.
        batch_size: rows (sentences, or windows of long ones) per batch.
        shuffle: shuffle every epoch.
        static_shapes, bucket_boundaries: padding mode
            (`pipelines.datasets.batching.batch`); labels pad with -100.
        with_word_ids: also put `word_ids` in `x` (pads with -1), for
            prediction: keep it out of the model's inputs.
        seed: shuffle seed.
        drop_remainder: drop the last incomplete batch (default: with
            `static_shapes`); False for prediction.
        sample_weights: float32 `[rows]`, one weight per row of `features`
            (Keras' `sample_weight`; a sentence read as several windows repeats
            its weight: `weights[features.document]`), or None.

    Returns:
        `tf.data.Dataset` of `(x, y)` (`(x, y, sample_weight)` with weights):
        `x` int32 `[batch, length]` inputs, `y` int32 `[batch, length]` labels.
    """
    seq_length = features.token_ids.shape[1]
    x = {"token_ids": features.token_ids, "segment_ids": features.segment_ids,
         "padding_mask": features.padding_mask}
    if with_word_ids:
        x["word_ids"] = features.word_ids
    lengths = features.padding_mask.sum(axis=1).astype(np.int32)
    weights = () if sample_weights is None else (np.asarray(sample_weights, np.float32),)
    dataset = tf.data.Dataset.from_tensor_slices((x, features.labels, lengths) + weights)
    if shuffle:
        dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)
    # Back to unpadded rows so `batch` can pad to each batch's longest.
    dataset = dataset.map(lambda x, y, n, *w: ({k: v[:n] for k, v in x.items()}, y[:n]) + w)
    return batching.batch(dataset, batch_size, seq_length=seq_length, static_shapes=static_shapes,
                          bucket_boundaries=bucket_boundaries,
                          drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)


def split_words(texts, tokenizer):
    """Raw texts -> the tokenizer's words, each with its code point span in the text.

    The words of BERT's basic tokenizer (whitespace split, punctuation and CJK
    characters words of their own), as the exported NER signature sees them:
    `"Paris."` is `["Paris", "."]`. Each word is the ORIGINAL substring (case and
    accents kept), so `encode_sentences` tokenizes it exactly as the whole text
    would be, and `text[start:end] == word`.

    Example:
        >>> split_words(["Hi, Zoë!"], tokenizer)  # doctest: +SKIP
        [(['Hi', ',', 'Zoë', '!'], [0, 2, 4, 7], [2, 3, 7, 8])]

    Args:
        texts: list of `str`.
        tokenizer: a `pipelines.BertTokenizer` (its `pre_tokenizer` splits).

    Returns:
        One `(words, starts, ends)` per text: lists of str and code point offsets.
    """
    texts = [str(t) for t in texts]
    if not texts:
        return []
    _, begin, end = tokenizer.pre_tokenizer.split_with_offsets(tf.constant(texts))
    result = []
    for text, byte_begin, byte_end in zip(texts, begin.to_list(), end.to_list()):
        char_of_byte = byte_to_char_offsets(text)
        starts = [int(char_of_byte[b]) for b in byte_begin]
        # An accent-stripping tokenizer ends a word before its trailing combining marks.
        ends = extend_over_marks(text, [int(char_of_byte[e]) for e in byte_end])
        result.append(([text[b:e] for b, e in zip(starts, ends)], starts, ends))
    return result


def word_scores(scores, features, strategy="first"):
    """Per-window piece scores back to one score row per word of each sentence (document).

    Every piece is taken from the window where it is most central
    (`features.is_max_context`), so a word seen in several windows gets the scores
    of the window where its first piece has the most context; windows of one sentence
    join into one list of words.

    Example (one sentence of 3 one-piece words read as two windows of 2 pieces, 1 apart):
        >>> from pipelines import BertTokenizer
        >>> s = Sentence(["the", "oil", "crisis"], ["O", "O", "O"])
        >>> f = encode_sentences([s], BertTokenizer("vocab.txt"), ["O", "B-X"], seq_length=4,
        ...                      max_length=10, stride=1)
        >>> f.word_ids.tolist(), f.is_max_context.astype(int).tolist()
        ([[-1, 0, 1, -1], [-1, 1, 2, -1]], [[0, 1, 1, 0], [0, 0, 1, 0]])
        >>> scores = np.arange(16.0).reshape(2, 4, 2)     # [windows, seq_length, classes]
        >>> word_scores(scores, f)[0].tolist()            # words 0, 1 from window 0; 2 from window 1
        [[2.0, 3.0], [4.0, 5.0], [12.0, 13.0]]

    Args:
        scores: `[num_windows, seq_length, classes]` logits or probabilities of
            every row of `features` (use probabilities for `"average"`).
        features: the `TokenClassificationFeatures` they were computed on.
        strategy: as `aggregate_word_predictions` (`"first"`, `"average"`,
            `"max"`), over the word's pieces each from its max-context window.

    Returns:
        One float array `[words_read, classes]` per sentence (`features.words_read`:
        words after a truncation have none).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}; choose one of {STRATEGIES}.")
    scores = np.asarray(scores)
    if scores.ndim != 3 or scores.shape[:2] != features.token_ids.shape:
        raise ValueError(f"scores must be [windows, seq_length, classes] = {features.token_ids.shape} + "
                         f"[classes], got {scores.shape}.")
    rows, positions = np.nonzero(features.is_max_context & (features.word_ids >= 0))
    sentence = features.document[rows].astype(np.int64)
    piece = features.window_start[rows].astype(np.int64) + positions - 1
    order = np.lexsort((piece, sentence))       # document order: sentence, then piece
    rows, positions, sentence = rows[order], positions[order], sentence[order]
    words = features.word_ids[rows, positions].astype(np.int64)
    values = scores[rows, positions]
    num_sentences = len(features.words_read)
    if not len(values):
        return [np.zeros((0, scores.shape[-1]), scores.dtype) for _ in range(num_sentences)]
    # Pieces of one word are consecutive: a new word starts where (sentence, word) changes.
    starts = np.flatnonzero(np.concatenate([[True], (np.diff(sentence) != 0) | (np.diff(words) != 0)]))
    if strategy == "first":
        per_word = values[starts]
    elif strategy == "average":
        per_word = np.add.reduceat(values, starts, axis=0) / np.diff(np.append(starts, len(values)))[:, None]
    else:
        per_word = np.maximum.reduceat(values, starts, axis=0)
    splits = np.searchsorted(sentence[starts], np.arange(num_sentences + 1))
    return [per_word[splits[i]:splits[i + 1]] for i in range(num_sentences)]


def aggregate_word_predictions(scores, word_ids, strategy="first"):
    """Per-piece scores back to one label id per word.

    Example:
        >>> probs = np.array([[.9, .1], [.2, .8], [.6, .4], [.3, .7]])  # [CLS] w0 w0 w1
        >>> aggregate_word_predictions(probs, [-1, 0, 0, 1], "first")
        [1, 1]
        >>> aggregate_word_predictions(probs, [-1, 0, 0, 1], "average")  # w0: [.4, .6]
        [1, 1]

    Args:
        scores: `[length, classes]` or `[batch, length, classes]` logits or
            probabilities (use probabilities for `"average"`: averaging
            logits weighs pieces differently).
        word_ids: `[length]` / `[batch, length]`, -1 for pieces of no word
            (as from `encode_sentences` or `x["word_ids"]`).
        strategy: `"first"`: the word's first piece decides (how the model
            was trained by default). `"average"`: mean score over the word's
            pieces, then argmax. `"max"`: the label of the single highest
            score among the word's pieces.

    Returns:
        A list of label ids per word (`[num_words]`) for one sentence, or a
        list of such lists for a batch. Words cut off by truncation are
        absent: the list covers words 0..max(word_ids).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}; choose one of {STRATEGIES}.")
    scores = np.asarray(scores)
    word_ids = np.asarray(word_ids)
    if scores.ndim == 3:
        return [aggregate_word_predictions(s, w, strategy) for s, w in zip(scores, word_ids)]
    if scores.ndim != 2 or word_ids.shape != scores.shape[:1]:
        raise ValueError(f"scores must be [length, classes] with word_ids [length], got "
                         f"{scores.shape} and {word_ids.shape}.")
    num_words = int(word_ids.max()) + 1 if word_ids.size else 0
    result = []
    for w in range(num_words):
        rows = scores[word_ids == w]
        if strategy == "first":
            word_scores = rows[0]
        elif strategy == "average":
            word_scores = rows.mean(axis=0)
        else:
            word_scores = rows.max(axis=0)
        result.append(int(np.argmax(word_scores)))
    return result
