"""From text files to a vocabulary on disk in one call, as `bert-keras vocab` does it.

The words are counted as the BERT tokenizer will split them (here, or on Apache Beam; optionally
morpheme by morpheme), WordPiece is learned from the counts, and `vocab.txt` is written with HF's
`tokenizer_config.json` beside it, so every later step (and HF) reads text with the same rules.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
>>> learned = learn_vocabulary(["pipelines/data/sample_corpus.txt"], path, size=2000)  # doctest: +SKIP
>>> learned.tokens[:5]  # doctest: +SKIP
['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
"""

import dataclasses
import glob
import os
from typing import Callable, List, Optional, Tuple

from pipelines.command_options import option
from pipelines.output_paths import check_output_file


@dataclasses.dataclass(frozen=True)
class VocabularyOptions:
    """How a vocabulary is learned: the keywords of `learn_vocabulary`, the flags of `bert-keras vocab`
    (with the same defaults). Plain Python: `--help` loads no TensorFlow."""

    size: int = option(30522, "target vocabulary size (default 30522)", type="positive_int")
    reserved: Tuple[str, ...] = option((), "extra reserved tokens after the five special ones (e.g. [unused0])",
                                       nargs="*", metavar="TOKEN", type=str)
    character_coverage: float = option(
        1.0, "keep the most frequent characters covering this share of the text (SentencePiece's option; "
             "default 1.0, every character); the others become [UNK]. Korean, Chinese and Japanese corpora "
             "need fewer characters (0.9995, as SentencePiece), or their alphabet fills the vocabulary",
        metavar="SHARE", type="fraction")
    runner: Optional[str] = option(None, "count the words on Apache Beam (pip install bert-keras[beam]): "
                                         "DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, "
                                         "PortableRunner or PrismRunner; the same counts. Beam pipeline options "
                                         "go after '--', as with create-pretraining-data, e.g. -- "
                                         "--direct_num_workers=4 --direct_running_mode=multi_processing")
    beam_options: Tuple[str, ...] = option((), "deprecated: Beam pipeline options go after '--' (see --runner); "
                                               "--beam-option=--direct_num_workers=4 still works",
                                           "--beam-option", action="append", metavar="OPTION", type=str)
    # The names are pipelines.tokenizer.morphemes.PRE_TOKENIZERS (not imported here: no TensorFlow).
    pre_tokenizer: Optional[str] = option(
        None, "split Korean words into morphemes first, with this analyzer: kiwi "
              '(pip install "bert-keras[korean]"). Alone, every morpheme is a word of its own: for a model that '
              "reads text split by kiwi at training AND inference "
              "(pipelines.tokenizer.morphemes.morpheme_splitter('kiwi').spaced). With --morpheme-suffixes, "
              "a vocabulary for raw text. Not with --runner", metavar="NAME")
    morpheme_suffixes: bool = option(
        False, "with --pre-tokenizer: learn a word's later morphemes as ## pieces (\"오늘은\" -> 오늘 ##은), so "
               "the vocabulary reads RAW text in-graph (stock TF Serving, no analyzer at inference); kiwi is "
               "needed only to learn it")

    def __post_init__(self):
        if not 0.0 < self.character_coverage <= 1.0:
            raise ValueError(f"character_coverage must be in (0, 1], got {self.character_coverage}")
        if self.size < 1:
            raise ValueError(f"size must be at least 1, got {self.size}")
        if self.pre_tokenizer and self.runner:
            raise ValueError("pre_tokenizer (--pre-tokenizer) splits morphemes on this machine; it does not run "
                             "with a runner (--runner): drop one of them")
        if self.morpheme_suffixes and not self.pre_tokenizer:
            raise ValueError("morpheme_suffixes (--morpheme-suffixes) needs a morpheme analyzer: add "
                             "pre_tokenizer='kiwi' (--pre-tokenizer kiwi)")


def decomposed_hangul_share(word_counts):
    """The share of word occurrences holding conjoining Hangul jamo (U+1100-U+11FF): Hangul syllables
    the accent stripping (NFD) decomposed, as google-research/bert's uncased rule does. Korean text
    itself writes syllables and compatibility jamo (ㅋㅋ), not these.

    >>> decomposed_hangul_share({"\u110b\u1169\u1102\u1173\u11af": 3, "ok": 1})
    0.75
    """
    total = sum(word_counts.values())
    jamo = sum(count for word, count in word_counts.items() if any("\u1100" <= c <= "\u11ff" for c in word))
    return jamo / total if total else 0.0


# How far below the size asked a vocabulary may land as usual (`build_vocabulary`'s `slack_ratio`).
_SIZE_SLACK = 0.05


