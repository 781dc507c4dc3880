"""Dynamic pretraining data: tokenize, pair and mask raw text inside `tf.data`, fresh masks every epoch.

Same `(x, y)` contract as the static records (`pipelines.pretraining.contract`);
no files written.
"""

import random
import weakref
from typing import Optional, Sequence, Union

import tensorflow as tf

from pipelines import corpus as corpus_lib
from pipelines.masking import MaskedLmMasker
from pipelines.packing import BertPacker
from pipelines.tokenizer import BertTokenizer, VocabularyError


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
        def chunk_document(sentences, element_seed):
            return _document_chunks(tokenize(sentences), sentences, element_seed, max_num_tokens, short_seq_prob)

        out = docs.map(
            chunk_document,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        ).unbatch()
        if shuffle:
            out = out.shuffle(shuffle_buffer, seed=seed + 20 + stream, reshuffle_each_iteration=True)
        return out

    partners = chunks(1).repeat()  # never runs dry
    pair_seeds = tf.data.Dataset.random(seed=seed + 30, rerandomize_each_iteration=True).batch(2)

    def pair_up(chunk, partner, pair_seed):
        return _make_pairs(chunk, partner, pair_seed, max_num_tokens)

    pairs = tf.data.Dataset.zip(chunks(0), partners, pair_seeds).map(
        pair_up,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    # One or two pairs per chunk (the second from sentences "put back").
    pairs = pairs.unbatch().filter(_pair_exists).map(_without_exists_flag)
    packer = BertPacker(seq_length, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad)
    masker = MaskedLmMasker.from_vocabulary(
        tokenizer.vocabulary, special_tokens=special, max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob, whole_word_mask=whole_word_mask, added_tokens=tokenizer.added_tokens,
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


def _pair_exists(tokens_a, tokens_b, label, exists):
    del tokens_a, tokens_b, label
    return exists


def _without_exists_flag(tokens_a, tokens_b, label, exists):
    del exists
    return tokens_a, tokens_b, label


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
