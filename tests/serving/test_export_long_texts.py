"""Long texts in the SavedModel: a classifier / embedder that reads windows in `predict` reads
the same windows inside the graph (issue 23), and every raw-text signature says which texts it
read only in part (`truncated`).

Tiny random encoders on one-token words (`export_fixtures`) at `seq_length=16` (windows of 14
word pieces): a 3,000-word document is a few hundred windows, served in one request.
"""

import os
import shutil
import time
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks

SEQ_LENGTH = 16
WORDS = export_fixtures.WORDS


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return export_fixtures.make_encoder_spec(str(tmp_path_factory.mktemp("tiny")))


def documents():
    rng = np.random.default_rng(0)
    lengths = [3200, 9, 40, 700]
    return [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n)) for n in lengths]


def served(task, tmp_path, name):
    path = task.export(str(tmp_path), name)
    return tf.saved_model.load(path).signatures["serving_default"]


@pytest.mark.parametrize("aggregation", ["mean", pytest.param("max", marks=pytest.mark.slow)])
def test_served_classifier_reads_the_windows_predict_reads(spec, tmp_path, aggregation):
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=4000, stride=9,
                                                      window_aggregation=aggregation)
    texts = documents()
    expected = classifier.predict(texts)
    outputs = served(classifier, tmp_path, f"windows_{aggregation}")(text=tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=1e-5)
    assert outputs["truncated"].numpy().tolist() == [False] * 4
    # a per-call max_length below the longest: predict cuts it (and says so), as an export of it would
    with pytest.warns(UserWarning, match="1 of 4 texts"):
        classifier.predict(texts, max_length=1000)


def test_served_classifier_reads_the_evidence_predict_reads(spec, tmp_path):
    # window_aggregation="evidence": the statistics fitted after fit travel in the head, and the
    # export picks the same windows as predict.
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=4000, stride=9, window_aggregation="evidence")
    rng = np.random.default_rng(1)
    short = [" ".join(WORDS[i] for i in rng.integers(0, 40, 8)) for _ in range(24)]
    classifier.fit(short, ["neg", "pos"] * 12, epochs=1, batch_size=8, verbose=0)
    classifier.fit_window_statistics(short)
    assert classifier.head.window_relevance.fitted
    texts = documents() + [documents()[3] + " " + short[0]]
    expected = classifier.predict(texts)
    outputs = served(classifier, tmp_path, "windows_evidence")(text=tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=1e-5)
    assert classifier.score(texts, ["neg"] * 5)["num_examples"] == 5


def test_evidence_logits_agree_with_their_numpy_oracle():
    from bert_keras.models.window_relevance import evidence_logits
    from evidence_oracle import evidence_logits_reference

    rng = np.random.default_rng(0)
    for trial in range(50):
        counts = rng.integers(1, 7, size=rng.integers(1, 6))
        document = np.repeat(np.arange(len(counts)), counts)
        logits = rng.normal(size=(len(document), 3))
        distances = rng.choice([0.5, 1.0, 2.0, 3.0], size=len(document))  # ties on purpose
        starts = np.flatnonzero(np.diff(np.concatenate([[-1], document])))
        expected = evidence_logits_reference(logits, distances, 1.0, starts)
        got = evidence_logits(tf.constant(logits), tf.constant(distances), tf.constant(1.0, tf.float64),
                              tf.constant(document, tf.int64))
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
    # the rule: most windows near -> their mean; else the nearest window alone
    logits = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 0.0], [0.0, 5.0], [7.0, 7.0]])
    distances = np.array([0.5, 0.9, 4.0, 0.2, 9.0])
    np.testing.assert_allclose(evidence_logits(tf.constant(logits), tf.constant(distances), tf.constant(1.0, tf.float64),
                                               tf.constant([0, 0, 0, 1, 1], tf.int64)),
                               [[0.5, 0.5], [0.0, 5.0]])


