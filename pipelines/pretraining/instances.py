"""Building pretraining instances exactly as the original `create_pretraining_data.py`, on token ids.

`tokenize_corpus` turns a corpus into flat token ids (cheap to share with
worker processes); `create_instances_from_document` makes the original's
(A, B, is_random_next) pairs from one document; `truncate_seq_pair` is the
original's truncation in closed form. Masking is `pipelines.masking`.
"""

import dataclasses
import random
from typing import Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from pipelines import corpus as corpus_lib
from pipelines.tokenizer import BertTokenizer


@dataclasses.dataclass
class TokenizedCorpus:
    """A corpus as flat token ids: cheap to share with worker processes.

    Attributes:
        ids: int32 `[num_tokens]`, all sentences back to back.
        sentence_splits: int64 `[num_sentences + 1]`: sentence `s` is
            `ids[sentence_splits[s]:sentence_splits[s + 1]]`.
        document_splits: int64 `[num_documents + 1]` in sentences.
        document_ids: optional uint64 `[num_documents]`: each document's
            stable id (`pipelines.pretraining.seeding`), which seeds its
            instances.
    """

    ids: np.ndarray
    sentence_splits: np.ndarray
    document_splits: np.ndarray
    document_ids: Optional[np.ndarray] = None

    @property
    def num_documents(self) -> int:
        return len(self.document_splits) - 1


def tokenize_corpus(corpus: corpus_lib.Corpus, tokenizer: BertTokenizer, batch_size: int = 4096,
                    document_ids: Optional[np.ndarray] = None) -> TokenizedCorpus:
    """Tokenizes every sentence with the in-graph tokenizer, in batches.

    As in the original, a sentence with no tokens is dropped, and so is a
    document left with no sentence.

    Args:
        corpus: a `Corpus` from `read_corpus`.
        tokenizer: a `BertTokenizer`.
        batch_size: sentences per tokenizer call.
        document_ids: optional uint64 `[corpus.num_documents]`: the ids of the
            corpus's documents; those of the documents kept go into the result.
    """
    # Decomposed Hangul is named by file and line here: a tokenize batch names a sentence by its place in it.
    corpus.check_composition(tokenizer)
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
    boundaries = kept_before[corpus.document_splits]
    document_splits = np.unique(boundaries)
    sentence_splits = np.concatenate([[0], np.cumsum(lengths[kept])]).astype(np.int64)
    if document_ids is not None:
        document_ids = np.asarray(document_ids, np.uint64)[boundaries[1:] > boundaries[:-1]]
    return TokenizedCorpus(ids=ids, sentence_splits=sentence_splits, document_splits=document_splits.astype(np.int64),
                           document_ids=document_ids)


def tokenize_documents(documents: Sequence[Sequence[str]], tokenizer: BertTokenizer, batch_size: int = 4096):
    """Token ids of documents given as lists of sentences: one `(ids, sentence_lengths)` per document.

    Empty sentences are dropped (as `tokenize_corpus`); a document left with
    none gets empty arrays. What the Apache Beam path tokenizes with.
    """
    sentences = [s for document in documents for s in document]
    document_splits = np.concatenate([[0], np.cumsum([len(d) for d in documents])]).astype(np.int64)
    values, lengths = [], []
    for start in range(0, len(sentences), batch_size):
        ragged = tokenizer.tokenize(tf.constant(sentences[start:start + batch_size], tf.string))
        values.append(ragged.flat_values.numpy())
        lengths.append(ragged.row_lengths().numpy())
    ids = np.concatenate(values).astype(np.int32) if values else np.zeros([0], np.int32)
    lengths = np.concatenate(lengths) if lengths else np.zeros([0], np.int64)
    token_splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    out = []
    for start, stop in zip(document_splits[:-1], document_splits[1:]):
        sentence_lengths = lengths[start:stop]
        out.append((ids[token_splits[start]:token_splits[stop]], sentence_lengths[sentence_lengths > 0]))
    return out


def corpus_of_documents(documents: Sequence[Tuple[int, np.ndarray, np.ndarray]]) -> TokenizedCorpus:
    """A `TokenizedCorpus` of `(document id, ids, sentence lengths)` tuples, in the order given."""
    lengths = [np.asarray(d[2], np.int64) for d in documents]
    flat_lengths = np.concatenate(lengths) if lengths else np.zeros([0], np.int64)
    return TokenizedCorpus(
        ids=np.concatenate([np.asarray(d[1], np.int32) for d in documents]) if documents else np.zeros([0], np.int32),
        sentence_splits=np.concatenate([[0], np.cumsum(flat_lengths)]).astype(np.int64),
        document_splits=np.concatenate([[0], np.cumsum([len(x) for x in lengths])]).astype(np.int64),
        document_ids=np.asarray([d[0] for d in documents], np.uint64),
    )


def create_instances_from_document(tokens: TokenizedCorpus, document_index: int, rng: random.Random, *,
                                   max_seq_length: int, short_seq_prob: float, candidates=None):
    """The original `create_instances_from_document`, on token ids, without masking.

    Same steps and same probabilities as google-research/bert: a target
    length (`max_seq_length - 3`, or with `short_seq_prob` a random one in
    `[2, max_seq_length - 3]`); sentences accumulate into a chunk until it
    reaches the target or the document ends; A is the first `a_end` sentences
    (random); B is the rest of the chunk (IsNext) or, with probability 1/2 or
    when the chunk is one sentence, sentences from a random other document
    (NotNext), in which case the unused sentences are "put back"; the pair
    is cut to fit by `truncate_seq_pair`.

    `candidates` (a sorted int array of document indices, this one's NSP
    bucket: `pipelines.pretraining.seeding`) narrows the random other
    document to one of them: drawn as the original draws from the whole
    corpus, `candidates[rng.randint(0, len(candidates) - 1)]`, so a bucket
    read as a corpus of its own gives the same draws. Default: every document.

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
                    if candidates is None:
                        random_document = rng.randint(0, tokens.num_documents - 1)
                    else:
                        random_document = int(candidates[rng.randint(0, len(candidates) - 1)])
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
