"""A task's data as batches: packed, padded, read into memory, and Keras' predict over them.

What every family's `fit` / `evaluate` / `predict` shares between raw text and the head:
`tokenized_dataset` (an already tokenized dict), `padded_batches` (unpadded examples padded
per batch, or to `seq_length` where XLA / a TPU needs static shapes), `packed_batches` (a dataset
of packed inputs, batched if its elements are single examples), `in_memory` (a dataset read
into columns, for the families that build features in Python), `first_batches` (Keras'
`steps=`), `batch_size_for` (Keras' default batch size) and `predicted_outputs` (Keras'
own predict loop, distribution-aware).

Example:

>>> import numpy as np
>>> dataset, steps = tokenized_dataset(None, {"token_ids": np.ones((5, 4), np.int32),
...     "segment_ids": np.zeros((5, 4), np.int32), "padding_mask": np.ones((5, 4), np.int32)},
...     np.arange(5), batch_size=2, shuffle=False, seed=None)
>>> steps, [int(x["token_ids"].shape[0]) for x, _ in dataset]
(3, [2, 2, 1])
"""

import keras
import tensorflow as tf

from bert_keras.tasks.dataset_inputs import is_tokenized_dataset, steps_for, without_autotune_thread
from bert_keras.tasks.inputs import TaskInputError, check_count, check_sample_weight, check_tokenized, take_rows


def first_batches(task, x, steps, batch_size):
    """The first `steps` batches of `x` (in memory: `steps * batch_size` rows)."""
    if not isinstance(x, tf.data.Dataset):
        return take_rows(x, 0, steps * batch_size)
    if is_tokenized_dataset(x):
        return packed_batches(task, x, batch_size).take(steps)
    from bert_keras.tasks.dataset_inputs import batch_size_of

    return x.take(steps if batch_size_of(x, task.dataset_layout) else steps * batch_size)


def packed_batches(task, dataset, batch_size):
    """A dataset of packed inputs, batched if its elements are single examples (as
    `dataset.map(task.preprocessor)` gives on an unbatched dataset), padded per batch
    (token ids with [PAD], per-token labels with the ignored label)."""
    spec = dataset.element_spec
    dataset = _known_labels_only(task, dataset)
    x_spec = spec[0] if isinstance(spec, tuple) else spec
    rank = x_spec["token_ids"].shape.rank
    if rank is None or rank >= task._packed_rank:
        return dataset
    from pipelines.datasets.batching import IGNORE_LABEL

    pad = task.tokenizer.special_tokens.pad
    x_padding = {name: tf.constant(pad if name == "token_ids" else 0, s.dtype) for name, s in x_spec.items()}
    rest = tf.nest.map_structure(
        lambda s: tf.constant(IGNORE_LABEL if s.dtype.is_integer and s.shape.rank else 0, s.dtype),
        tuple(spec[1:]) if isinstance(spec, tuple) else ())
    padding = (x_padding, *rest) if isinstance(spec, tuple) else x_padding
    return dataset.padded_batch(batch_size, padding_values=padding)


def _known_labels_only(task, dataset):
    """`dataset` (packed, with labels) stopping on a label the model does not know: the task's
    preprocessor maps one to -1, which the loss would meet as "Received a label value of -1 which
    is outside the valid range" deep in the graph on a CPU, and as a NaN loss on a GPU."""
    spec = dataset.element_spec
    labels = getattr(task.preprocessor, "labels", None)
    if labels is None or getattr(task.preprocessor, "regression", False) or not isinstance(spec, tuple) \
            or len(spec) < 2 or not getattr(spec[1], "dtype", tf.string).is_integer:
        return dataset
    shown = ", ".join(map(str, labels[:8])) + (", ..." if len(labels) > 8 else "")
    message = f"y: a label the model does not know (the preprocessor maps it to -1); its labels are {shown}"

    def checked(x, y, *rest):
        with tf.control_dependencies([tf.debugging.assert_none_equal(y, tf.constant(-1, y.dtype),
                                                                     message=message)]):
            return (x, tf.identity(y), *rest)

    return dataset.map(checked)


