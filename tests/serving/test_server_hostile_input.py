"""Issue 13: `bert-keras serve` tried as an attacker would. One test (or more) per numbered defect.

The tiny SavedModel of engine_fixtures (no BERT: outputs computable with numpy) is served by
one `EmbeddedServer` on loopback ports in this process, so its threads and memory are this
process's: RSS and thread counts measured here are the server's.
"""

import http.client
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

TOKEN_BUDGET = 4096


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def thread_count():
    return len(os.listdir("/proc/self/task"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from serving.server import InferenceEngine, Limits, ModelSource
    from serving.server.batching import BatchingOptions
    from serving.server.server import EmbeddedServer

    base = tmp_path_factory.mktemp("hostile_models")
    ef.write_tiny_model(str(base / "tiny" / "1"), version=1)
    engine = InferenceEngine([ModelSource("tiny", str(base / "tiny"))], poll_interval_s=0,
                             batching=BatchingOptions(max_batch_size=16, batch_timeout_micros=20_000),
                             limits=Limits(max_tokens_per_request=TOKEN_BUDGET))
    server = EmbeddedServer(engine, grpc_port=0, rest_port=0, rest_header_timeout_s=60.0).start()
    yield server
    server.stop(grace_s=5)


@pytest.fixture(scope="module")
def prediction(server):
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channel = grpc.insecure_channel(server.grpc_address)
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


rest = ef.rest_request  # (status, content type, raw body)


def raw_http(server, data, read_timeout=60.0):
    """Send raw bytes on a fresh connection; (status, JSON body) of the first answer."""
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=read_timeout) as sock:
        sock.sendall(data)
        received = b""
        while True:
            head, sep, body = received.partition(b"\r\n\r\n")
            if sep:
                length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
                if len(body) >= length:
                    break
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    status = int(head.split(b" ", 2)[1])
    assert b"Content-Type: application/json" in head, head
    return status, json.loads(body[:length])


def grpc_code(call):
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code().name, raised.value.details()


# ------------------------------------------------------------------ 1. declared shape vs values


@pytest.mark.parametrize("dtype, field, signature, name", [
    ("DT_STRING", "string_val", "", "text"),
    ("DT_INT32", "int_val", "token_ids", "token_ids"),
])
def test_1_a_tiny_request_declaring_a_huge_shape_is_refused_before_allocating(prediction, dtype, field, signature,
                                                                              name, monkeypatch):
    """51 bytes declaring [250,000,000] strings used to take 1.9 GB and 5-7 s; now refused at once.

    One value for a larger shape is TensorFlow's short form (the value repeats), so what refuses
    it is the declared size, checked against the limits before anything is allocated.
    """
    import tensorflow as tf
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2

    from serving.server import tensor_proto

    # The short form's full array is built by `_filled` alone: record every array it builds.
    filled, real_filled = [], tensor_proto._filled
    monkeypatch.setattr(tensor_proto, "_filled",
                        lambda values, count, *rest: filled.append(count) or real_filled(values, count, *rest))

    def short_form(shape):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "tiny"
        request.model_spec.signature_name = signature
        tensor = request.inputs[name]
        tensor.dtype = types_pb2.DataType.Value(dtype)
        for size in shape:
            tensor.tensor_shape.dim.add().size = size
        getattr(tensor, field).append(b"a" if dtype == "DT_STRING" else 1)
        return request

    request = short_form([250_000_000] if dtype == "DT_STRING" else [1, 100_000_000])
    assert request.ByteSize() < 100
    before = rss_bytes()
    code, details = grpc_code(lambda: prediction.Predict(request, timeout=300))
    assert rss_bytes() - before < 50 << 20
    assert code == "RESOURCE_EXHAUSTED" and "limit" in details, details
    assert filled == []  # refused on the declared shape: the 250,000,000 / 100,000,000 values never built
    # Within the limits, the same short form is filled and served (the spy sees that array).
    outputs = prediction.Predict(short_form([3] if dtype == "DT_STRING" else [1, 4]), timeout=300).outputs
    if dtype == "DT_STRING":
        assert filled == [3] and tf.make_ndarray(outputs["length"]).tolist() == [1, 1, 1]
    else:
        assert filled == [4] and tf.make_ndarray(outputs["id_sum"]).tolist() == [4]
    ok_predict(prediction)


def test_1_inputs_under_the_limit_each_are_refused_together_before_any_is_built(prediction, monkeypatch):
    """20 unknown inputs of [1024, 16384] floats in the short form, each under 64 MiB: a 700-byte
    request built 1.3 GB of arrays before its names were refused. One 1 MiB string declared [1024]
    is 1 GiB of text once filled: its UTF-8 was checked (seconds) before the request's size."""
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import predict_pb2

    from serving.server import tensor_proto

    filled, real_filled = [], tensor_proto._filled
    monkeypatch.setattr(tensor_proto, "_filled",
                        lambda values, count, *rest: filled.append(count) or real_filled(values, count, *rest))
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    for index in range(20):
        tensor = request.inputs[f"extra_{index}"]
        tensor.dtype = types_pb2.DT_FLOAT
        for size in (1024, 16384):
            tensor.tensor_shape.dim.add().size = size
        tensor.float_val.append(1.0)
    assert request.ByteSize() < 1000
    before = rss_bytes()
    code, details = grpc_code(lambda: prediction.Predict(request, timeout=300))
    assert code == "RESOURCE_EXHAUSTED" and "20 input(s)" in details and "together" in details, details
    assert filled == [] and rss_bytes() - before < 50 << 20
    text = predict_pb2.PredictRequest()
    text.model_spec.name = "tiny"
    tensor = text.inputs["text"]
    tensor.dtype = types_pb2.DT_STRING
    tensor.tensor_shape.dim.add().size = 1024
    tensor.string_val.append(b"a" * (1 << 20))
    code, details = grpc_code(lambda: prediction.Predict(text, timeout=300))
    assert code == "RESOURCE_EXHAUSTED" and "together" in details and filled == [], details
    ok_predict(prediction)


def test_1_the_short_form_tensorflow_reads_is_accepted_within_the_limits():
    """`tf.make_tensor_proto(value, shape=[n])` sends one value; TF Serving fills the shape with it."""
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2, types_pb2

    from serving.server import Limits, ServingError
    from serving.server.tensor_proto import ndarray_from_proto

    short = tf.make_tensor_proto("great movie", shape=[3])
    assert len(short.string_val) == 1
    assert ndarray_from_proto(short, "text", Limits()).tolist() == [b"great movie"] * 3
    ids = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT32, int_val=[101, 7, 0])
    for size in (2, 4):
        ids.tensor_shape.dim.add().size = size
    assert ndarray_from_proto(ids, "token_ids", Limits()).tolist() == [[101, 7, 0, 0], [0, 0, 0, 0]]
    assert ndarray_from_proto(ids, "token_ids", Limits()).tolist() == tf.make_ndarray(ids).tolist()
    too_many = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT32, int_val=[1, 2, 3])
    too_many.tensor_shape.dim.add().size = 2
    with pytest.raises(ServingError) as raised:
        ndarray_from_proto(too_many, "token_ids", Limits())
    assert raised.value.code == "INVALID_ARGUMENT" and "carries 3" in raised.value.message


