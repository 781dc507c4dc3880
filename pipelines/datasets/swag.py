"""SWAG multiple choice: a context and four endings, pick the right one.

Reads the SWAG CSV files (`train.csv` / `val.csv` of rowanz/swagaf, columns
`video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0..ending3,
label`) and packs every example as four `(context, ending)` pairs:

    text_a = sent1
    text_b = sent2 + " " + ending_i

`sent2` is the beginning of the sentence that each ending finishes (e.g.
"The woman" + "picks up the ball."), so it belongs with the ending: segment B
then reads as one complete candidate sentence, and `sent1` (the shared
context) is segment A, as in the original BERT SWAG setup and HF
`run_swag.py`. Inputs are `[batch, 4, length]`; a multiple-choice head scores
each of the 4 rows and takes a softmax over them; the label is the index of
the right ending.

Example:
    >>> from pipelines import BertTokenizer
    >>> from pipelines.datasets import swag
    >>> examples = swag.read_swag_csv("tests/data/tasks/swag_mini.csv")
    >>> examples[1].endings[examples[1].label]
    'pulls up a chair and sits down.'
    >>> ds = swag.swag_dataset(examples, BertTokenizer("vocab.txt"), seq_length=64, batch_size=2)
    >>> x, y = next(iter(ds))
    >>> x["token_ids"].shape[:2], y.shape
    (TensorShape([2, 4]), TensorShape([2]))
"""

import contextlib
import csv
import dataclasses
import logging
import os
import re
from typing import Optional, Tuple

import tensorflow as tf

from pipelines.datasets import batching
from pipelines.datasets.text_files import csv_records, decode_text_file, field_count_message, no_token_message
from pipelines.line_ends import text_lines
from pipelines.tokenizer.tokenless import has_no_token

logger = logging.getLogger(__name__)

NUM_CHOICES = 4
REQUIRED_COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")
LABEL_COLUMN = "label"  # train.csv and val.csv; not in test.csv


