"""`bert_keras.metrics.korquad` against the official KorQuAD 1.0 script, and SpanQA's `evaluation_metric`.

The reference is `evaluate-v1.0.py` of korquad/korquad.github.io, a verbatim copy in
`tests/data/korean/korquad/` (README there), loaded with importlib. Both are run on predictions
made from the data: a character-bigram baseline (the sentence of the context closest to the
question, then a few words of it), seeded random spans of the contexts, the gold answers and
variants of them (particles, spacing, punctuation, NFD Hangul, changed English words and digits),
and empty answers. The data is the whole KorQuAD 1.0 dev file where the checkout has
`../shared/data/korean/korquad/` beside it, and always the shipped excerpt of it (6 articles).
"""

import contextlib
import importlib.util
import io
import json
import os
import random
import re
import unicodedata
import warnings

import pytest

from bert_keras.metrics import korquad

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "data", "korean", "korquad")
OFFICIAL_SCRIPT = os.path.join(FIXTURES, "evaluate-v1.0.py")
EXCERPT = os.path.join(FIXTURES, "KorQuAD_v1.0_dev-excerpt.json")
# The CI clone has shared/ beside the repository; a device machine's copy has it inside.
FULL_DEV_CANDIDATES = [os.path.join(base, "shared", "data", "korean", "korquad", "KorQuAD_v1.0_dev.json")
                       for base in (os.path.dirname(ROOT), ROOT)]
TOLERANCE = 1e-9


def _load_official():
    """The official script as a module, compiled from its source (no __pycache__ in tests/data)."""
    spec = importlib.util.spec_from_loader("korquad_evaluate_v1_0", loader=None, origin=OFFICIAL_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = OFFICIAL_SCRIPT
    with open(OFFICIAL_SCRIPT, encoding="utf-8") as f:
        source = f.read()
    with warnings.catch_warnings():  # its regexes "\(" are invalid escapes (a warning in Python 3.12)
        warnings.simplefilter("ignore")
        code = compile(source, OFFICIAL_SCRIPT, "exec")
    exec(code, module.__dict__)
    return module


official = _load_official()


def _official_evaluate(articles, predictions):
    """The official evaluate() and what it printed to stderr (one line per unanswered question)."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        result = official.evaluate(articles, predictions)
    return result, stderr.getvalue()


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _full_dev_path():
    return next((path for path in FULL_DEV_CANDIDATES if os.path.isfile(path)), None)


@pytest.fixture(scope="module", params=["excerpt", "full-dev"])
def articles(request):
    if request.param == "excerpt":
        return _read(EXCERPT)["data"]
    path = _full_dev_path()
    if path is None:
        pytest.skip("the full KorQuAD 1.0 dev file is not here (looked for "
                    f"{' and '.join(FULL_DEV_CANDIDATES)}); the excerpt case still runs")
    return _read(path)["data"]


def _questions(articles):
    """(question dict, context) of every question, in file order."""
    return [(qa, paragraph["context"]) for article in articles for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]


# ---------------------------------------------------------------- predictions made from the data


def _bigrams(text):
    text = "".join(text.split())
    return {text[i:i + 2] for i in range(len(text) - 1)}


def _sentences(context):
    """(start, end) of the context's sentences: cut after . ? ! before whitespace, and at newlines."""
    start = 0
    for match in re.finditer(r"[.?!](?=\s)|\n", context):
        yield start, match.end()
        start = match.end()
    yield start, len(context)


def baseline_answer(question, context):
    """The sentence sharing most character bigrams with the question (the first on ties), then in it the
    first run of words sharing none with the question, at most 3 words, cut from the context."""
    asked = _bigrams(question)
    start, end = max(_sentences(context), key=lambda span: len(_bigrams(context[span[0]:span[1]]) & asked))
    words = [(start + m.start(), start + m.end()) for m in re.finditer(r"\S+", context[start:end])]
    if not words:
        return ""
    new = [not (_bigrams(context[s:e]) & asked) for s, e in words]
    if not any(new):
        return context[words[0][0]:words[-1][1]]
    first = new.index(True)
    last = first
    while last + 1 < len(words) and new[last + 1] and last + 1 < first + 3:
        last += 1
    return context[words[first][0]:words[last][1]]


def baseline_predictions(articles):
    return {qa["id"]: baseline_answer(qa["question"], context) for qa, context in _questions(articles)}


def random_span_predictions(articles, seed):
    rng = random.Random(seed)
    predictions = {}
    for qa, context in _questions(articles):
        start = rng.randrange(len(context))
        predictions[qa["id"]] = context[start:start + rng.randint(0, 25)]
    return predictions


def gold_predictions(articles):
    return {qa["id"]: qa["answers"][0]["text"] for qa, _ in _questions(articles)}


# Edits of a gold answer: Korean particles, spacing, the brackets and quotes the official script turns into
# spaces, ASCII and non-ASCII punctuation (only the ASCII one is dropped), a middle dot that stays.
_VARIANTS = [
    lambda t: t + "은", lambda t: t + "를", lambda t: t + "에서", lambda t: t + "의",
    lambda t: t.replace(" ", ""), lambda t: "  " + t.replace(" ", " \t ") + "\n",
    lambda t: f"《{t}》", lambda t: f"'{t}'", lambda t: f'"{t}"', lambda t: f"({t})", lambda t: f"〈{t}〉",
    lambda t: f"‘{t}’", lambda t: f"“{t}”", lambda t: f"「{t}」", lambda t: t + ".", lambda t: t + "。",
    lambda t: t.replace(" ", "·"), lambda t: t.replace(" ", ", "), lambda t: "<" + t + ">",
    lambda t: t[:-1], lambda t: t[1:], lambda t: t + " " + t,
]


def variant_predictions(articles):
    return {qa["id"]: _VARIANTS[i % len(_VARIANTS)](qa["answers"][0]["text"])
            for i, (qa, _) in enumerate(_questions(articles))}


def unicode_predictions(articles, form):
    return {qa["id"]: unicodedata.normalize(form, qa["answers"][0]["text"]) for qa, _ in _questions(articles)}


_FULLWIDTH = str.maketrans("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                           "０１２３４５６７８９ＡＢＣＤＥＦＧＨＩＪＫＬＭＮＯＰＱＲＳＴＵＶＷＸＹＺ"
                           "ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔｕｖｗｘｙｚ")


def latin_and_digit_predictions(articles):
    """English words and digits changed: case swapped, digits shifted, full-width forms, a word added."""
    edits = [str.swapcase, str.upper, lambda t: t.translate(_FULLWIDTH),
             lambda t: re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), t),
             lambda t: t + " (Version 2.0)", lambda t: "The " + t, lambda t: t.replace(",", "")]
    return {qa["id"]: edits[i % len(edits)](qa["answers"][0]["text"])
            for i, (qa, _) in enumerate(_questions(articles))}


