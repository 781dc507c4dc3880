"""Checks and conversions of what scripts pass to `fit` / `evaluate` / `predict`.

Raw text comes as a list (or numpy array) of strings, a pair of such lists as a
tuple `(texts, texts_b)`, or already tokenized as a dict of int arrays; labels as
names (the task's `labels`; ids are names with `num_classes=`). Every mistake is a `TaskInputError` that
names the argument and, where there is one, the position.

Example:

>>> text_columns(("a b", "c"), "x")
Traceback (most recent call last):
...
bert_keras.tasks.inputs.TaskInputError: x: a tuple must hold two lists of texts (texts, texts_b), got a tuple of 2 str
>>> text_columns(["a b", "c"], "x")
(['a b', 'c'],)
>>> label_ids(["pos", "neg"], ["neg", "pos"], "y")
[1, 0]

The label rule, stated once: with `labels=` given, `y` holds label NAMES; an int (or
an integral float) is compared as its name, so star ratings `labels=[1, 2, 3, 4, 5]`
take `y=5`, and `labels=["1", "0"]` reads `y=1` as the class named "1" (id 0). A whole
number is its class however either writes it: `y=1`, `"1"` or `1.0` is the class named
"1.0" (a model fine-tuned when JSON's 1.0 was read as the name "1.0"), and `"1.0"` is "1".
Ids are names too when the task was built with `num_classes=` (its labels are
"0", "1", ...). Only when no label name is a number can an int mean nothing else: then
it is the id of `labels[i]`, as Keras' sparse labels (`text_dataset_from_directory`'s
`label_mode="int"` / `"binary"` with `labels=dataset.class_names`, Hugging Face's
`ner_tags`).

>>> label_ids([5, 1], ["1", "2", "3", "4", "5"], "y")
[4, 0]
>>> label_ids([1], ["1", "0"], "y")
[0]
>>> label_ids([1, "neg"], ["neg", "pos"], "y")
[1, 0]
>>> label_ids([1, "5"], ["1.0", "2.0", "3.0", "4.0", "5.0"], "y")
[0, 4]
"""

import contextlib
import contextvars
import dataclasses
import math
import numbers
import re

import numpy as np

from pipelines.datasets.text_files import legacy_code_page
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES
from pipelines.file_kinds import lone_surrogate
from pipelines.tokenizer.tokenless import texts_without_token


class TaskInputError(ValueError):
    """Bad data given to a task (the message names the argument and the item)."""


# Why a text is empty, in the messages that refuse one.
NO_TOKEN = ("nothing but whitespace, control characters or marks the tokenizer strips: the model "
            "would read no token of it")


class EmptyTextError(TaskInputError):
    """A text with no token where `fit` needs one: `name` (the argument, `x` or `x[0]`) and `index`
    (the row) say which, so a command that read the texts from a file names its line."""

    def __init__(self, message, name, index):
        super().__init__(message)
        self.name, self.index = name, index


class EmptyTextWarning(UserWarning):
    """`predict` / `predict_rows` answered texts with no token (the model's answer to `[CLS] [SEP]`),
    naming the first by its row. A command that read the texts names it as its user gave it instead
    (`bert-keras predict` / `embed`: the argument, or the --input file and line of the first row marked
    "empty")."""


