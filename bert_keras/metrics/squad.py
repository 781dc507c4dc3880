"""SQuAD v1.1 and v2.0 evaluation, equal to the official scripts.

The official scripts (`evaluate-v1.1.py`, `evaluate-v2.0.py`; copies live in
tf-models-official under `official/nlp/tools/squad_evaluate_v*.py`) score a
prediction string against every gold answer after a fixed normalisation
(lowercase, strip ASCII punctuation, drop the articles a/an/the, collapse
whitespace) and keep the best match:

* exact match: normalised strings are equal;
* F1: bag-of-tokens overlap between the normalised strings.

SQuAD v2.0 adds unanswerable questions: their only gold answer is `""` and an
empty prediction string means "no answer". With per-question no-answer
probabilities (`na_probs`) it also searches the best probability threshold.

One deliberate difference: a question without a prediction is scored as
wrong and kept in every total (with a warning). v1.1 does the same; the
tf-models copy of v2.0 silently drops such questions from all totals instead,
which would inflate the score of a run that skipped hard questions.

Example:
    >>> from bert_keras.metrics.squad import squad_v1_metrics
    >>> data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
    ...     "context": "The 1973 oil crisis began in October 1973.",
    ...     "qas": [{"id": "q1", "question": "When did the crisis begin?",
    ...              "answers": [{"text": "October 1973", "answer_start": 29}]}]}]}]}
    >>> squad_v1_metrics(data, {"q1": "in October 1973"})
    {'exact_match': 0.0, 'f1': 80.0}
"""

