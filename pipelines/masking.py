"""Masked-LM masking of packed BERT inputs with core TensorFlow ops.

One implementation serves both pretraining data modes: the static writer calls
it eagerly on batches of packed instances, the dynamic `tf.data` pipeline maps
it over batches (fresh masks every epoch). Only stateless random ops are used,
so the masks are a pure function of the inputs and the seed.
"""

import tensorflow as tf


class MaskedLmMasker:
    """Chooses and corrupts the masked-LM targets of packed token ids, as the original BERT.

    Follows `create_masked_lm_predictions` of google-research/bert:

    - Eligible tokens are the real tokens other than `[CLS]`, `[SEP]` and
      `[PAD]` (and any other `special_ids`). Padding is never chosen.
    - `num_to_predict = min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))`
      with `n` the number of real tokens of the sequence, `[CLS]` and `[SEP]`
      included (the original's `len(tokens)`), though those are never chosen.
      Real tokens are the `padding_mask` ones, else those that are not
      `pad_id`. `round` rounds half to even, as Python's.
    - Targets are picked uniformly at random. With `whole_word_mask`, a word
      (a token plus the `##` pieces that follow it) is picked whole or not at
      all; words go in random order and a word that would overshoot
      `num_to_predict` is skipped, as in the original.
    - Each picked word is replaced by `[MASK]` with probability
      `mask_token_rate` (0.8), left unchanged with probability
      `unchanged_rate` (0.1), else each of its tokens is replaced by a token
      drawn uniformly from the whole vocabulary (the original's
      `rng.choice(vocab_words)`).
    - With `whole_word_mask`, words and their choice follow tf-models-official's
      copy of the script (`_tokens_to_grams`): one choice for the whole word, and
      `[SEP]` ends a word. google-research/bert draws the choice for each piece
      of a picked word, and joins a `##` piece right after the middle `[SEP]` to
      the last word of sentence A. Without it, a word is one token: the same.

    Works eagerly and inside `tf.data` / `tf.function`; the sequence width can
    be static or dynamic.

    Example:

    >>> masker = MaskedLmMasker(vocab_size=30522, mask_id=103, special_ids=[0, 101, 102],
    ...                         max_predictions_per_seq=20)
    >>> token_ids = tf.constant([[101, 7592, 2088, 999, 102, 0, 0]])
    >>> out = masker(token_ids, seed=[1, 2])
    >>> sorted(out)
    ['masked_lm_ids', 'masked_lm_positions', 'masked_lm_weights', 'token_ids']
    >>> out["masked_lm_positions"].shape
    TensorShape([1, 20])

    Args:
        vocab_size: int. Random replacement tokens are drawn from `[0, vocab_size)`.
        mask_id: int. Id of `[MASK]`.
        special_ids: list of int. Ids that are never chosen (at least `[CLS]`,
            `[SEP]` and `[PAD]`).
        max_predictions_per_seq: int. Width `P` of the masked-LM outputs and cap
            on the predictions per sequence (20 for 128 tokens in the original).
        masked_lm_prob: float. Share of the eligible tokens to predict (0.15).
        mask_token_rate: float. Share of the chosen words replaced by `[MASK]`.
        unchanged_rate: float. Share of the chosen words left unchanged; the
            rest get random tokens.
        whole_word_mask: bool. Choose whole words instead of single pieces.
        continuation_ids: list of int. Ids of the `##` pieces; required with
            `whole_word_mask` (see `from_vocabulary`).
        pad_id: int or None. Id of `[PAD]`: without a `padding_mask`, the
            tokens that are not `pad_id` are the sequence's length in the
            budget (every position when None).
    """

    def __init__(
        self,
        *,
        vocab_size,
        mask_id,
        special_ids,
        max_predictions_per_seq,
        masked_lm_prob=0.15,
        mask_token_rate=0.8,
        unchanged_rate=0.1,
        whole_word_mask=False,
        continuation_ids=None,
        pad_id=None,
    ):
        if mask_id is None:
            raise ValueError("Masked-LM masking needs a [MASK] token id; this vocabulary has none.")
        if int(max_predictions_per_seq) < 1:
            raise ValueError(f"max_predictions_per_seq must be at least 1, got {max_predictions_per_seq}.")
        if not 0.0 < masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}.")
        if mask_token_rate < 0 or unchanged_rate < 0 or mask_token_rate + unchanged_rate > 1:
            raise ValueError(
                f"mask_token_rate ({mask_token_rate}) and unchanged_rate ({unchanged_rate}) must be "
                "non-negative and sum to at most 1 (the rest get random tokens)."
            )
        if whole_word_mask and continuation_ids is None:
            raise ValueError("whole_word_mask needs continuation_ids (the ids of the '##' pieces).")
        self.vocab_size = int(vocab_size)
        self.mask_id = int(mask_id)
        self.special_ids = sorted({int(i) for i in special_ids})
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.masked_lm_prob = float(masked_lm_prob)
        self.mask_token_rate = float(mask_token_rate)
        self.unchanged_rate = float(unchanged_rate)
        self.whole_word_mask = bool(whole_word_mask)
        self.pad_id = None if pad_id is None else int(pad_id)
        # A dense bool lookup (one entry per id) is a single gather in the graph.
        is_continuation = [False] * self.vocab_size
        for i in continuation_ids or ():
            is_continuation[int(i)] = True
        self._is_continuation = tf.constant(is_continuation, tf.bool)

    @classmethod
    def from_vocabulary(cls, vocabulary, *, special_tokens, max_predictions_per_seq, added_tokens=None, **kwargs):
        """Builds a masker for a token list and its `SpecialTokens`.

        Example:

        >>> from pipelines.tokenizer import special_tokens_from_vocabulary
        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing"]
        >>> masker = MaskedLmMasker.from_vocabulary(
        ...     vocab, special_tokens=special_tokens_from_vocabulary(vocab),
        ...     max_predictions_per_seq=5, whole_word_mask=True)

        Args:
            vocabulary: list of str. The tokens, `vocabulary[i]` having id `i`.
            special_tokens: `SpecialTokens` of this vocabulary (with a mask id).
            max_predictions_per_seq: int. As in the constructor.
            added_tokens: the tokenizer's added tokens (`BertTokenizer.added_tokens`): the special
                ones are never chosen, as [CLS] / [SEP] / [PAD]; the others are words of their own
                (`pipelines.tokenizer.added_tokens.never_masked_ids`).
            **kwargs: the other constructor arguments.
        """
        from pipelines.tokenizer.added_tokens import never_masked_ids

        return cls(
            vocab_size=len(vocabulary),
            mask_id=special_tokens.mask,
            special_ids=[special_tokens.cls, special_tokens.sep, special_tokens.pad,
                         *never_masked_ids(added_tokens, special_tokens)],
            pad_id=special_tokens.pad,
            max_predictions_per_seq=max_predictions_per_seq,
            continuation_ids=[i for i, token in enumerate(vocabulary) if token.startswith("##")],
            **kwargs,
        )

    def __call__(self, token_ids, seed=None, padding_mask=None, noise=None):
        """Masks a batch.

        Args:
            token_ids: int tensor `[batch, seq_length]` of packed ids.
            seed: int tensor of shape `[2]`, the stateless RNG seed. Same
                inputs and seed give the same masks.
            padding_mask: optional int/bool `[batch, seq_length]`, 1 for real
                tokens. Without it, only the special ids decide eligibility.
            noise: instead of `seed`, the random draws themselves, a dict of
                `[batch, seq_length]` tensors: `score`, `action`, `keep`
                (float32 uniform in [0, 1)) and `random_ids` (int32 uniform in
                `[0, vocab_size)`). Each row's masks then depend on its own
                row only (the static writer seeds them per instance:
                `pipelines.pretraining.seeding.masking_noise`).

        Returns:
            A dict: `token_ids` (same dtype and shape, corrupted),
            `masked_lm_positions` and `masked_lm_ids` (same int dtype,
            `[batch, P]`, sorted by position, padded with 0) and
            `masked_lm_weights` (float32 `[batch, P]`, 1.0 for a real target).
        """
        token_ids = tf.convert_to_tensor(token_ids)
        dtype = token_ids.dtype
        ids = tf.cast(token_ids, tf.int32)
        shape = tf.shape(ids)
        batch, width = shape[0], shape[1]
        if noise is None:
            if seed is None:
                raise ValueError("Pass a `seed` or the `noise` to mask with.")
            seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
            word_seed, action_seed, keep_seed, random_seed = tf.unstack(
                tf.random.experimental.stateless_split(seed, num=4)
            )
            noise = {
                "score": lambda: tf.random.stateless_uniform(shape, word_seed),
                "action": lambda: tf.random.stateless_uniform(shape, action_seed),
                "keep": lambda: tf.random.stateless_uniform(shape, keep_seed),
                "random_ids": lambda: tf.random.stateless_uniform(
                    shape, random_seed, minval=0, maxval=self.vocab_size, dtype=tf.int32),
            }
        else:
            noise = {name: (lambda value=noise[name], dtype=dtype: tf.cast(value, dtype))
                     for name, dtype in (("score", tf.float32), ("action", tf.float32), ("keep", tf.float32),
                                         ("random_ids", tf.int32))}

        eligible = tf.reduce_all(ids[:, :, None] != tf.constant(self.special_ids, tf.int32), axis=-1)
        if padding_mask is not None:
            real = tf.cast(padding_mask, tf.bool)
            eligible &= real
        elif self.pad_id is not None:
            real = ids != self.pad_id
        else:
            real = tf.ones_like(eligible)
        num_eligible = tf.reduce_sum(tf.cast(eligible, tf.int32), axis=1)
        # The original's budget counts every token of the sequence, [CLS] and [SEP] included.
        num_tokens = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
        rounded = tf.cast(tf.round(tf.cast(num_tokens, tf.float64) * self.masked_lm_prob), tf.int32)
        budget = tf.minimum(self.max_predictions_per_seq, tf.maximum(1, rounded))
        budget = tf.where(num_eligible > 0, budget, 0)

        # A word starts at every eligible token that is not a "##" piece
        # continuing an eligible token (a "##" piece right after [CLS] starts
        # its own word, as in the original's _tokens_to_grams).
        if self.whole_word_mask:
            is_piece = tf.gather(self._is_continuation, tf.clip_by_value(ids, 0, self.vocab_size - 1))
            previous_eligible = tf.pad(eligible[:, :-1], [[0, 0], [1, 0]])
            word_start = eligible & ~(is_piece & previous_eligible)
        else:
            word_start = eligible
        # Position of the word start each token belongs to (-1 outside words):
        # the k-th start of a row is the k-th smallest start position.
        position = tf.broadcast_to(tf.range(width)[None, :], shape)
        if self.whole_word_mask:
            starts = tf.sort(tf.where(word_start, position, width), axis=1)
            word_number = tf.maximum(tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1, 0)
            start_of = tf.where(eligible, tf.gather(starts, word_number, batch_dims=1), -1)
        else:
            start_of = tf.where(eligible, position, -1)

        # Words in random order: sort word starts by a uniform score.
        score = noise["score"]()
        score = tf.where(word_start, score, 2.0)  # non-starts sort last
        order = tf.argsort(score, axis=1, stable=True)
        if self.whole_word_mask:
            # Length of each word, stored at its start position.
            flat_start = tf.where(eligible, start_of + _row_offsets(batch, width), batch * width)
            word_length = tf.math.unsorted_segment_sum(tf.ones_like(ids), flat_start, batch * width + 1)[:-1]
            word_length = tf.reshape(word_length, shape)
            chosen_start = _greedy_take(tf.gather(word_length, order, batch_dims=1), budget)
        else:
            # Every word is one token: take the first `budget` in random order.
            chosen_start = (tf.range(width)[None, :] < budget[:, None]) & tf.gather(word_start, order, batch_dims=1)
        # Back from sorted order to positions.
        chosen_start = tf.scatter_nd(
            tf.stack([tf.broadcast_to(tf.range(batch)[:, None], shape), order], axis=-1),
            tf.cast(chosen_start, tf.int32),
            shape,
        ) > 0
        chosen = eligible & tf.gather(chosen_start, tf.maximum(start_of, 0), batch_dims=1)

        # One action per word (read at its start), as the original's per-gram choice.
        action = noise["action"]()
        keep = noise["keep"]()
        action = tf.gather(action, tf.maximum(start_of, 0), batch_dims=1)
        keep = tf.gather(keep, tf.maximum(start_of, 0), batch_dims=1)
        to_mask = chosen & (action < self.mask_token_rate)
        unchanged_share = self.unchanged_rate / max(1e-12, 1.0 - self.mask_token_rate)
        to_random = chosen & (action >= self.mask_token_rate) & (keep >= unchanged_share)
        random_ids = noise["random_ids"]()
        corrupted = tf.where(to_mask, self.mask_id, ids)
        corrupted = tf.where(to_random, random_ids, corrupted)

        positions, weights = _sorted_positions(chosen, self.max_predictions_per_seq)
        labels = tf.gather(ids, positions, batch_dims=1) * tf.cast(weights, tf.int32)
        return {
            "token_ids": tf.cast(corrupted, dtype),
            "masked_lm_positions": tf.cast(positions, dtype),
            "masked_lm_ids": tf.cast(labels, dtype),
            "masked_lm_weights": weights,
        }