class ItemInputError(TaskInputError):
    """An item of `predict_rows` the model cannot read, named in a script's words: `items[3]`
    and the item as given (a tuple for a pair), then what to pass instead (`fix`). A command reads
    the items from its arguments or a file: `command_message` names the item by its source and
    says what to type (`command_fix`: 'A ||| B', a flag), never `x=` or a tuple.

    >>> error = ItemInputError(1, "good", "a single text, but this model reads sentence pairs",
    ...                        fix="give a (text, text_b) tuple", command_fix="give 'A ||| B'")
    >>> str(error)
    "items[1] ('good'): a single text, but this model reads sentence pairs; give a (text, text_b) tuple"
    >>> error.command_message("--input pairs.tsv, line 2", "good")
    "--input pairs.tsv, line 2 ('good'): a single text, but this model reads sentence pairs; give 'A ||| B'"
    """

    def __init__(self, index, item, problem, *, fix, command_fix, command_problem=None):
        self.index, self.problem, self.command_fix = index, command_problem or problem, command_fix
        super().__init__(f"items[{index}] {_shown(item)}: {problem}; {fix}")

    def command_message(self, source, text):
        """The message for a command user: the item as `source` (`TEXT argument 2`, `--input FILE,
        line 7`) and `text` as typed."""
        return f"{source} {_shown(text)}: {self.problem}; {self.command_fix}"


def _shown(item, width=60):
    """The start of an item in parentheses, as a message shows it: `('a text')`, a tuple as
    `('a', 'b')`, each text cut at `width` characters."""
    parts = item if isinstance(item, tuple) else (item,)
    return "(" + ", ".join(repr(str(part)[:width]) for part in parts) + ("," if isinstance(item, tuple)
                                                                       and len(item) == 1 else "") + ")"


def settings_record(settings_class, options, task_name):
    """A family's settings record (`bert_keras.families`) from `from_pretrained`'s keyword arguments
    (None: the field's default); a name that is not a setting is refused with the list of them."""
    names = [field.name for field in dataclasses.fields(settings_class)]
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise TaskInputError(f"{unknown[0]}=: not a setting of a {task_name}; its settings: {', '.join(names)}")
    return settings_class(**{name: value for name, value in options.items() if value is not None})


# While a prediction runs (`answering_empty_texts`): {input name: indices of its texts with no token}.
_EMPTY_TEXTS = contextvars.ContextVar("empty_texts", default=None)


@contextlib.contextmanager
def answering_empty_texts():
    """Within it, a text with no token is read as an empty input (`[CLS] [SEP]`) instead of refused:
    `predict` answers it without failing its neighbours. Yields a `{input name: set of indices}`
    of the texts that had none (nested calls share the outer one's)."""
    outer = _EMPTY_TEXTS.get()
    if outer is not None:
        yield outer
        return
    found = {}
    token = _EMPTY_TEXTS.set(found)
    try:
        yield found
    finally:
        _EMPTY_TEXTS.reset(token)


def answering_empty_texts_already():
    """True inside an `answering_empty_texts` (a prediction within a prediction)."""
    return _EMPTY_TEXTS.get() is not None


def empty_rows(found):
    """The rows all of whose texts had no token, from `answering_empty_texts`' record (every
    column read is in it, `note_text_column`: a pair with one text left is not empty)."""
    return sorted(set.intersection(*found.values())) if found else []


def note_text_column(name):
    """Records that a prediction reads the input column `name` (none of its texts empty yet), so
    that `empty_rows` needs a row's text of this column to have no token too."""
    found = _EMPTY_TEXTS.get()
    if found is not None:
        found.setdefault(name, set())


def note_empty_text(name, index):
    """Records a text with no token when a prediction answers it; False when it must be refused."""
    found = _EMPTY_TEXTS.get()
    if found is None:
        return False
    found.setdefault(name, set()).add(index)
    return True


def is_tokenized(x):
    """True for a dict of encoder inputs (`token_ids`, ...), the already-tokenized form."""
    return isinstance(x, dict) and "token_ids" in x


def is_raw_text(inputs):
    """True for what a preprocessor takes or refuses by name: text in any form (strings, lists /
    tuples / arrays of them, string tensors), or a list with a string among other values; False
    for packed inputs (a dict) and tensors of numbers, which Keras handles."""
    import tensorflow as tf

    if isinstance(inputs, dict):
        return False
    return any(isinstance(leaf, (str, bytes))
               or isinstance(leaf, np.ndarray) and leaf.dtype.kind in "USO"
               or isinstance(leaf, (tf.Tensor, tf.RaggedTensor)) and leaf.dtype == tf.string
               for leaf in tf.nest.flatten(inputs))


