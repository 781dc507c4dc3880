"""Keras' contract, written the way a Keras / keras-hub user writes it.

- a bare `compile()` (Keras' way to recompile after changing `trainable`) gives the fine-tuning
  recipe again, as keras-hub's tasks give their own optimizer, never Keras' RMSprop at 1e-3;
- `save(dir)` -> `tasks.load(dir)` keeps the recipe's settings and the optimizer's state, so a
  loaded model continues its run step for step, as a `.keras` file does;
- `.backbone` is the encoder, keras-hub's name;
- one empty text among many gets the model's answer to an empty input, flagged, instead of
  failing the whole `predict` (`fit` still refuses it: a training example with no token is a
  data bug).

Tiny random encoders (`export_fixtures`), dropout off and `shuffle=False`: two runs on the same
data are identical step for step, which is what the tests compare. (Dropout masks come from
seed generators that no Keras format saves, so a loaded model draws other masks.)
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks

TEXTS = ["i loved this film.", "the battery died.", "a great film.", "it was terrible.", "good film.",
         "bad film.", "the actors were great.", "a dull city."]
LABELS = ["pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg"]


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return export_fixtures.make_encoder_spec(str(tmp_path_factory.mktemp("tiny")))


def classifier(spec, learning_rate=1e-3):
    keras.utils.set_random_seed(0)
    return tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32,
                                                learning_rate=learning_rate, dropout=0.0)


def fit(model, epochs=1):
    return np.asarray(model.fit(TEXTS, LABELS, epochs=epochs, batch_size=4, shuffle=False,
                                verbose=0).history["loss"])


def without_dropout(model):
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    return model


def weights(layer):
    return [w.numpy().copy() for w in layer.weights]


def changed(before, after):
    return any(not np.array_equal(a, b) for a, b in zip(before, after))


def test_backbone_is_the_encoder(spec):
    model = classifier(spec)
    assert model.backbone is model.encoder
    assert model.backbone is model.head.encoder and model.backbone.trainable_weights


def test_freeze_then_unfreeze_with_bare_compiles_keeps_the_recipe(spec):
    model = classifier(spec, learning_rate=1e-3)
    fit(model)
    # Keras' idiom: change `trainable`, then compile() again.
    model.backbone.trainable = False
    model.compile()
    assert type(model.optimizer).__name__ == "BertAdamW"  # the recipe, not Keras' RMSprop
    assert model.recipe["learning_rate"] == 1e-3
    encoder, head = weights(model.backbone), weights(model.head.classifier)
    fit(model)
    assert not changed(encoder, weights(model.backbone))  # frozen
    assert changed(head, weights(model.head.classifier))
    assert model.optimizer._learning_rate.peak_learning_rate == 1e-3
    model.backbone.trainable = True
    model.compile()  # Keras would otherwise fail with "Unknown variable" on the new trainables
    encoder = weights(model.backbone)
    fit(model)
    assert changed(encoder, weights(model.backbone))
    assert int(model.optimizer.iterations) == 2  # a fresh optimizer: 2 steps of 4


def test_bare_compile_with_metrics_keeps_the_recipe_and_reports_them(spec):
    model = classifier(spec)
    model.compile(metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")])
    history = model.fit(TEXTS, LABELS, epochs=1, batch_size=4, verbose=0)
    assert "acc" in history.history
    assert type(model.optimizer).__name__ == "BertAdamW"
    assert model.optimizer._learning_rate.num_train_steps == 2  # sized to the fit, as the recipe is


def test_compile_recipe_changes_the_learning_rate_and_a_custom_optimizer_replaces_it(spec):
    model = classifier(spec, learning_rate=1e-3)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
    assert model.recipe is None
    fit(model)
    assert isinstance(model.optimizer, keras.optimizers.SGD)
    model.compile_recipe(learning_rate=5e-4)
    assert model.recipe == {"learning_rate": 5e-4, "warmup_ratio": 0.1, "weight_decay": 0.01}
    fit(model)
    assert type(model.optimizer).__name__ == "BertAdamW"
    assert model.optimizer._learning_rate.peak_learning_rate == 5e-4


@pytest.mark.parametrize("form", ["directory", "keras_file"])
def test_a_saved_model_continues_its_run_step_for_step(spec, tmp_path, form):
    model = without_dropout(classifier(spec, learning_rate=1e-3))  # before the first trace: it bakes the rate in
    fit(model)
    path = str(tmp_path / ("model.keras" if form == "keras_file" else "model"))
    model.save(path)
    loaded = keras.models.load_model(path) if form == "keras_file" else tasks.load(path)
    assert loaded.recipe == {"learning_rate": 1e-3, "warmup_ratio": 0.1, "weight_decay": 0.01}
    expected, got = fit(model), fit(without_dropout(loaded))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert int(loaded.optimizer.iterations) == int(model.optimizer.iterations) == 4
    np.testing.assert_allclose(loaded.predict(TEXTS), model.predict(TEXTS), atol=1e-5)


def test_a_directory_saved_without_the_optimizer_restarts_the_moments(spec, tmp_path):
    model = classifier(spec, learning_rate=1e-3)
    fit(model)
    model.save(str(tmp_path / "with"))
    model.save(str(tmp_path / "without"), include_optimizer=False)
    assert (tmp_path / "with" / "optimizer.npz").is_file()
    assert not (tmp_path / "without" / "optimizer.npz").exists()
    fresh = tasks.load(str(tmp_path / "without"))
    assert fresh.recipe["learning_rate"] == 1e-3
    fit(fresh)
    assert int(fresh.optimizer.iterations) == 2
    # overwriting a directory with a model saved without state removes the stale state
    model.save(str(tmp_path / "with"), overwrite=True, include_optimizer=False)
    assert not (tmp_path / "with" / "optimizer.npz").exists()


def test_an_untrained_model_saves_no_optimizer_state_and_a_loaded_one_predicts_without_reading_it(
        spec, tmp_path):
    model = classifier(spec)
    model.save(str(tmp_path / "untrained"))
    assert not (tmp_path / "untrained" / "optimizer.npz").exists()
    fit(model)
    model.save(str(tmp_path / "trained"))
    (tmp_path / "trained" / "optimizer.npz").write_bytes(b"not an archive")
    loaded = tasks.load(str(tmp_path / "trained"))
    loaded.predict(TEXTS[:2])  # predicting never reads the optimizer state
    with pytest.raises(Exception, match="optimizer.npz: the optimizer state is damaged"):
        fit(loaded)


def test_an_empty_text_gets_the_empty_input_answer_without_failing_its_neighbours(spec):
    model = classifier(spec)
    alone = model.predict(["good film.", "bad film."])
    with pytest.warns(UserWarning, match=r"1 text has no token .*row 1"):
        mixed = model.predict(["good film.", "", "bad film."])
    np.testing.assert_allclose(mixed[[0, 2]], alone, atol=1e-6)
    with pytest.warns(UserWarning, match="3 texts have no token"):
        empties = model.predict(["", " \t", "\u200b"])  # whitespace, format characters: no token either
    np.testing.assert_allclose(empties, np.repeat(mixed[1:2], 3, axis=0), atol=1e-6)
    special = model.tokenizer.special_tokens
    packed = {"token_ids": np.array([[special.cls, special.sep]]), "segment_ids": np.zeros((1, 2), np.int32),
              "padding_mask": np.ones((1, 2), np.int32)}  # [CLS] [SEP]
    np.testing.assert_allclose(mixed[1], tf.nn.softmax(model(packed, training=False))[0], atol=1e-5)
    with pytest.warns(UserWarning, match="1 text has no token"):
        dataset = model.predict(tf.data.Dataset.from_tensor_slices(["good film.", "", "bad film."]).batch(2))
    np.testing.assert_allclose(dataset, mixed, atol=1e-6)
    with pytest.warns(UserWarning, match="1 text has no token"):
        rows = model.predict_rows(["good film.", ""])
    assert "empty" not in rows[0] and rows[1]["empty"] is True and rows[1]["label"] in ("neg", "pos")
    with pytest.raises(tasks.TaskInputError, match=r"x\[1\]: an empty text"):
        model.fit(["good film.", " "], ["pos", "neg"], epochs=1, verbose=0)


def test_a_text_of_combining_marks_only_is_empty_for_an_uncased_model_only(spec, tmp_path, capsys):
    # An uncased tokenizer strips accents (NFD, then drops Mn marks): "\u0301\u0301" reaches it as
    # nothing. The tokenizer decides, so fit, predict, predict_rows, finetune and `bert-keras predict`
    # treat it as "" (issue 40, item 5); a cased model reads the marks ([UNK]), a text like another.
    import json

    from bert_keras.cli.main import main
    from bert_keras.tasks.finetuning import finetune
    from bert_keras.tasks.named_datasets import DatasetSpecError, parse_task

    marks = "\u0301\u0301"
    model = classifier(spec)
    assert model.tokenizer.strip_accents
    with pytest.warns(UserWarning, match=r"1 text has no token .*row 1"):
        mixed = model.predict(["good film.", marks + " \u200b"])
    with pytest.warns(UserWarning, match="1 text has no token"):
        empty = model.predict([""])
    np.testing.assert_allclose(mixed[1], empty[0], atol=1e-6)
    with pytest.warns(UserWarning, match="1 text has no token"):
        rows = model.predict_rows(["good film.", marks])
    assert "empty" not in rows[0] and rows[1]["empty"] is True
    with pytest.warns(UserWarning, match="1 text has no token"):  # a dataset, read by the same rule
        model.predict(tf.data.Dataset.from_tensor_slices(["good film.", marks]).batch(2))
    with pytest.raises(tasks.TaskInputError, match=r"x\[1\]: an empty text \(.*marks the tokenizer strips"):
        model.fit(["good film.", marks], ["pos", "neg"], epochs=1, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"x: element 1 of the dataset is an empty text"):
        model.fit(tf.data.Dataset.from_tensor_slices((["good film.", marks], ["pos", "neg"])).batch(2),
                  epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == 0

    cased = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32, dropout=0.0,
                                                  lowercase=False)
    assert not cased.tokenizer.strip_accents
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no token" warning: the marks are a token ([UNK])
        assert cased.predict([marks]).shape == (1, 2)
        cased.fit(["good film.", marks], ["pos", "neg"], epochs=1, batch_size=2, verbose=0)

    # finetune names the file and line (a file's reader knows no tokenizer yet; the model's decides).
    data = tmp_path / "train.csv"
    data.write_text(f"text,label\ngood film.,pos\n{marks},neg\nbad film.,neg\n", encoding="utf-8")
    with pytest.raises(DatasetSpecError, match=rf"{data}:3: field 'text' is empty for this model"):
        finetune(parse_task(f"csv:{data}"), spec, str(tmp_path / "out"), epochs=1, batch_size=2, seq_length=32,
                 strategy="default", evaluate=False, log=lambda line: None)
    assert not (tmp_path / "out" / "model.keras").exists()

    # `bert-keras predict` flags it as it flags "".
    model.save(str(tmp_path / "saved"))
    with pytest.warns(UserWarning, match=r"1 text has no token .*the first: TEXT argument 2\)") as said:
        assert main(["predict", "--model", str(tmp_path / "saved"), "--json", "good film.", marks]) == 0
    assert len(said) == 1 and "row" not in str(said[0].message)  # the command's words, said once
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [row.get("empty", False) for row in printed] == [False, True]


def test_an_empty_text_in_the_other_families(spec):
    keras.utils.set_random_seed(0)
    tagger = tasks.TokenClassifier.from_pretrained(spec, labels=["O", "B-PER", "I-PER"], seq_length=32)
    with pytest.warns(UserWarning, match="1 text has no token"):
        rows = tagger.predict_rows(["john smith", ""])
    assert rows[1]["words"] == [] and rows[1]["entities"] == [] and rows[1]["empty"] is True
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32)
    with pytest.warns(UserWarning, match="1 text has no token"):
        vectors = embedder.predict(["john smith", ""])
    assert vectors.shape[0] == 2 and np.all(np.isfinite(vectors))


def test_a_pair_with_one_text_left_is_not_empty(spec):
    """A pair was "empty" when only one of its texts was: `predict_rows([("", "a cat"), ...])`
    marked row 0 `"empty": true` and `predict` warned "1 text has no token", though the model read
    `[CLS] [SEP] a cat [SEP]`. A pair is empty only when both of its texts are, for every form of x."""
    keras.utils.set_random_seed(0)
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32)
    pair_classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32,
                                                           text_pair=True)
    pairs = [("", "a cat"), ("good film.", "bad film.")]  # no text_b is empty
    columns = ([a for a, _ in pairs], [b for _, b in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all: no pair is empty
        rows = embedder.predict_rows(pairs)
        embedder.predict(columns)
        pair_classifier.predict(columns)
        pair_classifier.predict(tf.data.Dataset.from_tensor_slices(columns).batch(2))
    assert not any("empty" in row for row in rows)
    with pytest.warns(UserWarning, match=r"1 text has no token .*row 1"):
        rows = embedder.predict_rows([("", "a cat"), (" ", "\u200b")])
    assert [row.get("empty", False) for row in rows] == [False, True]


def test_a_second_fit_runs_the_step_the_first_traced(spec):
    # The recipe's schedule ends at the last step of each fit; a second fit moves that end in a
    # variable the traced step reads, instead of a new schedule that needs a new trace.
    model = classifier(spec, learning_rate=1e-3)
    fit(model)
    step, traced = model.train_function, []
    train_step = model.train_step
    model.train_step = lambda data: traced.append(1) or train_step(data)  # runs only when a step is traced
    fit(model)
    assert model.train_function is step and traced == []
    schedule = model.optimizer._learning_rate
    assert schedule.num_train_steps == int(model.optimizer.iterations) == 4
    assert float(schedule(model.optimizer.iterations)) == 0.0  # the decay ended with the second fit
    assert float(schedule(3)) == pytest.approx(1e-3 / 4)  # (4 - 3) / 4 of the peak: the new end


def test_a_multiple_choice_example_is_empty_only_when_its_context_and_endings_are(spec):
    keras.utils.set_random_seed(0)
    chooser = tasks.MultipleChoice.from_pretrained(spec, num_choices=2, seq_length=32)
    contexts = ["he opens the door.", "", "", "she reads."]
    endings = [["he walks in.", "a city."], ["b", "c"], ["", "\u200b"], ["", " "]]
    with pytest.warns(UserWarning, match=r"1 text has no token .*row 2"):
        probabilities = chooser.predict((contexts, endings))
    assert probabilities.shape == (4, 2) and np.all(np.isfinite(probabilities))
    with pytest.warns(UserWarning, match=r"1 text has no token .*row 1"):
        rows = chooser.predict_rows([("a door.", "in ||| out"), ("", " ||| \u200b")])
    assert [row.get("empty", False) for row in rows] == [False, True]


def test_an_empty_ending_between_two_bars_is_read_as_an_empty_ending(spec):
    """'ctx ||| a ||| ||| c' (what `bert-keras predict` reads) was split at ' ||| ': the empty ending
    and the bar after it became one ending '||| c', and the row was refused for its count."""
    keras.utils.set_random_seed(0)
    chooser = tasks.MultipleChoice.from_pretrained(spec, num_choices=4, seq_length=32)
    expected = chooser.predict((["he opens the door."], [["he walks in.", "", "he flies.", "he sits."]]))
    for item in ["he opens the door. ||| he walks in. ||| ||| he flies. ||| he sits.",
                 ("he opens the door.", "he walks in. ||| ||| he flies. ||| he sits."),
                 "he opens the door.\the walks in.\t\the flies.\the sits."]:
        row, = chooser.predict_rows([item])
        assert row["endings"] == ["he walks in.", "", "he flies.", "he sits."]
        np.testing.assert_allclose(row["probabilities"], expected[0], atol=1e-6)
    row, = chooser.predict_rows([("a door.", "||| in ||| a|||b ||| out")])  # first ending empty; a|||b one text
    assert row["endings"] == ["", "in", "a|||b", "out"]


def test_a_family_setting_is_read_and_an_unknown_one_named(spec):
    tags = ["O", "B-PER", "I-PER"]
    tagger = tasks.TokenClassifier.from_pretrained(spec, labels=tags, seq_length=32, aggregation="first")
    assert tagger.settings["aggregation"] == "first"
    with pytest.raises(tasks.TaskInputError, match="aggregation='average'"):
        tasks.TokenClassifier.from_pretrained(spec, labels=tags, seq_length=32, aggregation="average")
    with pytest.raises(tasks.TaskInputError, match="pooling=: not a setting of a TokenClassifier; its settings: "
                                                   "aggregation, max_length, stride"):
        tasks.TokenClassifier.from_pretrained(spec, labels=tags, seq_length=32, pooling="mean")
    # A TextClassifier named it too (it raised "_build_head() got an unexpected keyword argument")
    with pytest.raises(tasks.TaskInputError, match="pooling=: not a setting of a TextClassifier; its settings: "
                                                   "text_pair, max_length, stride"):
        tasks.TextClassifier.from_pretrained(spec, labels=["a", "b"], seq_length=32, pooling="mean")
    with pytest.raises(tasks.TaskInputError, match="regression=: .*num_classes=1"):
        tasks.TextClassifier.from_pretrained(spec, seq_length=32, regression=True)
    classifier = tasks.TextClassifier.from_pretrained(spec, labels=["a", "b"], seq_length=32, max_length=64,
                                                      window_aggregation="max")
    assert classifier.settings == {"text_pair": False, "max_length": 64, "stride": None,
                                   "window_aggregation": "max", "window_training": "windows"}


def test_a_csv_task_path_expands_the_home_directory(tmp_path, monkeypatch):
    """`--task csv:~/train.csv`: the shell leaves a `~` after `csv:` as typed; it names the home
    directory, as `--init hf:~/...` does."""
    import os

    from bert_keras.tasks.named_datasets import parse_task

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "train.csv").write_text("text,label\ngood film,pos\nbad film,neg\n", encoding="utf-8")
    spec = parse_task("csv:~/train.csv")
    assert spec.train_path == str(tmp_path / "train.csv") and os.path.isfile(spec.train_path)
