"""BERT pretraining data (masked LM + next sentence prediction): write, read, or stream.

Two modes feed the same `(x, y)` batches to a model:

- Static: `write_pretraining_data` builds instances exactly as the original
  `create_pretraining_data.py` and writes TFRecords with the feature names and
  dtypes of google-research/bert's `run_pretraining.py`;
  `pretraining_dataset` reads them (ours or the original's).
- Dynamic: `dynamic_pretraining_dataset` tokenizes, pairs and masks inside
  `tf.data`, with fresh masks every epoch.

The batch contract (static shapes, `drop_remainder=True`):

```
x = {"token_ids": int32 [B, S], "segment_ids": int32 [B, S],
     "padding_mask": int32 [B, S], "masked_lm_positions": int32 [B, P]}
y = {"masked_lm_ids": int32 [B, P], "masked_lm_weights": float32 [B, P],
     "next_sentence_labels": int32 [B]}          # 0 = IsNext, 1 = random next
```
"""

import concurrent.futures
import dataclasses
import functools
import json
import multiprocessing
import os
import random
import shutil
import tempfile
import weakref
from typing import List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from pipelines import corpus as corpus_lib
from pipelines.masking import MaskedLmMasker
from pipelines.packing import BertPacker
from pipelines.tokenizer import BertTokenizer, VocabularyError

# google-research/bert run_pretraining.py `name_to_features`, [S] / [P] wide.
FEATURE_DTYPES = {
    "input_ids": tf.int64,
    "input_mask": tf.int64,
    "segment_ids": tf.int64,
    "masked_lm_positions": tf.int64,
    "masked_lm_ids": tf.int64,
    "masked_lm_weights": tf.float32,
    "next_sentence_labels": tf.int64,
}
# Instances are masked and serialized this many at a time.
_WRITE_BATCH = 2048


def feature_spec(seq_length: int, max_predictions_per_seq: int):
    """`run_pretraining.py`'s `name_to_features` for `tf.io.parse_example`."""
    widths = {
        "input_ids": seq_length, "input_mask": seq_length, "segment_ids": seq_length,
        "masked_lm_positions": max_predictions_per_seq, "masked_lm_ids": max_predictions_per_seq,
        "masked_lm_weights": max_predictions_per_seq, "next_sentence_labels": 1,
    }
    return {name: tf.io.FixedLenFeature([widths[name]], dtype) for name, dtype in FEATURE_DTYPES.items()}


def shard_file_name(prefix: str, index: int, num_shards: int) -> str:
    """`prefix-00003-of-00008.tfrecord`."""
    return f"{prefix}-{index:05d}-of-{num_shards:05d}.tfrecord"


# ============================================================================
# Static mode: building instances
# ============================================================================


@dataclasses.dataclass
class TokenizedCorpus:
    """A corpus as flat token ids: cheap to share with worker processes.

    Attributes:
        ids: int32 `[num_tokens]`, all sentences back to back.
        sentence_splits: int64 `[num_sentences + 1]`: sentence `s` is
            `ids[sentence_splits[s]:sentence_splits[s + 1]]`.
        document_splits: int64 `[num_documents + 1]` in sentences.
    """

    ids: np.ndarray
    sentence_splits: np.ndarray
    document_splits: np.ndarray

    @property
    def num_documents(self) -> int:
        return len(self.document_splits) - 1


def tokenize_corpus(corpus: corpus_lib.Corpus, tokenizer: BertTokenizer, batch_size: int = 4096) -> TokenizedCorpus:
    """Tokenizes every sentence with the in-graph tokenizer, in batches.

    As in the original, a sentence with no tokens is dropped, and so is a
    document left with no sentence.

    Args:
        corpus: a `Corpus` from `read_corpus`.
        tokenizer: a `BertTokenizer`.
        batch_size: sentences per tokenizer call.
    """
    # Eager calls, not tf.data/tf.function: the tokenizer's large Unicode
    # tables make tracing cost seconds, and its ops already use all cores.
    values, lengths = [], []
    for start in range(0, len(corpus.sentences), batch_size):
        ragged = tokenizer.tokenize(tf.constant(corpus.sentences[start:start + batch_size], tf.string))
        values.append(ragged.flat_values.numpy())
        lengths.append(ragged.row_lengths().numpy())
    ids = np.concatenate(values).astype(np.int32) if values else np.zeros([0], np.int32)
    lengths = np.concatenate(lengths) if lengths else np.zeros([0], np.int64)

    # Drop empty sentences, then empty documents.
    kept = lengths > 0
    kept_before = np.concatenate([[0], np.cumsum(kept)])
    document_splits = np.unique(kept_before[corpus.document_splits])
    sentence_splits = np.concatenate([[0], np.cumsum(lengths[kept])]).astype(np.int64)
    return TokenizedCorpus(ids=ids, sentence_splits=sentence_splits, document_splits=document_splits.astype(np.int64))


