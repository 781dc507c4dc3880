"""Reading pretraining corpora: layouts, sentence splitting, globs, TFDS, and bad input."""

import os

import pytest

from pipelines import corpus as corpus_lib
from pipelines.corpus import CorpusError, file_documents, list_files, read_corpus, split_sentences

SAMPLE = os.path.join(os.path.dirname(corpus_lib.__file__), "data", "sample_corpus.txt")


def write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)
    return str(path)


def test_bert_format_documents_and_sentences(tmp_path):
    path = write(tmp_path / "a.txt", "One.\nTwo.\n\n\n  \nThree.\n  Four.  \n")
    corpus = read_corpus(path)
    assert list(corpus.documents()) == [["One.", "Two."], ["Three.", "Four."]]
    assert corpus.files == [path]


def test_every_file_starts_a_document_and_globs_expand_in_order(tmp_path):
    write(tmp_path / "part-1.txt", "B1.\nB2.\n")
    write(tmp_path / "part-0.txt", "A1.\n")
    other = write(tmp_path / "z.txt", "Z.\n")
    corpus = read_corpus(f"{tmp_path}/part-*.txt,{other}")
    assert list(corpus.documents()) == [["A1."], ["B1.", "B2."], ["Z."]]
    assert list_files([str(tmp_path / "part-*.txt")]) == [str(tmp_path / "part-0.txt"), str(tmp_path / "part-1.txt")]


def test_sample_corpus_ships_with_the_package():
    corpus = read_corpus(SAMPLE)
    assert corpus.num_documents >= 8
    assert len(corpus.sentences) >= 150


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Mr. Smith arrived. He sat down! Then, e.g. tea? Yes.",
         ["Mr. Smith arrived.", "He sat down!", "Then, e.g. tea?", "Yes."]),
        ('She said "Go." "Now?" he asked.', ['She said "Go."', '"Now?" he asked.']),
        ("J. R. R. Tolkien lived in the U.S. for a while. Not really.",
         ["J. R. R. Tolkien lived in the U.S. for a while.", "Not really."]),
        ("Wait\u2026 What? version 2.5 is out. ok. lowercase after a period stays.",
         # Only a capital (or an opening quote/bracket) starts a new sentence.
         ["Wait\u2026", "What? version 2.5 is out. ok. lowercase after a period stays."]),
        ("Dr. Who (the show) ended. (It came back.) Fine", ["Dr. Who (the show) ended.", "(It came back.)", "Fine"]),
        ("  \n ", []),
    ],
)
def test_split_sentences(text, expected):
    assert [s.decode() for s in split_sentences([text])[0].numpy()] == expected


def test_text_format_joins_wrapped_lines_and_splits_sentences(tmp_path):
    path = write(tmp_path / "doc.txt", "The first line\nwraps here. A second\nsentence.\n\nNew paragraph. End.\n")
    corpus = read_corpus(path, format="text")
    assert list(corpus.documents()) == [
        ["The first line wraps here.", "A second sentence.", "New paragraph.", "End."]
    ]


def test_lines_format_is_one_document_per_line(tmp_path):
    path = write(tmp_path / "docs.txt", "A one. A two.\n\nB one.\n")
    assert list(read_corpus(path, format="lines").documents()) == [["A one.", "A two."], ["B one."]]


def test_graph_reader_matches_python_reader(tmp_path):
    prose = write(tmp_path / "prose.txt", "Hard\nwrapped. Text here.\n\nMore text!\n")
    for path, layout in [(SAMPLE, "bert"), (prose, "text"), (prose, "lines")]:
        graph = [[s.decode() for s in doc] for doc in file_documents([path], format=layout).as_numpy_iterator()]
        assert graph == list(read_corpus(path, format=layout).documents()), layout


def test_empty_corpus_names_the_files(tmp_path):
    empty = write(tmp_path / "empty.txt", "\n  \n\n")
    with pytest.raises(CorpusError, match="empty.*empty.txt"):
        read_corpus(empty)


def test_check_text_files_counts_only_lines_with_a_token(tmp_path):
    # A BOM, zero-width spaces and control characters are dropped by the tokenizer: a file of them
    # is as empty as a blank one (a stream of it never yields a batch), and a line of them is no text.
    dropped = tmp_path / "dropped.txt"
    dropped.write_bytes("\ufeff\r\n\x01\x02\n\n\u200b \u200b\n".encode("utf-8"))
    with pytest.raises(CorpusError, match="empty.*dropped.txt"):
        corpus_lib.check_text_files(str(dropped))
    mixed = write(tmp_path / "mixed.txt", "\ufeffOne sentence.\r\n\u200b\n\nTwo.\n")
    assert corpus_lib.check_text_files([str(dropped), mixed]) == 2


