"""Preprocessors: raw text (and label names) in, packed BERT inputs (and label ids) out, as Keras layers.

keras-hub's pattern: a task owns a preprocessor layer that you can also map over your own
`tf.data` pipeline; `fit` / `evaluate` / `predict` run the same layer on whatever they are
given. It tokenizes with the task's `pipelines.BertTokenizer` and packs with
`pipelines.BertPacker` (`[CLS] a [SEP] b [SEP]`, longest-first truncation) — the tokenizer
and packer the exported SavedModel runs in its graph.

`TextPreprocessor` serves the classifier (single texts or pairs, label names or float
targets) and the embedder; `MultipleChoicePreprocessor` packs `(context, endings)` as
`[batch, choices, length]`; `TokenClassifierPreprocessor` packs word lists with a tag id on
each word's first piece; `SpanQAPreprocessor` reads `(questions, contexts)` in SQuAD's context
windows with their answer positions.

Example:

>>> import tensorflow as tf
>>> from pipelines import BertTokenizer
>>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film"]
>>> preprocessor = TextPreprocessor(BertTokenizer(vocabulary=vocab), seq_length=16, labels=["neg", "pos"])
>>> x, y = preprocessor(tf.constant(["a good film", "bad"]), tf.constant(["pos", "neg"]))
>>> x["token_ids"].numpy().tolist(), y.numpy().tolist()     # padded to the longest, a multiple of 8
([[2, 5, 6, 8, 3, 0, 0, 0], [2, 7, 3, 0, 0, 0, 0, 0]], [1, 0])
>>> dataset = tf.data.Dataset.from_tensor_slices((["a film"], ["pos"])).batch(8).map(preprocessor)
>>> sorted(next(iter(dataset))[0])
['padding_mask', 'segment_ids', 'token_ids']
"""

import keras
import tensorflow as tf

from bert_keras.families import SquadSettings, family
from bert_keras.tasks.dataset_inputs import as_tensors
from bert_keras.tasks.inputs import TaskInputError

from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD
from pipelines.windowing import question_context_layout, question_context_max_context
from pipelines.windowing import question_context_windows


