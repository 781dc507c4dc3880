"""The word counts a vocabulary is learned from, for text files: locally, or on Apache Beam.

`count_corpus_words` is what `bert-keras vocab` counts: `count_words` over the lines of the
files (`tf.data.TextLineDataset`), or, given a Beam runner, `beam_vocab.count_words_with_beam`
(the same split, the same counts; imports `apache_beam` only then).

Example:

>>> count_corpus_words(["pipelines/data/sample_corpus.txt"])["the"] > 0  # doctest: +SKIP
True
"""

import contextlib

import tensorflow as tf

from pipelines.corpus import check_text_files, list_files
from pipelines.tokenizer.normalize import BertPreTokenizer
from pipelines.tokenizer.vocab import count_words


def count_corpus_words(patterns, *, lowercase=True, runner=None, pipeline_args=(), progress=None):
    """`{word: count}` of text files, split as the BERT tokenizer will split them.

    Args:
        patterns: file names or glob patterns.
        lowercase: count the uncased words (lowercased, accents stripped).
        runner: None (count here) or an Apache Beam runner name (`DirectRunner`, `DataflowRunner`, ...).
        pipeline_args: Beam pipeline options (with `runner`).
        progress: local path: a callable that makes a progress bar (a context manager with
            `update(n)`, e.g. `functools.partial(tqdm, desc=...)`), called once the files are found.

    Raises:
        pipelines.corpus.CorpusError: a pattern matches no file.
        ValueError: an unknown runner, or no words at all (empty files).
    """
    if runner:
        from pipelines.pretraining.beam_pipeline import parse_runner
        from pipelines.tokenizer.beam_vocab import count_words_with_beam

        files = list(patterns)
        counts = count_words_with_beam(files, lowercase=lowercase, runner=parse_runner(runner),
                                       pipeline_args=list(pipeline_args))
    else:
        files = list_files(patterns)  # globs expanded; CorpusError names a pattern that matches nothing
        # One strict pass first: TensorFlow's string ops would drop a byte that is not UTF-8
        # ("café" in Latin-1 counted as "caf"), and count a binary or gzip file's bytes as words.
        check_text_files(files)
        with progress() if progress else contextlib.nullcontext() as bar:
            counts = count_words(tf.data.TextLineDataset(files), BertPreTokenizer(lowercase=lowercase),
                                 progress=bar)
    if not counts:
        raise ValueError(f"no words found in {', '.join(files)}: are the files empty?")
    return counts
