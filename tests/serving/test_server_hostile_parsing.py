"""The embedded server parsing what an attacker sends: request sizes, encodings, numbers, compressed
bodies, version directories and configs. One test (or more) per numbered hole of this audit:

1. a Classify / Regress context copied into every example before any size check;
2. lone UTF-16 surrogates in REST JSON, and answers the writer could not encode;
3. `str.isdigit()` taken for `int()`: Content-Length "²", version directories "²" and "９";
4. load failures reported UNKNOWN, bfloat16 / complex64 on REST, a 422 KB error message,
   malformed protobuf bytes answered INTERNAL, gzip bodies;
6. version labels to versions that do not exist, deeply nested models.config.

(5, SIGTERM before the drain handler, is in test_server_lifecycle.py: it needs a subprocess.)

The tiny SavedModel of engine_fixtures is served by one `EmbeddedServer` in this process, so
its memory is this process's: peak RSS measured here (VmHWM, reset through
/proc/self/clear_refs) is the server's.
"""

import glob
import gzip
import json
import logging
import os
import shutil
import socket
import threading
import time

import numpy as np
import pytest

import grpc  # noqa: E402

import engine_fixtures as ef  # noqa: E402
from engine_fixtures import ok_predict  # noqa: E402

MB = 1 << 20


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRss:
    """Peak RSS growth over a `with` block: the kernel's high-water mark, reset at entry.

    Falls back to sampling every millisecond where /proc/self/clear_refs cannot be written.
    """

    def __enter__(self):
        self.before = rss_bytes()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            self._sampler = None
        except OSError:
            self._peak, self._done = self.before, threading.Event()
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        return self

    def _sample(self):
        while not self._done.wait(0.001):
            self._peak = max(self._peak, rss_bytes())

    def __exit__(self, *exc):
        if self._sampler is None:
            with open("/proc/self/status") as f:
                hwm = next(line for line in f if line.startswith("VmHWM:"))
            self.peak = int(hwm.split()[1]) * 1024
        else:
            self._done.set()
            self._sampler.join()
            self.peak = self._peak
        self.growth = self.peak - self.before


def _odd_module():
    """Signatures of the dtypes the REST codec once failed on: bfloat16 in, complex64 out."""
    import tensorflow as tf

    class Odd(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.bfloat16, name="x")])
        def half(self, x):
            return {"sum": tf.reduce_sum(tf.cast(x, tf.float32), axis=1), "same": x}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def wave(self, x):
            return {"z": tf.complex(x, -x)}

    return Odd()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import tensorflow as tf

    from serving.server import InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    base = tmp_path_factory.mktemp("parsing_models")
    ef.write_tiny_model(str(base / "tiny" / "1"), version=1)
    odd = _odd_module()
    tf.saved_model.save(odd, str(base / "odd" / "1"), signatures={"half": odd.half, "wave": odd.wave})
    engine = InferenceEngine([ModelSource("tiny", str(base / "tiny")), ModelSource("odd", str(base / "odd"))],
                             poll_interval_s=0)
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0, rest_header_timeout_s=60.0).start()
    yield server
    server.stop(grace_s=5)


@pytest.fixture(scope="module")
def channel(server):
    channel = grpc.insecure_channel(server.grpc_address, options=[("grpc.max_send_message_length", 256 * MB)])
    yield channel
    channel.close()


@pytest.fixture(scope="module")
def prediction(channel):
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def rest(server, method, path, body=None, headers=None):
    """(status, content type, JSON body) of one request on a fresh connection."""
    status, content_type, raw = ef.rest_request(server, method, path, body, headers)
    return status, content_type, (json.loads(raw) if raw else None)


def raw_http(server, data):
    """Raw bytes in; (status, JSON body) of the answer, read to the end of the connection."""
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=60) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received, "the connection closed without an answer"
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"Content-Type: application/json" in head, head
    return int(head.split(b" ", 2)[1]), json.loads(body)


