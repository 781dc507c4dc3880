"""Turns texts into padded batches: shared by every task module.

Two steps, used by `glue`, `text_files`, `swag` and `conll`:

1. `encode_texts`: tokenizes and packs texts in large chunks (one
   tokenizer call per chunk, not per example) and hands back UNPADDED
   examples: `token_ids` / `segment_ids` / `padding_mask` as long as the
   packed sequence (`[length]`, or `[choices, length]` for multiple choice).
2. `batch`: pads those examples into batches, one of three ways:

   - default: to the longest sequence of the batch rounded up to a multiple
     of 8 (at most `seq_length`): little padding, few distinct shapes (fewer
     retraces / XLA compilations, tensor-core friendly widths).
   - `bucket_boundaries=[...]`: `tf.data.Dataset.bucket_by_sequence_length`
     first groups examples of similar length, then pads as above: even less
     padding on corpora with very uneven lengths. Order is shuffled by it.
   - `static_shapes=True`: every batch exactly `[batch_size, seq_length]`,
     incomplete last batch dropped: what TPUs (and XLA without dynamic
     shapes) need.

Padding values: features 0 (`token_ids` pad, `segment_ids`, `padding_mask`),
except `word_ids` -1 (no word); token-level labels (any label with a sequence
axis) `-100`, the value losses skip. Scalar labels are not padded.

Example:
    >>> import tensorflow as tf
    >>> from pipelines import BertTokenizer
    >>> from pipelines.datasets import batching
    >>> tokenizer = BertTokenizer("vocab.txt")
    >>> texts = tf.data.Dataset.from_tensor_slices(
    ...     ((["a short one", "and a longer sentence here"],), [0, 1]))
    >>> examples = batching.encode_texts(texts, tokenizer, seq_length=128)
    >>> x, y = next(iter(batching.batch(examples, 2, seq_length=128)))
    >>> x["token_ids"].shape        # longest is 7 tokens, rounded up to 8
    TensorShape([2, 8])
"""

import tensorflow as tf

from pipelines import row_ops
from pipelines.packing import BertPacker

# Padding multiple for dynamic shapes (same as BertPacker(pad_to="longest")).
PAD_MULTIPLE = 8
# Label value of padding / non-first sub-tokens: Keras/PyTorch-style "ignore".
IGNORE_LABEL = -100
# Padding value per feature name; anything else pads with 0.
FEATURE_PAD_VALUES = {"word_ids": -1}
# Texts tokenized per tokenizer call in `encode_texts`: bounds ragged tensor
# sizes while amortizing per-op overhead.
ENCODE_CHUNK = 256


def _kept(tokenizer, key, function):
    """The map step `function` as the tokenizer keeps it (`BertTokenizer.pipeline_function`:
    traced once, not once per pipeline); as given for a tokenizer without that cache."""
    keep = getattr(tokenizer, "pipeline_function", None)
    return function if keep is None else keep(key, function)


# `read_now`: the most rows an encoder reads at once, and the most values (token ids, segment ids
# and masks together, padded to seq_length) it holds before it goes back to streaming.
READ_NOW_MAX_ROWS = 4096
READ_NOW_MAX_VALUES = 1 << 25


def _encoded(dataset, encode_chunk, trim, *, read_now):
    """`dataset`'s rows in chunks of `ENCODE_CHUNK` through `encode_chunk`, unbatched, each trimmed.

    Streamed, the chunks are encoded by a `tf.data` map: every new iterator of the pipeline (every
    `predict` and `evaluate` call, each epoch's validation) instantiates the map's function again,
    and TensorFlow optimizes its graph anew each time (~0.2 ms an op: ~180 ms for the tokenizer's
    ~500). With `read_now`, a finite dataset of at most `READ_NOW_MAX_ROWS` rows is encoded at once
    by eager calls of `encode_chunk` (a kept `tf.function`: its graph is optimized once a process),
    and the dataset returned reads the encoded tensors. The elements are the same either way. Only
    for rows in memory that are read in order: a shuffling dataset would be read in one order for
    good. A dataset whose encoded values pass `READ_NOW_MAX_VALUES` is streamed.
    """
    chunks = dataset.batch(ENCODE_CHUNK)
    rows = int(dataset.cardinality())
    if read_now and 0 < rows <= READ_NOW_MAX_ROWS and tf.executing_eagerly():
        encoded = _read_now(chunks, encode_chunk)
        if encoded is not None:
            return encoded.map(trim)
    return (chunks.map(encode_chunk, num_parallel_calls=tf.data.AUTOTUNE)
            .unbatch()
            .map(trim, num_parallel_calls=tf.data.AUTOTUNE))


