"""Signatures of a sentence(-pair) classifier or regressor (`BertClassifier`).

* `serving_default` (predict): `text` (+ `text_b` for pair tasks), raw UTF-8 `[B]`.
  Classification -> `label` string `[B]`, `class_id` int64 `[B]`,
  `probabilities` float32 `[B, K]` (softmax of the logits).
  Regression -> `score` float32 `[B]`. Both: `truncated` bool `[B]`, texts read only in part,
  and `empty` bool `[B]`, rows with no token (an empty text, only whitespace or control /
  format characters; for a pair: both texts): such a row is not an error, it gets the
  model's answer to an empty input, `[CLS] [SEP]` (`[CLS] [SEP] b [SEP]` when only `text` has
  none), as `predict` gives it.
  A model with `max_length` past one window reads single texts in windows inside the graph
  (`TextInputs.windows`), as its `predict` does: the mean (or, `window_aggregation="max"`, the
  per-class max) of the windows' logits, or (`"evidence"`) those of the windows that read like
  the training texts (`bert_keras.models.window_relevance`, its statistics saved in the head;
  a text of mostly far windows is read again sentence by sentence);
  a text has at most `num_windows(max_length)` windows. A `max_length` under one window reads
  a text's first `max_length` pieces (one window), as `predict` does.
* `token_ids` (predict): int32 `token_ids` / `segment_ids` / `padding_mask`
  `[B, S]` -> `logits` (`[B, K]`, or `[B]` for regression), and for
  classification `probabilities` and `class_id`.
* `classification` (TF Serving Classify, method `tensorflow/serving/classify`):
  `inputs` = serialized `tf.Example`s with bytes features `text` (+ `text_b`) ->
  `classes` string `[B, K]` (every label name, in id order) and `scores`
  float32 `[B, K]` (their probabilities). (Texts with no token are answered as in
  `serving_default`; the Classify / Regress APIs have no `empty` output to flag them.)
* `regression` (TF Serving Regress, `tensorflow/serving/regress`): `inputs` ->
  `outputs` float32 `[B]`.

Example (a loaded export):

    >>> loaded = tf.saved_model.load("models/sentiment/1")
    >>> out = loaded.signatures["serving_default"](text=tf.constant(["I loved it."]))
    >>> sorted(out), out["probabilities"].shape
    (['class_id', 'empty', 'label', 'probabilities', 'truncated'], TensorShape([1, 2]))
    >>> out["label"].numpy()[0] in (b"neg", b"pos")          # b'pos' from a trained model
    True
"""

import numpy as np
import tensorflow as tf

from bert_keras.models.window_relevance import NOT_FITTED, closest_sentences, evidence_logits
from bert_keras.models.window_relevance import sentence_end_ids, sentence_reading
from serving.signatures.module import CLASSIFY, PREDICT, REGRESS, run_in_chunks
from serving.signatures.text_inputs import DEFAULT_CHARS_PER_TOKEN, ids_specs, python_windows, string_spec
from serving.signatures.text_inputs import window_reading


def evidence_relevance(finetuned):
    """The head's fitted `WindowRelevance` when the model aggregates windows by evidence, else None;
    an evidence model whose statistics were never fitted is refused, as `predict` refuses it."""
    if finetuned.settings.get("window_aggregation") != "evidence":
        return None
    relevance = getattr(finetuned.model, "window_relevance", None)
    if relevance is None or not relevance.fitted:
        raise ValueError(NOT_FITTED)
    return relevance


def text_names(finetuned):
    """The raw text inputs: `("text",)` or `("text", "text_b")` (setting `text_pair`)."""
    return ("text", "text_b") if finetuned.settings.get("text_pair") else ("text",)


