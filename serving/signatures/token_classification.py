"""Signatures of a token classifier (`BertTokenClassifier`, NER), entities decoded in the graph.

Words are the tokenizer's own words (what BERT's basic tokenizer splits:
punctuation is a word of its own, as in CoNLL data): a word is a word piece
that does not start with "##" plus the "##" pieces after it. Each word gets
the label of its FIRST piece (how the model was trained, and
`pipelines.datasets.conll.aggregate_word_predictions(..., "first")`); words
that are not read get "O". Word labels are grouped into entities with the
CoNLL `conlleval` chunking rules that `bert_keras.metrics.get_entities` uses,
so one decoder reads IOB1, IOB2 (BIO) and IOBES label sets alike.

Long texts (issue 23) are read as `TokenClassifier.predict` reads them, in the graph: the
model's settings `max_length` / `stride` (`pipelines.windowing.window_options`) give windows
of `seq_length - 2` word pieces, `stride` apart, over the first `max_length` pieces of each
text (the text is first cut at `max_length * chars_per_token` code points, as
`TextInputs.validate` cuts every input). All windows of the batch (`[CLS] window [SEP]`)
run through the model at once, and each word takes the logits of its first piece in the
window where that piece is most central (`pipelines.windowing`'s max-context rule: the
highest `min(left, right context) + 0.01 * window length`, the first window on ties;
`pipelines.windowing.max_context_windows_in_graph`, in closed form). Entities keep code
point offsets into the whole text and may cross window edges. Without `max_length` (or `max_length <= seq_length
- 2`) a text is one window, its first `min(max_length, seq_length - 2)` pieces.

Bound: a text gives at most `1 + ceil(max(0, max_length - window) / min(stride, window))`
windows (`window = seq_length - 2`), so a request of B texts runs the model on at most
B times that many rows of `seq_length` positions, whatever the texts' lengths (`max_windows(finetuned)`).

Entity score: the MEAN over the entity's words of the probability of the
word's chosen label (softmax of its first piece's logits). The mean (rather
than the minimum) keeps one uncertain word of a long name from hiding an
otherwise confident entity; filter with it as a confidence.

* `serving_default` (predict): `text` string `[B]` -> `entity_text` string `[B, E]`,
  `entity_label` string `[B, E]` (the entity type, e.g. "PER"), `start_char` /
  `end_char` int64 `[B, E]` (Unicode code point offsets into the input:
  `text[start_char:end_char] == entity_text` in Python), `score` float32 `[B, E]`,
  `num_entities` int64 `[B]`, `truncated` bool `[B]` (the text has more word pieces
  than are read: `max_length`, or one window without it; its words past them are "O"
  unread, as `predict`'s `truncated`), `empty` bool `[B]` (the text has no token: empty,
  only whitespace or control / format characters; not an error, such a row has no words,
  hence no entities: `num_entities` 0, as `predict` gives `words == []`). E is the most
  entities of any row; rows are padded with "" / "" / -1 / -1 / 0.
* `token_ids` (predict): int32 `[B, S]` inputs -> `logits` float32 `[B, S, L]`.

Example (a loaded export):

    >>> out = tf.saved_model.load("models/ner/1").signatures["serving_default"](
    ...     text=tf.constant(["John Smith lives in New York."]))
    >>> sorted(out)
    ['empty', 'end_char', 'entity_label', 'entity_text', 'num_entities', 'score', 'start_char', 'truncated']
    >>> int(out["num_entities"][0]) == out["entity_text"].shape[1]   # one row: E is its count
    True
    >>> # a trained model: [[b'John Smith', b'New York']], [[b'PER', b'LOC']], start_char [[0, 20]]
"""

import numpy as np
import tensorflow as tf


from pipelines.encoder_inputs import ENCODER_INPUT_NAMES
from pipelines.tokenizer.combining_marks import extend_over_marks, extend_over_marks_in_graph
from pipelines.windowing import max_context_windows_in_graph, ragged_windows, window_options
from serving.signatures.module import PREDICT
from serving.signatures.text_inputs import WHITESPACE, ids_specs, python_token_spans, string_spec

# Prefix classes of a tag, as conlleval's startOfChunk / endOfChunk test them.
_PREFIX_SETS = ("BS", "ES", "BI", "EI", "BSO", "ESO", "O.")