def ok_rest(server):
    status, _, body = rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["ok"]})
    assert status == 200, body


def grpc_code(call):
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code().name, raised.value.details()


# ------------------------------------------------------------------ 1. a context copied into every example


def _classification_with_context(context_bytes, examples):
    from tensorflow_serving.apis import classification_pb2

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = "classification"
    with_context = request.input.example_list_with_context
    with_context.context.features.feature["big"].bytes_list.value.append(b"c" * context_bytes)
    for i in range(examples):
        with_context.examples.add().features.feature["text"].bytes_list.value.append(b"t%d" % i)
    return request


def _spy_on_examples(monkeypatch, server):
    """The serialized examples each Classify / Regress hands to the engine: [(method, [bytes, ...])]."""
    engine, seen = server.engine, []
    for method in ("classify_examples", "regress_examples"):
        real = getattr(engine, method)

        def spy(*args, _real=real, _method=method, **kwargs):
            seen.append((_method, list(kwargs["serialized"])))
            return _real(*args, **kwargs)

        monkeypatch.setattr(engine, method, spy)
    return seen


@pytest.mark.parametrize("method", ["Classify", "Regress"])
def test_1_grpc_a_1mb_context_times_1000_examples_is_refused_before_merging(server, prediction, method,
                                                                            monkeypatch):
    """1 MB of context x 1,000 examples used to be merged first (1 GB of RSS), then refused."""
    from tensorflow_serving.apis import regression_pb2

    seen = _spy_on_examples(monkeypatch, server)
    request = _classification_with_context(MB, 1000)
    if method == "Regress":
        request = regression_pb2.RegressionRequest(model_spec=request.model_spec, input=request.input)
        request.model_spec.signature_name = "regression"
    assert request.ByteSize() < 2 * MB
    with PeakRss() as rss:
        code, details = grpc_code(lambda: getattr(prediction, method)(request, timeout=300))
    print(f"\n{method}: refused, peak RSS growth {rss.growth / MB:.1f} MB")
    assert code == "RESOURCE_EXHAUSTED" and "context" in details and "limit" in details, details
    # Refused on the sizes alone: the count and the context's size, no merged example built.
    context_bytes = len(request.input.example_list_with_context.context.SerializeToString())
    assert f"1000 examples with the context of {context_bytes} bytes copied into each" in details, details
    assert seen == []  # nothing reached the engine
    assert rss.growth < 200 * MB, rss.growth
    # the same context with a few examples is served: merged, each example after the context
    small = _classification_with_context(MB, 3)
    if method == "Regress":
        small = regression_pb2.RegressionRequest(model_spec=small.model_spec, input=small.input)
        small.model_spec.signature_name = "regression"
        assert len(prediction.Regress(small, timeout=300).result.regressions) == 3
    else:
        assert len(prediction.Classify(small, timeout=300).result.classifications) == 3
    ((called, serialized),) = seen
    assert called == method.lower() + "_examples" and len(serialized) == 3
    context = small.input.example_list_with_context.context.SerializeToString()
    assert all(example.startswith(context) and len(example) > len(context) for example in serialized)
    ok_predict(prediction)


def test_1_rest_a_1mb_context_times_1000_examples_is_refused_before_merging(server, prediction, monkeypatch):
    seen = _spy_on_examples(monkeypatch, server)
    body = json.dumps({"signature_name": "classification", "context": {"big": "c" * MB},
                       "examples": [{"text": f"t{i}"} for i in range(1000)]}).encode()
    with PeakRss() as rss:
        status, _, answer = rest(server, "POST", "/v1/models/tiny:classify", body)
    print(f"\nREST classify: refused, peak RSS growth {rss.growth / MB:.1f} MB")
    assert status == 429 and "context" in answer["error"], answer
    # Refused on the sizes alone: the count and the context's size, no merged example built.
    assert "1000 examples" in answer["error"] and "copied into each" in answer["error"], answer
    assert seen == []  # nothing reached the engine
    assert rss.growth < 200 * MB, rss.growth
    status, _, answer = rest(server, "POST", "/v1/models/tiny:classify",
                             {"signature_name": "classification", "context": {"big": "c" * MB},
                              "examples": [{"text": "a"}, {"text": "bb"}]})
    assert status == 200 and len(answer["results"]) == 2, answer
    ((called, serialized),) = seen
    assert called == "classify_examples" and len(serialized) == 2
    assert all(example.count(b"c" * MB) == 1 for example in serialized)  # the context, once in each
    ok_predict(prediction)