def test_1_half_val_out_of_16_bits_is_invalid_argument_not_internal():
    # Found by the long fuzz run: half_val=-1 (a DT_HALF scalar) crashed the reader (INTERNAL).
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2, types_pb2

    from serving.server import Limits, ServingError
    from serving.server.tensor_proto import ndarray_from_proto

    for bits in (-1, 70_000):
        proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_HALF, half_val=[bits])
        with pytest.raises(ServingError) as raised:
            ndarray_from_proto(proto, "x", Limits())
        assert raised.value.code == "INVALID_ARGUMENT" and "half_val" in raised.value.message
    good = tf.make_tensor_proto(np.array([1.5, -2.0], np.float16))
    good.ClearField("tensor_content")
    good.half_val.extend(np.array([1.5, -2.0], np.float16).view(np.uint16).tolist())
    assert ndarray_from_proto(good, "x", Limits()).tolist() == [1.5, -2.0]


def test_1_a_declared_shape_over_the_row_limit_is_resource_exhausted_before_allocating():
    from tensorflow.core.framework import tensor_pb2, types_pb2

    from serving.server import Limits, ServingError
    from serving.server.tensor_proto import ndarray_from_proto

    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    proto.tensor_shape.dim.add().size = 5000
    proto.tensor_content = b"\0" * 4 * 5000
    with pytest.raises(ServingError) as raised:
        ndarray_from_proto(proto, "x", Limits(max_batch_size_per_request=1024))
    assert raised.value.code == "RESOURCE_EXHAUSTED" and "5000 rows" in raised.value.message
    big = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    for size in (1000, 1000):
        big.tensor_shape.dim.add().size = size
    big.tensor_content = b"\0" * 4_000_000
    with pytest.raises(ServingError) as raised:
        ndarray_from_proto(big, "x", Limits(max_request_bytes=1 << 20))
    assert raised.value.code == "RESOURCE_EXHAUSTED" and "4000000 bytes" in raised.value.message
    strings = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING)  # a million empty strings: not small
    for size in (1000, 1000):
        strings.tensor_shape.dim.add().size = size
    strings.string_val.extend([b""] * 1_000_000)
    with pytest.raises(ServingError) as raised:
        ndarray_from_proto(strings, "text", Limits(max_request_bytes=32 << 20))
    assert raised.value.code == "RESOURCE_EXHAUSTED" and "64000000 bytes" in raised.value.message
    empty_but_huge = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)  # found by the fuzz suite
    for size in (0, 100_000_000, 23_058_430_093):
        empty_but_huge.tensor_shape.dim.add().size = size
    with pytest.raises(ServingError) as raised:
        ndarray_from_proto(empty_but_huge, "x", Limits())
    assert raised.value.code == "INVALID_ARGUMENT" and "too large" in raised.value.message
    small = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT8)
    small.tensor_shape.dim.add().size = 1
    small.int_val.append(300)
    with pytest.raises(ServingError) as raised:
        ndarray_from_proto(small, "x", Limits())
    assert raised.value.code == "INVALID_ARGUMENT" and "DT_INT8" in raised.value.message