import collections
import collections.abc
import json
import os
import re
import string
import warnings

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """The official normalisation: lowercase, no punctuation, no articles, single spaces.

    Example:
        >>> normalize_answer("The  Organization of Arab Petroleum-Exporting Countries.")
        'organization of arab petroleumexporting countries'

    Args:
        text: an answer string.

    Returns:
        The normalised string (possibly empty).
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(text):
    return normalize_answer(text).split()


def exact_match_score(prediction, ground_truths):
    """1 if the normalised prediction equals any normalised gold answer, else 0.

    Example:
        >>> exact_match_score("the October 1973", ["October 1973", "1973"])
        1

    Args:
        prediction: the predicted answer string.
        ground_truths: a gold answer string, or a non-empty list of them.

    Returns:
        0 or 1 (an int, as the official scripts sum them).
    """
    ground_truths = _as_list(ground_truths)
    predicted = normalize_answer(prediction)
    return max(int(predicted == normalize_answer(gold)) for gold in ground_truths)


def _token_f1(prediction, gold, empty_agreement):
    """Token F1 of two answer strings.

    `empty_agreement` is what a pair gets when either side normalises to no
    tokens. v2.0 scores that as 1 if both are empty ("no answer" agrees with
    "no answer") and 0 otherwise; v1.1 has no such case and always gives 0.
    """
    predicted = _tokens(prediction)
    golden = _tokens(gold)
    if not predicted or not golden:
        return int(empty_agreement and predicted == golden)
    return overlap_f1(predicted, golden)


def overlap_f1(predicted, golden):
    """F1 of the units two answers share (a bag: repeats count), as the official scripts compute
    it: SQuAD's over tokens, KorQuAD's over characters. 0 when they share none.

    >>> overlap_f1(["in", "october", "1973"], ["october", "1973"])
    0.8
    """
    common = collections.Counter(predicted) & collections.Counter(golden)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(predicted)
    recall = 1.0 * num_same / len(golden)
    return (2 * precision * recall) / (precision + recall)


def f1_score(prediction, ground_truths):
    """Best token-overlap F1 between the prediction and the gold answers (v2.0 rule).

    If the prediction or a gold answer normalises to nothing, that pair scores
    1 when both do and 0 otherwise.

    Example:
        >>> f1_score("in October 1973", ["October 1973"])
        0.8
        >>> f1_score("", [""])
        1

    Args:
        prediction: the predicted answer string.
        ground_truths: a gold answer string, or a non-empty list of them.

    Returns:
        A number in [0, 1].
    """
    return max(_token_f1(prediction, gold, empty_agreement=True) for gold in _as_list(ground_truths))


def _as_list(ground_truths):
    if isinstance(ground_truths, str):
        return [ground_truths]
    ground_truths = list(ground_truths)
    if not ground_truths:
        raise ValueError("ground_truths is empty: need at least one gold answer")
    return ground_truths


def load_articles(dataset_json):
    """The list of articles of a SQuAD dataset given as a path, the parsed JSON, or its "data" list.

    Example:
        >>> load_articles({"version": "1.1", "data": []})
        []

    Args:
        dataset_json: a path to a SQuAD JSON file, the parsed file
            (`{"version": ..., "data": [...]}`), or the `"data"` list itself.

    Returns:
        The list of article dicts (`{"title", "paragraphs": [...]}`).
    """
    if isinstance(dataset_json, (str, os.PathLike)):
        # utf-8-sig: a file saved by Windows tools starts with a byte order mark, which json refuses
        # and the dataset readers (`pipelines.datasets.squad`, `bert-keras evaluate`) accept.
        with open(dataset_json, encoding="utf-8-sig") as f:
            dataset_json = json.load(f)
    if isinstance(dataset_json, dict):
        if "data" not in dataset_json:
            raise ValueError(f"a SQuAD dataset dict needs a 'data' key, got keys {sorted(dataset_json)}")
        return dataset_json["data"]
    return list(dataset_json)


def _questions(dataset_json):
    """Yields every question dict (`{"id", "question", "answers", ...}`) in file order."""
    for article in load_articles(dataset_json):
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def _check_predictions(predictions):
    if not isinstance(predictions, collections.abc.Mapping):
        # HF `evaluate`'s squad metric takes [{"id", "prediction_text"}, ...]; read as ids, it
        # would leave every question "without a prediction" and score 0.
        raise TypeError(f"predictions is {{question_id: answer_text}}, got {type(predictions).__name__}")


def _prediction(predictions, qid):
    """The prediction string of `qid`, checked, so a bad value is named instead of failing in `lower()`."""
    prediction = predictions[qid]
    if not isinstance(prediction, str):
        raise TypeError(f"predictions[{qid!r}] is {type(prediction).__name__} {prediction!r:.60}; "
                        "an answer is its text (a string, '' for none)")
    return prediction


def _gold_texts(qa):
    """The gold answer strings of one question, checked as the official scripts read them."""
    answers = qa["answers"]
    if not isinstance(answers, list) or not all(
            isinstance(answer, dict) and isinstance(answer.get("text"), str) for answer in answers):
        raise TypeError(f"question {qa['id']!r}: answers is {answers!r:.80}; SQuAD JSON gives a list of "
                        '{"text": str, "answer_start": int} (not HF datasets\' {"text": [...], ...} columns)')
    return [answer["text"] for answer in answers]


def _warn_missing(missing, total):
    if missing:
        shown = ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else "")
        warnings.warn(
            f"{len(missing)} of {total} questions have no prediction and are scored as wrong: {shown}",
            stacklevel=3,
        )


def squad_v1_metrics(dataset_json, predictions):
    """Exact match and F1 of SQuAD v1.1 predictions, as the official `evaluate-v1.1.py`.

    Every question counts once; its score is the best over its gold answers.
    Questions without a prediction score 0 (and a warning names them);
    predictions for unknown ids are ignored.

    Example:
        >>> data = {"data": [{"paragraphs": [{"context": "...", "qas": [
        ...     {"id": "a", "answers": [{"text": "Denver Broncos"}, {"text": "the Broncos"}]},
        ...     {"id": "b", "answers": [{"text": "Santa Clara, California"}]}]}]}]}
        >>> squad_v1_metrics(data, {"a": "Broncos", "b": "Santa Clara"})
        {'exact_match': 50.0, 'f1': 90.0}

    Args:
        dataset_json: the SQuAD v1.1 dataset (path, parsed JSON, or its "data" list).
        predictions: `{question_id: answer_text}`.

    Returns:
        `{"exact_match": float, "f1": float}`, both percentages in [0, 100].
    """
    _check_predictions(predictions)
    exact = f1 = total = 0
    missing = []
    for qa in _questions(dataset_json):
        total += 1
        if qa["id"] not in predictions:
            missing.append(qa["id"])
            continue
        gold = _gold_texts(qa)
        if not gold:
            raise ValueError(
                f"question {qa['id']!r} has no gold answers; SQuAD v2.0 data needs squad_v2_metrics"
            )
        prediction = _prediction(predictions, qa["id"])
        exact += exact_match_score(prediction, gold)
        f1 += max(_token_f1(prediction, answer, empty_agreement=False) for answer in gold)
    if total == 0:
        raise ValueError("the dataset has no questions")
    _warn_missing(missing, total)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def _percentages(exact, f1, qids):
    """`{"exact", "f1", "total"}` over `qids`, summed in file order as the official script."""
    return {
        "exact": 100.0 * sum(exact[qid] for qid in qids) / len(qids),
        "f1": 100.0 * sum(f1[qid] for qid in qids) / len(qids),
        "total": len(qids),
    }


def _best_threshold(predictions, raw_scores, na_probs, has_answer, total):
    """The no-answer threshold that maximises the score (official `find_best_thresh`).

    Start with every answered question predicted as "no answer" (threshold
    below every probability): that gets the unanswerable ones right. Then
    raise the threshold past one question at a time, in increasing `na_prob`
    order, switching it to its predicted answer: an answerable question gains
    its raw score, an unanswerable one loses 1 if the prediction is non-empty.
    Keep the best running score; the threshold is the `na_prob` at which it
    was reached (predict "no answer" when `na_prob > threshold`).
    """
    score = best_score = sum(1 for qid in raw_scores if not has_answer[qid])
    best_threshold = 0.0
    # sorted() is stable: ties keep na_probs' order, exactly as the official script.
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in raw_scores:
            continue
        if has_answer[qid]:
            score += raw_scores[qid]
        elif predictions[qid]:
            # Truthiness of the raw string, not of its normalised form, as the official script.
            score -= 1
        if score > best_score:
            best_score = score
            best_threshold = na_probs[qid]
    return 100.0 * best_score / total, best_threshold


def squad_v2_metrics(dataset_json, predictions, na_probs=None, na_prob_thresh=1.0):
    """SQuAD v2.0 scores, as the official `evaluate-v2.0.py`.

    A question is answerable when its `"answers"` list is non-empty; the gold
    answer of an unanswerable one is `""`, and the prediction `""` means "no
    answer". With `na_probs`, a question whose no-answer probability exceeds
    `na_prob_thresh` is treated as predicted "no answer", and the best
    thresholds for exact match and F1 are searched as the official script does.

    Questions without a prediction score 0 in every total (a warning names
    them), whether answerable or not, and at every threshold.

    Example:
        >>> data = {"data": [{"paragraphs": [{"context": "...", "qas": [
        ...     {"id": "a", "answers": [{"text": "October 1973"}]},
        ...     {"id": "b", "answers": [], "is_impossible": True}]}]}]}
        >>> squad_v2_metrics(data, {"a": "October 1973", "b": "1974"})["exact"]
        50.0
        >>> result = squad_v2_metrics(data, {"a": "October 1973", "b": "1974"}, na_probs={"a": 0.1, "b": 0.9})
        >>> result["best_exact"], result["best_exact_thresh"]
        (100.0, 0.1)

    Args:
        dataset_json: the SQuAD v2.0 dataset (path, parsed JSON, or its "data" list).
        predictions: `{question_id: answer_text}`, `""` for "no answer".
        na_probs: optional `{question_id: probability that it has no answer}`;
            needed for every predicted question. Adds `best_exact`,
            `best_exact_thresh`, `best_f1`, `best_f1_thresh`.
        na_prob_thresh: predict "no answer" where `na_probs[qid] > na_prob_thresh`
            (the official default 1.0 never overrides a prediction).

    Returns:
        A dict with `exact`, `f1`, `total`; `HasAns_exact`, `HasAns_f1`,
        `HasAns_total` if there are answerable questions; `NoAns_*` likewise
        for unanswerable ones; and the `best_*` entries with `na_probs`.
        Scores are percentages.
    """
    _check_predictions(predictions)
    has_answer = {}
    exact_raw, f1_raw = {}, {}
    missing = []
    for qa in _questions(dataset_json):
        qid = qa["id"]
        gold = _gold_texts(qa)
        # The official rule: answerable iff the raw answer list is non-empty
        # (not `is_impossible`; the two agree on the released files).
        has_answer[qid] = bool(gold)
        if qid not in predictions:
            missing.append(qid)
            continue
        gold = [text for text in gold if normalize_answer(text)] or [""]
        prediction = _prediction(predictions, qid)
        exact_raw[qid] = exact_match_score(prediction, gold)
        f1_raw[qid] = f1_score(prediction, gold)
    if not has_answer:
        raise ValueError("the dataset has no questions")
    _warn_missing(missing, len(has_answer))

    if na_probs is not None:
        without = [qid for qid in exact_raw if qid not in na_probs]
        if without:
            raise ValueError(f"na_probs has no probability for {len(without)} predicted questions: {without[:10]}")
    probabilities = na_probs if na_probs is not None else {}

    exact, f1 = {}, {}
    for qid in has_answer:
        if qid not in exact_raw:
            exact[qid] = f1[qid] = 0
        elif probabilities.get(qid, 0.0) > na_prob_thresh:
            # Thresholded to "no answer": right exactly when there is none.
            exact[qid] = f1[qid] = float(not has_answer[qid])
        else:
            exact[qid], f1[qid] = exact_raw[qid], f1_raw[qid]

    result = _percentages(exact, f1, list(has_answer))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, answerable in has_answer.items() if answerable == wanted]
        if qids:
            for key, value in _percentages(exact, f1, qids).items():
                result[f"{prefix}_{key}"] = value
    if na_probs is not None:
        total = len(has_answer)
        result["best_exact"], result["best_exact_thresh"] = _best_threshold(
            predictions, exact_raw, na_probs, has_answer, total
        )
        result["best_f1"], result["best_f1_thresh"] = _best_threshold(
            predictions, f1_raw, na_probs, has_answer, total
        )
    return result
