"""`tf.data.Dataset` inputs of `fit` / `evaluate` / `predict`: batched or not, with or without labels.

Keras reads a dataset element as `x`, `(x,)`, `(x, y)` or `(x, y, sample_weight)`; so do
the tasks. `x` is raw text in the task's form: a string (one text), a pair of strings
`(text, text_b)` (pair classification, `(question, context)`, `(context, endings)`), or
a list of words (NER). Keras expects datasets to be batched; people also pass
unbatched ones (`from_tensor_slices(...)` without `.batch`). Both work: a task knows
the rank of one example's text, so a dataset whose texts have one more axis is
batched and is unbatched here; the task then batches the encoded examples itself
(padded to the longest text of each batch, or to `seq_length` for XLA / TPU).

Tasks whose features are built in Python (NER words, SQuAD windows, multiple choice)
read the dataset once into lists (`to_columns`); the classifier and the embedder stream
it through `tf.data`.

Example:

>>> import tensorflow as tf
>>> batched = tf.data.Dataset.from_tensor_slices((["a b", "c", "d e"], ["pos", "neg", "pos"])).batch(2)
>>> parts = element_parts(batched.element_spec, x_is_tuple=False)
>>> rows = unbatched(batched, parts, example_rank=0)
>>> [(x.numpy(), y.numpy()) for x, y in rows][:2]
[(b'a b', b'pos'), (b'c', b'neg')]
>>> to_columns(rows, x_is_tuple=False)
(['a b', 'c', 'd e'], ['pos', 'neg', 'pos'], None)
"""

import contextlib
import dataclasses
import functools
import math
import re
import threading

import numpy as np
import tensorflow as tf

from bert_keras.tasks.inputs import TaskInputError, utf8_text


@dataclasses.dataclass(frozen=True)
class ElementParts:
    """Which parts a dataset element has: `x` alone, `(x, y)` or `(x, y, sample_weight)`."""

    has_y: bool
    has_weight: bool
    wrapped: bool  # the element is a tuple (x, ...), not x itself


def without_autotune_thread(dataset):
    """`dataset` with tf.data's autotuning and default graph rewrites off; anything else as it is.

    The autotuner runs a thread per iterator that sleeps between optimizations for a period
    that doubles up to a minute, and an iterator's destructor waits for it: every `fit`,
    `evaluate` or `predict` that ran for a minute paid 10-30 s more at its end, after the last
    step (measured on MRPC, 2 cores; in 3 of 3 fits, and in 0 of 3 with it off). `AUTOTUNE`
    values keep working without it (a parallel map runs on every core, prefetch keeps a buffer),
    and the fine-tuning step times are unchanged: the model, not the input, is the bottleneck.
    tf.data's default graph rewrites are off too: they ran on every new iterator (0.1 s of a
    3-text `predict`) and changed no measured throughput (fit on 512 texts: 8.1 s either way).
    """
    if not isinstance(dataset, tf.data.Dataset):
        return dataset
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.apply_default_optimizations = False
    return dataset.with_options(options)


def element_parts(spec, *, x_is_tuple):
    """The `ElementParts` of a dataset's `element_spec`.

    Args:
        spec: `dataset.element_spec`.
        x_is_tuple: the task's `x` is itself a pair (pair classification, QA,
            multiple choice): then a 2-tuple of plain tensors is `x`, and
            labelled elements are `((a, b), y)`.
    """
    if isinstance(spec, dict):
        return ElementParts(False, False, False)
    if not isinstance(spec, tuple):
        return ElementParts(False, False, False)
    if len(spec) == 1:
        return ElementParts(False, False, True)
    if x_is_tuple and len(spec) == 2 and not any(isinstance(part, (tuple, dict)) for part in spec):
        return ElementParts(False, False, False)
    if len(spec) in (2, 3):
        return ElementParts(True, len(spec) == 3, True)
    raise TaskInputError(f"x: a dataset element is x, (x, y) or (x, y, sample_weight); got a tuple of "
                         f"{len(spec)} parts")


@dataclasses.dataclass(frozen=True)
class DatasetLayout:
    """How a task reads one dataset example: `x` a pair or not, the rank of its first text.

    `is_batched`, when given, decides instead of the rank (NER: a text or a word list).
    """

    x_is_tuple: bool = False
    example_rank: int = 0
    is_batched: object = None


