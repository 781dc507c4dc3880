"""Sliding windows over token sequences: the one windowing of every task family.

BERT reads at most `seq_length` positions; a longer text is read as overlapping windows
of its tokens, and every token is then predicted from the window where it is most
central. This is google-research/bert `run_squad.py`'s scheme for SQuAD contexts
(`doc_stride`, `_check_is_max_context`), here for any tokenized text, vectorised in numpy
on the host (the `tf.data` input pipelines call it before batching).

Words used here, once for the whole project:

- `window`: how many tokens of the text one window holds (the model's `seq_length`
  less its special tokens: `[CLS] ... [SEP]` leaves `seq_length - 2`).
- `stride`: the number of tokens between the STARTS of two consecutive windows
  (google-research `run_squad.py`'s `doc_stride`; every family's `stride` setting,
  SpanQA's included, means this).
  Consecutive windows share `window - stride` tokens. Hugging Face tokenizers
  (`return_overflowing_tokens=True, stride=N`) and so Hugging Face `run_qa.py`'s `doc_stride`
  are that OVERLAP: theirs is `window - ours` (HF `doc_stride=128` at `max_seq_length=384`
  is a stride of about 240 here, not 128). A stride above the window acts as the
  window (windows touch, none overlap, no token is skipped).
  The last window ends at the text's end, so it may be shorter than `window`;
  a text of `n` tokens has `1 + ceil(max(0, n - window) / stride)` windows (an empty
  text has one empty window, so that every text gets a prediction).
- `max_length`: tokens of a text that are read at all; the rest are cut (the text is
  `truncated`, which the families report: truncation is never silent). None: no limit.
- max context: a token in several windows is predicted from the one where
  `min(tokens left of it, tokens right of it) + 0.01 * window length` is highest, the
  first such window on ties (`_check_is_max_context`).

API (token indexes are 0-based within a text; window indexes are global over the batch):

- `window_spans(num_tokens, window, stride)` -> `(starts, lengths)` of one text's windows.
- `max_context_windows(num_tokens, window, stride)` -> for each token of one text, the
  index of its max-context window (among that text's windows);
  `max_context_windows_in_graph(positions, num_tokens, window, stride)` the same as graph
  ops (serving signatures).
- `Windows.of(lengths, window=, stride=, max_length=None)`: the windows of a BATCH of
  tokenized texts (their token counts), flat: the windows of text 0, then of text 1, ...
  (a text's windows are consecutive, so they batch together). It holds
  `document` (window -> text index), `start` / `length` (the window's tokens in its
  text), `window_splits` (text -> its windows), `truncated` / `num_kept` (per text),
  `token_window` (each token of the flat token list -> its max-context window, -1 when
  cut), and turns per-token arrays into windows and back:
  `take(flat_values)` -> `[num_windows, window, ...]` values of each window's tokens
  (padded), `is_max_context` -> bool `[num_windows, window]`, and
  `per_token(window_values)` -> `[num_tokens, ...]` each token's value from its
  max-context window (per-token outputs of a model: NER tags, SQuAD start logits).
- `ragged_windows(token_ids, window=, stride=, max_length=None)`: the same windows as
  graph ops on a `tf.RaggedTensor` (in `tf.data` maps and serving graphs).
- `question_context_layout` / `question_context_windows` / `question_context_max_context`:
  SQuAD's `[CLS] question [SEP] context window [SEP]` windows as graph ops.
- `window_options(seq_length, max_length=None, stride=None)` -> `(window, stride,
  max_length)`: a family's settings resolved (window `seq_length - 2`, stride None: half a
  window, max_length None: one window), checked.

Example:
    >>> import numpy as np
    >>> starts, lengths = window_spans(10, window=4, stride=3)
    >>> starts.tolist(), lengths.tolist()
    ([0, 3, 6], [4, 4, 4])
    >>> max_context_windows(10, window=4, stride=3).tolist()
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    >>> windows = Windows.of([10, 2], window=4, stride=3, max_length=8)
    >>> windows.document.tolist(), windows.start.tolist(), windows.length.tolist()
    ([0, 0, 0, 1], [0, 3, 6, 0], [4, 4, 2, 2])
    >>> windows.truncated.tolist(), windows.token_window.tolist()
    ([True, False], [0, 0, 0, 0, 1, 1, 1, 2, -1, -1, 3, 3])
    >>> ids = np.arange(100, 112)                       # the 12 tokens of both texts, flat
    >>> windows.take(ids, pad=0)[1].tolist()            # text 0's second window
    [103, 104, 105, 106]
    >>> windows.per_token(windows.take(ids, pad=0), fill=-1).tolist()
    [100, 101, 102, 103, 104, 105, 106, 107, -1, -1, 110, 111]
"""

