"""KorQuAD 1.0 evaluation, equal to the official script `evaluate-v1.0.py`.

KorQuAD 1.0 is SQuAD v1.1's format in Korean (every question has an answer).
Its official script (korquad/korquad.github.io; a verbatim copy lives in
`tests/data/korean/korquad/`) scores a prediction string against every gold
answer after its own normalisation, and keeps the best match:

* normalisation: the quotes, angle brackets and parentheses `' " 《 》 < > 〈 〉
  ( ) ‘ ’` become spaces, then lowercase, then ASCII punctuation is dropped,
  then whitespace is collapsed. Unlike SQuAD's, no articles are removed, and
  `"Noah's"` becomes two tokens (`noah s`), not `noahs`;
* exact match: normalised strings are equal;
* F1: the overlap of the bags of *characters* of the normalised strings
  (spaces left out), not of the tokens: `"1989년 2월"` against `"1989년 2월에"`
  shares 7 of 8 characters. A pair where either side has no character scores
  0, even when both are empty (SQuAD v2.0 would give 1).

No Unicode normalisation: a decomposed Hangul answer (NFD jamo) does not
match its composed (NFC) form, as in the official script.

As the official script, `evaluate` returns percentages; a question without a
prediction scores 0 (the script prints "Unanswered question ... will receive
score 0."; here one warning names them all) and predictions for ids that are
not in the dataset are ignored (with a warning).

Example:
    >>> from bert_keras.metrics.korquad import evaluate
    >>> dataset = [{"title": "임종석", "paragraphs": [{
    ...     "context": "1989년 2월 15일 여의도 농민 폭력 시위를 주도한 혐의로 지명수배되었다.",
    ...     "qas": [{"id": "q1", "question": "지명수배 된 날은?",
    ...              "answers": [{"text": "1989년 2월 15일", "answer_start": 0}]},
    ...             {"id": "q2", "question": "어디에서 시위를 했나?",
    ...              "answers": [{"text": "여의도", "answer_start": 13}]}]}]}]
    >>> evaluate(dataset, {"q1": "1989년 2월 15일에", "q2": "여의도"})
    {'exact_match': 50.0, 'f1': 97.61904761904762}
"""

import collections.abc
import string
import warnings

from bert_keras.metrics.squad import load_articles, overlap_f1

