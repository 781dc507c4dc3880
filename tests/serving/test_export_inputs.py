"""Raw-text inputs inside the exported graph: bad input errors, texts with no token, huge input.

* Invalid UTF-8 raises InvalidArgumentError naming the input and the row ("input
  'context': invalid UTF-8 at row 1"), from the graph itself (so TF Serving answers
  INVALID_ARGUMENT too); `Assert` prints the message C-escaped (\\'context\\').
* A text with no token (empty, whitespace, control / format characters) is not an error:
  every family answers it as `predict` answers it (the model's answer to `[CLS] [SEP]`),
  its neighbours get the answer they get alone, and the `empty` output flags exactly the rows
  all of whose texts have no token (the Python API's rule, `pipelines.tokenizer.tokenless`).
* A 1 MB text is truncated, never an error, and answers as the Python path on the
  whole text does: the graph cuts it before tokenizing, so only the prefix a model
  can read is tokenized (its cost against a text of one window:
  benchmarks/bench_export_long_text.py).

(The core tokenizer backend is tested with `bert-keras export --tokenizer core`
in test_export_layout.py.)
"""

import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks
from pipelines.tokenizer.tokenless import has_no_token
from serving.signatures import finetuned_for_export, reference_outputs

_LOADED = {}


def serve(exported, signature="serving_default"):
    if exported not in _LOADED:
        base_path, name, version = exported
        _LOADED[exported] = tf.saved_model.load(os.path.join(base_path, name, str(version)))
    return _LOADED[exported].signatures[signature]


BAD_UTF8 = [
    (b"caf\xc3", "invalid UTF-8 at row\\] \\[1\\]"),        # truncated multi-byte character
    (b"\xed\xa0\x80", "invalid UTF-8 at row\\] \\[1\\]"),   # UTF-16 surrogate, not valid UTF-8
]
# Texts with no token: empty, whitespace (ASCII, ideographic, no-break), controls and format characters.
NO_TOKEN = ["", " \t\n\u3000\u00a0", "\x01\u200b\x7f"]


def _named(name, problem):
    """The graph's message as `Assert` prints it: quotes C-escaped, never CheckNumerics' NaN suffix."""
    return rf"input \\'{name}\\': {problem}"


@pytest.mark.parametrize("kind, name, other", [
    ("classification", "text", {"text_b": b"fine"}),
    ("classification", "text_b", {"text": b"fine"}),
    ("ner", "text", {}),
    ("squad", "question", {"context": b"John Smith lives in New York."}),
    ("squad", "context", {"question": b"Who lives there?"}),
])
def test_invalid_utf8_raises_invalid_argument_naming_the_input(kind, name, other, exported_model):
    function = serve(exported_model(kind))
    for bad, problem in BAD_UTF8:
        # The bad row is the second of a batch: the whole request is rejected.
        inputs = {k: tf.constant([b"fine", v]) for k, v in other.items()}
        inputs[name] = tf.constant([b"A good row.", bad])
        with pytest.raises(tf.errors.InvalidArgumentError, match=_named(name, problem)) as raised:
            function(**inputs)
        assert "Tensor had NaN values" not in str(raised.value)


CONTEXT = "John Smith lives in New York. The oil crisis began in October 1973, when he moved to Paris."
ENDINGS = ["He sits down.", "He eats the window.", "He flies.", "He sings."]
# Per kind: (rows with tokens, rows with a text that has no token). A row is empty when ALL its
# texts have none; a pair / question + context with one text of no token is answered too.
CASES = {
    "classification": ([{"text": "I loved this film.", "text_b": "The actors were great."},
                        {"text": "The battery died.", "text_b": "It was terrible."}],
                       [{"text": "", "text_b": ""}, {"text": NO_TOKEN[1], "text_b": NO_TOKEN[2]},
                        {"text": NO_TOKEN[2], "text_b": "It is a film."}]),
    "regression": ([{"text": "A great film."}, {"text": "A terrible film."}], [{"text": t} for t in NO_TOKEN]),
    "ner": ([{"text": "John Smith lives in New York."}, {"text": "Zoë moved to Paris."}],
            [{"text": t} for t in NO_TOKEN]),
    "squad": ([{"question": "Who lives in New York?", "context": CONTEXT},
               {"question": "When did the crisis begin?", "context": CONTEXT}],
              [{"question": "", "context": ""}, {"question": "Who lives there?", "context": NO_TOKEN[2]},
               {"question": NO_TOKEN[1], "context": CONTEXT}]),
    "multiple_choice": ([{"context": "He enters the room.", "endings": ENDINGS}],
                        [{"context": "", "endings": NO_TOKEN + [""]},
                         {"context": "He enters the room.", "endings": ["", "", "", ""]}]),
    "embedding": ([{"text": "A cat sat on the chair."}, {"text": "The dog moved to Paris."}],
                  [{"text": t} for t in NO_TOKEN]),
}