def _row_offsets(batch, width):
    """`[batch, 1]` offsets `b * width` that make per-row indices unique across the batch."""
    return tf.range(batch)[:, None] * width


def _greedy_take(lengths, budget):
    """Takes words in order while they fit: a word that would overshoot is skipped.

    The original's loop (`if count + len(word) > num_to_predict: continue`) is
    sequential, so this scans over the word axis, vectorized over the batch.

    Args:
        lengths: int32 `[batch, words]`, 0 for "no word here".
        budget: int32 `[batch]`.

    Returns:
        bool `[batch, words]`: which words are taken.
    """

    def step(state, length):
        count, _ = state
        take = (length > 0) & (count + length <= budget)
        return count + tf.where(take, length, 0), take

    initial = (tf.zeros_like(budget), tf.zeros_like(budget, tf.bool))
    _, taken = tf.scan(step, tf.transpose(lengths), initializer=initial)
    return tf.transpose(taken)


def _sorted_positions(chosen, width):
    """Positions of the chosen tokens, ascending, padded with 0 to `width`.

    Returns (int32 positions `[batch, width]`, float32 weights `[batch, width]`).
    """
    shape = tf.shape(chosen)
    seq_width = shape[1]
    position = tf.broadcast_to(tf.range(seq_width)[None, :], shape)
    # Unchosen tokens get a key past the end, so a sort puts chosen ones first.
    key = tf.sort(tf.where(chosen, position, seq_width), axis=1)
    pad = tf.maximum(0, width - seq_width)
    key = tf.pad(key, [[0, 0], [0, pad]], constant_values=seq_width)[:, :width]
    real = key < seq_width
    key.set_shape([chosen.shape[0], width])
    real.set_shape([chosen.shape[0], width])
    return tf.where(real, key, 0), tf.cast(real, tf.float32)
