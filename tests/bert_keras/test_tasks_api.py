"""`bert_keras.tasks` on raw text: fit / evaluate / predict / save / load, and bad input.

Tiny random encoders (1 layer, H=32, the 150-token vocabulary of
`export_fixtures`): these check the plumbing (shapes, label order, round trips,
error messages), not accuracy; the real-model checks are in test_tasks_minilm.py.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks
from bert_keras.checkpoints.errors import CheckpointFormatError

PAIRS = (["i loved this film.", "the battery died.", "it is a film.", "good film.", "bad film.",
          "a city film."],
         ["the actors were great.", "it was terrible.", "it has actors.", "great.", "terrible.", "paris."])
PAIR_LABELS = ["pos", "neg", "neutral", "pos", "neg", "neutral"]
CONTEXT = "john smith lives in paris. the capital of france is paris. the film began when he moved."


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return export_fixtures.make_encoder_spec(str(tmp_path_factory.mktemp("tiny")))


def small(cls, spec, **options):
    return cls.from_pretrained(spec, seq_length=options.pop("seq_length", 32), learning_rate=1e-3,
                               **options)


def reloaded(task, tmp_path):
    path = task.save(str(tmp_path / "saved"))
    return tasks.load(path)


# -- round trips (save -> load -> predict equal to 1e-5) -------------------------------


def test_pair_classification_predicts_probabilities_in_label_order_and_round_trips(spec, tmp_path):
    classifier = small(tasks.TextClassifier, spec, labels=["neg", "neutral", "pos"], text_pair=True)
    history = classifier.fit(PAIRS, PAIR_LABELS, epochs=2, batch_size=4, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    probabilities = classifier.predict(PAIRS)
    assert probabilities.shape == (6, 3) and np.allclose(probabilities.sum(-1), 1, atol=1e-5)
    # The columns follow `labels`: the argmax names agree with predict_labels.
    assert classifier.predict_labels(PAIRS) == [classifier.labels[i] for i in probabilities.argmax(-1)]
    metrics = classifier.score(PAIRS, PAIR_LABELS)
    assert set(metrics) == {"accuracy", "macro_f1", "matthews_corrcoef", "num_examples"}
    assert metrics["num_examples"] == 6
    accuracy = np.mean(probabilities.argmax(-1) == [["neg", "neutral", "pos"].index(l) for l in PAIR_LABELS])
    assert metrics["accuracy"] == pytest.approx(accuracy)
    loaded = reloaded(classifier, tmp_path)
    assert isinstance(loaded, tasks.TextClassifier) and loaded.labels == ["neg", "neutral", "pos"]
    assert loaded.text_pair is True
    np.testing.assert_allclose(loaded.predict(PAIRS), probabilities, atol=1e-5)
    # no label name is a number: ints are ids of labels[i] (Keras' sparse labels); others are refused
    names = [loaded.labels[i] for i in [2, 0, 1, 2, 0, 1]]
    assert loaded.score(PAIRS, [2, 0, 1, 2, 0, 1]) == loaded.score(PAIRS, names)
    with pytest.raises(tasks.TaskInputError, match=r"y\[0\]: label 3 is not one of the model's labels"
                                                   r".*a number is the id of labels\[i\], 0 <= i < 3"):
        loaded.score(PAIRS, [3, 0, 1, 2, 0, 1])


def test_regression_round_trip_and_pearson_spearman(spec, tmp_path):
    regressor = small(tasks.TextClassifier, spec, num_classes=1)
    texts, scores = ["a great film.", "a terrible film.", "a film.", "good.", "bad."], [4.5, 0.5, 2.5, 4, 1]
    regressor.fit(texts, scores, epochs=1, batch_size=2, verbose=0)
    predicted = regressor.predict(texts)
    assert predicted.shape == (5,) and predicted.dtype == np.float32
    metrics = regressor.score(texts, scores)
    assert set(metrics) == {"pearson", "spearman", "num_examples"}
    assert -1 <= metrics["pearson"] <= 1
    loaded = reloaded(regressor, tmp_path)
    assert loaded.kind == "regression" and loaded.labels is None
    np.testing.assert_allclose(loaded.predict(texts), predicted, atol=1e-5)


def test_ner_word_labels_in_entities_with_code_point_offsets_out(spec, tmp_path):
    labels = export_fixtures.CONLL_LABELS
    tagger = small(tasks.TokenClassifier, spec, labels=labels)
    words = [["john", "smith", "lives", "in", "paris"], ["the", "capital", "of", "france"]]
    tags = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["O", "O", "O", "B-LOC"]]
    tagger.fit(words * 4, tags * 4, epochs=1, batch_size=4, verbose=0)
    texts = ["John Smith lives in Paris.", "Zoë moved to 東京, far from New York!"]
    predicted = tagger.predict(texts)
    assert predicted[0]["words"] == ["John", "Smith", "lives", "in", "Paris", "."]
    for text, row in zip(texts, predicted):
        assert len(row["tags"]) == len(row["words"]) and set(row["tags"]) <= set(labels)
        for entity in row["entities"]:
            assert text[entity["start_char"]:entity["end_char"]] == entity["text"]
    metrics = tagger.score(words, tags)
    assert {"precision", "recall", "f1", "num_examples"} == set(metrics)
    loaded = reloaded(tagger, tmp_path)
    assert loaded.predict(texts) == predicted


def test_ner_a_word_of_control_characters_is_one_unk_that_keeps_its_tag(spec):
    # pipelines.datasets.conll: "A word the tokenizer turns into no piece at all (e.g. only control
    # characters) becomes one [UNK] so every word keeps a label" -- in a word list too, not "x[0][0]:
    # an empty text". A whole text with no token stays refused (test_keras_contract).
    tagger = small(tasks.TokenClassifier, spec, labels=export_fixtures.CONLL_LABELS)
    words, tags = [["\x01", "paris"], ["john", "\x01\x02"]], [["B-LOC", "I-LOC"], ["B-PER", "O"]]
    tagger.fit(words * 2, tags * 2, epochs=1, batch_size=4, verbose=0)
    assert [len(row["tags"]) for row in tagger.predict(words)] == [2, 2]
    assert tagger.score(words, tags)["num_examples"] == 2


def test_squad_v2_with_null_answers_round_trips(spec, tmp_path):
    qa = small(tasks.SpanQA, spec, seq_length=64, version_2=True, stride=16, max_query_length=16)
    questions = ["who lives in paris?", "what is the capital of spain?", "when did the film begin?"]
    answers = [{"text": "john smith", "answer_start": 0}, None,
               {"text": "when he moved", "answer_start": CONTEXT.index("when he moved")}]
    qa.fit((questions * 2, [CONTEXT] * 6), answers * 2, epochs=1, batch_size=4, verbose=0)
    predicted = qa.predict((questions, [CONTEXT] * 3))
    for row in predicted:
        assert row["has_answer"] == bool(row["answer"])
        if row["has_answer"]:
            assert CONTEXT[row["start_char"]:row["end_char"]] == row["answer"]
        else:
            assert (row["start_char"], row["end_char"]) == (-1, -1)
        assert isinstance(row["null_odds"], float) and row["nbest"]
    metrics = qa.score((questions, [CONTEXT] * 3), answers)
    assert metrics["HasAns_total"] == 2 and metrics["NoAns_total"] == 1 and metrics["num_examples"] == 3
    loaded = reloaded(qa, tmp_path)
    assert loaded.settings["stride"] == 16 and loaded.settings["version_2"]
    again = loaded.predict((questions, [CONTEXT] * 3))
    assert [r["answer"] for r in again] == [r["answer"] for r in predicted]
    np.testing.assert_allclose([r["null_odds"] for r in again], [r["null_odds"] for r in predicted],
                               atol=1e-4)


def test_tuned_threshold_gives_the_best_f1_also_when_answering_none_scores_best(spec):
    """Where no answer at all scores best, the official `best_f1_thresh` is its starting 0.0; adopted
    as it was, questions with negative null odds were still answered (F1 below the best reported)."""
    keras.utils.set_random_seed(0)
    qa = small(tasks.SpanQA, spec, seq_length=64, version_2=True, stride=16, max_query_length=16)
    x = (["who lives in paris?", "what is the capital of spain?", "when did the film begin?"], [CONTEXT] * 3)
    unanswerable = [None, None, None]
    odds = [row["null_odds"] for row in qa.predict(x)]
    assert min(odds) < 0  # (the untrained head answers some: the case where 0.0 is wrong)
    tuned = qa.score(x, unanswerable, tune_threshold=True)
    assert (tuned["best_f1"], tuned["best_f1_thresh"]) == (100.0, 0.0)  # the official script's report
    assert qa.null_threshold < min(odds)
    assert qa.score(x, unanswerable)["f1"] == tuned["best_f1"]
    assert not any(row["has_answer"] for row in qa.predict(x))


def test_squad_stride_still_reads_run_squads_name_doc_stride(spec, tmp_path):
    """`stride` is SpanQA's window step, as every family's; calls, settings and task.json files
    that say `doc_stride` (run_squad.py's name, this setting's before) still work."""
    from bert_keras.finetuned_model import FinetunedModelError

    qa = small(tasks.SpanQA, spec, seq_length=64, version_2=True, doc_stride=16, max_query_length=16)
    assert qa.settings["stride"] == 16 and "doc_stride" not in qa.settings
    assert small(tasks.SpanQA, spec, seq_length=64, stride=16, doc_stride=16,
                 max_query_length=16).settings["stride"] == 16  # the same value twice: one setting
    with pytest.raises(tasks.TaskInputError, match=r"stride=32 and doc_stride=16: doc_stride is the earlier name"):
        small(tasks.SpanQA, spec, seq_length=64, stride=32, doc_stride=16)
    assert tasks.SpanQA(qa.head, vocab_file=qa.to_finetuned().vocab_file, seq_length=64,
                        settings={"doc_stride": 16, "max_query_length": 16}).settings["stride"] == 16  # a dict
    with pytest.raises(tasks.TaskInputError, match=r"seq_length 64 must exceed max_query_length \+ 3 \(67\): .*use a "
                                                  r"seq_length of at least 68 \(bert-keras: --seq-length\)"):
        tasks.SpanQA(qa.head, vocab_file=qa.to_finetuned().vocab_file, seq_length=64)  # checked when made
    questions, contexts = ["who lives in paris?"], [CONTEXT]
    predicted = qa.predict((questions, contexts))
    with pytest.raises(tasks.TaskInputError, match=r"windows of its own stride setting \(from_pretrained\(stride=N\)\)"):
        qa.predict((questions, contexts), stride=8)
    saved = qa.save(str(tmp_path / "legacy"))
    path = os.path.join(saved, "task.json")

    def rewrite(edit):
        with open(path) as f:
            info = json.load(f)
        edit(info)
        with open(path, "w") as f:
            json.dump(info, f)

    rewrite(lambda info: info["settings"].update(doc_stride=info["settings"].pop("stride")))
    loaded = tasks.load(saved)  # a task.json written before the rename
    assert loaded.settings["stride"] == 16 and "doc_stride" not in loaded.settings
    assert loaded.to_finetuned().settings["stride"] == 16
    assert [r["answer"] for r in loaded.predict((questions, contexts))] == [r["answer"] for r in predicted]
    assert tasks.SpanQA.from_pretrained(saved, doc_stride=16).settings["stride"] == 16
    rewrite(lambda info: info["settings"].update(stride=32))
    with pytest.raises(FinetunedModelError, match=r"task.json field 'settings': stride=32 and doc_stride=16"):
        tasks.load(saved)
    with open(path, "w") as f:  # format 1: the settings at the top level
        json.dump({"task": "squad/v2.0", "kind": "squad", "seq_length": 64, "vocab": "vocab.txt",
                   "lowercase": True, "doc_stride": 16, "max_query_length": 16}, f)
    assert tasks.load(saved).settings["stride"] == 16


def test_swag_multiple_choice_round_trip(spec, tmp_path):
    from pipelines.datasets.swag import read_swag_csv

    chooser = small(tasks.MultipleChoice, spec)
    examples = read_swag_csv(os.path.join(export_fixtures.DATA, "tasks", "swag_mini.csv"))
    chooser.fit(examples, None, epochs=1, batch_size=2, verbose=0)
    probabilities = chooser.predict(examples)
    assert probabilities.shape == (len(examples), 4)
    assert np.allclose(probabilities.sum(-1), 1, atol=1e-5)
    metrics = chooser.score(examples, [e.label for e in examples])
    assert metrics["num_examples"] == len(examples)
    # (contexts, endings) lists give the same numbers as SwagExamples
    x = ([e.context for e in examples], [[f"{e.start} {end}".strip() for end in e.endings] for e in examples])
    np.testing.assert_allclose(chooser.predict(x), probabilities, atol=1e-6)
    np.testing.assert_allclose(reloaded(chooser, tmp_path).predict(examples), probabilities, atol=1e-5)


def test_embedder_round_trip_and_padding_never_changes_a_vector(spec, tmp_path):
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32, pooling="mean", normalize=True)
    texts = ["a film.", "the capital of france is paris, a city."]
    vectors = embedder.predict(texts)
    assert vectors.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    alone = embedder.predict(texts[:1])  # a batch of one: padded to another width
    np.testing.assert_allclose(alone[0], vectors[0], atol=1e-5)
    loaded = reloaded(embedder, tmp_path)
    assert loaded.settings == {"pooling": "mean", "normalize": True, "pooling_layer": -1, "max_length": None,
                               "stride": None}
    np.testing.assert_allclose(loaded.predict(texts), vectors, atol=1e-5)


# -- inputs: datasets, tokenized dicts, the recipe, compile ----------------------------


def test_a_dataset_of_raw_text_and_label_names_gives_the_same_metrics(spec):
    import tensorflow as tf

    classifier = small(tasks.TextClassifier, spec, labels=["neg", "neutral", "pos"], text_pair=True)
    dataset = tf.data.Dataset.from_tensor_slices(((list(PAIRS[0]), list(PAIRS[1])), PAIR_LABELS))
    classifier.fit(dataset, epochs=1, batch_size=4, verbose=0)
    assert classifier.score(dataset) == classifier.score(PAIRS, PAIR_LABELS)


def test_classes_named_as_json_floats_are_found_by_their_whole_number(spec):
    """A model fine-tuned before JSON's 1.0 was read as the class 1 has classes "1.0" .. "5.0". Its
    own JSONL file, read now, gives y = 1 .. 5: they were taken as ids (1 -> "2.0", silently; 5
    refused), and a CSV's "1" was refused. A whole number now finds its class however it is
    written, in Python and in the tf.data path, and "1.0" finds a class named "1"."""
    import tensorflow as tf

    from bert_keras.tasks.inputs import label_ids

    stars = ["1.0", "2.0", "3.0", "4.0", "5.0"]
    for y in ([1, 2, 5], ["1", "2", "5"], [1.0, 2.0, 5.0], ["1.0", "2.0", "5.0"], np.array([1, 2, 5])):
        assert label_ids(y, stars) == [0, 1, 4]
    assert label_ids(["1.0", 3, "-1.0"], ["-1", "1", "3"]) == [1, 2, 0]
    assert label_ids([0, 1], ["neg", "pos"]) == [0, 1]  # no name is a number: ids
    with pytest.raises(tasks.TaskInputError, match=r"label 6 is not one of the model's labels"):
        label_ids([6], stars)
    classifier = small(tasks.TextClassifier, spec, labels=stars)
    dataset = tf.data.Dataset.from_tensor_slices((["good film.", "bad film.", "a film."], [1, 5, 2]))
    ids = [int(y) for _, y in dataset.map(classifier.preprocessor).as_numpy_iterator()]
    assert ids == [0, 4, 1]
    # the other way in the graph too: "1.0" (a JSON float as text) finds the class "1", as label_ids does
    signed = small(tasks.TextClassifier, spec, labels=["-1", "1", "3"])
    y = ["1.0", " 3.00 ", "-1.0", "+1", "3", "2.0", "1.5"]
    dataset = tf.data.Dataset.from_tensor_slices((["a film."] * len(y), y))
    ids = [int(label) for _, label in dataset.map(signed.preprocessor).as_numpy_iterator()]
    assert ids == [1, 2, 0, 1, 2, -1, -1]
    assert label_ids(y[:5], ["-1", "1", "3"]) == ids[:5]


def test_tokenized_dicts_still_work(spec):
    from pipelines import BertPacker

    classifier = small(tasks.TextClassifier, spec, labels=["a", "b"])
    tokenizer = classifier.tokenizer
    special = tokenizer.special_tokens
    packed = BertPacker(32, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad)(
        (tokenizer.tokenize(["a film.", "the dog."]),))
    x = {k: v.numpy() for k, v in packed.items()}
    classifier.fit(x, ["a", "b"], epochs=1, batch_size=2, verbose=0)
    np.testing.assert_allclose(classifier.predict(x), classifier.predict(["a film.", "the dog."]),
                               atol=1e-5)


def test_the_schedule_ends_at_the_last_step_and_compile_overrides_the_recipe(spec):
    import keras

    classifier = small(tasks.TextClassifier, spec, labels=["neg", "neutral", "pos"], text_pair=True)
    classifier.fit(PAIRS, PAIR_LABELS, epochs=2, batch_size=4, verbose=0)  # 2 steps per epoch
    assert type(classifier.optimizer).__name__ == "BertAdamW"
    schedule = classifier.optimizer._learning_rate  # the WarmupLinearDecay the recipe sized
    assert (schedule.num_train_steps, schedule.num_warmup_steps) == (4, 0)  # 2 epochs x 2; round(0.4)
    optimizer = classifier.optimizer
    classifier.fit(PAIRS, PAIR_LABELS, epochs=1, batch_size=4, verbose=0)  # a second fit: 2 more steps
    assert classifier.optimizer is optimizer and int(optimizer.iterations) == 6  # moments kept
    assert classifier.optimizer._learning_rate.num_train_steps == 6
    # Keras' resume idiom: epochs=5 from initial_epoch=3 runs epochs 4 and 5 (4 steps), and the
    # schedule ends with them.
    history = classifier.fit(PAIRS, PAIR_LABELS, epochs=5, initial_epoch=3, batch_size=4, verbose=0)
    assert len(history.history["loss"]) == 2 and int(optimizer.iterations) == 10
    assert float(optimizer._learning_rate(optimizer.iterations)) == 0.0
    classifier.compile(optimizer=keras.optimizers.SGD(0.01), loss=classifier.default_loss())
    classifier.fit(PAIRS, PAIR_LABELS, epochs=1, batch_size=4, verbose=0)
    assert isinstance(classifier.optimizer, keras.optimizers.SGD)


def test_xla_gets_static_shapes_and_cpu_skips_padding(spec):
    import keras

    classifier = small(tasks.TextClassifier, spec, labels=["neg", "neutral", "pos"], text_pair=True)
    assert not classifier.static_shapes and classifier.encoder.skip_padding  # CPU default: exact skipping
    dataset, steps = classifier._train_dataset(PAIRS, PAIR_LABELS, batch_size=4, shuffle=False, seed=None)
    assert steps == 2 and dataset.element_spec[0]["token_ids"].shape.as_list() == [None, None]
    classifier.compile(optimizer=keras.optimizers.SGD(0.01), loss=classifier.default_loss(), jit_compile=True)
    assert classifier.static_shapes and not classifier.encoder.skip_padding
    dataset, _ = classifier._train_dataset(PAIRS, PAIR_LABELS, batch_size=4, shuffle=False, seed=None)
    assert [x["token_ids"].shape[1] for x, _ in dataset] == [32, 32]  # every batch [B, seq_length]
    history = classifier.fit(PAIRS, PAIR_LABELS, epochs=1, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


# -- bad input: each a clear error naming it --------------------------------------------


def test_bad_input_errors_name_the_problem(spec, tmp_path):
    classifier = small(tasks.TextClassifier, spec, labels=["neg", "pos"])
    with pytest.raises(tasks.TaskInputError, match=r"y\[1\]: label 'meh' is not one of the model's labels"):
        classifier.score(["good", "bad"], ["pos", "meh"])
    with pytest.raises(tasks.TaskInputError, match="x and y differ in length: 2 inputs but 3 labels"):
        classifier.fit(["good", "bad"], ["pos", "neg", "pos"])
    with pytest.raises(tasks.TaskInputError, match="an empty list of texts"):
        classifier.predict([])
    with pytest.raises(tasks.TaskInputError, match="x: expected a list of texts, got one string"):
        classifier.predict("good")
    # bytes that are not UTF-8, named by row, byte and offset, with the code page they read as
    with pytest.raises(tasks.TaskInputError, match=r'x\[1\]: bytes that are not UTF-8: byte 0xe9 at offset 3 '
                       r'\(invalid continuation byte\); decode them first \(data.decode\("cp1252"\)\)'):
        classifier.predict([b"good", "caf\u00e9 au lait".encode("cp1252")])
    with pytest.raises(tasks.TaskInputError, match=r'x\[0\]: bytes that are not UTF-8.*"cp949"'):
        classifier.predict(np.array(["\uc88b\uc544\uc694 \ucd5c\uace0".encode("cp949")]))
    # half of a surrogate pair (text decoded with errors="surrogateescape"): no text TensorFlow can hold
    with pytest.raises(tasks.TaskInputError, match=r"x\[1\]: character 4 is \\udce9, half of a UTF-16 surrogate pair"):
        classifier.predict(["good", b"caf\xe9".decode("utf-8", "surrogateescape")])
    with pytest.raises(tasks.TaskInputError, match=r"x: expected a list of texts, got one string \(a 0-d tensor"):
        classifier.predict(tf.constant("good"))
    with pytest.raises(tasks.TaskInputError, match=r"y \(dataset element 1\): bytes that are not UTF-8: byte 0xff"):
        classifier.evaluate(tf.data.Dataset.from_tensor_slices((["good", "bad"], [b"pos", b"neg\xff"])).batch(2))
    pair = small(tasks.TextClassifier, spec, labels=["neg", "pos"], text_pair=True)
    with pytest.raises(tasks.TaskInputError, match="reads text pairs; pass x as a tuple"):
        pair.predict(["good", "bad"])
    with pytest.raises(tasks.TaskInputError, match="SpanQA reads \\(questions, contexts\\)"):
        small(tasks.SpanQA, spec, seq_length=64, max_query_length=16).predict(["who?"])


def test_directory_and_spec_errors(spec, tmp_path):
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    (not_a_model / "model.keras").write_text("")
    with pytest.raises(tasks.FinetunedModelError, match="not a fine-tuned model directory: no task.json"):
        tasks.load(str(not_a_model))
    with pytest.raises(tasks.FinetunedModelError, match="no such directory"):
        tasks.load(str(tmp_path / "missing"))
    with pytest.raises(CheckpointFormatError, match="no such file or directory"):
        tasks.TextClassifier.from_pretrained(str(tmp_path / "nope.keras"), labels=["a", "b"])

    saved = small(tasks.TextClassifier, spec, labels=["a", "b"]).save(str(tmp_path / "saved"))
    task_json = os.path.join(saved, "task.json")
    info = json.load(open(task_json))
    info["format_version"] = 99
    with open(task_json, "w") as f:
        json.dump(info, f)
    with pytest.raises(tasks.FinetunedModelError, match="format_version 99 is newer than this library"):
        tasks.load(saved)
    with pytest.raises(tasks.TaskInputError, match="holds a classification model, not a TokenClassifier"):
        info["format_version"] = 2
        with open(task_json, "w") as f:
            json.dump(info, f)
        tasks.TokenClassifier.from_pretrained(saved)
    os.remove(os.path.join(saved, "vocab.txt"))
    with pytest.raises(tasks.FinetunedModelError, match="no vocab.txt"):
        tasks.load(saved)


def test_a_one_segment_model_refuses_the_tasks_that_pack_two(tmp_path):
    """A checkpoint with type_vocab_size=1 (one token type) under a pair classifier, SWAG or SQuAD
    failed at the first batch with TensorFlow's "indices[0,5] = 1 is not in [0, 1)" (on a GPU:
    zero segment embeddings, silently); single texts are fine."""
    import dataclasses

    from bert_keras.checkpoints import save_pretrained
    from bert_keras.encoder import BertEncoder

    config = dataclasses.replace(export_fixtures.tiny_config(), type_vocab_size=1)
    spec = save_pretrained(BertEncoder(config), str(tmp_path / "one_segment.keras"),
                           vocab_file=export_fixtures.write_vocab(str(tmp_path / "vocab.txt")))
    for cls, options in ((tasks.TextClassifier, {"labels": ["a", "b"], "text_pair": True}),
                         (tasks.MultipleChoice, {"num_choices": 2}), (tasks.SpanQA, {"max_query_length": 8})):
        with pytest.raises(tasks.TaskInputError, match="type_vocab_size=1: one segment"):
            small(cls, spec, **options)
    single = small(tasks.TextClassifier, spec, labels=["a", "b"])
    assert single.predict(["good film."]).shape == (1, 2)


def test_seq_length_of_a_fine_tuned_directory_is_checked_as_a_new_tasks(spec, tmp_path):
    """`from_pretrained(DIR, seq_length=1000)` of a 64-position model was taken unchecked and
    `predict` failed in the graph ("Incompatible shapes", a raw traceback); `seq_length=0` was
    read as "the default" (DIR's, or 128) on both paths. Both are now the errors a new task gives."""
    saved = small(tasks.TextClassifier, spec, labels=["a", "b"]).save(str(tmp_path / "saved"))
    for source, options in ((saved, {}), (spec, {"labels": ["a", "b"]})):
        with pytest.raises(tasks.TaskInputError, match="seq_length 1000 exceeds the model's 64 positions"):
            tasks.TextClassifier.from_pretrained(source, seq_length=1000, **options)
        with pytest.raises(tasks.TaskInputError, match=r"seq_length must be at least 3 .*got 0"):
            tasks.TextClassifier.from_pretrained(source, seq_length=0, **options)
    assert tasks.TextClassifier.from_pretrained(saved, seq_length=48).seq_length == 48


def test_format_version_1_directories_still_load(spec, tmp_path):
    """Today's `bert-keras finetune` layout (no format_version, `task` spec + `label_file`)."""
    classifier = small(tasks.TextClassifier, spec, labels=["neg", "pos"])
    saved = classifier.save(str(tmp_path / "v1"))
    version_1 = {"task": "csv:/data/train.tsv", "kind": "classification", "labels": ["neg", "pos"],
                 "text_column": "text", "text_b_column": "text_b", "label_column": "label",
                 "seq_length": 32, "vocab": "vocab.txt", "lowercase": True, "init": spec,
                 "train_steps": 3, "batch_size": 8, "learning_rate": 2e-5, "epochs": 3,
                 "label_file": "labels.txt", "regression": False}
    with open(os.path.join(saved, "task.json"), "w") as f:
        json.dump(version_1, f)
    loaded = tasks.load(saved)
    assert loaded.labels == ["neg", "pos"] and loaded.to_finetuned().training["task"] == "csv:/data/train.tsv"
    np.testing.assert_allclose(loaded.predict(["good"]), classifier.predict(["good"]), atol=1e-5)


def test_save_replaces_a_model_only_when_asked_and_never_deletes_user_files(spec, tmp_path):
    from bert_keras.finetuned_model import DirectoryInUseError

    target = str(tmp_path / "model")
    small(tasks.TextClassifier, spec, labels=["neg", "pos"]).save(target)
    regressor = small(tasks.TextClassifier, spec, num_classes=1)
    with pytest.raises(DirectoryInUseError, match="already holds a fine-tuned model; pass overwrite=True"):
        regressor.save(target)
    assert tasks.load(target).labels == ["neg", "pos"]  # untouched
    regressor.save(target, overwrite=True)
    assert sorted(os.listdir(target)) == ["model.keras", "task.json", "vocab.txt"]  # no stale labels.txt
    assert os.listdir(tmp_path) == ["model"]
    # a directory of the user's own files (the training CSV, notes) is never emptied
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "train.csv").write_text("text,label\na,pos\n")
    with pytest.raises(DirectoryInUseError, match="train.csv"):
        regressor.save(str(mine), overwrite=True)
    assert os.listdir(mine) == ["train.csv"]


