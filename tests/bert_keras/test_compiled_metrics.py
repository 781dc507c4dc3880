"""F1 and Matthews correlation as Keras metrics: equal to sklearn's, streamed over batches, and by
name in a classifier's `compile(metrics=[...])` (what `evaluate` returns and `fit` logs)."""

import keras
import numpy as np
import pytest
import sklearn.metrics

import export_fixtures
from bert_keras import tasks
from bert_keras.metrics.compiled import F1Score, MatthewsCorrelation


@pytest.mark.parametrize("num_classes", [2, 3, 5])
def test_streamed_over_batches_they_equal_sklearn(num_classes):
    rng = np.random.default_rng(num_classes)
    labels = rng.integers(0, num_classes, 203)
    logits = rng.normal(size=(203, num_classes)) + 1.5 * np.eye(num_classes)[labels]  # better than chance
    if num_classes == 5:
        logits[:, 4] -= 100.0  # a class never predicted (and some never true below): sklearn's "seen" rule
        labels[labels == 3] = 0
    weights = rng.uniform(0.0, 2.0, 203)
    predicted = logits.argmax(-1)
    average = "binary" if num_classes == 2 else "macro"
    for weighted in (False, True):
        f1, mcc = F1Score(num_classes), MatthewsCorrelation(num_classes)
        for start in range(0, 203, 50):  # Keras' batches, the last one short
            part = slice(start, start + 50)
            for metric in (f1, mcc):
                metric.update_state(labels[part][:, None], logits[part], weights[part] if weighted else None)
        sample_weight = weights if weighted else None
        assert float(f1.result()) == pytest.approx(
            sklearn.metrics.f1_score(labels, predicted, average=average, sample_weight=sample_weight), abs=1e-6)
        assert float(mcc.result()) == pytest.approx(
            sklearn.metrics.matthews_corrcoef(labels, predicted, sample_weight=sample_weight), abs=1e-6)
        assert 0.2 < float(mcc.result()) < 1.0  # a real signal, not the 0 of an undefined value
    f1.reset_state()
    assert float(f1.result()) == 0.0  # nothing counted: 0, as sklearn's zero_division=0
    assert F1Score.from_config(f1.get_config()).average == average


def test_one_hot_labels_count_as_their_class_ids():
    # Keras' categorical labels: flattened as ids, a batch of one once counted 2 labels (F1 0.0
    # for a right prediction) and a longer batch raised "Incompatible shapes: [8] vs. [4]".
    labels = np.array([1, 0, 1, 1])
    logits = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    for metric in (F1Score(2), MatthewsCorrelation(2), F1Score(3)):
        width = metric.num_classes
        by_ids, by_rows = type(metric)(width), type(metric)(width)
        wide = np.pad(logits, ((0, 0), (0, width - 2)), constant_values=-1.0)
        by_ids.update_state(labels, wide)
        by_rows.update_state(np.eye(width)[labels], wide)
        np.testing.assert_array_equal(by_rows.counts.numpy(), by_ids.counts.numpy())
    single = F1Score(2)
    single.update_state(np.array([[0.0, 1.0]]), np.array([[0.0, 1.0]]))
    assert float(single.result()) == 1.0


def test_constant_predictions_give_zero_mcc_as_sklearn():
    mcc = MatthewsCorrelation(2)
    mcc.update_state(np.array([0, 1, 1, 0]), np.array([[1.0, 0.0]] * 4))
    assert float(mcc.result()) == sklearn.metrics.matthews_corrcoef([0, 1, 1, 0], [0, 0, 0, 0]) == 0.0
    with pytest.raises(ValueError, match="average='binary' needs 2 classes"):
        F1Score(3, average="binary")


def test_a_label_past_the_classes_is_refused_by_name_and_negative_labels_are_not_counted():
    # Label 3 of a 3-class metric indexed past its counts: "segment_ids[3] = 9 is out of range for
    # op UnsortedSegmentSum" mid-evaluate on a CPU, silently not counted on a GPU.
    model = keras.Sequential([keras.Input((3,)), keras.layers.Identity()])
    # A loss that does not index by label: sparse cross-entropy's own range check runs in the same
    # graph, and which of the two errors surfaces first is up to the executor (a flaky test).
    model.compile(loss=lambda y, p: keras.ops.mean(p, axis=-1), metrics=[F1Score(3), MatthewsCorrelation(3)])
    x = np.eye(3)[[0, 1, 2, 1]] * 0.9 + 0.05
    with pytest.raises(Exception, match=r"F1Score\(num_classes=3\): a label is past the classes \(ids 0..2\)"):
        F1Score(3).update_state(np.array([0, 1, 2, 3]), x)
    with pytest.raises(Exception, match=r"num_classes=3\): a label is past the classes"):
        model.evaluate(x, np.array([0, 1, 2, 3]), verbose=0, batch_size=4)
    # XLA drops the check (and an index past the counts): the metrics read NaN, never 1.0.
    model.compile(loss=lambda y, p: keras.ops.mean(p, axis=-1), metrics=[F1Score(3), MatthewsCorrelation(3)],
                  jit_compile=True)
    logs = model.evaluate(x, np.array([0, 1, 2, 3]), verbose=0, batch_size=4, return_dict=True)
    assert np.isnan(logs["macro_f1"]) and np.isnan(logs["matthews_corrcoef"])
    assert model.evaluate(x, np.array([0, 1, 2, 1]), verbose=0, batch_size=4, return_dict=True)["macro_f1"] == 1.0
    # -100 (padding) and other negative labels are left out, as the tagger's loss leaves them out.
    padded = F1Score(3)
    padded.update_state(np.array([0, 1, 2, -100, -1]), np.eye(3)[[0, 1, 2, 1, 0]])
    assert float(padded.counts.numpy().sum()) == 3.0 and float(padded.result()) == 1.0


