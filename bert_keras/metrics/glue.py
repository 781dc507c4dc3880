"""The GLUE benchmark's metric for each task, and the summary table with the GLUE average.

| task                               | metrics (all in [0, 1])                          | task score          |
|------------------------------------|--------------------------------------------------|---------------------|
| cola                               | mcc (Matthews correlation)                       | mcc                 |
| sst2, qnli, rte, wnli              | accuracy                                         | accuracy            |
| mnli, mnli_matched, mnli_mismatched| accuracy                                         | accuracy            |
| mrpc, qqp                          | accuracy, f1 (label 1 positive), accuracy_and_f1 | accuracy_and_f1     |
| stsb                               | pearson, spearman, pearson_and_spearman          | pearson_and_spearman|

The task score is what the GLUE leaderboard averages: a task with two
metrics contributes their mean. `mnli` is the matched dev/test set; the BERT
paper reports matched and mismatched as two columns and both enter its
average, while WNLI is left out of it ("the problematic WNLI set").

Example:
    >>> from bert_keras.metrics.glue import glue_metrics, format_glue_table
    >>> glue_metrics("mrpc", predictions=[1, 1, 0, 1], labels=[1, 0, 0, 1])
    {'accuracy': 0.75, 'f1': 0.8, 'accuracy_and_f1': 0.775}
    >>> print(format_glue_table({"sst2": {"accuracy": 0.935}, "rte": {"accuracy": 0.664}}))
    task               score  metrics
    sst2                93.5  accuracy=93.5
    rte                 66.4  accuracy=66.4
    ----------------------------------------
    GLUE average        80.0  (2 tasks)
"""

from bert_keras.metrics.classification import accuracy, f1, matthews_corrcoef, pearson, spearman


def _mcc(predictions, labels):
    return {"mcc": matthews_corrcoef(labels, predictions)}


def _accuracy(predictions, labels):
    return {"accuracy": accuracy(labels, predictions)}


def _accuracy_and_f1(predictions, labels):
    scores = {"accuracy": accuracy(labels, predictions), "f1": f1(labels, predictions, pos_label=1)}
    scores["accuracy_and_f1"] = (scores["accuracy"] + scores["f1"]) / 2
    return scores


def _pearson_and_spearman(predictions, labels):
    scores = {"pearson": pearson(labels, predictions), "spearman": spearman(labels, predictions)}
    scores["pearson_and_spearman"] = (scores["pearson"] + scores["spearman"]) / 2
    return scores


# task -> (function of (predictions, labels), name of the task score in its output).
# Listed in the GLUE paper's column order, which format_glue_table keeps.
TASKS = {
    "cola": (_mcc, "mcc"),
    "sst2": (_accuracy, "accuracy"),
    "mrpc": (_accuracy_and_f1, "accuracy_and_f1"),
    "stsb": (_pearson_and_spearman, "pearson_and_spearman"),
    "qqp": (_accuracy_and_f1, "accuracy_and_f1"),
    "mnli": (_accuracy, "accuracy"),
    "mnli_matched": (_accuracy, "accuracy"),
    "mnli_mismatched": (_accuracy, "accuracy"),
    "qnli": (_accuracy, "accuracy"),
    "rte": (_accuracy, "accuracy"),
    "wnli": (_accuracy, "accuracy"),
}

# The BERT paper's average leaves WNLI out (every submitted system scored at or below the majority class).
EXCLUDED_FROM_AVERAGE = ("wnli",)


def _check_task(task):
    if task not in TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; known tasks: {', '.join(TASKS)}")


def glue_metrics(task, predictions, labels):
    """The GLUE metrics of one task.

    Example:
        >>> glue_metrics("cola", predictions=[1, 1, 0, 0], labels=[1, 0, 0, 0])  # doctest: +ELLIPSIS
        {'mcc': 0.577...}
        >>> sorted(glue_metrics("stsb", [0.5, 2.0, 4.5], [1.0, 2.5, 5.0]))
        ['pearson', 'pearson_and_spearman', 'spearman']

    Args:
        task: a GLUE task name (lowercase, e.g. `"cola"`, `"sst2"`, `"mnli_mismatched"`).
        predictions: predicted class ids (float scores for `stsb`).
        labels: gold class ids (float scores for `stsb`), same length.

    Returns:
        `{metric_name: value}` with values in [0, 1] (correlations in [-1, 1]);
        see the module docstring for the names of each task.
    """
    _check_task(task)
    compute, _ = TASKS[task]
    return compute(predictions, labels)