# -- strategies --------------------------------------------------------------------------

# A script's start on two logical CPUs: a tiny encoder `spec` without dropout (its masks differ
# when a batch is split across replicas) and with one fixed init, so that two replicas train
# exactly as one device does (gradients all-reduced, the loss averaged over the global batch).
_MIRRORED_SETUP = textwrap.dedent("""
    import dataclasses, json, os, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import export_fixtures
    from bert_keras import tasks
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.encoder import BertEncoder

    keras.utils.set_random_seed(0)
    config = dataclasses.replace(export_fixtures.tiny_config(), hidden_dropout=0.0, attention_dropout=0.0,
                                 initializer_range=0.02)
    spec = os.path.join(sys.argv[2], "encoder.keras")
    save_pretrained(BertEncoder(config), spec,
                    vocab_file=export_fixtures.write_vocab(os.path.join(sys.argv[2], "vocab-source.txt")))
""")


def _run_mirrored(script, tmp_path):
    """The RESULT dict a `_MIRRORED_SETUP + script` run prints, in a fresh process."""
    fixtures = os.path.join(os.path.dirname(os.path.dirname(__file__)), "serving")
    run = subprocess.run([sys.executable, "-c", _MIRRORED_SETUP + script, fixtures, str(tmp_path)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


_MIRRORED = textwrap.dedent("""
    texts = ["good film.", "bad film.", "great.", "terrible.", "a good one.", "so bad."] * 4
    labels = ["pos", "neg", "pos", "neg", "pos", "neg"] * 4

    def train(strategy):
        keras.utils.set_random_seed(1)
        with strategy.scope():
            classifier = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=16,
                                                              learning_rate=1e-3, dropout=0.0)
        # 3 validation texts: a last batch two replicas cannot split evenly (Keras' test loop fails on it)
        history = classifier.fit(texts, labels, epochs=3, batch_size=8, shuffle=False, verbose=0,
                                 validation_data=(texts[:3], labels[:3]))
        return classifier, history.history

    one, one_history = train(tf.distribute.get_strategy())
    two, two_history = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    one_loss, two_loss = one_history["loss"], two_history["loss"]
    packed = tf.data.Dataset.from_tensor_slices((texts[:3], labels[:3])).batch(3).map(two.preprocessor)
    evaluated = [one.evaluate(packed, verbose=0), two.evaluate(packed, verbose=0)]  # Keras' list, 3 rows
    saved = two.save(os.path.join(sys.argv[2], "mirrored"))
    again = tasks.load(saved).predict(texts)
    print("RESULT", json.dumps({
        "replicas": two.distribute_strategy.num_replicas_in_sync,
        "loss_one": one_loss, "loss_two": two_loss,
        "val_one": [one_history[k] for k in ("val_loss", "val_accuracy", "val_f1")],
        "val_two": [two_history[k] for k in ("val_loss", "val_accuracy", "val_f1")],
        "evaluated": evaluated,
        "weights": max(float(np.abs(a - b).max()) for a, b in zip(one.get_weights(), two.get_weights())),
        "moved": max(float(np.abs(a - b).max()) for a, b in zip(one.encoder.get_weights(),
                                                                 keras.saving.load_model(spec).get_weights())),
        "diff": float(np.abs(again - two.predict(texts)).max())}))
""")


@pytest.mark.slow
def test_fit_under_mirrored_strategy_on_two_cpu_devices_matches_one_device(tmp_path):
    result = _run_mirrored(_MIRRORED, tmp_path)
    assert result["replicas"] == 2
    assert np.isfinite(result["loss_two"]).all()
    np.testing.assert_allclose(result["loss_two"], result["loss_one"], rtol=1e-4)
    np.testing.assert_allclose(result["val_two"], result["val_one"], rtol=1e-4)  # validation on 2 replicas too
    np.testing.assert_allclose(result["evaluated"][1], result["evaluated"][0], rtol=1e-4)
    assert result["moved"] > 1e-3  # training changed the weights ...
    assert result["weights"] < 1e-4  # ... identically on one device and on two replicas
    assert result["diff"] < 1e-5


_MIRRORED_PARTIAL_BATCH = textwrap.dedent("""
    context = "john smith lives in paris. the capital of france is paris."
    texts = ["good film.", "bad film.", "great.", "terrible.", "a good one.", "so bad.", "fine.", "awful.", "nice."]
    families = {  # 9 examples in batches of 4: the last batch's one example is on one replica, none on the other
        "classifier": (lambda: tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], **common),
                       texts, ["pos", "neg"] * 4 + ["pos"]),
        "regression": (lambda: tasks.TextClassifier.from_pretrained(spec, num_classes=1, **common),
                       texts, list(np.linspace(0.0, 1.0, 9))),
        "choice": (lambda: tasks.MultipleChoice.from_pretrained(spec, num_choices=2, **common),
                   (texts, [["a film.", "a city."]] * 9), [0, 1] * 4 + [0]),
        "qa": (lambda: tasks.SpanQA.from_pretrained(spec, max_query_length=8, **{**common, "seq_length": 32}),
               (texts, [context] * 9), [{"text": "paris", "answer_start": context.index("paris")}] * 9),
        "tagger": (lambda: tasks.TokenClassifier.from_pretrained(spec, labels=["O", "B-LOC"], **common),
                   [t.split() for t in texts], [(["B-LOC"] + ["O"] * 3)[: len(t.split())] for t in texts]),
    }
    common = dict(seq_length=16, learning_rate=1e-3, dropout=0.0)
    # One MirroredStrategy for all: a second one in the process mixes up the collectives of the first.
    strategies = (tf.distribute.get_strategy(), tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    result = {}
    for name, (make, x, y) in families.items():
        runs = []
        for strategy in strategies:
            keras.utils.set_random_seed(1)
            with strategy.scope():
                task = make()
                task.compile(optimizer=keras.optimizers.SGD(0.1))  # the recipe's clipping hides a halved step
            history = task.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0)
            runs.append((history.history["loss"], task.get_weights()))
        (loss_one, one), (loss_two, two) = runs
        result[name] = {"loss_one": loss_one, "loss_two": loss_two,
                        "weights": max(float(np.abs(a - b).max()) for a, b in zip(one, two))}
    print("RESULT", json.dumps(result))
""")


@pytest.mark.slow
def test_mirrored_strategy_weighs_a_partial_last_batch_as_one_device_does(tmp_path):
    # Keras averaged the replicas' means: the one example of a last batch the replicas split 1 / 0
    # counted as much as the four of a full batch, and two replicas trained differently from one device.
    result = _run_mirrored(_MIRRORED_PARTIAL_BATCH, tmp_path)
    for family, run in result.items():
        np.testing.assert_allclose(run["loss_two"], run["loss_one"], rtol=1e-5, err_msg=family)
        assert run["weights"] < 1e-6, family  # (1e-5 to 0.09 before; the tagger's loss read 0.73 for 0.65)


_MIRRORED_EVALUATE = textwrap.dedent("""
    texts, labels = ["good film.", "bad film.", "great."], ["pos", "neg", "pos"]
    with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
        clf = tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=16, dropout=0.0)
    seen = []
    listen = keras.callbacks.LambdaCallback(on_test_batch_end=lambda i, logs: seen.append(i),
                                            on_test_end=lambda logs: seen.append(sorted(logs)))
    print("RESULT", json.dumps({  # batches of 3 rows: replicas cannot split them evenly
        "plain": clf.evaluate(texts, labels, verbose=0),
        "callbacks": clf.evaluate(texts, labels, verbose=0, callbacks=[listen]), "seen": seen,
        "steps": clf.evaluate(texts + texts[:1], labels + labels[:1], batch_size=3, steps=1, verbose=0)}))
""")


@pytest.mark.slow
def test_evaluate_with_callbacks_or_steps_on_two_replicas_takes_a_batch_they_cannot_split(tmp_path):
    # Only a plain evaluate ran on one device: with callbacks= or steps= Keras' test loop failed
    # with "Inputs to operation AddN of type AddN must have the same size and shape".
    result = _run_mirrored(_MIRRORED_EVALUATE, tmp_path)
    np.testing.assert_allclose(result["callbacks"], result["plain"], rtol=1e-6)
    assert result["seen"] == [0, ["accuracy", "loss"]]
    np.testing.assert_allclose(result["steps"], result["plain"], rtol=1e-6)  # the first batch: the 3 texts


_MIRRORED_ODD_BATCH = textwrap.dedent("""
    texts = ["good film.", "bad film.", "great.", "terrible.", "a good one.", "so bad.", "fine."]
    labels, weights = ["pos", "neg", "pos", "neg", "pos", "neg", "pos"], [1.0, 2.0, 0.0, 1.0, 1.0, 3.0, 1.0]
    words, tags = [t.split() for t in texts], [["O", "B-LOC", "O"][: len(t.split())] for t in texts]
    fits = {  # every first batch splits 2 / 1 (or 4 / 3) over the two replicas
        "batch_size_3": (lambda: tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], **common),
                         lambda task: task.fit(texts, labels, epochs=2, batch_size=3, shuffle=False, verbose=0)),
        "weighted_dataset": (lambda: tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], **common),
                             lambda task: task.fit(tf.data.Dataset.from_tensor_slices((texts, labels, weights)).batch(3),
                                                   epochs=2, verbose=0)),
        "7_examples_batch_32": (lambda: tasks.TextClassifier.from_pretrained(spec, labels=["neg", "pos"], **common),
                                lambda task: task.fit(texts, labels, epochs=2, shuffle=False, verbose=0)),
        "tagger": (lambda: tasks.TokenClassifier.from_pretrained(spec, labels=["O", "B-LOC"], **common),
                   lambda task: task.fit(words, tags, epochs=2, batch_size=3, shuffle=False, verbose=0)),
    }
    common = dict(seq_length=16, learning_rate=1e-3, dropout=0.0)
    strategies = (tf.distribute.get_strategy(), tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    result = {}
    for name, (make, fit) in fits.items():
        runs = []
        for strategy in strategies:
            keras.utils.set_random_seed(1)
            with strategy.scope():
                task = make()
                task.compile(optimizer=keras.optimizers.SGD(0.1))
            try:
                runs.append(fit(task).history["loss"])
            except Exception as error:
                runs.append(f"{type(error).__name__}: {str(error)[:200]}")
        result[name] = runs
    print("RESULT", json.dumps(result))
""")


@pytest.mark.slow
def test_fit_on_two_replicas_starts_on_a_first_batch_they_cannot_split_evenly(tmp_path):
    # Keras 3.15 builds the compiled metrics from the first batch averaged over the replicas
    # (strategy.reduce), which failed with "Inputs to operation AddN of type AddN must have the
    # same size and shape" before the first step whenever the replicas' shares differed in rows.
    result = _run_mirrored(_MIRRORED_ODD_BATCH, tmp_path)
    for name, (one, two) in result.items():
        assert not isinstance(two, str), f"{name}: {two}"
        np.testing.assert_allclose(two, one, rtol=1e-5, err_msg=name)


@pytest.mark.slow
def test_pretrainer_fits_a_corpus_and_resumes_where_it_stopped(tmp_path):
    from bert_keras.config import BertConfig

    vocab = export_fixtures.write_vocab(str(tmp_path / "vocab.txt"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(f"the {w} film was {v} ." for v in ("good", "bad", "great"))
                                  for w in ("new", "city", "paris", "york", "ball", "dog")) + "\n")
    config = BertConfig(vocab_size=len(export_fixtures.TINY_VOCAB), hidden_size=32, num_layers=1,
                        num_heads=2, intermediate_size=37, max_position_embeddings=64)
    pretrainer = tasks.Pretrainer.from_config(config, vocab_file=vocab)
    result = pretrainer.fit(corpus=str(corpus), output_dir=str(tmp_path / "run"), steps=4, batch_size=4,
                            seq_length=32, max_predictions=5, checkpoint_every=2, verbose=0)
    assert result.final_step == 4 and np.isfinite(result.metrics["loss"])
    assert 0 <= result.metrics["nsp_accuracy"] <= 1
    batches = []
    again = tasks.Pretrainer.from_config(config, vocab_file=vocab).fit(
        corpus=str(corpus), output_dir=str(tmp_path / "run"), steps=6, batch_size=4, seq_length=32,
        max_predictions=5, checkpoint_every=2, verbose=0,
        callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batches.append(logs))])
    assert (again.initial_step, again.final_step) == (4, 6)
    assert len(batches) == 2 and "loss" in batches[-1]  # the user's callbacks run on the resumed steps
    with pytest.raises(tasks.TaskInputError, match="corpus=.*no such file"):
        pretrainer.fit(corpus=str(tmp_path / "missing.txt"), output_dir=str(tmp_path / "x"), steps=1,
                       seq_length=32)  # (the default 128 is refused first: the model has 64 positions)


