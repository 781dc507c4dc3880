"""The word counts a vocabulary is learned from, for text files: locally, or on Apache Beam.

`count_corpus_words` is what `bert-keras vocab` counts: `count_words` over the lines of the
files (`tf.data.TextLineDataset`), or, given a Beam runner, `beam_vocab.count_words_with_beam`
(the same split, the same counts; imports `apache_beam` only then). With a morpheme
`pre_tokenizer` ("kiwi", Korean), the lines are split into morphemes on the host first
(`count_words(..., morphemes=...)`; local only).

Example:

>>> count_corpus_words(["pipelines/data/sample_corpus.txt"])["the"] > 0  # doctest: +SKIP
True
"""

import contextlib

import tensorflow as tf

from pipelines.corpus import check_text_files, list_files
from pipelines.tokenizer.normalize import BertPreTokenizer
from pipelines.tokenizer.vocab import count_words


def count_corpus_words(patterns, *, lowercase=True, runner=None, pipeline_args=(), progress=None,
                       pre_tokenizer=None, morpheme_suffixes=False, strip_accents=None, unicode_normalization=None):
    """`{word: count}` of text files, split as the BERT tokenizer will split them.

    Args:
        patterns: file names or glob patterns.
        lowercase: count the uncased words (lowercased, accents stripped).
        strip_accents: NFD + drop combining marks (None: as `lowercase`); False with `lowercase`
            keeps Hangul syllables whole, as Korean vocabularies need.
        runner: None (count here) or an Apache Beam runner name (`DirectRunner`, `DataflowRunner`, ...).
        pipeline_args: Beam pipeline options (with `runner`).
        progress: local path: a callable that makes a progress bar (a context manager with
            `update(n)`, e.g. `functools.partial(tqdm, desc=...)`), called once the files are found.
        pre_tokenizer: None (BERT's words), or a morpheme analyzer's name in
            `pipelines.tokenizer.morphemes.PRE_TOKENIZERS` ("kiwi") or a `MorphemeSplitter`:
            every morpheme is a word ("오늘은" -> "오늘", "은"), for a model that reads
            `MorphemeSplitter.spaced` text at training and inference.
        morpheme_suffixes: with `pre_tokenizer`, the later morphemes of a word are counted as
            continuation words ("오늘은" -> "오늘", "##은"): `build_vocabulary` learns `##`
            pieces from them, for a vocabulary that reads raw text.
        unicode_normalization: "NFC" composes each line before it is split, as the tokenizer
            that records it does (`count_words`), here and on Beam.

    Raises:
        pipelines.corpus.CorpusError: a pattern matches no file.
        pipelines.tokenizer.morphemes.MissingAnalyzerError: the analyzer is not installed.
        pipelines.beam_runner.MissingBeamError: a runner without Apache Beam installed.
        ValueError: an unknown runner or pre-tokenizer, a runner with a pre-tokenizer,
            `morpheme_suffixes` without one, or no words at all (empty files).
    """
    if morpheme_suffixes and pre_tokenizer is None:
        raise ValueError("morpheme_suffixes needs a morpheme pre_tokenizer, e.g. pre_tokenizer='kiwi'")
    if pre_tokenizer is not None and runner:
        raise ValueError(f"a morpheme pre_tokenizer ({pre_tokenizer!r}) counts here only, not with a Beam runner")
    splitter = None
    if pre_tokenizer is not None:
        from pipelines.tokenizer.morphemes import morpheme_splitter

        splitter = morpheme_splitter(pre_tokenizer).load()  # a missing analyzer fails before any reading
    if runner:
        from pipelines.beam_runner import beam_imports, parse_runner

        with beam_imports(runner):
            from pipelines.tokenizer.beam_vocab import count_words_with_beam

        files = list(patterns)
        counts = count_words_with_beam(files, lowercase=lowercase, strip_accents=strip_accents,
                                       unicode_normalization=unicode_normalization, runner=parse_runner(runner),
                                       pipeline_args=list(pipeline_args))
    else:
        files = list_files(patterns)  # globs expanded; CorpusError names a pattern that matches nothing
        # One strict pass first: TensorFlow's string ops would drop a byte that is not UTF-8
        # ("café" in Latin-1 counted as "caf"), and count a binary or gzip file's bytes as words.
        check_text_files(files)
        with progress() if progress else contextlib.nullcontext() as bar:
            counts = count_words(tf.data.TextLineDataset(files),
                                 BertPreTokenizer(lowercase=lowercase, strip_accents=strip_accents),
                                 progress=bar, morphemes=splitter, morpheme_suffixes=morpheme_suffixes,
                                 unicode_normalization=unicode_normalization)
    if not counts:
        raise ValueError(f"no words found in {', '.join(files)}: are the files empty?")
    return counts
