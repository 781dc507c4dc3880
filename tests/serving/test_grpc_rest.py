"""The embedded server's gRPC and REST transports, spoken to with the stock TF Serving stubs and raw HTTP.

One tiny SavedModel (tests/serving/engine_fixtures.py: outputs computable with numpy) behind
one `EmbeddedServer` on loopback ports picked by the OS. Every bad request must answer the
status TF Serving answers, with a message naming the problem, and leave the server serving.
"""

import base64
import http.client
import json

import numpy as np
import pytest

import grpc  # noqa: E402

from engine_fixtures import expected_probabilities, write_tiny_model

MAX_ROWS = 8
MAX_BYTES = 4 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from serving.server import InferenceEngine, Limits, ModelSource
    from serving.server.server import EmbeddedServer

    base = tmp_path_factory.mktemp("grpc_rest_models")
    write_tiny_model(str(base / "tiny" / "1"), version=1)
    engine = InferenceEngine([ModelSource("tiny", str(base / "tiny"), labels={"stable": 1})],
                             limits=Limits(max_batch_size_per_request=MAX_ROWS, max_request_bytes=MAX_BYTES),
                             poll_interval_s=0)
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0).start()
    yield server
    assert server.stop(grace_s=5)


@pytest.fixture(scope="module")
def stubs(server):
    from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

    channel = grpc.insecure_channel(server.grpc_address)
    yield (prediction_service_pb2_grpc.PredictionServiceStub(channel),
           model_service_pb2_grpc.ModelServiceStub(channel))
    channel.close()


