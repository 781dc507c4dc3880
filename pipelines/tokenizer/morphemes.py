"""Korean morpheme boundaries as surface spans: a morpheme analyzer run on the host (kiwi).

Kakao's Korean BERT was pretrained on morpheme-analysed text: "오늘은" is read as "오늘" + "은".
A `MorphemeSplitter` finds those boundaries in raw text. Only *surface* boundaries are kept:
the analyzer's morphemes can differ from the text ("입니다" is 이 + ᆸ니다, both starting at 입),
so a position is a boundary only where one of its morphemes starts, strictly inside a
whitespace-delimited word (an eojeol), and no morpheme spans across it. Every piece is then a
span of the raw text, and offsets stay exact:

    "오늘은 2024년 3월 5일입니다."  ->  오늘|은 2024|년 3|월 5|일|입니다|.

Two uses (`bert-keras vocab --pre-tokenizer kiwi [--morpheme-suffixes]`):

- morphemes as words: `spaced(texts)` inserts a space at every boundary; the vocabulary is
  learned on, and the model reads, spaced text (kiwi runs at inference too). The char maps
  bring token offsets back to the raw text.
- morpheme suffixes: a vocabulary for raw text, tokenized in-graph. `marked(texts)` puts
  `MARKER` (a noncharacter the BERT pre-tokenizer keeps inside words) at every
  boundary; after the usual pre-tokenizer split, `fold_marked_words` turns each word's later
  morphemes into `##` continuation words ("오늘\\ufdd0은" -> "오늘", "##은"), so that greedy
  WordPiece on the raw word "오늘은" finds "오늘" + "##은". `build_vocabulary` learns them
  as continuation pieces.

The analyzers are optional dependencies, imported when first used: kiwi is the extra `korean`
(`pip install "bert-keras[korean]"`). `PRE_TOKENIZERS` names the analyzers; `morpheme_splitter`
makes one by name.

Example:

>>> splitter = morpheme_splitter("kiwi")  # doctest: +SKIP
>>> splitter.boundaries("오늘은 2024년 3월 5일입니다.")  # doctest: +SKIP
[2, 8, 11, 14, 15, 18]
>>> splitter.spaced(["5일입니다"])[0]  # doctest: +SKIP
['5 일 입니다']
"""

import collections
import re
import threading
import unicodedata
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple, Union

import numpy as np

from pipelines.environment import MissingDependencyError

# U+FDD0, a noncharacter: no analyzer, normalizer or vocabulary gives it a meaning, and text
# does not hold it (a private-use character such as U+E000 does: word processors write old Hangul
# and symbols there, and a corpus's own U+E000 was taken for a boundary and never learned). The
# BERT pre-tokenizer keeps it as an ordinary letter (not whitespace, control, punctuation, accent
# or CJK), so it stays inside the word it marks.
MARKER = "\ufdd0"

_JOINER = "##"
_ZWJ = "\u200d"
# Hangul conjoining jamo (NFD Hangul): composed before analysis, which reads syllables only.
_CONJOINING_JAMO = re.compile("[\u1100-\u11ff]")
_CHUNK_BREAK = re.compile(r"\s")


class MissingAnalyzerError(MissingDependencyError):
    """The morpheme analyzer a pre-tokenizer needs is not installed; the message says what to install."""