def task_score(task, metrics):
    """The single number a task contributes to the GLUE average.

    Example:
        >>> task_score("mrpc", {"accuracy": 0.85, "f1": 0.89, "accuracy_and_f1": 0.87})
        0.87
        >>> task_score("mrpc", {"accuracy": 0.85, "f1": 0.89})  # the mean is derived if absent
        0.87
        >>> task_score("cola", {"matthews_corrcoef": 0.52})  # sklearn's name, as `score` reports it
        0.52

    Args:
        task: a GLUE task name.
        metrics: that task's `glue_metrics` output.

    Returns:
        The task score (a float in [0, 1]).
    """
    _check_task(task)
    _, main = TASKS[task]
    if main in metrics:
        return metrics[main]
    # A classifier's `score` (and so `bert-keras finetune` / `evaluate` on glue/cola) names CoLA's
    # metric `matthews_corrcoef`, sklearn's name, not this table's `mcc`.
    if main == "mcc" and "matthews_corrcoef" in metrics:
        return metrics["matthews_corrcoef"]
    # Results written by other tools may carry only the two component metrics.
    if main == "accuracy_and_f1":
        return (metrics["accuracy"] + metrics["f1"]) / 2
    if main == "pearson_and_spearman":
        return (metrics["pearson"] + metrics["spearman"]) / 2
    raise KeyError(f"metrics of {task!r} have no {main!r}: got {sorted(metrics)}")


def glue_average(results, exclude=EXCLUDED_FROM_AVERAGE):
    """Unweighted mean of the task scores, as the BERT paper's "Average" column.

    Example:
        >>> glue_average({"sst2": {"accuracy": 0.9}, "rte": {"accuracy": 0.7}, "wnli": {"accuracy": 0.1}})
        0.8

    Args:
        results: `{task: metrics}` for any subset of the GLUE tasks.
        exclude: tasks left out of the average (WNLI by default, as the paper).

    Returns:
        The average in [0, 1]; NaN if no task is left to average.
    """
    scores = [task_score(task, metrics) for task, metrics in results.items() if task not in exclude]
    return sum(scores) / len(scores) if scores else float("nan")


def format_glue_table(results, exclude=EXCLUDED_FROM_AVERAGE):
    """A fixed-width text table of GLUE results (as percentages) with the GLUE average.

    Example:
        >>> print(format_glue_table({
        ...     "cola": {"mcc": 0.521},
        ...     "stsb": {"pearson": 0.871, "spearman": 0.858},
        ...     "wnli": {"accuracy": 0.563}}))
        task               score  metrics
        cola                52.1  mcc=52.1
        stsb                86.5  pearson=87.1 spearman=85.8
        wnli                56.3  accuracy=56.3
        ----------------------------------------
        GLUE average        69.3  (2 tasks; wnli excluded)

    Args:
        results: `{task: metrics}` as returned by `glue_metrics`, any subset of tasks.
        exclude: tasks shown but left out of the average.

    Returns:
        The table as one string (no trailing newline); rows in the GLUE paper's order.
    """
    for task in results:
        _check_task(task)
    lines = [f"{'task':<17}{'score':>7}  metrics"]
    for task in (t for t in TASKS if t in results):
        metrics = results[task]
        # The derived means are the score column already; list only the measured metrics.
        shown = " ".join(
            f"{name}={100 * value:.1f}"
            for name, value in metrics.items()
            if name not in ("accuracy_and_f1", "pearson_and_spearman")
        )
        lines.append(f"{task:<17}{100 * task_score(task, metrics):>7.1f}  {shown}")
    averaged = [task for task in results if task not in exclude]
    excluded = [task for task in results if task in exclude]
    note = f"{len(averaged)} task{'s' if len(averaged) != 1 else ''}"
    if excluded:
        note += f"; {', '.join(excluded)} excluded"
    lines.append("-" * 40)
    lines.append(f"{'GLUE average':<17}{100 * glue_average(results, exclude):>7.1f}  ({note})")
    return "\n".join(lines)