def _columns(rows):
    return {name: [row[name] for row in rows] for name in rows[0]}


def _row(outputs, i):
    """Row `i` of served outputs, NER's entity columns cut to its `num_entities`."""
    row = {name: value[i] for name, value in outputs.items()}
    if "num_entities" in row:
        count = int(row["num_entities"])
        row.update({name: row[name][:count] for name in ("entity_text", "entity_label", "start_char",
                                                           "end_char", "score")})
    return row


def _assert_row_equal(got, want, where):
    assert set(got) == set(want), where
    for name in want:
        if np.asarray(want[name]).dtype.kind == "f":
            np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=f"{where}: {name}")
        else:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{where}: {name}")


def _predicted(kind, source, rows):
    """What the Python task's `predict` gives for `rows` (warned: they hold texts with no token), in
    the served outputs' terms."""
    columns = _columns(rows)
    if kind == "embedding":
        task = tasks.Embedder.from_pretrained(source, seq_length=64, normalize=True)
    else:
        task = tasks.load(source)
    with pytest.warns(UserWarning, match="no token"):
        if kind in ("classification",):
            return {"probabilities": task.predict((columns["text"], columns["text_b"]))}
        if kind == "regression":
            return {"score": np.ravel(task.predict(columns["text"]))}
        if kind == "embedding":
            return {"embedding": task.predict(columns["text"])}
        if kind == "multiple_choice":
            return {"probabilities": task.predict((columns["context"], columns["endings"]))}
        if kind == "ner":
            return {"entities": [[(e["text"], e["type"], e["start_char"], e["end_char"]) for e in r["entities"]]
                                 for r in task.predict(columns["text"])]}
        predicted = task.predict((columns["question"], columns["context"]))
    # SQuAD: the served score is the answer's start + end logit (the null answer's when none).
    return {"answer": [r["answer"].encode() for r in predicted], "has_answer": [r["has_answer"] for r in predicted],
            "start_char": [r["start_char"] for r in predicted], "end_char": [r["end_char"] for r in predicted],
            "score": [next(e["start_logit"] + e["end_logit"] for e in r["nbest"] if e["text"] == r["answer"])
                      for r in predicted]}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_text_with_no_token_gets_what_predict_gives_and_is_flagged(kind, finetuned_dir, exported_model):
    real, empty = CASES[kind]
    mixed = [row for pair in zip(real + [None] * len(empty), empty + [None] * len(real)) for row in pair if row]
    function = serve(exported_model(kind))
    outputs = {k: v.numpy() for k, v in function(**{k: tf.constant(v) for k, v in _columns(mixed).items()}).items()}
    alone = {k: v.numpy() for k, v in function(**{k: tf.constant(v) for k, v in _columns(real).items()}).items()}

    # The flag: exactly the rows all of whose texts have no token (predict_rows' "empty": true).
    def no_token(row):
        return all(has_no_token(t) for value in row.values() for t in ([value] if isinstance(value, str) else value))

    assert outputs["empty"].dtype == bool and outputs["empty"].shape == (len(mixed),)
    assert outputs["empty"].tolist() == [no_token(row) for row in mixed]
    assert any(outputs["empty"]) and not all(outputs["empty"])
    # Rows with tokens: what they get alone, row for row (an empty neighbour changes nothing).
    real_rows = [i for i, row in enumerate(mixed) if row in real]
    for j, i in enumerate(real_rows):
        _assert_row_equal(_row(outputs, i), _row(alone, j), f"{kind} row {i}")
    # Rows with a text of no token: what predict gives for them (the model's answer to an empty input).
    empty_rows = [i for i, row in enumerate(mixed) if row in empty]
    want = _predicted(kind, finetuned_dir(kind), [mixed[i] for i in empty_rows])
    for j, i in enumerate(empty_rows):
        row = _row(outputs, i)
        if kind == "ner":
            assert row["num_entities"] == 0 and len(row["entity_text"]) == 0 and want["entities"][j] == []
            continue
        for name, values in want.items():
            if np.asarray(values).dtype.kind == "f":
                np.testing.assert_allclose(row[name], values[j], atol=1e-5, err_msg=f"{kind} row {i}: {name}")
            else:
                assert row[name] == values[j], (kind, i, name, row[name], values[j])
    if kind == "squad":  # an empty context holds no span: the null answer
        for i in empty_rows:
            if has_no_token(mixed[i]["context"]):
                assert (outputs["answer"][i], outputs["has_answer"][i], outputs["start_char"][i],
                        outputs["end_char"][i]) == (b"", False, -1, -1)
    # The Python path the export is checked against agrees (all outputs, `empty` included).
    expected = reference_outputs(finetuned_for_export(finetuned_dir(kind), **export_fixtures.export_options(kind)), _columns(mixed))
    for name, value in expected.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(outputs[name], value, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(outputs[name], value, err_msg=name)


def test_a_batch_of_texts_with_no_token_only_is_answered(exported_model):
    """No row of the batch has a token: the graph still runs (one `[CLS] [SEP]` window each)."""
    for kind, inputs in [("ner", {"text": NO_TOKEN}),
                         ("squad", {"question": NO_TOKEN, "context": NO_TOKEN[::-1]}),
                         ("classification", {"text": NO_TOKEN, "text_b": NO_TOKEN}),
                         ("multiple_choice", {"context": [""], "endings": [NO_TOKEN + [" "]]}),
                         ("embedding", {"text": NO_TOKEN})]:
        outputs = serve(exported_model(kind))(**{k: tf.constant(v) for k, v in inputs.items()})
        assert outputs["empty"].numpy().all(), kind
        if kind == "ner":
            assert outputs["num_entities"].numpy().tolist() == [0, 0, 0]
            assert outputs["entity_text"].shape == (3, 0)
        if kind == "squad":
            assert outputs["has_answer"].numpy().tolist() == [False] * 3
            assert outputs["start_char"].numpy().tolist() == [-1] * 3
        if kind == "classification":  # three times the answer to [CLS] [SEP] [SEP]
            np.testing.assert_allclose(outputs["probabilities"].numpy(), outputs["probabilities"].numpy()[:1]
                                       .repeat(3, axis=0), atol=1e-6)


def test_a_model_that_reads_windows_answers_a_text_with_no_token_as_predict(tmp_path):
    """Long-text exports (`max_length`, windows in the graph) give such a text one `[CLS] [SEP]`
    window, as `predict` reads it."""
    spec = export_fixtures.make_encoder_spec(str(tmp_path / "spec"))
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=16, max_length=200,
                                                      stride=9)
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=16, normalize=True, max_length=200)
    text = " ".join(export_fixtures.WORDS[:40])  # a few windows
    texts = [text, "", "\u200b", "good film"]
    for task, name, output in [(classifier, "classifier", "probabilities"), (embedder, "embedder", "embedding")]:
        with pytest.warns(UserWarning, match="2 texts have no token"):
            expected = task.predict(texts)
        served = tf.saved_model.load(task.export(str(tmp_path), name)).signatures["serving_default"](
            text=tf.constant(texts))
        np.testing.assert_allclose(served[output].numpy(), expected, atol=1e-5, err_msg=name)
        assert served["empty"].numpy().tolist() == [False, True, True, False]
        assert served["truncated"].numpy().tolist() == [False] * 4


