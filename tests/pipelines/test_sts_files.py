"""STS files (KorSTS, STS-B) read by their header's column names; bad files named."""

import os

import pytest

from pipelines.datasets.sts import STSFormatError, read_sts_pairs

KORSTS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "korean", "sts", "korsts")


def _write(tmp_path, text, name="sts.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_columns_are_found_by_name_in_korsts_and_sts_b_order(tmp_path):
    korsts = _write(tmp_path, "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n"
                              "main-captions\tMSRvid\t2012test\t0000\t5.000\t한 남자가 춤춘다.\t남자가 춤을 춘다.\n", "k.tsv")
    sts_b = _write(tmp_path, "index\tgenre\tsentence1\tsentence2\tscore\n"
                             "0\tmain\tA man is dancing.\tA man dances.\t4.8\n", "b.tsv")
    assert read_sts_pairs(korsts) == ([("한 남자가 춤춘다.", "남자가 춤을 춘다.", 5.0)], 0)
    assert read_sts_pairs(sts_b) == ([("A man is dancing.", "A man dances.", 4.8)], 0)


def test_malformed_rows_are_skipped_and_counted_and_quotes_are_text(tmp_path):
    path = _write(tmp_path, "\ufeffscore\tsentence1\tsentence2\r\n"
                            '1.5\t"quoted" text\tother\r\n'
                            "n/a\ta\tb\r\n"       # score not a number
                            "2.0\t\tb\r\n"        # empty sentence
                            "3.0\tonly one\r\n"   # a field missing
                            "nan\tp\tq\r\n"       # float() reads these, Spearman would be NaN
                            "inf\tp\tq\r\n"
                            "0.5\tx\ty\r\n")
    pairs, skipped = read_sts_pairs(path)
    assert pairs == [('"quoted" text', "other", 1.5), ("x", "y", 0.5)]
    assert skipped == 5
    assert read_sts_pairs(path, limit=1) == ([('"quoted" text', "other", 1.5)], 0)


def test_a_header_without_the_columns_or_an_empty_file_is_named(tmp_path):
    path = _write(tmp_path, "sentence_a\tsentence_b\tlabel\nx\ty\t1\n")
    with pytest.raises(STSFormatError, match=r"sts\.tsv: line 1: .*lacks sentence1, sentence2, score"):
        read_sts_pairs(path)
    with pytest.raises(STSFormatError, match=r"empty\.tsv: empty file"):
        read_sts_pairs(_write(tmp_path, "", "empty.tsv"))


@pytest.mark.skipif(not os.path.isdir(KORSTS), reason="../shared/data/korean/sts/korsts is not here")
def test_the_real_korsts_files_read_whole():
    dev, dev_skipped = read_sts_pairs(os.path.join(KORSTS, "sts-dev.tsv"))
    train, train_skipped = read_sts_pairs(os.path.join(KORSTS, "sts-train.tsv"))
    assert (len(dev), dev_skipped, len(train), train_skipped) == (1500, 0, 5749, 0)
    assert dev[0] == ("안전모를 가진 한 남자가 춤을 추고 있다.", "안전모를 쓴 한 남자가 춤을 추고 있다.", 5.0)
    assert all(0.0 <= score <= 5.0 for _, _, score in dev + train)


def test_a_bad_byte_or_a_nul_is_named_by_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes("score\tsentence1\tsentence2\n1.0\t좋다\t좋아\n".encode("utf-8") + b"2.0\t\xff\tb\n")
    with pytest.raises(STSFormatError, match=r"bad\.tsv:3: byte 0xff is not valid utf-8"):
        read_sts_pairs(str(path))
    path.write_bytes(b"score\tsentence1\tsentence2\n1.0\ta\x00b\tc\n")
    with pytest.raises(STSFormatError, match=r"bad\.tsv:2:.*NUL"):
        read_sts_pairs(str(path))


def test_a_sentence_over_the_csv_modules_limit_is_read(tmp_path):
    """A sentence over 131,072 characters (a document pasted as a pair) stopped the reader with csv's
    bare "field larger than field limit (131072)", naming no file or line → it is read, as in every
    task file (`text_files.csv_records`), and csv's limit is put back after the reading."""
    import csv

    long = "word " * 30_000  # 150,000 characters
    path = _write(tmp_path, f"score\tsentence1\tsentence2\n1.0\t{long}\tshort\n2.0\ta\tb\n")
    assert [(len(a), b, score) for a, b, score in read_sts_pairs(path)[0]] == [(len(long.strip()), "short", 1.0),
                                                                               (1, "b", 2.0)]
    assert read_sts_pairs(path, limit=1)[0][0][1:] == ("short", 1.0)
    assert csv.field_size_limit() == 131072


def test_a_csv_error_names_file_and_line(tmp_path, low_csv_cell_limit):
    path = _write(tmp_path, f"score\tsentence1\tsentence2\n1.0\ta\tb\n2.0\t{'x' * 200}\tb\n", "long.tsv")
    with pytest.raises(STSFormatError, match=r"long\.tsv:3: not valid CSV \(field larger than field limit"):
        read_sts_pairs(path)


def test_a_header_without_pairs_is_named_not_read_as_no_pairs(tmp_path):
    """A file of a header alone (a failed export) read as ([], 0): a score on nothing, no error."""
    with pytest.raises(STSFormatError, match=r"header\.tsv: a header and no pairs"):
        read_sts_pairs(_write(tmp_path, "score\tsentence1\tsentence2\n", "header.tsv"))