def _prediction_sets(articles):
    sets = {
        "baseline": baseline_predictions(articles),
        "random spans": random_span_predictions(articles, seed=0),
        "gold": gold_predictions(articles),
        "gold variants": variant_predictions(articles),
        "empty": {qa["id"]: "" for qa, _ in _questions(articles)},
        "NFD": unicode_predictions(articles, "NFD"),
        "NFKC": unicode_predictions(articles, "NFKC"),
        "English and digits": latin_and_digit_predictions(articles),
    }
    sets["NFD baseline"] = {k: unicodedata.normalize("NFD", v) for k, v in sets["baseline"].items()}
    return sets


# ---------------------------------------------------------------- equality with the official script


def test_equal_to_the_official_script_on_predictions_made_from_the_data(articles):
    for name, predictions in _prediction_sets(articles).items():
        ours = korquad.evaluate(articles, predictions)
        expected, printed = _official_evaluate(articles, predictions)
        assert printed == ""
        assert list(ours) == ["exact_match", "f1"] == list(expected), name
        for key in ours:
            assert isinstance(ours[key], float)
            assert abs(ours[key] - expected[key]) <= TOLERANCE, (name, key, ours[key], expected[key])
    # The official script does not normalise Unicode: decomposed Hangul (NFD) never matches the composed
    # gold; only the answers without Hangul (digits, English) still do.
    gold = gold_predictions(articles)
    assert korquad.evaluate(articles, gold) == {"exact_match": 100.0, "f1": 100.0}
    nfd = unicode_predictions(articles, "NFD")
    unchanged = sum(nfd[qid] == text for qid, text in gold.items())
    assert 0 < unchanged < len(gold) / 4
    assert korquad.evaluate(articles, nfd)["exact_match"] == pytest.approx(100 * unchanged / len(gold))


