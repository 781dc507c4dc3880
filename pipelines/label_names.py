"""Label names: the one rule for class / tag names, wherever they are read or written.

A label file (`labels.txt` of a fine-tuned model, a label vocabulary beside a CSV task)
holds one name per line, line i = class id i. The rule, checked by `check_label_names`:

- a name is non-empty, has no leading or trailing whitespace and no line break
  (it must survive being written one per line and read back);
- no name appears twice (two ids with one name make every answer that name);
- where the reader knows the model, the number of names equals its number of classes
  (`check_label_count`).

`read_label_names` reads a file under that rule: UTF-8, a byte order mark (Notepad, Excel)
stripped, lines ending at LF, CRLF or a lone CR as every reader's (`pipelines.line_ends`); every error
names the file and line.

>>> check_label_names(["neg", "pos"], "labels")
['neg', 'pos']
>>> check_label_names(["pos", "pos"], "labels.txt")
Traceback (most recent call last):
...
pipelines.label_names.LabelNamesError: labels.txt:2: duplicate label 'pos' (also line 1)
"""

import os

from pipelines.file_kinds import lone_surrogate, packed_or_wide
from pipelines.line_ends import text_lines


class LabelNamesError(ValueError):
    """Label names that break the rule; the message names where (file and line, or list index)."""


def check_label_names(labels, where, *, by_line=True):
    """Checks `labels` against the rule (see the module docstring); returns them as a list of str.

    Args:
        labels: the names in class-id order.
        where: what they came from, for messages: a file path, or a description such as
            `"labels"` for a list in memory.
        by_line: number the items as file lines (`where:3`, from 1) rather than as list
            indices (`where[2]`, from 0).

    Raises:
        LabelNamesError: an empty list, an empty, padded or multi-line name, a name holding half of
            a surrogate pair, or a duplicate;
            names `where` and the line (index).
    """
    labels = list(labels)

    def place(i):
        return f"{where}:{i + 1}" if by_line else f"{where}[{i}]"

    if not labels:
        raise LabelNamesError(f"{where}: no label names")
    first = {}
    for i, label in enumerate(labels):
        if not isinstance(label, str):
            raise LabelNamesError(f"{place(i)}: label {label!r} is a {type(label).__name__}, not a string")
        if not label.strip():
            raise LabelNamesError(f"{place(i)}: empty label name")
        if "\n" in label or "\r" in label:
            raise LabelNamesError(f"{place(i)}: label {label!r} spans several lines")
        if label != label.strip():
            raise LabelNamesError(f"{place(i)}: label {label!r} has leading or trailing whitespace")
        if not label.isascii():  # half of a surrogate pair: no name labels.txt could hold (found at save)
            problem = lone_surrogate(place(i), None, label, origin="python")
            if problem:
                raise LabelNamesError(problem)
        if label in first:
            other = f"line {first[label] + 1}" if by_line else f"index {first[label]}"
            raise LabelNamesError(f"{place(i)}: duplicate label {label!r} (also {other})")
        first[label] = i
    return labels


def check_label_count(labels, num_classes, where):
    """Raises `LabelNamesError` unless there is one name per class of the model.

    Args:
        labels: the names.
        num_classes: the model head's number of outputs (classes or tags).
        where: the label file (or description), for the message.
    """
    if len(labels) != num_classes:
        raise LabelNamesError(
            f"{where}: {len(labels)} label names for a model with {num_classes} classes; "
            f"the file needs exactly one name per class, line i = class id i")


def read_label_names(path):
    """The label names of a file, one per line, checked by `check_label_names`.

    Args:
        path: the file (UTF-8; a leading byte order mark is ignored).

    Raises:
        LabelNamesError: the rule is broken, or the file is not UTF-8 (names file and line; a
            compressed or UTF-16 / UTF-32 file is named as such).
        OSError: the file cannot be opened (IsADirectoryError naming a directory given as the file).
    """
    path = str(path)
    if os.path.isdir(path):  # open() said only "[Errno 21] Is a directory"
        raise IsADirectoryError(f"{path}: is a directory; give the label file (one name per line) inside it")
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    # What the data-file readers say of such bytes (a gzip file was "not UTF-8 (invalid start byte ...)")
    refusal = packed_or_wide(data, path, kind="a label file", kinds="label files")
    if refusal:
        raise LabelNamesError(refusal)
    labels = []
    # Lines as every reader ends them: a file of lone CR line ends, or of "\r\r\n" (Windows' text mode
    # applied twice), was refused with "label 'neg\r' spans several lines".
    for i, raw in enumerate(text_lines(data)):
        try:
            labels.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise LabelNamesError(f"{path}:{i + 1}: not UTF-8 ({error.reason} at byte "
                                  f"{error.start}); save the file as UTF-8") from None
    if data == b"":
        labels = []
    return check_label_names(labels, path)