def split_tag(tag):
    """`"B-PER"` -> `("B", "PER")`; `"O"` -> `("O", "_")` (seqeval / `bert_keras.metrics`)."""
    return tag[:1], tag[1:].split("-", maxsplit=1)[-1] or "_"


class _TagTables:
    """Per-label constants: prefix-class flags and type ids, plus two pseudo labels.

    Label `L` is "O" for words cut off by `seq_length`; label `L + 1` is the
    "nothing before the first word" state (prefix O, an empty type that
    matches no real type), which conlleval starts every sentence with.
    """

    def __init__(self, labels):
        tags = list(labels) + ["O"]
        prefixes = [split_tag(t)[0] for t in tags] + ["O"]
        types = [split_tag(t)[1] for t in tags] + [""]
        self.type_names = sorted(set(types))
        self.type_ids = tf.constant([self.type_names.index(t) for t in types], tf.int32)
        self.flags = {chars: tf.constant([p in chars for p in prefixes]) for chars in _PREFIX_SETS}
        self.outside = len(labels)
        self.initial = len(labels) + 1


def decode_entities(word_labels, word_rows, tables):
    """conlleval chunks of a flat batch of words (rows contiguous), vectorized.

    Args:
        word_labels: int32 `[N]` label id of each word (`tables.outside` for "O").
        word_rows: int64 `[N]` the row of each word, non-decreasing.
        tables: `_TagTables`.

    Returns:
        `(entity_of_word, num_entities, first_word)`: int64 `[N]` entity index of
        each word (-1 outside any), the entity count, and int64 `[num]` the
        first word of each entity.
    """
    n = tf.shape(word_labels, out_type=tf.int64)[0]
    row_start = tf.concat([[True], word_rows[1:] != word_rows[:-1]], axis=0)[:n]
    previous = tf.where(row_start, tables.initial, tf.concat([[tables.initial], word_labels[:-1]], 0)[:n])

    def flag(prefixes, labels):
        return tf.gather(tables.flags[prefixes], labels)

    type_changes = tf.not_equal(tf.gather(tables.type_ids, previous),
                                tf.gather(tables.type_ids, word_labels))
    # conlleval's endOfChunk(prev, cur) and startOfChunk(prev, cur); a new row
    # also ends the previous row's last entity (conlleval's closing "O").
    ends = (row_start | flag("ES", previous) | (flag("BI", previous) & flag("BSO", word_labels))
            | (~flag("O.", previous) & type_changes))
    starts = (flag("BS", word_labels) | (flag("ESO", previous) & flag("EI", word_labels))
              | (~flag("O.", word_labels) & type_changes))
    # A word belongs to the entity begun at the last start s <= i when no chunk
    # end fired in (s, i]: equal running counts of ends at s and at i.
    num_starts = tf.cumsum(tf.cast(starts, tf.int64))
    num_ends = tf.cumsum(tf.cast(ends, tf.int64))
    first_word = tf.reshape(tf.where(starts), [-1])
    entity = num_starts - 1
    # One spare slot so that the gather below stays in range when no word
    # starts an entity (entity = -1 everywhere, clamped to 0).
    ends_at_start = tf.concat([tf.gather(num_ends, first_word), tf.zeros([1], tf.int64)], axis=0)
    inside = ((entity >= 0) & ~flag("O.", word_labels)
              & tf.equal(num_ends, tf.gather(ends_at_start, tf.maximum(entity, 0))))
    return tf.where(inside, entity, -1), tf.size(first_word, out_type=tf.int64), first_word


def windows_of(finetuned):
    """`(window, stride, max_length)` the model reads texts with (`predict`'s settings)."""
    settings = finetuned.settings or {}
    return window_options(finetuned.seq_length, settings.get("max_length"), settings.get("stride"))


