"""InferenceEngine on tiny SavedModels: Predict/Classify/Regress/metadata/status, versions, bad inputs, warmup, JSON."""

import os
import shlex
import shutil

import numpy as np
import pytest

import engine_fixtures as ef

import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import (  # noqa: E402
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    input_pb2,
    predict_pb2,
    regression_pb2,
)

from serving.server.engine import BatchingOptions, InferenceEngine, Limits, ModelSource, ServingError  # noqa: E402
from serving.server.errors import from_tf_error, grpc_status, http_status  # noqa: E402
from serving.server.grpc_service import GrpcApi  # noqa: E402
from serving.server.json_codec import serialized_examples  # noqa: E402
from serving.server.rest_service import RestService  # noqa: E402
from serving.server.tensor_proto import ndarray_from_proto, proto_from_ndarray  # noqa: E402


@pytest.fixture
def serve(session_tmp, tmp_path):
    """serve(layout, **source_kwargs / engine kwargs) -> started engine over base tmp/tiny."""
    engines = []

    def start(layout, *, batching=None, limits=Limits(), name="tiny", **source_kwargs):
        base = ef.make_base_path(session_tmp, tmp_path / name, layout)
        engine = InferenceEngine(
            [ModelSource(name, base, **source_kwargs)], batching=batching, limits=limits, poll_interval_s=0
        )
        engine.start()
        engines.append(engine)
        return engine

    yield start
    for engine in engines:
        engine.stop(drain_timeout_s=5)


def texts_array(*texts):
    array = np.empty(len(texts), dtype=object)
    array[:] = [t.encode("utf-8") if isinstance(t, str) else t for t in texts]
    return array


def predict_request(texts, name="tiny", **spec):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    for key, value in spec.items():
        if key == "version":
            request.model_spec.version.value = value
        else:
            setattr(request.model_spec, key, value)
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts_array(*texts)))
    return request


def rest_json(engine, method, path, body=None):
    """The REST adapter's answer (status, JSON payload) for one request to `engine`."""
    import json

    return RestService(engine).handle(method, path, b"" if body is None else json.dumps(body).encode())


def rest_ok(engine, path, body):
    status, payload = rest_json(engine, "POST", f"/v1/models/{path}", body)
    assert status == 200, payload
    return payload


def rest_raises(engine, path, body, status=400):
    got, payload = rest_json(engine, "POST", f"/v1/models/{path}", body)
    assert got == status and set(payload) == {"error"}, (got, payload)
    return payload["error"]


