"""Signatures of an extractive QA model (`BertSpanQA`, SQuAD v1.1 / v2.0), decoded in the graph.

The same three steps as `pipelines.datasets.squad` (and google-research `run_squad.py`),
as TensorFlow ops so that TF Serving returns answer strings:

1. `pipelines.windowing.question_context_layout` / `question_context_windows`: the question keeps its first
   `max_query_length` tokens; the context is cut into windows of
   `seq_length - len(question) - 3` tokens that start `stride` tokens apart
   (`build_squad_features`' `_doc_spans`), each packed
   `[CLS] question [SEP] window [SEP]`. At most `max_windows` windows are read
   per question (a squad setting, `bert_keras.families`; default 16: ~2,000
   context tokens at 384/128, `export(..., max_windows=N)` for another); the context
   beyond them is ignored (the `truncated` output says so), so that a 1 MB context costs what
   16 windows cost.
   `question_context_max_context` marks the window in which each context token has the most
   context (`_check_is_max_context`): only there may an answer start.
2. The model runs on every window of the batch at once.
3. `best_spans`: per window the `n_best_size` best start and end positions,
   every pair that is inside the context, `end >= start`, at most
   `max_answer_length` tokens long and starts at a max-context token; the
   best `start_logit + end_logit` over all windows wins (ties: first window,
   then start rank, then end rank, exactly as `decode_predictions`' stable
   sort). v2.0: the null score is `start_logit[CLS] + end_logit[CLS]` of the
   window where it is lowest, and the question has no answer when
   `null - best > null_score_diff_threshold` (or when no span is valid).

The answer is cut from the ORIGINAL context through the tokenizer's offsets
(never detokenized pieces), and `start_char` / `end_char` are code point
offsets: `context[start_char:end_char] == answer` in Python.

* `serving_default` (predict): `question`, `context` strings `[B]` -> `answer`
  string `[B]` ("" for no answer), `start_char` / `end_char` int64 `[B]` (-1 for no
  answer), `score` float32 `[B]` (start + end logit of the answer; the null score
  when there is none), `has_answer` bool `[B]`, `truncated` bool `[B]` (contexts read only
  in part), `empty` bool `[B]` (question AND context have no token: empty, only whitespace
  or control / format characters). A question or context with no token is not an error: it
  is packed as zero pieces (`[CLS] [SEP] context [SEP]`, `[CLS] question [SEP] [SEP]`); a
  context with no token holds no span, so its answer is the null one (`answer` "",
  `start_char` / `end_char` -1, `has_answer` False, `score` the null score), as
  `SpanQA.predict` answers an empty context (v1.1 and v2.0 alike).
* `token_ids` (predict): int32 `[B, S]` inputs -> `start_logits`, `end_logits`
  float32 `[B, S]`.

Example (a loaded export):

    >>> out = tf.saved_model.load("models/squad/1").signatures["serving_default"](
    ...     question=tf.constant(["When did the crisis begin?"]),
    ...     context=tf.constant(["The 1973 oil crisis began in October 1973 when ..."]))
    >>> sorted(out)
    ['answer', 'empty', 'end_char', 'has_answer', 'score', 'start_char', 'truncated']
    >>> out["answer"].dtype, out["has_answer"].dtype          # b'October 1973' from a trained model
    (tf.string, tf.bool)
"""

import numpy as np
import tensorflow as tf

from serving.signatures.module import PREDICT
from pipelines.tokenizer.combining_marks import extend_over_marks_in_graph
from pipelines.windowing import first_argmax, question_context_layout, question_context_max_context
from pipelines.windowing import question_context_windows
from serving.signatures.text_inputs import DEFAULT_CHARS_PER_TOKEN, ids_specs, python_token_spans, string_spec


