"""Text task files as people really have them: Excel's BOM, Latin-1, huge cells, nulls, NaN, float labels.

Every refusal names the file and line (and the field where there is one) and says what to do.
"""

import csv

import pytest

from pipelines.label_names import LabelNamesError
from pipelines.datasets import text_files
from pipelines.datasets.text_files import TextFileError, read_text_file


def _write(path, content):
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


def _squad_source(context="Ann ran.", question="Who?", answer_start="0"):
    """A SQuAD file of one question, each field given as JSON source (its escapes kept as written)."""
    return ('{"data": [{"title": "t", "paragraphs": [{"context": "' + context + '", "qas": [{"id": "q1", '
            '"question": "' + question + '", "answers": [{"text": "Ann", "answer_start": ' + answer_start + '}]}]}]}]}')


def test_an_excel_csv_with_a_byte_order_mark_is_read(tmp_path):
    path = _write(tmp_path / "excel.csv", "\ufefftext,label\ngood film,pos\nbad film,neg\n")
    examples = read_text_file(path)
    assert [(e.text, e.label) for e in examples] == [("good film", "pos"), ("bad film", "neg")]
    assert text_files.read_columns(path) == ["text", "label"]
    jsonl = _write(tmp_path / "bom.jsonl", '\ufeff{"text": "good", "label": "pos"}\n')
    assert read_text_file(jsonl)[0].text == "good"


def test_a_latin_1_file_names_file_and_line_and_the_encoding_argument(tmp_path):
    path = _write(tmp_path / "latin.csv", "text,label\ngood,pos\ncaf\xe9 au lait,neg\n".encode("latin-1"))
    with pytest.raises(TextFileError, match=r"latin.csv:3: byte 0xe9 is not valid utf-8 .*encoding=\"latin-1\""):
        read_text_file(path)
    assert read_text_file(path, encoding="latin-1")[1].text == "caf\xe9 au lait"


def test_a_korean_cp949_file_is_told_to_convert_from_cp949_not_cp1252(tmp_path):
    # EUC-KR / Korean Windows' "ANSI" file: iconv -f cp1252 would "work" and turn every syllable into mojibake.
    text = "document\tlabel\n아 더빙.. 진짜 짜증나네요\t0\n재밌다\t1\n"
    path = _write(tmp_path / "nsmc.tsv", text.encode("cp949"))
    with pytest.raises(TextFileError, match=r"nsmc.tsv:2: byte 0xbe is not valid utf-8 .*iconv -f cp949 -t utf-8 .*"
                                            r"encoding=\"cp949\""):
        read_text_file(path, text_column="document")
    assert read_text_file(path, text_column="document", encoding="cp949")[1].text == "재밌다"
    assert text_files.legacy_code_page("café crème\n".encode("cp1252")) == "cp1252"


@pytest.mark.parametrize("codec, named", [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16BE"), ("utf-16-le", "UTF-16LE"),
                                          ("utf-32", "UTF-32")])
def test_a_utf_16_or_32_file_is_told_its_iconv_command_not_cp1252(tmp_path, codec, named):
    # Windows' "Unicode text" export: UTF-16 with a byte order mark; without one, NULs beside each letter.
    content = "text,label\ncaf\xe9 au lait,pos\nbad film,neg\n"
    path = _write(tmp_path / "unicode.csv", content.encode(codec))  # utf-16, utf-32: with a byte order mark
    with pytest.raises(TextFileError) as refused:
        read_text_file(path)
    message = str(refused.value)
    assert message.startswith(f"{path}:1: the file is {named} (")
    assert f"iconv -f {named} -t UTF-8 FILE > FILE.utf8" in message and f'encoding="{named.lower()}"' in message
    assert "cp1252" not in message
    assert read_text_file(path, encoding=named.lower())[0].text == "caf\xe9 au lait"


def test_a_compressed_file_is_named_as_such_not_told_to_convert_from_cp1252(tmp_path):
    # train.tsv.gz, or a sheet saved as .xlsx: the old error named byte 0x8b "not valid utf-8" and
    # advised iconv -f cp1252, which turns the compressed bytes into garbage text.
    import gzip
    import zipfile

    from pipelines.datasets.conll import ConllFormatError, read_conll
    from pipelines.datasets.squad import SquadFormatError, read_squad_json

    gz = _write(tmp_path / "train.tsv.gz", gzip.compress(b"text\tlabel\ngood\tpos\n"))
    with pytest.raises(TextFileError) as refused:
        read_text_file(gz, file_format="tsv")
    assert str(refused.value) == f"{gz}: the file is gzip-compressed, not text; decompress it (gunzip -k FILE) " \
                                 "and give the file inside."
    with zipfile.ZipFile(tmp_path / "train.xlsx", "w") as sheet:
        sheet.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(TextFileError, match=r"train.xlsx: the file is a zip archive \(or an .xlsx"):
        read_text_file(str(tmp_path / "train.xlsx"), file_format="csv")
    with pytest.raises(ConllFormatError, match=r"conll.gz: the file is gzip-compressed"):
        read_conll(_write(tmp_path / "conll.gz", gzip.compress(b"EU B-ORG\n")))
    with pytest.raises(SquadFormatError, match=r"dev.json.gz: the file is gzip-compressed"):
        read_squad_json(_write(tmp_path / "dev.json.gz", gzip.compress(b'{"data": []}')), is_training=False)