@keras.saving.register_keras_serializable(package="bert_keras")
class TextPreprocessor(keras.layers.Layer):
    """Texts or `(texts, texts_b)` [+ labels, + sample weights] -> packed inputs [+ label ids, weights].

    Args:
        tokenizer: a `pipelines.BertTokenizer`.
        seq_length: the longest packed sequence, special tokens included.
        labels: class names in id order (labels in, ids out: a name, or an int /
            integral float compared as its name — the rule of `bert_keras.tasks.inputs`;
            an unknown one maps to -1, which the tasks refuse before training); None:
            labels pass through (`regression=True` casts them to float32).
        regression: targets are numbers.
        pad_to: `"longest"` (each batch to its longest text, a multiple of 8) or
            `"fixed"` (every batch `[batch, seq_length]`: XLA / TPU).

    Call: `preprocessor(x, y=None, sample_weight=None)` with `x` a string tensor
    `[batch]` or a tuple of two; returns `x` alone or `(x, y[, sample_weight])`
    (`keras.utils.pack_x_y_sample_weight`), so `dataset.map(preprocessor)` feeds
    `fit` directly.
    """

    def __init__(self, tokenizer, *, seq_length, labels=None, regression=False, pad_to="longest",
                 **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        from pipelines import BertPacker

        self.tokenizer = tokenizer
        self.seq_length = int(seq_length)
        self.labels = list(labels) if labels is not None else None
        self.regression = bool(regression)
        self.pad_to = pad_to
        special = tokenizer.special_tokens
        self.packer = BertPacker(self.seq_length, cls_id=special.cls, sep_id=special.sep,
                                 pad_id=special.pad, pad_to=pad_to)
        self._table = None
        if self.labels is not None:
            from bert_keras.tasks.inputs import whole_number_aliases

            # a whole number's digits find its class written "1.0" too (`inputs.label_id`)
            aliases = whole_number_aliases(self.labels)
            self._table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(tf.constant(list(self.labels) + list(aliases)),
                                                    tf.constant(list(range(len(self.labels))) + list(aliases.values()),
                                                                tf.int32)), -1)

    def __call__(self, x, y=None, sample_weight=None, **kwargs):
        """Python values are converted to tensors first, as keras-hub's preprocessors do: a
        string, a list of strings (a batch), a tuple of them (the segments of a pair), numpy
        arrays, nested lists (word lists, endings). One example (a scalar string or pair; a
        word list for `TokenClassifierPreprocessor`) comes out unbatched and padded to
        `seq_length`, so `dataset.map(preprocessor).batch(n)` works on an unbatched dataset."""
        x = as_tensors(x, "x", empty=tf.string)
        y, sample_weight = as_tensors(y, "y"), as_tensors(sample_weight, "sample_weight")
        if isinstance(x, dict):
            raise TaskInputError(f"x: a dict ({', '.join(map(str, x))}) is packed inputs, what a "
                                 f"preprocessor gives; {type(self).__name__} takes {self._x_form}")
        if all(isinstance(t, (tf.Tensor, tf.RaggedTensor)) for t in tf.nest.flatten(x)):
            self._check_texts(x)
        if not self._is_one_example(x):
            return super().__call__(x, y=y, sample_weight=sample_weight, **kwargs)
        batch = lambda value: None if value is None else tf.nest.map_structure(lambda t: t[None], value)
        outputs = super().__call__(batch(x), y=batch(y), sample_weight=batch(sample_weight), **kwargs)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(outputs)
        pad_id = self.tokenizer.special_tokens.pad
        x = {name: _padded_to(value, self.seq_length, pad_id if name == "token_ids" else 0)[0]
             for name, value in x.items()}
        if y is not None:
            y = self._one_example_labels(y)
        return keras.utils.pack_x_y_sample_weight(x, y, None if sample_weight is None else sample_weight[0])

    # What `x` is, for errors: the form this preprocessor takes.
    _x_form = "a string, a list of strings (a batch), or a tuple of two of them (pairs)"

    def _check_texts(self, x):
        """A `TaskInputError` naming what is wrong with `x` (as tensors), before any op runs."""
        texts = x if isinstance(x, tuple) else (x,)
        if len(texts) not in (1, 2):
            raise TaskInputError(f"x: a tuple is the two texts of a pair; got {len(texts)} parts. "
                                 f"{type(self).__name__} takes {self._x_form}")
        for text in texts:
            _check_strings(text, (0, 1), self)
        if len(texts) == 2 and texts[0].shape.rank is not None and texts[1].shape.rank is not None \
                and texts[0].shape.rank != texts[1].shape.rank:
            raise TaskInputError("x: the two texts of a pair are both single strings or both batches")

    def _is_one_example(self, x):
        """Whether `x` is one example rather than a batch (texts: scalar strings)."""
        leaves = tf.nest.flatten(x)
        return bool(leaves) and all(isinstance(t, tf.Tensor) and t.shape.rank == 0 for t in leaves)

    def _one_example_labels(self, y):
        return y[0]

    def call(self, x, y=None, sample_weight=None):
        packed = self.pack(x)
        if y is not None:
            y = self.label_ids(y)
        return keras.utils.pack_x_y_sample_weight(packed, y, sample_weight)

    def pack(self, x):
        """`{token_ids, segment_ids, padding_mask}` int32 `[batch, length]` of a batch of texts / pairs."""
        texts = tuple(x) if isinstance(x, (tuple, list)) else (x,)
        return self.packer(tuple(self.tokenizer.tokenize(tf.reshape(t, [-1])) for t in texts))

    def label_ids(self, y):
        """Label values -> ids (names looked up; ints and integral floats as their names, or as
        ids when no label name is a number: `bert_keras.tasks.inputs`' label rule)."""
        from bert_keras.tasks.inputs import names_are_numbers

        y = tf.convert_to_tensor(y)
        if self.regression or self._table is None:
            return tf.cast(y, tf.float32) if self.regression else y
        if y.dtype.is_floating:
            y = tf.cast(y, tf.int64)
        if y.dtype != tf.string:
            if not names_are_numbers(self.labels):
                in_range = (y >= 0) & (y < len(self.labels))
                return tf.where(in_range, tf.cast(y, tf.int32), -1)
            y = tf.strings.as_string(y)
        ids = self._table.lookup(y)
        if names_are_numbers(self.labels):  # "1.0" finds the class "1" too, as `inputs.label_id` does
            digits = tf.strings.regex_replace(y, r"^\s*\+?(-?)0*(\d+)(?:\.0*)?\s*$", r"\1\2")
            ids = tf.where(ids < 0, self._table.lookup(tf.strings.regex_replace(digits, r"^-0$", "0")), ids)
        return ids

    def encode_rows(self, rows, *, read_now=False):
        """Unbatched `((texts...), target[, weight])` rows -> unpadded packed examples (`batching`);
        `read_now`: rows in memory read in order, encoded at once (`batching.encode_texts`)."""
        from pipelines.datasets import batching

        return batching.encode_texts(rows, self.tokenizer, seq_length=self.seq_length, read_now=read_now)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_file=self.tokenizer.vocab_file, lowercase=self.tokenizer.lowercase,
                      strip_accents=self.tokenizer.strip_accents, pre_tokenizer=self.tokenizer.morpheme_analyzer,
                      max_input_chars_per_word=self.tokenizer.max_input_chars_per_word,
                      unicode_normalization=self.tokenizer.unicode_normalization,
                      added_tokens=[{k: v for k, v in entry.items() if k != "id"}
                                    for entry in self.tokenizer.added_tokens],
                      seq_length=self.seq_length, labels=self.labels, regression=self.regression,
                      pad_to=self.pad_to)
        return config

    @classmethod
    def from_config(cls, config):
        from pipelines import BertTokenizer

        config = dict(config)
        tokenizer = BertTokenizer(config.pop("vocab_file"), lowercase=config.pop("lowercase"),
                                  strip_accents=config.pop("strip_accents", None),
                                  pre_tokenizer=config.pop("pre_tokenizer", None),
                                  max_input_chars_per_word=config.pop("max_input_chars_per_word",
                                                                      ORIGINAL_MAX_CHARS_PER_WORD),
                                  unicode_normalization=config.pop("unicode_normalization", None),
                                  added_tokens=config.pop("added_tokens", None))
        return cls(tokenizer, **config)


