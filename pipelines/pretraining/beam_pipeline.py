"""Static pretraining TFRecords on Apache Beam: the same records as `write_pretraining_data`, on any runner.

`write_pretraining_data_with_beam(settings, runner=...)` runs the whole stage
as one Beam pipeline (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner,
PortableRunner, PrismRunner):

```
input files (any Beam file system glob)
  -> documents            each file read whole: (document id, sentences)   [ReadDocuments]
  -> token ids            batches of documents through BertTokenizer       [Tokenize]
  -> NSP buckets          GroupByKey on hash(seed, document id) % buckets  [Bucket]
  -> instances            the original's rules per (document, dupe)        [Instances]
  -> records              masked and encoded in batches                    [MaskAndEncode]
  -> output shards        GroupByKey on shard, sorted by instance key,
                          written atomically (temporary name, rename)      [WriteShards]
```

Every random choice is seeded from (seed, document id, dupe index)
(`pipelines.pretraining.seeding`) and a random next segment comes from the
document's NSP bucket, exactly as the local path draws it, so each shard is
byte-identical to the one `write_pretraining_data` writes: whatever the
runner, the number of workers, how the input is split, or how elements are
batched. `PREFIX-config.json` (settings and corpus fingerprint) is checked and
written beside the shards as on the local path, and shards already complete
are skipped.

Requires `apache-beam` (`pip install bert-keras[beam]`; `bert-keras[beam-gcp]`
for Dataflow and `gs://`). Nothing else in the package imports this module.

Scaling notes: a file is read by one worker (give a corpus as many files, as
wikiextractor writes it); a bucket (`documents_per_bucket` documents, 10,000
by default, about 30 MB of ids for Wikipedia articles) is built by one worker;
an output shard is sorted in one worker's memory (keep shards at a few hundred
MB: `num_output_shards` of about 1 per 100k instances).
"""

import collections
import contextlib
import logging
import uuid
from typing import Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipelines import corpus as corpus_lib
from pipelines.beam_runner import beam_pipeline, pipeline_options, worker_errors
from pipelines.pretraining import seeding
from pipelines.pretraining.contract import shard_file_name
from pipelines.pretraining.instances import corpus_of_documents, tokenize_documents
from pipelines.pretraining.settings import PretrainingDataSettings
from pipelines.pretraining.writer import counted, single_document_note
from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD

_NAMESPACE = "bert_keras.pretraining"


