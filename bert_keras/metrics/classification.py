"""Classification and regression metrics of the GLUE tasks, as plain functions.

Each function takes two equally long sequences (gold first, prediction second,
the order sklearn and scipy use) and returns a Python float. They reproduce:

* `accuracy`            -> `sklearn.metrics.accuracy_score`
* `f1`                  -> `sklearn.metrics.f1_score` (binary / macro / micro)
* `matthews_corrcoef`   -> `sklearn.metrics.matthews_corrcoef` (any number of classes)
* `pearson`             -> `scipy.stats.pearsonr(...).statistic`
* `spearman`            -> `scipy.stats.spearmanr(...).statistic` (average ranks for ties)

Only numpy is needed, so evaluation scripts do not have to pull in sklearn or
scipy (they are test-only dependencies of this project).

Example:
    >>> from bert_keras.metrics.classification import accuracy, f1, matthews_corrcoef
    >>> accuracy([1, 0, 1, 1], [1, 0, 0, 1])
    0.75
    >>> round(f1([1, 0, 1, 1], [1, 0, 0, 1]), 4)
    0.8
    >>> round(matthews_corrcoef([1, 0, 1, 1], [1, 0, 0, 1]), 4)
    0.5774
"""

import numbers

import numpy as np

F1_AVERAGES = ("binary", "macro", "micro")


def _check_pair(y_true, y_pred, name_true="y_true", name_pred="y_pred"):
    """Turns both inputs into 1-D arrays and checks they are non-empty and equally long."""
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.ndim != 1 or y_pred.ndim != 1:
        raise ValueError(
            f"{name_true} and {name_pred} must be 1-D sequences, got shapes {y_true.shape} and {y_pred.shape}"
        )
    if len(y_true) != len(y_pred):
        raise ValueError(
            f"{name_true} and {name_pred} must have the same length, got {len(y_true)} and {len(y_pred)}"
        )
    if len(y_true) == 0:
        raise ValueError(f"{name_true} and {name_pred} are empty: a metric needs at least one example")
    return y_true, y_pred


def _check_labels(y_true, y_pred):
    """`_check_pair` for class labels, which must be all strings or all numbers, as sklearn requires.

    numpy compares the string "1" and the number 1 as unequal, so gold labels read from a file as
    text against predicted class ids would score 0 without a word.
    """
    y_true, y_pred = _check_pair(y_true, y_pred)
    kinds = {"y_true": _label_kind(y_true), "y_pred": _label_kind(y_pred)}
    if None not in kinds.values() and len(set(kinds.values())) == 2 or "strings and numbers" in kinds.values():
        raise ValueError(
            f"y_true holds {kinds['y_true']} ({y_true[:1].tolist()[0]!r}, ...) but y_pred {kinds['y_pred']} "
            f"({y_pred[:1].tolist()[0]!r}, ...): give both as class names or both as class ids"
        )
    return y_true, y_pred


def _label_kind(labels):
    """"strings", "numbers", "strings and numbers", or None (other values); an object array (a
    pandas column of text) by its values."""
    if labels.dtype.kind in "US":
        return "strings"
    if labels.dtype.kind in "biuf":
        return "numbers"
    kinds = {"strings" if isinstance(value, str) else "numbers" if isinstance(value, numbers.Number) else None
             for value in labels.tolist()}
    if None in kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else "strings and numbers"