def test_nothing_reads_the_multiple_choice_inputs_before_the_endings_check(exported_model):
    # A graph orders only what depends on what: the endings' own reshape to [rows, choices] did
    # not wait for the "expected 4 endings per row" Assert, and was free to fail first with a raw
    # "Input to reshape is a tensor with 3 values" (a race the test below could lose).
    library = serve(exported_model("multiple_choice")).graph.as_graph_def().library.function
    (function,) = [f for f in library if {"context", "endings"} <= {a.name for a in f.signature.input_arg}
                   and any(node.op == "Assert" for node in f.node_def)]
    readers = [node for node in function.node_def if any(i.split(":")[0] in ("context", "endings") for i in node.input)]
    unordered = [(node.op, list(node.input)) for node in readers
                 if node.op != "Shape" and not any(i.startswith("^Assert") for i in node.input)]
    assert readers and unordered == []


def test_an_ending_with_no_token_is_read_as_predict_reads_it(finetuned_dir, exported_model):
    function = serve(exported_model("multiple_choice"))
    with pytest.raises(tf.errors.InvalidArgumentError, match=_named("endings", "expected 4 endings")):
        function(context=tf.constant(["He sat."]), endings=tf.constant([["a", "b", "c"]]))
    endings = [["a", "b", "", "d"]]
    outputs = function(context=tf.constant(["He sat."]), endings=tf.constant(endings))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one empty ending: the example is not empty (its context is read)
        expected = tasks.load(finetuned_dir("multiple_choice")).predict((["He sat."], endings))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=1e-5)
    assert outputs["empty"].numpy().tolist() == [False]


def one_megabyte_text():
    words = "The battery of Zürich lasts all week, and the film was great! ".split()
    text, size = [], 0
    while size < 1_000_000:
        word = words[len(text) % len(words)]
        text.append(word)
        size += len(word.encode()) + 1
    return " ".join(text)