def write_pretraining_data_with_beam(settings: PretrainingDataSettings, *, runner: str = "DirectRunner",
                                     pipeline_args: Sequence[str] = (), overwrite: bool = False,
                                     write_documents: bool = False, log=None) -> dict:
    """Writes the static pretraining TFRecords of `write_pretraining_data` with an Apache Beam pipeline.

    Same settings, same shards (byte for byte), same `PREFIX-config.json`;
    see the module docstring for the pipeline and its determinism.

    Example:

    settings = PretrainingDataSettings(
        input="gs://bucket/wiki/*.txt", vocab_file="gs://bucket/vocab.txt",
        output_prefix="gs://bucket/pretrain/wiki", num_output_shards=1024)
    write_pretraining_data_with_beam(settings, runner="DataflowRunner", pipeline_args=[
        "--project=my-project", "--region=us-central1", "--temp_location=gs://bucket/tmp",
        "--extra_package=dist/bert_keras-0.1.0-py3-none-any.whl",
        "--requirements_file=requirements-beam.txt"])  # tensorflow, tensorflow-text, apache-beam[gcp]

    Args:
        settings: a `PretrainingDataSettings` (text files only: `tfds:` inputs
            take the local path).
        runner: a Beam runner name (`pipelines.beam_runner.RUNNERS`, or any other Beam knows).
        pipeline_args: further Beam pipeline options, e.g.
            `["--direct_num_workers=4", "--direct_running_mode=multi_processing"]`.
        overwrite: replace shards of other settings or of a changed corpus.
        write_documents: also write the documents as BERT-format text shards,
            `PREFIX-documents-0000j-of-0000N.txt` (`documents_file_name`): a
            cleaned corpus that `dynamic_pretraining_dataset` streams and the
            static writer reads.
        log: optional `print`-like callable for progress lines.

    Returns:
        A dict as `write_pretraining_data`'s: `written`, `skipped`,
        `instances`, `documents`, `sentences`, `tokens`, `replaced_lines`, `complete`,
        and `runner`.

    Raises:
        ValueError: a `tfds:` input.
        CorpusError: no input, a directory as input, bad UTF-8 (strict), empty corpus.
        VocabularyError: the vocabulary has no `[MASK]`.
        OutputExistsError: the prefix holds shards of other settings or of another corpus.
    """
    import tensorflow as tf

    from pipelines.pretraining.run_record import check_outputs_are_not_inputs, mark_complete_if_done, recorded_run
    from pipelines.tokenizer import VocabularyError, load_vocabulary, special_tokens_from_vocabulary
    from pipelines.tokenizer.added_tokens import added_token_entries, never_masked_ids

    log = log or (lambda *_: None)
    if settings.is_tfds:
        raise ValueError("The Beam path reads text files; a tfds: input takes the local path (no --runner).")
    pipeline_options(runner, pipeline_args)  # a misspelt option stops here, before the corpus is read
    # `--input 'data/*.txt' --output-prefix data/wiki --write-documents`: the first run wrote
    # data/wiki-documents-*.txt, which every rerun then read as corpus (refused as "another corpus",
    # and with --overwrite the documents doubled). Refused before anything is written.
    check_outputs_are_not_inputs(settings, also=[documents_file_name(
        settings.output_prefix, 0, settings.num_output_shards)] if write_documents else [])
    keyed = seeding.keyed_files(*zip(*corpus_lib.match_patterns(settings.input, glob=beam_glob)))
    fingerprint = beam_corpus_fingerprint([path for _, path in keyed])
    # A failure before any shard exists leaves no PREFIX-config.json of this run (`recorded_run`).
    with recorded_run(settings, fingerprint, overwrite=overwrite, log=log) as record:
        paths = {j: shard_file_name(settings.output_prefix, j, settings.num_output_shards)
                 for j in settings.output_shards()}
        todo = sorted(j for j in paths if not tf.io.gfile.exists(paths[j]))
        summary = {"runner": runner, "written": [], "skipped": [paths[j] for j in paths if j not in todo],
                   "instances": 0, "documents": 0, "sentences": 0, "tokens": 0, "replaced_lines": 0, "complete": False}
        if summary["skipped"]:
            log(f"{len(summary['skipped'])} shard(s) already complete, skipped")
        if write_documents:
            todo = sorted(paths)  # the documents come from the same run
        if todo:
            vocabulary = load_vocabulary(settings.vocab_file)
            special = special_tokens_from_vocabulary(vocabulary)
            if special.mask is None:
                raise VocabularyError(
                    f"{settings.vocab_file} has no {special.mask_token} token: masked-LM pretraining replaces tokens "
                    f"with it. Add {special.mask_token} to the vocabulary (e.g. in place of an [unusedN] line).")
            vocab = _Vocab(size=len(vocabulary), mask=special.mask, cls=special.cls, sep=special.sep, pad=special.pad,
                           continuation=tuple(i for i, t in enumerate(vocabulary) if t.startswith("##")),
                           never_masked=tuple(never_masked_ids(
                               added_token_entries(settings.added_tokens, vocabulary), special)))
            log(f"{runner}: {len(keyed)} file(s), {len(todo)} shard(s) to write")
            pipeline = beam_pipeline(runner, pipeline_args)
            build_pipeline(pipeline, settings, keyed, vocab, todo, write_documents=write_documents)
            with _raised_not_logged(), worker_errors():  # a bad corpus line: the error the caller reports, once
                result = pipeline.run()
                result.wait_until_finish()
            counters = _counters(result)
            summary.update({name: counters.get(name, 0)
                            for name in ("instances", "documents", "sentences", "tokens", "replaced_lines")})
            if summary["replaced_lines"]:
                log(f"warning: {summary['replaced_lines']} line(s) were not valid UTF-8; bad bytes became U+FFFD")
            if summary["documents"] == 0 and not any(tf.io.gfile.exists(paths[j]) for j in todo):
                raise corpus_lib.CorpusError(f"No sentence of {[p for _, p in keyed][:5]} has any token.")
            for j in todo:  # a shard no (document, dupe) hashed to: empty, as the local path writes it
                if not tf.io.gfile.exists(paths[j]):
                    with tf.io.TFRecordWriter(paths[j]):
                        pass
            summary["written"] = [paths[j] for j in todo]
            if write_documents:
                summary["documents_written"] = [
                    documents_file_name(settings.output_prefix, j, settings.num_output_shards)
                    for j in range(settings.num_output_shards)]
                for path in summary["documents_written"]:
                    if not tf.io.gfile.exists(path):
                        with tf.io.gfile.GFile(path, "w"):
                            pass
            log(f"{counted(summary['documents'], 'document')}, {counted(summary['instances'], 'instance')} in "
                f"{len(todo)} shard(s)")
            note = single_document_note(summary["documents"], summary["sentences"], settings)
            if note:  # as the local path says it
                log(note)
    summary["complete"] = mark_complete_if_done(settings, record)
    return summary