@keras.saving.register_keras_serializable(package="bert_keras")
class MultipleChoicePreprocessor(TextPreprocessor):
    """`(contexts [batch], endings [batch, choices])` -> packed `[batch, choices, length]`.

    Each choice is `[CLS] context [SEP] ending [SEP]`; labels are the right ending's index.
    """

    def __init__(self, tokenizer, *, seq_length, num_choices, **kwargs):
        kwargs.pop("labels", None)
        self.num_choices = int(num_choices)
        super().__init__(tokenizer, seq_length=seq_length,
                         labels=[str(i) for i in range(self.num_choices)], **kwargs)

    _x_form = "(context, endings): a string and a list of strings, or a batch of each"

    def _check_texts(self, x):
        if not isinstance(x, tuple) or len(x) != 2:
            raise TaskInputError(f"x: {type(self).__name__} takes {self._x_form}")
        contexts, endings = x
        _check_strings(contexts, (0, 1), self)
        _check_strings(endings, (1, 2), self)
        if contexts.shape.rank is not None and endings.shape.rank is not None \
                and endings.shape.rank != contexts.shape.rank + 1:
            raise TaskInputError("x: endings have one more axis than contexts (the choices)")
        choices = endings.shape[-1] if endings.shape.rank else None
        if choices is not None and choices != self.num_choices:
            raise TaskInputError(f"x: {choices} endings per context; this model scores exactly "
                                 f"{self.num_choices}")

    def _is_one_example(self, x):
        contexts = tf.nest.flatten(x)[0]
        return isinstance(contexts, tf.Tensor) and contexts.shape.rank == 0

    def pack(self, x):
        contexts, endings = x
        endings = tf.convert_to_tensor(endings)
        shape = tf.shape(endings)
        contexts = tf.broadcast_to(tf.expand_dims(tf.convert_to_tensor(contexts), -1), shape)
        packed = super().pack((tf.reshape(contexts, [-1]), tf.reshape(endings, [-1])))
        return {key: tf.reshape(value, tf.concat([shape, [-1]], 0)) for key, value in packed.items()}

    def get_config(self):
        config = super().get_config()
        config.pop("labels")
        config["num_choices"] = self.num_choices
        return config