TEXTS = ["i loved this film.", "the battery died.", "a great film.", "it was terrible.", "good film.",
         "bad film.", "the actors were great.", "a dull city.", "great actors.", "terrible battery.",
         "a city film.", "the city."]


@pytest.mark.parametrize("labels, names", [
    (["pos", "neg"] * 6, ("f1", "matthews_corrcoef")),
    (["pos", "neg", "meh"] * 4, ("f1", "mcc")),  # "f1" of three classes: the macro mean, logged as "f1"
])
def test_a_classifier_compiles_them_by_name_and_evaluate_returns_them(tmp_path, labels, names):
    spec = export_fixtures.make_encoder_spec(str(tmp_path / "tiny"))
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=sorted(set(labels)), seq_length=32,
                                                      learning_rate=1e-3, dropout=0.0)
    classifier.compile(metrics=["accuracy", *names])  # the recipe's optimizer, these metrics
    assert classifier.recipe is not None
    history = classifier.fit(TEXTS, labels, epochs=2, batch_size=4, verbose=0,
                             validation_data=(TEXTS[:6], labels[:6]))
    assert {names[0], names[1], f"val_{names[0]}", f"val_{names[1]}"} <= set(history.history)
    results = classifier.evaluate(TEXTS, labels, batch_size=5, return_dict=True, verbose=0)
    assert set(results) == {"loss", "accuracy", *names}
    gold = np.array([classifier.labels.index(label) for label in labels])
    predicted = classifier.predict(TEXTS).argmax(-1)
    average = "binary" if len(set(labels)) == 2 else "macro"
    assert results[names[0]] == pytest.approx(sklearn.metrics.f1_score(gold, predicted, average=average), abs=1e-5)
    assert results[names[1]] == pytest.approx(sklearn.metrics.matthews_corrcoef(gold, predicted), abs=1e-5)
    loss, accuracy, f1, mcc = classifier.evaluate(TEXTS, labels, verbose=0)  # Keras' list, in compile's order
    assert (accuracy, f1, mcc) == pytest.approx((results["accuracy"], results[names[0]], results[names[1]]))
    # The names in weighted_metrics too (once "Could not interpret metric identifier: f1"): there
    # Keras weights them by sample_weight, so they equal sklearn's weighted scores.
    weights = np.resize([1.0, 0.0, 2.0], len(TEXTS))
    classifier.compile(metrics=[names[0]], weighted_metrics=list(names))
    weighted = classifier.evaluate(TEXTS, labels, sample_weight=weights, batch_size=5, return_dict=True, verbose=0)
    assert weighted[names[0]] == pytest.approx(results[names[0]])  # metrics=: unweighted, as Keras
    assert weighted[f"weighted_{names[0]}"] == pytest.approx(
        sklearn.metrics.f1_score(gold, predicted, average=average, sample_weight=weights), abs=1e-5)
    assert weighted[names[1]] == pytest.approx(
        sklearn.metrics.matthews_corrcoef(gold, predicted, sample_weight=weights), abs=1e-5)
    classifier.compile()  # back to the head's own metrics: the ones compiled before are not kept
    loss, accuracy = classifier.evaluate(TEXTS, labels, verbose=0)
    assert accuracy == pytest.approx(results["accuracy"])


def test_early_stopping_and_checkpoints_monitor_them_in_auto_mode_as_keras_own_f1(tmp_path):
    # validation_steps: Keras' compiled metrics alone are logged (the task's own need every example).
    # Without a direction, mode "auto" stopped the fit after its first epoch with "Keras isn't able to
    # automatically determine whether that metric should be maximized or minimized".
    spec = export_fixtures.make_encoder_spec(str(tmp_path / "tiny"))
    keras.utils.set_random_seed(0)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32,
                                                      learning_rate=1e-3, dropout=0.0)
    classifier.compile(metrics=["accuracy", "f1", "matthews_corrcoef"])
    labels = ["pos", "neg"] * 6
    stopper = keras.callbacks.EarlyStopping(monitor="val_f1", patience=5)
    best = keras.callbacks.ModelCheckpoint(str(tmp_path / "best.keras"), monitor="val_matthews_corrcoef",
                                           save_best_only=True)
    history = classifier.fit(TEXTS, labels, epochs=2, batch_size=4, verbose=0, validation_data=(TEXTS, labels),
                             validation_steps=2, callbacks=[stopper, best])
    assert len(history.history["val_f1"]) == 2 and stopper.best == max(history.history["val_f1"])
    assert best.best == max(history.history["val_matthews_corrcoef"])
    assert keras.metrics.F1Score()._direction == F1Score(2)._direction == MatthewsCorrelation(2)._direction == "up"
