"""Raw-text inputs inside the exported graph: bad input errors, huge input.

* Invalid UTF-8 and empty / whitespace-only text raise InvalidArgumentError
  naming the input and the row ("input 'context': empty text (no characters other
  than whitespace) at row 1"), from the graph itself (so TF Serving answers
  INVALID_ARGUMENT too); `Assert` prints the message C-escaped (\\'context\\').
* A 1 MB text is truncated, never an error, and answers as the Python path on the
  whole text does: the graph cuts it before tokenizing, so only the prefix a model
  can read is tokenized (its cost against a text of one window:
  benchmarks/bench_export_long_text.py).

(The core tokenizer backend is tested with `bert-keras export --tokenizer core`
in test_export_layout.py.)
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from serving.signatures import finetuned_for_export, reference_outputs

_LOADED = {}


def serve(exported, signature="serving_default"):
    if exported not in _LOADED:
        base_path, name, version = exported
        _LOADED[exported] = tf.saved_model.load(os.path.join(base_path, name, str(version)))
    return _LOADED[exported].signatures[signature]


BAD_INPUTS = [
    (b"caf\xc3", "invalid UTF-8 at row\\] \\[1\\]"),        # truncated multi-byte character
    (b"\xed\xa0\x80", "invalid UTF-8 at row\\] \\[1\\]"),   # UTF-16 surrogate, not valid UTF-8
    (b"", r"empty text \(no characters other than whitespace\) at row\] \[1\]"),
    (" \t\n\u3000\u00a0".encode("utf-8"),                   # ASCII, ideographic and no-break spaces
     r"empty text \(no characters other than whitespace\) at row\] \[1\]"),
    ("\x01\u200b".encode("utf-8"), r"no token \(only characters the tokenizer drops"),
]


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
def test_bad_text_raises_invalid_argument_naming_the_input(kind, name, other, exported_model):
    function = serve(exported_model(kind))
    for bad, problem in BAD_INPUTS:
        # The bad row is the second of a batch: the whole request is rejected.
        inputs = {k: tf.constant([b"fine", v]) for k, v in other.items()}
        inputs[name] = tf.constant([b"A good row.", bad])
        with pytest.raises(tf.errors.InvalidArgumentError, match=_named(name, problem)) as raised:
            function(**inputs)
        assert "Tensor had NaN values" not in str(raised.value)


def test_wrong_number_of_endings_names_the_input(exported_model):
    function = serve(exported_model("multiple_choice"))
    with pytest.raises(tf.errors.InvalidArgumentError, match=_named("endings", "expected 4 endings")):
        function(context=tf.constant(["He sat."]), endings=tf.constant([["a", "b", "c"]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=_named("endings", "empty text")):
        function(context=tf.constant(["He sat."]), endings=tf.constant([["a", "b", "", "d"]]))


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


def test_text_inputs_apply_the_one_rule_for_empty_text(tmp_path):
    """Empty or whitespace-only (what BERT splits on or drops) is refused naming the row; leading spaces do
    not eat the cut. The line and paragraph separators are words to BERT ([UNK]), not whitespace."""
    from pipelines import BertTokenizer
    from serving.signatures.text_inputs import TextInputs

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"]) + "\n")
    text_inputs = TextInputs(BertTokenizer(str(vocab)), seq_length=8)
    tokenize = tf.function(lambda texts: text_inputs.tokenize(texts, "text"))
    for blank in ["", " ", "\t\n\r\x0b\x0c", "\x1c\x1f\x85\xa0\u3000"]:
        assert blank.isspace() or not blank
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"input \\'text\\': empty text \(no characters other than whitespace\) "
                                 r"at row\] \[2\]") as raised:
            tokenize(tf.constant(["hello", "hello", blank]))
        assert "NaN" not in str(raised.value)
    assert tokenize(tf.constant(["\u2028", " \u2029 "])).to_list() == [[1], [1]]  # [UNK], as in predict
    # 8 tokens * 64 characters are read after the leading whitespace, not from the start
    assert tokenize(tf.constant([" " * 5000 + "hello"])).to_list() == [[5]]
    assert tokenize(tf.constant([], tf.string)).to_list() == []
