"""A predict pass over the windows of long texts, with each window's marks (`pipelines.windowing`).

A family that reads long texts in windows (classification, NER, embeddings) predicts every
window, then puts each text back together from its windows: `window_outputs` gives the head's
outputs per window with which text each belongs to (`starts`), which texts were read only in
part (`truncated`) and each window's real tokens; `warn_truncated` makes truncation loud.
"""

import dataclasses
import warnings
from typing import Any

import numpy as np
import tensorflow as tf

from bert_keras.tasks.dataset_inputs import without_autotune_thread
from bert_keras.tasks.task_batches import predicted_outputs
from pipelines.tensorflow_logs import caller_stacklevel


@dataclasses.dataclass(frozen=True)
class WindowOutputs:
    """A predict pass over windows of texts (`window_outputs`).

    Attributes:
        outputs: the head's outputs, one row per window (texts' windows consecutive).
        labels: the label of each window (its text's).
        starts: int `[texts]`, each text's first window (`np.add.reduceat` boundaries).
        truncated: bool `[texts]`, texts with word pieces past `max_length` unread.
        num_tokens: int `[windows]`, real tokens of each window ([CLS] / [SEP] included).
    """

    outputs: Any
    labels: Any
    starts: Any
    truncated: Any
    num_tokens: Any


def has_window_marks(dataset):
    """Whether `dataset`'s batches come from `batching.encode_text_windows` (marks third)."""
    spec = dataset.element_spec
    return isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], dict)

def window_outputs(task, dataset, outputs_of=None):
    """Keras' predict over batches of windows (or `outputs_of(dataset)`), with their marks
    (`WindowOutputs`).

    The marks are read first (that pass fills the cache, so the texts are tokenized
    once): how many windows there are, and so how many batches the predict loop reads.
    Both passes run without tf.data's autotuner and default rewrites, as every task pipeline.
    """
    dataset = without_autotune_thread(dataset).cache()
    labels, marks = [], {"first_window": [], "truncated": [], "num_tokens": []}
    for _, label, batch_marks in dataset:
        labels.append(label.numpy())
        for key in marks:
            marks[key].append(batch_marks[key].numpy())
    marks = {key: np.concatenate(values) for key, values in marks.items()}
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(labels)))
    starts = np.flatnonzero(marks["first_window"])
    outputs = outputs_of(dataset) if outputs_of is not None else np.asarray(predicted_outputs(task, dataset))
    return WindowOutputs(outputs=outputs, labels=np.concatenate(labels),
                         starts=starts, truncated=marks["truncated"][starts],
                         num_tokens=marks["num_tokens"])

def pairs_cut(task, rows):
    """bool `[N]`: the pairs of `rows` (unbatched `((text, text_b), ...)`) with more word pieces
    than `[CLS] a [SEP] b [SEP]` holds in `task.seq_length`, which the packer cuts (a pair is
    one window, never windowed): what `warn_truncated(..., pairs=True)` reports and the rows
    mark `"truncated"`."""
    cut = [np.zeros(0, bool)]
    for texts, *_ in rows.batch(1024).as_numpy_iterator():
        pieces = sum(task.tokenizer.tokenize(column).row_lengths().numpy() for column in texts)
        cut.append(pieces > task.seq_length - 3)
    return np.concatenate(cut)


# The `bert-keras` commands with --max-length (`cli.flag_arguments.add_window_options`; a test holds them so).
WINDOWS_ON_THE_COMMAND_LINE = "bert-keras finetune, embed, export or predict --max-length N"


def warn_truncated(task, truncated, *, pairs=None):
    """Truncation is never silent: how many texts were read only in part, and what reads them.
    `pairs`: `truncated` marks text pairs (`pairs_cut`); None: the task's `text_pair`."""
    if truncated is None or not np.any(truncated):
        return
    count = f"{int(np.sum(truncated))} of {len(truncated)}"
    if getattr(task, "text_pair", False) if pairs is None else pairs:  # one window, never windowed
        warnings.warn(f"{count} text pairs have more than {task.seq_length - 3} word pieces together; "
                      f"they were cut (longest text first) to one window of seq_length {task.seq_length}",
                      stacklevel=caller_stacklevel())
        return
    _, _, max_length = task.window_options()
    # the commands that take --max-length named: `evaluate` / `predict` said "--max-length N on the
    # command line", a flag they lack (a fine-tuned model reads as it was trained)
    warnings.warn(f"{count} texts have more than {max_length} "
                  f"word pieces; only their first were read (max_length=N reads N, in windows: "
                  f"{WINDOWS_ON_THE_COMMAND_LINE})",
                  stacklevel=caller_stacklevel())