@dataclasses.dataclass(frozen=True)
class LearnedVocabulary:
    """What `learn_vocabulary` wrote: `path` (vocab.txt), `settings_path` (its tokenizer_config.json),
    the `tokens` in id order, and the corpus' `words` and `distinct` words."""

    path: str
    settings_path: str
    tokens: List[str]
    words: int
    distinct: int
    size: int

    @property
    def notes(self) -> List[str]:
        """What the user should know about the result (empty when nothing is unusual): more tokens than
        asked, or fewer than `build_vocabulary`'s 5% slack below it (a small corpus runs out of pieces:
        `--size 30522` on a page of text wrote ~200 tokens without a word on why).

        >>> LearnedVocabulary("v.txt", "c.json", ["t"] * 65, words=1010, distinct=22, size=200).notes
        ['65 tokens, fewer than the 200 asked: the corpus has only 22 distinct words (1,010 in all), and the \
learner found no more pieces in them, down to pieces seen once; a larger corpus gives more']
        """
        if len(self.tokens) < self.size * (1 - _SIZE_SLACK):
            return [f"{len(self.tokens):,} tokens, fewer than the {self.size:,} asked: the corpus has only "
                    f"{self.distinct:,} distinct words ({self.words:,} in all), and the learner found no more "
                    "pieces in them, down to pieces seen once; a larger corpus gives more"]
        if len(self.tokens) <= self.size:
            return []
        return [f"more than the {self.size:,} asked: every character of the corpus (and its ## form) is a "
                "token of its own, so that no word is [UNK]; a larger size adds pieces of words"]


def _check_extra_reserved(extra, special):
    """`reserved` (`--reserved TOKEN ...`), named in its own terms: the Nth token given, and the id it
    would get. The list check of the whole reserved list named `--reserved [PAD]` "reserved_tokens
    lists '[PAD]' twice, at index 0 and 5": a list the user never typed, by 0-based positions.

    Raises:
        VocabularyError: a token given is empty, one of the special tokens, or given twice.
    """
    from pipelines.tokenizer.vocab import VocabularyError

    first = {}
    for number, token in enumerate(extra, 1):
        given = f"reserved token {number} ({token!r}, --reserved)"
        if not isinstance(token, str) or not token.strip():
            raise VocabularyError(f"{given} is empty: give a token such as [unused0], or leave it out.")
        if token in special:
            ids = " ".join(f"{name}={i}" for i, name in enumerate(special))
            raise VocabularyError(f"{given} is one of the {len(special)} special tokens every vocabulary starts "
                                  f"with already ({ids}): leave it out.")
        try:
            token.encode("utf-8")
        except UnicodeEncodeError as bad:  # a byte that is not UTF-8, passed on as a lone surrogate
            code = ord(token[bad.start])
            what = f"byte 0x{code - 0xDC00:02x} is not valid UTF-8" if 0xDC80 <= code <= 0xDCFF else "not Unicode text"
            raise VocabularyError(f"{given}: {what}; give UTF-8 text (a vocab.txt is UTF-8).") from None
        if token in first:
            raise VocabularyError(f"{given} repeats reserved token {first[token]}: a token has one id "
                                  f"(it would be id {len(special) + first[token] - 1}); give it once.")
        first[token] = number


