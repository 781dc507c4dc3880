"""bert_keras.metrics against the reference implementations they claim to equal.

* classification: sklearn.metrics / scipy.stats;
* entities: seqeval (default, conlleval-compatible mode);
* squad: the official SQuAD v1.1 / v2.0 evaluation scripts as kept in
  tf-models-official (`official/nlp/tools/squad_evaluate_v*.py`).

Float comparisons against sklearn/scipy/seqeval use rel=1e-12: the formulas are
the same but numpy may sum in a different order. SQuAD comparisons are exact.
"""

import json
import os
import random
import warnings

import numpy as np
import pytest

from bert_keras.metrics import classification, entities, glue, squad
from bert_keras.metrics.classification import accuracy, f1, matthews_corrcoef, pearson, spearman
from tf_models_reference import tf_models_module

sklearn_metrics = pytest.importorskip("sklearn.metrics")
scipy_stats = pytest.importorskip("scipy.stats")
seqeval_metrics = pytest.importorskip("seqeval.metrics")
seqeval_labeling = pytest.importorskip("seqeval.metrics.sequence_labeling")
# The official SQuAD scripts (tf-models-official): only the tests that use them skip without it.
official_v1 = tf_models_module("official.nlp.tools.squad_evaluate_v1_1")
official_v2 = tf_models_module("official.nlp.tools.squad_evaluate_v2_0")

SQUAD_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "data", "squad")


def approx(value):
    return pytest.approx(value, rel=1e-12, abs=1e-15)


# ---------------------------------------------------------------- classification


def _random_labels(seed, n, classes):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, classes, n)
    # Predictions right ~60% of the time so every metric is far from 0 and 1.
    y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, classes, n))
    return y_true, y_pred


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("classes", [2, 3, 5])
def test_label_metrics_match_sklearn_on_random_data(seed, classes):
    y_true, y_pred = _random_labels(seed, 257, classes)
    assert accuracy(y_true, y_pred) == approx(sklearn_metrics.accuracy_score(y_true, y_pred))
    assert matthews_corrcoef(y_true, y_pred) == approx(sklearn_metrics.matthews_corrcoef(y_true, y_pred))
    for average in ("macro", "micro"):
        expected = sklearn_metrics.f1_score(y_true, y_pred, average=average)
        assert f1(y_true, y_pred, average=average) == approx(expected)
    if classes == 2:
        for pos_label in (0, 1):
            expected = sklearn_metrics.f1_score(y_true, y_pred, pos_label=pos_label)
            assert f1(y_true, y_pred, pos_label=pos_label) == approx(expected)


def test_label_metrics_hand_cases():
    y_true = [1, 1, 1, 0, 0, 0, 1, 0]
    y_pred = [1, 1, 0, 0, 0, 1, 1, 0]
    # tp=3, fp=1, fn=1, tn=3
    assert accuracy(y_true, y_pred) == 0.75
    assert f1(y_true, y_pred) == 0.75
    assert matthews_corrcoef(y_true, y_pred) == approx((3 * 3 - 1 * 1) / np.sqrt(4 * 4 * 4 * 4))
    assert matthews_corrcoef(y_true, y_pred) == approx(sklearn_metrics.matthews_corrcoef(y_true, y_pred))
    # String labels and an explicit positive class (MRPC-style "paraphrase").
    gold = ["yes", "no", "yes", "yes"]
    pred = ["yes", "yes", "no", "yes"]
    assert f1(gold, pred, pos_label="yes") == approx(sklearn_metrics.f1_score(gold, pred, pos_label="yes"))
    assert f1(gold, pred, pos_label="yes") == approx(2 / 3)
    # Macro over the union of labels: class 3 only ever predicted gets F1 0.
    gold, pred = [0, 1, 2, 2], [0, 2, 2, 3]
    assert f1(gold, pred, average="macro") == approx(sklearn_metrics.f1_score(gold, pred, average="macro"))
    assert f1(gold, pred, average="macro") == approx((1 + 0 + 0.5 + 0) / 4)
    assert f1(gold, pred, average="micro") == approx(0.5)