def test_the_baseline_numbers_over_the_whole_dev_file():
    """Pinned values, so that a change of the baseline or of either scorer shows."""
    path = _full_dev_path()
    if path is None:
        pytest.skip(f"the full KorQuAD 1.0 dev file is not here (looked for {' and '.join(FULL_DEV_CANDIDATES)})")
    articles = _read(path)["data"]
    predictions = baseline_predictions(articles)
    ours = korquad.evaluate(articles, predictions)
    expected, _ = _official_evaluate(articles, predictions)
    assert len(predictions) == 5774
    assert ours == pytest.approx(expected, abs=TOLERANCE)
    assert ours == pytest.approx({"exact_match": 2.6498094908209215, "f1": 19.249170926643917}, abs=TOLERANCE)


def test_per_question_functions_equal_the_official_ones():
    articles = _read(EXCERPT)["data"]
    texts = sorted({text for predictions in _prediction_sets(articles).values() for text in predictions.values()}
                   | {"", " ", "《》", "()", "'", "A.B.C", "İstanbul", "ß", "Ⅻ장", "1,000,000원", "x\u3000y"})
    for text in texts:
        assert korquad.normalize_answer(text) == official.normalize_answer(text), text
    golds = sorted({qa["answers"][0]["text"] for qa, _ in _questions(articles)}) + ["", "()"]
    rng = random.Random(1)
    for prediction in texts:
        for gold in rng.sample(golds, 3) + [prediction]:
            assert korquad.exact_match_score(prediction, [gold]) == official.exact_match_score(prediction, gold)
            assert korquad.f1_score(prediction, gold) == official.f1_score(prediction, gold), (prediction, gold)
    several = rng.sample(golds, 4)
    for prediction in texts[:200]:
        assert korquad.f1_score(prediction, several) == official.metric_max_over_ground_truths(
            official.f1_score, prediction, several)
        assert korquad.exact_match_score(prediction, several) == official.metric_max_over_ground_truths(
            official.exact_match_score, prediction, several)


def test_normalisation_and_character_f1_by_hand():
    # Quotes, brackets and parentheses become spaces; ASCII punctuation goes; Unicode punctuation stays.
    assert korquad.normalize_answer("《노아의 방주》 (Noah's Ark)") == "노아의 방주 noah s ark"
    assert korquad.normalize_answer("「임수경」。") == "「임수경」。"
    assert korquad.normalize_answer("3.1 운동") == "31 운동"
    # Characters, not tokens: the particle costs one character of eleven.
    assert korquad.f1_score("1989년 2월 15일에", "1989년 2월 15일") == pytest.approx(20 / 21)
    assert korquad.f1_score("임 수 경", "임수경") == 1.0 and korquad.exact_match_score("임 수 경", "임수경") == 0
    assert korquad.exact_match_score("  《임수경》 ", "임수경") == 1


# ---------------------------------------------------------------- edge cases


def _tiny(answers_b=("헤이그", "알렉산더 헤이그", "헤이그 장군")):
    return [{"title": "t", "paragraphs": [{"context": "...", "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "1924년 12월 2일", "answer_start": 0}]},
        {"id": "b", "question": "?", "answers": [{"text": t, "answer_start": 0} for t in answers_b]},
        {"id": "c", "question": "?", "answers": [{"text": "NTSC", "answer_start": 0}]}]}]}]


def test_missing_predictions_score_zero_as_the_official_script():
    articles = _read(EXCERPT)["data"]
    predictions = baseline_predictions(articles)
    dropped = [qid for i, qid in enumerate(predictions) if i % 7 == 3]
    for qid in dropped:
        del predictions[qid]
    with pytest.warns(UserWarning, match=f"{len(dropped)} of 156 questions have no prediction and score 0: "
                                         f"{re.escape(dropped[0])}, {re.escape(dropped[1])}"):
        ours = korquad.evaluate(articles, predictions)
    expected, printed = _official_evaluate(articles, predictions)
    assert printed.splitlines() == [f"Unanswered question {qid} will receive score 0." for qid in dropped]
    assert ours == pytest.approx(expected, abs=TOLERANCE)
    with pytest.warns(UserWarning, match="3 of 3 questions have no prediction"):
        assert korquad.evaluate(_tiny(), {}) == _official_evaluate(_tiny(), {})[0] == {
            "exact_match": 0.0, "f1": 0.0}


