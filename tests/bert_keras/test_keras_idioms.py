"""The Keras idioms a user writes, on every task family: each call of the task-layer issue.

`fit` / `evaluate` / `predict` take what `keras.Model` takes — lists, numpy arrays,
batched or unbatched `tf.data.Dataset`s, `validation_split`, `validation_data`,
`sample_weight`, `class_weight`, `steps_per_epoch`, callbacks — and give the same
numbers whatever the form: dropout 0 and `shuffle=False` make two runs on the same
data in two forms step for step identical, which is what most tests assert.

Tiny random encoders (the 150-token vocabulary of `export_fixtures`): plumbing and
equality of forms, not accuracy (test_tasks_minilm.py has the real-model checks).
"""

import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks
from bert_keras.tasks import classifier_inputs

TEXTS = ["i loved this film.", "the battery died.", "a great film.", "it was terrible.", "good film.",
         "bad film.", "the actors were great.", "a dull city.", "great actors.", "terrible battery."]
LABELS = ["pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg"]
TEXTS_B = ["great.", "terrible.", "good.", "bad.", "great.", "bad.", "good.", "terrible.", "good.", "bad."]
CONTEXT = "john smith lives in paris. the capital of france is paris. the film began when he moved."
SQUAD_QUESTIONS = ["where does john live?", "what is the capital of france?", "when did the film begin?",
                   "who lives in paris?"]
SQUAD_ANSWERS = [{"text": "paris", "answer_start": CONTEXT.index("paris")},
                 {"text": "paris", "answer_start": CONTEXT.index("paris", 30)}, None,
                 {"text": "john smith", "answer_start": 0}]


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return export_fixtures.make_encoder_spec(str(tmp_path_factory.mktemp("tiny")))


def build(cls, spec, **options):
    """A task with dropout 0 and a seeded head: two fits on the same data are identical step for step."""
    keras.utils.set_random_seed(0)
    return cls.from_pretrained(spec, seq_length=options.pop("seq_length", 32), learning_rate=1e-3,
                               dropout=0.0, **options)


def losses(history):
    return np.asarray(history.history["loss"])


# -- classification: every form of x gives the same training and the same predictions ------


@pytest.mark.parametrize("form", ["numpy", "unbatched", "batched", "batched_by_3", "int_ids_as_names",
                                  "one_hot", "one_hot_batched", "columns_batched"])
def test_classifier_fits_any_form_like_a_list(spec, form):
    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    expected = losses(reference.fit(TEXTS, LABELS, epochs=2, batch_size=4, shuffle=False, verbose=0))
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    if form == "numpy":
        history = classifier.fit(np.array(TEXTS), np.array(LABELS), epochs=2, batch_size=4, shuffle=False,
                                 verbose=0)
    elif form == "int_ids_as_names":
        # labels=[0, 1]: the names "0", "1"; y as ints compared as names (the label rule)
        classifier = build(tasks.TextClassifier, spec, labels=[0, 1])
        history = classifier.fit(TEXTS, [int(l == "pos") for l in LABELS], epochs=2, batch_size=4,
                                 shuffle=False, verbose=0)
    elif form.startswith("one_hot"):  # Keras' categorical labels (label_mode="categorical")
        one_hot = keras.utils.to_categorical([int(l == "pos") for l in LABELS], 2)
        x = tf.data.Dataset.from_tensor_slices((TEXTS, one_hot)).batch(3) if form.endswith("batched") else TEXTS
        history = classifier.fit(x, None if form.endswith("batched") else one_hot, epochs=2, batch_size=4,
                                 shuffle=False, verbose=0)
    elif form == "columns_batched":  # [N, 1] text and label columns, as text_dataset_from_directory's
        classifier = build(tasks.TextClassifier, spec, labels=[0, 1])
        ids = np.array([[int(l == "pos")] for l in LABELS])
        dataset = tf.data.Dataset.from_tensor_slices((np.array(TEXTS)[:, None], ids)).batch(3)
        history = classifier.fit(dataset, epochs=2, batch_size=4, shuffle=False, verbose=0)
    else:
        dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS))
        if form != "unbatched":
            dataset = dataset.batch(32 if form == "batched" else 3)
        history = classifier.fit(dataset, epochs=2, batch_size=4, shuffle=False, verbose=0)
    np.testing.assert_allclose(losses(history), expected, rtol=1e-5)
    predicted = reference.predict(TEXTS)
    for x in (np.array(TEXTS), tf.data.Dataset.from_tensor_slices(TEXTS),
              tf.data.Dataset.from_tensor_slices(TEXTS).batch(4),
              tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(3)):  # labels ignored
        np.testing.assert_allclose(reference.predict(x), predicted, atol=1e-6)
    metrics = reference.score(TEXTS, LABELS)
    assert reference.score(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(32)) == metrics
    assert metrics["num_examples"] == 10


def test_predict_and_evaluate_encode_a_small_dataset_at_once_and_validation_streams(spec, monkeypatch):
    """A `predict` / `evaluate` call reads its dataset once: the door check's pass keeps a finite
    dataset of few rows, which is encoded at once, as texts in memory are, not by a map every new
    iterator instantiates again; past `READ_NOW_MAX_ROWS` it is read again and streams. The
    outputs are the list's either way. `validation_data` is read anew every epoch, as Keras reads it."""
    from pipelines.datasets import batching

    read_at_once = []
    original = batching._read_now

    def recording(chunks, encode_chunk):
        encoded = original(chunks, encode_chunk)
        read_at_once.append(encoded is not None)
        return encoded

    monkeypatch.setattr(batching, "_read_now", recording)
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    predicted, metrics = classifier.predict(TEXTS), classifier.score(TEXTS, LABELS)
    forms = {"unbatched": tf.data.Dataset.from_tensor_slices(TEXTS),
             "batched": tf.data.Dataset.from_tensor_slices(TEXTS).batch(3),
             "with labels": tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4),
             "generator": tf.data.Dataset.from_generator(lambda: iter(TEXTS),
                                                         output_signature=tf.TensorSpec([], tf.string))}
    for name, dataset in forms.items():
        read_at_once.clear()
        np.testing.assert_allclose(classifier.predict(dataset), predicted, atol=1e-6, err_msg=name)
        assert read_at_once == [True], name
    read_at_once.clear()
    assert classifier.score(forms["with labels"]) == metrics
    assert read_at_once == [True]
    shuffled = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).shuffle(10, seed=3)  # reshuffled each pass
    assert classifier.score(shuffled) == metrics  # the rows of one pass, whichever order it reads them in

    # ... and read once: the door check's pass is the only one, single texts and pairs alike
    passes = []
    text = tf.TensorSpec([], tf.string)

    def from_generator(rows, signature):
        def read():
            passes.append(1)
            yield from rows
        return tf.data.Dataset.from_generator(read, output_signature=signature)

    np.testing.assert_allclose(classifier.predict(from_generator(TEXTS, text)), predicted, atol=1e-6)
    assert classifier.score(from_generator(list(zip(TEXTS, LABELS)), (text, text))) == metrics
    assert len(passes) == 2
    # (a `.batch(n)` one too: its batch size is read off the pipeline, which is not started for it)
    pairs = build(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True, seq_length=12)
    with pytest.warns(UserWarning, match="text pairs have more than 9 word pieces"):
        pair_predicted = pairs.predict((TEXTS, TEXTS_B))
    pair_metrics = pairs.score((TEXTS, TEXTS_B), LABELS)
    passes.clear()
    with pytest.warns(UserWarning, match="text pairs have more than 9 word pieces"):
        np.testing.assert_allclose(pairs.predict(from_generator(list(zip(TEXTS, TEXTS_B)), (text, text))),
                                   pair_predicted, atol=1e-6)
    labelled_pairs = [((a, b), y) for a, b, y in zip(TEXTS, TEXTS_B, LABELS)]
    assert pairs.score(from_generator(labelled_pairs, ((text, text), text))) == pair_metrics
    assert len(passes) == 2

    monkeypatch.setattr(batching, "READ_NOW_MAX_ROWS", len(TEXTS) - 1)
    read_at_once.clear()
    passes.clear()
    np.testing.assert_allclose(classifier.predict(forms["batched"]), predicted, atol=1e-6)
    np.testing.assert_allclose(classifier.predict(from_generator(TEXTS, text)), predicted, atol=1e-6)
    assert read_at_once == [] and len(passes) == 2  # streamed: the check's pass, then the encoder's
    monkeypatch.undo()
    monkeypatch.setattr(batching, "_read_now", recording)
    read_at_once.clear()
    classifier.fit(TEXTS[:4], LABELS[:4], epochs=2, batch_size=4, verbose=0,
                   validation_data=tf.data.Dataset.from_tensor_slices((TEXTS[4:], LABELS[4:])).batch(2))
    # x is shuffled and Keras' val_loss batches stream; the task's own validation metrics are a
    # `score` call at each epoch's end, each reading the dataset anew
    assert read_at_once == [True, True]


def test_a_dataset_from_one_generator_object_loses_no_row_and_a_reread_is_named(spec):
    """`from_generator(lambda: rows)` over one generator object can be read once. `predict` of a
    few such rows reads them once, batched or not (a batch size is read off the pipeline, not off
    a first batch that would then be gone); where a second read is needed (`fit` reads a dataset
    again each epoch, after the door check), the error says so and how to fix it."""
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    expected = classifier.predict(TEXTS)
    text = tf.TensorSpec([], tf.string)

    def once(rows, signature):
        rows = iter(rows)
        return tf.data.Dataset.from_generator(lambda: rows, output_signature=signature)

    np.testing.assert_allclose(classifier.predict(once(TEXTS, text)), expected, atol=1e-6)
    np.testing.assert_allclose(classifier.predict(once(TEXTS, text).batch(4).prefetch(2)), expected, atol=1e-6)
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-PER", "I-PER"])
    words = [t.split() for t in TEXTS]
    assert len(tagger.predict(once(words, tf.TensorSpec([None], tf.string)).ragged_batch(3))) == len(TEXTS)
    with pytest.raises(tasks.TaskInputError, match=r"gave 10 rows when first read and only 0 when read "
                                                   r"again.*from_generator\(make_rows"):
        classifier.fit(once(list(zip(TEXTS, LABELS)), (text, text)).batch(4), epochs=1, verbose=0)


def test_a_batch_size_is_read_off_the_pipeline_without_starting_it():
    from bert_keras.tasks.dataset_inputs import DatasetLayout, batch_size_of

    started = []

    def rows():
        started.append(1)
        yield from TEXTS

    layout = DatasetLayout(x_is_tuple=False, example_rank=0)  # a classifier's: single texts
    source = tf.data.Dataset.from_generator(rows, output_signature=tf.TensorSpec([], tf.string))
    for dataset, size in [(source.batch(4), 4), (source.batch(3).map(tf.strings.lower).prefetch(2).shuffle(4)
                                                 .take(2).repeat(2), 3),
                          (source.padded_batch(5, padded_shapes=[]), 5), (source.batch(2, num_parallel_calls=2), 2),
                          (tf.data.Dataset.zip((source.batch(6), source.batch(6))).prefetch(1), 6)]:
        assert batch_size_of(dataset, layout) == size
    assert started == []
    assert batch_size_of(source.batch(4).rebatch(3), layout) == 3  # the pipeline does not say: its first batch
    assert batch_size_of(tf.data.Dataset.zip((source.batch(4), source.batch(2))), layout) == 4
    assert started == [1, 1, 1]  # (a zip starts both)
    assert batch_size_of(source, layout) is None  # not batched


def test_a_batched_dataset_keeps_its_own_batch_size_as_in_keras(spec):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS))
    classifier.fit(dataset.batch(2), epochs=1, verbose=0)  # no batch_size: the dataset's 2
    assert int(classifier.optimizer.iterations) == 5
    classifier.fit(dataset.batch(2), epochs=1, batch_size=5, verbose=0)  # given: re-batched to 5
    assert int(classifier.optimizer.iterations) == 7
    classifier.fit(dataset, epochs=1, verbose=0)  # unbatched: 32 (one step for 10 texts)
    assert int(classifier.optimizer.iterations) == 8
    tagger = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    words = tf.ragged.constant([["john", "lives"], ["in", "paris"], ["the", "capital"]])
    tags = tf.ragged.constant([["B-PER", "O"], ["O", "B-LOC"], ["O", "O"]])
    tagger.fit(tf.data.Dataset.from_tensor_slices((words, tags)).batch(1), epochs=1, verbose=0)
    assert int(tagger.optimizer.iterations) == 3


def test_star_ratings_and_digit_names_follow_the_label_rule(spec):
    stars = build(tasks.TextClassifier, spec, labels=[1, 2, 3, 4, 5])
    assert stars.labels == ["1", "2", "3", "4", "5"]
    stars.fit(TEXTS, [5, 1, 4, 2, 5, 1, 4, 2, 3, 3], epochs=1, verbose=0)  # 5 is the name "5", id 4
    assert stars.score(TEXTS, [5, 1, 4, 2, 5, 1, 4, 2, 3, 3])["num_examples"] == 10
    swapped = build(tasks.TextClassifier, spec, labels=["1", "0"])
    ids = tf.data.Dataset.from_tensor_slices((TEXTS[:2], [1, 0]))
    named = tf.data.Dataset.from_tensor_slices((TEXTS[:2], ["1", "0"]))
    # y=1 means the class NAMED "1" (id 0), in lists and datasets alike
    assert classifier_inputs.read_targets(swapped, [1, 0], 2).tolist() == [0, 1]
    rows = [y for _, y in classifier_inputs.dataset_rows(swapped, ids, needs_y=True)[0].as_numpy_iterator()]
    assert rows == [y for _, y in classifier_inputs.dataset_rows(swapped, named, needs_y=True)[0]
                    .as_numpy_iterator()] == [0, 1]
    # *_on_batch on packed inputs: the preprocessor's ids stay ids (as fit reads packed batches), names
    # are read by the rule: id 0 (the name "1") and id 4 (the name "5")
    packed, ids = stars.preprocessor(tf.constant(TEXTS[:2]), tf.constant(["1", "5"]))
    assert ids.numpy().tolist() == [0, 4]
    expected = stars.test_on_batch(TEXTS[:2], [1, 5])
    np.testing.assert_allclose(stars.test_on_batch(packed, ids), expected, rtol=1e-6)
    np.testing.assert_allclose(stars.test_on_batch(packed, ["1", "5"]), expected, rtol=1e-6)


def test_pairs_from_a_batched_dataset_and_predict_on_pair_datasets(spec):
    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True)
    expected = losses(reference.fit((TEXTS, TEXTS_B), LABELS, epochs=1, batch_size=4, shuffle=False,
                                    verbose=0))
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True)
    dataset = tf.data.Dataset.from_tensor_slices(((TEXTS, TEXTS_B), LABELS)).batch(5)
    np.testing.assert_allclose(losses(classifier.fit(dataset, epochs=1, batch_size=4, shuffle=False,
                                                     verbose=0)), expected, rtol=1e-5)
    predicted = reference.predict((TEXTS, TEXTS_B))
    for x in (list(zip(TEXTS, TEXTS_B)), np.array(list(zip(TEXTS, TEXTS_B))),  # rows of pairs
              [TEXTS, TEXTS_B], [np.array(TEXTS), np.array(TEXTS_B)],  # Keras' list of input columns
              tf.data.Dataset.from_tensor_slices((TEXTS, TEXTS_B)),
              tf.data.Dataset.from_tensor_slices((TEXTS, TEXTS_B)).batch(4)):
        np.testing.assert_allclose(reference.predict(x), predicted, atol=1e-6)
    # Two lists of two texts: two rows, or two columns? Refused, never guessed.
    with pytest.raises(tasks.TaskInputError, match="reads two ways"):
        reference.predict([TEXTS[:2], TEXTS_B[:2]])
    np.testing.assert_allclose(reference.predict([(TEXTS[0], TEXTS_B[0]), (TEXTS[1], TEXTS_B[1])]),
                               predicted[:2], atol=1e-6)
    # The form is fixed when the task is built (text_pair), never guessed from the data.
    single = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(tasks.TaskInputError, match=r"pairs, but this classifier reads single texts: build it "
                                                   r"with from_pretrained\(\.\.\., text_pair=True\)"):
        single.fit((TEXTS, TEXTS_B), LABELS, verbose=0)
    with pytest.raises(tasks.TaskInputError, match="pairs, but this classifier reads single texts"):
        single.predict(list(zip(TEXTS, TEXTS_B)))  # (a dataset's 2-tuples are Keras' (x, y) for it)
    with pytest.raises(tasks.TaskInputError, match=r"reads text pairs; pass x as a tuple \(texts, texts_b\)"):
        reference.predict(TEXTS)


def test_regression_from_datasets_and_non_finite_targets_refused_by_row(spec):
    scores = [4.5, 0.5, 4.0, 1.0, 3.5, 1.5, 4.0, 1.0, 3.0, 0.0]
    reference = build(tasks.TextClassifier, spec, num_classes=1)
    expected = losses(reference.fit(TEXTS, scores, epochs=1, batch_size=4, shuffle=False, verbose=0))
    regressor = build(tasks.TextClassifier, spec, num_classes=1)
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, scores)).batch(4)
    np.testing.assert_allclose(losses(regressor.fit(dataset, epochs=1, batch_size=4, shuffle=False,
                                                    verbose=0)), expected, rtol=1e-5)
    for bad in (float("nan"), float("inf"), "1e400"):
        with pytest.raises(tasks.TaskInputError, match=r"y\[2\]: .* not a finite number"):
            regressor.fit(TEXTS[:3], [1.0, 2.0, bad], verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"y \(dataset element 2\): .* not a finite number"):
        regressor.fit(tf.data.Dataset.from_tensor_slices((TEXTS[:3], [1.0, 2.0, np.nan])).batch(2),
                      verbose=0)
    assert np.isfinite(regressor.predict(TEXTS)).all()