# ------------------------------------------------------------------ 2. token budget


def test_2_token_ids_requests_over_the_token_budget_are_resource_exhausted(server, prediction):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = "token_ids"
    request.inputs["token_ids"].CopyFrom(tf.make_tensor_proto(np.ones((64, 512), np.int32)))
    code, details = grpc_code(lambda: prediction.Predict(request, timeout=300))
    assert code == "RESOURCE_EXHAUSTED" and "32768 tokens" in details and str(TOKEN_BUDGET) in details, details
    status, _, body = rest(server, "POST", "/v1/models/tiny:predict",
                           {"signature_name": "token_ids", "inputs": {"token_ids": [[1] * 512] * 64}})
    assert status == 429 and str(TOKEN_BUDGET) in json.loads(body)["error"]
    # within the budget: served, and correct
    request.inputs["token_ids"].CopyFrom(tf.make_tensor_proto(np.arange(8 * 512, dtype=np.int32).reshape(8, 512)))
    sums = tf.make_ndarray(prediction.Predict(request, timeout=300).outputs["id_sum"])
    np.testing.assert_array_equal(sums, np.arange(8 * 512).reshape(8, 512).sum(axis=1))


# ------------------------------------------------------------------ 3. load retries, half-copied versions


def test_3_a_version_copied_file_by_file_is_retried_and_then_served(tmp_path, caplog):
    from serving.server import InferenceEngine, LoadRetryOptions, ModelSource

    source = ef.built_model(tmp_path.parent, 2)
    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    # 600 retries (5 minutes): the copy below lands while they last, however late this thread runs;
    # they cost nothing once it has (5 left 2.5 s, then the version ended instead of loading; 20 left
    # 10 s, less than a loaded machine can take between the first failure and the copy).
    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0.1,
                             load_retries=LoadRetryOptions(max_num_load_retries=600, load_retry_interval_s=0.5))
    caplog.set_level(logging.INFO, logger="serving.server.model_registry")
    engine.start()
    try:
        # a non-atomic copy: saved_model.pb first, the variables later
        os.makedirs(os.path.join(base, "2"))
        shutil.copy(os.path.join(source, "saved_model.pb"), os.path.join(base, "2", "saved_model.pb"))
        deadline = time.monotonic() + 300  # safety nets ending on the version's status: loads take TF time
        while time.monotonic() < deadline:
            status = {s["version"]: s for s in engine.model_status("tiny")}
            if 2 in status and status[2]["error_code"] != "OK":
                break
            time.sleep(0.05)
        failed = status[2]
        assert failed["state"] == "LOADING", failed  # a retry is pending
        assert failed["error_code"] not in ("OK", "UNKNOWN"), failed
        # version 1 keeps serving meanwhile
        assert engine.predict_arrays("tiny", inputs={"text": np.array([b"abc"], dtype=object)})[0] == 1
        for name in ("variables", "assets", "assets.extra", "fingerprint.pb"):
            src = os.path.join(source, name)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(base, "2", name))
            elif os.path.exists(src):
                shutil.copy(src, os.path.join(base, "2", name))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and engine.model_status("tiny", 2)[0]["state"] != "AVAILABLE":
            time.sleep(0.1)
        assert engine.model_status("tiny", 2)[0] == {"version": 2, "state": "AVAILABLE", "error_code": "OK",
                                                     "error_message": ""}
        assert engine.predict_arrays("tiny", inputs={"text": np.array([b"abc"], dtype=object)})[0] == 2
    finally:
        engine.stop(drain_timeout_s=5)
    messages = [r.getMessage() for r in caplog.records]
    for word in ("loading", "retrying in", "available", "unloading", "unloaded"):
        assert any(word in m for m in messages), (word, messages)