def test_extra_prediction_ids_are_ignored_as_the_official_script():
    predictions = {"a": "1924년 12월 2일", "b": "헤이그", "c": "ntsc", "zz-1": "x", "zz-2": "y"}
    with pytest.warns(UserWarning, match="2 predictions name no question of the dataset and are ignored: zz-1, zz-2"):
        ours = korquad.evaluate(_tiny(), predictions)
    assert ours == _official_evaluate(_tiny(), predictions)[0] == {"exact_match": 100.0, "f1": 100.0}


def test_multiple_ground_truths_take_the_best():
    predictions = {"a": "1924년 12월", "b": "알렉산더 헤이그는", "c": "NTSC 방식"}
    ours = korquad.evaluate(_tiny(), predictions)
    assert ours == _official_evaluate(_tiny(), predictions)[0]
    # a: all 8 predicted characters in the gold's 10 -> 8/9; b: best against 알렉산더헤이그 (7 of 7, one extra
    # character; 헤이그 gives 6/11) -> 14/15; c: ntsc of ntsc방식 -> 4/5. No exact match.
    assert ours["exact_match"] == 0.0
    assert ours["f1"] == pytest.approx(100 * (8 / 9 + 14 / 15 + 4 / 5) / 3)
    assert korquad.f1_score("알렉산더 헤이그는", "헤이그") == pytest.approx(6 / 11)
    predictions["b"] = "헤이그 장군"
    assert korquad.evaluate(_tiny(), predictions)["exact_match"] == pytest.approx(100 / 3)


def test_empty_ground_truth_and_empty_prediction_as_the_official_script():
    # A gold answer that is "" (or normalises to nothing): exact match when the prediction does too, F1 0.
    articles = _tiny(answers_b=("", "()"))
    for predictions in ({"a": "", "b": "", "c": ""}, {"a": "x", "b": "《》", "c": "NTSC"},
                        {"a": "1924년", "b": "헤이그", "c": ""}):
        ours = korquad.evaluate(articles, predictions)
        assert ours == _official_evaluate(articles, predictions)[0]
    assert korquad.evaluate(articles, {"a": "", "b": "", "c": ""}) == {"exact_match": 100 / 3, "f1": 0.0}
    assert korquad.f1_score("", "") == 0 and korquad.exact_match_score("", "") == 1


def test_input_errors_name_the_problem():
    # A question without gold answers: the official script fails too (max() of nothing).
    no_answers = _tiny(answers_b=())
    with pytest.raises(ValueError, match="question 'b' has no gold answers"):
        korquad.evaluate(no_answers, {"a": "x", "b": "y", "c": "z"})
    with pytest.raises(ValueError):
        official.evaluate(no_answers, {"a": "x", "b": "y", "c": "z"})
    # An answer that is not a string: the official script fails on it (re.sub of a non-string).
    with pytest.raises(TypeError, match=r"predictions\['b'\] is int 1924; an answer is its text"):
        korquad.evaluate(_tiny(), {"a": "x", "b": 1924, "c": "z"})
    with pytest.raises(TypeError):
        official.evaluate(_tiny(), {"a": "x", "b": 1924, "c": "z"})
    with pytest.raises(TypeError, match=r"predictions\['c'\] is NoneType"):
        korquad.evaluate(_tiny(), {"a": "x", "b": "y", "c": None})
    with pytest.raises(TypeError, match="predictions is {question_id: answer_text}, got list"):
        korquad.evaluate(_tiny(), ["x", "y", "z"])
    with pytest.raises(TypeError, match="an answer is a string, got bytes"):
        korquad.normalize_answer(b"x")
    with pytest.raises(ValueError, match="ground_truths is empty"):
        korquad.f1_score("x", [])
    with pytest.raises(ValueError, match="the dataset has no questions"):
        korquad.evaluate([], {})


