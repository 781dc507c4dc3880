"""`write_pretraining_data`: static pretraining TFRecords, as the original `create_pretraining_data.py`.

Orchestration only: check the prefix against its record (`run_record`),
tokenize the corpus once, and write the missing shards (`shard_writer`) in
this process or in worker processes (`workers`).
"""

import contextlib
import functools
import json
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from pipelines import corpus as corpus_lib
from pipelines.pretraining import seeding
from pipelines.pretraining.contract import shard_file_name
from pipelines.pretraining.instances import tokenize_corpus
from pipelines.pretraining.run_record import corpus_fingerprint, mark_complete_if_done, recorded_run
from pipelines.pretraining.settings import PretrainingDataSettings
from pipelines.pretraining.shard_writer import ShardJob, write_shard
from pipelines.pretraining.workers import ShardWorkers
from pipelines.tokenizer import BertTokenizer, VocabularyError
from pipelines.tokenizer.added_tokens import never_masked_ids


def write_pretraining_data(settings: PretrainingDataSettings, *, workers: Optional[int] = None,
                           overwrite: bool = False, log=None) -> dict:
    """Writes static pretraining TFRecords, as the original `create_pretraining_data.py`.

    Instances are built per document exactly as the original (see
    `create_instances_from_document`), `dupe_factor` times with different
    masks, and masked with `MaskedLmMasker`. The records carry the features
    of `run_pretraining.py` (`feature_spec`), so our reader, the original
    TF1 trainer and tf-models-official all read them.

    Every random choice is seeded from (seed, document id, dupe index), never
    from a process's order (`pipelines.pretraining.seeding`): output shard `j`
    (`prefix-0000j-of-0000N.tfrecord`) is a function of the corpus, the
    settings and `j` only. The same seed gives byte-identical shards whatever
    `workers`, `num_shards` or the order shards are written in, and the same
    shards as the Apache Beam path (`write_pretraining_data_with_beam`) on any
    runner; the multiset of instances does not depend on `num_output_shards`
    either. Each shard is written to a temporary file and renamed into
    place when complete, so an existing shard is always whole, and a rerun
    skips it. A killed run leaves only `*.tmp-*` files, which the rerun
    replaces. `prefix-config.json` records the settings and a fingerprint of
    the corpus: a rerun with other settings, or on a changed corpus, is
    refused when shards exist (see `pipelines.pretraining.run_record`); a run
    that fails before any shard exists leaves no record.

    Example:

    >>> settings = PretrainingDataSettings(  # doctest: +SKIP
    ...     input="pipelines/data/sample_corpus.txt", vocab_file="vocab.txt",
    ...     output_prefix="/tmp/pretrain/sample", dupe_factor=2, num_output_shards=2)
    >>> summary = write_pretraining_data(settings)  # doctest: +SKIP
    >>> ds = pretraining_dataset("/tmp/pretrain/sample-*.tfrecord", batch_size=8,  # doctest: +SKIP
    ...                          seq_length=128, max_predictions_per_seq=20)

    Args:
        settings: a `PretrainingDataSettings`.
        workers: processes writing shards in parallel. Default: one per
            core when the corpus is big enough to repay their start-up (a
            TensorFlow start-up each: about 25 MB of text with
            `dupe_factor=5`), else 1 (the work stays in this process). Workers
            start with "forkserver" (see `pipelines.pretraining.workers`): a
            script calling this with `workers > 1` needs the usual
            `if __name__ == "__main__":` guard.
        overwrite: replace shards of other settings or of a changed corpus
            under the prefix instead of refusing.
        log: optional `print`-like callable for progress lines.

    Returns:
        A dict: `written` and `skipped` shard paths, `workers` (processes used), `instances` written,
        `documents`, `sentences`, `tokens`, `replaced_lines` (bad UTF-8 lines read
        with replacement) and `complete` (every output shard exists).

    Raises:
        VocabularyError: the vocabulary has no `[MASK]`.
        CorpusError: no input, a directory as input, bad UTF-8 (strict), empty corpus.
        OutputExistsError: the prefix holds shards of other settings or of another corpus.
    """
    log = log or (lambda *_: None)
    fingerprint = corpus_fingerprint(settings)
    # A failure before any shard exists leaves no PREFIX-config.json of this run (`recorded_run`).
    with recorded_run(settings, fingerprint, overwrite=overwrite, log=log) as record:
        paths = {j: shard_file_name(settings.output_prefix, j, settings.num_output_shards)
                 for j in settings.output_shards()}
        todo = [j for j in paths if not tf.io.gfile.exists(paths[j])]
        summary = {"workers": 1, "written": [], "skipped": [paths[j] for j in paths if j not in todo], "instances": 0,
                   "documents": 0, "sentences": 0, "tokens": 0, "replaced_lines": 0, "complete": False}
        if summary["skipped"]:
            log(f"{len(summary['skipped'])} shard(s) already complete, skipped")
        if todo:
            if workers is None:
                workers = _automatic_workers(settings, fingerprint)
            workers = max(1, min(len(todo), workers))
            # Worker processes take seconds to start: start them first, so they get
            # ready while this process builds the tokenizer and tokenizes the corpus.
            # On an error or an interrupt the workers stop mid-shard, removing their temporary files.
            with ShardWorkers(workers) if workers > 1 else contextlib.nullcontext() as pool:
                _write(settings, todo, paths, pool, summary, log)
    summary["complete"] = mark_complete_if_done(settings, record)
    return summary


