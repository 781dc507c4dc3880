"""How `TextClassifier` reads its inputs: rows of text and labels, checked at the door.

A classifier's `x` is single texts or `(texts, texts_b)` pairs, from lists, numpy arrays
or `tf.data` datasets (batched or not), and its `y` label names, ids, one-hot rows or
regression floats. `text_rows` turns any of them into one unbatched dataset of
`((texts...), target[, weight])` rows, checked before a step runs (an error names the
row), and records from the first fit whether the task reads pairs (`check_pair`).
"""

import numpy as np
import tensorflow as tf

from bert_keras.tasks import dataset_inputs
from bert_keras.tasks.dataset_inputs import to_python
from bert_keras.tasks.inputs import TaskInputError, check_lengths, check_sample_weight, float_target, float_targets
from bert_keras.tasks.inputs import (NO_TOKEN, EmptyTextError, label_id, label_ids, note_empty_text, note_text_column,
                                     one_hot_ids)
from bert_keras.tasks.inputs import stream_checked_composition, text_columns
from pipelines.tokenizer.tokenless import texts_without_token


def check_pair(task, pair, name="x"):
    """Checks the form of `x` (pairs or single texts) against the task's `text_pair`, fixed when
    the task was built."""
    if pair and not task.text_pair:
        raise TaskInputError(f"{name}: (texts, texts_b) pairs, but this classifier reads single texts: build "
                             "it with from_pretrained(..., text_pair=True) to read sentence pairs")
    if task.text_pair and not pair:
        raise TaskInputError(f"{name}: this classifier reads text pairs; pass x as a tuple (texts, texts_b)")


def read_texts(task, x, name="x"):
    """The text columns of `x` (one, or two for pairs), checked against the task's pair form."""
    columns = text_columns(x, name, task.tokenizer)
    check_pair(task, len(columns) == 2, name)
    return columns


def read_targets(task, y, count, name="y"):
    """`count` labels `y` as the task's targets: int32 class ids (names, name-like ints or
    one-hot rows) or, for regression, floats."""
    one_hot = None if task.is_regression else one_hot_ids(y, len(task.labels), name)
    if one_hot is not None:  # Keras' categorical labels: the class of each row
        y = [task.labels[i] for i in one_hot]
    y = check_lengths(count, y, y_name=name)
    if task.is_regression:
        return float_targets(y, name)
    return np.asarray(label_ids(y, task.labels, name), np.int32)


def text_rows(task, x, y, sample_weight, *, needs_y, in_memory=False):
    """`(unbatched dataset of ((texts...), target[, weight]), count)` from any form of `x`.

    Everything is checked here, before a step runs: texts, labels, weights. `in_memory`: the
    rows are read once (a `predict` / `evaluate` call): a dataset's rows of up to
    `READ_NOW_MAX_ROWS` are kept from the check's pass, not read from it again.
    """
    if isinstance(x, tf.data.Dataset):
        return dataset_rows(task, x, needs_y=needs_y, in_memory=in_memory)
    columns = read_texts(task, x)
    count = len(columns[0])
    if y is not None:
        target = read_targets(task, y, count)
    elif needs_y:
        raise TaskInputError("y: no labels given (fit and evaluate need y)")
    else:
        target = np.zeros(count, np.float32 if task.is_regression else np.int32)
    parts = (tuple(tf.constant(c) for c in columns), target)
    weights = check_sample_weight(sample_weight, count)
    if weights is not None:
        parts += (weights,)
    return tf.data.Dataset.from_tensor_slices(parts), count


def dataset_rows(task, dataset, *, needs_y, in_memory=False):
    """A dataset of raw texts (batched or not) as rows with label ids, read once to check it;
    `in_memory`: a finite one of at most `READ_NOW_MAX_ROWS` rows is kept from that pass (the
    rows of that one pass, in its order: a dataset that reshuffles is not read a second time)."""
    parts = dataset_inputs.element_parts(dataset.element_spec, x_is_tuple=bool(task.text_pair))
    rows = dataset_inputs.unbatched(dataset, parts, example_rank=0)
    if parts.has_y:
        rows = _scalar_labels(task, rows)
    text_spec = rows.element_spec[0]
    if isinstance(text_spec, tuple) and len(text_spec) == 1:
        rows = rows.map(lambda t, *rest: (t[0],) + rest)
        text_spec = text_spec[0]
    pair = isinstance(text_spec, tuple)
    if pair and len(text_spec) != 2:
        raise TaskInputError(f"x: a dataset's texts are a string or a pair (text, text_b), got a "
                             f"tuple of {len(text_spec)}")
    check_pair(task, pair)
    infinite = rows.cardinality() == tf.data.INFINITE_CARDINALITY
    if infinite and not needs_y:
        raise TaskInputError("x: an infinite dataset (.repeat()); predict and evaluate need a finite one")
    if needs_y and not parts.has_y:
        raise TaskInputError("x: the dataset has no labels; its elements must be (text, label) "
                             "or ((text, text_b), label)")
    if not needs_y and parts.has_y:  # predict ignores labels, as Keras does
        rows = rows.map(lambda texts, *_: (texts,))
        parts = dataset_inputs.ElementParts(False, False, True)
    # An infinite dataset (fit with steps_per_epoch) cannot be read through first: its
    # labels are checked as they stream (an unknown one stops training, naming it), and so is
    # decomposed Hangul (warned, naming the element, as the pass below does).
    count, kept = (None, None) if infinite else _check_dataset(task, rows, parts, keep=in_memory)
    if kept is not None:
        rows = kept
    if infinite:
        rows = stream_checked_composition(task.tokenizer, rows)
    to_id = task.preprocessor.label_ids if parts.has_y else None
    zero = tf.constant(0, tf.float32 if task.is_regression else tf.int32)

    @tf.autograph.experimental.do_not_convert  # graph code as written: no autograph pass when traced
    def normalise(texts, *rest):
        texts = texts if pair else (texts,)
        target = to_id(rest[0]) if to_id is not None else zero
        if to_id is not None and not task.is_regression:
            known = tf.debugging.assert_non_negative(target, message="y: a label the model does not know")
            with tf.control_dependencies([known] if known is not None else []):
                target = tf.identity(target)
        weights = tuple(tf.cast(w, tf.float32) for w in rest[1:])
        return (texts, target) + weights

    rows = rows.map(normalise, num_parallel_calls=tf.data.AUTOTUNE)
    if count is not None:
        rows = rows.apply(tf.data.experimental.assert_cardinality(count))
    return rows, count