def batch_size_of(dataset, layout):
    """The batch size of a batched dataset (its static first axis, else its first batch's), or None.

    Keras trains on a dataset's own batches; so do the tasks when `batch_size` is not given.
    """
    parts = element_parts(dataset.element_spec, x_is_tuple=layout.x_is_tuple)
    x_spec, y_spec, _ = split_element(dataset.element_spec, parts)
    leaf = first_leaf(x_spec)
    if layout.is_batched is not None:
        batched = layout.is_batched(x_spec, y_spec)
    else:
        batched = leaf.shape.rank == layout.example_rank + 1
    if not batched:
        return None
    if leaf.shape.rank and leaf.shape[0] is not None:
        return int(leaf.shape[0])
    size = _batch_op_size(dataset)
    if size is not None:
        return size
    # Read off the first batch (a dataset whose batches come from elsewhere: a generator of
    # batches). This starts the dataset once more: one made from a single generator object
    # loses that batch (`raising_source_errors` names a dataset that reads shorter on a re-read).
    for element in dataset.take(1):
        x, _, _ = split_element(element, parts)
        first = first_leaf(x)
        return int(first.nrows() if hasattr(first, "nrows") else tf.shape(first)[0])
    return None


# tf.data's transformations that hand a batch on whole (or drop it): a batch size set further up
# the pipeline holds after them. Anything else (unbatch, rebatch, a window, a generator) does not.
_BATCH_PRESERVING = frozenset({
    "_MapDataset", "_ParallelMapDataset", "_PrefetchDataset", "_OptionsDataset", "CacheDataset",
    "_MemoryCacheDataset", "_FilterDataset", "_ParallelFilterDataset", "_SkipDataset", "_TakeDataset",
    "_RepeatDataset", "_ShuffleDataset", "_AssertCardinalityDataset", "_IgnoreErrorsDataset",
    "_ShardDataset"})
_BATCHING = frozenset({"_BatchDataset", "_ParallelBatchDataset", "_PaddedBatchDataset"})


def _batch_op_size(dataset):
    """The `batch_size` of the `.batch` / `.padded_batch` / `.ragged_batch` that made `dataset`'s
    batches (through maps, prefetch, shuffle, take...), read off the pipeline without starting it
    (a pipeline's first batch may cost a file read, and a dataset made from a single generator
    object is only read once); None where the pipeline does not say."""
    while type(dataset).__name__ in _BATCH_PRESERVING:
        dataset = getattr(dataset, "_input_dataset", None)
    if type(dataset).__name__ == "_ZipDataset":  # `Dataset.zip((texts.batch(n), labels.batch(n)))`
        sizes = {_batch_op_size(part) for part in tf.nest.flatten(getattr(dataset, "_datasets", ()))}
        return sizes.pop() if len(sizes) == 1 else None
    if type(dataset).__name__ not in _BATCHING:
        return None
    size = tf.get_static_value(getattr(dataset, "_batch_size", None))
    return int(size) if size is not None and int(size) > 0 else None


def split_element(element, parts):
    """`(x, y, sample_weight)` of one element (None for the parts it lacks)."""
    if not parts.wrapped:
        return element, None, None
    x = element[0]
    y = element[1] if parts.has_y else None
    weight = element[2] if parts.has_weight else None
    return x, y, weight


def first_leaf(structure):
    return tf.nest.flatten(structure)[0]


