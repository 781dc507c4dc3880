"""The NER export reads long documents in windows, in the graph, as `TokenClassifier.predict` does.

A tiny random token classifier (`export_fixtures`: 1 layer, H=32, the tiny vocabulary of
letters and "##" letters, so real words are several pieces each) with `seq_length` 32
(windows of 30 pieces) and `max_length` 4,096 pieces, `stride` 12, exported with
`Task.export_result` (the built-in fresh-process check compares `reference_outputs`, which
follows the same windows). Documents are real text: `pipelines/data/sample_corpus.txt`
with the CoNLL-2003 sentences of `tests/data/tasks/conll2003_mini.txt` between its
paragraphs (as `tests/bert_keras/test_long_documents.py` builds them). The random head tags
plenty of words, so entities (and entities whose words come from different windows) occur
all over the document.
"""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import models, tasks
from pipelines.datasets import conll
from pipelines.windowing import max_context_windows as numpy_max_context_windows
from pipelines.windowing import max_context_windows_in_graph
from pipelines.windowing import window_options
from serving.signatures import token_classification
from serving.signatures.text_inputs import python_token_spans

ROOT = export_fixtures.ROOT
SEQ_LENGTH = 32
MAX_LENGTH = 4096
STRIDE = 12


def real_text(max_words=None):
    """The sample corpus with a CoNLL sentence after every 20 of its lines, as one text."""
    with open(os.path.join(ROOT, "pipelines", "data", "sample_corpus.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    sentences = conll.read_conll(os.path.join(ROOT, "tests", "data", "tasks", "conll2003_mini.txt"))
    words = []
    for i, line in enumerate(lines):
        words += re.findall(r"\w+|[^\w\s]", line)
        if i % 20 == 19:
            words += sentences[(i // 20) % len(sentences)].words
    return " ".join(words[:max_words])


def entities_of(served, row):
    count = int(served["num_entities"][row])
    return [(served["entity_text"][row, i].decode(), served["entity_label"][row, i].decode(),
             int(served["start_char"][row, i]), int(served["end_char"][row, i])) for i in range(count)]


def predicted_entities(result):
    return [(e["text"], e["type"], e["start_char"], e["end_char"]) for e in result["entities"]]


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("ner_long"))
    vocab = export_fixtures.write_vocab(os.path.join(directory, "vocab.txt"))
    encoder = export_fixtures.tiny_encoder(0)
    task = tasks.TokenClassifier(
        models.BertTokenClassifier(encoder, num_classes=len(export_fixtures.CONLL_LABELS)),
        labels=export_fixtures.CONLL_LABELS, vocab_file=vocab, seq_length=SEQ_LENGTH,
        settings={"max_length": MAX_LENGTH, "stride": STRIDE})
    return task


@pytest.fixture(scope="module")
def served(tagger, tmp_path_factory):
    """`(signature, export result)`: the windowed export (tf_text tokenizer, checked)."""
    base = str(tmp_path_factory.mktemp("ner_long_export"))
    result = tagger.export_result(base, "ner-long", tokenizer_backend="tf_text", warmup_requests=0,
                                  progress=None)
    signature = tf.saved_model.load(result.path).signatures["serving_default"]
    return signature, result


def call(signature, texts):
    return {k: v.numpy() for k, v in signature(text=tf.constant(texts)).items()}


@pytest.fixture(scope="module")
def documents(tagger):
    """(a document of 3,000+ pieces read whole, one of more than max_length pieces)."""
    tokenizer = tagger.tokenizer
    whole = real_text()
    read = real_text(1000)
    sizes = [len(python_token_spans(tokenizer, t)[0]) for t in (read, whole)]
    assert 3000 < sizes[0] <= MAX_LENGTH < sizes[1], sizes
    return read, whole


def test_max_context_windows_in_the_graph_equal_numpy():
    for window in range(1, 21):
        for stride in range(1, window + 5):
            positions, lengths, want = [], [], []
            for n in range(1, 4 * window + 8):
                positions += range(n)
                lengths += [n] * n
                want.append(numpy_max_context_windows(n, window, stride))
            got = max_context_windows_in_graph(
                tf.constant(positions, tf.int64), tf.constant(lengths, tf.int64), window, stride)
            np.testing.assert_array_equal(got.numpy(), np.concatenate(want),
                                          err_msg=f"window {window}, stride {stride}")
    # Long texts, model-sized windows.
    for window, stride, n in ((126, 63, 4096), (126, 100, 3001), (510, 128, 8192), (30, 12, 5000),
                              (62, 1, 700), (62, 61, 4000)):
        got = max_context_windows_in_graph(tf.range(n, dtype=tf.int64),
                                                       tf.fill([n], tf.constant(n, tf.int64)), window, stride)
        np.testing.assert_array_equal(got.numpy(), numpy_max_context_windows(n, window, stride))


def test_window_bound_is_stated(tagger):
    window, stride, max_length = window_options(SEQ_LENGTH, MAX_LENGTH, STRIDE)
    bound = token_classification.max_windows(tagger.to_finetuned())
    assert bound == 1 + -(-(MAX_LENGTH - window) // STRIDE)
    from pipelines.windowing import Windows
    assert len(Windows.of([MAX_LENGTH * 3], window=window, stride=stride, max_length=max_length)) == bound


@pytest.mark.slow
def test_served_long_documents_equal_predict(tagger, served, documents):
    signature, result = served
    assert result.audit.ok and result.check is not None  # the built-in check passed
    read, whole = documents
    short = "John Smith lives in New York."
    texts = [read, short, whole]
    out = call(signature, texts)
    predicted = tagger.predict(texts)
    assert out["truncated"].tolist() == [r["truncated"] for r in predicted] == [False, False, True]
    for row, result_row in enumerate(predicted):
        assert entities_of(out, row) == predicted_entities(result_row), row
        for text, _, start, end in entities_of(out, row):
            assert texts[row][start:end] == text
    assert predicted[2]["words_read"] < len(predicted[2]["words"])
    assert entities_of(out, 2)[-1][3] < len(texts[2])  # nothing tagged past max_length

    # All the outputs (scores included) equal the Python reference on the same windows.
    expected = token_classification.reference_outputs(tagger.to_finetuned(), {"text": texts})
    for name, want in expected.items():
        if want.dtype.kind == "f":
            np.testing.assert_allclose(out[name], want, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(out[name], want, err_msg=name)

    # Entities whose words take their tags from different windows come out whole.
    window, stride, _ = window_options(SEQ_LENGTH, MAX_LENGTH, STRIDE)
    words = token_classification.tokenizer_words(tagger.tokenizer, read)
    n = words[-1][1] + 1
    word_window = numpy_max_context_windows(n, window, stride)[[w[0] for w in words]]
    word_at = {w[2]: i for i, w in enumerate(words)}
    word_ending = {w[3]: i for i, w in enumerate(words)}
    across = [e for e in entities_of(out, 0)
              if len(set(word_window[word_at[e[2]]:word_ending[e[3]] + 1])) > 1]
    assert len(entities_of(out, 0)) > 50 and across, (len(entities_of(out, 0)), across)


@pytest.mark.slow
def test_truncated_with_windows(tagger, served):
    signature, _ = served
    # Past the max_length * 64 code points tokenized, text is unread: truncated.
    spaced = "John Smith " + " " * (MAX_LENGTH * 64) + "lives in Paris."
    trailing = "John Smith lives in Paris." + " " * (MAX_LENGTH * 64)
    out = call(signature, [spaced, trailing])
    assert out["truncated"].tolist() == [True, False]
    assert entities_of(out, 0) == predicted_entities(tagger.predict(["John Smith "])[0])


def test_truncated_without_windows(finetuned_dir, exported_model):
    """The session's plain NER export (one window of 30 pieces): truncated past it."""
    task = tasks.load(finetuned_dir("ner"))
    base_path, name, version = exported_model("ner")
    signature = tf.saved_model.load(os.path.join(base_path, name, str(version))).signatures["serving_default"]
    texts = ["John Smith lives in Paris.", real_text(60), "Paris"]
    out = call(signature, texts)
    predicted = task.predict(texts)
    assert out["truncated"].tolist() == [r["truncated"] for r in predicted] == [False, True, False]
    for row, result_row in enumerate(predicted):
        assert entities_of(out, row) == predicted_entities(result_row)


@pytest.mark.slow
def test_core_tokenizer_export_passes_the_audit_and_equals_tf_text(tagger, served, documents, tmp_path):
    """Both tokenizer backends: the windowed graph passes the strict op audit (core: no
    TF-Text op at all) and the fresh-process check, and both serve the same entities."""
    signature, fast_result = served
    result = tagger.export_result(str(tmp_path), "ner-core", tokenizer_backend="core", strict=True,
                                  warmup_requests=0, progress=None)
    assert result.audit.ok and not result.audit.tf_text_ops and fast_result.audit.ok
    assert result.card["check"]["ok"]
    core = tf.saved_model.load(result.path).signatures["serving_default"]
    texts = list(documents)
    fast_out, core_out = call(signature, texts), call(core, texts)
    for name in fast_out:
        if fast_out[name].dtype.kind == "f":
            np.testing.assert_allclose(core_out[name], fast_out[name], atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(core_out[name], fast_out[name], err_msg=name)


@pytest.mark.slow
def test_served_entities_keep_trailing_combining_marks_as_predict(tagger, served):
    import unicodedata

    signature, _ = served
    words = [unicodedata.normalize("NFD", w) for w in ("José", "Zoë", "café", "naïve", "Ångström")] + [
        "में", "है", "दिल्ली"]
    texts = [" ".join(words[i % len(words)] for i in range(n, n + 40)) for n in range(6)]
    out = call(signature, texts)
    assert out["num_entities"].sum() > 0  # the random tagger finds some: the comparison is not empty
    for row, result in enumerate(tagger.predict(texts)):
        assert result["words"] == texts[row].split()
        assert entities_of(out, row) == predicted_entities(result), row
        for text, _, start, end in entities_of(out, row):
            assert texts[row][start:end] == text and (end == len(texts[row]) or texts[row][end] == " ")
