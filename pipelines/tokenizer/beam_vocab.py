"""WordPiece vocabulary learning from a corpus counted with Apache Beam (word counts are a combine).

`count_words_with_beam` counts the words of text files exactly as `count_words`
does (the same `BertPreTokenizer` split, so the same counts), on any Beam
runner: lines are read splittably (`ReadFromText`), split and counted per
batch in TensorFlow, and the per-batch counts summed per word
(`CombinePerKey(sum)`). Only the distinct words (with counts of at least
`min_count`) come back to this process, where `build_vocabulary` (TF-Text's
learner) runs as on the local path: `learn_vocabulary_with_beam` does both.

Requires `apache-beam` (`pip install bert-keras[beam]`); nothing else imports
this module.
"""

import collections
import os
import tempfile
from typing import List, Sequence, Union

import apache_beam as beam

from pipelines import corpus as corpus_lib
from pipelines.beam_runner import beam_pipeline, worker_errors


def count_words_with_beam(patterns: Union[str, Sequence[str]], *, lowercase: bool = True, strip_accents=None,
                          unicode_normalization=None,
                          runner: str = "DirectRunner", pipeline_args: Sequence[str] = (), min_count: int = 1,
                          temp_dir: str = None) -> collections.Counter:
    """Word counts of text files, as `count_words(tf.data.TextLineDataset(files), BertPreTokenizer(lowercase))`.

    Example:

    counts = count_words_with_beam("corpus/*.txt", runner="DirectRunner")
    counts["the"]
    120345

    Args:
        patterns: files / globs / comma lists (any Beam file system).
        lowercase: the uncased pre-tokenizer rules.
        strip_accents: NFD + drop combining marks (None: as `lowercase`).
        unicode_normalization: "NFC" composes each line before it is split (`count_words`'s rule).
        runner: a Beam runner name.
        pipeline_args: further Beam pipeline options.
        min_count: words seen fewer times are left out (they never make the vocabulary
            with `build_vocabulary`'s default `lower_thresh` of 1 only when 1: keep it 1 for
            identical results, raise it to bound what comes back on a huge corpus).
        temp_dir: where the counts are written before they are read back (default: a fresh
            local temporary directory; give a `gs://` path on a distributed runner).

    Returns:
        A `collections.Counter` of word -> count.

    Raises:
        pipelines.corpus.CorpusError: as the local path (`corpus.check_text_file`, run in the workers,
            a file each): a pattern that matches nothing, a line that is not UTF-8 or holds a
            carriage return (file and line named), no text at all.
    """
    from pipelines.pretraining.beam_pipeline import beam_glob

    files = [path for _, matches in corpus_lib.match_patterns(patterns, glob=beam_glob) for path in matches]
    directory = temp_dir or tempfile.mkdtemp(prefix="beam-word-counts-")
    output = os.path.join(directory, f"counts-{os.getpid()}")
    with worker_errors(), beam_pipeline(runner, pipeline_args) as pipeline:
        paths = pipeline | "Files" >> beam.Create(files)
        # The local path's strict pass, a file per worker: TensorFlow's string ops dropped a byte that is
        # not UTF-8 ("café" in Latin-1 counted as "caf"), and a file the local path refuses (a CR inside a
        # line, which its line reader drops) was counted. It ran here first, reading the whole corpus
        # through the launching machine before any worker started.
        _ = paths | "CheckText" >> beam.Map(corpus_lib.check_text_file)
        _ = (
            paths
            | "ReadLines" >> beam.io.ReadAllFromText(coder=beam.coders.BytesCoder())
            | "Batch" >> beam.BatchElements(min_batch_size=64, max_batch_size=4096)
            | "CountBatch" >> beam.ParDo(_CountBatch(lowercase, strip_accents, unicode_normalization))
            | "Sum" >> beam.CombinePerKey(sum)
            | "Keep" >> beam.Filter(lambda word_count: word_count[1] >= min_count)
            | "Format" >> beam.MapTuple(lambda word, count: f"{word.encode('unicode_escape').decode()}\t{count}")
            | "Write" >> beam.io.WriteToText(output, file_name_suffix=".tsv")
        )
    from apache_beam.io.filesystems import FileSystems

    counts = collections.Counter()
    for metadata in FileSystems.match([output + "*.tsv"])[0].metadata_list:
        with FileSystems.open(metadata.path) as f:
            for line in f.read().decode("utf-8").splitlines():
                word, count = line.rsplit("\t", 1)
                counts[word.encode().decode("unicode_escape")] += int(count)
    FileSystems.delete([m.path for m in FileSystems.match([output + "*.tsv"])[0].metadata_list])
    if not counts and min_count <= 1:  # as the local pass says it (it stopped before counting)
        raise corpus_lib.empty_text_error(files)
    return counts


def learn_vocabulary_with_beam(patterns, *, vocab_size: int, lowercase: bool = True, runner: str = "DirectRunner",
                               pipeline_args: Sequence[str] = (), **build_options) -> List[str]:
    """`build_vocabulary(count_words_with_beam(...), vocab_size=...)`: a WordPiece vocabulary (token list).

    Example:

    tokens = learn_vocabulary_with_beam("corpus/*.txt", vocab_size=30522)
    """
    from pipelines.tokenizer.vocab import build_vocabulary

    counts = count_words_with_beam(patterns, lowercase=lowercase, runner=runner, pipeline_args=pipeline_args)
    if not counts:
        raise corpus_lib.CorpusError(f"No words in {patterns}.")
    return build_vocabulary(counts, vocab_size=vocab_size, **build_options)


class _CountBatch(beam.DoFn):
    """A batch of lines (bytes) -> (word, count in the batch), split by `BertPreTokenizer`."""

    def __init__(self, lowercase, strip_accents=None, unicode_normalization=None):
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.unicode_normalization = unicode_normalization

    def setup(self):
        from pipelines.tokenizer.composition import NfcStep
        from pipelines.tokenizer.normalize import BertPreTokenizer

        self.pre_tokenizer = BertPreTokenizer(lowercase=self.lowercase, strip_accents=self.strip_accents)
        self.composition = None if self.unicode_normalization is None else NfcStep(self.unicode_normalization)

    def process(self, lines):
        import tensorflow as tf

        lines = tf.constant(lines, tf.string)
        if self.composition is not None:  # composed before the split, as the tokenizer composes
            lines = self.composition.compose(lines)[0]
        words = self.pre_tokenizer.split(lines)
        unique = tf.unique_with_counts(tf.reshape(getattr(words, "flat_values", words), [-1]))
        for word, count in zip(unique.y.numpy(), unique.count.numpy()):
            yield word.decode("utf-8"), int(count)