def create_instances_from_document(tokens: TokenizedCorpus, document_index: int, rng: random.Random, *,
                                   max_seq_length: int, short_seq_prob: float):
    """The original `create_instances_from_document`, on token ids, without masking.

    Same steps and same probabilities as google-research/bert: a target
    length (`max_seq_length - 3`, or with `short_seq_prob` a random one in
    `[2, max_seq_length - 3]`); sentences accumulate into a chunk until it
    reaches the target or the document ends; A is the first `a_end` sentences
    (random); B is the rest of the chunk (IsNext) or, with probability 1/2 or
    when the chunk is one sentence, sentences from a random other document
    (NotNext), in which case the unused sentences are "put back"; the pair
    is cut to fit by `truncate_seq_pair`.

    Yields:
        (tokens_a, tokens_b, is_random_next): int32 arrays and a bool.
    """
    ids, sentence_splits, document_splits = tokens.ids, tokens.sentence_splits, tokens.document_splits
    first = int(document_splits[document_index])
    num_sentences = int(document_splits[document_index + 1]) - first
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    def sentences(start, stop):  # sentence indices, absolute
        return ids[sentence_splits[start]:sentence_splits[stop]]

    chunk_start = 0  # relative sentence index where the current chunk begins
    current_length = 0
    i = 0
    while i < num_sentences:
        current_length += int(sentence_splits[first + i + 1] - sentence_splits[first + i])
        if i == num_sentences - 1 or current_length >= target_seq_length:
            chunk_size = i + 1 - chunk_start
            a_end = rng.randint(1, chunk_size - 1) if chunk_size >= 2 else 1
            tokens_a = sentences(first + chunk_start, first + chunk_start + a_end)
            if chunk_size == 1 or rng.random() < 0.5:
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                for _ in range(10):
                    random_document = rng.randint(0, tokens.num_documents - 1)
                    if random_document != document_index:
                        break
                r_first = int(document_splits[random_document])
                r_count = int(document_splits[random_document + 1]) - r_first
                random_start = rng.randint(0, r_count - 1)
                # Whole sentences from random_start until B reaches its target.
                b_start = sentence_splits[r_first + random_start]
                reach = np.searchsorted(
                    sentence_splits[r_first + random_start + 1:r_first + r_count + 1] - b_start, target_b_length
                )
                stop = r_first + random_start + 1 + min(int(reach), r_count - random_start - 1)
                tokens_b = ids[b_start:sentence_splits[stop]]
                i -= chunk_size - a_end  # put the unused sentences back
            else:
                is_random_next = False
                tokens_b = sentences(first + chunk_start + a_end, first + i + 1)
            tokens_a, tokens_b = truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            yield tokens_a, tokens_b, is_random_next
            chunk_start = i + 1
            current_length = 0
        i += 1


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens: int, rng: random.Random):
    """The original `truncate_seq_pair` in closed form.

    The original pops one token at a time from the longer segment, from the
    front or the back with a fair coin. Which segment loses how many tokens
    depends only on the lengths, and the coins are independent, so the number
    of tokens cut from the front of a segment is Binomial(cut, 1/2): drawn
    here with `cut` random bits. Same distribution, no per-token loop (a
    100k-token line costs the same as a short one).
    """
    len_a, len_b = len(tokens_a), len(tokens_b)
    if len_a + len_b <= max_num_tokens:
        return tokens_a, tokens_b
    # Pops always hit the longer segment (B on ties): the longer one comes
    # down to the shorter's length, then they shrink alternately.
    half_up = (max_num_tokens + 1) // 2
    kept_a = min(len_a, max(max_num_tokens - len_b, half_up))
    kept_b = min(len_b, max_num_tokens - kept_a)
    return _cut(tokens_a, kept_a, rng), _cut(tokens_b, kept_b, rng)


def _cut(tokens, kept, rng):
    cut = len(tokens) - kept
    if cut == 0:
        return tokens
    front = rng.getrandbits(cut).bit_count()
    return tokens[front:front + kept]


# ============================================================================
# Static mode: writing shards
# ============================================================================


@dataclasses.dataclass(frozen=True)
class _ShardJob:
    """What a worker needs to write one output shard (all picklable)."""

    index: int
    path: str
    settings: dict
    vocab_size: int
    mask_id: int
    cls_id: int
    sep_id: int
    pad_id: int
    continuation_ids: tuple