def build(module, finetuned):
    """`{signature name: (concrete function, method name)}` for `module` (a `ServingModule`)."""
    names = text_names(finetuned)
    regression = finetuned.kind == "regression"
    windows = window_reading(finetuned)
    aggregate = (tf.math.segment_max if finetuned.settings.get("window_aggregation") == "max"
                 else tf.math.segment_mean)
    relevance = evidence_relevance(finetuned)
    reads_sentences = relevance is not None and relevance.reads_sentences
    end_ids = tf.constant(sentence_end_ids(module.text.tokenizer.vocabulary), tf.int32) if reads_sentences else None

    def run(inputs):
        """`(logits, distances)` of packed rows: the model's logits and, for evidence, each row's
        relevance distance, read in the same pass (one traced graph for every signature)."""
        if relevance is None:
            return module.run_model(inputs), None
        logits, features = run_in_chunks(module, "logits_and_features", module.model.logits_and_features, inputs)
        return logits, relevance.distances_of(features)

    def logits_of_texts(texts):
        """`(logits, truncated, empty)`: one row per text (its windows' aggregate, when windowed)."""
        if windows:
            stride, max_length = windows
            inputs, document, truncated, empty = module.text.windows(texts["text"], "text",
                                                                     max_length=max_length, stride=stride)
            logits, distances = run(inputs)
            if distances is not None:
                reading = None
                if reads_sentences:  # a far text's sentences, each read alone
                    window = finetuned.seq_length - 2
                    reading = sentence_reading(
                        lambda windows, text: closest_sentences(run, windows, text, window, min(window, stride),
                                                                end_ids, relevance.typical),
                        lambda index: {name: tf.gather(value, index) for name, value in inputs.items()}, document)
                return (evidence_logits(logits, distances, relevance.threshold, document, reading),
                        truncated, empty)
            return aggregate(logits, document), truncated, empty
        ids = [module.text.tokenize(texts[name], name) for name in names]
        truncated = module.text.truncated(ids, [texts[name] for name in names])
        return run(module.text.pack(ids))[0], truncated, module.text.empty(ids)

    def named_outputs(logits, truncated, empty):
        if regression:
            return {"score": logits, "truncated": truncated, "empty": empty}
        class_id = tf.argmax(logits, axis=-1)
        return {"label": module.label_names(class_id), "class_id": class_id,
                "probabilities": tf.nn.softmax(logits), "truncated": truncated, "empty": empty}

    text_spec = {name: string_spec(name) for name in names}
    serve = tf.function(lambda texts: named_outputs(*logits_of_texts(texts)),
                        input_signature=[text_spec])

    def on_token_ids(inputs):
        logits = run(inputs)[0]
        outputs = {"logits": logits}
        if not regression:
            outputs.update(probabilities=tf.nn.softmax(logits),
                           class_id=tf.argmax(logits, axis=-1))
        return outputs

    token_ids = tf.function(on_token_ids, input_signature=[ids_specs(2)])

    def on_examples(serialized):
        features = tf.io.parse_example(
            serialized, {name: tf.io.FixedLenFeature([], tf.string) for name in names})
        logits = logits_of_texts(features)[0]
        if regression:
            return {"outputs": logits}
        probabilities = tf.nn.softmax(logits)
        classes = module.label_names(tf.range(module.num_labels, dtype=tf.int64))
        batch = tf.shape(probabilities)[0]
        return {"classes": tf.tile(classes[tf.newaxis, :], [batch, 1]), "scores": probabilities}

    examples = tf.function(on_examples, input_signature=[string_spec("inputs")])
    return {
        "serving_default": (serve.get_concrete_function(), PREDICT),
        "token_ids": (token_ids.get_concrete_function(), PREDICT),
        ("regression" if regression else "classification"):
            (examples.get_concrete_function(), REGRESS if regression else CLASSIFY),
    }