@pytest.mark.parametrize("suffix, delimiter", [(".csv", ","), (".tsv", "\t")])
def test_a_header_of_a_million_columns_is_refused_naming_file_line_and_count(tmp_path, suffix, delimiter):
    header = delimiter.join(["text", "label"] + [f"c{i}" for i in range(999_998)])
    path = _write(tmp_path / f"wide{suffix}", header + "\n" + delimiter.join(["good film", "pos"] + [""] * 999_998)
                  + "\n")
    with pytest.raises(TextFileError, match=rf"wide\{suffix}:1: the header has 1,000,000 columns, more than the "
                                            r"1,000 a task file may have"):
        read_text_file(path)
    assert text_files.MAX_COLUMNS == 1000
    at_the_limit = _write(tmp_path / f"limit{suffix}", delimiter.join(["text", "label"] + [f"c{i}" for i in range(998)]) + "\n"
                          + delimiter.join(["good film", "pos"] + [""] * 998) + "\n")
    assert read_text_file(at_the_limit)[0].label == "pos"


def test_a_cell_over_the_csv_modules_limit_is_read(tmp_path):
    long_text = "word " * 40000  # 200,000 characters: over the csv module's 131,072
    path = _write(tmp_path / "long.csv", f'text,label\n"{long_text}",pos\nshort,neg\n')
    limit = csv.field_size_limit()
    assert read_text_file(path)[0].text == long_text
    assert csv.field_size_limit() == limit  # the module's global limit is put back


def test_a_csv_error_names_file_and_line(tmp_path, low_csv_cell_limit):
    path = _write(tmp_path / "open_quote.csv", 'text,label\ngood,pos\n"' + "x" * 200 + ',neg\n')
    with pytest.raises(TextFileError, match=r"open_quote.csv:3: not valid CSV \(field larger than field limit"):
        read_text_file(path)


def test_a_record_over_several_lines_is_named_by_its_first_line(tmp_path):
    # A quoted cell may hold line breaks: the record's line is the one its quote opened on.
    path = _write(tmp_path / "multi.csv", 'text,label\ngood,pos\n"two\nlines\nhere",neg,extra\nfine,neg\n')
    with pytest.raises(TextFileError, match=r"multi.csv:3: 3 fields, the header has 2"):
        read_text_file(path)
    path = _write(tmp_path / "ok.csv", 'text,label\n"two\nlines",neg\n"one",pos\n')
    assert [(e.text, e.label) for e in read_text_file(path)] == [("two\nlines", "neg"), ("one", "pos")]


@pytest.mark.parametrize("value, shown", [("null", "null"), ("3", "int 3"), ('["a"]', "list")])
def test_jsonl_text_that_is_no_string_is_refused(tmp_path, value, shown):
    path = _write(tmp_path / "bad.jsonl", '{"text": "good", "label": "pos"}\n'
                                          f'{{"text": {value}, "label": "neg"}}\n')
    with pytest.raises(TextFileError, match=rf"bad.jsonl:2: field 'text' is {shown}.*not a text"):
        read_text_file(path)


@pytest.mark.parametrize("text", ['""', '"   "', '"\\t\\u3000"', '"\\u0000\\u200b "'])
def test_empty_or_whitespace_only_text_is_refused(tmp_path, text):
    path = _write(tmp_path / "empty.jsonl", f'{{"text": "good", "label": "pos"}}\n{{"text": {text}, "label": "neg"}}\n')
    with pytest.raises(TextFileError, match=r"empty.jsonl:2: field 'text' is empty \(no characters other "
                                            r"than whitespace or control characters: no token\)"):
        read_text_file(path)
    pairs = _write(tmp_path / "pairs.tsv", "text\ttext_b\tlabel\na\tb\tpos\nc\t \tneg\n")
    with pytest.raises(TextFileError, match=r"pairs.tsv:3: field 'text_b' is empty"):
        read_text_file(pairs)


@pytest.mark.parametrize("labels, message", [
    (["0.1", "0.7", "0.3"], r"f.csv:2: label '0.1' is a fractional number.*--regression"),
    (["1", "0", "1.0"], r"f.csv:4: label '1.0' is the number '1' of .*f.csv:2 written another way.*--regression"),
])
def test_numbers_as_class_labels_point_to_regression(tmp_path, labels, message):
    rows = "".join(f"text {i},{label}\n" for i, label in enumerate(labels))
    path = _write(tmp_path / "f.csv", "text,label\n" + rows)
    with pytest.raises(TextFileError, match=message):
        read_text_file(path)
    assert [e.label for e in read_text_file(path, regression=True)] == [float(label) for label in labels]