def test_one_megabyte_text_is_truncated_not_an_error(finetuned_dir, exported_model):
    huge = one_megabyte_text()
    assert len(huge.encode()) >= 1_000_000
    function = serve(exported_model("classification"))
    inputs = {"text": [huge, "short"], "text_b": ["short", huge]}
    outputs = function(**{k: tf.constant(v) for k, v in inputs.items()})
    assert outputs["truncated"].numpy().tolist() == [True, True]
    # The Python path tokenizes all of it and lets the packer truncate: same answer.
    expected = reference_outputs(finetuned_for_export(finetuned_dir("classification")), inputs)
    np.testing.assert_allclose(outputs["probabilities"], expected["probabilities"], atol=1e-5)
    np.testing.assert_array_equal(outputs["label"], expected["label"])

    for kind, row in [("ner", {"text": [huge]}),
                      ("squad", {"question": ["How long does the battery last?"], "context": [huge]}),
                      ("embedding", {"text": [huge]})]:
        function = serve(exported_model(kind))
        outputs = function(**{k: tf.constant(v) for k, v in row.items()})
        assert outputs["truncated"].numpy().tolist() == [True], kind
        if kind == "ner":
            for text, start, end in zip(outputs["entity_text"][0].numpy(),
                                        outputs["start_char"][0].numpy(),
                                        outputs["end_char"][0].numpy()):
                assert start < 0 or huge[start:end].encode() == text
        if kind == "squad" and outputs["has_answer"][0]:
            start, end = int(outputs["start_char"][0]), int(outputs["end_char"][0])
            assert huge[start:end].encode() == outputs["answer"][0].numpy()

    # What keeps a 1 MB text cheap: the tokenizer only ever sees the first `seq_length x
    # chars_per_token` code points (after leading whitespace), never the whole text.
    from pipelines import BertTokenizer
    from serving.signatures.text_inputs import TextInputs

    tokenizer = BertTokenizer(os.path.join(finetuned_dir("classification"), "vocab.txt"))

    class Spy:
        """The tokenizer, recording the length (code points) of every string it is given."""

        def __init__(self):
            self.lengths = []

        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def tokenize(self, strings):
            self.lengths.append(tf.strings.length(strings, unit="UTF8_CHAR").numpy().tolist())
            return tokenizer.tokenize(strings)

    spy = Spy()
    text_inputs = TextInputs(spy, seq_length=32, chars_per_token=64)
    ids = text_inputs.tokenize(tf.constant([huge, "short", "   " + huge]), "text")
    assert spy.lengths == [[32 * 64, 5, 3 + 32 * 64]]  # leading spaces do not count against the cut
    cut = [huge[:32 * 64], "short", "   " + huge[:32 * 64]]
    assert ids.to_list() == tokenizer.tokenize(tf.constant(cut)).to_list()


def test_text_inputs_read_a_text_with_no_token_as_zero_pieces(tmp_path):
    """Empty or whitespace-only (what BERT splits on or drops) is zero pieces, flagged by `empty`,
    and packed `[CLS] [SEP]`; leading spaces do not eat the cut. The line and paragraph separators
    are words to BERT ([UNK]), not whitespace."""
    from pipelines import BertTokenizer
    from serving.signatures.text_inputs import TextInputs

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"]) + "\n")
    text_inputs = TextInputs(BertTokenizer(str(vocab)), seq_length=8)
    tokenize = tf.function(lambda texts: text_inputs.tokenize(texts, "text"))
    for blank in ["", " ", "\t\n\r\x0b\x0c", "\x1c\x1f\x85\xa0\u3000", "\x01\u200b\x7f"]:
        ids = tokenize(tf.constant(["hello", "hello", blank]))
        assert ids.to_list() == [[5], [5], []], repr(blank)
        assert TextInputs.empty([ids]).numpy().tolist() == [False, False, True]
        packed = text_inputs.pack([ids])
        assert packed["token_ids"].numpy()[2, :3].tolist() == [2, 3, 0]  # [CLS] [SEP] [PAD]
        assert packed["padding_mask"].numpy()[2].sum() == 2
        # a pair: empty only where both texts have no token
        assert TextInputs.empty([ids, tokenize(tf.constant([blank, "hello", blank]))]).numpy().tolist() == [
            False, False, True]
    with pytest.raises(tf.errors.InvalidArgumentError, match=_named("text", r"invalid UTF-8 at row\] \[1\]")):
        tokenize(tf.constant([b"", b"\xff"]))
    # The line and paragraph separators split words, as the original's str.split(): no token.
    assert tokenize(tf.constant(["\u2028", " \u2029 ", "hello\u2028hello"])).to_list() == [[], [], [5, 5]]
    # 8 tokens * 64 characters are read after the leading whitespace, not from the start
    assert tokenize(tf.constant([" " * 5000 + "hello"])).to_list() == [[5]]
    assert tokenize(tf.constant([], tf.string)).to_list() == []