def test_a_regression_validated_on_one_example_logs_val_loss_instead_of_failing_after_its_epoch(spec):
    """validation_split leaving one row (or validation_data of one) trained an epoch, then failed in
    the task's pearson ('a correlation needs at least 2 points'); Keras validates on one example."""
    scores = [4.5, 0.5, 4.0]
    regressor = build(tasks.TextClassifier, spec, num_classes=1)
    with pytest.warns(UserWarning, match="validation data of 1 example: .*pearson and spearman need 2"):
        history = regressor.fit(TEXTS[:3], scores, validation_split=0.34, epochs=2, batch_size=2, verbose=0)
    assert sorted(history.history) == ["loss", "val_loss"] and len(history.history["val_loss"]) == 2
    with pytest.warns(UserWarning, match="validation data of 1 example"):
        history = regressor.fit(TEXTS[:2], scores[:2], validation_data=(TEXTS[2:3], scores[2:]), verbose=0)
    assert np.isfinite(history.history["val_loss"]).all()
    history = regressor.fit(TEXTS[:2], scores[:2], validation_data=(TEXTS[:2], scores[:2]), verbose=0)
    assert {"val_pearson", "val_spearman"} <= set(history.history)  # two examples: the task's metrics


def test_a_regression_validated_on_a_dataset_of_one_example_logs_val_loss_instead_of_failing(spec):
    """A tf.data dataset of one example (batched or not) as validation_data failed after the first
    epoch as the in-memory one did ('a correlation needs at least 2 points')."""
    scores = [4.5, 0.5, 4.0]
    regressor = build(tasks.TextClassifier, spec, num_classes=1)
    one = tf.data.Dataset.from_tensor_slices((TEXTS[2:3], np.float32(scores[2:]))).batch(4)
    with pytest.warns(UserWarning, match="validation data of 1 example: .*pearson and spearman need 2"):
        history = regressor.fit(TEXTS[:2], scores[:2], validation_data=one, verbose=0)
    assert sorted(history.history) == ["loss", "val_loss"] and np.isfinite(history.history["val_loss"]).all()
    two = tf.data.Dataset.from_tensor_slices((TEXTS[:2], np.float32(scores[:2])))  # unbatched: examples counted
    history = regressor.fit(TEXTS[:2], scores[:2], validation_data=two, verbose=0)
    assert {"val_pearson", "val_spearman"} <= set(history.history)


def test_regression_sample_weights_weigh_each_example_with_any_mean_squared_error(spec, tmp_path):
    """The `[B]` scores of a regression head get one squared error each: Keras' own
    `mean_squared_error` averages them over the batch, so a weight of 0 dropped nothing (the
    loss was the batch mean times the mean weight) and 2 replicas reported twice the loss."""
    scores = [4.5, 0.5, 4.0, 1.0]
    regressor = build(tasks.TextClassifier, spec, num_classes=1)
    errors = (regressor.predict(TEXTS[:4], verbose=0) - np.asarray(scores)) ** 2
    only_first = np.array([1.0, 0.0, 0.0, 0.0])
    expected = errors[0] / 4  # Keras' sum_over_batch_size: the weighted sum over the batch size
    assert regressor.evaluate(TEXTS[:4], scores, batch_size=4, verbose=0) == pytest.approx(errors.mean(), rel=1e-5)
    assert regressor.evaluate(TEXTS[:4], scores, sample_weight=only_first, batch_size=4,
                              verbose=0) == pytest.approx(expected, rel=1e-5)
    # "mse" or Keras' class in a compile of your own, and a model saved with Keras' class, too
    for loss in ("mse", "mean_squared_error", keras.losses.mean_squared_error, keras.losses.MeanSquaredError()):
        regressor.compile(optimizer="adam", loss=loss)
        assert regressor.test_on_batch(TEXTS[:4], scores, sample_weight=only_first) \
            == pytest.approx(expected, rel=1e-5)
    path = str(tmp_path / "regressor.keras")
    regressor.save(path)
    reloaded = keras.models.load_model(path)
    assert reloaded.test_on_batch(TEXTS[:4], scores, sample_weight=only_first) == pytest.approx(expected, rel=1e-5)
    # Keras' regression metrics too: with batches of 3 and 1 they averaged the two batch means
    regressor.compile(optimizer="adam", metrics=["mae", keras.metrics.MeanSquaredError(name="mse")])
    got = regressor.evaluate(TEXTS[:4], scores, batch_size=3, verbose=0, return_dict=True)
    assert got["mae"] == pytest.approx(np.sqrt(errors).mean(), rel=1e-5)
    assert got["mse"] == pytest.approx(errors.mean(), rel=1e-5) == got["loss"]


@pytest.mark.parametrize("family", ["ner", "choice"])
def test_a_jit_compiled_fit_trains_on_the_last_incomplete_batch(spec, family):
    """`compile(jit_compile=True)` pads batches to `seq_length`, and the tagger and the chooser
    also dropped the incomplete last batch: rows lost every epoch, and a set smaller than one
    batch trained nothing at all (an empty History, no error). The classifier keeps it; so do they."""
    if family == "ner":
        task = build(tasks.TokenClassifier, spec, labels=["O", "B-LOC"])
        x, y = [["john", "lives", "in", "paris"], ["a", "dull", "city"]] * 3, [["O", "O", "O", "B-LOC"], ["O"] * 3] * 3
    else:
        task = build(tasks.MultipleChoice, spec, num_choices=2)
        x, y = (["he opens the door.", "a dog."] * 3, [["he walks in.", "paris."], ["great.", "bad."]] * 3), [0, 1] * 3
    task.compile(jit_compile=True)
    history = task.fit(x, y, epochs=1, batch_size=4, verbose=0)  # 6 rows: a batch of 4, then of 2
    assert int(task.optimizer.iterations) == 2 and np.isfinite(history.history["loss"]).all()
    small = (x[:2], y[:2]) if family == "ner" else ((x[0][:2], x[1][:2]), y[:2])
    assert len(task.fit(*small, epochs=1, batch_size=4, verbose=0).history["loss"]) == 1
    assert int(task.optimizer.iterations) == 3


# -- validation, weights, steps, callbacks ---------------------------------------------------


def test_validation_split_holds_out_the_last_rows_as_keras_does(spec):
    split = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = split.fit(TEXTS, LABELS, epochs=2, batch_size=4, shuffle=False, validation_split=0.2,
                        verbose=0)
    explicit = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    reference = explicit.fit(TEXTS[:8], LABELS[:8], epochs=2, batch_size=4, shuffle=False,
                             validation_data=(TEXTS[8:], LABELS[8:]), verbose=0)
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(history.history[key], reference.history[key], rtol=1e-5)
    as_dataset = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    again = as_dataset.fit(TEXTS[:8], LABELS[:8], epochs=2, batch_size=4, shuffle=False, verbose=0,
                           validation_data=tf.data.Dataset.from_tensor_slices((TEXTS[8:], LABELS[8:])).batch(2))
    np.testing.assert_allclose(again.history["val_loss"], reference.history["val_loss"], rtol=1e-5)
    with pytest.raises(tasks.TaskInputError, match="validation_split: works on in-memory data only"):
        split.fit(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)), validation_split=0.2, verbose=0)

    # validation_data overrides validation_split, as in Keras: every row trains (the split held out
    # the last 2 rows, though validation never read them), and a dataset with both is not refused.
    whole = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    both = whole.fit(TEXTS, LABELS, epochs=2, batch_size=4, shuffle=False, validation_split=0.2, verbose=0,
                     validation_data=(TEXTS[8:], LABELS[8:]))
    only_data = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    reference = only_data.fit(TEXTS, LABELS, epochs=2, batch_size=4, shuffle=False, verbose=0,
                              validation_data=(TEXTS[8:], LABELS[8:]))
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(both.history[key], reference.history[key], rtol=1e-5)
    as_dataset = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    from_dataset = as_dataset.fit(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4), epochs=2,
                                  validation_split=0.2, validation_data=(TEXTS[8:], LABELS[8:]), verbose=0)
    np.testing.assert_allclose(from_dataset.history["loss"], reference.history["loss"], rtol=1e-5)


def test_sample_and_class_weights_scale_the_loss(spec):
    def first_step_loss(**weights):
        classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
        return losses(classifier.fit(TEXTS[:4], LABELS[:4], batch_size=4, max_steps=1, shuffle=False,
                                     verbose=0, **weights))[0]

    plain = first_step_loss()
    assert first_step_loss(sample_weight=np.full(4, 2.0)) == pytest.approx(2 * plain, rel=1e-5)
    assert first_step_loss(class_weight={"pos": 2.0, "neg": 2.0}) == pytest.approx(2 * plain, rel=1e-5)
    # weights in a dataset's third element
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS[:4], LABELS[:4], np.full(4, 2.0))).batch(4)
    assert losses(classifier.fit(dataset, batch_size=4, max_steps=1, shuffle=False, verbose=0))[0] \
        == pytest.approx(2 * plain, rel=1e-5)
    with pytest.raises(tasks.TaskInputError, match=r"class_weight\[0\]: label 'meh' is not one of the model's labels"):
        classifier.fit(TEXTS, LABELS, class_weight={"meh": 1.0}, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"sample_weight\[1\]: nan is not a finite weight"):
        classifier.fit(TEXTS[:2], LABELS[:2], sample_weight=[1.0, np.nan], verbose=0)


def test_steps_per_epoch_and_callbacks(spec, tmp_path):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = classifier.fit(TEXTS, LABELS, epochs=3, batch_size=4, steps_per_epoch=1, verbose=0)
    assert len(history.history["loss"]) == 3 and int(classifier.optimizer.iterations) == 3
    with pytest.warns(UserWarning, match="steps_per_epoch=4 is more than the 3 batches of x"):
        classifier.fit(TEXTS, LABELS, epochs=1, batch_size=4, steps_per_epoch=4, verbose=0)
    checkpoint = str(tmp_path / "best.keras")
    logs = str(tmp_path / "logs")
    history = classifier.fit(
        TEXTS, LABELS, epochs=4, batch_size=4, validation_split=0.2, verbose=0,
        callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", patience=0, min_delta=10.0),
                   keras.callbacks.ModelCheckpoint(checkpoint),
                   keras.callbacks.TensorBoard(logs)])
    assert len(history.history["loss"]) == 2  # stopped: no val_loss improvement of 10
    assert os.path.isfile(checkpoint) and os.listdir(os.path.join(logs, "train"))
    reloaded = keras.saving.load_model(checkpoint)  # the whole task, raw text in
    assert isinstance(reloaded, tasks.TextClassifier) and reloaded.labels == ["neg", "pos"]
    np.testing.assert_allclose(reloaded.predict(TEXTS), classifier.predict(TEXTS), atol=1e-6)
    # A compile of your own is saved with the task and comes back from the file, state and all.
    classifier.compile(optimizer=keras.optimizers.SGD(0.5, momentum=0.9), loss=classifier.default_loss(),
                       metrics=["accuracy"])
    classifier.fit(TEXTS, LABELS, epochs=1, batch_size=4, verbose=0, callbacks=[keras.callbacks.ModelCheckpoint(
        checkpoint)])
    reloaded = keras.saving.load_model(checkpoint)
    assert isinstance(reloaded.optimizer, keras.optimizers.SGD) and float(reloaded.optimizer.learning_rate) == 0.5
    assert int(reloaded.optimizer.iterations) == int(classifier.optimizer.iterations)
    np.testing.assert_allclose(reloaded.optimizer.variables[-1].numpy(), classifier.optimizer.variables[-1].numpy())


def test_a_categorical_loss_of_your_own_reads_one_hot_targets_as_in_keras(spec):
    """`compile(loss="categorical_crossentropy")` with `to_categorical` labels is Keras' pairing; the
    task turned every y into class ids, so the loss got `[N]` targets for `[N, C]` logits ("target
    and output must have the same rank"), and label smoothing could not be used."""
    ids = [int(label == "pos") for label in LABELS]
    sparse = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    sparse.compile(loss="sparse_categorical_crossentropy")
    expected = sparse.fit(TEXTS, LABELS, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    categorical = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    categorical.compile(loss="categorical_crossentropy")
    history = categorical.fit(TEXTS, keras.utils.to_categorical(ids, 2), epochs=2, batch_size=4, shuffle=False,
                              verbose=0).history
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=1e-5)
    np.testing.assert_allclose(history["accuracy"], expected["accuracy"])
    smoothed = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    smoothed.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2))
    probabilities = smoothed.predict(TEXTS)
    targets = keras.utils.to_categorical(ids, 2) * 0.8 + 0.1
    manual = np.mean(-np.sum(targets * np.log(probabilities), axis=1))
    assert smoothed.evaluate(TEXTS, LABELS, verbose=0)[0] == pytest.approx(manual, rel=1e-5)  # names too
    focal = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    focal.compile(loss="categorical_focal_crossentropy")  # read on logits, as the other cross-entropies
    assert focal.loss.get_config()["from_logits"] is True
    assert np.isfinite(focal.evaluate(TEXTS, LABELS, verbose=0)[0])
    chooser = build(tasks.MultipleChoice, spec, num_choices=2)
    chooser.compile(loss="categorical_crossentropy", metrics=["categorical_accuracy"])
    contexts, endings = ["he opens the door.", "a dog."], [["he walks in.", "paris."], ["great.", "bad."]]
    history = chooser.fit((contexts, endings), keras.utils.to_categorical([0, 1], 2), epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][0]) and 0 <= history["categorical_accuracy"][0] <= 1


@pytest.mark.parametrize("form", ["one", "callback_list", "nested"])
def test_fit_takes_callbacks_in_every_form_keras_takes(spec, form):
    """Keras' `fit` takes one callback, a `CallbackList` or a nested list (`CallbackList` flattens
    them); the task's fit iterated them as a list ("'EarlyStopping' object is not iterable")."""
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    seen = []
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=100.0)
    counter = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(epoch))
    callbacks = {"one": stop, "callback_list": keras.callbacks.CallbackList([stop, counter]),
                 "nested": [[stop], (counter,)]}[form]
    history = classifier.fit(TEXTS, LABELS, epochs=4, batch_size=4, verbose=0, callbacks=callbacks)
    assert len(history.history["loss"]) == 2  # EarlyStopping ran: no improvement of 100 after epoch 1
    assert seen == ([] if form == "one" else [0, 1])


@pytest.mark.parametrize("family", ["classifier", "pairs", "ner", "squad", "choice", "embedder"])
def test_keras_save_and_load_model_give_back_the_whole_task(spec, tmp_path, family):
    """`task.save("x.keras")` / `keras.models.load_model` as for any Keras model: the same class,
    labels and settings, the same predictions on raw text, and training goes on from the saved
    optimizer state."""
    if family == "classifier":
        task, x, y = build(tasks.TextClassifier, spec, labels=["neg", "pos"]), TEXTS, LABELS
    elif family == "pairs":
        task = build(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True)
        x, y = (TEXTS, TEXTS_B), LABELS
    elif family == "ner":
        task = build(tasks.TokenClassifier, spec, labels=["O", "B-LOC"])
        x, y = [["john", "lives", "in", "paris"], ["a", "dull", "city"]], [["O", "O", "O", "B-LOC"], ["O"] * 3]
    elif family == "squad":
        task = build(tasks.SpanQA, spec, seq_length=64, max_query_length=16, stride=16, version_2=True)
        x, y = (SQUAD_QUESTIONS, [CONTEXT] * 4), SQUAD_ANSWERS
    elif family == "choice":
        task = build(tasks.MultipleChoice, spec, num_choices=2)
        x, y = (["he opens the door.", "a dog."], [["he walks in.", "paris."], ["great.", "bad."]]), [0, 1]
    else:
        task, x, y = build(tasks.Embedder, spec), TEXTS, None
    if y is not None:
        task.fit(x, y, epochs=1, batch_size=4, verbose=0)
    path = str(tmp_path / "task.keras")
    task.save(path)
    reloaded = keras.models.load_model(path)
    assert type(reloaded) is type(task) and reloaded.labels == task.labels
    assert reloaded.settings == task.settings and reloaded.seq_length == task.seq_length
    expected, got = task.predict(x), reloaded.predict(x)
    if isinstance(expected, np.ndarray):
        np.testing.assert_allclose(got, expected, atol=1e-6)
    else:
        assert got == expected
    if y is not None:  # the optimizer state came back: the next step is the same on both
        assert int(reloaded.optimizer.iterations) == int(task.optimizer.iterations) > 0
        reloaded.save(str(tmp_path / "as-directory"))  # and it saves as a fine-tuned directory
        assert tasks.load(str(tmp_path / "as-directory")).labels == task.labels


def test_a_keras_file_keeps_the_vocabulary_as_the_tokenizer_reads_it(tmp_path):
    """The `.keras` file's vocabulary was read with str.splitlines, which also ends a line at U+2028,
    \x85, \f, ...: a token holding one became two, and the task did not load back ("the vocabulary
    has 10 tokens, more than the model's 9"; with room left, every later id shifted) → the
    vocabulary as the tokenizer reads it (`load_vocabulary`, CRLF and padding too)."""
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.finetuned_model import FinetunedModel, save_finetuned
    from bert_keras.models import BertClassifier

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "line\u2028break", "bad", "cat "]
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(("\r\n".join(tokens) + "\r\n").encode("utf-8"))
    config = BertConfig(vocab_size=len(tokens), hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                        max_position_embeddings=24)
    directory = save_finetuned(str(tmp_path / "model"), FinetunedModel(
        kind="classification", model=BertClassifier(BertEncoder(config), num_classes=2), vocab_file=str(vocab),
        seq_length=16, labels=["neg", "pos"], lowercase=False))
    task = tasks.load(directory)
    task.save(str(tmp_path / "task.keras"))
    reloaded = keras.saving.load_model(str(tmp_path / "task.keras"))
    ids = reloaded.preprocessor(["bad cat good"])["token_ids"].numpy()[0][:5].tolist()
    assert ids == task.preprocessor(["bad cat good"])["token_ids"].numpy()[0][:5].tolist() == [2, 7, 8, 5, 3]


