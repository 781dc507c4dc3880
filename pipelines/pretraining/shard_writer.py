"""Writing one output shard: the instances of its (document, dupe) pairs, masked and written atomically.

Every random choice is seeded from (seed, document id, dupe index)
(`pipelines.pretraining.seeding`): output shard `j` holds the instances of the
(document, dupe) pairs that hash to `j`, ordered by their instance keys, each
masked with its own key's draws. A shard is thus a function of the corpus, the
settings and `j` only: any process, and the Apache Beam path, writes the same
bytes for it.
"""

import concurrent.futures
import dataclasses
import functools
import glob
import os

import numpy as np
import tensorflow as tf

from pipelines.atomic_writes import atomic_tfrecord_writer, owner_is_gone, owner_tag, process_is_running
from pipelines.masking import MaskedLmMasker
from pipelines.pretraining import seeding
from pipelines.pretraining.instances import TokenizedCorpus, create_instances_from_document
from pipelines.pretraining.settings import PretrainingDataSettings
from pipelines.pretraining.wire_format import encode_examples

# Instances are masked and serialized this many at a time.
WRITE_BATCH = 2048


@dataclasses.dataclass(frozen=True)
class ShardJob:
    """What a process needs to write one output shard (all picklable).

    Attributes:
        index: the output shard `j`.
        path: its final file name.
        settings: the run's `PretrainingDataSettings`.
        vocab_size, mask_id, cls_id, sep_id, pad_id: from the vocabulary.
        continuation_ids: ids of the `##` pieces (whole-word masking).
        never_masked_ids: more ids never chosen for the masked LM, as [CLS] / [SEP] / [PAD]: the
            special added tokens (`pipelines.tokenizer.added_tokens.never_masked_ids`).
    """

    index: int
    path: str
    settings: PretrainingDataSettings
    vocab_size: int
    mask_id: int
    cls_id: int
    sep_id: int
    pad_id: int
    continuation_ids: tuple
    never_masked_ids: tuple = ()

    @property
    def temporary_path(self) -> str:
        """Where this process writes the shard before renaming it into place: `PATH.tmp-<owner>`,
        the process's `owner_tag` (pid, start time, host), so two runs writing the same prefix at
        once (on one machine or on two sharing the directory) never write or remove each other's."""
        return f"{self.path}.tmp-{owner_tag()}"


def write_shard(job: ShardJob, tokens: TokenizedCorpus) -> int:
    """Builds, masks and writes one output shard atomically. Returns its instance count.

    Example:

    >>> count = write_shard(job, tokenize_corpus(corpus, tokenizer))  # doctest: +SKIP

    Args:
        job: the `ShardJob`.
        tokens: the whole corpus as a `TokenizedCorpus`.
    """
    s = job.settings
    seq_length = s.max_seq_length
    buckets = nsp_buckets(tokens, s.seed, s.documents_per_bucket)
    ids = tokens.document_ids
    shards = seeding.shard_of(s.seed, ids[None, :], np.arange(s.dupe_factor, dtype=np.uint64)[:, None],
                              s.num_output_shards)
    rows, a_lengths, labels, keys = [], [], [], []
    for dupe in range(s.dupe_factor):
        for document in np.flatnonzero(shards[dupe] == job.index).tolist():
            document_instances(tokens, document, dupe, s, job.cls_id, job.sep_id, buckets.candidates(document),
                               rows, a_lengths, labels, keys)
    order = seeding.key_order(keys).tolist()

    masker = _masker_for(job)
    batches = [order[start:start + WRITE_BATCH] for start in range(0, len(order), WRITE_BATCH)]

    def pad_and_mask(batch_number):
        batch = batches[batch_number]
        return pad_and_mask_batch([rows[i] for i in batch], [a_lengths[i] for i in batch],
                                  [labels[i] for i in batch], masker, seq_length, job.pad_id,
                                  keys=[keys[i] for i in batch], vocab_size=job.vocab_size)

    # A full disk or an interrupt never leaves a file a rerun would trust (atomic_tfrecord_writer).
    # TF releases the GIL while it masks: mask batch k + 1 on a thread while this one encodes
    # and writes batch k.
    with atomic_tfrecord_writer(job.path, job.temporary_path) as writer, \
            concurrent.futures.ThreadPoolExecutor(1) as executor:
        upcoming = executor.submit(pad_and_mask, 0) if batches else None
        for batch_number in range(len(batches)):
            columns = upcoming.result()
            if batch_number + 1 < len(batches):
                upcoming = executor.submit(pad_and_mask, batch_number + 1)
            for record in encode_examples(columns):
                writer.write(record)
    # Leftovers of killed runs for this shard are garbage now; a live run's file is its own.
    remove_dead_writers_files([job.path])
    return len(rows)