def _write(settings, todo, paths, pool, summary, log):
    tokenizer = _cached_tokenizer(settings.vocab_file, settings.lowercase, settings.strip_accents,
                                  settings.pre_tokenizer, settings.max_input_chars_per_word,
                                  json.dumps(list(settings.added_tokens), sort_keys=True),
                                  settings.unicode_normalization, *_file_version(settings.vocab_file))
    special = tokenizer.special_tokens
    if special.mask is None:
        raise VocabularyError(
            f"{settings.vocab_file} has no {special.mask_token} token: masked-LM pretraining replaces tokens with "
            f"it. Add {special.mask_token} to the vocabulary (e.g. in place of an [unusedN] line)."
        )
    continuation_ids = tuple(i for i, t in enumerate(tokenizer.vocabulary) if t.startswith("##"))
    jobs = [
        ShardJob(index=j, path=paths[j], settings=settings, vocab_size=tokenizer.vocabulary_size,
                 mask_id=special.mask, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad,
                 continuation_ids=continuation_ids,
                 never_masked_ids=tuple(never_masked_ids(tokenizer.added_tokens, special)))
        for j in todo
    ]
    corpus = corpus_lib.read_corpus(settings.corpus_source, format=settings.format,
                                    decode_errors=settings.decode_errors, tfds_split=settings.tfds_split,
                                    tfds_text_field=settings.tfds_text_field)
    summary["replaced_lines"] = corpus.replaced_lines
    if corpus.replaced_lines:
        log("warning: " + corpus.replacement_report())
    tokens = tokenize_corpus(corpus, tokenizer, document_ids=corpus_document_ids(settings, corpus))
    summary["documents"] = tokens.num_documents
    summary["sentences"] = len(tokens.sentence_splits) - 1
    summary["tokens"] = len(tokens.ids)
    if tokens.num_documents == 0:
        raise corpus_lib.CorpusError(f"No sentence of {corpus.files[:5]} has any token.")
    log(f"{counted(tokens.num_documents, 'document')}, {counted(summary['sentences'], 'sentence')}, "
        f"{counted(len(tokens.ids), 'token')}")
    note = single_document_note(tokens.num_documents, summary["sentences"], settings)
    if note:
        log(note)
    if pool is None or len(jobs) < 2:
        counts = [write_shard(job, tokens) for job in jobs]
    else:
        summary["workers"] = pool.processes
        counts = pool.write(jobs, tokens, scratch_near=settings.output_prefix)
    for job, count in zip(jobs, counts):
        log(f"wrote {job.path} ({counted(count, 'instance')})")
    summary["written"] = [job.path for job in jobs]
    summary["instances"] = int(sum(counts))