def test_a_pretrainer_saved_as_keras_loads_back_with_its_tokenization(spec, tmp_path):
    """`Pretrainer.from_config` takes a size name or a config file; Keras' `load_model` hands it
    the saved config dict, which it read as a path (a TypeError: "stat: path should be string")."""
    pretrainer = tasks.Pretrainer.from_pretrained(spec, lowercase=False)
    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    for reloaded in (keras.models.load_model(path), tasks.Pretrainer.from_config(pretrainer.get_config())):
        assert type(reloaded) is tasks.Pretrainer and reloaded.vocab_file == pretrainer.vocab_file
        assert (reloaded.lowercase, reloaded.strip_accents) == (False, pretrainer.strip_accents)
    for saved, loaded in zip(pretrainer.get_weights(), keras.models.load_model(path).get_weights()):
        np.testing.assert_array_equal(loaded, saved)


@pytest.mark.parametrize("data, kill_at", [("infinite", 6), ("finite", 4)])
def test_a_pretrainer_fit_on_your_batches_resumes_from_backup_and_restore_exactly(spec, tmp_path, data, kill_at):
    """`Pretrainer.fit(dataset)` left Keras' `BackupAndRestore` as it was: the resumed fit drew the
    first epoch's dropout masks again and read an infinite dataset from its start (weights ~8e-3
    off the uninterrupted run). Killed mid-epoch (step 6 of 4-step epochs) or at an epoch's start;
    a finite dataset is read one pass an epoch, here in one order (no reshuffle)."""
    def new_pretrainer():
        keras.utils.set_random_seed(0)
        pretrainer = tasks.Pretrainer.from_pretrained(spec, lowercase=False)
        pretrainer.compile(optimizer=keras.optimizers.Adam(1e-3))
        return pretrainer

    vocab_size = new_pretrainer().encoder.config.vocab_size
    rng = np.random.default_rng(0)
    n, s, m = 16, 12, 3
    x = {"token_ids": rng.integers(5, vocab_size, (n, s)).astype("int32"), "segment_ids": np.zeros((n, s), "int32"),
         "padding_mask": np.ones((n, s), "int32"), "masked_lm_positions": np.tile(np.arange(1, m + 1), (n, 1))}
    y = {"masked_lm_ids": rng.integers(5, vocab_size, (n, m)).astype("int32"),
         "masked_lm_weights": np.ones((n, m), "float32"), "next_sentence_labels": rng.integers(0, 2, (n,))}

    class Interrupt(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if int(self.model.optimizer.iterations) == kill_at:
                raise RuntimeError("killed")

    def fit(pretrainer, callbacks):
        batches = tf.data.Dataset.from_tensor_slices((x, y))
        if data == "infinite":
            return pretrainer.fit(batches.shuffle(n, seed=1).batch(4).repeat(), steps_per_epoch=4, epochs=3,
                                  verbose=0, callbacks=callbacks)
        return pretrainer.fit(batches.shuffle(n, seed=1, reshuffle_each_iteration=False).batch(4), epochs=3,
                              verbose=0, callbacks=callbacks)

    reference = new_pretrainer()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = losses(fit(reference, []))
    # Keras' default shuffle=True is only a warning on a dataset (which shuffles itself): not said
    assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="killed"):
        fit(new_pretrainer(), [keras.callbacks.BackupAndRestore(backup), Interrupt()])
    resumed = new_pretrainer()
    history = fit(resumed, [keras.callbacks.BackupAndRestore(backup)])
    np.testing.assert_allclose(losses(history), expected[1:], rtol=1e-5)  # resumed at epoch 1
    assert int(resumed.optimizer.iterations) == 12
    for got, want in zip(resumed.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_backup_and_restore_resumes_an_interrupted_fit(spec, tmp_path):
    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                raise RuntimeError("killed")

    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(RuntimeError, match="killed"):
        classifier.fit(TEXTS, LABELS, epochs=4, batch_size=5, verbose=0, callbacks=[backup, Interrupt()])
    resumed = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = resumed.fit(TEXTS, LABELS, epochs=4, batch_size=5, verbose=0, callbacks=[backup])
    assert len(history.history["loss"]) == 2  # epochs 3 and 4 only
    assert int(resumed.optimizer.iterations) == 8  # 2 steps x 4 epochs, counting the restored ones


def test_backup_and_restore_in_the_interrupted_process_keeps_the_uninterrupted_schedule(spec, tmp_path):
    """Keras' documented resume: the same `fit` called again on the same model. The step count
    the interrupted fit left must not stretch the schedule: the restored run ends at rate 0."""
    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                raise RuntimeError("killed")

    class Rates(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def on_train_batch_begin(self, batch, logs=None):
            optimizer = self.model.optimizer
            self.seen[int(optimizer.iterations)] = float(optimizer.learning_rate)

    uninterrupted = Rates()
    build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
        TEXTS, LABELS, epochs=4, batch_size=5, verbose=0, callbacks=[uninterrupted])
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(RuntimeError, match="killed"):
        classifier.fit(TEXTS, LABELS, epochs=4, batch_size=5, verbose=0, callbacks=[backup, Interrupt()])
    resumed = Rates()
    classifier.fit(TEXTS, LABELS, epochs=4, batch_size=5, verbose=0, callbacks=[backup, resumed])
    assert sorted(resumed.seen) == [4, 5, 6, 7]
    assert resumed.seen == {step: uninterrupted.seen[step] for step in (4, 5, 6, 7)}
    assert resumed.seen[7] > 0 and float(classifier.optimizer.learning_rate) == 0.0


@pytest.mark.parametrize("data, save_freq", [("texts", "epoch"), ("texts", 2), ("packed", "epoch")])
def test_backup_and_restore_resumed_in_a_new_process_is_the_uninterrupted_run(spec, tmp_path, data, save_freq):
    """Keras' `BackupAndRestore` restores the weights, the optimizer and the epoch, not where the
    data or the dropout masks were: a fit resumed on a new model read the first pass's shuffle
    and drew the first epoch's masks again (weights ~3e-3 off the uninterrupted run). It now
    skips the batches trained on and restores the seed generators; an integer save_freq that
    falls on an epoch's last batch (2 steps an epoch here) is that epoch's end."""
    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("killed")

    def new_classifier():  # as in a new process: the seeds of a fresh start
        keras.utils.set_random_seed(0)
        return tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32,
                                                    learning_rate=1e-3, dropout=0.1)

    def fit(classifier, callbacks):
        if data == "texts":
            return classifier.fit(TEXTS, LABELS, epochs=3, batch_size=5, seed=1, verbose=0, callbacks=callbacks)
        shuffled = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).shuffle(10, seed=1)
        return classifier.fit(shuffled.batch(5).map(classifier.preprocessor), epochs=3, verbose=0,
                              callbacks=callbacks)

    reference = new_classifier()
    expected = losses(fit(reference, []))
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="killed"):
        fit(new_classifier(), [keras.callbacks.BackupAndRestore(backup, save_freq=save_freq), Interrupt()])
    resumed = new_classifier()
    history = fit(resumed, [keras.callbacks.BackupAndRestore(backup, save_freq=save_freq)])
    np.testing.assert_allclose(losses(history), expected[1:], rtol=1e-5)  # Keras' History: the resumed epochs
    for got, want in zip(resumed.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert int(resumed.optimizer.iterations) == 6 and float(resumed.optimizer.learning_rate) == 0.0
    assert not os.path.exists(backup)  # removed at the end, as Keras does


def test_a_subclass_of_backup_and_restore_keeps_its_hooks_and_resumes_exactly(spec, tmp_path):
    """A subclass of Keras' callback was left as Keras': with save_freq=2 (an epoch's last batch,
    2 steps an epoch) the backup was dated by the epoch it was in, and the resumed fit trained
    that epoch again (8 steps for 6, weights ~3e-3 off), with the first epoch's dropout masks."""
    saves = []

    class Logged(keras.callbacks.BackupAndRestore):
        def _save_model(self):
            saves.append(int(self.model.optimizer.iterations))
            super()._save_model()

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("killed")

    def fit(callbacks):
        keras.utils.set_random_seed(0)
        classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32,
                                                          learning_rate=1e-3, dropout=0.1)
        return classifier, classifier.fit(TEXTS, LABELS, epochs=3, batch_size=5, seed=1, verbose=0,
                                          callbacks=callbacks)

    reference, expected = fit([])
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="killed"):
        fit([Logged(backup, save_freq=2), Interrupt()])
    assert saves == [2]
    callback = Logged(backup, save_freq=2)
    resumed, history = fit([callback])
    assert isinstance(callback, Logged) and saves == [2, 4, 6]  # its own hook, on every save
    np.testing.assert_allclose(losses(history), losses(expected)[1:], rtol=1e-5)
    assert int(resumed.optimizer.iterations) == 6
    for got, want in zip(resumed.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert not os.path.exists(backup)


@pytest.mark.parametrize("backup", ["run_dir_every_2_steps", "keras_backup"])
def test_initial_epoch_with_a_backup_runs_the_right_steps_and_resumes_exactly(spec, tmp_path, backup):
    """`initial_epoch` is in passes over the data; with `checkpoint_every`, Keras' epochs are the
    backup intervals: `initial_epoch=1` started at the 2nd interval (step 2, not 4) and ran 10
    steps of a schedule sized for 8. A kill then resumed with the batches of `initial_epoch`'s
    epochs skipped too (weights ~1e-3 off the uninterrupted run). Passes of 4 steps here."""
    texts, labels = TEXTS + ["a film.", "the city."], LABELS + ["pos", "neg"]

    class Rates(keras.callbacks.Callback):
        def __init__(self, kill_at=None):
            super().__init__()
            self.seen, self.kill_at = {}, kill_at

        def on_train_batch_begin(self, batch, logs=None):
            step = int(self.model.optimizer.iterations)
            if step == self.kill_at:
                raise RuntimeError("killed")
            self.seen[step] = float(self.model.optimizer.learning_rate)

    def fit(callbacks, run_dir):  # run_dir: the fit's, or your BackupAndRestore's directory
        keras.utils.set_random_seed(0)
        classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32,
                                                          learning_rate=1e-3)
        options = dict(run_dir=run_dir, checkpoint_every=2) if backup.startswith("run_dir") else {}
        extra = [] if options else [keras.callbacks.BackupAndRestore(run_dir)]
        history = classifier.fit(texts, labels, epochs=3, batch_size=3, seed=1, verbose=0, initial_epoch=1,
                                 callbacks=callbacks + extra, **options)
        return classifier, history

    expected = Rates()
    reference, _ = fit([expected], run_dir=str(tmp_path / "reference"))
    assert sorted(expected.seen) == list(range(8))  # passes 2 and 3: 8 steps
    np.testing.assert_allclose([expected.seen[step] for step in range(1, 8)], 1e-3 * (1 - np.arange(7) / 7),
                               rtol=1e-6)  # the 8 steps' schedule: warmup step 0, then to 0 at step 8
    with pytest.raises(RuntimeError, match="killed"):
        fit([Rates(kill_at=7)], run_dir=str(tmp_path / "run"))
    rates = Rates()
    resumed, _ = fit([rates], run_dir=str(tmp_path / "run"))
    assert sorted(rates.seen) == ([6, 7] if backup.startswith("run_dir") else [4, 5, 6, 7])
    assert rates.seen == {step: expected.seen[step] for step in rates.seen}
    assert int(resumed.optimizer.iterations) == 8
    for got, want in zip(resumed.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_initial_epoch_inside_a_backup_interval_is_refused(spec, tmp_path):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(tasks.TaskInputError, match=r"initial_epoch=1: .*step 4 .*checkpoint_every=3.*divides 4"):
        classifier.fit(TEXTS + ["a film.", "the city."], LABELS + ["pos", "neg"], epochs=3, batch_size=3,
                       verbose=0, initial_epoch=1, run_dir=str(tmp_path / "run"), checkpoint_every=3)
    assert not os.path.exists(tmp_path / "run")


def test_a_fit_after_a_restored_one_starts_at_its_own_first_epoch(spec, tmp_path):
    """Keras leaves the epoch a `BackupAndRestore` restored on the model (`_initial_epoch`), and
    every later fit of it started there: after a resume at epoch 2, `fit(epochs=3)` ran 1 epoch."""
    class Interrupt(keras.callbacks.Callback):
        def __init__(self, at):
            super().__init__()
            self.at = at

        def on_epoch_begin(self, epoch, logs=None):
            if epoch == self.at:
                raise RuntimeError("killed")

    backup = str(tmp_path / "backup")
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    for at in (2, 3):  # stopped, then resumed at epoch 2 and stopped again
        with pytest.raises(RuntimeError, match="killed"):
            classifier.fit(TEXTS, LABELS, epochs=4, batch_size=5, verbose=0,
                           callbacks=[keras.callbacks.BackupAndRestore(backup), Interrupt(at)])
    done = int(classifier.optimizer.iterations)
    history = classifier.fit(TEXTS, LABELS, epochs=3, batch_size=5, verbose=0)  # a new fit, no backup
    assert history.epoch == [0, 1, 2] and int(classifier.optimizer.iterations) == done + 6
    resumed = classifier.fit(TEXTS, LABELS, epochs=4, batch_size=5, verbose=0,  # the backup: epochs 3 on
                             callbacks=[keras.callbacks.BackupAndRestore(backup)])
    assert resumed.epoch == [3]
    assert classifier.fit(TEXTS, LABELS, epochs=2, batch_size=5, verbose=0).epoch == [0, 1]


def test_steps_per_execution_never_runs_a_step_past_the_epoch_or_the_fit(spec):
    """Keras stops a multi-step call early only where the data runs out; a fit's batches are
    repeated, so the call is sized to end with its epoch: the steps and losses of steps_per_execution=1."""
    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    expected = losses(reference.fit(TEXTS, LABELS, epochs=2, batch_size=2, shuffle=False, verbose=0))
    for steps_per_execution, warns in ((5, False), (2, True), (3, True)):
        classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
        classifier.compile(steps_per_execution=steps_per_execution)
        with pytest.warns(UserWarning, match="divides the steps per epoch") if warns else _no_warning():
            history = classifier.fit(TEXTS, LABELS, epochs=2, batch_size=2, shuffle=False, verbose=0)
        assert int(classifier.optimizer.iterations) == 10  # 5 steps x 2 epochs
        np.testing.assert_allclose(losses(history), expected, rtol=1e-5)
        assert classifier.steps_per_execution == steps_per_execution  # the compiled value is back
    # A partial last epoch (max_steps): the calls end there too.
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.compile(steps_per_execution=5)
    with pytest.warns(UserWarning, match="the last one 2"):
        classifier.fit(TEXTS, LABELS, epochs=2, batch_size=2, max_steps=7, verbose=0)
    assert int(classifier.optimizer.iterations) == 7


def _no_warning():
    import warnings
    import contextlib

    @contextlib.contextmanager
    def strict():
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="steps_per_execution")
            yield

    return strict()


def test_a_dataset_keeps_its_order_and_epochs_0_trains_nothing_as_in_keras(spec):
    seen = []

    def recording_loss(y_true, y_pred):
        seen.append(np.asarray(y_true).ravel().astype(int).tolist())
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)

    ids = list(range(8))
    classifier = build(tasks.TextClassifier, spec, num_classes=8)
    classifier.compile(optimizer="sgd", loss=recording_loss, run_eagerly=True)
    for dataset in (tf.data.Dataset.from_tensor_slices((TEXTS[:8], ids)).batch(4),
                    tf.data.Dataset.from_tensor_slices((TEXTS[:8], ids))):
        seen.clear()
        classifier.fit(dataset, epochs=2, batch_size=4, verbose=0)  # shuffle=True by default: Keras ignores it
        assert seen == [[0, 1, 2, 3], [4, 5, 6, 7]] * 2
    seen.clear()
    classifier.fit(TEXTS[:8], ids, epochs=1, batch_size=4, seed=3, verbose=0)  # in-memory data: shuffled
    assert sorted(sum(seen, [])) == ids and seen != [[0, 1, 2, 3], [4, 5, 6, 7]]
    # epochs=0: no step, an empty History, the callbacks' train begin and end, as keras.Model.fit.
    fresh = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    events = []
    callback = keras.callbacks.LambdaCallback(on_train_begin=lambda logs: events.append("begin"),
                                              on_train_end=lambda logs: events.append("end"))
    history = fresh.fit(TEXTS, LABELS, epochs=0, verbose=0, callbacks=[callback])
    assert history.history == {} and history.epoch == [] and events == ["begin", "end"]
    assert int(fresh.optimizer.iterations) == 0
    fresh.fit(TEXTS, LABELS, epochs=1, batch_size=5, verbose=0)  # the next fit sizes its own schedule
    assert int(fresh.optimizer.iterations) == 2 and float(fresh.optimizer.learning_rate) == 0.0