def write_pretraining_data(
    input_patterns: Union[str, Sequence[str]],
    vocab_file: str,
    output_prefix: str,
    *,
    lowercase: bool = True,
    format: str = "bert",
    decode_errors: str = "strict",
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    dupe_factor: int = 10,
    whole_word_mask: bool = False,
    seed: int = 12345,
    num_output_shards: int = 8,
    num_shards: int = 1,
    shard_index: int = 0,
    workers: Optional[int] = None,
    tfds_split: str = "train",
    tfds_text_field: str = "text",
    log=None,
) -> dict:
    """Writes static pretraining TFRecords, as the original `create_pretraining_data.py`.

    Instances are built per document exactly as the original (see
    `create_instances_from_document`), `dupe_factor` times with different
    masks, and masked with `MaskedLmMasker`. The records carry the features
    of `run_pretraining.py` (`feature_spec`), so our reader, the original
    TF1 trainer and tf-models-official all read them.

    Output shard `j` (`prefix-0000j-of-0000N.tfrecord`) holds the instances of
    every `N`-th document of a seeded permutation, all dupes, shuffled. It is
    a function of the corpus, the settings, the seed and `j` only: the same
    seed gives byte-identical shards whatever `workers`, `num_shards` or the
    order shards are written in. Each shard is written to a temporary file and
    renamed into place when complete, so an existing shard is always whole,
    and a rerun skips it. A killed run leaves only `*.tmp-*` files, which the
    rerun replaces. `prefix-config.json` records the settings; a rerun with
    other settings on the same prefix is refused.

    Example:

    >>> summary = write_pretraining_data(  # doctest: +SKIP
    ...     "pipelines/data/sample_corpus.txt", "vocab.txt", "/tmp/pretrain/sample",
    ...     max_seq_length=128, dupe_factor=2, num_output_shards=2)
    >>> ds = pretraining_dataset("/tmp/pretrain/sample-*.tfrecord", batch_size=8,  # doctest: +SKIP
    ...                          seq_length=128, max_predictions_per_seq=20)

    Args:
        input_patterns: text files / globs / comma lists, or `"tfds:NAME"`
            (see `pipelines.corpus.read_corpus`).
        vocab_file: the WordPiece `vocab.txt`; must contain `[MASK]`.
        output_prefix: shards are `{output_prefix}-0000j-of-0000N.tfrecord`.
        lowercase: uncased tokenization (`do_lower_case`).
        format: corpus layout: `"bert"`, `"text"` or `"lines"`.
        decode_errors: `"strict"` or `"replace"` (see `read_corpus`).
        max_seq_length: `S`, at least 5.
        max_predictions_per_seq: `P`.
        masked_lm_prob, short_seq_prob, dupe_factor, whole_word_mask: as the
            original's flags.
        seed: int. Everything random derives from it.
        num_output_shards: `N`, the number of output files.
        num_shards, shard_index: split the work over machines: this call
            writes the output shards `j` with `j % num_shards == shard_index`.
        workers: processes writing shards in parallel. Default: one per
            core when the corpus is big enough to repay their start-up (a
            TensorFlow import each, ~5 s of a core: about 25 MB of text with
            `dupe_factor=5`), else 1 (the work stays in this process). Workers
            are started with "spawn": a script calling this with
            `workers > 1` needs the usual `if __name__ == "__main__":` guard.
        tfds_split, tfds_text_field: for `tfds:` inputs.
        log: optional `print`-like callable for progress lines.

    Returns:
        A dict: `written` and `skipped` shard paths, `workers` (processes used), `instances` written,
        `documents`, `sentences`, and `replaced_lines` (bad UTF-8 lines read
        with replacement).

    Raises:
        VocabularyError: the vocabulary has no `[MASK]`.
        CorpusError: no input, bad UTF-8 (strict), empty corpus.
        ValueError: bad settings, or the prefix holds shards of other settings.
    """
    log = log or (lambda *_: None)
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]), got {max_seq_length}.")
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"shard_index must be in [0, num_shards={num_shards}), got {shard_index}.")
    if num_output_shards < 1 or dupe_factor < 1:
        raise ValueError("num_output_shards and dupe_factor must be at least 1.")
    if workers is None:
        workers = _automatic_workers(input_patterns, dupe_factor)
    workers = max(1, min(num_output_shards, workers))
    # Worker processes take seconds to start (TensorFlow import): start them
    # first, so they get ready while this process builds the tokenizer and
    # tokenizes the corpus.
    pool = _start_workers(workers) if workers > 1 else None
    try:
        return _write(input_patterns, vocab_file, output_prefix, pool, workers=workers, log=log, lowercase=lowercase,
                      format=format, decode_errors=decode_errors, max_seq_length=max_seq_length,
                      max_predictions_per_seq=max_predictions_per_seq, masked_lm_prob=masked_lm_prob,
                      short_seq_prob=short_seq_prob, dupe_factor=dupe_factor, whole_word_mask=whole_word_mask,
                      seed=seed, num_output_shards=num_output_shards, num_shards=num_shards,
                      shard_index=shard_index, tfds_split=tfds_split, tfds_text_field=tfds_text_field)
    finally:
        _stop(pool)


# Seconds of one core per input byte and dupe, writing in-process (measured:
# 3 MB x 5 dupes in about 2.5 s on a 2-core cloud VM).
_SECONDS_PER_BYTE_AND_DUPE = 1.7e-7
# A worker process costs a TensorFlow start-up (about 5 s of a core); below
# this much estimated work, one process finishes first.
_MIN_SECONDS_FOR_WORKERS = 20.0


def _automatic_workers(input_patterns, dupe_factor):
    """All cores for big jobs, one process for small ones (see `workers` in `write_pretraining_data`)."""
    cores = os.cpu_count() or 1
    if isinstance(input_patterns, str) and input_patterns.startswith(corpus_lib.TFDS_PREFIX):
        return cores
    try:
        size = sum(tf.io.gfile.stat(path).length for path in corpus_lib.list_files(input_patterns))
    except (corpus_lib.CorpusError, tf.errors.OpError):
        return 1  # reading the corpus will report the problem
    estimate = size * dupe_factor * _SECONDS_PER_BYTE_AND_DUPE
    return cores if estimate >= _MIN_SECONDS_FOR_WORKERS else 1


def _write(input_patterns, vocab_file, output_prefix, pool, *, workers, log, lowercase, format, decode_errors,
           max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob, dupe_factor,
           whole_word_mask, seed, num_output_shards, num_shards, shard_index, tfds_split, tfds_text_field):
    tokenizer = _cached_tokenizer(os.path.abspath(vocab_file), lowercase, *_file_version(vocab_file))
    special = tokenizer.special_tokens
    if special.mask is None:
        raise VocabularyError(
            f"{vocab_file} has no {special.mask_token} token: masked-LM pretraining replaces tokens with "
            f"it. Add {special.mask_token} to the vocabulary (e.g. in place of an [unusedN] line)."
        )
    settings = {
        "input": input_patterns if isinstance(input_patterns, str) else ",".join(input_patterns),
        "vocab_file": os.path.abspath(vocab_file), "lowercase": lowercase, "format": format,
        "decode_errors": decode_errors, "max_seq_length": max_seq_length,
        "max_predictions_per_seq": max_predictions_per_seq, "masked_lm_prob": masked_lm_prob,
        "short_seq_prob": short_seq_prob, "dupe_factor": dupe_factor, "whole_word_mask": whole_word_mask,
        "seed": seed, "num_output_shards": num_output_shards, "tfds_split": tfds_split,
        "tfds_text_field": tfds_text_field,
    }
    _check_or_write_config(output_prefix, settings)

    mine = [j for j in range(num_output_shards) if j % num_shards == shard_index]
    paths = {j: shard_file_name(output_prefix, j, num_output_shards) for j in mine}
    todo = [j for j in mine if not tf.io.gfile.exists(paths[j])]
    summary = {"workers": 1, "written": [], "skipped": [paths[j] for j in mine if j not in todo], "instances": 0,
               "documents": 0, "sentences": 0, "replaced_lines": 0}
    if summary["skipped"]:
        log(f"{len(summary['skipped'])} shard(s) already complete, skipped")
    if not todo:
        return summary

    jobs = [
        _ShardJob(
            index=j, path=paths[j], settings=settings, vocab_size=tokenizer.vocabulary_size,
            mask_id=special.mask, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad,
            continuation_ids=tuple(i for i, t in enumerate(tokenizer.vocabulary) if t.startswith("##")),
        )
        for j in todo
    ]
    if len(jobs) < 2:
        pool = None  # nothing to share
    summary["workers"] = workers if pool is not None else 1
    counts = _tokenize_and_write(input_patterns, tokenizer, jobs, pool, summary, log,
                                 format=format, decode_errors=decode_errors, tfds_split=tfds_split,
                                 tfds_text_field=tfds_text_field)
    for job, count in zip(jobs, counts):
        log(f"wrote {job.path} ({count} instances)")
    summary["written"] = [job.path for job in jobs]
    summary["instances"] = int(sum(counts))
    return summary