def best_spans(start_logits, end_logits, is_context, is_max_context, example, index, num_examples,
               *, n_best_size=20, max_answer_length=30):
    """The best valid span of each question over all its windows (`decode_predictions`' rules).

    Args:
        start_logits, end_logits: float `[TW, S]` of every window.
        is_context, is_max_context: bool `[TW, S]`.
        example, index: int64 `[TW]` question of each window and its number
            within the question (windows of a question in order).
        num_examples: number of questions.
        n_best_size, max_answer_length: as `decode_predictions`.

    Returns:
        dict: `score` float64 `[B]` (-inf when no span is valid), `has_span`
        bool, `window` (flat window index), `start`, `end` (positions in it),
        and `null_score` float64 `[B]` (lowest `start[CLS] + end[CLS]`).
    """
    start_logits = tf.convert_to_tensor(start_logits)
    end_logits = tf.convert_to_tensor(end_logits)
    example = tf.cast(example, tf.int64)
    index = tf.cast(index, tf.int64)
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    # top_k puts the lower position first on ties, as a stable argsort.
    starts = tf.math.top_k(start_logits, k).indices
    ends = tf.math.top_k(end_logits, k).indices
    s, e = starts[:, :, tf.newaxis], ends[:, tf.newaxis, :]
    valid = (tf.gather(is_context, starts, batch_dims=1)[:, :, tf.newaxis]
             & tf.gather(is_max_context, starts, batch_dims=1)[:, :, tf.newaxis]
             & tf.gather(is_context, ends, batch_dims=1)[:, tf.newaxis, :]
             & (e >= s) & (e - s + 1 <= max_answer_length))
    # float64 sums, as numpy does them, so that near-ties break the same way.
    score = (tf.cast(tf.gather(start_logits, starts, batch_dims=1), tf.float64)[:, :, tf.newaxis]
             + tf.cast(tf.gather(end_logits, ends, batch_dims=1), tf.float64)[:, tf.newaxis, :])
    score = tf.reshape(tf.where(valid, score, -np.inf), [tf.shape(score)[0], -1])  # [TW, k*k]

    # Per question: its windows' candidates in window order, [B, Wmax * k * k].
    max_windows = tf.reduce_max(tf.concat([index + 1, [1]], axis=0))
    per_question = tf.tensor_scatter_nd_update(
        tf.fill(tf.stack([tf.cast(num_examples, tf.int64), max_windows,
                          tf.cast(tf.shape(score)[1], tf.int64)]), tf.constant(-np.inf, tf.float64)),
        tf.stack([example, index], axis=1), score)
    flat = tf.reshape(per_question, [tf.cast(num_examples, tf.int32), -1])
    best_score = tf.reduce_max(flat, axis=1)
    candidate = first_argmax(flat, tf.range(tf.shape(flat, out_type=tf.int64)[1])[tf.newaxis, :],
                              axis=1)
    candidate = tf.where(tf.math.is_finite(best_score), candidate, 0)
    pairs = tf.cast(k * k, tf.int64)
    window_first = tf.math.unsorted_segment_min(tf.range(tf.size(example, out_type=tf.int64)),
                                                example, num_examples)
    window = tf.minimum(window_first + candidate // pairs, tf.size(example, out_type=tf.int64) - 1)
    rank = candidate % pairs
    k64 = tf.cast(k, tf.int64)
    start = tf.gather_nd(starts, tf.stack([window, rank // k64], axis=1))
    end = tf.gather_nd(ends, tf.stack([window, rank % k64], axis=1))
    null = (tf.cast(start_logits[:, 0], tf.float64) + tf.cast(end_logits[:, 0], tf.float64))
    return {"score": best_score, "has_span": tf.math.is_finite(best_score), "window": window,
            "start": tf.cast(start, tf.int64), "end": tf.cast(end, tf.int64),
            "null_score": tf.math.unsorted_segment_min(null, example, num_examples)}


def build(module, finetuned):
    """`{signature name: (concrete function, method name)}` for `module` (a `ServingModule`)."""
    settings = finetuned.settings
    seq_length, stride = finetuned.seq_length, int(settings["stride"])
    max_query, max_windows = int(settings["max_query_length"]), int(settings["max_windows"])
    threshold = null_threshold(finetuned)[0]
    version_2 = bool(settings["version_2"])
    # Read by the embedded server to bound a request's windows (serving.server.window_cost).
    module.question_context_settings = tf.function(
        lambda: tf.constant([seq_length, max_query, stride, max_windows], tf.int64), input_signature=[])

    def serve(inputs):
        question = module.text.tokenize(inputs["question"], "question", max_tokens=max_query)
        question = question[:, :max_query]  # a question with no token has none to cut
        context, ids, begin, end = module.text.tokenize_with_offsets(
            inputs["context"], "context", max_tokens=seq_length + (max_windows - 1) * stride)
        layout = question_context_layout(question.row_lengths(), ids.row_lengths(), seq_length=seq_length,
                                         stride=stride, max_windows=max_windows)
        x = module.text.pack(question_context_windows(question, ids, layout))
        logits = module.run_model(x)
        width = tf.shape(x["token_ids"], out_type=tf.int64)[1]
        is_max = question_context_max_context(layout, width)
        positions = tf.range(width)[tf.newaxis, :]
        is_context = ((positions >= layout["offset"][:, tf.newaxis])
                      & (positions < (layout["offset"] + layout["length"])[:, tf.newaxis]))
        batch = tf.shape(context, out_type=tf.int64)[0]
        best = best_spans(logits["start_logits"], logits["end_logits"], is_context, is_max,
                          layout["example"], layout["index"], batch,
                          n_best_size=int(settings["n_best_size"]),
                          max_answer_length=int(settings["max_answer_length"]))
        answered = best["has_span"]
        if version_2:
            answered &= ~(best["null_score"] - best["score"] > threshold)

        # Token positions -> byte offsets in the context -> text and code points.
        def token_of(position):
            window = best["window"]
            token = (tf.gather(layout["start"], window) + position
                     - tf.gather(layout["offset"], window))
            flat = tf.gather(ids.row_starts(), tf.gather(layout["example"], window)) + token
            return tf.clip_by_value(flat, 0, tf.maximum(tf.size(ids.flat_values, tf.int64) - 1, 0))

        # One spare offset: when no context of the batch has a token (nothing is answered),
        # the gathers below still read in range.
        begins = tf.concat([begin.flat_values, tf.zeros([1], begin.dtype)], axis=0)
        ends = tf.concat([end.flat_values, tf.zeros([1], end.dtype)], axis=0)
        byte_start = tf.where(answered, tf.gather(begins, token_of(best["start"])), -1)
        byte_end = tf.gather(ends, token_of(best["end"]))
        # An accent-stripping tokenizer ends a piece before its trailing combining marks (as `predict`).
        byte_end = extend_over_marks_in_graph(context, tf.range(tf.size(context, out_type=tf.int64)), byte_end)
        byte_end = tf.where(answered, byte_end, -1)
        answer = tf.where(answered, tf.strings.substr(context, tf.maximum(byte_start, 0),
                                                      tf.maximum(byte_end - byte_start, 0)), "")
        chars = module.text.char_offsets(context, tf.stack([byte_start, byte_end], axis=1))
        # Contexts read only in part: pieces past the `max_windows` windows, or text past the cut.
        room = seq_length - question.row_lengths() - 3
        kept = room + (max_windows - 1) * tf.minimum(room, stride)
        truncated = ((ids.row_lengths() > kept)
                     | module.text.was_cut(inputs["context"], seq_length + (max_windows - 1) * stride))
        return {"answer": answer, "start_char": chars[:, 0], "end_char": chars[:, 1],
                "score": tf.cast(tf.where(answered, best["score"], best["null_score"]), tf.float32),
                "has_answer": answered, "truncated": truncated, "empty": module.text.empty([question, ids])}

    serving = tf.function(serve, input_signature=[
        {"question": string_spec("question"), "context": string_spec("context")}])
    token_ids = tf.function(lambda inputs: dict(module.run_model(inputs)),
                            input_signature=[ids_specs(2)])
    return {"serving_default": (serving.get_concrete_function(), PREDICT),
            "token_ids": (token_ids.get_concrete_function(), PREDICT)}


def reference_outputs(finetuned, inputs):
    """`serving_default`'s outputs the Python way: `build_squad_features` + Keras + `decode_predictions`."""
    from pipelines.datasets import squad

    settings = finetuned.settings
    tokenizer = finetuned.tokenizer()
    parts = [_read_part(tokenizer, _text(q), _text(c), finetuned)
             for q, c in zip(inputs["question"], inputs["context"])]
    examples = [squad.SquadExample(id=str(i), question=_text(q), context=part, answers=[])
                for i, (q, (part, _)) in enumerate(zip(inputs["question"], parts))]
    features = squad.build_squad_features(
        examples, tokenizer, is_training=False, max_seq_length=finetuned.seq_length,
        stride=settings["stride"], max_query_length=settings["max_query_length"])
    outputs = finetuned.model(features.inputs, training=False)
    predictions, nbest, null_odds = squad.decode_predictions(
        examples, features, np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"]),
        n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"],
        version_2=settings["version_2"], null_score_diff_threshold=null_threshold(finetuned)[0])
    start_logits = np.asarray(outputs["start_logits"], np.float64)
    end_logits = np.asarray(outputs["end_logits"], np.float64)
    rows = []
    for i, example in enumerate(examples):
        answer = predictions[example.id]
        windows = np.flatnonzero(features.example_index == i)
        null = min(start_logits[w, 0] + end_logits[w, 0] for w in windows)
        entry = next((e for e in nbest[example.id] if e["text"]), None) if answer else None
        if entry is None:
            rows.append((b"", -1, -1, null, False))
        else:
            rows.append((answer.encode(), entry["start_char"], entry["end_char"],
                         entry["start_logit"] + entry["end_logit"], True))
    answer, start, end, score, has = zip(*rows)
    return {"answer": np.array(answer, object), "start_char": np.array(start, np.int64),
            "end_char": np.array(end, np.int64), "score": np.array(score, np.float32),
            "has_answer": np.array(has, bool), "truncated": np.array([cut for _, cut in parts], bool),
            "empty": np.array([tokenizer.tokenize(tf.constant(_text(q))).shape[0] == 0
                               and tokenizer.tokenize(tf.constant(_text(c))).shape[0] == 0
                               for q, c in zip(inputs["question"], inputs["context"])], bool)}


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _read_part(tokenizer, question, context, finetuned):
    """`(part, truncated)`: the part of `context` the export reads (its first `max_windows`
    windows' tokens), and whether that is less than the whole context.

    Cut right after the last kept token; WordPiece is greedy longest-match
    first, so the kept tokens of a word cut there are unchanged.
    """
    settings = finetuned.settings
    query = tokenizer.tokenize(tf.constant(question)).shape[0]
    room = finetuned.seq_length - min(query, settings["max_query_length"]) - 3
    step = min(room, settings["stride"])
    kept = room + (settings["max_windows"] - 1) * step
    max_tokens = finetuned.seq_length + (settings["max_windows"] - 1) * settings["stride"]
    max_chars = max_tokens * DEFAULT_CHARS_PER_TOKEN
    stripped = context.lstrip()
    cut = len(stripped) > max_chars
    if cut:  # the export's cut before tokenization (`TextInputs.validate`)
        context = context[:len(context) - len(stripped) + max_chars]
    ids, _, char_end = python_token_spans(tokenizer, context)
    if len(ids) <= kept:
        return context, cut
    return context[:int(char_end[kept - 1])], True


# -- what the export path asks of this family (serving.signatures.kind_module) -------------

def null_threshold(finetuned):
    """The v2.0 "no answer" threshold the export uses, and where it came from (`squad_threshold`)."""
    from bert_keras.finetuned_model import squad_threshold

    return squad_threshold(finetuned.settings)


def card_settings(finetuned):
    """The settings, with the threshold the export uses (v1.1: 0.0, unused) and its origin."""
    value, origin = null_threshold(finetuned)
    return {**finetuned.settings, "null_score_diff_threshold": value, "threshold_from": origin}


def sample_rows(finetuned):
    from serving.signatures.samples import QUESTIONS

    return [{"question": q, "context": c} for q, c in QUESTIONS]


def rows_from_file(finetuned, path, count):
    """The first `count` questions of the run's SQuAD evaluation file."""
    from pipelines.datasets.squad import read_squad_json

    return [{"question": e.question, "context": e.context}
            for e in read_squad_json(path, is_training=False)[:count]]