def test_run_dir_resumes_and_never_takes_a_directory_of_other_files(spec, tmp_path):
    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 3:
                raise KeyboardInterrupt

    run_dir = str(tmp_path / "run")
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C after 3 backups of 1 step each
        classifier.fit(TEXTS, LABELS, epochs=1, batch_size=2, run_dir=run_dir, checkpoint_every=1,
                       callbacks=[Interrupt()], verbose=0)
    with pytest.raises(tasks.TaskInputError, match="holds the backup of another run"):
        build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
            TEXTS, LABELS, epochs=2, batch_size=2, run_dir=run_dir, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"another run \(data differ"):  # other rows, same count
        build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
            TEXTS[::-1], LABELS[::-1], epochs=1, batch_size=2, run_dir=run_dir, checkpoint_every=1, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"another run \(reading differ"):  # another seq_length
        build(tasks.TextClassifier, spec, labels=["neg", "pos"], seq_length=24).fit(
            TEXTS, LABELS, epochs=1, batch_size=2, run_dir=run_dir, checkpoint_every=1, verbose=0)
    resumed = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = resumed.fit(TEXTS, LABELS, epochs=1, batch_size=2, run_dir=run_dir, checkpoint_every=1,
                          verbose=0)
    # The whole run's history: the 3 backed-up epochs' losses, then the 2 of the resumed part.
    assert len(history.history["loss"]) == 5 and history.epoch == list(range(5))
    assert int(resumed.optimizer.iterations) == 5
    assert not os.path.exists(run_dir)  # removed when the fit completed
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(tasks.TaskInputError, match=r"holds other files \(notes.txt\)"):
        resumed.fit(TEXTS, LABELS, run_dir=str(mine), verbose=0)
    assert os.listdir(mine) == ["notes.txt"]


def test_packed_batches_fit_as_raw_text_does_with_run_dir_and_validation_metrics(spec, tmp_path):
    """`fit` on the preprocessor's batches went its own way: it dropped `run_dir` (no backup, so a
    killed run started over), `checkpoint_every`, `keep_run_dir` and the task's validation metrics
    of raw `validation_data` (so `EarlyStopping(monitor="val_f1")` failed)."""
    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 3:
                raise KeyboardInterrupt

    def packed(task):
        return tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(2).map(task.preprocessor)

    settings = dict(epochs=1, run_dir=str(tmp_path / "run"), checkpoint_every=1, verbose=0)
    uninterrupted = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    expected = losses(uninterrupted.fit(packed(uninterrupted), **dict(settings, run_dir=str(tmp_path / "whole"))))
    assert len(expected) == 5 and not os.path.exists(tmp_path / "whole")  # 5 backups of 1 step; removed
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(KeyboardInterrupt):
        classifier.fit(packed(classifier), callbacks=[Interrupt()], **settings)
    assert os.path.isfile(tmp_path / "run" / "run.json")
    resumed = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    np.testing.assert_allclose(losses(resumed.fit(packed(resumed), **settings)), expected, rtol=1e-5)
    assert int(resumed.optimizer.iterations) == 5
    history = resumed.fit(packed(resumed), epochs=3, validation_data=(TEXTS[:4], LABELS[:4]), verbose=0,
                          callbacks=[keras.callbacks.EarlyStopping(monitor="val_f1", patience=0,
                                                                   min_delta=2.0)])
    assert {"val_f1", "val_matthews_corrcoef"} <= set(history.history) and len(history.history["loss"]) == 2


def test_run_dir_resumes_in_the_process_whose_fit_was_interrupted(spec, tmp_path):
    """Ctrl-C in a notebook, then the same call on the same task: its weights had trained since
    the fit started, so the backup was refused as "another run (weights differ)"; and once
    resumed, the step count the interrupted fit had reached stretched the schedule. The same
    call now resumes and ends at the uninterrupted run's losses and weights, at rate 0."""
    class Interrupt(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if int(self.model.optimizer.iterations) == 3:  # inside the second epoch
                raise KeyboardInterrupt

    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    expected = losses(reference.fit(TEXTS, LABELS, epochs=3, batch_size=5, seed=1, verbose=0))
    run_dir = str(tmp_path / "run")
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(KeyboardInterrupt):
        classifier.fit(TEXTS, LABELS, epochs=3, batch_size=5, seed=1, run_dir=run_dir, verbose=0,
                       callbacks=[Interrupt()])
    history = classifier.fit(TEXTS, LABELS, epochs=3, batch_size=5, seed=1, run_dir=run_dir, verbose=0)
    np.testing.assert_allclose(losses(history), expected, rtol=1e-5)
    for got, want in zip(classifier.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert int(classifier.optimizer.iterations) == 6 and float(classifier.optimizer.learning_rate) == 0.0
    assert not os.path.exists(run_dir)
    # A task whose weights are not the run's start (trained, its own run done) is another run.
    with pytest.raises(KeyboardInterrupt):
        build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
            TEXTS, LABELS, epochs=3, batch_size=5, seed=1, run_dir=run_dir, verbose=0, callbacks=[Interrupt()])
    with pytest.raises(tasks.TaskInputError, match=r"another run \(weights differ"):
        classifier.fit(TEXTS, LABELS, epochs=3, batch_size=5, seed=1, run_dir=run_dir, verbose=0)


def test_a_backup_written_before_doc_stride_became_stride_resumes(spec, tmp_path):
    """A SQuAD run backed up while the setting was `doc_stride` recorded that name in its
    fingerprint of how texts are read; the same run resumes after the rename."""
    import json

    from bert_keras.tasks.finetuning_run import digest

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise KeyboardInterrupt

    questions = ["who lives in paris?", "what is the capital of france?"] * 2
    answers = [{"text": "john smith", "answer_start": 0},
               {"text": "paris", "answer_start": CONTEXT.index("paris. the film")}] * 2
    options = dict(seq_length=64, stride=16, max_query_length=16)
    run_dir = str(tmp_path / "run")
    qa = build(tasks.SpanQA, spec, **options)
    with pytest.raises(KeyboardInterrupt):
        qa.fit((questions, [CONTEXT] * 4), answers, batch_size=2, run_dir=run_dir, checkpoint_every=1,
               callbacks=[Interrupt()], verbose=0)
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    settings = {("doc_stride" if key == "stride" else key): value for key, value in qa.settings.items()}
    earlier = digest({"seq_length": 64, "lowercase": True, "labels": None, "settings": settings})
    assert earlier != run["reading"]

    def record(reading):
        with open(os.path.join(run_dir, "run.json"), "w", encoding="utf-8") as f:
            json.dump(dict(run, reading=reading), f)

    record("0" * 16)  # any other reading: another run, refused
    with pytest.raises(tasks.TaskInputError, match=r"another run \(reading differ"):
        build(tasks.SpanQA, spec, **options).fit((questions, [CONTEXT] * 4), answers, batch_size=2,
                                                 run_dir=run_dir, checkpoint_every=1, verbose=0)
    record(earlier)  # as the backup recorded it before the rename: this run, resumed
    resumed = build(tasks.SpanQA, spec, **options)
    history = resumed.fit((questions, [CONTEXT] * 4), answers, batch_size=2, run_dir=run_dir, checkpoint_every=1,
                          verbose=0)
    assert history.epoch[0] == 0 and len(history.epoch) == int(resumed.optimizer.iterations) > 1
    assert not os.path.exists(run_dir)  # completed


def test_predict_traces_its_step_once_for_batches_of_every_size_and_width(spec):
    """Keras alone traces its predict step per new shape, (4, 8) then (4, None) then (None, None);
    one trace serves them all, and a compile (a new predict function) traces once again."""
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    texts = ["film", "a film that runs long and longer than the others here", "bad"] * 3 + ["ok"]
    expected = np.concatenate([classifier.predict(texts[i:i + 1]) for i in range(len(texts))])
    np.testing.assert_allclose(classifier.predict(texts, batch_size=4), expected, atol=1e-5)
    assert classifier.predict_function.experimental_get_tracing_count() == 1
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-PER", "I-PER"])
    tagger.predict([["john", "smith"], ["a", "long", "list", "of", "words", "here"], ["x"]], batch_size=2)
    assert tagger.predict_function.experimental_get_tracing_count() == 1
    classifier.compile()
    classifier.predict(texts, batch_size=4)
    assert classifier.predict_function.experimental_get_tracing_count() == 1


def test_keep_run_dir_makes_a_kill_between_the_fit_and_the_save_cost_nothing(spec, tmp_path):
    from bert_keras.tasks.finetuning_run import remove_run_dir

    run_dir = str(tmp_path / "run")
    finished = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    losses = finished.fit(TEXTS, LABELS, epochs=2, batch_size=4, run_dir=run_dir, keep_run_dir=True,
                          verbose=0).history["loss"]
    assert os.path.isfile(os.path.join(run_dir, "latest.weights.h5"))  # the last backup stays
    # The process dies before its save: the same call resumes at the end, trains nothing, and has
    # the finished weights.
    again = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = again.fit(TEXTS, LABELS, epochs=2, batch_size=4, run_dir=run_dir, keep_run_dir=True, verbose=0)
    # No step ran, and the history is the whole run's (the backup's): its losses from the first on.
    assert history.history["loss"] == pytest.approx(losses) and int(again.optimizer.iterations) == 6
    for expected, got in zip(finished.weights, again.weights):
        np.testing.assert_array_equal(expected.numpy(), got.numpy())
    np.testing.assert_allclose(again.predict(TEXTS), finished.predict(TEXTS), atol=1e-6)
    remove_run_dir(run_dir)  # once the model is saved
    assert not os.path.exists(run_dir)


# -- the other families: datasets batched or not ---------------------------------------------


def test_token_classifier_on_batched_datasets(spec):
    labels = export_fixtures.CONLL_LABELS
    words = [["john", "smith", "lives", "in", "paris"], ["the", "capital", "of", "france"]] * 3
    tags = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["O", "O", "O", "B-LOC"]] * 3
    reference = build(tasks.TokenClassifier, spec, labels=labels)
    expected = losses(reference.fit(words, tags, epochs=1, batch_size=2, shuffle=False, verbose=0))
    tagger = build(tasks.TokenClassifier, spec, labels=labels)
    dataset = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), tf.ragged.constant(tags)))
    np.testing.assert_allclose(losses(tagger.fit(dataset.batch(4), epochs=1, batch_size=2, shuffle=False,
                                                 verbose=0)), expected, rtol=1e-5)
    assert tagger.score(dataset) == reference.score(words, tags)
    texts = ["John Smith lives in Paris.", "the capital of france."]
    predicted = reference.predict(texts)
    assert reference.predict(tf.data.Dataset.from_tensor_slices(texts)) == predicted
    assert reference.predict(tf.data.Dataset.from_tensor_slices(texts).batch(1)) == predicted


def test_span_qa_on_datasets_and_the_threshold_changes_only_when_asked(spec):
    questions = ["who lives in paris?", "what is the capital of spain?", "when did the film begin?"]
    answers = [{"text": "john smith", "answer_start": 0}, None,
               {"text": "when he moved", "answer_start": CONTEXT.index("when he moved")}]
    qa = build(tasks.SpanQA, spec, seq_length=64, version_2=True, stride=16, max_query_length=16)
    qa.fit((questions, [CONTEXT] * 3), answers, epochs=1, batch_size=2, verbose=0)
    x = (questions, [CONTEXT] * 3)
    predicted = qa.predict(x)
    as_dataset = qa.predict(tf.data.Dataset.from_tensor_slices(x).batch(2))
    assert [r["answer"] for r in as_dataset] == [r["answer"] for r in predicted]
    np.testing.assert_allclose([r["null_odds"] for r in as_dataset], [r["null_odds"] for r in predicted],
                               atol=1e-5)
    # SQuAD's columnar answers in a dataset: {"text": [...], "answer_start": [...]}, [] = no answer
    columnar = {"text": tf.ragged.constant([["john smith"], [], ["when he moved"]]),
                "answer_start": tf.ragged.constant([[0], [], [CONTEXT.index("when he moved")]])}
    labelled = tf.data.Dataset.from_tensor_slices((x, columnar))
    metrics = qa.score(labelled.batch(2))
    assert metrics == qa.score(x, answers) and metrics["NoAns_total"] == 1
    # The same in the flat convention the preprocessor takes: "" / -1 is no answer, in memory or not.
    flat = {"text": ["john smith", "", "when he moved"], "answer_start": [0, -1, CONTEXT.index("when he moved")]}
    assert qa.score(tf.data.Dataset.from_tensor_slices((x, flat))) == metrics
    assert qa.score(x, [answers[0], {"text": "", "answer_start": -1}, answers[2]]) == metrics
    # A generator of batches with fit's own in-memory answers (dicts, None for no answer).
    assert qa.score(iter([(x, answers)])) == metrics
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"question": questions, "context": [CONTEXT] * 3})
    assert [r["answer"] for r in qa.predict(frame)] == [r["answer"] for r in qa.predict(x)]
    threshold = qa.null_threshold
    assert qa.null_threshold == threshold  # evaluate changed nothing
    assert [r["answer"] for r in qa.predict(x)] == [r["answer"] for r in predicted]
    tuned = qa.score(x, answers, tune_threshold=True)
    assert qa.null_threshold == pytest.approx(tuned["best_f1_thresh"])
    loss = qa.evaluate(x, answers, verbose=0)  # Keras' form: the span loss (nothing else is compiled)
    assert isinstance(loss, float) and np.isfinite(loss)
    qa.null_threshold = -1e6  # the explicit setter: null odds always above it, never an answer
    assert not any(r["has_answer"] for r in qa.predict(x))


def test_v2_data_for_a_v1_model_is_refused_before_a_step_naming_the_file(spec, monkeypatch):
    """A v1.1 model scoring a SQuAD v2.0 dev file predicted the whole file (finetune: trained the
    whole run) and then failed in the metric, pointing to a Python function (squad_v2_metrics);
    trained on one, it learnt [CLS] for its unanswerable questions, which (x, y) lists refuse."""
    from bert_keras.tasks.named_datasets import DatasetSpecError, parse_task
    from pipelines.datasets.squad import read_squad_json

    v2_file = os.path.join(os.path.dirname(__file__), "..", "data", "squad", "dev-v2.0-mini.json")
    qa = build(tasks.SpanQA, spec, seq_length=64, stride=16, max_query_length=16)
    monkeypatch.setattr(type(qa), "_decode", lambda *a, **k: pytest.fail("predicted before refusing"))
    with pytest.raises(tasks.TaskInputError, match="question 'oil_1979' has no answer .*SQuAD v1.1 model.*"
                                                   "--task squad/v2.0"):
        qa.score(read_squad_json(v2_file, is_training=False))
    with pytest.raises(DatasetSpecError, match="dev-v2.0-mini.json: question 'oil_1979' has no answer .*"
                                               "squad/v1.1 answers every question"):
        parse_task("squad/v1.1", eval_path=v2_file).evaluation_data()  # finetune --eval-data: before training
    assert len(parse_task("squad/v2.0", eval_path=v2_file).evaluation_data()[0]) > 1
    # Training: the file form trained the unanswerable questions towards [CLS] where the list form refuses them.
    monkeypatch.undo()
    with pytest.raises(tasks.TaskInputError, match="question 'oil_1979' has no answer .*--task squad/v2.0"):
        qa.fit(read_squad_json(v2_file, is_training=True), epochs=1, verbose=0)
    with pytest.raises(DatasetSpecError, match="dev-v2.0-mini.json: question 'oil_1979' has no answer .*"
                                               "fine-tune on SQuAD v2.0 data with --task squad/v2.0"):
        parse_task("squad/v1.1", train_path=v2_file).training_data()


def test_evaluate_gives_keras_loss_and_compiled_metrics_on_every_input_form(spec):
    """`loss, accuracy = model.evaluate(x, y)` is Keras' idiom: `[loss, *compiled metrics]` (a dict
    with `return_dict=True`) whatever the form of x: raw text, a dataset of raw text, packed
    batches, a tokenized dict. The task's own metrics are `score`'s."""
    texts, labels = ["good film", "bad film", "great fun", "awful plot"] * 2, ["pos", "neg"] * 4
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.fit(texts, labels, epochs=1, batch_size=4, verbose=0)
    loss, accuracy = classifier.evaluate(texts, labels, verbose=0)
    probabilities = classifier.predict(texts)
    ids = np.array([["neg", "pos"].index(label) for label in labels])
    expected_loss = float(np.mean(-np.log(probabilities[np.arange(len(ids)), ids])))
    assert loss == pytest.approx(expected_loss, rel=1e-4)
    assert accuracy == pytest.approx(np.mean(probabilities.argmax(-1) == ids))
    assert accuracy == pytest.approx(classifier.score(texts, labels)["accuracy"])
    as_dict = classifier.evaluate(texts, labels, return_dict=True, verbose=0)
    assert as_dict == pytest.approx({"loss": loss, "accuracy": accuracy}, rel=1e-5)
    packed = classifier.preprocessor(tf.constant(texts))
    forms = [tf.data.Dataset.from_tensor_slices((texts, labels)).batch(3),
             tf.data.Dataset.from_tensor_slices((texts, labels)),
             tf.data.Dataset.from_tensor_slices((packed, ids)).batch(4)]
    for data in forms:
        assert classifier.evaluate(data, verbose=0) == pytest.approx([loss, accuracy], rel=1e-5)
    assert classifier.evaluate({k: v.numpy() for k, v in packed.items()}, labels, verbose=0) == pytest.approx(
        [loss, accuracy], rel=1e-5)
    # Keras' sample weights (its "sum_over_batch_size" reduction: the weighted sum over the batch's size)
    weights = np.array([1.0, 0.0] * 4)
    weighted, _ = classifier.evaluate(texts, labels, sample_weight=weights, verbose=0)
    losses_per_text = -np.log(probabilities[np.arange(len(ids)), ids])
    assert weighted == pytest.approx(float(np.sum(weights * losses_per_text) / len(ids)), rel=1e-4)