def _tokenize_and_write(input_patterns, tokenizer, jobs, pool, summary, log, **read_options):
    corpus = corpus_lib.read_corpus(input_patterns, **read_options)
    summary["replaced_lines"] = corpus.replaced_lines
    if corpus.replaced_lines:
        log("warning: " + corpus.replacement_report())
    tokens = tokenize_corpus(corpus, tokenizer)
    summary["documents"] = tokens.num_documents
    summary["sentences"] = len(tokens.sentence_splits) - 1
    if tokens.num_documents == 0:
        raise corpus_lib.CorpusError(f"No sentence of {corpus.files[:5]} has any token.")
    log(f"{tokens.num_documents} documents, {summary['sentences']} sentences, {len(tokens.ids)} tokens")
    if pool is None:
        return [_write_shard(job, tokens) for job in jobs]
    # The token arrays go to the workers as .npy files they memory-map: no
    # pickling of big arrays, one physical copy in the page cache.
    directory = tempfile.mkdtemp(prefix="pretraining-tokens-")
    try:
        for field in dataclasses.fields(tokens):
            np.save(os.path.join(directory, field.name + ".npy"), getattr(tokens, field.name))
        return pool.map(_write_shard_in_worker, [(directory, job) for job in jobs], chunksize=1)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _file_version(path):
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"Vocabulary file not found: {path}")
    stat = tf.io.gfile.stat(path)
    return stat.length, stat.mtime_nsec


@functools.lru_cache(maxsize=2)
def _cached_tokenizer(vocab_file, lowercase, length, mtime):
    """Tokenizers take seconds to build (Unicode tables): reuse one per vocab file version."""
    del length, mtime  # part of the cache key only
    return BertTokenizer(vocab_file, lowercase=lowercase)


def _check_or_write_config(prefix: str, settings: dict):
    """Refuses to mix shards of different settings under one prefix."""
    path = f"{prefix}-config.json"
    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            existing = json.load(f)
        changed = sorted(k for k in set(existing) | set(settings) if existing.get(k) != settings.get(k))
        if changed:
            raise ValueError(
                f"{path} records other settings ({', '.join(changed)} differ), so the shards under "
                f"{prefix} were made differently. Use another output prefix, or delete the old shards "
                "and that file."
            )
        return
    tmp = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, "w") as f:
        json.dump(settings, f, indent=1, sort_keys=True)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def _stop(pool):
    if pool is not None:
        pool.terminate()
        pool.join()


def _start_workers(workers):
    # Not "fork": this process may already run TensorFlow threads, and a
    # forked child of a multi-threaded TF process can deadlock. "forkserver"
    # forks workers from a clean server process that has imported this module
    # (and so TensorFlow) once but run no TF op: one TF start-up for all
    # workers, instead of one per worker with "spawn".
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context.Pool(workers)


_worker_tokens = {}


def _write_shard_in_worker(directory_and_job):
    directory, job = directory_and_job
    if directory not in _worker_tokens:
        _worker_tokens.clear()
        _worker_tokens[directory] = TokenizedCorpus(
            **{name: np.load(os.path.join(directory, name + ".npy"), mmap_mode="r")
               for name in ("ids", "sentence_splits", "document_splits")}
        )
    return _write_shard(job, _worker_tokens[directory])