def test_mcc_three_classes_and_degenerate_cases():
    gold = [0, 0, 1, 1, 2, 2, 2, 0, 1]
    pred = [0, 1, 1, 1, 2, 0, 2, 0, 2]
    assert matthews_corrcoef(gold, pred) == approx(sklearn_metrics.matthews_corrcoef(gold, pred))
    assert matthews_corrcoef(gold, pred) == approx(0.5)
    assert matthews_corrcoef(gold, gold) == 1.0
    assert matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == approx(-1.0)
    # A model that predicts one class for every sentence (CoLA's usual failure): 0.0, not NaN.
    assert matthews_corrcoef([0, 1, 1, 0, 1], [1] * 5) == 0.0
    assert sklearn_metrics.matthews_corrcoef([0, 1, 1, 0, 1], [1] * 5) == 0.0
    assert matthews_corrcoef([1] * 4, [1] * 4) == 0.0


def test_f1_zero_division_is_zero_like_sklearn():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = sklearn_metrics.f1_score([0, 0, 0], [0, 0, 0])
    assert f1([0, 0, 0], [0, 0, 0]) == expected == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy_on_random_data(seed):
    rng = np.random.default_rng(seed)
    gold = rng.uniform(0, 5, 301)
    pred = gold + rng.normal(0, 1.5, 301)
    assert pearson(gold, pred) == approx(scipy_stats.pearsonr(gold, pred)[0])
    assert spearman(gold, pred) == approx(scipy_stats.spearmanr(gold, pred)[0])
    # STS-B gold scores come in steps of 0.2: plenty of ties.
    tied_gold, tied_pred = np.round(gold * 5) / 5, np.round(pred)
    assert spearman(tied_gold, tied_pred) == approx(scipy_stats.spearmanr(tied_gold, tied_pred)[0])
    assert pearson(tied_gold, tied_pred) == approx(scipy_stats.pearsonr(tied_gold, tied_pred)[0])


def test_correlation_hand_cases():
    assert classification.rank_average([3, 1, 4, 1, 5]).tolist() == [3.0, 1.5, 4.0, 1.5, 5.0]
    np.testing.assert_array_equal(
        classification.rank_average([2.0, 2.0, 2.0, 0.5]), scipy_stats.rankdata([2.0, 2.0, 2.0, 0.5])
    )
    x, y = [1, 2, 2, 3], [1, 3, 2, 4]
    assert spearman(x, y) == approx(scipy_stats.spearmanr(x, y)[0])
    # Ranks [1, 2.5, 2.5, 4] and [1, 3, 2, 4]: centred dot 4.5, squared norms 4.5 and 5.
    assert spearman(x, y) == approx(np.sqrt(0.9))
    assert pearson([1, 2, 3], [2, 4, 6]) == approx(1.0)
    assert spearman([1, 2, 3, 4], [1, 4, 9, 100]) == 1.0
    assert pearson([1, 2, 3], [3, 2, 1]) == approx(-1.0)
    assert np.isnan(pearson([1, 2, 3], [5, 5, 5]))  # scipy: NaN with a ConstantInputWarning



