"""Raw-text requests for each family's served signature, built by the family's request module
(`serving.requests`), and the client side free of TensorFlow."""

import subprocess
import sys

import pytest

from serving.text_requests import TextRequestError, request_inputs, takes_texts

STRING = {"dtype": "DT_STRING"}


def signature(*names):
    return {name: STRING for name in names}


def test_texts_and_sentence_pairs():
    assert request_inputs(signature("text"), ["a", "b"]) == {"text": ["a", "b"]}
    assert request_inputs(signature("text", "text_b"), ["A ||| B", "C ||| D"]) == {
        "text": ["A", "C"], "text_b": ["B", "D"]}
    assert request_inputs(signature("text", "text_b"), ["A", "C"], text_b=["same"]) == {
        "text": ["A", "C"], "text_b": ["same", "same"]}  # one --text-b for every text
    with pytest.raises(TextRequestError, match="texts\\[1\\] \\('no pair'\\): one sentence, but this model takes sentence "
                                               "pairs: give 'A \\|\\|\\| B'"):
        request_inputs(signature("text", "text_b"), ["A ||| B", "no pair"])
    # A TSV line of `loadtest --input` is a pair, as `predict --input` reads it (it was refused).
    assert request_inputs(signature("text", "text_b"), ["A\tB", "C ||| D\tE"]) == {
        "text": ["A", "C"], "text_b": ["B", "D\tE"]}
    with pytest.raises(TextRequestError, match=r"give --text-b once, or once per input \(3\); got 2"):
        request_inputs(signature("text", "text_b"), ["A", "B", "C"], text_b=["x", "y"])
    with pytest.raises(TextRequestError, match="give at least one TEXT"):
        request_inputs(signature("text"), [])
    assert request_inputs(signature("sentence"), ["a"]) == {"sentence": ["a"]}  # one input, another name


def test_a_model_of_single_texts_refuses_a_pair_rather_than_answering_it_as_one_text():
    """`query 'A ||| B'` to a classifier of single texts sent 'A ||| B' as one text (`predict`
    refuses the pair), and `--text-b` was dropped without a word; an embedder's 'A ||| B' stays
    one text, as `bert-keras embed` reads it."""
    classifier = {"outputs": {"label": STRING, "probabilities": STRING}}
    with pytest.raises(TextRequestError, match=r"TEXT argument 2 \('A \|\|\| B'\): a sentence pair \('A \|\|\| B'\), "
                                               "but this model reads single texts"):
        request_inputs(signature("text"), ["ok", "A ||| B"], sources=["TEXT argument 1", "TEXT argument 2"],
                       signature_outputs=classifier["outputs"])
    with pytest.raises(TextRequestError, match=r"--text-b 'B': this model reads single texts"):
        request_inputs(signature("text"), ["A"], text_b=["B"], signature_outputs=classifier["outputs"])
    tagger = {name: STRING for name in ("entity_text", "entity_label", "start_char", "end_char", "score")}
    with pytest.raises(TextRequestError, match=r"a sentence pair \('A \|\|\| B'\), but this model reads single texts: "
                                               "send each text alone$"):
        request_inputs(signature("text"), ["A ||| B"], signature_outputs=tagger)
    embedder = {"embedding": STRING}
    assert request_inputs(signature("text"), ["A ||| B"], signature_outputs=embedder) == {"text": ["A ||| B"]}
    with pytest.raises(TextRequestError, match="--text-b 'B'"):
        request_inputs(signature("text"), ["A"], text_b=["B"], signature_outputs=embedder)
    assert request_inputs(signature("text"), ["A | B", "A||B"], signature_outputs=classifier["outputs"]) == {
        "text": ["A | B", "A||B"]}  # only the separator itself is a pair
    # outputs not known (a script's call), or no family's: the text is sent as it is, as before
    assert request_inputs(signature("text"), ["A ||| B"]) == {"text": ["A ||| B"]}
    assert request_inputs(signature("text"), ["A ||| B"], signature_outputs={"logits": STRING}) == {
        "text": ["A ||| B"]}


def test_a_line_is_split_at_its_first_separator_so_a_tab_after_the_bar_stays_in_the_context():
    """`bert-keras predict --input`: 'question ||| context' whose context holds a tab was split at
    the tab (question 'who? ||| john', context 'smith'), the tab being tried first."""
    from serving.text_requests import split_pairs

    assert split_pairs(["who lives? ||| john\tsmith lives here.", "A\tB ||| C", "A ||| B", "C\tD", "one"]) == [
        ("who lives?", "john\tsmith lives here."), ("A", "B ||| C"), ("A", "B"), ("C", "D"), "one"]