def test_integer_class_labels_are_still_classes(tmp_path):
    path = _write(tmp_path / "ints.csv", "text,label\na,0\nb,1\nc,2\n")
    assert text_files.build_label_vocabulary(read_text_file(path)) == ["0", "1", "2"]


def test_jsonl_boolean_labels_are_read_as_written_and_match_a_csv_dev_file(tmp_path):
    # JSON true / false were Python's "True" / "False": a dev CSV saying true / false was refused
    # as labels the training file never had, and predictions said "True".
    train = _write(tmp_path / "train.jsonl", '{"text": "spam offer", "label": true}\n{"text": "hi mum", "label": false}\n')
    dev = _write(tmp_path / "dev.csv", "text,label\nfree offer,true\nhello,false\n")
    labels = text_files.build_label_vocabulary(read_text_file(train))
    assert labels == ["false", "true"]
    assert text_files.label_ids(read_text_file(dev), labels) == [1, 0]


def test_jsonl_whole_float_labels_are_the_integer_classes(tmp_path):
    # JSON has one kind of number: labels 1.0 / 0.0 became classes "1.0" / "0.0" (a dev CSV saying
    # 1 / 0, or y=[1, 0] in Python, was refused), and a file mixing 1 and 1.0 was refused.
    train = _write(tmp_path / "train.jsonl", '{"text": "good", "label": 1.0}\n{"text": "bad", "label": 0.0}\n'
                                             '{"text": "fine", "label": 1}\n')
    dev = _write(tmp_path / "dev.csv", "text,label\nnice,1\nawful,0\n")
    labels = text_files.build_label_vocabulary(read_text_file(train))
    assert labels == ["0", "1"]
    assert text_files.label_ids(read_text_file(dev), labels) == [1, 0]
    assert [e.label for e in read_text_file(train, regression=True)] == [1.0, 0.0, 1.0]
    fraction = _write(tmp_path / "fraction.jsonl", '{"text": "good", "label": 0.5}\n')
    with pytest.raises(TextFileError, match=r"fraction.jsonl:1: label '0.5' is a fractional number.*--regression"):
        read_text_file(fraction)


def test_jsonl_second_texts_after_a_first_object_without_one_are_not_dropped(tmp_path):
    # The first object decided: without "text_b" there, every later row's text_b was silently dropped
    # and the file read as single texts.
    path = _write(tmp_path / "pairs.jsonl", '{"text": "a cat", "label": "x"}\n'
                                            '{"text": "a dog", "text_b": "it barks", "label": "y"}\n')
    with pytest.raises(TextFileError, match=r"pairs.jsonl:1: no field 'text_b'"):
        read_text_file(path)
    assert [e.text_b for e in read_text_file(path, text_b_column=None)] == [None, None]  # asked: single texts


@pytest.mark.parametrize("content", ['[{"text": "a", "label": "x"}, {"text": "b", "label": "y"}]',
                                     '[\n  {"text": "a", "label": "x"},\n  {"text": "b", "label": "y"}\n]\n'])
def test_a_json_array_file_is_told_to_be_json_lines(tmp_path, content):
    # pandas' to_json(orient="records") writes one array: it was "expected a JSON object, got list" or
    # "not valid JSON (Expecting value: line 2 column 1 (char 2))".
    path = _write(tmp_path / "train.json", content)
    with pytest.raises(TextFileError, match=r"train.json:1: the file is a JSON array, not JSON Lines .*lines=True"):
        read_text_file(path)


@pytest.mark.parametrize("version, indent, task", [("KorQuAD_v1.0_dev", None, "korquad/v1.0"),
                                                   ("1.1", 1, "squad/v1.1"), ("v2.0", 2, "squad/v2.0"),
                                                   (None, None, "squad/v1.1")])
def test_a_squad_file_given_as_a_text_file_is_told_its_task(tmp_path, version, indent, task):
    # `--task csv:KorQuAD_v1.0_dev.json` said "no column 'text'; columns found: ['data', 'version']" with
    # the hint "name the column with --text-column"; an indented SQuAD file said "not valid JSON".
    import json

    article = {"title": "임종석", "paragraphs": [{"context": "1989년 2월 15일 지명수배되었다.", "qas": [
        {"id": "q1", "question": "언제?", "answers": [{"text": "1989년 2월 15일", "answer_start": 0}]}]}]}
    content = {"data": [article], **({"version": version} if version else {})}
    path = _write(tmp_path / "dev.json", json.dumps(content, ensure_ascii=False, indent=indent))
    with pytest.raises(TextFileError, match=rf"dev.json: a SQuAD-format file .*question answering .*--task {task} "):
        read_text_file(path)
    # An ordinary JSON Lines file with a "data" field is rows, as before.
    path = _write(tmp_path / "rows.jsonl", '{"text": "a", "data": [1], "label": "x"}\n')
    assert [e.text for e in read_text_file(path)] == ["a"]