def test_3_a_broken_version_ends_after_the_retries_with_its_real_error(tmp_path):
    from serving.server import InferenceEngine, LoadRetryOptions, ModelSource

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1, 2: "broken"})
    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0.05,
                             load_retries=LoadRetryOptions(max_num_load_retries=2, load_retry_interval_s=0.1))
    engine.start()
    try:
        deadline = time.monotonic() + 300  # a safety net: three loads of a broken version, TF time each
        while time.monotonic() < deadline and engine.model_status("tiny", 2)[0]["state"] != "END":
            time.sleep(0.05)
        (broken,) = engine.model_status("tiny", 2)
        assert broken["state"] == "END" and broken["error_code"] == "DATA_LOSS", broken
        assert "saved_model.pb" in broken["error_message"]
        assert engine._registry.status("tiny", 2)[0].attempts == 3  # the load and 2 retries
    finally:
        engine.stop(drain_timeout_s=5)


def test_3_version_files_readiness(tmp_path):
    from serving.server.version_files import version_ready

    source = ef.built_model(tmp_path.parent, 1)
    target = tmp_path / "1"
    shutil.copytree(source, target)
    assert version_ready(str(target))
    index = target / "variables" / "variables.index"
    index.rename(tmp_path / "index")
    assert not version_ready(str(target))  # data without its index: still being copied
    (tmp_path / "index").rename(index)
    shard = next((target / "variables").glob("variables.data-*"))
    shard.rename(target / "variables" / "variables.data-00000-of-00002")
    assert not version_ready(str(target))  # shard 1 of 2 missing


# ------------------------------------------------------------------ 4 and 5. REST values and nesting


@pytest.mark.parametrize("case, body, words", [
    ("int32 overflow", {"signature_name": "token_ids", "inputs": {"token_ids": [[4294967297]]}},
     ["4294967297", "out of range", "DT_INT32"]),
    ("5,000-digit integer", b'{"instances": [' + b"9" * 5000 + b"]}", ["malformed JSON", "more than 4300 digits"]),
    ("NaN", b'{"signature_name": "scale", "instances": [[NaN, 1, 2]]}', ["NaN"]),
    ("overflowing float", b'{"signature_name": "scale", "instances": [[1e999, 1, 2]]}', ["overflows"]),
    ("float32 overflow", {"signature_name": "scale", "instances": [[1e300, 1, 2]]}, ["out of range", "DT_FLOAT"]),
    ("nesting bomb", b'{"instances": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ["nest"]),
    ("deep string", {"instances": json.loads("[" * 100 + '"a"' + "]" * 100)}, ["nested", "rank 1"]),
    ("deep object", b'{"instances": [' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"]}", ["nest"]),
    ("deep feature", {"examples": [{"text": [[["a"]]]}]}, ["flat list"]),
    ("int64 feature overflow", {"examples": [{"n": 2 ** 70}]}, ["int64"]),
    # TF Serving's FillSignature (util/json_tensor.cc) refuses a null signature_name; it ran serving_default
    ("null signature_name", {"signature_name": None, "instances": ["a"]}, ["'signature_name' must be a string", "null"]),
])
def test_4_5_rest_client_mistakes_are_400_json(server, case, body, words):
    path = "/v1/models/tiny:" + ("classify" if isinstance(body, dict) and "examples" in body else "predict")
    status, content_type, raw = rest(server, "POST", path, body)
    assert status == 400 and content_type == "application/json", (status, raw[:300])
    message = json.loads(raw)["error"]
    for word in words:
        assert word in message, (word, message)
    assert "Error" not in message and "Traceback" not in message  # no exception names
    assert rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["ok"]})[0] == 200