def test_a_pair_signature_refuses_a_text_of_three_fields_by_its_row():
    """`loadtest --input` / `query` on a pair model: 'A<TAB>B<TAB>label' was sent as the pair
    (A, 'B<TAB>label')."""
    from serving.text_requests import split_pairs

    with pytest.raises(TextRequestError, match=r"texts\[1\] \('C\\tD\\tpos'\): 3 fields separated by tabs"):
        request_inputs(signature("text", "text_b"), ["A\tB", "C\tD\tpos"])
    with pytest.raises(TextRequestError, match=r"texts\[0\] .*: 4 fields separated by tabs and ' [|]{3} '"):
        split_pairs(["A\tB ||| C ||| D"], exact=True)
    assert split_pairs(["A ||| B\tC", "A\tB\tC"]) == [("A", "B\tC"), ("A", "B\tC")]  # not exact: as before
    assert split_pairs(["A ||| B\tC"], exact=True) == [("A", "B\tC")]  # a tab after ' ||| ' is whitespace


def test_a_text_from_a_file_is_named_by_its_line_not_a_0_based_row(tmp_path):
    """`loadtest --input FILE` on a pair model: a bad line was named "row 1" (0-based, blank lines
    not counted), not the file and line an editor shows; a TEXT argument by its number."""
    from serving.text_requests import given_texts

    lines = tmp_path / "pairs.tsv"
    lines.write_text("a\tb\n\n  \nc\td\tpos\n", encoding="utf-8")
    texts, sources = given_texts(["x ||| y"], str(lines))
    assert texts == ["x ||| y", "a\tb", "c\td\tpos"]
    assert sources == ["TEXT argument 1", f"--input {lines}, line 1", f"--input {lines}, line 4"]
    with pytest.raises(TextRequestError, match=rf"^--input {lines}, line 4 \('c\\td\\tpos'\): 3 fields separated by tabs"):
        request_inputs(signature("text", "text_b"), texts, sources=sources)
    lines.write_text("a\tb\n\nlonely\n", encoding="utf-8")
    texts, sources = given_texts([], str(lines))
    with pytest.raises(TextRequestError, match=rf"^--input {lines}, line 3 \('lonely'\): one sentence, but this "
                                               "model takes sentence pairs"):
        request_inputs(signature("text", "text_b"), texts, sources=sources)
    with pytest.raises(TextRequestError, match=rf"--input {lines}, line 2: an empty line"):
        given_texts([], str(lines), refuse_blank=True)


def test_questions_and_endings():
    assert request_inputs(signature("question", "context"), question=["who?", "where?"], context=["Ann is here."]) \
        == {"question": ["who?", "where?"], "context": ["Ann is here.", "Ann is here."]}
    assert request_inputs(signature("question", "context"), ["who?"], context=["c"]) == {
        "question": ["who?"], "context": ["c"]}  # TEXT arguments as questions
    with pytest.raises(TextRequestError, match="answers questions: give --question Q --context C"):
        request_inputs(signature("question", "context"), question=["who?"])
    assert request_inputs(signature("context", "endings"), context=["He sat."], ending=["a", "b"]) == {
        "context": ["He sat."], "endings": [["a", "b"]]}
    with pytest.raises(TextRequestError, match="picks an ending: give one --context C and two or more"):
        request_inputs(signature("context", "endings"), context=["He sat."], ending=["a"])
    assert (takes_texts(signature("question", "context")), takes_texts(signature("context", "endings")),
            takes_texts(signature("text", "text_b")), takes_texts(signature("text"))) == (False, False, True, True)


def test_signatures_of_other_inputs_are_refused_by_name():
    with pytest.raises(TextRequestError, match=r"non-text inputs \['token_ids'\]"):
        request_inputs({"token_ids": {"dtype": "DT_INT32"}, "text": STRING}, ["a"])
    with pytest.raises(TextRequestError, match=r"cannot build inputs \['a', 'b'\] from text arguments"):
        request_inputs(signature("a", "b"), ["x"])