def test_multiple_choice_and_embedder_on_datasets(spec):
    contexts = ["he opens the door.", "she reads the film."] * 3
    endings = [["he walks in.", "he eats the door.", "a city.", "paris."],
               ["she likes it.", "the battery.", "a dog.", "great."]] * 3
    answers = [0, 0, 0, 0, 0, 0]
    reference = build(tasks.MultipleChoice, spec)
    expected = losses(reference.fit((contexts, endings), answers, epochs=1, batch_size=2, shuffle=False,
                                    verbose=0))
    chooser = build(tasks.MultipleChoice, spec)
    dataset = tf.data.Dataset.from_tensor_slices(((contexts, endings), answers))
    np.testing.assert_allclose(losses(chooser.fit(dataset.batch(4), epochs=1, batch_size=2, shuffle=False,
                                                  verbose=0)), expected, rtol=1e-5)
    np.testing.assert_allclose(reference.predict(tf.data.Dataset.from_tensor_slices((contexts, endings))
                                                 .batch(3)),
                               reference.predict((contexts, endings)), atol=1e-6)
    # Keras' categorical labels (one-hot rows, `to_categorical`) are the right ending's index, in
    # memory and in a dataset, as the classifier reads them (they were refused as labels)
    one_hot = keras.utils.to_categorical(answers, 4)
    for x, y in (((contexts, endings), one_hot),
                 (tf.data.Dataset.from_tensor_slices(((contexts, endings), one_hot)).batch(4), None)):
        chooser = build(tasks.MultipleChoice, spec)
        np.testing.assert_allclose(losses(chooser.fit(x, y, epochs=1, batch_size=2, shuffle=False, verbose=0)),
                                   expected, rtol=1e-5)
    assert reference.evaluate((contexts, endings), one_hot, verbose=0) == \
        reference.evaluate((contexts, endings), answers, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"y\[1\]: \[0.5, 0.5, 0.0, 0.0\] is not a one-hot row"):
        reference.fit((contexts, endings), np.array([[1, 0, 0, 0], [.5, .5, 0, 0]] * 3), epochs=1, verbose=0)
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32)
    vectors = embedder.predict(TEXTS)
    np.testing.assert_allclose(embedder.predict(tf.data.Dataset.from_tensor_slices(TEXTS).batch(3)), vectors,
                               atol=1e-6)
    np.testing.assert_allclose(embedder.predict(tf.data.Dataset.from_tensor_slices(TEXTS)), vectors,
                               atol=1e-6)


# -- the door: bad input refused before any step, naming the argument ----------------------


def test_bad_arguments_are_refused_before_a_step(spec, tmp_path):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.compile(optimizer=keras.optimizers.SGD(0.01), loss=classifier.default_loss())
    for kwargs, message in [(dict(max_steps=-2), r"max_steps=-2: expected a positive whole number"),
                            (dict(epochs=-1), r"epochs=-1: expected a number >= 0"),
                            (dict(batch_size=0), r"batch_size=0: expected a positive whole number"),
                            (dict(steps_per_epoch=0), r"steps_per_epoch=0"),
                            (dict(validation_split=1.5), r"validation_split=1.5")]:
        with pytest.raises(tasks.TaskInputError, match=message):
            classifier.fit(TEXTS, LABELS, verbose=0, **kwargs)
    assert int(classifier.optimizer.iterations) == 0
    with pytest.raises(tasks.TaskInputError, match=r"x\[1\]: an empty text"):
        classifier.fit(["good.", "   "], ["pos", "neg"], verbose=0)
    for empty in ("", "\u200b", "\x00", " \t\u3000"):  # the list's rule: no token, not only whitespace
        with pytest.raises(tasks.TaskInputError, match=r"element 1 of the dataset is an empty text"):
            classifier.fit(tf.data.Dataset.from_tensor_slices((["good.", empty], ["pos", "neg"])).batch(2),
                           verbose=0)
        with pytest.warns(UserWarning, match="1 text has no token"):  # predict answers it (test_keras_contract)
            classifier.predict(tf.data.Dataset.from_tensor_slices(["good.", empty]), verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"y \(dataset element 1\): label 'meh' is not one of the model's labels"):
        classifier.fit(tf.data.Dataset.from_tensor_slices((["good.", "bad."], ["pos", "meh"])), verbose=0)
    for labels, message in [([" pos", "neg"], r"labels\[0\]: label ' pos' has leading or trailing whitespace"),
                            (["pos", "pos"], r"labels\[1\]: duplicate label 'pos' \(also index 0\)"),
                            (["", "pos"], r"labels\[0\]: empty label name"),
                            # half of a surrogate pair: refused here, not at the save after training
                            (["pos", "n\udce9g"], r"labels\[1\]: character 2 is \\udce9, half of a UTF-16 surrogate")]:
        with pytest.raises(tasks.TaskInputError, match=message):
            tasks.TextClassifier.from_pretrained(spec, labels=labels)
    saved = classifier.save(str(tmp_path / "saved"))
    with pytest.raises(tasks.TaskInputError, match=r"labels=\['a', 'b', 'c'\]: .* fine-tuned with labels "
                                                   r"\['neg', 'pos'\]"):
        tasks.TextClassifier.from_pretrained(saved, labels=["a", "b", "c"])
    assert tasks.TextClassifier.from_pretrained(saved, labels=["neg", "pos"]).labels == ["neg", "pos"]
    with pytest.raises(tasks.TaskInputError, match="text_pair=True: .* fine-tuned with text_pair=False"):
        tasks.TextClassifier.from_pretrained(saved, text_pair=True)


def test_a_diverged_model_is_never_written(spec, tmp_path):
    from bert_keras.finetuned_model import FinetunedModelError

    regressor = build(tasks.TextClassifier, spec, num_classes=1)
    kernel = regressor.head.weights[-2]
    kernel.assign(np.full(kernel.shape, np.nan, np.float32))
    with pytest.raises(FinetunedModelError, match=r"not saved: weight .* holds NaN or infinite values"):
        regressor.save(str(tmp_path / "diverged"))
    assert not os.path.exists(tmp_path / "diverged")


def test_the_preprocessor_layer_feeds_fit_and_predict_like_raw_text(spec):
    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    expected = losses(reference.fit(TEXTS, LABELS, epochs=1, batch_size=4, shuffle=False, verbose=0))
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    packed = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4).map(classifier.preprocessor)
    x, y = next(iter(packed))
    assert y.numpy().tolist() == [1, 0, 1, 0] and x["token_ids"].shape[1] % 8 == 0
    np.testing.assert_allclose(losses(classifier.fit(packed, epochs=1, verbose=0)), expected, rtol=1e-5)
    texts_only = tf.data.Dataset.from_tensor_slices(TEXTS).batch(3).map(reference.preprocessor)
    np.testing.assert_allclose(reference.predict(texts_only), reference.predict(TEXTS), atol=1e-6)
    # the layer is a Keras object: it serializes with its vocabulary, labels and length
    config = keras.saving.serialize_keras_object(classifier.preprocessor)
    again = keras.saving.deserialize_keras_object(config)
    assert again.labels == ["neg", "pos"] and again.seq_length == 32
    np.testing.assert_array_equal(again(tf.constant(TEXTS[:2]))["token_ids"],
                                  classifier.preprocessor(tf.constant(TEXTS[:2]))["token_ids"])
    # multiple choice: [batch, choices, length], the same probabilities as raw (contexts, endings)
    chooser = build(tasks.MultipleChoice, spec, num_choices=2)
    contexts, endings = ["he opens the door.", "a dog."], [["he walks in.", "paris."], ["great.", "bad."]]
    choices = tf.data.Dataset.from_tensor_slices((contexts, endings)).batch(2).map(
        lambda c, e: chooser.preprocessor((c, e)))
    assert next(iter(choices))["token_ids"].shape[:2] == (2, 2)
    np.testing.assert_allclose(chooser.predict(choices), chooser.predict((contexts, endings)), atol=1e-6)


def test_the_preprocessor_takes_python_values_and_single_examples_as_keras_hub_does(spec):
    """keras-hub's conventions: a list is a batch, a tuple the segments of a pair, a scalar one
    example (unbatched, padded to seq_length), so `dataset.map(preprocessor).batch(n)` works."""
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    preprocessor = classifier.preprocessor
    batch = preprocessor(tf.constant(TEXTS[:2]))["token_ids"].numpy()
    np.testing.assert_array_equal(preprocessor(TEXTS[:2])["token_ids"], batch)  # a list: a batch
    np.testing.assert_array_equal(preprocessor(np.array(TEXTS[:2]))["token_ids"], batch)
    x, y = preprocessor(TEXTS[0], "pos")  # one example
    assert x["token_ids"].shape == (32,) and int(y) == 1
    np.testing.assert_array_equal(x["token_ids"][:batch.shape[1]], batch[0])
    assert int(np.sum(x["padding_mask"])) == int(np.sum(batch[0] > 0))
    pairs = preprocessor((TEXTS[:2], TEXTS_B[:2]))  # a tuple: two segments
    assert pairs["segment_ids"].numpy().max() == 1 and preprocessor(TEXTS[:2])["segment_ids"].numpy().max() == 0
    np.testing.assert_array_equal(preprocessor((TEXTS[0], TEXTS_B[0]))["token_ids"][:pairs["token_ids"].shape[1]],
                                  pairs["token_ids"][0])

    assert preprocessor([])["token_ids"].shape[0] == 0  # an empty batch
    from bert_keras.tasks.inputs import TaskInputError

    for bad, message in ((5, "got int32 values"), (("a", "b", "c"), "got 3 parts"),
                         ([["a"], ["b", "c"]], "rank 2"), (["a", 3], "does not convert"),
                         ({"token_ids": [[2, 3]]}, "packed inputs")):
        with pytest.raises(TaskInputError, match=message):
            preprocessor(bad)

    # mapped over an unbatched dataset, then batched by you or by fit (padded to seq_length
    # either way, so the encoder's dropout draws the same masks): fit, evaluate, predict
    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    untrained = reference.predict(TEXTS)
    expected = losses(reference.fit(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).map(
        reference.preprocessor).batch(4), epochs=1, verbose=0))
    assert np.abs(reference.predict(TEXTS) - untrained).max() > 1e-3  # it trained
    for batched in (True, False):
        model = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
        rows = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).map(model.preprocessor)
        assert rows.element_spec[0]["token_ids"].shape == (32,)
        data = rows.batch(4) if batched else rows
        history = model.fit(data, batch_size=4, epochs=1, verbose=0, validation_data=rows)
        np.testing.assert_allclose(losses(history), expected, rtol=1e-5)
        assert "val_loss" in history.history
        texts_only = data.map(lambda x, y: x)
        np.testing.assert_allclose(model.predict(texts_only), reference.predict(TEXTS), atol=1e-5)
        loss, accuracy = model.evaluate(data, verbose=0)
        assert np.isfinite(loss) and accuracy == pytest.approx(reference.score(TEXTS, LABELS)["accuracy"])

    # NER: a word list is one text; multiple choice: a scalar context with its endings
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-LOC"])
    x, y = tagger.preprocessor(["john", "lives", "in", "paris"], ["O", "O", "O", "B-LOC"])
    assert x["token_ids"].shape == (32,) and y.numpy()[:6].tolist() == [-100, 0, 0, 0, 1, -100]
    assert set(y.numpy()[6:].tolist()) == {-100}
    ragged = tagger.preprocessor([["john", "lives"], ["paris"]])  # nested lists: a ragged batch
    assert ragged["token_ids"].shape[0] == 2
    chooser = build(tasks.MultipleChoice, spec, num_choices=2)
    x, y = chooser.preprocessor(("he opens the door.", ["he walks in.", "paris."]), 1)
    assert x["token_ids"].shape == (2, 32) and int(y) == 1
    choices = tf.data.Dataset.from_tensor_slices(
        (["he opens the door.", "a dog."], [["he walks in.", "paris."], ["great.", "bad."]])).map(
        lambda c, e: chooser.preprocessor((c, e)))
    np.testing.assert_allclose(chooser.predict(choices),
                               chooser.predict((["he opens the door.", "a dog."],
                                                [["he walks in.", "paris."], ["great.", "bad."]])), atol=1e-6)


def test_calling_a_task_on_raw_text_runs_its_head_on_the_packed_text(spec):
    """`task(texts)` as `task(task.preprocessor(texts))` (was Keras' "Only input tensors may be
    passed as positional arguments"), for every text form, one example included."""
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    logits = classifier(TEXTS[:3]).numpy()
    assert logits.shape == (3, 2)
    np.testing.assert_allclose(classifier(classifier.preprocessor(TEXTS[:3])), logits, atol=1e-6)
    np.testing.assert_allclose(tf.nn.softmax(logits).numpy(), classifier.predict(TEXTS[:3]), atol=1e-5)
    np.testing.assert_allclose(classifier(TEXTS[0]).numpy(), logits[:1], atol=1e-5)
    np.testing.assert_allclose(classifier(np.array(TEXTS[:3])).numpy(), logits, atol=1e-6)
    np.testing.assert_allclose(classifier(tf.constant(TEXTS[:3])).numpy(), logits, atol=1e-6)
    pairs = build(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True)
    assert pairs((TEXTS[:2], TEXTS_B[:2])).shape == (2, 2)
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-PER", "I-PER"])
    words = [["john", "smith", "lives"], ["paris"]]
    tags = tagger(tf.ragged.constant(words))
    np.testing.assert_allclose(tags, tagger(tagger.preprocessor(tf.ragged.constant(words))), atol=1e-6)
    chooser = build(tasks.MultipleChoice, spec, num_choices=2)
    contexts, endings = ["he opened the door", "she sat down"], [["and walked in", "and flew"], ["to eat", "to fly"]]
    scores = chooser((contexts, endings)).numpy()
    assert scores.shape == (2, 2)
    np.testing.assert_allclose(tf.nn.softmax(scores).numpy(), chooser.predict((contexts, endings)), atol=1e-5)
    from bert_keras.tasks.inputs import TaskInputError

    with pytest.raises(TaskInputError, match="3 endings per context; this model scores exactly 2"):
        chooser((contexts, [e + ["and ran"] for e in endings]))
    for bad, message in (([], "an empty list of texts"), (None, "x: None"), (["a", 1], "does not convert"),
                         ([["a"], ["b", "c"]], "rank 2")):
        with pytest.raises(TaskInputError, match=message):
            classifier(bad)


def test_datasets_handed_to_keras_run_without_the_autotune_thread(spec, monkeypatch):
    """tf.data's autotuner thread made an iterator's destructor wait out its sleep (10-30 s after
    the last step of a one-minute fit; ~0.4 s of a 1,024-row predict): every dataset a task
    gives Keras' loops has autotuning off."""
    seen = []
    for name in ("fit", "evaluate", "predict"):
        original = getattr(keras.Model, name)

        def recording(self, x=None, *args, _original=original, _name=name, **kwargs):
            for value in (x, kwargs.get("validation_data")):
                if isinstance(value, tf.data.Dataset):
                    seen.append((_name, value.options().autotune.enabled))
            return _original(self, x, *args, **kwargs)

        monkeypatch.setattr(keras.Model, name, recording)
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.fit(TEXTS, LABELS, validation_data=(TEXTS[:4], LABELS[:4]), epochs=1, batch_size=4, verbose=0)
    classifier.predict(TEXTS)
    classifier.evaluate(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4).map(classifier.preprocessor))
    assert {name for name, _ in seen} == {"fit", "evaluate", "predict"}
    assert [enabled for _, enabled in seen] == [False] * len(seen)


def test_the_ner_preprocessor_builds_the_features_fit_builds(spec):
    from pipelines.datasets.conll import encode_sentences, read_conll

    sentences = read_conll(os.path.join(os.path.dirname(__file__), "..", "data", "tasks", "conll2003_mini.txt"))
    words, tags = [s.words for s in sentences], [s.tags for s in sentences]
    reference = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    expected = losses(reference.fit(words, tags, epochs=1, batch_size=4, shuffle=False, verbose=0))
    tagger = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    features = encode_sentences(sentences, tagger.tokenizer, tagger.labels, seq_length=tagger.seq_length)
    x, y = tagger.preprocessor(tf.ragged.constant(words), tf.ragged.constant(tags))
    width = x["token_ids"].shape[1]
    assert width % 8 == 0 and width >= features.padding_mask.sum(1).max()
    np.testing.assert_array_equal(x["token_ids"], features.token_ids[:, :width])
    np.testing.assert_array_equal(y, features.labels[:, :width])
    packed = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), tf.ragged.constant(tags))
                                                ).batch(4).map(tagger.preprocessor)
    np.testing.assert_allclose(losses(tagger.fit(packed, epochs=1, verbose=0)), expected, rtol=1e-5)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(tagger.preprocessor))
    assert again.labels == export_fixtures.CONLL_LABELS
    np.testing.assert_array_equal(again.pack(tf.ragged.constant(words))["token_ids"], x["token_ids"])


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_the_squad_preprocessor_builds_the_features_fit_builds(minilm_dir, version):
    """Real SQuAD dev questions (long contexts: several windows each), the real vocabulary."""
    from pipelines import BertTokenizer
    from pipelines.datasets.squad import build_squad_features, examples_from_records, read_squad_json
    from bert_keras.tasks.preprocessor import SpanQAPreprocessor

    examples = read_squad_json(os.path.join(export_fixtures.DATA, "squad", f"dev-v{version}-mini.json"),
                               is_training=True)
    tokenizer = BertTokenizer(os.path.join(minilm_dir, "vocab.txt"))
    preprocessor = SpanQAPreprocessor(tokenizer, seq_length=48, stride=16, max_query_length=16)
    features = build_squad_features(examples, tokenizer, is_training=True, max_seq_length=48, stride=16,
                                    max_query_length=16)
    questions, contexts = [e.question for e in examples], [e.context for e in examples]
    answers = {"text": [e.answers[0]["text"] if e.answers and not e.is_impossible else "" for e in examples],
               "answer_start": [e.answers[0]["answer_start"] if e.answers and not e.is_impossible else -1
                                for e in examples]}
    batches = tf.data.Dataset.from_tensor_slices(((questions, contexts), answers)).batch(3).map(preprocessor)
    x = {k: np.concatenate([b[0][k].numpy() for b in batches]) for k in features.inputs}
    y = {k: np.concatenate([b[1][k].numpy() for b in batches]) for k in ("start_positions", "end_positions")}
    assert len(features) > 2 * len(examples)  # contexts in several windows
    assert (features.start_positions > 0).sum() >= len(examples) // 2  # answers inside windows
    for key in features.inputs:
        np.testing.assert_array_equal(x[key], features.inputs[key], err_msg=key)
    np.testing.assert_array_equal(y["start_positions"], features.start_positions)
    np.testing.assert_array_equal(y["end_positions"], features.end_positions)
    # inference: the same windows, and where each sits (what decoding needs)
    windows, layout = preprocessor.windows((tf.constant(questions), tf.constant(contexts)))
    np.testing.assert_array_equal(windows["token_ids"], features.token_ids)
    np.testing.assert_array_equal(layout["example"], features.example_index)
    np.testing.assert_array_equal(layout["start"], features.window_start)
    np.testing.assert_array_equal(layout["is_max_context"], features.token_is_max_context)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(preprocessor))
    assert (again.stride, again.max_query_length, again.seq_length) == (16, 16, 48)
    # a config saved while the setting had run_squad.py's name (`doc_stride`) loads as `stride`
    legacy = keras.saving.serialize_keras_object(preprocessor)
    legacy["config"]["doc_stride"] = legacy["config"].pop("stride")
    assert keras.saving.deserialize_keras_object(legacy).stride == 16
    legacy["config"]["stride"] = 32
    with pytest.raises(ValueError, match=r"stride=32 and doc_stride=16"):
        keras.saving.deserialize_keras_object(legacy)
    # answers are code point offsets; the tokenizer's offsets are bytes
    context = "Der Kölner Dom — über 157 m hoch — steht in Köln, nicht in Zürich. " * 3
    start = context.index("Köln,", 40)
    records = [dict(id="k", question="Wo steht der Dom?", context=context, title="", is_impossible=False,
                    answers=[{"text": "Köln", "answer_start": start}])]
    expected = build_squad_features(examples_from_records(records, is_training=True, version="1.1"), tokenizer,
                                    is_training=True, max_seq_length=48, stride=16, max_query_length=16)
    x, y = preprocessor((tf.constant(["Wo steht der Dom?"]), tf.constant([context])),
                        {"text": tf.constant(["Köln"]), "answer_start": tf.constant([start])})
    assert expected.start_positions.max() > 0
    np.testing.assert_array_equal(y["start_positions"], expected.start_positions)
    np.testing.assert_array_equal(x["token_ids"], expected.token_ids)