@keras.saving.register_keras_serializable(package="bert_keras")
class TokenClassifierPreprocessor(TextPreprocessor):
    """Word lists [+ tag names per word] -> packed inputs [+ a label id on each word's first piece].

    The features of `pipelines.datasets.conll.encode_sentences` for a text of one window, as
    graph ops (a `tf.data` map, a serving graph): each word is tokenized on its own (a word
    the tokenizer drops becomes one `[UNK]`, so every word keeps its tag), the pieces of a
    text are its words' pieces in order, cut after `seq_length - 2` (`TokenClassifier`'s
    `max_length` reads longer texts in windows instead), and packed `[CLS] pieces [SEP]`.
    Labels: the tag's id on a word's first piece, `-100` (ignored by the loss) elsewhere; with a
    morpheme `pre_tokenizer`, each later morpheme's first piece gets the continuation tag too
    (`encode_sentences`'s rule: `conll.morpheme_label_ids`, in IOBES `S-X` -> B-X .. E-X), the words cut into morphemes as the analyzer cuts them in their
    text (the words joined by spaces), not each alone, as `encode_sentences` and the export's clients.

    Example:

    >>> from pipelines import BertTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "anna", "visits", "rome", "##s"]
    >>> preprocessor = TokenClassifierPreprocessor(BertTokenizer(vocabulary=vocab), seq_length=16,
    ...                                            labels=["O", "B-PER", "B-LOC"])
    >>> words = tf.ragged.constant([["Anna", "visits", "Romes"], ["Rome"]])
    >>> x, y = preprocessor(words, tf.ragged.constant([["B-PER", "O", "B-LOC"], ["B-LOC"]]))
    >>> x["token_ids"].numpy().tolist()
    [[2, 5, 6, 7, 8, 3, 0, 0], [2, 7, 3, 0, 0, 0, 0, 0]]
    >>> y.numpy().tolist()
    [[-100, 1, 0, 2, -100, -100, -100, -100], [-100, 2, -100, -100, -100, -100, -100, -100]]

    Call: `preprocessor(words, tags=None, sample_weight=None)`, `words` a string
    `tf.RaggedTensor` `[batch, (words)]` (or a dense `[batch, words]` without padding),
    `tags` the same shape of tag names; returns `x` alone or `(x, y[, sample_weight])`.
    """

    _x_form = "a list of words (one text), or a batch of word lists (ragged)"

    def _check_texts(self, x):
        if isinstance(x, tuple):
            raise TaskInputError(f"x: {type(self).__name__} takes {self._x_form}, not a tuple")
        _check_strings(x, (1, 2), self)

    def _is_one_example(self, x):
        return isinstance(x, tf.Tensor) and x.shape.rank == 1  # one text's words

    def _one_example_labels(self, y):
        from pipelines.datasets.batching import IGNORE_LABEL

        return _padded_to(y, self.seq_length, IGNORE_LABEL)[0]

    def pack(self, words):
        return self._pack(words, None)[0]

    def call(self, x, y=None, sample_weight=None):
        packed, labels = self._pack(x, y)
        return keras.utils.pack_x_y_sample_weight(packed, labels, sample_weight)

    def _word_pieces(self, words):
        """`[words, (pieces)]` of the flat words of `words` (ragged `[batch, (words)]`); with a
        morpheme analyzer, each word as the analyzer cuts it in its text (the words joined by
        spaces: `conll.words_split_in_context`, as `encode_sentences`), not alone."""
        splitter = getattr(self.tokenizer, "morpheme_splitter", None)
        if splitter is None:
            return self.tokenizer.tokenize(words.flat_values)

        def split(values, row_splits):
            from pipelines.datasets.conll import words_split_in_context

            raw = values.numpy().tolist()
            # A word that is no UTF-8 is not split: its bytes go to the tokenizer as they are (as
            # BertTokenizer(pre_tokenizer=...) leaves such a text), read as without an analyzer.
            values = [v.decode("utf-8", "replace") for v in raw]
            bad = [text.encode("utf-8") != v for text, v in zip(values, raw)]
            bounds = row_splits.numpy().tolist()
            word_lists = [values[start:end] for start, end in zip(bounds[:-1], bounds[1:])]
            split = words_split_in_context(word_lists, splitter)
            return tf.constant([v if b else w.encode("utf-8") for v, b, w in zip(raw, bad, split)],
                               tf.string, shape=[len(values)])

        spaced = tf.py_function(split, [words.flat_values, words.row_splits], tf.string)
        spaced.set_shape(words.flat_values.shape)
        return self.tokenizer.tokenize_split(spaced)

    def _pack(self, words, tags):
        from pipelines.datasets.batching import IGNORE_LABEL

        if not isinstance(words, tf.RaggedTensor):
            words = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(words))
        special = self.tokenizer.special_tokens
        pieces = self._word_pieces(words)  # [words, (pieces)]
        pieces = tf.cast(pieces, tf.int64)
        counts = pieces.row_lengths()
        kept = tf.maximum(counts, 1)  # a dropped word: one [UNK]
        pieces = tf.concat([pieces, tf.RaggedTensor.from_tensor(
            tf.fill([tf.size(counts), 1], tf.constant(special.unk, tf.int64)))], axis=1)
        take = tf.ragged.range(kept) + tf.expand_dims(pieces.row_starts(), 1)
        flat_ids = tf.gather(pieces.flat_values, take.flat_values)
        per_text = tf.math.unsorted_segment_sum(kept, words.value_rowids(), words.nrows())
        window = self.seq_length - 2
        ids = tf.RaggedTensor.from_row_lengths(flat_ids, per_text)[:, :window]
        packed = self.packer((ids,))
        if tags is None:
            return packed, None
        if not isinstance(tags, tf.RaggedTensor):
            tags = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(tags))
        first = tf.equal(tf.ragged.range(kept).flat_values, 0)
        word_of_piece = tf.repeat(tf.range(tf.size(kept, out_type=tf.int64)), kept)
        word_label = tf.gather(self.label_ids(tags.flat_values), word_of_piece)
        piece_label = tf.where(first, word_label, IGNORE_LABEL)
        if getattr(self.tokenizer, "morpheme_analyzer", None) is not None:
            # A later morpheme starts a word where the export reads the split text: its tag keeps the
            # word one entity (S-X: B-X .. E-X), as encode_sentences (conll.morpheme_label_ids).
            from pipelines.datasets.conll import morpheme_label_ids, word_start_pieces

            unit = first | tf.gather(tf.constant(word_start_pieces(self.tokenizer)), flat_ids)
            position = tf.range(tf.size(flat_ids, out_type=tf.int64))
            last_unit_at = tf.math.unsorted_segment_max(tf.where(unit, position, -1), word_of_piece,
                                                        tf.size(kept, out_type=tf.int64))
            last = unit & tf.equal(position, tf.gather(last_unit_at, word_of_piece))
            # an unknown tag (-1, as label_ids maps it) stays -1 on its morphemes: no lookup at -1
            known = word_label >= 0
            at = tf.cast(tf.where(known, word_label, 0), tf.int64)
            first_ids, middle_ids, last_ids = (tf.gather(tf.constant(ids, tf.int64), at)
                                               for ids in morpheme_label_ids(self.labels))
            unit_label = tf.where(first, first_ids, tf.where(last, last_ids, middle_ids))
            unit_label = tf.where(known & ~(first & last), unit_label, tf.cast(word_label, tf.int64))
            piece_label = tf.where(unit, tf.cast(unit_label, piece_label.dtype), piece_label)
        labels = tf.RaggedTensor.from_row_lengths(piece_label, per_text)[:, :window]
        width = tf.shape(packed["token_ids"])[1]
        labels = tf.concat([tf.fill([labels.nrows(), 1], IGNORE_LABEL), labels], axis=1)
        labels = labels.to_tensor(default_value=IGNORE_LABEL)
        labels = tf.pad(labels, [[0, 0], [0, width - tf.shape(labels)[1]]], constant_values=IGNORE_LABEL)
        return packed, tf.cast(labels, tf.int32)