def learn_vocabulary(inputs, output, *, lowercase: bool = True, strip_accents: Optional[bool] = None,
                     unicode_normalization: Optional[str] = None, overwrite: bool = False, progress: Optional[Callable] = None,
                     log: Callable[[str], None] = lambda line: None, max_input_tokens: Optional[int] = int(5e6),
                     **options) -> LearnedVocabulary:
    """Learns a WordPiece vocabulary from text files and writes it, with its tokenizer rules (and,
    for morphemes as words, `pre_tokenizer` without `morpheme_suffixes`, the analyzer its text is
    split with: `tokenizer_config.PRE_TOKENIZER_KEY`, which the tasks and `load_tokenizer` follow).

    Args:
        inputs: text files or glob patterns, one sentence or document per line.
        output: the vocabulary file to write (`vocab.txt`); HF's `tokenizer_config.json` goes beside
            it (`NAME.tokenizer_config.json` for a `NAME.txt` other than vocab.txt).
        lowercase, strip_accents: the tokenizer's rules (`BertTokenizer`; `strip_accents` None: as
            `lowercase`; False with `lowercase` keeps Hangul syllables whole).
        unicode_normalization: "NFC" learns on the corpus composed (a corpus of decomposed Hangul,
            NFD jamo) and records it beside the vocabulary, which every later step then applies to
            its text (`pipelines.BertTokenizer(unicode_normalization=)`); None / "none": text as given.
        overwrite: replace existing output files (else `OutputExistsError`, a `FileExistsError`,
            before any counting); an output that is one of the inputs is refused even so.
        progress: a progress-bar factory for the counting (`count_corpus_words`).
        log: called with a line before the learning starts and with any warning about the corpus.
        max_input_tokens: the most distinct words the learner reads (the most frequent; `build_vocabulary`).
        **options: the fields of `VocabularyOptions` (`size`, `reserved`, `character_coverage`,
            `runner`, `beam_options`, `pre_tokenizer`, `morpheme_suffixes`).

    Raises:
        pipelines.output_paths.OutputExistsError: an output file exists and `overwrite` is False.
        pipelines.output_paths.OutputPathError: an output is one of the input files (a `ValueError`).
        ValueError: bad options, or no words in the files (`count_corpus_words`, `build_vocabulary`).
        pipelines.tokenizer.morphemes.MissingAnalyzerError: the pre-tokenizer is not installed.
    """
    settings = VocabularyOptions(**options)
    from pipelines.tokenizer.composition import checked_unicode_normalization

    form = checked_unicode_normalization(unicode_normalization)
    from pipelines.tokenizer.tokenizer_config import tokenizer_config_path, write_tokenizer_settings

    settings_path = tokenizer_config_path(output)
    patterns = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files = [path for pattern in map(os.fspath, patterns) for path in (glob.glob(pattern) or [pattern])]
    for path in (output, settings_path):  # never one of the corpus files, an existing file only with overwrite
        check_output_file(path, overwrite=overwrite, inputs=files)
    from pipelines.tokenizer.corpus_words import count_corpus_words
    from pipelines.tokenizer.vocab import (RESERVED_TOKENS, alphabet_share, build_vocabulary, check_reserved_tokens,
                                           write_vocabulary)

    _check_extra_reserved(settings.reserved, RESERVED_TOKENS)
    reserved = RESERVED_TOKENS + list(settings.reserved)
    check_reserved_tokens(reserved, settings.size)  # before the counting, not hours after it
    counts = count_corpus_words(inputs, lowercase=lowercase, strip_accents=strip_accents, runner=settings.runner,
                                pipeline_args=list(settings.beam_options), progress=progress,
                                pre_tokenizer=settings.pre_tokenizer, morpheme_suffixes=settings.morpheme_suffixes,
                                unicode_normalization=form)  # lines composed before the split, as the tokenizer does
    words = sum(counts.values())
    log(f"{words:,} words, {len(counts):,} distinct; learning {settings.size:,} pieces...")
    share = alphabet_share(counts, settings.size, settings.character_coverage)
    if share >= 0.5:
        # Advise the coverage SentencePiece uses only to those who have not set one already.
        remedy = ("a script with thousands of characters needs a character coverage of 0.9995 (rarer "
                  "characters become [UNK]) or a larger size" if settings.character_coverage >= 1 else
                  f"at a character coverage of {settings.character_coverage}, a larger size (or a lower "
                  "coverage: more characters become [UNK])")
        log(f"note: the characters alone (each also as ##) take {share:.0%} of the {settings.size:,} pieces "
            f"asked, leaving {'no' if share >= 1 else 'little'} room for pieces of words; {remedy}")
    stripped = lowercase if strip_accents is None else strip_accents
    jamo = decomposed_hangul_share(counts)
    if jamo >= 0.1 and stripped:
        log(f"note: {jamo:.0%} of the words are Hangul, which stripping accents (the uncased default) "
            "decomposes into jamo: the vocabulary holds jamo, not syllables. Korean vocabularies keep "
            "syllables whole with --no-strip-accents (Python: strip_accents=False)")
    elif jamo >= 0.1:
        # The accents are kept: the corpus itself is decomposed (NFD), as macOS file systems and some
        # scrapers write Hangul; the tokenizer, as BERT's and HF's, does not compose it.
        log(f"note: {jamo:.0%} of the words hold decomposed Hangul (conjoining jamo, Unicode NFD), which the "
            "tokenizer keeps as written: the vocabulary holds jamo, and composed Hangul (NFC, as Korean text "
            "is usually written) will read as [UNK]. Learn it with --unicode-normalization NFC (Python: "
            "unicode_normalization=\"NFC\"), which the vocabulary records so that every later step composes its "
            "text too, or compose the corpus first: python3 -c \"import sys, "
            "unicodedata; sys.stdout.write(unicodedata.normalize('NFC', sys.stdin.read()))\" < IN > OUT")
    tokens = build_vocabulary(counts, vocab_size=settings.size, reserved_tokens=reserved,
                              character_coverage=settings.character_coverage, max_input_tokens=max_input_tokens)
    write_vocabulary(tokens, output)
    # Morphemes as words: the vocabulary reads text split by the analyzer, and says so to every later
    # step. With suffixes (## pieces) it reads raw text, and records none.
    split_by = None if settings.morpheme_suffixes else settings.pre_tokenizer
    write_tokenizer_settings(output, lowercase=lowercase, strip_accents=strip_accents, pre_tokenizer=split_by,
                             unicode_normalization=form)
    return LearnedVocabulary(path=output, settings_path=settings_path, tokens=tokens, words=words,
                             distinct=len(counts), size=settings.size)