def tokenized_length(x):
    return len(x["token_ids"])


def check_tokenized(x, name="x"):
    missing = [key for key in ENCODER_INPUT_NAMES if key not in x]
    if missing:
        raise TaskInputError(f"{name}: a tokenized input needs {list(ENCODER_INPUT_NAMES)}; "
                             f"missing {missing}")
    return {key: np.asarray(x[key], np.int32) for key in ENCODER_INPUT_NAMES}


def as_column(values, name):
    """An in-memory column as a list: tensors, numpy arrays (`[N]` or `[N, 1]`), pandas Series.

    A Python generator or a `keras.utils.PyDataset` as a column, or a dict of columns, is refused
    by name (a generator / PyDataset is read as `x` itself: `dataset_inputs.dataset_of_batches`).
    """
    if hasattr(values, "numpy") and not isinstance(values, np.ndarray):  # a tf.Tensor
        values = values.numpy()
    if isinstance(values, dict):
        raise TaskInputError(f"{name}: a dict of columns ({', '.join(map(str, list(values)[:4]))}); pass "
                             f"the text column itself, or (texts, texts_b) for pairs")
    if hasattr(values, "__next__") or type(values).__name__ == "PyDataset" or \
            any(cls.__name__ == "PyDataset" for cls in type(values).__mro__):
        raise TaskInputError(f"{name}: a Python generator / PyDataset as one column; pass it as x itself "
                             "(its items are batches: x, (x, y) or (x, y, sample_weight)), or pass a list")
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):  # pandas
        values = values.to_numpy()
    if isinstance(values, np.ndarray):
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        return values.tolist()
    return values


def check_composition(tokenizer, texts, name, names=None):
    """Decomposed Hangul (NFD jamo) that the vocabulary of `tokenizer` (a task's) reads as [UNK]: warned
    once per tokenizer (`pipelines.BertTokenizer.check_composition`), naming `name[i]`, or `names[i]`
    when given. Every family's texts pass here, however they come: lists (`text_list`), words of a
    sentence, SQuAD / SWAG examples read from files."""
    if tokenizer is not None and hasattr(tokenizer, "check_composition"):
        tokenizer.check_composition(texts, name, names=names)


def stream_checked_composition(tokenizer, rows, name="x"):
    """`rows`, an unbatched dataset of `(texts, ...)` (`texts`: a string, or a tuple of them for pairs,
    as `name[0]`, `name[1]`), with `check_composition` applied as the rows stream: for an infinite
    dataset (`fit` with `steps_per_epoch`), which is never read through before training, so NFD Hangul
    warns there as in lists and finite datasets, naming the element. `rows` as they are when the
    tokenizer has nothing to check (`unicode_normalization="NFC"` composes the text itself)."""
    if tokenizer is None or not getattr(tokenizer, "checks_composition", False):
        return rows

    def checked(position, row):
        texts = row[0]
        if isinstance(texts, tuple):
            texts = tuple(tokenizer.stream_checked_composition(text, position, f"{name}[{column}]")
                          for column, text in enumerate(texts))
        else:
            texts = tokenizer.stream_checked_composition(texts, position, name)
        return (texts,) + tuple(row[1:])

    return rows.enumerate().map(checked)


def utf8_text(data, where):
    """`data` (bytes) decoded as UTF-8; bytes that are not UTF-8 are refused by name (`where`), with the
    offending byte, its offset and the code page they likely are.

    Example:
        >>> utf8_text("리뷰".encode(), "x[0]")
        '리뷰'
        >>> utf8_text("café au lait".encode("cp1252"), "x[3]")
        Traceback (most recent call last):
        ...
        bert_keras.tasks.inputs.TaskInputError: x[3]: bytes that are not UTF-8: byte 0xe9 at offset 3 (invalid continuation byte); decode them first (data.decode("cp1252")), or pass str
    """
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as bad:
        raise TaskInputError(
            f"{where}: bytes that are not UTF-8: byte 0x{bytes(data)[bad.start:bad.start + 1].hex()} at offset "
            f"{bad.start} ({bad.reason}); decode them first (data.decode(\"{legacy_code_page(bytes(data))}\")), "
            "or pass str") from None