def max_windows(finetuned):
    """The most windows one text is read as (the module docstring's bound)."""
    window, stride, max_length = windows_of(finetuned)
    step = min(window, stride)
    return 1 + -(-max(0, max_length - window) // step)


def build(module, finetuned):
    """`{signature name: (concrete function, method name)}` for `module` (a `ServingModule`)."""
    tables = _TagTables(finetuned.labels)
    type_names = tf.constant(tables.type_names)
    window, stride, max_length = windows_of(finetuned)
    step = min(window, stride)
    # The code points tokenized: enough for `max_length` pieces (the default cut, for
    # `seq_length` pieces, when one window is read).
    max_tokens = max_length if max_length > window else None

    def serve(text):
        cut, ids, begin, end = module.text.tokenize_with_offsets(text, "text", max_tokens=max_tokens)
        batch = tf.shape(cut, out_type=tf.int64)[0]
        windows, _, truncated = ragged_windows(ids, window=window, stride=stride, max_length=max_length)
        logits = module.run_model(module.text.pack([windows]))  # [num_windows, width, L]
        # Text the cut dropped (beyond what the tokenized prefix holds) is unread too.
        dropped = tf.strings.substr(text, tf.strings.length(cut), tf.strings.length(text) - tf.strings.length(cut))
        truncated |= ~tf.strings.regex_full_match(dropped, f"{WHITESPACE}*")

        # Tokens (flat over the batch) -> words.
        token_rows = ids.value_rowids()
        position = tf.range(tf.size(ids.flat_values, out_type=tf.int64)) - tf.gather(
            ids.row_starts(), token_rows)
        # A row's first piece always starts a word, so words never span rows.
        word_start = module.text.word_starts(ids).flat_values | tf.equal(position, 0)
        word_of_token = tf.cumsum(tf.cast(word_start, tf.int64)) - 1
        num_words = tf.reduce_sum(tf.cast(word_start, tf.int64))
        first_token = tf.reshape(tf.where(word_start), [-1])
        word_rows = tf.gather(token_rows, first_token)
        word_begin = tf.gather(begin.flat_values, first_token)
        word_end = tf.math.unsorted_segment_max(end.flat_values, word_of_token, num_words)
        # An accent-stripping tokenizer ends a word before its trailing combining marks (as `predict`).
        word_end = extend_over_marks_in_graph(cut, word_rows, word_end)

        # Each word: the label of its first piece in that piece's max-context window, "O"
        # when the piece is not read (past max_length). Windows as `ragged_windows` lays
        # them out: a text's windows consecutive, in text order.
        kept = tf.minimum(ids.row_lengths(), max_length)  # 0 for a text with no token: one window, no word
        counts = 1 + (tf.maximum(kept - window, 0) + step - 1) // step
        first_window = tf.cumsum(counts, exclusive=True)
        first_position = tf.gather(position, first_token)
        word_kept = tf.gather(kept, word_rows)
        read = first_position < word_kept
        piece = tf.minimum(first_position, word_kept - 1)
        k = max_context_windows_in_graph(piece, word_kept, window, stride)
        piece_logits = tf.gather_nd(logits, tf.stack(
            [tf.gather(first_window, word_rows) + k, piece - k * step + 1], axis=1))
        label = tf.where(read, tf.argmax(piece_logits, axis=-1, output_type=tf.int32),
                         tables.outside)
        probability = tf.reduce_max(tf.nn.softmax(piece_logits), axis=-1)

        entity_of_word, num_entities, first_word = decode_entities(label, word_rows, tables)
        inside = entity_of_word >= 0
        segment = tf.where(inside, entity_of_word, num_entities)  # outside words -> a dump segment
        last_word = tf.math.unsorted_segment_max(tf.range(num_words), segment, num_entities + 1)[:-1]
        score = tf.math.unsorted_segment_mean(probability, segment, num_entities + 1)[:-1]
        entity_rows = tf.gather(word_rows, first_word)
        byte_begin = tf.gather(word_begin, first_word)
        byte_end = tf.gather(word_end, last_word)
        entity_text = tf.strings.substr(tf.gather(cut, entity_rows), byte_begin, byte_end - byte_begin)
        entity_label = tf.gather(type_names,
                                 tf.gather(tables.type_ids, tf.gather(label, first_word)))

        def padded(values, default):
            ragged = tf.RaggedTensor.from_value_rowids(values, entity_rows, nrows=batch)
            return ragged.to_tensor(default_value=default)

        start_byte, end_byte = padded(byte_begin, -1), padded(byte_end, -1)
        return {
            "entity_text": padded(entity_text, ""),
            "entity_label": padded(entity_label, ""),
            "start_char": module.text.char_offsets(cut, start_byte),
            "end_char": module.text.char_offsets(cut, end_byte),
            "score": padded(score, 0.0),
            "num_entities": tf.math.unsorted_segment_sum(tf.ones_like(entity_rows), entity_rows, batch),
            "truncated": truncated,
            "empty": module.text.empty([ids]),
        }

    serving = tf.function(serve, input_signature=[string_spec("text")])
    token_ids = tf.function(lambda inputs: {"logits": module.run_model(inputs)},
                            input_signature=[ids_specs(2)])
    return {"serving_default": (serving.get_concrete_function(), PREDICT),
            "token_ids": (token_ids.get_concrete_function(), PREDICT)}


# -- the Python path -------------------------------------------------------------


def tokenizer_words(tokenizer, text):
    """The tokenizer's words of `text`: `[(first_piece, last_piece, start_char, end_char)]`."""
    ids, begin, end = python_token_spans(tokenizer, text)
    words = []
    for i, token_id in enumerate(ids):
        if words and tokenizer.id_to_token(token_id).startswith("##"):
            words[-1][1], words[-1][3] = i, int(end[i])
        else:
            words.append([i, i, int(begin[i]), int(end[i])])
    ends = extend_over_marks(text, [w[3] for w in words])  # as the graph (and `predict`) do
    return [(first, last, start, end) for (first, last, start, _), end in zip(words, ends)]


def reference_outputs(finetuned, inputs):
    """`serving_default`'s outputs the Python way: `pipelines.datasets.conll` + Keras + `get_entities`.

    The words are `tokenizer_words`; they are encoded by `conll.encode_sentences` (word
    by word, first-piece labels) in the model's windows (`max_length` / `stride`:
    `pipelines.windowing.Windows`, as `TokenClassifier.predict` reads), the model runs on
    every window, `conll.word_scores(..., "first")` takes each word's logits from the
    window where its first piece is most central, and tags become entities with
    `bert_keras.metrics.get_entities`.
    """
    from bert_keras.metrics import get_entities
    from pipelines.datasets import conll

    tokenizer = finetuned.tokenizer()
    _, stride, max_length = windows_of(finetuned)
    texts = [t.decode() if isinstance(t, bytes) else t for t in inputs["text"]]
    spans = [tokenizer_words(tokenizer, text) for text in texts]
    sentences = [conll.Sentence([text[s:e] for _, _, s, e in words], ["O"] * len(words))
                 for text, words in zip(texts, spans)]
    features = conll.encode_sentences(sentences, tokenizer, finetuned.labels,
                                      seq_length=finetuned.seq_length, max_length=max_length,
                                      stride=stride)
    x = {k: getattr(features, k) for k in ENCODER_INPUT_NAMES}
    logits = np.concatenate([np.asarray(finetuned.model({k: v[i:i + 64] for k, v in x.items()},
                                                        training=False), np.float64)
                             for i in range(0, len(features), 64)])
    rows = []
    for text, words, word_logits in zip(texts, spans, conll.word_scores(logits, features, "first")):
        probabilities = np.exp(word_logits - word_logits.max(-1, keepdims=True))
        probabilities /= probabilities.sum(-1, keepdims=True)
        tags = ([finetuned.labels[i] for i in word_logits.argmax(-1)] if len(word_logits) else []) + (
            ["O"] * (len(words) - len(word_logits)))
        entities = []
        for kind, first, last in get_entities(tags):
            start, end = words[first][2], words[last][3]
            score = np.mean([probabilities[w].max() for w in range(first, last + 1)])
            entities.append((text[start:end], kind, start, end, score))
        rows.append(entities)
    width = max((len(r) for r in rows), default=0)

    def column(index, default, dtype):
        return np.array([[e[index] for e in r] + [default] * (width - len(r)) for r in rows],
                        dtype).reshape(len(rows), width)

    return {"entity_text": np.vectorize(lambda s: s.encode(), otypes=[object])(column(0, "", object))
            if width else np.zeros((len(rows), 0), object),
            "entity_label": np.vectorize(lambda s: s.encode(), otypes=[object])(column(1, "", object))
            if width else np.zeros((len(rows), 0), object),
            "start_char": column(2, -1, np.int64), "end_char": column(3, -1, np.int64),
            "score": column(4, 0.0, np.float32),
            "num_entities": np.array([len(r) for r in rows], np.int64),
            "truncated": np.asarray(features.truncated, bool),
            "empty": np.array([not words for words in spans], bool)}


# -- what the export path asks of this family (serving.signatures.kind_module) -------------

def sample_rows(finetuned):
    from serving.signatures.samples import SENTENCES

    return [{"text": s} for s in SENTENCES]


def rows_from_file(finetuned, path, count):
    """The first `count` sentences of the run's CoNLL evaluation file, as texts."""
    from pipelines.datasets.conll import read_conll

    return [{"text": " ".join(s.words)} for s in read_conll(path)[:count]]
