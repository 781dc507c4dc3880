"""A far window's sentences, read alone (`bert_keras.models.window_relevance`): a short text after
unrelated text shares its window with that text; the classifier reads the window's sentence that
looks most like its training texts, unless most of the window's sentences look typical (a long
text of the kind, far only by its length)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks
from bert_keras.models.window_relevance import (TYPICAL_SHARE, WindowRelevance, closest_sentences,
                                                evidence_logits, evidence_logits_in_graph, sentence_end_ids,
                                                packed_rows, sentences_of_windows)

CLS, SEP, DOT, BANG = 2, 3, 50, 51


def packed(rows, length=12):
    token_ids = np.zeros((len(rows), length), np.int32)
    for i, row in enumerate(rows):
        token_ids[i, :len(row)] = row
    return {"token_ids": tf.constant(token_ids), "segment_ids": tf.zeros_like(token_ids),
            "padding_mask": tf.constant((token_ids > 0).astype(np.int32))}


def test_sentence_end_ids_are_the_whole_word_end_pieces():
    vocabulary = ["[PAD]", "a", ".", "##.", "!", "?", "\u3002", "..."]
    assert sentence_end_ids(vocabulary).tolist() == [2, 4, 5, 6]


def test_each_sentence_of_each_window_becomes_a_row_with_the_windows_special_pieces():
    windows = packed([
        [CLS, 10, 11, DOT, 12, 13, BANG, 14, SEP],  # two ended sentences and an open one
        [CLS, SEP],                                   # nothing to read
        [CLS, 20, 21, 22, SEP],                       # no end piece: the whole window
        [CLS, DOT, DOT, 30, SEP],                     # end pieces alone are sentences too
    ])
    rows, owner = sentences_of_windows(windows, tf.constant([DOT, BANG]))
    inputs = packed_rows(rows)
    rows = [[int(t) for t in row if t] for row in inputs["token_ids"].numpy()]
    assert rows == [[CLS, 10, 11, DOT, SEP], [CLS, 12, 13, BANG, SEP], [CLS, 14, SEP], [CLS, 20, 21, 22, SEP],
                    [CLS, DOT, SEP], [CLS, DOT, SEP], [CLS, 30, SEP]]
    assert owner.numpy().tolist() == [0, 0, 0, 2, 3, 3, 3]
    np.testing.assert_array_equal(inputs["padding_mask"].numpy(), (inputs["token_ids"].numpy() > 0).astype(int))
    assert not np.any(inputs["segment_ids"].numpy())
    # no end ids at all (a vocabulary without them): each window is one sentence
    rows, owner = sentences_of_windows(windows, tf.zeros([0], tf.int32))
    assert owner.numpy().tolist() == [0, 2, 3]
    # no window: no row
    rows, owner = sentences_of_windows(packed([]), tf.constant([DOT]))
    assert rows.nrows() == 0 and owner.shape[0] == 0 and packed_rows(rows)["token_ids"].shape == (0, 2)


def test_closest_sentences_picks_the_nearest_and_counts_the_typical_share():
    windows = packed([[CLS, 10, DOT, 11, DOT, 12, SEP], [CLS, SEP], [CLS, 13, 14, SEP],
                      [CLS, 30, DOT, 5, DOT, 40, DOT, 6, SEP]])

    def run(inputs):  # a sentence's distance: its first word's id; its logits: [id, -id]
        first = tf.cast(inputs["token_ids"][:, 1], tf.float32)
        return tf.stack([first, -first], axis=-1), first

    logits, distances, share = closest_sentences(run, windows, tf.constant([DOT]), typical=11.0)
    assert distances.numpy().tolist() == [10.0, np.inf, 13.0, 5.0]
    # the closest sentence and the typical ones next to it (window 0: 10 and 11, not 12; window
    # 3: 5 alone, its typical 6 is past the untypical 40); a closest one that is not typical
    # itself still counts (window 2)
    np.testing.assert_array_equal(logits.numpy(), [[10.5, -10.5], [0, 0], [13, -13], [5, -5]])
    np.testing.assert_allclose(share.numpy(), [2 / 3, 0.0, 0.0, 0.5])
    # a window of one long sentence and many one-piece ones: rows run longest first, in chunks
    # of bounded padded positions, never all padded to the long one
    long_and_short = packed([[CLS] + [10] * 300 + [DOT] * 200 + [SEP]], length=512)
    widths = []

    def recording(inputs):
        widths.append(tuple(inputs["token_ids"].shape))
        return run(inputs)

    logits, distances, share = closest_sentences(recording, long_and_short, tf.constant([DOT]), typical=11.0)
    assert distances.numpy().tolist() == [10.0] and share.numpy()[0] == pytest.approx(1 / 200)
    assert widths[0] == (13, 303) and all(rows * width <= 4096 for rows, width in widths)
    assert sum(rows for rows, _ in widths) == 200  # the long sentence ends at the first end piece
    # no window at all: one run on no row, empty outputs
    logits, distances, share = closest_sentences(run, packed([]), tf.constant([DOT]), typical=11.0)
    assert logits.shape == (0, 2) and distances.shape == (0,)


def rule_case(rng):
    counts = rng.integers(1, 6, size=rng.integers(1, 6))
    document = np.repeat(np.arange(len(counts)), counts)
    logits = rng.normal(size=(len(document), 3))
    distances = rng.choice([0.5, 1.0, 2.0, 3.0, 4.0], size=len(document))
    sentence_logits = rng.normal(size=(len(document), 3))
    sentence_distances = rng.choice([0.25, 1.0, 2.0, 5.0, np.inf], size=len(document))
    share = rng.choice([0.0, 0.25, TYPICAL_SHARE, 1.0], size=len(document))
    return document, logits, distances, (sentence_logits, sentence_distances, share)


def test_the_sentence_rule_agrees_in_numpy_and_in_the_graph():
    rng = np.random.default_rng(0)
    fired = 0
    for _ in range(60):
        document, logits, distances, sentences = rule_case(rng)
        starts = np.flatnonzero(np.diff(np.concatenate([[-1], document])))
        expected = evidence_logits(logits, distances, 1.0, starts, lambda chosen: [s[chosen] for s in sentences])
        got = evidence_logits_in_graph(tf.constant(logits), tf.constant(distances), tf.constant(1.0, tf.float64),
                                       tf.constant(document, tf.int64),
                                       lambda chosen: [tf.gather(tf.constant(s), chosen) for s in sentences])
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
        fired += int(np.any(expected != evidence_logits(logits, distances, 1.0, starts)))
    assert fired >= 10  # the sentence path changed the answer of many cases
    # the rule by hand: text 0 mostly near (mean of near windows, sentences unread); text 1 far:
    # its nearest window 3 (distance 2) yields to its sentence (1.5 < 2, share 0); text 2 far, but
    # its window's sentences are mostly typical: the window stays; text 3: the sentence is farther
    logits = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 0.0], [0.0, 5.0], [7.0, 7.0], [2.0, 1.0], [4.0, 0.0]])
    distances = np.array([0.5, 0.9, 4.0, 2.0, 9.0, 3.0, 2.5])
    sentence = (np.array([[9.0, 9.0]] * 7) * np.arange(7)[:, None], np.full(7, 1.5), np.zeros(7))
    sentence[2][5] = TYPICAL_SHARE
    sentence[1][6] = 3.0
    got = evidence_logits(logits, distances, 1.0, np.array([0, 3, 5, 6]), lambda chosen: [s[chosen] for s in sentence])
    np.testing.assert_allclose(got, [[0.5, 0.5], [27.0, 27.0], [2.0, 1.0], [4.0, 0.0]])


def test_statistics_saved_before_the_typical_distance_load_and_read_windows_only():
    relevance = WindowRelevance(num_classes=2, hidden_size=4, layer=1)
    features = np.random.default_rng(0).normal(size=(50, 4))
    relevance.fit_statistics(features, np.arange(50) % 2)
    assert relevance.reads_sentences
    distances = relevance.distances_of(tf.constant(features, tf.float32)).numpy()
    assert float(relevance.typical.numpy()) == pytest.approx(np.quantile(distances, 0.5), rel=1e-5)
    old = {str(i): v.numpy() for i, v in enumerate((relevance.class_means, relevance.precision, relevance.threshold))}
    loaded = WindowRelevance(num_classes=2, hidden_size=4, layer=1)
    loaded.load_own_variables(old)
    assert loaded.fitted and not loaded.reads_sentences
    np.testing.assert_array_equal(loaded.precision.numpy(), relevance.precision.numpy())


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return export_fixtures.make_encoder_spec(str(tmp_path_factory.mktemp("tiny")))


def test_predict_and_the_export_read_the_same_sentences(spec, tmp_path):
    words = export_fixtures.WORDS
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=16, max_length=4000,
                                                      stride=9)
    rng = np.random.default_rng(1)
    short = [" ".join(words[i] for i in rng.integers(0, 40, 6)) + " ." for _ in range(24)]
    classifier.fit(short, ["neg", "pos"] * 12, epochs=1, batch_size=8, verbose=0)
    relevance = classifier.head.window_relevance
    assert relevance.reads_sentences

    def sentence():
        return " ".join(words[i] for i in rng.integers(0, len(words), rng.integers(1, 6))) + rng.choice([" .", " !"])

    texts = [" ".join(sentence() for _ in range(n)) for n in (3, 40, 200, 1)] + ["no end piece at all " * 9]
    relevance.threshold.assign(1e-6)  # every window far, and no sentence typical: sentences decide
    relevance.typical.assign(1e-7)
    with_sentences = classifier.predict(texts)
    relevance.typical.assign(0.0)  # reads windows only
    windows_only = classifier.predict(texts)
    assert np.sum(np.abs(with_sentences - windows_only).max(-1) > 1e-4) >= 2
    relevance.typical.assign(1e-7)
    for backend in ("tf_text", "core"):  # TF Serving runs both graphs: the op audit is clean
        result = classifier.export_result(str(tmp_path / backend), "sentences", tokenizer_backend=backend, strict=True)
        assert result.audit.ok
        served = tf.saved_model.load(result.path).signatures["serving_default"]
        np.testing.assert_allclose(served(text=tf.constant(texts))["probabilities"].numpy(), with_sentences,
                                   atol=1e-5)
    # mostly typical sentences (typical above every distance): the windows' answer
    relevance.typical.assign(1e9)
    np.testing.assert_allclose(classifier.predict(texts), windows_only, atol=1e-6)


def test_a_regressor_reads_sentences_the_same_in_predict_and_in_the_export(spec, tmp_path):
    # A regressor's scores are [N], not [N, C]: the windows' rule and the sentences' read them as
    # one column (the export of a regressor with evidence failed to run before).
    words = export_fixtures.WORDS
    keras.utils.set_random_seed(0)
    regressor = tasks.TextClassifier.from_pretrained(spec, num_classes=1, seq_length=16, max_length=4000, stride=9)
    assert regressor.settings["window_aggregation"] == "evidence"
    rng = np.random.default_rng(0)
    short = [" ".join(words[i] for i in rng.integers(0, 40, 6)) + " ." for _ in range(24)]
    regressor.fit(short, list(np.linspace(0.0, 1.0, 24)), epochs=1, batch_size=8, verbose=0)
    relevance = regressor.head.window_relevance
    texts = [" ".join(short[i % 24] for i in range(n)) for n in (1, 30, 100)]
    relevance.threshold.assign(1e-6)
    relevance.typical.assign(0.0)
    windows_only = regressor.predict(texts)
    relevance.typical.assign(1e-7)
    scores = regressor.predict(texts)
    assert scores.shape == (3,) and np.sum(np.abs(scores - windows_only) > 1e-4) >= 1
    served = tf.saved_model.load(regressor.export(str(tmp_path), "regressor")).signatures["serving_default"]
    np.testing.assert_allclose(served(text=tf.constant(texts))["score"].numpy(), scores, atol=1e-5)