def _write_shard(job: _ShardJob, tokens: TokenizedCorpus) -> int:
    """Builds, masks and writes one output shard atomically. Returns its instance count."""
    s = job.settings
    seq_length = s["max_seq_length"]
    rng = random.Random(f"bert-pretraining-data:{s['seed']}:shard:{job.index}")
    documents = list(range(tokens.num_documents))
    random.Random(f"bert-pretraining-data:{s['seed']}:documents").shuffle(documents)
    documents = documents[job.index::s["num_output_shards"]]

    rows, a_lengths, labels = [], [], []
    for _ in range(s["dupe_factor"]):
        for document in documents:
            for a, b, is_random_next in create_instances_from_document(
                tokens, document, rng, max_seq_length=seq_length, short_seq_prob=s["short_seq_prob"]
            ):
                rows.append(np.concatenate([[job.cls_id], a, [job.sep_id], b, [job.sep_id]]))
                a_lengths.append(len(a))
                labels.append(int(is_random_next))
    order = list(range(len(rows)))
    rng.shuffle(order)

    masker = _masker_for(job)
    batches = [order[start:start + _WRITE_BATCH] for start in range(0, len(order), _WRITE_BATCH)]

    def pad_and_mask(batch_number):
        batch = batches[batch_number]
        return _pad_and_mask([rows[i] for i in batch], [a_lengths[i] for i in batch], [labels[i] for i in batch],
                             masker, seq_length, job.pad_id, seed=[s["seed"], job.index * 2**32 + batch_number])

    tmp = f"{job.path}.tmp-{os.getpid()}"
    try:
        # TF releases the GIL while it masks: mask batch k + 1 on a thread
        # while this one encodes and writes batch k.
        with tf.io.TFRecordWriter(tmp) as writer, concurrent.futures.ThreadPoolExecutor(1) as executor:
            upcoming = executor.submit(pad_and_mask, 0) if batches else None
            for batch_number in range(len(batches)):
                columns = upcoming.result()
                if batch_number + 1 < len(batches):
                    upcoming = executor.submit(pad_and_mask, batch_number + 1)
                for record in _encode_examples(columns):
                    writer.write(record)
        _sync(tmp)
        tf.io.gfile.rename(tmp, job.path, overwrite=True)
        # Leftovers of killed runs for this shard are garbage now.
        for stale in tf.io.gfile.glob(f"{job.path}.tmp-*"):
            tf.io.gfile.remove(stale)
    except BaseException:
        # A full disk or an interrupt: never leave a file a rerun would trust.
        # The temp file is left only if it cannot be removed (and it is never
        # read: reruns look for the final name).
        try:
            tf.io.gfile.remove(tmp)
        except Exception:
            pass
        raise
    return len(rows)