def accuracy(y_true, y_pred):
    """Fraction of positions where the prediction equals the label.

    Example:
        >>> accuracy(["a", "b", "c"], ["a", "b", "b"])  # doctest: +ELLIPSIS
        0.666...

    Args:
        y_true: gold labels (any hashable, comparable values: ints, strings).
        y_pred: predicted labels, same length.

    Returns:
        A float in [0, 1].
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    return float(np.count_nonzero(y_true == y_pred) / len(y_true))


def _f1_from_counts(tp, fp, fn):
    """F1 = 2 tp / (2 tp + fp + fn); 0.0 when there is nothing to score (sklearn's zero_division=0)."""
    denominator = 2 * tp + fp + fn
    return 0.0 if denominator == 0 else float(2 * tp / denominator)


def f1(y_true, y_pred, average="binary", pos_label=1):
    """F1 score (harmonic mean of precision and recall), as `sklearn.metrics.f1_score`.

    `"binary"` scores only `pos_label` (MRPC and QQP report this, with label 1
    = paraphrase / duplicate). `"macro"` is the unweighted mean of per-class F1
    over every label seen in either input; `"micro"` pools the counts of all
    classes (for single-label multi-class data it equals accuracy). A class
    with neither true nor predicted examples gets F1 = 0.0, as sklearn's
    default (which also warns).

    Example:
        >>> f1([0, 1, 1, 0], [0, 1, 0, 0])  # doctest: +ELLIPSIS
        0.666...
        >>> round(f1([0, 1, 2, 2], [0, 2, 2, 1], average="macro"), 4)
        0.5

    Args:
        y_true: gold labels.
        y_pred: predicted labels, same length.
        average: `"binary"`, `"macro"` or `"micro"`.
        pos_label: the positive class for `average="binary"`.

    Returns:
        A float in [0, 1].
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    if average not in F1_AVERAGES:
        raise ValueError(f"average must be one of {F1_AVERAGES}, got {average!r}")
    labels = np.unique(np.concatenate([y_true, y_pred]))
    if average == "binary":
        if len(labels) > 2:
            raise ValueError(
                f"average='binary' needs at most 2 labels, got {len(labels)}: {labels.tolist()}; "
                "use average='macro' or 'micro' for multi-class data"
            )
        if len(labels) == 2 and pos_label not in labels:
            raise ValueError(f"pos_label={pos_label!r} is not one of the labels {labels.tolist()}")
        tp = np.count_nonzero((y_true == pos_label) & (y_pred == pos_label))
        fp = np.count_nonzero((y_true != pos_label) & (y_pred == pos_label))
        fn = np.count_nonzero((y_true == pos_label) & (y_pred != pos_label))
        return _f1_from_counts(tp, fp, fn)
    counts = [
        (
            np.count_nonzero((y_true == label) & (y_pred == label)),
            np.count_nonzero((y_true != label) & (y_pred == label)),
            np.count_nonzero((y_true == label) & (y_pred != label)),
        )
        for label in labels
    ]
    if average == "micro":
        tp, fp, fn = (sum(column) for column in zip(*counts))
        return _f1_from_counts(tp, fp, fn)
    return float(np.mean([_f1_from_counts(*c) for c in counts]))


def matthews_corrcoef(y_true, y_pred):
    """Matthews correlation coefficient (the CoLA metric), multi-class as sklearn.

    The general (Gorodkin, 2004) form, computed from the confusion matrix C
    with t = row sums, p = column sums, c = trace, s = total:

        MCC = (c s - t.p) / sqrt((s^2 - p.p) (s^2 - t.t))

    For two classes this is the familiar (TP TN - FP FN) / sqrt(...). When
    either variance term is zero (e.g. the model predicts one class for every
    sentence, a common failure on CoLA) the result is 0.0, as sklearn.

    Example:
        >>> round(matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0]), 4)
        0.5774
        >>> matthews_corrcoef([1, 1, 0, 0], [1, 1, 1, 1])
        0.0

    Args:
        y_true: gold labels.
        y_pred: predicted labels, same length.

    Returns:
        A float in [-1, 1].
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    labels, encoded = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    n = len(y_true)
    confusion = np.zeros((len(labels), len(labels)), dtype=np.int64)
    np.add.at(confusion, (encoded[:n], encoded[n:]), 1)
    # float64 before the products: s^2 overflows int64 long before it matters for floats.
    true_sum = confusion.sum(axis=1, dtype=np.float64)
    pred_sum = confusion.sum(axis=0, dtype=np.float64)
    correct = np.trace(confusion, dtype=np.float64)
    samples = pred_sum.sum()
    cov_true_pred = correct * samples - np.dot(true_sum, pred_sum)
    cov_pred_pred = samples**2 - np.dot(pred_sum, pred_sum)
    cov_true_true = samples**2 - np.dot(true_sum, true_sum)
    if cov_pred_pred * cov_true_true == 0:
        return 0.0
    return float(cov_true_pred / np.sqrt(cov_true_true * cov_pred_pred))