def test_squad_fit_on_the_preprocessor_layer_equals_fit_on_raw_questions(spec):
    questions, answers = SQUAD_QUESTIONS, SQUAD_ANSWERS
    contexts = [CONTEXT] * len(questions)
    reference = build(tasks.SpanQA, spec, seq_length=32, version_2=True, stride=8, max_query_length=8)
    expected = losses(reference.fit((questions, contexts), answers, epochs=2, batch_size=4, shuffle=False,
                                    verbose=0))
    qa = build(tasks.SpanQA, spec, seq_length=32, version_2=True, stride=8, max_query_length=8)
    columns = {"text": [a["text"] if a else "" for a in answers],
               "answer_start": [a["answer_start"] if a else -1 for a in answers]}
    windows = tf.data.Dataset.from_tensor_slices(((questions, contexts), columns)).batch(4).map(
        qa.preprocessor).unbatch().batch(4)  # the windows of all questions, 4 a step, as fit batches them
    np.testing.assert_allclose(losses(qa.fit(windows, epochs=2, verbose=0)), expected, rtol=1e-5)
    np.testing.assert_allclose(qa.predict((questions, contexts))[0]["start_char"],
                               reference.predict((questions, contexts))[0]["start_char"])


def test_squad_fit_streams_an_infinite_dataset_through_the_preprocessor(spec):
    questions, answers = SQUAD_QUESTIONS, SQUAD_ANSWERS
    contexts = [CONTEXT + " " + CONTEXT] * len(questions)  # several windows each
    reference = build(tasks.SpanQA, spec, seq_length=32, version_2=True, stride=8, max_query_length=8)
    expected = losses(reference.fit((questions, contexts), answers, epochs=1, batch_size=4, max_steps=3,
                                    shuffle=False, verbose=0))
    qa = build(tasks.SpanQA, spec, seq_length=32, version_2=True, stride=8, max_query_length=8)
    _, layout = qa.preprocessor.windows((tf.constant(questions), tf.constant(contexts)))
    assert len(layout["example"]) >= 12  # 3 steps of 4 windows inside the first pass
    columns = {"text": tf.ragged.constant([[a["text"]] if a else [] for a in answers]),
               "answer_start": tf.ragged.constant([[a["answer_start"]] if a else [] for a in answers])}
    stream = tf.data.Dataset.from_tensor_slices(((questions, contexts), columns)).repeat()
    history = qa.fit(stream, steps_per_epoch=3, epochs=1, batch_size=4, shuffle=False, verbose=0)
    np.testing.assert_allclose(losses(history), expected, rtol=1e-5)
    assert int(qa.optimizer.iterations) == 3
    with pytest.raises(tasks.TaskInputError, match="has no answers"):
        qa.fit(tf.data.Dataset.from_tensor_slices((questions, contexts)).repeat(), steps_per_epoch=1, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"seq_length 24 must exceed max_query_length \+ 3 \(67\)"):
        tasks.SpanQA.from_pretrained(spec, seq_length=24)  # the default question room leaves no context
    with pytest.raises(tasks.TaskInputError, match=r"SQuAD's columns.*got \['answer'\]"):
        qa.fit(tf.data.Dataset.from_tensor_slices(((questions, contexts), {"answer": columns["text"]})).repeat(),
               steps_per_epoch=1, verbose=0)


# -- a second round of Keras forms (a probe as a Keras user) ----------------------------------


def test_more_keras_forms_read_the_same_data(spec):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    predicted = classifier.predict(TEXTS)
    # tensors, [N, 1] columns, a one-column DataFrame
    np.testing.assert_allclose(classifier.predict(tf.constant(TEXTS)), predicted, atol=1e-6)
    np.testing.assert_allclose(classifier.predict(np.array(TEXTS)[:, None]), predicted, atol=1e-6)
    with pytest.raises(tasks.TaskInputError, match="a dict of columns"):
        classifier.predict({"text": TEXTS})
    # a generator of single texts: each a batch of one, as Keras reads a generator's items
    np.testing.assert_allclose(classifier.predict(text for text in TEXTS), predicted, atol=1e-6)
    # labels and weights as [N, 1] columns; an infinite dataset with steps_per_epoch (as Keras)
    classifier.fit(TEXTS, np.array(LABELS)[:, None], sample_weight=np.ones((10, 1)), epochs=1, verbose=0)
    steps = int(classifier.optimizer.iterations)
    classifier.fit(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).repeat().batch(2), steps_per_epoch=3,
                   epochs=2, verbose=0)
    assert int(classifier.optimizer.iterations) == steps + 6
    with pytest.raises(tasks.TaskInputError, match="an infinite dataset .* pass steps_per_epoch"):
        classifier.fit(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).repeat(), verbose=0)
    tagger = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    with pytest.raises(tasks.TaskInputError, match="an infinite dataset"):
        tagger.fit(tf.data.Dataset.from_tensor_slices((["john lives"], [["B-PER", "O"]])).repeat(),
                   steps_per_epoch=1, verbose=0)
    # steps= takes the first batches; *_on_batch take raw text
    predicted = classifier.predict(TEXTS)  # after the fits above
    np.testing.assert_allclose(classifier.predict(TEXTS, steps=1, batch_size=4), predicted[:4], atol=1e-6)
    np.testing.assert_allclose(classifier.predict_on_batch(TEXTS[:3]), predicted[:3], atol=1e-6)
    loss = classifier.test_on_batch(TEXTS[:4], LABELS[:4])
    assert np.isfinite(np.ravel(loss)[0])
    # packed inputs with label names, as fit takes them ("y_true and y_pred have different structures")
    packed = classifier.preprocessor(tf.constant(TEXTS[:4]))
    np.testing.assert_allclose(classifier.test_on_batch(packed, LABELS[:4]), loss, rtol=1e-6)
    assert np.isfinite(np.ravel(classifier.train_on_batch(TEXTS[:4], LABELS[:4]))[0])
    # ... in every family: word lists and tags, questions and answers
    words, tags = [["john", "lives"], ["in", "paris", "now"]], [["B-PER", "O"], ["O", "B-LOC", "O"]]
    packed = tagger.preprocessor(words, tags)
    assert tagger.test_on_batch(words, tags) == pytest.approx(tagger.test_on_batch(*packed), rel=1e-6)
    assert np.isfinite(tagger.train_on_batch(words, tags))
    qa = build(tasks.SpanQA, spec, seq_length=64, version_2=True, stride=16, max_query_length=16)
    questions = (["who lives in paris?", "what is the capital of spain?"], [CONTEXT] * 2)
    answers = [{"text": "john smith", "answer_start": 0}, None]
    assert np.isfinite(qa.test_on_batch(questions, answers)) and np.isfinite(qa.train_on_batch(questions, answers))
    # an embedder reads a dataset's (a, b) elements as pairs (it has no labels)
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32)
    np.testing.assert_allclose(embedder.predict(tf.data.Dataset.from_tensor_slices((TEXTS, TEXTS_B)).batch(4)),
                               embedder.predict((TEXTS, TEXTS_B)), atol=1e-6)


class _Batches(keras.utils.PyDataset):
    """A `keras.utils.PyDataset` over in-memory batches; counts its `on_epoch_end` calls."""

    def __init__(self, batches):
        super().__init__()
        self.batches, self.epochs_ended = batches, 0

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        return self.batches[index]

    def on_epoch_end(self):
        self.epochs_ended += 1


def _in_batches(columns, size):
    """`columns` (a tuple of lists) cut into Keras batches of numpy arrays / lists."""
    count = len(columns[0])
    return [tuple(np.array(column[i:i + size]) if isinstance(column[0], str) else column[i:i + size]
                  for column in columns) for i in range(0, count, size)]


def test_generators_and_py_datasets_are_read_as_keras_reads_them(spec):
    """Keras' fit / evaluate / predict take a Python generator of batches and a PyDataset:
    each batch is (x, y[, sample_weight]); a batch's size is the step's, as in Keras."""
    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    expected = losses(reference.fit(TEXTS, LABELS, epochs=2, batch_size=4, shuffle=False, verbose=0))
    batches = _in_batches((TEXTS, LABELS), 4)
    from_py_dataset = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    source = _Batches(batches)
    np.testing.assert_allclose(losses(from_py_dataset.fit(source, epochs=2, shuffle=False, verbose=0)),
                               expected, rtol=1e-5)
    assert int(from_py_dataset.optimizer.iterations) == 6 and source.epochs_ended >= 2
    one_epoch = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = one_epoch.fit((batch for batch in batches), epochs=1, shuffle=False, verbose=0)
    one_epoch_reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    np.testing.assert_allclose(losses(history), losses(one_epoch_reference.fit(
        TEXTS, LABELS, epochs=1, batch_size=4, shuffle=False, verbose=0)), rtol=1e-5)
    # a finite generator is read to its end once: a second epoch sees the same batches (Keras
    # would run out of data); with steps_per_epoch it is a stream, stopped when it ends
    two_epochs = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = two_epochs.fit(iter(batches), epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(losses(history), expected, rtol=1e-5)
    streamed = build(tasks.TextClassifier, spec, labels=["neg", "pos"])

    def endless():
        while True:
            yield from batches

    streamed.fit(endless(), steps_per_epoch=2, epochs=3, verbose=0)
    assert int(streamed.optimizer.iterations) == 6
    # predict / evaluate / validation_data
    predicted = reference.predict(TEXTS)
    np.testing.assert_allclose(reference.predict(_Batches([np.array(TEXTS[:4]), np.array(TEXTS[4:])])),
                               predicted, atol=1e-6)
    np.testing.assert_allclose(reference.predict((x for x, _ in batches)), predicted, atol=1e-6)
    assert reference.score(_Batches(batches)) == reference.score(TEXTS, LABELS)
    history = build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
        TEXTS, LABELS, epochs=1, validation_data=(batch for batch in batches), verbose=0)
    assert "val_loss" in history.history
    # a PyDataset is read by index, so again for the task's metrics (a generator is read once)
    history = build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
        TEXTS, LABELS, epochs=1, validation_data=_Batches(batches), verbose=0)
    assert {"val_loss", "val_f1", "val_matthews_corrcoef"} <= set(history.history)
    # word lists of NER (ragged columns) and pairs
    words = [["john", "smith", "lives", "in", "paris"], ["the", "capital", "of", "france"]] * 2
    tags = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["O", "O", "O", "B-LOC"]] * 2
    tagger = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    ner_reference = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    np.testing.assert_allclose(
        losses(tagger.fit(((words[i:i + 2], tags[i:i + 2]) for i in (0, 2)), epochs=1, shuffle=False,
                          verbose=0)),
        losses(ner_reference.fit(words, tags, epochs=1, batch_size=2, shuffle=False, verbose=0)), rtol=1e-5)
    pairs = build(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True)
    np.testing.assert_allclose(pairs.predict(_Batches([(np.array(TEXTS[:5]), np.array(TEXTS_B[:5])),
                                                       (np.array(TEXTS[5:]), np.array(TEXTS_B[5:]))])),
                               pairs.predict((TEXTS, TEXTS_B)), atol=1e-6)
    with pytest.raises(tasks.TaskInputError, match="the generator yields no batch"):
        reference.fit((batch for batch in []), verbose=0)
    with pytest.raises(tasks.TaskInputError, match="the PyDataset has no batch"):
        reference.predict(_Batches([]))
    # a finite generator is read before the first step: each bad batch is named
    with pytest.raises(tasks.TaskInputError, match=r"x \(batch 0\): its columns differ in length \(\[3, 4\]"):
        reference.fit(iter([(TEXTS[:4], LABELS[:3])]), verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"x \(batch 1\): its structure differs"):
        reference.fit(iter([(TEXTS[:4], LABELS[:4]), (TEXTS[4:],)]), verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"x \(batch 1\): a column of int32 where the first batch has string"):
        reference.predict(iter([TEXTS[:4], [1, 2]]))
    with pytest.raises(tasks.TaskInputError, match="the dataset's texts are int32, not strings"):
        reference.predict(tf.data.Dataset.from_tensor_slices([1, 2]))
    assert int(reference.optimizer.iterations) == 6  # nothing trained on any of them


def test_batches_whose_rows_change_form_from_batch_to_batch_train_as_lists_do(spec):
    """A batch of word lists of one length converts to a dense column, the next batch's to a ragged
    one; a batch of answers without None to flat columns, one with None to ragged ones. The dataset
    took its signature from the first batch, so the second failed inside tf.data ("yielded an
    element of shape () where (None, None) was expected")."""
    labels = export_fixtures.CONLL_LABELS
    words = [["john", "smith"], ["in", "paris"], ["john", "lives", "in", "paris"], ["paris"]]
    tags = [["B-PER", "I-PER"], ["O", "B-LOC"], ["B-PER", "O", "O", "B-LOC"], ["B-LOC"]]
    for order in ([0, 2], [2, 0]):  # one length first, then ragged; and the reverse
        batches = [(words[i:i + 2], tags[i:i + 2]) for i in order]
        expected = losses(build(tasks.TokenClassifier, spec, labels=labels).fit(
            [w for i in order for w in words[i:i + 2]], [t for i in order for t in tags[i:i + 2]],
            epochs=2, batch_size=2, shuffle=False, verbose=0))
        for source in (iter(batches), _Batches(batches)):  # read to its end first; read as it goes
            tagger = build(tasks.TokenClassifier, spec, labels=labels)
            np.testing.assert_allclose(losses(tagger.fit(source, epochs=2, shuffle=False, verbose=0)), expected,
                                       rtol=1e-5)
    tagger = build(tasks.TokenClassifier, spec, labels=labels)
    assert tagger.score(iter([(words[:2], tags[:2]), (words[2:], tags[2:])])) == tagger.score(words, tags)
    # tag ids: a stream whose first batch is dense cannot take a ragged one later: named, not a tf.data error
    ids = [[labels.index(tag) for tag in row] for row in tags]
    with pytest.raises(tasks.TaskInputError, match="rows differ in length.*first batch's had one length"):
        build(tasks.TokenClassifier, spec, labels=labels).fit(
            _Batches([(words[:2], ids[:2]), (words[2:], ids[2:])]), epochs=1, verbose=0)
    # SpanQA v2.0: a batch of answered questions, then one with a question without an answer (None)
    order = [0, 3, 2, 1]
    questions, answers = [SQUAD_QUESTIONS[i] for i in order], [SQUAD_ANSWERS[i] for i in order]
    expected = losses(build(tasks.SpanQA, spec, seq_length=64, version_2=True, stride=16, max_query_length=16).fit(
        (questions, [CONTEXT] * 4), answers, epochs=1, batch_size=2, shuffle=False, verbose=0))
    batches = [((questions[j:j + 2], [CONTEXT] * 2), answers[j:j + 2]) for j in (0, 2)]
    for source in (iter(batches), _Batches(batches)):
        qa = build(tasks.SpanQA, spec, seq_length=64, version_2=True, stride=16, max_query_length=16)
        np.testing.assert_allclose(losses(qa.fit(source, epochs=1, shuffle=False, verbose=0)), expected, rtol=1e-5)


def test_dataframes_give_their_columns(spec):
    pandas = pytest.importorskip("pandas")  # installed with the TF 2.20 row's references only
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    frame = pandas.DataFrame({"text": TEXTS, "text_b": TEXTS_B, "label": LABELS})
    np.testing.assert_allclose(classifier.predict(frame[["text"]]), classifier.predict(TEXTS), atol=1e-6)
    np.testing.assert_allclose(classifier.predict(frame["text"]), classifier.predict(TEXTS), atol=1e-6)
    with pytest.raises(tasks.TaskInputError, match="a DataFrame of 3 columns"):
        classifier.predict(frame)