def test_the_dataset_as_the_parsed_file_or_its_path():
    articles = _read(EXCERPT)["data"]
    predictions = baseline_predictions(articles)
    expected = korquad.evaluate(articles, predictions)
    assert korquad.evaluate(_read(EXCERPT), predictions) == expected
    assert korquad.evaluate(EXCERPT, predictions) == expected


def test_a_dataset_file_with_a_byte_order_mark_is_read_as_bert_keras_evaluate_reads_it(tmp_path):
    articles = _read(EXCERPT)["data"]
    predictions = baseline_predictions(articles)
    marked = tmp_path / "dev_bom.json"
    with open(EXCERPT, "rb") as f:
        marked.write_bytes(b"\xef\xbb\xbf" + f.read())  # Windows' "UTF-8 with BOM"
    assert korquad.evaluate(str(marked), predictions) == korquad.evaluate(articles, predictions)


def test_the_shipped_script_is_the_official_one_and_the_examples_run():
    import doctest
    import hashlib

    with open(OFFICIAL_SCRIPT, "rb") as f:
        assert hashlib.sha1(f.read()).hexdigest() == "0f91f69e6ac5c5c9b3b2fa1a1e7f85bf179b6a7e"
    result = doctest.testmod(korquad, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
    import test_docstring_examples

    assert "bert_keras.metrics.korquad" in test_docstring_examples.LIGHT


# ---------------------------------------------------------------- SpanQA(evaluation_metric="korquad")


def test_span_qa_evaluates_with_the_korquad_metric(tmp_path):
    import export_fixtures
    from bert_keras import tasks
    from bert_keras.finetuned_model import read_finetuned
    from bert_keras.metrics import squad

    spec = export_fixtures.make_encoder_spec(str(tmp_path / "tiny"))
    qa = tasks.SpanQA.from_pretrained(spec, seq_length=64, stride=16, max_query_length=16,
                                      evaluation_metric="korquad")
    assert qa.settings["evaluation_metric"] == "korquad"
    examples = _questions(_read(EXCERPT)["data"][:1])  # 임종석: 11 questions
    questions, contexts = [q["question"] for q, _ in examples], [c for _, c in examples]
    answers = [q["answers"] for q, _ in examples]
    metrics = qa.score((questions, contexts), answers)
    # The answers the model predicts, scored by the official script.
    predictions = {str(i): row["answer"] for i, row in enumerate(qa.predict((questions, contexts)))}
    dataset = [{"paragraphs": [{"context": c, "qas": [{"id": str(i), "answers": a}]}]}
               for i, (c, a) in enumerate(zip(contexts, answers))]
    expected, _ = _official_evaluate(dataset, predictions)
    assert set(metrics) == {"exact_match", "f1", "num_examples"} and metrics["num_examples"] == 11
    assert metrics["exact_match"] == pytest.approx(expected["exact_match"], abs=TOLERANCE)
    assert metrics["f1"] == pytest.approx(expected["f1"], abs=TOLERANCE)
    # The SQuAD metric scores the same answers by tokens, not characters.
    assert squad.squad_v1_metrics(dataset, predictions)["f1"] != pytest.approx(expected["f1"])

    # Recorded in task.json and read back (`tasks.load` and `bert-keras evaluate` read it there).
    record = read_finetuned(qa.save(str(tmp_path / "saved")), load_model=False)
    assert record.settings["evaluation_metric"] == "korquad"
    # The default stays SQuAD's; a value the family does not know, or KorQuAD on a v2.0 model, is refused.
    from bert_keras.families import family
    from bert_keras.finetuned_model import FinetunedModelError

    assert family("squad").default_settings["evaluation_metric"] == "squad"
    with pytest.raises(FinetunedModelError, match="evaluation_metric 'kor': one of 'squad', 'korquad'"):
        record.with_settings(evaluation_metric="kor")
    with pytest.raises(FinetunedModelError, match="evaluation_metric 'korquad' scores KorQuAD 1.0.*version_2=False"):
        record.with_settings(version_2=True)
    with pytest.raises(tasks.TaskInputError, match="evaluation_metric 'kor': one of"):
        tasks.SpanQA.from_pretrained(spec, seq_length=64, max_query_length=16, evaluation_metric="kor")


def test_the_named_dataset_korquad_reads_files_and_records_the_metric():
    """`bert-keras finetune --task korquad/v1.0 --data ... --eval-data ...`: a SpanQA scored by KorQuAD's
    metric; without files it says which ones (KorQuAD is not in TFDS)."""
    from bert_keras.tasks.named_datasets import DatasetSpecError, task_spec

    spec = task_spec("korquad/v1.0", train_path=EXCERPT, eval_path=EXCERPT, stride=64)
    assert spec.model_options() == {"version_2": False, "stride": 64, "max_query_length": 64,
                                    "evaluation_metric": "korquad"}
    examples, _ = spec.evaluation_data()
    assert len(examples) == 156
    with pytest.raises(DatasetSpecError, match="--data KorQuAD_v1.0_train.json"):
        task_spec("korquad/v1.0").training_data()


# ---------------------------------------------------------------- a KorQuAD file read as SQuAD


def _write_korquad(path, version="KorQuAD_v1.0_dev", articles=1):
    data = _read(EXCERPT)["data"][:articles]
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "data": data} if version else {"data": data}, f, ensure_ascii=False)
    return str(path)