def test_no_matching_file_names_the_pattern(tmp_path):
    with pytest.raises(CorpusError, match="nothing-\\*.txt"):
        read_corpus(str(tmp_path / "nothing-*.txt"))


def test_a_directory_as_input_is_a_clear_error(tmp_path):
    write(tmp_path / "a.txt", "One sentence.\n")
    for pattern in (str(tmp_path), str(tmp_path) + "/", str(tmp_path) + "*"):
        with pytest.raises(CorpusError, match=f"{tmp_path} is a directory: .*{tmp_path}/\\*\\.txt"):
            list_files(pattern)
    assert list_files(str(tmp_path / "*.txt")) == [str(tmp_path / "a.txt")]


def test_invalid_utf8_strict_names_file_and_line(tmp_path):
    path = write(tmp_path / "bad.txt", b"Fine line.\nBad \xff\xfe byte.\n")
    with pytest.raises(CorpusError, match=r"bad.txt, line 2: not valid UTF-8"):
        read_corpus(path)


def test_vocabulary_counting_refuses_bytes_that_are_not_utf8(tmp_path):
    import gzip

    from pipelines.tokenizer.corpus_words import count_corpus_words

    latin = write(tmp_path / "latin.txt", "Fine line.\ncafé naïve\n".encode("latin-1"))
    with pytest.raises(CorpusError, match=r"latin.txt, line 2: not valid UTF-8.*Save the file as UTF-8"):
        count_corpus_words([latin])  # TensorFlow's string ops would have counted "caf" and "nave"
    korean = write(tmp_path / "kowiki.txt", "Fine line.\n대한민국의 수도는 서울이다.\n".encode("cp949"))
    with pytest.raises(CorpusError, match=r"kowiki.txt, line 2: .*reads as Korean in cp949.*iconv -f cp949 -t utf-8"):
        count_corpus_words([korean])
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(b"One sentence.\n"))
    with pytest.raises(CorpusError, match=r"corpus.txt.gz, line 1: .*The file is gzip-compressed, not text: "
                                          r"decompress it \(gunzip -k FILE\) and give the file inside\.$"):
        count_corpus_words([str(packed)])  # not also told to iconv it from cp1252
    assert count_corpus_words([write(tmp_path / "ok.txt", "café naïve\n".encode())], lowercase=False)["café"] == 1


def test_a_utf8_corpus_split_by_bytes_is_told_so_not_to_convert_it_from_cp1252(tmp_path):
    """A Korean UTF-8 corpus cut by bytes (`split -b`, `head -c`) has a character cut at a chunk's
    end or start; `bert-keras vocab` told to convert it with `iconv -f cp1252`, which would garble
    every line. It is now told the file is UTF-8 cut inside a character and to split it by lines;
    a line in another encoding keeps its advice."""
    from pipelines.tokenizer.corpus_words import count_corpus_words

    text = "대한민국의 수도는 서울이다.\n서울은 한강을 끼고 있다.\n".encode()
    cut = len(text) - 4  # inside 다 of the last line
    first, second = write(tmp_path / "xaa", text[:cut]), write(tmp_path / "xab", text[cut:] + text)
    for path, line in ((first, 2), (second, 1)):
        for read in (count_corpus_words, read_corpus, corpus_lib.check_text_files):
            with pytest.raises(CorpusError, match=rf"{os.path.basename(path)}, line {line}: not valid UTF-8.*"
                                                  "UTF-8 cut inside a character.*split -l") as refused:
                read([path]) if read is count_corpus_words else read(path)
            assert "cp1252" not in str(refused.value)
    # a latin-1 line inside a file, its last character an accented letter: still told to convert
    latin = write(tmp_path / "latin.txt", "café\nnaïve and café\nok\n".encode("latin-1"))
    with pytest.raises(CorpusError, match=r"latin.txt, line 1: .*Save the file as UTF-8 \(iconv -f cp1252"):
        corpus_lib.check_text_files(latin)


def test_a_utf_16_corpus_is_told_its_iconv_command(tmp_path):
    bom = write(tmp_path / "bom.txt", "Caf\xe9 au lait.\n".encode("utf-16"))
    with pytest.raises(CorpusError, match=r"bom.txt, line 1: .*iconv -f UTF-16 -t UTF-8") as refused:
        read_corpus(bom)
    assert "cp1252" not in str(refused.value)
    later = write(tmp_path / "later.txt", "One sentence.\nCaf\xe9 au lait.\n".encode("utf-16-le"))
    # line 1 is ASCII: valid UTF-8 but for its NUL bytes, named there now
    with pytest.raises(CorpusError, match=r"later.txt, line 1: .*The file is UTF-16LE: .*iconv -f UTF-16LE"):
        read_corpus(later)