def test_weights_and_callbacks_are_checked_at_the_door(spec):
    def first_step_loss(**options):
        classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
        return losses(classifier.fit(TEXTS[:4], LABELS[:4], batch_size=4, max_steps=1, shuffle=False,
                                     verbose=0, **options))[0]

    # a class left out of class_weight weighs 1, as in Keras
    assert first_step_loss(class_weight={"pos": 3.0}) == pytest.approx(
        first_step_loss(sample_weight=[3.0, 1.0, 3.0, 1.0]), rel=1e-5)
    with pytest.raises(tasks.TaskInputError, match=r"class_weight / sample_weight: give one of them"):
        build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
            TEXTS[:4], LABELS[:4], class_weight={"pos": 3.0}, sample_weight=[1.0] * 4, verbose=0)
    tagger = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    with pytest.raises(tasks.TaskInputError, match="no class per example .* use sample_weight"):
        tagger.fit([["john"]], [["B-PER"]], class_weight={"O": 1.0}, verbose=0)
    # a regression's message said "a TextClassifier has no class per example", false of a classifier
    with pytest.raises(tasks.TaskInputError, match=r"class_weight: a regression \(num_classes=1\) has a float "
                                                   r"target per example, not a class; use sample_weight"):
        build(tasks.TextClassifier, spec, num_classes=1).fit(TEXTS[:2], [0.5, 1.5], class_weight={0: 2.0},
                                                             verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"y\[0\]\[0\]: label 99 is not one of the model's labels.* a number is the id "
                                                   r"of labels\[i\], 0 <= i < 9"):
        tagger.fit([["john"]], [[99]], verbose=0)
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(tasks.TaskInputError, match="ReduceLROnPlateau sets the learning rate"):
        classifier.fit(TEXTS, LABELS, validation_split=0.2, verbose=0,
                       callbacks=[keras.callbacks.ReduceLROnPlateau(patience=0)])
    assert int(classifier.optimizer.iterations) == 0
    qa = build(tasks.SpanQA, spec, seq_length=64, version_2=True, stride=16, max_query_length=16)
    with pytest.raises(tasks.TaskInputError, match=r"y\[0\]: an answer is"):
        qa.fit((["who lives in paris?"], [CONTEXT]), ["john smith"], verbose=0)
    with pytest.raises(tasks.TaskInputError, match="does not match|not in|answer"):
        qa.fit((["who lives in paris?"], [CONTEXT]), [{"text": "mary", "answer_start": 0}], verbose=0)
    rows = qa.predict([("who lives in paris?", CONTEXT)])  # (question, context) rows
    assert rows[0]["answer"] == qa.predict((["who lives in paris?"], [CONTEXT]))[0]["answer"]


def test_a_batch_source_that_raises_mid_epoch_raises_its_own_error_as_keras_does(spec):
    """Keras' loop re-raises what a PyDataset or generator raised; so do the tasks (not
    TensorFlow's InvalidArgumentError around the text of a traceback)."""
    class Reviews(keras.utils.PyDataset):
        def __len__(self):
            return 3

        def __getitem__(self, index):
            if index == 2:
                raise KeyError("reviews.csv line 17: no 'label' column")
            return np.array(TEXTS[:4]), np.array(LABELS[:4])

    def stream():
        yield TEXTS[:4], LABELS[:4]
        raise OSError("reviews.csv: connection reset")

    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    for call in (classifier.fit, classifier.evaluate, classifier.predict):
        with pytest.raises(KeyError, match="line 17"):
            call(Reviews(), verbose=0)
    with pytest.raises(OSError, match="connection reset"):
        classifier.fit(stream(), steps_per_epoch=2, epochs=1, verbose=0)
    # (x, None) is x alone, as Keras reads a generator's items; None as x is named
    np.testing.assert_allclose(classifier.predict((b for b in [(TEXTS[:4], None)])),
                               classifier.predict(TEXTS[:4]), atol=1e-6)
    from bert_keras.tasks.inputs import TaskInputError

    with pytest.raises(TaskInputError, match="holds None"):
        classifier.predict((b for b in [(None, LABELS[:4])]))
    # and a TensorFlow error of the model's own still comes through as it is
    with pytest.raises(tf.errors.InvalidArgumentError):
        classifier.predict(tf.data.Dataset.from_tensor_slices(
            {"token_ids": [[2, 999, 3]], "segment_ids": [[0, 0, 0]], "padding_mask": [[1, 1, 1]]}).batch(1))


def test_a_label_row_that_is_not_one_hot_is_refused_by_position(spec):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    soft = keras.utils.to_categorical([int(l == "pos") for l in LABELS], 2)
    soft[3] = [0.3, 0.7]
    with pytest.raises(tasks.TaskInputError, match=r"y\[3\]: \[0.3, 0.7\] is not a one-hot row"):
        classifier.fit(TEXTS, soft, epochs=1, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"dataset element 3.*is not a one-hot row"):
        classifier.fit(tf.data.Dataset.from_tensor_slices((TEXTS, soft)).batch(4), epochs=1, verbose=0)
    regression = build(tasks.TextClassifier, spec, num_classes=1)
    scores = np.linspace(0, 1, len(TEXTS), dtype="float32")
    expected = losses(regression.fit(TEXTS, scores, epochs=1, batch_size=4, shuffle=False, verbose=0))
    again = build(tasks.TextClassifier, spec, num_classes=1)  # an [N, 1] column of scores from a dataset
    column = tf.data.Dataset.from_tensor_slices((TEXTS, scores[:, None])).batch(4)
    np.testing.assert_allclose(losses(again.fit(column, epochs=1, shuffle=False, verbose=0)), expected, rtol=1e-5)


def test_a_tagger_compiled_with_keras_sparse_cross_entropy_and_accuracy_reads_tagged_positions(spec):
    # -100 marks the positions with no tag (later pieces, [CLS], [SEP], padding): Keras' own loss
    # fails on it in the graph and its accuracy counts it wrong, so compile reads them masked.
    words = [["john", "lives", "in", "paris"], ["the", "capital"], ["paris", "is", "great"]]
    tags = [["B-PER", "O", "O", "B-LOC"], ["O", "O"], ["B-LOC", "O", "O"]]
    reference = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    reference.compile(optimizer=keras.optimizers.Adam(1e-3), loss=reference.head.default_loss())
    expected = losses(reference.fit(words, tags, epochs=2, batch_size=2, shuffle=False, verbose=0))
    tagger = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    tagger.compile(optimizer=keras.optimizers.Adam(1e-3),
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = tagger.fit(words, tags, epochs=2, batch_size=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(losses(history), expected, rtol=1e-5)
    # accuracy over the 9 tagged words only: what predict's tags agree with
    predicted = tagger.predict(words)
    right = sum(p == t for row, gold in zip(predicted, tags) for p, t in zip(row["tags"], gold))
    assert tagger.score(words, tags, batch_size=8)["num_examples"] == 3
    packed = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), tf.ragged.constant(tags)))
    metrics = tagger.evaluate(packed.batch(3).map(tagger.preprocessor), return_dict=True, verbose=0)
    assert metrics["accuracy"] == pytest.approx(right / 9, abs=1e-6)
    # The same in weighted_metrics (Keras weights it by sample_weight): it once counted the untagged
    # positions as errors too (here 0.042 for 1/9).
    tagger.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True), metrics=["accuracy"], weighted_metrics=["accuracy"])
    metrics = tagger.evaluate(packed.batch(3).map(tagger.preprocessor), return_dict=True, verbose=0)
    assert metrics["weighted_accuracy"] == pytest.approx(right / 9, abs=1e-6)


def test_span_qa_refuses_a_loss_it_would_ignore(spec):
    qa = build(tasks.SpanQA, spec, seq_length=64, stride=32, max_query_length=16)
    with pytest.raises(tasks.TaskInputError, match=r"compile\(loss=...\): SpanQA's loss is the head's own"):
        qa.compile(optimizer="adam", loss="mse")
    qa.compile(keras.optimizers.Adam(1e-3))  # optimizer only: the span loss trains
    x, y = (SQUAD_QUESTIONS[:2], [CONTEXT] * 2), SQUAD_ANSWERS[:2]
    before = qa.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    history = qa.fit(x, y, epochs=2, verbose=0)
    # Judged without dropout (evaluate), so the masks drawn in fit do not decide it.
    assert np.all(np.isfinite(losses(history))) and qa.evaluate(x, y, verbose=0, return_dict=True)["loss"] < before


def test_an_error_in_validation_data_names_it(spec):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(tasks.TaskInputError, match=r"^validation_data: y\[1\]: label 'meh' is not one of the model's labels"):
        classifier.fit(TEXTS, LABELS, validation_data=(TEXTS[:2], ["pos", "meh"]), epochs=1, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"^validation_data: x and y differ in length"):
        classifier.fit(TEXTS, LABELS, validation_data=(TEXTS[:2], ["pos"]), epochs=1, verbose=0)
    # evaluate's own x / y are named as they are: it has no validation_data.
    with pytest.raises(tasks.TaskInputError, match=r"^y\[1\]: label 'meh' is not one of the model's labels"):
        classifier.evaluate(TEXTS[:2], ["pos", "meh"], verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"^x and y differ in length"):
        classifier.evaluate(TEXTS[:2], ["pos"], verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"^sample_weight: expected one weight per example"):
        classifier.evaluate(TEXTS[:2], ["pos", "neg"], sample_weight=[1.0], verbose=0)


def test_a_run_dir_in_use_by_a_running_fit_is_refused(spec, tmp_path):
    import subprocess
    import sys

    from pipelines.atomic_writes import owner_tag

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (run_dir / "run.owner").write_text(owner_tag(other.pid))  # another fit, running now
        classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
        with pytest.raises(tasks.TaskInputError, match=rf"a fit in process {other.pid} is running in it now"):
            classifier.fit(TEXTS, LABELS, epochs=1, batch_size=5, run_dir=str(run_dir), verbose=0)
    finally:
        other.kill()
        other.wait()
    # its process gone (killed): the directory is free again, and the completed fit removes it
    classifier.fit(TEXTS, LABELS, epochs=1, batch_size=5, run_dir=str(run_dir), verbose=0)
    assert not run_dir.exists()


class _EvaluateAtEpochEnd(keras.callbacks.Callback):
    """What `score` says on the validation data at each epoch's end: the logged values must equal it."""

    def __init__(self, x, y):
        super().__init__()
        self.x, self.y, self.scores = x, y, []

    def on_epoch_end(self, epoch, logs=None):
        self.scores.append(self.model.score(self.x, self.y, verbose=0))


def test_the_task_metrics_on_validation_data_are_in_the_logs_for_keras_callbacks(spec, tmp_path):
    from pipelines.datasets.conll import read_conll

    sentences = read_conll(os.path.join(os.path.dirname(__file__), "..", "data", "tasks", "conll2003_mini.txt"))
    words, tags = [s.words for s in sentences], [s.tags for s in sentences]
    tagger = build(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    scores = _EvaluateAtEpochEnd(words[:6], tags[:6])
    csv_log = tmp_path / "log.csv"
    history = tagger.fit(words, tags, validation_data=(words[:6], tags[:6]), epochs=3, batch_size=4, verbose=0,
                         callbacks=[scores, keras.callbacks.CSVLogger(str(csv_log))])
    assert history.history["val_f1"] == [pytest.approx(s["f1"]) for s in scores.scores]
    assert history.history["val_precision"] == [pytest.approx(s["precision"]) for s in scores.scores]
    assert "val_loss" in history.history and "val_f1" in csv_log.read_text().splitlines()[0].split(",")
    # EarlyStopping on the entity F1, as a NER user writes it: a drop of 2 F1 can never happen, so
    # it stops after `patience` epochs without a gain of 2; the best weights come back.
    stopper = keras.callbacks.EarlyStopping(monitor="val_f1", mode="max", patience=1, min_delta=2.0,
                                            restore_best_weights=True)
    history = tagger.fit(words, tags, validation_data=(words[:6], tags[:6]), epochs=5, batch_size=4, verbose=0,
                         callbacks=[stopper])
    assert len(history.history["val_f1"]) == 2 and stopper.stopped_epoch == 1
    # Classification: F1 / MCC beside val_accuracy, with validation_split and a dataset too.
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    history = classifier.fit(TEXTS, LABELS, validation_split=0.4, epochs=2, batch_size=4, verbose=0)
    held_out = classifier.score(TEXTS[6:], LABELS[6:])
    assert history.history["val_accuracy"][-1] == pytest.approx(held_out["accuracy"])
    assert set(history.history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(f"val_{name}" in history.history for name, value in held_out.items()
               if isinstance(value, float))
    validation = tf.data.Dataset.from_tensor_slices((TEXTS[:4], LABELS[:4])).batch(2)
    history = classifier.fit(TEXTS, LABELS, validation_data=validation, validation_freq=2, epochs=2, batch_size=4,
                             verbose=0)
    assert len(history.history["val_loss"]) == 1 and len(history.history[next(
        key for key in history.history if key.startswith("val_") and key not in ("val_loss", "val_accuracy"))]) == 1
    # Long texts trained in windows: Keras' val_accuracy would count windows; the logged one counts
    # texts, as evaluate does (what EarlyStopping(monitor="val_accuracy") should rank on).
    documents = [" ".join([text] * 6) for text in TEXTS]
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"], max_length=100, stride=5)
    history = classifier.fit(documents, LABELS, validation_data=(documents[:5], LABELS[:5]), epochs=1,
                             batch_size=4, verbose=0)
    assert history.history["val_accuracy"][-1] == classifier.score(documents[:5], LABELS[:5])["accuracy"]
    assert history.history["val_accuracy"][-1] in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # of 5 texts


def test_callbacks_in_auto_mode_maximize_the_task_metrics_they_monitor(spec, tmp_path):
    # Keras cannot tell which way val_f1 / val_matthews_corrcoef / val_pearson improve: mode "auto"
    # stopped the fit after its first epoch with "Keras isn't able to automatically determine whether
    # that metric should be maximized or minimized". The task's metrics are all better higher.
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    stopper = keras.callbacks.EarlyStopping(monitor="val_f1", patience=5)
    best = keras.callbacks.ModelCheckpoint(str(tmp_path / "best.keras"), monitor="val_matthews_corrcoef",
                                           save_best_only=True)
    history = classifier.fit(TEXTS, LABELS, validation_data=(TEXTS, LABELS), epochs=3, batch_size=4, verbose=0,
                             callbacks=[stopper, best])
    assert len(history.history["val_f1"]) == 3 and stopper.best == max(history.history["val_f1"])
    assert best.best == max(history.history["val_matthews_corrcoef"])
    regressor = build(tasks.TextClassifier, spec, num_classes=1)
    stopper = keras.callbacks.EarlyStopping(monitor="val_pearson", patience=5)
    history = regressor.fit(TEXTS, np.linspace(0.0, 1.0, 10), validation_split=0.4, epochs=2, batch_size=4,
                            verbose=0, callbacks=[stopper, keras.callbacks.EarlyStopping(monitor="val_loss")])
    assert stopper.best == max(history.history["val_pearson"])


def test_auto_mode_monitors_of_task_metrics_wait_for_the_first_validated_epoch(spec):
    # With validation_freq=2 the first epoch logs no val_f1, and Keras resolved the direction of
    # EarlyStopping / ReduceLROnPlateau(monitor="val_f1") there: "Keras isn't able to automatically
    # determine whether that metric should be maximized or minimized", before any validation.
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3))  # a constant rate, for ReduceLROnPlateau
    stopper = keras.callbacks.EarlyStopping(monitor="val_f1", patience=5)
    plateau = keras.callbacks.ReduceLROnPlateau(monitor="val_f1", patience=1, factor=0.5)
    loss = keras.callbacks.EarlyStopping(monitor="val_loss", patience=5)
    history = classifier.fit(TEXTS, LABELS, validation_data=(TEXTS, LABELS), validation_freq=2, epochs=4,
                             batch_size=4, verbose=0, callbacks=[stopper, plateau, loss])
    assert len(history.history["loss"]) == 4 and len(history.history["val_f1"]) == 2
    assert stopper.best == max(history.history["val_f1"]) == plateau.best
    assert stopper.monitor_op is plateau.monitor_op is keras.ops.greater
    assert loss.monitor_op is keras.ops.less and loss.best == min(history.history["val_loss"])
    # A monitor that is not one of the task's metrics is still Keras' to refuse, at the validated epoch.
    unknown = keras.callbacks.EarlyStopping(monitor="val_f2")
    with pytest.raises(ValueError, match="val_f2"):
        classifier.fit(TEXTS, LABELS, validation_data=(TEXTS, LABELS), validation_freq=2, epochs=2,
                       batch_size=4, verbose=0, callbacks=[unknown])


@pytest.mark.parametrize("frozen", ["encoder", "first_block"])
def test_a_frozen_encoder_or_block_stays_frozen_through_save_and_load(spec, tmp_path, frozen):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    layer = classifier.encoder if frozen == "encoder" else classifier.encoder.get_layer("transformer_layer_0")
    layer.trainable = False
    classifier.fit(TEXTS, LABELS, epochs=1, batch_size=4, verbose=0)
    trainable = len(classifier.trainable_variables)
    assert 0 < trainable < len(classifier.weights)
    classifier.save(str(tmp_path / "task.keras"))
    classifier.save(str(tmp_path / "task"))
    for loaded in (keras.models.load_model(str(tmp_path / "task.keras")), tasks.load(str(tmp_path / "task"))):
        assert len(loaded.trainable_variables) == trainable
        kept = [w.numpy().copy() for w in layer.weights]
        twin = loaded.encoder if frozen == "encoder" else loaded.encoder.get_layer("transformer_layer_0")
        loaded.fit(TEXTS, LABELS, epochs=1, batch_size=4, verbose=0)  # trains the head, not the frozen layer
        for before, after in zip(kept, twin.weights):
            np.testing.assert_array_equal(before, after.numpy())