def unbatched(dataset, parts, *, example_rank=None, is_batched=None):
    """The dataset as unbatched `(x, y, sample_weight)` elements (y / weight only when present).

    Args:
        dataset: the user's dataset.
        parts: its `element_parts`.
        example_rank: rank of one example's (first) text tensor (0 for a string).
        is_batched: instead of `example_rank`, a function of `(x_spec, y_spec)`
            that says True / False (NER, whose examples are texts or word lists).

    Raises:
        TaskInputError: texts of a rank that is neither one example nor a batch.
    """
    x_spec, y_spec, _ = split_element(dataset.element_spec, parts)
    not_text = [spec.dtype.name for spec in tf.nest.flatten(x_spec) if spec.dtype != tf.string]
    if not_text:
        raise TaskInputError(f"x: the dataset's texts are {not_text[0]}, not strings (raw text in; "
                             "packed token ids go in a dict: input_ids, segment_ids, padding_mask)")
    rank = first_leaf(x_spec).shape.rank
    column = example_rank is not None and rank == example_rank + 2 and all(
        spec.shape[-1] == 1 for spec in tf.nest.flatten(x_spec))
    if column:  # a batch of texts as an [N, 1] column (as in memory): read as [N]
        rank = example_rank + 1
    if is_batched is not None:
        batched = is_batched(x_spec, y_spec)
    elif rank is None:
        raise TaskInputError("x: the dataset's texts have an unknown rank; give its TensorSpec a shape "
                             "(e.g. from_generator(..., output_signature=tf.TensorSpec([None], tf.string)))")
    elif rank == example_rank + 1:
        batched = True
    elif rank == example_rank:
        batched = False
    else:
        raise TaskInputError(f"x: the dataset's texts have rank {rank}; this task reads one example as "
                             f"rank {example_rank} (a batch: rank {example_rank + 1})")

    def as_tuple(*element):
        if parts.wrapped:
            x, y, weight = split_element(element, parts)
        else:  # x itself: a tuple element arrives as several arguments
            x, y, weight = (element if len(element) > 1 else element[0]), None, None
        if column:
            x = tf.nest.map_structure(lambda t: tf.squeeze(t, -1), x)
        return tuple(part for part in (x, y, weight) if part is not None)

    rows = dataset.map(as_tuple)
    return rows.unbatch() if batched else rows


def count_rows(dataset):
    """Examples in an (unbatched) dataset: its cardinality, else one pass over it."""
    count = int(dataset.cardinality())
    if count == tf.data.INFINITE_CARDINALITY:
        raise TaskInputError("x: an infinite dataset (.repeat()); pass a finite one and set epochs / "
                             "steps_per_epoch")
    if count < 0:
        count = int(dataset.reduce(tf.constant(0, tf.int64), lambda n, *_: n + 1))
    if count == 0:
        raise TaskInputError("x: an empty dataset")
    return count


def to_python(value, where="a dataset element"):
    """numpy values of a dataset element as Python: bytes -> str, arrays -> lists, dicts kept.
    Bytes that are not UTF-8 are refused naming `where`."""
    if isinstance(value, dict):
        return {key: to_python(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_python(item, f"{where}[{i}]") for i, item in enumerate(value))
    if isinstance(value, np.ndarray):
        return [to_python(item, f"{where}[{i}]") for i, item in enumerate(value.tolist())] if value.ndim \
            else to_python(value.item(), where)
    if isinstance(value, (bytes, np.bytes_)):
        return utf8_text(value, where)
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "to_list"):  # a ragged row
        return to_python(value.to_list())
    return value


def to_columns(rows, *, x_is_tuple):
    """`(x, y, sample_weight)` in the in-memory forms of an unbatched `unbatched(...)` dataset.

    `x` is a list, or a tuple of lists when the task's x is a pair; `y` and
    `sample_weight` lists or None.
    """
    xs, ys, weights = [], [], []
    for index, element in enumerate(rows.as_numpy_iterator()):
        element = element if isinstance(element, tuple) else (element,)
        xs.append(to_python(element[0], f"x: element {index} of the dataset"))
        if len(element) > 1:
            ys.append(to_python(element[1], f"y: element {index} of the dataset"))
        if len(element) > 2:
            weights.append(to_python(element[2], f"sample_weight: element {index} of the dataset"))
    if not xs:
        raise TaskInputError("x: an empty dataset")
    if x_is_tuple and isinstance(xs[0], tuple):
        x = tuple(list(column) for column in zip(*xs))
    else:
        x = xs
    return x, (ys or None), (np.asarray(weights, np.float32) if weights else None)


# -- Keras' other sources of batches: a Python generator / iterator, a keras.utils.PyDataset ------

def is_batch_source(x):
    """A `keras.utils.PyDataset` or a Python generator / iterator: what Keras reads batch by batch."""
    import keras

    if isinstance(x, keras.utils.PyDataset):
        return True
    return hasattr(x, "__next__") and not isinstance(x, (str, bytes, np.ndarray, tf.data.Dataset))