@pytest.mark.parametrize("target", ["nan", "inf", "-Infinity", "1e400"])
def test_non_finite_regression_targets_are_refused(tmp_path, target):
    path = _write(tmp_path / "r.csv", f"text,label\na,0.5\nb,{target}\n")
    with pytest.raises(TextFileError, match=rf"r.csv:3: field 'label': label '{target}' is not a finite number"):
        read_text_file(path, regression=True)


def test_jsonl_nan_regression_target_is_refused(tmp_path):
    path = _write(tmp_path / "r.jsonl", '{"text": "a", "label": 0.5}\n{"text": "b", "label": NaN}\n')
    with pytest.raises(TextFileError, match=r"r.jsonl:2: field 'label'.*not a finite number"):
        read_text_file(path, regression=True)


def test_label_vocabulary_files_follow_the_one_rule(tmp_path):
    duplicate = _write(tmp_path / "labels.txt", "pos\npos\n")
    with pytest.raises(LabelNamesError, match=r"labels.txt:2: duplicate label 'pos'"):
        text_files.load_label_vocabulary(duplicate)
    bom = _write(tmp_path / "bom.txt", "\ufeffneg\npos\n")
    assert text_files.load_label_vocabulary(bom) == ["neg", "pos"]
    with pytest.raises(ValueError, match=r"labels\[1\]: duplicate label 'a'"):
        text_files.save_label_vocabulary(["a", "a"], tmp_path / "out.txt")


def test_a_compressed_or_utf_16_label_file_is_named_as_such_not_only_not_utf8(tmp_path):
    """labels.txt.gz renamed labels.txt, or a UTF-16 export, was "labels.txt:1: not UTF-8 (invalid start byte)"."""
    import gzip

    from pipelines.label_names import read_label_names

    packed = _write(tmp_path / "labels.txt", gzip.compress(b"neg\npos\n"))
    with pytest.raises(LabelNamesError, match=r"labels.txt: the file is gzip-compressed, not a label file; "):
        read_label_names(packed)
    wide = _write(tmp_path / "wide.txt", "neg\npos\n".encode("utf-16"))
    with pytest.raises(LabelNamesError, match=r"wide.txt: the file is UTF-16; label files are UTF-8: .*iconv"):
        read_label_names(wide)


def test_the_other_readers_name_file_and_line_of_a_bad_byte(tmp_path):
    from pipelines.datasets.conll import ConllFormatError, read_conll
    from pipelines.datasets.squad import SquadFormatError, read_squad_json
    from pipelines.datasets.swag import SwagFormatError, read_swag_csv

    conll = _write(tmp_path / "train.conll", "EU B-ORG\nrejects O\n\nCaf\xe9 B-LOC\n".encode("latin-1"))
    with pytest.raises(ConllFormatError, match=r"train.conll:4: byte 0xe9 is not valid utf-8"):
        read_conll(conll)
    swag = _write(tmp_path / "swag.csv", b"sent1,sent2\n\xff,b\n")
    with pytest.raises(SwagFormatError, match=r"swag.csv:2: byte 0xff"):
        read_swag_csv(swag)
    squad = _write(tmp_path / "dev.json", b'{"data": [\n"\xe9"]}')
    with pytest.raises(SquadFormatError, match=r"dev.json:2: byte 0xe9"):
        read_squad_json(squad, is_training=False)


def test_a_quote_left_open_is_named_as_such_not_only_as_a_wrong_field_count(tmp_path):
    """`"good film,pos` opened a quoted cell that took the rest of the file: the error said only
    "1 fields, the header has 2", at a line that looks right."""
    from pipelines.datasets.swag import SwagFormatError, read_swag_csv

    path = _write(tmp_path / "open.csv", 'text,label\n"good film,pos\nbad film,neg\nfine,pos\n')
    with pytest.raises(TextFileError, match=r"open.csv:2: 1 fields, the header has 2 \(\['text', 'label'\]\)\. Field 1 "
                                            r"runs over 3 lines \('good film,pos\\nbad film,neg\\nfine,pos\\n'\): a quote "
                                            r"\(\"\) opened on line 2 is closed on line 4 or not at all; close it"):
        read_text_file(path)
    path = _write(tmp_path / "cols.csv", "text,label\ngood,pos,extra\n")  # no line break: the count alone
    with pytest.raises(TextFileError, match=r"cols.csv:2: 3 fields, the header has 2 \(\['text', 'label'\]\)\.$"):
        read_text_file(path)
    header = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    path = _write(tmp_path / "swag.csv", header + '0,v,1,s,"He sat.,He,gold,a,b,c,d,0\n1,v,1,s,x,y,gold,a,b,c,d,1\n')
    with pytest.raises(SwagFormatError, match=r"swag.csv:2: 5 fields, the header has 12 .* Field 5 runs over 2 lines"):
        read_swag_csv(path)


@pytest.mark.parametrize("row, field", [(",He,a,b,c,d", "sent1"), ("He sat.,He,a, ,c,d", "ending1"),
                                        ("\u3000,He,a,b,c,d", "sent1")])