def test_5_huge_version_numbers_in_the_url_are_400(server):
    for path in ("/v1/models/tiny/versions/99999999999999999999999", "/v1/models/tiny/versions/9223372036854775808",
                 "/v1/models/tiny/versions/99999999999999999999999:predict"):
        method = "POST" if path.endswith(":predict") else "GET"
        status, content_type, raw = rest(server, method, path, {"instances": ["a"]} if method == "POST" else None)
        assert status == 400 and "int64" in json.loads(raw)["error"], (path, status, raw)
    status, _, raw = rest(server, "GET", "/v1/models/tiny/versions/9223372036854775807")
    assert status == 404
    # TF Serving reads the version with absl::SimpleAtoi: leading zeros are no overflow (was 400 "int64 range")
    for path in ("/v1/models/tiny/versions/00000000000000000001", "/v1/models/tiny/versions/0001"):
        status, _, raw = rest(server, "GET", path)
        assert status == 200 and json.loads(raw)["model_version_status"][0]["version"] == "1", (path, raw)
    status, _, raw = rest(server, "POST", "/v1/models/tiny/versions/000000000000000000000001:predict",
                          {"instances": ["a"]})
    assert status == 200, raw


# ------------------------------------------------------------------ 6. connections


def test_6_600_half_open_connections_leave_the_server_bounded_and_answering(tmp_path):
    from serving.server import InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    # A header deadline far beyond the test: no half-open connection is answered (408) or closed
    # by the server while the test runs, so the request below is answered beside all 600.
    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    server = EmbeddedServer(InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0), grpc_port=None,
                            rest_port=0, rest_header_timeout_s=3600.0).start()
    threads_before = thread_count()
    sockets = []
    try:
        for i in range(600):
            sock = socket.create_connection(("127.0.0.1", server.rest_port), timeout=60)
            sock.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\nContent-Le")
            sockets.append(sock)
        time.sleep(0.5)
        assert thread_count() < 300, thread_count()
        assert thread_count() - threads_before < 40
        status, _, raw = rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["answered"]})
        assert status == 200, raw
        assert json.loads(raw)["predictions"][0]["length"] == 8, raw
        # Answered while every half-open connection is still open and waiting: none was answered
        # or closed to make room (a worker per connection would have been stuck on them).
        for sock in sockets:
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
        assert thread_count() - threads_before < 40
    finally:
        for sock in sockets:
            sock.close()
        server.stop(grace_s=5)