def test_1_examples_size_check_counts_the_merge():
    from serving.server import Limits, ServingError
    from serving.server.request_validation import check_examples_size

    limits = Limits(max_batch_size_per_request=100, max_request_bytes=10_000)
    check_examples_size(10, 500, 1000, limits)  # 10 x (500 + 64) + 1000 = 6640
    with pytest.raises(ServingError) as raised:
        check_examples_size(20, 500, 0, limits)  # 20 x 564 = 11280
    assert raised.value.code == "RESOURCE_EXHAUSTED" and "500 bytes" in raised.value.message
    with pytest.raises(ServingError) as raised:
        check_examples_size(101, 0, 0, limits)
    assert raised.value.code == "RESOURCE_EXHAUSTED" and "101 examples" in raised.value.message


# ------------------------------------------------------------------ 2. lone surrogates, answers that cannot be encoded


@pytest.mark.parametrize("case, path, body", [
    ("instance", "predict", rb'{"instances": ["\ud800"]}'),
    ("signature_name", "predict", rb'{"signature_name": "\ud800", "instances": ["a"]}'),
    ("top-level key", "predict", rb'{"\udfff": 1, "instances": ["a"]}'),
    ("columnar input name", "predict", rb'{"inputs": {"\ud800x": ["a"]}}'),
    ("feature name", "classify", rb'{"examples": [{"\ud800": "a"}]}'),
    ("feature value", "classify", rb'{"examples": [{"text": ["ok", "\udc00"]}]}'),
    ("context", "regress", rb'{"examples": [{"text": "a"}], "context": {"c": "\ud83d"}}'),
    ("low then high", "predict", rb'{"instances": ["\ude00\ud83d"]}'),
    ("deep", "predict", b'{"instances": ' + b"[" * 50 + rb'"\ud800"' + b"]" * 50 + b"}"),
])
def test_2_a_lone_surrogate_anywhere_in_rest_json_is_400(server, case, path, body):
    status, content_type, answer = rest(server, "POST", f"/v1/models/tiny:{path}", body)
    assert status == 400 and content_type == "application/json", (status, answer)
    assert "surrogate" in answer["error"] and "Traceback" not in answer["error"], answer
    ok_rest(server)


def test_2_surrogate_pairs_are_characters_and_work(server):
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", rb'{"instances": ["\ud83d\ude00 ok"]}')
    assert status == 200 and answer["predictions"][0]["length"] == 4, answer
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", rb'{"instances": ["\\ud800"]}')
    assert status == 200 and answer["predictions"][0]["length"] == 6, answer  # an escaped backslash: text


@pytest.mark.parametrize("body, key", [
    (b'{"instances": ["a"], "instances": ["b", "c"]}', "instances"),  # answered 2 rows for ["b", "c"]
    (b'{"signature_name": "pair", "instances": [{"text": "a", "text_b": "b", "text": "c"}]}', "text"),
    (b'{"inputs": {"text": ["a"]}, "signature_name": "x", "signature_name": ""}', "signature_name"),
])
def test_2_a_key_repeated_in_one_json_object_is_400_not_its_last_value(server, body, key):
    # Python's decoder kept the last value and TF Serving's (RapidJSON FindMember) reads the first:
    # the same request was answered differently by the two servers.
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", body)
    assert status == 400, (status, answer)
    assert f"key {key!r} appears more than once in one object" in answer["error"], answer
    ok_rest(server)