@keras.saving.register_keras_serializable(package="bert_keras")
class SpanQAPreprocessor(TextPreprocessor):
    """`(questions, contexts)` [+ answers] -> packed context windows [+ start / end positions].

    `pipelines.datasets.squad.build_squad_features` (google-research `run_squad.py`) as graph
    ops, with the windows of the SpanQA export (`pipelines.windowing.question_context_*`):
    the question keeps its first `max_query_length` pieces, the context is read in windows
    `stride` pieces apart, each packed `[CLS] question [SEP] window [SEP]`. A question
    becomes as many rows as its context has windows, so a batch of `B` questions comes out
    as `[W, length]` windows (`W >= B`), ready for `BertSpanQA` / `SpanQA.fit`.

    Answers (`y`) are SQuAD's fields as tensors: `{"text": [B] string, "answer_start": [B]
    int}` (a code point offset into the context), or SQuAD's lists per question (ragged
    `[B, (answers)]`: the first one is trained on); an unanswerable question (v2.0) has
    `answer_start` -1, an empty `text` or no answers. The target of a window is the first and last
    piece that overlap the answer's characters, or `[CLS]` (0, 0) when the window does not
    hold the whole answer or there is none (the original's training features). A question
    whose answer covers no piece (only whitespace) has no windows, as `build_squad_features`
    skips it.

    Example:

    >>> from pipelines import BertTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "when", "?", "in", "october", "1973", "."]
    >>> preprocessor = SpanQAPreprocessor(BertTokenizer(vocabulary=vocab), seq_length=8, stride=2,
    ...                                   max_query_length=4)
    >>> x, y = preprocessor((tf.constant(["when?"]), tf.constant(["in October 1973."])),
    ...                     {"text": tf.constant(["October 1973"]), "answer_start": tf.constant([3])})
    >>> x["token_ids"].numpy().tolist()       # two windows of three context pieces
    [[2, 5, 6, 3, 7, 8, 9, 3], [2, 5, 6, 3, 9, 10, 3, 0]]
    >>> y["start_positions"].numpy().tolist(), y["end_positions"].numpy().tolist()
    ([5, 0], [6, 0])

    Call: `preprocessor(x, y=None, sample_weight=None)`; returns the windows alone or
    `(windows, {"start_positions", "end_positions"}[, sample_weight per window])`, so that
    `dataset.batch(B).map(preprocessor)` feeds `fit`. `windows(x)` also returns where each
    window sits (its question, first context piece, offset, max-context positions), what
    decoding an answer needs.

    Args:
        tokenizer: a `pipelines.BertTokenizer`.
        seq_length: window length, special tokens included.
        stride: context pieces between the starts of two windows (`run_squad.py`'s
            `doc_stride`; a config saved under that name loads: `from_config`).
        max_query_length: question pieces kept.
        max_windows: windows read per question (None: all, as `fit` and `predict`;
            the export's `max_windows` caps what a request costs).
        pad_to: `"fixed"` (`[W, seq_length]`, as `build_squad_features`) or `"longest"`.
    """

    def __init__(self, tokenizer, *, seq_length, stride=SquadSettings.stride,
                 max_query_length=SquadSettings.max_query_length, max_windows=None, pad_to="fixed", **kwargs):
        kwargs.pop("labels", None)
        kwargs.pop("regression", None)
        self.stride = int(stride)
        self.max_query_length = int(max_query_length)
        self.max_windows = None if max_windows is None else int(max_windows)
        if seq_length <= self.max_query_length + 3:
            raise ValueError(f"seq_length ({seq_length}) must exceed max_query_length + 3 "
                             f"({self.max_query_length + 3}) to leave room for context")
        if self.stride < 1:
            raise ValueError(f"stride must be at least 1, got {stride}")
        super().__init__(tokenizer, seq_length=seq_length, pad_to=pad_to, **kwargs)

    _x_form = "(questions, contexts): two strings, or two lists of strings"

    def _check_texts(self, x):
        if not isinstance(x, tuple) or len(x) != 2:
            raise TaskInputError(f"x: {type(self).__name__} takes {self._x_form}")
        for text in x:
            _check_strings(text, (0, 1), self)

    def _is_one_example(self, x):
        return False  # one question is already a batch of windows; `_windows` reads a scalar pair

    def pack(self, x):
        return self.windows(x)[0]

    def call(self, x, y=None, sample_weight=None):
        packed, layout, answer = self._windows(x, y)
        if y is None:
            return packed
        keep = tf.gather(answer["usable"], layout["example"])
        first, last = (tf.gather(answer[k], layout["example"]) for k in ("first", "last"))
        inside = (first >= layout["start"]) & (last < layout["start"] + layout["length"])
        shift = layout["offset"] - layout["start"]
        labels = {"start_positions": tf.cast(tf.where(inside, first + shift, 0), tf.int32),
                  "end_positions": tf.cast(tf.where(inside, last + shift, 0), tf.int32)}
        if sample_weight is not None:
            sample_weight = tf.gather(tf.reshape(sample_weight, [-1]), layout["example"])
            sample_weight = tf.boolean_mask(sample_weight, keep)
        packed = {k: tf.boolean_mask(v, keep) for k, v in packed.items()}
        labels = {k: tf.boolean_mask(v, keep) for k, v in labels.items()}
        return keras.utils.pack_x_y_sample_weight(packed, labels, sample_weight)

    def windows(self, x):
        """`(packed windows, layout)`: the windows and, per window, `example` (its question),
        `index` (its number there), `start` / `length` (its context pieces), `offset` (the
        position of its first context piece) and bool `is_max_context` `[W, width]`."""
        packed, layout, _ = self._windows(x, None)
        width = tf.shape(packed["token_ids"], out_type=tf.int64)[1]
        layout = dict(layout, is_max_context=question_context_max_context(layout, width))
        return packed, layout

    def _windows(self, x, answers):
        questions, contexts = (tf.reshape(tf.convert_to_tensor(t), [-1]) for t in x)
        question = tf.cast(self.tokenizer.tokenize(questions)[:, :self.max_query_length], tf.int64)
        ids, begin, end = self.tokenizer.tokenize_with_offsets(contexts)
        ids = tf.cast(ids, tf.int64)
        layout = question_context_layout(question.row_lengths(), ids.row_lengths(), seq_length=self.seq_length,
                                         stride=self.stride, max_windows=self.max_windows)
        packed = self.packer(question_context_windows(question, ids, layout))
        return packed, layout, (None if answers is None else self._answer_pieces(contexts, begin, end, answers))

    @staticmethod
    def _answer_pieces(contexts, begin, end, answers):
        """`{"first", "last", "usable"}` `[B]`: the context pieces overlapping each answer's
        characters (-1 when unanswerable) and whether a question has training windows."""
        text = _first_answer(answers["text"], "")
        start_char = tf.cast(_first_answer(answers["answer_start"], -1), tf.int64)
        answered = (start_char >= 0) & (tf.strings.length(text) > 0)
        end_char = start_char + tf.cast(tf.strings.length(text, unit="UTF8_CHAR"), tf.int64)
        # Code points -> bytes: the tokenizer's offsets are bytes.
        _, char_bytes = tf.strings.unicode_decode_with_offsets(contexts, "UTF-8")
        lengths = tf.cast(tf.strings.length(contexts), tf.int64)
        char_bytes = tf.concat([tf.cast(char_bytes, tf.int64), tf.expand_dims(lengths, 1)], axis=1)
        char_bytes = char_bytes.to_tensor(default_value=tf.int64.max)

        def to_bytes(chars):
            return tf.gather(char_bytes, tf.clip_by_value(chars, 0, tf.shape(char_bytes, out_type=tf.int64)[1] - 1),
                             batch_dims=1)

        big = tf.int64.max
        token_end = tf.cast(end, tf.int64).to_tensor(default_value=big)
        token_begin = tf.cast(begin, tf.int64).to_tensor(default_value=big)
        count = tf.cast(end.row_lengths(), tf.int64)
        first = tf.searchsorted(token_end, to_bytes(start_char)[:, None], side="right", out_type=tf.int64)[:, 0]
        last = tf.searchsorted(token_begin, to_bytes(end_char)[:, None], side="left", out_type=tf.int64)[:, 0] - 1
        covers = (first < count) & (last >= first)
        return {"first": tf.where(answered & covers, first, -1), "last": tf.where(answered & covers, last, -1),
                "usable": ~answered | covers}

    def get_config(self):
        config = super().get_config()
        for key in ("labels", "regression"):
            config.pop(key)
        config.update(stride=self.stride, max_query_length=self.max_query_length,
                      max_windows=self.max_windows)
        return config

    @classmethod
    def from_config(cls, config):
        # A config saved while the setting had run_squad.py's name (`doc_stride`) reads as `stride`.
        return super().from_config(family("squad").current_settings(config))