def test_a_korquad_file_read_as_squad_v1_is_scored_with_the_korquad_metric(tmp_path):
    """`--task squad/v1.1 --data KorQuAD_v1.0_train.json`: the file's own "version" names its official
    scorer, so the run becomes korquad/v1.0 (recorded with the model), and says so."""
    from bert_keras.tasks.named_datasets import task_spec

    spec = task_spec("squad/v1.1", train_path=EXCERPT, eval_path=EXCERPT)
    with pytest.warns(UserWarning, match=r"declares \"version\": 'KorQuAD_v1.0_dev': read as korquad/v1.0, "
                                         r"not squad/v1.1.*character F1.*--task korquad/v1.0") as caught:
        examples, _ = spec.training_data()
        spec.evaluation_data()
    assert len(examples) == 156 and len(caught) == 1  # one warning for both files
    assert spec.spec == "korquad/v1.0" and spec.provenance()["task"] == "korquad/v1.0"
    assert spec.model_options()["evaluation_metric"] == "korquad"
    assert spec.format_metrics({"f1": 1.0, "num_examples": 156}).startswith("korquad/v1.0: ")

    # squad/v2.0 is a model with unanswerable questions: warned, not changed.
    spec = task_spec("squad/v2.0", train_path=EXCERPT)
    with pytest.warns(UserWarning, match="SQuAD v2.0's metric.*use --task korquad/v1.0"):
        spec.training_data()
    assert spec.spec == "squad/v2.0" and "evaluation_metric" not in spec.model_options()

    # Korean contexts without the declaration: a warning naming the task to use.
    spec = task_spec("squad/v1.1", eval_path=_write_korquad(tmp_path / "ko.json", version=None))
    with pytest.warns(UserWarning, match="the contexts are Korean.*--task korquad/v1.0"):
        spec.evaluation_data()
    assert spec.spec == "squad/v1.1" and "evaluation_metric" not in spec.model_options()

    # English SQuAD, and KorQuAD named as such: nothing to say.
    for task, path in (("squad/v1.1", os.path.join(ROOT, "tests", "data", "squad", "dev-v1.1-mini.json")),
                       ("korquad/v1.0", EXCERPT)):
        spec = task_spec(task, eval_path=path)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            spec.evaluation_data()
        assert spec.spec == task