def dataset_of_batches(source, *, streamed=False, name="x"):
    """`(dataset, batch size of the first batch)` for a Keras batch source, in Keras' element forms.

    Each batch is `x`, `(x,)`, `(x, y)` or `(x, y, sample_weight)` (as Keras reads a generator's
    items); columns are lists, numpy arrays or tensors (word lists of NER: nested lists, read as
    ragged). A `PyDataset` is read by index on every pass (`len()` batches, or an endless stream
    when it has no length) and gets `on_epoch_end()` after each pass. A generator is read once:
    with `streamed=True` (fit with `steps_per_epoch`, as Keras) it is an endless stream that stops
    when the generator does; otherwise it is read to its end (Keras ends the epoch there too) and
    its batches are kept, so that every pass and epoch sees them all.

    Raises:
        TaskInputError: a source that yields no batch; a batch whose columns do not convert, differ
            in length, or differ in structure / dtype from the first batch (every batch of a
            generator read to its end, the first of a stream or a `PyDataset`).
    """
    import keras

    if isinstance(source, keras.utils.PyDataset):
        count = source.num_batches

        @_remembering_errors
        def batches():
            index = 0
            while count is None or index < count:
                yield _batch_tensors(source[index], name)
                index += 1
            source.on_epoch_end()

        if count == 0:
            raise TaskInputError(f"{name}: the PyDataset has no batch (len() is 0)")
        first = _batch_tensors(source[0], name)
        _check_batch(first, first, f"{name} (batch 0)")
    else:
        iterator = iter(source)
        try:
            first = _batch_tensors(next(iterator), name)
        except StopIteration:
            raise TaskInputError(f"{name}: the generator yields no batch") from None
        _check_batch(first, first, f"{name} (batch 0)")
        if streamed:
            pending = [first]

            @_remembering_errors
            def batches():
                while pending:
                    yield pending.pop()
                for batch in iterator:
                    yield _batch_tensors(batch, name)
        else:
            kept = [first] + [_batch_tensors(batch, name) for batch in iterator]
            for index, batch in enumerate(kept):  # read already: every batch checked before a step
                _check_batch(batch, first, f"{name} (batch {index})")

            def batches():
                yield from kept
    signature = _batches_signature([first] if streamed or isinstance(source, keras.utils.PyDataset) else kept)
    dataset = tf.data.Dataset.from_generator(_in_form(batches, signature, name), output_signature=signature)
    if isinstance(source, keras.utils.PyDataset):
        if source.num_batches is None:
            dataset = dataset.repeat()
        else:
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(source.num_batches))
    elif streamed:
        dataset = dataset.repeat()  # each pass goes on with the same generator; it ends when that does
    else:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(kept)))
    leaf = first_leaf(first[0] if isinstance(first, tuple) else first)
    size = int(leaf.nrows() if isinstance(leaf, tf.RaggedTensor) else (tf.shape(leaf)[0] if leaf.shape.rank else 1))
    return dataset, size


# The exception a Keras batch source (a PyDataset's `__getitem__`, a generator) raised inside
# `tf.data`, which TensorFlow reports as an `InvalidArgumentError` with the text of a traceback:
# `raising_source_errors` raises the source's own exception instead, as Keras' loop does.
_raised = {"error": None}
_raised_lock = threading.Lock()