def test_invalid_utf8_replace_counts_and_reports(tmp_path):
    path = write(tmp_path / "bad.txt", b"Fine line.\nBad \xff byte.\n\nAlso \xc3 bad.\n")
    corpus = read_corpus(path, decode_errors="replace")
    assert corpus.sentences[1] == "Bad \ufffd byte."
    assert corpus.replaced_lines == 2
    report = corpus.replacement_report()
    assert "2 line(s)" in report and "bad.txt, line 2" in report and "bad.txt, line 4" in report


def test_long_lines_and_one_sentence_documents_are_kept(tmp_path):
    long_line = "word " * 50000
    path = write(tmp_path / "long.txt", f"{long_line}\n\nAlone.\n")
    corpus = read_corpus(path)
    assert corpus.num_documents == 2
    assert len(corpus.sentences[0]) == len(long_line.strip())


def test_bad_format_is_rejected(tmp_path):
    with pytest.raises(CorpusError, match="format"):
        read_corpus(SAMPLE, format="xml")


def test_tfds_dataset_by_name():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=5):
        corpus = read_corpus("tfds:imdb_reviews", tfds_split="train")
        assert corpus.num_documents == 5
        assert corpus.files == ["tfds:imdb_reviews/train"]
        with pytest.raises(CorpusError, match="no text field 'body'"):
            read_corpus("tfds:imdb_reviews", tfds_text_field="body")


def test_a_corpus_of_cr_line_ends_is_read_line_by_line(tmp_path):
    """A corpus with lone CR line ends (classic Mac, some exports) was one line: one sentence, one
    document, cut at the sequence length when instances were built (every other word lost, without
    a word) → a CR ends a line, as open() reads text; LF and CRLF files read as before."""
    mac = write(tmp_path / "mac.txt", b"One a.\rTwo a.\r\rOne b.\rTwo b.\r")
    assert list(read_corpus(mac).documents()) == [["One a.", "Two a."], ["One b.", "Two b."]]
    assert list(read_corpus(mac, format="lines").documents()) == [["One a."], ["Two a."], ["One b."], ["Two b."]]
    windows = write(tmp_path / "windows.txt", b"One a.\r\nTwo a.\r\r\n\r\nOne b.\r\n")
    assert list(read_corpus(windows).documents()) == [["One a.", "Two a."], ["One b."]]


def test_a_cr_inside_a_line_stops_the_streaming_readers_naming_file_and_line(tmp_path):
    """TensorFlow's TextLineDataset (what `bert-keras vocab` counts and dynamic pretraining streams)
    drops every CR of a line: 'cat\\rdog' was counted as the word 'catdog', and a file of CR line ends
    as one line of glued words → the strict pass before them names the file and line."""
    from pipelines.tokenizer.corpus_words import count_corpus_words

    write(tmp_path / "fine.txt", b"One cat.\r\nTwo dogs.\r\n")
    assert count_corpus_words([str(tmp_path / "fine.txt")])["cat"] == 1
    mac = write(tmp_path / "mac.txt", b"One cat.\nA cat\rdog sat.\n")
    for read in (count_corpus_words, corpus_lib.check_text_files):
        with pytest.raises(CorpusError, match=r"mac.txt, line 2: a carriage return \(\\r\) inside the line "
                                              r"\(b'A cat\\rdog sat.'\); TensorFlow's line reader drops it.*tr '\\r'"):
            read([mac])
    wide = write(tmp_path / "wide.txt", "One cat.\r\nTwo dogs.\r\n".encode("utf-16-le"))
    with pytest.raises(CorpusError, match=r"wide.txt: the file is UTF-16LE: .*iconv -f UTF-16LE"):
        corpus_lib.check_text_files(wide)


def test_a_nul_byte_in_a_corpus_is_named_by_file_line_and_column(tmp_path):
    """BERT's tokenizer drops a NUL: `bert-keras vocab` learnt 'helloworld' from 'hello\\0world', and
    create-pretraining-data / pretrain --input trained on the joined word, where every other reader of
    a text file names it."""
    from pipelines.tokenizer.corpus_words import count_corpus_words

    damaged = write(tmp_path / "damaged.txt", b"One cat.\nhello\x00world sat.\n")
    for read in (count_corpus_words, corpus_lib.check_text_files, read_corpus):
        with pytest.raises(CorpusError, match=r"damaged.txt, line 2, column 6: a NUL byte \(0x00\): "
                                              r"'hello\\x00world sat.' would be read as 'helloworld sat.'"):
            read([damaged] if read is not read_corpus else damaged)
    wide = write(tmp_path / "wide.txt", "One cat.\nTwo dogs.\n".encode("utf-16-le"))  # LF only: NUL bytes
    with pytest.raises(CorpusError, match=r"wide.txt, line 1: NUL bytes between its characters. The file is "
                                          r"UTF-16LE"):
        corpus_lib.check_text_files(wide)