def remove_dead_writers_files(paths):
    """Removes the temporary files of shards `paths` (`PATH.tmp-<owner>`, `ShardJob.temporary_path`)
    whose writer no longer runs on this host; returns them.

    A live writer's file (another run writing the same prefix now), another host's, and any
    name that records no owner (`.tmp-beam-...`) stay. Names of older versions (`PATH.tmp-<pid>`)
    are judged by their pid.
    """
    removed = []
    for path in paths:
        remote = "://" in path
        pattern = f"{path}.tmp-*" if remote else glob.escape(path) + ".tmp-*"
        for leftover in (tf.io.gfile.glob(pattern) if remote else glob.glob(pattern)):
            owner = leftover.rsplit(".tmp-", 1)[1]
            legacy = owner.isascii() and owner.isdigit()
            if (not process_is_running(int(owner))) if legacy else owner_is_gone(owner):
                try:
                    tf.io.gfile.remove(leftover) if remote else os.remove(leftover)
                except (OSError, tf.errors.NotFoundError):
                    continue  # removed meanwhile (by its run, or another one cleaning up)
                removed.append(leftover)
    return removed


class NspBuckets:
    """The NSP buckets of a corpus: for each document, the documents its random next segment comes from.

    A bucket's documents are sorted by id: drawn from them, as
    `create_instances_from_document` draws, a local run and the Beam path
    (which reads each bucket as a corpus of its own, sorted by id) pick the
    same document.
    """

    def __init__(self, tokens: TokenizedCorpus, seed: int, documents_per_bucket: int):
        ids = tokens.document_ids
        count = seeding.bucket_count(len(ids), documents_per_bucket)
        self.bucket = seeding.bucket_of(seed, ids, count)
        by_id = np.argsort(ids, kind="stable")
        by_bucket = by_id[np.argsort(self.bucket[by_id], kind="stable")]
        splits = np.searchsorted(self.bucket[by_bucket], np.arange(count + 1))
        self.members = [by_bucket[splits[b]:splits[b + 1]] for b in range(count)]

    def candidates(self, document: int) -> np.ndarray:
        return self.members[self.bucket[document]]


_BUCKETS_CACHE = {}


def nsp_buckets(tokens: TokenizedCorpus, seed: int, documents_per_bucket: int) -> NspBuckets:
    """`NspBuckets` of `tokens`, computed once per corpus object (a worker writes several shards of one corpus)."""
    key = (id(tokens), len(tokens.document_ids), seed, documents_per_bucket)
    if key not in _BUCKETS_CACHE:
        _BUCKETS_CACHE.clear()
        _BUCKETS_CACHE[key] = NspBuckets(tokens, seed, documents_per_bucket)
    return _BUCKETS_CACHE[key]