def test_2_the_writer_never_fails_to_encode():
    from serving.server.rest_service import RestService, dumps

    assert json.loads(dumps({"error": "bad name '\ud800x'"})) == {"error": "bad name '\ufffdx'"}

    class Engine:
        limits = None

        def model_status(self, *args):
            return [{"version": 1, "state": "AVAILABLE", "error_code": "OK", "error_message": 1j}]

    status, content_type, data = RestService(Engine()).respond("GET", "/v1/models/x", b"")
    assert status == 500 and content_type == "application/json"
    assert json.loads(data) == {"error": "internal error (see the server log)"}


def test_2_complex64_outputs_answer_json_not_a_closed_connection(server):
    for body in ({"signature_name": "wave", "inputs": {"x": [1.0, 2.0]}},
                 {"signature_name": "wave", "inputs": [1.0]},
                 {"signature_name": "wave", "instances": [1.0]}):
        status, content_type, answer = rest(server, "POST", "/v1/models/odd:predict", body)
        assert status == 501 and content_type == "application/json", (status, answer)
        assert "complex64" in answer["error"] and "gRPC" in answer["error"], answer
    ok_rest(server)


# ------------------------------------------------------------------ 3. isdigit() is not int()


@pytest.mark.parametrize("value", ["²".encode("latin-1"), "²".encode("utf-8"), "９".encode("utf-8"), b"1_0",
                                   b"+1", b"0x10", "١".encode("utf-8")])
def test_3_a_content_length_of_other_digits_is_400(server, value):
    status, body = raw_http(server, b"POST /v1/models/tiny:predict HTTP/1.1\r\nContent-Length: " + value
                            + b"\r\n\r\n{}")
    assert status == 400 and "Content-Length" in body["error"], body
    ok_rest(server)


@pytest.mark.parametrize("length, shown", [("1" + "0" * 30, "1" + "0" * 30), ("0" * 30 + "20000", "20000"),
                                           ("9" * 5000, "99999999999999999999... (5000 digits)")])
def test_3_a_content_length_past_any_limit_is_413_not_a_bad_header(length, shown):
    """10^30 is ASCII digits: over the limit, as a body of 20 kB is, not "expected ASCII digits"."""
    from serving.server.http_server import RestServer

    rest_server = RestServer(None, port=0, max_request_bytes=10_000).start()  # refused before any model runs
    try:
        fake = type("S", (), {"rest_port": rest_server.port})
        status, _, raw = ef.rest_request(fake, "POST", "/v1/models/tiny:predict", b"{}", {"Content-Length": length})
        assert status == 413, raw
        assert json.loads(raw)["error"] == (f"request body of {shown} bytes exceeds the server limit of 10000 bytes "
                                            "(RESOURCE_EXHAUSTED; raise --max-request-bytes)")
    finally:
        rest_server.stop(1)


def test_3_only_ascii_digit_version_directories_are_versions(tmp_path, caplog):
    """"²" made every poll raise (and blocked version 2); "９" was served as version 9."""
    from serving.server import InferenceEngine, ModelSource

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    os.makedirs(os.path.join(base, "²"))
    shutil.copytree(ef.built_model(tmp_path.parent, 1), os.path.join(base, "９"))
    caplog.set_level(logging.WARNING, logger="serving.server.model_registry")
    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0)
    engine.start()
    try:
        assert [s["version"] for s in engine.model_status("tiny")] == [1]
        ef.make_base_path(tmp_path.parent, base, {2: 2})
        for _ in range(3):
            engine.poll_now("tiny")  # no exception, and version 2 is loaded
        assert [(s["version"], s["state"]) for s in engine.model_status("tiny")] == [(2, "AVAILABLE"), (1, "END")]
        assert engine.predict_arrays("tiny", inputs={"text": np.array([b"a"], dtype=object)})[0] == 2
    finally:
        engine.stop(drain_timeout_s=5)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("'９'" in m for m in warnings) == 1 and sum("'²'" in m for m in warnings) == 1, warnings
    assert all("ASCII digits" in m for m in warnings if "'９'" in m or "'²'" in m)