@pytest.mark.parametrize("block_bytes", [1 << 20, 3])
def test_a_corpus_on_another_file_system_keeps_its_carriage_returns(tmp_path, monkeypatch, block_bytes):
    """A `gs://` corpus was read with GFile's line iterator, which drops every CR: 'One a.\rTwo a.'
    was the one sentence 'One a.Two a.' where a local copy read two, and the strict pass saw no CR to
    refuse → files on other file systems are cut at LF here, their CRs kept (`file://` is the same
    code path as `gs://`, a local file through tf.io.gfile)."""
    monkeypatch.setattr(corpus_lib, "_BLOCK_BYTES", block_bytes)  # lines across blocks too
    data = b"One a.\rTwo a.\r\rOne b.\r\nTwo b.\r\r\n\nOne c.\nTwo c."
    local = write(tmp_path / "mixed.txt", data)
    remote = "file://" + local
    assert corpus_lib.list_files(remote) == [remote]
    expected = [["One a.", "Two a."], ["One b.", "Two b."], ["One c.", "Two c."]]
    assert list(read_corpus(local).documents()) == expected
    assert list(read_corpus(remote).documents()) == expected
    assert list(corpus_lib._lf_chunks(remote)) == list(corpus_lib._lf_chunks(local))
    for path in (local, remote):
        with pytest.raises(CorpusError, match=r"mixed.txt, line 1: a carriage return"):
            corpus_lib.check_text_files(path)
    crlf = write(tmp_path / "crlf.txt", b"One a.\r\nTwo a.\r\n")
    assert corpus_lib.check_text_files("file://" + crlf) == corpus_lib.check_text_files(crlf) == 2


def test_the_strict_pass_names_a_line_as_the_readers_number_it(tmp_path):
    """check_text_files numbered lines at LF alone: a bad byte after a lone CR (which ends a line for
    the readers) was on "line 1" where read_corpus said "line 2" → the pass stops at the CR, on the
    line the readers number as it does."""
    path = write(tmp_path / "mixed.txt", b"Zero.\r\nOne.\rcaf\xe9.\n")
    with pytest.raises(CorpusError, match=r"mixed.txt, line 3: not valid UTF-8"):
        read_corpus(path)
    with pytest.raises(CorpusError, match=r"mixed.txt, line 2: a carriage return"):
        corpus_lib.check_text_files(path)
    bad_first = write(tmp_path / "bad.txt", b"Zero.\r\ncaf\xe9.\rOne.\n")
    for read in (read_corpus, corpus_lib.check_text_files):
        with pytest.raises(CorpusError, match=r"bad.txt, line 2: not valid UTF-8 .*b'caf\\xe9.'\)"):
            read(bad_first)


def test_a_compressed_corpus_is_named_as_such_not_told_to_convert_from_cp1252(tmp_path):
    """A bzip2 / xz / zip corpus (its first line valid UTF-8: "BZh91AY&SY") was told only to convert
    its bytes from cp1252, and a gzip one that too, after "gunzip it first" → what the file is and
    how to decompress it, as the task-file readers say (`text_files.compressed_format`)."""
    import bz2
    import lzma

    for name, data, what in (("c.txt.bz2", bz2.compress(b"One sentence.\n" * 50), "bzip2-compressed"),
                             ("c.txt.xz", lzma.compress(b"One sentence.\n" * 50), "xz-compressed")):
        path = write(tmp_path / name, data)
        for read in (read_corpus, corpus_lib.check_text_files):
            with pytest.raises(CorpusError, match=rf"{name}, line \d+: not valid UTF-8 .*The file is {what}, not text: "
                                                  r"decompress it") as refused:
                read(path)
            assert "iconv" not in str(refused.value)


def test_a_tfds_corpus_names_decomposed_hangul_by_its_document():
    """`Corpus.check_composition` of a corpus with no file to read again (a `tfds:` source) names the
    document; a file-less sentence without jamo is never checked, and the tokenizer warns once."""
    import unicodedata
    import warnings

    import numpy as np

    from pipelines.corpus import Corpus
    from pipelines.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "오늘", "날씨"], strip_accents=False)
    corpus = Corpus(sentences=["오늘", "날씨", unicodedata.normalize("NFD", "오늘 날씨"), unicodedata.normalize("NFD", "날씨")],
                    document_splits=np.array([0, 2, 4]), files=["tfds:wiki/train"],
                    document_files=np.array([0, 0]), document_ordinals=np.array([0, 1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corpus.check_composition(tokenizer)
        corpus.check_composition(tokenizer)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and messages[0].startswith("tfds:wiki/train, document 2 holds Hangul in decomposed form")