def test_the_embedded_server_batches_windows_not_requests(spec, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from serving.server.engine import BatchingOptions, InferenceEngine, ModelSource
    from serving.server.window_cost import WindowCost

    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=4000, stride=9)
    texts = documents()
    expected = classifier.predict(texts)
    path = classifier.export(str(tmp_path), "windows")
    cost = WindowCost.of_export(path)
    assert (cost.window, cost.stride, cost.max_length) == (SEQ_LENGTH - 2, 9, 4000)
    estimated = cost.windows(np.array([t.encode() for t in texts], dtype=object))
    assert estimated[0] > 100 and estimated[1] == 1  # the 3,200-word text is hundreds of windows
    engine = InferenceEngine([ModelSource("windows", str(tmp_path / "windows"))], poll_interval_s=0,
                             batching=BatchingOptions(max_batch_size=64, batch_timeout_micros=200_000))
    engine.start()
    try:
        def request(i):
            text = np.array([texts[i % 4].encode()], dtype=object)
            return engine.predict_arrays("windows", inputs={"text": text})[2]["probabilities"][0]

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(request, range(8)))
        stats = engine.batching_stats()
    finally:
        engine.stop(drain_timeout_s=5)
    np.testing.assert_allclose(results, [expected[i % 4] for i in range(8)], atol=1e-5)
    # Each long document fills a batch of windows by itself; the short ones merge.
    assert stats["cost"] == 2 * int(estimated.sum()) and stats["rows"] == 8
    assert stats["batches"] >= 3
    # A model without windows costs its rows, as in TF Serving.
    one_window = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH)
    assert WindowCost.of_export(one_window.export(str(tmp_path), "one_window")) is None


def test_served_embedder_reads_the_windows_predict_reads(spec, tmp_path):
    keras.utils.set_random_seed(0)
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=SEQ_LENGTH, normalize=True, max_length=1000)
    texts = documents()
    with pytest.warns(UserWarning, match="1 of 4 texts have more than 1000 word pieces"):
        expected = embedder.predict(texts)
    outputs = served(embedder, tmp_path, "embedder")(text=tf.constant(texts))
    np.testing.assert_allclose(outputs["embedding"].numpy(), expected, atol=1e-5)
    assert outputs["truncated"].numpy().tolist() == [True, False, False, False]


def test_without_windows_the_served_model_flags_what_it_cut(spec, tmp_path):
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH)
    texts = documents()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = classifier.predict(texts)
    outputs = served(classifier, tmp_path, "one_window")(text=tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=1e-5)
    assert outputs["truncated"].numpy().tolist() == [True, False, True, True]


@pytest.mark.slow
def test_a_max_length_under_one_window_is_served_as_predict_reads_it(spec, tmp_path):
    # max_length=10 under the 14-piece window: predict reads each text's first 10 pieces; the
    # export read a whole window of 14 (other probabilities, the 9-word text not flagged).
    keras.utils.set_random_seed(0)
    texts = documents()
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=10)
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=SEQ_LENGTH, max_length=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = classifier.predict(texts), embedder.predict(texts)
    outputs = served(classifier, tmp_path, "short_classifier")(text=tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected[0], atol=1e-5)
    assert outputs["truncated"].numpy().tolist() == [True, False, True, True]
    outputs = served(embedder, tmp_path, "short_embedder")(text=tf.constant(texts))
    np.testing.assert_allclose(outputs["embedding"].numpy(), expected[1], atol=1e-5)
    assert outputs["truncated"].numpy().tolist() == [True, False, True, True]


def test_a_request_of_many_windows_runs_in_chunks_with_the_same_outputs(spec, tmp_path, monkeypatch):
    # The graph runs the model on at most MODEL_CALL_TOKENS positions at once (memory bounded
    # by the chunk, not the request): at 5 windows a chunk, a 3,200-word document is a
    # hundred chunks, and the outputs are predict's (classifier logits, embedder vectors).
    from serving.signatures import module

    monkeypatch.setattr(module, "MODEL_CALL_TOKENS", 5 * SEQ_LENGTH)
    keras.utils.set_random_seed(0)
    texts = documents()
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=4000, stride=9)
    outputs = served(classifier, tmp_path, "chunked")(text=tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), classifier.predict(texts), atol=1e-5)
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=SEQ_LENGTH, max_length=4000)
    signature = served(embedder, tmp_path, "chunked_embedder")
    vectors = signature(text=tf.constant(texts))["embedding"].numpy()
    np.testing.assert_allclose(vectors, embedder.predict(texts), atol=1e-5)
    empty = signature(text=tf.constant([], tf.string))["embedding"]
    assert empty.shape[0] == 0


def test_a_request_of_more_windows_than_the_limit_is_refused_before_it_runs(spec, tmp_path):
    from serving.server.engine import InferenceEngine, ModelSource
    from serving.server.errors import ServingError
    from serving.server.request_validation import Limits

    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=4000, stride=9)
    classifier.export(str(tmp_path), "limited")
    engine = InferenceEngine([ModelSource("limited", str(tmp_path / "limited"))], poll_interval_s=0,
                             limits=Limits(max_windows_per_request=200))
    engine.start()
    try:
        texts = documents()
        long_text = np.array([texts[0].encode()] * 3, dtype=object)  # ~3 x 460 estimated windows
        with pytest.raises(ServingError, match=r"RESOURCE_EXHAUSTED: .*3 text\(s\) may read up to \d+ windows.*"
                                               r"limit of 200 windows per request \(--max-windows-per-request\)"):
            engine.predict_arrays("limited", inputs={"text": long_text})
        # short texts under the limit, then the server goes on serving
        short = np.array([t.encode() for t in texts[1:3]], dtype=object)
        probabilities = engine.predict_arrays("limited", inputs={"text": short})[2]["probabilities"]
        np.testing.assert_allclose(probabilities, classifier.predict(texts[1:3]), atol=1e-5)
    finally:
        engine.stop(drain_timeout_s=5)