def text_list(texts, name, *, allow_empty=False, tokenizer=None):
    """A list of `str` from a list / tuple / numpy array of strings (bytes are decoded).

    A text with no token is refused (`EmptyTextError`), unless `allow_empty`, or a prediction
    answers it (`answering_empty_texts`). `tokenizer` (the task's) decides which have none
    (`pipelines.tokenizer.tokenless.texts_without_token`): empty, whitespace or control
    characters only, and for an uncased model combining marks only ("\\u0301"); without one,
    the rule every tokenizer shares.
    """
    if isinstance(texts, str):
        raise TaskInputError(f"{name}: expected a list of texts, got one string; wrap it: [{texts[:30]!r}]")
    texts = as_column(texts, name)
    if isinstance(texts, (str, bytes)):  # a 0-d tensor or array of one string
        raise TaskInputError(f"{name}: expected a list of texts, got one string (a 0-d tensor or array); give "
                             f"it a batch axis: [{texts[:30]!r}]")
    try:
        texts = list(texts)
    except TypeError:
        raise TaskInputError(f"{name}: expected a list of texts, got {type(texts).__name__}") from None
    if not texts:
        raise TaskInputError(f"{name}: an empty list of texts")
    result = []
    for index, text in enumerate(texts):
        if isinstance(text, (bytes, np.bytes_)):
            text = utf8_text(text, f"{name}[{index}]")
        if not isinstance(text, str):
            raise TaskInputError(f"{name}[{index}]: expected a string, got {type(text).__name__} "
                                 f"({text!r:.40})")
        if not text.isascii():  # (a constant-time flag) half of a surrogate pair is no text to encode
            problem = lone_surrogate(f"{name}[{index}]", None, text, origin="python")
            if problem:
                raise TaskInputError(problem)
        result.append(text)
    check_composition(tokenizer, result, name)
    if not allow_empty:
        note_text_column(name)
        for index in texts_without_token(result, tokenizer):
            if not note_empty_text(name, index):
                raise EmptyTextError(f"{name}[{index}]: an empty text ({NO_TOKEN}; predict answers one "
                                     "as an empty input; fit does not train on it)", name, index)
    return result


def frame_columns(x, name):
    """A DataFrame's columns as `x`: one text column, or two as (texts, texts_b)."""
    columns = list(x.columns)
    if len(columns) == 1:
        return x[columns[0]]
    if len(columns) == 2:
        return (x[columns[0]], x[columns[1]])
    raise TaskInputError(f"{name}: a DataFrame of {len(columns)} columns {columns[:6]}; pass the text "
                         "column (df['text']) or two for pairs (df[['text', 'text_b']])")


