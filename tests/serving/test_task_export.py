"""A task's `export` serves what its `predict` returns (labels, spans, entities, vectors).

The tiny fine-tuned directories of `export_fixtures` (written by `bert_keras.tasks` `save`)
are loaded with `bert_keras.tasks.load`; their exports (the session `exported_model`
fixture, `serving.exporter.export_saved_model` as `bert-keras export` runs it) must give
the same answers as `predict` on the same raw text. One direct `task.export(...)` checks
that the method writes the version directory it returns.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import export_fixtures
from bert_keras import tasks

TEXTS = ["I loved this film.", "The battery died, it was terrible.", "John Smith lives in Paris.",
         "Zoë moved to 東京 when the oil crisis began."]
CONTEXT = ("John Smith lives in New York. The capital of France is Paris. The oil crisis began "
           "in October 1973, when he moved.")
QUESTIONS = ["Who lives in New York?", "What is the capital of France?", "When did the crisis begin?",
             "What color is the dog?"]


def serve(exported_model, kind, **inputs):
    base_path, name, version = exported_model(kind)
    signature = tf.saved_model.load(os.path.join(base_path, name, str(version))).signatures[
        "serving_default"]
    return {k: v.numpy() for k, v in signature(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def test_pair_classification_export_equals_predict(finetuned_dir, exported_model):
    task = tasks.load(finetuned_dir("classification"))
    pairs = (TEXTS, TEXTS[1:] + TEXTS[:1])
    probabilities = task.predict(pairs)
    served = serve(exported_model, "classification", text=pairs[0], text_b=pairs[1])
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    assert [label.decode() for label in served["label"]] == task.predict_labels(pairs)


def test_regression_export_equals_predict(finetuned_dir, exported_model):
    task = tasks.load(finetuned_dir("regression"))
    np.testing.assert_allclose(serve(exported_model, "regression", text=TEXTS)["score"],
                               task.predict(TEXTS), atol=1e-5)


def test_ner_export_entities_equal_predict(finetuned_dir, exported_model):
    task = tasks.load(finetuned_dir("ner"))
    predicted = task.predict(TEXTS)
    served = serve(exported_model, "ner", text=TEXTS)
    for row, result in enumerate(predicted):
        count = int(served["num_entities"][row])
        got = [(served["entity_text"][row, i].decode(), served["entity_label"][row, i].decode(),
                int(served["start_char"][row, i]), int(served["end_char"][row, i])) for i in range(count)]
        assert got == [(e["text"], e["type"], e["start_char"], e["end_char"]) for e in result["entities"]]


def test_squad_v2_export_spans_equal_predict(finetuned_dir, exported_model):
    task = tasks.load(finetuned_dir("squad"))
    predicted = task.predict((QUESTIONS, [CONTEXT] * len(QUESTIONS)))
    served = serve(exported_model, "squad", question=QUESTIONS, context=[CONTEXT] * len(QUESTIONS))
    assert [a.decode() for a in served["answer"]] == [r["answer"] for r in predicted]
    assert served["has_answer"].tolist() == [r["has_answer"] for r in predicted]
    assert served["start_char"].tolist() == [r["start_char"] for r in predicted]
    assert served["end_char"].tolist() == [r["end_char"] for r in predicted]


def test_multiple_choice_export_equals_predict(finetuned_dir, exported_model):
    task = tasks.load(finetuned_dir("multiple_choice"))
    endings = [["He sits down.", "He eats the window.", "He flies.", "He sings."]] * 2
    contexts = ["He enters the room.", "The woman picks up the ball."]
    probabilities = task.predict((contexts, endings))
    served = serve(exported_model, "multiple_choice", context=contexts, endings=endings)
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    assert served["choice"].tolist() == probabilities.argmax(-1).tolist()


@pytest.mark.parametrize("kind", ["classification", "regression", "ner", "squad", "multiple_choice", "embedding"])
def test_every_signature_answers_a_batch_of_no_rows_with_no_rows(exported_model, kind):
    """TF Serving runs the graph on an empty batch (the embedded server refuses one before it): each
    signature answers with outputs of 0 rows, not an error inside the graph."""
    base_path, name, version = exported_model(kind)
    for signature_name, signature in tf.saved_model.load(os.path.join(base_path, name, str(version))).signatures.items():
        inputs = {}
        for key, spec in signature.structured_input_signature[1].items():
            shape = [0] + [4 if size is None else size for size in spec.shape[1:]]
            inputs[key] = tf.fill(shape, "") if spec.dtype == tf.string else tf.zeros(shape, spec.dtype)
        outputs = signature(**inputs)
        assert outputs and all(value.shape[0] == 0 for value in outputs.values()), (signature_name, outputs)


@pytest.mark.parametrize("kind", ["classification", "multiple_choice"])
def test_a_token_id_outside_the_vocabulary_fails_its_row_and_is_never_read_from_the_end(exported_model, kind):
    base_path, name, version = exported_model(kind)
    signature = tf.saved_model.load(os.path.join(base_path, name, str(version))).signatures["token_ids"]
    shape = [2, 4, 8] if kind == "multiple_choice" else [2, 8]
    inputs = {key: tf.ones(shape, tf.int32) for key in ("token_ids", "segment_ids", "padding_mask")}
    assert signature(**inputs)["logits"].shape[0] == 2
    for bad in (-5, 10 ** 6):
        ids = tf.tensor_scatter_nd_update(tf.ones(shape, tf.int32), [[1] + [0] * (len(shape) - 1)], [bad])
        # Assert C-escapes its message's quotes; bert-keras serve turns them back (serving.server.errors).
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"token_ids\\'?: ids must be in \[0, \d+\) \(the vocabulary\) at row\] \[1\]"):
            signature(**dict(inputs, token_ids=ids))


@pytest.mark.parametrize("kind", ["classification", "multiple_choice"])
def test_token_inputs_outside_the_models_ranges_fail_naming_the_input(exported_model, kind):
    # A segment id past type_vocab_size failed as "indices[0,1] = 5 is not in [0, 2)" (on a GPU,
    # whose gather reads zeros, it was answered); a padding_mask of 7 was answered, differently
    # from 1; 65 positions failed as "Incompatible shapes: [1,65,32] vs. [1,64,32]", 0 positions
    # as "indices[0,0] = 0 is not in [0, 0)", a segment_ids narrower than token_ids as
    # "Incompatible shapes". And the server printed the vocabulary check's Assert text raw
    # ("[input \\'token_ids\\': ids must be in [0, 127) ... at row] [0]").
    from serving.server import InferenceEngine, ModelSource
    from serving.server.errors import ServingError

    base_path, name, _ = exported_model(kind)
    lead = [1, 4] if kind == "multiple_choice" else [1]
    good = {key: np.ones(lead + [8], np.int32) for key in ("token_ids", "segment_ids", "padding_mask")}
    row = (0,) * len(lead)

    def with_value(key, position, value):
        array = good[key].copy()
        array[row + (position,)] = value
        return dict(good, **{key: array})

    cases = [
        (with_value("token_ids", 1, 10 ** 6), "input 'token_ids': ids must be in [0, 127) (the vocabulary) at row 0"),
        (with_value("segment_ids", 1, 5),
         "input 'segment_ids': values must be in [0, 2) (the model's type_vocab_size) at row 0"),
        (with_value("padding_mask", 1, 7), "input 'padding_mask': values must be 0 (padding) or 1 (a token) at row 0"),
        ({key: np.ones(lead + [65], np.int32) for key in good},
         "input 'token_ids': the sequence length (last dimension) must be 1 to 64 (the model's max_position_embeddings)"),
        ({key: np.ones(lead + [0], np.int32) for key in good},
         "input 'token_ids': the sequence length (last dimension) must be 1 to 64 (the model's max_position_embeddings)"),
        (dict(good, segment_ids=np.ones(lead + [7], np.int32)), "input 'segment_ids' must have the shape of input 'token_ids'"),
    ]
    engine = InferenceEngine([ModelSource(name, os.path.join(base_path, name))], poll_interval_s=0)
    engine.start()
    try:
        assert engine.predict_arrays(name, signature_name="token_ids", inputs=good)[2]["logits"].shape[0] == 1
        for inputs, message in cases:
            with pytest.raises(ServingError) as error:
                engine.predict_arrays(name, signature_name="token_ids", inputs=inputs)
            assert error.value.code == "INVALID_ARGUMENT" and error.value.message.endswith(f"'token_ids': {message}")
    finally:
        engine.stop(5)


@pytest.mark.slow
def test_task_export_writes_the_version_it_returns_and_serves_predict(tmp_path):
    spec = export_fixtures.make_encoder_spec(str(tmp_path / "encoder"))
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32, normalize=True)
    path = embedder.export(str(tmp_path / "models"), "vectors", warmup_requests=0)
    assert path == os.path.join(str(tmp_path / "models"), "vectors", "1")
    signature = tf.saved_model.load(path).signatures["serving_default"]
    served = signature(text=tf.constant(TEXTS))["embedding"].numpy()
    np.testing.assert_allclose(served, embedder.predict(TEXTS), atol=1e-5)
    # Keras' one-argument call: the path is the served model's directory, the next version goes in it.
    again = embedder.export(str(tmp_path / "models" / "vectors"), warmup_requests=0, check=False)
    assert again == os.path.join(str(tmp_path / "models"), "vectors", "2")


def test_bm25_embedder_at_a_pooling_layer_exports_what_predict_returns(tmp_path):
    # The IDF table (a non-trainable weight of the head) and the pooled state (here 0: the
    # embeddings output) travel into the graph: the served vectors are predict's.
    spec = export_fixtures.make_encoder_spec(str(tmp_path / "encoder"))
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32, pooling="bm25", pooling_layer=0,
                                              normalize=True)
    embedder.fit_idf(["the film was good", "the city of paris", "the dog sat down", "new york is a city"])
    texts = TEXTS + ["the the the film, the film"]
    path = embedder.export(str(tmp_path / "models"), "bm25", warmup_requests=0, check=False)
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(served["embedding"].numpy(), embedder.predict(texts), atol=1e-6)
    with open(os.path.join(path, "assets.extra", "model_card.json"), encoding="utf-8") as f:
        card = f.read()
    assert '"pooling": "bm25"' in card and '"pooling_layer": 0' in card