def batch_size_for(task, x, batch_size):
    """`batch_size`, else a batched dataset's own batch size (as Keras), else 32."""
    batch_size = check_count("batch_size", batch_size)
    if batch_size is None and isinstance(x, tf.data.Dataset) and not is_tokenized_dataset(x):
        from bert_keras.tasks.dataset_inputs import batch_size_of

        batch_size = batch_size_of(x, task.dataset_layout)
    return batch_size or 32


def in_memory(task, x, y, sample_weight=None):
    """`(x, y, sample_weight)` as lists: a dataset is read into them, other forms pass through.

    For the tasks whose features are built in Python (NER, SQuAD, multiple choice).
    """
    from bert_keras.tasks import dataset_inputs

    if not isinstance(x, tf.data.Dataset):
        return x, y, sample_weight
    if x.cardinality() == tf.data.INFINITE_CARDINALITY:
        raise TaskInputError(f"x: an infinite dataset (.repeat()); a {type(task).__name__} reads its "
                             "data into memory: pass a finite dataset (fit repeats it for epochs / "
                             "steps_per_epoch / max_steps)")
    layout = task.dataset_layout
    parts = dataset_inputs.element_parts(x.element_spec, x_is_tuple=layout.x_is_tuple)
    rows = dataset_inputs.unbatched(x, parts, example_rank=layout.example_rank,
                                    is_batched=layout.is_batched)
    return dataset_inputs.to_columns(rows, x_is_tuple=layout.x_is_tuple)


def tokenized_dataset(task, x, y, *, batch_size, shuffle, seed, sample_weight=None):
    """`(dataset, steps)` of an already tokenized dict `x` and targets `y`."""
    x = check_tokenized(x)
    count = len(x["token_ids"])
    parts = (x,) + tuple(part for part in (y, check_sample_weight(sample_weight, count)) if part is not None)
    dataset = tf.data.Dataset.from_tensor_slices(parts if len(parts) > 1 else x)
    if shuffle:
        dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE), steps_for(count, batch_size)

def padded_batches(task, examples, batch_size):
    """Pads unpadded `(x, y)` examples (`pipelines.datasets.batching.batch`) as this task needs."""
    from pipelines.datasets import batching

    return batching.batch(examples, batch_size, seq_length=task.seq_length,
                          static_shapes=task.static_shapes,
                          drop_remainder=False).prefetch(tf.data.AUTOTUNE)

def predicted_outputs(task, dataset):
    """The head's outputs (numpy, or a dict of numpy) on every batch of `dataset` (`x` or `(x, y)`).

    Keras' own `predict` loop: distribution-aware (a `MirroredStrategy` splits each batch
    over its replicas). Per-token outputs need batches of one width (`static` padding).
    """
    if isinstance(dataset.element_spec, tuple):
        dataset = dataset.map(tf.autograph.experimental.do_not_convert(lambda x, *_: x))
    trace_predict_step_for_any_shape(task, dataset.element_spec)
    return keras.Model.predict(task, without_autotune_thread(dataset), verbose=task._verbose,
                               callbacks=getattr(task, "_predict_callbacks", None))


def trace_predict_step_for_any_shape(task, element_spec):
    """Traces Keras' predict step once for batches of any size and width.

    Keras traces its predict function with the first batch's shape, `(64, 16)`; the next
    width retraces it as `(64, None)` and a short last batch as `(None, None)`: three traces
    (about 0.8 s each for a 6-layer encoder, plus graph optimisation) in a user's first
    `predict` of many texts. Tracing the relaxed signature first makes every later batch
    reuse it (`tf.function` calls the most specific trace that accepts the shapes). Not
    under a distribution strategy (its batches are per-replica values) nor with XLA, whose
    static shapes are the point."""
    task.make_predict_function()
    function = task.predict_function
    distributed = getattr(task, "_distribute_strategy", None) is not None or tf.distribute.has_strategy()
    specs = tf.nest.flatten(element_spec)
    if (task.__dict__.get("_predict_function_traced_for") is function or task.jit_compile or task.run_eagerly
            or distributed or not hasattr(function, "get_concrete_function")
            or not all(type(spec) is tf.TensorSpec for spec in specs)):  # (ragged inputs: as Keras does)
        return
    relaxed = tf.nest.map_structure(lambda spec: tf.TensorSpec([None] * spec.shape.rank, spec.dtype), element_spec)
    function.get_concrete_function([relaxed] * task.steps_per_execution)
    task.__dict__["_predict_function_traced_for"] = function