def text_columns(x, name="x", tokenizer=None):
    """`(texts,)` or `(texts, texts_b)`: one or two equally long lists of strings.

    A pandas DataFrame gives its one column, or its two columns as a pair.

    Pairs come as a tuple of two columns `(texts, texts_b)`, Keras' list of two input columns
    `[texts, texts_b]`, or a list of `(text, text_b)` rows (or an `[N, 2]` array); two lists of
    two texts, which read both ways, are refused. `tokenizer`: the task's, which decides which
    texts have no token (`text_list`).

    >>> text_columns([("a", "b"), ("c", "d")], "x")
    (['a', 'c'], ['b', 'd'])
    """
    if hasattr(x, "columns") and hasattr(x, "to_numpy"):  # a pandas DataFrame
        x = frame_columns(x, name)
    if isinstance(x, tuple):
        if len(x) != 2 or any(isinstance(column, str) for column in x):
            raise TaskInputError(f"{name}: a tuple must hold two lists of texts (texts, texts_b), got "
                                 f"a tuple of {len(x)} {type(x[0]).__name__ if x else ''}".rstrip())
        first = text_list(x[0], f"{name}[0]", tokenizer=tokenizer)
        second = text_list(x[1], f"{name}[1]", tokenizer=tokenizer)
        if len(first) != len(second):
            raise TaskInputError(f"{name}: {len(first)} texts but {len(second)} texts_b")
        return first, second
    if isinstance(x, list) and len(x) == 2 and all(_is_text_column(column) for column in x):
        # Keras' multi-input form: [texts, texts_b]. Two lists of two texts read two ways.
        if len(x[0]) == len(x[1]) == 2 and not all(isinstance(column, tuple) for column in x):
            raise TaskInputError(f"{name}: a list of two lists of two texts reads two ways: two (text, text_b) "
                                 "rows, or the two input columns [texts, texts_b]; pass the columns as a tuple "
                                 "(texts, texts_b), or the rows as tuples [(a, b), (c, d)]")
        if len(x[0]) != 2 or len(x[1]) != 2:
            return text_columns(tuple(x), name, tokenizer)
    rows = x.tolist() if isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[1] == 2 else x
    if isinstance(rows, list) and rows and all(isinstance(row, (tuple, list)) and len(row) == 2
                                               and all(isinstance(t, (str, bytes)) for t in row)
                                               for row in rows):
        # A list of (text, text_b) pairs (or an [N, 2] array): the same as the tuple of columns.
        return text_columns((tuple(a for a, _ in rows), tuple(b for _, b in rows)), name, tokenizer)
    return (text_list(x, name, tokenizer=tokenizer),)


def _is_text_column(value):
    """A list, tuple, array or Series of texts (not one text)."""
    if isinstance(value, np.ndarray):
        return value.ndim == 1 and value.dtype.kind in "OUS"
    if hasattr(value, "to_numpy") and not hasattr(value, "columns"):  # a pandas Series
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(t, (str, bytes)) for t in value)


def check_lengths(num_x, y, x_name="x", y_name="y"):
    """y as a list, as long as x."""
    if y is None:
        raise TaskInputError(f"{y_name}: no labels given (fit and evaluate need y)")
    y = as_column(y, y_name)
    y = list(y)
    if len(y) != num_x:
        raise TaskInputError(f"{x_name} and {y_name} differ in length: {num_x} inputs but {len(y)} labels")
    return y


def one_hot_ids(y, num_classes, name="y"):
    """Class ids of Keras' categorical labels (one-hot rows `[N, num_classes]`), or None when `y`
    is not a numeric matrix of that width (names, ids, an `[N, 1]` column: read as they are).

    Raises:
        TaskInputError: a row that is not one-hot (one 1, the rest 0), named by its position.
    """
    if hasattr(y, "numpy") and not isinstance(y, np.ndarray):  # a tf.Tensor
        y = y.numpy()
    if hasattr(y, "to_numpy") and not isinstance(y, np.ndarray):  # pandas
        y = y.to_numpy()
    if num_classes < 2 or isinstance(y, (str, bytes, dict)):
        return None
    try:
        array = np.asarray(y)
    except (ValueError, TypeError):  # ragged
        return None
    if array.ndim != 2 or array.shape[1] != num_classes or array.dtype.kind not in "biuf":
        return None
    ones, zeros = (array == 1).sum(1), (array == 0).sum(1)
    bad = np.flatnonzero((ones != 1) | (ones + zeros != num_classes))
    if bad.size:
        raise TaskInputError(f"{name}[{bad[0]}]: {array[bad[0]].tolist()} is not a one-hot row (one 1, the "
                             "rest 0); pass class names, ids, or one-hot rows")
    return array.argmax(1)


