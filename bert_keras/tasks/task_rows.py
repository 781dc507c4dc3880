"""`predict_rows`: a task's predictions as one JSON-able dict per input, and one line for a terminal.

What `bert-keras predict` prints (`--json`: the dicts; else `row_text` of each), what the
embedded server's text requests answer. Each family shapes its rows (`_row_predictions`,
`row_text`); a text with no token gets the model's answer to an empty input, its row marked
`"empty": true`, with one warning for the call.

Example:

>>> rows = classifier.predict_rows(["a great film", "dull"])   # doctest: +SKIP
>>> rows[0]                                                    # doctest: +SKIP
{'text': 'a great film', 'label': 'pos', 'score': 0.97, 'scores': {...}}
"""

import warnings

import numpy as np

from bert_keras.tasks.inputs import (EmptyTextWarning, ItemInputError, TaskInputError, answering_empty_texts,
                                     empty_rows, utf8_text)


def empty_texts_message(count, first, marked):
    """The warning about `count` texts answered with no token, the first named `first` (a script's
    `row 3`; a command's `--input FILE, line 4`), and where their rows are `marked`.

    >>> empty_texts_message(1, "TEXT argument 2", 'marked "empty": true with --json')[:26]
    '1 text has no token (empty'
    """
    texts = f"{count} texts have" if count > 1 else "1 text has"
    return (f"{texts} no token (empty, or only whitespace, control characters or marks the tokenizer strips; "
            f"the first: {first}): the model's answer to an empty input ([CLS] [SEP]) is given; {marked}")


def row_items(items):
    """`predict_rows`' items as a list whose texts are all `str` (bytes decoded as UTF-8, numpy
    strings as `str`), tuples and lists kept as they are; an item, or a part of one, that is no
    text is refused by its index (`ItemInputError`), and so is one string given as the items.

    >>> row_items([b"caf\\xc3\\xa9", ("a", b"b")])
    ['café', ('a', 'b')]
    >>> row_items("a text")
    Traceback (most recent call last):
    ...
    bert_keras.tasks.inputs.TaskInputError: items: one text, not a list of them: predict_rows(["..."]) predicts one
    """
    if isinstance(items, (str, bytes, np.str_, np.bytes_)):
        raise TaskInputError('items: one text, not a list of them: predict_rows(["..."]) predicts one')
    if isinstance(items, dict) or not hasattr(items, "__iter__"):
        raise TaskInputError(f"items: a list of texts (or of tuples), got {type(items).__name__}")
    return [_readable_item(index, item, item) for index, item in enumerate(items)]


def _readable_item(index, item, part):
    if isinstance(part, (bytes, np.bytes_)):
        return utf8_text(part, f"items[{index}]")
    if isinstance(part, str):
        return str(part)
    if isinstance(part, np.ndarray) and part.dtype.kind in "USO":
        part = part.tolist()
    if isinstance(part, (tuple, list)):
        parts = [_readable_item(index, item, each) for each in part]
        return tuple(parts) if isinstance(part, tuple) else parts
    name = type(part).__name__
    what = "None" if part is None else f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"
    inside = "" if part is item else " in it"
    raise ItemInputError(index, item, f"{what}{inside}, not a text",
                         fix="give a text (a str), or the tuple of texts this task reads",
                         command_fix="give a text")


class RowPredictions:
    """`predict_rows` / `row_text` of a task (mixed into `TextTask`); families override
    `_row_predictions` and `row_text`."""

    def predict_rows(self, items, *, batch_size=32, max_length=None, stride=None, **options):
        """`predict` as one JSON-able dict per input, the input included (what `bert-keras
        predict --json` prints). `items`: texts, or `(a, b)` tuples where the task reads pairs.
        A text with no token gets the model's answer to an empty input, marked `"empty": true`.
        `max_length` / `stride`: this call's window settings, as `predict` takes them (the
        families that read long texts in windows). `options`: a family's own decoding overrides
        (SpanQA: `threshold`, `n_best_size`, `max_answer_length`); another family refuses any.
        """
        if options and not self._row_option_names >= set(options):
            raise TaskInputError(f"predict_rows: a {type(self).__name__} takes no "
                                 f"{', '.join(sorted(set(options) - self._row_option_names))}")
        items = row_items(items)
        with self.windows_read(max_length, stride), answering_empty_texts() as found:
            rows = self._row_predictions(items, batch_size=batch_size, **options)
        empty = self._empty_rows(found)
        for index in empty:
            rows[index]["empty"] = True
        self._warn_empty(empty)
        return rows

    # the `options` of `predict_rows` that `_row_predictions` takes
    _row_option_names = frozenset()

    def _row_predictions(self, items, *, batch_size=32):
        raise TaskInputError(f"a {type(self).__name__} has no row predictions")

    def _empty_rows(self, found):
        """The rows with no token in any of their texts (`answering_empty_texts`' record)."""
        return empty_rows(found)

    @staticmethod
    def _warn_empty(empty, stacklevel=3):
        if empty:
            warnings.warn(empty_texts_message(len(empty), f"row {empty[0]}",
                                              'predict_rows marks such rows "empty": true'),
                          EmptyTextWarning, stacklevel=stacklevel)

    def row_text(self, row):
        """One `predict_rows` row as a line (or two) for a terminal."""
        return str(row)