def _read_now(chunks, encode_chunk):
    """A dataset of the encoded examples of `chunks`, or None past `READ_NOW_MAX_VALUES`."""
    # One trace for any chunk size (the one a map of these chunks uses), not one per size.
    specs = chunks.element_spec if isinstance(chunks.element_spec, tuple) else (chunks.element_spec,)
    encode = encode_chunk.get_concrete_function(*specs) if hasattr(encode_chunk, "get_concrete_function") \
        else encode_chunk
    parts, values = [], 0
    for chunk in chunks:
        part = encode(*(chunk if isinstance(chunk, tuple) else (chunk,)))
        values += sum(int(tf.size(v.flat_values if isinstance(v, tf.RaggedTensor) else v))
                      for v in tf.nest.flatten(part[0]))
        if values > READ_NOW_MAX_VALUES:
            return None
        parts.append(part)
    joined = tf.nest.map_structure(lambda *leaves: tf.concat(leaves, axis=0), *parts)
    return tf.data.Dataset.from_tensor_slices(tuple(joined))


def encode_texts(dataset, tokenizer, *, seq_length, truncation="longest_first", read_now=False):
    """Tokenizes and packs `(texts, label)` examples into unpadded BERT inputs.

    Example:
        >>> from pipelines import BertTokenizer
        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
        ...                                       "a", "b", "c", "d", "e", "f"])
        >>> ds = tf.data.Dataset.from_tensor_slices(((["a b", "c"], ["d", "e f"]), [0, 1]))
        >>> x, y = next(iter(encode_texts(ds, tokenizer, seq_length=16)))
        >>> x["segment_ids"].numpy().tolist()    # [CLS] a b [SEP] d [SEP]
        [0, 0, 0, 0, 1, 1]

    Args:
        dataset: unbatched `tf.data.Dataset` of `(texts, label)` or `(texts,
            label, sample_weight)` (the weight passes through); `texts` is
            a tuple of one (single sentence) or two (pair) string tensors,
            each a scalar or `[choices]` (multiple choice: every choice is
            packed separately, sharing one length).
        tokenizer: a `pipelines.BertTokenizer`.
        seq_length: maximum packed length, special tokens included.
        truncation: `BertPacker` truncation rule.
        read_now: rows in memory, read in order (no shuffle): encode them at once, not per
            iterator (`_encoded`); for `predict` / `evaluate` calls of a few texts.

    Returns:
        Unbatched dataset of `(x, label[, sample_weight])`: `x` holds int32 `token_ids`,
        `segment_ids`, `padding_mask` of shape `[length]` (or
        `[choices, length]`), `length <= seq_length` the packed length (the
        longest choice's for multiple choice).
    """
    special = tokenizer.special_tokens
    packer = BertPacker(seq_length, cls_id=special.cls, sep_id=special.sep,
                        pad_id=special.pad, truncation=truncation, pad_to="fixed")

    @tf.autograph.experimental.do_not_convert  # graph code as written: no autograph pass when traced
    def encode_chunk(texts, *labels):
        leading = tf.shape(texts[0])  # [chunk] or [chunk, choices]
        flat = [tokenizer.traced_tokenize(tf.reshape(t, [-1])) for t in texts]
        packed = packer(tuple(flat))
        shape = tf.concat([leading, [seq_length]], axis=0)
        packed = {k: tf.reshape(v, shape) for k, v in packed.items()}
        # Per-example length: real tokens of the longest choice.
        lengths = tf.reduce_sum(packed["padding_mask"], axis=-1)
        if texts[0].shape.rank == 2:
            lengths = tf.reduce_max(lengths, axis=-1)
        return (packed, lengths) + labels

    @tf.autograph.experimental.do_not_convert
    def trim(x, length, *labels):
        return ({k: v[..., :length] for k, v in x.items()},) + labels

    encode_chunk = _kept(tokenizer, ("encode_texts", seq_length, truncation), encode_chunk)
    trim = _kept(tokenizer, ("trim_last_axis",), trim)
    encoded = _encoded(dataset, encode_chunk, trim, read_now=read_now)
    count = dataset.cardinality()
    if count >= 0:
        # One example out per example in; `unbatch` hides that. A known length lets
        # Keras' evaluate/predict stop at the last batch instead of running into the
        # end of the data (its "Your input ran out of data" warning).
        encoded = encoded.apply(tf.data.experimental.assert_cardinality(count))
    return encoded



