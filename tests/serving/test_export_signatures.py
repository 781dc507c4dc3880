"""Every task kind exports, loads with plain `tf.saved_model.load`, and serves the Python path's answers.

For each kind of `EXPORT_KINDS` (tiny random models from `conftest.py`):
`serving_default` on raw strings gives dense, named outputs equal to
`serving.signatures.<kind>.reference_outputs` (tokenizer + packer + Keras model
+ the task's own Python decoder: `decode_predictions`, `conll` +
`get_entities`): probabilities within 1e-5, labels / texts / offsets equal.
`token_ids` equals the Keras model on the same packed ids; classification and
regression also answer serialized `tf.Example`s through the `classification` /
`regression` signatures, whose method names are TF Serving's Classify / Regress.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from serving.signatures import finetuned_for_export, reference_outputs
from serving.signatures.samples import sample_inputs

from export_fixtures import EXPORT_KINDS, export_options

# Every output of serving_default, with its dtype and rank (batch first).
OUTPUTS = {
    "classification": {"label": ("string", 1), "class_id": ("int64", 1),
                       "probabilities": ("float32", 2), "truncated": ("bool", 1), "empty": ("bool", 1)},
    "regression": {"score": ("float32", 1), "truncated": ("bool", 1), "empty": ("bool", 1)},
    "ner": {"entity_text": ("string", 2), "entity_label": ("string", 2), "start_char": ("int64", 2),
            "end_char": ("int64", 2), "score": ("float32", 2), "num_entities": ("int64", 1),
            "truncated": ("bool", 1), "empty": ("bool", 1)},
    "squad": {"answer": ("string", 1), "start_char": ("int64", 1), "end_char": ("int64", 1),
              "score": ("float32", 1), "has_answer": ("bool", 1), "truncated": ("bool", 1), "empty": ("bool", 1)},
    "multiple_choice": {"choice": ("int64", 1), "probabilities": ("float32", 2), "empty": ("bool", 1)},
    "embedding": {"embedding": ("float32", 2), "truncated": ("bool", 1), "empty": ("bool", 1)},
}


_LOADED = {}


def load(exported):
    """The loaded SavedModel (once per module: loading costs a second or two)."""
    if exported not in _LOADED:
        base_path, name, version = exported
        _LOADED[exported] = tf.saved_model.load(os.path.join(base_path, name, str(version)))
    return _LOADED[exported]


def as_tensors(inputs):
    return {name: tf.constant(values) for name, values in inputs.items()}


@pytest.mark.parametrize("kind", EXPORT_KINDS)
def test_serving_default_matches_the_python_path(kind, finetuned_dir, exported_model):
    source = finetuned_for_export(finetuned_dir(kind), **export_options(kind))
    inputs = sample_inputs(source, count=8)
    outputs = load(exported_model(kind)).signatures["serving_default"](**as_tensors(inputs))
    expected = reference_outputs(source, inputs)

    assert {k: (v.dtype.name, v.shape.rank) for k, v in outputs.items()} == OUTPUTS[kind]
    for name, want in expected.items():
        got = outputs[name].numpy()
        assert got.shape == want.shape and got.shape[0] == 8, name
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
    # The samples really exercise the decoders: entities and answers were found.
    if kind == "ner":
        assert outputs["num_entities"].numpy().sum() > 0
    if kind == "squad":
        assert outputs["has_answer"].numpy().any()


@pytest.mark.parametrize("kind", ["classification", "ner", "squad", "multiple_choice", "embedding"])
def test_token_ids_signature_equals_the_keras_model(kind, finetuned_dir, exported_model):
    from pipelines import BertPacker

    source = finetuned_for_export(finetuned_dir(kind), **export_options(kind))
    tokenizer = source.tokenizer()
    special = tokenizer.special_tokens
    packer = BertPacker(source.seq_length, cls_id=special.cls, sep_id=special.sep,
                        pad_id=special.pad)
    texts = ["John Smith lives in New York.", "A great film!", "Paris"]
    if kind == "multiple_choice":
        x = packer((tokenizer.tokenize(tf.constant([t for t in texts for _ in range(4)])),
                    tokenizer.tokenize(tf.constant(["a", "b", "c", "d"] * 3))))
        x = {k: tf.reshape(v, [3, 4, -1]) for k, v in x.items()}
    else:
        x = packer(tokenizer.tokenize(tf.constant(texts)))
    outputs = load(exported_model(kind)).signatures["token_ids"](**x)
    keras_out = source.model(x, training=False)
    if kind == "squad":
        for name in ("start_logits", "end_logits"):
            np.testing.assert_allclose(outputs[name], keras_out[name], atol=1e-5)
    elif kind == "embedding":
        np.testing.assert_allclose(outputs["embedding"], keras_out["sentence_embedding"], atol=1e-5)
    elif kind == "ner":
        # Per-token logits agree at real tokens; padded positions carry no prediction (the
        # export skips padded tokens in the encoder, so they differ from the Keras model's).
        real = np.asarray(x["padding_mask"]).astype(bool)
        np.testing.assert_allclose(np.asarray(outputs["logits"])[real], np.asarray(keras_out)[real], atol=1e-5)
    else:
        np.testing.assert_allclose(outputs["logits"], keras_out, atol=1e-5)
    if kind == "classification":
        np.testing.assert_array_equal(outputs["class_id"], np.argmax(keras_out, -1))
        np.testing.assert_allclose(outputs["probabilities"], tf.nn.softmax(keras_out), atol=1e-6)


def serialized_examples(rows):
    def feature(text):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))

    return tf.constant([tf.train.Example(features=tf.train.Features(
        feature={k: feature(v) for k, v in row.items()})).SerializeToString() for row in rows])


def method_names(exported):
    from tensorflow.core.protobuf import saved_model_pb2

    base_path, name, version = exported
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(base_path, name, str(version), "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return {k: v.method_name for k, v in saved_model.meta_graphs[0].signature_def.items()
            if not k.startswith("__")}


def test_classify_signature_reads_tf_examples(finetuned_dir, exported_model):
    exported = exported_model("classification")
    assert method_names(exported) == {"serving_default": "tensorflow/serving/predict",
                                      "token_ids": "tensorflow/serving/predict",
                                      "classification": "tensorflow/serving/classify"}
    rows = [{"text": "I loved this film.", "text_b": "The actors were great."},
            {"text": "The battery died.", "text_b": "It was terrible."}]
    loaded = load(exported)
    classified = loaded.signatures["classification"](inputs=serialized_examples(rows))
    predicted = loaded.signatures["serving_default"](
        text=tf.constant([r["text"] for r in rows]), text_b=tf.constant([r["text_b"] for r in rows]))
    assert classified["classes"].numpy().tolist() == [[b"neg", b"neutral", b"pos"]] * 2
    np.testing.assert_allclose(classified["scores"], predicted["probabilities"], atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_b"):
        loaded.signatures["classification"](inputs=serialized_examples([{"text": "no pair"}]))


def test_regress_signature_reads_tf_examples(exported_model):
    exported = exported_model("regression")
    assert method_names(exported)["regression"] == "tensorflow/serving/regress"
    assert "classification" not in method_names(exported)
    loaded = load(exported)
    texts = ["A great film.", "A terrible film."]
    regressed = loaded.signatures["regression"](inputs=serialized_examples([{"text": t} for t in texts]))
    scores = loaded.signatures["serving_default"](text=tf.constant(texts))["score"]
    assert regressed["outputs"].shape == (2,)
    np.testing.assert_allclose(regressed["outputs"], scores, atol=1e-6)


def test_outputs_are_dense_with_known_dtypes(exported_model):
    """TF Serving shows ragged outputs as DT_INVALID (serving#2222): none may be ragged."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import saved_model_pb2

    for kind in EXPORT_KINDS:
        base_path, name, version = exported_model(kind)
        saved_model = saved_model_pb2.SavedModel()
        with open(os.path.join(base_path, name, str(version), "saved_model.pb"), "rb") as f:
            saved_model.ParseFromString(f.read())
        for signature_name, signature in saved_model.meta_graphs[0].signature_def.items():
            if signature_name.startswith("__"):  # __saved_model_init_op: TF's own
                continue
            for tensor_name, info in list(signature.inputs.items()) + list(signature.outputs.items()):
                where = f"{kind} {signature_name} {tensor_name}"
                assert info.dtype != types_pb2.DT_INVALID, where
                assert info.WhichOneof("encoding") == "name", where  # dense, not composite
                assert info.tensor_shape.dim and info.tensor_shape.dim[0].size == -1, where