def counted(count: int, noun: str) -> str:
    """`count` and `noun`, plural unless one: the writers' log lines.

    >>> counted(1, "document"), counted(2, "instance"), counted(0, "sentence")
    ('1 document', '2 instances', '0 sentences')
    """
    return f"{count} {noun}{'' if count == 1 else 's'}"


def single_document_note(documents: int, sentences: int, settings: PretrainingDataSettings) -> str:
    """A note when the whole corpus read as one document of several sentences ("" otherwise): a file
    in BERT's layout without the blank lines between documents (or prose meant as `lines`). The
    next-sentence task's "random next" segments then come from the same document, as the original
    does when it finds no other, so its negatives are sentences of the same text.

    >>> settings = PretrainingDataSettings(input="c.txt", vocab_file="v.txt", output_prefix="out/pt")
    >>> single_document_note(1, 114, settings)[:63]
    'note: the corpus is one document (114 sentences): no blank line'
    >>> single_document_note(30, 114, settings)
    ''
    """
    if documents != 1 or sentences < 2 or settings.is_tfds:
        return ""
    where = ("no blank line separates documents (--format bert: one sentence a line, a blank line between "
             "documents; --format lines: one document a line)" if settings.format == "bert" else
             f"--format {settings.format} read it so")
    return (f"note: the corpus is one document ({sentences} sentences): {where}. The next-sentence task's "
            "random next segments then come from the same document, as the original does when there is no "
            "other one.")


def corpus_document_ids(settings: PretrainingDataSettings, corpus: corpus_lib.Corpus) -> np.ndarray:
    """The stable uint64 id of each document of `corpus`: (file key, ordinal in file) hashed (`seeding`)."""
    if settings.is_tfds:
        file_keys = [corpus.files[0]]
    else:
        keyed = dict((path, key) for key, path in seeding.keyed_files(*zip(*corpus_lib.match_patterns(settings.input))))
        file_keys = [keyed[path] for path in corpus.files]
    return seeding.document_ids([file_keys[f] for f in corpus.document_files.tolist()], corpus.document_ordinals)


def _file_version(path):
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"Vocabulary file not found: {path}")
    stat = tf.io.gfile.stat(path)
    return stat.length, stat.mtime_nsec


@functools.lru_cache(maxsize=2)
def _cached_tokenizer(vocab_file, lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word, added_tokens,
                      unicode_normalization, length, mtime):
    """Tokenizers take seconds to build (Unicode tables): reuse one per vocab file version.
    `added_tokens`: the settings' added tokens as JSON (a hashable key)."""
    del length, mtime  # part of the cache key only
    return BertTokenizer(vocab_file, lowercase=lowercase, strip_accents=strip_accents, pre_tokenizer=pre_tokenizer,
                         max_input_chars_per_word=max_input_chars_per_word, added_tokens=json.loads(added_tokens),
                         unicode_normalization=unicode_normalization)


# Seconds of one core per input byte and dupe, writing in-process (measured:
# 3 MB x 5 dupes in about 2.5 s on a 2-core cloud VM).
_SECONDS_PER_BYTE_AND_DUPE = 1.7e-7
# A worker process costs a TensorFlow start-up (about 5 s of a core); below
# this much estimated work, one process finishes first.
_MIN_SECONDS_FOR_WORKERS = 20.0


def _automatic_workers(settings, fingerprint):
    """All cores for big jobs, one process for small ones (see `workers` in `write_pretraining_data`)."""
    cores = os.cpu_count() or 1
    if settings.is_tfds:
        return cores
    estimate = fingerprint["bytes"] * settings.dupe_factor * _SECONDS_PER_BYTE_AND_DUPE
    return cores if estimate >= _MIN_SECONDS_FOR_WORKERS else 1