def encode_text_windows(dataset, tokenizer, *, seq_length, stride, max_length=None, training=False,
                        read_now=False):
    """Tokenizes single texts and packs each as windows of its word pieces (`pipelines.windowing`).

    A text of up to `seq_length - 2` pieces is one window, packed exactly as `encode_texts`
    packs it; a longer one is `[CLS] window [SEP]` windows of `seq_length - 2` pieces,
    `stride` pieces apart, over its first `max_length` pieces (None: one window, the first
    `seq_length - 2`). A text's windows are consecutive, in text order.

    Example:
        >>> from pipelines import BertTokenizer
        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
        ...                                       "a", "b", "c", "d", "e", "f"])
        >>> ds = tf.data.Dataset.from_tensor_slices(((["a b c d e f", "a"],), [0, 1]))
        >>> windows = encode_text_windows(ds, tokenizer, seq_length=6, stride=2, max_length=100)
        >>> [(x["token_ids"].numpy().tolist(), int(y), bool(info["first_window"]),
        ...   bool(info["truncated"])) for x, y, info in windows]
        [([2, 5, 6, 7, 8, 3], 0, True, False), ([2, 7, 8, 9, 10, 3], 0, False, False), ([2, 5, 3], 1, True, False)]

    Args:
        dataset: unbatched `((text,), label[, sample_weight])`, `text` a scalar string.
        tokenizer: a `pipelines.BertTokenizer`.
        seq_length: the packed length of a window, special tokens included.
        stride: word pieces between the starts of two windows of a text.
        max_length: word pieces of a text read at all (None: `seq_length - 2`).
        training: every window is an example with its text's label (and weight): a long
            text counts once per window, as Hugging Face's overflowing windows do.
        read_now: rows in memory, read in order (no shuffle): encode them at once, not per
            iterator (`_encoded`); for `predict` / `evaluate` calls of a few texts.

    Returns:
        Unbatched windows, `(x, label[, sample_weight])` when `training`, else
        `(x, label, {"first_window", "truncated", "num_tokens"})`: bools that mark each
        text's first window (`cumsum - 1` is the text's index) and a text whose pieces past
        `max_length` were not read, and the window's real tokens (special tokens included).
    """
    from pipelines.windowing import ragged_windows

    special = tokenizer.special_tokens
    packer = BertPacker(seq_length, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad,
                        pad_to="fixed")
    window = seq_length - 2
    max_length = window if max_length is None else max_length

    @tf.autograph.experimental.do_not_convert  # graph code as written: no autograph pass when traced
    def encode_chunk(texts, label, *weight):
        ids = tokenizer.traced_tokenize(tf.reshape(texts[0], [-1]))
        windows, document, truncated = ragged_windows(ids, window=window, stride=stride,
                                                      max_length=max_length)
        packed = packer((windows,))
        lengths = tf.reduce_sum(packed["padding_mask"], axis=-1)
        first = tf.concat([[True], document[1:] != document[:-1]], axis=0)
        per_window = [tf.gather(part, document) for part in (label,) + weight]
        if training:
            return (packed, lengths, *per_window)
        info = {"first_window": first, "truncated": tf.gather(truncated, document),
                "num_tokens": lengths}
        return (packed, lengths, per_window[0], info)

    @tf.autograph.experimental.do_not_convert
    def trim(x, length, *rest):
        return ({k: v[..., :length] for k, v in x.items()},) + rest

    encode_chunk = _kept(tokenizer, ("encode_text_windows", seq_length, stride, max_length, bool(training)),
                         encode_chunk)
    trim = _kept(tokenizer, ("trim_last_axis",), trim)
    encoded = _encoded(dataset, encode_chunk, trim, read_now=read_now)
    count = dataset.cardinality()
    if max_length <= window and count >= 0:  # one window per text: the count is known (see encode_texts)
        encoded = encoded.apply(tf.data.experimental.assert_cardinality(count))
    return encoded