def _scalar_labels(task, rows):
    """Rows whose label is one value: an `[N, 1]` label column (`text_dataset_from_directory(
    label_mode="binary")`) squeezed, Keras' one-hot rows (`label_mode="categorical"`) read as
    their class name (a row that is not one-hot as a name no class has, refused by the door check)."""
    spec = rows.element_spec[1]
    if spec.shape.rank != 1:
        return rows
    if spec.shape[0] == 1:
        return rows.map(lambda x, y, *rest: (x, tf.reshape(y, [])) + rest)
    width = len(task.labels or ())
    if task.is_regression or spec.shape[0] != width or not (spec.dtype.is_integer or spec.dtype.is_floating):
        return rows
    names = tf.constant(task.labels)

    def class_name(x, y, *rest):
        y = tf.cast(y, tf.float32)
        one_hot = tf.logical_and(tf.reduce_sum(tf.cast(tf.equal(y, 1.0), tf.int32)) == 1,
                                 tf.reduce_all(tf.logical_or(tf.equal(y, 0.0), tf.equal(y, 1.0))))
        shown = tf.strings.join(["[", tf.strings.reduce_join(tf.strings.as_string(y, precision=3),
                                                              separator=", "), "] is not a one-hot row"])
        return (x, tf.where(one_hot, tf.gather(names, tf.argmax(y)), shown)) + rest

    return rows.map(class_name)


def _check_dataset(task, rows, parts, *, keep=False):
    """One pass over the texts, labels and weights of a dataset: the door checks; `(its size, the
    rows as a dataset of what the pass read, or None)`: kept if `keep` and the rows are at most
    `READ_NOW_MAX_ROWS` plain tensors."""
    from pipelines.datasets.batching import READ_NOW_MAX_ROWS

    count = 0
    kept = [] if keep and all(type(spec) is tf.TensorSpec for spec in tf.nest.flatten(rows.element_spec)) else None
    for chunk in rows.batch(8192).as_numpy_iterator():
        if kept is not None and count + len(tf.nest.flatten(chunk)[0]) <= READ_NOW_MAX_ROWS:
            kept.append(chunk)
        else:
            kept = None
        texts = chunk[0] if isinstance(chunk[0], tuple) else (chunk[0],)
        for column_index, column in enumerate(texts):
            # The one rule of `text_list` (pipelines.tokenizer.tokenless, by this task's
            # tokenizer): a text of whitespace, control or format characters only ("\u200b"),
            # or for an uncased model of combining marks only, has no token.
            column_name = "" if len(texts) == 1 else f"[{column_index}]"
            note_text_column(f"x{column_name}")
            raw = column.ravel().tolist()
            # decomposed Hangul a Korean vocabulary reads as [UNK]: warned once, in this same pass
            if hasattr(task.tokenizer, "check_composition"):
                task.tokenizer.check_composition(raw, f"x{column_name}", first=count)
            strings = [text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text) for text in raw]
            empty = next((i for i in texts_without_token(strings, task.tokenizer)
                          if not note_empty_text(f"x{column_name}", count + i)), None)
            if empty is not None:
                raise EmptyTextError(f"x{column_name}: element {count + empty} of the dataset is an empty "
                                     f"text ({NO_TOKEN})", f"x{column_name}", count + empty)
        size = len(texts[0])
        if parts.has_y:
            names = [f"y (dataset element {count + i})" for i in range(size)]
            labels = [to_python(v, name) for v, name in zip(chunk[1].tolist(), names)]
            if task.is_regression:
                for name, value in zip(names, labels):
                    float_target(value, name)
            else:
                index = {label: i for i, label in enumerate(task.labels)}
                for name, value in zip(names, labels):
                    label_id(value, index, name)
        if parts.has_weight:
            check_sample_weight(np.reshape(chunk[2], [-1]), size, f"sample_weight (dataset elements {count}..)")
        count += size
    if count == 0:
        raise TaskInputError("x: an empty dataset")
    if kept is None:
        return count, None
    columns = tf.nest.map_structure(lambda *pieces: np.concatenate(pieces), *kept)
    return count, tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(
        lambda spec, column: tf.constant(column, spec.dtype), rows.element_spec, columns))