def test_3_version_directories_zero_and_negative_are_served_as_tf_serving(tmp_path):
    """TF Serving reads "0" and "-1" as versions (safe_strto64); the registry ignored them, "0" silently, so a
    model exported as version 0 served nothing ("no complete version directory")."""
    from serving.server import InferenceEngine, ModelSource, ServingError

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {0: 1, -1: 2})
    engine = InferenceEngine([ModelSource("tiny", base, version_policy="all", labels={"zero": 0})],
                             poll_interval_s=0)
    engine.start()
    try:
        assert [(s["version"], s["state"]) for s in engine.model_status("tiny")] == [(0, "AVAILABLE"),
                                                                                    (-1, "AVAILABLE")]
        text = {"text": np.array([b"a"], dtype=object)}
        assert engine.predict_arrays("tiny", inputs=text)[0] == 0  # the highest: version 0
        assert engine.predict_arrays("tiny", version=-1, inputs=text)[0] == -1
        assert engine.predict_arrays("tiny", version_label="zero", inputs=text)[0] == 0
    finally:
        engine.stop(drain_timeout_s=5)
    # A version_labels entry without value reads as version 0 (proto3), in TF Serving as here: say so.
    labelled = InferenceEngine([ModelSource("tiny", base, version_policy="specific", versions=(-1,),
                                            labels={"stable": 0})], poll_interval_s=0)
    with pytest.raises(ServingError) as raised:
        labelled.start()
    assert "points to version 0" in raised.value.message and "without value" in raised.value.message


def test_3_a_specific_version_missing_from_disk_is_said(tmp_path, caplog):
    """`specific { versions: 3 }` with only 1 and 2 on disk served nothing and said "no versions loaded",
    logging nothing; TF Serving's AspireSpecificVersions logs that version 3 "was not found in the file
    system". The model's error says so now (requests and status answer it), logged once."""
    from serving.server import InferenceEngine, ModelSource, ServingError

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1, 2: 2})
    caplog.set_level(logging.WARNING, logger="serving.server.model_registry")
    engine = InferenceEngine([ModelSource("tiny", base, version_policy="specific", versions=(2, 3))],
                             poll_interval_s=0)
    engine.start()
    try:
        assert [s["version"] for s in engine.model_status("tiny")] == [2]
        engine.poll_now("tiny")
        shutil.rmtree(os.path.join(base, "2"))
        engine.poll_now("tiny")
        with pytest.raises(ServingError) as raised:
            engine.predict_arrays("tiny", inputs={"text": np.array([b"a"], dtype=object)})
    finally:
        engine.stop(drain_timeout_s=5)
    assert raised.value.code == "NOT_FOUND"
    assert "version(s) [2, 3] of its specific version policy not found" in raised.value.message
    assert "(versions there: [1])" in raised.value.message, raised.value.message
    warnings = [r.getMessage() for r in caplog.records if "specific version policy" in r.getMessage()]
    assert len(warnings) == 2 and "[3]" in warnings[0] and "[2, 3]" in warnings[1], warnings


def test_3_urls_and_configs_read_ascii_digits_only(server):
    from serving.server.model_config import ModelConfigError, ModelSource, parse_models_config
    from serving.server.rest_service import _PREDICTION_PATH, _STATUS_PATH

    assert _PREDICTION_PATH.fullmatch("/v1/models/tiny/versions/９:predict") is None
    assert _STATUS_PATH.fullmatch("/v1/models/tiny/versions/١") is None
    status, _, answer = rest(server, "GET", "/v1/models/tiny/versions/%EF%BC%99")
    assert status == 400, answer
    with pytest.raises(ModelConfigError):
        parse_models_config('model_config_list { config { name: "m" base_path: "/m" '
                            "model_version_policy { specific { versions: ９ } } } }")
    assert ModelSource("m", "/m", labels={"９": 1}).labels == {"９": 1}  # not a number in a URL: a fine label


