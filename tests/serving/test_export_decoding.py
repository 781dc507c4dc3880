"""The in-graph decoders agree with the Python ones they replace.

* SQuAD: `pipelines.windowing.question_context_layout` / `question_context_max_context`
  (the export's windows) build the windows of
  `pipelines.datasets.squad.build_squad_features`, and `span_qa.best_spans` picks
  the answers of `decode_predictions` on the SAME logits: stand-in logits that
  peak at the gold spans (multi-window contexts, v2.0 unanswerable questions
  answered ""), random logits in v2.0 and v1.1.
* NER: `token_classification.decode_entities` chunks tags like
  `bert_keras.metrics.get_entities` (IOB1, IOB2, IOBES, malformed, across rows);
  the exported model's entities equal `ConllNer.predict_texts` (the
  `bert-keras predict` path, punctuation split off as the tokenizer does) and its code point offsets cut the entity text out
  of non-ASCII inputs.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from pipelines import BertTokenizer, windowing
from pipelines.datasets import squad
from serving.signatures import span_qa, token_classification

import export_fixtures

SEQ_LENGTH, STRIDE, MAX_QUERY = 64, 16, 16


@pytest.fixture(scope="module")
def squad_features(tmp_path_factory):
    tokenizer = BertTokenizer(export_fixtures.write_vocab(
        str(tmp_path_factory.mktemp("vocab") / "vocab.txt")))
    examples = squad.read_squad_json(os.path.join(export_fixtures.DATA, "squad",
                                                  "dev-v2.0-mini.json"), is_training=False)
    features = squad.build_squad_features(examples, tokenizer, is_training=False,
                                          max_seq_length=SEQ_LENGTH, stride=STRIDE,
                                          max_query_length=MAX_QUERY)
    return tokenizer, examples, features


def window_numbers(example_index):
    """Number of each window within its question."""
    seen = {}
    numbers = []
    for index in example_index:
        numbers.append(seen.get(index, 0))
        seen[index] = numbers[-1] + 1
    return np.array(numbers)


def test_windows_and_max_context_equal_build_squad_features(squad_features):
    tokenizer, examples, features = squad_features
    questions = tokenizer.tokenize(tf.constant([e.question for e in examples])).row_lengths()
    contexts = tokenizer.tokenize(tf.constant([e.context for e in examples])).row_lengths()
    layout = windowing.question_context_layout(tf.minimum(questions, MAX_QUERY), contexts,
                                               seq_length=SEQ_LENGTH, stride=STRIDE)
    assert np.bincount(features.example_index).max() > 5  # long contexts: many windows
    np.testing.assert_array_equal(layout["example"], features.example_index)
    np.testing.assert_array_equal(layout["start"], features.window_start)
    np.testing.assert_array_equal(layout["offset"], features.context_offset)
    np.testing.assert_array_equal(windowing.question_context_max_context(layout, SEQ_LENGTH),
                                  features.token_is_max_context)


def graph_answers(examples, features, start_logits, end_logits, *, version_2, threshold=0.0):
    """Answers (text, start_char, end_char) per question from `span_qa.best_spans`."""
    best = span_qa.best_spans(start_logits, end_logits, features.token_char_spans[:, :, 0] >= 0,
                              features.token_is_max_context, features.example_index,
                              window_numbers(features.example_index), len(examples))
    answered = best["has_span"].numpy()
    if version_2:
        answered &= ~(best["null_score"].numpy() - best["score"].numpy() > threshold)
    answers = []
    for i, example in enumerate(examples):
        if not answered[i]:
            answers.append(("", -1, -1))
            continue
        window = int(best["window"][i])
        start = int(features.token_char_spans[window, int(best["start"][i]), 0])
        end = int(features.token_char_spans[window, int(best["end"][i]), 1])
        answers.append((example.context[start:end], start, end))
    return answers


def python_answers(examples, features, start_logits, end_logits, *, version_2, threshold=0.0):
    predictions, nbest, _ = squad.decode_predictions(
        examples, features, start_logits, end_logits, version_2=version_2,
        null_score_diff_threshold=threshold)
    answers = []
    for example in examples:
        text = predictions[example.id]
        best = next((e for e in nbest[example.id] if e["text"]), None) if text else None
        answers.append((text, best["start_char"], best["end_char"]) if best else ("", -1, -1))
    return answers


def test_best_spans_equal_decode_predictions_on_gold_peaks(squad_features):
    _, examples, features = squad_features
    start_logits = np.eye(SEQ_LENGTH)[features.start_positions] * 10
    end_logits = np.eye(SEQ_LENGTH)[features.end_positions] * 10
    graph = graph_answers(examples, features, start_logits, end_logits, version_2=True)
    assert graph == python_answers(examples, features, start_logits, end_logits, version_2=True)
    # Gold answers found across windows (those that fit a window and 30 tokens);
    # unanswerable questions answered "".
    fits = {i for i, s, e in zip(features.example_index, features.start_positions,
                                 features.end_positions) if 0 < s <= e < s + 30}
    assert len(fits) >= 5 and max(window_numbers(features.example_index)[
        np.isin(features.example_index, list(fits)) & (features.start_positions > 0)]) > 0
    for i, (example, (text, start, end)) in enumerate(zip(examples, graph)):
        if example.is_impossible:
            assert (text, start, end) == ("", -1, -1)
        elif i in fits:
            assert text == example.answers[0]["text"], example.id
            assert example.context[start:end] == text


@pytest.mark.parametrize("version_2, threshold", [(True, 0.0), (True, 1.5), (False, 0.0)])
def test_best_spans_equal_decode_predictions_on_random_logits(squad_features, version_2, threshold):
    _, examples, features = squad_features
    rng = np.random.default_rng(7)
    start_logits = rng.normal(size=features.token_ids.shape).astype(np.float32) * 3
    end_logits = rng.normal(size=features.token_ids.shape).astype(np.float32) * 3
    # A strong [CLS] in every window of some questions: there the null answer wins.
    boost = np.where(features.example_index % 3 == 0, 15, 0).astype(np.float32)
    start_logits[:, 0] += boost
    end_logits[:, 0] += boost
    graph = graph_answers(examples, features, start_logits, end_logits, version_2=version_2,
                          threshold=threshold)
    python = python_answers(examples, features, start_logits, end_logits, version_2=version_2,
                            threshold=threshold)
    assert graph == python
    assert any(text for text, _, _ in graph)
    if version_2:
        assert any(not text for text, _, _ in graph)  # some null answers win


# -- NER ----------------------------------------------------------------------------

TAG_ROWS = [
    ["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "S-ORG"],        # get_entities' docstring
    ["I-PER", "I-PER", "O", "I-LOC", "B-LOC"],                 # IOB1
    ["B-ORG", "E-ORG", "S-PER", "B-LOC", "I-LOC", "E-LOC"],    # IOBES
    ["I-MISC"],                                                # continues nothing: new row
    ["I-MISC", "B-PER", "I-ORG", "O", "O", "E-PER", "I-PER"],  # malformed
    ["O", "O"],
    ["B-LOC"],
]


def test_decode_entities_equals_get_entities_across_rows():
    from bert_keras.metrics import get_entities

    labels = sorted({tag for row in TAG_ROWS for tag in row})
    tables = token_classification._TagTables(labels)
    flat = [labels.index(t) for row in TAG_ROWS for t in row]
    rows = [r for r, row in enumerate(TAG_ROWS) for _ in row]
    entity, num, first = token_classification.decode_entities(
        tf.constant(flat, tf.int32), tf.constant(rows, tf.int64), tables)
    entity = entity.numpy()
    decoded = [[] for _ in TAG_ROWS]
    offsets = np.cumsum([0] + [len(row) for row in TAG_ROWS])
    for e, word in enumerate(first.numpy()):
        row = rows[word]
        last = int(np.flatnonzero(entity == e).max())
        kind = token_classification.split_tag(labels[flat[word]])[1]
        decoded[row].append((kind, word - offsets[row], last - offsets[row]))
    assert decoded == [get_entities(row) for row in TAG_ROWS]
    assert int(num) == sum(len(get_entities(row)) for row in TAG_ROWS)


def test_decode_entities_with_no_entity_in_the_batch():
    # Regression: an all-"O" batch made a gather index out of range, so the
    # export failed on its own warmup text and TF Serving refused the version.
    tables = token_classification._TagTables(["B-PER", "I-PER", "O"])
    outside = ["B-PER", "I-PER", "O"].index("O")
    entity, num, first = token_classification.decode_entities(
        tf.constant([outside] * 5, tf.int32), tf.constant([0, 0, 0, 1, 1], tf.int64), tables)
    assert entity.numpy().tolist() == [-1] * 5
    assert int(num) == 0 and first.numpy().tolist() == []
    entity, num, first = token_classification.decode_entities(
        tf.zeros([0], tf.int32), tf.zeros([0], tf.int64), tables)
    assert int(num) == 0 and entity.numpy().tolist() == []


NER_TEXTS = [
    "Zürich and São Paulo are cities where John Smith and Angela Merkel met in 1998 .",
    "John Smith lives in New York , far from Paris .",
    "東 京 is the capital ; the film was great and the battery died .",
    "John Smith lives in New York, far from Paris.",  # punctuation attached: the same words
    "the",
]


def test_exported_entities_equal_predict_texts(finetuned_dir, exported_model):
    from bert_keras.tasks import load

    predicted = load(finetuned_dir("ner")).predict(NER_TEXTS)
    base_path, name, version = exported_model("ner")
    serve = tf.saved_model.load(os.path.join(base_path, name, str(version))).signatures[
        "serving_default"]
    outputs = {k: v.numpy() for k, v in serve(text=tf.constant(NER_TEXTS)).items()}

    after_non_ascii = 0
    for row, (text, result) in enumerate(zip(NER_TEXTS, predicted)):
        expected = [(e["text"], e["type"], e["start_char"], e["end_char"]) for e in result["entities"]]
        count = int(outputs["num_entities"][row])
        got = [(outputs["entity_text"][row, i].decode(), outputs["entity_label"][row, i].decode(),
                int(outputs["start_char"][row, i]), int(outputs["end_char"][row, i]))
               for i in range(count)]
        assert got == expected, text
        for entity_text, _, start, end in got:
            assert text[start:end] == entity_text  # code points, not bytes
            after_non_ascii += any(ord(c) > 127 for c in text[:start])
        padding = slice(count, None)
        assert (outputs["entity_text"][row, padding] == b"").all()
        assert (outputs["start_char"][row, padding] == -1).all()
        assert (outputs["score"][row, padding] == 0).all()
        assert ((outputs["score"][row, :count] > 0) & (outputs["score"][row, :count] <= 1)).all()
    assert predicted[3]["words"] == ["John", "Smith", "lives", "in", "New", "York", ",", "far", "from",
                                     "Paris", "."]
    assert predicted[3]["words"] == predicted[1]["words"]  # the spaces before punctuation do not matter
    assert sum(len(r["entities"]) for r in predicted) >= 4
    assert after_non_ascii > 0  # offsets after "ü", "ã", "東" were checked
    json.dumps({k: v.tolist() for k, v in outputs.items() if v.dtype != object})  # dense, plain