import dataclasses

import numpy as np

# Tokens x candidate windows scored at once by `max_context_windows` (bounds memory for
# a tiny stride on a long text).
_CHUNK_SCORES = 1 << 22


def check_window(window, stride, max_length=None):
    """Raises ValueError unless `window`, `stride` (and `max_length`) are usable counts."""
    for name, value in (("window", window), ("stride", stride)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive number of tokens, not {value!r}")
    if max_length is not None and (isinstance(max_length, bool)
                                   or not isinstance(max_length, (int, np.integer)) or max_length < 0):
        raise ValueError(f"max_length must be a number of tokens >= 0 (or None), not {max_length!r}")


def num_windows(num_tokens, window, stride):
    """Windows of a text of `num_tokens` tokens (an array of counts gives an array)."""
    check_window(window, stride)
    step = min(window, stride)
    extra = np.maximum(np.asarray(num_tokens, np.int64) - window, 0)
    return 1 + (extra + step - 1) // step


def window_spans(num_tokens, window, stride):
    """`(starts, lengths)`, int64 arrays: the windows of one text (see the module docstring).

    The same windows as `run_squad.py`: starts `0, stride, 2 * stride, ...`, each `window`
    tokens long, the last one ending at the text's end.

    Example:
        >>> [s.tolist() for s in window_spans(7, window=4, stride=2)]
        [[0, 2, 4], [4, 4, 3]]
        >>> [s.tolist() for s in window_spans(0, window=4, stride=2)]
        [[0], [0]]
    """
    count = int(num_windows(num_tokens, window, stride))
    starts = np.arange(count, dtype=np.int64) * min(window, stride)
    return starts, np.minimum(int(num_tokens) - starts, window)


def max_context_windows(num_tokens, window, stride):
    """For each token of one text, its max-context window (index into `window_spans`).

    `run_squad.py`'s `_check_is_max_context` for every token at once: score = min(left,
    right context) + 0.01 * window length, the first window on ties.

    Example:
        >>> max_context_windows(7, window=4, stride=2).tolist()
        [0, 0, 0, 1, 1, 2, 2]
    """
    return _max_context(np.arange(int(num_tokens), dtype=np.int64),
                        np.full(int(num_tokens), int(num_tokens), np.int64), window, stride)


def _max_context(positions, num_tokens, window, stride):
    """Max-context window (index among its text's windows) of tokens at `positions` of
    texts of `num_tokens` tokens (arrays of the same shape)."""
    check_window(window, stride)
    step = min(window, stride)
    best = np.zeros(positions.shape, np.int64)
    # Windows holding token t: k from ceil((t - window + 1) / step) to floor(t / step),
    # clipped to the text's windows; at most ceil(window / step) of them.
    candidates = -(-window // step)
    chunk = max(1, _CHUNK_SCORES // candidates)
    for begin in range(0, positions.size, chunk):
        t = positions[begin:begin + chunk, None]
        n = num_tokens[begin:begin + chunk, None]
        last = (np.maximum(n - window, 0) + step - 1) // step  # the text's last window
        first = np.maximum(-((window - 1 - t) // step), 0)
        k = first + np.arange(candidates)[None, :]
        start = k * step
        length = np.minimum(n - start, window)
        valid = (k <= np.minimum(last, t // step)) & (start <= t) & (t < start + length)
        score = np.minimum(t - start, start + length - 1 - t) + 0.01 * length
        score = np.where(valid, score, -np.inf)
        best[begin:begin + chunk] = k[np.arange(len(t)), np.argmax(score, axis=1)]
    return best


@dataclasses.dataclass(frozen=True)
class Windows:
    """The windows of a batch of tokenized texts (see the module docstring); build with `of`.

    Attributes (D texts, W windows, T tokens of all texts, flat in text order):
        window, stride, max_length: as given.
        num_tokens: int64 [D], tokens of each text.
        num_kept: int64 [D], tokens read (`min(num_tokens, max_length)`).
        truncated: bool [D], texts longer than `max_length`.
        token_splits: int64 [D + 1], text d's tokens are `[token_splits[d], token_splits[d+1])`
            of the flat token list.
        document: int64 [W], the text of each window.
        start, length: int64 [W], the window's tokens: `start .. start + length - 1` of its text.
        window_splits: int64 [D + 1], text d's windows are `[window_splits[d], window_splits[d+1])`.
        token_window: int64 [T], each token's max-context window (global index), -1 for a cut one.
    """

    window: int
    stride: int
    max_length: object
    num_tokens: np.ndarray
    num_kept: np.ndarray
    truncated: np.ndarray
    token_splits: np.ndarray
    document: np.ndarray
    start: np.ndarray
    length: np.ndarray
    window_splits: np.ndarray
    token_window: np.ndarray

    @classmethod
    def of(cls, lengths, *, window, stride, max_length=None):
        """The windows of texts of `lengths` tokens (a list / array of counts), flat.

        Args:
            lengths: tokens of each text (after tokenization, before any cut).
            window: tokens per window (the model's `seq_length` less special tokens).
            stride: tokens between the starts of consecutive windows.
            max_length: tokens of a text read at all (None: all).
        """
        check_window(window, stride, max_length)
        num_tokens = np.asarray(lengths, np.int64).reshape(-1)
        if (num_tokens < 0).any():
            raise ValueError("lengths must be >= 0")
        num_kept = num_tokens if max_length is None else np.minimum(num_tokens, max_length)
        counts = num_windows(num_kept, window, stride)
        window_splits = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        document = np.repeat(np.arange(len(num_tokens), dtype=np.int64), counts)
        k = np.arange(len(document), dtype=np.int64) - window_splits[document]
        start = k * min(window, stride)
        length = np.minimum(num_kept[document] - start, window)

        token_splits = np.concatenate([[0], np.cumsum(num_tokens)]).astype(np.int64)
        token_doc = np.repeat(np.arange(len(num_tokens), dtype=np.int64), num_tokens)
        position = np.arange(int(token_splits[-1]), dtype=np.int64) - token_splits[token_doc]
        kept = position < num_kept[token_doc]
        token_window = np.full(position.shape, -1, np.int64)
        token_window[kept] = window_splits[token_doc[kept]] + _max_context(
            position[kept], num_kept[token_doc[kept]], window, stride)
        return cls(window=int(window), stride=int(stride), max_length=max_length,
                   num_tokens=num_tokens, num_kept=num_kept, truncated=num_tokens > num_kept,
                   token_splits=token_splits, document=document, start=start, length=length,
                   window_splits=window_splits, token_window=token_window)

    def __len__(self):
        return len(self.document)

    def _token_index(self):
        """`(index, inside)`: flat token index of each window position [W, window], and which are real."""
        offsets = np.arange(self.window, dtype=np.int64)[None, :]
        inside = offsets < self.length[:, None]
        index = self.token_splits[self.document][:, None] + self.start[:, None] + offsets
        return np.where(inside, index, 0), inside

    def take(self, flat_values, pad=0):
        """`[W, window, ...]`: the values of each window's tokens, `pad` past a window's length.

        Args:
            flat_values: `[T, ...]` one value per token of all texts, flat in text order
                (token ids, offsets, labels, word indexes).
        """
        flat_values = np.asarray(flat_values)
        if len(flat_values) != self.token_splits[-1]:
            raise ValueError(f"expected {self.token_splits[-1]} token values, got {len(flat_values)}")
        index, inside = self._token_index()
        values = flat_values[index] if len(flat_values) else np.zeros(
            index.shape + flat_values.shape[1:], flat_values.dtype)
        mask = inside.reshape(inside.shape + (1,) * (values.ndim - 2))
        return np.where(mask, values, np.asarray(pad, flat_values.dtype))

    @property
    def is_max_context(self):
        """bool `[W, window]`: the positions of each window that hold a token at its max context."""
        index, inside = self._token_index()
        if not len(self.token_window):
            return np.zeros(index.shape, bool)
        return inside & (self.token_window[index] == np.arange(len(self))[:, None])

    def per_token(self, window_values, fill=0):
        """`[T, ...]`: each token's value from its max-context window; `fill` for a cut token.

        Args:
            window_values: `[W, window, ...]` per window position (e.g. a model's per-token
                logits, the special tokens' positions already dropped).
        """
        window_values = np.asarray(window_values)
        if window_values.shape[:2] != (len(self), self.window):
            raise ValueError(f"expected values shaped [{len(self)}, {self.window}, ...], "
                             f"got {window_values.shape}")
        kept = self.token_window >= 0
        out = np.full((len(self.token_window),) + window_values.shape[2:], fill, window_values.dtype)
        token_doc = np.repeat(np.arange(len(self.num_tokens)), self.num_tokens)
        position = np.arange(len(self.token_window)) - self.token_splits[token_doc]
        w = self.token_window[kept]
        out[kept] = window_values[w, position[kept] - self.start[w]]
        return out


def ragged_windows(token_ids, *, window, stride, max_length=None):
    """The windows of a batch of tokenized texts, as graph ops (`tf.data` maps, serving graphs).

    The same windows as `Windows.of` (the module docstring's rules), for a `tf.RaggedTensor`:

    Example:
        >>> import tensorflow as tf
        >>> ids = tf.ragged.constant([[10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [20, 21]], tf.int64)
        >>> windows, document, truncated = ragged_windows(ids, window=4, stride=3, max_length=8)
        >>> windows.to_list(), document.numpy().tolist(), truncated.numpy().tolist()
        ([[10, 11, 12, 13], [13, 14, 15, 16], [16, 17], [20, 21]], [0, 0, 0, 1], [True, False])

    Args:
        token_ids: `tf.RaggedTensor` `[texts, (tokens)]`.
        window, stride, max_length: as `Windows.of` (Python ints; max_length None: all).

    Returns:
        `(windows, document, truncated)`: `windows` `[num_windows, (<= window)]` the tokens of
        each window, a text's windows consecutive, in text order; `document` int64
        `[num_windows]` the text of each; `truncated` bool `[texts]`.
    """
    import tensorflow as tf

    from pipelines import row_ops

    check_window(window, stride, max_length)
    lengths = token_ids.row_lengths()
    kept = lengths if max_length is None else tf.minimum(lengths, tf.constant(max_length, tf.int64))
    step = min(window, stride)
    counts = 1 + (tf.maximum(kept - window, 0) + step - 1) // step
    per_text = tf.ragged.range(counts)  # each text's window numbers 0 .. counts - 1
    document = row_ops.value_rowids(per_text.row_splits)
    start = per_text.flat_values * step
    length = tf.minimum(tf.gather(kept, document) - start, window)
    begin = tf.gather(token_ids.row_starts(), document) + start
    windows = tf.gather(token_ids.flat_values, tf.ragged.range(begin, begin + length))
    return windows, document, lengths > kept


def max_context_windows_in_graph(positions, num_tokens, window, stride):
    """Graph ops: the max-context window of the token at `positions` of a text of `num_tokens`.

    Exactly `max_context_windows` (its index among the text's windows),
    in closed form: the windows before the last one are full (`window` tokens), and on them
    `min(left, right context)` is a tent in the window index peaked where the token is
    central, so the best full window is one of the two indexes around that peak (clipped
    to the full windows holding the token); the last (maybe shorter) window is the third
    candidate. Scores in float64 as numpy computes them; the first window wins ties.

    Args:
        positions, num_tokens: int64 tensors of one shape, `0 <= positions < num_tokens`.
        window, stride: Python ints (`pipelines.windowing`).
    """
    import tensorflow as tf

    step = min(int(window), int(stride))
    t = tf.cast(positions, tf.int64)
    n = tf.cast(num_tokens, tf.int64)
    last = (tf.maximum(n - window, 0) + step - 1) // step
    low = tf.maximum(-tf.math.floordiv(window - 1 - t, step), 0)  # first window holding t
    high = tf.minimum(last - 1, tf.math.floordiv(t, step))         # last FULL window holding t
    peak = tf.math.floordiv(2 * t - window + 1, 2 * step)

    def score(k, ok):
        start = k * step
        length = tf.minimum(n - start, window)
        value = (tf.cast(tf.minimum(t - start, start + length - 1 - t), tf.float64)
                 + tf.constant(0.01, tf.float64) * tf.cast(length, tf.float64))
        return tf.where(ok, value, tf.constant(-np.inf, tf.float64))

    has_full = low <= high
    best = tf.minimum(tf.maximum(peak, low), high)
    best_score = score(best, has_full)
    after = tf.minimum(tf.maximum(peak + 1, low), high)
    after_score = score(after, has_full)
    best = tf.where(after_score > best_score, after, best)
    best_score = tf.maximum(best_score, after_score)
    last_score = score(last, last * step <= t)
    return tf.where(last_score > best_score, last, best)


# -- question + context windows (SQuAD), as graph ops ----------------------------------------
# `SpanQAPreprocessor` (tf.data) and the SpanQA export's graph read a question's context with
# these, so that training, `predict` and TF Serving see the same windows as
# `pipelines.datasets.squad.build_squad_features` (google-research `run_squad.py`).


def question_context_layout(question_lengths, context_lengths, *, seq_length, stride,
                            max_windows=None):
    """Where the context windows of each question start and how long they are (`_doc_spans`).

    A window is `[CLS] question [SEP] context tokens [SEP]`: it holds `seq_length -
    len(question) - 3` context tokens, and windows start `stride` tokens apart (the
    module's rules, with the question's own room as `window`).

    Example:
        >>> import tensorflow as tf
        >>> layout = question_context_layout(tf.constant([2, 3], tf.int64), tf.constant([9, 4], tf.int64),
        ...                                  seq_length=10, stride=3)
        >>> {k: layout[k].numpy().tolist() for k in ("example", "start", "length", "offset")}
        {'example': [0, 0, 0, 1], 'start': [0, 3, 6, 0], 'length': [5, 5, 3, 4], 'offset': [4, 4, 4, 5]}

    Args:
        question_lengths, context_lengths: int64 `[B]` token counts (questions already cut
            to `max_query_length`).
        seq_length, stride: Python ints.
        max_windows: windows read per question at most (the context past them is not
            read); None: every window.

    Returns:
        dict of int64 tensors: per window (`[TW]`, all questions' windows in order)
        `example`, `index` (window number within its question), `start` (first context
        token), `length`, `offset` (position of the first context token, `len(question) +
        2`); per question (`[B]`) `num_windows`, `first_window`.
    """
    import tensorflow as tf

    from pipelines import row_ops

    question_lengths = tf.cast(question_lengths, tf.int64)
    context_lengths = tf.cast(context_lengths, tf.int64)
    room = seq_length - question_lengths - 3  # context tokens per window
    step = tf.minimum(room, stride)
    kept = (context_lengths if max_windows is None
            else tf.minimum(context_lengths, room + (max_windows - 1) * step))
    num_windows = tf.where(kept <= room, tf.ones_like(kept),
                           1 + (kept - room + step - 1) // tf.maximum(step, 1))
    per_example = tf.ragged.range(num_windows)  # each example's window numbers
    example = row_ops.value_rowids(per_example.row_splits)
    index = per_example.flat_values
    start = index * tf.gather(step, example)
    length = tf.minimum(tf.gather(kept, example) - start, tf.gather(room, example))
    first_window = tf.cumsum(num_windows, exclusive=True)
    return {"example": example, "index": index, "start": start, "length": length,
            "offset": tf.gather(question_lengths, example) + 2, "num_windows": num_windows,
            "first_window": first_window}


def question_context_windows(question_ids, context_ids, layout):
    """`(questions, windows)`: ragged `[TW, (tokens)]` segments to pack, one row per window.

    Args:
        question_ids, context_ids: ragged `[B, (tokens)]` (questions already cut).
        layout: `question_context_layout` of their lengths.
    """
    import tensorflow as tf

    first_token = tf.gather(context_ids.row_starts(), layout["example"]) + layout["start"]
    token_index = tf.ragged.range(first_token, first_token + layout["length"]).flat_values
    windows = tf.RaggedTensor.from_row_lengths(tf.gather(context_ids.flat_values, token_index),
                                               layout["length"])
    return tf.gather(question_ids, layout["example"]), windows


def question_context_max_context(layout, width):
    """Bool `[TW, width]`: context positions whose window gives them the most context.

    The original's score `min(tokens left, tokens right) + 0.01 * window length`,
    in float64 as numpy, first window on ties.
    """
    import tensorflow as tf

    positions = tf.range(width, dtype=tf.int64)[tf.newaxis, :]
    offset, start, length = (layout[k][:, tf.newaxis] for k in ("offset", "start", "length"))
    is_context = (positions >= offset) & (positions < offset + length)
    token = start + positions - offset  # context token index at each position [TW, width]
    # Every window of the same question, padded: [TW, Wmax].
    per_question = tf.RaggedTensor.from_row_lengths(
        tf.stack([layout["start"], layout["length"]], axis=1), layout["num_windows"])
    others = tf.gather(per_question, layout["example"]).to_tensor(default_value=0)
    other_start = others[:, :, 0][:, :, tf.newaxis]  # [TW, Wmax, 1]
    other_length = others[:, :, 1][:, :, tf.newaxis]
    token = token[:, tf.newaxis, :]  # [TW, 1, width]
    inside = (token >= other_start) & (token < other_start + other_length)
    score = (tf.cast(tf.minimum(token - other_start, other_start + other_length - 1 - token), tf.float64)
             + 0.01 * tf.cast(other_length, tf.float64))
    score = tf.where(inside, score, -np.inf)
    window_ids = tf.range(tf.shape(others, out_type=tf.int64)[1])[tf.newaxis, :, tf.newaxis]
    best = first_argmax(score, window_ids, axis=1)
    return is_context & tf.equal(best, layout["index"][:, tf.newaxis])


def first_argmax(values, indices, axis):
    """Graph ops: `indices` at the first maximum of `values` along `axis` (`tf.argmax` leaves
    ties unspecified)."""
    import tensorflow as tf

    top = tf.reduce_max(values, axis=axis, keepdims=True)
    big = tf.constant(np.iinfo(np.int64).max, tf.int64)
    return tf.reduce_min(tf.where(tf.equal(values, top), indices + tf.zeros_like(values, tf.int64), big),
                         axis=axis)


def window_options(seq_length, max_length=None, stride=None):
    """`(window, stride, max_length)` in word pieces for a model of `seq_length` positions.

    The settings of every family that reads long texts in windows: `window` is
    `seq_length - 2` (`[CLS]` and `[SEP]` take two positions); `max_length` None reads one
    window (the text's first `window` pieces); `stride` None is half a window. Raises
    ValueError for a bad value (names it).

    Example:
        >>> window_options(128), window_options(128, max_length=4096, stride=100)
        ((126, 63, 126), (126, 100, 4096))
    """
    if seq_length < 3:
        raise ValueError(f"seq_length must be at least 3, got {seq_length}.")
    window = seq_length - 2
    if max_length is None:
        max_length = window
    if stride is None:
        stride = max(1, window // 2)
    for name, value in (("max_length", max_length), ("stride", stride)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive number of word pieces, not {value!r}.")
    if stride > window:
        raise ValueError(f"stride {stride} exceeds the window ({window} word pieces: seq_length "
                         f"{seq_length} less [CLS] and [SEP]); windows would not overlap.")
    return window, int(stride), int(max_length)