# ------------------------------------------------------------------ 4. load errors, dtypes, long messages, bytes, gzip


def test_4_a_truncated_variables_shard_is_data_loss_and_the_previous_version_serves(tmp_path):
    from serving.server import InferenceEngine, ModelSource

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0)
    engine.start()
    try:
        target = os.path.join(base, "2")
        shutil.copytree(ef.built_model(tmp_path.parent, 2), target)
        (shard,) = glob.glob(os.path.join(target, "variables", "variables.data-*"))
        with open(shard, "r+b") as f:
            f.truncate(os.path.getsize(shard) // 2)
        for root, _, files in os.walk(target):  # settled: not a copy in progress
            for name in files:
                os.utime(os.path.join(root, name), (time.time() - 10, time.time() - 10))
        engine.poll_now("tiny")
        (failed,) = engine.model_status("tiny", 2)
        assert failed["state"] == "END" and failed["error_code"] == "DATA_LOSS", failed
        assert target in failed["error_message"] and "truncated" in failed["error_message"], failed
        assert engine.predict_arrays("tiny", inputs={"text": np.array([b"abc"], dtype=object)})[0] == 1
    finally:
        engine.stop(drain_timeout_s=5)


def test_4_bfloat16_inputs_and_outputs_work_on_rest(server):
    status, _, answer = rest(server, "POST", "/v1/models/odd:predict",
                             {"signature_name": "half", "instances": [[1.5, 2.0], [-1.0, 0.25]]})
    assert status == 200, answer
    assert answer["predictions"] == [{"sum": 3.5, "same": [1.5, 2.0]}, {"sum": -0.75, "same": [-1.0, 0.25]}]
    status, _, answer = rest(server, "POST", "/v1/models/odd:predict",
                             {"signature_name": "half", "inputs": {"x": [[1e39, 0.0]]}})
    assert status == 400 and "DT_BFLOAT16" in answer["error"], answer


def test_4_thousands_of_unknown_input_names_make_a_short_message(server, prediction):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    one = tf.make_tensor_proto(np.array([b"a"], dtype=object))
    for i in range(2000):
        request.inputs[f"input_{i:04d}_" + "x" * 200].CopyFrom(one)
    code, details = grpc_code(lambda: prediction.Predict(request, timeout=300))
    assert code == "INVALID_ARGUMENT" and "and 1995 more" in details and "'text'" in details, details[:500]
    assert len(details) < 2000, len(details)
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict",
                             {"inputs": {f"n{i}" + "y" * 200: ["a"] for i in range(2000)}})
    assert status == 400 and "and 1995 more" in answer["error"] and len(answer["error"]) < 2000, answer


@pytest.mark.parametrize("method", ["/tensorflow.serving.PredictionService/Predict",
                                    "/tensorflow.serving.PredictionService/Classify",
                                    "/tensorflow.serving.PredictionService/GetModelMetadata",
                                    "/tensorflow.serving.ModelService/GetModelStatus",
                                    "/grpc.health.v1.Health/Check"])
def test_4_malformed_protobuf_bytes_are_invalid_argument(channel, prediction, method):
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    for data in (b"\xff\xff\xff\xff", b"\x0a\x05ab", b"\x0a\x02\xc3\x28"):  # bad tag, short field, bad UTF-8
        code, details = grpc_code(lambda: call(data, timeout=60))
        assert code == "INVALID_ARGUMENT" and "not a valid" in details, (data, code, details)
    ok_predict(prediction)