def _first_answer(values, default):
    """`[B]`: a question's answer field, or its first answer's (SQuAD's columns hold a list
    per question, `[B, (answers)]`; an empty list -> `default`, no answer)."""
    if isinstance(values, tf.RaggedTensor):
        return values[:, :1].to_tensor(default_value=default, shape=[None, 1])[:, 0]
    values = tf.convert_to_tensor(values)
    if values.shape.rank == 2:
        return tf.pad(values[:, :1], [[0, 0], [0, 1 - tf.shape(values[:, :1])[1]]], constant_values=default)[:, 0]
    return tf.reshape(values, [-1])


def _check_strings(value, ranks, preprocessor):
    """`value` holds strings and has one of `ranks` (its rank when known)."""
    if value.dtype != tf.string:
        raise TaskInputError(f"x: {type(preprocessor).__name__} takes text ({preprocessor._x_form}); "
                             f"got {value.dtype.name} values")
    rank = value.shape.rank
    if rank is not None and rank not in ranks:
        raise TaskInputError(f"x: {type(preprocessor).__name__} takes {preprocessor._x_form}; got "
                             f"strings of rank {rank}")


def _padded_to(value, length, pad_value):
    """`value` `[..., width]` padded at the end of its last axis to `length`."""
    width = tf.shape(value)[-1]
    rank = value.shape.rank
    paddings = tf.concat([tf.zeros([rank - 1, 2], tf.int32), [[0, tf.maximum(length - width, 0)]]], axis=0)
    padded = tf.pad(value, paddings, constant_values=tf.cast(pad_value, value.dtype))
    padded.set_shape(value.shape[:-1].concatenate([length]))  # the packer never exceeds `length`
    return padded