def test_a_swag_row_with_no_context_or_an_empty_ending_is_refused_as_the_api_does(tmp_path, row, field):
    """MultipleChoice refused an empty context or ending from Python; the CSV reader took them."""
    from pipelines.datasets.swag import SwagFormatError, read_swag_csv

    path = _write(tmp_path / "swag.csv", f"sent1,sent2,ending0,ending1,ending2,ending3,label\nA,B,a,b,c,d,0\n{row},0\n")
    with pytest.raises(SwagFormatError, match=rf"swag.csv:3: field '{field}' is empty \(no characters other "
                                              r"than whitespace or control characters: no token\); remove the row"):
        read_swag_csv(path)
    no_start = _write(tmp_path / "start.csv", "sent1,sent2,ending0,ending1,ending2,ending3,label\nHe sat.,,a,b,c,d,0\n")
    assert read_swag_csv(no_start)[0].start == ""  # sent2, the endings' shared start, may be empty


@pytest.mark.parametrize("field", ["question", "context"])
def test_a_squad_question_or_context_with_no_token_is_refused_naming_it(tmp_path, field):
    import json

    from pipelines.datasets.squad import SquadFormatError, read_squad_json

    qa = {"id": "q1", "question": "Who ran?", "answers": [], "is_impossible": True}
    paragraph = {"context": "Ann ran.", "qas": [qa]}
    (qa if field == "question" else paragraph)[field] = " \t\u200b"
    path = _write(tmp_path / "dev.json", json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [paragraph]}]}))
    with pytest.raises(SquadFormatError, match=rf"dev.json: data\[0\]\[\"paragraphs\"\]\[0\]\[\"qas\"\]\[0\] "
                                               rf"\(id 'q1'\): field '{field}' is empty .*no token\); remove the question"):
        read_squad_json(path, is_training=False)


def test_a_squad_key_written_twice_is_refused_as_the_jsonl_reader_does(tmp_path):
    """{"answer_start": 0, ..., "answer_start": 4}: json kept the last value, silently."""
    from pipelines.datasets.squad import SquadFormatError, read_squad_json

    path = _write(tmp_path / "dev.json", '{"data": [{"title": "t", "paragraphs": [{"context": "Ann ran.", "qas": [\n'
                                         '{"id": "q1", "question": "Who?", "question": "What?", '
                                         '"answers": [{"text": "Ann", "answer_start": 0}]}]}]}]}')
    with pytest.raises(SquadFormatError, match=r"dev.json: an object names 'question' twice .*its own name"):
        read_squad_json(path, is_training=False)


def test_every_reader_given_a_directory_says_so_naming_it(tmp_path):
    """From Python each reader raised open()'s bare "[Errno 21] Is a directory" (the CLI checks first)."""
    from pipelines.datasets.conll import read_conll
    from pipelines.datasets.squad import read_squad_json
    from pipelines.datasets.sts import read_sts_pairs
    from pipelines.datasets.swag import read_swag_csv
    from pipelines.label_names import read_label_names

    directory = tmp_path / "data"
    directory.mkdir()
    for read in (read_text_file, read_conll, read_swag_csv, read_sts_pairs, read_label_names,
                 lambda path: read_squad_json(path, is_training=False)):
        with pytest.raises(IsADirectoryError, match=r"data: is a directory; give (a data file|the label file).*inside it") as error:
            read(str(directory))
        assert "Errno" not in str(error.value)


def test_a_swag_label_written_as_a_float_reads_as_its_ending_and_a_fraction_is_named(tmp_path):
    """pandas writes an int column that held a NaN as floats ("1.0"): such a SWAG file was refused
    ("label '1.0' is not one of 0..3"), where HF's run_swag reads the class. A whole number reads as
    its ending; "1.5" is refused naming the file, line and field."""
    import re

    from pipelines.datasets.swag import SwagFormatError, read_swag_csv

    header = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    path = _write(tmp_path / "swag.csv", header + "0,v,1,s,x,y,gold,a,b,c,d,1.0\n1,v,1,s,x,y,gold,a,b,c,d,3\n"
                                                  "2,v,1,s,x,y,gold,a,b,c,d,0.00\n")
    assert [example.label for example in read_swag_csv(path)] == [1, 3, 0]
    for bad in ("1.5", "4.0", "-1", "nan", "one", ""):
        path = _write(tmp_path / "bad.csv", header + f"0,v,1,s,x,y,gold,a,b,c,d,0\n1,v,1,s,x,y,gold,a,b,c,d,{bad}\n")
        with pytest.raises(SwagFormatError, match=rf"bad.csv:3: field 'label': '{re.escape(bad)}' is not the index "
                                                  r"of an ending, one of 0..3"):
            read_swag_csv(path)