def _check_scores(x, y):
    x, y = _check_pair(x, y, "x", "y")
    if len(x) < 2:
        raise ValueError(f"a correlation needs at least 2 points, got {len(x)}")
    return x.astype(np.float64), y.astype(np.float64)


def _correlation(x, y):
    """Pearson r of two float64 arrays; NaN when either is constant (as scipy, which also warns)."""
    # Constant by equality, as scipy tests it: centring by the rounded mean leaves a constant
    # like [0.1, 0.1, 0.1] a hair off zero, which would score ~0 instead of NaN.
    if (x == x[0]).all() or (y == y[0]).all():
        return float("nan")
    x = x - x.mean()
    y = y - y.mean()
    # Scale by the largest magnitude first so the norms cannot overflow or underflow.
    x_max, y_max = np.max(np.abs(x)), np.max(np.abs(y))
    x = x / x_max
    y = y / y_max
    r = np.dot(x / np.linalg.norm(x), y / np.linalg.norm(y))
    # Rounding can push |r| a hair above 1.
    return float(min(max(r, -1.0), 1.0))


def pearson(x, y):
    """Pearson correlation coefficient (an STS-B metric), as `scipy.stats.pearsonr`.

    Example:
        >>> round(pearson([1.0, 2.0, 3.0, 4.0], [1.1, 1.9, 3.2, 3.8]), 4)
        0.9908

    Args:
        x: gold scores (e.g. STS-B similarity in [0, 5]).
        y: predicted scores, same length (at least 2).

    Returns:
        A float in [-1, 1]; NaN if either input is constant (the correlation is undefined)
        or holds a NaN.
    """
    x, y = _check_scores(x, y)
    return _correlation(x, y)


def rank_average(values):
    """1-based ranks where tied values share the mean of their ranks (`scipy.stats.rankdata`).

    Example:
        >>> rank_average([10, 20, 20, 5]).tolist()
        [2.0, 3.5, 3.5, 1.0]

    Args:
        values: a 1-D sequence of numbers.

    Returns:
        A float64 array of the same length; all NaN if a value is NaN (scipy's
        `nan_policy="propagate"`), so a NaN prediction cannot earn a rank.
    """
    values = np.asarray(values)
    if values.dtype.kind in "fc" and np.isnan(values).any():
        return np.full(len(values), np.nan)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Start index of every run of equal values, plus the end sentinel.
    starts = np.flatnonzero(np.concatenate([[True], sorted_values[1:] != sorted_values[:-1], [True]]))
    # A run covering sorted positions [a, b) holds ranks a+1 .. b, whose mean is (a + 1 + b) / 2.
    run_ranks = (starts[:-1] + 1 + starts[1:]) / 2.0
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(run_ranks, np.diff(starts))
    return ranks


def spearman(x, y):
    """Spearman rank correlation (an STS-B metric), as `scipy.stats.spearmanr`.

    The Pearson correlation of the average ranks, so ties are handled as scipy does.

    Example:
        >>> spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 100.0])
        1.0

    Args:
        x: gold scores.
        y: predicted scores, same length (at least 2).

    Returns:
        A float in [-1, 1]; NaN if either input is constant or holds a NaN (as scipy).
    """
    x, y = _check_scores(x, y)
    return _correlation(rank_average(x), rank_average(y))