def eventually(condition, what, seconds=60.0):
    """Waits for `condition()` (a server thread catching up), failing with `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.01)


def test_6_a_stalled_header_or_body_is_answered_408_and_closed(tmp_path):
    from serving.server import InferenceEngine, ModelSource
    from serving.server.http_server import RestServer

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0)
    engine.start()

    def rest_server(header_timeout_s, body_timeout_s):
        return RestServer(engine, port=0, header_timeout_s=header_timeout_s, body_timeout_s=body_timeout_s,
                          max_connections=3, max_request_bytes=100_000, body_budget_bytes=100_000).start()

    servers = [rest_server(1.0, 1.0)]
    try:
        fake = type("S", (), {"rest_port": servers[-1].port})
        status, body = raw_http(fake, b"GET /v1/models/tiny HTTP/1.1\r\nHost")
        assert status == 408 and "headers" in body["error"]
        status, body = raw_http(fake, b"POST /v1/models/tiny:predict HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        assert status == 408 and "body" in body["error"]
        eventually(lambda: servers[0].connections == 0, "the timed-out connections closed")

        # The caps, on a server whose timeouts never end a connection mid-check (on a loaded
        # machine, more than 1 s went by between the stalled connections and the one meant to
        # find them at the cap): each step waits for the server to hold the connections.
        servers.append(rest_server(60.0, 60.0))
        server = servers[-1]
        fake = type("S", (), {"rest_port": server.port})
        # At the cap, a stalled connection (waiting for its head) makes room for a new one ...
        stalled = []
        for _ in range(3):  # one at a time: the first is the oldest
            stalled.append(socket.create_connection(("127.0.0.1", server.port)))
            eventually(lambda: len(server._waiting) == len(stalled), "the stalled connection accepted")
        status, body = raw_http(fake, b"GET /v1/models/tiny HTTP/1.1\r\n\r\n")
        assert status == 200, body
        stalled[0].settimeout(60)
        assert stalled[0].recv(100) == b""  # the oldest was closed
        for sock in stalled:
            sock.close()
        eventually(lambda: server.connections == 0, "the stalled connections closed")
        # ... and when every connection is busy (here: reading a body), a new one is answered 503.
        busy = []
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
            busy.append(sock)
        eventually(lambda: server.connections == 3 and not server._waiting, "three bodies being read")
        status, body = raw_http(fake, b"GET /v1/models/tiny HTTP/1.1\r\n\r\n")
        assert status == 503 and "too many connections" in body["error"]
        for sock in busy:
            sock.close()

        # Large bodies in memory at once are bounded: a second 80 kB body waits (half the body
        # timeout), then 503; the first, with twice that time to send its body, still holds the budget.
        # A 30 s body timeout: the first holds the budget 15 s past the second's wait (with 4 s, a
        # loaded machine taking 2 s to send the second request saw the first time out: 408, not 503).
        servers.append(rest_server(60.0, 30.0))
        server = servers[-1]
        fake = type("S", (), {"rest_port": server.port})
        first = socket.create_connection(("127.0.0.1", server.port))
        first.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nContent-Length: 80000\r\n\r\n{")
        eventually(lambda: server._body_bytes > 0, "the first large body being read")
        status, body = raw_http(fake, b"POST /v1/models/tiny:predict HTTP/1.1\r\nContent-Length: 80000\r\n\r\n")
        assert status == 503 and "large request bodies" in body["error"]
        first.close()
    finally:
        for server in servers:
            server.stop(1)
        engine.stop(drain_timeout_s=2)


def test_6_grpc_concurrency_is_bounded_by_maximum_concurrent_rpcs(tmp_path):
    """One worker, one RPC at a time: a second concurrent RPC is RESOURCE_EXHAUSTED, never a new thread."""
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    from serving.server import BatchingOptions, InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    # a batch timeout of an hour keeps the first request waiting in the queue, holding its RPC slot,
    # until the test flushes it (with 3 s, a loaded machine could run it before the second RPC came)
    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0,
                             batching=BatchingOptions(max_batch_size=32, batch_timeout_micros=3_600_000_000))
    server = EmbeddedServer(engine, grpc_port=0, rest_port=None, grpc_workers=1, grpc_max_concurrent_rpcs=1).start()
    try:
        channel = grpc.insecure_channel(server.grpc_address)
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        first = threading.Thread(target=ok_predict, args=(stub, "first"))
        first.start()
        # queued, not a fixed 0.5 s: a loaded machine can take longer to send the first RPC
        eventually(lambda: engine._scheduler.pending() == 1, "the first request queued")
        code, details = grpc_code(lambda: ok_predict(stub, "second"))
        assert code == "RESOURCE_EXHAUSTED", details
        engine._scheduler.flush(keep_flushing=True)  # the first request runs now, later ones at once
        first.join(300)
        assert not first.is_alive()
        assert ok_predict(stub, "third").outputs["length"].tensor_content  # the slot is free again
        channel.close()
    finally:
        server.stop(grace_s=5)


# ------------------------------------------------------------------ 7. batch poisoning


def test_7_a_text_with_no_token_is_answered_and_invalid_utf8_refused_before_batching(server, prediction):
    """A text of control / format characters (no token) is a valid request: the model answers it in the
    merged batches with the others (`empty` flags it), it fails nobody. Invalid UTF-8, which the graph
    refuses, is still refused before batching, so no merged batch fails either."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    before = server.engine.batching_stats().get("batches_split", 0)
    errors, answers = [], {}

    def send(i):
        text = ("\x01\x02\u200b\x7f".encode() if i % 4 == 0 else b"bad \xff\xfe" if i % 4 == 2
                else f"text {i}".encode())
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "tiny"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([text], dtype=object)))
        try:
            answers[i] = prediction.Predict(request, timeout=300)
        except grpc.RpcError as error:
            errors.append((error.code().name, error.details()))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(answers) == 12 and len(errors) == 4
    assert all(code == "INVALID_ARGUMENT" and "invalid UTF-8" in details for code, details in errors), errors
    for i, answer in answers.items():
        text = "\x01\x02\u200b\x7f" if i % 4 == 0 else f"text {i}"
        assert tf.make_ndarray(answer.outputs["empty"]).tolist() == [i % 4 == 0]
        np.testing.assert_allclose(tf.make_ndarray(answer.outputs["probabilities"]),
                                   ef.expected_probabilities([text], 1), rtol=1e-5)
    assert server.engine.batching_stats().get("batches_split", 0) == before  # no merged batch failed