def test_a_swag_label_of_thousands_of_digits_is_named_not_a_python_int_limit(tmp_path):
    """A label of 5,000 digits ("000...01" included: leading zeros are read) stopped the reader with
    Python's "Exceeds the limit (4300 digits) for integer string conversion", naming no file, line
    or field → a SwagFormatError like any label that is not an ending's index; leading zeros still read."""
    from pipelines.datasets.swag import SwagFormatError, read_swag_csv

    header = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    path = _write(tmp_path / "zeros.csv", header + "0,v,1,s,x,y,gold,a,b,c,d," + "0" * 5000 + "2.0\n")
    assert [example.label for example in read_swag_csv(path)] == [2]
    for bad in ("9" * 5000, "1" + "0" * 5000 + ".0"):
        path = _write(tmp_path / "long.csv", header + f"0,v,1,s,x,y,gold,a,b,c,d,{bad}\n")
        with pytest.raises(SwagFormatError, match=r"long.csv:2: field 'label': '[0-9]+.* is not the index of an "
                                                  r"ending, one of 0..3"):
            read_swag_csv(path)


@pytest.mark.parametrize("name, content, where, shown", [
    ("cell.csv", 'text,label\n"good\x00film",pos\nbad film,neg\n', "cell.csv:2:6", r"'\"goodfilm\",pos'"),
    ("excel.csv", "\ufefftext,label\r\ngood film,pos\r\nbad\x00 film,neg\r\n", "excel.csv:3:4", r"'bad film,neg'"),
    ("glue.tsv", "text\tlabel\ngood film\t1\nbad film\t\x000\n", "glue.tsv:3:10", r"'bad film\\t0'"),
    ("rows.jsonl", '{"text": "good film", "label": "pos"}\n{"text": "bad\x00film", "label": "neg"}\n',
     "rows.jsonl:2:14", r"'{\"text\": \"badfilm\", \"label\": \"neg\"}'"),
])
def test_a_nul_byte_in_a_cell_names_file_line_and_column(tmp_path, name, content, where, shown):
    # 'good\x00film' was read silently, and the tokenizer drops a NUL: the example trained as "goodfilm".
    path = _write(tmp_path / name, content)
    with pytest.raises(TextFileError, match=rf"{where}: a NUL byte \(0x00\), 1 in the file: .* would be read as "
                                            rf"{shown} .*tr -d '\\000'"):
        read_text_file(path)


def test_the_other_readers_name_file_line_and_column_of_a_nul_byte(tmp_path):
    from pipelines.datasets.conll import ConllFormatError, read_conll
    from pipelines.datasets.swag import SwagFormatError, read_swag_csv

    conll = _write(tmp_path / "train.conll", "EU B-ORG\nrejects O\n\nPa\x00ris B-LOC\n")
    with pytest.raises(ConllFormatError, match=r"train.conll:4:3: a NUL byte"):
        read_conll(conll)
    damaged = _write(tmp_path / "swag.csv", "sent1,sent2\na,b\n" + "\x00" * 4096)  # a crash's tail of zeros
    with pytest.raises(SwagFormatError, match=r"swag.csv:3:1: a NUL byte \(0x00\), 4096 in the file"):
        read_swag_csv(damaged)


def test_crlf_a_quoted_line_break_and_a_byte_order_mark_together_are_read_as_written(tmp_path):
    path = _write(tmp_path / "excel.csv", '\ufefftext,label\r\n"first line\r\nsecond line",pos\r\nbad film,neg\r\n')
    examples = read_text_file(path)
    assert [(e.text, e.label, e.source.rsplit(":", 1)[1]) for e in examples] == [
        ("first line\r\nsecond line", "pos", "2"), ("bad film", "neg", "4")]