def document_instances(tokens: TokenizedCorpus, document: int, dupe: int, settings: PretrainingDataSettings,
                       cls_id: int, sep_id: int, candidates, rows, a_lengths, labels, keys):
    """Appends the instances of (document, dupe) to `rows`, `a_lengths`, `labels` and `keys`.

    Seeded by (seed, document id, dupe) alone (`seeding.instance_rng`, `seeding.instance_keys`).

    Args:
        tokens: a `TokenizedCorpus` with `document_ids`.
        document: the document's index in `tokens`.
        dupe: the dupe index in `[0, dupe_factor)`.
        settings: the run's `PretrainingDataSettings`.
        cls_id, sep_id: ids of `[CLS]` and `[SEP]`.
        candidates: the documents of its NSP bucket, sorted by id (None: all of `tokens`, in order).
        rows, a_lengths, labels, keys: lists appended to (rows: `[CLS] A [SEP] B [SEP]` id arrays).
    """
    document_id = int(tokens.document_ids[document])
    rng = seeding.instance_rng(settings.seed, document_id, dupe)
    count = 0
    for a, b, is_random_next in create_instances_from_document(
        tokens, document, rng, max_seq_length=settings.max_seq_length, short_seq_prob=settings.short_seq_prob,
        candidates=candidates,
    ):
        rows.append(np.concatenate([[cls_id], a, [sep_id], b, [sep_id]]))
        a_lengths.append(len(a))
        labels.append(int(is_random_next))
        count += 1
    keys.extend(seeding.instance_keys(settings.seed, document_id, dupe, count).tolist())
    return count


def pad_and_mask_batch(rows, a_lengths, labels, masker, seq_length, pad_id, *, keys, vocab_size):
    """Pads and masks a batch of instances: the feature columns of their records.

    Each instance is masked with the draws of its own key
    (`seeding.masking_noise`): its record does not depend on the batch.

    Args:
        rows: int arrays `[CLS] A [SEP] B [SEP]`.
        a_lengths: the length of each A.
        labels: 1 for a random next B, else 0.
        masker: a (traced) `MaskedLmMasker`.
        seq_length: `S`.
        pad_id: id of `[PAD]`.
        keys: the instances' uint64 keys (`seeding.instance_keys`).
        vocab_size: the vocabulary size (random replacement ids).

    Returns:
        A dict of numpy columns named as `run_pretraining.py`'s features.
    """
    count = len(rows)
    lengths = np.fromiter((len(row) for row in rows), np.int64, count)
    position = np.arange(seq_length)[None, :]
    input_mask = (position < lengths[:, None]).astype(np.int64)
    token_ids = np.full([count, seq_length], pad_id, np.int64)
    token_ids[input_mask.astype(bool)] = np.concatenate(rows) if rows else []
    # B and its [SEP] start after [CLS] A [SEP].
    segment_ids = ((position >= np.asarray(a_lengths)[:, None] + 2) & (input_mask > 0)).astype(np.int64)
    noise = {name: tf.constant(value) for name, value in seeding.masking_noise(keys, seq_length, vocab_size).items()}
    masked = masker(tf.constant(token_ids), noise=noise, padding_mask=tf.constant(input_mask))
    masked = {name: value.numpy() for name, value in masked.items()}
    return {
        "input_ids": masked["token_ids"], "input_mask": input_mask, "segment_ids": segment_ids,
        "masked_lm_positions": masked["masked_lm_positions"], "masked_lm_ids": masked["masked_lm_ids"],
        "masked_lm_weights": masked["masked_lm_weights"],
        "next_sentence_labels": np.asarray(labels, np.int64)[:, None],
    }


def _masker_for(job):
    s = job.settings
    return _masker_function(
        job.vocab_size, job.mask_id, (job.cls_id, job.sep_id, job.pad_id, *job.never_masked_ids), s.max_predictions_per_seq,
        s.masked_lm_prob, s.whole_word_mask, job.continuation_ids,
    )


@functools.lru_cache(maxsize=4)
def _masker_function(vocab_size, mask_id, special_ids, max_predictions_per_seq, masked_lm_prob, whole_word_mask,
                     continuation_ids):
    """A traced masker, built once per process and reused for every shard it writes."""
    masker = MaskedLmMasker(
        vocab_size=vocab_size, mask_id=mask_id, special_ids=special_ids,
        max_predictions_per_seq=max_predictions_per_seq, masked_lm_prob=masked_lm_prob,
        whole_word_mask=whole_word_mask, continuation_ids=continuation_ids,
    )
    # One trace serves every full batch (the last, shorter one adds one more):
    # much faster than running the ops one by one.
    # No autograph: the masker has no Python control flow on tensors, and
    # converting it costs a second per process.
    return tf.function(masker.__call__, reduce_retracing=True, autograph=False)


