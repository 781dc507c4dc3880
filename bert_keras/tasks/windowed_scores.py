"""A long text's one row of scores from its windows: their mean, max, or the evidence windows.

`TextClassifier` reads a long text in windows and puts it back together here. With
`window_aggregation="mean"` / `"max"` a text gets its windows' mean or per-class max logits.
With `"evidence"`, `fit_statistics` (`TextClassifier.fit_window_statistics`, an explicit call
once the weights are final) fits the Mahalanobis statistics of the training windows (`bert_keras.models.window_relevance`); a prediction then measures each
window's distance to them in the same pass as its logits, and a text whose windows read
unlike the training texts is read again sentence by sentence (`evidence_logits`).
"""

import numpy as np
import tensorflow as tf

from bert_keras.models.window_relevance import NOT_FITTED, closest_sentences, evidence_logits
from bert_keras.models.window_relevance import sentence_end_ids, sentence_reading
from bert_keras.tasks.inputs import TaskInputError
from bert_keras.tasks.window_outputs import window_outputs

# Training windows the evidence statistics are fitted on, at most (one inference pass over them).
EVIDENCE_WINDOWS = 20_000


def fitted_relevance(task):
    """The head's fitted `WindowRelevance` (`window_aggregation="evidence"`), else None."""
    relevance = getattr(task.head, "window_relevance", None)
    return relevance if relevance is not None and relevance.fitted else None


def fit_statistics(task, dataset, steps):
    """`window_aggregation="evidence"`: the training windows' statistics, once the weights are
    final (`bert_keras.models.window_relevance`). Each window counts under the class the
    model predicts for it, so unlabelled data fits them as well."""
    relevance = task.head.window_relevance
    features, classes, count = [], [], 0
    for inputs in dataset.map(lambda x, *_: x).take(max(1, steps or 1)):
        logits, batch_features = _logits_and_features(task)(inputs)
        features.append(batch_features.numpy())
        classes.append(np.zeros(len(features[-1]), np.int64) if task.is_regression
                       else np.argmax(logits.numpy(), axis=-1))
        count += len(features[-1])
        if count >= EVIDENCE_WINDOWS:
            break
    relevance.fit_statistics(np.concatenate(features), np.concatenate(classes))


def text_outputs(task, dataset, batch_size):
    """`(outputs, windows)`: one row per text (`aggregate_windows`) from a dataset of windows
    with their marks, and the pass's `WindowOutputs` (labels, starts, truncated)."""
    relevance = fitted_relevance(task)
    # Validation inside `fit` reads an evidence model's windows by their mean until its statistics
    # are fitted (after training, by `fit_window_statistics`); any other call refuses.
    if relevance is None and task._record.settings.get("window_aggregation") == "evidence" \
            and not getattr(task, "fitting", False):
        raise TaskInputError(NOT_FITTED)
    if relevance is not None:  # logits and distances in one pass
        windows = window_outputs(task, dataset, outputs_of=lambda windows: _logits_and_distances(task, windows))
        logits, distances, pieces = windows.outputs
        reading = _sentence_reading(task, pieces, windows.starts, batch_size) if relevance.reads_sentences else None
        return aggregate_windows(task, logits, windows.starts, distances, reading), windows
    windows = window_outputs(task, dataset)
    return aggregate_windows(task, windows.outputs, windows.starts), windows


def aggregate_windows(task, outputs, starts, distances=None, reading=None):
    """One row per text from its consecutive windows' rows (`starts`: each text's first)."""
    if distances is not None:  # one window or many: a far text is read by its sentences
        document = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(outputs))))
        return evidence_logits(tf.constant(outputs, tf.float64), tf.constant(distances, tf.float64),
                               tf.cast(fitted_relevance(task).threshold, tf.float64), tf.constant(document, tf.int64),
                               reading).numpy()
    if len(starts) == len(outputs):
        return outputs
    if task._record.settings.get("window_aggregation", "mean") == "max":
        return np.maximum.reduceat(outputs, starts, axis=0)
    counts = np.diff(np.append(starts, len(outputs))).reshape((-1,) + (1,) * (outputs.ndim - 1))
    return np.add.reduceat(outputs.astype(np.float64), starts, axis=0) / counts


def _logits_and_features(task):
    """`head.logits_and_features`, traced (cached on the task, untracked: not saved)."""
    function = task.__dict__.get("_logits_and_features_function")
    if function is None:
        function = tf.function(task.head.logits_and_features, reduce_retracing=True)
        task.__dict__["_logits_and_features_function"] = function
    return function


def _logits_and_distances(task, dataset):
    """`(logits, distances, pieces)` of every batch of windows of `dataset`, in one pass:
    numpy `[windows, ...]` and each window's real pieces (`tf.RaggedTensor`, for its sentences)."""
    relevance = fitted_relevance(task)
    logits, distances, pieces = [], [], []
    for inputs in dataset.map(lambda x, *_: x):
        batch_logits, features = _logits_and_features(task)(inputs)
        logits.append(batch_logits.numpy())
        distances.append(relevance.distances_of(features).numpy())
        pieces.append(tf.RaggedTensor.from_tensor(tf.cast(inputs["token_ids"], tf.int32),
                                                  lengths=tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.int32), -1)))
    return np.concatenate(logits), np.concatenate(distances), tf.concat(pieces, axis=0)


def _sentence_reading(task, pieces, starts, batch_size):
    """`sentence_reading` of `evidence_logits`: the sentences of the given texts, each read
    alone (`closest_sentences`), over `pieces` (each window's real pieces; `starts`: each
    text's first window), `batch_size` texts at a time."""
    window, stride, _ = task.window_options()
    document = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, pieces.nrows().numpy())))

    def windows_of(index):
        windows = tf.gather(pieces, index)
        return {"token_ids": windows.to_tensor(0), "padding_mask": tf.ones_like(windows).to_tensor(0)}

    read = sentence_reading(lambda windows, text: _closest_sentences(task)(windows, text, window, min(window, stride)),
                            windows_of, document)

    def reading(far):
        if not len(far):  # no far text: nothing to read (an empty batch of windows has no width)
            return [tf.zeros([0], tf.float64)] * 3
        outputs = [read(far[start:start + batch_size]) for start in range(0, len(far), batch_size)]
        return [tf.concat(values, 0) for values in zip(*outputs)]

    return reading


def _closest_sentences(task):
    """`closest_sentences` of this model, traced (cached on the task, untracked: not saved)."""
    function = task.__dict__.get("_closest_sentences_function")
    if function is None:
        end_ids = tf.constant(sentence_end_ids(task.tokenizer.vocabulary), tf.int32)

        def run(inputs):
            logits, features = task.head.logits_and_features(inputs)
            return logits, task.head.window_relevance.distances_of(features)

        def closest(windows, text, window, step):
            return closest_sentences(run, windows, text, window, step, end_ids, task.head.window_relevance.typical)

        function = tf.function(closest, reduce_retracing=True)
        task.__dict__["_closest_sentences_function"] = function
    return function