@pytest.mark.parametrize("end", ["\r", "\r\n", "\r\r\n"])
def test_a_conll_file_of_cr_line_ends_is_read_word_by_word(tmp_path, end):
    """A CoNLL file with lone CR line ends (classic Mac, some exports) was read as one line: one
    sentence of one word, 'EU', tagged with the last line's 'B-PER', every other word dropped
    without a word → each CR ends a line, as CRLF and LF do, and lines are numbered by it.
    CRs before an LF end nothing more ("\r\r\n": Python on Windows writing "\r\n" in text mode),
    as the corpus readers read them (`corpus.file_lines`): read as universal newlines, each word of
    such a file was a sentence of its own."""
    from pipelines.datasets.conll import read_conll

    path = _write(tmp_path / "mac.conll", end.join(["EU NNP B-ORG", "rejects VBZ O", "", "Peter NNP B-PER", ""]))
    assert [(s.words, s.tags, s.source.rsplit(":", 1)[1]) for s in read_conll(path)] == [
        (["EU", "rejects"], ["B-ORG", "O"], "1"), (["Peter"], ["B-PER"], "4")]


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r", "\r\r\n", "mixed"])
def test_every_reader_and_every_message_count_lines_alike(tmp_path, end):
    """A line ended at "\r\r\n" (Python on Windows writing "\r\n" in text mode) once in the CoNLL and
    corpus readers, but twice (a line and a blank one) in the task files' csv reader, the STS and SWAG
    readers, `--input` texts and `line_position`: a bad byte on line 3 of such a file was "line 5", STS
    counted two skipped rows, `predict --input` refused "line 2: an empty line", and a label file
    refused "label 'neg\\r' spans several lines" (a lone CR too) → one rule for all
    (`pipelines.line_ends`: LF, CRLF or a lone CR, CRs before an LF with it)."""
    from pipelines import line_ends
    from pipelines.corpus import read_corpus
    from pipelines.datasets.conll import ConllFormatError, read_conll
    from pipelines.datasets.sts import read_sts_pairs
    from pipelines.label_names import read_label_names
    from pipelines.datasets.swag import SwagFormatError, read_swag_csv
    from serving.text_requests import read_texts

    def join(lines):
        ends = ["\r\r\n", "\n", "\r\n", "\r"] if end == "mixed" else [end]  # (a CR then a blank CRLF line is CRCRLF)
        return "".join(line + ends[i % len(ends)] for i, line in enumerate(lines))

    assert line_ends.text_lines(join(["a", "b", "", "c"])) == ["a", "b", "", "c"]
    assert line_ends.line_position(join(["a", "b", "c"]), len(join(["a", "b"]))) == (3, len(join(["a", "b"])))
    labels = _write(tmp_path / "labels.txt", join(["neg", "pos", "neg"]))
    with pytest.raises(LabelNamesError, match=r"labels.txt:3: duplicate label 'neg' \(also line 1\)"):
        read_label_names(labels)
    assert read_label_names(_write(tmp_path / "two.txt", join(["neg", "pos"]))) == ["neg", "pos"]
    refused = [  # (file, its lines, reader, error, what the error says)
        ("t.csv", ["text,label", "good,pos", "bad,neg,x"], read_text_file, TextFileError,
         r"t.csv:3: 3 fields, the header has 2"),
        ("nul.tsv", ["text\tlabel", "good\tpos", "bad\x00\tneg"], read_text_file, TextFileError,
         r"nul.tsv:3:4: a NUL byte"),
        ("t.jsonl", ['{"text": "good", "label": "pos"}', "", '{"text": "bad",'], read_text_file, TextFileError,
         r"t.jsonl:3: not valid JSON"),
        ("q.csv", ["text,label", '"two', 'lines",pos', "bad,neg,x"], read_text_file, TextFileError,
         r"q.csv:4: 3 fields"),
        ("swag.csv", ["sent1,sent2,ending0,ending1,ending2,ending3,label", "A,b,c,d,e,f,0", "A,b,c,d,e,f,0,x"],
         read_swag_csv, SwagFormatError, r"swag.csv:3: 8 fields"),
        ("t.conll", ["EU B-ORG", "", "Paris B-LOC LOC"], read_conll, ConllFormatError, r"t.conll:3: 3 columns"),
    ]
    for name, lines, reader, error, message in refused:
        with pytest.raises(error, match=message):
            reader(_write(tmp_path / name, join(lines)))
    sts = _write(tmp_path / "sts.tsv", join(["genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2",
                                             "a\tb\tc\td\t1.5\tOne.\tTwo.", "a\tb\tc\td\t2\tThree.\tFour."]))
    assert read_sts_pairs(sts) == ([("One.", "Two.", 1.5), ("Three.", "Four.", 2.0)], 0)
    texts = _write(tmp_path / "texts.txt", join(["one", "two", "", "three"]))
    assert read_texts(texts, keep_blank=True) == ["one", "two", "", "three"]
    with pytest.raises(Exception, match=r"texts.txt, line 3: an empty line"):
        read_texts(texts, refuse_blank=True)
    corpus = _write(tmp_path / "corpus.txt", join(["One.", "Two.", "", "Caf\udce9."]).encode("utf-8", "surrogateescape"))
    with pytest.raises(Exception, match=r"corpus.txt, line 4: not valid UTF-8"):
        read_corpus(corpus)


def test_a_bad_byte_or_a_nul_in_a_file_of_cr_line_ends_names_its_own_line(tmp_path):
    """Lines were counted at LF alone: every bad byte of a file of lone CR line ends was on "line 1",
    though the reader (and `--input FILE`) reads each CR as a line end → counted as they are read."""
    from pipelines.datasets.conll import ConllFormatError, read_conll

    korean = _write(tmp_path / "cp949.csv", "text,label\rgood,pos\r좋은,neg\r".encode("cp949"))
    with pytest.raises(TextFileError, match=r"cp949.csv:3: byte 0xc1 is not valid utf-8 .*iconv -f cp949"):
        read_text_file(korean)
    nul = _write(tmp_path / "nul.csv", "text,label\r\ngood,pos\rbad\x00film,neg\rfine,pos\r")
    with pytest.raises(TextFileError, match=r"nul.csv:3:4: a NUL byte \(0x00\), 1 in the file: 'bad\\x00film,neg' "
                                            r"would be read as 'badfilm,neg'"):
        read_text_file(nul)
    conll = _write(tmp_path / "mac.conll", "EU B-ORG\rrejects O\r\rCaf\xe9 B-LOC\r".encode("latin-1"))
    with pytest.raises(ConllFormatError, match=r"mac.conll:4: byte 0xe9 is not valid utf-8"):
        read_conll(conll)