class MorphemeSplitter:
    """Surface morpheme boundaries of texts, from a morpheme analyzer (subclasses wrap one).

    A subclass implements `_morpheme_spans(chunks)`: for each string, its morphemes as
    `(start, end)` code-point spans (overlapping and non-surface forms allowed). This class
    turns them into boundaries, pieces, spaced and marked texts. Long texts are analysed in
    chunks of at most `max_chunk_chars` characters, cut at whitespace (analyzers slow down
    more than linearly on long inputs); a chunk start is never a boundary.

    Methods take one `str` or an iterable of them (a batch) and answer in kind.
    """

    name = None

    def __init__(self, max_chunk_chars: int = 1000):
        if max_chunk_chars < 2:
            raise ValueError(f"max_chunk_chars={max_chunk_chars} is too small")
        self.max_chunk_chars = int(max_chunk_chars)

    def load(self) -> "MorphemeSplitter":
        """Loads the analyzer now (it is loaded on first use otherwise); returns `self`.

        Raises:
            MissingAnalyzerError: the analyzer is not installed.
        """
        return self

    # -- what a subclass provides ------------------------------------------------------

    def _morpheme_spans(self, chunks: List[str]) -> List[List[Tuple[int, int]]]:
        raise NotImplementedError

    # -- public API ----------------------------------------------------------------------

    def boundaries(self, texts: Union[str, Iterable[str]]):
        """The sorted char positions where a morpheme starts strictly inside an eojeol.

        Args:
            texts: a str, or an iterable of str.

        Returns:
            For a str, a list of int (positions `p`: a morpheme starts at `text[p]`, and
            `text[p - 1]` belongs to the same whitespace-delimited word); for a batch, one
            such list per text.
        """
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        for i, text in enumerate(batch):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        result = self._boundaries(batch)
        return result[0] if single else result

    def split(self, texts: Union[str, Iterable[str]]):
        """The morphemes of each eojeol, as spans of the text.

        Example: `split("오늘은 5일입니다")` is `[["오늘", "은"], ["5", "일", "입니다"]]`.

        Returns:
            For a str, a list (one per whitespace-delimited word) of lists of str whose
            concatenation is the word; for a batch, one such list per text.
        """
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        result = []
        for text, cuts in zip(batch, self.boundaries(batch)):
            words = []
            cut_iter = iter(cuts)
            cut = next(cut_iter, None)
            for match in re.finditer(r"\S+", text):
                start, end = match.span()
                pieces = []
                while cut is not None and cut < end:
                    if cut > start:
                        pieces.append(text[start:cut])
                        start = cut
                    cut = next(cut_iter, None)
                pieces.append(text[start:end])
                words.append(pieces)
            result.append(words)
        return result[0] if single else result

    def spaced(self, texts: Union[str, Iterable[str]]):
        """Each text with one space inserted at every boundary, and its char map back.

        The spaced text is what a model whose vocabulary was learned on morphemes as words
        (`count_words(..., morphemes=...)`) reads, at training and inference alike.

        Returns:
            `(spaced_texts, char_maps)` (for a str: `(spaced_text, char_map)`). `char_map`
            is an int64 numpy array of `len(spaced_text) + 1` entries: `char_map[i]` is the
            position in the original text of `spaced_text[i]` (an inserted space maps to the
            character that follows it), and the last entry is `len(text)`. So a token's
            `[start, end)` char span in the spaced text maps to `[char_map[start],
            char_map[end])` in the original text; with numpy, `char_map[offsets]` maps an
            array of offsets at once.
        """
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        cuts_list = self.boundaries(batch)
        spaced = [_insert(text, cuts, " ") for text, cuts in zip(batch, cuts_list)]
        maps = [_char_map(len(text), cuts) for text, cuts in zip(batch, cuts_list)]
        return (spaced[0], maps[0]) if single else (spaced, maps)

    def spaced_utf8(self, strings: Sequence[bytes]):
        """`spaced` on UTF-8 bytes, with byte maps: what `BertTokenizer(pre_tokenizer=...)` runs.

        Returns:
            `(spaced, byte_maps)`: the spaced strings (UTF-8 bytes) and, for each, an int64 array
            of `len(spaced) + 1` entries, the byte of the original string each byte of the
            spaced one comes from (an inserted space: the byte that follows it), the last entry
            the original's length. A string that is not valid UTF-8 is left as it is (identity
            map): the tokenizer reads its bad bytes as it always does.
        """
        texts, valid = [], []
        for raw in strings:
            try:
                texts.append(raw.decode("utf-8"))
                valid.append(True)
            except UnicodeDecodeError:
                texts.append("")
                valid.append(False)
        spaced, maps = self.spaced(texts) if texts else ([], [])
        out, byte_maps = [], []
        for raw, text, ok, split, char_map in zip(strings, texts, valid, spaced, maps):
            if not ok or split == text:
                out.append(raw)
                byte_maps.append(np.arange(len(raw) + 1, dtype=np.int64))
                continue
            encoded = split.encode("utf-8")
            raw_starts = np.concatenate([[0], np.cumsum([len(c.encode("utf-8")) for c in text])]).astype(np.int64)
            lengths = np.fromiter((len(c.encode("utf-8")) for c in split), np.int64, len(split))
            within = np.arange(len(encoded), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            mapped = np.repeat(raw_starts[char_map[:-1]], lengths) + within
            out.append(encoded)
            byte_maps.append(np.append(mapped, len(raw)))
        return out, byte_maps

    def marked(self, texts: Union[str, Iterable[str]], marker: str = MARKER):
        """Each text with `marker` inserted at every boundary (`spaced` with another separator).

        `marked(texts, " ")` is `spaced(texts)[0]`. With the default `MARKER` the words the
        BERT pre-tokenizer makes of the marked text are the words of the raw text (the marker
        is a letter to it), each marked where its morphemes start: `fold_marked_words` reads
        them.
        """
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        result = [_insert(text, cuts, marker) for text, cuts in zip(batch, self.boundaries(batch))]
        return result[0] if single else result

    # -- the surface rule -----------------------------------------------------------------

    def _boundaries(self, texts: List[str]) -> List[List[int]]:
        # Compose NFD Hangul, cut long texts into chunks, analyse all chunks of the batch at
        # once (the analyzer's batch API is the fast one), then map back.
        prepared = []  # (text analysed, its positions in the original text or None)
        chunks, owners = [], []  # chunk, (text index, chunk offset)
        for index, text in enumerate(texts):
            composed, positions = _compose_hangul(text)
            prepared.append((composed, positions))
            for offset, chunk in _chunks(composed, self.max_chunk_chars):
                chunks.append(chunk)
                owners.append((index, offset))
        found = [[] for _ in texts]
        spans_of_chunks = self._morpheme_spans(chunks) if chunks else []
        for chunk, (index, offset), spans in zip(chunks, owners, spans_of_chunks):
            found[index].extend(offset + p for p in _surface_boundaries(chunk, spans))
        result = []
        for (composed, positions), cuts in zip(prepared, found):
            if positions is not None:
                cuts = [positions[p] for p in cuts]
            result.append(sorted(cuts))
        return result


def _surface_boundaries(text: str, spans: Sequence[Tuple[int, int]]) -> List[int]:
    """Starts of morphemes strictly inside an eojeol of `text` that no morpheme spans across."""
    n = len(text)
    cuts = []
    max_end = 0  # the furthest end of the morphemes that start before the current one
    previous_start = None
    for start, end in sorted(spans):
        if start != previous_start:
            if 0 < start < n and max_end <= start and _may_cut(text, start):
                cuts.append(start)
            previous_start = start
        max_end = max(max_end, end)
    return cuts


def _may_cut(text: str, p: int) -> bool:
    """Whether a boundary may go between `text[p - 1]` and `text[p]`: both in a word, and not
    inside a grapheme cluster (a combining mark, a zero-width joiner, an emoji modifier)."""
    before, after = text[p - 1], text[p]
    if before.isspace() or after.isspace() or before == _ZWJ or after == _ZWJ:
        return False
    if unicodedata.category(after).startswith("M") or "\U0001f3fb" <= after <= "\U0001f3ff":
        return False
    return True


def _chunks(text: str, max_chars: int):
    """`(offset, chunk)` pieces of `text`, each at most `max_chars` long, cut after a newline,
    else after whitespace that follows a sentence end, else after any whitespace (in the last
    half of the window), else anywhere."""
    if len(text) <= max_chars:
        return [(0, text)]
    pieces = []
    start = 0
    while len(text) - start > max_chars:
        window = text[start : start + max_chars]
        half = max_chars // 2
        cut = window.rfind("\n", half) + 1
        if not cut:
            sentence_end = max(window.rfind(mark, half) for mark in (". ", "! ", "? "))
            cut = sentence_end + 2 if sentence_end >= half else 0
        if not cut:
            spaces = [m.end() for m in _CHUNK_BREAK.finditer(window, half)]
            cut = spaces[-1] if spaces else max_chars
        pieces.append((start, window[:cut]))
        start += cut
    pieces.append((start, text[start:]))
    return pieces


def _compose_hangul(text: str):
    """`text` with conjoining jamo composed into syllables (as NFC does for Hangul), and the
    original position of each character of the result (None when nothing was composed)."""
    if not _CONJOINING_JAMO.search(text):
        return text, None
    out, positions = [], []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        code = ord(char)
        if 0x1100 <= code <= 0x1112 and i + 1 < n and 0x1161 <= ord(text[i + 1]) <= 0x1175:
            syllable = 0xAC00 + ((code - 0x1100) * 21 + (ord(text[i + 1]) - 0x1161)) * 28
            width = 2
            if i + 2 < n and 0x11A8 <= ord(text[i + 2]) <= 0x11C2:
                syllable += ord(text[i + 2]) - 0x11A7
                width = 3
            out.append(chr(syllable))
            positions.append(i)
            i += width
        elif (0xAC00 <= code <= 0xD7A3 and (code - 0xAC00) % 28 == 0 and i + 1 < n
              and 0x11A8 <= ord(text[i + 1]) <= 0x11C2):
            out.append(chr(code + ord(text[i + 1]) - 0x11A7))
            positions.append(i)
            i += 2
        else:
            out.append(char)
            positions.append(i)
            i += 1
    positions.append(n)
    return "".join(out), positions


def _insert(text: str, cuts: Sequence[int], separator: str) -> str:
    if not cuts:
        return text
    parts, start = [], 0
    for cut in cuts:
        parts.append(text[start:cut])
        start = cut
    parts.append(text[start:])
    return separator.join(parts)


def _char_map(length: int, cuts: Sequence[int]) -> np.ndarray:
    positions = np.arange(length + 1, dtype=np.int64)
    if not cuts:
        return positions
    cuts = np.asarray(cuts, dtype=np.int64)
    return np.insert(positions, cuts, cuts)


# --------------------------------------------------------------------------
# kiwi
# --------------------------------------------------------------------------


class KiwiMorphemeSplitter(MorphemeSplitter):
    """Surface morpheme boundaries from kiwi (`kiwipiepy`), the open Korean analyzer.

    Args:
        num_workers: kiwi's threads (None: kiwi's default, every core). A batch is analysed
            with kiwi's multi-threaded batch API.
        max_chunk_chars: longer texts are analysed in chunks cut at whitespace.
        **tokenize_options: passed to `Kiwi.tokenize` (e.g. `split_complex=True`).

    Raises:
        MissingAnalyzerError: `kiwipiepy` is not installed (raised when first used).
    """

    name = "kiwi"

    def __init__(self, num_workers=None, max_chunk_chars: int = 1000, **tokenize_options):
        super().__init__(max_chunk_chars=max_chunk_chars)
        self.num_workers = num_workers
        self.tokenize_options = tokenize_options
        self._kiwi = None

    @property
    def kiwi(self):
        """The `kiwipiepy.Kiwi` instance, loaded on first use (it reads its model, ~1 s), one per
        process and `num_workers` for every splitter: each load holds ~450 MB, so every
        tokenizer, task or served model of a kiwi vocabulary loading its own grew a process by that
        much (a server swapping versions, a notebook loading a task again)."""
        if self._kiwi is None:
            self._kiwi = _shared_kiwi(None if self.num_workers is None else max(1, int(self.num_workers)))
        return self._kiwi

    def load(self):
        _ = self.kiwi
        return self

    def _morpheme_spans(self, chunks):
        kiwi = self.kiwi
        if getattr(kiwi, "num_workers", 1) >= 1 and len(chunks) > 1:
            analyses = kiwi.tokenize(chunks, **self.tokenize_options)  # multi-threaded, in order
        else:
            analyses = (kiwi.tokenize(chunk, **self.tokenize_options) for chunk in chunks)
        return [[(token.start, token.start + token.len) for token in tokens] for tokens in analyses]

    def __getstate__(self):  # picklable (the Kiwi object is not): loaded again where used
        state = dict(self.__dict__)
        state["_kiwi"] = None
        return state


# num_workers (None: kiwi's default) -> this process's Kiwi of it; only read once loaded.
_KIWIS = {}
_KIWIS_LOCK = threading.Lock()


def _shared_kiwi(num_workers):
    Kiwi = _import_kiwi()  # each time: an environment without kiwipiepy is said so, loaded or not
    with _KIWIS_LOCK:
        if num_workers not in _KIWIS:
            _KIWIS[num_workers] = Kiwi(**({} if num_workers is None else {"num_workers": num_workers}))
        return _KIWIS[num_workers]


def _import_kiwi():
    try:
        from kiwipiepy import Kiwi
    except ImportError as error:
        raise MissingAnalyzerError(
            'pre_tokenizer="kiwi" needs the Korean extra: pip install "bert-keras[korean]" '
            f"(kiwipiepy and kiwipiepy-model; {error})"
        ) from error
    return Kiwi


# The morpheme analyzers, by the name `bert-keras vocab --pre-tokenizer` takes.
PRE_TOKENIZERS: Dict[str, type] = {"kiwi": KiwiMorphemeSplitter}


def morpheme_splitter(name: Union[str, MorphemeSplitter], **options) -> MorphemeSplitter:
    """The `MorphemeSplitter` registered as `name` in `PRE_TOKENIZERS` (a splitter is returned as is).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if isinstance(name, MorphemeSplitter):
        return name
    if name not in PRE_TOKENIZERS:
        raise ValueError(f"unknown pre-tokenizer {name!r}: choose one of {', '.join(sorted(PRE_TOKENIZERS))}")
    return PRE_TOKENIZERS[name](**options)


def fold_marked_words(counts: Mapping[str, int], marker: str = MARKER) -> collections.Counter:
    """Word counts of marked text -> the same counts with each later morpheme a `##` word.

    A word the pre-tokenizer made of `marked()` text is cut at the markers: its first
    non-empty piece is counted as a word, each later piece `m` as the continuation word
    `"##" + m` (what `build_vocabulary` learns as a `##` piece). `"5\\ufdd0일\\ufdd0입니다"`
    counts "5", "##일" and "##입니다"; a marker at a word's start (after punctuation the
    pre-tokenizer split off) starts nothing. The BERT pre-tokenizer never makes a word that
    starts with "##" ('#' is punctuation), so continuation words cannot collide with words.

    >>> fold_marked_words({"오늘\\ufdd0은": 3, "오늘": 1, "\\ufdd0진짜": 2})
    Counter({'오늘': 4, '##은': 3, '진짜': 2})
    """
    folded = collections.Counter()
    for word, count in counts.items():
        if marker not in word:
            folded[word] += count
            continue
        pieces = [piece for piece in word.split(marker) if piece]
        if not pieces:
            continue
        folded[pieces[0]] += count
        for piece in pieces[1:]:
            folded[_JOINER + piece] += count
    return folded