def strings(*values):
    array = np.empty(len(values), dtype=object)
    array[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
    return array


def predict_request(inputs, model="tiny", signature="", version=None, label=None):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if signature:
        request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return request


def rest(server, method, path, body=None, raw=None):
    """(HTTP status, parsed JSON) of one request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=300)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------ gRPC

def test_grpc_predict_matches_the_model(stubs):
    import tensorflow as tf

    prediction, _ = stubs
    texts = ["hello", "a rather longer text"]
    response = prediction.Predict(predict_request({"text": strings(*texts)}), timeout=300)
    assert response.model_spec.name == "tiny" and response.model_spec.version.value == 1
    probabilities = tf.make_ndarray(response.outputs["probabilities"])
    np.testing.assert_allclose(probabilities, expected_probabilities(texts, 1), rtol=1e-5)
    assert tf.make_ndarray(response.outputs["label"]).tolist() == [b"pos", b"neg"]
    assert tf.make_ndarray(response.outputs["length"]).tolist() == [5, 20]
    # A text with no token is answered, not refused, and flagged (`empty`), as a real export does.
    texts = ["  ", "hello", ""]
    response = prediction.Predict(predict_request({"text": strings(*texts)}), timeout=300)
    np.testing.assert_allclose(tf.make_ndarray(response.outputs["probabilities"]), expected_probabilities(texts, 1),
                               rtol=1e-5)
    assert tf.make_ndarray(response.outputs["empty"]).tolist() == [True, False, True]
    # A label resolves to its version; another signature with two inputs.
    pair = prediction.Predict(predict_request({"text": strings("a"), "text_b": strings("b")}, signature="pair",
                                              label="stable"), timeout=300)
    assert tf.make_ndarray(pair.outputs["joined"]).tolist() == [b"a|b"]


def test_grpc_classify_regress_metadata_status(stubs):
    from tensorflow.core.example import example_pb2
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                         regression_pb2)

    prediction, models = stubs
    example = example_pb2.Example()
    example.features.feature["text"].bytes_list.value.append(b"hello")
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name, request.model_spec.signature_name = "tiny", "classification"
    request.input.example_list.examples.append(example)
    classes = prediction.Classify(request, timeout=300).result.classifications[0].classes
    assert [c.label for c in classes] == ["neg", "pos"]
    np.testing.assert_allclose([c.score for c in classes], expected_probabilities(["hello"], 1)[0], rtol=1e-5)

    request = regression_pb2.RegressionRequest()
    request.model_spec.name, request.model_spec.signature_name = "tiny", "regression"
    request.input.example_list.examples.append(example)
    assert prediction.Regress(request, timeout=300).result.regressions[0].value == pytest.approx(6.0)  # 5 chars + v1

    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "tiny"
    response = prediction.GetModelMetadata(request, timeout=300)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signatures)
    default = signatures.signature_def["serving_default"]
    assert default.inputs["text"].dtype == types_pb2.DT_STRING
    assert signatures.signature_def["classification"].method_name == "tensorflow/serving/classify"

    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "tiny"
    (status,) = models.GetModelStatus(request, timeout=300).model_version_status
    assert (status.version, status.state) == (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE)


def test_grpc_multi_inference_runs_classify_and_regress_on_the_same_examples(stubs):
    """PredictionService/MultiInference answered UNIMPLEMENTED; it now runs each task as TF Serving
    does (one model version for all, results in task order) and refuses what TF Serving refuses."""
    from tensorflow.core.example import example_pb2
    from tensorflow_serving.apis import inference_pb2

    prediction, _ = stubs

    def request(*tasks):
        built = inference_pb2.MultiInferenceRequest()
        for model, signature, method in tasks:
            task = built.tasks.add()
            task.model_spec.name, task.model_spec.signature_name = model, signature
            task.method_name = f"tensorflow/serving/{method}"
        for text in (b"hello", b"hi"):
            example = example_pb2.Example()
            example.features.feature["text"].bytes_list.value.append(text)
            built.input.example_list.examples.append(example)
        return built

    response = prediction.MultiInference(request(("tiny", "classification", "classify"),
                                                 ("tiny", "regression", "regress")), timeout=300)
    classified, regressed = response.results
    assert (classified.model_spec.signature_name, classified.model_spec.version.value) == ("classification", 1)
    assert [[c.label for c in row.classes] for row in classified.classification_result.classifications] == [
        ["neg", "pos"], ["neg", "pos"]]
    np.testing.assert_allclose([c.score for c in classified.classification_result.classifications[0].classes],
                               expected_probabilities(["hello"], 1)[0], rtol=1e-5)
    assert [r.value for r in regressed.regression_result.regressions] == pytest.approx([6.0, 3.0])  # chars + v1
    assert regressed.model_spec.signature_name == "regression"

    refused = [
        (request(("tiny", "classification", "classify"), ("other", "regression", "regress")),
         "INVALID_ARGUMENT", "must access the same model name"),
        (request(("tiny", "classification", "classify"), ("tiny", "classification", "classify")),
         "INVALID_ARGUMENT", "Duplicate evaluation of signature: classification"),
        (request(("tiny", "serving_default", "predict")), "UNIMPLEMENTED", "Unsupported signature method_name"),
        (request(("", "classification", "classify")), "INVALID_ARGUMENT", "empty model name"),
        (request(("nope", "classification", "classify")), "NOT_FOUND", "nope"),
        (request(("tiny", "regression", "classify")), "INVALID_ARGUMENT", "method_name"),
    ]
    for built, code, words in refused:
        with pytest.raises(grpc.RpcError) as raised:
            prediction.MultiInference(built, timeout=300)
        assert (raised.value.code().name, words in raised.value.details()) == (code, True), raised.value.details()


def _tf_int(*values):
    return np.array(values, dtype=np.int32)


GRPC_ERRORS = [
    # (case, request kwargs, status code, words the message must contain)
    ("missing input", dict(inputs={"text": strings("a")}, signature="pair"), "INVALID_ARGUMENT", ["text_b"]),
    ("extra input", dict(inputs={"text": strings("a"), "bogus": strings("b")}), "INVALID_ARGUMENT", ["bogus"]),
    ("wrong dtype", dict(inputs={"text": _tf_int(1, 2)}), "INVALID_ARGUMENT", ["text"]),
    ("wrong shape", dict(inputs={"text": np.array([[b"a"]], dtype=object)}), "INVALID_ARGUMENT", ["text", "shape"]),
    ("empty batch", dict(inputs={"text": np.array([], dtype=object)}), "INVALID_ARGUMENT", ["text", "empty"]),
    ("invalid UTF-8", dict(inputs={"text": strings(b"ok", b"\xff\xfe")}), "INVALID_ARGUMENT",
     ["text", "row 1", "UTF-8"]),
    ("unknown model", dict(inputs={"text": strings("a")}, model="nope"), "NOT_FOUND", ["nope"]),
    ("unknown version", dict(inputs={"text": strings("a")}, version=7), "NOT_FOUND", ["version 7"]),
    ("unknown label", dict(inputs={"text": strings("a")}, label="canary"), "INVALID_ARGUMENT",
     ["Unrecognized servable version label: canary"]),
    # The version is a oneof: a label set to "" is a label no model has (TF Serving), not the latest.
    ("empty label", dict(inputs={"text": strings("a")}, label=""), "INVALID_ARGUMENT",
     ["Unrecognized servable version label"]),
    # quoted cut to 200 characters, as every name a client sends: whole, a 100 KB label made an answer
    # gRPC's client refuses (RESOURCE_EXHAUSTED "metadata size exceeds hard limit")
    ("100 KB label", dict(inputs={"text": strings("a")}, label="x" * 100_000), "INVALID_ARGUMENT",
     ["Unrecognized servable version label: " + "x" * 200 + " ("]),
    ("no model name", dict(inputs={"text": strings("a")}, model=""), "INVALID_ARGUMENT",
     ["ModelSpec has no name specified."]),
    ("unknown signature", dict(inputs={"text": strings("a")}, signature="nosig"), "FAILED_PRECONDITION", ["nosig"]),
    ("batch over the limit", dict(inputs={"text": strings(*["a"] * (MAX_ROWS + 1))}), "RESOURCE_EXHAUSTED",
     [str(MAX_ROWS + 1), str(MAX_ROWS)]),
    ("message over the limit", dict(inputs={"text": strings("a" * (MAX_BYTES + 1))}), "RESOURCE_EXHAUSTED",
     ["larger than max"]),
]


@pytest.mark.parametrize("case, kwargs, code, words", GRPC_ERRORS, ids=[c[0] for c in GRPC_ERRORS])
def test_grpc_bad_request_answers_its_status_and_the_server_keeps_serving(stubs, case, kwargs, code, words):
    prediction, _ = stubs
    with pytest.raises(grpc.RpcError) as raised:
        prediction.Predict(predict_request(**kwargs), timeout=300)
    assert raised.value.code().name == code, raised.value.details()
    for word in words:
        assert word in raised.value.details(), (word, raised.value.details())
    ok = prediction.Predict(predict_request({"text": strings("still here")}), timeout=300)
    assert ok.outputs["length"].tensor_content  # answered


def test_grpc_strings_in_tensor_content_are_read_as_tensorflow_reads_them(stubs):
    """A DT_STRING TensorProto may carry its strings in `tensor_content` (TensorFlow's encoding:
    varint32 lengths, then the bytes); TF Serving reads them, and so does the server."""
    import tensorflow as tf
    from tensorflow_serving.apis import get_model_metadata_pb2

    prediction, _ = stubs
    expected = prediction.Predict(predict_request({"text": strings("a great movie", "ok")}), timeout=300)
    request = predict_request({"text": strings("x")})
    proto = request.inputs["text"]
    del proto.string_val[:]
    proto.tensor_shape.dim[0].size = 2
    proto.tensor_content = bytes([13, 2]) + b"a great movie" + b"ok"
    assert tf.io.parse_tensor(proto.SerializeToString(), tf.string).numpy().tolist() == [b"a great movie", b"ok"]
    answer = prediction.Predict(request, timeout=300)
    assert answer.outputs["length"].tensor_content == expected.outputs["length"].tensor_content
    proto.tensor_content = b"abcd"  # one string of length 0x61: 97 bytes announced, 3 there
    with pytest.raises(grpc.RpcError) as raised:
        prediction.Predict(request, timeout=300)
    assert raised.value.code().name == "INVALID_ARGUMENT" and "tensor_content" in raised.value.details()
    metadata = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    metadata.model_spec.SetInParent()  # a ModelSpec, with no name
    with pytest.raises(grpc.RpcError) as raised:  # INVALID_ARGUMENT here too (TF Serving)
        prediction.GetModelMetadata(metadata, timeout=300)
    assert raised.value.code().name == "INVALID_ARGUMENT" and "no name" in raised.value.details()


def test_rest_b64_without_padding_is_read_as_tf_serving_reads_it(server):
    padded = rest(server, "POST", "/v1/models/tiny:predict", {"instances": [{"b64": "YWI="}]})
    unpadded = rest(server, "POST", "/v1/models/tiny:predict", {"instances": [{"b64": "YWI"}]})
    assert padded[0] == unpadded[0] == 200 and padded[1] == unpadded[1]
    assert rest(server, "POST", "/v1/models/tiny:predict", {"instances": [{"b64": "Y"}]})[0] == 400


def test_grpc_1mb_text_is_served(stubs):
    import tensorflow as tf

    prediction, _ = stubs
    response = prediction.Predict(predict_request({"text": strings("é" * (1 << 19))}), timeout=60)  # 1 MiB UTF-8
    assert tf.make_ndarray(response.outputs["length"]).tolist() == [1 << 19]


def test_grpc_health_and_unimplemented_methods(server, stubs):
    from tensorflow_serving.apis import inference_pb2, model_management_pb2, model_service_pb2_grpc

    from serving.server.grpc_service import HEALTH_SERVICE, health_messages

    request_class, response_class = health_messages()
    channel = grpc.insecure_channel(server.grpc_address)
    check = channel.unary_unary(f"/{HEALTH_SERVICE}/Check", request_serializer=request_class.SerializeToString,
                                response_deserializer=response_class.FromString)
    assert check(request_class(service=""), timeout=60).status == 1  # SERVING
    assert check(request_class(service="tensorflow.serving.PredictionService"), timeout=60).status == 1
    with pytest.raises(grpc.RpcError) as raised:
        check(request_class(service="no.such.Service"), timeout=60)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND

    prediction, _ = stubs
    with pytest.raises(grpc.RpcError) as raised:
        prediction.MultiInference(inference_pb2.MultiInferenceRequest(), timeout=60)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "no tasks" in raised.value.details()
    with pytest.raises(grpc.RpcError) as raised:
        model_service_pb2_grpc.ModelServiceStub(channel).HandleReloadConfigRequest(
            model_management_pb2.ReloadConfigRequest(), timeout=60)
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED and "restart" in raised.value.details()
    channel.close()


def test_grpc_unexpected_engine_exception_is_internal_not_a_crash():
    """A bug in the engine answers INTERNAL without internals (issue 13 #5); the servicer never raises."""
    from concurrent import futures

    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from serving.server.grpc_service import add_services

    class Broken:
        def predict(self, request):
            raise KeyError("boom")

        def is_ready(self):
            return True

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_services(server, Broken())
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for _ in range(2):  # and again: the server survived
            with pytest.raises(grpc.RpcError) as raised:
                stub.Predict(predict_pb2.PredictRequest(), timeout=10)
            assert raised.value.code() == grpc.StatusCode.INTERNAL
            assert raised.value.details() == "Predict failed: internal error (see the server log)"
        channel.close()
    finally:
        server.stop(0)


# ------------------------------------------------------------------------------------------ REST

def test_rest_status_urls_answer_tf_serving_json(server):
    expected = {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    for path in ("/v1/models/tiny", "/v1/models/tiny/versions/1", "/v1/models/tiny/labels/stable"):
        assert rest(server, "GET", path) == (200, expected), path
    status, body = rest(server, "GET", "/v1/models/tiny/versions/1/metadata")
    assert status == 200 and body["model_spec"] == {"name": "tiny", "signature_name": "", "version": "1"}
    signatures = body["metadata"]["signature_def"]["signature_def"]
    text = signatures["serving_default"]["inputs"]["text"]
    assert text["dtype"] == "DT_STRING"
    # Every field, defaults too, as TF Serving prints them (always_print_fields_with_no_presence):
    # "__saved_model_init_op" had no "method_name", so a client's signature["method_name"] failed.
    assert text["tensor_shape"] == {"dim": [{"size": "-1", "name": ""}], "unknown_rank": False}
    for name, signature in signatures.items():
        assert {"inputs", "outputs", "method_name", "defaults"} <= set(signature), name
    if "__saved_model_init_op" in signatures:
        init = signatures["__saved_model_init_op"]
        assert init["method_name"] == "" and init["inputs"] == {} and init["defaults"] == {}
        assert init["outputs"]["__saved_model_init_op"]["dtype"] == "DT_INVALID"
    assert rest(server, "GET", "/healthz")[0] == 200
    assert rest(server, "GET", "/readyz") == (200, {"status": "ready"})


def test_rest_predict_row_and_columnar(server):
    texts = ["hello", "a rather longer text"]
    status, body = rest(server, "POST", "/v1/models/tiny:predict", {"instances": texts})
    assert status == 200
    rows = body["predictions"]
    assert [row["label"] for row in rows] == ["pos", "neg"] and [row["length"] for row in rows] == [5, 20]
    np.testing.assert_allclose([row["probabilities"] for row in rows], expected_probabilities(texts, 1), rtol=1e-5)
    assert [row["empty"] for row in rows] == [False, False]
    status, body = rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["", "hello"]})  # answered
    assert status == 200 and [row["empty"] for row in body["predictions"]] == [True, False]

    # columnar, named inputs, a version in the URL; one output per name
    status, body = rest(server, "POST", "/v1/models/tiny/versions/1:predict",
                        {"signature_name": "scale", "inputs": {"x": [[1, 2, 3], [0, 0, 1]]}})
    assert status == 200
    assert body["outputs"] == {"y": [[3.0, 5.0, 7.0], [1.0, 1.0, 3.0]], "total": [6.0, 1.0]}

    # single-output signature: bare values; row objects; {"b64"} bytes; label URL
    status, body = rest(server, "POST", "/v1/models/tiny/labels/stable:predict",
                        {"signature_name": "pair", "instances": [
                            {"text": "a", "text_b": {"b64": base64.b64encode(b"b").decode()}},
                            {"text": "c", "text_b": "d"}]})
    assert (status, body) == (200, {"predictions": ["a|b", "c|d"]})

    # an output without a batch dimension: only the columnar format can answer it
    status, body = rest(server, "POST", "/v1/models/tiny:predict",
                        {"signature_name": "count", "inputs": ["a", "b", "c"]})
    assert (status, body) == (200, {"outputs": 3})
    status, body = rest(server, "POST", "/v1/models/tiny:predict", {"signature_name": "count", "instances": ["a"]})
    assert status == 400 and "columnar" in body["error"]


def test_rest_classify_and_regress(server):
    status, body = rest(server, "POST", "/v1/models/tiny:classify",
                        {"signature_name": "classification", "examples": [{"text": "hello"}, {"text": "hi"}]})
    assert status == 200
    assert [[label for label, _ in result] for result in body["results"]] == [["neg", "pos"]] * 2
    np.testing.assert_allclose([[score for _, score in result] for result in body["results"]],
                               expected_probabilities(["hello", "hi"], 1), rtol=1e-5)
    status, body = rest(server, "POST", "/v1/models/tiny:regress",
                        {"signature_name": "regression", "context": {"text": "abc"}, "examples": [{}, {"text": "a"}]})
    assert status == 200 and body["results"] == pytest.approx([4.0, 2.0])  # context fills example 0


REST_ERRORS = [
    # (case, method, path, body or raw bytes, HTTP status, words in the error)
    ("malformed JSON", "POST", "/v1/models/tiny:predict", b'{"instances": ["a"', 400, ["malformed JSON"]),
    ("body not an object", "POST", "/v1/models/tiny:predict", [1, 2], 400, ["JSON object"]),
    ("no instances or inputs", "POST", "/v1/models/tiny:predict", {"signature_name": "serving_default"}, 400,
     ["instances", "inputs"]),
    ("unknown key", "POST", "/v1/models/tiny:predict", {"instances": ["a"], "instance": 1}, 400, ["instance"]),
    ("empty instances", "POST", "/v1/models/tiny:predict", {"instances": []}, 400, ["empty"]),
    ("missing input", "POST", "/v1/models/tiny:predict", {"signature_name": "pair", "instances": [{"text": "a"}]},
     400, ["text_b"]),
    ("extra input", "POST", "/v1/models/tiny:predict", {"instances": [{"text": "a", "bogus": "b"}]}, 400, ["bogus"]),
    ("wrong dtype", "POST", "/v1/models/tiny:predict", {"instances": [1, 2]}, 400, ["text", "string"]),
    ("wrong shape", "POST", "/v1/models/tiny:predict", {"inputs": {"text": [["a"]]}}, 400, ["text", "shape"]),
    ("invalid UTF-8", "POST", "/v1/models/tiny:predict", {"instances": [{"b64": base64.b64encode(b"\xff").decode()}]},
     400, ["text", "UTF-8"]),
    ("unknown model", "POST", "/v1/models/nope:predict", {"instances": ["a"]}, 404, ["nope"]),
    ("unknown version", "GET", "/v1/models/tiny/versions/7", None, 404, ["version 7"]),
    ("unknown label", "POST", "/v1/models/tiny/labels/canary:predict", {"instances": ["a"]}, 400,
     ["Unrecognized servable version label: canary"]),
    ("batch over the limit", "POST", "/v1/models/tiny:predict", {"instances": ["a"] * (MAX_ROWS + 1)}, 429,
     [str(MAX_ROWS)]),
    ("body over the limit", "POST", "/v1/models/tiny:predict", b"x" * (MAX_BYTES + 1), 413, ["exceeds", "limit"]),
    ("unknown endpoint", "GET", "/v2/anything", None, 404, ["/v2/anything"]),
    ("malformed URL", "GET", "/v1/models/tiny:predict", None, 400, ["Malformed request"]),
]


@pytest.mark.parametrize("case, method, path, body, code, words", REST_ERRORS, ids=[c[0] for c in REST_ERRORS])
def test_rest_bad_request_answers_its_status_and_the_server_keeps_serving(server, case, method, path, body, code,
                                                                          words):
    raw = body if isinstance(body, bytes) else None
    status, answer = rest(server, method, path, None if raw else body, raw=raw)
    assert status == code, answer
    assert set(answer) == {"error"}
    for word in words:
        assert word in answer["error"], (word, answer["error"])
    assert rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["still here"]})[0] == 200


