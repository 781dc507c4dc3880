"""Sentence-similarity files (STS benchmark format): tab-separated, a header naming the columns.

KorSTS (`kakaobrain/KorNLUDatasets`, `KorSTS/sts-{train,dev}.tsv`: `genre filename year id score
sentence1 sentence2`) and GLUE's STS-B (`... sentence1 sentence2 score`) share the format up to the
order of the columns, so columns are found by their header names. Fields are not quoted (`"` is an
ordinary character in these files).

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "sts-dev.tsv")
>>> _ = open(path, "w", encoding="utf-8").write(
...     "genre\\tscore\\tsentence1\\tsentence2\\nnews\\t4.5\\t한 남자가 춤을 춘다.\\t남자가 춤춘다.\\n")
>>> read_sts_pairs(path)
([('한 남자가 춤을 춘다.', '남자가 춤춘다.', 4.5)], 0)
"""

import contextlib
import csv
import math

from pipelines.datasets.text_files import csv_records, decode_text_file
from pipelines.line_ends import text_lines

STS_COLUMNS = ("sentence1", "sentence2", "score")


class STSFormatError(ValueError):
    """An STS file whose header lacks a column this reader needs."""


def read_sts_pairs(path, limit=None):
    """`([(sentence1, sentence2, score), ...], skipped)` of an STS file, in file order.

    Rows with a missing sentence, an empty one or a score that is not a finite number ("nan" and
    "inf" included) are skipped and counted (KorSTS has none; a truncated download has some), not
    read as pairs.

    Args:
        path: the file.
        limit: keep the first `limit` pairs (None: all).

    Raises:
        STSFormatError: the file is empty or holds a header alone, is not UTF-8 text, holds a NUL
            byte or text that is not valid CSV, or its header lacks `sentence1`, `sentence2` or
            `score` (the message names the file, and the line). A sentence may be longer than the
            csv module's 131,072 characters (`text_files.csv_records`).
    """
    pairs, skipped = [], 0
    text = decode_text_file(path, error=STSFormatError)  # the shared reader: a bad byte named by line
    # Through `csv_records`, as every task file: a sentence over the csv module's 131,072 characters
    # stopped the reader with csv's bare "field larger than field limit", naming no file or line.
    records = csv_records(csv.reader(text_lines(text, keepends=True), delimiter="\t", quoting=csv.QUOTE_NONE),
                          path, error=STSFormatError)
    with contextlib.closing(records):  # the raised cell limit ends with the reading, also after `limit` rows
        rows = (fields for _, fields in records)
        header = next(rows, None)
        if header is None:
            raise STSFormatError(f"{path}: empty file; expected a header with {', '.join(STS_COLUMNS)}")
        missing = [name for name in STS_COLUMNS if name not in header]
        if missing:
            raise STSFormatError(f"{path}: line 1: the header {header} lacks {', '.join(missing)} "
                                 f"(an STS file: tab-separated, columns {', '.join(STS_COLUMNS)} among others)")
        first, second, score = (header.index(name) for name in STS_COLUMNS)
        for row in rows:
            try:
                pair = (row[first].strip(), row[second].strip(), float(row[score]))
            except (IndexError, ValueError):
                skipped += 1
                continue
            if not pair[0] or not pair[1] or not math.isfinite(pair[2]):  # "nan" / "inf" are not scores
                skipped += 1
                continue
            pairs.append(pair)
            if limit and len(pairs) == limit:
                break
        if not pairs and not skipped:  # scored, no pairs: a correlation of nothing
            raise STSFormatError(f"{path}: a header and no pairs; expected a row per pair after line 1")
    return pairs, skipped
