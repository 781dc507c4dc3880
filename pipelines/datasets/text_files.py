"""Sentence (pair) classification or regression from your own CSV / TSV / JSONL files.

A file has a header (CSV/TSV) or one JSON object per line (JSONL) with a
text column, an optional second text column (sentence pairs) and a label
column; the names are configurable (`text`, `text_b`, `label` by default).

Labels: the label vocabulary (label string -> class id) is built from the
TRAINING file, sorted, unless you give one; save it beside the model with
`save_label_vocabulary` so evaluation and serving use the same ids. A label in
an evaluation file that the vocabulary does not know is an error naming the
file, the line and the value. With `regression=True` labels are floats.

Nothing is dropped silently: blank lines are skipped and counted in the log;
any other bad line is an error naming the file and line: an empty or
whitespace-only text (the rule of training, the Python API and the server), a
text that is not a string (JSONL `null`, a number, a list) or holds half of a
surrogate pair (a lone `\\ud83d` escape: `lone_surrogate`), a class label that
is a number with a fraction or the same number written twice ("1" and "1.0":
use `regression=True`), a regression target that is not a finite number, a
byte that is not in the file's encoding (UTF-8 by default; a byte order mark,
as Excel writes, is ignored), a NUL byte (line and column too; a JSON `\\u0000`
escape: the field), a CSV / TSV
header of more than `MAX_COLUMNS` columns. Label files follow `pipelines.label_names`.

Example:
    >>> from pipelines import BertTokenizer
    >>> from pipelines.datasets import text_files
    >>> tokenizer = BertTokenizer("vocab.txt")
    >>> train = text_files.read_text_file("tests/data/tasks/pairs_train.tsv")
    >>> labels = text_files.build_label_vocabulary(train)
    >>> labels
    ['contradiction', 'entailment', 'neutral']
    >>> text_files.save_label_vocabulary(labels, "/tmp/model/labels.txt")
    >>> ds = text_files.text_dataset(train, tokenizer, labels=labels, seq_length=64, batch_size=2)
    >>> x, y = next(iter(ds))
    >>> x["token_ids"].shape[0], y.dtype
    (2, tf.int32)
"""

import codecs
import contextlib
import csv
import dataclasses
import json
import logging
import math
import os
from typing import Optional, Union

import tensorflow as tf

from pipelines.atomic_writes import write_text
from pipelines.file_kinds import (_wide_unicode_evidence, compressed_format, iconv_advice, lone_surrogate,
                                  wide_unicode_encoding)
from pipelines.json_objects import RepeatedKeyError, object_of_unique_keys
from pipelines.line_ends import LINE_END, line_position, text_lines
from pipelines.label_names import check_label_names, read_label_names
from pipelines.datasets import batching
from pipelines.tokenizer.tokenless import has_no_token

logger = logging.getLogger(__name__)

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
# The csv module refuses cells over 131,072 characters; a long document is no reason to fail.
# 64 MiB still stops a file whose unbalanced quote swallows the rest of it at a sane size.
MAX_CELL_CHARS = 64 * 1024 * 1024
# A CSV / TSV header of more columns is refused: a task file has a few (text, text_b, label and some
# more), and each row is kept as a dict of them, so a generated header of a million would cost a
# million-entry dict per row for nothing.
MAX_COLUMNS = 1000