def encode_text_documents(dataset, tokenizer, *, seq_length, stride, max_length=None, read_now=False):
    """Tokenizes single texts into one example each: all its windows, `[windows, length]`.

    The windows of `encode_text_windows` (same pieces, same packing), grouped by text: a
    text is one training example whatever its length, so a step of `batch_size` texts
    scores each text as a whole (`TextClassifier`'s text-level training). `batch` pads
    a batch to `[texts, most windows, longest window]`; a padding window has no real
    token (`padding_mask` all 0).

    Example:
        >>> from pipelines import BertTokenizer
        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
        ...                                       "a", "b", "c", "d", "e", "f"])
        >>> ds = tf.data.Dataset.from_tensor_slices(((["a b c d e f", "a"],), [0, 1]))
        >>> texts = encode_text_documents(ds, tokenizer, seq_length=6, stride=2, max_length=100)
        >>> [(x["token_ids"].numpy().tolist(), int(y)) for x, y in texts]
        [([[2, 5, 6, 7, 8, 3], [2, 7, 8, 9, 10, 3]], 0), ([[2, 5, 3]], 1)]

    Args:
        dataset: unbatched `((text,), label[, sample_weight])`, `text` a scalar string.
        tokenizer, seq_length, stride, max_length, read_now: as `encode_text_windows`.

    Returns:
        Unbatched `(x, label[, sample_weight])`, `x` a dict of int32 `[windows, length]`
        (`length` the text's longest window).
    """
    from pipelines.windowing import ragged_windows

    special = tokenizer.special_tokens
    packer = BertPacker(seq_length, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad,
                        pad_to="fixed")
    window = seq_length - 2
    max_length = window if max_length is None else max_length

    @tf.autograph.experimental.do_not_convert  # graph code as written: no autograph pass when traced
    def encode_chunk(texts, *rest):
        texts = tf.reshape(texts[0], [-1])
        ids = tokenizer.traced_tokenize(texts)
        windows, document, _ = ragged_windows(ids, window=window, stride=stride, max_length=max_length)
        packed = packer((windows,))
        rows = tf.size(texts, out_type=tf.int64)
        lengths = tf.math.unsorted_segment_max(tf.reduce_sum(packed["padding_mask"], axis=-1),
                                               document, rows)
        splits = row_ops.row_splits_of(document, rows)  # a text's windows are consecutive
        by_text = {k: tf.RaggedTensor.from_row_splits(v, splits, validate=False) for k, v in packed.items()}
        return (by_text, lengths) + rest

    @tf.autograph.experimental.do_not_convert
    def trim(x, length, *rest):
        return ({k: v[:, :length] for k, v in x.items()},) + rest

    encode_chunk = _kept(tokenizer, ("encode_text_documents", seq_length, stride, max_length), encode_chunk)
    trim = _kept(tokenizer, ("trim_windows",), trim)
    encoded = _encoded(dataset, encode_chunk, trim, read_now=read_now)
    count = dataset.cardinality()
    if count >= 0:  # one example per text
        encoded = encoded.apply(tf.data.experimental.assert_cardinality(count))
    return encoded