@pytest.mark.slow  # three dynamic-masking fits: the tokenizer is traced for each
def test_pretrainer_fit_into_a_finished_run_of_another_corpus_is_refused(tmp_path):
    """A second `fit(corpus=other)` into the directory of a finished run returned that run
    `already_complete`, its metrics as if just trained, and left the model untrained: `fit` recorded
    no settings in run.json (`bert-keras pretrain` does), so every run looked like the same one."""
    from bert_keras.config import BertConfig
    from bert_keras.training import RunDirectoryError

    vocab = export_fixtures.write_vocab(str(tmp_path / "vocab.txt"))
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("the new film was good .\nthe dog was bad .\n\nthe city was great .\nthe ball .\n")
    second.write_text("the paris film was bad .\nthe york dog was good .\n")
    config = BertConfig(vocab_size=len(export_fixtures.TINY_VOCAB), hidden_size=16, num_layers=1,
                        num_heads=2, intermediate_size=20, max_position_embeddings=32)
    pretrainer = tasks.Pretrainer.from_config(config, vocab_file=vocab)
    run = str(tmp_path / "run")
    settings = dict(output_dir=run, steps=1, batch_size=2, seq_length=16, max_predictions=2, verbose=0)
    assert pretrainer.fit(corpus=str(first), **settings).final_step == 1
    before = pretrainer.encoder.token_embedding.embeddings.numpy().copy()
    with pytest.raises(RunDirectoryError, match="other settings.*text differ"):
        pretrainer.fit(corpus=str(second), **settings)
    np.testing.assert_array_equal(pretrainer.encoder.token_embedding.embeddings.numpy(), before)
    # The same call again is the finished run; more steps continue it (checkpoint_every as given).
    assert pretrainer.fit(corpus=str(first), **settings).already_complete
    assert pretrainer.fit(corpus=str(first), **{**settings, "steps": 2}).final_step == 2