def _remembering_errors(generator_function):
    @functools.wraps(generator_function)
    def generator(*args, **kwargs):
        try:
            yield from generator_function(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - remembered, re-raised as itself
            with _raised_lock:
                _raised["error"] = error
            raise
    return generator


@contextlib.contextmanager
def raising_source_errors():
    """Within the block, a TensorFlow error caused by an exception of a Keras batch source
    (`dataset_of_batches`) is replaced by that exception (its type, message and traceback), and
    a dataset that gives other rows when read again than it gave the door check's read is named."""
    with _raised_lock:
        _raised["error"] = None
    try:
        yield
    except tf.errors.OpError as op_error:
        with _raised_lock:
            error, _raised["error"] = _raised["error"], None
        if error is None:
            reread = _REREAD_DIFFERS.search(str(op_error.message))
            if reread is None:
                raise
            raise TaskInputError(
                f"a dataset gave {reread['first']} rows when first read and {reread['again']} when read "
                "again: a task reads its dataset more than once (every row is checked before a step "
                "runs, and Keras reads it again each epoch), so it must give the same rows each time. "
                "Dataset.from_generator calls its function at each read: pass one that makes a new "
                "generator (from_generator(make_rows, ...)), not one that returns the same generator "
                "object") from None
        raise error.with_traceback(error.__traceback__) from None


# `tf.data.experimental.assert_cardinality`'s error: the row counts read first (the door check)
# are asserted on the pass that feeds the model.
_REREAD_DIFFERS = re.compile(r"expected to contain (?P<first>\d+) elements? but contained "
                           r"(?P<again>only \d+|at least \d+) elements?")


def _batch_tensors(batch, name):
    """A Keras batch as tensors: `(x, None)` is `x` alone, as Keras reads it
    (`keras.utils.unpack_x_y_sample_weight`)."""
    if isinstance(batch, tuple):
        parts = list(batch)
        while parts and parts[-1] is None:
            parts.pop()
        if not parts or any(part is None for part in parts):
            raise TaskInputError(f"{name}: a batch {tuple(type(p).__name__ for p in batch)} holds None "
                                 "where x or labels belong")
        batch = tuple(parts)
    if batch is None:
        raise TaskInputError(f"{name}: a batch is None")
    return as_tensors(batch, name, ragged_records=True)


def _records_as_columns(rows, name, *, ragged=False):
    """A list of records (dicts, or None for "none": a question without an answer) as a dict of
    columns, the form a dataset carries: flat when every row is a dict of single values, else
    ragged, a row per record (`[]` for None); always ragged with `ragged` (the batches of a
    generator, whose later batches may hold None or lists)."""
    keys = sorted({key for row in rows if row is not None for key in row})
    if not ragged and all(row is not None and set(row) == set(keys)
                          and not any(isinstance(v, (list, tuple)) for v in row.values()) for row in rows):
        return {key: as_tensors([row[key] for row in rows], name) for key in keys}
    def cell(row, key):  # one record's values of `key`, as a list
        value = None if row is None else row.get(key)
        if value is None:
            return []
        return list(value) if isinstance(value, (list, tuple)) else [value]

    columns = {}
    for key in keys:
        values = [cell(row, key) for row in rows]
        try:
            columns[key] = tf.ragged.constant(values, ragged_rank=1)
        except (ValueError, TypeError) as error:
            raise TaskInputError(f"{name}: the records' {key!r} values do not convert to a tensor ({error})") from None
    return columns


def as_tensors(batch, name="x", *, empty=None, ragged_records=False):
    """One batch (or a preprocessor's input) as tensors: tuples and dicts are structure, anything
    else one column (a list, numpy array, pandas column or scalar; ragged when its rows differ in
    length: word lists). Tensors, symbolic Keras inputs and None pass through; an empty list
    becomes an empty tensor of dtype `empty` when given. Records (SpanQA's answers) are ragged
    columns with `ragged_records`, flat ones when every record holds single values."""
    if batch is None or isinstance(batch, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
        return batch
    if isinstance(batch, tuple):
        return tuple(as_tensors(part, name, ragged_records=ragged_records) for part in batch)
    if isinstance(batch, dict):
        return {key: as_tensors(part, name, ragged_records=ragged_records) for key, part in batch.items()}
    import keras

    if keras.ops.is_tensor(batch) or hasattr(batch, "_keras_history"):
        return batch
    if hasattr(batch, "to_numpy"):  # pandas
        batch = batch.to_numpy()
    if isinstance(batch, np.ndarray) and batch.dtype == object:
        batch = batch.tolist()
    if isinstance(batch, list) and not batch and empty is not None:
        return tf.constant([], empty)
    if isinstance(batch, list) and any(isinstance(row, dict) for row in batch) and \
            all(isinstance(row, dict) or row is None for row in batch):
        return _records_as_columns(batch, name, ragged=ragged_records)
    try:
        return tf.constant(batch)
    except (ValueError, TypeError):
        pass
    try:
        return tf.ragged.constant(batch.tolist() if isinstance(batch, np.ndarray) else batch)
    except (ValueError, TypeError) as error:
        raise TaskInputError(f"{name}: {type(batch).__name__} {str(batch)[:80]!r} does not convert to a "
                             f"tensor ({str(error).splitlines()[0]})") from None


def _check_batch(batch, first, where):
    """A batch has the first batch's structure and dtypes, and one row count in all its columns."""
    try:
        tf.nest.assert_same_structure(batch, first)
    except (ValueError, TypeError):
        raise TaskInputError(f"{where}: its structure differs from the first batch's "
                             f"({_structure_name(batch)} vs {_structure_name(first)})") from None
    for got, expected in zip(tf.nest.flatten(batch), tf.nest.flatten(first)):
        if got.shape.rank != expected.shape.rank:
            raise TaskInputError(f"{where}: a column of rank {got.shape.rank} where the first batch has "
                                 f"rank {expected.shape.rank}")
        if got.dtype != expected.dtype:
            raise TaskInputError(f"{where}: a column of {got.dtype.name} where the first batch has "
                                 f"{expected.dtype.name}")
    rows = {int(leaf.nrows()) if isinstance(leaf, tf.RaggedTensor) else int(leaf.shape[0])
            for leaf in tf.nest.flatten(batch) if leaf.shape.rank}
    if len(rows) > 1:
        raise TaskInputError(f"{where}: its columns differ in length ({sorted(rows)} rows): x, y and "
                             "sample_weight need one entry per example")


def _structure_name(batch):
    if isinstance(batch, tuple):
        return "(" + ", ".join(_structure_name(part) for part in batch) + ")"
    if isinstance(batch, dict):
        return "{" + ", ".join(map(str, batch)) + "}"
    return "column"


def _batches_signature(batches):
    """The `output_signature` of a batch source: every length left open (batches differ in size),
    and a column ragged where any batch read so far has it ragged. A column of texts of rank 2 or
    more (word lists, endings) is ragged even when the batches read have rows of one length: a
    later batch of a stream may not (whether a list of lists converts to a dense tensor depends
    on its rows)."""
    def widest(*leaves):
        rank, dtype = leaves[0].shape.rank, leaves[0].dtype
        ragged = [leaf.ragged_rank for leaf in leaves if isinstance(leaf, tf.RaggedTensor)]
        if ragged or (dtype == tf.string and rank >= 2):
            return tf.RaggedTensorSpec([None] * rank, dtype, ragged_rank=max(ragged, default=rank - 1))
        return tf.TensorSpec([None] * rank, dtype)

    return tf.nest.map_structure(widest, *batches)


def _in_form(batches, signature, name):
    """`batches` (a generator function) whose batches take the signature's form: a dense column
    where the signature has a ragged one becomes ragged (the rows of a batch of one length)."""
    def form(leaf, spec):
        if isinstance(spec, tf.RaggedTensorSpec) and not isinstance(leaf, tf.RaggedTensor):
            return tf.RaggedTensor.from_tensor(leaf, ragged_rank=spec.ragged_rank)
        if isinstance(leaf, tf.RaggedTensor) and not isinstance(spec, tf.RaggedTensorSpec):
            raise TaskInputError(f"{name}: a batch whose rows differ in length ({leaf.shape}) where the first "
                                 "batch's had one length (a dense column): give the column as a "
                                 "tf.RaggedTensor in every batch")
        return leaf

    @_remembering_errors
    def generator():
        for batch in batches():
            yield tf.nest.map_structure(form, batch, signature)

    return generator


def read_batch_source(x, batch_size, *, streamed=False):
    """A generator / `PyDataset` (Keras' batches) as a dataset, and its first batch's size as the
    batch size unless one is given; any other `x` as it is."""
    if not is_batch_source(x):
        return x, batch_size
    dataset, first_batch = dataset_of_batches(x, streamed=streamed)
    return dataset, batch_size or first_batch


def is_tokenized_dataset(dataset):
    """Whether a dataset's x is the packed dict (`token_ids`, ...); a dict of other features is
    refused by name (raw text goes in as string tensors, not as a dict)."""
    spec = dataset.element_spec
    first = spec[0] if isinstance(spec, tuple) else spec
    if isinstance(first, dict) and "token_ids" not in first:
        raise TaskInputError(
            f"x: the dataset's elements hold a dict ({', '.join(map(str, list(first)[:4]))}); a dict is "
            "the packed form (token_ids, segment_ids, padding_mask). Raw text goes in as string tensors: "
            "(text, label) elements, ((text, text_b), label) for pairs, e.g. "
            "dataset.map(lambda features, label: (features['text'], label))")
    return isinstance(first, dict)


def steps_for(count, batch_size):
    """Batches of `batch_size` in `count` examples (at least one)."""
    return max(1, math.ceil(count / batch_size))
