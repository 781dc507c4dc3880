"""A word's trailing combining marks belong to it, in `predict` (Python) and in the export (graph) alike."""

import random
import unicodedata

import numpy as np
import tensorflow as tf

from pipelines.tokenizer.combining_marks import extend_over_marks, extend_over_marks_in_graph


def test_the_graph_moves_ends_over_marks_exactly_as_python():
    texts = [unicodedata.normalize("NFD", "José lives in Zoë́ city"), "वह दिल्ली में रहता है", "", "abc",
             "é\u0301\u0301", "\u0301leading"]
    rng = random.Random(0)
    alphabet = ["a", "b", " ", "\u0301", "\u0947", "é", "म", "\u0902", ".", "😀", "\u20dd"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(300)]
    rows, ends, expected = [], [], []
    for row, text in enumerate(texts):
        for end in range(len(text) + 1):
            rows.append(row)
            ends.append(len(text[:end].encode()))
            expected.append(len(text[:extend_over_marks(text, [end])[0]].encode()))
    graph = tf.function(extend_over_marks_in_graph)
    got = graph(tf.constant(texts), tf.constant(rows, tf.int64), tf.constant(ends, tf.int64))
    np.testing.assert_array_equal(got.numpy(), expected)
    assert expected[:5] == [0, 1, 2, 3, 6]  # "Jose" + U+0301 (2 bytes) ends at byte 6, after the accent
    empty = graph(tf.constant([], tf.string), tf.constant([], tf.int64), tf.constant([], tf.int64))
    assert empty.shape == (0,)


def test_predict_words_and_entities_keep_their_trailing_marks(tmp_path):
    import export_fixtures
    from bert_keras import tasks

    tagger = tasks.TokenClassifier.from_pretrained(export_fixtures.make_encoder_spec(str(tmp_path)),
                                                   labels=["O", "B-PER", "I-PER"], seq_length=32)
    for text in (unicodedata.normalize("NFD", "José lives in Zoë́ city"), "वह दिल्ली में रहता है"):
        row = tagger.predict([text])[0]
        assert row["words"] == text.split()
        for entity in row["entities"]:
            assert text[entity["start_char"]:entity["end_char"]] == entity["text"]
            assert entity["end_char"] == len(text) or text[entity["end_char"]] == " "
