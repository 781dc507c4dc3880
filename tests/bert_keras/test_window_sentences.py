"""A far text's sentences, read alone (`bert_keras.models.window_relevance`): a short text after
unrelated text shares its window with that text; the classifier reads the text's sentences that
look most like its training texts, unless most of its sentences look typical (a long text of the
kind, far only by its length: the mean of its windows)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks
from bert_keras.models.window_relevance import (TYPICAL_SHARE, WindowRelevance, closest_sentences,
                                                evidence_logits, packed_rows, sentence_end_ids, sentence_reading,
                                                sentences_of_texts)
from evidence_oracle import evidence_logits_reference

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


def test_each_sentence_of_each_text_becomes_a_row_with_the_texts_special_pieces():
    # text 0: pieces 10 11 . 12 13 ! 14 15 in windows of 5 pieces, 3 apart (the overlap read once)
    windows = packed([
        [CLS, 10, 11, DOT, 12, 13, SEP],
        [CLS, 12, 13, BANG, 14, 15, SEP],
        [CLS, SEP],                        # text 1: nothing to read
        [CLS, 20, 21, 22, SEP],            # text 2: no end piece: one sentence
        [CLS, DOT, DOT, 30, SEP],          # text 3: a run of end pieces is a sentence too
    ])
    text = tf.constant([0, 0, 1, 2, 3])
    rows, owner = sentences_of_texts(windows, text, 5, 3, tf.constant([DOT, BANG]))
    inputs = packed_rows(rows)
    got = [[int(t) for t in row if t] for row in inputs["token_ids"].numpy()]
    assert got == [[CLS, 10, 11, DOT, SEP], [CLS, 12, 13, BANG, SEP], [CLS, 14, 15, SEP], [CLS, 20, 21, 22, SEP],
                   [CLS, DOT, DOT, SEP], [CLS, 30, SEP]]
    assert owner.numpy().tolist() == [0, 0, 0, 2, 3, 3]
    np.testing.assert_array_equal(inputs["padding_mask"].numpy(), (inputs["token_ids"].numpy() > 0).astype(int))
    assert not np.any(inputs["segment_ids"].numpy())
    # a run of end pieces ends one sentence ("!!!", "..."), after its last
    rows, _ = sentences_of_texts(packed([[CLS, 10, BANG, BANG, DOT, 11, SEP]]), tf.constant([0]), 5, 3,
                                 tf.constant([DOT, BANG]))
    assert rows.to_list() == [[CLS, 10, BANG, BANG, DOT, SEP], [CLS, 11, SEP]]
    # no end ids at all (a vocabulary without them): each text is one sentence
    rows, owner = sentences_of_texts(windows, text, 10, 3, tf.zeros([0], tf.int32))  # rows of up to 10
    assert owner.numpy().tolist() == [0, 2, 3]
    assert [int(t) for t in packed_rows(rows)["token_ids"].numpy()[0] if t] == [CLS, 10, 11, DOT, 12, 13, BANG, 14, 15, SEP]
    # a sentence longer than a row (S - 2 = 10 pieces) is cut into rows of 10
    long = packed([[CLS] + list(range(10, 20)) + [SEP], [CLS] + list(range(16, 26)) + [SEP]], length=12)
    rows, owner = sentences_of_texts(long, tf.constant([0, 0]), 10, 6, tf.constant([DOT]))
    assert rows.to_list() == [[CLS] + list(range(10, 20)) + [SEP], [CLS] + list(range(20, 26)) + [SEP]]
    # no window: no row
    rows, owner = sentences_of_texts(packed([]), tf.zeros([0], tf.int64), 5, 3, tf.constant([DOT]))
    assert rows.nrows() == 0 and owner.shape[0] == 0 and packed_rows(rows)["token_ids"].shape == (0, 2)


def run_on_first_piece(inputs):  # a sentence's distance: its first piece's id; its logits: [id, -id]
    first = tf.cast(inputs["token_ids"][:, 1], tf.float32)
    return tf.stack([first, -first], axis=-1), first


def test_closest_sentences_picks_the_nearest_and_counts_the_typical_share():
    windows = packed([[CLS, 10, DOT, 11, DOT, 12, SEP], [CLS, SEP], [CLS, 13, 14, SEP],
                      [CLS, 30, DOT, 5, DOT, 40, DOT, 6, SEP]])
    logits, distances, share = closest_sentences(run_on_first_piece, windows, tf.constant([0, 1, 2, 3]), 10, 5,
                                                 tf.constant([DOT]), typical=11.0)
    assert distances.numpy().tolist() == [10.0, np.inf, 13.0, 5.0]
    # the closest sentence and the typical ones next to it (text 0: 10 and 11, not 12; text 3:
    # 5 alone, its typical 6 is past the untypical 40); a closest one that is not typical itself
    # still counts (text 2)
    np.testing.assert_array_equal(logits.numpy(), [[10.5, -10.5], [0, 0], [13, -13], [5, -5]])
    np.testing.assert_allclose(share.numpy(), [2 / 3, 0.0, 0.0, 0.5])
    # a window of one long sentence and many one-piece ones: rows run longest first, in chunks
    # of bounded padded positions, never all padded to the long one
    long_and_short = packed([[CLS] + [10] * 300 + [DOT] + [11, DOT] * 100 + [SEP]], length=512)
    widths = []

    def recording(inputs):
        widths.append(tuple(inputs["token_ids"].shape))
        return run_on_first_piece(inputs)

    logits, distances, share = closest_sentences(recording, long_and_short, tf.constant([0]), 510, 255,
                                                 tf.constant([DOT]), typical=10.5)
    assert distances.numpy().tolist() == [10.0] and share.numpy()[0] == pytest.approx(1 / 101)
    # each chunk as many rows as its own longest allows: the long row with 12 short ones, then the rest
    assert widths == [(13, 303), (88, 4)]
    # no window at all: one run on no row, empty outputs
    logits, distances, share = closest_sentences(run_on_first_piece, packed([]), tf.zeros([0], tf.int64), 10, 5,
                                                 tf.constant([DOT]), typical=11.0)
    assert logits.shape == (0, 2) and distances.shape == (0,)


def test_the_far_texts_windows_are_read_by_sentence_reading():
    windows = packed([[CLS, 10, DOT, SEP], [CLS, 11, DOT, SEP], [CLS, 12, DOT, 4, DOT, SEP], [CLS, 13, SEP]])
    seen = []
    read = sentence_reading(
        lambda w, text: closest_sentences(run_on_first_piece, w, text, 4, 2, tf.constant([DOT]), 11.0),
        lambda index: seen.append(index.numpy().tolist()) or {k: tf.gather(v, index) for k, v in windows.items()},
        np.array([0, 1, 1, 2]))
    logits, distances, share = read(np.array([1, 2]))
    assert seen == [[1, 2, 3]] and distances.numpy().tolist() == [4.0, 13.0]


def rule_case(rng):
    counts = rng.integers(1, 6, size=rng.integers(1, 6))
    document = np.repeat(np.arange(len(counts)), counts)
    logits = rng.normal(size=(len(document), 3))
    distances = rng.choice([0.5, 1.0, 2.0, 3.0, 4.0], size=len(document))
    texts = len(counts)
    sentence_logits = rng.normal(size=(texts, 3))
    sentence_distances = rng.choice([0.25, 1.0, 2.0, 5.0, np.inf], size=texts)
    share = rng.choice([0.0, 0.25, TYPICAL_SHARE, 1.0], size=texts)
    return document, logits, distances, (sentence_logits, sentence_distances, share)


def test_the_sentence_rule_agrees_with_its_numpy_oracle():
    rng = np.random.default_rng(0)
    fired = 0
    for _ in range(60):
        document, logits, distances, sentences = rule_case(rng)
        starts = np.flatnonzero(np.diff(np.concatenate([[-1], document])))
        expected = evidence_logits_reference(logits, distances, 1.0, starts, lambda far: [s[far] for s in sentences])
        got = evidence_logits(tf.constant(logits), tf.constant(distances), tf.constant(1.0, tf.float64),
                              tf.constant(document, tf.int64),
                              lambda far: [tf.gather(tf.constant(s), far) for s in sentences])
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
        fired += int(np.any(expected != evidence_logits_reference(logits, distances, 1.0, starts)))
    assert fired >= 10  # the sentence path changed the answer of many cases
    # the rule by hand: text 0 mostly near (mean of its near windows, sentences unread); text 1
    # far, few typical sentences: its closest sentences; text 2 far, mostly typical sentences: the
    # mean of all its windows; text 3 far, no sentence: its closest window
    logits = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 0.0], [0.0, 5.0], [7.0, 7.0], [2.0, 1.0], [4.0, 0.0],
                       [6.0, 0.0], [1.0, 1.0]])
    distances = np.array([0.5, 0.9, 4.0, 2.0, 9.0, 3.0, 2.5, 2.0, 3.0])
    sentences = (np.array([[0.0, 0.0], [9.0, 9.0], [8.0, 8.0], [5.0, 5.0]]), np.array([1.0, 1.5, 1.5, np.inf]),
                 np.array([0.0, 0.2, TYPICAL_SHARE, 0.0]))
    read = []
    got = evidence_logits(tf.constant(logits), tf.constant(distances), tf.constant(1.0, tf.float64),
                          tf.constant([0, 0, 0, 1, 1, 2, 2, 3, 3], tf.int64),
                          lambda far: read.append(far.numpy().tolist()) or [tf.gather(s, far) for s in sentences]).numpy()
    assert read == [[1, 2, 3]]
    np.testing.assert_allclose(got, [[0.5, 0.5], [9.0, 9.0], [3.0, 0.5], [6.0, 0.0]])


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
                                                      stride=9, window_aggregation="evidence")
    rng = np.random.default_rng(1)
    short = [" ".join(words[i] for i in rng.integers(0, 40, 6)) + " ." for _ in range(24)]
    classifier.fit(short, ["neg", "pos"] * 12, epochs=1, batch_size=8, verbose=0)
    classifier.fit_window_statistics(short)
    relevance = classifier.head.window_relevance
    assert relevance.reads_sentences

    def sentence():
        return " ".join(words[i] for i in rng.integers(0, len(words), rng.integers(1, 6))) + rng.choice([" .", " !"])

    texts = [" ".join(sentence() for _ in range(n)) for n in (3, 40, 200, 1)] + ["no end piece at all " * 9]
    texts.append(" ".join(sentence() for _ in range(2)))  # one window, two sentences
    relevance.threshold.assign(1e-6)  # every window far, and no sentence typical: sentences decide
    relevance.typical.assign(1e-7)
    with_sentences = classifier.predict(texts)
    relevance.typical.assign(0.0)  # reads windows only
    windows_only = classifier.predict(texts)
    assert np.sum(np.abs(with_sentences - windows_only).max(-1) > 1e-4) >= 2
    relevance.typical.assign(1e-7)
    # a one-window text reads the same alone as beside long ones (the rule is per text)
    np.testing.assert_allclose(classifier.predict(texts[-1:]), with_sentences[-1:], atol=1e-6)
    for backend in ("tf_text", "core"):  # TF Serving runs both graphs: the op audit is clean
        result = classifier.export_result(str(tmp_path / backend), "sentences", tokenizer_backend=backend, strict=True)
        assert result.audit.ok
        served = tf.saved_model.load(result.path).signatures["serving_default"]
        np.testing.assert_allclose(served(text=tf.constant(texts))["probabilities"].numpy(), with_sentences,
                                   atol=1e-5)
    # mostly typical sentences (typical above every distance): a long text of the kind, the mean
    # of all its windows (as when every window is near)
    relevance.typical.assign(1e9)
    mostly_typical = classifier.predict(texts)
    relevance.threshold.assign(1e9)
    np.testing.assert_allclose(mostly_typical, classifier.predict(texts), atol=1e-6)


def test_a_regressor_reads_sentences_the_same_in_predict_and_in_the_export(spec, tmp_path):
    # A regressor's scores are [N], not [N, C]: the windows' rule and the sentences' read them as
    # one column (the export of a regressor with evidence failed to run before).
    words = export_fixtures.WORDS
    keras.utils.set_random_seed(0)
    regressor = tasks.TextClassifier.from_pretrained(spec, num_classes=1, seq_length=16, max_length=4000, stride=9,
                                                     window_aggregation="evidence")
    rng = np.random.default_rng(0)
    short = [" ".join(words[i] for i in rng.integers(0, 40, 6)) + " ." for _ in range(24)]
    regressor.fit(short, list(np.linspace(0.0, 1.0, 24)), epochs=1, batch_size=8, verbose=0)
    regressor.fit_window_statistics(short)
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