def test_pretrainer_fit_on_a_corpus_refuses_keras_arguments_it_would_ignore(tmp_path):
    from bert_keras.config import BertConfig

    vocab = export_fixtures.write_vocab(str(tmp_path / "vocab.txt"))
    config = BertConfig(vocab_size=len(export_fixtures.TINY_VOCAB), hidden_size=32, num_layers=1,
                        num_heads=2, intermediate_size=37, max_position_embeddings=64)
    pretrainer = tasks.Pretrainer.from_config(config, vocab_file=vocab)
    with pytest.raises(tasks.TaskInputError, match=r"takes callbacks= and verbose=.*not epochs, validation_data"):
        pretrainer.fit(corpus=str(tmp_path / "c.txt"), output_dir=str(tmp_path / "run"), steps=2, epochs=3,
                       validation_data=([1], [1]))
    assert not (tmp_path / "run").exists()
    for call in (lambda: pretrainer.fit(["The cat sat."], verbose=0), lambda: pretrainer.predict(["The cat sat."])):
        with pytest.raises(tasks.TaskInputError, match=r"raw text is read from a corpus file.*fit\(corpus="):
            call()


def test_pretraining_a_one_segment_model_is_refused_before_anything_is_written(tmp_path):
    """Pretraining packs sentence B with segment id 1: a model of type_vocab_size=1 failed at the
    first step with "indices[0,8] = 1 is not in [0, 1)" (a GPU reads zeros instead)."""
    from bert_keras.config import BertConfig

    vocab = export_fixtures.write_vocab(str(tmp_path / "vocab.txt"))
    corpus = tmp_path / "c.txt"
    corpus.write_text("the new film was good .\nthe dog was bad .\n\nthe city was great .\nthe ball .\n")
    config = BertConfig(vocab_size=len(export_fixtures.TINY_VOCAB), hidden_size=16, num_layers=1, num_heads=2,
                        intermediate_size=20, max_position_embeddings=32, type_vocab_size=1)
    settings = dict(steps=2, batch_size=2, seq_length=16, max_predictions=2, verbose=0)
    with pytest.raises(tasks.TaskInputError, match=r"type_vocab_size=1 .*needs 2"):
        tasks.Pretrainer.from_config(config, vocab_file=vocab).fit(
            corpus=str(corpus), output_dir=str(tmp_path / "fit"), **settings)
    with pytest.raises(tasks.TaskInputError, match=r"type_vocab_size=1 .*needs 2"):
        tasks.Pretrainer.pretrain(str(tmp_path / "pretrain"), corpus=str(corpus), vocab_file=vocab,
                                  config=config, strategy="default", **settings)
    assert not (tmp_path / "fit").exists() and not (tmp_path / "pretrain").exists()