def test_the_window_limit_is_read_from_the_graph_not_from_the_model_card(spec, tmp_path):
    # A version copied without assets.extra/ (its model card and manifest) refuses what the
    # intact export refuses: the window settings travel in the graph (`window_settings`).
    from serving.server.engine import InferenceEngine, ModelSource
    from serving.server.errors import ServingError
    from serving.server.request_validation import Limits

    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=SEQ_LENGTH,
                                                      max_length=4000, stride=9)
    path = classifier.export(str(tmp_path), "cardless")
    shutil.rmtree(os.path.join(path, "assets.extra"))
    old = time.time() - 60  # settled long ago: loaded at once without a manifest
    for root, _, files in os.walk(path):
        for name in files:
            os.utime(os.path.join(root, name), (old, old))
    assert tf.saved_model.load(path).window_settings().numpy().tolist() == [SEQ_LENGTH - 2, 9, 4000]
    engine = InferenceEngine([ModelSource("cardless", str(tmp_path / "cardless"))], poll_interval_s=0,
                             limits=Limits(max_windows_per_request=200))
    engine.start()
    try:
        long_text = np.array([documents()[0].encode()] * 3, dtype=object)
        with pytest.raises(ServingError, match=r"RESOURCE_EXHAUSTED: .*limit of 200 windows per request"):
            engine.predict_arrays("cardless", inputs={"text": long_text})
    finally:
        engine.stop(drain_timeout_s=5)


def test_the_model_runs_once_per_chunk_of_rows(monkeypatch):
    # The chunking itself: 10 rows of 4 positions at 12 positions a chunk are 4 model calls
    # (3 + 3 + 3 + 1 rows), and the outputs are the rows in order.
    from serving.signatures import module

    monkeypatch.setattr(module, "MODEL_CALL_TOKENS", 12)
    calls = tf.Variable(0)
    spec = {"token_ids": tf.TensorSpec([None, None], tf.int32)}

    @tf.function(input_signature=[spec])
    def model(inputs):
        calls.assign_add(1)
        return {"doubled": 2 * inputs["token_ids"], "rows": tf.shape(inputs["token_ids"])[:1]}

    ids = tf.reshape(tf.range(40, dtype=tf.int32), [10, 4])
    outputs = tf.function(lambda x: module._in_chunks(model, x), input_signature=[spec])({"token_ids": ids})
    assert int(calls.numpy()) == 4
    np.testing.assert_array_equal(outputs["doubled"].numpy(), 2 * ids.numpy())
    assert outputs["rows"].numpy().tolist() == [3, 3, 3, 1]


def test_the_window_limit_counts_what_any_text_may_read(minilm_dir):
    # The limit is checked on a bound, not the batcher's estimate: texts of commas, rare
    # letter runs or Hangul are a piece per byte or nearly, 4 x what 4 bytes a piece says.
    from pipelines import BertTokenizer
    from pipelines.windowing import num_windows
    from serving.server.window_cost import WindowCost

    tokenizer = BertTokenizer(os.path.join(minilm_dir, "vocab.txt"), lowercase=True)
    cost = WindowCost(window=30, stride=15, max_length=4000)
    texts = ["," * 200, "qxz" * 70, "한국어 문서를 읽는다 " * 20, "naïve café, déjà vu! " * 30, "東京大学" * 40,
             "word " * 300, "\t\n " * 50 + "x", "Zoë\u0301\u0308 " * 40]
    pieces = [len(row) for row in tokenizer.tokenize(tf.constant(texts)).to_list()]
    real = np.array([num_windows(min(n, 4000), 30, 15) for n in pieces])
    encoded = np.array([t.encode() for t in texts], dtype=object)
    bound, estimate = cost.windows(encoded, bound=True), cost.windows(encoded)
    assert (real <= bound).all(), (real, bound)
    assert (estimate < real).any()  # the estimate alone would let these through under the limit
    assert bound[0] == real[0] == num_windows(200, 30, 15)  # one comma, one piece