def label_ids(y, labels, name="y"):
    """Class ids of `y`, label names in `labels` (the rule of the module docstring)."""
    index = {label: i for i, label in enumerate(labels)}
    return [label_id(label, index, f"{name}[{position}]") for position, label in enumerate(y)]


def label_id(label, index, where):
    """The id of one label value; `index` maps names to ids. A `TaskInputError` names `where`.

    A whole number is the name written either way: `1`, `"1"` and `1.0` are the class `"1.0"` of a
    model whose names say `"1.0"` (fine-tuned before JSON's 1.0 was read as the class 1), and
    `"1.0"` is the class `"1"`."""
    key, number = _label_key_and_kind(label, where)
    if key in index:
        return index[key]
    whole = whole_number_name(key)
    if whole is not None:
        found = index.get(whole, whole_number_aliases(index).get(whole))
        if found is not None:
            return found
    if number and 0 <= int(key) < len(index) and not names_are_numbers(index):
        return int(key)  # an id: no label name is a number, so a number cannot be a name
    hint = ""
    if number and not names_are_numbers(index):
        hint = f"; a number is the id of labels[i], 0 <= i < {len(index)}"
    raise TaskInputError(f"{where}: label {label!r} is not one of the model's labels "
                         f"{list(index)}{hint}")


def whole_number_name(name):
    """The digits of a label name that writes a whole number (`"3"`, `"-1"`, `"1.0"`, `"2.00"`), else None.

    >>> whole_number_name("1.0"), whole_number_name("-2"), whole_number_name("1.5"), whole_number_name("1e3")
    ('1', '-2', None, None)
    """
    match = re.fullmatch(r"\s*([+-]?)(\d+)(?:\.0*)?\s*", str(name))
    if match is None:
        return None
    digits = str(int(match.group(2)))
    return "-" + digits if match.group(1) == "-" and digits != "0" else digits


def whole_number_aliases(names):
    """`{digits: id}` of the label names that write a whole number otherwise than as its digits
    (`"1.0"` -> `"1"`), where no name is those digits already. `names`: a list or `{name: id}`."""
    index = names if isinstance(names, dict) else {name: i for i, name in enumerate(names)}
    aliases = {}
    for name, i in index.items():
        whole = whole_number_name(name)
        if whole is not None and whole != name and whole not in index:
            aliases.setdefault(whole, i)
    return aliases


def names_are_numbers(names):
    """Whether some label name reads as a whole number (`"3"`, `"1.0"`: then ints in `y` are names,
    never ids)."""
    return any(whole_number_name(name) is not None for name in names)


def label_key(label, where):
    """The name a label value stands for: str as is, ints / integral floats as their digits."""
    return _label_key_and_kind(label, where)[0]


def _label_key_and_kind(label, where):
    """`(label_key, whether the value was a number)`."""
    if isinstance(label, (bytes, np.bytes_)):
        label = utf8_text(label, where)
    if hasattr(label, "numpy") and not isinstance(label, np.ndarray):  # a scalar tf.Tensor
        label = label.numpy()
    if isinstance(label, np.ndarray) and label.size == 1:  # a row of an [N, 1] column
        label = label.reshape(()).item()
    if isinstance(label, (list, tuple)) and len(label) == 1:
        label = label[0]
    if isinstance(label, (bytes, np.bytes_)):
        label = utf8_text(label, where)
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, bool):
        raise TaskInputError(f"{where}: a boolean label; give a label name")
    if isinstance(label, numbers.Integral):
        return str(int(label)), True
    if isinstance(label, float):
        if not math.isfinite(label) or not label.is_integer():
            raise TaskInputError(f"{where}: {label!r} is not a class name; a classifier takes names "
                                 "(or whole numbers); for numeric targets build it with num_classes=1 "
                                 "(regression)")
        return str(int(label)), True
    if isinstance(label, str):
        return label, False
    raise TaskInputError(f"{where}: expected a label name, got {type(label).__name__} ({label!r:.40})")