@pytest.mark.parametrize("label_mode", ["int", "binary", "categorical"])
def test_text_dataset_from_directory_in_every_label_mode_with_its_class_names(spec, tmp_path, label_mode):
    for label in ("neg", "pos"):
        (tmp_path / label).mkdir()
    for i, (text, label) in enumerate(zip(TEXTS, LABELS)):
        (tmp_path / label / f"{i}.txt").write_text(text)
    dataset = keras.utils.text_dataset_from_directory(str(tmp_path), label_mode=label_mode, batch_size=4,
                                                      shuffle=False)
    classifier = build(tasks.TextClassifier, spec, labels=dataset.class_names)
    history = classifier.fit(dataset, epochs=2, shuffle=False, verbose=0)
    # The same training as the names themselves (the files come in sorted order: neg first).
    texts = [t.decode() for batch, _ in dataset for t in batch.numpy()]
    names = ["neg"] * 5 + ["pos"] * 5
    reference = build(tasks.TextClassifier, spec, labels=dataset.class_names)
    expected = reference.fit(texts, names, epochs=2, batch_size=4, shuffle=False, verbose=0)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)
    assert classifier.score(dataset)["accuracy"] == pytest.approx(reference.score(texts, names)["accuracy"])


def test_int_ids_are_read_as_ids_only_when_no_label_name_is_a_number(spec):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    ids = [int(label == "pos") for label in LABELS]
    by_ids = losses(classifier.fit(TEXTS, ids, epochs=1, batch_size=4, shuffle=False, verbose=0))
    by_names = losses(build(tasks.TextClassifier, spec, labels=["neg", "pos"]).fit(
        TEXTS, LABELS, epochs=1, batch_size=4, shuffle=False, verbose=0))
    np.testing.assert_allclose(by_ids, by_names, rtol=1e-6)
    with pytest.raises(tasks.TaskInputError, match=r"label 2 is not one of the model's labels"):  # out of range: not an id
        classifier.fit(TEXTS[:2], [0, 2], verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"label '1' is not one of the model's labels"):  # a string is a name
        classifier.fit(TEXTS[:2], ["1", "neg"], verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"label '1' is not one of the model's labels"):  # in a dataset too
        classifier.fit(tf.data.Dataset.from_tensor_slices((TEXTS[:2], ["1", "neg"])), verbose=0)
    numeric = build(tasks.TextClassifier, spec, labels=["1", "0"])  # names that are numbers: ints are names
    assert classifier_inputs.read_targets(numeric, [1, 0], 2).tolist() == [0, 1]
    # NER: Hugging Face's int ner_tags with the tag names given.
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-LOC"])
    words = [["john", "lives", "in", "paris"], ["the", "capital", "is", "paris"]]
    by_ids = losses(tagger.fit(words, [[0, 0, 0, 1], [0, 0, 0, 1]], epochs=1, batch_size=2, shuffle=False,
                               verbose=0))
    by_names = losses(build(tasks.TokenClassifier, spec, labels=["O", "B-LOC"]).fit(
        words, [["O", "O", "O", "B-LOC"]] * 2, epochs=1, batch_size=2, shuffle=False, verbose=0))
    np.testing.assert_allclose(by_ids, by_names, rtol=1e-6)


def test_a_keras_cross_entropy_named_by_string_reads_the_logits_and_from_logits_false_is_refused(spec):
    reference = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    reference.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    before = reference.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)["loss"]
    expected = losses(reference.fit(TEXTS, LABELS, epochs=3, batch_size=4, shuffle=False, verbose=0))
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                       metrics=["accuracy"])
    np.testing.assert_allclose(losses(classifier.fit(TEXTS, LABELS, epochs=3, batch_size=4, shuffle=False,
                                                     verbose=0)), expected, rtol=1e-5)
    # It learns (on probabilities it would stick at ln 2); judged without dropout (evaluate).
    assert reference.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)["loss"] < before
    for form in (keras.losses.sparse_categorical_crossentropy, "SparseCategoricalCrossentropy",
                 ["sparse_categorical_crossentropy"]):  # the function, the class name, a list of one
        again = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
        again.compile(optimizer=keras.optimizers.Adam(1e-3), loss=form, metrics=["accuracy"])
        np.testing.assert_allclose(losses(again.fit(TEXTS, LABELS, epochs=3, batch_size=4, shuffle=False,
                                                    verbose=0)), expected, rtol=1e-5)
    for wrong in (keras.losses.SparseCategoricalCrossentropy(), keras.losses.CategoricalCrossentropy()):
        with pytest.raises(tasks.TaskInputError, match=r"from_logits=False\), but the TextClassifier outputs "
                                                       r"logits; pass .*\(from_logits=True\)"):
            classifier.compile(optimizer="adam", loss=wrong)
    with pytest.raises(tasks.TaskInputError, match=r"loss: SparseCategoricalCrossentropy\(from_logits=False\), "
                                                   r"but the TokenClassifier outputs logits"):  # as given
        build(tasks.TokenClassifier, spec, labels=["O", "B-LOC"]).compile(
            optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy())
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-LOC"])
    tagger.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    words = [["john", "lives", "in", "paris"], ["the", "capital", "is", "paris"]] * 2
    tag_losses = losses(tagger.fit(words, [["O", "O", "O", "B-LOC"]] * 4, epochs=3, batch_size=2, verbose=0))
    assert tag_losses[-1] < tag_losses[0] < 1.0
    regression = build(tasks.TextClassifier, spec, num_classes=1)
    regression.compile(optimizer="adam", loss="mse")  # not logits: as given


def test_a_head_saved_as_h5_loads_back_without_custom_objects(spec, tmp_path):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.save(str(tmp_path / "head.h5"))
    head = keras.models.load_model(str(tmp_path / "head.h5"))
    packed = classifier.preprocessor(TEXTS)
    assert type(head).__name__ == "BertClassifier"
    np.testing.assert_allclose(head.predict(packed, verbose=0), classifier.head.predict(packed, verbose=0),
                               atol=1e-6)


def test_h5_files_keep_their_own_layer_classes(spec, tmp_path):
    """bert_keras's Dropout / LayerNormalization (subclasses of Keras' own, registered for .h5
    files) must not replace Keras' layers in a plain Keras model a user loads from .h5."""
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dropout(0.1),
                              keras.layers.LayerNormalization()])
    plain.save(str(tmp_path / "plain.h5"))
    loaded = keras.models.load_model(str(tmp_path / "plain.h5"))
    assert [type(layer).__module__.split(".")[0] for layer in loaded.layers] == ["keras"] * 3
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.save(str(tmp_path / "head.h5"))
    head = keras.models.load_model(str(tmp_path / "head.h5"))

    def classes(model):
        return sorted(f"{type(layer).__module__}.{type(layer).__name__}" for layer in model._flatten_layers())

    assert classes(head) == classes(classifier.head)  # the model's own layers still its own
    assert "bert_keras.layers.dropout.Dropout" in classes(head)


def test_pairs_or_single_texts_are_fixed_when_the_classifier_is_built_not_by_its_first_data(spec):
    pairs = build(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True)
    baseline = pairs.score((TEXTS, TEXTS_B), LABELS)  # the untrained model, scored on pairs
    assert baseline["num_examples"] == len(TEXTS)
    pairs.fit((TEXTS, TEXTS_B), LABELS, epochs=1, batch_size=4, verbose=0)
    with pytest.raises(tasks.TaskInputError, match="reads text pairs"):
        pairs.score(TEXTS, LABELS)
    single = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    assert single.text_pair is False
    # the CLI's "next:" hints show the form the model reads
    assert pairs.predict_example == "'first sentence ||| second sentence'" and single.predict_example == '"your text"'
    with pytest.raises(tasks.TaskInputError, match="pairs, but this classifier reads single texts"):
        single.score((TEXTS, TEXTS_B), LABELS)  # refused before any fit too: nothing is guessed
    single.fit(TEXTS, LABELS, epochs=1, batch_size=4, verbose=0)
    assert single.text_pair is False
    # row by row (what `bert-keras predict` calls): the first item of the wrong form, named in a script's
    # words (the command's, 'A ||| B' and the line, are test_cli_outputs')
    with pytest.raises(tasks.TaskInputError, match=r"^items\[1\] \('a lone text'\): a single text, but this model "
                                                   r"reads sentence pairs; give a \(text, text_b\) tuple$"):
        pairs.predict_rows([(TEXTS[0], TEXTS_B[0]), "a lone text"])
    with pytest.raises(tasks.TaskInputError, match=r"^items\[0\] .*a \(text, text_b\) pair, but this model reads "
                                                   r"single texts; give the text alone, a str$"):
        single.predict_rows([(TEXTS[0], TEXTS_B[0])])


def test_an_endless_validation_dataset_with_validation_steps_validates_on_those_steps(spec):
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    endless = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(3).repeat()
    history = classifier.fit(TEXTS, LABELS, epochs=2, batch_size=4, validation_data=endless, validation_steps=2,
                             verbose=0)
    assert len(history.history["val_loss"]) == 2
    assert not any(key.startswith("val_f1") for key in history.history)  # a part of the data: no task metrics


@pytest.mark.parametrize("source", ["texts", "texts_in_windows", "packed_batches"])
def test_max_steps_and_a_fractional_epoch_run_exactly_their_steps(spec, source):
    # 10 texts at batch_size 4 are 3 steps an epoch: max_steps=4 and epochs=1.5 (round(4.5) = 4)
    # end inside the second epoch, never at its end (6 steps).
    options = dict(max_length=100, stride=5, window_training="texts") if source == "texts_in_windows" else {}
    for fit_options in (dict(epochs=3, max_steps=4), dict(epochs=1.5), dict(epochs=3, max_steps=7)):
        classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"], **options)
        classifier.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
        if source == "packed_batches":
            ids = [int(label == "pos") for label in LABELS]
            x = tf.data.Dataset.from_tensor_slices((TEXTS, ids)).batch(4).map(
                lambda text, label: (classifier.preprocessor(text), label))
            history = classifier.fit(x, verbose=0, **fit_options)
        else:
            history = classifier.fit(TEXTS, LABELS, batch_size=4, verbose=0, **fit_options)
        expected = fit_options.get("max_steps", 4)
        assert int(classifier.optimizer.iterations) == expected, (fit_options, int(classifier.optimizer.iterations))
        assert len(history.history["loss"]) == -(-expected // 3)


@pytest.mark.parametrize("family", ["classifier", "embedder"])
def test_tf_saved_model_save_of_a_task_serves_its_packed_inputs(spec, tmp_path, family):
    # As Keras gives any model: a serving_default on the model's inputs (packed ids here; the
    # raw-text signatures with the tokenizer inside are task.export's).
    if family == "classifier":
        task = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
        task.fit(TEXTS, LABELS, epochs=1, batch_size=4, verbose=0)
    else:
        task = build(tasks.Embedder, spec)
    packed = task.preprocessor(tf.constant(TEXTS[:3]))
    tf.saved_model.save(task, str(tmp_path / "saved"))
    serving = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"]
    outputs = serving(**{name: tf.cast(value, tf.int32) for name, value in packed.items()})
    expected = task.head(packed, training=False)
    expected = expected if isinstance(expected, dict) else {"output_0": expected}
    assert sorted(outputs) == sorted(expected)
    for name, want in expected.items():
        np.testing.assert_allclose(np.asarray(outputs[name]), np.asarray(want), atol=1e-5, err_msg=name)


def test_a_packed_dataset_with_an_unknown_label_stops_naming_it(spec):
    """`dataset.map(task.preprocessor)` maps a label the model does not know to -1: fit met it in
    the loss as "Received a label value of -1 which is outside the valid range" (a NaN loss on a
    GPU). It stops on the label now, naming the model's labels, for a classifier and a tagger."""
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    rows = tf.data.Dataset.from_tensor_slices((["good", "bad"], ["pos", "neutral"])).batch(2)
    unknown = "y: a label the model does not know .*its labels are neg, pos"
    with pytest.raises(tf.errors.InvalidArgumentError, match=unknown):
        classifier.fit(rows.map(classifier.preprocessor), epochs=1, verbose=0)
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-PER", "I-PER"])
    words = tf.data.Dataset.from_tensor_slices((tf.ragged.constant([["john", "runs"], ["mary", "sleeps"]]),
                                                tf.ragged.constant([["B-PER", "O"], ["B-XXX", "O"]])))
    with pytest.raises(tf.errors.InvalidArgumentError, match="y: a label the model does not know"):
        tagger.fit(words.map(tagger.preprocessor), epochs=1, verbose=0)
    known = tf.data.Dataset.from_tensor_slices((["good", "bad"], ["pos", "neg"])).batch(2)
    assert np.isfinite(classifier.fit(known.map(classifier.preprocessor), epochs=1, verbose=0).history["loss"]).all()


def test_predict_rows_reads_what_predict_reads_and_names_what_it_cannot(spec):
    """`predict_rows` takes its family's rows as `predict` takes them (bytes decoded, a multiple-choice
    row `(context, [endings])`), and an item that is no text is refused by its index, not met as an
    AttributeError deep inside; one string is not a list of its characters."""
    classifier = build(tasks.TextClassifier, spec, labels=["neg", "pos"])
    row = classifier.predict_rows([b"good film", "bad film"])[0]
    assert row["text"] == "good film"
    assert row["probabilities"] == classifier.predict_rows(["good film"])[0]["probabilities"]
    choices = build(tasks.MultipleChoice, spec, num_choices=2)
    given = choices.predict_rows([("he opens the door.", ["he walks in.", "paris."])])[0]
    as_text = choices.predict_rows(["he opens the door. ||| he walks in. ||| paris."])[0]
    assert given["endings"] == ["he walks in.", "paris."] and given["probabilities"] == as_text["probabilities"]
    np.testing.assert_allclose(given["probabilities"], choices.predict(
        (["he opens the door."], [["he walks in.", "paris."]]))[0], atol=1e-6)
    tagger = build(tasks.TokenClassifier, spec, labels=["O", "B-PER", "I-PER"])
    embedder = build(tasks.Embedder, spec)
    for task in (classifier, choices, tagger, embedder):
        with pytest.raises(tasks.TaskInputError, match=r"items: one text, not a list of them"):
            task.predict_rows("good film")
        with pytest.raises(tasks.TaskInputError, match=r"items\[1\] \('None'\): None, not a text"):
            task.predict_rows(["good film", None])
    with pytest.raises(tasks.TaskInputError, match=r"items\[0\] \('5'\): an int, not a text"):
        embedder.predict_rows([5])
    # a NER model's entities point into the text as given: a pair joined into one would not be it
    with pytest.raises(tasks.TaskInputError, match=r"items\[1\] .*a \(text, text_b\) pair, but a NER model tags"):
        tagger.predict_rows(["john smith", ("john lives", "in paris")])
    assert tagger.predict_rows([["john", "smith"]])[0]["words"] == ["john", "smith"]
    with pytest.raises(tasks.TaskInputError, match=r"items\[0\]: bytes that are not UTF-8"):
        classifier.predict_rows(["café".encode("cp1252")])
    with pytest.raises(tasks.TaskInputError, match=r"items\[0\] .*a SWAG model reads a context and its endings"):
        choices.predict_rows([("a", "b ||| c", "d")])


def test_span_qa_reads_numpy_answers_and_names_a_bad_start(spec):
    """Answers as pandas / numpy give them (numpy integer starts, columnar arrays, empty arrays for
    no answer) train as Python's do; a start that is no whole number, or below -1, is refused by
    its row; two lists of two texts read two ways and are refused, as for every text pair."""
    options = dict(seq_length=64, max_query_length=16, stride=16, version_2=True)
    questions = ["who lives in paris?", "what is the capital of france?"]
    paris = CONTEXT.index("paris. the film")
    plain = [{"text": "john smith", "answer_start": 0}, {"text": "paris", "answer_start": paris}]
    expected = losses(build(tasks.SpanQA, spec, **options).fit(
        (questions, [CONTEXT] * 2), plain, batch_size=2, epochs=2, shuffle=False, verbose=0))
    for answers in ([{"text": "john smith", "answer_start": np.int64(0)},
                     {"text": b"paris", "answer_start": np.int32(paris)}],
                    [{"text": np.array(["john smith"]), "answer_start": np.array([0])},
                     {"text": ["paris"], "answer_start": [str(paris)]}]):
        got = losses(build(tasks.SpanQA, spec, **options).fit(
            (questions, [CONTEXT] * 2), answers, batch_size=2, epochs=2, shuffle=False, verbose=0))
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    qa = build(tasks.SpanQA, spec, **options)
    none_as_arrays = [{"text": np.array([], str), "answer_start": np.array([], np.int64)}, plain[1]]
    none_as_lists = [{"text": [], "answer_start": []}, plain[1]]
    assert [e.is_impossible for e in qa._examples((questions, [CONTEXT] * 2), none_as_arrays, training=True)] \
        == [e.is_impossible for e in qa._examples((questions, [CONTEXT] * 2), none_as_lists, training=True)] \
        == [True, False]
    for start, problem in [(None, r"'answer_start' is None; expected a whole number"),
                           ("abc", r"'answer_start' is 'abc'; expected a whole number"),
                           (-3, r"'answer_start' is -3; an offset in the context counts from 0")]:
        with pytest.raises(tasks.TaskInputError, match=r"y\[0\]: the answer's " + problem):
            qa.fit((questions, [CONTEXT] * 2), [{"text": "john smith", "answer_start": start}, plain[1]],
                   epochs=1, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"reads two ways"):
        qa.predict([questions, [CONTEXT] * 2])
    three = questions + ["when did the film begin?"]
    assert [r["answer"] for r in qa.predict([three, [CONTEXT] * 3])] == \
        [r["answer"] for r in qa.predict((three, [CONTEXT] * 3))]