def test_4_gzip_request_bodies_are_decompressed(server):
    body = gzip.compress(json.dumps({"instances": ["zipped", "twice as long"]}).encode())
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", body, {"Content-Encoding": "gzip"})
    assert status == 200 and [p["length"] for p in answer["predictions"]] == [6, 13], answer
    two_members = gzip.compress(b'{"instances": ') + gzip.compress(b"") + gzip.compress(b'["a"]}')  # one empty
    status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", two_members, {"Content-Encoding": "gzip"})
    assert status == 200, answer
    for data, coding, expected, word in [(b'{"instances": ["a"]}', "gzip", 400, "gzip"),
                                         (body[:-10], "gzip", 400, "truncated"),
                                         (body, "br", 415, "br")]:
        status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", data, {"Content-Encoding": coding})
        assert status == expected and word in answer["error"], answer
    ok_rest(server)


def test_4_a_gzip_bomb_is_refused_while_decompressing(server):
    bomb = gzip.compress(b"\0" * (server.max_request_bytes + 64 * MB), compresslevel=9)
    assert len(bomb) < MB
    started = time.perf_counter()
    with PeakRss() as rss:
        status, _, answer = rest(server, "POST", "/v1/models/tiny:predict", bomb, {"Content-Encoding": "gzip"})
    elapsed = time.perf_counter() - started
    print(f"\ngzip bomb: refused in {elapsed * 1000:.0f} ms, peak RSS growth {rss.growth / MB:.1f} MB")
    assert status == 413 and "decompresses to more than" in answer["error"], answer
    # never the whole expansion, nor a copy of what was read up to the limit (zlib at 64 MB in one call: 128 MB)
    assert rss.growth < server.max_request_bytes + 32 * MB, rss.growth
    ok_rest(server)


# ------------------------------------------------------------------ 6. version labels, nested models.config


def test_6_a_label_to_a_version_that_does_not_exist_is_refused(tmp_path):
    from serving.server import InferenceEngine, ModelSource, ServingError

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1, 2: 2})
    engine = InferenceEngine([ModelSource("tiny", base, version_policy="all", labels={"stable": 1, "canary": 3})],
                             poll_interval_s=0)
    with pytest.raises(ServingError) as raised:
        engine.start()
    message = raised.value.message
    assert raised.value.code == "FAILED_PRECONDITION", message
    assert "'canary'" in message and "version 3" in message and "[1, 2]" in message, message
    assert not engine.is_ready()
    allowed = InferenceEngine([ModelSource("tiny", base, version_policy="all", labels={"canary": 3})],
                              poll_interval_s=0, allow_version_labels_for_unavailable_models=True)
    allowed.start()
    try:
        assert allowed.is_ready()
    finally:
        allowed.stop(drain_timeout_s=5)


def test_6_serve_refuses_a_label_to_a_missing_version_naming_it(tmp_path, capsys):
    from bert_keras.cli.main import main
    from serving.server.model_config import ModelSource, write_models_config

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    config = tmp_path / "models.config"
    write_models_config(config, [ModelSource("tiny", base, labels={"stable": 1, "canary": 7})])
    assert main(["serve", "--model-config-file", str(config), "--port", "0", "--rest-port", "0",
                 "--file-system-poll-wait-seconds", "0"]) == 2
    err = capsys.readouterr().err
    assert "cannot start" in err and "'canary'" in err and "version 7" in err, err


def test_6_a_deeply_nested_models_config_is_a_clear_error(tmp_path):
    from serving.server.model_config import ModelConfigError, parse_batching_parameters, read_models_config

    config = tmp_path / "models.config"
    config.write_text("model_config_list {\n" + "config {" * 100_000 + "}" * 100_001 + "\n")
    with pytest.raises(ModelConfigError) as raised:
        read_models_config(config)
    assert str(raised.value).startswith(f"{config}:2:") and "nested" in str(raised.value)
    with pytest.raises(ModelConfigError) as raised:
        parse_batching_parameters("max_batch_size " + "{ value " * 5000, source="batching.txt")
    assert "batching.txt:1" in str(raised.value) and "nested" in str(raised.value)