def test_pretrainer_fit_trains_under_the_strategy_it_was_built_in(tmp_path):
    """`fit(records=, strategy=mirrored)` on a pretrainer built outside the strategy's scope failed mid-run
    with Keras' 'Need to be inside "with strategy.scope()"'; one built inside it and fitted outside it
    without `strategy=` failed with "Mixing different tf.distribute.Strategy objects"."""
    import tensorflow as tf

    from bert_keras.config import BertConfig
    from bert_keras.training.strategy import is_default_strategy

    sys.path.insert(0, os.path.dirname(__file__))
    from test_training import write_google_tfrecord

    config = BertConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=20,
                        max_position_embeddings=16)
    write_google_tfrecord(str(tmp_path / "p-0.tfrecord"), config.vocab_size, examples=8)
    settings = dict(records=str(tmp_path / "p-*.tfrecord"), steps=2, batch_size=4, seq_length=12, max_predictions=3,
                    checkpoint_every=2, verbose=0)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    outside = tasks.Pretrainer.from_config(config)
    with pytest.raises(tasks.TaskInputError, match=r"built under no strategy.*MirroredStrategy, 1 replica.*scope"):
        outside.fit(output_dir=str(tmp_path / "outside"), strategy=mirrored, **settings)
    with mirrored.scope(), pytest.raises(tasks.TaskInputError, match="built under no strategy"):
        outside.fit(output_dir=str(tmp_path / "outside"), **settings)
    assert not (tmp_path / "outside").exists()
    assert is_default_strategy(outside._training_strategy(None))

    with mirrored.scope():
        inside = tasks.Pretrainer.from_config(config)
    assert inside._training_strategy(None) is mirrored
    with pytest.raises(tasks.TaskInputError, match=r"built under MirroredStrategy.*no distribution"):
        inside._training_strategy(tf.distribute.get_strategy())
    result = inside.fit(output_dir=str(tmp_path / "inside"), **settings)
    assert result.final_step == 2 and np.isfinite(result.metrics["loss"])