# The official remove_(): each of these becomes a space (before lowercasing).
_TO_SPACE = str.maketrans({character: " " for character in "'\"《》<>〈〉()‘’"})
# The official remove_punc(): ASCII punctuation is dropped (after lowercasing).
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text):
    """The official KorQuAD normalisation: quotes and brackets to spaces, lowercase, no ASCII punctuation, single spaces.

    Example:
        >>> normalize_answer("《노아의 방주》(Noah's Ark)")
        '노아의 방주 noah s ark'

    Args:
        text: an answer string.

    Returns:
        The normalised string (possibly empty).

    Raises:
        TypeError: `text` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"an answer is a string, got {type(text).__name__} {text!r:.60}")
    text = text.translate(_TO_SPACE).lower().translate(_NO_PUNCTUATION)
    return " ".join(text.split())


def _characters(text):
    """The characters F1 counts: those of the normalised answer, spaces left out."""
    return "".join(normalize_answer(text).split())


def _char_f1(prediction, gold):
    """Character F1 of two answer strings, as the official `f1_score` (0 when either has no character)."""
    return overlap_f1(_characters(prediction), _characters(gold))


def exact_match_score(prediction, ground_truths):
    """1 if the normalised prediction equals any normalised gold answer, else 0.

    Example:
        >>> exact_match_score("《임수경》", ["임수경"]), exact_match_score("임수경은", ["임수경"])
        (1, 0)

    Args:
        prediction: the predicted answer string.
        ground_truths: a gold answer string, or a non-empty list of them.

    Returns:
        0 or 1 (an int, as the official script sums them).
    """
    predicted = normalize_answer(prediction)
    return max(int(predicted == normalize_answer(gold)) for gold in _as_list(ground_truths))


def f1_score(prediction, ground_truths):
    """Best character-overlap F1 between the prediction and the gold answers.

    Example:
        >>> f1_score("1989년 2월에", ["1989년 2월", "2월"])
        0.9333333333333333
        >>> f1_score("", [""])
        0

    Args:
        prediction: the predicted answer string.
        ground_truths: a gold answer string, or a non-empty list of them.

    Returns:
        A number in [0, 1]; 0 when the prediction or a gold answer normalises
        to nothing.
    """
    return max(_char_f1(prediction, gold) for gold in _as_list(ground_truths))


def _as_list(ground_truths):
    if isinstance(ground_truths, str):
        return [ground_truths]
    ground_truths = list(ground_truths)
    if not ground_truths:
        raise ValueError("ground_truths is empty: need at least one gold answer")
    return ground_truths


def mostly_hangul(texts):
    """Whether most letters of `texts` are Hangul (syllables or jamo): contexts that look like
    KorQuAD's, which SQuAD's metric (word F1, English articles dropped) mis-scores.

    Example:
        >>> mostly_hangul(["1989년 2월 15일 여의도"]), mostly_hangul(["Paris in 1989"])
        (True, False)
    """
    hangul = letters = 0
    for text in texts:
        for character in text:
            if character.isalpha():
                letters += 1
                hangul += "\uac00" <= character <= "\ud7a3" or "\u1100" <= character <= "\u11ff" \
                    or "\u3130" <= character <= "\u318f"
    return letters > 0 and hangul > letters / 2


def _warn_ids(ids, message):
    if ids:
        shown = ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else "")
        warnings.warn(f"{message}: {shown}", stacklevel=3)


def evaluate(dataset, predictions):
    """Exact match and F1 of KorQuAD 1.0 predictions, as the official `evaluate-v1.0.py`.

    Every question counts once; its score is the best over its gold answers.
    Questions without a prediction score 0 (a warning names them); predictions
    for ids that are not in the dataset are ignored (a warning names them).

    Example:
        >>> data = [{"paragraphs": [{"context": "...", "qas": [
        ...     {"id": "a", "answers": [{"text": "알렉산더 헤이그"}, {"text": "헤이그"}]},
        ...     {"id": "b", "answers": [{"text": "1924년"}]}]}]}]
        >>> evaluate(data, {"a": "헤이그는", "b": "1924년"})
        {'exact_match': 50.0, 'f1': 92.85714285714286}

    Args:
        dataset: the list of articles (the KorQuAD JSON's `"data"`), as the
            official script takes it; the parsed JSON or a path to it also do.
        predictions: `{question_id: answer_text}`.

    Returns:
        `{"exact_match": float, "f1": float}`, both percentages in [0, 100],
        as the official script returns them.

    Raises:
        TypeError: `predictions` is not a mapping, or an answer is not a string.
        ValueError: a question without gold answers (the official script fails
            on it), or a dataset without questions.
    """
    if not isinstance(predictions, collections.abc.Mapping):
        raise TypeError(f"predictions is {{question_id: answer_text}}, got {type(predictions).__name__}")
    exact = f1 = total = 0
    missing, seen = [], set()
    for article in load_articles(dataset):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                qid = qa["id"]
                seen.add(qid)
                if qid not in predictions:
                    missing.append(qid)
                    continue
                gold = [answer["text"] for answer in qa["answers"]]
                if not gold:
                    raise ValueError(f"question {qid!r} has no gold answers; every KorQuAD 1.0 question has one")
                prediction = predictions[qid]
                if not isinstance(prediction, str):
                    raise TypeError(f"predictions[{qid!r}] is {type(prediction).__name__} {prediction!r:.60}; "
                                    "an answer is its text (a string, '' for none)")
                for index, text in enumerate(gold):
                    if not isinstance(text, str):
                        raise TypeError(f"question {qid!r}: gold answer {index} is {type(text).__name__} "
                                        f"{text!r:.60}, not a string")
                exact += exact_match_score(prediction, gold)
                f1 += f1_score(prediction, gold)
    if total == 0:
        raise ValueError("the dataset has no questions")
    _warn_ids(missing, f"{len(missing)} of {total} questions have no prediction and score 0")
    extra = [qid for qid in predictions if qid not in seen]
    _warn_ids(extra, f"{len(extra)} predictions name no question of the dataset and are ignored")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}
