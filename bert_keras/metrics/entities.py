"""Entity-level precision, recall and F1 for tagging tasks (NER), as conlleval / seqeval.

Token tags are grouped into entity spans, and an entity counts as correct only
when its type, first and last token all match a gold entity. The chunking
rules are those of the CoNLL `conlleval` script, which seqeval's default mode
(`mode=None`) reproduces; one set of rules reads all of these schemes:

* IOB2 / BIO: `B-X` begins an entity, `I-X` continues it;
* IOB1: `I-X` begins an entity unless it continues one of type X, `B-X` only
  separates two adjacent entities of the same type;
* IOBES: adds `E-X` (end) and `S-X` (single token).

Malformed sequences are read leniently, as conlleval does: an `I-X` after `O`
or after another type starts a new entity.

Example:
    >>> from bert_keras.metrics.entities import entity_scores
    >>> y_true = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    >>> y_pred = [["B-PER", "I-PER", "O", "B-ORG"], ["O", "B-ORG"]]
    >>> entity_scores(y_true, y_pred)  # doctest: +ELLIPSIS
    {'precision': 0.666..., 'recall': 0.666..., 'f1': 0.666...}
"""

import collections


def _split_tag(tag):
    """`"B-PER"` -> `("B", "PER")`; a tag without a type (e.g. `"O"`) gets the type `"_"`, as seqeval."""
    return tag[:1], tag[1:].split("-", maxsplit=1)[-1] or "_"


def _ends_chunk(prev_tag, tag, prev_type, type_):
    """True when the entity open at the previous token ends there (conlleval's endOfChunk)."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    # "." is conlleval's sentence-boundary tag, neither inside nor outside.
    return prev_tag not in ("O", ".") and prev_type != type_


def _starts_chunk(prev_tag, tag, prev_type, type_):
    """True when a new entity starts at the current token (conlleval's startOfChunk)."""
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def get_entities(tags):
    """The entity spans of one tag sequence: `[(type, first_index, last_index), ...]`.

    Example:
        >>> get_entities(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "S-ORG"])
        [('PER', 0, 1), ('LOC', 3, 3), ('LOC', 4, 4), ('ORG', 5, 5)]

    Args:
        tags: one sentence's tags, e.g. `["B-PER", "I-PER", "O"]` (prefix style:
            the scheme letter, a dash, the type).

    Returns:
        The spans in order of their end; indices are inclusive and 0-based.
    """
    entities = []
    prev_tag, prev_type, begin = "O", "", 0
    # A trailing "O" closes an entity that runs to the end of the sentence.
    for i, chunk in enumerate(list(tags) + ["O"]):
        tag, type_ = _split_tag(chunk)
        if _ends_chunk(prev_tag, tag, prev_type, type_):
            entities.append((prev_type, begin, i - 1))
        if _starts_chunk(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return entities


def _entity_sets(sentences, name):
    """`{type: {(sentence_index, first, last), ...}}` over a corpus of tag sequences."""
    by_type = collections.defaultdict(set)
    for index, tags in enumerate(sentences):
        if isinstance(tags, str):
            raise ValueError(f"{name} must be a list of tag sequences (one per sentence), got a string at {index}")
        for type_, first, last in get_entities(tags):
            by_type[type_].add((index, first, last))
    return by_type


def _counts(y_true, y_pred):
    """`{type: (true_positives, predicted, gold)}`, types sorted, after checking the inputs line up."""
    y_true, y_pred = list(y_true), list(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError(
            f"y_true and y_pred must have the same number of sentences, got {len(y_true)} and {len(y_pred)}"
        )
    for index, (gold, predicted) in enumerate(zip(y_true, y_pred)):
        if len(gold) != len(predicted):
            raise ValueError(
                f"sentence {index} has {len(gold)} gold tags but {len(predicted)} predicted tags"
            )
    gold = _entity_sets(y_true, "y_true")
    predicted = _entity_sets(y_pred, "y_pred")
    return {
        type_: (len(gold[type_] & predicted[type_]), len(predicted[type_]), len(gold[type_]))
        for type_ in sorted(set(gold) | set(predicted))
    }


def _scores(true_positives, predicted, gold):
    """Precision, recall, F1 from counts; 0.0 for a 0/0 (seqeval's default zero_division)."""
    precision = true_positives / predicted if predicted else 0.0
    recall = true_positives / gold if gold else 0.0
    # F1 from precision and recall (not from counts) so the float rounding matches seqeval's.
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def entity_scores(y_true, y_pred):
    """Micro-averaged entity precision, recall and F1 over a corpus (seqeval's default scores).

    Example:
        >>> entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
        {'precision': 0.0, 'recall': 0.0, 'f1': 0.0}

    Args:
        y_true: gold tags, a list of sentences, each a list of tag strings.
        y_pred: predicted tags, the same shape.

    Returns:
        `{"precision", "recall", "f1"}` as floats in [0, 1]; 0.0 where undefined
        (no predicted or no gold entities).
    """
    counts = _counts(y_true, y_pred).values()
    totals = [sum(column) for column in zip(*counts)] or [0, 0, 0]
    precision, recall, f1 = _scores(*totals)
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_classification_report(y_true, y_pred):
    """Per-type and averaged scores, as `seqeval.metrics.classification_report(output_dict=True)`.

    Example:
        >>> report = entity_classification_report([["B-PER", "O", "B-LOC"]], [["B-PER", "O", "O"]])
        >>> report["PER"]
        {'precision': 1.0, 'recall': 1.0, 'f1-score': 1.0, 'support': 1}
        >>> report["micro avg"]
        {'precision': 1.0, 'recall': 0.5, 'f1-score': 0.6666666666666666, 'support': 2}

    Args:
        y_true: gold tags, a list of sentences, each a list of tag strings.
        y_pred: predicted tags, the same shape.

    Returns:
        `{type: row, ..., "micro avg": row, "macro avg": row, "weighted avg": row}`
        where a row is `{"precision", "recall", "f1-score", "support"}` and
        support is the number of gold entities. Types are sorted; macro is the
        plain mean over types (NaN when there are no entities at all, as
        seqeval), weighted is weighted by support.
    """
    counts = _counts(y_true, y_pred)
    report = {}
    for type_, (true_positives, predicted, gold) in counts.items():
        report[type_] = _row(*_scores(true_positives, predicted, gold), gold)
    totals = [sum(column) for column in zip(*counts.values())] or [0, 0, 0]
    report["micro avg"] = _row(*_scores(*totals), totals[2])
    rows = [report[type_] for type_ in counts]
    support = totals[2]
    report["macro avg"] = _row(*(_mean([row[key] for row in rows]) for key in _KEYS), support)
    if support == 0:
        # No gold entities: weights are all zero; seqeval returns 0.0 then (zero_division="warn").
        report["weighted avg"] = _row(0.0, 0.0, 0.0, 0)
    else:
        report["weighted avg"] = _row(
            *(sum(row[key] * row["support"] for row in rows) / support for key in _KEYS), support
        )
    return report


_KEYS = ("precision", "recall", "f1-score")


def _row(precision, recall, f1, support):
    return {"precision": precision, "recall": recall, "f1-score": f1, "support": support}


def _mean(values):
    return sum(values) / len(values) if values else float("nan")