class _DropLoggedExceptions(logging.Filter):
    """Drops the ERROR record of an exception (Beam's DoFn runner logs each one it re-raises)."""

    def filter(self, record):
        return not (record.exc_info and record.levelno >= logging.ERROR)


@contextlib.contextmanager
def _raised_not_logged():
    """Beam's DoFn runner logs a DoFn's exception (message and traceback) and raises it again: the
    caller reports it, so in this process it is not logged too (the message would be printed twice)."""
    logger = logging.getLogger("apache_beam.runners.common")
    dropping = _DropLoggedExceptions()
    logger.addFilter(dropping)
    try:
        yield
    finally:
        logger.removeFilter(dropping)


def build_pipeline(pipeline, settings: PretrainingDataSettings, keyed_files, vocab, shards, write_documents=False):
    """Adds the stage's transforms to `pipeline` (see the module docstring); returns the written shard paths."""
    documents = (
        pipeline
        | "Files" >> beam.Create(list(keyed_files))
        | "SpreadFiles" >> beam.Reshuffle()
        | "ReadDocuments" >> beam.ParDo(_ReadDocuments(settings.format, settings.decode_errors))
    )
    if write_documents:
        n = settings.num_output_shards
        _ = (
            documents
            | "DocumentShard" >> beam.Map(lambda d: (int(seeding.shard_of(settings.seed, np.uint64(d[0]), 0, n)), d))
            | "GroupDocumentShards" >> beam.GroupByKey()
            | "WriteDocuments" >> beam.ParDo(_WriteDocuments(settings.output_prefix, n))
        )
    tokenized = (
        documents
        | "BatchDocuments" >> beam.BatchElements(min_batch_size=16, max_batch_size=512)
        | "Tokenize" >> beam.ParDo(_Tokenize(settings.vocab_file, settings.lowercase, settings.strip_accents,
                                                settings.pre_tokenizer, settings.max_input_chars_per_word,
                                                settings.added_tokens, settings.unicode_normalization))
    )
    count = tokenized | "CountDocuments" >> beam.combiners.Count.Globally()
    return (
        tokenized
        | "Bucket" >> beam.Map(_to_bucket, seed=settings.seed, per_bucket=settings.documents_per_bucket,
                               count=beam.pvalue.AsSingleton(count))
        | "GroupBuckets" >> beam.GroupByKey()
        | "Instances" >> beam.ParDo(_BucketInstances(settings, vocab, shards))
        | "SpreadInstances" >> beam.Reshuffle()
        | "BatchInstances" >> beam.BatchElements(min_batch_size=256, max_batch_size=2048)
        | "MaskAndEncode" >> beam.ParDo(_MaskAndEncode(settings, vocab))
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShard(settings.output_prefix, settings.num_output_shards))
    )


def beam_glob(pattern: str):
    """The files a pattern matches on Beam's file systems (local, gs://, s3://, hdfs://, ...)."""
    try:
        results = FileSystems.match([pattern])
    except Exception:  # Beam raises for a pattern that matches nothing on some file systems
        return []
    return [metadata.path for metadata in results[0].metadata_list]