def test_rest_1mb_text_and_keep_alive(server):
    """A 1 MiB text is served; several requests share one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)
    try:
        for text in ("x" * (1 << 20), "hello", "again"):
            conn.request("POST", "/v1/models/tiny:predict", body=json.dumps({"instances": [text]}))
            response = conn.getresponse()
            body = json.loads(response.read())
            assert response.status == 200 and body["predictions"][0]["length"] == len(text)
    finally:
        conn.close()


def test_prometheus_metrics_count_requests_by_transport_and_code(server, stubs):
    prediction, _ = stubs
    prediction.Predict(predict_request({"text": strings("counted")}), timeout=300)
    with pytest.raises(grpc.RpcError):
        prediction.Predict(predict_request({"text": strings(b"\xff")}), timeout=300)  # invalid UTF-8
    rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["counted"]})
    rest(server, "POST", "/v1/models/nope:predict", {"instances": ["counted"]})
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=300)
    conn.request("GET", "/monitoring/prometheus/metrics")
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/plain")
    counts = {}
    for line in text.splitlines():
        if line.startswith("bert_keras_serving_requests_total{"):
            labels, value = line[len("bert_keras_serving_requests_total"):].rsplit(" ", 1)
            counts[labels] = int(value)
    assert counts['{transport="grpc",method="Predict",code="OK"}'] >= 1
    assert counts['{transport="grpc",method="Predict",code="INVALID_ARGUMENT"}'] >= 1
    assert counts['{transport="rest",method="predict",code="OK"}'] >= 1
    assert counts['{transport="rest",method="predict",code="NOT_FOUND"}'] >= 1
    assert "bert_keras_serving_ready 1" in text