def test_correlations_of_a_constant_or_nan_input_are_nan_as_scipy():
    # A collapsed regression head predicts one value; 0.1's mean is not exactly 0.1, which once
    # scored pearson -1.8e-17 instead of NaN.
    for constant in ([0.1] * 3, [0.1] * 7, [2.7] * 5):
        gold = list(range(len(constant)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert np.isnan(scipy_stats.pearsonr(constant, gold)[0])
        assert np.isnan(pearson(constant, gold)) and np.isnan(pearson(gold, constant))
        assert np.isnan(spearman(constant, gold))
    # A diverged model's NaN predictions: scipy propagates NaN; ranks once gave spearman 1.0.
    for x, y in (([1.0, 2.0, float("nan")], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [1.0, float("nan"), 3.0])):
        assert np.isnan(scipy_stats.spearmanr(x, y)[0]) and np.isnan(spearman(x, y))
        assert np.isnan(pearson(x, y))
    assert np.isnan(classification.rank_average([1.0, float("nan"), 2.0])).all()
    assert spearman([1.0, 2.0, float("inf")], [1.0, 2.0, 3.0]) == approx(1.0)  # inf ranks, as scipy


def test_classification_input_errors():
    with pytest.raises(ValueError, match="same length, got 3 and 2"):
        accuracy([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="same length, got 2 and 4"):
        pearson([0.1, 0.2], [1, 2, 3, 4])
    for metric in (accuracy, f1, matthews_corrcoef, pearson, spearman):
        with pytest.raises(ValueError, match="empty"):
            metric([], [])
    with pytest.raises(ValueError, match="at least 2 points"):
        spearman([1.0], [2.0])
    with pytest.raises(ValueError, match="needs at most 2 labels"):
        f1([0, 1, 2], [0, 1, 1])
    with pytest.raises(ValueError, match="pos_label=1 is not one of"):
        f1(["a", "b"], ["a", "a"])
    with pytest.raises(ValueError, match="average must be one of"):
        f1([0, 1], [0, 1], average="weighted")
    # Gold labels read as text against predicted ids: numpy compares "1" != 1, which once scored
    # accuracy and F1 0.0 (and MCC 1.0) without a word; sklearn refuses the mix too.
    with pytest.raises(ValueError, match="Mix of label input types"):
        sklearn_metrics.accuracy_score([1, 0, 1], ["1", "0", "1"])
    for metric in (accuracy, f1, matthews_corrcoef):
        with pytest.raises(ValueError, match=r"y_true holds numbers \(1, ...\) but y_pred strings \('1', ...\)"):
            metric([1, 0, 1], ["1", "0", "1"])
    with pytest.raises(ValueError, match="y_true holds strings .* but y_pred numbers"):
        glue.glue_metrics("sst2", predictions=[1, 0], labels=["1", "0"])
    # A pandas column of text is an object array: read by its values.
    with pytest.raises(ValueError, match=r"y_true holds strings \('1', ...\) but y_pred numbers"):
        accuracy(np.array(["1", "0"], dtype=object), np.array([1, 0]))
    with pytest.raises(ValueError, match="y_true holds strings and numbers"):
        accuracy(np.array(["1", 0], dtype=object), [1, 0])
    assert accuracy([1.0, 0.0], [1, 0]) == f1([True, False], [1, 0]) == 1.0  # numbers of any kind compare
    assert accuracy(np.array(["a", "b"], dtype=object), ["a", "a"]) == 0.5


# ---------------------------------------------------------------- GLUE


def test_glue_metrics_per_task_match_references():
    y_true, y_pred = _random_labels(7, 120, 2)
    assert glue.glue_metrics("cola", y_pred, y_true) == {
        "mcc": approx(sklearn_metrics.matthews_corrcoef(y_true, y_pred))
    }
    for task in ("sst2", "qnli", "rte", "wnli", "mnli", "mnli_matched", "mnli_mismatched"):
        assert glue.glue_metrics(task, y_pred, y_true) == {
            "accuracy": approx(sklearn_metrics.accuracy_score(y_true, y_pred))
        }
    for task in ("mrpc", "qqp"):
        result = glue.glue_metrics(task, y_pred, y_true)
        acc = sklearn_metrics.accuracy_score(y_true, y_pred)
        score = sklearn_metrics.f1_score(y_true, y_pred)
        assert result == {"accuracy": approx(acc), "f1": approx(score), "accuracy_and_f1": approx((acc + score) / 2)}
    rng = np.random.default_rng(3)
    gold = np.round(rng.uniform(0, 5, 80) * 5) / 5
    pred = gold + rng.normal(0, 1, 80)
    result = glue.glue_metrics("stsb", pred, gold)
    r, rho = scipy_stats.pearsonr(gold, pred)[0], scipy_stats.spearmanr(gold, pred)[0]
    assert result == {"pearson": approx(r), "spearman": approx(rho), "pearson_and_spearman": approx((r + rho) / 2)}


def test_glue_multiclass_mnli():
    y_true, y_pred = _random_labels(11, 90, 3)
    assert glue.glue_metrics("mnli_mismatched", y_pred, y_true)["accuracy"] == approx(np.mean(y_true == y_pred))


def test_glue_unknown_task_lists_known_ones():
    with pytest.raises(ValueError, match="unknown GLUE task 'sts-b'.*cola, sst2, mrpc, stsb, qqp.*wnli"):
        glue.glue_metrics("sts-b", [1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'"):
        glue.format_glue_table({"squad": {"f1": 0.9}})


def test_glue_average_matches_bert_paper():
    # BERT-base, GLUE test set (Devlin et al. 2019, Table 1): the paper prints one number for
    # QQP/MRPC (F1) and STS-B (Spearman), so those are passed as the task score directly.
    # Its "Average" 79.6 is over the 9 columns: MNLI-m and MNLI-mm separately, WNLI excluded.
    results = {
        "mnli_matched": {"accuracy": 0.846},
        "mnli_mismatched": {"accuracy": 0.834},
        "qqp": {"accuracy_and_f1": 0.712},
        "qnli": {"accuracy": 0.905},
        "sst2": {"accuracy": 0.935},
        "cola": {"mcc": 0.521},
        "stsb": {"pearson_and_spearman": 0.858},
        "mrpc": {"accuracy_and_f1": 0.889},
        "rte": {"accuracy": 0.664},
        "wnli": {"accuracy": 0.651},
    }
    assert round(100 * glue.glue_average(results), 1) == 79.6
    table = glue.format_glue_table(results)
    assert table.splitlines()[-1] == "GLUE average        79.6  (9 tasks; wnli excluded)"


def test_glue_table_uses_mean_of_two_metrics():
    results = {
        "stsb": glue.glue_metrics("stsb", [0.0, 1.0, 2.0, 4.0], [0.0, 1.0, 2.0, 3.0]),
        "mrpc": {"accuracy": 0.80, "f1": 0.90},
        "cola": {"mcc": 0.5},
    }
    rows = glue.format_glue_table(results).splitlines()
    assert rows[0] == "task               score  metrics"
    # Rows follow the GLUE paper's order, not the dict's.
    assert [row.split()[0] for row in rows[1:4]] == ["cola", "mrpc", "stsb"]
    assert rows[2] == "mrpc                85.0  accuracy=80.0 f1=90.0"
    stsb = results["stsb"]
    assert stsb["spearman"] == 1.0
    assert rows[3].startswith(f"stsb{100 * (stsb['pearson'] + 1) / 2:>20.1f}  pearson=")
    average = (0.5 + 0.85 + (stsb["pearson"] + 1) / 2) / 3
    assert glue.glue_average(results) == approx(average)
    assert rows[-1] == f"GLUE average{100 * average:>12.1f}  (3 tasks)"



def test_glue_table_reads_colas_metric_under_the_name_score_reports():
    # TextClassifier.score names it `matthews_corrcoef` (sklearn's); the table's own name is `mcc`.
    assert glue.task_score("cola", {"matthews_corrcoef": 0.25}) == 0.25
    rows = glue.format_glue_table({"cola": {"matthews_corrcoef": 0.521}}).splitlines()
    assert rows[1] == "cola                52.1  matthews_corrcoef=52.1"
    assert rows[-1] == "GLUE average        52.1  (1 task)"


# ---------------------------------------------------------------- entities

IOB2_TRUE = [
    ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG"],
    ["O", "B-MISC", "I-MISC", "I-MISC", "O", "B-PER"],
    ["B-LOC", "B-LOC", "O", "O"],
    ["O", "O", "O"],
]
IOB2_PRED = [
    ["B-PER", "I-PER", "O", "B-LOC", "O", "O", "B-ORG"],  # LOC cut short
    ["O", "I-MISC", "I-MISC", "I-MISC", "O", "B-LOC"],  # malformed start (I- after O) still right; wrong type
    ["B-LOC", "I-LOC", "O", "I-PER"],  # two LOCs merged; malformed PER from nothing
    ["O", "B-ORG", "I-PER"],  # type change inside an entity
]
IOB1_TRUE = [
    ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "O"],  # B- only separates two adjacent LOCs
    ["O", "I-ORG", "I-ORG", "I-MISC", "O"],
]
IOB1_PRED = [
    ["I-PER", "I-PER", "O", "I-LOC", "I-LOC", "O"],
    ["O", "I-ORG", "B-ORG", "I-MISC", "O"],
]
IOBES_TRUE = [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "O", "S-ORG"], ["B-MISC", "E-MISC", "S-MISC"]]
IOBES_PRED = [["S-PER", "O", "B-LOC", "E-LOC", "E-LOC", "O", "B-ORG"], ["B-MISC", "E-MISC", "I-MISC"]]

CASES = {
    "iob2": (IOB2_TRUE, IOB2_PRED),
    "iob1": (IOB1_TRUE, IOB1_PRED),
    "iobes": (IOBES_TRUE, IOBES_PRED),
}


def _seqeval(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero-division and "not a NE tag" warnings
        return function(*args, **kwargs)


def _assert_same_as_seqeval(y_true, y_pred):
    ours = entities.entity_scores(y_true, y_pred)
    assert ours["f1"] == approx(_seqeval(seqeval_metrics.f1_score, y_true, y_pred))
    assert ours["precision"] == approx(_seqeval(seqeval_metrics.precision_score, y_true, y_pred))
    assert ours["recall"] == approx(_seqeval(seqeval_metrics.recall_score, y_true, y_pred))
    expected = _seqeval(seqeval_metrics.classification_report, y_true, y_pred, output_dict=True)
    report = entities.entity_classification_report(y_true, y_pred)
    assert list(report) == list(expected)
    for name, row in expected.items():
        assert report[name]["support"] == row["support"], name
        for key in ("precision", "recall", "f1-score"):
            if np.isnan(row[key]):
                assert np.isnan(report[name][key]), (name, key)
            else:
                assert report[name][key] == approx(row[key]), (name, key)
    return ours, report


@pytest.mark.parametrize("scheme", sorted(CASES))
def test_entities_match_seqeval(scheme):
    y_true, y_pred = CASES[scheme]
    _assert_same_as_seqeval(y_true, y_pred)
    for sentence in y_true + y_pred:
        assert entities.get_entities(sentence) == seqeval_labeling.get_entities(sentence)


def test_entities_iob2_values():
    scores, report = _assert_same_as_seqeval(IOB2_TRUE, IOB2_PRED)
    # Gold: PER x2, LOC x3, ORG, MISC = 7. Predicted: PER, LOC, ORG, MISC, LOC, LOC, PER, ORG, PER = 9.
    # Correct: PER(0,0-1), ORG(0,6), MISC(1,1-3).
    assert scores["precision"] == approx(3 / 9)
    assert scores["recall"] == approx(3 / 7)
    assert scores["f1"] == approx(2 * 3 / (9 + 7))
    assert report["LOC"] == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 3}
    assert report["MISC"] == {"precision": 1.0, "recall": 1.0, "f1-score": 1.0, "support": 1}
    assert report["micro avg"]["support"] == 7


def test_entities_iob1_values():
    assert entities.get_entities(IOB1_TRUE[0]) == [("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4)]
    assert entities.get_entities(IOB1_PRED[1]) == [("ORG", 1, 1), ("ORG", 2, 2), ("MISC", 3, 3)]
    scores, _ = _assert_same_as_seqeval(IOB1_TRUE, IOB1_PRED)
    # 5 gold, 5 predicted entities; only PER(0, 0-1) and MISC(1, 3) agree.
    assert scores == {"precision": approx(2 / 5), "recall": approx(2 / 5), "f1": approx(2 / 5)}


@pytest.mark.parametrize("seed", range(10))
def test_entities_match_seqeval_on_random_malformed_tags(seed):
    rng = random.Random(seed)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "E-ORG", "S-MISC", "E-PER"]
    y_true, y_pred = [], []
    for _ in range(30):
        length = rng.randint(1, 12)
        y_true.append([rng.choice(tags) for _ in range(length)])
        # Mostly copy the gold tags so that many entities match.
        y_pred.append([t if rng.random() < 0.7 else rng.choice(tags) for t in y_true[-1]])
    _assert_same_as_seqeval(y_true, y_pred)


def test_entities_without_entities():
    assert entities.entity_scores([["O", "O"]], [["O", "O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    _assert_same_as_seqeval([["O", "O"]], [["O", "O"]])
    _assert_same_as_seqeval([["O", "B-PER"]], [["O", "O"]])
    _assert_same_as_seqeval([["O", "O"]], [["I-PER", "O"]])


def test_entities_input_errors():
    with pytest.raises(ValueError, match="same number of sentences, got 2 and 1"):
        entities.entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1 has 2 gold tags but 3 predicted tags"):
        entities.entity_scores([["O"], ["O", "O"]], [["O"], ["O", "O", "O"]])
    with pytest.raises(ValueError, match="list of tag sequences"):
        entities.entity_scores(["B-PER"], ["B-PER"])


# ---------------------------------------------------------------- SQuAD


def _load(name):
    with open(os.path.join(SQUAD_DIR, name), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def squad_files():
    return {
        "v1": _load("dev-v1.1-mini.json"),
        "v1_predictions": _load("predictions-v1.1.json"),
        "v2": _load("dev-v2.0-mini.json"),
        "v2_predictions": _load("predictions-v2.0.json"),
        "na_probs": _load("na_probs-v2.0.json"),
    }


def _quiet_official(function, *args):
    """The official scripts log every missing prediction through absl; keep the test output clean."""
    from absl import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity(logging.FATAL)
    try:
        return function(*args)
    finally:
        logging.set_verbosity(verbosity)


def _all_answer_strings(dataset, predictions):
    texts = set(predictions.values())
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                texts.update(a["text"] for a in qa["answers"] + qa.get("plausible_answers", []))
    return sorted(texts) + ["", "  ", "A", "an  apple!", "The the", "\u00c9lan, the", "it's 1,230-km"]


def test_squad_normalisation_and_pair_scores_match_official(squad_files):
    texts = _all_answer_strings(squad_files["v2"], squad_files["v2_predictions"])
    for text in texts:
        assert squad.normalize_answer(text) == official_v1._normalize_answer(text)
        assert squad.normalize_answer(text) == official_v2._normalize_answer(text)
    for prediction in texts:
        for gold in texts:
            assert squad.exact_match_score(prediction, [gold]) == official_v2._compute_exact(gold, prediction)
            assert squad.exact_match_score(prediction, gold) == official_v1._exact_match_score(prediction, gold)
            assert squad.f1_score(prediction, [gold]) == official_v2._compute_f1(gold, prediction)
            assert squad._token_f1(prediction, gold, empty_agreement=False) == official_v1._f1_score(prediction, gold)


def test_squad_oil_crisis_example():
    assert squad.normalize_answer("the members of the Organization of Arab Petroleum Exporting Countries") == (
        "members of organization of arab petroleum exporting countries"
    )
    golds = ["the members of the Organization of Arab Petroleum Exporting Countries", "OAPEC"]
    assert squad.exact_match_score("Members of the Organization of Arab Petroleum Exporting Countries.", golds) == 1
    # 4 of the 8 normalised gold tokens: precision 1, recall 1/2.
    assert squad.f1_score("Arab Petroleum Exporting Countries", golds) == approx(2 / 3)
    assert squad.f1_score("in October 1973", ["October 1973"]) == approx(0.8)


def _official_v1_percentages(dataset, predictions):
    """The codalab evaluate-v1.1.py aggregation (100.0 * sum / total) over the official per-question scores."""
    exact = f1 = total = 0
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                gold = [a["text"] for a in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact += official_v1._metric_max_over_ground_truths(official_v1._exact_match_score, prediction, gold)
                f1 += official_v1._metric_max_over_ground_truths(official_v1._f1_score, prediction, gold)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def test_squad_v1_matches_official(squad_files):
    dataset, predictions = squad_files["v1"], squad_files["v1_predictions"]
    with pytest.warns(UserWarning, match="1 of 11 questions have no prediction .*: photo_release"):
        ours = squad.squad_v1_metrics(dataset, predictions)
    assert ours == _official_v1_percentages(dataset, predictions)
    # tf-models' copy reports fractions (and names F1 "final_f1").
    official = _quiet_official(official_v1.evaluate, dataset["data"], predictions)
    assert ours["exact_match"] == approx(100 * official["exact_match"])
    assert ours["f1"] == approx(100 * official["final_f1"])
    # 4 exact (oil_begin, oil_who, rhine_city, rhine_length) of 11.
    assert ours["exact_match"] == approx(400 / 11)
    assert ours["f1"] == approx(58.98268398268399)


def test_squad_v1_all_correct_and_path_input(squad_files):
    dataset = squad_files["v1"]
    gold = {qa["id"]: qa["answers"][-1]["text"] for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]}
    path = os.path.join(SQUAD_DIR, "dev-v1.1-mini.json")
    assert squad.squad_v1_metrics(path, gold) == {"exact_match": 100.0, "f1": 100.0}
    assert squad.squad_v1_metrics(dataset["data"], gold) == {"exact_match": 100.0, "f1": 100.0}


def test_squad_v1_rejects_v2_data(squad_files):
    with pytest.raises(ValueError, match="'oil_1979' has no gold answers.*squad_v2_metrics"):
        squad.squad_v1_metrics(squad_files["v2"], squad_files["v2_predictions"])
    with pytest.raises(ValueError, match="no questions"):
        squad.squad_v1_metrics({"version": "1.1", "data": []}, {})


_V2_BASE_KEYS = (
    "exact", "f1", "total",
    "HasAns_exact", "HasAns_f1", "HasAns_total",
    "NoAns_exact", "NoAns_f1", "NoAns_total",
)
# Our key -> tf-models' name for it (the original evaluate-v2.0.py calls them best_*, as we do).
_BEST_KEYS = {
    "best_exact": "final_exact",
    "best_exact_thresh": "final_exact_thresh",
    "best_f1": "final_f1",
    "best_f1_thresh": "final_f1_thresh",
}


def _complete(squad_files):
    """The v2 predictions with the one missing answer filled in (the official script cannot score gaps).

    The prediction for an unknown id is dropped too: tf-models' evaluate() crashes on it
    (KeyError in its precision-recall analysis); the original script and ours ignore it.
    """
    predictions = dict(squad_files["v2_predictions"], photo_release="respiration")
    del predictions["not_a_question"]
    return predictions


def test_squad_v2_matches_official_without_na_probs(squad_files):
    dataset, predictions = squad_files["v2"], _complete(squad_files)
    ours = squad.squad_v2_metrics(dataset, dict(predictions, not_a_question="ignored"))
    official = _quiet_official(official_v2.evaluate, dataset["data"], predictions)
    assert list(ours) == list(_V2_BASE_KEYS)
    assert ours == {key: official[key] for key in _V2_BASE_KEYS}
    assert (ours["total"], ours["HasAns_total"], ours["NoAns_total"]) == (16, 11, 5)
    # NoAns: oil_1979 and rhine_smallest answered "" correctly; 3 wrong.
    assert ours["NoAns_exact"] == ours["NoAns_f1"] == 40.0


def test_squad_v2_matches_official_with_na_probs(squad_files):
    dataset, predictions, na_probs = squad_files["v2"], _complete(squad_files), squad_files["na_probs"]
    ours = squad.squad_v2_metrics(dataset, predictions, na_probs=na_probs)
    official = _quiet_official(official_v2.evaluate, dataset["data"], predictions, na_probs)
    assert list(ours) == list(_V2_BASE_KEYS) + list(_BEST_KEYS)
    assert {key: ours[key] for key in _V2_BASE_KEYS} == {key: official[key] for key in _V2_BASE_KEYS}
    assert {key: ours[key] for key in _BEST_KEYS} == {key: official[name] for key, name in _BEST_KEYS.items()}
    # The threshold beats answering everything: answers with na_prob above it become "no answer".
    assert ours["best_exact"] == 56.25 and ours["best_exact_thresh"] == 0.2
    assert ours["best_f1"] > ours["f1"]


@pytest.mark.parametrize("threshold", [0.0, 0.35, 0.5, 0.9])
def test_squad_v2_na_prob_thresh_matches_official_helpers(squad_files, threshold):
    dataset, predictions, na_probs = squad_files["v2"], _complete(squad_files), squad_files["na_probs"]
    ours = squad.squad_v2_metrics(dataset, predictions, na_probs=na_probs, na_prob_thresh=threshold)
    # evaluate() does not expose the threshold; rebuild its steps from the official helpers.
    has_answer = official_v2._make_qid_to_has_ans(dataset["data"])
    exact_raw, f1_raw = official_v2._get_raw_scores(dataset["data"], predictions)
    exact = official_v2._apply_no_ans_threshold(exact_raw, na_probs, has_answer, threshold)
    f1_thresh = official_v2._apply_no_ans_threshold(f1_raw, na_probs, has_answer, threshold)
    expected = official_v2._make_eval_dict(exact, f1_thresh)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [k for k, v in has_answer.items() if v == wanted]
        official_v2._merge_eval(expected, official_v2._make_eval_dict(exact, f1_thresh, qid_list=qids), prefix)
    official_v2._find_all_best_thresh(expected, predictions, exact_raw, f1_raw, na_probs, has_answer)
    assert {key: ours[key] for key in _V2_BASE_KEYS} == {key: expected[key] for key in _V2_BASE_KEYS}
    assert {key: ours[key] for key in _BEST_KEYS} == {key: expected[name] for key, name in _BEST_KEYS.items()}


@pytest.mark.parametrize("seed", range(20))
def test_squad_v2_matches_official_on_random_predictions(squad_files, seed):
    """Random spans of the contexts, random "no answer"s and tied na_probs: stresses the threshold search."""
    rng = random.Random(seed)
    dataset = squad_files["v2"]
    predictions, na_probs = {}, {}
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            words = paragraph["context"].split()
            for qa in paragraph["qas"]:
                roll = rng.random()
                if roll < 0.25:
                    predictions[qa["id"]] = ""
                elif roll < 0.5 and qa["answers"]:
                    predictions[qa["id"]] = rng.choice(qa["answers"])["text"]
                else:
                    start = rng.randrange(len(words))
                    predictions[qa["id"]] = " ".join(words[start : start + rng.randint(1, 6)])
                na_probs[qa["id"]] = rng.randint(0, 10) / 10
    ours = squad.squad_v2_metrics(dataset, predictions, na_probs=na_probs, na_prob_thresh=0.5)
    official = _quiet_official(official_v2.evaluate, dataset["data"], predictions, na_probs)
    assert {key: ours[key] for key in _BEST_KEYS} == {key: official[name] for key, name in _BEST_KEYS.items()}
    plain = squad.squad_v2_metrics(dataset, predictions)
    assert {key: plain[key] for key in _V2_BASE_KEYS} == {key: official[key] for key in _V2_BASE_KEYS}


def test_squad_v2_missing_predictions_count_as_wrong(squad_files):
    dataset, na_probs = squad_files["v2"], squad_files["na_probs"]
    predictions = dict(squad_files["v2_predictions"])  # photo_release (answerable) is missing
    del predictions["rhine_smallest"]  # an unanswerable question, answered "" in the file: now missing too
    with pytest.warns(UserWarning, match="2 of 16 questions have no prediction .*: rhine_smallest, photo_release"):
        ours = squad.squad_v2_metrics(dataset, predictions, na_probs=na_probs)
    # tf-models' evaluate() drops unpredicted questions from every total (and needs na_probs for exactly
    # the predicted ones); we keep them as zeros. Same sums, different denominators.
    answered_probs = {k: v for k, v in na_probs.items() if k in predictions}
    official = _quiet_official(official_v2.evaluate, dataset["data"], predictions, answered_probs)
    assert (ours["total"], official["total"]) == (16, 14)
    assert (ours["HasAns_total"], ours["NoAns_total"]) == (11, 5)
    for prefix in ("", "HasAns_", "NoAns_"):
        for key in ("exact", "f1"):
            ours_sum = ours[prefix + key] * ours[prefix + "total"]
            assert ours_sum == approx(official[prefix + key] * official[prefix + "total"])
    for key, name in _BEST_KEYS.items():
        if key.endswith("_thresh"):
            assert ours[key] == official[name]
        else:
            assert ours[key] * 16 == approx(official[name] * 14)
    # The missing unanswerable question is not credited even though "no answer" would have been right.
    assert ours["NoAns_exact"] == 20.0


def test_squad_v2_input_errors(squad_files):
    with pytest.raises(ValueError, match="na_probs has no probability for 1 predicted questions: \\['oil_begin'\\]"):
        squad.squad_v2_metrics(
            squad_files["v2"],
            _complete(squad_files),
            na_probs={k: v for k, v in squad_files["na_probs"].items() if k != "oil_begin"},
        )
    with pytest.raises(ValueError, match="needs a 'data' key"):
        squad.squad_v2_metrics({"version": "2.0"}, {})


@pytest.mark.parametrize("metric", [squad.squad_v1_metrics, squad.squad_v2_metrics])
def test_squad_predictions_and_answers_of_the_wrong_kind_are_named(metric):
    data = {"data": [{"paragraphs": [{"context": "x y", "qas": [{"id": "a", "answers": [{"text": "x"}]}]}]}]}
    # Once AttributeError "'NoneType' object has no attribute 'lower'" from normalize_answer.
    for value in (None, ["x"]):
        with pytest.raises(TypeError, match=r"predictions\['a'\] is .*an answer is its text"):
            metric(data, {"a": value})
    # HF evaluate's list of {"id", "prediction_text"}: once every question "had no prediction", 0.0.
    with pytest.raises(TypeError, match=r"predictions is \{question_id: answer_text\}, got list"):
        metric(data, [{"id": "a", "prediction_text": "x"}])
    # HF datasets' columnar answers: once "string indices must be integers".
    columns = {"data": [{"paragraphs": [{"context": "x y", "qas": [
        {"id": "a", "answers": {"text": ["x"], "answer_start": [0]}}]}]}]}
    with pytest.raises(TypeError, match="question 'a': answers is .*not HF datasets"):
        metric(columns, {"a": "x"})


def test_metrics_do_not_import_tensorflow():
    import subprocess
    import sys

    # `import bert_keras` configures TensorFlow's logs (pipelines.tensorflow_logs, which loads no
    # TensorFlow); nothing of the text pipelines comes with the metrics.
    code = ("import sys, bert_keras.metrics; print('tensorflow' in sys.modules, any(m.startswith("
            "('pipelines.tokenizer', 'pipelines.datasets', 'pipelines.packing')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("module", [classification, entities, glue, squad])
def test_docstring_examples_run(module):
    import doctest

    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