def test_evaluate_scores_a_korquad_file_with_the_korquad_metric_on_a_squad_model(tmp_path):
    """`bert-keras evaluate --model DIR --data KorQuAD.json` on a model fine-tuned as squad/v1.1
    (saved with SQuAD's metric): `prepare_scoring` gives it KorQuAD's, equal to the official script."""
    import export_fixtures
    from bert_keras import tasks
    from bert_keras.tasks.named_datasets import spec_for_model, task_spec

    qa = tasks.SpanQA.from_pretrained(export_fixtures.make_encoder_spec(str(tmp_path / "tiny")),
                                      seq_length=64, stride=16, max_query_length=16)
    assert qa.evaluation_metric == "squad"
    path = _write_korquad(tmp_path / "dev.json")  # 임종석: 11 questions
    spec = spec_for_model(task_spec(None, training={"task": "squad/v1.1"}), qa, "DIR")
    with pytest.warns(UserWarning, match="read as korquad/v1.0"):
        x, y = spec.evaluation_data(path)
    spec.prepare_scoring(qa)
    assert qa.evaluation_metric == "korquad"
    metrics = qa.score(x, y)
    predictions = {row["id"]: row["answer"] for row in qa.predict(x)}
    expected, _ = _official_evaluate(_read(path)["data"], predictions)
    assert metrics["exact_match"] == pytest.approx(expected["exact_match"], abs=TOLERANCE)
    assert metrics["f1"] == pytest.approx(expected["f1"], abs=TOLERANCE)

    # The setting itself: checked as from_pretrained checks it.
    with pytest.raises(tasks.TaskInputError, match="evaluation_metric='kor': one of 'squad', 'korquad'"):
        qa.evaluation_metric = "kor"
    qa.evaluation_metric = "squad"
    assert qa.settings["evaluation_metric"] == "squad"


def test_score_of_parsed_korean_examples_on_a_squad_model_names_the_korquad_metric(tmp_path):
    """`qa.score(read_squad_json("KorQuAD_v1.0_dev.json", ...))`: parsed examples carry no file
    "version", so a model saved with SQuAD's metric scored KorQuAD by words with English articles
    dropped, silently (only the CLI, which reads the file, told). Korean contexts scored with SQuAD's
    metric are now warned about, naming `qa.evaluation_metric = 'korquad'`; KorQuAD's metric, or
    English contexts, are not; the CLI, which warned when it read the file, does not say it twice."""
    import export_fixtures
    from bert_keras import tasks
    from bert_keras.tasks.named_datasets import task_spec
    from pipelines.datasets.squad import read_squad_json

    qa = tasks.SpanQA.from_pretrained(export_fixtures.make_encoder_spec(str(tmp_path / "tiny")),
                                      seq_length=64, stride=16, max_query_length=16)
    examples = read_squad_json(_write_korquad(tmp_path / "dev.json"), is_training=False)
    with pytest.warns(UserWarning, match="contexts are Korean.*qa.evaluation_metric = 'korquad'"):
        qa.score(examples)
    qa.evaluation_metric = "korquad"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qa.score(examples)
        qa.evaluation_metric = "squad"
        english = read_squad_json(os.path.join(ROOT, "tests", "data", "squad", "dev-v1.1-mini.json"),
                                  is_training=False)
        qa.score(english)
    spec = task_spec("squad/v1.1", eval_path=_write_korquad(tmp_path / "ko.json", version=None))
    with pytest.warns(UserWarning, match="the contexts are Korean.*--task korquad/v1.0"):
        x, y = spec.evaluation_data()
    spec.prepare_scoring(qa)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qa.score(x, y)


def test_finetune_on_korean_contexts_read_as_squad_warns_once(tmp_path):
    """`bert-keras finetune --task squad/v1.1` on a Korean file without KorQuAD's "version" warned twice:
    when it read the file (naming --task korquad/v1.0), then again when it scored the dev file
    (`SpanQA.score`'s own warning): `finetune` did not call `prepare_scoring`, which `evaluate` calls.
    It warns once, when it reads the file."""
    import export_fixtures
    from bert_keras.tasks.finetuning import finetune
    from bert_keras.tasks.named_datasets import task_spec

    path = _write_korquad(tmp_path / "ko.json", version=None)  # 임종석: 11 questions
    spec = task_spec("squad/v1.1", train_path=path, eval_path=path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = finetune(spec, export_fixtures.make_encoder_spec(str(tmp_path / "tiny")), str(tmp_path / "qa"),
                          seq_length=64, max_query_length=16, max_steps=1, epochs=1, verbose=0, log=lambda line: None)
    korean = [str(w.message) for w in caught if "contexts are Korean" in str(w.message)]
    assert len(korean) == 1 and "--task korquad/v1.0" in korean[0]
    assert result.metrics["num_examples"] == 11 and "f1" in result.metrics