class TextFileError(ValueError):
    """A text classification file that cannot be read (names the file and line)."""


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One line of a text classification file.

    Args:
        text: first text (segment A).
        text_b: second text (segment B) or None for single sentences.
        label: the label exactly as written (str), or a float in regression mode.
        source: `"file:line"` where it came from, for error messages.
    """

    text: str
    text_b: Optional[str]
    label: Union[str, float]
    source: str


def read_text_file(path, *, text_column="text", text_b_column="text_b", label_column="label",
                   regression=False, file_format=None, encoding="utf-8"):
    """Reads a CSV / TSV / JSONL file into `TextExample`s.

    Example:
        >>> examples = read_text_file("tests/data/tasks/sentiment_train.csv")
        >>> examples[0].text, examples[0].label
        ('a gripping , beautiful film', 'pos')

    Args:
        path: the file; its format follows the extension (`.csv`, `.tsv`,
            `.jsonl`) unless `file_format` says otherwise; another extension
            (`.txt`) is read by its first line (`table_format`).
        text_column: column of segment A.
        text_b_column: column of segment B; used when the file has it (pairs),
            otherwise every example is a single sentence. None: never used.
        label_column: column of the label; None: the file holds texts alone
            (each example's label is None).
        regression: labels are numbers (parsed as float) instead of classes.
        file_format: `"csv"`, `"tsv"` or `"jsonl"` (overrides the extension).
        encoding: the file's text encoding (default UTF-8; a leading byte order
            mark is ignored), e.g. `"latin-1"` or `"cp1252"` for older exports.

    Returns:
        The list of `TextExample`, in file order.

    Raises:
        TextFileError: empty file, a missing column (the message lists the
            columns found), a header of more than `MAX_COLUMNS` columns,
            invalid JSON, a row with the wrong number of fields, a byte not in
            `encoding` (or a UTF-16 / UTF-32 file: the message says so, with
            the iconv command; a gzip / zip / bzip2 / xz / zstd file: the message says to
            decompress it), a NUL byte (line and column named too: the tokenizer
            would drop it, joining the words around it), an empty or whitespace-only text or one that is
            no string, a JSON string holding half of a surrogate pair (`lone_surrogate`), an empty label, a class label that is a
            fractional number or a number written two ways, or (regression) a
            label that is no finite number; each names the file and line.
    """
    path = os.fspath(path)
    text = decode_text_file(path, encoding)
    file_format = file_format or table_format(path, text)
    if file_format not in ("csv", "tsv", "jsonl"):
        raise TextFileError(f"{path}: unknown format; name the file .csv, .tsv or .jsonl (in Python, or pass "
                            "file_format=)")
    if file_format == "jsonl":
        _refuse_squad_file(text, path)
    f = text_lines(text, keepends=True)  # lines as every reader numbers them (`LINE_END`)
    rows, blank = (_jsonl_rows if file_format == "jsonl" else _table_rows)(f, path, file_format)
    if not rows:
        raise TextFileError(f"{path}: the file is empty (no examples).")

    columns = set(rows[0][1])
    for column in (text_column, label_column):
        if column is not None and column not in columns:
            raise TextFileError(f"{path}: no column {column!r}; columns found: {sorted(columns)}.")
    # Any row's: a JSONL file whose first object has no second text but later ones do is a pair
    # file with a row missing its second text (an error below), not single texts with the second
    # texts dropped.
    use_b = text_b_column is not None and any(text_b_column in row for _, row in rows)

    examples = []
    for line, row in rows:
        source = f"{path}:{line}"
        missing = [c for c in (text_column, label_column) + ((text_b_column,) if use_b else ())
                   if c is not None and c not in row]
        if missing:
            raise TextFileError(f"{source}: no field {missing[0]!r}; fields found: {sorted(row)}.")
        text = _text_field(row, text_column, source)
        text_b = _text_field(row, text_b_column, source) if use_b else None
        label = None if label_column is None else _label_field(row, label_column, source, regression)
        examples.append(TextExample(text, text_b, label, source))
    if not regression and label_column is not None:
        _check_class_labels(examples)
    logger.info("%s: %d examples, %d blank lines skipped.", path, len(examples), blank)
    return examples


def not_a_file(path):
    """Why `path` cannot be read as a data file, in words (`os.path.isfile` said no)."""
    if os.path.isdir(path):
        return f"{path}: is a directory; give a data file (inside it?)"
    if os.path.islink(path):
        return f"{path}: a symbolic link to nothing (or a loop of links)"
    return f"{path}: no such file"


def decode_text_file(path, encoding="utf-8", *, error=None):
    """The text of a data file; a byte not in `encoding` is an error naming the file and line.

    Shared by the readers of `pipelines/datasets` so that each reports a bad byte the same way; a
    NUL byte is one (`nul_message`: file, line and column; BERT's tokenizer would drop it). A
    UTF-16 or UTF-32 file (`wide_unicode_encoding`) read as another encoding is an error that names
    its encoding and the iconv command that saves it as UTF-8.

    Args:
        path: the file.
        encoding: its encoding; UTF-8 drops a leading byte order mark (Excel's "CSV UTF-8").
        error: the exception class to raise (the reader's own; default `TextFileError`).

    Raises:
        IsADirectoryError: `path` is a directory, named as `not_a_file` does (open() said only
            "[Errno 21] Is a directory").
    """
    if os.path.isdir(path):  # the CLI checks first; a Python caller got the bare OSError
        raise IsADirectoryError(not_a_file(path))
    with open(path, "rb") as f:
        data = f.read()
    return decode_text(data, path, encoding, error=error)


def decode_text(data, name, encoding="utf-8", *, error=None):
    """`decode_text_file` for bytes already read (standard input: `name` says where they came from)."""
    path = name
    packed = compressed_format(data)
    if packed:  # read as text it fails on its first odd byte, and the advice would be to iconv it
        raise (error or TextFileError)(
            f"{path}: the file is {packed[0]}, not text; {packed[1]} and give the file inside.")
    wide = None if codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")) else wide_unicode_encoding(data)
    if wide:  # read as UTF-8 or a code page, it fails on the wrong byte, or gives text with NULs between letters
        raise (error or TextFileError)(
            f"{path}:1: the file is {wide} ({_wide_unicode_evidence(data)}), not {encoding}; save it as UTF-8 "
            f"({iconv_advice(wide)}), or, from Python, pass encoding=\"{wide.lower()}\".")
    if encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        encoding = "utf-8-sig"  # Excel's "CSV UTF-8" starts with a byte order mark
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as bad:
        line, _ = line_position(data, bad.start)
        byte = data[bad.start:bad.start + 1].hex()
        code_page = legacy_code_page(data)
        examples = '"cp949"' if code_page == "cp949" else '"latin-1", "cp1252", ...'
        raise (error or TextFileError)(
            f"{path}:{line}: byte 0x{byte} is not valid {bad.encoding.replace('-sig', '')} "
            f"({bad.reason}); save it as UTF-8 (iconv -f {code_page} -t utf-8 FILE > FILE.utf8), or, from "
            f"Python, pass its encoding (encoding={examples}).") from None
    nul = text.find("\0")
    if nul >= 0:
        raise (error or TextFileError)(nul_message(path, text, nul))
    return text


def nul_message(name, text, offset):
    r"""Where the first NUL character (byte 0x00) of `text` is, and what to do: file, line, column.

    A NUL is no character of any text: BERT's tokenizer drops it, silently joining the words on
    either side (`good\0film` read as `goodfilm`). It comes from a damaged file (a crash leaves
    runs of NUL bytes) or from binary data pasted into a cell.

    >>> print(nul_message("f.csv", "text,label\ngood\0film,pos\n", 15))
    f.csv:2:5: a NUL byte (0x00), 1 in the file: 'good\x00film,pos' would be read as 'goodfilm,pos' (the tokenizer drops it); the file may be damaged: check it, or remove the NUL bytes (tr -d '\000' < FILE > FILE.clean).
    """
    line, line_start = line_position(text, offset)
    line_end = min([end for end in (text.find("\n", offset), text.find("\r", offset)) if end >= 0] or [len(text)])
    shown = text[max(line_start, offset - 30):min(line_end, offset + 30)]
    return (f"{name}:{line}:{offset - line_start + 1}: a NUL byte (0x00), "
            f"{text.count(chr(0))} in the file: {shown!r} would be read as {shown.replace(chr(0), '')!r} (the "
            "tokenizer drops it); the file may be damaged: check it, or remove the NUL bytes "
            "(tr -d '\\000' < FILE > FILE.clean).")


# How much of a file `legacy_code_page` reads: enough lines to tell, never the whole of a large file.
_CODE_PAGE_SAMPLE = 1 << 16


def legacy_code_page(data):
    r"""The code page the advice about bytes that are not UTF-8 names: `"cp949"` when they read as
    Korean (cp949 is EUC-KR with Korean Windows' extension, what Korean Windows saves as "ANSI"),
    else `"cp1252"` (Western Windows'). Converting Korean text from cp1252, as the old advice said,
    succeeds and silently turns every syllable into Latin mojibake.

    Korean: the first 64 KiB (whole lines) read as cp949 and most of their non-ASCII characters are
    Hangul syllables. Western text fails that test (an accented letter is mostly followed by an ASCII
    letter, which no cp949 lead byte above 0xC6 takes).

    Example:
        >>> legacy_code_page("text\t리뷰\n".encode("cp949")), legacy_code_page("café\n".encode("cp1252"))
        ('cp949', 'cp1252')
    """
    sample = data[:_CODE_PAGE_SAMPLE]
    if len(data) > len(sample) and b"\n" in sample:
        sample = sample[:sample.rindex(b"\n") + 1]  # never half a character at the end
    try:
        text = sample.decode("cp949")
    except UnicodeDecodeError:
        return "cp1252"
    wide = [character for character in text if ord(character) > 127]
    hangul = sum("\uac00" <= character <= "\ud7a3" for character in wide)
    return "cp949" if wide and 2 * hangul > len(wide) else "cp1252"


def no_token_message(where, field, record="row"):
    """What every data-file reader says of a text field with no token (`has_no_token`: empty,
    whitespace or control characters only), as the Python API refuses such a text."""
    return (f"{where}: field {field!r} is empty (no characters other than whitespace or control "
            f"characters: no token); remove the {record} or give it a text.")


def _text_field(row, column, source):
    """A text cell: a string with at least one token (`pipelines.tokenizer.tokenless`)."""
    text = row[column]
    if not isinstance(text, str):
        shown = "null" if text is None else f"{type(text).__name__} {json.dumps(text)[:40]}"
        raise TextFileError(f"{source}: field {column!r} is {shown}, not a text (a JSON string).")
    surrogate = lone_surrogate(source, column, text)
    if surrogate:
        raise TextFileError(surrogate)
    if has_no_token(text):
        raise TextFileError(no_token_message(source, column))
    _refuse_nul_escape(source, column, text)
    return text


def _refuse_nul_escape(source, column, value):
    """A JSON "\\u0000" escape in a text or label (the raw byte is refused when the file is decoded): the
    tokenizer drops it from a text, and a label of one is a class of its own ("pos\\x00" beside "pos")."""
    if "\0" in value:
        raise TextFileError(f"{source}: field {column!r}: a NUL character (\\u0000) at character "
                            f"{value.index(chr(0)) + 1}: {value[:60]!r} would be read as "
                            f"{value[:60].replace(chr(0), '')!r} (the tokenizer drops it); remove it")


def _label_field(row, column, source, regression):
    """A label cell: a non-empty string (a class), or a finite number (regression)."""
    label = row[column]
    if isinstance(label, (list, dict)):
        raise TextFileError(f"{source}: label {json.dumps(label)[:40]} is a "
                            f"{type(label).__name__}, not a single value.")
    if isinstance(label, bool):  # JSON's true / false, as written: Python's str would make "True"
        label = json.dumps(label)
    elif isinstance(label, float) and label.is_integer() and not regression:
        # JSON has one kind of number: 1.0 is the class 1 (Python's str would make a class "1.0",
        # apart from a row's 1 and from y=[1] in Python), as `bert_keras.tasks.inputs.label_key`
        label = int(label)
    label = "" if label is None else str(label).strip()
    if not label:
        raise TextFileError(f"{source}: empty label.")
    surrogate = lone_surrogate(source, column, label)
    if surrogate:
        raise TextFileError(surrogate)
    _refuse_nul_escape(source, column, label)
    if not regression:
        return label
    try:
        value = float(label)
    except ValueError:
        raise TextFileError(f"{source}: label {label!r} is not a number (regression).") from None
    if not math.isfinite(value):
        raise TextFileError(f"{source}: field {column!r}: label {label!r} is not a finite number "
                            "(regression targets cannot be NaN or infinite).")
    return value


def _check_class_labels(examples):
    """Class labels that are numbers: refuse fractions and one number written two ways."""
    numbers = {}
    for example in examples:
        try:
            value = float(example.label)
        except ValueError:
            continue
        if math.isfinite(value) and value != int(value):
            raise TextFileError(
                f"{example.source}: label {example.label!r} is a fractional number, read as a class "
                "name; for a numeric target pass regression=True (bert-keras: --regression).")
        first = numbers.setdefault(value, example)
        if first.label != example.label:
            raise TextFileError(
                f"{example.source}: label {example.label!r} is the number {first.label!r} of "
                f"{first.source} written another way, and would become a separate class; write "
                "each class one way, or pass regression=True (bert-keras: --regression) for a "
                "numeric target.")


def table_format(path, text):
    r"""`"csv"`, `"tsv"` or `"jsonl"` for a task file: its extension says, else its first line does
    (NSMC and Question_pair ship as `.txt`): a JSON object is JSONL, a tab TSV, a comma CSV; None
    when neither does.

    Example:
        >>> table_format("ratings_train.txt", "id\tdocument\tlabel\n1\tgood\t1\n")
        'tsv'
    """
    known = FORMATS.get(os.path.splitext(os.fspath(path))[1].lower())
    if known:
        return known
    first = next((line for line in text_lines(text) if line.strip()), "")
    if first.lstrip().startswith("{"):
        return "jsonl"
    return "tsv" if "\t" in first else "csv" if "," in first else None


def read_columns(path):
    """Column names of a CSV/TSV header or of the first JSONL object ([] when unreadable).

    Example:
        >>> read_columns("tests/data/tasks/pairs_train.tsv")
        ['text', 'text_b', 'label']
    """
    path = os.fspath(path)
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        file_format = table_format(path, f.read(64 * 1024))
        f.seek(0)
        if file_format == "jsonl":
            first = next((line for line in f if line.strip()), "{}")
            try:
                row = json.loads(first)
            except ValueError:
                return []
            return list(row) if isinstance(row, dict) else []
        try:  # read as `read_text_file` reads it: TSV quotes are characters, cells past csv's limit
            header = next((fields for _, fields in csv_records(_table_reader(f, file_format), path)
                           if any(field.strip() for field in fields)), [])
        except TextFileError:
            return []
        return [column.strip() for column in header]


def build_label_vocabulary(examples):
    """The sorted distinct labels of (training) examples: index = class id.

    Example:
        >>> build_label_vocabulary(read_text_file("tests/data/tasks/sentiment_train.csv"))
        ['neg', 'pos']
    """
    return sorted({example.label for example in examples})


def save_label_vocabulary(labels, path):
    """Writes the labels one per line (line i = class id i), atomically.

    Written to a temporary file in the same directory and renamed, so a
    reader never sees half a file. The directory is created if needed.

    Args:
        labels: list of label strings, in class-id order.
        path: destination, e.g. `<model_dir>/labels.txt`.

    Raises:
        pipelines.label_names.LabelNamesError (a ValueError): names that break the
            rule of `pipelines.label_names` (empty, padded, multi-line, duplicate).
    """
    labels = check_label_names([str(label) for label in labels], "labels", by_line=False)
    write_text(path, "".join(label + "\n" for label in labels))


def load_label_vocabulary(path):
    """Reads labels written by `save_label_vocabulary` (list, line i = class id i).

    Raises:
        pipelines.label_names.LabelNamesError (a ValueError): a file that breaks the
            rule of `pipelines.label_names`, naming the file and line.
    """
    return read_label_names(os.fspath(path))


def label_ids(examples, labels):
    """Class ids of `examples` under `labels` (list); unknown label -> error with file:line.

    Raises:
        TextFileError: a label not in `labels`, naming the file, line, value
            and the known labels.
    """
    index = {label: i for i, label in enumerate(labels)}
    ids = []
    for example in examples:
        if example.label not in index:
            raise TextFileError(f"{example.source}: label {example.label!r} is not in the label "
                                f"vocabulary {list(labels)}.")
        ids.append(index[example.label])
    return ids


def text_dataset(examples, tokenizer, *, labels=None, regression=False, seq_length=128,
                 batch_size=32, shuffle=False, static_shapes=False, bucket_boundaries=None, seed=None):
    """Encodes `TextExample`s into a batched dataset of `(x, y)` for `model.fit`.

    Example:
        >>> from pipelines import BertTokenizer
        >>> dev = read_text_file("tests/data/tasks/sentiment_train.csv")
        >>> ds = text_dataset(dev, BertTokenizer("vocab.txt"), labels=["neg", "pos"], batch_size=2)
        >>> x, y = next(iter(ds))
        >>> x["token_ids"].shape[0], y.numpy().tolist() == [["neg", "pos"].index(e.label) for e in dev[:2]]
        (2, True)

    Args:
        examples: from `read_text_file` (all single sentences or all pairs).
        tokenizer: a `pipelines.BertTokenizer`.
        labels: label vocabulary (class-id order); required unless `regression`.
        regression: float labels (`y` float32).
        seq_length, batch_size: packed length and batch size.
        shuffle: shuffle the examples every epoch (training).
        static_shapes, bucket_boundaries: padding mode
            (`pipelines.datasets.batching.batch`).
        seed: shuffle seed.

    Returns:
        `tf.data.Dataset` of `(x, y)`: int32 `token_ids` / `segment_ids` /
        `padding_mask` `[batch, length]` and `y` `[batch]`.
    """
    if not examples:
        raise ValueError("No examples.")
    if regression:
        targets = tf.constant([float(e.label) for e in examples], tf.float32)
    else:
        if labels is None:
            raise ValueError("Pass labels= (build_label_vocabulary of the training examples).")
        targets = tf.constant(label_ids(examples, labels), tf.int32)
    pairs = {e.text_b is not None for e in examples}
    if len(pairs) > 1:
        raise ValueError("Mixed single sentences and pairs.")
    texts = (tf.constant([e.text for e in examples]),)
    if pairs == {True}:
        texts += (tf.constant([e.text_b for e in examples]),)
    dataset = tf.data.Dataset.from_tensor_slices((texts, targets))
    if shuffle:
        dataset = dataset.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)
    dataset = batching.encode_texts(dataset, tokenizer, seq_length=seq_length)
    return batching.batch(dataset, batch_size, seq_length=seq_length, static_shapes=static_shapes,
                          bucket_boundaries=bucket_boundaries).prefetch(tf.data.AUTOTUNE)


# -- readers: yield (line number, dict) and count blank lines -------------------


def csv_records(reader, path, *, error=None):
    """`(line, fields)` of a csv reader; cells up to `MAX_CELL_CHARS`, its errors naming file and line.

    `line` is where the record starts: a quoted cell may run over several lines (an open quote
    swallows the lines after it), and the line to look at is the one that opened it. Every CSV
    reader of a task file goes through here (the csv module's own limit is 131,072 characters).

    Example:
        >>> list(csv_records(csv.reader(["text,label", '"good film",pos']), "f.csv"))
        [(1, ['text', 'label']), (2, ['good film', 'pos'])]

    Args:
        reader: a `csv.reader`.
        path: the file, for error messages.
        error: the exception class to raise (default `TextFileError`), e.g. the
            reading module's own format error.
    """
    error = error or TextFileError
    with _cell_limit(MAX_CELL_CHARS):
        while True:
            start = reader.line_num + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                hint = (" (a cell over 64 MiB: is a quote left open?)" if "field larger" in str(e)
                        else "")
                where = (f"{start}" if reader.line_num <= start
                         else f"{start} (the record starting there runs to line {reader.line_num})")
                raise error(f"{path}:{where}: not valid CSV ({e}){hint}.") from None
            yield start, fields


def field_count_message(path, line, fields, header):
    """`path:line: N fields, the header has M`, and where a cell holds line breaks (a quote left
    open takes the lines after it into one cell: `"good film,pos` read as one field, the rest of
    the file with it), that cell and what to do. The message of every CSV reader of a task file.

    >>> print(field_count_message("f.csv", 2, ["hi,a\\nyo,b"], ["text", "label"]))
    f.csv:2: 1 fields, the header has 2 (['text', 'label']). Field 1 runs over 2 lines ('hi,a\\nyo,b'): a quote (") opened on line 2 is closed on line 3 or not at all; close it, or write a quote inside a cell as two ("").
    """
    message = f"{path}:{line}: {len(fields)} fields, the header has {len(header)} ({header})."
    spanning = next((i for i, field in enumerate(fields) if "\n" in field or "\r" in field), None)
    if spanning is not None:
        cell = LINE_END.sub("\n", fields[spanning])
        breaks = cell.rstrip("\n").count("\n")  # a quote open to the end holds the last line break too
        message += (f" Field {spanning + 1} runs over {breaks + 1} lines ({cell[:60]!r}): a quote (\") opened on line "
                    f"{line} is closed on line {line + breaks} or not at all; close it, or write a quote inside a "
                    "cell as two (\"\").")
    return message


@contextlib.contextmanager
def _cell_limit(limit):
    # The limit is global to the csv module: raise it only while reading, then put it back.
    previous = csv.field_size_limit(max(limit, csv.field_size_limit()))
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def _table_reader(f, file_format):
    if file_format == "tsv":
        # GLUE-style TSV: tabs separate, quotes are ordinary characters.
        return csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    return csv.reader(f)


def _table_rows(f, path, file_format):
    reader = _table_reader(f, file_format)
    header = None
    rows, blank = [], 0
    for line, fields in csv_records(reader, path):
        if not fields or all(not field.strip() for field in fields):
            blank += 1
            continue
        if header is None:
            if len(fields) > MAX_COLUMNS:
                raise TextFileError(f"{path}:{line}: the header has {len(fields):,} columns, more than the "
                                    f"{MAX_COLUMNS:,} a task file may have (text, text_b, label and a few "
                                    "more); keep the columns the task reads.")
            header = [h.strip() for h in fields]
            repeated = sorted({h for h in header if header.count(h) > 1})
            if repeated:
                raise TextFileError(f"{path}:{line}: the header names {repeated[0]!r} {header.count(repeated[0])} "
                                    f"times ({header}); give each column its own name.")
            continue
        if len(fields) != len(header):
            raise TextFileError(field_count_message(path, line, fields, header))
        rows.append((line, dict(zip(header, fields))))
    if header is not None and not rows:
        raise TextFileError(f"{path}: the file is empty (a header, no examples).")
    return rows, blank


def _refuse_squad_file(text, path):
    """A `TextFileError` for a SQuAD-format file (SQuAD, KorQuAD: one JSON object whose "data" lists
    articles with "paragraphs"), which is span QA, not rows of texts: read as JSON Lines it failed
    with "not valid JSON" (indented) or "no column 'text'; columns found: ['data', 'version']"."""
    first = text.lstrip().split("\n", 1)[0]
    if not first.startswith("{"):
        return
    try:
        row = json.loads(first)
        if not (isinstance(row, dict) and "data" in row):
            return  # an ordinary JSON Lines row
        dataset = row
    except ValueError:  # not JSON (or a number too long to read, a bare ValueError)
        try:
            dataset = json.loads(text)  # an indented file: one object over many lines
        except ValueError:
            return  # the reader names the bad line
    articles = dataset.get("data") if isinstance(dataset, dict) else None
    if not (isinstance(articles, list) and articles and isinstance(articles[0], dict)
            and "paragraphs" in articles[0]):
        return
    version = str(dataset.get("version", ""))
    task = "korquad/v1.0" if version.lower().startswith("korquad_v1") else \
        "squad/v2.0" if version.lstrip("v") == "2.0" else "squad/v1.1"
    declared = f'"version": {json.dumps(version, ensure_ascii=False)}; ' if version else ""
    raise TextFileError(f"{path}: a SQuAD-format file ({declared}a \"data\" list of articles "
                        "with paragraphs and questions), not rows of texts: it is question answering (span QA), "
                        f"read as such: finetune / evaluate --task {task} --data FILE, predict --squad FILE "
                        "(Python: SpanQA, read_squad_json)")


def _jsonl_rows(f, path, file_format):
    rows, blank = [], 0
    for line, text in enumerate(f, start=1):
        if not text.strip():
            blank += 1
            continue
        if not rows and text.lstrip().startswith("["):  # pandas' to_json(orient="records"), a .json dump
            raise TextFileError(f"{path}:{line}: the file is a JSON array, not JSON Lines (one object per line); "
                                "write one object per line (pandas: to_json(..., orient=\"records\", lines=True); "
                                "jq -c '.[]' FILE > FILE.jsonl)")
        try:
            row = json.loads(text, object_pairs_hook=object_of_unique_keys)
        except json.JSONDecodeError as e:
            raise TextFileError(f"{path}:{line}: not valid JSON ({e}).") from None
        except ValueError as e:  # a number of thousands of digits: Python's int limit, raised bare
            raise TextFileError(f"{path}:{line}: not valid JSON: a number too long to read ({e}).") from None
        except RepeatedKeyError as e:
            raise TextFileError(f"{path}:{line}: the object names {e.args[0]!r} twice; give each field "
                                "its own name.") from None
        if not isinstance(row, dict):
            raise TextFileError(f"{path}:{line}: expected a JSON object, got {type(row).__name__}.")
        rows.append((line, row))
    return rows, blank