def check_label_names(labels, name="labels"):
    """`labels` as a list of str under the one rule of `pipelines.label_names` (ints: their digits)."""
    from pipelines.label_names import LabelNamesError
    from pipelines.label_names import check_label_names as check_names

    if isinstance(labels, (str, bytes)):
        raise TaskInputError(f"{name}: expected a list of names, got one string {labels!r:.40}")
    names = []
    for position, label in enumerate(labels):
        if isinstance(label, float) and label.is_integer():
            label = int(label)
        names.append(label_key(label, f"{name}[{position}]"))
    try:
        return check_names(names, name, by_line=False)
    except LabelNamesError as error:
        raise TaskInputError(str(error)) from None


def float_targets(y, name="y"):
    """Regression targets as float32; a value that is not a finite number is refused by row."""
    return np.asarray([float_target(value, f"{name}[{position}]") for position, value in enumerate(y)],
                      np.float32)


def float_target(value, where):
    """One regression target as a float, or a `TaskInputError` naming `where`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TaskInputError(f"{where}: {value!r} is not a number (regression)") from None
    if not math.isfinite(number) or not math.isfinite(np.float32(number)):
        raise TaskInputError(f"{where}: {value!r} is not a finite number; a NaN or infinite target "
                             "trains the weights to NaN")
    return number


def check_count(name, value, *, allow_none=True):
    """A positive whole number (`batch_size`, `epochs`, `max_steps`, `steps_per_epoch`), or None."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise TaskInputError(f"{name}={value!r}: expected a positive whole number")
    return int(value)


def checked_seq_length(seq_length, positions):
    """`seq_length` as an int; a `TaskInputError` when a model of `positions` positions cannot read
    windows of that many tokens ([CLS], a token and [SEP] need 3)."""
    seq_length = int(seq_length)
    if seq_length < 3:
        raise TaskInputError(f"seq_length must be at least 3 ([CLS], a token and [SEP]), got {seq_length}")
    if seq_length > positions:
        raise TaskInputError(f"seq_length {seq_length} exceeds the model's {positions} positions")
    return seq_length


def check_epochs(epochs):
    """A number of epochs >= 0 (a float: the last epoch is partial; 0: no step, as in Keras)."""
    if isinstance(epochs, bool) or not isinstance(epochs, numbers.Real) or not epochs >= 0 \
            or not math.isfinite(epochs):
        raise TaskInputError(f"epochs={epochs!r}: expected a number >= 0")
    return epochs


def check_sample_weight(sample_weight, count, name="sample_weight"):
    """Per-example weights as float32 `[count]`, checked (finite, >= 0), or None."""
    if sample_weight is None:
        return None
    weights = np.asarray(as_column(sample_weight, name), dtype=np.float64)
    if weights.shape != (count,):
        raise TaskInputError(f"{name}: expected one weight per example ({count}), got shape "
                             f"{weights.shape}")
    bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
    if bad.size:
        raise TaskInputError(f"{name}[{bad[0]}]: {float(weights[bad[0]])!r} is not a finite weight >= 0")
    return weights.astype(np.float32)


def num_rows(x, name="x"):
    """The number of examples of an in-memory input (list, array, tuple of columns, dict)."""
    if isinstance(x, dict):
        first = next(iter(x.values()))
        return len(first)
    if isinstance(x, tuple):
        return len(x[0]) if x else 0
    try:
        return len(x)
    except TypeError:
        raise TaskInputError(f"{name}: expected a list, an array or a tf.data.Dataset, got "
                             f"{type(x).__name__}") from None


def take_rows(x, start, stop):
    """Rows `start:stop` of an in-memory input, any form `num_rows` takes (None stays None)."""
    if x is None:
        return None
    if isinstance(x, dict):
        return {key: value[start:stop] for key, value in x.items()}
    if isinstance(x, tuple):
        return tuple(column[start:stop] for column in x)
    return x[start:stop]