def test_a_client_builds_requests_and_reads_answers_without_tensorflow():
    code = ("import sys, numpy as np\n"
            "from serving.text_requests import request_inputs, answer_lines\n"
            "request_inputs({'question': {'dtype': 'DT_STRING'}, 'context': {'dtype': 'DT_STRING'}}, ['q'], "
            "context=['c'])\n"
            "print(answer_lines({'choice': np.array([1]), 'probabilities': np.array([[0.25, 0.75]])}, 0))\n"
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["['  choice: ending 1  (p=0.750)', '  probabilities: [0] 0.250  [1] 0.750']",
                                          "[]"]


def test_json_answers_hold_a_rows_own_entities_and_named_probabilities():
    """query --json: a tagger's row of a batch was padded to the batch's most entities
    ("entity_text": ["a", "", "", ...], "start_char": [0, -1, -1, ...]); it now holds its own
    `num_entities`. A classifier's probabilities are named by class when the names are known."""
    import numpy as np

    from serving.text_requests import answer_rows

    ner = {"entity_text": np.array([[b"John", b"Paris"], [b"a", b""]], dtype=object),
           "entity_label": np.array([[b"PER", b"LOC"], [b"ORG", b""]], dtype=object),
           "start_char": np.array([[0, 20], [0, -1]]), "end_char": np.array([[4, 25], [1, -1]]),
           "score": np.array([[0.9, 0.8], [0.6, 0.0]], dtype=np.float32), "num_entities": np.array([2, 1]),
           "truncated": np.array([False, False])}
    rows = list(answer_rows({"text": ["John in Paris", "a"]}, ner))
    assert rows[1] == ({"text": "a"}, {"end_char": [1], "entity_label": ["ORG"], "entity_text": ["a"],
                                       "num_entities": 1, "score": [rows[1][1]["score"][0]], "start_char": [0],
                                       "truncated": False})
    assert rows[0][1]["entity_text"] == ["John", "Paris"] and rows[0][1]["end_char"] == [4, 25]

    classes = {"label": np.array([b"pos"], dtype=object), "probabilities": np.array([[0.25, 0.75]], np.float32)}
    (_, named), = answer_rows({"text": ["x"]}, classes, class_names=["neg", "pos"])
    assert named["probabilities"] == {"neg": 0.25, "pos": 0.75}
    (_, numbered), = answer_rows({"text": ["x"]}, classes)
    assert numbered["probabilities"] == [0.25, 0.75]


def test_texts_split_at_morphemes_and_answer_spans_back_in_the_raw_text():
    """A (c) vocabulary's served model reads kiwi-split text: `query --pre-tokenizer kiwi` sends
    "대출 을", and a span the model found in what it read ("을 신청" at [6:10]) is shown in the raw
    text ("을 신청", [5:9]); padding (-1: no entity) stays."""
    import numpy as np

    pytest.importorskip("kiwipiepy")
    from serving.text_requests import restore_offsets, split_morphemes

    raw = {"text": ["신용 대출을 신청하고", "Ann"], "text_b": ["영화가 좋아요", "x"]}
    sent, maps = split_morphemes(raw, "kiwi")
    assert sent == {"text": ["신용 대출 을 신청 하 고", "Ann"], "text_b": ["영화 가 좋 아요", "x"]}
    assert maps["text"][0].tolist() == [0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 9, 10, 10, 11]
    choices, _ = split_morphemes({"context": ["오늘은"], "endings": [["비가 와요", "맑아요"]]}, "kiwi")
    assert choices == {"context": ["오늘 은"], "endings": [["비 가 와요", "맑 아요"]]}

    tagged = {"entity_text": np.array([[b"\xec\x9d\x84 \xec\x8b\xa0\xec\xb2\xad", b""], [b"Ann", b""]], dtype=object),
              "start_char": np.array([[6, -1], [0, -1]]), "end_char": np.array([[10, -1], [3, -1]]),
              "score": np.array([[0.9, 0.0], [0.8, 0.0]])}
    assert "을 신청" == tagged["entity_text"][0, 0].decode()
    back = restore_offsets(tagged, raw, sent, maps)
    assert back["start_char"].tolist() == [[5, -1], [0, -1]] and back["end_char"].tolist() == [[9, -1], [3, -1]]
    assert back["entity_text"].tolist() == [["을 신청".encode(), b""], [b"Ann", b""]]
    assert tagged["start_char"].tolist() == [[6, -1], [0, -1]]  # the answer given is left as it was

    question = {"question": ["언제?"], "context": ["오늘은 2024년 3월 5일입니다."]}
    sent, maps = split_morphemes(question, "kiwi")
    assert sent["context"] == ["오늘 은 2024 년 3 월 5 일 입니다 ."]
    assert sent["context"][0][12:19] == "3 월 5 일"
    answer = {"answer": np.array(["3 월 5 일"], dtype=object), "start_char": np.array([12]),
              "end_char": np.array([19]), "score": np.array([2.5])}
    back = restore_offsets(answer, question, sent, maps)
    assert (back["answer"].tolist(), back["start_char"].tolist(), back["end_char"].tolist()) == (["3월 5일"], [10], [15])
    assert restore_offsets({"label": np.array([b"pos"])}, raw, sent, maps)["label"].tolist() == [b"pos"]
    with pytest.raises(ValueError, match="unknown pre-tokenizer 'mecab': choose one of kiwi"):
        split_morphemes(raw, "mecab")
