"""Where every random choice of the static writer comes from: (seed, document id, dupe index), never a process's order.

The static records are a pure function of the corpus and the settings, whatever
runs them (this process, worker processes, an Apache Beam runner with any
number of workers, any input split or output shard count):

- A document's id is a 64-bit hash of where it is, stable however the input
  is split: its file's path relative to the glob root (`keyed_files`) and
  its ordinal among that file's documents (`document_ids`).
- Documents fall into NSP buckets by a hash of (seed, id): `bucket_count`
  buckets of about `documents_per_bucket` documents. A "random next" segment
  is drawn from another document of the same bucket (the original draws from
  the whole corpus; with one bucket, the default for corpora under
  `documents_per_bucket` documents, it still does). A bucket is a unit of
  work that needs no other document: what makes the stage scale.
- The instances of (document, dupe) come from `instance_rng(seed, id, dupe)`;
  they go to output shard `shard_of(seed, id, dupe, N)`; instance `i` of them
  has the key `instance_keys(...)`, which orders a shard (a seeded shuffle)
  and seeds its masks (`masking_noise`: per instance, so batching is free).

Example:

>>> int(bucket_count(25_000, 10_000)), int(bucket_count(5, 10_000))
(2, 1)
>>> document_ids(["wiki/a.txt"], [0]) == document_ids(["wiki/a.txt"], [0])
array([ True])
"""

import hashlib
import os
import random
from typing import List, Sequence, Tuple

import numpy as np

_MASK64 = (1 << 64) - 1
# Distinct streams of hashes derived from one key.
_BUCKET, _SHARD, _INSTANCE, _SCORE, _ACTION, _KEEP, _REPLACEMENT = range(1, 8)
_GLOB_CHARACTERS = "*?["


def mix64(values) -> np.ndarray:
    """SplitMix64's finalizer on uint64 values (wrapping arithmetic): a fast, well-mixed 64-bit hash."""
    z = np.asarray(values, np.uint64).copy()
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def combine(key, value) -> np.ndarray:
    """The hash of `key` followed by `value` (uint64 arrays, broadcast)."""
    with np.errstate(over="ignore"):
        return mix64(np.asarray(key, np.uint64) * np.uint64(0x100000001B3) ^ np.asarray(value, np.uint64))


def seed_key(seed: int) -> np.uint64:
    """The run's seed as a hash key (any Python int, negative included)."""
    return mix64(np.uint64(int(seed) & _MASK64))


def document_ids(file_keys: Sequence[str], ordinals: Sequence[int]) -> np.ndarray:
    """uint64 ids of documents: a hash of (file key, ordinal of the document in its file)."""
    out = np.empty(len(file_keys), np.uint64)
    for k, (file_key, ordinal) in enumerate(zip(file_keys, ordinals)):
        digest = hashlib.blake2b(f"{file_key}\0{int(ordinal)}".encode(), digest_size=8).digest()
        out[k] = int.from_bytes(digest, "little")
    return out


def keyed_files(patterns: Sequence[str], matches: Sequence[Sequence[str]]) -> List[Tuple[str, str]]:
    """(file key, path) of each input file: its path relative to its pattern's glob root.

    The root of `/data/wiki/*/part-*.txt` is `/data/wiki`, of a plain file
    name its directory: the same corpus read from another place (a local copy
    of a `gs://` bucket) gets the same keys, hence the same document ids. A
    relative path already keyed by an earlier pattern gets `"K:"` (the pattern
    number) in front. Duplicate paths are read once.

    Example:

    >>> keyed_files(["/d/*.txt", "/e/a.txt"], [["/d/a.txt", "/d/b.txt"], ["/e/a.txt"]])
    [('a.txt', '/d/a.txt'), ('b.txt', '/d/b.txt'), ('1:a.txt', '/e/a.txt')]

    Args:
        patterns: the input patterns, in order.
        matches: the files each pattern matched (sorted).
    """
    out, seen_keys, seen_paths = [], set(), set()
    for number, (pattern, files) in enumerate(zip(patterns, matches)):
        root = glob_root(pattern)
        for path in files:
            if path in seen_paths:
                continue
            seen_paths.add(path)
            key = path[len(root):].lstrip("/") if path.startswith(root) else path
            key = key or os.path.basename(path)
            if key in seen_keys:
                key = f"{number}:{key}"
            seen_keys.add(key)
            out.append((key, path))
    return out


def glob_root(pattern: str) -> str:
    """The directory part of `pattern` before its first glob character (its directory for a plain name)."""
    positions = [pattern.find(c) for c in _GLOB_CHARACTERS if c in pattern]
    head = pattern[:min(positions)] if positions else pattern
    return head.rsplit("/", 1)[0] if "/" in head else ""


def bucket_count(num_documents: int, documents_per_bucket: int) -> int:
    """NSP buckets for a corpus: `num_documents // documents_per_bucket`, at least 1."""
    return max(1, int(num_documents) // int(documents_per_bucket))


def bucket_of(seed: int, ids, buckets: int) -> np.ndarray:
    """The NSP bucket of each document id."""
    return (combine(combine(seed_key(seed), _BUCKET), ids) % np.uint64(buckets)).astype(np.int64)


def shard_of(seed: int, ids, dupe, num_output_shards: int) -> np.ndarray:
    """The output shard of the instances of (document id, dupe) (broadcast)."""
    key = combine(combine(combine(seed_key(seed), _SHARD), ids), dupe)
    return (key % np.uint64(num_output_shards)).astype(np.int64)


def instance_rng(seed: int, document_id: int, dupe: int) -> random.Random:
    """The `random.Random` that builds the instances of (document, dupe) (string seeding: stable everywhere)."""
    return random.Random(f"bert-pretraining-data:{int(seed)}:{int(document_id)}:{int(dupe)}")


def instance_keys(seed: int, document_id, dupe, count: int) -> np.ndarray:
    """uint64 keys of the `count` instances of (document id, dupe): they order shards and seed masks."""
    base = combine(combine(combine(seed_key(seed), _INSTANCE), np.uint64(document_id)), np.uint64(dupe))
    return combine(base, np.arange(count, dtype=np.uint64))


def masking_noise(keys, width: int, vocab_size: int) -> dict:
    """The random draws `MaskedLmMasker` takes, per instance key and position (independent of batching).

    Returns a dict of `[len(keys), width]` arrays: `score`, `action`, `keep`
    (float32 uniform in [0, 1), 24-bit) and `random_ids` (int32 uniform in
    `[0, vocab_size)`).
    """
    keys = np.asarray(keys, np.uint64)[:, None]
    positions = np.arange(width, dtype=np.uint64)[None, :]

    def bits(stream):
        return combine(combine(keys, stream), positions)

    def uniform(stream):
        return ((bits(stream) >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)).astype(np.float32)

    with np.errstate(over="ignore"):
        replacement = ((bits(_REPLACEMENT) >> np.uint64(32)) * np.uint64(vocab_size)) >> np.uint64(32)
    return {"score": uniform(_SCORE), "action": uniform(_ACTION), "keep": uniform(_KEEP),
            "random_ids": replacement.astype(np.int32)}


def key_order(keys) -> np.ndarray:
    """The order of a shard's instances: ascending key (a seeded shuffle, the same in every runner)."""
    return np.argsort(np.asarray(keys, np.uint64), kind="stable")