def raises(code, fn, *args, **kwargs):
    with pytest.raises(ServingError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, info.value
    return info.value.message


# ------------------------------------------------------------------ predict


def test_predict_round_trip_and_output_filter(serve):
    engine = serve({1: 1})
    texts = ["hello", "héllo wörld, a longer text"]
    response = GrpcApi(engine).predict(predict_request(texts))
    assert response.model_spec.name == "tiny"
    assert response.model_spec.version.value == 1
    assert response.model_spec.signature_name == "serving_default"
    outputs = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
    assert set(outputs) == {"label", "class_id", "probabilities", "length", "batch_size", "version", "empty"}
    expected = ef.expected_probabilities(texts, 1)
    np.testing.assert_allclose(outputs["probabilities"], expected, rtol=1e-5)
    assert outputs["label"].tolist() == [ef.LABELS[i].encode() for i in expected.argmax(axis=1)]
    assert outputs["length"].tolist() == [5, 26]  # characters, not bytes
    assert response.outputs["probabilities"].dtype == tf.float32.as_datatype_enum

    filtered = GrpcApi(engine).predict(_filtered(texts, ["label", "length"]))
    assert sorted(filtered.outputs) == ["label", "length"]
    message = raises("INVALID_ARGUMENT", GrpcApi(engine).predict, _filtered(texts, ["label", "nope"]))
    assert "nope" in message and "probabilities" in message

    version, signature, arrays = engine.predict_arrays(
        "tiny", signature_name="scale", inputs={"x": np.array([[1, 2, 3]], dtype=np.float32)}
    )
    assert (version, signature) == (1, "scale")
    np.testing.assert_allclose(arrays["y"], [[3.0, 5.0, 7.0]])
    np.testing.assert_allclose(arrays["total"], [6.0])
    # str inputs are accepted and encoded as UTF-8
    _, _, arrays = engine.predict_arrays("tiny", inputs={"text": np.array(["ünï", "b"])})
    assert arrays["length"].tolist() == [3, 1]


def _filtered(texts, names):
    request = predict_request(texts)
    request.output_filter.extend(names)
    return request


def test_signatures_not_found_and_non_batchable(serve):
    engine = serve({1: 1}, batching=BatchingOptions(batch_timeout_micros=1000))
    message = raises("FAILED_PRECONDITION", engine.predict_arrays, "tiny", signature_name="nope", inputs={})
    assert "nope" in message and "serving_default" in message and "scale" in message
    # `count` has a scalar output: no batch dim, so the batcher must not merge it
    _, _, out = engine.predict_arrays("tiny", signature_name="count", inputs={"text": texts_array("a", "b", "c")})
    assert out["rows"] == 3
    _, _, out = engine.predict_arrays(
        "tiny", signature_name="pair", inputs={"text": texts_array("a", "b"), "text_b": texts_array("c", "d")}
    )
    assert out["joined"].tolist() == [b"a|c", b"b|d"]


# ------------------------------------------------------------------ classify / regress


def _example(text):
    return tf.train.Example(
        features=tf.train.Features(feature={"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))})
    )


def test_classify_and_regress(serve):
    engine = serve({1: 1})
    texts = ["good", "a much longer review text here"]
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "tiny"
    request.input.example_list.examples.extend(_example(t) for t in texts)
    # No signature name is serving_default, a predict signature here: refused, as TF Serving refuses it
    # (classifier.cc, GetClassificationSignatureDef), naming the classify signature to use.
    message = raises("INVALID_ARGUMENT", GrpcApi(engine).classify, request)
    assert message.startswith("Expected classification signature method_name to be tensorflow/serving/classify. "
                              "Was: tensorflow/serving/predict") and "['classification']" in message, message
    request.model_spec.signature_name = "classification"
    response = GrpcApi(engine).classify(request)
    assert response.model_spec.signature_name == "classification"
    assert response.model_spec.version.value == 1
    expected = ef.expected_probabilities(texts, 1)
    for row, probs in zip(response.result.classifications, expected):
        assert [c.label for c in row.classes] == list(ef.LABELS)
        np.testing.assert_allclose([c.score for c in row.classes], probs, rtol=1e-5)

    # example_list_with_context: context features merge into each example
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = "classification"
    request.input.example_list_with_context.context.CopyFrom(_example("context text"))
    request.input.example_list_with_context.examples.add()  # no features: takes the context's text
    response = GrpcApi(engine).classify(request)
    np.testing.assert_allclose(
        [c.score for c in response.result.classifications[0].classes], ef.expected_probabilities(["context text"], 1)[0], rtol=1e-5
    )

    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "tiny"
    request.input.example_list.examples.extend(_example(t) for t in texts)
    assert "Was: tensorflow/serving/predict" in raises("INVALID_ARGUMENT", GrpcApi(engine).regress, request)
    request.model_spec.signature_name = "regression"
    response = GrpcApi(engine).regress(request)
    assert response.model_spec.signature_name == "regression"
    assert [r.value for r in response.result.regressions] == [4 + 1.0, len(texts[1]) + 1.0]
    request.model_spec.signature_name = "nope"  # TF Serving: INVALID_ARGUMENT, not FAILED_PRECONDITION
    assert raises("INVALID_ARGUMENT", GrpcApi(engine).regress, request).startswith(
        "No signature was found with the name: nope")

    version, name, results = engine.classify_examples("tiny", signature_name="classification",
                                                      serialized=serialized_examples([{"text": "good"}], None))
    assert (version, name) == (1, "classification") and [label for label, _ in results[0]] == list(ef.LABELS)
    assert engine.regress_examples("tiny", signature_name="regression",
                                   serialized=serialized_examples([{"text": "abc"}], {"other": 1})) == (
        1, "regression", [4.0])

    bad = classification_pb2.ClassificationRequest()
    bad.model_spec.name = "tiny"
    bad.model_spec.signature_name = "serving_default"
    bad.input.example_list.examples.add().CopyFrom(_example("x"))
    assert "tensorflow/serving/classify" in raises("INVALID_ARGUMENT", GrpcApi(engine).classify, bad)
    empty = classification_pb2.ClassificationRequest(input=input_pb2.Input())
    empty.model_spec.name = "tiny"
    raises("INVALID_ARGUMENT", GrpcApi(engine).classify, empty)


# ------------------------------------------------------------------ metadata / status / versions


def test_metadata(serve):
    engine = serve({1: 1})
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "tiny"
    response = GrpcApi(engine).get_model_metadata(request)
    assert response.model_spec.version.value == 1
    packed = response.metadata["signature_def"]
    assert packed.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    sig_map = get_model_metadata_pb2.SignatureDefMap()
    assert packed.Unpack(sig_map)
    default = sig_map.signature_def["serving_default"]
    assert default.method_name == "tensorflow/serving/predict"
    assert default.inputs["text"].dtype == tf.string.as_datatype_enum
    assert [d.size for d in default.outputs["probabilities"].tensor_shape.dim] == [-1, 2]
    assert sig_map.signature_def["classification"].method_name == "tensorflow/serving/classify"
    assert sig_map.signature_def["regression"].method_name == "tensorflow/serving/regress"

    raises("INVALID_ARGUMENT", GrpcApi(engine).get_model_metadata, get_model_metadata_pb2.GetModelMetadataRequest(model_spec={"name": "tiny"}))
    status, body = rest_json(engine, "GET", "/v1/models/tiny/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "tiny", "signature_name": "", "version": "1"}
    assert body["metadata"]["signature_def"]["signature_def"]["scale"]["inputs"]["x"]["dtype"] == "DT_FLOAT"


def test_status_failed_version_and_routing(serve):
    engine = serve({1: 1, 2: 2, 3: "broken"}, version_policy="all")
    assert engine.is_ready()
    status = engine.model_status("tiny")
    assert [(s["version"], s["state"]) for s in status] == [(3, "END"), (2, "AVAILABLE"), (1, "AVAILABLE")]
    assert status[0]["error_code"] != "OK" and "saved_model" in status[0]["error_message"].lower()
    assert status[1]["error_code"] == "OK" and status[1]["error_message"] == ""

    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "tiny"
    request.model_spec.version.value = 2
    (only,) = GrpcApi(engine).get_model_status(request).model_version_status
    assert only.version == 2 and only.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert only.status.error_code == 0
    request.model_spec.version.value = 3
    (failed,) = GrpcApi(engine).get_model_status(request).model_version_status
    assert failed.state == get_model_status_pb2.ModelVersionStatus.END and failed.status.error_code != 0

    # default = the highest AVAILABLE version; the broken one is never routed to
    assert GrpcApi(engine).predict(predict_request(["a"])).model_spec.version.value == 2
    assert GrpcApi(engine).predict(predict_request(["a"], version=1)).model_spec.version.value == 1
    message = raises("NOT_FOUND", GrpcApi(engine).predict, predict_request(["a"], version=3))
    assert "failed to load" in message
    message = raises("NOT_FOUND", GrpcApi(engine).predict, predict_request(["a"], version=7))
    assert "[1, 2]" in message


def test_version_policies_and_labels(serve):
    engine = serve({1: 1, 2: 2, 3: 1}, version_policy="latest", num_versions=2)
    assert sorted(s["version"] for s in engine.model_status("tiny")) == [2, 3]
    raises("NOT_FOUND", GrpcApi(engine).predict, predict_request(["a"], version=1))

    engine = serve({1: 1, 2: 2, 3: 1}, name="spec", version_policy="specific", versions=(1, 3))
    assert sorted(s["version"] for s in engine.model_status("spec")) == [1, 3]
    assert GrpcApi(engine).predict(predict_request(["a"], name="spec")).model_spec.version.value == 3

    # latest 1 with a broken newest version keeps the newest loadable one serving
    engine = serve({1: 1, 2: 2, 3: "broken"}, name="latest1")
    assert [(s["version"], s["state"]) for s in engine.model_status("latest1")] == [(3, "END"), (2, "AVAILABLE")]

    engine = serve({1: 1, 2: 2}, name="labels", version_policy="all", labels={"stable": 1, "canary": 2})
    response = GrpcApi(engine).predict(predict_request(["a"], name="labels", version_label="stable"))
    assert response.model_spec.version.value == 1
    assert tf.make_ndarray(response.outputs["version"]).tolist() == [1]
    _, _, out = engine.predict_arrays("labels", version_label="canary", inputs={"text": texts_array("a")})
    assert out["version"].tolist() == [2]
    message = raises("INVALID_ARGUMENT", GrpcApi(engine).predict, predict_request(["a"], name="labels", version_label="beta"))
    assert "beta" in message and "stable" in message and "canary" in message
    # a label to a version that is not there ("gone": 9) is refused at start: test_server_hostile_parsing
    raises("INVALID_ARGUMENT", engine.predict_arrays, "labels", version=1, version_label="stable", inputs={})
    assert engine.model_status("labels", version_label="canary")[0]["version"] == 2


def test_not_found(serve):
    engine = serve({1: 1})
    message = raises("NOT_FOUND", GrpcApi(engine).predict, predict_request(["a"], name="bert"))
    # Issue 13 #8: a 404 names what was asked for, never the other models served here.
    assert message == "model 'bert' not found"
    assert "tiny" not in raises("NOT_FOUND", engine.model_status, "bert")
    # Issue 13 #8: a request without a ModelSpec is INVALID_ARGUMENT, as in TF Serving
    assert raises("INVALID_ARGUMENT", GrpcApi(engine).predict, predict_pb2.PredictRequest()) == "Missing ModelSpec"
    raises("NOT_FOUND", engine.model_status, "tiny", 5)
    raises("NOT_FOUND", engine.metadata, "tiny", 5)


def test_a_base_path_naming_a_version_itself_says_so(session_tmp, tmp_path):
    ef.make_base_path(session_tmp, tmp_path / "sent", {1: 1})
    engine = InferenceEngine([ModelSource("sent", str(tmp_path / "sent" / "1"))], poll_interval_s=0)
    engine.start()
    try:
        message = raises("NOT_FOUND", engine.model_status, "sent")
        assert f"{tmp_path / 'sent' / '1'} is itself a version directory" in message
        assert f"the directory of the numbered versions, {tmp_path / 'sent'}" in message
    finally:
        engine.stop(5)


def test_a_base_path_one_level_off_or_unexported_names_the_fix(session_tmp, tmp_path):
    """TF Serving says only that no version is there; the usual causes are named with their fix:
    the directory of several models, an export in a directory not named by a number, a fine-tuned
    model that was never exported (each was 'no complete version directory ...')."""
    ef.make_base_path(session_tmp, tmp_path / "models" / "sent", {1: 1})
    os.makedirs(tmp_path / "models" / "notes")
    shutil.copytree(tmp_path / "models" / "sent" / "1", tmp_path / "unnumbered" / "export")
    (tmp_path / "finetuned").mkdir()
    (tmp_path / "finetuned" / "task.json").write_text("{}", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    sources = {name: ModelSource(name, str(tmp_path / name)) for name in ("models", "unnumbered", "finetuned", "empty")}
    engine = InferenceEngine(list(sources.values()), poll_interval_s=0)
    engine.start()
    try:
        message = raises("NOT_FOUND", engine.model_status, "models")
        assert f"{tmp_path / 'models'} holds models, not versions (sent): the base path of one is " \
               f"{tmp_path / 'models' / 'sent'}" in message, message
        message = raises("NOT_FOUND", engine.model_status, "unnumbered")
        assert f"{tmp_path / 'unnumbered' / 'export'} holds a saved_model.pb, but a version directory is named " \
               f"by its version number: rename it {tmp_path / 'unnumbered' / '1'}" in message, message
        message = raises("NOT_FOUND", engine.model_status, "finetuned")
        command = message.split("; export it and serve the export: ", 1)[1].split(" (with a --model-config-file", 1)[0]
        assert message.startswith(f"could not find any versions of model 'finetuned': {tmp_path / 'finetuned'} is a "
                                  "fine-tuned model (task.json), not an export"), message
        assert shlex.split(command) == ["bert-keras", "export", "--model", str(tmp_path / "finetuned"), "--base-path",
                                        "exports", "--model-name", "finetuned", "&&", "bert-keras", "serve",
                                        "--model-base-path", "exports/finetuned"], command
        message = raises("NOT_FOUND", engine.model_status, "empty")
        assert f"no complete version directory with a saved_model.pb under {tmp_path / 'empty'}" in message
        # a version still being written is waited for; once removed, the diagnosis is back
        os.makedirs(tmp_path / "unnumbered" / "7")
        engine.poll_now("unnumbered")
        assert "no complete version directory" in raises("NOT_FOUND", engine.model_status, "unnumbered")
        os.rmdir(tmp_path / "unnumbered" / "7")
        engine.poll_now("unnumbered")
        assert "rename it" in raises("NOT_FOUND", engine.model_status, "unnumbered")
    finally:
        engine.stop(5)


def test_empty_base_path_is_not_ready(session_tmp, tmp_path):
    engine = InferenceEngine([ModelSource("none", str(tmp_path / "missing"))], poll_interval_s=0)
    engine.start()
    try:
        assert not engine.is_ready()
        assert "does not exist" in raises("NOT_FOUND", engine.predict_arrays, "none", inputs={})
        assert "does not exist" in raises("NOT_FOUND", engine.model_status, "none")
        # a version appearing later is picked up by the next poll
        ef.make_base_path(session_tmp, tmp_path / "missing", {4: 1})
        engine.poll_now()
        assert engine.is_ready()
        assert engine.predict_arrays("none", inputs={"text": texts_array("x")})[0] == 4
    finally:
        engine.stop(5)
    raises("UNAVAILABLE", engine.predict_arrays, "none", inputs={"text": texts_array("x")})


# ------------------------------------------------------------------ bad inputs


BAD_INPUTS = [
    # (signature, inputs, code, words in the message)
    ("serving_default", {}, "INVALID_ARGUMENT", ["missing", "'text'"]),
    ("serving_default", {"text": [b"a"], "extra": [b"b"]}, "INVALID_ARGUMENT", ["unknown", "extra"]),
    ("serving_default", {"text": np.array([1.0], np.float32)}, "INVALID_ARGUMENT", ["'text'", "DT_STRING"]),
    ("scale", {"x": np.ones((1, 3), np.int64)}, "INVALID_ARGUMENT", ["'x'", "DT_FLOAT", "int64"]),
    ("serving_default", {"text": np.array([[b"a"]], dtype=object)}, "INVALID_ARGUMENT", ["'text'", "shape [?]", "[1, 1]"]),
    ("scale", {"x": np.ones((2, 4), np.float32)}, "INVALID_ARGUMENT", ["'x'", "[?,3]", "[2, 4]"]),
    ("serving_default", {"text": np.array([], dtype=object)}, "INVALID_ARGUMENT", ["'text'", "empty batch"]),
    ("serving_default", {"text": [b"a"] * 5}, "RESOURCE_EXHAUSTED", ["5 rows", "limit", "4"]),
    ("serving_default", {"text": [b"ok", b"bad \xff\xfe"]}, "INVALID_ARGUMENT", ["'text' row 1", "invalid UTF-8"]),
    ("serving_default", {"text": [b"x" * 300]}, "INVALID_ARGUMENT", ["'text' row 0", "300 bytes", "limit"]),
    ("serving_default", {"text": [b"x" * 150] * 3}, "RESOURCE_EXHAUSTED", ["450 bytes", "limit is 300"]),
    ("pair", {"text": [b"a", b"b"], "text_b": [b"c"]}, "INVALID_ARGUMENT", ["different numbers of rows", "'text_b' has 1"]),
    ("serving_default", {"text": [b"ok", b"FAIL"]}, "INVALID_ARGUMENT", ["input 'text': asked to fail"]),
    ("serving_default", {"text": [7]}, "INVALID_ARGUMENT", ["'text' row 0", "int"]),
]


@pytest.mark.parametrize("batching", [None, BatchingOptions(batch_timeout_micros=500)], ids=["direct", "batched"])
def test_bad_inputs(serve, batching):
    engine = serve(
        {1: 1}, batching=batching,
        limits=Limits(max_batch_size_per_request=4, max_string_bytes=200, max_request_bytes=300),
    )
    for signature, inputs, code, words in BAD_INPUTS:
        inputs = {k: (texts_array(*v) if isinstance(v, list) else v) for k, v in inputs.items()}
        message = raises(code, engine.predict_arrays, "tiny", signature_name=signature, inputs=inputs)
        assert "model 'tiny' version 1 signature" in message, message
        for word in words:
            assert word in message, (word, message)
    # proto dtype mismatch through Predict
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([1.5], np.float32)))
    assert "DT_STRING" in raises("INVALID_ARGUMENT", GrpcApi(engine).predict, request)
    # the engine still answers good requests after all that
    assert engine.predict_arrays("tiny", inputs={"text": texts_array("fine")})[2]["length"].tolist() == [4]


# ------------------------------------------------------------------ texts with no token


@pytest.mark.parametrize("batching", [None, BatchingOptions(batch_timeout_micros=500)], ids=["direct", "batched"])
def test_a_text_with_no_token_is_answered_and_flagged_not_refused(serve, batching):
    """Empty, whitespace-only or control / format characters only: the model answers it (`empty`
    flags it), as a real export does; every limit and the UTF-8 check still refuse what they refused."""
    engine = serve({1: 1}, batching=batching,
                   limits=Limits(max_batch_size_per_request=6, max_string_bytes=200, max_request_bytes=400))
    texts = ["ok", "", " \t\n\u3000", "fine text", "\x01\u200b\x7f"]
    _, _, outputs = engine.predict_arrays("tiny", inputs={"text": texts_array(*texts)})
    np.testing.assert_allclose(outputs["probabilities"], ef.expected_probabilities(texts, 1), rtol=1e-5)
    assert outputs["empty"].tolist() == [False, True, True, False, True]
    _, _, alone = engine.predict_arrays("tiny", inputs={"text": texts_array("ok", "fine text")})
    np.testing.assert_allclose(outputs["probabilities"][[0, 3]], alone["probabilities"], rtol=1e-6)
    response = GrpcApi(engine).predict(predict_request(["", "ok"]))
    assert tf.make_ndarray(response.outputs["empty"]).tolist() == [True, False]
    body = rest_ok(engine, "tiny:predict", {"instances": ["", "ok"]})
    assert [row["empty"] for row in body["predictions"]] == [True, False]
    # a client that does not know `empty` filters it out as any other output
    assert sorted(GrpcApi(engine).predict(_filtered(["", "ok"], ["probabilities"])).outputs) == ["probabilities"]
    for inputs, code, words in [
        ([b"", b"bad \xff\xfe"], "INVALID_ARGUMENT", ["'text' row 1", "invalid UTF-8"]),
        ([b""] * 7, "RESOURCE_EXHAUSTED", ["7 rows", "limit", "6"]),
        ([b"", b" " * 300], "INVALID_ARGUMENT", ["'text' row 1", "300 bytes", "limit"]),
        ([b" " * 150] * 3, "RESOURCE_EXHAUSTED", ["bytes", "limit is 400"]),
    ]:
        message = raises(code, engine.predict_arrays, "tiny", inputs={"text": texts_array(*inputs)})
        for word in words:
            assert word in message, (word, message)


def test_real_exports_serve_a_text_with_no_token_as_predict_answers_it(exported_model, finetuned_dir):
    """A request mixing real texts and texts with no token, through the engine (request checks,
    batching) to the exported models: the real rows get what the export answers for them alone,
    the others what the Python task's `predict` gives for them, and `empty` marks them."""
    import tensorflow_text  # noqa: F401 - the tokenizer's ops, for the in-process SavedModel

    from bert_keras import tasks

    requests = {
        "classification": ({"text": ["I loved this film.", "", "The battery died.", "\u200b"],
                            "text_b": ["The actors were great.", "", "It was terrible.", " \t"]}, [1, 3]),
        "ner": ({"text": ["John Smith lives in New York.", " ", "Zoë moved to Paris.", "\x01\u200b"]}, [1, 3]),
        "embedding": ({"text": ["A cat sat.", "", "The dog moved to Paris."]}, [1]),
    }
    sources = {}
    for kind in requests:
        base_path, name, version = exported_model(kind)
        sources[kind] = (name, os.path.join(base_path, name, str(version)))
    engine = InferenceEngine([ModelSource(name, os.path.dirname(path)) for name, path in sources.values()],
                             batching=BatchingOptions(batch_timeout_micros=500), poll_interval_s=0)
    engine.start()
    try:
        for kind, (inputs, empty_rows) in requests.items():
            name, path = sources[kind]
            _, _, served = engine.predict_arrays(name, inputs={k: texts_array(*v) for k, v in inputs.items()})
            rows = len(next(iter(inputs.values())))
            assert served["empty"].tolist() == [i in empty_rows for i in range(rows)], kind
            real_rows = [i for i in range(rows) if i not in empty_rows]
            alone = tf.saved_model.load(path).signatures["serving_default"](
                **{k: tf.constant([v[i] for i in real_rows]) for k, v in inputs.items()})
            empty_texts = {k: [v[i] for i in empty_rows] for k, v in inputs.items()}
            with pytest.warns(UserWarning, match="no token"):
                if kind == "classification":
                    task = tasks.load(finetuned_dir(kind))
                    expected = task.predict((empty_texts["text"], empty_texts["text_b"]))
                    np.testing.assert_allclose(served["probabilities"][real_rows], alone["probabilities"], atol=1e-6)
                    np.testing.assert_allclose(served["probabilities"][empty_rows], expected, atol=1e-5)
                    assert served["label"][empty_rows].tolist() == [
                        label.encode() for label in task.predict_labels((empty_texts["text"], empty_texts["text_b"]))]
                elif kind == "ner":
                    predicted = tasks.load(finetuned_dir(kind)).predict(empty_texts["text"])
                    assert [r["words"] for r in predicted] == [[]] * len(empty_rows)
                    assert [r["entities"] for r in predicted] == [[]] * len(empty_rows)
                    assert served["num_entities"][empty_rows].tolist() == [0] * len(empty_rows)
                    for j, i in enumerate(real_rows):
                        count = int(alone["num_entities"][j])
                        assert int(served["num_entities"][i]) == count
                        for output in ("entity_text", "entity_label", "start_char", "end_char"):
                            assert served[output][i][:count].tolist() == alone[output][j][:count].numpy().tolist()
                        np.testing.assert_allclose(served["score"][i][:count], alone["score"][j][:count], atol=1e-6)
                else:
                    embedder = tasks.Embedder.from_pretrained(finetuned_dir(kind), seq_length=64, normalize=True)
                    np.testing.assert_allclose(served["embedding"][real_rows], alone["embedding"], atol=1e-6)
                    np.testing.assert_allclose(served["embedding"][empty_rows],
                                               embedder.predict(empty_texts["text"]), atol=1e-5)
    finally:
        engine.stop(drain_timeout_s=5)


# ------------------------------------------------------------------ warmup


def test_warmup_runs_before_available_and_bad_warmup_fails_the_load(serve, session_tmp, tmp_path):
    engine = serve({1: 1})
    servable = engine._registry.acquire("tiny")
    try:
        assert int(servable.loaded.calls.numpy()) == 1  # the warmup request ran at load time
    finally:
        servable.release()

    base = ef.make_base_path(session_tmp, tmp_path / "warm", {1: 1, 2: 2})
    ef.write_warmup(os.path.join(base, "2"), [["fine"], ["FAIL"]])
    engine = InferenceEngine([ModelSource("warm", base, version_policy="all")], poll_interval_s=0)
    engine.start()
    try:
        status = {s["version"]: s for s in engine.model_status("warm")}
        assert status[1]["state"] == "AVAILABLE"
        assert status[2]["state"] == "END" and status[2]["error_code"] == "INVALID_ARGUMENT"
        assert "warmup record 1" in status[2]["error_message"]
        assert "asked to fail" in status[2]["error_message"]
        assert engine.predict_arrays("warm", inputs={"text": texts_array("x")})[0] == 1
    finally:
        engine.stop(5)


# ------------------------------------------------------------------ REST JSON


def test_json_predict_classify_regress(serve):
    engine = serve({1: 1})
    body = rest_ok(engine, "tiny:predict", {"instances": ["hello", {"b64": "aMOpbGxv"}]})  # "héllo"
    rows = body["predictions"]
    assert [r["length"] for r in rows] == [5, 5]
    assert rows[0]["label"] in ef.LABELS
    np.testing.assert_allclose(rows[0]["probabilities"], ef.expected_probabilities(["hello"], 1)[0], rtol=1e-5)

    body = rest_ok(engine, "tiny:predict", {"signature_name": "scale", "inputs": {"x": [[1, 2, 3], [0, 0, 0.5]]}})
    assert body == {"outputs": {"y": [[3.0, 5.0, 7.0], [1.0, 1.0, 2.0]], "total": [6.0, 0.5]}}
    body = rest_ok(engine, "tiny:predict", {"signature_name": "pair", "instances": [{"text": "a", "text_b": "b"}]})
    assert body == {"predictions": ["a|b"]}
    body = rest_ok(engine, "tiny:predict", {"signature_name": "count", "inputs": ["a", "b"]})
    assert body == {"outputs": 2}
    rest_raises(engine, "tiny:predict", {"signature_name": "count", "instances": ["a"]})
    rest_raises(engine, "tiny:predict", {"instances": ["a"], "inputs": ["a"]})
    rest_raises(engine, "tiny:predict", {"signature_name": "scale", "instances": [[1, 2]]})
    rest_raises(engine, "tiny:predict", {"signature_name": "scale", "instances": [[1, 2, "x"]]})
    rest_raises(engine, "tiny:predict", {"instances": [{"b64": "!!"}]})
    rest_raises(engine, "tiny:predict", {"instances": [{"text": "a"}, {"txt": "b"}]})

    body = rest_ok(engine, "tiny:classify", {"signature_name": "classification",
                                             "examples": [{"text": "good"}, {"text": {"b64": "Z29vZA=="}}]})
    assert [[label for label, _ in row] for row in body["results"]] == [list(ef.LABELS)] * 2
    assert body["results"][0] == body["results"][1]
    assert rest_ok(engine, "tiny:regress", {"signature_name": "regression", "context": {"text": "ab"},
                                            "examples": [{}, {"text": "abcd"}]}) == {"results": [3.0, 5.0]}
    status, payload = rest_json(engine, "POST", "/v1/models/tiny:classify", {"examples": [{"text": "good"}]})
    assert status == 400 and "Was: tensorflow/serving/predict" in payload["error"], payload


# ------------------------------------------------------------------ tensors and errors


@pytest.mark.parametrize(
    "array",
    [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([1, -2], dtype=np.int64),
        np.array([[True, False]]),
        np.array([1.5], dtype=np.float16),
        np.array([b"a", "é".encode(), b"\xff"], dtype=object),
        np.array([[b"x", b"y"]], dtype=object),
        np.array(3, dtype=np.int32),
    ],
)
def test_tensor_proto_round_trip_matches_tf(array):
    ours = proto_from_ndarray(array)
    theirs = tf.make_tensor_proto(array)
    np.testing.assert_array_equal(tf.make_ndarray(ours), array)
    assert ours.dtype == theirs.dtype
    got = ndarray_from_proto(theirs)
    assert got.shape == array.shape and got.dtype == array.dtype
    np.testing.assert_array_equal(got, array)


def test_ndarray_from_proto_rejects_malformed():
    proto = tf.make_tensor_proto(np.ones(4, np.float32))
    proto.tensor_shape.dim[0].size = 5
    assert "tensor_content" in raises("INVALID_ARGUMENT", ndarray_from_proto, proto, "x")
    fill = tf.make_tensor_proto([b"x", b"y", b"z"])
    fill.tensor_shape.dim[0].size = 2  # declared 2, sent 3: refused before anything is allocated
    assert "declares 2 values but the TensorProto carries 3" in raises("INVALID_ARGUMENT", ndarray_from_proto, fill, "x")
    fill.tensor_shape.dim[0].size = 5  # TensorFlow's short form: the last value repeats, as TF reads it
    assert ndarray_from_proto(fill, "x").tolist() == tf.make_ndarray(fill).tolist()


def test_status_code_mapping():
    codes = ("INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "FAILED_PRECONDITION", "INTERNAL")
    assert [http_status(c) for c in codes + ("DEADLINE_EXCEEDED",)] == [400, 404, 429, 503, 400, 500, 504]
    import grpc

    assert grpc_status("NOT_FOUND") is grpc.StatusCode.NOT_FOUND
    with pytest.raises(ValueError):
        ServingError("NOPE", "x")
    err = from_tf_error(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating"), "model 'm'")
    assert (err.code, err.message) == ("RESOURCE_EXHAUSTED", "model 'm': OOM when allocating")
    assert from_tf_error(RuntimeError("boom")).code == "INTERNAL"
    # the op's own message survives; TF's graph-execution wrapping does not
    wrapped = (
        "Graph execution error:\n\nDetected at node CheckNumerics defined at (most recent call last):\n"
        '  File "x.py", line 1, in f\n\n'
        "input 'text': invalid UTF-8 : Tensor had NaN values\n"
        "\t [[{{function_node __inference_f_1}}{{node CheckNumerics}}]] [Op:__inference_signature_wrapper_2]"
    )
    err = from_tf_error(tf.errors.InvalidArgumentError(None, None, wrapped))
    assert (err.code, err.message) == ("INVALID_ARGUMENT", "input 'text': invalid UTF-8")


def test_loading_version_answers_unavailable(session_tmp, tmp_path):
    import threading

    from serving.server.model_registry import ModelRegistry

    base = ef.make_base_path(session_tmp, tmp_path / "slow", {1: 1})
    entered, release = threading.Event(), threading.Event()

    def slow_warmup(servable):
        entered.set()
        release.wait(300)  # set by the test once it has seen the version loading

    registry = ModelRegistry([ModelSource("slow", base)], warmup=slow_warmup, poll_interval_s=0)
    loader = threading.Thread(target=registry.start)
    loader.start()
    try:
        assert entered.wait(300)  # a safety net: TensorFlow loads the version first
        assert registry.status("slow")[0].state == "LOADING"
        assert not registry.is_ready()
        assert "still loading" in raises("UNAVAILABLE", registry.acquire, "slow", 1)
        assert "loading: [1]" in raises("UNAVAILABLE", registry.acquire, "slow")
    finally:
        release.set()
        loader.join(300)
    servable = registry.acquire("slow")
    assert servable.version == 1 and servable.state == "AVAILABLE"
    servable.release()
    registry.unload_all()
    assert servable.state == "END" and servable.loaded is None


def test_warmup_is_not_held_to_the_client_request_limits(session_tmp, tmp_path):
    # An export's warmup file holds 8-row requests. Held to --max-rows-per-request 2, every load
    # failed with RESOURCE_EXHAUSTED (warmup record 0 ... has 8 rows) and the model never served.
    base = ef.make_base_path(session_tmp, tmp_path / "limited", {1: 1})
    ef.write_warmup(os.path.join(base, "1"), [["a", "b", "c", "d", "e", "f", "g", "h"]])
    engine = InferenceEngine([ModelSource("limited", base)], limits=Limits(max_batch_size_per_request=2),
                             poll_interval_s=0)
    engine.start()
    try:
        assert [(s["state"], s["error_message"]) for s in engine.model_status("limited")] == [("AVAILABLE", "")]
        servable = engine._registry.acquire("limited")
        try:
            assert int(servable.loaded.calls.numpy()) == 1  # the 8-row warmup request ran
        finally:
            servable.release()
        with pytest.raises(ServingError) as error:  # a client is still held to the limit
            engine.predict_arrays("limited", inputs={"text": texts_array("a", "b", "c")})
        assert error.value.code == "RESOURCE_EXHAUSTED" and "limit per request is 2" in error.value.message
    finally:
        engine.stop(5)


def test_warmup_records_are_padded_to_the_allowed_batch_sizes(session_tmp, tmp_path, monkeypatch):
    # TF Serving replays warmup through its batching session, which pads a 3-row record up to the allowed
    # size 4: the shapes warmed up are those later batches run with. The record ran here with its own 3 rows.
    base = ef.make_base_path(session_tmp, tmp_path / "padded", {1: 1})
    ef.write_warmup(os.path.join(base, "1"), [["a", "b", "c"]])
    seen = []
    runner = InferenceEngine._runner

    def recording(self, servable, signature_name):
        run = runner(self, servable, signature_name)

        def counted(inputs):
            seen.append(len(inputs["text"]))
            return run(inputs)
        return counted

    monkeypatch.setattr(InferenceEngine, "_runner", recording)
    engine = InferenceEngine([ModelSource("padded", base)], poll_interval_s=0, batching=BatchingOptions(
        max_batch_size=8, batch_timeout_micros=0, allowed_batch_sizes=(4, 8)))
    engine.start()
    try:
        assert [(s["state"], s["error_message"]) for s in engine.model_status("padded")] == [("AVAILABLE", "")]
        assert seen == [4]
        assert len(engine.predict_arrays("padded", inputs={"text": texts_array("a", "b", "c")})) == 3
        assert seen == [4, 4]
    finally:
        engine.stop(5)


def test_from_config_file_and_classify_warmup(session_tmp, tmp_path):
    from tensorflow_serving.apis import prediction_log_pb2

    from serving.server.model_config import write_models_config

    base = ef.make_base_path(session_tmp, tmp_path / "models" / "tiny", {1: 1, 2: 2})
    # version 2 warms up with Classify requests; the second lacks the "text" feature
    good, bad = classification_pb2.ClassificationRequest(), classification_pb2.ClassificationRequest()
    good.input.example_list.examples.add().CopyFrom(_example("warm"))
    bad.input.example_list.examples.add()
    for request in (good, bad):  # serving_default is a predict signature: TF Serving's Classify refuses it
        request.model_spec.signature_name = "classification"
    with tf.io.TFRecordWriter(os.path.join(base, "2", "assets.extra", "tf_serving_warmup_requests")) as writer:
        for request in (good, bad):
            log = prediction_log_pb2.PredictionLog(classify_log=prediction_log_pb2.ClassifyLog(request=request))
            writer.write(log.SerializeToString())
    config = tmp_path / "models.config"
    write_models_config(config, [ModelSource("tiny", "models/tiny", version_policy="all", labels={"stable": 1})])
    engine = InferenceEngine.from_config_file(config, poll_interval_s=0)
    engine.start()
    try:
        assert engine.is_ready()
        v2, v1 = engine.model_status("tiny")
        assert v1["state"] == "AVAILABLE" and v2["state"] == "END"
        assert "warmup record 1" in v2["error_message"] and "text" in v2["error_message"]
        assert engine.predict_arrays("tiny", version_label="stable", inputs={"text": texts_array("a")})[0] == 1
    finally:
        engine.stop(5)