def beam_corpus_fingerprint(files) -> dict:
    """`run_record.corpus_fingerprint` read through Beam's file systems (the same digest for the same files)."""
    import hashlib

    from pipelines.pretraining.run_record import LINE_READER, SAMPLE_BYTES

    digest = hashlib.sha256()
    total = 0
    for path in files:
        size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
        total += size
        digest.update(f"{path}\t{size}\n".encode())
        with FileSystems.open(path, compression_type="uncompressed") as f:
            for offset in sorted({0, max(0, size // 2 - SAMPLE_BYTES // 2), max(0, size - SAMPLE_BYTES)}):
                f.seek(offset)
                digest.update(f.read(SAMPLE_BYTES))
    return {"files": len(files), "bytes": total, "sha256": digest.hexdigest(), "line_reader": LINE_READER}


class _Vocab(collections.namedtuple("_Vocab", "size mask cls sep pad continuation never_masked")):
    """What masking needs of the vocabulary (picklable); `never_masked`: the special added tokens' ids."""


def _counter(name):
    return Metrics.counter(_NAMESPACE, name)


def _counters(result) -> dict:
    out = {}
    try:
        for counter in result.metrics().query()["counters"]:
            if counter.key.metric.namespace == _NAMESPACE:
                value = counter.committed if counter.committed is not None else counter.attempted
                out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + int(value or 0)
    except Exception as error:  # a runner without metrics: the summary lacks the counts
        logging.warning("Beam metrics unavailable: %s", error)
    return out


def _file_lines(path):
    with FileSystems.open(path, compression_type="uncompressed") as f:
        yield from corpus_lib.file_lines(f)  # as `read_corpus` splits them: a lone CR ends a line


class _ReadDocuments(beam.DoFn):
    """(file key, path) -> (document id, sentences) for each document of the file, read whole."""

    def __init__(self, format, decode_errors):
        self.format = format
        self.decode_errors = decode_errors
        self.replaced = _counter("replaced_lines")

    def process(self, keyed_file):
        file_key, path = keyed_file
        replaced = []

        def decode(raw, where, line_number):
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                if self.decode_errors == "strict":
                    return corpus_lib._CorpusBuilder().decode(raw, where, line_number, "strict")
                replaced.append(line_number)
                return raw.decode("utf-8", "replace")

        for ordinal, sentences in enumerate(corpus_lib.read_file_documents(
                _file_lines(path), path, format=self.format, decode=decode)):
            yield int(seeding.document_ids([file_key], [ordinal])[0]), sentences
        self.replaced.inc(len(replaced))


class _Tokenize(beam.DoFn):
    """Batches of (document id, sentences) -> (document id, token ids, sentence lengths); empty documents dropped."""

    def __init__(self, vocab_file, lowercase, strip_accents=None, pre_tokenizer=None,
                 max_input_chars_per_word=ORIGINAL_MAX_CHARS_PER_WORD, added_tokens=(), unicode_normalization=None):
        self.vocab_file = vocab_file
        self.unicode_normalization = unicode_normalization
        self.added_tokens = [dict(spec) for spec in added_tokens]
        self.max_input_chars_per_word = max_input_chars_per_word
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.pre_tokenizer = pre_tokenizer
        self.documents = _counter("documents")
        self.sentences = _counter("sentences")
        self.tokens = _counter("tokens")

    def setup(self):
        from pipelines.tokenizer import BertTokenizer

        self.tokenizer = BertTokenizer(self.vocab_file, lowercase=self.lowercase, strip_accents=self.strip_accents,
                                       pre_tokenizer=self.pre_tokenizer, added_tokens=self.added_tokens,
                                       max_input_chars_per_word=self.max_input_chars_per_word,
                                       unicode_normalization=self.unicode_normalization)

    def process(self, batch):
        tokenized = tokenize_documents([sentences for _, sentences in batch], self.tokenizer)
        for (document_id, _), (ids, lengths) in zip(batch, tokenized):
            if len(lengths):
                self.documents.inc()
                self.sentences.inc(len(lengths))
                self.tokens.inc(len(ids))
                yield document_id, ids, lengths


def _to_bucket(document, seed, per_bucket, count):
    buckets = seeding.bucket_count(count, per_bucket)
    return int(seeding.bucket_of(seed, np.uint64(document[0]), buckets)), document


class _BucketInstances(beam.DoFn):
    """(bucket, its documents) -> (shard, (key, row, a_length, label)) for every (document, dupe) of `shards`."""

    def __init__(self, settings, vocab, shards):
        self.settings = settings
        self.vocab = vocab
        self.shards = frozenset(shards)
        self.instances = _counter("instances")

    def process(self, bucket_documents):
        from pipelines.pretraining.shard_writer import document_instances

        s = self.settings
        _, documents = bucket_documents
        documents = sorted(documents, key=lambda d: d[0])
        tokens = corpus_of_documents(documents)
        ids = tokens.document_ids
        shards = seeding.shard_of(s.seed, ids[None, :], np.arange(s.dupe_factor, dtype=np.uint64)[:, None],
                                  s.num_output_shards)
        for dupe in range(s.dupe_factor):
            for document in range(len(documents)):
                shard = int(shards[dupe, document])
                if shard not in self.shards:
                    continue
                rows, a_lengths, labels, keys = [], [], [], []
                document_instances(tokens, document, dupe, s, self.vocab.cls, self.vocab.sep, None,
                                   rows, a_lengths, labels, keys)
                self.instances.inc(len(rows))
                for instance in zip(keys, rows, a_lengths, labels):
                    yield shard, instance


class _MaskAndEncode(beam.DoFn):
    """Batches of (shard, (key, row, a_length, label)) -> (shard, (key, record bytes))."""

    def __init__(self, settings, vocab):
        self.settings = settings
        self.vocab = vocab

    def setup(self):
        from pipelines.pretraining.shard_writer import ShardJob, _masker_for

        v = self.vocab
        job = ShardJob(index=-1, path="", settings=self.settings, vocab_size=v.size, mask_id=v.mask, cls_id=v.cls,
                       sep_id=v.sep, pad_id=v.pad, continuation_ids=v.continuation, never_masked_ids=v.never_masked)
        self.masker = _masker_for(job)

    def process(self, batch):
        from pipelines.pretraining.shard_writer import pad_and_mask_batch
        from pipelines.pretraining.wire_format import encode_examples

        columns = pad_and_mask_batch(
            [np.asarray(row) for _, (_, row, _, _) in batch], [a for _, (_, _, a, _) in batch],
            [label for _, (_, _, _, label) in batch], self.masker, self.settings.max_seq_length, self.vocab.pad,
            keys=[key for _, (key, _, _, _) in batch], vocab_size=self.vocab.size)
        for (shard, (key, _, _, _)), record in zip(batch, encode_examples(columns)):
            yield shard, (key, record)


class _WriteShard(beam.DoFn):
    """(shard, its (key, record) pairs) -> the shard file, records in key order, written atomically."""

    def __init__(self, prefix, num_output_shards):
        self.prefix = prefix
        self.num_output_shards = num_output_shards

    def process(self, shard_records):
        from pipelines.atomic_writes import atomic_tfrecord_writer

        shard, records = shard_records
        records = sorted(records, key=lambda pair: pair[0])
        path = shard_file_name(self.prefix, shard, self.num_output_shards)
        # A retried or speculative bundle writes the same bytes under another temporary name.
        with atomic_tfrecord_writer(path, f"{path}.tmp-beam-{uuid.uuid4().hex}") as writer:
            for _, record in records:
                writer.write(record)
        yield path


def documents_file_name(prefix: str, index: int, num_shards: int) -> str:
    """`prefix-documents-00003-of-00008.txt`: a BERT-format text shard of the documents (`write_documents`)."""
    return f"{prefix}-documents-{index:05d}-of-{num_shards:05d}.txt"


class _WriteDocuments(beam.DoFn):
    """(shard, its (document id, sentences)) -> a BERT-format text file, documents in id order, written atomically."""

    def __init__(self, prefix, num_shards):
        self.prefix = prefix
        self.num_shards = num_shards

    def process(self, shard_documents):
        from pipelines.atomic_writes import atomic_file

        shard, documents = shard_documents
        path = documents_file_name(self.prefix, shard, self.num_shards)
        with atomic_file(path) as f:  # any Beam filesystem; removed if the bundle fails
            for _, sentences in sorted(documents, key=lambda d: d[0]):
                f.write("\n".join(sentences) + "\n\n")
        yield path