def batch(dataset, batch_size, *, seq_length, static_shapes=False, bucket_boundaries=None,
          drop_remainder=None):
    """Pads unpadded `(x, y)` examples into batches (see the module docstring).

    Example:
        >>> from pipelines import BertTokenizer
        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
        >>> texts = tf.data.Dataset.from_tensor_slices(((["a b", "b a a"],), [0, 1]))
        >>> examples = encode_texts(texts, tokenizer, seq_length=128)
        >>> batched = batch(examples, 32, seq_length=128, static_shapes=True)
        >>> batched.element_spec[0]["token_ids"].shape
        TensorShape([32, 128])

    Args:
        dataset: unbatched dataset of `(x, y)` or `(x, y, sample_weight)`: `x` a dict of int tensors
            whose LAST axis is the sequence (`[length]` or `[choices, length]`,
            at most `seq_length`); `y` a scalar label or a `[length]` token
            label sequence.
        batch_size: examples per batch.
        seq_length: the maximum length; the fixed width with `static_shapes`.
        static_shapes: pad every batch to `[batch_size, seq_length]` and drop
            the incomplete last batch (TPU).
        bucket_boundaries: increasing lengths that delimit buckets (e.g.
            `[32, 64]`: lengths < 32, 32..63, >= 64); each batch comes from
            one bucket. Not with `static_shapes`.
        drop_remainder: drop the incomplete last batch; default True with
            `static_shapes`, else False.

    Returns:
        Batched dataset of `(x, y)`, widths a multiple of 8 (or `seq_length`).
    """
    if static_shapes and bucket_boundaries:
        raise ValueError("static_shapes and bucket_boundaries exclude each other: "
                         "static batches all have width seq_length already.")
    if drop_remainder is None:
        drop_remainder = bool(static_shapes)
    x_spec, y_spec, *weight_spec = dataset.element_spec
    # A per-example sample weight (Keras' third element; or `encode_text_windows`' window
    # marks) is scalars: never padded.
    pad_values = ({k: tf.constant(FEATURE_PAD_VALUES.get(k, 0), spec.dtype) for k, spec in x_spec.items()},
                  _label_pad_value(y_spec)) + tuple(
        tf.nest.map_structure(lambda spec: tf.zeros([], spec.dtype), w) for w in weight_spec)

    if static_shapes:
        shapes = ({k: spec.shape[:-1].concatenate([seq_length]) for k, spec in x_spec.items()},
                  y_spec.shape[:-1].concatenate([seq_length]) if y_spec.shape.rank else y_spec.shape
                  ) + tuple(tf.nest.map_structure(lambda spec: spec.shape, w) for w in weight_spec)
        return dataset.padded_batch(batch_size, padded_shapes=shapes, padding_values=pad_values,
                                    drop_remainder=drop_remainder)

    if bucket_boundaries:
        boundaries = sorted(int(b) for b in bucket_boundaries)
        batched = dataset.bucket_by_sequence_length(
            element_length_func=lambda x, *_: tf.shape(x["token_ids"])[-1],
            bucket_boundaries=boundaries,
            bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
            padding_values=pad_values, drop_remainder=drop_remainder)
    else:
        batched = dataset.padded_batch(batch_size, padding_values=pad_values,
                                       drop_remainder=drop_remainder)
    pad = tf.autograph.experimental.do_not_convert(
        lambda x, y, *weight: _pad_to_multiple(x, y, pad_values, seq_length) + weight)
    return batched.map(pad, num_parallel_calls=tf.data.AUTOTUNE)


def _label_pad_value(y_spec):
    if y_spec.shape.rank == 0:
        return tf.constant(0, y_spec.dtype)  # never used: scalars are not padded
    return tf.constant(IGNORE_LABEL, y_spec.dtype)


def _pad_to_multiple(x, y, pad_values, seq_length):
    """Widens the last axis to a multiple of PAD_MULTIPLE (at most seq_length)."""
    width = tf.shape(x["token_ids"])[-1]
    target = tf.minimum((width + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE, seq_length)
    target = tf.maximum(target, width)  # never cut real tokens

    def widen(tensor, value):
        rank = tensor.shape.rank
        paddings = [[0, 0]] * (rank - 1) + [[0, target - width]]
        return tf.pad(tensor, paddings, constant_values=value)

    x = {k: widen(v, pad_values[0][k]) for k, v in x.items()}
    if y.shape.rank and y.shape.rank > 1:  # token labels [batch, length]
        y = widen(y, pad_values[1])
    return x, y