@pytest.mark.parametrize("lowercase", [False, True])
def test_7_python_text_check_agrees_with_the_tokenizer_of_the_graph(tmp_path, lowercase):
    """`has_no_token` (the rule by which `predict` marks a row `"empty": true`) is True exactly where the
    exported tokenizer finds no token (where a served row's `empty` output is True)."""
    import tensorflow as tf

    from pipelines import BertTokenizer
    from pipelines.tokenizer.tokenless import has_no_token

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##b", ",", "."]) + "\n")
    tokenizer = BertTokenizer(str(vocab), lowercase=lowercase)
    texts = ["", " ", "\t\n\r", "\x00", "\ufffd", "\x01\x02\x7f", "\u200b\u200e\ufeff", "\u00a0\u3000\u2003",
             "\u2028", "\u0085", "\x1c\x1d", "a", " ,", "\u4e00", "\U000e0001", "\u00ad", "\x00a\x00", "x\u0301"]
    tokens = tokenizer.tokenize(tf.constant(texts)).row_lengths().numpy()
    for text, count in zip(texts, tokens):
        assert has_no_token(text) == (count == 0), (repr(text), int(count))


# ------------------------------------------------------------------ 8. the HTTP layer answers JSON


@pytest.mark.parametrize("case, data, status, words", [
    ("bad request line", b"GARBAGE\r\n\r\n", 400, ["request line"]),
    ("request line too long", b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n", 414, ["request line"]),
    ("headers too large", b"GET /v1/models/tiny HTTP/1.1\r\n" + b"X-A: " + b"b" * 70_000 + b"\r\n\r\n", 431,
     ["headers"]),
    ("too many headers", b"GET /v1/models/tiny HTTP/1.1\r\n" + b"X: y\r\n" * 150 + b"\r\n", 431, ["header"]),
    ("bad header", b"GET /v1/models/tiny HTTP/1.1\r\nno colon here\r\n\r\n", 400, ["header"]),
    ("OPTIONS", b"OPTIONS /v1/models/tiny HTTP/1.1\r\n\r\n", 400, ["Malformed request: OPTIONS"]),
    ("PUT", b"PUT /v1/models/tiny HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 400, ["Malformed request: PUT"]),
    ("bad Content-Length", b"POST /v1/models/tiny:predict HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400,
     ["Content-Length"]),
    ("chunked", b"POST /v1/models/tiny:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411,
     ["Content-Length"]),
    ("outside the API", b"GET /admin HTTP/1.1\r\n\r\n", 404, ["/admin"]),
])
def test_8_http_layer_errors_are_json(server, case, data, status, words):
    got, body = raw_http(server, data)
    assert got == status, (got, body)
    for word in words:
        assert word in body["error"], (word, body)
    assert rest(server, "POST", "/v1/models/tiny:predict", {"instances": ["ok"]})[0] == 200


def test_8_head_answers_status_and_headers_without_a_body(server):
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=60) as sock:
        sock.sendall(b"HEAD /v1/models/tiny HTTP/1.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"application/json" in head and body == b""
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)
    conn.request("HEAD", "/healthz")
    response = conn.getresponse()
    assert response.status == 200 and response.read() == b""
    conn.close()


def test_8_expect_100_continue_is_honoured(server):
    body = json.dumps({"instances": ["continue"]}).encode()
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=60) as sock:
        sock.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nExpect: 100-continue\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(4096).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 ") and b'"length": 8' in data