def _masker_for(job):
    s = job.settings
    return _masker_function(
        job.vocab_size, job.mask_id, (job.cls_id, job.sep_id, job.pad_id), s["max_predictions_per_seq"],
        s["masked_lm_prob"], s["whole_word_mask"], job.continuation_ids,
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


def _sync(path):
    """Flushes a local file to disk before it is renamed (a crash must not leave a short file)."""
    if "://" in path:
        return  # object stores publish whole objects
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pad_and_mask(rows, a_lengths, labels, masker, seq_length, pad_id, seed):
    """Pads and masks a batch of instances: the feature columns of their records."""
    count = len(rows)
    lengths = np.fromiter((len(row) for row in rows), np.int64, count)
    position = np.arange(seq_length)[None, :]
    input_mask = (position < lengths[:, None]).astype(np.int64)
    token_ids = np.full([count, seq_length], pad_id, np.int64)
    token_ids[input_mask.astype(bool)] = np.concatenate(rows) if rows else []
    # B and its [SEP] start after [CLS] A [SEP].
    segment_ids = ((position >= np.asarray(a_lengths)[:, None] + 2) & (input_mask > 0)).astype(np.int64)
    masked = masker(tf.constant(token_ids), seed=tf.constant(seed, tf.int64), padding_mask=tf.constant(input_mask))
    masked = {name: value.numpy() for name, value in masked.items()}
    return {
        "input_ids": masked["token_ids"], "input_mask": input_mask, "segment_ids": segment_ids,
        "masked_lm_positions": masked["masked_lm_positions"], "masked_lm_ids": masked["masked_lm_ids"],
        "masked_lm_weights": masked["masked_lm_weights"],
        "next_sentence_labels": np.asarray(labels, np.int64)[:, None],
    }


def _encode_examples(columns) -> List[bytes]:
    """Serializes rows of fixed-width features as `tf.train.Example` wire bytes, vectorized.

    Building one `tf.train.Example` message per instance in Python costs more
    than making the instance. The wire format of these examples is simple
    (Example > Features > map<name, Feature> > Int64List/FloatList of packed
    values): each feature's packed values are encoded for the whole batch
    with numpy, and the framing around them depends only on the payload
    length, so it comes from a small cache. Features go in sorted name
    order, as `SerializeToString(deterministic=True)` does; the bytes are
    identical to protobuf's (tests/pipelines/test_pretraining_data.py).
    """
    count = len(next(iter(columns.values())))
    names = sorted(columns)
    payloads = []
    for name in names:
        values = columns[name]
        if FEATURE_DTYPES[name] == tf.float32:
            flat = np.ascontiguousarray(values, "<f4").tobytes()
            width = 4 * values.shape[1]
            ends = np.arange(1, count + 1) * width
        else:
            flat, ends = _varint_rows(np.asarray(values, np.int64))
        payloads.append((name, flat, ends.tolist()))
    records = []
    for k in range(count):
        parts = []
        for name, flat, ends in payloads:
            start, end = (ends[k - 1] if k else 0), ends[k]
            parts.append(_feature_framing(name, end - start))
            parts.append(flat[start:end])
        features = b"".join(parts)
        records.append(b"\x0a" + _varint(len(features)) + features)  # Example.features (field 1)
    return records


@functools.lru_cache(maxsize=None)
def _feature_framing(name: str, payload_length: int) -> bytes:
    """Wire bytes that come before a feature's packed values (they depend on its length only)."""
    tag = 0x12 if FEATURE_DTYPES[name] == tf.float32 else 0x1A  # Feature.float_list / int64_list
    key = name.encode()
    packed_header = b"\x0a" + _varint(payload_length)  # XList.value, packed (field 1)
    feature_length = len(packed_header) + payload_length
    feature_header = bytes([tag]) + _varint(feature_length)
    entry_key = b"\x0a" + _varint(len(key)) + key  # map entry key (field 1)
    value_length = len(feature_header) + feature_length
    value_header = b"\x12" + _varint(value_length)  # map entry value (field 2)
    entry_length = len(entry_key) + len(value_header) + value_length
    return b"\x0a" + _varint(entry_length) + entry_key + value_header + feature_header + packed_header


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint_rows(values: np.ndarray):
    """Protobuf varints of a non-negative int64 matrix: (all bytes, end offset of each row)."""
    if values.size and values.min() < 0:
        raise ValueError("Negative ids cannot be written as pretraining features.")
    values = values.astype(np.uint64)
    num_bytes = np.ones(values.shape, np.int64)
    for shift in range(7, 64, 7):
        num_bytes += values >= (np.uint64(1) << np.uint64(shift))
    longest = int(num_bytes.max()) if values.size else 1
    groups = np.stack(
        [((values >> np.uint64(7 * i)) & np.uint64(0x7F)).astype(np.uint8) for i in range(longest)], axis=-1
    )
    index = np.arange(longest)
    groups |= np.where(index < num_bytes[..., None] - 1, 0x80, 0).astype(np.uint8)
    flat = groups[index < num_bytes[..., None]].tobytes()
    return flat, np.cumsum(num_bytes.sum(axis=1))


# ============================================================================
# Static mode: reading
# ============================================================================


def pretraining_dataset(
    file_pattern: Union[str, Sequence[str]],
    *,
    batch_size: int,
    seq_length: int,
    max_predictions_per_seq: int,
    shuffle: bool = True,
    repeat: bool = True,
    seed: Optional[int] = None,
    shuffle_buffer: int = 10000,
    input_context: Optional[tf.distribute.InputContext] = None,
) -> tf.data.Dataset:
    """Reads pretraining TFRecords (ours, or google-research/bert's) into `(x, y)` batches.

    Files are sharded and interleaved at file level, records shuffled in a
    buffer, batched with `drop_remainder=True` and parsed per batch. Every
    tensor has a static shape (TPU/XLA ready); see the module docstring for
    the contract.

    Multi-worker: pass `input_context` (from
    `strategy.distribute_datasets_from_function`) to read only this worker's
    files. Without it the dataset asks `tf.distribute` for FILE auto-sharding
    (DATA when there is a single file); write at least as many shards as
    there are workers.

    Example:

    >>> ds = pretraining_dataset("/data/pretrain-*.tfrecord", batch_size=32,  # doctest: +SKIP
    ...                          seq_length=128, max_predictions_per_seq=20)
    >>> x, y = next(iter(ds))  # doctest: +SKIP

    Args:
        file_pattern: glob(s), comma-separated list, or list of files.
        batch_size: int. `B` (per replica when given an `input_context`).
        seq_length: int. `S`, the `max_seq_length` the files were written with.
        max_predictions_per_seq: int. `P`, as written.
        shuffle: shuffle files (each epoch) and records.
        repeat: repeat forever.
        seed: int or None. Shuffle seed (with a seed, file order and record
            order are deterministic).
        shuffle_buffer: records in the shuffle buffer.
        input_context: optional `tf.distribute.InputContext`.
    """
    try:
        files = corpus_lib.list_files(file_pattern)
    except corpus_lib.CorpusError as error:
        raise FileNotFoundError(f"No pretraining data: {error}") from None
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(files), 16),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle or seed is not None,
    )
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    spec = feature_spec(seq_length, max_predictions_per_seq)
    dataset = dataset.map(
        lambda records: _to_contract(tf.io.parse_example(records, spec)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle or seed is not None,
    )
    options = tf.data.Options()
    if input_context is not None:
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    elif len(files) > 1:
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    else:
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def _to_contract(features):
    x = {
        "token_ids": tf.cast(features["input_ids"], tf.int32),
        "segment_ids": tf.cast(features["segment_ids"], tf.int32),
        "padding_mask": tf.cast(features["input_mask"], tf.int32),
        "masked_lm_positions": tf.cast(features["masked_lm_positions"], tf.int32),
    }
    y = {
        "masked_lm_ids": tf.cast(features["masked_lm_ids"], tf.int32),
        "masked_lm_weights": tf.cast(features["masked_lm_weights"], tf.float32),
        "next_sentence_labels": tf.cast(features["next_sentence_labels"][:, 0], tf.int32),
    }
    return x, y


# ============================================================================
# Dynamic mode
# ============================================================================


def dynamic_pretraining_dataset(
    source: Union[str, Sequence[str]],
    tokenizer: BertTokenizer,
    *,
    batch_size: int,
    seq_length: int,
    max_predictions_per_seq: int,
    format: str = "bert",
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    whole_word_mask: bool = False,
    shuffle: bool = True,
    repeat: bool = True,
    seed: Optional[int] = None,
    shuffle_buffer: int = 10000,
    tfds_split: str = "train",
    tfds_text_field: str = "text",
) -> tf.data.Dataset:
    """Streams `(x, y)` pretraining batches from raw text, masking inside `tf.data`.

    Same contract as `pretraining_dataset`, no files written, fresh masks and
    pairs every epoch. Tokenization, pairing and masking all run in the graph.

    Pairing is a streaming approximation of the original:

    - Each document's sentences are grouped greedily into chunks of about
      `seq_length - 3` tokens (with `short_seq_prob` a random shorter target
      in `[2, seq_length - 3]` for the document), as the original.
    - A chunk of `n >= 2` sentences is split after a random sentence `a_end`
      in `[1, n - 1]`: A = the first `a_end` sentences.
    - IsNext (probability 1/2, and only for `n >= 2`): B = the rest of the
      chunk, the text that really follows A.
    - NotNext: B = sentences from a random position of a chunk drawn from a
      second, independently shuffled stream of chunks (its own file order and
      shuffle buffer), up to the length A leaves free. The chunk's sentences
      after A are "put back" as the original does: they make a second pair of
      their own, split and labelled the same way (a NotNext B from another
      position of the same partner chunk); what that pair leaves unused is
      dropped (the original would put it back again). When the partner
      chunk is from the same document (rare: about `chunks per document /
      shuffle_buffer`; documents are told apart by a hash of their first
      sentence), the pair is IsNext instead, unless the chunk is a single
      sentence.
    - The pair is cut to `seq_length - 3` tokens by the original's random
      front/back rule, packed, and masked with `MaskedLmMasker`.

    Every random choice is a stateless op seeded from `seed` and the epoch
    (`tf.data.Dataset.random(..., rerandomize_each_iteration=True)`), so a
    seed makes the stream reproducible while each epoch differs.

    Example:

    >>> tokenizer = BertTokenizer("vocab.txt")  # doctest: +SKIP
    >>> ds = dynamic_pretraining_dataset("pipelines/data/sample_corpus.txt", tokenizer,  # doctest: +SKIP
    ...                                  batch_size=8, seq_length=128, max_predictions_per_seq=20)

    Args:
        source: text files / globs / comma lists, or `"tfds:NAME"`.
        tokenizer: a `BertTokenizer` whose vocabulary has `[MASK]`.
        batch_size, seq_length, max_predictions_per_seq: `B`, `S`, `P`.
        format: corpus layout of text files: `"bert"`, `"text"`, `"lines"`.
        masked_lm_prob, short_seq_prob, whole_word_mask: as the static writer.
        shuffle: shuffle files and chunks.
        repeat: repeat forever (each repetition with new pairs and masks).
        seed: int or None.
        shuffle_buffer: chunks held by each shuffle buffer.
        tfds_split, tfds_text_field: for `tfds:` sources.
    """
    special = tokenizer.special_tokens
    if special.mask is None:
        raise VocabularyError(f"{tokenizer.vocab_file or 'The vocabulary'} has no [MASK] token; pretraining needs one.")
    if seq_length < 5:
        raise ValueError(f"seq_length must be at least 5, got {seq_length}.")
    seed = int(seed if seed is not None else random.SystemRandom().randrange(2**31))
    max_num_tokens = seq_length - 3
    tokenize = _traced_tokenize(tokenizer)

    def documents(stream):
        if isinstance(source, str) and source.startswith(corpus_lib.TFDS_PREFIX):
            docs = corpus_lib.tfds_documents(
                source[len(corpus_lib.TFDS_PREFIX):], split=tfds_split, text_field=tfds_text_field
            )
            return docs.shuffle(shuffle_buffer, seed=seed + stream) if shuffle else docs
        files = corpus_lib.list_files(source)
        if shuffle:
            random.Random(seed + stream).shuffle(files)
        return corpus_lib.file_documents(files, format=format)

    def chunks(stream):
        docs = documents(stream)
        if repeat:
            docs = docs.repeat()
        seeds = tf.data.Dataset.random(seed=seed + 10 + stream, rerandomize_each_iteration=True)
        docs = tf.data.Dataset.zip(docs, seeds.batch(2))
        out = docs.map(
            lambda sentences, element_seed: _document_chunks(
                tokenize(sentences), sentences, element_seed, max_num_tokens, short_seq_prob
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        ).unbatch()
        if shuffle:
            out = out.shuffle(shuffle_buffer, seed=seed + 20 + stream, reshuffle_each_iteration=True)
        return out

    partners = chunks(1).repeat()  # never runs dry
    pair_seeds = tf.data.Dataset.random(seed=seed + 30, rerandomize_each_iteration=True).batch(2)
    pairs = tf.data.Dataset.zip(chunks(0), partners, pair_seeds).map(
        lambda chunk, partner, pair_seed: _make_pairs(chunk, partner, pair_seed, max_num_tokens),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    # One or two pairs per chunk (the second from sentences "put back").
    pairs = pairs.unbatch().filter(lambda a, b, label, exists: exists).map(lambda a, b, label, exists: (a, b, label))
    packer = BertPacker(seq_length, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad)
    masker = MaskedLmMasker.from_vocabulary(
        tokenizer.vocabulary, special_tokens=special, max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob, whole_word_mask=whole_word_mask,
    )
    mask_seeds = tf.data.Dataset.random(seed=seed + 40, rerandomize_each_iteration=True).batch(2)

    def to_batch(batch, mask_seed):
        a, b, label = batch
        packed = packer((a, b))
        masked = masker(packed["token_ids"], seed=mask_seed, padding_mask=packed["padding_mask"])
        x = {
            "token_ids": masked["token_ids"],
            "segment_ids": packed["segment_ids"],
            "padding_mask": packed["padding_mask"],
            "masked_lm_positions": masked["masked_lm_positions"],
        }
        y = {
            "masked_lm_ids": masked["masked_lm_ids"],
            "masked_lm_weights": masked["masked_lm_weights"],
            "next_sentence_labels": label,
        }
        # Static shapes for XLA/TPU: ragged_batch loses the batch dimension.
        for name, tensor in {**x, **y}.items():
            width = seq_length if name in ("token_ids", "segment_ids", "padding_mask") else max_predictions_per_seq
            tensor.set_shape([batch_size] if name == "next_sentence_labels" else [batch_size, width])
        return x, y

    batches = pairs.ragged_batch(batch_size, drop_remainder=True)
    batches = tf.data.Dataset.zip(batches, mask_seeds).map(
        to_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return batches.prefetch(tf.data.AUTOTUNE)


_TRACED_TOKENIZERS = weakref.WeakKeyDictionary()


def _traced_tokenize(tokenizer):
    """`tokenizer.tokenize` traced once per tokenizer and reused by every pipeline built with it.

    Tracing the tokenizer costs seconds (its Unicode tables are large graph
    constants); each stream of each dataset would otherwise trace it again.
    """
    function = _TRACED_TOKENIZERS.get(tokenizer)
    if function is None:
        function = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
        _TRACED_TOKENIZERS[tokenizer] = function
    return function


def _document_chunks(ids, sentences, seed, max_num_tokens, short_seq_prob):
    """Splits one tokenized document into chunks of whole sentences (the original's accumulation).

    Returns a dataset-ready tuple, batched over chunks: (chunk token ids
    `[chunks, (sentences), (tokens)]` ragged, document key `[chunks]`).
    """
    seed = tf.cast(seed, tf.int64)
    ids = tf.cast(ids, tf.int32)
    keep = ids.row_lengths() > 0
    ids = tf.ragged.boolean_mask(ids, keep)
    lengths = tf.cast(ids.row_lengths(), tf.int32)
    short_seed, length_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    short = tf.random.stateless_uniform([], short_seed) < short_seq_prob
    random_target = tf.random.stateless_uniform([], length_seed, minval=2, maxval=max_num_tokens + 1, dtype=tf.int32)
    target = tf.where(short, random_target, max_num_tokens)

    def step(state, length):
        # state: (chunk of the previous sentence, chunk of the next one, tokens in it so far)
        _, chunk, current = state
        current += length
        closes = current >= target
        return chunk, chunk + tf.cast(closes, tf.int32), tf.where(closes, 0, current)

    zero = tf.constant(0)
    chunk_of, _, _ = tf.scan(step, lengths, initializer=(zero, zero, zero))
    grouped = tf.RaggedTensor.from_value_rowids(ids, tf.cast(chunk_of, tf.int64), validate=False)
    # A key that is the same for this document in both streams, whatever their order.
    key = tf.strings.to_hash_bucket_fast(tf.strings.reduce_join(sentences[:1]), 2**62)
    return grouped, tf.fill([grouped.nrows()], key)


def _make_pairs(chunk, partner, seed, max_num_tokens):
    """Up to two (A, B, label) pairs from a chunk and a partner chunk of another stream.

    The first pair is built from the whole chunk. When it is NotNext, the
    sentences after A were not used: as the original "puts them back", they
    make a second pair of their own (its B, when NotNext, from another random
    position of the same partner chunk; what that second pair leaves unused is
    dropped). Returns ragged `[2, (tokens)]` A and B, labels `[2]` and a
    `[2]` mask of the pairs that exist, for `unbatch` + `filter`.
    """
    sentences, key = chunk
    partner_sentences, partner_key = partner
    first_seed, second_seed = tf.unstack(tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
    a_1, b_1, next_1, a_end = _pair_from(sentences, key, partner_sentences, partner_key, first_seed,
                                         max_num_tokens)
    unused = sentences[a_end:]
    # An IsNext pair used the whole chunk (B is the rest of it); so did a one-sentence chunk.
    put_back = next_1 & (unused.nrows(out_type=tf.int32) > 0)
    a_2, b_2, next_2, _ = _pair_from(unused, key, partner_sentences, partner_key, second_seed, max_num_tokens)
    tokens_a = tf.ragged.stack([a_1, a_2])
    tokens_b = tf.ragged.stack([b_1, b_2])
    return tokens_a, tokens_b, tf.cast(tf.stack([next_1, next_2]), tf.int32), tf.stack([True, put_back])


def _pair_from(sentences, key, partner_sentences, partner_key, seed, max_num_tokens):
    """One pair from `sentences` (`[n, (tokens)]`): (A, B, random_next, a_end); any n >= 0 is safe."""
    seeds = tf.unstack(tf.random.experimental.stateless_split(seed, 6))
    n = sentences.nrows(out_type=tf.int32)
    a_end = tf.where(
        n >= 2,
        tf.random.stateless_uniform([], seeds[0], minval=1, maxval=tf.maximum(n, 2), dtype=tf.int32),
        1,
    )
    # A partner from the same document would make a wrong NotNext label: the
    # pair stays IsNext then (one-sentence chunks have no real next and stay NotNext).
    random_next = (n <= 1) | ((tf.random.stateless_uniform([], seeds[1]) < 0.5) & (key != partner_key))
    tokens_a = sentences[:a_end].flat_values
    target_b = max_num_tokens - tf.shape(tokens_a)[0]

    m = partner_sentences.nrows(out_type=tf.int32)
    start = tf.random.stateless_uniform([], seeds[2], minval=0, maxval=m, dtype=tf.int32)
    tail = partner_sentences[start:]
    # Whole sentences until B reaches its target (at least one).
    before = tf.cumsum(tf.cast(tail.row_lengths(), tf.int32), exclusive=True)
    take = tf.maximum(1, tf.reduce_sum(tf.cast(before < target_b, tf.int32)))
    random_b = tail[:take].flat_values
    tokens_b = tf.cond(random_next, lambda: random_b, lambda: sentences[a_end:].flat_values)

    tokens_a, tokens_b = _truncate_pair_in_graph(tokens_a, tokens_b, max_num_tokens, seeds[3], seeds[4])
    return tokens_a, tokens_b, random_next, tf.minimum(a_end, n)


def _truncate_pair_in_graph(tokens_a, tokens_b, max_num_tokens, seed_a, seed_b):
    """`truncate_seq_pair` in closed form with graph ops (see `truncate_seq_pair`)."""
    len_a, len_b = tf.shape(tokens_a)[0], tf.shape(tokens_b)[0]
    half_up = (max_num_tokens + 1) // 2
    kept_a = tf.minimum(len_a, tf.maximum(max_num_tokens - len_b, half_up))
    kept_b = tf.minimum(len_b, max_num_tokens - kept_a)

    def cut(tokens, length, kept, seed):
        dropped = length - kept
        front = tf.random.stateless_binomial([], seed, tf.cast(dropped, tf.float32), 0.5, output_dtype=tf.int32)
        return tokens[front:front + kept]

    return cut(tokens_a, len_a, kept_a, seed_a), cut(tokens_b, len_b, kept_b, seed_b)
