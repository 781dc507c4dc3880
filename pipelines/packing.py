"""Packs token ids into BERT's `[CLS] A [SEP] (B [SEP])` model inputs.

Only core TensorFlow ops are used (no TF-Text ops), so a SavedModel that
contains the packer runs on a stock TF Serving binary.
"""

import tensorflow as tf

from pipelines.encoder_inputs import PADDING_MASK, SEGMENT_IDS, TOKEN_IDS

_TRUNCATIONS = ("longest_first", "waterfall")
_PAD_TOS = ("fixed", "longest")
# pad_to="longest" rounds the length up to a multiple of this: fewer distinct
# shapes (fewer retraces / XLA compilations) and tensor-core friendly sizes.
_PAD_MULTIPLE = 8


class BertPacker:
    """Packs one or two segments of token ids into BERT inputs.

    Takes ids without special tokens (e.g. WordPiece output) and returns the
    three tensors a BERT encoder takes. Layout, with segment ids below:

    ```
    single: [CLS] A ... A [SEP] [PAD] ...      pair: [CLS] A ... A [SEP] B ... B [SEP] [PAD] ...
              0   0 ... 0   0     0                    0   0 ... 0   0   1 ... 1   1     0
    ```

    Sequences longer than `seq_length` are truncated from the end:
    - `"longest_first"`: the original BERT rule (`_truncate_seq_pair` in
      google-research/bert): drop the last token of the longer segment until
      the pair fits; on ties drop from B.
    - `"waterfall"`: A keeps as much as fits, B gets what is left.

    Works eagerly, in `tf.data.Dataset.map` and in `tf.function`. Input is
    batched (`[batch, (tokens)]`, ragged or dense) or a single example
    (`[tokens]`); outputs have the same batching. A ragged
    `[batch, (words), (pieces)]` input (WordPiece output) is flattened to
    `[batch, (pieces)]` first.

    Example:

    >>> packer = BertPacker(8, cls_id=101, sep_id=102, pad_id=0)
    >>> a = tf.ragged.constant([[7, 8, 9], [5]])
    >>> b = tf.ragged.constant([[20, 21], [30, 31, 32, 33, 34, 35]])
    >>> out = packer((a, b))
    >>> out["token_ids"].numpy().tolist()
    [[101, 7, 8, 9, 102, 20, 21, 102], [101, 5, 102, 30, 31, 32, 33, 102]]
    >>> out["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]
    >>> packer.num_truncated((a, b)).numpy().tolist()
    [0, 2]

    Args:
        seq_length: int. Maximum packed length, special tokens included; at
            least 2 (3 for pairs).
        cls_id, sep_id, pad_id: int. Ids of `[CLS]`, `[SEP]` and `[PAD]` in the
            vocabulary (see `special_tokens_from_vocabulary`).
        truncation: `"longest_first"` (default, original BERT) or
            `"waterfall"`.
        pad_to: `"fixed"` (default): always `seq_length` wide, with a static
            shape (TPUs, XLA). `"longest"`: as wide as the longest packed
            sequence of the batch rounded up to a multiple of 8, at most
            `seq_length` (less padding on GPU/CPU).

    Call args:
        segments: an int tensor (ragged or dense), or a tuple/list of one or
            two of them: segment A and optionally segment B. A list is always
            read as a list of segments, never as nested token ids.

    Returns:
        A dict of int32 tensors shaped `[batch, length]` (or `[length]` for a
        single example): `token_ids`, `segment_ids`, and `padding_mask` (1 for
        real tokens including `[CLS]`/`[SEP]`, 0 for padding).
    """

    def __init__(
        self,
        seq_length: int,
        *,
        cls_id: int,
        sep_id: int,
        pad_id: int,
        truncation: str = "longest_first",
        pad_to: str = "fixed",
    ):
        if int(seq_length) < 3:  # at 2 every text would be cut to nothing: [CLS] [SEP]
            raise ValueError(f"seq_length must be at least 3 ([CLS], a token and [SEP]), got {seq_length}.")
        if truncation not in _TRUNCATIONS:
            raise ValueError(f"truncation must be one of {_TRUNCATIONS}, got {truncation!r}.")
        if pad_to not in _PAD_TOS:
            raise ValueError(f"pad_to must be one of {_PAD_TOS}, got {pad_to!r}.")
        self.seq_length = int(seq_length)
        self.cls_id = int(cls_id)
        self.sep_id = int(sep_id)
        self.pad_id = int(pad_id)
        self.truncation = truncation
        self.pad_to = pad_to

    def __repr__(self):
        return (
            f"BertPacker({self.seq_length}, cls_id={self.cls_id}, sep_id={self.sep_id}, "
            f"pad_id={self.pad_id}, truncation={self.truncation!r}, pad_to={self.pad_to!r})"
        )

    @tf.autograph.experimental.do_not_convert  # graph code as written: no autograph pass when traced
    def __call__(self, segments):
        segments, unbatched = self._standardize(segments)
        lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]
        kept = self._kept_lengths(lengths)
        outputs = self._pack(segments, kept)
        if unbatched:
            outputs = {name: tf.squeeze(t, axis=0) for name, t in outputs.items()}
        return outputs

    def num_truncated(self, segments):
        """How many tokens truncation drops from each example (A and B together).

        Takes the same `segments` as calling the packer and only looks at their
        lengths, so calling both costs little. Use it to count or log how often
        and how much `seq_length` cuts, e.g.
        `tf.reduce_sum(tf.cast(packer.num_truncated(x) > 0, tf.int32))`.

        Returns:
            int32 tensor `[batch]` (a scalar for a single example).
        """
        segments, unbatched = self._standardize(segments)
        lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]
        kept = self._kept_lengths(lengths)
        dropped = tf.add_n(lengths) - tf.add_n(kept)
        return tf.squeeze(dropped, axis=0) if unbatched else dropped

    # ----------------------------------------------------------------------

    def _standardize(self, segments):
        """Returns (list of int32 RaggedTensors [batch, (tokens)], unbatched)."""
        if not isinstance(segments, (tuple, list)):
            segments = [segments]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"BertPacker takes 1 or 2 segments, got {len(segments)}.")

        standardized, ranks = [], []
        for segment in segments:
            if not isinstance(segment, tf.RaggedTensor):
                segment = tf.convert_to_tensor(segment)
            if not segment.dtype.is_integer:
                raise TypeError(f"Segments must hold integer token ids, got dtype {segment.dtype}.")
            rank = segment.shape.rank
            if rank == 1:
                # A single example: treat it as a batch of one row.
                segment = tf.RaggedTensor.from_tensor(segment[tf.newaxis, :])
            elif rank == 2 and not isinstance(segment, tf.RaggedTensor):
                segment = tf.RaggedTensor.from_tensor(segment)  # every row full
            elif rank == 3 and isinstance(segment, tf.RaggedTensor):
                segment = segment.merge_dims(1, 2)  # [batch, (words), (pieces)]
            elif rank != 2:
                raise ValueError(
                    "Each segment must be [tokens], [batch, (tokens)] or a ragged "
                    f"[batch, (words), (pieces)], got shape {segment.shape}."
                )
            ranks.append(rank)
            standardized.append(tf.cast(segment, tf.int32))
        if len(set(r == 1 for r in ranks)) > 1:
            raise ValueError(f"Segments A and B must both be batched or both single examples, got ranks {ranks}.")
        return standardized, ranks[0] == 1

    def _kept_lengths(self, lengths):
        """How many tokens of each segment survive truncation, per example."""
        if len(lengths) == 1:
            return [tf.minimum(lengths[0], self.seq_length - 2)]
        len_a, len_b = lengths
        budget = self.seq_length - 3
        if self.truncation == "waterfall":
            kept_a = tf.minimum(len_a, budget)
        else:
            # Closed form of the original loop
            #   while len(a) + len(b) > budget: (a if len(a) > len(b) else b).pop()
            # Popping always shortens the longer segment, so once both would be
            # cut they end up at ceil(budget / 2) (A) and floor(budget / 2) (B),
            # ties going against B. A also keeps budget - len_b when B is short
            # enough to stay whole, and never more than it has.
            # tests/pipelines/test_packing.py checks this against the loop.
            half_up = (budget + 1) // 2
            kept_a = tf.minimum(len_a, tf.maximum(budget - len_b, half_up))
        kept_b = tf.minimum(len_b, budget - kept_a)
        return [kept_a, kept_b]

    def _pack(self, segments, kept):
        """Builds the dense outputs position by position with gathers and selects.

        Dense index arithmetic instead of ragged concatenation: a handful of
        elementwise ops with a static width, cheap on any device and trivially
        exportable.
        """
        total = tf.add_n(kept) + len(segments) + 1  # [CLS] + one [SEP] per segment
        if self.pad_to == "fixed":
            width = self.seq_length
        else:
            # An empty batch is as wide as the narrowest packed row ([CLS] [SEP]), so that its
            # [0, width] tensors slice and broadcast as any batch's do.
            longest = tf.reduce_max(tf.concat([total, [2]], axis=0))
            rounded_up = (longest + _PAD_MULTIPLE - 1) // _PAD_MULTIPLE * _PAD_MULTIPLE
            width = tf.minimum(rounded_up, self.seq_length)

        position = tf.range(width)[tf.newaxis, :]  # [1, width]
        kept_a = kept[0][:, tf.newaxis]  # [batch, 1]
        sep_a = 1 + kept_a  # position of the first [SEP]
        token_ids = tf.where(position == 0, self.cls_id, self.pad_id)
        token_ids = tf.where((position >= 1) & (position < sep_a), _gather_rows(segments[0], position - 1), token_ids)
        token_ids = tf.where(position == sep_a, self.sep_id, token_ids)
        segment_ids = tf.zeros_like(token_ids)
        if len(segments) == 2:
            start_b = sep_a + 1
            sep_b = start_b + kept[1][:, tf.newaxis]
            in_b = (position >= start_b) & (position < sep_b)
            token_ids = tf.where(in_b, _gather_rows(segments[1], position - start_b), token_ids)
            token_ids = tf.where(position == sep_b, self.sep_id, token_ids)
            segment_ids = tf.cast((position >= start_b) & (position <= sep_b), tf.int32)
        padding_mask = tf.cast(position < total[:, tf.newaxis], tf.int32)

        outputs = {TOKEN_IDS: token_ids, SEGMENT_IDS: segment_ids, PADDING_MASK: padding_mask}
        if self.pad_to == "fixed":
            # Make the width visible to shape inference even if it got lost in
            # broadcasting: XLA/TPU need a static sequence dimension.
            batch = segments[0].shape[0]
            for tensor in outputs.values():
                tensor.set_shape([batch, self.seq_length])
        return outputs


def _gather_rows(ragged, column):
    """`ragged[i, column[i, j]]` as a dense tensor; out-of-row reads give junk.

    The junk is masked out by the caller. One extra value is appended so that
    even an empty segment (or batch) has something to read, which keeps every
    index in range.
    """
    values = tf.concat([ragged.values, [0]], axis=0)
    row_starts = tf.cast(ragged.row_starts(), tf.int32)[:, tf.newaxis]
    index = tf.clip_by_value(row_starts + column, 0, tf.shape(values)[0] - 1)
    return tf.gather(values, index)