# ------------------------------------------------------------------ 9. one acquire per request, all counted


def test_9_every_request_path_acquires_once_and_is_counted_for_drain(tmp_path):
    from serving.server import InferenceEngine, ModelSource
    from serving.server.rest_service import RestService

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0)
    engine.start()
    acquired, in_flight = [], []
    real_acquire = engine._registry.acquire

    def spy(*args):
        acquired.append(args)
        in_flight.append(engine.in_flight)
        return real_acquire(*args)

    engine._registry.acquire = spy
    service = RestService(engine)
    for method, path, body in [("POST", "/v1/models/tiny:predict", b'{"instances": ["a"]}'),
                               ("POST", "/v1/models/tiny:classify",
                                b'{"signature_name": "classification", "examples": [{"text": "a"}]}'),
                               ("POST", "/v1/models/tiny:regress",
                                b'{"signature_name": "regression", "examples": [{"text": "a"}]}'),
                               ("GET", "/v1/models/tiny/metadata", b"")]:
        acquired.clear()
        in_flight.clear()
        status, payload = service.handle(method, path, body)
        assert status == 200, payload
        assert len(acquired) == 1 and in_flight == [1], (path, acquired)  # one version, counted for drain
    # a request holding its version delays stop() until it ends
    entered, release = threading.Event(), threading.Event()

    def hold():
        with engine.servable("tiny"):
            entered.set()
            release.wait(300)  # set by the test; stop() below must find the request still held

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(60)
    assert engine.stop(drain_timeout_s=0.3) is False
    release.set()
    holder.join(60)


def test_6_a_rest_request_whose_client_closed_the_connection_is_seen_as_gone(tmp_path):
    """The REST transport tells the batcher whether a request's client still waits (as gRPC's
    `is_active` does): a closed connection is gone, an open one waits."""
    from serving.server.batching import CLIENT_ALIVE
    from serving.server.http_server import RestServer

    base = ef.make_base_path(tmp_path.parent, tmp_path / "tiny", {1: 1})
    from serving.server import InferenceEngine, ModelSource

    engine = InferenceEngine([ModelSource("tiny", base)], poll_interval_s=0)
    rest_server = RestServer(engine, port=0).start()
    arrived, release, seen = threading.Semaphore(0), threading.Event(), []

    def respond(method, target, body):  # stands in for the engine: waits, then asks
        arrived.release()
        release.wait(300)  # set by the test once the gone client has closed
        alive = CLIENT_ALIVE.get()
        # The server's event loop reads the close when it next runs: on a loaded machine that can
        # be later than any fixed sleep, so the gone client is given time to be seen as gone.
        eventually(lambda: not alive() or "gone" not in target, "the closed connection seen", seconds=60)
        seen.append((target, alive()))
        return 200, "application/json", b"{}"

    rest_server.service.respond = respond
    request = b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    try:
        gone = socket.create_connection(("127.0.0.1", rest_server.port))
        gone.sendall(request.replace(b"tiny:", b"gone:"))
        waiting = socket.create_connection(("127.0.0.1", rest_server.port))
        waiting.sendall(request.replace(b"tiny:", b"waiting:"))
        assert arrived.acquire(timeout=60) and arrived.acquire(timeout=60)
        gone.close()  # the client gave up (its timeout) while its request waits for a batch
        release.set()
        waiting.settimeout(60)
        assert waiting.recv(100).startswith(b"HTTP/1.1 200")
        waiting.close()
        # the gone request's answer may come after the waiting one's (its handler waits for the close
        # to be seen): a safety net, not 5 s
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dict(seen) == {"/v1/models/gone:predict": False, "/v1/models/waiting:predict": True}
        assert CLIENT_ALIVE.get() is None  # set per request on the pool's threads only
    finally:
        release.set()
        rest_server.stop(grace_s=1)