def test_raw_text_predict_and_evaluate_know_their_length(spec):
    """Encoded raw text keeps the number of examples, so Keras' loops stop at the last
    batch instead of running into the end of the data ("Your input ran out of data")."""
    import warnings

    classifier = small(tasks.TextClassifier, spec, labels=["neg", "neutral", "pos"], text_pair=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        classifier.predict(PAIRS)
        classifier.score(PAIRS, PAIR_LABELS)
    assert not [w for w in caught if "ran out of data" in str(w.message)]


def test_loading_a_finetuned_directory_draws_no_random_start_and_predicts_the_same(spec, tmp_path,
                                                                                   truncated_normal_draws):
    # Every variable comes from the file, so building the model draws no random start for it.
    classifier = small(tasks.TextClassifier, spec, labels=["neg", "pos"])
    classifier.fit(["good film.", "bad film."] * 4, ["pos", "neg"] * 4, epochs=1, batch_size=4, verbose=0)
    saved = classifier.save(str(tmp_path / "saved"))
    draws = truncated_normal_draws
    draws.clear()
    loaded = tasks.load(saved)
    assert draws == []
    np.testing.assert_array_equal(loaded.predict(["good film.", "a city"]),
                                  classifier.predict(["good film.", "a city"]))
    small(tasks.TextClassifier, spec, labels=["neg", "pos"])  # a new task still draws its start
    assert draws


_MIRRORED_CLIPPED = textwrap.dedent("""
    texts = ["good film.", "bad film.", "great.", "terrible.", "a good one.", "so bad."] * 2
    scores = list(np.linspace(0.0, 5.0, len(texts)))  # losses of ~14: every step is clipped
    weights = np.linspace(0.2, 2.0, len(texts)).astype("float32")

    def train(strategy):
        keras.utils.set_random_seed(1)
        with strategy.scope():
            regressor = tasks.TextClassifier.from_pretrained(spec, num_classes=1, seq_length=16,
                                                             learning_rate=1e-3, dropout=0.0)
        history = regressor.fit(texts, scores, sample_weight=weights, epochs=2, batch_size=4,
                                shuffle=False, verbose=0)
        return regressor, history.history["loss"]

    one, one_loss = train(tf.distribute.get_strategy())
    two, two_loss = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    print("RESULT", json.dumps({
        "loss_one": one_loss, "loss_two": two_loss,
        "weights": max(float(np.abs(a - b).max()) for a, b in zip(one.get_weights(), two.get_weights()))}))
""")


@pytest.mark.slow
def test_mirrored_strategy_clips_the_global_batchs_gradient_as_one_device_does(tmp_path):
    # Keras clips each replica's gradient before summing them: the clipped steps of a
    # regression (large losses) trained differently on two replicas than on one device.
    result = _run_mirrored(_MIRRORED_CLIPPED, tmp_path)
    np.testing.assert_allclose(result["loss_two"], result["loss_one"], rtol=1e-6)
    assert result["weights"] < 1e-6