def test_half_a_surrogate_pair_in_a_json_string_is_named_by_file_line_and_field(tmp_path):
    """A JSON escape of half a surrogate pair ("\\ud83d" alone: an emoji cut in two) was read as text;
    TensorFlow refused it later with "Error converting unicode string while converting Python
    sequence to Tensor", naming no file, line or field (and a label of one could not be saved)."""
    from pipelines.datasets.squad import SquadFormatError, read_squad_json

    for name, row, refusal in [
            ("rows.jsonl", '{"text": "great \\ud83d film", "label": "pos"}',
             r"rows.jsonl:2: field 'text': character 7 is \\ud83d, half of a UTF-16 surrogate pair .*write the "
             r"character itself"),
            ("labels.jsonl", '{"text": "good film", "label": "\\udc00"}', r"labels.jsonl:2: field 'label': "
             r"character 1 is \\udc00")]:
        path = _write(tmp_path / name, '{"text": "good film", "label": "pos"}\n' + row + "\n")
        with pytest.raises(TextFileError, match=refusal):
            read_text_file(path)
    whole = _write(tmp_path / "emoji.jsonl", '{"text": "great \\ud83d\\ude00 film", "label": "pos"}\n'
                                             '{"text": "bad", "label": "neg"}\n')
    assert read_text_file(whole)[0].text == "great \U0001f600 film"
    squad = _write(tmp_path / "dev.json", _squad_source(context="Ann ran \\ud83d."))
    with pytest.raises(SquadFormatError, match=r"dev.json: data\[0\]\[\"paragraphs\"\]\[0\]\[\"qas\"\]\[0\] \(id 'q1'\): "
                                               r"field 'context': character 9 is \\ud83d"):
        read_squad_json(squad, is_training=False)


def test_a_json_number_of_thousands_of_digits_is_named_not_a_python_int_limit(tmp_path):
    """Python's json reads a number of over 4,300 digits with a bare ValueError ("Exceeds the limit
    (4300 digits) for integer string conversion"), and int() of a SQuAD answer_start string of as
    many did the same: the message named no file or line."""
    from pipelines.datasets.squad import SquadFormatError, read_squad_json

    for content in ['{"text": "good", "label": ' + "9" * 5000 + "}\n",
                    '{"text": "good", "label": "pos"}\n{"text": "bad", "label": ' + "9" * 5000 + "}\n"]:
        path = _write(tmp_path / "rows.jsonl", content)
        with pytest.raises(TextFileError, match=r"rows.jsonl:\d: not valid JSON: a number too long to read"):
            read_text_file(path)

    with pytest.raises(SquadFormatError, match=r"dev.json: not valid JSON: a number too long to read"):
        read_squad_json(_write(tmp_path / "dev.json", _squad_source(answer_start="9" * 5000)), is_training=False)
    with pytest.raises(SquadFormatError, match=r"answers\[0\] has no integer 'answer_start' \(got '99999.*\(5000 characters\)\)"):
        read_squad_json(_write(tmp_path / "dev.json", _squad_source(answer_start='"' + "9" * 5000 + '"')), is_training=False)
    assert read_squad_json(_write(tmp_path / "dev.json", _squad_source(answer_start='"0"')),
                           is_training=False)[0].answers == [{"text": "Ann", "answer_start": 0}]


def test_a_nul_written_as_a_json_escape_is_named_as_the_raw_byte_is(tmp_path):
    """"good\\u0000film" in JSON was read as text: the tokenizer drops the NUL and trained on
    "goodfilm", where the raw byte is refused naming file, line and column → refused naming the field."""
    from pipelines.datasets.squad import SquadFormatError, read_squad_json

    path = _write(tmp_path / "rows.jsonl", '{"text": "good\\u0000film", "label": "pos"}\n')
    with pytest.raises(TextFileError, match=r"rows.jsonl:1: field 'text': a NUL character \(\\u0000\) at character 5: "
                                            r"'good\\x00film' would be read as 'goodfilm'"):
        read_text_file(path)
    squad = _write(tmp_path / "dev.json", _squad_source(question="Who\\u0000?"))
    with pytest.raises(SquadFormatError, match=r"dev.json: .*\(id 'q1'\): field 'question': a NUL character "
                                               r"\(\\u0000\) at character 4"):
        read_squad_json(squad, is_training=False)


def test_a_nul_escape_in_a_jsonl_label_is_named_as_in_its_text(tmp_path):
    """A "\\u0000" escape in a JSONL text is refused (d81f1b1's rule), but one in its label was read
    as a class of its own ("pos\\x00" beside "pos"), written so to labels.txt → refused naming the field."""
    path = _write(tmp_path / "rows.jsonl", '{"text": "good film", "label": "pos"}\n'
                                           '{"text": "fine film", "label": "pos\\u0000"}\n')
    with pytest.raises(TextFileError, match=r"rows.jsonl:2: field 'label': a NUL character \(\\u0000\) at character 4"):
        read_text_file(path)