def reference_outputs(finetuned, inputs):
    """`serving_default`'s outputs computed the Python way: tokenizer + packer + Keras model.

    Args:
        finetuned: the `bert_keras.finetuned_model.FinetunedModel`.
        inputs: `{"text": [...], ("text_b": [...])}` lists of str.
    """
    if window_reading(finetuned):
        x, document, truncated, empty = python_windows(finetuned, inputs["text"])
        logits = np.asarray(finetuned.model(x, training=False), np.float64)
        starts = np.flatnonzero(np.diff(np.concatenate([[-1], document])))
        relevance = evidence_relevance(finetuned)
        if relevance is not None:
            distances = relevance.distances(finetuned.model.encoder, x).numpy()

            reading = None
            if relevance.reads_sentences:
                def run(inputs):
                    return finetuned.model(inputs, training=False), relevance.distances(finetuned.model.encoder, inputs)

                window, end_ids = finetuned.seq_length - 2, sentence_end_ids(finetuned.tokenizer().vocabulary)
                step = min(window, window_reading(finetuned)[0])
                reading = sentence_reading(
                    lambda windows, text: closest_sentences(run, windows, text, window, step, end_ids, relevance.typical),
                    lambda index: {name: tf.gather(value, index) for name, value in x.items()}, document)

            logits = evidence_logits(tf.constant(logits), tf.constant(distances, tf.float64),
                                     tf.cast(relevance.threshold, tf.float64), tf.constant(document, tf.int64),
                                     reading).numpy()
        elif finetuned.settings.get("window_aggregation") == "max":
            logits = np.maximum.reduceat(logits, starts, axis=0)
        else:
            counts = np.diff(np.append(starts, len(logits))).reshape((-1,) + (1,) * (logits.ndim - 1))
            logits = np.add.reduceat(logits, starts, axis=0) / counts
    else:
        tokenizer = finetuned.tokenizer()
        packer = finetuned.packer(tokenizer)
        columns = [list(inputs[name]) for name in text_names(finetuned)]
        segments = [tokenizer.tokenize(tf.constant(column)) for column in columns]
        logits = np.asarray(finetuned.model(packer(tuple(segments)), training=False), np.float64)
        pieces = sum(segment.row_lengths().numpy() for segment in segments)
        cut = np.any([[len(t.lstrip()) > finetuned.seq_length * DEFAULT_CHARS_PER_TOKEN for t in column]
                      for column in columns], axis=0)
        truncated = (pieces > finetuned.seq_length - len(segments) - 1) | cut
        empty = pieces == 0
    if finetuned.kind == "regression":
        return {"score": logits.astype(np.float32), "truncated": np.asarray(truncated), "empty": np.asarray(empty)}
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    class_id = logits.argmax(-1)
    return {"label": np.array([finetuned.labels[i].encode() for i in class_id], object),
            "class_id": class_id.astype(np.int64),
            "probabilities": probabilities.astype(np.float32), "truncated": np.asarray(truncated),
            "empty": np.asarray(empty)}


# -- what the export path asks of this family (serving.signatures.kind_module) -------------

def card_settings(finetuned):
    settings = {"text_pair": len(text_names(finetuned)) == 2}
    reading = window_reading(finetuned)
    if reading is not None:  # long texts in windows: how, in the card a reader sees
        stride, max_length = reading
        settings.update(max_length=max_length, stride=stride,
                        window_aggregation=finetuned.settings.get("window_aggregation", "mean"))
    return settings


def sample_rows(finetuned):
    """Built-in `serving_default` inputs (single texts, or consecutive sentences as pairs)."""
    from serving.signatures.samples import SENTENCES

    if len(text_names(finetuned)) == 2:
        return [{"text": a, "text_b": b} for a, b in zip(SENTENCES, SENTENCES[1:])]
    return [{"text": s} for s in SENTENCES]


def rows_from_file(finetuned, path, count):
    """The first `count` inputs of the run's evaluation file (CSV / TSV / JSONL)."""
    from pipelines.datasets.text_files import read_text_file

    training = finetuned.training
    examples = read_text_file(path, text_column=training.get("text_column") or "text",
                              text_b_column=training.get("text_b_column") or "text_b",
                              label_column=training.get("label_column") or "label",
                              regression=finetuned.kind == "regression")[:count]
    if len(text_names(finetuned)) == 2:
        return [{"text": e.text, "text_b": e.text_b or ""} for e in examples]
    return [{"text": e.text} for e in examples]