class SwagFormatError(ValueError):
    """A SWAG file that cannot be read (names the file and line)."""


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One SWAG question.

    Args:
        context: `sent1`.
        start: `sent2`, the start of the sentence each ending completes.
        endings: the four endings.
        label: index of the right ending; None for the unlabelled test file.
        source: `"file:line"`.
    """

    context: str
    start: str
    endings: Tuple[str, ...]
    label: Optional[int]
    source: str = ""

    def choices(self):
        """The 4 `(text_a, text_b)` pairs, `text_b = start + " " + ending`."""
        return [(self.context, f"{self.start} {ending}".strip()) for ending in self.endings]


def read_swag_csv(path, *, labelled=True):
    """Reads a SWAG CSV file (with header) into `SwagExample`s.

    Example:
        >>> len(read_swag_csv("tests/data/tasks/swag_mini.csv"))
        3

    Args:
        path: the CSV file.
        labelled: the file has a `label` column (train / val); False for the
            test file (a `label` column is then not read); None: labelled
            where the file has a `label` column (`predict` of any of the three).

    Returns:
        List of `SwagExample`, in file order.

    Raises:
        SwagFormatError: empty file, missing column (lists the columns
            found), a row with the wrong field count, a label outside 0..3, or
            text that is not valid CSV (names file, line and value). Cells may
            be longer than the csv module's 131,072 characters
            (`text_files.csv_records`).
    """
    path = os.fspath(path)
    lines = text_lines(decode_text_file(path, error=SwagFormatError), keepends=True)
    with contextlib.closing(csv_records(csv.reader(lines), path, error=SwagFormatError)) as records:
        _, header = next(records, (None, None))
        if not header:
            raise SwagFormatError(f"{path}: the file is empty.")
        header = [h.strip() for h in header]
        if labelled is None:
            labelled = LABEL_COLUMN in header
        required = REQUIRED_COLUMNS + ((LABEL_COLUMN,) if labelled else ())
        missing = [c for c in required if c not in header]
        if missing:
            raise SwagFormatError(f"{path}: missing column(s) {missing}; columns found: {header}.")
        examples, blank = [], 0
        for line, fields in records:
            if not fields or all(not field.strip() for field in fields):
                blank += 1
                continue
            if len(fields) != len(header):
                raise SwagFormatError(field_count_message(path, line, fields, header))
            row = dict(zip(header, fields))
            label = None
            if labelled:
                label = _choice_label(row[LABEL_COLUMN].strip(), f"{path}:{line}")
            endings = tuple(row[f"ending{i}"] for i in range(NUM_CHOICES))
            # the Python API refuses a context or an ending with no token; sent2 (the ending's start) may be empty
            empty = next((f for f in ("sent1", *(f"ending{i}" for i in range(NUM_CHOICES))) if has_no_token(row[f])),
                         None)
            if empty:
                raise SwagFormatError(no_token_message(f"{path}:{line}", empty))
            examples.append(SwagExample(row["sent1"], row["sent2"], endings, label, f"{path}:{line}"))
    if not examples:
        raise SwagFormatError(f"{path}: no examples.")
    logger.info("%s: %d examples, %d blank lines skipped.", path, len(examples), blank)
    return examples


def _choice_label(value, where):
    """The index a `label` field names: `1`, or `1.0` as a CSV written by pandas from a float column
    says it (HF's run_swag reads such a column as the class it is); anything else, `1.5` included,
    is a `SwagFormatError` naming `where` (file:line) and the field. Leading zeros are read ("01"); a
    number of thousands of digits is refused as any other, never given to int() (Python's digit limit)."""
    match = re.fullmatch(r"0*([0-9])(\.0*)?", value)
    if match is None or int(match.group(1)) >= NUM_CHOICES:
        shown = repr(value) if len(value) <= 40 else repr(value[:40]) + f"... ({len(value)} characters)"
        raise SwagFormatError(f"{where}: field {LABEL_COLUMN!r}: {shown} is not the index of an ending, "
                              f"one of 0..{NUM_CHOICES - 1}.")
    return int(match.group(1))


def swag_dataset(examples, tokenizer, *, seq_length=128, batch_size=16, shuffle=False,
                 static_shapes=False, bucket_boundaries=None, seed=None, drop_remainder=None,
                 sample_weights=None):
    """Batched `(x, y)` for a multiple-choice model.

    Example:
        >>> from pipelines import BertTokenizer
        >>> examples = read_swag_csv("tests/data/tasks/swag_mini.csv")
        >>> tokenizer = BertTokenizer("vocab.txt")
        >>> ds = swag_dataset(examples, tokenizer, seq_length=128, static_shapes=True)
        >>> ds.element_spec[0]["token_ids"].shape
        TensorShape([16, 4, 128])

    Args:
        examples: from `read_swag_csv` (unlabelled ones get label -1).
        tokenizer: a `pipelines.BertTokenizer`.
        seq_length: packed length of each (context, ending) pair.
        batch_size: questions per batch (each is 4 sequences).
        shuffle: shuffle every epoch.
        static_shapes, bucket_boundaries: padding mode
            (`pipelines.datasets.batching.batch`); all 4 choices of a question
            share one width.
        seed: shuffle seed.
        drop_remainder: drop the last incomplete batch (default: with
            `static_shapes`); False for prediction.
        sample_weights: float32 `[examples]` (Keras' `sample_weight`), or None.

    Returns:
        `tf.data.Dataset` of `(x, y)` (`(x, y, sample_weight)` with weights): int32 `token_ids` / `segment_ids` /
        `padding_mask` `[batch, 4, length]` and int32 `y` `[batch]`.
    """
    if not examples:
        raise ValueError("No examples.")
    pairs = [example.choices() for example in examples]
    text_a = tf.constant([[a for a, _ in choices] for choices in pairs])  # [n, 4]
    text_b = tf.constant([[b for _, b in choices] for choices in pairs])
    labels = tf.constant([-1 if e.label is None else e.label for e in examples], tf.int32)
    weights = () if sample_weights is None else (tf.constant(sample_weights, tf.float32),)
    dataset = tf.data.Dataset.from_tensor_slices(((text_a, text_b), labels) + weights)
    if shuffle:
        dataset = dataset.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)
    dataset = batching.encode_texts(dataset, tokenizer, seq_length=seq_length)
    return batching.batch(dataset, batch_size, seq_length=seq_length, static_shapes=static_shapes,
                          bucket_boundaries=bucket_boundaries,
                          drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
